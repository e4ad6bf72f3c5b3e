/*
 * rconn.h - one Redis connection with reconnect-with-backoff, built on
 * hiredis's synchronous API but waited on with poll(2), so a caller blocked
 * in Redis (BLPOP, or a server that stopped answering) still wakes at once
 * for a signal on its signalfd.
 *
 * An outage is logged once when it starts and once when it ends; in between
 * every call fails fast until the next reconnect attempt is due (backoff
 * 0.1 s doubling to 5 s). Nothing here ever exits the process.
 *
 * Connection types. As Redis's connection.h does, an rconn_t carries a
 * table of functions, its type (rconn_type_t), and the rconn_* functions
 * below are a thin front: rconn.c keeps what every type shares (the
 * reconnect with backoff, the outage log lines, the round of a script
 * loaded on NOSCRIPT) and forwards the rest to c->type. There are two:
 *   - rnode_type (rnode.c): one server, reached over TCP, a Unix socket or
 *     TLS, found through Sentinel or configured;
 *   - rconn_cluster_type (rconn_cluster.c): Redis Cluster. Its nodes are
 *     single-server connections driven through rnode.h directly, not
 *     through the front, so they neither back off nor log on their own.
 * rconn_new picks the type from the settings (cluster = [...] or not). The
 * layering is one-way: rconn.c calls both types, rconn_cluster.c calls
 * rnode.c, and rnode.c calls neither. A type's functions report failure
 * with last_error set and never drop: the front drops (rconn_drop), so the
 * outage is logged and backed off the same way whatever the type.
 *
 * Return codes: 0 (RC_OK) for success, negative for failure: RC_ERR, or
 * RC_SIGNAL when a wait was cut short by the caller's signal fd.
 */
#ifndef QPOOL_RCONN_H
#define QPOOL_RCONN_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

#include "redis/redis_conf.h"

typedef struct rconn rconn_t;

/* The functions of one connection type. A type's functions are called by
 * the front only (rconn.c), which has checked what it says below. */
typedef struct rconn_type {
    /* Make / free the type's own state (rconn_new, rconn_free); may be NULL. */
    void (*init)(rconn_t *c);
    void (*release)(rconn_t *c);
    /* Connect (not connected): 0, or -1 with last_error set. */
    int (*connect)(rconn_t *c);
    /* Close the connection (connected or not); c->ctx becomes NULL. */
    void (*close)(rconn_t *c);
    /* Queue one command (connected). */
    void (*append)(rconn_t *c, int argc, const char **argv, const size_t *lens);
    /* Send what is queued (connected): 0, or -1 with last_error set. */
    int (*send)(rconn_t *c);
    /* Send what is queued and read the next reply (connected): RC_OK,
     * RC_SIGNAL, or RC_ERR with last_error set. */
    int (*read)(rconn_t *c, int sigfd, int timeout_ms, redisReply **out);
    /* rconn_describe, rconn_slot_node, rconn_confirm_primary (may be
     * NULL: nothing to confirm, 0). */
    void (*describe)(const rconn_t *c, char *buf, size_t n);
    int (*slot_node)(const rconn_t *c, int slot);
    int (*confirm_primary)(rconn_t *c);
} rconn_type_t;

struct rconn {
    const rconn_type_t *type;
    char *name;
    redis_conf_t conf;          /* private copy */
    redisContext *ctx;
    bool in_outage;
    int64_t next_attempt_ms;    /* monotonic */
    int64_t up_since_ms;        /* when the current connection was made (monotonic), 0 if none */
    int backoff_ms;
    char last_error[256];
    uint64_t round_trips;       /* batches sent and waited on (benchmarks) */
    uint64_t connects;          /* connections made; every one after the first is a reconnect */
    /* issue 12: TLS (rtls.c) and Sentinel */
    struct ssl_ctx_st *ssl_ctx; /* made at the first TLS connect, kept */
    struct ssl_st *ssl;         /* TLS: the session on ctx->fd; ctx then only formats and parses */
    char cur_host[256];         /* where we connect: the configured host, or the primary Sentinel named */
    int cur_port;
    int sentinel_good;          /* the sentinel that answered last: asked first */
    bool quiet;                 /* no outage log lines (qpool check --connect, sentinel lookups) */
    struct rconn *watch;        /* rconn_confirm_primary's sentinel connection, kept; NULL until used */
    int watch_k;                /* which sentinel it is */
    struct rcluster *cl;        /* cluster = [...]: the nodes and slot map (rconn_cluster.c); NULL otherwise */
};

enum { RC_OK = 0, RC_ERR = -1, RC_SIGNAL = -2 };

rconn_t *rconn_new(const redis_conf_t *rc);
/* Connections made after the first (qpool_redis_reconnects_total). */
uint64_t rconn_reconnects(const rconn_t *c);
void rconn_free(rconn_t *c);
/* Wipe and free every copy of its passwords (its own settings, its
 * Sentinel watch's, its Cluster nodes'), touching nothing else: for a
 * forked child that will never use it (a native worker and the master's
 * connections). */
void rconn_wipe_secrets(rconn_t *c);
/* "NAME (HOST:PORT)", "NAME (SOCKET)" or "NAME (MASTER at HOST:PORT via Sentinel)". */
void rconn_describe(const rconn_t *c, char *buf, size_t n);

/* Whether this is a Redis Cluster connection (commands are routed by key
 * slot; a multi-key command or script must keep to one slot). */
static inline bool rconn_is_cluster(const rconn_t *c) { return c->cl != NULL; }

/* Which server answers for a key's slot now: on a cluster an index of its
 * node (-1 unknown), always 0 otherwise. Replies from one server come in
 * order; from two, one can be lost to the other's failure (worker.c). */
int rconn_slot_node(const rconn_t *c, int slot);

/* Connect if not connected and a reconnect attempt is due. 0 when usable. */
int rconn_ensure(rconn_t *c);
/* Milliseconds until the next reconnect attempt may run (0 if now). */
int64_t rconn_retry_in_ms(const rconn_t *c);
/* Behind Sentinel, on a live connection: does a sentinel (one, on a
 * connection kept for it) still name this server as the primary? During a
 * failover the old primary answers as a primary until the sentinels demote
 * it, seconds after they named the new one; writes it takes meanwhile are
 * lost. When the sentinel names another server the connection is closed
 * (logged), and the next use connects to the one named. 1: closed, 0: the
 * same server or nothing to check (no Sentinel, not connected), -1: the
 * sentinel could not tell (the connection is kept; another one is asked
 * next time). */
int rconn_confirm_primary(rconn_t *c);
/* Drop the connection after an error: starts (or continues) an outage. */
void rconn_drop(rconn_t *c, const char *why);
/* Close the connection quietly (a reply we will not wait for); the next
 * rconn_ensure reconnects at once. */
void rconn_close(rconn_t *c);

/* Queue one command (argv form, binary-safe) without sending it. */
void rconn_append(rconn_t *c, int argc, const char **argv, const size_t *lens);
/* Flush queued commands and read one reply. With sigfd >= 0, returns
 * RC_SIGNAL if sigfd became readable first (the reply stays outstanding:
 * call rconn_read again, or drop). timeout_ms < 0 means the connection's
 * own timeout. On RC_ERR the connection is dropped. */
int rconn_read(rconn_t *c, int sigfd, int timeout_ms, redisReply **out);

/* Send what is queued without waiting for the replies (read them later with
 * rconn_read, in order). RC_ERR: the connection was dropped. */
int rconn_send(rconn_t *c);

/* append + read, no signal interruption. NULL on error (connection dropped).
 * A Redis error reply is returned as a reply of type REDIS_REPLY_ERROR. */
redisReply *rconn_call(rconn_t *c, int argc, const char **argv, const size_t *lens);

/* Script helper: EVALSHA, loading the script on NOSCRIPT. */
typedef struct {
    const char *body;
    char sha[41];
} rscript_t;
void rscript_init(rscript_t *s, const char *body);
/* Append an EVALSHA for s (numkeys keys first in argv; lens NULL: each
 * argument is a C string, its length its strlen). */
void rconn_append_script(rconn_t *c, const rscript_t *s, int numkeys, int argc, const char **argv,
                         const size_t *lens);
/* Run a script and read the reply, reloading it once on NOSCRIPT (lens as
 * rconn_append_script's). */
int rconn_script(rconn_t *c, const rscript_t *s, int numkeys, int argc, const char **argv,
                 const size_t *lens, int sigfd, int timeout_ms, redisReply **out);

#endif
