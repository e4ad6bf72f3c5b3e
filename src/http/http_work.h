/*
 * http_work.h - the requests that wait: everything the HTTP process
 * answers from the master or from Redis runs here, on one worker thread,
 * never on libmicrohttpd's (http_work.c).
 *
 * libmicrohttpd's thread reads requests, checks the token, answers
 * /healthz (http_health.h), the dashboard's files and every refusal itself,
 * all from memory; a request that needs the master or Redis is suspended
 * (MHD_suspend_connection) and queued here as a job. The worker runs the
 * jobs one at a time, as the single Redis connection and the master's
 * channel did before, then resumes each connection, whose reply
 * libmicrohttpd sends. So a slow read (/api/metrics over a day: about a
 * second) holds the worker, never the thread that answers /healthz.
 *
 * Fair and bounded per client: a prefix (http_conns.h: an address, an IPv6
 * /64, all of loopback) may have `per_prefix` jobs waiting at most (more:
 * 429 at once, Retry-After: 1), and the worker takes the oldest job of a
 * prefix other than the last one's before another of the same. A job
 * whose client has gone (hung up, or its place given to a newcomer) is
 * dropped unrun.
 */
#ifndef QPOOL_HTTP_WORK_H
#define QPOOL_HTTP_WORK_H

#include <pthread.h>
#include <stdbool.h>

#include "http/http_api.h"
#include "http/http_conns.h"

typedef struct http_job {
    struct http_job *next;
    void *conn;                /* the suspended connection (struct MHD_Connection) */
    int fd;                    /* its socket: the job is dropped when the client is gone */
    conn_prefix_t prefix;
    char *path;
    bool full;                 /* GET: the asker may read more than aggregates */
    bool post;                 /* an action: body (may be NULL) and who */
    cJSON *body;
    char who[200];
    char **args;               /* GET: the query's name, value pairs (a value may be NULL) */
    int nargs;
    http_reply_t reply;        /* the worker's, until done */
    bool done;
} http_job_t;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t more;
    http_job_t *head;          /* oldest first */
    conn_prefix_t last;        /* the prefix of the job run last */
    bool stop;
    bool running;
    int per_prefix;            /* jobs waiting per prefix, at most */
    http_ctx_t *api;
    pthread_t thread;
} http_work_t;

int http_work_start(http_work_t *w, http_ctx_t *api, int per_prefix);
/* Finish the job running; every job still waiting (or queued later) is
 * answered 503 and resumed. */
void http_work_stop(http_work_t *w);

/* Whether a job from prefix p would be queued now (else 429). */
bool http_work_room(http_work_t *w, const conn_prefix_t *p);
/* Queue j, its connection already suspended; resumed once j->done. */
void http_work_submit(http_work_t *w, http_job_t *j);

http_job_t *http_job_new(const char *path);
void http_job_add_arg(http_job_t *j, const char *name, const char *value);
void http_job_free(http_job_t *j);

#endif
