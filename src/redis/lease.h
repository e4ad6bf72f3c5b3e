/*
 * lease.h - the fleet budget's leases in Redis: one hash per pool name on a
 * connection,
 *
 *   <prefix>qpool:{qpool-budget:<pool>}:leases
 *     <host>:<pid>:<nonce> -> "held,floor,want,pressure,budget,expiry,waiting_since"
 *
 * (one key, hash-tagged, so that it works alike on a Redis Cluster). A
 * master claims, renews and releases its slots in ONE script per pool and
 * balance pass (LEASE_LUA): it drops the records whose expiry (Redis time)
 * has passed, grants the claim only out of free slots (the budget in effect
 * is the smallest any live holder was configured with), records at least
 * the processes the caller still runs under the pool (keep: the ledger
 * tells the truth, even after a lost record), writes the caller's record
 * with a new expiry and returns the caller's record first, then every other
 * live holder. Times are Redis's (TIME inside the script), never a host's
 * clock. A master that stops gracefully releases its record at once; one
 * that dies or loses Redis loses it at its expiry. A native worker whose
 * master died keeps a record of its own (held 1) while it finishes its job
 * (lease_orphan_renew). The decisions (what to claim, what to run) are
 * budget.c's.
 *
 * Anyone with access to Redis can write the hash: the script and the C
 * side read records alike and strictly (lease_parse): bounded digit
 * counts, held/floor/want within the record's budget (held up to
 * LEASE_HELD_MAX past it: a host may run more than a lowered budget until
 * its busy workers finish), an expiry at most LEASE_EXPIRY_MAX_MS ahead,
 * printable ids of at most BUDGET_ID_MAX bytes. The script deletes a record
 * that fails them and counts it nowhere; it refuses (an error reply, the
 * renewal fails and is logged) a hash of more than LEASE_MAX_HOLDERS
 * records rather than read it.
 */
#ifndef QPOOL_LEASE_H
#define QPOOL_LEASE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "redis/rconn.h"

#define BUDGET_ID_MAX 255     /* bytes of a holder's id (printable ASCII) */

/* One holder of a pool's budget, as the lease script reports it. */
typedef struct {
    char id[BUDGET_ID_MAX + 1]; /* "<host>:<pid>:<nonce>" of its master (below) */
    int held;                /* slots it holds */
    int floor;               /* its min_processes */
    int want;                /* its demand */
    int64_t pressure;        /* ms of work waiting on its queues */
    int budget;              /* its fleet_max_processes */
    int64_t expiry;          /* Redis ms: when the record lapses unless renewed */
    int64_t waiting_since;   /* Redis ms since it wants more than it holds, 0 = not waiting */
} budget_host_t;

#define LEASE_MAX_HOLDERS 4096
#define LEASE_BUDGET_MAX 1000000     /* QPOOL_FLEET_BUDGET_LIMIT */
#define LEASE_HELD_MAX 1024          /* QPOOL_MAX_WORKERS_LIMIT: what one master can run */
#define LEASE_EXPIRY_MAX_MS 1200000  /* twice the longest fleet_lease_ttl */

/* One pass's request for one pool. */
typedef struct {
    const char *id;          /* lease_holder_id() */
    int64_t ttl_ms;
    int budget;              /* fleet_max_processes */
    int floor;               /* min_processes */
    int want;                /* demand (budget.h) */
    int64_t pressure;
    int claim;               /* the slots it asks to hold */
    int keep;                /* the processes it runs under this lease: held is at least this */
    bool had;                /* it renewed its record within half the TTL: if the record is gone,
                                records were lost (a failover, a restart, a flush): nothing new is granted */
} lease_req_t;

/* One pool's outcome in a batch. */
typedef struct {
    bool ok;
    char err[256];           /* why not: Redis's error reply or the connection's error */
} lease_status_t;

/* What the script (or a read) saw. */
typedef struct {
    int64_t now_ms;          /* Redis's clock */
    int budget;              /* in effect: the smallest of the live holders' */
    int held;                /* the caller's slots after the script; -1 for a read */
    int prior;               /* what its record held before: -1 none (new, lapsed or lost); -1 for a read */
    budget_host_t *hosts;    /* every live holder: the caller's record first (a script's) */
    int n;
} lease_view_t;

/* This process's holder id, "<host>:<pid>:<nonce>" (the nonce random per
 * call: two masters that share a hostname and a pid, as containers on the
 * host's network do, never share a record). Printable, at most
 * BUDGET_ID_MAX bytes. */
void lease_holder_id(char *buf, size_t n);
/* "<host>:<pid>:", what the ids of the master of that pid here start with. */
void lease_holder_prefix(char *buf, size_t n, pid_t pid);
/* The pool's lease key on c (caller frees). */
char *lease_key(const rconn_t *c, const char *pool);
/* Claim, renew or release for n pools on c: their scripts in one round
 * trip (pipelined). views[i] is updated where st[i].ok; the rest keep what
 * they had, and st[i].err says why. A READONLY reply (a failover) drops the
 * connection, so that the next pass finds the new master. Returns how many
 * succeeded, -1 when none could (Redis unavailable). */
int lease_batch(rconn_t *c, char *const *keys, const lease_req_t *reqs, int n, lease_view_t *views,
                lease_status_t *st);
/* A native worker whose master died, finishing its job: its own record
 * (held 1, claiming nothing) so that no other host takes the slot it still
 * runs in; renewed while the job lasts and, as it exits, once more with an
 * expiry a second away (the record outlives the process). 0 or -1. */
int lease_orphan_renew(rconn_t *c, const char *key, const char *id, int budget, int64_t ttl_ms);
/* Release the caller's slots at once (graceful stop, pool gone). */
int lease_release(rconn_t *c, const char *key, const char *id);
/* Every live holder, without changing anything (qpool check, dashboards). */
int lease_list(rconn_t *c, const char *key, lease_view_t *out);
/* Parse a reply of the script or of a read (pure): strictly, records that
 * are not qpool's skipped, more than LEASE_MAX_HOLDERS refused. 0 or -1. */
int lease_parse(const redisReply *r, lease_view_t *out);
void lease_view_free(lease_view_t *v);

#endif
