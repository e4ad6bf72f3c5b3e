/*
 * test_policy.c - unit tests for src/policy.h: Laravel's Worker rules for
 * tries, retryUntil, backoff (protocol doc §5.4-§5.7), checked against the
 * PHP code quoted there.
 *
 * "attempts" passed to the policy functions is the attempt being run
 * (stored attempts + 1), as RedisJob::attempts() returns it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/payload.h"
#include "worker/policy.h"

#define NOW ((int64_t)1700000000)

/* A payload with no per-job settings (like a string job: all nulls). */
static job_payload_t plain(void)
{
    job_payload_t p;
    memset(&p, 0, sizeof p);
    return p;
}

static job_payload_t with_max_tries(long n)
{
    job_payload_t p = plain();
    p.has_max_tries = true;
    p.max_tries = n;
    return p;
}

static job_payload_t with_retry_until(int64_t ts)
{
    job_payload_t p = plain();
    p.has_retry_until = true;
    p.retry_until = ts;
    return p;
}

/* ------------------------------------------------------------ max tries */

static void test_max_tries_payload_beats_pool(void **state)
{
    (void)state;
    job_payload_t p = plain();
    assert_int_equal(policy_max_tries(&p, 5), 5);
    assert_int_equal(policy_max_tries(&p, 0), 0);
    p = with_max_tries(3);
    assert_int_equal(policy_max_tries(&p, 5), 3);
    assert_int_equal(policy_max_tries(&p, 0), 3);
    /* payload 0 = unlimited, and it still beats the pool's tries */
    p = with_max_tries(0);
    assert_int_equal(policy_max_tries(&p, 5), 0);
}

/* ------------------------------------------------------------ already exceeded (§5.4) */

static void test_already_exceeded_by_attempts(void **state)
{
    (void)state;
    job_payload_t p = plain();
    /* pool tries 3: attempts 1..3 run, the 4th is failed before running */
    assert_false(policy_already_exceeded(&p, 3, 1, NOW));
    assert_false(policy_already_exceeded(&p, 3, 3, NOW)); /* == does not fail */
    assert_true(policy_already_exceeded(&p, 3, 4, NOW));
    assert_true(policy_already_exceeded(&p, 3, 100, NOW));
    /* payload maxTries wins over the pool's */
    p = with_max_tries(1);
    assert_false(policy_already_exceeded(&p, 10, 1, NOW));
    assert_true(policy_already_exceeded(&p, 10, 2, NOW));
    /* doc §4.3: "maxTries":1,"attempts":3 was failed at once (attempt 4) */
    assert_true(policy_already_exceeded(&p, 0, 4, NOW));
    p = with_max_tries(5);
    assert_false(policy_already_exceeded(&p, 1, 5, NOW));
    assert_true(policy_already_exceeded(&p, 1, 6, NOW));
}

static void test_already_exceeded_unlimited(void **state)
{
    (void)state;
    job_payload_t p = plain();
    assert_false(policy_already_exceeded(&p, 0, 1, NOW));
    assert_false(policy_already_exceeded(&p, 0, 100000, NOW));
    p = with_max_tries(0); /* payload 0 beats pool 3 */
    assert_false(policy_already_exceeded(&p, 3, 4, NOW));
    assert_false(policy_already_exceeded(&p, 3, 100000, NOW));
}

static void test_already_exceeded_retry_until(void **state)
{
    (void)state;
    /* retryUntil in the future: never fails, whatever the attempts */
    job_payload_t p = with_retry_until(NOW + 60);
    assert_false(policy_already_exceeded(&p, 1, 1, NOW));
    assert_false(policy_already_exceeded(&p, 1, 50, NOW));
    p.has_max_tries = true;
    p.max_tries = 2;
    assert_false(policy_already_exceeded(&p, 1, 50, NOW));
    /* now == retryUntil still runs (<=) */
    p = with_retry_until(NOW);
    assert_false(policy_already_exceeded(&p, 1, 50, NOW));
    /* retryUntil in the past: fails, even on the first attempt and with unlimited tries */
    p = with_retry_until(NOW - 1);
    assert_true(policy_already_exceeded(&p, 1, 1, NOW));
    assert_true(policy_already_exceeded(&p, 0, 1, NOW));
    p.has_max_tries = true;
    p.max_tries = 0;
    assert_true(policy_already_exceeded(&p, 0, 1, NOW));
    /* a zero retryUntil counts as absent (PHP truthiness): tries apply */
    p = with_retry_until(0);
    assert_false(policy_already_exceeded(&p, 3, 3, NOW));
    assert_true(policy_already_exceeded(&p, 3, 4, NOW));
}

/* ------------------------------------------------------------ will exceed (§5.4/§5.5) */

static void test_will_exceed_by_attempts(void **state)
{
    (void)state;
    job_payload_t p = plain();
    assert_false(policy_will_exceed(&p, 3, 1, NOW));
    assert_false(policy_will_exceed(&p, 3, 2, NOW));
    assert_true(policy_will_exceed(&p, 3, 3, NOW)); /* >= */
    assert_true(policy_will_exceed(&p, 3, 4, NOW));
    assert_true(policy_will_exceed(&p, 1, 1, NOW));
    /* payload maxTries beats pool */
    p = with_max_tries(2);
    assert_false(policy_will_exceed(&p, 1, 1, NOW));
    assert_true(policy_will_exceed(&p, 1, 2, NOW));
}

static void test_will_exceed_unlimited(void **state)
{
    (void)state;
    job_payload_t p = plain();
    assert_false(policy_will_exceed(&p, 0, 1, NOW));
    assert_false(policy_will_exceed(&p, 0, 999999, NOW));
    p = with_max_tries(0);
    assert_false(policy_will_exceed(&p, 5, 999999, NOW));
}

static void test_will_exceed_retry_until(void **state)
{
    (void)state;
    job_payload_t p = with_retry_until(NOW);
    assert_true(policy_will_exceed(&p, 0, 1, NOW)); /* retryUntil <= now */
    p = with_retry_until(NOW - 100);
    assert_true(policy_will_exceed(&p, 0, 1, NOW));
    /* retryUntil in the future: maxTries is ignored */
    p = with_retry_until(NOW + 1);
    assert_false(policy_will_exceed(&p, 1, 1, NOW));
    assert_false(policy_will_exceed(&p, 1, 100, NOW));
    p.has_max_tries = true;
    p.max_tries = 1;
    assert_false(policy_will_exceed(&p, 1, 100, NOW));
}

/* Protocol doc §5.4 [verified]: tries=3, backoff=[1,2]: release 1, release 2, fail. */
static void test_verified_sequence_tries3_backoff_1_2(void **state)
{
    (void)state;
    job_payload_t p = plain();
    const int pool_backoff[] = {1, 2};
    long stored = 0;
    long released_with[2];
    int releases = 0;
    bool failed = false;
    while (!failed && releases < 10) {
        long attempt = stored + 1;
        assert_false(policy_already_exceeded(&p, 3, attempt, NOW));
        /* the job throws */
        if (policy_will_exceed(&p, 3, attempt, NOW)) {
            failed = true;
            assert_int_equal(attempt, 3);
        } else {
            released_with[releases++] = policy_backoff(&p, pool_backoff, 2, attempt);
            stored = attempt;
        }
    }
    assert_true(failed);
    assert_int_equal(releases, 2);
    assert_int_equal(released_with[0], 1);
    assert_int_equal(released_with[1], 2);
}

/* ------------------------------------------------------------ backoff (§5.7) */

static void test_backoff_payload_list(void **state)
{
    (void)state;
    job_payload_t p = plain();
    p.backoff = (char *)"10,30,60";
    const int pool[] = {99};
    assert_int_equal(policy_backoff(&p, pool, 1, 1), 10);
    assert_int_equal(policy_backoff(&p, pool, 1, 2), 30);
    assert_int_equal(policy_backoff(&p, pool, 1, 3), 60);
    assert_int_equal(policy_backoff(&p, pool, 1, 4), 60); /* last repeats */
    assert_int_equal(policy_backoff(&p, pool, 1, 50), 60);
    /* a single value */
    p.backoff = (char *)"7";
    assert_int_equal(policy_backoff(&p, pool, 1, 1), 7);
    assert_int_equal(policy_backoff(&p, pool, 1, 3), 7);
    /* payload beats pool even when it says 0 */
    p.backoff = (char *)"0";
    assert_int_equal(policy_backoff(&p, pool, 1, 1), 0);
}

static void test_backoff_php_intval_items(void **state)
{
    (void)state;
    job_payload_t p = plain();
    p.backoff = (char *)" 5, 7";
    assert_int_equal(policy_backoff(&p, NULL, 0, 1), 5);
    assert_int_equal(policy_backoff(&p, NULL, 0, 2), 7);
    assert_int_equal(policy_backoff(&p, NULL, 0, 3), 7);
    /* (int) of garbage is 0, of "12s" is 12 */
    p.backoff = (char *)"12s,abc";
    assert_int_equal(policy_backoff(&p, NULL, 0, 1), 12);
    assert_int_equal(policy_backoff(&p, NULL, 0, 2), 0);
    assert_int_equal(policy_backoff(&p, NULL, 0, 3), 0);
    /* empty elements are (int)"" = 0 */
    p.backoff = (char *)"4,,8";
    assert_int_equal(policy_backoff(&p, NULL, 0, 1), 4);
    assert_int_equal(policy_backoff(&p, NULL, 0, 2), 0);
    assert_int_equal(policy_backoff(&p, NULL, 0, 3), 8);
}

static void test_backoff_pool_list(void **state)
{
    (void)state;
    job_payload_t p = plain(); /* backoff null */
    const int pool[] = {1, 2};
    assert_int_equal(policy_backoff(&p, pool, 2, 1), 1);
    assert_int_equal(policy_backoff(&p, pool, 2, 2), 2);
    assert_int_equal(policy_backoff(&p, pool, 2, 3), 2);
    assert_int_equal(policy_backoff(&p, pool, 2, 100), 2);
    const int zero[] = {0};
    assert_int_equal(policy_backoff(&p, zero, 1, 1), 0);
    assert_int_equal(policy_backoff(&p, zero, 1, 5), 0);
    /* no list at all: no delay */
    assert_int_equal(policy_backoff(&p, NULL, 0, 1), 0);
}

static void test_backoff_delay_field(void **state)
{
    (void)state;
    const int pool[] = {1, 2};
    /* 12.11+: backoff null, delay set -> delay is the backoff */
    job_payload_t p = plain();
    p.has_delay = true;
    p.delay = 15;
    assert_int_equal(policy_backoff(&p, pool, 2, 1), 15);
    assert_int_equal(policy_backoff(&p, pool, 2, 2), 15);
    assert_int_equal(policy_backoff(&p, pool, 2, 7), 15);
    /* backoff beats delay */
    p.backoff = (char *)"3,4";
    assert_int_equal(policy_backoff(&p, pool, 2, 1), 3);
    assert_int_equal(policy_backoff(&p, pool, 2, 2), 4);
}

/* The same rules fed from real payload text. */
static void test_backoff_from_parsed_payloads(void **state)
{
    (void)state;
    const int pool[] = {1, 2};
    char err[128];
    job_payload_t p;

    static const char with_backoff[] =
        "{\"job\":\"X@y\",\"backoff\":\"10,30,60\",\"maxTries\":3,\"attempts\":0}";
    assert_int_equal(payload_parse(with_backoff, strlen(with_backoff), &p, err, sizeof err), 0);
    assert_int_equal(policy_backoff(&p, pool, 2, 1), 10);
    assert_int_equal(policy_backoff(&p, pool, 2, 3), 60);
    assert_int_equal(policy_max_tries(&p, 1), 3);
    payload_free(&p);

    /* backoff null and delay null (12.11+ push): pool list */
    static const char nulls[] = "{\"job\":\"X@y\",\"backoff\":null,\"attempts\":0,\"delay\":null}";
    assert_int_equal(payload_parse(nulls, strlen(nulls), &p, err, sizeof err), 0);
    assert_int_equal(policy_backoff(&p, pool, 2, 1), 1);
    assert_int_equal(policy_backoff(&p, pool, 2, 3), 2);
    assert_int_equal(policy_max_tries(&p, 4), 4);
    payload_free(&p);

    /* backoff null, delay 30 (12.11+ later()): 30 */
    static const char delayed[] = "{\"job\":\"X@y\",\"backoff\":null,\"attempts\":0,\"delay\":30}";
    assert_int_equal(payload_parse(delayed, strlen(delayed), &p, err, sizeof err), 0);
    assert_int_equal(policy_backoff(&p, pool, 2, 1), 30);
    assert_int_equal(policy_backoff(&p, pool, 2, 2), 30);
    payload_free(&p);
}

/* ------------------------------------------------------------ php_intval */

static void test_php_intval(void **state)
{
    (void)state;
    assert_int_equal(php_intval("12abc"), 12);
    assert_int_equal(php_intval("abc"), 0);
    assert_int_equal(php_intval(" -3"), -3);
    assert_int_equal(php_intval(""), 0);
    assert_int_equal(php_intval("42"), 42);
    assert_int_equal(php_intval("+4"), 4);
    assert_int_equal(php_intval("007"), 7);
    assert_int_equal(php_intval("\t\n 9"), 9);
    assert_int_equal(php_intval("3.9"), 3);
    assert_int_equal(php_intval("- 3"), 0);
    assert_int_equal(php_intval("-"), 0);
    assert_int_equal(php_intval("5 "), 5);
}

/* ------------------------------------------------------------ failure texts */

static void test_failure_texts(void **state)
{
    (void)state;
    char *t = policy_text_max_attempts("App\\Jobs\\TestJob");
    assert_string_equal(t, "Illuminate\\Queue\\MaxAttemptsExceededException: App\\Jobs\\TestJob has been "
                           "attempted too many times or run too long. The job may have previously timed out.");
    free(t);
    t = policy_text_timeout("App\\Jobs\\TestJob");
    assert_string_equal(t, "Illuminate\\Queue\\TimeoutExceededException: App\\Jobs\\TestJob has timed out.");
    free(t);
}

static void test_prefetch_pace_is_a_moving_average(void **state)
{
    (void)state;
    double pace = 0;
    pace = policy_prefetch_pace(pace, 40);
    assert_true(pace == 10.0);
    pace = policy_prefetch_pace(pace, 0);
    assert_true(pace == 7.5);
    for (int i = 0; i < 40; i++) pace = policy_prefetch_pace(pace, 0);
    assert_true(pace < 0.01);
    /* alternating 1 and 30 ms jobs settle near 15 ms: one at a time, no churn */
    for (int i = 0; i < 40; i++) pace = policy_prefetch_pace(policy_prefetch_pace(pace, 1), 30);
    assert_int_equal(policy_prefetch_want(8, 1, policy_prefetch_pace(pace, 1)), 1);
}

static void test_prefetch_want_shrinks_as_jobs_slow_down(void **state)
{
    (void)state;
    assert_int_equal(policy_prefetch_want(1, 0, 0), 1);
    assert_int_equal(policy_prefetch_want(8, 0, 0), 8);     /* under a millisecond: the whole prefetch */
    assert_int_equal(policy_prefetch_want(8, 1, 0.9), 8);
    assert_int_equal(policy_prefetch_want(8, 1, 1.0), 8);   /* 20 fit, prefetch caps */
    assert_int_equal(policy_prefetch_want(8, 5, 5.0), 4);   /* 20 ms of 5 ms jobs */
    assert_int_equal(policy_prefetch_want(8, 10, 10.0), 2);
    assert_int_equal(policy_prefetch_want(8, 11, 11.0), 1);
    assert_int_equal(policy_prefetch_want(8, 30, 25.0), 1);
    assert_int_equal(policy_prefetch_want(64, PREFETCH_MAX_JOB_MS, 0), 1); /* after a slow job, whatever the pace */
    assert_int_equal(policy_prefetch_want(64, 1, 1.0), PREFETCH_BATCH_MS);
    assert_int_equal(policy_prefetch_want(64, 0, 0.9), 22); /* not 64: 63 held would go back after every job */
    assert_false(policy_prefetch_give_back(22 + 21, 0, 0.9));  /* a batch held and the next in flight */
}

static void test_prefetch_give_back_when_held_jobs_would_wait(void **state)
{
    (void)state;
    assert_false(policy_prefetch_give_back(0, 500, 500));    /* nothing held */
    assert_false(policy_prefetch_give_back(12, 0, 0));       /* quick jobs: keep the batch */
    assert_false(policy_prefetch_give_back(12, 3, 3.0));     /* 36 ms of waiting */
    assert_true(policy_prefetch_give_back(5, 10, 10.0));     /* 50 ms */
    assert_false(policy_prefetch_give_back(1, 40, 40.0));    /* one, 40 ms */
    assert_true(policy_prefetch_give_back(2, 40, 40.0));
    assert_false(policy_prefetch_give_back(2, 40, 10.0));    /* one slower job among quick ones */
    assert_true(policy_prefetch_give_back(1, PREFETCH_MAX_JOB_MS, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_tries_payload_beats_pool),
        cmocka_unit_test(test_already_exceeded_by_attempts),
        cmocka_unit_test(test_already_exceeded_unlimited),
        cmocka_unit_test(test_already_exceeded_retry_until),
        cmocka_unit_test(test_will_exceed_by_attempts),
        cmocka_unit_test(test_will_exceed_unlimited),
        cmocka_unit_test(test_will_exceed_retry_until),
        cmocka_unit_test(test_verified_sequence_tries3_backoff_1_2),
        cmocka_unit_test(test_backoff_payload_list),
        cmocka_unit_test(test_backoff_php_intval_items),
        cmocka_unit_test(test_backoff_pool_list),
        cmocka_unit_test(test_backoff_delay_field),
        cmocka_unit_test(test_backoff_from_parsed_payloads),
        cmocka_unit_test(test_php_intval),
        cmocka_unit_test(test_failure_texts),
        cmocka_unit_test(test_prefetch_pace_is_a_moving_average),
        cmocka_unit_test(test_prefetch_want_shrinks_as_jobs_slow_down),
        cmocka_unit_test(test_prefetch_give_back_when_held_jobs_would_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
