/*
 * status.c - the master's state as JSON: what `qpool status` prints, what
 * `terminate --wait` reports while it stops, and what the HTTP API serves.
 * Read-only: nothing here changes the master.
 */
#include "master/limiting.h"
#include "master/classpause.h"
#include "master/status.h"
#include "master/budgeting.h"
#include "master/mconn.h"
#include "os/proc.h"
#include "core/reply.h"
#include "core/util.h"
#include "version.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *pool_state(master_t *m, pool_t *p)
{
    if (p->removed) return "draining";
    if (m->stopping) return "stopping";
    if (p->paused) return "paused";
    if (p->down) return "down";
    return "running";
}

/* A running job's tags from its slot ('\n'-joined): an array. */
static cJSON *sb_tags_json(const char *tags)
{
    cJSON *a = cJSON_CreateArray();
    for (const char *t = tags; *t;) {
        size_t n = strcspn(t, "\n");
        char *one = xstrndup(t, n);
        cJSON_AddItemToArray(a, cJSON_CreateString(one));
        free(one);
        t += n + (t[n] == '\n');
    }
    return a;
}

static cJSON *child_json(master_t *m, pool_t *p, child_t *c)
{
    sb_slot_t *slot = &m->sb.slots[c->sb];
    sb_child_t s;
    sb_read(slot, &s);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", c->pid);
    cJSON_AddNumberToObject(o, "slot", c->slot_no);
    const char *state = c->stop_reason ? "stopping" : sb_state_name(s.state);
    if (!c->stop_reason && p->conf.handler_type == HANDLER_NONE && c->pause_sent) state = "paused";
    cJSON_AddStringToObject(o, "state", state);
    cJSON_AddBoolToObject(o, "native", p->conf.handler_type != HANDLER_NONE);
    cJSON_AddNumberToObject(o, "uptime_s", (double)(mono_ms() - c->started_ms) / 1000.0);
    cJSON_AddNumberToObject(o, "jobs_done", (double)s.jobs_done);
    cJSON_AddNumberToObject(o, "jobs_failed", (double)s.jobs_failed);
    cJSON_AddNumberToObject(o, "rss_kb", (double)(s.rss_kb ? s.rss_kb : proc_rss_kb(c->pid)));
    /* rss_kb: the worker's RSS plus its handler's RSS, or its USS when the zygote forked it */
    cJSON_AddStringToObject(o, "memory", s.mem_private ? "rss+uss" : "rss");
    cJSON_AddBoolToObject(o, "old_generation", c->gen != p->gen);
    const slot_state_t *h = pool_slot_history(p, c->slot_no);
    cJSON_AddNumberToObject(o, "restarts", h ? h->exits : 0);
    if (h && h->last_exit[0])
        cJSON_AddStringToObject(o, "last_exit", h->last_exit);
    else
        cJSON_AddNullToObject(o, "last_exit");
    if (s.state == SB_BUSY && s.job_started_ms) {
        cJSON *j = cJSON_AddObjectToObject(o, "job");
        cJSON_AddStringToObject(j, "id", s.job_id);
        cJSON_AddStringToObject(j, "uuid", s.job_uuid);
        cJSON_AddStringToObject(j, "name", s.job_name);
        cJSON_AddStringToObject(j, "queue", s.job_queue);
        cJSON_AddNumberToObject(j, "running_ms", (double)(wall_ms() - s.job_started_ms));
        cJSON_AddNumberToObject(j, "attempt", s.job_attempt);
        cJSON_AddNumberToObject(j, "timeout_s", s.job_timeout_s);
        cJSON_AddItemToObject(j, "tags", sb_tags_json(s.job_tags));
    } else
        cJSON_AddNullToObject(o, "job");
    return o;
}

/* The pool's zygote (preload), shown once: its pages are shared by every
 * handler it forked, whose own figures count only their private memory. */
static void zygote_json(cJSON *po, const pool_t *p)
{
    const zygote_t *z = NULL;
    for (int i = 0; i < ZYGOTE_GENERATIONS; i++)
        if (p->zygotes.zy[i].gen == p->gen) z = &p->zygotes.zy[i];
    if (!pool_preloads(&p->conf) || !z) {
        cJSON_AddNullToObject(po, "zygote");
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(po, "zygote");
    cJSON_AddStringToObject(o, "state", z->off ? "off" : z->pid > 0 ? "running" : "restarting");
    cJSON_AddNumberToObject(o, "pid", z->pid);
    cJSON_AddNumberToObject(o, "generation", (double)z->gen);
    cJSON_AddNumberToObject(o, "restarts", z->restarts);
    proc_mem_t mem = {0};
    if (z->pid > 0) proc_mem(z->pid, &mem);
    cJSON_AddNumberToObject(o, "rss_kb", (double)mem.rss_kb);
    cJSON_AddNumberToObject(o, "pss_kb", (double)mem.pss_kb);
    cJSON_AddNumberToObject(o, "uss_kb", (double)mem.uss_kb);
}

/* The pool's app agent (agent.h), for a pool that has one: its pid is what
 * it said in its hello (0: none up now). */
static void agent_json(cJSON *po, const pool_t *p)
{
    bool sizes = pool_agent_sizes(&p->conf);
    if (!p->conf.agent_signals && !sizes) return;
    cJSON *o = cJSON_AddObjectToObject(po, "agent");
    const agent_t *a = &p->agent;
    cJSON_AddStringToObject(o, "state", a->fd < 0 ? "down" : a->pid > 0 ? "running" : "starting");
    cJSON_AddNumberToObject(o, "pid", a->fd >= 0 ? a->pid : 0);
    cJSON_AddNumberToObject(o, "restarts", a->restarts);
    cJSON_AddNumberToObject(o, "replies", (double)a->replies);
    cJSON_AddStringToObject(o, "reads",
                            !sizes                    ? "signals"
                            : p->conf.agent_signals ? "signals and queue sizes"
                                                    : "queue sizes");
}

/* The pool's jobs since the master started, by queue, class and outcome. */
static cJSON *job_stats_json(const pool_t *p, bool raw)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < p->stats.n; i++) {
        const jobstat_t *e = &p->stats.v[i];
        if (!e->n) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "queue", labels_name(&p->stats.queues, e->queue));
        cJSON_AddStringToObject(o, "job", labels_name(&p->stats.classes, e->job));
        cJSON_AddStringToObject(o, "outcome", outcome_name(e->outcome));
        cJSON_AddNumberToObject(o, "count", (double)e->n);
        cJSON_AddItemToObject(o, "runtime_ms", hist_summary_json(&e->runtime));
        cJSON_AddItemToObject(o, "wait_ms", hist_summary_json(&e->wait));
        if (raw) cJSON_AddItemToObject(o, "hist", jobstat_counts_json(e->n, &e->runtime, &e->wait));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

/* Workers by state (paused ones under paused_key). */
static void add_states(cJSON *o, const pool_counts_t *c, const char *paused_key)
{
    cJSON_AddNumberToObject(o, "busy", c->busy);
    cJSON_AddNumberToObject(o, "idle", c->idle);
    cJSON_AddNumberToObject(o, "starting", c->starting);
    cJSON_AddNumberToObject(o, "stopping", c->stopping);
    cJSON_AddNumberToObject(o, "running", c->running);
    cJSON_AddNumberToObject(o, paused_key, c->paused);
}

static cJSON *exits_json(const pool_t *p)
{
    cJSON *o = cJSON_CreateObject();
    for (int k = 0; k < EXIT_KINDS; k++) cJSON_AddNumberToObject(o, exit_kind_name(k), (double)p->exits[k]);
    return o;
}

/* "fleet_budget": the pool's share of a fleet budget (budgeting.h), null without one. */
static void add_budget(const master_t *m, const pool_t *p, cJSON *po, bool brief)
{
    cJSON *b = budgeting_pool_json(m, p, brief);
    if (b)
        cJSON_AddItemToObject(po, "fleet_budget", b);
    else
        cJSON_AddNullToObject(po, "fleet_budget");
}

/* The master's own fields: who, where, and whether it runs. */
static void add_master(cJSON *o, master_t *m)
{
    cJSON_AddTrueToObject(o, "ok");
    cJSON_AddStringToObject(o, "version", QPOOL_VERSION);
    cJSON_AddNumberToObject(o, "pid", getpid());
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddStringToObject(o, "config", m->conf->path);
    bool all_paused = m->pools.all_paused;
    int npools = 0, npaused = 0;
    for (int i = 0; i < m->pools.n; i++)
        if (!m->pools.v[i]->removed) {
            npools++;
            if (pool_is_paused(&m->pools, m->pools.v[i])) npaused++;
        }
    cJSON_AddStringToObject(o, "state", m->stopping ? "stopping"
                                        : (all_paused || (npools && npaused == npools)) ? "paused"
                                                                                        : "running");
    cJSON_AddBoolToObject(o, "paused", all_paused);
    cJSON_AddBoolToObject(o, "stopping", m->stopping);
    cJSON_AddNumberToObject(o, "max_workers", m->conf->max_workers);
    cJSON_AddNumberToObject(o, "workers", pools_live_total(&m->pools));
    cJSON *pq = cJSON_AddArrayToObject(o, "paused_queues");
    for (int i = 0; i < m->npaused_queues; i++) cJSON_AddItemToArray(pq, cJSON_CreateString(m->paused_queues[i]));
}

/* A pool's size: its workers by state, target, bounds, pin and fleet share. */
static void add_size(master_t *m, const pool_t *p, const pool_counts_t *c, cJSON *po)
{
    cJSON_AddNumberToObject(po, "workers", c->live);
    add_states(po, c, "paused_workers");
    cJSON_AddNumberToObject(po, "target", p->target);
    if (p->conf.balance == BALANCE_AUTO) {
        cJSON_AddNumberToObject(po, "min", p->conf.min_processes);
        cJSON_AddNumberToObject(po, "max", p->conf.max_processes);
    } else {
        cJSON_AddNumberToObject(po, "min", p->conf.processes);
        cJSON_AddNumberToObject(po, "max", p->conf.processes);
    }
    if (p->pinned >= 0)
        cJSON_AddNumberToObject(po, "pinned", p->pinned);
    else
        cJSON_AddNullToObject(po, "pinned");
    add_budget(m, p, po, false);
}

/* A pool's queues: their lengths and pauses. */
static cJSON *queues_json(master_t *m, const pool_t *p)
{
    cJSON *qa = cJSON_CreateArray();
    uint32_t cw = pool_control_word(&m->pools, p);
    for (int q = 0; q < p->conf.nqueues; q++) {
        cJSON *qo = cJSON_CreateObject();
        cJSON_AddItemToArray(qa, qo);
        cJSON_AddStringToObject(qo, "name", p->conf.queues[q]);
        cJSON_AddNumberToObject(qo, "ready", (double)p->q[q].ready);
        cJSON_AddNumberToObject(qo, "delayed", (double)p->q[q].delayed);
        cJSON_AddNumberToObject(qo, "reserved", (double)p->q[q].reserved);
        cJSON_AddBoolToObject(qo, "paused", (cw & (1u << q)) || (cw & SB_CTL_PAUSE_ALL));
        cJSON_AddBoolToObject(qo, "laravel_paused", p->q[q].laravel_paused);
    }
    return qa;
}

/* Why it takes no jobs ("waiting"; null while it does) and whether its app
 * is down for maintenance. */
static void add_waiting(cJSON *po, const pool_t *p)
{
    if (p->paused)
        cJSON_AddStringToObject(po, "waiting", "paused");
    else if (p->down)
        cJSON_AddStringToObject(po, "waiting", "down (maintenance)");
    else
        cJSON_AddNullToObject(po, "waiting");
    cJSON_AddBoolToObject(po, "maintenance", p->down);
}

/* Jobs done and failed, their rates, and the children's recycles and crashes. */
static void add_work(cJSON *po, const pool_t *p, const pool_counts_t *c)
{
    cJSON_AddNumberToObject(po, "jobs_done", (double)c->jobs_done);
    cJSON_AddNumberToObject(po, "jobs_failed", (double)c->jobs_failed);
    cJSON_AddNumberToObject(po, "jobs_per_min", round(p->jobs_per_min * 10) / 10);
    cJSON_AddNumberToObject(po, "failed_per_min", round(p->failed_per_min * 10) / 10);
    cJSON_AddNumberToObject(po, "mean_runtime_ms", round(p->mean_runtime_ms * 10) / 10);
    cJSON_AddNumberToObject(po, "memory_recycles", (double)p->memory_recycles);
    cJSON_AddNumberToObject(po, "crashes", (double)p->crashes);
}

/* Every child of the pool ("children"). */
static void add_children(master_t *m, pool_t *p, cJSON *po)
{
    cJSON *ca = cJSON_AddArrayToObject(po, "children");
    for (int j = 0; j < p->nchildren; j++) cJSON_AddItemToArray(ca, child_json(m, p, &p->children[j]));
}

static cJSON *pool_json(master_t *m, pool_t *p, unsigned flags)
{
    pool_counts_t c;
    pool_counts(&m->pools, p, &c);
    cJSON *po = cJSON_CreateObject();
    cJSON_AddStringToObject(po, "name", p->conf.name);
    cJSON_AddStringToObject(po, "state", pool_state(m, p));
    cJSON_AddBoolToObject(po, "paused", pool_is_paused(&m->pools, p));
    add_waiting(po, p);
    cJSON_AddStringToObject(po, "kind", p->conf.handler_type == HANDLER_NONE ? "command"
                                        : p->conf.handler_type == HANDLER_EXEC ? "exec" : "pipe");
    cJSON_AddStringToObject(po, "balance", p->conf.balance == BALANCE_AUTO ? "auto" : "off");
    add_size(m, p, &c, po);
    add_work(po, p, &c);
    cJSON_AddBoolToObject(po, "counts_fresh", p->have_counts);
    cJSON_AddStringToObject(po, "counts_from",
                            !p->conf.app_driver ? "redis" : pool_agent_sizes(&p->conf) ? "app agent" : "none");
    cJSON_AddBoolToObject(po, "app_failer", pool_preloads(&p->conf)); /* GET /api/failed?app= reads it */
    zygote_json(po, p);
    agent_json(po, p);
    cJSON_AddItemToObject(po, "job_stats", job_stats_json(p, flags & STATUS_RAW));
    if (flags & STATUS_RAW) cJSON_AddItemToObject(po, "exits", exits_json(p));
    cJSON_AddItemToObject(po, "queues", queues_json(m, p));
    if (flags & STATUS_VERBOSE) add_children(m, p, po);
    return po;
}

/* The master's own connections' reconnects and every child's. */
static uint64_t redis_reconnects(master_t *m)
{
    uint64_t n = mconn_reconnects(m);
    for (int i = 0; i < m->pools.n; i++) n += pool_redis_reconnects(&m->pools, m->pools.v[i]);
    return n;
}

cJSON *status_json(master_t *m, unsigned flags)
{
    cJSON *o = cJSON_CreateObject();
    add_master(o, m);
    cJSON *arr = cJSON_AddArrayToObject(o, "pools");
    for (int i = 0; i < m->pools.n; i++) cJSON_AddItemToArray(arr, pool_json(m, m->pools.v[i], flags));
    cJSON_AddNumberToObject(o, "redis_reconnects", (double)redis_reconnects(m));
    if (m->conf->nlimits) cJSON_AddItemToObject(o, "limits", limiting_json(m));
    cJSON_AddItemToObject(o, "paused_classes", classpause_json(m));
    return o;
}

cJSON *status_progress_json(master_t *m, const char *event)
{
    cJSON *o = reply_ok();
    cJSON_AddStringToObject(o, "event", event);
    cJSON_AddNumberToObject(o, "children", pools_live_total(&m->pools));
    cJSON *jobs = cJSON_AddArrayToObject(o, "running");
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        for (int j = 0; j < p->nchildren; j++) {
            sb_child_t s;
            sb_read(&m->sb.slots[p->children[j].sb], &s);
            if (s.state != SB_BUSY || !s.job_started_ms) continue;
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "pool", p->conf.name);
            cJSON_AddNumberToObject(r, "pid", p->children[j].pid);
            cJSON_AddStringToObject(r, "job", s.job_name);
            cJSON_AddStringToObject(r, "id", s.job_id);
            cJSON_AddNumberToObject(r, "running_ms", (double)(wall_ms() - s.job_started_ms));
            cJSON_AddItemToArray(jobs, r);
        }
    }
    return o;
}

/* One pool of the fleet record, its counts added to t: every child, for a
 * dashboard on any host (a few hundred bytes each). */
static cJSON *fleet_pool_json(master_t *m, pool_t *p, bool paused, pool_counts_t *t)
{
    pool_counts_t c;
    pool_counts(&m->pools, p, &c);
    t->live += c.live, t->busy += c.busy, t->idle += c.idle, t->starting += c.starting;
    t->stopping += c.stopping, t->running += c.running, t->paused += c.paused;
    cJSON *po = cJSON_CreateObject();
    cJSON_AddStringToObject(po, "name", p->conf.name);
    cJSON_AddBoolToObject(po, "paused", paused);
    cJSON_AddNumberToObject(po, "workers", c.live);
    cJSON_AddNumberToObject(po, "busy", c.busy);
    cJSON_AddNumberToObject(po, "target", p->target);
    add_budget(m, p, po, true);
    zygote_json(po, p);
    add_children(m, p, po);
    return po;
}

cJSON *status_fleet_record(master_t *m, const char *id)
{
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddNumberToObject(o, "pid", getpid());
    cJSON_AddStringToObject(o, "version", QPOOL_VERSION);
    cJSON_AddStringToObject(o, "config", m->conf->path);
    cJSON_AddNumberToObject(o, "started_at", (double)(m->started_wall_ms / 1000));
    cJSON_AddNumberToObject(o, "uptime_s", (double)((wall_ms() - m->started_wall_ms) / 1000));
    cJSON_AddNumberToObject(o, "written_ms", (double)wall_ms()); /* what each job's running_ms is as of */
    int npools = 0, npaused = 0;
    pool_counts_t t = {0};
    cJSON *pools = cJSON_CreateArray();
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->removed) continue;
        bool paused = pool_is_paused(&m->pools, p);
        npools++;
        npaused += paused;
        cJSON_AddItemToArray(pools, fleet_pool_json(m, p, paused, &t));
    }
    bool paused = m->pools.all_paused || (npools && npaused == npools);
    cJSON_AddStringToObject(o, "state", m->stopping ? "stopping" : paused ? "paused" : "running");
    cJSON_AddBoolToObject(o, "paused", paused);
    cJSON_AddNumberToObject(o, "max_workers", m->conf->max_workers);
    cJSON *w = cJSON_AddObjectToObject(o, "workers");
    cJSON_AddNumberToObject(w, "total", pools_live_total(&m->pools));
    add_states(w, &t, "paused");
    cJSON_AddItemToObject(o, "pools", pools);
    return o;
}
