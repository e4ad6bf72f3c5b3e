/*
 * respawn.h - when a process the master supervises is started again after
 * it exits (pure: no clock, no processes; unit-tested).
 *
 * A process that was healthy (lived RESPAWN_HEALTHY_MS, or did work) starts
 * with a clean slate. A clean exit (status 0, or 12 for the memory limit) is
 * replaced at once, unless it keeps exiting within RESPAWN_QUICK_MS without
 * doing any work: the RESPAWN_QUICK_LIMIT-th such exit in a row is treated
 * as a crash. A crash (any other status, a signal) waits, 1 s doubling to
 * RESPAWN_MAX_S, so a broken handler or config does not spin the CPU.
 */
#ifndef QPOOL_RESPAWN_H
#define QPOOL_RESPAWN_H

#include <stdbool.h>
#include <stdint.h>

#define RESPAWN_MAX_S 60
#define RESPAWN_HEALTHY_MS 30000
#define RESPAWN_QUICK_MS 1000
#define RESPAWN_QUICK_LIMIT 3

typedef struct {
    int backoff_s;           /* last backoff used, 0 = none */
    int quick_exits;         /* clean exits in a row that did no work, quickly */
} respawn_t;

typedef struct {
    int64_t lived_ms;
    bool clean;              /* exit 0 or the memory limit's 12 */
    bool did_work;           /* jobs done (a native worker), or as far as we can tell */
} exit_facts_t;

enum respawn_verdict {
    RESPAWN_NOW = 0,         /* a normal exit: start a new one at once */
    RESPAWN_QUICK_LOOP,      /* clean exits that did nothing, too many in a row: back off */
    RESPAWN_CRASHED,         /* back off */
};

/* Update st after an exit; *delay_s gets the seconds to wait before the
 * next start. Returns the verdict. */
enum respawn_verdict respawn_after_exit(respawn_t *st, const exit_facts_t *f, int *delay_s);

#endif
