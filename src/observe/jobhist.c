/*
 * jobhist.c - the record of recent jobs: the worker's ring, the datagram,
 * the master's strict decoding and pending list (see jobhist.h). Pure.
 */
#include "observe/jobhist.h"
#include "observe/metrics.h"
#include "redis/payload.h"
#include "core/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MS 3.2e10                /* a year, in ms */
#define MAX_UNIX_MS 1e14             /* year 5138: a UNIX ms time is below it */

/* ------------------------------------------------------------ the worker */

void jobhist_init(jobhist_t *h, int cap, double sample, bool payloads)
{
    memset(h, 0, sizeof *h);
    h->cap = cap;
    h->v = cap ? xcalloc((size_t)cap, sizeof *h->v) : NULL;
    h->sample = sample;
    h->payloads = payloads;
}

void jobhist_free(jobhist_t *h)
{
    for (int i = 0; i < h->cap; i++) free(h->v[i].payload), free(h->v[i].tags);
    free(h->v);
    memset(h, 0, sizeof *h);
}

static bool sampled(jobhist_t *h, int outcome)
{
    if (outcome != OUTCOME_DONE && outcome != OUTCOME_RELEASED) return true; /* failures always */
    if (h->sample >= 1) return true;
    h->acc += h->sample;
    if (h->acc < 1) return false;
    h->acc -= 1;
    return true;
}

jobrec_t *jobhist_add(jobhist_t *h, int outcome)
{
    if (!h->cap || !sampled(h, outcome)) return NULL;
    jobrec_t *r = &h->v[h->next];
    free(r->payload);
    free(r->tags);
    memset(r, 0, sizeof *r);
    r->outcome = outcome;
    r->wait_ms = -1;
    h->next = (h->next + 1) % h->cap;
    if (h->n < h->cap) h->n++;
    return r;
}

void jobhist_set_str(char *dst, size_t cap, const char *s)
{
    char *ok = utf8_repair(s ? s : "", s ? strlen(s) : 0, NULL);
    size_t n = utf8_cut(ok, strlen(ok), cap - 1);
    for (size_t i = 0; i < n; i++) dst[i] = (unsigned char)ok[i] < 0x20 ? ' ' : ok[i]; /* one line */
    dst[n] = '\0';
    free(ok);
}

void jobhist_set_payload(jobrec_t *r, const char *p, size_t len)
{
    free(r->payload);
    r->payload = NULL;
    if (memchr(p, '\0', len)) return;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)p[i] < 0x20 && p[i] != '\n' && p[i] != '\r' && p[i] != '\t') return; /* not JSON text */
    /* a copy to show, not to run: repaired to valid UTF-8 (the queue and
     * the failed store keep the job's own bytes) */
    size_t fixed, take = len > JOBHIST_PAYLOAD_MAX + 4 ? JOBHIST_PAYLOAD_MAX + 4 : len;
    /* only what can be kept is copied: a replacement the cut of the input
     * makes lands past JOBHIST_PAYLOAD_MAX (output never trails input) */
    char *ok = utf8_repair(p, take, &fixed);
    r->payload_truncated = len > take || fixed > JOBHIST_PAYLOAD_MAX;
    r->payload_len = utf8_cut(ok, fixed, JOBHIST_PAYLOAD_MAX);
    ok[r->payload_len] = '\0';
    r->payload = ok;
}

static bool has_tag(const jobrec_t *r, const char *t, size_t n)
{
    for (const char *p = r->tags; p && p < r->tags + r->tags_len;) {
        const char *nl = memchr(p, '\n', (size_t)(r->tags + r->tags_len - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(r->tags + r->tags_len - p);
        if (len == n && !memcmp(p, t, n)) return true;
        p += len + 1;
    }
    return false;
}

static void add_tag(jobrec_t *r, const char *s)
{
    char t[JOBHIST_TAG_MAX + 1];
    jobhist_set_str(t, sizeof t, s);
    size_t n = strlen(t);
    if (!n || has_tag(r, t, n)) return;
    r->tags = xrealloc(r->tags, r->tags_len + n + 2);
    if (r->ntags) r->tags[r->tags_len++] = '\n';
    memcpy(r->tags + r->tags_len, t, n + 1);
    r->tags_len += n;
    r->ntags++;
}

int jobhist_add_tags(jobrec_t *r, const char *json, size_t len)
{
    cJSON *arr = json && len ? cJSON_ParseWithLength(json, len) : NULL;
    int before = r->ntags;
    const cJSON *t;
    if (cJSON_IsArray(arr))
        cJSON_ArrayForEach(t, arr) {
            if (r->ntags >= JOBHIST_TAGS_MAX) break;
            if (cJSON_IsString(t) && t->valuestring) add_tag(r, t->valuestring);
        }
    cJSON_Delete(arr);
    return r->ntags - before;
}

bool jobhist_batch_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (!n || n > JOBHIST_BATCH_MAX) return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("-_.:", *c)))
            return false;
    return true;
}

/* ---- a batch id from the payload's serialized command */

static bool hex4(const char *s, size_t n, unsigned *cp)
{
    *cp = 0;
    for (size_t i = 0; i < 4; i++) {
        if (i >= n) return false;
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) return false;
        *cp = *cp << 4 | (unsigned)v;
    }
    return true;
}

static size_t utf8_put(char *o, unsigned cp)
{
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One \uXXXX escape (a surrogate pair as one) at s[i] (the 'u') into o;
 * its last byte's index in *end. The output is never longer than the
 * escape. */
static size_t json_u(const char *s, size_t i, size_t n, char *o, size_t *end)
{
    unsigned cp, lo;
    if (!hex4(s + i + 1, n - i - 1, &cp)) return *end = n, 0;
    *end = i + 4;
    if (cp >= 0xD800 && cp < 0xDC00 && i + 10 < n && s[i + 5] == '\\' && s[i + 6] == 'u' &&
        hex4(s + i + 7, n - i - 7, &lo) && lo >= 0xDC00 && lo < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        *end = i + 10;
    }
    return utf8_put(o, cp);
}

/* A JSON string's bytes (s: its text with the quotes), NUL bytes kept, as
 * PHP counts them; NULL when it is not a string. Caller frees. */
static char *json_bytes(const char *s, size_t n, size_t *outn)
{
    if (n < 2 || s[0] != '"' || s[n - 1] != '"') return NULL;
    char *o = xmalloc(n);
    size_t k = 0;
    n--; /* the closing quote */
    for (size_t i = 1; i < n; i++) {
        if (s[i] != '\\') {
            o[k++] = s[i];
        } else if (++i < n) {
            const char *e = strchr("b\bf\fn\nr\rt\t", s[i]);
            if (s[i] == 'u')
                k += json_u(s, i, n, o + k, &i);
            else
                o[k++] = e && s[i] ? e[1] : s[i];
        }
    }
    *outn = k;
    return o;
}

/* Digits at s[*p] then sep; the number in *v, *p past sep. Digits stop
 * where one more could overflow (size_t of any width). */
static bool php_num(const char *s, size_t n, size_t *p, char sep, size_t *v)
{
    size_t i = *p;
    *v = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9' && *v <= (SIZE_MAX - 9) / 10) *v = *v * 10 + (size_t)(s[i++] - '0');
    if (i == *p || i >= n || s[i] != sep) return false;
    *p = i + 1;
    return true;
}

/* The quoted bytes of a token (`"` len bytes `"`) at s[*p]: [*vs, *ve). */
static bool php_quoted(const char *s, size_t n, size_t *p, size_t len, size_t *vs, size_t *ve)
{
    size_t i = *p;
    if (i >= n || s[i] != '"' || len > n - i - 1 || i + 1 + len >= n || s[i + 1 + len] != '"') return false;
    *vs = i + 1, *ve = i + 1 + len, *p = i + 2 + len;
    return true;
}

/* One token of PHP serialize text at s[i]: its end in *next, what it does
 * to the depth in *open (+1: an array's or object's '{', -1: '}'), a
 * string's bytes in [*vs, *ve). false when the text is not well formed. */
static bool php_token(const char *s, size_t n, size_t i, size_t *next, int *open, size_t *vs, size_t *ve)
{
    char t = s[i];
    size_t p = i + 2, len = 0, cnt;
    *open = 0, *vs = *ve = 0, *next = i + 1;
    if (t == '}') return *open = -1, true;
    if (t == 'N') return *next = i + 2, i + 1 < n && s[i + 1] == ';';
    if (!t || !strchr("bidrRasEOC", t) || i + 1 >= n || s[i + 1] != ':') return false;
    if (strchr("bidrR", t)) {
        const char *e = memchr(s + i, ';', n - i);
        *next = e ? (size_t)(e - s) + 1 : n;
        return e != NULL;
    }
    if (t != 'a' && (!php_num(s, n, &p, ':', &len) || !php_quoted(s, n, &p, len, vs, ve))) return false;
    if (t == 's' || t == 'E') return *next = p + 1, p < n && s[p] == ';';
    if (t != 'a' && (p >= n || s[p++] != ':')) return false;
    if (!php_num(s, n, &p, ':', &cnt) || p >= n || s[p] != '{') return false;
    if (t != 'C') return *open = 1, *next = p + 1, true;
    /* C: cnt bytes of the class's own format between the braces */
    return *next = p + 2 + cnt, cnt < n - p - 1 && s[p + 1 + cnt] == '}';
}

/* The string property "batchId" of the object s holds (PHP serialize
 * text), not one of a nested value: the tokens at depth 1 are its
 * properties' names and values, in turn. The same rule as the PHP
 * adapter's Tags::topBatchId (php/src/Tags.php): keep the two in step. */
static bool php_top_batch(const char *s, size_t n, char out[JOBHIST_BATCH_MAX + 1])
{
    size_t i = 0, next, vs, ve;
    long el = 0;
    int depth = 0, open;
    bool want = false;
    if (!n || s[0] != 'O') return false;
    while (i < n && php_token(s, n, i, &next, &open, &vs, &ve)) {
        if (depth == 1 && open >= 0) {
            if (want) {
                if (s[i] != 's' || ve - vs > JOBHIST_BATCH_MAX) return false;
                char id[JOBHIST_BATCH_MAX + 1];
                memcpy(id, s + vs, ve - vs), id[ve - vs] = 0;
                if (!jobhist_batch_ok(id)) return false;
                memcpy(out, id, ve - vs + 1);
                return true;
            }
            want = el++ % 2 == 0 && s[i] == 's' && ve - vs == 7 && !memcmp(s + vs, "batchId", 7);
        }
        depth += open;
        if (depth <= 0) return false; /* the object's end: none */
        i = next;
    }
    return false;
}

bool jobhist_payload_batch(const char *raw, size_t len, char out[JOBHIST_BATCH_MAX + 1])
{
    size_t ds, de, cs, ce, n;
    if (!raw || !memmem(raw, len, "batchId", 7) || !json_top_value(raw, len, "data", &ds, &de) ||
        !json_top_value(raw + ds, de - ds, "command", &cs, &ce))
        return false;
    char *cmd = json_bytes(raw + ds + cs, ce - cs, &n);
    bool ok = cmd && php_top_batch(cmd, n, out);
    free(cmd);
    return ok;
}

bool jobhist_silenced(const jobrec_t *r, char *const *classes, char *const *tags, bool job_says)
{
    if (r->outcome != OUTCOME_DONE) return false;
    if (job_says) return true;
    for (char *const *c = classes; c && *c; c++)
        if (!strcmp(*c, r->name)) return true;
    for (char *const *t = tags; t && *t; t++)
        if (has_tag(r, *t, strlen(*t))) return true;
    return false;
}

static cJSON *tags_json(const jobrec_t *r)
{
    cJSON *a = cJSON_CreateArray();
    for (const char *p = r->tags; p && p < r->tags + r->tags_len;) {
        const char *nl = memchr(p, '\n', (size_t)(r->tags + r->tags_len - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(r->tags + r->tags_len - p);
        char *one = xstrndup(p, len);
        cJSON_AddItemToArray(a, cJSON_CreateString(one));
        free(one);
        p += len + 1;
    }
    return a;
}

static cJSON *record_json(const jobrec_t *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "u", r->uuid);
    cJSON_AddStringToObject(o, "i", r->id);
    cJSON_AddStringToObject(o, "n", r->name);
    cJSON_AddStringToObject(o, "q", r->queue);
    cJSON_AddNumberToObject(o, "a", (double)r->attempt);
    cJSON_AddStringToObject(o, "o", outcome_name(r->outcome));
    cJSON_AddNumberToObject(o, "w", r->wait_ms < 0 ? -1 : r->wait_ms);
    cJSON_AddNumberToObject(o, "r", r->runtime_ms);
    cJSON_AddNumberToObject(o, "s", (double)r->started_at);
    cJSON_AddNumberToObject(o, "f", (double)r->finished_at);
    cJSON_AddStringToObject(o, "e", r->exception);
    if (r->ntags) cJSON_AddItemToObject(o, "g", tags_json(r));
    if (r->silenced) cJSON_AddTrueToObject(o, "z");
    if (r->apart) cJSON_AddTrueToObject(o, "k");
    if (r->batch[0]) cJSON_AddStringToObject(o, "b", r->batch);
    if (r->payload) {
        cJSON_AddItemToObject(o, "p", cJSON_CreateString(r->payload));
        if (r->payload_truncated) cJSON_AddTrueToObject(o, "t");
    }
    return o;
}

char *jobhist_encode_keep(const jobhist_t *h, const char *key, size_t *len, int *taken)
{
    *taken = 0;
    if (!h->n) return NULL;
    cJSON *top = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(top, key);
    size_t bytes = 0;
    for (int k = 0; k < JOBHIST_PAGE && k < h->n; k++) {
        const jobrec_t *r = &h->v[(h->next - h->n + k + h->cap) % h->cap];
        /* a datagram stays well under the socket's buffer (escaping may
         * double a payload) */
        size_t need = 2 * r->payload_len + 2 * r->tags_len + 2 * JOBHIST_EXC_MAX + 1024;
        if (k && bytes + need > JOBHIST_DATAGRAM_MAX) break;
        bytes += need;
        cJSON_AddItemToArray(arr, record_json(r));
        (*taken)++;
    }
    char *s = cJSON_PrintUnformatted(top);
    cJSON_Delete(top);
    *len = strlen(s);
    return s;
}

void jobhist_drop(jobhist_t *h, int n)
{
    for (; n > 0 && h->n; n--) {
        jobrec_t *r = &h->v[(h->next - h->n + h->cap) % h->cap];
        free(r->payload);
        free(r->tags);
        r->payload = NULL, r->tags = NULL, r->tags_len = 0, r->ntags = 0;
        h->n--;
    }
}

char *jobhist_encode(jobhist_t *h, size_t *len)
{
    int taken;
    char *s = jobhist_encode_keep(h, "h", len, &taken);
    jobhist_drop(h, taken);
    return s;
}

void jobhist_add_copy(jobhist_t *h, const jobrec_t *r)
{
    if (!h->cap) return;
    if (h->n == h->cap) h->lost++;
    jobrec_t *c = &h->v[h->next];
    free(c->payload);
    free(c->tags);
    *c = *r;
    c->payload = NULL, c->payload_len = 0, c->payload_truncated = false, c->apart = false;
    c->tags = r->tags ? xstrndup(r->tags, r->tags_len) : NULL;
    h->next = (h->next + 1) % h->cap;
    if (h->n < h->cap) h->n++;
}

/* ------------------------------------------------------------ the master */

bool jobhist_is_watched(const char *buf, size_t len)
{
    return len >= 5 && !memcmp(buf, "{\"m\":", 5);
}

bool jobhist_is_history(const char *buf, size_t len)
{
    return (len >= 5 && !memcmp(buf, "{\"h\":", 5)) || jobhist_is_watched(buf, len);
}

/* A string of at most max bytes of valid UTF-8 with no control byte: what a worker
 * writes (JSON payloads have none; exceptions are made one line), and what
 * the master stores without it growing sixfold as \u00XX escapes. */
static const char *str_of(const cJSON *o, const char *k, size_t max, bool empty_ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsString(v) || strlen(v->valuestring) > max || (!empty_ok && !*v->valuestring) ||
        !utf8_valid(v->valuestring, strlen(v->valuestring)))
        return NULL;
    for (const unsigned char *c = (const unsigned char *)v->valuestring; *c; c++)
        if (*c < 0x20 && *c != '\n' && *c != '\r' && *c != '\t') return NULL; /* JSON whitespace may stay */
    return v->valuestring;
}

static bool num_of(const cJSON *o, const char *k, double min, double max, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min || v->valuedouble > max) return false;
    *out = v->valuedouble;
    return true;
}

static bool known_queue(const char *q, char *const *queues, int nqueues)
{
    for (int i = 0; i < nqueues; i++)
        if (!strcmp(queues[i], q)) return true;
    return false;
}

/* A worker's tags ("g", optional): at most JOBHIST_TAGS_MAX non-empty
 * one-line strings of valid UTF-8 of at most JOBHIST_TAG_MAX bytes, as
 * jobhist_add_tags makes them; a new array (empty when absent), or NULL. */
static cJSON *tags_of(const cJSON *x)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(x, "g"), *t;
    if (g && (!cJSON_IsArray(g) || cJSON_GetArraySize(g) > JOBHIST_TAGS_MAX)) return NULL;
    cJSON *out = cJSON_CreateArray();
    cJSON_ArrayForEach(t, g) {
        const char *s = cJSON_IsString(t) ? t->valuestring : NULL;
        bool ok = s && *s && strlen(s) <= JOBHIST_TAG_MAX && utf8_valid(s, strlen(s));
        for (const unsigned char *c = (const unsigned char *)s; ok && *c; c++)
            if (*c < 0x20) ok = false;
        if (!ok) {
            cJSON_Delete(out);
            return NULL;
        }
        cJSON_AddItemToArray(out, cJSON_CreateString(s));
    }
    return out;
}

typedef struct {
    const char *pool, *host, *worker;
    int pid;
} origin_t;

/* One worker record into an API record; NULL if anything is off. */
static cJSON *decode_record(const cJSON *x, char *const *queues, int nqueues, const origin_t *from)
{
    const char *u = str_of(x, "u", 63, true), *i = str_of(x, "i", 63, true), *n = str_of(x, "n", 255, true),
               *q = str_of(x, "q", 63, false), *o = str_of(x, "o", 16, false),
               *e = str_of(x, "e", JOBHIST_EXC_MAX - 1, true), *p = NULL;
    double a, w, r, s, f;
    if (!cJSON_IsObject(x) || !u || !i || !n || !q || !o || !e || outcome_from_name(o) < 0 ||
        !known_queue(q, queues, nqueues) || !num_of(x, "a", 0, 1e9, &a) || a != floor(a) ||
        !num_of(x, "w", -1, MAX_MS, &w) || !num_of(x, "r", 0, MAX_MS, &r) || !num_of(x, "s", 0, MAX_UNIX_MS, &s) ||
        !num_of(x, "f", 0, MAX_UNIX_MS, &f))
        return NULL;
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(x, "p");
    if (pv && !(p = str_of(x, "p", JOBHIST_PAYLOAD_MAX, true))) return NULL;
    const cJSON *bv = cJSON_GetObjectItemCaseSensitive(x, "b");
    if (bv && !(cJSON_IsString(bv) && jobhist_batch_ok(bv->valuestring))) return NULL;
    cJSON *tags = tags_of(x);
    if (!tags) return NULL;
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "uuid", u);
    cJSON_AddStringToObject(out, "id", i);
    cJSON_AddStringToObject(out, "name", n);
    cJSON_AddStringToObject(out, "queue", q);
    cJSON_AddStringToObject(out, "pool", from->pool);
    cJSON_AddStringToObject(out, "host", from->host);
    cJSON_AddStringToObject(out, "worker", from->worker);
    cJSON_AddNumberToObject(out, "pid", from->pid);
    cJSON_AddNumberToObject(out, "attempt", a);
    cJSON_AddStringToObject(out, "outcome", o);
    if (w < 0)
        cJSON_AddNullToObject(out, "wait_ms");
    else
        cJSON_AddNumberToObject(out, "wait_ms", round(w * 10) / 10);
    cJSON_AddNumberToObject(out, "runtime_ms", round(r * 10) / 10);
    cJSON_AddNumberToObject(out, "started_at", s);
    cJSON_AddNumberToObject(out, "finished_at", f);
    if (*e)
        cJSON_AddStringToObject(out, "exception", e);
    else
        cJSON_AddNullToObject(out, "exception");
    cJSON_AddItemToObject(out, "tags", tags);
    cJSON_AddBoolToObject(out, "silenced", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "z")) &&
                                               outcome_from_name(o) == OUTCOME_DONE);
    if (p) {
        cJSON_AddStringToObject(out, "payload", p);
        cJSON_AddBoolToObject(out, "payload_truncated", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "t")));
    }
    if (bv) cJSON_AddStringToObject(out, "batch", bv->valuestring);
    return out;
}

int jobhist_decode_ex(const char *buf, size_t len, char *const *queues, int nqueues, const char *pool,
                      const char *host, const char *worker, int pid, cJSON *out, bool *apart, char *err,
                      size_t errn)
{
    cJSON *top = cJSON_ParseWithLength(buf, len);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(top, jobhist_is_watched(buf, len) ? "m" : "h");
    if (!cJSON_IsObject(top) || cJSON_GetArraySize(top) != 1 || !cJSON_IsArray(arr) ||
        cJSON_GetArraySize(arr) > JOBHIST_PAGE) {
        snprintf(err, errn, "not {\"h\":[at most %d records]}", JOBHIST_PAGE);
        cJSON_Delete(top);
        return -1;
    }
    origin_t from = {pool, host, worker, pid};
    cJSON *got = cJSON_CreateArray();
    const cJSON *x;
    int k = 0;
    cJSON_ArrayForEach(x, arr) {
        cJSON *rec = decode_record(x, queues, nqueues, &from);
        if (!rec) {
            snprintf(err, errn, "a job record is malformed or names a queue not of the pool");
            cJSON_Delete(got);
            cJSON_Delete(top);
            return -1;
        }
        if (apart) apart[k] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "k"));
        k++;
        cJSON_AddItemToArray(got, rec);
    }
    int n = cJSON_GetArraySize(got);
    while (cJSON_GetArraySize(got)) cJSON_AddItemToArray(out, cJSON_DetachItemFromArray(got, 0));
    cJSON_Delete(got);
    cJSON_Delete(top);
    return n;
}

int jobhist_decode(const char *buf, size_t len, char *const *queues, int nqueues, const char *pool,
                   const char *host, const char *worker, int pid, cJSON *out, char *err, size_t errn)
{
    return jobhist_decode_ex(buf, len, queues, nqueues, pool, host, worker, pid, out, NULL, err, errn);
}

void jobhist_pending_init(jobhist_pending_t *p, int cap)
{
    memset(p, 0, sizeof *p);
    p->cap = cap;
    p->v = cap ? xcalloc((size_t)cap, sizeof *p->v) : NULL;
    p->apart = cap ? xcalloc((size_t)cap, sizeof *p->apart) : NULL;
}

void jobhist_pending_clear(jobhist_pending_t *p)
{
    for (int i = 0; i < p->cap; i++) {
        free(p->v[i]);
        p->v[i] = NULL;
    }
    p->n = p->next = 0;
    p->bytes = 0;
}

void jobhist_pending_free(jobhist_pending_t *p)
{
    jobhist_pending_clear(p);
    free(p->v);
    free(p->apart);
    memset(p, 0, sizeof *p);
}

void jobhist_pending_add(jobhist_pending_t *p, char *json)
{
    jobhist_pending_add_apart(p, json, false);
}

void jobhist_pending_add_apart(jobhist_pending_t *p, char *json, bool apart)
{
    size_t len = strlen(json);
    if (!p->cap || len > JOBHIST_RECORD_MAX) {
        free(json);
        return;
    }
    /* bounded by count, and by bytes: the oldest go first */
    while (p->n && (p->n == p->cap || p->bytes + len > JOBHIST_PENDING_BYTES)) {
        int oldest = (p->next - p->n + p->cap) % p->cap;
        p->bytes -= strlen(p->v[oldest]);
        free(p->v[oldest]);
        p->v[oldest] = NULL;
        p->n--;
    }
    p->v[p->next] = json;
    p->apart[p->next] = apart;
    p->bytes += len;
    p->next = (p->next + 1) % p->cap;
    p->n++;
}

int jobhist_pending_list(const jobhist_pending_t *p, const char **out, int max)
{
    int k = 0;
    for (int i = 0; i < p->n && k < max; i++) out[k++] = p->v[(p->next - p->n + i + p->cap) % p->cap];
    return k;
}

int jobhist_pending_list_near(const jobhist_pending_t *p, const char **out, int max)
{
    int k = 0;
    for (int i = 0; i < p->n && k < max; i++) {
        int at = (p->next - p->n + i + p->cap) % p->cap;
        if (!p->apart[at]) out[k++] = p->v[at];
    }
    return k;
}
