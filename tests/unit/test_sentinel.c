/*
 * test_sentinel.c - src/sentinel.h: "host:port" lists and what a sentinel's
 * and a server's replies say.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "redis/sentinel.h"

static void test_parse_addr(void **state)
{
    (void)state;
    char host[64], err[200];
    int port = 0;
    assert_int_equal(sentinel_parse_addr("10.0.0.5:26380", 26379, host, sizeof host, &port, err, sizeof err), 0);
    assert_string_equal(host, "10.0.0.5");
    assert_int_equal(port, 26380);
    assert_int_equal(sentinel_parse_addr("sentinel-a", 26379, host, sizeof host, &port, err, sizeof err), 0);
    assert_string_equal(host, "sentinel-a");
    assert_int_equal(port, 26379);
    assert_int_equal(sentinel_parse_addr("[::1]:7000", 26379, host, sizeof host, &port, err, sizeof err), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7000);
    assert_int_equal(sentinel_parse_addr("[::1]", 26379, host, sizeof host, &port, err, sizeof err), 0);
    assert_int_equal(port, 26379);
    assert_int_equal(sentinel_parse_addr("fe80::1", 26379, host, sizeof host, &port, err, sizeof err), 0);
    assert_string_equal(host, "fe80::1");
}

static void test_parse_addr_errors(void **state)
{
    (void)state;
    char host[16], err[200];
    int port;
    const char *bad[] = {"", ":26379", "h:", "h:0", "h:65536", "h:12x", "[::1", "[::1]x",
                         "a-very-long-host-name-indeed:1", NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = '\0';
        assert_int_equal(sentinel_parse_addr(bad[i], 26379, host, sizeof host, &port, err, sizeof err), -1);
        assert_true(strlen(err) > 0);
    }
}

static redisReply str(const char *s, int type)
{
    redisReply r = {.type = type, .str = (char *)s, .len = strlen(s)};
    return r;
}

static void test_master_reply(void **state)
{
    (void)state;
    char host[64], err[200];
    int port = 0;
    redisReply h = str("127.0.0.1", REDIS_REPLY_STRING), p = str("6380", REDIS_REPLY_STRING);
    redisReply *el[2] = {&h, &p};
    redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = el};
    assert_int_equal(sentinel_master_reply(&arr, host, sizeof host, &port, err, sizeof err), 1);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6380);

    redisReply nil = {.type = REDIS_REPLY_NIL};
    assert_int_equal(sentinel_master_reply(&nil, host, sizeof host, &port, err, sizeof err), 0);

    redisReply e = str("NOAUTH Authentication required.", REDIS_REPLY_ERROR);
    assert_int_equal(sentinel_master_reply(&e, host, sizeof host, &port, err, sizeof err), -1);
    assert_string_equal(err, "NOAUTH Authentication required.");

    redisReply badport = str("0", REDIS_REPLY_STRING);
    el[1] = &badport;
    assert_int_equal(sentinel_master_reply(&arr, host, sizeof host, &port, err, sizeof err), -1);
    arr.elements = 1;
    assert_int_equal(sentinel_master_reply(&arr, host, sizeof host, &port, err, sizeof err), -1);
}

static void test_role_reply(void **state)
{
    (void)state;
    char role[64];
    redisReply m = str("master", REDIS_REPLY_STRING), s = str("slave", REDIS_REPLY_STRING);
    redisReply *el[1] = {&m};
    redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = 1, .element = el};
    assert_int_equal(sentinel_role_reply(&arr, role, sizeof role), 1);
    el[0] = &s;
    assert_int_equal(sentinel_role_reply(&arr, role, sizeof role), 0);
    assert_string_equal(role, "slave");
    redisReply e = str("ERR unknown command", REDIS_REPLY_ERROR);
    assert_int_equal(sentinel_role_reply(&e, role, sizeof role), -1);
    redisReply empty = {.type = REDIS_REPLY_ARRAY, .elements = 0};
    assert_int_equal(sentinel_role_reply(&empty, role, sizeof role), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_addr),
        cmocka_unit_test(test_parse_addr_errors),
        cmocka_unit_test(test_master_reply),
        cmocka_unit_test(test_role_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
