/*
 * alerts.h - when qpool raises an alert and when it resolves it (pure: no
 * I/O, no clock, no logging; the master passes the time in, then logs each
 * event and feeds it to the operator's command).
 *
 * Three triggers:
 *   long_wait     per (pool, queue): the observed wait (p95 of the last
 *                 minute) or the age of the oldest ready job, whichever is
 *                 known and larger, is at or above the queue's threshold
 *                 (a per-queue override, else the default for all queues);
 *   crash_loop    per pool: crash_loop_crashes crashes within the last
 *                 crash_loop_window_s seconds;
 *   failure_rate  per pool: failed / finished in the last minute is at or
 *                 above failure_rate, over at least failure_min_jobs jobs.
 *
 * An episode opens (a "firing" event) on the first pass whose condition
 * holds, and stays open, silently, while it holds. It resolves (a
 * "resolved" event) once its condition has not held for clear_after_s
 * seconds on end; a breach inside that time keeps the same episode. A
 * condition holds only when it is known to: a wait nobody could measure
 * (both -1), or a minute with fewer than failure_min_jobs finished jobs,
 * counts as not holding. An episode whose pool or queue is missing from a
 * pass, or whose trigger the configuration turned off, resolves on that
 * pass at once; so the state is bounded by the observations: one entry per
 * open episode, one per pool seen last pass with at most
 * crash_loop_crashes crash times.
 *
 * Crashes: crashes_total is the pool's count since it started. The first
 * pass that sees a pool only takes its baseline; each later pass counts
 * the increase as crashes at that pass's time. A count that goes backwards
 * (the pool was recreated) becomes the new baseline and forgets the pool's
 * crash times, so it never raises an alert by itself.
 *
 * Each event is a cJSON object:
 *   {"alert":"long_wait"|"crash_loop"|"failure_rate",
 *    "state":"firing"|"resolved",
 *    "pool":"<pool>",
 *    "queue":"<queue>",                       (long_wait only)
 *    "value":<number>,                        the measure now; when resolved,
 *                                             the last known one
 *    "threshold":<number>,
 *    "measure":"wait_p95"|"oldest_ready"|"crashes"|"failure_rate",
 *    "since":<epoch seconds the episode began>,
 *    "at":<epoch seconds of this event>}
 * Waits are seconds, crashes a count within the window, failure_rate a
 * fraction 0..1; since and at are whole seconds (floor of the ms passed in).
 */
#ifndef QPOOL_ALERTS_H
#define QPOOL_ALERTS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "config/config.h"

/* alerts_conf_t, the alerts = { ... } settings, is config.h's. */

/* The long_wait threshold of a queue in seconds; 0 = off. */
double alerts_wait_threshold(const alerts_conf_t *c, const char *queue);
/* 0 if every field is in range, -1 otherwise. */
int alerts_conf_check(const alerts_conf_t *c);

/* One queue of one pool. Seconds; -1 = unknown. Pass an empty queue's
 * oldest_ready as 0, and every configured queue on every pass (with -1s
 * when Redis could not be read): a queue left out counts as gone. */
typedef struct {
    const char *pool, *queue;
    double wait_p95_s;
    double oldest_ready_s;
} alert_queue_obs_t;

/* One pool; every pool on every pass, or it counts as gone. */
typedef struct {
    const char *pool;
    uint64_t finished, failed;           /* in the last minute */
    uint64_t crashes_total;              /* since the pool started; monotonic */
} alert_pool_obs_t;

typedef struct alerts alerts_t;

alerts_t *alerts_new(void);
void alerts_free(alerts_t *a);
/* Feed one pass of observations taken at now_ms (wall clock, ms). Appends
 * the events of the pass (raised or resolved) to the array events as cJSON
 * objects it then owns, in order: queues as given, then pools as given
 * (crash_loop before failure_rate), then episodes of what is gone or off.
 * Returns the number appended; -1 (nothing appended, state unchanged) when
 * the configuration is out of range, a name is NULL or empty, a (pool,
 * queue) or pool comes twice, or events is not an array. */
int alerts_observe(alerts_t *a, const alerts_conf_t *c, int64_t now_ms, const alert_queue_obs_t *qs, int nq,
                   const alert_pool_obs_t *ps, int np, cJSON *events);
/* Open episodes now (for status output and tests). */
int alerts_open(const alerts_t *a);

#endif
