/*
 * zygote.c - the master's zygotes for pools that preload the PHP app (see
 * zygote.h, docs/architecture.md "Preloading the app").
 */
#include "master/zygote.h"
#include "os/child.h"
#include "config/pool_child.h"
#include "core/log.h"
#include "os/proc.h"
#include "core/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

int zygote_exit_kind(int status, bool asked)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == ZYGOTE_EX_NO_PRELOAD) return ZYGOTE_OFF;
    if (WIFEXITED(status) && WEXITSTATUS(status) == ZYGOTE_EX_MOVED) return ZYGOTE_MOVED;
    return asked ? ZYGOTE_STOPPED : ZYGOTE_CRASHED;
}

int zygote_move_delay_s(zygote_moves_t *m, int64_t lived_ms)
{
    if (lived_ms >= RESPAWN_HEALTHY_MS) { /* a deploy after a quiet while */
        m->backoff_s = 0;
        m->quick = false;
    }
    if (!m->quick && !m->backoff_s) {
        m->quick = true;
        return 0;
    }
    m->backoff_s = m->backoff_s ? m->backoff_s * 2 : 1;
    if (m->backoff_s > RESPAWN_MAX_S) m->backoff_s = RESPAWN_MAX_S;
    return m->backoff_s;
}

static void close_sockets(zygote_t *z)
{
    for (int i = 0; i < 2; i++) {
        if (z->fd[i] >= 0) close(z->fd[i]);
        z->fd[i] = -1;
    }
}

/* The slot is free again (its sockets already closed). */
static void forget(zygote_t *z)
{
    memset(z, 0, sizeof *z);
    z->fd[0] = z->fd[1] = -1;
}

void zygotes_init(zygotes_t *zs)
{
    memset(zs, 0, sizeof *zs);
    for (int i = 0; i < ZYGOTE_GENERATIONS; i++) forget(&zs->zy[i]);
}

static zygote_t *find_gen(zygotes_t *zs, uint64_t gen)
{
    for (int i = 0; i < ZYGOTE_GENERATIONS; i++)
        if (zs->zy[i].gen == gen) return &zs->zy[i];
    return NULL;
}

static const zygote_t *of_gen(const zygotes_t *zs, uint64_t gen)
{
    for (int i = 0; i < ZYGOTE_GENERATIONS; i++)
        if (gen && zs->zy[i].gen == gen) return &zs->zy[i];
    return NULL;
}

int zygote_worker_fd(const zygotes_t *zs, uint64_t gen)
{
    const zygote_t *z = of_gen(zs, gen);
    return z && !z->off ? z->fd[1] : -1;
}

bool zygote_off(const zygotes_t *zs, uint64_t gen)
{
    const zygote_t *z = of_gen(zs, gen);
    return z && (z->off || z->pid <= 0); /* or waiting to restart, or to roll: handlers boot meanwhile */
}

pid_t zygote_pid_of(const zygotes_t *zs, uint64_t gen)
{
    const zygote_t *z = of_gen(zs, gen);
    return z ? z->pid : 0;
}

/* Requests a dead zygote never read: their descriptors are closed, so each
 * worker sees its handler end before it started, and starts one itself
 * while the zygote is down. Bounded; the master reads descriptors here and
 * closes them, nothing more. */
static void drop_requests(zygote_t *z)
{
    for (int i = 0; i < 256 && z->fd[0] >= 0; i++) {
        char buf[64];
        union {
            char b[CMSG_SPACE(8 * sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
        if (recvmsg(z->fd[0], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) < 0) return;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            int nfd = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int k = 0; k < nfd; k++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + (size_t)k * sizeof(int), sizeof fd);
                close(fd);
            }
        }
    }
}

/* The zygote's argv: the handler command with --zygote before the app path
 * (the argument after the adapter's). */
static char **zygote_argv(const pool_conf_t *c)
{
    size_t n = strv_len(c->handler_command);
    char **argv = xcalloc(n + 2, sizeof *argv);
    size_t j = 0;
    bool added = false;
    for (size_t i = 0; i < n; i++) {
        argv[j++] = c->handler_command[i];
        const char *slash = strrchr(c->handler_command[i], '/');
        if (!added && !strcmp(slash ? slash + 1 : c->handler_command[i], "qpool-handler.php")) {
            argv[j++] = "--zygote";
            added = true;
        }
    }
    return argv;
}

static void spawn(const zygote_pool_t *v, zygote_t *z, int64_t now)
{
    const pool_conf_t *conf = v->conf;
    child_spec_t spec;
    if (child_spec_pool(&spec, conf, v->master_pid, SIGKILL, z->fd[0]) < 0) {
        z->not_before_ms = now + 1000;
        return;
    }
    spec.fds[0].cloexec = false; /* php gets it as fd 3 */
    spec.reset_signals = true;
    child_env_put(&spec.env, "QPOOL_ZYGOTE_FD", "3");
    child_env_put(&spec.env, "QPOOL_POOL", conf->name);
    char **argv = zygote_argv(conf);
    pid_t pid = fork();
    if (pid == 0) {
        char tag[64];
        snprintf(tag, sizeof tag, "%s zygote", conf->name);
        log_set_tag(tag);
        if (child_setup(&spec) < 0) _exit(QPOOL_EX_SETUP);
        execvp(argv[0], argv);
        log_error("pool %s: cannot run %s: %s", conf->name, argv[0], strerror(errno));
        _exit(127);
    }
    free(argv);
    child_spec_free(&spec);
    if (pid < 0) {
        log_error("pool %s: cannot start its zygote: fork: %s", conf->name, strerror(errno));
        z->not_before_ms = now + 1000;
        return;
    }
    z->pid = pid;
    z->started_ms = now;
    z->start_ticks = proc_start_ticks(pid);
    log_info("pool %s: started its zygote (pid %d, generation %llu): it boots the app once and forks the "
             "handlers", conf->name, (int)pid, (unsigned long long)z->gen);
}

/* A slot for generation gen: a free one, else the oldest other one (its
 * workers' handlers then boot on their own: their sends are refused). */
static zygote_t *new_gen(zygotes_t *zs, uint64_t gen)
{
    zygote_t *z = NULL;
    for (int i = 0; i < ZYGOTE_GENERATIONS && !z; i++)
        if (!zs->zy[i].gen) z = &zs->zy[i];
    if (!z) {
        z = &zs->zy[0];
        for (int i = 1; i < ZYGOTE_GENERATIONS; i++)
            if (zs->zy[i].gen < z->gen) z = &zs->zy[i];
    }
    if (z->gen) {
        if (z->pid > 0) kill(z->pid, SIGKILL); /* forgotten here: reaped later as an unknown pid */
        close_sockets(z);
    }
    forget(z);
    z->gen = gen;
    return z;
}

/* Its generation is over: SIGTERM, and the sockets go (a worker that still
 * asks is refused, and boots its handler itself). */
static void retire(const zygote_pool_t *v, zygote_t *z)
{
    if (z->pid > 0 && !z->stopping) {
        log_info("pool %s: stopping the zygote of generation %llu (pid %d): no worker needs it any more",
                 v->conf->name, (unsigned long long)z->gen, (int)z->pid);
        kill(z->pid, SIGTERM);
        z->stopping = true;
    }
    close_sockets(z);
    if (z->pid <= 0) forget(z);
}

/* The slot and socket pair of the pool's current generation; NULL when
 * there is no socket (handlers then boot on their own). */
static zygote_t *open_gen(zygotes_t *zs, const zygote_pool_t *v)
{
    zygote_t *z = new_gen(zs, v->gen);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0) {
        log_error("pool %s: no zygote socket: %s; handlers boot on their own", v->conf->name, strerror(errno));
        z->off = true;
        return NULL;
    }
    z->fd[0] = sv[0];
    z->fd[1] = sv[1];
    return z;
}

/* A roll for a move that waits out its backoff: 0 when none is due later,
 * else when it is; *roll when it is due now. */
static int64_t roll_when_due(zygotes_t *zs, const zygote_pool_t *v, int64_t now, bool *roll)
{
    zygote_moves_t *m = &zs->moves;
    if (!m->roll_at_ms) return 0;
    if (m->roll_gen != v->gen) { /* rolled meanwhile (a restart, a reload) */
        m->roll_at_ms = 0;
        return 0;
    }
    if (now < m->roll_at_ms) return m->roll_at_ms;
    m->roll_at_ms = 0;
    log_info("pool %s: rolling the pool onto the code the app path resolves to now", v->conf->name);
    *roll = true;
    return 0;
}

int64_t zygotes_maintain(zygotes_t *zs, const zygote_pool_t *v, int64_t now, unsigned *asks)
{
    *asks = 0;
    for (int i = 0; i < ZYGOTE_GENERATIONS; i++)
        if (zs->zy[i].gen && !v->in_use[i]) retire(v, &zs->zy[i]);
    if (v->stopping || v->removed || !pool_preloads(v->conf)) return 0;
    bool roll = false;
    int64_t due = roll_when_due(zs, v, now, &roll);
    if (roll) {
        *asks |= ZYGOTE_ASK_ROLL;
        return due; /* the next pass starts the new generation's */
    }
    zygote_t *z = find_gen(zs, v->gen);
    if (!z && !(z = open_gen(zs, v))) return due;
    if (z->off || z->moved || z->pid > 0) return due;
    if (z->not_before_ms > now) return z->not_before_ms;
    spawn(v, z, now);
    return z->pid > 0 ? due : z->not_before_ms;
}

/* Its requests are refused from now on: a worker still asking it boots its
 * handler itself, and one waiting for a fork it never made sees the end of
 * its pipes. */
static void shut(zygote_t *z)
{
    drop_requests(z);
    close_sockets(z);
}

/* An older generation's zygote is never started again (it would boot the
 * code of now): its workers, on their way out, boot their handlers. */
static void old_gen_exited(const zygote_pool_t *v, zygote_t *z, pid_t pid, const char *desc)
{
    log_info("pool %s: the zygote of generation %llu (pid %d) %s; the workers still on that generation start "
             "handlers that boot the app themselves until they are replaced",
             v->conf->name, (unsigned long long)z->gen, (int)pid, desc);
    shut(z);
    forget(z);
}

/* The app path resolves elsewhere (a deploy): roll onto the new code, at
 * once (ZYGOTE_ASK_ROLL), or after a backoff when moves come too often. */
static unsigned moved(zygotes_t *zs, const zygote_pool_t *v, zygote_t *z, pid_t pid, int64_t lived_ms, int64_t now)
{
    shut(z);
    z->moved = true;
    int delay_s = zygote_move_delay_s(&zs->moves, lived_ms);
    if (!delay_s) {
        log_info("pool %s: the app moved (a deploy): booting a new zygote from the new code and rolling the "
                 "pool onto it", v->conf->name);
        return ZYGOTE_ASK_ROLL;
    }
    zs->moves.roll_at_ms = now + (int64_t)delay_s * 1000;
    zs->moves.roll_gen = v->gen;
    log_warn("pool %s: the app moved again, %.1f s after its zygote (pid %d) started: rolling the pool in %d s "
             "(moves this often are backed off; handlers boot the app themselves meanwhile)",
             v->conf->name, (double)lived_ms / 1000.0, (int)pid, delay_s);
    return 0;
}

static unsigned crashed(const zygote_pool_t *v, zygote_t *z, pid_t pid, const char *desc, int64_t lived_ms,
                        int64_t now)
{
    drop_requests(z);
    exit_facts_t f = {.lived_ms = lived_ms, .clean = false, .did_work = false};
    int delay_s;
    respawn_after_exit(&z->respawn, &f, &delay_s);
    z->not_before_ms = now + (int64_t)delay_s * 1000;
    z->restarts++;
    log_warn("pool %s: its zygote (pid %d) %s after %.1f s%s; restarting it in %d s (running handlers go on; "
             "new ones boot the app themselves meanwhile)",
             v->conf->name, (int)pid, desc, (double)lived_ms / 1000.0,
             lived_ms < 5000 ? " (did the app boot? see its log above)" : "", delay_s);
    return ZYGOTE_ASK_CRASH;
}

unsigned zygote_exited(zygotes_t *zs, zygote_t *z, const zygote_pool_t *v, int status, int64_t now)
{
    char desc[96];
    proc_describe_status(status, desc, sizeof desc);
    int kind = zygote_exit_kind(status, z->stopping || v->stopping);
    pid_t pid = z->pid;
    int64_t lived_ms = now - z->started_ms;
    z->pid = 0;
    if (z->stopping || z->fd[0] < 0) { /* its generation is over */
        forget(z);
        return 0;
    }
    if (kind == ZYGOTE_STOPPED) return 0;
    if (z->gen != v->gen) {
        old_gen_exited(v, z, pid, desc);
    } else if (kind == ZYGOTE_OFF) {
        log_warn("pool %s: its zygote (pid %d) cannot preload the app (see its log above): each handler boots "
                 "the app itself until the pool restarts", v->conf->name, (int)pid);
        z->off = true;
        shut(z); /* requests waiting in it are refused: their workers start handlers themselves */
    } else if (kind == ZYGOTE_MOVED) {
        return moved(zs, v, z, pid, lived_ms, now);
    } else
        return crashed(v, z, pid, desc, lived_ms, now);
    return 0;
}

zygote_t *zygotes_find(zygotes_t *zs, pid_t pid)
{
    for (int j = 0; j < ZYGOTE_GENERATIONS; j++)
        if (pid > 0 && zs->zy[j].pid == pid) return &zs->zy[j];
    return NULL;
}

void zygotes_signal(zygotes_t *zs, int sig)
{
    for (int j = 0; j < ZYGOTE_GENERATIONS; j++) {
        zygote_t *z = &zs->zy[j];
        if (z->pid <= 0) continue;
        kill(z->pid, sig);
        z->stopping = true;
    }
}

void zygotes_free(zygotes_t *zs)
{
    for (int i = 0; i < ZYGOTE_GENERATIONS; i++) close_sockets(&zs->zy[i]);
}
