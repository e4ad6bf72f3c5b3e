/*
 * cli_batch.c - `qpool batches ID`: one batch of the master's list, and its
 * jobs as the job history saw them (batchjobs.h), read from the Redis of
 * the batch's pool.
 */
#include "cli/cli.h"
#include "observe/batchjobs.h"
#include "observe/jobhist.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The batch's jobs into rep ("jobs" and "jobs_kept", or "jobs": null and
 * "jobs_error"), from the connection of the pool (its "pool"). */
void cli_batch_jobs(const char *cfg, const char *id, cJSON *rep)
{
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rep, "batch"), "pool");
    int status;
    qconf_t *conf = cli_load_config(cfg, &status);
    const pool_conf_t *p = conf && cJSON_IsString(pool) ? config_pool(conf, pool->valuestring) : NULL;
    char *conn = xstrdup(p && p->connection ? p->connection : "default");
    if (conf) config_free(conf);
    cli_redis_t x;
    cJSON *got = NULL;
    char err[300] = "";
    if (cli_redis_open("batches", cfg, conn, &x, &status) == 0) {
        got = batchjobs_read(x.r, id, BATCHJOBS_KEEP);
        if (!got) snprintf(err, sizeof err, "cannot reach redis %s: %s", conn, x.r->last_error[0] ? x.r->last_error : "unavailable");
        cli_redis_close(&x);
    } else
        snprintf(err, sizeof err, "no Redis connection %s to read its jobs from", conn);
    free(conn);
    if (!got) {
        cJSON_AddNullToObject(rep, "jobs");
        cJSON_AddStringToObject(rep, "jobs_error", err);
        return;
    }
    cJSON_AddItemToObject(rep, "jobs", cJSON_DetachItemFromObjectCaseSensitive(got, "jobs"));
    cJSON_AddItemToObject(rep, "jobs_kept", cJSON_DetachItemFromObjectCaseSensitive(got, "kept"));
    cJSON_Delete(got);
}

static void print_when(const char *label, const cJSON *t)
{
    if (!cJSON_IsNumber(t)) return;
    char buf[32];
    const char *s = utc_text(t->valuedouble, buf, sizeof buf);
    printf("%-10s %s%s\n", label, s, strcmp(s, "-") ? " UTC" : "");
}

/* One job row: uuid, class, outcome, runtime, finished (UTC). */
static void print_job(const cJSON *j)
{
    char when[32] = "-";
    double f = cli_json_num(j, "finished_at");
    if (f > 0) utc_text(f / 1000, when, sizeof when);
    const char *name = cli_json_str(j, "name");
    int cut = (int)utf8_cut(name, strlen(name), 40);
    printf("%-36s  %-40.*s %-9s %10.1f  %s\n", cli_json_str(j, "uuid"), cut, name, cli_json_str(j, "outcome"),
           cli_json_num(j, "runtime_ms"), when);
}

void cli_batch_print(cJSON *rep)
{
    cli_json_text(rep);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(rep, "batch"), *j;
    printf("%-10s %s\n%-10s %s\n%-10s %s\n", "id", cli_json_str(b, "id"), "name", cli_json_str(b, "name"), "pool",
           cli_json_str(b, "pool"));
    printf("%-10s %.0f%%: %.0f of %.0f processed, %.0f pending, %.0f failed\n", "progress", cli_json_num(b, "progress"),
           cli_json_num(b, "processed"), cli_json_num(b, "total"), cli_json_num(b, "pending"), cli_json_num(b, "failed"));
    print_when("created", cJSON_GetObjectItemCaseSensitive(b, "created_at"));
    print_when("finished", cJSON_GetObjectItemCaseSensitive(b, "finished_at"));
    print_when("cancelled", cJSON_GetObjectItemCaseSensitive(b, "cancelled_at"));
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(rep, "jobs");
    if (!cJSON_IsArray(jobs)) {
        printf("jobs: %s\n", cli_json_str(rep, "jobs_error"));
        return;
    }
    printf("\njobs (%d of the %.0f the job history kept, at most %d per batch):\n", cJSON_GetArraySize(jobs),
           cli_json_num(rep, "jobs_kept"), BATCHJOBS_KEEP);
    printf("%-36s  %-40s %-9s %10s  %s\n", "UUID", "CLASS", "OUTCOME", "RUNTIME_MS", "FINISHED (UTC)");
    cJSON_ArrayForEach(j, jobs) print_job(j);
}
