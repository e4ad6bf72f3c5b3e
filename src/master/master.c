/*
 * master.c - the master loop (see master.h).
 *
 * Signals (all through one signalfd, so no code runs in signal context):
 *   SIGTERM, SIGINT  graceful stop: spawn nothing more, SIGTERM every child,
 *                    wait up to shutdown_timeout, then SIGKILL the process
 *                    groups still there. A second one means fast stop.
 *   SIGQUIT          fast stop: SIGKILL every child's process group now.
 *   SIGHUP           reload; an invalid file is logged and the old config runs on.
 *   SIGUSR2/SIGCONT  pause/resume every child (forwarded).
 *   SIGCHLD          reap and respawn.
 *
 * The loop sleeps in epoll_wait until a signal, a control request or the
 * next deadline (respawn backoff, balancer pass, shutdown timeout, watchdog).
 */
#include "master/master.h"
#include "master/monitor.h"
#include "master/control.h"
#include "master/alerting.h"
#include "master/budgeting.h"
#include "master/http_endpoint.h"
#include "core/log.h"
#include "os/proc.h"
#include "redis/rconn.h"
#include "core/safefile.h"
#include "redis/queue.h"
#include "core/sdnotify.h"
#include "core/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAUSE_RECHECK_MS 100

static void master_title(master_t *m);

static int check_privileges(const qconf_t *c)
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

static void add_pool(master_t *m, const pool_conf_t *pc)
{
    if (geteuid() == 0 && !pc->user)
        log_warn("pool %s has no user: its children run as root; set user = \"...\" (%s:%d)", pc->name,
                 m->conf->path, pc->line);
    pool_t *p = pool_new(pc, m->conf->metrics_job_classes, m->conf->job_history_size);
    p->paused = m->pools.all_paused; /* a pool a reload adds joins a pause of everything */
    m->pools.v = xrealloc(m->pools.v, sizeof *m->pools.v * (size_t)(m->pools.n + 1));
    m->pools.v[m->pools.n++] = p;
}

static void forget_drained_pools(master_t *m)
{
    for (int i = 0; i < m->pools.n;) {
        pool_t *p = m->pools.v[i];
        if (p->removed && p->nchildren == 0) {
            log_info("pool %s: removed", p->conf.name);
            pool_free(p);
            m->pools.v[i] = m->pools.v[--m->pools.n];
        } else
            i++;
    }
}

/* ------------------------------------------------------------ status line */

static void status_summary(master_t *m, char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < m->pools.n && o < n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->removed) continue;
        o += (size_t)snprintf(buf + o, n - o, "%s%s %d/%d", o ? ", " : "", p->conf.name,
                              pool_live(p), p->target);
        if (p->paused && o < n) o += (size_t)snprintf(buf + o, n - o, " paused");
    }
    if (m->pools.all_paused && o < n) o += (size_t)snprintf(buf + o, n - o, "; all paused");
    if (m->stopping && o < n)
        snprintf(buf + o, n - o, "; stopping, %d children left", pools_live_total(&m->pools));
}

static void master_title(master_t *m)
{
    char s[400];
    status_summary(m, s, sizeof s);
    if (strcmp(s, m->last_status) == 0) return;
    snprintf(m->last_status, sizeof m->last_status, "%s", s);
    proc_title("qpool: master [%s]", s);
    sdn_send("STATUS=%s", s);
}

/* ------------------------------------------------------------ stop / pause */

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
        if (m->pools.all_paused) {
            m->pools.all_paused = false;
        }
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
static int pause_everything(master_t *m, int source, bool on)
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

int master_pause(master_t *m, const pause_scope_t *scope, int source, bool on, char *err, size_t errn)
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
    monitor_request_balance(m);
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

/* ------------------------------------------------------------ reload */

static bool pool_redis_same(const qconf_t *a, const qconf_t *b, const pool_conf_t *p)
{
    return redis_conf_same(config_redis(a, p->connection), config_redis(b, p->connection)) &&
           redis_conf_same(config_redis(a, p->cache_connection), config_redis(b, p->cache_connection));
}

int master_reload(master_t *m, char **msg)
{
    conf_errors_t errs;
    sdn_send("RELOADING=1");
    qconf_t *nc = config_load(m->conf->path, &errs);
    if (!nc || check_privileges(nc) < 0) {
        sbuf_t b;
        sbuf_init(&b);
        for (int i = 0; i < errs.n; i++) sbuf_printf(&b, "%s%s", i ? "\n" : "", errs.msgs[i]);
        if (nc && !errs.n) sbuf_puts(&b, "user/group switching needs qpool to run as root");
        log_error("reload of %s failed; the old configuration keeps running:", m->conf->path);
        for (int i = 0; i < errs.n; i++) log_error("  %s", errs.msgs[i]);
        if (msg) *msg = sbuf_steal(&b);
        else sbuf_free(&b);
        conf_errors_free(&errs);
        config_free(nc);
        sdn_send("READY=1");
        return -1;
    }
    for (int i = 0; i < errs.nwarn; i++) log_warn("%s", errs.warnings[i]);
    conf_errors_free(&errs);

    qconf_t *oc = m->conf;
    if (strcmp(oc->pid_file, nc->pid_file) || strcmp(oc->control_socket, nc->control_socket))
        log_warn("reload: pid_file and control_socket changes take effect at the next start");
    log_set_level(nc->log_level);
    log_set_format(nc->log_format);

    int added = 0, changed = 0, removed = 0, resized = 0;
    for (int i = 0; i < nc->npools; i++) {
        const pool_conf_t *np = &nc->pools[i];
        pool_t *p = master_pool(m, np->name);
        if (!p) {
            add_pool(m, np);
            added++;
            log_info("reload: new pool %s", np->name);
            continue;
        }
        bool same = pool_conf_same_except_size(&p->conf, np) && pool_redis_same(oc, nc, np);
        bool same_size = pool_conf_same_size(&p->conf, np);
        if (same && same_size) continue;
        pool_conf_t old = p->conf;
        pool_conf_copy(&p->conf, np);
        pool_conf_free(&old);
        if (!same) {
            pool_request_roll(p);
            changed++;
            log_info("reload: pool %s changed; replacing its children one at a time", np->name);
        }
        if (!same_size) {
            resized++;
            /* Off: the new size. Auto: stay where the balancer had it, within
             * the new bounds; it takes over from there at its next pass. */
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
    }
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (!p->removed && config_pool_index(nc, p->conf.name) < 0) {
            p->removed = true;
            removed++;
            log_info("reload: pool %s removed; its children drain", p->conf.name);
        }
    }
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
    /* nothing runs with the old config's secrets any more: gone from the
     * master (and the workers it forks from now on) before oc is freed
     * (review #6; the HTTP process is a fresh image and never had them) */
    config_wipe_secrets(oc, NULL);
    char http_err[600];
    int http_rv = http_reload(m, oc, http_err, sizeof http_err);
    config_free(oc);
    monitor_reset(m);
    master_apply_queue_pauses(m);
    log_info("reloaded %s: %d new, %d changed, %d resized, %d removed pools", nc->path, added,
             changed, resized, removed);
    if (msg)
        *msg = xasprintf("reloaded: %d new, %d changed, %d resized, %d removed pools%s%s%s", added, changed, resized,
                         removed, http_rv < 0 ? "; but the HTTP endpoint is off: " : "", http_rv < 0 ? http_err : "",
                         http_rv < 0 ? " (the rest of the config is in effect)" : "");
    sdn_send("READY=1");
    return http_rv < 0 ? 1 : 0;
}

/* ------------------------------------------------------------ signals */

static int setup_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGCONT};
    for (size_t i = 0; i < ARRAY_LEN(sigs); i++) sigaddset(&set, sigs[i]);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) return -1;
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void reap(master_t *m)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (!http_reaped(m, pid, status) && !alerting_reaped(m, pid))
            pools_child_exited(&m->pools, pid, status, mono_ms());
}

static void handle_signals(master_t *m)
{
    struct signalfd_siginfo si;
    while (read(m->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        switch (si.ssi_signo) {
        case SIGCHLD:
            reap(m);
            break;
        case SIGTERM:
        case SIGINT:
            if (m->stopping)
                master_begin_stop(m, true);
            else {
                log_info("received SIG%s", sigabbrev_np((int)si.ssi_signo));
                master_begin_stop(m, false);
            }
            break;
        case SIGQUIT:
            master_begin_stop(m, true);
            break;
        case SIGHUP:
            log_info("received SIGHUP: reloading %s", m->conf->path);
            if (!m->stopping) master_reload(m, NULL);
            break;
        case SIGUSR2:
        case SIGCONT: {
            /* exactly `qpool pause` / `qpool continue` with no scope */
            pause_scope_t all = {0};
            char err[128];
            if (!m->stopping) master_pause(m, &all, PAUSE_FROM_SIGNAL, si.ssi_signo == SIGUSR2, err, sizeof err);
            break;
        }
        default:
            break;
        }
    }
    reap(m); /* SIGCHLDs coalesce; never leave a zombie behind */
}

/* ------------------------------------------------------------ main */

static int64_t min_due(int64_t a, int64_t b)
{
    if (!a) return b;
    if (!b) return a;
    return a < b ? a : b;
}

int master_run(const char *config_path)
{
    conf_errors_t errs;
    sdn_init(); /* first: the app describes of the load must not inherit NOTIFY_SOCKET */
    qconf_t *conf = config_load(config_path, &errs);
    if (!conf) {
        conf_errors_print(&errs, stderr);
        conf_errors_free(&errs);
        return QPOOL_EX_CONFIG;
    }
    log_init("master");
    log_set_level(conf->log_level);
    log_set_format(conf->log_format);
    for (int i = 0; i < errs.nwarn; i++) log_warn("%s", errs.warnings[i]);
    conf_errors_free(&errs);
    if (check_privileges(conf) < 0) {
        config_free(conf);
        return QPOOL_EX_CONFIG;
    }

    master_t *m = xcalloc(1, sizeof *m);
    m->conf = conf;
    m->ctl = NULL;
    m->sfd = -1;

    pid_t other = 0;
    char err[512];
    m->pid_fd = safefile_pidfile(conf->pid_file, &other, err, sizeof err);
    if (m->pid_fd < 0) {
        if (m->pid_fd == -2)
            fprintf(stderr, "qpool: another qpool (pid %d) is running with pid file %s\n", (int)other,
                    conf->pid_file);
        else
            fprintf(stderr, "qpool: refusing the pid file: %s\n", err);
        config_free(conf);
        free(m);
        return 1;
    }

    if (sb_create(&m->sb, QPOOL_MAX_WORKERS_LIMIT) < 0) {
        if (errno == EINVAL)
            log_error("cannot map the scoreboard: pages here are %ld bytes, a slot is %d; build with "
                      "-DQPOOL_SLOT_SIZE=%ld so that each worker can be confined to its own slot",
                      sysconf(_SC_PAGESIZE), SB_SLOT_SIZE, sysconf(_SC_PAGESIZE));
        else
            log_error("cannot map the scoreboard: %s", strerror(errno));
        safefile_pidfile_remove(m->conf->pid_file, m->pid_fd);
        config_free(conf);
        free(m);
        return 1;
    }
    m->sfd = setup_signals();
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (m->sfd < 0 || m->epfd < 0) {
        log_error("cannot set up signals: %s", strerror(errno));
        return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = m->sfd};
    epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->sfd, &ev);
    if (control_listen(m) < 0) {
        safefile_pidfile_remove(m->conf->pid_file, m->pid_fd);
        return 1;
    }

    m->pools.sb = &m->sb;
    m->pools.max_workers = conf->max_workers;
    m->pools.stop_timeout_ms = (int64_t)(conf->shutdown_timeout * 1000);
    m->pools.master_pid = getpid();
    gethostname(m->pools.host, sizeof m->pools.host - 1);
    m->pools.epfd = m->epfd;
    m->started_wall_ms = wall_ms();
    m->pools.conf = conf;
    for (int i = 0; i < conf->npools; i++) add_pool(m, &conf->pools[i]);
    monitor_reset(m);

    http_start(m, control_adopt); /* an error is logged; supervision goes on without HTTP */
    log_info("qpool %s started with %d pools from %s", "master", conf->npools, conf->path);
    monitor_check_maintenance(m); /* a down app's pools start paused: no job taken before the first tick */
    int64_t due = pools_maintain(&m->pools, mono_ms());
    master_title(m);
    sdn_send("READY=1\nSTATUS=%s\nMAINPID=%d", m->last_status, (int)getpid());

    int64_t wd = sdn_watchdog_interval_ms();
    bool pause_pending = false;
    for (;;) {
        int64_t now = mono_ms();
        int64_t next = min_due(due, now + 1000);
        next = min_due(next, monitor_next_due(m));
        next = min_due(next, http_next_due(m));
        if (wd) next = min_due(next, m->last_watchdog_ms + wd);
        if (pause_pending) next = min_due(next, now + PAUSE_RECHECK_MS);
        if (m->stopping && !m->fast) next = min_due(next, m->stop_deadline_ms);
        int timeout = next > now ? (int)(next - now) : 0;

        struct epoll_event evs[16];
        int n = epoll_wait(m->epfd, evs, 16, timeout);
        if (n < 0 && errno != EINTR) {
            log_error("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.fd == m->sfd)
                handle_signals(m);
            else if (!pools_stats_event(&m->pools, evs[i].data.fd))
                control_event(m, evs[i].data.fd, evs[i].events);
        }
        now = mono_ms();
        if (!m->stopping) {
            if (now >= monitor_next_due(m)) monitor_tick(m, now);
            due = pools_maintain(&m->pools, now);
        } else if (now >= monitor_next_due(m))
            monitor_tick_stopping(m, now); /* fleet leases cover the jobs still finishing */
        pause_pending = pools_apply_pause(&m->pools);
        forget_drained_pools(m);
        if (wd && now - m->last_watchdog_ms >= wd) {
            sdn_send("WATCHDOG=1");
            m->last_watchdog_ms = now;
        }
        if (m->stopping) {
            if (!m->fast && now >= m->stop_deadline_ms) {
                log_warn("shutdown_timeout (%g s) passed: killing %d children", m->conf->shutdown_timeout,
                         pools_live_total(&m->pools));
                m->fast = true;
                pools_kill_all(&m->pools);
            }
            if (pools_live_total(&m->pools) == 0) break;
        }
        control_tick(m, now);
        http_tick(m, now);
        master_title(m);
    }
    log_info("all children gone; exiting");
    control_notify_waiters(m);
    http_close(m);
    control_close(m, true);
    monitor_goodbye(m);
    for (int i = 0; i < m->npaused_queues; i++) free(m->paused_queues[i]);
    free(m->paused_queues);
    monitor_free(m);
    budgeting_free(m);
    alerting_free(m);
    safefile_pidfile_remove(m->conf->pid_file, m->pid_fd);
    for (int i = 0; i < m->pools.n; i++) pool_free(m->pools.v[i]);
    free(m->pools.v);
    sb_destroy(&m->sb);
    close(m->sfd);
    close(m->epfd);
    config_free(m->conf);
    free(m);
    return 0;
}
