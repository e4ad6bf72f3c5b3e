/*
 * mappdash.c - see mappdash.h.
 */
#include "master/mappdash.h"
#include "core/log.h"
#include "core/util.h"
#include "master/mapp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dashboard's requests: in the places kept for it (mapp_admit). */
static const agent_app_from_t LIST_FROM = {.client = MAPPDASH_LIST, .owner = true, .dash = true};
static const agent_app_from_t ACT_FROM = {.client = MAPPDASH_ACT, .owner = true, .dash = true};

bool mappdash_client(uint64_t client)
{
    return client == MAPPDASH_LIST || client == MAPPDASH_ACT;
}

static pool_t *dash_pool(master_t *m, const char *name, char *err, size_t errn)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->removed || !name || strcmp(p->conf.name, name)) continue;
        if (pool_preloads(&p->conf)) return p;
        snprintf(err, errn, "pool %s does not preload a Laravel app: it has no app agent to ask", p->conf.name);
        return NULL;
    }
    snprintf(err, errn, "no pool %s", name ? name : "(none named)");
    return NULL;
}

/* A view's list as the reply's "state", "error", and its keys
 * ("loading" until its query's list is in). */
static void add_list(cJSON *o, const agent_app_view_t *v)
{
    cJSON *l = v->list ? cJSON_Parse(v->list) : NULL;
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(l, "ok");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(l, "error");
    bool failed = l && cJSON_IsFalse(ok);
    cJSON_AddStringToObject(o, "state", !l ? "loading" : failed ? "error" : "ok");
    if (failed) cJSON_AddStringToObject(o, "error", cJSON_IsString(err) ? err->valuestring : "the app agent failed");
    if (l) cJSON_AddNumberToObject(o, "read_at", (double)v->at_unix);
    const char *keys[] = {"failed", "total", "offset", "partial"};
    for (size_t i = 0; l && !failed && i < ARRAY_LEN(keys); i++) {
        cJSON *x = cJSON_DetachItemFromObjectCaseSensitive(l, keys[i]);
        if (x) cJSON_AddItemToObject(o, keys[i], x);
    }
    cJSON_Delete(l);
}

static void view_free(agent_app_view_t *v)
{
    free(v->query);
    free(v->list);
    *v = (agent_app_view_t){0};
}

/* The list a look without a query shows: the newest failures. */
static const char DEFAULT_QUERY[] = "{\"op\":\"failed\"}";

/* query's view, looked at now: made when it has none, in a free place or
 * the one looked at longest ago (the views nobody looked at for
 * MAPPDASH_FORGET_MS dropped first). */
static agent_app_view_t *view_of(agent_app_dash_t *d, const char *query, int64_t now)
{
    agent_app_view_t *v = NULL, *oldest = &d->v[0];
    for (int i = 0; i < MAPPDASH_VIEWS; i++) {
        agent_app_view_t *w = &d->v[i];
        if (w->query && now - w->looked_ms > MAPPDASH_FORGET_MS) view_free(w);
        if (w->query && !strcmp(w->query, query)) v = w;
        if (!w->query) {
            if (oldest->query) oldest = w; /* a free place first */
        } else if (oldest->query && w->looked_ms < oldest->looked_ms) {
            oldest = w;
        }
    }
    if (!v) {
        view_free(oldest);
        v = oldest;
        v->query = xstrdup(query);
    }
    v->looked_ms = now;
    return v;
}

agent_app_view_t *mappdash_next(agent_app_dash_t *d, int64_t now)
{
    if (d->asking) return NULL;
    agent_app_view_t *next = NULL;
    for (int i = 0; i < MAPPDASH_VIEWS; i++) {
        agent_app_view_t *v = &d->v[i];
        bool due = v->query && (!v->list || !v->listed_ms || now - v->listed_ms >= MAPPDASH_REFRESH_MS);
        if (!due) continue;
        if (!next || v->listed_ms < next->listed_ms ||
            (v->listed_ms == next->listed_ms && v->looked_ms < next->looked_ms))
            next = v;
    }
    bool other = next && (!d->last_query || strcmp(d->last_query, next->query));
    if (other && d->answered_ms && now - d->answered_ms < MAPPDASH_GAP_MS) return NULL;
    return next;
}

/* Queue the list of the view due next (mappdash_next), if any. */
static void maybe_list(master_t *m, pool_t *p, int64_t now, char *err, size_t errn)
{
    agent_app_dash_t *d = &p->app_dash;
    agent_app_view_t *v = mappdash_next(d, now);
    if (!v || mapp_ask(m, &LIST_FROM, p->conf.name, xstrdup(v->query), now, err, errn) < 0) return;
    d->asking = xstrdup(v->query);
}

cJSON *mappdash_look(master_t *m, const char *pool, const char *query, int64_t now, char *err, size_t errn)
{
    pool_t *p = dash_pool(m, pool, err, errn);
    if (!p) return NULL;
    agent_app_dash_t *d = &p->app_dash;
    agent_app_view_t *v = view_of(d, query ? query : DEFAULT_QUERY, now);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    cJSON_AddStringToObject(o, "pool", p->conf.name);
    add_list(o, v);
    maybe_list(m, p, now, err, errn);
    cJSON_AddBoolToObject(o, "agent", p->agent.fd >= 0 && p->agent.pid > 0);
    cJSON_AddBoolToObject(o, "acting", d->acting);
    cJSON *a = d->last_action ? cJSON_Parse(d->last_action) : NULL;
    if (a) cJSON_AddItemToObject(o, "last_action", a);
    return o;
}

int mappdash_act(master_t *m, const char *pool, char *req, int64_t now, char *err, size_t errn)
{
    pool_t *p = dash_pool(m, pool, err, errn);
    if (p && p->app_dash.acting) {
        snprintf(err, errn, "pool %s: a retry or forget from the dashboard is under way: try again when it is done",
                 p->conf.name);
        p = NULL;
    }
    if (!p) {
        free(req);
        return -1;
    }
    if (mapp_ask(m, &ACT_FROM, p->conf.name, req, now, err, errn) < 0) return -1;
    p->app_dash.acting = true;
    return 0;
}

/* A list's answer, into the view of the query it answers (none: it was
 * dropped meanwhile). */
static void list_answered(agent_app_dash_t *d, const char *answer, int64_t now)
{
    const char *q = d->asking;
    if (!q) return; /* none was asked (mappdash_free meanwhile) */
    for (int i = 0; i < MAPPDASH_VIEWS; i++) {
        agent_app_view_t *v = &d->v[i];
        if (!v->query || strcmp(v->query, q)) continue;
        free(v->list);
        v->list = xstrdup(answer);
        v->at_unix = wall_s();
        v->listed_ms = now;
    }
    free(d->last_query);
    d->last_query = d->asking;
    d->asking = NULL;
    d->answered_ms = now;
}

void mappdash_answered(pool_t *p, uint64_t client, const char *answer)
{
    agent_app_dash_t *d = &p->app_dash;
    if (client == MAPPDASH_LIST) {
        list_answered(d, answer, mono_ms());
        return;
    }
    free(d->last_action);
    d->last_action = xstrdup(answer);
    d->acting = false;
    for (int i = 0; i < MAPPDASH_VIEWS; i++) d->v[i].listed_ms = 0; /* the lists read again at the next looks */
}

void mappdash_free(agent_app_dash_t *d)
{
    for (int i = 0; i < MAPPDASH_VIEWS; i++) view_free(&d->v[i]);
    free(d->asking);
    free(d->last_query);
    free(d->last_action);
    *d = (agent_app_dash_t){0};
}
