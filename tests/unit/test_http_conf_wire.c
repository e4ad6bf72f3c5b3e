/*
 * test_http_conf_wire.c - unit tests for src/config/http_conf_wire.h: what the
 * master tells the HTTP process. The settings a config gives (only
 * http.connection's password, resolved; nothing of another connection or
 * of a pool's environment), the round trip through the text, and the
 * refusal, naming the field, of anything malformed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/http_conf_wire.h"
#include "core/util.h"

static char tmpdir[PATH_MAX];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/qpool-test-wire-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *write_file(const char *name, const char *text, mode_t mode)
{
    char *path = xasprintf("%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static qconf_t *must_load(const char *text)
{
    char *path = write_file("qpool.conf", text, 0644);
    conf_errors_t e;
    qconf_t *c = config_load(path, &e);
    for (int i = 0; !c && i < e.n; i++) print_message("  error: %s\n", e.msgs[i]);
    conf_errors_free(&e);
    free(path);
    assert_non_null(c);
    return c;
}

static void decode_ok(const char *text, size_t len, http_wire_t *w)
{
    char err[400] = "";
    int rv = http_wire_decode(text, len, w, err, sizeof err);
    if (rv < 0) fail_msg("decode: %s\n%.*s", err, (int)len, text);
}

/* ------------------------------------------------------------ from a config */

static void test_from_config_takes_only_the_connection_it_reads(void **state)
{
    (void)state;
    char *pwf = write_file("spare.pw", "file-secret-1\n", 0600);
    setenv("WIRE_TEST_OTHER_PW", "env-secret-2", 1);
    setenv("WIRE_TEST_WEB_PW", "web-secret-3", 1);
    char *text = xasprintf(
        "redis = {\n"
        "  default = { host = \"127.0.0.1\"; };\n"
        "  spare = { host = \"127.0.0.1\"; username = \"spare\"; password_file = \"%s\"; };\n"
        "  other = { host = \"127.0.0.1\"; username = \"other\"; password_env = \"WIRE_TEST_OTHER_PW\"; };\n"
        "  web = { host = \"10.1.2.3\"; port = 6380; db = 2; prefix = \"app_\"; username = \"web\";\n"
        "          password_env = \"WIRE_TEST_WEB_PW\"; timeout = 2.5; };\n"
        "};\n"
        "qpool = { metrics_retention = 7200; job_history_size = 50; log_level = \"debug\";\n"
        "  http = { listen = \"127.0.0.1:9178\"; connection = \"web\"; read_without_token = \"all\";\n"
        "           max_connections = 12; timeout = 7; header_timeout = 3; base_path = \"/qpool\"; }; };\n"
        "pools = (\n"
        "  { name = \"a\"; queues = [\"q1\", \"q2\"]; command = [\"run\"]; connection = \"web\";\n"
        "    environment = { APP_KEY = \"app-key-secret-4\"; }; },\n"
        "  { name = \"b\"; queues = [\"q2\", \"q3\"]; command = [\"run\"]; connection = \"web\"; },\n"
        "  { name = \"s\"; queues = [\"s1\"]; command = [\"run\"]; connection = \"spare\"; },\n"
        "  { name = \"o\"; queues = [\"o1\"]; command = [\"run\"]; connection = \"other\"; }\n"
        ");\n",
        pwf);
    qconf_t *c = must_load(text);
    http_wire_t w;
    assert_int_equal(http_wire_from_config(&w, c, "the-token-0123456789"), 0);
    w.parent = getpid(); /* the caller's */
    size_t len;
    char *t = http_wire_encode(&w, &len);
    assert_non_null(t);
    assert_int_equal(strlen(t), len);
    /* its own connection's password, resolved; nobody else's secret */
    assert_non_null(strstr(t, "web-secret-3"));
    assert_non_null(strstr(t, "the-token-0123456789"));
    static const char *const foreign[] = {"file-secret-1", "env-secret-2", "app-key-secret-4", "APP_KEY",
                                          "WIRE_TEST_WEB_PW", "WIRE_TEST_OTHER_PW", "spare", "\"s1\"", "\"o1\""};
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++)
        if (strstr(t, foreign[i])) fail_msg("the settings hold %s: %s", foreign[i], t);
    http_wire_free(&w);

    http_wire_t d;
    decode_ok(t, len, &d);
    assert_string_equal(d.redis.name, "web");
    assert_string_equal(d.redis.host, "10.1.2.3");
    assert_int_equal(d.redis.port, 6380);
    assert_int_equal(d.redis.db, 2);
    assert_string_equal(d.redis.prefix, "app_");
    assert_string_equal(d.redis.username, "web");
    assert_string_equal(d.redis.password, "web-secret-3");
    assert_null(d.redis.password_env); /* no variable: the value itself */
    assert_true(d.redis.timeout == 2.5);
    assert_int_equal(strv_len(d.queues), 3); /* q1 q2 q3: once each, web's pools only */
    assert_string_equal(d.queues[0], "q1");
    assert_string_equal(d.queues[2], "q3");
    assert_string_equal(d.http.listen, "127.0.0.1:9178");
    assert_string_equal(d.http.host, "127.0.0.1");
    assert_int_equal(d.http.port, 9178);
    assert_true(d.http.loopback);
    assert_false(d.http.is_unix);
    assert_int_equal(d.http.max_connections, 12);
    assert_int_equal(d.http.timeout, 7);
    assert_int_equal(d.http.header_timeout, 3);
    assert_string_equal(d.http.base_path, "/qpool");
    assert_int_equal(d.http.read_without_token, HTTP_READ_ALL);
    assert_int_equal(d.http.owner_uid, geteuid());
    assert_null(d.http.token_env);
    assert_null(d.http.connection);
    assert_int_equal(d.metrics_retention, 7200);
    assert_int_equal(d.job_history_size, 50);
    assert_int_equal(d.log_level, 3);
    assert_string_equal(d.token, "the-token-0123456789");
    http_wire_free(&d);
    http_wire_text_free(t, len);
    config_free(c);
    free(text);
    free(pwf);
}

static void test_unset_password_variable_is_named_not_resolved(void **state)
{
    (void)state;
    unsetenv("WIRE_TEST_UNSET_PW");
    setenv("WIRE_TEST_SENTINEL_PW", "sentinel-secret-5", 1);
    qconf_t *c = must_load("redis = { default = { password_env = \"WIRE_TEST_UNSET_PW\";\n"
                           "  sentinels = [\"10.0.0.1:26379\", \"s2\"]; master_name = \"mymaster\";\n"
                           "  sentinel_password_env = \"WIRE_TEST_SENTINEL_PW\";\n"
                           "  tls = { ca_file = \"/ca.pem\"; server_name = \"r.example\"; verify = false; }; }; };\n"
                           "qpool = { http = { listen = \"127.0.0.1:9178\"; }; };\n"
                           "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; } );\n");
    http_wire_t w;
    assert_int_equal(http_wire_from_config(&w, c, NULL), 0);
    w.parent = getpid();
    assert_null(w.redis.password);
    assert_string_equal(w.redis.password_env, "WIRE_TEST_UNSET_PW"); /* the process says it is unset */
    assert_string_equal(w.redis.sentinel.file_password, "sentinel-secret-5");
    assert_null(w.redis.sentinel.password_env);
    size_t len;
    char *t = http_wire_encode(&w, &len);
    http_wire_t d;
    decode_ok(t, len, &d);
    assert_null(d.token);
    assert_string_equal(d.redis.password_env, "WIRE_TEST_UNSET_PW");
    assert_int_equal(d.redis.sentinel.naddrs, 2);
    assert_string_equal(d.redis.sentinel.addrs[1], "s2");
    assert_string_equal(d.redis.sentinel.master_name, "mymaster");
    assert_string_equal(d.redis.sentinel.file_password, "sentinel-secret-5");
    assert_true(d.redis.tls.enabled);
    assert_false(d.redis.tls.verify);
    assert_string_equal(d.redis.tls.ca_file, "/ca.pem");
    assert_string_equal(d.redis.tls.server_name, "r.example");
    assert_null(d.redis.tls.cert_file);
    http_wire_free(&d);
    http_wire_free(&w);
    http_wire_text_free(t, len);
    config_free(c);
}

static void test_no_such_connection(void **state)
{
    (void)state;
    qconf_t *c = must_load("qpool = { http = { listen = \"127.0.0.1:9178\"; }; };\n"
                           "pools = ( { name = \"p\"; queues = [\"q\"]; command = [\"run\"]; } );\n");
    free(c->http.connection);
    c->http.connection = xstrdup("nope");
    http_wire_t w;
    assert_int_equal(http_wire_from_config(&w, c, NULL), -1);
    config_free(c);
}

/* ------------------------------------------------------------ round trip */

/* Every field set, by hand. */
static void full(http_wire_t *w)
{
    memset(w, 0, sizeof *w);
    w->parent = 4242;
    w->switch_user = true;
    w->uid = 65534;
    w->gid = 4294967294u;
    w->log_level = 1;
    w->log_format = 1;
    w->http.listen = xstrdup("/run/qpool/http.sock");
    w->http.is_unix = w->http.loopback = true;
    w->http.timeout = 3600;
    w->http.header_timeout = 300;
    w->http.max_connections = 10000;
    w->http.base_path = xstrdup("/a \"quoted\" \\ path \xc3\xa9");
    w->http.read_without_token = HTTP_READ_NONE;
    w->http.owner_uid = 0;
    w->http.has_control_uid = true;
    w->http.control_uid = 1001;
    w->http.has_control_gid = true;
    w->http.control_gid = 1002;
    w->redis.name = xstrdup("cl");
    w->redis.socket = xstrdup("/run/redis.sock");
    w->redis.prefix = xstrdup("");
    w->redis.password = xstrdup("pw\n\x01");
    w->redis.timeout = 0.01;
    w->redis.cluster = strv_dup((char *[]){"a:1", "b:2", NULL});
    w->redis.ncluster = 2;
    w->redis.tls.enabled = true;
    w->redis.tls.verify = true;
    w->redis.tls.cert_file = xstrdup("/c.pem");
    w->redis.tls.key_file = xstrdup("/k.pem");
    w->queues = strv_dup((char *[]){"{a}x", "{a}y", NULL});
    w->metrics_retention = 31 * 86400;
    w->job_history_size = 0;
    w->token = xstrdup("0123456789abcdef");
}

static void test_round_trip(void **state)
{
    (void)state;
    http_wire_t w, d;
    full(&w);
    w.no_redis = true;
    size_t len;
    char *t = http_wire_encode(&w, &len);
    assert_non_null(t);
    decode_ok(t, len, &d);
    assert_int_equal(d.parent, 4242);
    assert_true(d.switch_user);
    assert_int_equal(d.uid, 65534);
    assert_int_equal(d.gid, 4294967294u);
    assert_int_equal(d.log_level, 1);
    assert_int_equal(d.log_format, 1);
    assert_string_equal(d.http.listen, w.http.listen);
    assert_true(d.http.is_unix && d.http.loopback);
    assert_string_equal(d.http.host, "");
    assert_int_equal(d.http.port, 0);
    assert_int_equal(d.http.timeout, 3600);
    assert_int_equal(d.http.header_timeout, 300);
    assert_int_equal(d.http.max_connections, 10000);
    assert_string_equal(d.http.base_path, w.http.base_path);
    assert_int_equal(d.http.read_without_token, HTTP_READ_NONE);
    assert_true(d.http.has_control_uid && d.http.has_control_gid);
    assert_int_equal(d.http.control_uid, 1001);
    assert_int_equal(d.http.control_gid, 1002);
    assert_string_equal(d.redis.name, "cl");
    assert_null(d.redis.host);
    assert_string_equal(d.redis.socket, "/run/redis.sock");
    assert_string_equal(d.redis.prefix, "");
    assert_string_equal(d.redis.password, "pw\n\x01");
    assert_true(d.redis.timeout == 0.01);
    assert_int_equal(d.redis.ncluster, 2);
    assert_string_equal(d.redis.cluster[1], "b:2");
    assert_true(d.redis.tls.enabled && d.redis.tls.verify);
    assert_string_equal(d.redis.tls.key_file, "/k.pem");
    assert_null(d.redis.sentinel.addrs);
    assert_int_equal(strv_len(d.queues), 2);
    assert_string_equal(d.queues[0], "{a}x");
    assert_int_equal(d.metrics_retention, 31 * 86400);
    assert_true(d.no_redis);
    assert_string_equal(d.token, "0123456789abcdef");
    /* the same text again */
    size_t len2;
    char *t2 = http_wire_encode(&d, &len2);
    assert_int_equal(len2, len);
    assert_memory_equal(t2, t, len);
    http_wire_text_free(t2, len2);
    http_wire_free(&d);

    /* no user switch, no token, no optional field */
    w.switch_user = false;
    free(w.token), w.token = NULL;
    free(w.http.base_path), w.http.base_path = NULL;
    w.http.has_control_uid = w.http.has_control_gid = false;
    http_wire_text_free(t, len);
    t = http_wire_encode(&w, &len);
    decode_ok(t, len, &d);
    assert_false(d.switch_user);
    assert_int_equal(d.uid, 0);
    assert_null(d.token);
    assert_null(d.http.base_path);
    assert_false(d.http.has_control_uid || d.http.has_control_gid);
    http_wire_free(&d);
    http_wire_free(&w);
    assert_null(w.token);
    http_wire_text_free(t, len);
}

/* ------------------------------------------------------------ malformed */

#define GOOD_HTTP "\"http\":{\"listen\":\"127.0.0.1:1\",\"unix\":false,\"loopback\":true,\"host\":\"127.0.0.1\"," \
                  "\"port\":1,\"timeout\":30,\"header_timeout\":5,\"max_connections\":64,\"read_without_token\":1," \
                  "\"owner_uid\":0}"
#define GOOD_REDIS "\"redis\":{\"name\":\"default\",\"host\":\"127.0.0.1\",\"port\":6379,\"db\":0,\"timeout\":1}"
#define GOOD_ROOT "\"version\":1,\"parent\":2,\"log_level\":2,\"log_format\":0,\"queues\":[\"q\"]," \
                  "\"metrics_retention\":86400,\"job_history_size\":1000"
#define GOOD "{" GOOD_ROOT "," GOOD_HTTP "," GOOD_REDIS "}"

static void expect_refused(const char *text, const char *why)
{
    http_wire_t w;
    char err[400] = "";
    memset(&w, 0x5a, sizeof w);
    if (http_wire_decode(text, strlen(text), &w, err, sizeof err) == 0) fail_msg("accepted: %s", text);
    if (!strstr(err, why)) fail_msg("error \"%s\" does not say \"%s\" for %s", err, why, text);
    assert_null(w.http.listen); /* zeroed */
    assert_null(w.redis.name);
    assert_null(w.token);
}

static void test_the_good_one_is_good(void **state)
{
    (void)state;
    http_wire_t w;
    decode_ok(GOOD, strlen(GOOD), &w);
    assert_false(w.switch_user);
    assert_false(w.redis.tls.enabled);
    http_wire_free(&w);
}

static void test_malformed_is_refused_with_the_field(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"", "not JSON"},
        {"{", "not JSON"},
        {"[]", "not a JSON object"},
        {"\"x\"", "not a JSON object"},
        {"{" GOOD_HTTP "," GOOD_REDIS "}", "version: 1 expected"},
        {"{\"version\":2,\"parent\":2}", "version: 1 expected"},
        {"{\"version\":\"1\"}", "version: 1 expected"},
        {"{" GOOD_ROOT "," GOOD_HTTP "," GOOD_REDIS ",\"extra\":1}", "extra: unknown key"},
        {"{" GOOD_ROOT "," GOOD_HTTP "," GOOD_REDIS ",\"token\":\"0123456789abcdef\",\"token\":\"x\"}",
         "token: given twice"},
        {"{" GOOD_ROOT "," GOOD_REDIS "}", "http: missing"},
        {"{" GOOD_ROOT "," GOOD_HTTP "}", "redis: missing"},
        {"{" GOOD_ROOT ",\"http\":[]," GOOD_REDIS "}", "http: an object expected"},
        {"{\"version\":1,\"parent\":0,\"log_level\":2}", "parent: a whole number in 1..2147483647"},
        {"{\"version\":1,\"parent\":2.5}", "parent: a whole number"},
        {"{\"version\":1,\"parent\":1e300}", "parent: a whole number"},
        {"{\"version\":1,\"parent\":2,\"log_level\":9}", "log_level: a whole number in 0..3"},
        {"{" GOOD_ROOT ",\"user\":{\"uid\":-1,\"gid\":0}," GOOD_HTTP "," GOOD_REDIS "}", "user.uid: a user or group id"},
        {"{" GOOD_ROOT ",\"user\":{\"uid\":4294967295,\"gid\":0}," GOOD_HTTP "," GOOD_REDIS "}", "user.uid"},
        {"{" GOOD_ROOT ",\"user\":{\"uid\":1}," GOOD_HTTP "," GOOD_REDIS "}", "user.gid: missing"},
        {"{" GOOD_ROOT ",\"token\":\"\"," GOOD_HTTP "," GOOD_REDIS "}", "token: a string of 1..4096 bytes"},
        {"{" GOOD_ROOT ",\"token\":7," GOOD_HTTP "," GOOD_REDIS "}", "token: a string"},
        {"{\"version\":1,\"parent\":2,\"log_level\":2,\"log_format\":0,\"queues\":\"q\"}", "queues: a list of"},
        {"{\"version\":1,\"parent\":2,\"log_level\":2,\"log_format\":0,\"queues\":[1]}", "queues: a list of strings"},
        {"{" GOOD_ROOT ",\"http\":{\"listen\":\"\"}," GOOD_REDIS "}", "http.listen: a string of 1.."},
        {"{" GOOD_ROOT ",\"http\":{\"listen\":\"x\",\"unix\":1}," GOOD_REDIS "}", "http.unix: true or false"},
        {"{" GOOD_ROOT ",\"http\":{\"listen\":\"x\",\"unix\":true,\"loopback\":true,"
         "\"host\":\"0123456789012345678901234567890123456789012345678901234567890123\"}," GOOD_REDIS "}",
         "http.host: a string of at most 63 bytes"},
        {"{" GOOD_ROOT ",\"http\":{\"listen\":\"x\",\"unix\":true,\"loopback\":true,\"host\":\"\",\"port\":70000},"
         GOOD_REDIS "}", "http.port: a whole number in 0..65535"},
        {"{" GOOD_ROOT ",\"http\":{\"listen\":\"x\",\"unix\":true,\"loopback\":true,\"host\":\"\",\"port\":0,"
         "\"timeout\":0}," GOOD_REDIS "}", "http.timeout: a whole number in 1..3600"},
        {"{" GOOD_ROOT ",\"http\":{\"bogus\":1}," GOOD_REDIS "}", "http.bogus: unknown key"},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"port\":1,\"db\":0,\"timeout\":1}}",
         "redis.host: missing"},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"host\":\"h\",\"port\":1,\"db\":0,\"timeout\":0}}",
         "redis.timeout: a number in (0, 3600]"},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"host\":\"h\",\"port\":1,\"db\":0,\"timeout\":1,"
         "\"cluster\":[]}}", "redis.cluster: a list of 1.."},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"host\":\"h\",\"port\":1,\"db\":0,\"timeout\":1,"
         "\"tls\":{\"verify\":\"yes\"}}}", "redis.tls.verify: true or false"},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"host\":\"h\",\"port\":1,\"db\":0,\"timeout\":1,"
         "\"tls\":null}}", "redis.tls: an object expected"},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"host\":\"h\",\"port\":1,\"db\":0,\"timeout\":1,"
         "\"sentinel\":{\"addrs\":[],\"master_name\":\"m\"}}}", "redis.sentinel.addrs: a list of 1.."},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"host\":\"h\",\"port\":1,\"db\":0,\"timeout\":1,"
         "\"sentinel\":{\"addrs\":[\"a\"]}}}", "redis.sentinel.master_name: missing"},
        {"{" GOOD_ROOT "," GOOD_HTTP ",\"redis\":{\"name\":\"d\",\"host\":\"h\",\"port\":1,\"db\":0,\"timeout\":1,"
         "\"file_password\":\"x\"}}", "redis.file_password: unknown key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_refused(cases[i].text, cases[i].why);
}

/* No prefix of a good text is taken (a short read is never half a config). */
static void test_every_prefix_is_refused(void **state)
{
    (void)state;
    http_wire_t w;
    full(&w);
    size_t len;
    char *t = http_wire_encode(&w, &len);
    http_wire_free(&w);
    char err[400];
    for (size_t n = 0; n < len; n++) {
        http_wire_t d;
        if (http_wire_decode(t, n, &d, err, sizeof err) == 0) fail_msg("a prefix of %zu bytes was taken", n);
    }
    http_wire_text_free(t, len);
}

static void test_too_large_is_refused_unread(void **state)
{
    (void)state;
    size_t n = (size_t)HTTP_WIRE_MAX + 1;
    char *big = xmalloc(n);
    memset(big, ' ', n);
    http_wire_t w;
    char err[400] = "";
    assert_int_equal(http_wire_decode(big, n, &w, err, sizeof err), -1);
    assert_non_null(strstr(err, "larger than"));
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_from_config_takes_only_the_connection_it_reads),
        cmocka_unit_test(test_unset_password_variable_is_named_not_resolved),
        cmocka_unit_test(test_no_such_connection),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_the_good_one_is_good),
        cmocka_unit_test(test_malformed_is_refused_with_the_field),
        cmocka_unit_test(test_every_prefix_is_refused),
        cmocka_unit_test(test_too_large_is_refused_unread),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
