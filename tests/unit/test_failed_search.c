/*
 * test_failed_search.c - unit tests for src/redis/failed_search.h's pure
 * parts: a filter's times, its match on a record, the cursor's text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "redis/failed_search.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_cursor),
        cmocka_unit_test(test_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
