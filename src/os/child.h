/*
 * child.h - the one way a child of the master is set up: native and
 * external workers (pool.c), the HTTP process (master/http_endpoint.c) and alert commands
 * (alerting.c) each describe what they need in a child_spec_t, built in
 * the parent BEFORE fork() (every user, group and home directory lookup
 * happens there: NSS after fork() can open descriptors the child keeps,
 * or deadlock in a big or threaded process), and the forked child applies
 * it with child_setup(), which does nothing but system calls.
 *
 * The order child_setup() applies is fixed: own process group, death
 * signal and the parent check, descriptors, signal state, nice,
 * environment, credentials, working directory, then the death signal
 * again (a change of credentials clears it) and the parent check again.
 *
 * The pure parts (descriptor plan, environment list, the credential
 * decision) are unit-tested in tests/unit/test_child.c.
 */
#ifndef QPOOL_CHILD_H
#define QPOOL_CHILD_H

#include <stdbool.h>
#include <sys/types.h>


#define CHILD_FDS_MAX 4
#define CHILD_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* A descriptor the child keeps: the parent's `from` becomes `to`. */
typedef struct {
    int from;
    int to;
    bool cloexec;              /* not inherited by what the child execs */
} child_fd_t;

/* Environment variables the child sets, in order; a later NAME replaces
 * an earlier one. Entries are "NAME=value". */
typedef struct {
    char **v;
    int n;
} child_env_t;

/* What happens to the child's user and groups. */
enum child_ids {
    CHILD_IDS_KEEP = 0,        /* stay what the master is */
    CHILD_IDS_SWITCH = 1,      /* become uid/gid with groups (the master is root) */
    CHILD_IDS_REFUSED = 2,     /* another user was asked for but the master is not root */
};

typedef struct {
    char who[96];              /* in log messages: "pool w", "http", "alerts" */
    pid_t parent;              /* the master: the child gives up when it is no longer its parent */
    int deathsig;              /* sent by the kernel when the parent dies; 0: none */
    bool own_group;            /* setpgid(0, 0): the master signals the whole group */
    bool own_session;          /* with own_group: setsid() instead, a session (and group) of its
                                * own with no controlling terminal (a master started from a
                                * terminal would share it: TIOCSTI) */
    bool reset_signals;        /* default dispositions and an empty mask (before an exec) */
    child_fd_t fds[CHILD_FDS_MAX];
    int nfds;                  /* every other descriptor from 3 up is closed */
    enum child_ids ids;
    uid_t uid;
    gid_t gid;
    gid_t *groups;             /* supplementary groups, looked up before the fork */
    int ngroups;
    bool never_root;           /* refuse to end as root, and check root cannot be regained */
    int nice;
    const char *dir;           /* working directory; NULL: the master's */
    bool clear_env;            /* start from an empty environment (else the master's) */
    child_env_t env;           /* set on top */
} child_spec_t;

/* ---- pure parts */

/* Set NAME=value in e, replacing an earlier NAME. Returns the count. */
int child_env_put(child_env_t *e, const char *name, const char *value);
/* The value of NAME in e, or NULL. */
const char *child_env_get(const child_env_t *e, const char *name);
void child_env_free(child_env_t *e);
/* A minimal environment: PATH (path, else CHILD_DEFAULT_PATH), HOME and
 * USER (when known). Returns the count. */
int child_env_minimal(child_env_t *e, const char *path, const char *home, const char *user);

/* The first descriptor child_setup closes from (>= 3, above every kept
 * target), or -1 when the plan is invalid (negative descriptor, a target
 * given twice, more than CHILD_FDS_MAX). */
int child_fd_base(const child_fd_t *fds, int n);

/* What to do with credentials (enum child_ids): has_uid/has_gid say a
 * user or group was asked for; euid/egid are the master's. The one not
 * asked for is filled in from the master's. */
int child_ids_plan(uid_t euid, gid_t egid, bool has_uid, uid_t *uid, bool has_gid, gid_t *gid);

/* ---- before the fork (lookups) */

/* Become uid/gid when the master is root: supplementary groups of user
 * (by name; NULL: gid alone), and with login true, HOME, USER and LOGNAME
 * from uid's passwd entry. Returns 0, -1 when the groups cannot be read. */
int child_spec_user(child_spec_t *s, const char *user, uid_t uid, gid_t gid, bool login);
/* What a builder allocated (groups, environment). */
void child_spec_free(child_spec_t *s);

/* ---- in the child */

/* Apply s. Returns 0, or -1 with a message logged: the caller _exits. */
int child_setup(const child_spec_t *s);
/* The credentials part of s alone (ids, groups, never_root), then the
 * death signal and the parent check again: for a process that changes
 * its user itself after an exec (the HTTP process, http_main.c: a change
 * before the exec would leave the new image dumpable, so that any process
 * of that user could read its memory). Returns 0, or -1 with a message
 * logged. */
int child_setup_ids(const child_spec_t *s);

#endif
