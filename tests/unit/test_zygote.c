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

#include "zygote.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
