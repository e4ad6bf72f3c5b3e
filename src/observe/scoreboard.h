/*
 * scoreboard.h - shared memory, one slot per child (the PHP-FPM idea).
 *
 * The master maps an anonymous shared region before it forks anything, so
 * every native worker inherits it. A native worker publishes its state
 * (idle/busy/paused, current job, counters, RSS) into its own slot; the master
 * reads it for status, balancing (busy vs idle) and shutdown (handler process
 * groups to kill). For external-command children the master fills in what it
 * knows itself.
 *
 * Isolation: each slot is a page of its own, and a child unmaps every page
 * but its own right after fork (sb_confine): a worker of one pool cannot
 * touch another child's slot, and the master checks what a worker wrote
 * before it acts on it (proc_kill_worker_group).
 *
 * Concurrency: each slot has exactly one writer of its "child" part, guarded
 * by a sequence lock so the master never sees a torn job id. The "control"
 * word (pause bits) is written only by the master and read atomically.
 */
#ifndef QPOOL_SCOREBOARD_H
#define QPOOL_SCOREBOARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum sb_state {
    SB_FREE = 0,
    SB_STARTING,
    SB_IDLE,
    SB_BUSY,
    SB_PAUSED,
    SB_STOPPING,
    SB_RUNNING,      /* external command: alive, busy or idle unknown */
};

/* Why a native worker exited cleanly (set just before exit). */
enum sb_exit_reason {
    SB_EXIT_NONE = 0,
    SB_EXIT_SIGNAL,
    SB_EXIT_MAX_JOBS,
    SB_EXIT_MAX_TIME,
    SB_EXIT_MEMORY,
    SB_EXIT_PARENT,
};

/* control word bits (master → child) */
#define SB_CTL_PAUSE_ALL (1u << 31)        /* whole pool paused */
#define SB_CTL_RETIRE (1u << 30)           /* exit instead of taking another job */
#define SB_CTL_QUEUE_MASK 0x3fffffffu      /* bit i: queue i of the pool is paused */

#define SB_JOB_TAGS_MAX 512        /* bytes of a running job's tags in its slot */

typedef struct {
    /* child-written, seqlock protected */
    uint8_t state;
    uint8_t exit_reason;
    uint64_t jobs_done;
    uint64_t jobs_failed;
    uint64_t busy_ms;          /* total time spent running jobs */
    int64_t job_started_ms;    /* wall clock, 0 when idle */
    uint64_t rss_kb;           /* child + its persistent handler (mem_private: the handler's USS) */
    uint8_t mem_private;       /* 1: a forked handler's figure is its private memory (USS), not RSS */
    int32_t handler_pgid;      /* process group of the running handler, 0 if none */
    uint64_t handler_start;    /* a forked handler's start time (/proc/PID/stat ticks); 0: not given */
    uint32_t redis_reconnects; /* its Redis connection's reconnects */
    char job_id[64];
    char job_uuid[48];
    char job_name[96];
    char job_queue[64];
    uint32_t job_attempt;      /* the attempt running (1: the first), 0: not known */
    int32_t job_timeout_s;     /* its timeout (the payload's, else the pool's), 0: none */
    char job_tags[SB_JOB_TAGS_MAX]; /* the payload's own tags, '\n'-joined, whole ones that fit; "": none */
} sb_child_t;

/* One slot per page: a child keeps only its own page mapped (sb_confine),
 * so it cannot write, or read, any other child's slot. */
#ifndef QPOOL_SLOT_SIZE
#define QPOOL_SLOT_SIZE 4096       /* cmake -DQPOOL_SLOT_SIZE=65536 for 64 KiB pages */
#endif
#define SB_SLOT_SIZE QPOOL_SLOT_SIZE

typedef struct {
    _Atomic uint32_t seq;
    _Atomic uint32_t control;
    _Atomic uint32_t preload_off;  /* 1: the pool's zygote cannot preload: start handlers that boot */
    _Atomic int32_t zygote_pid;    /* the zygote of the child's generation (master-written), 0: none now */
    _Atomic int64_t stop_job_ms;   /* master-written: stop the job that started at this wall ms (an operator's
                                    * "stop this job"): its handler is killed as at a timeout; 0: none */
    _Atomic uint64_t watch_gen;    /* master-written: the watched tags' generation on the child's connection
                                    * (jobwatch.h): the child reads the set only when it changes; 0: none */
    /* master-written at spawn */
    int32_t pid;
    int64_t started_ms;        /* wall clock */
    char pool[49];
    uint8_t native;
    sb_child_t c;
} __attribute__((aligned(SB_SLOT_SIZE))) sb_slot_t;

typedef struct {
    sb_slot_t *slots;
    int nslots;
} scoreboard_t;

/* -1 with errno EINVAL when the page size does not divide a slot: a child
 * could not be confined to its own slot, so the master refuses to start. */
int sb_create(scoreboard_t *sb, int nslots);
void sb_destroy(scoreboard_t *sb);
int sb_alloc(scoreboard_t *sb);                 /* -1 when full */
void sb_release(scoreboard_t *sb, int idx);

/* Child side, right after fork: unmap every slot but its own. The shared
 * mapping has no name, so the child cannot map the others back. Returns 0,
 * or -1 if the page size does not allow it (the slots stay mapped). */
int sb_confine(scoreboard_t *sb, int idx);
/* Child side: begin/end a write of its own slot. */
void sb_write_begin(sb_slot_t *s);
void sb_write_end(sb_slot_t *s);
/* Master side: consistent snapshot of the child part. */
void sb_read(const sb_slot_t *s, sb_child_t *out);

/* "Stop this job". Master side: ask to stop the job that started at
 * started_ms (as sb_read gave it). Child side: sb_stop_asked, for the job it
 * runs; sb_job_started, inside its write, forgets any request (a stale one
 * never stops a later job, even one started in the same ms or after a clock
 * step back) and publishes the new job's start. */
void sb_stop_ask(sb_slot_t *s, int64_t started_ms);
bool sb_stop_asked(const sb_slot_t *s);
void sb_job_started(sb_slot_t *s, int64_t started_ms);

const char *sb_state_name(int state);

#endif
