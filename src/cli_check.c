/*
 * cli_check.c - `qpool check --connect`: connect to every Redis connection
 * the config defines (Sentinel lookup, TLS handshake, AUTH, SELECT, ROLE),
 * send PING, and say per connection what happened.
 */
#include "cli.h"
#include "rconn.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* 0 reached and answered PONG, -1 not (reason printed). */
static int check_one(const redis_conf_t *rc, FILE *out)
{
    rconn_t *c = rconn_new(rc);
    c->quiet = true;
    const char *argv[1] = {"PING"};
    redisReply *r = rconn_call(c, 1, argv, NULL);
    char d[400];
    rconn_describe(c, d, sizeof d);
    int rv = -1;
    if (!r)
        fprintf(out, "redis %s: FAILED: %s\n", d, c->last_error);
    else if (r->type == REDIS_REPLY_ERROR)
        fprintf(out, "redis %s: FAILED: PING: %s\n", d, r->str);
    else {
        fprintf(out, "redis %s: ok (%s%s%s)\n", d, rc->tls.enabled ? "TLS, " : "",
                rc->username ? "ACL user " : "", rc->username ? rc->username : "no ACL user");
        rv = 0;
    }
    if (r) freeReplyObject(r);
    rconn_free(c);
    return rv;
}

int cli_check_connect(const qconf_t *c, FILE *out)
{
    int failed = 0;
    signal(SIGPIPE, SIG_IGN); /* a server that hangs up mid-write is a FAILED line, not a death */
    for (int i = 0; i < c->nredis; i++)
        if (check_one(&c->redis[i], out) < 0) failed++;
    return failed ? -1 : 0;
}
