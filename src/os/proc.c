/*
 * proc.c - see proc.h.
 */
#include "os/proc.h"
#include "core/log.h"
#include "core/util.h"

#include <bsd/unistd.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void proc_reset_signals(void)
{
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        if (s == SIGKILL || s == SIGSTOP) continue;
        sigaction(s, &sa, NULL); /* errors for the RT signals glibc reserves: harmless */
    }
}

uint64_t proc_rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    if (n != 2) return 0;
    return (uint64_t)resident * (uint64_t)(sysconf(_SC_PAGESIZE) / 1024);
}

uint64_t rss_read(rss_reader_t *r, pid_t pid)
{
    if (pid <= 0) {
        rss_close(r);
        return 0;
    }
    if (r->fd < 0 || r->pid != pid) {
        rss_close(r);
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0) return 0;
        r->pid = pid;
    }
    char buf[128];
    ssize_t n = pread(r->fd, buf, sizeof buf - 1, 0);
    if (n <= 0) {
        rss_close(r);
        return 0;
    }
    buf[n] = '\0';
    unsigned long size, resident;
    if (sscanf(buf, "%lu %lu", &size, &resident) != 2) return 0;
    return (uint64_t)resident * (uint64_t)(sysconf(_SC_PAGESIZE) / 1024);
}

void rss_close(rss_reader_t *r)
{
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    r->pid = 0;
}

bool proc_catches_signal(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    bool r = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "SigCgt:", 7) == 0) {
            unsigned long long mask = strtoull(line + 7, NULL, 16);
            r = (mask >> (sig - 1)) & 1;
            break;
        }
    }
    fclose(f);
    return r;
}

void proc_describe_status(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d (SIG%s)%s", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
                 WCOREDUMP(status) ? ", core dumped" : "");
    else
        snprintf(buf, n, "status 0x%x", status);
}

void proc_title_init(int argc, char **argv, char **envp)
{
    setproctitle_init(argc, argv, envp);
}

void proc_title(const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* "-" prefix: replace the whole title, without "qpool: " added by libbsd */
    setproctitle("-%s", buf);
}

/* ------------------------------------------------------------ groups */

int proc_parse_stat(const char *line, pid_t *pgrp, unsigned long long *start)
{
    /* "pid (comm) state ppid pgrp ... starttime(22) ...": comm may hold
     * spaces and parentheses, so fields are counted from the last ')'. */
    const char *p = strrchr(line, ')');
    if (!p) return -1;
    p++;
    long long pg = 0;
    unsigned long long st = 0;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ') p++;
        if (!*p) return -1;
        char *end;
        if (field == 5) pg = strtoll(p, &end, 10);
        else if (field == 22) st = strtoull(p, &end, 10);
        end = strchr(p, ' ');
        if (!end && field < 22) return -1;
        p = end ? end : p + strlen(p);
    }
    if (pg <= 0 || pg > INT32_MAX) return -1;
    *pgrp = (pid_t)pg;
    *start = st;
    return 0;
}

static int read_stat(pid_t pid, pid_t *pgrp, unsigned long long *start)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    return ok ? proc_parse_stat(line, pgrp, start) : -1;
}

int proc_parse_rollup(const char *text, proc_mem_t *m)
{
    memset(m, 0, sizeof *m);
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {{"Rss:", offsetof(proc_mem_t, rss_kb)},
                {"Pss:", offsetof(proc_mem_t, pss_kb)},
                {"Private_Clean:", offsetof(proc_mem_t, uss_kb)},
                {"Private_Dirty:", offsetof(proc_mem_t, uss_kb)}};
    int seen = 0;
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            size_t n = strlen(keys[i].key);
            if (strncmp(line, keys[i].key, n)) continue;
            *(uint64_t *)(void *)((char *)m + keys[i].off) += strtoull(line + n, NULL, 10);
            if (i < 2) seen |= 1 << i;
        }
    return seen == 3 ? 0 : -1;
}

int proc_mem(pid_t pid, proc_mem_t *m)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    return proc_parse_rollup(buf, m);
}

unsigned long long proc_now_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    long hz = sysconf(_SC_CLK_TCK);
    return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
           (unsigned long long)ts.tv_nsec / (1000000000ULL / (unsigned long long)hz);
}

bool proc_holds_same(pid_t pid, int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return false;
    struct dirent *e;
    char want[64], dir[64], path[64 + sizeof e->d_name], link[64];
    snprintf(want, sizeof want, "%s:[%llu]", S_ISFIFO(st.st_mode) ? "pipe" : "socket", (unsigned long long)st.st_ino);
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        found = !strcmp(link, want);
    }
    closedir(d);
    return found;
}

pid_t proc_ppid(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    const char *p = ok ? strrchr(line, ')') : NULL; /* "pid (comm) state ppid ..." */
    char state;
    int ppid;
    if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2 || state == 'Z') return 0;
    return (pid_t)ppid;
}

unsigned long long proc_start_ticks(pid_t pid)
{
    pid_t pg;
    unsigned long long st;
    return read_stat(pid, &pg, &st) == 0 ? st : 0;
}

static int read_real_uid(pid_t pid, uid_t *uid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    int rv = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Uid:", 4)) {
            *uid = (uid_t)strtoul(line + 4, NULL, 10);
            rv = 0;
            break;
        }
    fclose(f);
    return rv;
}

bool proc_group_check(const group_check_t *g)
{
    if (g->pgid <= 1 || g->pgid == g->self || g->pgid == g->self_pgrp || g->is_child) return false;
    if (!g->worker_start) return false;
    if (!g->leader_alive) return g->members > 0 && g->members_ok;
    if (g->leader_pgrp != g->pgid) return false;
    if (g->leader_uid != g->pool_uid) return false;
    if (g->handler_start && g->leader_start != g->handler_start) return false;
    return g->worker_start && g->leader_start >= g->worker_start;
}

/* The processes left in group pgid: how many, and whether every one is of
 * uid and started at or after start. */
static void scan_members(group_check_t *g)
{
    DIR *d = opendir("/proc");
    if (!d) return;
    g->members_ok = true;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        pid_t pg;
        unsigned long long st;
        uid_t uid;
        if (*end || pid <= 0 || read_stat((pid_t)pid, &pg, &st) < 0 || pg != g->pgid) continue;
        g->members++;
        if (read_real_uid((pid_t)pid, &uid) < 0 || uid != g->pool_uid || st < g->worker_start)
            g->members_ok = false;
    }
    closedir(d);
}

int proc_kill_worker_group(pid_t pgid, uid_t pool_uid, unsigned long long worker_start,
                           unsigned long long handler_start, bool is_child, const char *who)
{
    if (pgid == 0) return 0;
    group_check_t g = {.pgid = pgid, .self = getpid(), .self_pgrp = getpgrp(), .pool_uid = pool_uid,
                       .worker_start = worker_start, .is_child = is_child, .handler_start = handler_start};
    if (pgid > 1) {
        g.leader_alive = read_stat(pgid, &g.leader_pgrp, &g.leader_start) == 0 &&
                         read_real_uid(pgid, &g.leader_uid) == 0;
        if (!g.leader_alive) scan_members(&g);
    }
    if (!proc_group_check(&g)) {
        if (pgid < 0 || pgid == 1 || g.leader_alive || g.members)
            log_warn("%s: not killing process group %d: not a handler of this worker", who, (int)pgid);
        return 0;
    }
    return kill(-pgid, SIGKILL) == 0 ? 1 : -1;
}
