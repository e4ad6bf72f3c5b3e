/*
 * cli_metrics.c - `qpool metrics`: the job history by minute, from Redis
 * (history.h), every host and pool on the connection.
 */
#include "cli/cli.h"
#include "observe/history.h"
#include "observe/metrics.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <getopt.h>
#include <stddef.h>
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

typedef struct {
    const char *cfg, *conn;
    long minutes;
    bool json;
} metrics_args_t;

#define M(m) offsetof(metrics_args_t, m)
static const cli_opt_t OPTS[] = {
    CLI_REDIS_OPTS(metrics_args_t),
    CLI_LONG("minutes", 'm', M(minutes), 1, 60 * 24 * 31, "--minutes takes 1..44640"),
    CLI_TRUE("json", 'j', M(json)),
    CLI_OPTS_END,
};
#undef M

int cmd_metrics(const cli_cmd_t *cmd, int argc, char **argv)
{
    metrics_args_t a = {.conn = "default", .minutes = 60};
    int status;
    if (cli_parse(cmd, argc, argv, "c:m:jh", OPTS, &a, "unknown option", &status) < 0) return status;
    if (optind < argc) {
        cli_usage_error("metrics", "no arguments expected");
        return EXIT_USAGE;
    }
    cli_redis_t x;
    if (cli_redis_open("metrics", a.cfg, a.conn, &x, &status) < 0) return status;
    int64_t now = wall_ms() / 60000;
    cJSON *h = history_read(x.r, now - a.minutes + 1, now);
    int rv = 0;
    if (!h) {
        fprintf(stderr, "qpool metrics: cannot read redis %s: %s\n", a.conn,
                x.r->last_error[0] ? x.r->last_error : "unavailable");
        rv = 1;
    } else if (a.json)
        cli_json_print(h);
    else
        print_minutes(h);
    cJSON_Delete(h);
    cli_redis_close(&x);
    return rv;
}
