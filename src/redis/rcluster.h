/*
 * rcluster.h - the pure parts of Redis Cluster support: a key's hash slot
 * (CRC16, hash tags), which argument of a command is its key, the CLUSTER
 * SLOTS reply, MOVED / ASK redirections, and grouping a pool's queues by
 * slot. The connections themselves are rconn's (rconn_cluster.c: a cluster
 * rconn holds one connection per node and routes each command by its key's
 * slot).
 */
#ifndef QPOOL_RCLUSTER_H
#define QPOOL_RCLUSTER_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#define RCLUSTER_SLOTS 16384
#define RCLUSTER_DEFAULT_PORT 6379

/* CRC16-CCITT (XMODEM), as Redis Cluster uses: "123456789" -> 0x31C3. */
uint16_t rcluster_crc16(const char *buf, size_t len);
/* The slot of a key: CRC16 of its hash tag (the part between the first '{'
 * and the next '}', if not empty), else of the whole key, mod 16384. */
int rcluster_key_slot(const char *key, size_t len);
/* Whether a key has a hash tag (a non-empty {...}). */
int rcluster_has_tag(const char *key, size_t len);

/* The argument holding a command's (first) key, or -1 for a command that
 * has none (PING, SCRIPT, INFO, TIME, EVAL with numkeys 0, ...). */
int rcluster_command_key(int argc, const char **argv, const size_t *lens);

typedef struct {
    int start, end;             /* inclusive */
    char host[256];
    int port;
} rcluster_range_t;

/* A CLUSTER SLOTS reply: the ranges and their primaries (*out allocated,
 * *n entries). 0, or -1 with err filled. */
int rcluster_parse_slots(const redisReply *r, rcluster_range_t **out, int *n, char *err, size_t errn);

enum rcluster_redirect { RCLUSTER_NOREDIR = 0, RCLUSTER_MOVED = 1, RCLUSTER_ASK = 2 };
/* "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": the kind, with
 * slot, host and port filled; RCLUSTER_NOREDIR for any other text. */
enum rcluster_redirect rcluster_parse_redirect(const char *err, int *slot, char *host, size_t hn, int *port);

/* Group queues (by their slots, in priority order) into runs of the same
 * slot: group[i] is queue i's group number (0, 1, ...), consecutive queues
 * of one slot share a group, so calling the groups in order keeps the
 * priority order exactly. Returns the number of groups. */
int rcluster_group_runs(const int *slots, int n, int *group);

#endif
