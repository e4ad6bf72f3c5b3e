/*
 * http_api.c - what the HTTP process serves (see http_api.h and
 * docs/api.md): /healthz, /metrics and the JSON API. The master's state
 * comes over the control channel (one request line, one reply line); the
 * fleet and the history come from Redis. No handler changes anything.
 */
#include "http/http_api.h"
#include "redis/failed.h"
#include "redis/failed_search.h"
#include "redis/pending_list.h"
#include "http/batch_filter.h"
#include "observe/batchjobs.h"
#include "observe/fleet.h"
#include "observe/history.h"
#include "observe/jobhist.h"
#include "observe/monitored.h"
#include "core/log.h"
#include "observe/prom.h"
#include "core/reply.h"
#include "http/web.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CTL_REPLY_MAX (16 << 20)   /* a status reply far larger than any master's is refused */

/* ------------------------------------------------------------ replies */

void http_reply_json(http_reply_t *r, int code, cJSON *body)
{
    r->code = code;
    r->type = "application/json";
    r->body = cJSON_PrintUnformatted(body);
    r->len = strlen(r->body);
    cJSON_Delete(body);
    /* cJSON writes a string's bytes as they are: what reached here from
     * Redis (a record an older qpool, or anyone, wrote) is repaired, so the
     * API only ever sends valid UTF-8 (ASCII, hence the JSON, is untouched) */
    if (!utf8_valid(r->body, r->len)) {
        char *ok = utf8_repair(r->body, r->len, &r->len);
        cJSON_free(r->body);
        r->body = ok;
    }
}

void http_reply_error(http_reply_t *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cJSON *o = reply_errorv(fmt, ap);
    va_end(ap);
    http_reply_json(r, code, o);
}

/* ------------------------------------------------------------ the master */

static int send_line(int fd, const char *req, int64_t deadline)
{
    size_t len = strlen(req), off = 0;
    while (off < len + 1) {
        const char *p = off < len ? req + off : "\n";
        size_t n = off < len ? len - off : 1;
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) return -1;
        int left = (int)(deadline - mono_ms());
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (left <= 0 || poll(&pf, 1, left) <= 0) return -1;
    }
    return 0;
}

/* The next complete line from the master into *line (NUL-terminated, the
 * caller frees); 0 at the deadline, -1 when the channel is gone. */
static int next_line(http_ctx_t *h, char **line, int64_t deadline)
{
    for (;;) {
        char *nl = h->ctl_in.len ? memchr(h->ctl_in.data, '\n', h->ctl_in.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - h->ctl_in.data);
            *line = xmalloc(n + 1);
            memcpy(*line, h->ctl_in.data, n);
            (*line)[n] = '\0';
            sbuf_consume(&h->ctl_in, n + 1);
            return 1;
        }
        if (h->ctl_in.len > CTL_REPLY_MAX) return -1;
        int left = (int)(deadline - mono_ms());
        struct pollfd pf = {.fd = h->ctl_fd, .events = POLLIN};
        if (left <= 0) return 0;
        int pr = poll(&pf, 1, left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return 0;
        char buf[65536];
        ssize_t n = recv(h->ctl_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return -1;
        if (n > 0) sbuf_append(&h->ctl_in, buf, (size_t)n);
    }
}

void http_ctl_relay(http_ctx_t *h, cJSON *req, int refused, http_reply_t *out)
{
    char *line = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    cJSON *rep = http_ctl_call(h, line, HTTP_CTL_TIMEOUT_MS);
    free(line);
    if (!rep) {
        http_reply_error(out, 503, "the master did not answer");
        return;
    }
    http_reply_json(out, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "ok")) ? 200 : refused, rep);
}

cJSON *http_ctl_call(http_ctx_t *h, const char *request, int timeout_ms)
{
    pthread_mutex_lock(&h->ctl_lock);
    int64_t deadline = mono_ms() + timeout_ms;
    cJSON *reply = NULL;
    if (send_line(h->ctl_fd, request, deadline) < 0) {
        /* a request cut short would garble the channel: start over */
        log_error("the master does not take requests; exiting");
        _exit(1); /* from libmicrohttpd's thread: no atexit work under its feet */
    }
    h->ctl_owed++;
    while (h->ctl_owed > 0) {
        char *line = NULL;
        int rv = next_line(h, &line, deadline);
        if (rv < 0) {
            log_error("the master closed its channel; exiting");
            _exit(0);
        }
        if (rv == 0) break; /* late: the reply will be skipped when it comes */
        h->ctl_owed--;
        if (h->ctl_owed == 0) reply = cJSON_Parse(line);
        free(line);
    }
    pthread_mutex_unlock(&h->ctl_lock);
    return reply;
}

/* ------------------------------------------------------------ handlers */

/* full: the asker may read more than aggregates */
typedef void (*get_fn)(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out);

static void get_metrics(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    (void)full, (void)arg, (void)req;
    cJSON *st = http_ctl_call(h, "{\"cmd\":\"status\",\"raw\":true}", HTTP_CTL_TIMEOUT_MS);
    sbuf_t b;
    sbuf_init(&b);
    if (!st || prom_render(st, &b) < 0) {
        cJSON_Delete(st);
        sbuf_free(&b);
        http_reply_error(out, 503, "the master did not answer");
        return;
    }
    cJSON_Delete(st);
    out->code = 200;
    out->type = "text/plain; version=0.0.4; charset=utf-8";
    out->len = b.len;
    out->body = sbuf_steal(&b);
}

/* Said in a reply that leaves out each worker and its job: the token shows them. */
static void mark_aggregates_only(cJSON *o, bool full)
{
    cJSON_AddBoolToObject(o, "aggregates_only", !full);
}

/* Without the token, a paused class says neither who asked (an address, a
 * uid) nor from where. */
static void paused_classes_anonymous(cJSON *st)
{
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(st, "paused_classes")) {
        cJSON_DeleteItemFromObjectCaseSensitive(e, "by");
        cJSON_DeleteItemFromObjectCaseSensitive(e, "host");
    }
}

static void get_status(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    (void)arg, (void)req;
    cJSON *st = http_ctl_call(h, full ? "{\"cmd\":\"status\",\"verbose\":true}" : "{\"cmd\":\"status\"}",
                              HTTP_CTL_TIMEOUT_MS);
    if (!st) {
        http_reply_error(out, 503, "the master did not answer");
        return;
    }
    mark_aggregates_only(st, full);
    if (!full) paused_classes_anonymous(st);
    http_reply_json(out, 200, st);
}

/* The fleet-wide limits alone (the status's "limits"): what the dashboard's
 * Limits view polls. */
static void get_limits(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    (void)full, (void)arg, (void)req;
    cJSON *st = http_ctl_call(h, "{\"cmd\":\"status\"}", HTTP_CTL_TIMEOUT_MS);
    if (!st) {
        http_reply_error(out, 503, "the master did not answer");
        return;
    }
    cJSON *l = cJSON_DetachItemFromObjectCaseSensitive(st, "limits");
    cJSON_Delete(st);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "limits", cJSON_IsArray(l) ? l : cJSON_CreateArray());
    if (!cJSON_IsArray(l)) cJSON_Delete(l);
    http_reply_json(out, 200, o);
}

/* Each master's workers (and the jobs they run) out of a fleet list. */
static void fleet_aggregates(cJSON *f)
{
    const cJSON *m, *p;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(f, "masters"))
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "pools"))
            cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)p, "children");
}

static void own_host(char *host, size_t n)
{
    snprintf(host, n, "?");
    gethostname(host, n - 1);
    host[n - 1] = '\0';
}

/* The id of the master this HTTP process belongs to (its parent), as its
 * fleet record names it. */
static void own_master_id(char *buf, size_t n)
{
    char host[256];
    own_host(host, sizeof host);
    snprintf(buf, n, "%s:%d", host, (int)getppid());
}

/* This master alone, in fleet_list's shape, from its verbose status (each
 * child and its job): the running list when there is no Redis to hold the
 * fleet records. NULL with out a 503. */
static cJSON *own_fleet(http_ctx_t *h, const char *own, http_reply_t *out)
{
    cJSON *st = http_ctl_call(h, "{\"cmd\":\"status\",\"verbose\":true}", HTTP_CTL_TIMEOUT_MS);
    if (!st) {
        http_reply_error(out, 503, "the master did not answer");
        return NULL;
    }
    char host[256];
    own_host(host, sizeof host);
    double now = (double)wall_ms();
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", own);
    cJSON_AddStringToObject(m, "host", host);
    cJSON_AddNumberToObject(m, "written_ms", now); /* each job's running_ms is as of now */
    cJSON *pools = cJSON_DetachItemFromObjectCaseSensitive(st, "pools");
    cJSON_AddItemToObject(m, "pools", cJSON_IsArray(pools) ? pools : cJSON_CreateArray());
    if (!cJSON_IsArray(pools)) cJSON_Delete(pools);
    cJSON_Delete(st);
    cJSON *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "now_ms", now);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(f, "masters"), m);
    return f;
}

/* The masters' fleet records (fleet_list), or NULL with out a 503. */
static cJSON *fleet_read(http_ctx_t *h, http_reply_t *out)
{
    if (http_no_redis(h, out)) return NULL;
    pthread_mutex_lock(&h->lock);
    cJSON *f = fleet_list(h->rc);
    pthread_mutex_unlock(&h->lock);
    if (!f) http_reply_error(out, 503, "redis %s unavailable", h->rc->name);
    return f;
}

/* The first of two names a list takes for one filter (`class` as the
 * lists say it, `name` as the job history always did). */
static const char *arg_either(http_arg_fn arg, void *req, const char *a, const char *b)
{
    const char *v = arg(req, a);
    return v && *v ? v : arg(req, b);
}

/* Is tag (NULL or "": no filter) one of row r's tags? (pure) */
static bool row_has_tag(const cJSON *r, const char *tag)
{
    if (!tag || !*tag) return true;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(r, "tags"))
        if (cJSON_IsString(t) && !strcmp(t->valuestring, tag)) return true;
    return false;
}

/* The rows of the running list that pass its filters (host, pool, queue,
 * class, uuid, tag: each exact; status=past_timeout), in their order. (pure) */
static cJSON *running_filter(cJSON *rows, http_arg_fn arg, void *req)
{
    const char *want[] = {arg(req, "host"), arg(req, "pool"), arg(req, "queue"),
                          arg_either(arg, req, "class", "name"), arg(req, "uuid")};
    const char *key[] = {"host", "pool", "queue", "name", "uuid"};
    const char *st = arg(req, "status");
    for (int i = cJSON_GetArraySize(rows) - 1; i >= 0; i--) {
        const cJSON *r = cJSON_GetArrayItem(rows, i);
        bool keep = (!st || !*st || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "past_timeout"))) &&
                    row_has_tag(r, arg(req, "tag"));
        for (size_t k = 0; keep && k < sizeof key / sizeof *key; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, key[k]);
            keep = !want[k] || !*want[k] || (cJSON_IsString(v) && !strcmp(v->valuestring, want[k]));
        }
        if (!keep) cJSON_DeleteItemFromArray(rows, i);
    }
    return rows;
}

/* Every job running on every host writing to the connection, oldest first
 * (fleet_running), from the masters' fleet records; with no Redis, this
 * master's own jobs, from its status. */
static void get_running(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    (void)full; /* private: only a full reader gets here */
    const char *st = arg(req, "status");
    if (st && *st && strcmp(st, "past_timeout")) {
        http_reply_error(out, 400, "status: only past_timeout (the jobs running past their timeout)");
        return;
    }
    char own[300];
    own_master_id(own, sizeof own);
    cJSON *f = h->rc ? fleet_read(h, out) : own_fleet(h, own, out);
    if (!f) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "now_ms", cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "now_ms")));
    cJSON_AddStringToObject(o, "master", own);
    cJSON_AddItemToObject(o, "running", running_filter(fleet_running(f, own), arg, req));
    cJSON_Delete(f);
    http_reply_json(out, 200, o);
}

static void get_fleet(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    (void)arg, (void)req;
    cJSON *f = fleet_read(h, out);
    if (!f) return;
    fleet_add_totals(f);
    if (!full) fleet_aggregates(f);
    mark_aggregates_only(f, full);
    http_reply_json(out, 200, f);
}

/* A whole number in [min, max], or def when absent; -1 when malformed. */
static long long num_arg(http_arg_fn arg, void *req, const char *name, long long def, long long min, long long max)
{
    const char *v = arg(req, name);
    if (!v) return def;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < min || n > max) return -1;
    return n;
}

/* A copy of the reply kept for [from, to], if still fresh. */
static bool kept_reply(http_ctx_t *h, int64_t from, int64_t to, http_reply_t *out)
{
    int64_t now = mono_ms();
    for (int i = 0; i < HTTP_HISTORY_CACHE_N; i++) {
        const http_history_kept_t *k = &h->kept[i];
        if (!k->at_ms || now - k->at_ms >= HTTP_HISTORY_CACHE_MS || k->from != from || k->to != to) continue;
        out->code = 200;
        out->type = "application/json";
        out->body = xmalloc(k->len + 1);
        memcpy(out->body, k->body, k->len + 1);
        out->len = k->len;
        return true;
    }
    return false;
}

/* Keep a copy of reply r for [from, to], in place of the oldest. */
static void keep_reply(http_ctx_t *h, int64_t from, int64_t to, const http_reply_t *r)
{
    http_history_kept_t *k = &h->kept[0];
    for (int i = 1; i < HTTP_HISTORY_CACHE_N; i++)
        if (h->kept[i].at_ms < k->at_ms) k = &h->kept[i];
    free(k->body);
    *k = (http_history_kept_t){.from = from, .to = to, .at_ms = mono_ms(), .body = xmalloc(r->len + 1), .len = r->len};
    memcpy(k->body, r->body, r->len);
    k->body[r->len] = '\0';
}

void http_api_forget(http_ctx_t *h)
{
    for (int i = 0; i < HTTP_HISTORY_CACHE_N; i++) free(h->kept[i].body);
    memset(h->kept, 0, sizeof h->kept);
}

static void get_history(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)full;
    int64_t now = wall_ms() / 60000;
    long long span = h->metrics_retention / 60;
    long long minutes = num_arg(arg, req, "minutes", span < 60 ? span : 60, 1, span);
    long long to = num_arg(arg, req, "to", now, 0, now + 1);
    if (minutes < 0 || to < 0) {
        http_reply_error(out, 400, "minutes must be 1..%lld and to a minute (UNIX seconds / 60)", span);
        return;
    }
    if (kept_reply(h, to - minutes + 1, to, out)) return;
    pthread_mutex_lock(&h->lock);
    cJSON *m = history_read(h->rc, to - minutes + 1, to);
    pthread_mutex_unlock(&h->lock);
    if (!m) {
        http_reply_error(out, 503, "redis %s unavailable", h->rc->name);
        return;
    }
    http_reply_json(out, 200, m);
    keep_reply(h, to - minutes + 1, to, out);
}

#define FILTER_STR_MAX 1024 /* bytes of a uuid, tag or q filter */

/* uuid, tag and q: an empty one is no filter, a long one is refused */
static bool filter_strings_ok(job_filter_t *f)
{
    const char **v[] = {&f->uuid, &f->tag, &f->text};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        if (*v[i] && !**v[i]) *v[i] = NULL;
        if (*v[i] && strlen(*v[i]) > FILTER_STR_MAX) return false;
    }
    return true;
}

/* since/until of the job history: UNIX ms as always, or what the failed
 * store's search takes (UNIX seconds would read as ms, so not those: a
 * date "YYYY-MM-DD[ HH:MM[:SS]]" UTC or an age such as 1h), in ms. */
static long long ms_arg(http_arg_fn arg, void *req, const char *name)
{
    long long n = num_arg(arg, req, name, 0, 0, INT64_MAX / 2), s;
    const char *v = arg(req, name);
    if (n >= 0 || !v || !*v || (v[0] >= '0' && v[0] <= '9' && !v[strspn(v, "0123456789")])) return n;
    return ffilter_time(v, wall_s(), &s) < 0 || s < 0 ? -1 : s * 1000;
}

/* The filters of /api/jobs/recent (docs/api.md); false when one is
 * malformed (out has the 400). */
static bool job_filter(http_ctx_t *h, http_arg_fn arg, void *req, job_filter_t *f, http_reply_t *out)
{
    int keep = h->job_history_size > 0 ? h->job_history_size : 1000;
    *f = (job_filter_t){.queue = arg(req, "queue"), .pool = arg(req, "pool"),
                        .name = arg_either(arg, req, "name", "class"),
                        .outcome = arg_either(arg, req, "outcome", "status"), .host = arg(req, "host"),
                        .tag = arg(req, "tag"), .uuid = arg(req, "uuid"), .text = arg(req, "q")};
    /* more than the history holds reads all of it (the dashboard asks 100 of a smaller history) */
    long long limit = num_arg(arg, req, "limit", 100, 1, INT32_MAX);
    if (limit > keep) limit = keep;
    long long since = ms_arg(arg, req, "since");
    long long until = ms_arg(arg, req, "until");
    long long attempt = num_arg(arg, req, "attempt", 0, 1, 1000000000);
    const char *sil = arg(req, "silenced");
    bool sil_ok = !sil || !*sil || !strcmp(sil, "true") || !strcmp(sil, "false");
    if (limit < 0 || since < 0 || until < 0 || attempt < 0 || !filter_strings_ok(f) || !sil_ok) {
        http_reply_error(out, 400, "limit must be 1 or more (at most %d are kept); since and until UNIX times in ms, "
                         "YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age such as 30m, 1h, 2d; "
                         "attempt 1 or more; uuid, tag and q at most %d bytes; silenced true or false", keep, FILTER_STR_MAX);
        return false;
    }
    f->limit = (int)limit, f->since_ms = since, f->until_ms = until, f->attempt = (long)attempt;
    if (sil && *sil) f->silenced = !strcmp(sil, "true") ? 1 : -1;
    return true;
}

static void reply_jobs(http_ctx_t *h, cJSON *jobs, http_reply_t *out)
{
    if (!jobs)
        http_reply_error(out, 503, "redis %s unavailable", h->rc->name);
    else
        http_reply_json(out, 200, jobs);
}

static void get_recent_jobs(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)full; /* private: only a full reader gets here */
    job_filter_t f;
    if (!job_filter(h, arg, req, &f, out)) return;
    pthread_mutex_lock(&h->lock);
    cJSON *jobs = history_jobs(h->rc, &f);
    pthread_mutex_unlock(&h->lock);
    reply_jobs(h, jobs, out);
}

/* ?since= and ?until= as the failed search takes them (ffilter_time: UNIX
 * seconds, a UTC date, an age), into *since and *until (0: not given);
 * false when one is malformed. */
static bool seconds_args(http_arg_fn arg, void *req, long long *since, long long *until)
{
    const char *v[] = {arg(req, "since"), arg(req, "until")};
    long long *dst[] = {since, until};
    for (int i = 0; i < 2; i++) {
        *dst[i] = 0;
        if (v[i] && *v[i] && ffilter_time(v[i], wall_s(), dst[i]) < 0) return false;
    }
    return true;
}

/* The arguments of /api/jobs/pending (docs/api.md); false when one is
 * malformed (out has the 400). */
static bool pending_args(http_arg_fn arg, void *req, plist_t *p, http_reply_t *out)
{
    const char *order = arg(req, "order"), *state = arg_either(arg, req, "state", "status");
    *p = (plist_t){.queue = arg(req, "queue"), .f = {.name = arg(req, "class"), .uuid = arg(req, "uuid"),
                                                      .q = arg(req, "q")},
                  .tag = arg(req, "tag")};
    const char **v[] = {&p->f.name, &p->f.uuid, &p->f.q, &p->tag};
    bool ok = p->queue && *p->queue && strlen(p->queue) <= FILTER_STR_MAX;
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        if (*v[i] && !**v[i]) *v[i] = NULL;
        ok = ok && (!*v[i] || strlen(*v[i]) <= FILTER_STR_MAX);
    }
    long long limit = num_arg(arg, req, "limit", 50, 1, PENDING_LIST_MAX);
    p->offset = num_arg(arg, req, "offset", 0, 0, INT64_MAX / 2);
    p->limit = (long)limit;
    p->newest = !order || !*order || !strcmp(order, "newest");
    ok = ok && limit > 0 && p->offset >= 0 && (p->newest || !strcmp(order, "oldest"));
    ok = seconds_args(arg, req, &p->f.since, &p->f.until) && ok;
    p->state = !state || !*state || !strcmp(state, "all") ? PSTATE_ALL
             : !strcmp(state, "ready")                    ? PSTATE_READY
             : !strcmp(state, "delayed")                  ? PSTATE_DELAYED
                                                          : (ok = false, PSTATE_ALL);
    if (!ok)
        http_reply_error(out, 400, "queue is required; limit 1..%d; offset 0 or more; order newest or oldest; "
                         "state all, ready or delayed; class, uuid, q and tag at most %d bytes; since and until "
                         "unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age such as 30m", PENDING_LIST_MAX,
                         FILTER_STR_MAX);
    return ok;
}

/* What waits in a queue, a bounded page (pending_list). */
static void get_pending(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)full; /* private: only a full reader gets here */
    plist_t p;
    if (!pending_args(arg, req, &p, out)) return;
    char err[300];
    pthread_mutex_lock(&h->lock);
    int rv = pending_list(h->rc, &p, err, sizeof err);
    pthread_mutex_unlock(&h->lock);
    if (rv < 0) {
        pending_list_free(&p);
        http_reply_error(out, 503, "redis %s unavailable: %s", h->rc->name, err);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "queue", p.queue);
    cJSON *counts = cJSON_AddObjectToObject(o, "counts");
    cJSON_AddNumberToObject(counts, "ready", (double)p.ready);
    cJSON_AddNumberToObject(counts, "delayed", (double)p.delayed);
    cJSON_AddNumberToObject(counts, "reserved", (double)p.reserved);
    cJSON_AddStringToObject(o, "order", p.newest ? "newest" : "oldest");
    cJSON_AddNumberToObject(o, "offset", (double)p.offset);
    cJSON_AddItemToObject(o, "jobs", p.jobs);
    p.jobs = NULL;
    cJSON_AddNumberToObject(o, "scanned", (double)p.scanned);
    if (p.next >= 0) cJSON_AddNumberToObject(o, "next_offset", (double)p.next);
    else cJSON_AddNullToObject(o, "next_offset");
    cJSON_AddBoolToObject(o, "truncated", p.truncated);
    http_reply_json(out, 200, o);
}

static void get_monitoring(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)full, (void)arg, (void)req;
    pthread_mutex_lock(&h->lock);
    cJSON *list = monitored_list(h->rc);
    pthread_mutex_unlock(&h->lock);
    reply_jobs(h, list, out);
}

/* A watched tag's kept records: tag=T and the filters of /api/jobs/recent. */
static void get_monitored_jobs(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)full;
    job_filter_t f;
    if (!job_filter(h, arg, req, &f, out)) return;
    const char *tag = f.tag;
    if (!monitored_tag_ok(tag)) {
        http_reply_error(out, 400, "tag must be 1..%d bytes of UTF-8 text", JOBHIST_TAG_MAX);
        return;
    }
    f.tag = NULL; /* every record of its list has it */
    pthread_mutex_lock(&h->lock);
    cJSON *jobs = monitored_jobs(h->rc, tag, &f);
    pthread_mutex_unlock(&h->lock);
    reply_jobs(h, jobs, out);
}

/* The payload to show: a released attempt's copy, a done one's (with
 * job_history_payloads), else the failed store's. */
static void add_payload(cJSON *o, cJSON *attempts, const cJSON *failed)
{
    const cJSON *rec;
    cJSON_ArrayForEach(rec, attempts) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(rec, "payload");
        if (cJSON_IsString(p)) {
            cJSON_AddStringToObject(o, "payload", p->valuestring);
            cJSON_AddStringToObject(o, "payload_source", "job_history");
            return;
        }
    }
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(failed, "payload");
    if (cJSON_IsString(fp)) {
        cJSON_AddStringToObject(o, "payload", fp->valuestring);
        cJSON_AddStringToObject(o, "payload_source", "failed_store");
        return;
    }
    cJSON_AddNullToObject(o, "payload");
    cJSON_AddNullToObject(o, "payload_source");
}

static void get_one_job(http_ctx_t *h, const char *uuid, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    job_filter_t f = {.uuid = uuid};
    pthread_mutex_lock(&h->lock);
    cJSON *jobs = history_jobs(h->rc, &f);
    frec_t fr;
    cJSON *failed = jobs && failed_get(h->rc, uuid, &fr) == 0 ? failed_json(&fr, true) : NULL;
    if (failed) frec_free(&fr);
    pthread_mutex_unlock(&h->lock);
    if (!jobs) {
        http_reply_error(out, 503, "redis %s unavailable", h->rc->name);
        return;
    }
    cJSON *attempts = cJSON_DetachItemFromObjectCaseSensitive(jobs, "jobs");
    cJSON_Delete(jobs);
    if (!cJSON_GetArraySize(attempts) && !failed) {
        cJSON_Delete(attempts);
        http_reply_error(out, 404, "no job %s in the job history or the failed store", uuid);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "uuid", uuid);
    add_payload(o, attempts, failed);
    cJSON_AddItemToObject(o, "attempts", attempts);
    if (failed) {
        cJSON_DeleteItemFromObjectCaseSensitive(failed, "payload"); /* said once, above */
        cJSON_AddItemToObject(o, "failed", failed);
    } else
        cJSON_AddNullToObject(o, "failed");
    http_reply_json(out, 200, o);
}

/* The filter of a search's query string (class, queue, uuid, q, since,
 * until); false (and why) when a time is malformed. */
static bool failed_filter(http_arg_fn arg, void *req, ffilter_t *f, http_reply_t *out)
{
    *f = (ffilter_t){.queue = arg(req, "queue"), .name = arg(req, "class"), .uuid = arg(req, "uuid"),
                     .q = arg(req, "q"), .tag = arg(req, "tag"), .pool = arg(req, "pool"), .host = arg(req, "host")};
    const char *names[] = {"since", "until"};
    long long *dst[] = {&f->since, &f->until};
    for (int i = 0; i < 2; i++) {
        const char *v = arg(req, names[i]);
        if (v && *v && ffilter_time(v, wall_s(), dst[i]) < 0) {
            http_reply_error(out, 400, "%s: expected unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age "
                                       "such as 30m, 1h, 2d", names[i]);
            return false;
        }
    }
    return true;
}

/* ?class=, ?q=, ?since=, ?until=, ?uuid= or ?cursor=: a search, a bounded
 * step at a time (failed_walk). */
static void search_failed(http_ctx_t *h, http_arg_fn arg, void *req, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    fwalk_t w = {.act = FWALK_LIST};
    long long limit = num_arg(arg, req, "limit", 100, 1, 1000);
    if (limit < 0) {
        http_reply_error(out, 400, "limit must be 1..1000");
        return;
    }
    if (!failed_filter(arg, req, &w.f, out)) return;
    if (fcursor_parse(arg(req, "cursor"), &w.cur) < 0) {
        http_reply_error(out, 400, "malformed cursor: pass the one an answer gave");
        return;
    }
    w.limit = (long)limit;
    char err[300];
    pthread_mutex_lock(&h->lock);
    int rv = failed_walk(h->rc, &w, err, sizeof err);
    pthread_mutex_unlock(&h->lock);
    if (rv < 0) {
        fwalk_free(&w);
        http_reply_error(out, 503, "redis %s unavailable: %s", h->rc->name, err);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "failed", w.list);
    w.list = NULL;
    cJSON_AddNumberToObject(o, "scanned", (double)w.scanned);
    char *cur = fcursor_text(&w.cur);
    if (cur) cJSON_AddStringToObject(o, "cursor", cur);
    else cJSON_AddNullToObject(o, "cursor");
    cJSON_AddBoolToObject(o, "truncated", cur != NULL);
    free(cur);
    fwalk_free(&w);
    http_reply_json(out, 200, o);
}

static bool is_search(http_arg_fn arg, void *req)
{
    const char *keys[] = {"class", "q", "since", "until", "uuid", "cursor", "tag", "pool", "host"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (arg(req, keys[i])) return true;
    return false;
}

#define APP_FAILED_PAGE 50          /* the agent's page, at most (php/src/AgentFailed.php) */
#define APP_FAILED_OFFSET_MAX 10000 /* as far as the agent counts an unfiltered failer */
#define APP_FAILED_FIELD_MAX 1000   /* a filter's bytes (the master's MAPP_FIELD_MAX) */
#define APP_FAILED_TIME_MAX 1000000000000LL /* a time's seconds, at most (as the master takes them: mapp.c) */

/* ?since= and ?until= of a list of the app's failer, as seconds_args
 * takes them but for an age ("1h"): from the minute's start (until: the
 * next minute's), so that the list's query, the key of the master's view
 * of it (mappdash.h), stays the same a minute long. */
static bool app_seconds_args(http_arg_fn arg, void *req, long long *since, long long *until)
{
    long long now = wall_s(), minute = now - now % 60;
    const char *v[] = {arg(req, "since"), arg(req, "until")};
    long long *dst[] = {since, until}, from[] = {minute, minute + 60};
    for (int i = 0; i < 2; i++) {
        *dst[i] = 0;
        if (v[i] && *v[i] && ffilter_time(v[i], from[i], dst[i]) < 0) return false;
    }
    if (*since < 0) *since = 0; /* an age from before 1970: all of it */
    return true;
}

/* The failed op's page and filters from ?offset= &limit= &q= (its "text")
 * &class= &queue= &uuid= &tag= &since= &until=, into r; false when one is
 * malformed (out has the 400). */
static bool app_failed_args(http_arg_fn arg, void *req, cJSON *r, http_reply_t *out)
{
    long long offset = num_arg(arg, req, "offset", 0, 0, APP_FAILED_OFFSET_MAX);
    long long limit = num_arg(arg, req, "limit", APP_FAILED_PAGE, 1, APP_FAILED_PAGE);
    long long since, until;
    if (offset < 0 || limit < 0 || !app_seconds_args(arg, req, &since, &until)) {
        http_reply_error(out, 400, "with app: offset is 0..%d, limit 1..%d, since and until times",
                         APP_FAILED_OFFSET_MAX, APP_FAILED_PAGE);
        return false;
    }
    cJSON_AddNumberToObject(r, "limit", (double)limit);
    if (offset) cJSON_AddNumberToObject(r, "offset", (double)offset);
    if (since > APP_FAILED_TIME_MAX || until < 0 || until > APP_FAILED_TIME_MAX) {
        http_reply_error(out, 400, "with app: %s is a time between 1970 and UNIX second %.0f",
                         since > APP_FAILED_TIME_MAX ? "since" : "until", (double)APP_FAILED_TIME_MAX);
        return false;
    }
    if (since) cJSON_AddNumberToObject(r, "since", (double)since);
    if (until) cJSON_AddNumberToObject(r, "until", (double)until);
    const char *keys[][2] = {{"q", "text"}, {"class", "class"}, {"queue", "queue"}, {"uuid", "uuid"}, {"tag", "tag"}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = arg(req, keys[i][0]);
        if (!v || !*v) continue;
        if (strlen(v) > APP_FAILED_FIELD_MAX || !utf8_valid(v, strlen(v))) {
            http_reply_error(out, 400, "%s: at most %d bytes of UTF-8", keys[i][0], APP_FAILED_FIELD_MAX);
            return false;
        }
        cJSON_AddStringToObject(r, keys[i][1], v);
    }
    return true;
}

/* ?app=POOL: a page of the app's failer of an app_driver pool (offset,
 * filters: app_failed_args), from the master's snapshot (mappdash.h):
 * "state" loading until its agent answered that query; the page asks again. */
static void get_app_failed(http_ctx_t *h, const char *pool, http_arg_fn arg, void *req, http_reply_t *out)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", "failed");
    if (!app_failed_args(arg, req, r, out)) {
        cJSON_Delete(r);
        return;
    }
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "cmd", "app");
    cJSON_AddStringToObject(q, "pool", pool);
    cJSON_AddItemToObject(q, "request", r);
    http_ctl_relay(h, q, 404, out);
}

static void get_failed(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    const char *app = arg(req, "app");
    if (app && *app) {
        get_app_failed(h, app, arg, req, out);
        return;
    }
    if (http_no_redis(h, out)) return;
    (void)full; /* private: only a full reader gets here */
    if (is_search(arg, req)) {
        search_failed(h, arg, req, out);
        return;
    }
    long long limit = num_arg(arg, req, "limit", 100, 1, 10000);
    if (limit < 0) {
        http_reply_error(out, 400, "limit must be 1..10000");
        return;
    }
    pthread_mutex_lock(&h->lock);
    cJSON *list = failed_list(h->rc, arg(req, "queue"), (long)limit, false);
    pthread_mutex_unlock(&h->lock);
    if (!list) {
        http_reply_error(out, 503, "redis %s unavailable", h->rc->name);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "failed", list);
    http_reply_json(out, 200, o);
}

static void get_one_failed(http_ctx_t *h, const char *uuid, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    frec_t f;
    pthread_mutex_lock(&h->lock);
    int rv = failed_get(h->rc, uuid, &f);
    bool reached = h->rc->ctx != NULL;
    pthread_mutex_unlock(&h->lock);
    if (rv < 0) {
        if (reached)
            http_reply_error(out, 404, "no failed job %s", uuid);
        else
            http_reply_error(out, 503, "redis %s unavailable", h->rc->name);
        return;
    }
    http_reply_json(out, 200, failed_json(&f, true));
    frec_free(&f);
}

/* ------------------------------------------------------------ job batches */

/* The master's batches (mbatches.h), at once: a pool whose agent is still
 * reading says "loading", and the client asks again (the API's one worker
 * thread never sleeps on it). NULL: the master did not answer. */
static cJSON *batches_call(http_ctx_t *h)
{
    return http_ctl_call(h, "{\"cmd\":\"batches\"}", HTTP_CTL_TIMEOUT_MS);
}

/* Is some pool's list still being read? */
static bool batches_loading(const cJSON *rep)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(rep, "pools")) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "state");
        if (cJSON_IsString(st) && !strcmp(st->valuestring, "loading")) return true;
    }
    return false;
}

/* ?q=, ?status=, ?since=, ?until= (batch_filter.h); false when one is
 * malformed (out has the 400). */
static bool batch_args(http_arg_fn arg, void *req, bfilter_t *f, http_reply_t *out)
{
    const char *q = arg(req, "q");
    int st = bfilter_status(arg_either(arg, req, "status", "state"));
    *f = (bfilter_t){.q = q && *q ? q : NULL, .status = st < 0 ? BSTATUS_ANY : (bstatus_t)st};
    bool ok = st >= 0 && (!q || strlen(q) <= FILTER_STR_MAX) && seconds_args(arg, req, &f->since, &f->until);
    if (!ok)
        http_reply_error(out, 400, "status pending, finished, failed or cancelled; q at most %d bytes; since and "
                         "until unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age such as 30m", FILTER_STR_MAX);
    return ok;
}

static void get_batches(http_ctx_t *h, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    (void)full;
    bfilter_t f;
    if (!batch_args(arg, req, &f, out)) return;
    cJSON *rep = batches_call(h);
    if (!rep) {
        http_reply_error(out, 503, "the master did not answer");
        return;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(rep, "ok");
    cJSON *list = cJSON_GetObjectItemCaseSensitive(rep, "batches");
    if (cJSON_IsArray(list) && (f.q || f.status || f.since || f.until)) {
        int of = cJSON_GetArraySize(list);
        bfilter_apply(&f, list);
        cJSON_AddNumberToObject(rep, "unfiltered", of);
    }
    http_reply_json(out, 200, rep);
}

/* The batch's jobs as the job history saw them (batchjobs.h) into o:
 * "jobs" and "jobs_kept", or "jobs": null and "jobs_error" without Redis. */
static void add_batch_jobs(http_ctx_t *h, const char *id, cJSON *o)
{
    cJSON *got = NULL;
    if (h->rc) {
        pthread_mutex_lock(&h->lock);
        got = batchjobs_read(h->rc, id, BATCHJOBS_KEEP);
        pthread_mutex_unlock(&h->lock);
    }
    if (!got) {
        cJSON_AddNullToObject(o, "jobs");
        if (h->rc)
            cJSON_AddStringToObject(o, "jobs_error", jobhist_batch_ok(id) ? "redis unavailable" : "not a batch id");
        else
            cJSON_AddStringToObject(o, "jobs_error", HTTP_NO_REDIS);
        return;
    }
    cJSON_AddItemToObject(o, "jobs", cJSON_DetachItemFromObjectCaseSensitive(got, "jobs"));
    cJSON_AddItemToObject(o, "jobs_kept", cJSON_DetachItemFromObjectCaseSensitive(got, "kept"));
    cJSON_Delete(got);
}

/* One batch of the list, with the pools' states and its jobs. */
static void get_one_batch(http_ctx_t *h, const char *id, http_reply_t *out)
{
    cJSON *rep = batches_call(h);
    if (!rep) {
        http_reply_error(out, 503, "the master did not answer");
        return;
    }
    cJSON *list = cJSON_GetObjectItemCaseSensitive(rep, "batches"), *b, *found = NULL;
    cJSON_ArrayForEach(b, list) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, "id");
        if (!found && cJSON_IsString(v) && !strcmp(v->valuestring, id)) found = b;
    }
    if (!found) {
        bool loading = batches_loading(rep);
        cJSON_Delete(rep);
        http_reply_error(out, 404, loading ? "no batch %s in the lists read so far (an app agent is still reading "
                                             "them: ask again)" : "no batch %s among the newest batches", id);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "batch", cJSON_DetachItemViaPointer(list, found));
    cJSON_AddItemToObject(o, "pools", cJSON_DetachItemFromObjectCaseSensitive(rep, "pools"));
    cJSON_Delete(rep);
    add_batch_jobs(h, id, o);
    http_reply_json(out, 200, o);
}

/* A uuid (or id) in a path: what a producer may choose, but no slash,
 * bounded. */
static bool uuid_ok(const char *s)
{
    size_t n = strlen(s);
    return n && n < 128 && !strchr(s, '/');
}

typedef void (*one_fn)(http_ctx_t *h, const char *uuid, http_reply_t *out);

static const struct route {
    const char *path;
    http_need_t need;          /* what reading it takes */
    get_fn get;                /* exact path */
    one_fn one;                /* path is a prefix; the rest is a uuid */
    bool redis;                /* reads Redis: 503 without one (h->rc NULL) */
} ROUTES[] = {
    {"/metrics", HTTP_NEED_AGGREGATE, get_metrics, NULL, false},
    {"/api/status", HTTP_NEED_AGGREGATE, get_status, NULL, false},   /* each worker's job: full readers only */
    {"/api/fleet", HTTP_NEED_AGGREGATE, get_fleet, NULL, true},     /* likewise */
    {"/api/limits", HTTP_NEED_AGGREGATE, get_limits, NULL, false},
    {"/api/metrics", HTTP_NEED_AGGREGATE, get_history, NULL, true},
    {"/api/jobs/recent", HTTP_NEED_PRIVATE, get_recent_jobs, NULL, true},
    {"/api/jobs/running", HTTP_NEED_PRIVATE, get_running, NULL, false}, /* no Redis: this master's own */
    {"/api/jobs/pending", HTTP_NEED_PRIVATE, get_pending, NULL, true},
    {"/api/jobs/", HTTP_NEED_PRIVATE, NULL, get_one_job, true},
    {"/api/monitoring", HTTP_NEED_PRIVATE, get_monitoring, NULL, true},
    {"/api/monitoring/jobs", HTTP_NEED_PRIVATE, get_monitored_jobs, NULL, true},
    {"/api/failed", HTTP_NEED_PRIVATE, get_failed, NULL, false}, /* get_failed: Redis unless ?app= */
    {"/api/failed/", HTTP_NEED_PRIVATE, NULL, get_one_failed, true},
    {"/api/batches", HTTP_NEED_PRIVATE, get_batches, NULL, false},
    {"/api/batches/", HTTP_NEED_PRIVATE, NULL, get_one_batch, false},
};

static const struct route *find(const char *path)
{
    for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++) {
        const struct route *r = &ROUTES[i];
        if (r->get ? !strcmp(r->path, path)
                   : !strncmp(r->path, path, strlen(r->path)) && uuid_ok(path + strlen(r->path)))
            return r;
    }
    return NULL;
}

static const web_asset_t *static_asset(const char *path)
{
    if (!strcmp(path, "/")) return web_asset("index.html");
    if (strncmp(path, "/assets/", 8) || strchr(path + 8, '/')) return NULL;
    return web_asset(path + 8);
}

bool http_static(const char *path, http_reply_t *out)
{
    const web_asset_t *a = static_asset(path);
    if (!a) return false;
    out->code = 200;
    out->type = web_content_type(a->name);
    out->body = (char *)a->data;
    out->len = a->len;
    out->persistent = true;
    return true;
}

bool http_api_exists(const char *path)
{
    return find(path) != NULL;
}

bool http_no_redis(http_ctx_t *h, http_reply_t *out)
{
    if (h->rc) return false;
    http_reply_error(out, 503, HTTP_NO_REDIS);
    return true;
}

http_need_t http_api_need(const char *path)
{
    if (static_asset(path) || !strcmp(path, "/healthz")) return HTTP_NEED_OPEN;
    const struct route *r = find(path);
    return r ? r->need : HTTP_NEED_AGGREGATE; /* a 404 says nothing of anyone's jobs */
}

bool http_api_get(http_ctx_t *h, const char *path, bool full, http_arg_fn arg, void *req, http_reply_t *out)
{
    const struct route *r = find(path);
    if (!r) return false;
    if (r->redis && http_no_redis(h, out)) return true;
    if (r->get)
        r->get(h, full, arg, req, out);
    else
        r->one(h, path + strlen(r->path), out);
    return true;
}
