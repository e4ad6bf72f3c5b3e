/*
 * qlimit.h - fleet-wide job limits in Redis (issue 33): what the limited
 * pop script is told about each limit, and the slot scripts a worker runs
 * while a limited job runs.
 *
 * Keys per limit, <key> = <prefix>qpool:limit:<id> (limit_key_id:
 * <queue>|<class> for most; on a Redis Cluster <prefix>qpool:limit:{<id>}:
 * one slot per limit, see qlimit_key and worker/wlcluster.h):
 *   <key>:run     sorted set: one member per running job holding a
 *                 concurrency slot (a token fresh per pop), scored by the
 *                 Redis-time ms at which it lapses unless renewed (beat)
 *   <key>:bucket  hash tokens, ts (Redis-time ms): the rate's token bucket;
 *                 missing means full
 *   <key>:wait    hash n, since: the jobs the last limited pop held back for
 *                 this limit and since when it has (lapses 2 s after)
 *   <key>:k:<kid>:run, :bucket  a per-key limit's (tag_prefix) per key
 * The pop (queue.c's POP_LUA with QLIMIT_PRE_LUA in front of its loop)
 * looks at the first `lookahead` ready jobs of each queue in order, takes
 * the first whose limits all have room, moves it to the head of its list
 * and lets Laravel's pop take it; the others stay where they are, their
 * attempts unchanged.
 */
#ifndef QPOOL_QLIMIT_H
#define QPOOL_QLIMIT_H

#include "redis/qlimit_tags.h"
#include "redis/rconn.h"

#define QLIMIT_LOOKAHEAD 50     /* ready jobs per queue a limited pop looks at */
#define QLIMIT_SLOT_TTL_MS 15000 /* a slot not renewed for this long lapses */
#define QLIMIT_BEAT_MS 5000     /* a running job's slots are renewed this often */

typedef struct {
    char *key;                 /* <prefix>qpool:limit:<id> */
    char *run;                 /* <key>:run */
    char *class_name, *queue;  /* "" for any */
    char conc[16], rate[32], burst[16]; /* as the script reads them: rate in jobs per ms */
    int concurrency;
    char *tag_prefix;          /* per key (QLIMIT_TAGS_LUA in qlimit.c); NULL: one limit */
} qlimit_t;

typedef struct {
    qlimit_t *v;
    int n;
    char ttl[16], look[16], count[16];
    bool cluster; /* set before the first qlimits_add: keys for a Redis Cluster (qlimit_key) */
} qlimits_t;

/* A limit's key: <prefix>qpool:limit:<id>, or on a Redis Cluster
 * <prefix>qpool:limit:{<id>}, so that its :run, :bucket and :wait share
 * one hash slot (the cluster pop's lease scripts touch them together). */
char *qlimit_key(const char *prefix, const char *id, bool cluster);

/* Add a limit (rate_per_s 0: none; burst used with a rate). */
void qlimits_add(qlimits_t *ls, const char *prefix, const char *id, const char *class_name, const char *queue,
                 int concurrency, double rate_per_s, int burst);
/* A paused class (qpool pause --class): held like a limit that never has
 * room, on every queue; key <prefix>qpool:limit:paused:<class> (its :wait
 * record says how many jobs the last pop held back for it). */
#define QLIMIT_PAUSED (-1)
#define QLIMIT_PAUSED_HASH "qpool:paused-classes" /* after the prefix: class -> {"by","host","at"} */
#define QLIMIT_PAUSED_HASH_CLUSTER "qpool:{paused-classes}" /* the same on a Redis Cluster */
/* <prefix> + the paused classes' hash key (classpause.c writes, wlimits.c reads). */
char *qlimit_paused_key(const char *prefix, bool cluster);
#define QLIMIT_PAUSED_POLL_MS 1000 /* a worker reads the paused classes this often */
void qlimits_add_paused(qlimits_t *ls, const char *prefix, const char *class_name);
/* The limit added last applies per key: the job's tags that start with
 * tag_prefix (NULL or "": one limit for all). */
void qlimits_set_tag_prefix(qlimits_t *ls, const char *tag_prefix);
/* Keep the first n limits only. */
void qlimits_truncate(qlimits_t *ls, int n);
void qlimits_free(qlimits_t *ls);
/* Arguments the limited pop takes after the plain pop's (slot token first). */
int qlimits_argc(const qlimits_t *ls);
void qlimits_fill_argv(const qlimits_t *ls, const char *token, const char **argv);

/* The Lua run by the limited pop before its loop (queue.c composes it). */
extern const char QLIMIT_PRE_LUA[];

extern rscript_t SCRIPT_LIMIT_BEAT, SCRIPT_LIMIT_END, SCRIPT_LIMIT_READ, SCRIPT_LIMIT_LEASE, SCRIPT_LIMIT_UNLEASE;
void qlimit_scripts_init(void);
/* Renew (beat) or give back (end) the concurrency slots of token: one
 * script, run now, over the limits' :run sets (a per-key limit's: xkeys,
 * those the pop named; on a Redis Cluster one script per limit: each
 * limit's keys have a hash slot of their own, and per-key limits are
 * refused there). Returns the number of slots renewed / given back, or -1. */
int qlimit_beat(rconn_t *c, const qlimits_t *ls, const char *token, char *const *xkeys, int nx);
int qlimit_end(rconn_t *c, const qlimits_t *ls, const char *token, char *const *xkeys, int nx);

/* ---- the limited pop on a Redis Cluster (wlcluster.c drives it): a
 * lease per limit in the limit's own slot, then an exact pop in the
 * queue's slot (queue.c's pick pop), the lease given back when that pop
 * finds the job gone. */

/* Whether limit l applies to a job of class cls (NULL: the payload has no
 * displayName) on queue: as the single-Redis pop's lim_match decides. */
bool qlimit_applies(const qlimit_t *l, const char *queue, const char *cls);
/* Whether two jobs on queue fall under exactly the same limits (class
 * NULL: no displayName; plain: a payload no limit applies to): the leases
 * taken for one serve the other. */
bool qlimit_same_limits(const qlimits_t *ls, const char *queue, const char *a, bool aplain, const char *b,
                        bool bplain);
/* The first limit applying to such a job that full[] marks full (found full
 * earlier in this pop): its index, or -1 (the job may be tried). */
int qlimit_first_full(const qlimits_t *ls, const char *queue, const char *cls, const bool *full);
/* Take limit l's room for one job under token: a concurrency slot and a
 * rate token, both or neither, decided in one script on l's slot (Redis's
 * clock). 1 taken, 0 full (or a paused class: then held jobs, the count of
 * the jobs looked at that it holds, goes to its :wait record), -1 error
 * (the connection may have been dropped). */
int qlimit_lease(rconn_t *c, const qlimit_t *l, const char *ttl, const char *token, long held);
/* Give back what qlimit_lease took (the slot; the rate token, refunded up
 * to the burst): 0, or -1 (a slot not given back lapses within the slot
 * ttl; a token not refunded is a job's share of the rate lost). */
int qlimit_unlease(rconn_t *c, const qlimit_t *l, const char *token);
/* A per-key limit (tag_prefix) on a Cluster: lease every key of the job
 * (kids, from qtags_keys; at least one) and a slot in the limit's own :run
 * at once, in the limit's slot: 1 taken, 0 a key was full, -1 error. */
int qlimit_lease_keys(rconn_t *c, const qlimit_t *l, const qtags_t *kids, const char *ttl, const char *token,
                      long held);
/* Give back what qlimit_lease_keys took: 0, -1. */
int qlimit_unlease_keys(rconn_t *c, const qlimit_t *l, const qtags_t *kids, const char *token);
/* Append to *runs (n names so far) the :run sets qlimit_lease_keys took a
 * slot in, as the single-Redis pop's reply names them: the new count. */
int qlimit_keys_runs(const qlimit_t *l, const qtags_t *kids, char ***runs, int n);

/* A limit as `qpool status` shows it (qlimit_read: one read-only script). */
typedef struct {
    bool known;          /* read this pass */
    long long in_use;    /* concurrency slots held, fleet-wide */
    double tokens;       /* the rate's tokens now; -1: no rate */
    long long waiting;   /* jobs the last limited pop held back for it (among those it looked at) */
    long long waited_ms; /* how long it has held jobs back (0: none now) */
} qlimit_stat_t;
int qlimit_read(rconn_t *c, const qlimit_t *l, qlimit_stat_t *out);

#endif
