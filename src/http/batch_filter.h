/*
 * batch_filter.h - the filters of GET /api/batches over the master's
 * snapshot (the newest MBATCHES_LIMIT batches of each pool, so bounded):
 * q (text in the name or the id, ASCII case ignored), status, and
 * since/until on created_at. Pure: no I/O, unit-tested.
 */
#ifndef QPOOL_BATCH_FILTER_H
#define QPOOL_BATCH_FILTER_H

#include <cjson/cJSON.h>
#include <stdbool.h>

typedef enum { BSTATUS_ANY, BSTATUS_PENDING, BSTATUS_FINISHED, BSTATUS_FAILED, BSTATUS_CANCELLED } bstatus_t;

/* A filter; NULL or 0: any. */
typedef struct {
    const char *q;
    bstatus_t status;
    long long since, until;        /* created_at in [since, until], unix seconds */
} bfilter_t;

/* "pending", "finished", "failed", "cancelled" (NULL or "": any); -1 when
 * none of them. */
int bfilter_status(const char *s);
/* Does a batch of the list (its JSON: name, id, failed, created_at,
 * finished_at, cancelled_at) pass f? cancelled: cancelled_at set;
 * finished: finished_at set and not cancelled; pending: neither set;
 * failed: one or more failed jobs, whatever else. */
bool bfilter_match(const bfilter_t *f, const cJSON *batch);
/* Drop from the array list the batches f does not pass; how many stay. */
int bfilter_apply(const bfilter_t *f, cJSON *list);

#endif
