/*
 * wlimits.h - the fleet-wide limits a native worker pops under (issue 33):
 * the limits of the config that apply to its pool's queues, the slot token
 * of its current pop, and the concurrency slots its running job holds:
 * renewed every QLIMIT_BEAT_MS while it runs, given back when it ends.
 * See redis/qlimit.h for the keys and docs/operations.md for the bounds.
 */
#ifndef QPOOL_WLIMITS_H
#define QPOOL_WLIMITS_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "redis/qlimit.h"

typedef struct {
    qlimits_t ls;
    char token[37];      /* the member of the last pop's slots */
    bool held;           /* the current job holds slots under token */
    int64_t next_beat_ms;
    int nconf;           /* ls.v[0..nconf) are the config's; the paused classes follow */
    char *prefix, *paused_key;
    char *pool;           /* its pool's name: a class paused in one pool ("<class>@<pool>") holds here only */
    int64_t next_paused_ms;
    bool paused_key_bad;  /* its paused-classes key is no hash: said once */
    char **xkeys;         /* the per-key limits' :run sets the current job holds a slot in */
    int nx;
} wlimits_t;

/* The config's limits that apply to pool p, with keys under prefix (on a
 * Redis Cluster: hash-tagged, qlimit_key). */
void wlimits_init(wlimits_t *wl, const qconf_t *conf, const pool_conf_t *p, const char *prefix, bool cluster);
void wlimits_free(wlimits_t *wl);
/* Read the paused classes (<prefix>qpool:paused-classes; on a Redis
 * Cluster <prefix>qpool:{paused-classes}) when
 * QLIMIT_PAUSED_POLL_MS have passed, and hold their jobs from the next pop:
 * 1 when the set became non-empty (load the limited pop), 0 else (a reply
 * that is no list of names keeps the last set), -1 when the connection was
 * lost. */
int wlimits_poll_paused(wlimits_t *wl, rconn_t *c, int64_t now_ms);
/* The limits for pop_args_t (NULL: none apply), and a fresh slot token. */
const qlimits_t *wlimits_for_pop(wlimits_t *wl, const char **token);
/* The pop took a job: it holds its slots from now. */
void wlimits_taken(wlimits_t *wl, int64_t now_ms);
/* ... and the :run sets the pop named, every slot it took (pop_result_t
 * lim_keys): what the worker renews and gives back, never a guess of its own. */
void wlimits_taken_keys(wlimits_t *wl, char *const *keys, int n);
/* When the next beat is due (INT64_MAX: none). */
int64_t wlimits_next_beat(const wlimits_t *wl);
/* Renew the job's slots when due; job names it in a warning when one lapsed. */
void wlimits_beat(wlimits_t *wl, rconn_t *c, int64_t now_ms, const char *job);
/* The job ended (or was given back): give its slots back. No round trip
 * when it holds none (a rate or a paused class only). */
void wlimits_end(wlimits_t *wl, rconn_t *c);

#endif
