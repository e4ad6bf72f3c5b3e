/*
 * cli_appfailed.c - `qpool failed list|show|retry|forget ... --app POOL`:
 * the failed jobs of the app's own failer (failed_jobs), where an
 * app_driver pool's failures go, through the running master and the pool's
 * app agent (the control socket's "app" command, master/mapp.h), as
 * `php artisan queue:failed`, `queue:retry` and `queue:forget` see them.
 * What the app says is text from it: escaped before it reaches a terminal.
 */
#include "cli/cli.h"
#include "cli/cli_audit.h"
#include "redis/failed_search.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define APP_WAIT_MS 40000 /* beyond the master's own wait for the agent (MAPP_WAIT_MS) */

static const char *str(const cJSON *o, const char *k) { return cli_json_str(o, k); }

/* The filter's members of a list request; -1 on a bad time (said). */
static int add_filter(cJSON *r, const app_failed_args_t *a)
{
    const char *keys[] = {"queue", "class", "uuid", "text", "tag"};
    const char *vals[] = {a->queue ? a->queue : (a->nargs ? a->args[0] : NULL), a->name, a->uuid, a->text, a->tag};
    for (size_t i = 0; i < ARRAY_LEN(keys); i++)
        if (vals[i]) cJSON_AddStringToObject(r, keys[i], vals[i]);
    const char *times[] = {a->since, a->until};
    for (int i = 0; i < 2; i++) {
        long long t;
        if (!times[i]) continue;
        if (ffilter_time(times[i], wall_s(), &t) < 0 || t < 0) {
            fprintf(stderr, "qpool failed: --since, --until: unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age "
                            "(30m, 1h, 2d)\n");
            return -1;
        }
        cJSON_AddNumberToObject(r, i ? "until" : "since", (double)t);
    }
    if (a->limit > 0) cJSON_AddNumberToObject(r, "limit", (double)(a->limit > 50 ? 50 : a->limit));
    if (a->offset > 0) cJSON_AddNumberToObject(r, "offset", (double)a->offset);
    return 0;
}

/* The request of sub, or NULL (usage error said). */
static cJSON *request_of(const char *sub, const app_failed_args_t *a)
{
    cJSON *r = cJSON_CreateObject();
    if (!strcmp(sub, "list")) {
        cJSON_AddStringToObject(r, "op", "failed");
        if (add_filter(r, a) == 0) return r;
    } else if (!strcmp(sub, "show") && a->nargs == 1) {
        cJSON_AddStringToObject(r, "op", "failed-show");
        cJSON_AddStringToObject(r, "job", a->args[0]);
        return r;
    } else if ((!strcmp(sub, "retry") || !strcmp(sub, "forget")) && a->nargs >= 1 && a->nargs <= 100) {
        cJSON_AddStringToObject(r, "op", !strcmp(sub, "retry") ? "failed-retry" : "failed-forget");
        cJSON *ids = cJSON_AddArrayToObject(r, "jobs");
        for (int i = 0; i < a->nargs; i++) cJSON_AddItemToArray(ids, cJSON_CreateString(a->args[i]));
        return r;
    } else
        cli_usage_error("failed", "with --app: list [QUEUE] [FILTER] [--limit N] [--offset N], show ID, retry ID..., "
                                  "forget ID... (1 to 100 ids; `qpool failed list --app POOL` shows them)");
    cJSON_Delete(r);
    return NULL;
}

static void fmt_time(const cJSON *o, const char *k, char *buf, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsNumber(v))
        utc_text(v->valuedouble, buf, n);
    else
        snprintf(buf, n, "%-19s", "?");
}

static void print_list(const cJSON *rep)
{
    printf("%-36s  %-16s  %-19s  %-30s  %s\n", "ID", "QUEUE", "FAILED AT (UTC)", "JOB", "EXCEPTION");
    const cJSON *f, *list = cJSON_GetObjectItemCaseSensitive(rep, "failed");
    int n = 0;
    cJSON_ArrayForEach(f, list) {
        char when[32];
        fmt_time(f, "failed_at", when, sizeof when);
        const char *e = str(f, "exception");
        printf("%-36s  %-16s  %s  %-30s  %.*s\n", str(f, "id"), str(f, "queue"), when, str(f, "class"),
               (int)utf8_cut(e, strlen(e), 100), e);
        n++;
    }
    double total = cli_json_num(rep, "total"), offset = cli_json_num(rep, "offset");
    if (!n) printf("(no failed jobs)\n");
    bool partial = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "partial"));
    printf("%d of %s%.0f failed jobs in the app's failer (pool %s)", n, partial ? "at least " : "", total, str(rep, "pool"));
    if (offset + n < total) printf("; more: --offset %.0f", offset + n);
    printf("%s\n", partial ? " (the agent stopped counting: a filter's search after 3 s, a count at 10,000 rows)" : "");
}

/* rep's strings are escaped whole; the exception and the payload keep
 * their lines, from the reply as it came (raw), escaped but for those. */
static void print_show(const cJSON *rep, const char *raw)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(rep, "job");
    char when[32];
    fmt_time(j, "failed_at", when, sizeof when);
    printf("id:         %s\nuuid:       %s\nconnection: %s\nqueue:      %s\njob:        %s\nfailed at:  %s UTC\n",
           str(j, "id"), str(j, "uuid"), str(j, "connection"), str(j, "queue"), str(j, "class"), when);
    cJSON *orig = cJSON_Parse(raw);
    const cJSON *oj = cJSON_GetObjectItemCaseSensitive(orig, "job");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(oj, "exception"), *p = cJSON_GetObjectItemCaseSensitive(oj, "payload");
    char *exc = cJSON_IsString(e) ? text_escape(e->valuestring, strlen(e->valuestring), TEXT_KEEP_NEWLINES) : NULL;
    char *pay = cJSON_IsString(p) ? text_escape(p->valuestring, strlen(p->valuestring), TEXT_KEEP_NEWLINES) : NULL;
    printf("exception:\n%s\npayload:\n%s\n", exc ? exc : "", pay ? pay : "");
    FREE_ALL(exc, pay);
    cJSON_Delete(orig);
}

/* retry, forget: what was done to each id; -1 when one was not found, or
 * not retried (the agent's time ran out, or its push failed: its row stays). */
static int print_acted(const char *sub, const cJSON *rep)
{
    bool retry = !strcmp(sub, "retry");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(rep, retry ? "retried" : "forgotten"))
        if (cJSON_IsString(e)) printf("%s %s\n", retry ? "pushed back" : "forgot", e->valuestring);
    int missing = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(rep, "missing"))
        if (cJSON_IsString(e) && ++missing) fprintf(stderr, "qpool failed: no failed job %s in the app's failer\n", e->valuestring);
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(rep, "not_done"))
        if (cJSON_IsString(e) && ++missing)
            fprintf(stderr, "qpool failed: %s not retried (time ran out, or its push failed): it stays in the app's failer\n",
                    e->valuestring);
    return missing ? -1 : 0;
}

/* The reply as text (cli_ctl_call made its strings fit for a terminal), or
 * as it came (--json); retry and forget: -1 when a job was not found. */
static int print_reply(const char *sub, const app_failed_args_t *a, const cJSON *rep, const char *raw)
{
    if (a->json) {
        printf("%s\n", raw);
        return 0;
    }
    if (!strcmp(sub, "list")) print_list(rep);
    if (!strcmp(sub, "show")) print_show(rep, raw);
    return !strcmp(sub, "retry") || !strcmp(sub, "forget") ? print_acted(sub, rep) : 0;
}

int cli_app_failed(const char *sub, const app_failed_args_t *a)
{
    cJSON *r = request_of(sub, a);
    if (!r) return EXIT_USAGE;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", "app");
    cJSON_AddStringToObject(req, "pool", a->pool);
    cJSON_AddItemToObject(req, "request", r);
    char *line = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    cJSON *rep = NULL;
    char *raw = NULL;
    bool answered = false;
    int rv = cli_ctl_call(a->cfg, line, APP_WAIT_MS, &rep, &raw);
    free(line);
    if (rv == 0 && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "ok"))) {
        if (a->json) printf("%s\n", raw);
        fprintf(stderr, "qpool failed: %s\n", str(rep, "error"));
        rv = 1;
    } else if (rv == 0) {
        rv = print_reply(sub, a, rep, raw) < 0 ? 1 : 0;
        answered = true; /* some ids may be missing or not done: the rest were acted on */
    }
    if (answered && (!strcmp(sub, "retry") || !strcmp(sub, "forget"))) {
        char what[96];
        snprintf(what, sizeof what, "%s %d failed jobs of pool %.40s's app", sub, a->nargs, a->pool);
        cli_audit("failed", what, "");
    }
    cJSON_Delete(rep);
    free(raw);
    return rv;
}
