/*
 * rconn_cluster.c - see rconn_cluster.h.
 */
#include "redis/rconn_cluster.h"
#include "core/log.h"
#include "redis/rcluster.h"
#include "redis/rnode.h"
#include "redis/sentinel.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REDIRECTS 5
#define MAX_KNOWN 64
#define MAX_SCRIPTS 32

typedef struct {
    char host[256];
    int port;
    rconn_t *rc;
    unsigned loads;             /* times the scripts were loaded on this connection */
    int nloaded;                /* how many scripts were registered at the last load */
} rcl_node_t;

typedef struct {
    int node;                   /* where it was sent; -1: its node could not be reached */
    unsigned loads;             /* its node's loads when it was sent (NOSCRIPT) */
    bool asking;                /* sent after ASKING (an ASK redirection): resent so too */
    char *cmd;                  /* the formatted command, for a redirection */
    size_t len;
    redisReply *stash;          /* read early (a redirection to its node) */
} rcl_pending_t;

struct rcluster {
    rcl_node_t *nodes;
    int nnodes;
    int16_t slot_node[RCLUSTER_SLOTS]; /* index into nodes, -1 unknown */
    rcl_pending_t *q;           /* FIFO of commands whose replies are due */
    int qhead, qlen, qcap;
    char *known[MAX_KNOWN];     /* "host:port" to ask for the slot map: seeds, then nodes seen */
    int nknown;
    int good;                   /* the known address that gave the map last: asked first */
};

static struct {
    const char *body;
    char sha[41];
} scripts[MAX_SCRIPTS];
static int nscripts;

void rcl_register_script(const rscript_t *s)
{
    for (int i = 0; i < nscripts; i++)
        if (!strcmp(scripts[i].sha, s->sha)) return;
    if (nscripts == MAX_SCRIPTS) return; /* rconn_script's NOSCRIPT fallback still works */
    scripts[nscripts].body = s->body;
    memcpy(scripts[nscripts].sha, s->sha, sizeof scripts[nscripts].sha);
    nscripts++;
}

static void add_known(struct rcluster *cl, const char *addr)
{
    for (int i = 0; i < cl->nknown; i++)
        if (!strcmp(cl->known[i], addr)) return;
    if (cl->nknown < MAX_KNOWN) cl->known[cl->nknown++] = xstrdup(addr);
}

/* The type's state: the seeds are the first addresses known. */
static void rcl_init(rconn_t *c)
{
    struct rcluster *cl = xcalloc(1, sizeof *cl);
    for (int i = 0; i < c->conf.ncluster; i++) add_known(cl, c->conf.cluster[i]);
    c->cl = cl;
}

static void pending_clear(struct rcluster *cl)
{
    for (int i = 0; i < cl->qlen; i++) {
        rcl_pending_t *p = &cl->q[(cl->qhead + i) % cl->qcap];
        redisFreeCommand(p->cmd);
        if (p->stash) freeReplyObject(p->stash);
    }
    cl->qhead = cl->qlen = 0;
}

/* Close every node connection and forget what was pending. */
static void rcl_disconnect(rconn_t *c)
{
    struct rcluster *cl = c->cl;
    pending_clear(cl);
    for (int i = 0; i < cl->nnodes; i++) rnode_free(cl->nodes[i].rc);
    free(cl->nodes);
    cl->nodes = NULL;
    cl->nnodes = 0;
    free(c->ctx); /* the placeholder */
    c->ctx = NULL;
}

static void rcl_release(rconn_t *c)
{
    struct rcluster *cl = c->cl;
    free(cl->q);
    for (int i = 0; i < cl->nknown; i++) free(cl->known[i]);
    free(cl);
    c->cl = NULL;
}

static void rcl_describe(const rconn_t *c, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "%s (cluster", c->name);
    for (int i = 0; i < c->conf.ncluster && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : " ", c->conf.cluster[i]);
    if (o < n) snprintf(buf + o, n - o, ")");
}

void rcl_wipe_secrets(rconn_t *c)
{
    for (int i = 0; i < c->cl->nnodes; i++)
        if (c->cl->nodes[i].rc) redis_conf_wipe_secrets(&c->cl->nodes[i].rc->conf);
}

/* ------------------------------------------------------------ nodes */

/* SCRIPT LOAD every registered script, pipelined; nd->loads counts the
 * loads that succeeded. 0 or -1 (node's last_error). */
static int load_scripts(rcl_node_t *nd)
{
    rconn_t *n = nd->rc;
    nd->nloaded = nscripts;
    for (int i = 0; i < nscripts; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", scripts[i].body};
        rnode_append(n, 3, argv, NULL);
    }
    int rv = 0;
    for (int i = 0; i < nscripts; i++) {
        redisReply *r;
        if (rnode_read(n, -1, -1, &r) != RC_OK) return -1;
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(n->last_error, sizeof n->last_error, "SCRIPT LOAD: %s", r->str);
            rv = -1;
        }
        freeReplyObject(r);
    }
    if (rv == 0) nd->loads++;
    return rv;
}

/* A plain (not cluster) connection to one node, with the cluster's
 * credentials, TLS and timeout; quiet: the cluster logs. */
static rconn_t *node_conn(const rconn_t *c, const char *host, int port)
{
    redis_conf_t nc = c->conf;
    nc.host = (char *)host;
    nc.port = port;
    nc.cluster = NULL;
    nc.ncluster = 0;
    rconn_t *n = rnode_new(&nc);
    n->quiet = true;
    return n;
}

/* The node at host:port, made (not connected) if new. Only primaries the
 * slot map or a redirection names become nodes. */
static int node_index(rconn_t *c, const char *host, int port)
{
    struct rcluster *cl = c->cl;
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i].port == port && !strcmp(cl->nodes[i].host, host)) return i;
    cl->nodes = xrealloc(cl->nodes, sizeof *cl->nodes * (size_t)(cl->nnodes + 1));
    rcl_node_t *nd = &cl->nodes[cl->nnodes];
    memset(nd, 0, sizeof *nd);
    snprintf(nd->host, sizeof nd->host, "%s", host);
    nd->port = port;
    nd->rc = node_conn(c, nd->host, port);
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", host, port);
    add_known(cl, addr);
    return cl->nnodes++;
}

/* Connect a node (and load the scripts) if it is not. 0, or -1 with the
 * cluster's last_error set. */
static int node_up(rconn_t *c, int i)
{
    rcl_node_t *nd = &c->cl->nodes[i];
    if (nd->rc->ctx) return 0; /* the cluster keeps the backoff: a node connects at once */
    if (rnode_connect(nd->rc) == 0 && load_scripts(nd) == 0) return 0;
    snprintf(c->last_error, sizeof c->last_error, "node %.60s:%d: %.170s", nd->host, nd->port, nd->rc->last_error);
    rnode_close(nd->rc);
    return -1;
}

/* ------------------------------------------------------------ the slot map */

static void apply_map(rconn_t *c, const rcluster_range_t *v, int n)
{
    struct rcluster *cl = c->cl;
    for (int s = 0; s < RCLUSTER_SLOTS; s++) cl->slot_node[s] = -1;
    for (int i = 0; i < n; i++) {
        int k = node_index(c, v[i].host, v[i].port);
        for (int s = v[i].start; s <= v[i].end; s++) cl->slot_node[s] = (int16_t)k;
    }
}

/* Ask one known address for CLUSTER SLOTS, on a connection of its own: a
 * seed is not a node (it may be dead, or a replica now); only the primaries
 * the map names are. 0, or -1 with err set. */
static int ask_slots(rconn_t *c, const char *addr, char *err, size_t errn)
{
    char host[256];
    int port;
    if (sentinel_parse_addr(addr, RCLUSTER_DEFAULT_PORT, host, sizeof host, &port, err, errn) < 0) return -1;
    rconn_t *s = node_conn(c, host, port);
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    redisReply *r = rnode_call(s, 2, argv, NULL);
    if (!r) snprintf(err, errn, "%.100s: %.190s", addr, s->last_error);
    rnode_free(s);
    if (!r) return -1;
    rcluster_range_t *v;
    char why[200];
    int n, rv = rcluster_parse_slots(r, &v, &n, why, sizeof why);
    if (rv < 0) snprintf(err, errn, "%.80s: %.180s", addr, why);
    freeReplyObject(r);
    if (rv < 0) return -1;
    apply_map(c, v, n);
    free(v);
    return 0;
}

/* Read the slot map and connect to every primary: 0, or -1 with last_error set. */
static int rcl_connect(rconn_t *c)
{
    struct rcluster *cl = c->cl;
    char err[300] = "no address";
    int got = -1, n = cl->nknown;
    for (int i = 0; i < n && got < 0; i++) {
        int k = (cl->good + i) % n;
        char addr[300];
        snprintf(addr, sizeof addr, "%s", cl->known[k]); /* apply_map may add to the list */
        got = ask_slots(c, addr, err, sizeof err);
        if (got == 0) cl->good = k;
    }
    if (got < 0) {
        snprintf(c->last_error, sizeof c->last_error, "no cluster node gave the slot map (last: %.200s)", err);
        rcl_disconnect(c);
        return -1;
    }
    for (int i = 0; i < cl->nnodes; i++)
        if (node_up(c, i) < 0) {
            /* a map naming a primary we cannot reach may be stale: ask
             * another address first next time */
            cl->good = (cl->good + 1) % cl->nknown;
            rcl_disconnect(c);
            return -1;
        }
    c->ctx = xcalloc(1, sizeof *c->ctx); /* identity of this connection */
    return 0;
}

/* ------------------------------------------------------------ commands */

/* The node serving a slot now (an index; -1 unknown). */
static int rcl_slot_node(const rconn_t *c, int slot)
{
    return slot >= 0 && slot < RCLUSTER_SLOTS ? c->cl->slot_node[slot] : -1;
}

/* The slot a command's key maps to, -1 for none. */
static int rcl_command_slot(int argc, const char **argv, const size_t *lens)
{
    int k = rcluster_command_key(argc, argv, lens);
    if (k < 0) return -1;
    return rcluster_key_slot(argv[k], lens ? lens[k] : strlen(argv[k]));
}

static rcl_pending_t *push_pending(struct rcluster *cl)
{
    if (cl->qlen == cl->qcap) {
        int ncap = cl->qcap ? cl->qcap * 2 : 16;
        rcl_pending_t *nq = xcalloc((size_t)ncap, sizeof *nq);
        for (int i = 0; i < cl->qlen; i++) nq[i] = cl->q[(cl->qhead + i) % cl->qcap];
        free(cl->q);
        cl->q = nq;
        cl->qcap = ncap;
        cl->qhead = 0;
    }
    rcl_pending_t *p = &cl->q[(cl->qhead + cl->qlen++) % cl->qcap];
    memset(p, 0, sizeof *p);
    return p;
}

static void send_to(rconn_t *c, rcl_pending_t *p, int node)
{
    p->node = node;
    if (node >= 0 && node_up(c, node) < 0) p->node = -1;
    if (p->node < 0) return;
    p->loads = c->cl->nodes[node].loads;
    redisAppendFormattedCommand(c->cl->nodes[node].rc->ctx, p->cmd, p->len);
}

static void rcl_append(rconn_t *c, int argc, const char **argv, const size_t *lens)
{
    struct rcluster *cl = c->cl;
    if (cl->nnodes == 0) return;
    int slot = rcl_command_slot(argc, argv, lens);
    int node = slot >= 0 ? cl->slot_node[slot] : 0;
    if (node < 0) node = 0; /* keyless, or an unassigned slot (the node says where, or CLUSTERDOWN);
                               every node is a primary the slot map named */
    rcl_pending_t *p = push_pending(cl);
    char *cmd;
    /* int in hiredis 0.14, long long in 1.x; the buffer is hiredis's own
     * allocation (hi_malloc in 1.x): redisFreeCommand frees it */
    long long len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0) abort();
    p->cmd = cmd;
    p->len = (size_t)len;
    send_to(c, p, node);
}

/* What went wrong on a node (node < 0: none in particular), which drops
 * the whole cluster connection (the front drops on RC_ERR). The reason
 * becomes the connection's last_error, so it is composed to fit there: the
 * node's address and the node's own reason are each cut to their share (an
 * address is rarely longer than 60). */
static int fail(rconn_t *c, int node, const char *what)
{
    char why[sizeof c->last_error];
    if (node >= 0)
        snprintf(why, sizeof why, "node %.60s:%d: %.170s", c->cl->nodes[node].host, c->cl->nodes[node].port, what);
    else
        snprintf(why, sizeof why, "%s", what);
    snprintf(c->last_error, sizeof c->last_error, "%s", why);
    return RC_ERR;
}

static int rcl_send(rconn_t *c)
{
    struct rcluster *cl = c->cl;
    bool any = false;
    for (int i = 0; i < cl->nnodes; i++) {
        rconn_t *n = cl->nodes[i].rc;
        if (!n->ctx || !n->ctx->obuf || !*n->ctx->obuf) continue;
        any = true;
        if (rnode_send(n) < 0) return fail(c, i, n->last_error);
    }
    if (any) c->round_trips++;
    return RC_OK;
}

/* A redirection sends the command after whatever its new node still owes
 * replies for: read those first, into their FIFO entries. */
static int drain_node(rconn_t *c, int node)
{
    struct rcluster *cl = c->cl;
    for (int i = 1; i < cl->qlen; i++) {
        rcl_pending_t *p = &cl->q[(cl->qhead + i) % cl->qcap];
        if (p->node != node || p->stash) continue;
        if (rnode_read(cl->nodes[node].rc, -1, -1, &p->stash) != RC_OK) return -1;
    }
    return 0;
}

/* ASKING on a node, before a command an ASK redirection sends there. */
static int asking(rconn_t *c, int node)
{
    rconn_t *n = c->cl->nodes[node].rc;
    const char *argv[1] = {"ASKING"};
    rnode_append(n, 1, argv, NULL);
    redisReply *r;
    if (rnode_read(n, -1, -1, &r) != RC_OK) return fail(c, node, n->last_error);
    freeReplyObject(r);
    return RC_OK;
}

/* Follow MOVED / ASK for the head entry: resend it to the node named. */
static int redirect(rconn_t *c, rcl_pending_t *p, enum rcluster_redirect kind, int slot, const char *host, int port)
{
    struct rcluster *cl = c->cl;
    int to = node_index(c, host, port);
    if (node_up(c, to) < 0) return fail(c, -1, c->last_error);
    if (kind == RCLUSTER_MOVED) cl->slot_node[slot] = (int16_t)to;
    if (!c->quiet) log_debug("redis %s: slot %d %s to %s:%d", c->name, slot, kind == RCLUSTER_MOVED ? "moved" : "asked", host, port);
    if (drain_node(c, to) < 0) return fail(c, to, cl->nodes[to].rc->last_error);
    p->asking = kind == RCLUSTER_ASK;
    if (p->asking && asking(c, to) != RC_OK) return RC_ERR;
    send_to(c, p, to);
    return RC_OK;
}

/* NOSCRIPT for the head entry: its node lost the scripts (SCRIPT FLUSH, a
 * restart that did not keep them). Load them there, unless that was done
 * since the command went out, and resend it: an EVALSHA answered NOSCRIPT
 * did not run. The commands sent there after it are answered first. */
static int reload_scripts(rconn_t *c, rcl_pending_t *p)
{
    struct rcluster *cl = c->cl;
    int node = p->node;
    rconn_t *n = cl->nodes[node].rc;
    if (drain_node(c, node) < 0) return fail(c, node, n->last_error);
    if (p->loads == cl->nodes[node].loads) {
        /* a script first used after the node connected is not a loss */
        bool lost = cl->nodes[node].nloaded == nscripts;
        if (load_scripts(&cl->nodes[node]) < 0) return fail(c, node, n->last_error);
        if (lost && !c->quiet)
            log_info("redis %s: node %s:%d had lost the scripts: loaded them again", c->name, cl->nodes[node].host,
                     cl->nodes[node].port);
    }
    if (p->asking && asking(c, node) != RC_OK) return RC_ERR;
    send_to(c, p, node);
    return RC_OK;
}

/* Errors that mean "this cluster connection cannot serve now": reconnect
 * with backoff and reread the slot map, as for a lost connection. */
static bool is_unavailable(const redisReply *r)
{
    static const char *const codes[] = {"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN", NULL};
    for (int i = 0; codes[i]; i++)
        if (!strncmp(r->str, codes[i], strlen(codes[i]))) return true;
    return false;
}

static void pop_head(struct rcluster *cl)
{
    redisFreeCommand(cl->q[cl->qhead].cmd);
    cl->qhead = (cl->qhead + 1) % cl->qcap;
    cl->qlen--;
}

static int rcl_read(rconn_t *c, int sigfd, int timeout_ms, redisReply **out)
{
    struct rcluster *cl = c->cl;
    if (cl->qlen == 0) return fail(c, -1, "no reply pending");
    if (rcl_send(c) != RC_OK) return RC_ERR;
    rcl_pending_t *p = &cl->q[cl->qhead];
    for (int hops = 0;; hops++) {
        if (p->node < 0) return fail(c, -1, c->last_error[0] ? c->last_error : "node unreachable");
        redisReply *r = p->stash;
        p->stash = NULL;
        if (!r) {
            int rv = rnode_read(cl->nodes[p->node].rc, sigfd, timeout_ms, &r);
            if (rv == RC_SIGNAL) return rv;
            if (rv != RC_OK) return fail(c, p->node, cl->nodes[p->node].rc->last_error);
        }
        if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8) && hops < MAX_REDIRECTS) {
            freeReplyObject(r);
            if (reload_scripts(c, p) != RC_OK) return RC_ERR;
            continue;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            char host[256];
            int slot, port;
            enum rcluster_redirect kind = rcluster_parse_redirect(r->str, &slot, host, sizeof host, &port);
            if (kind != RCLUSTER_NOREDIR && hops < MAX_REDIRECTS) {
                freeReplyObject(r);
                if (redirect(c, p, kind, slot, host, port) != RC_OK) return RC_ERR;
                continue;
            }
            if (kind != RCLUSTER_NOREDIR || is_unavailable(r)) {
                char why[sizeof c->last_error]; /* a copy: r is freed before the drop */
                snprintf(why, sizeof why, "%s", r->str);
                freeReplyObject(r);
                return fail(c, p->node, why);
            }
        }
        pop_head(cl);
        *out = r;
        return RC_OK;
    }
}

const rconn_type_t rconn_cluster_type = {
    .init = rcl_init,
    .release = rcl_release,
    .connect = rcl_connect,
    .close = rcl_disconnect,
    .append = rcl_append,
    .send = rcl_send,
    .read = rcl_read,
    .describe = rcl_describe,
    .slot_node = rcl_slot_node,
};
