/*
 * worker.c - the native worker loop (see worker.h).
 *
 * Signals arrive on a signalfd that every wait in this file polls:
 *   SIGTERM, SIGINT, SIGQUIT  finish the current job, then exit 0 (idle: at once)
 *   SIGUSR2 / SIGCONT         pause / resume (no Redis traffic while paused)
 *   SIGHUP                    the master died (parent-death signal): as
 *                             SIGTERM, finish the current job, then exit;
 *                             in a pool with a fleet budget, the job's slot
 *                             is kept in a lease record of the worker's own
 *                             meanwhile (lease_orphan_renew)
 *   SIGCHLD                   a handler process exited
 * A Redis outage is waited out with backoff; an outcome that could not be
 * written (ack, release, fail) is kept and retried first after reconnecting,
 * the job staying reserved until then, so nothing is lost.
 *
 * With prefetch > 1 a pop takes up to that many jobs; the ones not yet
 * started wait in w->local, reserved. When half a batch is left the next pop
 * is sent ahead (with the acks so far) and its replies are read only when
 * needed: settle() runs before any other use of the connection, so replies
 * are always read in the order the commands went out. Every graceful exit
 * gives unstarted jobs back untouched (give_back).
 */
#include "worker/worker.h"
#include "worker/handler.h"
#include "worker/appdriver.h"
#include "observe/jobhist.h"
#include "observe/jobwatch.h"
#include "observe/monitored.h"
#include "observe/jobstats.h"
#include "redis/lease.h"
#include "core/log.h"
#include "redis/payload.h"
#include "worker/policy.h"
#include "worker/wlcluster.h"
#include "worker/wlimits.h"
#include "os/proc.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MIGRATE_EVERY_MS 1000
#define IDLE_WAIT_MAX_S 1.0
#define HOOK_TIMEOUT_MS 60000

enum outcome_kind { OUT_NONE = 0, OUT_ACK, OUT_RELEASE, OUT_FAIL, OUT_UNPOP, OUT_CLAIM };
/* At most: an ack and a claim per job held (the prefetched ones and the
 * current one), a give-back per prefetched job, one refused outcome. */
#define MAX_PENDING (6 * QPOOL_MAX_PREFETCH + 8)
/* With prefetch, between quick jobs, look at the signalfd and /proc statm at
 * most this often (a job that took longer is always followed by both): a job
 * of a few microseconds should not pay three system calls for them. Any wait
 * in this file polls the signalfd anyway, so a signal is seen within one
 * job. Without prefetch both are read after every job, as before. */
#define SIGNAL_CHECK_MS 1
#define RSS_CHECK_MS 10
#define LIMIT_POLL_MS 200  /* ready jobs all wait on full limits: pop again after 100..300 ms */
#define USS_CHECK_MS 1000  /* a forked handler's private memory: from smaps_rollup at most this often */

/* How long a reservation may go without being renewed: half of retry_after,
 * less the second that Laravel's whole-second scores can lose. */
static int64_t renew_every_ms(const pool_conf_t *p)
{
    int64_t ms = (int64_t)p->retry_after * 500 - 1000;
    return ms < 250 ? 250 : ms;
}

typedef struct {
    enum outcome_kind kind;
    int qidx;
    char *reserved;
    size_t reslen;
    int64_t available_at;   /* release */
    char *uuid;             /* fail */
    char *payload;          /* fail: as popped; unpop: as it was before the pop; release: as it goes back;
                               claim: the reserved copy it becomes */
    size_t payload_len;
    char *exception;
    int64_t failed_at;
    char token[40];         /* unpop: this give-back's idempotency token; release: a twin's marker */
    bool maybe_done;        /* sent, its reply lost: Redis may have run it */
} outcome_t;

typedef struct {
    const pool_conf_t *p;
    const qconf_t *conf;
    sb_slot_t *slot;
    char tag[64];
    pid_t master, pid;
    int sfd;
    rconn_t *rc, *cache;
    /* rc->connects when our scripts were last loaded; 0: load them (after
     * NOSCRIPT). A count, not the context's address: a new connection's
     * context is often allocated where the last one was freed. */
    uint64_t scripts_gen;
    unsigned wait_turn;        /* Redis Cluster: whose slot the next idle BLPOP waits on */
    queue_set_t qs;
    handler_t *h;

    rss_reader_t rss_self, rss_handler;
    bool quit, paused_local, parent_dead;
    int64_t start_ms;
    int64_t last_migrate_ms;
    bool migrate_again;
    bool token_taken;
    int token_q; /* 1 + the queue whose :notify the token came from (0: not known) */
    bool lim_promised; /* the last pop told when a rate's token is this worker's (limit_wait) */
    uint64_t jobs_done, jobs_failed, busy_ms;
    outcome_t pending[MAX_PENDING]; /* outcomes to write, in order, before anything else */
    int npending;
    bool pending_stuck;     /* Redis refused one: write it before popping again */
    int64_t refused_logged_ms;
    /* prefetched jobs, reserved, not started: up to one batch plus what was
     * left when the next one was asked for ahead */
    pop_item_t local[2 * QPOOL_MAX_PREFETCH];
    int local_head, nlocal;
    struct {
        bool on;              /* a pop was sent ahead; its replies are unread */
        int n;                /* outcomes sent with it (their replies come first) */
        pop_args_t a;
        int64_t now_ms;
        uint64_t gen;         /* rc->connects when it was sent */
    } ahead;
    int64_t last_job_ms;
    double pace_ms;            /* prefetch: the jobs' moving average run time (policy_prefetch_pace) */
    int64_t late_written_ms; /* the start of the job whose outcomes were written 100 ms in */
    int64_t held_since_ms;  /* when the oldest reservation this worker holds was last set */
    int64_t signals_read_ms, rss_read_ms;
    uint64_t rss_kb;
    bool mem_private;        /* rss_kb counts the handler's USS (a forked handler) */
    pid_t uss_pid;           /* the forked handler uss_kb was read for */
    int64_t uss_read_ms;
    uint64_t uss_kb, uss_rss_kb; /* its USS then, and its RSS at that moment */
    /* job stats since the last line sent to the master (jobstats.h) */
    int stats_fd;
    jobstats_t stats;
    jobhist_t hist;          /* recent attempts, for the master's job history (jobhist.h) */
    jobhist_t wq;            /* records of a watched tag not yet sent (jobwatch.h) */
    jobwatch_set_t watch;    /* the watched tags: read when their generation changes, else every JOBWATCH_POLL_MS */
    uint64_t watch_gen;      /* the generation (jobwatch.h) watch has; 0: none (polled) */
    char *watch_key;
    int64_t watch_next_ms, wq_sent_ms;
    wlimits_t lim;           /* fleet-wide limits on this pool's queues (wlimits.h) */
    int64_t stats_sent_ms;
    /* fleet budget: its own lease record while it finishes a job after its
     * master died (orphan_lease) */
    char *orphan_key;
    char orphan_id[BUDGET_ID_MAX + 1];
    int64_t orphan_next_ms;
    bool orphan_logged;
    bool app_stopped;        /* app_driver: an operator stopped the job the handler runs (app_stop) */
} worker_t;

/* ------------------------------------------------------------ scoreboard */

static void sb_state(worker_t *w, int state)
{
    if (w->slot->c.state == state) return;
    sb_write_begin(w->slot);
    w->slot->c.state = (uint8_t)state;
    if (state != SB_BUSY) {
        w->slot->c.job_started_ms = 0;
        w->slot->c.job_id[0] = w->slot->c.job_uuid[0] = w->slot->c.job_name[0] = w->slot->c.job_queue[0] = '\0';
    }
    sb_write_end(w->slot);
}

/* s (valid UTF-8) into a slot's field, cut between characters. */
static void sb_text(char *dst, size_t cap, const char *s)
{
    size_t n = s ? utf8_cut(s, strlen(s), cap - 1) : 0;
    memcpy(dst, s ? s : "", n);
    dst[n] = '\0';
}

/* The job a worker starts: its names, attempt (0: not known) and timeout
 * (0: none). */
typedef struct {
    const char *id, *uuid, *name, *queue;
    long attempt, timeout;
    const char *raw;    /* the payload, for its own "tags" (NULL: none) */
    size_t rawlen;
} sb_job_t;

/* The payload's own tags into dst, '\n'-joined: each made one line of
 * valid UTF-8 (jobhist_set_str), the whole ones that fit. */
static void sb_tags(char *dst, size_t cap, const char *raw, size_t rawlen)
{
    size_t ts, te, n = 0;
    dst[0] = '\0';
    if (!raw || !json_top_value(raw, rawlen, "tags", &ts, &te)) return;
    cJSON *arr = cJSON_ParseWithLength(raw + ts, te - ts);
    const cJSON *t;
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return;
    }
    int seen = 0;
    cJSON_ArrayForEach(t, arr) {
        char one[JOBHIST_TAG_MAX + 1];
        if (++seen > JOBHIST_TAGS_MAX || n + 2 >= cap) break; /* as the history keeps them; or full */
        if (!cJSON_IsString(t)) continue;
        jobhist_set_str(one, sizeof one, t->valuestring);
        size_t len = strlen(one);
        if (!len || n + len + 2 > cap) continue;
        if (n) dst[n++] = '\n';
        memcpy(dst + n, one, len + 1);
        n += len;
    }
    cJSON_Delete(arr);
}

static void sb_job(worker_t *w, const sb_job_t *j)
{
    const char *id = j->id, *uuid = j->uuid, *name = j->name, *queue = j->queue;
    char tags[sizeof w->slot->c.job_tags];
    sb_tags(tags, sizeof tags, j->raw, j->rawlen); /* parsed before the write: the master's reads never wait on it */
    sb_write_begin(w->slot);
    w->slot->c.state = SB_BUSY;
    sb_job_started(w->slot, wall_ms());
    w->slot->c.job_attempt = j->attempt > 0 && j->attempt < INT32_MAX ? (uint32_t)j->attempt : 0;
    w->slot->c.job_timeout_s = j->timeout > 0 && j->timeout < INT32_MAX ? (int32_t)j->timeout : 0;
    sb_text(w->slot->c.job_id, sizeof w->slot->c.job_id, id);
    sb_text(w->slot->c.job_uuid, sizeof w->slot->c.job_uuid, uuid);
    sb_text(w->slot->c.job_name, sizeof w->slot->c.job_name, name);
    sb_text(w->slot->c.job_queue, sizeof w->slot->c.job_queue, queue);
    memcpy(w->slot->c.job_tags, tags, sizeof tags);
    sb_write_end(w->slot);
}

/* The handler's share of the memory limit: its RSS, or for a handler the
 * zygote forked, its private memory (USS): the rest is the zygote's, shared
 * by every handler of the pool, and counted once (the zygote's own figure). */
static uint64_t handler_memory(worker_t *w)
{
    pid_t pid = handler_pgid(w->h);
    uint64_t rss = rss_read(&w->rss_handler, pid);
    w->mem_private = handler_forked(w->h);
    if (!w->mem_private) return rss;
    /* smaps_rollup walks the handler's page tables (about 0.3 ms for a
     * Laravel handler): read at most once a second, or after a job long
     * enough that it does not show, and in between follow the RSS, which
     * grows with every page a leak adds */
    int64_t now = mono_ms();
    proc_mem_t m;
    if ((pid != w->uss_pid || now - w->uss_read_ms >= USS_CHECK_MS || w->last_job_ms >= USS_CHECK_MS / 10) &&
        proc_mem(pid, &m) == 0) {
        w->uss_pid = pid;
        w->uss_read_ms = now;
        w->uss_kb = m.uss_kb;
        w->uss_rss_kb = rss;
    }
    if (pid != w->uss_pid) return rss;
    return rss >= w->uss_rss_kb ? w->uss_kb + (rss - w->uss_rss_kb) : w->uss_kb;
}

static void sb_counters(worker_t *w, uint64_t rss_kb)
{
    sb_write_begin(w->slot);
    w->slot->c.jobs_done = w->jobs_done;
    w->slot->c.jobs_failed = w->jobs_failed;
    w->slot->c.busy_ms = w->busy_ms;
    w->slot->c.rss_kb = rss_kb;
    w->slot->c.mem_private = w->mem_private;
    w->slot->c.handler_pgid = handler_pgid(w->h);
    w->slot->c.handler_start = handler_start_ticks(w->h);
    w->slot->c.redis_reconnects = w->rc ? (uint32_t)rconn_reconnects(w->rc) : 0;
    sb_write_end(w->slot);
}

static void slot_handler_group(void *arg, pid_t pg)
{
    worker_t *w = arg;
    unsigned long long start = pg ? handler_start_ticks(w->h) : 0;
    if (w->slot->c.handler_pgid == pg && w->slot->c.handler_start == start) return;
    sb_write_begin(w->slot);
    w->slot->c.handler_pgid = pg;
    w->slot->c.handler_start = start;
    sb_write_end(w->slot);
}

static void sb_handler(worker_t *w)
{
    slot_handler_group(w, handler_pgid(w->h));
}

/* ------------------------------------------------------------ signals */

static uint32_t control(worker_t *w)
{
    return atomic_load(&w->slot->control);
}

static bool paused(worker_t *w)
{
    return w->paused_local || (control(w) & SB_CTL_PAUSE_ALL);
}

/* Queues of the pool paused on their own (bit i: queue i). */
static uint32_t skip_mask(worker_t *w)
{
    return control(w) & SB_CTL_QUEUE_MASK & ((1u << w->qs.nq) - 1);
}

static void read_signals(worker_t *w)
{
    struct signalfd_siginfo si;
    w->signals_read_ms = mono_ms();
    while (read(w->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        switch (si.ssi_signo) {
        case SIGTERM:
        case SIGINT:
        case SIGQUIT:
            if (!w->quit) log_debug("received SIG%s: stopping after the current job",
                                    sigabbrev_np((int)si.ssi_signo));
            w->quit = true;
            break;
        case SIGUSR2:
            w->paused_local = true;
            break;
        case SIGCONT:
            w->paused_local = false;
            break;
        case SIGHUP:
            /* The master died: like SIGTERM, the job in hand is finished
             * (and its outcome written), then the worker exits. */
            if (getppid() != w->master) {
                if (!w->parent_dead) log_warn("the master died: finishing the current job, then exiting");
                w->parent_dead = w->quit = true;
            }
            break;
        case SIGCHLD:
            handler_reap(w->h);
            sb_handler(w); /* never leave a reaped handler's group in the slot */
            break;
        default:
            break;
        }
    }
}

/* Sleep up to ms, waking for signals. */
static void wait_signals(worker_t *w, int64_t ms)
{
    if (ms < 0) ms = 0;
    struct pollfd p = {.fd = w->sfd, .events = POLLIN};
    if (poll(&p, 1, (int)(ms > 60000 ? 60000 : ms)) > 0) read_signals(w);
}

static int setup_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGUSR2, SIGCONT, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < ARRAY_LEN(sigs); i++) sigaddset(&set, sigs[i]);
    sigprocmask(SIG_SETMASK, &set, NULL); /* exactly these blocked, the rest default */
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* ------------------------------------------------------------ redis */

/* Connected, with our scripts loaded. Never blocks beyond one connect. */
static bool redis_ready(worker_t *w)
{
    if (rconn_ensure(w->rc) < 0) return false;
    if (w->scripts_gen != w->rc->connects) {
        if (queue_load_scripts(w->rc) < 0 || (w->lim.ls.n && queue_load_limited(w->rc) < 0)) {
            rconn_drop(w->rc, "cannot load scripts");
            return false;
        }
        w->scripts_gen = w->rc->connects;
    }
    return true;
}

static bool is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8);
}

static void outcome_clear(outcome_t *o)
{
    free(o->reserved);
    free(o->uuid);
    free(o->payload);
    free(o->exception);
    memset(o, 0, sizeof *o);
}

/* This host's name as the failed store records it (once per process). */
static const char *worker_host(void)
{
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1) < 0) snprintf(host, sizeof host, "?");
    return host;
}

static void append_outcome(worker_t *w, const outcome_t *o)
{
    const qkeys_t *k = &w->qs.q[o->qidx];
    switch (o->kind) {
    case OUT_ACK:
        queue_append_ack(w->rc, k, o->reserved, o->reslen);
        break;
    case OUT_RELEASE:
        if (o->payload)
            queue_append_release(w->rc, k, o->reserved, o->reslen, o->payload, o->payload_len, o->token,
                                 o->available_at);
        else
            queue_append_release(w->rc, k, o->reserved, o->reslen, o->reserved, o->reslen, o->token, o->available_at);
        break;
    case OUT_UNPOP:
        queue_append_unpop(w->rc, k, o->reserved, o->reslen, o->payload, o->payload_len, o->token);
        break;
    case OUT_CLAIM:
        queue_append_claim(w->rc, k, o->reserved, o->reslen, o->payload, o->payload_len);
        break;
    case OUT_FAIL: {
        fail_record_t f = {.uuid = o->uuid,
                           .connection = w->p->queue_connection,
                           .payload = o->payload,
                           .payload_len = o->payload_len,
                           .exception = o->exception,
                           .failed_at = o->failed_at,
                           .limit = w->conf->failed_limit,
                           .pool = w->p->name,
                           .host = worker_host()};
        queue_append_fail(w->rc, &w->qs, k, o->reserved, o->reslen, &f);
        break;
    }
    default:
        break;
    }
}

enum { OW_OK = 0, OW_LOST = -1, OW_REFUSED = -2 };

/* Read the reply to one appended outcome (o). */
static int read_outcome_reply(worker_t *w, const outcome_t *o, char *err, size_t errn)
{
    redisReply *r;
    if (rconn_read(w->rc, -1, -1, &r) != RC_OK) return OW_LOST;
    int rv = OW_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        rv = OW_REFUSED;
        if (is_noscript(r)) w->scripts_gen = 0; /* reload, then write again */
        snprintf(err, errn, "%s", r->str);
    } else if (o->kind == OUT_CLAIM && r->type == REDIS_REPLY_INTEGER && r->integer == 0 && !o->maybe_done) {
        log_warn("a job popped ahead on %s lost its reservation before it started (it expired and was taken "
                 "back): it may run twice", w->qs.q[o->qidx].name);
    }
    freeReplyObject(r);
    return rv;
}

/* Does outcome o act on the reservation that claim c (refused, kept)
 * would make? Then it must be written again after c. */
static bool follows_claim(const outcome_t *c, const outcome_t *o)
{
    return c->kind == OUT_CLAIM && o->kind != OUT_CLAIM && o->qidx == c->qidx && o->reslen == c->payload_len &&
           !memcmp(o->reserved, c->payload, o->reslen);
}

/* Is pending[i] the outcome of a job whose claim, before it in this batch,
 * was not written (pending[0..keep) are the ones kept)? */
static bool after_kept_claim(const worker_t *w, int keep, int i)
{
    for (int k = 0; k < keep; k++)
        if (follows_claim(&w->pending[k], &w->pending[i])) return true;
    return false;
}

/* Read the replies to the first n pending outcomes (appended in order) and
 * keep only those not written, and the outcome of a job whose claim was not
 * written (it found nothing to act on yet: it is written again after the
 * claim). OW_LOST: the connection went away (the outcomes sent are marked
 * maybe_done); OW_REFUSED: Redis answered one with an error (*err). */
static int collect_pending(worker_t *w, int n, char *err, size_t errn)
{
    int result = OW_OK, keep = 0, total = w->npending;
    for (int i = 0; i < n; i++) {
        int rv = result == OW_LOST ? OW_LOST : read_outcome_reply(w, &w->pending[i], err, errn);
        if (rv == OW_LOST) w->pending[i].maybe_done = true;
        if (rv == OW_OK && !after_kept_claim(w, keep, i)) {
            outcome_clear(&w->pending[i]);
            continue;
        }
        if (rv != OW_OK && (rv == OW_LOST || result == OW_OK)) result = rv;
        outcome_t o = w->pending[i];
        memset(&w->pending[i], 0, sizeof w->pending[i]);
        w->pending[keep++] = o;
    }
    for (int i = n; i < total; i++) {
        outcome_t o = w->pending[i];
        memset(&w->pending[i], 0, sizeof w->pending[i]);
        w->pending[keep++] = o;
    }
    w->npending = keep;
    return result;
}

/* A job whose claim was never run (not sent yet, or refused) and whose
 * outcome is known: the claim is dropped and the outcome acts on the held
 * reservation, so a claim and its job's outcome never travel together (on
 * a Redis Cluster a NOSCRIPT resend would put the claim after it). Called
 * before pending outcomes are appended. */
static void fold_claims(worker_t *w)
{
    int keep = 0;
    for (int i = 0; i < w->npending; i++) {
        outcome_t *c = &w->pending[i];
        bool folded = false;
        for (int j = i + 1; c->kind == OUT_CLAIM && !c->maybe_done && j < w->npending && !folded; j++) {
            outcome_t *o = &w->pending[j];
            if (!follows_claim(c, o)) continue;
            free(o->reserved);
            o->reserved = c->reserved; /* the held member */
            o->reslen = c->reslen;
            c->reserved = NULL;
            folded = true;
        }
        if (folded) {
            outcome_clear(c);
            continue;
        }
        outcome_t keep_o = *c;
        memset(c, 0, sizeof *c);
        w->pending[keep++] = keep_o;
    }
    w->npending = keep;
}

/* Append every pending outcome (claims folded first). Returns how many. */
static int append_pending(worker_t *w)
{
    fold_claims(w);
    for (int i = 0; i < w->npending; i++) append_outcome(w, &w->pending[i]);
    return w->npending;
}

/* Redis refused an outcome (a read-only replica after a failover, OOM,
 * BUSY...): reconnect and write it again after a pause; the job stays
 * reserved meanwhile, so nothing is lost or run twice. */
static void outcome_refused(worker_t *w, const char *err, bool reconnect)
{
    w->pending_stuck = true;
    if (!w->scripts_gen) return; /* NOSCRIPT: reload and write again at once */
    int64_t now = mono_ms();
    if (!w->refused_logged_ms || now - w->refused_logged_ms >= 60000) {
        log_error("redis refused the outcome of a job (%s); keeping the job reserved and retrying", err);
        w->refused_logged_ms = now;
    }
    if (reconnect) rconn_close(w->rc); /* after a failover: find the new primary */
}

/* ------------------------------------------------------------ prefetch */

/* Queue a popped job behind the prefetched ones (takes the strings). */
static void local_add(worker_t *w, pop_item_t *it)
{
    if (w->nlocal == (int)ARRAY_LEN(w->local) && w->local_head > 0) {
        memmove(w->local, w->local + w->local_head, sizeof w->local[0] * (size_t)(w->nlocal - w->local_head));
        w->nlocal -= w->local_head;
        w->local_head = 0;
    }
    /* cannot overflow: a batch is asked for only with at most half a batch left */
    w->local[w->nlocal++] = *it;
    memset(it, 0, sizeof *it);
}

/* What every pop reply brings besides jobs: migration bookkeeping, and a
 * poison payload the script moved aside. */
static void pop_bookkeeping(worker_t *w, const pop_args_t *a, int64_t now_ms, const pop_result_t *pr)
{
    w->token_taken = false;
    w->token_q = 0;
    w->lim_promised = false;
    if (a->migrate) {
        w->last_migrate_ms = now_ms;
        w->migrate_again = pr->migrate_full;
    }
    if (pr->kind == POP_POISON) {
        log_error("poison payload on %s: %s; moved to the failed store as %s (raw bytes kept)",
                  w->qs.q[pr->qidx].name, pr->reason, pr->uuid);
        w->jobs_failed++;
    }
}

/* Read the replies to a pop sent ahead (the outcomes sent with it first) and
 * queue what it popped. Called before any other use of the connection. */
static void settle(worker_t *w)
{
    if (!w->ahead.on) return;
    w->ahead.on = false;
    /* the connection went (and maybe another came): its jobs come back after retry_after */
    if (!w->rc->ctx || w->rc->connects != w->ahead.gen) return;
    if (w->ahead.n) {
        char err[256] = "";
        int rv = collect_pending(w, w->ahead.n, err, sizeof err);
        if (rv == OW_LOST) return;
        if (rv == OW_REFUSED) outcome_refused(w, err, false);
    }
    redisReply *r;
    if (queue_read_pop(w->rc, &w->qs, &w->ahead.a, &r) != RC_OK) return;
    pop_result_t pr;
    if (is_noscript(r)) {
        w->scripts_gen = 0;
    } else if (!queue_parse_pop(&w->qs, &w->ahead.a, r, &pr)) {
        if (r->type == REDIS_REPLY_ERROR) rconn_drop(w->rc, r->str);
        else log_error("unexpected reply to pop (type %d)", r->type);
    } else {
        pop_bookkeeping(w, &w->ahead.a, w->ahead.now_ms, &pr);
        if (pr.kind == POP_JOB) {
            pop_item_t first = {.qidx = pr.qidx, .raw = pr.raw, .rawlen = pr.rawlen,
                                .reserved = pr.reserved, .reslen = pr.reslen, .run = pr.run, .runlen = pr.runlen};
            local_add(w, &first);
            pr.raw = pr.reserved = pr.run = NULL;
            for (int i = 0; i < pr.nextra; i++) local_add(w, &pr.extra[i]);
        }
        pop_result_free(&pr);
    }
    freeReplyObject(r);
}

/* Write every pending outcome, waiting out Redis outages and refusals.
 * Returns false only when the worker must give up (the master died). */
static bool flush_outcome(worker_t *w)
{
    int attempts = 0, pause_ms = 100;
    settle(w);
    while (w->npending) {
        /* With the master gone, one best-effort try, then give up: the job
         * stays reserved and comes back after retry_after. */
        if (w->parent_dead && attempts++ > 0) return false;
        if (!redis_ready(w)) {
            wait_signals(w, rconn_retry_in_ms(w->rc) + 1);
            continue;
        }
        int n = append_pending(w);
        char err[256] = "";
        if (collect_pending(w, n, err, sizeof err) == OW_REFUSED) {
            outcome_refused(w, err, true);
            if (w->scripts_gen) {
                wait_signals(w, pause_ms);
                pause_ms = pause_ms * 2 > 5000 ? 5000 : pause_ms * 2;
            }
        }
    }
    w->pending_stuck = false;
    return true;
}

/* ------------------------------------------------------------ job helpers */

typedef struct {
    pop_result_t pr;
    job_payload_t p;
    bool parsed;
    long attempts;
    hjob_t hj;
    char *uuid;               /* uuid, else id, else a fresh one: the failed record key */
    int64_t started_ms;
    double started_s;
    int64_t started_wall_ms;
    bool failed;              /* went to the failed store */
    bool app_run;             /* app_driver: popped and run by the app's driver (app_cycle) */
    appd_job_t app;           /* ... and what the handler reported of it */
} job_t;

static void job_free(job_t *j)
{
    pop_result_free(&j->pr);
    payload_free(&j->p);
    free(j->uuid);
    appd_job_free(&j->app);
}

/* A fresh pending outcome, or NULL when there is no room even after a
 * flush (cannot happen while Redis or the master answers: only when both
 * are gone, and then the job comes back after retry_after). */
static outcome_t *new_pending(worker_t *w, enum outcome_kind kind, int qidx)
{
    if (w->npending == MAX_PENDING) flush_outcome(w);
    if (w->npending == MAX_PENDING) return NULL;
    outcome_t *o = &w->pending[w->npending++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->qidx = qidx;
    return o;
}

static outcome_t *set_pending(worker_t *w, job_t *j, enum outcome_kind kind)
{
    static outcome_t dropped;
    outcome_t *o = new_pending(w, kind, j->pr.qidx);
    if (!o) {
        o = &dropped;
        outcome_clear(o);
        o->kind = kind;
        o->qidx = j->pr.qidx;
    }
    o->reserved = xstrndup(j->pr.reserved, j->pr.reslen);
    o->reslen = j->pr.reslen;
    return o;
}

/* Drop the prefetched jobs marked gone (qidx -1), keeping the order. */
static void compact_local(worker_t *w)
{
    int n = w->local_head;
    for (int i = w->local_head; i < w->nlocal; i++)
        if (w->local[i].qidx >= 0) w->local[n++] = w->local[i];
    w->nlocal = n;
    if (w->nlocal == w->local_head) w->nlocal = w->local_head = 0;
}

/* Hand back the prefetched jobs of the queues in mask that never started,
 * newest first, so that the LPUSHes leave them at the head of their queues
 * in their original order, attempts as they were before the pop. */
static void give_back(worker_t *w, uint32_t mask)
{
    settle(w);
    for (int i = w->nlocal - 1; i >= w->local_head; i--) {
        pop_item_t *it = &w->local[i];
        if (it->qidx < 0 || !(mask & (1u << it->qidx))) continue;
        outcome_t *o = new_pending(w, OUT_UNPOP, it->qidx);
        if (!o) {
            pop_item_free(it);
            it->qidx = -1;
            continue;
        }
        uuid4(o->token);
        o->reserved = it->reserved;
        o->reslen = it->reslen;
        o->payload = it->raw;
        o->payload_len = it->rawlen;
        free(it->run);
        memset(it, 0, sizeof *it);
        it->qidx = -1;
    }
    compact_local(w);
}

/* Read one renewal's reply: 1 renewed, 0 the reservation is gone, -1 unknown. */
static int read_extend_reply(worker_t *w)
{
    redisReply *r;
    if (rconn_read(w->rc, -1, -1, &r) != RC_OK) return -1;
    int rv = r->type == REDIS_REPLY_INTEGER ? (r->integer ? 1 : 0) : -1;
    if (is_noscript(r)) w->scripts_gen = 0;
    freeReplyObject(r);
    return rv;
}

/* Keep every job this worker holds reserved: write the outcomes so far (a
 * finished job's ack must not wait behind a long job) and extend the
 * reservations of the current job and of the prefetched ones. A prefetched
 * job whose reservation is gone (it expired during an outage and another
 * worker's pop took it back) is dropped here, not run a second time. Best
 * effort: what is not written stays pending. */
static void renew_held(worker_t *w, const job_t *cur)
{
    settle(w);
    w->held_since_ms = mono_ms();
    if (!redis_ready(w)) return;
    int64_t until = wall_s() + w->p->retry_after;
    int n = append_pending(w);
    if (cur) queue_append_extend(w->rc, &w->qs.q[cur->pr.qidx], cur->pr.reserved, cur->pr.reslen, until);
    for (int i = w->local_head; i < w->nlocal; i++)
        queue_append_extend(w->rc, &w->qs.q[w->local[i].qidx], w->local[i].reserved, w->local[i].reslen, until);
    if (n) {
        char err[256] = "";
        int rv = collect_pending(w, n, err, sizeof err);
        if (rv == OW_LOST) return;
        if (rv == OW_REFUSED) outcome_refused(w, err, false);
    }
    if (cur && read_extend_reply(w) == 0)
        log_warn("job %s (%s): its reservation is gone (it expired and was taken back): it may run twice",
                 cur->hj.id ? cur->hj.id : "?", cur->hj.name);
    bool dropped = false;
    for (int i = w->local_head; i < w->nlocal; i++) {
        if (read_extend_reply(w) != 0) continue;
        log_warn("a prefetched job on %s lost its reservation (it expired and was taken back): dropping the local "
                 "copy", w->qs.q[w->local[i].qidx].name);
        pop_item_free(&w->local[i]);
        w->local[i].qidx = -1;
        dropped = true;
    }
    if (dropped) compact_local(w);
}

/* Write the pending outcomes once, now, without waiting out an outage
 * (what Redis refused stays pending). -1 when the connection is gone. */
static int write_pending_now(worker_t *w)
{
    settle(w);
    if (!w->npending) return 0;
    if (!redis_ready(w)) return -1;
    int n = append_pending(w);
    char err[256] = "";
    int rv = collect_pending(w, n, err, sizeof err);
    if (rv == OW_REFUSED) outcome_refused(w, err, false);
    return rv == OW_LOST ? -1 : 0;
}

/* How many jobs to ask for: the pool's prefetch while jobs are quick, fewer
 * as they get slower (policy_prefetch_want), never past max_jobs, one at a
 * time when resting between jobs. */
static int want_jobs(worker_t *w, int held)
{
    int want = policy_prefetch_want(w->p->prefetch, w->last_job_ms, w->pace_ms);
    if (want <= 1 || w->p->rest > 0) return 1;
    if (w->p->max_jobs > 0) {
        int64_t left = (int64_t)w->p->max_jobs - (int64_t)w->jobs_done - held;
        if (left < want) want = left > 1 ? (int)left : 1;
    }
    return want;
}

/* Released as Laravel releases it (the reserved copy), with qpool's stamp
 * of when it is due (payload.h), so that the next attempt's wait is
 * measured, and without the twin marker a held job's copy carries (a
 * byte-identical twin due at the same moment gets one again: RELEASE_LUA). */
static void job_release(worker_t *w, job_t *j, long delay)
{
    outcome_t *o = set_pending(w, j, OUT_RELEASE);
    o->available_at = wall_s() + delay;
    uuid4(o->token);
    o->payload = payload_set_available_at(o->reserved, o->reslen, o->available_at * 1000, &o->payload_len);
    size_t len;
    char *plain = o->payload ? payload_drop_key(o->payload, o->payload_len, PAYLOAD_TWIN, &len) : NULL;
    if (plain) {
        free(o->payload);
        o->payload = plain;
        o->payload_len = len;
    }
}

/* Fail a job: the record and the removal from :reserved are written at
 * once, before any failure hook runs (as Laravel's Job::fail deletes first). */
static void job_fail(worker_t *w, job_t *j, const char *exception)
{
    j->failed = true;
    outcome_t *o = set_pending(w, j, OUT_FAIL);
    o->uuid = xstrdup(j->uuid);
    o->payload = xstrndup(j->pr.raw, j->pr.rawlen);
    o->payload_len = j->pr.rawlen;
    o->exception = xstrndup(exception, utf8_cut(exception, strlen(exception), 65536));
    o->failed_at = wall_s();
    flush_outcome(w);
}

static double ms_since(double start_s)
{
    return (mono_s() - start_s) * 1000.0;
}

/* One line per job event; in JSON logs the fields are escaped (a payload's
 * id is the producer's to choose: it must not forge log entries). */
static void job_log(worker_t *w, job_t *j, const char *what, const char *extra)
{
    if (!w->p->job_log) return;
    const char *id = j->hj.id ? j->hj.id : "";
    const char *queue = w->qs.q[j->pr.qidx].name;
    size_t idlen = strnlen(id, 64);
    sbuf_t f;
    sbuf_init(&f);
    sbuf_printf(&f, ",\"event\":\"%s\",\"queue\":", what);
    sbuf_json_str(&f, queue, strlen(queue));
    sbuf_puts(&f, ",\"job_id\":");
    sbuf_json_str(&f, id, idlen);
    sbuf_printf(&f, ",\"attempt\":%ld", j->attempts);
    log_fields(LOG_INFO, f.data, "%-10s %s [%.*s] attempt %ld%s", what, j->hj.name, (int)idlen, id, j->attempts,
               extra ? extra : "");
    sbuf_free(&f);
}

/* Exceptions decide fail vs release the way Worker::handleJobException does. */
static const char *should_fail(worker_t *w, job_t *j, const hresult_t *res)
{
    const char *why = NULL;
    int64_t now = wall_s();
    if (policy_will_exceed(&j->p, w->p->tries, j->attempts, now))
        why = j->p.has_retry_until && j->p.retry_until ? "retry_until" : "max_tries";
    if (j->p.has_max_exceptions && j->p.uuid && res->kind != HRES_FAILED) {
        char *key = xasprintf("%s%sjob-exceptions:%s", w->cache->conf.prefix, w->p->cache_prefix,
                              j->p.uuid);
        bool reached = false;
        long n = -1;
        for (int tries = 0; tries < 3 && n < 0; tries++) {
            n = queue_count_exception(w->cache, key, j->p.max_exceptions, &reached);
            if (n < 0) wait_signals(w, rconn_retry_in_ms(w->cache) + 1);
        }
        if (n < 0) log_warn("maxExceptions counter unavailable for job %s", j->hj.id ? j->hj.id : "?");
        if (reached && !why) why = "max_exceptions";
        free(key);
    }
    if (res->kind == HRES_TIMEOUT && !why && j->p.fail_on_timeout) why = "fail_on_timeout";
    return why;
}

/* With prefetch, does the job started at started_ms still have to write its
 * claim and the acks so far (or read a pop in flight) 100 ms in? */
static bool late_write_due(const worker_t *w, int64_t started_ms)
{
    return w->p->prefetch > 1 && w->late_written_ms != started_ms && (w->ahead.on || w->npending);
}

/* While a job runs, the prefetched ones must not wait behind it when the
 * worker is told to stop or pause, when their queue is paused, or once the
 * job turns slow: give them back at once (other workers may be idle). */
static void release_prefetched(worker_t *w, int64_t started_ms, int64_t now)
{
    if (now - started_ms >= PREFETCH_MAX_JOB_MS && late_write_due(w, started_ms)) {
        /* a longer job, once: its claim (and the acks so far) are written,
         * and what a pop in flight brings goes back with the rest */
        w->late_written_ms = started_ms;
        give_back(w, ~0u);
        write_pending_now(w);
        return;
    }
    if (w->nlocal == w->local_head) return;
    uint32_t mask = skip_mask(w);
    if (w->quit || paused(w) || (control(w) & SB_CTL_RETIRE) || now - started_ms >= PREFETCH_MAX_JOB_MS)
        mask = ~0u;
    if (!mask) return;
    give_back(w, mask);
    write_pending_now(w);
}

/* The master died while this worker runs a job of a pool with a fleet
 * budget: its lease lapses and other hosts take its slots, yet this job
 * still runs in one. A record of the worker's own (held 1, claiming
 * nothing) keeps the slot counted until the worker exits (orphan_release);
 * renewed a few times per TTL, so that a worker killed meanwhile loses it
 * within the TTL. */
static void orphan_lease(worker_t *w, int64_t now)
{
    if (!w->parent_dead || !w->p->fleet_max_processes || now < w->orphan_next_ms) return;
    int64_t ttl = (int64_t)(w->conf->fleet_lease_ttl * 1000);
    w->orphan_next_ms = now + ttl / 4;
    if (!w->orphan_key) {
        w->orphan_key = lease_key(w->rc, w->p->name);
        char id[BUDGET_ID_MAX - 6];
        lease_holder_id(id, sizeof id);
        snprintf(w->orphan_id, sizeof w->orphan_id, "%s:orphan", id);
    }
    settle(w);
    if (lease_orphan_renew(w->rc, w->orphan_key, w->orphan_id, w->p->fleet_max_processes, ttl) == 0 &&
        !w->orphan_logged) {
        log_info("the master died: the fleet budget slot of this job is kept as %s until it ends", w->orphan_id);
        w->orphan_logged = true;
    }
}

/* The job is over and the worker exits: its record is let go, with an
 * expiry a second away rather than deleted, so that it outlives the
 * process (whose exit still runs) and the slot is never counted twice. */
#define ORPHAN_LAST_MS 1000

static void orphan_release(worker_t *w)
{
    if (!w->orphan_key) return;
    int64_t ttl = (int64_t)(w->conf->fleet_lease_ttl * 1000);
    if (rconn_ensure(w->rc) == 0)
        lease_orphan_renew(w->rc, w->orphan_key, w->orphan_id, w->p->fleet_max_processes,
                           ttl < ORPHAN_LAST_MS ? ttl : ORPHAN_LAST_MS);
    free(w->orphan_key);
    w->orphan_key = NULL;
}

/* Has an operator asked to stop the job running (master_stop_job)? */
static bool stop_asked(worker_t *w)
{
    return sb_stop_asked(w->slot);
}

/* Run the handler, watching signals, the timeout and the reservation. The
 * master's death does not cut the job short: as with SIGTERM it finishes. */
static void fire(worker_t *w, job_t *j, hresult_t *res)
{
    long timeout = j->p.has_timeout ? j->p.timeout : w->p->timeout;
    if (timeout < 0) timeout = 0;
    j->hj.timeout = timeout;
    if (handler_begin(w->h, &j->hj, res) < 0) return;
    sb_handler(w);
    int64_t start = mono_ms();
    int64_t deadline = timeout ? start + timeout * 1000 : 0;
    /* a prefetched job (and the finished ones not yet acked) were reserved
     * when they were popped, not when this one started */
    int64_t extend_every = renew_every_ms(w->p);
    int64_t next_extend = w->held_since_ms + extend_every;
    for (;;) {
        struct pollfd fds[8];
        fds[0] = (struct pollfd){w->sfd, POLLIN, 0};
        int n = 1 + handler_fds(w->h, fds + 1, 7);
        int64_t now = mono_ms();
        int64_t until = next_extend;
        if (deadline && deadline < until) until = deadline;
        if ((w->nlocal > w->local_head || late_write_due(w, start)) && now < start + PREFETCH_MAX_JOB_MS &&
            start + PREFETCH_MAX_JOB_MS < until)
            until = start + PREFETCH_MAX_JOB_MS;
        if (w->orphan_key && w->orphan_next_ms < until) until = w->orphan_next_ms;
        if (wlimits_next_beat(&w->lim) < until) until = wlimits_next_beat(&w->lim);
        int wait = until > now ? (int)(until - now) : 0;
        if (wait > 1000) wait = 1000; /* re-check the handler's exit now and then */
        if (poll(fds, (nfds_t)n, wait) < 0 && errno != EINTR) {
            /* never guess an outcome: the job is charged as a crash */
            log_error("poll: %s: killing the handler of job %s", strerror(errno), j->hj.id ? j->hj.id : "?");
            handler_abort(w->h);
            memset(res, 0, sizeof *res);
            res->kind = HRES_CRASHED;
            res->exception = xasprintf("qpool\\HandlerCrashed: the worker could not watch the handler (poll: %s)",
                                       strerror(errno));
            return;
        }
        if (fds[0].revents & POLLIN) read_signals(w);
        if (handler_step(w->h, fds + 1, n - 1, res)) return;
        now = mono_ms();
        orphan_lease(w, now);
        wlimits_beat(&w->lim, w->rc, now, j->hj.name);
        bool stop = stop_asked(w);
        if ((deadline && now >= deadline) || stop) {
            if (stop)
                log_warn("job %s (%s) stopped by an operator: killing the handler's process group, as at a timeout",
                         j->hj.id ? j->hj.id : "?", j->hj.name);
            else
                log_warn("job %s (%s) timed out after %ld s: killing the handler's process group",
                         j->hj.id ? j->hj.id : "?", j->hj.name, timeout);
            handler_abort(w->h);
            memset(res, 0, sizeof *res);
            res->kind = HRES_TIMEOUT;
            return;
        }
        release_prefetched(w, start, now);
        if (now >= next_extend) {
            /* Still running: keep the reservations from expiring under us. */
            renew_held(w, j);
            next_extend = now + extend_every;
        }
    }
}

/* ------------------------------------------------------------ job stats */

/* When the job became available, in wall ms, if the payload says exactly:
 * qpool's stamp on a released or retried job (when it was due again), else
 * a first attempt's dispatch time (createdAt, Laravel 11+, plus its delay). -1 when
 * it says neither (see docs/api.md, "What the figures mean"). */
static double job_wait_ms(const job_t *j)
{
    if (j->app_run) return j->app.wait_ms;
    if (!j->parsed) return -1;
    int64_t avail;
    if (j->p.has_available_at)
        avail = j->p.available_at_ms;
    else if (j->p.has_created_at && j->p.attempts == 0)
        avail = (j->p.created_at + (j->p.has_delay && j->p.delay > 0 ? j->p.delay : 0)) * 1000;
    else
        return -1;
    return j->started_wall_ms >= avail ? (double)(j->started_wall_ms - avail) : 0;
}

/* What happened to this attempt. A timeout or a crash counts as such
 * whether the job was then released or failed. */
static int job_outcome(const job_t *j, const hresult_t *res)
{
    if (!res) return OUTCOME_FAILED; /* failed unrun, or a payload moved aside */
    switch (res->kind) {
    case HRES_DONE: return OUTCOME_DONE;
    case HRES_TIMEOUT: return OUTCOME_TIMED_OUT;
    case HRES_CRASHED: return OUTCOME_CRASHED;
    default: return j->failed ? OUTCOME_FAILED : OUTCOME_RELEASED;
    }
}

/* The job's tags: those pushed with it (an app with Horizon installed),
 * then those its handler reported (jobhist.h bounds them). */
static void history_tags(jobrec_t *r, const job_t *j, const hresult_t *res)
{
    size_t ts, te;
    if (j->pr.raw && json_top_value(j->pr.raw, j->pr.rawlen, "tags", &ts, &te))
        jobhist_add_tags(r, j->pr.raw + ts, te - ts);
    if (res && res->tags) jobhist_add_tags(r, res->tags, strlen(res->tags));
}

/* A watched record lost (the worker's queue full: its oldest overwritten,
 * or one too big to send): logged at 1, 2, 4, ... of them, so a worker
 * that never exits cleanly says so too. */
static void watched_lost_note(const worker_t *w, uint64_t before)
{
    uint64_t n = w->wq.lost, top = n;
    while (top & (top - 1)) top &= top - 1; /* the highest power of 2 up to n */
    if (!n || top <= before) return;
    log_warn("%llu records of watched tags dropped so far (the worker holds at most %d its master has not taken; "
             "the oldest go)", (unsigned long long)n, JOBWATCH_WORKER_KEEP);
}

/* The attempt in the ring of recent jobs (copies, nothing formatted); a
 * copy of it in the watched queue when its tags meet the watched set,
 * whether or not the ring's sample took it. */
static void history_record(worker_t *w, const job_t *j, const hresult_t *res, int outcome, double runtime)
{
    jobrec_t scratch, *r = jobhist_add(&w->hist, outcome);
    if (!r && !w->watch.n) return;
    if (!r) {
        memset(&scratch, 0, sizeof scratch);
        r = &scratch, r->outcome = outcome, r->wait_ms = -1;
    }
    jobhist_set_str(r->uuid, sizeof r->uuid, j->hj.uuid);
    jobhist_set_str(r->id, sizeof r->id, j->hj.id);
    jobhist_set_str(r->name, sizeof r->name, j->hj.name);
    jobhist_set_str(r->queue, sizeof r->queue, w->qs.q[j->pr.qidx].name);
    r->attempt = j->attempts;
    r->wait_ms = job_wait_ms(j);
    r->runtime_ms = runtime;
    r->finished_at = wall_ms();
    r->started_at = j->started_wall_ms ? j->started_wall_ms : r->finished_at;
    if (res && (res->exc_class || res->message)) {
        char *exc = xasprintf("%s%s%s", res->exc_class ? res->exc_class : "",
                              res->exc_class && res->message ? ": " : "", res->message ? res->message : "");
        for (char *q = exc; *q; q++)
            if ((unsigned char)*q < 0x20) *q = ' '; /* one line, nothing that escapes sixfold */
        jobhist_set_str(r->exception, sizeof r->exception, exc);
        free(exc);
    }
    history_tags(r, j, res);
    if (res && jobhist_batch_ok(res->batch))
        memcpy(r->batch, res->batch, strlen(res->batch) + 1);
    else if (j->app_run && jobhist_batch_ok(j->app.batch)) /* app_driver, no answer: what its pop said */
        memcpy(r->batch, j->app.batch, strlen(j->app.batch) + 1);
    else if (j->pr.raw) /* no answer (timed out, crashed, failed unrun), or a native handler's */
        jobhist_payload_batch(j->pr.raw, j->pr.rawlen, r->batch);
    r->silenced = jobhist_silenced(r, w->p->silenced, w->p->silenced_tags, res && res->silenced);
    if (jobwatch_meets(&w->watch, r->tags, r->tags_len)) {
        uint64_t lost = w->wq.lost;
        jobhist_add_copy(&w->wq, r);
        watched_lost_note(w, lost);
        r->apart = true;
    }
    if (r == &scratch) {
        free(scratch.tags);
        return;
    }
    if (outcome == OUTCOME_RELEASED && j->hj.reserved)
        jobhist_set_payload(r, j->hj.reserved, j->hj.reslen); /* the copy that runs again */
    else if (outcome == OUTCOME_DONE && w->hist.payloads && j->pr.raw)
        jobhist_set_payload(r, j->pr.raw, j->pr.rawlen);
}

/* May the watched set be read now? A native pool's worker only on a
 * connection whose scripts are loaded: never a reconnect of its own, after
 * which a pop would go before the scripts. An app_driver pool's worker
 * pops nothing from Redis: it connects to its pool's Redis for this alone
 * (rconn's backoff while it is down), when qpool has one (no_redis: none). */
static bool watch_conn_ready(worker_t *w)
{
    if (!w->p->app_driver) return w->rc->ctx && w->scripts_gen == w->rc->connects;
    return !w->conf->no_redis && rconn_ensure(w->rc) == 0;
}

/* An app_driver pool's next read of the watched set after one that failed:
 * JOBWATCH_POLL_MS after it ended, or the reconnect's backoff if later. */
static void watch_backoff(worker_t *w)
{
    int64_t retry = rconn_retry_in_ms(w->rc);
    w->watch_next_ms = mono_ms() + (retry > JOBWATCH_POLL_MS ? retry : JOBWATCH_POLL_MS);
}

/* The watched tags (jobwatch.h), with job history on: read when the
 * generation the master publishes in the slot changed, never while no tag
 * is watched; every JOBWATCH_POLL_MS when it publishes none. The last ones
 * stay when Redis does not answer (-1). */
static int watch_poll(worker_t *w, int64_t now_ms)
{
    if (!w->wq.cap) return 0;
    uint64_t gen = w->slot ? atomic_load(&w->slot->watch_gen) : JOBWATCH_GEN_NONE;
    enum jobwatch_act act = jobwatch_gen_action(gen, w->watch_gen, now_ms >= w->watch_next_ms);
    if (act == JOBWATCH_CLEAR && jobwatch_set_take(&w->watch, xcalloc(1, sizeof(char *)), 0))
        log_info("watched tags now: 0 (each of their jobs kept)");
    if (act == JOBWATCH_CLEAR) w->watch_gen = gen;
    if (act != JOBWATCH_READ) return 0;
    if (!w->p->app_driver && !watch_conn_ready(w)) return 0;
    w->watch_next_ms = now_ms + JOBWATCH_POLL_MS;
    if (w->p->app_driver && !watch_conn_ready(w)) {
        watch_backoff(w);
        return 0;
    }
    if (!w->watch_key) w->watch_key = monitored_set_key(w->rc);
    const char *argv[] = {"SMEMBERS", w->watch_key};
    redisReply *r = rconn_call(w->rc, 2, argv, NULL);
    if (!r && w->p->app_driver) watch_backoff(w);
    if (!r) return -1;
    char **tags;
    int n = monitored_tags_of(r, &tags);
    uint64_t read = n >= 0 ? jobwatch_gen_read(gen, tags, n) : gen; /* before the set takes tags */
    if (n >= 0 && jobwatch_set_take(&w->watch, tags, n)) log_info("watched tags now: %d (each of their jobs kept)", n);
    if (n >= 0) w->watch_gen = read; /* what it read: one not published is read again when due */
    if (n >= 0 && read == gen && gen != JOBWATCH_GEN_NONE) w->watch_next_ms = 0; /* the next change at once */
    freeReplyObject(r);
    return 0;
}

static void stats_record(worker_t *w, const job_t *j, const hresult_t *res)
{
    if (w->stats_fd < 0) return;
    const char *queue = w->qs.q[j->pr.qidx].name;
    double runtime = res ? ms_since(j->started_s) : 0;
    int outcome = job_outcome(j, res);
    jobstats_record(&w->stats, queue, j->hj.name, outcome, runtime, job_wait_ms(j));
    history_record(w, j, res, outcome, runtime);
}

/* The recent jobs, in datagrams of a few records; what the master cannot
 * take now waits in the ring (the oldest are overwritten). */
static void history_flush(worker_t *w)
{
    for (;;) {
        size_t len;
        char *msg = jobhist_encode(&w->hist, &len);
        if (!msg) return;
        ssize_t n = send(w->stats_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        free(msg);
        if (n < 0 && errno == EMSGSIZE) continue; /* too big for the channel: those records are dropped */
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) w->stats_fd = -1;
            return; /* those records are lost: the history is a sample, the counts are not */
        }
    }
}

/* The watched records (jobwatch.h): sent soon, each removed only once it
 * went; what the master cannot take now waits for the next try. */
#define WATCHED_EVERY_MS 200
static void watched_flush(worker_t *w, bool force)
{
    int64_t now = mono_ms();
    if (!w->wq.n || w->stats_fd < 0) return;
    if (!force && w->wq.n < JOBWATCH_SEND_AT && now - w->wq_sent_ms < WATCHED_EVERY_MS) return;
    w->wq_sent_ms = now;
    while (w->wq.n) {
        size_t len;
        int taken;
        char *msg = jobhist_encode_keep(&w->wq, "m", &len, &taken);
        ssize_t n = send(w->stats_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        free(msg);
        if (n < 0 && errno != EMSGSIZE) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) w->stats_fd = -1;
            return;
        }
        if (n < 0) { /* too big for the channel: dropped */
            uint64_t before = w->wq.lost;
            w->wq.lost += (uint64_t)taken;
            watched_lost_note(w, before);
        }
        jobhist_drop(&w->wq, taken);
    }
}

/* Send the master what was recorded, about once a second (force: now).
 * Pages of at most STATS_PAGE entries, each one datagram; what the master
 * cannot take yet stays and goes with the next try. */
#define STATS_EVERY_MS 1000
#define STATS_PAGE 200
static void stats_flush(worker_t *w, bool force)
{
    watched_flush(w, force);
    int64_t now = mono_ms();
    if (w->stats_fd < 0 || jobstats_empty(&w->stats) || (!force && now - w->stats_sent_ms < STATS_EVERY_MS)) return;
    w->stats_sent_ms = now;
    history_flush(w);
    if (w->stats_fd < 0) return;
    int from = 0;
    do {
        int first = from;
        size_t len;
        char *line = jobstats_encode(&w->stats, &from, STATS_PAGE, &len);
        ssize_t n = send(w->stats_fd, line, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        free(line);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) w->stats_fd = -1; /* the master is gone */
            return;
        }
        jobstats_zero(&w->stats, first, from ? from : w->stats.n);
    } while (from);
    jobstats_clear(&w->stats);
}

/* A job the handler never read goes back as if never popped: no attempt. */
static void job_unpop(worker_t *w, job_t *j)
{
    outcome_t *o = set_pending(w, j, OUT_UNPOP);
    uuid4(o->token);
    o->payload = xstrndup(j->pr.raw, j->pr.rawlen);
    o->payload_len = j->pr.rawlen;
    job_log(w, j, "Returned", " (the handler never read it; no attempt counted)");
}

/* Parse the payload and describe the job for the handler. False: it is not
 * a usable payload, and it went to the failed store with its raw bytes. */
static bool job_prepare(worker_t *w, job_t *j)
{
    const qkeys_t *k = &w->qs.q[j->pr.qidx];
    char err[128];
    j->started_ms = mono_ms();
    j->started_s = mono_s();
    j->started_wall_ms = wall_ms();
    if (payload_parse(j->pr.raw, j->pr.rawlen, &j->p, err, sizeof err) < 0) {
        /* Redis's cjson accepted it but it is not a usable payload: keep it. */
        char id[37];
        uuid4(id);
        j->uuid = xstrdup(id);
        j->attempts = 1;
        j->hj.name = "?";
        char *text = xasprintf("qpool: invalid payload: %s (the raw bytes are kept as they were popped)", err);
        log_error("job on %s: %s; moved to the failed store as %s", k->name, err, id);
        job_fail(w, j, text);
        free(text);
        w->jobs_failed++;
        return false;
    }
    j->parsed = true;
    j->attempts = j->p.attempts + 1;
    char id[37];
    if (!j->p.uuid && !j->p.id) uuid4(id);
    j->uuid = xstrdup(j->p.uuid ? j->p.uuid : j->p.id ? j->p.id : id);
    j->hj = (hjob_t){.queue = k->name,
                     .connection = w->p->queue_connection,
                     .id = j->p.id,
                     .uuid = j->p.uuid,
                     .name = payload_name(&j->p),
                     .attempts = j->attempts,
                     .max_tries = policy_max_tries(&j->p, w->p->tries),
                     .raw = j->pr.raw,
                     .rawlen = j->pr.rawlen,
                     .reserved = j->pr.reserved,
                     .reslen = j->pr.reslen};
    return true;
}

/* Popped with its attempts already past maxTries (or retryUntil): fail it
 * unrun, as Worker::markJobAsFailedIfAlreadyExceedsMaxAttempts does. */
static void job_fail_unrun(worker_t *w, job_t *j)
{
    char *text = policy_text_max_attempts(j->hj.name);
    hresult_t why = {.kind = HRES_FAILED,
                     .exc_class = xstrdup("Illuminate\\Queue\\MaxAttemptsExceededException"),
                     .message = xstrdup(strchr(text, ' ') + 1),
                     .exception = xstrdup(text)};
    job_fail(w, j, text);
    stats_record(w, j, NULL);
    handler_failed(w->h, &j->hj, &why, "already_exceeded", HOOK_TIMEOUT_MS);
    hresult_free(&why);
    free(text);
    w->jobs_failed++;
    job_log(w, j, "Failed", " (already attempted too many times)");
}

/* The job threw, crashed or timed out: fail it or release it with backoff,
 * by Laravel's rules (Worker::handleJobException). */
static void job_threw(worker_t *w, job_t *j, hresult_t *res)
{
    char extra[160];
    if (res->kind == HRES_TIMEOUT) {
        free(res->exception);
        res->exception = policy_text_timeout(j->hj.name);
        res->exc_class = xstrdup("Illuminate\\Queue\\TimeoutExceededException");
        res->message = xasprintf("%s has timed out.", j->hj.name);
    }
    const char *why = should_fail(w, j, res);
    if (why) {
        job_fail(w, j, res->exception ? res->exception : "qpool: job failed");
        handler_failed(w->h, &j->hj, res, res->kind == HRES_TIMEOUT && strcmp(why, "max_exceptions") ? "timeout" : why,
                       HOOK_TIMEOUT_MS);
        w->jobs_failed++;
        snprintf(extra, sizeof extra, " %.2f ms (%s)", ms_since(j->started_s), why);
        job_log(w, j, "Failed", extra);
    } else {
        long delay = policy_backoff(&j->p, w->p->backoff, w->p->nbackoff, j->attempts);
        job_release(w, j, delay);
        snprintf(extra, sizeof extra, " %.2f ms, %s; retry in %ld s", ms_since(j->started_s),
                 res->kind == HRES_TIMEOUT ? "timed out" : res->kind == HRES_CRASHED ? "handler crashed" : "exception",
                 delay);
        job_log(w, j, "Released", extra);
    }
    if (res->exception && res->kind != HRES_TIMEOUT)
        log_warn("job %s (%s) attempt %ld: %.*s", j->hj.id ? j->hj.id : "?", j->hj.name, j->attempts, 1000,
                 res->exception);
}

/* What the handler said becomes the job's outcome. */
static void job_settle(worker_t *w, job_t *j, hresult_t *res)
{
    char extra[160];
    snprintf(extra, sizeof extra, " %.2f ms", ms_since(j->started_s));
    switch (res->kind) {
    case HRES_DONE:
        set_pending(w, j, OUT_ACK);
        job_log(w, j, "Processed", extra);
        break;
    case HRES_RELEASED: {
        long delay = res->has_delay ? res->delay : 0;
        job_release(w, j, delay);
        snprintf(extra, sizeof extra, " %.2f ms, released for %ld s", ms_since(j->started_s), delay);
        job_log(w, j, "Released", extra);
        break;
    }
    case HRES_FAILED: {
        const char *text = res->exception ? res->exception
                                          : "Illuminate\\Queue\\ManuallyFailedException: This job was manually failed.";
        job_fail(w, j, text);
        if (!res->hooks_done) handler_failed(w->h, &j->hj, res, "job_failed", HOOK_TIMEOUT_MS);
        w->jobs_failed++;
        job_log(w, j, "Failed", extra);
        break;
    }
    case HRES_NOT_STARTED:
        job_unpop(w, j);
        break;
    default: /* HRES_EXCEPTION, HRES_CRASHED, HRES_TIMEOUT */
        job_threw(w, j, res);
        break;
    }
}

/* What the handler said goes to the failed store, the job records and the
 * logs: valid UTF-8 only (an exception message may quote any bytes). */
static void result_repair(hresult_t *res)
{
    utf8_repair_inplace(&res->exception);
    utf8_repair_inplace(&res->exc_class);
    utf8_repair_inplace(&res->message);
}

/* Run one popped job to its outcome. False when it did not run at all (the
 * handler never read it: it went back untouched). */
static bool run_job(worker_t *w, job_t *j)
{
    if (!job_prepare(w, j)) {
        stats_record(w, j, NULL); /* a payload moved aside: failed */
        return true;
    }
    sb_job(w, &(sb_job_t){.id = j->hj.id, .uuid = j->hj.uuid, .name = j->hj.name, .queue = w->qs.q[j->pr.qidx].name,
                          .attempt = j->parsed ? j->p.attempts + 1 : 0,
                          .timeout = j->parsed && j->p.has_timeout ? j->p.timeout : w->p->timeout,
                          .raw = j->pr.raw, .rawlen = j->pr.rawlen});
    job_log(w, j, "Processing", NULL);
    if (policy_already_exceeded(&j->p, w->p->tries, j->attempts, wall_s())) {
        job_fail_unrun(w, j);
        return true;
    }
    hresult_t res;
    fire(w, j, &res);
    if (res.kind == HRES_EMPTY || res.kind == HRES_POPPED) { /* they answer a pop only: as any unknown status */
        if (!res.exception)
            res.exception = xasprintf("qpool\\HandlerFailed: the handler reported an exception (status \"%s\")",
                                      res.kind == HRES_EMPTY ? "empty" : "popped");
        res.kind = HRES_EXCEPTION;
    }
    result_repair(&res);
    sb_handler(w);
    bool ran = res.kind != HRES_NOT_STARTED;
    job_settle(w, j, &res);
    if (ran) stats_record(w, j, &res);
    hresult_free(&res);
    return ran;
}

/* ------------------------------------------------------------ the loop */

/* On a Redis Cluster one BLPOP can only wait on keys of one slot: with
 * queues in several slots, each wait takes the next slot's queues in turn
 * and lasts at most CLUSTER_WAIT_S, so a job on another slot waits that
 * long at most. */
#define CLUSTER_WAIT_S 0.25
static uint32_t cluster_wait_mask(worker_t *w, uint32_t skip, double *secs)
{
    int slots[QPOOL_MAX_QUEUES], n = 0;
    for (int i = 0; i < w->qs.nq; i++) {
        if (skip & (1u << i)) continue;
        bool seen = false;
        for (int j = 0; j < n; j++) seen |= slots[j] == w->qs.q[i].slot;
        if (!seen) slots[n++] = w->qs.q[i].slot;
    }
    if (n <= 1) return skip;
    int want = slots[w->wait_turn++ % (unsigned)n];
    if (*secs > CLUSTER_WAIT_S) *secs = CLUSTER_WAIT_S;
    for (int i = 0; i < w->qs.nq; i++)
        if (w->qs.q[i].slot != want) skip |= 1u << i;
    return skip;
}

/* 1 + the queue whose :notify list a BLPOP reply names; 0: none of them. */
static int token_queue(const worker_t *w, const redisReply *r)
{
    if (r->elements < 1 || r->element[0]->type != REDIS_REPLY_STRING) return 0;
    for (int i = 0; i < w->qs.nq; i++)
        if (!strcmp(w->qs.q[i].notify, r->element[0]->str)) return i + 1;
    return 0;
}

/* Block on the :notify lists of the unpaused queues for up to secs. */
static void idle_wait(worker_t *w, double secs, uint32_t skip)
{
    const char **argv = xcalloc((size_t)w->qs.nq + 2, sizeof *argv);
    int argc = 0;
    argv[argc++] = "BLPOP";
    if (rconn_is_cluster(w->rc)) skip = cluster_wait_mask(w, skip, &secs);
    for (int i = 0; i < w->qs.nq; i++)
        if (!(skip & (1u << i))) argv[argc++] = w->qs.q[i].notify;
    char t[32];
    snprintf(t, sizeof t, "%.3f", secs);
    argv[argc++] = t;
    if (argc == 2) { /* every queue paused: just wait */
        free(argv);
        wait_signals(w, (int64_t)(secs * 1000));
        return;
    }
    rconn_append(w->rc, argc, argv, NULL);
    free(argv);
    int timeout = (int)(secs * 1000) + (int)(w->rc->conf.timeout * 1000);
    for (;;) {
        redisReply *r;
        int rv = rconn_read(w->rc, w->sfd, timeout, &r);
        if (rv == RC_SIGNAL) {
            read_signals(w);
            if (w->quit || w->parent_dead || paused(w) || (control(w) & SB_CTL_RETIRE)) {
                /* The reply is still on its way: drop the connection rather
                 * than wait for it (reconnecting later is cheap). */
                rconn_close(w->rc);
                return;
            }
            continue;
        }
        if (rv == RC_OK) {
            w->token_taken = r->type == REDIS_REPLY_ARRAY;
            w->token_q = w->token_taken ? token_queue(w, r) : 0;
            freeReplyObject(r);
        }
        return;
    }
}

static pop_args_t pop_args(worker_t *w, uint32_t skip, int want, int64_t now_ms)
{
    const char *token;
    const qlimits_t *lim = wlimits_for_pop(&w->lim, &token);
    return (pop_args_t){.limits = lim,
                        .slot_token = token,
                        .now = wall_s(),
                        .retry_after = w->p->retry_after,
                        .migrate = w->migrate_again || now_ms - w->last_migrate_ms >= MIGRATE_EVERY_MS,
                        .batch = w->p->migration_batch,
                        .connection = w->p->queue_connection,
                        .pool = w->p->name,
                        .host = worker_host(),
                        .failed_limit = w->conf->failed_limit,
                        .skip_mask = skip,
                        .token_taken = w->token_taken,
                        .token_q = w->token_q,
                        .promised = w->lim_promised,
                        .want = want};
}

/* Whether the pending outcomes may go out in one batch with a pop over the
 * queues not in skip: always, except on a cluster when one of them is
 * served by another node than the pop's first call. There a failure of
 * the outcome's node would drop the connection, and with it the reply of a
 * pop the other node ran: its jobs would wait out retry_after, an attempt
 * counted. */
static bool outcomes_ride_with_pop(worker_t *w, uint32_t skip)
{
    if (!rconn_is_cluster(w->rc) || !w->npending) return true;
    int first = 0;
    while (first < w->qs.nq && (skip & (1u << first))) first++;
    if (first == w->qs.nq) return true;
    int node = rconn_slot_node(w->rc, w->qs.q[first].slot);
    for (int i = 0; i < w->npending; i++)
        if (rconn_slot_node(w->rc, w->qs.q[w->pending[i].qidx].slot) != node) return false;
    return true;
}

/* Append the pending outcomes that go with the pop and say how many: all of
 * them, or none when they must go first (then written here and their
 * replies read). -1: the connection went. */
static int outcomes_for_pop(worker_t *w, uint32_t skip)
{
    if (outcomes_ride_with_pop(w, skip)) return append_pending(w);
    int rv = write_pending_now(w); /* refused: written again at the top of the loop */
    return rv < 0 ? rv : 0;
}

/* Write the outcomes that may go with this pop, then append the pop: false
 * when there is nothing to read (the connection was lost, or no queue may
 * be popped now). */
static bool send_pop(worker_t *w, uint32_t skip, const pop_args_t *a)
{
    int n = outcomes_for_pop(w, skip);
    if (n < 0) return false;
    bool any = queue_append_pop(w->rc, &w->qs, a);
    if (n) {
        char err[256] = "";
        int rv = collect_pending(w, n, err, sizeof err);
        /* Connection lost: the outcomes stay pending (they are idempotent);
         * jobs the pop may have reserved come back after retry_after. */
        if (rv == OW_LOST) return false;
        /* Refused: the pop's reply still comes; the outcome is written again
         * at the top of the loop. */
        if (rv == OW_REFUSED) outcome_refused(w, err, false);
    }
    if (!any) {
        sb_state(w, SB_IDLE);
        wait_signals(w, 1000);
        return false;
    }
    return true;
}

/* Read the pop's reply into job->pr: false if there is none to use. */
static bool read_pop(worker_t *w, const pop_args_t *a, job_t *job)
{
    redisReply *r;
    if (queue_read_pop(w->rc, &w->qs, a, &r) != RC_OK) return false;
    if (is_noscript(r)) {
        freeReplyObject(r);
        w->scripts_gen = 0;
        return false;
    }
    if (!queue_parse_pop(&w->qs, a, r, &job->pr)) {
        if (r->type == REDIS_REPLY_ERROR) {
            /* e.g. READONLY after a failover: reconnect (with backoff)
             * rather than ask the same server again */
            rconn_drop(w->rc, r->str);
        } else {
            log_error("unexpected reply to pop (type %d)", r->type);
            wait_signals(w, 1000);
        }
        freeReplyObject(r);
        return false;
    }
    freeReplyObject(r);
    return true;
}

/* The limited pop on a Redis Cluster (wlcluster.h): the outcomes written
 * first (its calls go to several nodes), then the lease-and-pick pass. */
static bool pop_cluster_limited(worker_t *w, const pop_args_t *a, job_t *job)
{
    if (write_pending_now(w) < 0 || !redis_ready(w)) return false;
    int rv = wlcluster_pop(w->rc, &w->qs, a, &job->pr);
    if (rv == 0 && w->rc->ctx) { /* every queue skipped */
        sb_state(w, SB_IDLE);
        wait_signals(w, 1000);
    }
    return rv > 0;
}

/* Send the pop and read its reply into job->pr: false if there is none to use. */
static bool pop_call(worker_t *w, uint32_t skip, const pop_args_t *a, job_t *job)
{
    if (a->limits && rconn_is_cluster(w->rc)) return pop_cluster_limited(w, a, job);
    return send_pop(w, skip, a) && read_pop(w, a, job);
}

/* Nothing to pop: wait (sleep, or until a delayed job is due). */
static void wait_after_empty(worker_t *w, job_t *job, const pop_args_t *a)
{
    const pool_conf_t *p = w->p;
    sb_state(w, SB_IDLE);
    double secs = p->sleep > 0 && p->sleep < IDLE_WAIT_MAX_S ? p->sleep : IDLE_WAIT_MAX_S;
    if (job->pr.has_next_due) {
        double due = (double)job->pr.next_due - (double)wall_ms() / 1000.0;
        if (due <= 0) {
            w->migrate_again = true; /* due now: migrate on the next pop */
            job_free(job);
            return;
        }
        if (due < secs) secs = due;
    }
    if (secs < 0.01) secs = 0.01;
    job_free(job);
    idle_wait(w, secs, a->skip_mask);
}

/* How long to wait before popping again when ready jobs all wait on full
 * limits: what the pop said (0: more held jobs to look past, at once; else
 * the ms until the token of a held rate the pop promised this worker: the
 * pop staggers the fleet's held workers itself, a token each, so no jitter
 * here), under LIMIT_POLL_MS; 100..300 ms when it could not say (a
 * concurrency, or no token promised that soon). */
static int64_t limit_wait_ms(bool known, int64_t wake, long rnd)
{
    if (!known || wake >= LIMIT_POLL_MS) return LIMIT_POLL_MS / 2 + rnd % LIMIT_POLL_MS;
    return wake > 0 ? wake : 0;
}

/* Ready jobs wait on a full limit: poll again soon (not BLPOP: their notify
 * tokens would wake this worker at once, over and over). */
static void limit_wait(worker_t *w, job_t *job, const pop_args_t *a)
{
    int64_t ms = limit_wait_ms(job->pr.has_limit_wake, job->pr.limit_wake_ms, random());
    /* a token of its own: said on the next pop, which if too early waits for
     * the next token once (the pop that answers a promised one promises none) */
    w->lim_promised = !a->promised && job->pr.has_limit_wake && job->pr.limit_wake_ms > 0 &&
                      job->pr.limit_wake_ms < LIMIT_POLL_MS;
    sb_state(w, SB_IDLE);
    job_free(job);
    if (ms > 0) wait_signals(w, ms);
}

/* Pop the next job (and up to prefetch - 1 more into w->local), pipelined
 * with the outcomes written since the last pop. False: nothing to run now
 * (empty and waited, poison moved aside, Redis trouble): go round again. */
static bool pop_next(worker_t *w, uint32_t skip, job_t *job)
{
    int64_t now_ms = mono_ms();
    int paused = w->p->app_driver ? 0 : wlimits_poll_paused(&w->lim, w->rc, now_ms);
    if (!w->p->app_driver && paused >= 0 && watch_poll(w, now_ms) < 0) return false; /* reconnect first */
    if (paused < 0 || (paused > 0 && queue_load_limited(w->rc) < 0)) return false; /* reconnect first */
    pop_args_t a = pop_args(w, skip, want_jobs(w, 0), now_ms);
    if (!pop_call(w, skip, &a, job)) return false;
    pop_bookkeeping(w, &a, now_ms, &job->pr);
    if (job->pr.kind == POP_POISON) {
        sb_counters(w, rss_read(&w->rss_self, w->pid));
        job_free(job);
        return false;
    }
    if (job->pr.kind == POP_EMPTY && job->pr.limit_blocked) {
        limit_wait(w, job, &a);
        return false;
    }
    if (job->pr.kind == POP_EMPTY) {
        wait_after_empty(w, job, &a);
        return false;
    }
    wlimits_taken(&w->lim, now_ms);
    wlimits_taken_keys(&w->lim, job->pr.lim_keys, job->pr.nlim_keys);
    w->held_since_ms = now_ms; /* everything held before went out with this pop */
    /* prefetched jobs wait in w->local */
    for (int i = 0; i < job->pr.nextra; i++) local_add(w, &job->pr.extra[i]);
    return true;
}

/* A job popped ahead starts: it was held with its attempts as they were
 * (so that a worker killed before it started costs it no attempt) and now
 * becomes the reserved copy Laravel's pop makes, attempts + 1. The claim
 * is an outcome, written before this job's own: with the pop sent ahead
 * now, else 100 ms into the job (release_prefetched) or with its outcome,
 * whichever comes first. So a worker killed in a job's first 100 ms may
 * leave that job uncounted; a job that runs longer counts its attempt, as
 * with Laravel. If the job's outcome is known before the claim was run,
 * the claim is dropped and the outcome acts on the held member
 * (fold_claims). Takes the item's strings. */
static void claim_held(worker_t *w, pop_item_t *it, pop_result_t *pr)
{
    if (!it->run) { /* reserved when popped (the first of a pop that ran at once) */
        pr->reserved = it->reserved;
        pr->reslen = it->reslen;
        return;
    }
    pr->reserved = it->run;
    pr->reslen = it->runlen;
    outcome_t *o = new_pending(w, OUT_CLAIM, it->qidx);
    if (!o) {
        free(it->reserved);
        return;
    }
    o->reserved = it->reserved;
    o->reslen = it->reslen;
    o->payload = xstrndup(it->run, it->runlen);
    o->payload_len = it->runlen;
}

/* With prefetched jobs running low, send the next pop (and the outcomes so
 * far) without waiting: Redis works on it while the handler runs ours. */
static void pop_ahead(worker_t *w)
{
    if (w->ahead.on || w->pending_stuck || w->p->prefetch <= 1) return;
    if (w->lim.ls.n && rconn_is_cluster(w->rc)) return; /* the cluster's limited pop is not sent ahead */
    int left = w->nlocal - w->local_head;
    int want = want_jobs(w, left + 1);
    if (want <= 1 || left > want / 2) return;
    if (!w->rc->ctx || w->scripts_gen != w->rc->connects) return;
    if (w->quit || w->parent_dead || paused(w) || (control(w) & SB_CTL_RETIRE)) return;
    uint32_t skip = skip_mask(w);
    if (skip == ((1u << w->qs.nq) - 1)) return;
    int64_t now_ms = mono_ms();
    pop_args_t a = pop_args(w, skip, want, now_ms);
    a.hold = true; /* none of these starts now: every one is held until it does */
    int n = outcomes_for_pop(w, skip);
    if (n < 0 || w->pending_stuck) return;
    queue_append_pop(w->rc, &w->qs, &a);
    if (rconn_send(w->rc) != RC_OK) return; /* dropped: the outcomes are still pending */
    w->ahead.on = true;
    w->ahead.n = n;
    w->ahead.a = a;
    w->ahead.now_ms = now_ms;
    w->ahead.gen = w->rc->connects;
}

static int finish(worker_t *w, int code, int reason)
{
    give_back(w, ~0u);
    flush_outcome(w); /* one try only when the master is gone */
    stats_flush(w, true);
    jobstats_free(&w->stats);
    jobhist_free(&w->hist);
    if (w->wq.lost || w->wq.n) /* past the bound, or the master could not take them before the exit */
        log_warn("%llu records of watched tags dropped (%llu past the worker's %d, %d not taken at exit)",
                 (unsigned long long)(w->wq.lost + (uint64_t)w->wq.n), (unsigned long long)w->wq.lost,
                 JOBWATCH_WORKER_KEEP, w->wq.n);
    jobhist_free(&w->wq);
    jobwatch_set_free(&w->watch);
    free(w->watch_key);
    log_info("exiting: %llu jobs (%llu failed), %llu Redis round trips", (unsigned long long)w->jobs_done,
             (unsigned long long)w->jobs_failed, (unsigned long long)w->rc->round_trips);
    rss_close(&w->rss_self);
    rss_close(&w->rss_handler);
    sb_write_begin(w->slot);
    w->slot->c.state = SB_STOPPING;
    w->slot->c.exit_reason = (uint8_t)reason;
    sb_write_end(w->slot);
    handler_free(w->h);
    w->h = NULL;
    sb_write_begin(w->slot);
    w->slot->c.handler_pgid = 0;
    w->slot->c.handler_start = 0;
    sb_write_end(w->slot);
    orphan_release(w); /* the last use of the connection */
    rconn_free(w->rc);
    rconn_free(w->cache);
    queue_set_free(&w->qs);
    wlimits_free(&w->lim);
    for (int i = 0; i < w->npending; i++) outcome_clear(&w->pending[i]);
    for (int i = w->local_head; i < w->nlocal; i++) pop_item_free(&w->local[i]);
    close(w->sfd);
    return code;
}

/* Set up the worker; -1 when it cannot run (logged). */
static int worker_init(worker_t *w, const pool_conf_t *p, const qconf_t *conf, sb_slot_t *slot, int slot_no,
                       pid_t master, int stats_fd)
{
    memset(w, 0, sizeof *w);
    w->stats_fd = stats_fd;
    jobstats_init(&w->stats, conf->metrics_job_classes);
    jobhist_init(&w->hist, conf->job_history_size ? JOBHIST_WORKER_KEEP : 0, conf->job_history_sample,
                 conf->job_history_payloads);
    jobhist_init(&w->wq, conf->job_history_size ? JOBWATCH_WORKER_KEEP : 0, 1, false);
    w->p = p;
    w->conf = conf;
    w->slot = slot;
    w->master = master;
    w->pid = getpid();
    snprintf(w->tag, sizeof w->tag, "%s#%d", p->name, slot_no);
    proc_title("qpool: %s", w->tag);
    w->sfd = setup_signals();
    if (w->sfd < 0) {
        log_error("signalfd: %s", strerror(errno));
        return -1;
    }
    queue_scripts_init();
    const redis_conf_t *rcf = config_redis(conf, p->connection);
    const redis_conf_t *ccf = config_redis(conf, p->cache_connection);
    w->rc = rconn_new(rcf);
    /* An app_driver pool's worker pops nothing from Redis: its connection
     * only reads the watched set (and a fleet slot's record) between pops,
     * so a Redis that does not answer must not hold a pop for the pool's
     * timeout (5 s by default, up to an hour): bounded as the master's are. */
    if (p->app_driver && w->rc->conf.timeout > JOBWATCH_CONN_TIMEOUT_S)
        w->rc->conf.timeout = JOBWATCH_CONN_TIMEOUT_S;
    w->cache = rconn_new(ccf ? ccf : rcf);
    queue_set_init(&w->qs, rcf->prefix, p->queues, p->nqueues);
    wlimits_init(&w->lim, conf, p, rcf->prefix, rcf->cluster != NULL);
    w->h = handler_new(p, w->tag);
    handler_on_group(w->h, slot_handler_group, w);
    w->rss_self.fd = w->rss_handler.fd = -1;
    w->start_ms = mono_ms();
    w->last_migrate_ms = 0;
    return 0;
}

/* The worker ends: *code gets finish()'s exit code; returns -1 for before_job. */
static int exit_with(worker_t *w, int status, int reason, int *code)
{
    *code = finish(w, status, reason);
    return -1;
}

/* Before a job: signals, the reasons to exit, a pause, Redis and the
 * handler. 1: take a job; 0: look again; -1: exit with *code (finish). */
static int before_job(worker_t *w, int zygote_fd, int *code)
{
    const pool_conf_t *p = w->p;
    if (p->prefetch <= 1 || mono_ms() - w->signals_read_ms >= SIGNAL_CHECK_MS || w->last_job_ms >= SIGNAL_CHECK_MS)
        read_signals(w);
    if (w->parent_dead) return exit_with(w, 1, SB_EXIT_PARENT, code);
    if (w->pending_stuck && !w->quit) flush_outcome(w);
    if (w->quit || (control(w) & SB_CTL_RETIRE)) return exit_with(w, 0, SB_EXIT_SIGNAL, code);
    if (p->max_time > 0 && mono_ms() - w->start_ms >= (int64_t)p->max_time * 1000)
        return exit_with(w, 0, SB_EXIT_MAX_TIME, code);
    if (paused(w)) {
        give_back(w, ~0u);
        flush_outcome(w);
        sb_state(w, SB_PAUSED);
        stats_flush(w, false);
        wait_signals(w, 1000);
        return 0;
    }
    if (!p->app_driver && !redis_ready(w)) {
        if (w->slot->c.state != SB_STARTING) sb_state(w, SB_IDLE);
        wait_signals(w, rconn_retry_in_ms(w->rc) + 1);
        return 0;
    }
    handler_set_zygote(w->h, atomic_load(&w->slot->preload_off) ? -1 : zygote_fd,
                       (pid_t)atomic_load(&w->slot->zygote_pid));
    int hr = handler_prepare(w->h, w->sfd);
    sb_handler(w);
    if (hr == 0) return 0;
    if (hr < 0) {
        give_back(w, ~0u);
        flush_outcome(w);
        wait_signals(w, handler_retry_in_ms(w->h) + 1);
        return 0;
    }
    if (w->slot->c.state == SB_STARTING || w->slot->c.state == SB_PAUSED) sb_state(w, SB_IDLE);
    return 1;
}

/* The next job: a prefetched one (already reserved, its ack goes with the
 * next pop), or one popped now. false: none yet. */
static bool next_job(worker_t *w, job_t *job)
{
    memset(job, 0, sizeof *job);
    uint32_t skip = skip_mask(w);
    if (w->nlocal == w->local_head) settle(w);
    if (skip && w->nlocal > w->local_head) give_back(w, skip); /* queues paused meanwhile */
    if (w->nlocal > w->local_head && mono_ms() - w->held_since_ms >= renew_every_ms(w->p)) renew_held(w, NULL);
    if (w->nlocal == w->local_head) {
        if (pop_next(w, skip, job)) return true;
        stats_flush(w, false);
        return false;
    }
    pop_item_t it = w->local[w->local_head];
    memset(&w->local[w->local_head++], 0, sizeof it);
    if (w->local_head == w->nlocal) w->local_head = w->nlocal = 0;
    job->pr.kind = POP_JOB;
    job->pr.qidx = it.qidx;
    job->pr.raw = it.raw;
    job->pr.rawlen = it.rawlen;
    claim_held(w, &it, &job->pr);
    pop_ahead(w);
    return true;
}

/* ------------------------------------------------------------ app_driver pools */

/* The answer to a pop or run request, watching signals and the timeout.
 * The handler enforces the job's own timeout as queue:work does (the
 * Worker's SIGALRM handler fails the job when it should, then kills the
 * handler); this deadline, the pool's timeout plus APP_TIMEOUT_GRACE_S, is
 * the backstop for a handler stuck where no signal reaches PHP. */
#define APP_TIMEOUT_GRACE_S 10

/* "Stop this job" (master_stop_job) while the handler runs one: SIGALRM to
 * the handler, the signal of the Worker's timeout handler that AppDriver
 * armed (it marks the job failed if it will exceed its tries or has
 * failOnTimeout, then kills the handler): the job ends as its timeout would
 * end it under Laravel's rules. A handler that is still there
 * APP_TIMEOUT_GRACE_S later is killed (the backstop below). The new
 * deadline, or the old one when nothing was asked. */
static int64_t app_stop(worker_t *w, int64_t deadline)
{
    if (w->app_stopped || !stop_asked(w)) return deadline;
    w->app_stopped = true;
    log_warn("job %s (%s): stop asked by an operator: SIGALRM sent to its handler, as at its timeout",
             w->slot->c.job_id, w->slot->c.job_name); /* what it did: app_stop_outcome */
    int64_t grace = mono_ms() + (int64_t)APP_TIMEOUT_GRACE_S * 1000;
    if (handler_signal(w->h, SIGALRM) < 0) return mono_ms();
    return deadline && deadline < grace ? deadline : grace;
}

static void app_fire(worker_t *w, hresult_t *res, long timeout_s, bool run)
{
    int64_t start = mono_ms();
    if (timeout_s < 0) timeout_s = w->p->timeout;
    int64_t deadline = timeout_s > 0 ? start + ((int64_t)timeout_s + APP_TIMEOUT_GRACE_S) * 1000 : 0;
    w->app_stopped = false;
    if (handler_step(w->h, NULL, 0, res)) return; /* an answer already read (a pop_run's second one) */
    for (;;) {
        struct pollfd fds[8];
        fds[0] = (struct pollfd){w->sfd, POLLIN, 0};
        int n = 1 + handler_fds(w->h, fds + 1, 7);
        int64_t wait = deadline ? deadline - mono_ms() : 1000;
        if (poll(fds, (nfds_t)n, (int)(wait < 0 ? 0 : wait > 1000 ? 1000 : wait)) < 0 && errno != EINTR) {
            log_error("poll: %s: killing the handler", strerror(errno));
            handler_abort(w->h);
            memset(res, 0, sizeof *res);
            res->kind = HRES_CRASHED;
            return;
        }
        if (fds[0].revents & POLLIN) read_signals(w);
        if (handler_step(w->h, fds + 1, n - 1, res)) return;
        if (run) deadline = app_stop(w, deadline);
        if (deadline && mono_ms() >= deadline) {
            log_warn("the handler has not answered in %ld s (timeout %ld s + %d s): killing its process group; the "
                     "job it runs comes back as its queue driver returns a lost job (database, redis: after "
                     "retry_after; beanstalkd: at once)",
                     timeout_s + APP_TIMEOUT_GRACE_S, timeout_s, APP_TIMEOUT_GRACE_S);
            handler_abort(w->h);
            memset(res, 0, sizeof *res);
            res->kind = HRES_TIMEOUT;
            return;
        }
    }
}

/* One request to the handler and its answer (result_repair'ed); timeout_s
 * as app_fire's. */
static void app_request(worker_t *w, const char *type, const char *fields, hresult_t *res, long timeout_s)
{
    if (handler_begin_app(w->h, type, fields, res) == 0) {
        sb_handler(w);
        app_fire(w, res, timeout_s, !strcmp(type, "run"));
    }
    result_repair(res);
    sb_handler(w);
}

/* What the handler says of the job (json: its "job" object) becomes the
 * attempt's record; a field it leaves out keeps what the pop said. */
static void app_job_fill(worker_t *w, job_t *j, const char *json)
{
    appd_job_t a;
    appdriver_read_job(json, &a);
    if (!j->app_run || a.attempts > 0) {
        appd_job_free(&j->app);
        j->app = a;
    } else {
        j->app.runtime_ms = a.runtime_ms;
        appd_job_free(&a);
    }
    j->app_run = true;
    j->pr.qidx = appdriver_queue_index(w->p, j->app.queue);
    j->attempts = j->app.attempts;
    j->hj = (hjob_t){.queue = w->qs.q[j->pr.qidx].name, .connection = w->p->queue_connection, .id = j->app.id,
                     .uuid = j->app.uuid, .name = j->app.name, .attempts = j->attempts};
}

static const char *app_what(enum hres_kind k)
{
    switch (k) {
    case HRES_DONE: return "Processed";
    case HRES_RELEASED: return "Released";
    case HRES_FAILED: return "Failed";
    case HRES_TIMEOUT: return "TimedOut";
    default: return "Crashed";
    }
}

/* After a stop (app_stop): what it did, once the run's outcome is known. */
static void app_stop_outcome(const worker_t *w, const job_t *j, enum hres_kind k)
{
    if (!w->app_stopped) return;
    if (k == HRES_TIMEOUT)
        log_warn("job %s (%s) stopped by an operator, as at its timeout", j->app.id ? j->app.id : "?", j->app.name);
    else
        log_warn("job %s (%s): the stop came as the job ended, which it left as it was: %s",
                 j->app.id ? j->app.id : "?", j->app.name, app_what(k));
}

/* The run's outcome: the job log, the counters, the stats and history (the
 * runtime is the handler's when it says). Release and failure happened in
 * the handler, through the app's driver. */
static void app_settle(worker_t *w, job_t *j, hresult_t *res)
{
    if (res->job) app_job_fill(w, j, res->job);
    j->failed = res->kind == HRES_FAILED;
    /* the handler's own figure, when it says one no longer than qpool measured */
    if (j->app.runtime_ms >= 0 && j->app.runtime_ms <= ms_since(j->started_s))
        j->started_s = mono_s() - j->app.runtime_ms / 1000.0;
    if (res->kind == HRES_FAILED) w->jobs_failed++;
    char extra[64];
    snprintf(extra, sizeof extra, " %.2f ms", ms_since(j->started_s));
    job_log(w, j, app_what(res->kind), extra);
    app_stop_outcome(w, j, res->kind);
    if (res->exception && res->kind != HRES_DONE)
        log_warn("job %s (%s) attempt %ld: %.*s", j->app.id ? j->app.id : "?", j->app.name, j->attempts, 1000,
                 res->exception);
    stats_record(w, j, res);
}

/* A pop that brought no job to run: none ready (wait `sleep`), or the pop
 * itself failed (logged; wait a second), or the handler went away (it is
 * restarted with backoff before the next request). */
static void app_no_job(worker_t *w, const hresult_t *res)
{
    if (res->kind == HRES_EMPTY) {
        wait_signals(w, (int64_t)(w->p->sleep * 1000));
    } else if (res->kind == HRES_EXCEPTION && !res->exiting) {
        log_warn("the handler could not pop from queue connection %s: %.*s", w->p->queue_connection, 1000,
                 res->exception ? res->exception : "?");
        wait_signals(w, 1000);
    } else if (res->kind == HRES_POPPED) { /* not the wire: never ask again at once */
        log_warn("the handler said it popped a job but did not say which: asking again in 1 s");
        wait_signals(w, 1000);
    }
}

/* One trip, and "popped" came without a job: the handler may be running one
 * now, so it is never asked again; it is killed (the job, if any, comes
 * back as its queue driver returns a lost job) and started afresh. */
static void app_popped_nothing(worker_t *w)
{
    log_warn("the handler said it popped a job but did not say which, and may be running it: killing the handler; "
             "its job, if any, comes back as its queue driver returns a lost job");
    handler_abort(w->h);
    wait_signals(w, 1000);
}

/* Pop: 1 with the job in *job (popped, or already run when the handler was
 * told to stop meanwhile: *res holds its outcome), 0 when none. *one_trip:
 * the pop asked the handler to run the job too (it said pop_run when
 * ready): the outcome comes as a second answer, no run request. */
static int app_pop(worker_t *w, job_t *job, hresult_t *res, bool *one_trip)
{
    char *fields = appdriver_request(w->p, skip_mask(w));
    if (!fields) { /* every queue of the pool is paused */
        memset(res, 0, sizeof *res);
        wait_signals(w, 1000);
        return 0;
    }
    *one_trip = handler_pop_run(w->h);
    if (*one_trip) {
        char *more = xasprintf("%s,\"run\":true", fields);
        free(fields);
        fields = more;
    }
    /* one trip: the job may start as soon as the handler reads this pop, so
     * its clock starts here (app_settle's bound and app_timed_out's `late`
     * need qpool's interval to hold the handler's) */
    if (*one_trip) {
        job->started_s = mono_s();
        job->started_wall_ms = wall_ms();
    }
    app_request(w, "pop", fields, res, -1);
    free(fields);
    if (!res->job) {
        if (*one_trip && res->kind == HRES_POPPED)
            app_popped_nothing(w);
        else
            app_no_job(w, res);
        return 0;
    }
    app_job_fill(w, job, res->job);
    return 1;
}

/* The Worker's timeout handler kills the handler (SIGKILL) at the job's
 * timeout: a handler that died without an answer after it is a timeout,
 * and so is one an operator stopped (app_stop). */
static void app_timed_out(const worker_t *w, const job_t *j, hresult_t *res)
{
    if (res->kind != HRES_CRASHED && !(w->app_stopped && res->kind == HRES_TIMEOUT)) return;
    bool late = j->app.timeout_s > 0 && ms_since(j->started_s) >= (double)j->app.timeout_s * 1000.0 - 50;
    if (!late && !w->app_stopped) return;
    hresult_free(res);
    res->kind = HRES_TIMEOUT;
    res->exc_class = xstrdup("Illuminate\\Queue\\TimeoutExceededException");
    res->message = late ? xasprintf("%s has timed out.", j->app.name)
                        : xasprintf("%s was stopped by an operator, as at its timeout.", j->app.name);
}

/* The run of the popped job: a run request, or (one_trip) the pop's second
 * answer, which the handler writes once the job ran. */
static void app_run(worker_t *w, const job_t *job, hresult_t *res, bool one_trip)
{
    if (!one_trip) {
        app_request(w, "run", "", res, job->app.timeout_s);
        return;
    }
    if (handler_more(w->h, job->app.id ? job->app.id : job->app.uuid, res) == 0) app_fire(w, res, job->app.timeout_s, true);
    result_repair(res);
    sb_handler(w);
}

/* One job through the app's driver: a pop request (the handler takes the
 * next job and says which), then a run request (it runs it as queue:work
 * does), or one pop that does both (handler_pop_run). True when a job ran
 * (then after_job), false when none did. */
static bool app_cycle(worker_t *w, job_t *job)
{
    memset(job, 0, sizeof *job);
    job->started_ms = mono_ms();
    job->started_s = mono_s();
    job->started_wall_ms = wall_ms();
    hresult_t res;
    watch_poll(w, job->started_ms); /* before the pop: the job's record meets the set as it is now */
    bool one_trip = false;
    bool ran = app_pop(w, job, &res, &one_trip) == 1;
    if (ran && res.kind == HRES_POPPED) {
        sb_job(w, &(sb_job_t){.id = job->app.id, .uuid = job->app.uuid, .name = job->app.name,
                              .queue = w->qs.q[job->pr.qidx].name, .attempt = job->attempts,
                              .timeout = job->app.timeout_s >= 0 ? job->app.timeout_s : w->p->timeout});
        job_log(w, job, "Processing", NULL);
        hresult_free(&res);
        if (!one_trip) { /* else: since the pop was written (app_pop) */
            job->started_s = mono_s();
            job->started_wall_ms = wall_ms();
        }
        app_run(w, job, &res, one_trip);
        app_timed_out(w, job, &res);
        if (res.kind == HRES_NOT_STARTED) {
            log_warn("job %s (%s): the handler went away before it ran it; it comes back as its "
                     "queue driver returns a lost job (after retry_after; on beanstalkd at once)", job->app.id ? job->app.id : "?", job->app.name);
            ran = false;
        }
    }
    if (ran) app_settle(w, job, &res);
    hresult_free(&res);
    if (!ran) {
        job_free(job);
        if (w->slot->c.state == SB_BUSY) sb_state(w, SB_IDLE);
        stats_flush(w, false);
    }
    return ran;
}

/* After a job that ran: counters, memory, max_jobs, rest. -1 to go on,
 * else the exit code (finish). */
static int after_job(worker_t *w, job_t *job)
{
    const pool_conf_t *p = w->p;
    w->jobs_done++;
    w->last_job_ms = mono_ms() - job->started_ms;
    w->pace_ms = policy_prefetch_pace(w->pace_ms, w->last_job_ms);
    w->busy_ms += (uint64_t)w->last_job_ms;
    int64_t now = mono_ms();
    if (p->prefetch <= 1 || now - w->rss_read_ms >= RSS_CHECK_MS || w->last_job_ms >= RSS_CHECK_MS) {
        w->rss_kb = rss_read(&w->rss_self, w->pid) + handler_memory(w);
        w->rss_read_ms = now;
    }
    uint64_t rss = w->rss_kb;
    sb_counters(w, rss);
    sb_state(w, SB_IDLE);
    job_free(job);
    stats_flush(w, false);
    /* Jobs turned slower: the prefetched ones would wait behind them while
     * other workers idle. Give them back and pop fewer at a time. */
    if (w->ahead.on && policy_prefetch_give_back(w->nlocal - w->local_head + w->ahead.a.want, w->last_job_ms, w->pace_ms))
        settle(w); /* what the pop in flight brought counts too: read it */
    if (policy_prefetch_give_back(w->nlocal - w->local_head, w->last_job_ms, w->pace_ms)) give_back(w, ~0u);

    if (w->npending && w->pending[w->npending - 1].kind != OUT_ACK) flush_outcome(w);
    if (p->memory > 0 && rss > (uint64_t)p->memory * 1024) {
        log_info("memory %llu kB is over the limit of %d MB after %llu jobs: exiting 12 to be replaced",
                 (unsigned long long)rss, p->memory, (unsigned long long)w->jobs_done);
        return finish(w, QPOOL_EX_MEMORY, SB_EXIT_MEMORY);
    }
    if (p->max_jobs > 0 && w->jobs_done >= (uint64_t)p->max_jobs) return finish(w, 0, SB_EXIT_MAX_JOBS);
    if (p->rest > 0) {
        flush_outcome(w);
        int64_t until = mono_ms() + (int64_t)(p->rest * 1000);
        while (!w->quit && !w->parent_dead && mono_ms() < until) wait_signals(w, until - mono_ms());
    }
    return -1;
}

int worker_main(const pool_conf_t *p, const qconf_t *conf, sb_slot_t *slot, int slot_no, pid_t master, int stats_fd,
                int zygote_fd)
{
    worker_t W, *w = &W;
    if (worker_init(w, p, conf, slot, slot_no, master, stats_fd) < 0) return QPOOL_EX_SETUP;
    for (;;) {
        int code = 0;
        int r = before_job(w, zygote_fd, &code);
        if (r < 0) return code;
        job_t job;
        bool ran = true;
        if (r && p->app_driver) {
            if (!app_cycle(w, &job)) continue;
        } else {
            if (!r || !next_job(w, &job)) continue;
            ran = run_job(w, &job);
            wlimits_end(&w->lim, w->rc);
        }
        if (!ran) { /* given back untouched: the handler restarts first */
            job_free(&job);
            sb_state(w, SB_IDLE);
            flush_outcome(w);
            continue;
        }
        if ((code = after_job(w, &job)) >= 0) return code;
    }
}
