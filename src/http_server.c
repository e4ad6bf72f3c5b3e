/*
 * http_server.c - the HTTP process (see http.h): libmicrohttpd on the
 * listener the master bound, one polling thread, every request bounded in
 * size, time and number, and the token checked before any handler runs.
 * The main thread only waits for SIGTERM (or the master's death, which
 * delivers it) and stops the daemon.
 */
#include "http.h"
#include "failed.h"
#include "http_access.h"
#include "http_api.h"
#include "log.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HTTP_MEMORY_LIMIT (32 * 1024)  /* per connection: request line and headers (MHD answers 431/414) */

typedef struct {
    http_ctx_t api;
    const char *token;         /* NULL: none configured */
    bool loopback;             /* the listener is loopback or a Unix socket */
    bool unix_socket;
    const http_conf_t *conf;   /* read_without_token, a Unix listener's local peers */
    const char *base_path;     /* NULL: none */
} server_t;

static const char *query_arg(void *req, const char *name)
{
    return MHD_lookup_connection_value(req, MHD_GET_ARGUMENT_KIND, name);
}

/* Constant-time comparison: how long it takes says nothing of the token. */
static bool same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0;
}

static bool has_token(const server_t *s, struct MHD_Connection *c)
{
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    return s->token && auth && !strncmp(auth, "Bearer ", 7) && same_secret(auth + 7, s->token);
}

/* A proxy says it forwarded the request: whoever asked is not here. */
static bool forwarded(struct MHD_Connection *c)
{
    static const char *const hdr[] = {"X-Forwarded-For", "Forwarded", "X-Real-IP"};
    for (size_t i = 0; i < sizeof hdr / sizeof *hdr; i++)
        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, hdr[i])) return true;
    return false;
}

#define PEER_GROUPS_MAX 256

/* A Unix listener's peer, by the credentials the kernel recorded at its
 * connect (SO_PEERCRED, SO_PEERGROUPS): the control socket's rule. */
static bool unix_peer_local(const server_t *s, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct ucred cr;
    socklen_t l = sizeof cr;
    if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0) return false;
    gid_t groups[PEER_GROUPS_MAX];
    socklen_t gl = sizeof groups;
    if (getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) < 0) gl = 0;
    return http_peer_local(s->conf, cr.uid, cr.gid, groups, gl / sizeof *groups);
}

/* Whether a request is local (http_access.h): HTTP_LOCAL, HTTP_NOT_LOCAL,
 * or HTTP_FOREIGN_HOST for a loopback request naming another host (a page
 * elsewhere that rebinds its own name to 127.0.0.1 sends that name). */
static int request_locality(const server_t *s, struct MHD_Connection *c)
{
    if (!s->loopback || forwarded(c)) return HTTP_NOT_LOCAL;
    if (s->unix_socket) return unix_peer_local(s, c) ? HTTP_LOCAL : HTTP_NOT_LOCAL;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    return http_local_host(host) ? HTTP_LOCAL : HTTP_FOREIGN_HOST;
}

/* 200 (*full: more than aggregates), 401 or 403: see http_access.h. */
static int may_read(const server_t *s, struct MHD_Connection *c, const char *path, bool *full)
{
    http_need_t need = http_api_need(path);
    bool token = has_token(s, c);
    int local = need == HTTP_NEED_OPEN || token ? HTTP_NOT_LOCAL : request_locality(s, c);
    return http_may_read(need, (http_read_t)s->conf->read_without_token, token, local, full);
}

/* Nothing but this origin's own files and API: no inline script, no
 * other host, no framing. */
#define CSP "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " \
            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static enum MHD_Result send_reply(struct MHD_Connection *c, http_reply_t *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        r->len, r->body, r->persistent ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        if (!r->persistent) free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy", CSP);
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    if (r->code == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"qpool\"");
    enum MHD_Result rv = MHD_queue_response(c, (unsigned)r->code, resp);
    MHD_destroy_response(resp);
    return rv;
}

#define ACTION_BODY_MAX 4096

/* A request's state between libmicrohttpd's calls. */
typedef struct {
    bool post;
    bool body_seen;            /* a GET sent a body */
    bool too_big;
    sbuf_t body;
} req_state_t;

static void request_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    req_state_t *st = *state;
    if (!st) return;
    sbuf_free(&st->body);
    free(st);
    *state = NULL;
}

/* Who asked, for the log: the peer, and what a proxy says it forwarded
 * (bounded, one line). */
static void who_asked(struct MHD_Connection *c, char *who, size_t n)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char addr[INET6_ADDRSTRLEN] = "local";
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, sizeof addr);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof addr);
    const char *xff = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Forwarded-For");
    snprintf(who, n, "%s%s%.100s (token holder)", addr, xff ? " for " : "", xff ? xff : "");
    for (char *p = who; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

/* Every action needs the token, whatever the listener: a header a page of
 * another origin cannot send without a preflight we never answer, so it is
 * CSRF-safe as well. */
static int may_act(const server_t *s, struct MHD_Connection *c)
{
    if (!s->token) return 403;
    return has_token(s, c) ? 200 : 401;
}

static enum MHD_Result start_post(server_t *s, struct MHD_Connection *c, const char *url, void **state)
{
    http_reply_t r = {0};
    int code;
    if (!http_action_exists(url))
        http_reply_error(&r, 404, "no such action");
    else if ((code = may_act(s, c)) == 403)
        http_reply_error(&r, 403, "actions are off: no token is configured (http.token_file or http.token_env)");
    else if (code == 401)
        http_reply_error(&r, 401, "this action needs the token (Authorization: Bearer ...)");
    else {
        req_state_t *st = xcalloc(1, sizeof *st);
        st->post = true;
        sbuf_init(&st->body);
        *state = st;
        return MHD_YES;
    }
    return send_reply(c, &r); /* refused before any body is read */
}

static void finish_post(server_t *s, struct MHD_Connection *c, const char *url, req_state_t *st, http_reply_t *r)
{
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    cJSON *body = NULL;
    if (st->too_big) {
        http_reply_error(r, 413, "an action's body is at most %d bytes", ACTION_BODY_MAX);
        return;
    }
    if (st->body.len) {
        if (!type || strncmp(type, "application/json", 16)) {
            http_reply_error(r, 415, "an action's body is JSON (Content-Type: application/json)");
            return;
        }
        body = cJSON_ParseWithLength(st->body.data, st->body.len);
        if (!cJSON_IsObject(body)) {
            cJSON_Delete(body);
            http_reply_error(r, 400, "an action's body is a JSON object");
            return;
        }
    }
    char who[200];
    who_asked(c, who, sizeof who);
    http_action(&s->api, url, body, who, r);
    cJSON_Delete(body);
}

/* Behind a proxy that keeps the prefix (proxy_pass without a path), paths
 * arrive as base_path/...; one that strips it sends them as they are. Both
 * work. NULL for base_path itself, which is redirected to base_path/ so
 * that the page's relative links resolve under it. */
static const char *strip_base(const server_t *s, const char *url)
{
    if (!s->base_path) return url;
    size_t n = strlen(s->base_path);
    if (strncmp(url, s->base_path, n)) return url;
    if (url[n] == '\0') return NULL;
    return url[n] == '/' ? url + n : url;
}

static enum MHD_Result redirect_to_base(const server_t *s, struct MHD_Connection *c)
{
    char *loc = xasprintf("%s/", s->base_path);
    http_reply_t r = {.code = 301, .type = "text/plain; charset=utf-8", .body = xstrdup(""), .len = 0};
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, r.body, MHD_RESPMEM_MUST_FREE);
    enum MHD_Result rv = MHD_NO;
    if (resp) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
        rv = MHD_queue_response(c, MHD_HTTP_MOVED_PERMANENTLY, resp);
        MHD_destroy_response(resp);
    } else
        free(r.body);
    free(loc);
    return rv;
}

/* Why a read needs the token, for the dashboard to say. */
static const char *unauthorized_why(const server_t *s, struct MHD_Connection *c, const char *url)
{
    if (s->token && MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION))
        return "the token was refused";
    if (http_api_need(url) == HTTP_NEED_PRIVATE && !s->token)
        return "job records, payloads, exceptions and failed jobs need the token, and none is configured "
               "(http.token_file or http.token_env)";
    if (http_api_need(url) == HTTP_NEED_PRIVATE)
        return "job records, payloads, exceptions and failed jobs need the token (Authorization: Bearer ...)";
    if (forwarded(c)) return "a request a proxy forwarded needs the token (Authorization: Bearer ...)";
    return "this endpoint needs the token (Authorization: Bearer ...)";
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)version;
    server_t *s = cls;
    http_reply_t r = {0};
    int code;
    bool full = false;
    url = strip_base(s, url);
    if (!url) return redirect_to_base(s, c);
    bool get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    if (!*state) {
        /* headers only so far: refuse what no endpoint takes before any
         * body is read, else answer once the request is complete */
        if (!strcmp(method, MHD_HTTP_METHOD_POST)) return start_post(s, c, url, state);
        if (!get) {
            http_reply_error(&r, 405, "method %s is not allowed here", method);
            return send_reply(c, &r);
        }
        req_state_t *st = xcalloc(1, sizeof *st);
        sbuf_init(&st->body);
        *state = st;
        return MHD_YES;
    }
    req_state_t *st = *state;
    if (*upload_size) {
        if (!st->post)
            st->body_seen = true; /* a GET with a body: read and dropped (bounded by the timeout) */
        else if (st->body.len + *upload_size > ACTION_BODY_MAX)
            st->too_big = true;
        else
            sbuf_append(&st->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (st->post)
        finish_post(s, c, url, st, &r);
    else if (st->body_seen)
        http_reply_error(&r, 413, "this endpoint takes no request body");
    else if ((code = may_read(s, c, url, &full)) == 401)
        http_reply_error(&r, 401, "%s", unauthorized_why(s, c, url));
    else if (code == 403)
        http_reply_error(&r, 403, "a Host that is not this machine's needs the token (DNS rebinding guard)");
    else if (!http_static(url, &r) && !http_api_get(&s->api, url, full, query_arg, c, &r))
        http_reply_error(&r, 404, "no such endpoint");
    return send_reply(c, &r);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    log_debug("libmicrohttpd: %s", msg);
}

static struct MHD_Daemon *start_daemon(server_t *s, const http_conf_t *hc, int listen_fd)
{
    return MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL, NULL, answer, s,
        MHD_OPTION_LISTEN_SOCKET, listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)hc->max_connections,
        /* one address cannot hold every connection (a prober elsewhere still gets in) */
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(hc->max_connections > 4 ? hc->max_connections / 4 : 1),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)hc->timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY_LIMIT,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL,
        MHD_OPTION_END);
}

int http_serve(const qconf_t *conf, int listen_fd, int ctl_fd, const char *token)
{
    const http_conf_t *hc = &conf->http;
    server_t s = {.token = token, .loopback = hc->loopback, .unix_socket = hc->is_unix, .conf = hc,
                  .base_path = hc->base_path};
    s.api.conf = conf;
    s.api.ctl_fd = ctl_fd;
    sbuf_init(&s.api.ctl_in);
    pthread_mutex_init(&s.api.lock, NULL);
    const redis_conf_t *rc = config_redis(conf, hc->connection ? hc->connection : "default");
    s.api.rc = rconn_new(rc);
    failed_use_config(conf, rc->name);
    if (s.api.rc->conf.timeout > 1) s.api.rc->conf.timeout = 1; /* a hung Redis holds a request 1 s at most */

    /* SIGTERM (from the master, or as its parent-death signal) stays
     * blocked in every thread; the main thread waits for it. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct MHD_Daemon *d = start_daemon(&s, hc, listen_fd);
    if (!d) {
        log_error("cannot start the HTTP server on %s", hc->listen);
        return 1;
    }
    log_info("serving HTTP on %s", hc->listen);
    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) {
        /* the master restarts us for a new config; SIGHUP alone changes nothing */
    }
    /* Let go of the listener without shutting it down: the master and the
     * next HTTP process share it (a reload keeps it), and MHD_stop_daemon
     * alone would shutdown(2) it for them too. */
    MHD_socket lfd = MHD_quiesce_daemon(d);
    MHD_stop_daemon(d);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    rconn_free(s.api.rc);
    sbuf_free(&s.api.ctl_in);
    return 0;
}
