/*
 * test_horizon.c - unit tests for src/horizon.h: Horizon's merge of defaults
 * and environments (array_replace_recursive) and the mapping of supervisors
 * to qpool pools, checked by loading the output with config_load's parser
 * rules where it matters (it must be valid libconfig).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/horizon.h"
#include "core/util.h"

static char *merged(const char *a, const char *b)
{
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    assert_non_null(x);
    assert_non_null(y);
    cJSON *m = horizon_replace_recursive(x, y);
    char *s = cJSON_PrintUnformatted(m);
    cJSON_Delete(x);
    cJSON_Delete(y);
    cJSON_Delete(m);
    return s;
}

static void expect_merge(const char *a, const char *b, const char *want)
{
    char *s = merged(a, b);
    assert_string_equal(s, want);
    free(s);
}

/* out parsed as libconfig into cfg (config_destroy it), with npools pools. */
static const config_setting_t *parse_pools(config_t *cfg, const char *out, int npools)
{
    config_init(cfg);
    if (!config_read_string(cfg, out)) fail_msg("line %d: %s\n%s", config_error_line(cfg), config_error_text(cfg), out);
    const config_setting_t *pools = config_lookup(cfg, "pools");
    assert_int_equal(config_setting_length(pools), npools);
    return pools;
}

static void test_replace_recursive(void **state)
{
    (void)state;
    expect_merge("{\"s\":{\"a\":1,\"b\":2}}", "{\"s\":{\"b\":3},\"t\":{\"c\":4}}", "{\"s\":{\"a\":1,\"b\":3},\"t\":{\"c\":4}}");
    /* lists by index, as PHP does: not replaced as a whole */
    expect_merge("{\"q\":[\"a\",\"b\"]}", "{\"q\":[\"c\"]}", "{\"q\":[\"c\",\"b\"]}");
    /* a scalar replaces a list and the reverse */
    expect_merge("{\"q\":[\"a\"]}", "{\"q\":\"x,y\"}", "{\"q\":\"x,y\"}");
    /* an empty PHP array (a JSON list) merges as an empty map */
    expect_merge("[]", "{\"s\":{\"a\":1}}", "{\"s\":{\"a\":1}}");
}

static char *import(const char *json, const char *env, int *rc, char *err)
{
    cJSON *d = cJSON_Parse(json);
    assert_non_null(d);
    sbuf_t out;
    sbuf_init(&out);
    *rc = horizon_import(d, "/srv/app", env, &out, err, 256);
    cJSON_Delete(d);
    return sbuf_steal(&out);
}

/* import() that must succeed: the config text. */
static char *import_ok(const char *json, const char *env)
{
    int rc;
    char err[256] = "";
    char *out = import(json, env, &rc, err);
    if (rc != 0) fail_msg("import failed (%d): %s", rc, err);
    return out;
}

/* Pool i's string `key`, which must be there. */
static const char *pool_string(const config_setting_t *pools, int i, const char *key)
{
    const char *s = NULL;
    assert_true(config_setting_lookup_string(config_setting_get_elem(pools, i), key, &s));
    return s;
}

static const char DESC[] =
    "{\"qpool_describe\":1,\"environment\":\"production\",\"queue_default\":\"redis\",\"horizon\":{"
    "\"waits\":{\"redis:default\":90,\"redis:odd.name\":5,\"redis:x\":\"soon\"},"
    "\"silenced\":[\"App\\\\Jobs\\\\Ping\",3],\"silenced_tags\":[\"health\",\"a\\\"b\"],"
    "\"defaults\":{\"s1\":{\"connection\":\"redis\",\"queue\":[\"high\",\"low\"],\"balance\":\"auto\","
    "\"minProcesses\":2,\"maxProcesses\":3,\"tries\":2,\"timeout\":\"45\",\"memory\":-5,\"nice\":5,"
    "\"backoff\":[1,\"x\",3],\"rest\":0.5}},"
    "\"environments\":{\"prod*\":{\"s1\":{\"maxProcesses\":10},\"s 2\":{\"queue\":\"a,b\",\"processes\":4,"
    "\"balance\":false,\"force\":true,\"workersName\":\"w\"}},\"local\":{}}}}";

static void test_import_maps_supervisors(void **state)
{
    (void)state;
    char *out = import_ok(DESC, NULL);
    /* the wildcard environment matched the app's "production" */
    assert_non_null(strstr(out, "environment \"production\""));
    /* auto: the per-queue minimum times the queues, capped at the maximum */
    assert_non_null(strstr(out, "min_processes = 4;\n    max_processes = 10;"));
    assert_non_null(strstr(out, "queues = [\"high\", \"low\"];"));
    assert_non_null(strstr(out, "timeout = 45;"));           /* a numeric string */
    assert_null(strstr(out, "    memory = -5;"));              /* out of range: a comment */
    assert_non_null(strstr(out, "Horizon memory = -5 is not a value qpool takes"));
    assert_non_null(strstr(out, "backoff = [1, 3];"));
    assert_non_null(strstr(out, "rest = 0.500;"));
    /* balance = false: a fixed pool, the name made valid */
    assert_non_null(strstr(out, "name = \"s_2\";"));
    assert_non_null(strstr(out, "queues = [\"a\", \"b\"];"));
    assert_non_null(strstr(out, "processes = 4;"));
    assert_non_null(strstr(out, "force = true;"));
    assert_non_null(strstr(out, "Horizon option workersName = \"w\" has no qpool equivalent"));
    /* waits: per queue; names libconfig cannot take become comments */
    assert_non_null(strstr(out, "default = 90.0;"));
    assert_non_null(strstr(out, "# Horizon waits \"redis:odd.name\""));
    assert_non_null(strstr(out, "# Horizon waits \"redis:x\""));

    /* valid libconfig, with the pools and keys in place */
    config_t cfg;
    parse_pools(&cfg, out, 2);
    const char *laravel = NULL;
    assert_true(config_lookup_string(&cfg, "defaults.laravel", &laravel));
    assert_string_equal(laravel, "/srv/app");
    int prefetch = 0; /* the adapter's speed: several jobs per pop (a new file; the key's default stays 1) */
    assert_true(config_lookup_int(&cfg, "defaults.prefetch", &prefetch));
    assert_int_equal(prefetch, 8);
    /* silenced and silenced_tags carried over (non-strings left out) */
    config_setting_t *sil = config_lookup(&cfg, "defaults.silenced"), *st = config_lookup(&cfg, "defaults.silenced_tags");
    assert_non_null(sil);
    assert_int_equal(config_setting_length(sil), 1);
    assert_string_equal(config_setting_get_string_elem(sil, 0), "App\\Jobs\\Ping");
    assert_non_null(st);
    assert_int_equal(config_setting_length(st), 2);
    assert_string_equal(config_setting_get_string_elem(st, 1), "a\"b");
    config_destroy(&cfg);
    free(out);
}

static void test_import_errors(void **state)
{
    (void)state;
    int rc;
    char err[256] = "";
    char *out = import(DESC, "staging", &rc, err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "no environment \"staging\""));
    free(out);
    out = import(DESC, "local", &rc, err);      /* defaults only */
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "max_processes = 3;"));
    free(out);
    out = import("{\"qpool_describe\":1}", "x", &rc, err);
    assert_int_equal(rc, -1);
    free(out);
}

/* The app's APP_ENV is text from the app: it became raw config lines (a
 * review found a root pool planted through it). Now one comment line. */
static void test_an_environment_name_cannot_write_config(void **state)
{
    (void)state;
    static const char EVIL[] =
        "{\"qpool_describe\":1,\"environment\":\"production\\npools = ( { name = \\\"evil\\\"; user = \\\"root\\\"; "
        "queues = [\\\"q\\\"]; command = [\\\"/bin/sh\\\"]; } );\\n/*\",\"horizon\":{"
        "\"defaults\":{\"s1\":{\"queue\":[\"high\"],\"maxProcesses\":3}},\"environments\":{\"*\":{}}}}";
    char *out = import_ok(EVIL, NULL);
    config_t cfg;
    const config_setting_t *pools = parse_pools(&cfg, out, 1);
    assert_string_equal(pool_string(pools, 0, "name"), "s1");
    config_destroy(&cfg);
    free(out);
}

static void test_import_simple_splits_queues(void **state)
{
    (void)state;
    char *out = import_ok("{\"horizon\":{\"defaults\":{},\"environments\":{\"p\":{\"m\":{\"queue\":[\"a\",\"b\",\"c\"],"
                          "\"balance\":\"simple\",\"maxProcesses\":7}}}}}", "p");
    assert_non_null(strstr(out, "name = \"m-a\";"));
    assert_non_null(strstr(out, "name = \"m-c\";"));
    assert_non_null(strstr(out, "processes = 2;"));
    config_t cfg;
    config_init(&cfg);
    assert_true(config_read_string(&cfg, out));
    assert_int_equal(config_setting_length(config_lookup(&cfg, "pools")), 3);
    config_destroy(&cfg);
    free(out);
}

/* A supervisor on a connection whose driver is not redis (a fresh app's
 * "database"): its pool pops one job at a time through the app (prefetch = 1,
 * said why); a redis one keeps the defaults' prefetch; an unknown driver
 * (an older adapter) says nothing. */
static void test_import_database_connection(void **state)
{
    (void)state;
    static const char desc[] =
        "{\"environment\":\"local\",\"queue_default\":\"database\",\"queue_drivers\":{\"database\":\"database\","
        "\"redis\":\"redis\"},\"horizon\":{\"defaults\":{\"db\":{\"queue\":[\"default\"],\"maxProcesses\":2},"
        "\"r\":{\"connection\":\"redis\",\"queue\":\"emails\"},\"x\":{\"connection\":\"other\"}},"
        "\"environments\":{\"local\":{}}}}";
    char *out = import_ok(desc, NULL);
    config_t cfg;
    const config_setting_t *pools = parse_pools(&cfg, out, 3);
    int prefetch = 0;
    assert_string_equal(pool_string(pools, 0, "queue_connection"), "database"); /* queue.default */
    assert_true(config_setting_lookup_int(config_setting_get_elem(pools, 0), "prefetch", &prefetch));
    assert_int_equal(prefetch, 1);
    assert_non_null(strstr(out, "connection \"database\" uses the \"database\" driver"));
    assert_false(config_setting_lookup_int(config_setting_get_elem(pools, 1), "prefetch", &prefetch));
    assert_false(config_setting_lookup_int(config_setting_get_elem(pools, 2), "prefetch", &prefetch));
    config_destroy(&cfg);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace_recursive),
        cmocka_unit_test(test_import_maps_supervisors),
        cmocka_unit_test(test_import_errors),
        cmocka_unit_test(test_import_simple_splits_queues),
        cmocka_unit_test(test_an_environment_name_cannot_write_config),
        cmocka_unit_test(test_import_database_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
