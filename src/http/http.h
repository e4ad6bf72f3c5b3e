/*
 * http.h - the HTTP endpoint (off unless qpool.http.listen is set).
 *
 * The master never parses HTTP. It binds the listener (a TCP address or a
 * Unix socket, created with the control socket's rules), then forks one
 * HTTP process that keeps only the listener, one end of a socket pair and
 * its settings, execs qpool itself (`qpool __http`: a fresh image, with
 * nothing of the master's memory), drops to http.user (nobody by default)
 * when the master is root, and serves with libmicrohttpd: requests bounded in size (headers 32 KB), time
 * (http.header_timeout to arrive, http.timeout of silence) and number
 * (http.max_connections, a quarter per address: http_conns.h). What the HTTP process
 * knows of the master it asks over the socket pair, which the master's
 * control loop serves as one more control client (the same request lines
 * and the same master verbs as `qpool status`/`qpool pause`); the rest
 * (fleet, history, jobs) it reads from Redis itself. A slow or hostile
 * client can hold its address's share of the HTTP process's connections,
 * never the master's loop. The master restarts the HTTP process if it dies (respawn.h
 * backoff) and when a reload changes qpool.http.
 */
#ifndef QPOOL_HTTP_H
#define QPOOL_HTTP_H

#include <stdbool.h>
#include <sys/types.h>

#include "http/http_conf_wire.h"
#include "master/master.h"

/* Master side (http.c). */
int http_start(master_t *m);            /* bind and spawn; 0 also when off */
bool http_reaped(master_t *m, pid_t pid, int status);  /* true if pid was the HTTP process */
void http_tick(master_t *m, int64_t now_ms);           /* respawn when due */
int64_t http_next_due(const master_t *m);              /* monotonic ms, 0 if nothing due */
/* Restart it for the new config; -1 (why in err, and logged) when the
 * config has an endpoint and it is now off. */
int http_reload(master_t *m, const qconf_t *old, char *err, size_t errn);
void http_close(master_t *m);                          /* stop it and close the listener */

/* The HTTP process (http_main.c): `qpool __http`, the image the master's
 * fork execs, with the listener as fd 3, the channel as fd 4 and its
 * settings (http_conf_wire.h) on fd 5. Returns the exit status. */
#define HTTP_LISTEN_FD 3
#define HTTP_CTL_FD 4
#define HTTP_CONF_FD 5
#define HTTP_SUBCOMMAND "__http"
/* The seals of fd 5 (F_SEAL_*: nothing can change it once it is given) */
#define HTTP_CONF_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
int http_main(int argc, char **argv);

/* Serve until SIGTERM (http_server.c), on listen_fd with the master's
 * channel ctl_fd, as w says. Returns the exit status. */
int http_serve(const http_wire_t *w, int listen_fd, int ctl_fd);

#endif
