/*
 * handler.c - exec and pipe handlers (see handler.h, docs/handler-protocol.md).
 */
#include "handler.h"
#include "log.h"
#include "proc.h"
#include "util.h"

#include <bsd/unistd.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAIL_MAX 8192
#define MAX_DELAY_S (10L * 365 * 86400)
#define LINE_MAX_BYTES (16 * 1024 * 1024)
#define PIPE_BACKOFF_MIN_MS 100
#define PIPE_BACKOFF_MAX_MS 30000

struct handler {
    const pool_conf_t *p;
    char tag[64];
    int type;

    pid_t pid;          /* 0 when no process */
    bool exited;        /* reaped; status valid */
    int status;
    int in_fd, out_fd, err_fd;
    sbuf_t out, err, tail;
    sbuf_t w;           /* request bytes not yet written */
    size_t woff;

    /* pipe handler */
    bool ready;
    int backoff_ms;
    int64_t retry_at_ms;
    int64_t started_ms;

    bool in_job;
    char job_id[64];
};

handler_t *handler_new(const pool_conf_t *p, const char *tag)
{
    handler_t *h = xcalloc(1, sizeof *h);
    h->p = p;
    h->type = p->handler_type;
    snprintf(h->tag, sizeof h->tag, "%s", tag);
    h->in_fd = h->out_fd = h->err_fd = -1;
    sbuf_init(&h->out);
    sbuf_init(&h->err);
    sbuf_init(&h->tail);
    sbuf_init(&h->w);
    return h;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void close_all(handler_t *h)
{
    close_fd(&h->in_fd);
    close_fd(&h->out_fd);
    close_fd(&h->err_fd);
    sbuf_reset(&h->out);
    sbuf_reset(&h->err);
    sbuf_reset(&h->w);
    h->woff = 0;
}

/* Kill the process group and wait for the leader. */
static void kill_wait(handler_t *h)
{
    if (h->pid > 0 && !h->exited) {
        kill(-h->pid, SIGKILL);
        kill(h->pid, SIGKILL);
        int st;
        while (waitpid(h->pid, &st, 0) < 0 && errno == EINTR) {
        }
        h->status = st;
        h->exited = true;
    } else if (h->pid > 0) {
        kill(-h->pid, SIGKILL); /* leftovers of an exited leader */
    }
    close_all(h);
    h->pid = 0;
    h->exited = false;
    h->ready = false;
}

void handler_free(handler_t *h)
{
    if (!h) return;
    if (h->type == HANDLER_PIPE && h->pid > 0 && !h->exited && !h->in_job) {
        /* EOF on stdin asks a pipe handler to exit; give it 2 s. */
        close_fd(&h->in_fd);
        for (int i = 0; i < 100 && !h->exited; i++) {
            handler_reap(h);
            if (!h->exited) usleep(20000);
        }
    }
    kill_wait(h);
    sbuf_free(&h->out);
    sbuf_free(&h->err);
    sbuf_free(&h->tail);
    sbuf_free(&h->w);
    free(h);
}

void hresult_free(hresult_t *r)
{
    free(r->exception);
    free(r->exc_class);
    free(r->message);
    memset(r, 0, sizeof *r);
}

pid_t handler_pgid(const handler_t *h)
{
    return h->pid > 0 && !h->exited ? h->pid : 0;
}

static int spawn(handler_t *h, const hjob_t *j, bool capture_stderr)
{
    int in[2], out[2], err[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) < 0) return -1;
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    if (capture_stderr && pipe2(err, O_CLOEXEC) < 0) {
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        if (capture_stderr) close(err[0]), close(err[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (capture_stderr) dup2(err[1], 2);
        closefrom(3);
        proc_reset_signals();
        if (j) {
            char num[32];
            setenv("QPOOL_QUEUE", j->queue, 1);
            setenv("QPOOL_CONNECTION", j->connection, 1);
            setenv("QPOOL_JOB_ID", j->id ? j->id : "", 1);
            setenv("QPOOL_JOB_UUID", j->uuid ? j->uuid : "", 1);
            setenv("QPOOL_JOB_NAME", j->name ? j->name : "", 1);
            snprintf(num, sizeof num, "%ld", j->attempts);
            setenv("QPOOL_ATTEMPTS", num, 1);
            snprintf(num, sizeof num, "%ld", j->max_tries);
            setenv("QPOOL_MAX_TRIES", num, 1);
        }
        setenv("QPOOL_POOL", h->p->name, 1);
        execvp(h->p->handler_command[0], h->p->handler_command);
        dprintf(2, "qpool: cannot run handler %s: %s\n", h->p->handler_command[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also from here: no window where kill(-pid) misses it */
    close(in[0]);
    close(out[1]);
    if (capture_stderr) close(err[1]);
    h->pid = pid;
    h->exited = false;
    h->in_fd = in[1];
    h->out_fd = out[0];
    h->err_fd = capture_stderr ? err[0] : -1;
    set_nonblock(h->in_fd, true);
    set_nonblock(h->out_fd, true);
    if (h->err_fd >= 0) set_nonblock(h->err_fd, true);
    sbuf_reset(&h->out);
    sbuf_reset(&h->err);
    sbuf_reset(&h->tail);
    h->started_ms = mono_ms();
    return 0;
}

void handler_reap(handler_t *h)
{
    if (h->pid > 0 && !h->exited) {
        int st;
        pid_t r = waitpid(h->pid, &st, WNOHANG);
        if (r == h->pid) {
            h->status = st;
            h->exited = true;
        }
    }
}

/* Read what is available (poll said so); returns -1 at EOF. One read
 * unless it filled the buffer: more data wakes the next poll anyway. */
static int drain(int *fd, sbuf_t *b)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n > 0) {
            sbuf_append(b, buf, (size_t)n);
            if (b->len > LINE_MAX_BYTES) {
                /* a line longer than this is not output we can use: stop reading */
                log_warn("handler wrote a line longer than %d MB; closing that stream", LINE_MAX_BYTES >> 20);
                sbuf_free(b); /* give the memory back, not just the length */
                close_fd(fd);
                return -1;
            }
            if ((size_t)n < sizeof buf) return 0;
            continue;
        }
        if (n == 0) {
            close_fd(fd);
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return 0;
        close_fd(fd);
        return -1;
    }
}

static void keep_tail(sbuf_t *tail, const char *line, size_t n)
{
    if (tail->len) sbuf_putc(tail, '\n');
    sbuf_append(tail, line, n);
    if (tail->len > TAIL_MAX) sbuf_consume(tail, tail->len - TAIL_MAX);
}

/* Log complete lines of b (and the rest if flush); stderr lines go to tail. */
static void log_lines(handler_t *h, sbuf_t *b, const char *stream, sbuf_t *tail, bool flush)
{
    size_t start = 0;
    for (size_t i = 0; i < b->len; i++) {
        if (b->data[i] != '\n') continue;
        size_t n = i - start;
        if (n) {
            log_info("job %s %s: %.*s", h->job_id, stream, (int)(n > 2000 ? 2000 : n), b->data + start);
            if (tail) keep_tail(tail, b->data + start, n);
        }
        start = i + 1;
    }
    if (flush && start < b->len) {
        size_t n = b->len - start;
        log_info("job %s %s: %.*s", h->job_id, stream, (int)(n > 2000 ? 2000 : n), b->data + start);
        if (tail) keep_tail(tail, b->data + start, n);
        start = b->len;
    }
    sbuf_consume(b, start);
}

static int flush_request(handler_t *h)
{
    while (h->in_fd >= 0 && h->woff < h->w.len) {
        ssize_t n = write(h->in_fd, h->w.data + h->woff, h->w.len - h->woff);
        if (n > 0) {
            h->woff += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return 0;
        /* EPIPE: the handler is not reading (exec handler that ignores stdin) */
        close_fd(&h->in_fd);
        return -1;
    }
    if (h->woff >= h->w.len) {
        sbuf_reset(&h->w);
        h->woff = 0;
        if (h->type == HANDLER_EXEC) close_fd(&h->in_fd); /* EOF on stdin */
    }
    return 0;
}

/* ------------------------------------------------------------ pipe lines */

/* Next complete line of h->out as a parsed JSON object, or NULL (non-JSON
 * lines are logged as handler output). *more is set while lines remain. */
static cJSON *next_message(handler_t *h, bool *more)
{
    *more = false;
    for (;;) {
        char *nl = memchr(h->out.data ? h->out.data : "", '\n', h->out.len);
        if (!nl) return NULL;
        size_t n = (size_t)(nl - h->out.data);
        cJSON *o = NULL;
        if (n && h->out.data[0] == '{') o = cJSON_ParseWithLength(h->out.data, n);
        if (!o || !cJSON_IsObject(o)) {
            if (n) log_info("handler output: %.*s", (int)(n > 2000 ? 2000 : n), h->out.data);
            cJSON_Delete(o);
            sbuf_consume(&h->out, n + 1);
            continue;
        }
        sbuf_consume(&h->out, n + 1);
        *more = memchr(h->out.data ? h->out.data : "", '\n', h->out.len) != NULL;
        return o;
    }
}

static char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring ? xstrdup(v->valuestring) : NULL;
}

static void pipe_died(handler_t *h, const char *when)
{
    handler_reap(h);
    char desc[96] = "closed its output";
    if (h->exited) proc_describe_status(h->status, desc, sizeof desc);
    log_warn("pipe handler (pid %d) %s %s", (int)h->pid, desc, when);
    kill_wait(h);
    int64_t lived = mono_ms() - h->started_ms;
    if (lived > 30000) h->backoff_ms = 0;
    h->backoff_ms = h->backoff_ms ? h->backoff_ms * 2 : PIPE_BACKOFF_MIN_MS;
    if (h->backoff_ms > PIPE_BACKOFF_MAX_MS) h->backoff_ms = PIPE_BACKOFF_MAX_MS;
    h->retry_at_ms = mono_ms() + h->backoff_ms;
}

int64_t handler_retry_in_ms(const handler_t *h)
{
    int64_t d = h->retry_at_ms - mono_ms();
    return d > 0 ? d : 0;
}

int handler_prepare(handler_t *h, int sigfd)
{
    if (h->type != HANDLER_PIPE) return 1;
    if (h->pid > 0 && h->ready) {
        /* An exit is noticed through SIGCHLD (the worker calls handler_reap). */
        if (!h->exited) return 1;
        pipe_died(h, "while idle");
        return -1;
    }
    if (h->pid == 0) {
        if (mono_ms() < h->retry_at_ms) return -1;
        if (spawn(h, NULL, false) < 0) {
            log_error("cannot start pipe handler: %s", strerror(errno));
            h->retry_at_ms = mono_ms() + 1000;
            return -1;
        }
        log_info("started pipe handler (pid %d): %s", (int)h->pid, h->p->handler_command[0]);
    }
    int64_t deadline = h->started_ms + (int64_t)(h->p->handler_start_timeout * 1000);
    for (;;) {
        bool more;
        cJSON *m = next_message(h, &more);
        if (m) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type");
            bool ok = cJSON_IsString(t) && !strcmp(t->valuestring, "ready");
            cJSON_Delete(m);
            if (ok) {
                h->ready = true;
                log_debug("pipe handler (pid %d) ready after %lld ms", (int)h->pid,
                          (long long)(mono_ms() - h->started_ms));
                return 1;
            }
            log_warn("pipe handler sent a message before {\"type\":\"ready\"}; ignoring it");
            continue;
        }
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            log_error("pipe handler (pid %d) did not say ready within %g s", (int)h->pid,
                      h->p->handler_start_timeout);
            pipe_died(h, "during start-up");
            return -1;
        }
        struct pollfd p[2] = {{.fd = h->out_fd, .events = POLLIN}, {.fd = sigfd, .events = POLLIN}};
        int r = poll(p, sigfd >= 0 ? 2 : 1, (int)(left > 1000 ? 1000 : left));
        if (r < 0 && errno != EINTR) return -1;
        if (sigfd >= 0 && (p[1].revents & POLLIN)) return 0;
        if (p[0].revents) {
            if (drain(&h->out_fd, &h->out) < 0 && !memchr(h->out.data ? h->out.data : "", '\n', h->out.len)) {
                pipe_died(h, "during start-up");
                return -1;
            }
        }
    }
}

/* ------------------------------------------------------------ jobs */

static void put_job_fields(sbuf_t *b, const hjob_t *j)
{
    sbuf_puts(b, "\"id\":");
    sbuf_json_str(b, j->id ? j->id : "", j->id ? strlen(j->id) : 0);
    sbuf_puts(b, ",\"uuid\":");
    if (j->uuid)
        sbuf_json_str(b, j->uuid, strlen(j->uuid));
    else
        sbuf_puts(b, "null");
    sbuf_puts(b, ",\"name\":");
    sbuf_json_str(b, j->name, strlen(j->name));
    sbuf_puts(b, ",\"queue\":");
    sbuf_json_str(b, j->queue, strlen(j->queue));
    sbuf_puts(b, ",\"connection\":");
    sbuf_json_str(b, j->connection, strlen(j->connection));
    sbuf_printf(b, ",\"attempts\":%ld,\"max_tries\":%ld,\"timeout\":%ld,\"payload\":", j->attempts,
                j->max_tries, j->timeout);
    sbuf_json_str(b, j->raw, j->rawlen);
}

int handler_begin(handler_t *h, const hjob_t *j, hresult_t *res)
{
    memset(res, 0, sizeof *res);
    snprintf(h->job_id, sizeof h->job_id, "%s", j->id ? j->id : (j->uuid ? j->uuid : "?"));
    sbuf_reset(&h->tail);
    if (h->type == HANDLER_EXEC) {
        if (spawn(h, j, true) < 0) {
            res->kind = HRES_CRASHED;
            res->exception = xasprintf("qpool: cannot start handler: %s", strerror(errno));
            return -1;
        }
        sbuf_reset(&h->w);
        sbuf_append(&h->w, j->raw, j->rawlen);
    } else {
        if (!h->ready || h->pid == 0) {
            res->kind = HRES_CRASHED;
            res->exception = xstrdup("qpool: pipe handler is not running");
            return -1;
        }
        sbuf_reset(&h->w);
        sbuf_puts(&h->w, "{\"type\":\"job\",");
        put_job_fields(&h->w, j);
        sbuf_puts(&h->w, "}\n");
    }
    h->woff = 0;
    h->in_job = true;
    flush_request(h);
    return 0;
}

int handler_fds(handler_t *h, struct pollfd *fds, int max)
{
    int n = 0;
    if (h->in_fd >= 0 && h->woff < h->w.len && n < max) fds[n++] = (struct pollfd){h->in_fd, POLLOUT, 0};
    if (h->out_fd >= 0 && n < max) fds[n++] = (struct pollfd){h->out_fd, POLLIN, 0};
    if (h->err_fd >= 0 && n < max) fds[n++] = (struct pollfd){h->err_fd, POLLIN, 0};
    return n;
}

static void exec_result(handler_t *h, hresult_t *res)
{
    /* Take what is left in the pipes without waiting for grandchildren. */
    if (h->out_fd >= 0) drain(&h->out_fd, &h->out);
    if (h->err_fd >= 0) drain(&h->err_fd, &h->err);
    log_lines(h, &h->out, "stdout", NULL, true);
    log_lines(h, &h->err, "stderr", &h->tail, true);
    kill(-h->pid, SIGKILL); /* anything it left running in its group */
    close_all(h);
    int st = h->status;
    h->pid = 0;
    h->exited = false;
    h->in_job = false;
    memset(res, 0, sizeof *res);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        res->kind = HRES_DONE;
        return;
    }
    char desc[96];
    proc_describe_status(st, desc, sizeof desc);
    res->kind = HRES_EXCEPTION;
    res->exc_class = xstrdup("qpool\\HandlerFailed");
    res->message = xasprintf("handler %s", desc);
    if (h->tail.len)
        res->exception = xasprintf("%s", h->tail.data);
    else
        res->exception = xasprintf("qpool\\HandlerFailed: handler %s", desc);
}

static bool parse_response(handler_t *h, cJSON *m, hresult_t *res)
{
    memset(res, 0, sizeof *res);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(m, "status");
    if (!cJSON_IsString(st)) {
        log_warn("pipe handler sent a message without \"status\"; ignoring it");
        return false;
    }
    const char *s = st->valuestring;
    if (!strcmp(s, "done") || !strcmp(s, "deleted") || !strcmp(s, "ok"))
        res->kind = HRES_DONE; /* "ok" answers a failed request */
    else if (!strcmp(s, "released"))
        res->kind = HRES_RELEASED;
    else if (!strcmp(s, "failed"))
        res->kind = HRES_FAILED;
    else if (!strcmp(s, "exception"))
        res->kind = HRES_EXCEPTION;
    else {
        log_warn("pipe handler sent unknown status \"%s\"; treating it as an exception", s);
        res->kind = HRES_EXCEPTION;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "delay");
    if (cJSON_IsNumber(d)) {
        /* clamp before converting: (long)1e300 is undefined behaviour */
        double v = d->valuedouble != d->valuedouble || d->valuedouble < 0 ? 0 : d->valuedouble;
        res->has_delay = true;
        res->delay = v > MAX_DELAY_S ? MAX_DELAY_S : (long)v;
    }
    res->exc_class = jstr(m, "class");
    res->message = jstr(m, "message");
    res->exception = jstr(m, "exception");
    if (!res->exception && (res->exc_class || res->message))
        res->exception = xasprintf("%s: %s", res->exc_class ? res->exc_class : "Exception",
                                   res->message ? res->message : "");
    if (!res->exception && res->kind == HRES_EXCEPTION)
        res->exception = xasprintf("qpool\\HandlerFailed: the handler reported an exception (status \"%s\")", s);
    res->hooks_done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "hooks_done"));
    (void)h;
    return true;
}

int handler_step(handler_t *h, const struct pollfd *fds, int n, hresult_t *res)
{
    if (!h->in_job) return 0;
    for (int i = 0; i < n; i++) {
        if (!fds[i].revents) continue;
        if (fds[i].fd == h->in_fd) flush_request(h);
        else if (fds[i].fd == h->out_fd) drain(&h->out_fd, &h->out);
        else if (fds[i].fd == h->err_fd) drain(&h->err_fd, &h->err);
    }
    if (h->type == HANDLER_EXEC) {
        log_lines(h, &h->out, "stdout", NULL, false);
        log_lines(h, &h->err, "stderr", &h->tail, false);
        handler_reap(h);
        if (h->exited) {
            exec_result(h, res);
            return 1;
        }
        return 0;
    }
    bool more = true;
    while (more) {
        cJSON *m = next_message(h, &more);
        if (!m) break;
        bool ok = parse_response(h, m, res);
        cJSON_Delete(m);
        if (ok) {
            h->in_job = false;
            return 1;
        }
    }
    handler_reap(h);
    if (h->out_fd < 0 || h->exited) {
        char desc[96] = "closed its output";
        if (h->exited) proc_describe_status(h->status, desc, sizeof desc);
        memset(res, 0, sizeof *res);
        res->kind = HRES_CRASHED;
        res->exc_class = xstrdup("qpool\\HandlerCrashed");
        res->message = xasprintf("the pipe handler %s while running the job", desc);
        res->exception = xasprintf("qpool\\HandlerCrashed: the pipe handler %s while running the job", desc);
        pipe_died(h, "while running a job");
        h->in_job = false;
        return 1;
    }
    return 0;
}

void handler_abort(handler_t *h)
{
    if (h->pid > 0) log_warn("killing handler process group %d", (int)h->pid);
    kill_wait(h);
    h->in_job = false;
}

void handler_failed(handler_t *h, const hjob_t *j, const hresult_t *why, const char *reason,
                    int timeout_ms)
{
    if (h->type != HANDLER_PIPE) return;
    int64_t deadline = mono_ms() + timeout_ms;
    int r;
    while ((r = handler_prepare(h, -1)) != 1) {
        if (mono_ms() >= deadline) {
            log_warn("job %s: could not run its failure hooks: the pipe handler is not available",
                     j->id ? j->id : "?");
            return;
        }
        usleep((useconds_t)(handler_retry_in_ms(h) > 100 ? 100000 : handler_retry_in_ms(h) * 1000 + 1000));
    }
    sbuf_reset(&h->w);
    sbuf_puts(&h->w, "{\"type\":\"failed\",");
    put_job_fields(&h->w, j);
    sbuf_puts(&h->w, ",\"reason\":");
    sbuf_json_str(&h->w, reason, strlen(reason));
    sbuf_puts(&h->w, ",\"exception\":{\"class\":");
    if (why && why->exc_class)
        sbuf_json_str(&h->w, why->exc_class, strlen(why->exc_class));
    else
        sbuf_puts(&h->w, "null");
    sbuf_puts(&h->w, ",\"message\":");
    if (why && why->message)
        sbuf_json_str(&h->w, why->message, strlen(why->message));
    else
        sbuf_puts(&h->w, "null");
    sbuf_puts(&h->w, ",\"text\":");
    if (why && why->exception)
        sbuf_json_str(&h->w, why->exception, strlen(why->exception));
    else
        sbuf_puts(&h->w, "null");
    sbuf_puts(&h->w, "}}\n");
    h->woff = 0;
    h->in_job = true;
    snprintf(h->job_id, sizeof h->job_id, "%s", j->id ? j->id : "?");
    flush_request(h);
    while (h->in_job) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            log_warn("job %s: failure hooks did not finish within %d s; killing the handler",
                     h->job_id, timeout_ms / 1000);
            handler_abort(h);
            return;
        }
        struct pollfd fds[4];
        int n = handler_fds(h, fds, 4);
        if (poll(fds, (nfds_t)n, (int)(left > 500 ? 500 : left)) < 0 && errno != EINTR) break;
        hresult_t res;
        if (handler_step(h, fds, n, &res) == 1) {
            if (res.kind == HRES_CRASHED)
                log_warn("job %s: the handler died while running failure hooks", h->job_id);
            hresult_free(&res);
            break;
        }
    }
    h->in_job = false;
}
