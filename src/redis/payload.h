/*
 * payload.h - Laravel job payloads (JSON): reading the fields the worker
 * acts on, building new ones for `qpool push`, and byte-preserving edits.
 *
 * Edits (reset attempts for a retry) are textual: the rest of the payload
 * keeps its exact bytes, key order, escapes and big integers, which a
 * decode/encode round trip through a double-based JSON library would not.
 */
#ifndef QPOOL_PAYLOAD_H
#define QPOOL_PAYLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *uuid;              /* NULL when absent */
    char *id;
    char *display_name;
    char *job;               /* "Class@method" */
    long attempts;           /* as stored (before this pop's increment) */
    bool has_max_tries;
    long max_tries;
    bool has_max_exceptions;
    long max_exceptions;
    bool fail_on_timeout;
    char *backoff;           /* "10,30,60" or NULL */
    bool has_timeout;
    long timeout;
    bool has_retry_until;
    int64_t retry_until;
    bool has_delay;          /* 12.11+: used as backoff when backoff is null */
    long delay;
    bool has_created_at;     /* 12.11+: when it was dispatched (UNIX seconds) */
    int64_t created_at;
    bool has_available_at;   /* qpool's stamp on a release: when it is due (UNIX ms) */
    int64_t available_at_ms;
} job_payload_t;

/* The key qpool adds to a payload it releases: when the job is due again,
 * in UNIX ms, so the next attempt's wait is measured, not guessed. Laravel
 * ignores unknown keys (as Horizon's pushedAt). */
#define PAYLOAD_AVAILABLE_AT "qpoolAvailableAt"

/* The key a pop adds to the copies of a job it holds (and to a twin's
 * reserved copy) so that no two jobs share a :reserved member (queue.c);
 * dropped from a released job's payload and by the next pop. */
#define PAYLOAD_TWIN "qpoolTwin"

/* 0 on success; -1 with a reason in err when the payload is unusable.
 * The strings taken (uuid, id, displayName, job, backoff) are valid UTF-8:
 * each ill-formed sequence is replaced with U+FFFD. */
int payload_parse(const char *raw, size_t len, job_payload_t *p, char *err, size_t errn);
void payload_free(job_payload_t *p);
/* The name for logs: displayName, else job, else "?" */
const char *payload_name(const job_payload_t *p);

/* Span [*vs, *ve) of the value of a top-level key; false if absent/invalid. */
bool json_top_value(const char *raw, size_t len, const char *key, size_t *vs, size_t *ve);
/* Is tag one of the payload's own top-level "tags" (Horizon's, pushed at
 * dispatch)? Only that array is parsed. */
bool payload_has_tag(const char *raw, size_t len, const char *tag);

/* Copy of raw with top-level "attempts" set to n (added if missing).
 * NULL if raw is not a JSON object. */
char *payload_set_attempts(const char *raw, size_t len, long n, size_t *outlen);
/* The same for PAYLOAD_AVAILABLE_AT. */
char *payload_set_available_at(const char *raw, size_t len, int64_t at_ms, size_t *outlen);
/* Copy of raw without its top-level key (and the comma beside it); NULL if
 * raw is not a JSON object, has no such key, or has it twice. */
char *payload_drop_key(const char *raw, size_t len, const char *key, size_t *outlen);

/* queue:retry's refreshRetryUntil, without PHP: a job that had until
 * retryUntil from its dispatch (createdAt, 12.11+; or Horizon's pushedAt)
 * gets the same window from now. 1 with *out (caller frees) when
 * refreshed, 0 when there is nothing to refresh (no or null retryUntil),
 * -1 when the payload does not say when it was dispatched (older Laravel):
 * only the job's own retryUntil() could tell. */
int payload_refresh_retry_until(const char *raw, size_t len, int64_t now, char **out, size_t *outlen);

typedef struct {
    const char *job;            /* handler name, e.g. "App\\Jobs\\SendMail" */
    const char *display_name;   /* NULL: job up to '@' */
    const char *data_json;      /* raw JSON for "data"; NULL: {} */
    long max_tries;             /* < 0: null */
    long max_exceptions;        /* < 0: null */
    bool fail_on_timeout;
    const char *backoff;        /* NULL: null */
    long timeout;               /* < 0: null */
    int64_t retry_until;        /* 0: null */
} payload_spec_t;

/* A Laravel-shaped payload (uuid, displayName, job, maxTries, maxExceptions,
 * failOnTimeout, backoff, timeout, retryUntil, data, id, attempts). */
char *payload_build(const payload_spec_t *s);

#endif
