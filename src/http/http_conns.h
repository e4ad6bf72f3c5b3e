/*
 * http_conns.h - which connections the HTTP process keeps (pure: no I/O,
 * no clock, no locking; http_server.c calls it under its lock; unit-tested).
 *
 * Connections are counted by the prefix they come from: an IPv4 address,
 * an IPv6 /64, and every loopback address (127.0.0.0/8, ::1) or Unix
 * socket peer as one. At most `max` connections are kept, at most
 * `per_prefix` of them from one prefix (0: no such cap).
 *
 * A connection is WAITING from its start, and again once a request is
 * answered (keep-alive), until its next request is received whole (request
 * line, headers, body): then it is ANSWERING. A WAITING connection is
 * closed `header_ms` after it began to wait, however it trickles.
 *
 * A newcomer whose prefix is at its cap (or that finds every place taken)
 * takes the place of a connection of that prefix (or of any), in this
 * order, oldest first within each: a kept-alive connection (a request of
 * it was answered), idle before answering; one that has waited `grace_ms`
 * for its first request (a slow-loris); a first answer, slow readers
 * (answering for `grace_ms`) first; last, one that arrived within
 * `grace_ms` and has not sent its request whole yet, and of those one
 * that was asking for /healthz when it arrived goes very last (the server
 * peeks: conns_probe). So a connection that
 * sends its request at once (a load balancer's or Kubernetes' probe) gets
 * in and is answered, whoever holds the others: to push it out, as many
 * newer connections as its prefix's share would have to arrive before its
 * request is read (libmicrohttpd reads a new connection in the loop turn
 * that accepts it), and a flood can only push out its own kind. The price:
 * under a flood from its own prefix, a client's answer may be cut (it
 * tries again).
 */
#ifndef QPOOL_HTTP_CONNS_H
#define QPOOL_HTTP_CONNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct {
    uint8_t b[9];              /* b[0]: kind (CONN_PREFIX_*), then up to 8 address bytes */
} conn_prefix_t;

enum { CONN_PREFIX_LOCAL = 1, CONN_PREFIX_V4, CONN_PREFIX_V6 };

typedef enum { CONN_WAITING, CONN_ANSWERING } conn_phase_t;

typedef struct {
    bool used;
    bool displaced;            /* told to close (its fd shut down); gone once released */
    bool served;               /* a request of it was answered (kept alive since) */
    bool probe;                /* it was asking for /healthz when it arrived */
    int fd;
    conn_prefix_t prefix;
    conn_phase_t phase;
    int64_t since_ms;          /* when the phase began */
    uint64_t seq;              /* the order phases began in (within a millisecond too) */
} conn_slot_t;

typedef struct {
    conn_slot_t *slots;
    int nslots;                /* 4 x max: max, plus room for displaced ones not yet closed */
    int max;
    int per_prefix;
    int64_t header_ms;
    int64_t grace_ms;
    int live;                  /* used and not displaced */
    uint64_t seq;
} conns_t;

/* The prefix a peer counts under; NULL or a Unix peer: local. */
void conn_prefix_of(const struct sockaddr *sa, socklen_t len, conn_prefix_t *out);
bool conn_prefix_same(const conn_prefix_t *a, const conn_prefix_t *b);

void conns_init(conns_t *t, int max, int per_prefix, int64_t header_ms, int64_t grace_ms);
void conns_free(conns_t *t);

/* Whether a newcomer from p gets in at now: 1 outright, 0 in place of
 * the connection in *victim, -1 not at all. */
int conns_room(const conns_t *t, const conn_prefix_t *p, int64_t now, int *victim);

/* Admit it: its slot (>= 0), and *shut the descriptor of the connection it
 * displaces (-1: none), which is marked displaced; -1: refused. */
int conns_admit(conns_t *t, const conn_prefix_t *p, int fd, int64_t now, int *shut);

void conns_probe(conns_t *t, int slot);                 /* it asks for /healthz: pushed out last */
void conns_received(conns_t *t, int slot, int64_t now); /* its request is whole: ANSWERING */
void conns_answered(conns_t *t, int slot, int64_t now); /* the reply went: WAITING again */
void conns_release(conns_t *t, int slot);               /* it is closed */

/* The WAITING connections past their deadline: up to n descriptors into
 * fds, each marked displaced. Returns how many; *fresh: how many of them
 * never had a request answered (the rest are mostly idle keep-alives). */
int conns_expired(conns_t *t, int64_t now, int *fds, int n, int *fresh);

#endif
