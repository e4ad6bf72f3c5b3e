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

void mbatches_ask(pool_t *p, int64_t now)
{
    agent_batches_t *b = &p->batches;
    if (b->retry) {
        if (agent_ask(&p->agent, p->conf.name, AGENT_OP_BATCH_RETRY, b->retry, NULL, 0, now) == 0) {
            free(b->retry);
            b->retry = NULL;
            b->retry_sent_unix = wall_s();
        }
        return;
    }
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

/* qpool's failed store after the app's retry: the records of the jobs the
 * app pushed back, older than the retry, forgotten; the jobs the app's
 * failer did not have retried from it. Counts into o. */
static void store_after_retry(master_t *m, pool_t *p, const agent_reply_t *r, cJSON *o)
{
    int forgotten = 0, from_store = 0, nowhere = 0;
    rconn_t *c = p->conf.connection ? mconn_get(m, p->conf.connection) : NULL;
    if (c && rconn_ensure(c) < 0) c = NULL;
    for (int i = 0; c && i < r->nretried; i++) {
        frec_t f;
        if (failed_get(c, r->retried[i], &f) < 0) continue;
        if (f.failed_at < p->batches.retry_sent_unix && failed_forget(c, r->retried[i]) == 1) forgotten++;
        frec_free(&f);
    }
    for (int i = 0; i < r->nmissing; i++) {
        char queue[256], err[256];
        bool kept;
        if (c && failed_retry(c, r->missing[i], queue, sizeof queue, &kept, err, sizeof err) == 1)
            from_store++;
        else
            nowhere++;
    }
    cJSON_AddNumberToObject(o, "retried", r->nretried + from_store);
    cJSON_AddNumberToObject(o, "retried_by_app", r->nretried);
    cJSON_AddNumberToObject(o, "retried_from_qpool", from_store);
    cJSON_AddNumberToObject(o, "not_found", nowhere);
    cJSON_AddNumberToObject(o, "qpool_records_forgotten", forgotten);
    if (!c && r->nmissing) cJSON_AddStringToObject(o, "note", "qpool's failed store was not reached");
}

static void retry_seen(master_t *m, pool_t *p, const agent_reply_t *r)
{
    agent_batches_t *b = &p->batches;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", r->ok);
    cJSON_AddNumberToObject(o, "at", (double)b->retry_sent_unix);
    if (!r->ok) {
        cJSON_AddStringToObject(o, "error", r->error);
        log_warn("pool %s: a batch retry failed in the app: %s", p->conf.name, r->error);
    } else {
        cJSON_AddStringToObject(o, "batch", r->batch);
        store_after_retry(m, p, r, o);
        log_info("pool %s: batch %s: %d failed jobs pushed back by the app, %d from qpool's failed store", p->conf.name,
                 r->batch, r->nretried, (int)cJSON_GetObjectItemCaseSensitive(o, "retried_from_qpool")->valuedouble);
    }
    free(b->last_retry);
    b->last_retry = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    b->at_ms = 0; /* read the list again at once */
    p->agent.todo |= AGENT_WANT_BATCHES;
}

void mbatches_reply(master_t *m, pool_t *p, const agent_reply_t *r)
{
    if (r->op == AGENT_OP_BATCHES)
        list_seen(p, r);
    else if (r->op == AGENT_OP_BATCH_RETRY)
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

static cJSON *pool_state(const pool_t *p, int64_t now)
{
    const agent_batches_t *b = &p->batches;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "pool", p->conf.name);
    cJSON_AddStringToObject(o, "state", b->error[0] ? "error" : b->json ? "ok" : "loading");
    if (b->error[0]) cJSON_AddStringToObject(o, "error", b->error);
    if (b->json) {
        cJSON_AddNumberToObject(o, "read_at", (double)b->at_unix);
        cJSON_AddNumberToObject(o, "age_ms", (double)(now - b->at_ms));
    }
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
        p->batches.wanted_until_ms = now + MBATCHES_LOOK_MS;
        add_batches(all, p);
        cJSON_AddItemToArray(pools, pool_state(p, now));
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
    free(p->batches.retry);
    p->batches.retry = xstrdup(id);
    p->batches.wanted_until_ms = now + MBATCHES_LOOK_MS;
    p->agent.todo |= AGENT_WANT_BATCHES;
    mbatches_ask(p, now); /* at once when its agent is idle; else after its reply */
    snprintf(pool, pn, "%s", p->conf.name);
    log_info("pool %s: batch %s: retrying its failed jobs", p->conf.name, id);
    return 0;
}
