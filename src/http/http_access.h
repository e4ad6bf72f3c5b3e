/*
 * http_access.h - who may read what over HTTP (docs/api.md, "Who may read
 * what"): pure decisions, apart from the HTTP process's I/O and
 * unit-tested (tests/unit/test_http_access.c).
 *
 * A request is "local" when a loopback listener got it with a Host naming
 * this machine and no proxy's header (X-Forwarded-For, Forwarded,
 * X-Real-IP), or when a Unix listener's peer passes the control socket's
 * rule (root, qpool's user, control_user, control_group). Without the
 * token, a local request reads what http.read_without_token says; any
 * other request reads only /healthz and the dashboard's files.
 */
#ifndef QPOOL_HTTP_ACCESS_H
#define QPOOL_HTTP_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config/config.h"

/* What reading a path takes. */
typedef enum {
    HTTP_NEED_OPEN,            /* /healthz, the dashboard's files: anyone who can connect */
    HTTP_NEED_AGGREGATE,       /* counts, rates, histograms: no job of anyone's */
    HTTP_NEED_PRIVATE,         /* job records, payloads, exceptions, failed jobs */
} http_need_t;

#define HTTP_LOCAL 1
#define HTTP_NOT_LOCAL 0
#define HTTP_FOREIGN_HOST (-1) /* a loopback request naming another host (DNS rebinding) */

/* 200, 401 (the token is needed) or 403 (a foreign Host needs it). On 200,
 * *full says whether the reply may hold more than aggregates. */
int http_may_read(http_need_t need, http_read_t policy, bool token, int local, bool *full);

/* A Host header that only a request for this machine sends: an IP literal
 * (IPv6 between brackets) or localhost, with an optional port. */
bool http_local_host(const char *host);

/* A Unix listener's peer that the control socket would take. */
bool http_peer_local(const http_conf_t *h, uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups);

#endif
