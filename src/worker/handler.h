/*
 * handler.h - "fire": handing a job to a handler process.
 *
 *   exec  one process per job: argv (no shell), the raw payload on stdin,
 *         QPOOL_* variables in its environment. Exit 0 = done; anything else
 *         is an exception whose text is the tail of its stderr.
 *   pipe  one persistent process per worker, newline-delimited JSON requests
 *         and responses (docs/handler-protocol.md). Started before the first
 *         job, restarted with backoff when it dies, killed on a job timeout.
 *         Protocol 2 carries the requests on fd 3 and the responses on fd 4
 *         (stdin is /dev/null, stdout is logged), every request has a "seq"
 *         that its response must echo, and anything else on the response
 *         channel restarts the handler. Protocol 1 (stdin/stdout, no ids) is
 *         still spoken to handlers that ask for it.
 *
 * Every handler runs in its own process group, so a timeout kills the
 * handler and everything it started, and dies with its worker (parent-death
 * signal). The worker drives a job through handler_fds/handler_step from its
 * own poll loop, so signals and timeouts are handled while a job runs.
 */
#ifndef QPOOL_HANDLER_H
#define QPOOL_HANDLER_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"

typedef struct {
    const char *queue;
    const char *connection;     /* Laravel queue connection name */
    const char *id;
    const char *uuid;
    const char *name;
    long attempts;              /* this attempt (stored + 1) */
    long max_tries;
    long timeout;
    const char *raw;            /* payload as popped */
    size_t rawlen;
    const char *reserved;       /* reserved copy (attempts + 1) */
    size_t reslen;
} hjob_t;

enum hres_kind {
    HRES_DONE = 0,       /* success (or the job deleted itself) */
    HRES_RELEASED,       /* the job asked to go back, with delay */
    HRES_FAILED,         /* the job failed itself */
    HRES_EXCEPTION,      /* the job threw */
    HRES_CRASHED,        /* the handler died mid-job */
    HRES_TIMEOUT,        /* killed by qpool at the job's timeout */
    HRES_NOT_STARTED,    /* the handler never read the request: give the job back, no attempt */
    HRES_EMPTY,          /* a pop request (app_driver) found no job */
    HRES_POPPED,         /* a pop request took a job; a run request runs it */
};

typedef struct {
    enum hres_kind kind;
    bool has_delay;
    long delay;
    char *exception;     /* full text for the failed record */
    char *exc_class;
    char *message;
    bool hooks_done;     /* pipe: the handler already ran the failure path */
    bool exiting;        /* pipe: the handler said this is its last response */
    char *job;           /* pop: the response's "job" object, as JSON (appdriver.h reads it) */
    char *tags;          /* pipe: the response's "tags" array as JSON text, or NULL */
    bool silenced;       /* pipe: the job is silenced (Horizon's Silenced interface) */
    char *batch;         /* pipe: the response's "batch" (the job's batch id), or NULL (checked when recorded) */
} hresult_t;

typedef struct handler handler_t;

handler_t *handler_new(const pool_conf_t *p, const char *tag);
void handler_free(handler_t *h);
/* fn is called with the handler's process group each time one starts, and
 * with 0 when it is gone: the worker's scoreboard slot follows every
 * restart, failure hooks' included. */
void handler_on_group(handler_t *h, void (*fn)(void *arg, pid_t pgid), void *arg);
void hresult_free(hresult_t *r);

/* Make sure a pipe handler is up and has said it is ready. Returns 1 when
 * ready, 0 if sigfd became readable first (call again after handling the
 * signals), -1 if it failed to start (retry after handler_retry_in_ms). */
int handler_prepare(handler_t *h, int sigfd);
int64_t handler_retry_in_ms(const handler_t *h);

/* Start a job. On -1 the handler could not even start it and *res is set. */
int handler_begin(handler_t *h, const hjob_t *j, hresult_t *res);
/* app_driver pools: send {"type":TYPE,"seq":N,FIELDS} (fields: JSON members,
 * no braces, may be ""; appdriver_request). "pop": the handler takes the
 * next job through the app's driver (HRES_POPPED, its fields in res->job;
 * HRES_EMPTY: none); "run": it runs that job, and the result comes as for a
 * job, with res->job. -1 as for handler_begin. */
int handler_begin_app(handler_t *h, const char *type, const char *fields, hresult_t *res);
/* The handler's ready line said "pop_run": true: a pop request with
 * "run": true is answered twice, "popped" at once, then the outcome of the
 * run with no request between (one round trip per job). */
bool handler_pop_run(const handler_t *h);
/* After such a "popped": wait for the second answer to the same request
 * (handler_fds/handler_step as for any); the handler's output is logged as
 * job_id's (the popped job's id, or NULL). -1 (res: crashed) when no
 * handler runs. */
int handler_more(handler_t *h, const char *job_id, hresult_t *res);
/* fds to poll while the job runs (fills at most max, returns count). */
int handler_fds(handler_t *h, struct pollfd *fds, int max);
/* Process poll results; true when the job's result is in *res. */
bool handler_step(handler_t *h, const struct pollfd *fds, int n, hresult_t *res);
/* SIGCHLD arrived: reap our processes. */
void handler_reap(handler_t *h);
/* Kill the running job's process group (timeout / parent death). */
void handler_abort(handler_t *h);
/* Send sig to the handler's process (its leader only; a forked one through
 * its pidfd): 0, or -1 when none runs. */
int handler_signal(handler_t *h, int sig);

/* Pipe handlers: run the job's failure path (failed() hook, failer). Waits
 * at most timeout_ms; best effort. */
void handler_failed(handler_t *h, const hjob_t *j, const hresult_t *why, const char *reason,
                    int timeout_ms);

pid_t handler_pgid(const handler_t *h);
/* Preload: fd is the pool zygote's socket (zygote.h); pipe handlers are
 * then forked by the zygote instead of started here. -1: start them here.
 * zygote_pid: that zygote, as the master says (a forked handler must be its
 * child), 0 when none runs. Once the zygote refused a request, or 3 of its
 * forks in a row ended before they said ready, handlers start here for good. */
void handler_set_zygote(handler_t *h, int fd, pid_t zygote_pid);
/* A forked handler's start time (/proc/PID/stat ticks), 0 for any other:
 * the worker publishes it, and the master kills only that process's group. */
unsigned long long handler_start_ticks(const handler_t *h);
/* The running handler was forked by the zygote (its memory is mostly the
 * zygote's, shared: count its private memory). */
bool handler_forked(const handler_t *h);

/* One line from a pipe handler's response channel, while the request with
 * id seq is outstanding (proto 2: the line must be exactly its response).
 * Returns 1 with *res filled for a response, 0 for a line to log and ignore
 * (protocol 1 only: not JSON, or no "status"), -1 for a protocol violation
 * (why says what). Pure: no I/O. */
int handler_parse_line(const char *line, size_t len, int proto, uint64_t seq, hresult_t *res, char *why,
                       size_t whyn);

#endif
