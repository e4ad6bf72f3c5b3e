/*
 * test_balancer.c - unit tests and a small simulation for src/balancer.h:
 * how many workers each pool should have.
 *
 * balance() is pure: these tests feed it snapshots the way the master does
 * (src/monitor.c apply_balance), and feed each target back as the next pass's
 * live count, as the master's spawn/stop logic would. Times are in ms and
 * start far from 0 (the master's clock is CLOCK_MONOTONIC).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/balancer.h"

#define T0 ((int64_t)5000000) /* an arbitrary monotonic "now" */
#define SEC ((int64_t)1000)

/* An auto pool as the master sets one up: target starts at min (pool.c). */
static bal_pool_t auto_pool(int min, int max)
{
    bal_pool_t p;
    memset(&p, 0, sizeof p);
    p.auto_mode = true;
    p.processes = 1;
    p.min = min;
    p.max = max;
    p.target_wait = 10;
    p.scale_down_delay = 30;
    p.priority = 1;
    p.pinned = -1;
    p.live = min;
    p.target = min;
    return p;
}

static bal_pool_t off_pool(int processes)
{
    bal_pool_t p;
    memset(&p, 0, sizeof p);
    p.auto_mode = false;
    p.processes = processes;
    p.min = 1;
    p.max = 1;
    p.target_wait = 10;
    p.scale_down_delay = 30;
    p.priority = 1;
    p.pinned = -1;
    p.live = processes;
    p.target = processes;
    return p;
}

/* The master applies the targets: live follows target, stopped children go away. */
static void apply(bal_pool_t *v, int n)
{
    for (int i = 0; i < n; i++) {
        v[i].live = v[i].target;
        v[i].stopping = 0;
        if (v[i].busy > v[i].live) v[i].busy = v[i].live;
    }
}

static int sum_targets(const bal_pool_t *v, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++) s += v[i].target;
    return s;
}

/* ------------------------------------------------------------ single pool */

static void test_starts_at_min(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(2, 10);
    /* empty queue, nothing observed yet */
    assert_int_equal(balance_want(&p), 2);
    balance(&p, 1, 64, T0);
    assert_int_equal(p.want, 2);
    assert_int_equal(p.target, 2);
    /* a fresh struct with target 0 also goes to min, not to 0 or max */
    p = auto_pool(3, 10);
    p.target = 0;
    p.live = 0;
    balance(&p, 1, 64, T0);
    assert_int_equal(p.target, 3);
    /* and stays there pass after pass */
    for (int i = 1; i <= 100; i++) {
        apply(&p, 1);
        balance(&p, 1, 64, T0 + i * SEC);
        assert_int_equal(p.target, 3);
    }
}

static void test_large_backlog_reaches_max_quickly(void **state)
{
    (void)state;
    /* unknown runtime (size rule) */
    bal_pool_t p = auto_pool(1, 20);
    int passes = 0;
    for (int i = 0; i < 3 && p.target < 20; i++) {
        p.backlog = 10000;
        p.busy = p.live;
        balance(&p, 1, 64, T0 + i * SEC);
        assert_true(p.target <= 20);
        apply(&p, 1);
        passes++;
    }
    assert_int_equal(p.target, 20);
    assert_true(passes <= 3);

    /* known runtime (time rule): 10,000 x 0.2 s / 10 s = 200 wanted -> max */
    p = auto_pool(1, 20);
    p.runtime_s = 0.2;
    passes = 0;
    for (int i = 0; i < 3 && p.target < 20; i++) {
        p.backlog = 10000;
        p.busy = p.live;
        p.rate = p.live / p.runtime_s;
        balance(&p, 1, 64, T0 + i * SEC);
        assert_true(p.target <= 20);
        apply(&p, 1);
        passes++;
    }
    assert_int_equal(p.target, 20);
}

static void test_scale_down_only_after_delay(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(1, 10);
    p.scale_down_delay = 30;
    p.backlog = 10000;
    balance(&p, 1, 64, T0);
    assert_int_equal(p.target, 10);
    apply(&p, 1);

    /* the queue empties at T1 */
    const int64_t t1 = T0 + 5 * SEC;
    p.backlog = 0;
    p.busy = 0;
    balance(&p, 1, 64, t1);
    assert_int_equal(p.want, 1);
    assert_int_equal(p.target, 10);
    /* still held one second before the delay is over */
    for (int64_t t = t1 + SEC; t <= t1 + 29 * SEC; t += SEC) {
        apply(&p, 1);
        balance(&p, 1, 64, t);
        assert_int_equal(p.target, 10);
    }
    apply(&p, 1);
    balance(&p, 1, 64, t1 + 30 * SEC - 1);
    assert_int_equal(p.target, 10);
    /* after the delay: back to min */
    apply(&p, 1);
    balance(&p, 1, 64, t1 + 30 * SEC + 1);
    assert_int_equal(p.target, 1);
    assert_int_equal(p.below_since_ms, 0);
}

static void test_scale_down_delay_restarts_when_demand_returns(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(1, 10);
    p.scale_down_delay = 30;
    p.backlog = 10000;
    balance(&p, 1, 64, T0);
    apply(&p, 1);
    p.backlog = 0;
    balance(&p, 1, 64, T0 + 1 * SEC); /* below since T0+1 */
    assert_int_equal(p.target, 10);
    apply(&p, 1);
    p.backlog = 10000;
    balance(&p, 1, 64, T0 + 20 * SEC); /* demand is back: timer cleared */
    assert_int_equal(p.target, 10);
    assert_int_equal(p.below_since_ms, 0);
    apply(&p, 1);
    p.backlog = 0;
    balance(&p, 1, 64, T0 + 25 * SEC); /* below again since T0+25 */
    apply(&p, 1);
    balance(&p, 1, 64, T0 + 40 * SEC); /* 31 s after the first drop, 15 s after the second */
    assert_int_equal(p.target, 10);
    apply(&p, 1);
    balance(&p, 1, 64, T0 + 54 * SEC);
    assert_int_equal(p.target, 10);
    apply(&p, 1);
    balance(&p, 1, 64, T0 + 55 * SEC);
    assert_int_equal(p.target, 1);
}

static void test_scale_down_never_below_busy(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(1, 10);
    p.scale_down_delay = 0;
    p.backlog = 10000;
    balance(&p, 1, 64, T0);
    assert_int_equal(p.target, 10);
    apply(&p, 1);
    /* queue empty but 4 workers still running jobs */
    p.backlog = 0;
    p.busy = 4;
    balance(&p, 1, 64, T0 + SEC);
    assert_int_equal(p.want, 4);
    assert_int_equal(p.target, 4);
    apply(&p, 1);
    p.busy = 0;
    balance(&p, 1, 64, T0 + 2 * SEC);
    assert_int_equal(p.target, 1);
}

static void test_balance_off_stays_at_processes(void **state)
{
    (void)state;
    bal_pool_t p = off_pool(3);
    const int64_t backlogs[] = {0, 10000, 0, 5, 1000000};
    for (int i = 0; i < 5; i++) {
        p.backlog = backlogs[i];
        p.rate = 50;
        p.runtime_s = i ? 0.5 : 0;
        balance(&p, 1, 64, T0 + i * 100 * SEC);
        assert_int_equal(p.want, 3);
        assert_int_equal(p.target, 3);
        apply(&p, 1);
    }
    /* a fresh pool goes straight to processes */
    p = off_pool(5);
    p.target = 0;
    p.live = 0;
    balance(&p, 1, 64, T0);
    assert_int_equal(p.target, 5);
}

static void test_pinned_overrides(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(1, 10);
    p.backlog = 10000;
    balance(&p, 1, 64, T0);
    apply(&p, 1);
    assert_int_equal(p.target, 10);
    /* pinned down: applies at once, no scale-down delay, whatever the backlog */
    p.pinned = 5;
    balance(&p, 1, 64, T0 + SEC);
    assert_int_equal(p.want, 5);
    assert_int_equal(p.target, 5);
    apply(&p, 1);
    /* pinned up on an empty queue */
    p.backlog = 0;
    p.pinned = 8;
    balance(&p, 1, 64, T0 + 2 * SEC);
    assert_int_equal(p.target, 8);
    apply(&p, 1);
    /* pinned to 0 (below min) */
    p.pinned = 0;
    balance(&p, 1, 64, T0 + 3 * SEC);
    assert_int_equal(p.target, 0);
    apply(&p, 1);
    /* unpinned: back to the balancer's rule (up at once on a backlog) */
    p.pinned = -1;
    p.backlog = 10000;
    balance(&p, 1, 64, T0 + 4 * SEC);
    assert_int_equal(p.target, 10);

    /* a balance = off pool can be pinned too */
    bal_pool_t o = off_pool(2);
    o.pinned = 4;
    balance(&o, 1, 64, T0);
    assert_int_equal(o.target, 4);
    o.pinned = -1;
    apply(&o, 1);
    balance(&o, 1, 64, T0 + SEC);
    assert_int_equal(o.target, 2);
}

/* Contract (balancer.h): "Across pools the sum stays within max_workers".
 * `qpool scale` pins a pool (control.c accepts 0..max_workers and says
 * "apply now, within max_workers") while another pool runs most of the
 * budget: the targets must still add up to at most max_workers. */
static void test_pin_stays_within_max_workers(void **state)
{
    (void)state;
    bal_pool_t v[2] = {auto_pool(1, 10), auto_pool(1, 10)};
    v[1].backlog = 100000;
    balance(v, 2, 10, T0);
    apply(v, 2);
    assert_int_equal(v[0].target, 1);
    assert_int_equal(v[1].target, 9);
    v[0].pinned = 8;
    balance(v, 2, 10, T0 + SEC);
    if (sum_targets(v, 2) > 10)
        fail_msg("pinned pool target %d + other pool target %d = %d > max_workers 10", v[0].target,
                 v[1].target, sum_targets(v, 2));
}

/* ------------------------------------------------------------ the time formula */

static void test_time_formula(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(1, 50);
    /* rate x runtime: 100/s x 0.05 s = 5 busy workers in steady state */
    p.rate = 100;
    p.runtime_s = 0.05;
    p.backlog = 0;
    assert_int_equal(balance_want(&p), 5);
    balance(&p, 1, 64, T0);
    assert_int_equal(p.target, 5);

    /* backlog x runtime / target_wait: 100 x 0.5 / 10 = 5 */
    p = auto_pool(1, 50);
    p.rate = 0;
    p.runtime_s = 0.5;
    p.backlog = 100;
    p.target_wait = 10;
    assert_int_equal(balance_want(&p), 5);

    /* both terms: 10 x 0.5 + 40 x 0.5 / 10 = 5 + 2 */
    p.rate = 10;
    p.backlog = 40;
    assert_int_equal(balance_want(&p), 7);
    /* rounded up: 10 x 0.5 + 41 x 0.5 / 10 = 7.05 -> 8 */
    p.backlog = 41;
    assert_int_equal(balance_want(&p), 8);
    /* a shorter target_wait wants more */
    p.backlog = 40;
    p.target_wait = 2;
    assert_int_equal(balance_want(&p), 15);

    /* clamped to max */
    p = auto_pool(1, 50);
    p.rate = 1000;
    p.runtime_s = 1;
    assert_int_equal(balance_want(&p), 50);
    /* clamped to min */
    p = auto_pool(3, 50);
    p.rate = 1;
    p.runtime_s = 0.01;
    assert_int_equal(balance_want(&p), 3);
    /* never below busy */
    p.busy = 6;
    assert_int_equal(balance_want(&p), 6);
    /* but busy does not lift it above max */
    p.busy = 70;
    assert_int_equal(balance_want(&p), 50);
}

static void test_size_strategy(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(1, 50);
    p.size_strategy = true;
    p.runtime_s = 0.5; /* known, but the size rule ignores it */
    p.rate = 100;
    p.busy = 2;
    p.backlog = 5;
    assert_int_equal(balance_want(&p), 7);
    p.backlog = 0;
    assert_int_equal(balance_want(&p), 2);
    p.backlog = 1000;
    assert_int_equal(balance_want(&p), 50);
    /* unknown runtime with the time strategy also uses busy + backlog */
    p = auto_pool(1, 50);
    p.busy = 3;
    p.backlog = 4;
    assert_int_equal(balance_want(&p), 7);
}

/* ------------------------------------------------------------ several pools */

static void test_two_pools_split_by_backlog(void **state)
{
    (void)state;
    bal_pool_t v[2] = {auto_pool(1, 20), auto_pool(1, 20)};
    v[0].backlog = 3000;
    v[1].backlog = 1000;
    balance(v, 2, 10, T0);
    assert_int_equal(sum_targets(v, 2), 10);
    assert_true(v[0].target > v[1].target);
    assert_in_range(v[0].target, 6, 8); /* 1 + 3/4 of 8 = 7 */
    assert_in_range(v[1].target, 2, 4);
    assert_int_equal(v[0].want, 20);
    assert_int_equal(v[1].want, 20);

    /* equal backlogs: an even split */
    bal_pool_t e[2] = {auto_pool(1, 20), auto_pool(1, 20)};
    e[0].backlog = e[1].backlog = 500;
    balance(e, 2, 10, T0);
    assert_int_equal(e[0].target, 5);
    assert_int_equal(e[1].target, 5);

    /* minimums are kept even when one backlog dwarfs the other */
    bal_pool_t m[2] = {auto_pool(3, 20), auto_pool(3, 20)};
    m[0].backlog = 100000;
    m[1].backlog = 100;
    balance(m, 2, 10, T0);
    assert_int_equal(sum_targets(m, 2), 10);
    assert_true(m[1].target >= 3);
    assert_true(m[0].target >= 3);
    assert_true(m[0].target > m[1].target);

    /* time strategy: shared by backlog x runtime, not by job count */
    bal_pool_t t[2] = {auto_pool(1, 50), auto_pool(1, 50)};
    t[0].backlog = 100;
    t[0].runtime_s = 1.0; /* 100 s of work */
    t[1].backlog = 1000;
    t[1].runtime_s = 0.01; /* 10 s of work */
    t[0].target_wait = t[1].target_wait = 1; /* both want more than the budget */
    balance(t, 2, 12, T0);
    assert_int_equal(sum_targets(t, 2), 12);
    assert_true(t[0].target > t[1].target);
}

static void test_priority_before_backlog(void **state)
{
    (void)state;
    /* low priority listed first, with a huge backlog */
    bal_pool_t v[2] = {auto_pool(2, 50), auto_pool(1, 10)};
    v[0].priority = 1;
    v[0].backlog = 100000;
    v[1].priority = 10;
    v[1].backlog = 4;
    balance(v, 2, 10, T0);
    assert_int_equal(v[1].want, 4);
    assert_int_equal(v[1].target, 4); /* high priority gets what it wants */
    assert_int_equal(v[0].target, 6); /* low gets the rest */
    assert_int_equal(sum_targets(v, 2), 10);

    /* a tight budget: high priority first, low keeps its minimum */
    bal_pool_t w[2] = {auto_pool(2, 50), auto_pool(1, 10)};
    w[0].priority = 1;
    w[0].backlog = 100000;
    w[1].priority = 10;
    w[1].backlog = 4;
    balance(w, 2, 5, T0);
    assert_int_equal(w[0].target, 2);
    assert_int_equal(w[1].target, 3);

    /* feeding back over several passes does not change the split */
    for (int i = 1; i <= 5; i++) {
        apply(v, 2);
        v[0].busy = v[0].live;
        balance(v, 2, 10, T0 + i * SEC);
        assert_int_equal(v[1].target, 4);
        assert_int_equal(v[0].target, 6);
    }
}

/* The same acceptance item when the low-priority pool got there first: it
 * already runs everything max_workers allows when the high-priority pool's
 * backlog arrives. The high-priority pool must not be starved for as long as
 * the low one has a backlog; the low one only keeps its minimum guaranteed.
 * Allowed: one scale_down_delay plus a few passes for the handover. */
static void test_priority_not_starved_by_running_low_pool(void **state)
{
    (void)state;
    bal_pool_t v[2] = {auto_pool(2, 50), auto_pool(1, 10)};
    v[0].priority = 1;
    v[1].priority = 10;
    v[0].backlog = 100000;
    balance(v, 2, 10, T0);
    apply(v, 2);
    assert_int_equal(v[0].target, 9);
    assert_int_equal(v[1].target, 1);
    v[0].busy = v[0].live;

    /* the high-priority queue gets 4 jobs; the low backlog stays huge */
    int64_t t = T0 + SEC;
    int reached_at = -1;
    for (int pass = 0; pass < 45 && reached_at < 0; pass++, t += SEC) {
        v[1].backlog = 4;
        v[1].busy = v[1].live;
        balance(v, 2, 10, t);
        assert_true(v[0].target >= 2);
        if (v[1].target >= 4) reached_at = pass;
        /* the master stops what is above target; stopping children exit by the next pass */
        apply(v, 2);
        v[0].busy = v[0].live;
    }
    if (reached_at < 0)
        fail_msg("high-priority pool stayed at %d (wants %d) for 45 s while the low-priority pool kept %d",
                 v[1].target, v[1].want, v[0].target);
}

static void test_paused_pool_not_scaled_up(void **state)
{
    (void)state;
    bal_pool_t p = auto_pool(1, 10);
    p.target = p.live = 2;
    p.paused = true;
    p.backlog = 10000;
    for (int i = 0; i < 5; i++) {
        balance(&p, 1, 64, T0 + i * SEC);
        assert_int_equal(p.target, 2);
        apply(&p, 1);
    }
    /* but it can go down, after the delay */
    p.backlog = 0;
    p.busy = 0;
    balance(&p, 1, 64, T0 + 10 * SEC);
    assert_int_equal(p.target, 2);
    apply(&p, 1);
    balance(&p, 1, 64, T0 + 10 * SEC + (int64_t)(p.scale_down_delay * 1000) + 1);
    assert_int_equal(p.target, 1);
    apply(&p, 1);
    /* resumed: up at once */
    p.paused = false;
    p.backlog = 10000;
    balance(&p, 1, 64, T0 + 100 * SEC);
    assert_int_equal(p.target, 10);
}

static void test_paused_pool_leaves_budget_to_others(void **state)
{
    (void)state;
    bal_pool_t v[2] = {auto_pool(1, 10), auto_pool(1, 10)};
    v[0].paused = true;
    v[0].backlog = 10000;
    v[1].backlog = 10000;
    balance(v, 2, 8, T0);
    assert_int_equal(v[0].target, 1);
    assert_int_equal(v[1].target, 7);
}

static void test_stopping_counts_against_max_workers(void **state)
{
    (void)state;
    /* one pool growing while 3 of its old children are still stopping */
    bal_pool_t p = auto_pool(1, 20);
    p.live = p.target = 2;
    p.stopping = 3;
    p.backlog = 10000;
    balance(&p, 1, 10, T0);
    assert_int_equal(p.target, 7);
    assert_true(p.target + p.stopping <= 10);

    /* stopping children of another pool count too */
    bal_pool_t v[2] = {auto_pool(1, 20), auto_pool(1, 20)};
    v[0].live = v[0].target = 2;
    v[0].busy = 2;
    v[0].stopping = 4;
    v[1].backlog = 10000;
    balance(v, 2, 10, T0);
    assert_int_equal(v[0].target, 2);
    assert_int_equal(v[1].target, 4);
    assert_true(sum_targets(v, 2) + v[0].stopping + v[1].stopping <= 10);
    /* once they have exited the room is used */
    v[0].stopping = 0;
    v[1].live = v[1].target;
    balance(v, 2, 10, T0 + SEC);
    assert_int_equal(v[1].target, 8);
    assert_int_equal(sum_targets(v, 2), 10);
}

static void test_stopping_not_counted_twice(void **state)
{
    (void)state;
    /* live 2 + stopping 2, wanting 2 (both busy, empty queue): target 2 */
    bal_pool_t p = auto_pool(1, 10);
    p.live = p.target = 2;
    p.busy = 2;
    p.stopping = 2;
    balance(&p, 1, 4, T0);
    assert_int_equal(p.want, 2);
    assert_int_equal(p.target, 2); /* not cut to fit the stopping ones twice */
    balance(&p, 1, 64, T0 + SEC);
    assert_int_equal(p.target, 2); /* and no extra children to replace the stopping ones */
}

/* ------------------------------------------------------------ property check */

static uint32_t rng_state;

static uint32_t rnd(void)
{
    /* xorshift32: fixed seed, same scenarios on every run */
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    rng_state = x;
    return x;
}

static int rnd_int(int lo, int hi)
{
    return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}

static int floor_of(const bal_pool_t *p)
{
    if (p->pinned >= 0) return p->pinned;
    return p->auto_mode ? p->min : p->processes;
}

static void test_property_sum_within_max_workers(void **state)
{
    (void)state;
    rng_state = 0x9e3779b9u;
    for (int sc = 0; sc < 300; sc++) {
        bal_pool_t v[6];
        int n = rnd_int(1, 6);
        int maxw = rnd_int(n, 48);
        /* minimums that fit in max_workers, as config validation ensures */
        int room = maxw;
        for (int i = 0; i < n; i++) {
            int fl = rnd_int(0, room / (n - i) > 3 ? 3 : room / (n - i));
            room -= fl;
            if (rnd() % 4 == 0) {
                v[i] = off_pool(fl);
            } else {
                v[i] = auto_pool(fl, fl + rnd_int(fl ? 0 : 1, 30));
                v[i].size_strategy = rnd() % 3 == 0;
                v[i].target_wait = rnd_int(1, 30);
                v[i].scale_down_delay = rnd_int(0, 5);
            }
            v[i].priority = rnd_int(1, 3);
        }
        int64_t now = T0;
        for (int pass = 0; pass < 30; pass++, now += SEC) {
            int prev[6], total_stopping = 0;
            for (int i = 0; i < n; i++) {
                bal_pool_t *p = &v[i];
                prev[i] = p->target;
                uint32_t r = rnd() % 4;
                p->backlog = r == 0 ? 0 : r == 1 ? rnd_int(1, 20) : r == 2 ? rnd_int(100, 100000) : p->backlog;
                p->runtime_s = rnd() % 3 == 0 ? 0 : rnd_int(1, 5000) / 1000.0;
                p->rate = rnd() % 3 == 0 ? 0 : rnd_int(0, 500) / 10.0;
                p->busy = p->live ? rnd_int(0, p->live) : 0;
                p->paused = p->auto_mode && rnd() % 8 == 0;
                /* occasional pins between the configured floor and the current target */
                int cfl = p->auto_mode ? p->min : p->processes;
                p->pinned = rnd() % 10 == 0 && cfl <= p->target ? rnd_int(cfl, p->target) : -1;
                total_stopping += p->stopping;
            }
            balance(v, n, maxw, now);
            int sum = 0;
            bool grew = false;
            for (int i = 0; i < n; i++) {
                bal_pool_t *p = &v[i];
                sum += p->target;
                if (p->pinned >= 0) {
                    /* a pin is honoured as far as max_workers allows, never beyond it */
                    int cfl = p->auto_mode ? p->min : p->processes;
                    assert_true(p->target <= p->pinned);
                    assert_true(p->target >= (cfl < p->pinned ? cfl : p->pinned));
                } else if (!p->auto_mode) {
                    assert_int_equal(p->target, p->processes);
                } else {
                    assert_true(p->target >= p->min);
                    assert_true(p->target <= p->max);
                    if (p->paused) assert_true(p->target <= prev[i]);
                }
                int base = floor_of(p) > p->live ? floor_of(p) : p->live;
                if (p->target > base) grew = true;
            }
            if (sum > maxw)
                fail_msg("scenario %d pass %d: targets sum to %d > max_workers %d", sc, pass, sum, maxw);
            if (grew && sum + total_stopping > maxw)
                fail_msg("scenario %d pass %d: grew to %d with %d stopping > max_workers %d", sc, pass, sum,
                         total_stopping, maxw);
            /* the master: stop what is above target, spawn up to target within max_workers */
            int children = 0;
            for (int i = 0; i < n; i++) {
                bal_pool_t *p = &v[i];
                p->stopping = p->stopping / 2; /* some stopping children have exited */
                if (p->live > p->target) {
                    p->stopping += p->live - p->target;
                    p->live = p->target;
                }
                children += p->live + p->stopping;
            }
            for (int i = 0; i < n; i++) {
                bal_pool_t *p = &v[i];
                while (p->live < p->target && children < maxw) {
                    p->live++;
                    children++;
                }
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starts_at_min),
        cmocka_unit_test(test_large_backlog_reaches_max_quickly),
        cmocka_unit_test(test_scale_down_only_after_delay),
        cmocka_unit_test(test_scale_down_delay_restarts_when_demand_returns),
        cmocka_unit_test(test_scale_down_never_below_busy),
        cmocka_unit_test(test_balance_off_stays_at_processes),
        cmocka_unit_test(test_pinned_overrides),
        cmocka_unit_test(test_pin_stays_within_max_workers),
        cmocka_unit_test(test_time_formula),
        cmocka_unit_test(test_size_strategy),
        cmocka_unit_test(test_two_pools_split_by_backlog),
        cmocka_unit_test(test_priority_before_backlog),
        cmocka_unit_test(test_priority_not_starved_by_running_low_pool),
        cmocka_unit_test(test_paused_pool_not_scaled_up),
        cmocka_unit_test(test_paused_pool_leaves_budget_to_others),
        cmocka_unit_test(test_stopping_counts_against_max_workers),
        cmocka_unit_test(test_stopping_not_counted_twice),
        cmocka_unit_test(test_property_sum_within_max_workers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
