/*
 * mappdash.h - the dashboard's view of a pool's app failer (issue 30).
 *
 * The HTTP process's channel to the master answers each request at once,
 * so a request on the app's failer (mapp.h), answered by the pool's agent
 * later, cannot be awaited there. As for job batches (mbatches.h), the
 * master keeps a snapshot: the page of the list last asked for (its
 * offset and filters: one query a pool), read again while someone looks
 * (each look older than MAPPDASH_REFRESH_MS, or asking another query,
 * queues a list), and the answer of the last retry or forget. A look
 * answers from it at once, "loading" until its query's list is in; the
 * page polls.
 */
#ifndef QPOOL_MAPPDASH_H
#define QPOOL_MAPPDASH_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "master/master.h"

#define MAPPDASH_REFRESH_MS 3000
#define MAPPDASH_LIST UINT64_MAX        /* the mapp client id of the dashboard's list requests */
#define MAPPDASH_ACT (UINT64_MAX - 1)   /* ... and of its retries and forgets */

/* Is client a dashboard request's (not a control client's)? */
bool mappdash_client(uint64_t client);
/* The snapshot of pool's app failer (a reply object) for list request
 * query (a failed mapp_req_t's json: its page and filters), a list queued
 * when it is old or answers another query ("loading" until then); NULL
 * with err when the pool has no app agent. */
cJSON *mappdash_look(master_t *m, const char *pool, const char *query, int64_t now, char *err, size_t errn);
/* Queue req (a failed-retry or failed-forget mapp_req_t's json; taken) on the
 * pool: its answer is the snapshot's last_action. -1 with err. */
int mappdash_act(master_t *m, const char *pool, char *req, int64_t now, char *err, size_t errn);
/* An answer (JSON text) for dashboard client `client` of pool p. */
void mappdash_answered(pool_t *p, uint64_t client, const char *answer);
void mappdash_free(agent_app_dash_t *d);

#endif
