/*
 * http_conns.c - which connections the HTTP process keeps (see
 * http_conns.h).
 */
#include "http/http_conns.h"
#include "core/util.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

static void prefix_v4(const uint8_t a[4], conn_prefix_t *out)
{
    if (a[0] == 127) {
        out->b[0] = CONN_PREFIX_LOCAL; /* all of 127/8 is this machine: one address */
        return;
    }
    out->b[0] = CONN_PREFIX_V4;
    memcpy(out->b + 1, a, 4);
}

void conn_prefix_of(const struct sockaddr *sa, socklen_t len, conn_prefix_t *out)
{
    memset(out, 0, sizeof *out);
    out->b[0] = CONN_PREFIX_LOCAL;
    if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        prefix_v4((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr, out);
    } else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            prefix_v4(a->s6_addr + 12, out); /* ::ffff:a.b.c.d on a dual-stack listener */
        else if (!IN6_IS_ADDR_LOOPBACK(a)) {
            out->b[0] = CONN_PREFIX_V6;
            memcpy(out->b + 1, a->s6_addr, 8); /* the /64: one host's, or one subscriber's */
        }
    }
}

bool conn_prefix_same(const conn_prefix_t *a, const conn_prefix_t *b)
{
    return !memcmp(a->b, b->b, sizeof a->b);
}

void conns_init(conns_t *t, int max, int per_prefix, int64_t header_ms, int64_t grace_ms)
{
    memset(t, 0, sizeof *t);
    t->max = max > 0 ? max : 1;
    t->nslots = 4 * t->max; /* a flood displaces faster than a loaded loop turn closes what it displaced */
    t->slots = xcalloc((size_t)t->nslots, sizeof *t->slots);
    t->per_prefix = per_prefix;
    t->header_ms = header_ms;
    t->grace_ms = grace_ms;
}

void conns_free(conns_t *t)
{
    free(t->slots);
    t->slots = NULL;
    t->nslots = 0;
}

static bool live(const conn_slot_t *c)
{
    return c->used && !c->displaced;
}

/* Whether c may give its place to a newcomer at now, and how readily:
 * 0 no (not live); otherwise a rank, older first within one:
 *   1 a kept-alive connection (a request of it was answered), waiting;
 *   2 a kept-alive connection answering its next request;
 *   3 a connection that has waited grace_ms for its first request;
 *   4 a first answer past grace_ms (a slow reader);
 *   5 a first answer (queued, or being sent);
 *   6 a connection that arrived within grace_ms and has not sent its
 *     request whole yet;
 *   7 the same, that was asking for /healthz when it arrived (a probe).
 * Who has just connected goes last, a probe the very last: else a flood
 * whose connections are answered and ask again, or that arrives in bursts
 * larger than its prefix's share (libmicrohttpd accepts what waits in the
 * listener's backlog at once, before it reads any of them), pushes out a
 * probe before its request is even read. */
static int displaceable(const conns_t *t, const conn_slot_t *c, int64_t now)
{
    if (!live(c)) return 0;
    bool young = now - c->since_ms < t->grace_ms;
    if (c->served) return c->phase == CONN_WAITING ? 1 : 2;
    if (c->phase == CONN_WAITING) return !young ? 3 : c->probe ? 7 : 6;
    return young ? 5 : 4;
}

/* The connection to displace among those of prefix p (NULL: any). */
static int pick_victim(const conns_t *t, const conn_prefix_t *p, int64_t now)
{
    int best = -1, best_rank = 0;
    for (int i = 0; i < t->nslots; i++) {
        const conn_slot_t *c = &t->slots[i];
        int rank = displaceable(t, c, now);
        if (!rank || (p && !conn_prefix_same(&c->prefix, p))) continue;
        if (best < 0 || rank < best_rank || (rank == best_rank && c->seq < t->slots[best].seq)) {
            best = i;
            best_rank = rank;
        }
    }
    return best;
}

static int free_slot(const conns_t *t)
{
    for (int i = 0; i < t->nslots; i++)
        if (!t->slots[i].used) return i;
    return -1;
}

int conns_room(const conns_t *t, const conn_prefix_t *p, int64_t now, int *victim)
{
    *victim = -1;
    if (free_slot(t) < 0) return -1; /* too many displaced ones still closing */
    int same = 0;
    for (int i = 0; i < t->nslots; i++)
        if (live(&t->slots[i]) && conn_prefix_same(&t->slots[i].prefix, p)) same++;
    if (t->per_prefix > 0 && same >= t->per_prefix)
        *victim = pick_victim(t, p, now);
    else if (t->live >= t->max)
        *victim = pick_victim(t, NULL, now);
    else
        return 1;
    return *victim >= 0 ? 0 : -1;
}

static void displace(conns_t *t, int i)
{
    t->slots[i].displaced = true;
    t->live--;
}

int conns_admit(conns_t *t, const conn_prefix_t *p, int fd, int64_t now, int *shut)
{
    int victim;
    *shut = -1;
    if (conns_room(t, p, now, &victim) < 0) return -1;
    if (victim >= 0) {
        displace(t, victim);
        *shut = t->slots[victim].fd;
    }
    int i = free_slot(t);
    t->slots[i] = (conn_slot_t){
        .used = true, .fd = fd, .prefix = *p, .phase = CONN_WAITING, .since_ms = now, .seq = ++t->seq};
    t->live++;
    return i;
}

static conn_slot_t *slot(conns_t *t, int i)
{
    return i >= 0 && i < t->nslots && t->slots[i].used ? &t->slots[i] : NULL;
}

void conns_probe(conns_t *t, int i)
{
    conn_slot_t *c = slot(t, i);
    if (c) c->probe = true;
}

void conns_received(conns_t *t, int i, int64_t now)
{
    conn_slot_t *c = slot(t, i);
    if (c && c->phase == CONN_WAITING) {
        c->phase = CONN_ANSWERING;
        c->since_ms = now;
        c->seq = ++t->seq;
    }
}

void conns_answered(conns_t *t, int i, int64_t now)
{
    conn_slot_t *c = slot(t, i);
    if (c) {
        c->phase = CONN_WAITING;
        c->served = true;
        c->since_ms = now;
        c->seq = ++t->seq;
    }
}

void conns_release(conns_t *t, int i)
{
    conn_slot_t *c = slot(t, i);
    if (!c) return;
    if (!c->displaced) t->live--;
    memset(c, 0, sizeof *c);
}

int conns_expired(conns_t *t, int64_t now, int *fds, int n, int *fresh)
{
    int k = 0;
    *fresh = 0;
    for (int i = 0; i < t->nslots && k < n; i++) {
        conn_slot_t *c = &t->slots[i];
        if (live(c) && c->phase == CONN_WAITING && now - c->since_ms >= t->header_ms) {
            displace(t, i);
            fds[k++] = c->fd;
            *fresh += !c->served;
        }
    }
    return k;
}
