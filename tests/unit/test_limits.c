/*
 * test_limits.c - unit tests for src/config/limits.h: the rate syntax and
 * the checks of one limit (pure); the cluster pop's notify token (wlcluster.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "config/limits.h"
#include "core/util.h"
#include "worker/wlcluster.h"

static void test_rate_syntax(void **state)
{
    (void)state;
    char err[256];
    double r = 0;
    assert_int_equal(limit_parse_rate("50/s", &r, err, sizeof err), 0);
    assert_true(r == 50.0);
    assert_int_equal(limit_parse_rate("600/m", &r, err, sizeof err), 0);
    assert_true(r == 10.0);
    assert_int_equal(limit_parse_rate("2.5/s", &r, err, sizeof err), 0);
    assert_true(r == 2.5);
    const char *bad[] = {"", "50", "/s", "50/", "50/h", "0/s", "-1/s", "1e3/s", " 5/s", "5/s ", "5//s",
                         "nan/s", "2000000/s", "0.001/m", NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = 0;
        assert_int_equal(limit_parse_rate(bad[i], &r, err, sizeof err), -1);
        assert_non_null(strstr(err, "rate:"));
    }
    assert_int_equal(limit_parse_rate(NULL, &r, err, sizeof err), -1);
}

static void test_check_needs_target_and_limit(void **state)
{
    (void)state;
    char err[256];
    limit_conf_t l = {.concurrency = 2};
    assert_int_equal(limit_check(&l, err, sizeof err), -1);
    assert_non_null(strstr(err, "class"));
    l = (limit_conf_t){.class_name = "A"};
    assert_int_equal(limit_check(&l, err, sizeof err), -1);
    assert_non_null(strstr(err, "concurrency"));
    l = (limit_conf_t){.queue = "q", .concurrency = 3};
    assert_int_equal(limit_check(&l, err, sizeof err), 0);
    assert_int_equal(l.burst, 0);
    l = (limit_conf_t){.class_name = "", .concurrency = 3};
    assert_int_equal(limit_check(&l, err, sizeof err), -1);
    l = (limit_conf_t){.class_name = "A\nB", .concurrency = 3};
    assert_int_equal(limit_check(&l, err, sizeof err), -1);
}

static void test_check_rate_and_burst(void **state)
{
    (void)state;
    char err[256];
    limit_conf_t l = {.queue = "mail", .rate = "50/s"};
    assert_int_equal(limit_check(&l, err, sizeof err), 0);
    assert_int_equal(l.burst, 1); /* the default */
    assert_true(l.rate_per_s == 50.0);
    l = (limit_conf_t){.queue = "mail", .rate = "50/s", .burst = 10};
    assert_int_equal(limit_check(&l, err, sizeof err), 0);
    assert_int_equal(l.burst, 10);
    l = (limit_conf_t){.queue = "mail", .concurrency = 2, .burst = 10};
    assert_int_equal(limit_check(&l, err, sizeof err), -1);
    assert_non_null(strstr(err, "burst"));
    l = (limit_conf_t){.queue = "mail", .rate = "50/x"};
    assert_int_equal(limit_check(&l, err, sizeof err), -1);
}

static void test_same_target_and_describe(void **state)
{
    (void)state;
    limit_conf_t a = {.class_name = "A", .queue = "q"}, b = {.class_name = "A", .queue = "q"};
    assert_true(limit_same_target(&a, &b));
    b.queue = NULL;
    assert_false(limit_same_target(&a, &b));
    b.queue = "q";
    b.tag_prefix = "C:";
    assert_false(limit_same_target(&a, &b));
    char d[128];
    limit_describe(&a, d, sizeof d);
    assert_string_equal(d, "class \"A\" on queue \"q\"");
    limit_describe(&(limit_conf_t){.queue = "mail"}, d, sizeof d);
    assert_string_equal(d, "queue \"mail\"");
}

static void test_key_id_and_applies(void **state)
{
    (void)state;
    limit_conf_t a = {.class_name = "App\\X", .queue = "mail"}, b = {.class_name = "App\\X"};
    char *id = limit_key_id(&a);
    assert_string_equal(id, "mail|App\\X");
    free(id);
    id = limit_key_id(&b);
    assert_string_equal(id, "|App\\X");
    free(id);
    /* a '|' in a name: two limits never share keys (they did: "a|b" + "c"
     * and "a" + "b|c" were both "a|b|c"); ids without one stay as they were */
    char *x = limit_key_id(&(limit_conf_t){.queue = "a|b", .class_name = "c"});
    char *y = limit_key_id(&(limit_conf_t){.queue = "a", .class_name = "b|c"});
    assert_string_not_equal(x, y);
    assert_string_equal(x, "|a%7Cb|c");
    assert_string_equal(y, "|a|b%7Cc");
    FREE_ALL(x, y);
    x = limit_key_id(&(limit_conf_t){.queue = "a%7Cb", .class_name = "c"}); /* no '|': as in 1.x */
    assert_string_equal(x, "a%7Cb|c");
    free(x);
    /* a tag prefix: its own keys, never a plain limit's of the same class */
    x = limit_key_id(&(limit_conf_t){.class_name = "App\\I", .tag_prefix = "C:"});
    assert_string_equal(x, "||App\\I|C:");
    free(x);
    x = limit_key_id(&(limit_conf_t){.class_name = "p|q", .tag_prefix = "%|"});
    assert_string_equal(x, "||p%7Cq|%25%7C");
    free(x);
    char *qs[] = {"default", "mail"};
    assert_true(limit_applies_to(&a, qs, 2));
    assert_false(limit_applies_to(&a, qs, 1));
    assert_true(limit_applies_to(&b, qs, 1));
}

static void test_alert_step(void **state)
{
    (void)state;
    assert_int_equal(limit_alert_step(false, true, 0, 60), 0);
    assert_int_equal(limit_alert_step(false, true, 59.9, 60), 0);
    assert_int_equal(limit_alert_step(false, true, 60, 60), 1);
    assert_int_equal(limit_alert_step(true, true, 120, 60), 0);  /* stays open, silently */
    assert_int_equal(limit_alert_step(true, true, 30, 60), 0);   /* still holding jobs back */
    assert_int_equal(limit_alert_step(true, true, 0, 60), -1);   /* holds none back any more */
    assert_int_equal(limit_alert_step(true, false, 0, 60), 0);   /* Redis unread: no change */
    assert_int_equal(limit_alert_step(false, false, 999, 60), 0);
    assert_int_equal(limit_alert_step(false, true, 999, 0), 0);  /* off */
    assert_int_equal(limit_alert_step(true, true, 999, 0), -1);  /* turned off by a reload */
}

/* The cluster pop's notify token goes back to the queue it came from when
 * that queue's jobs are held, to none when they are not (it was empty), to
 * the first held queue when its queue is not known. */
static void test_token_back(void **state)
{
    (void)state;
    assert_int_equal(wlcluster_token_back(0x3, 2), 1);
    assert_int_equal(wlcluster_token_back(0x3, 1), 0);
    assert_int_equal(wlcluster_token_back(0x1, 2), -1);
    assert_int_equal(wlcluster_token_back(0x6, 0), 1);
    assert_int_equal(wlcluster_token_back(0x80000000u, 32), 31);
    assert_int_equal(wlcluster_token_back(0, 0), -1);
    assert_int_equal(wlcluster_token_back(0, 3), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_syntax),
        cmocka_unit_test(test_check_needs_target_and_limit),
        cmocka_unit_test(test_check_rate_and_burst),
        cmocka_unit_test(test_same_target_and_describe),
        cmocka_unit_test(test_key_id_and_applies),
        cmocka_unit_test(test_alert_step),
        cmocka_unit_test(test_token_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
