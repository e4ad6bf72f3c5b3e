/*
 * rconn_cluster.h - the Redis Cluster connection type (rconn.h): rconn.c
 * gives a connection with `cluster = [...]` this type's table. Internal to
 * rconn.
 *
 * A cluster rconn holds one single-server connection (rnode.h) per
 * primary, made from the slot map (CLUSTER SLOTS) at each connect. The map is asked of the known addresses
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

extern const rconn_type_t rconn_cluster_type;

/* Scripts are loaded on each node as it connects (rscript_init registers). */
void rcl_register_script(const rscript_t *s);
/* rconn_wipe_secrets for a Cluster connection's nodes. */
void rcl_wipe_secrets(rconn_t *c);

#endif
