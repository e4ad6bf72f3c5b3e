/*
 * policy.h - Laravel's retry / backoff / fail rules as pure functions, so
 * they can be unit-tested against the behaviour documented for queue:work
 * (protocol doc §5.4-§5.7) without Redis or processes; and how many jobs a
 * prefetching worker pops and holds.
 *
 * "attempts" below always means the attempt being run: the payload's stored
 * attempts + 1, which is what RedisJob::attempts() returns.
 */
#ifndef QPOOL_POLICY_H
#define QPOOL_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "redis/payload.h"

/* payload maxTries, else the pool's tries; 0 = unlimited. */
long policy_max_tries(const job_payload_t *p, int pool_tries);

/* Before running: has the job already used up its attempts (or passed
 * retryUntil)? Laravel's markJobAsFailedIfAlreadyExceedsMaxAttempts. */
bool policy_already_exceeded(const job_payload_t *p, int pool_tries, long attempts, int64_t now);

/* After an exception or a timeout: must the job fail now (tries / retryUntil)?
 * Laravel's markJobAsFailedIfWillExceedMaxAttempts. */
bool policy_will_exceed(const job_payload_t *p, int pool_tries, long attempts, int64_t now);

/* Seconds to wait before the retry: payload backoff ("10,30,60"), else the
 * payload's delay (12.11+), else the pool's list; indexed by attempts - 1,
 * the last value repeating. */
long policy_backoff(const job_payload_t *p, const int *pool_backoff, int npool, long attempts);

/* Prefetch only while jobs are quick: a slow job's successors would sit
 * reserved while idle workers could run them. After a job this slow the
 * held ones are given back and the worker pops one at a time. */
#define PREFETCH_MAX_JOB_MS 100
/* A batch should run in about this long at the last job's pace, so that a
 * burst of jobs of a few milliseconds each is shared among idle workers
 * instead of waiting behind one. */
#define PREFETCH_BATCH_MS 20

/* The jobs' pace for prefetch: a moving average of their run times (ms),
 * a quarter of the way to the last job's each time, so that one quick job
 * among slow ones does not make the worker pop a whole batch again. */
double policy_prefetch_pace(double pace_ms, int64_t last_job_ms);

/* How many jobs one pop may take: as many as run in PREFETCH_BATCH_MS at
 * that pace, at most the pool's prefetch (all of it for jobs of a few
 * microseconds), one after a job of PREFETCH_MAX_JOB_MS or more. At least 1. */
int policy_prefetch_want(int prefetch, int64_t last_job_ms, double pace_ms);

/* Whether the held jobs (popped ahead, not started, a pop in flight
 * included) should go back: they would wait more than two batches' time
 * behind each other at that pace, or the last job took PREFETCH_MAX_JOB_MS
 * or more. */
bool policy_prefetch_give_back(int held, int64_t last_job_ms, double pace_ms);

/* PHP's (int) cast of a string: leading blanks, sign, digits; else 0. */
long php_intval(const char *s);

/* Exception texts qpool writes for failures it decides itself, in the form
 * Laravel's (string) $exception starts with. Caller frees. */
char *policy_text_max_attempts(const char *name);
char *policy_text_timeout(const char *name);

#endif
