/*
 * payload.c - see payload.h.
 */
#include "redis/payload.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A string field, repaired to valid UTF-8: the class name, uuid and id go
 * to metrics, logs, job records and the failed store's key, which carry
 * only valid UTF-8 (the raw payload itself is kept as it is). */
static char *dup_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v) && v->valuestring) return utf8_repair(v->valuestring, strlen(v->valuestring), NULL);
    if (cJSON_IsNumber(v)) {
        char buf[64];
        if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15)
            snprintf(buf, sizeof buf, "%.0f", v->valuedouble);
        else
            snprintf(buf, sizeof buf, "%g", v->valuedouble);
        return xstrdup(buf);
    }
    return NULL;
}

/* Laravel reads these as ints; PHP also accepts numeric strings. */
static bool get_long(const cJSON *o, const char *k, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    double d;
    if (cJSON_IsNumber(v))
        d = v->valuedouble;
    else if (cJSON_IsString(v) && v->valuestring) {
        char *end;
        d = strtod(v->valuestring, &end);
        if (end == v->valuestring || *end != '\0') return false;
    } else
        return false;
    if (!isfinite(d)) return false;
    /* clamp before converting: (long)1e300 is undefined behaviour */
    if (d > 1e15) d = 1e15;
    if (d < -1e15) d = -1e15;
    *out = (long)d;
    return true;
}

int payload_parse(const char *raw, size_t len, job_payload_t *p, char *err, size_t errn)
{
    memset(p, 0, sizeof *p);
    cJSON *o = cJSON_ParseWithLength(raw, len);
    if (!o) {
        snprintf(err, errn, "payload is not valid JSON");
        return -1;
    }
    if (!cJSON_IsObject(o)) {
        snprintf(err, errn, "payload is not a JSON object");
        cJSON_Delete(o);
        return -1;
    }
    if (!get_long(o, "attempts", &p->attempts)) {
        snprintf(err, errn, "payload has no numeric \"attempts\"");
        cJSON_Delete(o);
        return -1;
    }
    p->uuid = dup_str(o, "uuid");
    p->id = dup_str(o, "id");
    p->display_name = dup_str(o, "displayName");
    p->job = dup_str(o, "job");
    p->has_max_tries = get_long(o, "maxTries", &p->max_tries);
    p->has_max_exceptions = get_long(o, "maxExceptions", &p->max_exceptions);
    p->fail_on_timeout = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "failOnTimeout"));
    p->backoff = dup_str(o, "backoff");
    p->has_timeout = get_long(o, "timeout", &p->timeout);
    long ru;
    p->has_retry_until = get_long(o, "retryUntil", &ru);
    if (!p->has_retry_until) p->has_retry_until = get_long(o, "timeoutAt", &ru); /* 8.x legacy */
    if (p->has_retry_until) p->retry_until = ru;
    p->has_delay = get_long(o, "delay", &p->delay);
    long ca;
    long av = 0;
    p->has_available_at = get_long(o, PAYLOAD_AVAILABLE_AT, &av) && av > 0;
    if (p->has_available_at) p->available_at_ms = av;
    p->has_created_at = get_long(o, "createdAt", &ca) && ca > 0;
    if (p->has_created_at) p->created_at = ca;
    cJSON_Delete(o);
    return 0;
}

void payload_free(job_payload_t *p)
{
    FREE_ALL(p->uuid, p->id, p->display_name, p->job, p->backoff);
    memset(p, 0, sizeof *p);
}

const char *payload_name(const job_payload_t *p)
{
    if (p->display_name) return p->display_name;
    if (p->job) return p->job;
    return "?";
}

/* ------------------------------------------------------------ scanner */

/* Whitespace as cJSON reads it (any byte up to 32), so the scanner and the
 * parser agree on where every value starts. */
static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && (unsigned char)s[i] <= 32) i++;
    return i;
}

/* s[i] == '"': index just past the closing quote, or n on error. */
static size_t skip_string(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n + 1;
}

static size_t skip_value(const char *s, size_t i, size_t n)
{
    if (i >= n) return n + 1;
    if (s[i] == '"') return skip_string(s, i, n);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = skip_string(s, i, n);
                continue;
            }
            if (c == '{' || c == '[') depth++;
            if (c == '}' || c == ']') {
                depth--;
                if (depth == 0) return i + 1;
            }
            i++;
        }
        return n + 1;
    }
    size_t start = i;
    while (i < n && (unsigned char)s[i] > 32 && !strchr(",}]", s[i])) i++;
    return i > start ? i : n + 1;
}

/* Span of a top-level member: *ms at its key's opening quote, [*vs, *ve)
 * its value. */
static bool top_member(const char *s, size_t n, const char *key, size_t *ms, size_t *vs, size_t *ve)
{
    size_t klen = strlen(key);
    size_t i = skip_ws(s, 0, n);
    if (i >= n || s[i] != '{') return false;
    i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == '}') return false;
    while (i < n) {
        if (s[i] != '"') return false;
        size_t ks = i + 1, kend = skip_string(s, i, n);
        if (kend > n) return false;
        bool match = kend - 1 - ks == klen && memcmp(s + ks, key, klen) == 0;
        i = skip_ws(s, kend, n);
        if (i >= n || s[i] != ':') return false;
        i = skip_ws(s, i + 1, n);
        size_t v0 = i, v1 = skip_value(s, i, n);
        if (v1 > n) return false;
        if (match) {
            *ms = ks - 1;
            *vs = v0;
            *ve = v1;
            return true;
        }
        i = skip_ws(s, v1, n);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, i + 1, n);
            continue;
        }
        return false;
    }
    return false;
}

bool json_top_value(const char *s, size_t n, const char *key, size_t *vs, size_t *ve)
{
    size_t ms;
    return top_member(s, n, key, &ms, vs, ve);
}

char *payload_drop_key(const char *raw, size_t len, const char *key, size_t *outlen)
{
    size_t ms, vs, ve;
    if (!top_member(raw, len, key, &ms, &vs, &ve)) return NULL;
    size_t from = ms, to = skip_ws(raw, ve, len);
    if (to < len && raw[to] == ',') {
        to = skip_ws(raw, to + 1, len); /* the first member, or one in the middle: its comma after it */
    } else {
        to = ve; /* the last member: the comma before it */
        while (from > 0 && (unsigned char)raw[from - 1] <= 32) from--; /* as skip_ws */
        if (from > 0 && raw[from - 1] == ',') from--;
    }
    sbuf_t b;
    sbuf_init(&b);
    sbuf_append(&b, raw, from);
    sbuf_append(&b, raw + to, len - to);
    /* textual, so checked: still an object, and the key is gone (not a duplicate left behind) */
    cJSON *o = cJSON_ParseWithLength(b.data, b.len);
    bool ok = cJSON_IsObject(o) && !cJSON_GetObjectItemCaseSensitive(o, key);
    cJSON_Delete(o);
    if (!ok) {
        sbuf_free(&b);
        return NULL;
    }
    *outlen = b.len;
    return sbuf_steal(&b);
}

/* The top-level integer key reads back as v (cJSON: whitespace, escapes,
 * duplicates resolved as the parser does). */
static bool reads_back(const char *raw, size_t len, const char *key, long long v)
{
    cJSON *o = cJSON_ParseWithLength(raw, len);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    bool ok = cJSON_IsNumber(x) && x->valuedouble == (double)v;
    cJSON_Delete(o);
    return ok;
}

/* Copy of raw with top-level key set to the integer v (added if missing);
 * NULL if raw is not a JSON object or the edit would not read back. */
static char *set_int(const char *raw, size_t len, const char *key, long long v, size_t *outlen)
{
    /* Only ever edit what is a valid JSON object; the edit itself is textual. */
    cJSON *check = cJSON_ParseWithLength(raw, len);
    bool object = cJSON_IsObject(check);
    cJSON_Delete(check);
    if (!object) return NULL;
    size_t vs, ve;
    char num[32];
    snprintf(num, sizeof num, "%lld", v);
    sbuf_t b;
    sbuf_init(&b);
    if (json_top_value(raw, len, key, &vs, &ve)) {
        sbuf_append(&b, raw, vs);
        sbuf_puts(&b, num);
        sbuf_append(&b, raw + ve, len - ve);
    } else {
        /* Append before the closing brace of the top-level object. */
        size_t end = len;
        while (end > 0 && strchr(" \t\r\n", raw[end - 1])) end--;
        size_t i = skip_ws(raw, 0, len);
        if (end == 0 || raw[end - 1] != '}' || i >= len || raw[i] != '{' ||
            skip_value(raw, i, len) != end)
            return NULL;
        size_t inner = skip_ws(raw, i + 1, end - 1);
        bool empty = inner == end - 1;
        sbuf_append(&b, raw, end - 1);
        sbuf_printf(&b, "%s\"%s\":%s}", empty ? "" : ",", key, num);
        sbuf_append(&b, raw + end, len - end);
    }
    /* The edit is textual: make sure the parser reads back what was
     * written (an escaped key such as "attem\u0070ts" is not found by
     * the scanner, and a second key would lose to it). */
    if (!reads_back(b.data, b.len, key, v)) {
        sbuf_free(&b);
        return NULL;
    }
    *outlen = b.len;
    return sbuf_steal(&b);
}

char *payload_set_attempts(const char *raw, size_t len, long n, size_t *outlen)
{
    return set_int(raw, len, "attempts", n, outlen);
}

char *payload_set_available_at(const char *raw, size_t len, int64_t at_ms, size_t *outlen)
{
    return set_int(raw, len, PAYLOAD_AVAILABLE_AT, at_ms, outlen);
}

/* The payload's dispatch time, in whole seconds: createdAt (Laravel
 * 12.11+), else Horizon's pushedAt ("1700000000.1234"). */
static bool dispatched_at(const char *raw, size_t len, int64_t *at)
{
    cJSON *o = cJSON_ParseWithLength(raw, len);
    bool ok = false;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "createdAt");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pushedAt");
    double d = 0;
    if (cJSON_IsNumber(c))
        d = c->valuedouble, ok = true;
    else if (cJSON_IsString(p) && p->valuestring) {
        char *end;
        d = strtod(p->valuestring, &end);
        ok = end != p->valuestring && *end == '\0';
    }
    cJSON_Delete(o);
    if (!ok || !isfinite(d) || d <= 0 || d > 1e12) return false;
    *at = (int64_t)d;
    return true;
}

int payload_refresh_retry_until(const char *raw, size_t len, int64_t now, char **out, size_t *outlen)
{
    *out = NULL;
    job_payload_t p;
    char err[64];
    if (payload_parse(raw, len, &p, err, sizeof err) < 0) return 0;
    bool has = p.has_retry_until && p.retry_until > 0;
    int64_t until = p.retry_until;
    payload_free(&p);
    size_t vs, ve;
    /* null, absent, or only the legacy timeoutAt: nothing to refresh */
    if (!has || !json_top_value(raw, len, "retryUntil", &vs, &ve) || raw[vs] == 'n') return 0;
    int64_t at;
    if (!dispatched_at(raw, len, &at)) return -1;
    int64_t window = until > at ? until - at : 0;
    int64_t fresh = now + window;
    sbuf_t b;
    sbuf_init(&b);
    sbuf_append(&b, raw, vs);
    sbuf_printf(&b, "%lld", (long long)fresh);
    sbuf_append(&b, raw + ve, len - ve);
    /* read back, as for attempts: the scanner and the parser must agree */
    bool ok = false;
    if (payload_parse(b.data, b.len, &p, err, sizeof err) == 0) {
        ok = p.has_retry_until && p.retry_until == fresh;
        payload_free(&p);
    }
    if (!ok) {
        sbuf_free(&b);
        return -1;
    }
    *outlen = b.len;
    *out = sbuf_steal(&b);
    return 1;
}

/* ------------------------------------------------------------ build */


/* Laravel's json_encode escapes '/'; keep payloads looking the same. */
static void put_php_str(sbuf_t *b, const char *s)
{
    sbuf_t t;
    sbuf_init(&t);
    sbuf_json_str(&t, s, strlen(s));
    for (size_t i = 0; i < t.len; i++) {
        if (t.data[i] == '/') sbuf_putc(b, '\\');
        sbuf_putc(b, t.data[i]);
    }
    sbuf_free(&t);
}

char *payload_build(const payload_spec_t *s)
{
    char uuid[37], id[33];
    uuid4(uuid);
    random_alnum(id, 32);
    sbuf_t b;
    sbuf_init(&b);
    sbuf_printf(&b, "{\"uuid\":\"%s\",\"displayName\":", uuid);
    if (s->display_name)
        put_php_str(&b, s->display_name);
    else {
        const char *at = strchr(s->job, '@');
        char *dn = at ? xstrndup(s->job, (size_t)(at - s->job)) : xstrdup(s->job);
        put_php_str(&b, dn);
        free(dn);
    }
    sbuf_puts(&b, ",\"job\":");
    put_php_str(&b, s->job);
    if (s->max_tries >= 0)
        sbuf_printf(&b, ",\"maxTries\":%ld", s->max_tries);
    else
        sbuf_puts(&b, ",\"maxTries\":null");
    if (s->max_exceptions >= 0)
        sbuf_printf(&b, ",\"maxExceptions\":%ld", s->max_exceptions);
    else
        sbuf_puts(&b, ",\"maxExceptions\":null");
    sbuf_printf(&b, ",\"failOnTimeout\":%s,\"backoff\":", s->fail_on_timeout ? "true" : "false");
    sbuf_json_str_or_null(&b, s->backoff);
    if (s->timeout >= 0)
        sbuf_printf(&b, ",\"timeout\":%ld", s->timeout);
    else
        sbuf_puts(&b, ",\"timeout\":null");
    if (s->retry_until > 0)
        sbuf_printf(&b, ",\"retryUntil\":%lld", (long long)s->retry_until);
    else
        sbuf_puts(&b, ",\"retryUntil\":null");
    sbuf_puts(&b, ",\"data\":");
    sbuf_puts(&b, s->data_json ? s->data_json : "{}");
    sbuf_printf(&b, ",\"id\":\"%s\",\"attempts\":0}", id);
    return sbuf_steal(&b);
}

bool payload_has_tag(const char *raw, size_t len, const char *tag)
{
    size_t vs, ve;
    if (!raw || !memmem(raw, len, "\"tags\"", 6) || !json_top_value(raw, len, "tags", &vs, &ve)) return false;
    cJSON *a = cJSON_ParseWithLength(raw + vs, ve - vs);
    const cJSON *t;
    bool has = false;
    cJSON_ArrayForEach(t, a) has = has || (cJSON_IsString(t) && !strcmp(t->valuestring, tag));
    cJSON_Delete(a);
    return has;
}
