/*
 * safefile.c - see safefile.h.
 */
#include "core/safefile.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static bool owner_ok(uid_t uid, uid_t euid)
{
    return uid == 0 || uid == euid;
}

const char *safefile_dir_problem(const struct stat *st, uid_t euid)
{
    if (!S_ISDIR(st->st_mode)) return "is not a directory";
    if (!owner_ok(st->st_uid, euid)) return "is owned by another user";
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
        return "can be written by other users (and has no sticky bit)";
    return NULL;
}

/* Every prefix of dir, as written: directories must pass the rule, symlinks
 * must be owned by root or us. */
static int check_lexical(const char *dir, char *err, size_t errn)
{
    char *p = xstrdup(dir);
    int rv = 0;
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (!end && *s != '/') continue;
        *s = '\0';
        struct stat st;
        const char *problem = NULL;
        if (lstat(p, &st) < 0)
            problem = strerror(errno);
        else if (S_ISLNK(st.st_mode))
            problem = owner_ok(st.st_uid, geteuid()) ? NULL : "is a symbolic link owned by another user";
        else
            problem = safefile_dir_problem(&st, geteuid());
        if (problem) {
            snprintf(err, errn, "%s %s", p, problem);
            rv = -1;
            break;
        }
        if (end) break;
        *s = '/';
    }
    free(p);
    return rv;
}

/* 0755 whatever the umask (a UMask=0027 drop-in, docs/operations.md, would make it 0750 and
 * shut control_user out), as systemd's RuntimeDirectory would. */
static int mkdir_0755(const char *dir)
{
    mode_t old = umask(022);
    int r = mkdir(dir, 0755);
    int e = errno;
    umask(old);
    errno = e;
    return r;
}

int safefile_check_parent(const char *path, char *err, size_t errn)
{
    if (path[0] != '/') {
        snprintf(err, errn, "%s: not an absolute path", path);
        return -1;
    }
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    int rv = -1;
    char real[PATH_MAX];
    if (mkdir_0755(dir) < 0 && errno != EEXIST) {
        snprintf(err, errn, "cannot create %s: %s", dir, strerror(errno));
    } else if (check_lexical(dir, err, errn) == 0) {
        if (!realpath(dir, real))
            snprintf(err, errn, "%s: %s", dir, strerror(errno));
        else
            rv = strcmp(real, "/") ? check_lexical(real, err, errn) : 0;
    }
    free(dir);
    return rv;
}

/* An existing file at path must be ours: the right type, our user, one link. */
static const char *file_problem(const struct stat *st, mode_t type)
{
    if ((st->st_mode & S_IFMT) != type) return type == S_IFSOCK ? "is not a socket" : "is not a regular file";
    if (st->st_uid != geteuid()) return "is owned by another user";
    if (st->st_nlink > 1) return "has more than one link";
    return NULL;
}

int safefile_pidfile(const char *path, pid_t *other, char *err, size_t errn)
{
    *other = 0;
    if (safefile_check_parent(path, err, errn) < 0) return -1;
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) { /* the O_NOFOLLOW below is the guarantee */
        snprintf(err, errn, "%s is a symbolic link", path);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        snprintf(err, errn, "%s: %s", path, errno == ELOOP ? "is a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    const char *problem = fstat(fd, &st) < 0 ? strerror(errno) : file_problem(&st, S_IFREG);
    if (problem) {
        snprintf(err, errn, "%s %s", path, problem);
        close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n > 0) *other = (pid_t)strtol(buf, NULL, 10);
        close(fd);
        return -2;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

void safefile_pidfile_remove(const char *path, int fd)
{
    if (fd < 0) return;
    unlink(path); /* its directory is one only root or we can write */
    close(fd);
}

int safefile_clear_socket(const char *path, char *err, size_t errn)
{
    if (safefile_check_parent(path, err, errn) < 0) return -1;
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return -1;
    }
    const char *problem = file_problem(&st, S_IFSOCK);
    if (problem) {
        snprintf(err, errn, "%s %s; not removing it", path, S_ISLNK(st.st_mode) ? "is a symbolic link" : problem);
        return -1;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int safefile_listen_unix(const char *path, int mode, char *err, size_t errn)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errn, "socket path is too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    /* The pid file lock is ours, so a socket left here is stale; but only
     * a socket of ours is removed, in a directory only root or we can change. */
    if (safefile_clear_socket(path, err, errn) < 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errn, "socket: %s", strerror(errno));
        return -1;
    }
    /* created with its final mode: no window where clients see another */
    mode_t old = umask((mode_t)(~mode & 0777));
    int rb = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rb < 0 || listen(fd, 128) < 0) {
        snprintf(err, errn, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* ------------------------------------------------------------ secrets */

const char *safefile_secret_problem(const struct stat *st, uid_t euid)
{
    if (!S_ISREG(st->st_mode)) return "is not a regular file";
    if (!owner_ok(st->st_uid, euid)) return "is owned by another user";
    if (st->st_mode & (S_IWGRP | S_IWOTH)) return "can be written by group or others";
    if (st->st_size > SAFEFILE_SECRET_MAX) return "is too large for a password";
    return NULL;
}

static void strip_newline(char *s, size_t *len)
{
    if (*len && s[*len - 1] == '\n') s[--*len] = '\0';
    if (*len && s[*len - 1] == '\r') s[--*len] = '\0';
}

static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + *len, cap - *len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return 0;
        *len += (size_t)n;
        if (*len == cap) return -2; /* grew past the limit while we read */
    }
}

char *safefile_read_secret(const char *path, char *err, size_t errn)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errn, "%s: %s", path,
                 errno == ELOOP ? "is a symbolic link (refused)" : strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *why = fstat(fd, &st) < 0 ? strerror(errno) : safefile_secret_problem(&st, geteuid());
    if (why) {
        snprintf(err, errn, "%s %s", path, why);
        close(fd);
        return NULL;
    }
    char *buf = xcalloc(SAFEFILE_SECRET_MAX + 1, 1);
    size_t len = 0;
    int r = read_all(fd, buf, SAFEFILE_SECRET_MAX + 1, &len);
    close(fd);
    if (r < 0) {
        snprintf(err, errn, "%s: %s", path, r == -2 ? "is too large for a password" : strerror(errno));
        explicit_bzero(buf, SAFEFILE_SECRET_MAX + 1);
        free(buf);
        return NULL;
    }
    strip_newline(buf, &len);
    if (!len || memchr(buf, '\n', len) || memchr(buf, '\0', len)) {
        snprintf(err, errn, "%s: %s", path, len ? "holds more than one line" : "is empty");
        explicit_bzero(buf, SAFEFILE_SECRET_MAX + 1);
        free(buf);
        return NULL;
    }
    return buf;
}
