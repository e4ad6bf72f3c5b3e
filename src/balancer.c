/*
 * balancer.c - see balancer.h.
 */
#include "balancer.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int floor_of(const bal_pool_t *p)
{
    if (p->pinned >= 0) return p->pinned;
    return p->auto_mode ? p->min : p->processes;
}

int balance_want(const bal_pool_t *p)
{
    if (p->pinned >= 0) return p->pinned;
    if (!p->auto_mode) return p->processes;
    double want;
    if (p->backlog <= 0 && p->rate <= 0)
        want = 0;
    else if (p->size_strategy || p->runtime_s <= 0)
        want = (double)p->busy + (double)p->backlog;
    else
        want = ceil(p->rate * p->runtime_s + (double)p->backlog * p->runtime_s / p->target_wait);
    if (want > 1e6) want = 1e6;
    int w = (int)want;
    if (w < p->busy) w = p->busy;
    return clamp(w, p->min, p->max);
}

/* Hysteresis: up at once, down after scale_down_delay. */
static int settle(bal_pool_t *p, int want, int64_t now)
{
    if (!p->auto_mode || p->pinned >= 0) {
        p->below_since_ms = 0;
        return want;
    }
    if (p->paused && want > p->target) want = p->target;
    if (want >= p->target) {
        p->below_since_ms = 0;
        return want;
    }
    if (!p->below_since_ms) p->below_since_ms = now;
    if (now - p->below_since_ms >= (int64_t)(p->scale_down_delay * 1000)) {
        p->below_since_ms = 0;
        return want;
    }
    return p->target;
}

static double demand_weight(const bal_pool_t *p)
{
    double t = p->runtime_s > 0 ? (double)p->backlog * p->runtime_s : (double)p->backlog;
    return t > 0 ? t : 1e-9; /* a pool with no backlog still gets its share of leftovers */
}

void balance(bal_pool_t *pools, int n, int max_workers, int64_t now)
{
    int *goal = xcalloc((size_t)n + 1, sizeof *goal);
    int budget = max_workers;
    for (int i = 0; i < n; i++) budget -= pools[i].stopping;

    for (int i = 0; i < n; i++) {
        bal_pool_t *p = &pools[i];
        p->want = balance_want(p);
        goal[i] = settle(p, p->want, now);
    }
    /* Every pool keeps its minimum (validated to fit in max_workers) and the
     * workers it already has, up to its goal: the budget caps growth, it never
     * takes running workers away. */
    int *got = xcalloc((size_t)n + 1, sizeof *got);
    for (int i = 0; i < n; i++) {
        int f = floor_of(&pools[i]);
        int keep = pools[i].live < goal[i] ? pools[i].live : goal[i];
        if (keep > f) f = keep;
        if (f > goal[i]) f = goal[i];
        got[i] = f;
        budget -= f;
    }
    /* Then by priority, highest first; equal priorities share by backlog. */
    bool *done = xcalloc((size_t)n + 1, sizeof *done);
    for (;;) {
        int prio = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && pools[i].priority > prio) prio = pools[i].priority;
        if (prio < 0) break;
        int need = 0;
        double wsum = 0;
        for (int i = 0; i < n; i++) {
            if (done[i] || pools[i].priority != prio) continue;
            need += goal[i] - got[i];
            wsum += demand_weight(&pools[i]);
        }
        if (budget <= 0) {
            for (int i = 0; i < n; i++)
                if (pools[i].priority == prio) done[i] = true;
            continue;
        }
        if (need <= budget) {
            for (int i = 0; i < n; i++) {
                if (done[i] || pools[i].priority != prio) continue;
                budget -= goal[i] - got[i];
                got[i] = goal[i];
                done[i] = true;
            }
            continue;
        }
        /* Proportional shares, largest remainder, capped at each goal. */
        int left = budget;
        double *rem = xcalloc((size_t)n + 1, sizeof *rem);
        for (int i = 0; i < n; i++) {
            if (done[i] || pools[i].priority != prio) continue;
            double share = (double)budget * demand_weight(&pools[i]) / wsum;
            int extra = (int)floor(share);
            if (extra > goal[i] - got[i]) extra = goal[i] - got[i];
            got[i] += extra;
            left -= extra;
            rem[i] = got[i] < goal[i] ? share - floor(share) : -1;
        }
        while (left > 0) {
            int best = -1;
            for (int i = 0; i < n; i++) {
                if (done[i] || pools[i].priority != prio || got[i] >= goal[i]) continue;
                if (best < 0 || rem[i] > rem[best]) best = i;
            }
            if (best < 0) break;
            got[best]++;
            rem[best] = -1;
            left--;
            if (left > 0) {
                bool any = false;
                for (int i = 0; i < n; i++)
                    if (!done[i] && pools[i].priority == prio && got[i] < goal[i] && rem[i] >= 0) any = true;
                if (!any)
                    for (int i = 0; i < n; i++)
                        if (!done[i] && pools[i].priority == prio && got[i] < goal[i]) rem[i] = 0;
            }
        }
        budget = left;
        free(rem);
        for (int i = 0; i < n; i++)
            if (pools[i].priority == prio) done[i] = true;
    }
    for (int i = 0; i < n; i++) {
        /* Scaling down is not delayed by the budget, only growth is capped. */
        pools[i].target = got[i];
    }
    free(goal);
    free(got);
    free(done);
}
