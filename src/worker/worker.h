/*
 * worker.h - the native worker: Laravel's pop / fire / ack loop in C.
 * The master forks into worker_main() (pool.c).
 *
 * Life of a job, in one worker:
 *   pop      one EVALSHA over the pool's queues in priority order (attempts+1,
 *            reserved until now + retry_after; due delayed and expired
 *            reserved jobs are migrated at least once a second), pipelined
 *            with the previous job's ack;
 *   check    already past maxTries / retryUntil -> failed, never run;
 *   fire     the handler, with the job's timeout; the reservation is
 *            extended while a long job runs;
 *   outcome  done -> ack; exception -> release with backoff, or fail
 *            (tries, retryUntil, maxExceptions); timeout -> the handler's
 *            process group is killed, then release or fail;
 *   after    memory (exit 12), max_jobs / max_time (exit 0), rest.
 * Idle, it blocks on the queues' :notify lists (BLPOP, at most 1 s), so a
 * pushed job starts within milliseconds and signals are seen at once.
 */
#ifndef QPOOL_WORKER_H
#define QPOOL_WORKER_H

#include <sys/types.h>

#include "config/config.h"
#include "observe/scoreboard.h"

/* The spawn entry point for native workers: the master's pool.c forks into
 * it. Returns the worker's exit status. */
int worker_main(const pool_conf_t *p, const qconf_t *conf, sb_slot_t *slot, int slot_no, pid_t master, int stats_fd,
                int zygote_fd);

#endif
