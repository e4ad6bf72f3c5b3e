/*
 * sdnotify.h - the systemd notification protocol (sd_notify(3)) without
 * linking libsystemd: one datagram to $NOTIFY_SOCKET per message.
 */
#ifndef QPOOL_SDNOTIFY_H
#define QPOOL_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

void sdn_init(void);                 /* reads NOTIFY_SOCKET / WATCHDOG_USEC */
int64_t sdn_watchdog_interval_ms(void);  /* 0 if no watchdog; else half of WatchdogSec */
void sdn_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* WATCHDOG=1 when the watchdog's interval (above) passed since *last_ms,
 * which then becomes now_ms: the master's loop, and work past it. */
void sdn_feed_watchdog(int64_t *last_ms, int64_t now_ms);

#endif
