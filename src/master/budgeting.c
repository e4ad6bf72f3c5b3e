/*
 * budgeting.c - see budgeting.h.
 */
#include "master/budgeting.h"
#include "master/budget.h"
#include "redis/lease.h"
#include "core/log.h"
#include "master/mconn.h"
#include "core/util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define HOLDERS_SHOWN 50       /* in status: the rest are counted */
#define ERROR_LOG_EVERY_MS 60000

/* One lease: a pool name on a connection and prefix. The pool that runs
 * under it now (active), or only processes still running under it after a
 * reload removed, renamed or moved the pool (draining: it claims nothing,
 * keeps their slots, and is released when the last of them exits). */
typedef struct {
    unsigned tag;            /* its processes carry it (child_t.lease); never 0 */
    char *name, *connection, *prefix;
    char *key;               /* lease.h's key on that connection */
    lease_view_t view;       /* the last the script returned */
    bool have_view;
    bool active;             /* a pool of this pass runs under it */
    int pool;                /* this pass: that pool's index, -1 draining */
    int budget, floor, want, share, cap;
    int64_t pressure;
    int keep;                /* processes under it this pass, removed pools' too */
    bool renewed;
    int64_t last_ok_ms;      /* monotonic: the last renewal */
    int64_t lost_until_ms;   /* monotonic: its record was lost in Redis; claims nothing new until then */
    uint64_t failures;       /* renewals that failed */
    char err[256];           /* why the last one failed */
    int64_t err_logged_ms;   /* monotonic */
} bud_pool_t;

struct budgeting {
    bud_pool_t *v;
    int n;
    unsigned last_tag;
    char id[BUDGET_ID_MAX + 1]; /* lease_holder_id(): this master's records */
};

static struct budgeting *state(master_t *m)
{
    if (!m->budgeting) {
        m->budgeting = xcalloc(1, sizeof *m->budgeting);
        lease_holder_id(m->budgeting->id, sizeof m->budgeting->id);
    }
    return m->budgeting;
}

/* The lease the pool of that name runs under now. */
static bud_pool_t *find(const struct budgeting *s, const char *name)
{
    for (int i = 0; s && i < s->n; i++)
        if (s->v[i].active && !strcmp(s->v[i].name, name)) return &s->v[i];
    return NULL;
}

static void entry_free(bud_pool_t *e)
{
    free(e->name);
    free(e->connection);
    free(e->prefix);
    free(e->key);
    lease_view_free(&e->view);
}

/* The lease of pools[i] on c: the one it had, or a new one when its name,
 * connection or prefix is new (a reload: the old one drains). An index:
 * s->v may move. */
static int bind_lease(struct budgeting *s, const pool_t *p, int i, rconn_t *c)
{
    int k = 0;
    for (; k < s->n; k++) {
        const bud_pool_t *e = &s->v[k];
        if (!strcmp(e->name, p->conf.name) && !strcmp(e->connection, p->conf.connection) &&
            !strcmp(e->prefix, c->conf.prefix))
            break;
    }
    if (k == s->n) {
        s->v = xrealloc(s->v, sizeof *s->v * (size_t)(s->n + 1));
        bud_pool_t *e = &s->v[s->n++];
        *e = (bud_pool_t){.tag = ++s->last_tag, .name = xstrdup(p->conf.name),
                          .connection = xstrdup(p->conf.connection), .prefix = xstrdup(c->conf.prefix),
                          .key = lease_key(c, p->conf.name), .renewed = true, .last_ok_ms = mono_ms()};
    }
    bud_pool_t *e = &s->v[k];
    e->active = true;
    e->pool = i;
    e->budget = p->conf.fleet_max_processes;
    e->floor = p->conf.min_processes;
    return k;
}

/* Every pool's lease for this pass; its untagged children (started before
 * it had one: the budget came with a reload) join it. */
static void bind_all(master_t *m, struct budgeting *s, pool_t **pools, int n)
{
    for (int i = 0; i < s->n; i++) s->v[i].active = false, s->v[i].pool = -1;
    for (int i = 0; i < n; i++) {
        rconn_t *c = pools[i]->conf.fleet_max_processes ? mconn_get(m, pools[i]->conf.connection) : NULL;
        if (!c) {
            pool_set_fleet(pools[i], 0, pools[i]->conf.fleet_max_processes ? 0 : INT_MAX);
            continue;
        }
        int k = bind_lease(s, pools[i], i, c); /* first: s->v may move */
        pool_set_fleet(pools[i], s->v[k].tag, s->v[k].cap);
    }
}

/* The processes under each lease (every pool, removed ones included); the
 * leases nothing runs under any more are released and forgotten. */
static void count_and_drop(master_t *m, struct budgeting *s)
{
    for (int i = 0; i < s->n;) {
        bud_pool_t *e = &s->v[i];
        e->keep = 0;
        for (int j = 0; j < m->pools.n; j++) e->keep += pool_lease_children(m->pools.v[j], e->tag);
        if (e->active || e->keep) {
            i++;
            continue;
        }
        rconn_t *c = mconn_get(m, e->connection);
        if (c && rconn_ensure(c) == 0 && lease_release(c, e->key, s->id) == 0)
            log_info("pool %s: fleet budget lease released (nothing runs under it any more)", e->name);
        entry_free(e);
        s->v[i] = s->v[--s->n];
    }
}

static budget_host_t me_of(const master_t *m, const bud_pool_t *e)
{
    budget_host_t me = {.held = e->have_view ? e->view.held : 0, .floor = e->floor, .want = e->want,
                        .pressure = e->pressure, .budget = e->budget};
    snprintf(me.id, sizeof me.id, "%s", m->budgeting->id);
    return me;
}

/* This host's fair share, from the holders in e's view and me. */
static int my_share(const bud_pool_t *e, const budget_host_t *me)
{
    return budget_share_of(e->have_view ? e->view.hosts : NULL, e->have_view ? e->view.n : 0, me);
}

/* The request for one lease: an active one's demand (at most what
 * max_workers leaves it: room), pressure and claim; a draining one, or one
 * whose record was lost a moment ago, claims nothing and keeps what still
 * runs. */
static void make_request(master_t *m, bud_pool_t *e, const pool_t *p, const bal_pool_t *x, int room, int64_t now,
                         lease_req_t *r)
{
    e->want = 0;
    e->pressure = 0;
    if (p) {
        int want = x->paused ? p->target : balance_want(x);
        int max = p->conf.max_processes < e->budget ? p->conf.max_processes : e->budget;
        e->want = m->stopping ? 0 : budget_demand(want, p->target, max, p->pinned, room);
        e->pressure = budget_pressure(x->backlog, x->runtime_s);
    } else
        e->floor = 0;
    budget_host_t me = me_of(m, e);
    int64_t ttl = (int64_t)(m->conf->fleet_lease_ttl * 1000);
    *r = (lease_req_t){.id = m->budgeting->id, .ttl_ms = ttl, .budget = e->budget, .floor = e->floor,
                       .want = e->want, .pressure = e->pressure,
                       .claim = m->stopping || !p || now < e->lost_until_ms ? 0 : my_share(e, &me),
                       .keep = e->keep, .had = e->have_view && now - e->last_ok_ms < ttl / 2};
}

/* Our record was gone although it cannot have lapsed (renewed within half
 * the TTL: a margin for the round trip): a failover that lost the last
 * writes, a restart without persistence, a flush. Every master writes its
 * record again (holding every process it runs) within a TTL; until then a
 * claim could be granted slots whose record is still missing, so it claims
 * nothing new (the script granted nothing in the pass that found it: had). */
static void check_lost(const master_t *m, bud_pool_t *e, int64_t now)
{
    int64_t ttl = (int64_t)(m->conf->fleet_lease_ttl * 1000);
    if (!e->have_view || e->view.prior >= 0 || now - e->last_ok_ms >= ttl / 2) return;
    log_warn("pool %s: its fleet budget lease record was lost in Redis (a failover, a restart without persistence, "
             "a flush?): written again with the %d processes it runs; claiming no new slot for %.0f s, until every "
             "master has written its own again",
             e->name, e->keep, m->conf->fleet_lease_ttl);
    e->lost_until_ms = now + ttl;
}

/* A failed renewal, logged with its cause: the first, a new cause, and
 * once a minute while it lasts. */
static void note_failure(master_t *m, bud_pool_t *e, const char *err, int64_t now)
{
    const char *what = e->pool < 0 ? " (removed, draining)" : "";
    bool again = !e->renewed && (strcmp(e->err, err) || now - e->err_logged_ms >= ERROR_LOG_EVERY_MS);
    if (e->renewed)
        log_warn("pool %s%s: cannot renew the fleet budget lease: %s: growing no more; down to min_processes (%d) "
                 "if it lasts %.0f s",
                 e->name, what, err, e->floor, m->conf->fleet_lease_ttl / 2);
    else if (again)
        log_warn("pool %s%s: the fleet budget lease is still not renewed: %s (%llu failures)", e->name, what, err,
                 (unsigned long long)e->failures + 1);
    if (e->renewed || again) e->err_logged_ms = now;
    snprintf(e->err, sizeof e->err, "%s", err);
    e->renewed = false;
    e->failures++;
}

/* After the script (or its failure): the share on the fresh view, the cap. */
static void settle_entry(master_t *m, bud_pool_t *e, const pool_t *p, const lease_status_t *st, int64_t now)
{
    if (st->ok) {
        check_lost(m, e, now);
        if (!e->renewed) log_info("pool %s: fleet budget lease renewed again", e->name);
        e->have_view = e->renewed = true;
        e->last_ok_ms = now;
        e->err[0] = '\0';
    } else
        note_failure(m, e, st->err[0] ? st->err : "Redis unreachable", now);
    budget_host_t me = me_of(m, e);
    budget_cap_in_t in = {.renewed = st->ok, .held = me.held, .share = e->share, .failing_ms = now - e->last_ok_ms,
                          .ttl_ms = (int64_t)(m->conf->fleet_lease_ttl * 1000), .floor = e->floor,
                          .target = p ? p->target : 0};
    e->cap = budget_settle(e->view.hosts, e->view.n, &me, &in);
    e->share = in.share;
}

/* The cap on pool p's own children: its lease's, less what another pool of
 * its name (a removed one, still draining) runs under the same lease. */
static int own_cap(const bud_pool_t *e, const pool_t *p)
{
    int others = e->keep - pool_lease_children(p, e->tag);
    return e->cap - others > 0 ? e->cap - others : 0;
}

/* One connection's leases, in one round trip. No lease is added or
 * removed meanwhile: the pointers into s->v hold. */
static void pass_connection(master_t *m, const char *cname, pool_t **pools, bal_pool_t *b, const int *room,
                            int64_t now)
{
    struct budgeting *s = m->budgeting;
    rconn_t *c = mconn_get(m, cname);
    int k = 0;
    bud_pool_t **es = xcalloc((size_t)s->n + 1, sizeof *es);
    char **keys = xcalloc((size_t)s->n + 1, sizeof *keys);
    lease_req_t *reqs = xcalloc((size_t)s->n + 1, sizeof *reqs);
    lease_view_t *views = xcalloc((size_t)s->n + 1, sizeof *views);
    lease_status_t *st = xcalloc((size_t)s->n + 1, sizeof *st);
    for (int i = 0; i < s->n && c; i++) {
        bud_pool_t *e = &s->v[i];
        if (strcmp(e->connection, cname)) continue;
        es[k] = e;
        keys[k] = e->key;
        int pi = e->pool;
        make_request(m, e, pi >= 0 ? pools[pi] : NULL, pi >= 0 ? &b[pi] : NULL, pi >= 0 && room ? room[pi] : INT_MAX,
                     now, &reqs[k]);
        k++;
    }
    /* behind Sentinel, never a ledger on a primary the sentinels have
     * replaced: masters split between the old one and the new one would
     * each grant slots the other half holds */
    if (k) {
        rconn_confirm_primary(c);
        lease_batch(c, keys, reqs, k, views, st);
    }
    for (int j = 0; j < k; j++) {
        bud_pool_t *e = es[j];
        if (st[j].ok) {
            lease_view_free(&e->view);
            e->view = views[j];
        }
        const pool_t *p = e->pool >= 0 ? pools[e->pool] : NULL;
        settle_entry(m, e, p, &st[j], now);
        if (!p) continue;
        int cap = own_cap(e, p);
        budget_bound(&b[e->pool], cap);
        pool_set_fleet(pools[e->pool], e->tag, cap);
    }
    free(es), free(keys), free(reqs), free(views), free(st);
}

void budgeting_pass(master_t *m, pool_t **pools, bal_pool_t *b, const int *room, int n, int64_t now)
{
    (void)now;
    struct budgeting *s = state(m);
    /* first every lease this pass needs (s->v may grow or shrink here) ... */
    bind_all(m, s, pools, n);
    count_and_drop(m, s);
    /* ... then the scripts, one round trip per connection */
    int64_t mono = mono_ms();
    for (int ci = 0; ci < m->conf->nredis; ci++) pass_connection(m, m->conf->redis[ci].name, pools, b, room, mono);
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
    if (h->waiting_since && h->waiting_since <= now)
        cJSON_AddNumberToObject(o, "waiting_s", (double)(now - h->waiting_since) / 1000.0);
    else
        cJSON_AddNullToObject(o, "waiting_s");
    return o;
}

static void add_holders(cJSON *o, const bud_pool_t *e)
{
    int64_t in_use = 0;
    cJSON *arr = cJSON_AddArrayToObject(o, "holders");
    for (int i = 0; i < e->view.n; i++) {
        in_use += e->view.hosts[i].held;
        if (i < HOLDERS_SHOWN) cJSON_AddItemToArray(arr, holder_json(&e->view.hosts[i], e->view.now_ms));
    }
    cJSON_AddNumberToObject(o, "holders_total", e->view.n);
    cJSON_AddNumberToObject(o, "in_use", (double)in_use);
    cJSON_AddNumberToObject(o, "free", e->view.budget - in_use > 0 ? (double)(e->view.budget - in_use) : 0);
}

cJSON *budgeting_pool_json(const master_t *m, const pool_t *p, bool brief)
{
    if (!p->conf.fleet_max_processes) return NULL;
    const bud_pool_t *e = find(m->budgeting, p->conf.name);
    cJSON *o = cJSON_CreateObject();
    int held = e && e->have_view ? e->view.held : 0;
    cJSON_AddNumberToObject(o, "budget", e && e->have_view ? e->view.budget : p->conf.fleet_max_processes);
    cJSON_AddNumberToObject(o, "held", held);
    cJSON_AddNumberToObject(o, "want", e ? e->want : 0);
    cJSON_AddBoolToObject(o, "waiting", e && e->want > held);
    if (brief) return o;
    cJSON_AddNumberToObject(o, "configured", p->conf.fleet_max_processes);
    cJSON_AddNumberToObject(o, "share", e ? e->share : 0);
    cJSON_AddNumberToObject(o, "cap", e ? e->cap : 0);
    cJSON_AddNumberToObject(o, "processes", e ? e->keep : 0);
    cJSON_AddStringToObject(o, "lease", !e ? "pending" : e->renewed ? "ok" : "failing");
    if (e && !e->renewed)
        cJSON_AddStringToObject(o, "lease_error", e->err);
    else
        cJSON_AddNullToObject(o, "lease_error");
    cJSON_AddNumberToObject(o, "lease_ttl_s", m->conf->fleet_lease_ttl);
    cJSON_AddNumberToObject(o, "renew_failures", e ? (double)e->failures : 0);
    if (e && e->have_view) add_holders(o, e);
    return o;
}

void budgeting_goodbye(master_t *m)
{
    struct budgeting *s = m->budgeting;
    for (int i = 0; s && i < s->n; i++) {
        rconn_t *c = mconn_get(m, s->v[i].connection);
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
