/*
 * alerting.h - the master's alerts (alerting.c): each balance pass, every
 * pool's and queue's last minute (minute.h), crash count and oldest ready
 * job go to the episode logic (alerts.h); each event is logged as a warning
 * and, with alerts.command set, given as one JSON line on the stdin of that
 * command (run as alerts.user, nobody by default when the master is root;
 * killed after 30 s; never waited for). See docs/operations.md.
 */
#ifndef QPOOL_ALERTING_H
#define QPOOL_ALERTING_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <sys/types.h>

#include "master/master.h"

void alerting_tick(master_t *m, int64_t now_ms);   /* after the pass's queue counts */
bool alerting_reaped(master_t *m, pid_t pid);       /* true if pid was an alert command */
bool alerting_wants_oldest(const qconf_t *c);       /* a long_wait threshold is set */
void alerting_free(master_t *m);
/* Log an event raised elsewhere (a limit's, limiting.c) and give it to
 * alerts.command, as the pass's own; ev is the caller's. */
void alerting_emit(master_t *m, cJSON *ev);

#endif
