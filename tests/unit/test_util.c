/*
 * test_util.c - unit tests for src/util.h: the growable buffer (sbuf_*), JSON
 * string escaping, number parsing, edit distance, random ids and string
 * vectors; text for a terminal or a log line (sbuf_text) and log.c's lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/util.h"

/* ------------------------------------------------------------ sbuf */

static void test_sbuf_init_is_empty(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    assert_int_equal(b.len, 0);
    assert_null(b.data);
    /* stealing an empty buffer gives an empty, freeable string */
    char *s = sbuf_steal(&b);
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

static void test_sbuf_append_puts_putc(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    sbuf_append(&b, "abc", 3);
    sbuf_puts(&b, "def");
    sbuf_putc(&b, 'g');
    sbuf_append(&b, "xyz", 0); /* zero-length append is a no-op */
    assert_int_equal(b.len, 7);
    assert_string_equal(b.data, "abcdefg");
    assert_int_equal(b.data[b.len], '\0');
    assert_true(b.cap > b.len);
    sbuf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

static void test_sbuf_grows_past_initial_capacity(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    for (int i = 0; i < 5000; i++) sbuf_putc(&b, (char)('a' + i % 26));
    assert_int_equal(b.len, 5000);
    assert_true(b.cap >= 5001);
    for (int i = 0; i < 5000; i++) assert_int_equal(b.data[i], 'a' + i % 26);
    assert_int_equal(b.data[5000], '\0');
    /* one big append across several doublings */
    char big[10000];
    memset(big, 'Z', sizeof big);
    sbuf_append(&b, big, sizeof big);
    assert_int_equal(b.len, 15000);
    assert_int_equal(b.data[4999], 'a' + 4999 % 26);
    assert_int_equal(b.data[5000], 'Z');
    assert_int_equal(b.data[14999], 'Z');
    assert_int_equal(b.data[15000], '\0');
    sbuf_free(&b);
}

static void test_sbuf_binary_with_nul(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    static const char bin[] = {'a', '\0', 'b', '\0', '\xff'};
    sbuf_append(&b, bin, sizeof bin);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, bin, sizeof bin);
    assert_int_equal(b.data[5], '\0');
    sbuf_free(&b);
}

static void test_sbuf_printf(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    sbuf_puts(&b, "x=");
    sbuf_printf(&b, "%d,%s,%.2f", 42, "str", 1.5);
    assert_string_equal(b.data, "x=42,str,1.50");
    assert_int_equal(b.len, strlen("x=42,str,1.50"));
    /* output longer than the current capacity */
    char longs[300];
    memset(longs, 'q', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    sbuf_printf(&b, "[%s]", longs);
    assert_int_equal(b.len, strlen("x=42,str,1.50") + 2 + 299);
    assert_int_equal(b.data[b.len - 1], ']');
    assert_int_equal(b.data[b.len], '\0');
    assert_int_equal(strlen(b.data), b.len);
    /* empty format */
    size_t before = b.len;
    sbuf_printf(&b, "%s", "");
    assert_int_equal(b.len, before);
    sbuf_free(&b);
}

static void test_sbuf_consume(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    sbuf_puts(&b, "hello world");
    sbuf_consume(&b, 6);
    assert_int_equal(b.len, 5);
    assert_string_equal(b.data, "world");
    sbuf_consume(&b, 0);
    assert_string_equal(b.data, "world");
    sbuf_consume(&b, 5); /* exactly all */
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    sbuf_puts(&b, "abc");
    sbuf_consume(&b, 100); /* more than there is */
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    /* still usable afterwards */
    sbuf_puts(&b, "again");
    assert_string_equal(b.data, "again");
    /* binary data moves intact */
    sbuf_reset(&b);
    sbuf_append(&b, "12\0" "45", 5);
    sbuf_consume(&b, 1);
    assert_int_equal(b.len, 4);
    assert_memory_equal(b.data, "2\0" "45", 4);
    sbuf_free(&b);
}

static void test_sbuf_reset_keeps_buffer(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    sbuf_puts(&b, "something");
    sbuf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_non_null(b.data);
    assert_string_equal(b.data, "");
    sbuf_puts(&b, "new");
    assert_string_equal(b.data, "new");
    char *s = sbuf_steal(&b);
    assert_string_equal(s, "new");
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    free(s);
}

/* ------------------------------------------------------------ json_str */

static char *json_of(const char *s, size_t n)
{
    sbuf_t b;
    sbuf_init(&b);
    sbuf_json_str(&b, s, n);
    return sbuf_steal(&b);
}

static void test_json_str_plain_and_specials(void **state)
{
    (void)state;
    char *j = json_of("hello", 5);
    assert_string_equal(j, "\"hello\"");
    free(j);
    j = json_of("", 0);
    assert_string_equal(j, "\"\"");
    free(j);
    j = json_of("a\"b\\c", 5);
    assert_string_equal(j, "\"a\\\"b\\\\c\"");
    free(j);
    j = json_of("l1\nl2\r\tend", 10);
    assert_string_equal(j, "\"l1\\nl2\\r\\tend\"");
    free(j);
    /* '/' and non-ASCII UTF-8 are left alone */
    j = json_of("a/b \xc3\xb6", 6);
    assert_string_equal(j, "\"a/b \xc3\xb6\"");
    free(j);
}

static void test_json_str_control_chars_as_u00xx(void **state)
{
    (void)state;
    char *j = json_of("\x01", 1);
    assert_string_equal(j, "\"\\u0001\"");
    free(j);
    j = json_of("x\x1fy", 3);
    assert_string_equal(j, "\"x\\u001fy\"");
    free(j);
    j = json_of("\x08\x0c\x0b", 3);
    /* every control byte comes out as a valid escape: \b \f \u00XX or \u00XX */
    cJSON *o = cJSON_Parse(j);
    assert_non_null(o);
    assert_true(cJSON_IsString(o));
    assert_string_equal(o->valuestring, "\x08\x0c\x0b");
    cJSON_Delete(o);
    for (const char *p = j; *p; p++) assert_true((unsigned char)*p >= 0x20);
    free(j);
    /* DEL (0x7f) is allowed raw in JSON */
    j = json_of("\x7f", 1);
    assert_string_equal(j, "\"\x7f\"");
    free(j);
}

static void test_json_str_binary_with_nul(void **state)
{
    (void)state;
    char *j = json_of("a\0b", 3);
    assert_string_equal(j, "\"a\\u0000b\"");
    free(j);
    /* the length, not the NUL, decides where the input ends */
    j = json_of("ab\0cd", 2);
    assert_string_equal(j, "\"ab\"");
    free(j);
    j = json_of("\0\0", 2);
    assert_string_equal(j, "\"\\u0000\\u0000\"");
    free(j);
}

static void test_json_str_appends_and_roundtrips(void **state)
{
    (void)state;
    sbuf_t b;
    sbuf_init(&b);
    sbuf_puts(&b, "{\"k\":");
    /* every byte value 1..127 once: must parse back to the same bytes */
    char all[128];
    for (int i = 1; i < 128; i++) all[i - 1] = (char)i;
    sbuf_json_str(&b, all, 127);
    sbuf_putc(&b, '}');
    cJSON *o = cJSON_Parse(b.data);
    assert_non_null(o);
    cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "k");
    assert_true(cJSON_IsString(k));
    assert_int_equal(strlen(k->valuestring), 127);
    assert_memory_equal(k->valuestring, all, 127);
    cJSON_Delete(o);
    sbuf_free(&b);
}

/* ------------------------------------------------------------ parse_long / parse_double */

static void test_parse_long(void **state)
{
    (void)state;
    long v = -1;
    assert_true(parse_long("42", &v));
    assert_int_equal(v, 42);
    assert_true(parse_long("-7", &v));
    assert_int_equal(v, -7);
    assert_true(parse_long("0", &v));
    assert_int_equal(v, 0);
    assert_true(parse_long("9223372036854775807", &v));
    assert_true(v == LONG_MAX);
    assert_true(parse_long("-9223372036854775808", &v));
    assert_true(v == LONG_MIN);

    v = 1234;
    assert_false(parse_long("", &v));
    assert_false(parse_long(NULL, &v));
    assert_false(parse_long("abc", &v));
    assert_false(parse_long("12abc", &v));
    assert_false(parse_long("1.5", &v));
    assert_false(parse_long("0x10", &v));
    assert_false(parse_long("5 ", &v));
    assert_false(parse_long("-", &v));
    assert_false(parse_long("9223372036854775808", &v));   /* overflow */
    assert_false(parse_long("-9223372036854775809", &v));  /* underflow */
    assert_false(parse_long("99999999999999999999999", &v));
    assert_int_equal(v, 1234); /* untouched on failure */
}

static void test_parse_double(void **state)
{
    (void)state;
    double d = -1;
    assert_true(parse_double("1.5", &d));
    assert_true(d == 1.5);
    assert_true(parse_double("-2e3", &d));
    assert_true(d == -2000.0);
    assert_true(parse_double("7", &d));
    assert_true(d == 7.0);
    assert_true(parse_double("0.25", &d));
    assert_true(d == 0.25);

    d = 3.0;
    assert_false(parse_double("", &d));
    assert_false(parse_double(NULL, &d));
    assert_false(parse_double("abc", &d));
    assert_false(parse_double("1.5x", &d));
    assert_false(parse_double("1.5 ", &d));
    assert_false(parse_double("1e999", &d)); /* overflow */
    assert_false(parse_double("-1e999", &d));
    assert_false(parse_double("nan", &d));
    assert_false(parse_double("inf", &d));
    assert_false(parse_double("infinity", &d));
    assert_true(d == 3.0);
}

/* ------------------------------------------------------------ edit_distance */

static void test_edit_distance(void **state)
{
    (void)state;
    assert_int_equal(edit_distance("tries", "tries", 2), 0);
    assert_int_equal(edit_distance("tries", "trie", 2), 1);    /* deletion */
    assert_int_equal(edit_distance("tries", "triess", 2), 1);  /* insertion */
    assert_int_equal(edit_distance("tries", "trias", 2), 1);   /* substitution */
    assert_int_equal(edit_distance("tires", "tries", 2), 2);   /* transposition = 2 edits */
    assert_int_equal(edit_distance("kitten", "sitting", 5), 3);
    assert_int_equal(edit_distance("", "abc", 5), 3);
    assert_int_equal(edit_distance("abc", "", 5), 3);
    assert_int_equal(edit_distance("", "", 0), 0);
    /* symmetric */
    assert_int_equal(edit_distance("sitting", "kitten", 5), 3);
}

static void test_edit_distance_cap(void **state)
{
    (void)state;
    /* above the cap: cap + 1, whatever the real distance */
    assert_int_equal(edit_distance("kitten", "sitting", 2), 3);
    assert_int_equal(edit_distance("abcdef", "uvwxyz", 2), 3);
    assert_int_equal(edit_distance("abc", "xyz", 1), 2);
    assert_int_equal(edit_distance("", "abcd", 2), 3);
    /* exactly at the cap */
    assert_int_equal(edit_distance("abc", "abx", 1), 1);
    assert_int_equal(edit_distance("kitten", "sitting", 3), 3);
    /* very long strings are not compared */
    char a[100], b[100];
    memset(a, 'a', 99);
    a[99] = '\0';
    memcpy(b, a, sizeof b);
    assert_int_equal(edit_distance(a, b, 2), 3);
}

/* ------------------------------------------------------------ random ids */

static bool is_lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static void test_uuid4_shape(void **state)
{
    (void)state;
    char prev[37] = "";
    for (int n = 0; n < 200; n++) {
        char u[37];
        memset(u, 'X', sizeof u);
        uuid4(u);
        assert_int_equal(strlen(u), 36);
        for (int i = 0; i < 36; i++) {
            if (i == 8 || i == 13 || i == 18 || i == 23)
                assert_int_equal(u[i], '-');
            else
                assert_true(is_lower_hex(u[i]));
        }
        assert_int_equal(u[14], '4');                 /* version 4 */
        assert_non_null(strchr("89ab", u[19]));        /* RFC 4122 variant */
        assert_string_not_equal(u, prev);
        memcpy(prev, u, sizeof u);
    }
}

static void test_random_alnum(void **state)
{
    (void)state;
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    bool upper = false, lower = false, digit = false;
    char prev[33] = "";
    for (int n = 0; n < 100; n++) {
        char id[34];
        memset(id, '#', sizeof id);
        random_alnum(id, 32);
        assert_int_equal(id[32], '\0');
        assert_int_equal(id[33], '#'); /* nothing written past the NUL */
        assert_int_equal(strlen(id), 32);
        for (int i = 0; i < 32; i++) {
            assert_non_null(memchr(set, id[i], sizeof set - 1));
            upper |= isupper((unsigned char)id[i]) != 0;
            lower |= islower((unsigned char)id[i]) != 0;
            digit |= isdigit((unsigned char)id[i]) != 0;
        }
        assert_string_not_equal(id, prev);
        memcpy(prev, id, 33);
    }
    assert_true(upper && lower && digit);

    /* lengths beyond one internal chunk, and zero */
    char big[201];
    random_alnum(big, 200);
    assert_int_equal(strlen(big), 200);
    for (int i = 0; i < 200; i++) assert_true(isalnum((unsigned char)big[i]));
    char none[1] = {'#'};
    random_alnum(none, 0);
    assert_int_equal(none[0], '\0');
}

/* ------------------------------------------------------------ string vectors */

static void test_strv_dup_and_free(void **state)
{
    (void)state;
    char a[] = "one", b[] = "two", c[] = "";
    char *src[] = {a, b, c, NULL};
    char **d = strv_dup(src);
    assert_non_null(d);
    assert_int_equal(strv_len(d), 3);
    assert_string_equal(d[0], "one");
    assert_string_equal(d[1], "two");
    assert_string_equal(d[2], "");
    assert_null(d[3]);
    /* deep copy: independent of the source */
    assert_ptr_not_equal(d[0], src[0]);
    a[0] = 'X';
    assert_string_equal(d[0], "one");
    free_strv(d);

    /* empty and NULL vectors */
    char *empty[] = {NULL};
    d = strv_dup(empty);
    assert_non_null(d);
    assert_null(d[0]);
    assert_int_equal(strv_len(d), 0);
    free_strv(d);
    d = strv_dup(NULL);
    assert_non_null(d);
    assert_null(d[0]);
    free_strv(d);
    assert_int_equal(strv_len(NULL), 0);
    free_strv(NULL); /* no-op */
}

static void test_xstr_helpers(void **state)
{
    (void)state;
    char *s = xstrndup("abcdef", 3);
    assert_string_equal(s, "abc");
    free(s);
    s = xstrdup("");
    assert_string_equal(s, "");
    free(s);
    s = xasprintf("%s-%d", "n", 7);
    assert_string_equal(s, "n-7");
    free(s);
}

static void test_write_all_pipe(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write_all(fds[1], "hello", 5), 0);
    char buf[8] = {0};
    assert_int_equal(read(fds[0], buf, sizeof buf), 5);
    assert_memory_equal(buf, "hello", 5);
    close(fds[0]);
    /* writing to a pipe whose read end is gone fails (EPIPE; SIGPIPE ignored here) */
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    assert_int_equal(write_all(fds[1], "x", 1), -1);
    signal(SIGPIPE, old);
    close(fds[1]);
    assert_int_equal(write_all(-1, "x", 1), -1);
}


/* ------------------------------------------------------------ UTF-8 */

static char *rep(const char *s, size_t n)
{
    size_t len;
    char *r = utf8_repair(s, n, &len);
    assert_int_equal(len, strlen(r));
    return r;
}

static void test_utf8_valid_text_kept(void **state)
{
    (void)state;
    static const char *ok[] = {"", "App\\Jobs\\Send", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                               "\xef\xbf\xbd", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf", "\xee\x80\x80"};
    for (size_t i = 0; i < ARRAY_LEN(ok); i++) {
        assert_true(utf8_valid(ok[i], strlen(ok[i])));
        char *r = rep(ok[i], strlen(ok[i]));
        assert_string_equal(r, ok[i]);
        free(r);
    }
    /* U+0000 is valid: kept with an explicit length */
    assert_true(utf8_valid("a\0b", 3));
}

static void test_utf8_invalid_detected(void **state)
{
    (void)state;
    static const char *bad[] = {"\xff", "\xfe", "\x80", "\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf",
                                "\xed\xa0\x80", "\xf0\x80\x80\xaf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
                                "\xc3", "\xe2\x82", "\xf0\x9f\x98", "a\xc3(", "caf\xe9"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        assert_false(utf8_valid(bad[i], strlen(bad[i])));
        char *r = rep(bad[i], strlen(bad[i]));
        assert_true(utf8_valid(r, strlen(r)));
        assert_non_null(strstr(r, UTF8_REPLACEMENT));
        free(r);
    }
}

/* One U+FFFD per maximal ill-formed subpart (Unicode 3.9, Table 3-8). */
static void test_utf8_maximal_subparts(void **state)
{
    (void)state;
    struct {
        const char *in, *out;
    } cases[] = {
        {"App\\X\xff\xfe", "App\\X\xef\xbf\xbd\xef\xbf\xbd"},
        {"a\xc3(b", "a\xef\xbf\xbd(b"},
        {"\xe2\x82(", "\xef\xbf\xbd("},                   /* a truncated 3-byte sequence: one */
        {"\xf0\x9f\x98", "\xef\xbf\xbd"},                 /* a truncated 4-byte sequence at the end: one */
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},         /* an overlong: two */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate: three */
        {"\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64",
         "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd" "d"},
        {"caf\xe9 ok", "caf\xef\xbf\xbd ok"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *r = rep(cases[i].in, strlen(cases[i].in));
        assert_string_equal(r, cases[i].out);
        free(r);
    }
    /* ASCII is never swallowed: JSON or exposition syntax around it survives */
    char *r = rep("{\"n\":\"\xe2\"}", 9);
    assert_string_equal(r, "{\"n\":\"\xef\xbf\xbd\"}");
    free(r);
}

static void test_utf8_repair_inplace_and_count(void **state)
{
    (void)state;
    char *s = xstrdup("ok");
    assert_int_equal(utf8_repair_inplace(&s), 0);
    assert_string_equal(s, "ok");
    free(s);
    s = xstrdup("X\xff\xfeY");
    assert_int_equal(utf8_repair_inplace(&s), 2);
    assert_string_equal(s, "X\xef\xbf\xbd\xef\xbf\xbdY");
    free(s);
    s = NULL;
    assert_int_equal(utf8_repair_inplace(&s), 0);
    sbuf_t b;
    sbuf_init(&b);
    assert_int_equal(sbuf_utf8(&b, "a\x80", 2), 1);
    assert_string_equal(b.data, "a\xef\xbf\xbd");
    sbuf_free(&b);
}

static void test_utf8_cut(void **state)
{
    (void)state;
    const char *s = "ab\xe2\x82\xac"; /* "ab€" */
    assert_int_equal(utf8_cut(s, 5, 10), 5);
    assert_int_equal(utf8_cut(s, 5, 5), 5);
    assert_int_equal(utf8_cut(s, 5, 4), 2);
    assert_int_equal(utf8_cut(s, 5, 3), 2);
    assert_int_equal(utf8_cut(s, 5, 2), 2);
    assert_int_equal(utf8_cut(s, 5, 1), 1);
}

/* ------------------------------------------------------------ text for terminals and logs (m1, m2) */

static char *esc(const char *s, size_t n, unsigned flags)
{
    char *r = text_escape(s, n, flags);
    assert_true(utf8_valid(r, strlen(r)));
    return r;
}

static void test_text_escape_controls(void **state)
{
    (void)state;
    struct {
        const char *in;
        size_t n;
        unsigned flags;
        const char *out;
    } cases[] = {
        /* printable text, UTF-8 and backslashes kept as they are */
        {"App\\Jobs\\Send caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0", 0, 0,
         "App\\Jobs\\Send caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0"},
        /* a forged row and terminal escapes */
        {"Name\n2026 error FORGED \x1b[31mRED\x1b[0m\r", 0, 0,
         "Name\\x0a2026 error FORGED \\x1b[31mRED\\x1b[0m\\x0d"},
        {"\x01\x07\x08\x09\x7f", 0, 0, "\\x01\\x07\\x08\\x09\\x7f"},
        /* OSC 52 (the clipboard) ended by BEL */
        {"\x1b]52;c;aGk=\x07", 0, 0, "\\x1b]52;c;aGk=\\x07"},
        /* C1: U+009B (CSI) as UTF-8, and a raw 0x9b (CSI to an 8-bit terminal) */
        {"a\xc2\x9b" "31mb", 0, 0, "a\\xc2\\x9b31mb"},
        {"a\x9b" "31m\x85", 0, 0, "a\\x9b31m\\x85"},
        /* ill-formed UTF-8: every byte of it, the text around kept */
        {"caf\xe9 \xe2\x82(", 0, 0, "caf\\xe9 \\xe2\\x82("},
        /* a multi-line field keeps its newlines and tabs, not the rest */
        {"line 1\n\tat x\r\n\x1b[2J", 0, TEXT_KEEP_NEWLINES, "line 1\n\tat x\\x0d\n\\x1b[2J"},
        /* NUL inside an explicit length */
        {"a\0b", 3, 0, "a\\x00b"},
        {"", 0, 0, ""},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        size_t n = cases[i].n ? cases[i].n : strlen(cases[i].in);
        char *r = esc(cases[i].in, n, cases[i].flags);
        assert_string_equal(r, cases[i].out);
        free(r);
    }
    sbuf_t b;
    sbuf_init(&b);
    sbuf_puts(&b, ">");
    assert_int_equal(sbuf_text(&b, "x\x1by\xff", 4, 0), 2); /* the count of bytes escaped */
    assert_string_equal(b.data, ">x\\x1by\\xff");
    assert_int_equal(sbuf_text(&b, "plain", 5, 0), 0);
    sbuf_free(&b);
    char *r = text_escape(NULL, 5, 0);
    assert_string_equal(r, "");
    free(r);
}

/* What log_msg wrote to stderr (fd 2 redirected to a file meanwhile). */
static char *logged(int format, const char *what)
{
    char path[] = "/tmp/qpool-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    log_set_format(format);
    log_msg(LOG_INFO, "failed job %s over HTTP", what);
    log_set_format(LOGFMT_TEXT);
    dup2(saved, 2);
    close(saved);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    return xstrdup(buf);
}

static void test_log_lines_escape_controls(void **state)
{
    (void)state;
    const char *hostile = "Name\n2026-11-27T23:59:59.000Z error master[1]: FORGED LINE \x1b[31mRED\x1b[0m\r\x9b\x07";
    char *line = logged(LOGFMT_TEXT, hostile);
    /* one line, ending where the message does, no control byte but its newline */
    assert_non_null(strstr(line, "FORGED LINE \\x1b[31mRED\\x1b[0m\\x0d\\x9b\\x07 over HTTP\n"));
    assert_non_null(strstr(line, "Name\\x0a2026-11-27T23:59:59.000Z"));
    assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1);
    for (const char *p = line; *p; p++)
        assert_true(*p == '\n' || ((unsigned char)*p >= 0x20 && *p != 0x7f));
    free(line);
    line = logged(LOGFMT_JSON, hostile);
    assert_non_null(strstr(line, "FORGED LINE \\\\x1b[31mRED"));
    assert_null(strchr(line, '\x1b'));
    assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1);
    free(line);
    line = logged(LOGFMT_TEXT, "App\\Jobs\\Send caf\xc3\xa9");
    assert_non_null(strstr(line, "failed job App\\Jobs\\Send caf\xc3\xa9 over HTTP\n"));
    free(line);
}

/* A time out of gmtime's range, or not a number, prints "-": before,
 * `qpool failed list` and /api/failed formatted an uninitialized struct tm
 * for a failed record whose failed_at was forged past it. */
static void test_utc_text(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(utc_text(0, buf, sizeof buf), "1970-01-01 00:00:00");
    assert_string_equal(utc_text(1764000000.9, buf, sizeof buf), "2025-11-24 16:00:00");
    assert_string_equal(utc_text(1e15, buf, sizeof buf), "-");
    assert_string_equal(utc_text(-1e15, buf, sizeof buf), "-");
    assert_string_equal(utc_text(9.2e18, buf, sizeof buf), "-");
    assert_string_equal(utc_text(NAN, buf, sizeof buf), "-");
    assert_string_equal(utc_text(INFINITY, buf, sizeof buf), "-");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sbuf_init_is_empty),
        cmocka_unit_test(test_sbuf_append_puts_putc),
        cmocka_unit_test(test_sbuf_grows_past_initial_capacity),
        cmocka_unit_test(test_sbuf_binary_with_nul),
        cmocka_unit_test(test_sbuf_printf),
        cmocka_unit_test(test_sbuf_consume),
        cmocka_unit_test(test_sbuf_reset_keeps_buffer),
        cmocka_unit_test(test_json_str_plain_and_specials),
        cmocka_unit_test(test_json_str_control_chars_as_u00xx),
        cmocka_unit_test(test_json_str_binary_with_nul),
        cmocka_unit_test(test_json_str_appends_and_roundtrips),
        cmocka_unit_test(test_parse_long),
        cmocka_unit_test(test_parse_double),
        cmocka_unit_test(test_edit_distance),
        cmocka_unit_test(test_edit_distance_cap),
        cmocka_unit_test(test_uuid4_shape),
        cmocka_unit_test(test_random_alnum),
        cmocka_unit_test(test_strv_dup_and_free),
        cmocka_unit_test(test_xstr_helpers),
        cmocka_unit_test(test_write_all_pipe),
        cmocka_unit_test(test_utf8_valid_text_kept),
        cmocka_unit_test(test_utf8_invalid_detected),
        cmocka_unit_test(test_utf8_maximal_subparts),
        cmocka_unit_test(test_utf8_repair_inplace_and_count),
        cmocka_unit_test(test_utf8_cut),
        cmocka_unit_test(test_text_escape_controls),
        cmocka_unit_test(test_log_lines_escape_controls),
        cmocka_unit_test(test_utc_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
