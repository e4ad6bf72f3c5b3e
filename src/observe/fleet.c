/*
 * fleet.c - see fleet.h.
 */
#include "observe/fleet.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* KEYS: index, record. ARGV: id, record JSON, ttl ms. */
static const char HEARTBEAT_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local ttl = tonumber(ARGV[3])\n"
    "redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)\n"
    "redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end\n"
    "return now\n";

/* KEYS: index, record. ARGV: id. */
static const char GOODBYE_LUA[] =
    "redis.call('ZREM', KEYS[1], ARGV[1])\n"
    "return redis.call('DEL', KEYS[2])\n";

/* KEYS: index. ARGV: record key prefix. Returns {now, record, ...}. */
static const char LIST_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "local out = {now}\n"
    "for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, 999)) do\n"
    "  local r = redis.call('GET', ARGV[1] .. id)\n"
    "  if r then out[#out + 1] = r end\n"
    "end\n"
    "return out\n";

/* The index and the records: on a Redis Cluster both carry the hash tag
 * {qpool-fleet}, so that each script's keys are in one slot. */
static char *index_key(rconn_t *c)
{
    return rconn_is_cluster(c) ? xasprintf("%sqpool:{qpool-fleet}:masters", c->conf.prefix)
                               : xasprintf("%sqpool:masters", c->conf.prefix);
}

static char *record_key(rconn_t *c, const char *id)
{
    return rconn_is_cluster(c) ? xasprintf("%sqpool:{qpool-fleet}:master:%s", c->conf.prefix, id)
                               : xasprintf("%sqpool:master:%s", c->conf.prefix, id);
}

void fleet_id(char *buf, size_t n)
{
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(buf, n, "%s:%d", host, (int)getpid());
}

static int run(rconn_t *c, const char *body, int numkeys, int argc, const char **argv, redisReply **out)
{
    rscript_t s;
    rscript_init(&s, body);
    if (rconn_ensure(c) < 0) return -1;
    redisReply *r;
    if (rconn_script(c, &s, numkeys, argc, argv, NULL, -1, -1, &r) != RC_OK) return -1;
    if (r->type == REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        return -1;
    }
    if (out)
        *out = r;
    else
        freeReplyObject(r);
    return 0;
}

int fleet_heartbeat(rconn_t *c, const char *id, const char *record_json, int64_t ttl_ms, int64_t *redis_now_ms)
{
    char *index = index_key(c);
    char *key = record_key(c, id);
    char ttl[32];
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    const char *argv[] = {index, key, id, record_json, ttl};
    redisReply *r = NULL;
    int rv = run(c, HEARTBEAT_LUA, 2, 5, argv, &r);
    if (rv == 0) {
        if (r->type == REDIS_REPLY_INTEGER) *redis_now_ms = r->integer;
        freeReplyObject(r);
    }
    free(index);
    free(key);
    return rv;
}

int fleet_goodbye(rconn_t *c, const char *id)
{
    char *index = index_key(c);
    char *key = record_key(c, id);
    const char *argv[] = {index, key, id};
    int rv = run(c, GOODBYE_LUA, 2, 3, argv, NULL);
    free(index);
    free(key);
    return rv;
}

cJSON *fleet_list(rconn_t *c)
{
    char *index = index_key(c);
    char *prefix = record_key(c, "");
    const char *argv[] = {index, prefix};
    redisReply *r = NULL;
    int rv = run(c, LIST_LUA, 1, 2, argv, &r);
    free(index);
    free(prefix);
    if (rv < 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "masters");
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_INTEGER)
        cJSON_AddNumberToObject(o, "now_ms", (double)r->element[0]->integer);
    for (size_t i = 1; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_STRING) continue;
        cJSON *rec = cJSON_ParseWithLength(e->str, e->len);
        if (cJSON_IsObject(rec))
            cJSON_AddItemToArray(arr, rec);
        else
            cJSON_Delete(rec); /* not ours: skip it */
    }
    freeReplyObject(r);
    return o;
}

static double json_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* One pool's fleet budget over the masters: {"pool", "budget", "held",
 * "want", "masters", "waiting"}, found or added in arr. */
static cJSON *budget_entry(cJSON *arr, const char *pool)
{
    cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "pool");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, pool)) return e;
    }
    e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "pool", pool);
    cJSON_AddNumberToObject(e, "budget", 0);
    cJSON_AddNumberToObject(e, "held", 0);
    cJSON_AddNumberToObject(e, "want", 0);
    cJSON_AddNumberToObject(e, "masters", 0);
    cJSON_AddNumberToObject(e, "waiting", 0);
    cJSON_AddItemToArray(arr, e);
    return e;
}

static void add_to(cJSON *o, const char *k, double v)
{
    cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsNumber(n)) cJSON_SetNumberValue(n, n->valuedouble + v);
}

/* "budgets": each fleet-budgeted pool's budget (the smallest a master
 * reports), slots held and wanted, masters and how many wait for budget. */
static void add_budgets(cJSON *fleet)
{
    cJSON *arr = cJSON_AddArrayToObject(fleet, "budgets");
    const cJSON *m, *p;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(fleet, "masters")) {
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "pools")) {
            const cJSON *b = cJSON_GetObjectItemCaseSensitive(p, "fleet_budget");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
            if (!cJSON_IsObject(b) || !cJSON_IsString(name)) continue;
            cJSON *e = budget_entry(arr, name->valuestring);
            double budget = json_num(b, "budget"), was = json_num(e, "budget");
            if (!was || budget < was) cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "budget"), budget);
            add_to(e, "held", json_num(b, "held"));
            add_to(e, "want", json_num(b, "want"));
            add_to(e, "masters", 1);
            add_to(e, "waiting", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "waiting")));
        }
    }
}

/* Totals over the masters, added to the reply. */
void fleet_add_totals(cJSON *fleet)
{
    double workers = 0, busy = 0, paused = 0;
    int n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(fleet, "masters")) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(m, "workers");
        workers += json_num(w, "total");
        busy += json_num(w, "busy");
        paused += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "paused"));
        n++;
    }
    cJSON *t = cJSON_AddObjectToObject(fleet, "totals");
    cJSON_AddNumberToObject(t, "masters", n);
    cJSON_AddNumberToObject(t, "paused_masters", paused);
    cJSON_AddNumberToObject(t, "workers", workers);
    cJSON_AddNumberToObject(t, "busy", busy);
    add_budgets(fleet);
}

/* ------------------------------------------------------------ running now */

static double num_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* A row of fleet_running: the job a child of a pool of a master runs. */
static cJSON *running_row(const cJSON *master, const cJSON *pool, const cJSON *child, double since_ms, bool own)
{
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(child, "job");
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "host", str_of(master, "host"));
    cJSON_AddStringToObject(r, "master", str_of(master, "id"));
    cJSON_AddStringToObject(r, "pool", str_of(pool, "name"));
    cJSON_AddNumberToObject(r, "pid", num_of(child, "pid"));
    const char *keys[] = {"uuid", "id", "name", "queue"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) cJSON_AddStringToObject(r, keys[i], str_of(job, keys[i]));
    cJSON_AddNumberToObject(r, "attempt", num_of(job, "attempt"));
    double age = num_of(job, "running_ms") + since_ms, timeout = num_of(job, "timeout_s");
    cJSON_AddNumberToObject(r, "age_ms", age);
    cJSON_AddNumberToObject(r, "timeout_s", timeout);
    cJSON_AddBoolToObject(r, "past_timeout", timeout > 0 && age > timeout * 1000);
    cJSON_AddBoolToObject(r, "own", own);
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(job, "tags");
    cJSON_AddItemToObject(r, "tags", cJSON_IsArray(tags) ? cJSON_Duplicate(tags, true) : cJSON_CreateArray());
    return r;
}

static int oldest_first(const void *a, const void *b)
{
    double x = num_of(*(cJSON *const *)a, "age_ms"), y = num_of(*(cJSON *const *)b, "age_ms");
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The rows of one master's record, into v (grown). */
static void running_of(const cJSON *master, double now_ms, const char *own_id, cJSON ***v, size_t *n, size_t *cap)
{
    double since = now_ms - num_of(master, "written_ms");
    if (since < 0 || !num_of(master, "written_ms")) since = 0;
    if (since > 60000) since = 60000;
    bool own = own_id && !strcmp(str_of(master, "id"), own_id);
    const cJSON *pool, *child;
    cJSON_ArrayForEach(pool, cJSON_GetObjectItemCaseSensitive(master, "pools")) {
        cJSON_ArrayForEach(child, cJSON_GetObjectItemCaseSensitive(pool, "children")) {
            if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(child, "job"))) continue;
            if (*n == *cap) *v = xrealloc(*v, (*cap = *cap * 2 + 8) * sizeof **v);
            (*v)[(*n)++] = running_row(master, pool, child, since, own);
        }
    }
}

cJSON *fleet_running(const cJSON *fleet, const char *own_id)
{
    double now = num_of(fleet, "now_ms");
    cJSON **v = NULL;
    size_t n = 0, cap = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(fleet, "masters")) running_of(m, now, own_id, &v, &n, &cap);
    if (n) qsort(v, n, sizeof *v, oldest_first);
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(arr, v[i]);
    free(v);
    return arr;
}
