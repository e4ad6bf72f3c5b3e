/*
 * test_proc.c - the process-group check the root master applies before it
 * SIGKILLs a group a worker named in its scoreboard slot (review #6):
 * the pure rule, the /proc/<pid>/stat parser, and real groups.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

static group_check_t good(void)
{
    group_check_t g = {.pgid = 500, .self = 100, .self_pgrp = 100, .leader_alive = true, .leader_pgrp = 500,
                       .leader_uid = 33, .leader_start = 2000, .pool_uid = 33, .worker_start = 1000};
    return g;
}

static void test_group_rule(void **state)
{
    (void)state;
    group_check_t g = good();
    assert_true(proc_group_check(&g));
    g.leader_start = 1000; /* started in the worker's tick */
    assert_true(proc_group_check(&g));
    static const pid_t never[] = {1, 0, -1, -500};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++) {
        g = good();
        g.pgid = g.leader_pgrp = never[i];
        assert_false(proc_group_check(&g));
    }
    g = good();
    g.pgid = g.leader_pgrp = g.self_pgrp = 500; /* the master's own group */
    assert_false(proc_group_check(&g));
    g = good();
    g.leader_alive = false;
    assert_false(proc_group_check(&g));
    g = good();
    g.leader_pgrp = 501; /* a reused pid that leads no group */
    assert_false(proc_group_check(&g));
    g = good();
    g.leader_uid = 0; /* another user's group */
    assert_false(proc_group_check(&g));
    g = good();
    g.leader_start = 999; /* older than the worker: a reused pid */
    assert_false(proc_group_check(&g));
    g = good();
    g.worker_start = 0; /* unknown */
    assert_false(proc_group_check(&g));
}

static void test_parse_stat(void **state)
{
    (void)state;
    pid_t pg;
    unsigned long long st;
    const char *line = "4242 (a b) c)) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
    assert_int_equal(proc_parse_stat(line, &pg, &st), 0);
    assert_int_equal(pg, 4240);
    assert_true(st == 987654ULL);
    assert_int_equal(proc_parse_stat("4242 (x) S 1 2", &pg, &st), -1);
    assert_int_equal(proc_parse_stat("no parenthesis", &pg, &st), -1);
    assert_int_equal(proc_parse_stat("1 (x) S 1 -5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5", &pg, &st), -1);
}

/* A real group of its own, led by a sleeping child (optionally another uid). */
static pid_t group_leader(uid_t uid)
{
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (uid && setuid(uid) < 0) _exit(1);
        pause();
        _exit(0);
    }
    setpgid(pid, pid);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL); /* let it switch uid */
    return pid;
}

static bool alive(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

static void test_real_groups(void **state)
{
    (void)state;
    unsigned long long me = proc_start_ticks(getpid());
    assert_true(me > 0);
    /* a handler-like group: this uid, younger than the "worker" (us) */
    pid_t h = group_leader(0);
    assert_int_equal(proc_kill_worker_group(h, geteuid(), me, "test"), 1);
    waitpid(h, NULL, 0);
    /* never group 1, never our own group */
    assert_int_equal(proc_kill_worker_group(1, geteuid(), me, "test"), 0);
    assert_int_equal(proc_kill_worker_group(getpgrp(), geteuid(), me, "test"), 0);
    /* a group of another user: left alone */
    if (geteuid() == 0) {
        pid_t other = group_leader(65534);
        assert_int_equal(proc_kill_worker_group(other, 0, me, "test"), 0);
        assert_true(alive(other));
        kill(other, SIGKILL);
        waitpid(other, NULL, 0);
    }
    /* a group older than the worker that named it: left alone */
    pid_t old = group_leader(0);
    unsigned long long later = proc_start_ticks(old) + 1000;
    assert_int_equal(proc_kill_worker_group(old, geteuid(), later, "test"), 0);
    assert_true(alive(old));
    kill(old, SIGKILL);
    waitpid(old, NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_rule),
        cmocka_unit_test(test_parse_stat),
        cmocka_unit_test(test_real_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
