/*
 * http_health.h - what /healthz says, kept in memory (http_health.c).
 *
 * A thread of its own checks, once a second, that the master's loop
 * answers a status request (over the channel, HTTP_CTL_TIMEOUT_MS at most)
 * and that Redis answers PING on a connection of its own (3 s timeout),
 * and keeps the outcome. /healthz reads that outcome and does no I/O: it
 * never waits behind another request, the Redis lock or the channel, so
 * libmicrohttpd's thread answers it at once whatever else is asked.
 *
 * The check's status requests are also the HTTP process's heartbeat: the
 * master kills and restarts an HTTP process it has not heard from for
 * HTTP_SILENT_MS (master/http_endpoint.c), so a stopped or hung one does
 * not keep the endpoint dark.
 */
#ifndef QPOOL_HTTP_HEALTH_H
#define QPOOL_HTTP_HEALTH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/http_api.h"
#include "redis/redis_conf.h"

#define HTTP_HEALTH_EVERY_MS 1000  /* how often the check runs */
#define HTTP_HEALTH_STALE_MS 10000 /* an outcome older than this: /healthz says the check is late */

typedef struct {
    pthread_mutex_t lock;      /* the outcome below; the stop flag */
    pthread_cond_t wake;
    bool stop;
    int64_t checked_ms;        /* when the last check ended (monotonic; 0: none yet) */
    bool master_ok;
    char state[16];            /* the master's: running, paused, stopping */
    bool redis_ok;
    char reason[300];          /* why Redis is not ok */
    http_ctx_t *api;           /* its channel to the master */
    rconn_t *rc;               /* its own connection: never the requests'; NULL: no Redis */
    pthread_t thread;
    bool running;
} http_health_t;

/* Check once, then every HTTP_HEALTH_EVERY_MS in a thread: 0, or -1 (no
 * thread: /healthz then says the check is late). redis NULL: no Redis at
 * all, only the master is asked. */
int http_health_start(http_health_t *hh, http_ctx_t *api, const redis_conf_t *redis);
void http_health_stop(http_health_t *hh);

/* /healthz from the last outcome, as of now (monotonic ms): no I/O. */
void http_health_reply(http_health_t *hh, int64_t now, http_reply_t *out);

#endif
