/*
 * test_failed_search.c - unit tests for issue 32's pure parts: a failed
 * store filter's times, its match on a record, the cursor's text
 * (redis/failed_search.h); the jobs running across a fleet
 * (observe/fleet.h); the control socket's stop-job request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "redis/failed_search.h"
#include "observe/fleet.h"
#include "master/control.h"
#include "redis/pending.h"

#define NOW 1795459626LL

static void test_times(void **state)
{
    (void)state;
    long long t = -1;
    assert_int_equal(ffilter_time("1795450000", NOW, &t), 0);
    assert_int_equal(t, 1795450000LL);
    assert_int_equal(ffilter_time("90s", NOW, &t), 0);
    assert_int_equal(t, NOW - 90);
    assert_int_equal(ffilter_time("1h", NOW, &t), 0);
    assert_int_equal(t, NOW - 3600);
    assert_int_equal(ffilter_time("2d", NOW, &t), 0);
    assert_int_equal(t, NOW - 2 * 86400);
    assert_int_equal(ffilter_time("1w", NOW, &t), 0);
    assert_int_equal(t, NOW - 7 * 86400);
    assert_int_equal(ffilter_time("2026-11-23", NOW, &t), 0);
    assert_int_equal(t, 1795392000LL);
    assert_int_equal(ffilter_time("2026-11-23 18:47:06", NOW, &t), 0);
    assert_int_equal(t, 1795459626LL);
    assert_int_equal(ffilter_time("2026-11-23T18:47", NOW, &t), 0);
    assert_int_equal(t, 1795459620LL);
    const char *bad[] = {"", "h", "1y", "-5", "1h2", "2026-13-01", "2026-11-23 18", "yesterday", "99999999999999d"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        t = 7;
        assert_int_equal(ffilter_time(bad[i], NOW, &t), -1);
        assert_int_equal(t, 7);
    }
}

static void test_cursor(void **state)
{
    (void)state;
    fcursor_t c;
    assert_int_equal(fcursor_parse(NULL, &c), 0);
    assert_null(c.queue);
    assert_string_equal(c.max, "+inf");
    assert_int_equal(fcursor_parse("1795459626:3:emails:eu", &c), 0);
    assert_string_equal(c.max, "1795459626");
    assert_int_equal(c.skip, 3);
    assert_string_equal(c.queue, "emails:eu");
    char *s = fcursor_text(&c);
    assert_string_equal(s, "1795459626:3:emails:eu");
    free(s);
    free(c.queue);
    assert_int_equal(fcursor_parse("+inf:0:q", &c), 0);
    free(c.queue);
    const char *bad[] = {"x", "1:2", "1:2:", ":2:q", "1:-1:q", "abc:1:q", "1:x:q"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(fcursor_parse(bad[i], &c), -1);
    c.queue = NULL;
    assert_null(fcursor_text(&c));
}

static void test_match(void **state)
{
    (void)state;
    char payload[] = "{\"uuid\":\"u1\",\"displayName\":\"App\\\\Jobs\\\\SendInvoice\",\"job\":\"x\",\"data\":"
                     "{\"command\":\"customer 42\"},\"attempts\":1}";
    frec_t f = {.uuid = "u1", .queue = "billing", .payload = payload, .payload_len = strlen(payload),
                .exception = "RuntimeException: INV-4711 refused", .failed_at = 1000};
    ffilter_t none = {0};
    assert_true(ffilter_match(&none, &f));
    ffilter_t a = {.name = "App\\Jobs\\SendInvoice", .queue = "billing", .q = "inv-4711", .since = 1000, .until = 1000};
    assert_true(ffilter_match(&a, &f));
    ffilter_t b = {.q = "CUSTOMER 42"};
    assert_true(ffilter_match(&b, &f));
    ffilter_t misses[] = {{.name = "App\\Jobs\\Send"}, {.name = "SendInvoice"}, {.queue = "bill"}, {.uuid = "u2"},
                          {.q = "INV-4712"}, {.since = 1001}, {.until = 999}};
    for (size_t i = 0; i < sizeof misses / sizeof *misses; i++) assert_false(ffilter_match(&misses[i], &f));
}

static void test_running(void **state)
{
    (void)state;
    const char *fleet =
        "{\"now_ms\":100000,\"masters\":["
        "{\"id\":\"a:1\",\"host\":\"a\",\"written_ms\":99000,\"pools\":[{\"name\":\"p\",\"children\":["
        "{\"pid\":11,\"job\":{\"uuid\":\"u1\",\"id\":\"1\",\"name\":\"J\",\"queue\":\"q\",\"running_ms\":5000,"
        "\"attempt\":1,\"timeout_s\":5}},{\"pid\":12,\"job\":null}]}]},"
        "{\"id\":\"b:2\",\"host\":\"b\",\"written_ms\":500000,\"pools\":[{\"name\":\"r\",\"children\":["
        "{\"pid\":21,\"job\":{\"uuid\":\"u2\",\"name\":\"K\",\"running_ms\":9000,\"attempt\":3,\"timeout_s\":0}}]}]},"
        "{\"id\":\"c:3\",\"written_ms\":1,\"pools\":[{\"name\":\"s\",\"children\":["
        "{\"pid\":31,\"job\":{\"uuid\":\"u3\",\"running_ms\":10,\"timeout_s\":60}}]}]}]}";
    cJSON *f = cJSON_Parse(fleet);
    cJSON *rows = fleet_running(f, "a:1");
    assert_int_equal(cJSON_GetArraySize(rows), 3);
    /* oldest first: u3 (10 ms + a minute at most: the clocks differ), u2 (its clock ahead: no time added), u1 */
    const char *order[] = {"u3", "u2", "u1"};
    double ages[] = {60010, 9000, 6000};
    for (int i = 0; i < 3; i++) {
        cJSON *r = cJSON_GetArrayItem(rows, i);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r, "uuid")), order[i]);
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "age_ms")) == ages[i]);
    }
    cJSON *u1 = cJSON_GetArrayItem(rows, 2), *u2 = cJSON_GetArrayItem(rows, 1), *u3 = cJSON_GetArrayItem(rows, 0);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(u1, "past_timeout"))); /* 6 s of 5 */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(u1, "own")));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(u1, "host")), "a");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(u1, "pool")), "p");
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(u1, "pid")) == 11);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(u2, "past_timeout"))); /* no timeout */
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(u2, "own")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(u3, "past_timeout"))); /* 60.01 s of 60 */
    cJSON_Delete(rows);
    cJSON_Delete(f);
    cJSON *empty = cJSON_Parse("{}");
    rows = fleet_running(empty, NULL);
    assert_int_equal(cJSON_GetArraySize(rows), 0);
    cJSON_Delete(rows);
    cJSON_Delete(empty);
}

static void test_stop_job_request(void **state)
{
    (void)state;
    ctl_request_t r;
    char err[256];
    const char *ok = "{\"cmd\":\"stop-job\",\"uuid\":\"6f1c-42\",\"by\":\"10.0.0.7\"}";
    assert_int_equal(ctl_parse_request(ok, strlen(ok), 64, &r, err, sizeof err), 0);
    assert_int_equal(r.cmd, CTL_STOP_JOB);
    assert_string_equal(r.uuid, "6f1c-42");
    assert_string_equal(ctl_cmd_name(r.cmd), "stop-job");
    ctl_request_free(&r);
    const char *bad[] = {"{\"cmd\":\"stop-job\"}", "{\"cmd\":\"stop-job\",\"uuid\":\"\"}",
                         "{\"cmd\":\"stop-job\",\"uuid\":7}", "{\"cmd\":\"stop-job\",\"uuid\":\"a\\nb\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(ctl_parse_request(bad[i], strlen(bad[i]), 64, &r, err, sizeof err), -1);
        assert_non_null(strstr(err, "uuid"));
    }
}

static void test_pending_cursor(void **state)
{
    (void)state;
    pcursor_t c;
    assert_int_equal(pcursor_parse(NULL, &c), 0);
    assert_false(c.delayed);
    assert_int_equal(c.at, 0);
    assert_int_equal(pcursor_parse("ready:12", &c), 0);
    assert_false(c.delayed);
    assert_int_equal(c.at, 12);
    char *s = pcursor_text(&c);
    assert_string_equal(s, "ready:12");
    free(s);
    assert_int_equal(pcursor_parse("delayed:18446744073709551615", &c), 0);
    assert_true(c.delayed);
    s = pcursor_text(&c);
    assert_string_equal(s, "delayed:18446744073709551615");
    free(s);
    c.done = true;
    assert_null(pcursor_text(&c));
    const char *bad[] = {"x", "ready:", "ready:-1", "ready:1x", "delayed:18446744073709551616", "later:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_int_equal(pcursor_parse(bad[i], &c), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_cursor),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_running),
        cmocka_unit_test(test_stop_job_request),
        cmocka_unit_test(test_pending_cursor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
