/*
 * policy.c - see policy.h. Each function mirrors one method of Laravel's
 * Illuminate\Queue\Worker; the comments name it.
 */
#include "worker/policy.h"
#include "core/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long policy_max_tries(const job_payload_t *p, int pool_tries)
{
    return p->has_max_tries ? p->max_tries : pool_tries;
}

/* Worker::markJobAsFailedIfAlreadyExceedsMaxAttempts */
bool policy_already_exceeded(const job_payload_t *p, int pool_tries, long attempts, int64_t now)
{
    long max = policy_max_tries(p, pool_tries);
    bool has_until = p->has_retry_until && p->retry_until != 0;
    if (has_until && now <= p->retry_until) return false;
    if (!has_until && (max == 0 || attempts <= max)) return false;
    return true;
}

/* Worker::markJobAsFailedIfWillExceedMaxAttempts */
bool policy_will_exceed(const job_payload_t *p, int pool_tries, long attempts, int64_t now)
{
    long max = policy_max_tries(p, pool_tries);
    bool has_until = p->has_retry_until && p->retry_until != 0;
    if (has_until && p->retry_until <= now) return true;
    if (!has_until && max > 0 && attempts >= max) return true;
    return false;
}

long php_intval(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f') s++;
    int sign = 1;
    if (*s == '-' || *s == '+') {
        if (*s == '-') sign = -1;
        s++;
    }
    long v = 0;
    while (isdigit((unsigned char)*s)) {
        if (v > 100000000000L) break;
        v = v * 10 + (*s - '0');
        s++;
    }
    return sign * v;
}

/* Worker::calculateBackoff */
long policy_backoff(const job_payload_t *p, const int *pool_backoff, int npool, long attempts)
{
    long idx = attempts - 1;
    if (idx < 0) idx = 0;
    const char *list = p->backoff;
    char delaybuf[32];
    if (!list && p->has_delay) {
        snprintf(delaybuf, sizeof delaybuf, "%ld", p->delay);
        list = delaybuf;
    }
    if (list) {
        /* explode(',') then [$attempts - 1] ?? last */
        long n = 0, last = 0, want = 0;
        bool found = false;
        const char *c = list;
        for (;;) {
            const char *comma = strchr(c, ',');
            size_t len = comma ? (size_t)(comma - c) : strlen(c);
            char *item = xstrndup(c, len);
            last = php_intval(item);
            free(item);
            if (n == idx) {
                want = last;
                found = true;
            }
            n++;
            if (!comma) break;
            c = comma + 1;
        }
        long v = found ? want : last;
        return v < 0 ? 0 : v;
    }
    if (npool <= 0) return 0;
    long v = idx < npool ? pool_backoff[idx] : pool_backoff[npool - 1];
    return v < 0 ? 0 : v;
}

char *policy_text_max_attempts(const char *name)
{
    return xasprintf("Illuminate\\Queue\\MaxAttemptsExceededException: %s has been attempted too many times or run too long. The job may have previously timed out.",
                     name);
}

char *policy_text_timeout(const char *name)
{
    return xasprintf("Illuminate\\Queue\\TimeoutExceededException: %s has timed out.", name);
}

double policy_prefetch_pace(double pace_ms, int64_t last_job_ms)
{
    return pace_ms + ((double)last_job_ms - pace_ms) / 4.0;
}

int policy_prefetch_want(int prefetch, int64_t last_job_ms, double pace_ms)
{
    if (prefetch <= 1 || last_job_ms >= PREFETCH_MAX_JOB_MS) return 1;
    if (pace_ms <= 0) return prefetch;
    double fits = PREFETCH_BATCH_MS / pace_ms; /* want * pace <= 20, so held * pace stays under 40 */
    if (fits < 1.0) return 1;
    return fits < prefetch ? (int)fits : prefetch;
}

bool policy_prefetch_give_back(int held, int64_t last_job_ms, double pace_ms)
{
    if (held <= 0) return false;
    return last_job_ms >= PREFETCH_MAX_JOB_MS || held * pace_ms > 2.0 * PREFETCH_BATCH_MS;
}
