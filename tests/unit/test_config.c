/*
 * test_config.c - unit tests for src/config.h: loading, validating and
 * printing the libconfig configuration. Every test writes its config files
 * into a private temporary directory (mkdtemp) and calls config_load();
 * errors are checked as "FILE:LINE: message" strings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "core/util.h"

static char tmpdir[PATH_MAX];
static int nfiles;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/qpool-test-config-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Write text to tmpdir/name; returns the malloc'd path. */
static char *write_file(const char *name, const char *text)
{
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s", tmpdir, name) > 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* Write text to a fresh file and load it; *pathp (optional) gets the path. */
static qconf_t *load_text(const char *text, conf_errors_t *e, char **pathp)
{
    char name[32];
    snprintf(name, sizeof name, "c%03d.conf", ++nfiles);
    char *path = write_file(name, text);
    qconf_t *c = config_load(path, e);
    if (pathp)
        *pathp = path;
    else
        free(path);
    return c;
}

static void print_errors(const conf_errors_t *e)
{
    for (int i = 0; i < e->n; i++) print_message("  error: %s\n", e->msgs[i]);
    for (int i = 0; i < e->nwarn; i++) print_message("  warning: %s\n", e->warnings[i]);
}

/* A config that must load; fails the test with its errors otherwise. */
static qconf_t *must_load(const char *text)
{
    conf_errors_t e;
    qconf_t *c = load_text(text, &e, NULL);
    if (!c) {
        print_errors(&e);
        conf_errors_free(&e);
        fail_msg("config did not load:\n%s", text);
    }
    conf_errors_free(&e);
    return c;
}

/* Line (1-based) of the first occurrence of needle in text. */
static int line_of(const char *text, const char *needle)
{
    const char *p = strstr(text, needle);
    if (!p) fail_msg("test bug: '%s' not in config text", needle);
    int line = 1;
    for (const char *c = text; c < p; c++)
        if (*c == '\n') line++;
    return line;
}

/* Index of the error that starts with "path:line: " (line > 0) or "path" and
 * contains every one of the needles (NULL-terminated list); -1 if none. */
static int find_error_v(const conf_errors_t *e, const char *path, int line, va_list ap)
{
    const char *needles[8];
    int nn = 0;
    const char *s;
    while ((s = va_arg(ap, const char *)) && nn < 8) needles[nn++] = s;
    char prefix[PATH_MAX + 32];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    else
        snprintf(prefix, sizeof prefix, "%s", path);
    for (int i = 0; i < e->n; i++) {
        if (strncmp(e->msgs[i], prefix, strlen(prefix))) continue;
        bool all = true;
        for (int k = 0; k < nn; k++)
            if (!strstr(e->msgs[i], needles[k])) all = false;
        if (all) return i;
    }
    return -1;
}

/* Load text, expect failure and an error at path:line containing the needles. */
static void expect_error(const char *text, int line, ...)
{
    conf_errors_t e;
    char *path = NULL;
    qconf_t *c = load_text(text, &e, &path);
    if (c) {
        config_free(c);
        fail_msg("config loaded but should not have:\n%s", text);
    }
    va_list ap;
    va_start(ap, line);
    int i = find_error_v(&e, path, line, ap);
    va_end(ap);
    if (i < 0) {
        print_message("expected an error at %s:%d in:\n%s\ngot:\n", path, line, text);
        print_errors(&e);
        conf_errors_free(&e);
        free(path);
        fail();
    }
    conf_errors_free(&e);
    free(path);
}

/* The repository root: $QPOOL_SOURCE_DIR (set by ctest), else derived from
 * this file's path. */
static const char *source_dir(void)
{
    static char dir[PATH_MAX];
    const char *d = getenv("QPOOL_SOURCE_DIR");
    if (d && *d) return d;
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *cut = strstr(dir, "/tests/unit/");
    if (cut)
        *cut = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    return dir;
}

/* The smallest valid pool. */
#define MINPOOL "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; } );\n"

/* ------------------------------------------------------------ the example */

/* The shipped example must load as it is. Checked through invariants rather
 * than its exact values, so that editing the example does not break this. */
static void test_example_config_loads(void **state)
{
    (void)state;
    char *path = NULL;
    assert_true(asprintf(&path, "%s/etc/qpool.conf", source_dir()) > 0);
    if (!getpwnam("www-data")) {
        free(path);
        skip(); /* the example runs its pools as www-data, present on Debian */
    }
    conf_errors_t e;
    qconf_t *c = config_load(path, &e);
    if (!c) {
        print_errors(&e);
        conf_errors_free(&e);
        fail_msg("%s does not load", path);
    }
    assert_int_equal(e.n, 0);
    assert_true(c->npools >= 1);
    assert_true(c->nredis >= 1);
    assert_non_null(config_redis(c, "default"));
    int minsum = 0;
    for (int i = 0; i < c->npools; i++) {
        const pool_conf_t *p = &c->pools[i];
        assert_non_null(p->name);
        assert_ptr_equal(config_pool(c, p->name), p);
        assert_int_equal(config_pool_index(c, p->name), i);
        assert_true(p->nqueues >= 1);
        assert_int_equal((int)strv_len(p->queues), p->nqueues);
        /* exactly one of handler / command */
        assert_true((p->handler_type != HANDLER_NONE) != (p->command != NULL));
        if (p->handler_type != HANDLER_NONE) assert_non_null(p->handler_command);
        assert_non_null(config_redis(c, p->connection));
        assert_non_null(p->cache_connection);
        assert_non_null(config_redis(c, p->cache_connection));
        if (p->user) {
            struct passwd *pw = getpwnam(p->user);
            assert_non_null(pw);
            assert_true(p->has_uid);
            assert_int_equal(p->uid, pw->pw_uid);
            assert_true(p->has_gid);
        }
        if (p->command) {
            char **argv = config_expand_command(p);
            assert_int_equal(strv_len(argv), strv_len(p->command));
            for (int k = 0; argv[k]; k++)
                if (strchr(argv[k], '{')) fail_msg("pool %s: placeholder left in '%s'", p->name, argv[k]);
            free_strv(argv);
        }
        if (p->balance == BALANCE_AUTO) assert_true(p->min_processes <= p->max_processes);
        minsum += p->balance == BALANCE_OFF ? p->processes : p->min_processes;
    }
    assert_true(minsum <= c->max_workers);
    /* the example exercises both kinds of pools and Laravel's cache connection */
    bool native = false, external = false;
    for (int i = 0; i < c->npools; i++) {
        native |= c->pools[i].handler_type != HANDLER_NONE;
        external |= c->pools[i].command != NULL;
    }
    assert_true(native && external);
    assert_null(config_pool(c, "no-such-pool"));
    assert_int_equal(config_pool_index(c, "no-such-pool"), -1);
    config_free(c);
    conf_errors_free(&e);
    free(path);
}

/* ------------------------------------------------------------ defaults */

static void test_builtin_defaults(void **state)
{
    (void)state;
    qconf_t *c = must_load(MINPOOL);
    /* global defaults */
    assert_int_equal(c->max_workers, 64);
    assert_int_equal(c->control_socket_mode, 0660);
    assert_string_equal(c->pid_file, "/run/qpool/qpool.pid");
    /* Laravel's stock "default" connection is provided */
    const redis_conf_t *r = config_redis(c, "default");
    assert_non_null(r);
    assert_string_equal(r->host, "127.0.0.1");
    assert_int_equal(r->port, 6379);
    assert_string_equal(r->prefix, "laravel_database_");

    assert_int_equal(c->npools, 1);
    const pool_conf_t *p = &c->pools[0];
    assert_string_equal(p->name, "p");
    assert_int_equal(p->tries, 1);
    assert_int_equal(p->nbackoff, 1);
    assert_int_equal(p->backoff[0], 0);
    assert_int_equal(p->timeout, 60);
    assert_int_equal(p->retry_after, 90);
    assert_int_equal(p->memory, 128);
    assert_true(p->sleep == 3.0);
    assert_int_equal(p->balance, BALANCE_OFF);
    assert_int_equal(p->processes, 1);
    assert_string_equal(p->connection, "default");
    assert_string_equal(p->queue_connection, "redis");
    assert_string_equal(p->cache_prefix, "laravel_cache:");
    /* no redis connection named "cache": the pool's own connection */
    assert_string_equal(p->cache_connection, "default");
    assert_int_equal(p->max_jobs, 0);
    assert_int_equal(p->max_time, 0);
    assert_int_equal(p->prefetch, 1);
    assert_false(p->has_uid);
    assert_null(p->user);
    config_free(c);
}

static void test_cache_connection_default(void **state)
{
    (void)state;
    /* a redis connection named cache exists: it is Laravel's cache store */
    qconf_t *c = must_load("redis = { default = { host = \"10.0.0.1\"; }; cache = { db = 1; }; };\n" MINPOOL);
    assert_string_equal(c->pools[0].cache_connection, "cache");
    assert_string_equal(config_redis(c, "default")->host, "10.0.0.1");
    config_free(c);

    /* no cache connection, pool on another connection: that one */
    c = must_load("redis = { other = { port = 6380; }; };\n"
                  "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; connection = \"other\"; } );\n");
    assert_string_equal(c->pools[0].connection, "other");
    assert_string_equal(c->pools[0].cache_connection, "other");
    config_free(c);

    /* explicit cache_connection wins */
    c = must_load("redis = { cache = { }; sessions = { }; };\n"
                  "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; cache_connection = \"sessions\"; } );\n");
    assert_string_equal(c->pools[0].cache_connection, "sessions");
    config_free(c);
}

static void test_redis_tls_and_sentinel_keys(void **state)
{
    (void)state;
    qconf_t *c = must_load("redis = { default = { username = \"qp\"; password_env = \"PW\";\n"
                           "  tls = { ca_file = \"/ca.pem\"; server_name = \"r.example\"; };\n"
                           "  sentinels = [\"10.0.0.1:26379\", \"s2\"]; master_name = \"mymaster\";\n"
                           "  sentinel_password_env = \"SPW\"; }; };\n" MINPOOL);
    const redis_conf_t *r = config_redis(c, "default");
    assert_true(r->tls.enabled);
    assert_true(r->tls.verify); /* the default */
    assert_string_equal(r->tls.ca_file, "/ca.pem");
    assert_string_equal(r->tls.server_name, "r.example");
    assert_int_equal(r->sentinel.naddrs, 2);
    assert_string_equal(r->sentinel.addrs[1], "s2");
    assert_string_equal(r->sentinel.master_name, "mymaster");
    assert_string_equal(r->sentinel.password_env, "SPW");
    redis_conf_t copy = *r;
    redis_conf_ext_copy(&copy, r);
    assert_true(redis_conf_same(&copy, r));
    assert_ptr_not_equal(copy.sentinel.addrs, r->sentinel.addrs);
    redis_conf_ext_free(&copy);
    config_free(c);

    c = must_load("redis = { default = { }; };\n" MINPOOL);
    assert_false(config_redis(c, "default")->tls.enabled);
    assert_null(config_redis(c, "default")->sentinel.addrs);
    config_free(c);
}

static void test_redis_tls_and_sentinel_errors(void **state)
{
    (void)state;
    static const char t1[] = "redis = {\n  default = {\n    tls = { ca_fle = \"x\"; };\n  };\n};\n" MINPOOL;
    expect_error(t1, 3, "unknown key 'ca_fle'", "did you mean 'ca_file'", NULL);
    static const char t2[] = "redis = {\n  default = {\n    tls = { cert_file = \"c.pem\"; };\n  };\n};\n" MINPOOL;
    expect_error(t2, 3, "cert_file and key_file go together", NULL);
    static const char t3[] = "redis = {\n  default = {\n    master_name = \"m\";\n  };\n};\n" MINPOOL;
    expect_error(t3, 2, "sentinels and master_name go together", NULL);
    static const char t4[] = "redis = {\n  default = {\n    sentinels = [\"a:1\", \"[::1\"]; master_name = \"m\";\n  };\n};\n" MINPOOL;
    expect_error(t4, 3, "sentinels[1]", "unclosed [", NULL);
    static const char t5[] = "redis = {\n  default = {\n    password_env = \"A\"; password_file = \"/x\";\n  };\n};\n" MINPOOL;
    expect_error(t5, 2, "password_env and password_file: use one", NULL);
    static const char t6[] = "redis = {\n  default = {\n    socket = \"/s\"; tls = { };\n  };\n};\n" MINPOOL;
    expect_error(t6, 2, "socket cannot be used with tls", NULL);
    static const char t7[] = "redis = {\n  default = {\n    password_file = \"/nonexistent/pw\";\n  };\n};\n" MINPOOL;
    expect_error(t7, 3, "password_file: /nonexistent/pw: No such file", NULL);
}

static void test_redis_cluster(void **state)
{
    (void)state;
    qconf_t *c = must_load("redis = { default = { cluster = [\"127.0.0.1:7000\", \"n2\"]; }; };\n"
                           "pools = ( { name = \"p\"; queues = [\"{emails}\", \"x{sms}\"]; command = [\"run\"]; } );\n");
    const redis_conf_t *r = config_redis(c, "default");
    assert_int_equal(r->ncluster, 2);
    assert_string_equal(r->cluster[1], "n2");
    redis_conf_t copy = *r;
    redis_conf_ext_copy(&copy, r);
    assert_true(redis_conf_same(&copy, r));
    assert_ptr_not_equal(copy.cluster, r->cluster);
    redis_conf_ext_free(&copy);
    config_free(c);
    /* a prefix with a tag puts every key in one slot: any name will do */
    c = must_load("redis = { default = { cluster = [\"a:1\"]; prefix = \"{app}:\"; }; };\n"
                  "pools = ( { name = \"p\"; queues = [\"emails\"]; command = [\"run\"]; } );\n");
    config_free(c);
    static const char t1[] = "redis = {\n  default = {\n    cluster = [\"a:1\"];\n    host = \"h\";\n  };\n};\n" MINPOOL;
    expect_error(t1, 4, "cluster cannot be used with host", NULL);
    static const char t2[] = "redis = {\n  default = {\n    cluster = [\"a:1\"]; sentinels = [\"s\"]; master_name = \"m\";\n  };\n};\n" MINPOOL;
    expect_error(t2, 3, "cluster cannot be used with sentinels", NULL);
    static const char t3[] = "redis = {\n  default = {\n    cluster = [\"a:1\"];\n    db = 2;\n  };\n};\n" MINPOOL;
    expect_error(t3, 4, "cluster cannot be used with db", NULL);
    static const char t4[] = "redis = {\n  default = {\n    cluster = [\"a:99999\"];\n  };\n};\n" MINPOOL;
    expect_error(t4, 3, "cluster[0]", NULL);
    static const char t5[] = "redis = { default = { cluster = [\"a:1\"]; }; };\n"
                             "pools = (\n  { name = \"p\";\n    queues = [\"{ok}\", \"emails\"]; command = [\"run\"]; } );\n";
    expect_error(t5, 4, "queue \"emails\" has no hash tag", "rename it to \"{emails}\"",
                 "13.5+ on a cluster already keeps a queue \"emails\" under these keys, queues:{emails}", NULL);
}

static void test_defaults_group_cascades(void **state)
{
    (void)state;
    qconf_t *c = must_load(
        "defaults = {\n"
        "  tries = 5;\n"
        "  timeout = 30;\n"
        "  memory = 256;\n"
        "  backoff = [1, 2];\n"
        "  queue_connection = \"jobs\";\n"
        "  environment = { A = \"1\"; B = \"2\"; };\n"
        "  min_processes = 2;\n"
        "  max_processes = 6;\n"
        "};\n"
        "pools = (\n"
        "  { name = \"a\"; queues = [\"q\"]; command = [\"run\"]; },\n"
        "  { name = \"b\"; queues = [\"r\"]; command = [\"run\"]; tries = 2; memory = 64;\n"
        "    environment = { B = \"override\"; C = \"3\"; }; balance = \"auto\"; max_processes = 9; }\n"
        ");\n");
    const pool_conf_t *a = config_pool(c, "a"), *b = config_pool(c, "b");
    assert_non_null(a);
    assert_non_null(b);
    /* a takes everything from defaults */
    assert_int_equal(a->tries, 5);
    assert_int_equal(a->timeout, 30);
    assert_int_equal(a->memory, 256);
    assert_int_equal(a->nbackoff, 2);
    assert_int_equal(a->backoff[1], 2);
    assert_string_equal(a->queue_connection, "jobs");
    assert_int_equal(a->nenv, 2);
    /* min/max in defaults are fine for a balance = off pool */
    assert_int_equal(a->balance, BALANCE_OFF);
    /* b overrides some, keeps the rest */
    assert_int_equal(b->tries, 2);
    assert_int_equal(b->memory, 64);
    assert_int_equal(b->timeout, 30);
    assert_string_equal(b->queue_connection, "jobs");
    assert_int_equal(b->balance, BALANCE_AUTO);
    assert_int_equal(b->min_processes, 2);
    assert_int_equal(b->max_processes, 9);
    /* environment merges by name */
    assert_int_equal(b->nenv, 3);
    for (int i = 0; i < b->nenv; i++) {
        if (!strcmp(b->env[i].name, "A")) assert_string_equal(b->env[i].value, "1");
        else if (!strcmp(b->env[i].name, "B")) assert_string_equal(b->env[i].value, "override");
        else if (!strcmp(b->env[i].name, "C")) assert_string_equal(b->env[i].value, "3");
        else fail_msg("unexpected env %s", b->env[i].name);
    }
    config_free(c);
}

static void test_pool_only_keys_rejected_in_defaults(void **state)
{
    (void)state;
    static const char text[] = "defaults = {\n  tries = 2;\n  queues = [\"x\"];\n};\n" MINPOOL;
    expect_error(text, line_of(text, "queues"), "queues", "defaults", NULL);
}

/* ------------------------------------------------------------ syntax and keys */

static void test_syntax_error(void **state)
{
    (void)state;
    static const char text[] = "qpool = {\n  max_workers = 4;\n  this is wrong\n};\n" MINPOOL;
    conf_errors_t e;
    char *path = NULL;
    qconf_t *c = load_text(text, &e, &path);
    assert_null(c);
    if (e.n != 1) print_errors(&e);
    assert_int_equal(e.n, 1);
    char prefix[PATH_MAX + 16];
    snprintf(prefix, sizeof prefix, "%s:3: ", path);
    if (strncmp(e.msgs[0], prefix, strlen(prefix))) fail_msg("got '%s', expected prefix '%s'", e.msgs[0], prefix);
    assert_non_null(strstr(e.msgs[0], "syntax error"));
    conf_errors_free(&e);
    free(path);

    /* a missing semicolon/brace at the end of a later line */
    static const char text2[] = "qpool = {\n  max_workers = 4;\n};\n\npools = ( { name = \"p\"; queues = [\"q\"; } );\n";
    expect_error(text2, 5, "syntax error", NULL);
}

static void test_unknown_key_with_suggestion(void **state)
{
    (void)state;
    static const char text[] =
        "pools = (\n"
        "  {\n"
        "    name = \"p\";\n"
        "    queues = [\"q\"];\n"
        "    command = [\"run\"];\n"
        "    tires = 3;\n"
        "  }\n"
        ");\n";
    expect_error(text, 6, "unknown key 'tires'", "did you mean 'tries'", NULL);

    static const char q[] = "qpool = {\n  max_worker = 3;\n};\n" MINPOOL;
    expect_error(q, 2, "unknown key 'max_worker'", "did you mean 'max_workers'", NULL);

    static const char r[] = "redis = {\n  default = {\n    hots = \"x\";\n  };\n};\n" MINPOOL;
    expect_error(r, 3, "unknown key 'hots'", "did you mean 'host'", NULL);

    static const char top[] = "poolz = ( );\n" MINPOOL;
    expect_error(top, 1, "unknown key 'poolz'", "did you mean 'pools'", NULL);

    static const char d[] = "defaults = {\n  memroy = 64;\n};\n" MINPOOL;
    expect_error(d, 2, "unknown key 'memroy'", "did you mean 'memory'", NULL);

    static const char h[] =
        "pools = ( { name = \"p\"; queues = [\"q\"];\n"
        "  handler = { type = \"pipe\"; comand = [\"x\"]; }; } );\n";
    expect_error(h, 2, "unknown key 'comand'", "did you mean 'command'", NULL);
}

static void test_unknown_key_without_suggestion(void **state)
{
    (void)state;
    static const char text[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
        "  completely_unrelated = 1; } );\n";
    conf_errors_t e;
    char *path = NULL;
    assert_null(load_text(text, &e, &path));
    assert_int_equal(e.n, 1);
    assert_non_null(strstr(e.msgs[0], "unknown key 'completely_unrelated'"));
    assert_null(strstr(e.msgs[0], "did you mean"));
    assert_non_null(strstr(e.msgs[0], ":2: "));
    conf_errors_free(&e);
    free(path);
}

/* laravel / php / php_adapter / php_root / force: checked before anything
 * runs; an app that cannot be read is an error at the laravel key's line. */
static void test_laravel_keys(void **state)
{
    (void)state;
    const char *rel = "pools = ( { name = \"p\"; queues = [\"q\"];\n  laravel = \"srv/app\"; } );\n";
    expect_error(rel, 2, "laravel", "must be an absolute path", NULL);
    const char *php = "defaults = {\n  php = [];\n};\npools = ( { name = \"p\"; laravel = \"/srv/app\"; } );\n";
    expect_error(php, 2, "php", NULL);
    const char *force = "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"x\"];\n  force = 1; } );\n";
    expect_error(force, 2, "force", NULL);
    /* the php command fails: the app, the reason, the line of laravel */
    const char *fails = "pools = ( { name = \"p\";\n  laravel = \"/srv/app\"; php = [\"/bin/false\"]; } );\n";
    expect_error(fails, 2, "cannot read the Laravel app /srv/app", "exited with status 1", NULL);
    /* it answers, but not with a description */
    const char *junk = "defaults = { laravel = \"/srv/app\";\n  php = [\"/bin/echo\"]; };\npools = ( { name = \"p\"; } );\n";
    expect_error(junk, 1, "cannot read the Laravel app /srv/app", "unusable", "not a JSON object", NULL);
    /* a command that cannot run */
    const char *nocmd = "pools = ( { name = \"p\"; laravel = \"/srv/app\"; php = [\"/no/such/php\"]; } );\n";
    expect_error(nocmd, 1, "cannot read the Laravel app", "exited with status 127", "cannot run /no/such/php", NULL);
}

static void test_wrong_types(void **state)
{
    (void)state;
    static const char t1[] =
        "pools = ( {\n  name = \"p\";\n  queues = [\"q\"];\n  command = [\"run\"];\n  tries = \"3\";\n} );\n";
    expect_error(t1, 5, "tries", "expected an integer", "string", NULL);

    static const char t2[] = "qpool = {\n  max_workers = \"many\";\n};\n" MINPOOL;
    expect_error(t2, 2, "max_workers", "expected an integer", NULL);

    static const char t3[] =
        "pools = ( {\n  name = \"p\";\n  queues = \"q\";\n  command = [\"run\"];\n} );\n";
    expect_error(t3, 3, "queues", "expected an array", NULL);

    static const char t4[] =
        "pools = ( {\n  name = \"p\";\n  queues = [\"q\"];\n  command = [\"run\"];\n  job_log = 1;\n} );\n";
    expect_error(t4, 5, "job_log", "true or false", NULL);

    static const char t5[] =
        "pools = ( {\n  name = \"p\";\n  queues = [\"q\"];\n  command = [\"run\"];\n  balance = \"sometimes\";\n} );\n";
    expect_error(t5, 5, "balance", "\"sometimes\"", NULL);

    static const char t6[] =
        "pools = ( {\n  name = \"p\";\n  queues = [\"q\"];\n  command = [\"run\"];\n  memory = -5;\n} );\n";
    expect_error(t6, 5, "memory", "out of range", NULL);

    static const char t7[] =
        "pools = ( {\n  name = \"p\";\n  queues = [\"q\"];\n  command = [\"run\"];\n  prefetch = 65;\n} );\n";
    expect_error(t7, 5, "prefetch", "out of range", NULL);
    static const char t8[] = "defaults = {\n  prefetch = 0;\n};\n" MINPOOL;
    expect_error(t8, 2, "prefetch", "out of range", NULL);
}

/* ------------------------------------------------------------ pool sizes */

static void test_size_settings_validated(void **state)
{
    (void)state;
    static const char minmax[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
        "  balance = \"auto\"; min_processes = 5; max_processes = 2; } );\n";
    expect_error(minmax, 0, "min_processes (5) is greater than max_processes (2)", NULL);

    static const char procauto[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
        "  balance = \"auto\"; processes = 3; } );\n";
    expect_error(procauto, 0, "pool p", "processes", "auto", NULL);

    static const char minoff[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
        "  balance = \"off\"; min_processes = 1; } );\n";
    expect_error(minoff, 0, "pool p", "min_processes", NULL);

    static const char maxoff[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
        "  max_processes = 4; } );\n";
    expect_error(maxoff, 0, "pool p", "max_processes", NULL);

    /* valid: auto with min/max, off with processes */
    qconf_t *c = must_load("pools = (\n"
                           "  { name = \"a\"; queues = [\"q\"]; command = [\"run\"]; balance = \"auto\";\n"
                           "    min_processes = 2; max_processes = 7; auto_strategy = \"size\"; priority = 3;\n"
                           "    target_wait = 2.5; scale_down_delay = 60; },\n"
                           "  { name = \"b\"; queues = [\"r\"]; command = [\"run\"]; processes = 3; }\n"
                           ");\n");
    assert_int_equal(c->pools[0].min_processes, 2);
    assert_int_equal(c->pools[0].max_processes, 7);
    assert_int_equal(c->pools[0].auto_strategy, STRATEGY_SIZE);
    assert_int_equal(c->pools[0].priority, 3);
    assert_true(c->pools[0].target_wait == 2.5);
    assert_true(c->pools[0].scale_down_delay == 60);
    assert_int_equal(c->pools[1].processes, 3);
    config_free(c);
}

static void test_pool_errors_name_the_pool_line(void **state)
{
    (void)state;
    /* pool-level errors point at the pool's group */
    static const char text[] =
        "pools = (\n"
        "  { name = \"good\"; queues = [\"q\"]; command = [\"run\"]; },\n"
        "  { name = \"bad\"; queues = [\"q\"]; balance = \"auto\";\n"
        "    min_processes = 3; max_processes = 1; command = [\"run\"]; }\n"
        ");\n";
    expect_error(text, 3, "pool bad", "min_processes (3) is greater than max_processes (1)", NULL);
}

static void test_max_workers_below_minimums(void **state)
{
    (void)state;
    static const char text[] =
        "qpool = { max_workers = 3; };\n"
        "pools = (\n"
        "  { name = \"a\"; queues = [\"q\"]; command = [\"run\"]; processes = 2; },\n"
        "  { name = \"b\"; queues = [\"r\"]; command = [\"run\"]; balance = \"auto\"; min_processes = 2; max_processes = 4; }\n"
        ");\n";
    expect_error(text, 0, "max_workers (3)", "(4)", NULL);
}

/* ------------------------------------------------------------ handler / command */

static void test_handler_or_command(void **state)
{
    (void)state;
    static const char both[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
        "  handler = { type = \"exec\"; command = [\"h\"]; }; } );\n";
    expect_error(both, 0, "pool p", "both handler and command", NULL);

    static const char neither[] = "pools = ( { name = \"p\"; queues = [\"q\"]; } );\n";
    expect_error(neither, 0, "pool p", "exactly one of handler", NULL);

    static const char notype[] =
        "pools = ( { name = \"p\"; queues = [\"q\"];\n  handler = { command = [\"h\"]; }; } );\n";
    expect_error(notype, 2, "handler", "type", NULL);

    qconf_t *c = must_load("pools = ( { name = \"p\"; queues = [\"q\"];\n"
                           "  handler = { type = \"exec\"; command = [\"h\", \"--x\"]; }; } );\n");
    assert_int_equal(c->pools[0].handler_type, HANDLER_EXEC);
    assert_string_equal(c->pools[0].handler_command[1], "--x");
    assert_null(c->pools[0].command);
    config_free(c);
}

/* preload: on by default for the PHP adapter only; preload = false and
 * protocol 1 opt out; a change rolls the pool (not a size change). */
static void test_preload(void **state)
{
    (void)state;
    qconf_t *c = must_load("defaults = { preload = true; };\n"
                           "pools = ( { name = \"a\"; queues = [\"q\"];\n"
                           "  handler = { type = \"pipe\"; command = [\"php\", \"/x/qpool-handler.php\", \"/app\"]; }; },\n"
                           "  { name = \"b\"; queues = [\"q\"]; preload = false;\n"
                           "  handler = { type = \"pipe\"; command = [\"php\", \"/x/qpool-handler.php\", \"/app\"]; }; },\n"
                           "  { name = \"c\"; queues = [\"q\"];\n"
                           "  handler = { type = \"pipe\"; protocol = 1; command = [\"php\", \"qpool-handler.php\", \"/app\"]; }; },\n"
                           "  { name = \"d\"; queues = [\"q\"]; handler = { type = \"pipe\"; command = [\"python3\", \"h.py\"]; }; },\n"
                           "  { name = \"e\"; queues = [\"q\"]; handler = { type = \"exec\"; command = [\"qpool-handler.php\"]; }; },\n"
                           "  { name = \"f\"; queues = [\"q\"]; command = [\"php\", \"qpool-handler.php\"]; } );\n");
    const pool_conf_t *p = c->pools;
    assert_true(p[0].preload && pool_runs_adapter(&p[0]) && pool_preloads(&p[0]));
    assert_true(pool_runs_adapter(&p[1]) && !pool_preloads(&p[1]));
    assert_true(pool_runs_adapter(&p[2]) && !pool_preloads(&p[2]));
    for (int i = 3; i < 6; i++) assert_false(pool_runs_adapter(&p[i]) || pool_preloads(&p[i]));
    pool_conf_t copy;
    pool_conf_copy(&copy, &p[0]);
    assert_true(pool_conf_same_except_size(&copy, &p[0]));
    copy.preload = false;
    assert_false(pool_conf_same_except_size(&copy, &p[0]));
    pool_conf_free(&copy);
    config_free(c);
    expect_error("pools = ( { name = \"p\"; queues = [\"q\"]; preload = 1;\n"
                 "  handler = { type = \"exec\"; command = [\"h\"]; }; } );\n", 1, "preload", NULL);
}

static void test_missing_name_or_queues(void **state)
{
    (void)state;
    static const char noname[] = "pools = ( { queues = [\"q\"]; command = [\"run\"]; } );\n";
    expect_error(noname, 0, "name is required", NULL);
    static const char noqueues[] = "pools = ( { name = \"p\"; command = [\"run\"]; } );\n";
    expect_error(noqueues, 0, "pool p", "queues is required", NULL);
    static const char nopools[] = "qpool = { max_workers = 2; };\n";
    expect_error(nopools, 0, "no pools defined", NULL);
}

/* ------------------------------------------------------------ command placeholders */

static void test_unknown_placeholder(void **state)
{
    (void)state;
    static const char text[] =
        "pools = ( { name = \"p\"; queues = [\"q\"];\n  command = [\"run\", \"--x={nope}\"]; } );\n";
    expect_error(text, 0, "pool p", "unknown placeholder {nope}", NULL);

    static const char unclosed[] =
        "pools = ( { name = \"p\"; queues = [\"q\"];\n  command = [\"run\", \"--x={queues\"]; } );\n";
    expect_error(unclosed, 0, "pool p", "unknown placeholder", NULL);
}

static void test_expand_command(void **state)
{
    (void)state;
    qconf_t *c = must_load(
        "pools = ( {\n"
        "  name = \"mail\";\n"
        "  queues = [\"high\", \"low\", \"default\"];\n"
        "  memory = 256; timeout = 30; tries = 3; sleep = 0.5; backoff = [1, 2, 3];\n"
        "  rest = 2; max_jobs = 100; max_time = 3600; retry_after = 120;\n"
        "  queue_connection = \"redis-jobs\";\n"
        "  command = [\"php\", \"artisan\", \"queue:work\", \"--queue={queues}\", \"--name={pool}\",\n"
        "             \"--memory={memory}\", \"--timeout={timeout}\", \"--tries={tries}\",\n"
        "             \"--sleep={sleep}\", \"--backoff={backoff}\", \"{{literal}}\", \"a{{b}}c{pool}\",\n"
        "             \"{connection}\", \"--rest={rest}\", \"--max-jobs={max_jobs}\",\n"
        "             \"--max-time={max_time}\", \"{retry_after}\", \"plain\", \"}\", \"\"];\n"
        "} );\n");
    const pool_conf_t *p = &c->pools[0];
    char **argv = config_expand_command(p);
    static const char *const expect[] = {
        "php", "artisan", "queue:work", "--queue=high,low,default", "--name=mail", "--memory=256",
        "--timeout=30", "--tries=3", "--sleep=0.5", "--backoff=1,2,3", "{literal}", "a{b}cmail",
        "redis-jobs", "--rest=2", "--max-jobs=100", "--max-time=3600", "120", "plain", "}", "", NULL};
    for (int i = 0; expect[i]; i++) {
        if (!argv[i]) fail_msg("argv[%d] missing, expected %s", i, expect[i]);
        assert_string_equal(argv[i], expect[i]);
    }
    assert_null(argv[sizeof expect / sizeof expect[0] - 1]);
    /* the template itself is unchanged */
    assert_string_equal(p->command[3], "--queue={queues}");
    free_strv(argv);
    char buf[64];
    config_backoff_str(p, buf, sizeof buf);
    assert_string_equal(buf, "1,2,3");
    config_free(c);

    /* whole-number sleep prints without a decimal point, as queue:work expects */
    c = must_load("pools = ( { name = \"p\"; queues = [\"q\"]; sleep = 2; command = [\"--sleep={sleep}\"]; } );\n");
    argv = config_expand_command(&c->pools[0]);
    assert_string_equal(argv[0], "--sleep=2");
    free_strv(argv);
    config_free(c);
}

/* ------------------------------------------------------------ backoff */

static void test_backoff_forms(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int n;
        int v[3];
    } ok[] = {
        {"5", 1, {5}},
        {"[10, 30, 60]", 3, {10, 30, 60}},
        {"\"10,30,60\"", 3, {10, 30, 60}},
        {"\"10, 30\"", 2, {10, 30}},
        {"\"7\"", 1, {7}},
        {"( 1, 2 )", 2, {1, 2}},
        {"0", 1, {0}},
        {"\"31536000\"", 1, {31536000}},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; backoff = %s; } );\n",
                 ok[i].value);
        qconf_t *c = must_load(text);
        const pool_conf_t *p = &c->pools[0];
        if (p->nbackoff != ok[i].n) fail_msg("backoff = %s: %d values, expected %d", ok[i].value, p->nbackoff, ok[i].n);
        for (int k = 0; k < ok[i].n; k++) assert_int_equal(p->backoff[k], ok[i].v[k]);
        config_free(c);
    }
    /* review #13: a string's values were not range-checked and were cut to
     * int (qpool check printed [10, -2147483648, 1215752191]) */
    static const char *const bad[] = {"\"abc\"", "[]", "-1", "[1, -2]", "\"1,x\"", "[\"1\"]", "\"\"", "true",
                                      "\"4294967306, 2147483648, 99999999999\"", "\"31536001\"", "[31536001]",
                                      "31536001", "\"10, 31536001\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n  backoff = %s; } );\n", bad[i]);
        expect_error(text, 2, "backoff", NULL);
    }
}

static void test_group_without_user_is_an_error(void **state)
{
    (void)state;
    /* review #16: setgid alone left the children root's user id */
    expect_error("pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n  group = \"root\"; } );\n", 1,
                 "group \"root\" without user", NULL);
    qconf_t *c = must_load("pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; user = \"root\"; "
                           "group = \"root\"; } );\n");
    assert_true(c->pools[0].has_uid && c->pools[0].has_gid);
    config_free(c);
}

/* ------------------------------------------------------------ names and references */

static void test_undefined_connection(void **state)
{
    (void)state;
    static const char text[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; connection = \"nope\"; } );\n";
    expect_error(text, 0, "pool p", "connection \"nope\" is not defined", NULL);
    static const char cache[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; cache_connection = \"nope\"; } );\n";
    expect_error(cache, 0, "pool p", "cache_connection \"nope\" is not defined", NULL);
}

static void test_duplicate_pool_name(void **state)
{
    (void)state;
    static const char text[] =
        "pools = (\n"
        "  { name = \"dup\"; queues = [\"a\"]; command = [\"run\"]; },\n"
        "  { name = \"other\"; queues = [\"b\"]; command = [\"run\"]; },\n"
        "  { name = \"dup\"; queues = [\"c\"]; command = [\"run\"]; }\n"
        ");\n";
    expect_error(text, 4, "\"dup\"", "used twice", "line 2", NULL);
}

static void test_queue_names(void **state)
{
    (void)state;
    static const char comma[] =
        "pools = ( { name = \"p\";\n  queues = [\"a,b\"];\n  command = [\"run\"]; } );\n";
    expect_error(comma, 2, "queues", "\"a,b\"", NULL);
    static const char empty[] =
        "pools = ( { name = \"p\";\n  queues = [\"\"];\n  command = [\"run\"]; } );\n";
    expect_error(empty, 2, "queues", NULL);
    static const char twice[] =
        "pools = ( { name = \"p\";\n  queues = [\"a\", \"a\"];\n  command = [\"run\"]; } );\n";
    expect_error(twice, 2, "\"a\"", "twice", NULL);
    static const char none[] =
        "pools = ( { name = \"p\";\n  queues = [];\n  command = [\"run\"]; } );\n";
    expect_error(none, 2, "queues", "empty", NULL);
    static const char badname[] =
        "pools = ( {\n  name = \"has space\";\n  queues = [\"q\"];\n  command = [\"run\"]; } );\n";
    expect_error(badname, 2, "name", "has space", NULL);
}

static void test_users_and_groups(void **state)
{
    (void)state;
    static const char text[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; user = \"qpool-no-such-user-x\"; } );\n";
    expect_error(text, 0, "pool p", "user \"qpool-no-such-user-x\" does not exist", NULL);
    static const char grp[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; group = \"qpool-no-such-group-x\"; } );\n";
    expect_error(grp, 0, "pool p", "group \"qpool-no-such-group-x\" does not exist", NULL);
    static const char cu[] = "qpool = {\n  control_user = \"qpool-no-such-user-x\";\n};\n" MINPOOL;
    expect_error(cu, 0, "control_user", "does not exist", NULL);

    /* root always exists: uid and primary gid resolved */
    qconf_t *c = must_load(
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; user = \"root\"; } );\n");
    assert_true(c->pools[0].has_uid);
    assert_int_equal(c->pools[0].uid, 0);
    assert_true(c->pools[0].has_gid);
    assert_int_equal(c->pools[0].gid, 0);
    config_free(c);
}

static void test_control_socket_mode(void **state)
{
    (void)state;
    qconf_t *c = must_load("qpool = { control_socket_mode = \"0640\"; };\n" MINPOOL);
    assert_int_equal(c->control_socket_mode, 0640);
    config_free(c);
    c = must_load("qpool = { control_socket_mode = \"600\"; };\n" MINPOOL);
    assert_int_equal(c->control_socket_mode, 0600);
    config_free(c);
    static const char *const bad[] = {"\"99\"", "\"0999\"", "\"1777\"", "\"\"", "\"rw\"", "660"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "qpool = {\n  control_socket_mode = %s;\n};\n" MINPOOL, bad[i]);
        expect_error(text, 2, "control_socket_mode", NULL);
    }
}

static void test_http_settings(void **state)
{
    (void)state;
    qconf_t *c = must_load(MINPOOL);
    assert_null(c->http.listen); /* off unless configured */
    config_free(c);
    c = must_load("qpool = { http = { listen = \"127.0.0.1:9178\"; }; };\n" MINPOOL);
    assert_true(c->http.loopback && !c->http.is_unix);
    assert_string_equal(c->http.host, "127.0.0.1");
    assert_int_equal(c->http.port, 9178);
    assert_int_equal(c->http.max_connections, 64);
    assert_int_equal(c->http.timeout, 10);
    assert_int_equal(c->http.header_timeout, 5);
    config_free(c);
    c = must_load("qpool = { http = { listen = \"[::1]:80\"; max_connections = 5; timeout = 3; header_timeout = 2; }; };\n" MINPOOL);
    assert_true(c->http.loopback);
    assert_int_equal(c->http.header_timeout, 2);
    expect_error("qpool = {\n  http = { listen = \"[::1]:80\"; header_timeout = 0; };\n};\n" MINPOOL, 2, "header_timeout", NULL);
    assert_string_equal(c->http.host, "::1");
    config_free(c);
    c = must_load("qpool = { http = { listen = \"/run/q/http.sock\"; socket_mode = \"0666\"; }; };\n" MINPOOL);
    assert_true(c->http.is_unix && c->http.loopback);
    assert_int_equal(c->http.socket_mode, 0666);
    config_free(c);
    c = must_load("qpool = { http = { listen = \"*:9178\"; token_env = \"T\"; }; };\n" MINPOOL);
    assert_false(c->http.loopback);
    assert_string_equal(c->http.host, "0.0.0.0");
    config_free(c);
    /* not loopback and no token: refused, naming the line */
    expect_error("qpool = {\n  http = { listen = \"0.0.0.0:9178\"; };\n};\n" MINPOOL, 2, "not loopback", "token", NULL);
    expect_error("qpool = {\n  http = { listen = \"10.1.2.3:80\"; };\n};\n" MINPOOL, 2, "not loopback", NULL);
    static const char *const bad[] = {"\"9178\"", "\"127.0.0.1\"", "\"127.0.0.1:0\"", "\"127.0.0.1:70000\"",
                                      "\"example.com:80\"", "\"127.0.0.1:80x\"", "\"relative.sock\"", "9178"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "qpool = {\n  http = {\n    listen = %s;\n  };\n};\n" MINPOOL, bad[i]);
        expect_error(text, 3, "listen", NULL);
    }
    expect_error("qpool = {\n  http = {\n    listn = \"127.0.0.1:1\";\n  };\n};\n" MINPOOL, 3, "listen", NULL);
    expect_error("qpool = {\n  http = { listen = \"127.0.0.1:1\"; user = \"no-such-user-x\"; };\n};\n" MINPOOL, 2,
                 "no-such-user-x", NULL);
    expect_error("qpool = {\n  http = { listen = \"127.0.0.1:1\"; connection = \"nope\"; };\n};\n" MINPOOL, 1,
                 "nope", NULL);
    expect_error("qpool = {\n  http = { listen = \"127.0.0.1:1\"; user = \"root\"; };\n};\n" MINPOOL, 2, "root", NULL);
    expect_error("qpool = {\n  http = { listen = \"/tmp/q.sock\"; };\n  control_socket = \"/tmp/q.sock\";\n};\n" MINPOOL, 1,
                 "control socket", NULL);
}

/* Review 2026-11-24 #1: reading anything but aggregates needs the token by
 * default; open reads are said plainly; the old key loads, with a warning
 * that says what it now means. */
static void test_http_read_without_token(void **state)
{
    (void)state;
    qconf_t *c = must_load("qpool = { http = { listen = \"127.0.0.1:9178\"; }; };\n" MINPOOL);
    assert_int_equal(c->http.read_without_token, HTTP_READ_AGGREGATES);
    config_free(c);
    c = must_load("qpool = { http = { listen = \"127.0.0.1:9178\"; read_without_token = \"all\"; }; };\n" MINPOOL);
    assert_int_equal(c->http.read_without_token, HTTP_READ_ALL);
    config_free(c);
    c = must_load("qpool = { http = { listen = \"127.0.0.1:9178\"; read_without_token = \"none\"; }; };\n" MINPOOL);
    assert_int_equal(c->http.read_without_token, HTTP_READ_NONE);
    config_free(c);
    expect_error("qpool = {\n  http = {\n listen = \"127.0.0.1:1\";\n read_without_token = \"yes\"; };\n};\n" MINPOOL, 4,
                 "read_without_token", "aggregates", NULL);
    static const struct { const char *v; int want; const char *says; } legacy[] = {
        {"true", HTTP_READ_AGGREGATES, "read_without_token = \"aggregates\""},
        {"false", HTTP_READ_NONE, "read_without_token = \"none\""},
    };
    for (size_t i = 0; i < 2; i++) {
        char text[256];
        snprintf(text, sizeof text, "qpool = { http = { listen = \"127.0.0.1:1\"; read_only_without_token = %s; }; };\n" MINPOOL,
                 legacy[i].v);
        conf_errors_t e;
        c = load_text(text, &e, NULL);
        assert_non_null(c);
        assert_int_equal(c->http.read_without_token, legacy[i].want);
        assert_int_equal(e.nwarn, 1);
        assert_non_null(strstr(e.warnings[0], "deprecated"));
        assert_non_null(strstr(e.warnings[0], legacy[i].says));
        config_free(c);
        conf_errors_free(&e);
    }
    expect_error("qpool = {\n  http = { listen = \"127.0.0.1:1\"; read_only_without_token = true; read_without_token = \"all\"; };\n};\n"
                 MINPOOL, 2, "read_without_token only", NULL);
    /* on a listener that is not loopback it changes nothing: said so */
    {
        conf_errors_t e;
        c = load_text("qpool = { http = { listen = \"0.0.0.0:1\"; token_env = \"T\"; read_without_token = \"all\"; }; };\n"
                      MINPOOL, &e, NULL);
        assert_non_null(c);
        assert_int_equal(e.nwarn, 1);
        assert_non_null(strstr(e.warnings[0], "loopback or Unix listener only"));
        config_free(c);
        conf_errors_free(&e);
    }
    /* socket_group: a Unix listener's, and a group that exists */
    c = must_load("qpool = { http = { listen = \"/run/q/http.sock\"; socket_group = \"root\"; }; };\n" MINPOOL);
    assert_string_equal(c->http.socket_group, "root");
    assert_int_equal(c->http.socket_gid, 0);
    config_free(c);
    expect_error("qpool = {\n  http = { listen = \"127.0.0.1:1\"; socket_group = \"root\"; };\n};\n" MINPOOL, 2,
                 "socket_group", "Unix", NULL);
    expect_error("qpool = {\n  http = { listen = \"/run/q/h.sock\"; socket_group = \"no-such-group-x\"; };\n};\n" MINPOOL,
                 1, "no-such-group-x", NULL);
}

static void test_global_settings(void **state)
{
    (void)state;
    qconf_t *c = must_load("qpool = {\n"
                           "  pid_file = \"/tmp/x.pid\";\n"
                           "  control_socket = \"/tmp/x.sock\";\n"
                           "  max_workers = 12;\n"
                           "  shutdown_timeout = 7.5;\n"
                           "  log_level = \"debug\";\n"
                           "  log_format = \"json\";\n"
                           "  failed_limit = 50;\n"
                           "  balance_interval = 0.5;\n"
                           "};\n" MINPOOL);
    assert_string_equal(c->pid_file, "/tmp/x.pid");
    assert_string_equal(c->control_socket, "/tmp/x.sock");
    assert_int_equal(c->max_workers, 12);
    assert_true(c->shutdown_timeout == 7.5);
    assert_int_equal(c->failed_limit, 50);
    assert_true(c->balance_interval == 0.5);
    config_free(c);
    static const char lvl[] = "qpool = {\n  log_level = \"loud\";\n};\n" MINPOOL;
    expect_error(lvl, 2, "log_level", "\"loud\"", NULL);
    static const char mw[] = "qpool = {\n  max_workers = 0;\n};\n" MINPOOL;
    expect_error(mw, 2, "max_workers", "out of range", NULL);
}

static void test_working_directory_absolute(void **state)
{
    (void)state;
    static const char text[] =
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n  working_directory = \"srv/app\"; } );\n";
    expect_error(text, 2, "working_directory", "absolute", NULL);
}

static void test_timeout_not_below_retry_after_warns(void **state)
{
    (void)state;
    conf_errors_t e;
    qconf_t *c = load_text(
        "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; timeout = 90; retry_after = 90; } );\n", &e,
        NULL);
    assert_non_null(c); /* a warning, not an error */
    assert_int_equal(e.n, 0);
    assert_int_equal(e.nwarn, 1);
    assert_non_null(strstr(e.warnings[0], "retry_after"));
    config_free(c);
    conf_errors_free(&e);
}

/* ------------------------------------------------------------ files */

static void test_missing_file(void **state)
{
    (void)state;
    char *path = NULL;
    assert_true(asprintf(&path, "%s/does-not-exist.conf", tmpdir) > 0);
    conf_errors_t e;
    qconf_t *c = config_load(path, &e);
    assert_null(c);
    assert_true(e.n >= 1);
    assert_non_null(strstr(e.msgs[0], path));
    assert_non_null(strstr(e.msgs[0], "cannot read"));
    conf_errors_free(&e);
    free(path);
}

static void test_include_reports_included_file(void **state)
{
    (void)state;
    static const char inc[] =
        "pools = (\n"
        "  { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
        "    balance = \"off\";\n"
        "    tires = 2; }\n"
        ");\n";
    char *incpath = write_file("pools-bad.inc", inc);
    static const char main_text[] = "qpool = { max_workers = 8; };\n@include \"pools-bad.inc\"\n";
    conf_errors_t e;
    char *path = NULL;
    qconf_t *c = load_text(main_text, &e, &path);
    assert_null(c);
    bool found = false;
    for (int i = 0; i < e.n; i++)
        if (strstr(e.msgs[i], "pools-bad.inc:4: ") && strstr(e.msgs[i], "tires") &&
            strncmp(e.msgs[i], path, strlen(path)))
            found = true;
    if (!found) {
        print_errors(&e);
        fail_msg("no error at pools-bad.inc:4");
    }
    conf_errors_free(&e);
    free(path);

    /* a syntax error inside the included file names that file */
    char *incsyn = write_file("pools-syntax.inc", "pools = (\n  { name = \"p\" }\n  oops\n);\n");
    c = load_text("@include \"pools-syntax.inc\"\n", &e, &path);
    assert_null(c);
    assert_int_equal(e.n, 1);
    if (!strstr(e.msgs[0], "pools-syntax.inc:")) fail_msg("got %s", e.msgs[0]);
    assert_non_null(strstr(e.msgs[0], "syntax error"));
    conf_errors_free(&e);
    free(path);

    /* and a good included file loads */
    char *incgood = write_file("pools-good.inc", MINPOOL);
    c = must_load("qpool = { max_workers = 8; };\n@include \"pools-good.inc\"\n");
    assert_int_equal(c->npools, 1);
    assert_string_equal(c->pools[0].name, "p");
    config_free(c);
    free(incpath);
    free(incsyn);
    free(incgood);
}

static void test_multiple_errors_all_reported(void **state)
{
    (void)state;
    static const char text[] =
        "qpool = {\n"
        "  max_wrokers = 4;\n"                 /* 2: unknown key */
        "  log_level = \"loud\";\n"            /* 3: bad enum */
        "};\n"
        "redis = {\n"
        "  default = {\n"
        "    port = \"6379\";\n"               /* 7: wrong type */
        "  };\n"
        "};\n"
        "pools = (\n"
        "  {\n"
        "    name = \"p\";\n"
        "    queues = [\"q\"];\n"
        "    command = [\"run\", \"{nope}\"];\n" /* pool: unknown placeholder */
        "    tries = \"many\";\n"              /* 15: wrong type */
        "    user = \"qpool-no-such-user-x\";\n" /* pool: unknown user */
        "  }\n"
        ");\n";
    conf_errors_t e;
    char *path = NULL;
    assert_null(load_text(text, &e, &path));
    struct {
        int line;
        const char *needle;
    } want[] = {{2, "max_wrokers"}, {3, "log_level"}, {7, "port"}, {15, "tries"},
                {0, "{nope}"},     {0, "qpool-no-such-user-x"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        bool found = false;
        for (int k = 0; k < e.n; k++) {
            char prefix[PATH_MAX + 16];
            if (want[i].line)
                snprintf(prefix, sizeof prefix, "%s:%d: ", path, want[i].line);
            else
                snprintf(prefix, sizeof prefix, "%s:", path);
            if (!strncmp(e.msgs[k], prefix, strlen(prefix)) && strstr(e.msgs[k], want[i].needle)) found = true;
        }
        if (!found) {
            print_errors(&e);
            fail_msg("no error for %s (line %d)", want[i].needle, want[i].line);
        }
    }
    assert_int_equal(e.n, 6);
    conf_errors_free(&e);
    free(path);
}

/* ------------------------------------------------------------ print / compare */

static void assert_same_config(const qconf_t *a, const qconf_t *b)
{
    assert_string_equal(a->pid_file, b->pid_file);
    assert_string_equal(a->control_socket, b->control_socket);
    assert_int_equal(a->control_socket_mode, b->control_socket_mode);
    assert_int_equal(a->max_workers, b->max_workers);
    assert_true(a->shutdown_timeout == b->shutdown_timeout);
    assert_int_equal(a->log_level, b->log_level);
    assert_int_equal(a->log_format, b->log_format);
    assert_int_equal(a->failed_limit, b->failed_limit);
    assert_true(a->balance_interval == b->balance_interval);
    assert_int_equal(a->nredis, b->nredis);
    for (int i = 0; i < a->nredis; i++) {
        const redis_conf_t *rb = config_redis(b, a->redis[i].name);
        if (!rb) fail_msg("redis %s lost in the round trip", a->redis[i].name);
        if (!redis_conf_same(&a->redis[i], rb)) fail_msg("redis %s differs after the round trip", a->redis[i].name);
    }
    assert_int_equal(a->npools, b->npools);
    for (int i = 0; i < a->npools; i++) {
        const pool_conf_t *pa = &a->pools[i], *pb = &b->pools[i];
        assert_string_equal(pa->name, pb->name);
        if (!pool_conf_same_except_size(pa, pb)) {
            for (int k = 0; k < pa->nenv && k < pb->nenv; k++)
                if (strcmp(pa->env[k].value, pb->env[k].value))
                    print_error("  environment %s: %zu bytes before, %zu bytes after (\"%s\")\n", pa->env[k].name,
                                strlen(pa->env[k].value), strlen(pb->env[k].value), pb->env[k].value);
            fail_msg("pool %s: settings differ after the round trip", pa->name);
        }
        if (!pool_conf_same_size(pa, pb))
            fail_msg("pool %s: size settings differ after the round trip: balance %d/%d processes %d/%d "
                     "min %d/%d max %d/%d (before/after)",
                     pa->name, pa->balance, pb->balance, pa->processes, pb->processes, pa->min_processes,
                     pb->min_processes, pa->max_processes, pb->max_processes);
        assert_int_equal(pa->auto_strategy, pb->auto_strategy);
        assert_true(pa->target_wait == pb->target_wait);
        assert_true(pa->scale_down_delay == pb->scale_down_delay);
        assert_int_equal(pa->priority, pb->priority);
        assert_int_equal(pa->has_uid, pb->has_uid);
        assert_int_equal(pa->uid, pb->uid);
        assert_int_equal(pa->has_gid, pb->has_gid);
        assert_int_equal(pa->gid, pb->gid);
    }
}

/* What a round trip holds, freed by rt_teardown when an assertion fails halfway. */
static qconf_t *rt_a, *rt_b;
static char *rt_path;

static int rt_teardown(void **state)
{
    (void)state;
    config_free(rt_a);
    config_free(rt_b);
    free(rt_path);
    rt_a = rt_b = NULL;
    rt_path = NULL;
    return 0;
}

/* config_print the loaded text, load the printed file, compare. */
static void round_trip(const char *text)
{
    rt_teardown(NULL);
    rt_a = must_load(text);
    char name[32];
    snprintf(name, sizeof name, "printed%03d.conf", ++nfiles);
    assert_true(asprintf(&rt_path, "%s/%s", tmpdir, name) > 0);
    FILE *f = fopen(rt_path, "w");
    assert_non_null(f);
    config_print(rt_a, f);
    assert_int_equal(fclose(f), 0);
    conf_errors_t e;
    rt_b = config_load(rt_path, &e);
    if (!rt_b) {
        print_errors(&e);
        conf_errors_free(&e);
        fail_msg("config_print output does not load (%s)", rt_path);
    }
    conf_errors_free(&e);
    assert_same_config(rt_a, rt_b);
    rt_teardown(NULL);
}

static void test_print_round_trip(void **state)
{
    (void)state;
    round_trip(
        "qpool = {\n"
        "  pid_file = \"/tmp/q.pid\"; control_socket = \"/tmp/q.sock\"; control_socket_mode = \"0640\";\n"
        "  control_user = \"root\"; control_group = \"root\";\n"
        "  max_workers = 20; shutdown_timeout = 30.5; log_level = \"warn\"; log_format = \"json\";\n"
        "  failed_limit = 99; balance_interval = 0.25;\n"
        "};\n"
        "redis = {\n"
        "  default = { host = \"redis.internal\"; port = 6380; db = 2; prefix = \"app_\"; timeout = 2.5; };\n"
        "  cache = { socket = \"/run/redis.sock\"; db = 3; username = \"u\"; password_env = \"REDIS_PW\"; };\n"
        "};\n"
        "defaults = { tries = 3; backoff = \"10,30,60\"; sleep = 0.5; rest = 1.5; job_log = false; };\n"
        "pools = (\n"
        "  { name = \"native\"; queues = [\"high\", \"low\"]; balance = \"auto\"; min_processes = 2;\n"
        "    max_processes = 10; auto_strategy = \"size\"; target_wait = 4.5; scale_down_delay = 12;\n"
        "    priority = 7;\n"
        "    handler = { type = \"pipe\"; command = [\"php\", \"/srv/app/h.php\"]; start_timeout = 15; };\n"
        "    user = \"root\"; group = \"root\"; working_directory = \"/srv/app\";\n"
        "    environment = { APP_ENV = \"production\"; QUOTED = \"a \\\"b\\\" c\\\\d\\te\"; };\n"
        "    nice = 5; laravel_pause = false; restart_key = \"\"; max_jobs = 1000; max_time = 3600;\n"
        "    memory = 512; timeout = 45; retry_after = 300; migration_batch = 50; prefetch = 16;\n"
        "    cache_prefix = \"myapp_cache_\"; queue_connection = \"redis-q\"; },\n"
        "  { name = \"external\"; queues = [\"default\"]; processes = 3; connection = \"cache\";\n"
        "    command = [\"php\", \"artisan\", \"queue:work\", \"--queue={queues}\", \"--sleep={sleep}\", \"{{x}}\"]; },\n"
        "  { name = \"exec\"; queues = [\"e\"]; balance = \"auto\"; max_processes = 2;\n"
        "    handler = { type = \"exec\"; command = [\"/bin/true\"]; }; tries = 0; backoff = [0]; }\n"
        ");\n");
    /* the minimal config and the shipped example too */
    round_trip(MINPOOL);
    if (getpwnam("www-data")) {
        char *ex = NULL;
        assert_true(asprintf(&ex, "%s/etc/qpool.conf", source_dir()) > 0);
        FILE *f = fopen(ex, "r");
        assert_non_null(f);
        char buf[16384];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        round_trip(buf);
        free(ex);
    }
}

/* Sizes a balance mode does not use may come from `defaults` (processes for
 * an auto pool, min/max for an off pool). config_print leaves them out, as it
 * must (an auto pool may not set processes), so the printed config reloads
 * with other values there: the reload must still count as "same size". */
static void test_print_round_trip_size_defaults(void **state)
{
    (void)state;
    round_trip("defaults = { processes = 2; min_processes = 2; max_processes = 6; };\n"
               "pools = (\n"
               "  { name = \"off\"; queues = [\"a\"]; command = [\"run\"]; },\n"
               "  { name = \"auto\"; queues = [\"b\"]; command = [\"run\"]; balance = \"auto\"; }\n"
               ");\n");
}

/* libconfig strings know \" \\ \f \n \r \t and \xNN, not JSON's \u00XX:
 * a control character must survive config_print -> config_load. */
static void test_print_round_trip_control_chars(void **state)
{
    (void)state;
    round_trip("pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"];\n"
               "  environment = { ESC = \"\\x1b[0m\"; BELL = \"a\\x07b\"; }; } );\n");
}

/* Two pools "p" and "p2" with extra settings each (a default command unless
 * the extra settings give one). */
static qconf_t *two_pools(const char *a_extra, const char *b_extra)
{
    char text[1024];
    const char *ca = strstr(a_extra, "command") ? "" : "command = [\"run\"];";
    const char *cb = strstr(b_extra, "command") ? "" : "command = [\"run\"];";
    snprintf(text, sizeof text,
             "redis = { other = { db = 1; }; };\n"
             "pools = (\n"
             "  { name = \"p\"; queues = [\"q\"]; %s %s },\n"
             "  { name = \"p2\"; queues = [\"q\"]; %s %s }\n"
             ");\n",
             ca, a_extra, cb, b_extra);
    return must_load(text);
}

static void check_same(const char *a_extra, const char *b_extra, bool same_except_size, bool same_size)
{
    qconf_t *c = two_pools(a_extra, b_extra);
    /* compare as if p2 were p with other settings */
    pool_conf_t b;
    pool_conf_copy(&b, &c->pools[1]);
    free(b.name);
    b.name = strdup(c->pools[0].name);
    bool se = pool_conf_same_except_size(&c->pools[0], &b);
    bool ss = pool_conf_same_size(&c->pools[0], &b);
    pool_conf_free(&b);
    config_free(c);
    if (se != same_except_size || ss != same_size)
        fail_msg("{ %s } vs { %s }: same_except_size %d (expected %d), same_size %d (expected %d)", a_extra, b_extra,
                 se, same_except_size, ss, same_size);
}

static void test_same_except_size_and_same_size(void **state)
{
    (void)state;
    check_same("", "", true, true);
    check_same("processes = 2;", "processes = 5;", true, false);
    check_same("balance = \"auto\"; max_processes = 4;", "balance = \"auto\"; max_processes = 8;", true, false);
    check_same("balance = \"auto\"; min_processes = 1; max_processes = 4;",
               "balance = \"auto\"; min_processes = 2; max_processes = 4;", true, false);
    check_same("balance = \"off\";", "balance = \"auto\";", true, false);
    check_same("tries = 1;", "tries = 2;", false, true);
    check_same("backoff = [1, 2];", "backoff = [1, 3];", false, true);
    check_same("backoff = [1];", "backoff = [1, 1];", false, true);
    check_same("memory = 128;", "memory = 256;", false, true);
    check_same("sleep = 1;", "sleep = 1.5;", false, true);
    check_same("environment = { A = \"1\"; };", "environment = { A = \"2\"; };", false, true);
    check_same("", "environment = { A = \"1\"; };", false, true);
    check_same("", "user = \"root\";", false, true);
    check_same("", "queue_connection = \"other\";", false, true);
    check_same("", "cache_connection = \"other\";", false, true);
    check_same("", "connection = \"other\";", false, true);
    check_same("", "nice = 3;", false, true);
    check_same("", "job_log = false;", false, true);
    check_same("command = [\"a\", \"b\"];", "command = [\"a\", \"c\"];", false, true);
    check_same("processes = 2; tries = 1;", "processes = 3; tries = 2;", false, false);

    /* pool_conf_copy is deep and compares equal */
    qconf_t *c = two_pools("environment = { A = \"1\"; }; backoff = [1, 2, 3]; user = \"root\";", "");
    pool_conf_t cp;
    pool_conf_copy(&cp, &c->pools[0]);
    assert_true(pool_conf_same_except_size(&cp, &c->pools[0]));
    assert_true(pool_conf_same_size(&cp, &c->pools[0]));
    assert_ptr_not_equal(cp.backoff, c->pools[0].backoff);
    assert_ptr_not_equal(cp.env, c->pools[0].env);
    pool_conf_free(&cp);
    config_free(c);
}

/* A reload must notice a change to any balancer setting: master.c skips a
 * pool when both compare functions say "same", so a setting neither one
 * compares is silently never applied. */
static void test_balancer_settings_changes_detected(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"balance = \"auto\"; priority = 1;", "balance = \"auto\"; priority = 5;"},
        {"balance = \"auto\"; target_wait = 10;", "balance = \"auto\"; target_wait = 2;"},
        {"balance = \"auto\"; scale_down_delay = 30;", "balance = \"auto\"; scale_down_delay = 300;"},
        {"balance = \"auto\"; auto_strategy = \"time\";", "balance = \"auto\"; auto_strategy = \"size\";"},
    };
    int missed = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        qconf_t *c = two_pools(pairs[i][0], pairs[i][1]);
        pool_conf_t b;
        pool_conf_copy(&b, &c->pools[1]);
        free(b.name);
        b.name = strdup(c->pools[0].name);
        if (pool_conf_same_except_size(&c->pools[0], &b) && pool_conf_same_size(&c->pools[0], &b)) {
            print_error("{ %s } -> { %s }: both compare functions say same\n", pairs[i][0], pairs[i][1]);
            missed++;
        }
        pool_conf_free(&b);
        config_free(c);
    }
    assert_int_equal(missed, 0);
}

static void test_config_path(void **state)
{
    (void)state;
    unsetenv("QPOOL_CONFIG");
    assert_string_equal(config_path("/x.conf"), "/x.conf");
    assert_string_equal(config_path(NULL), QPOOL_DEFAULT_CONFIG);
    assert_string_equal(config_path(""), QPOOL_DEFAULT_CONFIG);
    setenv("QPOOL_CONFIG", "/env.conf", 1);
    assert_string_equal(config_path(NULL), "/env.conf");
    assert_string_equal(config_path("/x.conf"), "/x.conf");
    unsetenv("QPOOL_CONFIG");
}

/* Security review 2026-11-27 m3: what a native worker of pool a keeps of
 * the config after its fork: its connection's and cache connection's
 * passwords; no other connection's, and no pool's environment (it runs its
 * pool's own copy). */
static void test_wipe_secrets_but_a_pool(void **state)
{
    (void)state;
    qconf_t *c = must_load("redis = { default = { }; cache = { }; other = { }; };\n"
                           "pools = ( { name = \"a\"; queues = [\"q\"]; command = [\"run\"];"
                           " environment = { APP_KEY = \"ka\"; }; },\n"
                           "  { name = \"b\"; connection = \"other\"; queues = [\"q\"]; command = [\"run\"];"
                           " environment = { APP_KEY = \"kb\"; }; } );\n");
    assert_string_equal(c->pools[0].cache_connection, "cache");
    for (int i = 0; i < c->nredis; i++) {
        c->redis[i].password = xstrdup("pw");
        c->redis[i].file_password = xstrdup("fpw");
    }
    config_wipe_secrets_but(c, &c->pools[0]);
    for (int i = 0; i < c->nredis; i++) {
        bool keep = strcmp(c->redis[i].name, "other") != 0;
        assert_int_equal(c->redis[i].password != NULL, keep);
        assert_int_equal(c->redis[i].file_password != NULL, keep);
    }
    for (int i = 0; i < c->npools; i++) {
        assert_null(c->pools[i].env);
        assert_int_equal(c->pools[i].nenv, 0);
    }
    config_free(c);
}

/* ------------------------------------------------------------ limits */

static void test_limits_load(void **state)
{
    (void)state;
    qconf_t *c = must_load(MINPOOL "limits = (\n"
                                   "  { class = \"App\\\\Jobs\\\\SyncCrm\"; concurrency = 5; },\n"
                                   "  { queue = \"mail\"; rate = \"50/s\"; burst = 10; },\n"
                                   "  { class = \"B\"; queue = \"q\"; rate = \"600/m\"; concurrency = 1; alert_after = 30; }\n"
                                   ");\n");
    assert_int_equal(c->nlimits, 3);
    assert_string_equal(c->limits[0].class_name, "App\\Jobs\\SyncCrm");
    assert_int_equal(c->limits[0].concurrency, 5);
    assert_null(c->limits[0].rate);
    assert_string_equal(c->limits[1].queue, "mail");
    assert_true(c->limits[1].rate_per_s == 50.0);
    assert_int_equal(c->limits[1].burst, 10);
    assert_true(c->limits[2].rate_per_s == 10.0);
    assert_int_equal(c->limits[2].burst, 1);
    assert_int_equal(c->limits[2].line, 5);
    assert_true(c->limits[2].alert_after == 30.0 && c->limits[0].alert_after == 0);
    config_free(c);
    /* per key: beside a plain limit of the same class (its own keys) */
    c = must_load(MINPOOL "limits = (\n  { class = \"I\"; concurrency = 5; },\n"
                          "  { class = \"I\"; tag_prefix = \"App\\\\Models\\\\Customer:\"; concurrency = 1; }\n);\n");
    assert_int_equal(c->nlimits, 2);
    assert_string_equal(c->limits[1].tag_prefix, "App\\Models\\Customer:");
    config_free(c);
    c = must_load(MINPOOL);
    assert_int_equal(c->nlimits, 0);
    config_free(c);
}

static void test_limits_errors(void **state)
{
    (void)state;
    static const char t1[] = MINPOOL "limits = (\n  { class = \"A\"; concurrency = 1; },\n"
                                     "  { queue = \"m\"; rate = \"5/x\"; }\n);\n";
    expect_error(t1, 4, "limits: rate: \"5/x\"", "unit", NULL);
    static const char t2[] = MINPOOL "limits = (\n  { class = \"A\"; }\n);\n";
    expect_error(t2, 3, "limits:", "concurrency = N or rate", NULL);
    static const char t3[] = MINPOOL "limits = (\n  { klass = \"A\"; concurrency = 1; }\n);\n";
    expect_error(t3, 3, "unknown key 'klass' in a limit", "did you mean 'class'", NULL);
    static const char t4[] = MINPOOL "limits = (\n  { class = \"A\"; concurrency = 1; },\n"
                                     "  { class = \"A\"; rate = \"1/s\"; }\n);\n";
    expect_error(t4, 4, "class \"A\" is limited twice (line 3 too)", NULL);
    static const char t5[] = MINPOOL "limits = (\n  { class = \"A\"; concurrency = 0; }\n);\n";
    expect_error(t5, 3, "concurrency: 0 is out of range", NULL);
    static const char t6[] = MINPOOL "limits = { class = \"A\"; };\n";
    expect_error(t6, 2, "limits: expected a list", NULL);
    static const char t7[] = MINPOOL "limits = (\n  { queue = \"q\"; concurrency = 2; burst = 3; }\n);\n";
    expect_error(t7, 3, "burst: applies to a rate", NULL);
    static const char t8[] = MINPOOL "limits = (\n  { class = \"A\"; tag_prefix = \"\"; concurrency = 1; }\n);\n";
    expect_error(t8, 3, "tag_prefix", "1-255 characters", NULL);
    /* limits on a Redis Cluster connection: accepted (issue 33; they were refused before) */
    qconf_t *c = must_load("redis = { default = { cluster = [\"a:1\"]; prefix = \"{app}:\"; }; };\n" MINPOOL
                           "limits = (\n  { queue = \"q\"; concurrency = 1; }\n);\n");
    assert_int_equal(c->nlimits, 1);
    config_free(c);
    /* and per key (tag_prefix) there too (refused before the cluster pop leased per key) */
    c = must_load("redis = { default = { cluster = [\"a:1\"]; prefix = \"{app}:\"; }; };\n" MINPOOL
                  "limits = (\n  { class = \"A\"; tag_prefix = \"C:\"; concurrency = 1; }\n);\n");
    assert_int_equal(c->nlimits, 1);
    config_free(c);
}

/* A pool under a limit pops one job at a time; a command pool is warned of. */
static void test_limits_pools(void **state)
{
    (void)state;
    conf_errors_t e;
    qconf_t *c = load_text("pools = (\n  { name = \"p\"; queues = [\"q\"]; prefetch = 8;\n"
                           "    handler = { type = \"pipe\"; command = [\"x\"]; }; },\n"
                           "  { name = \"o\"; queues = [\"other\"]; prefetch = 8;\n"
                           "    handler = { type = \"pipe\"; command = [\"x\"]; }; },\n"
                           "  { name = \"cmd\"; queues = [\"q\"]; command = [\"run\"]; }\n);\n"
                           "limits = (\n  { queue = \"q\"; concurrency = 1; }\n);\n", &e, NULL);
    assert_non_null(c);
    assert_int_equal(c->pools[0].prefetch, 1);
    assert_int_equal(c->pools[1].prefetch, 8);
    assert_int_equal(e.nwarn, 2);
    assert_non_null(strstr(e.warnings[0], "pool p: prefetch = 8 is ignored"));
    assert_non_null(strstr(e.warnings[1], "pool cmd runs a command"));
    config_free(c);
    conf_errors_free(&e);
}

/* app_driver: off by default; on, it needs a pipe handler (the PHP adapter). */
static void test_app_driver_key(void **state)
{
    (void)state;
    qconf_t *c = must_load(MINPOOL);
    assert_false(c->pools[0].app_driver);
    config_free(c);
    c = must_load("pools = ( { name = \"p\"; queues = [\"q\"]; queue_connection = \"database\"; app_driver = true;\n"
                  "  handler = { type = \"pipe\"; command = [\"php\", \"h.php\"]; }; } );\n");
    assert_true(c->pools[0].app_driver);
    assert_string_equal(c->pools[0].queue_connection, "database");
    config_free(c);
    conf_errors_t e;
    c = load_text("pools = ( { name = \"p\"; queues = [\"q\"]; app_driver = true; balance = \"auto\"; max_processes = 4;\n"
                  "  handler = { type = \"pipe\"; command = [\"php\", \"h.php\"]; }; } );\n", &e, NULL);
    assert_non_null(c);
    assert_int_equal(e.nwarn, 1);
    assert_non_null(strstr(e.warnings[0], "which needs preload: without it the pool keeps its size"));
    conf_errors_free(&e);
    config_free(c);
    /* the PHP adapter preloads: its app agent says the queue sizes, no warning */
    c = load_text("pools = ( { name = \"p\"; queues = [\"q\"]; app_driver = true; balance = \"auto\"; max_processes = 4;\n"
                  "  handler = { type = \"pipe\"; command = [\"php\", \"/srv/qpool/php/qpool-handler.php\", \"/srv/app\"]; }; } );\n",
                  &e, NULL);
    assert_non_null(c);
    assert_int_equal(e.nwarn, 0);
    assert_true(pool_agent_sizes(&c->pools[0]));
    conf_errors_free(&e);
    config_free(c);
    static const char t[] = "pools = ( {\n  name = \"p\";\n  queues = [\"q\"];\n  app_driver = true;\n"
                            "  command = [\"run\"];\n} );\n";
    expect_error(t, 1, "app_driver", "pipe handler", NULL);
}

/* No Redis at all (issue 30 item 4): a config that names none (no `redis`
 * group, or redis = false) whose pools all run through their app's driver
 * and read no signal from Redis; any other config without a `redis` group
 * keeps Laravel's stock connection (1.x); redis = false with a pool that
 * needs one is an error at the pool's line. */
#define APPPOOL(extra) "pools = ( {\n  name = \"p\";\n  queues = [\"q\"];\n  app_driver = true;\n" extra \
    "  handler = { type = \"pipe\"; command = [\"php\", \"h.php\"]; };\n} );\n"
#define NOSIGNALS "  restart_key = \"\";\n  laravel_pause = false;\n"

static void test_no_redis(void **state)
{
    (void)state;
    qconf_t *c = must_load(APPPOOL(NOSIGNALS));
    assert_true(c->no_redis);
    assert_false(c->redis_off);
    assert_null(pool_needs_redis(&c->pools[0]));
    config_free(c);
    c = must_load("redis = false;\n" APPPOOL(NOSIGNALS));
    assert_true(c->no_redis && c->redis_off);
    config_free(c);
    /* a Redis named: qpool's own state uses it */
    c = must_load("redis = { default = { port = 6380; }; };\n" APPPOOL(NOSIGNALS));
    assert_false(c->no_redis);
    config_free(c);
    /* a Redis pool, the stock connection (1.x) */
    c = must_load(MINPOOL);
    assert_false(c->no_redis);
    assert_non_null(pool_needs_redis(&c->pools[0]));
    assert_int_equal(config_redis(c, "default")->port, 6379);
    config_free(c);
    /* an app_driver pool polling Laravel's keys in a Redis cache, or with a fleet budget */
    c = must_load(APPPOOL(""));
    assert_false(c->no_redis);
    config_free(c);
    c = must_load(APPPOOL(NOSIGNALS "  balance = \"auto\";\n  max_processes = 2;\n  fleet_max_processes = 4;\n"));
    assert_false(c->no_redis);
    config_free(c);
    /* redis = false: a pool that needs a Redis is an error at its line */
    expect_error("redis = false;\npools = (\n  { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; }\n);\n", 3, "pool p",
                 "queues are on Redis", "redis = false", NULL);
    expect_error("redis = false;\n" APPPOOL(""), 2, "queue:restart", "redis = false", NULL);
    expect_error("qpool = { http = { listen = \"127.0.0.1:9178\"; connection = \"default\"; }; };\nredis = false;\n"
                 APPPOOL(NOSIGNALS), 1, "http.connection", "redis = false", NULL);
    expect_error("redis = true;\n" MINPOOL, 1, "redis", NULL);
    /* http.connection names a Redis: what qpool check prints loads again */
    const char *named = "qpool = { http = { listen = \"127.0.0.1:9178\"; connection = \"default\"; }; };\n"
                        APPPOOL(NOSIGNALS);
    c = must_load(named);
    assert_false(c->no_redis);
    config_free(c);
    round_trip(named);
    round_trip(APPPOOL(NOSIGNALS));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_config_loads),
        cmocka_unit_test(test_wipe_secrets_but_a_pool),
        cmocka_unit_test(test_builtin_defaults),
        cmocka_unit_test(test_cache_connection_default),
        cmocka_unit_test(test_redis_tls_and_sentinel_keys),
        cmocka_unit_test(test_redis_tls_and_sentinel_errors),
        cmocka_unit_test(test_redis_cluster),
        cmocka_unit_test(test_defaults_group_cascades),
        cmocka_unit_test(test_pool_only_keys_rejected_in_defaults),
        cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_unknown_key_with_suggestion),
        cmocka_unit_test(test_unknown_key_without_suggestion),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_laravel_keys),
        cmocka_unit_test(test_size_settings_validated),
        cmocka_unit_test(test_pool_errors_name_the_pool_line),
        cmocka_unit_test(test_max_workers_below_minimums),
        cmocka_unit_test(test_handler_or_command),
        cmocka_unit_test(test_preload),
        cmocka_unit_test(test_missing_name_or_queues),
        cmocka_unit_test(test_unknown_placeholder),
        cmocka_unit_test(test_expand_command),
        cmocka_unit_test(test_backoff_forms),
        cmocka_unit_test(test_group_without_user_is_an_error),
        cmocka_unit_test(test_undefined_connection),
        cmocka_unit_test(test_duplicate_pool_name),
        cmocka_unit_test(test_queue_names),
        cmocka_unit_test(test_users_and_groups),
        cmocka_unit_test(test_control_socket_mode),
        cmocka_unit_test(test_http_settings),
        cmocka_unit_test(test_http_read_without_token),
        cmocka_unit_test(test_global_settings),
        cmocka_unit_test(test_working_directory_absolute),
        cmocka_unit_test(test_timeout_not_below_retry_after_warns),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_include_reports_included_file),
        cmocka_unit_test(test_multiple_errors_all_reported),
        cmocka_unit_test_teardown(test_print_round_trip, rt_teardown),
        cmocka_unit_test_teardown(test_print_round_trip_size_defaults, rt_teardown),
        cmocka_unit_test_teardown(test_print_round_trip_control_chars, rt_teardown),
        cmocka_unit_test(test_same_except_size_and_same_size),
        cmocka_unit_test(test_balancer_settings_changes_detected),
        cmocka_unit_test(test_config_path),
        cmocka_unit_test(test_limits_load),
        cmocka_unit_test(test_limits_errors),
        cmocka_unit_test(test_limits_pools),
        cmocka_unit_test(test_app_driver_key),
        cmocka_unit_test(test_no_redis),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
