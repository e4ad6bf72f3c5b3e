/*
 * mbatches.c - see mbatches.h.
 */
#include "master/mbatches.h"
#include "core/log.h"
#include "core/util.h"
#include "master/mconn.h"
#include "redis/failed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mbatches_can(const pool_t *p)
{
    return !p->removed && pool_preloads(&p->conf);
}

bool mbatches_wanted(const pool_t *p, int64_t now)
{
    return mbatches_can(p) && (now < p->batches.wanted_until_ms || p->batches.retry);
}

static void retry_done(pool_t *p, const char *error, int by_app);

/* Is a request of a retry in flight on the agent? */
static bool retry_in_flight(const agent_t *a)
{
    return a->fd >= 0 && a->pending_id && (a->pending_op == AGENT_OP_BATCH_FAILED || a->pending_op == AGENT_OP_BATCH_RETRY);
}

/* A retry past its deadline (its agent never came up, or never answered)
 * ends with an error: the pool can be asked again. */
static void retry_expire(pool_t *p, int64_t now)
{
    if (p->batches.retry && now >= p->batches.retry_until_ms)
        retry_done(p, "no answer from the app agent within 60 s: list the batch to see where it stands", 0);
}

void mbatches_ask(pool_t *p, int64_t now)
{
    agent_batches_t *b = &p->batches;
    retry_expire(p, now);
    if (b->retry && b->retry_step) {
        bool failed = b->retry_step == 1;
        if (agent_ask(&p->agent, p->conf.name, failed ? AGENT_OP_BATCH_FAILED : AGENT_OP_BATCH_RETRY, b->retry,
                      (const char *const *)b->retry_jobs, b->nretry_jobs, now) == 0)
            b->retry_step = 0; /* asked: its reply goes on */
        return;
    }
    if (b->retry && !retry_in_flight(&p->agent)) { /* its agent went away before it answered */
        retry_done(p, "the app agent went away before it answered: list the batch to see where it stands", 0);
        return;
    }
    if (b->retry) return; /* a retry's reply is awaited: the list after it */
    if (b->at_ms && now - b->at_ms < MBATCHES_REFRESH_MS) return;
    agent_ask(&p->agent, p->conf.name, AGENT_OP_BATCHES, NULL, NULL, MBATCHES_LIMIT, now);
}

static void list_seen(pool_t *p, const agent_reply_t *r)
{
    agent_batches_t *b = &p->batches;
    b->at_ms = mono_ms();
    if (!r->ok) {
        if (strcmp(b->error, r->error)) log_warn("pool %s: its app agent cannot read job batches: %s", p->conf.name, r->error);
        snprintf(b->error, sizeof b->error, "%s", r->error);
        return;
    }
    free(b->json);
    b->json = xstrdup(r->batches);
    b->at_unix = wall_s();
    b->skipped = r->skipped;
    b->error[0] = '\0';
}

static void ids_free(char ***v, int *n)
{
    for (int i = 0; i < *n; i++) free((*v)[i]);
    free(*v);
    *v = NULL;
    *n = 0;
}

static void retry_jobs_free(agent_batches_t *b)
{
    ids_free(&b->retry_jobs, &b->nretry_jobs);
    ids_free(&b->retry_known, &b->nretry_known);
}

/* Is id one of v's n? */
static bool among(char *const *v, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], id)) return true;
    return false;
}

/* The retry is over: its outcome kept (error NULL: it went through), and
 * the list read again at once. */
static void retry_done(pool_t *p, const char *error, int by_app)
{
    agent_batches_t *b = &p->batches;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", !error);
    cJSON_AddNumberToObject(o, "at", (double)b->retry_sent_unix);
    cJSON_AddStringToObject(o, "batch", b->retry);
    if (error) {
        cJSON_AddStringToObject(o, "error", error);
        log_warn("pool %s: batch %s: the retry of its failed jobs failed: %s", p->conf.name, b->retry, error);
    }
    cJSON_AddNumberToObject(o, "retried", by_app + b->from_store);
    cJSON_AddNumberToObject(o, "retried_by_app", by_app);
    cJSON_AddNumberToObject(o, "retried_from_qpool", b->from_store);
    cJSON_AddNumberToObject(o, "not_found", b->not_found);
    cJSON_AddNumberToObject(o, "qpool_records_forgotten", b->forgotten);
    if (!error)
        log_info("pool %s: batch %s: %d failed jobs pushed back by the app, %d from qpool's failed store, %d not found",
                 p->conf.name, b->retry, by_app, b->from_store, b->not_found);
    free(b->last_retry);
    b->last_retry = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    free(b->retry);
    b->retry = NULL;
    b->retry_step = 0;
    retry_jobs_free(b);
    b->at_ms = 0; /* read the list again at once */
    p->agent.todo |= AGENT_WANT_BATCHES;
}

/* The pool's Redis, for qpool's failed store; NULL: none, or (*down)
 * one that cannot be reached now. */
static rconn_t *store_of(master_t *m, const pool_t *p, bool *down)
{
    rconn_t *c = p->conf.connection ? mconn_get(m, p->conf.connection) : NULL;
    *down = c && rconn_ensure(c) < 0;
    return *down ? NULL : c;
}

/* qpool's record of a job the retry dealt with, forgotten when it failed
 * no later than the retry was asked (a newer one is the failure of the job
 * pushed back: kept). 1 forgotten, 0 not, -1 Redis error. */
static int forget_old(rconn_t *c, const char *uuid, int64_t asked_unix)
{
    frec_t f;
    if (failed_get(c, uuid, &f) < 0) return 0;
    bool old = f.failed_at <= asked_unix;
    frec_free(&f);
    return old ? failed_forget(c, uuid) : 0;
}

/* A failed job of the batch that the app's failer does not hold. A failer
 * keyed by uuid no longer holds it because the app retried or forgot it
 * (queue:retry, queue:forget), or because an agent stopped half way
 * through an earlier retry forgot its row: it is not pushed a second time,
 * and its record stays in qpool's store (`qpool failed` shows it). Other
 * failers (null; the plain database one, whose ids are not uuids) cannot
 * say: it is retried from qpool's store as `qpool failed retry` does. */
static int missing_one(rconn_t *c, agent_batches_t *b, const char *id, bool failer_uuids, char *err, size_t errn)
{
    char queue[256];
    bool kept;
    int rv = c && !failer_uuids ? failed_retry(c, id, queue, sizeof queue, &kept, err, errn) : 0;
    if (rv == 1)
        b->from_store++;
    else if (rv == 0)
        b->not_found++;
    return rv < 0 ? -1 : 0;
}

/* Step 1's answer: the jobs the app's failer does not hold, by
 * missing_one; those it holds keep their record in qpool's store until
 * the app says it pushed them back (pushed_seen): an agent that dies half
 * way leaves each job in one store at least. */
static void failed_seen(master_t *m, pool_t *p, const agent_reply_t *r)
{
    agent_batches_t *b = &p->batches;
    bool down;
    rconn_t *c = store_of(m, p, &down);
    if (down) { /* before anything changes: qpool's records could not follow */
        retry_done(p, "qpool's Redis cannot be reached: nothing was retried", 0);
        return;
    }
    for (int i = 0; i < r->nmissing; i++) {
        char err[256] = "";
        if (!among(b->retry_known, b->nretry_known, r->missing[i])) {
            b->not_found++; /* not a failed job of the batch as the master listed it: left alone */
        } else if (missing_one(c, b, r->missing[i], r->failer_uuids, err, sizeof err) < 0) {
            char why[400];
            snprintf(why, sizeof why, "qpool's Redis: %.250s (the jobs retried so far stay retried)", err);
            retry_done(p, why, 0);
            return;
        }
    }
    b->retry_jobs = xcalloc((size_t)r->nretried + 1, sizeof *b->retry_jobs);
    for (int i = 0; i < r->nretried; i++)
        if (among(b->retry_known, b->nretry_known, r->retried[i]))
            b->retry_jobs[b->nretry_jobs++] = xstrdup(r->retried[i]);
        else
            b->not_found++;
    if (!b->nretry_jobs) {
        retry_done(p, NULL, 0);
        return;
    }
    b->retry_step = 2;
    p->agent.todo |= AGENT_WANT_BATCHES;
}

/* Step 2's answer: the jobs the app pushed back lose their record in
 * qpool's store now (the adapter wrote each failure in both). */
static void pushed_seen(master_t *m, pool_t *p, const agent_reply_t *r)
{
    agent_batches_t *b = &p->batches;
    bool down;
    rconn_t *c = store_of(m, p, &down);
    if (down)
        log_warn("pool %s: batch %s: qpool's Redis cannot be reached: the records of the jobs the app pushed back "
                 "stay in qpool's failed store", p->conf.name, b->retry);
    int pushed = 0;
    for (int i = 0; i < r->nretried; i++) {
        if (!among(b->retry_jobs, b->nretry_jobs, r->retried[i])) continue; /* not asked: nothing done for it */
        pushed++;
        if (c && forget_old(c, r->retried[i], b->retry_sent_unix) == 1) b->forgotten++;
    }
    b->not_found += r->nmissing; /* back in the app's failer (the agent logged them again) */
    retry_done(p, NULL, pushed);
}

static void retry_seen(master_t *m, pool_t *p, const agent_reply_t *r)
{
    agent_batches_t *b = &p->batches;
    if (!b->retry || strcmp(b->retry, r->batch[0] ? r->batch : b->retry)) return; /* not the one waited for */
    if (b->retry_step) return; /* this retry has not asked yet: the reply of an earlier one */
    if (!r->ok) {
        retry_done(p, r->error, 0);
        return;
    }
    if (r->op == AGENT_OP_BATCH_FAILED)
        failed_seen(m, p, r);
    else
        pushed_seen(m, p, r);
}

void mbatches_reply(master_t *m, pool_t *p, const agent_reply_t *r)
{
    if (r->op == AGENT_OP_BATCHES)
        list_seen(p, r);
    else if (r->op == AGENT_OP_BATCH_RETRY || r->op == AGENT_OP_BATCH_FAILED)
        retry_seen(m, p, r);
}

/* Is there a batch of that id in the list (a cJSON array)? */
static bool holds(const cJSON *list, const char *id)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsString(v) && !strcmp(v->valuestring, id)) return true;
    }
    return false;
}

/* The pool's batches into all (each with its pool; one already there from
 * another pool of the same app is not repeated). */
static void add_batches(cJSON *all, const pool_t *p)
{
    cJSON *list = p->batches.json ? cJSON_Parse(p->batches.json) : NULL;
    cJSON *e;
    while (list && (e = cJSON_DetachItemFromArray(list, 0))) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsString(id) || holds(all, id->valuestring)) {
            cJSON_Delete(e);
            continue;
        }
        cJSON_AddStringToObject(e, "pool", p->conf.name);
        cJSON_AddItemToArray(all, e);
    }
    cJSON_Delete(list);
}

static cJSON *pool_state(const pool_t *p)
{
    const agent_batches_t *b = &p->batches;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "pool", p->conf.name);
    /* no list, and its agent lost (the backoff runs): an error, not "loading" for ever */
    const char *lost = !b->json && !b->error[0] && p->agent.fd < 0 && p->agent.restarts
                           ? "its app agent went away: asking its zygote for a new one" : NULL;
    cJSON_AddStringToObject(o, "state", b->error[0] || lost ? "error" : b->json ? "ok" : "loading");
    if (b->error[0] || lost) cJSON_AddStringToObject(o, "error", lost ? lost : b->error);
    if (b->json) cJSON_AddNumberToObject(o, "read_at", (double)b->at_unix);
    if (b->skipped) cJSON_AddNumberToObject(o, "skipped", b->skipped);
    cJSON_AddBoolToObject(o, "agent", p->agent.fd >= 0 && p->agent.pid > 0);
    cJSON *r = b->last_retry ? cJSON_Parse(b->last_retry) : NULL;
    if (r) cJSON_AddItemToObject(o, "last_retry", r);
    return o;
}

cJSON *mbatches_look(master_t *m, int64_t now)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    cJSON *all = cJSON_AddArrayToObject(o, "batches");
    cJSON *pools = cJSON_AddArrayToObject(o, "pools");
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (!mbatches_can(p)) continue;
        retry_expire(p, now);
        p->batches.wanted_until_ms = now + MBATCHES_LOOK_MS;
        add_batches(all, p);
        cJSON_AddItemToArray(pools, pool_state(p));
    }
    if (!cJSON_GetArraySize(pools))
        cJSON_AddStringToObject(o, "note", "no pool preloads a Laravel app: batches are read through the app agent "
                                           "of a pool that does (docs/operations.md#job-batches)");
    return o;
}

/* The pool whose list holds batch id, or NULL; *loading: a pool that can
 * read batches has no list yet. */
static pool_t *pool_of(master_t *m, const char *id, bool *loading, bool *any)
{
    *loading = *any = false;
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (!mbatches_can(p)) continue;
        *any = true;
        if (!p->batches.json) *loading = true;
        cJSON *list = p->batches.json ? cJSON_Parse(p->batches.json) : NULL;
        bool found = list && holds(list, id);
        cJSON_Delete(list);
        if (found) return p;
    }
    return NULL;
}

/* The failed job ids of batch id in the pool's list (heap, *n of them). */
static char **listed_ids(const pool_t *p, const char *id, int *n)
{
    cJSON *list = p->batches.json ? cJSON_Parse(p->batches.json) : NULL;
    const cJSON *e, *ids = NULL;
    cJSON_ArrayForEach(e, list) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsString(v) && !strcmp(v->valuestring, id)) ids = cJSON_GetObjectItemCaseSensitive(e, "failed_ids");
    }
    char **v = xcalloc((size_t)cJSON_GetArraySize(ids) + 1, sizeof *v);
    *n = 0;
    cJSON_ArrayForEach(e, ids) {
        if (cJSON_IsString(e)) v[(*n)++] = xstrdup(e->valuestring);
    }
    cJSON_Delete(list);
    return v;
}

/* A pool that holds up a retry of batch id by p: p retrying any batch, or
 * any pool retrying this one (pools of one app list the same batches);
 * retries past their deadline end first. NULL: none. */
static const pool_t *retrying(master_t *m, pool_t *p, const char *id, int64_t now)
{
    for (int i = 0; i < m->pools.n; i++) retry_expire(m->pools.v[i], now);
    if (p->batches.retry) return p;
    for (int i = 0; i < m->pools.n; i++) {
        const pool_t *q = m->pools.v[i];
        if (q->batches.retry && !strcmp(q->batches.retry, id)) return q;
    }
    return NULL;
}

int mbatches_retry(master_t *m, const char *id, int64_t now, char *pool, size_t pn, char *err, size_t errn)
{
    if (!id || !agent_batch_id_ok(id)) {
        snprintf(err, errn, "batch-retry takes \"batch\": a batch id");
        return -1;
    }
    bool loading, any;
    pool_t *p = pool_of(m, id, &loading, &any);
    if (!p && !any) {
        snprintf(err, errn, "no pool preloads a Laravel app: batches are read through its app agent");
        return -1;
    }
    if (!p) {
        snprintf(err, errn, loading ? "no batch %s in the lists read so far (still reading: try again)"
                                    : "no batch %s among the newest batches", id);
        return -1;
    }
    const pool_t *busy = retrying(m, p, id, now);
    if (busy) {
        snprintf(err, errn, "pool %s is retrying batch %s already: try again when it is done", busy->conf.name,
                 busy->batches.retry);
        return -1;
    }
    agent_batches_t *b = &p->batches;
    b->retry = xstrdup(id);
    b->retry_known = listed_ids(p, id, &b->nretry_known);
    b->retry_step = 1;
    b->forgotten = b->from_store = b->not_found = 0;
    b->retry_sent_unix = wall_s();
    b->retry_until_ms = now + MBATCHES_RETRY_MS;
    b->wanted_until_ms = now + MBATCHES_LOOK_MS;
    p->agent.todo |= AGENT_WANT_BATCHES;
    mbatches_ask(p, now); /* at once when its agent is idle; else after its reply */
    snprintf(pool, pn, "%s", p->conf.name);
    log_info("pool %s: batch %s: retrying its failed jobs", p->conf.name, id);
    return 0;
}
