/*
 * test_alerts.c - when alerts fire and resolve (src/alerts.h): once per
 * episode, resolved only after clear_after_s of calm, per-queue thresholds,
 * the failure-rate floor, crash loops in a window, counter resets, and the
 * exact JSON of an event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/alerts.h"

#define T0 1700000000000LL /* ms; pass times below are seconds after it */

static alerts_conf_t conf(void)
{
    alerts_conf_t c;
    alerts_conf_defaults(&c);
    return c;
}

/* One pass at T0 + s seconds; the events it appended (caller deletes). */
static cJSON *pass_q(alerts_t *a, const alerts_conf_t *c, double s, const alert_queue_obs_t *qs, int nq)
{
    cJSON *ev = cJSON_CreateArray();
    int n = alerts_observe(a, c, T0 + (int64_t)(s * 1000), qs, nq, NULL, 0, ev);
    assert_int_equal(n, cJSON_GetArraySize(ev));
    return ev;
}

static cJSON *pass_p(alerts_t *a, const alerts_conf_t *c, double s, const alert_pool_obs_t *ps, int np)
{
    cJSON *ev = cJSON_CreateArray();
    int n = alerts_observe(a, c, T0 + (int64_t)(s * 1000), NULL, 0, ps, np, ev);
    assert_int_equal(n, cJSON_GetArraySize(ev));
    return ev;
}

/* The number of events in a pass (then deleted). */
static int count(cJSON *ev)
{
    int n = cJSON_GetArraySize(ev);
    cJSON_Delete(ev);
    return n;
}

/* A one-queue pass of pool "web", queue "high". */
static int wait_pass(alerts_t *a, const alerts_conf_t *c, double s, double p95, double oldest)
{
    alert_queue_obs_t q = {"web", "high", p95, oldest};
    return count(pass_q(a, c, s, &q, 1));
}

static const char *str(const cJSON *ev, int i, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ev, i), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num(const cJSON *ev, int i, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ev, i), key);
    return cJSON_IsNumber(v) ? v->valuedouble : -12345;
}

static void test_fires_once_resolves_after_clear(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    alerts_t *a = alerts_new();
    assert_int_equal(wait_pass(a, &c, 0, 10, 0), 0);
    assert_int_equal(wait_pass(a, &c, 10, 90, 0), 1);
    for (int s = 20; s <= 100; s += 10) assert_int_equal(wait_pass(a, &c, s, 90 + s, 0), 0); /* sustained */
    assert_int_equal(alerts_open(a), 1);
    assert_int_equal(wait_pass(a, &c, 110, 5, 0), 0);   /* calm from 110 */
    assert_int_equal(wait_pass(a, &c, 169.9, 5, 0), 0); /* 59.9 s of it */
    alert_queue_obs_t q = {"web", "high", 4, 0};
    cJSON *ev = pass_q(a, &c, 170, &q, 1);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "state"), "resolved");
    assert_true(num(ev, 0, "value") == 4); /* the last value */
    assert_true(num(ev, 0, "since") == 1700000010);
    assert_true(num(ev, 0, "at") == 1700000170);
    cJSON_Delete(ev);
    assert_int_equal(alerts_open(a), 0);
    assert_int_equal(wait_pass(a, &c, 180, 5, 0), 0);
    assert_int_equal(wait_pass(a, &c, 190, 61, 0), 1); /* a new episode */
    alerts_free(a);
}

static void test_flap_keeps_the_episode(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    alerts_t *a = alerts_new();
    assert_int_equal(wait_pass(a, &c, 0, 90, 0), 1);
    assert_int_equal(wait_pass(a, &c, 10, 5, 0), 0);  /* calm from 10 */
    assert_int_equal(wait_pass(a, &c, 65, 5, 0), 0);
    assert_int_equal(wait_pass(a, &c, 69, 90, 0), 0); /* breach again before 60 s: no resolve, no re-fire */
    assert_int_equal(wait_pass(a, &c, 75, 5, 0), 0);  /* calm from 75 */
    assert_int_equal(wait_pass(a, &c, 134, 5, 0), 0); /* 59 s: would have resolved if counted from 10 */
    alert_queue_obs_t q = {"web", "high", 5, 0};
    cJSON *ev = pass_q(a, &c, 135, &q, 1);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "state"), "resolved");
    assert_true(num(ev, 0, "since") == 1700000000); /* the first episode's start */
    cJSON_Delete(ev);
    alerts_free(a);
}

static void test_clear_after_zero_resolves_at_once(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    c.clear_after_s = 0;
    alerts_t *a = alerts_new();
    assert_int_equal(wait_pass(a, &c, 0, 90, 0), 1);
    assert_int_equal(wait_pass(a, &c, 1, 59, 0), 1);
    alerts_free(a);
}

static void test_override_beats_default_and_zero_disables(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    c.nwaits = 2;
    c.waits = calloc(2, sizeof *c.waits);
    c.waits[0] = (alert_wait_rule_t){strdup("high"), 5};
    c.waits[1] = (alert_wait_rule_t){strdup("bulk"), 0};
    assert_true(alerts_wait_threshold(&c, "high") == 5);
    assert_true(alerts_wait_threshold(&c, "bulk") == 0);
    assert_true(alerts_wait_threshold(&c, "emails") == 60);
    alerts_t *a = alerts_new();
    alert_queue_obs_t qs[] = {
        {"web", "high", 10, 0},     /* over its 5 */
        {"web", "default", 30, 0},  /* under the default 60 */
        {"web", "bulk", 10000, 0},  /* off */
        {"web", "emails", 61, 0},   /* over the default */
    };
    cJSON *ev = pass_q(a, &c, 0, qs, 4);
    assert_int_equal(cJSON_GetArraySize(ev), 2);
    assert_string_equal(str(ev, 0, "queue"), "high");
    assert_true(num(ev, 0, "threshold") == 5);
    assert_string_equal(str(ev, 1, "queue"), "emails");
    assert_true(num(ev, 1, "threshold") == 60);
    cJSON_Delete(ev);
    c.long_wait_s = 0; /* the default off: emails' episode resolves at once, high's stays */
    ev = pass_q(a, &c, 1, qs, 4);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "queue"), "emails");
    assert_string_equal(str(ev, 0, "state"), "resolved");
    cJSON_Delete(ev);
    assert_int_equal(alerts_open(a), 1);
    alerts_free(a);
    alerts_conf_free(&c);
    assert_int_equal(c.nwaits, 0);
    assert_null(c.waits);
}

static void test_oldest_ready_and_unknown(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    alerts_t *a = alerts_new();
    alert_queue_obs_t q = {"web", "high", -1, 120};
    cJSON *ev = pass_q(a, &c, 0, &q, 1);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "measure"), "oldest_ready");
    assert_true(num(ev, 0, "value") == 120);
    cJSON_Delete(ev);
    alerts_free(a);

    a = alerts_new(); /* both known: the larger */
    q = (alert_queue_obs_t){"web", "high", 70, 10};
    ev = pass_q(a, &c, 0, &q, 1);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "measure"), "wait_p95");
    assert_true(num(ev, 0, "value") == 70);
    cJSON_Delete(ev);
    /* nothing known: no evidence of a breach, so it clears; the last known value is given */
    assert_int_equal(wait_pass(a, &c, 10, -1, -1), 0);
    q = (alert_queue_obs_t){"web", "high", -1, -1};
    ev = pass_q(a, &c, 70, &q, 1);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "state"), "resolved");
    assert_true(num(ev, 0, "value") == 70);
    cJSON_Delete(ev);
    assert_int_equal(wait_pass(a, &c, 80, -1, -1), 0); /* unknown never fires */
    alerts_free(a);
}

static int fail_pass(alerts_t *a, const alerts_conf_t *c, double s, uint64_t finished, uint64_t failed)
{
    alert_pool_obs_t p = {"web", finished, failed, 0};
    return count(pass_p(a, c, s, &p, 1));
}

static void test_failure_rate(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.failure_rate = 0.5;
    alerts_t *a = alerts_new();
    assert_int_equal(fail_pass(a, &c, 0, 19, 19), 0); /* under failure_min_jobs */
    assert_int_equal(fail_pass(a, &c, 1, 0, 0), 0);
    assert_int_equal(fail_pass(a, &c, 2, 20, 9), 0);
    alert_pool_obs_t p = {"web", 20, 10, 0};
    cJSON *ev = pass_p(a, &c, 3, &p, 1);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "alert"), "failure_rate");
    assert_string_equal(str(ev, 0, "measure"), "failure_rate");
    assert_true(num(ev, 0, "value") == 0.5);
    assert_true(num(ev, 0, "threshold") == 0.5);
    assert_null(str(ev, 0, "queue"));
    cJSON_Delete(ev);
    assert_int_equal(fail_pass(a, &c, 4, 100, 90), 0);
    c.failure_rate = 0; /* turned off: resolves at once */
    assert_int_equal(fail_pass(a, &c, 5, 100, 90), 1);
    assert_int_equal(alerts_open(a), 0);
    assert_int_equal(fail_pass(a, &c, 6, 100, 90), 0);
    alerts_free(a);
}

static int crash_pass(alerts_t *a, const alerts_conf_t *c, double s, uint64_t total)
{
    alert_pool_obs_t p = {"web", 0, 0, total};
    return count(pass_p(a, c, s, &p, 1));
}

static void test_crash_loop_in_window(void **state)
{
    (void)state;
    alerts_conf_t c = conf(); /* 5 in 300 s */
    alerts_t *a = alerts_new();
    assert_int_equal(crash_pass(a, &c, 0, 100), 0); /* the first pass is a baseline */
    assert_int_equal(crash_pass(a, &c, 10, 104), 0); /* N-1 */
    assert_int_equal(crash_pass(a, &c, 20, 104), 0);
    alert_pool_obs_t p = {"web", 0, 0, 105};
    cJSON *ev = pass_p(a, &c, 30, &p, 1);
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    assert_string_equal(str(ev, 0, "alert"), "crash_loop");
    assert_string_equal(str(ev, 0, "measure"), "crashes");
    assert_true(num(ev, 0, "value") == 5);
    assert_true(num(ev, 0, "threshold") == 5);
    cJSON_Delete(ev);
    assert_int_equal(crash_pass(a, &c, 300, 105), 0); /* the four of 10 s are still within 300 s */
    assert_int_equal(crash_pass(a, &c, 310, 105), 0); /* now out: calm from 310 */
    assert_int_equal(crash_pass(a, &c, 369, 105), 0);
    assert_int_equal(crash_pass(a, &c, 370, 105), 1);
    alerts_free(a);

    a = alerts_new(); /* one crash every 100 s: never 5 in 300 s */
    for (int i = 0; i <= 10; i++) assert_int_equal(crash_pass(a, &c, 100 * i, (uint64_t)i), 0);
    alerts_free(a);

    a = alerts_new(); /* a huge jump is a loop, and stores at most N times */
    assert_int_equal(crash_pass(a, &c, 0, 0), 0);
    assert_int_equal(crash_pass(a, &c, 1, 1000000), 1);
    c.crash_loop_crashes = 0; /* off: resolves at once */
    assert_int_equal(crash_pass(a, &c, 2, 1000001), 1);
    assert_int_equal(crash_pass(a, &c, 3, 1000002), 0);
    alerts_free(a);
}

static void test_counter_reset_does_not_fire(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    alerts_t *a = alerts_new();
    assert_int_equal(crash_pass(a, &c, 0, 10), 0);
    assert_int_equal(crash_pass(a, &c, 10, 14), 0); /* 4 crashes */
    assert_int_equal(crash_pass(a, &c, 20, 2), 0);  /* recreated: no underflow into a loop */
    assert_int_equal(crash_pass(a, &c, 30, 3), 0);  /* 1 new crash; the old 4 were forgotten */
    assert_int_equal(crash_pass(a, &c, 40, 6), 0);  /* 4 since the reset */
    assert_int_equal(crash_pass(a, &c, 50, 7), 1);  /* 5 */
    alerts_free(a);
}

static void test_event_json_exact(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    c.crash_loop_crashes = 2;
    c.clear_after_s = 0;
    alerts_t *a = alerts_new();
    alert_queue_obs_t q = {"web", "high", 1, 3};
    alert_pool_obs_t p = {"web", 0, 0, 0};
    cJSON *ev = cJSON_CreateArray();
    assert_int_equal(alerts_observe(a, &c, T0 + 10999, &q, 1, &p, 1, ev), 0);
    p.crashes_total = 2;
    q.wait_p95_s = 90.5;
    assert_int_equal(alerts_observe(a, &c, T0 + 11999, &q, 1, &p, 1, ev), 2);
    q.wait_p95_s = 1;
    assert_int_equal(alerts_observe(a, &c, T0 + 80000, &q, 1, &p, 1, ev), 1); /* 2 crashes still in 300 s */
    char *js = cJSON_PrintUnformatted(ev);
    assert_string_equal(js,
                        "[{\"alert\":\"long_wait\",\"state\":\"firing\",\"pool\":\"web\",\"queue\":\"high\","
                        "\"value\":90.5,\"threshold\":60,\"measure\":\"wait_p95\",\"since\":1700000011,"
                        "\"at\":1700000011},"
                        "{\"alert\":\"crash_loop\",\"state\":\"firing\",\"pool\":\"web\","
                        "\"value\":2,\"threshold\":2,\"measure\":\"crashes\",\"since\":1700000011,"
                        "\"at\":1700000011},"
                        "{\"alert\":\"long_wait\",\"state\":\"resolved\",\"pool\":\"web\",\"queue\":\"high\","
                        "\"value\":3,\"threshold\":60,\"measure\":\"oldest_ready\",\"since\":1700000011,"
                        "\"at\":1700000080}]");
    free(js);
    cJSON_Delete(ev);
    alerts_free(a);
}

static void test_gone_resolves_and_forgets(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    alerts_t *a = alerts_new();
    alert_queue_obs_t qs[] = {{"web", "high", 90, 0}, {"web", "low", 90, 0}};
    alert_pool_obs_t ps[] = {{"web", 0, 0, 0}, {"mail", 0, 0, 0}};
    cJSON *ev = cJSON_CreateArray();
    assert_int_equal(alerts_observe(a, &c, T0, qs, 2, ps, 2, ev), 2);
    ps[1].crashes_total = 5;
    assert_int_equal(alerts_observe(a, &c, T0 + 1000, qs, 2, ps, 2, ev), 1); /* mail loops */
    assert_int_equal(alerts_open(a), 3);
    /* low and mail are gone: resolved on this pass, not clear_after_s later */
    assert_int_equal(alerts_observe(a, &c, T0 + 2000, qs, 1, ps, 1, ev), 2);
    assert_string_equal(str(ev, 3, "state"), "resolved");
    assert_string_equal(str(ev, 4, "state"), "resolved");
    assert_int_equal(alerts_open(a), 1);
    /* mail comes back with a higher count: a fresh baseline, not 5 crashes */
    ps[1].crashes_total = 10;
    assert_int_equal(alerts_observe(a, &c, T0 + 3000, qs, 1, ps, 2, ev), 0);
    cJSON_Delete(ev);
    alerts_free(a);
}

static void test_bad_input(void **state)
{
    (void)state;
    alerts_conf_t c = conf();
    c.long_wait_s = 60;
    alerts_t *a = alerts_new();
    alert_queue_obs_t ok = {"web", "high", 90, 0};
    alert_queue_obs_t dup[] = {{"web", "high", 1, 0}, {"web", "high", 90, 0}};
    alert_queue_obs_t noname = {"web", NULL, 90, 0};
    alert_queue_obs_t empty = {"", "high", 90, 0};
    alert_pool_obs_t pdup[] = {{"web", 0, 0, 0}, {"web", 0, 0, 0}};
    cJSON *ev = cJSON_CreateArray(), *obj = cJSON_CreateObject();
    assert_int_equal(alerts_observe(a, &c, T0, &ok, -1, NULL, 0, ev), -1);
    assert_int_equal(alerts_observe(a, &c, T0, NULL, 1, NULL, 0, ev), -1);
    assert_int_equal(alerts_observe(a, &c, T0, dup, 2, NULL, 0, ev), -1);
    assert_int_equal(alerts_observe(a, &c, T0, &noname, 1, NULL, 0, ev), -1);
    assert_int_equal(alerts_observe(a, &c, T0, &empty, 1, NULL, 0, ev), -1);
    assert_int_equal(alerts_observe(a, &c, T0, NULL, 0, pdup, 2, ev), -1);
    assert_int_equal(alerts_observe(a, &c, T0, &ok, 1, NULL, 0, obj), -1);
    assert_int_equal(alerts_observe(a, &c, T0, &ok, 1, NULL, 0, NULL), -1);
    alerts_conf_t bad[6];
    for (int i = 0; i < 6; i++) bad[i] = c;
    bad[0].failure_rate = 1.5;
    bad[1].crash_loop_crashes = ALERTS_CRASHES_MAX + 1;
    bad[2].crash_loop_window_s = 0;
    bad[3].clear_after_s = -1;
    bad[4].long_wait_s = -1;
    bad[5].nwaits = 1; /* and no rules */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(alerts_conf_check(&bad[i]), -1);
        assert_int_equal(alerts_observe(a, &bad[i], T0, &ok, 1, NULL, 0, ev), -1);
    }
    assert_int_equal(cJSON_GetArraySize(ev), 0); /* nothing appended, nothing opened */
    assert_int_equal(alerts_open(a), 0);
    assert_int_equal(alerts_conf_check(&c), 0);
    assert_int_equal(alerts_observe(a, &c, T0, &ok, 1, NULL, 0, ev), 1);
    cJSON_Delete(ev);
    cJSON_Delete(obj);
    alerts_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fires_once_resolves_after_clear),
        cmocka_unit_test(test_flap_keeps_the_episode),
        cmocka_unit_test(test_clear_after_zero_resolves_at_once),
        cmocka_unit_test(test_override_beats_default_and_zero_disables),
        cmocka_unit_test(test_oldest_ready_and_unknown),
        cmocka_unit_test(test_failure_rate),
        cmocka_unit_test(test_crash_loop_in_window),
        cmocka_unit_test(test_counter_reset_does_not_fire),
        cmocka_unit_test(test_event_json_exact),
        cmocka_unit_test(test_gone_resolves_and_forgets),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
