/*
 * jobstats.h - job counts and histograms per (queue, job class, outcome),
 * and the line a worker sends its master (pure: no I/O, no clock).
 *
 * A worker records every job it settles into a jobstats_t and, about once
 * a second, sends what it recorded since the last line to the master as one
 * JSON line, then starts over. The master decodes each line strictly into
 * the pool's running totals: a queue must be one of the pool's, an outcome
 * one of the five, a histogram exactly METRICS_NBUCKETS counts that add up,
 * and job classes past the cap are counted as "other". A worker can only
 * misreport its own jobs; it cannot grow the master's memory or crash it.
 */
#ifndef QPOOL_JOBSTATS_H
#define QPOOL_JOBSTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "observe/metrics.h"

#define JOBSTATS_LINE_MAX 262144   /* the longest line a master reads */
#define JOBSTATS_QUEUES_MAX 256    /* queue names a table keeps (a pool has at most 30) */

typedef struct {
    int queue;                 /* label id in the table's queues */
    int job;                   /* label id in the table's classes */
    enum job_outcome outcome;
    uint64_t n;
    histogram_t runtime;
    histogram_t wait;          /* only jobs whose wait is known */
} jobstat_t;

typedef struct {
    jobstat_t *v;
    int n, cap;
    labels_t queues;           /* by name: a reload may reorder a pool's queues */
    labels_t classes;          /* capped: the rest is "other" */
} jobstats_t;

void jobstats_init(jobstats_t *s, int class_cap);
void jobstats_free(jobstats_t *s);
/* Forget the counts, keep the class table. */
void jobstats_clear(jobstats_t *s);
/* Zero entries [from, to) (sent already), keeping their places. */
void jobstats_zero(jobstats_t *s, int from, int to);
bool jobstats_empty(const jobstats_t *s);
/* wait_ms < 0: not known (not observed). */
void jobstats_record(jobstats_t *s, const char *queue, const char *job, int outcome, double runtime_ms,
                     double wait_ms);
/* One JSON line (with its newline) of the non-empty entries from *from on,
 * at most max of them; *from moves past them (0 when all are written).
 * Caller frees. */
char *jobstats_encode(const jobstats_t *s, int *from, int max, size_t *len);
/* Add the entries of a line to into. 0 or the number of entries added; -1
 * with err filled when the line is not exactly what jobstats_encode writes,
 * or names a queue not in queues (nothing is added then). */
int jobstats_decode(const char *line, size_t len, char *const *queues, int nqueues, jobstats_t *into, char *err,
                    size_t errn);
/* Add every entry of from to into (matched by names; into's caps apply). */
void jobstats_merge(jobstats_t *into, const jobstats_t *from);
/* Totals over every entry matching queue (NULL: any), class (NULL: any),
 * outcome (-1: any). */
void jobstats_sum(const jobstats_t *s, const char *queue, const char *job, int outcome, uint64_t *n,
                  histogram_t *runtime, histogram_t *wait);

/* {"count","sum","p50","p95","p99"} of a histogram (ms; null when empty). */
cJSON *hist_summary_json(const histogram_t *h);
/* An entry's numbers as {"n","r","rs","w","ws"} (the datagram's form), and
 * back (0, or -1 when it is not exactly that). */
cJSON *jobstat_counts_json(uint64_t n, const histogram_t *runtime, const histogram_t *wait);
int jobstat_counts_from_json(const cJSON *x, uint64_t *n, histogram_t *runtime, histogram_t *wait);

#endif
