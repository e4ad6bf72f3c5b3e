/*
 * queue.h - Laravel's Redis queue protocol (see the protocol doc §1-§3),
 * spoken with qpool's own Lua scripts.
 *
 * Data layout is Laravel's: <prefix>queues:<q> (list of ready payloads),
 * :delayed and :reserved (sorted sets scored by UNIX time), :notify (one "1"
 * per ready job, for blocking waits). The scripts keep Laravel's effects and
 * differ where Laravel's lose data or cost round trips:
 *   - pop works over all of a pool's queues in priority order in one call,
 *     migrating due delayed / expired reserved jobs first when asked;
 *   - a payload that is not JSON or has no numeric "attempts" is moved to
 *     the failed store with its raw bytes instead of being lost;
 *   - release only re-adds a job it actually removed from :reserved, so
 *     retrying a release after a lost reply cannot duplicate the job.
 *
 * Failed store (qpool's own, per queue, bounded by failed_limit):
 *   <prefix>qpool:failed:job:<uuid>  hash: uuid connection queue payload exception failed_at
 *   <prefix>qpool:failed:<queue>     sorted set of uuids by failed_at (trimmed to the bound)
 *   <prefix>qpool:failed:queues      set of queue names with entries
 */
#ifndef QPOOL_QUEUE_H
#define QPOOL_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis/qlimit.h"
#include "redis/rconn.h"

typedef struct {
    char *name;                /* unprefixed */
    char *ready, *delayed, *reserved, *notify, *failed;   /* full keys */
    char *unpop;               /* <prefix>qpool:unpop:<name>: give-back tokens, outside Laravel's queues:* */
    int slot;                  /* Redis Cluster slot of its keys (with a hash tag in the name, all of them) */
} qkeys_t;

typedef struct {
    char *prefix;
    qkeys_t *q;
    int nq;
    char *failed_queues;       /* <prefix>qpool:failed:queues */
    char *failed_job_prefix;   /* <prefix>qpool:failed:job: */
} queue_set_t;

void queue_set_init(queue_set_t *qs, const char *prefix, char *const *names, int n);
void queue_set_free(queue_set_t *qs);
void qkeys_init(qkeys_t *k, const char *prefix, const char *name);
void qkeys_free(qkeys_t *k);

/* Scripts, loaded once per connection and called by SHA. */
extern rscript_t SCRIPT_POP_LIMITED;
/* Load the limited pop too (a worker with limits, after queue_load_scripts). */
int queue_load_limited(rconn_t *c);
extern rscript_t SCRIPT_POP, SCRIPT_RELEASE, SCRIPT_FAIL, SCRIPT_PUSH, SCRIPT_MAXEXC, SCRIPT_UNPOP, SCRIPT_EXTEND,
    SCRIPT_CLAIM, SCRIPT_POP_PICK;
void queue_scripts_init(void);

enum pop_kind { POP_EMPTY = 0, POP_JOB = 1, POP_POISON = 2 };

typedef struct {
    int qidx;
    char *raw, *reserved;      /* a job popped ahead: reserved is its held copy (attempts as they were) */
    size_t rawlen, reslen;
    char *run;                 /* popped ahead: the reserved copy it becomes when it starts (claim) */
    size_t runlen;
} pop_item_t;

typedef struct {
    enum pop_kind kind;
    int qidx;                  /* index into the queue_set */
    char *raw;                 /* original payload (POP_JOB) */
    size_t rawlen;
    char *reserved;            /* the exact :reserved member (POP_JOB) */
    size_t reslen;
    char *uuid;                /* POP_POISON: where it went */
    char *reason;              /* POP_POISON */
    bool migrate_full;         /* a migration batch was full: migrate again soon */
    bool has_next_due;         /* POP_EMPTY: earliest delayed/reserved score */
    int64_t next_due;
    pop_item_t *extra;         /* POP_JOB with prefetch: further jobs, held (pop_item_t) */
    char *run;                 /* POP_JOB with hold: the first job is held; its reserved copy once started */
    size_t runlen;
    int nextra;
    bool limit_blocked;        /* POP_EMPTY of the limited pop: ready jobs wait on a full limit */
    bool has_limit_wake;       /* limit_blocked: the pop said when to look again (limit_wake_ms) */
    int64_t limit_wake_ms;     /* 0: now (more held jobs to look past), else ms until a held rate's next token */
    char **lim_keys;           /* POP_JOB of the limited pop: every :run set it took a slot in */
    int nlim_keys;
    bool pick_gone;            /* POP_EMPTY of a pick pop: none of its candidates was still ready */
} pop_result_t;
#define POP_LIM_KEYS_MAX 2048   /* above 256 limits x (4 keys + the limit's own set) */

typedef struct {
    int64_t now;
    int retry_after;
    bool migrate;
    int batch;
    const char *connection;    /* Laravel queue connection name, for failed records */
    const char *pool, *host;   /* where a poison payload's failed record says it failed (NULL: not recorded) */
    int failed_limit;
    uint32_t skip_mask;        /* bit i: do not pop queue i (paused) */
    bool token_taken;          /* a BLPOP already consumed this job's notify token */
    int token_q;               /* 1 + the queue index whose :notify that BLPOP took it from; 0: not known */
    bool promised;             /* the last limited pop told this worker when a rate's token is its own */
    int want;                  /* pop up to this many jobs (prefetch); 0 means 1 */
    bool hold;                 /* none starts now (a pop ahead): hold the first job too */
    const qlimits_t *limits;   /* non-NULL with limits: the limited pop (one job, no hold; not on a Cluster) */
    const char *slot_token;    /* with limits: the concurrency slots' member for the job it pops */
    /* On a Redis Cluster with limits (wlcluster.c): the pick pop. Over the
     * one queue not skipped it pops the first of the npicks candidate
     * payloads still among the first QLIMIT_LOOKAHEAD ready jobs, as the
     * plain pop would the head, or says they are gone (pick_gone); with no
     * candidates it pops nothing (a migration, and the next due time). */
    bool pick;
    int npicks;
    const char *const *picks;
    const size_t *picklens;
} pop_args_t;

/* Append a pop call (no reply read). Returns false if every queue is skipped. */
bool queue_append_pop(rconn_t *c, const queue_set_t *qs, const pop_args_t *a);
/* Read the reply of a pop call: rconn_read, except on a Redis Cluster,
 * where the call is one script per run of same-slot queues (in priority
 * order): the first was sent by queue_append_pop, and while each answers
 * "empty" the next is sent and read, so a pop costs one round trip per run
 * up to the first with a job. The reply is then as one call's. */
int queue_read_pop(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, redisReply **out);
/* Parse the reply of a pop call. false on an unexpected reply. */
bool queue_parse_pop(const queue_set_t *qs, const pop_args_t *a, redisReply *r, pop_result_t *out);
void pop_result_free(pop_result_t *r);
void pop_item_free(pop_item_t *it);

/* Start a job popped ahead: its held reservation becomes its reserved copy
 * (attempts + 1), same expiry. Reply: 1 done, 2 done before, 0 the
 * reservation is gone. */
void queue_append_claim(rconn_t *c, const qkeys_t *k, const char *held, size_t heldlen, const char *reserved,
                        size_t reslen);
void queue_append_ack(rconn_t *c, const qkeys_t *k, const char *reserved, size_t len);
/* Release: the reservation (reserved) is replaced by payload (the reserved
 * copy with qpool's due-time stamp and no qpoolTwin marker, or the same
 * bytes) in :delayed at available_at; should a byte-identical twin be due
 * then already, the copy carries qpoolTwin = marker (fresh per release).
 * Idempotent: a resent release finds no reservation. */
void queue_append_release(rconn_t *c, const qkeys_t *k, const char *reserved, size_t len, const char *payload,
                          size_t plen, const char *marker, int64_t available_at);
/* Give back a popped job that never started: if its reservation is still
 * ours, the original payload goes back to the head of its queue with its
 * notify token, attempts as they were. token (unique per give-back, kept
 * when it is resent) makes it idempotent: <prefix>qpool:unpop:<queue>:<token> is
 * set for QPOOL_UNPOP_TOKEN_TTL seconds and a second call does nothing.
 * Reply: 1 given back, 0 not (already done, or the reservation is gone). */
#define QPOOL_UNPOP_TOKEN_TTL "86400"
void queue_append_unpop(rconn_t *c, const qkeys_t *k, const char *reserved, size_t reslen,
                        const char *raw, size_t rawlen, const char *token);
/* Renew a reservation if it is still there. Reply: 1 renewed, 0 gone. */
void queue_append_extend(rconn_t *c, const qkeys_t *k, const char *reserved, size_t len,
                         int64_t until);

typedef struct {
    const char *uuid;
    const char *connection;
    const char *payload;
    size_t payload_len;
    const char *exception;
    int64_t failed_at;
    int limit;
    const char *pool, *host;   /* where it failed (NULL: not recorded) */
} fail_record_t;

/* reserved may be NULL (nothing to remove, e.g. `qpool failed` tooling). */
void queue_append_fail(rconn_t *c, const queue_set_t *qs, const qkeys_t *k, const char *reserved,
                       size_t reslen, const fail_record_t *f);

/* Producer side (appended only: callers pipeline many and read the replies). */
void queue_append_push(rconn_t *c, const qkeys_t *k, const char *payload, size_t len);
void queue_append_later(rconn_t *c, const qkeys_t *k, const char *payload, size_t len, int64_t at);

/* maxExceptions counter (on the cache connection): returns the new count, and
 * *reached when it hit max (the key is then deleted), or -1 on error. */
long queue_count_exception(rconn_t *cache, const char *key, long max, bool *reached);

/* LLEN ready, ZCARD delayed, ZCARD reserved: three replies, in that order. */
void queue_append_counts(rconn_t *c, const qkeys_t *k);

/* SCRIPT LOAD every script on this connection (after connecting). */
int queue_load_scripts(rconn_t *c);

#endif
