/*
 * fleet.h - every master on a Redis connection, in one view.
 *
 * Each master publishes a heartbeat record (host, pid, version, config,
 * uptime, pools, workers by state, paused) under the connection's prefix,
 * once per balance pass, with a time to live of a few passes:
 *
 *   <prefix>qpool:master:<host>:<pid>   the record (JSON), PX ttl
 *   <prefix>qpool:masters               sorted set: id -> expiry (Redis ms)
 *
 * Times come from Redis (TIME inside the scripts), never from the hosts'
 * clocks, so clock skew cannot make a live master look dead. A master that
 * stops gracefully removes its record at once; one that is killed drops out
 * when its record expires. The index is trimmed on every write and read and
 * expires with the last record.
 */
#ifndef QPOOL_FLEET_H
#define QPOOL_FLEET_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "redis/rconn.h"

/* The record's id: "<host>:<pid>". */
void fleet_id(char *buf, size_t n);
/* Publish (or refresh) a record; 0 and Redis's clock (UNIX ms) in
 * *redis_now_ms, or -1 (Redis unavailable). */
int fleet_heartbeat(rconn_t *c, const char *id, const char *record_json, int64_t ttl_ms, int64_t *redis_now_ms);
/* Remove a record at once (graceful stop). */
int fleet_goodbye(rconn_t *c, const char *id);
/* Every live record, as {"now_ms":..., "masters":[...]} (caller frees), or
 * NULL when Redis is unavailable. */
cJSON *fleet_list(rconn_t *c);
/* Add {"totals":{"masters","paused_masters","workers","busy"}} to a list,
 * and "budgets": each fleet-budgeted pool's budget, held, want, masters and
 * waiting masters over the records. */
void fleet_add_totals(cJSON *fleet);
/* Every job running in a fleet_list answer, oldest first (caller frees):
 * [{"host","master","pool","pid","uuid","id","name","queue","attempt",
 * "age_ms","timeout_s","past_timeout","own"}]. A job's age is its
 * running_ms when its master wrote the record plus the time since (by
 * now_ms, at most a minute: the hosts' clocks may differ); own: its master
 * is own_id (the one an action here can reach). (pure) */
cJSON *fleet_running(const cJSON *fleet, const char *own_id);

#endif
