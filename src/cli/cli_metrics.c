/*
 * cli_metrics.c - `qpool metrics`: the job history by minute, from Redis
 * (history.h), every host and pool on the connection.
 */
#include "cli/cli.h"
#include "observe/history.h"
#include "observe/metrics.h"
#include "redis/failed_search.h"
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
    const char *host, *pool, *queue, *name, *status, *since, *until; /* a filter; NULL: any */
    long minutes;
    bool json;
} metrics_args_t;

/* Does entry e (host, pool, queue, job, outcome) pass a's filter? (pure) */
static bool series_match(const metrics_args_t *a, const cJSON *e)
{
    const char *want[] = {a->host, a->pool, a->queue, a->name, a->status};
    const char *key[] = {"host", "pool", "queue", "job", "outcome"};
    for (size_t i = 0; i < sizeof key / sizeof *key; i++) {
        if (!want[i] || !*want[i]) continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key[i]);
        if (!cJSON_IsString(v) || strcmp(v->valuestring, want[i])) return false;
    }
    return true;
}

static bool has_filter(const metrics_args_t *a)
{
    const char *v[] = {a->host, a->pool, a->queue, a->name, a->status};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (v[i] && *v[i]) return true;
    return false;
}

/* With a filter: keeps the series entries that pass it, and the minutes
 * that still have one, without their "all" (every job's). (pure) */
static void filter_minutes(const metrics_args_t *a, cJSON *h)
{
    if (!has_filter(a)) return;
    cJSON *mins = cJSON_GetObjectItemCaseSensitive(h, "minutes");
    for (int i = cJSON_GetArraySize(mins) - 1; i >= 0; i--) {
        cJSON *m = cJSON_GetArrayItem(mins, i);
        cJSON_DeleteItemFromObjectCaseSensitive(m, "all");
        cJSON *series = cJSON_GetObjectItemCaseSensitive(m, "series");
        for (int j = cJSON_GetArraySize(series) - 1; j >= 0; j--)
            if (!series_match(a, cJSON_GetArrayItem(series, j))) cJSON_DeleteItemFromArray(series, j);
        if (!cJSON_GetArraySize(series)) cJSON_DeleteItemFromArray(mins, i);
    }
}

/* The minutes to read: --since/--until (as `qpool failed` takes them),
 * else the last --minutes. -1 when a time is malformed or the range is
 * empty or longer than 44640 minutes. (pure) */
static int minute_range(const metrics_args_t *a, long long now_s, int64_t *from, int64_t *to)
{
    long long since = 0, until = now_s;
    if (a->since && ffilter_time(a->since, now_s, &since) < 0) return -1;
    if (a->until && ffilter_time(a->until, now_s, &until) < 0) return -1;
    *to = until / 60;
    *from = a->since ? since / 60 : *to - a->minutes + 1;
    return *from <= *to && *to - *from < 60 * 24 * 31 ? 0 : -1;
}

#define M(m) offsetof(metrics_args_t, m)
static const cli_opt_t OPTS[] = {
    CLI_REDIS_OPTS(metrics_args_t),
    CLI_LONG("minutes", 'm', M(minutes), 1, 60 * 24 * 31, "--minutes takes 1..44640"),
    CLI_TRUE("json", 'j', M(json)),
    CLI_STR("host", 1001, M(host)),
    CLI_STR("pool", 'p', M(pool)),
    CLI_STR("queue", 'q', M(queue)),
    CLI_STR("class", 1002, M(name)),
    CLI_STR("status", 1003, M(status)),
    CLI_STR("outcome", 1003, M(status)),
    CLI_STR("since", 1004, M(since)),
    CLI_STR("until", 1005, M(until)),
    CLI_OPTS_END,
};
#undef M

int cmd_metrics(const cli_cmd_t *cmd, int argc, char **argv)
{
    metrics_args_t a = {.conn = "default", .minutes = 60};
    int status;
    if (cli_parse(cmd, argc, argv, "c:m:jp:q:h", OPTS, &a, "unknown option", &status) < 0) return status;
    if (optind < argc) {
        cli_usage_error("metrics", "no arguments expected");
        return EXIT_USAGE;
    }
    int64_t from, to;
    if (minute_range(&a, wall_ms() / 1000, &from, &to) < 0) {
        cli_usage_error("metrics", "--since/--until: unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age "
                                   "such as 30m, 1h, 2d; since before until, at most 31 days apart");
        return EXIT_USAGE;
    }
    cli_redis_t x;
    if (cli_redis_open("metrics", a.cfg, a.conn, &x, &status) < 0) return status;
    cJSON *h = history_read(x.r, from, to);
    if (h) filter_minutes(&a, h);
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
