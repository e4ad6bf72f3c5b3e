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
#include "master/limiting.h"
#include "master/classpause.h"
#include "master/http_endpoint.h"
#include "master/mconn.h"
#include "master/mapp.h"
#include "core/log.h"
#include "os/proc.h"
#include "core/safefile.h"
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

static void forget_drained_pools(master_t *m)
{
    for (int i = 0; i < m->pools.n;) {
        pool_t *p = m->pools.v[i];
        if (p->removed && p->nchildren == 0 && !p->watched.n) { /* its watched records forwarded first */
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

/* The config of the start: loaded, logged with its warnings, and refused
 * (NULL) when it does not load or a pool needs root. */
static qconf_t *first_config(const char *config_path)
{
    conf_errors_t errs;
    sdn_init(); /* first: the app describes of the load must not inherit NOTIFY_SOCKET */
    qconf_t *conf = config_load(config_path, &errs);
    if (!conf) {
        conf_errors_print(&errs, stderr);
        conf_errors_free(&errs);
        return NULL;
    }
    log_init("master");
    log_set_level(conf->log_level);
    log_set_format(conf->log_format);
    for (int i = 0; i < errs.nwarn; i++) log_warn("%s", errs.warnings[i]);
    conf_errors_free(&errs);
    if (master_check_privileges(conf) < 0) {
        config_free(conf);
        return NULL;
    }
    return conf;
}

/* The pid file, taken and locked: 0, or -1 (said on stderr). */
static int open_pid_file(master_t *m)
{
    pid_t other = 0;
    char err[512];
    m->pid_fd = safefile_pidfile(m->conf->pid_file, &other, err, sizeof err);
    if (m->pid_fd >= 0) return 0;
    if (m->pid_fd == -2)
        fprintf(stderr, "qpool: another qpool (pid %d) is running with pid file %s\n", (int)other,
                m->conf->pid_file);
    else
        fprintf(stderr, "qpool: refusing the pid file: %s\n", err);
    return -1;
}

static int open_scoreboard(master_t *m)
{
    if (sb_create(&m->sb, QPOOL_MAX_WORKERS_LIMIT) == 0) return 0;
    if (errno == EINVAL)
        log_error("cannot map the scoreboard: pages here are %ld bytes, a slot is %d; build with "
                  "-DQPOOL_SLOT_SIZE=%ld so that each worker can be confined to its own slot",
                  sysconf(_SC_PAGESIZE), SB_SLOT_SIZE, sysconf(_SC_PAGESIZE));
    else
        log_error("cannot map the scoreboard: %s", strerror(errno));
    safefile_pidfile_remove(m->conf->pid_file, m->pid_fd);
    return -1;
}

/* The signalfd and the control socket, in one epoll set. */
static int open_events(master_t *m)
{
    m->sfd = setup_signals();
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (m->sfd < 0 || m->epfd < 0) {
        log_error("cannot set up signals: %s", strerror(errno));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = m->sfd};
    epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->sfd, &ev);
    if (control_listen(m) < 0) {
        safefile_pidfile_remove(m->conf->pid_file, m->pid_fd);
        return -1;
    }
    return 0;
}

/* The master of conf, with its pid file, scoreboard and events; NULL when
 * one of them cannot be had (exit status 1). */
static master_t *master_open(qconf_t *conf)
{
    master_t *m = xcalloc(1, sizeof *m);
    m->conf = conf;
    m->ctl = NULL;
    m->sfd = -1;
    if (open_pid_file(m) < 0 || open_scoreboard(m) < 0) {
        config_free(conf);
        free(m);
        return NULL;
    }
    return open_events(m) < 0 ? NULL : m;
}

/* pools_t.forget_in_worker: in a native worker after its fork, the
 * master's secrets that are not its pool's go (m->conf is the pools'
 * config: pools_t.conf). */
static void forget_in_worker(void *arg, const pool_conf_t *own)
{
    master_t *m = arg;
    config_wipe_secrets_but(m->conf, own);
    mconn_wipe_secrets(m);
    http_forget_token(m);
}

/* The pools started, the HTTP endpoint with them, systemd told: when the
 * pools next need the loop (pools_maintain). */
static int64_t master_start(master_t *m)
{
    qconf_t *conf = m->conf;
    m->pools.sb = &m->sb;
    m->pools.max_workers = conf->max_workers;
    m->pools.stop_timeout_ms = (int64_t)(conf->shutdown_timeout * 1000);
    m->pools.master_pid = getpid();
    gethostname(m->pools.host, sizeof m->pools.host - 1);
    m->pools.epfd = m->epfd;
    m->started_wall_ms = wall_ms();
    m->pools.conf = conf;
    m->pools.forget_in_worker = forget_in_worker;
    m->pools.forget_arg = m;
    for (int i = 0; i < conf->npools; i++) master_add_pool(m, &conf->pools[i]);
    monitor_reset(m);

    http_start(m, control_adopt, control_heard); /* an error is logged; supervision goes on without HTTP */
    log_info("qpool %s started with %d pools from %s", "master", conf->npools, conf->path);
    monitor_check_maintenance(m); /* a down app's pools start paused: no job taken before the first tick */
    int64_t due = pools_maintain(&m->pools, mono_ms());
    master_title(m);
    sdn_send("READY=1\nSTATUS=%s\nMAINPID=%d", m->last_status, (int)getpid());
    return due;
}

/* How long the loop may sleep: until the first of the pools' next need
 * (due), a second from now, the monitor's pass, the HTTP process's
 * respawn, the watchdog (every wd ms), a pause still being applied and
 * the shutdown deadline. */
static int cycle_timeout(const master_t *m, int64_t due, int64_t wd, bool pause_pending)
{
    int64_t now = mono_ms();
    int64_t next = min_due(due, now + 1000);
    next = min_due(next, m->next_balance_ms);
    next = min_due(next, http_next_due(m));
    if (wd) next = min_due(next, m->last_watchdog_ms + wd);
    if (pause_pending) next = min_due(next, now + PAUSE_RECHECK_MS);
    if (m->stopping && !m->fast) next = min_due(next, m->stop_deadline_ms);
    return next > now ? (int)(next - now) : 0;
}

/* Sleep until an event or timeout ms, then serve the events: signals, the
 * workers' stats pipes, the control socket and its clients. -1 when
 * epoll_wait fails (logged). */
static int wait_events(master_t *m, int timeout)
{
    struct epoll_event evs[16];
    int n = epoll_wait(m->epfd, evs, 16, timeout);
    if (n < 0 && errno != EINTR) {
        log_error("epoll_wait: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (evs[i].data.fd == m->sfd)
            handle_signals(m);
        else if (!pools_stats_event(&m->pools, evs[i].data.fd) && !monitor_agent_event(m, evs[i].data.fd))
            control_event(m, evs[i].data.fd, evs[i].events);
    }
    return 0;
}

/* The monitor's pass when due and the pools' spawning and retiring; while
 * stopping, only the fleet leases' pass. Returns the pools' next need. */
static int64_t run_due_work(master_t *m, int64_t now, int64_t due)
{
    if (!m->stopping) {
        if (now >= m->next_balance_ms) monitor_tick(m, now);
        monitor_watch_tick(m, now); /* before a spawn: a new worker's slot has the generation */
        return pools_maintain(&m->pools, now);
    }
    if (now >= m->next_balance_ms) monitor_tick_stopping(m, now); /* fleet leases cover the jobs still finishing */
    return due;
}

/* While stopping: kill what outlives shutdown_timeout; true once every
 * child is gone. */
static bool stop_done(master_t *m, int64_t now)
{
    if (!m->fast && now >= m->stop_deadline_ms) {
        log_warn("shutdown_timeout (%g s) passed: killing %d children", m->conf->shutdown_timeout,
                 pools_live_total(&m->pools));
        m->fast = true;
        pools_kill_all(&m->pools);
    }
    return pools_live_total(&m->pools) == 0;
}

/* The loop, until the last child is gone after a stop. */
static void master_cycle(master_t *m, int64_t due)
{
    int64_t wd = sdn_watchdog_interval_ms();
    bool pause_pending = false;
    for (;;) {
        if (wait_events(m, cycle_timeout(m, due, wd, pause_pending)) < 0) break;
        int64_t now = mono_ms();
        mapp_tick(m, now); /* before the monitor's pass: it keeps agents up for what still waits */
        due = run_due_work(m, now, due);
        pause_pending = pools_apply_pause(&m->pools);
        forget_drained_pools(m);
        sdn_feed_watchdog(&m->last_watchdog_ms, now);
        if (m->stopping && stop_done(m, now)) break;
        control_tick(m, now);
        http_tick(m, now);
        master_title(m);
    }
}

/* Say goodbye (control clients waiting, the HTTP process, the fleet
 * record) and free everything. */
static void master_exit(master_t *m)
{
    log_info("all children gone; exiting");
    control_notify_waiters(m);
    http_close(m);
    control_close(m, true);
    /* the watched records the last workers sent: within what is left of
     * shutdown_timeout, 1 s at least, the watchdog fed meanwhile */
    int64_t deadline = mono_ms() + 1000;
    if (deadline < m->stop_deadline_ms) deadline = m->stop_deadline_ms;
    int watched = 0;
    for (int i = 0; i < m->pools.n; i++) watched += m->pools.v[i]->watched.n;
    if (watched) sdn_send("STATUS=exiting: writing %d records of watched tags", watched);
    for (int i = 0; i < m->pools.n; i++) monitor_drain_watched(m, m->pools.v[i], deadline);
    monitor_goodbye(m);
    for (int i = 0; i < m->npaused_queues; i++) free(m->paused_queues[i]);
    free(m->paused_queues);
    monitor_free(m);
    budgeting_free(m);
    limiting_free(m);
    classpause_free(m);
    alerting_free(m);
    safefile_pidfile_remove(m->conf->pid_file, m->pid_fd);
    for (int i = 0; i < m->pools.n; i++) pool_free(m->pools.v[i]);
    free(m->pools.v);
    sb_destroy(&m->sb);
    close(m->sfd);
    close(m->epfd);
    config_free(m->conf);
    free(m);
}

int master_run(const char *config_path)
{
    qconf_t *conf = first_config(config_path);
    if (!conf) return QPOOL_EX_CONFIG;
    master_t *m = master_open(conf);
    if (!m) return 1;
    int64_t due = master_start(m);
    master_cycle(m, due);
    master_exit(m);
    return 0;
}
