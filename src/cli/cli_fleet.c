/*
 * cli_fleet.c - `qpool status --fleet`: every live master on a Redis
 * connection (their heartbeat records, fleet.h), with totals. It reads
 * Redis, not a control socket, so it works from any host that can reach
 * Redis.
 */
#include "cli/cli.h"
#include "observe/fleet.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each master's slots of each fleet budget, then the budget's totals. */
static void print_budgets(const cJSON *fleet)
{
    const cJSON *b, *m, *p;
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(fleet, "budgets")) {
        const char *pool = cli_json_str(b, "pool");
        printf("\nfleet budget %s: %.0f workers, %.0f held, %.0f wanted by %.0f masters (%.0f waiting for budget)\n",
               pool, cli_json_num(b, "budget"), cli_json_num(b, "held"), cli_json_num(b, "want"),
               cli_json_num(b, "masters"), cli_json_num(b, "waiting"));
        cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(fleet, "masters")) {
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(m, "pools")) {
                const cJSON *fb = cJSON_GetObjectItemCaseSensitive(p, "fleet_budget");
                if (!cJSON_IsObject(fb) || strcmp(cli_json_str(p, "name"), pool)) continue;
                printf("  %-24.24s pid %-8d holds %3.0f  wants %3.0f  runs %3.0f%s\n", cli_json_str(m, "host"),
                       (int)cli_json_num(m, "pid"), cli_json_num(fb, "held"), cli_json_num(fb, "want"),
                       cli_json_num(p, "workers"),
                       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fb, "waiting")) ? "  waiting for budget" : "");
            }
        }
    }
}

static void print_fleet(const cJSON *fleet)
{
    printf("%-24s %-8s %-8s %-9s %9s %8s %5s %5s  %s\n", "HOST", "PID", "VERSION", "STATE", "UPTIME", "WORKERS", "BUSY",
           "POOLS", "CONFIG");
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(fleet, "masters")) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(m, "workers");
        printf("%-24.24s %-8d %-8.8s %-9.9s %8.0fs %8.0f %5.0f %5d  %s\n", cli_json_str(m, "host"), (int)cli_json_num(m, "pid"),
               cli_json_str(m, "version"), cli_json_str(m, "state"), cli_json_num(m, "uptime_s"), cli_json_num(w, "total"), cli_json_num(w, "busy"),
               cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "pools")), cli_json_str(m, "config"));
    }
    print_budgets(fleet);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(fleet, "totals");
    printf("%.0f masters (%.0f paused), %.0f workers, %.0f busy\n", cli_json_num(t, "masters"), cli_json_num(t, "paused_masters"),
           cli_json_num(t, "workers"), cli_json_num(t, "busy"));
}

typedef struct {
    const char *cfg, *conn;
    bool json;
} fleet_args_t;

#define F(m) offsetof(fleet_args_t, m)
static const cli_opt_t OPTS[] = {
    CLI_REDIS_OPTS(fleet_args_t),
    CLI_TRUE("json", 'j', F(json)),
    CLI_NONE("fleet", 'F'),
    CLI_OPTS_END,
};
#undef F

int cmd_fleet(const cli_cmd_t *cmd, int argc, char **argv)
{
    fleet_args_t a = {.conn = "default"};
    int status;
    if (cli_parse(cmd, argc, argv, "c:jh", OPTS, &a, "--fleet takes -c FILE, --connection NAME and --json", &status) < 0)
        return status;
    if (optind < argc) {
        cli_usage_error("status", "--fleet takes no arguments");
        return EXIT_USAGE;
    }
    cli_redis_t x;
    if (cli_redis_open("status", a.cfg, a.conn, &x, &status) < 0) return status;
    cJSON *fleet = fleet_list(x.r);
    int rv = 0;
    if (!fleet) {
        fprintf(stderr, "qpool status: cannot read the fleet from redis %s: %s\n", a.conn,
                x.r->last_error[0] ? x.r->last_error : "unavailable");
        rv = 1;
    } else {
        fleet_add_totals(fleet);
        if (a.json)
            cli_json_print(fleet);
        else {
            cli_json_text(fleet); /* other hosts' records: no controls reach the terminal */
            print_fleet(fleet);
        }
        rv = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fleet, "masters")) ? 0 : 2;
        cJSON_Delete(fleet);
    }
    cli_redis_close(&x);
    return rv;
}
