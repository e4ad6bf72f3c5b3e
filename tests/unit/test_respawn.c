/* respawn.c: the supervisor's backoff after a child exits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/respawn.h"

static int after(respawn_t *st, int64_t lived_ms, int clean, int did_work, int *delay)
{
    exit_facts_t f = {.lived_ms = lived_ms, .clean = clean, .did_work = did_work};
    return respawn_after_exit(st, &f, delay);
}

static void test_crashes_back_off_doubling_to_the_cap(void **state)
{
    (void)state;
    respawn_t st = {0};
    int d, want[] = {1, 2, 4, 8, 16, 32, 60, 60};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(after(&st, 200, 0, 0, &d), RESPAWN_CRASHED);
        assert_int_equal(d, want[i]);
    }
}

static void test_a_healthy_life_resets_the_backoff(void **state)
{
    (void)state;
    respawn_t st = {0};
    int d;
    after(&st, 200, 0, 0, &d);
    after(&st, 200, 0, 0, &d);
    assert_int_equal(d, 2);
    /* lived 30 s, then crashed: starts over at 1 s */
    assert_int_equal(after(&st, RESPAWN_HEALTHY_MS, 0, 0, &d), RESPAWN_CRASHED);
    assert_int_equal(d, 1);
    /* did work (a native worker's jobs): same */
    after(&st, 200, 0, 0, &d);
    assert_int_equal(after(&st, 200, 0, 1, &d), RESPAWN_CRASHED);
    assert_int_equal(d, 1);
}

static void test_a_crash_between_1_and_30_s_keeps_backing_off(void **state)
{
    (void)state;
    /* an external child that lives 2 s and crashes has not proved itself */
    respawn_t st = {0};
    int d;
    after(&st, 2000, 0, 0, &d);
    after(&st, 2000, 0, 0, &d);
    assert_int_equal(after(&st, 2000, 0, 0, &d), RESPAWN_CRASHED);
    assert_int_equal(d, 4);
}

static void test_clean_exits_respawn_at_once_until_they_loop(void **state)
{
    (void)state;
    respawn_t st = {0};
    int d;
    assert_int_equal(after(&st, 100, 1, 0, &d), RESPAWN_NOW);
    assert_int_equal(d, 0);
    assert_int_equal(after(&st, 100, 1, 0, &d), RESPAWN_NOW);
    assert_int_equal(after(&st, 100, 1, 0, &d), RESPAWN_QUICK_LOOP);
    assert_int_equal(d, 1);
    assert_int_equal(after(&st, 100, 1, 0, &d), RESPAWN_QUICK_LOOP);
    assert_int_equal(d, 2);
}

static void test_a_clean_exit_that_did_work_is_not_a_loop(void **state)
{
    (void)state;
    respawn_t st = {0};
    int d;
    after(&st, 100, 1, 0, &d);
    after(&st, 100, 1, 0, &d);
    /* max_jobs reached quickly: it worked */
    assert_int_equal(after(&st, 100, 1, 1, &d), RESPAWN_NOW);
    assert_int_equal(st.quick_exits, 0);
    /* a slow clean exit breaks the run too */
    after(&st, 100, 1, 0, &d);
    after(&st, 100, 1, 0, &d);
    assert_int_equal(after(&st, 5000, 1, 0, &d), RESPAWN_NOW);
    assert_int_equal(after(&st, 100, 1, 0, &d), RESPAWN_NOW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crashes_back_off_doubling_to_the_cap),
        cmocka_unit_test(test_a_healthy_life_resets_the_backoff),
        cmocka_unit_test(test_a_crash_between_1_and_30_s_keeps_backing_off),
        cmocka_unit_test(test_clean_exits_respawn_at_once_until_they_loop),
        cmocka_unit_test(test_a_clean_exit_that_did_work_is_not_a_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
