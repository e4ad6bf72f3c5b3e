/*
 * test_budget.c - unit tests for src/budget.h: the fleet budget's fair
 * division, a pool's demand and pressure, and what it may run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/budget.h"

static budget_host_t host(const char *id, int floor, int want, int64_t pressure)
{
    budget_host_t h;
    memset(&h, 0, sizeof h);
    snprintf(h.id, sizeof h.id, "%s", id);
    h.floor = floor;
    h.want = want;
    h.pressure = pressure;
    h.budget = 1000;
    return h;
}

static void test_equal_backlog_within_one_worker(void **state)
{
    (void)state;
    for (int budget = 1; budget <= 40; budget++) {
        budget_host_t h[3] = {host("c:1", 1, 40, 5000), host("a:1", 1, 40, 5000), host("b:1", 1, 40, 5000)};
        int s[3];
        assert_int_equal(budget_divide(h, 3, budget, s), budget);
        int lo = s[0], hi = s[0];
        for (int i = 1; i < 3; i++) {
            if (s[i] < lo) lo = s[i];
            if (s[i] > hi) hi = s[i];
        }
        assert_true(hi - lo <= 1);
    }
}

static void test_longest_wait_gets_the_next_slot(void **state)
{
    (void)state;
    /* one slot past the floors: the host whose queues wait longest gets it */
    budget_host_t h[2] = {host("a:1", 1, 5, 1000), host("b:1", 1, 5, 9000)};
    int s[2];
    budget_divide(h, 2, 3, s);
    assert_int_equal(s[0], 1);
    assert_int_equal(s[1], 2);
    /* in proportion to the wait: 1 s against 3 s of work, 8 slots -> 2 and 6 */
    h[0].pressure = 1000, h[1].pressure = 3000;
    h[0].want = h[1].want = 10;
    budget_divide(h, 2, 8, s);
    assert_int_equal(s[0], 2);
    assert_int_equal(s[1], 6);
}

static void test_no_backlog_keeps_its_floor_only(void **state)
{
    (void)state;
    budget_host_t h[2] = {host("a:1", 1, 1, 0), host("b:1", 1, 6, 20000)};
    int s[2];
    assert_int_equal(budget_divide(h, 2, 6, s), 6);
    assert_int_equal(s[0], 1);
    assert_int_equal(s[1], 5);
}

static void test_demand_bounds_the_share(void **state)
{
    (void)state;
    budget_host_t h[2] = {host("a:1", 0, 2, 50000), host("b:1", 0, 3, 1000)};
    int s[2];
    assert_int_equal(budget_divide(h, 2, 40, s), 5); /* the rest stays free */
    assert_int_equal(s[0], 2);
    assert_int_equal(s[1], 3);
}

static void test_floors_come_first_even_without_backlog(void **state)
{
    (void)state;
    budget_host_t h[3] = {host("a:1", 2, 2, 0), host("b:1", 2, 2, 0), host("c:1", 0, 10, 90000)};
    int s[3];
    budget_divide(h, 3, 6, s);
    assert_int_equal(s[0], 2);
    assert_int_equal(s[1], 2);
    assert_int_equal(s[2], 2);
}

static void test_floors_that_do_not_fit_are_shared_round_robin(void **state)
{
    (void)state;
    /* sum of floors 9 > 5: one at a time in id order, never past the budget */
    budget_host_t h[3] = {host("c:1", 3, 3, 0), host("a:1", 3, 3, 0), host("b:1", 3, 3, 0)};
    int s[3];
    assert_int_equal(budget_divide(h, 3, 5, s), 5);
    assert_int_equal(s[1], 2); /* a */
    assert_int_equal(s[2], 2); /* b */
    assert_int_equal(s[0], 1); /* c */
}

static void test_every_master_decides_alike_whatever_the_order(void **state)
{
    (void)state;
    budget_host_t h[4] = {host("d:1", 0, 9, 100), host("b:1", 0, 9, 100), host("a:1", 0, 9, 100),
                          host("c:1", 0, 9, 100)};
    budget_host_t r[4] = {h[2], h[0], h[3], h[1]}; /* a d c b */
    int s[4], t[4];
    budget_divide(h, 4, 7, s);
    budget_divide(r, 4, 7, t);
    assert_int_equal(s[0], t[1]); /* d */
    assert_int_equal(s[1], t[3]); /* b */
    assert_int_equal(s[2], t[0]); /* a */
    assert_int_equal(s[3], t[2]); /* c */
}

static void test_property_never_past_the_budget_or_a_demand(void **state)
{
    (void)state;
    srand(7);
    for (int round = 0; round < 2000; round++) {
        int n = 1 + rand() % 30, budget = rand() % 80;
        budget_host_t h[30];
        int s[30], floors = 0, wants = 0;
        for (int i = 0; i < n; i++) {
            char id[16];
            snprintf(id, sizeof id, "h%d:1", i);
            int want = rand() % 12, floor = rand() % 3;
            h[i] = host(id, floor > want ? want : floor, want, rand() % 3 ? rand() % 100000 : 0);
            floors += h[i].floor;
            wants += want;
        }
        int total = budget_divide(h, n, budget, s);
        assert_true(total <= budget);
        assert_int_equal(total, wants < budget ? wants : budget); /* work-conserving */
        for (int i = 0; i < n; i++) {
            assert_true(s[i] <= h[i].want);
            if (floors <= budget) assert_true(s[i] >= h[i].floor);
        }
    }
}

static void test_share_of_replaces_its_own_record_and_takes_the_smallest_budget(void **state)
{
    (void)state;
    budget_host_t h[2] = {host("a:1", 0, 8, 1000), host("b:1", 0, 8, 1000)};
    h[1].budget = 4; /* b still runs the old config: the stricter budget wins */
    budget_host_t me = host("a:1", 0, 8, 9000); /* a's fresh demand, not its record */
    me.budget = 10;
    assert_int_equal(budget_share_of(h, 2, &me), 4);
    me.pressure = 1000;
    assert_int_equal(budget_share_of(h, 2, &me), 2);
    assert_int_equal(budget_share_of(NULL, 0, &me), 8); /* alone: its demand, within its budget */
}

static void test_demand(void **state)
{
    (void)state;
    assert_int_equal(budget_demand(4, 2, 6, -1, 100), 4);
    assert_int_equal(budget_demand(1, 3, 6, -1, 100), 3);  /* held through scale_down_delay */
    assert_int_equal(budget_demand(9, 3, 6, -1, 100), 6);  /* max_processes */
    assert_int_equal(budget_demand(9, 3, 6, 2, 100), 2);   /* pinned */
}

/* review #13: no host claims slots its max_workers would not let it run */
static void test_demand_within_the_room_max_workers_leaves(void **state)
{
    (void)state;
    assert_int_equal(budget_demand(9, 3, 8, -1, 2), 2);
    assert_int_equal(budget_demand(9, 3, 8, 5, 2), 2);     /* a pin too */
    assert_int_equal(budget_demand(9, 3, 8, -1, 0), 0);
}

static void test_pressure(void **state)
{
    (void)state;
    assert_int_equal(budget_pressure(0, 2.0), 0);
    assert_int_equal(budget_pressure(10, 0.5), 5000);
    assert_int_equal(budget_pressure(10, 0), 10000); /* 1 s a job while unknown */
    assert_true(budget_pressure(INT64_MAX / 2, 1e9) > 0);
}

static void test_cap(void **state)
{
    (void)state;
    budget_cap_in_t in = {.renewed = true, .held = 4, .share = 3, .ttl_ms = 10000, .floor = 1, .target = 4};
    assert_int_equal(budget_cap(&in), 3); /* above its share: gives back */
    in.share = 6;
    assert_int_equal(budget_cap(&in), 4); /* no more than it holds */
    in.renewed = false;
    in.failing_ms = 1000;
    assert_int_equal(budget_cap(&in), 4); /* no renewal: grows no more */
    in.failing_ms = 5000;
    assert_int_equal(budget_cap(&in), 1); /* half the TTL: down to the floor */
}

/* review #5: without a renewal a host below its floor (a newcomer waiting,
 * floors summing past the budget) never grows to it: every lease is still
 * valid, and the slots above what it holds are others'. */
static void test_cap_without_renewal_never_past_what_it_holds(void **state)
{
    (void)state;
    budget_cap_in_t in = {.renewed = false, .held = 2, .share = 3, .ttl_ms = 10000, .floor = 3, .target = 3,
                          .failing_ms = 1000};
    assert_int_equal(budget_cap(&in), 2);
    in.failing_ms = 6000;
    assert_int_equal(budget_cap(&in), 2);
    in.held = 0;
    assert_int_equal(budget_cap(&in), 0); /* never renewed at all */
    in.held = 5, in.target = 4;
    assert_int_equal(budget_cap(&in), 3); /* past half the TTL: the floor */
    in.failing_ms = 1000;
    assert_int_equal(budget_cap(&in), 4); /* before: what it runs */
}

/* budget_settle: the share on the fresh view with the slots now held, the
 * cap from it; without a renewal the last share stays. */
static void test_settle(void **state)
{
    (void)state;
    budget_host_t h[2] = {host("a:1", 0, 8, 1000), host("b:1", 0, 8, 1000)};
    budget_host_t me = host("a:1", 0, 8, 1000);
    me.budget = 6;
    me.held = 2;
    budget_cap_in_t in = {.renewed = true, .held = 2, .share = 0, .ttl_ms = 10000, .floor = 0, .target = 2};
    assert_int_equal(budget_settle(h, 2, &me, &in), 2);
    assert_int_equal(in.share, 3);
    in.renewed = false;
    in.share = 1;
    in.failing_ms = 100;
    assert_int_equal(budget_settle(h, 2, &me, &in), 2);
    assert_int_equal(in.share, 1);
}

/* The floors round by round, as the division did it before bisection: the
 * reference for the property below. */
static void floors_round_robin(const budget_host_t *h, int n, int budget, int *s)
{
    int order[30];
    for (int i = 0; i < n; i++) order[i] = i, s[i] = 0;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(h[order[j - 1]].id, h[order[j]].id) > 0; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int round = 0; budget > 0; round++) {
        bool gave = false;
        for (int k = 0; k < n && budget > 0; k++) {
            int f = h[order[k]].floor < h[order[k]].want ? h[order[k]].floor : h[order[k]].want;
            if (s[order[k]] < f) s[order[k]]++, budget--, gave = true;
        }
        if (!gave) break;
    }
}

static void test_floors_that_do_not_fit_match_the_round_robin(void **state)
{
    (void)state;
    srand(11);
    for (int round = 0; round < 3000; round++) {
        int n = 1 + rand() % 30, budget = 1 + rand() % 60;
        budget_host_t h[30];
        int s[30], ref[30], floors = 0;
        for (int i = 0; i < n; i++) {
            char id[16];
            snprintf(id, sizeof id, "h%02d:1", rand() % 90);
            int f = rand() % 9;
            h[i] = host(id, f, f, 0); /* demand = floor: the division is the floors' alone */
            floors += f;
        }
        if (floors <= budget) continue;
        budget_divide(h, n, budget, s);
        floors_round_robin(h, n, budget, ref);
        for (int i = 0; i < n; i++) assert_int_equal(s[i], ref[i]);
    }
}

/* review #7: records anyone can write into Redis; the sums are 64-bit. With
 * 32-bit sums 4096 floors of 1,000,000 wrapped negative, "fit", and every
 * holder got its whole floor (UBSan: signed overflow). */
static void test_huge_records_neither_overflow_nor_exceed_the_budget(void **state)
{
    (void)state;
    enum { N = 4096 };
    budget_host_t *h = calloc(N, sizeof *h);
    int *s = calloc(N, sizeof *s);
    for (int i = 0; i < N; i++) {
        char id[16];
        snprintf(id, sizeof id, "x%04d:1", i);
        h[i] = host(id, 1000000, 1000000, INT64_C(1) << 50);
        h[i].held = 1000000;
        h[i].budget = 1000000;
    }
    int total = budget_divide(h, N, 1000000, s);
    int64_t sum = 0;
    for (int i = 0; i < N; i++) {
        assert_true(s[i] >= 0 && s[i] <= 1000000);
        sum += s[i];
    }
    assert_true(sum <= 1000000);
    assert_int_equal(total, sum);
    /* one host with a huge floor among many small ones: the rounds are
     * not walked one by one (they were: budget x holders steps) */
    for (int i = 0; i < N; i++) h[i].floor = h[i].want = 1;
    h[7].floor = h[7].want = 1000000;
    assert_int_equal(budget_divide(h, N, 1000000, s), 1000000);
    assert_int_equal(s[7], 1000000 - (N - 1));
    budget_host_t me = host("me:1", 1, 6, 1000);
    me.budget = 6;
    assert_int_equal(budget_share_of(h, N, &me), 1); /* 4097 floors on 6: one each in id order, "me" first */
    free(h);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_backlog_within_one_worker),
        cmocka_unit_test(test_longest_wait_gets_the_next_slot),
        cmocka_unit_test(test_no_backlog_keeps_its_floor_only),
        cmocka_unit_test(test_demand_bounds_the_share),
        cmocka_unit_test(test_floors_come_first_even_without_backlog),
        cmocka_unit_test(test_floors_that_do_not_fit_are_shared_round_robin),
        cmocka_unit_test(test_every_master_decides_alike_whatever_the_order),
        cmocka_unit_test(test_property_never_past_the_budget_or_a_demand),
        cmocka_unit_test(test_share_of_replaces_its_own_record_and_takes_the_smallest_budget),
        cmocka_unit_test(test_demand),
        cmocka_unit_test(test_demand_within_the_room_max_workers_leaves),
        cmocka_unit_test(test_cap_without_renewal_never_past_what_it_holds),
        cmocka_unit_test(test_settle),
        cmocka_unit_test(test_floors_that_do_not_fit_match_the_round_robin),
        cmocka_unit_test(test_huge_records_neither_overflow_nor_exceed_the_budget),
        cmocka_unit_test(test_pressure),
        cmocka_unit_test(test_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
