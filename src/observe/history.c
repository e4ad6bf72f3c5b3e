/*
 * history.c - see history.h.
 */
#include "observe/history.h"
#include "core/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
    int rv = -1;
    redisReply *r;
    if (rconn_ensure(c) == 0 &&
        rconn_script(c, &add_script, 1, argc, (const char **)argv, NULL, -1, -1, &r) == RC_OK) {
        rv = r->type == REDIS_REPLY_ERROR ? -2 : 0; /* refused: retrying would not help */
        freeReplyObject(r);
    }
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
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

/* Minute m's hash (HGETALL's reply r) as an entry of mins, when it has any. */
static void add_minute(cJSON *mins, int64_t m, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) return;
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

/* Minutes [from, to] (at most HISTORY_READ_CHUNK) in one pipeline: -1 when
 * Redis failed (every reply read anyway, so the connection stays in step). */
static int read_chunk(rconn_t *c, int64_t from, int64_t to, cJSON *mins)
{
    for (int64_t m = from; m <= to; m++) {
        char *key = xasprintf("%sqpool:metrics:%lld", c->conf.prefix, (long long)m);
        const char *argv[] = {"HGETALL", key};
        rconn_append(c, 2, argv, NULL);
        free(key);
    }
    bool ok = true;
    for (int64_t m = from; m <= to; m++) {
        redisReply *r;
        if (!ok || rconn_read(c, -1, -1, &r) != RC_OK) {
            ok = false;
            continue;
        }
        add_minute(mins, m, r);
        freeReplyObject(r);
    }
    return ok ? 0 : -1;
}

cJSON *history_read(rconn_t *c, int64_t from, int64_t to)
{
    if (to < from || to - from > 60 * 24 * 31) return NULL;
    if (rconn_ensure(c) < 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "from", (double)from);
    cJSON_AddNumberToObject(o, "to", (double)to);
    cJSON *mins = cJSON_AddArrayToObject(o, "minutes");
    for (int64_t m = from; m <= to; m += HISTORY_READ_CHUNK) {
        int64_t last = m + HISTORY_READ_CHUNK - 1 < to ? m + HISTORY_READ_CHUNK - 1 : to;
        if (read_chunk(c, m, last, mins) < 0) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

/* ------------------------------------------------------------ job records */

/* The list and the index share a hash tag: one script keeps them in step,
 * on a Redis Cluster too. */
static char *jobs_key(const rconn_t *c, const char *what)
{
    return xasprintf("%sqpool:{qpool-jobs}:%s", c->conf.prefix, what);
}

/* KEYS: the list, the index. ARGV: keep, ttl ms, per-uuid cap, trim
 * budget, then uuid, record pairs, oldest first. Each record goes to the
 * head of the list and to the end of its uuid's field (records joined by
 * '\n': a record is one line of JSON); the list is trimmed to keep from
 * its tail, at most budget records a call, and each record trimmed leaves
 * its uuid's field too, so the index holds exactly what the list holds
 * (less what the per-uuid cap dropped). */
static const char ADD_JOBS_LUA[] =
    "local keep, per, budget = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "local function lines(v) return select(2, string.gsub(v, '\\n', '\\n')) + 1 end\n"
    "for i = 5, #ARGV, 2 do\n"
    "  local u, rec = ARGV[i], ARGV[i + 1]\n"
    "  redis.call('lpush', KEYS[1], rec)\n"
    "  if u ~= '' then\n"
    "    local v = redis.call('hget', KEYS[2], u)\n"
    "    v = v and (v .. '\\n' .. rec) or rec\n"
    "    if lines(v) > per then v = string.sub(v, string.find(v, '\\n', 1, true) + 1) end\n"
    "    redis.call('hset', KEYS[2], u, v)\n"
    "  end\n"
    "end\n"
    "local excess = redis.call('llen', KEYS[1]) - keep\n"
    "while excess > 0 and budget > 0 do\n"
    "  local rec = redis.call('rpop', KEYS[1])\n"
    "  local ok, d = pcall(cjson.decode, rec)\n"
    "  if ok and type(d) == 'table' and type(d['uuid']) == 'string' and d['uuid'] ~= '' then\n"
    "    local v = redis.call('hget', KEYS[2], d['uuid'])\n"
    "    local s, e = nil, nil\n"
    "    if v then s, e = string.find(v, rec, 1, true) end\n"
    "    if s then\n"
    "      if e == #v then v = string.sub(v, 1, math.max(s - 2, 0)) else v = string.sub(v, 1, s - 1) .. string.sub(v, e + 2) end\n"
    "      if v == '' then redis.call('hdel', KEYS[2], d['uuid']) else redis.call('hset', KEYS[2], d['uuid'], v) end\n"
    "    end\n"
    "  end\n"
    "  excess = excess - 1\n"
    "  budget = budget - 1\n"
    "end\n"
    "redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "redis.call('pexpire', KEYS[2], ARGV[2])\n"
    "return 1\n";

static rscript_t add_jobs_script;

/* A record's uuid (caller frees); "" when it has none. */
static char *record_uuid(const char *rec)
{
    cJSON *o = cJSON_Parse(rec);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "uuid");
    char *out = xstrdup(cJSON_IsString(u) && !strchr(u->valuestring, '\n') ? u->valuestring : "");
    cJSON_Delete(o);
    return out;
}

int history_add_jobs(rconn_t *c, const char *const *recs, int n, int keep, int64_t retention_s)
{
    if (n <= 0) return 0;
    if (rconn_ensure(c) < 0) return -1;
    if (!add_jobs_script.body) rscript_init(&add_jobs_script, ADD_JOBS_LUA);
    int argc = 6 + 2 * n, k = 0;
    char **argv = xcalloc((size_t)argc, sizeof *argv);
    argv[k++] = jobs_key(c, "list");
    argv[k++] = jobs_key(c, "uuid");
    argv[k++] = xasprintf("%d", keep);
    argv[k++] = xasprintf("%lld", (long long)retention_s * 1000);
    argv[k++] = xasprintf("%d", HISTORY_ATTEMPTS_MAX);
    argv[k++] = xasprintf("%d", n + HISTORY_TRIM_BUDGET);
    for (int i = 0; i < n; i++) {
        argv[k++] = record_uuid(recs[i]);
        argv[k++] = xstrdup(recs[i]);
    }
    int rv = -1;
    redisReply *r;
    if (rconn_script(c, &add_jobs_script, 2, argc, (const char **)argv, NULL, -1, -1, &r) == RC_OK) {
        rv = r->type == REDIS_REPLY_ERROR ? -2 : 0;
        freeReplyObject(r);
    }
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
    return rv;
}

static bool field_is(const cJSON *rec, const char *k, const char *want)
{
    if (!want) return true;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, k);
    return cJSON_IsString(v) && !strcmp(v->valuestring, want);
}

static double finished_at(const cJSON *rec);

/* ASCII capitals to lower case: eight bytes at a time, each byte's high
 * bit marking 'A'..'Z' (a byte of 0x80 or more is left as it is), then
 * the bytes left one by one */
static void fold(char *dst, const char *src, size_t n)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, t;
        memcpy(&x, src + i, 8);
        t = x & ~high;
        uint64_t ge_a = t + ones * (0x80 - 'A'), gt_z = t + ones * (0x80 - 'Z' - 1);
        x |= ((ge_a & ~gt_z & ~x) & high) >> 2;
        memcpy(dst + i, &x, 8);
    }
    for (; i < n; i++) {
        unsigned char u = (unsigned char)src[i];
        dst[i] = (char)(u >= 'A' && u <= 'Z' ? u + 32u : u);
    }
}

#define FOLD_WINDOW 4096 /* hay bytes folded per memmem */

/* needle in hay, ASCII letters' case ignored: the hay is folded to lower
 * case a window at a time (windows overlap by the needle's length less
 * one) and each window searched with memmem, which is linear whatever the
 * two hold (a needle of "aaa...b" in "aaa...") and several times faster
 * than the rolling hash it replaced (a search of 100,000 records) */
static bool has_text(const char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    if (!k) return true;
    if (k > n) return false;
    char stack[FOLD_WINDOW + 1024];
    size_t need = 2 * k + FOLD_WINDOW;
    char *low = need <= sizeof stack ? stack : xmalloc(need), *win = low + k;
    fold(low, needle, k);
    bool found = false;
    for (size_t at = 0; !found && at + k <= n; at += FOLD_WINDOW) {
        size_t len = n - at < FOLD_WINDOW + k - 1 ? n - at : FOLD_WINDOW + k - 1;
        fold(win, hay + at, len);
        found = memmem(win, len, low, k) != NULL;
    }
    if (low != stack) free(low);
    return found;
}

static bool str_has(const cJSON *rec, const char *k, const char *needle)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, k);
    return cJSON_IsString(v) && has_text(v->valuestring, strlen(v->valuestring), needle);
}

static bool tagged(const cJSON *rec, const char *tag)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(rec, "tags"))
        if (cJSON_IsString(t) && !strcmp(t->valuestring, tag)) return true;
    return false;
}

static bool attempt_is(const cJSON *rec, long want)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(rec, "attempt");
    return !want || (cJSON_IsNumber(a) && a->valuedouble == (double)want);
}

bool history_matches(const cJSON *rec, const job_filter_t *f)
{
    double at = finished_at(rec);
    return field_is(rec, "queue", f->queue) && field_is(rec, "pool", f->pool) && field_is(rec, "name", f->name) &&
           field_is(rec, "outcome", f->outcome) && field_is(rec, "uuid", f->uuid) && field_is(rec, "host", f->host) &&
           (!f->tag || tagged(rec, f->tag)) && attempt_is(rec, f->attempt) &&
           (!f->silenced || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "silenced")) == (f->silenced > 0)) &&
           (!f->text || str_has(rec, "name", f->text) || str_has(rec, "exception", f->text) ||
            str_has(rec, "payload", f->text)) &&
           (!f->since_ms || at >= (double)f->since_ms) && (!f->until_ms || at <= (double)f->until_ms);
}

/* Is s written as it is inside a JSON string (no byte cJSON escapes)? */
static bool json_verbatim(const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 0x20 || *c == '"' || *c == '\\' || *c == 0x7f) return false;
    return true;
}

/* s as a JSON string value, quotes included, into out (cap bytes), when
 * every encoder writes it the same way (printable ASCII: a backslash
 * doubled, nothing else escaped): its length; 0 for anything else (a
 * quote, a control byte, UTF-8, which one encoder writes as it is and
 * another as \u escapes) or when out is too small. */
static size_t json_quoted(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    out[n++] = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c < 0x20 || *c >= 0x7f || *c == '"' || n + 3 > cap) return 0;
        if (*c == '\\') out[n++] = '\\';
        out[n++] = (char)*c;
    }
    out[n++] = '"';
    return n;
}

/* Could rec hold the JSON string value s (exactly)? true when s is not one
 * json_quoted writes. */
static bool may_hold_value(const char *rec, size_t len, const char *s)
{
    char q[2 * 1024 + 3];
    size_t n = json_quoted(s, q, sizeof q);
    return !n || memmem(rec, len, q, n) != NULL;
}

bool history_may_match(const char *rec, size_t len, const job_filter_t *f)
{
    /* a tag and the class are JSON strings of the record, so the exact
     * value with its quotes must be in its bytes; a payload is JSON inside a
     * JSON string: its quotes and backslashes are escaped twice, so only
     * plain text is looked for in bytes */
    if (f->tag && !may_hold_value(rec, len, f->tag)) return false;
    if (f->name && !may_hold_value(rec, len, f->name)) return false;
    if (f->text && json_verbatim(f->text) && !has_text(rec, len, f->text)) return false;
    return true;
}

static double finished_at(const cJSON *rec)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rec, "finished_at");
    return cJSON_IsNumber(t) ? t->valuedouble : 0;
}

static double attempt_of(const cJSON *rec)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rec, "attempt");
    return cJSON_IsNumber(t) ? t->valuedouble : 0;
}

/* By finish time, then (two attempts of a job in one ms) by attempt. */
static int newest_first(const void *a, const void *b)
{
    const cJSON *p = *(cJSON *const *)a, *q = *(cJSON *const *)b;
    double x = finished_at(p), y = finished_at(q);
    if (x == y) x = attempt_of(p), y = attempt_of(q);
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Records (JSON strings) into v, those that parse and match f. */
static void take(const redisReply *e, const job_filter_t *f, cJSON ***v, size_t *n, size_t *cap)
{
    cJSON *rec = e->type == REDIS_REPLY_STRING ? cJSON_ParseWithLength(e->str, e->len) : NULL;
    if (!rec || !cJSON_IsObject(rec) || !history_matches(rec, f)) {
        cJSON_Delete(rec);
        return;
    }
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *v = xrealloc(*v, *cap * sizeof **v);
    }
    (*v)[(*n)++] = rec;
}

/* {"jobs":[...]}: v newest first, at most limit (0: all); v's records are
 * moved in or freed. */
static cJSON *jobs_json(cJSON **v, size_t n, int limit)
{
    /* the list is in the order masters wrote it; workers' records of one
     * pass interleave: order by when each attempt finished */
    if (n) qsort(v, n, sizeof *v, newest_first);
    cJSON *out = cJSON_CreateObject();
    cJSON *jobs = cJSON_AddArrayToObject(out, "jobs");
    for (size_t i = 0; i < n; i++) {
        if (!limit || i < (size_t)limit)
            cJSON_AddItemToArray(jobs, v[i]);
        else
            cJSON_Delete(v[i]);
    }
    free(v);
    return out;
}

/* One job's records: its field of the index (one HGET, bounded by
 * HISTORY_ATTEMPTS_MAX records). */
static cJSON *jobs_of_uuid(rconn_t *c, const job_filter_t *f)
{
    char *key = jobs_key(c, "uuid");
    const char *argv[] = {"HGET", key, f->uuid};
    redisReply *r = rconn_call(c, 3, argv, NULL);
    free(key);
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
        if (r) freeReplyObject(r);
        return NULL;
    }
    cJSON **v = NULL;
    size_t n = 0, cap = 0;
    for (size_t at = 0; r->type == REDIS_REPLY_STRING && at < r->len;) {
        const char *nl = memchr(r->str + at, '\n', r->len - at);
        size_t end = nl ? (size_t)(nl - r->str) : r->len;
        redisReply line = {.type = REDIS_REPLY_STRING, .str = r->str + at, .len = end - at};
        take(&line, f, &v, &n, &cap);
        at = end + 1;
    }
    freeReplyObject(r);
    return jobs_json(v, n, f->limit);
}

/* A page of records (LRANGE's reply r) into v: those that match f. True
 * when *newest (the latest finished_at of the page) is known: from the
 * records parsed and, when f has since, the page's first and last records
 * (else a since search whose text is nowhere would read the whole list). */
static bool scan_page(const redisReply *r, const job_filter_t *f, cJSON ***v, size_t *n, size_t *cap,
                      double *newest)
{
    bool seen = false;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_STRING && !history_may_match(e->str, e->len, f)) continue;
        size_t before = *n;
        take(e, &(job_filter_t){0}, v, n, cap);
        if (*n == before) continue;
        double at = finished_at((*v)[*n - 1]);
        if (at > *newest) *newest = at;
        seen = true;
        if (!history_matches((*v)[*n - 1], f)) cJSON_Delete((*v)[--*n]);
    }
    /* with since, the page's first and last records count too (one host's
     * clock behind, or a backlog pushed late, can put an old record among
     * those the byte test let through, or at one end; review of 2026-11-29) */
    for (size_t k = 0; f->since_ms && k < 2 && r->elements; k++) {
        const redisReply *e = r->element[k ? r->elements - 1 : 0];
        cJSON *rec = e->type == REDIS_REPLY_STRING ? cJSON_ParseWithLength(e->str, e->len) : NULL;
        if (rec && finished_at(rec) > *newest) *newest = finished_at(rec);
        cJSON_Delete(rec);
    }
    return seen || *newest > 0;
}

/* Does the list hold more than n records? (Yes when LLEN fails: the
 * answer then says it may be cut.) */
static bool list_longer(rconn_t *c, const char *key, long n)
{
    const char *argv[] = {"LLEN", key};
    redisReply *r = rconn_call(c, 2, argv, NULL);
    bool more = !r || r->type != REDIS_REPLY_INTEGER || r->integer > n;
    if (r) freeReplyObject(r);
    return more;
}

/* The newest records: LRANGE in pages from the head, until limit match,
 * the list ends, the records are older than since, or HISTORY_SCAN_MAX
 * records or HISTORY_SCAN_BYTES were read (then "truncated": true when
 * the list holds more). Never the whole list at once. */
static cJSON *jobs_scan(rconn_t *c, const char *key, const job_filter_t *f)
{
    bool filtered = f->queue || f->pool || f->name || f->outcome || f->host || f->tag || f->text || f->attempt ||
                    f->silenced ||
                    f->since_ms || f->until_ms;
    long page = filtered ? HISTORY_SCAN_PAGE : (f->limit ? f->limit : HISTORY_SCAN_PAGE);
    cJSON **v = NULL;
    size_t n = 0, cap = 0;
    long from = 0;
    size_t bytes = 0;
    bool failed = false, truncated = false;
    for (;;) {
        char a[24], b[24];
        snprintf(a, sizeof a, "%ld", from);
        snprintf(b, sizeof b, "%ld", from + page - 1);
        const char *argv[] = {"LRANGE", key, a, b};
        redisReply *r = rconn_call(c, 4, argv, NULL);
        if (!r || r->type != REDIS_REPLY_ARRAY) {
            if (r) freeReplyObject(r);
            failed = true;
            break;
        }
        double newest = 0;
        bool seen = scan_page(r, f, &v, &n, &cap, &newest);
        size_t got = r->elements;
        for (size_t i = 0; i < got; i++) bytes += r->element[i]->len;
        freeReplyObject(r);
        from += page;
        if (got < (size_t)page || (f->limit && n >= (size_t)f->limit) ||
            (f->since_ms && seen && newest < (double)f->since_ms))
            break;
        if (from >= HISTORY_SCAN_MAX || bytes >= HISTORY_SCAN_BYTES) {
            truncated = list_longer(c, key, from);
            break;
        }
    }
    if (failed) {
        while (n) cJSON_Delete(v[--n]);
        free(v);
        return NULL;
    }
    cJSON *out = jobs_json(v, n, f->limit);
    if (truncated) cJSON_AddTrueToObject(out, "truncated");
    return out;
}

cJSON *history_jobs(rconn_t *c, const job_filter_t *f)
{
    if (rconn_ensure(c) < 0) return NULL;
    if (f->uuid) return jobs_of_uuid(c, f);
    char *key = jobs_key(c, "list");
    cJSON *out = jobs_scan(c, key, f);
    free(key);
    return out;
}

cJSON *history_jobs_in(rconn_t *c, const char *key, const job_filter_t *f)
{
    return rconn_ensure(c) < 0 ? NULL : jobs_scan(c, key, f);
}
