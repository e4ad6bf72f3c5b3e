/*
 * jobhist.h - the record of recent jobs (pure: no I/O, no clock).
 *
 * A worker keeps the last JOBHIST_WORKER_KEEP attempts it settled in a ring
 * of fixed-size records (a copy of a few strings per job, nothing
 * formatted) and sends them to its master with its job stats, about once a
 * second, as datagrams {"h":[...]}. The master decodes them strictly (its
 * own pool's queues, bounded strings, finite numbers), adds what it knows
 * for certain (pool, host, worker, pid: never the worker's word), and keeps
 * the newest job_history_size for its next write to Redis, where one list
 * per connection holds the newest job_history_size records of every host:
 *
 *   <prefix>qpool:{qpool-jobs}:list  JSON records, newest first, trimmed
 *                                    to job_history_size, and its index by
 *                                    uuid (:uuid), both expiring
 *                                    metrics_retention after the last write
 *                                    (history.h)
 *
 * A record (the API's shape, docs/api.md):
 *   {"uuid","id","name","queue","pool","host","worker","pid","attempt",
 *    "outcome","wait_ms","runtime_ms","started_at","finished_at",
 *    "exception","tags","silenced","payload","payload_truncated"[,"batch"]}
 * tags: the payload's own "tags" array (an app with Horizon pushes it),
 * then those the handler reported (the PHP adapter computes Horizon's),
 * bounded by JOBHIST_TAGS_MAX and JOBHIST_TAG_MAX.
 * batch: the Laravel batch (Bus::batch) the job belongs to, when its
 * handler reported one (jobhist_batch_ok); absent otherwise (batchjobs.h).
 * payload only for released jobs (the copy that waits to run again) and,
 * with job_history_payloads, done ones; a failed job's is in the failed
 * store under its uuid.
 */
#ifndef QPOOL_JOBHIST_H
#define QPOOL_JOBHIST_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "observe/metrics.h"

#define JOBHIST_WORKER_KEEP 256      /* a worker sends at most this many per flush (the newest) */
#define JOBHIST_PAYLOAD_MAX 16384    /* payload bytes kept per record; longer ones are cut */
#define JOBHIST_EXC_MAX 512          /* exception summary bytes */
#define JOBHIST_PAGE 16              /* records per datagram */
#define JOBHIST_DATAGRAM_MAX 98304   /* bytes, roughly: records past it go in the next */
#define JOBHIST_TAGS_MAX 20          /* tags kept per record */
#define JOBHIST_TAG_MAX 120          /* bytes per tag; longer ones are cut */
#define JOBHIST_BATCH_MAX 64         /* bytes of a batch id */

typedef struct {
    char uuid[64], id[64], name[256], queue[64];
    char batch[JOBHIST_BATCH_MAX + 1];  /* "" or a batch id (jobhist_batch_ok) */
    char exception[JOBHIST_EXC_MAX];
    char *payload;                   /* owned, or NULL */
    size_t payload_len;
    bool payload_truncated;
    char *tags;                      /* owned, or NULL: '\n'-joined, each one line of valid UTF-8 */
    size_t tags_len;
    int ntags;
    bool silenced;                   /* done, and silenced (jobhist_silenced) */
    bool apart;                      /* a copy went to the watched queue (jobwatch.h): "k" */
    long attempt;
    enum job_outcome outcome;
    double wait_ms;                  /* < 0: not known */
    double runtime_ms;
    int64_t started_at, finished_at; /* UNIX ms */
} jobrec_t;

/* The worker's ring. */
typedef struct {
    jobrec_t *v;
    int cap, n, next;                /* n records, the oldest at (next - n) mod cap */
    double sample, acc;              /* done/released jobs kept: sample (0..1); failures always */
    bool payloads;                   /* done jobs' payloads too */
    uint64_t lost;                   /* records overwritten before they were sent (jobhist_add_copy) */
} jobhist_t;

void jobhist_init(jobhist_t *h, int cap, double sample, bool payloads);
void jobhist_free(jobhist_t *h);
/* Take (or, by the sample, skip) one settled attempt; returns the record
 * to fill, with its strings cleared, or NULL when it is skipped. The
 * caller sets the fields (jobhist_set_str, jobhist_set_payload). */
jobrec_t *jobhist_add(jobhist_t *h, int outcome);
void jobhist_set_str(char *dst, size_t cap, const char *s);     /* one line, cut at a UTF-8 boundary */
void jobhist_set_payload(jobrec_t *r, const char *p, size_t len);
/* Add the strings of a JSON array (text of len bytes; anything else is
 * ignored) to r's tags: each repaired to valid UTF-8, made one line, cut at
 * JOBHIST_TAG_MAX bytes; empty and repeated ones skipped; at most
 * JOBHIST_TAGS_MAX in all. Returns how many were added. */
int jobhist_add_tags(jobrec_t *r, const char *json, size_t len);
/* Is s a batch id a record may carry: 1..JOBHIST_BATCH_MAX bytes of
 * ASCII letters, digits, '-', '_', '.' or ':' (Laravel's are UUIDs)? Pure. */
bool jobhist_batch_ok(const char *s);
/* The batch id of the job a payload holds when its handler reported none
 * (a timeout, a crash, a job failed without running): the string property
 * "batchId" of the top-level object of data.command, Laravel's PHP
 * serialize text of the command (the Batchable trait), read without PHP:
 * linear, no recursion, never a nested object's. Into out (checked with
 * jobhist_batch_ok) and true; false and out untouched otherwise. Pure. */
bool jobhist_payload_batch(const char *raw, size_t len, char out[JOBHIST_BATCH_MAX + 1]);
/* Is a done record silenced, as Horizon's `silenced` and `silenced_tags`
 * (NULL-terminated lists, or NULL) and its Silenced interface (the
 * handler said so: job_says) have it? Only done records are. */
bool jobhist_silenced(const jobrec_t *r, char *const *classes, char *const *tags, bool job_says);
/* The next datagram of at most JOBHIST_PAGE records, oldest first,
 * removing them; NULL when the ring is empty. Caller frees. */
char *jobhist_encode(jobhist_t *h, size_t *len);
/* The same as {"<key>":[...]} without removing them: *taken says how many
 * it holds, for jobhist_drop once the datagram went. */
char *jobhist_encode_keep(const jobhist_t *h, const char *key, size_t *len, int *taken);
void jobhist_drop(jobhist_t *h, int n);                         /* remove the oldest n */
/* A copy of r (its tags, not its payload) into h, the oldest overwritten
 * when h is full (counted in h->lost). */
void jobhist_add_copy(jobhist_t *h, const jobrec_t *r);

/* Master side: a datagram into API records (pool, host, worker, pid
 * added), appended to out (a cJSON array). The count added, or -1 (err
 * filled) and nothing added. */
int jobhist_decode(const char *buf, size_t len, char *const *queues, int nqueues, const char *pool,
                   const char *host, const char *worker, int pid, cJSON *out, char *err, size_t errn);
/* The same, for {"h":[...]} (the ring) or {"m":[...]} (watched records,
 * jobwatch.h); apart, when not NULL (JOBHIST_PAGE entries), says which
 * records a worker also sent as watched ("k"). */
int jobhist_decode_ex(const char *buf, size_t len, char *const *queues, int nqueues, const char *pool,
                      const char *host, const char *worker, int pid, cJSON *out, bool *apart, char *err,
                      size_t errn);
/* Is this datagram job history (not job stats)? Either kind. */
bool jobhist_is_history(const char *buf, size_t len);
/* Is it a worker's watched records ({"m":...})? */
bool jobhist_is_watched(const char *buf, size_t len);

/* The master's pending records: the newest cap JSON strings not yet
 * written to Redis. */
typedef struct {
    char **v;
    bool *apart;                     /* per slot: its monitored copy goes by the watched queue */
    int cap, n, next;
    size_t bytes;
} jobhist_pending_t;

#define JOBHIST_RECORD_MAX 65536       /* a stored record's JSON, at most */
#define JOBHIST_PENDING_BYTES (16 << 20) /* what the master holds for Redis, at most */

#define JOBHIST_PENDING_MAX 100000   /* job_history_size's upper bound */
void jobhist_pending_init(jobhist_pending_t *p, int cap);
void jobhist_pending_free(jobhist_pending_t *p);
void jobhist_pending_add(jobhist_pending_t *p, char *json);     /* takes json; drops the oldest when full */
void jobhist_pending_add_apart(jobhist_pending_t *p, char *json, bool apart);
/* The records, oldest first (n of them); the caller clears after a write. */
int jobhist_pending_list(const jobhist_pending_t *p, const char **out, int max);
/* Those of them not marked apart (for the monitored lists). */
int jobhist_pending_list_near(const jobhist_pending_t *p, const char **out, int max);
void jobhist_pending_clear(jobhist_pending_t *p);

#endif
