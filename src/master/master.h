/*
 * master.h - the master process: one event loop (epoll over a signalfd, the
 * control socket and its clients) that reaps, respawns, balances, reloads and
 * stops. Nothing in the master ever sleeps to poll for dead children: SIGCHLD
 * arrives on the signalfd and is handled at once.
 */
#ifndef QPOOL_MASTER_H
#define QPOOL_MASTER_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "master/pool.h"
#include "observe/scoreboard.h"

typedef struct control control_t;

typedef struct {
    qconf_t *conf;
    pools_t pools;
    scoreboard_t sb;
    int sfd;                   /* signalfd */
    int epfd;
    struct control *ctl;       /* the control socket and its clients (control.c) */
    int pid_fd;                /* the pid file, open and locked */

    bool stopping;
    bool fast;
    int64_t stop_deadline_ms;
    int64_t last_watchdog_ms;
    char last_status[512];
    int64_t started_wall_ms;
    struct monitor *mon;       /* Redis counts, Laravel keys, balancing (monitor.c) */
    struct mconns *conns;      /* the master's own Redis connections (mconn.c) */
    /* when the monitor's next pass is due (monotonic ms); 0: at the loop's
     * next pass (after start, a reload or a scale request) */
    int64_t next_balance_ms;
    struct http_sup *http;     /* the HTTP process, if qpool.http is set (http_endpoint.c) */
    struct alerting *alerting; /* open alert episodes and running commands (alerting.c) */
    struct budgeting *budgeting; /* fleet budget leases (budgeting.c) */
    struct limiting *limiting; /* the limits' state in Redis, for status (limiting.c) */
    struct classpause *classpause; /* the paused classes read from Redis, for status (classpause.c) */

    /* queues paused by `qpool pause --queue`, by name: survives reloads */
    char **paused_queues;
    int npaused_queues;
} master_t;

/* Recompute each pool's queue pause bits from m->paused_queues. */
void master_apply_queue_pauses(master_t *m);

/* Run the master in the foreground (master.c); returns the process exit
 * status. */
int master_run(const char *config_path);

/* The pools of a config (reload.c), at the start and at each reload:
 * -1 (said on stderr) when a pool switches user or group and qpool is not
 * root; a pool added, joining a pause of everything. */
int master_check_privileges(const qconf_t *c);
void master_add_pool(master_t *m, const pool_conf_t *pc);

/* The verbs every caller changes state through: signals, the control
 * socket (and through it the HTTP process's actions) and the monitor
 * (verbs.c, reload.c). */

/* Reload from the config file (reload.c); msg (if not NULL) gets what
 * happened or the errors (caller frees). 0; 1: in effect but the HTTP
 * endpoint is off; -1: refused, the old config keeps running. */
int master_reload(master_t *m, char **msg);
void master_begin_stop(master_t *m, bool fast);
/* Each returns 0 or a positive count on success, -1 with err filled on
 * failure (unknown pool or queue, stopping). */
enum pause_source { PAUSE_FROM_SIGNAL = 0, PAUSE_FROM_CONTROL, PAUSE_FROM_HTTP, PAUSE_FROM_MAINTENANCE };
typedef struct {
    char *const *pools;
    int npools;
    char *const *queues;
    int nqueues;
} pause_scope_t;                   /* no pools and no queues: everything */
/* Pause (on) or resume a scope. PAUSE_FROM_MAINTENANCE (the monitor, when a
 * pool's Laravel app is down: pool_t.down) is a pause of its own: it pauses
 * and resumes named pools only, and neither touches nor is undone by an
 * operator's pause. Everything: every pool is paused, and a pool
 * a reload adds joins the pause; resuming everything clears every pause an
 * operator made (pools and queues). A pool or queue is paused or resumed on
 * its own. Laravel's queue:pause keys are Laravel's: only it clears them. */
int master_pause(master_t *m, const pause_scope_t *scope, enum pause_source source, bool on, char *err,
                 size_t errn);
/* Pin a pool at n workers, or hand it back (n = -1); returns the target. */
int master_scale(master_t *m, const char *pool, int n, char *err, size_t errn);
/* Rolling restart of one pool (NULL: every pool); returns how many. */
int master_restart(master_t *m, const char *pool, char *err, size_t errn);
/* An operator's "stop this job": the worker running the job uuid kills its
 * handler as at a timeout (the job is then released or failed as a timeout
 * leaves it). The worker's pid (its pool's name in pool), or -1 (err): no
 * such job runs here. who: who asked, for the log ("HTTP by USER" or "the
 * control socket, uid N"). */
int master_stop_job(master_t *m, const char *uuid, const char *who, char *pool, size_t pn, char *err, size_t errn);
pool_t *master_pool(master_t *m, const char *name);

#endif
