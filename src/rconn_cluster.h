/*
 * rconn_cluster.h - Redis Cluster under an rconn (rconn.c calls these when
 * the connection has `cluster = [...]`). Internal to rconn.
 *
 * A cluster rconn holds one rconn per primary, made from the slot map
 * (CLUSTER SLOTS, asked of a seed or a node seen before) at each connect.
 * Each appended command goes to the node owning its key's slot
 * (rcluster_command_key; keyless commands to the first node) and a FIFO
 * remembers where, so that rconn_read returns the replies in the order the
 * commands were appended, whichever nodes answered. MOVED updates the
 * slot's owner and resends there; ASK resends once with ASKING first;
 * redirections are bounded. Any node's error drops the whole cluster
 * connection (as one rconn drops), so callers see one connection: it
 * reconnects with backoff, rereads the slot map, and the worker's journal
 * of outcomes is written wherever the slots now live. CLUSTERDOWN,
 * TRYAGAIN, LOADING and MASTERDOWN replies count as such errors.
 * c->ctx is a placeholder context whose only use is its identity (one per
 * connection: callers compare it to know the connection is the same).
 */
#ifndef QPOOL_RCONN_CLUSTER_H
#define QPOOL_RCONN_CLUSTER_H

#include "rconn.h"

struct rcluster *rcl_new(const rconn_t *c);
void rcl_free(struct rcluster *cl);
/* Read the slot map and connect to every primary: 0, or -1 with last_error set. */
int rcl_connect(rconn_t *c);
/* Close every node connection and forget what was pending. */
void rcl_disconnect(rconn_t *c);
void rcl_append(rconn_t *c, int argc, const char **argv, const size_t *lens);
int rcl_send(rconn_t *c);
int rcl_read(rconn_t *c, int sigfd, int timeout_ms, redisReply **out);
void rcl_describe(const rconn_t *c, char *buf, size_t n);
/* The slot a command's key maps to, -1 for none (tests, bench). */
int rcl_command_slot(int argc, const char **argv, const size_t *lens);

/* Scripts are loaded on each node as it connects (rscript_init registers). */
void rcl_register_script(const rscript_t *s);

#endif
