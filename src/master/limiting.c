/*
 * limiting.c - see limiting.h.
 */
#include "master/limiting.h"
#include "master/mconn.h"
#include "master/pool.h"
#include "redis/qlimit.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

struct limiting {
    qlimit_stat_t *st;
    int n;
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
    qlimits_t one = {0};
    char *id = limit_key_id(l);
    qlimits_add(&one, c->conf.prefix, id, l->class_name, l->queue, l->concurrency, l->rate ? l->rate_per_s : 0,
                l->burst);
    free(id);
    qlimit_read(c, &one.v[0], st);
    qlimits_free(&one);
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
    if (st->tokens >= 0)
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
    for (int i = 0; i < m->conf->nlimits; i++)
        cJSON_AddItemToArray(a, limit_json(&m->conf->limits[i], g && i < g->n ? &g->st[i] : NULL));
    return a;
}

void limiting_free(master_t *m)
{
    if (!m->limiting) return;
    free(m->limiting->st);
    free(m->limiting);
    m->limiting = NULL;
}
