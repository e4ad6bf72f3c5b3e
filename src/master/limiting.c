/*
 * limiting.c - see limiting.h.
 */
#include "master/limiting.h"
#include "master/mconn.h"
#include "master/alerting.h"
#include "master/pool.h"
#include "redis/qlimit.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

struct limiting {
    qlimit_stat_t *st;
    int n;
    /* open alert episodes (alert_after), by the limit's key id */
    char **open;
    int64_t *open_since_ms;
    int nopen;
};

/* The connection a limit is read on: the first native pool's it applies to. */
static const char *limit_connection(const master_t *m, const limit_conf_t *l)
{
    for (int i = 0; i < m->pools.n; i++) {
        const pool_t *p = m->pools.v[i];
        if (p->removed || p->conf.handler_type == HANDLER_NONE) continue;
        if (limit_applies_to(l, p->conf.queues, p->conf.nqueues)) return p->conf.connection;
    }
    return NULL;
}

static void read_one(master_t *m, const limit_conf_t *l, qlimit_stat_t *st)
{
    memset(st, 0, sizeof *st);
    const char *cname = limit_connection(m, l);
    rconn_t *c = cname ? mconn_get(m, cname) : NULL;
    if (!c || rconn_ensure(c) < 0) return;
    qlimits_t one = {.cluster = rconn_is_cluster(c)};
    char *id = limit_key_id(l);
    qlimits_add(&one, c->conf.prefix, id, l->class_name, l->queue, l->concurrency, l->rate ? l->rate_per_s : 0,
                l->burst);
    free(id);
    qlimit_read(c, &one.v[0], st);
    qlimits_free(&one);
}

static int find_open(const struct limiting *g, const char *id)
{
    for (int i = 0; i < g->nopen; i++)
        if (!strcmp(g->open[i], id)) return i;
    return -1;
}

/* One alert event for the limit with key id (l: NULL when it is gone). */
static void emit(master_t *m, const char *id, const limit_conf_t *l, const qlimit_stat_t *st, bool firing,
                 int64_t since_ms)
{
    char desc[600];
    if (l)
        limit_describe(l, desc, sizeof desc);
    else
        snprintf(desc, sizeof desc, "%s (no longer configured)", id);
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "alert", "limit_wait");
    cJSON_AddStringToObject(ev, "state", firing ? "firing" : "resolved");
    cJSON_AddStringToObject(ev, "limit", desc);
    cJSON_AddNumberToObject(ev, "value", st && st->known ? (double)st->waited_ms / 1000.0 : 0);
    cJSON_AddNumberToObject(ev, "threshold", l ? l->alert_after : 0);
    cJSON_AddStringToObject(ev, "measure", "limit_waited");
    cJSON_AddNumberToObject(ev, "waiting", st && st->known ? (double)st->waiting : 0);
    cJSON_AddNumberToObject(ev, "since", (double)(since_ms / 1000));
    cJSON_AddNumberToObject(ev, "at", (double)(wall_ms() / 1000));
    alerting_emit(m, ev);
    cJSON_Delete(ev);
}

static void open_episode(struct limiting *g, char *id, int64_t since_ms)
{
    g->open = xrealloc(g->open, sizeof *g->open * (size_t)(g->nopen + 1));
    g->open_since_ms = xrealloc(g->open_since_ms, sizeof *g->open_since_ms * (size_t)(g->nopen + 1));
    g->open[g->nopen] = id;
    g->open_since_ms[g->nopen++] = since_ms;
}

static void close_episode(struct limiting *g, int k)
{
    free(g->open[k]);
    g->open[k] = g->open[--g->nopen];
    g->open_since_ms[k] = g->open_since_ms[g->nopen];
}

/* The limits' alerts (alert_after, limit_alert_step): an episode per limit
 * holding jobs back that long; one whose limit a reload removed resolves. */
static void check_alerts(master_t *m, struct limiting *g)
{
    for (int k = g->nopen - 1; k >= 0; k--) {
        bool still = false;
        for (int i = 0; i < g->n && !still; i++) {
            char *id = limit_key_id(&m->conf->limits[i]);
            still = !strcmp(id, g->open[k]);
            free(id);
        }
        if (still) continue;
        emit(m, g->open[k], NULL, NULL, false, g->open_since_ms[k]);
        close_episode(g, k);
    }
    for (int i = 0; i < g->n; i++) {
        const limit_conf_t *l = &m->conf->limits[i];
        char *id = limit_key_id(l);
        int k = find_open(g, id);
        const qlimit_stat_t *st = &g->st[i];
        int step = limit_alert_step(k >= 0, st->known, (double)st->waited_ms / 1000.0, l->alert_after);
        if (step > 0) {
            emit(m, id, l, st, true, wall_ms() - st->waited_ms);
            open_episode(g, id, wall_ms() - st->waited_ms);
            continue;
        }
        if (step < 0) {
            emit(m, id, l, st, false, g->open_since_ms[k]);
            close_episode(g, k);
        }
        free(id);
    }
}

void limiting_poll(master_t *m)
{
    int n = m->conf->nlimits;
    if (!n && !m->limiting) return;
    if (!m->limiting) m->limiting = xcalloc(1, sizeof *m->limiting);
    struct limiting *g = m->limiting;
    g->st = xrealloc(g->st, sizeof *g->st * (size_t)(n ? n : 1));
    g->n = n;
    for (int i = 0; i < n; i++) read_one(m, &m->conf->limits[i], &g->st[i]);
    check_alerts(m, g);
}

static void add_opt_str(cJSON *o, const char *k, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *limit_json(const limit_conf_t *l, const qlimit_stat_t *st)
{
    cJSON *o = cJSON_CreateObject();
    add_opt_str(o, "class", l->class_name);
    add_opt_str(o, "queue", l->queue);
    add_opt_str(o, "tag_prefix", l->tag_prefix); /* per key: concurrency and rate hold per key */
    cJSON_AddNumberToObject(o, "concurrency", l->concurrency);
    add_opt_str(o, "rate", l->rate);
    cJSON_AddNumberToObject(o, "rate_per_s", l->rate ? l->rate_per_s : 0);
    cJSON_AddNumberToObject(o, "burst", l->rate ? l->burst : 0);
    if (!st || !st->known) {
        static const char *const keys[] = {"in_use", "tokens", "waiting", "waited_s"};
        for (size_t i = 0; i < ARRAY_LEN(keys); i++) cJSON_AddNullToObject(o, keys[i]);
        return o;
    }
    cJSON_AddNumberToObject(o, "in_use", (double)st->in_use);
    if (st->tokens >= 0 && !l->tag_prefix) /* per key: each key has its own bucket */
        cJSON_AddNumberToObject(o, "tokens", st->tokens);
    else
        cJSON_AddNullToObject(o, "tokens");
    cJSON_AddNumberToObject(o, "waiting", (double)st->waiting);
    cJSON_AddNumberToObject(o, "waited_s", (double)st->waited_ms / 1000.0);
    return o;
}

cJSON *limiting_json(const master_t *m)
{
    cJSON *a = cJSON_CreateArray();
    const struct limiting *g = m->limiting;
    for (int i = 0; i < m->conf->nlimits; i++) {
        const limit_conf_t *l = &m->conf->limits[i];
        cJSON *o = limit_json(l, g && i < g->n ? &g->st[i] : NULL);
        char *id = limit_key_id(l);
        cJSON_AddNumberToObject(o, "alert_after", l->alert_after);
        cJSON_AddBoolToObject(o, "alerting", g && find_open(g, id) >= 0); /* its limit_wait alert is firing */
        free(id);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

void limiting_free(master_t *m)
{
    if (!m->limiting) return;
    for (int k = 0; k < m->limiting->nopen; k++) free(m->limiting->open[k]);
    free(m->limiting->open);
    free(m->limiting->open_since_ms);
    free(m->limiting->st);
    free(m->limiting);
    m->limiting = NULL;
}
