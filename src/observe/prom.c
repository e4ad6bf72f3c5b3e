/*
 * prom.c - see prom.h.
 *
 * A family_t writes its # HELP and # TYPE before its first sample, so a
 * family with no samples is not written at all and each one is contiguous
 * as long as its samples are written together (one render_* per family).
 * Numbers: integral values as integers, others in the shortest form that
 * reads back exactly, with '.' whatever the locale; non-finite values are
 * skipped.
 */
#include "observe/prom.h"
#include "observe/metrics.h"
#include "core/grow.h"
#include "core/util.h"

#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUM_LEN 40           /* "%.17g" of any double, and its NUL */

typedef struct {
    sbuf_t *out;
    const char *name, *help, *type;
    bool started;
} family_t;

typedef struct {
    const char *name, *value;
} label_t;

/* One histogram's merged, non-cumulative buckets (ms), as in metrics.h. */
typedef struct {
    double bucket[METRICS_NBUCKETS];
    double sum_ms;
    bool have;
} hsum_t;

/* A pool+queue's runtime and wait histograms, over classes and outcomes. */
typedef struct {
    const char *pool, *queue;
    hsum_t run, wait;
} hgroup_t;

typedef struct {
    hgroup_t *v;
    int n, cap;
} hgroups_t;

/* ---- reading the status ---- */

static const cJSON *member(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static const char *str_member(const cJSON *o, const char *key)
{
    const cJSON *v = member(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* NAN if missing or not a number (sample() skips it). */
static double num_member(const cJSON *o, const char *key)
{
    const cJSON *v = member(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* 1/0 for a boolean member, NAN otherwise. */
static double bool_member(const cJSON *o, const char *key)
{
    const cJSON *v = member(o, key);
    return cJSON_IsBool(v) ? (cJSON_IsTrue(v) ? 1 : 0) : NAN;
}

/* The pool's name, or NULL if p is not a pool object with one. */
static const char *pool_name(const cJSON *p)
{
    return str_member(p, "name");
}

/* ---- writing ---- */

/* Replace the locale's decimal point (if not '.') by '.'. */
static void dot_decimal(char *buf)
{
    const char *dp = localeconv()->decimal_point;
    if (!dp || !*dp || strcmp(dp, ".") == 0) return;
    char *at = strstr(buf, dp);
    if (!at) return;
    size_t dl = strlen(dp);
    *at = '.';
    memmove(at + 1, at + dl, strlen(at + dl) + 1);
}

/* v (finite) into buf[NUM_LEN]: an integer if integral, else the shortest
 * %g that reads back as v. */
static void fmt_number(char *buf, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, NUM_LEN, "%.0f", v + 0.0);   /* + 0.0: no "-0" */
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, NUM_LEN, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;          /* same locale as snprintf */
    }
    dot_decimal(buf);
}

/* A label value, escaped as the exposition format asks, and valid UTF-8
 * whatever it held (a second guard: names are repaired where they enter;
 * Prometheus fails the whole scrape on one invalid label value). */
static void put_escaped(sbuf_t *b, const char *s)
{
    char *fixed = NULL;
    if (!utf8_valid(s, strlen(s))) s = fixed = utf8_repair(s, strlen(s), NULL);
    for (; *s; s++) {
        if (*s == '\\')
            sbuf_puts(b, "\\\\");
        else if (*s == '"')
            sbuf_puts(b, "\\\"");
        else if (*s == '\n')
            sbuf_puts(b, "\\n");
        else
            sbuf_putc(b, *s);
    }
    free(fixed);
}

static void put_labels(sbuf_t *b, const label_t *l, int n)
{
    if (n == 0) return;
    sbuf_putc(b, '{');
    for (int i = 0; i < n; i++) {
        sbuf_printf(b, "%s%s=\"", i ? "," : "", l[i].name);
        put_escaped(b, l[i].value);
        sbuf_putc(b, '"');
    }
    sbuf_putc(b, '}');
}

static void family_begin(family_t *f)
{
    if (f->started) return;
    f->started = true;
    sbuf_printf(f->out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
}

/* One sample line of f (name + suffix); skipped if v is not finite. */
static void sample(family_t *f, const char *suffix, const label_t *l, int n, double v)
{
    if (!isfinite(v)) return;
    family_begin(f);
    char num[NUM_LEN];
    fmt_number(num, v);
    sbuf_printf(f->out, "%s%s", f->name, suffix);
    put_labels(f->out, l, n);
    sbuf_printf(f->out, " %s\n", num);
}

/* ---- histograms: merge job_stats by pool and queue ---- */

static hgroup_t *hgroup(hgroups_t *g, const char *pool, const char *queue)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->v[i].pool, pool) == 0 && strcmp(g->v[i].queue, queue) == 0) return &g->v[i];
    g->v = xgrow(g->v, g->n, &g->cap, sizeof *g->v, 8);
    hgroup_t *e = &g->v[g->n++];
    *e = (hgroup_t){.pool = pool, .queue = queue};
    return e;
}

/* True if a is METRICS_NBUCKETS finite, non-negative numbers. */
static bool buckets_valid(const cJSON *a)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != METRICS_NBUCKETS) return false;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0) return false;
    }
    return true;
}

/* Add buckets a and sum s (ms) to h; nothing if a is not a histogram. */
static void hsum_add(hsum_t *h, const cJSON *a, const cJSON *s)
{
    if (!buckets_valid(a)) return;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) h->bucket[i++] += x->valuedouble;
    if (cJSON_IsNumber(s) && isfinite(s->valuedouble)) h->sum_ms += s->valuedouble;
    h->have = true;
}

static void collect_pool(hgroups_t *g, const char *pool, const cJSON *stats)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, stats) {
        const char *queue = str_member(e, "queue");
        const cJSON *h = member(e, "hist");
        if (!queue || !cJSON_IsObject(h)) continue;
        hgroup_t *x = hgroup(g, pool, queue);
        hsum_add(&x->run, member(h, "r"), member(h, "rs"));
        hsum_add(&x->wait, member(h, "w"), member(h, "ws"));
    }
}

static void collect_hists(const cJSON *pools, hgroups_t *g)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) {
        const char *name = pool_name(p);
        const cJSON *stats = member(p, "job_stats");
        if (name && cJSON_IsArray(stats)) collect_pool(g, name, stats);
    }
}

/* One pool+queue's _bucket lines (cumulative, le in seconds), _sum, _count. */
static void render_hist(family_t *f, const hgroup_t *g, const hsum_t *h)
{
    char le[NUM_LEN];
    label_t l[] = {{"pool", g->pool}, {"queue", g->queue}, {"le", le}};
    double cum = 0;
    for (int i = 0; i < METRICS_NBUCKETS; i++) {
        cum += h->bucket[i];
        if (i < METRICS_NBUCKETS - 1)
            fmt_number(le, METRICS_BOUNDS_MS[i] / 1000);
        else
            strcpy(le, "+Inf");
        sample(f, "_bucket", l, 3, cum);
    }
    sample(f, "_sum", l, 2, h->sum_ms / 1000);
    sample(f, "_count", l, 2, cum);
}

static void render_hist_family(sbuf_t *out, const hgroups_t *g, bool wait)
{
    family_t f = {out, wait ? "qpool_job_wait_seconds" : "qpool_job_runtime_seconds",
                  wait ? "Time jobs waited in their queue before a worker took them (jobs whose wait is known)."
                       : "Job runtime, all job classes and outcomes of a pool's queue merged.",
                  "histogram", false};
    for (int i = 0; i < g->n; i++) {
        const hsum_t *h = wait ? &g->v[i].wait : &g->v[i].run;
        if (h->have) render_hist(&f, &g->v[i], h);
    }
}

static void render_histograms(const cJSON *pools, sbuf_t *out)
{
    hgroups_t g = {0};
    collect_hists(pools, &g);
    render_hist_family(out, &g, false);
    render_hist_family(out, &g, true);
    free(g.v);
}

/* ---- the other families ---- */

static void render_build_info(const cJSON *status, sbuf_t *out)
{
    family_t f = {out, "qpool_build_info", "The qpool version of this master; always 1.", "gauge", false};
    const char *version = str_member(status, "version");
    label_t l[] = {{"version", version}};
    if (version) sample(&f, "", l, 1, 1);
}

static void render_pool_jobs(family_t *f, const char *pool, const cJSON *stats)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, stats) {
        label_t l[] = {{"pool", pool}, {"queue", str_member(e, "queue")},
                       {"job", str_member(e, "job")}, {"outcome", str_member(e, "outcome")}};
        if (l[1].value && l[2].value && l[3].value) sample(f, "", l, 4, num_member(e, "count"));
    }
}

static void render_jobs(const cJSON *pools, sbuf_t *out)
{
    family_t f = {out, "qpool_jobs_total",
                  "Jobs settled since the master started, by pool, queue, job class and outcome.",
                  "counter", false};
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) {
        const char *name = pool_name(p);
        const cJSON *stats = member(p, "job_stats");
        if (name && cJSON_IsArray(stats)) render_pool_jobs(&f, name, stats);
    }
}

/* True if name is in seen[0..n); else adds it (seen has room). */
static bool seen_before(const char **seen, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(seen[i], name) == 0) return true;
    seen[(*n)++] = name;
    return false;
}

static void render_queue(family_t *f, const cJSON *q, const char *name)
{
    static const char *const STATES[] = {"ready", "delayed", "reserved"};
    for (size_t i = 0; i < ARRAY_LEN(STATES); i++) {
        label_t l[] = {{"queue", name}, {"state", STATES[i]}};
        sample(f, "", l, 2, num_member(q, STATES[i]));
    }
}

static int count_queues(const cJSON *pools)
{
    int n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) n += cJSON_GetArraySize(member(p, "queues"));
    return n;
}

static void render_queues(const cJSON *pools, sbuf_t *out)
{
    family_t f = {out, "qpool_queue_jobs", "Jobs in each queue by state, once per queue name.", "gauge", false};
    const char **seen = xcalloc((size_t)count_queues(pools) + 1, sizeof *seen);
    int nseen = 0;
    const cJSON *p, *q;
    cJSON_ArrayForEach(p, pools) {
        const cJSON *queues = member(p, "queues");
        if (!cJSON_IsArray(queues)) continue;
        cJSON_ArrayForEach(q, queues) {
            const char *name = str_member(q, "name");
            if (name && !seen_before(seen, &nseen, name)) render_queue(&f, q, name);
        }
    }
    free(seen);
}

static void render_pool_workers(family_t *f, const cJSON *p, const char *pool)
{
    static const struct { const char *state, *key; } STATES[] = {
        {"busy", "busy"}, {"idle", "idle"}, {"starting", "starting"},
        {"stopping", "stopping"}, {"paused", "paused_workers"},
    };
    for (size_t i = 0; i < ARRAY_LEN(STATES); i++) {
        label_t l[] = {{"pool", pool}, {"state", STATES[i].state}};
        sample(f, "", l, 2, num_member(p, STATES[i].key));
    }
}

static void render_workers(const cJSON *pools, sbuf_t *out)
{
    family_t f = {out, "qpool_workers", "Workers by pool and state.", "gauge", false};
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) {
        const char *name = pool_name(p);
        if (name) render_pool_workers(&f, p, name);
    }
}

static void render_pool_exits(family_t *f, const char *pool, const cJSON *exits)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, exits) {
        label_t l[] = {{"pool", pool}, {"reason", e->string}};
        if (e->string && cJSON_IsNumber(e)) sample(f, "", l, 2, e->valuedouble);
    }
}

static void render_exits(const cJSON *pools, sbuf_t *out)
{
    family_t f = {out, "qpool_worker_exits_total",
                  "Workers that exited since the master started, by pool and reason.", "counter", false};
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) {
        const char *name = pool_name(p);
        const cJSON *exits = member(p, "exits");
        if (name && cJSON_IsObject(exits)) render_pool_exits(&f, name, exits);
    }
}

static void render_reconnects(const cJSON *status, sbuf_t *out)
{
    family_t f = {out, "qpool_redis_reconnects_total", "Times the master reconnected to Redis.", "counter",
                  false};
    sample(&f, "", NULL, 0, num_member(status, "redis_reconnects"));
}

static void render_paused(const cJSON *pools, sbuf_t *out)
{
    family_t f = {out, "qpool_paused", "1 if the pool is paused, else 0.", "gauge", false};
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) {
        const char *name = pool_name(p);
        label_t l[] = {{"pool", name}};
        if (name) sample(&f, "", l, 1, bool_member(p, "paused"));
    }
}

/* The fleet budget of each pool that has one (budgeting.h), one family per
 * member of its "fleet_budget". */
static void render_budgets(const cJSON *pools, sbuf_t *out)
{
    static const struct { const char *name, *help, *type, *key; } F[] = {
        {"qpool_fleet_budget_workers", "The fleet budget in effect (fleet_max_processes) of the pool's name.", "gauge",
         "budget"},
        {"qpool_fleet_slots_held", "Slots of the fleet budget this master holds for the pool.", "gauge", "held"},
        {"qpool_fleet_slots_in_use", "Slots of the fleet budget every master holds for the pool's name.", "gauge",
         "in_use"},
        {"qpool_fleet_budget_waiting", "1 if the pool wants more workers than its slots of the fleet budget, else 0.",
         "gauge", "waiting"},
        {"qpool_fleet_lease_renewal_failures_total", "Balance passes whose fleet budget lease renewal failed.",
         "counter", "renew_failures"},
    };
    for (size_t i = 0; i < ARRAY_LEN(F); i++) {
        family_t f = {out, F[i].name, F[i].help, F[i].type, false};
        const cJSON *p;
        cJSON_ArrayForEach(p, pools) {
            const char *name = pool_name(p);
            const cJSON *b = member(p, "fleet_budget");
            if (!name || !cJSON_IsObject(b)) continue;
            label_t l[] = {{"pool", name}};
            const cJSON *v = member(b, F[i].key);
            sample(&f, "", l, 1, cJSON_IsBool(v) ? bool_member(b, F[i].key) : num_member(b, F[i].key));
        }
    }
}

/* The fleet-wide limits (issue 33), labelled by class and queue ("" for
 * any), and a per-key limit by its tag_prefix too; a member not read this
 * pass (null) gives no sample. */
static void render_limits(const cJSON *status, sbuf_t *out)
{
    static const struct { const char *name, *help, *key; } F[] = {
        {"qpool_limit_concurrency", "A limit's concurrency (0: none).", "concurrency"},
        {"qpool_limit_rate_per_second", "A limit's rate in jobs per second (0: none).", "rate_per_s"},
        {"qpool_limit_in_use", "Concurrency slots of a limit held by running jobs, fleet-wide.", "in_use"},
        {"qpool_limit_tokens", "Tokens in a rate limit's bucket now.", "tokens"},
        {"qpool_limit_waiting", "Jobs the last limited pop held back for a limit (among those it looked at).",
         "waiting"},
        {"qpool_limit_waited_seconds", "How long a limit has been holding jobs back (0: none now).", "waited_s"},
    };
    const cJSON *limits = member(status, "limits");
    if (!cJSON_IsArray(limits)) return;
    for (size_t i = 0; i < ARRAY_LEN(F); i++) {
        family_t f = {out, F[i].name, F[i].help, "gauge", false};
        const cJSON *l;
        cJSON_ArrayForEach(l, limits) {
            const cJSON *cls = member(l, "class"), *q = member(l, "queue"), *tp = member(l, "tag_prefix");
            if (!cJSON_IsNumber(member(l, F[i].key))) continue;
            label_t lb[] = {{"class", cJSON_IsString(cls) ? cls->valuestring : ""},
                            {"queue", cJSON_IsString(q) ? q->valuestring : ""},
                            {"tag_prefix", cJSON_IsString(tp) ? tp->valuestring : ""}};
            sample(&f, "", lb, cJSON_IsString(tp) ? 3 : 2, num_member(l, F[i].key)); /* a per-key limit's own series */
        }
    }
}

/* The classes paused across the fleet (qpool pause --class), by class. */
static void render_paused_classes(const cJSON *status, sbuf_t *out)
{
    const cJSON *pc = member(status, "paused_classes");
    if (!cJSON_IsArray(pc)) return;
    family_t f = {out, "qpool_class_paused", "1 for a job class paused across the fleet (qpool pause --class).",
                  "gauge", false};
    family_t w = {out, "qpool_class_paused_waiting",
                  "Jobs of a paused class the last pops held back (among those they looked at).", "gauge", false};
    family_t *fams[] = {&f, &w};
    for (size_t i = 0; i < ARRAY_LEN(fams); i++) { /* a family's samples together */
        const cJSON *e;
        cJSON_ArrayForEach(e, pc) {
            const cJSON *cls = member(e, "class");
            if (!cJSON_IsString(cls)) continue;
            const cJSON *pool = member(e, "pool"); /* paused in one pool only: its name too */
            label_t lb[] = {{"class", cls->valuestring}, {"pool", cJSON_IsString(pool) ? pool->valuestring : ""}};
            sample(fams[i], "", lb, cJSON_IsString(pool) ? 2 : 1, i ? num_member(e, "waiting") : 1);
        }
    }
}

int prom_render(const cJSON *status, sbuf_t *out)
{
    const cJSON *pools = member(status, "pools");
    if (!cJSON_IsArray(pools)) return -1;
    render_build_info(status, out);
    render_jobs(pools, out);
    render_histograms(pools, out);
    render_queues(pools, out);
    render_workers(pools, out);
    render_exits(pools, out);
    render_reconnects(status, out);
    render_paused(pools, out);
    render_budgets(pools, out);
    render_limits(status, out);
    render_paused_classes(status, out);
    return 0;
}
