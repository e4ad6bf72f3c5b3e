/*
 * cli_failed.c - `qpool failed`: list, show, retry, forget and flush jobs in
 * qpool's failed store (layout in queue.h). Retry and forget are Lua
 * scripts, so a job is never both back on its queue and still listed, nor
 * gone from both. A table has a row per subcommand: the operands it takes
 * and what runs it.
 */
#include "cli/cli.h"
#include "cli/cli_audit.h"
#include "redis/failed.h"
#include "redis/failed_search.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <limits.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The command line, parsed. */
typedef struct {
    const char *cfg, *conn, *queue;
    const char *name, *uuid, *text, *since, *until, *tag, *pool, *host; /* a filter (with queue) */
    const char *app; /* --app POOL: the app's failer, through the master (cli_appfailed.c) */
    bool json, all, yes;
    long limit, offset;
    int nargs; /* the operands after the subcommand */
    char **args;
} failed_args_t;

#define F(m) offsetof(failed_args_t, m)
static const cli_opt_t OPTS[] = {
    CLI_REDIS_OPTS(failed_args_t),
    CLI_TRUE("json", 'j', F(json)),
    CLI_TRUE("all", 'a', F(all)),
    CLI_STR("queue", 'q', F(queue)),
    CLI_STR("class", 1001, F(name)),
    CLI_STR("uuid", 1002, F(uuid)),
    CLI_STR("text", 1003, F(text)),
    CLI_STR("q", 1003, F(text)),
    CLI_STR("since", 1004, F(since)),
    CLI_STR("until", 1005, F(until)),
    CLI_STR("tag", 1006, F(tag)),
    CLI_STR("pool", 1007, F(pool)),
    CLI_STR("host", 1008, F(host)),
    CLI_TRUE("yes", 'y', F(yes)),
    CLI_LONG("limit", 'l', F(limit), 1, LONG_MAX, "--limit: expected a positive number"),
    CLI_STR("app", 1009, F(app)),
    CLI_LONG("offset", 1010, F(offset), 0, LONG_MAX, "--offset: expected a number, 0 or more"),
    CLI_OPTS_END,
};
#undef F

/* s fit for a terminal: a producer's newline makes no row, its ESC
 * sequences reach no terminal (text_escape, util.h). Caller frees. */
static char *tty(const char *s)
{
    return text_escape(s, s ? strlen(s) : 0, 0);
}

/* A row: f's uuid, queue, time and exception, and the job's name. */
static void text_row(const frec_t *f, const char *job)
{
    char when[32];
    utc_text((double)f->failed_at, when, sizeof when);
    const char *exc = f->exception ? f->exception : "";
    char *e = text_escape(exc, strcspn(exc, "\n"), 0); /* its first line */
    char *uuid = tty(f->uuid), *queue = tty(f->queue), *name = tty(job);
    printf("%-36s  %-16s  %-19s  %-30s  %.*s\n", uuid, queue, when, name, (int)utf8_cut(e, strlen(e), 100), e);
    FREE_ALL(e, uuid, queue, name);
}

static void text_record_line(const frec_t *f)
{
    job_payload_t jp;
    char err[64];
    bool parsed = payload_parse(f->payload, f->payload_len, &jp, err, sizeof err) == 0;
    text_row(f, parsed ? payload_name(&jp) : "(invalid payload)");
    if (parsed) payload_free(&jp);
}

static bool get_record(rconn_t *r, const char *uuid, frec_t *f)
{
    return failed_get(r, uuid, f) == 0;
}

static redisReply *said(rconn_t *r, redisReply *rep)
{
    if (!rep) fprintf(stderr, "qpool failed: redis: %s\n", r->last_error);
    return rep;
}

static void json_record(sbuf_t *b, const frec_t *f, bool with_payload)
{
    cJSON *o = failed_json(f, with_payload);
    char *s = cJSON_PrintUnformatted(o);
    sbuf_utf8(b, s, strlen(s)); /* JSON is UTF-8, whatever an older writer stored */
    free(s);
    cJSON_Delete(o);
}

/* The queues a subcommand goes through: the one named, or every queue
 * with failed jobs. */
typedef struct {
    const char *one[1];
    const char **names;
    int n;
    redisReply *all;
} fqueues_t;

/* 0, or -1 (said why). */
static int queues_get(rconn_t *r, const char *queue, fqueues_t *q)
{
    *q = (fqueues_t){.one = {queue}, .n = 1};
    q->names = q->one;
    if (queue) return 0;
    q->all = said(r, failed_queues(r));
    if (!q->all) return -1;
    q->n = (int)q->all->elements;
    q->names = xcalloc((size_t)q->n + 1, sizeof *q->names);
    for (int i = 0; i < q->n; i++) q->names[i] = q->all->element[i]->str;
    return 0;
}

static void queues_free(fqueues_t *q)
{
    if (!q->all) return;
    free(q->names);
    freeReplyObject(q->all);
}

/* each(r, uuid, arg) for the failed jobs of q's queues, at most limit a
 * queue (0: all of them). 0, or -1 (said why). */
static int each_failed(rconn_t *r, const fqueues_t *q, long limit, void (*each)(rconn_t *, const char *, void *),
                       void *arg)
{
    for (int i = 0; i < q->n; i++) {
        redisReply *u = said(r, failed_queue_uuids(r, q->names[i], limit));
        if (!u) return -1;
        for (size_t j = 0; j < u->elements; j++) each(r, u->element[j]->str, arg);
        freeReplyObject(u);
    }
    return 0;
}

typedef struct {
    bool json;
    int shown;
    sbuf_t b; /* --json: the array */
} listing_t;

static void list_one(rconn_t *r, const char *uuid, void *arg)
{
    listing_t *l = arg;
    frec_t f;
    if (!get_record(r, uuid, &f)) return;
    if (l->json) {
        if (l->shown) sbuf_puts(&l->b, ",");
        json_record(&l->b, &f, true);
    } else
        text_record_line(&f);
    l->shown++;
    frec_free(&f);
}

/* A record of a search (failed_json without its payload) as a row. */
static void list_json(listing_t *l, const cJSON *o)
{
    if (l->json) {
        char *txt = cJSON_PrintUnformatted(o);
        if (l->shown) sbuf_puts(&l->b, ",");
        sbuf_utf8(&l->b, txt, strlen(txt));
        free(txt);
    } else {
        const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "failed_at");
        frec_t f = {.uuid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "uuid")),
                    .queue = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "queue")),
                    .exception = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "exception")),
                    .failed_at = cJSON_IsNumber(at) ? (long long)at->valuedouble : 0};
        text_row(&f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "name")));
    }
    l->shown++;
}

/* ------------------------------------------------------------ by filter */

static bool has_filter(const failed_args_t *a)
{
    return a->name || a->uuid || a->text || a->since || a->until || a->tag || a->pool || a->host;
}

/* The filter the options name into f; -1 (said why) when a time is
 * malformed. */
static int filter_of(const failed_args_t *a, ffilter_t *f)
{
    *f = (ffilter_t){.queue = a->queue, .name = a->name, .uuid = a->uuid, .q = a->text, .tag = a->tag,
                     .pool = a->pool, .host = a->host};
    if (a->since && ffilter_time(a->since, wall_s(), &f->since) < 0) return -1;
    if (a->until && ffilter_time(a->until, wall_s(), &f->until) < 0) return -1;
    return 0;
}

/* Walk the store by filter with act, every step to the end (a list: until
 * limit records, 0: all). The walk's totals in *sum; 0, or -1 (said why). */
static int walk_all(rconn_t *r, const failed_args_t *a, fwalk_act_t act, fwalk_t *sum, listing_t *l)
{
    fwalk_t w = {.act = act};
    if (filter_of(a, &w.f) < 0) {
        fprintf(stderr, "qpool failed: --since, --until: unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age "
                        "such as 30m, 1h, 2d\n");
        return -1;
    }
    char err[300];
    int rv = 0;
    do {
        w.limit = a->limit > 0 ? a->limit - sum->matched : 0;
        if (failed_walk(r, &w, err, sizeof err) < 0) {
            fprintf(stderr, "qpool failed: redis: %s\n", err);
            rv = -1;
            break;
        }
        sum->matched += w.matched, sum->acted += w.acted, sum->kept += w.kept;
        for (int i = 0; l && i < cJSON_GetArraySize(w.list); i++) list_json(l, cJSON_GetArrayItem(w.list, i));
        if (w.list) cJSON_Delete(w.list), w.list = NULL;
    } while (w.cur.queue && !(a->limit > 0 && sum->matched >= a->limit));
    fwalk_free(&w);
    return rv;
}

/* The record of a bulk action (cli_audit.h): the filter's options as typed. */
static void audit(const failed_args_t *a, const char *what)
{
    sbuf_t f;
    sbuf_init(&f);
    sbuf_puts(&f, "");
    cli_audit_arg(&f, "--queue", a->queue);
    cli_audit_arg(&f, "--pool", a->pool);
    cli_audit_arg(&f, "--host", a->host);
    cli_audit_filter(&f, a->name, a->uuid, a->text, a->tag, a->since, a->until);
    if (a->all && !has_filter(a)) sbuf_puts(&f, " --all");
    cli_audit("failed", what, f.data);
    sbuf_free(&f);
}

/* retry or forget by filter: a dry run (the count) unless --yes or --all. */
static int act_by_filter(rconn_t *r, const failed_args_t *a, fwalk_act_t act)
{
    bool dry = !a->yes && !a->all;
    fwalk_t sum = {.act = act};
    int rv = walk_all(r, a, dry ? FWALK_COUNT : act, &sum, NULL);
    const char *verb = act == FWALK_RETRY ? "retry" : "forget";
    if (rv == 0 && dry)
        printf("%ld failed jobs match; run again with --yes to %s them\n", sum.matched, verb);
    else if (rv == 0 || sum.acted)
        printf("%s %ld failed jobs\n", act == FWALK_RETRY ? "retried" : "forgot", sum.acted);
    if (!dry) {
        char what[96];
        snprintf(what, sizeof what, "%s %ld failed jobs%s", act == FWALK_RETRY ? "retried" : "forgot", sum.acted,
                 rv < 0 ? " (stopped by an error)" : "");
        audit(a, what);
    }
    if (sum.kept)
        fprintf(stderr, "qpool failed: %d jobs kept their retryUntil: their payloads do not say when they were "
                        "dispatched\n", sum.kept);
    return rv;
}

/* list by filter: newest first, queue by queue; --limit N in all. */
static int list_by_filter(rconn_t *r, const failed_args_t *a)
{
    listing_t l = {.json = a->json};
    sbuf_init(&l.b);
    sbuf_puts(&l.b, "[");
    if (!a->json) printf("%-36s  %-16s  %-19s  %-30s  %s\n", "UUID", "QUEUE", "FAILED AT (UTC)", "JOB", "EXCEPTION");
    fwalk_t sum = {.act = FWALK_LIST};
    int rv = walk_all(r, a, FWALK_LIST, &sum, &l);
    sbuf_puts(&l.b, "]");
    if (a->json && rv == 0)
        printf("%s\n", l.b.data);
    else if (!l.shown && rv == 0)
        printf("(no failed jobs match)\n");
    sbuf_free(&l.b);
    return rv;
}

static int do_list(rconn_t *r, const failed_args_t *a)
{
    if (has_filter(a)) return list_by_filter(r, a);
    fqueues_t q;
    if (queues_get(r, a->nargs ? a->args[0] : NULL, &q) < 0) return -1;
    listing_t l = {.json = a->json};
    sbuf_init(&l.b);
    sbuf_puts(&l.b, "[");
    if (!a->json) printf("%-36s  %-16s  %-19s  %-30s  %s\n", "UUID", "QUEUE", "FAILED AT (UTC)", "JOB", "EXCEPTION");
    int rv = each_failed(r, &q, a->limit, list_one, &l);
    sbuf_puts(&l.b, "]");
    if (a->json)
        printf("%s\n", l.b.data);
    else if (!l.shown)
        printf("(no failed jobs)\n");
    sbuf_free(&l.b);
    queues_free(&q);
    return rv;
}

/* failed show, as text: the exception and the payload keep their lines;
 * nothing else a terminal acts on gets through (--json: the exact text). */
static void show_text(const frec_t *f)
{
    char when[32];
    utc_text((double)f->failed_at, when, sizeof when);
    char *id = tty(f->uuid), *conn = tty(f->connection), *queue = tty(f->queue);
    char *exc = text_escape(f->exception, f->exception ? strlen(f->exception) : 0, TEXT_KEEP_NEWLINES);
    char *payload = text_escape(f->payload, f->payload_len, TEXT_KEEP_NEWLINES);
    printf("uuid:       %s\nconnection: %s\nqueue:      %s\nfailed at:  %s UTC\n", id, conn, queue, when);
    char *pool = tty(f->pool ? f->pool : "?"), *host = tty(f->host ? f->host : "?"); /* ?: not recorded */
    printf("pool:       %s\nhost:       %s\n", pool, host);
    printf("exception:\n%s\npayload (%zu bytes):\n%s\n", exc, f->payload_len, payload);
    FREE_ALL(id, conn, queue, exc, payload, pool, host);
}

static int do_show(rconn_t *r, const failed_args_t *a)
{
    const char *uuid = a->args[0];
    frec_t f;
    if (!get_record(r, uuid, &f)) {
        fprintf(stderr, "qpool failed: no failed job %s\n", uuid);
        return -1;
    }
    if (a->json) {
        sbuf_t b;
        sbuf_init(&b);
        json_record(&b, &f, true);
        printf("%s\n", b.data);
        sbuf_free(&b);
    } else
        show_text(&f);
    frec_free(&f);
    return 0;
}

static int retry_one(rconn_t *r, const char *uuid)
{
    char queue[256] = "", err[300] = "";
    bool kept = false;
    int rv = failed_retry(r, uuid, queue, sizeof queue, &kept, err, sizeof err);
    if (kept)
        fprintf(stderr, "qpool failed: %s: retryUntil left as it was: the payload does not say when it was "
                        "dispatched (Laravel before 12.11), so the job may fail again at once; "
                        "`php artisan queue:retry` can recompute it from the job class\n", uuid);
    if (rv > 0) {
        char *q = tty(queue);
        printf("pushed %s back onto %s\n", uuid, q);
        free(q);
        return 0;
    }
    if (rv == 0) /* someone else retried or forgot it meanwhile: never push it twice */
        fprintf(stderr, "qpool failed: no failed job %s (or no longer in the failed store)\n", uuid);
    else
        fprintf(stderr, "qpool failed: retry %s: %s\n", uuid, err);
    return -1;
}

/* Every failed job (of a queue), a page (one script per batch) at a time,
 * as the HTTP API does it. */
static int retry_all(rconn_t *r, const failed_args_t *a)
{
    const char *queue = a->queue;
    failed_page_t pg = {.queue = queue};
    char err[300];
    int n = 0, kept = 0, rv = 0;
    do {
        if (failed_retry_page(r, &pg, err, sizeof err) < 0) {
            fprintf(stderr, "qpool failed: retry: %s\n", err);
            rv = -1;
            break;
        }
        n += pg.retried;
        kept += pg.kept;
    } while (pg.remaining > 0);
    free(pg.at_queue);
    if (kept)
        fprintf(stderr, "qpool failed: %d jobs kept their retryUntil: their payloads do not say when they were "
                        "dispatched\n", kept);
    printf("retried %d failed jobs\n", n);
    char what[96];
    snprintf(what, sizeof what, "retried %d failed jobs%s", n, rv < 0 ? " (stopped by an error)" : "");
    audit(a, what);
    return rv;
}

static int do_retry(rconn_t *r, const failed_args_t *a)
{
    if (!a->nargs && (has_filter(a) || (a->queue && !a->all))) return act_by_filter(r, a, FWALK_RETRY);
    if (a->all) return retry_all(r, a);
    int rv = 0;
    for (int i = 0; i < a->nargs; i++)
        if (retry_one(r, a->args[i]) < 0) rv = -1;
    return rv;
}

static int forget_one(rconn_t *r, const char *uuid, bool quiet)
{
    int rv = failed_forget(r, uuid);
    if (rv > 0 && !quiet) printf("forgot %s\n", uuid);
    if (rv == 0 && !quiet) fprintf(stderr, "qpool failed: no failed job %s\n", uuid);
    return rv > 0 ? 0 : -1;
}

static int do_forget(rconn_t *r, const failed_args_t *a)
{
    if (!a->nargs && (has_filter(a) || a->queue)) return act_by_filter(r, a, FWALK_FORGET);
    int rv = 0;
    for (int i = 0; i < a->nargs; i++)
        if (forget_one(r, a->args[i], false) < 0) rv = -1;
    return rv;
}

static void flush_one(rconn_t *r, const char *uuid, void *arg)
{
    if (forget_one(r, uuid, true) == 0) ++*(int *)arg;
}

static int do_flush(rconn_t *r, const failed_args_t *a)
{
    fqueues_t q;
    if (queues_get(r, a->nargs ? a->args[0] : NULL, &q) < 0) return -1;
    int n = 0;
    int rv = each_failed(r, &q, 0, flush_one, &n);
    printf("flushed %d failed jobs\n", n);
    char what[64];
    snprintf(what, sizeof what, "flushed %d failed jobs%s", n, rv < 0 ? " (stopped by an error)" : "");
    failed_args_t of = {.queue = a->nargs ? a->args[0] : NULL};
    audit(&of, what);
    queues_free(&q);
    return rv;
}

typedef struct {
    const char *name;
    int min, max;       /* how many operands (with --all: retry takes none) */
    const char *misfit; /* the usage error when they do not fit */
    int (*run)(rconn_t *r, const failed_args_t *a); /* 0, or -1 (said why) */
} failed_cmd_t;

static const failed_cmd_t SUBCOMMANDS[] = {
    {"list", 0, 1, "list takes at most one QUEUE", do_list},
    {"show", 1, 1, "show takes one UUID", do_show},
    {"retry", 1, INT_MAX, "retry takes UUIDs, or --all [--queue QUEUE], or a filter", do_retry},
    {"forget", 1, INT_MAX, "forget takes one or more UUIDs, or a filter", do_forget},
    {"flush", 0, 1, "flush takes at most one QUEUE", do_flush},
};

/* The options, the subcommand and its operands. The subcommand, or NULL:
 * stop with exit status *status. */
static const failed_cmd_t *parse_failed(const cli_cmd_t *cmd, int argc, char **argv, failed_args_t *a, int *status)
{
    if (cli_parse(cmd, argc, argv, "c:jq:hy", OPTS, a, "invalid option", status) < 0) return NULL;
    *status = EXIT_USAGE;
    if (optind >= argc) {
        cli_usage_error("failed", "expected a subcommand: list, show, retry, forget, flush");
        return NULL;
    }
    const char *sub = argv[optind++];
    a->nargs = argc - optind;
    a->args = argv + optind;
    const failed_cmd_t *f = NULL;
    for (size_t i = 0; i < ARRAY_LEN(SUBCOMMANDS) && !f; i++)
        if (!strcmp(SUBCOMMANDS[i].name, sub)) f = &SUBCOMMANDS[i];
    if (!f) {
        cli_usage_error("failed", "unknown subcommand '%s'", sub);
        return NULL;
    }
    bool acts = f->run == do_retry || f->run == do_forget;
    bool fits = a->nargs >= f->min && a->nargs <= f->max;
    if (acts && !a->nargs && (has_filter(a) || a->queue)) fits = true; /* by filter */
    if ((f->run == do_retry && a->all) || (acts && has_filter(a))) fits = !a->nargs;
    if (!fits) {
        cli_usage_error("failed", "%s", f->misfit);
        return NULL;
    }
    return f;
}

/* list: the pools whose failures are in their app's failer, not here (on
 * stderr: the table on stdout stays as it was). */
static void app_hint(const qconf_t *c)
{
    for (int i = 0; i < c->npools; i++)
        if (c->pools[i].app_driver)
            fprintf(stderr, "pool %s runs through its app's driver: its failures are in the app's failer: "
                            "qpool failed list --app %s\n", c->pools[i].name, c->pools[i].name);
}

/* --app POOL: list, show, retry and forget in the app's failer. */
static int app_failed(int argc, char **argv, const failed_args_t *a)
{
    const char *sub = argc > 0 ? argv[0] : "";
    if (a->all || a->yes || a->pool || a->host || !strcmp(sub, "flush")) {
        cli_usage_error("failed", "with --app: list, show, retry ID..., forget ID... (no --all, --yes, --pool, --host "
                                  "or flush: `php artisan queue:flush` empties the app's failer)");
        return EXIT_USAGE;
    }
    if ((!strcmp(sub, "retry") || !strcmp(sub, "forget")) && (has_filter(a) || a->queue)) {
        cli_usage_error("failed", "with --app, retry and forget take job ids: `qpool failed list --app %s` shows them",
                        a->app);
        return EXIT_USAGE;
    }
    app_failed_args_t x = {.cfg = a->cfg, .pool = a->app, .queue = a->queue, .name = a->name, .uuid = a->uuid,
                           .text = a->text, .since = a->since, .until = a->until, .tag = a->tag, .json = a->json,
                           .limit = a->limit, .offset = a->offset, .nargs = argc - 1, .args = argv + 1};
    return cli_app_failed(sub, &x);
}

int cmd_failed(const cli_cmd_t *cmd, int argc, char **argv)
{
    failed_args_t a = {.conn = "default"};
    int status;
    const failed_cmd_t *f = parse_failed(cmd, argc, argv, &a, &status);
    if (!f) return status;
    if (a.app) return app_failed(argc - optind + 1, argv + optind - 1, &a);
    if (a.offset) {
        cli_usage_error("failed", "--offset goes with --app");
        return EXIT_USAGE;
    }
    cli_redis_t x;
    if (cli_redis_open("failed", a.cfg, a.conn, &x, &status) < 0) return status;
    char **queues = config_connection_queues(x.conf, a.conn);
    failed_use_queues(queues);
    free_strv(queues);
    int rv = cli_redis_reach(&x, false) < 0 || f->run(x.r, &a) < 0 ? 1 : 0;
    if (f->run == do_list && !a.json) app_hint(x.conf);
    cli_redis_close(&x);
    return rv;
}
