/*
 * http_api.h - what the HTTP process serves (http_api.c), apart from the
 * HTTP plumbing (http_server.c). Every handler fills an http_reply_t; none
 * blocks longer than its master round trip (HTTP_CTL_TIMEOUT_MS) or its
 * Redis timeout.
 */
#ifndef QPOOL_HTTP_API_H
#define QPOOL_HTTP_API_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "http/http_access.h"
#include "redis/rconn.h"
#include "core/util.h"

#define HTTP_CTL_TIMEOUT_MS 2000

#define HTTP_HISTORY_CACHE_N 4      /* /api/metrics replies kept, by range */
#define HTTP_HISTORY_CACHE_MS 5000  /* for this long */

/* One /api/metrics reply, kept: the same range asked again within
 * HTTP_HISTORY_CACHE_MS is answered from here (a day of history is about a
 * second of Redis reads). The worker's alone (http_work.h). */
typedef struct {
    int64_t from, to;          /* minutes */
    int64_t at_ms;             /* when read (monotonic; 0: unused) */
    char *body;
    size_t len;
} http_history_kept_t;

typedef struct {
    int metrics_retention;     /* seconds of minute history (qpool.metrics_retention) */
    int job_history_size;      /* recent job records kept (qpool.job_history_size) */
    int ctl_fd;                /* to the master's control loop */
    sbuf_t ctl_in;
    int ctl_owed;              /* replies still to come for requests that timed out */
    pthread_mutex_t ctl_lock;  /* the channel: the worker's requests and the health check's */
    rconn_t *rc;               /* http.connection; NULL: no Redis at all (HTTP_NO_REDIS) */
    pthread_mutex_t lock;      /* rc */
    http_history_kept_t kept[HTTP_HISTORY_CACHE_N];
} http_ctx_t;

typedef struct {
    int code;
    const char *type;
    char *body;                /* malloc'd, unless persistent */
    size_t len;
    bool persistent;           /* body is a compiled-in file: not freed */
} http_reply_t;

/* A query argument of the request being served, or NULL. */
typedef const char *(*http_arg_fn)(void *req, const char *name);

/* One request line to the master, its reply parsed (caller frees), or NULL
 * (no answer within timeout_ms, or the master is gone). */
cJSON *http_ctl_call(http_ctx_t *h, const char *request, int timeout_ms);

/* Request req (consumed) to the master and its reply as the answer: 200 when
 * it says ok, else refused (the status to give), 503 when it does not answer. */
void http_ctl_relay(http_ctx_t *h, cJSON *req, int refused, http_reply_t *out);

/* Serve GET path; returns false when no route matches. full: the asker may
 * read more than aggregates (else /api/status and /api/fleet leave out each
 * worker and its job). */
bool http_api_get(http_ctx_t *h, const char *path, bool full, http_arg_fn arg, void *req, http_reply_t *out);
/* Whether a GET route serves path (/healthz is http_health.h's). */
bool http_api_exists(const char *path);
/* Free what h keeps (the /api/metrics replies). */
void http_api_forget(http_ctx_t *h);
/* What reading path takes: open (/healthz, the dashboard's files: they
 * hold no data), aggregates (and a path no route serves: 404), or private
 * (job records, payloads, failed jobs). */
http_need_t http_api_need(const char *path);
/* The dashboard's files: "/" is index.html, "/assets/NAME" a file of web/.
 * False when path is neither. */
bool http_static(const char *path, http_reply_t *out);

/* Actions (http_actions.c): POST path with its JSON body (NULL: none),
 * asked by who (for the log). The token is the caller's to check. */
bool http_action_exists(const char *path);
/* A DELETE is routed as an action whose path is this prefix, then its own. */
#define HTTP_DELETE_PREFIX "DELETE "
void http_action(http_ctx_t *h, const char *path, const cJSON *body, const char *who, http_reply_t *out);

void http_reply_json(http_reply_t *r, int code, cJSON *body);   /* takes body */
/* What an endpoint that reads or writes Redis answers (503) when the config
 * names no Redis at all (qconf_t.no_redis; http_ctx_t.rc is then NULL). */
#define HTTP_NO_REDIS "this needs a Redis, and qpool.conf names none (set redis = { default = { host = ...; }; })"
/* True, with out that 503, when h has no Redis (h->rc NULL). Every handler
 * that touches h->rc asks first, so no route can reach a NULL connection. */
bool http_no_redis(http_ctx_t *h, http_reply_t *out);

void http_reply_error(http_reply_t *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
