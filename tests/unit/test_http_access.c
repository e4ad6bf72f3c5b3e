/* http_access.c: who may read what over HTTP (review 2026-11-24, #1 and #10). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "http/http_access.h"

static int decide(http_need_t need, http_read_t policy, bool token, int local, bool *full)
{
    *full = !token; /* overwritten */
    return http_may_read(need, policy, token, local, full);
}

static void test_without_the_token_a_local_request_reads_aggregates_only(void **state)
{
    (void)state;
    bool full;
    assert_int_equal(decide(HTTP_NEED_AGGREGATE, HTTP_READ_AGGREGATES, false, HTTP_LOCAL, &full), 200);
    assert_false(full);
    assert_int_equal(decide(HTTP_NEED_PRIVATE, HTTP_READ_AGGREGATES, false, HTTP_LOCAL, &full), 401);
    assert_int_equal(decide(HTTP_NEED_OPEN, HTTP_READ_AGGREGATES, false, HTTP_LOCAL, &full), 200);
    assert_false(full);
}

static void test_the_token_reads_everything_everywhere(void **state)
{
    (void)state;
    bool full;
    for (int local = -1; local <= 1; local++)
        for (int p = HTTP_READ_NONE; p <= HTTP_READ_ALL; p++) {
            assert_int_equal(decide(HTTP_NEED_PRIVATE, (http_read_t)p, true, local, &full), 200);
            assert_true(full);
        }
}

static void test_a_request_that_is_not_local_reads_only_what_is_open(void **state)
{
    (void)state;
    bool full;
    for (int p = HTTP_READ_NONE; p <= HTTP_READ_ALL; p++) {
        assert_int_equal(decide(HTTP_NEED_PRIVATE, (http_read_t)p, false, HTTP_NOT_LOCAL, &full), 401);
        assert_int_equal(decide(HTTP_NEED_AGGREGATE, (http_read_t)p, false, HTTP_NOT_LOCAL, &full), 401);
        assert_int_equal(decide(HTTP_NEED_OPEN, (http_read_t)p, false, HTTP_NOT_LOCAL, &full), 200);
    }
}

static void test_the_policies(void **state)
{
    (void)state;
    bool full;
    assert_int_equal(decide(HTTP_NEED_AGGREGATE, HTTP_READ_NONE, false, HTTP_LOCAL, &full), 401);
    assert_int_equal(decide(HTTP_NEED_PRIVATE, HTTP_READ_ALL, false, HTTP_LOCAL, &full), 200);
    assert_true(full);
    /* a foreign Host: 403 where the policy would open it, else 401 */
    assert_int_equal(decide(HTTP_NEED_AGGREGATE, HTTP_READ_AGGREGATES, false, HTTP_FOREIGN_HOST, &full), 403);
    assert_int_equal(decide(HTTP_NEED_PRIVATE, HTTP_READ_AGGREGATES, false, HTTP_FOREIGN_HOST, &full), 401);
    assert_int_equal(decide(HTTP_NEED_PRIVATE, HTTP_READ_ALL, false, HTTP_FOREIGN_HOST, &full), 403);
    assert_int_equal(decide(HTTP_NEED_OPEN, HTTP_READ_NONE, false, HTTP_FOREIGN_HOST, &full), 200);
}

static void test_local_host_names(void **state)
{
    (void)state;
    const char *good[] = {"127.0.0.1", "127.0.0.1:9178", "localhost", "localhost:80", "[::1]", "[::1]:9178",
                          "[fe80::1]:1", "10.0.0.5:9178"};
    const char *bad[] = {NULL, "", "evil.example", "evil.example:9178", "[evil.example]", "[evil.example]:9178",
                         "[::1", "[::1]x", "[::1]:", "[::1]:80x", "127.0.0.1:", "127.0.0.1:abc", "127.0.0.1:9:9",
                         "localhost.evil.example", "[127.0.0.1]", "[]", "::1"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) assert_true(http_local_host(good[i]));
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_false(http_local_host(bad[i]));
}

static void test_unix_peers_follow_the_control_sockets_rule(void **state)
{
    (void)state;
    http_conf_t h = {.owner_uid = 998};
    gid_t gs[] = {100, 5000};
    assert_true(http_peer_local(&h, 0, 0, NULL, 0));
    assert_true(http_peer_local(&h, 998, 998, NULL, 0));
    assert_false(http_peer_local(&h, 65534, 65534, NULL, 0));
    assert_false(http_peer_local(&h, 1000, 5000, gs, 2)); /* no control_group */
    h.has_control_uid = true, h.control_uid = 1000;
    assert_true(http_peer_local(&h, 1000, 1000, NULL, 0));
    h.has_control_gid = true, h.control_gid = 5000;
    assert_true(http_peer_local(&h, 1001, 1001, gs, 2));   /* a supplementary group */
    assert_true(http_peer_local(&h, 1002, 5000, NULL, 0)); /* the primary group */
    assert_false(http_peer_local(&h, 1003, 1003, gs, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_the_token_a_local_request_reads_aggregates_only),
        cmocka_unit_test(test_the_token_reads_everything_everywhere),
        cmocka_unit_test(test_a_request_that_is_not_local_reads_only_what_is_open),
        cmocka_unit_test(test_the_policies),
        cmocka_unit_test(test_local_host_names),
        cmocka_unit_test(test_unix_peers_follow_the_control_sockets_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
