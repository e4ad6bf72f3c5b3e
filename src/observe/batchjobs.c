/*
 * batchjobs.c - a batch's jobs in Redis (see batchjobs.h).
 */
#include "observe/batchjobs.h"
#include "observe/jobhist.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool batchjobs_note_due(batchjobs_note_t *n, const char *err, int64_t now, int64_t every)
{
    bool same = n->logged_ms && !strncmp(n->err, err, sizeof n->err - 1);
    if (same && now - n->logged_ms < every) return false;
    n->logged_ms = now;
    snprintf(n->err, sizeof n->err, "%s", err);
    return true;
}

static char *bkey(const rconn_t *c, const char *id)
{
    return xasprintf("%sqpool:{qpool-jobs}:batch:%s", c->conf.prefix, id ? id : "");
}

/* KEYS: the recent list (for the node: the batch lists share its hash
 * tag), the batches' index. ARGV: the batch lists' key prefix, keep, ttl
 * ms, batches kept, then (batch id, entry) pairs, oldest first. An entry
 * Redis refuses (WRONGTYPE, OOM) is skipped, not raised, so the others are
 * written; the reply is {entries refused, the first one's error, entries
 * written whose batch the index did not take, its first error}. The index
 * scores each batch by its last write (Redis's clock); past the batches
 * kept, the oldest go, with their lists (UNLINK: freed apart), at most
 * BATCHJOBS_EVICT more than this call added, so a lowered batch_jobs_keep
 * is reached over several calls, never in one long one. */
static const char ADD_LUA[] =
    "local pre, keep, ttl, nb, seen = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), {}\n"
    "local lost, why, unidx, iwhy, added = 0, '', 0, '', 0\n"
    "local function err(r, w) if w == '' and type(r) == 'table' and r.err then return tostring(r.err) end return w end\n"
    "for i = 6, #ARGV, 2 do\n"
    "  local r = redis.pcall('lpush', pre .. ARGV[i], ARGV[i + 1])\n"
    "  if type(r) == 'number' then seen[ARGV[i]] = (seen[ARGV[i]] or 0) + 1\n"
    "  else lost = lost + 1; why = err(r, why) end\n"
    "end\n"
    "local t = redis.call('time')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "for id, k in pairs(seen) do\n"
    "  redis.pcall('ltrim', pre .. id, 0, keep - 1)\n"
    "  redis.pcall('pexpire', pre .. id, ttl)\n"
    "  local r = redis.pcall('zadd', KEYS[2], now, id)\n"
    "  if type(r) == 'number' then added = added + 1 else unidx = unidx + k; iwhy = err(r, iwhy) end\n"
    "end\n"
    "local n = redis.pcall('zcard', KEYS[2])\n"
    "if type(n) ~= 'number' then iwhy = err(n, iwhy)\n"
    "elseif n > nb then\n"
    "  local cut = math.min(n - nb, tonumber(ARGV[5]) + added)\n"
    "  local old = redis.pcall('zrange', KEYS[2], 0, cut - 1)\n"
    "  if type(old) == 'table' and not old.err then\n"
    "    for _, id in ipairs(old) do redis.pcall('unlink', pre .. id) end\n"
    "    redis.pcall('zremrangebyrank', KEYS[2], 0, cut - 1)\n"
    "  else iwhy = err(old, iwhy) end\n"
    "end\n"
    "redis.pcall('pexpire', KEYS[2], ttl)\n"
    "return {lost, why, unidx, iwhy}\n";

static rscript_t add_script;

static const char *const KEPT[] = {"uuid", "id", "name", "queue", "pool", "host", "attempt", "outcome",
                                   "runtime_ms", "started_at", "finished_at", NULL};

bool batchjobs_entry(const char *rec, char **batch, char **entry)
{
    if (!strstr(rec, "\"batch\":\"")) return false;
    cJSON *o = cJSON_Parse(rec);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "batch"), *out = cJSON_GetObjectItemCaseSensitive(o, "outcome");
    bool ok = cJSON_IsString(b) && jobhist_batch_ok(b->valuestring) && cJSON_IsString(out) &&
              strcmp(out->valuestring, "released");
    if (ok) {
        cJSON *e = cJSON_CreateObject();
        for (int i = 0; KEPT[i]; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, KEPT[i]);
            if (v) cJSON_AddItemToObject(e, KEPT[i], cJSON_Duplicate(v, true));
        }
        *batch = xstrdup(b->valuestring);
        *entry = cJSON_PrintUnformatted(e);
        cJSON_Delete(e);
    }
    cJSON_Delete(o);
    return ok;
}

static void reply_text(char *to, const redisReply *r, const char *none)
{
    snprintf(to, BATCHJOBS_ERRN, "%s", r->type == REDIS_REPLY_STRING && r->len ? r->str : none);
}

/* What the script's reply says of entries sent: their number, or minus
 * those lost, the causes in f. */
static int add_outcome(const rconn_t *c, const redisReply *r, int entries, batchjobs_fail_t *f)
{
    if (!r || r->type == REDIS_REPLY_ERROR) {
        const char *why = r ? r->str : c->last_error[0] ? c->last_error : "not reached";
        snprintf(f->err, sizeof f->err, "%.*s", (int)sizeof f->err - 1, why); /* cut: batchjobs_note_due */
        return -entries;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) return entries;
    for (size_t i = 0; i < 4; i += 2)
        if (r->element[i]->type != REDIS_REPLY_INTEGER) return entries;
    long long lost = r->element[0]->integer, unidx = r->element[2]->integer;
    reply_text(f->ierr, r->element[3], unidx > 0 ? "refused" : "");
    f->unindexed = (int)(unidx < 0 ? 0 : unidx < entries ? unidx : entries);
    if (lost <= 0) return entries;
    reply_text(f->err, r->element[1], "refused");
    return -(int)(lost < entries ? lost : entries);
}

int batchjobs_add(rconn_t *c, const char *const *recs, int n, int keep, int batches, int64_t retention_s,
                  batchjobs_fail_t *f)
{
    memset(f, 0, sizeof *f);
    if (batches <= 0) return 0; /* off: no list written */
    char **argv = xcalloc((size_t)(7 + 2 * n), sizeof *argv);
    int k = 0;
    argv[k++] = xasprintf("%sqpool:{qpool-jobs}:list", c->conf.prefix);
    argv[k++] = xasprintf("%sqpool:{qpool-jobs}:batches", c->conf.prefix);
    argv[k++] = bkey(c, NULL);
    argv[k++] = xasprintf("%d", keep);
    argv[k++] = xasprintf("%lld", (long long)retention_s * 1000);
    argv[k++] = xasprintf("%d", batches);
    argv[k++] = xasprintf("%d", BATCHJOBS_EVICT);
    for (int i = 0; i < n; i++)
        if (batchjobs_entry(recs[i], &argv[k], &argv[k + 1])) k += 2;
    int rv = 0;
    if (k > 7) {
        if (!add_script.body) rscript_init(&add_script, ADD_LUA);
        redisReply *r = NULL;
        bool sent = rconn_ensure(c) == 0 && rconn_script(c, &add_script, 2, k, (const char **)argv, NULL, -1, -1,
                                                         &r) == RC_OK;
        rv = add_outcome(c, sent ? r : NULL, (k - 7) / 2, f);
        if (r) freeReplyObject(r);
    }
    for (int i = 0; i < k; i++) free(argv[i]);
    free(argv);
    return rv;
}

static double finished_of(const cJSON *o)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "finished_at");
    return cJSON_IsNumber(f) ? f->valuedouble : 0;
}

static int newest_first(const void *a, const void *b)
{
    double x = finished_of(*(cJSON *const *)a), y = finished_of(*(cJSON *const *)b);
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The entries of an LRANGE reply, those that parse, into jobs, by when
 * they finished, newest first (one write holds several workers' records,
 * interleaved). */
static void take_entries(const redisReply *r, cJSON *jobs)
{
    cJSON **v = xcalloc(r->elements + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        cJSON *o = e->type == REDIS_REPLY_STRING ? cJSON_ParseWithLength(e->str, e->len) : NULL;
        if (cJSON_IsObject(o))
            v[n++] = o;
        else
            cJSON_Delete(o);
    }
    if (n) qsort(v, n, sizeof *v, newest_first);
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(jobs, v[i]);
    free(v);
}

cJSON *batchjobs_read(rconn_t *c, const char *id, int limit)
{
    if (!jobhist_batch_ok(id) || rconn_ensure(c) < 0) return NULL;
    if (limit < 1 || limit > BATCHJOBS_KEEP) limit = BATCHJOBS_KEEP;
    char *key = bkey(c, id), to[16];
    snprintf(to, sizeof to, "%d", limit - 1);
    const char *range[] = {"LRANGE", key, "0", to}, *len[] = {"LLEN", key};
    redisReply *r = rconn_call(c, 4, range, NULL), *l = r ? rconn_call(c, 2, len, NULL) : NULL;
    free(key);
    cJSON *out = NULL;
    if (r && r->type == REDIS_REPLY_ARRAY && l && l->type == REDIS_REPLY_INTEGER) {
        out = cJSON_CreateObject();
        take_entries(r, cJSON_AddArrayToObject(out, "jobs"));
        cJSON_AddNumberToObject(out, "kept", (double)l->integer);
    }
    if (r) freeReplyObject(r);
    if (l) freeReplyObject(l);
    return out;
}
