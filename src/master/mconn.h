/*
 * mconn.h - the master's own Redis connections, one per connection name
 * the config lists, opened when first asked for (mconn.c). The monitor
 * counts queues and writes heartbeats on them, the fleet budget takes its
 * leases on them, status reports their reconnects. A reload drops them
 * (the config may have changed them); they open again on first use.
 *
 * The master's loop must stay responsive (signals, the control socket, the
 * watchdog) even when Redis hangs: these connections never wait longer
 * than MCONN_TIMEOUT_S.
 */
#ifndef QPOOL_MCONN_H
#define QPOOL_MCONN_H

#include <stdint.h>

#include "master/master.h"
#include "redis/rconn.h"

#define MCONN_TIMEOUT_S 0.5

/* The master's connection of that name, opened (not connected) on first
 * use; NULL: the config has no connection of that name, or no Redis at all
 * (qconf_t.no_redis). */
rconn_t *mconn_get(master_t *m, const char *name);
/* Close every connection (after a reload), keeping their reconnect count. */
void mconn_drop_all(master_t *m);
/* Reconnects of the master's own Redis connections since it started. */
uint64_t mconn_reconnects(const master_t *m);
/* On a cluster: note the queues the pools list on connection c (name), so
 * that their failed jobs stay listed after no pool lists them (failed.c).
 * Once per connect: a reload makes new connections. */
void mconn_note_queues(master_t *m, rconn_t *c, const char *name);
void mconn_free(master_t *m);
/* In a forked native worker, which never uses them: wipe every copy of the
 * passwords these connections hold (rconn_wipe_secrets); nothing is closed
 * (their descriptor numbers may be the child's own by now). */
void mconn_wipe_secrets(master_t *m);

#endif
