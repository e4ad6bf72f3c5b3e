/*
 * pool_conf.c - one pool's settings as a value: deep copy, free and compare
 * (config.h), and its app-read origins (conf_origin_t). Both the loader
 * (config.c) and the app description (config_app.c) use it; it uses neither.
 */
#include "config/config.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

#include <stddef.h>

/* The pool's own strings and NULL-terminated string vectors (NULL: unset),
 * listed once for the free and the copy. */
#define F(f) offsetof(pool_conf_t, f)
static const size_t POOL_STRS[] = {
    F(name), F(connection), F(queue_connection), F(cache_connection), F(cache_prefix), F(restart_key),
    F(user), F(group), F(working_directory), F(laravel), F(laravel_where), F(php_adapter), F(php_root),
    F(laravel_version), F(down_file), F(down_connection), F(down_key),
};
static const size_t POOL_STRVS[] = {F(queues), F(handler_command), F(command), F(php), F(silenced), F(silenced_tags)};
#undef F

#define FIELD(p, off, T) ((T *)(void *)((char *)(p) + (off)))

void pool_conf_free(pool_conf_t *p)
{
    for (size_t i = 0; i < ARRAY_LEN(POOL_STRS); i++) free(*FIELD(p, POOL_STRS[i], char *));
    for (size_t i = 0; i < ARRAY_LEN(POOL_STRVS); i++) free_strv(*FIELD(p, POOL_STRVS[i], char **));
    free(p->backoff);
    for (int i = 0; i < p->nenv; i++) {
        free(p->env[i].name);
        free(p->env[i].value);
    }
    free(p->env);
    conf_origins_free(p->origins, p->norigins);
}

void pool_conf_copy(pool_conf_t *dst, const pool_conf_t *src)
{
    *dst = *src;
    for (size_t i = 0; i < ARRAY_LEN(POOL_STRS); i++) {
        char **s = FIELD(dst, POOL_STRS[i], char *);
        *s = *s ? xstrdup(*s) : NULL;
    }
    for (size_t i = 0; i < ARRAY_LEN(POOL_STRVS); i++) {
        char ***v = FIELD(dst, POOL_STRVS[i], char **);
        *v = *v ? strv_dup(*v) : NULL;
    }
    dst->backoff = xmalloc(sizeof(int) * (size_t)src->nbackoff);
    memcpy(dst->backoff, src->backoff, sizeof(int) * (size_t)src->nbackoff);
    dst->env = src->nenv ? xcalloc((size_t)src->nenv, sizeof *dst->env) : NULL;
    for (int i = 0; i < src->nenv; i++) {
        dst->env[i].name = xstrdup(src->env[i].name);
        dst->env[i].value = xstrdup(src->env[i].value);
    }
    dst->origins = conf_origins_dup(src->origins, src->norigins);
}

void conf_origins_free(conf_origin_t *o, int n)
{
    for (int i = 0; i < n; i++) {
        free(o[i].key);
        free(o[i].value);
        free(o[i].source);
    }
    free(o);
}

conf_origin_t *conf_origins_dup(const conf_origin_t *o, int n)
{
    if (!n) return NULL;
    conf_origin_t *d = xcalloc((size_t)n, sizeof *d);
    for (int i = 0; i < n; i++) {
        d[i].key = xstrdup(o[i].key);
        d[i].value = xstrdup(o[i].value);
        d[i].source = xstrdup(o[i].source);
    }
    return d;
}

/* ---------------------------------------------------------------- compare */

bool pool_conf_same_size(const pool_conf_t *a, const pool_conf_t *b)
{
    /* Only the settings the pool's mode uses: a change of defaults.processes
     * does not touch an auto pool. */
    if (a->balance != b->balance) return false;
    if (a->balance == BALANCE_OFF) return a->processes == b->processes;
    return a->min_processes == b->min_processes && a->max_processes == b->max_processes &&
           a->auto_strategy == b->auto_strategy && a->target_wait == b->target_wait &&
           a->scale_down_delay == b->scale_down_delay && a->priority == b->priority &&
           a->fleet_max_processes == b->fleet_max_processes;
}

bool pool_conf_same_except_size(const pool_conf_t *a, const pool_conf_t *b)
{
    if (!str_eq(a->name, b->name) || !strv_eq(a->queues, b->queues)) return false;
    if (!str_eq(a->connection, b->connection) || !str_eq(a->queue_connection, b->queue_connection) ||
        !str_eq(a->cache_connection, b->cache_connection) || !str_eq(a->cache_prefix, b->cache_prefix) ||
        !str_eq(a->restart_key, b->restart_key) || a->laravel_pause != b->laravel_pause ||
        a->agent_signals != b->agent_signals)
        return false;
    if (a->tries != b->tries || a->timeout != b->timeout || a->retry_after != b->retry_after ||
        a->memory != b->memory || a->sleep != b->sleep || a->max_jobs != b->max_jobs ||
        a->max_time != b->max_time || a->rest != b->rest || a->migration_batch != b->migration_batch ||
        a->prefetch != b->prefetch || a->job_log != b->job_log || a->nbackoff != b->nbackoff ||
        a->app_driver != b->app_driver)
        return false;
    if (memcmp(a->backoff, b->backoff, sizeof(int) * (size_t)a->nbackoff)) return false;
    if (a->handler_type != b->handler_type || !strv_eq(a->handler_command, b->handler_command) ||
        a->handler_start_timeout != b->handler_start_timeout || a->handler_protocol != b->handler_protocol ||
        !strv_eq(a->command, b->command))
        return false;
    if (!str_eq(a->user, b->user) || !str_eq(a->group, b->group) ||
        !str_eq(a->working_directory, b->working_directory) || a->nice != b->nice ||
        a->nenv != b->nenv)
        return false;
    for (int i = 0; i < a->nenv; i++)
        if (!str_eq(a->env[i].name, b->env[i].name) || !str_eq(a->env[i].value, b->env[i].value))
            return false;
    if (a->preload != b->preload || !strv_eq(a->silenced, b->silenced) || !strv_eq(a->silenced_tags, b->silenced_tags))
        return false;
    if (!str_eq(a->laravel, b->laravel) || a->force != b->force || !str_eq(a->down_file, b->down_file) ||
        !str_eq(a->down_connection, b->down_connection) || !str_eq(a->down_key, b->down_key))
        return false;
    return true;
}

/* The PHP adapter is the script qpool installs as qpool-handler.php (php_adapter may name
 * another copy of it, and tests start it by its path): any argument with that name. */
bool pool_runs_adapter(const pool_conf_t *p)
{
    if (p->handler_type != HANDLER_PIPE || !p->handler_command) return false;
    for (char **a = p->handler_command; *a; a++) {
        const char *slash = strrchr(*a, '/');
        if (!strcmp(slash ? slash + 1 : *a, "qpool-handler.php")) return true;
    }
    return false;
}

bool pool_preloads(const pool_conf_t *p)
{
    return p->preload && pool_runs_adapter(p) && p->handler_protocol != HANDLER_PROTO_1;
}

bool pool_agent_sizes(const pool_conf_t *p)
{
    return p->app_driver && pool_preloads(p);
}
