/*
 * http_conf_wire.c - see http_conf_wire.h.
 *
 * Every carried field of a struct is a row of a table (its key, kind,
 * place and bounds): the copy from the config, the encoder and the strict
 * decoder walk the same rows, so what is sent is exactly what is read.
 */
#include "config/http_conf_wire.h"
#include "redis/failed.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && sizeof(gid_t) == sizeof(uint32_t), "32-bit ids");
_Static_assert(sizeof(pid_t) == sizeof(int), "pid_t is an int");

enum wkind {
    W_INT,   /* int in [min, max] */
    W_ID,    /* uid_t/gid_t; optional when has >= 0 (a bool saying it is set) */
    W_BOOL,  /* bool */
    W_NUM,   /* double in [min, max] */
    W_STR,   /* char *, length in [min, max]; NULL (absent) allowed when optional */
    W_HOST,  /* char[HOST_LEN] */
    W_STRV,  /* char ** NULL-terminated, count in [min, max]; has >= 0: an int count beside it */
};

#define NO_HAS ((ptrdiff_t)-1)
#define HOST_LEN ((int)sizeof(((http_conf_t *)0)->host))

typedef struct {
    const char *key;
    int kind;
    ptrdiff_t off;
    ptrdiff_t has;             /* W_ID: its bool; W_STRV: its count; NO_HAS: none */
    long long min, max;
    bool optional;
} wfield_t;

#define F(T, k, kind, member, mn, mx, opt) {k, kind, offsetof(T, member), NO_HAS, mn, mx, opt}
#define FH(T, k, kind, member, has, mn, mx, opt) {k, kind, offsetof(T, member), offsetof(T, has), mn, mx, opt}
#define NFIELDS(t) (sizeof t / sizeof *t)
#define STRMAX HTTP_WIRE_STR_MAX

static const wfield_t HTTP_FIELDS[] = {
    F(http_conf_t, "listen", W_STR, listen, 1, STRMAX, false),
    F(http_conf_t, "unix", W_BOOL, is_unix, 0, 0, false),
    F(http_conf_t, "loopback", W_BOOL, loopback, 0, 0, false),
    F(http_conf_t, "host", W_HOST, host, 0, 0, false),
    F(http_conf_t, "port", W_INT, port, 0, 65535, false),
    F(http_conf_t, "timeout", W_INT, timeout, 1, 3600, false),
    F(http_conf_t, "header_timeout", W_INT, header_timeout, 1, 300, false),
    F(http_conf_t, "max_connections", W_INT, max_connections, 1, 10000, false),
    F(http_conf_t, "base_path", W_STR, base_path, 1, STRMAX, true),
    F(http_conf_t, "read_without_token", W_INT, read_without_token, HTTP_READ_NONE, HTTP_READ_ALL, false),
    F(http_conf_t, "owner_uid", W_ID, owner_uid, 0, 0, false),
    FH(http_conf_t, "control_uid", W_ID, control_uid, has_control_uid, 0, 0, true),
    FH(http_conf_t, "control_gid", W_ID, control_gid, has_control_gid, 0, 0, true),
};

static const wfield_t REDIS_FIELDS[] = {
    F(redis_conf_t, "name", W_STR, name, 1, STRMAX, false),
    F(redis_conf_t, "host", W_STR, host, 0, STRMAX, true),
    F(redis_conf_t, "port", W_INT, port, 0, 65535, false),
    F(redis_conf_t, "socket", W_STR, socket, 1, STRMAX, true),
    F(redis_conf_t, "db", W_INT, db, 0, 1000000, false),
    F(redis_conf_t, "prefix", W_STR, prefix, 0, STRMAX, true),
    F(redis_conf_t, "username", W_STR, username, 0, STRMAX, true),
    F(redis_conf_t, "password", W_STR, password, 0, STRMAX, true),
    F(redis_conf_t, "password_env", W_STR, password_env, 1, STRMAX, true),
    F(redis_conf_t, "timeout", W_NUM, timeout, 0, 3600, false),
    FH(redis_conf_t, "cluster", W_STRV, cluster, ncluster, 1, HTTP_WIRE_LIST_MAX, true),
};

static const wfield_t TLS_FIELDS[] = {
    F(redis_tls_t, "ca_file", W_STR, ca_file, 1, STRMAX, true),
    F(redis_tls_t, "cert_file", W_STR, cert_file, 1, STRMAX, true),
    F(redis_tls_t, "key_file", W_STR, key_file, 1, STRMAX, true),
    F(redis_tls_t, "server_name", W_STR, server_name, 1, STRMAX, true),
    F(redis_tls_t, "verify", W_BOOL, verify, 0, 0, false),
};

static const wfield_t SENTINEL_FIELDS[] = {
    FH(redis_sentinel_t, "addrs", W_STRV, addrs, naddrs, 1, HTTP_WIRE_LIST_MAX, false),
    F(redis_sentinel_t, "master_name", W_STR, master_name, 1, STRMAX, false),
    F(redis_sentinel_t, "username", W_STR, username, 0, STRMAX, true),
    F(redis_sentinel_t, "password", W_STR, file_password, 0, STRMAX, true),
    F(redis_sentinel_t, "password_env", W_STR, password_env, 1, STRMAX, true),
};

static const wfield_t USER_FIELDS[] = {
    F(http_wire_t, "uid", W_ID, uid, 0, 0, false),
    F(http_wire_t, "gid", W_ID, gid, 0, 0, false),
};

static const wfield_t ROOT_FIELDS[] = {
    F(http_wire_t, "parent", W_INT, parent, 1, INT_MAX, false),
    F(http_wire_t, "log_level", W_INT, log_level, 0, 3, false),
    F(http_wire_t, "log_format", W_INT, log_format, 0, 1, false),
    F(http_wire_t, "queues", W_STRV, queues, 0, HTTP_WIRE_LIST_MAX, false),
    F(http_wire_t, "metrics_retention", W_INT, metrics_retention, 0, 31 * 86400, false),
    F(http_wire_t, "job_history_size", W_INT, job_history_size, 0, 100000, false),
    F(http_wire_t, "no_redis", W_BOOL, no_redis, 0, 0, true), /* absent: false */
    F(http_wire_t, "token", W_STR, token, 1, 4096, true),
};

/* The keys of the root that are objects (and "version"), beside ROOT_FIELDS. */
static const char *const ROOT_OBJECTS[] = {"version", "user", "http", "redis", NULL};
static const char *const REDIS_OBJECTS[] = {"tls", "sentinel", NULL};

typedef char *str_t;
typedef char **strv_t;
#define AT(base, off, T) ((T *)((char *)(base) + (off)))
#define AT_C(base, off, T) ((const T *)((const char *)(base) + (off)))

/* Every string value of a cJSON tree, zeroed in place (before it is freed). */
static void wipe_tree(cJSON *o)
{
    for (cJSON *c = o; c; c = c->next) {
        if (c->valuestring) explicit_bzero(c->valuestring, strlen(c->valuestring));
        if (c->child) wipe_tree(c->child);
    }
}

/* ------------------------------------------------------------ copying */

static void copy_fields(const wfield_t *f, size_t n, void *dst, const void *src)
{
    for (size_t i = 0; i < n; i++) {
        const char *s;
        switch (f[i].kind) {
        case W_INT: *AT(dst, f[i].off, int) = *AT_C(src, f[i].off, int); break;
        case W_ID: *AT(dst, f[i].off, uint32_t) = *AT_C(src, f[i].off, uint32_t); break;
        case W_BOOL: *AT(dst, f[i].off, bool) = *AT_C(src, f[i].off, bool); break;
        case W_NUM: *AT(dst, f[i].off, double) = *AT_C(src, f[i].off, double); break;
        case W_HOST: memcpy(AT(dst, f[i].off, char), AT_C(src, f[i].off, char), HOST_LEN); break;
        case W_STR:
            s = *AT_C(src, f[i].off, str_t);
            *AT(dst, f[i].off, char *) = s ? xstrdup(s) : NULL;
            break;
        case W_STRV: {
            char *const *v = *AT_C(src, f[i].off, strv_t);
            *AT(dst, f[i].off, char **) = v ? strv_dup(v) : NULL;
            break;
        }
        }
        if (f[i].has != NO_HAS && f[i].kind == W_ID) *AT(dst, f[i].has, bool) = *AT_C(src, f[i].has, bool);
        if (f[i].has != NO_HAS && f[i].kind == W_STRV) *AT(dst, f[i].has, int) = *AT_C(src, f[i].has, int);
    }
}

/* What rconn would use: the variable's value (the variable named on only
 * when it is unset here), else password_file's content, else *pw. */
static void resolve_password(char **pw, char **env, const char *file_pw)
{
    if (*env) {
        const char *v = getenv(*env);
        free_wiped(*pw);
        *pw = v ? xstrdup(v) : NULL;
        if (v) {
            free(*env);
            *env = NULL;
        }
    } else if (file_pw) {
        free_wiped(*pw);
        *pw = xstrdup(file_pw);
    }
}

static void copy_redis(redis_conf_t *dst, const redis_conf_t *rc)
{
    copy_fields(REDIS_FIELDS, NFIELDS(REDIS_FIELDS), dst, rc);
    if (rc->tls.enabled) {
        dst->tls.enabled = true;
        copy_fields(TLS_FIELDS, NFIELDS(TLS_FIELDS), &dst->tls, &rc->tls);
    }
    if (rc->sentinel.addrs) copy_fields(SENTINEL_FIELDS, NFIELDS(SENTINEL_FIELDS), &dst->sentinel, &rc->sentinel);
    resolve_password(&dst->password, &dst->password_env, rc->file_password);
    resolve_password(&dst->sentinel.file_password, &dst->sentinel.password_env, NULL);
}

int http_wire_from_config(http_wire_t *w, const qconf_t *c, const char *token)
{
    memset(w, 0, sizeof *w);
    const redis_conf_t *rc = config_redis(c, c->http.connection ? c->http.connection : "default");
    if (!rc) return -1;
    copy_fields(HTTP_FIELDS, NFIELDS(HTTP_FIELDS), &w->http, &c->http);
    copy_redis(&w->redis, rc);
    w->queues = config_connection_queues(c, rc->name);
    w->metrics_retention = c->metrics_retention;
    w->job_history_size = c->job_history_size;
    w->no_redis = c->no_redis;
    w->log_level = c->log_level;
    w->log_format = c->log_format;
    w->token = token ? xstrdup(token) : NULL;
    return 0;
}

void http_wire_free(http_wire_t *w)
{
    free(w->http.listen);
    free(w->http.base_path);
    redis_conf_free(&w->redis); /* its passwords wiped */
    free_strv(w->queues);
    free_wiped(w->token);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------ encoding */

static void write_fields(cJSON *o, const wfield_t *f, size_t n, const void *base)
{
    for (size_t i = 0; i < n; i++) {
        const char *s;
        char *const *v;
        if (f[i].kind == W_ID && f[i].has != NO_HAS && !*AT_C(base, f[i].has, bool)) continue;
        switch (f[i].kind) {
        case W_INT: cJSON_AddNumberToObject(o, f[i].key, *AT_C(base, f[i].off, int)); break;
        case W_ID: cJSON_AddNumberToObject(o, f[i].key, *AT_C(base, f[i].off, uint32_t)); break;
        case W_BOOL: cJSON_AddBoolToObject(o, f[i].key, *AT_C(base, f[i].off, bool)); break;
        case W_NUM: cJSON_AddNumberToObject(o, f[i].key, *AT_C(base, f[i].off, double)); break;
        case W_HOST: cJSON_AddStringToObject(o, f[i].key, AT_C(base, f[i].off, char)); break;
        case W_STR:
            if ((s = *AT_C(base, f[i].off, str_t))) cJSON_AddStringToObject(o, f[i].key, s);
            break;
        case W_STRV:
            if (!(v = *AT_C(base, f[i].off, strv_t))) break;
            cJSON *a = cJSON_AddArrayToObject(o, f[i].key);
            for (; *v; v++) cJSON_AddItemToArray(a, cJSON_CreateString(*v));
            break;
        }
    }
}

static cJSON *to_json(const http_wire_t *w)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "version", HTTP_WIRE_VERSION);
    write_fields(root, ROOT_FIELDS, NFIELDS(ROOT_FIELDS), w);
    if (w->switch_user) write_fields(cJSON_AddObjectToObject(root, "user"), USER_FIELDS, NFIELDS(USER_FIELDS), w);
    write_fields(cJSON_AddObjectToObject(root, "http"), HTTP_FIELDS, NFIELDS(HTTP_FIELDS), &w->http);
    cJSON *r = cJSON_AddObjectToObject(root, "redis");
    write_fields(r, REDIS_FIELDS, NFIELDS(REDIS_FIELDS), &w->redis);
    if (w->redis.tls.enabled)
        write_fields(cJSON_AddObjectToObject(r, "tls"), TLS_FIELDS, NFIELDS(TLS_FIELDS), &w->redis.tls);
    if (w->redis.sentinel.addrs)
        write_fields(cJSON_AddObjectToObject(r, "sentinel"), SENTINEL_FIELDS, NFIELDS(SENTINEL_FIELDS),
                     &w->redis.sentinel);
    return root;
}

/* Printed into buffers of our own (cJSON's growing one would leave freed
 * copies of the token behind), each one too small wiped. */
static char *print_wiped(cJSON *root, size_t *len)
{
    for (size_t n = 4096; n <= 2 * (size_t)HTTP_WIRE_MAX; n *= 2) {
        char *buf = xmalloc(n);
        if (cJSON_PrintPreallocated(root, buf, (int)n, false)) {
            *len = strlen(buf);
            if (*len <= HTTP_WIRE_MAX) return buf;
        }
        explicit_bzero(buf, n);
        free(buf);
    }
    return NULL;
}

char *http_wire_encode(const http_wire_t *w, size_t *len)
{
    cJSON *root = to_json(w);
    char *text = print_wiped(root, len);
    wipe_tree(root);
    cJSON_Delete(root);
    return text;
}

void http_wire_text_free(char *text, size_t len)
{
    if (text) explicit_bzero(text, len);
    free(text);
}

/* ------------------------------------------------------------ decoding */

typedef struct {
    char *err;
    size_t errn;
    bool failed;
} rd_t;

static int fail(rd_t *r, const char *where, const char *key, const char *fmt, long long a, long long b)
{
    if (r->failed) return -1;
    char what[160];
    snprintf(what, sizeof what, fmt, a, b);
    if (!*key) /* the whole text */
        snprintf(r->err, r->errn, "%s", what);
    else
        snprintf(r->err, r->errn, "%s%s%s: %s", where, *where ? "." : "", key, what);
    r->failed = true;
    return -1;
}

static bool whole_in(const cJSON *v, long long min, long long max)
{
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    return d == floor(d) && d >= (double)min && d <= (double)max;
}

static int read_str(rd_t *r, const cJSON *v, const char *where, const wfield_t *f, char **out)
{
    size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
    if (!cJSON_IsString(v) || n < (size_t)f->min || n > (size_t)f->max)
        return fail(r, where, f->key, "a string of %lld..%lld bytes expected", f->min, f->max);
    *out = xstrdup(v->valuestring);
    return 0;
}

static int read_strv(rd_t *r, const cJSON *v, const char *where, const wfield_t *f, char ***out, int *count)
{
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < f->min || n > f->max)
        return fail(r, where, f->key, "a list of %lld..%lld strings expected", f->min, f->max);
    char **sv = xcalloc((size_t)n + 1, sizeof *sv);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e) || strlen(e->valuestring) > HTTP_WIRE_STR_MAX) {
            free_strv(sv);
            return fail(r, where, f->key, "a list of strings (at most %lld bytes each) expected", HTTP_WIRE_STR_MAX, 0);
        }
        sv[i++] = xstrdup(e->valuestring);
    }
    *out = sv;
    if (count) *count = n;
    return 0;
}

static int read_field(rd_t *r, const cJSON *v, const char *where, const wfield_t *f, void *base)
{
    switch (f->kind) {
    case W_INT:
        if (!whole_in(v, f->min, f->max))
            return fail(r, where, f->key, "a whole number in %lld..%lld expected", f->min, f->max);
        *AT(base, f->off, int) = (int)v->valuedouble;
        return 0;
    case W_ID:
        if (!whole_in(v, 0, (long long)UINT32_MAX - 1))
            return fail(r, where, f->key, "a user or group id (0..%lld) expected", (long long)UINT32_MAX - 1, 0);
        *AT(base, f->off, uint32_t) = (uint32_t)v->valuedouble;
        if (f->has != NO_HAS) *AT(base, f->has, bool) = true;
        return 0;
    case W_BOOL:
        if (!cJSON_IsBool(v)) return fail(r, where, f->key, "true or false expected", 0, 0);
        *AT(base, f->off, bool) = cJSON_IsTrue(v);
        return 0;
    case W_NUM:
        if (!cJSON_IsNumber(v) || !(v->valuedouble > (double)f->min && v->valuedouble <= (double)f->max))
            return fail(r, where, f->key, "a number in (%lld, %lld] expected", f->min, f->max);
        *AT(base, f->off, double) = v->valuedouble;
        return 0;
    case W_HOST:
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= (size_t)HOST_LEN)
            return fail(r, where, f->key, "a string of at most %lld bytes expected", HOST_LEN - 1, 0);
        snprintf(AT(base, f->off, char), (size_t)HOST_LEN, "%s", v->valuestring);
        return 0;
    case W_STR: return read_str(r, v, where, f, AT(base, f->off, char *));
    default:
        return read_strv(r, v, where, f, AT(base, f->off, char **), f->has == NO_HAS ? NULL : AT(base, f->has, int));
    }
}

static bool known(const char *k, const wfield_t *f, size_t n, const char *const *extra)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, f[i].key)) return true;
    for (; extra && *extra; extra++)
        if (!strcmp(k, *extra)) return true;
    return false;
}

/* An object of the known keys, each once, every required one there. */
static int read_object(rd_t *r, const cJSON *o, const char *where, const wfield_t *f, size_t n,
                       const char *const *extra, void *base)
{
    if (!cJSON_IsObject(o)) return fail(r, "", where, "an object expected", 0, 0);
    size_t most = n;
    for (const char *const *e = extra; e && *e; e++) most++;
    for (const cJSON *c = o->child; c; c = c->next)
        if (!known(c->string, f, n, extra)) return fail(r, where, c->string, "unknown key", 0, 0);
    /* every key is a known one: with more keys than those, a duplicate is
     * among the first most + 1 (so this stays small whatever the input) */
    size_t seen = 0;
    for (const cJSON *c = o->child; c && seen <= most; c = c->next, seen++)
        for (const cJSON *d = c->next; d; d = d->next)
            if (!strcmp(c->string, d->string)) return fail(r, where, c->string, "given twice", 0, 0);
    for (size_t i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f[i].key);
        if (!v && f[i].optional) continue;
        if (!v) return fail(r, where, f[i].key, "missing", 0, 0);
        if (read_field(r, v, where, &f[i], base) < 0) return -1;
    }
    return 0;
}

static int read_redis(rd_t *r, const cJSON *o, redis_conf_t *rc)
{
    if (read_object(r, o, "redis", REDIS_FIELDS, NFIELDS(REDIS_FIELDS), REDIS_OBJECTS, rc) < 0) return -1;
    const cJSON *tls = cJSON_GetObjectItemCaseSensitive(o, "tls");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "sentinel");
    if (tls && read_object(r, tls, "redis.tls", TLS_FIELDS, NFIELDS(TLS_FIELDS), NULL, &rc->tls) < 0) return -1;
    rc->tls.enabled = tls != NULL;
    if (st && read_object(r, st, "redis.sentinel", SENTINEL_FIELDS, NFIELDS(SENTINEL_FIELDS), NULL,
                          &rc->sentinel) < 0)
        return -1;
    if (!rc->host && !rc->socket && !rc->sentinel.addrs && !rc->cluster)
        return fail(r, "redis", "host", "missing (no socket, sentinel or cluster either)", 0, 0);
    return 0;
}

static int read_root(rd_t *r, const cJSON *root, http_wire_t *w)
{
    if (!cJSON_IsObject(root)) return fail(r, "", "", "not a JSON object", 0, 0);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!whole_in(v, HTTP_WIRE_VERSION, HTTP_WIRE_VERSION))
        return fail(r, "", "version", "%lld expected (a master of another qpool version?)", HTTP_WIRE_VERSION, 0);
    if (read_object(r, root, "", ROOT_FIELDS, NFIELDS(ROOT_FIELDS), ROOT_OBJECTS, w) < 0) return -1;
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (user && read_object(r, user, "user", USER_FIELDS, NFIELDS(USER_FIELDS), NULL, w) < 0) return -1;
    w->switch_user = user != NULL;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(root, "http");
    if (!h) return fail(r, "", "http", "missing", 0, 0);
    if (read_object(r, h, "http", HTTP_FIELDS, NFIELDS(HTTP_FIELDS), NULL, &w->http) < 0) return -1;
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(root, "redis");
    if (!rc) return fail(r, "", "redis", "missing", 0, 0);
    return read_redis(r, rc, &w->redis);
}

int http_wire_decode(const char *text, size_t len, http_wire_t *w, char *err, size_t errn)
{
    memset(w, 0, sizeof *w);
    rd_t r = {err, errn, false};
    if (len > HTTP_WIRE_MAX) {
        fail(&r, "", "", "larger than %lld bytes", HTTP_WIRE_MAX, 0);
        return -1;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        fail(&r, "", "", "not JSON", 0, 0);
        return -1;
    }
    read_root(&r, root, w);
    wipe_tree(root);
    cJSON_Delete(root);
    if (!r.failed) return 0;
    http_wire_free(w);
    return -1;
}
