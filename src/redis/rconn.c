/*
 * rconn.c - the front of a Redis connection (rconn.h): picks the connection
 * type, forwards to its table, and keeps what every type shares: reconnect
 * with backoff, the outage log lines, and scripts (EVALSHA, EVAL on
 * NOSCRIPT).
 */
#include "redis/rconn.h"
#include "redis/rconn_cluster.h"
#include "redis/rnode.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define FLAP_MS 1000            /* dropped sooner than this after connecting: still an outage */

rconn_t *rconn_new(const redis_conf_t *rc)
{
    rconn_t *c = rnode_new(rc);
    if (c->conf.cluster) c->type = &rconn_cluster_type;
    if (c->type->init) c->type->init(c);
    return c;
}

void rconn_free(rconn_t *c)
{
    if (!c) return;
    c->type->close(c);
    if (c->type->release) c->type->release(c);
    rnode_free(c);
}

void rconn_wipe_secrets(rconn_t *c)
{
    if (!c) return;
    redis_conf_wipe_secrets(&c->conf);
    if (c->watch) redis_conf_wipe_secrets(&c->watch->conf);
    if (c->cl) rcl_wipe_secrets(c);
}

void rconn_describe(const rconn_t *c, char *buf, size_t n)
{
    c->type->describe(c, buf, n);
}

void rconn_drop(rconn_t *c, const char *why)
{
    /* why may point into the context (errstr): copy it before freeing */
    if (why && why != c->last_error) snprintf(c->last_error, sizeof c->last_error, "%s", why);
    c->type->close(c);
    /* A server that takes the connection and refuses what follows (NOAUTH,
     * an ACL user switched off, scripts that cannot load) must not make us
     * reconnect in a loop: a drop soon after connecting continues the backoff. */
    bool flapping = c->up_since_ms && mono_ms() - c->up_since_ms < FLAP_MS;
    c->up_since_ms = 0;
    if (!c->in_outage && !flapping) {
        char d[400];
        rconn_describe(c, d, sizeof d);
        if (!c->quiet) log_warn("redis %s unavailable: %s; reconnecting with backoff", d, c->last_error);
        c->in_outage = true;
        c->backoff_ms = 0;
        c->next_attempt_ms = mono_ms(); /* first retry at once: it may have been a blip */
    } else {
        if (!c->in_outage) {
            char d[400];
            rconn_describe(c, d, sizeof d);
            if (!c->quiet)
                log_warn("redis %s: %s right after connecting; reconnecting with backoff", d, c->last_error);
            c->in_outage = true;
        }
        c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (c->backoff_ms > BACKOFF_MAX_MS) c->backoff_ms = BACKOFF_MAX_MS;
        c->next_attempt_ms = mono_ms() + c->backoff_ms;
    }
}

void rconn_close(rconn_t *c)
{
    c->type->close(c);
}

int64_t rconn_retry_in_ms(const rconn_t *c)
{
    if (c->ctx) return 0;
    int64_t d = c->next_attempt_ms - mono_ms();
    return d > 0 ? d : 0;
}

int rconn_confirm_primary(rconn_t *c)
{
    return c->type->confirm_primary ? c->type->confirm_primary(c) : 0;
}

int rconn_slot_node(const rconn_t *c, int slot)
{
    return c->type->slot_node(c, slot);
}

int rconn_ensure(rconn_t *c)
{
    if (c->ctx) return 0;
    if (c->in_outage && mono_ms() < c->next_attempt_ms) return -1;
    if (c->type->connect(c) < 0) {
        rconn_drop(c, NULL);
        return -1;
    }
    if (c->in_outage) {
        char d[400];
        rconn_describe(c, d, sizeof d);
        if (!c->quiet) log_info("redis %s is back", d);
        c->in_outage = false;
    }
    c->up_since_ms = mono_ms(); /* the backoff resets only once it stays up (rconn_drop) */
    c->connects++;
    return 0;
}

uint64_t rconn_reconnects(const rconn_t *c)
{
    return c->connects > 1 ? c->connects - 1 : 0;
}

void rconn_append(rconn_t *c, int argc, const char **argv, const size_t *lens)
{
    if (c->ctx) c->type->append(c, argc, argv, lens);
}

int rconn_send(rconn_t *c)
{
    if (!c->ctx) return RC_ERR;
    if (c->type->send(c) < 0) {
        rconn_drop(c, c->last_error);
        return RC_ERR;
    }
    return RC_OK;
}

int rconn_read(rconn_t *c, int sigfd, int timeout_ms, redisReply **out)
{
    *out = NULL;
    if (!c->ctx) {
        if (!c->last_error[0]) snprintf(c->last_error, sizeof c->last_error, "not connected");
        return RC_ERR;
    }
    int r = c->type->read(c, sigfd, timeout_ms, out);
    if (r == RC_ERR) rconn_drop(c, c->last_error);
    return r;
}

redisReply *rconn_call(rconn_t *c, int argc, const char **argv, const size_t *lens)
{
    if (rconn_ensure(c) < 0) return NULL;
    rconn_append(c, argc, argv, lens);
    redisReply *r;
    if (rconn_read(c, -1, -1, &r) != RC_OK) return NULL;
    return r;
}

/* ------------------------------------------------------------ scripts */

/* SHA-1, for EVALSHA names (RFC 3174; small and dependency-free). */
static void sha1_hex(const char *data, size_t len, char out[41])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t total = ((len + 8) / 64 + 1) * 64;
    unsigned char *m = xcalloc(total, 1);
    memcpy(m, data, len);
    m[len] = 0x80;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) m[total - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t off = 0; off < total; off += 64) {
        uint32_t w[80];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)m[off + 4 * i] << 24 | (uint32_t)m[off + 4 * i + 1] << 16 |
                   (uint32_t)m[off + 4 * i + 2] << 8 | m[off + 4 * i + 3];
        for (int i = 16; i < 80; i++) {
            uint32_t t = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16];
            w[i] = t << 1 | t >> 31;
        }
        uint32_t a = h[0], b = h[1], cc = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) f = (b & cc) | (~b & d), k = 0x5A827999;
            else if (i < 40) f = b ^ cc ^ d, k = 0x6ED9EBA1;
            else if (i < 60) f = (b & cc) | (b & d) | (cc & d), k = 0x8F1BBCDC;
            else f = b ^ cc ^ d, k = 0xCA62C1D6;
            uint32_t t = (a << 5 | a >> 27) + f + e + k + w[i];
            e = d;
            d = cc;
            cc = b << 30 | b >> 2;
            b = a;
            a = t;
        }
        h[0] += a, h[1] += b, h[2] += cc, h[3] += d, h[4] += e;
    }
    free(m);
    for (int i = 0; i < 5; i++) snprintf(out + 8 * i, 9, "%08x", h[i]);
}

void rscript_init(rscript_t *s, const char *body)
{
    s->body = body;
    sha1_hex(body, strlen(body), s->sha);
    rcl_register_script(s);
}

static void append_script(rconn_t *c, const char *verb, const char *what, int numkeys, int argc,
                          const char **argv, const size_t *lens)
{
    const char **av = xcalloc((size_t)argc + 3, sizeof *av);
    size_t *al = xcalloc((size_t)argc + 3, sizeof *al);
    char nk[16];
    snprintf(nk, sizeof nk, "%d", numkeys);
    av[0] = verb;
    al[0] = strlen(verb);
    av[1] = what;
    al[1] = strlen(what);
    av[2] = nk;
    al[2] = strlen(nk);
    for (int i = 0; i < argc; i++) {
        av[3 + i] = argv[i];
        al[3 + i] = lens ? lens[i] : strlen(argv[i]);
    }
    rconn_append(c, argc + 3, av, al);
    free(av);
    free(al);
}

void rconn_append_script(rconn_t *c, const rscript_t *s, int numkeys, int argc, const char **argv,
                         const size_t *lens)
{
    append_script(c, "EVALSHA", s->sha, numkeys, argc, argv, lens);
}

int rconn_script(rconn_t *c, const rscript_t *s, int numkeys, int argc, const char **argv,
                 const size_t *lens, int sigfd, int timeout_ms, redisReply **out)
{
    *out = NULL;
    if (rconn_ensure(c) < 0) return RC_ERR;
    rconn_append_script(c, s, numkeys, argc, argv, lens);
    int r = rconn_read(c, sigfd, timeout_ms, out);
    if (r == RC_SIGNAL) return r; /* caller keeps reading with rconn_read */
    if (r == RC_OK && (*out)->type == REDIS_REPLY_ERROR && !strncmp((*out)->str, "NOSCRIPT", 8)) {
        /* First use on this server, or it was restarted/flushed: EVAL loads it. */
        freeReplyObject(*out);
        *out = NULL;
        append_script(c, "EVAL", s->body, numkeys, argc, argv, lens);
        r = rconn_read(c, sigfd, timeout_ms, out);
    }
    return r;
}
