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

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stdio.h>
#include "os/proc.h"

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
    g.leader_alive = false; /* gone, and nothing left in its group */
    assert_false(proc_group_check(&g));
    g.members = 2;          /* a job's processes left behind: the pool's, younger */
    g.members_ok = true;
    assert_true(proc_group_check(&g));
    g.members_ok = false;   /* one of them is not */
    assert_false(proc_group_check(&g));
    g = good();
    g.is_child = true;      /* a sibling worker's group: never */
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
    g = good();
    g.handler_start = 2000; /* the worker published its handler's start time: that very process */
    assert_true(proc_group_check(&g));
    g.handler_start = 1500; /* its handler died; the pid went to a sibling's newer handler */
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
    assert_int_equal(proc_kill_worker_group(h, geteuid(), me, 0, false, "test"), 1);
    waitpid(h, NULL, 0);
    /* never group 1, never our own group */
    assert_int_equal(proc_kill_worker_group(1, geteuid(), me, 0, false, "test"), 0);
    assert_int_equal(proc_kill_worker_group(getpgrp(), geteuid(), me, 0, false, "test"), 0);
    /* a group of another user: left alone */
    if (geteuid() == 0) {
        pid_t other = group_leader(65534);
        assert_int_equal(proc_kill_worker_group(other, 0, me, 0, false, "test"), 0);
        assert_true(alive(other));
        kill(other, SIGKILL);
        waitpid(other, NULL, 0);
    }
    /* a group older than the worker that named it: left alone */
    pid_t old = group_leader(0);
    unsigned long long later = proc_start_ticks(old) + 1000;
    assert_int_equal(proc_kill_worker_group(old, geteuid(), later, 0, false, "test"), 0);
    assert_true(alive(old));
    kill(old, SIGKILL);
    waitpid(old, NULL, 0);
    /* a group whose leader is not the process the worker said (the start
     * time it published differs): left alone; the one it said: killed */
    pid_t other_start = group_leader(0);
    unsigned long long st = proc_start_ticks(other_start);
    assert_int_equal(proc_kill_worker_group(other_start, geteuid(), me, st + 1, false, "test"), 0);
    assert_true(alive(other_start));
    assert_int_equal(proc_kill_worker_group(other_start, geteuid(), me, st, false, "test"), 1);
    waitpid(other_start, NULL, 0);
}

static void test_parent(void **state)
{
    (void)state;
    pid_t c = group_leader(0);
    assert_int_equal(proc_ppid(c), getpid());
    assert_int_equal(proc_ppid(getpid()), getppid());
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    assert_int_equal(proc_ppid(c), 0);
}

/* Dead (a zombie counts: its new parent may not reap it at once). */
static bool dead(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    const char *p = ok ? strrchr(line, ')') : NULL;
    return !p || p[2] == 'Z' || p[2] == 'X';
}

/* A group whose leader is gone, with one member left (a job's process
 * outliving a handler that died with its worker); returns the member. */
static pid_t orphaned_group(pid_t *leader_out)
{
    int fds[2];
    if (pipe(fds) < 0) return -1;
    pid_t leader = fork();
    if (leader == 0) {
        setpgid(0, 0);
        pid_t member = fork();
        if (member == 0) {
            alarm(20); /* never outlives a failed test for long */
            pause();
            _exit(0);
        }
        (void)!write(fds[1], &member, sizeof member);
        _exit(0);
    }
    setpgid(leader, leader);
    pid_t member = -1;
    (void)!read(fds[0], &member, sizeof member);
    close(fds[0]);
    close(fds[1]);
    waitpid(leader, NULL, 0);
    *leader_out = leader;
    return member;
}

static void test_a_group_whose_leader_died(void **state)
{
    (void)state;
    unsigned long long me = proc_start_ticks(getpid());
    pid_t leader;
    pid_t member = orphaned_group(&leader);
    assert_true(member > 0);
    assert_int_equal(kill(member, 0), 0);
    /* it is one of this worker's processes: the group goes */
    assert_int_equal(proc_kill_worker_group(leader, geteuid(), me, 0, false, "test"), 1);
    for (int i = 0; i < 100 && !dead(member); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(dead(member));
    /* the same group named by a worker younger than its member: left alone */
    member = orphaned_group(&leader);
    unsigned long long later = proc_start_ticks(member) + 1000;
    assert_int_equal(proc_kill_worker_group(leader, geteuid(), later, 0, false, "test"), 0);
    assert_false(dead(member));
    kill(member, SIGKILL);
}

/* smaps_rollup: RSS, PSS, and USS as Private_Clean + Private_Dirty. */
static void test_parse_rollup(void **state)
{
    (void)state;
    const char *text = "55d0-7ffd ---p 00000000 00:00 0                          [rollup]\n"
                       "Rss:               18828 kB\n"
                       "Pss:                9161 kB\n"
                       "Pss_Dirty:          7726 kB\n"
                       "Shared_Clean:       5028 kB\n"
                       "Shared_Dirty:      12020 kB\n"
                       "Private_Clean:        64 kB\n"
                       "Private_Dirty:      1716 kB\n"
                       "Private_Hugetlb:       0 kB\n";
    proc_mem_t m;
    assert_int_equal(proc_parse_rollup(text, &m), 0);
    assert_int_equal(m.rss_kb, 18828);
    assert_int_equal(m.pss_kb, 9161);
    assert_int_equal(m.uss_kb, 64 + 1716);
    assert_int_equal(proc_parse_rollup("Private_Dirty: 4 kB\n", &m), -1); /* no Rss / Pss: not a rollup */
    assert_int_equal(proc_parse_rollup("", &m), -1);
    assert_int_equal(m.uss_kb, 0);
}

/* Our own: some memory, and a pipe we hold is found in our /proc/self/fd. */
static void test_own_memory_and_pipe(void **state)
{
    (void)state;
    proc_mem_t m;
    assert_int_equal(proc_mem(getpid(), &m), 0);
    assert_true(m.rss_kb > 0 && m.pss_kb > 0 && m.uss_kb > 0 && m.uss_kb <= m.rss_kb);
    int p[2], q[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(q), 0);
    close(q[0]);
    assert_true(proc_holds_same(getpid(), p[1]));
    close(p[0]); /* p[1] still there: the same pipe */
    assert_true(proc_holds_same(getpid(), p[1]));
    assert_false(proc_holds_same(getpid(), -1));
    int sync[2];
    assert_int_equal(pipe(sync), 0);
    pid_t child = fork();
    if (child == 0) {
        close(p[1]);
        close(sync[0]);
        close(sync[1]); /* EOF: p[1] is gone here */
        pause();
        _exit(0);
    }
    close(sync[1]);
    char c;
    assert_int_equal(read(sync[0], &c, 1), 0);
    close(sync[0]);
    assert_true(proc_holds_same(child, q[1])); /* inherited */
    assert_false(proc_holds_same(child, p[1]));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(p[1]);
    close(q[1]);
    assert_true(proc_now_ticks() >= proc_start_ticks(getpid()));
}

/* Review 2026-11-27 minor 3: a statm reader opened on descriptor 0 (stdin
 * closed) is open, not closed: it is read again without reopening (no leak)
 * and closed by rss_close. */
static void test_rss_reader_on_fd_zero(void **state)
{
    (void)state;
    int saved = dup(0);
    assert_true(saved >= 0);
    close(0);
    rss_reader_t r = RSS_READER_INIT;
    assert_true(rss_read(&r, getpid()) > 0);
    assert_int_equal(r.fd, 0);
    assert_true(rss_read(&r, getpid()) > 0);
    int spare = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the lowest free descriptor: 0 if it leaked open */
    assert_int_equal(r.fd, 0);
    assert_true(spare > 0);
    close(spare);
    rss_close(&r);
    assert_int_equal(r.fd, -1);
    assert_int_equal(fcntl(0, F_GETFD), -1); /* closed, not leaked */
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_rule),
        cmocka_unit_test(test_parse_rollup),
        cmocka_unit_test(test_own_memory_and_pipe),
        cmocka_unit_test(test_rss_reader_on_fd_zero),
        cmocka_unit_test(test_parse_stat),
        cmocka_unit_test(test_real_groups),
        cmocka_unit_test(test_parent),
        cmocka_unit_test(test_a_group_whose_leader_died),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
