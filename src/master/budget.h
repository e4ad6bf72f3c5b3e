/*
 * budget.h - the fleet budget's decisions (pure: no I/O, no clocks of its
 * own; unit-tested in tests/unit/test_budget.c, exercised at scale by
 * tests/sim/budget_sim.c).
 *
 * A pool with fleet_max_processes = N shares N worker slots with every pool
 * of the same name on the same Redis. Each master holds a lease on some of
 * them (lease.c keeps the leases in Redis); this file decides what it asks
 * for and what it may run:
 *
 *   demand    what the pool would run with no budget: the balancer's want,
 *             at least its current target (scale_down_delay's hysteresis),
 *             at most max_processes; a pinned pool (qpool scale) its pin.
 *   pressure  how long its queues wait: backlog x mean runtime (ms of work
 *             waiting; 1 s per job while no runtime is known).
 *   share     the fair division of N over every live holder
 *             (budget_divide): floors (min_processes) first, then one slot
 *             at a time to the holder whose queues would still wait longest
 *             per worker, pressure / (share + 1), never past its demand.
 *   claim     the share, sent to the lease script, which grants it only out
 *             of free slots and never takes back a slot a worker still
 *             runs in.
 *   cap       what the pool may run, processes counted (busy, retiring and
 *             rolling ones alike): min(held, share), or, while the lease
 *             cannot be renewed, never more than it holds: min(target,
 *             held) at once, min(floor, held) after half the lease's TTL.
 *
 * Records come from Redis, which anyone with access to it can write: sums
 * are 64-bit and every loop is bounded by the holders and the budget.
 */
#ifndef QPOOL_BUDGET_H
#define QPOOL_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "master/balancer.h"
#include "redis/lease.h"

/* budget_host_t, one holder of a pool's budget, is the lease record's
 * decoding (redis/lease.h). */

/* Shares of budget for n holders (share[i]); returns the slots handed out. */
int budget_divide(const budget_host_t *h, int n, int budget, int *share);

/* me's share among the holders h (n of them, as a lease script reported
 * them: me's own record there, if any, is replaced by me). The budget is the
 * smallest any of them was configured with. */
int budget_share_of(const budget_host_t *h, int n, const budget_host_t *me);

/* The pool's demand (see above); pinned < 0: not pinned. max: the smaller
 * of max_processes and the budget; room: what the host's max_workers
 * leaves the pool (the balancer's result without the budget), so that no
 * host claims slots it cannot run. */
int budget_demand(int want, int target, int max, int pinned, int room);

/* ms of work waiting: backlog x runtime (1 s while unknown), bounded. */
int64_t budget_pressure(int64_t backlog, double runtime_s);

/* What the pool may run. renewed: this pass's renewal succeeded; held: the
 * slots the script recorded (the last known without a renewal); share: the
 * fair share (the last one without a renewal); failing_ms: how long
 * renewals have failed (monotonic); target: what it runs now. */
typedef struct {
    bool renewed;
    int held, share;
    int64_t failing_ms, ttl_ms;
    int floor, target;
} budget_cap_in_t;
int budget_cap(const budget_cap_in_t *in);

/* After a pass's script (budgeting.c and the simulation alike): with a
 * renewal, in->share becomes me's share among the holders h (n of them, as
 * the script returned them; me carries the slots it now holds); then the
 * cap. */
int budget_settle(const budget_host_t *h, int n, const budget_host_t *me, budget_cap_in_t *in);

/* The balancer's bounds (min, max, pin, target) of a budgeted pool within
 * its cap. */
void budget_bound(bal_pool_t *x, int cap);

/* The index of id in h (n holders), -1 if absent. */
int budget_find(const budget_host_t *h, int n, const char *id);

#endif
