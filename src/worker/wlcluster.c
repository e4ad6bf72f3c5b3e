/*
 * wlcluster.c - see wlcluster.h.
 */
#include "worker/wlcluster.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WLC_PASSES 3 /* passes that may find their jobs gone before this pop reports "held" */
#define WLC_PICK_MAX 8        /* candidates sent with a pick pop, at most */
#define WLC_PICK_BYTES 16384 /* and their payload bytes at most (one is always sent) */

typedef struct {
    const char *raw;
    size_t len;
    char *cls;  /* displayName (NULL: none) */
    bool plain; /* no limit applies: not a job the pop would start (poison) */
    bool keyed; /* a per-key limit (tag_prefix) applies to its class: its leases serve it alone */
} peeked_t;

/* The leases lease_all took for one job: which limits, and a per-key
 * limit's keys (kids[i]). */
typedef struct {
    bool *taken;
    qtags_t *kids;
} leased_t;

/* A peeked payload as the single-Redis pop's lim_match reads it: a JSON
 * object with a numeric attempts, else plain (the pop moves it aside). */
static void peek_parse(peeked_t *p, const char *raw, size_t len)
{
    memset(p, 0, sizeof *p);
    p->raw = raw;
    p->len = len;
    cJSON *d = cJSON_ParseWithLength(raw, len);
    const cJSON *at = cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, "attempts") : NULL;
    char *end = NULL;
    bool num = cJSON_IsNumber(at);
    if (cJSON_IsString(at)) { /* Lua's tonumber takes "3" too */
        strtod(at->valuestring, &end);
        num = end != at->valuestring && !*end;
    }
    p->plain = !num;
    const cJSON *dn = num ? cJSON_GetObjectItemCaseSensitive(d, "displayName") : NULL;
    if (cJSON_IsString(dn)) p->cls = xstrdup(dn->valuestring);
    cJSON_Delete(d);
}

/* How many of the peeked jobs limit i holds back once it is full. */
static long held_by(const qlimits_t *ls, int i, const char *queue, const peeked_t *v, int n)
{
    long k = 0;
    for (int j = 0; j < n; j++) k += !v[j].plain && qlimit_applies(&ls->v[i], queue, v[j].cls);
    return k;
}

static void leased_reset(const qlimits_t *ls, leased_t *t)
{
    memset(t->taken, 0, sizeof *t->taken * (size_t)ls->n);
    for (int i = 0; i < ls->n; i++) qtags_free(&t->kids[i]);
}

static void unlease_all(rconn_t *c, const qlimits_t *ls, const leased_t *t, const char *token)
{
    for (int i = 0; i < ls->n; i++) {
        if (!t->taken[i]) continue;
        if (ls->v[i].tag_prefix) qlimit_unlease_keys(c, &ls->v[i], &t->kids[i], token);
        else qlimit_unlease(c, &ls->v[i], token);
    }
}

/* Lease limit i for job p: 1, 0 (full), -1; 2: a per-key limit the job has
 * no key of (not limited by it, as the single-Redis pop's lim_tagged). */
static int lease_one(rconn_t *c, const qlimits_t *ls, int i, const peeked_t *p, long held, const char *token,
                     leased_t *t)
{
    const qlimit_t *l = &ls->v[i];
    if (!l->tag_prefix) return qlimit_lease(c, l, ls->ttl, token, held);
    qtags_t tags;
    qtags_of_job(p->raw, p->len, &tags);
    qtags_keys(&tags, l->tag_prefix, &t->kids[i]);
    qtags_free(&tags);
    if (!t->kids[i].n) return 2;
    return qlimit_lease_keys(c, l, &t->kids[i], ls->ttl, token, held);
}

/* Lease every limit job v[j] falls under: 1 all taken (taken[] says which),
 * 0 one was full (marked in full[], the others given back), -1 error. A
 * paused class (always full, holding nothing) is asked first: its jobs
 * never take a real slot or token, even for a moment (review of
 * 2026-11-29: another host's lease could be refused meanwhile). */
static int lease_all(rconn_t *c, const qlimits_t *ls, const char *queue, const peeked_t *v, int n, int j,
                     const char *token, bool *full, leased_t *t)
{
    leased_reset(ls, t);
    if (v[j].plain) return 1;
    for (int k = 0; k < 2 * ls->n; k++) {
        int i = k % ls->n;
        if ((k < ls->n) != (ls->v[i].concurrency == QLIMIT_PAUSED)) continue; /* paused ones, then the rest */
        if (!qlimit_applies(&ls->v[i], queue, v[j].cls)) continue;
        int r = lease_one(c, ls, i, &v[j], held_by(ls, i, queue, v, n), token, t);
        if (r >= 1) {
            t->taken[i] = r == 1;
            continue;
        }
        if (r == 0 && !ls->v[i].tag_prefix) full[i] = true; /* a key full: other keys' jobs may go */
        unlease_all(c, ls, t, token);
        return r;
    }
    return 1;
}

/* The pop's lim_keys for a job popped under the leases t: every :run set a
 * lease took a slot in (the worker renews and gives back exactly those, as
 * after the single-Redis pop, which names them in its reply). */
static void name_keys(const qlimits_t *ls, const leased_t *t, pop_result_t *out)
{
    char **runs = NULL;
    int n = 0;
    for (int i = 0; i < ls->n; i++) {
        if (!t->taken[i] || ls->v[i].concurrency <= 0) continue;
        if (ls->v[i].tag_prefix) {
            n = qlimit_keys_runs(&ls->v[i], &t->kids[i], &runs, n);
            continue;
        }
        runs = xrealloc(runs, sizeof *runs * (size_t)(n + 1));
        runs[n++] = xstrdup(ls->v[i].run);
    }
    if (!n) return;
    for (int i = 0; i < out->nlim_keys; i++) free(out->lim_keys[i]);
    free(out->lim_keys);
    out->lim_keys = runs;
    out->nlim_keys = n;
}

/* The pick pop of queue q over the candidates (none, with q < 0: every
 * queue not skipped, nothing popped). 1, 0 or -1 as wlcluster_pop. */
static int pick_pop(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, int q, const char *const *picks,
                    const size_t *lens, int npicks, pop_result_t *out)
{
    pop_args_t b = *a;
    b.pick = true;
    b.picks = picks;
    b.picklens = lens;
    b.npicks = npicks;
    if (q >= 0) b.skip_mask = ~(1u << q);
    if (!queue_append_pop(c, qs, &b)) return 0;
    redisReply *r = NULL;
    if (queue_read_pop(c, qs, &b, &r) != RC_OK) return -1;
    bool ok = queue_parse_pop(qs, &b, r, out);
    if (!ok) rconn_drop(c, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply to the pick pop");
    freeReplyObject(r);
    return ok ? 1 : 0;
}

/* Pick pop v[j] or, should another worker have taken it, the next job
 * peeked that falls under the same limits (the leases taken serve it). */
static int pick_from(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, int q, const peeked_t *v, int n, int j,
                     pop_result_t *out)
{
    const char **picks = xcalloc((size_t)(n - j), sizeof *picks);
    size_t *lens = xcalloc((size_t)(n - j), sizeof *lens), bytes = 0;
    int k = 0;
    for (int i = j; i < n && k < WLC_PICK_MAX && (!k || bytes + v[i].len <= WLC_PICK_BYTES); i++)
        if (i == j || (!v[j].keyed && !v[i].keyed &&
                       qlimit_same_limits(a->limits, qs->q[q].name, v[j].cls, v[j].plain, v[i].cls, v[i].plain))) {
            picks[k] = v[i].raw;
            lens[k++] = v[i].len;
            bytes += v[i].len;
        }
    int rv = pick_pop(c, qs, a, q, picks, lens, k, out);
    FREE_ALL(picks, lens);
    return rv;
}

/* Try the jobs peeked on queue q in order. 1: out holds what was popped;
 * 2: the job picked was gone (leases given back); 3: every job is held;
 * 0 / -1 as wlcluster_pop. */
static int try_queue(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, int q, const peeked_t *v, int n,
                     bool *full, pop_result_t *out)
{
    const qlimits_t *ls = a->limits;
    const char *queue = qs->q[q].name;
    leased_t t = {xcalloc((size_t)ls->n + 1, sizeof *t.taken), xcalloc((size_t)ls->n + 1, sizeof *t.kids)};
    int rv = 3;
    for (int j = 0; j < n && rv == 3; j++) {
        if (!v[j].plain && qlimit_first_full(ls, queue, v[j].cls, full) >= 0) continue;
        int r = lease_all(c, ls, queue, v, n, j, a->slot_token, full, &t);
        if (r < 0) rv = -1;
        if (r <= 0) continue;
        rv = pick_from(c, qs, a, q, v, n, j, out);
        if (rv == 1 && out->kind == POP_JOB) {
            name_keys(ls, &t, out);
            break;
        }
        unlease_all(c, ls, &t, a->slot_token); /* a lost connection: the slots lapse */
        if (rv == 1 && out->pick_gone) {
            pop_result_free(out);
            rv = 2;
        }
    }
    leased_reset(ls, &t);
    FREE_ALL(t.taken, t.kids);
    return rv;
}

/* LRANGE 0..last of queue q's ready list: the reply (NULL: the connection went). */
static redisReply *peek(rconn_t *c, const qkeys_t *k, int last)
{
    char end[16];
    snprintf(end, sizeof end, "%d", last);
    const char *argv[] = {"LRANGE", k->ready, "0", end};
    return rconn_call(c, 4, argv, NULL);
}

#define WLC_EMPTY 4 /* peek_and_try: the queue has no ready job */

/* Peek the first last+1 ready jobs of queue q and try them in order:
 * try_queue's 1 / 2 / 3, WLC_EMPTY, or 0 / -1. */
static int peek_and_try(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, int q, int last, bool *full,
                        pop_result_t *out)
{
    redisReply *r = peek(c, &qs->q[q], last);
    if (!r) return -1;
    if (r->type == REDIS_REPLY_ERROR) {
        rconn_drop(c, r->str); /* CLUSTERDOWN, a failover: reconnect first */
        freeReplyObject(r);
        return 0;
    }
    if (r->type != REDIS_REPLY_ARRAY || !r->elements) {
        freeReplyObject(r);
        return WLC_EMPTY;
    }
    int n = (int)r->elements;
    peeked_t *v = xcalloc((size_t)n, sizeof *v);
    for (int j = 0; j < n; j++) {
        peek_parse(&v[j], r->element[j]->str, r->element[j]->len);
        for (int i = 0; i < a->limits->n; i++)
            v[j].keyed |= a->limits->v[i].tag_prefix && qlimit_applies(&a->limits->v[i], qs->q[q].name, v[j].cls);
    }
    int rv = try_queue(c, qs, a, q, v, n, full, out);
    for (int j = 0; j < n; j++) free(v[j].cls);
    free(v);
    freeReplyObject(r);
    return rv;
}

/* One pass over the queues: 1 / 2 / 3 as try_queue (3 also when every
 * queue is empty: *held has a bit per queue whose jobs were held), 0 / -1. Each
 * queue's head alone first; the look-ahead's payloads are copied only when
 * the head is held (as the single-Redis pop: review of 2026-11-29). */
static int pass(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, pop_result_t *out, uint32_t *held)
{
    bool *full = xcalloc((size_t)a->limits->n + 1, sizeof *full);
    int rv = 3, look = atoi(a->limits->look);
    for (int q = 0; q < qs->nq && rv == 3; q++) {
        if (a->skip_mask & (1u << q)) continue;
        rv = peek_and_try(c, qs, a, q, 0, full, out);
        if (rv == 3 && look > 1) rv = peek_and_try(c, qs, a, q, look - 1, full, out);
        if (rv == WLC_EMPTY) rv = 3;
        else if (rv == 3) *held |= 1u << q;
    }
    free(full);
    return rv;
}

/* The queue whose :notify gets back the token the caller's BLPOP took,
 * when its jobs wait on a limit: the queue it came from if known (none
 * when that one's jobs were not held: it was empty, as the plain pop drops
 * it), else the first held one; -1: none. (pure) */
int wlcluster_token_back(uint32_t held, int token_q)
{
    if (token_q > 0) return held & (1u << (token_q - 1)) ? token_q - 1 : -1;
    for (int q = 0; q < 32; q++)
        if (held & (1u << q)) return q;
    return -1;
}

int wlcluster_pop(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, pop_result_t *out)
{
    memset(out, 0, sizeof *out);
    uint32_t held = 0;
    int rv = 2;
    for (int k = 0; k < WLC_PASSES && rv == 2; k++) rv = pass(c, qs, a, out, &held);
    if (rv != 2 && rv != 3) return rv;
    if (rv == 2) /* lost the race every pass: try again soon */
        held |= a->token_q > 0 ? 1u << (a->token_q - 1) : held ? 0 : 1u;
    /* no job now: the migration and the next due time, as the plain pop's empty reply */
    rv = pick_pop(c, qs, a, -1, NULL, NULL, 0, out);
    if (rv != 1) return rv;
    out->limit_blocked = held != 0;
    int back = a->token_taken ? wlcluster_token_back(held, a->token_q) : -1;
    if (back >= 0) { /* the caller's BLPOP took a token of a job that waits: back to its queue */
        const char *argv[] = {"RPUSH", qs->q[back].notify, "1"};
        redisReply *r = rconn_call(c, 3, argv, NULL);
        if (r) freeReplyObject(r);
    }
    return 1;
}
