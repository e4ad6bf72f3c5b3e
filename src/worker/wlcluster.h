/*
 * wlcluster.h - the limited pop on a Redis Cluster (issue 33). The
 * single-Redis limited pop decides in one script over the queue's keys and
 * the limits' keys; on a Cluster those live in different hash slots. So a
 * pass here is: peek the head of each queue (LRANGE 0 look-1, in priority
 * order), take the first job none of whose limits is full, lease each of
 * its limits in the limit's own slot (qlimit_lease: the slot and the rate
 * token, atomically there), then pop that payload in the queue's slot
 * (queue.c's pick pop: LREM of those bytes, then the plain pop's reserve:
 * attempts + 1, :reserved), or, if another worker took it meanwhile, the
 * next payload peeked that falls under the same limits (the leases serve
 * any job under them). All of them gone: the leases are given back and the
 * pass starts again.
 * Round trips per job: 1 peek + 1 per limit of the job + 1 pop (the
 * outcomes are written before, not with, the pop).
 */
#ifndef QPOOL_WLCLUSTER_H
#define QPOOL_WLCLUSTER_H

#include "redis/qlimit.h"
#include "redis/queue.h"

/* Pop one job under the limits a->limits (a->slot_token names its slots)
 * from the queues of qs not in a->skip_mask. 1: out is filled (a job, a
 * poison payload moved aside, or empty: limit_blocked when ready jobs all
 * wait on full limits); 0: nothing to use (every queue skipped, or Redis
 * answered an error: the connection was dropped); -1: the connection was
 * lost. */
int wlcluster_pop(rconn_t *c, const queue_set_t *qs, const pop_args_t *a, pop_result_t *out);

/* Which queue's :notify gets back the token a BLPOP took (token_q: 1 + the
 * queue it came from, 0: not known) when the queues in held all wait on
 * limits: -1 for none. (pure) */
int wlcluster_token_back(uint32_t held, int token_q);

#endif
