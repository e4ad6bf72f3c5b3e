/*
 * safefile.h - files that a root master creates (the pid file, the control
 * socket) without ever following a path an unprivileged user controls.
 *
 * The rule: every directory on the way to the file, as written and as
 * resolved, must be owned by root or by qpool's own user, and must not be
 * writable by group or others unless it has the sticky bit (like /tmp: then
 * nobody else can rename or remove what qpool puts there). A symbolic link
 * on the way must be owned by root or qpool's user too. A path that breaks
 * the rule is refused with an error that names the directory and why. The
 * file itself is opened without following a symlink, and an existing one
 * must be qpool's own (a regular file or socket, owned by qpool's user, one
 * link).
 */
#ifndef QPOOL_SAFEFILE_H
#define QPOOL_SAFEFILE_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Why a directory with this stat is unsafe for qpool's files (euid: qpool's
 * user), or NULL if it is fine. Pure. */
const char *safefile_dir_problem(const struct stat *st, uid_t euid);

/* Check the directory that will hold path (creating a missing last level
 * with mode 0755). 0 if safe; -1 with err filled. */
int safefile_check_parent(const char *path, char *err, size_t errn);

/* The pid file: open (create) it without following a symlink, lock it, and
 * write our pid. Returns the open, locked fd (keep it for the life of the
 * master), -1 with err filled, or -2 when another process holds the lock
 * (*other gets its pid, when readable). */
int safefile_pidfile(const char *path, pid_t *other, char *err, size_t errn);
void safefile_pidfile_remove(const char *path, int fd);

/* Remove a stale socket left at path: only a socket owned by qpool's user;
 * anything else there (a symlink, a file, another user's socket) is an
 * error. 0 if the path is free now. */
int safefile_clear_socket(const char *path, char *err, size_t errn);

/* A listening Unix stream socket at path (non-blocking, close-on-exec):
 * a stale socket of ours is removed first (safefile_clear_socket), and the
 * socket is created with its final mode (no chmod by path afterwards).
 * The fd, or -1 with err filled. */
int safefile_listen_unix(const char *path, int mode, char *err, size_t errn);

/* A secret (a Redis password) from a file: opened without following a
 * symlink, a regular file owned by root or the caller, not writable by group
 * or others, at most SAFEFILE_SECRET_MAX bytes; one trailing newline (\n or
 * \r\n) is stripped. The content never appears in err. Returns a new string
 * (free it after explicit_bzero), or NULL with err filled. */
#define SAFEFILE_SECRET_MAX 4096
char *safefile_read_secret(const char *path, char *err, size_t errn);
/* The part of the rule that needs no file: why a secret file with this stat
 * is refused (euid: the reader), or NULL. Pure. */
const char *safefile_secret_problem(const struct stat *st, uid_t euid);

#endif
