/*
 * cli_failed.c - `qpool failed`: list, show, retry, forget and flush jobs in
 * qpool's failed store (layout in queue.h). Retry and forget are Lua
 * scripts, so a job is never both back on its queue and still listed, nor
 * gone from both.
 */
#include "cli/cli.h"
#include "redis/failed.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void fmt_time(long long t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

typedef struct {
    rconn_t *r;
    const char *prefix;
    char *set_key;
    char *job_prefix;
} fctx_t;

static void text_record_line(const frec_t *f)
{
    char when[32];
    fmt_time(f->failed_at, when, sizeof when);
    job_payload_t jp;
    char err[64];
    bool parsed = payload_parse(f->payload, f->payload_len, &jp, err, sizeof err) == 0;
    const char *exc = f->exception ? f->exception : "";
    size_t el = strcspn(exc, "\n");
    if (el > 100) el = 100;
    printf("%-36s  %-16s  %s  %-30s  %.*s\n", f->uuid, f->queue, when,
           parsed ? payload_name(&jp) : "(invalid payload)", (int)el, exc);
    if (parsed) payload_free(&jp);
}

static bool get_record(fctx_t *x, const char *uuid, frec_t *f)
{
    return failed_get(x->r, uuid, f) == 0;
}

static redisReply *queue_uuids(fctx_t *x, const char *queue, long limit)
{
    redisReply *r = failed_queue_uuids(x->r, queue, limit);
    if (!r) fprintf(stderr, "qpool failed: redis: %s\n", x->r->last_error);
    return r;
}

static redisReply *all_queues(fctx_t *x)
{
    redisReply *r = failed_queues(x->r);
    if (!r) fprintf(stderr, "qpool failed: redis: %s\n", x->r->last_error);
    return r;
}

static void json_record(sbuf_t *b, const frec_t *f, bool with_payload)
{
    cJSON *o = failed_json(f, with_payload);
    char *s = cJSON_PrintUnformatted(o);
    sbuf_utf8(b, s, strlen(s)); /* JSON is UTF-8, whatever an older writer stored */
    free(s);
    cJSON_Delete(o);
}

static int do_list(fctx_t *x, const char *queue, bool json, long limit)
{
    redisReply *qs = NULL;
    const char *one[1] = {queue};
    int nq = 1;
    const char **names = one;
    if (!queue) {
        qs = all_queues(x);
        if (!qs) return 1;
        nq = (int)qs->elements;
        names = xcalloc((size_t)nq + 1, sizeof *names);
        for (int i = 0; i < nq; i++) names[i] = qs->element[i]->str;
    }
    sbuf_t b;
    sbuf_init(&b);
    sbuf_puts(&b, "[");
    int shown = 0, rv = 0;
    if (!json) printf("%-36s  %-16s  %-19s  %-30s  %s\n", "UUID", "QUEUE", "FAILED AT (UTC)", "JOB", "EXCEPTION");
    for (int i = 0; i < nq; i++) {
        redisReply *u = queue_uuids(x, names[i], limit);
        if (!u) {
            rv = 1;
            break;
        }
        for (size_t j = 0; j < u->elements; j++) {
            frec_t f;
            if (!get_record(x, u->element[j]->str, &f)) continue;
            if (json) {
                if (shown) sbuf_puts(&b, ",");
                json_record(&b, &f, true);
            } else
                text_record_line(&f);
            shown++;
            frec_free(&f);
        }
        freeReplyObject(u);
    }
    sbuf_puts(&b, "]");
    if (json) printf("%s\n", b.data);
    else if (!shown) printf("(no failed jobs)\n");
    sbuf_free(&b);
    if (qs) {
        free(names);
        freeReplyObject(qs);
    }
    return rv;
}

static int do_show(fctx_t *x, const char *uuid, bool json)
{
    frec_t f;
    if (!get_record(x, uuid, &f)) {
        fprintf(stderr, "qpool failed: no failed job %s\n", uuid);
        return 1;
    }
    if (json) {
        sbuf_t b;
        sbuf_init(&b);
        json_record(&b, &f, true);
        printf("%s\n", b.data);
        sbuf_free(&b);
    } else {
        char when[32];
        fmt_time(f.failed_at, when, sizeof when);
        printf("uuid:       %s\nconnection: %s\nqueue:      %s\nfailed at:  %s UTC\n", f.uuid,
               f.connection ? f.connection : "", f.queue, when);
        printf("exception:\n%s\npayload (%zu bytes):\n", f.exception ? f.exception : "", f.payload_len);
        fwrite(f.payload, 1, f.payload_len, stdout);
        printf("\n");
    }
    frec_free(&f);
    return 0;
}

static int retry_one(fctx_t *x, const char *uuid)
{
    char queue[256] = "", err[300] = "";
    bool kept = false;
    int rv = failed_retry(x->r, uuid, queue, sizeof queue, &kept, err, sizeof err);
    if (kept)
        fprintf(stderr, "qpool failed: %s: retryUntil left as it was: the payload does not say when it was "
                        "dispatched (Laravel before 12.11), so the job may fail again at once; "
                        "`php artisan queue:retry` can recompute it from the job class\n", uuid);
    if (rv > 0) {
        printf("pushed %s back onto %s\n", uuid, queue);
        return 0;
    }
    if (rv == 0) /* someone else retried or forgot it meanwhile: never push it twice */
        fprintf(stderr, "qpool failed: no failed job %s (or no longer in the failed store)\n", uuid);
    else
        fprintf(stderr, "qpool failed: retry %s: %s\n", uuid, err);
    return 1;
}

/* Every failed job (of a queue), a page (one script per batch) at a time,
 * as the HTTP API does it. */
static int retry_all(fctx_t *x, const char *queue)
{
    failed_page_t pg = {.queue = queue};
    char err[300];
    int n = 0, kept = 0, rv = 0;
    do {
        if (failed_retry_page(x->r, &pg, err, sizeof err) < 0) {
            fprintf(stderr, "qpool failed: retry: %s\n", err);
            rv = 1;
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
    return rv;
}

static int forget_one(fctx_t *x, const char *uuid, bool quiet)
{
    int rv = failed_forget(x->r, uuid);
    if (rv > 0 && !quiet) printf("forgot %s\n", uuid);
    if (rv == 0 && !quiet) fprintf(stderr, "qpool failed: no failed job %s\n", uuid);
    return rv > 0 ? 0 : 1;
}

static int do_flush(fctx_t *x, const char *queue)
{
    redisReply *qs = NULL;
    int n = 0;
    const char *one[1] = {queue};
    const char **names = one;
    int nq = 1;
    if (!queue) {
        qs = all_queues(x);
        if (!qs) return 1;
        nq = (int)qs->elements;
        names = xcalloc((size_t)nq + 1, sizeof *names);
        for (int i = 0; i < nq; i++) names[i] = qs->element[i]->str;
    }
    int rv = 0;
    for (int i = 0; i < nq; i++) {
        redisReply *u = queue_uuids(x, names[i], 0);
        if (!u) {
            rv = 1;
            break;
        }
        for (size_t j = 0; j < u->elements; j++)
            if (forget_one(x, u->element[j]->str, true) == 0) n++;
        freeReplyObject(u);
    }
    printf("flushed %d failed jobs\n", n);
    if (qs) {
        free(names);
        freeReplyObject(qs);
    }
    return rv;
}

int cmd_failed(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"connection", required_argument, 0, 'C'},
                                         {"json", no_argument, 0, 'j'},
                                         {"all", no_argument, 0, 'a'},
                                         {"queue", required_argument, 0, 'q'},
                                         {"limit", required_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cfg = NULL, *conn = "default", *queue = NULL;
    bool json = false, all = false;
    long limit = 0;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:jq:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': cfg = optarg; break;
        case 'C': conn = optarg; break;
        case 'j': json = true; break;
        case 'a': all = true; break;
        case 'q': queue = optarg; break;
        case 'l':
            if (!parse_long(optarg, &limit) || limit < 1) {
                cli_usage_error("failed", "--limit: expected a positive number");
                return EXIT_USAGE;
            }
            break;
        case 'h': cli_help("failed"); return 0;
        default: cli_usage_error("failed", "invalid option"); return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        cli_usage_error("failed", "expected a subcommand: list, show, retry, forget, flush");
        return EXIT_USAGE;
    }
    const char *sub = argv[optind++];
    int nargs = argc - optind;
    char **args = argv + optind;
    bool known = !strcmp(sub, "list") || !strcmp(sub, "show") || !strcmp(sub, "retry") ||
                 !strcmp(sub, "forget") || !strcmp(sub, "flush");
    if (!known) {
        cli_usage_error("failed", "unknown subcommand '%s'", sub);
        return EXIT_USAGE;
    }
    if ((!strcmp(sub, "list") || !strcmp(sub, "flush")) && nargs > 1) {
        cli_usage_error("failed", "%s takes at most one QUEUE", sub);
        return EXIT_USAGE;
    }
    if (!strcmp(sub, "show") && nargs != 1) {
        cli_usage_error("failed", "show takes one UUID");
        return EXIT_USAGE;
    }
    if (!strcmp(sub, "retry") && (all ? nargs != 0 : nargs == 0)) {
        cli_usage_error("failed", "retry takes UUIDs, or --all [--queue QUEUE]");
        return EXIT_USAGE;
    }
    if (!strcmp(sub, "forget") && nargs == 0) {
        cli_usage_error("failed", "forget takes one or more UUIDs");
        return EXIT_USAGE;
    }

    int status = 0;
    qconf_t *c = cli_load_config(cfg, &status);
    if (!c) return status;
    const redis_conf_t *rc = config_redis(c, conn);
    if (!rc) {
        fprintf(stderr, "qpool failed: no redis connection named '%s' in %s\n", conn, c->path);
        config_free(c);
        return EXIT_USAGE;
    }
    fctx_t x = {.r = rconn_new(rc), .prefix = rc->prefix};
    char **queues = config_connection_queues(c, conn);
    failed_use_queues(queues);
    free_strv(queues);
    x.set_key = xasprintf("%sqpool:failed:queues", rc->prefix);
    x.job_prefix = xasprintf("%sqpool:failed:job:", rc->prefix);
    int rv = 0;
    if (rconn_ensure(x.r) < 0) {
        fprintf(stderr, "qpool failed: cannot reach redis %s: %s\n", conn, x.r->last_error);
        rv = 1;
    } else if (!strcmp(sub, "list"))
        rv = do_list(&x, nargs ? args[0] : NULL, json, limit);
    else if (!strcmp(sub, "show"))
        rv = do_show(&x, args[0], json);
    else if (!strcmp(sub, "retry")) {
        if (all)
            rv = retry_all(&x, queue);
        else
            for (int i = 0; i < nargs; i++) rv |= retry_one(&x, args[i]);
    } else if (!strcmp(sub, "forget")) {
        for (int i = 0; i < nargs; i++) rv |= forget_one(&x, args[i], false);
    } else
        rv = do_flush(&x, nargs ? args[0] : NULL);
    free(x.set_key);
    free(x.job_prefix);
    rconn_free(x.r);
    config_free(c);
    return rv;
}
