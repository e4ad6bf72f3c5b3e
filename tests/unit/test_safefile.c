/*
 * test_safefile.c - the directory rule of src/safefile.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <sys/stat.h>

#include "safefile.h"

static struct stat dir(uid_t uid, mode_t mode)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_mode = S_IFDIR | mode;
    st.st_uid = uid;
    return st;
}

static void test_dir_rule(void **state)
{
    (void)state;
    struct stat st = dir(0, 0755);
    assert_null(safefile_dir_problem(&st, 0));
    st = dir(1000, 0755); /* qpool's own user */
    assert_null(safefile_dir_problem(&st, 1000));
    st = dir(33, 0755);   /* www-data's storage/ */
    assert_non_null(safefile_dir_problem(&st, 0));
    st = dir(0, 0777);    /* review #5's piddir */
    assert_non_null(safefile_dir_problem(&st, 0));
    st = dir(0, 0775);    /* group-writable */
    assert_non_null(safefile_dir_problem(&st, 0));
    st = dir(0, 01777);   /* /tmp: sticky */
    assert_null(safefile_dir_problem(&st, 0));
    st = dir(0, 0755);
    st.st_mode = S_IFREG | 0644;
    assert_non_null(safefile_dir_problem(&st, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dir_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
