/*
 * test_rcluster.c - src/rcluster.h: key slots, command keys, CLUSTER SLOTS
 * replies, MOVED / ASK, grouping queues by slot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/qlimit.h"
#include "redis/rcluster.h"

static int slot(const char *k)
{
    return rcluster_key_slot(k, strlen(k));
}

static void test_crc16_and_slots(void **state)
{
    (void)state;
    assert_int_equal(rcluster_crc16("123456789", 9), 0x31C3);
    assert_int_equal(slot("{user1000}.following"), slot("{user1000}.followers"));
    assert_int_equal(slot("{user1000}.following"), slot("user1000"));
    /* known slots (redis-cli CLUSTER KEYSLOT) */
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("bar"), 5061);
    assert_int_equal(slot("123456789"), 0x31C3 & 16383);
    /* an empty tag is no tag: the whole key */
    assert_int_equal(slot("foo{}{bar}"), (int)(rcluster_crc16("foo{}{bar}", 10) & 16383));
    assert_false(rcluster_has_tag("foo{}{bar}", 10));
    /* only the first tag counts */
    assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
    assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
    /* Laravel's keys of a tagged queue share a slot */
    assert_int_equal(slot("laravel_database_queues:{emails}"), slot("laravel_database_queues:{emails}:reserved"));
    assert_int_equal(slot("laravel_database_queues:{emails}:notify"), slot("laravel_database_qpool:unpop:{emails}:x"));
    assert_true(rcluster_has_tag("queues:{emails}", 15));
    assert_false(rcluster_has_tag("queues:emails", 13));
}

static void test_command_key(void **state)
{
    (void)state;
    const char *get[] = {"GET", "k"};
    assert_int_equal(rcluster_command_key(2, get, NULL), 1);
    const char *ev[] = {"EVALSHA", "abc", "2", "k1", "k2", "a"};
    assert_int_equal(rcluster_command_key(6, ev, NULL), 3);
    const char *ev0[] = {"evalsha", "abc", "0", "a"};
    assert_int_equal(rcluster_command_key(4, ev0, NULL), -1);
    const char *ping[] = {"PING"};
    assert_int_equal(rcluster_command_key(1, ping, NULL), -1);
    const char *sl[] = {"SCRIPT", "LOAD", "return 1"};
    assert_int_equal(rcluster_command_key(3, sl, NULL), -1);
    const char *bl[] = {"BLPOP", "a", "b", "1"};
    assert_int_equal(rcluster_command_key(4, bl, NULL), 1);
}

static redisReply *mk_int(long long v)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_INTEGER;
    r->integer = v;
    return r;
}

static redisReply *rstr(const char *s)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_STRING;
    r->str = strdup(s);
    r->len = strlen(s);
    return r;
}

static redisReply *rarr(size_t n)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = n;
    r->element = calloc(n, sizeof *r->element);
    return r;
}

static redisReply *range(long long a, long long b, const char *host, long long port)
{
    redisReply *e = rarr(3), *m = rarr(3);
    m->element[0] = rstr(host);
    m->element[1] = mk_int(port);
    m->element[2] = rstr("nodeid");
    e->element[0] = mk_int(a);
    e->element[1] = mk_int(b);
    e->element[2] = m;
    return e;
}

static void test_parse_slots(void **state)
{
    (void)state;
    redisReply *r = rarr(2);
    r->element[0] = range(0, 5460, "127.0.0.1", 7000);
    r->element[1] = range(5461, 16383, "10.0.0.2", 7001);
    rcluster_range_t *v;
    int n;
    char err[200];
    assert_int_equal(rcluster_parse_slots(r, &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].end, 5460);
    assert_string_equal(v[1].host, "10.0.0.2");
    assert_int_equal(v[1].port, 7001);
    free(v);
    freeReplyObject(r);
    r = rarr(1);
    r->element[0] = range(0, 16384, "127.0.0.1", 7000); /* past the last slot */
    assert_int_equal(rcluster_parse_slots(r, &v, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "malformed"));
    freeReplyObject(r);
    r = rarr(0);
    assert_int_equal(rcluster_parse_slots(r, &v, &n, err, sizeof err), -1);
    freeReplyObject(r);
}

static void test_redirect(void **state)
{
    (void)state;
    int s, port;
    char host[64];
    assert_int_equal(rcluster_parse_redirect("MOVED 3999 127.0.0.1:6381", &s, host, sizeof host, &port), RCLUSTER_MOVED);
    assert_int_equal(s, 3999);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6381);
    assert_int_equal(rcluster_parse_redirect("ASK 12 ::1:7002", &s, host, sizeof host, &port), RCLUSTER_ASK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 7002);
    assert_int_equal(rcluster_parse_redirect("MOVED x 1:2", &s, host, sizeof host, &port), RCLUSTER_NOREDIR);
    assert_int_equal(rcluster_parse_redirect("MOVED 99999 h:1", &s, host, sizeof host, &port), RCLUSTER_NOREDIR);
    assert_int_equal(rcluster_parse_redirect("ERR wrong", &s, host, sizeof host, &port), RCLUSTER_NOREDIR);
    assert_int_equal(rcluster_parse_redirect("MOVED 1 host", &s, host, sizeof host, &port), RCLUSTER_NOREDIR);
}

static void test_group_runs(void **state)
{
    (void)state;
    int slots[] = {5, 5, 9, 5, 9, 9};
    int g[6];
    assert_int_equal(rcluster_group_runs(slots, 6, g), 4);
    int want[] = {0, 0, 1, 2, 3, 3};
    assert_memory_equal(g, want, sizeof want);
    assert_int_equal(rcluster_group_runs(slots, 1, g), 1);
    assert_int_equal(rcluster_group_runs(slots, 0, g), 0);
}

static int slot_of(const char *key, const char *suffix)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s", key, suffix);
    return rcluster_key_slot(buf, strlen(buf));
}

/* issue 33 on a Cluster: a limit's keys share one slot; on one Redis the
 * names are as they were */
static void test_limit_keys(void **state)
{
    (void)state;
    char *k = qlimit_key("app:", "|App\\Jobs\\A", false);
    assert_string_equal(k, "app:qpool:limit:|App\\Jobs\\A");
    free(k);
    const char *ids[] = {"|App\\Jobs\\A", "mail|", "{emails}|App\\Jobs\\B", "paused:App\\Jobs\\C", "}odd|x", NULL};
    for (int i = 0; ids[i]; i++) {
        k = qlimit_key("app:", ids[i], true);
        assert_true(rcluster_has_tag(k, strlen(k)));
        int s = slot_of(k, ":run");
        assert_int_equal(slot_of(k, ":bucket"), s);
        assert_int_equal(slot_of(k, ":wait"), s);
        free(k);
    }
    k = qlimit_key("app:", "|App\\Jobs\\A", true);
    assert_string_equal(k, "app:qpool:limit:{|App\\Jobs\\A}");
    free(k);
    /* two limits never share keys: ids starting with '}' or '_' */
    static const char *const pairs[][2] = {{"}x|A", "_}x|A"}, {"_x|A", "x|A"}, {"__x|A", "_x|A"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char *a = qlimit_key("app:", pairs[i][0], true), *b = qlimit_key("app:", pairs[i][1], true);
        assert_string_not_equal(a, b);
        free(a);
        free(b);
    }
    k = qlimit_paused_key("app:", false);
    assert_string_equal(k, "app:qpool:paused-classes");
    free(k);
    k = qlimit_paused_key("app:", true);
    assert_string_equal(k, "app:qpool:{paused-classes}");
    free(k);
    qlimits_t ls = {.cluster = true};
    qlimits_add(&ls, "p:", "q|", "", "q", 2, 0, 1);
    qlimits_add_paused(&ls, "p:", "App\\Jobs\\P");
    assert_string_equal(ls.v[0].run, "p:qpool:limit:{q|}:run");
    assert_string_equal(ls.v[1].key, "p:qpool:limit:{paused:App\\Jobs\\P}");
    qlimits_free(&ls);
}

/* the cluster pop's matching: as the single-Redis pop's lim_match */
static void test_limit_matching(void **state)
{
    (void)state;
    qlimits_t ls = {.cluster = true};
    qlimits_add(&ls, "", "|A", "A", "", 5, 0, 1);  /* class A, any queue */
    qlimits_add(&ls, "", "mail|", "", "mail", 0, 10, 2); /* queue mail, any class */
    qlimits_add(&ls, "", "mail|B", "B", "mail", 1, 0, 1);
    assert_true(qlimit_applies(&ls.v[0], "work", "A"));
    assert_false(qlimit_applies(&ls.v[0], "work", "B"));
    assert_false(qlimit_applies(&ls.v[0], "work", NULL)); /* no displayName: no class limit */
    assert_true(qlimit_applies(&ls.v[1], "mail", NULL));
    assert_false(qlimit_applies(&ls.v[1], "work", "A"));
    assert_true(qlimit_applies(&ls.v[2], "mail", "B"));
    assert_false(qlimit_applies(&ls.v[2], "work", "B"));
    bool full[3] = {false, false, false};
    assert_int_equal(qlimit_first_full(&ls, "mail", "B", full), -1);
    full[1] = true; /* the queue's rate is out of tokens: every job of mail waits */
    assert_int_equal(qlimit_first_full(&ls, "mail", "B", full), 1);
    assert_int_equal(qlimit_first_full(&ls, "mail", "A", full), 1);
    assert_int_equal(qlimit_first_full(&ls, "work", "A", full), -1);
    full[0] = true;
    assert_int_equal(qlimit_first_full(&ls, "work", "A", full), 0);
    assert_int_equal(qlimit_first_full(&ls, "work", "B", full), -1);
    /* the leases of one job serve another exactly when the same limits apply */
    assert_true(qlimit_same_limits(&ls, "work", "A", false, "A", false));
    assert_false(qlimit_same_limits(&ls, "work", "A", false, "B", false));
    assert_true(qlimit_same_limits(&ls, "work", "B", false, "C", false)); /* none applies to either */
    assert_true(qlimit_same_limits(&ls, "work", "B", false, NULL, false));
    assert_true(qlimit_same_limits(&ls, "work", "B", false, "A", true));  /* a plain payload: no limit */
    assert_false(qlimit_same_limits(&ls, "mail", "B", false, "C", false)); /* mail|B applies to B only */
    assert_true(qlimit_same_limits(&ls, "mail", "C", false, NULL, false)); /* the queue's rate to both */
    assert_false(qlimit_same_limits(&ls, "mail", "C", false, "C", true));
    qlimits_free(&ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_and_slots), cmocka_unit_test(test_command_key),
        cmocka_unit_test(test_parse_slots),     cmocka_unit_test(test_redirect),
        cmocka_unit_test(test_group_runs),      cmocka_unit_test(test_limit_keys),
        cmocka_unit_test(test_limit_matching),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
