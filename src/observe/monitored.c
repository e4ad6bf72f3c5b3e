/*
 * monitored.c - monitored tags in Redis (see monitored.h).
 */
#include "observe/monitored.h"
#include "observe/jobhist.h"
#include "observe/jobwatch.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *mkey(const rconn_t *c, const char *what, const char *tag)
{
    return xasprintf("%sqpool:{qpool-jobs}:%s%s", c->conf.prefix, what, tag ? tag : "");
}

bool monitored_tag_ok(const char *tag)
{
    size_t n = tag ? strlen(tag) : 0;
    if (!n || n > JOBHIST_TAG_MAX || !utf8_valid(tag, n)) return false;
    for (const unsigned char *c = (const unsigned char *)tag; *c; c++)
        if (*c < 0x20 || *c == 0x7f) return false;
    return true;
}

/* KEYS: the set. ARGV: the tag lists' key prefix, max, ttl ms, then
 * (tags '\n'-joined, record) pairs, oldest first. The lists are in the
 * set's hash tag (the prefix holds it), so one node has them all. Each
 * write goes through pcall: a tag's list Redis refuses (WRONGTYPE, OOM)
 * is counted, not raised, so the rest of the batch is written (Redis does
 * not roll a script back, and a batch run again after its token was set
 * writes nothing). Returns the records written, or {written, refused,
 * first error} when some were refused. */
static const char ADD_LUA[] =
    "local c = redis.pcall('scard', KEYS[1])\n"
    "if type(c) ~= 'number' or c == 0 then return 0 end\n"
    "local pre, max, ttl, n, f, e = ARGV[1], tonumber(ARGV[2]), ARGV[3], 0, 0, nil\n"
    "for i = 4, #ARGV, 2 do\n"
    "  for t in string.gmatch(ARGV[i], '[^\\n]+') do\n"
    "    if redis.call('sismember', KEYS[1], t) == 1 then\n"
    "      local k = pre .. t\n"
    "      local r = redis.pcall('lpush', k, ARGV[i + 1])\n"
    "      if type(r) == 'table' and r.err then\n"
    "        f, e = f + 1, e or r.err\n"
    "      else\n"
    "        redis.pcall('ltrim', k, 0, max - 1)\n"
    "        redis.pcall('pexpire', k, ttl)\n"
    "        n = n + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if f > 0 then return {n, f, e} end\n"
    "return n\n";

static rscript_t add_script;

/* The same for a batch of the watched queue (jobwatch.h), run once per
 * token: KEYS[2] is the token's key, set for JOBWATCH_TOKEN_MS_STR by the
 * first run; a second run of the token (its reply was lost) writes
 * nothing. */
static const char FORWARD_LUA[] =
    "if not redis.call('set', KEYS[2], '1', 'NX', 'PX', " JOBWATCH_TOKEN_MS_STR ") then return -1 end\n";

static rscript_t forward_script;

/* A record's tags '\n'-joined, and the record without its payload; false
 * when it has no tags (the bytes say so before any parsing). */
static bool tagged_record(const char *rec, char **tags, char **slim)
{
    if (strstr(rec, "\"tags\":[]") || !strstr(rec, "\"tags\":[")) return false;
    cJSON *o = cJSON_Parse(rec);
    const cJSON *t, *arr = cJSON_GetObjectItemCaseSensitive(o, "tags");
    sbuf_t b;
    sbuf_init(&b);
    cJSON_ArrayForEach(t, arr) {
        if (!cJSON_IsString(t) || strchr(t->valuestring, '\n')) continue;
        if (b.len) sbuf_append(&b, "\n", 1);
        sbuf_append(&b, t->valuestring, strlen(t->valuestring));
    }
    if (!b.len) {
        sbuf_free(&b);
        cJSON_Delete(o);
        return false;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "payload");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "payload_truncated");
    *tags = sbuf_steal(&b);
    *slim = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return true;
}

int monitored_add_jobs(rconn_t *c, const char *const *recs, int n, int max, int64_t retention_s)
{
    int argc = 5, k = 0;
    char **argv = xcalloc((size_t)(5 + 2 * n), sizeof *argv);
    argv[k++] = mkey(c, "monitored", NULL);
    argv[k++] = mkey(c, "tag:", NULL);
    argv[k++] = xasprintf("%d", max);
    argv[k++] = xasprintf("%lld", (long long)retention_s * 1000);
    for (int i = 0; i < n; i++)
        if (tagged_record(recs[i], &argv[k], &argv[k + 1])) k += 2;
    argc = k;
    int rv = 0;
    if (argc > 4) {
        if (!add_script.body) rscript_init(&add_script, ADD_LUA);
        redisReply *r = NULL;
        rv = rconn_ensure(c) == 0 && rconn_script(c, &add_script, 1, argc, (const char **)argv, NULL, -1, -1, &r) == RC_OK
                 ? 0
                 : -1;
        if (r) freeReplyObject(r);
    }
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
    return rv;
}

bool monitored_error_transient(const char *err)
{
    static const char *const codes[] = {"LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", NULL};
    for (int i = 0; err && codes[i]; i++) {
        size_t n = strlen(codes[i]);
        if (!strncmp(err, codes[i], n) && (err[n] == ' ' || !err[n])) return true;
    }
    return false;
}

/* The script's answer: 0 (written, logged when some of it was refused or
 * the token had run already) or -2 (an error, logged), -3 for an error
 * that passes (Redis loading, busy, a failover: the batch waits; the
 * caller logs it, in err). */
static int add_answer(const redisReply *r, char *err, size_t errn)
{
    if (r->type == REDIS_REPLY_ERROR && monitored_error_transient(r->str)) {
        snprintf(err, errn, "%s", r->str);
        return -3;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        log_warn("Redis refused the watched tags' records: %s", r->str);
        return -2;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == -1)
        log_info("a batch of watched records sent again (its reply was lost) had been written: not written twice");
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[1]->type == REDIS_REPLY_INTEGER)
        log_warn("%lld records of watched tags not written (Redis refused their tag's list: %s)",
                 (long long)r->element[1]->integer,
                 r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "?");
    return 0;
}

/* argv (argc strings) through s, one call; 0, -1 or -2 (add_answer). */
static int run_add(rconn_t *c, rscript_t *s, const char *body, int nkeys, int argc, char **argv, char *err,
                   size_t errn)
{
    if (!s->body) rscript_init(s, body);
    redisReply *r = NULL;
    int rv = rconn_ensure(c) == 0 && rconn_script(c, s, nkeys, argc, (const char **)argv, NULL, -1, -1, &r) == RC_OK
                 ? 0
                 : -1;
    if (rv == 0 && r) rv = add_answer(r, err, errn);
    if (r) freeReplyObject(r);
    return rv;
}

int monitored_forward(rconn_t *c, const char *const *tags, const char *const *recs, int n, int max,
                      int64_t retention_s, const char *token, char *err, size_t errn)
{
    static char *body;
    if (errn) err[0] = '\0';
    if (!body) body = xasprintf("%s%s", FORWARD_LUA, ADD_LUA);
    int k = 0;
    char **argv = xcalloc((size_t)(6 + 2 * n), sizeof *argv);
    argv[k++] = mkey(c, "monitored", NULL);
    argv[k++] = mkey(c, "mtoken:", token);
    argv[k++] = mkey(c, "tag:", NULL);
    argv[k++] = xasprintf("%d", max);
    argv[k++] = xasprintf("%lld", (long long)retention_s * 1000);
    for (int i = 0; i < n; i++) {
        argv[k++] = xstrdup(tags[i]);
        argv[k++] = xstrdup(recs[i]);
    }
    int rv = n ? run_add(c, &forward_script, body, 2, k, argv, err, errn) : 0;
    for (int i = 0; i < k; i++) free(argv[i]);
    free(argv);
    return rv;
}

char *monitored_set_key(const rconn_t *c)
{
    return mkey(c, "monitored", NULL);
}

static int by_tag(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int monitored_tags_of(const redisReply *r, char ***out)
{
    if (!r || r->type != REDIS_REPLY_ARRAY) return -1;
    int n = 0;
    *out = xcalloc(r->elements + 1, sizeof **out);
    for (size_t i = 0; i < r->elements && n < MONITORED_MAX; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING) (*out)[n++] = xstrndup(r->element[i]->str, r->element[i]->len);
    qsort(*out, (size_t)n, sizeof **out, by_tag);
    return n;
}

/* The set's members, sorted (caller frees each and the array); -1 when
 * Redis is unavailable. */
static int members(rconn_t *c, char ***out)
{
    char *key = mkey(c, "monitored", NULL);
    const char *argv[] = {"SMEMBERS", key};
    redisReply *r = rconn_ensure(c) == 0 ? rconn_call(c, 2, argv, NULL) : NULL;
    free(key);
    int n = monitored_tags_of(r, out);
    if (r) freeReplyObject(r);
    return n;
}

uint64_t monitored_generation(rconn_t *c)
{
    char **tags = NULL;
    int n = members(c, &tags);
    if (n < 0) return JOBWATCH_GEN_NONE;
    uint64_t gen = jobwatch_gen_of(tags, n);
    for (int i = 0; i < n; i++) free(tags[i]);
    free(tags);
    return gen;
}

cJSON *monitored_list(rconn_t *c)
{
    char **tags = NULL;
    int n = members(c, &tags);
    if (n < 0) return NULL;
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "tags");
    for (int i = 0; i < n; i++) {
        char *key = mkey(c, "tag:", tags[i]);
        const char *argv[] = {"LLEN", key};
        redisReply *r = rconn_call(c, 2, argv, NULL);
        free(key);
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "tag", tags[i]);
        cJSON_AddNumberToObject(t, "jobs", r && r->type == REDIS_REPLY_INTEGER ? (double)r->integer : 0);
        cJSON_AddItemToArray(arr, t);
        if (r) freeReplyObject(r);
        free(tags[i]);
    }
    free(tags);
    return o;
}

static long long call_int(rconn_t *c, int argc, const char **argv)
{
    redisReply *r = rconn_call(c, argc, argv, NULL);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    return v;
}

int monitored_set(rconn_t *c, const char *tag, bool add)
{
    if (rconn_ensure(c) < 0) return -1;
    char *set = mkey(c, "monitored", NULL), *list = mkey(c, "tag:", tag);
    const char *is[] = {"SISMEMBER", set, tag}, *card[] = {"SCARD", set};
    long long member = call_int(c, 3, is), count = member < 0 ? -1 : call_int(c, 2, card);
    int rv = -1;
    if (member >= 0 && count >= 0) {
        if (add && !member && count >= MONITORED_MAX)
            rv = -2;
        else if (add) {
            const char *argv[] = {"SADD", set, tag};
            rv = (int)call_int(c, 3, argv);
        } else {
            const char *argv[] = {"SREM", set, tag}, *del[] = {"DEL", list};
            rv = (int)call_int(c, 3, argv);
            if (rv >= 0 && call_int(c, 2, del) < 0) rv = -1;
        }
    }
    free(set);
    free(list);
    return rv < 0 && rv != -2 ? -1 : rv;
}

cJSON *monitored_jobs(rconn_t *c, const char *tag, const job_filter_t *f)
{
    char *key = mkey(c, "tag:", tag);
    cJSON *out = history_jobs_in(c, key, f);
    free(key);
    return out;
}
