/*
 * rnode.c - see rnode.h.
 */
#include "redis/rnode.h"
#include "core/log.h"
#include "redis/rtls.h"
#include "redis/sentinel.h"
#include "core/util.h"

#include <hiredis/sds.h>
#include <unistd.h>

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rconn_t *rnode_new(const redis_conf_t *rc)
{
    rconn_t *c = xcalloc(1, sizeof *c);
    c->type = &rnode_type;
    c->name = xstrdup(rc->name);
    c->conf = *rc;
    c->conf.name = c->name;
    c->conf.host = xstrdup_or_null(rc->host);
    c->conf.socket = xstrdup_or_null(rc->socket);
    c->conf.prefix = xstrdup(rc->prefix ? rc->prefix : "");
    c->conf.username = xstrdup_or_null(rc->username);
    c->conf.password_env = xstrdup_or_null(rc->password_env);
    c->conf.password = xstrdup_or_null(rc->password);
    c->conf.app = NULL;
    redis_conf_ext_copy(&c->conf, rc);
    /* behind Sentinel the address is unknown until a sentinel names it */
    if (!c->conf.sentinel.addrs) snprintf(c->cur_host, sizeof c->cur_host, "%s", c->conf.host ? c->conf.host : "");
    c->cur_port = c->conf.port;
    return c;
}

void rnode_close(rconn_t *c)
{
    if (c->ssl) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->ctx) {
        redisFree(c->ctx);
        c->ctx = NULL;
    }
}

void rnode_free(rconn_t *c)
{
    if (!c) return;
    rnode_close(c);
    rnode_free(c->watch);
    if (c->ssl_ctx) SSL_CTX_free(c->ssl_ctx);
    c->conf.name = NULL; /* c->name's */
    redis_conf_free(&c->conf);
    free(c->name);
    free(c);
}

/* rconn_describe for one server. */
static void describe(const rconn_t *c, char *buf, size_t n)
{
    if (c->conf.socket)
        snprintf(buf, n, "%s (%s)", c->name, c->conf.socket);
    else if (c->conf.sentinel.addrs && c->cur_host[0])
        snprintf(buf, n, "%s (%s at %s:%d via Sentinel)", c->name, c->conf.sentinel.master_name,
                 c->cur_host, c->cur_port);
    else if (c->conf.sentinel.addrs)
        snprintf(buf, n, "%s (%s via Sentinel)", c->name, c->conf.sentinel.master_name);
    else
        snprintf(buf, n, "%s (%s:%d)", c->name, c->cur_host, c->cur_port);
}

/* ------------------------------------------------------------ I/O */

static void set_error(rconn_t *c, const char *why)
{
    if (why != c->last_error) snprintf(c->last_error, sizeof c->last_error, "%s", why);
}

/* last_error from a format (may truncate: it is a message). */
__attribute__((format(printf, 2, 3))) static void set_errorf(rconn_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->last_error, sizeof c->last_error, fmt, ap);
    va_end(ap);
}

static int64_t conf_timeout_ms(const rconn_t *c)
{
    return (int64_t)(c->conf.timeout * 1000);
}

/* Send what is queued. -1 with last_error set (the caller drops). */
static int flush_out(rconn_t *c)
{
    /* Sending a batch and then waiting for its replies is one round trip,
     * however many commands the batch holds. */
    if (!c->ctx->obuf || !*c->ctx->obuf) return 0;
    c->round_trips++;
    if (c->ssl) {
        if (rtls_write(c->ssl, c->ctx->obuf, sdslen(c->ctx->obuf), mono_ms() + conf_timeout_ms(c),
                       c->last_error, sizeof c->last_error) < 0)
            return -1;
        sdsclear(c->ctx->obuf);
        return 0;
    }
    int done = 0;
    while (!done) {
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK) {
            set_error(c, c->ctx->errstr[0] ? c->ctx->errstr : "write failed");
            return -1;
        }
    }
    return 0;
}

/* Read what the socket has into hiredis's reader. 1 when bytes were fed, 0
 * when TLS has no whole record yet, -1 with last_error set. *want_write: TLS
 * needs the socket writable before it can read on. */
static int fill_reader(rconn_t *c, bool *want_write)
{
    *want_write = false;
    if (!c->ssl) {
        if (redisBufferRead(c->ctx) == REDIS_OK) return 1;
        set_error(c, c->ctx->errstr[0] ? c->ctx->errstr : "connection lost");
        return -1;
    }
    char buf[16384];
    int n = rtls_read(c->ssl, buf, sizeof buf, c->last_error, sizeof c->last_error);
    if (n == RTLS_WANT_READ) return 0;
    if (n == RTLS_WANT_WRITE) {
        *want_write = true;
        return 0;
    }
    if (n < 0) return -1;
    if (redisReaderFeed(c->ctx->reader, buf, (size_t)n) != REDIS_OK) {
        set_error(c, "protocol error");
        return -1;
    }
    return 1;
}

/* Wait for the socket (or sigfd) by deadline. RC_OK readable/writable,
 * RC_SIGNAL, RC_ERR (timed out, error; last_error set). */
static int wait_socket(rconn_t *c, int sigfd, bool want_write, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            set_error(c, "timed out waiting for a reply");
            return RC_ERR;
        }
        struct pollfd p[2] = {{.fd = c->ctx->fd, .events = want_write ? POLLOUT : POLLIN},
                              {.fd = sigfd, .events = POLLIN}};
        int r = poll(p, sigfd >= 0 ? 2 : 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            set_error(c, strerror(errno));
            return RC_ERR;
        }
        if (sigfd >= 0 && (p[1].revents & POLLIN)) return RC_SIGNAL;
        if (p[0].revents) return RC_OK;
    }
}

/* rnode_read on a live connection: on RC_ERR last_error says why. */
static int io_read(rconn_t *c, int sigfd, int timeout_ms, redisReply **out)
{
    *out = NULL;
    if (flush_out(c) < 0) return RC_ERR;
    if (timeout_ms < 0) timeout_ms = (int)conf_timeout_ms(c);
    int64_t deadline = mono_ms() + timeout_ms;
    bool want_write = false, starved = false;
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(c->ctx, &reply) != REDIS_OK) {
            set_error(c, c->ctx->errstr[0] ? c->ctx->errstr : "protocol error");
            return RC_ERR;
        }
        if (reply) {
            *out = reply;
            return RC_OK;
        }
        /* Bytes OpenSSL already took off the socket would never wake poll:
         * read them first. But once a read found no whole record among
         * them (a record cut short), only the socket can bring the rest, so
         * wait for it: the deadline and sigfd are checked there. */
        if (!(c->ssl && !want_write && !starved && SSL_has_pending(c->ssl))) {
            int w = wait_socket(c, sigfd, want_write, deadline);
            if (w != RC_OK) return w;
        }
        int got = fill_reader(c, &want_write);
        if (got < 0) return RC_ERR;
        starved = got == 0;
    }
}

/* One command during the connection handshake. The reply, or NULL with
 * last_error set. */
static redisReply *hs_command(rconn_t *c, int argc, const char **argv)
{
    if (argc) redisAppendCommandArgv(c->ctx, argc, argv, NULL); /* 0: already sent */
    redisReply *r;
    uint64_t trips = c->round_trips; /* the count is of the caller's batches */
    int rv = io_read(c, -1, -1, &r);
    c->round_trips = trips;
    return rv == RC_OK ? r : NULL;
}

/* ------------------------------------------------------------ connecting */

/* The password: password_env, else password_file's content, else the one a
 * Laravel app's config gave (laravel = ...). 1 with *pw set, 0 for none, -1
 * with last_error set. */
static int password_of(rconn_t *c, const char **pw)
{
    *pw = c->conf.file_password ? c->conf.file_password : c->conf.password;
    if (c->conf.password_env) {
        *pw = getenv(c->conf.password_env);
        if (!*pw) {
            snprintf(c->last_error, sizeof c->last_error, "environment variable %s is not set",
                     c->conf.password_env);
            return -1;
        }
    }
    return *pw ? 1 : 0;
}

/* Write n bytes by the connection's timeout. -1 with last_error set. */
static int send_all(rconn_t *c, const char *buf, size_t n)
{
    int64_t deadline = mono_ms() + conf_timeout_ms(c);
    if (c->ssl) return rtls_write(c->ssl, buf, n, deadline, c->last_error, sizeof c->last_error) < 0 ? -1 : 0;
    while (n) {
        ssize_t w = write(c->ctx->fd, buf, n);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_socket(c, -1, true, deadline) != RC_OK) return -1;
        } else if (!(w < 0 && errno == EINTR)) {
            set_error(c, w < 0 ? strerror(errno) : "write failed");
            return -1;
        }
    }
    return 0;
}

/* A handshake command that carries a password: no copy of it is left in
 * memory hiredis frees (its formatted command, its output buffer), so no
 * process forked later (a worker) finds one there. */
static redisReply *hs_secret_command(rconn_t *c, int argc, const char **argv)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    if (len < 0 || flush_out(c) < 0) {
        if (len < 0) set_error(c, "out of memory");
        free(cmd);
        return NULL;
    }
    int w = send_all(c, cmd, (size_t)len);
    explicit_bzero(cmd, (size_t)len);
    free(cmd);
    return w < 0 ? NULL : hs_command(c, 0, NULL);
}

/* AUTH [username] password: the error names the user, never the password. */
static int authenticate(rconn_t *c)
{
    const char *pw;
    int have = password_of(c, &pw);
    if (have <= 0) return have;
    const char *argv[3] = {"AUTH", c->conf.username ? c->conf.username : pw, pw};
    redisReply *r = hs_secret_command(c, c->conf.username ? 3 : 2, argv);
    if (!r) return -1;
    int rv = r->type == REDIS_REPLY_ERROR ? -1 : 0;
    if (rv < 0)
        snprintf(c->last_error, sizeof c->last_error, "AUTH%s%s failed: %s",
                 c->conf.username ? " as " : "", c->conf.username ? c->conf.username : "", r->str);
    freeReplyObject(r);
    return rv;
}

static int select_db(rconn_t *c)
{
    if (!c->conf.db) return 0;
    char db[16];
    snprintf(db, sizeof db, "%d", c->conf.db);
    const char *argv[2] = {"SELECT", db};
    redisReply *r = hs_command(c, 2, argv);
    if (!r) return -1;
    int rv = r->type == REDIS_REPLY_ERROR ? -1 : 0;
    if (rv < 0) snprintf(c->last_error, sizeof c->last_error, "SELECT %d failed: %s", c->conf.db, r->str);
    freeReplyObject(r);
    return rv;
}

/* Behind Sentinel: the server must be the primary now (ROLE), not a
 * replica a failover demoted or has not yet promoted. */
static int check_primary(rconn_t *c)
{
    if (!c->conf.sentinel.addrs) return 0;
    const char *argv[1] = {"ROLE"};
    redisReply *r = hs_command(c, 1, argv);
    if (!r) return -1;
    char role[200];
    int rv = sentinel_role_reply(r, role, sizeof role);
    freeReplyObject(r);
    if (rv == 1) return 0;
    set_errorf(c, "%s:%d is %s%s, not the primary of %s", c->cur_host, c->cur_port, rv == 0 ? "a " : "", role, c->conf.sentinel.master_name);
    return -1;
}

static int handshake(rconn_t *c)
{
    if (authenticate(c) < 0 || select_db(c) < 0 || check_primary(c) < 0) return -1;
    return 0;
}

static int open_tls(rconn_t *c)
{
    int64_t deadline = mono_ms() + conf_timeout_ms(c);
    if (!c->ssl_ctx) {
        c->ssl_ctx = rtls_ctx_new(&c->conf.tls, c->last_error, sizeof c->last_error);
        if (!c->ssl_ctx) return -1;
        if (!c->conf.tls.verify && !c->quiet)
            log_warn("redis %s: tls verify = false: the server's certificate is not checked", c->name);
    }
    int fd = rtls_tcp_connect(c->cur_host, c->cur_port, deadline, c->last_error, sizeof c->last_error);
    if (fd < 0) return -1;
    const char *name = c->conf.tls.server_name ? c->conf.tls.server_name : c->cur_host;
    c->ssl = rtls_handshake(c->ssl_ctx, fd, name, deadline, c->last_error, sizeof c->last_error);
    if (c->ssl) c->ctx = redisConnectFd(fd); /* only the reader and the output buffer are used */
    if (!c->ctx) {
        if (c->ssl) set_error(c, "cannot allocate a connection");
        if (c->ssl) SSL_free(c->ssl);
        c->ssl = NULL;
        close(fd);
        return -1;
    }
    return 0;
}

static int open_plain(rconn_t *c)
{
    struct timeval tv = {(time_t)c->conf.timeout,
                         (suseconds_t)((c->conf.timeout - (double)(time_t)c->conf.timeout) * 1e6)};
    c->ctx = c->conf.socket ? redisConnectUnixWithTimeout(c->conf.socket, tv)
                            : redisConnectWithTimeout(c->cur_host, c->cur_port, tv);
    if (!c->ctx || c->ctx->err) {
        set_error(c, c->ctx ? c->ctx->errstr : "cannot allocate a connection");
        rnode_close(c);
        return -1;
    }
    if (!c->conf.socket) redisEnableKeepAlive(c->ctx);
    /* Bound every blocking write: a server that accepts connections but
     * never answers must not hang us (reads wait in poll). */
    redisSetTimeout(c->ctx, tv);
    return 0;
}

/* A quiet connection to the sentinel at addr, with the connection's TLS
 * and its timeout shared among the sentinels (a black-holed one leaves time
 * to ask the others, and a lookup stays bounded). NULL with err set. */
static rconn_t *sentinel_conn(const rconn_t *c, const char *addr, char *err, size_t errn)
{
    const redis_sentinel_t *st = &c->conf.sentinel;
    double t = c->conf.timeout / st->naddrs;
    redis_conf_t sc = {.name = "sentinel", .prefix = "", .timeout = t < 0.1 ? 0.1 : t,
                       .username = st->username, .password_env = st->password_env,
                       .file_password = st->file_password, .tls = c->conf.tls};
    char shost[256];
    if (sentinel_parse_addr(addr, SENTINEL_DEFAULT_PORT, shost, sizeof shost, &sc.port, err, errn) < 0)
        return NULL;
    sc.host = shost;
    rconn_t *s = rnode_new(&sc);
    s->quiet = true;
    return s;
}

/* Ask sentinel s where the primary is: 1 found, 0 unknown name, -1 (err
 * set) it could not be asked (s is then closed). */
static int sentinel_query(rconn_t *s, const char *master_name, char *host, size_t hn, int *port, char *err,
                          size_t errn)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", master_name};
    redisReply *r = rnode_call(s, 3, argv, NULL);
    int rv = r ? sentinel_master_reply(r, host, hn, port, err, errn) : -1;
    if (!r) snprintf(err, errn, "%s", s->last_error);
    if (r) freeReplyObject(r);
    return rv;
}

/* Ask one sentinel for the primary's address: 1 found, 0 unknown name,
 * -1 (err set) the sentinel could not be asked. */
static int ask_sentinel(rconn_t *c, const char *addr, char *host, size_t hn, int *port, char *err,
                        size_t errn)
{
    rconn_t *s = sentinel_conn(c, addr, err, errn);
    if (!s) return -1;
    int rv = sentinel_query(s, c->conf.sentinel.master_name, host, hn, port, err, errn);
    rnode_free(s);
    return rv;
}

/* Where to connect: the configured host, or the primary the first sentinel
 * to answer names (starting with the one that answered last). */
static int resolve_primary(rconn_t *c)
{
    const redis_sentinel_t *st = &c->conf.sentinel;
    if (!st->addrs) return 0;
    char err[300] = "";
    int last = 0, lastr = 0;
    for (int i = 0; i < st->naddrs; i++) {
        int k = (c->sentinel_good + i) % st->naddrs;
        char host[256];
        int port, r = ask_sentinel(c, st->addrs[k], host, sizeof host, &port, err, sizeof err);
        if (r == 1) {
            if (!c->quiet && (strcmp(host, c->cur_host) || port != c->cur_port))
                log_info("redis %s: Sentinel %s names %s:%d as the primary of %s", c->name,
                         st->addrs[k], host, port, st->master_name);
            snprintf(c->cur_host, sizeof c->cur_host, "%s", host);
            c->cur_port = port;
            c->sentinel_good = k;
            return 0;
        }
        last = k;
        lastr = r;
    }
    set_errorf(c, "no sentinel named the primary of %s (last: %s: %s)", st->master_name,
               st->addrs[last], lastr == 0 ? "does not know the name" : err);
    return -1;
}

int rnode_connect(rconn_t *c)
{
    if (resolve_primary(c) < 0) return -1;
    int r = c->conf.tls.enabled ? open_tls(c) : open_plain(c);
    if (r < 0 || handshake(c) < 0) {
        /* the sentinel that named it (a stale one?) is asked last next time */
        if (c->conf.sentinel.addrs) c->sentinel_good = (c->sentinel_good + 1) % c->conf.sentinel.naddrs;
        rnode_close(c);
        return -1;
    }
    return 0;
}

/* rconn_confirm_primary for one server. */
static int confirm_primary(rconn_t *c)
{
    const redis_sentinel_t *st = &c->conf.sentinel;
    if (!st->addrs || !c->ctx) return 0;
    char err[300] = "", host[256];
    int port;
    if (!c->watch) {
        c->watch_k = c->sentinel_good;
        c->watch = sentinel_conn(c, st->addrs[c->watch_k], err, sizeof err);
        if (!c->watch) return -1;
    }
    if (sentinel_query(c->watch, st->master_name, host, sizeof host, &port, err, sizeof err) != 1) {
        /* this one cannot tell now: the next one is asked next time */
        rnode_free(c->watch);
        c->watch = NULL;
        c->sentinel_good = (c->watch_k + 1) % st->naddrs;
        return -1;
    }
    if (!strcmp(host, c->cur_host) && port == c->cur_port) return 0;
    if (!c->quiet)
        log_warn("redis %s: Sentinel %s names %s:%d as the primary of %s now, no longer %s:%d (which still "
                 "answers as one): reconnecting",
                 c->name, st->addrs[c->watch_k], host, port, st->master_name, c->cur_host, c->cur_port);
    /* the next connect asks that sentinel first; the watch is made again
     * on the one that named the server it lands on */
    c->sentinel_good = c->watch_k;
    rnode_free(c->watch);
    c->watch = NULL;
    rnode_close(c);
    return 1;
}

/* ------------------------------------------------------------ commands */

void rnode_append(rconn_t *c, int argc, const char **argv, const size_t *lens)
{
    if (c->ctx) redisAppendCommandArgv(c->ctx, argc, argv, lens);
}

int rnode_send(rconn_t *c)
{
    return flush_out(c);
}

int rnode_read(rconn_t *c, int sigfd, int timeout_ms, redisReply **out)
{
    *out = NULL;
    if (!c->ctx) {
        if (!c->last_error[0]) set_error(c, "not connected");
        return RC_ERR;
    }
    return io_read(c, sigfd, timeout_ms, out);
}

redisReply *rnode_call(rconn_t *c, int argc, const char **argv, const size_t *lens)
{
    if (!c->ctx && rnode_connect(c) < 0) return NULL;
    rnode_append(c, argc, argv, lens);
    redisReply *r;
    if (rnode_read(c, -1, -1, &r) != RC_OK) {
        rnode_close(c);
        return NULL;
    }
    return r;
}

/* One server answers for every slot. */
static int slot_node(const rconn_t *c, int slot)
{
    (void)c;
    (void)slot;
    return 0;
}

const rconn_type_t rnode_type = {
    .connect = rnode_connect,
    .close = rnode_close,
    .append = rnode_append,
    .send = rnode_send,
    .read = rnode_read,
    .describe = describe,
    .slot_node = slot_node,
    .confirm_primary = confirm_primary,
};
