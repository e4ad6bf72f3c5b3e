/*
 * balancer.h - how many workers each pool should have. Pure: no I/O, no
 * clocks of its own; the master feeds it a snapshot once per
 * balance_interval and applies the targets (unit-tested and simulated in
 * tests/unit/test_balancer.c).
 *
 * Per pool (balance = "auto"):
 *   want = ceil(rate x runtime + backlog x runtime / target_wait)   (time)
 *   want = busy + backlog                                          (size, or
 *          when no runtime has been observed yet)
 *   clamped to [min_processes, max_processes] and never below the busy count.
 * Up at once (min to max in one pass on a large backlog); down only after the
 * wanted number has stayed lower for scale_down_delay seconds. A paused pool
 * is never scaled up. Across pools the sum stays within max_workers minus the
 * children still stopping: every pool keeps its minimum and what it runs (up
 * to what it wants), then growth is shared: pools get what
 * they want in priority order (higher first), pools of equal priority
 * sharing in proportion to their backlog (time).
 */
#ifndef QPOOL_BALANCER_H
#define QPOOL_BALANCER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    /* settings */
    bool auto_mode;
    int processes;          /* balance = off */
    int min, max;
    bool size_strategy;
    double target_wait;     /* seconds */
    double scale_down_delay;/* seconds */
    int priority;
    int pinned;             /* qpool scale: fixed target, -1 = none */
    bool paused;
    /* observations */
    int live;               /* children alive and not stopping */
    int busy;
    int stopping;
    int64_t backlog;        /* ready jobs on unpaused queues */
    double runtime_s;       /* mean job runtime, 0 = unknown */
    double rate;            /* jobs per second completed recently */
    /* state carried between passes */
    int target;
    int64_t below_since_ms; /* 0 = wanted is not below target */
    /* output */
    int want;               /* before the max_workers budget */
} bal_pool_t;

/* One pass over all pools; updates target and below_since_ms. */
void balance(bal_pool_t *pools, int n, int max_workers, int64_t now_ms);

/* The unconstrained number of workers a pool wants right now. */
int balance_want(const bal_pool_t *p);

#endif
