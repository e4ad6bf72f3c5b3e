/*
 * limiting.h - the master's view of the fleet-wide limits (issue 33): each
 * balance pass it reads every limit's state in Redis (slots in use, tokens,
 * jobs held back and for how long) for `qpool status`, the API and
 * /metrics. The limits themselves are enforced by the workers' pop
 * (worker/wlimits.h, redis/qlimit.h).
 */
#ifndef QPOOL_LIMITING_H
#define QPOOL_LIMITING_H

#include <cjson/cJSON.h>

#include "master/master.h"

/* Read every limit's state (one read-only script each, on the connection of
 * the first native pool it applies to). */
void limiting_poll(master_t *m);
/* The "limits" array of the status: each limit with its state (null
 * members when not read). */
cJSON *limiting_json(const master_t *m);
void limiting_free(master_t *m);

#endif
