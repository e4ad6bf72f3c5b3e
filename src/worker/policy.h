/*
 * policy.h - Laravel's retry / backoff / fail rules as pure functions, so
 * they can be unit-tested against the behaviour documented for queue:work
 * (protocol doc §5.4-§5.7) without Redis or processes.
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

/* PHP's (int) cast of a string: leading blanks, sign, digits; else 0. */
long php_intval(const char *s);

/* Exception texts qpool writes for failures it decides itself, in the form
 * Laravel's (string) $exception starts with. Caller frees. */
char *policy_text_max_attempts(const char *name);
char *policy_text_timeout(const char *name);

#endif
