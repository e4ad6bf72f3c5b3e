/*
 * failed.c - reading qpool's failed store (see failed.h).
 */
#include "redis/failed.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "core/util.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void frec_free(frec_t *f)
{
    FREE_ALL(f->uuid, f->connection, f->queue, f->payload, f->exception, f->pool, f->host);
    memset(f, 0, sizeof *f);
}

static bool frec_from(const redisReply *r, frec_t *f)
{
    memset(f, 0, sizeof *f);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2) return false;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const char *k = r->element[i]->str;
        const redisReply *v = r->element[i + 1];
        if (!k || v->type != REDIS_REPLY_STRING) continue;
        char *s = xstrndup(v->str, v->len);
        if (!strcmp(k, "uuid")) free(f->uuid), f->uuid = s;
        else if (!strcmp(k, "connection")) free(f->connection), f->connection = s;
        else if (!strcmp(k, "queue")) free(f->queue), f->queue = s;
        else if (!strcmp(k, "payload")) free(f->payload), f->payload = s, f->payload_len = v->len;
        else if (!strcmp(k, "exception")) free(f->exception), f->exception = s;
        else if (!strcmp(k, "pool")) free(f->pool), f->pool = s;
        else if (!strcmp(k, "host")) free(f->host), f->host = s;
        else if (!strcmp(k, "failed_at")) f->failed_at = atoll(s), free(s);
        else free(s);
    }
    if (f->uuid && f->queue && f->payload) return true;
    frec_free(f);
    return false;
}

/* ---- Redis Cluster: every key of a queue's failures is in the queue's
 * slot: the index <prefix>qpool:failed:<queue> and the records
 * <index>:job:<uuid>. The set of queues with failures is not kept (it
 * would be in another slot, and a worker's fail script keeps to one):
 * instead the master adds every queue its pools list (once per connect) to
 * <prefix>qpool:{qpool-failed}:queues (failed_note_queues), and readers
 * look in those and in the queues configured here. */

static char **cluster_queues; /* the configured queues of the connection, NULL-terminated */

void failed_use_queues(char *const *queues)
{
    free_strv(cluster_queues);
    cluster_queues = queues ? strv_dup(queues) : NULL;
}

static char *noted_key(const rconn_t *c)
{
    return xasprintf("%sqpool:{qpool-failed}:queues", c->conf.prefix);
}

int failed_note_queues(rconn_t *c, const char *const *queues, int n)
{
    if (!rconn_is_cluster(c) || n <= 0) return 0;
    const char **av = xcalloc((size_t)n + 2, sizeof *av);
    char *key = noted_key(c);
    av[0] = "SADD";
    av[1] = key;
    for (int i = 0; i < n; i++) av[2 + i] = queues[i];
    redisReply *r = rconn_call(c, n + 2, av, NULL);
    int rv = r && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    if (r) freeReplyObject(r);
    free(key);
    free(av);
    return rv;
}

/* The key of a record: where the queue's failures are on a cluster. */
static char *job_key(rconn_t *c, const char *queue, const char *uuid)
{
    return failed_job_key(c, queue, uuid);
}

char *failed_job_key(rconn_t *c, const char *queue, const char *uuid)
{
    if (!rconn_is_cluster(c)) return xasprintf("%sqpool:failed:job:%s", c->conf.prefix, uuid);
    return xasprintf("%sqpool:failed:%s:job:%s", c->conf.prefix, queue, uuid);
}

/* On a cluster: the queue (noted or configured) whose index holds uuid
 * (caller frees), or NULL. */
static char *cluster_queue_of(rconn_t *c, const char *uuid)
{
    redisReply *qs = failed_queues(c);
    if (!qs || qs->type != REDIS_REPLY_ARRAY) {
        if (qs) freeReplyObject(qs);
        return NULL;
    }
    /* one ZSCORE per queue, pipelined: one round trip */
    for (size_t i = 0; i < qs->elements; i++) {
        char *idx = xasprintf("%sqpool:failed:%s", c->conf.prefix, qs->element[i]->str ? qs->element[i]->str : "");
        const char *av[] = {"ZSCORE", idx, uuid};
        rconn_append(c, 3, av, NULL);
        free(idx);
    }
    char *found = NULL;
    for (size_t i = 0; i < qs->elements; i++) {
        redisReply *r;
        if (rconn_read(c, -1, -1, &r) != RC_OK) break; /* dropped: the rest went with it */
        if (!found && r->type == REDIS_REPLY_STRING && qs->element[i]->type == REDIS_REPLY_STRING)
            found = xstrdup(qs->element[i]->str);
        freeReplyObject(r);
    }
    freeReplyObject(qs);
    return found;
}

/* The record of uuid, kept for queue (ignored without a cluster). */
static int get_in(rconn_t *c, const char *queue, const char *uuid, frec_t *f)
{
    memset(f, 0, sizeof *f);
    char *key = job_key(c, queue, uuid);
    const char *av[] = {"HGETALL", key};
    redisReply *r = rconn_call(c, 2, av, NULL);
    free(key);
    bool ok = r && frec_from(r, f);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

int failed_get(rconn_t *c, const char *uuid, frec_t *f)
{
    memset(f, 0, sizeof *f);
    if (!rconn_is_cluster(c)) return get_in(c, "", uuid, f);
    char *queue = cluster_queue_of(c, uuid);
    int rv = queue ? get_in(c, queue, uuid, f) : -1;
    free(queue);
    return rv;
}

redisReply *failed_queue_uuids(rconn_t *c, const char *queue, long limit)
{
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, queue);
    char stop[24];
    snprintf(stop, sizeof stop, "%ld", limit > 0 ? limit - 1 : -1);
    const char *av[] = {"ZREVRANGE", k.failed, "0", stop};
    redisReply *r = rconn_call(c, 4, av, NULL);
    qkeys_free(&k);
    return r;
}

static bool reply_has(const redisReply *r, const char *s)
{
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING && !strcmp(r->element[i]->str, s)) return true;
    return false;
}

/* The queues the master noted (an SMEMBERS reply), with the configured
 * ones it lacks appended; NULL when Redis failed. */
static redisReply *cluster_failed_queues(rconn_t *c)
{
    char *key = noted_key(c);
    const char *av[] = {"SMEMBERS", key};
    redisReply *r = rconn_call(c, 2, av, NULL);
    free(key);
    if (!r || r->type != REDIS_REPLY_ARRAY) return r;
    size_t n = cluster_queues ? strv_len(cluster_queues) : 0;
    r->element = xrealloc(r->element, sizeof *r->element * (r->elements + n + 1));
    for (size_t i = 0; i < n; i++) {
        if (reply_has(r, cluster_queues[i])) continue;
        redisReply *e = xcalloc(1, sizeof *e);
        e->type = REDIS_REPLY_STRING;
        e->str = xstrdup(cluster_queues[i]);
        e->len = strlen(e->str);
        r->element[r->elements++] = e;
    }
    return r;
}

redisReply *failed_queues(rconn_t *c)
{
    if (rconn_is_cluster(c)) return cluster_failed_queues(c);
    char *key = xasprintf("%sqpool:failed:queues", c->conf.prefix);
    const char *av[] = {"SMEMBERS", key};
    redisReply *r = rconn_call(c, 2, av, NULL);
    free(key);
    return r;
}

/* The payload as the store keeps it (its raw bytes: a retry pushes them
 * back as they were). JSON text must be valid UTF-8: a payload that is not
 * is shown repaired (U+FFFD) and, so that nothing is lost, also as
 * payload_base64, its exact bytes. */
static void add_payload(cJSON *o, const frec_t *f)
{
    if (utf8_valid(f->payload, f->payload_len)) {
        cJSON_AddStringToObject(o, "payload", f->payload);
        return;
    }
    char *fixed = utf8_repair(f->payload, f->payload_len, NULL);
    cJSON_AddStringToObject(o, "payload", fixed);
    free(fixed);
    unsigned char *b64 = xmalloc(4 * ((f->payload_len + 2) / 3) + 1);
    EVP_EncodeBlock(b64, (const unsigned char *)f->payload, (int)f->payload_len);
    cJSON_AddStringToObject(o, "payload_base64", (const char *)b64);
    free(b64);
}

cJSON *failed_json(const frec_t *f, bool with_payload)
{
    char when[32];
    utc_text((double)f->failed_at, when, sizeof when);
    job_payload_t jp;
    char err[64];
    bool parsed = payload_parse(f->payload, f->payload_len, &jp, err, sizeof err) == 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "uuid", f->uuid);
    cJSON_AddStringToObject(o, "connection", f->connection ? f->connection : "");
    cJSON_AddStringToObject(o, "queue", f->queue);
    cJSON_AddStringToObject(o, "name", parsed ? payload_name(&jp) : "(invalid payload)");
    cJSON_AddNumberToObject(o, "failed_at", (double)f->failed_at);
    cJSON_AddStringToObject(o, "failed_at_utc", when);
    cJSON_AddStringToObject(o, "exception", f->exception ? f->exception : "");
    cJSON_AddStringToObject(o, "pool", f->pool ? f->pool : "");
    cJSON_AddStringToObject(o, "host", f->host ? f->host : "");
    if (with_payload) add_payload(o, f);
    if (parsed) payload_free(&jp);
    return o;
}

static bool add_queue(rconn_t *c, const char *queue, long limit, bool with_payload, cJSON *arr)
{
    redisReply *u = failed_queue_uuids(c, queue, limit);
    if (!u || u->type != REDIS_REPLY_ARRAY) {
        if (u) freeReplyObject(u);
        return false;
    }
    for (size_t j = 0; j < u->elements; j++) {
        frec_t f;
        if (u->element[j]->type != REDIS_REPLY_STRING || get_in(c, queue, u->element[j]->str, &f) < 0) continue;
        cJSON_AddItemToArray(arr, failed_json(&f, with_payload));
        frec_free(&f);
    }
    freeReplyObject(u);
    return true;
}

cJSON *failed_list(rconn_t *c, const char *queue, long limit, bool with_payload)
{
    cJSON *arr = cJSON_CreateArray();
    if (queue) {
        if (add_queue(c, queue, limit, with_payload, arr)) return arr;
        cJSON_Delete(arr);
        return NULL;
    }
    redisReply *qs = failed_queues(c);
    bool ok = qs && qs->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < qs->elements; i++)
        if (qs->element[i]->type == REDIS_REPLY_STRING) ok = add_queue(c, qs->element[i]->str, limit, with_payload, arr);
    if (qs) freeReplyObject(qs);
    if (ok) return arr;
    cJSON_Delete(arr);
    return NULL;
}

/* ------------------------------------------------------------ retry, forget */

/* KEYS: ready, notify, job hash, queue index, queue set. ARGV: payload, uuid, queue.
 * Pushed back and out of the store in one step: never both, never neither. */
static const char RETRY_LUA[] =
    "if redis.call('exists', KEYS[3]) == 0 then return 0 end\n"
    "redis.call('rpush', KEYS[1], ARGV[1])\n"
    "redis.call('rpush', KEYS[2], 1)\n"
    "redis.call('del', KEYS[3])\n"
    "redis.call('zrem', KEYS[4], ARGV[2])\n"
    "if redis.call('zcard', KEYS[4]) == 0 then redis.call('srem', KEYS[5], ARGV[3]) end\n"
    "return 1";

/* KEYS: job hash, queue index, queue set. ARGV: uuid, queue. */
static const char FORGET_LUA[] =
    "local n = redis.call('del', KEYS[1])\n"
    "redis.call('zrem', KEYS[2], ARGV[1])\n"
    "if redis.call('zcard', KEYS[2]) == 0 then redis.call('srem', KEYS[3], ARGV[2]) end\n"
    "return n";

static rscript_t retry_script, forget_script;

/* The payload to push back: attempts 0, retryUntil's window from now (as
 * queue:retry; *kept when the payload cannot say), due now. */
static char *retry_payload(const frec_t *f, bool *kept, size_t *len)
{
    char *p = payload_set_attempts(f->payload, f->payload_len, 0, len);
    if (!p) {
        /* not a JSON object: back as it is (a worker moves it aside again unless fixed) */
        *len = f->payload_len;
        return xstrndup(f->payload, f->payload_len);
    }
    char *fresh;
    size_t flen;
    int rv = payload_refresh_retry_until(p, *len, wall_s(), &fresh, &flen);
    if (rv > 0) {
        free(p);
        p = fresh;
        *len = flen;
    }
    *kept = rv < 0;
    char *stamped = payload_set_available_at(p, *len, wall_ms(), &flen);
    if (stamped) {
        free(p);
        p = stamped;
        *len = flen;
    }
    return p;
}

static int run_script(rconn_t *c, rscript_t *s, const char *body, int nkeys, int argc, const char **av,
                      const size_t *lens, char *err, size_t errn)
{
    if (!s->body) rscript_init(s, body);
    redisReply *r;
    int rv = rconn_script(c, s, nkeys, argc, av, lens, -1, -1, &r);
    if (rv != RC_OK) {
        snprintf(err, errn, "%s", c->last_error);
        return -1;
    }
    int n = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (n < 0) snprintf(err, errn, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    freeReplyObject(r);
    return n;
}

int failed_retry(rconn_t *c, const char *uuid, char *queue, size_t qn, bool *kept, char *err, size_t errn)
{
    frec_t f;
    *kept = false;
    if (failed_get(c, uuid, &f) < 0) {
        snprintf(err, errn, "no failed job %s", uuid);
        return 0;
    }
    snprintf(queue, qn, "%s", f.queue);
    size_t len;
    char *p = retry_payload(&f, kept, &len);
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, f.queue);
    char *jobkey = job_key(c, f.queue, uuid);
    /* on a cluster the set is not kept: the index (gone when SREM runs) stands in */
    char *set = rconn_is_cluster(c) ? xstrdup(k.failed) : xasprintf("%sqpool:failed:queues", c->conf.prefix);
    const char *av[] = {k.ready, k.notify, jobkey, k.failed, set, p, uuid, f.queue};
    size_t lens[] = {strlen(k.ready), strlen(k.notify), strlen(jobkey), strlen(k.failed),
                     strlen(set), len, strlen(uuid), strlen(f.queue)};
    int rv = run_script(c, &retry_script, RETRY_LUA, 5, 8, av, lens, err, errn);
    free(set);
    free(jobkey);
    free(p);
    qkeys_free(&k);
    frec_free(&f);
    return rv;
}

int failed_forget(rconn_t *c, const char *uuid)
{
    frec_t f;
    if (failed_get(c, uuid, &f) < 0) return 0;
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, f.queue);
    char *jobkey = job_key(c, f.queue, uuid);
    char *set = rconn_is_cluster(c) ? xstrdup(k.failed) : xasprintf("%sqpool:failed:queues", c->conf.prefix);
    const char *av[] = {jobkey, k.failed, set, uuid, f.queue};
    char err[64];
    int rv = run_script(c, &forget_script, FORGET_LUA, 3, 5, av, NULL, err, sizeof err);
    free(set);
    free(jobkey);
    qkeys_free(&k);
    frec_free(&f);
    return rv;
}

/* ------------------------------------------------------------ bulk retry */

/* KEYS: ready, notify, queue index, queue set, then the job hashes. ARGV:
 * queue, then uuid, payload pairs (one per job hash). A job still in the
 * store goes back and out of it; an index entry whose record is gone is
 * dropped (it would be looked at forever). */
static const char BULK_RETRY_LUA[] =
    "local n = 0\n"
    "for i = 5, #KEYS do\n"
    "  local j = 2 * (i - 4)\n"
    "  if redis.call('exists', KEYS[i]) == 1 then\n"
    "    redis.call('rpush', KEYS[1], ARGV[j + 1])\n"
    "    redis.call('rpush', KEYS[2], 1)\n"
    "    redis.call('del', KEYS[i])\n"
    "    n = n + 1\n"
    "  end\n"
    "  redis.call('zrem', KEYS[3], ARGV[j])\n"
    "end\n"
    "if redis.call('zcard', KEYS[3]) == 0 then redis.call('srem', KEYS[4], ARGV[1]) end\n"
    "return n";

static rscript_t bulk_script;

/* The jobs picked in one page of a queue. */
typedef struct {
    char *uuid[FAILED_RETRY_BATCH], *payload[FAILED_RETRY_BATCH];
    size_t len[FAILED_RETRY_BATCH];
    int n;
} batch_t;

static void batch_clear(batch_t *b)
{
    for (int i = 0; i < b->n; i++) free(b->uuid[i]), free(b->payload[i]);
    b->n = 0;
}

/* Retry what b holds, in one script: the count retried, or -1. */
static int batch_run(rconn_t *c, const char *queue, batch_t *b, char *err, size_t errn)
{
    if (!b->n) return 0;
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, queue);
    char *set = rconn_is_cluster(c) ? xstrdup(k.failed) : xasprintf("%sqpool:failed:queues", c->conf.prefix);
    int nkeys = 4 + b->n, argc = nkeys + 1 + 2 * b->n, a = 0;
    const char **av = xcalloc((size_t)argc, sizeof *av);
    size_t *lens = xcalloc((size_t)argc, sizeof *lens);
    char **jobkeys = xcalloc((size_t)b->n, sizeof *jobkeys);
    av[a++] = k.ready, av[a++] = k.notify, av[a++] = k.failed, av[a++] = set;
    for (int i = 0; i < b->n; i++) av[a++] = jobkeys[i] = job_key(c, queue, b->uuid[i]);
    av[a++] = queue;
    for (int i = 0; i < b->n; i++) {
        av[a] = b->uuid[i];
        lens[a + 1] = b->len[i];
        av[a + 1] = b->payload[i];
        a += 2;
    }
    for (int i = 0; i < argc; i++)
        if (!lens[i]) lens[i] = strlen(av[i]);
    int rv = run_script(c, &bulk_script, BULK_RETRY_LUA, nkeys, argc, av, lens, err, errn);
    for (int i = 0; i < b->n; i++) free(jobkeys[i]);
    free(jobkeys);
    free(lens);
    free(av);
    free(set);
    qkeys_free(&k);
    batch_clear(b);
    return rv;
}

/* Up to want uuids of queue's index from rank skip, oldest first. */
static redisReply *oldest_uuids(rconn_t *c, const char *queue, long skip, long want)
{
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, queue);
    char a[24], b[24];
    snprintf(a, sizeof a, "%ld", skip);
    snprintf(b, sizeof b, "%ld", skip + want - 1);
    const char *av[] = {"ZRANGE", k.failed, a, b};
    redisReply *r = rconn_call(c, 4, av, NULL);
    qkeys_free(&k);
    if (r && r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        r = NULL;
    }
    return r;
}

/* Does the failed job (its payload) belong to the class asked for? */
static bool class_matches(const char *name, const char *payload, size_t len)
{
    if (!name) return true;
    job_payload_t jp;
    char perr[64];
    bool parsed = payload_parse(payload, len, &jp, perr, sizeof perr) == 0;
    bool same = !strcmp(parsed ? payload_name(&jp) : "(invalid payload)", name);
    if (parsed) payload_free(&jp);
    return same;
}

/* One slice of a queue: up to want records from pg->skip, the matching
 * ones retried. The count of records looked at, or -1. */
static long retry_slice(rconn_t *c, failed_page_t *pg, const char *queue, long want, char *err, size_t errn)
{
    redisReply *u = oldest_uuids(c, queue, pg->skip, want);
    if (!u) {
        snprintf(err, errn, "%s", c->last_error[0] ? c->last_error : "unexpected reply");
        return -1;
    }
    for (size_t i = 0; i < u->elements; i++) {
        char *key = job_key(c, queue, u->element[i]->str ? u->element[i]->str : "");
        const char *av[] = {"HGET", key, "payload"};
        rconn_append(c, 3, av, NULL);
        free(key);
    }
    batch_t b = {.n = 0};
    long seen = 0;
    int rv = 0;
    for (size_t i = 0; i < u->elements; i++) {
        redisReply *r;
        if (rconn_read(c, -1, -1, &r) != RC_OK) {
            snprintf(err, errn, "%s", c->last_error);
            rv = -1;
            break;
        }
        seen++;
        const char *payload = r->type == REDIS_REPLY_STRING ? r->str : "";
        size_t plen = r->type == REDIS_REPLY_STRING ? r->len : 0;
        if (r->type == REDIS_REPLY_STRING && !class_matches(pg->name, payload, plen)) {
            pg->skip++; /* stays in the store: passed over */
        } else {
            frec_t f = {.payload = (char *)payload, .payload_len = plen};
            bool kept = false;
            b.uuid[b.n] = xstrdup(u->element[i]->str ? u->element[i]->str : "");
            b.payload[b.n] = retry_payload(&f, &kept, &b.len[b.n]);
            b.n++;
            pg->kept += kept; /* counted even if another retried it first: a hint */
        }
        freeReplyObject(r);
    }
    freeReplyObject(u);
    int n = rv < 0 ? 0 : batch_run(c, queue, &b, err, errn);
    batch_clear(&b);
    if (rv < 0 || n < 0) return -1;
    pg->retried += n;
    return seen;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **failed_scope_queues(rconn_t *c, const char *only)
{
    if (only) {
        char **v = xcalloc(2, sizeof *v);
        v[0] = xstrdup(only);
        return v;
    }
    redisReply *qs = failed_queues(c);
    if (!qs || qs->type != REDIS_REPLY_ARRAY) {
        if (qs) freeReplyObject(qs);
        return NULL;
    }
    char **v = xcalloc(qs->elements + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < qs->elements; i++)
        if (qs->element[i]->type == REDIS_REPLY_STRING) v[n++] = xstrdup(qs->element[i]->str);
    freeReplyObject(qs);
    qsort(v, n, sizeof *v, by_name);
    return v;
}

/* What is left in scope from the cursor on: ZCARDs, pipelined. */
static long count_left(rconn_t *c, char *const *qs, int from, long skip)
{
    int n = 0;
    for (int i = from; qs[i]; i++, n++) {
        qkeys_t k;
        qkeys_init(&k, c->conf.prefix, qs[i]);
        const char *av[] = {"ZCARD", k.failed};
        rconn_append(c, 2, av, NULL);
        qkeys_free(&k);
    }
    long left = -skip;
    for (int i = 0; i < n; i++) {
        redisReply *r;
        if (rconn_read(c, -1, -1, &r) != RC_OK) return -1;
        if (r->type == REDIS_REPLY_INTEGER) left += r->integer;
        freeReplyObject(r);
    }
    return left > 0 ? left : 0;
}

int failed_retry_page(rconn_t *c, failed_page_t *pg, char *err, size_t errn)
{
    pg->retried = pg->kept = 0;
    pg->remaining = 0;
    char **qs = failed_scope_queues(c, pg->queue);
    if (!qs) {
        snprintf(err, errn, "%s", c->last_error[0] ? c->last_error : "unexpected reply");
        return -1;
    }
    int i = 0;
    while (qs[i] && pg->at_queue && strcmp(qs[i], pg->at_queue) < 0) i++;
    if (!qs[i] || !pg->at_queue || strcmp(qs[i], pg->at_queue)) pg->skip = 0; /* that queue is done */
    long budget = FAILED_RETRY_PAGE;
    int rv = 0;
    while (qs[i] && budget > 0) {
        long want = budget < FAILED_RETRY_BATCH ? budget : FAILED_RETRY_BATCH;
        long seen = retry_slice(c, pg, qs[i], want, err, errn);
        if (seen < 0) {
            rv = -1;
            break;
        }
        budget -= seen;
        if (seen < want) { /* the end of this queue */
            i++;
            pg->skip = 0;
        }
    }
    free(pg->at_queue);
    pg->at_queue = qs[i] ? xstrdup(qs[i]) : NULL;
    if (rv == 0 && qs[i]) {
        pg->remaining = count_left(c, qs, i, pg->skip);
        if (pg->remaining < 0) {
            snprintf(err, errn, "%s", c->last_error);
            rv = -1;
        }
    }
    free_strv(qs);
    return rv;
}

/* ------------------------------------------------------------ many at once */

int failed_retry_many(rconn_t *c, const char *queue, const frec_t *recs, int n, int *kept, char *err, size_t errn)
{
    batch_t b = {.n = 0};
    for (int i = 0; i < n && i < FAILED_RETRY_BATCH; i++) {
        bool k = false;
        b.uuid[b.n] = xstrdup(recs[i].uuid);
        b.payload[b.n] = retry_payload(&recs[i], &k, &b.len[b.n]);
        b.n++;
        *kept += k;
    }
    return batch_run(c, queue, &b, err, errn);
}

/* KEYS: queue index, queue set, then the job hashes. ARGV: queue, then the
 * uuids (one per job hash). */
static const char BULK_FORGET_LUA[] =
    "local n = 0\n"
    "for i = 3, #KEYS do\n"
    "  n = n + redis.call('del', KEYS[i])\n"
    "  redis.call('zrem', KEYS[1], ARGV[i - 1])\n"
    "end\n"
    "if redis.call('zcard', KEYS[1]) == 0 then redis.call('srem', KEYS[2], ARGV[1]) end\n"
    "return n";

static rscript_t bulk_forget_script;

int failed_forget_many(rconn_t *c, const char *queue, char *const *uuids, int n, char *err, size_t errn)
{
    if (n <= 0) return 0;
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, queue);
    char *set = rconn_is_cluster(c) ? xstrdup(k.failed) : xasprintf("%sqpool:failed:queues", c->conf.prefix);
    int nkeys = 2 + n, argc = nkeys + 1 + n, a = 0;
    const char **av = xcalloc((size_t)argc, sizeof *av);
    char **jobkeys = xcalloc((size_t)n, sizeof *jobkeys);
    av[a++] = k.failed, av[a++] = set;
    for (int i = 0; i < n; i++) av[a++] = jobkeys[i] = job_key(c, queue, uuids[i]);
    av[a++] = queue;
    for (int i = 0; i < n; i++) av[a++] = uuids[i];
    int rv = run_script(c, &bulk_forget_script, BULK_FORGET_LUA, nkeys, argc, av, NULL, err, errn);
    for (int i = 0; i < n; i++) free(jobkeys[i]);
    free(jobkeys);
    free(av);
    free(set);
    qkeys_free(&k);
    return rv;
}
