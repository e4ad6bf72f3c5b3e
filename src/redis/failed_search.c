/*
 * failed_search.c - searching the failed store by filter, and counting,
 * retrying or forgetting what matches, a bounded step at a time (see
 * failed_search.h).
 */
#include "redis/failed_search.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK FAILED_RETRY_BATCH   /* records per range read and prefilter script */

/* ------------------------------------------------------------ pure parts */

static char lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

/* Is needle in s[0..n), ASCII case ignored? */
static bool ci_contains(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    if (!m) return true;
    if (!s || n < m) return false;
    for (size_t i = 0; i + m <= n; i++) {
        size_t j = 0;
        while (j < m && lower(s[i + j]) == lower(needle[j])) j++;
        if (j == m) return true;
    }
    return false;
}

static bool class_is(const frec_t *f, const char *name)
{
    job_payload_t jp;
    char perr[64];
    bool parsed = payload_parse(f->payload, f->payload_len, &jp, perr, sizeof perr) == 0;
    bool same = !strcmp(parsed ? payload_name(&jp) : "(invalid payload)", name);
    if (parsed) payload_free(&jp);
    return same;
}

bool ffilter_match(const ffilter_t *flt, const frec_t *f)
{
    if (flt->queue && (!f->queue || strcmp(flt->queue, f->queue))) return false;
    if (flt->uuid && (!f->uuid || strcmp(flt->uuid, f->uuid))) return false;
    if (flt->pool && *flt->pool && (!f->pool || strcmp(flt->pool, f->pool))) return false;
    if (flt->host && *flt->host && (!f->host || strcmp(flt->host, f->host))) return false;
    if (flt->since && f->failed_at < flt->since) return false;
    if (flt->until && f->failed_at > flt->until) return false;
    if (flt->q && *flt->q && !ci_contains(f->payload, f->payload_len, flt->q) &&
        !ci_contains(f->exception, f->exception ? strlen(f->exception) : 0, flt->q))
        return false;
    if (flt->tag && *flt->tag && !payload_has_tag(f->payload, f->payload_len, flt->tag)) return false;
    return !flt->name || class_is(f, flt->name);
}

static const struct {
    char unit;
    long long s;
} UNITS[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};

int ffilter_time(const char *s, long long now, long long *out)
{
    if (!s || !*s) return -1;
    char *end;
    long long n = strtoll(s, &end, 10);
    if (end != s && n >= 0 && !*end) return *out = n, 0;
    for (size_t i = 0; end != s && n >= 0 && i < sizeof UNITS / sizeof *UNITS; i++)
        if (end[0] == UNITS[i].unit && !end[1] && n <= 100LL * 366 * 86400 / UNITS[i].s)
            return *out = now - n * UNITS[i].s, 0;
    struct tm tm = {0};
    const char *rest = strptime(s, "%Y-%m-%d", &tm);
    if (rest && (*rest == ' ' || *rest == 'T')) {
        const char *t = strptime(rest + 1, "%H:%M", &tm);
        if (t && *t == ':') t = strptime(t + 1, "%S", &tm);
        rest = t;
    }
    if (!rest || *rest) return -1;
    *out = (long long)timegm(&tm);
    return 0;
}

static void cursor_top(fcursor_t *c)
{
    snprintf(c->max, sizeof c->max, "+inf");
    c->skip = 0;
}

int fcursor_parse(const char *s, fcursor_t *c)
{
    if (!s || !*s) {
        c->queue = NULL;
        cursor_top(c);
        return 0;
    }
    const char *a = strchr(s, ':'), *b = a ? strchr(a + 1, ':') : NULL;
    if (!a || !b || a == s || (size_t)(a - s) >= sizeof c->max || !b[1]) return -1;
    char *end;
    long skip = strtol(a + 1, &end, 10);
    if (end != b || skip < 0 || skip > 1000000000L) return -1;
    char *mend;
    (void)strtod(s, &mend);
    if (mend != a) return -1; /* a number, or +inf */
    snprintf(c->max, sizeof c->max, "%.*s", (int)(a - s), s);
    c->skip = skip;
    c->queue = xstrdup(b + 1);
    return 0;
}

char *fcursor_text(const fcursor_t *c)
{
    return c->queue ? xasprintf("%s:%ld:%s", c->max, c->skip, c->queue) : NULL;
}

/* Past a record at score: the cursor goes on after it (removed: it is no
 * longer in the index, so it is not one to skip). */
static void cursor_pass(fcursor_t *c, const char *score, bool removed)
{
    if (strcmp(score, c->max)) {
        snprintf(c->max, sizeof c->max, "%s", score);
        c->skip = 0;
    }
    if (!removed) c->skip++;
}

/* ------------------------------------------------------------ Redis */

/* KEYS: job hashes. ARGV: text (lower case) or "", a class's last name
 * segment or "", (3: below), pool or "", host or "". Returns, for each
 * record whose bytes may match: its index (1-based), uuid, connection,
 * queue, payload, exception, failed_at, pool, host (pool and host "" when
 * the record does not say). A pool or host asked for is looked at first.
 * ARGV[3]: a run of the text with no ASCII letter ("" if none is long
 * enough), which case cannot change: a field without it is passed over
 * without being lower-cased (string.lower was most of a text search's
 * time). Only a cheap look at bytes: the caller decides. A record's payload is
 * read first, its exception only when the text is not in the payload, and
 * the rest only for a record that passed (most of a step's Redis time was
 * copying fields of records that did not). */
static const char PREFILTER_LUA[] =
    "local out = {}\n"
    "local q, cls, anc, pl, hs = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n"
    "local function has(s)\n"
    "  if anc ~= '' and not string.find(s, anc, 1, true) then return false end\n"
    "  return string.find(string.lower(s), q, 1, true)\n"
    "end\n"
    "for i = 1, #KEYS do\n"
    "  local p = false\n"
    "  if pl ~= '' or hs ~= '' then\n"
    "    local where = redis.call('hmget', KEYS[i], 'pool', 'host')\n"
    "    if (pl == '' or where[1] == pl) and (hs == '' or where[2] == hs) then p = true end\n"
    "  else p = true end\n"
    "  if p then p = redis.call('hget', KEYS[i], 'payload') end\n"
    "  local ok = p\n"
    "  if ok and cls ~= '' then ok = string.find(p, cls, 1, true) end\n"
    "  if ok and q ~= '' and not has(p) then\n"
    "    local e = redis.call('hget', KEYS[i], 'exception')\n"
    "    ok = e and has(e)\n"
    "  end\n"
    "  if ok then\n"
    "    local v = redis.call('hmget', KEYS[i], 'uuid', 'connection', 'queue', 'exception', 'failed_at', 'pool', 'host')\n"
    "    if v[1] and v[3] then\n"
    "      out[#out + 1] = i\n"
    "      out[#out + 1] = v[1]; out[#out + 1] = v[2] or ''; out[#out + 1] = v[3]\n"
    "      out[#out + 1] = p; out[#out + 1] = v[4] or ''; out[#out + 1] = v[5] or ''\n"
    "      out[#out + 1] = v[6] or ''; out[#out + 1] = v[7] or ''\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return out";

static rscript_t prefilter_script;

/* The last segment of a class name when it is plain ASCII (what a JSON
 * payload holds as it is), else "" (no prefilter by class). */
static const char *class_needle(const char *name)
{
    if (!name) return "";
    const char *seg = strrchr(name, '\\');
    seg = seg ? seg + 1 : name;
    for (const char *p = seg; *p; p++)
        if ((unsigned char)*p >= 0x80 || *p == '"' || *p == '/') return "";
    return seg;
}

static char *lower_dup(const char *s)
{
    char *d = xstrdup(s ? s : "");
    for (char *p = d; *p; p++) *p = lower(*p);
    return d;
}

static bool is_letter(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* The longest run of s without an ASCII letter, when it is at least 2
 * bytes (a copy; else ""): bytes that case leaves as they are, so a text
 * that holds s holds this run byte for byte. */
static char *caseless_run(const char *s)
{
    size_t best = 0, at = 0, n = 0;
    for (size_t i = 0; s && s[i]; i++) {
        n = is_letter(s[i]) ? 0 : n + 1;
        if (n > best) best = n, at = i + 1 - n;
    }
    return best >= 2 ? xstrndup(s + at, best) : xstrdup("");
}

/* Up to want uuids of queue's index at or below the cursor, newest first,
 * WITHSCORES (uuid, score pairs); NULL when Redis failed. */
static redisReply *range(rconn_t *c, const fwalk_t *w, const char *queue, long want)
{
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, queue);
    char max[40], min[24], skip[24], cnt[24];
    if (!strcmp(w->cur.max, "+inf") && w->f.until) snprintf(max, sizeof max, "%lld", w->f.until);
    else snprintf(max, sizeof max, "%s", w->cur.max);
    if (w->f.since) snprintf(min, sizeof min, "%lld", w->f.since);
    else snprintf(min, sizeof min, "-inf");
    snprintf(skip, sizeof skip, "%ld", w->cur.skip);
    snprintf(cnt, sizeof cnt, "%ld", want);
    const char *av[] = {"ZREVRANGEBYSCORE", k.failed, max, min, "WITHSCORES", "LIMIT", skip, cnt};
    redisReply *r = rconn_call(c, 8, av, NULL);
    qkeys_free(&k);
    if (r && (r->type != REDIS_REPLY_ARRAY || r->elements % 2)) {
        freeReplyObject(r);
        r = NULL;
    }
    return r;
}

/* The prefilter over the records u names; NULL when Redis failed. */
static redisReply *prefilter(rconn_t *c, const fwalk_t *w, const char *queue, const redisReply *u)
{
    size_t n = u->elements / 2;
    const char **av = xcalloc(n + 5, sizeof *av);
    char **keys = xcalloc(n, sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        const char *id = u->element[2 * i]->str;
        av[i] = keys[i] = failed_job_key(c, queue, id ? id : "");
    }
    char *q = lower_dup(w->f.q), *anchor = caseless_run(w->f.q);
    av[n] = q;
    av[n + 1] = class_needle(w->f.name);
    av[n + 2] = anchor;
    av[n + 3] = w->f.pool ? w->f.pool : "";
    av[n + 4] = w->f.host ? w->f.host : "";
    if (!prefilter_script.body) rscript_init(&prefilter_script, PREFILTER_LUA);
    redisReply *r = NULL;
    if (rconn_script(c, &prefilter_script, (int)n, (int)n + 5, av, NULL, -1, -1, &r) != RC_OK) r = NULL;
    if (r && r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        r = NULL;
    }
    for (size_t i = 0; i < n; i++) free(keys[i]);
    FREE_ALL(keys, av, q, anchor);
    return r;
}

/* A prefilter reply's record at g (after its index), into f. */
static void rec_at(const redisReply *m, size_t g, frec_t *f)
{
    memset(f, 0, sizeof *f);
    char **dst[] = {&f->uuid, &f->connection, &f->queue, &f->payload, &f->exception};
    for (size_t i = 0; i < 5; i++) {
        const redisReply *e = m->element[g + i];
        *dst[i] = e->type == REDIS_REPLY_STRING ? xstrndup(e->str, e->len) : xstrdup("");
        if (i == 3) f->payload_len = e->type == REDIS_REPLY_STRING ? e->len : 0;
    }
    const redisReply *t = m->element[g + 5];
    f->failed_at = t->type == REDIS_REPLY_STRING ? atoll(t->str) : 0;
    char **where[] = {&f->pool, &f->host};
    for (size_t i = 0; i < 2; i++) {
        const redisReply *e = m->element[g + 6 + i];
        if (e->type == REDIS_REPLY_STRING && e->len) *where[i] = xstrndup(e->str, e->len);
    }
}

/* The records of one chunk to act on. */
typedef struct {
    frec_t rec[CHUNK];
    char *uuid[CHUNK];
    int n;
} picked_t;

static void picked_free(picked_t *p)
{
    for (int i = 0; i < p->n; i++) frec_free(&p->rec[i]);
    p->n = 0;
}

/* A record that matched: listed, counted or picked to act on. */
static void take(fwalk_t *w, picked_t *p, frec_t *f)
{
    w->matched++;
    if (w->act == FWALK_LIST) cJSON_AddItemToArray(w->list, failed_json(f, false));
    if (w->act == FWALK_RETRY || w->act == FWALK_FORGET) {
        p->rec[p->n] = *f;
        p->uuid[p->n] = p->rec[p->n].uuid;
        p->n++;
        return;
    }
    frec_free(f);
}

/* Has the step matched all it may? A list: its limit; a retry or forget:
 * FAILED_ACTION_PAGE (so that a sparse filter still goes fast, and a dense
 * one acts on a bounded number per request). */
static bool full(const fwalk_t *w)
{
    if (w->act == FWALK_RETRY || w->act == FWALK_FORGET) return w->matched >= FAILED_ACTION_PAGE;
    return w->act == FWALK_LIST && w->limit > 0 && w->matched >= w->limit;
}

static int act_on(rconn_t *c, fwalk_t *w, const char *queue, picked_t *p, char *err, size_t errn)
{
    int n = 0;
    if (p->n && w->act == FWALK_RETRY) n = failed_retry_many(c, queue, p->rec, p->n, &w->kept, err, errn);
    if (p->n && w->act == FWALK_FORGET) n = failed_forget_many(c, queue, p->uuid, p->n, err, errn);
    picked_free(p);
    if (n < 0) return -1;
    w->acted += n;
    return 0;
}

/* One chunk of queue from the cursor: up to want records looked at. Their
 * count, or -1 (err). */
static long walk_chunk(rconn_t *c, fwalk_t *w, const char *queue, long want, char *err, size_t errn)
{
    redisReply *u = range(c, w, queue, want);
    size_t n = u ? u->elements / 2 : 0;
    redisReply *m = n ? prefilter(c, w, queue, u) : NULL;
    if (!u || (n && !m)) {
        snprintf(err, errn, "%s", c->last_error[0] ? c->last_error : "unexpected reply");
        if (u) freeReplyObject(u);
        return -1;
    }
    picked_t p = {.n = 0};
    bool removes = w->act == FWALK_RETRY || w->act == FWALK_FORGET;
    size_t g = 0, j = 0;
    for (; j < n && !full(w); j++) {
        bool hit = false;
        if (m && g + 9 <= m->elements && m->element[g]->type == REDIS_REPLY_INTEGER &&
            m->element[g]->integer == (long long)j + 1) {
            frec_t f;
            rec_at(m, g + 1, &f);
            g += 9;
            hit = ffilter_match(&w->f, &f);
            if (hit) take(w, &p, &f);
            else frec_free(&f);
        }
        const redisReply *score = u->element[2 * j + 1];
        cursor_pass(&w->cur, score->str ? score->str : "0", hit && removes);
    }
    w->scanned += (long)j;
    freeReplyObject(u);
    if (m) freeReplyObject(m);
    if (act_on(c, w, queue, &p, err, errn) < 0) return -1;
    return (long)j;
}

/* A uuid asked for: its record alone (one look). */
static int walk_uuid(rconn_t *c, fwalk_t *w, char *err, size_t errn)
{
    free(w->cur.queue);
    w->cur.queue = NULL;
    frec_t f;
    if (failed_get(c, w->f.uuid, &f) < 0) return 0; /* none (or Redis failed: as none) */
    w->scanned = 1;
    if (!ffilter_match(&w->f, &f)) {
        frec_free(&f);
        return 0;
    }
    char *queue = xstrdup(f.queue);
    picked_t p = {.n = 0};
    take(w, &p, &f);
    int rv = act_on(c, w, queue, &p, err, errn);
    free(queue);
    return rv;
}

int failed_walk(rconn_t *c, fwalk_t *w, char *err, size_t errn)
{
    w->scanned = w->matched = w->acted = 0;
    w->kept = 0;
    if (w->act == FWALK_LIST && !w->list) w->list = cJSON_CreateArray();
    if (w->f.uuid) return walk_uuid(c, w, err, errn);
    char **qs = failed_scope_queues(c, w->f.queue);
    if (!qs) {
        snprintf(err, errn, "%s", c->last_error[0] ? c->last_error : "unexpected reply");
        return -1;
    }
    int i = 0;
    while (qs[i] && w->cur.queue && strcmp(qs[i], w->cur.queue) < 0) i++;
    if (!qs[i] || !w->cur.queue || strcmp(qs[i], w->cur.queue)) cursor_top(&w->cur);
    long budget = FAILED_SEARCH_PAGE;
    int rv = 0;
    while (qs[i] && budget > 0 && !full(w)) {
        long want = budget < CHUNK ? budget : CHUNK;
        long seen = walk_chunk(c, w, qs[i], want, err, errn);
        if (seen < 0) {
            rv = -1;
            break;
        }
        budget -= seen;
        if (seen < want && !full(w)) { /* the end of this queue */
            i++;
            cursor_top(&w->cur);
        }
    }
    free(w->cur.queue);
    w->cur.queue = qs[i] ? xstrdup(qs[i]) : NULL;
    free_strv(qs);
    return rv;
}

void fwalk_free(fwalk_t *w)
{
    free(w->cur.queue);
    w->cur.queue = NULL;
    if (w->list) cJSON_Delete(w->list);
    w->list = NULL;
}
