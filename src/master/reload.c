/*
 * reload.c - the reload verb (see master.h): the config file read again and
 * applied to the running pools (new ones started, changed ones rolled,
 * resized ones resized, removed ones drained), the HTTP endpoint restarted
 * for the new settings, the monitor's connections dropped. A file that
 * does not load leaves the old config running. Also the pools of a config
 * at the start (master_add_pool), which master_run shares with it.
 */
#include "master/master.h"
#include "master/http_endpoint.h"
#include "master/monitor.h"
#include "core/log.h"
#include "core/sdnotify.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int added, changed, resized, removed;
} reload_counts_t;

int master_check_privileges(const qconf_t *c)
{
    int bad = 0;
    if (geteuid() == 0) return 0;
    for (int i = 0; i < c->npools; i++) {
        const pool_conf_t *p = &c->pools[i];
        if ((p->has_uid && p->uid != geteuid()) || (p->has_gid && p->gid != getegid())) {
            fprintf(stderr, "%s:%d: pool %s: user/group switching needs qpool to run as root\n",
                    c->path, p->line, p->name);
            bad++;
        }
    }
    return bad ? -1 : 0;
}

void master_add_pool(master_t *m, const pool_conf_t *pc)
{
    if (geteuid() == 0 && !pc->user)
        log_warn("pool %s has no user: its children run as root; set user = \"...\" (%s:%d)", pc->name,
                 m->conf->path, pc->line);
    pool_t *p = pool_new(pc, m->conf->metrics_job_classes, m->conf->job_history_size);
    p->paused = m->pools.all_paused; /* a pool a reload adds joins a pause of everything */
    m->pools.v = xrealloc(m->pools.v, sizeof *m->pools.v * (size_t)(m->pools.n + 1));
    m->pools.v[m->pools.n++] = p;
}

/* The new file is refused (nc NULL: it did not load; else a pool needs
 * root): the errors logged and in *msg; the old config keeps running. */
static int refuse(master_t *m, qconf_t *nc, conf_errors_t *errs, char **msg)
{
    sbuf_t b;
    sbuf_init(&b);
    for (int i = 0; i < errs->n; i++) sbuf_printf(&b, "%s%s", i ? "\n" : "", errs->msgs[i]);
    if (nc && !errs->n) sbuf_puts(&b, "user/group switching needs qpool to run as root");
    log_error("reload of %s failed; the old configuration keeps running:", m->conf->path);
    for (int i = 0; i < errs->n; i++) log_error("  %s", errs->msgs[i]);
    if (msg) *msg = sbuf_steal(&b);
    else sbuf_free(&b);
    conf_errors_free(errs);
    config_free(nc);
    sdn_send("READY=1");
    return -1;
}

static bool pool_redis_same(const qconf_t *a, const qconf_t *b, const pool_conf_t *p)
{
    return redis_conf_same(config_redis(a, p->connection), config_redis(b, p->connection)) &&
           redis_conf_same(config_redis(a, p->cache_connection), config_redis(b, p->cache_connection));
}

/* Off: the new size. Auto: stay where the balancer had it, within the new
 * bounds; it takes over from there at its next pass. Pinned: as pinned. */
static void resize(pool_t *p, const pool_conf_t *np)
{
    if (p->pinned < 0) {
        if (np->balance == BALANCE_OFF)
            p->target = np->processes;
        else if (p->target < np->min_processes)
            p->target = np->min_processes;
        else if (p->target > np->max_processes)
            p->target = np->max_processes;
    }
    p->below_since_ms = 0;
    log_info("reload: pool %s resized", np->name);
}

/* One pool of the new file: started when new, its children replaced one at
 * a time when its settings (or its connections') changed, resized. */
static void reload_pool(master_t *m, const qconf_t *oc, const qconf_t *nc, const pool_conf_t *np,
                        reload_counts_t *n)
{
    pool_t *p = master_pool(m, np->name);
    if (!p) {
        master_add_pool(m, np);
        n->added++;
        log_info("reload: new pool %s", np->name);
        return;
    }
    bool same = pool_conf_same_except_size(&p->conf, np) && pool_redis_same(oc, nc, np);
    bool same_size = pool_conf_same_size(&p->conf, np);
    if (same && same_size) return;
    pool_conf_t old = p->conf;
    pool_conf_copy(&p->conf, np);
    pool_conf_free(&old);
    if (!same) {
        pool_request_roll(p);
        n->changed++;
        log_info("reload: pool %s changed; replacing its children one at a time", np->name);
    }
    if (!same_size) {
        n->resized++;
        resize(p, np);
    }
}

/* The pools the new file no longer names drain (forgotten once empty). */
static void drain_removed(master_t *m, const qconf_t *nc, reload_counts_t *n)
{
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (!p->removed && config_pool_index(nc, p->conf.name) < 0) {
            p->removed = true;
            n->removed++;
            log_info("reload: pool %s removed; its children drain", p->conf.name);
        }
    }
}

/* The new config is the master's: its limits, and each pool's pending job
 * records sized anew when job_history_size changed. */
static void take_config(master_t *m, const qconf_t *oc, qconf_t *nc)
{
    m->conf = nc;
    m->pools.conf = nc;
    m->pools.max_workers = nc->max_workers;
    m->pools.stop_timeout_ms = (int64_t)(nc->shutdown_timeout * 1000);
    if (nc->job_history_size != oc->job_history_size)
        for (int i = 0; i < m->pools.n; i++) {
            /* what was pending is dropped: a sample, not a count */
            jobhist_pending_free(&m->pools.v[i]->jobs);
            jobhist_pending_init(&m->pools.v[i]->jobs, nc->job_history_size);
        }
}

static void report(const qconf_t *nc, const reload_counts_t *n, int http_rv, const char *http_err, char **msg)
{
    log_info("reloaded %s: %d new, %d changed, %d resized, %d removed pools", nc->path, n->added,
             n->changed, n->resized, n->removed);
    if (msg)
        *msg = xasprintf("reloaded: %d new, %d changed, %d resized, %d removed pools%s%s%s", n->added, n->changed,
                         n->resized, n->removed, http_rv < 0 ? "; but the HTTP endpoint is off: " : "",
                         http_rv < 0 ? http_err : "", http_rv < 0 ? " (the rest of the config is in effect)" : "");
}

int master_reload(master_t *m, char **msg)
{
    conf_errors_t errs;
    sdn_send("RELOADING=1");
    qconf_t *nc = config_load(m->conf->path, &errs);
    if (!nc || master_check_privileges(nc) < 0) return refuse(m, nc, &errs, msg);
    for (int i = 0; i < errs.nwarn; i++) log_warn("%s", errs.warnings[i]);
    conf_errors_free(&errs);

    qconf_t *oc = m->conf;
    if (strcmp(oc->pid_file, nc->pid_file) || strcmp(oc->control_socket, nc->control_socket))
        log_warn("reload: pid_file and control_socket changes take effect at the next start");
    log_set_level(nc->log_level);
    log_set_format(nc->log_format);

    reload_counts_t n = {0};
    for (int i = 0; i < nc->npools; i++) reload_pool(m, oc, nc, &nc->pools[i], &n);
    drain_removed(m, nc, &n);
    take_config(m, oc, nc);
    /* nothing runs with the old config's secrets any more: gone from the
     * master (and the workers it forks from now on) before oc is freed
     * (review #6; the HTTP process is a fresh image and never had them) */
    config_wipe_secrets(oc, NULL);
    char http_err[600];
    int http_rv = http_reload(m, oc, http_err, sizeof http_err);
    config_free(oc);
    monitor_reset(m);
    master_apply_queue_pauses(m);
    report(nc, &n, http_rv, http_err, msg);
    sdn_send("READY=1");
    return http_rv < 0 ? 1 : 0;
}
