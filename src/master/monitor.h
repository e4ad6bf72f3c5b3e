/*
 * monitor.h - the master's view of Redis: once per balance_interval it
 * fetches every pool's queue counts (one pipelined round trip per Redis
 * connection) and polls Laravel's queue:restart and queue:pause keys, then
 * runs the balancer and applies the targets. Redis trouble here never stops
 * the master: counts go stale, pools keep their sizes, and it retries.
 */
#ifndef QPOOL_MONITOR_H
#define QPOOL_MONITOR_H

#include <stdbool.h>
#include <stdint.h>

#include "master/master.h"
#include "redis/rconn.h"

/* The monitor's state is its own (monitor.c), behind m->mon. */
void monitor_reset(master_t *m);          /* after start and each reload */
/* Fetch counts, poll Laravel's keys and balance; due at m->next_balance_ms. */
void monitor_tick(master_t *m, int64_t now_ms);
/* While the master stops: only the fleet budget's leases, down to what the
 * children still finishing their jobs run. */
void monitor_tick_stopping(master_t *m, int64_t now_ms);
/* Every JOBWATCH_POLL_MS, whatever balance_interval: read the watched set
 * once per connection and publish its generation to the workers
 * (jobwatch.h, scoreboard.h watch_gen). */
void monitor_watch_tick(master_t *m, int64_t now_ms);
/* Pause (or resume) the pools whose Laravel app is down for maintenance;
 * monitor_tick does it each pass, the master once before its first spawn. */
void monitor_check_maintenance(master_t *m);
/* fd is a pool's app agent socket: its replies taken (true), else false. */
bool monitor_agent_event(master_t *m, int fd);
/* Remove this master's heartbeat record (graceful stop). */
void monitor_goodbye(master_t *m);
/* A pool's watched records still queued at the exit, batch
 * after batch until none is left, Redis does not answer JOBWATCH_TRIES
 * times running, or deadline_ms (mono_ms) passed; what is left is
 * dropped, logged. */
void monitor_drain_watched(master_t *m, pool_t *p, int64_t deadline_ms);
void monitor_free(master_t *m);

#endif
