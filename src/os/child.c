/*
 * child.c - see child.h.
 */
#include "os/child.h"
#include "core/log.h"
#include "os/proc.h"
#include "core/util.h"

#include <bsd/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

/* ------------------------------------------------------------ pure parts */

static int env_find(const child_env_t *e, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < e->n; i++)
        if (!strncmp(e->v[i], name, n) && e->v[i][n] == '=') return i;
    return -1;
}

int child_env_put(child_env_t *e, const char *name, const char *value)
{
    char *kv = xasprintf("%s=%s", name, value);
    int i = env_find(e, name);
    if (i >= 0) {
        explicit_bzero(e->v[i], strlen(e->v[i])); /* a secret's old value */
        free(e->v[i]);
        e->v[i] = kv;
        return e->n;
    }
    e->v = xrealloc(e->v, sizeof *e->v * (size_t)(e->n + 2));
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
    return e->n;
}

const char *child_env_get(const child_env_t *e, const char *name)
{
    int i = env_find(e, name);
    return i < 0 ? NULL : e->v[i] + strlen(name) + 1;
}

void child_env_free(child_env_t *e)
{
    for (int i = 0; i < e->n; i++) {
        /* pool environments hold secrets (APP_KEY, DB_PASSWORD) */
        explicit_bzero(e->v[i], strlen(e->v[i]));
        free(e->v[i]);
    }
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

int child_env_minimal(child_env_t *e, const char *path, const char *home, const char *user)
{
    child_env_put(e, "PATH", path && *path ? path : CHILD_DEFAULT_PATH);
    if (home) child_env_put(e, "HOME", home);
    if (user) child_env_put(e, "USER", user);
    return e->n;
}

int child_fd_base(const child_fd_t *fds, int n)
{
    if (n < 0 || n > CHILD_FDS_MAX) return -1;
    int base = 3;
    for (int i = 0; i < n; i++) {
        if (fds[i].from < 0 || fds[i].to < 0 || fds[i].to >= INT_MAX - 1) return -1;
        for (int j = 0; j < i; j++)
            if (fds[j].to == fds[i].to) return -1;
        if (fds[i].to + 1 > base) base = fds[i].to + 1;
    }
    return base;
}

int child_ids_plan(uid_t euid, gid_t egid, bool has_uid, uid_t *uid, bool has_gid, gid_t *gid)
{
    if (!has_uid && !has_gid) return CHILD_IDS_KEEP;
    if (!has_uid) *uid = euid;
    if (!has_gid) *gid = egid;
    if (euid == 0) return CHILD_IDS_SWITCH;
    return *uid != euid || *gid != egid ? CHILD_IDS_REFUSED : CHILD_IDS_KEEP;
}

/* ------------------------------------------------------------ before the fork */

/* user's groups with gid, as initgroups(3) would set them. */
static int group_list(const char *user, gid_t gid, gid_t **out)
{
    int n = 32;
    gid_t *g = xmalloc(sizeof *g * (size_t)n);
    for (;;) {
        int want = n;
        if (getgrouplist(user, gid, g, &n) >= 0) break;
        if (n <= want || n > 65536) {
            free(g);
            return -1;
        }
        g = xrealloc(g, sizeof *g * (size_t)n);
    }
    *out = g;
    return n;
}

int child_spec_user(child_spec_t *s, const char *user, uid_t uid, gid_t gid, bool login)
{
    s->ids = CHILD_IDS_SWITCH;
    s->uid = uid;
    s->gid = gid;
    free(s->groups);
    s->groups = NULL;
    if (user) {
        /* by the configured name: never keep root's groups because a lookup failed */
        s->ngroups = group_list(user, gid, &s->groups);
        if (s->ngroups < 0) return -1;
    } else {
        s->groups = xmalloc(sizeof *s->groups);
        s->groups[0] = gid;
        s->ngroups = 1;
    }
    struct passwd *pw = login ? getpwuid(uid) : NULL;
    if (pw) {
        child_env_put(&s->env, "HOME", pw->pw_dir);
        child_env_put(&s->env, "USER", pw->pw_name);
        child_env_put(&s->env, "LOGNAME", pw->pw_name);
    }
    return 0;
}

void child_spec_free(child_spec_t *s)
{
    free(s->groups);
    s->groups = NULL;
    s->ngroups = 0;
    child_env_free(&s->env);
}

/* ------------------------------------------------------------ in the child */

/* A master started from a terminal does not lend it to its children: a
 * child keeps its stdio (the log) but not the terminal as its controlling
 * one, so code it runs as another user cannot push keystrokes into the
 * shell that started qpool (TIOCSTI needs the controlling terminal). */
static void drop_terminal(void)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return; /* none: the usual case (systemd) */
    (void)ioctl(fd, TIOCNOTTY);
    close(fd);
}

static int death_with_parent(const child_spec_t *s)
{
    if (!s->deathsig) return 0;
    if (prctl(PR_SET_PDEATHSIG, s->deathsig) < 0) {
        log_error("%s: prctl(PR_SET_PDEATHSIG): %s", s->who, strerror(errno));
        return -1;
    }
    /* The parent may have died between fork() and prctl(): then we were
     * reparented and no death signal will ever come. */
    return s->parent && getppid() != s->parent ? -1 : 0;
}

/* Every kept descriptor to its number, out of the way first (a source may
 * be another's target); nothing else of the master's from 3 up: control
 * socket, pid file lock, signalfd, Redis connections, listeners. */
static int keep_fds(const child_spec_t *s)
{
    int base = child_fd_base(s->fds, s->nfds), tmp[CHILD_FDS_MAX];
    if (base < 0) {
        log_error("%s: invalid descriptor plan", s->who);
        return -1;
    }
    for (int i = 0; i < s->nfds; i++)
        if ((tmp[i] = fcntl(s->fds[i].from, F_DUPFD_CLOEXEC, base)) < 0) goto fail;
    for (int i = 0; i < s->nfds; i++)
        if (dup2(tmp[i], s->fds[i].to) < 0 || (s->fds[i].cloexec && fcntl(s->fds[i].to, F_SETFD, FD_CLOEXEC) < 0))
            goto fail;
    closefrom(base);
    return 0;
fail:
    log_error("%s: keeping descriptors: %s", s->who, strerror(errno));
    return -1;
}

static int set_env(const child_spec_t *s)
{
    if (s->clear_env && clearenv() != 0) return -1;
    for (int i = 0; i < s->env.n; i++) {
        char *eq = strchr(s->env.v[i], '=');
        *eq = '\0'; /* our copy of the spec: the parent's is untouched */
        int r = setenv(s->env.v[i], eq + 1, 1);
        *eq = '=';
        if (r < 0) return -1;
    }
    return 0;
}

static int switch_ids(const child_spec_t *s)
{
    if (s->ids == CHILD_IDS_REFUSED) {
        log_error("%s: switching to user/group needs qpool to run as root", s->who);
        return -1;
    }
    if (s->ids != CHILD_IDS_SWITCH) return 0;
    if (setgroups((size_t)s->ngroups, s->groups) < 0 || setgid(s->gid) < 0 || setuid(s->uid) < 0) {
        log_error("%s: cannot switch to uid %d gid %d: %s", s->who, (int)s->uid, (int)s->gid, strerror(errno));
        return -1;
    }
    if (s->never_root && (s->uid == 0 || setuid(0) == 0)) {
        log_error("%s: could keep or regain root after dropping it", s->who);
        return -1;
    }
    return 0;
}

int child_setup(const child_spec_t *s)
{
    if (s->own_session ? setsid() < 0 : s->own_group && setpgid(0, 0) < 0) {
        log_error("%s: %s: %s", s->who, s->own_session ? "setsid" : "setpgid", strerror(errno));
        return -1;
    }
    drop_terminal();
    if (death_with_parent(s) < 0 || keep_fds(s) < 0) return -1;
    if (s->reset_signals) proc_reset_signals();
    if (s->nice && setpriority(PRIO_PROCESS, 0, s->nice) < 0)
        log_warn("%s: setpriority(%d): %s", s->who, s->nice, strerror(errno));
    if (set_env(s) < 0) {
        log_error("%s: setting the environment: %s", s->who, strerror(errno));
        return -1;
    }
    if (switch_ids(s) < 0) return -1;
    if (s->dir && chdir(s->dir) < 0) {
        log_error("%s: working_directory %s: %s", s->who, s->dir, strerror(errno));
        return -1;
    }
    /* Changing uid/gid clears the parent-death signal: set it again, and
     * check the parent once more. */
    return death_with_parent(s);
}

int child_setup_ids(const child_spec_t *s)
{
    if (switch_ids(s) < 0) return -1;
    return death_with_parent(s);
}
