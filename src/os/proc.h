/*
 * proc.h - process utilities: the signal reset before an exec, and /proc
 * readers the master and workers use (RSS, caught signals, process groups).
 * Setting up a child of the master is child.h's.
 */
#ifndef QPOOL_PROC_H
#define QPOOL_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>


/* Exit status of a child that could not even set itself up (EX_OSERR-like). */
#define QPOOL_EX_SETUP 71
#define QPOOL_EX_MEMORY 12
/* Where a worker's kept descriptor goes (>= 0): every other descriptor
 * from 3 up is closed. */
#define PROC_KEEP_FD 3

/* Reset signal mask and dispositions to defaults (before exec). */
void proc_reset_signals(void);

/* Resident set size of pid in kB, or 0 if unknown. */
uint64_t proc_rss_kb(pid_t pid);

/* The same from a kept-open /proc/PID/statm (one pread per call: cheap
 * enough to run after every job). */
typedef struct {
    pid_t pid;
    int fd;           /* -1 when closed (0 is a valid descriptor): start with RSS_READER_INIT */
} rss_reader_t;
#define RSS_READER_INIT {.pid = 0, .fd = -1}
uint64_t rss_read(rss_reader_t *r, pid_t pid);  /* (re)opens when pid changes; 0 if pid <= 0 */
void rss_close(rss_reader_t *r);

/* From /proc/PID/smaps_rollup: resident, proportional (PSS) and private
 * (USS: Private_Clean + Private_Dirty) memory in kB. */
typedef struct {
    uint64_t rss_kb, pss_kb, uss_kb;
} proc_mem_t;
/* Pure: parse smaps_rollup text; 0, or -1 when it has no Rss/Pss line. */
int proc_parse_rollup(const char *text, proc_mem_t *m);
/* 0, or -1 when pid's smaps_rollup cannot be read (gone, or not ours). */
int proc_mem(pid_t pid, proc_mem_t *m);

/* Now, in the clock ticks /proc/PID/stat counts a start time in. */
unsigned long long proc_now_ticks(void);
/* Does pid hold a descriptor on the same pipe (or socket) as our fd? */
bool proc_holds_same(pid_t pid, int fd);

/* Does pid have a handler installed for sig (SigCgt in /proc/pid/status)? */
bool proc_catches_signal(pid_t pid, int sig);

/* From one line of /proc/<pid>/stat: the process group and the start time
 * (clock ticks since boot). -1 when the line does not parse. */
int proc_parse_stat(const char *line, pid_t *pgrp, unsigned long long *start);
/* Start time (ticks since boot) of a live process, 0 if it is gone. */
unsigned long long proc_start_ticks(pid_t pid);

/* What the master knows of a process group a worker named in its
 * scoreboard slot, and what it must hold before root signals it. */
typedef struct {
    pid_t pgid;                    /* as the worker wrote it */
    pid_t self, self_pgrp;         /* the master */
    bool leader_alive;             /* /proc/<pgid> read */
    pid_t leader_pgrp;             /* the leader still leads that group */
    uid_t leader_uid;              /* its real uid */
    unsigned long long leader_start;
    uid_t pool_uid;                /* the uid the pool runs as */
    unsigned long long worker_start; /* the worker that named it */
    /* when the leader is gone (a handler that died with its worker): */
    int members;                   /* processes still in the group */
    bool members_ok;               /* every one of the pool's uid and younger than the worker */
    bool is_child;                 /* pgid is the pid of a child the master runs (never a handler) */
    unsigned long long handler_start; /* the leader's start time as the worker published it (a forked
                                       * handler's), 0: not given */
} group_check_t;
/* Pure: true only for a group the pool's worker can have made: above 1, not
 * the master's nor one of its children's, led by a process of the pool's
 * uid that is younger than the worker (a reused pid of an older process
 * never matches); or, once that leader is gone, whose every remaining
 * member is of the pool's uid and younger than the worker (a job's
 * processes left behind by a handler that died with its worker). When the
 * worker published its handler's start time, a live leader must have
 * exactly that one (a pid freed by a dead handler and taken by a sibling's
 * new one never matches). */
bool proc_group_check(const group_check_t *g);
/* Fill a group_check_t from /proc and SIGKILL the group if it passes.
 * Returns 1 when killed, 0 when refused (logged), -1 on error. */
int proc_kill_worker_group(pid_t pgid, uid_t pool_uid, unsigned long long worker_start,
                           unsigned long long handler_start, bool is_child, const char *who);
/* The parent of a live process (/proc/PID/stat), 0 when it is gone. */
pid_t proc_ppid(pid_t pid);

/* Describe a wait status: "exited with status 1", "killed by signal 9 (SIGKILL)". */
void proc_describe_status(int status, char *buf, size_t n);

/* The setproctitle wrapper; call proc_title_init from main first. */
void proc_title_init(int argc, char **argv, char **envp);
void proc_title(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
