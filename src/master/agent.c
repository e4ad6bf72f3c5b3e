/*
 * agent.c - see agent.h.
 */
#include "master/agent.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define AGENT_READS_PER_EVENT 16
#define AGENT_HELLO_GRACE_MS 60000  /* beyond the request timeout: the zygote may be booting the app */

void agent_init(agent_t *a)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->epfd = -1;
    a->next_id = 1;
}

void agent_batches_free(agent_batches_t *b)
{
    for (int i = 0; i < b->nretry_jobs; i++) free(b->retry_jobs[i]);
    free(b->retry_jobs);
    for (int i = 0; i < b->nretry_known; i++) free(b->retry_known[i]);
    free(b->retry_known);
    free(b->json);
    free(b->retry);
    free(b->last_retry);
    memset(b, 0, sizeof *b);
}

void agent_close(agent_t *a)
{
    if (a->fd >= 0) {
        if (a->epfd >= 0) epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->fd, NULL);
        close(a->fd);
    }
    a->fd = -1;
    a->pid = 0;
    a->pending_id = 0;
    a->todo = 0;
    free(a->buf);
    a->buf = NULL;
    a->len = 0;
}

/* Lost: closed, and asked for again after the backoff (1 s doubling to
 * RESPAWN_MAX_S while agents keep going within RESPAWN_HEALTHY_MS). */
static void lost(agent_t *a, const char *pool, const char *why, int64_t now)
{
    exit_facts_t f = {.lived_ms = now - a->started_ms, .clean = false, .did_work = false};
    int delay_s;
    respawn_after_exit(&a->respawn, &f, &delay_s);
    a->not_before_ms = now + (int64_t)delay_s * 1000;
    a->restarts++;
    char who[32] = "";
    if (a->pid > 0) snprintf(who, sizeof who, " (pid %d)", (int)a->pid);
    log_warn("pool %s: its app agent%s %s; asking for a new one in %d s", pool, who, why, delay_s);
    agent_close(a);
}

/* The request datagram, with the agent's end as SCM_RIGHTS. */
static int send_request(int zfd, int theirs)
{
    char text[64];
    int n = snprintf(text, sizeof text, "agent 1 %d\n", (int)getpid());
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct iovec iov = {.iov_base = text, .iov_len = (size_t)n};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &theirs, sizeof theirs);
    return sendmsg(zfd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static void start(agent_t *a, const char *pool, int zfd, uint64_t gen, int epfd, int64_t now)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        log_error("pool %s: no socket for its app agent: %s", pool, strerror(errno));
        a->not_before_ms = now + 1000;
        return;
    }
    int rv = send_request(zfd, sv[1]);
    int err = errno;
    close(sv[1]);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = sv[0]};
    if (rv < 0 || fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, sv[0], &ev) < 0) {
        if (rv < 0) log_warn("pool %s: cannot ask its zygote for an app agent: %s", pool, strerror(err));
        close(sv[0]);
        a->not_before_ms = now + 1000;
        return;
    }
    a->fd = sv[0];
    a->epfd = epfd;
    a->gen = gen;
    a->started_ms = now;
    a->pending_id = 0;
}

void agent_maintain(agent_t *a, const char *pool, int zfd, uint64_t gen, int epfd, int64_t now, int64_t timeout_ms)
{
    if (a->fd >= 0 && a->gen != gen) agent_close(a); /* a new generation: an agent of its zygote */
    if (a->fd >= 0 && a->pending_id && now - a->sent_ms > timeout_ms)
        lost(a, pool, "did not answer in time", now);
    else if (a->fd >= 0 && !a->pid && now - a->started_ms > timeout_ms + AGENT_HELLO_GRACE_MS)
        lost(a, pool, "never said hello", now); /* its zygote still boots the app, or is stuck */
    if (a->fd < 0 && zfd >= 0 && now >= a->not_before_ms) start(a, pool, zfd, gen, epfd, now);
}

/* Send a request line (freed here) of op; -1 when it could not go. */
static int send_line(agent_t *a, const char *pool, char *line, enum agent_op op, int nq, int64_t now)
{
    if (!line) return -1;
    size_t n = strlen(line);
    ssize_t w = send(a->fd, line, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    free(line);
    if (w != (ssize_t)n) { /* a line is small: a short write means a stuck agent */
        lost(a, pool, w < 0 && errno != EAGAIN ? "has gone" : "does not read its requests", now);
        return -1;
    }
    a->pending_id = a->next_id++;
    a->pending_op = op;
    a->pending_nq = nq;
    a->sent_ms = now;
    return 0;
}

int agent_ask(agent_t *a, const char *pool, enum agent_op op, const char *restart_key, const char *const *queues,
              int nq, int64_t now)
{
    if (a->fd < 0 || !a->pid || a->pending_id) return -1; /* none, no hello yet, or one in flight */
    return send_line(a, pool, agent_wire_request(a->next_id, op, restart_key, queues, nq), op, nq, now);
}

int agent_ask_app(agent_t *a, const char *pool, const char *req, int64_t now)
{
    if (a->fd < 0 || !a->pid || a->pending_id) return -1;
    return send_line(a, pool, agent_wire_app_request(a->next_id, req), AGENT_OP_APP, 0, now);
}

bool agent_owns(const agent_t *a, int fd)
{
    return a->fd >= 0 && a->fd == fd;
}

/* Why a reply to the request in flight is not taken, in err ("" when it is). */
static void reply_fault(const agent_t *a, const char *line, size_t len, agent_reply_t *out, char *err, size_t errlen)
{
    err[0] = '\0';
    if (!a->pending_id) {
        snprintf(err, errlen, "unasked");
        return;
    }
    if (agent_wire_parse(line, len, a->pending_op, a->pending_nq, out, err, errlen) < 0) {
        if (!err[0]) snprintf(err, errlen, "malformed");
        return;
    }
    if (out->id != a->pending_id) {
        snprintf(err, errlen, "the reply to request %llu, not %llu", (unsigned long long)out->id,
                 (unsigned long long)a->pending_id);
        agent_reply_free(out); /* parsed: its lists are on the heap */
    }
}

/* One complete line: the hello, or the reply to the request in flight.
 * 1: a reply in *out; 0: the hello; -1: the agent is dropped. */
static int take_line(agent_t *a, const char *pool, const char *line, size_t len, agent_reply_t *out, int64_t now)
{
    char err[128] = "";
    if (!a->pid) {
        int rv = agent_wire_parse(line, len, AGENT_OP_HELLO, 0, out, err, sizeof err);
        if (rv < 0 || !out->ok) {
            char why[400];
            snprintf(why, sizeof why, "said no valid hello (%.300s)", rv < 0 ? err : out->error);
            lost(a, pool, why, now);
            return -1;
        }
        a->pid = out->pid;
        snprintf(a->laravel, sizeof a->laravel, "%s", out->laravel);
        log_info("pool %s: its app agent (pid %d) holds the app (Laravel %s)", pool, (int)a->pid,
                 a->laravel[0] ? a->laravel : "?");
        return 0;
    }
    reply_fault(a, line, len, out, err, sizeof err);
    if (err[0]) {
        char why[400];
        snprintf(why, sizeof why, "sent a reply qpool does not take (%.300s)", err);
        lost(a, pool, why, now);
        return -1;
    }
    a->pending_id = 0;
    a->replies++;
    return 1;
}

/* The complete lines in the buffer; -1 when the agent was dropped. */
static int take_lines(agent_t *a, const char *pool, agent_reply_t *out, int max, int *got, int64_t now)
{
    char *nl;
    while (a->fd >= 0 && (nl = memchr(a->buf, '\n', a->len))) {
        size_t len = (size_t)(nl - a->buf);
        agent_reply_t r;
        int rv = take_line(a, pool, a->buf, len, &r, now);
        if (rv < 0) return -1;
        if (rv == 1 && *got < max)
            out[(*got)++] = r;
        else if (rv == 1)
            agent_reply_free(&r);
        memmove(a->buf, nl + 1, a->len - len - 1);
        a->len -= len + 1;
    }
    if (a->len >= AGENT_LINE_MAX) {
        lost(a, pool, "sent a line longer than qpool takes", now);
        return -1;
    }
    return 0;
}

int agent_read(agent_t *a, const char *pool, agent_reply_t *out, int max, int64_t now)
{
    int got = 0;
    if (!a->buf) a->buf = xmalloc(AGENT_LINE_MAX);
    for (int i = 0; i < AGENT_READS_PER_EVENT && a->fd >= 0; i++) {
        ssize_t n = recv(a->fd, a->buf + a->len, AGENT_LINE_MAX - a->len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        if (n <= 0) {
            /* an agent killed before it read a request resets the socket */
            lost(a, pool, n == 0 || errno == ECONNRESET ? "has gone" : "cannot be read", now);
            break;
        }
        a->len += (size_t)n;
        if (take_lines(a, pool, out, max, &got, now) < 0) break;
    }
    return got;
}
