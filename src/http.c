/*
 * http.c - the master's side of the HTTP endpoint (see http.h): the
 * listener, the token, and the HTTP process's life (spawn, respawn with
 * backoff, restart on a changed config, stop).
 */
#include "http.h"
#include "control.h"
#include "log.h"
#include "proc.h"
#include "respawn.h"
#include "safefile.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN_MAX 4096
#define TOKEN_MIN 16
#define HTTP_LISTEN_FD 3
#define HTTP_CTL_FD 4

struct http_sup {
    int listen_fd;
    char *unix_path;           /* unlinked at close */
    char *token;               /* never logged */
    pid_t pid;
    int64_t started_ms, not_before_ms;
    respawn_t respawn;
};

/* ------------------------------------------------------------ the token */

static char *trimmed(const char *s, size_t n)
{
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    char *t = xmalloc(n + 1);
    memcpy(t, s, n);
    t[n] = '\0';
    return t;
}

/* Read token_file as root safely: no link followed, a regular file of
 * root's or ours that others cannot read. */
static char *read_token_file(const char *path, char *err, size_t errn)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(err, errn, "http.token_file %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    const char *why = !S_ISREG(st.st_mode) ? "is not a regular file"
                      : (st.st_uid != 0 && st.st_uid != geteuid()) ? "is not owned by root or qpool's user"
                      : (st.st_mode & 0007) ? "is readable or writable by others (chmod 0600 or 0640)"
                      : (st.st_mode & 0020) ? "is writable by its group"
                      : NULL;
    char buf[TOKEN_MAX + 1];
    ssize_t n = why ? 0 : read(fd, buf, TOKEN_MAX);
    close(fd);
    if (why || n < 0) {
        snprintf(err, errn, "http.token_file %s %s", path, why ? why : strerror(errno));
        return NULL;
    }
    return trimmed(buf, (size_t)n);
}

static char *load_token(const http_conf_t *h, char *err, size_t errn)
{
    char *t = NULL;
    if (h->token_env) {
        const char *v = getenv(h->token_env);
        if (!v) {
            snprintf(err, errn, "http.token_env: %s is not set", h->token_env);
            return NULL;
        }
        t = trimmed(v, strlen(v));
    } else if (h->token_file && !(t = read_token_file(h->token_file, err, errn)))
        return NULL;
    if (t && strlen(t) < TOKEN_MIN) {
        snprintf(err, errn, "the HTTP token is shorter than %d characters", TOKEN_MIN);
        free(t);
        return NULL;
    }
    return t;
}

/* ------------------------------------------------------------ the listener */

static int listen_tcp(const http_conf_t *h, char *err, size_t errn)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, h->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)h->port);
        len = sizeof *a4;
    } else {
        inet_pton(AF_INET6, h->host, &a6->sin6_addr);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)h->port);
        len = sizeof *a6;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
        snprintf(err, errn, "http.listen %s: %s", h->listen, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static int make_listener(struct http_sup *s, const http_conf_t *h, char *err, size_t errn)
{
    if (!h->is_unix) return listen_tcp(h, err, errn);
    int fd = safefile_listen_unix(h->listen, h->socket_mode, err, errn);
    if (fd >= 0) s->unix_path = xstrdup(h->listen);
    return fd;
}

/* ------------------------------------------------------------ the process */

/* The HTTP process's user when the master is root: http.user, else nobody. */
static int drop_privileges(const http_conf_t *h)
{
    if (geteuid() != 0) return 0;
    const char *user = h->user ? h->user : "nobody";
    struct passwd *pw = getpwnam(user);
    if (!pw || initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
        log_error("http: cannot run as %s: %s", user, pw ? strerror(errno) : "no such user");
        return -1;
    }
    if (setuid(0) == 0) {
        log_error("http: could regain root after dropping it");
        return -1;
    }
    return 0;
}

/* In the child: keep the listener and the channel as 3 and 4, nothing else
 * of the master's (scoreboard, pid file, control socket, Redis, signalfd). */
static void become_http(master_t *m, int listen_fd, int ctl_fd)
{
    pid_t master = getppid();
    log_set_tag("http");
    proc_title("qpool: http [%s]", m->conf->http.listen);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != master) _exit(1);
    setpgid(0, 0);
    if (dup2(listen_fd, HTTP_LISTEN_FD) < 0 || dup2(ctl_fd, HTTP_CTL_FD) < 0) _exit(1);
    closefrom(HTTP_CTL_FD + 1);
    sb_destroy(&m->sb);
    set_nonblock(HTTP_CTL_FD, true);
    if (drop_privileges(&m->conf->http) < 0) _exit(1);
    _exit(http_serve(m->conf, HTTP_LISTEN_FD, HTTP_CTL_FD, m->http->token));
}

static int spawn(master_t *m)
{
    struct http_sup *s = m->http;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        log_error("http: socketpair: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        log_error("http: fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        close(sv[0]);
        become_http(m, s->listen_fd, sv[1]);
    }
    close(sv[1]);
    set_nonblock(sv[0], true);
    if (control_adopt(m, sv[0]) < 0) close(sv[0]);
    s->pid = pid;
    s->started_ms = mono_ms();
    return 0;
}

int http_start(master_t *m)
{
    const http_conf_t *h = &m->conf->http;
    if (!h->listen) return 0;
    char err[600];
    struct http_sup *s = xcalloc(1, sizeof *s);
    s->listen_fd = -1;
    s->token = load_token(h, err, sizeof err);
    if ((h->token_file || h->token_env) && !s->token) {
        log_error("%s; the HTTP endpoint stays off", err);
        free(s);
        return -1;
    }
    s->listen_fd = make_listener(s, h, err, sizeof err);
    if (s->listen_fd < 0) {
        log_error("%s; the HTTP endpoint stays off", err);
        free(s->token);
        free(s);
        return -1;
    }
    m->http = s;
    return spawn(m);
}

bool http_reaped(master_t *m, pid_t pid, int status)
{
    struct http_sup *s = m->http;
    if (!s || pid != s->pid) return false;
    s->pid = 0;
    char desc[96];
    proc_describe_status(status, desc, sizeof desc);
    if (m->stopping) return true;
    exit_facts_t f = {.lived_ms = mono_ms() - s->started_ms, .clean = false, .did_work = false};
    int delay_s;
    respawn_after_exit(&s->respawn, &f, &delay_s);
    s->not_before_ms = mono_ms() + (int64_t)delay_s * 1000;
    log_warn("http: the HTTP process (pid %d) %s; restarting it in %d s", (int)pid, desc, delay_s);
    return true;
}

int64_t http_next_due(const master_t *m)
{
    const struct http_sup *s = m->http;
    return s && !s->pid && !m->stopping ? s->not_before_ms : 0;
}

void http_tick(master_t *m, int64_t now)
{
    struct http_sup *s = m->http;
    if (s && !s->pid && !m->stopping && now >= s->not_before_ms) spawn(m);
}

void http_close(master_t *m)
{
    struct http_sup *s = m->http;
    if (!s) return;
    /* it stops at once; the master's reaping collects it (as a pid it no
     * longer knows), so nothing here waits */
    if (s->pid > 0) kill(s->pid, SIGTERM);
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->unix_path) unlink(s->unix_path);
    free(s->unix_path);
    free(s->token);
    free(s);
    m->http = NULL;
}

void http_reload(master_t *m, const qconf_t *old)
{
    if (http_conf_same(&old->http, &m->conf->http)) return;
    log_info("http: the endpoint's settings changed; restarting it");
    http_close(m);
    http_start(m);
}
