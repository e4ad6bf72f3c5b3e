/*
 * test_metrics.c - unit tests for src/metrics.h: histogram buckets, merges,
 * quantiles, outcomes and the capped label table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "observe/metrics.h"

static void test_bucket_edges_are_inclusive(void **state)
{
    (void)state;
    histogram_t h;
    memset(&h, 0, sizeof h);
    hist_observe(&h, 0);       /* <= 1 ms */
    hist_observe(&h, 1);       /* <= 1 ms: an upper bound belongs to its bucket */
    hist_observe(&h, 1.0001);  /* (1, 2.5] */
    hist_observe(&h, 7200000); /* past an hour: +Inf */
    hist_observe(&h, -5);      /* a clock step backwards counts as 0 */
    hist_observe(&h, NAN);
    assert_int_equal(h.bucket[0], 4);
    assert_int_equal(h.bucket[1], 1);
    assert_int_equal(h.bucket[METRICS_NBUCKETS - 1], 1);
    assert_int_equal(h.count, 6);
}

static void test_merge_adds_everything(void **state)
{
    (void)state;
    histogram_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    hist_observe(&a, 3);
    hist_observe(&b, 3);
    hist_observe(&b, 600);
    hist_merge(&a, &b);
    assert_int_equal(a.count, 3);
    assert_true(fabs(a.sum_ms - 606) < 1e-9);
    assert_int_equal(a.bucket[2], 2); /* (2.5, 5] */
}

static void test_quantiles_interpolate_within_a_bucket(void **state)
{
    (void)state;
    histogram_t h;
    memset(&h, 0, sizeof h);
    assert_true(hist_quantile(&h, 0.5) < 0); /* empty */
    for (int i = 0; i < 100; i++) hist_observe(&h, 40); /* all in (25, 50] */
    double p50 = hist_quantile(&h, 0.5), p99 = hist_quantile(&h, 0.99);
    assert_true(p50 > 25 && p50 <= 50);
    assert_true(p99 >= p50 && p99 <= 50);
    /* 90 fast, 10 slow: p50 is fast, p95 and p99 slow */
    memset(&h, 0, sizeof h);
    for (int i = 0; i < 90; i++) hist_observe(&h, 2);
    for (int i = 0; i < 10; i++) hist_observe(&h, 4000);
    assert_true(hist_quantile(&h, 0.5) <= 2.5);
    assert_true(hist_quantile(&h, 0.95) > 2500 && hist_quantile(&h, 0.95) <= 5000);
    /* everything past the last bound reads as the last bound */
    memset(&h, 0, sizeof h);
    hist_observe(&h, 1e9);
    assert_true(hist_quantile(&h, 0.99) == METRICS_BOUNDS_MS[METRICS_NBUCKETS - 2]);
}

static void test_outcome_names_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i < OUTCOME_N; i++) assert_int_equal(outcome_from_name(outcome_name(i)), i);
    assert_int_equal(outcome_from_name("bogus"), -1);
    assert_string_equal(outcome_name(OUTCOME_TIMED_OUT), "timed_out");
}

static void test_labels_are_capped_with_other(void **state)
{
    (void)state;
    labels_t l;
    labels_init(&l, 2);
    assert_int_equal(labels_id(&l, "App\\Jobs\\A"), 0);
    assert_int_equal(labels_id(&l, "App\\Jobs\\B"), 1);
    assert_int_equal(labels_id(&l, "App\\Jobs\\A"), 0);
    assert_int_equal(labels_id(&l, "App\\Jobs\\C"), 2); /* past the cap */
    assert_int_equal(labels_id(&l, "App\\Jobs\\D"), 2);
    assert_int_equal(labels_id(&l, "other"), 2);
    assert_string_equal(labels_name(&l, 2), "other");
    assert_string_equal(labels_name(&l, 1), "App\\Jobs\\B");
    assert_int_equal(l.n, 2); /* nothing stored past the cap */
    labels_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_edges_are_inclusive),
        cmocka_unit_test(test_merge_adds_everything),
        cmocka_unit_test(test_quantiles_interpolate_within_a_bucket),
        cmocka_unit_test(test_outcome_names_round_trip),
        cmocka_unit_test(test_labels_are_capped_with_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
