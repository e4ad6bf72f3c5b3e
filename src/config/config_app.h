/*
 * config_app.h - a pool's settings read from its Laravel app
 * (`laravel = "/srv/app";`), for config.c.
 *
 * config_load notes every pool's app (app_describe_note), describes them
 * all at once (app_describe_pending: the adapter's --describe mode, each run
 * as its pool's user, in parallel; appdesc.h), then app_apply turns
 * the description into the pool's defaults: every setting qpool.conf gives
 * explicitly (in the pool or in `defaults`) wins. The app's Redis
 * connections become redis connections of the config, under the app's own
 * names ("default", "cache") unless qpool.conf defines that name (then
 * qpool.conf's wins) or another app already took it with other settings
 * (then "<name>-<app directory name>"). Each value is recorded with its
 * source for `qpool check` (pool_conf_t.origins).
 */
#ifndef QPOOL_CONFIG_APP_H
#define QPOOL_CONFIG_APP_H

#include "config/appdesc.h"
#include "config/config.h"

/* Pool keys given in qpool.conf (the pool or defaults) that the app must not override. */
enum {
    EXPLICIT_CONNECTION = 1 << 0,
    EXPLICIT_QUEUE_CONNECTION = 1 << 1,
    EXPLICIT_CACHE_CONNECTION = 1 << 2,
    EXPLICIT_CACHE_PREFIX = 1 << 3,
    EXPLICIT_RESTART_KEY = 1 << 4,
    EXPLICIT_LARAVEL_PAUSE = 1 << 5,
    EXPLICIT_RETRY_AFTER = 1 << 6,
};

typedef struct app_cache app_cache_t;

/* Note that p's app is to be described (once per app, php command, user,
 * environment and queue connection: pools that share them share it). */
void app_describe_note(app_cache_t **cache, const pool_conf_t *p, bool explicit_queue_connection);
/* Describe every noted app not yet described, all at once
 * (appdesc_run_batch: APPDESC_TIMEOUT_S for them all). */
void app_describe_pending(app_cache_t *cache);

/* The description of p's app (described now, with every other noted one,
 * unless that was done). Returns 0 with *out (owned by the cache), or -1
 * with the reason in err. */
int app_describe(app_cache_t **cache, const pool_conf_t *p, bool explicit_queue_connection,
                 const app_desc_t **out, char *err, size_t errn);
void app_cache_free(app_cache_t *cache);

/* The argv that describes p's app (the php prefix, the adapter, --describe,
 * the app, and --connection when the queue connection is explicit). */
char **app_describe_argv(const pool_conf_t *p, bool explicit_queue_connection);

/* Pure: apply a description to p and c (see above). Warnings (settings qpool
 * cannot follow) are appended to *warn. */
void app_apply(qconf_t *c, pool_conf_t *p, unsigned explicit, const app_desc_t *d, char ***warn, int *nwarn);

/* `qpool check`: the pool's settings read from its app, one comment line
 * each (value, then source). */
void app_print_origins(const pool_conf_t *p, FILE *f, const char *indent);

#endif
