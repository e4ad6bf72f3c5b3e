/*
 * verbs.c - the master verbs (see master.h): stop, pause, scale and
 * restart (reload is reload.c). Signals (master.c), the control socket
 * (control.c, which serves the HTTP process's actions too) and the
 * monitor (a pool's app down for maintenance) change the master's state
 * only through these; none of them waits on Redis or calls back into its
 * callers.
 */
#include "master/master.h"
#include "master/budgeting.h"
#include "core/log.h"
#include "core/sdnotify.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void master_apply_queue_pauses(master_t *m)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        uint32_t bits = 0;
        for (int q = 0; q < p->conf.nqueues; q++)
            for (int k = 0; k < m->npaused_queues; k++)
                if (!strcmp(p->conf.queues[q], m->paused_queues[k])) bits |= 1u << q;
        p->queue_paused = bits;
    }
}

pool_t *master_pool(master_t *m, const char *name)
{
    for (int i = 0; i < m->pools.n; i++)
        if (!m->pools.v[i]->removed && !strcmp(m->pools.v[i]->conf.name, name)) return m->pools.v[i];
    return NULL;
}

void master_begin_stop(master_t *m, bool fast)
{
    int64_t now = mono_ms();
    if (!m->stopping) {
        m->stopping = true;
        m->pools.stopping = true;
        m->stop_deadline_ms = now + (int64_t)(m->conf->shutdown_timeout * 1000);
        sdn_send("STOPPING=1");
        if (!fast)
            log_info("graceful stop: waiting up to %g s for %d children", m->conf->shutdown_timeout,
                     pools_live_total(&m->pools));
        /* Resume paused children so each can act on its SIGTERM. */
        m->pools.all_paused = false;
        for (int i = 0; i < m->pools.n; i++) m->pools.v[i]->paused = m->pools.v[i]->down = false;
        pools_apply_pause(&m->pools);
        pools_stop_all(&m->pools, now);
    }
    if (fast && !m->fast) {
        m->fast = true;
        log_warn("fast stop: killing %d children", pools_live_total(&m->pools));
        pools_kill_all(&m->pools);
    }
}

static const char *const SOURCES[] = {"a signal", "the control socket", "HTTP",
                                      "the app is down for maintenance"};

static bool queue_known(master_t *m, const char *q)
{
    for (int i = 0; i < m->pools.n; i++)
        for (int j = 0; j < m->pools.v[i]->conf.nqueues; j++)
            if (!strcmp(m->pools.v[i]->conf.queues[j], q)) return true;
    return false;
}

static bool names_add(char ***v, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp((*v)[i], s)) return false;
    *v = xrealloc(*v, sizeof **v * (size_t)(*n + 1));
    (*v)[(*n)++] = xstrdup(s);
    return true;
}

static bool names_remove(char ***v, int *n, const char *s)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp((*v)[i], s)) {
            free((*v)[i]);
            (*v)[i] = (*v)[--*n];
            return true;
        }
    return false;
}

/* Everything: every pool paused, and pools a reload adds join paused;
 * resuming everything clears every pause an operator made (pools, queues). */
static int pause_everything(master_t *m, enum pause_source source, bool on)
{
    int changed = 0;
    for (int i = 0; i < m->pools.n; i++)
        if (m->pools.v[i]->paused != on) {
            m->pools.v[i]->paused = on;
            changed++;
        }
    if (!on)
        while (m->npaused_queues) changed += names_remove(&m->paused_queues, &m->npaused_queues, m->paused_queues[0]);
    m->pools.all_paused = on;
    if (changed || on) log_info("%s every pool (%s)", on ? "pausing" : "resuming", SOURCES[source]);
    return changed;
}

int master_pause(master_t *m, const pause_scope_t *scope, enum pause_source source, bool on, char *err, size_t errn)
{
    for (int i = 0; i < scope->npools; i++)
        if (!master_pool(m, scope->pools[i])) {
            snprintf(err, errn, "no pool named %s", scope->pools[i]);
            return -1;
        }
    for (int i = 0; i < scope->nqueues; i++)
        if (!queue_known(m, scope->queues[i])) {
            snprintf(err, errn, "no pool works a queue named %s", scope->queues[i]);
            return -1;
        }
    if (m->stopping) {
        snprintf(err, errn, "the master is stopping");
        return -1;
    }
    int changed = 0;
    if (!scope->npools && !scope->nqueues) changed = pause_everything(m, source, on);
    for (int i = 0; i < scope->npools; i++) {
        pool_t *p = master_pool(m, scope->pools[i]);
        bool *flag = source == PAUSE_FROM_MAINTENANCE ? &p->down : &p->paused;
        if (*flag == on) continue;
        *flag = on;
        changed++;
        if (!on && source != PAUSE_FROM_MAINTENANCE) m->pools.all_paused = false; /* not everything is paused any more */
        if (source == PAUSE_FROM_MAINTENANCE)
            log_info("pool %s: %s", p->conf.name,
                     on ? "paused: its Laravel app is down for maintenance (php artisan down)"
                        : "resumed: its Laravel app is up again");
        else
            log_info("pool %s: %s (%s)", p->conf.name, on ? "paused" : "resumed", SOURCES[source]);
    }
    for (int i = 0; i < scope->nqueues; i++) {
        bool c = on ? names_add(&m->paused_queues, &m->npaused_queues, scope->queues[i])
                    : names_remove(&m->paused_queues, &m->npaused_queues, scope->queues[i]);
        if (!c) continue;
        changed++;
        log_info("queue %s: %s (%s)", scope->queues[i], on ? "paused" : "resumed", SOURCES[source]);
    }
    master_apply_queue_pauses(m);
    pools_apply_pause(&m->pools);
    return changed;
}

int master_scale(master_t *m, const char *pool, int n, char *err, size_t errn)
{
    pool_t *p = master_pool(m, pool);
    if (!p) {
        snprintf(err, errn, "no pool named %s", pool);
        return -1;
    }
    if (n > m->conf->max_workers || n < -1) {
        snprintf(err, errn, "n must be a number of workers (0..%d) or \"auto\"", m->conf->max_workers);
        return -1;
    }
    if (p->conf.fleet_max_processes && n > p->conf.fleet_max_processes) {
        snprintf(err, errn, "pool %s shares a fleet budget of %d workers (fleet_max_processes): n must be 0..%d "
                 "or \"auto\"", pool, p->conf.fleet_max_processes, p->conf.fleet_max_processes);
        return -1;
    }
    if (n < 0) {
        p->pinned = -1;
        if (p->conf.balance == BALANCE_OFF) p->target = p->conf.processes;
        log_info("pool %s: size handed back to %s", p->conf.name,
                 p->conf.balance == BALANCE_AUTO ? "the balancer" : "its configured processes");
    } else {
        p->pinned = n;
        /* within what the fleet budget's lease allows now; more as it grows */
        int cap = budgeting_cap(m, p);
        p->target = n < cap ? n : cap;
        if (p->target < n)
            log_info("pool %s: pinned at %d workers; the fleet budget allows %d now", p->conf.name, n, p->target);
        else
            log_info("pool %s: pinned at %d workers", p->conf.name, n);
    }
    /* The loop applies it (within max_workers) on its next pass: nothing
     * here waits on Redis on a client's behalf. */
    m->next_balance_ms = 0;
    return p->target;
}

int master_restart(master_t *m, const char *pool, char *err, size_t errn)
{
    int n = 0;
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->removed || (pool && strcmp(p->conf.name, pool))) continue;
        pool_request_roll(p);
        n++;
    }
    if (pool && !n) {
        snprintf(err, errn, "no pool named %s", pool);
        return -1;
    }
    if (pool)
        log_info("pool %s: rolling restart requested", pool);
    else
        log_info("rolling restart of every pool requested");
    return n;
}

int master_stop_job(master_t *m, const char *uuid, const char *who, char *pool, size_t pn, char *err, size_t errn)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        for (int j = 0; j < p->nchildren; j++) {
            sb_slot_t *slot = &m->sb.slots[p->children[j].sb];
            sb_child_t s;
            sb_read(slot, &s);
            if (s.state != SB_BUSY || !s.job_started_ms || strcmp(s.job_uuid, uuid)) continue;
            sb_stop_ask(slot, s.job_started_ms); /* the worker acts on it, for that job only */
            snprintf(pool, pn, "%s", p->conf.name);
            log_info("stop job %s (%s) of pool %s on worker %d, asked %s %s: its handler is killed as at a timeout",
                     uuid, s.job_name, p->conf.name, (int)p->children[j].pid, strncmp(who, "HTTP", 4) ? "on" : "over",
                     who);
            return (int)p->children[j].pid;
        }
    }
    snprintf(err, errn, "no job %s is running on this master", uuid);
    return -1;
}
