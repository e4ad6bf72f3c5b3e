/*
 * appdesc.c - see appdesc.h.
 */
#include "config/appdesc.h"
#include "os/child.h"
#include "config/pool_child.h"
#include "core/log.h"
#include "os/proc.h"
#include "core/sdnotify.h"
#include "core/util.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- parse */

enum vkind { V_NAME, V_QUEUE, V_TEXT, V_PATH, V_HOST, V_SECRET, V_PORT, V_DB, V_SECONDS, V_SECONDS0, V_DRIVER };

typedef struct {
    const char *key;
    size_t off;          /* offsetof the app_val_t */
    enum vkind kind;
    bool nullable;
} field_t;

#define F(k, kind, nullable) {#k, offsetof(app_desc_t, k), kind, nullable}
static const field_t TOP[] = {
    F(queue_connection, V_NAME, false), F(connection, V_NAME, false), F(queue, V_QUEUE, false),
    F(retry_after, V_SECONDS, false),   F(block_for, V_SECONDS0, true),
    F(cache_store, V_NAME, false),      F(cache_driver, V_DRIVER, false),
    F(cache_connection, V_NAME, false), F(cache_prefix, V_TEXT, false),
    F(down_driver, V_DRIVER, false),    F(down_file, V_PATH, false),
    F(down_store, V_NAME, false),       F(down_connection, V_NAME, false),
    F(down_prefix, V_TEXT, false),      F(queue_driver, V_DRIVER, true),
};
#undef F
#define R(k, kind, nullable) {#k, offsetof(app_redis_t, k), kind, nullable}
static const field_t REDIS[] = {
    R(host, V_HOST, true), R(port, V_PORT, true), R(socket, V_PATH, true), R(db, V_DB, false),
    R(username, V_TEXT, true), R(password, V_SECRET, true), R(prefix, V_TEXT, false),
};
#undef R

static bool printable(const char *s, size_t max, bool allow_empty)
{
    size_t n = strlen(s);
    if (n > max || (!n && !allow_empty)) return false;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == 0x7f) return false;
    return utf8_valid(s, n); /* names end up in metrics, JSON and logs */
}

static bool valid_conn_name(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 64) return false;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
            !strchr("_.:-", *s))
            return false;
    return true;
}

static bool int_in(const cJSON *v, double lo, double hi)
{
    /* the range first: a cast of an out-of-range double is undefined */
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi &&
           v->valuedouble == floor(v->valuedouble);
}

/* Type and range of one value; out gets its text. */
static bool check_value(const cJSON *v, enum vkind kind, char **out)
{
    if (kind == V_PORT || kind == V_DB || kind == V_SECONDS || kind == V_SECONDS0) {
        double lo = kind == V_PORT || kind == V_SECONDS ? 1 : 0;
        double hi = kind == V_PORT ? 65535 : kind == V_DB ? 1000000 : 86400 * 7;
        if (!int_in(v, lo, hi)) return false;
        *out = xasprintf("%lld", (long long)v->valuedouble);
        return true;
    }
    if (!cJSON_IsString(v) || !v->valuestring) return false;
    const char *s = v->valuestring;
    bool ok;
    switch (kind) {
    case V_NAME: ok = valid_conn_name(s); break;
    case V_QUEUE: ok = printable(s, 200, false) && !strchr(s, ','); break;
    case V_TEXT: ok = printable(s, 256, true); break;
    case V_PATH: ok = printable(s, 4096, false) && s[0] == '/'; break;
    case V_HOST: ok = printable(s, 255, false); break;
    case V_SECRET: ok = strlen(s) <= 4096; break;
    case V_DRIVER: ok = valid_conn_name(s); break;
    default: ok = false;
    }
    if (ok) *out = xstrdup(s);
    return ok;
}

static int parse_val(const cJSON *o, const field_t *f, app_val_t *dst, char *err, size_t errn)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, f->key);
    if (!e) return 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "value");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(e, "source");
    if (!cJSON_IsObject(e) || !v || !cJSON_IsString(src) || !printable(src->valuestring, 200, false)) {
        snprintf(err, errn, "\"%s\" is not {\"value\": ..., \"source\": \"...\"}", f->key);
        return -1;
    }
    dst->present = true;
    dst->source = xstrdup(src->valuestring);
    if (cJSON_IsNull(v) && f->nullable) return 0;
    if (!check_value(v, f->kind, &dst->value)) {
        snprintf(err, errn, "\"%s\" has a value of the wrong type or out of range", f->key);
        return -1;
    }
    return 0;
}

static int parse_fields(const cJSON *o, const field_t *fs, size_t n, void *base, char *err, size_t errn)
{
    for (size_t i = 0; i < n; i++)
        if (parse_val(o, &fs[i], (app_val_t *)((char *)base + fs[i].off), err, errn) < 0) return -1;
    return 0;
}

static int parse_redis(const cJSON *o, app_desc_t *d, char *err, size_t errn)
{
    if (!cJSON_IsObject(o)) {
        snprintf(err, errn, "\"redis\" is not an object");
        return -1;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, o)
    {
        if (d->nredis == APPDESC_MAX_REDIS) {
            snprintf(err, errn, "more than %d redis connections", APPDESC_MAX_REDIS);
            return -1;
        }
        if (!c->string || !valid_conn_name(c->string) || !cJSON_IsObject(c)) {
            snprintf(err, errn, "a redis connection has a bad name or is not an object");
            return -1;
        }
        app_redis_t *r = &d->redis[d->nredis++];
        r->name = xstrdup(c->string);
        if (parse_fields(c, REDIS, ARRAY_LEN(REDIS), r, err, errn) < 0) return -1;
        if (!r->socket.value && (!r->host.value || !r->port.value)) {
            snprintf(err, errn, "redis connection %s has neither a socket nor a host and port", r->name);
            return -1;
        }
        if (!r->db.value || !r->prefix.value) {
            snprintf(err, errn, "redis connection %s lacks db or prefix", r->name);
            return -1;
        }
    }
    return 0;
}

/* Every connection a value names must be described. */
static int check_refs(app_desc_t *d, char *err, size_t errn)
{
    const app_val_t *need[] = {&d->connection, &d->cache_connection, &d->down_connection};
    for (size_t i = 0; i < ARRAY_LEN(need); i++)
        if (need[i]->value && !appdesc_redis(d, need[i]->value)) {
            snprintf(err, errn, "redis connection %s is named but not described", need[i]->value);
            return -1;
        }
    /* a queue on another driver may come without one: the app defines no Redis */
    bool other_driver = d->queue_driver.value && strcmp(d->queue_driver.value, "redis");
    if (!d->queue_connection.value || (!d->connection.value && !other_driver) || !d->retry_after.value ||
        !d->queue.value || !d->cache_store.value) {
        snprintf(err, errn, "the queue connection, its redis connection, queue, retry_after or cache store is missing");
        return -1;
    }
    if ((d->cache_connection.value && !d->cache_prefix.value) || (d->down_connection.value && !d->down_prefix.value)) {
        snprintf(err, errn, "a cache store's connection comes without its prefix");
        return -1;
    }
    if (d->down_driver.value && strcmp(d->down_driver.value, "file") && strcmp(d->down_driver.value, "cache")) {
        snprintf(err, errn, "unknown maintenance driver");
        return -1;
    }
    return 0;
}

int appdesc_parse(const char *json, size_t len, app_desc_t *d, char *err, size_t errn)
{
    memset(d, 0, sizeof *d);
    if (len > APPDESC_MAX_OUTPUT) {
        snprintf(err, errn, "output longer than %d bytes", APPDESC_MAX_OUTPUT);
        return -1;
    }
    cJSON *root = cJSON_ParseWithLength(json, len);
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        snprintf(err, errn, "output is not a JSON object");
        goto out;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "qpool_describe");
    const cJSON *app = cJSON_GetObjectItemCaseSensitive(root, "app");
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(root, "laravel");
    const cJSON *values = cJSON_GetObjectItemCaseSensitive(root, "values");
    if (!int_in(ver, 1, 1)) {
        snprintf(err, errn, "not a version 1 description (\"qpool_describe\": 1)");
        goto out;
    }
    if (!cJSON_IsString(app) || !printable(app->valuestring, 4096, false) || !cJSON_IsObject(values)) {
        snprintf(err, errn, "\"app\" or \"values\" is missing or malformed");
        goto out;
    }
    d->app = xstrdup(app->valuestring);
    if (cJSON_IsString(lv) && printable(lv->valuestring, 64, false)) d->laravel = xstrdup(lv->valuestring);
    if (parse_fields(values, TOP, ARRAY_LEN(TOP), d, err, errn) < 0) goto out;
    if (parse_redis(cJSON_GetObjectItemCaseSensitive(root, "redis"), d, err, errn) < 0) goto out;
    rc = check_refs(d, err, errn);
out:
    cJSON_Delete(root);
    if (rc < 0) appdesc_free(d);
    return rc;
}

static void val_free(app_val_t *v)
{
    free(v->value);
    free(v->source);
}

void appdesc_free(app_desc_t *d)
{
    for (size_t i = 0; i < ARRAY_LEN(TOP); i++) val_free((app_val_t *)((char *)d + TOP[i].off));
    for (int i = 0; i < d->nredis; i++) {
        for (size_t j = 0; j < ARRAY_LEN(REDIS); j++) val_free((app_val_t *)((char *)&d->redis[i] + REDIS[j].off));
        free(d->redis[i].name);
    }
    free(d->app);
    free(d->laravel);
    memset(d, 0, sizeof *d);
}

const app_redis_t *appdesc_redis(const app_desc_t *d, const char *name)
{
    for (int i = 0; i < d->nredis; i++)
        if (!strcmp(d->redis[i].name, name)) return &d->redis[i];
    return NULL;
}

void appdesc_last_line(const char *text, size_t len, char *buf, size_t n)
{
    size_t end = len;
    while (end && (text[end - 1] == '\n' || text[end - 1] == '\r' || text[end - 1] == ' ')) end--;
    size_t start = end;
    while (start && text[start - 1] != '\n') start--;
    size_t o = 0;
    for (size_t i = start; i < end && o + 1 < n; i++) {
        unsigned char c = (unsigned char)text[i];
        buf[o++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    if (n) buf[o] = '\0';
}

/* ---------------------------------------------------------------- run */

const char *appdesc_default_adapter(void)
{
    static const char *const candidates[] = {QPOOL_DATADIR "/php/qpool-handler.php",
                                              "/usr/share/qpool/php/qpool-handler.php",
                                              QPOOL_SOURCE_DIR "/php/qpool-handler.php"};
    struct stat st;
    for (size_t i = 0; i < ARRAY_LEN(candidates); i++)
        if (stat(candidates[i], &st) == 0 && S_ISREG(st.st_mode)) return candidates[i];
    return candidates[1];
}

/* The describer's set-up, decided before the fork (child.h): the pool's
 * user, groups, environment and directory, its own process group, stdin
 * /dev/null and stdout/stderr on the pipes. */
static int describer_spec(child_spec_t *cs, const pool_conf_t *p, pid_t parent, int devnull, int out_w, int err_w)
{
    pool_conf_t q = *p;
    if (geteuid() != 0) q.has_uid = q.has_gid = false; /* `qpool check` as a user: run as that user */
    if (child_spec_pool(cs, &q, parent, SIGKILL, -1) < 0) return -1;
    cs->fds[cs->nfds++] = (child_fd_t){.from = devnull, .to = 0};
    cs->fds[cs->nfds++] = (child_fd_t){.from = out_w, .to = 1};
    cs->fds[cs->nfds++] = (child_fd_t){.from = err_w, .to = 2};
    cs->reset_signals = true;
    return 0;
}

static void child_exec(char *const *argv, const child_spec_t *cs)
{
    if (child_setup(cs) < 0) _exit(QPOOL_EX_SETUP);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* ---------------------------------------------------------------- collect (pure) */

appdesc_step_t appdesc_step(bool exited, bool over, int64_t now_ms, int64_t deadline_ms)
{
    if (over) return APPDESC_TOO_LONG;
    if (exited) return APPDESC_ANSWERED; /* whoever else still holds its pipes */
    return now_ms >= deadline_ms ? APPDESC_TIMED_OUT : APPDESC_WAIT;
}

int appdesc_wait_ms(int64_t now_ms, int64_t deadline_ms, int64_t ping_due_ms, int64_t tick_ms)
{
    int64_t until = deadline_ms;
    if (ping_due_ms && ping_due_ms < until) until = ping_due_ms;
    if (tick_ms > 0 && now_ms + tick_ms < until) until = now_ms + tick_ms;
    int64_t ms = until - now_ms;
    return ms <= 0 ? 0 : ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* ---------------------------------------------------------------- collect */

#define EXIT_TICK_MS 20   /* how often exits are looked for without a pidfd */
#define DRAIN_READS 64    /* reads per wake-up: a writer cannot keep the loop in one stream */

typedef struct {
    int fd;             /* -1: closed */
    sbuf_t buf;
    size_t cap;
    bool over;
} stream_t;

/* One describe being collected: the state appdesc_run_batch keeps per job. */
typedef struct {
    appdesc_job_t *job;
    pid_t pid;          /* 0: not started */
    int pidfd;          /* readable once the child exited; -1: none (looked for every tick) */
    stream_t s[2];      /* stdout, stderr */
    bool exited;        /* the direct child exited (a zombie until reaped) */
    bool gone;          /* ... and was reaped by the kernel: nothing to kill or reap */
    bool done;
} describe_t;

static void stream_close(stream_t *s)
{
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}

/* Read what is there, up to EAGAIN; closes the stream at EOF. */
static void drain(stream_t *s)
{
    char tmp[4096];
    for (int i = 0; i < DRAIN_READS && s->fd >= 0 && !s->over; i++) {
        ssize_t n = read(s->fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
            stream_close(s);
            return;
        }
        if (s->buf.len + (size_t)n > s->cap) {
            /* stderr: keep the tail; stdout: too long, stop */
            if (s->cap >= APPDESC_MAX_OUTPUT) {
                s->over = true;
                return;
            }
            sbuf_consume(&s->buf, s->buf.len > (size_t)n ? (size_t)n : s->buf.len);
        }
        sbuf_append(&s->buf, tmp, (size_t)n);
    }
}

static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
#else
    (void)pid;
    return -1;
#endif
}

/* Fork the describer with its stdout and stderr on non-blocking pipes (the
 * child's ends stay blocking). -1 with the reason in the job. */
static int start_one(describe_t *d)
{
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0) goto pipe_fail;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        close(po[0]);
        close(po[1]);
        goto pipe_fail;
    }
    child_spec_t cs;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = -1;
    if (devnull >= 0 && describer_spec(&cs, d->job->pool, getpid(), devnull, po[1], pe[1]) == 0) {
        pid = fork();
        if (pid == 0) child_exec(d->job->argv, &cs);
        child_spec_free(&cs);
    } else
        errno = devnull < 0 ? errno : EINVAL;
    if (devnull >= 0) close(devnull);
    close(po[1]);
    close(pe[1]);
    d->s[0].fd = po[0];
    d->s[1].fd = pe[0];
    if (pid < 0) {
        snprintf(d->job->err, sizeof d->job->err, "cannot start the describer: %s", strerror(errno));
        return -1;
    }
    d->pid = pid;
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    d->pidfd = pidfd_of(pid);
    return 0;
pipe_fail:
    snprintf(d->job->err, sizeof d->job->err, "pipe: %s", strerror(errno));
    return -1;
}

/* Has the direct child exited? It is left a zombie (WNOWAIT), so that its
 * pid, and so its process group's id, stay ours until finish() kills the
 * group and reaps it. *gone: it was reaped already (SIGCHLD ignored by
 * whoever started qpool: the kernel reaps), so its pid is no longer ours. */
static bool child_exited(pid_t pid, bool *gone)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) return (*gone = errno == ECHILD);
    return si.si_pid == pid;
}

static void describe_exit(int status, const stream_t *errs, char *err, size_t errn)
{
    char why[64], line[300];
    proc_describe_status(status, why, sizeof why);
    appdesc_last_line(errs->buf.data ? errs->buf.data : "", errs->buf.len, line, sizeof line);
    snprintf(err, errn, "%s%s%s", why, line[0] ? ": " : "", line);
}

/* Kill what is left of its process group, reap it, and give the job its answer. */
static void finish(describe_t *d, appdesc_step_t step, int timeout_s)
{
    appdesc_job_t *j = d->job;
    int status = 0;
    if (!d->gone) {
        kill(-d->pid, SIGKILL);
        if (step != APPDESC_ANSWERED) kill(d->pid, SIGKILL); /* before its setpgid */
        while (waitpid(d->pid, &status, 0) < 0 && errno == EINTR) {}
    }
    if (step == APPDESC_TIMED_OUT)
        snprintf(j->err, sizeof j->err, "no answer within %d s", timeout_s);
    else if (step == APPDESC_TOO_LONG)
        snprintf(j->err, sizeof j->err, "more than %d bytes of output", APPDESC_MAX_OUTPUT);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        describe_exit(status, &d->s[1], j->err, sizeof j->err);
    else {
        j->outlen = d->s[0].buf.len;
        j->out = sbuf_steal(&d->s[0].buf);
        j->rc = 0;
    }
    d->done = true;
}

static void describe_free(describe_t *d)
{
    for (int i = 0; i < 2; i++) {
        stream_close(&d->s[i]);
        sbuf_free(&d->s[i].buf);
    }
    if (d->pidfd >= 0) close(d->pidfd);
}

/* Step every running describe; returns how many still run, *tick when one
 * of them has no pidfd to wake the loop. */
static int step_all(describe_t *ds, int n, int64_t deadline, int timeout_s, bool *tick)
{
    int left = 0;
    *tick = false;
    for (int i = 0; i < n; i++) {
        describe_t *d = &ds[i];
        if (d->done) continue;
        if (!d->exited && child_exited(d->pid, &d->gone)) {
            d->exited = true;
            drain(&d->s[0]); /* what it wrote before it exited */
            drain(&d->s[1]);
        }
        appdesc_step_t st = appdesc_step(d->exited, d->s[0].over, mono_ms(), deadline);
        if (st != APPDESC_WAIT) {
            finish(d, st, timeout_s);
            continue;
        }
        left++;
        *tick |= d->pidfd < 0;
    }
    return left;
}

/* Sleep in poll until one of the describes has something to say (output,
 * exit) or until `ms`; then read the streams that have data. */
static void wait_some(describe_t *ds, int n, struct pollfd *pf, stream_t **of, int ms)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (ds[i].done) continue;
        for (int j = 0; j < 2; j++)
            if (ds[i].s[j].fd >= 0 && !ds[i].s[j].over) {
                of[k] = &ds[i].s[j];
                pf[k++] = (struct pollfd){.fd = ds[i].s[j].fd, .events = POLLIN};
            }
        if (ds[i].pidfd >= 0) {
            of[k] = NULL;
            pf[k++] = (struct pollfd){.fd = ds[i].pidfd, .events = POLLIN};
        }
    }
    if (poll(pf, (nfds_t)k, ms) <= 0) return;
    for (int i = 0; i < k; i++)
        if (of[i] && (pf[i].revents & (POLLIN | POLLHUP | POLLERR))) drain(of[i]);
}

int appdesc_run_batch(appdesc_job_t *jobs, int n, int timeout_s)
{
    describe_t *ds = xcalloc((size_t)n + 1, sizeof *ds);
    struct pollfd *pf = xcalloc((size_t)n * 3 + 1, sizeof *pf);
    stream_t **of = xcalloc((size_t)n * 3 + 1, sizeof *of);
    int64_t now = mono_ms(), deadline = now + (int64_t)timeout_s * 1000;
    int64_t wd = sdn_watchdog_interval_ms(), ping_due = wd ? now : 0;
    for (int i = 0; i < n; i++) {
        describe_t *d = &ds[i];
        *d = (describe_t){.job = &jobs[i], .pidfd = -1, .s = {{.fd = -1, .cap = APPDESC_MAX_OUTPUT}, {.fd = -1, .cap = 4096}}};
        sbuf_init(&d->s[0].buf);
        sbuf_init(&d->s[1].buf);
        jobs[i].rc = -1;
        jobs[i].out = NULL;
        jobs[i].outlen = 0;
        jobs[i].err[0] = '\0';
        if (start_one(d) < 0) d->done = true;
    }
    for (;;) {
        if (wd && (now = mono_ms()) >= ping_due) {
            sdn_send("WATCHDOG=1"); /* the master's loop waits for us: bounded by the deadline */
            ping_due = now + wd;
        }
        bool tick;
        if (step_all(ds, n, deadline, timeout_s, &tick) == 0) break;
        wait_some(ds, n, pf, of, appdesc_wait_ms(mono_ms(), deadline, ping_due, tick ? EXIT_TICK_MS : 0));
    }
    int answered = 0;
    for (int i = 0; i < n; i++) {
        answered += jobs[i].rc == 0;
        describe_free(&ds[i]);
    }
    free(of);
    free(pf);
    free(ds);
    return answered;
}

int appdesc_run(char *const *argv, const pool_conf_t *p, int timeout_s, char **out, size_t *outlen,
                char *err, size_t errn)
{
    appdesc_job_t job = {.argv = argv, .pool = p};
    appdesc_run_batch(&job, 1, timeout_s);
    if (job.rc < 0) {
        snprintf(err, errn, "%s", job.err);
        return -1;
    }
    *out = job.out;
    *outlen = job.outlen;
    return 0;
}
