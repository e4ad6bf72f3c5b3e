/*
 * minute.h - the last minute of a queue's jobs, sliding (pure): six
 * 10-second slots of waits and counts, so "p95 wait over the last minute"
 * and "failures in the last minute" can be read at any time. The alerts
 * read it (alerts.h); the master feeds it from its workers' stats.
 */
#ifndef QPOOL_MINUTE_H
#define QPOOL_MINUTE_H

#include <stdint.h>

#include "observe/metrics.h"

#define MINUTE_SLOTS 6
#define MINUTE_SLOT_MS 10000

typedef struct {
    int64_t slot_id[MINUTE_SLOTS];   /* now_ms / MINUTE_SLOT_MS of what the slot holds */
    histogram_t wait[MINUTE_SLOTS];
    uint64_t finished[MINUTE_SLOTS], failed[MINUTE_SLOTS];
} minute_t;

/* Add at now_ms (any monotonic ms clock) waits and attempts. */
void minute_add(minute_t *m, int64_t now_ms, const histogram_t *wait, uint64_t finished, uint64_t failed);
/* What the slots of the last minute hold at now_ms. */
void minute_sum(const minute_t *m, int64_t now_ms, histogram_t *wait, uint64_t *finished, uint64_t *failed);

#endif
