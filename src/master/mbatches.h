/*
 * mbatches.h - Laravel job batches (Bus::batch), read through the pools'
 * app agents (agent.h): the master keeps each pool's last list and serves
 * it (`qpool batches`, GET /api/batches), and sends queue:retry-batch.
 *
 * Read only while someone looks: a `batches` request marks every pool that
 * preloads a Laravel app (`laravel`, the adapter, preload) wanted for
 * MBATCHES_LOOK_MS; while wanted, its agent is kept up (one is asked of the
 * zygote when the pool has none for its signals or sizes) and asked for the
 * newest MBATCHES_LIMIT batches when the last list is MBATCHES_REFRESH_MS
 * old, one request in flight as every agent request. Nobody looking: no
 * request, and an agent that was up only for batches is closed.
 *
 * A retry (batch-retry ID) goes to the pool whose list holds the batch, in
 * two agent requests (docs/architecture.md, "Batches from it"):
 * batch-failed says which failed jobs the app's failer holds; the master
 * retries the others from qpool's failed store; then batch-retry has the
 * app push the held ones back as its queue:retry does, and the master
 * forgets qpool's records of those the app says it pushed. The outcome is
 * kept (last_retry) and the list read again at once.
 */
#ifndef QPOOL_MBATCHES_H
#define QPOOL_MBATCHES_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

#define MBATCHES_LOOK_MS 60000      /* a look keeps the lists read this long */
#define MBATCHES_REFRESH_MS 2000    /* a list this old is read again (while wanted) */
#define MBATCHES_LIMIT 50           /* batches read, newest first */
#define MBATCHES_RETRY_MS 60000     /* a retry not over by then ends with an error */

/* Can the pool read batches (a preloading Laravel pool, not removed)? */
bool mbatches_can(const pool_t *p);
/* Does it want its agent for batches now (someone looks, or a retry waits)? */
bool mbatches_wanted(const pool_t *p, int64_t now);
/* Ask its agent (up, idle) for what is due: a retry, or the list when it
 * is old; nothing else. */
void mbatches_ask(pool_t *p, int64_t now);
/* A reply to a batches or batch-retry request (the caller frees r). */
void mbatches_reply(master_t *m, pool_t *p, const agent_reply_t *r);
/* Someone looks: every pool that can read batches is wanted from now on,
 * and {"batches":[...each with "pool"...],"pools":[{"pool","state",...}]}
 * (caller frees). */
cJSON *mbatches_look(master_t *m, int64_t now);
/* batch-retry ID: queued for the pool whose list holds it (0, its name in
 * pool), or -1 (err: no such batch, or no pool reads batches). */
int mbatches_retry(master_t *m, const char *id, int64_t now, char *pool, size_t pn, char *err, size_t errn);

#endif
