/*
 * budgeting.c - see budgeting.h.
 */
#include "budgeting.h"
#include "budget.h"
#include "fleet.h"
#include "lease.h"
#include "log.h"
#include "monitor.h"
#include "util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define HOLDERS_SHOWN 50     /* in status: the rest are counted */

/* One budgeted pool's lease, by pool name. */
typedef struct {
    char *name;
    char *connection;
    char *key;               /* lease.h's key on that connection */
    lease_view_t view;       /* the last the script returned */
    bool have_view;
    int budget;              /* configured */
    int floor, want, share, cap;
    bool renewed;
    int64_t last_ok_ms;      /* monotonic: the last renewal */
    int64_t failing_since_ms;/* monotonic: the first failed renewal since, 0 = none */
    uint64_t failures;       /* renewals that failed */
    bool seen;               /* in this pass's pools */
} bud_pool_t;

struct budgeting {
    bud_pool_t *v;
    int n;
    char id[300];            /* "<host>:<pid>", as the heartbeat's */
};

static struct budgeting *state(master_t *m)
{
    if (!m->budgeting) {
        m->budgeting = xcalloc(1, sizeof *m->budgeting);
        fleet_id(m->budgeting->id, sizeof m->budgeting->id);
    }
    return m->budgeting;
}

static bud_pool_t *find(const struct budgeting *s, const char *name)
{
    for (int i = 0; s && i < s->n; i++)
        if (!strcmp(s->v[i].name, name)) return &s->v[i];
    return NULL;
}

static void entry_free(bud_pool_t *e)
{
    free(e->name);
    free(e->connection);
    free(e->key);
    lease_view_free(&e->view);
}

/* The entry of a budgeted pool; a new one, or a fresh one when its
 * connection changed (a reload). */
static bud_pool_t *entry(master_t *m, const pool_t *p, rconn_t *c)
{
    struct budgeting *s = state(m);
    bud_pool_t *e = find(s, p->conf.name);
    if (e && strcmp(e->connection, p->conf.connection)) {
        entry_free(e);
        *e = s->v[--s->n];
        e = NULL;
    }
    if (!e) {
        s->v = xrealloc(s->v, sizeof *s->v * (size_t)(s->n + 1));
        e = &s->v[s->n++];
        memset(e, 0, sizeof *e);
        e->name = xstrdup(p->conf.name);
        e->connection = xstrdup(p->conf.connection);
        e->key = lease_key(c, p->conf.name);
        e->last_ok_ms = mono_ms();
        e->renewed = true;
        e->cap = 0;
    }
    e->seen = true;
    e->budget = p->conf.fleet_max_processes;
    e->floor = p->conf.min_processes;
    return e;
}

/* This host's fair share, from the holders in e's view and me. */
static int my_share(const bud_pool_t *e, const budget_host_t *me)
{
    return budget_share_of(e->have_view ? e->view.hosts : NULL, e->have_view ? e->view.n : 0, me);
}

static int held_now(const bud_pool_t *e, const char *id)
{
    if (!e->have_view) return 0;
    if (e->view.held >= 0) return e->view.held;
    int i = budget_find(e->view.hosts, e->view.n, id);
    return i < 0 ? 0 : e->view.hosts[i].held;
}

/* The request for one pool: its demand, pressure and claim. */
static void make_request(master_t *m, bud_pool_t *e, const pool_t *p, const bal_pool_t *x, lease_req_t *r)
{
    int want = x->paused ? p->target : balance_want(x);
    e->want = m->stopping ? 0 : budget_demand(want, p->target, p->conf.max_processes, p->pinned);
    budget_host_t me = {.held = held_now(e, state(m)->id), .floor = e->floor, .want = e->want,
                        .pressure = budget_pressure(x->backlog, x->runtime_s), .budget = e->budget};
    snprintf(me.id, sizeof me.id, "%s", state(m)->id);
    *r = (lease_req_t){.id = state(m)->id, .ttl_ms = (int64_t)(m->conf->fleet_lease_ttl * 1000), .budget = e->budget,
                       .floor = e->floor, .want = e->want, .pressure = me.pressure, .claim = m->stopping ? 0 : my_share(e, &me),
                       .keep = x->live + x->stopping};
}

/* After the script (or its failure): the share on the fresh view, the cap. */
static void settle_entry(master_t *m, bud_pool_t *e, const pool_t *p, const lease_req_t *r, bool ok, int64_t now)
{
    if (ok) {
        if (!e->renewed) log_info("pool %s: fleet budget lease renewed again", p->conf.name);
        e->have_view = e->renewed = true;
        e->last_ok_ms = now;
        e->failing_since_ms = 0;
        int i = budget_find(e->view.hosts, e->view.n, r->id);
        e->share = i < 0 ? 0 : my_share(e, &e->view.hosts[i]);
    } else {
        if (e->renewed)
            log_warn("pool %s: cannot renew the fleet budget lease: growing no more; down to min_processes "
                     "(%d) if it lasts %.0f s",
                     p->conf.name, e->floor, m->conf->fleet_lease_ttl / 2);
        e->renewed = false;
        e->failures++;
        if (!e->failing_since_ms) e->failing_since_ms = now;
    }
    budget_cap_in_t in = {.renewed = e->renewed, .held = held_now(e, r->id), .share = e->share,
                          .failing_ms = now - e->last_ok_ms, .ttl_ms = r->ttl_ms, .floor = e->floor,
                          .target = p->target};
    e->cap = budget_cap(&in);
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* The balancer's bounds within the cap. */
static void bound(bal_pool_t *x, int cap)
{
    x->max = min_int(x->max, cap);
    x->min = min_int(x->min, cap);
    if (x->pinned > cap) x->pinned = cap;
    if (x->target > cap) x->target = cap;
}

/* One connection's budgeted pools, in one round trip. */
static void pass_connection(master_t *m, const char *cname, pool_t **pools, bal_pool_t *b, int n, int64_t now)
{
    rconn_t *c = monitor_conn(m, cname);
    int k = 0;
    bud_pool_t **es = xcalloc((size_t)n + 1, sizeof *es);
    int *idx = xcalloc((size_t)n + 1, sizeof *idx);
    char **keys = xcalloc((size_t)n + 1, sizeof *keys);
    lease_req_t *reqs = xcalloc((size_t)n + 1, sizeof *reqs);
    lease_view_t *views = xcalloc((size_t)n + 1, sizeof *views);
    bool *ok = xcalloc((size_t)n + 1, sizeof *ok);
    for (int i = 0; i < n && c; i++) {
        if (!pools[i]->conf.fleet_max_processes || strcmp(pools[i]->conf.connection, cname)) continue;
        es[k] = entry(m, pools[i], c);
        idx[k] = i;
        keys[k] = es[k]->key;
        make_request(m, es[k], pools[i], &b[i], &reqs[k]);
        k++;
    }
    if (k) lease_batch(c, keys, reqs, k, views, ok);
    for (int j = 0; j < k; j++) {
        if (ok[j]) {
            lease_view_free(&es[j]->view);
            es[j]->view = views[j];
        }
        settle_entry(m, es[j], pools[idx[j]], &reqs[j], ok[j], now);
        bound(&b[idx[j]], es[j]->cap);
    }
    free(es), free(idx), free(keys), free(reqs), free(views), free(ok);
}

/* Leases of pools no longer budgeted here (a reload removed the pool or its
 * fleet_max_processes): released at once. */
static void release_unseen(master_t *m)
{
    struct budgeting *s = m->budgeting;
    for (int i = 0; s && i < s->n;) {
        bud_pool_t *e = &s->v[i];
        if (e->seen) {
            e->seen = false;
            i++;
            continue;
        }
        rconn_t *c = monitor_conn(m, e->connection);
        if (c && rconn_ensure(c) == 0) lease_release(c, e->key, s->id);
        entry_free(e);
        s->v[i] = s->v[--s->n];
    }
}

void budgeting_pass(master_t *m, pool_t **pools, bal_pool_t *b, int n, int64_t now)
{
    (void)now;
    int64_t mono = mono_ms();
    for (int ci = 0; ci < m->conf->nredis; ci++) {
        bool used = false;
        for (int i = 0; i < n && !used; i++)
            used = pools[i]->conf.fleet_max_processes && !strcmp(pools[i]->conf.connection, m->conf->redis[ci].name);
        if (used) pass_connection(m, m->conf->redis[ci].name, pools, b, n, mono);
    }
    release_unseen(m);
}

int budgeting_cap(const master_t *m, const pool_t *p)
{
    if (!p->conf.fleet_max_processes) return INT_MAX;
    const bud_pool_t *e = find(m->budgeting, p->conf.name);
    return e ? e->cap : 0;
}

static cJSON *holder_json(const budget_host_t *h, int64_t now)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", h->id);
    cJSON_AddNumberToObject(o, "held", h->held);
    cJSON_AddNumberToObject(o, "min", h->floor);
    cJSON_AddNumberToObject(o, "want", h->want);
    cJSON_AddNumberToObject(o, "pressure_ms", (double)h->pressure);
    cJSON_AddNumberToObject(o, "budget", h->budget);
    if (h->waiting_since)
        cJSON_AddNumberToObject(o, "waiting_s", (double)(now - h->waiting_since) / 1000.0);
    else
        cJSON_AddNullToObject(o, "waiting_s");
    return o;
}

static void add_holders(cJSON *o, const bud_pool_t *e)
{
    int in_use = 0;
    cJSON *arr = cJSON_AddArrayToObject(o, "holders");
    for (int i = 0; i < e->view.n; i++) {
        in_use += e->view.hosts[i].held;
        if (i < HOLDERS_SHOWN) cJSON_AddItemToArray(arr, holder_json(&e->view.hosts[i], e->view.now_ms));
    }
    cJSON_AddNumberToObject(o, "holders_total", e->view.n);
    cJSON_AddNumberToObject(o, "in_use", in_use);
    cJSON_AddNumberToObject(o, "free", e->view.budget - in_use > 0 ? e->view.budget - in_use : 0);
}

cJSON *budgeting_pool_json(const master_t *m, const pool_t *p, bool brief)
{
    if (!p->conf.fleet_max_processes) return NULL;
    const bud_pool_t *e = find(m->budgeting, p->conf.name);
    cJSON *o = cJSON_CreateObject();
    int held = e ? held_now(e, m->budgeting->id) : 0;
    cJSON_AddNumberToObject(o, "budget", e && e->have_view ? e->view.budget : p->conf.fleet_max_processes);
    cJSON_AddNumberToObject(o, "held", held);
    cJSON_AddNumberToObject(o, "want", e ? e->want : 0);
    cJSON_AddBoolToObject(o, "waiting", e && e->want > held);
    if (brief) return o;
    cJSON_AddNumberToObject(o, "configured", p->conf.fleet_max_processes);
    cJSON_AddNumberToObject(o, "share", e ? e->share : 0);
    cJSON_AddNumberToObject(o, "cap", e ? e->cap : 0);
    cJSON_AddStringToObject(o, "lease", !e ? "pending" : e->renewed ? "ok" : "failing");
    cJSON_AddNumberToObject(o, "lease_ttl_s", m->conf->fleet_lease_ttl);
    cJSON_AddNumberToObject(o, "renew_failures", e ? (double)e->failures : 0);
    if (e && e->have_view) add_holders(o, e);
    return o;
}

void budgeting_goodbye(master_t *m)
{
    struct budgeting *s = m->budgeting;
    for (int i = 0; s && i < s->n; i++) {
        rconn_t *c = monitor_conn(m, s->v[i].connection);
        if (c && rconn_ensure(c) == 0) lease_release(c, s->v[i].key, s->id);
    }
}

void budgeting_free(master_t *m)
{
    struct budgeting *s = m->budgeting;
    if (!s) return;
    for (int i = 0; i < s->n; i++) entry_free(&s->v[i]);
    free(s->v);
    free(s);
    m->budgeting = NULL;
}
