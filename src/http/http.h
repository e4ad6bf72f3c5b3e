/*
 * http.h - the HTTP process (off unless qpool.http.listen is set): what
 * `qpool __http` runs. The master's side (the listener, the token, spawning
 * and respawning this process) is master/http_endpoint.h; the contract
 * between the two (descriptors, subcommand, settings) is
 * config/http_conf_wire.h.
 *
 * It serves with libmicrohttpd: requests bounded in size (headers 32 KB),
 * time (http.header_timeout to arrive, http.timeout of silence) and number
 * (http.max_connections, a quarter per address: http_conns.h). What it
 * knows of the master it asks over the socket pair, which the master's
 * control loop serves as one more control client (the same request lines
 * and the same master verbs as `qpool status`/`qpool pause`); the rest
 * (fleet, history, jobs) it reads from Redis itself. A slow or hostile
 * client can hold its address's share of the HTTP process's connections,
 * never the master's loop.
 */
#ifndef QPOOL_HTTP_H
#define QPOOL_HTTP_H

#include "config/http_conf_wire.h"

/* The HTTP process (http_main.c): `qpool __http`, the image the master's
 * fork execs, with the listener as fd 3, the channel as fd 4 and its
 * settings on fd 5 (HTTP_*_FD). Returns the exit status. */
int http_main(int argc, char **argv);

/* Serve until SIGTERM (http_server.c), on listen_fd with the master's
 * channel ctl_fd, as w says. Returns the exit status. */
int http_serve(const http_wire_t *w, int listen_fd, int ctl_fd);

#endif
