/*
 * pool.h - the master's table of pools and their children.
 *
 * A pool owns a private copy of its settings (so a reload can free the old
 * configuration while removed pools still drain), its children, and one
 * restart-backoff record per slot number ("emails#3" is slot 3). pool.c
 * decides, on every pass of the master loop, what to spawn and what to stop
 * so each pool converges on its target: respawn backoff, rolling
 * replacement after a config change or restart request, the max_workers
 * budget, and never stopping a busy native worker to shrink a pool.
 */
#ifndef QPOOL_POOL_H
#define QPOOL_POOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "observe/batchjobs.h"
#include "observe/jobhist.h"
#include "observe/jobwatch.h"
#include "observe/jobstats.h"
#include "observe/minute.h"
#include "master/respawn.h"
#include "observe/scoreboard.h"
#include "master/zygote.h"
#include "master/agent.h"

enum stop_reason {
    STOP_NONE = 0,
    STOP_SCALE,       /* pool shrinks */
    STOP_ROLL,        /* replaced after a config change / restart request */
    STOP_REMOVED,     /* pool removed by a reload */
    STOP_SHUTDOWN,    /* master stops */
};

/* Why a child exited (qpool_worker_exits_total). */
enum exit_kind {
    EXIT_STOPPED = 0,  /* the master asked (scale, restart, reload, stop) */
    EXIT_MAX_JOBS,
    EXIT_MAX_TIME,
    EXIT_MEMORY,       /* exit 12: memory limit */
    EXIT_CLEAN,        /* exit 0 on its own */
    EXIT_CRASHED,      /* any other status or a signal */
    EXIT_KINDS
};
const char *exit_kind_name(int k);

typedef struct {
    pid_t pid;
    int sb;                  /* scoreboard slot index */
    int slot_no;             /* 1-based number within the pool */
    uint64_t gen;            /* pool generation it was started with */
    int64_t started_ms;      /* monotonic */
    unsigned long long start_ticks; /* kernel start time: its handlers are younger */
    int stop_reason;
    int64_t stop_sent_ms;
    bool pause_sent;         /* SIGUSR2 delivered for the current pause */
    bool killed;             /* SIGKILLed after stop_timeout */
    int stats_fd;            /* native: the master's end of its stats channel, -1 if none */
    bool stats_warned;       /* it sent a bad datagram (logged once) */
    unsigned lease;          /* the fleet budget lease it counts under (budgeting.c), 0 none */
} child_t;

typedef struct {
    int64_t not_before_ms;   /* monotonic: earliest respawn */
    respawn_t respawn;       /* backoff state (respawn.h) */
    unsigned exits;          /* children of this slot that exited (the dashboard's "restarts") */
    char last_exit[112];     /* why the last one did: "<kind>: <status>" */
} slot_state_t;

typedef struct {
    int64_t ready, delayed, reserved;
    bool laravel_paused;     /* illuminate:queue:paused:<conn>:<queue> is set */
    /* the oldest ready job, when long_wait alerts want it (monitor.c) */
    uint64_t head_hash;      /* of the job at the head, 0: none seen */
    int64_t head_since_ms;   /* monotonic: when that head was first seen */
    double oldest_ready_s;   /* its age: from createdAt when it has one, else since first seen; -1 unknown */
} queue_stat_t;

typedef struct pool {
    pool_conf_t conf;
    uint64_t gen;
    bool removed;            /* dropped by a reload: drain then forget */
    child_t *children;
    int nchildren, cap;
    slot_state_t *slots;
    int nslots;

    int target;              /* wanted number of live children */
    int pinned;              /* qpool scale POOL N; -1 = not pinned */
    bool paused;             /* paused by qpool pause POOL */
    bool down;               /* paused: its Laravel app is down for maintenance (monitor.c) */
    uint32_t queue_paused;   /* bit i: queue i paused by qpool pause --queue */
    int roll_child_pid;      /* surge child of the current rolling step, 0 if none */
    zygotes_t zygotes;       /* preload: the app booted once, handlers forked (zygote.h) */
    agent_t agent;           /* conf.agent_signals, pool_agent_sizes: the app agent its zygote forks (agent.h; monitor.c) */
    agent_batches_t batches; /* its app's job batches, read by the agent while someone looks (mbatches.c) */
    agent_app_t app_reqs;    /* control clients' requests on its app's failer, waiting on the agent (mapp.c) */
    agent_app_dash_t app_dash; /* the dashboard's snapshot of its app's failer (mappdash.c) */
    /* fleet budget (budgeting.c, pool_set_fleet) */
    unsigned lease_tag;      /* the lease its new children count under, 0 none */
    int fleet_cap;           /* its children, stopping ones included, never more; INT_MAX without a budget */

    /* Laravel queue:restart polling (monitor.c) */
    char *restart_key_full;
    char *restart_pending;

    /* balancer memory */
    int64_t below_since_ms;  /* target has been below size since (monotonic), 0 = not */
    queue_stat_t q[QPOOL_MAX_QUEUES];
    bool have_counts;

    /* counters since start */
    jobstats_t stats;        /* jobs by queue, class and outcome, from the workers */
    jobstats_t recent;       /* the same, since it was last written to the history (history.h) */
    jobhist_pending_t jobs;  /* recent job records not yet written to Redis (jobhist.h) */
    jobwatch_queue_t watched; /* records of watched tags not yet in their lists (jobwatch.h) */
    uint64_t watch_gen;      /* the watched set's generation on its connection, as its slots have it (0: none) */
    int watch_misses;        /* the master's reads of that set that failed in a row (jobwatch_gen_next) */
    uint64_t batch_lost;     /* entries of the batches' job lists not written (batchjobs.h; monitor.c) */
    batchjobs_note_t batch_note; /* when that was last logged, and why */
    uint64_t batch_unindexed; /* of those written, the entries whose batch the index did not take */
    batchjobs_note_t batch_inote; /* when that was last logged, and why */
    minute_t minute[QPOOL_MAX_QUEUES]; /* per queue: the last minute's waits and attempts (alerts) */
    uint64_t spawned, crashes, memory_recycles;
    uint64_t exits[EXIT_KINDS];
    uint64_t exits_written[EXIT_KINDS]; /* of exits, what the minute history has (monitor.c) */
    uint64_t redis_reconnects_reaped;
    uint64_t jobs_done_reaped, jobs_failed_reaped, busy_ms_reaped;
    /* per-minute rates, from the last minute of samples */
    double rate;             /* jobs/s, smoothed over a few seconds (balancer) */
    double jobs_per_min, failed_per_min, mean_runtime_ms;
    uint64_t last_jobs, last_failed, last_busy_ms;
    int64_t last_sample_ms;
} pool_t;

typedef struct pools {
    pool_t **v;
    int n;
    scoreboard_t *sb;
    int max_workers;
    int64_t stop_timeout_ms; /* shutdown_timeout: how long a stopped external child may take */
    bool all_paused;         /* everything paused (SIGUSR2, qpool pause): pools added join the pause */
    bool stopping;           /* master shutdown: spawn nothing */
    pid_t master_pid;
    char host[256];          /* for job records */
    int epfd;                /* the master's epoll set: children's stats channels join it */
    /* redis connections, for native workers (current config) */
    const qconf_t *conf;
    /* In a native worker after its fork, before it runs a job: wipe what
     * the master holds that this worker must not (the HTTP token, the
     * config's other connections' passwords and pools' environments:
     * master.c); pool.c wipes the other pools' environments itself. */
    void (*forget_in_worker)(void *arg, const pool_conf_t *own);
    void *forget_arg;
} pools_t;

/* class_cap: job classes counted by name; jobs_cap: recent job records held for Redis */
pool_t *pool_new(const pool_conf_t *conf, int class_cap, int jobs_cap);
void pool_free(pool_t *p);

int pools_live_total(const pools_t *ps);
/* Reconnects of the pool's Redis connections, living children and gone. */
uint64_t pool_redis_reconnects(const pools_t *ps, const pool_t *p);          /* every child alive, stopping included */
int pool_live(const pool_t *p);                   /* not stopping */
child_t *pools_find_child(pools_t *ps, pid_t pid, pool_t **pool_out);

/* The pool's wanted pause state for its children: bits for the control word. */
uint32_t pool_control_word(const pools_t *ps, const pool_t *p);
bool pool_is_paused(const pools_t *ps, const pool_t *p);

/* Pure: should a pool wait for its app's maintenance mode? probe: 1 the app
 * is down, 0 it is up, -1 unknown (Redis unreachable: keep what we had). */
bool pool_down_wanted(bool checked, bool force, int probe, bool current);

/* One pass: spawn/stop children towards targets. Returns the soonest
 * monotonic time at which something will be due (0 = nothing pending). */
int64_t pools_maintain(pools_t *ps, int64_t now_ms);

/* A child has exited (status from waitpid). */
/* The slot's history (restarts, last exit), NULL if it never had a child. */
const slot_state_t *pool_slot_history(const pool_t *p, int slot_no);
void pools_child_exited(pools_t *ps, pid_t pid, int status, int64_t now_ms);

/* Propagate pause state: control words, SIGUSR2/SIGCONT. Returns true while
 * an external child still waits for its SIGUSR2 (it has not installed a
 * handler yet), so the caller re-checks soon. */
bool pools_apply_pause(pools_t *ps);
/* The watched set's generation (jobwatch.h) for pool p's workers: into
 * each of its children's slots, and those it starts from now on. */
void pool_publish_watch(pools_t *ps, pool_t *p, uint64_t gen);

/* Send sig to every child (graceful stop uses SIGTERM). */
void pools_stop_all(pools_t *ps, int64_t now_ms);
void pools_kill_all(pools_t *ps);   /* SIGKILL process groups, handlers included */

/* Begin a rolling restart of a pool (new generation). A zygote that saw
 * the app move asks pool.c for one (ZYGOTE_ASK_ROLL): zygote.c never calls
 * into pool.c (scripts/check-layout counts a call to this inline as one). */
static inline void pool_request_roll(pool_t *p)
{
    p->gen++;
    p->roll_child_pid = 0;
}

/* The fleet budget's lease (budgeting.c): tag for the children it starts
 * from now on (and those it runs without one: a reload gave it the
 * budget), cap on its children, stopping and surge ones included: none is
 * started while that many run. tag 0, cap INT_MAX: no budget. */
void pool_set_fleet(pool_t *p, unsigned tag, int cap);
/* Its children that count under the lease tag, stopping ones included. */
int pool_lease_children(const pool_t *p, unsigned tag);

/* Sum of native children's counters plus reaped ones; state counts. */
typedef struct {
    int live, starting, idle, busy, paused, stopping, running;
    uint64_t jobs_done, jobs_failed, busy_ms;
} pool_counts_t;
void pool_counts(const pools_t *ps, const pool_t *p, pool_counts_t *out);

/* A child's stats datagrams (its stats_fd is readable): add them to its
 * pool's totals. False when fd is no child's. */
bool pools_stats_event(pools_t *ps, int fd);

#endif
