/*
 * cli_check.c - `qpool check --connect`: connect to every Redis connection
 * the config defines (Sentinel lookup, TLS handshake, AUTH, SELECT, ROLE),
 * send PING, and say per connection what happened; then, for each pool with
 * a fleet budget, whether the fleet can satisfy it (the live holders' lease
 * records, lease.h).
 */
#include "cli.h"
#include "lease.h"
#include "rconn.h"
#include "util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The fleet's floors against one pool's budget: the live holders' mins, and
 * this host's own when no master of this host holds a lease yet. 0 fits,
 * -1 cannot be satisfied or not read. */
static int check_budget(rconn_t *rc, const pool_conf_t *p, FILE *out)
{
    char *key = lease_key(rc, p->name);
    lease_view_t v = {0};
    int rv = lease_list(rc, key, &v);
    free(key);
    if (rv < 0) {
        fprintf(out, "fleet budget %s: FAILED: cannot read the leases: %s\n", p->name, rc->last_error);
        return -1;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    size_t hl = strlen(host);
    int mins = 0, held = 0;
    bool mine = false;
    for (int i = 0; i < v.n; i++) {
        mins += v.hosts[i].floor;
        held += v.hosts[i].held;
        mine |= !strncmp(v.hosts[i].id, host, hl) && v.hosts[i].id[hl] == ':';
    }
    if (!mine) mins += p->min_processes;
    int budget = v.budget >= 0 && v.budget < p->fleet_max_processes ? v.budget : p->fleet_max_processes;
    if (v.budget >= 0 && v.budget != p->fleet_max_processes)
        fprintf(out, "fleet budget %s: note: the fleet runs with fleet_max_processes = %d, this config says %d "
                     "(the smallest is in effect)\n", p->name, v.budget, p->fleet_max_processes);
    rv = mins > budget ? -1 : 0;
    if (rv < 0)
        fprintf(out, "fleet budget %s: FAILED: the fleet's min_processes sum to %d%s, more than its budget of %d: "
                     "lower min_processes or raise fleet_max_processes\n", p->name, mins,
                mine ? "" : " with this host's", budget);
    else
        fprintf(out, "fleet budget %s: ok (%d workers; %d masters hold %d; their min_processes%s sum to %d)\n",
                p->name, budget, v.n, held, mine ? "" : " and this host's", mins);
    lease_view_free(&v);
    return rv;
}

static int check_budgets(const qconf_t *c, FILE *out)
{
    int failed = 0;
    for (int i = 0; i < c->npools; i++) {
        const pool_conf_t *p = &c->pools[i];
        if (!p->fleet_max_processes) continue;
        rconn_t *rc = rconn_new(config_redis(c, p->connection));
        rc->quiet = true;
        if (check_budget(rc, p, out) < 0) failed++;
        rconn_free(rc);
    }
    return failed;
}

int cli_check_connect(const qconf_t *c, FILE *out)
{
    int failed = 0;
    signal(SIGPIPE, SIG_IGN); /* a server that hangs up mid-write is a FAILED line, not a death */
    for (int i = 0; i < c->nredis; i++)
        if (check_one(&c->redis[i], out) < 0) failed++;
    failed += check_budgets(c, out);
    return failed ? -1 : 0;
}
