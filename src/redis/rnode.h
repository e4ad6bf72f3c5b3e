/*
 * rnode.h - one connection to one Redis server: connect (TCP, a Unix
 * socket or TLS, rtls.c), the handshake (AUTH, SELECT, and ROLE behind
 * Sentinel), the Sentinel lookup of the primary, and sending and reading
 * on that one server, waited on with poll(2) so that a signal on sigfd
 * wakes a caller at once.
 *
 * It is the plain connection type (rnode_type, rconn.h) and the building
 * block of the Cluster type (rconn_cluster.c: one rnode per primary, and
 * one for each CLUSTER SLOTS asked of a seed). Nothing here reconnects,
 * backs off or logs an outage: that is the front's (rconn.c), for every
 * type. On failure these functions set c->last_error and leave the
 * connection as it is, unless they say they close it.
 */
#ifndef QPOOL_RNODE_H
#define QPOOL_RNODE_H

#include "redis/rconn.h"

/* The connection type of a single server. */
extern const rconn_type_t rnode_type;

/* A connection (not connected) with a private copy of rc, of rnode_type. */
rconn_t *rnode_new(const redis_conf_t *rc);
/* Close and free; also its kept sentinel connection and TLS context. */
void rnode_free(rconn_t *c);

/* Resolve the primary (Sentinel), connect and shake hands: 0, or -1 with
 * last_error set and the connection closed. */
int rnode_connect(rconn_t *c);
/* Close the connection: the TLS session first (redisFree closes the fd). */
void rnode_close(rconn_t *c);
/* Queue one command (connected only). */
void rnode_append(rconn_t *c, int argc, const char **argv, const size_t *lens);
/* Send what is queued: 0, or -1 with last_error set. */
int rnode_send(rconn_t *c);
/* Send what is queued and read one reply: RC_OK, RC_SIGNAL (sigfd
 * readable first; the reply stays outstanding) or RC_ERR (last_error set).
 * timeout_ms < 0: the connection's timeout. */
int rnode_read(rconn_t *c, int sigfd, int timeout_ms, redisReply **out);
/* Connect if not connected, send one command, read its reply. The reply,
 * or NULL with last_error set and the connection closed. */
redisReply *rnode_call(rconn_t *c, int argc, const char **argv, const size_t *lens);

#endif
