/*
 * cli_push.c - `qpool push`: enqueue a job exactly as Laravel's RedisQueue
 * does (push script: ready list + notify token; --delay: ZADD :delayed).
 * Its options are a table (cli_parse); the checks between them, then the
 * pushes, are steps of their own.
 */
#include "cli/cli.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *cfg, *conn, *raw, *data, *backoff;
    payload_spec_t spec;
    long delay, count, retry_until;
    bool print;
} push_opts_t;

#define P(m) offsetof(push_opts_t, m)
static const cli_opt_t OPTS[] = {
    CLI_REDIS_OPTS(push_opts_t),
    CLI_LONG("delay", 'd', P(delay), 0, LONG_MAX, NULL),
    CLI_STR("payload", 'p', P(raw)),
    CLI_STR("job", 'J', P(spec.job)),
    CLI_STR("data", 'D', P(data)),
    CLI_LONG("tries", 't', P(spec.max_tries), 0, LONG_MAX, NULL),
    CLI_LONG("timeout", 'T', P(spec.timeout), 0, LONG_MAX, NULL),
    CLI_STR("backoff", 'b', P(backoff)),
    CLI_LONG("max-exceptions", 'x', P(spec.max_exceptions), 1, LONG_MAX, NULL),
    CLI_LONG("retry-until", 'u', P(retry_until), 1, LONG_MAX, NULL),
    CLI_TRUE("fail-on-timeout", 'F', P(spec.fail_on_timeout)),
    CLI_STR("display-name", 'n', P(spec.display_name)),
    CLI_LONG("count", 'N', P(count), 1, LONG_MAX, NULL),
    CLI_TRUE("print", 'P', P(print)),
    CLI_OPTS_END,
};
#undef P

static bool valid_name(const char *s)
{
    return utf8_valid(s, strlen(s));
}

/* The options that do not fit together or are not what they say: the
 * usage error, or NULL. */
static const char *misfit(const push_opts_t *o)
{
    const payload_spec_t *s = &o->spec;
    /* Laravel's json_encode refuses what is not UTF-8: so does push */
    if ((s->job && !valid_name(s->job)) || (s->display_name && !valid_name(s->display_name)))
        return "--job and --display-name must be valid UTF-8";
    if (!o->raw == !s->job) return "give exactly one of --payload JSON or --job NAME";
    if (o->raw && (o->data || o->backoff || s->max_tries >= 0 || s->timeout >= 0 || s->max_exceptions >= 0 ||
                   s->retry_until || s->fail_on_timeout || s->display_name))
        return "--payload is pushed as it is; the job options go with --job";
    if (o->data) {
        cJSON *d = cJSON_Parse(o->data);
        if (!d) return "--data is not valid JSON";
        cJSON_Delete(d);
    }
    if (o->backoff)
        for (const char *c = o->backoff; *c; c++)
            if (!strchr("0123456789, ", *c)) return "--backoff: expected seconds like 10,30,60";
    return NULL;
}

/* The options and the QUEUE operand. 0: go on; -1: stop with exit status *status. */
static int parse_push(const cli_cmd_t *cmd, int argc, char **argv, push_opts_t *o, const char **queue, int *status)
{
    if (cli_parse(cmd, argc, argv, "c:h", OPTS, o, "invalid option", status) < 0) return -1;
    o->spec.retry_until = o->retry_until;
    *status = EXIT_USAGE;
    if (optind != argc - 1) {
        cli_usage_error("push", "expected exactly one QUEUE");
        return -1;
    }
    *queue = argv[optind];
    if (!**queue || strchr(*queue, ',') || !valid_name(*queue)) {
        cli_usage_error("push", "'%s' is not a valid queue name", *queue);
        return -1;
    }
    const char *err = misfit(o);
    if (err) {
        cli_usage_error("push", "%s", err);
        return -1;
    }
    if (o->data) o->spec.data_json = o->data;
    if (o->backoff) o->spec.backoff = o->backoff;
    return 0;
}

/* Push count copies, pipelined in chunks: --count 100000 is one round trip
 * per thousand. 0, or -1 (said why). */
static int push_all(rconn_t *r, const qkeys_t *k, const push_opts_t *o)
{
    int64_t at = wall_s() + o->delay;
    int rv = 0;
    for (long done = 0; done < o->count && !rv;) {
        long chunk = o->count - done > 1000 ? 1000 : o->count - done;
        for (long i = 0; i < chunk; i++) {
            char *p = o->raw ? xstrdup(o->raw) : payload_build(&o->spec);
            if (o->print) printf("%s\n", p);
            if (o->delay > 0)
                queue_append_later(r, k, p, strlen(p), at);
            else
                queue_append_push(r, k, p, strlen(p));
            free(p);
        }
        for (long i = 0; i < chunk; i++) {
            redisReply *rep;
            if (rconn_read(r, -1, -1, &rep) < 0) {
                fprintf(stderr, "qpool push: redis: %s\n", r->last_error);
                rv = -1;
                break;
            }
            if (rep->type == REDIS_REPLY_ERROR) {
                fprintf(stderr, "qpool push: redis: %s\n", rep->str);
                rv = -1;
            }
            freeReplyObject(rep);
        }
        done += chunk;
    }
    return rv;
}

int cmd_push(const cli_cmd_t *cmd, int argc, char **argv)
{
    push_opts_t o = {.conn = "default", .count = 1, .spec = {.max_tries = -1, .max_exceptions = -1, .timeout = -1}};
    const char *queue = NULL;
    int status;
    if (parse_push(cmd, argc, argv, &o, &queue, &status) < 0) return status;
    if (o.raw) {
        job_payload_t jp;
        char err[128];
        if (payload_parse(o.raw, strlen(o.raw), &jp, err, sizeof err) < 0)
            fprintf(stderr, "qpool push: warning: %s; a qpool worker will move it to the failed store\n", err);
        else
            payload_free(&jp);
    }
    cli_redis_t x;
    if (cli_redis_open("push", o.cfg, o.conn, &x, &status) < 0) return status;
    qkeys_t k;
    qkeys_init(&k, x.rc->prefix, queue);
    int rv = cli_redis_reach(&x, true) < 0 || push_all(x.r, &k, &o) < 0 ? 1 : 0;
    qkeys_free(&k);
    cli_redis_close(&x);
    return rv;
}
