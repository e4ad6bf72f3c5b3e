/*
 * status.h - the master's state as JSON (status.c). Both return a new
 * object with "ok": true that the caller owns.
 */
#ifndef QPOOL_STATUS_H
#define QPOOL_STATUS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "master.h"

/* Pools, queues and (verbose) every child: the `qpool status` reply. */
cJSON *status_json(master_t *m, bool verbose);
/* The jobs still running while the master stops (terminate --wait). */
cJSON *status_progress_json(master_t *m, const char *event);

/* This master's heartbeat record for the fleet view (fleet.h). */
cJSON *status_fleet_record(master_t *m, const char *id);

#endif
