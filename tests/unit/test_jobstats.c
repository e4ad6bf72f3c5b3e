/*
 * test_jobstats.c - per (queue, class, outcome) job stats and the line a
 * worker sends its master (src/jobstats.h): round trip, class cap, and
 * strict refusal of anything else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/jobstats.h"

static char *QUEUES[] = {"high", "default"};

static void test_round_trip(void **state)
{
    (void)state;
    jobstats_t w, m;
    jobstats_init(&w, 10);
    jobstats_init(&m, 10);
    jobstats_record(&w, "default", "App\\Jobs\\A", OUTCOME_DONE, 3, 40);
    jobstats_record(&w, "default", "App\\Jobs\\A", OUTCOME_DONE, 7, -1); /* wait unknown */
    jobstats_record(&w, "high", "App\\Jobs\\B", OUTCOME_FAILED, 2000, 0.5);
    size_t len;
    int from = 0;
    char *line = jobstats_encode(&w, &from, 100, &len);
    assert_int_equal(from, 0);
    assert_int_equal(line[len - 1], '\n');
    char err[128];
    assert_int_equal(jobstats_decode(line, len - 1, QUEUES, 2, &m, err, sizeof err), 2);
    assert_int_equal(jobstats_decode(line, len - 1, QUEUES, 2, &m, err, sizeof err), 2); /* adds up */
    free(line);
    uint64_t n;
    histogram_t rt, wt;
    jobstats_sum(&m, "default", "App\\Jobs\\A", OUTCOME_DONE, &n, &rt, &wt);
    assert_int_equal(n, 4);
    assert_int_equal(rt.count, 4);
    assert_int_equal(wt.count, 2);
    assert_true(rt.sum_ms == 20);
    jobstats_sum(&m, NULL, NULL, OUTCOME_FAILED, &n, &rt, NULL);
    assert_int_equal(n, 2);
    assert_int_equal(rt.bucket[10], 2); /* 2000 ms: (1000, 2500] */
    jobstats_clear(&w);
    assert_true(jobstats_empty(&w));
    jobstats_free(&w);
    jobstats_free(&m);
}

static void test_class_cap(void **state)
{
    (void)state;
    jobstats_t s;
    jobstats_init(&s, 2);
    char name[32];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof name, "Job%d", i);
        jobstats_record(&s, "high", name, OUTCOME_DONE, 1, 1);
    }
    uint64_t n;
    jobstats_sum(&s, NULL, LABEL_OTHER, -1, &n, NULL, NULL);
    assert_int_equal(n, 48);
    assert_true(s.n <= 3);
    jobstats_free(&s);
}

static const char *const BAD[] = {
    "",
    "[]",
    "{\"s\":{}}",
    "{\"s\":[1]}",
    /* unknown queue */
    "{\"s\":[{\"q\":\"nope\",\"j\":\"A\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    /* unknown outcome */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"won\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    /* runtime histogram does not add up to n */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":5,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    /* more waits than jobs */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    /* short histogram */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":1,\"r\":[1],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    /* negative and fractional counts, negative sum */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":-1,\"r\":[-1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":0.5,\"r\":[0.5,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":-1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    /* an extra key */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0,\"x\":1}]}",
    /* sums no job count can reach: merged, they made the totals infinite */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1e308,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":5e15}]}",
    /* counts past any second's work */
    "{\"s\":[{\"q\":\"high\",\"j\":\"A\",\"o\":\"done\",\"n\":1e11,\"r\":[1e11,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
    /* empty class name */
    "{\"s\":[{\"q\":\"high\",\"j\":\"\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
    "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}",
};

static void test_refuses_what_it_did_not_write(void **state)
{
    (void)state;
    jobstats_t m;
    jobstats_init(&m, 10);
    char err[128];
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        err[0] = '\0';
        assert_int_equal(jobstats_decode(BAD[i], strlen(BAD[i]), QUEUES, 2, &m, err, sizeof err), -1);
        assert_true(err[0] != '\0');
    }
    assert_true(jobstats_empty(&m)); /* nothing half-added */
    jobstats_free(&m);
}

/* A producer's very long displayName is cut (at a character boundary),
 * not a reason for the master to refuse the worker's whole second. */
static void test_a_long_class_name_is_cut_not_refused(void **state)
{
    (void)state;
    char name[400];
    memset(name, 'A', sizeof name);
    memcpy(name + 254, "\xc3\xa9", 2); /* an "e acute" across the cut (255) */
    name[sizeof name - 1] = '\0';
    jobstats_t w, m;
    jobstats_init(&w, 10);
    jobstats_init(&m, 10);
    jobstats_record(&w, "high", name, OUTCOME_DONE, 5, -1);
    jobstats_record(&w, "high", "Short", OUTCOME_DONE, 5, -1);
    int from = 0;
    size_t len;
    char *line = jobstats_encode(&w, &from, 100, &len);
    char err[128] = "";
    assert_int_equal(jobstats_decode(line, len, QUEUES, 2, &m, err, sizeof err), 2);
    const char *cut = labels_name(&m.classes, m.v[0].job);
    assert_int_equal(strlen(cut), 254);
    assert_int_equal(strncmp(cut, name, 254), 0);
    free(line);
    jobstats_free(&w);
    jobstats_free(&m);
}


/* Review #4: a class name that is not valid UTF-8 is repaired when the
 * worker records it; the master refuses one that is not. */
static void test_class_names_are_valid_utf8(void **state)
{
    (void)state;
    jobstats_t s;
    jobstats_init(&s, 10);
    jobstats_record(&s, "high", "App\\X\xff\xfe", OUTCOME_DONE, 1, 1);
    assert_string_equal(labels_name(&s.classes, s.v[0].job), "App\\X\xef\xbf\xbd\xef\xbf\xbd");
    int from = 0;
    size_t len;
    char *line = jobstats_encode(&s, &from, 100, &len);
    jobstats_t m;
    jobstats_init(&m, 10);
    char err[128];
    assert_int_equal(jobstats_decode(line, len - 1, QUEUES, 2, &m, err, sizeof err), 1);
    free(line);
    static const char bad[] =
        "{\"s\":[{\"q\":\"high\",\"j\":\"A\xff\",\"o\":\"done\",\"n\":1,\"r\":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"rs\":1,"
        "\"w\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],\"ws\":0}]}";
    assert_int_equal(jobstats_decode(bad, strlen(bad), QUEUES, 2, &m, err, sizeof err), -1);
    jobstats_free(&m);
    jobstats_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_class_names_are_valid_utf8),
        cmocka_unit_test(test_class_cap),
        cmocka_unit_test(test_refuses_what_it_did_not_write),
        cmocka_unit_test(test_a_long_class_name_is_cut_not_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
