/*
 * test_safefile.c - the directory rule of src/safefile.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/safefile.h"

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

static void test_secret_rule(void **state)
{
    (void)state;
    struct stat st = dir(0, 0600);
    st.st_mode = S_IFREG | 0600;
    assert_null(safefile_secret_problem(&st, 0));
    st.st_mode = S_IFREG | 0640;  /* group-readable: fine (a qpool group) */
    assert_null(safefile_secret_problem(&st, 0));
    st.st_mode = S_IFREG | 0620;  /* group-writable */
    assert_non_null(safefile_secret_problem(&st, 0));
    st.st_mode = S_IFREG | 0602;  /* others-writable */
    assert_non_null(safefile_secret_problem(&st, 0));
    st.st_mode = S_IFREG | 0644;  /* others-readable: read; config.c warns (m6, 1.x) */
    assert_null(safefile_secret_problem(&st, 0));
    st.st_mode = S_IFREG | 0600;
    st.st_uid = 1000;             /* someone else's, read by root */
    assert_non_null(safefile_secret_problem(&st, 0));
    assert_null(safefile_secret_problem(&st, 1000));
    st.st_uid = 0;
    st.st_size = SAFEFILE_SECRET_MAX + 1;
    assert_non_null(safefile_secret_problem(&st, 0));
    st = dir(0, 0700);            /* a directory */
    assert_non_null(safefile_secret_problem(&st, 0));
}

static char *write_secret(const char *content, mode_t mode)
{
    static char path[] = "/tmp/qpool-test-secret-XXXXXX";
    strcpy(path, "/tmp/qpool-test-secret-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    fchmod(fd, mode);
    close(fd);
    return path;
}

static void test_read_secret(void **state)
{
    (void)state;
    char err[512];
    char *p = write_secret("s3cret\r\n", 0600);
    char *s = safefile_read_secret(p, err, sizeof err);
    assert_non_null(s);
    assert_string_equal(s, "s3cret");
    free(s);
    unlink(p);

    p = write_secret("two\nlines\n", 0600);
    assert_null(safefile_read_secret(p, err, sizeof err));
    assert_non_null(strstr(err, "more than one line"));
    assert_null(strstr(err, "two"));  /* never the content */
    unlink(p);

    p = write_secret("\n", 0600);
    assert_null(safefile_read_secret(p, err, sizeof err));
    assert_non_null(strstr(err, "empty"));
    unlink(p);

    p = write_secret("pw", 0666);
    chmod(p, 0666);
    assert_null(safefile_read_secret(p, err, sizeof err));
    assert_non_null(strstr(err, "written by group or others"));
    assert_null(strstr(err, "pw\n"));

    char link[64];
    snprintf(link, sizeof link, "%s-link", p);
    chmod(p, 0600);
    assert_int_equal(symlink(p, link), 0);
    assert_null(safefile_read_secret(link, err, sizeof err));
    assert_non_null(strstr(err, "symbolic link"));
    unlink(link);
    unlink(p);

    assert_null(safefile_read_secret("/nonexistent/qpool-secret", err, sizeof err));
    assert_non_null(strstr(err, "No such file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dir_rule),
        cmocka_unit_test(test_secret_rule),
        cmocka_unit_test(test_read_secret),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
