/*
 * control.h - the control socket: a Unix stream socket speaking
 * newline-delimited JSON, served by the master's event loop. Every request
 * is one JSON object on one line ({"cmd":"status"}, {"cmd":"pause",...});
 * every reply is one line {"ok":true,...} or {"ok":false,"error":"..."}.
 * Peers are checked with SO_PEERCRED: root, qpool's own user, control_user
 * and members of control_group are allowed; everyone else is refused.
 * Garbage, oversized or unknown requests get an error reply; nothing a
 * client sends can stop or block the master.
 */
#ifndef QPOOL_CONTROL_H
#define QPOOL_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "master.h"

int control_listen(master_t *m);
void control_event(master_t *m, int fd, uint32_t events);
void control_close(master_t *m, bool unlink_socket);
/* Periodic work: progress lines to terminate --wait clients. */
void control_tick(master_t *m, int64_t now_ms);
/* Called by the master when its last child is gone (terminate --wait). */
void control_notify_waiters(master_t *m);

#endif
