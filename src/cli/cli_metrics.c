/*
 * cli_metrics.c - `qpool metrics`: the job history by minute, from Redis
 * (history.h), every host and pool on the connection.
 */
#include "cli/cli.h"
#include "observe/history.h"
#include "observe/metrics.h"
#include "core/util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One line per minute: jobs by outcome, every host and pool together. */
static void print_minutes(const cJSON *h)
{
    printf("%-17s", "MINUTE (UTC)");
    for (int o = 0; o < OUTCOME_N; o++) printf(" %10s", outcome_name(o));
    printf(" %10s %10s\n", "recycled", "w.crashes"); /* workers: memory limit, crashed */
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(h, "minutes")) {
        double by[OUTCOME_N] = {0}, recycled = 0, crashes = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m, "series")) {
            const cJSON *oc = cJSON_GetObjectItemCaseSensitive(e, "outcome");
            const char *name = cJSON_IsString(oc) ? oc->valuestring : "";
            double n = cJSON_GetObjectItemCaseSensitive(e, "count")->valuedouble;
            int o = outcome_from_name(name);
            if (o >= 0) by[o] += n;
            if (!strcmp(name, "exit:memory")) recycled += n;
            if (!strcmp(name, "exit:crashed")) crashes += n;
        }
        time_t t = (time_t)(cJSON_GetObjectItemCaseSensitive(m, "minute")->valuedouble * 60);
        struct tm tm;
        gmtime_r(&t, &tm);
        char when[32];
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        printf("%-17s", when);
        for (int o = 0; o < OUTCOME_N; o++) printf(" %10.0f", by[o]);
        printf(" %10.0f %10.0f\n", recycled, crashes);
    }
}

int cmd_metrics(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"connection", required_argument, 0, 'C'},
                                         {"minutes", required_argument, 0, 'm'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cfg = NULL, *conn = "default";
    bool json = false;
    long minutes = 60;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:m:jh", opts, NULL)) != -1) {
        switch (o) {
        case 'c': cfg = optarg; break;
        case 'C': conn = optarg; break;
        case 'm':
            if (!parse_long(optarg, &minutes) || minutes < 1 || minutes > 60 * 24 * 31) {
                cli_usage_error("metrics", "--minutes takes 1..44640");
                return EXIT_USAGE;
            }
            break;
        case 'j': json = true; break;
        case 'h': cli_help("metrics"); return 0;
        default: cli_usage_error("metrics", "unknown option"); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        cli_usage_error("metrics", "no arguments expected");
        return EXIT_USAGE;
    }
    int status = 0;
    qconf_t *c = NULL;
    rconn_t *r = cli_redis("metrics", cfg, conn, &c, &status);
    if (!r) return status;
    int64_t now = wall_ms() / 60000;
    cJSON *h = history_read(r, now - minutes + 1, now);
    int rv = 0;
    if (!h) {
        fprintf(stderr, "qpool metrics: cannot read redis %s: %s\n", conn, r->last_error[0] ? r->last_error : "unavailable");
        rv = 1;
    } else if (json) {
        char *s = cJSON_PrintUnformatted(h);
        printf("%s\n", s);
        free(s);
    } else
        print_minutes(h);
    cJSON_Delete(h);
    rconn_free(r);
    config_free(c);
    return rv;
}
