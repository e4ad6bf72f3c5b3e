/*
 * pending_list.c - what waits in a queue, a bounded page at a time (see
 * pending_list.h).
 */
#include "redis/pending_list.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A part of a chunk: a range of the ready list or of the delayed set. */
typedef struct {
    bool delayed, reverse;         /* reverse: the reply is walked from its end */
    long long a, b;                /* Redis's start and stop */
} pseg_t;

void pending_list_free(plist_t *p)
{
    cJSON_Delete(p->jobs);
    p->jobs = NULL;
}

bool pending_list_match(const ffilter_t *f, const char *tag, const char *raw, size_t len)
{
    frec_t r = {.payload = (char *)raw, .payload_len = len};
    ffilter_t flt = {.name = f->name, .q = f->q};
    if (!ffilter_match(&flt, &r)) return false;
    if (tag && !payload_has_tag(raw, len, tag)) return false;
    if (!pending_in_range(f, raw, len)) return false;
    if (!f->uuid) return true;
    job_payload_t jp;
    char perr[64];
    if (payload_parse(raw, len, &jp, perr, sizeof perr) < 0) return false;
    bool same = jp.uuid && !strcmp(jp.uuid, f->uuid);
    payload_free(&jp);
    return same;
}

/* A top-level number (or a string of one) > 0; -1 when absent. */
static double top_number(const char *raw, size_t len, const char *key)
{
    size_t vs, ve;
    if (json_top_value(raw, len, key, &vs, &ve) && ve - vs > 0 && ve - vs < 40) {
        char buf[48];
        size_t n = ve - vs;
        memcpy(buf, raw + vs, n);
        buf[n] = '\0';
        char *s = buf + (buf[0] == '"'), *end;
        double v = strtod(s, &end);
        if (end != s && v > 0) return v;
    }
    return -1;
}

/* Horizon's pushedAt (a string of microtime), else createdAt (12.11+), in
 * UNIX seconds; < 0: the payload does not say. */
static double pushed_at(const char *raw, size_t len, const job_payload_t *jp)
{
    double v = top_number(raw, len, "pushedAt");
    if (v > 0) return v;
    return jp->has_created_at ? (double)jp->created_at : -1;
}

double pending_pushed_at(const char *raw, size_t len)
{
    double v = top_number(raw, len, "pushedAt");
    return v > 0 ? v : top_number(raw, len, "createdAt");
}

bool pending_in_range(const ffilter_t *f, const char *raw, size_t len)
{
    if (!f->since && !f->until) return true;
    double at = pending_pushed_at(raw, len);
    if (at < 0) return false;
    return (!f->since || at >= (double)f->since) && (!f->until || at < (double)f->until + 1);
}

/* The payload's own top-level "tags" (Horizon's), bounded. */
static cJSON *payload_tags(const char *raw, size_t len)
{
    cJSON *out = cJSON_CreateArray();
    size_t vs, ve;
    if (!json_top_value(raw, len, "tags", &vs, &ve)) return out;
    cJSON *a = cJSON_ParseWithLength(raw + vs, ve - vs);
    const cJSON *t;
    int n = 0;
    cJSON_ArrayForEach(t, a) {
        if (!cJSON_IsString(t) || !*t->valuestring) continue;
        if (n++ == PENDING_TAGS_MAX) break;
        size_t tl = strlen(t->valuestring), cut = utf8_cut(t->valuestring, tl, PENDING_TAG_BYTES);
        char *s = xstrndup(t->valuestring, cut);
        cJSON_AddItemToArray(out, cJSON_CreateString(s));
        free(s);
    }
    cJSON_Delete(a);
    return out;
}

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
    if (v) cJSON_AddStringToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

cJSON *pending_entry(const char *raw, size_t len, bool delayed, double score, long long position)
{
    cJSON *o = cJSON_CreateObject();
    job_payload_t jp;
    char perr[64];
    bool ok = payload_parse(raw, len, &jp, perr, sizeof perr) == 0;
    cJSON_AddNumberToObject(o, "position", (double)position);
    cJSON_AddStringToObject(o, "state", delayed ? "delayed" : "ready");
    add_str_or_null(o, "uuid", ok ? jp.uuid : NULL);
    add_str_or_null(o, "id", ok ? jp.id : NULL);
    add_str_or_null(o, "class", ok ? payload_name(&jp) : NULL);
    if (ok) cJSON_AddNumberToObject(o, "attempts", (double)jp.attempts);
    else cJSON_AddNullToObject(o, "attempts");
    double at = ok ? pushed_at(raw, len, &jp) : -1;
    if (at >= 0) cJSON_AddNumberToObject(o, "pushed_at", at);
    else cJSON_AddNullToObject(o, "pushed_at");
    if (delayed) cJSON_AddNumberToObject(o, "available_at", score);
    else cJSON_AddNullToObject(o, "available_at");
    cJSON_AddNumberToObject(o, "size", (double)len);
    cJSON_AddItemToObject(o, "tags", payload_tags(raw, len));
    if (!ok) cJSON_AddBoolToObject(o, "malformed", true);
    if (ok) payload_free(&jp);
    return o;
}

static long long count_of(rconn_t *c, const char *cmd, const char *key)
{
    const char *av[] = {cmd, key};
    redisReply *r = rconn_call(c, 2, av, NULL);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    return n;
}

/* The ranges [i, i+n) of the sequence covers: at most two. */
static int segments(const plist_t *p, long long nready, long long ndelayed, long long i, long long n, pseg_t *s)
{
    int k = 0;
    long long end = i + n;
    long long first = p->newest ? ndelayed : nready;   /* the length of the first part */
    if (i < first) {
        long long e = end < first ? end : first;
        s[k++] = p->newest ? (pseg_t){.delayed = true, .a = i, .b = e - 1} : (pseg_t){.a = i, .b = e - 1};
        i = e;
    }
    if (i < end) {
        long long a = i - first, b = end - first - 1;
        s[k++] = p->newest ? (pseg_t){.reverse = true, .a = -(b + 1), .b = -(a + 1)}
                           : (pseg_t){.delayed = true, .a = a, .b = b};
    }
    return k;
}

static redisReply *read_seg(rconn_t *c, const plist_t *p, const qkeys_t *k, const pseg_t *s)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%lld", s->a);
    snprintf(b, sizeof b, "%lld", s->b);
    const char *cmd = !s->delayed ? "LRANGE" : p->newest ? "ZREVRANGE" : "ZRANGE";
    const char *av[] = {cmd, s->delayed ? k->delayed : k->ready, a, b, "WITHSCORES"};
    redisReply *r = rconn_call(c, s->delayed ? 5 : 4, av, NULL);
    if (r && r->type == REDIS_REPLY_ARRAY) return r;
    if (r) freeReplyObject(r);
    return NULL;
}

typedef struct {
    long long pos;                 /* the position of the next job looked at */
    long found, budget;
    bool filtered;
    size_t bytes;                  /* payload bytes read so far (PENDING_LIST_BYTES) */
} pwalk_t;

/* Look at a segment's jobs in order; false when the page is full or the
 * budget spent (pos stays at the job not looked at). */
static bool walk_seg(plist_t *p, pwalk_t *w, const pseg_t *s, const redisReply *r)
{
    size_t stride = s->delayed ? 2 : 1, n = r->elements / stride;
    for (size_t j = 0; j < n; j++) {
        if (w->found >= p->limit || p->scanned >= w->budget || w->bytes >= PENDING_LIST_BYTES) return false;
        size_t at = (s->reverse ? n - 1 - j : j) * stride;
        const redisReply *e = r->element[at];
        p->scanned++;
        w->pos++;
        w->bytes += e->type == REDIS_REPLY_STRING ? e->len : 0;
        if (e->type != REDIS_REPLY_STRING || (w->filtered && !pending_list_match(&p->f, p->tag, e->str, e->len)))
            continue;
        double score = s->delayed && r->element[at + 1]->str ? strtod(r->element[at + 1]->str, NULL) : 0;
        cJSON_AddItemToArray(p->jobs, pending_entry(e->str, e->len, s->delayed, score, w->pos - 1));
        w->found++;
    }
    return true;
}

/* Jobs to read next: 10 first, then as many as the bytes left allow at the
 * size seen so far (1 to PENDING_LIST_CHUNK), so that large payloads are
 * never read by the hundred. */
static long long chunk_for(const plist_t *p, const pwalk_t *w)
{
    if (!p->scanned) return 10;
    size_t avg = w->bytes / (size_t)p->scanned + 1, left = PENDING_LIST_BYTES - w->bytes;
    size_t n = left / avg;
    return n < 1 ? 1 : n > PENDING_LIST_CHUNK ? PENDING_LIST_CHUNK : (long long)n;
}

/* Read from w->pos until the page is full, the budget spent or total
 * reached. 0, 1 when a read came back short (the queue moved: stop here),
 * or -1. */
static int walk(rconn_t *c, plist_t *p, const qkeys_t *k, pwalk_t *w, long long nr, long long nd)
{
    long long total = nr + nd;
    while (w->pos < total && w->found < p->limit && p->scanned < w->budget && w->bytes < PENDING_LIST_BYTES) {
        long long n = total - w->pos, left = w->budget - p->scanned;
        if (n > chunk_for(p, w)) n = chunk_for(p, w);
        if (n > left) n = left;
        pseg_t s[2];
        int ns = segments(p, nr, nd, w->pos, n, s);
        for (int i = 0; i < ns; i++) {
            redisReply *r = read_seg(c, p, k, &s[i]);
            if (!r) return -1;
            size_t want = (size_t)(s[i].b - s[i].a + 1) * (s[i].delayed ? 2 : 1);
            bool go = walk_seg(p, w, &s[i], r);
            bool shrank = r->elements < want;
            freeReplyObject(r);
            if (!go) return 0;
            if (shrank) return 1;
        }
    }
    return 0;
}

int pending_list(rconn_t *c, plist_t *p, char *err, size_t errn)
{
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, p->queue);
    p->jobs = cJSON_CreateArray();
    p->scanned = 0;
    p->ready = count_of(c, "LLEN", k.ready);
    p->delayed = count_of(c, "ZCARD", k.delayed);
    p->reserved = count_of(c, "ZCARD", k.reserved);
    int rv = -1;
    if (p->ready >= 0 && p->delayed >= 0 && p->reserved >= 0) {
        long long nr = p->state == PSTATE_DELAYED ? 0 : p->ready, nd = p->state == PSTATE_READY ? 0 : p->delayed;
        pwalk_t w = {.pos = p->offset, .filtered = p->f.name || p->f.uuid || p->f.q || p->tag || p->f.since || p->f.until};
        w.budget = w.filtered ? PENDING_LIST_SCAN : p->limit;
        rv = walk(c, p, &k, &w, nr, nd);
        p->next = rv == 1 || w.pos < nr + nd ? w.pos : -1;
        p->truncated = w.filtered && p->next >= 0 && w.found < p->limit;
    }
    qkeys_free(&k);
    if (rv < 0) snprintf(err, errn, "%s", c->last_error[0] ? c->last_error : "unexpected reply");
    return rv < 0 ? -1 : 0;
}
