/*
 * history.h - job metrics by minute, kept in Redis across restarts and
 * hosts.
 *
 *   <prefix>qpool:metrics:<minute>   hash, <minute> = UNIX seconds / 60
 *     field  "<host>|<pool>|<queue>|<class>|<outcome>"
 *     value  {"n":N,"r":[18 runtime buckets],"rs":ms,"w":[18 wait buckets],"ws":ms}
 *
 * Each master adds what its workers reported since its last write (every
 * balance pass) into the current minute's hash; a write merges into what is
 * there (a script adds the counts), so a retry or two writes in one minute
 * lose nothing. Every minute key expires metrics_retention after its
 * minute: nothing grows without bound. The minute is Redis's (the master
 * corrects its clock by the offset its heartbeat measured), so hosts with
 * skewed clocks still write into the same minute.
 */
#ifndef QPOOL_HISTORY_H
#define QPOOL_HISTORY_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "observe/jobstats.h"
#include "redis/rconn.h"

/* A pool's worker exits since the last write, by kind ("memory",
 * "crashed"...): fields "<host>|<pool>|-|-|exit:<kind>" whose count is the
 * number of exits (empty histograms). */
typedef struct {
    const char *const *kind;
    const uint64_t *count;
    int n;
} history_exits_t;

/* Add s (one pool's jobs) and its worker exits (NULL: none) to minute's
 * hash. 0; -1 when Redis was not reached (the caller keeps them and tries
 * again); -2 when the script refused it (the caller drops them: they would
 * be refused again). */
int history_add(rconn_t *c, int64_t minute, const char *host, const char *pool, const jobstats_t *s,
                const history_exits_t *exits, int64_t retention_s);
/* Minutes [from, to] merged, as {"from":m,"to":m,"minutes":[{"minute":m,
 * "series":[{"host","pool","queue","job","outcome","count","runtime_ms",
 * "wait_ms"}...],"all":{"count","runtime_ms","wait_ms"}}...]} (caller
 * frees; "all" merges the minute's job series, so its percentiles are
 * exact); NULL when Redis is unavailable. */
cJSON *history_read(rconn_t *c, int64_t from, int64_t to);
/* Minutes read per pipeline: a day is 24 round trips, and between them
 * Redis serves its other clients (a health check's PING) rather than
 * 1,440 HGETALLs of 16 MB in one go. */
#define HISTORY_READ_CHUNK 60

/* The job records of a connection, two keys of one hash tag:
 *   <prefix>qpool:{qpool-jobs}:list  the records (JSON), newest first,
 *                                    trimmed to job_history_size
 *   <prefix>qpool:{qpool-jobs}:uuid  hash: uuid -> that job's records in
 *                                    the list ('\n'-joined, oldest first,
 *                                    at most HISTORY_ATTEMPTS_MAX)
 * both expiring metrics_retention after the last write. */
#define HISTORY_ATTEMPTS_MAX 50    /* a job's newest attempts the index keeps */
#define HISTORY_TRIM_BUDGET 1000   /* records trimmed per write past those added */
#define HISTORY_SCAN_PAGE 500      /* records per LRANGE of a filtered list */
#define HISTORY_SCAN_MAX 100000    /* records a filtered list reads, at most (job_history_size's bound) */
#define HISTORY_SCAN_BYTES (64 << 20) /* bytes a filtered list reads, at most (records with payloads) */

/* Push a pool's pending job records (oldest first) onto the list and the
 * index, trimmed to keep, expiring retention_s after this write: one
 * script. 0, -1 (Redis not reached: keep them), -2 (refused: drop them). */
int history_add_jobs(rconn_t *c, const char *const *recs, int n, int keep, int64_t retention_s);
/* The newest records, newest first, that match every filter given (NULL:
 * any), at most limit: {"jobs":[...]} (caller frees), with "truncated":
 * true when a filtered search stopped after HISTORY_SCAN_MAX records or
 * HISTORY_SCAN_BYTES with more in the list; NULL
 * when Redis is unavailable. With uuid: that job's records, from the
 * index (one read, bounded). */
typedef struct {
    const char *queue, *pool, *name, *outcome, *uuid, *host;
    const char *tag;              /* one of the record's tags, exactly */
    const char *text;             /* in its name, exception or payload (ASCII case ignored) */
    long attempt;                 /* 0: any */
    int silenced;                 /* 1: silenced only, -1: not silenced, 0: any */
    int64_t since_ms, until_ms;   /* finished_at within; 0: unbounded */
    int limit;
} job_filter_t;
/* Could a stored record (its JSON text) match f's tag and text? A byte
 * test before parsing: false only when it certainly cannot. Pure. */
bool history_may_match(const char *rec, size_t len, const job_filter_t *f);
/* Does this parsed record match every filter of f? Pure. */
bool history_matches(const cJSON *rec, const job_filter_t *f);
cJSON *history_jobs(rconn_t *c, const job_filter_t *f);
/* The same over another list of records (a monitored tag's, monitored.h);
 * f->uuid is a filter there, not an index read. */
cJSON *history_jobs_in(rconn_t *c, const char *key, const job_filter_t *f);

#endif
