/*
 * test_child.c - the pure parts of the one child set-up (child.h): the
 * environment list, the descriptor plan, the credential decision, what a
 * pool's spec holds; and child_setup applied in a real forked child.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/child.h"
#include "config/pool_child.h"
#include "os/proc.h"

extern char **environ;

static void test_env_put_replaces_and_keeps_order(void **state)
{
    (void)state;
    child_env_t e = {0};
    assert_int_equal(child_env_put(&e, "A", "1"), 1);
    assert_int_equal(child_env_put(&e, "AB", "2"), 2);
    assert_int_equal(child_env_put(&e, "A", "3"), 2); /* replaced, not "AB" */
    assert_string_equal(e.v[0], "A=3");
    assert_string_equal(e.v[1], "AB=2");
    assert_null(e.v[2]);
    assert_string_equal(child_env_get(&e, "AB"), "2");
    assert_null(child_env_get(&e, "B"));
    assert_int_equal(child_env_put(&e, "EMPTY", ""), 3);
    assert_string_equal(child_env_get(&e, "EMPTY"), "");
    child_env_free(&e);
    assert_int_equal(e.n, 0);
    assert_null(e.v);
}

static void test_minimal_env(void **state)
{
    (void)state;
    child_env_t e = {0};
    assert_int_equal(child_env_minimal(&e, NULL, "/var/lib/qalert", "qalert"), 3);
    assert_string_equal(child_env_get(&e, "PATH"), CHILD_DEFAULT_PATH);
    assert_string_equal(child_env_get(&e, "HOME"), "/var/lib/qalert");
    assert_string_equal(child_env_get(&e, "USER"), "qalert");
    child_env_free(&e);
    assert_int_equal(child_env_minimal(&e, "/opt/bin:/usr/bin", NULL, NULL), 1);
    assert_string_equal(child_env_get(&e, "PATH"), "/opt/bin:/usr/bin");
    child_env_free(&e);
    assert_int_equal(child_env_minimal(&e, "", NULL, NULL), 1); /* empty PATH: the default */
    assert_string_equal(child_env_get(&e, "PATH"), CHILD_DEFAULT_PATH);
    child_env_free(&e);
}

static void test_fd_plan(void **state)
{
    (void)state;
    assert_int_equal(child_fd_base(NULL, 0), 3);
    child_fd_t worker[] = {{.from = 9, .to = 3, .cloexec = true}};
    assert_int_equal(child_fd_base(worker, 1), 4);
    child_fd_t http[] = {{.from = 4, .to = 3}, {.from = 3, .to = 4}}; /* crossed: moved out of the way */
    assert_int_equal(child_fd_base(http, 2), 5);
    child_fd_t alert[] = {{.from = 7, .to = 0}};
    assert_int_equal(child_fd_base(alert, 1), 3); /* stdin: everything from 3 up is closed */
    child_fd_t twice[] = {{.from = 5, .to = 3}, {.from = 6, .to = 3}};
    assert_int_equal(child_fd_base(twice, 2), -1);
    child_fd_t negative[] = {{.from = -1, .to = 3}};
    assert_int_equal(child_fd_base(negative, 1), -1);
    child_fd_t many[CHILD_FDS_MAX + 1] = {{0}};
    assert_int_equal(child_fd_base(many, CHILD_FDS_MAX + 1), -1);
}

static void test_ids_plan(void **state)
{
    (void)state;
    uid_t uid = 33;
    gid_t gid = 44;
    assert_int_equal(child_ids_plan(0, 0, false, &uid, false, &gid), CHILD_IDS_KEEP);
    assert_int_equal(child_ids_plan(0, 0, true, &uid, true, &gid), CHILD_IDS_SWITCH);
    assert_int_equal(uid, 33);
    assert_int_equal(gid, 44);
    /* a root master asked for a user only: its gid is the master's */
    uid = 33;
    assert_int_equal(child_ids_plan(0, 0, true, &uid, false, &gid), CHILD_IDS_SWITCH);
    assert_int_equal(gid, 0);
    /* not root: the same ids are fine, others refused (never silently kept) */
    uid = 1000, gid = 1000;
    assert_int_equal(child_ids_plan(1000, 1000, true, &uid, true, &gid), CHILD_IDS_KEEP);
    uid = 33;
    assert_int_equal(child_ids_plan(1000, 1000, true, &uid, true, &gid), CHILD_IDS_REFUSED);
    uid = 1000, gid = 44;
    assert_int_equal(child_ids_plan(1000, 1000, true, &uid, true, &gid), CHILD_IDS_REFUSED);
}

static void test_pool_spec(void **state)
{
    (void)state;
    env_var_t env[] = {{"APP_ENV", "production"}, {"HOME", "/from/the/pool"}};
    pool_conf_t p = {.name = "web", .env = env, .nenv = 2, .nice = 5, .working_directory = "/srv/app"};
    child_spec_t s;
    assert_int_equal(child_spec_pool(&s, &p, 123, SIGHUP, 9), 0);
    assert_string_equal(s.who, "pool web");
    assert_int_equal(s.parent, 123);
    assert_int_equal(s.deathsig, SIGHUP);
    assert_true(s.own_group);
    assert_false(s.clear_env); /* workers keep the master's environment, as always */
    assert_int_equal(s.nfds, 1);
    assert_int_equal(s.fds[0].from, 9);
    assert_int_equal(s.fds[0].to, PROC_KEEP_FD);
    assert_true(s.fds[0].cloexec);
    assert_int_equal(s.nice, 5);
    assert_string_equal(s.dir, "/srv/app");
    assert_int_equal(s.ids, CHILD_IDS_KEEP);
    assert_string_equal(child_env_get(&s.env, "APP_ENV"), "production");
    assert_string_equal(child_env_get(&s.env, "HOME"), "/from/the/pool");
    child_spec_free(&s);

    /* a user: HOME, USER and LOGNAME are the passwd entry's (looked up here,
     * before any fork), over the pool's own HOME */
    if (geteuid() != 0) return;
    p.user = "root";
    p.uid = 0;
    p.gid = 0;
    p.has_uid = p.has_gid = true;
    assert_int_equal(child_spec_pool(&s, &p, 123, SIGTERM, -1), 0);
    assert_int_equal(s.nfds, 0);
    assert_int_equal(s.ids, CHILD_IDS_SWITCH);
    assert_true(s.ngroups >= 1);
    assert_int_equal(s.groups[0], 0);
    assert_string_equal(child_env_get(&s.env, "HOME"), "/root");
    assert_string_equal(child_env_get(&s.env, "USER"), "root");
    assert_string_equal(child_env_get(&s.env, "LOGNAME"), "root");
    child_spec_free(&s);
}

/* child_setup in a real child: its own group, fds moved (crossed), every
 * other descriptor closed, a cleared environment with just the spec's. */
static void test_setup_in_a_child(void **state)
{
    (void)state;
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    int extra = open("/dev/null", O_RDONLY); /* must not survive */
    child_spec_t s = {.who = "test", .parent = getpid(), .deathsig = SIGKILL, .own_group = true,
                      .clear_env = true};
    s.fds[s.nfds++] = (child_fd_t){.from = a[1], .to = 3};
    s.fds[s.nfds++] = (child_fd_t){.from = b[1], .to = 4};
    child_env_put(&s.env, "ONLY", "this");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (child_setup(&s) < 0) _exit(2);
        int bad = getpgrp() != getpid();
        bad |= fcntl(extra, F_GETFD) != -1 ? 4 : 0;
        bad |= fcntl(5, F_GETFD) != -1 ? 8 : 0;
        bad |= (environ[0] == NULL || strcmp(environ[0], "ONLY=this") || environ[1]) ? 16 : 0;
        if (write(3, "a", 1) != 1 || write(4, "b", 1) != 1) bad |= 32;
        _exit(bad);
    }
    close(a[1]);
    close(b[1]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    char c = 0;
    assert_int_equal(read(a[0], &c, 1), 1);
    assert_int_equal(c, 'a');
    assert_int_equal(read(b[0], &c, 1), 1);
    assert_int_equal(c, 'b');
    close(a[0]);
    close(b[0]);
    close(extra);
    child_spec_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_put_replaces_and_keeps_order),
        cmocka_unit_test(test_minimal_env),
        cmocka_unit_test(test_fd_plan),
        cmocka_unit_test(test_ids_plan),
        cmocka_unit_test(test_pool_spec),
        cmocka_unit_test(test_setup_in_a_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
