/*
 * control.c - the control socket (see control.h and docs/operations.md).
 *
 * Socket I/O and argument checks only: a request line is parsed into a
 * ctl_request_t (pure, fuzzed), then one master verb runs it. Clients are
 * non-blocking and buffered both ways; a request line longer than
 * CTL_MAX_LINE gets an error and the connection is closed. Replies are
 * queued and written as the socket drains, so a slow client never blocks
 * the master's loop. Refused peers get one error line and are closed within
 * CTL_REFUSED_MS, whatever they send; they never take an allowed client's
 * place. A user other than root and qpool's own holds CTL_MAX_PER_USER
 * places at most (no_place), and only whole requests renew a place.
 */
#include "master/control.h"
#include "master/classpause.h"
#include "master/budgeting.h"
#include "master/mbatches.h"
#include "master/mapp.h"
#include "master/mappdash.h"
#include "core/log.h"
#include "core/safefile.h"
#include "master/status.h"
#include "core/reply.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <grp.h>
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
#define CTL_MAX_CLIENTS 64          /* allowed clients at once */
#define CTL_MAX_REFUSED 64          /* refused clients waiting to be closed */
#define CTL_REFUSED_MS 2000         /* how long a refused client may stay */
#define CTL_OUT_PAUSE (1 << 20)     /* stop reading a client's requests past this much unsent output */
#define CTL_WAITER_OUT_MAX 65536    /* a terminate --wait client not reading gets no more progress lines */
#define CTL_IDLE_MS 60000           /* close clients with no request or reply this long (terminate --wait excepted) */
#define CTL_LINE_MS 10000           /* a request line must arrive whole within this */
#define CTL_MAX_PER_USER 8          /* places one user holds at most, root and qpool's user excepted */
#define CTL_OWNERS_ONLY 16          /* places only root and qpool's user may take */
#define CTL_MAX_GROUPS 256

typedef struct ctl_client {
    int fd;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    sbuf_t in, out;
    bool waiter;            /* terminate --wait */
    bool closing;           /* close once out is flushed; read nothing more */
    bool refused;           /* not allowed: told so, then closed */
    bool adopted;           /* the HTTP process's channel (control_adopt) */
    uint64_t serial;        /* its number, never reused: what a deferred reply names (mapp.h) */
    int64_t last_active_ms;  /* its last request handled, or reply bytes it read */
    int64_t line_started_ms; /* a request line's first byte, while it is incomplete (0: none) */
    int64_t heard_ms;        /* when it last sent a byte (0: never) */
    int64_t accepted_ms;
} ctl_client_t;

struct control {
    int fd;                 /* the listener */
    int epfd;               /* the master's epoll set */
    char *path;             /* the path bound (unlinked at exit) */
    ctl_client_t **clients;
    int nclients;
    int nrefused;           /* of nclients */
    int64_t next_progress_ms;
    uint64_t next_serial;
};

/* ------------------------------------------------------------ requests */

static const char *const CMD_NAMES[CTL_NCMDS] = {
    [CTL_STATUS] = "status", [CTL_PAUSE] = "pause", [CTL_CONTINUE] = "continue", [CTL_SCALE] = "scale",
    [CTL_RESTART] = "restart", [CTL_RELOAD] = "reload", [CTL_TERMINATE] = "terminate", [CTL_STOP_JOB] = "stop-job",
    [CTL_BATCHES] = "batches", [CTL_BATCH_RETRY] = "batch-retry", [CTL_APP] = "app",
};

/* A JSON array of names (absent: none) as an owned NULL-terminated vector;
 * -1 when it is not an array of strings. */
static int name_array(const cJSON *a, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!a) return 0;
    if (!cJSON_IsArray(a)) return -1;
    int size = cJSON_GetArraySize(a);
    char **v = xcalloc((size_t)size + 1, sizeof *v);
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsString(e) || i >= size) {
            for (int j = 0; j < i; j++) free(v[j]);
            free(v);
            return -1;
        }
        v[i++] = xstrdup(e->valuestring);
    }
    *out = v;
    *n = i;
    return 0;
}

static int parse_scale(const cJSON *req, int max_workers, ctl_request_t *r, char *err, size_t errn)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(req, "n");
    if (!r->pool) {
        snprintf(err, errn, "no pool named (missing)");
        return -1;
    }
    if (cJSON_IsString(n) && !strcmp(n->valuestring, "auto"))
        r->n = -1;
    else if (cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble <= max_workers &&
             n->valuedouble == (int)n->valuedouble)
        r->n = (int)n->valuedouble;
    else {
        snprintf(err, errn, "n must be a number of workers (0..%d) or \"auto\"", max_workers);
        return -1;
    }
    return 0;
}

/* stop-job's uuid: a name of at most 127 bytes, no control bytes. */
static int parse_uuid(const cJSON *req, ctl_request_t *r, char *err, size_t errn)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(req, "uuid");
    size_t n = cJSON_IsString(u) ? strlen(u->valuestring) : 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)u->valuestring[i] < 0x20 || u->valuestring[i] == 0x7f) n = 0;
    if (!n || n > 127) {
        snprintf(err, errn, "stop-job takes \"uuid\": the running job's uuid");
        return -1;
    }
    r->uuid = xstrdup(u->valuestring);
    return 0;
}

/* batch-retry's "batch": an id as agent_batch_id_ok says. */
static int parse_batch(const cJSON *req, ctl_request_t *r, char *err, size_t errn)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(req, "batch");
    if (!cJSON_IsString(b) || !agent_batch_id_ok(b->valuestring)) {
        snprintf(err, errn, "batch-retry takes \"batch\": a batch id (1..%d of A-Z a-z 0-9 . _ : -)", AGENT_BATCH_ID_MAX);
        return -1;
    }
    r->uuid = xstrdup(b->valuestring);
    return 0;
}

/* app's "pool" and "request": the request rebuilt from the keys its op takes. */
static int parse_app(const cJSON *req, ctl_request_t *r, char *err, size_t errn)
{
    if (!r->pool) {
        snprintf(err, errn, "app takes \"pool\": the pool whose app agent to ask");
        return -1;
    }
    return mapp_request(cJSON_GetObjectItemCaseSensitive(req, "request"), &r->app, err, errn);
}

int ctl_parse_request(const char *line, size_t len, int max_workers, ctl_request_t *r, char *err, size_t errn)
{
    memset(r, 0, sizeof *r);
    cJSON *req = cJSON_ParseWithLength(line, len);
    if (!req || !cJSON_IsObject(req)) {
        snprintf(err, errn, "invalid request: expected one JSON object per line, e.g. {\"cmd\":\"status\"}");
        cJSON_Delete(req);
        return -1;
    }
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    const char *name = cJSON_IsString(cmd) ? cmd->valuestring : "";
    int rv = -1;
    r->cmd = CTL_NCMDS;
    for (int i = 0; i < CTL_NCMDS; i++)
        if (!strcmp(name, CMD_NAMES[i])) r->cmd = (enum ctl_cmd)i;
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(req, "pool");
    if (cJSON_IsString(pool)) r->pool = xstrdup(pool->valuestring);
    r->verbose = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "verbose"));
    r->raw = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "raw"));
    r->wait = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "wait"));
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(req, "by");
    if (cJSON_IsString(by)) {
        /* for the log only: one bounded line */
        r->by = xstrndup(by->valuestring, strnlen(by->valuestring, 200));
        for (char *p = r->by; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    }
    if (r->cmd == CTL_NCMDS)
        snprintf(err, errn, *name ? "unknown command \"%.64s\"" : "missing \"cmd\"", name);
    else if ((r->cmd == CTL_PAUSE || r->cmd == CTL_CONTINUE) &&
             (name_array(cJSON_GetObjectItemCaseSensitive(req, "pools"), &r->pools, &r->npools) < 0 ||
              name_array(cJSON_GetObjectItemCaseSensitive(req, "queues"), &r->queues, &r->nqueues) < 0 ||
              name_array(cJSON_GetObjectItemCaseSensitive(req, "classes"), &r->classes, &r->nclasses) < 0))
        snprintf(err, errn, "pools, queues and classes must be arrays of names");
    else if (r->nclasses && r->nqueues)
        snprintf(err, errn, "classes are paused across the fleet or in pools: name no queue with them");
    else if (r->cmd == CTL_SCALE && parse_scale(req, max_workers, r, err, errn) < 0)
        ;
    else if (r->cmd == CTL_STOP_JOB && parse_uuid(req, r, err, errn) < 0)
        ;
    else if (r->cmd == CTL_BATCH_RETRY && parse_batch(req, r, err, errn) < 0)
        ;
    else if (r->cmd == CTL_APP && parse_app(req, r, err, errn) < 0)
        ;
    else
        rv = 0;
    cJSON_Delete(req);
    if (rv < 0) ctl_request_free(r);
    return rv;
}

void ctl_request_free(ctl_request_t *r)
{
    for (int i = 0; i < r->npools; i++) free(r->pools[i]);
    for (int i = 0; i < r->nqueues; i++) free(r->queues[i]);
    for (int i = 0; i < r->nclasses; i++) free(r->classes[i]);
    free(r->classes);
    free(r->pools);
    free(r->queues);
    free(r->pool);
    free(r->by);
    free(r->uuid);
    mapp_req_free(&r->app);
    memset(r, 0, sizeof *r);
}

const char *ctl_cmd_name(enum ctl_cmd c)
{
    return c < CTL_NCMDS ? CMD_NAMES[c] : "?";
}

/* ------------------------------------------------------------ listener */

static int bind_socket(const qconf_t *conf)
{
    const char *path = conf->control_socket;
    char err[512];
    int fd = safefile_listen_unix(path, conf->control_socket_mode, err, sizeof err);
    if (fd < 0) {
        log_error("control socket: %s", err);
        return -1;
    }
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    if (conf->control_user) {
        struct passwd *pw = getpwnam(conf->control_user);
        if (pw) uid = pw->pw_uid;
    }
    if (conf->control_group) {
        struct group *gr = getgrnam(conf->control_group);
        if (gr) gid = gr->gr_gid;
    }
    /* lchown: never through a link planted in its place */
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && lchown(path, uid, gid) < 0)
        log_warn("control socket %s: chown: %s", path, strerror(errno));
    return fd;
}

int control_listen(master_t *m)
{
    int fd = bind_socket(m->conf);
    if (fd < 0) return -1;
    control_t *ctl = xcalloc(1, sizeof *ctl);
    ctl->fd = fd;
    ctl->epfd = m->epfd;
    ctl->path = xstrdup(m->conf->control_socket); /* what we bound, whatever a reload says later */
    m->ctl = ctl;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

static void client_free(master_t *m, int idx)
{
    control_t *ctl = m->ctl;
    ctl_client_t *c = ctl->clients[idx];
    mapp_forget_client(m, c->serial); /* its requests not sent yet take no place */
    epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->refused) ctl->nrefused--;
    sbuf_free(&c->in);
    sbuf_free(&c->out);
    free(c);
    ctl->clients[idx] = ctl->clients[--ctl->nclients];
}

void control_close(master_t *m, bool unlink_socket)
{
    control_t *ctl = m->ctl;
    if (!ctl) return;
    while (ctl->nclients) client_free(m, ctl->nclients - 1);
    free(ctl->clients);
    close(ctl->fd);
    if (unlink_socket) unlink(ctl->path);
    free(ctl->path);
    free(ctl);
    m->ctl = NULL;
}

/* ------------------------------------------------------------ auth */

/* control_group membership as the kernel recorded it when the peer
 * connected (SO_PEERGROUPS): no /proc lookup by a pid that may be reused. */
static bool peer_in_group(int fd, gid_t primary, gid_t want)
{
    if (primary == want) return true;
    gid_t groups[CTL_MAX_GROUPS];
    socklen_t len = sizeof groups;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) return false;
    for (size_t i = 0; i < len / sizeof *groups; i++)
        if (groups[i] == want) return true;
    return false;
}

static bool allowed(const qconf_t *conf, const ctl_client_t *c)
{
    if (c->uid == 0 || c->uid == geteuid()) return true;
    if (conf->control_user) {
        struct passwd *pw = getpwnam(conf->control_user);
        if (pw && pw->pw_uid == c->uid) return true;
    }
    if (conf->control_group) {
        struct group *gr = getgrnam(conf->control_group);
        if (gr && peer_in_group(c->fd, c->gid, gr->gr_gid)) return true;
    }
    return false;
}

/* ------------------------------------------------------------ replies */

static void client_flush(control_t *ctl, ctl_client_t *c)
{
    while (c->out.len) {
        ssize_t n = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
        if (n > 0) {
            sbuf_consume(&c->out, (size_t)n);
            c->last_active_ms = mono_ms(); /* it reads its replies */
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
    epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, c->fd, &ev);
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
    va_list ap;
    va_start(ap, fmt);
    cJSON *o = reply_errorv(fmt, ap);
    va_end(ap);
    reply_json(c, o);
}

/* ------------------------------------------------------------ commands */

typedef void (*ctl_handler_fn)(master_t *m, ctl_client_t *c, const ctl_request_t *r);

static void reply_verb_error(ctl_client_t *c, const char *err)
{
    reply_error(c, "%s", err);
}

static void cmd_status(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    reply_json(c, status_json(m, (r->verbose ? STATUS_VERBOSE : 0) | (r->raw ? STATUS_RAW : 0)));
}

/* Who asked, for the audit log: the HTTP process's "by" (its user), else
 * the socket peer's uid; a "by" from any other client is not believed. */
static const char *ctl_who(const ctl_client_t *c, const ctl_request_t *r, char *who, size_t n)
{
    if (c->adopted)
        snprintf(who, n, "HTTP by %s", r->by ? r->by : "?");
    else
        snprintf(who, n, "the control socket, uid %d", (int)c->uid);
    return who;
}

/* pause --class, continue --class: across the fleet (or in the named
 * pools, on every host), in Redis. */
static void run_class_pause(master_t *m, ctl_client_t *c, const ctl_request_t *r, bool on)
{
    char who[300], err[256];
    ctl_who(c, r, who, sizeof who);
    if (classpause_set_in(m, r->classes, r->nclasses, r->pools, r->npools, on, who, err, sizeof err) < 0)
        reply_verb_error(c, err);
    else
        reply_json(c, status_json(m, 0));
}

static void run_pause(master_t *m, ctl_client_t *c, const ctl_request_t *r, bool on)
{
    if (r->nclasses) {
        run_class_pause(m, c, r, on);
        return;
    }
    pause_scope_t scope = {.pools = r->pools, .npools = r->npools, .queues = r->queues, .nqueues = r->nqueues};
    char err[256];
    enum pause_source from = c->adopted ? PAUSE_FROM_HTTP : PAUSE_FROM_CONTROL; /* the HTTP process's channel */
    if (master_pause(m, &scope, from, on, err, sizeof err) < 0)
        reply_verb_error(c, err);
    else
        reply_json(c, status_json(m, 0));
}

static void cmd_pause(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    run_pause(m, c, r, true);
}

static void cmd_continue(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    run_pause(m, c, r, false);
}

static void cmd_scale(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    char err[256];
    int target = master_scale(m, r->pool, r->n, err, sizeof err);
    if (target < 0) {
        reply_verb_error(c, err);
        return;
    }
    cJSON *o = reply_ok();
    cJSON_AddStringToObject(o, "pool", r->pool);
    cJSON_AddNumberToObject(o, "target", target);
    pool_t *p = master_pool(m, r->pool);
    cJSON *b = p ? budgeting_pool_json(m, p, true) : NULL;
    if (b) cJSON_AddItemToObject(o, "fleet_budget", b);
    reply_json(c, o);
}

static void cmd_restart(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    char err[256];
    if (master_restart(m, r->pool, err, sizeof err) < 0) {
        reply_verb_error(c, err);
        return;
    }
    cJSON *o = reply_ok();
    cJSON *arr = cJSON_AddArrayToObject(o, "pools");
    for (int i = 0; i < m->pools.n; i++)
        if (!m->pools.v[i]->removed && (!r->pool || !strcmp(r->pool, m->pools.v[i]->conf.name)))
            cJSON_AddItemToArray(arr, cJSON_CreateString(m->pools.v[i]->conf.name));
    reply_json(c, o);
}

static void cmd_reload(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    (void)r;
    if (m->stopping) {
        reply_error(c, "the master is stopping");
        return;
    }
    char *msg = NULL;
    cJSON *o = cJSON_CreateObject();
    int rv = master_reload(m, &msg);
    if (rv == 0) {
        cJSON_AddTrueToObject(o, "ok");
        cJSON_AddStringToObject(o, "message", msg ? msg : "reloaded");
    } else if (rv > 0) { /* in effect, but not all of it works: the HTTP endpoint is off */
        cJSON_AddFalseToObject(o, "ok");
        cJSON_AddStringToObject(o, "error", msg ? msg : "reloaded, but the HTTP endpoint is off");
        cJSON_AddTrueToObject(o, "reloaded");
    } else {
        cJSON_AddFalseToObject(o, "ok");
        cJSON_AddStringToObject(o, "error", msg ? msg : "invalid configuration");
        cJSON_AddTrueToObject(o, "config_rejected");
    }
    reply_json(c, o);
    free(msg);
}

static void cmd_terminate(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    log_info("terminate requested over the control socket (uid %d)", (int)c->uid);
    master_begin_stop(m, false);
    if (!r->wait) {
        reply_json(c, reply_ok());
        return;
    }
    c->waiter = true;
    reply_json(c, status_progress_json(m, "stopping"));
    m->ctl->next_progress_ms = mono_ms() + 1000;
}

static void cmd_stop_job(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    char err[256], pool[64] = "", who[300];
    int pid = master_stop_job(m, r->uuid, ctl_who(c, r, who, sizeof who), pool, sizeof pool, err, sizeof err);
    if (pid < 0) {
        reply_verb_error(c, err);
        return;
    }
    cJSON *o = reply_ok();
    cJSON_AddStringToObject(o, "uuid", r->uuid);
    cJSON_AddStringToObject(o, "pool", pool);
    cJSON_AddNumberToObject(o, "pid", pid);
    reply_json(c, o);
}

/* The job batches the pools' app agents read (mbatches.h); a look keeps
 * them read for a while. */
static void cmd_batches(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    (void)r;
    reply_json(c, mbatches_look(m, mono_ms()));
}

static void cmd_batch_retry(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    char err[256], pool[64] = "";
    if (mbatches_retry(m, r->uuid, mono_ms(), pool, sizeof pool, err, sizeof err) < 0) {
        reply_verb_error(c, err);
        return;
    }
    cJSON *o = reply_ok();
    cJSON_AddStringToObject(o, "batch", r->uuid);
    cJSON_AddStringToObject(o, "pool", pool);
    cJSON_AddTrueToObject(o, "queued");
    reply_json(c, o);
}

static bool owner(uid_t uid);

/* failed-retry and failed-forget, with who asked (the control socket's
 * uid, or the HTTP user) and how many ids: the master's record (the CLI's
 * audit line is the client's own). */
static void app_audit(const ctl_client_t *c, const ctl_request_t *r)
{
    char who[200];
    if (mapp_acts(&r->app))
        log_info("control: app %s of %d failed jobs on pool %s asked over %s", r->app.op_name, r->app.njobs, r->pool,
                 ctl_who(c, r, who, sizeof who));
}

/* Over HTTP (the HTTP process checked the reader or the token): a list
 * answers from the dashboard's snapshot, a retry or forget is queued and
 * the snapshot tells how it went (mappdash.h). */
static void cmd_app_http(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    char err[300];
    if (r->app.op == MAPP_OP_LIST) {
        cJSON *o = mappdash_look(m, r->pool, r->app.json, mono_ms(), err, sizeof err);
        if (o)
            reply_json(c, o);
        else
            reply_verb_error(c, err);
    } else if (!mapp_acts(&r->app)) {
        reply_error(c, "over HTTP, app takes op failed or failed-retry or failed-forget");
    } else if (mappdash_act(m, r->pool, xstrdup(r->app.json), mono_ms(), err, sizeof err) < 0) {
        reply_verb_error(c, err);
    } else {
        app_audit(c, r);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddTrueToObject(o, "ok");
        cJSON_AddTrueToObject(o, "queued");
        cJSON_AddStringToObject(o, "pool", r->pool);
        reply_json(c, o);
    }
}

/* A request on a pool's app failer: answered when its agent has (mapp.h;
 * control_tick sends it). */
static void cmd_app(master_t *m, ctl_client_t *c, const ctl_request_t *r)
{
    char err[300];
    if (c->adopted) {
        cmd_app_http(m, c, r);
        return;
    }
    const char *no = mapp_refusal(&r->app, owner(c->uid), m->conf->http.read_without_token == HTTP_READ_ALL);
    if (no) {
        log_info("control: app on pool %s refused to uid %d: %s", r->pool, (int)c->uid, no);
        reply_error(c, "permission denied: %s", no);
        return;
    }
    app_audit(c, r);
    agent_app_from_t from = {.client = c->serial, .pid = (int32_t)c->pid, .uid = (uint32_t)c->uid, .owner = owner(c->uid),
                             .act = mapp_acts(&r->app) ? r->app.op_name : NULL, .njobs = r->app.njobs};
    if (mapp_ask(m, &from, r->pool, xstrdup(r->app.json), mono_ms(), err, sizeof err) < 0) reply_verb_error(c, err);
}

static const ctl_handler_fn HANDLERS[CTL_NCMDS] = {
    [CTL_STATUS] = cmd_status,   [CTL_PAUSE] = cmd_pause,   [CTL_CONTINUE] = cmd_continue,
    [CTL_SCALE] = cmd_scale,     [CTL_RESTART] = cmd_restart, [CTL_RELOAD] = cmd_reload,
    [CTL_TERMINATE] = cmd_terminate, [CTL_STOP_JOB] = cmd_stop_job,
    [CTL_BATCHES] = cmd_batches, [CTL_BATCH_RETRY] = cmd_batch_retry, [CTL_APP] = cmd_app,
};

static void handle_line(master_t *m, ctl_client_t *c, const char *line, size_t len)
{
    ctl_request_t r;
    char err[256];
    if (ctl_parse_request(line, len, m->conf->max_workers, &r, err, sizeof err) < 0) {
        reply_error(c, "%s", err);
        return;
    }
    if (c->adopted && (r.cmd == CTL_RELOAD || r.cmd == CTL_TERMINATE)) {
        /* the dashboard's actions (token-checked by the HTTP process) are
         * pause, continue, scale and restart; reload and stop stay with the
         * control socket and signals */
        reply_error(c, "%s is not allowed over HTTP", ctl_cmd_name(r.cmd));
        ctl_request_free(&r);
        return;
    }
    if (c->adopted && r.cmd != CTL_STATUS && r.cmd != CTL_BATCHES)
        log_info("control: %s%s%s%s%s over HTTP by %s", ctl_cmd_name(r.cmd), r.pool || r.npools ? " pool " : "",
                 r.pool ? r.pool : r.npools ? r.pools[0] : "", r.nqueues ? " queue " : "", r.nqueues ? r.queues[0] : "",
                 r.by ? r.by : "?");
    else
        log_debug("control: %s from uid %d", ctl_cmd_name(r.cmd), (int)c->uid);
    HANDLERS[r.cmd](m, c, &r);
    ctl_request_free(&r);
}

/* ------------------------------------------------------------ events */

static ctl_client_t *new_client(int fd, const struct ucred *cr)
{
    ctl_client_t *c = xcalloc(1, sizeof *c);
    c->fd = fd;
    c->uid = cr->uid;
    c->gid = cr->gid;
    c->pid = cr->pid;
    c->accepted_ms = c->last_active_ms = mono_ms();
    sbuf_init(&c->in);
    sbuf_init(&c->out);
    return c;
}

/* Root and qpool's own user: they may take every place. */
static bool owner(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

/* Why an allowed peer of uid gets no place (into why), or NULL. Another
 * user (control_user, a control_group member) holds CTL_MAX_PER_USER at
 * most, and all of them together leave CTL_OWNERS_ONLY places to root and
 * qpool's user: one user cannot lock out the others, nor the operators. */
static const char *no_place(const control_t *ctl, uid_t uid, char *why, size_t whyn)
{
    int all = 0, same = 0, others = 0;
    for (int i = 0; i < ctl->nclients; i++) {
        const ctl_client_t *c = ctl->clients[i];
        if (c->refused) continue;
        all++;
        if (c->adopted) continue;
        same += c->uid == uid;
        others += !owner(c->uid);
    }
    if (all >= CTL_MAX_CLIENTS || (!owner(uid) && others >= CTL_MAX_CLIENTS - CTL_OWNERS_ONLY))
        snprintf(why, whyn, "too many control clients");
    else if (!owner(uid) && same >= CTL_MAX_PER_USER)
        snprintf(why, whyn, "too many control clients of uid %d (at most %d at once)", (int)uid, CTL_MAX_PER_USER);
    else
        return NULL;
    return why;
}

/* Told why, then closed at once: no room to keep it. */
static void turn_away(ctl_client_t *c, const char *why)
{
    reply_error(c, "%s", why);
    (void)send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(c->fd);
    sbuf_free(&c->in);
    sbuf_free(&c->out);
    free(c);
}

static void accept_one(master_t *m, int fd)
{
    control_t *ctl = m->ctl;
    struct ucred cr;
    socklen_t l = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0) {
        close(fd);
        return;
    }
    ctl_client_t *c = new_client(fd, &cr);
    char why[128];
    if (!allowed(m->conf, c)) {
        /* One line of refusal. Kept (at most CTL_REFUSED_MS, and never in
         * an allowed client's place) only so that a request already sent
         * is read before the close: closing over unread input resets the
         * connection, and the reply would be lost. */
        log_warn("control: refused uid %d gid %d (pid %d)", (int)cr.uid, (int)cr.gid, (int)cr.pid);
        if (ctl->nrefused >= CTL_MAX_REFUSED) {
            turn_away(c, "permission denied");
            return;
        }
        reply_error(c, "permission denied: uid %d is not allowed on this socket", (int)cr.uid);
        c->refused = true;
        ctl->nrefused++;
    } else if (no_place(ctl, cr.uid, why, sizeof why)) {
        turn_away(c, why);
        return;
    }
    ctl->clients = xrealloc(ctl->clients, sizeof *ctl->clients * (size_t)(ctl->nclients + 1));
    c->serial = ++ctl->next_serial;
    ctl->clients[ctl->nclients++] = c;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev);
    if (c->out.len) client_flush(ctl, c); /* a refusal goes out at once */
}

int control_adopt(master_t *m, int fd)
{
    control_t *ctl = m->ctl;
    if (!ctl) return -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) return -1;
    struct ucred cr = {.pid = 0, .uid = geteuid(), .gid = getegid()};
    ctl_client_t *c = new_client(fd, &cr);
    c->adopted = true;
    ctl->clients = xrealloc(ctl->clients, sizeof *ctl->clients * (size_t)(ctl->nclients + 1));
    c->serial = ++ctl->next_serial;
    ctl->clients[ctl->nclients++] = c;
    return 0;
}

int64_t control_heard(master_t *m, int fd)
{
    control_t *ctl = m->ctl;
    for (int i = 0; ctl && i < ctl->nclients; i++)
        if (ctl->clients[i]->fd == fd && ctl->clients[i]->adopted) return ctl->clients[i]->heard_ms;
    return -1;
}

static void accept_clients(master_t *m)
{
    for (;;) {
        int fd = accept4(m->ctl->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        accept_one(m, fd);
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
        /* a whole request renews its place; bytes of one do not */
        c->last_active_ms = mono_ms();
        c->line_started_ms = c->in.len ? c->last_active_ms : 0;
    }
}

/* Read what the client sent (a few requests' worth at most per event: a
 * fast sender cannot make the master buffer without limit). */
static bool read_client(ctl_client_t *c)
{
    char buf[8192];
    while (c->in.len <= 4 * CTL_MAX_LINE) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n > 0) {
            sbuf_append(&c->in, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return n == 0 || errno != EAGAIN; /* eof or error */
    }
    return false;
}

void control_event(master_t *m, int fd, uint32_t events)
{
    control_t *ctl = m->ctl;
    if (!ctl) return;
    if (fd == ctl->fd) {
        accept_clients(m);
        return;
    }
    int idx = -1;
    for (int i = 0; i < ctl->nclients; i++)
        if (ctl->clients[i]->fd == fd) idx = i;
    if (idx < 0) return;
    ctl_client_t *c = ctl->clients[idx];
    bool eof = false;
    size_t had = c->in.len;
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing) eof = read_client(c);
    if (c->in.len > had) c->heard_ms = mono_ms();
    if (c->in.len && !c->line_started_ms) c->line_started_ms = mono_ms();
    process_lines(m, c);
    if (eof) c->closing = true; /* a waiter that went away: the stop goes on */
    client_flush(ctl, c);
    if (!c->closing && c->out.len < CTL_OUT_PAUSE && c->in.len && memchr(c->in.data, '\n', c->in.len)) {
        /* output drained below the cap: requests held back can go now */
        process_lines(m, c);
        client_flush(ctl, c);
    }
    if (c->closing && !c->out.len) client_free(m, idx);
}

static bool expired(const ctl_client_t *c, int64_t now)
{
    if (c->adopted) return false;
    if (c->refused) return now - c->accepted_ms > CTL_REFUSED_MS;
    if (c->waiter) return false;
    /* a line trickled a byte at a time, or requests sent while their
     * replies go unread, keep no place */
    if (c->line_started_ms && now - c->line_started_ms > CTL_LINE_MS) return true;
    return now - c->last_active_ms > CTL_IDLE_MS;
}

/* The answered requests on the pools' app failers, to their clients (a
 * client gone by now: dropped); on every loop, so that an agent gone or a
 * request past MAPP_WAIT_MS (mapp_tick, earlier in the loop) is told at
 * once, not at the next balance pass (balance_interval may be 60 s, longer
 * than the CLI waits). */
static void send_app_answers(master_t *m, control_t *ctl)
{
    uint64_t serial;
    for (int i = 0; i < m->pools.n; i++) {
        for (char *s; (s = mapp_done(m->pools.v[i], &serial)); free(s)) {
            if (mappdash_client(serial)) {
                mappdash_answered(m->pools.v[i], serial, s);
                continue;
            }
            for (int k = 0; k < ctl->nclients; k++) {
                ctl_client_t *c = ctl->clients[k];
                if (c->serial != serial || c->closing) continue;
                sbuf_puts(&c->out, s);
                sbuf_putc(&c->out, '\n');
                c->last_active_ms = mono_ms();
                client_flush(ctl, c);
            }
        }
    }
}

void control_tick(master_t *m, int64_t now)
{
    control_t *ctl = m->ctl;
    if (!ctl) return;
    send_app_answers(m, ctl);
    for (int i = 0; i < ctl->nclients;) {
        if (expired(ctl->clients[i], now))
            client_free(m, i);
        else
            i++;
    }
    if (!m->stopping || now < ctl->next_progress_ms) return;
    ctl->next_progress_ms = now + 1000;
    for (int i = 0; i < ctl->nclients; i++) {
        ctl_client_t *c = ctl->clients[i];
        /* a waiter that does not read misses progress lines, and the
         * master's memory for it stays bounded */
        if (!c->waiter || c->out.len > CTL_WAITER_OUT_MAX) continue;
        reply_json(c, status_progress_json(m, "waiting"));
        client_flush(ctl, c);
    }
}

void control_notify_waiters(master_t *m)
{
    control_t *ctl = m->ctl;
    if (!ctl) return;
    for (int i = 0; i < ctl->nclients; i++) {
        ctl_client_t *c = ctl->clients[i];
        if (!c->waiter) continue;
        reply_json(c, status_progress_json(m, "done"));
        /* last words: block briefly so the client sees them before we exit */
        set_nonblock(c->fd, false);
        struct timeval tv = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        (void)write_all(c->fd, c->out.data, c->out.len);
        sbuf_reset(&c->out);
    }
}
