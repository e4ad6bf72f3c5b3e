/*
 * config.h - the qpool configuration: parsed from a libconfig file, fully
 * validated, with every default filled in, before anything starts.
 *
 * Validation collects every problem as "FILE:LINE: message"; callers print
 * them and exit 78 (EX_CONFIG). Unknown keys are errors, with a suggestion
 * when a known key is close, because a typo must never silently do nothing.
 * The pool settings cascade: built-in defaults, then the `defaults` group,
 * then the pool's own group.
 *
 * config.c loads, validates and prints; pool_conf.c holds one pool's
 * settings as a value (copy, free, compare); config_app.c fills a pool from
 * its Laravel app. config.c calls config_app.c, never the other way round.
 */
#ifndef QPOOL_CONFIG_H
#define QPOOL_CONFIG_H

#include "config/limits.h"
#include <stdbool.h>

#include "core/log.h"
#include "redis/redis_conf.h"
#include <stdio.h>
#include <sys/types.h>

#define QPOOL_EX_CONFIG 78
#define QPOOL_MAX_WORKERS_LIMIT 1024
#define QPOOL_FLEET_BUDGET_LIMIT 1000000 /* fleet_max_processes */
#define QPOOL_MAX_PREFETCH 64      /* jobs a native worker may pop in one call */
#define QPOOL_DEFAULT_CONFIG "/etc/qpool/qpool.conf"

/* redis_conf_t, a connection's settings, is redis/redis_conf.h's. */

/* alerts = { ... } (the rules: observe/alerts.h) */
#define ALERTS_CRASHES_MAX 1000          /* the largest crash_loop_crashes accepted */

typedef struct {
    char *queue;
    double seconds;                      /* 0 = off for that queue */
} alert_wait_rule_t;

typedef struct {
    double long_wait_s;                  /* default for every queue; 0 = off */
    alert_wait_rule_t *waits;            /* per-queue overrides (the first match wins) */
    int nwaits;
    double failure_rate;                 /* 0 < r <= 1 turns it on; 0 = off */
    int failure_min_jobs;                /* fewer finished jobs in the minute never alert (20) */
    int crash_loop_crashes;              /* crashes within the window that make a loop (5; 0 = off) */
    int crash_loop_window_s;             /* (300) */
    int clear_after_s;                   /* how long a condition must stay false to resolve (60) */
} alerts_conf_t;

/* Everything off but crash_loop (5 in 300 s); clear after 60 s. */
void alerts_conf_defaults(alerts_conf_t *c);
/* Free the overrides (their queue names too), then the defaults again. */
void alerts_conf_free(alerts_conf_t *c);

/* One setting read from a Laravel app, for `qpool check`. */
typedef struct {
    char *key;
    char *value;           /* as shown: a password is "(redacted)" */
    char *source;          /* "config/queue.php", "environment (REDIS_PORT)", "qpool.conf", ... */
} conf_origin_t;

enum balance_mode { BALANCE_OFF = 0, BALANCE_AUTO = 1 };
enum auto_strategy { STRATEGY_TIME = 0, STRATEGY_SIZE = 1 };
enum handler_type { HANDLER_NONE = 0, HANDLER_EXEC = 1, HANDLER_PIPE = 2 };
/* pipe handler protocol: auto = start with the version 2 layout (protocol on
 * fds 3/4) and fall back to version 1 (stdin/stdout) if the handler says
 * ready on stdout */
enum handler_proto { HANDLER_PROTO_AUTO = 0, HANDLER_PROTO_1 = 1, HANDLER_PROTO_2 = 2 };

typedef struct {
    char *name;
    char *value;
} env_var_t;

typedef struct {
    char *name;
    char **queues;         /* NULL-terminated */
    int nqueues;
    int line;              /* of its group in qpool.conf */

    /* size */
    enum balance_mode balance;
    int processes;
    int min_processes, max_processes;
    enum auto_strategy auto_strategy;
    double target_wait;
    double scale_down_delay;
    int priority;
    int fleet_max_processes;   /* workers in all across the fleet's pools of this name; 0: no budget */

    /* Laravel queue options, names as in queue:work */
    char *connection;          /* redis connection name */
    char *queue_connection;    /* Laravel queue connection name, e.g. "redis" */
    char *cache_connection;    /* redis connection of Laravel's cache store */
    char *cache_prefix;        /* Laravel cache prefix incl. separator, e.g. "laravel_cache:" */
    char *restart_key;         /* "" disables polling of queue:restart */
    bool laravel_pause;        /* honour illuminate:queue:paused:<conn>:<queue> */
    bool agent_signals;        /* `laravel`, preloaded, cache store not Redis: the app agent reads the signals */
    int tries;
    int *backoff;
    int nbackoff;
    int timeout;
    int retry_after;
    int memory;                /* MB */
    double sleep;
    int max_jobs;
    int max_time;
    double rest;
    int migration_batch;
    int prefetch;               /* jobs popped per call (native workers); 1 = one at a time */
    bool app_driver;            /* the app's own queue driver pops and runs jobs in the PHP handler (worker/appdriver.h) */
    bool job_log;

    /* what each child runs: exactly one of handler / command */
    enum handler_type handler_type;
    char **handler_command;
    double handler_start_timeout;
    enum handler_proto handler_protocol;
    char **command;            /* template argv, placeholders unexpanded */
    bool preload;              /* PHP adapter: boot the app once in a zygote and fork handlers (default true) */

    char *user;
    char *group;
    char *working_directory;
    env_var_t *env;
    int nenv;
    int nice;

    /* a Laravel app the settings are read from (config_app.c) */
    char *laravel;             /* app path, NULL: none */
    char *laravel_where;       /* "FILE:LINE" of the laravel key */
    char **php;                /* argv prefix running PHP, default ["php"] */
    char **silenced;           /* job classes whose done records are marked silenced (Horizon's), or NULL */
    char **silenced_tags;      /* tags that do the same, or NULL */
    char *php_adapter;         /* qpool-handler.php as php sees it; NULL: the installed one */
    char *php_root;            /* the directory php sees as / (a chroot prefix), NULL: / */
    bool force;                /* take jobs while the app is down for maintenance */
    char *laravel_version;
    char *down_file;           /* maintenance (file driver): exists = down */
    char *down_connection;     /* maintenance (cache driver): redis connection... */
    char *down_key;            /* ...and the key without the redis prefix */
    conf_origin_t *origins;    /* what was read from the app and from where */
    int norigins;

    /* resolved */
    uid_t uid;
    gid_t gid;
    bool has_uid, has_gid;
} pool_conf_t;

/* What a local request (see docs/api.md, "Who may read what") reads
 * without the token: nothing but /healthz and the dashboard's files;
 * also the aggregates (/metrics, /api/metrics, /api/status and /api/fleet
 * without per-worker detail); or everything (a single-user box). */
typedef enum { HTTP_READ_NONE, HTTP_READ_AGGREGATES, HTTP_READ_ALL } http_read_t;
_Static_assert(sizeof(http_read_t) == sizeof(int), "http_conf_wire.c reads read_without_token as an int");

/* The HTTP endpoint (master/http_endpoint.c, http/http_server.c): off unless listen is set. */
typedef struct {
    char *listen;              /* "host:port", "[v6]:port" or an absolute Unix socket path; NULL: off */
    char *token_file;          /* read by the master at start (never logged) */
    char *token_env;
    char *user;                /* the HTTP process's user when the master is root (default nobody) */
    int socket_mode;           /* a Unix socket's mode */
    int max_connections;
    int timeout;               /* seconds a connection may stay idle */
    int header_timeout;        /* seconds a connection has to send a whole request once it waits for one */
    char *connection;          /* the Redis connection read for fleet, history and jobs */
    char *base_path;           /* the path prefix a reverse proxy serves us under ("/qpool"), or NULL */
    http_read_t read_without_token; /* default aggregates; http_conf_wire.c carries it as an int */
    int legacy_read;           /* read_only_without_token (deprecated): -1 unset, else 0/1 */
    char *socket_group;        /* a Unix listener's group, so that e.g. a proxy's user may connect */
    /* resolved */
    bool is_unix, loopback;
    gid_t socket_gid;          /* with socket_group */
    /* a Unix listener's "local" peers: the control socket's rule (root,
     * qpool's user, control_user, control_group) */
    uid_t owner_uid, control_uid;
    gid_t control_gid;
    bool has_control_uid, has_control_gid;
    char host[64];             /* numeric address */
    int port;
} http_conf_t;

typedef struct {
    char *path;
    char *pid_file;
    char *control_socket;
    int control_socket_mode;
    char *control_user;        /* besides root and qpool's own user */
    char *control_group;
    int max_workers;
    int metrics_job_classes;   /* job classes counted by name per pool; the rest: "other" */
    int metrics_retention;     /* seconds the minute history is kept in Redis */
    bool metrics;              /* workers report their jobs (counts, histograms, records); false: none of it */
    int job_history_size;      /* recent job records kept in Redis per connection; 0: off */
    double job_history_sample; /* share of done/released attempts recorded (failures: all) */
    bool job_history_payloads; /* done jobs' payloads too */
    int monitored_tag_retention; /* seconds a monitored tag's records are kept after its last one */
    int monitored_tag_jobs;    /* records kept per monitored tag */
    int batch_jobs_keep;       /* batches whose jobs are listed in Redis (batchjobs.h); 0: off */
    double shutdown_timeout;
    enum log_level log_level;
    enum log_format log_format;
    int failed_limit;
    double balance_interval;
    double fleet_lease_ttl;    /* seconds a fleet budget lease lives without renewal (master/budget.h) */
    http_conf_t http;
    alerts_conf_t alerts;      /* qpool.alerts (observe/alerts.h) */
    char **alerts_command;     /* argv run with each event's JSON on stdin; NULL: none */
    char *alerts_user;         /* its user when the master is root (default nobody) */

    redis_conf_t *redis;
    int nredis;
    bool redis_off;            /* `redis = false;`: qpool.conf says it names no Redis */
    bool no_redis;             /* no Redis at all (config_load): qpool's own state kept in Redis (job and
                                * minute history, the fleet view) is off and the master connects to none */
    pool_conf_t *pools;
    int npools;
    limit_conf_t *limits;      /* the top-level `limits` list (config/limits.h) */
    int nlimits;
} qconf_t;

/* Error list produced by config_load. */
typedef struct {
    char **msgs;
    int n;
    char **warnings;
    int nwarn;
} conf_errors_t;

/* True if the HTTP endpoint settings differ (the HTTP process restarts). */
bool http_conf_same(const http_conf_t *a, const http_conf_t *b);

/* Load and validate. Returns NULL and fills errs on any error. */
qconf_t *config_load(const char *path, conf_errors_t *errs);
void config_free(qconf_t *c);
void conf_errors_free(conf_errors_t *e);
void conf_errors_print(const conf_errors_t *e, FILE *f);

/* The control socket path of a config file, read leniently (the rest of the
 * file may be invalid: `qpool status` must work while a bad edit waits to be
 * fixed). Falls back to the default path. Caller frees. */
char *config_control_socket(const char *path);

/* The path to use: explicit, else $QPOOL_CONFIG, else the default. */
const char *config_path(const char *explicit_path);

/* Print the effective config (defaults filled in) in libconfig syntax. */
void config_print(const qconf_t *c, FILE *f);

const redis_conf_t *config_redis(const qconf_t *c, const char *name);
/* Every queue the pools on a connection list, once each, in config order:
 * NULL-terminated, the caller frees (free_strv). */
char **config_connection_queues(const qconf_t *conf, const char *connection);
const pool_conf_t *config_pool(const qconf_t *c, const char *name);
int config_pool_index(const qconf_t *c, const char *name);

/* Is the pool's handler the PHP adapter (an argument named qpool-handler.php)? */
bool pool_runs_adapter(const pool_conf_t *p);
/* Does it preload: the adapter, preload on, protocol 2 (pure). */
bool pool_preloads(const pool_conf_t *p);
/* An app_driver pool that preloads: its queue sizes come from its app agent
 * (master/agent.h), not from Redis. */
bool pool_agent_sizes(const pool_conf_t *p);

/* Why the pool needs a Redis (a sentence), or NULL when it runs without
 * one: its app's driver pops, its signals come through its app agent. */
const char *pool_needs_redis(const pool_conf_t *p);

/* Expand a pool's command template; returns a NULL-terminated argv. */
char **config_expand_command(const pool_conf_t *p);

/* True if two pools differ in anything but their size settings. */
bool pool_conf_same_except_size(const pool_conf_t *a, const pool_conf_t *b);
bool pool_conf_same_size(const pool_conf_t *a, const pool_conf_t *b);

/* Deep copy / free of one pool's settings (pool_conf.c, as are the
 * comparisons above and the origins' copy / free). */
void pool_conf_copy(pool_conf_t *dst, const pool_conf_t *src);
void pool_conf_free(pool_conf_t *p);
void conf_origins_free(conf_origin_t *o, int n);
conf_origin_t *conf_origins_dup(const conf_origin_t *o, int n);
/* Wipe and free every connection's passwords but keep's (NULL: all), and
 * every pool's environment (names and values): for a config the process
 * will never connect or start a pool with again. */
void config_wipe_secrets(qconf_t *c, const char *keep);
/* In a native worker after its fork (security review 2026-11-27 m3): wipe
 * and free the passwords of every connection but own's (connection and
 * cache_connection), and every pool's environment in c (the worker runs
 * own, its pool's copy, which keeps its own). */
void config_wipe_secrets_but(qconf_t *c, const pool_conf_t *own);
/* Wipe and free a pool's environment (names and values). */
void pool_conf_wipe_env(pool_conf_t *p);

/* Format a backoff list as "1,2,4" into buf. */
void config_backoff_str(const pool_conf_t *p, char *buf, size_t n);

#endif
