/*
 * prom.h - a master's status as Prometheus metrics (pure: no I/O, no clock).
 *
 * prom_render() reads the JSON the master's status command returns with
 * "raw": true and writes the text exposition format (0.0.4): build info,
 * jobs by pool, queue, class and outcome, runtime and wait histograms by
 * pool and queue (every class and outcome merged, in seconds), queue
 * lengths (once per queue name: a queue two pools watch is one Redis list),
 * workers by state, worker exits by reason, Redis reconnects, whether
 * each pool is paused, and each fleet-budgeted pool's budget, slots held
 * (here and by the fleet), whether it waits for budget and its failed lease
 * renewals. Each family is written once, contiguous, with its
 * # HELP and # TYPE, and only if it has a sample. Members that are missing
 * or of the wrong type are skipped, so a status from an older or newer
 * master renders what it can.
 */
#ifndef QPOOL_PROM_H
#define QPOOL_PROM_H

#include <cjson/cJSON.h>

#include "core/util.h"

/* Append the exposition of status to out. 0, or -1 (out unchanged) if
 * status is not an object with a "pools" array. */
int prom_render(const cJSON *status, sbuf_t *out);

#endif
