/*
 * appdesc.h - a Laravel app's queue, Redis, cache and maintenance settings,
 * read from the app itself (`laravel = "/srv/app";` in a pool).
 *
 * The PHP adapter boots the app and prints them as JSON
 * (`php qpool-handler.php --describe APP`, php/src/Describe.php). qpool runs
 * that command as the pool's user, with the pool's environment, a time limit
 * and a cap on its output (appdesc_run), and parses the output strictly as
 * untrusted input (appdesc_parse: known fields only, every one type- and
 * range-checked). Each value carries where it came from ("config/queue.php",
 * "environment (REDIS_PORT)", ".env (REDIS_PASSWORD)", ...). The password is
 * kept in memory only: never logged, never printed.
 */
#ifndef QPOOL_APPDESC_H
#define QPOOL_APPDESC_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>
#include "config.h"

#define APPDESC_MAX_OUTPUT (64 * 1024)   /* bytes of JSON accepted from the describer */
#define APPDESC_TIMEOUT_S 20             /* seconds it may take (the master waits: keep well under WatchdogSec) */
#define APPDESC_MAX_REDIS 4              /* Redis connections one description names */

typedef struct {
    char *value;        /* NULL: null in the app's config */
    char *source;       /* "config/queue.php", "environment (REDIS_PORT)", ... */
    bool present;       /* the describer sent it */
} app_val_t;

typedef struct {
    char *name;         /* the Laravel Redis connection name */
    app_val_t host, port, socket, db, username, password, prefix;
} app_redis_t;

typedef struct {
    char *app;          /* the resolved app path */
    char *laravel;      /* version, may be NULL */
    app_val_t queue_connection, connection, queue, retry_after, block_for;
    app_val_t cache_store, cache_driver, cache_connection, cache_prefix;
    app_val_t down_driver, down_file, down_store, down_connection, down_prefix;
    app_redis_t redis[APPDESC_MAX_REDIS];
    int nredis;
} app_desc_t;

/* Pure: parse the describer's output. Returns 0, or -1 with a reason in err
 * (which never quotes a value: the output may hold a password). */
int appdesc_parse(const char *json, size_t len, app_desc_t *d, char *err, size_t errn);
void appdesc_free(app_desc_t *d);
/* The named Redis connection of a description, or NULL. */
const app_redis_t *appdesc_redis(const app_desc_t *d, const char *name);

/* Run argv (the php prefix, the adapter and its arguments) as the pool would
 * run a child: its user (when qpool is root), environment, nice and working
 * directory; stdin /dev/null. Waits at most timeout_s, keeps at most
 * APPDESC_MAX_OUTPUT bytes of stdout (more is an error). Returns 0 with the
 * output in *out (caller frees), or -1 with a one-line reason in err (the
 * exit status and the last line the command wrote to stderr). */
int appdesc_run(char *const *argv, const pool_conf_t *p, int timeout_s, char **out, size_t *outlen,
                char *err, size_t errn);

/* The adapter used when a pool does not name one: the installed copy
 * (QPOOL_DATADIR, then /usr/share/qpool), else the source tree's. */
const char *appdesc_default_adapter(void);

/* Pure: one line of stderr text made safe for a message: the last non-empty
 * line, control characters replaced, cut to n - 1 bytes. */
void appdesc_last_line(const char *text, size_t len, char *buf, size_t n);

#endif
