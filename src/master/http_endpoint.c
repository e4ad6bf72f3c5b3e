/*
 * http_endpoint.c - the master's side of the HTTP endpoint (see http_endpoint.h): the
 * listener, the token, and the HTTP process's life (spawn, respawn with
 * backoff, restart on a changed config, stop). The HTTP process is forked,
 * set up (child.c) and made a fresh image: it execs the binary the master
 * was started from, by a descriptor opened at the start, as `qpool __http`
 * (http/http_main.c), with a minimal environment and its settings on a sealed
 * memfd (http_conf_wire.h). Nothing of the master's memory survives the
 * exec: no wiping can promise that of a forked copy (freed buffers of a
 * reload's config file text stay in the heap).
 */
#include "master/http_endpoint.h"
#include "config/http_conf_wire.h"
#include "os/child.h"
#include "core/log.h"
#include "os/proc.h"
#include "master/respawn.h"
#include "core/safefile.h"
#include "core/util.h"

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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN_MAX 4096
#define TOKEN_MIN 16
#define HTTP_EXE_FD 6          /* the binary, in the child until its exec (close-on-exec) */

struct http_sup {
    int listen_fd;
    char *listen;              /* what listen_fd was made for */
    char *unix_path;           /* unlinked at close */
    bool drop;                 /* the master is root: the HTTP process runs as uid/gid */
    uid_t uid;
    gid_t gid;
    char *token;               /* never logged */
    pid_t pid;
    int ctl_fd;                /* the master's end of its channel */
    bool killed;               /* killed for its silence: reaped soon */
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

#define STR_(x) #x
#define STR(x) STR_(x)

/* Up to n bytes (fewer only at the end of the file), or -1. */
static ssize_t read_upto(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
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
                      : st.st_size > TOKEN_MAX ? "is longer than " STR(TOKEN_MAX) " bytes"
                      : NULL;
    char buf[TOKEN_MAX + 1];
    ssize_t n = why ? 0 : read_upto(fd, buf, sizeof buf);
    close(fd);
    if (!why && n > TOKEN_MAX) why = "is longer than " STR(TOKEN_MAX) " bytes"; /* it grew */
    if (why || n < 0) {
        snprintf(err, errn, "http.token_file %s %s", path, why ? why : strerror(errno));
        explicit_bzero(buf, sizeof buf);
        return NULL;
    }
    char *t = trimmed(buf, (size_t)n);
    explicit_bzero(buf, sizeof buf);
    return t;
}

/* The token read from token_env, for as long as the config names that
 * variable: it is removed from the master's environment once read (so no
 * worker, job or alert command inherits it), so a reload could not read
 * it again. Kept whatever else a reload changes, even with the endpoint
 * off in between. */
static struct {
    char *name;
    char *token;               /* never logged */
} env_token;

/* A token's copy, wiped before it is freed: workers forked later inherit
 * the master's heap. */
static void free_secret(char *t)
{
    if (t) explicit_bzero(t, strlen(t));
    free(t);
}

static void forget_env_token(void)
{
    if (env_token.token) explicit_bzero(env_token.token, strlen(env_token.token));
    free(env_token.token);
    free(env_token.name);
    env_token.token = env_token.name = NULL;
}

static char *token_from_env(const char *name, char *err, size_t errn)
{
    if (env_token.name && !strcmp(env_token.name, name)) return xstrdup(env_token.token);
    const char *v = getenv(name);
    if (!v) {
        snprintf(err, errn, "http.token_env: %s is not set (it is read once, at the start or at the reload "
                 "that names it, and then removed from qpool's environment)", name);
        return NULL;
    }
    forget_env_token();
    env_token.name = xstrdup(name);
    env_token.token = trimmed(v, strlen(v));
    explicit_bzero((char *)v, strlen(v));
    unsetenv(name);
    if (strlen(env_token.token) > TOKEN_MAX) { /* as token_file: refused, not cut */
        snprintf(err, errn, "http.token_env: %s is longer than " STR(TOKEN_MAX) " bytes", name);
        forget_env_token();
        return NULL;
    }
    return xstrdup(env_token.token);
}

/* The token from token_env or token_file. token_file is read again
 * unless kept (the one read before, with the same settings) is given. */
static char *load_token(const http_conf_t *h, const char *kept, char *err, size_t errn)
{
    char *t = NULL;
    if (h->token_env) {
        if (!(t = token_from_env(h->token_env, err, errn))) return NULL;
    } else if (kept && h->token_file)
        t = xstrdup(kept);
    else if (h->token_file && !(t = read_token_file(h->token_file, err, errn)))
        return NULL;
    if (t && strlen(t) < TOKEN_MIN) {
        snprintf(err, errn, "the HTTP token is shorter than %d characters", TOKEN_MIN);
        free_secret(t);
        return NULL;
    }
    return t;
}

/* ------------------------------------------------------------ the listener */

/* The listener's backlog is the kernel's cap (net.core.somaxconn): a
 * flood that reconnects as fast as it is closed waits there for its turn,
 * rather than overflowing it and making a probe's connection wait for a
 * retransmit (1 s). */
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
        bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        snprintf(err, errn, "http.listen %s: %s", h->listen, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* A Unix listener's mode and group (socket_group, else qpool's), set on
 * the path: it was made in a directory only root or qpool's user can
 * change. */
static int unix_access(const http_conf_t *h, char *err, size_t errn)
{
    if (chmod(h->listen, (mode_t)h->socket_mode) < 0 ||
        lchown(h->listen, (uid_t)-1, h->socket_group ? h->socket_gid : getegid()) < 0) {
        snprintf(err, errn, "http.listen %s: cannot set its mode or group: %s", h->listen, strerror(errno));
        return -1;
    }
    return 0;
}

static int make_listener(struct http_sup *s, const http_conf_t *h, char *err, size_t errn)
{
    if (!h->is_unix) return listen_tcp(h, err, errn);
    int fd = safefile_listen_unix(h->listen, h->socket_mode, err, errn);
    if (fd >= 0) s->unix_path = xstrdup(h->listen);
    if (fd >= 0 && unix_access(h, err, errn) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void http_close_sup(struct http_sup *s)
{
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->unix_path) unlink(s->unix_path);
    free(s->unix_path);
    free(s->listen);
    free_secret(s->token);
    free(s);
}

void http_forget_token(master_t *m)
{
    if (m->http) {
        free_secret(m->http->token);
        m->http->token = NULL;
    }
    forget_env_token();
}

/* ------------------------------------------------------------ the process */

/* Who the HTTP process runs as, looked up in the master (no NSS lookup
 * after the fork: it could open descriptors we then keep). */
static int resolve_user(struct http_sup *s, const http_conf_t *h, char *err, size_t errn)
{
    s->drop = geteuid() == 0;
    if (!s->drop) return 0;
    const char *user = h->user ? h->user : "nobody";
    struct passwd *pw = getpwnam(user);
    if (!pw || pw->pw_uid == 0) {
        snprintf(err, errn, "http: cannot run as %s: %s", user, pw ? "it is root" : "no such user");
        return -1;
    }
    s->uid = pw->pw_uid;
    s->gid = pw->pw_gid;
    return 0;
}

/* ------------------------------------------------------------ the child */

/* The binary the master runs, opened once at its start: the HTTP process
 * execs it by this descriptor, the same program as the master's even
 * after a package upgrade replaced the file, and never from a path anyone
 * else could change. */
static struct {
    int fd;
    int err;                   /* errno of the open, when fd < 0 */
} self_exe = {-1, 0};

static void open_self_exe(void)
{
    if (self_exe.fd >= 0) return;
    self_exe.fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
    self_exe.err = self_exe.fd < 0 ? errno : 0;
}

#if defined(__SANITIZE_ADDRESS__)
#define HTTP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HTTP_SANITIZED 1
#endif
#endif

/* What of the master's environment the HTTP process gets: the journal's
 * stream (its log lines' format), OpenSSL's CA and config locations (TLS to
 * Redis), and a sanitizer build's options. Nothing else: no password
 * variable (the settings carry http.connection's password), no token_env. */
static const char *const HTTP_ENV[] = {"JOURNAL_STREAM", "SSL_CERT_FILE", "SSL_CERT_DIR", "OPENSSL_CONF",
#ifdef HTTP_SANITIZED
                                       "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
#endif
                                       NULL};

static void http_env(child_env_t *e)
{
    child_env_minimal(e, NULL, NULL, NULL); /* a PATH of its own, not the master's */
    for (int i = 0; HTTP_ENV[i]; i++) {
        const char *v = getenv(HTTP_ENV[i]);
        if (v) child_env_put(e, HTTP_ENV[i], v);
    }
}

/* The HTTP process's settings on a sealed memfd (its fd 5), or -1 (logged). */
static int settings_fd(const master_t *m, const struct http_sup *s)
{
    http_wire_t w;
    if (http_wire_from_config(&w, m->conf, s->token) < 0) {
        log_error("http: no redis connection %s", m->conf->http.connection ? m->conf->http.connection : "default");
        return -1;
    }
    w.parent = getpid();
    w.switch_user = s->drop;
    w.uid = s->uid;
    w.gid = s->gid;
    size_t len = 0;
    char *text = http_wire_encode(&w, &len);
    http_wire_free(&w);
    if (!text) {
        log_error("http: its settings are larger than %d bytes", HTTP_WIRE_MAX);
        return -1;
    }
    int fd = memfd_create("qpool-http-settings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    bool ok = fd >= 0 && write_all(fd, text, len) == 0 && fcntl(fd, F_ADD_SEALS, HTTP_CONF_SEALS) == 0;
    int err = errno;
    http_wire_text_free(text, len);
    if (!ok) {
        log_error("http: passing its settings (memfd): %s", strerror(err));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* The child as a child_spec_t, built in the master: the listener, the
 * channel and the settings become 3, 4 and 5, the binary 6 until the exec;
 * nothing else of the master's stays (pid file, control socket, Redis,
 * signalfd). Its user is not switched here but after the exec, by the new
 * image (http_main.c says why). */
static void http_spec(int listen_fd, int ctl_fd, int conf_fd, child_spec_t *cs)
{
    memset(cs, 0, sizeof *cs);
    snprintf(cs->who, sizeof cs->who, "http");
    cs->parent = getpid();
    cs->deathsig = SIGTERM; /* kept by the exec: same user, no set-user-ID */
    cs->own_group = true;
    cs->own_session = true; /* no controlling terminal: nothing to push keystrokes into (TIOCSTI) */
    cs->reset_signals = true; /* else the exec keeps the master's signal mask */
    cs->fds[cs->nfds++] = (child_fd_t){.from = listen_fd, .to = HTTP_LISTEN_FD};
    cs->fds[cs->nfds++] = (child_fd_t){.from = ctl_fd, .to = HTTP_CTL_FD};
    cs->fds[cs->nfds++] = (child_fd_t){.from = conf_fd, .to = HTTP_CONF_FD};
    cs->fds[cs->nfds++] = (child_fd_t){.from = self_exe.fd, .to = HTTP_EXE_FD, .cloexec = true};
}

static __attribute__((noreturn)) void become_http(const child_spec_t *cs, char *const *envp)
{
    log_set_tag("http");
    if (child_setup(cs) < 0) _exit(1);
    char a0[] = "qpool", a1[] = HTTP_SUBCOMMAND;
    char *argv[] = {a0, a1, NULL};
    fexecve(HTTP_EXE_FD, argv, envp);
    log_error("http: cannot exec qpool (/proc/self/exe as the master opened it): %s", strerror(errno));
    _exit(127);
}

static pid_t fork_http(const struct http_sup *s, int ctl_fd, int conf_fd)
{
    child_spec_t cs;
    child_env_t env = {0};
    http_spec(s->listen_fd, ctl_fd, conf_fd, &cs);
    http_env(&env);
    pid_t pid = fork();
    if (pid == 0) become_http(&cs, env.v);
    if (pid < 0) log_error("http: fork: %s", strerror(errno));
    child_spec_free(&cs);
    child_env_free(&env);
    return pid;
}

static void back_off(struct http_sup *s)
{
    exit_facts_t f = {.lived_ms = mono_ms() - s->started_ms, .clean = false, .did_work = false};
    int delay_s;
    respawn_after_exit(&s->respawn, &f, &delay_s);
    s->not_before_ms = mono_ms() + (int64_t)delay_s * 1000;
}

/* Who takes each HTTP process's channel (http_start's adopt): the control
 * loop, for the whole run of the master. */
static http_adopt_fn adopt_channel;
static http_heard_fn heard_from;

static int spawn(master_t *m)
{
    struct http_sup *s = m->http;
    s->started_ms = mono_ms();
    int sv[2] = {-1, -1}, conf_fd = -1;
    if (self_exe.fd < 0)
        log_error("http: cannot open /proc/self/exe (the binary to exec): %s", strerror(self_exe.err));
    else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        log_error("http: socketpair: %s", strerror(errno));
    else
        conf_fd = settings_fd(m, s);
    pid_t pid = conf_fd < 0 ? -1 : fork_http(s, sv[1], conf_fd);
    if (conf_fd >= 0) close(conf_fd);
    if (sv[1] >= 0) close(sv[1]);
    if (pid < 0) {
        if (sv[0] >= 0) close(sv[0]);
        back_off(s);
        return -1;
    }
    set_nonblock(sv[0], true);
    s->ctl_fd = sv[0];
    if (adopt_channel(m, sv[0]) < 0) {
        close(sv[0]);
        s->ctl_fd = -1;
    }
    s->pid = pid;
    s->killed = false;
    return 0;
}

static void stop_child(struct http_sup *s)
{
    /* it stops at once; the master's reaping collects it (as a pid it no
     * longer knows), so nothing here waits */
    if (s->pid > 0) kill(s->pid, SIGTERM);
    s->pid = 0;
}

/* Bind and spawn with token (taken); -1 with err when the endpoint is off. */
static int start_with(master_t *m, char *token, char *err, size_t errn)
{
    const http_conf_t *h = &m->conf->http;
    struct http_sup *s = xcalloc(1, sizeof *s);
    s->token = token;
    s->ctl_fd = -1;
    s->listen_fd = make_listener(s, h, err, errn);
    if (s->listen_fd < 0 || resolve_user(s, h, err, errn) < 0) {
        http_close_sup(s);
        return -1;
    }
    s->listen = xstrdup(h->listen);
    m->http = s;
    spawn(m); /* a failed fork is retried (backoff) */
    return 0;
}

/* The token the new settings name: the one held (kept_file: read from the
 * same token_file), else read. -1 with err when one is named and none is
 * to be had. */
static int next_token(const http_conf_t *h, const char *kept_file, char **token, char *err, size_t errn)
{
    *token = load_token(h, kept_file, err, errn);
    return (h->token_file || h->token_env) && !*token ? -1 : 0;
}

int http_start(master_t *m, http_adopt_fn adopt, http_heard_fn heard)
{
    const http_conf_t *h = &m->conf->http;
    adopt_channel = adopt;
    heard_from = heard;
    open_self_exe(); /* at the start, whether or not an endpoint is configured yet */
    if (!h->listen) return 0;
    char err[600];
    char *token;
    if (next_token(h, NULL, &token, err, sizeof err) < 0 || start_with(m, token, err, sizeof err) < 0) {
        log_error("%s; the HTTP endpoint stays off", err);
        return -1;
    }
    return 0;
}

bool http_reaped(master_t *m, pid_t pid, int status)
{
    struct http_sup *s = m->http;
    if (!s || pid != s->pid) return false;
    s->pid = 0;
    char desc[96];
    proc_describe_status(status, desc, sizeof desc);
    if (m->stopping) return true;
    back_off(s);
    log_warn("http: the HTTP process (pid %d) %s; restarting it in %lld s", (int)pid, desc,
             (long long)((s->not_before_ms - mono_ms() + 999) / 1000));
    return true;
}

int64_t http_next_due(const master_t *m)
{
    const struct http_sup *s = m->http;
    return s && !s->pid && !m->stopping ? s->not_before_ms : 0;
}

/* An HTTP process that has sent nothing for HTTP_SILENT_MS (SIGSTOPped by
 * a process of its user, or hung) is killed; its reaping restarts it. */
static void kill_if_silent(struct http_sup *s, master_t *m, int64_t now)
{
    int64_t heard = heard_from && s->ctl_fd >= 0 ? heard_from(m, s->ctl_fd) : -1;
    int64_t since = heard > s->started_ms ? heard : s->started_ms;
    if (s->killed || now - since < HTTP_SILENT_MS) return;
    log_warn("http: the HTTP process (pid %d) has sent nothing for %lld s (stopped or hung); killing it",
             (int)s->pid, (long long)((now - since) / 1000));
    kill(s->pid, SIGKILL);
    s->killed = true;
}

void http_tick(master_t *m, int64_t now)
{
    struct http_sup *s = m->http;
    if (!s || m->stopping) return;
    if (s->pid)
        kill_if_silent(s, m, now);
    else if (now >= s->not_before_ms)
        spawn(m);
}

void http_close(master_t *m)
{
    if (!m->http) return;
    stop_child(m->http);
    http_close_sup(m->http);
    m->http = NULL;
}

/* A reload always starts a new HTTP process (it was forked with the old
 * config: its Redis connection, limits and retention). The listener is
 * kept when listen is unchanged: the old process still holds its copy, so
 * binding the address again would fail. The token is kept as well (see
 * env_token; token_file is read again when the settings changed). */
int http_reload(master_t *m, const qconf_t *old, char *err, size_t errn)
{
    const http_conf_t *h = &m->conf->http;
    struct http_sup *s = m->http;
    if (!h->listen) {
        if (s) log_info("http: listen is gone from the config; the endpoint is off");
        http_close(m);
        return 0;
    }
    char *token;
    if (next_token(h, s && http_conf_same(&old->http, h) ? s->token : NULL, &token, err, errn) < 0) {
        http_close(m);
        log_error("reload: %s; the HTTP endpoint is off", err);
        return -1;
    }
    if (!s || strcmp(s->listen, h->listen)) {
        if (s) log_info("http: the endpoint's address changed; restarting it");
        http_close(m);
        if (start_with(m, token, err, errn) < 0) {
            log_error("reload: %s; the HTTP endpoint is off", err);
            return -1;
        }
        return 0;
    }
    free_secret(s->token);
    s->token = token;
    if ((h->is_unix && unix_access(h, err, errn) < 0) || resolve_user(s, h, err, errn) < 0) {
        http_close(m);
        log_error("reload: %s; the HTTP endpoint is off", err);
        return -1;
    }
    stop_child(s);
    s->respawn = (respawn_t){0};
    spawn(m);
    return 0;
}
