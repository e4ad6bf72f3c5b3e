/*
 * http_main.c - the HTTP process's entry, `qpool __http` (see http.h): the
 * image the master's fork execs. Nothing of the master's memory is here:
 * not its config (a reload's freed buffers of the config file's text),
 * not its other connections' passwords, not the pools' environments. What
 * it needs comes on descriptor 5 (http_conf_wire.h).
 *
 * The master runs it as the master's user; the switch to http.user
 * (nobody) happens here, after the exec: a process that changes its user
 * before an exec is dumpable again after it (any process of that user
 * could read its memory, token included, through ptrace or /proc/PID/mem),
 * while one that changes it after stays non-dumpable. So it starts as
 * root when the master is root, and does nothing as root but check its
 * descriptors and read and check its settings.
 *
 * Not listed in `qpool help`: it refuses to run unless its descriptors are
 * what the master gives it.
 */
#include "http/http.h"
#include "os/child.h"
#include "core/log.h"
#include "os/proc.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOT_BY_HAND "qpool " HTTP_SUBCOMMAND " is qpool's HTTP process, which `qpool run` starts " \
                    "(qpool.http.listen); it is not run by hand"

static int sock_opt(int fd, int opt)
{
    int v = 0;
    socklen_t l = sizeof v;
    return getsockopt(fd, SOL_SOCKET, opt, &v, &l) < 0 ? -1 : v;
}

/* 3: a listening stream socket; 4: a connected Unix stream socket; 5: a
 * sealed memfd. NULL, or what is wrong. */
static const char *fds_wrong(void)
{
    if (sock_opt(HTTP_LISTEN_FD, SO_TYPE) != SOCK_STREAM || sock_opt(HTTP_LISTEN_FD, SO_ACCEPTCONN) != 1)
        return "descriptor 3 is not a listening stream socket";
    if (sock_opt(HTTP_CTL_FD, SO_DOMAIN) != AF_UNIX || sock_opt(HTTP_CTL_FD, SO_TYPE) != SOCK_STREAM ||
        sock_opt(HTTP_CTL_FD, SO_ACCEPTCONN) != 0)
        return "descriptor 4 is not a connected Unix stream socket (the master's channel)";
    int seals = fcntl(HTTP_CONF_FD, F_GET_SEALS);
    if (seals < 0 || (seals & HTTP_CONF_SEALS) != HTTP_CONF_SEALS)
        return "descriptor 5 is not a sealed memfd (its settings)";
    return NULL;
}

/* The settings on fd 5 (then closed), parsed into w; the text is wiped. */
static int read_settings(http_wire_t *w, char *err, size_t errn)
{
    struct stat st = {0};
    if (fstat(HTTP_CONF_FD, &st) < 0 || st.st_size > HTTP_WIRE_MAX) {
        snprintf(err, errn, "%s", st.st_size > HTTP_WIRE_MAX ? "too large" : strerror(errno));
        close(HTTP_CONF_FD);
        return -1;
    }
    size_t len = (size_t)st.st_size, got = 0;
    char *text = xmalloc(len + 1);
    while (got < len) {
        ssize_t r = pread(HTTP_CONF_FD, text + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(HTTP_CONF_FD);
    int rv = -1;
    if (got == len)
        rv = http_wire_decode(text, len, w, err, errn);
    else
        snprintf(err, errn, "cannot be read");
    explicit_bzero(text, len);
    free(text);
    return rv;
}

/* http.user when the master is root (never root itself, and not dumpable:
 * see above), else the master's user; the death signal set again (a
 * change of user clears it) and the master checked to be still there. */
static int become_user(const http_wire_t *w)
{
    if (!w->switch_user && (geteuid() == 0 || getuid() == 0)) {
        log_error("refusing to serve HTTP as root (the settings name no other user)");
        return -1;
    }
    gid_t groups[1] = {w->gid};
    child_spec_t cs = {.parent = w->parent, .deathsig = SIGTERM, .never_root = true,
                       .ids = w->switch_user ? CHILD_IDS_SWITCH : CHILD_IDS_KEEP, .uid = w->uid, .gid = w->gid,
                       .groups = groups, .ngroups = 1};
    snprintf(cs.who, sizeof cs.who, "http");
    if (child_setup_ids(&cs) < 0) return -1;
    if (w->switch_user && prctl(PR_SET_DUMPABLE, 0) < 0) {
        log_error("prctl(PR_SET_DUMPABLE): %s", strerror(errno));
        return -1;
    }
    /* nothing it runs could gain privileges (it runs nothing: a second guard) */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        log_error("prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
        return -1;
    }
    if (w->switch_user && (getegid() == 0 || getgid() == 0)) {
        log_error("refusing to serve HTTP with group root (http.user's primary group)");
        return -1;
    }
    return 0;
}

int http_main(int argc, char **argv)
{
    (void)argv;
    log_init("http");
    const char *wrong = argc != 1 ? "it takes no argument" : fds_wrong();
    if (wrong) {
        log_error("%s: %s", NOT_BY_HAND, wrong);
        return 64; /* EX_USAGE */
    }
    http_wire_t w;
    char err[400];
    if (read_settings(&w, err, sizeof err) < 0) {
        log_error("its settings (descriptor 5): %s", err);
        return 1;
    }
    log_set_level(w.log_level);
    log_set_format(w.log_format);
    int rv = 1;
    if (become_user(&w) == 0) {
        proc_title("qpool: http [%s]", w.http.listen);
        set_nonblock(HTTP_CTL_FD, true);
        rv = http_serve(&w, HTTP_LISTEN_FD, HTTP_CTL_FD);
    }
    http_wire_free(&w);
    return rv;
}
