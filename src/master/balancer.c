/*
 * balancer.c - see balancer.h.
 */
#include "master/balancer.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
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

/* Raise got[i] towards cap[i] for the pools in `level`, out of *budget:
 * everything if it fits, else in proportion to backlog (largest remainder). */
static void allocate(const bal_pool_t *pools, const bool *level, const int *cap, int *got, int n,
                     int *budget)
{
    int need = 0;
    double wsum = 0;
    for (int i = 0; i < n; i++) {
        if (!level[i] || cap[i] <= got[i]) continue;
        need += cap[i] - got[i];
        wsum += demand_weight(&pools[i]);
    }
    if (need == 0 || *budget <= 0) return;
    if (need <= *budget) {
        for (int i = 0; i < n; i++)
            if (level[i] && cap[i] > got[i]) got[i] = cap[i];
        *budget -= need;
        return;
    }
    int left = *budget;
    double *rem = xcalloc((size_t)n + 1, sizeof *rem);
    for (int i = 0; i < n; i++) {
        rem[i] = -1;
        if (!level[i] || cap[i] <= got[i]) continue;
        double share = (double)*budget * demand_weight(&pools[i]) / wsum;
        int extra = (int)floor(share);
        if (extra > cap[i] - got[i]) extra = cap[i] - got[i];
        got[i] += extra;
        left -= extra;
        rem[i] = share - floor(share);
    }
    while (left > 0) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (level[i] && got[i] < cap[i] && (best < 0 || rem[i] > rem[best])) best = i;
        if (best < 0) break;
        got[best]++;
        rem[best] -= 1.0;
        left--;
    }
    free(rem);
    *budget = left;
}

void balance(bal_pool_t *pools, int n, int max_workers, int64_t now)
{
    int *goal = xcalloc((size_t)n + 1, sizeof *goal);
    int *got = xcalloc((size_t)n + 1, sizeof *got);
    int *keep = xcalloc((size_t)n + 1, sizeof *keep);
    bool *level = xcalloc((size_t)n + 1, sizeof *level);
    int budget = max_workers;
    for (int i = 0; i < n; i++) budget -= pools[i].stopping;

    for (int i = 0; i < n; i++) {
        bal_pool_t *p = &pools[i];
        p->want = balance_want(p);
        goal[i] = settle(p, p->want, now);
        /* Every pool keeps its configured minimum (validated to fit). */
        int cfg = p->auto_mode ? p->min : p->processes;
        got[i] = goal[i] < cfg ? goal[i] : cfg;
        budget -= got[i];
        keep[i] = p->live < goal[i] ? p->live : goal[i];
    }
    /* Then level by level: pinned pools (an operator's explicit order), then
     * priorities from high to low. Within a level a pool first keeps the
     * workers it runs, then grows. A lower level may so end up below what it
     * runs: the master then retires its surplus without interrupting jobs. */
    bool *done = xcalloc((size_t)n + 1, sizeof *done);
    for (int i = 0; i < n; i++) level[i] = pools[i].pinned >= 0;
    for (;;) {
        allocate(pools, level, keep, got, n, &budget);
        allocate(pools, level, goal, got, n, &budget);
        for (int i = 0; i < n; i++) done[i] = done[i] || level[i];
        int prio = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && pools[i].priority > prio) prio = pools[i].priority;
        if (prio < 0) break;
        for (int i = 0; i < n; i++) level[i] = !done[i] && pools[i].priority == prio;
    }
    for (int i = 0; i < n; i++) pools[i].target = got[i];
    free(done);
    free(goal);
    free(got);
    free(keep);
    free(level);
}
