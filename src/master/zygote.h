/*
 * zygote.h - preloading the PHP app: the master's side of the zygotes.
 *
 * A pool whose handler is the PHP adapter (config.h: pool_preloads) has a
 * zygote: `php qpool-handler.php --zygote APP` (php/src/Zygote.php), started
 * by the master as the pool's user, in its working directory and
 * environment, with one end of a datagram socket pair as fd 3. It boots the
 * app once and forks a handler for each request a worker sends on the other
 * end (every worker of that pool generation keeps it as fd 4): the worker's
 * pipes travel as SCM_RIGHTS descriptors, and the forked handler answers on
 * them as if the worker had started it (handler.c checks what it says).
 *
 * One zygote per pool generation: a restart, queue:restart, a reload that
 * changes the pool, or a deploy that moves the app's symlink (the zygote
 * exits ZYGOTE_EX_MOVED) starts a new generation with a new zygote booted
 * from the new code, and the pool rolls its workers onto it; the old one
 * stays while workers of its generation still run. A zygote that dies is
 * started again with the respawn backoff; its socket outlives it, the
 * requests it never read are dropped (their workers start handlers that boot
 * the app themselves until it is back). One that says it cannot preload
 * (ZYGOTE_EX_NO_PRELOAD) turns preloading off for that generation: the
 * workers then start handlers that boot on their own (sb_slot_t.preload_off).
 * A zygote that is not started again (an older generation's, or one whose
 * app moved) has its socket closed at once, so that the workers still asking
 * it are refused and boot their handlers themselves rather than wait for a
 * fork that never comes. A move soon after the last one (an app that exits
 * 76 by itself, a link that flaps) rolls the pool only after a backoff
 * (zygote_move_delay_s).
 */
#ifndef QPOOL_ZYGOTE_H
#define QPOOL_ZYGOTE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "master/respawn.h"

#define ZYGOTE_EX_NO_PRELOAD 75   /* php/src/Zygote.php: cannot share this app by forks here */
#define ZYGOTE_EX_MOVED 76        /* the app path resolves to another directory now */
#define ZYGOTE_GENERATIONS 2      /* the pool's current generation's, and the last one's */
#define PROC_ZYGOTE_FD 4          /* where a worker keeps its zygote socket */

typedef struct {
    pid_t pid;                    /* 0: not running */
    int fd[2];                    /* [0] the zygote's end (kept between restarts), [1] the workers'; -1: none */
    uint64_t gen;                 /* the pool generation it serves; 0: slot unused */
    bool off;                     /* it cannot preload: handlers boot on their own */
    bool stopping;                /* SIGTERM sent: its generation is over */
    bool moved;                   /* it exited for a move: never restarted, its generation rolls */
    int64_t not_before_ms;        /* monotonic: restart backoff */
    respawn_t respawn;
    int64_t started_ms;
    unsigned long long start_ticks;
    unsigned restarts;
} zygote_t;

/* The pool's moves (ZYGOTE_EX_MOVED), kept across its generations. */
typedef struct {
    int backoff_s;                /* the last delay before a roll, 0: none */
    bool quick;                   /* a move came soon after the last long-lived zygote */
    int64_t roll_at_ms;           /* monotonic: a roll waiting out its delay, 0: none */
    uint64_t roll_gen;            /* the generation that roll replaces */
} zygote_moves_t;

enum zygote_exit {
    ZYGOTE_STOPPED = 0,           /* we asked it to stop */
    ZYGOTE_OFF,                   /* it cannot preload: leave it off */
    ZYGOTE_MOVED,                 /* the app moved (a deploy): roll the pool */
    ZYGOTE_CRASHED,               /* anything else: restart with backoff */
};

/* Pure: what an exit means. asked: we sent it SIGTERM. */
int zygote_exit_kind(int status, bool asked);
/* Pure: the seconds a roll for a move waits, given how long the zygote that
 * saw it lived. A zygote that lived RESPAWN_HEALTHY_MS, or the first move
 * after one, rolls at once (a deploy); moves that follow within that time
 * wait 1 s, doubling to RESPAWN_MAX_S. */
int zygote_move_delay_s(zygote_moves_t *m, int64_t lived_ms);

/* A pool's zygotes (pool.h: pool_t.zygotes). */
typedef struct {
    zygote_t zy[ZYGOTE_GENERATIONS];
    zygote_moves_t moves;         /* the app's moves, and a roll waiting out its backoff */
} zygotes_t;

/* What the zygotes see of their pool, filled in by pool.c, which stands
 * above this file: zygote.c never calls into pool.c, it answers what the
 * pool must do (ZYGOTE_ASK_*). */
typedef struct {
    const pool_conf_t *conf;
    uint64_t gen;                 /* the pool's current generation */
    bool removed;                 /* by a reload: no generation needs a zygote */
    bool stopping;                /* the master stops */
    pid_t master_pid;
    bool in_use[ZYGOTE_GENERATIONS]; /* zy[i]'s generation is current or has workers */
} zygote_pool_t;

#define ZYGOTE_ASK_ROLL 1u        /* roll the pool onto a new generation (the app moved) */
#define ZYGOTE_ASK_CRASH 2u       /* count a crash in the pool's figures */

/* Initialise them: no zygote, no socket. */
void zygotes_init(zygotes_t *zs);
/* On each pass of the master loop (pool.c): start the zygote the pool's
 * generation needs, stop those no worker needs any more. Returns the
 * monotonic time something is next due, or 0; *asks: ZYGOTE_ASK_* bits. */
int64_t zygotes_maintain(zygotes_t *zs, const zygote_pool_t *v, int64_t now_ms, unsigned *asks);
/* The workers' end of generation gen's zygote socket, -1 if none. */
int zygote_worker_fd(const zygotes_t *zs, uint64_t gen);
/* Generation gen's zygote cannot serve now: it said it cannot preload, or
 * it is down (restart backoff): workers start handlers that boot. */
bool zygote_off(const zygotes_t *zs, uint64_t gen);
/* The pid of the zygote that serves generation gen, 0 if none runs now. */
pid_t zygote_pid_of(const zygotes_t *zs, uint64_t gen);
/* The zygote whose pid this is, or NULL. */
zygote_t *zygotes_find(zygotes_t *zs, pid_t pid);
/* z (zygotes_find) was reaped with status: handled here; returns
 * ZYGOTE_ASK_* bits. */
unsigned zygote_exited(zygotes_t *zs, zygote_t *z, const zygote_pool_t *v, int status, int64_t now_ms);
/* Signal every zygote (SIGTERM on a stop, SIGKILL at the end). */
void zygotes_signal(zygotes_t *zs, int sig);
/* Close the zygote sockets and forget the zygotes (pool_free). */
void zygotes_free(zygotes_t *zs);

#endif
