/*
 * lease.h - the fleet budget's leases in Redis: one hash per pool name on a
 * connection,
 *
 *   <prefix>qpool:{qpool-budget:<pool>}:leases
 *     <host>:<pid> -> "held,floor,want,pressure,budget,expiry,waiting_since"
 *
 * (one key, hash-tagged, so that it works alike on a Redis Cluster). A
 * master claims, renews and releases its slots in ONE script per pool and
 * balance pass (LEASE_LUA): it drops the records whose expiry (Redis time)
 * has passed, grants the claim only out of free slots (the budget in effect
 * is the smallest any live holder was configured with), never takes back a
 * slot a worker still runs in, writes the caller's record with a new expiry
 * and returns every live holder. Times are Redis's (TIME inside the
 * script), never a host's clock. A master that stops gracefully releases
 * its record at once; one that dies or loses Redis loses it at its expiry.
 * The decisions (what to claim, what to run) are budget.c's.
 */
#ifndef QPOOL_LEASE_H
#define QPOOL_LEASE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "budget.h"
#include "rconn.h"

#define LEASE_MAX_HOLDERS 4096

/* One pass's request for one pool. */
typedef struct {
    const char *id;          /* "<host>:<pid>" */
    int64_t ttl_ms;
    int budget;              /* fleet_max_processes */
    int floor;               /* min_processes */
    int want;                /* demand (budget.h) */
    int64_t pressure;
    int claim;               /* the slots it asks to hold */
    int keep;                /* the workers it runs: never released under them */
} lease_req_t;

/* What the script (or a read) saw. */
typedef struct {
    int64_t now_ms;          /* Redis's clock */
    int budget;              /* in effect: the smallest of the live holders' */
    int held;                /* the caller's slots after the script; -1 for a read */
    budget_host_t *hosts;    /* every live holder, the caller included */
    int n;
} lease_view_t;

/* The pool's lease key on c (caller frees). */
char *lease_key(const rconn_t *c, const char *pool);
/* Claim, renew or release for n pools on c: their scripts in one round
 * trip (pipelined). views[i] is updated where ok[i]; the rest keep what they
 * had. Returns how many succeeded, -1 when none could (Redis unavailable). */
int lease_batch(rconn_t *c, char *const *keys, const lease_req_t *reqs, int n, lease_view_t *views, bool *ok);
/* Release the caller's slots at once (graceful stop, pool gone). */
int lease_release(rconn_t *c, const char *key, const char *id);
/* Every live holder, without changing anything (qpool check, dashboards). */
int lease_list(rconn_t *c, const char *key, lease_view_t *out);
/* Parse a reply of the script or of a read (pure). 0 or -1. */
int lease_parse(const redisReply *r, lease_view_t *out);
void lease_view_free(lease_view_t *v);

#endif
