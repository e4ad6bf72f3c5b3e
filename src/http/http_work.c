/*
 * http_work.c - the requests that wait, on one worker thread (see
 * http_work.h).
 */
#include "http/http_work.h"
#include "core/log.h"

#include <microhttpd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

http_job_t *http_job_new(const char *path)
{
    http_job_t *j = xcalloc(1, sizeof *j);
    j->fd = -1;
    j->path = xstrdup(path);
    return j;
}

void http_job_add_arg(http_job_t *j, const char *name, const char *value)
{
    j->args = xrealloc(j->args, sizeof *j->args * (size_t)(2 * j->nargs + 2));
    j->args[2 * j->nargs] = xstrdup(name);
    j->args[2 * j->nargs + 1] = value ? xstrdup(value) : NULL;
    j->nargs++;
}

void http_job_free(http_job_t *j)
{
    if (!j) return;
    for (int i = 0; i < 2 * j->nargs; i++) free(j->args[i]);
    free(j->args);
    free(j->path);
    cJSON_Delete(j->body);
    if (!j->reply.persistent) free(j->reply.body);
    free(j);
}

/* http_arg_fn over a job's copied query (the connection is not touched
 * from this thread). */
static const char *job_arg(void *req, const char *name)
{
    const http_job_t *j = req;
    for (int i = 0; i < j->nargs; i++)
        if (!strcmp(j->args[2 * i], name)) return j->args[2 * i + 1];
    return NULL;
}

/* The client hung up, or its socket was shut down to give its place. */
static bool client_gone(int fd)
{
    struct pollfd pf = {.fd = fd, .events = POLLRDHUP};
    return fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void run(http_work_t *w, http_job_t *j)
{
    if (client_gone(j->fd))
        http_reply_error(&j->reply, 503, "the client went away"); /* never sent */
    else if (j->post)
        http_action(w->api, j->path, j->body, j->who, &j->reply);
    else if (!http_api_get(w->api, j->path, j->full, job_arg, j, &j->reply))
        http_reply_error(&j->reply, 404, "no such endpoint");
}

/* Mark j done and give its connection back: j belongs to
 * libmicrohttpd's thread from then on. Called without w->lock. */
static void finish(http_work_t *w, http_job_t *j)
{
    void *conn = j->conn;
    pthread_mutex_lock(&w->lock);
    j->done = true;
    pthread_mutex_unlock(&w->lock);
    MHD_resume_connection(conn);
}

/* The next job (w->lock held): the oldest of a prefix other than the
 * last's, else the oldest. Unlinked. */
static http_job_t *take(http_work_t *w)
{
    http_job_t **pick = &w->head;
    for (http_job_t **p = &w->head; *p; p = &(*p)->next)
        if (!conn_prefix_same(&(*p)->prefix, &w->last)) {
            pick = p;
            break;
        }
    http_job_t *j = *pick;
    *pick = j->next;
    j->next = NULL;
    w->last = j->prefix;
    return j;
}

static void refuse_left(http_work_t *w)
{
    pthread_mutex_lock(&w->lock);
    http_job_t *j = w->head;
    w->head = NULL;
    pthread_mutex_unlock(&w->lock);
    while (j) {
        http_job_t *next = j->next;
        http_reply_error(&j->reply, 503, "the HTTP process is stopping");
        finish(w, j);
        j = next;
    }
}

static void *work_loop(void *arg)
{
    http_work_t *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (!w->stop && !w->head) pthread_cond_wait(&w->more, &w->lock);
        if (w->stop) {
            pthread_mutex_unlock(&w->lock);
            break;
        }
        http_job_t *j = take(w);
        pthread_mutex_unlock(&w->lock);
        run(w, j);
        finish(w, j);
    }
    refuse_left(w);
    return NULL;
}

int http_work_start(http_work_t *w, http_ctx_t *api, int per_prefix)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->more, NULL);
    w->api = api;
    w->per_prefix = per_prefix > 0 ? per_prefix : 1;
    int err = pthread_create(&w->thread, NULL, work_loop, w);
    w->running = err == 0;
    if (err) {
        log_error("cannot start the HTTP worker thread: %s", strerror(err));
        w->stop = true;
    }
    return err ? -1 : 0;
}

void http_work_stop(http_work_t *w)
{
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->more);
    pthread_mutex_unlock(&w->lock);
    if (w->running) pthread_join(w->thread, NULL);
    w->running = false;
    refuse_left(w);
}

bool http_work_room(http_work_t *w, const conn_prefix_t *p)
{
    int n = 0;
    pthread_mutex_lock(&w->lock);
    for (const http_job_t *j = w->head; j; j = j->next) n += conn_prefix_same(&j->prefix, p);
    pthread_mutex_unlock(&w->lock);
    return n < w->per_prefix;
}

void http_work_submit(http_work_t *w, http_job_t *j)
{
    pthread_mutex_lock(&w->lock);
    bool stopped = w->stop;
    if (!stopped) {
        http_job_t **p = &w->head;
        while (*p) p = &(*p)->next;
        *p = j;
        pthread_cond_signal(&w->more);
    }
    pthread_mutex_unlock(&w->lock);
    if (stopped) {
        http_reply_error(&j->reply, 503, "the HTTP process is stopping");
        finish(w, j);
    }
}
