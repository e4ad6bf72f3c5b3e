/*
 * qlimit.h - fleet-wide job limits in Redis (issue 33): what the limited
 * pop script is told about each limit, and the slot scripts a worker runs
 * while a limited job runs.
 *
 * Keys (one Redis, not a Cluster: the limited pop names them from its
 * arguments), per limit, <key> = <prefix>qpool:limit:<id> (limit_key_id:
 * <queue>|<class> for most):
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
} qlimits_t;

/* Add a limit (rate_per_s 0: none; burst used with a rate). */
void qlimits_add(qlimits_t *ls, const char *prefix, const char *id, const char *class_name, const char *queue,
                 int concurrency, double rate_per_s, int burst);
/* A paused class (qpool pause --class): held like a limit that never has
 * room, on every queue; key <prefix>qpool:limit:paused:<class> (its :wait
 * record says how many jobs the last pop held back for it). */
#define QLIMIT_PAUSED (-1)
#define QLIMIT_PAUSED_HASH "qpool:paused-classes" /* after the prefix: class -> {"by","host","at"} */
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

extern rscript_t SCRIPT_LIMIT_BEAT, SCRIPT_LIMIT_END, SCRIPT_LIMIT_READ;
void qlimit_scripts_init(void);
/* Renew (beat) or give back (end) the concurrency slots of token: one
 * script, run now, over the limits' :run sets (a per-key limit's: xkeys,
 * those the pop named). Returns the number of slots renewed / given back,
 * or -1. */
int qlimit_beat(rconn_t *c, const qlimits_t *ls, const char *token, char *const *xkeys, int nx);
int qlimit_end(rconn_t *c, const qlimits_t *ls, const char *token, char *const *xkeys, int nx);

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
