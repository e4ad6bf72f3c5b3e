/*
 * classpause.c - see classpause.h.
 */
#include "master/classpause.h"
#include "master/mconn.h"
#include "master/pool.h"
#include "redis/qlimit.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char *class_name, *by, *host;
    double at;
    long long waiting;
} paused_class_t;

struct classpause {
    paused_class_t *v;
    int n;
};

bool classpause_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 255) return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '@') return false;
    return true;
}

/* A hash field changed, logged: "class X: paused across the fleet (who)"
 * or "class X: paused in pool P (who)". */
static void log_field(const char *field, bool on, const char *who)
{
    const char *at = strchr(field, '@');
    log_info("class %.*s: %s %s%s (%s)", at ? (int)(at - field) : (int)strlen(field), field,
             on ? "paused" : "continued", at ? "in pool " : "across the fleet", at ? at + 1 : "", who);
}

/* The i-th distinct connection name of the native pools; NULL past the
 * last. */
static const char *nth_connection(master_t *m, int want)
{
    int seen = 0;
    for (int i = 0; i < m->pools.n; i++) {
        const pool_t *p = m->pools.v[i];
        if (p->removed || p->conf.handler_type == HANDLER_NONE || !p->conf.connection) continue;
        bool dup = false;
        for (int k = 0; k < i && !dup; k++) {
            const pool_t *o = m->pools.v[k];
            dup = !o->removed && o->conf.handler_type != HANDLER_NONE && o->conf.connection &&
                  !strcmp(o->conf.connection, p->conf.connection);
        }
        if (!dup && seen++ == want) return p->conf.connection;
    }
    return NULL;
}

/* The master's connection to the i-th Redis, connected (NULL: none, or down). */
static rconn_t *nth_redis(master_t *m, int i, bool *more)
{
    const char *name = nth_connection(m, i);
    *more = name != NULL;
    rconn_t *c = name ? mconn_get(m, name) : NULL;
    if (!c || rconn_ensure(c) < 0) return NULL;
    return c;
}

static int write_one(rconn_t *c, const char *cls, bool on, const char *val)
{
    char *key = qlimit_paused_key(c->conf.prefix, rconn_is_cluster(c));
    const char *argv[] = {on ? "HSET" : "HDEL", key, cls, val};
    redisReply *r = rconn_call(c, on ? 4 : 3, argv, NULL);
    free(key);
    int rv = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (r) freeReplyObject(r);
    return rv;
}

static char *entry_json(const char *who)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "by", who);
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddNumberToObject(o, "at", (double)(wall_ms() / 1000));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* How many of classes[0..n) the hash at key lacks (each counted once),
 * plus the hash's length: what a pause of them would leave paused; -1 when
 * Redis failed. */
static long long paused_after(rconn_t *c, const char *key, char *const *classes, int n)
{
    const char *hl[] = {"HLEN", key};
    redisReply *r = rconn_call(c, 2, hl, NULL);
    long long total = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    for (int i = 0; total >= 0 && i < n; i++) {
        bool dup = false;
        for (int k = 0; k < i && !dup; k++) dup = !strcmp(classes[k], classes[i]);
        const char *he[] = {"HEXISTS", key, classes[i]};
        r = dup ? NULL : rconn_call(c, 3, he, NULL);
        if (!dup && (!r || r->type != REDIS_REPLY_INTEGER)) total = -1;
        else if (!dup && !r->integer) total++;
        if (r) freeReplyObject(r);
    }
    return total;
}

/* Would a pause of these classes leave more than CLASSPAUSE_MAX paused (on
 * the first Redis, which the status reads)? Then err says so. A Redis that
 * does not answer refuses nothing here (the write then fails alone). */
static bool over_cap(master_t *m, char *const *classes, int n, char *err, size_t errn)
{
    bool more = true;
    rconn_t *c = NULL;
    for (int k = 0; more && !c; k++) c = nth_redis(m, k, &more);
    if (!c) return false;
    char *key = qlimit_paused_key(c->conf.prefix, rconn_is_cluster(c));
    long long after = paused_after(c, key, classes, n);
    free(key);
    if (after <= CLASSPAUSE_MAX) return false;
    snprintf(err, errn, "at most %d classes can be paused at once (this would make %lld): continue some first",
             CLASSPAUSE_MAX, after);
    return true;
}

/* Write the hash's fields (classes, or "<class>@<pool>") on every Redis. */
static int set_fields(master_t *m, char *const *classes, int n, bool on, const char *who, char *err, size_t errn)
{
    if (m->conf->no_redis) {
        snprintf(err, errn, "pause by class needs a Redis, and qpool.conf names none (set redis = { default = { host = ...; }; })");
        return -1;
    }
    if (on && over_cap(m, classes, n, err, errn)) return -1;
    char *val = entry_json(who);
    int changed = 0, wrote = 0;
    bool more = true;
    for (int k = 0; more; k++) {
        rconn_t *c = nth_redis(m, k, &more);
        if (!c) continue;
        for (int i = 0; i < n; i++) {
            int rv = write_one(c, classes[i], on, val);
            if (rv < 0) continue;
            wrote++;
            if (rv > 0 && !k) {
                changed++;
                log_field(classes[i], on, who);
            }
        }
    }
    cJSON_free(val);
    if (!wrote) {
        snprintf(err, errn, "no Redis took it (no native pool on a reachable Redis)");
        return -1;
    }
    classpause_poll(m);
    return changed;
}

static bool names_ok(char *const *classes, int n, char *err, size_t errn)
{
    for (int i = 0; i < n; i++)
        if (!classpause_name_ok(classes[i])) {
            snprintf(err, errn, "a class name is 1 to 255 bytes, without control bytes or '@'");
            return false;
        }
    return true;
}

int classpause_set(master_t *m, char *const *classes, int n, bool on, const char *who, char *err, size_t errn)
{
    return names_ok(classes, n, err, errn) ? set_fields(m, classes, n, on, who, err, errn) : -1;
}

int classpause_set_in(master_t *m, char *const *classes, int n, char *const *pools, int np, bool on, const char *who,
                      char *err, size_t errn)
{
    if (!np) return classpause_set(m, classes, n, on, who, err, errn);
    if (!names_ok(classes, n, err, errn)) return -1;
    for (int k = 0; on && k < np; k++) /* a continue may name a pool of another host, or one gone */
        if (!master_pool(m, pools[k])) {
            snprintf(err, errn, "no pool %.100s here", pools[k]);
            return -1;
        }
    char **fields = xcalloc((size_t)(n * np), sizeof *fields);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < np; k++) fields[i * np + k] = xasprintf("%s@%s", classes[i], pools[k]);
    int rv = set_fields(m, fields, n * np, on, who, err, errn);
    for (int i = 0; i < n * np; i++) free(fields[i]);
    free(fields);
    return rv;
}

static void entry_free(paused_class_t *e)
{
    FREE_ALL(e->class_name, e->by, e->host);
}

static void clear(struct classpause *g)
{
    for (int i = 0; i < g->n; i++) entry_free(&g->v[i]);
    free(g->v);
    g->v = NULL;
    g->n = 0;
}

static char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return xstrdup(cJSON_IsString(v) ? v->valuestring : "");
}

/* The jobs the last pops held back for cls (the :wait record). */
static long long held_back(rconn_t *c, const char *cls)
{
    char *id = xasprintf("paused:%s", cls), *lim = qlimit_key(c->conf.prefix, id, rconn_is_cluster(c));
    char *key = xasprintf("%s:wait", lim);
    const char *argv[] = {"HGET", key, "n"};
    redisReply *r = rconn_call(c, 3, argv, NULL);
    FREE_ALL(id, lim, key);
    long long n = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    if (r) freeReplyObject(r);
    return n;
}

static void add_entry(struct classpause *g, rconn_t *c, const char *cls, const char *val)
{
    g->v = xrealloc(g->v, sizeof *g->v * (size_t)(g->n + 1));
    paused_class_t *e = &g->v[g->n++];
    cJSON *o = cJSON_Parse(val);
    e->class_name = xstrdup(cls);
    e->by = jstr(o, "by");
    e->host = jstr(o, "host");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "at");
    e->at = cJSON_IsNumber(at) ? at->valuedouble : 0;
    e->waiting = held_back(c, cls);
    cJSON_Delete(o);
}

/* The hash's entries: HKEYS, then HMGET when there are some (no HGETALL:
 * the common case, none paused, reads an empty key). NULL on an error. */
static redisReply *read_entries(rconn_t *c, const char *key, redisReply **vals)
{
    *vals = NULL;
    const char *argv[] = {"HKEYS", key};
    redisReply *keys = rconn_call(c, 2, argv, NULL);
    bool ok = keys && keys->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < keys->elements; i++) ok = keys->element[i]->type == REDIS_REPLY_STRING;
    if (ok && keys->elements) {
        const char **hv = xcalloc(keys->elements + 2, sizeof *hv);
        hv[0] = "HMGET";
        hv[1] = key;
        for (size_t i = 0; i < keys->elements; i++) hv[i + 2] = keys->element[i]->str;
        *vals = rconn_call(c, (int)keys->elements + 2, hv, NULL);
        free(hv);
        ok = *vals && (*vals)->type == REDIS_REPLY_ARRAY && (*vals)->elements == keys->elements;
    }
    if (ok) return keys;
    if (keys) freeReplyObject(keys);
    if (*vals) freeReplyObject(*vals);
    *vals = NULL;
    return NULL;
}

void classpause_poll(master_t *m)
{
    bool more = true;
    rconn_t *c = NULL;
    for (int k = 0; more && !c; k++) c = nth_redis(m, k, &more);
    if (!c) return; /* the last state stays */
    char *key = qlimit_paused_key(c->conf.prefix, rconn_is_cluster(c));
    redisReply *vals, *keys = read_entries(c, key, &vals);
    free(key);
    if (!keys) return;
    if (!m->classpause) m->classpause = xcalloc(1, sizeof *m->classpause);
    clear(m->classpause);
    for (size_t i = 0; i < keys->elements && i < CLASSPAUSE_MAX; i++) /* more: written by hand */
        add_entry(m->classpause, c, keys->element[i]->str,
                  vals->element[i]->type == REDIS_REPLY_STRING ? vals->element[i]->str : "{}");
    freeReplyObject(keys);
    if (vals) freeReplyObject(vals);
}

cJSON *classpause_json(const master_t *m)
{
    cJSON *a = cJSON_CreateArray();
    const struct classpause *g = m->classpause;
    for (int i = 0; g && i < g->n; i++) {
        cJSON *o = cJSON_CreateObject();
        const char *f = g->v[i].class_name, *at = strchr(f, '@');
        char *cls = xstrndup(f, at ? (size_t)(at - f) : strlen(f));
        cJSON_AddStringToObject(o, "class", cls);
        free(cls);
        if (at) cJSON_AddStringToObject(o, "pool", at + 1);
        else cJSON_AddNullToObject(o, "pool");
        cJSON_AddStringToObject(o, "by", g->v[i].by);
        cJSON_AddStringToObject(o, "host", g->v[i].host);
        cJSON_AddNumberToObject(o, "since", g->v[i].at);
        cJSON_AddNumberToObject(o, "waiting", (double)g->v[i].waiting);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

void classpause_free(master_t *m)
{
    if (!m->classpause) return;
    clear(m->classpause);
    free(m->classpause);
    m->classpause = NULL;
}
