/*
 * minute.c - a sliding minute of waits and counts (see minute.h). Pure.
 */
#include "observe/minute.h"

#include <string.h>

static int slot_for(minute_t *m, int64_t now_ms)
{
    int64_t id = now_ms / MINUTE_SLOT_MS;
    int i = (int)(id % MINUTE_SLOTS);
    if (m->slot_id[i] != id) { /* a slot from a minute ago: start it over */
        memset(&m->wait[i], 0, sizeof m->wait[i]);
        m->finished[i] = m->failed[i] = 0;
        m->slot_id[i] = id;
    }
    return i;
}

void minute_add(minute_t *m, int64_t now_ms, const histogram_t *wait, uint64_t finished, uint64_t failed)
{
    int i = slot_for(m, now_ms);
    if (wait) hist_merge(&m->wait[i], wait);
    m->finished[i] += finished;
    m->failed[i] += failed;
}

void minute_sum(const minute_t *m, int64_t now_ms, histogram_t *wait, uint64_t *finished, uint64_t *failed)
{
    int64_t id = now_ms / MINUTE_SLOT_MS;
    memset(wait, 0, sizeof *wait);
    *finished = *failed = 0;
    for (int i = 0; i < MINUTE_SLOTS; i++) {
        if (m->slot_id[i] <= id - MINUTE_SLOTS || m->slot_id[i] > id) continue;
        hist_merge(wait, &m->wait[i]);
        *finished += m->finished[i];
        *failed += m->failed[i];
    }
}
