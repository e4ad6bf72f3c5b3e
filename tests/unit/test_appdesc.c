/*
 * test_appdesc.c - unit tests for the pure parts of reading a pool's
 * settings from its Laravel app: appdesc_parse (the describer's output is
 * untrusted), appdesc_last_line, appdesc_step and appdesc_wait_ms (collecting
 * describes), app_apply (qpool.conf's explicit keys win,
 * the app's Redis connections join the config) and pool_down_wanted
 * (maintenance mode).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/appdesc.h"
#include "config/config_app.h"
#include "master/pool.h"
#include "core/util.h"

#define V(v, s) "{\"value\": " v ", \"source\": \"" s "\"}"
#define REDIS(db, pw) \
    "{\"host\": " V("\"127.0.0.1\"", "config/database.php") ", \"port\": " V("6390", "environment (REDIS_PORT)") \
    ", \"socket\": " V("null", "config/database.php") ", \"db\": " V(db, "config/database.php")              \
    ", \"username\": " V("null", "config/database.php") ", \"password\": " V(pw, ".env (REDIS_PASSWORD)")     \
    ", \"prefix\": " V("\"laravel_database_\"", "config/database.php") "}"

static const char GOOD[] =
    "{\"qpool_describe\": 1, \"app\": \"/srv/app\", \"laravel\": \"8.83.26\", \"config_cached\": false,"
    " \"values\": {"
    " \"queue_connection\": " V("\"redis\"", "config/queue.php") ","
    " \"connection\": " V("\"default\"", "config/queue.php") ","
    " \"queue\": " V("\"default\"", "config/queue.php") ","
    " \"retry_after\": " V("77", ".env (QUEUE_RETRY_AFTER)") ","
    " \"block_for\": " V("null", "config/queue.php") ","
    " \"cache_store\": " V("\"redis\"", "config/cache.php") ","
    " \"cache_driver\": " V("\"redis\"", "config/cache.php") ","
    " \"cache_connection\": " V("\"cache\"", "config/cache.php") ","
    " \"cache_prefix\": " V("\"laravel_cache:\"", "config/cache.php") ","
    " \"down_driver\": " V("\"file\"", "framework") ","
    " \"down_file\": " V("\"/srv/app/storage/framework/down\"", "storage path") ","
    " \"some_future_key\": 1"
    " }, \"redis\": {\"default\": " REDIS("0", "\"s3cret\"") ", \"cache\": " REDIS("1", "\"s3cret\"") "}}";

static int parse(const char *json, app_desc_t *d, char *err)
{
    return appdesc_parse(json, strlen(json), d, err, 256);
}

/* GOOD with one substring replaced. */
static char *good_with(const char *from, const char *to)
{
    const char *at = strstr(GOOD, from);
    assert_non_null(at);
    return xasprintf("%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
}

static void test_parse_good(void **state)
{
    (void)state;
    app_desc_t d;
    char err[256];
    assert_int_equal(parse(GOOD, &d, err), 0);
    assert_string_equal(d.app, "/srv/app");
    assert_string_equal(d.laravel, "8.83.26");
    assert_string_equal(d.retry_after.value, "77");
    assert_string_equal(d.retry_after.source, ".env (QUEUE_RETRY_AFTER)");
    assert_null(d.block_for.value);
    assert_true(d.block_for.present);
    assert_int_equal(d.nredis, 2);
    const app_redis_t *c = appdesc_redis(&d, "cache");
    assert_non_null(c);
    assert_string_equal(c->db.value, "1");
    assert_string_equal(c->port.value, "6390");
    assert_string_equal(c->password.value, "s3cret");
    assert_null(c->socket.value);
    assert_null(appdesc_redis(&d, "other"));
    appdesc_free(&d);
}

static void expect_rejected(const char *from, const char *to, const char *why)
{
    char *json = good_with(from, to);
    app_desc_t d;
    char err[256] = "";
    assert_int_equal(parse(json, &d, err), -1);
    if (!strstr(err, why)) fail_msg("error \"%s\" does not say \"%s\"", err, why);
    assert_null(strstr(err, "s3cret"));
    free(json);
}

static void test_parse_rejects(void **state)
{
    (void)state;
    expect_rejected("\"qpool_describe\": 1", "\"qpool_describe\": 2", "version 1");
    expect_rejected(V("6390", "environment (REDIS_PORT)"), V("70000", "x"), "out of range");
    expect_rejected(V("6390", "environment (REDIS_PORT)"), V("\"6390\"", "x"), "wrong type");
    expect_rejected(V("77", ".env (QUEUE_RETRY_AFTER)"), V("0", "x"), "retry_after");
    expect_rejected(V("77", ".env (QUEUE_RETRY_AFTER)"), V("1.5", "x"), "retry_after");
    expect_rejected(V("\"cache\"", "config/cache.php"), V("\"elsewhere\"", "config/cache.php"), "not described");
    expect_rejected(V("\"cache\"", "config/cache.php"), V("\"a b\"", "config/cache.php"), "cache_connection");
    expect_rejected("\"source\": \"config/queue.php\"", "\"source\": \"bad\\nsource\"", "queue_connection");
    expect_rejected("\"source\": \"config/queue.php\"", "\"source\": 3", "queue_connection");
    expect_rejected(V("\"/srv/app/storage/framework/down\"", "storage path"), V("\"relative/down\"", "x"), "down_file");
    expect_rejected(V("\"file\"", "framework"), V("\"ftp\"", "framework"), "maintenance driver");
    expect_rejected(", \"cache\": " REDIS("1", "\"s3cret\"") "}}", "}}", "not described");
    expect_rejected(V("\"s3cret\"", ".env (REDIS_PASSWORD)"), V("[\"s3cret\"]", "x"), "password");
    expect_rejected("{\"qpool_describe\"", "[{\"qpool_describe\"", "not a JSON object");
    expect_rejected("\"queue\": " V("\"default\"", "config/queue.php"), "\"queue\": " V("\"def\xff\"", "x"),
                    "queue"); /* not UTF-8: it would be a label and JSON text */
}

static void test_parse_truncated_and_oversized(void **state)
{
    (void)state;
    app_desc_t d;
    char err[256];
    assert_int_equal(appdesc_parse(GOOD, strlen(GOOD) / 2, &d, err, sizeof err), -1);
    assert_int_equal(appdesc_parse(GOOD, APPDESC_MAX_OUTPUT + 1, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer"));
}

static void test_last_line(void **state)
{
    (void)state;
    char buf[16];
    const char *t = "warning: x\nFatal: no\tgood\n\n";
    appdesc_last_line(t, strlen(t), buf, sizeof buf);
    assert_string_equal(buf, "Fatal: no good");
    appdesc_last_line("", 0, buf, sizeof buf);
    assert_string_equal(buf, "");
    const char *l = "a very long line that is cut";
    appdesc_last_line(l, strlen(l), buf, 8);
    assert_string_equal(buf, "a very ");
}

/* Collecting a describe: an exited direct child answers, whoever holds its
 * pipes (review 2026-11-24 #9); too much output beats everything; the
 * deadline only counts while the child runs. */
static void test_step(void **state)
{
    (void)state;
    assert_int_equal(appdesc_step(false, false, 1000, 2000), APPDESC_WAIT);
    assert_int_equal(appdesc_step(true, false, 1000, 2000), APPDESC_ANSWERED);
    assert_int_equal(appdesc_step(false, false, 2000, 2000), APPDESC_TIMED_OUT);
    assert_int_equal(appdesc_step(false, false, 2500, 2000), APPDESC_TIMED_OUT);
    assert_int_equal(appdesc_step(true, false, 2500, 2000), APPDESC_ANSWERED);
    assert_int_equal(appdesc_step(true, true, 1000, 2000), APPDESC_TOO_LONG);
    assert_int_equal(appdesc_step(false, true, 2500, 2000), APPDESC_TOO_LONG);
}

/* The loop's sleep: never past the deadline or the next watchdog ping, and
 * no longer than a tick when exits must be looked for. */
static void test_wait_ms(void **state)
{
    (void)state;
    assert_int_equal(appdesc_wait_ms(1000, 21000, 0, 0), 20000);
    assert_int_equal(appdesc_wait_ms(1000, 21000, 1500, 0), 500);
    assert_int_equal(appdesc_wait_ms(1000, 21000, 30000, 0), 20000);
    assert_int_equal(appdesc_wait_ms(1000, 21000, 1500, 20), 20);
    assert_int_equal(appdesc_wait_ms(1000, 1010, 0, 20), 10);
    assert_int_equal(appdesc_wait_ms(1000, 900, 0, 0), 0);    /* past the deadline: do not sleep */
    assert_int_equal(appdesc_wait_ms(1000, 21000, 800, 0), 0); /* a ping overdue */
}

static void test_down_wanted(void **state)
{
    (void)state;
    assert_false(pool_down_wanted(false, false, 1, false));  /* not checked: never */
    assert_false(pool_down_wanted(true, true, 1, true));     /* force */
    assert_true(pool_down_wanted(true, false, 1, false));
    assert_false(pool_down_wanted(true, false, 0, true));
    assert_true(pool_down_wanted(true, false, -1, true));    /* unknown: keep */
    assert_false(pool_down_wanted(true, false, -1, false));
}

/* A config as config_load leaves it before pools: the stock "default",
 * and a "cache" connection qpool.conf defines itself. */
static qconf_t *base_conf(void)
{
    qconf_t *c = xcalloc(1, sizeof *c);
    c->redis = xcalloc(2, sizeof *c->redis);
    c->nredis = 2;
    c->redis[0] = (redis_conf_t){.name = xstrdup("default"), .host = xstrdup("127.0.0.1"), .port = 6379,
                                 .prefix = xstrdup("laravel_database_"), .timeout = 5, .kind = REDIS_STOCK};
    c->redis[1] = (redis_conf_t){.name = xstrdup("cache"), .host = xstrdup("10.0.0.9"), .port = 6379, .db = 1,
                                 .prefix = xstrdup("x_"), .timeout = 5, .kind = REDIS_FROM_CONF};
    return c;
}

static void pool_init(pool_conf_t *p)
{
    memset(p, 0, sizeof *p);
    p->name = xstrdup("app");
    p->laravel = xstrdup("/srv/app");
    p->php = xcalloc(4, sizeof *p->php);
    p->php[0] = xstrdup("chroot");
    p->php[1] = xstrdup("/roots/sid");
    p->php[2] = xstrdup("php");
    p->php_adapter = xstrdup("/qpool/php/qpool-handler.php");
    p->php_root = xstrdup("/roots/sid");
    p->connection = xstrdup("default");
    p->queue_connection = xstrdup("redis");
    p->cache_prefix = xstrdup("laravel_cache:");
    p->restart_key = xstrdup("illuminate:queue:restart");
    p->retry_after = 90;
    p->backoff = xcalloc(1, sizeof(int));
    p->nbackoff = 1;
}

static const char *origin_of(const pool_conf_t *p, const char *key)
{
    for (int i = 0; i < p->norigins; i++)
        if (!strcmp(p->origins[i].key, key)) return p->origins[i].source;
    return NULL;
}

/* pool_init(p), then app_apply(c, p, 0, d) with its warnings freed: their number. */
static int apply_fresh(qconf_t *c, pool_conf_t *p, const app_desc_t *d)
{
    char **w = NULL;
    int nw = 0;
    pool_init(p);
    app_apply(c, p, 0, d, &w, &nw);
    for (int i = 0; i < nw; i++) free(w[i]);
    free(w);
    return nw;
}

static void test_apply(void **state)
{
    (void)state;
    app_desc_t d;
    char err[256];
    assert_int_equal(parse(GOOD, &d, err), 0);
    qconf_t *c = base_conf();
    pool_conf_t p;
    pool_init(&p);
    char **w = NULL;
    int nw = 0;
    app_apply(c, &p, EXPLICIT_CACHE_PREFIX, &d, &w, &nw);
    assert_int_equal(nw, 0);
    /* the app's "default" replaced the stock one; qpool.conf's "cache" won */
    assert_string_equal(p.connection, "default");
    const redis_conf_t *r = config_redis(c, "default");
    assert_int_equal(r->port, 6390);
    assert_int_equal(r->kind, REDIS_FROM_APP);
    assert_string_equal(r->password, "s3cret");
    assert_string_equal(p.cache_connection, "cache");
    assert_string_equal(config_redis(c, "cache")->host, "10.0.0.9");
    assert_string_equal(origin_of(&p, "cache_redis.host"), "qpool.conf (redis.cache)");
    assert_int_equal(p.retry_after, 77);
    assert_string_equal(origin_of(&p, "retry_after"), ".env (QUEUE_RETRY_AFTER)");
    assert_string_equal(origin_of(&p, "cache_prefix"), "qpool.conf");
    assert_string_equal(p.queues[0], "default");
    /* the maintenance file as the master sees it, outside the chroot */
    assert_string_equal(p.down_file, "/roots/sid/srv/app/storage/framework/down");
    /* the handler: the adapter on the app, through the php prefix */
    assert_int_equal(p.handler_type, HANDLER_PIPE);
    assert_string_equal(p.handler_command[0], "chroot");
    assert_string_equal(p.handler_command[3], "/qpool/php/qpool-handler.php");
    assert_string_equal(p.handler_command[4], "/srv/app");
    assert_null(p.handler_command[5]);
    for (int i = 0; i < p.norigins; i++) assert_null(strstr(p.origins[i].value, "s3cret"));

    /* a second app with another "default": a connection of its own */
    char *other = good_with("\"app\": \"/srv/app\"", "\"app\": \"/srv/shop\"");
    char *other2 = xasprintf("%s", other);
    app_desc_t d2;
    char *at = strstr(other2, "\"db\": " V("0", "config/database.php"));
    assert_non_null(at);
    at[strlen("\"db\": {\"value\": ")] = '4';
    assert_int_equal(parse(other2, &d2, err), 0);
    pool_conf_t p2;
    pool_init(&p2);
    app_apply(c, &p2, EXPLICIT_RETRY_AFTER, &d2, &w, &nw);
    assert_string_equal(p2.connection, "default-shop");
    assert_int_equal(config_redis(c, "default-shop")->db, 4);
    assert_int_equal(p2.retry_after, 90);
    assert_string_equal(origin_of(&p2, "retry_after"), "qpool.conf");
    /* the same app again shares the connection */
    pool_conf_t p3;
    pool_init(&p3);
    app_apply(c, &p3, 0, &d2, &w, &nw);
    assert_string_equal(p3.connection, "default-shop");
    assert_int_equal(c->nredis, 3);

    free(other);
    free(other2);
    appdesc_free(&d);
    appdesc_free(&d2);
    pool_conf_free(&p);
    pool_conf_free(&p2);
    pool_conf_free(&p3);
    config_free(c);
}

/* A queue connection on another driver (queue_driver): app_driver, said where it came from;
 * an older adapter that does not say the driver: redis, as before. */
static void test_apply_queue_driver(void **state)
{
    (void)state;
    char *json = good_with("\"queue_connection\": " V("\"redis\"", "config/queue.php"),
                           "\"queue_connection\": " V("\"database\"", "config/queue.php")
                           ", \"queue_driver\": " V("\"database\"", "config/queue.php"));
    app_desc_t d;
    char err[256];
    assert_int_equal(parse(json, &d, err), 0);
    assert_string_equal(d.queue_driver.value, "database");
    qconf_t *c = base_conf();
    pool_conf_t p;
    apply_fresh(c, &p, &d);
    assert_true(p.app_driver);
    assert_string_equal(p.queue_connection, "database");
    assert_string_equal(origin_of(&p, "app_driver"), "config/queue.php");
    appdesc_free(&d);
    pool_conf_free(&p);

    assert_int_equal(parse(GOOD, &d, err), 0); /* no queue_driver */
    assert_null(d.queue_driver.value);
    apply_fresh(c, &p, &d);
    assert_false(p.app_driver);
    assert_null(origin_of(&p, "app_driver"));
    appdesc_free(&d);
    pool_conf_free(&p);
    config_free(c);
    free(json);
}

/* An app that defines no Redis at all, its queue on another driver: no
 * connection described; the pool keeps the stock one, adds no app Redis. A
 * redis queue must name its connection. */
#define NO_REDIS_APP(driver)                                                                                   \
    "{\"qpool_describe\": 1, \"app\": \"/srv/app\", \"laravel\": \"8.83.26\", \"config_cached\": false,"     \
    " \"values\": {"                                                                                           \
    " \"queue_connection\": " V("\"database\"", "config/queue.php") ","                                        \
    " \"queue_driver\": " V("\"" driver "\"", "config/queue.php") ","                                          \
    " \"queue\": " V("\"default\"", "config/queue.php") ","                                                    \
    " \"retry_after\": " V("90", "config/queue.php") ","                                                       \
    " \"block_for\": " V("null", "config/queue.php") ","                                                       \
    " \"cache_store\": " V("\"file\"", "config/cache.php") ","                                                 \
    " \"cache_driver\": " V("\"file\"", "config/cache.php") ","                                                \
    " \"down_driver\": " V("\"file\"", "framework") ","                                                        \
    " \"down_file\": " V("\"/srv/app/storage/framework/down\"", "storage path") " }, \"redis\": {}}"

static void test_apply_app_without_redis(void **state)
{
    (void)state;
    app_desc_t d;
    char err[256];
    assert_int_equal(parse(NO_REDIS_APP("database"), &d, err), 0);
    assert_null(d.connection.value);
    qconf_t *c = base_conf();
    int nredis = c->nredis;
    pool_conf_t p;
    apply_fresh(c, &p, &d);
    assert_true(p.app_driver);
    assert_string_equal(p.connection, "default");
    assert_non_null(strstr(origin_of(&p, "connection"), "the app defines no Redis"));
    assert_null(origin_of(&p, "redis.host"));
    assert_int_equal(c->nredis, nredis);
    appdesc_free(&d);
    pool_conf_free(&p);
    config_free(c);
    assert_int_equal(parse(NO_REDIS_APP("redis"), &d, err), -1);
    assert_non_null(strstr(err, "missing"));
}

static void test_apply_non_redis_cache(void **state)
{
    (void)state;
    char *json = good_with("\"cache_driver\": " V("\"redis\"", "config/cache.php"),
                           "\"cache_driver\": " V("\"file\"", "config/cache.php"));
    /* a file store has no connection or prefix */
    char *b = xasprintf("%s", json);
    char *cc = strstr(b, "\"cache_connection\"");
    char *end = strstr(cc, "\"down_driver\"");
    memmove(cc, end, strlen(end) + 1);
    app_desc_t d;
    char err[256];
    assert_int_equal(parse(b, &d, err), 0);
    qconf_t *c = base_conf();
    pool_conf_t p;
    pool_init(&p);
    char **w = NULL;
    int nw = 0;
    app_apply(c, &p, 0, &d, &w, &nw);
    assert_int_equal(nw, 1);
    assert_non_null(strstr(w[0], "not Redis"));
    assert_false(p.agent_signals);
    assert_string_equal(p.restart_key, "");
    assert_false(p.laravel_pause);
    assert_string_equal(p.cache_connection, p.connection);
    free(w[0]);
    free(w);
    /* a pool that preloads the app: its app agent reads them, no warning */
    pool_conf_t pre;
    pool_init(&pre);
    pre.preload = true;
    pre.laravel_pause = true;
    w = NULL;
    nw = 0;
    app_apply(c, &pre, 0, &d, &w, &nw);
    assert_int_equal(nw, 0);
    assert_true(pre.agent_signals);
    assert_string_equal(pre.restart_key, "illuminate:queue:restart");
    assert_true(pre.laravel_pause);
    free(w);
    pool_conf_free(&pre);
    free(json);
    free(b);
    appdesc_free(&d);
    pool_conf_free(&p);
    config_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_parse_truncated_and_oversized),
        cmocka_unit_test(test_last_line),
        cmocka_unit_test(test_step),
        cmocka_unit_test(test_wait_ms),
        cmocka_unit_test(test_down_wanted),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_apply_non_redis_cache),
        cmocka_unit_test(test_apply_queue_driver),
        cmocka_unit_test(test_apply_app_without_redis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
