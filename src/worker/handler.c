/*
 * handler.c - exec and pipe handlers (see handler.h, docs/handler-protocol.md).
 *
 * A pipe handler is started in one of two layouts:
 *   fds    (protocol 2) fd 0 /dev/null, fd 1 a pipe the worker logs, fd 2
 *          the worker's stderr, fd 3 requests, fd 4 responses. Nothing a job
 *          prints, and nothing a process it starts reads or writes on its
 *          stdin/stdout, can reach the protocol.
 *   stdio  (protocol 1) requests on stdin, responses on stdout.
 * With handler.protocol = "auto" a handler is started in the fds layout; one
 * that says ready on stdout instead speaks protocol 1 and is started again in
 * the stdio layout (once per worker).
 */
#include "worker/handler.h"
#include "core/log.h"
#include "os/proc.h"
#include "core/util.h"

#include <bsd/unistd.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAIL_MAX 8192
#define MAX_DELAY_S (10L * 365 * 86400)
#define LINE_MAX_BYTES (16 * 1024 * 1024)
#define PIPE_BACKOFF_MIN_MS 100
#define PIPE_BACKOFF_MAX_MS 30000
#define EXIT_GRACE_MS 5000       /* a handler that said "exiting" gets this long to go */
#define LOG_PIPE_SIZE (1 << 20)  /* room for a handler's stdout between two jobs */
#define FD_REQUEST 3
#define FD_RESPONSE 4
#define FORKS_LOST_MAX 3         /* forked handlers in a row that end before ready: boot them here */

enum handler_layout { LAYOUT_FDS = 0, LAYOUT_STDIO = 1 };

struct handler {
    const pool_conf_t *p;
    char tag[64];
    int type;
    void (*on_group)(void *arg, pid_t pgid);   /* told of every new or gone process group */
    bool warned_v1;     /* said once that protocol 1 can misattribute */
    void *on_group_arg;

    pid_t pid;          /* 0 when no process */
    bool exited;        /* reaped; status valid */
    int status;
    int in_fd, out_fd, err_fd, log_fd;
    sbuf_t out, err, tail, log;
    sbuf_t w;           /* request bytes not yet written */
    size_t woff;
    bool unread_known;  /* the request pipe was closed under us: */
    size_t unread;      /* this many written bytes were never read */

    /* pipe handler */
    enum handler_layout layout;
    int proto;          /* 1 or 2, known once ready */
    bool ready;
    bool exiting;       /* its last response said so: start a fresh one */
    bool pop_run;       /* its ready line said "pop_run": a pop with "run" runs the job too */
    int64_t exit_deadline_ms;
    uint64_t seq;       /* id of the last request sent */
    int backoff_ms;
    int64_t retry_at_ms;
    int64_t started_ms;

    bool in_job;
    char job_id[64];

    /* preload: handlers forked by the pool's zygote (zygote.h) */
    int zygote_fd;      /* the zygote's socket; -1: start handlers ourselves */
    bool forked;        /* the handler is the zygote's child: no SIGCHLD, no wait status */
    int pidfd;          /* a forked handler's, once it said who it is and that checked out (-1: no pidfd_open) */
    unsigned long long pid_start; /* its start time (/proc/PID/stat) */
    unsigned long long asked_ticks; /* when we asked: the handler is younger */
    bool warned_zygote; /* said once that the zygote refused */
    pid_t zygote_pid;   /* the zygote of our generation, as the master says (0: none now) */
    int forks_lost;     /* forked handlers in a row that ended before they said ready */
};

void handler_on_group(handler_t *h, void (*fn)(void *arg, pid_t pgid), void *arg)
{
    h->on_group = fn;
    h->on_group_arg = arg;
}

handler_t *handler_new(const pool_conf_t *p, const char *tag)
{
    handler_t *h = xcalloc(1, sizeof *h);
    h->p = p;
    h->type = p->handler_type;
    h->layout = p->handler_protocol == HANDLER_PROTO_1 ? LAYOUT_STDIO : LAYOUT_FDS;
    snprintf(h->tag, sizeof h->tag, "%s", tag);
    h->in_fd = h->out_fd = h->err_fd = h->log_fd = -1;
    h->zygote_fd = h->pidfd = -1;
    sbuf_init(&h->out);
    sbuf_init(&h->err);
    sbuf_init(&h->tail);
    sbuf_init(&h->log);
    sbuf_init(&h->w);
    return h;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Forget what the streams held and how much of the request was written. */
static void reset_streams(handler_t *h)
{
    sbuf_reset(&h->out);
    sbuf_reset(&h->err);
    sbuf_reset(&h->log);
    h->woff = 0;
    h->unread_known = false;
}

static void close_all(handler_t *h)
{
    close_fd(&h->in_fd);
    close_fd(&h->out_fd);
    close_fd(&h->err_fd);
    close_fd(&h->log_fd);
    reset_streams(h);
    sbuf_reset(&h->w);
}

/* Is the forked handler still there? Its pidfd says; without one (a kernel
 * or valgrind without pidfd_open), its pid with the start time it had. */
static bool forked_alive(const handler_t *h)
{
    if (h->pidfd >= 0) {
        struct pollfd p = {.fd = h->pidfd, .events = POLLIN};
        return poll(&p, 1, 0) == 0;
    }
    return proc_start_ticks(h->pid) == h->pid_start;
}

/* A forked handler is not our child: kill its group (checked when it said
 * ready) and the leader through its pidfd, and give it a moment to go. */
static void kill_forked(handler_t *h)
{
    if (h->pid > 0 && forked_alive(h)) {
        kill(-h->pid, SIGKILL); /* its own group: checked when it said ready */
        if (h->pidfd >= 0)
            syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
        else
            kill(h->pid, SIGKILL);
        for (int i = 0; i < 100 && forked_alive(h); i++) {
            struct pollfd p = {.fd = h->pidfd, .events = POLLIN};
            if (poll(&p, h->pidfd >= 0 ? 1 : 0, 20) < 0 && errno != EINTR) break;
        }
    }
    if (h->pidfd >= 0) close(h->pidfd);
    h->pidfd = -1;
    h->forked = false;
}

/* Kill the process group and wait for the leader. */
static void kill_wait(handler_t *h)
{
    if (h->forked) {
        kill_forked(h);
    } else if (h->pid > 0 && !h->exited) {
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
    if (h->on_group) h->on_group(h->on_group_arg, 0);
    h->exited = false;
    h->ready = false;
    h->exiting = false;
}

void handler_free(handler_t *h)
{
    if (!h) return;
    if (h->type == HANDLER_PIPE && h->pid > 0 && !h->exited && !h->in_job) {
        /* EOF on its request channel asks a pipe handler to exit; give it 2 s. */
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
    sbuf_free(&h->log);
    sbuf_free(&h->w);
    free(h);
}

void hresult_free(hresult_t *r)
{
    free(r->exception);
    free(r->exc_class);
    free(r->message);
    free(r->job);
    cJSON_free(r->tags);
    free(r->batch);
    memset(r, 0, sizeof *r);
}

bool handler_forked(const handler_t *h)
{
    return h->forked && h->pid > 0;
}

pid_t handler_pgid(const handler_t *h)
{
    return h->pid > 0 && !h->exited ? h->pid : 0;
}

/* ------------------------------------------------------------ processes */

/* In the child: make fd i a copy of want[i] (-1: leave fd i as it is), then
 * close everything above. Sources are first moved out of the way so that no
 * dup2 overwrites a source still needed. */
static void child_fds(const int *want, int n)
{
    int tmp[8];
    for (int i = 0; i < n; i++) tmp[i] = want[i] >= 0 ? fcntl(want[i], F_DUPFD_CLOEXEC, 16) : -1;
    for (int i = 0; i < n; i++)
        if (tmp[i] >= 0) dup2(tmp[i], i);
    closefrom(n);
}

static void child_env(const handler_t *h, const hjob_t *j)
{
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
    if (h->type == HANDLER_PIPE && h->layout == LAYOUT_FDS) {
        setenv("QPOOL_PROTOCOL", "2", 1);
        setenv("QPOOL_REQUEST_FD", "3", 1);
        setenv("QPOOL_RESPONSE_FD", "4", 1);
    } else {
        unsetenv("QPOOL_PROTOCOL");
        unsetenv("QPOOL_REQUEST_FD");
        unsetenv("QPOOL_RESPONSE_FD");
    }
    setenv("QPOOL_POOL", h->p->name, 1);
}

static void close_pair(int *p)
{
    if (p[0] >= 0) close(p[0]);
    if (p[1] >= 0) close(p[1]);
    p[0] = p[1] = -1;
}

/* Our ends of a new handler's pipes (-1: none), non-blocking; buffers reset. */
static void take_channel(handler_t *h, int in, int out, int err, int log)
{
    h->exited = false;
    h->in_fd = in;
    h->out_fd = out;
    h->err_fd = err;
    h->log_fd = log;
    int fds[] = {in, out, err, log};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0) set_nonblock(fds[i], true);
    reset_streams(h);
    sbuf_reset(&h->tail);
    h->started_ms = mono_ms();
}

/* Pipes: in (requests or the payload), out (responses, or stdout of an exec
 * handler), extra (stderr of an exec handler, stdout of an fds-layout pipe
 * handler). */
static int spawn(handler_t *h, const hjob_t *j)
{
    bool fds = h->type == HANDLER_PIPE && h->layout == LAYOUT_FDS;
    bool want_extra = h->type == HANDLER_EXEC || fds;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, extra[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || (want_extra && pipe2(extra, O_CLOEXEC) < 0)) {
        int e = errno;
        close_pair(in), close_pair(out), close_pair(extra);
        errno = e;
        return -1;
    }
    if (fds) (void)fcntl(extra[1], F_SETPIPE_SZ, LOG_PIPE_SIZE); /* best effort */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close_pair(in), close_pair(out), close_pair(extra);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        if (fds) {
            int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (devnull < 0) _exit(126); /* never the worker's stdin in its place */
            int want[5] = {devnull, extra[1], -1, in[0], out[1]};
            child_fds(want, 5);
        } else {
            int want[3] = {in[0], out[1], h->type == HANDLER_EXEC ? extra[1] : -1};
            child_fds(want, 3);
        }
        proc_reset_signals();
        child_env(h, j);
        const char *cmd = h->p->handler_command[0];
        execvp(cmd, h->p->handler_command);
        dprintf(2, "qpool: cannot run handler %s: %s\n", cmd, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also from here: no window where kill(-pid) misses it */
    h->forked = false;
    close(in[0]);
    close(out[1]);
    if (want_extra) close(extra[1]);
    h->pid = pid;
    if (h->on_group) h->on_group(h->on_group_arg, pid);
    take_channel(h, in[1], out[0], h->type == HANDLER_EXEC ? extra[0] : -1, fds ? extra[0] : -1);
    return 0;
}

/* How it ended: a forked handler's status is its parent's, the zygote's. */
static void describe_exit(const handler_t *h, char *desc, size_t n)
{
    if (h->forked)
        snprintf(desc, n, "exited");
    else
        proc_describe_status(h->status, desc, n);
}

void handler_reap(handler_t *h)
{
    if (h->forked) { /* its parent, the zygote, reaps it; its pidfd says when it is gone */
        if (h->pid > 0 && !h->exited && !forked_alive(h)) {
            h->exited = true;
            h->status = -1;
        }
        return;
    }
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

static void log_line(handler_t *h, const char *stream, const char *s, size_t n)
{
    if (h->in_job)
        log_info("job %s %s: %.*s", h->job_id, stream, (int)(n > 2000 ? 2000 : n), s);
    else
        log_info("handler %s: %.*s", stream, (int)(n > 2000 ? 2000 : n), s);
}

/* Log complete lines of b (and the rest if flush); stderr lines go to tail. */
static void log_lines(handler_t *h, sbuf_t *b, const char *stream, sbuf_t *tail, bool flush)
{
    size_t start = 0;
    for (size_t i = 0; i < b->len; i++) {
        if (b->data[i] != '\n') continue;
        size_t n = i - start;
        if (n) {
            log_line(h, stream, b->data + start, n);
            if (tail) keep_tail(tail, b->data + start, n);
        }
        start = i + 1;
    }
    if (flush && start < b->len) {
        size_t n = b->len - start;
        log_line(h, stream, b->data + start, n);
        if (tail) keep_tail(tail, b->data + start, n);
        start = b->len;
    }
    sbuf_consume(b, start);
}

/* The handler's stdout in the fds layout: only ever logged. */
static void drain_log(handler_t *h)
{
    if (h->log_fd < 0) return;
    drain(&h->log_fd, &h->log);
    log_lines(h, &h->log, "stdout", NULL, h->log_fd < 0);
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
        /* EPIPE: nobody reads it any more. What was written and not read
         * stays in the pipe; count it before the pipe goes. */
        int unread = 0;
        h->unread_known = ioctl(h->in_fd, FIONREAD, &unread) == 0;
        h->unread = unread > 0 ? (size_t)unread : 0;
        close_fd(&h->in_fd);
        return -1;
    }
    if (h->woff >= h->w.len && h->type == HANDLER_EXEC) close_fd(&h->in_fd); /* EOF on stdin */
    return 0;
}

/* The handler is gone without answering: did it ever read the request? All
 * of it still unread in the pipe means it never took the job. */
static bool request_unread(handler_t *h)
{
    size_t unread;
    if (h->in_fd >= 0) {
        int n = 0;
        if (ioctl(h->in_fd, FIONREAD, &n) < 0) return false;
        unread = n > 0 ? (size_t)n : 0;
    } else if (h->unread_known) {
        unread = h->unread;
    } else
        return false;
    return unread >= h->woff;
}

/* ------------------------------------------------------------ pipe lines */

static char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring ? xstrdup(v->valuestring) : NULL;
}

static enum hres_kind response_kind(const char *s)
{
    if (!strcmp(s, "done") || !strcmp(s, "deleted") || !strcmp(s, "ok")) return HRES_DONE; /* "ok" answers a failed request */
    if (!strcmp(s, "released")) return HRES_RELEASED;
    if (!strcmp(s, "failed")) return HRES_FAILED;
    if (!strcmp(s, "exception")) return HRES_EXCEPTION;
    if (!strcmp(s, "empty")) return HRES_EMPTY;   /* a pop request found no job */
    if (!strcmp(s, "popped")) return HRES_POPPED; /* a pop request holds one: run it next */
    log_warn("pipe handler sent unknown status \"%.64s\"; treating it as an exception", s);
    return HRES_EXCEPTION;
}

static void response_fields(const cJSON *m, const char *status, hresult_t *res)
{
    res->kind = response_kind(status);
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
        res->exception = xasprintf("qpool\\HandlerFailed: the handler reported an exception (status \"%.64s\")", status);
    res->hooks_done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "hooks_done"));
    res->exiting = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "exiting"));
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(m, "job");
    if (cJSON_IsObject(job)) res->job = cJSON_PrintUnformatted(job);
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(m, "tags");
    if (cJSON_IsArray(tags)) res->tags = cJSON_PrintUnformatted(tags); /* bounded when recorded (jobhist.h) */
    res->silenced = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "silenced"));
    res->batch = jstr(m, "batch");
}

int handler_parse_line(const char *line, size_t len, int proto, uint64_t seq, hresult_t *res, char *why,
                       size_t whyn)
{
    memset(res, 0, sizeof *res);
    cJSON *m = len && line[0] == '{' ? cJSON_ParseWithLength(line, len) : NULL;
    int rv = -1;
    if (!m || !cJSON_IsObject(m)) {
        snprintf(why, whyn, "a line that is not a JSON object");
        rv = proto >= 2 ? -1 : 0;
        goto out;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(m, "status");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "seq");
    if (!cJSON_IsString(st)) {
        snprintf(why, whyn, "a message without \"status\"");
        rv = proto >= 2 ? -1 : 0;
        goto out;
    }
    if (proto >= 2 || id) {
        /* a response must name the request it answers: exactly the outstanding one */
        if (!cJSON_IsNumber(id)) {
            snprintf(why, whyn, "a response without \"seq\" (request %" PRIu64 " is outstanding)", seq);
            goto out;
        }
        if (id->valuedouble != (double)seq) {
            snprintf(why, whyn, "a response to request %.0f while request %" PRIu64 " is outstanding",
                     id->valuedouble, seq);
            goto out;
        }
    }
    response_fields(m, st->valuestring, res);
    rv = 1;
out:
    cJSON_Delete(m);
    return rv;
}

/* Next complete line of the response channel: 1 = a response in *res, 0 =
 * no complete line, -1 = a protocol violation (why). Lines protocol 1
 * tolerates are logged and skipped. */
static int next_response(handler_t *h, hresult_t *res, char *why, size_t whyn)
{
    for (;;) {
        char *nl = h->out.len ? memchr(h->out.data, '\n', h->out.len) : NULL;
        if (!nl) return 0;
        size_t n = (size_t)(nl - h->out.data);
        int rv = n || h->proto >= 2 ? handler_parse_line(h->out.data, n, h->proto, h->seq, res, why, whyn) : 0;
        if (rv == 0 && n) log_info("handler output: %.*s", (int)(n > 2000 ? 2000 : n), h->out.data);
        sbuf_consume(&h->out, n + 1);
        if (rv != 0) return rv;
    }
}

static void restart_later(handler_t *h)
{
    int64_t lived = mono_ms() - h->started_ms;
    kill_wait(h);
    if (lived > 30000) h->backoff_ms = 0;
    h->backoff_ms = h->backoff_ms ? h->backoff_ms * 2 : PIPE_BACKOFF_MIN_MS;
    if (h->backoff_ms > PIPE_BACKOFF_MAX_MS) h->backoff_ms = PIPE_BACKOFF_MAX_MS;
    h->retry_at_ms = mono_ms() + h->backoff_ms;
}

static void pipe_died(handler_t *h, const char *when)
{
    handler_reap(h);
    drain_log(h);
    char desc[96] = "closed its output";
    if (h->exited) describe_exit(h, desc, sizeof desc);
    log_warn("pipe handler (pid %d) %s %s", (int)h->pid, desc, when);
    restart_later(h);
}

static void violation(handler_t *h, const char *why)
{
    log_warn("pipe handler (pid %d) broke the protocol: %s; killing and restarting it", (int)h->pid, why);
    restart_later(h);
}

int64_t handler_retry_in_ms(const handler_t *h)
{
    int64_t d = h->retry_at_ms - mono_ms();
    return d > 0 ? d : 0;
}

/* A ready handler between requests: anything on its response channel now
 * answers no request. 0 fine, -1 it was killed (violation or gone). One
 * poll when there is nothing to see (the usual case, once per job). */
static int check_idle(handler_t *h)
{
    struct pollfd p[2] = {{.fd = h->out_fd, .events = POLLIN}, {.fd = h->log_fd, .events = POLLIN}};
    if (poll(p, 2, 0) <= 0 && !h->out.len && !h->exited) return 0;
    if (p[1].revents) drain_log(h);
    if (p[0].revents && h->out_fd >= 0) drain(&h->out_fd, &h->out);
    if (h->out.len) {
        char why[160];
        hresult_t r;
        int rv = next_response(h, &r, why, sizeof why);
        hresult_free(&r);
        if (rv == 1) snprintf(why, sizeof why, "a response when no request was outstanding");
        if (rv != 0 || (h->proto >= 2 && h->out.len)) {
            if (rv == 0) snprintf(why, sizeof why, "output when no request was outstanding");
            violation(h, why);
            return -1;
        }
    }
    handler_reap(h);
    if (h->exited || h->out_fd < 0) {
        pipe_died(h, "while idle");
        return -1;
    }
    return 0;
}

/* It said its last response was its last: let it go (EOF on its request
 * channel), at most EXIT_GRACE_MS, then start a fresh one at once. Returns 0
 * if the signal fd became readable first. */
static int let_go(handler_t *h, int sigfd)
{
    if (!h->exit_deadline_ms) {
        h->exit_deadline_ms = mono_ms() + EXIT_GRACE_MS;
        close_fd(&h->in_fd);
    }
    while (!h->exited && mono_ms() < h->exit_deadline_ms) {
        drain_log(h);
        struct pollfd p = {.fd = sigfd, .events = POLLIN};
        if (sigfd >= 0 && poll(&p, 1, 20) > 0) return 0; /* the worker reads signals, SIGCHLD reaps */
        if (sigfd < 0) usleep(20000);
        handler_reap(h);
    }
    if (!h->exited) log_warn("pipe handler (pid %d) said it was exiting but is still there; killing it", (int)h->pid);
    kill_wait(h);
    h->exit_deadline_ms = 0;
    h->backoff_ms = 0;
    h->retry_at_ms = 0;
    return 1;
}

/* A ready line on stdout in the fds layout: a protocol 1 handler. */
static bool v1_ready_on_stdout(handler_t *h)
{
    if (h->p->handler_protocol != HANDLER_PROTO_AUTO || h->log_fd < 0) return false;
    drain(&h->log_fd, &h->log);
    bool found = false;
    for (char *nl; !found && h->log.len && (nl = memchr(h->log.data, '\n', h->log.len));) {
        size_t n = (size_t)(nl - h->log.data);
        cJSON *m = n && h->log.data[0] == '{' ? cJSON_ParseWithLength(h->log.data, n) : NULL;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type");
        found = cJSON_IsString(t) && !strcmp(t->valuestring, "ready");
        if (!found && n) log_line(h, "stdout", h->log.data, n);
        cJSON_Delete(m);
        sbuf_consume(&h->log, n + 1);
    }
    return found;
}

/* Send the zygote our ends for a new handler: stderr, the stdout log pipe,
 * the request pipe, the response pipe (SCM_RIGHTS), with "fork 1 PID". */
static int ask_zygote(int zfd, const int fds[4])
{
    char text[48];
    int len = snprintf(text, sizeof text, "fork 1 %d\n", (int)getpid());
    struct iovec iov = {.iov_base = text, .iov_len = (size_t)len};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(4 * sizeof(int));
    memcpy(CMSG_DATA(c), fds, 4 * sizeof(int));
    return sendmsg(zfd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* A handler forked by the pool's zygote: the same pipes as spawn()'s fds
 * layout, sent instead of inherited. Its pid comes with its ready line. */
static int spawn_forked(handler_t *h)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, log[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(log, O_CLOEXEC) < 0) {
        int e = errno;
        close_pair(in), close_pair(out), close_pair(log);
        errno = e;
        return -1;
    }
    (void)fcntl(log[1], F_SETPIPE_SZ, LOG_PIPE_SIZE);
    int send[4] = {2, log[1], in[0], out[1]};
    h->asked_ticks = proc_now_ticks();
    int rv = ask_zygote(h->zygote_fd, send);
    int e = errno;
    close(in[0]), close(out[1]), close(log[1]);
    if (rv < 0) {
        close(in[1]), close(out[0]), close(log[0]);
        errno = e;
        return -1;
    }
    h->pid = 0;
    h->forked = true;
    take_channel(h, in[1], out[0], -1, log[0]);
    return 0;
}

/* Ask the zygote; 1 asked, 0 start one ourselves, -1 try again soon. */
static int start_forked(handler_t *h)
{
    if (h->zygote_fd < 0 || h->type != HANDLER_PIPE || h->layout != LAYOUT_FDS) return 0;
    if (spawn_forked(h) == 0) {
        h->seq = 0;
        log_debug("asked the zygote for a pipe handler");
        return 1;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EMFILE || errno == ENFILE) {
        h->retry_at_ms = mono_ms() + 50; /* its queue is full while it boots */
        return -1;
    }
    if (!h->warned_zygote)
        log_warn("the pool's zygote cannot be asked for a handler (%s): starting handlers that boot the app "
                 "themselves", strerror(errno));
    h->warned_zygote = true;
    h->zygote_fd = -1; /* its generation is over, or it cannot preload: for good */
    return 0;
}

void handler_set_zygote(handler_t *h, int fd, pid_t zygote_pid)
{
    h->zygote_pid = zygote_pid;
    if (!h->warned_zygote) h->zygote_fd = fd;
}

/* A forked handler ended before it said ready (or was refused). After
 * FORKS_LOST_MAX in a row the zygote's forks cannot run here, whatever the
 * reason (the zygote's log says it): handlers boot the app here from now on,
 * as when it refuses a request, rather than ask it for ever. */
static void fork_lost(handler_t *h)
{
    if (!h->forked || h->ready) return;
    if (++h->forks_lost < FORKS_LOST_MAX || h->warned_zygote) return;
    log_warn("%d handlers in a row forked by the pool's zygote ended before they said ready (see the log above): "
             "starting handlers that boot the app themselves", h->forks_lost);
    h->warned_zygote = true;
    h->zygote_fd = -1;
}

unsigned long long handler_start_ticks(const handler_t *h)
{
    return h->forked && h->pid > 0 ? h->pid_start : 0;
}

static int start(handler_t *h)
{
    if (mono_ms() < h->retry_at_ms) return -1;
    int f = start_forked(h);
    if (f) return f > 0 ? 0 : -1;
    if (spawn(h, NULL) < 0) {
        log_error("cannot start pipe handler: %s", strerror(errno));
        h->retry_at_ms = mono_ms() + 1000;
        return -1;
    }
    h->seq = 0;
    log_info("started pipe handler (pid %d, protocol %s): %s", (int)h->pid,
             h->layout == LAYOUT_FDS ? "2 on fds 3/4" : "1 on stdin/stdout", h->p->handler_command[0]);
    return 0;
}

/* What is wrong with the process a forked handler's ready line names, or
 * NULL. The zygote and the handler run the app's code, so nothing is taken
 * on their word: the pid must be a child of our generation's zygote (never
 * the zygote itself), younger than our request, lead its own process group
 * and hold both ends of our channel that we sent. */
static const char *not_our_fork(const handler_t *h, pid_t pid, int pfd, bool no_pidfd, unsigned long long born)
{
    if ((pfd < 0 && !no_pidfd) || !born) return "is not running";
    if (pid == h->zygote_pid) return "is the pool's zygote";
    if (!h->zygote_pid || proc_ppid(pid) != h->zygote_pid) return "is not a child of the pool's zygote";
    if (born + 1 < h->asked_ticks) return "is older than the request for it";
    if (getpgid(pid) != pid) return "does not lead its own process group";
    if (!proc_holds_same(pid, h->in_fd) || !proc_holds_same(pid, h->out_fd)) return "does not hold its channel";
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    if (pfd >= 0 ? poll(&p, 1, 0) > 0 : proc_start_ticks(pid) != born) return "is not running";
    return NULL;
}

/* A forked handler says which process it is (not_our_fork checks it); then
 * a pidfd follows it. 0, or -1 (why). */
static int adopt(handler_t *h, double claimed, char *why, size_t n)
{
    if (!(claimed > 1 && claimed < 1 << 30) || (pid_t)claimed == getpid()) {
        snprintf(why, n, "a forked handler's ready line without a valid \"pid\"");
        return -1;
    }
    pid_t pid = (pid_t)claimed;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    bool no_pidfd = pfd < 0 && errno == ENOSYS; /* then its start time tells it from a reused pid */
    unsigned long long born = proc_start_ticks(pid);
    const char *bad = not_our_fork(h, pid, pfd, no_pidfd, born);
    if (bad) {
        if (pfd >= 0) close(pfd);
        snprintf(why, n, "it says it is pid %d, which %s", (int)pid, bad);
        return -1;
    }
    h->pid = pid;
    h->pidfd = pfd;
    h->pid_start = born;
    if (h->on_group) h->on_group(h->on_group_arg, pid);
    return 0;
}

/* The first line on the response channel must be {"type":"ready"}. 1 ready,
 * 0 not yet, -1 it failed. */
static int take_ready(handler_t *h)
{
    char *nl = h->out.len ? memchr(h->out.data, '\n', h->out.len) : NULL;
    if (!nl) return 0;
    size_t n = (size_t)(nl - h->out.data);
    cJSON *m = n ? cJSON_ParseWithLength(h->out.data, n) : NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "type");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "protocol");
    bool ok = cJSON_IsString(t) && !strcmp(t->valuestring, "ready");
    int proto = cJSON_IsNumber(v) && v->valuedouble >= 2 ? 2 : 1;
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(m, "pid");
    double claimed = cJSON_IsNumber(pid) ? pid->valuedouble : 0;
    h->pop_run = ok && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "pop_run"));
    cJSON_Delete(m);
    sbuf_consume(&h->out, n + 1);
    char why[160];
    if (ok && h->forked && adopt(h, claimed, why, sizeof why) < 0) {
        fork_lost(h);
        violation(h, why);
        return -1;
    }
    if (!ok) {
        if (h->layout == LAYOUT_FDS) {
            fork_lost(h);
            violation(h, "its first message was not {\"type\":\"ready\"}");
            return -1;
        }
        log_warn("pipe handler sent a message before {\"type\":\"ready\"}; ignoring it");
        return 0;
    }
    /* on fds 3/4 it is protocol 2 whatever it says; on stdio, what it says */
    h->proto = h->layout == LAYOUT_FDS ? 2 : proto;
    h->ready = true;
    if (h->forked) h->forks_lost = 0;
    if (h->proto < 2 && !h->warned_v1) {
        /* once per worker: it restarts the handler, not the warning */
        log_warn("pipe handler (pid %d) speaks protocol 1: its responses carry no request id, so a stray "
                 "{\"status\":...} line on its stdout can be taken for a job's outcome; move it to protocol 2 "
                 "(docs/handler-protocol.md)", (int)h->pid);
        h->warned_v1 = true;
    }
    log_debug("pipe handler (pid %d) ready after %lld ms, protocol %d", (int)h->pid,
              (long long)(mono_ms() - h->started_ms), h->proto);
    return 1;
}

int handler_prepare(handler_t *h, int sigfd)
{
    if (h->type != HANDLER_PIPE) return 1;
    if (h->pid > 0 && h->ready && h->exiting) {
        if (!let_go(h, sigfd)) return 0;
    } else if (h->pid > 0 && h->ready) {
        /* An exit is noticed through SIGCHLD (the worker calls handler_reap);
         * output between jobs is looked for before each request
         * (handler_begin), or now if some is already buffered. */
        if (h->exited) {
            pipe_died(h, "while idle");
            return -1;
        }
        return h->out.len && check_idle(h) < 0 ? -1 : 1;
    }
    if (h->pid == 0 && !h->forked && start(h) < 0) return -1;
    int64_t deadline = h->started_ms + (int64_t)(h->p->handler_start_timeout * 1000);
    for (;;) {
        int r = take_ready(h);
        if (r) return r;
        if (v1_ready_on_stdout(h)) {
            log_info("pipe handler (pid %d) said ready on stdout: it speaks protocol 1; starting it again with "
                     "the protocol on stdin/stdout (set handler.protocol = 1 to skip this)", (int)h->pid);
            kill_wait(h);
            h->layout = LAYOUT_STDIO;
            if (start(h) < 0) return -1;
            deadline = h->started_ms + (int64_t)(h->p->handler_start_timeout * 1000);
            continue;
        }
        if (h->out_fd < 0) { /* EOF before a complete ready line */
            fork_lost(h);
            pipe_died(h, "during start-up");
            return -1;
        }
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            log_error("pipe handler (pid %d) did not say ready within %g s", (int)h->pid,
                      h->p->handler_start_timeout);
            fork_lost(h);
            pipe_died(h, "during start-up");
            return -1;
        }
        struct pollfd p[3] = {{.fd = h->out_fd, .events = POLLIN}, {.fd = h->log_fd, .events = POLLIN},
                              {.fd = sigfd, .events = POLLIN}};
        int r2 = poll(p, sigfd >= 0 ? 3 : 2, (int)(left > 1000 ? 1000 : left));
        if (r2 < 0 && errno != EINTR) return -1;
        if (sigfd >= 0 && (p[2].revents & POLLIN)) return 0;
        if (p[1].revents && h->p->handler_protocol != HANDLER_PROTO_AUTO) drain_log(h);
        if (p[0].revents) drain(&h->out_fd, &h->out);
    }
}

/* ------------------------------------------------------------ jobs */

static void put_job_fields(sbuf_t *b, const hjob_t *j)
{
    sbuf_puts(b, "\"id\":");
    sbuf_json_str(b, j->id ? j->id : "", j->id ? strlen(j->id) : 0);
    sbuf_puts(b, ",\"uuid\":");
    sbuf_json_str_or_null(b, j->uuid);
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

/* Start a request: {"type":TYPE,"seq":N, job fields ... (the caller adds
 * more, then end_request). */
static void begin_request(handler_t *h, const char *type, const hjob_t *j)
{
    sbuf_reset(&h->w);
    h->woff = 0;
    h->unread_known = false;
    h->seq++;
    sbuf_printf(&h->w, "{\"type\":\"%s\",\"seq\":%" PRIu64 ",", type, h->seq);
    put_job_fields(&h->w, j);
    snprintf(h->job_id, sizeof h->job_id, "%s", j->id && *j->id ? j->id : (j->uuid ? j->uuid : "?"));
}

static void end_request(handler_t *h)
{
    sbuf_puts(&h->w, "}\n");
    h->in_job = true;
    flush_request(h);
}

static void not_started(hresult_t *res, const char *why)
{
    memset(res, 0, sizeof *res);
    res->kind = HRES_NOT_STARTED;
    res->exception = xstrdup(why);
}

int handler_begin(handler_t *h, const hjob_t *j, hresult_t *res)
{
    memset(res, 0, sizeof *res);
    sbuf_reset(&h->tail);
    if (h->type == HANDLER_EXEC) {
        snprintf(h->job_id, sizeof h->job_id, "%s", j->id && *j->id ? j->id : (j->uuid ? j->uuid : "?"));
        if (spawn(h, j) < 0) {
            res->kind = HRES_CRASHED;
            res->exception = xasprintf("qpool: cannot start handler: %s", strerror(errno));
            return -1;
        }
        sbuf_reset(&h->w);
        sbuf_append(&h->w, j->raw, j->rawlen);
        h->in_job = true;
        flush_request(h);
        return 0;
    }
    /* between the worker's check and now (a pop went by) it may have spoken out of turn */
    if (!h->ready || h->pid == 0 || h->exiting || check_idle(h) < 0) {
        not_started(res, "qpool: the pipe handler is not ready");
        return -1;
    }
    begin_request(h, "job", j);
    end_request(h);
    return 0;
}

int handler_begin_app(handler_t *h, const char *type, const char *fields, hresult_t *res)
{
    memset(res, 0, sizeof *res);
    sbuf_reset(&h->tail);
    if (h->type != HANDLER_PIPE || !h->ready || h->pid == 0 || h->exiting || check_idle(h) < 0) {
        not_started(res, "qpool: the pipe handler is not ready");
        return -1;
    }
    sbuf_reset(&h->w);
    h->woff = 0;
    h->unread_known = false;
    h->seq++;
    sbuf_printf(&h->w, "{\"type\":\"%s\",\"seq\":%" PRIu64 "%s%s", type, h->seq, *fields ? "," : "", fields);
    snprintf(h->job_id, sizeof h->job_id, "(%s)", type);
    end_request(h);
    return 0;
}

bool handler_pop_run(const handler_t *h)
{
    return h->type == HANDLER_PIPE && h->ready && h->proto >= 2 && h->pop_run;
}

int handler_fds(handler_t *h, struct pollfd *fds, int max)
{
    int n = 0;
    if (h->in_fd >= 0 && h->woff < h->w.len && n < max) fds[n++] = (struct pollfd){h->in_fd, POLLOUT, 0};
    if (h->out_fd >= 0 && n < max) fds[n++] = (struct pollfd){h->out_fd, POLLIN, 0};
    if (h->err_fd >= 0 && n < max) fds[n++] = (struct pollfd){h->err_fd, POLLIN, 0};
    if (h->log_fd >= 0 && n < max) fds[n++] = (struct pollfd){h->log_fd, POLLIN, 0};
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
    if (h->on_group) h->on_group(h->on_group_arg, 0);
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

static void crashed(hresult_t *res, const char *what)
{
    memset(res, 0, sizeof *res);
    res->kind = HRES_CRASHED;
    res->exc_class = xstrdup("qpool\\HandlerCrashed");
    res->message = xasprintf("the pipe handler %s while running the job", what);
    res->exception = xasprintf("qpool\\HandlerCrashed: the pipe handler %s while running the job", what);
}

int handler_more(handler_t *h, const char *job_id, hresult_t *res)
{
    memset(res, 0, sizeof *res);
    if (job_id && *job_id) snprintf(h->job_id, sizeof h->job_id, "%s", job_id); /* its output, named */
    if (h->type != HANDLER_PIPE || h->pid <= 0) {
        crashed(res, "was gone");
        return -1;
    }
    h->in_job = true; /* the same seq: its next line answers the same request */
    return 0;
}

/* The pipe handler ended without answering the outstanding request. */
static void pipe_gone(handler_t *h, hresult_t *res)
{
    handler_reap(h);
    char desc[96] = "closed its output";
    if (h->exited) describe_exit(h, desc, sizeof desc);
    if (request_unread(h)) {
        log_warn("pipe handler (pid %d) %s without reading the request for job %s: giving the job back", (int)h->pid,
                 desc, h->job_id);
        not_started(res, "qpool: the pipe handler exited before it read the job");
        restart_later(h);
    } else {
        crashed(res, desc);
        pipe_died(h, "while running a job");
    }
}

bool handler_step(handler_t *h, const struct pollfd *fds, int n, hresult_t *res)
{
    if (!h->in_job) return false;
    for (int i = 0; i < n; i++) {
        if (!fds[i].revents) continue;
        if (fds[i].fd == h->in_fd) flush_request(h);
        else if (fds[i].fd == h->out_fd) drain(&h->out_fd, &h->out);
        else if (fds[i].fd == h->err_fd) drain(&h->err_fd, &h->err);
        else if (fds[i].fd == h->log_fd) drain_log(h);
    }
    if (h->type == HANDLER_EXEC) {
        log_lines(h, &h->out, "stdout", NULL, false);
        log_lines(h, &h->err, "stderr", &h->tail, false);
        handler_reap(h);
        if (h->exited) {
            exec_result(h, res);
            return true;
        }
        return false;
    }
    char why[160];
    int rv = next_response(h, res, why, sizeof why);
    if (rv == 1) {
        h->in_job = false;
        if (res->exiting) h->exiting = true;
        return true;
    }
    if (rv < 0) {
        violation(h, why);
        crashed(res, "broke the protocol");
        free(res->message);
        res->message = xasprintf("the pipe handler broke the protocol (%s) while running the job", why);
        h->in_job = false;
        return true;
    }
    handler_reap(h);
    if (h->out_fd < 0 || h->exited) {
        pipe_gone(h, res);
        h->in_job = false;
        return true;
    }
    return false;
}

int handler_signal(handler_t *h, int sig)
{
    if (h->pid <= 0 || h->exited) return -1;
    if (h->forked) {
        if (!forked_alive(h)) return -1;
        if (h->pidfd >= 0) return syscall(SYS_pidfd_send_signal, h->pidfd, sig, NULL, 0) == 0 ? 0 : -1;
    }
    return kill(h->pid, sig) == 0 ? 0 : -1;
}

void handler_abort(handler_t *h)
{
    if (h->pid > 0) log_warn("killing handler process group %d", (int)h->pid);
    kill_wait(h);
    h->in_job = false;
}

/* What comes before a value (its key), then the value as a JSON string, or
 * null for none. */
static void put_str_or_null(sbuf_t *b, const char *before, const char *v)
{
    sbuf_puts(b, before);
    sbuf_json_str_or_null(b, v);
}

static void put_failed_fields(sbuf_t *b, const hresult_t *why, const char *reason)
{
    put_str_or_null(b, ",\"reason\":", reason);
    put_str_or_null(b, ",\"exception\":{\"class\":", why ? why->exc_class : NULL);
    put_str_or_null(b, ",\"message\":", why ? why->message : NULL);
    put_str_or_null(b, ",\"text\":", why ? why->exception : NULL);
    sbuf_puts(b, "}");
}

/* One failed request to a ready handler: 1 answered, 0 it never read it (try
 * a fresh one), -1 give up. */
static int failed_once(handler_t *h, const hjob_t *j, const hresult_t *why, const char *reason, int64_t deadline)
{
    begin_request(h, "failed", j);
    put_failed_fields(&h->w, why, reason);
    end_request(h);
    while (h->in_job) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            log_warn("job %s: failure hooks did not finish within the deadline; killing the handler", h->job_id);
            handler_abort(h);
            return -1;
        }
        struct pollfd fds[4];
        int n = handler_fds(h, fds, 4);
        if (poll(fds, (nfds_t)n, (int)(left > 500 ? 500 : left)) < 0 && errno != EINTR) {
            handler_abort(h);
            return -1;
        }
        hresult_t res;
        if (handler_step(h, fds, n, &res)) {
            enum hres_kind kind = res.kind;
            hresult_free(&res);
            if (kind == HRES_NOT_STARTED) return 0;
            if (kind == HRES_CRASHED) log_warn("job %s: the handler died while running failure hooks", h->job_id);
            return 1;
        }
    }
    return 1;
}

void handler_failed(handler_t *h, const hjob_t *j, const hresult_t *why, const char *reason,
                    int timeout_ms)
{
    if (h->type != HANDLER_PIPE) return;
    int64_t deadline = mono_ms() + timeout_ms;
    for (int tries = 0; tries < 3; tries++) {
        int r;
        while ((r = handler_prepare(h, -1)) != 1) {
            if (mono_ms() >= deadline) {
                log_warn("job %s: could not run its failure hooks: the pipe handler is not available",
                         j->id ? j->id : "?");
                return;
            }
            int64_t wait = handler_retry_in_ms(h);
            usleep((useconds_t)(wait > 100 ? 100000 : wait * 1000 + 1000));
        }
        if (failed_once(h, j, why, reason, deadline) != 0) break;
    }
    h->in_job = false;
}
