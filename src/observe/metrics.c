/*
 * metrics.c - see metrics.h.
 */
#include "observe/metrics.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

const double METRICS_BOUNDS_MS[METRICS_NBUCKETS - 1] = {
    1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 3600000,
};

static int bucket_of(double ms)
{
    int lo = 0, hi = METRICS_NBUCKETS - 1; /* hi: the +Inf bucket */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ms <= METRICS_BOUNDS_MS[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void hist_observe(histogram_t *h, double ms)
{
    if (!(ms >= 0)) ms = 0; /* NaN and negatives (a clock step) count as 0 */
    h->bucket[bucket_of(ms)]++;
    h->count++;
    h->sum_ms += ms;
}

void hist_merge(histogram_t *into, const histogram_t *from)
{
    for (int i = 0; i < METRICS_NBUCKETS; i++) into->bucket[i] += from->bucket[i];
    into->count += from->count;
    into->sum_ms += from->sum_ms;
}

double hist_quantile(const histogram_t *h, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < METRICS_NBUCKETS; i++) total += h->bucket[i];
    if (!total) return -1;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    double rank = q * (double)total;
    uint64_t below = 0;
    for (int i = 0; i < METRICS_NBUCKETS; i++) {
        uint64_t in = h->bucket[i];
        if (in && (double)(below + in) >= rank) {
            if (i == METRICS_NBUCKETS - 1) return METRICS_BOUNDS_MS[METRICS_NBUCKETS - 2];
            double lo = i ? METRICS_BOUNDS_MS[i - 1] : 0, hi = METRICS_BOUNDS_MS[i];
            return lo + (hi - lo) * ((rank - (double)below) / (double)in);
        }
        below += in;
    }
    return METRICS_BOUNDS_MS[METRICS_NBUCKETS - 2];
}

static const char *const OUTCOMES[OUTCOME_N] = {"done", "released", "failed", "timed_out", "crashed"};

const char *outcome_name(int outcome)
{
    return outcome >= 0 && outcome < OUTCOME_N ? OUTCOMES[outcome] : "?";
}

int outcome_from_name(const char *s)
{
    for (int i = 0; i < OUTCOME_N; i++)
        if (!strcmp(s, OUTCOMES[i])) return i;
    return -1;
}

void labels_init(labels_t *l, int cap)
{
    l->names = NULL;
    l->n = 0;
    l->cap = cap > 0 ? cap : 0;
}

void labels_free(labels_t *l)
{
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    l->names = NULL;
    l->n = 0;
}

int labels_id(labels_t *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name)) return i;
    if (l->n >= l->cap || !strcmp(name, LABEL_OTHER)) return l->cap;
    l->names = xrealloc(l->names, sizeof *l->names * (size_t)(l->n + 1));
    l->names[l->n] = xstrdup(name);
    return l->n++;
}

const char *labels_name(const labels_t *l, int id)
{
    return id >= 0 && id < l->n ? l->names[id] : LABEL_OTHER;
}
