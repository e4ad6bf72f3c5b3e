/*
 * cli_check.c - `qpool check --connect`: connect to every Redis connection
 * the config defines (Sentinel lookup, TLS handshake, AUTH, SELECT, ROLE),
 * send PING, and say per connection what happened; then, for each pool with
 * a fleet budget, whether the fleet can satisfy it (the live holders' lease
 * records, lease.h).
 */
#include "cli/cli.h"
#include "redis/lease.h"
#include "redis/rconn.h"
#include "core/util.h"

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

/* What the holder ids of the master running config c on this host start
 * with ("host:pid:", the pid from its pid file), or "" when none runs. */
static void running_id(const qconf_t *c, char *id, size_t n)
{
    id[0] = '\0';
    FILE *f = c->pid_file ? fopen(c->pid_file, "re") : NULL;
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1) pid = 0;
        fclose(f);
    }
    if (pid > 0 && pid < INT32_MAX) lease_holder_prefix(id, n, (pid_t)pid);
}

/* The fleet's floors against one pool's budget: the live holders' mins,
 * this config's in place of its running master's (or added when none
 * holds a lease yet). 0 fits, -1 cannot be satisfied or not read. */
static int check_budget(const qconf_t *c, rconn_t *rc, const pool_conf_t *p, FILE *out)
{
    char *key = lease_key(rc, p->name);
    lease_view_t v = {0};
    int rv = lease_list(rc, key, &v);
    free(key);
    if (rv < 0) {
        fprintf(out, "fleet budget %s: FAILED: cannot read the leases: %s\n", p->name, rc->last_error);
        return -1;
    }
    char me[300];
    running_id(c, me, sizeof me);
    int64_t mins = p->min_processes, held = 0; /* records anyone could write: 64-bit sums */
    for (int i = 0; i < v.n; i++) {
        held += v.hosts[i].held;
        if (!me[0] || strncmp(v.hosts[i].id, me, strlen(me))) mins += v.hosts[i].floor;
    }
    int budget = v.budget >= 0 && v.budget < p->fleet_max_processes ? v.budget : p->fleet_max_processes;
    if (v.budget >= 0 && v.budget != p->fleet_max_processes)
        fprintf(out, "fleet budget %s: note: the fleet runs with fleet_max_processes = %d, this config says %d "
                     "(the smallest is in effect)\n", p->name, v.budget, p->fleet_max_processes);
    rv = mins > budget ? -1 : 0;
    if (rv < 0)
        fprintf(out, "fleet budget %s: FAILED: the fleet's min_processes with this config's sum to %lld, more than "
                     "its budget of %d: lower min_processes or raise fleet_max_processes\n", p->name, (long long)mins,
                budget);
    else
        fprintf(out, "fleet budget %s: ok (%d workers; %d masters hold %lld; their min_processes with this "
                     "config's sum to %lld)\n", p->name, budget, v.n, (long long)held, (long long)mins);
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
        if (check_budget(c, rc, p, out) < 0) failed++;
        rconn_free(rc);
    }
    return failed;
}

int cli_check_connect(const qconf_t *c, FILE *out)
{
    int failed = 0;
    signal(SIGPIPE, SIG_IGN); /* a server that hangs up mid-write is a FAILED line, not a death */
    if (c->no_redis) {
        fprintf(out, "redis: none (no Redis at all): nothing to connect to\n");
        return 0;
    }
    for (int i = 0; i < c->nredis; i++)
        if (check_one(&c->redis[i], out) < 0) failed++;
    failed += check_budgets(c, out);
    return failed ? -1 : 0;
}
