/*
 * budget.c - see budget.h.
 */
#include "master/budget.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

#define PRESSURE_MAX_MS ((int64_t)1 << 50) /* exact in a double and in Lua */

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

int budget_demand(int want, int target, int max, int pinned, int room)
{
    int d = pinned >= 0 ? pinned : want > target ? want : target;
    if (pinned < 0) d = min_int(d, max);
    d = min_int(d, room);
    return d < 0 ? 0 : d;
}

int64_t budget_pressure(int64_t backlog, double runtime_s)
{
    if (backlog <= 0) return 0;
    double ms = (double)backlog * (runtime_s > 0 ? runtime_s * 1000.0 : 1000.0);
    if (ms > (double)PRESSURE_MAX_MS) return PRESSURE_MAX_MS;
    return ms < 1 ? 1 : (int64_t)ms;
}

int budget_cap(const budget_cap_in_t *in)
{
    int held = in->held > 0 ? in->held : 0;
    if (in->renewed) return min_int(held, in->share);
    /* No renewal: grow no more, and never past the slots it holds (a
     * newcomer below its floor stays there); past half the TTL, down to the
     * floor before the lease lapses and others take the slots. */
    if (in->failing_ms * 2 >= in->ttl_ms) return min_int(in->floor, held);
    return min_int(in->target, held);
}

int budget_settle(const budget_host_t *h, int n, const budget_host_t *me, budget_cap_in_t *in)
{
    if (in->renewed) in->share = budget_share_of(h, n, me);
    return budget_cap(in);
}

void budget_bound(bal_pool_t *x, int cap)
{
    x->max = min_int(x->max, cap);
    x->min = min_int(x->min, cap);
    if (x->pinned > cap) x->pinned = cap;
    if (x->target > cap) x->target = cap;
}

int budget_find(const budget_host_t *h, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(h[i].id, id)) return i;
    return -1;
}

/* ---- the division ---- */

typedef struct {
    const budget_host_t *h;
    int *share;
} div_t_;

/* Does holder a come before b for the next slot? The longer wait per
 * worker first, pressure / (share + 1); then the smaller share; then the id
 * (every master decides alike). */
static bool before(const div_t_ *d, int a, int b)
{
    double pa = (double)d->h[a].pressure / (d->share[a] + 1);
    double pb = (double)d->h[b].pressure / (d->share[b] + 1);
    if (pa != pb) return pa > pb;
    if (d->share[a] != d->share[b]) return d->share[a] < d->share[b];
    return strcmp(d->h[a].id, d->h[b].id) < 0;
}

static void sift_down(const div_t_ *d, int *heap, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && before(d, heap[l], heap[top])) top = l;
        if (r < n && before(d, heap[r], heap[top])) top = r;
        if (top == i) return;
        int t = heap[i];
        heap[i] = heap[top];
        heap[top] = t;
        i = top;
    }
}

static int by_id_cmp(const void *a, const void *b, void *arg)
{
    const budget_host_t *h = arg;
    return strcmp(h[*(const int *)a].id, h[*(const int *)b].id);
}

static int floor_of(const budget_host_t *h)
{
    int f = h->floor < h->want ? h->floor : h->want;
    return f > 0 ? f : 0;
}

/* The slots the floors take when each gets at most `level`. */
static int64_t floors_at(const budget_host_t *h, int n, int level)
{
    int64_t sum = 0;
    for (int i = 0; i < n; i++) sum += min_int(floor_of(&h[i]), level);
    return sum;
}

/* Floors first: all of them when they fit, else one slot a round to each
 * holder still below its floor, in id order. The rounds are not walked:
 * the last whole round (the highest level every floor can be raised to)
 * is found by bisection, then the part round goes in id order. Returns
 * what is left. */
static int give_floors(const budget_host_t *h, int n, int left, int *share)
{
    int top = 0;
    for (int i = 0; i < n; i++) top = floor_of(&h[i]) > top ? floor_of(&h[i]) : top;
    int lo = 0, hi = top;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (floors_at(h, n, mid) <= left)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (int i = 0; i < n; i++) share[i] = min_int(floor_of(&h[i]), lo);
    left -= (int)floors_at(h, n, lo);
    if (lo == top || left <= 0) return left;
    int *order = xcalloc((size_t)n + 1, sizeof *order);
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, by_id_cmp, (void *)h);
    for (int k = 0; k < n && left > 0; k++)
        if (share[order[k]] < floor_of(&h[order[k]])) share[order[k]]++, left--;
    free(order);
    return left;
}

int budget_share_of(const budget_host_t *h, int n, const budget_host_t *me)
{
    budget_host_t *all = xcalloc((size_t)n + 1, sizeof *all);
    int k = 0, budget = me->budget;
    for (int i = 0; i < n; i++) {
        if (!strcmp(h[i].id, me->id)) continue;
        all[k++] = h[i];
        if (h[i].budget < budget) budget = h[i].budget;
    }
    all[k++] = *me;
    int *share = xcalloc((size_t)k, sizeof *share);
    budget_divide(all, k, budget, share);
    int mine = share[k - 1];
    free(share);
    free(all);
    return mine;
}

int budget_divide(const budget_host_t *h, int n, int budget, int *share)
{
    for (int i = 0; i < n; i++) share[i] = 0;
    int left = give_floors(h, n, budget > 0 ? budget : 0, share);
    div_t_ d = {h, share};
    int *heap = xcalloc((size_t)n + 1, sizeof *heap);
    int hn = 0;
    for (int i = 0; i < n; i++)
        if (share[i] < h[i].want) heap[hn++] = i;
    for (int i = hn / 2 - 1; i >= 0; i--) sift_down(&d, heap, hn, i);
    while (left > 0 && hn > 0) {
        int i = heap[0];
        share[i]++;
        left--;
        if (share[i] >= h[i].want) heap[0] = heap[--hn];
        sift_down(&d, heap, hn, 0);
    }
    free(heap);
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += share[i];
    return (int)total; /* at most the budget: every slot came out of it */
}
