/*
 * mappdash.h - the dashboard's view of a pool's app failer (issue 30).
 *
 * The HTTP process's channel to the master answers each request at once,
 * so a request on the app's failer (mapp.h), answered by the pool's agent
 * later, cannot be awaited there. As for job batches (mbatches.h), the
 * master keeps a view: the lists of the last MAPPDASH_VIEWS queries looked
 * at (a page and its filters each; one nobody looked at for
 * MAPPDASH_FORGET_MS dropped), read again while someone looks (one list in
 * flight at a time: the view due, older than MAPPDASH_REFRESH_MS or never
 * read, read longest ago first; MAPPDASH_GAP_MS at least after a list of
 * another query, so that a reader cycling queries cannot keep the agent
 * scanning), and the answer of the last retry or forget. A look answers
 * from its query's list at once, "loading" until it is in; the page polls.
 */
#ifndef QPOOL_MAPPDASH_H
#define QPOOL_MAPPDASH_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "master/master.h"

#define MAPPDASH_REFRESH_MS 3000
#define MAPPDASH_FORGET_MS 10000        /* a view nobody looked at for this long is dropped */
#define MAPPDASH_GAP_MS 500             /* between a list's answer and the next list of another query */
#define MAPPDASH_LIST UINT64_MAX        /* the mapp client id of the dashboard's list requests */
#define MAPPDASH_ACT (UINT64_MAX - 1)   /* ... and of its retries and forgets */

/* Is client a dashboard request's (not a control client's)? */
bool mappdash_client(uint64_t client);
/* The snapshot of pool's app failer (a reply object) for list request
 * query (a failed mapp_req_t's json: its page and filters), from its own
 * view ("loading" until its list is in), a list queued when one is due
 * (mappdash_next); NULL
 * with err when the pool has no app agent. */
cJSON *mappdash_look(master_t *m, const char *pool, const char *query, int64_t now, char *err, size_t errn);
/* The view whose list to ask next: NULL while one is in flight, none is
 * due, or the one due asks another query than the last list, answered
 * less than MAPPDASH_GAP_MS before now (pure). */
agent_app_view_t *mappdash_next(agent_app_dash_t *d, int64_t now);
/* Queue req (a failed-retry or failed-forget mapp_req_t's json; taken) on the
 * pool: its answer is the snapshot's last_action. -1 with err. */
int mappdash_act(master_t *m, const char *pool, char *req, int64_t now, char *err, size_t errn);
/* An answer (JSON text) for dashboard client `client` of pool p. */
void mappdash_answered(pool_t *p, uint64_t client, const char *answer);
void mappdash_free(agent_app_dash_t *d);

#endif
