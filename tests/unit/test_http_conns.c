/* http_conns.c: which connections the HTTP process keeps (prefixes, the
 * share per address, who makes room for a newcomer, the request deadline). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

#include "http/http_conns.h"

static conn_prefix_t of(const char *addr)
{
    conn_prefix_t p;
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, addr, &a4.sin_addr) == 1)
        conn_prefix_of((struct sockaddr *)&a4, sizeof a4, &p);
    else {
        assert_int_equal(inet_pton(AF_INET6, addr, &a6.sin6_addr), 1);
        conn_prefix_of((struct sockaddr *)&a6, sizeof a6, &p);
    }
    return p;
}

static bool same(const char *a, const char *b)
{
    conn_prefix_t x = of(a), y = of(b);
    return conn_prefix_same(&x, &y);
}

static void test_prefixes(void **state)
{
    (void)state;
    /* all of loopback is one address, whichever family */
    assert_true(same("127.0.0.1", "127.0.0.2"));
    assert_true(same("127.0.0.2", "127.255.0.9"));
    assert_true(same("127.0.0.1", "::1"));
    assert_true(same("::ffff:127.0.0.5", "127.0.0.1"));
    /* IPv4: exact; mapped into IPv6 on a dual-stack listener: the same */
    assert_false(same("10.0.0.1", "10.0.0.2"));
    assert_true(same("::ffff:10.0.0.1", "10.0.0.1"));
    assert_false(same("10.0.0.1", "127.0.0.1"));
    /* IPv6: by /64 */
    assert_true(same("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"));
    assert_false(same("2001:db8:1:2::1", "2001:db8:1:3::1"));
    /* a Unix socket's peer, or none: local, like loopback */
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    conn_prefix_t u, n, l = of("127.0.0.1");
    conn_prefix_of((struct sockaddr *)&un, sizeof un, &u);
    conn_prefix_of(NULL, 0, &n);
    assert_true(conn_prefix_same(&u, &l) && conn_prefix_same(&n, &l));
    /* a truncated address is not read past its length */
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    conn_prefix_of((struct sockaddr *)&a6, 4, &u);
    assert_true(conn_prefix_same(&u, &l));
}

static int admit(conns_t *t, const char *addr, int fd, int64_t now, int *shut)
{
    conn_prefix_t p = of(addr);
    return conns_admit(t, &p, fd, now, shut);
}

static void test_a_full_prefix_gives_its_longest_waiting_place_to_a_newcomer(void **state)
{
    (void)state;
    conns_t t;
    conns_init(&t, 8, 2, 5000, 2000);
    int shut;
    int a = admit(&t, "127.0.0.2", 10, 0, &shut);
    int b = admit(&t, "127.0.0.3", 11, 100, &shut);
    assert_true(a >= 0 && b >= 0 && shut == -1);
    /* a third from 127/8: the oldest waiter goes */
    int c = admit(&t, "127.0.0.7", 12, 200, &shut);
    assert_true(c >= 0);
    assert_int_equal(shut, 10);
    assert_int_equal(t.live, 2);
    /* b's request came whole: it answers, c has just come; the next one
     * pushes out the answer rather than who has not sent a request yet */
    conns_received(&t, b, 300);
    assert_true(admit(&t, "127.0.0.8", 13, 400, &shut) >= 0);
    assert_int_equal(shut, 11);
    /* another address is not touched */
    assert_true(admit(&t, "10.0.0.1", 14, 500, &shut) >= 0);
    assert_int_equal(shut, -1);
    assert_int_equal(t.live, 3);
    conns_free(&t);
}

static void test_within_one_millisecond_the_first_to_wait_goes_first(void **state)
{
    (void)state;
    conns_t t;
    conns_init(&t, 8, 2, 5000, 2000);
    int shut, fd[6];
    /* slots are reused: a later connection may sit in a lower slot */
    for (int i = 0; i < 6; i++) {
        int s = admit(&t, "127.0.0.1", 10 + i, 7, &shut);
        assert_true(s >= 0);
        fd[i] = shut;
        if (shut >= 0) {
            /* closed at once: its slot is free for the next */
            for (int j = 0; j < t.nslots; j++)
                if (t.slots[j].used && t.slots[j].fd == shut) conns_release(&t, j);
        }
    }
    int want[] = {-1, -1, 10, 11, 12, 13};
    for (int i = 0; i < 6; i++) assert_int_equal(fd[i], want[i]);
    conns_free(&t);
}

static void test_who_has_just_connected_goes_last(void **state)
{
    (void)state;
    conns_t t;
    conns_init(&t, 8, 2, 5000, 2000);
    int shut, victim;
    int a = admit(&t, "10.0.0.1", 10, 0, &shut);
    int b = admit(&t, "10.0.0.1", 11, 0, &shut);
    conns_received(&t, a, 100);
    conns_received(&t, b, 200);
    conn_prefix_t p = of("10.0.0.1");
    /* both answering their first request: the older answer gives way */
    assert_int_equal(conns_room(&t, &p, 1000, &victim), 0);
    assert_int_equal(victim, a);
    /* a newcomer that has not sent its request yet goes after any answer */
    int c = admit(&t, "10.0.0.1", 12, 1000, &shut);
    assert_int_equal(shut, 10);
    assert_int_equal(conns_room(&t, &p, 1100, &victim), 0);
    assert_int_equal(victim, b);
    /* a slow reader (past the grace) goes before a fresher answer */
    conns_received(&t, c, 1150);
    assert_int_equal(conns_room(&t, &p, 2250, &victim), 0);
    assert_int_equal(victim, b);
    /* a kept-alive connection goes first, even answering its next request */
    conns_answered(&t, c, 2260);
    conns_received(&t, c, 2270);
    assert_int_equal(conns_room(&t, &p, 2300, &victim), 0);
    assert_int_equal(victim, c);
    /* one that has waited the grace for its first request (a slow-loris)
     * goes before answers; one that has just come goes after them */
    conns_free(&t);
    conns_init(&t, 8, 3, 5000, 2000);
    a = admit(&t, "10.0.0.1", 10, 0, &shut);
    b = admit(&t, "10.0.0.1", 11, 2500, &shut);
    c = admit(&t, "10.0.0.1", 12, 2600, &shut);
    conns_received(&t, b, 2550);
    assert_int_equal(conns_room(&t, &p, 2700, &victim), 0);
    assert_int_equal(victim, a);
    conns_release(&t, a);
    admit(&t, "10.0.0.1", 13, 2700, &shut);
    assert_int_equal(conns_room(&t, &p, 2800, &victim), 0);
    assert_int_equal(victim, b);
    conns_free(&t);
}

static void test_when_every_place_is_taken_the_longest_waiter_anywhere_goes(void **state)
{
    (void)state;
    conns_t t;
    conns_init(&t, 3, 0, 5000, 2000);
    int shut;
    int a = admit(&t, "10.0.0.1", 10, 10, &shut);
    admit(&t, "10.0.0.2", 11, 20, &shut);
    int c = admit(&t, "10.0.0.3", 12, 30, &shut);
    conns_received(&t, c, 40);
    conns_received(&t, a, 41);
    conns_answered(&t, a, 45); /* kept alive: waits again, from 45 */
    assert_true(admit(&t, "10.0.0.4", 13, 100, &shut) >= 0);
    assert_int_equal(shut, 10); /* an idle keep-alive goes before one waiting for its first request */
    assert_true(admit(&t, "10.0.0.5", 14, 110, &shut) >= 0);
    assert_int_equal(shut, 12); /* then an answer, before one that has just come */
    assert_int_equal(t.live, 3);
    conns_free(&t);
}

/* issue 29 (m5): a flood whose connections are answered and wait again
 * (they began to wait after the probe connected) no longer pushes out a
 * probe that has just connected: its idle keep-alives go first. */
static void test_a_flood_of_answered_connections_leaves_a_new_probe_its_place(void **state)
{
    (void)state;
    conns_t t;
    conns_init(&t, 16, 4, 5000, 2000);
    int shut, flood[3];
    for (int i = 0; i < 3; i++) flood[i] = admit(&t, "127.0.0.1", 10 + i, 0, &shut);
    int probe = admit(&t, "127.0.0.1", 20, 5, &shut);
    assert_true(probe >= 0 && shut == -1);
    for (int i = 0; i < 3; i++) {
        conns_received(&t, flood[i], 6);
        conns_answered(&t, flood[i], 7); /* answered after the probe came */
    }
    for (int i = 0; i < 3; i++) {
        assert_true(admit(&t, "127.0.0.1", 30 + i, 8, &shut) >= 0);
        assert_int_equal(shut, 10 + i);
    }
    conns_free(&t);
}

static void test_displaced_connections_hold_a_slot_until_closed(void **state)
{
    (void)state;
    conns_t t;
    conns_init(&t, 1, 0, 5000, 2000); /* four slots: one kept, three closing */
    int shut;
    int a = admit(&t, "10.0.0.1", 10, 0, &shut);
    int b = admit(&t, "10.0.0.2", 11, 1, &shut);
    assert_int_equal(shut, 10);
    assert_true(admit(&t, "10.0.0.4", 14, 1, &shut) >= 0);
    assert_int_equal(shut, 11);
    int d = admit(&t, "10.0.0.5", 15, 1, &shut);
    assert_int_equal(shut, 14);
    /* a, b and the third are not closed yet: no slot for a fifth */
    assert_int_equal(admit(&t, "10.0.0.3", 12, 2, &shut), -1);
    conns_release(&t, a);
    assert_int_equal(t.live, 1);
    assert_true(admit(&t, "10.0.0.3", 12, 3, &shut) >= 0);
    assert_int_equal(shut, 15);
    conns_release(&t, b);
    conns_release(&t, d);
    assert_int_equal(t.live, 1);
    conns_free(&t);
}

static int expired(conns_t *t, int64_t now, int *fds, int n)
{
    int fresh;
    return conns_expired(t, now, fds, n, &fresh);
}

static void test_the_request_deadline(void **state)
{
    (void)state;
    conns_t t;
    conns_init(&t, 8, 0, 5000, 2000);
    int shut, fds[8];
    int a = admit(&t, "10.0.0.1", 10, 0, &shut);
    int b = admit(&t, "10.0.0.2", 11, 0, &shut);
    admit(&t, "10.0.0.3", 12, 3000, &shut);
    conns_received(&t, b, 1000);
    assert_int_equal(expired(&t, 4999, fds, 8), 0);
    /* a waited 5 s: closed; b answers (no deadline); the third is younger */
    int fresh0 = -1;
    assert_int_equal(conns_expired(&t, 5000, fds, 8, &fresh0), 1);
    assert_int_equal(fresh0, 1);
    assert_int_equal(fds[0], 10);
    assert_int_equal(expired(&t, 5001, fds, 8), 0); /* told once */
    assert_int_equal(t.live, 2);
    /* answered: it waits for its next request, from then */
    conns_answered(&t, b, 6000);
    assert_int_equal(expired(&t, 8000, fds, 8), 1); /* the third: 5 s after it came */
    assert_int_equal(fds[0], 12);
    assert_int_equal(expired(&t, 10999, fds, 8), 0);
    int fresh = -1;
    assert_int_equal(conns_expired(&t, 11000, fds, 1, &fresh), 1);
    assert_int_equal(fds[0], 11);
    assert_int_equal(fresh, 0); /* it had been answered: an idle keep-alive */
    conns_release(&t, a);
    conns_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_a_full_prefix_gives_its_longest_waiting_place_to_a_newcomer),
        cmocka_unit_test(test_within_one_millisecond_the_first_to_wait_goes_first),
        cmocka_unit_test(test_who_has_just_connected_goes_last),
        cmocka_unit_test(test_when_every_place_is_taken_the_longest_waiter_anywhere_goes),
        cmocka_unit_test(test_a_flood_of_answered_connections_leaves_a_new_probe_its_place),
        cmocka_unit_test(test_displaced_connections_hold_a_slot_until_closed),
        cmocka_unit_test(test_the_request_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
