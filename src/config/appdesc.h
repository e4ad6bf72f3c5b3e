/*
 * appdesc.h - a Laravel app's queue, Redis, cache and maintenance settings,
 * read from the app itself (`laravel = "/srv/app";` in a pool).
 *
 * The PHP adapter boots the app and prints them as JSON
 * (`php qpool-handler.php --describe APP`, php/src/Describe.php). qpool runs
 * that command as the pool's user, with the pool's environment, a time limit
 * and a cap on its output (appdesc_run_batch: every app of a config load at
 * once, collected in one poll loop), and parses the output strictly as
 * untrusted input (appdesc_parse: known fields only, every one type- and
 * range-checked). Each value carries where it came from ("config/queue.php",
 * "environment (REDIS_PORT)", ".env (REDIS_PASSWORD)", ...). The password is
 * kept in memory only: never logged, never printed.
 */
#ifndef QPOOL_APPDESC_H
#define QPOOL_APPDESC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include "config/config.h"

#define APPDESC_MAX_OUTPUT (64 * 1024)   /* bytes of JSON accepted from the describer */
#define APPDESC_TIMEOUT_S 20             /* seconds one config load's describes may take, together */
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
    app_val_t queue_driver;    /* the queue connection's driver; absent (older adapters): redis */
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

/* One describe of a batch (appdesc_run_batch). */
typedef struct {
    char *const *argv;          /* in: the php prefix, the adapter and its arguments */
    const pool_conf_t *pool;    /* in: run as this pool would run a child */
    int rc;                     /* out: 0, or -1 with the reason in err */
    char *out;                  /* out: stdout when rc == 0 (caller frees) */
    size_t outlen;
    char err[512];              /* out: a one-line reason when rc < 0 */
} appdesc_job_t;

/* Run every job at once, each as its pool would run a child: its user (when
 * qpool is root), environment, nice and working directory; stdin /dev/null.
 * One poll loop collects them all, at most timeout_s in all (they start
 * together), and pings the systemd watchdog while it waits (sdnotify.h: a
 * no-op unless the master set it up). A job is done once its direct child
 * has exited: what it wrote is read then, whoever still holds its pipes (a
 * grandchild that left its process group). Then, or at the deadline, or past
 * APPDESC_MAX_OUTPUT bytes of stdout (an error), its process group is
 * killed. Returns how many jobs answered (rc == 0). */
int appdesc_run_batch(appdesc_job_t *jobs, int n, int timeout_s);

/* One job (appdesc_run_batch): 0 with the output in *out (caller frees), or
 * -1 with a one-line reason in err (the exit status and the last line the
 * command wrote to stderr). */
int appdesc_run(char *const *argv, const pool_conf_t *p, int timeout_s, char **out, size_t *outlen,
                char *err, size_t errn);

/* Pure: where a describe being collected stands. */
typedef enum {
    APPDESC_WAIT,      /* running: go on collecting */
    APPDESC_ANSWERED,  /* its direct child exited: read what is there and stop */
    APPDESC_TIMED_OUT, /* the deadline passed first */
    APPDESC_TOO_LONG,  /* stdout passed APPDESC_MAX_OUTPUT */
} appdesc_step_t;
appdesc_step_t appdesc_step(bool exited, bool over, int64_t now_ms, int64_t deadline_ms);

/* Pure: how long the collecting loop may sleep in poll: until the deadline,
 * the next watchdog ping (ping_due_ms, 0 none) or the next check for exited
 * children (tick_ms, 0 none: pidfds wake it), whichever comes first. */
int appdesc_wait_ms(int64_t now_ms, int64_t deadline_ms, int64_t ping_due_ms, int64_t tick_ms);

/* The adapter used when a pool does not name one: the installed copy
 * (QPOOL_DATADIR, then /usr/share/qpool), else the source tree's. */
const char *appdesc_default_adapter(void);

/* Pure: one line of stderr text made safe for a message: the last non-empty
 * line, control characters replaced, cut to n - 1 bytes. */
void appdesc_last_line(const char *text, size_t len, char *buf, size_t n);

#endif
