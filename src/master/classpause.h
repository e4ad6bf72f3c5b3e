/*
 * classpause.h - pause by job class, across the fleet (issue 32 item 4):
 * `qpool pause --class X` writes X into <prefix>qpool:paused-classes (a
 * hash class -> {"by","host","at"}) on every Redis connection a native pool
 * uses; every worker on that Redis reads the hash each
 * QLIMIT_PAUSED_POLL_MS and holds X's jobs in their queues like a limit
 * with no room (redis/qlimit.h, worker/wlimits.h). The master reads the
 * hash each balance pass for `qpool status`, the API and /metrics.
 */
#ifndef QPOOL_CLASSPAUSE_H
#define QPOOL_CLASSPAUSE_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "master/master.h"

/* Classes paused at once, at most: every worker on the Redis reads them
 * each second and its pop looks at each for every job it considers, and
 * the master reads each one's held-back count each balance pass. A pause
 * that would pass it is refused; the status lists this many at most. */
#define CLASSPAUSE_MAX 100

/* Pause (on) or continue the classes; who says who asked (for the log and
 * the hash). Returns how many changed, or -1 with err (a bad name, more
 * than CLASSPAUSE_MAX paused, or no Redis took it). */
int classpause_set(master_t *m, char *const *classes, int n, bool on, const char *who, char *err, size_t errn);
/* The same in the named pools only (n x np entries "<class>@<pool>"), each
 * pool one of this master's; np 0: across the fleet (classpause_set). */
int classpause_set_in(master_t *m, char *const *classes, int n, char *const *pools, int np, bool on, const char *who,
                      char *err, size_t errn);
/* Read the paused classes (and the jobs each held back) from Redis. */
void classpause_poll(master_t *m);
/* The "paused_classes" array of the status. */
cJSON *classpause_json(const master_t *m);
void classpause_free(master_t *m);
/* A class name pause takes: 1..255 bytes, no control bytes, no '@' (it
 * names a pool in the hash: "<class>@<pool>"). */
bool classpause_name_ok(const char *s);

#endif
