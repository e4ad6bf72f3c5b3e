/*
 * qlimit_tags.c - see qlimit_tags.h. Every rule here mirrors a line of
 * QLIMIT_TAGS_LUA (qlimit.c); a change to one is a change to both
 * (tests/integration/test_limits_tags_cluster.py feeds both the same
 * payloads).
 */
#include "redis/qlimit_tags.h"
#include "core/util.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QTAGS_DEPTH 1000 /* as Lua cjson's decode: deeper is not a job */
#define QTAGS_MODELS 8
#define QTAGS_PSTR_MAX 4096

static void add(qtags_t *t, const char *a, size_t alen, const char *b, size_t blen)
{
    t->v = xrealloc(t->v, sizeof *t->v * (size_t)(t->n + 1));
    qtag_t *g = &t->v[t->n++];
    g->len = alen + blen;
    g->s = xmalloc(g->len + 1);
    memcpy(g->s, a, alen);
    if (blen) memcpy(g->s + alen, b, blen);
    g->s[g->len] = '\0';
}

void qtags_free(qtags_t *t)
{
    for (int i = 0; i < t->n; i++) free(t->v[i].s);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

/* ------------------------------------------------------------ JSON */

typedef struct {
    const char *p, *end;
} js_t;

static void ws(js_t *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* \uXXXX (and a surrogate pair's second half) at j->p (after the 'u'):
 * the code point, -1 if malformed. */
static long uescape(js_t *j)
{
    if (j->end - j->p < 4) return -1;
    long c = hex4(j->p);
    j->p += 4;
    if (c < 0xD800 || c > 0xDFFF) return c;
    if (c > 0xDBFF || j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') return -1;
    long lo = hex4(j->p + 2);
    if (lo < 0xDC00 || lo > 0xDFFF) return -1;
    j->p += 6;
    return 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
}

static size_t utf8(long c, char *o)
{
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3F)), 2;
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 0x3F)), o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (char)(0x80 | (c >> 6 & 0x3F)), o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* The string at j->p (a '"'), decoded into out (NULL: skipped): 0, -1. */
static int jstr(js_t *j, qtags_t *out)
{
    if (j->p >= j->end || *j->p != '"') return -1;
    j->p++;
    size_t n = 0, cap = 64;
    char *buf = out ? xmalloc(cap) : NULL;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++, u[4];
        size_t k = 1;
        u[0] = c;
        if (c == '\\') {
            if (j->p >= j->end) break;
            char e = *j->p++;
            const char *m = strchr("\"\\/bfnrt", e);
            if (e == 'u') {
                long cp = uescape(j);
                if (cp < 0) break;
                k = utf8(cp, u);
            } else if (e && m) {
                u[0] = "\"\\/\b\f\n\r\t"[m - "\"\\/bfnrt"];
            } else break;
        }
        if (buf && n + k > cap) buf = xrealloc(buf, cap *= 2); /* never the payload's size for a name */
        if (buf) memcpy(buf + n, u, k);
        n += k;
    }
    bool ok = j->p < j->end && *j->p == '"';
    if (ok) j->p++;
    if (ok && out) add(out, buf, n, NULL, 0);
    free(buf);
    return ok ? 0 : -1;
}

static int jval(js_t *j, int depth);

/* The array or object at j->p: 0, -1. */
static int jcontainer(js_t *j, int depth)
{
    char close = *j->p == '[' ? ']' : '}';
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == close) return j->p++, 0;
    for (;;) {
        if (close == '}') {
            ws(j);
            if (jstr(j, NULL) < 0) return -1;
            ws(j);
            if (j->p >= j->end || *j->p++ != ':') return -1;
        }
        if (jval(j, depth + 1) < 0) return -1;
        ws(j);
        if (j->p >= j->end) return -1;
        char c = *j->p++;
        if (c == close) return 0;
        if (c != ',') return -1;
    }
}

/* Skip the value at j->p (whitespace first): 0, -1. */
static int jval(js_t *j, int depth)
{
    ws(j);
    if (j->p >= j->end || depth > QTAGS_DEPTH) return -1;
    if (*j->p == '"') return jstr(j, NULL);
    if (*j->p == '[' || *j->p == '{') return jcontainer(j, depth);
    const char *s = j->p;
    while (j->p < j->end && strchr("+-.0123456789eEaflnrstuIinyN", *j->p)) j->p++;
    return j->p > s ? 0 : -1;
}

/* In the object at j->p, where the LAST member named key starts (Lua's
 * cjson keeps the last of repeated names), whitespace skipped; NULL: none
 * or malformed. */
static const char *jmember(js_t j, const char *key, int depth)
{
    ws(&j);
    if (j.p >= j.end || *j.p != '{') return NULL;
    j.p++;
    const char *found = NULL;
    size_t klen = strlen(key);
    for (bool first = true;; first = false) {
        ws(&j);
        if (first && j.p < j.end && *j.p == '}') return found;
        qtags_t name = {0};
        if (jstr(&j, &name) < 0) return NULL;
        bool is = name.v[0].len == klen && !memcmp(name.v[0].s, key, klen);
        qtags_free(&name);
        ws(&j);
        if (j.p >= j.end || *j.p++ != ':') return NULL;
        ws(&j);
        if (is) found = j.p;
        if (jval(&j, depth + 1) < 0) return NULL;
        ws(&j);
        if (j.p >= j.end) return NULL;
        char c = *j.p++;
        if (c == '}') return found;
        if (c != ',') return NULL;
    }
}

/* The "tags" array at p: its element count (strings among the first
 * QTAGS_MAX go to out); -1 if p is not an array. */
static int tags_array(const char *p, const char *end, qtags_t *out)
{
    js_t j = {p, end};
    if (j.p >= j.end || *j.p != '[') return -1;
    j.p++;
    ws(&j);
    if (j.p < j.end && *j.p == ']') return 0;
    for (int n = 1;; n++) {
        ws(&j);
        bool str = j.p < j.end && *j.p == '"';
        int rv = str && n <= QTAGS_MAX ? jstr(&j, out) : jval(&j, 1);
        ws(&j);
        if (rv < 0 || j.p >= j.end) return n;
        char c = *j.p++;
        if (c != ',') return n;
    }
}

/* ------------------------------------------------------------ PHP serialize */

typedef struct {
    const char *s;
    size_t len;
} php_t;

/* Digits at *at (one at least), saturating above QTAGS_PSTR_MAX. */
static bool digits(const php_t *x, size_t *at, size_t *val)
{
    size_t a = *at, v = 0;
    while (a < x->len && x->s[a] >= '0' && x->s[a] <= '9') {
        v = v > QTAGS_PSTR_MAX ? v : v * 10 + (size_t)(x->s[a] - '0');
        a++;
    }
    if (a == *at) return false;
    *at = a;
    *val = v;
    return true;
}

static bool lit(const php_t *x, size_t at, const char *w)
{
    size_t n = strlen(w);
    return at <= x->len && x->len - at >= n && !memcmp(x->s + at, w, n);
}

/* s:N:"...";  at at: the string's start and length, *next after it. */
static bool pstr(const php_t *x, size_t at, size_t *v, size_t *vlen, size_t *next)
{
    size_t n;
    if (!lit(x, at, "s:")) return false;
    at += 2;
    if (!digits(x, &at, &n) || !lit(x, at, ":\"") || n > QTAGS_PSTR_MAX) return false;
    at += 2;
    if (!lit(x, at + n, "\";")) return false;
    *v = at;
    *vlen = n;
    *next = at + n + 2;
    return true;
}

/* i:-?N;  or a string. */
static bool pscalar(const php_t *x, size_t at, size_t *v, size_t *vlen, size_t *next)
{
    if (lit(x, at, "i:")) {
        size_t a = at + 2, n;
        if (a < x->len && x->s[a] == '-') a++;
        if (digits(x, &a, &n) && lit(x, a, ";")) {
            *v = at + 2;
            *vlen = a - (at + 2);
            *next = a + 1;
            return true;
        }
    }
    return pstr(x, at, v, vlen, next);
}

/* An id, or an array of them (a collection): cls:id to out. */
static void pids(const php_t *x, size_t at, const char *cls, size_t clen, qtags_t *out)
{
    size_t v, vlen, next, n;
    char *c = xmalloc(clen + 2);
    memcpy(c, cls, clen);
    c[clen] = ':';
    if (pscalar(x, at, &v, &vlen, &next)) {
        add(out, c, clen + 1, x->s + v, vlen);
    } else if (lit(x, at, "a:") && (at += 2, digits(x, &at, &n)) && lit(x, at, ":{")) {
        at += 2;
        for (size_t i = 0; i < (n < QTAGS_MAX ? n : QTAGS_MAX); i++) {
            if (!pscalar(x, at, &v, &vlen, &next)) break;
            if (!pscalar(x, next, &v, &vlen, &at) || out->n >= QTAGS_MAX) break;
            add(out, c, clen + 1, x->s + v, vlen);
        }
    }
    free(c);
}

static void models(const php_t *x, qtags_t *out)
{
    static const char mark[] = "\"Illuminate\\Contracts\\Database\\ModelIdentifier\":";
    size_t from = 0, ml = sizeof mark - 1;
    for (int m = 0; m < QTAGS_MODELS; m++) {
        const char *a = from <= x->len ? memmem(x->s + from, x->len - from, mark, ml) : NULL;
        if (!a) return;
        from = (size_t)(a - x->s) + ml;
        size_t p = from, n, cls, clen, p2;
        if (!digits(x, &p, &n) || !lit(x, p, ":{")) continue;
        p += 2;
        if (!lit(x, p, "s:5:\"class\";") || !pstr(x, p + 12, &cls, &clen, &p2)) continue;
        if (lit(x, p2, "s:2:\"id\";")) pids(x, p2 + 9, x->s + cls, clen, out);
    }
}

/* ------------------------------------------------------------ keys */

void qtags_of_job(const char *payload, size_t len, qtags_t *out)
{
    memset(out, 0, sizeof *out);
    const char *end = payload + len;
    const char *t = jmember((js_t){payload, end}, "tags", 0);
    if (t && tags_array(t, end, out) > 0) return;
    qtags_free(out);
    const char *d = jmember((js_t){payload, end}, "data", 0);
    const char *c = d ? jmember((js_t){d, end}, "command", 1) : NULL;
    qtags_t cmd = {0};
    js_t j = {c, end};
    if (!c || *c != '"' || jstr(&j, &cmd) < 0) return;
    models(&(php_t){cmd.v[0].s, cmd.v[0].len}, out);
    qtags_free(&cmd);
}

static bool plain_key(const char *k, size_t n)
{
    if (n > QTAGS_KEY_LEN) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)k[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("_.@-", c);
        if (!ok || !c) return false;
    }
    return true;
}

static void hashed(const char *k, size_t n, qtags_t *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 3] = "h:";
    if (EVP_Digest(k, n, md, &mdlen, EVP_sha1(), NULL) != 1) mdlen = 0;
    for (unsigned int i = 0; i < mdlen; i++) {
        hex[2 + 2 * i] = "0123456789abcdef"[md[i] >> 4];
        hex[3 + 2 * i] = "0123456789abcdef"[md[i] & 15];
    }
    add(out, hex, 2 + 2 * (size_t)mdlen, NULL, 0);
}

void qtags_keys(const qtags_t *tags, const char *tp, qtags_t *out)
{
    memset(out, 0, sizeof *out);
    size_t tl = strlen(tp);
    for (int i = 0; i < tags->n && out->n < QTAGS_KEYS; i++) {
        const qtag_t *t = &tags->v[i];
        if (t->len <= tl || memcmp(t->s, tp, tl)) continue;
        qtags_t k = {0};
        if (plain_key(t->s + tl, t->len - tl)) add(&k, t->s + tl, t->len - tl, NULL, 0);
        else hashed(t->s + tl, t->len - tl, &k);
        bool seen = false;
        for (int s = 0; s < out->n && !seen; s++)
            seen = out->v[s].len == k.v[0].len && !memcmp(out->v[s].s, k.v[0].s, k.v[0].len);
        if (!seen) add(out, k.v[0].s, k.v[0].len, NULL, 0);
        qtags_free(&k);
    }
}
