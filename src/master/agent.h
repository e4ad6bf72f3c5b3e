/*
 * agent.h - the master's side of a pool's app agent.
 *
 * A pool that preloads the PHP app and needs what only the app can read
 * (pool_conf_t.agent_signals: Laravel's signals in a cache store that is not
 * Redis; pool_agent_sizes: the sizes of an app_driver pool's queues) has one
 * agent: a long-lived process forked by the pool's zygote
 * (php/src/Agent.php) that holds the booted app. The master asks for it by a
 * datagram "agent 1 MASTERPID" on the zygote's socket carrying one end of a
 * stream socket pair; it keeps the other end, non-blocking, in its epoll
 * set. The wire (one JSON line each way, one request in flight) is
 * agent_wire.h's. The master never blocks on it: a request unanswered within
 * its timeout, a reply that fails agent_wire_parse, or the end of the
 * socket drops the agent (the socket is closed: the agent exits at its end,
 * and with its zygote), and a new one is asked for after the respawn
 * backoff. A new pool generation (a new zygote) gets a new agent. The pid
 * the agent says is shown, never signalled: nothing a child writes is
 * trusted to name a process.
 */
#ifndef QPOOL_AGENT_H
#define QPOOL_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "master/agent_wire.h"
#include "master/respawn.h"

typedef struct {
    int fd;                       /* the master's end, -1: none */
    int epfd;                     /* the epoll set it is in */
    uint64_t gen;                 /* the pool generation (zygote) it was forked from */
    pid_t pid;                    /* what its hello said (shown only), 0: no hello yet */
    char laravel[64];
    uint64_t next_id;
    uint64_t pending_id;          /* the request in flight, 0: none */
    enum agent_op pending_op;
    int pending_nq;
    int64_t sent_ms, started_ms, not_before_ms;
    char *buf;                    /* bytes of a reply line not complete yet */
    size_t len;
    respawn_t respawn;
    unsigned restarts;            /* agents lost and asked for again */
    uint64_t replies;             /* replies taken, from every agent of the pool */
    bool warned;                  /* its last reply was an error, logged (monitor.c) */
    unsigned todo;                /* AGENT_WANT_* still to ask this pass, one at a time (monitor.c) */
    bool sizes_warned;            /* no queue sizes from it (down, or an error), logged once (monitor.c) */
} agent_t;

/* A pool's job batches as its agent last read them (mbatches.c); kept in
 * pool_t, apart from the agent's life (an agent closed or lost keeps them). */
typedef struct {
    char *json;                   /* the batches array (agent_reply_t.batches), NULL: none yet */
    int64_t at_ms, at_unix;       /* when it came (monotonic ms, wall s) */
    int skipped;                  /* batches left out of it (ids that are not ids) */
    char error[256];              /* the agent's last error for it ("": none) */
    int64_t wanted_until_ms;      /* someone looked: read them until then */
    char *retry;                  /* the batch being retried, NULL: none */
    int retry_step;               /* 1: ask batch-failed, 2: ask batch-retry, 0: waiting for a reply */
    char **retry_jobs;            /* step 2: the job ids the app's failer holds (heap) */
    int nretry_jobs;
    char **retry_known;           /* the batch's failed job ids in the list when it was asked: */
    int nretry_known;             /* nothing else the agent names is acted on (heap) */
    int forgotten, from_store, not_found; /* the retry's counts so far (qpool's failed store) */
    int64_t retry_sent_unix;      /* when it was asked (wall s) */
    int64_t retry_until_ms;       /* not over by then (monotonic ms): it ends with an error */
    char *last_retry;             /* the last retry's outcome (JSON object), NULL: none */
} agent_batches_t;
/* Free what it holds (the pool is freed). */
void agent_batches_free(agent_batches_t *b);

#define MAPP_QUEUE_MAX 8          /* control clients' requests waiting on one pool's agent (mapp.h) */
/* Who sent a request on the app's failer: its share of the queue (mapp_admit). */
typedef struct {
    uint64_t client;              /* the control client to answer (control_reply_to) */
    int32_t pid;                  /* the peer's process (SO_PEERCRED), 0: none */
    uint32_t uid;                 /* the peer's user */
    bool owner;                   /* root or qpool's own user */
    bool dash;                    /* the dashboard's own (mappdash.c), not a control client's */
    const char *act;              /* a retry or forget's op name (static), NULL: a read; for the log */
    int njobs;                    /* the ids act is asked on */
} agent_app_from_t;
typedef struct {
    agent_app_from_t from;        /* who asked, and whom to answer */
    char *req;                    /* the request object (JSON text, heap) */
    int64_t until_ms;             /* unanswered then: an error */
    uint64_t sent_id;             /* the agent request carrying it, 0: not sent yet */
    char *answer;                 /* done: the client's reply line (JSON text, heap), for control.c to send */
} agent_app_req_t;
typedef struct {
    agent_app_req_t v[MAPP_QUEUE_MAX];
    int n;
} agent_app_t;

#define MAPPDASH_VIEWS 4            /* the queries (pages, filters) the dashboard keeps a list of, a pool */
/* One query's list in the dashboard's view (mappdash.c). */
typedef struct {
    char *query;                  /* the list request (JSON text, heap), NULL: a free place */
    char *list;                   /* its newest answer (JSON object text, heap), NULL: none yet */
    int64_t at_unix;              /* when list was read (wall s) */
    int64_t listed_ms;            /* when list was read (monotonic ms), 0: to read again */
    int64_t looked_ms;            /* when someone last looked at it (monotonic ms) */
} agent_app_view_t;
/* The dashboard's view of one pool's app failer (mappdash.c): answered
 * from at once over HTTP, refreshed while someone looks. */
typedef struct {
    agent_app_view_t v[MAPPDASH_VIEWS];
    char *asking;                 /* the list request queued on the agent (heap), NULL: none */
    char *last_query;             /* the last list request answered (heap), NULL: none */
    char *last_action;            /* the last retry or forget's answer (heap), NULL: none */
    int64_t answered_ms;          /* when the last list was answered (monotonic ms) */
    bool acting;                  /* a retry or forget is queued on the agent */
} agent_app_dash_t;

#define AGENT_WANT_SIGNALS 1u     /* agent_t.todo: its pool's Laravel signals */
#define AGENT_WANT_SIZES 2u       /* agent_t.todo: its pool's queue sizes (app_driver) */
#define AGENT_WANT_BATCHES 4u     /* agent_t.todo: its app's job batches, or a batch-retry (mbatches.c) */
#define AGENT_WANT_APP 8u         /* agent_t.todo: a control client's request on the app's failer (mapp.c) */

void agent_init(agent_t *a);
/* Once a pass: drop an agent of an older generation or one whose request
 * is older than timeout_ms; ask zygote socket zfd (-1: none up) for one when
 * none runs and its backoff is over. */
void agent_maintain(agent_t *a, const char *pool, int zfd, uint64_t gen, int epfd, int64_t now, int64_t timeout_ms);
/* Send a request; -1 when there is no agent, it has not said hello yet, or
 * a request is in flight. */
int agent_ask(agent_t *a, const char *pool, enum agent_op op, const char *restart_key, const char *const *queues,
              int nq, int64_t now);
/* Send a passed-through request (a JSON object, agent_wire_app_request);
 * -1 as agent_ask. */
int agent_ask_app(agent_t *a, const char *pool, const char *req, int64_t now);
/* fd is its socket? */
bool agent_owns(const agent_t *a, int fd);
/* Its socket is readable: the replies to our requests into out (at most
 * max; the hello is taken here; the caller agent_reply_free()s each). Returns their count; on an end, an error
 * or a bad reply the agent is dropped (logged) and what came before counts. */
int agent_read(agent_t *a, const char *pool, agent_reply_t *out, int max, int64_t now);
/* Drop it (pool freed, or no longer wanted). */
void agent_close(agent_t *a);

#endif
