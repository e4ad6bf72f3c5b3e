/*
 * budgeting.h - the master's side of the fleet budget (pools with
 * fleet_max_processes): each balance pass, after the queue counts and
 * before the balancer, one lease script per such pool (pipelined, one round
 * trip per Redis connection: lease.h) claims or renews this host's slots;
 * budget.h's decisions then bound what the balancer may give the pool, and
 * the processes pool.c may run under it (busy, retiring and rolling ones
 * alike: each child carries its lease's tag). A pool that loses its lease
 * (Redis unreachable) stops growing and shrinks to its floor before the
 * lease lapses; shrinking is pool.c's: idle workers first, a busy one after
 * its job. A lease whose pool a reload removed, renamed or moved to another
 * connection or prefix keeps the slots its children run in (claiming
 * nothing) until the last one exits, then is released. Its state (the
 * leases, the last view of each) is its own struct budgeting, behind
 * m->budgeting.
 */
#ifndef QPOOL_BUDGETING_H
#define QPOOL_BUDGETING_H

#include <cjson/cJSON.h>

#include "master/balancer.h"
#include "master/master.h"

/* One pass: b[i] describes pools[i] (as monitor.c filled it for the
 * balancer; removed pools are not among them, but their children still
 * count); room[i] (NULL: none) is what max_workers leaves pools[i], the
 * balancer's result without the budget. The budgeted ones get their bounds
 * (min, max, pinned) lowered to what the lease allows, and pool.c's cap on
 * their processes (pool_set_fleet). */
void budgeting_pass(master_t *m, pool_t **pools, bal_pool_t *b, const int *room, int n, int64_t now_ms);
/* What pool p may run now (INT_MAX without a budget). */
int budgeting_cap(const master_t *m, const pool_t *p);
/* The pool's budget for status (NULL without one): budget, held, share,
 * holders, waiting. brief: the few members a heartbeat record carries. */
cJSON *budgeting_pool_json(const master_t *m, const pool_t *p, bool brief);
/* Release every lease at once (graceful stop). */
void budgeting_goodbye(master_t *m);
void budgeting_free(master_t *m);

#endif
