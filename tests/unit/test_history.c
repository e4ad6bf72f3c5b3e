/* history.c's byte test before parsing a job record (history_may_match):
 * it may say "maybe" for a record that does not match, never "no" for one
 * that does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/history.h"

/* needle in hay, ASCII case ignored: the obvious way */
static bool naive_has(const char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++) {
        size_t j = 0;
        for (; j < k; j++) {
            unsigned char a = (unsigned char)hay[i + j], b = (unsigned char)needle[j];
            if (a >= 'A' && a <= 'Z') a += 32;
            if (b >= 'A' && b <= 'Z') b += 32;
            if (a != b) break;
        }
        if (j == k) return true;
    }
    return false;
}

/* Bytes around the letters' edges ('@' before 'A', '[' after 'Z', '`',
 * '{'), high bytes, and a few letters, so that case folding is tested on
 * every edge, in records long enough to cross the search's windows. */
static const unsigned char ALPHABET[] = {'a', 'A', 'b', 'B', 'z', 'Z', '@', '[', '`', '{', 0xc1, 0xe1, 0xda, 0xfa,
                                         0x80, 0xff, '0', '-', ' '};

static char pick(unsigned *seed)
{
    return (char)ALPHABET[rand_r(seed) % sizeof ALPHABET];
}

static void test_text_is_found_whatever_the_case(void **state)
{
    (void)state;
    unsigned seed = 42;
    char *hay = malloc(9000);
    for (int round = 0; round < 3000; round++) {
        size_t n = round % 10 ? (size_t)(rand_r(&seed) % 64) : 4000 + (size_t)(rand_r(&seed) % 5000);
        for (size_t i = 0; i < n; i++) hay[i] = pick(&seed);
        char needle[8];
        size_t k = 1 + (size_t)(rand_r(&seed) % 4);
        if (n >= k && rand_r(&seed) % 2) { /* one that is there, in another case */
            size_t at = (size_t)rand_r(&seed) % (n - k + 1);
            for (size_t j = 0; j < k; j++) {
                char ch = hay[at + j];
                needle[j] = ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
            }
        } else {
            for (size_t j = 0; j < k; j++) needle[j] = pick(&seed);
        }
        needle[k] = '\0';
        job_filter_t f = {.text = needle};
        assert_int_equal(history_may_match(hay, n, &f), naive_has(hay, n, needle));
    }
    free(hay);
}

static void test_text_across_windows(void **state)
{
    (void)state;
    /* the needle straddles every position around 4096 and 8192 */
    size_t n = 10000;
    char *hay = malloc(n);
    for (size_t at = 4080; at < 4100; at++) {
        memset(hay, 'x', n);
        memcpy(hay + at, "INV-4711", 8);
        job_filter_t f = {.text = "inv-4711"};
        assert_true(history_may_match(hay, n, &f));
        memcpy(hay + at + 4096, "INV-4711", 8);
        assert_true(history_may_match(hay, n, &f));
        f.text = "inv-4712";
        assert_false(history_may_match(hay, n, &f));
    }
    job_filter_t f = {.text = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy"};
    memset(hay, 'x', n);
    assert_false(history_may_match(hay, n, &f));
    hay[n - 1] = 'Y';
    assert_true(history_may_match(hay, n, &f));
    free(hay);
}

static bool maybe(const char *rec, const job_filter_t *f)
{
    return history_may_match(rec, strlen(rec), f);
}

static void test_tag_and_class_by_their_exact_json(void **state)
{
    (void)state;
    const char *rec = "{\"uuid\":\"u1\",\"name\":\"App\\\\Jobs\\\\SendInvoice\",\"tags\":[\"App\\\\Models\\\\User:42\","
                      "\"vip\",\"caf\xc3\xa9\"],\"exception\":\"\"}";
    job_filter_t f = {.tag = "App\\Models\\User:42"};
    assert_true(maybe(rec, &f));
    f.tag = "App\\Models\\User:4"; /* a prefix of a tag is not the tag */
    assert_false(maybe(rec, &f));
    f.tag = "app\\models\\user:42"; /* tags are exact */
    assert_false(maybe(rec, &f));
    f.tag = "vip";
    assert_true(maybe(rec, &f));
    f.tag = "caf\xc3\xa9"; /* UTF-8: another encoder writes \u00e9, so no byte test */
    assert_true(maybe(rec, &f));
    f.tag = "a\"b"; /* a quote: likewise */
    assert_true(maybe(rec, &f));
    f = (job_filter_t){.name = "App\\Jobs\\SendInvoice"};
    assert_true(maybe(rec, &f));
    f.name = "App\\Jobs\\Send";
    assert_false(maybe(rec, &f));
    f.name = "App\\Jobs\\SendInvoice";
    f.tag = "vip";
    f.text = "SENDINVOICE";
    assert_true(maybe(rec, &f));
    f.text = "sendmail";
    assert_false(maybe(rec, &f));
    f.text = "Send\\Invoice"; /* a backslash in text: no byte test */
    assert_true(maybe(rec, &f));
}

/* What the byte test says "no" to, the full match refuses too. */
static void test_never_no_for_a_match(void **state)
{
    (void)state;
    const char *names[] = {"App\\Jobs\\A", "App\\Jobs\\B", "A/B", "caf\xc3\xa9", "q\"uote"};
    const char *tags[] = {"t1", "App\\Models\\User:1", "x y", "\xc3\xa9t\xc3\xa9", "tab\there"};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 5; j++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", names[i]);
            cJSON *t = cJSON_AddArrayToObject(o, "tags");
            cJSON_AddItemToArray(t, cJSON_CreateString(tags[j]));
            char *rec = cJSON_PrintUnformatted(o);
            for (size_t a = 0; a < 5; a++)
                for (size_t b = 0; b < 5; b++) {
                    job_filter_t f = {.name = names[a], .tag = tags[b]};
                    if (history_matches(o, &f)) assert_true(maybe(rec, &f));
                    assert_int_equal(history_matches(o, &f), a == i && b == j);
                }
            free(rec);
            cJSON_Delete(o);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_is_found_whatever_the_case),
        cmocka_unit_test(test_text_across_windows),
        cmocka_unit_test(test_tag_and_class_by_their_exact_json),
        cmocka_unit_test(test_never_no_for_a_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
