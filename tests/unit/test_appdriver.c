/*
 * test_appdriver.c - unit tests for src/worker/appdriver.h: the pop request
 * of an app_driver pool and the reading of the handler's report.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "worker/appdriver.h"

static pool_conf_t pool_of(char **queues, int *backoff, int nbackoff)
{
    pool_conf_t p;
    memset(&p, 0, sizeof p);
    p.queue_connection = "database";
    p.queues = queues;
    p.tries = 2;
    p.timeout = 30;
    p.backoff = backoff;
    p.nbackoff = nbackoff;
    return p;
}

static void test_request_names_the_connection_queues_and_options(void **state)
{
    (void)state;
    char *queues[] = {"high", "default", NULL};
    int backoff[] = {1, 5};
    pool_conf_t p = pool_of(queues, backoff, 2);
    char *r = appdriver_request(&p, 0);
    assert_string_equal(r, "\"connection\":\"database\",\"queues\":[\"high\",\"default\"],\"tries\":2,\"timeout\":30,"
                           "\"backoff\":[1,5]");
    free(r);
}

static void test_request_leaves_out_paused_queues(void **state)
{
    (void)state;
    char *queues[] = {"high", "default", "low", NULL};
    int backoff[] = {0};
    pool_conf_t p = pool_of(queues, backoff, 1);
    char *r = appdriver_request(&p, 1u << 1);
    assert_non_null(strstr(r, "\"queues\":[\"high\",\"low\"]"));
    free(r);
    assert_null(appdriver_request(&p, 7)); /* all paused: nothing to ask */
}

static void test_request_escapes_names(void **state)
{
    (void)state;
    char *queues[] = {"a\"b", NULL};
    int backoff[] = {0};
    pool_conf_t p = pool_of(queues, backoff, 1);
    p.queue_connection = "x\\y";
    char *r = appdriver_request(&p, 0);
    assert_non_null(strstr(r, "\"connection\":\"x\\\\y\",\"queues\":[\"a\\\"b\"]"));
    free(r);
}

static void test_read_job_report(void **state)
{
    (void)state;
    appd_job_t j;
    assert_int_equal(appdriver_read_job("{\"name\":\"App\\\\Jobs\\\\Mail\",\"queue\":\"default\",\"id\":\"17\","
                                        "\"uuid\":\"u-1\",\"attempts\":2,\"wait_ms\":1500.5,\"runtime_ms\":3.25,\"timeout\":60}",
                                        &j),
                     0);
    assert_string_equal(j.name, "App\\Jobs\\Mail");
    assert_string_equal(j.queue, "default");
    assert_string_equal(j.id, "17");
    assert_string_equal(j.uuid, "u-1");
    assert_int_equal(j.attempts, 2);
    assert_true(j.wait_ms == 1500.5);
    assert_true(j.runtime_ms == 3.25);
    assert_int_equal(j.timeout_s, 60);
    appd_job_free(&j);
}

static void test_read_job_unknowns(void **state)
{
    (void)state;
    appd_job_t j;
    assert_int_equal(appdriver_read_job("{\"uuid\":null,\"wait_ms\":-1,\"runtime_ms\":\"x\",\"attempts\":-3}", &j), 0);
    assert_string_equal(j.name, "?");
    assert_null(j.queue);
    assert_null(j.uuid);
    assert_int_equal(j.attempts, 0);
    assert_true(j.wait_ms < 0 && j.runtime_ms < 0);
    assert_int_equal(j.timeout_s, -1);
    appd_job_free(&j);
    assert_int_equal(appdriver_read_job(NULL, &j), -1);
    assert_string_equal(j.name, "?");
    appd_job_free(&j);
    assert_int_equal(appdriver_read_job("[1]", &j), -1);
    appd_job_free(&j);
    assert_int_equal(appdriver_read_job("{\"name\":", &j), -1);
    appd_job_free(&j);
}

static void test_queue_index(void **state)
{
    (void)state;
    char *queues[] = {"high", "default", NULL};
    int backoff[] = {0};
    pool_conf_t p = pool_of(queues, backoff, 1);
    assert_int_equal(appdriver_queue_index(&p, "default"), 1);
    assert_int_equal(appdriver_queue_index(&p, "other"), 0);
    assert_int_equal(appdriver_queue_index(&p, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_names_the_connection_queues_and_options),
        cmocka_unit_test(test_request_leaves_out_paused_queues),
        cmocka_unit_test(test_request_escapes_names),
        cmocka_unit_test(test_read_job_report),
        cmocka_unit_test(test_read_job_unknowns),
        cmocka_unit_test(test_queue_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
