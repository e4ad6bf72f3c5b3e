/*
 * history.c - see history.h.
 */
#include "history.h"
#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: the minute's hash. ARGV: ttl ms, then field, value pairs. A value
 * already there is added to, bucket by bucket. */
static const char ADD_LUA[] =
    "local function add(a, b)\n"
    "  a.n = a.n + b.n; a.rs = a.rs + b.rs; a.ws = a.ws + b.ws\n"
    "  for i = 1, #a.r do a.r[i] = a.r[i] + (b.r[i] or 0) end\n"
    "  for i = 1, #a.w do a.w[i] = a.w[i] + (b.w[i] or 0) end\n"
    "  return a\n"
    "end\n"
    "for i = 2, #ARGV, 2 do\n"
    "  local old = redis.call('HGET', KEYS[1], ARGV[i])\n"
    "  local v = ARGV[i + 1]\n"
    "  if old then v = cjson.encode(add(cjson.decode(old), cjson.decode(v))) end\n"
    "  redis.call('HSET', KEYS[1], ARGV[i], v)\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[1])\n"
    "return 1\n";

static rscript_t add_script;

int history_add(rconn_t *c, int64_t minute, const char *host, const char *pool, const jobstats_t *s,
                const history_exits_t *exits, int64_t retention_s)
{
    if (!add_script.body) rscript_init(&add_script, ADD_LUA);
    int n = 0;
    for (int i = 0; i < s->n; i++) n += s->v[i].n > 0;
    for (int i = 0; exits && i < exits->n; i++) n += exits->count[i] > 0;
    if (!n) return 0;
    int argc = 2 + 2 * n, k = 0;
    char **argv = xcalloc((size_t)argc, sizeof *argv);
    size_t *lens = xcalloc((size_t)argc, sizeof *lens);
    argv[k++] = xasprintf("%sqpool:metrics:%lld", c->conf.prefix, (long long)minute);
    /* until retention has passed since the end of the minute */
    argv[k++] = xasprintf("%lld", (long long)((retention_s + 60) * 1000));
    for (int i = 0; i < s->n; i++) {
        const jobstat_t *e = &s->v[i];
        if (!e->n) continue;
        char *job = xstrdup(labels_name(&s->classes, e->job));
        for (char *q = strchr(job, '|'); q; q = strchr(q, '|')) *q = '/'; /* '|' separates the parts */
        argv[k++] = xasprintf("%s|%s|%s|%s|%s", host, pool, labels_name(&s->queues, e->queue), job,
                              outcome_name(e->outcome));
        free(job);
        cJSON *v = jobstat_counts_json(e->n, &e->runtime, &e->wait);
        argv[k++] = cJSON_PrintUnformatted(v);
        cJSON_Delete(v);
    }
    histogram_t none = {0};
    for (int i = 0; exits && i < exits->n; i++) {
        if (!exits->count[i]) continue;
        argv[k++] = xasprintf("%s|%s|-|-|exit:%s", host, pool, exits->kind[i]);
        cJSON *v = jobstat_counts_json(exits->count[i], &none, &none);
        argv[k++] = cJSON_PrintUnformatted(v);
        cJSON_Delete(v);
    }
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    int rv = -1;
    redisReply *r;
    if (rconn_ensure(c) == 0 &&
        rconn_script(c, &add_script, 1, argc, (const char **)argv, lens, -1, -1, &r) == RC_OK) {
        rv = r->type == REDIS_REPLY_ERROR ? -2 : 0; /* refused: retrying would not help */
        freeReplyObject(r);
    }
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
    free(lens);
    return rv;
}

/* Every job series of a minute merged: exact percentiles over all of them. */
typedef struct {
    uint64_t n;
    histogram_t rt, wt;
} minute_total_t;

/* One field of a minute's hash as a series entry (added to tot when it
 * counts jobs); NULL if it is not ours. */
static cJSON *series_entry(const char *field, const char *value, size_t vlen, minute_total_t *tot)
{
    char *parts[5] = {0};
    char *copy = xstrdup(field), *save = NULL, *p = copy;
    int n = 0;
    for (char *t = strtok_r(p, "|", &save); t && n < 5; t = strtok_r(NULL, "|", &save)) parts[n++] = t;
    cJSON *v = cJSON_ParseWithLength(value, vlen);
    uint64_t count;
    histogram_t rt, wt;
    cJSON *o = NULL;
    if (n == 5 && v && jobstat_counts_from_json(v, &count, &rt, &wt) == 0) {
        o = cJSON_CreateObject();
        static const char *const names[] = {"host", "pool", "queue", "job", "outcome"};
        for (int i = 0; i < 5; i++) cJSON_AddStringToObject(o, names[i], parts[i]);
        cJSON_AddNumberToObject(o, "count", (double)count);
        cJSON_AddItemToObject(o, "runtime_ms", hist_summary_json(&rt));
        cJSON_AddItemToObject(o, "wait_ms", hist_summary_json(&wt));
        if (outcome_from_name(parts[4]) >= 0) {
            tot->n += count;
            hist_merge(&tot->rt, &rt);
            hist_merge(&tot->wt, &wt);
        }
    }
    cJSON_Delete(v);
    free(copy);
    return o;
}

cJSON *history_read(rconn_t *c, int64_t from, int64_t to)
{
    if (to < from || to - from > 60 * 24 * 31) return NULL;
    if (rconn_ensure(c) < 0) return NULL;
    for (int64_t m = from; m <= to; m++) {
        char *key = xasprintf("%sqpool:metrics:%lld", c->conf.prefix, (long long)m);
        const char *argv[] = {"HGETALL", key};
        rconn_append(c, 2, argv, NULL);
        free(key);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "from", (double)from);
    cJSON_AddNumberToObject(o, "to", (double)to);
    cJSON *mins = cJSON_AddArrayToObject(o, "minutes");
    bool ok = true;
    for (int64_t m = from; m <= to; m++) {
        redisReply *r;
        if (!ok || rconn_read(c, -1, -1, &r) != RC_OK) {
            ok = false;
            continue;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2) {
            cJSON *mo = cJSON_CreateObject();
            cJSON_AddNumberToObject(mo, "minute", (double)m);
            cJSON *series = cJSON_AddArrayToObject(mo, "series");
            minute_total_t tot = {0};
            for (size_t i = 0; i + 1 < r->elements; i += 2) {
                const redisReply *f = r->element[i], *v = r->element[i + 1];
                if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
                cJSON *e = series_entry(f->str, v->str, v->len, &tot);
                if (e) cJSON_AddItemToArray(series, e);
            }
            cJSON *all = cJSON_AddObjectToObject(mo, "all");
            cJSON_AddNumberToObject(all, "count", (double)tot.n);
            cJSON_AddItemToObject(all, "runtime_ms", hist_summary_json(&tot.rt));
            cJSON_AddItemToObject(all, "wait_ms", hist_summary_json(&tot.wt));
            cJSON_AddItemToArray(mins, mo);
        }
        freeReplyObject(r);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ------------------------------------------------------------ job records */

int history_add_jobs(rconn_t *c, const char *const *recs, int n, int keep, int64_t retention_s)
{
    if (n <= 0) return 0;
    if (rconn_ensure(c) < 0) return -1;
    char *key = xasprintf("%sqpool:jobs", c->conf.prefix);
    const char **argv = xcalloc((size_t)n + 2, sizeof *argv);
    size_t *lens = xcalloc((size_t)n + 2, sizeof *lens);
    argv[0] = "LPUSH";
    argv[1] = key;
    lens[0] = 5;
    lens[1] = strlen(key);
    for (int i = 0; i < n; i++) {
        argv[i + 2] = recs[i];
        lens[i + 2] = strlen(recs[i]);
    }
    rconn_append(c, n + 2, argv, lens);
    char stop[32], ttl[32];
    snprintf(stop, sizeof stop, "%d", keep - 1);
    snprintf(ttl, sizeof ttl, "%lld", (long long)retention_s * 1000);
    const char *trim[] = {"LTRIM", key, "0", stop};
    size_t tl[] = {5, strlen(key), 1, strlen(stop)};
    rconn_append(c, 4, trim, tl);
    const char *exp[] = {"PEXPIRE", key, ttl};
    size_t el[] = {7, strlen(key), strlen(ttl)};
    rconn_append(c, 3, exp, el);
    int rv = 0;
    for (int i = 0; i < 3 && rv != -1; i++) {
        redisReply *r = NULL;
        if (rconn_read(c, -1, -1, &r) != RC_OK)
            rv = -1;
        else if (r->type == REDIS_REPLY_ERROR)
            rv = -2;
        if (r) freeReplyObject(r);
    }
    free(argv);
    free(lens);
    free(key);
    return rv;
}

static bool field_is(const cJSON *rec, const char *k, const char *want)
{
    if (!want) return true;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, k);
    return cJSON_IsString(v) && !strcmp(v->valuestring, want);
}

static double finished_at(const cJSON *rec);

static bool matches(const cJSON *rec, const job_filter_t *f)
{
    double at = finished_at(rec);
    return field_is(rec, "queue", f->queue) && field_is(rec, "pool", f->pool) && field_is(rec, "name", f->name) &&
           field_is(rec, "outcome", f->outcome) && field_is(rec, "uuid", f->uuid) &&
           (!f->since_ms || at >= (double)f->since_ms) && (!f->until_ms || at <= (double)f->until_ms);
}

static double finished_at(const cJSON *rec)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rec, "finished_at");
    return cJSON_IsNumber(t) ? t->valuedouble : 0;
}

static int newest_first(const void *a, const void *b)
{
    double x = finished_at(*(cJSON *const *)a), y = finished_at(*(cJSON *const *)b);
    return x < y ? 1 : x > y ? -1 : 0;
}

cJSON *history_jobs(rconn_t *c, const job_filter_t *f)
{
    if (rconn_ensure(c) < 0) return NULL;
    char *key = xasprintf("%sqpool:jobs", c->conf.prefix);
    const char *argv[] = {"LRANGE", key, "0", "-1"};
    size_t lens[] = {6, strlen(key), 1, 2};
    redisReply *r = rconn_call(c, 4, argv, lens);
    free(key);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r) freeReplyObject(r);
        return NULL;
    }
    /* the list is in the order masters wrote it; workers' records of one
     * pass interleave: order by when each attempt finished */
    cJSON **v = xcalloc(r->elements + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        cJSON *rec = e->type == REDIS_REPLY_STRING ? cJSON_ParseWithLength(e->str, e->len) : NULL;
        if (rec && cJSON_IsObject(rec) && matches(rec, f))
            v[n++] = rec;
        else
            cJSON_Delete(rec);
    }
    freeReplyObject(r);
    qsort(v, n, sizeof *v, newest_first);
    cJSON *out = cJSON_CreateObject();
    cJSON *jobs = cJSON_AddArrayToObject(out, "jobs");
    for (size_t i = 0; i < n; i++) {
        if (!f->limit || i < (size_t)f->limit)
            cJSON_AddItemToArray(jobs, v[i]);
        else
            cJSON_Delete(v[i]);
    }
    free(v);
    return out;
}
