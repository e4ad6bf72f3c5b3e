/*
 * test_lease.c - unit tests for lease_parse (src/lease.h): the lease
 * script's reply, read strictly (a record anyone with Redis access could
 * have written is skipped, never trusted).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lease.h"

static redisReply *integer(long long v)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_INTEGER;
    r->integer = v;
    return r;
}

static redisReply *string(const char *s)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_STRING;
    r->len = strlen(s);
    r->str = strdup(s);
    return r;
}

static redisReply *reply(const char **pairs, int npairs)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = 3 + 2 * (size_t)npairs;
    r->element = calloc(r->elements, sizeof *r->element);
    r->element[0] = integer(1700000000000);
    r->element[1] = integer(6);
    r->element[2] = integer(2);
    for (int i = 0; i < 2 * npairs; i++) r->element[3 + i] = string(pairs[i]);
    return r;
}

static void test_parses_the_holders(void **state)
{
    (void)state;
    const char *pairs[] = {"web1:42", "2,1,4,3000,6,1700000010000,1699999990000", "web2:7", "3,0,3,0,8,1700000010000,0"};
    redisReply *r = reply(pairs, 2);
    lease_view_t v;
    assert_int_equal(lease_parse(r, &v), 0);
    assert_int_equal(v.now_ms, 1700000000000);
    assert_int_equal(v.budget, 6);
    assert_int_equal(v.held, 2);
    assert_int_equal(v.n, 2);
    assert_string_equal(v.hosts[0].id, "web1:42");
    assert_int_equal(v.hosts[0].held, 2);
    assert_int_equal(v.hosts[0].floor, 1);
    assert_int_equal(v.hosts[0].want, 4);
    assert_int_equal(v.hosts[0].pressure, 3000);
    assert_int_equal(v.hosts[0].waiting_since, 1699999990000);
    assert_int_equal(v.hosts[1].budget, 8);
    lease_view_free(&v);
    freeReplyObject(r);
}

static void test_skips_records_that_are_not_ours(void **state)
{
    (void)state;
    const char *pairs[] = {"a:1", "2,1,4,3000,6,1700000010000",       /* short */
                           "b:1", "2,1,4,-3,6,1700000010000,0",        /* negative */
                           "c:1", "2,1,4,3,6,1700000010000,0,9",       /* long */
                           "d:1", "x,1,4,3,6,1700000010000,0",         /* not a number */
                           "e:1", "99999999,1,4,3,6,1700000010000,0",  /* absurd */
                           "", "1,1,1,1,1,1700000010000,0",            /* no id */
                           "ok:1", "1,1,1,1,6,1700000010000,0"};
    redisReply *r = reply(pairs, 7);
    lease_view_t v;
    assert_int_equal(lease_parse(r, &v), 0);
    assert_int_equal(v.n, 1);
    assert_string_equal(v.hosts[0].id, "ok:1");
    lease_view_free(&v);
    freeReplyObject(r);
}

static void test_refuses_a_reply_that_is_not_the_scripts(void **state)
{
    (void)state;
    lease_view_t v;
    redisReply *r = integer(3);
    assert_int_equal(lease_parse(r, &v), -1);
    freeReplyObject(r);
    const char *pairs[] = {"a:1", "1,1,1,1,1,1,0"};
    r = reply(pairs, 1);
    r->elements--; /* an id without a record */
    assert_int_equal(lease_parse(r, &v), -1);
    r->elements++;
    freeReplyObject(r);
    assert_int_equal(lease_parse(NULL, &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parses_the_holders),
        cmocka_unit_test(test_skips_records_that_are_not_ours),
        cmocka_unit_test(test_refuses_a_reply_that_is_not_the_scripts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
