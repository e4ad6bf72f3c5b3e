/*
 * test_zygote.c - what a zygote's exit means to the master (zygote.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>

#include "master/zygote.h"

#define EXITED(code) ((code) << 8)

static void test_exit_kind(void **state)
{
    (void)state;
    /* it says so itself, asked to stop or not */
    assert_int_equal(zygote_exit_kind(EXITED(ZYGOTE_EX_NO_PRELOAD), false), ZYGOTE_OFF);
    assert_int_equal(zygote_exit_kind(EXITED(ZYGOTE_EX_NO_PRELOAD), true), ZYGOTE_OFF);
    assert_int_equal(zygote_exit_kind(EXITED(ZYGOTE_EX_MOVED), false), ZYGOTE_MOVED);
    /* after our SIGTERM: whatever it died of */
    assert_int_equal(zygote_exit_kind(EXITED(0), true), ZYGOTE_STOPPED);
    assert_int_equal(zygote_exit_kind(SIGKILL, true), ZYGOTE_STOPPED);
    /* on its own: a crash, even exit 0 (a zygote never ends by itself) */
    assert_int_equal(zygote_exit_kind(EXITED(0), false), ZYGOTE_CRASHED);
    assert_int_equal(zygote_exit_kind(EXITED(1), false), ZYGOTE_CRASHED);
    assert_int_equal(zygote_exit_kind(EXITED(255), false), ZYGOTE_CRASHED);
    assert_int_equal(zygote_exit_kind(SIGSEGV, false), ZYGOTE_CRASHED);
    assert_true(WIFSIGNALED(SIGSEGV));
}

/* Moves: a deploy rolls at once; moves that keep coming are backed off. */
static void test_move_delay(void **state)
{
    (void)state;
    zygote_moves_t m = {0};
    /* the first move, however soon after the start: a deploy */
    assert_int_equal(zygote_move_delay_s(&m, 2000), 0);
    /* an app whose zygote keeps exiting 76 (the review's 16 rolls in 20 s) */
    static const int want[] = {1, 2, 4, 8, 16, 32, 60, 60};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        assert_int_equal(zygote_move_delay_s(&m, 1500), want[i]);
    /* a zygote that lived a while: the next move is a deploy again */
    assert_int_equal(zygote_move_delay_s(&m, RESPAWN_HEALTHY_MS), 0);
    assert_int_equal(zygote_move_delay_s(&m, 1000), 1);
    /* deploys, each after a quiet while: never delayed */
    zygote_moves_t d = {0};
    for (int i = 0; i < 5; i++) assert_int_equal(zygote_move_delay_s(&d, RESPAWN_HEALTHY_MS + i), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_kind),
        cmocka_unit_test(test_move_delay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
