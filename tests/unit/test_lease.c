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

#include "redis/lease.h"

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
    r->elements = 4 + 2 * (size_t)npairs;
    r->element = calloc(r->elements, sizeof *r->element);
    r->element[0] = integer(1700000000000);
    r->element[1] = integer(6);
    r->element[2] = integer(2);
    r->element[3] = integer(1);
    for (int i = 0; i < 2 * npairs; i++) r->element[4 + i] = string(pairs[i]);
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
    assert_int_equal(v.prior, 1);
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

/* review #7: the same rules as the script's parse(): bounded digits, values
 * within the record's budget (held up to 1024 past it), an expiry ahead by
 * at most LEASE_EXPIRY_MAX_MS, printable ids of at most 255 bytes. */
static void test_strict_like_the_script(void **state)
{
    (void)state;
    char long_id[300];
    memset(long_id, 'h', 256);
    long_id[256] = '\0';
    const char *pairs[] = {
        "a\x01b:1", "1,0,1,0,6,1700000010000,0",          /* a control byte in the id */
        "a b:1", "1,0,1,0,6,1700000010000,0",              /* a space */
        long_id, "1,0,1,0,6,1700000010000,0",              /* 256 bytes */
        "d:1", "10000000,0,1,0,6,1700000010000,0",         /* 8 digits */
        "e:1", "1025,0,1,0,6,1700000010000,0",             /* held past max(budget, 1024) */
        "f:1", "1,7,1,0,6,1700000010000,0",                /* floor past its budget */
        "g:1", "1,0,7,0,6,1700000010000,0",                /* want past its budget */
        "h:1", "1,0,1,0,0,1700000010000,0",                /* no budget */
        "i:1", "1,0,1,0,1000001,1700000010000,0",          /* budget past the limit */
        "j:1", "1,0,1,1125899906842625,6,1700000010000,0", /* pressure past 2^50 */
        "k:1", "1,0,1,0,6,1700000000000,0",                /* lapsed (expiry = now) */
        "l:1", "1,0,1,0,6,1700001200001,0",                /* expiry too far ahead */
        "m:1", "1,0,1,0,6,00001700000010000,0",            /* 17 digits */
        "n:1", "1,0,1,0,6,1700000010000,0,",               /* trailing comma */
        "o:1", "+1,0,1,0,6,1700000010000,0",               /* a sign */
        "p:1", "1024,0,1,0,6,1700000010000,0",             /* ok: a host runs 1024 over a lowered budget */
        "q:1", "6,6,6,1125899906842624,6,1700001200000,1700000000000", /* ok: every limit exactly */
    };
    redisReply *r = reply(pairs, 17);
    lease_view_t v;
    assert_int_equal(lease_parse(r, &v), 0);
    assert_int_equal(v.n, 2);
    assert_string_equal(v.hosts[0].id, "p:1");
    assert_int_equal(v.hosts[0].held, 1024);
    assert_string_equal(v.hosts[1].id, "q:1");
    assert_int_equal(v.hosts[1].expiry, 1700001200000);
    lease_view_free(&v);
    freeReplyObject(r);
}

/* review #8: more holders than a fleet has masters is not a reply to read;
 * nor is a head out of range. */
static void test_refuses_too_many_holders_and_a_bad_head(void **state)
{
    (void)state;
    enum { N = LEASE_MAX_HOLDERS + 1 };
    const char **pairs = calloc(2 * N, sizeof *pairs);
    for (int i = 0; i < N; i++) pairs[2 * i] = "x:1", pairs[2 * i + 1] = "1,0,1,0,6,1700000010000,0";
    redisReply *r = reply(pairs, N);
    lease_view_t v;
    assert_int_equal(lease_parse(r, &v), -1);
    freeReplyObject(r);
    r = reply(pairs, N - 1);
    assert_int_equal(lease_parse(r, &v), 0);
    assert_int_equal(v.n, N - 1);
    lease_view_free(&v);
    r->element[1]->integer = INT64_C(1) << 40; /* the budget in effect */
    assert_int_equal(lease_parse(r, &v), -1);
    r->element[1]->integer = 6;
    r->element[2]->integer = -5; /* held */
    assert_int_equal(lease_parse(r, &v), -1);
    freeReplyObject(r);
    free(pairs);
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
        cmocka_unit_test(test_strict_like_the_script),
        cmocka_unit_test(test_refuses_too_many_holders_and_a_bad_head),
        cmocka_unit_test(test_refuses_a_reply_that_is_not_the_scripts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
