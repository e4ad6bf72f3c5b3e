/*
 * test_payload.c - unit tests for src/payload.h: reading Laravel job payloads
 * (protocol doc §4), the top-level JSON scanner, byte-preserving attempts
 * edits and building payloads for `qpool push`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/payload.h"

/* Protocol doc §4.1: Debian Laravel 8.x object job, exactly as pushed [verified]. */
static const char LARAVEL8_OBJECT_JOB[] =
    "{\"uuid\":\"0aea1d6e-90b8-4045-9939-2175807c1664\",\"displayName\":\"App\\\\Jobs\\\\Test"
    "Job\",\"job\":\"Illuminate\\\\Queue\\\\CallQueuedHandler@call\",\"maxTries\":3,\"maxExce"
    "ptions\":2,\"failOnTimeout\":false,\"backoff\":\"10,30,60\",\"timeout\":5,\"retryUntil\""
    ":null,\"data\":{\"commandName\":\"App\\\\Jobs\\\\TestJob\",\"command\":\"O:16:\\\"App\\\\"
    "Jobs\\\\TestJob\\\":16:{s:5:\\\"tries\\\";i:3;s:7:\\\"backoff\\\";a:3:{i:0;i:10;i:1;i:30"
    ";i:2;i:60;}s:7:\\\"timeout\\\";i:5;s:13:\\\"maxExceptions\\\";i:2;s:3:\\\"msg\\\";s:12:\\"
    "\"hello\\/w\xc3\xb6rld\\\";s:4:\\\"fail\\\";b:0;s:3:\\\"job\\\";N;s:10:\\\"connection\\\";N;s:5"
    ":\\\"queue\\\";N;s:15:\\\"chainConnection\\\";N;s:10:\\\"chainQueue\\\";N;s:19:\\\"chain"
    "CatchCallbacks\\\";N;s:5:\\\"delay\\\";N;s:11:\\\"afterCommit\\\";N;s:10:\\\"middleware\\"
    "\";a:0:{}s:7:\\\"chained\\\";a:0:{}}\"},\"id\":\"ItbWDumuhBPOtDR7Fmb4wDAPRggTBZTs\",\"at"
    "tempts\":0}";

/* Protocol doc §4.2: string job (Queue::push('Class@method', $data)) [verified 8.x]. */
static const char LARAVEL8_STRING_JOB[] =
    "{\"uuid\":\"0e6112fa-eafc-4839-a83f-537924a80b61\",\"displayName\":\"App\\\\Handlers\\\\"
    "Foo\",\"job\":\"App\\\\Handlers\\\\Foo@bar\",\"maxTries\":null,\"maxExceptions\":null,\""
    "failOnTimeout\":false,\"backoff\":null,\"timeout\":null,\"data\":{\"a\":1},\"id\":\"CPWs"
    "l1VRxQXxKQ4Wo7AwaQ94knT8Ewuf\",\"attempts\":0}";

static int parse(const char *raw, job_payload_t *p, char *err, size_t errn)
{
    return payload_parse(raw, strlen(raw), p, err, errn);
}

/* ------------------------------------------------------------ payload_parse */

static void test_parse_laravel8_object_job(void **state)
{
    (void)state;
    /* the literal is the doc's text: valid JSON, with the "\/" and UTF-8 intact */
    cJSON *o = cJSON_Parse(LARAVEL8_OBJECT_JOB);
    assert_non_null(o);
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "data"), "command");
    assert_non_null(strstr(cmd->valuestring, "s:12:\"hello/w\xc3\xb6rld\""));
    cJSON_Delete(o);

    job_payload_t p;
    char err[128] = "";
    assert_int_equal(parse(LARAVEL8_OBJECT_JOB, &p, err, sizeof err), 0);
    assert_string_equal(p.uuid, "0aea1d6e-90b8-4045-9939-2175807c1664");
    assert_string_equal(p.display_name, "App\\Jobs\\TestJob");
    assert_string_equal(p.job, "Illuminate\\Queue\\CallQueuedHandler@call");
    assert_string_equal(p.id, "ItbWDumuhBPOtDR7Fmb4wDAPRggTBZTs");
    assert_int_equal(p.attempts, 0);
    assert_true(p.has_max_tries);
    assert_int_equal(p.max_tries, 3);
    assert_true(p.has_max_exceptions);
    assert_int_equal(p.max_exceptions, 2);
    assert_false(p.fail_on_timeout);
    assert_non_null(p.backoff);
    assert_string_equal(p.backoff, "10,30,60");
    assert_true(p.has_timeout);
    assert_int_equal(p.timeout, 5);
    assert_false(p.has_retry_until); /* "retryUntil":null */
    assert_false(p.has_delay);
    assert_string_equal(payload_name(&p), "App\\Jobs\\TestJob");
    payload_free(&p);
}

static void test_parse_laravel8_string_job(void **state)
{
    (void)state;
    job_payload_t p;
    char err[128] = "";
    assert_int_equal(parse(LARAVEL8_STRING_JOB, &p, err, sizeof err), 0);
    assert_string_equal(p.uuid, "0e6112fa-eafc-4839-a83f-537924a80b61");
    assert_string_equal(p.display_name, "App\\Handlers\\Foo");
    assert_string_equal(p.job, "App\\Handlers\\Foo@bar");
    assert_string_equal(p.id, "CPWsl1VRxQXxKQ4Wo7AwaQ94knT8Ewuf");
    assert_int_equal(p.attempts, 0);
    assert_false(p.has_max_tries);
    assert_false(p.has_max_exceptions);
    assert_false(p.fail_on_timeout);
    assert_null(p.backoff);
    assert_false(p.has_timeout);
    assert_false(p.has_retry_until); /* no retryUntil key at all */
    assert_false(p.has_delay);
    payload_free(&p);
}

static void test_parse_reserved_copy_reordered(void **state)
{
    (void)state;
    /* §4.1: the reserved copy after the pop script: other key order, attempts 1 */
    static const char raw[] =
        "{\"uuid\":\"0aea1d6e-90b8-4045-9939-2175807c1664\",\"timeout\":5,\"id\":\"ItbWDumu\","
        "\"backoff\":\"10,30,60\",\"displayName\":\"App\\\\Jobs\\\\TestJob\",\"maxTries\":3,"
        "\"failOnTimeout\":true,\"maxExceptions\":2,\"retryUntil\":null,"
        "\"data\":{\"command\":\"O:16:\",\"commandName\":\"App\\\\Jobs\\\\TestJob\"},"
        "\"job\":\"Illuminate\\\\Queue\\\\CallQueuedHandler@call\",\"attempts\":1}";
    job_payload_t p;
    char err[128];
    assert_int_equal(parse(raw, &p, err, sizeof err), 0);
    assert_int_equal(p.attempts, 1);
    assert_int_equal(p.max_tries, 3);
    assert_true(p.fail_on_timeout);
    assert_string_equal(p.backoff, "10,30,60");
    payload_free(&p);
}

static void test_parse_minimal_payload(void **state)
{
    (void)state;
    /* §4.3: minimal payload accepted by a PHP worker */
    static const char raw[] =
        "{\"job\":\"Illuminate\\\\Queue\\\\CallQueuedHandler@call\",\"data\":{\"commandName\":"
        "\"App\\\\Jobs\\\\PlainJob\",\"command\":\"O:17:\\\"App\\\\Jobs\\\\PlainJob\\\":0:{}\"},"
        "\"id\":\"c1\",\"attempts\":0}";
    job_payload_t p;
    char err[128];
    assert_int_equal(parse(raw, &p, err, sizeof err), 0);
    assert_null(p.uuid);
    assert_null(p.display_name);
    assert_string_equal(p.id, "c1");
    assert_false(p.has_max_tries);
    assert_null(p.backoff);
    /* no displayName: the log name falls back to job */
    assert_string_equal(payload_name(&p), "Illuminate\\Queue\\CallQueuedHandler@call");
    payload_free(&p);

    static const char bare[] = "{\"attempts\":0}";
    assert_int_equal(parse(bare, &p, err, sizeof err), 0);
    assert_string_equal(payload_name(&p), "?");
    payload_free(&p);
}

static void test_parse_numeric_strings(void **state)
{
    (void)state;
    job_payload_t p;
    char err[128];
    static const char raw[] = "{\"job\":\"A@b\",\"attempts\":\"2\",\"maxTries\":\"4\",\"timeout\":\"30\"}";
    assert_int_equal(parse(raw, &p, err, sizeof err), 0);
    assert_int_equal(p.attempts, 2);
    assert_true(p.has_max_tries);
    assert_int_equal(p.max_tries, 4);
    assert_true(p.has_timeout);
    assert_int_equal(p.timeout, 30);
    payload_free(&p);

    /* a numeric backoff is read as its string form */
    static const char nb[] = "{\"attempts\":0,\"backoff\":5}";
    assert_int_equal(parse(nb, &p, err, sizeof err), 0);
    assert_string_equal(p.backoff, "5");
    payload_free(&p);
}

static void test_parse_rejects_unusable(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"job\":\"A@b\",\"data\":{}}",            /* no attempts */
        "{\"job\":\"A@b\",\"data\":{\"attempts\":1}}", /* only a nested one */
        "{\"job\":\"A@b\",\"attempts\":null}",
        "{\"job\":\"A@b\",\"attempts\":\"abc\"}",
        "{\"job\":\"A@b\",\"attempts\":\"\"}",
        "{\"job\":\"A@b\",\"attempts\":true}",
        "{\"job\":\"A@b\",\"attempts\":0",           /* truncated */
        "not json",
        "",
        "[{\"attempts\":0}]",                        /* an array */
        "\"string\"",
        "42",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        job_payload_t p;
        char err[128] = "";
        memset(&p, 0x5a, sizeof p);
        int rc = payload_parse(bad[i], strlen(bad[i]), &p, err, sizeof err);
        if (rc != -1) fail_msg("payload_parse accepted %s", bad[i]);
        if (!err[0]) fail_msg("no reason given for %s", bad[i]);
        /* nothing to free, and freeing is safe */
        assert_null(p.uuid);
        assert_null(p.job);
        payload_free(&p);
    }
}

static void test_parse_reason_texts(void **state)
{
    (void)state;
    job_payload_t p;
    char err[128] = "";
    assert_int_equal(parse("{\"job\":\"A@b\"}", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "attempts"));
    assert_int_equal(parse("[1,2]", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "object"));
    assert_int_equal(parse("{oops", &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "JSON"));
}

static void test_parse_length_bounded(void **state)
{
    (void)state;
    /* only len bytes are read: trailing bytes past len are ignored */
    static const char raw[] = "{\"attempts\":3}GARBAGE";
    job_payload_t p;
    char err[64];
    assert_int_equal(payload_parse(raw, 14, &p, err, sizeof err), 0);
    assert_int_equal(p.attempts, 3);
    payload_free(&p);
}

static void test_parse_retry_until_and_legacy_timeout_at(void **state)
{
    (void)state;
    job_payload_t p;
    char err[128];
    assert_int_equal(parse("{\"attempts\":0,\"retryUntil\":1700000123}", &p, err, sizeof err), 0);
    assert_true(p.has_retry_until);
    assert_int_equal(p.retry_until, 1700000123);
    payload_free(&p);

    /* Laravel 8.x falls back to the legacy key timeoutAt */
    assert_int_equal(parse("{\"attempts\":0,\"timeoutAt\":1600000000}", &p, err, sizeof err), 0);
    assert_true(p.has_retry_until);
    assert_int_equal(p.retry_until, 1600000000);
    payload_free(&p);

    /* retryUntil null falls back to timeoutAt (PHP ??) */
    assert_int_equal(parse("{\"attempts\":0,\"retryUntil\":null,\"timeoutAt\":1600000001}", &p, err,
                           sizeof err), 0);
    assert_true(p.has_retry_until);
    assert_int_equal(p.retry_until, 1600000001);
    payload_free(&p);

    /* retryUntil wins over timeoutAt */
    assert_int_equal(parse("{\"attempts\":0,\"timeoutAt\":1,\"retryUntil\":1700000000}", &p, err,
                           sizeof err), 0);
    assert_int_equal(p.retry_until, 1700000000);
    payload_free(&p);
}

static void test_parse_delay_and_fail_on_timeout(void **state)
{
    (void)state;
    job_payload_t p;
    char err[128];
    /* 12.11+: delay after attempts */
    assert_int_equal(parse("{\"attempts\":0,\"failOnTimeout\":true,\"backoff\":null,\"delay\":30}", &p, err,
                           sizeof err), 0);
    assert_true(p.fail_on_timeout);
    assert_true(p.has_delay);
    assert_int_equal(p.delay, 30);
    assert_null(p.backoff);
    payload_free(&p);
    assert_int_equal(parse("{\"attempts\":0,\"delay\":null}", &p, err, sizeof err), 0);
    assert_false(p.has_delay);
    assert_false(p.fail_on_timeout);
    payload_free(&p);
}

/* ------------------------------------------------------------ json_top_value */

static char *top(const char *raw, const char *key)
{
    size_t vs = 0, ve = 0;
    if (!json_top_value(raw, strlen(raw), key, &vs, &ve)) return NULL;
    assert_true(vs < ve);
    assert_true(ve <= strlen(raw));
    char *s = malloc(ve - vs + 1);
    memcpy(s, raw + vs, ve - vs);
    s[ve - vs] = '\0';
    return s;
}

#define assert_top(raw, key, expect)                  \
    do {                                              \
        char *v_ = top(raw, key);                     \
        if (!v_) fail_msg("%s not found in %s", key, raw); \
        assert_string_equal(v_, expect);              \
        free(v_);                                     \
    } while (0)

#define assert_no_top(raw, key)                                   \
    do {                                                          \
        char *v_ = top(raw, key);                                 \
        if (v_) fail_msg("%s found in %s: %s", key, raw, v_);     \
    } while (0)

static void test_top_value_only_top_level(void **state)
{
    (void)state;
    assert_top("{\"data\":{\"attempts\":5},\"attempts\":2}", "attempts", "2");
    assert_top("{\"data\":[{\"attempts\":5}],\"attempts\":12}", "attempts", "12");
    assert_no_top("{\"data\":{\"attempts\":5}}", "attempts");
    assert_no_top("{\"list\":[\"attempts\",1]}", "attempts");
    /* the key text inside a string value is not a key */
    assert_top("{\"a\":\"\\\"attempts\\\":9\",\"attempts\":1}", "attempts", "1");
    assert_no_top("{\"a\":\"\\\"attempts\\\":9\"}", "attempts");
}

static void test_top_value_strings_with_escapes_and_braces(void **state)
{
    (void)state;
    /* escaped quotes, braces and brackets inside strings don't confuse the scanner */
    static const char raw[] =
        "{\"s\":\"x}{\\\"y]\",\"o\":{\"k\":\"}\\\\\",\"n\":[\"]\",{\"q\":\"{\"}]},\"attempts\":3}";
    assert_top(raw, "attempts", "3");
    assert_top(raw, "s", "\"x}{\\\"y]\"");
    assert_top(raw, "o", "{\"k\":\"}\\\\\",\"n\":[\"]\",{\"q\":\"{\"}]}");
    /* the real Laravel payload: its data.command is full of \" */
    assert_top(LARAVEL8_OBJECT_JOB, "attempts", "0");
    assert_top(LARAVEL8_OBJECT_JOB, "id", "\"ItbWDumuhBPOtDR7Fmb4wDAPRggTBZTs\"");
    assert_top(LARAVEL8_OBJECT_JOB, "retryUntil", "null");
    assert_top(LARAVEL8_OBJECT_JOB, "maxTries", "3");
    /* a key that needs escaping does not match its unescaped prefix */
    assert_top("{\"at\\\"tempts\":1,\"attempts\":2}", "attempts", "2");
}

static void test_top_value_types_and_whitespace(void **state)
{
    (void)state;
    static const char raw[] =
        " {\n \"a\" : 7 ,\t\"b\":\"str\", \"c\":[1,[2]], \"d\":{}, \"e\":null, \"f\":true, \"g\":-1.5e3 }\n";
    assert_top(raw, "a", "7");
    assert_top(raw, "b", "\"str\"");
    assert_top(raw, "c", "[1,[2]]");
    assert_top(raw, "d", "{}");
    assert_top(raw, "e", "null");
    assert_top(raw, "f", "true");
    assert_top(raw, "g", "-1.5e3");
    assert_no_top(raw, "h");
}

static void test_top_value_exact_key_match(void **state)
{
    (void)state;
    static const char raw[] = "{\"attemptsX\":1,\"attempt\":2,\"xattempts\":3}";
    assert_no_top(raw, "attempts");
    assert_top(raw, "attempt", "2");
    assert_top(raw, "attemptsX", "1");
}

static void test_top_value_rejects_non_objects(void **state)
{
    (void)state;
    assert_no_top("[{\"attempts\":1}]", "attempts");
    assert_no_top("\"attempts\"", "attempts");
    assert_no_top("{}", "attempts");
    assert_no_top("", "attempts");
    assert_no_top("   ", "attempts");
    assert_no_top("{\"attempts\"", "attempts");
    assert_no_top("{\"attempts\":", "attempts");
    assert_no_top("{\"x\":\"unterminated", "attempts");
    assert_no_top("{\"x\":{\"y\":1}", "attempts");
}

/* ------------------------------------------------------------ payload_set_attempts */

static char *set_attempts(const char *raw, long n, size_t *outlen)
{
    return payload_set_attempts(raw, strlen(raw), n, outlen);
}

static void assert_valid_object(const char *s, size_t len, long attempts)
{
    cJSON *o = cJSON_ParseWithLength(s, len);
    if (!o) fail_msg("not valid JSON: %.*s", (int)len, s);
    assert_true(cJSON_IsObject(o));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "attempts");
    assert_true(cJSON_IsNumber(a));
    assert_true(a->valuedouble == (double)attempts);
    cJSON_Delete(o);
}

static void test_set_attempts_replaces_textually(void **state)
{
    (void)state;
    size_t len = 0;
    char *out = set_attempts(LARAVEL8_OBJECT_JOB, 5, &len);
    assert_non_null(out);
    size_t n = strlen(LARAVEL8_OBJECT_JOB);
    /* "...,"attempts":0}" -> "...,"attempts":5}"; every other byte identical */
    assert_int_equal(len, n);
    assert_int_equal(strlen(out), len);
    assert_memory_equal(out, LARAVEL8_OBJECT_JOB, n - 2);
    assert_string_equal(out + n - 2, "5}");
    assert_valid_object(out, len, 5);
    free(out);

    /* more digits: the length changes, the rest does not */
    out = set_attempts(LARAVEL8_OBJECT_JOB, 1234567, &len);
    assert_int_equal(len, n + 6);
    assert_memory_equal(out, LARAVEL8_OBJECT_JOB, n - 2);
    assert_string_equal(out + n - 2, "1234567}");
    free(out);
}

/* Found by tests/fuzz/fuzz_payload: the editor and the parser must agree
 * on which "attempts" counts, or a retried job keeps its old count. */
/* qpool's due-time stamp on a released payload: added at the end, replaced
 * in place, the rest byte for byte; read back by the parser. */
static void test_available_at_stamp(void **state)
{
    (void)state;
    static const char raw[] = "{\"uuid\":\"u\",\"data\":{\"x\":12345678901234567890},\"attempts\":1}";
    size_t len;
    char *p = payload_set_available_at(raw, strlen(raw), 1795459626000, &len);
    assert_string_equal(p, "{\"uuid\":\"u\",\"data\":{\"x\":12345678901234567890},\"attempts\":1,\"qpoolAvailableAt\":1795459626000}");
    size_t len2;
    char *q = payload_set_available_at(p, len, 1795459700000, &len2);
    assert_string_equal(q, "{\"uuid\":\"u\",\"data\":{\"x\":12345678901234567890},\"attempts\":1,\"qpoolAvailableAt\":1795459700000}");
    job_payload_t jp;
    char err[64];
    assert_int_equal(payload_parse(q, len2, &jp, err, sizeof err), 0);
    assert_true(jp.has_available_at && jp.available_at_ms == 1795459700000);
    payload_free(&jp);
    assert_int_equal(payload_parse(raw, strlen(raw), &jp, err, sizeof err), 0);
    assert_false(jp.has_available_at);
    payload_free(&jp);
    assert_null(payload_set_available_at("[1]", 3, 1, &len));
    free(p);
    free(q);
}

/* A released job's payload loses the twin marker of the pop that held it,
 * wherever cjson put it, the rest byte for byte. */
static void test_drop_key(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"{\"qpoolTwin\":\"u-1\",\"uuid\":\"u\",\"attempts\":2}", "{\"uuid\":\"u\",\"attempts\":2}"},
        {"{\"uuid\":\"u\",\"qpoolTwin\":\"u-1\",\"attempts\":2}", "{\"uuid\":\"u\",\"attempts\":2}"},
        {"{\"uuid\":\"u\",\"attempts\":2,\"qpoolTwin\":\"u-1\"}", "{\"uuid\":\"u\",\"attempts\":2}"},
        {"{ \"uuid\" : \"u\" , \"qpoolTwin\" : \"u-1\" }", "{ \"uuid\" : \"u\"  }"},
        {"{\"qpoolTwin\":\"u-1\"}", "{}"},
        {"{\"data\":{\"qpoolTwin\":1},\"qpoolTwin\":\"x\"}", "{\"data\":{\"qpoolTwin\":1}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        char *p = payload_drop_key(cases[i].in, strlen(cases[i].in), PAYLOAD_TWIN, &len);
        assert_non_null(p);
        assert_string_equal(p, cases[i].out);
        assert_int_equal(len, strlen(cases[i].out));
        free(p);
    }
    size_t len;
    static const char absent[] = "{\"uuid\":\"u\"}", nested[] = "{\"data\":{\"qpoolTwin\":1}}";
    assert_null(payload_drop_key(absent, strlen(absent), PAYLOAD_TWIN, &len));
    assert_null(payload_drop_key(nested, strlen(nested), PAYLOAD_TWIN, &len)); /* nested only */
    assert_null(payload_drop_key("[1]", 3, PAYLOAD_TWIN, &len));
    static const char twice[] = "{\"qpoolTwin\":\"a\",\"qpoolTwin\":\"b\"}";
    assert_null(payload_drop_key(twice, strlen(twice), PAYLOAD_TWIN, &len)); /* one would be left */
}

static void test_set_attempts_reads_back_what_it_wrote(void **state)
{
    (void)state;
    size_t len;
    /* control bytes are whitespace to cJSON: the editor must see past them */
    static const char ctl[] = "{\"a\":1,\x1b\x1b\"attempts\":4}";
    char *out = set_attempts(ctl, 0, &len);
    assert_non_null(out);
    assert_string_equal(out, "{\"a\":1,\x1b\x1b\"attempts\":0}");
    free(out);
    /* an escaped key the scanner cannot match: refused, not doubled */
    assert_null(set_attempts("{\"attem\\u0070ts\":4,\"b\":1}", 0, &len));
}

/* queue:retry's refreshRetryUntil (review #17): the same window from now. */
static void test_refresh_retry_until(void **state)
{
    (void)state;
    char *out;
    size_t len;
    static const char created[] = "{\"retryUntil\":1000600,\"createdAt\":1000000,\"attempts\":3}";
    assert_int_equal(payload_refresh_retry_until(created, strlen(created), 2000000, &out, &len), 1);
    assert_string_equal(out, "{\"retryUntil\":2000600,\"createdAt\":1000000,\"attempts\":3}");
    free(out);
    static const char pushed[] = "{\"attempts\":1,\"pushedAt\":\"1000000.25\",\"retryUntil\":1000060}";
    assert_int_equal(payload_refresh_retry_until(pushed, strlen(pushed), 5000000, &out, &len), 1);
    assert_string_equal(out, "{\"attempts\":1,\"pushedAt\":\"1000000.25\",\"retryUntil\":5000060}");
    free(out);
    /* nothing to refresh */
    static const char none[] = "{\"retryUntil\":null,\"createdAt\":1000000,\"attempts\":3}";
    assert_int_equal(payload_refresh_retry_until(none, strlen(none), 2000000, &out, &len), 0);
    assert_null(out);
    static const char legacy[] = "{\"timeoutAt\":1000060,\"attempts\":3}";
    assert_int_equal(payload_refresh_retry_until(legacy, strlen(legacy), 2000000, &out, &len), 0);
    /* Laravel before 12.11: no dispatch time, only the job class knows */
    static const char old[] = "{\"retryUntil\":1000600,\"attempts\":3}";
    assert_int_equal(payload_refresh_retry_until(old, strlen(old), 2000000, &out, &len), -1);
    assert_null(out);
}

static void test_set_attempts_preserves_bytes(void **state)
{
    (void)state;
    /* big integers (beyond double precision), "\/" escapes, key order, spacing, floats */
    static const char raw[] =
        "{\"id\":12345678901234567,\"s\":\"a\\/b \\u00e9\",\"attempts\":3, \"f\":1.0e2,"
        "\"z\":{\"attempts\":7},\"w\":\"\xc3\xb6\"}";
    static const char expect[] =
        "{\"id\":12345678901234567,\"s\":\"a\\/b \\u00e9\",\"attempts\":0, \"f\":1.0e2,"
        "\"z\":{\"attempts\":7},\"w\":\"\xc3\xb6\"}";
    size_t len = 0;
    char *out = set_attempts(raw, 0, &len);
    assert_non_null(out);
    assert_int_equal(len, strlen(expect));
    assert_string_equal(out, expect);
    free(out);

    /* spaces around the value */
    static const char spaced[] = "{ \"attempts\" :  41 , \"b\":1 }";
    out = set_attempts(spaced, 42, &len);
    assert_string_equal(out, "{ \"attempts\" :  42 , \"b\":1 }");
    free(out);

    /* a string-valued attempts is replaced by a number */
    out = set_attempts("{\"attempts\":\"2\",\"x\":1}", 0, &len);
    assert_string_equal(out, "{\"attempts\":0,\"x\":1}");
    free(out);

    /* negative and large values */
    out = set_attempts("{\"attempts\":1}", -1, &len);
    assert_string_equal(out, "{\"attempts\":-1}");
    free(out);
    out = set_attempts("{\"attempts\":1}", 12345678901L, &len);
    assert_string_equal(out, "{\"attempts\":12345678901}");
    assert_int_equal(len, strlen("{\"attempts\":12345678901}"));
    free(out);
}

static void test_set_attempts_nested_untouched(void **state)
{
    (void)state;
    size_t len = 0;
    char *out = set_attempts("{\"data\":{\"attempts\":9},\"attempts\":1}", 2, &len);
    assert_string_equal(out, "{\"data\":{\"attempts\":9},\"attempts\":2}");
    free(out);
    /* only a nested one: a top-level key is added, the nested one kept */
    out = set_attempts("{\"data\":{\"attempts\":9}}", 0, &len);
    assert_non_null(out);
    assert_string_equal(out, "{\"data\":{\"attempts\":9},\"attempts\":0}");
    assert_valid_object(out, len, 0);
    free(out);
}

static void test_set_attempts_inserts_when_missing(void **state)
{
    (void)state;
    size_t len = 0;
    char *out = set_attempts("{\"a\":1}", 4, &len);
    assert_non_null(out);
    assert_string_equal(out, "{\"a\":1,\"attempts\":4}");
    assert_int_equal(len, strlen(out));
    assert_valid_object(out, len, 4);
    free(out);

    out = set_attempts("{}", 0, &len);
    assert_non_null(out);
    assert_string_equal(out, "{\"attempts\":0}");
    assert_int_equal(len, strlen("{\"attempts\":0}"));
    free(out);

    out = set_attempts("{ \n }", 3, &len);
    assert_non_null(out);
    assert_valid_object(out, len, 3);
    free(out);

    /* trailing whitespace after the object is kept after it */
    out = set_attempts("{\"a\":\"}\"}\n", 1, &len);
    assert_non_null(out);
    assert_string_equal(out, "{\"a\":\"}\",\"attempts\":1}\n");
    free(out);

    /* the Laravel string job without its attempts key */
    static const char noatt[] = "{\"uuid\":\"u\",\"job\":\"App\\\\Handlers\\\\Foo@bar\",\"data\":{\"a\":1},\"id\":\"x\"}";
    out = set_attempts(noatt, 0, &len);
    assert_non_null(out);
    assert_memory_equal(out, noatt, strlen(noatt) - 1);
    assert_string_equal(out + strlen(noatt) - 1, ",\"attempts\":0}");
    free(out);
}

static void test_set_attempts_null_for_non_objects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "[1,2]", "[{\"attempts\":1}]", "\"str\"", "42", "null", "", "   ",
        "{\"a\":1", "{\"a\":1}}", "{\"a\":1}x", "x{\"a\":1}", "{\"a\":\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = 777;
        char *out = set_attempts(bad[i], 1, &len);
        if (out) fail_msg("payload_set_attempts(%s) returned %s, expected NULL", bad[i], out);
    }
}

/* Contract: "NULL if raw is not a JSON object". Objects that are not valid JSON
 * must not be edited into other invalid bytes: `qpool failed retry` puts the
 * original bytes back when this returns NULL. */
static void test_set_attempts_null_for_malformed_objects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "{\"a\":1,}",          /* trailing comma */
        "{\"a\":}",            /* missing value */
        "{\"a\" 1}",           /* missing colon */
        "{\"attempts\":1,}",   /* attempts present, object still invalid */
    };
    int wrong = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = 0;
        char *out = set_attempts(bad[i], 0, &len);
        if (out) {
            print_error("payload_set_attempts(%s) returned %.*s, expected NULL\n", bad[i], (int)len, out);
            free(out);
            wrong++;
        }
    }
    assert_int_equal(wrong, 0);
}

/* ------------------------------------------------------------ payload_build */

static const char *const LARAVEL_KEYS[] = {"uuid", "displayName", "job", "maxTries", "maxExceptions",
                                           "failOnTimeout", "backoff", "timeout", "retryUntil", "data",
                                           "id", "attempts"};

static void assert_uuid4(const char *u)
{
    assert_int_equal(strlen(u), 36);
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            assert_int_equal(u[i], '-');
        else
            assert_true(isxdigit((unsigned char)u[i]) && !isupper((unsigned char)u[i]));
    }
    assert_int_equal(u[14], '4');
    assert_non_null(strchr("89ab", u[19]));
}

static void assert_laravel_shape(const char *raw)
{
    cJSON *o = cJSON_Parse(raw);
    if (!o) fail_msg("payload_build output is not JSON: %s", raw);
    assert_true(cJSON_IsObject(o));
    size_t k = 0;
    for (const cJSON *c = o->child; c; c = c->next, k++) {
        if (k >= sizeof LARAVEL_KEYS / sizeof LARAVEL_KEYS[0]) fail_msg("extra key %s", c->string);
        if (strcmp(c->string, LARAVEL_KEYS[k]))
            fail_msg("key %zu is %s, expected %s", k, c->string, LARAVEL_KEYS[k]);
    }
    assert_int_equal(k, sizeof LARAVEL_KEYS / sizeof LARAVEL_KEYS[0]);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "attempts");
    assert_true(cJSON_IsNumber(a));
    assert_int_equal(a->valueint, 0);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    assert_true(cJSON_IsString(id));
    assert_int_equal(strlen(id->valuestring), 32);
    for (int i = 0; i < 32; i++) assert_true(isalnum((unsigned char)id->valuestring[i]));
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "uuid");
    assert_true(cJSON_IsString(u));
    assert_uuid4(u->valuestring);
    cJSON_Delete(o);
}

static payload_spec_t null_spec(const char *job)
{
    payload_spec_t s;
    memset(&s, 0, sizeof s);
    s.job = job;
    s.max_tries = -1;
    s.max_exceptions = -1;
    s.timeout = -1;
    s.retry_until = 0;
    return s;
}

static void test_build_string_job_defaults(void **state)
{
    (void)state;
    payload_spec_t s = null_spec("App\\Handlers\\Foo@bar");
    s.data_json = "{\"a\":1}";
    char *raw = payload_build(&s);
    assert_non_null(raw);
    assert_laravel_shape(raw);

    cJSON *o = cJSON_Parse(raw);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "displayName")->valuestring, "App\\Handlers\\Foo");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "job")->valuestring, "App\\Handlers\\Foo@bar");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "maxTries")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "maxExceptions")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "failOnTimeout")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "backoff")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "timeout")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "retryUntil")));
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "data");
    assert_true(cJSON_IsObject(d));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(d, "a")->valueint, 1);
    cJSON_Delete(o);

    /* byte-exact apart from the random uuid and id */
    char *expect = NULL;
    size_t vs, ve, is, ie;
    assert_true(json_top_value(raw, strlen(raw), "uuid", &vs, &ve));
    assert_true(json_top_value(raw, strlen(raw), "id", &is, &ie));
    assert_true(asprintf(&expect,
                         "{\"uuid\":%.*s,\"displayName\":\"App\\\\Handlers\\\\Foo\",\"job\":\"App\\\\Handlers\\\\Foo@bar\","
                         "\"maxTries\":null,\"maxExceptions\":null,\"failOnTimeout\":false,\"backoff\":null,"
                         "\"timeout\":null,\"retryUntil\":null,\"data\":{\"a\":1},\"id\":%.*s,\"attempts\":0}",
                         (int)(ve - vs), raw + vs, (int)(ie - is), raw + is) > 0);
    assert_string_equal(raw, expect);
    free(expect);

    /* and it reads back as qpool's own worker would read it */
    job_payload_t p;
    char err[128];
    assert_int_equal(payload_parse(raw, strlen(raw), &p, err, sizeof err), 0);
    assert_int_equal(p.attempts, 0);
    assert_false(p.has_max_tries);
    assert_false(p.has_timeout);
    assert_false(p.has_retry_until);
    assert_null(p.backoff);
    assert_string_equal(p.display_name, "App\\Handlers\\Foo");
    payload_free(&p);
    free(raw);
}

static void test_build_data_default_and_no_at(void **state)
{
    (void)state;
    payload_spec_t s = null_spec("App\\Handlers\\Plain"); /* no '@': displayName is the whole job */
    char *raw = payload_build(&s);
    assert_laravel_shape(raw);
    cJSON *o = cJSON_Parse(raw);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "displayName")->valuestring, "App\\Handlers\\Plain");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "data");
    assert_true(cJSON_IsObject(d));
    assert_null(d->child); /* data NULL -> {} */
    cJSON_Delete(o);
    assert_non_null(strstr(raw, "\"data\":{},"));
    free(raw);
}

static void test_build_all_fields(void **state)
{
    (void)state;
    payload_spec_t s = null_spec("App/Jobs/Mail@send");
    s.display_name = "Custom/Name \"quoted\"";
    s.data_json = "{\"x\":[1,2,{\"y\":\"z\"}],\"big\":12345678901234567}";
    s.max_tries = 3;
    s.max_exceptions = 2;
    s.fail_on_timeout = true;
    s.backoff = "10,30,60";
    s.timeout = 5;
    s.retry_until = 1700000000;
    char *raw = payload_build(&s);
    assert_laravel_shape(raw);
    /* '/' escaped as "\/" like PHP's json_encode, quotes escaped */
    assert_non_null(strstr(raw, "\"displayName\":\"Custom\\/Name \\\"quoted\\\"\""));
    assert_non_null(strstr(raw, "\"job\":\"App\\/Jobs\\/Mail@send\""));
    assert_null(strstr(raw, "App/Jobs"));
    /* data is embedded verbatim (big integer intact) */
    assert_non_null(strstr(raw, "\"data\":{\"x\":[1,2,{\"y\":\"z\"}],\"big\":12345678901234567},\"id\":"));
    assert_non_null(strstr(raw, "\"maxTries\":3,\"maxExceptions\":2,\"failOnTimeout\":true,"
                                "\"backoff\":\"10,30,60\",\"timeout\":5,\"retryUntil\":1700000000,"));

    job_payload_t p;
    char err[128];
    assert_int_equal(payload_parse(raw, strlen(raw), &p, err, sizeof err), 0);
    assert_string_equal(p.display_name, "Custom/Name \"quoted\"");
    assert_string_equal(p.job, "App/Jobs/Mail@send");
    assert_int_equal(p.max_tries, 3);
    assert_int_equal(p.max_exceptions, 2);
    assert_true(p.fail_on_timeout);
    assert_string_equal(p.backoff, "10,30,60");
    assert_int_equal(p.timeout, 5);
    assert_true(p.has_retry_until);
    assert_int_equal(p.retry_until, 1700000000);
    assert_int_equal(p.attempts, 0);
    payload_free(&p);
    free(raw);

    /* displayName from a job with '/' before the '@' */
    s = null_spec("App/Handlers/Foo@bar");
    raw = payload_build(&s);
    assert_non_null(strstr(raw, "\"displayName\":\"App\\/Handlers\\/Foo\","));
    free(raw);

    /* zero limits are numbers, not null */
    s = null_spec("A@b");
    s.max_tries = 0;
    s.max_exceptions = 0;
    s.timeout = 0;
    raw = payload_build(&s);
    assert_non_null(strstr(raw, "\"maxTries\":0,\"maxExceptions\":0,"));
    assert_non_null(strstr(raw, "\"timeout\":0,"));
    free(raw);
}

static void test_build_unique_ids(void **state)
{
    (void)state;
    payload_spec_t s = null_spec("A@b");
    char *a = payload_build(&s), *b = payload_build(&s);
    job_payload_t pa, pb;
    char err[64];
    assert_int_equal(payload_parse(a, strlen(a), &pa, err, sizeof err), 0);
    assert_int_equal(payload_parse(b, strlen(b), &pb, err, sizeof err), 0);
    assert_string_not_equal(pa.uuid, pb.uuid);
    assert_string_not_equal(pa.id, pb.id);
    payload_free(&pa);
    payload_free(&pb);
    free(a);
    free(b);
}

static void test_build_then_set_attempts(void **state)
{
    (void)state;
    payload_spec_t s = null_spec("A@b");
    char *raw = payload_build(&s);
    size_t len;
    char *out = payload_set_attempts(raw, strlen(raw), 3, &len);
    assert_non_null(out);
    size_t n = strlen(raw);
    assert_int_equal(len, n);
    assert_memory_equal(out, raw, n - 2);
    assert_string_equal(out + n - 2, "3}");
    free(out);
    free(raw);
}


/* Review #4: a displayName (or job, uuid, id) that is not valid UTF-8 is
 * repaired where the worker takes it, one U+FFFD per ill-formed subpart;
 * valid text is kept as it is. */
static void test_parse_repairs_invalid_utf8(void **state)
{
    (void)state;
    static const char raw[] = "{\"uuid\":\"u-\xff\",\"id\":\"i\xc3\",\"displayName\":\"App\\\\Jobs\\\\X\xff\xfe\","
                              "\"job\":\"Caf\xc3\xa9@h\xed\xa0\x80\",\"backoff\":\"1\xe2\x82\",\"attempts\":0}";
    job_payload_t p;
    char err[128];
    assert_int_equal(parse(raw, &p, err, sizeof err), 0);
    assert_string_equal(p.display_name, "App\\Jobs\\X\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(p.uuid, "u-\xef\xbf\xbd");
    assert_string_equal(p.id, "i\xef\xbf\xbd");
    assert_string_equal(p.job, "Caf\xc3\xa9@h\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(p.backoff, "1\xef\xbf\xbd");
    assert_string_equal(payload_name(&p), "App\\Jobs\\X\xef\xbf\xbd\xef\xbf\xbd");
    payload_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_laravel8_object_job),
        cmocka_unit_test(test_parse_repairs_invalid_utf8),
        cmocka_unit_test(test_parse_laravel8_string_job),
        cmocka_unit_test(test_parse_reserved_copy_reordered),
        cmocka_unit_test(test_parse_minimal_payload),
        cmocka_unit_test(test_parse_numeric_strings),
        cmocka_unit_test(test_parse_rejects_unusable),
        cmocka_unit_test(test_parse_reason_texts),
        cmocka_unit_test(test_parse_length_bounded),
        cmocka_unit_test(test_parse_retry_until_and_legacy_timeout_at),
        cmocka_unit_test(test_parse_delay_and_fail_on_timeout),
        cmocka_unit_test(test_top_value_only_top_level),
        cmocka_unit_test(test_top_value_strings_with_escapes_and_braces),
        cmocka_unit_test(test_top_value_types_and_whitespace),
        cmocka_unit_test(test_top_value_exact_key_match),
        cmocka_unit_test(test_top_value_rejects_non_objects),
        cmocka_unit_test(test_set_attempts_replaces_textually),
        cmocka_unit_test(test_set_attempts_preserves_bytes),
        cmocka_unit_test(test_set_attempts_reads_back_what_it_wrote),
        cmocka_unit_test(test_available_at_stamp),
        cmocka_unit_test(test_drop_key),
        cmocka_unit_test(test_refresh_retry_until),
        cmocka_unit_test(test_set_attempts_nested_untouched),
        cmocka_unit_test(test_set_attempts_inserts_when_missing),
        cmocka_unit_test(test_set_attempts_null_for_non_objects),
        cmocka_unit_test(test_set_attempts_null_for_malformed_objects),
        cmocka_unit_test(test_build_string_job_defaults),
        cmocka_unit_test(test_build_data_default_and_no_at),
        cmocka_unit_test(test_build_all_fields),
        cmocka_unit_test(test_build_unique_ids),
        cmocka_unit_test(test_build_then_set_attempts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
