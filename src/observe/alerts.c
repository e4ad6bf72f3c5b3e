/*
 * alerts.c - see alerts.h.
 */
#include "observe/alerts.h"
#include "core/util.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { AL_LONG_WAIT, AL_CRASH_LOOP, AL_FAILURE_RATE };
static const char *const KIND_NAME[] = {"long_wait", "crash_loop", "failure_rate"};

typedef struct {
    int kind;
    char *pool, *queue;                  /* queue: NULL but for long_wait */
    int64_t since_ms;
    int64_t false_since_ms;              /* -1 while the condition holds */
    double value, threshold;
    const char *measure;                 /* static */
    bool seen;                           /* in this pass, with its trigger on */
} episode_t;

typedef struct {
    char *pool;
    uint64_t base;                       /* crashes_total last pass */
    int64_t *t;                          /* crash times, oldest first */
    int n, cap;
    bool seen;
} pool_crashes_t;

struct alerts {
    episode_t *ep;
    int nep, capep;
    pool_crashes_t *pc;
    int npc, cappc;
};

/* A condition evaluated on one pass. */
typedef struct {
    int kind;
    const char *pool, *queue;
    bool holds;
    bool known;                          /* value/measure are meaningful */
    double value, threshold;
    const char *measure;
} cond_t;

/* ------------------------------------------------------------ configuration */

double alerts_wait_threshold(const alerts_conf_t *c, const char *queue)
{
    for (int i = 0; queue && i < c->nwaits; i++)
        if (c->waits[i].queue && !strcmp(c->waits[i].queue, queue)) return c->waits[i].seconds;
    return c->long_wait_s;
}

static bool seconds_ok(double s)
{
    return isfinite(s) && s >= 0;
}

int alerts_conf_check(const alerts_conf_t *c)
{
    if (!c || !seconds_ok(c->long_wait_s) || c->nwaits < 0 || (c->nwaits && !c->waits)) return -1;
    for (int i = 0; i < c->nwaits; i++)
        if (!c->waits[i].queue || !seconds_ok(c->waits[i].seconds)) return -1;
    if (!(c->failure_rate >= 0 && c->failure_rate <= 1) || c->failure_min_jobs < 0) return -1;
    if (c->crash_loop_crashes < 0 || c->crash_loop_crashes > ALERTS_CRASHES_MAX) return -1;
    if (c->crash_loop_crashes && c->crash_loop_window_s <= 0) return -1;
    return c->clear_after_s < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ state */

alerts_t *alerts_new(void)
{
    return xcalloc(1, sizeof(alerts_t));
}

static void episode_free(episode_t *e)
{
    free(e->pool);
    free(e->queue);
}

static void crashes_free(pool_crashes_t *p)
{
    free(p->pool);
    free(p->t);
}

void alerts_free(alerts_t *a)
{
    if (!a) return;
    for (int i = 0; i < a->nep; i++) episode_free(&a->ep[i]);
    for (int i = 0; i < a->npc; i++) crashes_free(&a->pc[i]);
    free(a->ep);
    free(a->pc);
    free(a);
}

int alerts_open(const alerts_t *a)
{
    return a->nep;
}

static episode_t *episode_find(alerts_t *a, int kind, const char *pool, const char *queue)
{
    for (int i = 0; i < a->nep; i++)
        if (a->ep[i].kind == kind && str_eq(a->ep[i].pool, pool) && str_eq(a->ep[i].queue, queue)) return &a->ep[i];
    return NULL;
}

static episode_t *episode_open(alerts_t *a, const cond_t *k, int64_t now_ms)
{
    if (a->nep == a->capep) {
        a->capep = a->capep ? a->capep * 2 : 8;
        a->ep = xrealloc(a->ep, sizeof *a->ep * (size_t)a->capep);
    }
    episode_t *e = &a->ep[a->nep++];
    memset(e, 0, sizeof *e);
    e->kind = k->kind;
    e->pool = xstrdup(k->pool);
    e->queue = k->queue ? xstrdup(k->queue) : NULL;
    e->since_ms = now_ms;
    e->false_since_ms = -1;
    return e;
}

static void episode_drop(alerts_t *a, int i)
{
    episode_free(&a->ep[i]);
    a->ep[i] = a->ep[--a->nep];
}

/* ------------------------------------------------------------ events */

static double epoch_s(int64_t ms)
{
    return (double)(ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000));
}

static void emit(cJSON *events, const episode_t *e, bool firing, int64_t now_ms)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "alert", KIND_NAME[e->kind]);
    cJSON_AddStringToObject(o, "state", firing ? "firing" : "resolved");
    cJSON_AddStringToObject(o, "pool", e->pool);
    if (e->queue) cJSON_AddStringToObject(o, "queue", e->queue);
    cJSON_AddNumberToObject(o, "value", e->value);
    cJSON_AddNumberToObject(o, "threshold", e->threshold);
    cJSON_AddStringToObject(o, "measure", e->measure);
    cJSON_AddNumberToObject(o, "since", epoch_s(e->since_ms));
    cJSON_AddNumberToObject(o, "at", epoch_s(now_ms));
    cJSON_AddItemToArray(events, o);
}

/* ------------------------------------------------------------ one condition */

/* Open, keep, or resolve the episode of k; the number of events (0 or 1). */
static int step(alerts_t *a, const alerts_conf_t *c, int64_t now_ms, const cond_t *k, cJSON *events)
{
    episode_t *e = episode_find(a, k->kind, k->pool, k->queue);
    if (!e && !k->holds) return 0;
    bool opened = !e;
    if (opened) e = episode_open(a, k, now_ms);
    e->seen = true;
    e->threshold = k->threshold;
    if (k->known) {
        e->value = k->value;
        e->measure = k->measure;
    }
    if (opened) {
        emit(events, e, true, now_ms);
        return 1;
    }
    if (k->holds) {
        e->false_since_ms = -1;
        return 0;
    }
    if (e->false_since_ms < 0 || now_ms < e->false_since_ms) e->false_since_ms = now_ms; /* or the clock went back */
    if (now_ms - e->false_since_ms < (int64_t)c->clear_after_s * 1000) return 0;
    emit(events, e, false, now_ms);
    episode_drop(a, (int)(e - a->ep));
    return 1;
}

static double known_s(double s)
{
    return isfinite(s) && s >= 0 ? s : -1;
}

static int observe_queue(alerts_t *a, const alerts_conf_t *c, int64_t now_ms, const alert_queue_obs_t *q,
                         cJSON *events)
{
    double thr = alerts_wait_threshold(c, q->queue);
    if (thr <= 0) return 0; /* off: an open episode resolves in the sweep */
    double p95 = known_s(q->wait_p95_s), oldest = known_s(q->oldest_ready_s);
    cond_t k = {.kind = AL_LONG_WAIT, .pool = q->pool, .queue = q->queue, .threshold = thr};
    k.known = p95 >= 0 || oldest >= 0;
    k.value = p95 >= oldest ? p95 : oldest;
    k.measure = p95 >= oldest ? "wait_p95" : "oldest_ready";
    k.holds = k.known && k.value >= thr;
    return step(a, c, now_ms, &k, events);
}

static int observe_failures(alerts_t *a, const alerts_conf_t *c, int64_t now_ms, const alert_pool_obs_t *p,
                            cJSON *events)
{
    if (c->failure_rate <= 0) return 0;
    cond_t k = {.kind = AL_FAILURE_RATE, .pool = p->pool, .threshold = c->failure_rate, .measure = "failure_rate"};
    k.known = p->finished > 0 && p->finished >= (uint64_t)c->failure_min_jobs;
    k.value = k.known ? (double)p->failed / (double)p->finished : 0;
    k.holds = k.known && k.value >= c->failure_rate;
    return step(a, c, now_ms, &k, events);
}

/* ------------------------------------------------------------ crashes */

static pool_crashes_t *crashes_find(alerts_t *a, const char *pool)
{
    for (int i = 0; i < a->npc; i++)
        if (!strcmp(a->pc[i].pool, pool)) return &a->pc[i];
    return NULL;
}

/* The pool's entry; *fresh when it is new (its count is only a baseline). */
static pool_crashes_t *crashes_get(alerts_t *a, const alert_pool_obs_t *p, bool *fresh)
{
    pool_crashes_t *pc = crashes_find(a, p->pool);
    *fresh = !pc;
    if (pc) return pc;
    if (a->npc == a->cappc) {
        a->cappc = a->cappc ? a->cappc * 2 : 8;
        a->pc = xrealloc(a->pc, sizeof *a->pc * (size_t)a->cappc);
    }
    pc = &a->pc[a->npc++];
    memset(pc, 0, sizeof *pc);
    pc->pool = xstrdup(p->pool);
    pc->base = p->crashes_total;
    return pc;
}

/* Keep the newest cap crash times (cap 0: none). */
static void crashes_resize(pool_crashes_t *pc, int cap)
{
    if (pc->cap == cap) return;
    if (pc->n > cap) {
        memmove(pc->t, pc->t + (pc->n - cap), sizeof *pc->t * (size_t)cap);
        pc->n = cap;
    }
    if (cap) {
        pc->t = xrealloc(pc->t, sizeof *pc->t * (size_t)cap);
    } else {
        free(pc->t);
        pc->t = NULL;
    }
    pc->cap = cap;
}

static void crashes_add(pool_crashes_t *pc, uint64_t k, int64_t now_ms)
{
    if (!pc->cap || !k) return;
    int add = k >= (uint64_t)pc->cap ? pc->cap : (int)k;
    int drop = pc->n + add - pc->cap;
    if (drop > 0) {
        memmove(pc->t, pc->t + drop, sizeof *pc->t * (size_t)(pc->n - drop));
        pc->n -= drop;
    }
    while (add--) pc->t[pc->n++] = now_ms;
}

/* Crash times within the window that ends now. */
static int crashes_recent(const pool_crashes_t *pc, int64_t now_ms, int window_s)
{
    int r = 0;
    for (int i = 0; i < pc->n; i++)
        if (now_ms - pc->t[i] < (int64_t)window_s * 1000) r++;
    return r;
}

/* Count the pool's new crashes; raise or resolve its crash loop. */
static int observe_crashes(alerts_t *a, const alerts_conf_t *c, int64_t now_ms, const alert_pool_obs_t *p,
                           cJSON *events)
{
    bool fresh;
    pool_crashes_t *pc = crashes_get(a, p, &fresh);
    pc->seen = true;
    crashes_resize(pc, c->crash_loop_crashes);
    if (!fresh && p->crashes_total < pc->base) pc->n = 0; /* recreated: a new baseline */
    else if (!fresh) crashes_add(pc, p->crashes_total - pc->base, now_ms);
    pc->base = p->crashes_total;
    if (!c->crash_loop_crashes) return 0;
    cond_t k = {.kind = AL_CRASH_LOOP, .pool = p->pool, .known = true, .measure = "crashes"};
    k.threshold = c->crash_loop_crashes;
    k.value = crashes_recent(pc, now_ms, c->crash_loop_window_s);
    k.holds = k.value >= k.threshold;
    return step(a, c, now_ms, &k, events);
}

/* ------------------------------------------------------------ one pass */

static bool name_ok(const char *s)
{
    return s && *s;
}

static int check_obs(const alert_queue_obs_t *qs, int nq, const alert_pool_obs_t *ps, int np)
{
    if (nq < 0 || np < 0 || (nq && !qs) || (np && !ps)) return -1;
    for (int i = 0; i < nq; i++) {
        if (!name_ok(qs[i].pool) || !name_ok(qs[i].queue)) return -1;
        for (int j = 0; j < i; j++)
            if (!strcmp(qs[i].pool, qs[j].pool) && !strcmp(qs[i].queue, qs[j].queue)) return -1;
    }
    for (int i = 0; i < np; i++) {
        if (!name_ok(ps[i].pool)) return -1;
        for (int j = 0; j < i; j++)
            if (!strcmp(ps[i].pool, ps[j].pool)) return -1;
    }
    return 0;
}

/* Resolve the episodes nothing in this pass spoke for; forget gone pools. */
static int sweep(alerts_t *a, int64_t now_ms, cJSON *events)
{
    int n = 0;
    for (int i = 0; i < a->nep;) {
        if (a->ep[i].seen) {
            i++;
            continue;
        }
        emit(events, &a->ep[i], false, now_ms);
        episode_drop(a, i);
        n++;
    }
    for (int i = 0; i < a->npc;) {
        if (a->pc[i].seen) {
            i++;
            continue;
        }
        crashes_free(&a->pc[i]);
        a->pc[i] = a->pc[--a->npc];
    }
    return n;
}

int alerts_observe(alerts_t *a, const alerts_conf_t *c, int64_t now_ms, const alert_queue_obs_t *qs, int nq,
                   const alert_pool_obs_t *ps, int np, cJSON *events)
{
    if (!a || alerts_conf_check(c) < 0 || check_obs(qs, nq, ps, np) < 0 || !cJSON_IsArray(events)) return -1;
    for (int i = 0; i < a->nep; i++) a->ep[i].seen = false;
    for (int i = 0; i < a->npc; i++) a->pc[i].seen = false;
    int n = 0;
    for (int i = 0; i < nq; i++) n += observe_queue(a, c, now_ms, &qs[i], events);
    for (int i = 0; i < np; i++) {
        n += observe_crashes(a, c, now_ms, &ps[i], events);
        n += observe_failures(a, c, now_ms, &ps[i], events);
    }
    return n + sweep(a, now_ms, events);
}
