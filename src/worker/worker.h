/*
 * worker.h - the native worker: Laravel's pop / fire / ack loop in C.
 * worker_main() is declared in pool.h (the master forks into it).
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

#include "master/pool.h"

#endif
