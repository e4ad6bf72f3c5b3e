/*
 * http_endpoint.h - the master's side of the HTTP endpoint (off unless
 * qpool.http.listen is set): the listener, the token and the HTTP
 * process's life (http_endpoint.c).
 *
 * The master never parses HTTP. It binds the listener (a TCP address or a
 * Unix socket, created with the control socket's rules), then forks one
 * HTTP process that keeps only the listener, one end of a socket pair and
 * its settings, execs qpool itself (`qpool __http`: a fresh image, with
 * nothing of the master's memory), drops to http.user (nobody by default)
 * when the master is root. What the HTTP process knows of the master it
 * asks over the socket pair, which the master's control loop serves as one
 * more control client (adopt: control_adopt, the same request lines and
 * the same master verbs as `qpool status`/`qpool pause`). The master
 * restarts the HTTP process if it dies (respawn.h backoff), when it has
 * sent nothing for HTTP_SILENT_MS (SIGSTOPped, or hung: killed first), and
 * when a reload changes qpool.http. The HTTP process itself is src/http/ (http.h).
 */
#ifndef QPOOL_HTTP_ENDPOINT_H
#define QPOOL_HTTP_ENDPOINT_H

#include <stdbool.h>
#include <sys/types.h>

#include "master/master.h"

/* Serve the master's end of a new HTTP process's socket pair (non-blocking)
 * as a control client: 0, or -1 (fd not taken: closed by the caller). */
typedef int (*http_adopt_fn)(master_t *m, int fd);

/* When the master last heard from the channel fd (monotonic ms; 0: never;
 * -1: no such channel): control_heard. */
typedef int64_t (*http_heard_fn)(master_t *m, int fd);

/* An HTTP process not heard from for this long (stopped, or hung) is
 * killed and started again: its health check writes once a second
 * (http/http_health.h). */
#define HTTP_SILENT_MS 30000

/* Bind and spawn; 0 also when off. adopt takes each HTTP process's channel
 * (control_adopt) and heard says when it last wrote (control_heard), for
 * this run of the master. */
int http_start(master_t *m, http_adopt_fn adopt, http_heard_fn heard);
bool http_reaped(master_t *m, pid_t pid, int status);  /* true if pid was the HTTP process */
void http_tick(master_t *m, int64_t now_ms);           /* respawn when due; kill a silent one */
int64_t http_next_due(const master_t *m);              /* monotonic ms, 0 if nothing due */
/* Restart it for the new config; -1 (why in err, and logged) when the
 * config has an endpoint and it is now off. */
int http_reload(master_t *m, const qconf_t *old, char *err, size_t errn);
void http_close(master_t *m);                          /* stop it and close the listener */
/* In a forked child that is not the HTTP process (a native worker): wipe
 * and free every copy of the token this process holds; nothing else. */
void http_forget_token(master_t *m);

#endif
