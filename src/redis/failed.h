/*
 * failed.h - qpool's failed store (layout in queue.h): one record by uuid,
 * a queue's uuids newest first, the queues that have any, a record as
 * JSON, retry and forget. Shared by `qpool failed` (cli_failed.c) and the
 * HTTP API. Nothing here prints.
 */
#ifndef QPOOL_FAILED_H
#define QPOOL_FAILED_H

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

#include "redis/rconn.h"

typedef struct {
    char *uuid, *connection, *queue, *payload, *exception;
    char *pool, *host;         /* where it failed; NULL: not recorded (a record from before 1.x's pool/host) */
    size_t payload_len;
    long long failed_at;
} frec_t;

void frec_free(frec_t *f);
/* 0 and f filled; -1 when there is no such record (or Redis failed:
 * c->last_error says). */
int failed_get(rconn_t *c, const char *uuid, frec_t *f);
/* The configured queues of a connection (config_connection_queues): on a
 * Redis Cluster, where no set of queues with failures is kept, the store is
 * read through them. Copied; NULL: none, and what was held is freed. */
void failed_use_queues(char *const *queues);
/* ZREVRANGE of a queue's index (limit 0: all); NULL when Redis failed. */
redisReply *failed_queue_uuids(rconn_t *c, const char *queue, long limit);
/* On a cluster: note queues a pool lists (SADD to a set of their own slot)
 * so that their failures stay listed after no pool lists them. 0 or -1;
 * nothing to do (0) without a cluster. */
int failed_note_queues(rconn_t *c, const char *const *queues, int n);
/* SMEMBERS of the queues with failed jobs (on a cluster: those noted, and
 * those configured here); NULL when Redis failed. */
redisReply *failed_queues(rconn_t *c);
/* The failed store's queues in name order, or only `only` when given
 * (NULL-terminated, each and the array the caller's to free; NULL when
 * Redis does not answer). */
char **failed_scope_queues(rconn_t *c, const char *only);
/* {"uuid","connection","queue","name","failed_at","failed_at_utc","exception","pool","host"[,"payload"]}
 * (pool and host "" when the record does not say) */
cJSON *failed_json(const frec_t *f, bool with_payload);
/* The newest records (of one queue, or all), at most limit per queue, as a
 * JSON array (caller frees); NULL when Redis failed. */
cJSON *failed_list(rconn_t *c, const char *queue, long limit, bool with_payload);

/* Push a failed job back onto its queue as `php artisan queue:retry` does
 * (attempts 0, retryUntil's window again from now, due now) and out of the
 * store, in one script. 1 retried (queue gets its name), 0 not in the store
 * (any more), -1 Redis error (err). *kept: its retryUntil could not be
 * refreshed (a payload older than Laravel 12.11). */
int failed_retry(rconn_t *c, const char *uuid, char *queue, size_t qn, bool *kept, char *err, size_t errn);
/* Bulk retry, a bounded page at a time (so that no request holds the HTTP
 * process for long): the failed jobs of a queue (NULL: every queue with
 * failures, in name order), of a class (name; NULL: any), oldest first,
 * looking at at most FAILED_RETRY_PAGE records per call and retrying the
 * matches in scripts of FAILED_RETRY_BATCH. The cursor says where to go on
 * (the records passed over because their class did not match); the caller
 * calls again with it while remaining > 0. */
#define FAILED_RETRY_PAGE 500
#define FAILED_RETRY_BATCH 100
typedef struct {
    const char *queue, *name;   /* in: the scope */
    char *at_queue;             /* in/out: the cursor's queue (NULL: the start; the caller frees) */
    long skip;                  /* in/out: its records passed over */
    int retried, kept;          /* out: retried; of them, retryUntil left as it was */
    long remaining;             /* out: records in scope not yet looked at */
} failed_page_t;
/* 0, or -1 (err) when Redis failed; what was retried before stays retried. */
int failed_retry_page(rconn_t *c, failed_page_t *pg, char *err, size_t errn);

/* Retry, in one script, n (at most FAILED_RETRY_BATCH) records of queue
 * as failed_retry does: the count retried (those still in the store), or
 * -1 (err); *kept adds those whose retryUntil stayed. */
int failed_retry_many(rconn_t *c, const char *queue, const frec_t *recs, int n, int *kept, char *err, size_t errn);
/* Remove, in one script, n uuids of queue's failures: the count removed,
 * or -1 (err). */
int failed_forget_many(rconn_t *c, const char *queue, char *const *uuids, int n, char *err, size_t errn);
/* The key of a record of queue (its slot on a cluster); caller frees. */
char *failed_job_key(rconn_t *c, const char *queue, const char *uuid);

/* Remove a failed job: 1 removed, 0 not there, -1 Redis error. */
int failed_forget(rconn_t *c, const char *uuid);

#endif
