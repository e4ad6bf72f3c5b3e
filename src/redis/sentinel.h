/*
 * sentinel.h - the pure parts of finding a primary through Redis Sentinel:
 * "host:port" addresses, and what a sentinel's and a server's replies say.
 * The asking itself is rnode's (rnode.c: resolve_primary).
 */
#ifndef QPOOL_SENTINEL_H
#define QPOOL_SENTINEL_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#define SENTINEL_DEFAULT_PORT 26379

/* "host:port", "[v6addr]:port", or a bare host (def_port). 0, or -1 with err
 * filled (empty host, bad or out-of-range port, unclosed bracket). */
int sentinel_parse_addr(const char *s, int def_port, char *host, size_t hn, int *port, char *err,
                        size_t errn);

/* A reply to SENTINEL get-master-addr-by-name: 1 with host and port filled,
 * 0 when the sentinel does not know the name (nil), -1 (err filled) for an
 * error reply or an unexpected shape. */
int sentinel_master_reply(const redisReply *r, char *host, size_t hn, int *port, char *err,
                          size_t errn);

/* A reply to ROLE: 1 if the server is a primary ("master"), 0 if not (role
 * filled: "slave", "sentinel"...), -1 for an error or an unexpected shape
 * (role gets the error text). */
int sentinel_role_reply(const redisReply *r, char *role, size_t rn);

#endif
