/*
 * monitor.h - the master's view of Redis: once per balance_interval it
 * fetches every pool's queue counts (one pipelined round trip per Redis
 * connection) and polls Laravel's queue:restart and queue:pause keys, then
 * runs the balancer and applies the targets. Redis trouble here never stops
 * the master: counts go stale, pools keep their sizes, and it retries.
 */
#ifndef QPOOL_MONITOR_H
#define QPOOL_MONITOR_H

#include <stdint.h>

#include "master.h"

void monitor_reset(master_t *m);          /* after start and each reload */
void monitor_tick(master_t *m, int64_t now_ms);
void monitor_free(master_t *m);

#endif
