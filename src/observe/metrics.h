/*
 * metrics.h - the arithmetic of qpool's job metrics (pure: no I/O, no clock).
 *
 * A histogram counts observations (job runtimes, job waits) in fixed
 * buckets, Prometheus-style: bucket i counts values <= bounds[i] (the last
 * bucket is +Inf), and sum/count go along, so histograms from many workers,
 * minutes and hosts merge by addition and percentiles can be read from any
 * merge. A label table maps job classes (or other unbounded names) to small
 * ids, up to a cap; every name past the cap shares the id of "other", so a
 * label explosion cannot grow memory, Redis or a scrape.
 */
#ifndef QPOOL_METRICS_H
#define QPOOL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bounds in milliseconds; one more bucket for +Inf. The same bounds
 * serve runtimes and waits (1 ms .. 1 h). */
#define METRICS_NBUCKETS 18
extern const double METRICS_BOUNDS_MS[METRICS_NBUCKETS - 1];

typedef struct {
    uint64_t bucket[METRICS_NBUCKETS];   /* not cumulative: bucket i = (bounds[i-1], bounds[i]] */
    uint64_t count;
    double sum_ms;
} histogram_t;

void hist_observe(histogram_t *h, double ms);
void hist_merge(histogram_t *into, const histogram_t *from);
/* The q-quantile (0 < q < 1) in ms, by linear interpolation inside the
 * bucket that holds it (as Prometheus's histogram_quantile); values in the
 * +Inf bucket read as the last finite bound. -1 when empty. */
double hist_quantile(const histogram_t *h, double q);

/* Job outcomes, as counted and labelled. */
enum job_outcome {
    OUTCOME_DONE = 0,
    OUTCOME_RELEASED,
    OUTCOME_FAILED,
    OUTCOME_TIMED_OUT,
    OUTCOME_CRASHED,
    OUTCOME_N
};
const char *outcome_name(int outcome);
int outcome_from_name(const char *s);    /* -1 if unknown */

/* Capped interning: ids 0..cap-1 for the first cap distinct names; the
 * name "other" (id cap) for the rest. */
typedef struct {
    char **names;
    int n, cap;
} labels_t;

void labels_init(labels_t *l, int cap);
void labels_free(labels_t *l);
int labels_id(labels_t *l, const char *name);
const char *labels_name(const labels_t *l, int id);
#define LABEL_OTHER "other"

#endif
