/*
 * monitor.c - see monitor.h.
 */
#include "master/monitor.h"
#include "master/agent.h"
#include "master/mbatches.h"
#include "master/mapp.h"
#include "master/alerting.h"
#include "master/balancer.h"
#include "master/budgeting.h"
#include "master/limiting.h"
#include "master/classpause.h"
#include "master/mconn.h"
#include "redis/failed.h"
#include "observe/fleet.h"
#include "observe/batchjobs.h"
#include "observe/history.h"
#include "observe/monitored.h"
#include "master/status.h"
#include "core/log.h"
#include "core/sdnotify.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#define RATE_TAU_S 5.0      /* balancer's view of throughput */
#define MINUTE_TAU_S 60.0   /* status's jobs per minute */
#define BATCH_LOG_EVERY_MS 60000 /* a batch-list write that keeps failing: logged once a minute */

/* The monitor's own state: the last queue:restart values seen and this
 * master's heartbeat identity (its connections are mconn.c's, when it
 * next looks is master_t.next_balance_ms). */
struct monitor {
    char **restart_seen;        /* "key\x01value", NULL-terminated */
    char fleet_id[300];         /* this master's heartbeat record (fleet.h) */
    char host[256];
    int64_t redis_offset_ms;    /* Redis's clock minus ours, from the last heartbeat */
    int64_t next_watch_ms;      /* monotonic: the next read of the watched set (monitor_watch_tick) */
};

void monitor_free(master_t *m)
{
    mconn_free(m);
    if (!m->mon) return;
    if (m->mon->restart_seen) {
        for (int i = 0; m->mon->restart_seen[i]; i++) free(m->mon->restart_seen[i]);
        free(m->mon->restart_seen);
    }
    free(m->mon);
    m->mon = NULL;
}

void monitor_reset(master_t *m)
{
    if (!m->mon) m->mon = xcalloc(1, sizeof *m->mon);
    /* Connections follow the config; restart baselines are kept across
     * reloads: a queue:restart must not be missed or invented by a reload. */
    mconn_drop_all(m);
    m->next_balance_ms = 0;
    m->mon->next_watch_ms = 0;
}

/* "key\x01value" entries: the last value seen for each restart key. */
static const char *seen_get(master_t *m, const char *key, bool *found)
{
    *found = false;
    size_t kl = strlen(key);
    for (int i = 0; m->mon->restart_seen && m->mon->restart_seen[i]; i++) {
        const char *e = m->mon->restart_seen[i];
        if (!strncmp(e, key, kl) && e[kl] == '\x01') {
            *found = true;
            return e + kl + 1;
        }
    }
    return NULL;
}

static void seen_set(master_t *m, const char *key, const char *value)
{
    size_t kl = strlen(key);
    int n = 0;
    for (; m->mon->restart_seen && m->mon->restart_seen[n]; n++) {
        if (!strncmp(m->mon->restart_seen[n], key, kl) && m->mon->restart_seen[n][kl] == '\x01') {
            free(m->mon->restart_seen[n]);
            m->mon->restart_seen[n] = xasprintf("%s\x01%s", key, value);
            return;
        }
    }
    m->mon->restart_seen = xrealloc(m->mon->restart_seen, sizeof(char *) * (size_t)(n + 2));
    m->mon->restart_seen[n] = xasprintf("%s\x01%s", key, value);
    m->mon->restart_seen[n + 1] = NULL;
}

static bool php_truthy(const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_STRING) return false;
    /* RedisStore stores true as serialize(true) = "b:1;", numbers raw */
    return strcmp(r->str, "b:0;") && strcmp(r->str, "0") && r->len > 0 && strcmp(r->str, "N;");
}

/* The oldest ready job's age: from its createdAt (Laravel 11+, plus its
 * delay), else since this master first saw it at the head (a lower bound:
 * Laravel 8 payloads say nothing of when they were pushed). */
static void track_head(queue_stat_t *qs, const redisReply *r)
{
    int64_t now = mono_ms();
    if (r->type != REDIS_REPLY_STRING) {
        qs->head_hash = 0;
        qs->oldest_ready_s = 0;
        return;
    }
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < r->len; i++) h = (h ^ (unsigned char)r->str[i]) * 1099511628211ULL;
    if (h != qs->head_hash) {
        qs->head_hash = h;
        qs->head_since_ms = now;
    }
    qs->oldest_ready_s = (double)(now - qs->head_since_ms) / 1000.0;
    job_payload_t p;
    char err[64];
    if (payload_parse(r->str, r->len, &p, err, sizeof err) == 0) {
        if (p.has_created_at) {
            double age = (double)wall_ms() / 1000.0 - (double)(p.created_at + (p.has_delay && p.delay > 0 ? p.delay : 0));
            if (age > qs->oldest_ready_s) qs->oldest_ready_s = age;
        }
        payload_free(&p);
    }
}

static bool connection_used(const master_t *m, const char *name)
{
    for (int i = 0; i < m->pools.n; i++)
        if (!strcmp(m->pools.v[i]->conf.connection, name)) return true;
    return false;
}

/* Are pool p's queue counts on Redis connection cname? An app_driver
 * pool's queues are elsewhere: its app agent says their sizes. */
static bool counts_on(const pool_t *p, const char *cname)
{
    return !p->conf.app_driver && !strcmp(p->conf.connection, cname);
}

/* The counts of the pools on connection cname are not known this pass. */
static void counts_unknown(master_t *m, const char *cname)
{
    for (int i = 0; i < m->pools.n; i++)
        if (counts_on(m->pools.v[i], cname)) m->pools.v[i]->have_counts = false;
}

/* Append the counts of every queue of the pools on c (cname) and, when
 * heads, the job at its head (the alerts' oldest job). */
static void ask_counts(master_t *m, rconn_t *c, const char *cname, bool heads)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (!counts_on(p, cname)) continue;
        for (int q = 0; q < p->conf.nqueues; q++) {
            qkeys_t k;
            qkeys_init(&k, c->conf.prefix, p->conf.queues[q]);
            queue_append_counts(c, &k);
            if (heads) {
                const char *a[] = {"LINDEX", k.ready, "0"};
                rconn_append(c, 3, a, NULL);
            }
            qkeys_free(&k);
        }
    }
}

/* One queue's replies: ready, delayed, reserved and (heads) its head. -1:
 * the connection failed. */
static int read_queue_counts(rconn_t *c, queue_stat_t *qs, bool heads)
{
    int64_t v[3];
    redisReply *r;
    for (int j = 0; j < 3; j++) {
        if (rconn_read(c, -1, -1, &r) != RC_OK) return -1;
        v[j] = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
        freeReplyObject(r);
    }
    qs->ready = v[0];
    qs->delayed = v[1];
    qs->reserved = v[2];
    if (!heads) return 0;
    if (rconn_read(c, -1, -1, &r) != RC_OK) return -1;
    track_head(qs, r);
    freeReplyObject(r);
    return 0;
}

/* The replies ask_counts asked for: a pool has its counts when all of its
 * queues' came (and every pool's before it). */
static void read_counts(master_t *m, rconn_t *c, const char *cname, bool heads)
{
    bool ok = true;
    counts_unknown(m, cname);
    for (int i = 0; i < m->pools.n && ok; i++) {
        pool_t *p = m->pools.v[i];
        if (!counts_on(p, cname)) continue;
        for (int q = 0; q < p->conf.nqueues && ok; q++) ok = read_queue_counts(c, &p->q[q], heads) == 0;
        p->have_counts = ok;
    }
}

/* Queue counts: for each connection, one pipelined round trip over every
 * queue of every pool using it. */
static void fetch_counts(master_t *m)
{
    for (int ci = 0; ci < m->conf->nredis; ci++) {
        const char *cname = m->conf->redis[ci].name;
        if (!connection_used(m, cname)) continue;
        rconn_t *c = mconn_get(m, cname);
        if (!c || rconn_ensure(c) < 0) {
            counts_unknown(m, cname);
            continue;
        }
        bool heads = alerting_wants_oldest(m->conf);
        ask_counts(m, c, cname, heads);
        read_counts(m, c, cname, heads);
    }
}

/* Does a pool on cache connection cname poll Laravel's keys? */
static bool polls_laravel(const pool_t *p, const char *cname)
{
    return !p->removed && !p->conf.agent_signals && !strcmp(p->conf.cache_connection, cname) &&
           (p->conf.laravel_pause || p->conf.restart_key[0]);
}

static void append_get(rconn_t *c, char *key)
{
    const char *a[] = {"GET", key};
    rconn_append(c, 2, a, NULL);
    free(key);
}

/* GET the pool's queue:restart key, then its queue:pause keys (every
 * queue's, then each queue's). */
static void ask_laravel_keys(rconn_t *c, const pool_t *p)
{
    if (p->conf.restart_key[0])
        append_get(c, xasprintf("%s%s%s", c->conf.prefix, p->conf.cache_prefix, p->conf.restart_key));
    if (!p->conf.laravel_pause) return;
    append_get(c, xasprintf("%s%silluminate:queues:paused", c->conf.prefix, p->conf.cache_prefix));
    for (int q = 0; q < p->conf.nqueues; q++)
        append_get(c, xasprintf("%s%silluminate:queue:paused:%s:%s", c->conf.prefix, p->conf.cache_prefix,
                                p->conf.queue_connection, p->conf.queues[q]));
}

/* The queue:restart key's reply: a value changed since the last pass rolls
 * the pool. The value seen is kept in p->restart_pending until every pool
 * has seen it (remember_restart_values). -1: the connection failed. */
static int read_restart_key(master_t *m, rconn_t *c, const char *cname, pool_t *p)
{
    redisReply *r;
    if (rconn_read(c, -1, -1, &r) != RC_OK) return -1;
    char *key = xasprintf("%s|%s%s%s", cname, c->conf.prefix, p->conf.cache_prefix, p->conf.restart_key);
    const char *now = r->type == REDIS_REPLY_STRING ? r->str : "";
    bool found;
    const char *was = seen_get(m, key, &found);
    if (found && strcmp(was, now)) {
        log_info("pool %s: Laravel's queue:restart signal changed (%s): rolling restart", p->conf.name,
                 p->conf.restart_key);
        pool_request_roll(p);
    }
    /* several pools may share the key: update after all have seen it */
    free(p->restart_pending);
    p->restart_pending = !found || strcmp(was, now) ? xstrdup(now) : NULL;
    free(p->restart_key_full);
    p->restart_key_full = key;
    freeReplyObject(r);
    return 0;
}

/* Queue q paused by Laravel's queue:pause, or not (logged when it changes). */
static void set_laravel_paused(pool_t *p, int q, bool paused)
{
    bool was = p->q[q].laravel_paused;
    p->q[q].laravel_paused = paused;
    if (was != paused)
        log_info("pool %s: queue %s %s by Laravel's queue:%s", p->conf.name, p->conf.queues[q],
                 paused ? "paused" : "resumed", paused ? "pause" : "resume");
}

/* The queue:pause keys' replies: each queue paused by Laravel or not. -1:
 * the connection failed on the first; a later failure only ends this
 * pool's queues. */
static int read_pause_keys(rconn_t *c, pool_t *p)
{
    redisReply *r;
    if (rconn_read(c, -1, -1, &r) != RC_OK) return -1;
    bool all = php_truthy(r);
    freeReplyObject(r);
    for (int q = 0; q < p->conf.nqueues; q++) {
        if (rconn_read(c, -1, -1, &r) != RC_OK) break;
        set_laravel_paused(p, q, all || php_truthy(r));
        freeReplyObject(r);
    }
    return 0;
}

static void read_laravel_keys(master_t *m, rconn_t *c, const char *cname)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->removed || p->conf.agent_signals || strcmp(p->conf.cache_connection, cname)) continue;
        if (p->conf.restart_key[0] && read_restart_key(m, c, cname, p) < 0) break; /* the rest waits for the next pass */
        if (p->conf.laravel_pause && read_pause_keys(c, p) < 0) break;
    }
}

/* The queue:restart values this pass saw are the baselines of the next. */
static void remember_restart_values(master_t *m)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->restart_pending) {
            seen_set(m, p->restart_key_full, p->restart_pending);
            free(p->restart_pending);
            p->restart_pending = NULL;
        }
    }
}

/* Laravel's queue:pause keys and queue:restart key, on each cache connection. */
static void poll_laravel_keys(master_t *m)
{
    for (int ci = 0; ci < m->conf->nredis; ci++) {
        const char *cname = m->conf->redis[ci].name;
        bool used = false;
        for (int i = 0; i < m->pools.n && !used; i++) used = polls_laravel(m->pools.v[i], cname);
        if (!used) continue;
        rconn_t *c = mconn_get(m, cname);
        if (!c || rconn_ensure(c) < 0) continue;
        for (int i = 0; i < m->pools.n; i++) {
            pool_t *p = m->pools.v[i];
            if (!p->removed && !p->conf.agent_signals && !strcmp(p->conf.cache_connection, cname))
                ask_laravel_keys(c, p);
        }
        read_laravel_keys(m, c, cname);
    }
    remember_restart_values(m);
}

/* Is the app down? 1 yes, 0 no, -1 unknown. The file driver's file is
 * looked at without following a link (the master may be root and the
 * storage directory is the app's user's): existence only, nothing read. */
static int probe_down_file(const char *path)
{
    struct stat st;
    if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0) return 1;
    return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
}

static int probe_down_key(master_t *m, const pool_conf_t *pc)
{
    rconn_t *c = mconn_get(m, pc->down_connection);
    if (!c || rconn_ensure(c) < 0) return -1;
    char *k = xasprintf("%s%s", c->conf.prefix, pc->down_key);
    const char *a[] = {"EXISTS", k};
    redisReply *r = NULL;
    int down = -1;
    rconn_append(c, 2, a, NULL);
    if (rconn_read(c, -1, -1, &r) == RC_OK)
        down = r->type == REDIS_REPLY_INTEGER ? r->integer > 0 : -1;
    if (r) freeReplyObject(r);
    free(k);
    return down;
}

/* Pools whose Laravel app is down for maintenance take no new jobs (unless
 * force), as queue:work without --force: through master_pause. */
void monitor_check_maintenance(master_t *m)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->removed) continue;
        bool checked = p->conf.down_file || (p->conf.down_connection && p->conf.down_key);
        int probe = -1;
        if (checked && !p->conf.force)
            probe = p->conf.down_file ? probe_down_file(p->conf.down_file) : probe_down_key(m, &p->conf);
        bool want = pool_down_wanted(checked, p->conf.force, probe, p->down);
        if (want == p->down) continue;
        char *names[] = {p->conf.name};
        pause_scope_t scope = {.pools = names, .npools = 1};
        char err[200];
        master_pause(m, &scope, PAUSE_FROM_MAINTENANCE, want, err, sizeof err);
    }
}

static void update_rates(master_t *m, int64_t now)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        pool_counts_t c;
        pool_counts(&m->pools, p, &c);
        if (!p->last_sample_ms) {
            p->last_sample_ms = now;
            p->last_jobs = c.jobs_done;
            p->last_failed = c.jobs_failed;
            p->last_busy_ms = c.busy_ms;
            continue;
        }
        double dt = (double)(now - p->last_sample_ms) / 1000.0;
        if (dt < 0.05) continue;
        double dj = (double)(c.jobs_done - p->last_jobs);
        double df = (double)(c.jobs_failed - p->last_failed);
        double db = (double)(c.busy_ms - p->last_busy_ms);
        if (dj < 0 || df < 0 || db < 0) dj = df = db = 0; /* counters restarted */
        double a = 1.0 - exp(-dt / RATE_TAU_S), am = 1.0 - exp(-dt / MINUTE_TAU_S);
        p->rate = p->rate + a * (dj / dt - p->rate);
        p->jobs_per_min = p->jobs_per_min + am * (dj / dt * 60.0 - p->jobs_per_min);
        p->failed_per_min = p->failed_per_min + am * (df / dt * 60.0 - p->failed_per_min);
        if (dj > 0) {
            double rt = db / dj;
            p->mean_runtime_ms = p->mean_runtime_ms > 0 ? p->mean_runtime_ms + a * (rt - p->mean_runtime_ms) : rt;
        }
        p->last_sample_ms = now;
        p->last_jobs = c.jobs_done;
        p->last_failed = c.jobs_failed;
        p->last_busy_ms = c.busy_ms;
    }
}

/* The balancer's view of one pool. */
static void fill_bal(master_t *m, pool_t *p, bal_pool_t *x)
{
    pool_counts_t c;
    pool_counts(&m->pools, p, &c);
    x->auto_mode = p->conf.balance == BALANCE_AUTO;
    x->processes = p->conf.processes;
    x->min = p->conf.min_processes;
    x->max = p->conf.max_processes;
    x->size_strategy = p->conf.auto_strategy == STRATEGY_SIZE;
    x->target_wait = p->conf.target_wait;
    x->scale_down_delay = p->conf.scale_down_delay;
    x->priority = p->conf.priority;
    x->pinned = p->pinned;
    x->paused = pool_is_paused(&m->pools, p);
    x->live = c.live;
    x->busy = c.busy;
    x->stopping = c.stopping;
    uint32_t cw = pool_control_word(&m->pools, p);
    int64_t backlog = 0;
    for (int q = 0; q < p->conf.nqueues; q++)
        if (!(cw & (1u << q))) backlog += p->q[q].ready;
    x->backlog = p->have_counts ? backlog : 0;
    if (!p->have_counts && x->auto_mode) x->pinned = p->target; /* no data: hold still */
    x->runtime_s = p->mean_runtime_ms / 1000.0;
    x->rate = p->rate;
    x->target = p->target;
    x->below_since_ms = p->below_since_ms;
}

/* The balancer's view of every pool not removed; returns the count. */
static int fill_all(master_t *m, bal_pool_t *b, pool_t **map)
{
    int n = 0;
    for (int i = 0; i < m->pools.n; i++) {
        if (m->pools.v[i]->removed) continue;
        map[n] = m->pools.v[i];
        fill_bal(m, map[n], &b[n]);
        n++;
    }
    return n;
}

static int forward_watched(master_t *m, pool_t *p);

void monitor_tick_stopping(master_t *m, int64_t now)
{
    m->next_balance_ms = now + (int64_t)(m->conf->balance_interval * 1000);
    bal_pool_t *b = xcalloc((size_t)m->pools.n + 1, sizeof *b);
    pool_t **map = xcalloc((size_t)m->pools.n + 1, sizeof *map);
    int n = fill_all(m, b, map);
    budgeting_pass(m, map, b, NULL, n, now);
    free(b);
    free(map);
    for (int i = 0; i < m->pools.n; i++) forward_watched(m, m->pools.v[i]); /* what the exiting workers sent */
}

/* What the balancer would give each pool without the fleet budgets: the
 * most a budgeted pool can run here (max_workers), so that it claims no
 * slot it could not use (caller frees). */
static int *room_without_budgets(const bal_pool_t *b, int n, int max_workers, int64_t now)
{
    bal_pool_t *dry = xcalloc((size_t)n + 1, sizeof *dry);
    int *room = xcalloc((size_t)n + 1, sizeof *room);
    memcpy(dry, b, sizeof *dry * (size_t)n);
    balance(dry, n, max_workers, now);
    for (int i = 0; i < n; i++) room[i] = dry[i].target;
    free(dry);
    return room;
}

static void apply_balance(master_t *m, int64_t now)
{
    bal_pool_t *b = xcalloc((size_t)m->pools.n + 1, sizeof *b);
    pool_t **map = xcalloc((size_t)m->pools.n + 1, sizeof *map);
    int n = fill_all(m, b, map);
    /* Removed pools' children still count against max_workers. */
    int reserved = 0;
    for (int i = 0; i < m->pools.n; i++)
        if (m->pools.v[i]->removed) reserved += m->pools.v[i]->nchildren;
    /* Pools with a fleet budget: within what their lease allows. */
    int *room = room_without_budgets(b, n, m->conf->max_workers - reserved, now);
    budgeting_pass(m, map, b, room, n, now);
    free(room);
    balance(b, n, m->conf->max_workers - reserved, now);
    for (int i = 0; i < n; i++) {
        pool_t *p = map[i];
        if (b[i].target != p->target && p->conf.balance == BALANCE_AUTO && p->pinned < 0)
            log_info("pool %s: target %d -> %d (ready %lld, %.1f jobs/s, runtime %.0f ms)", p->conf.name,
                     p->target, b[i].target, (long long)b[i].backlog, p->rate, p->mean_runtime_ms);
        p->target = b[i].target;
        p->below_since_ms = b[i].below_since_ms;
    }
    free(b);
    free(map);
}

/* The heartbeat, on every connection a pool uses: a few balance passes of
 * life, at least 3 s. */
static void heartbeat(master_t *m)
{
    if (!m->mon->fleet_id[0]) fleet_id(m->mon->fleet_id, sizeof m->mon->fleet_id);
    int64_t ttl = (int64_t)(m->conf->balance_interval * 3000);
    if (ttl < 3000) ttl = 3000;
    cJSON *rec = status_fleet_record(m, m->mon->fleet_id);
    char *js = cJSON_PrintUnformatted(rec);
    cJSON_Delete(rec);
    for (int ci = 0; ci < m->conf->nredis; ci++) {
        const char *name = m->conf->redis[ci].name;
        if (!connection_used(m, name)) continue;
        rconn_t *c = mconn_get(m, name);
        int64_t redis_now = 0, before = wall_ms();
        if (c && rconn_ensure(c) == 0 && fleet_heartbeat(c, m->mon->fleet_id, js, ttl, &redis_now) == 0 && redis_now)
            m->mon->redis_offset_ms = redis_now - (before + wall_ms()) / 2;
        if (c && c->ctx) mconn_note_queues(m, c, name);
    }
    free(js);
}

/* An error that passes (-3: READONLY from a replica, LOADING...) can last:
 * logged at its 1st, 2nd, 4th, ... pass in a row, and once it ended.
 * Returns rv, -1 for -3 (the batch waits, as when Redis is unreachable). */
static int watched_wait_note(pool_t *p, int rv, const char *err)
{
    if (rv == -3) {
        uint64_t k = ++p->watched.waits;
        if ((k & (k - 1)) == 0)
            log_info("pool %s: Redis cannot take the watched tags' records now (%s; %llu passes in a row): they wait",
                     p->conf.name, err, (unsigned long long)k);
        return -1;
    }
    if (rv == 0 && p->watched.waits) {
        log_info("pool %s: Redis takes the watched tags' records again (after %llu passes)", p->conf.name,
                 (unsigned long long)p->watched.waits);
        p->watched.waits = 0;
    }
    return rv;
}

/* Was a reply to the head batch of p's watched queue lost too long ago for
 * it to go again (jobwatch_queue_expired: its token may have expired, a
 * resend could write it twice)? Then it is dropped, logged: true. */
static bool resend_too_late(pool_t *p)
{
    jobwatch_queue_t *q = &p->watched;
    if (!jobwatch_queue_expired(q, mono_ms())) return false;
    log_warn("pool %s: %d records of watched tags dropped: a reply to their batch was lost over %d minutes ago "
             "and none came since (sent again, it could be written twice)",
             p->conf.name, q->batch, JOBWATCH_RESEND_MS / 60000);
    jobwatch_queue_done(q);
    return true;
}

/* The oldest records of a pool's watched queue (at most JOBWATCH_STEP, one
 * script call) into their tags' lists; the rest next pass. A batch Redis
 * did not answer goes again with its token, which runs once. Returns
 * monitored_forward's answer (0 as well with nothing to send; -1 with no
 * connection). With no Redis at all the queue is dropped, logged. */
static int forward_watched(master_t *m, pool_t *p)
{
    if (!p->watched.n) return 0;
    rconn_t *c = mconn_get(m, p->conf.connection);
    if (!c && (m->conf->no_redis || p->removed)) { /* a removed pool waits for nothing that may never come */
        log_warn("pool %s: %d records of watched tags dropped (%s)", p->conf.name, p->watched.n,
                 m->conf->no_redis ? "no Redis" : "its connection was removed");
        jobwatch_queue_clear(&p->watched);
        return 0;
    }
    if (resend_too_late(p)) return 0;
    const char **tags = xcalloc(JOBWATCH_STEP, sizeof *tags), **recs = xcalloc(JOBWATCH_STEP, sizeof *recs);
    char token[37];
    uuid4(token);
    int n = jobwatch_queue_batch(&p->watched, JOBWATCH_STEP, token, tags, recs);
    char err[128] = "";
    bool up = c && rconn_ensure(c) == 0;
    int64_t sent_ms = mono_ms();
    int rv = up ? monitored_forward(c, tags, recs, n, m->conf->monitored_tag_jobs, m->conf->monitored_tag_retention,
                                    p->watched.token, err, sizeof err)
                : -1;
    jobwatch_queue_sent(&p->watched, up, rv, sent_ms); /* a lost reply starts its clock, an answer does not */
    rv = watched_wait_note(p, rv, err);
    if (rv == -2 && ++p->watched.refused >= JOBWATCH_TRIES)
        log_warn("pool %s: %d records of watched tags dropped (Redis refused them %d times)", p->conf.name, n,
                 JOBWATCH_TRIES);
    if (rv == 0 || (rv == -2 && p->watched.refused >= JOBWATCH_TRIES)) jobwatch_queue_done(&p->watched);
    free(tags);
    free(recs);
    return rv;
}

void monitor_drain_watched(master_t *m, pool_t *p, int64_t deadline_ms)
{
    int unanswered = 0;
    while (p->watched.n && mono_ms() < deadline_ms && unanswered < JOBWATCH_TRIES) {
        unanswered = forward_watched(m, p) == -1 ? unanswered + 1 : 0;
        sdn_feed_watchdog(&m->last_watchdog_ms, mono_ms()); /* a batch waits 1 s at most, the drain longer */
    }
    if (p->watched.n)
        log_warn("pool %s: %d records of watched tags dropped at exit (Redis %s)", p->conf.name, p->watched.n,
                 unanswered ? "unreachable" : "too slow for shutdown_timeout");
    jobwatch_queue_clear(&p->watched);
}

/* The watched set, read once a second per connection with pools, and its
 * generation published to those pools' workers (jobwatch.h): they read it
 * only when it changed, and not at all while no tag is watched. Only with
 * job history on (the workers keep no watched records without it); when
 * Redis does not answer, the last one for a few reads (a blip), then none
 * (0: the workers poll; jobwatch_gen_next). */
static void publish_watched(master_t *m)
{
    if (!m->conf->job_history_size || m->conf->no_redis) return;
    for (int ci = 0; ci < m->conf->nredis; ci++) {
        const char *name = m->conf->redis[ci].name;
        if (!connection_used(m, name)) continue;
        rconn_t *c = mconn_get(m, name);
        /* on a live connection only: the balance pass reconnects, so a Redis
         * that takes connections and never answers holds this at most once
         * a pass (then 0: the workers poll, with their own bounds) */
        uint64_t gen = c && c->ctx ? monitored_generation(c) : JOBWATCH_GEN_NONE;
        for (int i = 0; i < m->pools.n; i++) {
            pool_t *p = m->pools.v[i];
            if (!strcmp(p->conf.connection, name))
                pool_publish_watch(&m->pools, p, jobwatch_gen_next(p->watch_gen, gen, &p->watch_misses));
        }
    }
}

void monitor_watch_tick(master_t *m, int64_t now)
{
    if (!m->mon || now < m->mon->next_watch_ms) return;
    m->mon->next_watch_ms = now + JOBWATCH_POLL_MS;
    publish_watched(m);
}

/* A write of the batches' job lists that lost entries, or whose batches
 * the index did not take (their lists then outlive batch_jobs_keep):
 * counted, and logged the first time, on a new cause, and once a minute
 * while it lasts. */
static void batch_write_note(pool_t *p, int rv, const batchjobs_fail_t *f)
{
    int64_t now = mono_ms();
    if (rv < 0) {
        p->batch_lost += (uint64_t)-rv;
        if (batchjobs_note_due(&p->batch_note, f->err, now, BATCH_LOG_EVERY_MS))
            log_warn("pool %s: %d job record(s) not copied to their batch's list (%s); %llu so far", p->conf.name,
                     -rv, f->err, (unsigned long long)p->batch_lost);
    }
    if (!f->ierr[0]) return;
    p->batch_unindexed += (uint64_t)f->unindexed;
    if (!batchjobs_note_due(&p->batch_inote, f->ierr, now, BATCH_LOG_EVERY_MS)) return;
    if (f->unindexed > 0)
        log_warn("pool %s: %d job record(s)' batch not in the batches' index (%s); %llu so far: their lists are "
                 "bounded by metrics_retention only, not batch_jobs_keep", p->conf.name, f->unindexed, f->ierr,
                 (unsigned long long)p->batch_unindexed);
    else /* the index took every batch, but could not be read or trimmed */
        log_warn("pool %s: the batches' index could not be trimmed to batch_jobs_keep (%s): lists past it stay "
                 "until metrics_retention", p->conf.name, f->ierr);
}

/* The job records each pool's workers sent since the last pass go onto the
 * connection's recent-jobs list: one pipelined round trip per pool (and a
 * second when some record has a batch: its batch's list); those of watched
 * tags onto their lists (forward_watched). */
static void write_jobs(master_t *m)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        forward_watched(m, p);
        if (!p->jobs.n) continue;
        const char **recs = xcalloc((size_t)p->jobs.n, sizeof *recs);
        int n = jobhist_pending_list(&p->jobs, recs, p->jobs.n);
        rconn_t *c = mconn_get(m, p->conf.connection);
        int keep = m->conf->job_history_size ? m->conf->job_history_size : p->jobs.cap;
        /* no Redis at all (qconf_t.no_redis): the records are dropped, as if refused */
        int rv = c ? history_add_jobs(c, recs, n, keep, m->conf->metrics_retention) : m->conf->no_redis ? -2 : -1;
        if (rv == 0) {
            batchjobs_fail_t f; /* those with a batch */
            int b = batchjobs_add(c, recs, n, BATCHJOBS_KEEP, m->conf->batch_jobs_keep, m->conf->metrics_retention, &f);
            batch_write_note(p, b, &f);
            n = jobhist_pending_list_near(&p->jobs, recs, p->jobs.n); /* not those sent apart */
            monitored_add_jobs(c, recs, n, m->conf->monitored_tag_jobs, m->conf->monitored_tag_retention);
        }
        if (rv != -1) jobhist_pending_clear(&p->jobs);
        free(recs);
    }
}

/* What each pool's workers reported since the last pass goes into this
 * minute's history (Redis's minute); kept for the next pass if Redis does
 * not take it. */
static void write_history(master_t *m)
{
    if (!m->mon->host[0]) {
        gethostname(m->mon->host, sizeof m->mon->host - 1);
        for (char *q = m->mon->host; *q; q++)
            if (*q == '|') *q = '/';
    }
    int64_t minute = (wall_ms() + m->mon->redis_offset_ms) / 60000;
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        const char *kinds[EXIT_KINDS];
        uint64_t delta[EXIT_KINDS];
        bool exited = false;
        for (int k = 0; k < EXIT_KINDS; k++) {
            kinds[k] = exit_kind_name(k);
            delta[k] = p->exits[k] - p->exits_written[k];
            exited |= delta[k] > 0;
        }
        if (jobstats_empty(&p->recent) && !exited) continue;
        history_exits_t ex = {kinds, delta, EXIT_KINDS};
        rconn_t *c = mconn_get(m, p->conf.connection);
        int rv = c ? history_add(c, minute, m->mon->host, p->conf.name, &p->recent, &ex, m->conf->metrics_retention)
                   : m->conf->no_redis ? 0 : -1; /* no Redis at all: nothing to keep it for */
        if (rv == -2) log_warn("pool %s: Redis refused this pass's metrics history; dropping it", p->conf.name);
        if (rv == -1) continue;
        jobstats_clear(&p->recent);
        memcpy(p->exits_written, p->exits, sizeof p->exits);
    }
    write_jobs(m);
}

void monitor_goodbye(master_t *m)
{
    if (!m->mon) return;
    budgeting_goodbye(m);
    if (!m->mon->fleet_id[0]) return;
    for (int ci = 0; ci < m->conf->nredis; ci++) {
        const char *name = m->conf->redis[ci].name;
        if (!connection_used(m, name)) continue;
        rconn_t *c = mconn_get(m, name);
        if (c && rconn_ensure(c) == 0) fleet_goodbye(c, m->mon->fleet_id);
    }
}

/* Does the pool's app agent read its Laravel signals (agent.h)? */
static bool agent_polls(const pool_t *p)
{
    return !p->removed && p->conf.agent_signals && pool_preloads(&p->conf) &&
           (p->conf.restart_key[0] || p->conf.laravel_pause);
}

/* Does it read its queue sizes (an app_driver pool that preloads)? */
static bool agent_sizes(const pool_t *p)
{
    return !p->removed && pool_agent_sizes(&p->conf);
}

/* What the pool wants of its agent each pass (AGENT_WANT_*; 0: no agent). */
static unsigned agent_wants(const pool_t *p, int64_t now)
{
    return (agent_polls(p) ? AGENT_WANT_SIGNALS : 0) | (agent_sizes(p) ? AGENT_WANT_SIZES : 0) |
           (mbatches_wanted(p, now) ? AGENT_WANT_BATCHES : 0) | (!p->removed && mapp_wanted(p) ? AGENT_WANT_APP : 0);
}

/* A request unanswered this long drops the agent: two passes, at least 5 s. */
static int64_t agent_timeout_ms(const master_t *m)
{
    int64_t t = (int64_t)(m->conf->balance_interval * 2000);
    return t < 5000 ? 5000 : t;
}

/* Ask the pool's agent for the signals of its queues ("connection:queue",
 * as Laravel names the pause keys); nothing when it cannot be asked now. */
static void ask_signals(pool_t *p, int64_t now)
{
    int nq = p->conf.laravel_pause ? p->conf.nqueues : 0;
    char *names[QPOOL_MAX_QUEUES] = {0};
    for (int q = 0; q < nq; q++) names[q] = xasprintf("%s:%s", p->conf.queue_connection, p->conf.queues[q]);
    agent_ask(&p->agent, p->conf.name, AGENT_OP_SIGNALS, p->conf.restart_key, (const char *const *)names, nq, now);
    for (int q = 0; q < nq; q++) free(names[q]);
}

/* The next request of this pass's (agent_t.todo), when none is in
 * flight: the signals, then the sizes; each reply asks the next. */
static void ask_next(pool_t *p, int64_t now)
{
    agent_t *a = &p->agent;
    if (a->fd < 0 || !a->pid || a->pending_id) return;
    if (mapp_wanted(p)) { /* someone waits for it: first */
        mapp_send(p, now);
        if (a->pending_id) return;
    }
    if (a->todo & AGENT_WANT_SIGNALS) {
        a->todo &= ~AGENT_WANT_SIGNALS;
        ask_signals(p, now);
    } else if (a->todo & AGENT_WANT_SIZES) {
        a->todo &= ~AGENT_WANT_SIZES;
        agent_ask(a, p->conf.name, AGENT_OP_SIZES, p->conf.queue_connection, (const char *const *)p->conf.queues,
                  p->conf.nqueues, now);
    } else if (a->todo & AGENT_WANT_BATCHES) {
        a->todo &= ~AGENT_WANT_BATCHES;
        if (mbatches_wanted(p, now)) mbatches_ask(p, now);
    }
}

/* An app_driver pool's sizes are not known: it keeps its size (fill_bal
 * holds it still). why (NULL: quiet, e.g. an agent still starting) is
 * logged once until sizes come again. */
static void sizes_missing(pool_t *p, const char *why)
{
    p->have_counts = false;
    if (!why || p->agent.sizes_warned) return;
    log_warn("pool %s: no queue sizes from its app agent (%s): the pool keeps its size (%d) until they come",
             p->conf.name, why, p->target);
    p->agent.sizes_warned = true;
}

/* The sizes an agent read, for the balancer, status and /metrics. */
static void sizes_seen(pool_t *p, const agent_reply_t *r)
{
    if (!r->ok) {
        char why[300];
        snprintf(why, sizeof why, "it says: %s", r->error);
        sizes_missing(p, why);
        return;
    }
    for (int q = 0; q < r->nsizes && q < p->conf.nqueues; q++) {
        p->q[q].ready = r->ready[q];
        p->q[q].delayed = r->delayed[q] > 0 ? r->delayed[q] : 0;
        p->q[q].reserved = r->reserved[q] > 0 ? r->reserved[q] : 0;
        p->q[q].oldest_ready_s = -1; /* not said */
    }
    p->have_counts = r->nsizes == p->conf.nqueues;
    if (p->agent.sizes_warned) log_info("pool %s: queue sizes from its app agent again", p->conf.name);
    p->agent.sizes_warned = false;
}

/* Each pass: every agent kept up, and asked for its pool's signals and
 * sizes; an app_driver pool whose agent is not up has no sizes. */
static void ask_agents(master_t *m, int64_t now)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        unsigned wants = agent_wants(p, now);
        if (!wants) {
            agent_close(&p->agent);
            continue;
        }
        int zfd = zygote_off(&p->zygotes, p->gen) ? -1 : zygote_worker_fd(&p->zygotes, p->gen);
        agent_maintain(&p->agent, p->conf.name, zfd, p->gen, m->epfd, now, agent_timeout_ms(m));
        /* A request still in flight: the last sizes stand, and this pass
         * asks nothing more (an agent silent past agent_timeout_ms is
         * dropped by agent_maintain, and then it is down). */
        if (!p->agent.pending_id) p->agent.todo = wants;
        /* down or starting: no sizes */
        if ((wants & AGENT_WANT_SIZES) && (p->agent.fd < 0 || !p->agent.pid))
            sizes_missing(p, p->agent.fd < 0 && p->agent.restarts ? "it is down" : NULL);
        ask_next(p, now);
    }
}

/* The signals an agent read: the same rules as the Redis keys' (a changed
 * queue:restart value rolls the pool; the baselines are kept across
 * reloads; a paused queue is not popped). */
static void agent_signals_seen(master_t *m, pool_t *p, const agent_reply_t *r)
{
    if (!r->ok) {
        if (!p->agent.warned)
            log_warn("pool %s: its app agent cannot read Laravel's signals: %s", p->conf.name, r->error);
        p->agent.warned = true;
        return;
    }
    p->agent.warned = false;
    if (p->conf.restart_key[0]) {
        char *key = xasprintf("agent|%s|%s", p->conf.name, p->conf.restart_key);
        const char *now = r->has_restart ? r->restart : "";
        bool found;
        const char *was = seen_get(m, key, &found);
        if (found && strcmp(was, now)) {
            log_info("pool %s: Laravel's queue:restart signal changed (%s, read by the app agent): rolling restart",
                     p->conf.name, p->conf.restart_key);
            pool_request_roll(p);
        }
        if (!found || strcmp(was, now)) seen_set(m, key, now);
        free(key);
    }
    for (int q = 0; q < r->npaused && q < p->conf.nqueues && p->conf.laravel_pause; q++)
        set_laravel_paused(p, q, r->paused_all || r->paused[q]);
}

bool monitor_agent_event(master_t *m, int fd)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (!agent_owns(&p->agent, fd)) continue;
        agent_reply_t r[4];
        int64_t now = mono_ms();
        bool hello = !p->agent.pid;
        int n = agent_read(&p->agent, p->conf.name, r, 4, now);
        for (int k = 0; k < n; k++) {
            if (r[k].op == AGENT_OP_SIGNALS && agent_polls(p)) agent_signals_seen(m, p, &r[k]);
            if (r[k].op == AGENT_OP_SIZES && agent_sizes(p)) sizes_seen(p, &r[k]);
            if (r[k].op == AGENT_OP_APP)
                mapp_reply(m, p, &r[k]);
            else if (r[k].op >= AGENT_OP_BATCHES)
                mbatches_reply(m, p, &r[k]); /* batches, batch-failed, batch-retry */
            agent_reply_free(&r[k]);
        }
        if (hello && p->agent.pid) p->agent.todo = agent_wants(p, now); /* a new agent: asked at once */
        ask_next(p, now);
        return true;
    }
    return false;
}

void monitor_tick(master_t *m, int64_t now)
{
    m->next_balance_ms = now + (int64_t)(m->conf->balance_interval * 1000);
    fetch_counts(m);
    limiting_poll(m);
    classpause_poll(m);
    heartbeat(m);
    write_history(m);
    poll_laravel_keys(m);
    ask_agents(m, now);
    if (!m->stopping) monitor_check_maintenance(m);
    update_rates(m, now);
    alerting_tick(m, now);
    apply_balance(m, now);
}
