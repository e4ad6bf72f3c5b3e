/*
 * rconn_cluster.h - Redis Cluster under an rconn (rconn.c calls these when
 * the connection has `cluster = [...]`). Internal to rconn.
 *
 * A cluster rconn holds one rconn per primary, made from the slot map
 * (CLUSTER SLOTS) at each connect. The map is asked of the known addresses
 * (the seeds, then every node seen), starting with the one that answered
 * last, each on a connection of its own: a seed is never a node, so a dead
 * seed or one that is a replica now costs nothing but its try. Only the
 * primaries the map names (or a redirection) are nodes, and all of them
 * must be reachable. Each appended command goes to the node owning its
 * key's slot (rcluster_command_key; keyless commands to the first node)
 * and a FIFO remembers where, so that rconn_read returns the replies in the
 * order the commands were appended, whichever nodes answered. MOVED
 * updates the slot's owner and resends there; ASK resends once with ASKING
 * first; NOSCRIPT loads the scripts on that node again and resends (an
 * EVALSHA refused so did not run); all bounded. Any node's error drops the
 * whole cluster connection (as one rconn drops), so callers see one
 * connection: it reconnects with backoff, rereads the slot map, and the
 * worker's journal of outcomes is written wherever the slots now live. The
 * replies other nodes owed are lost with it: the worker never sends a pop
 * in one batch with commands to another node (worker.c), so a pop's reply
 * is lost only with its own node, as on one server. CLUSTERDOWN, TRYAGAIN,
 * LOADING and MASTERDOWN replies count as such errors.
 * c->ctx is a placeholder context whose only use is its identity (one per
 * connection: callers compare it to know the connection is the same).
 */
#ifndef QPOOL_RCONN_CLUSTER_H
#define QPOOL_RCONN_CLUSTER_H

#include "redis/rconn.h"

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
/* The node serving a slot now (an index; -1 unknown). */
int rcl_slot_node(const struct rcluster *cl, int slot);
/* The slot a command's key maps to, -1 for none (tests, bench). */
int rcl_command_slot(int argc, const char **argv, const size_t *lens);

/* Scripts are loaded on each node as it connects (rscript_init registers). */
void rcl_register_script(const rscript_t *s);

#endif
