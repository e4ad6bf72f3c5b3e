/*
 * test_qlimit_tags.c - unit tests for src/redis/qlimit_tags.h: a job's
 * per-key limit keys read in C (the Lua's rules; the two are compared on a
 * real redis-server in tests/integration/test_limits_tags_cluster.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "redis/qlimit_tags.h"

#define CUST "App\\Models\\Customer:"
#define JCUST "App\\\\Models\\\\Customer:"

/* The keys of payload for the customer prefix, joined with '|'. */
static char *keys_of(const char *payload)
{
    qtags_t t, k;
    qtags_of_job(payload, strlen(payload), &t);
    qtags_keys(&t, CUST, &k);
    static char out[1024];
    out[0] = '\0';
    for (int i = 0; i < k.n; i++) {
        if (i) strcat(out, "|");
        strncat(out, k.v[i].s, k.v[i].len);
    }
    qtags_free(&t);
    qtags_free(&k);
    return out;
}

static void test_tags_array(void **state)
{
    (void)state;
    assert_string_equal(keys_of("{\"tags\":[\"" JCUST "7\",\"other\",\"" JCUST "7\",\"" JCUST "8\"]}"), "7|8");
    assert_string_equal(keys_of("{\"tags\":[\"" JCUST "1\",\"" JCUST "2\",\"" JCUST "3\",\"" JCUST "4\",\"" JCUST
                                "5\"]}"),
                        "1|2|3|4");
    /* the last of repeated names, as Lua's cjson */
    assert_string_equal(keys_of("{\"tags\":[\"" JCUST "1\"],\"tags\":[\"" JCUST "2\"]}"), "2");
    assert_string_equal(keys_of("{\"tags\":[\"" JCUST "\"]}"), ""); /* the prefix alone: no key */
    assert_string_equal(keys_of("[1,2]"), "");
    assert_string_equal(keys_of("{\"tags\":{\"a\":\"" JCUST "1\"}}"), "");
}

static void test_hashed(void **state)
{
    (void)state;
    /* sha1("a:b") */
    assert_string_equal(keys_of("{\"tags\":[\"" JCUST "a:b\"]}"), "h:dcea6d9ccd3d20ba1549f6d9b5dde60742158882");
    /* a NUL byte in a key: hashed, never cut short */
    assert_string_equal(keys_of("{\"tags\":[\"" JCUST "x\\u0000\"]}"), "h:062db096c728515e033cf8c48a1c1f0b9a79384b");
}

static void test_models(void **state)
{
    (void)state;
    const char *p = "{\"attempts\":0,\"data\":{\"command\":\"O:1:\\\"J\\\":2:{s:4:\\\"\\u0000*\\u0000c\\\";"
                    "O:45:\\\"Illuminate\\\\Contracts\\\\Database\\\\ModelIdentifier\\\":4:{s:5:\\\"class\\\";"
                    "s:19:\\\"App\\\\Models\\\\Customer\\\";s:2:\\\"id\\\";i:12;}"
                    "s:1:\\\"d\\\";O:45:\\\"Illuminate\\\\Contracts\\\\Database\\\\ModelIdentifier\\\":4:{"
                    "s:5:\\\"class\\\";s:19:\\\"App\\\\Models\\\\Customer\\\";s:2:\\\"id\\\";a:2:{i:0;i:3;i:1;"
                    "s:1:\\\"4\\\";}}}\"}}";
    assert_string_equal(keys_of(p), "12|3|4");
    /* tags win over the models; an empty tags array does not */
    assert_string_equal(keys_of("{\"tags\":[],\"data\":{\"command\":\"x\"}}"), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tags_array),
        cmocka_unit_test(test_hashed),
        cmocka_unit_test(test_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
