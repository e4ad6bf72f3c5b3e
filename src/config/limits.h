/*
 * limits.h - fleet-wide job limits (qpool.conf's top-level `limits` list,
 * issue 33): what one limit says, and the pure checks `qpool check` runs on
 * it. config.c reads the libconfig list into these structs and reports what
 * the checks return as FILE:LINE errors.
 *
 * A limit applies to the jobs of one class (the payload's displayName), of
 * one queue, or of one class on one queue. It caps how many run at once
 * across every master on the same Redis (concurrency) and/or how many start
 * per second (rate, a token bucket holding at most `burst` tokens).
 */
#ifndef QPOOL_LIMITS_H
#define QPOOL_LIMITS_H

#include <stdbool.h>
#include <stddef.h>

#define LIMITS_MAX 256                /* limits in one config */
#define LIMIT_CONCURRENCY_MAX 1000000 /* concurrency = 1..this */
#define LIMIT_RATE_MAX 1000000.0      /* jobs per second, at most */
#define LIMIT_BURST_MAX 1000000       /* burst = 1..this */
#define LIMIT_NAME_MAX 255            /* class, queue, tag_prefix: bytes */

typedef struct {
    char *class_name;   /* displayName; NULL: every class */
    char *queue;        /* unprefixed queue name; NULL: every queue */
    char *tag_prefix;   /* per key taken from the job's tags; NULL: one limit for all */
    int concurrency;    /* 0: none */
    char *rate;         /* as written, "R/s" or "R/m"; NULL: none */
    double rate_per_s;  /* rate in jobs per second (0: none) */
    int burst;          /* token bucket capacity; 0 in the file: the default (1) */
    double alert_after; /* seconds holding jobs back that raise an alert; 0: none */
    int line;           /* where the limit's group starts (0: unknown) */
} limit_conf_t;

/* Parse "R/s" or "R/m" (R a positive number, e.g. "50/s", "2.5/s", "600/m")
 * into jobs per second. 0 and *per_s set, or -1 with a reason in err. */
int limit_parse_rate(const char *s, double *per_s, char *err, size_t errn);

/* Check one limit as parsed: it names a class and/or a queue, limits
 * something (concurrency and/or rate), burst only with a rate, names within
 * bounds. Fills the burst's default. 0, or -1 with a reason in err. */
int limit_check(limit_conf_t *l, char *err, size_t errn);

/* Do a and b limit the same jobs (same class, queue and tag_prefix)? */
bool limit_same_target(const limit_conf_t *a, const limit_conf_t *b);

/* A short description for messages and status: `class "X" on queue "q"`. */
void limit_describe(const limit_conf_t *l, char *buf, size_t n);

/* The limit's id in its Redis keys (<prefix>qpool:limit:<id>:run, :bucket):
 * "<queue>|<class>", each empty for any. The same on every host. Caller frees. */
char *limit_key_id(const limit_conf_t *l);

/* Does the limit apply to some of these queues (a class-only limit: to all)? */
bool limit_applies_to(const limit_conf_t *l, char *const *queues, int nqueues);

/* The alert on a limit holding jobs back (alert_after): given whether an
 * episode is open, whether the wait was read this pass and how long the
 * limit has held jobs back: 1 it fires, -1 it resolves (the limit holds
 * none back any more, or the alert was turned off), 0 nothing changes. An
 * unread pass changes nothing. */
int limit_alert_step(bool open, bool known, double waited_s, double alert_after);

void limit_free(limit_conf_t *l);
void limits_free(limit_conf_t *v, int n);

#endif
