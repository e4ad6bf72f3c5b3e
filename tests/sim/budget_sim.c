/*
 * budget_sim.c - the fleet budget at scale: many virtual masters against a
 * real redis-server, in real time (the leases expire by Redis's clock),
 * with random host deaths, partitions (Redis out of reach: no renewal, no
 * job taken) and changing backlogs.
 *
 *   budget-sim --port P [--hosts 200] [--pools 50] [--passes 20]
 *              [--interval-ms 500] [--ttl-ms 4000] [--job-ms 800] [--seed 1]
 *              [--host-stall-us 0]
 *
 * Each virtual master takes qpool's own path each pass, as monitor.c and
 * budgeting.c do: the balancer's want (balance_want, size strategy), what
 * max_workers leaves each pool (a dry balance()), the demand and pressure
 * (budget_demand, budget_pressure), the claim (budget_share_of on the last
 * view), qpool's lease script (lease_batch: one pipelined round trip per
 * host), the share and cap (budget_settle), the balancer within the cap
 * (budget_bound, balance()). Its workers follow pool.c's rules: a child is
 * started only while the pool runs fewer processes (retiring ones
 * included) than its cap; shrinking stops idle workers at once and retires
 * a busy one after its job. Jobs last up to --job-ms; a partitioned host
 * takes none. --host-stall-us sleeps after each host's pass: a pass of all
 * hosts then takes longer than the interval, as on a slow machine, even on
 * a fast one. A dead host's workers die with it (a machine lost; a killed
 * master's orphans are test_fleet_budget_processes.py's).
 *
 * The invariants, checked after every pass of all hosts:
 *   budget   the processes of a pool's workers on every live host never
 *            exceed its budget, nor does the ledger (the live records' held)
 *            -- but for the documented limits, where a host's record lapsed
 *            while its workers ran: the floor of a partitioned host (a host
 *            out of reach keeps its floor), and the processes of a host whose
 *            record lapsed before it renewed again (the script returned
 *            prior -1: a partitioned host back, or a virtual master whose
 *            passes came further apart than the TTL, as a frozen master's
 *            do: on a slow machine one pass of all hosts can take longer
 *            than the interval, and two passes longer than the TTL). Such
 *            processes are excused from the pass b it renews again, counted
 *            in passes, not in ms: the others see its record by their pass
 *            b + 1 and claim less at b + 2 at the latest, where idle workers
 *            stop (their records say so at b + 3); a busy one retires after
 *            its job, which the first pass that starts a job after the end
 *            of pass b + 2 sees. So: through pass b + 3, and through every
 *            pass that starts before the end of pass b + 2 plus --job-ms --
 *            and every connected host's record holds at least the processes
 *            it runs;
 *   reuse    a dead host's slots are free within the TTL: its record's
 *            expiry (Redis time) is at most the TTL after its death; they
 *            are taken at the next pass of a host that waits (starve);
 *   starve   no host waits below its fair share while slots are free or
 *            another connected host holds slots it neither runs a busy
 *            worker in nor wants, for more than 3 passes in a row. Bound:
 *            the idle host sees its lower demand at its pass p and stops
 *            its idle workers; its record gives the slots back at p + 1;
 *            the waiter's claim is from its view of the pass before, which
 *            has the new demand by p + 1; it is granted the free slots at
 *            p + 2 at the latest -- so a wait seen after 3 passes is a bug.
 * It prints one JSON object of figures and violation counts and exits 1 if
 * any check failed. Events come from the seed alone (jobs have their own
 * generator): a seed makes the same deaths, partitions and backlogs
 * whatever the machine's speed. Run by test_fleet_budget_sim.py (3 seeds).
 */
#include "master/balancer.h"
#include "master/budget.h"
#include "redis/lease.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_POOLS_PER_HOST 12
#define MAX_PROCS 64
#define STARVE_PASSES 3

typedef struct {
    int64_t ends;            /* monotonic ms its job ends, 0 idle */
    bool retiring;
} vproc_t;

typedef struct {
    int pool;
    int floor, max;
    int64_t backlog;
    vproc_t procs[MAX_PROCS];
    int nprocs;
    int target, want, share, cap;
    int64_t below_since, pressure;
    lease_view_t view;
    bool have_view, renewed;
    int64_t last_ok;         /* monotonic ms of its last renewal */
    bool lapsed;             /* partitioned and its record lapsed: its floor is excused (budget) */
    long back_pass;          /* the pass it renewed a lapsed record (-1 never): its processes then are excused */
    int back_procs;
    int idle_runs;           /* passes in a row it idled while another host waited (starve) */
} vpool_t;

typedef struct {
    char id[64];
    vpool_t p[MAX_POOLS_PER_HOST];
    int np;
    bool dead;
    int64_t partitioned_until; /* the pass its partition ends, 0 = connected */
    bool back;               /* its partition ended: its next renewal is not a late one */
} vhost_t;

typedef struct {
    int budget;
    char *key;
    int free_runs;
} spool_t;

static struct {
    int hosts, pools, passes, interval, ttl, job, seed, port, stall_us;
} opt = {200, 50, 20, 500, 4000, 800, 1, 0, 0};

static struct {
    long passes, scripts, batches, deaths, partitions, backlog_changes, jobs, starts, retires;
    long budget_checks, over_budget, workers_over, untruthful, lapsed_renewals, late_renewals;
    long reuse_checks, reuse_failed, starve_failed;
    int starve_max, free_max;
    int64_t slot_passes, free_slot_passes;
    int64_t gone_max_ms, gone_sum_ms, gone_n;
    int64_t pass_max_ms;
} st;

static unsigned job_rng; /* jobs only: events stay the seed's */
static long cur_pass;           /* the pass under way */
static int64_t *pass_end;       /* monotonic ms each pass (its hosts' scripts) ended */

static int rnd(int n)
{
    return n > 0 ? rand() % n : 0;
}

/* Whether one of the host's first n pools is that one. */
static bool pool_taken(const vhost_t *h, int n, int pool)
{
    for (int q = 0; q < n; q++)
        if (h->p[q].pool == pool) return true;
    return false;
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
        snprintf(h[i].id, sizeof h[i].id, "vhost%03d:%d:0", i, 1000 + i);
        h[i].np = 4 + rnd(MAX_POOLS_PER_HOST - 4);
        if (h[i].np > opt.pools) h[i].np = opt.pools;
        for (int j = 0; j < h[i].np; j++) {
            vpool_t *v = &h[i].p[j];
            v->pool = (i * 7 + j * 13 + rnd(3)) % opt.pools;
            for (int q = 0; q < j; q++)
                if (h[i].p[q].pool == v->pool) v->pool = (v->pool + 1 + q) % opt.pools;
            /* never twice on one host (one record per host and pool) */
            while (pool_taken(&h[i], j, v->pool)) v->pool = (v->pool + 1) % opt.pools;
            v->floor = rnd(4) == 0 && floors[v->pool] + 1 <= sp[v->pool].budget / 3 ? 1 : 0;
            floors[v->pool] += v->floor;
            v->max = 2 + rnd(10);
            v->backlog = rnd(2) ? 0 : 1 + rnd(500);
            v->renewed = true;
            v->back_pass = -1;
        }
    }
    free(floors);
}

/* budget: a host's processes when it renewed a lapsed record (pass b) are
 * excused through pass b + 3 and while passes start before the end of pass
 * b + 2 plus a job (the header says why). */
static bool excused_back(const vpool_t *v, long pass, int64_t pass_start)
{
    if (v->back_pass < 0) return false;
    if (pass <= v->back_pass + 3) return true;
    return pass_start < pass_end[v->back_pass + 2] + opt.job;
}

static bool connected(const vhost_t *h)
{
    return !h->dead && !h->partitioned_until;
}

static int busy_of(const vpool_t *v, bool retiring_too)
{
    int n = 0;
    for (int i = 0; i < v->nprocs; i++) n += v->procs[i].ends && (retiring_too || !v->procs[i].retiring);
    return n;
}

static int live_of(const vpool_t *v)
{
    int n = 0;
    for (int i = 0; i < v->nprocs; i++) n += !v->procs[i].retiring;
    return n;
}

static void proc_remove(vpool_t *v, int i)
{
    v->procs[i] = v->procs[--v->nprocs];
}

/* Jobs end (a retiring worker exits with its job); a connected host's idle
 * workers take the next ones. */
static void work(vhost_t *h, int64_t now)
{
    for (int j = 0; j < h->np; j++) {
        vpool_t *v = &h->p[j];
        for (int i = 0; i < v->nprocs;) {
            vproc_t *p = &v->procs[i];
            if (p->ends && p->ends <= now) {
                p->ends = 0;
                if (p->retiring) {
                    proc_remove(v, i);
                    continue;
                }
            }
            if (!p->ends && !p->retiring && v->backlog > 0 && connected(h)) {
                p->ends = now + 50 + rand_r(&job_rng) % (unsigned)(opt.job - 49);
                v->backlog--;
                st.jobs++;
            }
            i++;
        }
    }
}

/* The balancer's view of a pool, as monitor.c's fill_bal (size strategy;
 * no counts while partitioned: it holds still). */
static void fill_bal(const vhost_t *h, const vpool_t *v, bal_pool_t *x)
{
    *x = (bal_pool_t){.auto_mode = true, .min = v->floor, .max = v->max, .size_strategy = true, .pinned = -1,
                      .live = live_of(v), .busy = busy_of(v, false), .stopping = v->nprocs - live_of(v),
                      .backlog = v->backlog, .target = v->target, .below_since_ms = v->below_since,
                      .scale_down_delay = 0};
    if (!connected(h)) x->pinned = v->target, x->backlog = 0;
}

static budget_host_t me_of(const vhost_t *h, const vpool_t *v, const spool_t *sp)
{
    budget_host_t me = {.held = v->have_view ? v->view.held : 0, .floor = v->floor, .want = v->want,
                        .pressure = v->pressure, .budget = sp[v->pool].budget};
    snprintf(me.id, sizeof me.id, "%s", h->id);
    return me;
}

/* As budgeting.c's make_request. */
static void request(const vhost_t *h, vpool_t *v, const bal_pool_t *x, int room, const spool_t *sp, lease_req_t *r)
{
    int max = v->max < sp[v->pool].budget ? v->max : sp[v->pool].budget;
    v->want = budget_demand(balance_want(x), v->target, max, -1, room);
    v->pressure = budget_pressure(x->backlog, 0.4);
    budget_host_t me = me_of(h, v, sp);
    *r = (lease_req_t){.id = h->id, .ttl_ms = opt.ttl, .budget = me.budget, .floor = v->floor, .want = v->want,
                       .pressure = v->pressure, .keep = v->nprocs,
                       .claim = budget_share_of(v->have_view ? v->view.hosts : NULL, v->have_view ? v->view.n : 0, &me)};
}

/* As budgeting.c's settle_entry. */
static void settle(const vhost_t *h, vpool_t *v, const spool_t *sp, bool ok, int64_t now)
{
    if (ok) v->have_view = true, v->last_ok = now;
    v->renewed = ok;
    budget_host_t me = me_of(h, v, sp);
    budget_cap_in_t in = {.renewed = ok, .held = me.held, .share = v->share, .failing_ms = now - v->last_ok,
                          .ttl_ms = opt.ttl, .floor = v->floor, .target = v->target};
    v->cap = budget_settle(v->view.hosts, v->view.n, &me, &in);
    v->share = in.share;
}

/* As pool.c's maintain_pool: start while below the target and the cap
 * (retiring processes counted), stop idle workers first, retire busy ones. */
static void maintain(vpool_t *v)
{
    int live = live_of(v);
    while (live < v->target && v->nprocs < v->cap && v->nprocs < MAX_PROCS) {
        v->procs[v->nprocs++] = (vproc_t){0};
        live++;
        st.starts++;
    }
    for (int i = v->nprocs - 1; i >= 0 && live > v->target; i--)
        if (!v->procs[i].retiring && !v->procs[i].ends) proc_remove(v, i), live--;
    for (int i = 0; i < v->nprocs && live > v->target; i++)
        if (!v->procs[i].retiring) v->procs[i].retiring = true, live--, st.retires++;
}

/* Its record had lapsed when it renewed (the script's prior is -1): it
 * writes every process it runs, which the others may have been granted
 * meanwhile. Excused from this pass on (budget). */
static void lapsed_renewal(const vhost_t *h, vpool_t *v)
{
    st.lapsed_renewals++;
    if (!v->lapsed && !h->back) st.late_renewals++; /* its passes came further apart than the TTL */
    if (v->back_pass < 0 || !excused_back(v, cur_pass, mono_ms())) v->back_procs = 0;
    if (v->nprocs > v->back_procs) v->back_procs = v->nprocs;
    v->back_pass = cur_pass;
    v->lapsed = false;
}

/* One virtual master's balance pass. */
static void host_pass(vhost_t *h, spool_t *sp, rconn_t *c, int64_t now)
{
    char *keys[MAX_POOLS_PER_HOST];
    lease_req_t reqs[MAX_POOLS_PER_HOST];
    lease_view_t views[MAX_POOLS_PER_HOST];
    lease_status_t ls[MAX_POOLS_PER_HOST];
    bal_pool_t b[MAX_POOLS_PER_HOST], dry[MAX_POOLS_PER_HOST];
    memset(views, 0, sizeof views);
    memset(ls, 0, sizeof ls);
    for (int j = 0; j < h->np; j++) fill_bal(h, &h->p[j], &b[j]);
    memcpy(dry, b, sizeof b);
    balance(dry, h->np, 1000, now);
    for (int j = 0; j < h->np; j++) {
        keys[j] = sp[h->p[j].pool].key;
        request(h, &h->p[j], &b[j], dry[j].target, sp, &reqs[j]);
    }
    if (connected(h) && lease_batch(c, keys, reqs, h->np, views, ls) >= 0) {
        st.batches++;
        st.scripts += h->np;
    }
    for (int j = 0; j < h->np; j++) {
        vpool_t *v = &h->p[j];
        if (ls[j].ok) {
            if (v->have_view && views[j].prior < 0) lapsed_renewal(h, v);
            lease_view_free(&v->view);
            v->view = views[j];
        }
        settle(h, v, sp, ls[j].ok, now);
        budget_bound(&b[j], v->cap);
    }
    if (connected(h)) h->back = false;
    balance(b, h->np, 1000, now);
    for (int j = 0; j < h->np; j++) {
        h->p[j].target = b[j].target;
        h->p[j].below_since = b[j].below_since_ms;
        maintain(&h->p[j]);
    }
}

typedef struct {
    int pool, host;
    int64_t at;              /* monotonic ms of the death */
    bool gone;               /* its record is no longer live */
} death_t;

/* reuse: at its death, the host's records lapse within the TTL (Redis
 * time: the expiry the script wrote at its last renewal). */
static void died(vhost_t *h, int i, spool_t *sp, rconn_t *c, death_t *d, int *nd, int maxd)
{
    h[i].dead = true;
    st.deaths++;
    for (int j = 0; j < h[i].np; j++) {
        vpool_t *v = &h[i].p[j];
        v->nprocs = 0; /* the machine is gone, its workers too */
        lease_view_t lv = {0};
        if (lease_list(c, sp[v->pool].key, &lv) < 0) continue;
        int k = budget_find(lv.hosts, lv.n, h[i].id);
        if (k >= 0) {
            st.reuse_checks++;
            if (lv.hosts[k].expiry - lv.now_ms > opt.ttl) {
                st.reuse_failed++;
                fprintf(stderr, "pool%d: dead %s's record lapses %lld ms after its death\n", v->pool, h[i].id,
                        (long long)(lv.hosts[k].expiry - lv.now_ms));
            }
            if (*nd < maxd) d[(*nd)++] = (death_t){v->pool, i, mono_ms(), false};
        }
        lease_view_free(&lv);
    }
}

/* Deaths, partitions (in passes) and backlog changes, from the seed alone. */
static void events(vhost_t *h, spool_t *sp, rconn_t *c, death_t *d, int *nd, int maxd, long pass)
{
    for (int i = 0; i < opt.hosts; i++)
        if (h[i].partitioned_until && pass >= h[i].partitioned_until) h[i].partitioned_until = 0, h[i].back = true;
    if (rnd(10) < 3) {
        int i = rnd(opt.hosts);
        if (connected(&h[i])) died(h, i, sp, c, d, nd, maxd);
    }
    if (rnd(10) < 2) {
        int i = rnd(opt.hosts);
        if (connected(&h[i])) {
            int ttl_passes = opt.ttl / opt.interval;
            h[i].partitioned_until = pass + ttl_passes / 2 + 1 + rnd(2 * ttl_passes);
            st.partitions++;
        }
    }
    for (int k = 0; k < opt.hosts / 10; k++) {
        vhost_t *x = &h[rnd(opt.hosts)];
        x->p[rnd(x->np)].backlog = rnd(2) ? 0 : 1 + rnd(500);
        st.backlog_changes++;
    }
}

static vpool_t *host_pool(vhost_t *h, int pool)
{
    for (int j = 0; j < h->np; j++)
        if (h->p[j].pool == pool) return &h->p[j];
    return NULL;
}

/* budget: the processes and the ledger, but for the floors of partitioned
 * hosts whose record lapsed (and a few passes after they are back);
 * every connected host's record at least its processes. */
static void check_budget(vhost_t *h, const spool_t *sp, int k, const lease_view_t *lv, int64_t pass_start)
{
    int64_t held = 0, procs = 0, excused = 0;
    for (int i = 0; i < lv->n; i++) held += lv->hosts[i].held;
    for (int i = 0; i < opt.hosts; i++) {
        vpool_t *v = host_pool(&h[i], k);
        if (!v || h[i].dead) continue;
        procs += v->nprocs;
        int r = budget_find(lv->hosts, lv->n, h[i].id);
        if (h[i].partitioned_until && r < 0) v->lapsed = true; /* until it renews again */
        /* late: connected, its record lapsed since it last renewed more than half the TTL ago (a pass of all
         * hosts took longer than that): it writes its processes again at its next pass (back_pass) */
        bool late = connected(&h[i]) && r < 0 && v->have_view && mono_ms() - v->last_ok > opt.ttl / 2;
        if (v->lapsed) excused += v->floor;
        else if (late) excused += v->nprocs;
        else if (excused_back(v, cur_pass, pass_start)) excused += v->back_procs;
        if (connected(&h[i]) && v->renewed && !late && (r < 0 || lv->hosts[r].held < v->nprocs)) {
            st.untruthful++;
            fprintf(stderr, "pool%d: %s runs %d, its record holds %d\n", k, h[i].id, v->nprocs,
                    r < 0 ? -1 : lv->hosts[r].held);
        }
    }
    st.budget_checks++;
    if (held > sp[k].budget + excused) {
        st.over_budget++;
        fprintf(stderr, "pool%d: leases hold %lld > budget %d + excused %lld\n", k, (long long)held,
                sp[k].budget, (long long)excused);
    }
    if (procs > sp[k].budget + excused) {
        st.workers_over++;
        fprintf(stderr, "pool%d: %lld processes > budget %d + excused %lld\n", k, (long long)procs,
                sp[k].budget, (long long)excused);
    }
}

/* starve: a connected host holds slots it neither runs a busy worker in
 * nor wants, while another waits below its fair share, more than
 * STARVE_PASSES passes in a row. Also measured (not a check): how many
 * passes in a row slots stay free while a host waits (free_wait_max). */
static void check_starve(vhost_t *h, spool_t *sp, int k, const lease_view_t *lv)
{
    int64_t held = 0;
    bool waits = false;
    for (int i = 0; i < lv->n; i++) {
        const budget_host_t *x = &lv->hosts[i];
        held += x->held;
        waits |= x->want > x->held && budget_share_of(lv->hosts, lv->n, x) > x->held;
    }
    for (int i = 0; i < lv->n; i++) {
        const budget_host_t *x = &lv->hosts[i];
        int hi = -1;
        if (sscanf(x->id, "vhost%d", &hi) != 1 || hi < 0 || hi >= opt.hosts || !connected(&h[hi])) continue;
        vpool_t *v = host_pool(&h[hi], k);
        int need = busy_of(v, true) > x->floor ? busy_of(v, true) : x->floor;
        if (x->want > need) need = x->want;
        v->idle_runs = waits && x->held > need ? v->idle_runs + 1 : 0;
        if (v->idle_runs > st.starve_max) st.starve_max = v->idle_runs;
        if (v->idle_runs == STARVE_PASSES + 1) {
            st.starve_failed++;
            fprintf(stderr, "pool%d: %s idled %d passes (held %d, want %d, busy %d) while another host waited\n", k,
                    x->id, STARVE_PASSES + 1, x->held, x->want, busy_of(v, true));
        }
    }
    spool_t *s = &sp[k];
    s->free_runs = waits && held < s->budget ? s->free_runs + 1 : 0;
    st.slot_passes += s->budget;
    if (waits && held < s->budget) st.free_slot_passes += s->budget - held;
    if (s->free_runs > st.free_max) st.free_max = s->free_runs;
}

/* How long a dead host's records stayed live (the figures). */
static void measure_gone(rconn_t *c, const vhost_t *h, const spool_t *sp, death_t *d, int nd)
{
    for (int i = 0; i < nd; i++) {
        if (d[i].gone) continue;
        lease_view_t lv = {0};
        if (lease_list(c, sp[d[i].pool].key, &lv) < 0) continue;
        if (budget_find(lv.hosts, lv.n, h[d[i].host].id) < 0) {
            d[i].gone = true;
            int64_t t = mono_ms() - d[i].at;
            st.gone_sum_ms += t;
            st.gone_n++;
            if (t > st.gone_max_ms) st.gone_max_ms = t;
        }
        lease_view_free(&lv);
    }
}

static void check_all(rconn_t *c, vhost_t *h, spool_t *sp, int64_t pass_start)
{
    for (int k = 0; k < opt.pools; k++) {
        lease_view_t lv = {0};
        if (lease_list(c, sp[k].key, &lv) < 0) {
            fprintf(stderr, "pool%d: cannot read the leases: %s\n", k, c->last_error);
            st.over_budget++;
            continue;
        }
        check_budget(h, sp, k, &lv, pass_start);
        check_starve(h, sp, k, &lv);
        lease_view_free(&lv);
    }
}

static void parse_args(int argc, char **argv)
{
    static const struct option lo[] = {{"port", 1, 0, 'p'},        {"hosts", 1, 0, 'H'},  {"pools", 1, 0, 'P'},
                                       {"passes", 1, 0, 'n'},      {"ttl-ms", 1, 0, 't'}, {"job-ms", 1, 0, 'j'},
                                       {"interval-ms", 1, 0, 'i'}, {"seed", 1, 0, 'S'},   {"host-stall-us", 1, 0, 's'},
                                       {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int v = atoi(optarg);
        switch (o) {
        case 'p': opt.port = v; break;
        case 'H': opt.hosts = v; break;
        case 'P': opt.pools = v; break;
        case 'n': opt.passes = v; break;
        case 't': opt.ttl = v; break;
        case 'j': opt.job = v; break;
        case 'i': opt.interval = v; break;
        case 'S': opt.seed = v; break;
        case 's': opt.stall_us = v; break;
        default: exit(2);
        }
    }
    if (!opt.port || opt.hosts < 2 || opt.hosts > 1000 || opt.pools < 1 || opt.interval < 10 ||
        opt.ttl < 2 * opt.interval || opt.job < 50 || opt.job + opt.interval >= opt.ttl / 2 ||
        opt.stall_us < 0 || opt.stall_us > 100000) {
        fprintf(stderr, "usage: budget-sim --port P [--hosts N (2..1000)] [--pools N] [--passes N] [--interval-ms MS] "
                        "[--ttl-ms MS (>= 2 intervals)] [--job-ms MS (50.., job + interval < TTL/2)] [--seed N] "
                        "[--host-stall-us US (0..100000)]\n");
        exit(2);
    }
}

static long failures(void)
{
    return st.over_budget + st.workers_over + st.untruthful + st.reuse_failed + st.starve_failed;
}

static void report(void)
{
    printf("{\"seed\":%d,\"hosts\":%d,\"pools\":%d,\"passes\":%ld,\"interval_ms\":%d,\"ttl_ms\":%d,\"job_ms\":%d,"
           "\"scripts\":%ld,\"batches\":%ld,\"scripts_per_host_pass\":%.2f,\"jobs\":%ld,\"starts\":%ld,\"retires\":%ld,\"deaths\":%ld,"
           "\"partitions\":%ld,\"backlog_changes\":%ld,\"budget_checks\":%ld,\"over_budget\":%ld,"
           "\"workers_over\":%ld,\"untruthful\":%ld,\"lapsed_renewals\":%ld,\"late_renewals\":%ld,\"reuse_checks\":%ld,\"reuse_failed\":%ld,"
           "\"gone_mean_ms\":%lld,\"gone_max_ms\":%lld,\"starve_max\":%d,\"starve_failed\":%ld,\"free_wait_max\":%d,\"free_while_waiting_pct\":%.2f,"
           "\"pass_max_ms\":%lld,\"failed\":%ld}\n",
           opt.seed, opt.hosts, opt.pools, st.passes, opt.interval, opt.ttl, opt.job, st.scripts, st.batches,
           st.batches ? (double)st.scripts / (double)st.batches : 0.0, st.jobs, st.starts, st.retires, st.deaths, st.partitions,
           st.backlog_changes, st.budget_checks, st.over_budget, st.workers_over, st.untruthful, st.lapsed_renewals, st.late_renewals, st.reuse_checks,
           st.reuse_failed, (long long)(st.gone_n ? st.gone_sum_ms / st.gone_n : 0), (long long)st.gone_max_ms,
           st.starve_max, st.starve_failed, st.free_max,
           st.slot_passes ? 100.0 * (double)st.free_slot_passes / (double)st.slot_passes : 0.0, (long long)st.pass_max_ms,
           failures());
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    srand((unsigned)opt.seed);
    job_rng = (unsigned)opt.seed * 7919u;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "sim%d:", opt.seed);
    redis_conf_t rc = {.name = "sim", .host = "127.0.0.1", .port = opt.port, .prefix = prefix, .timeout = 5};
    rconn_t *c = rconn_new(&rc);
    vhost_t *h = xcalloc((size_t)opt.hosts, sizeof *h);
    spool_t *sp = xcalloc((size_t)opt.pools, sizeof *sp);
    int maxd = opt.passes * MAX_POOLS_PER_HOST, nd = 0;
    death_t *deaths = xcalloc((size_t)maxd + 1, sizeof *deaths);
    pass_end = xcalloc((size_t)opt.passes + 1, sizeof *pass_end);
    setup(h, sp, c);
    int *order = xcalloc((size_t)opt.hosts, sizeof *order);
    for (int i = 0; i < opt.hosts; i++) order[i] = i;
    int64_t next = mono_ms();
    for (long pass = 0; pass < opt.passes; pass++, next += opt.interval) {
        int64_t now = mono_ms();
        if (next > now) usleep((useconds_t)(next - now) * 1000);
        now = mono_ms();
        cur_pass = pass;
        events(h, sp, c, deaths, &nd, maxd, pass);
        for (int i = 0; i < opt.hosts; i++)
            if (!h[i].dead) work(&h[i], now);
        for (int i = opt.hosts - 1; i > 0; i--) { /* a new order each pass, from the seed */
            int j = rnd(i + 1), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int k = 0; k < opt.hosts; k++)
            if (!h[order[k]].dead) {
                host_pass(&h[order[k]], sp, c, mono_ms());
                if (opt.stall_us) usleep((useconds_t)opt.stall_us);
            }
        st.passes++;
        pass_end[pass] = mono_ms();
        if (pass_end[pass] - now > st.pass_max_ms) st.pass_max_ms = pass_end[pass] - now;
        measure_gone(c, h, sp, deaths, nd);
        check_all(c, h, sp, now);
    }
    report();
    for (int i = 0; i < opt.hosts; i++)
        for (int j = 0; j < h[i].np; j++) lease_view_free(&h[i].p[j].view);
    for (int k = 0; k < opt.pools; k++) free(sp[k].key);
    free(h), free(sp), free(deaths), free(order), free(pass_end);
    rconn_free(c);
    return failures() ? 1 : 0;
}
