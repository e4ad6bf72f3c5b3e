/*
 * pool.c - pools, their children, spawning, stopping and respawn backoff.
 *
 * The master calls pools_maintain() after every event. It is idempotent:
 * it compares what is alive with what is wanted and acts on the difference,
 * so a missed or doubled call never leaves a pool wrong for long.
 *
 * Respawn policy (by the exit status of a child we did not ask to stop):
 *   0   -> at once (max_jobs, max_time, restart requests)
 *   12  -> at once, counted as a memory recycle
 *   else, or killed by a signal -> backoff for that slot: 1 s, doubling to
 *          60 s; reset once a child of the slot has lived 30 s (or, for
 *          a native worker, has done a job: it is not crash-looping).
 * A clean exit that did no work within 1 s, three times in a row, also falls
 * back to the backoff, so a misconfigured command cannot fork-loop.
 * There is no give-up state: a crashing pool retries every 60 s forever.
 */
#include "master/pool.h"
#include "master/mapp.h"
#include "master/mappdash.h"
#include "master/respawn.h"
#include "worker/worker.h"
#include "core/log.h"
#include "os/child.h"
#include "config/pool_child.h"
#include "os/proc.h"
#include "core/grow.h"
#include "core/util.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXTERNAL_READY_MS 1000

pool_t *pool_new(const pool_conf_t *conf, int class_cap, int jobs_cap)
{
    pool_t *p = xcalloc(1, sizeof *p);
    pool_conf_copy(&p->conf, conf);
    jobstats_init(&p->stats, class_cap);
    jobstats_init(&p->recent, class_cap);
    jobhist_pending_init(&p->jobs, jobs_cap);
    jobwatch_queue_init(&p->watched, JOBWATCH_QUEUE_MAX);
    p->gen = 1;
    p->pinned = -1;
    zygotes_init(&p->zygotes);
    agent_init(&p->agent);
    p->target = conf->balance == BALANCE_OFF ? conf->processes : conf->min_processes;
    /* nothing before the first lease (budgeting.c) */
    if (conf->fleet_max_processes) p->target = 0;
    p->fleet_cap = conf->fleet_max_processes ? 0 : INT_MAX;
    return p;
}

void pool_set_fleet(pool_t *p, unsigned tag, int cap)
{
    p->lease_tag = tag;
    p->fleet_cap = cap;
    for (int i = 0; tag && i < p->nchildren; i++)
        if (!p->children[i].lease) p->children[i].lease = tag;
}

int pool_lease_children(const pool_t *p, unsigned tag)
{
    int n = 0;
    for (int i = 0; i < p->nchildren; i++) n += p->children[i].lease == tag;
    return n;
}

/* Room for one more child within the fleet budget's cap. */
static bool fleet_room(const pool_t *p)
{
    return p->nchildren < p->fleet_cap;
}

void pool_free(pool_t *p)
{
    if (!p) return;
    zygotes_free(&p->zygotes);
    agent_close(&p->agent);
    agent_batches_free(&p->batches);
    mapp_free(&p->app_reqs);
    mappdash_free(&p->app_dash);
    pool_conf_free(&p->conf);
    jobstats_free(&p->stats);
    jobstats_free(&p->recent);
    jobhist_pending_free(&p->jobs);
    jobwatch_queue_free(&p->watched);
    free(p->restart_key_full);
    free(p->restart_pending);
    free(p->children);
    free(p->slots);
    free(p);
}

static bool is_native(const pool_t *p)
{
    return p->conf.handler_type != HANDLER_NONE;
}

/* SIGKILL a child's process group, and the child itself in case it has not
 * made its own group yet (just after fork). */
static void kill_group(pid_t pid)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
}

static int64_t min_due(int64_t a, int64_t b)
{
    if (!a) return b;
    if (!b) return a;
    return a < b ? a : b;
}

/* The pool's zygotes (zygote.c) stand below it: they see the pool through
 * this view and answer what it must do (ZYGOTE_ASK_*); pool.c acts. */
static void zygote_view(const pools_t *ps, const pool_t *p, zygote_pool_t *v)
{
    *v = (zygote_pool_t){.conf = &p->conf, .gen = p->gen, .removed = p->removed, .stopping = ps->stopping,
                         .master_pid = ps->master_pid};
    for (int i = 0; i < ZYGOTE_GENERATIONS; i++) {
        uint64_t gen = p->zygotes.zy[i].gen;
        v->in_use[i] = gen == p->gen && !p->removed;
        for (int j = 0; j < p->nchildren && !v->in_use[i]; j++) v->in_use[i] = p->children[j].gen == gen;
    }
}

static void zygote_asks(pool_t *p, unsigned asks)
{
    if (asks & ZYGOTE_ASK_ROLL) pool_request_roll(p);
    if (asks & ZYGOTE_ASK_CRASH) p->crashes++;
}

/* Start or stop the pool's zygotes; when the app moved and the roll is due
 * now, roll and start the new generation's zygote in the same pass. */
static int64_t maintain_zygotes(const pools_t *ps, pool_t *p, int64_t now)
{
    zygote_pool_t v;
    unsigned asks;
    zygote_view(ps, p, &v);
    int64_t due = zygotes_maintain(&p->zygotes, &v, now, &asks);
    if (!(asks & ZYGOTE_ASK_ROLL)) return due;
    zygote_asks(p, asks);
    zygote_view(ps, p, &v);
    int64_t next = zygotes_maintain(&p->zygotes, &v, now, &asks);
    zygote_asks(p, asks & ~ZYGOTE_ASK_ROLL); /* a roll answers one move */
    return min_due(due, next);
}

static zygote_t *pools_find_zygote(const pools_t *ps, pid_t pid, pool_t **owner)
{
    for (int i = 0; i < ps->n; i++) {
        zygote_t *z = zygotes_find(&ps->v[i]->zygotes, pid);
        if (z) {
            if (owner) *owner = ps->v[i];
            return z;
        }
    }
    return NULL;
}

/* A reaped pid: true when it was a zygote (handled). */
static bool zygote_reaped(const pools_t *ps, pid_t pid, int status, int64_t now)
{
    pool_t *p;
    zygote_t *z = pools_find_zygote(ps, pid, &p);
    if (!z) return false;
    zygote_pool_t v;
    zygote_view(ps, p, &v);
    zygote_asks(p, zygote_exited(&p->zygotes, z, &v, status, now));
    return true;
}

static void signal_zygotes(const pools_t *ps, int sig)
{
    for (int i = 0; i < ps->n; i++) zygotes_signal(&ps->v[i]->zygotes, sig);
}

/* What a child is was fixed when it started: after a reload that switched
 * the pool between command and handler, old children keep their kind. */
/* SIGKILL the handler group a native worker named in its slot, once the
 * master has checked it is one that worker can have made: the slot is
 * written by the worker, and root never signals a group on its word alone
 * (review #6). */
static void kill_handler_group(pools_t *ps, const pool_t *p, const child_t *c, const sb_child_t *s)
{
    if (!s->handler_pgid) return;
    char who[80];
    snprintf(who, sizeof who, "pool %s: pid %d", p->conf.name, (int)c->pid);
    uid_t uid = p->conf.has_uid ? p->conf.uid : geteuid();
    bool is_child = pools_find_child(ps, s->handler_pgid, NULL) != NULL || pools_find_zygote(ps, s->handler_pgid, NULL) != NULL;
    proc_kill_worker_group(s->handler_pgid, uid, c->start_ticks, s->handler_start, is_child, who);
}

static bool child_native(const pools_t *ps, const child_t *c)
{
    return ps->sb->slots[c->sb].native != 0;
}

int pool_live(const pool_t *p)
{
    int n = 0;
    for (int i = 0; i < p->nchildren; i++)
        if (!p->children[i].stop_reason) n++;
    return n;
}

int pools_live_total(const pools_t *ps)
{
    int n = 0;
    for (int i = 0; i < ps->n; i++) n += ps->v[i]->nchildren;
    return n;
}

child_t *pools_find_child(pools_t *ps, pid_t pid, pool_t **pool_out)
{
    for (int i = 0; i < ps->n; i++) {
        pool_t *p = ps->v[i];
        for (int j = 0; j < p->nchildren; j++)
            if (p->children[j].pid == pid) {
                if (pool_out) *pool_out = p;
                return &p->children[j];
            }
    }
    return NULL;
}

bool pool_is_paused(const pools_t *ps, const pool_t *p)
{
    (void)ps;
    return p->paused || p->down;
}

bool pool_down_wanted(bool checked, bool force, int probe, bool current)
{
    if (!checked || force) return false;
    return probe < 0 ? current : probe == 1;
}

uint32_t pool_control_word(const pools_t *ps, const pool_t *p)
{
    uint32_t w = p->queue_paused & SB_CTL_QUEUE_MASK;
    for (int i = 0; i < p->conf.nqueues && i < QPOOL_MAX_QUEUES; i++)
        if (p->q[i].laravel_paused && p->conf.laravel_pause) w |= 1u << i;
    if (pool_is_paused(ps, p)) w |= SB_CTL_PAUSE_ALL;
    return w;
}

static slot_state_t *slot_state(pool_t *p, int slot_no)
{
    if (slot_no > p->nslots) {
        int n = slot_no + 8;
        p->slots = xrealloc(p->slots, sizeof *p->slots * (size_t)n);
        memset(p->slots + p->nslots, 0, sizeof *p->slots * (size_t)(n - p->nslots));
        p->nslots = n;
    }
    return &p->slots[slot_no - 1];
}

static bool slot_in_use(const pool_t *p, int slot_no)
{
    for (int i = 0; i < p->nchildren; i++)
        if (p->children[i].slot_no == slot_no) return true;
    return false;
}

static void child_state(const pools_t *ps, const child_t *c, sb_child_t *out)
{
    sb_read(&ps->sb->slots[c->sb], out);
}

static bool child_busy(const pools_t *ps, const pool_t *p, const child_t *c)
{
    (void)p;
    if (!child_native(ps, c)) return false; /* unknown: external workers finish their job on SIGTERM */
    sb_child_t s;
    child_state(ps, c, &s);
    return s.state == SB_BUSY;
}

static bool child_ready(const pools_t *ps, const pool_t *p, const child_t *c, int64_t now)
{
    (void)p;
    if (!child_native(ps, c)) return now - c->started_ms >= EXTERNAL_READY_MS;
    sb_child_t s;
    child_state(ps, c, &s);
    return s.state != SB_STARTING;
}

static void stop_child(pools_t *ps, pool_t *p, child_t *c, int reason, int64_t now)
{
    if (c->stop_reason) return;
    c->stop_reason = reason;
    c->stop_sent_ms = now;
    if (child_native(ps, c)) {
        /* The worker finishes its job, tells its handler, and exits 0. */
        kill(c->pid, SIGTERM);
    } else {
        /* Like supervisord's stopasgroup: the whole process group hears it. */
        if (kill(-c->pid, SIGTERM) < 0) kill(c->pid, SIGTERM);
        ps->sb->slots[c->sb].c.state = SB_STOPPING;
    }
    /* A paused worker must still hear the stop: SIGCONT for stopped-by-SIGSTOP ones. */
    static const char *why[] = {"", "pool shrinks", "replaced", "pool removed", "shutdown"};
    log_info("pool %s: stopping %s#%d (pid %d): %s", p->conf.name, p->conf.name, c->slot_no,
             (int)c->pid, why[reason]);
}

/* A busy native worker: finish the current job, then exit (SB_CTL_RETIRE). */
static void retire_child(pools_t *ps, pool_t *p, child_t *c, int64_t now)
{
    c->stop_reason = STOP_SCALE;
    c->stop_sent_ms = now;
    atomic_fetch_or(&ps->sb->slots[c->sb].control, SB_CTL_RETIRE);
    kill(c->pid, SIGCONT); /* wakes it if it just went idle in a blocking wait */
    log_info("pool %s: %s#%d (pid %d) retires after its current job: pool shrinks", p->conf.name,
             p->conf.name, c->slot_no, (int)c->pid);
}

/* What the master tells a worker of its generation's zygote: whether to ask
 * it, and its pid (a forked handler must be its child: handler.c adopt). */
static void slot_zygote(sb_slot_t *slot, const pool_t *p, uint64_t gen)
{
    atomic_store(&slot->preload_off, zygote_off(&p->zygotes, p->gen) ? 1u : 0u);
    atomic_store(&slot->zygote_pid, (int32_t)zygote_pid_of(&p->zygotes, gen));
}

/* A scoreboard slot for a new child of p, filled before the fork; -1 when
 * the scoreboard is full. *cw gets the control word written. */
static int new_slot(pools_t *ps, pool_t *p, uint32_t *cw)
{
    int sbi = sb_alloc(ps->sb);
    if (sbi < 0) {
        log_error("pool %s: scoreboard full, cannot start a child", p->conf.name);
        return -1;
    }
    sb_slot_t *slot = &ps->sb->slots[sbi];
    snprintf(slot->pool, sizeof slot->pool, "%s", p->conf.name);
    slot->native = is_native(p);
    *cw = pool_control_word(ps, p);
    atomic_store(&slot->control, *cw);
    atomic_store(&slot->watch_gen, p->watch_gen);
    slot_zygote(slot, p, p->gen);
    if (!slot->native) slot->c.state = SB_STARTING;
    return sbi;
}

/* Everything the child becomes, looked up here, before the fork, then the
 * fork. A native worker: SIGHUP from the kernel when the master dies (it
 * kills its handler's process group and exits at once). An external
 * command: SIGTERM, as on a graceful stop: queue:work finishes its job and
 * exits (review #7). -1 when it could not fork (logged). */
static pid_t fork_child(pools_t *ps, pool_t *p, child_spec_t *spec, int stats_fd, int zfd)
{
    if (child_spec_pool(spec, &p->conf, ps->master_pid, is_native(p) ? SIGHUP : SIGTERM, stats_fd) < 0) return -1;
    spec->reset_signals = !is_native(p);
    if (zfd >= 0) /* its handlers are forked by the pool's zygote (zygote.h) */
        spec->fds[spec->nfds++] = (child_fd_t){.from = zfd, .to = PROC_ZYGOTE_FD, .cloexec = true};
    pid_t pid = fork();
    if (pid < 0) log_error("pool %s: fork: %s", p->conf.name, strerror(errno));
    return pid;
}

/* In a native worker: it runs jobs with p's environment and connections
 * only, so every other secret the master's heap holds goes (security
 * review 2026-11-27 m3): other pools' environments, the HTTP token, other
 * connections' passwords. */
static void forget_others(pools_t *ps, const pool_t *p)
{
    for (int i = 0; i < ps->n; i++)
        if (ps->v[i] != p) pool_conf_wipe_env(&ps->v[i]->conf);
    if (ps->forget_in_worker) ps->forget_in_worker(ps->forget_arg, &p->conf);
}

/* In the child: the worker, or the pool's command. Never returns. */
__attribute__((noreturn)) static void child_main(pools_t *ps, pool_t *p, int sbi, int slot_no, child_spec_t *spec,
                                                  bool stats, bool zygote)
{
    /* nothing of another child's slot stays in this one (review #6) */
    if (sb_confine(ps->sb, sbi) < 0) log_warn("scoreboard: cannot unmap other slots: %s", strerror(errno));
    sb_slot_t *slot = &ps->sb->slots[sbi];
    char tag[64];
    snprintf(tag, sizeof tag, "%s#%d", p->conf.name, slot_no);
    log_set_tag(tag);
    slot->pid = getpid();
    if (child_setup(spec) < 0) _exit(QPOOL_EX_SETUP);
    child_spec_free(spec);
    if (is_native(p)) {
        forget_others(ps, p);
        exit(worker_main(&p->conf, ps->conf, slot, slot_no, ps->master_pid, stats ? PROC_KEEP_FD : -1,
                         zygote ? PROC_ZYGOTE_FD : -1));
    }
    char **argv = config_expand_command(&p->conf);
    proc_title("qpool: %s", tag); /* shown until exec replaces us */
    execvp(argv[0], argv);
    log_error("pool %s: cannot run %s: %s", p->conf.name, argv[0], strerror(errno));
    _exit(127);
}

/* The master's record of a child it just started. */
static void add_child(pools_t *ps, pool_t *p, pid_t pid, int sbi, int slot_no, int stats_fd, uint32_t cw,
                      int64_t now)
{
    p->children = xgrow(p->children, p->nchildren, &p->cap, sizeof *p->children, 8);
    child_t *c = &p->children[p->nchildren++];
    *c = (child_t){.pid = pid, .sb = sbi, .slot_no = slot_no, .gen = p->gen, .started_ms = now,
                   .start_ticks = proc_start_ticks(pid), .stats_fd = stats_fd, .lease = p->lease_tag};
    if (c->stats_fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = c->stats_fd};
        epoll_ctl(ps->epfd, EPOLL_CTL_ADD, c->stats_fd, &ev);
    }
    /* A native child reads the pause bit from its slot at start. */
    c->pause_sent = is_native(p) && (cw & SB_CTL_PAUSE_ALL);
}

static void spawn_child(pools_t *ps, pool_t *p, int slot_no, int64_t now)
{
    uint32_t cw;
    int sbi = new_slot(ps, p, &cw);
    if (sbi < 0) return;
    sb_slot_t *slot = &ps->sb->slots[sbi];
    /* a native worker's job stats come back as datagrams: one message can
     * neither be split nor run into the next, whatever the child writes */
    int sv[2] = {-1, -1};
    if (slot->native && ps->conf->metrics && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
        log_warn("pool %s: no stats channel: %s", p->conf.name, strerror(errno));
    child_spec_t spec;
    int zfd = is_native(p) ? zygote_worker_fd(&p->zygotes, p->gen) : -1;
    pid_t pid = fork_child(ps, p, &spec, is_native(p) ? sv[1] : -1, zfd);
    if (pid < 0) {
        child_spec_free(&spec);
        if (sv[0] >= 0) close(sv[0]), close(sv[1]);
        sb_release(ps->sb, sbi);
        slot_state(p, slot_no)->not_before_ms = now + 1000;
        return;
    }
    if (pid == 0) child_main(ps, p, sbi, slot_no, &spec, sv[1] >= 0, zfd >= 0);
    child_spec_free(&spec);
    slot->pid = pid;
    slot->started_ms = wall_ms();
    if (sv[1] >= 0) close(sv[1]);
    add_child(ps, p, pid, sbi, slot_no, sv[0], cw, now);
    p->spawned++;
    log_info("pool %s: started %s#%d (pid %d)", p->conf.name, p->conf.name, slot_no, (int)pid);
}

/* Free slot number to start a child in, or 0; *wait gets the earliest backoff deadline. */
static int pick_slot(pool_t *p, int range, int64_t now, int64_t *wait)
{
    for (int s = 1; s <= range; s++) {
        if (slot_in_use(p, s)) continue;
        slot_state_t *st = slot_state(p, s);
        if (st->not_before_ms > now) {
            if (!*wait || st->not_before_ms < *wait) *wait = st->not_before_ms;
            continue;
        }
        return s;
    }
    return 0;
}

/* Which child to stop when a pool must lose one: old generation first, then
 * idle before busy, then the highest slot. Busy native children only when
 * allow_busy (rolling: they finish their job first). */
static child_t *pick_victim(pools_t *ps, pool_t *p, bool old_only, bool allow_busy)
{
    child_t *best = NULL;
    int best_score = -1;
    for (int i = 0; i < p->nchildren; i++) {
        child_t *c = &p->children[i];
        if (c->stop_reason) continue;
        bool old = c->gen != p->gen;
        if (old_only && !old) continue;
        bool busy = child_busy(ps, p, c);
        if (busy && !allow_busy) continue;
        int score = (old ? 1 << 20 : 0) + (busy ? 0 : 1 << 19) + c->slot_no;
        if (score > best_score) {
            best_score = score;
            best = c;
        }
    }
    return best;
}


/* Rolling replacement: one child at a time, a new one first when the
 * budget allows (max_workers, and the fleet budget's cap on processes: a
 * budgeted pool at its cap stops an old child first), so the pool never
 * drops below its size while it rolls when it has the room. *surge is 1
 * while a new child of the step starts. Returns when to look again, or 0. */
static int64_t roll_step(pools_t *ps, pool_t *p, int desired, int *surge, int64_t now)
{
    int stopping = 0, old = 0;
    for (int i = 0; i < p->nchildren; i++) {
        if (p->children[i].stop_reason)
            stopping++;
        else if (p->children[i].gen != p->gen)
            old++;
    }
    *surge = 0;
    if (!old) {
        p->roll_child_pid = 0;
        return 0;
    }
    child_t *rc = NULL;
    if (p->roll_child_pid) {
        for (int i = 0; i < p->nchildren; i++)
            if (p->children[i].pid == p->roll_child_pid && !p->children[i].stop_reason) rc = &p->children[i];
        if (!rc) p->roll_child_pid = 0;
    }
    if (rc) {
        if (!child_ready(ps, p, rc, now)) {
            *surge = 1;
            return now + 100;
        }
        child_t *v = pick_victim(ps, p, true, true);
        if (v) stop_child(ps, p, v, STOP_ROLL, now);
        p->roll_child_pid = 0;
        return 0;
    }
    if (pool_live(p) < desired) return 0;
    int64_t wait = 0;
    int slot = pools_live_total(ps) < ps->max_workers && fleet_room(p)
                   ? pick_slot(p, desired + stopping + 1, now, &wait)
                   : 0;
    if (slot && desired > 0) {
        spawn_child(ps, p, slot, now);
        if (p->nchildren && p->children[p->nchildren - 1].slot_no == slot) {
            p->roll_child_pid = p->children[p->nchildren - 1].pid;
            *surge = 1;
            return now + 100;
        }
    } else if (!wait || desired == 0) {
        /* No room for a surge child: stop one old child, respawn fills in. */
        child_t *v = pick_victim(ps, p, true, true);
        if (v) stop_child(ps, p, v, STOP_ROLL, now);
    } else
        return wait;
    return 0;
}

/* Start children up to desired (plus the roll's surge child). */
static int64_t grow(pools_t *ps, pool_t *p, int desired, int surge, int64_t now)
{
    int live = pool_live(p);
    while (live < desired) {
        if (pools_live_total(ps) >= ps->max_workers || !fleet_room(p)) break;
        int64_t wait = 0;
        int stopping = p->nchildren - live;
        int slot = pick_slot(p, desired + stopping + surge, now, &wait);
        if (!slot) return wait;
        int before = p->nchildren;
        spawn_child(ps, p, slot, now);
        if (p->nchildren == before) break; /* fork failed; retried later */
        live++;
    }
    return 0;
}

/* Shrink: idle children are stopped; a busy native worker is never
 * interrupted: it is asked to retire, i.e. to exit instead of taking its
 * next job. */
static void shrink(pools_t *ps, pool_t *p, int keep, int64_t now)
{
    int live = pool_live(p);
    while (live > keep) {
        child_t *v = pick_victim(ps, p, false, false);
        if (v)
            stop_child(ps, p, v, STOP_SCALE, now);
        else {
            v = pick_victim(ps, p, false, true);
            if (!v) break;
            retire_child(ps, p, v, now);
        }
        live--;
    }
}

static int64_t maintain_pool(pools_t *ps, pool_t *p, int64_t now)
{
    int64_t due = maintain_zygotes(ps, p, now);
    if (p->removed) {
        for (int i = 0; i < p->nchildren; i++) stop_child(ps, p, &p->children[i], STOP_REMOVED, now);
        return due;
    }
    int desired = p->target, surge = 0;
    due = min_due(due, roll_step(ps, p, desired, &surge, now));
    due = min_due(due, grow(ps, p, desired, surge, now));
    shrink(ps, p, desired + surge, now);
    return due;
}

/* An external child asked to stop (scale, roll, removed pool) that is still
 * there after stop_timeout gets SIGKILL on its process group: otherwise a
 * child that ignores SIGTERM would hold its slot and budget for ever. Native
 * workers always act on SIGTERM (their job timeout bounds the wait), and a
 * busy one is never killed to shrink a pool. */
static int64_t kill_overdue(pools_t *ps, int64_t now)
{
    int64_t due = 0;
    for (int i = 0; i < ps->n; i++) {
        pool_t *p = ps->v[i];
        for (int j = 0; j < p->nchildren; j++) {
            child_t *c = &p->children[j];
            if (!c->stop_reason || c->stop_reason == STOP_SHUTDOWN || c->killed || child_native(ps, c))
                continue;
            int64_t at = c->stop_sent_ms + ps->stop_timeout_ms;
            if (now >= at) {
                log_warn("pool %s: %s#%d (pid %d) did not stop within %lld s: killing its process group",
                         p->conf.name, p->conf.name, c->slot_no, (int)c->pid,
                         (long long)(ps->stop_timeout_ms / 1000));
                kill_group(c->pid);
                c->killed = true;
            } else
                due = min_due(due, at);
        }
    }
    return due;
}

int64_t pools_maintain(pools_t *ps, int64_t now)
{
    int64_t due = kill_overdue(ps, now);
    if (ps->stopping) return due;
    for (int i = 0; i < ps->n; i++) due = min_due(due, maintain_pool(ps, ps->v[i], now));
    return due;
}

/* ------------------------------------------------------------ job stats */

#define STATS_READS_PER_EVENT 16

static void bad_datagram(pool_t *p, child_t *c, const char *what, const char *err)
{
    if (!c->stats_warned)
        log_warn("pool %s: pid %d sent %s that do not parse (%s); ignored", p->conf.name, (int)c->pid, what, err);
    c->stats_warned = true;
}

/* A watched record into the pool's watched queue: its tags '\n'-joined
 * (decoded, so one line each) and its JSON. */
static void watched_add(pool_t *p, const cJSON *rec)
{
    sbuf_t b;
    sbuf_init(&b);
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(rec, "tags")) {
        if (b.len) sbuf_append(&b, "\n", 1);
        sbuf_append(&b, t->valuestring, strlen(t->valuestring));
    }
    if (!b.len) {
        sbuf_free(&b);
        return;
    }
    if (!jobwatch_queue_add(&p->watched, sbuf_steal(&b), cJSON_PrintUnformatted(rec)) &&
        (p->watched.dropped & (p->watched.dropped - 1)) == 0) /* 1, 2, 4, ...: said, not flooded */
        log_warn("pool %s: %llu records of watched tags dropped (the master holds %d at most)", p->conf.name,
                 (unsigned long long)p->watched.dropped, JOBWATCH_QUEUE_MAX);
}

/* Job records from a child: the pool, host, worker and pid are the
 * master's to say, never the child's. Watched records ({"m"}) go to the
 * watched queue only; the ring's copies of them are kept apart there. */
static void history_datagram(pools_t *ps, pool_t *p, child_t *c, const char *buf, size_t n)
{
    char err[128] = "", worker[80];
    bool apart[JOBHIST_PAGE] = {false}, watched = jobhist_is_watched(buf, n);
    snprintf(worker, sizeof worker, "%s#%d", p->conf.name, c->slot_no);
    cJSON *got = cJSON_CreateArray();
    if (jobhist_decode_ex(buf, n, p->conf.queues, p->conf.nqueues, p->conf.name, ps->host, worker, (int)c->pid, got,
                          apart, err, sizeof err) < 0)
        bad_datagram(p, c, "job records", err);
    cJSON *rec;
    int k = 0;
    cJSON_ArrayForEach(rec, got) {
        if (watched)
            watched_add(p, rec);
        else
            jobhist_pending_add_apart(&p->jobs, cJSON_PrintUnformatted(rec), apart[k]);
        k++;
    }
    cJSON_Delete(got);
}

/* The last minute per queue, for the alerts: waits, attempts and the
 * attempts that failed (failed, timed out, crashed). */
static void feed_minute(pool_t *p, const jobstats_t *got)
{
    int64_t now = mono_ms();
    for (int i = 0; i < got->n; i++) {
        const jobstat_t *e = &got->v[i];
        const char *q = labels_name(&got->queues, e->queue);
        for (int qi = 0; qi < p->conf.nqueues; qi++) {
            if (strcmp(p->conf.queues[qi], q)) continue;
            bool bad = e->outcome == OUTCOME_FAILED || e->outcome == OUTCOME_TIMED_OUT || e->outcome == OUTCOME_CRASHED;
            minute_add(&p->minute[qi], now, &e->wait, e->n, bad ? e->n : 0);
            break;
        }
    }
}

/* Read up to max datagrams from a child; false at EOF or error. */
static bool stats_read(pools_t *ps, pool_t *p, child_t *c, int max)
{
    static char buf[JOBSTATS_LINE_MAX + 1];
    for (int i = 0; i < max; i++) {
        ssize_t n = recv(c->stats_fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        if (n == 0) return false;
        if ((size_t)n <= JOBSTATS_LINE_MAX && jobhist_is_history(buf, (size_t)n)) {
            history_datagram(ps, p, c, buf, (size_t)n);
            continue;
        }
        char err[128] = "longer than the limit";
        jobstats_t got;
        jobstats_init(&got, p->stats.classes.cap);
        if ((size_t)n > JOBSTATS_LINE_MAX ||
            jobstats_decode(buf, (size_t)n, p->conf.queues, p->conf.nqueues, &got, err, sizeof err) < 0) {
            bad_datagram(p, c, "job stats", err);
        } else {
            feed_minute(p, &got);
            jobstats_merge(&p->stats, &got);  /* since the master started */
            jobstats_merge(&p->recent, &got); /* not yet in Redis's history */
        }
        jobstats_free(&got);
    }
    return true;
}

static void stats_close(pools_t *ps, pool_t *p, child_t *c)
{
    if (c->stats_fd < 0) return;
    stats_read(ps, p, c, 1024);
    epoll_ctl(ps->epfd, EPOLL_CTL_DEL, c->stats_fd, NULL);
    close(c->stats_fd);
    c->stats_fd = -1;
}

bool pools_stats_event(pools_t *ps, int fd)
{
    for (int i = 0; i < ps->n; i++) {
        pool_t *p = ps->v[i];
        for (int j = 0; j < p->nchildren; j++) {
            child_t *c = &p->children[j];
            if (c->stats_fd != fd) continue;
            if (!stats_read(ps, p, c, STATS_READS_PER_EVENT)) stats_close(ps, p, c);
            return true;
        }
    }
    return false;
}

const char *exit_kind_name(int k)
{
    static const char *const names[EXIT_KINDS] = {"stopped", "max_jobs", "max_time", "memory", "exited", "crashed"};
    return k >= 0 && k < EXIT_KINDS ? names[k] : "?";
}

static enum exit_kind exit_kind(const child_t *c, const sb_child_t *snap, int status)
{
    if (c->stop_reason) return EXIT_STOPPED;
    if (!WIFEXITED(status)) return EXIT_CRASHED;
    int code = WEXITSTATUS(status);
    if (code == QPOOL_EX_MEMORY) return EXIT_MEMORY;
    if (code) return EXIT_CRASHED;
    return snap->exit_reason == SB_EXIT_MAX_JOBS ? EXIT_MAX_JOBS
           : snap->exit_reason == SB_EXIT_MAX_TIME ? EXIT_MAX_TIME : EXIT_CLEAN;
}

const slot_state_t *pool_slot_history(const pool_t *p, int slot_no)
{
    return slot_no >= 1 && slot_no <= p->nslots ? &p->slots[slot_no - 1] : NULL;
}

uint64_t pool_redis_reconnects(const pools_t *ps, const pool_t *p)
{
    uint64_t n = p->redis_reconnects_reaped;
    for (int i = 0; i < p->nchildren; i++) {
        sb_child_t s;
        child_state(ps, &p->children[i], &s);
        n += s.redis_reconnects;
    }
    return n;
}

static const char *exit_reason_text(int r)
{
    switch (r) {
    case SB_EXIT_MAX_JOBS: return " (max_jobs reached)";
    case SB_EXIT_MAX_TIME: return " (max_time reached)";
    case SB_EXIT_SIGNAL: return " (asked to stop)";
    case SB_EXIT_MEMORY: return " (memory limit)";
    default: return "";
    }
}

/* The reaped child's counters join its pool's, its handler group and stats
 * pipe go, its slot is released and it leaves the pool's list. Returns a
 * copy of it; *native: it was a native worker. */
static child_t release_child(pools_t *ps, pool_t *p, child_t *c, const sb_child_t *snap, int status, bool *native)
{
    p->jobs_done_reaped += snap->jobs_done;
    p->jobs_failed_reaped += snap->jobs_failed;
    p->busy_ms_reaped += snap->busy_ms;
    p->redis_reconnects_reaped += snap->redis_reconnects;
    p->exits[exit_kind(c, snap, status)]++;
    kill_handler_group(ps, p, c, snap); /* never leave a handler behind */
    stats_close(ps, p, c); /* what it sent before it exited counts */
    *native = child_native(ps, c);
    sb_release(ps->sb, c->sb);

    child_t gone = *c;
    *c = p->children[--p->nchildren];
    if (gone.pid == p->roll_child_pid) p->roll_child_pid = 0;
    return gone;
}

/* An exit the master did not ask for: when to start the slot again
 * (respawn.h), said in the log. */
static void unasked_exit(pool_t *p, const child_t *gone, const sb_child_t *snap, int status, bool native,
                         const char *desc, int64_t now)
{
    const char *name = p->conf.name;
    int64_t lived = now - gone->started_ms;
    slot_state_t *st = slot_state(p, gone->slot_no);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    exit_facts_t f = {.lived_ms = lived, .clean = code == 0 || code == QPOOL_EX_MEMORY,
                      .did_work = native && snap->jobs_done > 0};
    int delay_s;
    enum respawn_verdict verdict = respawn_after_exit(&st->respawn, &f, &delay_s);
    st->not_before_ms = now + (int64_t)delay_s * 1000;
    if (code == QPOOL_EX_MEMORY) {
        p->memory_recycles++;
        log_info("pool %s: %s#%d (pid %d) passed its memory limit (exit 12, %s %llu kB); memory recycle #%llu, "
                 "replacing it", name, name, gone->slot_no, (int)gone->pid,
                 snap->mem_private ? "RSS + handler USS" : "RSS", (unsigned long long)snap->rss_kb,
                 (unsigned long long)p->memory_recycles);
    } else if (code == 0)
        log_info("pool %s: %s#%d (pid %d) exited with status 0%s after %.1f s; replacing it",
                 name, name, gone->slot_no, (int)gone->pid, exit_reason_text(snap->exit_reason),
                 (double)lived / 1000.0);
    if (verdict == RESPAWN_NOW) return;
    if (verdict == RESPAWN_QUICK_LOOP)
        log_warn("pool %s: %s#%d exited %d times in a row within 1 s without doing any work", name,
                 name, gone->slot_no, st->respawn.quick_exits);
    else
        p->crashes++;
    log_warn("pool %s: %s#%d (pid %d) %s after %.1f s; restarting in %d s", name, name,
             gone->slot_no, (int)gone->pid, desc, (double)lived / 1000.0, delay_s);
}

void pools_child_exited(pools_t *ps, pid_t pid, int status, int64_t now)
{
    pool_t *p = NULL;
    if (zygote_reaped(ps, pid, status, now)) return;
    child_t *c = pools_find_child(ps, pid, &p);
    if (!c) {
        log_debug("reaped unknown pid %d", (int)pid);
        return;
    }
    sb_child_t snap;
    child_state(ps, c, &snap);
    bool native;
    child_t gone = release_child(ps, p, c, &snap, status, &native);

    char desc[96];
    proc_describe_status(status, desc, sizeof desc);
    slot_state_t *hist = slot_state(p, gone.slot_no);
    hist->exits++;
    snprintf(hist->last_exit, sizeof hist->last_exit, "%s: %s", exit_kind_name(exit_kind(&gone, &snap, status)), desc);
    if (gone.stop_reason) {
        log_info("pool %s: %s#%d (pid %d) %s after stop (%.1f s after the request)", p->conf.name, p->conf.name,
                 gone.slot_no, (int)pid, desc, (double)(now - gone.stop_sent_ms) / 1000.0);
        return;
    }
    unasked_exit(p, &gone, &snap, status, native, desc, now);
}

void pool_publish_watch(pools_t *ps, pool_t *p, uint64_t gen)
{
    p->watch_gen = gen;
    for (int j = 0; j < p->nchildren; j++) atomic_store(&ps->sb->slots[p->children[j].sb].watch_gen, gen);
}

bool pools_apply_pause(pools_t *ps)
{
    bool pending = false;
    for (int i = 0; i < ps->n; i++) {
        pool_t *p = ps->v[i];
        uint32_t cw = pool_control_word(ps, p);
        bool want = pool_is_paused(ps, p);
        for (int j = 0; j < p->nchildren; j++) {
            child_t *c = &p->children[j];
            sb_slot_t *slot = &ps->sb->slots[c->sb];
            uint32_t keep = atomic_load(&slot->control) & SB_CTL_RETIRE;
            uint32_t old = atomic_exchange(&slot->control, cw | keep) & ~SB_CTL_RETIRE;
            slot_zygote(slot, p, c->gen);
            bool native = slot->native != 0;
            if (want && !c->pause_sent) {
                if (native) {
                    kill(c->pid, SIGUSR2);
                    c->pause_sent = true;
                } else if (proc_catches_signal(c->pid, SIGUSR2) && proc_catches_signal(c->pid, SIGCONT)) {
                    /* Only once it handles SIGUSR2 (the default action would
                     * kill it) and SIGCONT: PHP catches SIGUSR2 from its start
                     * and dies of it until queue:work installs its own
                     * handlers, SIGCONT's among them. */
                    kill(c->pid, SIGUSR2);
                    c->pause_sent = true;
                    slot->c.state = SB_PAUSED;
                } else if (!c->stop_reason)
                    pending = true;
            } else if (!want && c->pause_sent) {
                kill(c->pid, SIGCONT);
                c->pause_sent = false;
                if (!native && slot->c.state == SB_PAUSED) slot->c.state = SB_RUNNING;
            } else if (native && old != cw && !want) {
                /* queue-level pause changed: nudge the worker to re-read its word */
                kill(c->pid, SIGCONT);
            }
            if (!native && slot->c.state == SB_STARTING && !want && c->started_ms &&
                mono_ms() - c->started_ms >= EXTERNAL_READY_MS)
                slot->c.state = SB_RUNNING;
        }
    }
    return pending;
}

void pools_stop_all(pools_t *ps, int64_t now)
{
    signal_zygotes(ps, SIGTERM); /* no handler is forked during a stop; running ones go on */
    for (int i = 0; i < ps->n; i++) {
        pool_t *p = ps->v[i];
        for (int j = 0; j < p->nchildren; j++) {
            child_t *c = &p->children[j];
            if (c->stop_reason) {
                /* already stopping (scale/roll): it was told; make sure it is not paused */
                continue;
            }
            stop_child(ps, p, c, STOP_SHUTDOWN, now);
        }
    }
}

void pools_kill_all(pools_t *ps)
{
    signal_zygotes(ps, SIGKILL);
    for (int i = 0; i < ps->n; i++) {
        pool_t *p = ps->v[i];
        for (int j = 0; j < p->nchildren; j++) {
            child_t *c = &p->children[j];
            sb_child_t s;
            child_state(ps, c, &s);
            kill_handler_group(ps, p, c, &s);
            kill_group(c->pid);
        }
    }
}

void pool_counts(const pools_t *ps, const pool_t *p, pool_counts_t *out)
{
    memset(out, 0, sizeof *out);
    out->jobs_done = p->jobs_done_reaped;
    out->jobs_failed = p->jobs_failed_reaped;
    out->busy_ms = p->busy_ms_reaped;
    for (int i = 0; i < p->nchildren; i++) {
        const child_t *c = &p->children[i];
        sb_child_t s;
        sb_read(&ps->sb->slots[c->sb], &s);
        out->jobs_done += s.jobs_done;
        out->jobs_failed += s.jobs_failed;
        out->busy_ms += s.busy_ms;
        if (c->stop_reason) {
            out->stopping++;
            continue;
        }
        out->live++;
        switch (s.state) {
        case SB_STARTING: out->starting++; break;
        case SB_BUSY: out->busy++; break;
        case SB_PAUSED: out->paused++; break;
        case SB_STOPPING: out->stopping++; out->live--; break;
        case SB_RUNNING: out->running++; break;
        default: out->idle++; break;
        }
    }
}
