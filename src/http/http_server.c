/*
 * http_server.c - the HTTP process (see http.h): libmicrohttpd on the
 * listener the master bound, one polling thread, every request bounded in
 * size, time and number, and the token checked before any handler runs.
 * Which connections are kept (per prefix, the request deadline, who makes
 * room for a newcomer) is http_conns.c's; the main thread waits for
 * SIGTERM (or the master's death, which delivers it), closes the
 * connections past their deadline meanwhile, and stops the daemon.
 */
#include "http/http.h"
#include "redis/failed.h"
#include "http/http_access.h"
#include "http/http_api.h"
#include "http/http_conns.h"
#include "http/http_health.h"
#include "http/http_work.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HTTP_MEMORY_LIMIT (32 * 1024)  /* per connection: request line and headers (MHD answers 431/414) */
#define HTTP_ANSWER_GRACE_MS 2000      /* a reply still being read after this may give its place up */
#define HTTP_SWEEP_MS 250              /* how often the request deadline is checked */
#define HTTP_REPORT_MS 60000          /* how often what the limits did is logged, if anything */

/* What the connection limits did since the last report. */
typedef struct {
    int expired;               /* closed: no whole request within header_timeout (never served: idle
                                  keep-alives are closed too, but not counted) */
    int displaced;             /* closed to make room for a newcomer */
    int refused;               /* no room */
    int64_t since_ms;
} conn_report_t;

typedef struct {
    http_ctx_t api;
    const char *token;         /* NULL: none configured */
    bool loopback;             /* the listener is loopback or a Unix socket */
    bool unix_socket;
    const http_conf_t *conf;   /* read_without_token, a Unix listener's local peers */
    const char *base_path;     /* NULL: none */
    pthread_mutex_t conns_lock; /* conns and report: MHD's thread and the main thread's sweep */
    conns_t conns;
    conn_report_t report;
    int header_timeout;
    http_health_t health;      /* /healthz, from memory */
    http_work_t work;          /* what needs the master or Redis: off this thread */
} server_t;

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
    if (r->code == 429) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
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
    http_job_t *job;           /* queued on the worker (its connection suspended until done) */
} req_state_t;

/* ------------------------------------------------ connections kept */

/* A connection's socket context is its slot in conns, plus 1 (0: none). */
static int conn_slot(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (int)(intptr_t)ci->socket_context - 1 : -1;
}

static void peer_prefix(struct MHD_Connection *c, conn_prefix_t *p)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    socklen_t len = !sa ? 0
                    : sa->sa_family == AF_INET  ? (socklen_t)sizeof(struct sockaddr_in)
                    : sa->sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
                                                : 0;
    conn_prefix_of(sa, len, p);
}

/* Before libmicrohttpd takes a connection: refuse it when its prefix (or
 * the whole) is full and nobody can make room. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t len)
{
    server_t *s = cls;
    conn_prefix_t p;
    int victim;
    conn_prefix_of(addr, len, &p);
    pthread_mutex_lock(&s->conns_lock);
    int room = conns_room(&s->conns, &p, mono_ms(), &victim);
    if (room < 0) s->report.refused++;
    pthread_mutex_unlock(&s->conns_lock);
    return room < 0 ? MHD_NO : MHD_YES;
}

/* Shut down rather than close: the descriptor stays libmicrohttpd's, which
 * sees the end of the stream and closes it in its own thread. Called with
 * conns_lock held, so the connection is still open (its slot is released,
 * under the same lock, before libmicrohttpd closes it). */
static void shut(int fd)
{
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

/* Whether the connection on fd, just accepted, is asking for /healthz (or
 * base_path/healthz): its first bytes, peeked (the request stays for
 * libmicrohttpd to read). */
static bool asks_healthz(const server_t *s, int fd)
{
    char b[300];
    ssize_t n = fd < 0 ? -1 : recv(fd, b, sizeof b - 1, MSG_PEEK | MSG_DONTWAIT);
    if (n <= 0) return false;
    b[n] = '\0';
    const char *p = !strncmp(b, "GET ", 4) ? b + 4 : !strncmp(b, "HEAD ", 5) ? b + 5 : NULL;
    size_t bl = s->base_path ? strlen(s->base_path) : 0;
    if (p && bl && !strncmp(p, s->base_path, bl)) p += bl;
    return p && !strncmp(p, "/healthz", 8) && (p[8] == ' ' || p[8] == '?');
}

static void conn_event(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode what)
{
    server_t *s = cls;
    pthread_mutex_lock(&s->conns_lock);
    if (what == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? (int)ci->connect_fd : -1, displaced;
        conn_prefix_t p;
        peer_prefix(c, &p);
        int i = conns_admit(&s->conns, &p, fd, mono_ms(), &displaced);
        if (i >= 0 && asks_healthz(s, fd)) conns_probe(&s->conns, i);
        shut(displaced);
        s->report.displaced += displaced >= 0;
        s->report.refused += i < 0;
        if (i < 0)
            shut(fd); /* the sweep made no room since accept_policy: rare */
        else
            *ctx = (void *)(intptr_t)(i + 1);
    } else if (*ctx) {
        conns_release(&s->conns, (int)(intptr_t)*ctx - 1);
        *ctx = NULL;
    }
    pthread_mutex_unlock(&s->conns_lock);
}

/* Once a minute at most, and only when the limits had to act: what they
 * did (a slow-loris flood shows here). Called with conns_lock held. */
static void report_limits(server_t *s, int64_t now, conn_report_t *out)
{
    *out = (conn_report_t){0};
    if (now - s->report.since_ms < HTTP_REPORT_MS) return;
    *out = s->report;
    s->report = (conn_report_t){.since_ms = now};
}

/* Close the connections that did not send their request in time. */
static void sweep(server_t *s)
{
    int fds[32], n, fresh;
    conn_report_t r;
    pthread_mutex_lock(&s->conns_lock);
    int64_t now = mono_ms();
    do {
        n = conns_expired(&s->conns, now, fds, (int)ARRAY_LEN(fds), &fresh);
        for (int i = 0; i < n; i++) shut(fds[i]);
        s->report.expired += fresh;
    } while (n == (int)ARRAY_LEN(fds));
    report_limits(s, now, &r);
    pthread_mutex_unlock(&s->conns_lock);
    if (r.expired || r.displaced || r.refused)
        log_warn("in the last %lld s, %d connection(s) closed for not sending a whole request within "
                 "header_timeout (%d s), %d closed to make room for newer ones, %d refused (every place busy)",
                 (long long)((now - r.since_ms) / 1000), r.expired, s->header_timeout, r.displaced, r.refused);
}

static void conn_phase(server_t *s, struct MHD_Connection *c, bool answered)
{
    int i = conn_slot(c);
    if (i < 0) return;
    pthread_mutex_lock(&s->conns_lock);
    if (answered)
        conns_answered(&s->conns, i, mono_ms());
    else
        conns_received(&s->conns, i, mono_ms());
    pthread_mutex_unlock(&s->conns_lock);
}

/* ------------------------------------------------------ requests */

static void request_done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why)
{
    (void)why;
    conn_phase(cls, c, true); /* kept alive: it waits for its next request, under the deadline again */
    req_state_t *st = *state;
    if (!st) return;
    sbuf_free(&st->body);
    http_job_free(st->job); /* done: a connection is never closed while it is suspended */
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

/* ------------------------------------------------ the worker's requests */

static enum MHD_Result copy_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    http_job_add_arg(cls, key, value);
    return MHD_YES;
}

/* Hand j to the worker: the connection is suspended until it is done
 * (answer() then sends its reply). 429 at once when its prefix has its
 * share of the worker's queue. */
static enum MHD_Result defer(server_t *s, struct MHD_Connection *c, req_state_t *st, http_job_t *j)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? (int)ci->connect_fd : -1;
    peer_prefix(c, &j->prefix);
    if (!http_work_room(&s->work, &j->prefix)) {
        http_job_free(j);
        http_reply_t r = {0};
        http_reply_error(&r, 429, "too many requests from this address are waiting; try again in a second");
        return send_reply(c, &r);
    }
    j->conn = c;
    st->job = j;
    MHD_suspend_connection(c); /* before the worker can resume it */
    http_work_submit(&s->work, j);
    return MHD_YES;
}

static enum MHD_Result defer_get(server_t *s, struct MHD_Connection *c, req_state_t *st, const char *url, bool full)
{
    http_job_t *j = http_job_new(url);
    j->full = full;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, copy_arg, j);
    return defer(s, c, st, j);
}

/* The worker's reply, once resumed. */
static enum MHD_Result job_reply(struct MHD_Connection *c, req_state_t *st)
{
    if (!st->job->done) return MHD_YES; /* not resumed by the worker: nothing to say yet */
    http_reply_t r = st->job->reply;
    st->job->reply = (http_reply_t){0}; /* send_reply takes the body */
    return send_reply(c, &r);
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

static enum MHD_Result finish_post(server_t *s, struct MHD_Connection *c, const char *url, req_state_t *st)
{
    http_reply_t rr = {0}, *r = &rr;
    const char *type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    cJSON *body = NULL;
    if (st->too_big) {
        http_reply_error(r, 413, "an action's body is at most %d bytes", ACTION_BODY_MAX);
        return send_reply(c, r);
    }
    if (st->body.len) {
        if (!type || strncmp(type, "application/json", 16)) {
            http_reply_error(r, 415, "an action's body is JSON (Content-Type: application/json)");
            return send_reply(c, r);
        }
        body = cJSON_ParseWithLength(st->body.data, st->body.len);
        if (!cJSON_IsObject(body)) {
            cJSON_Delete(body);
            http_reply_error(r, 400, "an action's body is a JSON object");
            return send_reply(c, r);
        }
    }
    http_job_t *j = http_job_new(url);
    j->post = true;
    j->body = body;
    who_asked(c, j->who, sizeof j->who);
    return defer(s, c, st, j);
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

static enum MHD_Result handle(server_t *s, struct MHD_Connection *c, const char *url, const char *method,
                              const char *upload, size_t *upload_size, void **state)
{
    http_reply_t r = {0};
    int code;
    bool full = false;
    url = strip_base(s, url);
    if (!url) return redirect_to_base(s, c);
    char del[512]; /* DELETE of an action that takes it: an action of its own path (http_actions.c) */
    if (!strcmp(method, MHD_HTTP_METHOD_DELETE)) {
        int n = snprintf(del, sizeof del, HTTP_DELETE_PREFIX "%s", url);
        if (n > 0 && (size_t)n < sizeof del && http_action_exists(del)) url = del, method = MHD_HTTP_METHOD_POST;
    }
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
        return finish_post(s, c, url, st);
    if (st->body_seen)
        http_reply_error(&r, 413, "this endpoint takes no request body");
    else if ((code = may_read(s, c, url, &full)) == 401)
        http_reply_error(&r, 401, "%s", unauthorized_why(s, c, url));
    else if (code == 403)
        http_reply_error(&r, 403, "a Host that is not this machine's needs the token (DNS rebinding guard)");
    else if (!strcmp(url, "/healthz"))
        http_health_reply(&s->health, mono_ms(), &r); /* from memory: never behind another request */
    else if (http_api_exists(url))
        return defer_get(s, c, st, url, full);
    else if (!http_static(url, &r))
        http_reply_error(&r, 404, "no such endpoint");
    return send_reply(c, &r);
}

/* Once the request is whole (the last call, before the handler runs, so
 * its time does not count), or refused before its body, the deadline stops
 * for this connection until it waits for its next request. */
static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)version;
    req_state_t *st = *state;
    if (st && st->job) return job_reply(c, st);
    bool whole = *state && !*upload_size;
    if (whole) conn_phase(cls, c, false);
    enum MHD_Result rv = handle(cls, c, url, method, upload, upload_size, state);
    if (!whole && MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS)) conn_phase(cls, c, false);
    return rv;
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
    /* A quarter of the places per address (a Unix socket's peers are all
     * alike: no such share). libmicrohttpd's own limit leaves room for
     * the connections displaced but not closed yet; conns keeps the count. */
    int share = hc->is_unix ? 0 : hc->max_connections > 4 ? hc->max_connections / 4 : 1;
    conns_init(&s->conns, hc->max_connections, share, (int64_t)hc->header_timeout * 1000, HTTP_ANSWER_GRACE_MS);
    return MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG, 0, accept_policy, s,
        answer, s,
        MHD_OPTION_LISTEN_SOCKET, listen_fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->conns.nslots,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)hc->timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY_LIMIT,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, s,
        MHD_OPTION_NOTIFY_CONNECTION, conn_event, s,
        MHD_OPTION_END);
}

/* Until SIGTERM (SIGHUP alone changes nothing: the master restarts us for
 * a new config), sweeping the request deadline meanwhile. */
static void serve_until_told(server_t *s, const sigset_t *set)
{
    const struct timespec tick = {0, HTTP_SWEEP_MS * 1000000L};
    for (;;) {
        int sig = sigtimedwait(set, NULL, &tick);
        if (sig < 0 && errno != EAGAIN && errno != EINTR) return;
        if (sig < 0)
            sweep(s);
        else if (sig != SIGHUP)
            return;
    }
}

/* The API's state: the master's channel, Redis, the health check and the
 * worker (started with SIGTERM already blocked: their threads keep it so). */
static void start_api(server_t *s, const http_wire_t *w, int ctl_fd)
{
    const http_conf_t *hc = &w->http;
    s->api.metrics_retention = w->metrics_retention;
    s->api.job_history_size = w->job_history_size;
    s->api.ctl_fd = ctl_fd;
    sbuf_init(&s->api.ctl_in);
    pthread_mutex_init(&s->api.ctl_lock, NULL);
    pthread_mutex_init(&s->api.lock, NULL);
    s->api.rc = w->no_redis ? NULL : rconn_new(&w->redis); /* none: HTTP_NO_REDIS */
    failed_use_queues(w->queues);
    if (s->api.rc && s->api.rc->conf.timeout > 1) s->api.rc->conf.timeout = 1; /* a hung Redis holds a request 1 s at most */
    http_health_start(&s->health, &s->api, w->no_redis ? NULL : &w->redis);
    /* a quarter of an address's share of the connections may wait for the worker */
    int share = hc->is_unix ? hc->max_connections : hc->max_connections / 4;
    http_work_start(&s->work, &s->api, share / 4);
}

static void stop_api(server_t *s)
{
    http_health_stop(&s->health);
    rconn_free(s->api.rc);
    http_api_forget(&s->api);
    failed_use_queues(NULL);
    sbuf_free(&s->api.ctl_in);
}

int http_serve(const http_wire_t *w, int listen_fd, int ctl_fd)
{
    const http_conf_t *hc = &w->http;
    server_t s = {.token = w->token, .loopback = hc->loopback, .unix_socket = hc->is_unix, .conf = hc,
                  .base_path = hc->base_path};
    pthread_mutex_init(&s.conns_lock, NULL);
    s.report.since_ms = mono_ms();
    s.header_timeout = hc->header_timeout;

    /* SIGTERM (from the master, or as its parent-death signal) stays
     * blocked in every thread; the main thread waits for it. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    start_api(&s, w, ctl_fd);

    struct MHD_Daemon *d = start_daemon(&s, hc, listen_fd);
    if (!d) {
        log_error("cannot start the HTTP server on %s", hc->listen);
        http_work_stop(&s.work);
        stop_api(&s);
        return 1;
    }
    log_info("serving HTTP on %s", hc->listen);
    serve_until_told(&s, &set);
    /* Let go of the listener without shutting it down: the master and the
     * next HTTP process share it (a reload keeps it), and MHD_stop_daemon
     * alone would shutdown(2) it for them too. Every connection the worker
     * holds is resumed first (libmicrohttpd cannot stop with one suspended). */
    MHD_socket lfd = MHD_quiesce_daemon(d);
    http_work_stop(&s.work);
    MHD_stop_daemon(d);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    conns_free(&s.conns);
    stop_api(&s);
    return 0;
}
