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

/* The list's snapshot as the reply's "state", "error", and its keys
 * ("loading" while it answers another query than the look's). */
static void add_list(cJSON *o, const agent_app_dash_t *d, bool same)
{
    cJSON *l = d->list && same ? cJSON_Parse(d->list) : NULL;
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(l, "ok");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(l, "error");
    bool failed = l && cJSON_IsFalse(ok);
    cJSON_AddStringToObject(o, "state", !l ? "loading" : failed ? "error" : "ok");
    if (failed) cJSON_AddStringToObject(o, "error", cJSON_IsString(err) ? err->valuestring : "the app agent failed");
    if (l) cJSON_AddNumberToObject(o, "read_at", (double)d->at_unix);
    const char *keys[] = {"failed", "total", "offset", "partial"};
    for (size_t i = 0; l && !failed && i < ARRAY_LEN(keys); i++) {
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(l, keys[i]);
        if (v) cJSON_AddItemToObject(o, keys[i], v);
    }
    cJSON_Delete(l);
}

/* Queue a list for query when none is in flight and the snapshot is old
 * or answers another query. */
static void maybe_list(master_t *m, pool_t *p, const char *query, bool same, int64_t now, char *err, size_t errn)
{
    agent_app_dash_t *d = &p->app_dash;
    bool old = !d->listed_ms || now - d->listed_ms >= MAPPDASH_REFRESH_MS;
    if (d->listing || (same && !old)) return;
    if (mapp_ask(m, &LIST_FROM, p->conf.name, xstrdup(query), now, err, errn) < 0) return;
    d->listing = true;
    free(d->asking);
    d->asking = xstrdup(query);
}

cJSON *mappdash_look(master_t *m, const char *pool, const char *query, int64_t now, char *err, size_t errn)
{
    pool_t *p = dash_pool(m, pool, err, errn);
    if (!p) return NULL;
    agent_app_dash_t *d = &p->app_dash;
    if (!query) query = "{\"op\":\"failed\"}";
    bool same = d->query && !strcmp(d->query, query);
    maybe_list(m, p, query, same, now, err, errn);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    cJSON_AddStringToObject(o, "pool", p->conf.name);
    add_list(o, d, same);
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

void mappdash_answered(pool_t *p, uint64_t client, const char *answer)
{
    agent_app_dash_t *d = &p->app_dash;
    if (client == MAPPDASH_LIST) {
        free(d->list);
        free(d->query);
        d->list = xstrdup(answer);
        d->query = d->asking ? d->asking : xstrdup("{\"op\":\"failed\"}");
        d->asking = NULL;
        d->at_unix = wall_s();
        d->listed_ms = mono_ms();
        d->listing = false;
        return;
    }
    free(d->last_action);
    d->last_action = xstrdup(answer);
    d->acting = false;
    d->listed_ms = 0; /* the list read again at the next look */
}

void mappdash_free(agent_app_dash_t *d)
{
    free(d->list);
    free(d->query);
    free(d->asking);
    free(d->last_action);
    *d = (agent_app_dash_t){0};
}
