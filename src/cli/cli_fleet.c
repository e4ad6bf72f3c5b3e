/*
 * cli_fleet.c - `qpool status --fleet`: every live master on a Redis
 * connection (their heartbeat records, fleet.h), with totals. It reads
 * Redis, not a control socket, so it works from any host that can reach
 * Redis.
 */
#include "cli/cli.h"
#include "observe/fleet.h"
#include "core/util.h"

#include <getopt.h>
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

int cmd_fleet(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"connection", required_argument, 0, 'C'},
                                         {"json", no_argument, 0, 'j'},
                                         {"fleet", no_argument, 0, 'F'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cfg = NULL, *conn = "default";
    bool json = false;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:jh", opts, NULL)) != -1) {
        switch (o) {
        case 'c': cfg = optarg; break;
        case 'C': conn = optarg; break;
        case 'j': json = true; break;
        case 'F': break;
        case 'h': cli_help("status"); return 0;
        default: cli_usage_error("status", "--fleet takes -c FILE, --connection NAME and --json"); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_usage_error("status", "--fleet takes no arguments");
        return EXIT_USAGE;
    }
    int status = 0;
    qconf_t *c = NULL;
    rconn_t *r = cli_redis("status", cfg, conn, &c, &status);
    if (!r) return status;
    cJSON *fleet = fleet_list(r);
    int rv = 0;
    if (!fleet) {
        fprintf(stderr, "qpool status: cannot read the fleet from redis %s: %s\n", conn,
                r->last_error[0] ? r->last_error : "unavailable");
        rv = 1;
    } else {
        fleet_add_totals(fleet);
        if (json) {
            char *s = cJSON_PrintUnformatted(fleet);
            printf("%s\n", s);
            free(s);
        } else
            print_fleet(fleet);
        rv = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(fleet, "masters")) ? 0 : 2;
        cJSON_Delete(fleet);
    }
    rconn_free(r);
    config_free(c);
    return rv;
}
