/*
 * alerting.c - the master's side of the alerts (see alerting.h): it feeds
 * each balance pass's observations to the pure episode logic (alerts.c),
 * logs every event as a warning, and runs alerts.command with the event's
 * JSON on stdin, never waiting for it.
 */
#include "master/alerting.h"
#include "observe/alerts.h"
#include "os/child.h"
#include "core/log.h"
#include "os/proc.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define ALERT_CMDS_MAX 16            /* commands running at once; more events are logged only */
#define ALERT_CMD_TIMEOUT_MS 30000   /* a command running longer is killed */

struct alerting {
    alerts_t *a;
    pid_t cmd[ALERT_CMDS_MAX];
    int64_t cmd_started_ms[ALERT_CMDS_MAX];
    char host[256];
};

static struct alerting *state(master_t *m)
{
    if (!m->alerting) {
        m->alerting = xcalloc(1, sizeof *m->alerting);
        m->alerting->a = alerts_new();
        gethostname(m->alerting->host, sizeof m->alerting->host - 1);
    }
    return m->alerting;
}

/* ------------------------------------------------------------ observations */

static double wait_p95_s(pool_t *p, int q, int64_t now, uint64_t *finished, uint64_t *failed)
{
    histogram_t h;
    uint64_t fin, bad;
    minute_sum(&p->minute[q], now, &h, &fin, &bad);
    *finished += fin;
    *failed += bad;
    double p95 = hist_quantile(&h, 0.95);
    return p95 < 0 ? -1 : p95 / 1000.0;
}

static int observe(master_t *m, int64_t now, alert_queue_obs_t *qs, alert_pool_obs_t *ps)
{
    int nq = 0, np = 0;
    for (int i = 0; i < m->pools.n; i++) {
        pool_t *p = m->pools.v[i];
        if (p->removed) continue;
        alert_pool_obs_t *po = &ps[np++];
        *po = (alert_pool_obs_t){.pool = p->conf.name, .crashes_total = p->crashes};
        for (int q = 0; q < p->conf.nqueues; q++) {
            alert_queue_obs_t *o = &qs[nq++];
            o->pool = p->conf.name;
            o->queue = p->conf.queues[q];
            o->wait_p95_s = wait_p95_s(p, q, now, &po->finished, &po->failed);
            o->oldest_ready_s = p->have_counts ? p->q[q].oldest_ready_s : -1;
        }
    }
    return nq;
}

/* ------------------------------------------------------------ the command */

static void reap_commands(struct alerting *s, int64_t now)
{
    for (int i = 0; i < ALERT_CMDS_MAX; i++)
        if (s->cmd[i] > 0 && now - s->cmd_started_ms[i] > ALERT_CMD_TIMEOUT_MS) {
            log_warn("alerts: the command (pid %d) ran %d s; killing it", (int)s->cmd[i], ALERT_CMD_TIMEOUT_MS / 1000);
            kill(-s->cmd[i], SIGKILL);
            s->cmd_started_ms[i] = now; /* reaped through SIGCHLD */
        }
}

/* The command's child, built here, before the fork (review #5): its own
 * process group, the event on stdin, the alert user (looked up now), and
 * a minimal environment: PATH, QPOOL_ALERT, QPOOL_ALERT_STATE, and the
 * alert user's HOME and USER. Nothing of the master's environment (a
 * password_env variable, root's HOME) reaches it. */
static int command_spec(const qconf_t *c, int in_fd, const char *alert, const char *st, child_spec_t *cs)
{
    memset(cs, 0, sizeof *cs);
    snprintf(cs->who, sizeof cs->who, "alerts");
    cs->parent = getpid();
    cs->deathsig = SIGTERM;
    cs->own_group = true;
    cs->reset_signals = true;
    cs->fds[cs->nfds++] = (child_fd_t){.from = in_fd, .to = 0};
    cs->clear_env = true;
    bool root = geteuid() == 0;
    const char *user = c->alerts_user ? c->alerts_user : "nobody";
    struct passwd *pw = root ? getpwnam(user) : getpwuid(geteuid());
    if (!pw) {
        log_warn("alerts: no user %s; the command does not run", root ? user : "for qpool's uid");
        return -1;
    }
    uid_t uid = pw->pw_uid;
    gid_t gid = pw->pw_gid;
    child_env_minimal(&cs->env, getenv("PATH"), pw->pw_dir, pw->pw_name);
    child_env_put(&cs->env, "QPOOL_ALERT", alert);
    child_env_put(&cs->env, "QPOOL_ALERT_STATE", st);
    if (root && child_spec_user(cs, user, uid, gid, false) < 0) {
        log_warn("alerts: the groups of %s: %s; the command does not run", user, strerror(errno ? errno : ENOENT));
        child_spec_free(cs);
        return -1;
    }
    return 0;
}

static void exec_command(const qconf_t *c, const child_spec_t *cs)
{
    if (child_setup(cs) < 0) _exit(126);
    execvp(c->alerts_command[0], c->alerts_command);
    dprintf(2, "qpool: cannot run alerts.command %s: %s\n", c->alerts_command[0], strerror(errno));
    _exit(127);
}

static void run_command(master_t *m, const cJSON *ev)
{
    struct alerting *s = m->alerting;
    int slot = -1;
    for (int i = 0; i < ALERT_CMDS_MAX && slot < 0; i++)
        if (s->cmd[i] <= 0) slot = i;
    if (slot < 0) {
        log_warn("alerts: %d commands still running; this event is only logged", ALERT_CMDS_MAX);
        return;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) return;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(ev, "alert"), *st = cJSON_GetObjectItemCaseSensitive(ev, "state");
    child_spec_t cs;
    if (command_spec(m->conf, fds[0], a->valuestring, st->valuestring, &cs) < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) exec_command(m->conf, &cs);
    child_spec_free(&cs);
    close(fds[0]);
    if (pid < 0) {
        close(fds[1]);
        log_warn("alerts: fork: %s", strerror(errno));
        return;
    }
    char *js = cJSON_PrintUnformatted(ev);
    set_nonblock(fds[1], true);
    /* one small line: it fits the pipe, so this never waits */
    if (write(fds[1], js, strlen(js)) < 0 || write(fds[1], "\n", 1) < 0)
        log_warn("alerts: writing to the command: %s", strerror(errno));
    free(js);
    close(fds[1]);
    s->cmd[slot] = pid;
    s->cmd_started_ms[slot] = mono_ms();
}

static void report(master_t *m, cJSON *ev)
{
    cJSON_AddStringToObject(ev, "host", m->alerting->host);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(ev, "queue");
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(ev, "pool");
    const cJSON *limit = cJSON_GetObjectItemCaseSensitive(ev, "limit");
    char where[600];
    if (!cJSON_IsString(pool) && cJSON_IsString(limit)) /* a fleet-wide limit's (limiting.c) */
        snprintf(where, sizeof where, "limit on %s", limit->valuestring);
    else
        snprintf(where, sizeof where, "pool %s%s%s", cJSON_IsString(pool) ? pool->valuestring : "?",
                 cJSON_IsString(q) ? " queue " : "", cJSON_IsString(q) ? q->valuestring : "");
    log_warn("alert %s %s: %s: %s %g (threshold %g)", cJSON_GetObjectItemCaseSensitive(ev, "alert")->valuestring,
             cJSON_GetObjectItemCaseSensitive(ev, "state")->valuestring, where,
             cJSON_GetObjectItemCaseSensitive(ev, "measure")->valuestring,
             cJSON_GetObjectItemCaseSensitive(ev, "value")->valuedouble,
             cJSON_GetObjectItemCaseSensitive(ev, "threshold")->valuedouble);
    if (m->conf->alerts_command) run_command(m, ev);
}

/* ------------------------------------------------------------ verbs */

void alerting_emit(master_t *m, cJSON *ev)
{
    state(m);
    report(m, ev);
}

void alerting_tick(master_t *m, int64_t now)
{
    struct alerting *s = state(m);
    reap_commands(s, now);
    int nqmax = 0;
    for (int i = 0; i < m->pools.n; i++) nqmax += m->pools.v[i]->conf.nqueues;
    alert_queue_obs_t *qs = xcalloc((size_t)nqmax + 1, sizeof *qs);
    alert_pool_obs_t *ps = xcalloc((size_t)m->pools.n + 1, sizeof *ps);
    int nq = observe(m, now, qs, ps);
    int np = 0;
    for (int i = 0; i < m->pools.n; i++) np += !m->pools.v[i]->removed;
    cJSON *events = cJSON_CreateArray();
    if (alerts_observe(s->a, &m->conf->alerts, wall_ms(), qs, nq, ps, np, events) < 0)
        log_debug("alerts: observations refused");
    cJSON *ev;
    cJSON_ArrayForEach(ev, events) report(m, ev);
    cJSON_Delete(events);
    free(qs);
    free(ps);
}

bool alerting_reaped(master_t *m, pid_t pid)
{
    struct alerting *s = m->alerting;
    for (int i = 0; s && i < ALERT_CMDS_MAX; i++)
        if (s->cmd[i] == pid) {
            s->cmd[i] = 0;
            return true;
        }
    return false;
}

bool alerting_wants_oldest(const qconf_t *c)
{
    if (c->alerts.long_wait_s > 0) return true;
    for (int i = 0; i < c->alerts.nwaits; i++)
        if (c->alerts.waits[i].seconds > 0) return true;
    return false;
}

void alerting_free(master_t *m)
{
    if (!m->alerting) return;
    alerts_free(m->alerting->a);
    free(m->alerting);
    m->alerting = NULL;
}
