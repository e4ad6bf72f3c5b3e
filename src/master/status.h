/*
 * status.h - the master's state as JSON (status.c). Both return a new
 * object with "ok": true that the caller owns.
 */
#ifndef QPOOL_STATUS_H
#define QPOOL_STATUS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "master/master.h"

/* Pools, queues and (STATUS_VERBOSE) every child: the `qpool status`
 * reply. STATUS_RAW adds what /metrics needs: each job-stats entry's
 * histogram buckets ("hist", as jobstat_counts_json), each pool's exits by
 * kind and the Redis reconnect count. */
enum { STATUS_VERBOSE = 1, STATUS_RAW = 2 };
cJSON *status_json(master_t *m, unsigned flags);
/* The jobs still running while the master stops (terminate --wait). */
cJSON *status_progress_json(master_t *m, const char *event);

/* This master's heartbeat record for the fleet view (fleet.h). */
cJSON *status_fleet_record(master_t *m, const char *id);

#endif
