/*
 * limits_sim.c - the fleet-wide limits (issue 33) at scale: many virtual
 * hosts with a few workers each against a real redis-server, in real time
 * (slots lapse and buckets refill by Redis's clock), with random host
 * kills, partitions (Redis out of reach) and job run times drawn at random.
 *
 *   limits-sim --port P [--hosts 200] [--classes 50] [--seconds 6]
 *              [--ttl-ms 2000] [--retry-after 8] [--seed 1]
 *
 * Every virtual worker takes qpool's own path: its limits are chosen by
 * wlimits_init from a qconf_t's `limits` (the ones that apply to its pool's
 * queues, keys from limit_key_id), each pop is queue_append_pop /
 * queue_read_pop / queue_parse_pop with pop_args_t.limits and a fresh slot
 * token from wlimits_for_pop (the limited pop script and argv qpool builds),
 * a running job's slots are renewed with qlimit_beat (the BEAT script) and
 * given back with wlimits_end (END, skipped when the pop named no slot),
 * the job acked with queue_append_ack. Jobs are Laravel-shaped payloads
 * (payload_build) pushed with queue_append_push. Only the slot TTL differs
 * from a real worker's: --ttl-ms instead of 15 s (the script takes it as an
 * argument), renewals every TTL/3 instead of every 5 s, so that lapses
 * happen within seconds. A worker polls again 100..300 ms after a pop that
 * found nothing to run, as worker.c's limit_wait does. It does not extend
 * its job's reservation (a real worker does, while connected): retry_after
 * (8 s) outlasts the longest job and partition together (3 s + 3 s).
 *
 * Classes: App\Jobs\C00 .. C49, class k on queue q(k mod 5). Limits: k 0-19
 * concurrency 1..8; k 20-31 rate 5..30/s with a burst of 1..5; k 32-35 both;
 * k 37-39 and 41-47 but 45 fractional rates (2.6/s, 40/m, 100/m, 5.8/s, 4.7/s
 * burst 2, 3.7/s, 7.9/s, 9.6/s burst 3, 6.6/s; else burst 1) pushed in batches;
 * C40 on q0 concurrency 3 (a class on a queue); q4 concurrency 30 and q3
 * rate 150/s burst 20 (queue limits); the others none. A tenth of the jobs
 * of concurrency-limited classes run 2 to 3 s (longer than the TTL, so that
 * a partition can outlast a running job's slot), the others 30 to 600 ms.
 *
 * Events, one pass every 500 ms during --seconds (as many passes on a slow
 * machine, late), drawn from the seed: a host is killed with probability
 * 0.3, and at the first pass until one is (how many draws come before a
 * pass's depends on the machine's speed: a run with none had nothing to
 * check; its workers vanish with their jobs: no END, no ack; it stays dead);
 * 1 or 2 hosts are partitioned for 1 to 3 s (no pop, no renewal, no ack or
 * END: a job that ends meanwhile owes them until it is back), one of them,
 * when there is one, a host whose job holds a slot and runs longer than the
 * TTL yet (which host that is depends on what runs: it exercises the
 * excuse below). Then a drain: no pushes, kills or partitions, until every
 * job has run (the killed ones come back after retry_after; 60 s at most).
 *
 * Invariants, from the simulation's own records of what runs:
 *   concurrency  at every pop and every tick, per concurrency limit, the
 *                running jobs under it (popped and not yet ended) never
 *                exceed N, but for excused jobs: a running job is excused
 *                once its worker has not renewed its slot for the TTL less
 *                50 ms (counted from the send of its last successful pop or
 *                beat: Redis took the slot after that send, so the slot
 *                cannot lapse earlier; the 50 ms cover the monotonic clock
 *                against Redis's TIME), or once a beat found its slot gone.
 *                That is docs/operations.md's bound: a worker that cannot
 *                reach Redis for the TTL while its job runs loses its slot
 *                and the limit may be exceeded until it is back. Excused
 *                overlaps are counted apart (partitioned: its host was cut
 *                off since the renewal; late: its beats came further apart
 *                than the TTL, a slow machine). Also each pass: qlimit_read's
 *                slots in use never exceed N (Redis's view);
 *   rate         per rate limit, the Redis times of its pops (the bucket's
 *                ts, which the pop that took the token wrote, read right
 *                after it on the same connection): no window of 1 s holds
 *                more than rate + burst;
 *   attempts     a popped payload's attempts equal the times the simulation
 *                popped that job before (none burned while it waited), and
 *                its reserved copy's are one more;
 *   order        first pops of a class come in push order (queue order
 *                within its class);
 *   starve       every 250 ms the first 50 ready jobs of each queue (what a
 *                limited pop looks at) are read; a class with a job there
 *                makes progress when its first such job is popped or moves
 *                up (a job ahead of it was popped). Bound: a pop takes the
 *                first job in queue order whose limits have room; a full
 *                limit gets room when a running job ends (at most the
 *                longest job, 3 s), when an unrenewed slot lapses (at most
 *                the TTL) or a token comes (1/rate <= 0.2 s here); an idle
 *                worker polls within 300 ms. So no class may wait longer
 *                than max(long job, TTL) + 0.2 s + 0.3 s + 1 s of scan and
 *                tick slack -- and, on a slow machine, for more than 10
 *                ticks: both must be exceeded for a failure. Tighter: that
 *                first job is never held while every limit of its class has
 *                room (qlimit_read: a slot free and a token) for 750 ms and
 *                10 ticks: any pop of its queue in between either takes it
 *                or a job ahead of it (which moves it up), and idle workers
 *                poll every 100..300 ms; each scan resets it when a limit
 *                was full;
 *   once         a job popped again while an earlier run of it is active or
 *                done is a failure, unless that run's reservation had
 *                expired (retry_after, Laravel's rule: counted apart); a
 *                killed host's runs are counted as killed, their jobs come
 *                back by retry_after; at the end every job has run and the
 *                queues, :reserved and the slots are empty;
 *   reuse        at a kill, each slot its running jobs hold lapses within
 *                the TTL (the run set's score, Redis time).
 * It prints one JSON object of figures and failure counts, and exits 1 if
 * any check failed. Run by tests/integration/test_limits_sim.py.
 */
#include "config/config.h"
#include "config/limits.h"
#include "core/util.h"
#include "redis/payload.h"
#include "redis/qlimit.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "worker/wlimits.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NQ 5
#define NPOOLS 10
#define MAXW 3
#define MAXCLS 64
#define MAXLIM 80
#define TICK_MS 50
#define PASS_MS 500
#define SCAN_MS 250
#define CLOCK_MARGIN_MS 50
#define JOB_MIN_MS 30
#define JOB_MAX_MS 600
#define LONG_MIN_MS 2000
#define LONG_MAX_MS 3000
#define POLL_MIN_MS 100
#define POLL_SPAN_MS 200
#define STARVE_TICKS 10
#define HELD_BOUND_MS 750

typedef struct {
    int cls;
    int pops, done, active;
    int64_t until;           /* wall s its last reservation expires (retry_after) */
} sjob_t;

typedef struct {
    wlimits_t wl;            /* qpool's: its limits and the slot token of its last pop */
    int pool;
    int job;                 /* running, -1 none */
    char *reserved;          /* its :reserved member while running or owed */
    size_t reslen;
    int qidx;
    int64_t ends, next_pop, next_beat, renew_sent, last_migrate;
    bool lost;               /* a beat found a slot gone */
    bool cut;                /* its host was partitioned since its last renewal */
    bool owed;               /* it ended while partitioned: ack and END owed */
    int owed_cls;
} vworker_t;

typedef struct {
    vworker_t w[MAXW];
    int nw, pool;
    bool dead;
    int64_t part_until;      /* monotonic ms its partition ends, 0 connected */
} vhost_t;

typedef struct {
    char name[32];
    int queue;
    int lims[8], nlims, nconc;
    double push_per_s, credit;
    double batch_rate;       /* > 0: pushed in batches (fractional rates) */
    int64_t next_batch;      /* monotonic ms of its next batch */
    int long_share;          /* % of its jobs that run long */
    long last_first;         /* the last job popped first (order) */
    int head_job, head_pos;  /* its first job among the first 50 ready, -1 none */
    int64_t since_ms;
    long since_tick;
    bool starved;
    int64_t room_ms;         /* since when its head has been held with room in its limits, -1 not */
    long room_tick;
    bool room_failed;
} sclass_t;

typedef struct {
    limit_conf_t conf;
    char *bucket;
    int64_t *ts;             /* Redis ms of its pops (rate) */
    long nts, cap, lo;
    int running, excused, excused_cut;
    bool room;               /* the last read: a slot and a token free */
} slim_t;

typedef struct {
    queue_set_t qs;
    pool_conf_t pc;
} spool_t;

static struct {
    int hosts, classes, seconds, ttl, retry_after, seed, port;
} opt = {200, 50, 6, 2000, 8, 1, 0};

static struct {
    long jobs, pushes, pops, pops_job, pops_blocked, pops_empty, acks, ack_lost, ends, beats, beat_lost, reads;
    long kills, killed_runs, killed_owed, partitions, excused_cut, excused_late, redis_checks, scans;
    long over_limit, redis_over, rate_over, attempts_bad, order_bad, starve_failed, dup_unexplained,
        expired_reruns, incomplete, leftover, held_failed, reuse_checks, reuse_failed, errors, ticks, rate_at_bound;
    int64_t starve_max_ms, held_max_ms, window_max_excess, run_ms, last_first_done_ms, last_done_ms;
    int max_running_long;
} st;

static vhost_t *hosts;
static spool_t pools[NPOOLS];
static sclass_t cls[MAXCLS];
static slim_t lims[MAXLIM];
static int nlims;
static qconf_t conf;
static qlimits_t all;        /* every limit, for qlimit_read */
static sjob_t *jobs;
static long njobs, jobs_cap;
static rconn_t *c;
static char prefix[32];
static unsigned job_rng;     /* run times and polls; events stay the seed's */
static int beat_ms;
static int64_t run_start;

static int rnd(int n)
{
    return n > 0 ? rand() % n : 0;
}

static int jrnd(int n)
{
    return n > 0 ? (int)(rand_r(&job_rng) % (unsigned)n) : 0;
}

static bool connected(const vhost_t *h)
{
    return !h->dead && !h->part_until;
}

/* ------------------------------------------------------------ setup */

static void add_limit(const char *cname, int queue, int conc, double rate, int burst)
{
    slim_t *l = &lims[nlims++];
    char q[8], r[32];
    snprintf(q, sizeof q, "q%d", queue);
    snprintf(r, sizeof r, "%g/s", rate);
    l->conf = (limit_conf_t){.class_name = cname ? xstrdup(cname) : NULL, .queue = queue >= 0 ? xstrdup(q) : NULL,
                             .concurrency = conc, .rate = rate > 0 ? xstrdup(r) : NULL, .rate_per_s = rate,
                             .burst = rate > 0 ? burst : 0};
    char *id = limit_key_id(&l->conf);
    l->bucket = xasprintf("%sqpool:limit:%s:bucket", prefix, id);
    qlimits_add(&all, prefix, id, l->conf.class_name, l->conf.queue, conc, rate, burst);
    free(id);
}

static bool limit_matches(const slim_t *l, int k)
{
    char q[8];
    snprintf(q, sizeof q, "q%d", cls[k].queue);
    return (!l->conf.queue || !strcmp(l->conf.queue, q)) && (!l->conf.class_name || !strcmp(l->conf.class_name, cls[k].name));
}

/* Each queue limit's classes pushed at half its rate at most (a job lasts 0.55 s on average). */
static void fit_queue_limits(void)
{
    for (int i = 0; i < nlims; i++) {
        const limit_conf_t *l = &lims[i].conf;
        if (l->class_name) continue;
        double cap = l->concurrency ? l->concurrency / 0.55 : 1e9, sum = 0;
        if (l->rate_per_s && l->rate_per_s < cap) cap = l->rate_per_s;
        for (int k = 0; k < opt.classes; k++) sum += limit_matches(&lims[i], k) ? cls[k].push_per_s : 0;
        for (int k = 0; k < opt.classes && sum > 0.5 * cap; k++)
            if (limit_matches(&lims[i], k)) cls[k].push_per_s *= 0.5 * cap / sum;
    }
}

/* A fractional rate's class, pushed in batches after lulls (push_batches):
 * the pop after a lull of 1.5 to 3 tokens keeps the most lateness, and the
 * batch's backlog then takes every token of the next second (the window
 * that showed a fixed half token above rate + burst). */
static void add_frac_limit(sclass_t *s, double rate, int burst)
{
    add_limit(s->name, -1, 0, rate, burst);
    s->batch_rate = rate;
}

static void setup_classes(void)
{
    for (int k = 0; k < opt.classes; k++) {
        sclass_t *s = &cls[k];
        snprintf(s->name, sizeof s->name, "App\\Jobs\\C%02d", k);
        s->queue = k % NQ;
        s->last_first = -1;
        s->head_job = -1;
        s->room_ms = -1;
        if (k < 20) add_limit(s->name, -1, 1 + k % 8, 0, 0);
        else if (k < 32) add_limit(s->name, -1, 0, 5 + (k % 6) * 5, 1 + k % 5);
        else if (k < 36) add_limit(s->name, -1, 2 + k % 3, 10, 3);
        else if (k == 37) add_frac_limit(s, 2.6, 1);
        else if (k == 38) add_frac_limit(s, 40.0 / 60, 1); /* "40/m" */
        else if (k == 39) add_frac_limit(s, 100.0 / 60, 1); /* "100/m" */
        else if (k == 41) add_frac_limit(s, 5.8, 1);
        else if (k == 42) add_frac_limit(s, 4.7, 2);
        else if (k == 43) add_frac_limit(s, 3.7, 1);
        else if (k == 44) add_frac_limit(s, 7.9, 1);
        else if (k == 46) add_frac_limit(s, 9.6, 3);
        else if (k == 47) add_frac_limit(s, 6.6, 1);
    }
    if (opt.classes > 40) add_limit(cls[40].name, 0, 3, 0, 0);
    add_limit(NULL, 4, 30, 0, 0);
    add_limit(NULL, 3, 0, 150, 20);
    for (int k = 0; k < opt.classes; k++) {
        sclass_t *s = &cls[k];
        double cap = 1e9;
        for (int i = 0; i < nlims; i++) {
            if (!limit_matches(&lims[i], k)) continue;
            s->lims[s->nlims++] = i;
            if (lims[i].conf.concurrency) s->nconc++, s->long_share = 10;
            if (lims[i].conf.concurrency && lims[i].conf.concurrency / 0.55 < cap) cap = lims[i].conf.concurrency / 0.55;
            if (lims[i].conf.rate_per_s && lims[i].conf.rate_per_s < cap) cap = lims[i].conf.rate_per_s;
        }
        s->push_per_s = cap < 1e9 ? 0.5 * cap : 12; /* below its limit: the drain ends */
        if (s->batch_rate > 0) s->push_per_s = 0; /* push_batches */
    }
    fit_queue_limits();
    conf.limits = xcalloc((size_t)nlims, sizeof *conf.limits);
    for (int i = 0; i < nlims; i++) conf.limits[i] = lims[i].conf; /* shallow: lims own the strings */
    conf.nlimits = nlims;
}

/* Pools: q0..q4 alone, then each with the next one after it (priority order). */
static void setup_pools(void)
{
    for (int p = 0; p < NPOOLS; p++) {
        char *names[2];
        int n = p < NQ ? 1 : 2;
        names[0] = xasprintf("q%d", p % NQ);
        if (n == 2) names[1] = xasprintf("q%d", (p + 1) % NQ);
        queue_set_init(&pools[p].qs, prefix, names, n);
        pools[p].pc.queues = xcalloc(3, sizeof(char *));
        for (int i = 0; i < n; i++) pools[p].pc.queues[i] = names[i];
        pools[p].pc.nqueues = n;
    }
}

static void setup_hosts(void)
{
    hosts = xcalloc((size_t)opt.hosts, sizeof *hosts);
    for (int i = 0; i < opt.hosts; i++) {
        vhost_t *h = &hosts[i];
        h->pool = rnd(NPOOLS);
        h->nw = 2 + rnd(MAXW - 1);
        for (int j = 0; j < h->nw; j++) {
            vworker_t *w = &h->w[j];
            wlimits_init(&w->wl, &conf, &pools[h->pool].pc, prefix, false);
            snprintf(w->wl.ls.ttl, sizeof w->wl.ls.ttl, "%d", opt.ttl); /* the only change: a short TTL */
            w->pool = h->pool;
            w->job = -1;
        }
    }
}

/* ------------------------------------------------------------ pushes */

static long new_job(int k)
{
    if (njobs == jobs_cap) {
        jobs_cap = jobs_cap ? jobs_cap * 2 : 4096;
        jobs = xrealloc(jobs, sizeof *jobs * (size_t)jobs_cap);
    }
    jobs[njobs] = (sjob_t){.cls = k};
    return njobs++;
}

/* n jobs, classes drawn by their push rates. */
static void push_some(const int *which, int n)
{
    if (!n) return;
    for (int i = 0; i < n; i++) {
        int k = which[i];
        long id = new_job(k);
        char data[160];
        snprintf(data, sizeof data, "{\"commandName\":\"App\\\\Jobs\\\\C%02d\",\"command\":\"O:8:\\\"stdClass\\\":0:{}\",\"simJob\":%ld}", k, id);
        payload_spec_t ps = {.job = "Illuminate\\Queue\\CallQueuedHandler@call", .display_name = cls[k].name,
                             .data_json = data, .max_tries = -1, .max_exceptions = -1, .timeout = -1};
        char *p = payload_build(&ps);
        queue_append_push(c, &pools[cls[k].queue].qs.q[0], p, strlen(p));
        free(p);
    }
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (rconn_read(c, -1, -1, &r) != RC_OK || r->type == REDIS_REPLY_ERROR) st.errors++;
        if (r) freeReplyObject(r);
    }
    st.pushes += n;
    st.jobs += n;
}

/* Each class's jobs for dt_ms, in a random interleaved order. */
static void push_tick(double dt_ms)
{
    int which[4096], n = 0;
    for (int k = 0; k < opt.classes; k++) {
        cls[k].credit += cls[k].push_per_s * dt_ms / 1000.0;
        while (cls[k].credit >= 1 && n < (int)ARRAY_LEN(which)) which[n++] = k, cls[k].credit -= 1;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = jrnd(i + 1), t = which[i];
        which[i] = which[j], which[j] = t;
    }
    push_some(which, n);
}

/* The batch classes' jobs: floor(rate) + 4 at once, the next batch when
 * this one has drained and 1 to 3.5 tokens' time more has passed. */
static void push_batches(int64_t now)
{
    for (int k = 0; k < opt.classes; k++) {
        sclass_t *s = &cls[k];
        if (s->batch_rate <= 0 || now < s->next_batch) continue;
        int which[16], n = (int)s->batch_rate + 4;
        for (int i = 0; i < n; i++) which[i] = k;
        push_some(which, n);
        s->next_batch = now + (int64_t)(1000.0 * (n - 1 + 0.5 + 2.5 * jrnd(1000) / 1000.0) / s->batch_rate);
    }
}

/* ------------------------------------------------------------ checks */

static bool excusable(const vworker_t *w, int64_t now)
{
    return w->lost || now - w->renew_sent >= opt.ttl - CLOCK_MARGIN_MS;
}

/* concurrency: count the running jobs under limit i (the records) and the
 * excused ones; a failure when the others exceed N. */
static void check_limit(int i, int64_t now, const char *when)
{
    slim_t *l = &lims[i];
    int running = 0, excused = 0, cut = 0;
    for (int h = 0; h < opt.hosts; h++) {
        if (hosts[h].dead) continue;
        for (int j = 0; j < hosts[h].nw; j++) {
            const vworker_t *w = &hosts[h].w[j];
            if (w->job < 0 || !limit_matches(l, jobs[w->job].cls)) continue;
            running++;
            if (excusable(w, now)) excused++, cut += w->cut;
        }
    }
    l->running = running;
    if (running <= l->conf.concurrency) return;
    if (running - excused > l->conf.concurrency) {
        st.over_limit++;
        fprintf(stderr, "limit %d (%s %s) at %s: %d running, %d excused, concurrency %d\n", i,
                l->conf.queue ? l->conf.queue : "-", l->conf.class_name ? l->conf.class_name : "-", when, running,
                excused, l->conf.concurrency);
    } else if (cut >= running - l->conf.concurrency) {
        st.excused_cut++;
    } else {
        st.excused_late++;
    }
}

static void check_all_limits(int64_t now)
{
    for (int i = 0; i < nlims; i++)
        if (lims[i].conf.concurrency) check_limit(i, now, "tick");
}

/* The most pops a bucket allows in (t - 1 s, t] on Redis's ms: rate +
 * burst, whole (the lateness the pop keeps, lim_late, is capped per rate
 * so that a fractional rate keeps this bound too: QLIMIT_REFILL_LUA). */
static int64_t rate_bound(const slim_t *l)
{
    return (int64_t)(l->conf.rate_per_s + l->conf.burst + 1e-9);
}

/* rate: the Redis time of a pop under limit i; no 1 s window above rate_bound. */
static void rate_pop(int i, int64_t t)
{
    slim_t *l = &lims[i];
    if (l->nts == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->ts = xrealloc(l->ts, sizeof *l->ts * (size_t)l->cap);
    }
    l->ts[l->nts++] = t;
    while (l->lo < l->nts && l->ts[l->lo] <= t - 1000) l->lo++;
    long in = 0;
    for (long k = l->lo; k < l->nts; k++) in += l->ts[k] > t - 1000 && l->ts[k] <= t;
    int64_t allowed = rate_bound(l);
    if (in - allowed > st.window_max_excess) st.window_max_excess = in - allowed;
    st.rate_at_bound += in == allowed;
    if (in > allowed) {
        st.rate_over++;
        fprintf(stderr, "limit %d: %ld pops in the 1 s window ending at %lld > %lld (rate %g, burst %d)\n", i, in,
                (long long)t, (long long)allowed, l->conf.rate_per_s, l->conf.burst);
    }
}

/* The buckets' ts of the job's rate limits: the pop just before wrote them. */
static void read_rate_times(int k)
{
    int n = 0, which[8];
    for (int i = 0; i < cls[k].nlims; i++) {
        slim_t *l = &lims[cls[k].lims[i]];
        if (l->conf.rate_per_s <= 0) continue;
        const char *argv[] = {"HGET", l->bucket, "ts"};
        rconn_append(c, 3, argv, NULL);
        which[n++] = cls[k].lims[i];
    }
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        st.reads++;
        if (rconn_read(c, -1, -1, &r) == RC_OK && r->type == REDIS_REPLY_STRING) rate_pop(which[i], strtoll(r->str, NULL, 10));
        else st.errors++;
        if (r) freeReplyObject(r);
    }
}

static long job_of(const char *raw)
{
    const char *s = strstr(raw, "\"simJob\":");
    long id = s ? strtol(s + 9, NULL, 10) : -1;
    return id >= 0 && id < njobs ? id : -1;
}

static long attempts_of(const char *raw, size_t len)
{
    job_payload_t p;
    char err[128];
    if (payload_parse(raw, len, &p, err, sizeof err) < 0) return -1;
    long a = p.attempts;
    payload_free(&p);
    return a;
}

/* attempts, order and once, at a pop of job id. */
static void check_pop(long id, const pop_result_t *pr, int64_t wall)
{
    sjob_t *j = &jobs[id];
    long a = attempts_of(pr->raw, pr->rawlen), ar = attempts_of(pr->reserved, pr->reslen);
    if (a != j->pops || ar != a + 1) {
        st.attempts_bad++;
        fprintf(stderr, "job %ld: attempts %ld (reserved %ld) after %d pops\n", id, a, ar, j->pops);
    }
    sclass_t *s = &cls[j->cls];
    if (j->pops == 0) {
        if (id < s->last_first) {
            st.order_bad++;
            fprintf(stderr, "%s: job %ld started before job %ld, pushed after it\n", s->name, s->last_first, id);
        }
        s->last_first = id;
    }
    if (j->active || j->done) {
        if (wall >= j->until) st.expired_reruns++;
        else {
            st.dup_unexplained++;
            fprintf(stderr, "job %ld popped again (active %d, done %d) before its reservation expired\n", id,
                    j->active, j->done);
        }
    }
}

/* ------------------------------------------------------------ workers */

static void worker_started(vhost_t *h, vworker_t *w, pop_result_t *pr, int64_t sent, const pop_args_t *a)
{
    long id = job_of(pr->raw);
    st.pops_job++;
    if (id < 0) {
        st.errors++;
        fprintf(stderr, "a popped payload names no job of this run\n");
        return;
    }
    check_pop(id, pr, a->now);
    sjob_t *j = &jobs[id];
    j->pops++;
    j->active++;
    j->until = a->now + opt.retry_after;
    int64_t now = mono_ms();
    bool long_job = jrnd(100) < cls[j->cls].long_share;
    w->job = (int)id;
    w->reserved = pr->reserved, w->reslen = pr->reslen, pr->reserved = NULL;
    w->qidx = pr->qidx;
    w->ends = now + (long_job ? LONG_MIN_MS + jrnd(LONG_MAX_MS - LONG_MIN_MS) : JOB_MIN_MS + jrnd(JOB_MAX_MS - JOB_MIN_MS));
    w->renew_sent = sent;
    w->next_beat = now + beat_ms;
    w->lost = w->cut = false;
    wlimits_taken(&w->wl, now);
    wlimits_taken_keys(&w->wl, pr->lim_keys, pr->nlim_keys); /* as worker.c: the slots the pop named */
    read_rate_times(j->cls);
    for (int i = 0; i < cls[j->cls].nlims; i++)
        if (lims[cls[j->cls].lims[i]].conf.concurrency) check_limit(cls[j->cls].lims[i], mono_ms(), "pop");
    (void)h;
}

static void worker_pop(vhost_t *h, vworker_t *w, int64_t now)
{
    spool_t *p = &pools[w->pool];
    const char *token;
    const qlimits_t *lim = wlimits_for_pop(&w->wl, &token);
    pop_args_t a = {.limits = lim, .slot_token = token, .now = wall_s(), .retry_after = opt.retry_after,
                    .migrate = now - w->last_migrate >= 1000, .batch = 100, .connection = "redis",
                    .failed_limit = 1000, .want = 1};
    if (a.migrate) w->last_migrate = now;
    int64_t sent = mono_ms();
    redisReply *r = NULL;
    pop_result_t pr;
    w->next_pop = now + POLL_MIN_MS + jrnd(POLL_SPAN_MS);
    st.pops++;
    if (rconn_ensure(c) < 0 || !queue_append_pop(c, &p->qs, &a) || queue_read_pop(c, &p->qs, &a, &r) != RC_OK ||
        !queue_parse_pop(&p->qs, &a, r, &pr)) {
        st.errors++;
        if (r) freeReplyObject(r);
        return;
    }
    freeReplyObject(r);
    if (pr.kind == POP_JOB) worker_started(h, w, &pr, sent, &a);
    else if (pr.kind == POP_EMPTY && pr.limit_blocked) st.pops_blocked++;
    else if (pr.kind == POP_EMPTY) st.pops_empty++;
    else st.errors++;
    pop_result_free(&pr);
}

/* The ack and the slots given back (connected). */
static void worker_ack(vworker_t *w, int k)
{
    const qkeys_t *q = &pools[w->pool].qs.q[w->qidx];
    queue_append_ack(c, q, w->reserved, w->reslen);
    redisReply *r = NULL;
    st.acks++;
    if (rconn_read(c, -1, -1, &r) != RC_OK || r->type != REDIS_REPLY_INTEGER) st.errors++;
    else if (r->integer != 1) st.ack_lost++; /* its reservation had expired */
    if (r) freeReplyObject(r);
    if (cls[k].nconc) st.ends++;
    wlimits_end(&w->wl, c);
    free(w->reserved);
    w->reserved = NULL;
    w->owed = false;
}

static void worker_end(vhost_t *h, vworker_t *w)
{
    sjob_t *j = &jobs[w->job];
    j->active--;
    j->done++;
    int64_t at = mono_ms() - run_start;
    if (j->pops == 1 && at > st.last_first_done_ms) st.last_first_done_ms = at;
    if (at > st.last_done_ms) st.last_done_ms = at;
    int k = j->cls;
    w->job = -1;
    if (connected(h)) worker_ack(w, k);
    else w->owed = true, w->owed_cls = k;
}

static void worker_beat(vworker_t *w, int64_t now)
{
    w->next_beat = now + beat_ms;
    int want = cls[jobs[w->job].cls].nconc;
    if (!want) return;
    int64_t sent = mono_ms();
    int n = qlimit_beat(c, &w->wl.ls, w->wl.token, w->wl.xkeys, w->wl.nx);
    st.beats++;
    if (n == want) w->renew_sent = sent, w->cut = false;
    else if (n >= 0) w->lost = true, st.beat_lost++;
    else st.errors++;
}

static void host_step(vhost_t *h, int64_t now)
{
    for (int j = 0; j < h->nw; j++) {
        vworker_t *w = &h->w[j];
        if (!connected(h) && w->job >= 0) w->cut = true;
        if (w->job >= 0 && now >= w->ends) worker_end(h, w);
        if (!connected(h)) continue;
        if (w->owed) worker_ack(w, w->owed_cls);
        if (w->job >= 0 && now >= w->next_beat) worker_beat(w, now);
        if (w->job < 0 && now >= w->next_pop) worker_pop(h, w, now);
    }
}

/* ------------------------------------------------------------ events */

/* reuse: each slot of a killed worker's job lapses within the TTL (Redis time). */
static void reuse_check(vworker_t *w)
{
    redisReply *t = rconn_call(c, 1, (const char *[]){"TIME"}, NULL);
    if (!t || t->type != REDIS_REPLY_ARRAY || t->elements != 2) {
        st.errors++;
        if (t) freeReplyObject(t);
        return;
    }
    int64_t now = strtoll(t->element[0]->str, NULL, 10) * 1000 + strtoll(t->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(t);
    for (int i = 0; i < w->wl.ls.n; i++) {
        if (w->wl.ls.v[i].concurrency <= 0) continue;
        redisReply *r = rconn_call(c, 3, (const char *[]){"ZSCORE", w->wl.ls.v[i].run, w->wl.token}, NULL);
        if (r && r->type == REDIS_REPLY_STRING) {
            st.reuse_checks++;
            if (strtoll(r->str, NULL, 10) - now > opt.ttl) {
                st.reuse_failed++;
                fprintf(stderr, "a killed worker's slot lapses %lld ms after the kill\n",
                        (long long)(strtoll(r->str, NULL, 10) - now));
            }
        }
        if (r) freeReplyObject(r);
    }
}

static void kill_host(vhost_t *h)
{
    h->dead = true;
    st.kills++;
    for (int j = 0; j < h->nw; j++) {
        vworker_t *w = &h->w[j];
        if (w->job >= 0) {
            reuse_check(w);
            jobs[w->job].active--;
            st.killed_runs++;
            w->job = -1;
        }
        if (w->owed) st.killed_owed++, w->owed = false;
        FREE_ALL(w->reserved);
    }
}

/* A host one of whose jobs holds a concurrency slot and runs for longer
 * than the TTL yet (NULL: none), drawn at random: cut off, it exercises the
 * excuse. */
static vhost_t *outlasting(int64_t now)
{
    int start = rnd(opt.hosts);
    for (int n = 0; n < opt.hosts; n++) {
        vhost_t *h = &hosts[(start + n) % opt.hosts];
        for (int j = 0; connected(h) && j < h->nw; j++)
            if (h->w[j].job >= 0 && cls[jobs[h->w[j].job].cls].nconc && h->w[j].ends - now > opt.ttl) return h;
    }
    return NULL;
}

static void events(int64_t now)
{
    for (int i = 0; i < opt.hosts; i++)
        if (hosts[i].part_until && now >= hosts[i].part_until) hosts[i].part_until = 0;
    if (!st.kills || rnd(10) < 3) { /* the first pass always kills one: every run has a kill to check */
        vhost_t *h = &hosts[rnd(opt.hosts)];
        if (connected(h)) kill_host(h);
    }
    for (int n = 1 + rnd(2); n > 0; n--) {
        vhost_t *h = n == 1 ? outlasting(now) : &hosts[rnd(opt.hosts)];
        if (!h && !st.partitions) h = &hosts[rnd(opt.hosts)]; /* the first pass always cuts one: a run has one */
        if (!h || !connected(h)) continue;
        h->part_until = now + 1000 + rnd(2000);
        st.partitions++;
    }
}

/* ------------------------------------------------------------ starve */

/* The first 50 ready jobs of each queue: each class's first one. */
static void scan_heads(int *head, int *pos)
{
    for (int k = 0; k < opt.classes; k++) head[k] = -1, pos[k] = -1;
    for (int q = 0; q < NQ; q++) {
        const char *argv[] = {"LRANGE", pools[q].qs.q[0].ready, "0", "49"};
        redisReply *r = rconn_call(c, 4, argv, NULL);
        if (!r || r->type != REDIS_REPLY_ARRAY) {
            st.errors++;
            if (r) freeReplyObject(r);
            continue;
        }
        for (size_t i = 0; i < r->elements; i++) {
            long id = r->element[i]->type == REDIS_REPLY_STRING ? job_of(r->element[i]->str) : -1;
            if (id >= 0 && head[jobs[id].cls] < 0) head[jobs[id].cls] = (int)id, pos[jobs[id].cls] = (int)i;
        }
        freeReplyObject(r);
    }
}

static int64_t starve_bound_ms(void)
{
    int64_t longest = LONG_MAX_MS > opt.ttl ? LONG_MAX_MS : opt.ttl;
    return longest + 200 + POLL_MIN_MS + POLL_SPAN_MS + 1000;
}

/* held: its head stays put while every limit of its class has room. */
static bool has_room(const sclass_t *s)
{
    for (int i = 0; i < s->nlims; i++)
        if (!lims[s->lims[i]].room) return false;
    return true;
}

static void check_room(sclass_t *s, int64_t now)
{
    if (!has_room(s)) {
        s->room_ms = -1;
        return;
    }
    if (s->room_ms < 0) s->room_ms = now, s->room_tick = st.ticks;
    if (now - s->room_ms > st.held_max_ms) st.held_max_ms = now - s->room_ms;
    if (!s->room_failed && now - s->room_ms > HELD_BOUND_MS && st.ticks - s->room_tick > STARVE_TICKS) {
        s->room_failed = true;
        st.held_failed++;
        fprintf(stderr, "%s: job %d held %lld ms at position %d of q%d while its limits had room\n", s->name,
                s->head_job, (long long)(now - s->room_ms), s->head_pos, s->queue);
    }
}

static void check_starve(int64_t now)
{
    int head[MAXCLS], pos[MAXCLS];
    scan_heads(head, pos);
    st.scans++;
    for (int k = 0; k < opt.classes; k++) {
        sclass_t *s = &cls[k];
        if (head[k] < 0 || head[k] != s->head_job || pos[k] < s->head_pos) {
            s->head_job = head[k], s->head_pos = pos[k];
            s->since_ms = now, s->since_tick = st.ticks;
            s->starved = s->room_failed = false;
            s->room_ms = -1;
            continue;
        }
        s->head_pos = pos[k];
        check_room(s, now);
        if (now - s->since_ms > st.starve_max_ms) st.starve_max_ms = now - s->since_ms;
        if (!s->starved && now - s->since_ms > starve_bound_ms() && st.ticks - s->since_tick > STARVE_TICKS) {
            s->starved = true;
            st.starve_failed++;
            fprintf(stderr, "%s: job %d waited %lld ms at position %d of q%d\n", s->name, head[k],
                    (long long)(now - s->since_ms), pos[k], s->queue);
        }
    }
}

/* Redis's view: the slots in use of each concurrency limit never exceed it. */
static void check_redis(void)
{
    for (int i = 0; i < all.n; i++) {
        qlimit_stat_t s;
        st.redis_checks++;
        if (qlimit_read(c, &all.v[i], &s) < 0) {
            st.errors++;
            continue;
        }
        lims[i].room = (all.v[i].concurrency <= 0 || s.in_use < all.v[i].concurrency) && (s.tokens < 0 || s.tokens >= 1);
        if (all.v[i].concurrency > 0 && s.in_use > all.v[i].concurrency) {
            st.redis_over++;
            fprintf(stderr, "%s: %lld slots in use > %d\n", all.v[i].key, s.in_use, all.v[i].concurrency);
        }
    }
}

/* ------------------------------------------------------------ end */

static bool all_done(void)
{
    for (long i = 0; i < njobs; i++)
        if (!jobs[i].done) return false;
    return true;
}

static void final_checks(void)
{
    for (long i = 0; i < njobs; i++)
        if (!jobs[i].done) {
            st.incomplete++;
            if (st.incomplete <= 5) fprintf(stderr, "job %ld (%s) never ran to its end\n", i, cls[jobs[i].cls].name);
        }
    for (int q = 0; q < NQ; q++) {
        const qkeys_t *k = &pools[q].qs.q[0];
        queue_append_counts(c, k);
        for (int i = 0; i < 3; i++) {
            redisReply *r = NULL;
            if (rconn_read(c, -1, -1, &r) == RC_OK && r->type == REDIS_REPLY_INTEGER) st.leftover += r->integer;
            else st.errors++;
            if (r) freeReplyObject(r);
        }
    }
}

static long failures(void)
{
    return st.over_limit + st.redis_over + st.rate_over + st.attempts_bad + st.order_bad + st.starve_failed + st.held_failed +
           st.dup_unexplained + st.incomplete + st.leftover + st.reuse_failed + st.errors;
}

static void report(void)
{
    double secs = (double)st.run_ms / 1000.0;
    long ops = st.pushes + st.pops + st.acks + st.ends + st.beats + st.reads;
    int workers = 0;
    for (int i = 0; i < opt.hosts; i++) workers += hosts[i].nw;
    printf("{\"seed\":%d,\"hosts\":%d,\"workers\":%d,\"classes\":%d,\"limits\":%d,\"seconds\":%d,\"ttl_ms\":%d,\"retry_after\":%d,"
           "\"run_ms\":%lld,\"last_first_done_ms\":%lld,\"ticks\":%ld,\"jobs\":%ld,\"pops\":%ld,\"pops_job\":%ld,\"pops_blocked\":%ld,\"pops_empty\":%ld,"
           "\"pops_per_s\":%.0f,\"jobs_per_s\":%.0f,\"acks\":%ld,\"ends\":%ld,\"beats\":%ld,\"redis_ops\":%ld,\"redis_ops_per_s\":%.0f,"
           "\"kills\":%ld,\"killed_runs\":%ld,\"killed_owed\":%ld,\"partitions\":%ld,\"beat_lost\":%ld,\"ack_lost\":%ld,"
           "\"excused_cut\":%ld,\"excused_late\":%ld,\"expired_reruns\":%ld,\"reuse_checks\":%ld,\"redis_checks\":%ld,"
           "\"scans\":%ld,\"held_max_ms\":%lld,\"held_failed\":%ld,\"starve_max_ms\":%lld,\"starve_bound_ms\":%lld,\"window_max_excess\":%lld,\"rate_at_bound\":%ld,"
           "\"over_limit\":%ld,\"redis_over\":%ld,\"rate_over\":%ld,\"attempts_bad\":%ld,\"order_bad\":%ld,"
           "\"starve_failed\":%ld,\"dup_unexplained\":%ld,\"incomplete\":%ld,\"leftover\":%ld,\"reuse_failed\":%ld,"
           "\"errors\":%ld,\"failed\":%ld}\n",
           opt.seed, opt.hosts, workers, opt.classes, nlims, opt.seconds, opt.ttl, opt.retry_after, (long long)st.run_ms, (long long)st.last_first_done_ms, st.ticks,
           st.jobs, st.pops, st.pops_job, st.pops_blocked, st.pops_empty, secs > 0 ? (double)st.pops / secs : 0,
           secs > 0 ? (double)st.pops_job / secs : 0, st.acks, st.ends, st.beats, ops, secs > 0 ? (double)ops / secs : 0,
           st.kills, st.killed_runs, st.killed_owed, st.partitions, st.beat_lost, st.ack_lost, st.excused_cut,
           st.excused_late, st.expired_reruns, st.reuse_checks, st.redis_checks, st.scans, (long long)st.held_max_ms, st.held_failed, (long long)st.starve_max_ms,
           (long long)starve_bound_ms(), (long long)st.window_max_excess, st.rate_at_bound, st.over_limit, st.redis_over, st.rate_over,
           st.attempts_bad, st.order_bad, st.starve_failed, st.dup_unexplained, st.incomplete, st.leftover,
           st.reuse_failed, st.errors, failures());
}

static void parse_args(int argc, char **argv)
{
    static const struct option lo[] = {{"port", 1, 0, 'p'},    {"hosts", 1, 0, 'H'},       {"classes", 1, 0, 'C'},
                                       {"seconds", 1, 0, 's'}, {"ttl-ms", 1, 0, 't'},      {"retry-after", 1, 0, 'r'},
                                       {"seed", 1, 0, 'S'},    {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int v = atoi(optarg);
        switch (o) {
        case 'p': opt.port = v; break;
        case 'H': opt.hosts = v; break;
        case 'C': opt.classes = v; break;
        case 's': opt.seconds = v; break;
        case 't': opt.ttl = v; break;
        case 'r': opt.retry_after = v; break;
        case 'S': opt.seed = v; break;
        default: exit(2);
        }
    }
    /* retry_after must outlast a long job and a partition (no rerun of a running job) */
    if (!opt.port || opt.hosts < 2 || opt.hosts > 1000 || opt.classes < 1 || opt.classes > MAXCLS ||
        opt.seconds < 1 || opt.ttl < 300 || opt.retry_after * 1000 < LONG_MAX_MS + 3000 + 1000) {
        fprintf(stderr, "usage: limits-sim --port P [--hosts N (2..1000)] [--classes N (1..%d)] [--seconds N] "
                        "[--ttl-ms MS (300..)] [--retry-after S (7..)] [--seed N]\n", MAXCLS);
        exit(2);
    }
    beat_ms = opt.ttl / 3;
}

static void setup(void)
{
    snprintf(prefix, sizeof prefix, "lsim%d:", opt.seed);
    redis_conf_t rc = {.name = "sim", .host = "127.0.0.1", .port = opt.port, .prefix = prefix, .timeout = 5};
    c = rconn_new(&rc);
    if (rconn_ensure(c) < 0 || queue_load_scripts(c) < 0 || queue_load_limited(c) < 0) {
        fprintf(stderr, "cannot reach redis on port %d\n", opt.port);
        exit(2);
    }
    setup_classes();
    setup_pools();
    setup_hosts();
}

static void tick(int64_t now, int64_t phase_end, int64_t *next_pass, int64_t *next_scan, int *order)
{
    while (*next_pass < phase_end && now >= *next_pass) events(now), *next_pass += PASS_MS; /* as many on a slow machine */
    if (now >= phase_end)
        for (int i = 0; i < opt.hosts; i++) hosts[i].part_until = 0; /* the drain: every host back */
    for (int i = opt.hosts - 1; i > 0; i--) { /* a new order each tick */
        int j = rnd(i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int i = 0; i < opt.hosts; i++)
        if (!hosts[order[i]].dead) host_step(&hosts[order[i]], mono_ms());
    check_all_limits(mono_ms());
    if (now >= *next_scan) {
        check_redis();
        check_starve(mono_ms());
        *next_scan = now + SCAN_MS;
    }
    st.ticks++;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    srand((unsigned)opt.seed);
    st.window_max_excess = -1000000; /* the report says how close it came */
    job_rng = (unsigned)opt.seed * 7919u;
    setup();
    int *order = xcalloc((size_t)opt.hosts, sizeof *order);
    for (int i = 0; i < opt.hosts; i++) order[i] = i;
    int64_t start = run_start = mono_ms(), phase_end = start + opt.seconds * 1000LL;
    int64_t drain_end = phase_end + 60000; /* ends when every job has run: retry_after and a few s here */
    int64_t next_pass = start, next_scan = start, last = start;
    /* a backlog of 2 s of pushes to start with, and 1.5 s of its rate more
     * for each rate-limited class: its bucket runs dry */
    for (int k = 0; k < opt.classes; k++)
        for (int i = 0; i < cls[k].nlims; i++)
            if (lims[cls[k].lims[i]].conf.class_name && lims[cls[k].lims[i]].conf.rate_per_s > 0)
                cls[k].credit += 1.5 * lims[cls[k].lims[i]].conf.rate_per_s + lims[cls[k].lims[i]].conf.burst;
    push_tick(2000);
    for (;;) {
        int64_t now = mono_ms();
        if (now < phase_end) push_tick((double)(now - last)), push_batches(now);
        last = now;
        tick(now, phase_end, &next_pass, &next_scan, order);
        if (now >= phase_end && (all_done() || now >= drain_end)) break;
        int64_t wait = now + TICK_MS - mono_ms();
        if (wait > 0) usleep((useconds_t)wait * 1000);
    }
    st.run_ms = mono_ms() - start;
    final_checks();
    report();
    free(order);
    return failures() ? 1 : 0;
}
