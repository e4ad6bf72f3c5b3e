/*
 * config.c - load, validate and print the qpool configuration (see config.h).
 *
 * Every group is walked child by child: each key is looked up in a table of
 * known keys for that group, so an unknown key is found in the same pass that
 * type-checks the known ones. Pool settings are parsed by one function used
 * for both the `defaults` group and each pool, so the cascade cannot drift.
 */
#include "config/config.h"
#include "config/config_app.h"
#include "core/log.h"
#include "core/safefile.h"
#include "redis/rcluster.h"
#include "redis/sentinel.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <libconfig.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *path;
    conf_errors_t *errs;
    qconf_t *c;
} ctx_t;

static void vpush(char ***list, int *n, const char *file, int line, const char *fmt, va_list ap)
{
    char *msg;
    if (vasprintf(&msg, fmt, ap) < 0) abort();
    char *full = line > 0 ? xasprintf("%s:%d: %s", file, line, msg) : xasprintf("%s: %s", file, msg);
    free(msg);
    utf8_repair_inplace(&full); /* it may quote the config's bytes */
    *list = xrealloc(*list, sizeof(char *) * (size_t)(*n + 1));
    (*list)[(*n)++] = full;
}

static const char *sfile(ctx_t *x, const config_setting_t *s)
{
    const char *f = s ? config_setting_source_file(s) : NULL;
    return f ? f : x->path;
}

static int sline(const config_setting_t *s)
{
    /* The root group has no line; its children do. */
    return s ? (int)config_setting_source_line(s) : 0;
}

__attribute__((format(printf, 3, 4))) static void cerr(ctx_t *x, const config_setting_t *s,
                                                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpush(&x->errs->msgs, &x->errs->n, sfile(x, s), sline(s), fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 3, 4))) static void cwarn(ctx_t *x, const config_setting_t *s,
                                                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpush(&x->errs->warnings, &x->errs->nwarn, sfile(x, s), sline(s), fmt, ap);
    va_end(ap);
}

static const char *type_name(int t)
{
    switch (t) {
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a number";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    default: return "something else";
    }
}

/* Suggest the closest known key, if any is close enough. The known names
 * are every stride bytes from known, up to a NULL (a list of names, or a
 * key table's first column). */
static void unknown_key(ctx_t *x, const config_setting_t *s, const char *where,
                        const char *const *known, size_t stride)
{
    const char *name = config_setting_name(s);
    const char *best = NULL;
    int bestd = 3;
    for (const char *const *k = known; *k; k = (const char *const *)(const void *)((const char *)k + stride)) {
        int d = edit_distance(name, *k, 2);
        if (d < bestd) {
            bestd = d;
            best = *k;
        }
    }
    if (best)
        cerr(x, s, "unknown key '%s' in %s (did you mean '%s'?)", name, where, best);
    else
        cerr(x, s, "unknown key '%s' in %s", name, where);
}

/* ---- typed getters: each reports its own error and returns false ---- */

static bool want_int(ctx_t *x, const config_setting_t *s, long long min, long long max, int *out)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64) {
        cerr(x, s, "%s: expected an integer, got %s", config_setting_name(s), type_name(t));
        return false;
    }
    long long v = config_setting_get_int64(s);
    if (v < min || v > max) {
        cerr(x, s, "%s: %lld is out of range (%lld..%lld)", config_setting_name(s), v, min, max);
        return false;
    }
    *out = (int)v;
    return true;
}

static bool want_num(ctx_t *x, const config_setting_t *s, double min, double max, double *out)
{
    int t = config_setting_type(s);
    double v;
    if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
        v = (double)config_setting_get_int64(s);
    else if (t == CONFIG_TYPE_FLOAT)
        v = config_setting_get_float(s);
    else {
        cerr(x, s, "%s: expected a number, got %s", config_setting_name(s), type_name(t));
        return false;
    }
    if (v < min || v > max) {
        cerr(x, s, "%s: %g is out of range (%g..%g)", config_setting_name(s), v, min, max);
        return false;
    }
    *out = v;
    return true;
}

static bool want_bool(ctx_t *x, const config_setting_t *s, bool *out)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_BOOL) {
        cerr(x, s, "%s: expected true or false, got %s", config_setting_name(s), type_name(t));
        return false;
    }
    *out = config_setting_get_bool(s) != 0;
    return true;
}

static bool want_str(ctx_t *x, const config_setting_t *s, char **out)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_STRING) {
        cerr(x, s, "%s: expected a string, got %s", config_setting_name(s), type_name(t));
        return false;
    }
    free(*out);
    *out = xstrdup(config_setting_get_string(s));
    return true;
}

static bool want_enum(ctx_t *x, const config_setting_t *s, const char *const *names, int *out)
{
    char *v = NULL;
    if (!want_str(x, s, &v)) return false;
    for (int i = 0; names[i]; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            free(v);
            return true;
        }
    }
    sbuf_t b;
    sbuf_init(&b);
    for (int i = 0; names[i]; i++) sbuf_printf(&b, "%s\"%s\"", i ? ", " : "", names[i]);
    cerr(x, s, "%s: \"%s\" is not one of %s", config_setting_name(s), v, b.data);
    sbuf_free(&b);
    free(v);
    return false;
}

/* A group, else an error naming what was expected. */
static bool is_group(ctx_t *x, const config_setting_t *s, const char *expected)
{
    if (config_setting_type(s) == CONFIG_TYPE_GROUP) return true;
    cerr(x, s, "%s", expected);
    return false;
}

/* An array or list of strings. */
static bool want_strv(ctx_t *x, const config_setting_t *s, bool nonempty, char ***out)
{
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
        cerr(x, s, "%s: expected an array of strings, got %s", config_setting_name(s), type_name(t));
        return false;
    }
    int n = config_setting_length(s);
    if (nonempty && n == 0) {
        cerr(x, s, "%s: must not be empty", config_setting_name(s));
        return false;
    }
    char **v = xcalloc((size_t)n + 1, sizeof *v);
    for (int i = 0; i < n; i++) {
        config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        if (config_setting_type(e) != CONFIG_TYPE_STRING) {
            cerr(x, e, "%s[%d]: expected a string, got %s", config_setting_name(s), i,
                 type_name(config_setting_type(e)));
            free_strv(v);
            return false;
        }
        v[i] = xstrdup(config_setting_get_string(e));
    }
    free_strv(*out);
    *out = v;
    return true;
}

/* backoff: an integer, an array of integers, or a Laravel-style string
 * "10,30,60"; every value 0 .. BACKOFF_MAX_S, whatever the form. */
#define BACKOFF_MAX_S (86400LL * 365)
static bool want_backoff(ctx_t *x, const config_setting_t *s, int **out, int *nout)
{
    int t = config_setting_type(s);
    int *v = NULL, n = 0;
    if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
        int one;
        if (!want_int(x, s, 0, BACKOFF_MAX_S, &one)) return false;
        v = xmalloc(sizeof *v);
        v[n++] = one;
    } else if (t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST) {
        int len = config_setting_length(s);
        if (len == 0) {
            cerr(x, s, "backoff: must not be empty (use [0] for no delay)");
            return false;
        }
        v = xcalloc((size_t)len, sizeof *v);
        for (int i = 0; i < len; i++) {
            config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            int et = config_setting_type(e);
            long long val = et == CONFIG_TYPE_INT || et == CONFIG_TYPE_INT64 ? config_setting_get_int64(e) : -1;
            if ((et != CONFIG_TYPE_INT && et != CONFIG_TYPE_INT64) || val < 0 || val > BACKOFF_MAX_S) {
                cerr(x, e, "backoff[%d]: expected a number of seconds (0 to %lld)", i, BACKOFF_MAX_S);
                free(v);
                return false;
            }
            v[n++] = (int)val;
        }
    } else if (t == CONFIG_TYPE_STRING) {
        const char *str = config_setting_get_string(s);
        char *dup = xstrdup(str), *save = NULL;
        v = xcalloc(strlen(str) / 2 + 2, sizeof *v);
        for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            while (isspace((unsigned char)*tok)) tok++;
            for (char *e = tok + strlen(tok); e > tok && isspace((unsigned char)e[-1]);) *--e = '\0';
            long val;
            if (!parse_long(tok, &val) || val < 0 || val > BACKOFF_MAX_S) {
                cerr(x, s, "backoff: \"%s\" is not a comma-separated list of seconds (each 0 to %lld)", str,
                     BACKOFF_MAX_S);
                free(dup);
                free(v);
                return false;
            }
            v[n++] = (int)val;
        }
        free(dup);
        if (n == 0) {
            cerr(x, s, "backoff: must not be empty");
            free(v);
            return false;
        }
    } else {
        cerr(x, s, "backoff: expected seconds as an integer or an array, got %s", type_name(t));
        return false;
    }
    free(*out);
    *out = v;
    *nout = n;
    return true;
}

/* ---- key tables: one row per known key of a group ---- */

typedef enum { K_INT, K_NUM, K_BOOL, K_STR, K_STRV, K_MODE, K_FN } key_kind_t;

/* A key parsed by its own function, into obj (the group's struct). */
typedef bool key_fn_t(ctx_t *x, const config_setting_t *s, void *obj);

typedef struct {
    const char *key;   /* first: a table is also its list of known names */
    key_kind_t kind;
    size_t off;        /* the field in obj (all kinds but K_FN) */
    double min, max;   /* K_INT, K_NUM */
    key_fn_t *fn;      /* K_FN */
    unsigned set;      /* pool keys: SET_* when given in the pool's own group */
    unsigned explicit; /* pool keys: EXPLICIT_* (config_app.h), in the pool or in defaults */
} conf_key_t;

#define KEY(k, kind, T, f, lo, hi) {k, kind, offsetof(T, f), lo, hi, NULL, 0, 0}
#define KEY_FN(k, fn) {k, K_FN, 0, 0, 0, fn, 0, 0}
#define KEY_END {NULL, K_FN, 0, 0, 0, NULL, 0, 0}

static bool parse_mode(ctx_t *x, const config_setting_t *s, int *out);

static const conf_key_t *find_key(const conf_key_t *t, const char *k)
{
    for (; t->key; t++)
        if (!strcmp(t->key, k)) return t;
    return NULL;
}

static bool parse_key(ctx_t *x, const config_setting_t *s, const conf_key_t *k, void *obj)
{
    void *f = (char *)obj + k->off;
    switch (k->kind) {
    case K_INT: return want_int(x, s, (long long)k->min, (long long)k->max, f);
    case K_NUM: return want_num(x, s, k->min, k->max, f);
    case K_BOOL: return want_bool(x, s, f);
    case K_STR: return want_str(x, s, f);
    case K_STRV: return want_strv(x, s, true, f);
    case K_MODE: return parse_mode(x, s, f);
    case K_FN: break;
    }
    return k->fn(x, s, obj);
}

/* Every key of group g by table t into obj; where names the group in an
 * unknown key's error. */
static bool parse_keys(ctx_t *x, const config_setting_t *g, const conf_key_t *t, void *obj, const char *where)
{
    bool ok = true;
    for (int i = 0; i < config_setting_length(g); i++) {
        config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const conf_key_t *k = find_key(t, config_setting_name(s));
        if (k)
            ok &= parse_key(x, s, k, obj);
        else {
            unknown_key(x, s, where, &t->key, sizeof *t);
            ok = false;
        }
    }
    return ok;
}

/* ---------------------------------------------------------------- pools */

static const char *const balance_names[] = {"off", "auto", NULL};
static const char *const strategy_names[] = {"time", "size", NULL};
static const char *const handler_names[] = {"none", "exec", "pipe", NULL};

enum {
    SET_PROCESSES = 1 << 0,
    SET_MIN = 1 << 1,
    SET_MAX = 1 << 2,
    SET_CACHE_CONNECTION = 1 << 3,
};

typedef struct {
    unsigned set;      /* keys given explicitly in the pool's own group */
    unsigned explicit; /* EXPLICIT_* (config_app.h): in the pool or in defaults */
} pool_parse_t;

static void env_set(pool_conf_t *p, const char *name, const char *value)
{
    for (int i = 0; i < p->nenv; i++) {
        if (strcmp(p->env[i].name, name) == 0) {
            free(p->env[i].value);
            p->env[i].value = xstrdup(value);
            return;
        }
    }
    p->env = xrealloc(p->env, sizeof *p->env * (size_t)(p->nenv + 1));
    p->env[p->nenv].name = xstrdup(name);
    p->env[p->nenv].value = xstrdup(value);
    p->nenv++;
}

/* handler.protocol: "auto" (0), 1 or 2 */
static bool want_protocol(ctx_t *x, const config_setting_t *s, enum handler_proto *out)
{
    if (config_setting_type(s) == CONFIG_TYPE_STRING && !strcmp(config_setting_get_string(s), "auto")) {
        *out = HANDLER_PROTO_AUTO;
        return true;
    }
    if (config_setting_type(s) == CONFIG_TYPE_INT) {
        int v = config_setting_get_int(s);
        if (v == 1 || v == 2) {
            *out = (enum handler_proto)v;
            return true;
        }
    }
    cerr(x, s, "handler.protocol: expected \"auto\", 1 or 2");
    return false;
}

static bool parse_handler(ctx_t *x, const config_setting_t *s, void *obj)
{
    pool_conf_t *p = obj;
    static const char *const known[] = {"type", "command", "start_timeout", "protocol", NULL};
    if (!is_group(x, s, "handler: expected a group { type = ...; command = [...]; }")) return false;
    bool ok = true;
    int type = HANDLER_NONE;
    for (int i = 0; i < config_setting_length(s); i++) {
        config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const char *k = config_setting_name(e);
        if (strcmp(k, "type") == 0)
            ok &= want_enum(x, e, handler_names, &type);
        else if (strcmp(k, "command") == 0)
            ok &= want_strv(x, e, true, &p->handler_command);
        else if (strcmp(k, "start_timeout") == 0)
            ok &= want_num(x, e, 0.1, 3600, &p->handler_start_timeout);
        else if (strcmp(k, "protocol") == 0)
            ok &= want_protocol(x, e, &p->handler_protocol);
        else {
            unknown_key(x, e, "handler", known, sizeof *known);
            ok = false;
        }
    }
    if (!ok) return false;
    if (type == HANDLER_NONE) {
        cerr(x, s, "handler: type must be \"exec\" or \"pipe\"");
        return false;
    }
    if (!p->handler_command) {
        cerr(x, s, "handler: command is required");
        return false;
    }
    p->handler_type = (enum handler_type)type;
    return true;
}

static bool valid_name(const char *s)
{
    if (!*s || strlen(s) > 48) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.:-", *s)) return false;
    return true;
}

/* Keys that make no sense in `defaults`. */
static bool pool_only_key(const char *k)
{
    return !strcmp(k, "name") || !strcmp(k, "queues") || !strcmp(k, "handler") ||
           !strcmp(k, "command");
}

/* laravel, php_adapter, php_root: absolute paths */
static bool parse_app_path(ctx_t *x, const config_setting_t *s, void *obj)
{
    pool_conf_t *p = obj;
    const char *k = config_setting_name(s);
    char **dst = !strcmp(k, "laravel") ? &p->laravel : !strcmp(k, "php_adapter") ? &p->php_adapter : &p->php_root;
    free(*dst);
    *dst = NULL;
    if (!want_str(x, s, dst)) return false;
    if ((*dst)[0] != '/') {
        cerr(x, s, "%s: \"%s\" must be an absolute path", k, *dst);
        return false;
    }
    if (dst == &p->laravel) {
        free(p->laravel_where);
        p->laravel_where = xasprintf("%s:%d", sfile(x, s), sline(s));
    }
    return true;
}

static bool parse_pool_name(ctx_t *x, const config_setting_t *s, void *obj)
{
    pool_conf_t *p = obj;
    bool ok = want_str(x, s, &p->name);
    if (p->name && !valid_name(p->name)) {
        cerr(x, s, "name: \"%s\" must be 1-48 characters of letters, digits, _ . : -", p->name);
        ok = false;
    }
    return ok;
}

static bool parse_queues(ctx_t *x, const config_setting_t *s, void *obj)
{
    pool_conf_t *p = obj;
    if (!want_strv(x, s, true, &p->queues)) return false;
    bool ok = true;
    p->nqueues = (int)strv_len(p->queues);
    if (p->nqueues > QPOOL_MAX_QUEUES) {
        cerr(x, s, "queues: at most %d queues per pool", QPOOL_MAX_QUEUES);
        ok = false;
    }
    for (int q = 0; q < p->nqueues; q++) {
        if (!*p->queues[q] || strchr(p->queues[q], ',') || strlen(p->queues[q]) > 200 ||
            !utf8_valid(p->queues[q], strlen(p->queues[q]))) {
            cerr(x, s, "queues: \"%s\" is not a valid queue name (non-empty, no commas, UTF-8)", p->queues[q]);
            ok = false;
        }
        for (int r = 0; r < q; r++)
            if (!strcmp(p->queues[q], p->queues[r])) {
                cerr(x, s, "queues: \"%s\" is listed twice", p->queues[q]);
                ok = false;
            }
    }
    return ok;
}

static bool parse_balance(ctx_t *x, const config_setting_t *s, void *obj)
{
    int v;
    if (!want_enum(x, s, balance_names, &v)) return false;
    ((pool_conf_t *)obj)->balance = (enum balance_mode)v;
    return true;
}

static bool parse_strategy(ctx_t *x, const config_setting_t *s, void *obj)
{
    int v;
    if (!want_enum(x, s, strategy_names, &v)) return false;
    ((pool_conf_t *)obj)->auto_strategy = (enum auto_strategy)v;
    return true;
}

static bool parse_backoff(ctx_t *x, const config_setting_t *s, void *obj)
{
    pool_conf_t *p = obj;
    return want_backoff(x, s, &p->backoff, &p->nbackoff);
}

/* A value of the wrong type is reported but, unlike the other keys, does
 * not count as the pool's parse failing (its later checks still run). */
static bool parse_workdir(ctx_t *x, const config_setting_t *s, void *obj)
{
    pool_conf_t *p = obj;
    if (!want_str(x, s, &p->working_directory) || p->working_directory[0] == '/') return true;
    cerr(x, s, "working_directory: \"%s\" must be an absolute path", p->working_directory);
    return false;
}

static bool parse_environment(ctx_t *x, const config_setting_t *s, void *obj)
{
    if (!is_group(x, s, "environment: expected a group { NAME = \"value\"; }")) return false;
    bool ok = true;
    for (int e = 0; e < config_setting_length(s); e++) {
        config_setting_t *v = config_setting_get_elem(s, (unsigned)e);
        if (config_setting_type(v) != CONFIG_TYPE_STRING) {
            cerr(x, v, "environment: %s: expected a string, got %s", config_setting_name(v),
                 type_name(config_setting_type(v)));
            ok = false;
            continue;
        }
        env_set(obj, config_setting_name(v), config_setting_get_string(v));
    }
    return ok;
}

/* A pool key whose name is its pool_conf_t field's; S: its SET_* bit, E: its EXPLICIT_* bit. */
#define PK(f, kind, lo, hi) KEY(#f, kind, pool_conf_t, f, lo, hi)
#define PK_SET(f, kind, lo, hi, S, E) {#f, kind, offsetof(pool_conf_t, f), lo, hi, NULL, S, E}

/* The pool keys (in `defaults` too, but for pool_only_key's), in the order
 * an unknown key's suggestion is looked for. */
static const conf_key_t POOL_KEYS[] = {
    KEY_FN("name", parse_pool_name),
    KEY_FN("queues", parse_queues),
    KEY_FN("balance", parse_balance),
    PK_SET(processes, K_INT, 0, QPOOL_MAX_WORKERS_LIMIT, SET_PROCESSES, 0),
    PK_SET(min_processes, K_INT, 0, QPOOL_MAX_WORKERS_LIMIT, SET_MIN, 0),
    PK_SET(max_processes, K_INT, 1, QPOOL_MAX_WORKERS_LIMIT, SET_MAX, 0),
    KEY_FN("auto_strategy", parse_strategy),
    PK(target_wait, K_NUM, 0.1, 86400),
    PK(scale_down_delay, K_NUM, 0, 86400),
    PK(priority, K_INT, 1, 1000),
    PK_SET(connection, K_STR, 0, 0, 0, EXPLICIT_CONNECTION),
    PK_SET(queue_connection, K_STR, 0, 0, 0, EXPLICIT_QUEUE_CONNECTION),
    PK_SET(cache_connection, K_STR, 0, 0, SET_CACHE_CONNECTION, EXPLICIT_CACHE_CONNECTION),
    PK_SET(cache_prefix, K_STR, 0, 0, 0, EXPLICIT_CACHE_PREFIX),
    PK_SET(restart_key, K_STR, 0, 0, 0, EXPLICIT_RESTART_KEY),
    PK_SET(laravel_pause, K_BOOL, 0, 0, 0, EXPLICIT_LARAVEL_PAUSE),
    PK(tries, K_INT, 0, 1000000),
    KEY_FN("backoff", parse_backoff),
    PK(timeout, K_INT, 0, 86400 * 7),
    PK_SET(retry_after, K_INT, 1, 86400 * 7, 0, EXPLICIT_RETRY_AFTER),
    PK(memory, K_INT, 0, 1024 * 1024),
    PK(sleep, K_NUM, 0, 3600),
    PK(max_jobs, K_INT, 0, 2000000000),
    PK(max_time, K_INT, 0, 2000000000),
    PK(rest, K_NUM, 0, 3600),
    PK(migration_batch, K_INT, 1, 100000),
    PK(prefetch, K_INT, 1, QPOOL_MAX_PREFETCH),
    PK(app_driver, K_BOOL, 0, 0),
    PK(job_log, K_BOOL, 0, 0),
    KEY_FN("handler", parse_handler),
    PK(command, K_STRV, 0, 0),
    PK(user, K_STR, 0, 0),
    PK(group, K_STR, 0, 0),
    KEY_FN("working_directory", parse_workdir),
    KEY_FN("environment", parse_environment),
    PK(nice, K_INT, -20, 19),
    KEY_FN("laravel", parse_app_path),
    PK(php, K_STRV, 0, 0),
    KEY_FN("php_adapter", parse_app_path),
    KEY_FN("php_root", parse_app_path),
    PK(force, K_BOOL, 0, 0),
    PK(fleet_max_processes, K_INT, 0, QPOOL_FLEET_BUDGET_LIMIT),
    PK(preload, K_BOOL, 0, 0),
    PK(silenced, K_STRV, 0, 0),
    PK(silenced_tags, K_STRV, 0, 0),
    KEY_END,
};

/* One pool's group, or `defaults` (is_defaults): its keys into p, what was
 * given explicitly into pp. */
static bool parse_pool_settings(ctx_t *x, const config_setting_t *g, pool_conf_t *p,
                                bool is_defaults, pool_parse_t *pp)
{
    bool ok = true;
    for (int i = 0; i < config_setting_length(g); i++) {
        config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const char *k = config_setting_name(s);
        const conf_key_t *key = find_key(POOL_KEYS, k);
        if (is_defaults && pool_only_key(k)) {
            cerr(x, s, "'%s' belongs in a pool, not in defaults", k);
            ok = false;
        } else if (!key) {
            unknown_key(x, s, is_defaults ? "defaults" : "pool", &POOL_KEYS->key, sizeof *POOL_KEYS);
            ok = false;
        } else {
            ok &= parse_key(x, s, key, p);
            if (!is_defaults) pp->set |= key->set;
            pp->explicit |= key->explicit;
        }
    }
    return ok;
}

/* On a Redis Cluster a queue's keys (queues:<q>, :delayed, :reserved,
 * :notify) must share a slot, so the queue name needs a hash tag (unless
 * the prefix has one: then every key is in one slot). */
static bool check_cluster_queues(ctx_t *x, const config_setting_t *g, const pool_conf_t *p)
{
    const redis_conf_t *r = config_redis(x->c, p->connection);
    if (!r->cluster || (r->prefix && rcluster_has_tag(r->prefix, strlen(r->prefix)))) return true;
    bool ok = true;
    const config_setting_t *qs = config_setting_get_member(g, "queues");
    for (int i = 0; i < p->nqueues; i++) {
        const char *q = p->queues[i];
        if (rcluster_has_tag(q, strlen(q))) continue;
        cerr(x, qs ? qs : g,
             "pool %s: queue \"%s\" has no hash tag: on the Redis Cluster of connection \"%s\" its "
             ":delayed, :reserved and :notify keys would land in other slots; rename it to \"{%s}\" "
             "(Laravel 13.5+ on a cluster already keeps a queue \"%s\" under these keys, queues:{%s}; "
             "before 13.5 rename it in Laravel too)",
             p->name, q, p->connection, q, q, q);
        ok = false;
    }
    return ok;
}

/* fleet_max_processes: a budget shared by the fleet's pools of this name
 * needs a balanced pool, and this host's floor alone must fit in it. */
static bool check_fleet_budget(ctx_t *x, const config_setting_t *g, const pool_conf_t *p)
{
    if (!p->fleet_max_processes) return true;
    if (p->balance != BALANCE_AUTO) {
        cerr(x, g, "pool %s: fleet_max_processes applies to balance = \"auto\" (the fleet's share of "
                   "the budget sets this host's size); with balance = \"off\" the size is fixed",
             p->name);
        return false;
    }
    if (p->min_processes > p->fleet_max_processes) {
        cerr(x, g, "pool %s: min_processes (%d) is greater than fleet_max_processes (%d): this host's "
                   "floor alone cannot be satisfied by the fleet budget",
             p->name, p->min_processes, p->fleet_max_processes);
        return false;
    }
    return true;
}

static void pool_builtin_defaults(pool_conf_t *p)
{
    memset(p, 0, sizeof *p);
    p->balance = BALANCE_OFF;
    p->processes = 1;
    p->min_processes = 1;
    p->max_processes = 1;
    p->auto_strategy = STRATEGY_TIME;
    p->target_wait = 10;
    p->scale_down_delay = 30;
    p->priority = 1;
    p->connection = xstrdup("default");
    p->queue_connection = xstrdup("redis");
    p->cache_prefix = xstrdup("laravel_cache:");
    p->restart_key = xstrdup("illuminate:queue:restart");
    p->laravel_pause = true;
    p->tries = 1;
    p->backoff = xcalloc(1, sizeof(int));
    p->nbackoff = 1;
    p->timeout = 60;
    p->retry_after = 90;
    p->memory = 128;
    p->sleep = 3;
    p->migration_batch = 100;
    p->prefetch = 1;
    p->job_log = true;
    p->handler_start_timeout = 60;
    p->preload = true;
    p->php = xcalloc(2, sizeof *p->php);
    p->php[0] = xstrdup("php");
}



static void fmt_num(char *buf, size_t n, double v)
{
    if (v == (long long)v)
        snprintf(buf, n, "%lld", (long long)v);
    else
        snprintf(buf, n, "%.17g", v);
}

void config_backoff_str(const pool_conf_t *p, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->nbackoff && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%d", i ? "," : "", p->backoff[i]);
}

static bool placeholder_value(const pool_conf_t *p, const char *name, size_t len, sbuf_t *out)
{
    char buf[512];
    buf[0] = '\0';
#define IS(s) (len == strlen(s) && !strncmp(name, s, len))
    if (IS("queues")) {
        for (int i = 0; i < p->nqueues; i++) {
            if (i) sbuf_putc(out, ',');
            sbuf_puts(out, p->queues[i]);
        }
        return true;
    } else if (IS("pool"))
        snprintf(buf, sizeof buf, "%s", p->name);
    else if (IS("memory"))
        snprintf(buf, sizeof buf, "%d", p->memory);
    else if (IS("timeout"))
        snprintf(buf, sizeof buf, "%d", p->timeout);
    else if (IS("tries"))
        snprintf(buf, sizeof buf, "%d", p->tries);
    else if (IS("sleep"))
        fmt_num(buf, sizeof buf, p->sleep);
    else if (IS("rest"))
        fmt_num(buf, sizeof buf, p->rest);
    else if (IS("backoff"))
        config_backoff_str(p, buf, sizeof buf);
    else if (IS("max_jobs"))
        snprintf(buf, sizeof buf, "%d", p->max_jobs);
    else if (IS("max_time"))
        snprintf(buf, sizeof buf, "%d", p->max_time);
    else if (IS("connection"))
        snprintf(buf, sizeof buf, "%s", p->queue_connection);
    else if (IS("retry_after"))
        snprintf(buf, sizeof buf, "%d", p->retry_after);
    else
        return false;
#undef IS
    sbuf_puts(out, buf);
    return true;
}

/* Expand one argument; returns false (and the bad name in *bad) on an unknown placeholder. */
static bool expand_arg(const pool_conf_t *p, const char *arg, sbuf_t *out, char *bad, size_t badn)
{
    for (const char *c = arg; *c;) {
        if (c[0] == '{' && c[1] == '{') {
            sbuf_putc(out, '{');
            c += 2;
        } else if (c[0] == '}' && c[1] == '}') {
            sbuf_putc(out, '}');
            c += 2;
        } else if (*c == '{') {
            const char *end = strchr(c, '}');
            if (!end) {
                snprintf(bad, badn, "%s", c);
                return false;
            }
            if (!placeholder_value(p, c + 1, (size_t)(end - c - 1), out)) {
                snprintf(bad, badn, "%.*s", (int)(end - c + 1), c);
                return false;
            }
            c = end + 1;
        } else
            sbuf_putc(out, *c++);
    }
    return true;
}

char **config_expand_command(const pool_conf_t *p)
{
    size_t n = strv_len(p->command);
    char **argv = xcalloc(n + 1, sizeof *argv);
    char bad[128];
    for (size_t i = 0; i < n; i++) {
        sbuf_t b;
        sbuf_init(&b);
        sbuf_puts(&b, "");
        if (!expand_arg(p, p->command[i], &b, bad, sizeof bad)) {
            /* validated at load time; keep the raw text if it ever happens */
            sbuf_reset(&b);
            sbuf_puts(&b, p->command[i]);
        }
        argv[i] = sbuf_steal(&b);
    }
    return argv;
}

static void push_at(char ***list, int *n, const char *where, const char *msg)
{
    *list = xrealloc(*list, sizeof **list * (size_t)(*n + 1));
    (*list)[(*n)++] = xasprintf("%s: %s", where, msg);
}

/* The pool's uid and gid, before anything runs as them (finish_pool checks
 * the same names again and reports what is wrong). */
static bool resolve_identity(pool_conf_t *p)
{
    if (p->group && !p->user) return false;
    if (p->user) {
        struct passwd *pw = getpwnam(p->user);
        if (!pw) return false;
        p->uid = pw->pw_uid;
        p->gid = pw->pw_gid;
        p->has_uid = p->has_gid = true;
    }
    if (p->group) {
        struct group *gr = getgrnam(p->group);
        if (!gr) return false;
        p->gid = gr->gr_gid;
    }
    return true;
}

/* One pool between config_load's two passes over the pools. */
typedef struct {
    const config_setting_t *g;
    pool_parse_t pp;
    bool parsed;
} pool_pass_t;

/* laravel = "...": the pool's defaults from its app (config_app.c). */
static bool apply_app(ctx_t *x, pool_conf_t *p, const pool_parse_t *pp, app_cache_t **apps)
{
    const app_desc_t *d;
    char err[600];
    const char *name = p->name ? p->name : "?";
    /* The app is read as the pool's user, never as root in its stead. */
    if (!resolve_identity(p)) {
        char *m = xasprintf("pool %s: the Laravel app %s is not read: user \"%s\" / group \"%s\" does not exist (or group without user)",
                            name, p->laravel, p->user ? p->user : "", p->group ? p->group : "");
        push_at(&x->errs->msgs, &x->errs->n, p->laravel_where, m);
        free(m);
        return false;
    }
    if (app_describe(apps, p, pp->explicit & EXPLICIT_QUEUE_CONNECTION, &d, err, sizeof err) < 0) {
        char *m = xasprintf("pool %s: cannot read the Laravel app %s: %s", name, p->laravel, err);
        push_at(&x->errs->msgs, &x->errs->n, p->laravel_where, m);
        free(m);
        return false;
    }
    char **w = NULL;
    int nw = 0;
    app_apply(x->c, p, pp->explicit, d, &w, &nw);
    for (int i = 0; i < nw; i++) {
        char *m = xasprintf("pool %s: %s", name, w[i]);
        push_at(&x->errs->warnings, &x->errs->nwarn, p->laravel_where, m);
        free(m);
        free(w[i]);
    }
    free(w);
    return true;
}

/* name, queues, and exactly one of handler and command */
static bool check_pool_required(ctx_t *x, const config_setting_t *g, const pool_conf_t *p)
{
    bool ok = true;
    if (!p->queues) {
        cerr(x, g, "pool %s: queues is required", p->name);
        ok = false;
    }
    if (!p->command && p->handler_type == HANDLER_NONE) {
        cerr(x, g, "pool %s: needs exactly one of handler = {...} (native worker) or command = [...] (external worker)",
             p->name);
        ok = false;
    } else if (p->command && p->handler_type != HANDLER_NONE) {
        cerr(x, g, "pool %s: has both handler and command; use exactly one", p->name);
        ok = false;
    }
    return ok;
}

/* The size keys the pool's balance mode uses, and only those. */
static bool check_pool_size(ctx_t *x, const config_setting_t *g, const pool_conf_t *p, const pool_parse_t *pp)
{
    bool ok = true;
    if (p->balance == BALANCE_OFF) {
        if (pp->set & (SET_MIN | SET_MAX)) {
            cerr(x, g, "pool %s: min_processes/max_processes apply to balance = \"auto\"; with balance = \"off\" use processes",
                 p->name);
            ok = false;
        }
    } else {
        if (pp->set & SET_PROCESSES) {
            cerr(x, g, "pool %s: processes applies to balance = \"off\"; with balance = \"auto\" use min_processes and max_processes",
                 p->name);
            ok = false;
        }
        if (p->min_processes > p->max_processes) {
            cerr(x, g, "pool %s: min_processes (%d) is greater than max_processes (%d)", p->name,
                 p->min_processes, p->max_processes);
            ok = false;
        }
    }
    return ok & check_fleet_budget(x, g, p);
}

/* The queue's and the cache's connections exist (the cache's defaults to
 * "cache" when defined, else the queue's). */
static bool check_pool_connections(ctx_t *x, const config_setting_t *g, pool_conf_t *p, const pool_parse_t *pp)
{
    bool ok = true;
    if (!config_redis(x->c, p->connection)) {
        cerr(x, g, "pool %s: connection \"%s\" is not defined in redis", p->name, p->connection);
        ok = false;
    } else
        ok &= check_cluster_queues(x, g, p);
    if (!(pp->set & SET_CACHE_CONNECTION) && !p->cache_connection) {
        /* Laravel keeps its cache on the "cache" Redis connection; use it when defined. */
        p->cache_connection = xstrdup(config_redis(x->c, "cache") ? "cache" : p->connection);
    }
    if (p->cache_connection && !config_redis(x->c, p->cache_connection)) {
        cerr(x, g, "pool %s: cache_connection \"%s\" is not defined in redis", p->name,
             p->cache_connection);
        ok = false;
    }
    return ok;
}

/* An external worker's command: every placeholder known; its timeout below retry_after. */
static bool check_pool_command(ctx_t *x, const config_setting_t *g, const pool_conf_t *p)
{
    if (!p->command) return true;
    bool ok = true;
    char bad[128];
    for (int i = 0; p->command[i]; i++) {
        sbuf_t b;
        sbuf_init(&b);
        if (!expand_arg(p, p->command[i], &b, bad, sizeof bad)) {
            cerr(x, g, "pool %s: command: unknown placeholder %s (known: {queues} {pool} {memory} {timeout} {tries} {sleep} {backoff} {max_jobs} {max_time} {rest} {connection} {retry_after}; write {{ for a literal brace)",
                 p->name, bad);
            ok = false;
        }
        sbuf_free(&b);
    }
    if (p->timeout > 0 && p->timeout >= p->retry_after)
        cwarn(x, g, "pool %s: timeout (%d) is not below retry_after (%d): a job still running when its reservation expires will be run twice",
              p->name, p->timeout, p->retry_after);
    return ok;
}

/* app_driver: the pool's pipe handler (the PHP adapter) pops and runs the jobs. */
static bool check_pool_app_driver(ctx_t *x, const config_setting_t *g, const pool_conf_t *p)
{
    if (!p->app_driver) return true;
    if (p->handler_type != HANDLER_PIPE) {
        cerr(x, g, "pool %s: app_driver = true needs a pipe handler that runs the app (the PHP adapter: laravel = \"/srv/app\")",
             p->name);
        return false;
    }
    if (p->prefetch > 1)
        cwarn(x, g, "pool %s: prefetch applies to Redis pools; with app_driver = true the app's driver pops one job at a time",
              p->name);
    if (p->balance != BALANCE_OFF && !pool_preloads(p))
        cwarn(x, g, "pool %s: balance = \"auto\" with app_driver = true reads the queue sizes through the app agent, which needs preload: without it the pool keeps its size (min_processes, %d)",
              p->name, p->min_processes);
    return true;
}

/* user and group: they exist; the uid and gid the children take. */
const char *pool_needs_redis(const pool_conf_t *p)
{
    if (!p->app_driver) return "its queues are on Redis (it does not run through the app's driver: app_driver)";
    if (p->fleet_max_processes) return "fleet_max_processes shares its budget through Redis";
    if (!p->agent_signals && (p->restart_key[0] || p->laravel_pause))
        return "it reads queue:restart and queue:pause from a Redis cache (set restart_key = \"\" and "
               "laravel_pause = false, or let laravel = APP with preload read them through the app's store)";
    if (p->down_connection) return "it reads the app's maintenance mode from a Redis cache store";
    return NULL;
}

/* `redis = false;`: every pool must run without one. */
static bool check_pool_no_redis(ctx_t *x, const config_setting_t *g, const pool_conf_t *p)
{
    const char *why = x->c->redis_off ? pool_needs_redis(p) : NULL;
    if (why)
        cerr(x, g, "pool %s: %s, but qpool.conf says redis = false (name one: redis = { default = { host = ...; }; })",
             p->name, why);
    return !why;
}

static bool resolve_pool_user(ctx_t *x, const config_setting_t *g, pool_conf_t *p)
{
    bool ok = true;
    if (p->user) {
        struct passwd *pw = getpwnam(p->user);
        if (!pw) {
            cerr(x, g, "pool %s: user \"%s\" does not exist", p->name, p->user);
            ok = false;
        } else {
            p->uid = pw->pw_uid;
            p->has_uid = true;
            if (!p->group) {
                p->gid = pw->pw_gid;
                p->has_gid = true;
            }
        }
    }
    if (p->group && !p->user) {
        /* setgid alone would leave the children root's user id */
        cerr(x, g, "pool %s: group \"%s\" without user: the children would keep qpool's user id; set user too",
             p->name, p->group);
        ok = false;
    }
    if (p->group) {
        struct group *gr = getgrnam(p->group);
        if (!gr) {
            cerr(x, g, "pool %s: group \"%s\" does not exist", p->name, p->group);
            ok = false;
        } else {
            p->gid = gr->gr_gid;
            p->has_gid = true;
        }
    }
    return ok;
}

/* A parsed pool (its app's settings applied): everything checked, its user resolved. */
static bool finish_pool(ctx_t *x, const config_setting_t *g, pool_conf_t *p, const pool_parse_t *pp)
{
    if (!p->name) {
        cerr(x, g, "pool: name is required");
        return false;
    }
    bool ok = check_pool_required(x, g, p);
    ok &= check_pool_size(x, g, p, pp);
    ok &= check_pool_connections(x, g, p, pp);
    ok &= check_pool_command(x, g, p);
    ok &= check_pool_app_driver(x, g, p);
    ok &= check_pool_no_redis(x, g, p);
    ok &= resolve_pool_user(x, g, p);
    return ok;
}

/* ---------------------------------------------------------------- http */

static bool parse_mode(ctx_t *x, const config_setting_t *s, int *out)
{
    char *m = NULL;
    bool ok = want_str(x, s, &m);
    if (ok) {
        char *end;
        long v = strtol(m, &end, 8);
        if (*end || !*m || v < 0 || v > 0777) {
            cerr(x, s, "%s: \"%s\" is not an octal mode such as \"0660\"", config_setting_name(s), m);
            ok = false;
        } else
            *out = (int)v;
    }
    free(m);
    return ok;
}

/* "host:port", "[v6]:port", "*:port" or "localhost:port" into a numeric
 * address; loopback when it is 127/8 or ::1. */
static bool parse_listen(ctx_t *x, const config_setting_t *s, http_conf_t *h)
{
    const char *v = h->listen;
    if (v[0] == '/') {
        h->is_unix = h->loopback = true;
        return true;
    }
    const char *colon = strrchr(v, ':');
    char host[64];
    size_t hl = colon ? (size_t)(colon - v) : 0;
    if (!colon || hl >= sizeof host) goto bad;
    memcpy(host, v, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || colon[1] == '\0' || port < 1 || port > 65535) goto bad;
    if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
    if (!strcmp(host, "*") || !host[0]) strcpy(host, "0.0.0.0");
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        h->loopback = (ntohl(a4.s_addr) >> 24) == 127;
    else if (inet_pton(AF_INET6, host, &a6) == 1)
        h->loopback = IN6_IS_ADDR_LOOPBACK(&a6);
    else
        goto bad;
    snprintf(h->host, sizeof h->host, "%s", host);
    h->port = (int)port;
    return true;
bad:
    cerr(x, s, "http.listen: \"%s\" is not an address:port (\"127.0.0.1:9178\", \"[::1]:9178\") or an absolute socket path", v);
    return false;
}

static const char *const READ_NAMES[] = {"none", "aggregates", "all", NULL}; /* http_read_t */

/* read_only_without_token (before read_without_token) still loads: it said
 * "loopback reads are open", which opened payloads and exceptions to every
 * local user; it now means the safe reading of itself. */
static bool parse_legacy_read(ctx_t *x, const config_setting_t *s, void *obj)
{
    http_conf_t *h = obj;
    bool v;
    if (!want_bool(x, s, &v)) return false;
    h->legacy_read = v;
    cwarn(x, s, "http.read_only_without_token is deprecated; %s now means read_without_token = \"%s\"%s", v ? "true" : "false",
          v ? "aggregates" : "none",
          v ? " (job records, payloads and failed jobs need the token; \"all\" opens them to every local user)" : "");
    return true;
}

static bool parse_listen_key(ctx_t *x, const config_setting_t *s, void *obj)
{
    http_conf_t *h = obj;
    return want_str(x, s, &h->listen) && parse_listen(x, s, h);
}

static bool parse_read(ctx_t *x, const config_setting_t *s, void *obj)
{
    int v;
    if (!want_enum(x, s, READ_NAMES, &v)) return false;
    ((http_conf_t *)obj)->read_without_token = (http_read_t)v;
    return true;
}

static bool parse_base_path(ctx_t *x, const config_setting_t *s, void *obj)
{
    http_conf_t *h = obj;
    if (!want_str(x, s, &h->base_path)) return false;
    size_t n = strlen(h->base_path);
    while (n > 1 && h->base_path[n - 1] == '/') h->base_path[--n] = '\0';
    if (h->base_path[0] != '/' || strstr(h->base_path, "..") || strpbrk(h->base_path, "?#%\" <>")) {
        cerr(x, s, "http.base_path: \"%s\" is not a path such as \"/qpool\"", h->base_path);
        return false;
    }
    if (!strcmp(h->base_path, "/")) {
        free(h->base_path);
        h->base_path = NULL;
    }
    return true;
}

#define HK(f, kind, lo, hi) KEY(#f, kind, http_conf_t, f, lo, hi)
static const conf_key_t HTTP_KEYS[] = {
    KEY_FN("listen", parse_listen_key),
    HK(token_file, K_STR, 0, 0),
    HK(token_env, K_STR, 0, 0),
    HK(user, K_STR, 0, 0),
    HK(connection, K_STR, 0, 0),
    HK(socket_mode, K_MODE, 0, 0),
    HK(max_connections, K_INT, 1, 10000),
    HK(timeout, K_INT, 1, 3600),
    HK(header_timeout, K_INT, 1, 300),
    KEY_FN("base_path", parse_base_path),
    KEY_FN("read_without_token", parse_read),
    HK(socket_group, K_STR, 0, 0),
    KEY_FN("read_only_without_token", parse_legacy_read),
    KEY_END,
};

static bool parse_http_group(ctx_t *x, const config_setting_t *g, void *obj)
{
    http_conf_t *h = &((qconf_t *)obj)->http;
    if (!is_group(x, g, "http: expected a group { listen = \"127.0.0.1:9178\"; }")) return false;
    bool ok = parse_keys(x, g, HTTP_KEYS, h, "qpool.http");
    if (h->legacy_read >= 0 && config_setting_get_member(g, "read_without_token")) {
        cerr(x, g, "http: set read_without_token only (read_only_without_token is deprecated)");
        ok = false;
    } else if (h->legacy_read >= 0)
        h->read_without_token = h->legacy_read ? HTTP_READ_AGGREGATES : HTTP_READ_NONE;
    if (!ok || !h->listen) return ok;
    if (h->socket_group && !h->is_unix) {
        cerr(x, g, "http.socket_group is for a Unix socket listen");
        ok = false;
    }
    const config_setting_t *rw = config_setting_get_member(g, "read_without_token");
    if (!h->loopback && rw && h->read_without_token != HTTP_READ_NONE)
        cwarn(x, rw, "http.read_without_token applies to a loopback or Unix listener only: on \"%s\" every read "
              "but /healthz and the dashboard's files needs the token", h->listen);
    if (!h->loopback && !h->token_file && !h->token_env) {
        cerr(x, g, "http.listen \"%s\" is not loopback: set token_file or token_env (every request will need the token)", h->listen);
        ok = false;
    }
    struct passwd *pw = h->user ? getpwnam(h->user) : NULL;
    if (h->user && !pw) {
        cerr(x, g, "http.user \"%s\" does not exist", h->user);
        ok = false;
    } else if (pw && pw->pw_uid == 0) {
        cerr(x, g, "http.user \"%s\" is root: the HTTP process must not be", h->user);
        ok = false;
    }
    return ok;
}

static void http_defaults(http_conf_t *h)
{
    h->read_without_token = HTTP_READ_AGGREGATES;
    h->legacy_read = -1;
    h->socket_mode = 0660;
    h->max_connections = 64;
    h->timeout = 10;
    h->header_timeout = 5;
}

/* The endpoint's strings, listed once for the free and the compare. */
static const size_t HTTP_STRS[] = {
    offsetof(http_conf_t, listen), offsetof(http_conf_t, token_file), offsetof(http_conf_t, token_env),
    offsetof(http_conf_t, user), offsetof(http_conf_t, connection), offsetof(http_conf_t, base_path),
    offsetof(http_conf_t, socket_group),
};
#define HTTP_STR(h, i) (*(char *const *)(const void *)((const char *)(h) + HTTP_STRS[i]))

static void http_conf_free(http_conf_t *h)
{
    for (size_t i = 0; i < ARRAY_LEN(HTTP_STRS); i++) free(HTTP_STR(h, i));
}

bool http_conf_same(const http_conf_t *a, const http_conf_t *b)
{
    for (size_t i = 0; i < ARRAY_LEN(HTTP_STRS); i++)
        if (!str_eq(HTTP_STR(a, i), HTTP_STR(b, i))) return false;
    return a->read_without_token == b->read_without_token && a->socket_mode == b->socket_mode &&
           a->max_connections == b->max_connections && a->timeout == b->timeout &&
           a->header_timeout == b->header_timeout;
}

static void print_http(const http_conf_t *h, FILE *f);
static bool resolve_http_peers(ctx_t *x, const config_setting_t *g, qconf_t *c);

/* ---------------------------------------------------------------- alerts */

static bool parse_wait_rules(ctx_t *x, const config_setting_t *g, alerts_conf_t *a)
{
    if (!is_group(x, g, "alerts.long_wait_queues: expected a group { emails = 30; reports = 0; }")) return false;
    bool ok = true;
    int n = config_setting_length(g);
    a->waits = xcalloc((size_t)n + 1, sizeof *a->waits);
    for (int i = 0; i < n; i++) {
        config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        double v = 0;
        if (!want_num(x, s, 0, 86400 * 7, &v)) {
            ok = false;
            continue;
        }
        a->waits[a->nwaits].queue = xstrdup(config_setting_name(s));
        a->waits[a->nwaits++].seconds = v;
    }
    return ok;
}

static bool parse_wait_key(ctx_t *x, const config_setting_t *s, void *obj)
{
    return parse_wait_rules(x, s, &((qconf_t *)obj)->alerts);
}

#define AK(k, f, kind, lo, hi) KEY(k, kind, qconf_t, f, lo, hi)
static const conf_key_t ALERT_KEYS[] = {
    AK("long_wait", alerts.long_wait_s, K_NUM, 0, 86400 * 7),
    KEY_FN("long_wait_queues", parse_wait_key),
    AK("failure_rate", alerts.failure_rate, K_NUM, 0, 1),
    AK("failure_min_jobs", alerts.failure_min_jobs, K_INT, 1, 1000000),
    AK("crash_loop", alerts.crash_loop_crashes, K_INT, 0, ALERTS_CRASHES_MAX),
    AK("crash_loop_window", alerts.crash_loop_window_s, K_INT, 1, 86400),
    AK("clear_after", alerts.clear_after_s, K_INT, 0, 86400),
    AK("command", alerts_command, K_STRV, 0, 0),
    AK("user", alerts_user, K_STR, 0, 0),
    KEY_END,
};

static bool parse_alerts_group(ctx_t *x, const config_setting_t *g, void *obj)
{
    if (!is_group(x, g, "alerts: expected a group { long_wait = 60; command = [...]; }")) return false;
    qconf_t *c = obj;
    bool ok = parse_keys(x, g, ALERT_KEYS, c, "qpool.alerts");
    if (c->alerts_user && !getpwnam(c->alerts_user)) {
        cerr(x, g, "alerts.user \"%s\" does not exist", c->alerts_user);
        ok = false;
    }
    return ok;
}

/* ---------------------------------------------------------------- top level */

static bool parse_log_level(ctx_t *x, const config_setting_t *s, void *obj)
{
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
    int v;
    if (!want_enum(x, s, levels, &v)) return false;
    ((qconf_t *)obj)->log_level = (enum log_level)v;
    return true;
}

static bool parse_log_format(ctx_t *x, const config_setting_t *s, void *obj)
{
    static const char *const formats[] = {"text", "json", NULL};
    int v;
    if (!want_enum(x, s, formats, &v)) return false;
    ((qconf_t *)obj)->log_format = (enum log_format)v;
    return true;
}

#define QK(f, kind, lo, hi) KEY(#f, kind, qconf_t, f, lo, hi)
static const conf_key_t QPOOL_KEYS[] = {
    QK(pid_file, K_STR, 0, 0),
    QK(control_socket, K_STR, 0, 0),
    QK(control_socket_mode, K_MODE, 0, 0),
    QK(control_user, K_STR, 0, 0),
    QK(control_group, K_STR, 0, 0),
    QK(max_workers, K_INT, 1, QPOOL_MAX_WORKERS_LIMIT),
    QK(shutdown_timeout, K_NUM, 0, 86400),
    KEY_FN("log_level", parse_log_level),
    KEY_FN("log_format", parse_log_format),
    QK(failed_limit, K_INT, 1, 10000000),
    QK(balance_interval, K_NUM, 0.1, 60),
    QK(metrics_job_classes, K_INT, 1, 10000),
    QK(metrics_retention, K_INT, 60, 31 * 86400),
    QK(metrics, K_BOOL, 0, 0),
    QK(job_history_size, K_INT, 0, 100000),
    QK(job_history_sample, K_NUM, 0, 1),
    QK(job_history_payloads, K_BOOL, 0, 0),
    QK(monitored_tag_retention, K_INT, 60, 90 * 86400),
    QK(monitored_tag_jobs, K_INT, 1, 100000),
    QK(batch_jobs_keep, K_INT, 0, 10000),
    KEY_FN("http", parse_http_group),
    KEY_FN("alerts", parse_alerts_group),
    QK(fleet_lease_ttl, K_NUM, 1, 600),
    KEY_END,
};

static bool parse_qpool_group(ctx_t *x, const config_setting_t *g)
{
    qconf_t *c = x->c;
    if (!is_group(x, g, "qpool: expected a group")) return false;
    bool ok = parse_keys(x, g, QPOOL_KEYS, c, "qpool");
    if (c->http.is_unix && !strcmp(c->http.listen, c->control_socket)) {
        cerr(x, g, "http.listen is the control socket's path");
        ok = false;
    }
    if (c->control_user && !getpwnam(c->control_user)) {
        cerr(x, g, "control_user \"%s\" does not exist", c->control_user);
        ok = false;
    }
    if (c->control_group && !getgrnam(c->control_group)) {
        cerr(x, g, "control_group \"%s\" does not exist", c->control_group);
        ok = false;
    }
    if (!resolve_http_peers(x, g, c)) ok = false;
    return ok;
}

/* Who a Unix listener's peers are, looked up here in the master (the
 * HTTP process does no user database lookup). */
static bool resolve_http_peers(ctx_t *x, const config_setting_t *g, qconf_t *c)
{
    http_conf_t *h = &c->http;
    struct passwd *pw = c->control_user ? getpwnam(c->control_user) : NULL;
    struct group *gr = c->control_group ? getgrnam(c->control_group) : NULL;
    h->owner_uid = geteuid();
    if ((h->has_control_uid = pw != NULL)) h->control_uid = pw->pw_uid;
    if ((h->has_control_gid = gr != NULL)) h->control_gid = gr->gr_gid;
    if (!h->socket_group) return true;
    if (!(gr = getgrnam(h->socket_group))) {
        cerr(x, g, "http.socket_group \"%s\" does not exist", h->socket_group);
        return false;
    }
    h->socket_gid = gr->gr_gid;
    return true;
}

/* ---- password_file, tls = { ... }, Sentinel, Cluster ---- */

#define TK(f, kind) KEY(#f, kind, redis_tls_t, f, 0, 0)
static const conf_key_t TLS_KEYS[] = {
    TK(ca_file, K_STR), TK(cert_file, K_STR), TK(key_file, K_STR), TK(server_name, K_STR), TK(verify, K_BOOL),
    KEY_END,
};

static bool parse_redis_tls(ctx_t *x, const config_setting_t *g, void *obj)
{
    redis_tls_t *t = &((redis_conf_t *)obj)->tls;
    if (!is_group(x, g, "tls: expected a group { ca_file = ...; verify = true; }")) return false;
    t->enabled = true;
    bool ok = parse_keys(x, g, TLS_KEYS, t, "a redis connection's tls");
    if (!t->cert_file != !t->key_file) {
        cerr(x, g, "tls: cert_file and key_file go together (a client certificate and its key)");
        ok = false;
    }
    if (!t->verify) cwarn(x, g, "tls: verify = false: the server's certificate is not checked");
    return ok;
}

/* A list of "host:port" addresses (sentinels, cluster seeds): each must
 * parse; *n counts them. */
static bool parse_addr_list(ctx_t *x, const config_setting_t *s, int default_port, char ***addrs, int *n)
{
    if (!want_strv(x, s, true, addrs)) return false;
    bool ok = true;
    *n = 0;
    for (char **a = *addrs; *a; a++, (*n)++) {
        char host[256], err[300];
        int port;
        if (sentinel_parse_addr(*a, default_port, host, sizeof host, &port, err, sizeof err) < 0) {
            cerr(x, s, "%s[%d]: %s", config_setting_name(s), *n, err);
            ok = false;
        }
    }
    return ok;
}

static bool parse_sentinels(ctx_t *x, const config_setting_t *s, void *obj)
{
    redis_sentinel_t *st = &((redis_conf_t *)obj)->sentinel;
    return parse_addr_list(x, s, SENTINEL_DEFAULT_PORT, &st->addrs, &st->naddrs);
}

static bool parse_cluster(ctx_t *x, const config_setting_t *s, void *obj)
{
    redis_conf_t *r = obj;
    return parse_addr_list(x, s, RCLUSTER_DEFAULT_PORT, &r->cluster, &r->ncluster);
}

/* host and port are noted as given: cluster excludes them */
static bool parse_host(ctx_t *x, const config_setting_t *s, void *obj)
{
    redis_conf_t *r = obj;
    r->host_set = true;
    return want_str(x, s, &r->host);
}

static bool parse_port(ctx_t *x, const config_setting_t *s, void *obj)
{
    redis_conf_t *r = obj;
    r->port_set = true;
    return want_int(x, s, 1, 65535, &r->port);
}

#define RK(k, f, kind, lo, hi) KEY(k, kind, redis_conf_t, f, lo, hi)
static const conf_key_t REDIS_KEYS[] = {
    KEY_FN("host", parse_host),
    KEY_FN("port", parse_port),
    RK("socket", socket, K_STR, 0, 0),
    RK("db", db, K_INT, 0, 1000000),
    RK("prefix", prefix, K_STR, 0, 0),
    RK("username", username, K_STR, 0, 0),
    RK("password_env", password_env, K_STR, 0, 0),
    RK("timeout", timeout, K_NUM, 0.01, 3600),
    RK("password_file", password_file, K_STR, 0, 0),
    KEY_FN("tls", parse_redis_tls),
    KEY_FN("sentinels", parse_sentinels),
    RK("master_name", sentinel.master_name, K_STR, 0, 0),
    RK("sentinel_username", sentinel.username, K_STR, 0, 0),
    RK("sentinel_password_env", sentinel.password_env, K_STR, 0, 0),
    RK("sentinel_password_file", sentinel.password_file, K_STR, 0, 0),
    KEY_FN("cluster", parse_cluster),
    KEY_END,
};

/* A secret others can read: refused by 2.0, a warning within 1.x (a file
 * that loaded in 1.0 still does; docs/upgrading.md). */
static void warn_others_read(ctx_t *x, const config_setting_t *s, const char *key, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & S_IROTH))
        cwarn(x, s, "%s: %s is readable by others: chmod 0600 (or 0640 with a group that may read it); "
                    "qpool 2.0 will refuse it", key, path);
}

/* Read a password_file now (the master may be root; workers run as the
 * pool's user): an error names the key's file and line. */
static bool load_secret(ctx_t *x, const config_setting_t *g, const char *key, const char *path,
                        char **out)
{
    if (!path) return true;
    char err[512];
    *out = safefile_read_secret(path, err, sizeof err);
    config_setting_t *s = config_setting_get_member(g, key);
    if (*out) {
        warn_others_read(x, s ? s : g, key, path);
        return true;
    }
    cerr(x, s ? s : g, "%s: %s", key, err);
    return false;
}

static bool check_redis_ext(ctx_t *x, const config_setting_t *g, redis_conf_t *r)
{
    bool ok = true;
    if (r->password_env && r->password_file) {
        cerr(x, g, "redis.%s: password_env and password_file: use one", r->name);
        ok = false;
    }
    if (r->sentinel.password_env && r->sentinel.password_file) {
        cerr(x, g, "redis.%s: sentinel_password_env and sentinel_password_file: use one", r->name);
        ok = false;
    }
    if (!r->sentinel.addrs != !r->sentinel.master_name) {
        cerr(x, g, "redis.%s: sentinels and master_name go together", r->name);
        ok = false;
    }
    if (r->cluster) {
        const char *other = r->socket ? "socket" : r->sentinel.addrs ? "sentinels" : r->host_set ? "host" : r->port_set ? "port" : r->db ? "db" : NULL;
        if (other) {
            config_setting_t *o = config_setting_get_member(g, !strcmp(other, "sentinels") ? "sentinels" : other);
            cerr(x, o ? o : g, "redis.%s: cluster cannot be used with %s%s", r->name, other,
                 !strcmp(other, "db") ? " (a cluster has only db 0)" : " (the cluster's nodes come from its slot map)");
            ok = false;
        }
    }
    if (r->socket && (r->tls.enabled || r->sentinel.addrs)) {
        cerr(x, g, "redis.%s: socket cannot be used with %s", r->name, r->tls.enabled ? "tls" : "sentinels");
        ok = false;
    }
    ok &= load_secret(x, g, "password_file", r->password_file, &r->file_password);
    ok &= load_secret(x, g, "sentinel_password_file", r->sentinel.password_file, &r->sentinel.file_password);
    return ok;
}

void pool_conf_wipe_env(pool_conf_t *p)
{
    for (int i = 0; i < p->nenv; i++) {
        free_wiped(p->env[i].value);
        free(p->env[i].name);
    }
    free(p->env);
    p->env = NULL;
    p->nenv = 0;
}

void config_wipe_secrets(qconf_t *c, const char *keep)
{
    for (int i = 0; i < c->nredis; i++)
        if (!keep || strcmp(c->redis[i].name, keep)) redis_conf_wipe_secrets(&c->redis[i]);
    for (int i = 0; i < c->npools; i++) pool_conf_wipe_env(&c->pools[i]);
}

static bool same_name(const char *a, const char *b)
{
    return a && b && !strcmp(a, b);
}

void config_wipe_secrets_but(qconf_t *c, const pool_conf_t *own)
{
    for (int i = 0; i < c->nredis; i++)
        if (!same_name(c->redis[i].name, own->connection) && !same_name(c->redis[i].name, own->cache_connection))
            redis_conf_wipe_secrets(&c->redis[i]);
    for (int i = 0; i < c->npools; i++) pool_conf_wipe_env(&c->pools[i]);
}

static void print_redis_ext(FILE *f, const redis_conf_t *r);

static void redis_defaults(redis_conf_t *r, const char *name)
{
    memset(r, 0, sizeof *r);
    r->name = xstrdup(name);
    r->host = xstrdup("127.0.0.1");
    r->port = 6379;
    r->prefix = xstrdup("laravel_database_");
    r->timeout = 5;
    r->tls.verify = true;
}

static bool parse_redis_group(ctx_t *x, const config_setting_t *g)
{
    qconf_t *c = x->c;
    bool ok = true;
    if (!is_group(x, g, "redis: expected a group of named connections")) return false;
    int n = config_setting_length(g);
    c->redis = xcalloc((size_t)n + 1, sizeof *c->redis);
    for (int i = 0; i < n; i++) {
        config_setting_t *cs = config_setting_get_elem(g, (unsigned)i);
        redis_conf_t *r = &c->redis[c->nredis++];
        redis_defaults(r, config_setting_name(cs));
        if (config_setting_type(cs) != CONFIG_TYPE_GROUP) {
            cerr(x, cs, "redis.%s: expected a group { host = ...; port = ...; }", r->name);
            ok = false;
            continue;
        }
        ok &= parse_keys(x, cs, REDIS_KEYS, r, "a redis connection");
        ok &= check_redis_ext(x, cs, r);
    }
    return ok;
}

char *config_control_socket(const char *path)
{
    config_t cfg;
    config_init(&cfg);
    char *r = NULL;
    const char *v = NULL;
    if (config_read_file(&cfg, path) && config_lookup_string(&cfg, "qpool.control_socket", &v))
        r = xstrdup(v);
    config_destroy(&cfg);
    return r ? r : xstrdup("/run/qpool/qpool.sock");
}

const char *config_path(const char *explicit_path)
{
    if (explicit_path && *explicit_path) return explicit_path;
    const char *e = getenv("QPOOL_CONFIG");
    if (e && *e) return e;
    return QPOOL_DEFAULT_CONFIG;
}

/* The pools: parse every one and note its app; describe the apps all at
 * once (config_app.h); then finish each pool in order. */
static void load_pools(ctx_t *x, const config_setting_t *gp, const pool_conf_t *defaults, const pool_parse_t *dpp)
{
    qconf_t *c = x->c;
    app_cache_t *apps = NULL;
    int n = config_setting_length(gp);
    if (n == 0) cerr(x, gp, "pools: no pools defined");
    c->pools = xcalloc((size_t)n + 1, sizeof *c->pools);
    pool_pass_t *pass = xcalloc((size_t)n + 1, sizeof *pass);
    for (int i = 0; i < n; i++) {
        config_setting_t *g = config_setting_get_elem(gp, (unsigned)i);
        if (config_setting_type(g) != CONFIG_TYPE_GROUP) {
            cerr(x, g, "pools[%d]: expected a group { name = ...; }", i);
            continue;
        }
        pool_pass_t *ps = &pass[c->npools];
        pool_conf_t *p = &c->pools[c->npools++];
        pool_conf_copy(p, defaults);
        p->line = sline(g);
        ps->g = g;
        ps->pp = (pool_parse_t){.explicit = dpp->explicit};
        ps->parsed = parse_pool_settings(x, g, p, false, &ps->pp);
        if (ps->parsed && p->laravel && resolve_identity(p))
            app_describe_note(&apps, p, ps->pp.explicit & EXPLICIT_QUEUE_CONNECTION);
    }
    app_describe_pending(apps);
    for (int i = 0; i < c->npools; i++) {
        pool_conf_t *p = &c->pools[i];
        const pool_pass_t *ps = &pass[i];
        /* an app that cannot be read: that error alone, not what follows from it */
        if (!ps->parsed || !p->laravel || apply_app(x, p, &ps->pp, &apps)) finish_pool(x, ps->g, p, &ps->pp);
        for (int j = 0; p->name && j < i; j++)
            if (c->pools[j].name && !strcmp(c->pools[j].name, p->name))
                cerr(x, ps->g, "pool name \"%s\" is used twice (first on line %d)", p->name,
                     c->pools[j].line);
    }
    free(pass);
    app_cache_free(apps);
}

/* A config with every global default, no connection and no pool yet. */
static qconf_t *config_new(const char *path)
{
    qconf_t *c = xcalloc(1, sizeof *c);
    c->path = xstrdup(path);
    c->pid_file = xstrdup("/run/qpool/qpool.pid");
    c->control_socket = xstrdup("/run/qpool/qpool.sock");
    c->control_socket_mode = 0660;
    c->max_workers = 64;
    c->metrics_job_classes = 100;
    c->metrics_retention = 86400;
    c->metrics = true;
    c->job_history_size = 1000;
    c->monitored_tag_retention = 7 * 86400;
    c->monitored_tag_jobs = 10000;
    c->batch_jobs_keep = 100;
    c->job_history_sample = 1;
    c->shutdown_timeout = 120;
    c->log_level = LOG_INFO;
    c->log_format = LOGFMT_TEXT;
    c->failed_limit = 10000;
    c->balance_interval = 1;
    c->fleet_lease_ttl = 10;
    http_defaults(&c->http);
    alerts_conf_defaults(&c->alerts);
    return c;
}

/* Read and parse the file into cfg; false (reported) when it cannot be. */
static bool read_config_file(ctx_t *x, config_t *cfg, const char *path)
{
    /* Relative @include paths resolve against the config file's directory. */
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        config_set_include_dir(cfg, *dir ? dir : "/");
    }
    free(dir);
    struct stat st;
    if (stat(path, &st) < 0) {
        cerr(x, NULL, "cannot read config file: %s", strerror(errno));
        return false;
    }
    if (config_read_file(cfg, path)) return true;
    if (config_error_type(cfg) == CONFIG_ERR_FILE_IO)
        cerr(x, NULL, "cannot read config file: %s", config_error_text(cfg));
    else {
        const char *f = config_error_file(cfg) ? config_error_file(cfg) : path;
        char *msg = xasprintf("%s:%d: syntax error: %s", f, config_error_line(cfg), config_error_text(cfg));
        x->errs->msgs = xrealloc(x->errs->msgs, sizeof(char *) * (size_t)(x->errs->n + 1));
        x->errs->msgs[x->errs->n++] = msg;
    }
    return false;
}

/* The file's four top-level groups (NULL: absent). */
typedef struct {
    const config_setting_t *qpool, *redis, *defaults, *pools, *limits;
} top_groups_t;

static top_groups_t find_top_groups(ctx_t *x, config_setting_t *root)
{
    static const char *const top_known[] = {"qpool", "redis", "defaults", "pools", "limits", NULL};
    top_groups_t t = {0};
    for (int i = 0; i < config_setting_length(root); i++) {
        config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *k = config_setting_name(s);
        if (!strcmp(k, "qpool")) t.qpool = s;
        else if (!strcmp(k, "redis")) t.redis = s;
        else if (!strcmp(k, "defaults")) t.defaults = s;
        else if (!strcmp(k, "pools")) t.pools = s;
        else if (!strcmp(k, "limits")) t.limits = s;
        else unknown_key(x, s, "the top level", top_known, sizeof *top_known);
    }
    return t;
}

/* Pools use "default" unless told otherwise; provide Laravel's stock one
 * when qpool.conf has none (a Laravel app's own "default" replaces it:
 * config_app.c). */
static void add_stock_redis(qconf_t *c)
{
    if (config_redis(c, "default")) return;
    c->redis = xrealloc(c->redis, sizeof *c->redis * (size_t)(c->nredis + 1));
    redis_defaults(&c->redis[c->nredis], "default");
    c->redis[c->nredis++].kind = REDIS_STOCK;
}

/* No Redis at all: qpool.conf names none (no `redis` group and no
 * http.connection, or redis = false) and no pool needs one. A config that names none but has a pool
 * that needs one keeps Laravel's stock connection (1.x). */
static void decide_no_redis(qconf_t *c, bool named)
{
    c->no_redis = !named && c->npools > 0;
    for (int i = 0; i < c->npools && c->no_redis; i++) c->no_redis = !pool_needs_redis(&c->pools[i]);
}

/* What the pools together must respect: max_workers covers their floors,
 * and a fleet budget's lease outlives two balancer passes. */
static void check_pool_totals(ctx_t *x, const config_setting_t *where)
{
    qconf_t *c = x->c;
    int minsum = 0;
    for (int i = 0; i < c->npools; i++)
        minsum += c->pools[i].balance == BALANCE_OFF ? c->pools[i].processes : c->pools[i].min_processes;
    if (x->errs->n == 0 && minsum > c->max_workers)
        cerr(x, where, "max_workers (%d) is below the sum of the pools' fixed and minimum sizes (%d)",
             c->max_workers, minsum);
    bool budgets = false;
    for (int i = 0; i < c->npools; i++) budgets |= c->pools[i].fleet_max_processes > 0;
    if (budgets && c->fleet_lease_ttl < 2 * c->balance_interval)
        cerr(x, where, "fleet_lease_ttl (%g s) must be at least two balance_interval (%g s): a "
                       "lease renewed once a pass must not lapse between two passes",
             c->fleet_lease_ttl, c->balance_interval);
}

/* `defaults`, then the pools on top of them. */
static void parse_pools(ctx_t *x, const top_groups_t *t)
{
    pool_conf_t defaults;
    pool_builtin_defaults(&defaults);
    pool_parse_t dpp = {0};
    if (t->defaults) {
        if (config_setting_type(t->defaults) != CONFIG_TYPE_GROUP)
            cerr(x, t->defaults, "defaults: expected a group");
        else
            parse_pool_settings(x, t->defaults, &defaults, true, &dpp);
    }
    if (!t->pools) {
        cerr(x, NULL, "no pools defined (add pools = ( { name = ...; queues = [...]; ... } );)");
    } else if (config_setting_type(t->pools) != CONFIG_TYPE_LIST) {
        cerr(x, t->pools, "pools: expected a list ( {...}, {...} )");
    } else {
        load_pools(x, t->pools, &defaults, &dpp);
        check_pool_totals(x, t->qpool ? t->qpool : t->pools);
    }
    pool_conf_free(&defaults);
}

/* ---------------------------------------------------------------- limits */

#define LK(k, f, kind, lo, hi) KEY(k, kind, limit_conf_t, f, lo, hi)
static const conf_key_t LIMIT_KEYS[] = {
    LK("class", class_name, K_STR, 0, 0),
    LK("queue", queue, K_STR, 0, 0),
    LK("concurrency", concurrency, K_INT, 1, LIMIT_CONCURRENCY_MAX),
    LK("rate", rate, K_STR, 0, 0),
    LK("burst", burst, K_INT, 1, LIMIT_BURST_MAX),
    LK("tag_prefix", tag_prefix, K_STR, 0, 0),
    LK("alert_after", alert_after, K_NUM, 0, 86400 * 7),
    KEY_END,
};

/* One { ... } of the list into l; false (reported) when it is not valid. */
static bool parse_limit(ctx_t *x, const config_setting_t *g, limit_conf_t *l)
{
    if (!is_group(x, g, "limits: expected a list of groups ( { class = \"...\"; concurrency = 5; }, ... )"))
        return false;
    l->line = sline(g);
    if (!parse_keys(x, g, LIMIT_KEYS, l, "a limit")) return false;
    char err[256];
    if (limit_check(l, err, sizeof err) < 0) {
        cerr(x, g, "limits: %s", err);
        return false;
    }
    return true;
}

/* The pools a limit applies to pop one job at a time with the limited pop
 * (on a Redis Cluster: its lease-and-pick pass); a command's pops are its own. */
static void check_limited_pools(ctx_t *x, const config_setting_t *s)
{
    qconf_t *c = x->c;
    for (int i = 0; i < c->npools; i++) {
        pool_conf_t *p = &c->pools[i];
        bool limited = false;
        for (int j = 0; j < c->nlimits; j++) limited |= limit_applies_to(&c->limits[j], p->queues, p->nqueues);
        if (!limited) continue;
        if (p->handler_type == HANDLER_NONE)
            cwarn(x, s, "limits: pool %s runs a command, which pops on its own: its jobs are not limited", p->name);
        else if (p->app_driver)
            cwarn(x, s, "limits: pool %s runs through the app's driver (app_driver), which pops on its own: its jobs "
                        "are not limited", p->name);
        else if (p->prefetch > 1) {
            cwarn(x, s, "limits: pool %s: prefetch = %d is ignored: a pool under limits pops one job at a time",
                  p->name, p->prefetch);
            p->prefetch = 1;
        }
    }
}

/* The top-level `limits = ( {...}, ... );` list (config/limits.h). */
static void parse_limits(ctx_t *x, const config_setting_t *s)
{
    if (config_setting_type(s) != CONFIG_TYPE_LIST) {
        cerr(x, s, "limits: expected a list ( { class = \"...\"; concurrency = 5; }, ... )");
        return;
    }
    int n = config_setting_length(s);
    if (n > LIMITS_MAX) {
        cerr(x, s, "limits: at most %d limits", LIMITS_MAX);
        return;
    }
    qconf_t *c = x->c;
    c->limits = xcalloc((size_t)n + 1, sizeof *c->limits);
    for (int i = 0; i < n; i++) {
        const config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
        limit_conf_t *l = &c->limits[c->nlimits++];
        if (!parse_limit(x, g, l)) continue;
        for (int j = 0; j < c->nlimits - 1; j++)
            if (limit_same_target(&c->limits[j], l)) {
                char d[600];
                limit_describe(l, d, sizeof d);
                cerr(x, g, "limits: %s is limited twice (line %d too): one limit may set both concurrency "
                           "and rate", d, c->limits[j].line);
                break;
            }
    }
    check_limited_pools(x, s);
}

qconf_t *config_load(const char *path, conf_errors_t *errs)
{
    memset(errs, 0, sizeof *errs);
    qconf_t *c = config_new(path);
    ctx_t x = {.path = path, .errs = errs, .c = c};
    config_t cfg;
    config_init(&cfg);
    if (read_config_file(&x, &cfg, path)) {
        top_groups_t t = find_top_groups(&x, config_root_setting(&cfg));
        if (t.qpool) parse_qpool_group(&x, t.qpool);
        if (t.redis && config_setting_type(t.redis) == CONFIG_TYPE_BOOL && !config_setting_get_bool(t.redis))
            c->redis_off = true;
        else if (t.redis)
            parse_redis_group(&x, t.redis);
        add_stock_redis(c);
        if (c->http.connection && c->redis_off)
            cerr(&x, t.qpool, "http.connection: qpool.conf says redis = false");
        else if (c->http.connection && !config_redis(c, c->http.connection))
            cerr(&x, t.qpool, "http.connection: no redis connection named \"%s\"", c->http.connection);
        parse_pools(&x, &t);
        decide_no_redis(c, (t.redis || c->http.connection) && !c->redis_off); /* http.connection names one */
        if (t.limits) parse_limits(&x, t.limits);
    }
    config_destroy(&cfg);
    if (errs->n) {
        config_free(c);
        return NULL;
    }
    return c;
}

void config_free(qconf_t *c)
{
    if (!c) return;
    limits_free(c->limits, c->nlimits);
    free(c->path);
    free(c->pid_file);
    free(c->control_socket);
    free(c->control_user);
    free(c->control_group);
    http_conf_free(&c->http);
    alerts_conf_free(&c->alerts);
    if (c->alerts_command)
        for (char **v = c->alerts_command; *v; v++) free(*v);
    free(c->alerts_command);
    free(c->alerts_user);
    for (int i = 0; i < c->nredis; i++) redis_conf_free(&c->redis[i]);
    free(c->redis);
    for (int i = 0; i < c->npools; i++) pool_conf_free(&c->pools[i]);
    free(c->pools);
    free(c);
}

void conf_errors_free(conf_errors_t *e)
{
    for (int i = 0; i < e->n; i++) free(e->msgs[i]);
    for (int i = 0; i < e->nwarn; i++) free(e->warnings[i]);
    free(e->msgs);
    free(e->warnings);
    memset(e, 0, sizeof *e);
}

void conf_errors_print(const conf_errors_t *e, FILE *f)
{
    for (int i = 0; i < e->n; i++) fprintf(f, "%s\n", e->msgs[i]);
    for (int i = 0; i < e->nwarn; i++) fprintf(f, "warning: %s\n", e->warnings[i]);
}

const redis_conf_t *config_redis(const qconf_t *c, const char *name)
{
    for (int i = 0; name && i < c->nredis; i++)
        if (!strcmp(c->redis[i].name, name)) return &c->redis[i];
    return NULL;
}

int config_pool_index(const qconf_t *c, const char *name)
{
    for (int i = 0; i < c->npools; i++)
        if (!strcmp(c->pools[i].name, name)) return i;
    return -1;
}

const pool_conf_t *config_pool(const qconf_t *c, const char *name)
{
    int i = config_pool_index(c, name);
    return i < 0 ? NULL : &c->pools[i];
}


/* ---------------------------------------------------------------- print */

static const char *yes_no(bool v)
{
    return v ? "true" : "false";
}

/* A libconfig string literal: \" \\ \n \r \t \f, and \xNN for other control bytes
 * (libconfig has no \u escapes). */
static void put_lc_str(FILE *f, const char *v)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
        switch (*c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (*c < 0x20 || *c == 0x7f)
                fprintf(f, "\\x%02x", *c);
            else
                fputc(*c, f);
        }
    }
    fputc('"', f);
}

static void print_str(FILE *f, const char *indent, const char *k, const char *v)
{
    fprintf(f, "%s%s = ", indent, k);
    put_lc_str(f, v);
    fprintf(f, ";\n");
}

static void print_strv(FILE *f, const char *indent, const char *k, char *const *v)
{
    fprintf(f, "%s%s = [", indent, k);
    for (int i = 0; v[i]; i++) {
        if (i) fputs(", ", f);
        put_lc_str(f, v[i]);
    }
    fprintf(f, "];\n");
}

static void print_num(FILE *f, const char *indent, const char *k, double v)
{
    char buf[64];
    fmt_num(buf, sizeof buf, v);
    /* libconfig needs a decimal point to read a float back as a float */
    if (v != (long long)v || strchr(buf, 'e'))
        fprintf(f, "%s%s = %s;\n", indent, k, buf);
    else
        fprintf(f, "%s%s = %s.0;\n", indent, k, buf);
}

static void print_http(const http_conf_t *h, FILE *f)
{
    if (!h->listen) return;
    fprintf(f, "  http = {\n");
    print_str(f, "    ", "listen", h->listen);
    if (h->token_file) print_str(f, "    ", "token_file", h->token_file);
    if (h->token_env) print_str(f, "    ", "token_env", h->token_env);
    print_str(f, "    ", "user", h->user ? h->user : "nobody");
    print_str(f, "    ", "connection", h->connection ? h->connection : "default");
    if (h->is_unix) fprintf(f, "    socket_mode = \"%04o\";\n", h->socket_mode);
    if (h->base_path) print_str(f, "    ", "base_path", h->base_path);
    if (h->socket_group) print_str(f, "    ", "socket_group", h->socket_group);
    print_str(f, "    ", "read_without_token", READ_NAMES[h->read_without_token]);
    fprintf(f, "    max_connections = %d;\n    timeout = %d;\n    header_timeout = %d;\n  };\n", h->max_connections,
            h->timeout, h->header_timeout);
}

static void print_alerts(const qconf_t *c, FILE *f)
{
    const alerts_conf_t *a = &c->alerts;
    fprintf(f, "  alerts = {\n");
    print_num(f, "    ", "long_wait", a->long_wait_s);
    if (a->nwaits) {
        fprintf(f, "    long_wait_queues = {\n");
        for (int i = 0; i < a->nwaits; i++) print_num(f, "      ", a->waits[i].queue, a->waits[i].seconds);
        fprintf(f, "    };\n");
    }
    print_num(f, "    ", "failure_rate", a->failure_rate);
    fprintf(f, "    failure_min_jobs = %d;\n    crash_loop = %d;\n    crash_loop_window = %d;\n    clear_after = %d;\n",
            a->failure_min_jobs, a->crash_loop_crashes, a->crash_loop_window_s, a->clear_after_s);
    if (c->alerts_command) print_strv(f, "    ", "command", c->alerts_command);
    if (c->alerts_user) print_str(f, "    ", "user", c->alerts_user);
    fprintf(f, "  };\n");
}

/* An environment variable whose value `qpool check` does not print. */
static bool secret_name(const char *name)
{
    static const char *const words[] = {"PASSWORD", "PASS", "SECRET", "TOKEN", "KEY", "AUTH", NULL};
    for (int i = 0; words[i]; i++)
        if (strcasestr(name, words[i])) return true;
    return false;
}

static void print_app(const pool_conf_t *p, FILE *f, const char *in)
{
    if (!p->laravel) return;
    print_str(f, in, "laravel", p->laravel);
    print_strv(f, in, "php", p->php);
    if (p->silenced) print_strv(f, in, "silenced", p->silenced);
    if (p->silenced_tags) print_strv(f, in, "silenced_tags", p->silenced_tags);
    if (p->php_adapter) print_str(f, in, "php_adapter", p->php_adapter);
    if (p->php_root) print_str(f, in, "php_root", p->php_root);
    fprintf(f, "%sforce = %s;\n", in, yes_no(p->force));
    app_print_origins(p, f, in);
}

static void print_qpool(const qconf_t *c, FILE *f)
{
    fprintf(f, "qpool = {\n");
    print_str(f, "  ", "pid_file", c->pid_file);
    print_str(f, "  ", "control_socket", c->control_socket);
    fprintf(f, "  control_socket_mode = \"%04o\";\n", c->control_socket_mode);
    if (c->control_user) print_str(f, "  ", "control_user", c->control_user);
    if (c->control_group) print_str(f, "  ", "control_group", c->control_group);
    fprintf(f, "  max_workers = %d;\n", c->max_workers);
    fprintf(f, "  metrics_job_classes = %d;\n", c->metrics_job_classes);
    fprintf(f, "  metrics_retention = %d;\n", c->metrics_retention);
    fprintf(f, "  metrics = %s;\n", yes_no(c->metrics));
    fprintf(f, "  job_history_size = %d;\n", c->job_history_size);
    print_num(f, "  ", "job_history_sample", c->job_history_sample);
    fprintf(f, "  job_history_payloads = %s;\n", yes_no(c->job_history_payloads));
    fprintf(f, "  monitored_tag_retention = %d;\n", c->monitored_tag_retention);
    fprintf(f, "  monitored_tag_jobs = %d;\n", c->monitored_tag_jobs);
    fprintf(f, "  batch_jobs_keep = %d;\n", c->batch_jobs_keep);
    print_num(f, "  ", "shutdown_timeout", c->shutdown_timeout);
    fprintf(f, "  log_level = \"%s\";\n", log_level_name(c->log_level));
    fprintf(f, "  log_format = \"%s\";\n", c->log_format == LOGFMT_JSON ? "json" : "text");
    fprintf(f, "  failed_limit = %d;\n", c->failed_limit);
    print_num(f, "  ", "balance_interval", c->balance_interval);
    print_num(f, "  ", "fleet_lease_ttl", c->fleet_lease_ttl);
    print_http(&c->http, f);
    print_alerts(c, f);
    fprintf(f, "};\n");
}

static void print_redis(const redis_conf_t *r, FILE *f)
{
    fprintf(f, "  %s = {\n", r->name);
    if (r->socket)
        print_str(f, "    ", "socket", r->socket);
    else if (!r->cluster) {
        print_str(f, "    ", "host", r->host);
        fprintf(f, "    port = %d;\n", r->port);
    }
    if (!r->cluster) fprintf(f, "    db = %d;\n", r->db);
    print_str(f, "    ", "prefix", r->prefix);
    if (r->username) print_str(f, "    ", "username", r->username);
    if (r->password_env) print_str(f, "    ", "password_env", r->password_env);
    if (r->password) fprintf(f, "    # password: (redacted; read from the app)\n");
    if (r->app) fprintf(f, "    # read from the Laravel app %s\n", r->app);
    print_num(f, "    ", "timeout", r->timeout);
    print_redis_ext(f, r);
    fprintf(f, "  };\n");
}

/* balance, and the size settings its mode uses */
static void print_pool_size(const pool_conf_t *p, FILE *f, const char *in)
{
    fprintf(f, "%sbalance = \"%s\";\n", in, balance_names[p->balance]);
    if (p->balance == BALANCE_OFF) {
        fprintf(f, "%sprocesses = %d;\n", in, p->processes);
        return;
    }
    fprintf(f, "%smin_processes = %d;\n%smax_processes = %d;\n", in, p->min_processes, in, p->max_processes);
    fprintf(f, "%sauto_strategy = \"%s\";\n", in, strategy_names[p->auto_strategy]);
    print_num(f, in, "target_wait", p->target_wait);
    print_num(f, in, "scale_down_delay", p->scale_down_delay);
    fprintf(f, "%spriority = %d;\n", in, p->priority);
    if (p->fleet_max_processes) fprintf(f, "%sfleet_max_processes = %d;\n", in, p->fleet_max_processes);
}

/* what each child runs: the handler group, or the command */
static void print_pool_runs(const pool_conf_t *p, FILE *f, const char *in)
{
    if (p->handler_type == HANDLER_NONE) {
        print_strv(f, in, "command", p->command);
        return;
    }
    fprintf(f, "%shandler = {\n", in);
    fprintf(f, "%s  type = \"%s\";\n", in, handler_names[p->handler_type]);
    print_strv(f, "      ", "command", p->handler_command);
    if (p->handler_type == HANDLER_PIPE) {
        print_num(f, "      ", "start_timeout", p->handler_start_timeout);
        if (p->handler_protocol == HANDLER_PROTO_AUTO)
            fprintf(f, "      protocol = \"auto\";\n");
        else
            fprintf(f, "      protocol = %d;\n", p->handler_protocol);
    }
    fprintf(f, "%s};\n", in);
    if (pool_runs_adapter(p))
        fprintf(f, "%spreload = %s;%s\n", in, yes_no(p->preload), pool_preloads(p) ? "" : "  # not with handler.protocol = 1");
}

/* the Laravel queue options, as in queue:work */
static void print_pool_queue(const pool_conf_t *p, FILE *f, const char *in)
{
    print_str(f, in, "connection", p->connection);
    print_str(f, in, "queue_connection", p->queue_connection);
    print_str(f, in, "cache_connection", p->cache_connection);
    print_str(f, in, "cache_prefix", p->cache_prefix);
    print_str(f, in, "restart_key", p->restart_key);
    fprintf(f, "%slaravel_pause = %s;\n", in, yes_no(p->laravel_pause));
    fprintf(f, "%stries = %d;\n", in, p->tries);
    fprintf(f, "%sbackoff = [", in);
    for (int b = 0; b < p->nbackoff; b++) fprintf(f, "%s%d", b ? ", " : "", p->backoff[b]);
    fprintf(f, "];\n");
    fprintf(f, "%stimeout = %d;\n%sretry_after = %d;\n%smemory = %d;\n", in, p->timeout, in, p->retry_after, in,
            p->memory);
    print_num(f, in, "sleep", p->sleep);
    fprintf(f, "%smax_jobs = %d;\n%smax_time = %d;\n", in, p->max_jobs, in, p->max_time);
    print_num(f, in, "rest", p->rest);
    fprintf(f, "%smigration_batch = %d;\n", in, p->migration_batch);
    fprintf(f, "%sprefetch = %d;\n", in, p->prefetch);
    fprintf(f, "%sjob_log = %s;\n", in, yes_no(p->job_log));
    if (p->app_driver) fprintf(f, "%sapp_driver = true;  # jobs popped and run by the app's own queue driver\n", in);
}

/* the children's user, directory, environment (secrets redacted) and nice */
static void print_pool_process(const pool_conf_t *p, FILE *f, const char *in)
{
    if (p->user) print_str(f, in, "user", p->user);
    if (p->group) print_str(f, in, "group", p->group);
    if (p->working_directory) print_str(f, in, "working_directory", p->working_directory);
    if (p->nenv) {
        fprintf(f, "%senvironment = {\n", in);
        for (int e = 0; e < p->nenv; e++)
            print_str(f, "      ", p->env[e].name, secret_name(p->env[e].name) ? "(redacted)" : p->env[e].value);
        fprintf(f, "%s};\n", in);
    }
    fprintf(f, "%snice = %d;\n", in, p->nice);
}

static void print_pool(const pool_conf_t *p, FILE *f, bool last)
{
    const char *in = "    ";
    fprintf(f, "  {\n");
    print_str(f, in, "name", p->name);
    print_strv(f, in, "queues", p->queues);
    print_pool_size(p, f, in);
    print_pool_runs(p, f, in);
    print_pool_queue(p, f, in);
    print_pool_process(p, f, in);
    print_app(p, f, in);
    fprintf(f, "  }%s\n", last ? "" : ",");
}

static void print_limits(const qconf_t *c, FILE *f)
{
    if (!c->nlimits) return;
    fprintf(f, "\nlimits = (\n");
    for (int i = 0; i < c->nlimits; i++) {
        const limit_conf_t *l = &c->limits[i];
        const char *in = "    ";
        fprintf(f, "  {\n");
        if (l->class_name) print_str(f, in, "class", l->class_name);
        if (l->queue) print_str(f, in, "queue", l->queue);
        if (l->concurrency) fprintf(f, "%sconcurrency = %d;\n", in, l->concurrency);
        if (l->rate) print_str(f, in, "rate", l->rate);
        if (l->rate) fprintf(f, "%sburst = %d;\n", in, l->burst);
        if (l->tag_prefix) print_str(f, in, "tag_prefix", l->tag_prefix);
        if (l->alert_after > 0) fprintf(f, "%salert_after = %g;\n", in, l->alert_after);
        fprintf(f, "  }%s\n", i + 1 == c->nlimits ? "" : ",");
    }
    fprintf(f, ");\n");
}

/* What is off without a Redis, and where each would read it (docs/laravel.md). */
static const char *const NO_REDIS_OFF[][2] = {
    {"job history", "/api/jobs/recent, a job's page"},
    {"minute history", "/api/metrics, the dashboard's charts, qpool metrics"},
    {"fleet view", "/api/fleet, qpool status --fleet"},
    {"fleet budget", "fleet_max_processes"},
    {"failed-jobs store", "qpool failed, /api/failed; the app's failer keeps its failed_jobs"},
    {"pending jobs, monitored tags, pause by class, limits", "their pages and commands"},
};

static void print_no_redis(FILE *f)
{
    fprintf(f, "\n# no Redis: qpool.conf names none and every pool runs through its app's driver;\n"
               "# status, the control socket, pause/continue, /metrics, /healthz and the dashboard's\n"
               "# live pages work from the master's own state. What qpool keeps in Redis is off:\n");
    for (size_t i = 0; i < sizeof NO_REDIS_OFF / sizeof *NO_REDIS_OFF; i++)
        fprintf(f, "#   %s: off, needs a Redis (set redis = { default = { host = ...; }; }) [%s]\n",
                NO_REDIS_OFF[i][0], NO_REDIS_OFF[i][1]);
    fprintf(f, "redis = false;\n");
}

void config_print(const qconf_t *c, FILE *f)
{
    fprintf(f, "# effective configuration of %s (defaults filled in)\n", c->path);
    print_qpool(c, f);
    if (c->no_redis)
        print_no_redis(f);
    else {
        fprintf(f, "\nredis = {\n");
        for (int i = 0; i < c->nredis; i++) print_redis(&c->redis[i], f);
        fprintf(f, "};\n");
    }
    fprintf(f, "\npools = (\n");
    for (int i = 0; i < c->npools; i++) print_pool(&c->pools[i], f, i + 1 == c->npools);
    fprintf(f, ");\n");
    print_limits(c, f);
}

/* password_file's path is printed, never what it holds. */
static void print_redis_ext(FILE *f, const redis_conf_t *r)
{
    const char *in = "    ";
    if (r->password_file) print_str(f, in, "password_file", r->password_file);
    if (r->tls.enabled) {
        fprintf(f, "%stls = {\n", in);
        const char *in2 = "      ";
        if (r->tls.ca_file) print_str(f, in2, "ca_file", r->tls.ca_file);
        if (r->tls.cert_file) print_str(f, in2, "cert_file", r->tls.cert_file);
        if (r->tls.key_file) print_str(f, in2, "key_file", r->tls.key_file);
        if (r->tls.server_name) print_str(f, in2, "server_name", r->tls.server_name);
        fprintf(f, "%sverify = %s;\n%s};\n", in2, yes_no(r->tls.verify), in);
    }
    if (r->cluster) print_strv(f, in, "cluster", r->cluster);
    if (!r->sentinel.addrs) return;
    print_strv(f, in, "sentinels", r->sentinel.addrs);
    print_str(f, in, "master_name", r->sentinel.master_name);
    if (r->sentinel.username) print_str(f, in, "sentinel_username", r->sentinel.username);
    if (r->sentinel.password_env) print_str(f, in, "sentinel_password_env", r->sentinel.password_env);
    if (r->sentinel.password_file) print_str(f, in, "sentinel_password_file", r->sentinel.password_file);
}

char **config_connection_queues(const qconf_t *conf, const char *connection)
{
    char **v = xcalloc(1, sizeof *v);
    int n = 0;
    for (int i = 0; i < conf->npools; i++) {
        const pool_conf_t *p = &conf->pools[i];
        if (strcmp(p->connection, connection)) continue;
        for (int j = 0; j < p->nqueues; j++) {
            bool seen = false;
            for (int k = 0; k < n; k++) seen |= !strcmp(v[k], p->queues[j]);
            if (seen) continue;
            v = xrealloc(v, sizeof(char *) * (size_t)(n + 2));
            v[n++] = xstrdup(p->queues[j]);
            v[n] = NULL;
        }
    }
    return v;
}

/* ---------------------------------------------------------------- alerts */

void alerts_conf_defaults(alerts_conf_t *c)
{
    memset(c, 0, sizeof *c);
    c->failure_min_jobs = 20;
    c->crash_loop_crashes = 5;
    c->crash_loop_window_s = 300;
    c->clear_after_s = 60;
}

void alerts_conf_free(alerts_conf_t *c)
{
    for (int i = 0; i < c->nwaits; i++) free(c->waits[i].queue);
    free(c->waits);
    alerts_conf_defaults(c);
}
