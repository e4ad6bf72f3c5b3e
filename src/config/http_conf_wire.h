/*
 * http_conf_wire.h - what the HTTP process is told, and nothing more.
 *
 * The master forks the HTTP process, which execs qpool itself (`qpool
 * __http`, http/http_main.c): a fresh image that holds none of the master's
 * memory. What it needs of the config comes as one JSON text on a sealed
 * memfd (its descriptor 5): qpool.http's serving settings (not its token
 * file, token variable, user or socket mode: the master's business), the
 * one Redis connection it reads (http.connection) with its passwords
 * resolved by the master (no password variable is passed on), the queues
 * of the pools on that connection (the failed store on a cluster), the
 * history limits, the log settings, the token, and whom to run as.
 *
 * The encoder takes only those fields, so nothing else of the config
 * (another connection's password, a pool's environment) can reach the
 * process. The decoder trusts nothing: every key known, every type and
 * range checked, a bounded size; an error names the field.
 *
 * Pure: no I/O but getenv (a password_env's value, in the master).
 * Unit-tested in tests/unit/test_http_conf_wire.c, fuzzed in
 * tests/fuzz/fuzz_http_conf_wire.c.
 */
#ifndef QPOOL_HTTP_CONF_WIRE_H
#define QPOOL_HTTP_CONF_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config/config.h"

/* How the master execs the HTTP process: `qpool __http` with the listener
 * as fd 3, the channel to the master's control loop as fd 4 and these
 * settings on fd 5, a memfd with these seals (F_SEAL_*: nothing can change
 * it once it is given). */
#define HTTP_LISTEN_FD 3
#define HTTP_CTL_FD 4
#define HTTP_CONF_FD 5
#define HTTP_SUBCOMMAND "__http"
#define HTTP_CONF_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

#define HTTP_WIRE_VERSION 1
#define HTTP_WIRE_MAX (4 << 20)        /* bytes of the text; a config needs far fewer */
#define HTTP_WIRE_LIST_MAX 100000      /* queues, sentinels, cluster seeds */
#define HTTP_WIRE_STR_MAX 65536        /* any one string */

typedef struct {
    pid_t parent;              /* the master: the death-signal check after the user switch */
    bool switch_user;          /* the master is root: become uid/gid (no other group) */
    uid_t uid;
    gid_t gid;
    enum log_level log_level;
    enum log_format log_format;
    /* of qpool.http: listen (also the process title), is_unix, loopback,
     * host, port, timeout, header_timeout, max_connections, base_path,
     * read_without_token and the Unix peer rule (owner_uid, control_uid,
     * control_gid); every other field is zero */
    http_conf_t http;
    /* http.connection: the password of password_env, password_file or the
     * app in password (password_env named only when the master found the
     * variable unset: the process then says so as the master would), and
     * the Sentinel's in sentinel.file_password likewise */
    redis_conf_t redis;
    char **queues;             /* of the pools on that connection, NULL-terminated */
    int metrics_retention;
    int job_history_size;
    bool no_redis;             /* qconf_t.no_redis: no Redis connection at all (redis stays unused) */
    char *token;               /* NULL: none */
} http_wire_t;
/* The tables of http_conf_wire.c read these as ints (W_INT). */
_Static_assert(sizeof(enum log_level) == sizeof(int) && sizeof(enum log_format) == sizeof(int),
               "http_conf_wire.c reads log_level and log_format as ints");

/* The master's side: w from c (qpool.http, http.connection, the queues,
 * the limits and log settings) and token (may be NULL). parent, the user
 * fields are the caller's. -1 when c has no connection of that name. */
int http_wire_from_config(http_wire_t *w, const qconf_t *c, const char *token);

/* The text (NUL-terminated, *len without it). It holds the token and the
 * password: the caller frees it with http_wire_text_free. Every copy made
 * on the way is wiped. */
char *http_wire_encode(const http_wire_t *w, size_t *len);
void http_wire_text_free(char *text, size_t len);

/* Parse text (len bytes, not necessarily NUL-terminated) into w. 0, or -1
 * with err ("http.port: a whole number in 0..65535 expected") and w
 * zeroed. What the parser copied is wiped before it is freed. */
int http_wire_decode(const char *text, size_t len, http_wire_t *w, char *err, size_t errn);

/* Free w, its token and passwords wiped first; w is zeroed. */
void http_wire_free(http_wire_t *w);

#endif
