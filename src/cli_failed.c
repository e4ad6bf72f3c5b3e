/*
 * cli_failed.c - `qpool failed`: list, show, retry, forget and flush jobs in
 * qpool's failed store (layout in queue.h). Retry and forget are Lua
 * scripts, so a job is never both back on its queue and still listed, nor
 * gone from both.
 */
#include "cli.h"
#include "failed.h"
#include "payload.h"
#include "queue.h"
#include "rconn.h"
#include "util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* KEYS: ready, notify, job hash, queue index, queue set. ARGV: payload, uuid, queue. */
static const char RETRY_LUA[] =
    "if redis.call('exists', KEYS[3]) == 0 then return 0 end\n"
    "redis.call('rpush', KEYS[1], ARGV[1])\n"
    "redis.call('rpush', KEYS[2], 1)\n"
    "redis.call('del', KEYS[3])\n"
    "redis.call('zrem', KEYS[4], ARGV[2])\n"
    "if redis.call('zcard', KEYS[4]) == 0 then redis.call('srem', KEYS[5], ARGV[3]) end\n"
    "return 1";

/* KEYS: job hash, queue index, queue set. ARGV: uuid, queue. */
static const char FORGET_LUA[] =
    "local n = redis.call('del', KEYS[1])\n"
    "redis.call('zrem', KEYS[2], ARGV[1])\n"
    "if redis.call('zcard', KEYS[2]) == 0 then redis.call('srem', KEYS[3], ARGV[2]) end\n"
    "return n";

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
    sbuf_puts(b, s);
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

/* As queue:retry does: a job with a retryUntil gets its window again, or
 * it would fail at once as "already exceeded" (review #17). */
static void refresh_retry_until(const char *uuid, char **p, size_t *len)
{
    char *fresh;
    size_t flen;
    int rv = payload_refresh_retry_until(*p, *len, (int64_t)time(NULL), &fresh, &flen);
    if (rv > 0) {
        free(*p);
        *p = fresh;
        *len = flen;
    } else if (rv < 0)
        fprintf(stderr, "qpool failed: %s: retryUntil left as it was: the payload does not say when it was "
                        "dispatched (Laravel before 12.11), so the job may fail again at once; "
                        "`php artisan queue:retry` can recompute it from the job class\n", uuid);
}

static int retry_one(fctx_t *x, const char *uuid, rscript_t *script)
{
    frec_t f;
    if (!get_record(x, uuid, &f)) {
        fprintf(stderr, "qpool failed: no failed job %s\n", uuid);
        return 1;
    }
    size_t len = f.payload_len;
    char *p = payload_set_attempts(f.payload, f.payload_len, 0, &len);
    if (!p) {
        /* Not a JSON object: put the bytes back as they are (a worker will
         * move them aside again unless they were fixed). */
        p = xstrndup(f.payload, f.payload_len);
        len = f.payload_len;
    }
    refresh_retry_until(uuid, &p, &len);
    /* available again now: its wait counts from here, not from its first dispatch */
    size_t slen;
    char *stamped = payload_set_available_at(p, len, wall_ms(), &slen);
    if (stamped) {
        free(p);
        p = stamped;
        len = slen;
    }
    qkeys_t k;
    qkeys_init(&k, x->prefix, f.queue);
    char *jobkey = xasprintf("%s%s", x->job_prefix, uuid);
    const char *av[] = {k.ready, k.notify, jobkey, k.failed, x->set_key, p, uuid, f.queue};
    size_t lens[] = {strlen(k.ready), strlen(k.notify), strlen(jobkey), strlen(k.failed),
                     strlen(x->set_key), len, strlen(uuid), strlen(f.queue)};
    redisReply *r;
    int rv = rconn_script(x->r, script, 5, 8, av, lens, -1, -1, &r);
    int status = 0;
    if (rv != RC_OK || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "qpool failed: retry %s: %s\n", uuid, rv == RC_OK ? r->str : x->r->last_error);
        status = 1;
    } else if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
        /* someone else retried or forgot it meanwhile: never push it twice */
        fprintf(stderr, "qpool failed: %s is no longer in the failed store\n", uuid);
        status = 1;
    } else
        printf("pushed %s back onto %s\n", uuid, f.queue);
    if (rv == RC_OK) freeReplyObject(r);
    free(jobkey);
    free(p);
    qkeys_free(&k);
    frec_free(&f);
    return status;
}

static int forget_one(fctx_t *x, const char *uuid, rscript_t *script, bool quiet)
{
    frec_t f;
    if (!get_record(x, uuid, &f)) {
        if (!quiet) fprintf(stderr, "qpool failed: no failed job %s\n", uuid);
        return 1;
    }
    qkeys_t k;
    qkeys_init(&k, x->prefix, f.queue);
    char *jobkey = xasprintf("%s%s", x->job_prefix, uuid);
    const char *av[] = {jobkey, k.failed, x->set_key, uuid, f.queue};
    redisReply *r;
    int rv = rconn_script(x->r, script, 3, 5, av, NULL, -1, -1, &r);
    int status = rv == RC_OK && r->type != REDIS_REPLY_ERROR ? 0 : 1;
    if (rv == RC_OK) freeReplyObject(r);
    if (!quiet && !status) printf("forgot %s\n", uuid);
    free(jobkey);
    qkeys_free(&k);
    frec_free(&f);
    return status;
}

static int do_flush(fctx_t *x, const char *queue, rscript_t *forget)
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
            if (forget_one(x, u->element[j]->str, forget, true) == 0) n++;
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
    x.set_key = xasprintf("%sqpool:failed:queues", rc->prefix);
    x.job_prefix = xasprintf("%sqpool:failed:job:", rc->prefix);
    rscript_t retry, forget;
    rscript_init(&retry, RETRY_LUA);
    rscript_init(&forget, FORGET_LUA);
    int rv = 0;
    if (rconn_ensure(x.r) < 0) {
        fprintf(stderr, "qpool failed: cannot reach redis %s: %s\n", conn, x.r->last_error);
        rv = 1;
    } else if (!strcmp(sub, "list"))
        rv = do_list(&x, nargs ? args[0] : NULL, json, limit);
    else if (!strcmp(sub, "show"))
        rv = do_show(&x, args[0], json);
    else if (!strcmp(sub, "retry")) {
        if (all) {
            const char *one[1] = {queue};
            redisReply *qs = queue ? NULL : all_queues(&x);
            int nq = queue ? 1 : (qs ? (int)qs->elements : 0);
            int n = 0;
            for (int i = 0; i < nq; i++) {
                const char *qn = queue ? one[0] : qs->element[i]->str;
                redisReply *u = queue_uuids(&x, qn, 0);
                if (!u) {
                    rv = 1;
                    break;
                }
                for (size_t j = 0; j < u->elements; j++)
                    if (retry_one(&x, u->element[j]->str, &retry) == 0) n++;
                    else rv = 1;
                freeReplyObject(u);
            }
            if (qs) freeReplyObject(qs);
            printf("retried %d failed jobs\n", n);
        } else
            for (int i = 0; i < nargs; i++) rv |= retry_one(&x, args[i], &retry);
    } else if (!strcmp(sub, "forget")) {
        for (int i = 0; i < nargs; i++) rv |= forget_one(&x, args[i], &forget, false);
    } else
        rv = do_flush(&x, nargs ? args[0] : NULL, &forget);
    free(x.set_key);
    free(x.job_prefix);
    rconn_free(x.r);
    config_free(c);
    return rv;
}
