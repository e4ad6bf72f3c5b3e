/* minute.c: the sliding last minute the alerts read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "observe/minute.h"

static histogram_t one(double ms)
{
    histogram_t h;
    memset(&h, 0, sizeof h);
    hist_observe(&h, ms);
    return h;
}

static void test_a_minute_slides(void **state)
{
    (void)state;
    minute_t m;
    memset(&m, 0, sizeof m);
    int64_t t0 = 1000000000;
    histogram_t w = one(5000);
    minute_add(&m, t0, &w, 10, 2);
    minute_add(&m, t0 + 30000, NULL, 5, 5);
    histogram_t got;
    uint64_t fin, bad;
    minute_sum(&m, t0 + 30000, &got, &fin, &bad);
    assert_int_equal(fin, 15);
    assert_int_equal(bad, 7);
    assert_int_equal(got.count, 1);
    /* 60 s on, the first slot is out of the window; 90 s on, both are */
    minute_sum(&m, t0 + 60000, &got, &fin, &bad);
    assert_int_equal(fin, 5);
    assert_int_equal(got.count, 0);
    minute_sum(&m, t0 + 90000, &got, &fin, &bad);
    assert_int_equal(fin, 0);
    /* a slot reused a minute later starts over */
    minute_add(&m, t0 + 60000, NULL, 1, 0);
    minute_sum(&m, t0 + 60000, &got, &fin, &bad);
    assert_int_equal(fin, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_minute_slides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
