/*
 * budget_sim.c - the fleet budget at scale: many virtual masters against a
 * real redis-server, each running qpool's own lease script (lease.c, one
 * pipelined batch per host and pass) and decisions (budget.c), with random
 * deaths, partitions (no renewals) and changing backlogs, in real time (the
 * leases expire by Redis's clock).
 *
 *   budget-sim --port P [--hosts 200] [--pools 50] [--seconds 25]
 *              [--interval-ms 500] [--ttl-ms 2000] [--seed 1]
 *
 * It checks, every pass:
 *   budget   the live leases of a pool never hold more than its budget, and
 *            the workers running never exceed it but for the floors of
 *            partitioned hosts whose lease has lapsed (the one documented
 *            exception: such a host keeps min_processes);
 *   reuse    a dead host's slots are free again within the TTL, and taken
 *            within two more passes by the hosts that wait for them;
 *   starve   no host waits for budget with a backlog while another
 *            connected host holds slots it has no work for, beyond 3 passes.
 * and prints one JSON object of figures and violation counts; exit 1 if any
 * check failed. Run by tests/integration/test_fleet_budget_sim.py.
 */
#include "budget.h"
#include "lease.h"
#include "rconn.h"
#include "util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_POOLS_PER_HOST 12

typedef struct {
    int pool;
    int floor, max;
    int64_t backlog;
    int live;                /* workers running */
    int want, share, cap;
    lease_view_t view;
    bool have_view;
    int idle_runs, waitfree_runs; /* passes in a row (check_holders) */
} vpool_t;

typedef struct {
    char id[64];
    vpool_t p[MAX_POOLS_PER_HOST];
    int np;
    bool dead;
    int64_t partitioned_until; /* monotonic ms, 0 = connected */
    int64_t last_ok;           /* monotonic ms of its last renewal */
} vhost_t;

typedef struct {
    int budget;
    char *key;
} spool_t;

typedef struct {
    int pool, host;
    int64_t due;             /* monotonic ms: the check */
    int64_t at;
    bool done;
} death_t;

static struct {
    int hosts, pools, seconds, interval, ttl, seed, port;
} opt = {200, 50, 25, 500, 2000, 1, 0};

static struct {
    long passes, scripts, batches, deaths, partitions, backlog_changes;
    long budget_checks, over_budget, workers_over;
    long reuse_checks, reuse_failed, starve_failed, reuse_measured;
    int64_t reuse_max_ms, reuse_sum_ms;
    int64_t pass_max_ms;
    int waitfree_max;
    long waitfree_failed;
} st;

static int rnd(int n)
{
    return n > 0 ? rand() % n : 0;
}

static void setup(vhost_t *h, spool_t *sp, rconn_t *c)
{
    for (int k = 0; k < opt.pools; k++) {
        sp[k].budget = 10 + rnd(40);
        char name[32];
        snprintf(name, sizeof name, "pool%d", k);
        sp[k].key = lease_key(c, name);
    }
    int *floors = xcalloc((size_t)opt.pools, sizeof *floors);
    for (int i = 0; i < opt.hosts; i++) {
        snprintf(h[i].id, sizeof h[i].id, "vhost%03d:%d", i, 1000 + i);
        h[i].np = 4 + rnd(MAX_POOLS_PER_HOST - 4);
        for (int j = 0; j < h[i].np; j++) {
            vpool_t *v = &h[i].p[j];
            v->pool = (i * 7 + j * 13 + rnd(3)) % opt.pools;
            for (int q = 0; q < j; q++)
                if (h[i].p[q].pool == v->pool) v->pool = (v->pool + 1 + q) % opt.pools;
            v->floor = rnd(4) == 0 && floors[v->pool] + 1 <= sp[v->pool].budget / 3 ? 1 : 0;
            floors[v->pool] += v->floor;
            v->max = 2 + rnd(10);
            v->backlog = rnd(2) ? 0 : 1 + rnd(500);
        }
    }
    free(floors);
}

/* Like budgeting.c: the demand, the claim from the last view. */
static void request(const vhost_t *h, vpool_t *v, const spool_t *sp, lease_req_t *r)
{
    int want = v->backlog > 0 ? (int)(v->backlog < v->max ? v->backlog : v->max) : v->floor;
    v->want = budget_demand(want, 0, v->max, -1, v->max);
    budget_host_t me = {.floor = v->floor, .want = v->want, .pressure = budget_pressure(v->backlog, 0.2),
                        .budget = sp[v->pool].budget};
    snprintf(me.id, sizeof me.id, "%s", h->id);
    *r = (lease_req_t){.id = h->id, .ttl_ms = opt.ttl, .budget = me.budget, .floor = v->floor, .want = v->want,
                       .pressure = me.pressure, .keep = v->live,
                       .claim = budget_share_of(v->have_view ? v->view.hosts : NULL, v->have_view ? v->view.n : 0, &me)};
}

/* Like budgeting.c: the cap after the script (or without it), and the
 * workers following it (idle ones stop at once in this model). */
static void settle(vhost_t *h, vpool_t *v, bool ok, int64_t now)
{
    budget_cap_in_t in = {.renewed = ok, .held = ok ? v->view.held : 0, .ttl_ms = opt.ttl, .floor = v->floor,
                          .target = v->live, .failing_ms = now - h->last_ok};
    if (ok) {
        int i = budget_find(v->view.hosts, v->view.n, h->id);
        v->share = i < 0 ? 0 : budget_share_of(v->view.hosts, v->view.n, &v->view.hosts[i]);
        in.share = v->share;
    }
    v->cap = budget_cap(&in);
    int run = v->want < v->cap ? v->want : v->cap;
    v->live = ok ? run : (v->live < v->cap ? v->live : v->cap);
}

static void host_pass(vhost_t *h, spool_t *sp, rconn_t *c, int64_t now)
{
    char *keys[MAX_POOLS_PER_HOST];
    lease_req_t reqs[MAX_POOLS_PER_HOST];
    lease_view_t views[MAX_POOLS_PER_HOST];
    lease_status_t lst[MAX_POOLS_PER_HOST];
    bool ok[MAX_POOLS_PER_HOST];
    memset(views, 0, sizeof views);
    bool connected = !h->partitioned_until || now >= h->partitioned_until;
    if (connected) h->partitioned_until = 0;
    for (int j = 0; j < h->np; j++) {
        keys[j] = sp[h->p[j].pool].key;
        request(h, &h->p[j], sp, &reqs[j]);
        ok[j] = false;
    }
    if (connected && lease_batch(c, keys, reqs, h->np, views, lst) >= 0) {
        for (int j = 0; j < h->np; j++) ok[j] = lst[j].ok;
        st.batches++;
        st.scripts += h->np;
        h->last_ok = now;
    }
    for (int j = 0; j < h->np; j++) {
        if (ok[j]) {
            lease_view_free(&h->p[j].view);
            h->p[j].view = views[j];
            h->p[j].have_view = true;
        }
        settle(h, &h->p[j], ok[j], now);
    }
}

static void shuffle(int *order, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = rnd(i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Deaths, partitions and backlog changes, at random. */
static void events(vhost_t *h, death_t *deaths, int *ndeaths, int maxd, int64_t now)
{
    int passes = opt.seconds * 1000 / opt.interval;
    if (rnd(passes) < maxd / 2 && *ndeaths < maxd) {
        int i = rnd(opt.hosts);
        if (!h[i].dead && !h[i].partitioned_until) {
            h[i].dead = true;
            st.deaths++;
            for (int j = 0; j < h[i].np; j++)
                if (h[i].p[j].have_view && h[i].p[j].view.held > 0)
                    deaths[(*ndeaths)++] = (death_t){h[i].p[j].pool, i, now + opt.ttl + 3 * opt.interval, now, false};
        }
    }
    if (rnd(passes) < 12) {
        int i = rnd(opt.hosts);
        if (!h[i].dead && !h[i].partitioned_until) {
            h[i].partitioned_until = now + opt.ttl / 2 + rnd(3 * opt.ttl);
            st.partitions++;
        }
    }
    for (int k = 0; k < opt.hosts / 10; k++) {
        vhost_t *x = &h[rnd(opt.hosts)];
        x->p[rnd(x->np)].backlog = rnd(2) ? 0 : 1 + rnd(500);
        st.backlog_changes++;
    }
}

static const vpool_t *host_pool(const vhost_t *h, int pool)
{
    for (int j = 0; j < h->np; j++)
        if (h->p[j].pool == pool) return &h->p[j];
    return NULL;
}

/* budget: the ledger and the workers. */
static void check_budget(const vhost_t *h, spool_t *sp, int k, const lease_view_t *lv, int64_t now)
{
    int held = 0, workers = 0, lapsed_floors = 0;
    for (int i = 0; i < lv->n; i++) held += lv->hosts[i].held;
    for (int i = 0; i < opt.hosts; i++) {
        const vpool_t *v = host_pool(&h[i], k);
        if (!v || h[i].dead) continue;
        workers += v->live;
        if (h[i].partitioned_until && now - h[i].last_ok >= opt.ttl) lapsed_floors += v->floor;
    }
    st.budget_checks++;
    if (held > sp[k].budget) {
        st.over_budget++;
        fprintf(stderr, "pool%d: leases hold %d > budget %d\n", k, held, sp[k].budget);
    }
    if (workers > sp[k].budget + lapsed_floors) {
        st.workers_over++;
        fprintf(stderr, "pool%d: %d workers > budget %d + lapsed floors %d\n", k, workers, sp[k].budget,
                lapsed_floors);
    }
}

/* The virtual host of a holder, if it is alive and connected. */
static vpool_t *connected(vhost_t *h, const budget_host_t *x, int pool)
{
    int hi = -1;
    if (sscanf(x->id, "vhost%d", &hi) != 1 || hi < 0 || hi >= opt.hosts) return NULL;
    if (h[hi].dead || h[hi].partitioned_until) return NULL;
    return (vpool_t *)host_pool(&h[hi], pool);
}

/* starve: a connected host holds slots past its floor and its demand, with
 * no backlog, for more than 3 passes while another waits with a backlog.
 * waitfree: a connected host whose fair share is above what it holds waits
 * more than 3 passes while slots are free (and no lapsing lease of a dead
 * or partitioned host reserves them). */
static void check_holders(vhost_t *h, spool_t *sp, int k, const lease_view_t *lv)
{
    int held = 0;
    bool starving = false, lapsing = false;
    for (int i = 0; i < lv->n; i++) {
        const budget_host_t *x = &lv->hosts[i];
        held += x->held;
        if (!connected(h, x, k)) lapsing = true;
        else if (x->want > x->held && x->pressure > 0) starving = true;
    }
    for (int i = 0; i < lv->n; i++) {
        const budget_host_t *x = &lv->hosts[i];
        vpool_t *v = connected(h, x, k);
        if (!v) continue;
        bool idle = x->held > x->floor && x->held > x->want && x->pressure == 0;
        v->idle_runs = idle ? v->idle_runs + 1 : 0;
        if (v->idle_runs == 4 && starving) {
            st.starve_failed++;
            fprintf(stderr, "pool%d: %s idled 4 passes while another host starved\n", k, x->id);
        }
        bool waitfree = !lapsing && held < sp[k].budget && budget_share_of(lv->hosts, lv->n, x) > x->held;
        v->waitfree_runs = waitfree ? v->waitfree_runs + 1 : 0;
        if (v->waitfree_runs > st.waitfree_max) st.waitfree_max = v->waitfree_runs;
        if (v->waitfree_runs == 4) {
            st.waitfree_failed++;
            fprintf(stderr, "pool%d: %s waited 4 passes for free slots\n", k, x->id);
        }
    }
}

/* reuse: at its due time (the TTL and 3 passes after the death), the dead
 * host's record is gone (its slots free for the others: check_holders sees
 * that they take them). */
static void check_reuse(const vhost_t *h, death_t *d, const lease_view_t *lv, int64_t now)
{
    if (d->done || now < d->due) return;
    d->done = true;
    st.reuse_checks++;
    if (budget_find(lv->hosts, lv->n, h[d->host].id) >= 0) {
        st.reuse_failed++;
        fprintf(stderr, "pool%d: %s's lease still there %lld ms after its death\n", d->pool, h[d->host].id,
                (long long)(now - d->at));
    }
}

static void check_all(rconn_t *c, vhost_t *h, spool_t *sp, death_t *deaths, int nd, int64_t now)
{
    for (int k = 0; k < opt.pools; k++) {
        lease_view_t lv = {0};
        if (lease_list(c, sp[k].key, &lv) < 0) continue;
        check_budget(h, sp, k, &lv, now);
        check_holders(h, sp, k, &lv);
        for (int i = 0; i < nd; i++)
            if (deaths[i].pool == k) check_reuse(h, &deaths[i], &lv, now);
        lease_view_free(&lv);
    }
}

/* The first pass after each death at which its slots were free or taken. */
static void measure_reuse(rconn_t *c, const vhost_t *h, const spool_t *sp, death_t *deaths, int nd, int64_t now)
{
    static bool *seen;
    if (!seen) seen = xcalloc(4096, 1);
    for (int i = 0; i < nd && i < 4096; i++) {
        if (seen[i]) continue;
        lease_view_t lv = {0};
        if (lease_list(c, sp[deaths[i].pool].key, &lv) < 0) continue;
        if (budget_find(lv.hosts, lv.n, h[deaths[i].host].id) < 0) {
            seen[i] = true;
            int64_t t = now - deaths[i].at;
            st.reuse_sum_ms += t;
            st.reuse_measured++;
            if (t > st.reuse_max_ms) st.reuse_max_ms = t;
        }
        lease_view_free(&lv);
    }
}

static void parse_args(int argc, char **argv)
{
    static const struct option lo[] = {{"port", 1, 0, 'p'},     {"hosts", 1, 0, 'H'},       {"pools", 1, 0, 'P'},
                                       {"seconds", 1, 0, 's'},  {"interval-ms", 1, 0, 'i'}, {"ttl-ms", 1, 0, 't'},
                                       {"seed", 1, 0, 'S'},     {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int v = atoi(optarg);
        switch (o) {
        case 'p': opt.port = v; break;
        case 'H': opt.hosts = v; break;
        case 'P': opt.pools = v; break;
        case 's': opt.seconds = v; break;
        case 'i': opt.interval = v; break;
        case 't': opt.ttl = v; break;
        case 'S': opt.seed = v; break;
        default: exit(2);
        }
    }
    if (!opt.port || opt.hosts < 2 || opt.pools < 1 || opt.interval < 10 || opt.ttl < 2 * opt.interval) {
        fprintf(stderr, "usage: budget-sim --port P [--hosts N] [--pools N] [--seconds S] [--interval-ms MS] "
                        "[--ttl-ms MS (>= 2 intervals)] [--seed N]\n");
        exit(2);
    }
}

static void report(void)
{
    long checks_failed = st.over_budget + st.workers_over + st.reuse_failed + st.starve_failed + st.waitfree_failed;
    long deaths_measured = st.reuse_measured ? st.reuse_measured : 1;
    printf("{\"hosts\":%d,\"pools\":%d,\"seconds\":%d,\"interval_ms\":%d,\"ttl_ms\":%d,\"passes\":%ld,"
           "\"scripts\":%ld,\"batches\":%ld,\"scripts_per_host_pass\":%.2f,\"deaths\":%ld,\"partitions\":%ld,"
           "\"backlog_changes\":%ld,\"budget_checks\":%ld,\"over_budget\":%ld,\"workers_over\":%ld,"
           "\"reuse_checks\":%ld,\"reuse_failed\":%ld,\"reuse_max_ms\":%lld,\"reuse_mean_ms\":%lld,"
           "\"starve_failed\":%ld,\"waitfree_max\":%d,\"waitfree_failed\":%ld,\"pass_max_ms\":%lld,\"failed\":%ld}\n",
           opt.hosts, opt.pools, opt.seconds, opt.interval, opt.ttl, st.passes, st.scripts, st.batches,
           st.batches ? (double)st.scripts / (double)st.batches : 0.0, st.deaths, st.partitions, st.backlog_changes,
           st.budget_checks, st.over_budget, st.workers_over, st.reuse_checks, st.reuse_failed,
           (long long)st.reuse_max_ms, (long long)(st.reuse_sum_ms / deaths_measured), st.starve_failed,
           st.waitfree_max, st.waitfree_failed, (long long)st.pass_max_ms, checks_failed);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    srand((unsigned)opt.seed);
    redis_conf_t rc = {.name = "sim", .host = "127.0.0.1", .port = opt.port, .prefix = "sim:", .timeout = 5};
    rconn_t *c = rconn_new(&rc);
    vhost_t *h = xcalloc((size_t)opt.hosts, sizeof *h);
    spool_t *sp = xcalloc((size_t)opt.pools, sizeof *sp);
    int maxd = 64, nd = 0;
    death_t *deaths = xcalloc((size_t)maxd * MAX_POOLS_PER_HOST, sizeof *deaths);
    setup(h, sp, c);
    int *order = xcalloc((size_t)opt.hosts, sizeof *order);
    for (int i = 0; i < opt.hosts; i++) order[i] = i;
    int64_t start = mono_ms(), end = start + opt.seconds * 1000;
    for (int64_t next = start; mono_ms() < end; next += opt.interval) {
        int64_t now = mono_ms();
        if (next > now) usleep((useconds_t)(next - now) * 1000);
        now = mono_ms();
        events(h, deaths, &nd, maxd, now);
        shuffle(order, opt.hosts);
        for (int k = 0; k < opt.hosts; k++)
            if (!h[order[k]].dead) host_pass(&h[order[k]], sp, c, mono_ms());
        st.passes++;
        int64_t took = mono_ms() - now;
        if (took > st.pass_max_ms) st.pass_max_ms = took;
        measure_reuse(c, h, sp, deaths, nd, mono_ms());
        check_all(c, h, sp, deaths, nd, mono_ms());
    }
    report();
    for (int i = 0; i < opt.hosts; i++)
        for (int j = 0; j < h[i].np; j++) lease_view_free(&h[i].p[j].view);
    for (int k = 0; k < opt.pools; k++) free(sp[k].key);
    free(h), free(sp), free(deaths), free(order);
    rconn_free(c);
    return st.over_budget + st.workers_over + st.reuse_failed + st.starve_failed + st.waitfree_failed ? 1 : 0;
}
