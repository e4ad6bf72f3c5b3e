/*
 * config_app.c - see config_app.h.
 */
#include "config/config_app.h"
#include "os/child.h"
#include "config/pool_child.h"
#include "core/util.h"

#include "os/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define DOWN_KEY "illuminate:foundation:down"

/* ---------------------------------------------------------------- describe */

typedef struct app_entry {
    char *key;              /* argv, user, group, directory and environment */
    bool described;
    char **argv;            /* until described: what to run */
    pool_conf_t pool;       /* until described: as whom (a copy) */
    int rc;
    app_desc_t d;
    char err[512];
} app_entry_t;

struct app_cache {
    app_entry_t *v;
    int n;
};

char **app_describe_argv(const pool_conf_t *p, bool explicit_queue_connection)
{
    size_t np = strv_len(p->php);
    char **argv = xcalloc(np + 6, sizeof *argv);
    size_t n = 0;
    for (size_t i = 0; i < np; i++) argv[n++] = xstrdup(p->php[i]);
    argv[n++] = xstrdup(p->php_adapter ? p->php_adapter : appdesc_default_adapter());
    argv[n++] = xstrdup("--describe");
    argv[n++] = xstrdup(p->laravel);
    if (explicit_queue_connection) {
        argv[n++] = xstrdup("--connection");
        argv[n++] = xstrdup(p->queue_connection);
    }
    return argv;
}

/* Everything the description depends on, as one string. */
static char *cache_key(char *const *argv, const pool_conf_t *p)
{
    sbuf_t b;
    sbuf_init(&b);
    for (int i = 0; argv[i]; i++) sbuf_printf(&b, "%s\x1f", argv[i]);
    sbuf_printf(&b, "\x1e%s\x1f%s\x1f%s\x1f", p->user ? p->user : "", p->group ? p->group : "",
                p->working_directory ? p->working_directory : "");
    for (int i = 0; i < p->nenv; i++) sbuf_printf(&b, "%s=%s\x1f", p->env[i].name, p->env[i].value);
    return sbuf_steal(&b);
}

/* 0 when the pool's user can connect to the Unix socket at path: tried in a
 * child with the pool's credentials (a socket needs write permission, its
 * directories search permission). */
static int user_can_connect(const pool_conf_t *p, const char *path)
{
    child_spec_t cs;
    if (child_spec_pool(&cs, p, getpid(), SIGKILL, -1) < 0) return -1;
    pid_t pid = fork();
    if (pid != 0) child_spec_free(&cs);
    if (pid < 0) return -1;
    if (pid == 0) {
        if (child_setup(&cs) < 0) _exit(2);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof sa.sun_path) _exit(3);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        /* EAGAIN: a full backlog, but the way in was allowed */
        int ok = fd >= 0 && (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 || errno == EAGAIN);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The app's description comes from the pool's user: a root master never
 * connects to a Unix socket it names unless that user could connect to it
 * too (else the app could point root at a private Redis). */
static int check_app_sockets(const app_desc_t *d, const pool_conf_t *p, char *err, size_t errn)
{
    if (geteuid() != 0 || !p->has_uid || p->uid == 0) return 0;
    for (int i = 0; i < d->nredis; i++) {
        const char *path = d->redis[i].socket.value;
        if (!path || user_can_connect(p, path) == 0) continue;
        if (snprintf(err, errn,
                 "its Redis connection \"%.60s\" names the Unix socket %.200s, which the pool's user %.60s "
                 "cannot connect to: qpool (root) will not connect to it on the app's word; let that user "
                 "reach it, or define the connection in qpool.conf",
                 d->redis[i].name ? d->redis[i].name : "?", path, p->user ? p->user : "?") >= (int)errn)
            err[errn - 1] = '\0'; /* cut: it is a message */
        return -1;
    }
    return 0;
}

/* p's entry; a new one (to be described) when no pool had the same key. */
static app_entry_t *entry_for(app_cache_t **cache, const pool_conf_t *p, bool explicit_queue_connection)
{
    if (!*cache) *cache = xcalloc(1, sizeof **cache);
    app_cache_t *c = *cache;
    char **argv = app_describe_argv(p, explicit_queue_connection);
    char *key = cache_key(argv, p);
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].key, key)) {
            free(key);
            free_strv(argv);
            return &c->v[i];
        }
    c->v = xrealloc(c->v, sizeof *c->v * (size_t)(c->n + 1));
    app_entry_t *e = &c->v[c->n++];
    memset(e, 0, sizeof *e);
    e->key = key;
    e->argv = argv;
    pool_conf_copy(&e->pool, p);
    return e;
}

void app_describe_note(app_cache_t **cache, const pool_conf_t *p, bool explicit_queue_connection)
{
    entry_for(cache, p, explicit_queue_connection);
}

/* Parse and check what the describer answered; the entry's run state goes. */
static void conclude(app_entry_t *e, appdesc_job_t *j)
{
    e->rc = j->rc;
    if (e->rc < 0) snprintf(e->err, sizeof e->err, "%s", j->err);
    if (e->rc == 0) {
        char perr[256];
        e->rc = appdesc_parse(j->out, j->outlen, &e->d, perr, sizeof perr);
        if (e->rc < 0) snprintf(e->err, sizeof e->err, "its description is unusable: %s", perr);
    }
    if (e->rc == 0 && (e->rc = check_app_sockets(&e->d, &e->pool, e->err, sizeof e->err)) < 0)
        appdesc_free(&e->d); /* refused: the cache keeps only the reason */
    if (j->out) explicit_bzero(j->out, j->outlen); /* it may hold a password */
    free(j->out);
    free_strv(e->argv);
    e->argv = NULL;
    pool_conf_free(&e->pool);
    e->described = true;
}

void app_describe_pending(app_cache_t *c)
{
    if (!c) return;
    appdesc_job_t *jobs = xcalloc((size_t)c->n + 1, sizeof *jobs);
    int *which = xcalloc((size_t)c->n + 1, sizeof *which);
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (!c->v[i].described) {
            jobs[n] = (appdesc_job_t){.argv = c->v[i].argv, .pool = &c->v[i].pool};
            which[n++] = i;
        }
    if (n) appdesc_run_batch(jobs, n, APPDESC_TIMEOUT_S);
    for (int k = 0; k < n; k++) conclude(&c->v[which[k]], &jobs[k]);
    free(which);
    free(jobs);
}

int app_describe(app_cache_t **cache, const pool_conf_t *p, bool explicit_queue_connection,
                 const app_desc_t **out, char *err, size_t errn)
{
    app_entry_t *e = entry_for(cache, p, explicit_queue_connection);
    if (!e->described) app_describe_pending(*cache); /* with any other noted one */
    if (e->rc < 0) {
        snprintf(err, errn, "%s", e->err);
        return -1;
    }
    *out = &e->d;
    return 0;
}

void app_cache_free(app_cache_t *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        app_entry_t *e = &c->v[i];
        free(e->key);
        if (!e->described) {
            free_strv(e->argv);
            pool_conf_free(&e->pool);
        } else if (e->rc == 0)
            appdesc_free(&e->d);
    }
    free(c->v);
    free(c);
}

/* ---------------------------------------------------------------- origins */

static void origin(pool_conf_t *p, const char *key, const char *value, const char *source)
{
    p->origins = xrealloc(p->origins, sizeof *p->origins * (size_t)(p->norigins + 1));
    conf_origin_t *o = &p->origins[p->norigins++];
    o->key = xstrdup(key);
    o->value = xstrdup(value ? value : "null");
    o->source = xstrdup(source ? source : "?");
}

/* A string value, quoted as qpool.conf would write it. */
static void origin_str(pool_conf_t *p, const char *key, const char *value, const char *source)
{
    char *q = value ? xasprintf("\"%s\"", value) : NULL;
    origin(p, key, q, source);
    free(q);
}

void app_print_origins(const pool_conf_t *p, FILE *f, const char *indent)
{
    if (!p->laravel) return;
    fprintf(f, "%s# read from the Laravel app %s%s%s%s (qpool.conf's own keys win):\n", indent, p->laravel,
            p->laravel_version ? " (Laravel " : "", p->laravel_version ? p->laravel_version : "",
            p->laravel_version ? ")" : "");
    for (int i = 0; i < p->norigins; i++) {
        const conf_origin_t *o = &p->origins[i];
        /* a value can hold anything: keep it on its comment line */
        char v[200];
        size_t k = 0;
        for (const char *c = o->value; *c && k + 1 < sizeof v; c++) v[k++] = (*c == '\n' || *c == '\r') ? ' ' : *c;
        v[k] = '\0';
        fprintf(f, "%s#   %-22s %-32s %s\n", indent, o->key, v, o->source);
    }
}

/* ---------------------------------------------------------------- apply */

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = v ? xstrdup(v) : NULL;
}

static void warnf(char ***w, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warnf(char ***w, int *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m;
    if (vasprintf(&m, fmt, ap) < 0) abort();
    va_end(ap);
    *w = xrealloc(*w, sizeof **w * (size_t)(*n + 1));
    (*w)[(*n)++] = m;
}

static redis_conf_t *find_redis(qconf_t *c, const char *name)
{
    for (int i = 0; i < c->nredis; i++)
        if (!strcmp(c->redis[i].name, name)) return &c->redis[i];
    return NULL;
}

static redis_conf_t redis_from_app(const app_desc_t *d, const app_redis_t *ar, const char *name)
{
    redis_conf_t r;
    memset(&r, 0, sizeof r);
    r.name = xstrdup(name);
    r.socket = ar->socket.value ? xstrdup(ar->socket.value) : NULL;
    r.host = xstrdup(ar->host.value ? ar->host.value : "127.0.0.1");
    r.port = ar->port.value ? atoi(ar->port.value) : 6379;
    r.db = atoi(ar->db.value);
    r.prefix = xstrdup(ar->prefix.value);
    r.username = ar->username.value ? xstrdup(ar->username.value) : NULL;
    r.password = ar->password.value ? xstrdup(ar->password.value) : NULL;
    r.timeout = 5;
    r.kind = REDIS_FROM_APP;
    r.app = xstrdup(d->app);
    return r;
}

/* A libconfig setting name from a Laravel one: [A-Za-z][-A-Za-z0-9_]*. */
static char *setting_name(const char *lname, const char *app, int n)
{
    const char *base = strrchr(app, '/');
    base = base && base[1] ? base + 1 : app;
    char *s = n < 0 ? xstrdup(lname) : n == 0 ? xasprintf("%s-%s", lname, base) : xasprintf("%s-%s-%d", lname, base, n + 1);
    for (char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
            *c = '_';
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) {
        char *t = xasprintf("r%s", s);
        free(s);
        s = t;
    }
    return s;
}

/* The config's connection for the app's Laravel connection lname; *conf_wins
 * when qpool.conf defines that name itself. */
static const char *redis_for(qconf_t *c, const app_desc_t *d, const char *lname, bool *conf_wins)
{
    const app_redis_t *ar = appdesc_redis(d, lname);
    redis_conf_t *ex = find_redis(c, lname);
    *conf_wins = ex && ex->kind == REDIS_FROM_CONF;
    if (*conf_wins) return ex->name;
    for (int n = -1;; n++) {
        char *name = setting_name(lname, d->app, n);
        redis_conf_t r = redis_from_app(d, ar, name);
        free(name);
        ex = find_redis(c, r.name);
        if (ex && ex->kind == REDIS_STOCK) {
            redis_conf_free(ex);
            *ex = r;
            return ex->name;
        }
        if (ex && ex->kind == REDIS_FROM_APP && redis_conf_same(ex, &r)) {
            redis_conf_free(&r);
            return ex->name;
        }
        if (!ex) {
            c->redis = xrealloc(c->redis, sizeof *c->redis * (size_t)(c->nredis + 1));
            c->redis[c->nredis] = r;
            return c->redis[c->nredis++].name;
        }
        redis_conf_free(&r);
    }
}

/* Origins of one Redis connection's settings. */
static void redis_origins(pool_conf_t *p, const char *what, const app_desc_t *d, const char *lname,
                          const char *name, bool conf_wins)
{
    const app_redis_t *ar = appdesc_redis(d, lname);
    char key[64], src[128];
    snprintf(src, sizeof src, "qpool.conf (redis.%s)", name);
    const app_val_t *vals[] = {&ar->host, &ar->port, &ar->socket, &ar->db, &ar->username, &ar->password, &ar->prefix};
    const char *keys[] = {"host", "port", "socket", "db", "username", "password", "prefix"};
    for (size_t i = 0; i < ARRAY_LEN(vals); i++) {
        if ((!strcmp(keys[i], "socket") && !vals[i]->value) ||
            ((!strcmp(keys[i], "host") || !strcmp(keys[i], "port")) && ar->socket.value) ||
            (!strcmp(keys[i], "username") && !vals[i]->value))
            continue;
        snprintf(key, sizeof key, "%s.%s", what, keys[i]);
        const char *v = vals[i]->value;
        bool quoted = strcmp(keys[i], "port") && strcmp(keys[i], "db");
        if (conf_wins)
            origin(p, key, "(qpool.conf's)", src);
        else if (!strcmp(keys[i], "password"))
            origin(p, key, v ? "(redacted)" : "none", vals[i]->source);
        else if (quoted)
            origin_str(p, key, v, vals[i]->source);
        else
            origin(p, key, v, vals[i]->source);
    }
}

/* One of the pool's connections (*field, named key) from the app's Laravel
 * connection lv, unless qpool.conf gave it (explicit); its origin, and its
 * settings' origins under what (NULL: not listed again). */
static void apply_connection(qconf_t *c, pool_conf_t *p, const app_desc_t *d, bool explicit, const char *key,
                             char **field, const app_val_t *lv, const char *what)
{
    if (explicit) {
        origin_str(p, key, *field, "qpool.conf");
        return;
    }
    bool conf_wins;
    set_str(field, redis_for(c, d, lv->value, &conf_wins));
    char *v = xasprintf("\"%s\" (Laravel's \"%s\")", *field, lv->value);
    origin(p, key, v, lv->source);
    free(v);
    if (what) redis_origins(p, what, d, lv->value, *field, conf_wins);
}

/* A queue connection on another driver than redis runs through the app's
 * own driver (app_driver); qpool.conf's app_driver = true stands anyway. */
static void apply_driver(pool_conf_t *p, const app_desc_t *d)
{
    const char *drv = d->queue_driver.value;
    if (drv && strcmp(drv, "redis")) p->app_driver = true;
    if (!p->app_driver) return;
    char *v = drv ? xasprintf("true (the \"%s\" driver): runs through the app's driver", drv)
                  : xstrdup("true: runs through the app's driver");
    origin(p, "app_driver", v, drv && strcmp(drv, "redis") ? d->queue_driver.source : "qpool.conf");
    free(v);
}

static void apply_queue(qconf_t *c, pool_conf_t *p, unsigned ex, const app_desc_t *d)
{
    if (!(ex & EXPLICIT_QUEUE_CONNECTION)) set_str(&p->queue_connection, d->queue_connection.value);
    origin_str(p, "queue_connection", p->queue_connection,
               ex & EXPLICIT_QUEUE_CONNECTION ? "qpool.conf" : d->queue_connection.source);
    apply_driver(p, d);
    if (d->connection.value || (ex & EXPLICIT_CONNECTION))
        apply_connection(c, p, d, ex & EXPLICIT_CONNECTION, "connection", &p->connection, &d->connection, "redis");
    else /* the app defines no Redis: the stock connection, used only when qpool.conf names a Redis */
        origin_str(p, "connection", p->connection, "qpool.conf's stock connection (the app defines no Redis)");
    if (!p->queues) {
        p->queues = xcalloc(2, sizeof *p->queues);
        p->queues[0] = xstrdup(d->queue.value);
        p->nqueues = 1;
        origin_str(p, "queues", d->queue.value, d->queue.source);
    }
    if (!(ex & EXPLICIT_RETRY_AFTER)) p->retry_after = atoi(d->retry_after.value);
    char ra[32];
    snprintf(ra, sizeof ra, "%d", p->retry_after);
    origin(p, "retry_after", ra, ex & EXPLICIT_RETRY_AFTER ? "qpool.conf" : d->retry_after.source);
    char *bf = xasprintf(p->app_driver ? "%s (the app's driver pops; after an empty pop the worker waits sleep)"
                                       : "%s (qpool workers wait on Redis up to sleep)",
                         d->block_for.value ? d->block_for.value : "null");
    origin(p, "block_for", bf, d->block_for.source);
    free(bf);
}

static void apply_cache(qconf_t *c, pool_conf_t *p, unsigned ex, const app_desc_t *d)
{
    origin_str(p, "cache_store", d->cache_store.value, d->cache_store.source);
    p->agent_signals = false;
    if (d->cache_connection.value) {
        bool ex_cache = ex & EXPLICIT_CACHE_CONNECTION;
        /* the queue's connection: its settings are listed already */
        bool listed = ex_cache || (d->connection.value && !strcmp(d->cache_connection.value, d->connection.value));
        apply_connection(c, p, d, ex_cache, "cache_connection", &p->cache_connection, &d->cache_connection,
                         listed ? NULL : "cache_redis");
        if (!(ex & EXPLICIT_CACHE_PREFIX)) set_str(&p->cache_prefix, d->cache_prefix.value);
        origin_str(p, "cache_prefix", p->cache_prefix, ex & EXPLICIT_CACHE_PREFIX ? "qpool.conf" : d->cache_prefix.source);
        return;
    }
    if (!(ex & EXPLICIT_CACHE_CONNECTION)) set_str(&p->cache_connection, p->connection);
    p->agent_signals = true; /* settled by apply_signals once the handler is known */
}

/* A cache store that is not Redis: a pool that preloads the app has its app
 * agent read queue:restart and queue:pause through the store (agent.h),
 * unless qpool.conf names the cache connection; any other pool cannot see
 * them. */
static void apply_signals(pool_conf_t *p, unsigned ex, const app_desc_t *d, char ***w, int *nw)
{
    if (!p->agent_signals) return;
    const char *drv = d->cache_driver.value ? d->cache_driver.value : "?";
    if (pool_preloads(p) && !(ex & EXPLICIT_CACHE_CONNECTION)) {
        char *v = xasprintf("queue:restart and queue:pause read by the pool's app agent through the cache store "
                            "\"%s\" (driver %s); maxExceptions counters %s",
                            d->cache_store.value, drv,
                            p->app_driver ? "in that store, as Laravel's Worker keeps them"
                                          : "stay on the queue's connection");
        origin(p, "signals", v, d->cache_store.source);
        free(v);
        return;
    }
    p->agent_signals = false;
    warnf(w, nw, "the app's cache store \"%s\" (driver %s) is not Redis%s: qpool cannot see queue:restart or queue:pause there, and keeps maxExceptions counters on the queue's connection",
          d->cache_store.value, drv,
          ex & EXPLICIT_CACHE_CONNECTION ? " and qpool.conf names the cache_connection" : " and the pool does not preload the app");
    if (!(ex & EXPLICIT_RESTART_KEY)) set_str(&p->restart_key, "");
    if (!(ex & EXPLICIT_LARAVEL_PAUSE)) p->laravel_pause = false;
}

static void apply_down(qconf_t *c, pool_conf_t *p, const app_desc_t *d, char ***w, int *nw)
{
    const char *drv = d->down_driver.value ? d->down_driver.value : "file";
    if (!strcmp(drv, "file") && d->down_file.value) {
        char *path = p->php_root ? xasprintf("%s%s", p->php_root, d->down_file.value) : xstrdup(d->down_file.value);
        free(p->down_file);
        p->down_file = path;
        origin_str(p, "maintenance (file)", path, d->down_file.source);
    } else if (!strcmp(drv, "cache") && d->down_connection.value && d->down_prefix.value) {
        bool conf_wins;
        set_str(&p->down_connection, redis_for(c, d, d->down_connection.value, &conf_wins));
        free(p->down_key);
        p->down_key = xasprintf("%s" DOWN_KEY, d->down_prefix.value);
        char *v = xasprintf("\"%s\" on \"%s\"", p->down_key, p->down_connection);
        origin(p, "maintenance (cache)", v, d->down_driver.source);
        free(v);
    } else
        warnf(w, nw, "the app's maintenance mode (driver %s%s%s) is not in a file or a Redis cache store: qpool does not check it",
              drv, d->down_store.value ? ", store " : "", d->down_store.value ? d->down_store.value : "");
    origin(p, "force", p->force ? "true" : "false", "qpool.conf");
}

static void apply_handler(pool_conf_t *p)
{
    if (p->command || p->handler_type != HANDLER_NONE) return;
    size_t np = strv_len(p->php);
    char **argv = xcalloc(np + 3, sizeof *argv);
    for (size_t i = 0; i < np; i++) argv[i] = xstrdup(p->php[i]);
    argv[np] = xstrdup(p->php_adapter ? p->php_adapter : appdesc_default_adapter());
    argv[np + 1] = xstrdup(p->laravel);
    p->handler_type = HANDLER_PIPE;
    p->handler_command = argv;
}

void app_apply(qconf_t *c, pool_conf_t *p, unsigned explicit, const app_desc_t *d, char ***warn, int *nwarn)
{
    conf_origins_free(p->origins, p->norigins);
    p->origins = NULL;
    p->norigins = 0;
    set_str(&p->laravel_version, d->laravel);
    apply_queue(c, p, explicit, d);
    apply_cache(c, p, explicit, d);
    apply_down(c, p, d, warn, nwarn);
    apply_handler(p);
    apply_signals(p, explicit, d, warn, nwarn);
}
