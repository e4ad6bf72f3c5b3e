/*
 * control.c - the control socket (see control.h and docs/operations.md).
 *
 * Clients are non-blocking and buffered both ways; a request line longer
 * than CTL_MAX_LINE gets an error and the connection is closed. Replies are
 * queued and written as the socket drains, so a slow client never blocks
 * the master's loop.
 */
#include "control.h"
#include "log.h"
#include "monitor.h"
#include "proc.h"
#include "safefile.h"
#include "util.h"
#include "version.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <grp.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CTL_MAX_LINE 65536
#define CTL_MAX_CLIENTS 64
#define CTL_OUT_PAUSE (1 << 20)     /* stop reading a client's requests past this much unsent output */
#define CTL_IDLE_MS 60000           /* close clients silent this long (terminate --wait excepted) */

typedef struct ctl_client {
    int fd;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    sbuf_t in, out;
    bool waiter;            /* terminate --wait */
    bool closing;           /* close once out is flushed; read nothing more */
    bool refused;           /* not allowed: told so, its requests are read and dropped */
    int64_t last_active_ms;
} ctl_client_t;

/* ------------------------------------------------------------ listener */

int control_listen(master_t *m)
{
    const char *path = m->conf->control_socket;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        log_error("control_socket path is too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    /* The pid file lock is ours, so a socket left here is stale; but only
     * a socket of ours is removed, in a directory only root or we can change. */
    char err[512];
    if (safefile_clear_socket(path, err, sizeof err) < 0) {
        log_error("control socket: %s", err);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        log_error("control socket: %s", strerror(errno));
        return -1;
    }
    /* created with its final mode: no window where clients see another,
     * and no chmod by path afterwards */
    mode_t old = umask((mode_t)(~m->conf->control_socket_mode & 0777));
    int rb = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rb < 0 || listen(fd, 16) < 0) {
        log_error("control socket %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    if (m->conf->control_user) {
        struct passwd *pw = getpwnam(m->conf->control_user);
        if (pw) uid = pw->pw_uid;
    }
    if (m->conf->control_group) {
        struct group *gr = getgrnam(m->conf->control_group);
        if (gr) gid = gr->gr_gid;
    }
    /* lchown: never through a link planted in its place */
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && lchown(path, uid, gid) < 0)
        log_warn("control socket %s: chown: %s", path, strerror(errno));
    m->ctl_fd = fd;
    m->ctl_path = xstrdup(path); /* what we bound, whatever a reload says later */
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

static void client_free(master_t *m, int idx)
{
    ctl_client_t *c = m->clients[idx];
    epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    sbuf_free(&c->in);
    sbuf_free(&c->out);
    free(c);
    m->clients[idx] = m->clients[--m->nclients];
}

void control_close(master_t *m, bool unlink_socket)
{
    while (m->nclients) client_free(m, m->nclients - 1);
    free(m->clients);
    m->clients = NULL;
    if (m->ctl_fd >= 0) {
        close(m->ctl_fd);
        m->ctl_fd = -1;
        if (unlink_socket && m->ctl_path) unlink(m->ctl_path);
    }
    free(m->ctl_path);
    m->ctl_path = NULL;
}

/* ------------------------------------------------------------ auth */

static bool in_group(pid_t pid, gid_t want)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Groups:", 7)) continue;
        char *save = NULL;
        for (char *t = strtok_r(line + 7, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
            if ((gid_t)strtoul(t, NULL, 10) == want) found = true;
        break;
    }
    fclose(f);
    return found;
}

static bool allowed(master_t *m, const ctl_client_t *c)
{
    if (c->uid == 0 || c->uid == geteuid()) return true;
    if (m->conf->control_user) {
        struct passwd *pw = getpwnam(m->conf->control_user);
        if (pw && pw->pw_uid == c->uid) return true;
    }
    if (m->conf->control_group) {
        struct group *gr = getgrnam(m->conf->control_group);
        if (gr && (gr->gr_gid == c->gid || in_group(c->pid, gr->gr_gid))) return true;
    }
    return false;
}

/* ------------------------------------------------------------ replies */

static void client_flush(master_t *m, ctl_client_t *c)
{
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
        if (n > 0) {
            sbuf_consume(&c->out, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        c->closing = true;
        sbuf_reset(&c->out);
        break;
    }
    /* No more reading once closing (a half-closed socket stays readable for
     * ever) or while much output waits (a client that sends and never reads). */
    bool read_more = !c->closing && c->out.len < CTL_OUT_PAUSE;
    struct epoll_event ev = {.events = (read_more ? EPOLLIN : 0) | (c->out.len ? EPOLLOUT : 0), .data.fd = c->fd};
    epoll_ctl(m->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void reply_json(ctl_client_t *c, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    sbuf_puts(&c->out, s);
    sbuf_putc(&c->out, '\n');
    free(s);
    cJSON_Delete(o);
}

static void reply_error(ctl_client_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply_error(ctl_client_t *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "ok");
    cJSON_AddStringToObject(o, "error", msg);
    reply_json(c, o);
}

static cJSON *ok_reply(void)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    return o;
}

/* ------------------------------------------------------------ status */

static const char *pool_state(master_t *m, pool_t *p)
{
    if (p->removed) return "draining";
    if (m->stopping) return "stopping";
    if (pool_is_paused(&m->pools, p)) return "paused";
    return "running";
}

static cJSON *child_json(master_t *m, pool_t *p, child_t *c)
{
    sb_slot_t *slot = &m->sb.slots[c->sb];
    sb_child_t s;
    sb_read(slot, &s);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", c->pid);
    cJSON_AddNumberToObject(o, "slot", c->slot_no);
    const char *state = c->stop_reason ? "stopping" : sb_state_name(s.state);
    if (!c->stop_reason && p->conf.handler_type == HANDLER_NONE && c->pause_sent) state = "paused";
    cJSON_AddStringToObject(o, "state", state);
    cJSON_AddBoolToObject(o, "native", p->conf.handler_type != HANDLER_NONE);
    cJSON_AddNumberToObject(o, "uptime_s", (double)(mono_ms() - c->started_ms) / 1000.0);
    cJSON_AddNumberToObject(o, "jobs_done", (double)s.jobs_done);
    cJSON_AddNumberToObject(o, "jobs_failed", (double)s.jobs_failed);
    cJSON_AddNumberToObject(o, "rss_kb", (double)(s.rss_kb ? s.rss_kb : proc_rss_kb(c->pid)));
    cJSON_AddBoolToObject(o, "old_generation", c->gen != p->gen);
    if (s.state == SB_BUSY && s.job_started_ms) {
        cJSON *j = cJSON_AddObjectToObject(o, "job");
        cJSON_AddStringToObject(j, "id", s.job_id);
        cJSON_AddStringToObject(j, "name", s.job_name);
        cJSON_AddStringToObject(j, "queue", s.job_queue);
        cJSON_AddNumberToObject(j, "running_ms", (double)(wall_ms() - s.job_started_ms));
    } else
        cJSON_AddNullToObject(o, "job");
    return o;
}

static cJSON *status_json(master_t *m, bool verbose)
{
    cJSON *o = ok_reply();
    cJSON_AddStringToObject(o, "version", QPOOL_VERSION);
    cJSON_AddNumberToObject(o, "pid", getpid());
    cJSON_AddStringToObject(o, "config", m->conf->path);
    bool all_paused = m->pools.all_paused;
    int npools = 0, npaused = 0;
    for (int i = 0; i < m->pools.n; i++)
        if (!m->pools.v[i]->removed) {
            npools++;
            if (pool_is_paused(&m->pools, m->pools.v[i])) npaused++;
        }
    cJSON_AddStringToObject(o, "state", m->stopping ? "stopping"
                                        : (all_paused || (npools && npaused == npools)) ? "paused"
                                                                                        : "running");
    cJSON_AddBoolToObject(o, "paused", all_paused);
    cJSON_AddBoolToObject(o, "stopping", m->stopping);
    cJSON_AddNumberToObject(o, "max_workers", m->conf->max_workers);
    cJSON_AddNumberToObject(o, "workers", pools_live_total(&m->pools));
    cJSON *pq = cJSON_AddArrayToObject(o, "paused_queues");
    for (int i = 0; i < m->npaused_queues; i++) cJSON_AddItemToArray(pq, cJSON_CreateString(m->paused_queues[i]));
    cJSON *arr = cJSON_AddArrayToObject(o, "pools");
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        pool_counts_t c;
        pool_counts(&m->pools, p, &c);
        cJSON *po = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, po);
        cJSON_AddStringToObject(po, "name", p->conf.name);
        cJSON_AddStringToObject(po, "state", pool_state(m, p));
        cJSON_AddBoolToObject(po, "paused", pool_is_paused(&m->pools, p));
        cJSON_AddStringToObject(po, "kind", p->conf.handler_type == HANDLER_NONE ? "command"
                                            : p->conf.handler_type == HANDLER_EXEC ? "exec" : "pipe");
        cJSON_AddStringToObject(po, "balance", p->conf.balance == BALANCE_AUTO ? "auto" : "off");
        cJSON_AddNumberToObject(po, "workers", c.live);
        cJSON_AddNumberToObject(po, "busy", c.busy);
        cJSON_AddNumberToObject(po, "idle", c.idle);
        cJSON_AddNumberToObject(po, "starting", c.starting);
        cJSON_AddNumberToObject(po, "stopping", c.stopping);
        cJSON_AddNumberToObject(po, "running", c.running);
        cJSON_AddNumberToObject(po, "paused_workers", c.paused);
        cJSON_AddNumberToObject(po, "target", p->target);
        if (p->conf.balance == BALANCE_AUTO) {
            cJSON_AddNumberToObject(po, "min", p->conf.min_processes);
            cJSON_AddNumberToObject(po, "max", p->conf.max_processes);
        } else {
            cJSON_AddNumberToObject(po, "min", p->conf.processes);
            cJSON_AddNumberToObject(po, "max", p->conf.processes);
        }
        if (p->pinned >= 0)
            cJSON_AddNumberToObject(po, "pinned", p->pinned);
        else
            cJSON_AddNullToObject(po, "pinned");
        cJSON_AddNumberToObject(po, "jobs_done", (double)c.jobs_done);
        cJSON_AddNumberToObject(po, "jobs_failed", (double)c.jobs_failed);
        cJSON_AddNumberToObject(po, "jobs_per_min", round(p->jobs_per_min * 10) / 10);
        cJSON_AddNumberToObject(po, "failed_per_min", round(p->failed_per_min * 10) / 10);
        cJSON_AddNumberToObject(po, "mean_runtime_ms", round(p->mean_runtime_ms * 10) / 10);
        cJSON_AddNumberToObject(po, "memory_recycles", (double)p->memory_recycles);
        cJSON_AddNumberToObject(po, "crashes", (double)p->crashes);
        cJSON_AddBoolToObject(po, "counts_fresh", p->have_counts);
        cJSON *qa = cJSON_AddArrayToObject(po, "queues");
        uint32_t cw = pool_control_word(&m->pools, p);
        for (int q = 0; q < p->conf.nqueues; q++) {
            cJSON *qo = cJSON_CreateObject();
            cJSON_AddItemToArray(qa, qo);
            cJSON_AddStringToObject(qo, "name", p->conf.queues[q]);
            cJSON_AddNumberToObject(qo, "ready", (double)p->q[q].ready);
            cJSON_AddNumberToObject(qo, "delayed", (double)p->q[q].delayed);
            cJSON_AddNumberToObject(qo, "reserved", (double)p->q[q].reserved);
            cJSON_AddBoolToObject(qo, "paused", (cw & (1u << q)) || (cw & SB_CTL_PAUSE_ALL));
            cJSON_AddBoolToObject(qo, "laravel_paused", p->q[q].laravel_paused);
        }
        if (verbose) {
            cJSON *ca = cJSON_AddArrayToObject(po, "children");
            for (int j = 0; j < p->nchildren; j++) cJSON_AddItemToArray(ca, child_json(m, p, &p->children[j]));
        }
    }
    return o;
}

/* ------------------------------------------------------------ commands */

/* A JSON array of strings as a NULL-terminated vector (borrowed strings);
 * NULL and *bad set when an element is not a string. */
static char **str_array(const cJSON *a, int *n, bool *bad)
{
    *n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    char **v = xcalloc((size_t)*n + 1, sizeof *v);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsString(e)) *bad = true;
        else v[i++] = e->valuestring;
    }
    *n = i;
    return v;
}

static void cmd_pause(master_t *m, ctl_client_t *c, cJSON *req, bool pause)
{
    bool bad = false;
    pause_scope_t scope;
    char **pools = str_array(cJSON_GetObjectItemCaseSensitive(req, "pools"), &scope.npools, &bad);
    char **queues = str_array(cJSON_GetObjectItemCaseSensitive(req, "queues"), &scope.nqueues, &bad);
    scope.pools = pools;
    scope.queues = queues;
    char err[256];
    if (bad)
        reply_error(c, "pools and queues must be arrays of names");
    else if (master_pause(m, &scope, PAUSE_FROM_CONTROL, pause, err, sizeof err) < 0)
        reply_error(c, "%s", err);
    else
        reply_json(c, status_json(m, false));
    free(pools);
    free(queues);
}

static void cmd_scale(master_t *m, ctl_client_t *c, cJSON *req)
{
    const cJSON *pn = cJSON_GetObjectItemCaseSensitive(req, "pool");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(req, "n");
    int want;
    if (!cJSON_IsString(pn)) {
        reply_error(c, "no pool named (missing)");
        return;
    }
    if (cJSON_IsString(n) && !strcmp(n->valuestring, "auto"))
        want = -1;
    else if (cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble <= m->conf->max_workers &&
             n->valuedouble == (int)n->valuedouble)
        want = (int)n->valuedouble;
    else {
        reply_error(c, "n must be a number of workers (0..%d) or \"auto\"", m->conf->max_workers);
        return;
    }
    char err[256];
    int target = master_scale(m, pn->valuestring, want, err, sizeof err);
    if (target < 0) {
        reply_error(c, "%s", err);
        return;
    }
    cJSON *o = ok_reply();
    cJSON_AddStringToObject(o, "pool", pn->valuestring);
    cJSON_AddNumberToObject(o, "target", target);
    reply_json(c, o);
}

static void cmd_restart(master_t *m, ctl_client_t *c, cJSON *req)
{
    const cJSON *pn = cJSON_GetObjectItemCaseSensitive(req, "pool");
    const char *pool = cJSON_IsString(pn) ? pn->valuestring : NULL;
    char err[256];
    if (master_restart(m, pool, err, sizeof err) < 0) {
        reply_error(c, "%s", err);
        return;
    }
    cJSON *o = ok_reply();
    cJSON *arr = cJSON_AddArrayToObject(o, "pools");
    for (int i = 0; i < m->pools.n; i++)
        if (!m->pools.v[i]->removed && (!pool || !strcmp(pool, m->pools.v[i]->conf.name)))
            cJSON_AddItemToArray(arr, cJSON_CreateString(m->pools.v[i]->conf.name));
    reply_json(c, o);
}

static cJSON *progress_json(master_t *m, const char *event)
{
    cJSON *o = ok_reply();
    cJSON_AddStringToObject(o, "event", event);
    cJSON_AddNumberToObject(o, "children", pools_live_total(&m->pools));
    cJSON *jobs = cJSON_AddArrayToObject(o, "running");
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        for (int j = 0; j < p->nchildren; j++) {
            sb_child_t s;
            sb_read(&m->sb.slots[p->children[j].sb], &s);
            if (s.state != SB_BUSY || !s.job_started_ms) continue;
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "pool", p->conf.name);
            cJSON_AddNumberToObject(r, "pid", p->children[j].pid);
            cJSON_AddStringToObject(r, "job", s.job_name);
            cJSON_AddStringToObject(r, "id", s.job_id);
            cJSON_AddNumberToObject(r, "running_ms", (double)(wall_ms() - s.job_started_ms));
            cJSON_AddItemToArray(jobs, r);
        }
    }
    return o;
}

static void handle_line(master_t *m, ctl_client_t *c, const char *line, size_t len)
{
    cJSON *req = cJSON_ParseWithLength(line, len);
    if (!req || !cJSON_IsObject(req)) {
        reply_error(c, "invalid request: expected one JSON object per line, e.g. {\"cmd\":\"status\"}");
        cJSON_Delete(req);
        return;
    }
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    const char *name = cJSON_IsString(cmd) ? cmd->valuestring : "";
    log_debug("control: %s from uid %d", name, (int)c->uid);
    if (!strcmp(name, "status")) {
        bool verbose = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "verbose"));
        reply_json(c, status_json(m, verbose));
    } else if (!strcmp(name, "pause"))
        cmd_pause(m, c, req, true);
    else if (!strcmp(name, "continue"))
        cmd_pause(m, c, req, false);
    else if (!strcmp(name, "scale"))
        cmd_scale(m, c, req);
    else if (!strcmp(name, "restart"))
        cmd_restart(m, c, req);
    else if (!strcmp(name, "reload")) {
        char *msg = NULL;
        int rv = m->stopping ? -1 : master_reload(m, &msg);
        if (rv == 0) {
            cJSON *o = ok_reply();
            cJSON_AddStringToObject(o, "message", msg ? msg : "reloaded");
            reply_json(c, o);
        } else if (m->stopping)
            reply_error(c, "the master is stopping");
        else {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddFalseToObject(o, "ok");
            cJSON_AddStringToObject(o, "error", msg ? msg : "invalid configuration");
            cJSON_AddTrueToObject(o, "config_rejected");
            reply_json(c, o);
        }
        free(msg);
    } else if (!strcmp(name, "terminate")) {
        bool wait = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "wait"));
        log_info("terminate requested over the control socket (uid %d)", (int)c->uid);
        master_begin_stop(m, false);
        if (wait) {
            c->waiter = true;
            reply_json(c, progress_json(m, "stopping"));
            m->next_progress_ms = mono_ms() + 1000;
        } else
            reply_json(c, ok_reply());
    } else if (!*name)
        reply_error(c, "missing \"cmd\"");
    else
        reply_error(c, "unknown command \"%s\"", name);
    cJSON_Delete(req);
}

/* ------------------------------------------------------------ events */

static void accept_clients(master_t *m)
{
    for (;;) {
        int fd = accept4(m->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        struct ucred cr;
        socklen_t l = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0) {
            close(fd);
            continue;
        }
        ctl_client_t *c = xcalloc(1, sizeof *c);
        c->fd = fd;
        c->uid = cr.uid;
        c->gid = cr.gid;
        c->pid = cr.pid;
        c->last_active_ms = mono_ms();
        sbuf_init(&c->in);
        sbuf_init(&c->out);
        if (m->nclients >= CTL_MAX_CLIENTS) {
            reply_error(c, "too many control clients");
            (void)send(fd, c->out.data, c->out.len, MSG_NOSIGNAL);
            close(fd);
            sbuf_free(&c->out);
            free(c);
            continue;
        }
        if (!allowed(m, c)) {
            /* Kept as a client until its request is read: closing a socket
             * with unread input resets it, and the reply would be lost. */
            log_warn("control: refused uid %d gid %d (pid %d)", (int)cr.uid, (int)cr.gid, (int)cr.pid);
            reply_error(c, "permission denied: uid %d is not allowed on this socket", (int)cr.uid);
            c->refused = true;
        }
        m->clients = xrealloc(m->clients, sizeof *m->clients * (size_t)(m->nclients + 1));
        m->clients[m->nclients++] = c;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev);
        if (c->out.len) client_flush(m, c); /* a refusal goes out at once */
    }
}

/* Handle the complete request lines buffered, while output is not piling up. */
static void process_lines(master_t *m, ctl_client_t *c)
{
    while (!c->closing && c->out.len < CTL_OUT_PAUSE) {
        char *nl = c->in.len ? memchr(c->in.data, '\n', c->in.len) : NULL;
        size_t len = nl ? (size_t)(nl - c->in.data) : c->in.len;
        if (len > CTL_MAX_LINE) {
            reply_error(c, "request too large (limit %d bytes)", CTL_MAX_LINE);
            sbuf_reset(&c->in);
            c->closing = true;
            break;
        }
        if (!nl) break;
        if (c->refused)
            c->closing = true; /* its one request is read; the answer is already queued */
        else if (len)
            handle_line(m, c, c->in.data, len);
        sbuf_consume(&c->in, len + 1);
    }
}

void control_event(master_t *m, int fd, uint32_t events)
{
    if (fd == m->ctl_fd) {
        accept_clients(m);
        return;
    }
    int idx = -1;
    for (int i = 0; i < m->nclients; i++)
        if (m->clients[i]->fd == fd) idx = i;
    if (idx < 0) return;
    ctl_client_t *c = m->clients[idx];
    bool eof = false;
    c->last_active_ms = mono_ms();
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing) {
        char buf[8192];
        /* Read at most a few requests' worth per event: a fast sender
         * cannot make the master buffer without limit. */
        while (c->in.len <= 4 * CTL_MAX_LINE) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n > 0) {
                sbuf_append(&c->in, buf, (size_t)n);
                continue;
            }
            if (n == 0) eof = true;
            else if (errno == EINTR) continue;
            else if (errno != EAGAIN) eof = true;
            break;
        }
    }
    process_lines(m, c);
    if (eof) c->closing = true; /* a waiter that went away: the stop goes on */
    client_flush(m, c);
    if (!c->closing && c->out.len < CTL_OUT_PAUSE && c->in.len && memchr(c->in.data, '\n', c->in.len)) {
        /* output drained below the cap: requests held back can go now */
        process_lines(m, c);
        client_flush(m, c);
    }
    if (c->closing && !c->out.len) client_free(m, idx);
}

void control_tick(master_t *m, int64_t now)
{
    for (int i = 0; i < m->nclients;) {
        ctl_client_t *c = m->clients[i];
        if (!c->waiter && now - c->last_active_ms > CTL_IDLE_MS)
            client_free(m, i);
        else
            i++;
    }
    if (!m->stopping || now < m->next_progress_ms) return;
    m->next_progress_ms = now + 1000;
    for (int i = 0; i < m->nclients; i++) {
        ctl_client_t *c = m->clients[i];
        if (!c->waiter) continue;
        reply_json(c, progress_json(m, "waiting"));
        client_flush(m, c);
    }
}

void control_notify_waiters(master_t *m)
{
    for (int i = 0; i < m->nclients; i++) {
        ctl_client_t *c = m->clients[i];
        if (!c->waiter) continue;
        reply_json(c, progress_json(m, "done"));
        /* last words: block briefly so the client sees them before we exit */
        set_nonblock(c->fd, false);
        struct timeval tv = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        (void)write_all(c->fd, c->out.data, c->out.len);
        sbuf_reset(&c->out);
    }
}
