/*
 * horizon.c - see horizon.h.
 */
#include "config/horizon.h"

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SUPERVISORS 200

/* ---------------------------------------------------------------- merge */

static bool is_array_like(const cJSON *v)
{
    return cJSON_IsObject(v) || cJSON_IsArray(v);
}

cJSON *horizon_replace_recursive(const cJSON *base, const cJSON *repl)
{
    if (!is_array_like(base) || !is_array_like(repl)) return cJSON_Duplicate(repl, true);
    if (cJSON_IsArray(base) && cJSON_IsArray(repl)) {
        cJSON *out = cJSON_CreateArray();
        int nb = cJSON_GetArraySize(base), nr = cJSON_GetArraySize(repl);
        for (int i = 0; i < (nb > nr ? nb : nr); i++) {
            const cJSON *b = cJSON_GetArrayItem(base, i), *r = cJSON_GetArrayItem(repl, i);
            cJSON_AddItemToArray(out, r ? horizon_replace_recursive(b, r) : cJSON_Duplicate(b, true));
        }
        return out;
    }
    if (cJSON_IsArray(base) != cJSON_IsArray(repl)) {
        /* an empty PHP array is a JSON list: it merges as an empty map */
        if (cJSON_GetArraySize(base) == 0) return cJSON_Duplicate(repl, true);
        if (cJSON_GetArraySize(repl) == 0) return cJSON_Duplicate(base, true);
        return cJSON_Duplicate(repl, true);
    }
    cJSON *out = cJSON_Duplicate(base, true);
    const cJSON *r;
    cJSON_ArrayForEach(r, repl)
    {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(base, r->string);
        cJSON *v = b ? horizon_replace_recursive(b, r) : cJSON_Duplicate(r, true);
        if (b)
            cJSON_ReplaceItemInObjectCaseSensitive(out, r->string, v);
        else
            cJSON_AddItemToObject(out, r->string, v);
    }
    return out;
}

/* ---------------------------------------------------------------- output */

static void put_str(sbuf_t *o, const char *s)
{
    sbuf_putc(o, '"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            sbuf_printf(o, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f)
            sbuf_printf(o, "\\x%02x", *c);
        else
            sbuf_putc(o, (char)*c);
    }
    sbuf_putc(o, '"');
}

/* A comment may say anything but a line break. */
static void comment(sbuf_t *o, const char *in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void comment(sbuf_t *o, const char *in, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m;
    if (vasprintf(&m, fmt, ap) < 0) m = NULL;
    va_end(ap);
    if (!m) return;
    for (char *c = m; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    sbuf_printf(o, "%s# %s\n", in, m);
    free(m);
}

/* A JSON scalar as a comment shows it. */
static void scalar_text(const cJSON *v, char *buf, size_t n)
{
    if (cJSON_IsString(v))
        snprintf(buf, n, "\"%.100s\"", v->valuestring);
    else if (cJSON_IsNumber(v))
        snprintf(buf, n, "%g", v->valuedouble);
    else if (cJSON_IsBool(v))
        snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v))
        snprintf(buf, n, "null");
    else
        snprintf(buf, n, "(a list or map)");
}

/* ---------------------------------------------------------------- supervisor */

typedef struct {
    const char *key;        /* Horizon's option */
    const char *qkey;       /* qpool's key, NULL: none */
    double lo, hi;
    bool integer;
    const char *note;       /* a comment where semantics differ */
} opt_t;

static const opt_t OPTS[] = {
    {"tries", "tries", 0, 1000000, true, NULL},
    {"timeout", "timeout", 0, 86400 * 7, true, NULL},
    {"memory", "memory", 0, 1024 * 1024, true,
     "Horizon checks memory after each job, in the worker; qpool also counts a pipe handler's RSS"},
    {"maxTime", "max_time", 0, 2000000000, true, NULL},
    {"maxJobs", "max_jobs", 0, 2000000000, true, NULL},
    {"nice", "nice", -20, 19, true, NULL},
    {"rest", "rest", 0, 3600, false, NULL},
    {"sleep", "sleep", 0, 3600, false, "qpool's idle workers block on Redis; sleep only bounds the wait"},
};

/* Options mapped elsewhere (or deliberately not at all). */
static const char *const HANDLED[] = {"connection", "queue", "balance", "autoScalingStrategy",
                                      "minProcesses", "maxProcesses", "processes", "backoff", "force",
                                      "balanceCooldown", "balanceMaxShift", NULL};

static bool handled(const char *k)
{
    for (int i = 0; HANDLED[i]; i++)
        if (!strcmp(HANDLED[i], k)) return true;
    for (size_t i = 0; i < ARRAY_LEN(OPTS); i++)
        if (!strcmp(OPTS[i].key, k)) return true;
    return false;
}

static bool number_in(const cJSON *v, double lo, double hi, bool integer, double *out)
{
    double d;
    if (cJSON_IsNumber(v))
        d = v->valuedouble;
    else if (cJSON_IsString(v) && *v->valuestring) {
        char *end;
        d = strtod(v->valuestring, &end);
        if (*end) return false;
    } else
        return false;
    if (!isfinite(d) || d < lo || d > hi || (integer && d != floor(d))) return false;
    *out = d;
    return true;
}

static double num_or(const cJSON *sup, const char *k, double dflt, double lo, double hi)
{
    double v;
    return number_in(cJSON_GetObjectItemCaseSensitive(sup, k), lo, hi, true, &v) ? v : dflt;
}

/* Queue names: a list, or a string (comma-separated). Returns the count. */
static int queue_list(const cJSON *q, char **names, int max)
{
    int n = 0;
    if (cJSON_IsString(q)) {
        char *copy = xstrdup(q->valuestring), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
            if (*t) names[n++] = xstrdup(t);
        free(copy);
    } else if (cJSON_IsArray(q)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, q) if (cJSON_IsString(e) && *e->valuestring && !strchr(e->valuestring, ',') && n < max)
            names[n++] = xstrdup(e->valuestring);
    }
    return n;
}

/* A pool name from a supervisor's: letters, digits, _ . : - and at most 48. */
static void pool_name(const char *sup, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%.*s%s%s", 40, sup, suffix ? "-" : "", suffix ? suffix : "");
    if (n > 49) buf[48] = '\0';
    for (char *c = buf; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("_.:-", *c)) *c = '_';
    if (!*buf) snprintf(buf, n, "pool");
}

static void put_options(sbuf_t *o, const cJSON *sup)
{
    const char *in = "    ";
    for (size_t i = 0; i < ARRAY_LEN(OPTS); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(sup, OPTS[i].key);
        if (!v) continue;
        double d;
        char t[160];
        if (!number_in(v, OPTS[i].lo, OPTS[i].hi, OPTS[i].integer, &d)) {
            scalar_text(v, t, sizeof t);
            comment(o, in, "Horizon %s = %s is not a value qpool takes: left out", OPTS[i].key, t);
            continue;
        }
        if (OPTS[i].note) comment(o, in, "%s", OPTS[i].note);
        if (OPTS[i].integer)
            sbuf_printf(o, "%s%s = %.0f;\n", in, OPTS[i].qkey, d);
        else
            sbuf_printf(o, "%s%s = %.3f;\n", in, OPTS[i].qkey, d);
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(sup, "backoff");
    if (b) {
        double d;
        if (number_in(b, 0, 31536000, true, &d))
            sbuf_printf(o, "%sbackoff = %.0f;\n", in, d);
        else if (cJSON_IsArray(b) && cJSON_GetArraySize(b) > 0) {
            sbuf_printf(o, "%sbackoff = [", in);
            const cJSON *e;
            int k = 0;
            cJSON_ArrayForEach(e, b) if (number_in(e, 0, 31536000, true, &d)) sbuf_printf(o, "%s%.0f", k++ ? ", " : "", d);
            sbuf_printf(o, "];\n");
            if (k != cJSON_GetArraySize(b)) comment(o, in, "some of Horizon's backoff values were not seconds: left out");
        } else if (cJSON_IsString(b)) {
            sbuf_printf(o, "%sbackoff = ", in);
            put_str(o, b->valuestring);
            sbuf_printf(o, ";\n");
        }
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(sup, "force");
    if (cJSON_IsBool(f)) sbuf_printf(o, "%sforce = %s;\n", in, cJSON_IsTrue(f) ? "true" : "false");
    const cJSON *e;
    cJSON_ArrayForEach(e, sup)
    {
        if (handled(e->string)) continue;
        char t[160];
        scalar_text(e, t, sizeof t);
        comment(o, in, "Horizon option %s = %s has no qpool equivalent", e->string, t);
    }
}

/* balance: "auto" (and Horizon 5's default when set), "simple", false/null/"false"/"off". */
static const char *balance_of(const cJSON *sup)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(sup, "balance");
    if (cJSON_IsString(b) && !strcmp(b->valuestring, "auto")) return "auto";
    if (cJSON_IsString(b) && !strcmp(b->valuestring, "simple")) return "simple";
    return "off";
}

static void put_head(sbuf_t *o, const char *name, const char *sup, const char *connection, char **queues, int nq)
{
    const char *in = "    ";
    sbuf_printf(o, "  {\n");
    comment(o, in, "Horizon supervisor \"%s\"", sup);
    sbuf_printf(o, "%sname = ", in);
    put_str(o, name);
    sbuf_printf(o, ";\n%squeue_connection = ", in);
    put_str(o, connection);
    sbuf_printf(o, ";\n%squeues = [", in);
    for (int i = 0; i < nq; i++) {
        if (i) sbuf_puts(o, ", ");
        put_str(o, queues[i]);
    }
    sbuf_printf(o, "];\n");
}

static void put_auto(sbuf_t *o, const cJSON *sup, int nq)
{
    const char *in = "    ";
    int maxp = (int)num_or(sup, "maxProcesses", 1, 1, 1024);
    int minq = (int)num_or(sup, "minProcesses", 1, 0, 1024);
    int minp = minq * nq > maxp ? maxp : minq * nq;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(sup, "autoScalingStrategy");
    bool size = cJSON_IsString(st) && !strcmp(st->valuestring, "size");
    sbuf_printf(o, "%sbalance = \"auto\";\n%sauto_strategy = \"%s\";\n", in, in, size ? "size" : "time");
    comment(o, in, "Horizon's minProcesses = %d is per queue: %d queue(s) give %d for the pool (at most maxProcesses)",
            minq, nq, minp);
    sbuf_printf(o, "%smin_processes = %d;\n%smax_processes = %d;\n", in, minp, in, maxp);
    int cool = (int)num_or(sup, "balanceCooldown", 3, 0, 86400);
    int shift = (int)num_or(sup, "balanceMaxShift", 1, 0, 1024);
    comment(o, in, "Horizon balanceCooldown = %d, balanceMaxShift = %d: qpool's balancer has no step limit; it grows at once", cool, shift);
    comment(o, in, "(every balance_interval) and shrinks after scale_down_delay; workers are shared by the pool's queues in priority order");
}

static void put_pool_end(sbuf_t *o, bool last)
{
    sbuf_printf(o, "  }%s\n", last ? "" : ",");
}

/* A connection on another driver than redis (the describer's queue_drivers,
 * NULL: not known): the app's driver runs its jobs (app_driver), one popped
 * at a time as queue:work does, so the pool takes no prefetch. */
static void put_driver(sbuf_t *o, const cJSON *drivers, const char *conn)
{
    const cJSON *d = cJSON_IsObject(drivers) ? cJSON_GetObjectItemCaseSensitive(drivers, conn) : NULL;
    if (!cJSON_IsString(d) || !strcmp(d->valuestring, "redis")) return;
    comment(o, "    ", "connection \"%.100s\" uses the \"%.100s\" driver: the app's own driver pops and runs its jobs",
            conn, d->valuestring);
    comment(o, "    ", "(app_driver, docs/laravel.md), one at a time as queue:work: no prefetch");
    sbuf_printf(o, "    prefetch = 1;\n");
}

/* One supervisor: one pool, or with balance = "simple" one pool per queue. */
static int put_supervisor(sbuf_t *o, const char *sup_name, const cJSON *sup, const char *dflt_conn,
                          const cJSON *drivers, bool last)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(sup, "connection");
    const char *conn = cJSON_IsString(c) && *c->valuestring ? c->valuestring : dflt_conn;
    char *queues[30];
    int nq = queue_list(cJSON_GetObjectItemCaseSensitive(sup, "queue"), queues, 30);
    if (nq == 0) queues[nq++] = xstrdup("default");
    const char *bal = balance_of(sup);
    char name[64];
    if (!strcmp(bal, "simple")) {
        int maxp = (int)num_or(sup, "maxProcesses", num_or(sup, "processes", 1, 0, 1024), 1, 1024);
        int each = maxp / nq > 0 ? maxp / nq : 1;
        for (int i = 0; i < nq; i++) {
            pool_name(sup_name, nq > 1 ? queues[i] : NULL, name, sizeof name);
            put_head(o, name, sup_name, conn, &queues[i], 1);
            comment(o, "    ", "Horizon's balance = \"simple\" splits maxProcesses = %d evenly over %d queue(s): a fixed pool per queue",
                    maxp, nq);
            sbuf_printf(o, "    balance = \"off\";\n    processes = %d;\n", each);
            put_options(o, sup);
            put_driver(o, drivers, conn);
            put_pool_end(o, last && i == nq - 1);
        }
    } else {
        pool_name(sup_name, NULL, name, sizeof name);
        put_head(o, name, sup_name, conn, queues, nq);
        if (!strcmp(bal, "auto"))
            put_auto(o, sup, nq);
        else {
            int p = (int)num_or(sup, "maxProcesses", num_or(sup, "processes", 1, 0, 1024), 0, 1024);
            comment(o, "    ", "Horizon's balance = false: maxProcesses workers, queues in priority order");
            sbuf_printf(o, "    balance = \"off\";\n    processes = %d;\n", p);
        }
        put_options(o, sup);
        put_driver(o, drivers, conn);
        put_pool_end(o, last);
    }
    for (int i = 0; i < nq; i++) free(queues[i]);
    return 0;
}

/* ---------------------------------------------------------------- waits */

static bool setting_name_ok(const char *s)
{
    if (!isalpha((unsigned char)s[0])) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-') return false;
    return true;
}

static void put_waits(sbuf_t *o, const cJSON *waits)
{
    sbuf_printf(o, "qpool = {\n  alerts = {\n");
    comment(o, "    ", "Horizon raises LongWaitDetected after 60 s for a queue its waits do not list");
    sbuf_printf(o, "    long_wait = 60.0;\n");
    if (!cJSON_IsObject(waits) || !cJSON_GetArraySize(waits)) {
        sbuf_printf(o, "  };\n};\n\n");
        return;
    }
    comment(o, "    ", "Horizon's waits are per connection:queue; qpool's per queue name (any connection)");
    sbuf_printf(o, "    long_wait_queues = {\n");
    const cJSON *w;
    cJSON_ArrayForEach(w, waits)
    {
        const char *colon = strchr(w->string, ':');
        const char *q = colon ? colon + 1 : w->string;
        double d;
        char t[160];
        scalar_text(w, t, sizeof t);
        if (!setting_name_ok(q) || !number_in(w, 0, 86400 * 365, false, &d))
            comment(o, "      ", "Horizon waits \"%.100s\" = %s: not a queue name or seconds qpool can take here", w->string, t);
        else
            sbuf_printf(o, "      %s = %.1f;\n", q, d);
    }
    sbuf_printf(o, "    };\n  };\n};\n\n");
}

/* ---------------------------------------------------------------- import */

/* environments[env], else the first pattern (Str::is: * wildcards) that matches. */
static const cJSON *find_env(const cJSON *envs, const char *env)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(envs, env);
    if (e) return e;
    cJSON_ArrayForEach(e, envs) if (e->string && fnmatch(e->string, env, 0) == 0) return e;
    return NULL;
}

/* Horizon's silenced (classes) and silenced_tags: the same keys, in defaults. */
static void put_silenced(sbuf_t *out, const cJSON *h)
{
    static const char *const KEYS[] = {"silenced", "silenced_tags"};
    for (size_t k = 0; k < sizeof KEYS / sizeof *KEYS; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, KEYS[k]), *e;
        int n = 0;
        if (!is_array_like(v)) continue;
        cJSON_ArrayForEach(e, v) {
            if (!cJSON_IsString(e) || !*e->valuestring) continue;
            if (n++)
                sbuf_printf(out, ", ");
            else
                sbuf_printf(out, "  %s = [", KEYS[k]);
            put_str(out, e->valuestring);
        }
        if (n) sbuf_printf(out, "];\n");
    }
}

int horizon_import(const cJSON *desc, const char *app, const char *env, sbuf_t *out, char *err, size_t errn)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(desc, "horizon");
    const cJSON *appenv = cJSON_GetObjectItemCaseSensitive(desc, "environment");
    const cJSON *qd = cJSON_GetObjectItemCaseSensitive(desc, "queue_default");
    if (!cJSON_IsObject(h)) {
        snprintf(err, errn, "the description has no horizon config");
        return -1;
    }
    if (!env) env = cJSON_IsString(appenv) ? appenv->valuestring : "production";
    const cJSON *defaults = cJSON_GetObjectItemCaseSensitive(h, "defaults");
    const cJSON *envs = cJSON_GetObjectItemCaseSensitive(h, "environments");
    const cJSON *chosen = is_array_like(envs) ? find_env(envs, env) : NULL;
    if (!chosen) {
        snprintf(err, errn, "config/horizon.php has no environment \"%.100s\" (give --env)", env);
        return -1;
    }
    cJSON *plan = horizon_replace_recursive(is_array_like(defaults) ? defaults : chosen, chosen);
    int n = cJSON_GetArraySize(plan);
    if (!cJSON_IsObject(plan) || n == 0 || n > MAX_SUPERVISORS) {
        cJSON_Delete(plan);
        snprintf(err, errn, "environment \"%.100s\" has no supervisors (or too many)", env);
        return -1;
    }
    /* app and env are text from the command line and the app: comments,
     * one line each, never config */
    comment(out, "", "qpool.conf from %s/config/horizon.php, environment \"%s\"", app, env);
    comment(out, "", "(Horizon's defaults merged with environments.%s, as Horizon does).", env);
    sbuf_printf(out, "# Comments mark where qpool differs from Horizon. Check it with `qpool check`.\n\n");
    put_waits(out, cJSON_GetObjectItemCaseSensitive(h, "waits"));
    const cJSON *ml = cJSON_GetObjectItemCaseSensitive(h, "memory_limit");
    if (ml && !cJSON_IsNull(ml)) {
        char t[160];
        scalar_text(ml, t, sizeof t);
        comment(out, "", "Horizon memory_limit = %s (MB, its master process): qpool's master needs no such limit", t);
    }
    sbuf_printf(out, "defaults = {\n");
    comment(out, "  ", "queue, Redis and cache settings are read from the app (docs/laravel.md)");
    sbuf_printf(out, "  laravel = ");
    put_str(out, app);
    sbuf_printf(out, ";\n");
    comment(out, "  ", "up to 8 jobs per pop, fewer as jobs get slower: 4.3x to 5.7x queue:work on short jobs, where one");
    comment(out, "  ", "at a time gives 2.0x to 3.6x (docs/configuration.md, Prefetch); 1 pops one at a time, as Horizon");
    sbuf_printf(out, "  prefetch = 8;\n");
    put_silenced(out, h);
    sbuf_printf(out, "};\n\npools = (\n");
    const cJSON *sup, *last = NULL;
    cJSON_ArrayForEach(sup, plan) if (cJSON_IsObject(sup)) last = sup;
    cJSON_ArrayForEach(sup, plan)
    {
        if (!cJSON_IsObject(sup)) {
            comment(out, "  ", "Horizon supervisor \"%.100s\" is not a map of options: left out", sup->string);
            continue;
        }
        put_supervisor(out, sup->string, sup, cJSON_IsString(qd) ? qd->valuestring : "redis",
                       cJSON_GetObjectItemCaseSensitive(desc, "queue_drivers"), sup == last);
    }
    sbuf_printf(out, ");\n");
    cJSON_Delete(plan);
    return 0;
}
