/*
 * http_actions.c - what the dashboard may change (see docs/api.md,
 * "Actions"): pause, continue, scale and restart go to the master as
 * control requests (the same verbs as `qpool pause`...), retry and forget
 * act on the failed store in Redis. The caller (http_server.c) has
 * already checked the token; every action is logged with who asked.
 */
#include "http/http_api.h"
#include "redis/failed.h"
#include "observe/jobhist.h"
#include "observe/monitored.h"
#include "redis/failed_search.h"
#include "redis/pending.h"
#include "core/util.h"
#include "core/log.h"
#include "core/reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct action;
typedef void (*action_fn)(http_ctx_t *h, const struct action *a, const char *name, const cJSON *body,
                          const char *who, http_reply_t *out);

struct action {
    const char *prefix;        /* then a name (no '/'), then "/" verb; or the whole path when verb is NULL */
    const char *verb;
    action_fn fn;
    const char *cmd, *scope;   /* scoped_action: the control command and what it names */
    bool redis;                /* acts on Redis: 503 without one (http_ctx_t.rc NULL) */
};

/* ------------------------------------------------------------ the master's verbs */

/* One control request, its reply passed on (400 when the master says no). */
static void ctl_action(http_ctx_t *h, cJSON *req, const char *who, http_reply_t *out)
{
    cJSON_AddStringToObject(req, "by", who);
    http_ctl_relay(h, req, 400, out);
}

static cJSON *scoped(const char *cmd, const char *key, const char *name)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", cmd);
    cJSON *a = cJSON_AddArrayToObject(req, key);
    cJSON_AddItemToArray(a, cJSON_CreateString(name));
    return req;
}

/* pause / continue of one pool or queue: {"cmd":a->cmd, a->scope:[name]} */
static void scoped_action(http_ctx_t *h, const struct action *a, const char *name, const cJSON *body, const char *who,
                          http_reply_t *out)
{
    (void)body;
    ctl_action(h, scoped(a->cmd, a->scope, name), who, out);
}

/* pause / continue of one job class across the fleet (the master writes
 * it into Redis): {"cmd":a->cmd, "classes":[class]}. libmicrohttpd has
 * decoded the path's %XX already (a class's backslashes come as %5C), so
 * the name is not decoded again: it was, and App%255CJobs%255CX paused
 * App\Jobs\X. A % left in it is refused: no PHP class has one, and what
 * a bad escape (%zz) stood for cannot be told. */
static void class_action(http_ctx_t *h, const struct action *a, const char *name, const cJSON *body, const char *who,
                         http_reply_t *out)
{
    if (strchr(name, '%')) {
        http_reply_error(out, 400, "a class name in the path is percent-encoded once (App%%5CJobs%%5CSyncCrm), "
                                   "and a class has no %%");
        return;
    }
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(body, "pool"); /* {"pool": P}: in that pool only */
    if (pool && !cJSON_IsNull(pool) && !(cJSON_IsString(pool) && *pool->valuestring)) {
        http_reply_error(out, 400, "pool: a pool's name (or none: across the fleet)");
        return;
    }
    cJSON *req = scoped(a->cmd, "classes", name);
    if (cJSON_IsString(pool)) cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "pools"), cJSON_CreateString(pool->valuestring));
    ctl_action(h, req, who, out);
}

static void pool_scale(http_ctx_t *h, const struct action *a, const char *pool, const cJSON *body, const char *who,
                       http_reply_t *out)
{
    (void)a;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(body, "n");
    if (!cJSON_IsNumber(n) && !(cJSON_IsString(n) && !strcmp(n->valuestring, "auto"))) {
        http_reply_error(out, 400, "scale takes {\"n\": a number of workers or \"auto\"}");
        return;
    }
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", "scale");
    cJSON_AddStringToObject(req, "pool", pool);
    cJSON_AddItemToObject(req, "n", cJSON_Duplicate(n, false)); /* the master checks its range */
    ctl_action(h, req, who, out);
}

static void pool_restart(http_ctx_t *h, const struct action *a, const char *pool, const cJSON *body, const char *who,
                         http_reply_t *out)
{
    (void)a, (void)body;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", "restart");
    cJSON_AddStringToObject(req, "pool", pool);
    ctl_action(h, req, who, out);
}

/* An operator's "stop this job": the master's worker running it kills its
 * handler as at a timeout (master_stop_job); only this host's master. */
static void job_stop(http_ctx_t *h, const struct action *a, const char *uuid, const cJSON *body, const char *who,
                     http_reply_t *out)
{
    (void)a, (void)body;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", "stop-job");
    cJSON_AddStringToObject(req, "uuid", uuid);
    ctl_action(h, req, who, out);
}

/* queue:retry-batch through the app agent of the pool that lists it
 * (mbatches.h): queued, the list says how it went. */
static void batch_retry(http_ctx_t *h, const struct action *a, const char *id, const cJSON *body, const char *who,
                        http_reply_t *out)
{
    (void)a, (void)body;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", "batch-retry");
    cJSON_AddStringToObject(req, "batch", id);
    ctl_action(h, req, who, out);
}

/* ------------------------------------------------------------ the app's failer */

/* queue:retry or queue:forget of {"pool": P, "ids": [...]} through the
 * pool's app agent (mappdash.h): queued; GET /api/failed?app=P says how it
 * went (its last_action). */
static void app_failed_act(http_ctx_t *h, const struct action *a, const char *unused, const cJSON *body,
                           const char *who, http_reply_t *out)
{
    (void)unused;
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(body, "pool");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(body, "ids");
    if (!cJSON_IsString(pool) || !cJSON_IsArray(ids)) {
        http_reply_error(out, 400, "takes {\"pool\": an app_driver pool, \"ids\": [the app's failed job ids]}");
        return;
    }
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", "app");
    cJSON_AddStringToObject(req, "pool", pool->valuestring);
    cJSON *r = cJSON_AddObjectToObject(req, "request");
    cJSON_AddStringToObject(r, "op", a->cmd);
    cJSON_AddItemToObject(r, "jobs", cJSON_Duplicate(ids, true));
    ctl_action(h, req, who, out);
}

/* ------------------------------------------------------------ the failed store */

static void failed_one(http_ctx_t *h, const char *uuid, bool retry, const char *who, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    char queue[256] = "", err[300] = "";
    bool kept = false;
    pthread_mutex_lock(&h->lock);
    int rv = retry ? failed_retry(h->rc, uuid, queue, sizeof queue, &kept, err, sizeof err) : failed_forget(h->rc, uuid);
    pthread_mutex_unlock(&h->lock);
    if (rv < 0) {
        http_reply_error(out, 503, "redis %s: %s", h->rc->name, retry ? err : h->rc->last_error);
        return;
    }
    if (rv == 0) {
        http_reply_error(out, 404, "no failed job %s", uuid);
        return;
    }
    log_info("%s failed job %s by %s", retry ? "retried" : "forgot", uuid, who);
    cJSON *o = reply_ok();
    if (retry) {
        cJSON_AddStringToObject(o, "queue", queue);
        cJSON_AddBoolToObject(o, "retry_until_kept", kept);
    }
    http_reply_json(out, 200, o);
}

static void failed_retry_one(http_ctx_t *h, const struct action *a, const char *uuid, const cJSON *body,
                             const char *who, http_reply_t *out)
{
    (void)a, (void)body;
    failed_one(h, uuid, true, who, out);
}

static void failed_forget_one(http_ctx_t *h, const struct action *a, const char *uuid, const cJSON *body,
                              const char *who, http_reply_t *out)
{
    (void)a, (void)body;
    failed_one(h, uuid, false, who, out);
}

/* The cursor a previous page answered, into pg; false when malformed. */
static bool read_cursor(const cJSON *body, failed_page_t *pg)
{
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(body, "cursor");
    if (!cur || cJSON_IsNull(cur)) return true;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(cur, "queue"), *k = cJSON_GetObjectItemCaseSensitive(cur, "skip");
    if (!cJSON_IsObject(cur) || !cJSON_IsString(q) || !cJSON_IsNumber(k) || k->valuedouble < 0 || k->valuedouble > 1e9)
        return false;
    pg->at_queue = xstrdup(q->valuestring);
    pg->skip = (long)k->valuedouble;
    return true;
}

/* ------------------------------------------------------------ by filter */

static const char *body_str(const cJSON *body, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
    return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

/* A time of a body: unix seconds, or text as ffilter_time reads it. */
static bool body_time(const cJSON *body, const char *key, long long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e15) return *out = (long long)v->valuedouble, true;
    return cJSON_IsString(v) && ffilter_time(v->valuestring, wall_s(), out) == 0;
}

/* Does the body name a filter (the bulk actions by filter), not only the
 * queue or class of the first bulk retry? */
static bool by_filter(const cJSON *body)
{
    const char *keys[] = {"class", "q", "since", "until", "uuid", "dry_run", "all", "tag", "pool", "host"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (cJSON_GetObjectItemCaseSensitive(body, keys[i])) return true;
    return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(body, "cursor"));
}

/* The walk a body asks for; false (and the 400) when it is malformed or
 * names no filter (a bulk action on the whole store takes "all": true). */
static bool body_walk(const cJSON *body, fwalk_t *w, http_reply_t *out)
{
    w->f = (ffilter_t){.queue = body_str(body, "queue"), .name = body_str(body, "class"),
                       .uuid = body_str(body, "uuid"), .q = body_str(body, "q"), .tag = body_str(body, "tag"),
                       .pool = body_str(body, "pool"), .host = body_str(body, "host")};
    if (!body_time(body, "since", &w->f.since) || !body_time(body, "until", &w->f.until)) {
        http_reply_error(out, 400, "since, until: unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age such as 1h");
        return false;
    }
    const ffilter_t *f = &w->f;
    bool any = f->queue || f->name || f->uuid || f->q || f->since || f->until || f->tag || f->pool || f->host;
    if (!any && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "all"))) {
        http_reply_error(out, 400, "name a filter (class, queue, pool, host, since, until, uuid, q, tag), or \"all\": true");
        return false;
    }
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(body, "cursor");
    if (cur && !cJSON_IsNull(cur) && (!cJSON_IsString(cur) || fcursor_parse(cur->valuestring, &w->cur) < 0)) {
        http_reply_error(out, 400, "malformed cursor: pass the one an answer gave");
        return false;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "dry_run"))) w->act = FWALK_COUNT;
    return true;
}

/* The filter, for the log: what an operator would type. */
static void filter_text(const ffilter_t *f, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s", f->name ? " class " : "", f->name ? f->name : "",
             f->queue ? " queue " : "", f->queue ? f->queue : "", f->uuid ? " uuid " : "", f->uuid ? f->uuid : "",
             f->q ? " text \"" : "", f->q ? f->q : "", f->q ? "\"" : "", f->tag ? " tag " : "", f->tag ? f->tag : "",
             f->pool ? " pool " : "", f->pool ? f->pool : "", f->host ? " host " : "", f->host ? f->host : "");
}

static void walk_reply(const fwalk_t *w, http_reply_t *out)
{
    cJSON *o = reply_ok();
    cJSON_AddBoolToObject(o, "dry_run", w->act == FWALK_COUNT);
    cJSON_AddNumberToObject(o, "matched", (double)w->matched);
    cJSON_AddNumberToObject(o, w->act == FWALK_RETRY ? "retried" : "forgotten", (double)w->acted);
    if (w->act == FWALK_RETRY) cJSON_AddNumberToObject(o, "retry_until_kept", w->kept);
    cJSON_AddNumberToObject(o, "scanned", (double)w->scanned);
    char *cur = fcursor_text(&w->cur);
    if (cur) cJSON_AddStringToObject(o, "cursor", cur);
    else cJSON_AddNullToObject(o, "cursor");
    free(cur);
    http_reply_json(out, 200, o);
}

/* Retry or forget the failed jobs a filter matches (or count them: a dry
 * run), a bounded step per request (failed_walk). */
static void failed_bulk_filter(http_ctx_t *h, const cJSON *body, fwalk_act_t act, const char *who,
                               http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    fwalk_t w = {.act = act};
    if (!body_walk(body, &w, out)) {
        fwalk_free(&w);
        return;
    }
    char err[300], ftext[400];
    pthread_mutex_lock(&h->lock);
    int rv = failed_walk(h->rc, &w, err, sizeof err);
    pthread_mutex_unlock(&h->lock);
    filter_text(&w.f, ftext, sizeof ftext);
    if (w.acted)
        log_info("%s %ld failed jobs (filter:%s%s) by %s", act == FWALK_RETRY ? "retried" : "forgot", w.acted,
                 ftext, w.f.since || w.f.until ? " and a time range" : "", who);
    if (rv < 0)
        http_reply_error(out, 503, "redis %s unavailable: %s (%ld acted on before)", h->rc->name, err, w.acted);
    else
        walk_reply(&w, out);
    fwalk_free(&w);
}

/* A body's "since" and "until" (strings or numbers, as ffilter_time takes
 * them) into *since and *until (0: not given); false when one is
 * malformed. */
static bool body_seconds(const cJSON *body, long long *since, long long *until)
{
    const char *k[] = {"since", "until"};
    long long *dst[] = {since, until};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, k[i]);
        *dst[i] = 0;
        if (cJSON_IsNumber(v) && v->valuedouble > 1e15) return false; /* no cast past long long's range */
        if (cJSON_IsNumber(v) && v->valuedouble > 0) *dst[i] = (long long)v->valuedouble;
        else if (cJSON_IsString(v) && *v->valuestring && ffilter_time(v->valuestring, wall_s(), dst[i]) < 0)
            return false;
        else if (v && !cJSON_IsNull(v) && !cJSON_IsString(v) && !cJSON_IsNumber(v)) return false;
    }
    return true;
}

/* The pending jobs of a queue that match a filter (class, uuid, q; or
 * "all": true), ready and delayed: deleted (or counted: "dry_run"), a
 * bounded step per request (pending_delete_step). */
static void queue_delete(http_ctx_t *h, const struct action *a, const char *queue, const cJSON *body,
                         const char *who, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)a;
    pending_del_t d = {.queue = queue, .dry_run = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "dry_run")),
                       .f = {.name = body_str(body, "class"), .uuid = body_str(body, "uuid"), .q = body_str(body, "q"),
                             .tag = body_str(body, "tag")}};
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(body, "cursor");
    if (!body_seconds(body, &d.f.since, &d.f.until)) {
        http_reply_error(out, 400, "since, until: unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age such as 30m");
        return;
    }
    if (!d.f.name && !d.f.uuid && !d.f.q && !d.f.tag && !d.f.since && !d.f.until &&
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "all"))) {
        http_reply_error(out, 400, "name a filter (class, uuid, q, tag, since, until), or \"all\": true");
        return;
    }
    if (cur && !cJSON_IsNull(cur) && (!cJSON_IsString(cur) || pcursor_parse(cur->valuestring, &d.cur) < 0)) {
        http_reply_error(out, 400, "malformed cursor: pass the one an answer gave");
        return;
    }
    char err[300], ftext[400];
    pthread_mutex_lock(&h->lock);
    int rv = pending_delete_step(h->rc, &d, err, sizeof err);
    pthread_mutex_unlock(&h->lock);
    filter_text(&d.f, ftext, sizeof ftext);
    if (d.deleted)
        log_info("deleted %ld pending jobs of queue %s (filter:%s%s) by %s", d.deleted, queue, ftext,
                 d.f.since || d.f.until ? " and a time range" : "", who);
    if (rv < 0) {
        http_reply_error(out, 503, "redis %s unavailable: %s (%ld deleted before)", h->rc->name, err, d.deleted);
        return;
    }
    cJSON *o = reply_ok();
    cJSON_AddBoolToObject(o, "dry_run", d.dry_run);
    cJSON_AddNumberToObject(o, "matched", (double)d.matched);
    cJSON_AddNumberToObject(o, "deleted", (double)d.deleted);
    cJSON_AddNumberToObject(o, "scanned", (double)d.scanned);
    char *next = pcursor_text(&d.cur);
    if (next) cJSON_AddStringToObject(o, "cursor", next);
    else cJSON_AddNullToObject(o, "cursor");
    free(next);
    http_reply_json(out, 200, o);
}

static void failed_forget_bulk(http_ctx_t *h, const struct action *a, const char *unused, const cJSON *body,
                               const char *who, http_reply_t *out)
{
    (void)a, (void)unused;
    failed_bulk_filter(h, body, FWALK_FORGET, who, out);
}

/* Failed jobs of a queue, or of a class: {"queue": q} or {"name": n}, a
 * bounded page per request (failed_retry_page); the answer says how many
 * are left to look at and the cursor to go on with. */
static void failed_retry_bulk(http_ctx_t *h, const struct action *a, const char *unused, const cJSON *body,
                              const char *who, http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)a, (void)unused;
    if (by_filter(body)) {
        failed_bulk_filter(h, body, FWALK_RETRY, who, out);
        return;
    }
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(body, "queue"), *n = cJSON_GetObjectItemCaseSensitive(body, "name");
    failed_page_t pg = {.queue = cJSON_IsString(q) ? q->valuestring : NULL,
                        .name = cJSON_IsString(n) ? n->valuestring : NULL};
    if ((!pg.queue && !pg.name) || !read_cursor(body, &pg)) {
        free(pg.at_queue);
        http_reply_error(out, 400, "bulk retry takes {\"queue\": ...} or {\"name\": ...}, and the \"cursor\" "
                                   "a previous answer gave");
        return;
    }
    char err[300];
    pthread_mutex_lock(&h->lock);
    int rv = failed_retry_page(h->rc, &pg, err, sizeof err);
    pthread_mutex_unlock(&h->lock);
    if (pg.retried)
        log_info("retried %d failed jobs (%s %s) by %s", pg.retried, pg.queue ? "queue" : "class",
                 pg.queue ? pg.queue : pg.name, who);
    if (rv < 0) {
        free(pg.at_queue);
        http_reply_error(out, 503, "redis %s unavailable: %s (%d retried before)", h->rc->name, err, pg.retried);
        return;
    }
    cJSON *o = reply_ok();
    cJSON_AddNumberToObject(o, "retried", pg.retried);
    cJSON_AddNumberToObject(o, "retry_until_kept", pg.kept);
    cJSON_AddNumberToObject(o, "remaining", (double)pg.remaining);
    if (pg.remaining > 0 && pg.at_queue) {
        cJSON *cur = cJSON_AddObjectToObject(o, "cursor");
        cJSON_AddStringToObject(cur, "queue", pg.at_queue);
        cJSON_AddNumberToObject(cur, "skip", (double)pg.skip);
    } else
        cJSON_AddNullToObject(o, "cursor");
    free(pg.at_queue);
    http_reply_json(out, 200, o);
}

/* ------------------------------------------------------------ monitored tags */

/* POST (watch) or DELETE (stop watching, its records gone) /api/monitoring
 * with {"tag": T}. */
static void monitor_action(http_ctx_t *h, const char *unused, const cJSON *body, const char *who, bool add,
                           http_reply_t *out)
{
    if (http_no_redis(h, out)) return;
    (void)unused;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(body, "tag");
    const char *tag = cJSON_IsString(t) ? t->valuestring : NULL;
    if (!monitored_tag_ok(tag)) {
        http_reply_error(out, 400, "takes {\"tag\": T}, T 1..%d bytes of UTF-8 text", JOBHIST_TAG_MAX);
        return;
    }
    pthread_mutex_lock(&h->lock);
    int rv = monitored_set(h->rc, tag, add);
    pthread_mutex_unlock(&h->lock);
    if (rv == -2) {
        http_reply_error(out, 400, "at most %d tags are watched", MONITORED_MAX);
        return;
    }
    if (rv < 0) {
        http_reply_error(out, 503, "redis %s unavailable", h->rc->name);
        return;
    }
    if (rv > 0) log_info("%s watching tag \"%s\" (by %s)", add ? "started" : "stopped", tag, who);
    cJSON *o = reply_ok();
    cJSON_AddBoolToObject(o, "changed", rv > 0);
    http_reply_json(out, 200, o);
}

static void monitor_add(http_ctx_t *h, const struct action *a, const char *name, const cJSON *body, const char *who,
                        http_reply_t *out)
{
    (void)a;
    monitor_action(h, name, body, who, true, out);
}

static void monitor_remove(http_ctx_t *h, const struct action *a, const char *name, const cJSON *body,
                           const char *who, http_reply_t *out)
{
    (void)a;
    monitor_action(h, name, body, who, false, out);
}

/* ------------------------------------------------------------ routes */

static const struct action ACTIONS[] = {
    {"/api/pools/", "pause", scoped_action, "pause", "pools", false},
    {"/api/pools/", "continue", scoped_action, "continue", "pools", false},
    {"/api/pools/", "scale", pool_scale, NULL, NULL, false},
    {"/api/pools/", "restart", pool_restart, NULL, NULL, false},
    {"/api/queues/", "pause", scoped_action, "pause", "queues", false},
    {"/api/queues/", "continue", scoped_action, "continue", "queues", false},
    {"/api/queues/", "delete", queue_delete, NULL, NULL, true},
    {"/api/classes/", "pause", class_action, "pause", NULL, true},
    {"/api/classes/", "continue", class_action, "continue", NULL, true},
    {"/api/failed/app/retry", NULL, app_failed_act, "failed-retry", NULL, false},
    {"/api/failed/app/forget", NULL, app_failed_act, "failed-forget", NULL, false},
    {"/api/failed/retry", NULL, failed_retry_bulk, NULL, NULL, true},
    {"/api/failed/forget", NULL, failed_forget_bulk, NULL, NULL, true},
    {"/api/failed/", "retry", failed_retry_one, NULL, NULL, true},
    {"/api/jobs/", "stop", job_stop, NULL, NULL, false},
    {"/api/failed/", "forget", failed_forget_one, NULL, NULL, true},
    {"/api/monitoring", NULL, monitor_add, NULL, NULL, true},
    {"/api/batches/", "retry", batch_retry, NULL, NULL, false},
    {HTTP_DELETE_PREFIX "/api/monitoring", NULL, monitor_remove, NULL, NULL, true},
};

/* The action for path; *name (the caller frees) gets the name in it. */
static const struct action *find_action(const char *path, char **name)
{
    *name = NULL;
    for (size_t i = 0; i < sizeof ACTIONS / sizeof *ACTIONS; i++) {
        const struct action *a = &ACTIONS[i];
        size_t pl = strlen(a->prefix);
        if (!a->verb) {
            if (!strcmp(path, a->prefix)) return a;
            continue;
        }
        if (strncmp(path, a->prefix, pl)) continue;
        const char *rest = path + pl, *slash = strchr(rest, '/');
        if (!slash || slash == rest || slash - rest > 255 || strcmp(slash + 1, a->verb)) continue;
        *name = xstrndup(rest, (size_t)(slash - rest));
        return a;
    }
    return NULL;
}

bool http_action_exists(const char *path)
{
    char *name;
    const struct action *a = find_action(path, &name);
    free(name);
    return a != NULL;
}

void http_action(http_ctx_t *h, const char *path, const cJSON *body, const char *who, http_reply_t *out)
{
    char *name;
    const struct action *a = find_action(path, &name);
    if (!a)
        http_reply_error(out, 404, "no such action");
    else if (!a->redis || !http_no_redis(h, out))
        a->fn(h, a, name, body, who, out);
    free(name);
}
