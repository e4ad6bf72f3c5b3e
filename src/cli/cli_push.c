/*
 * cli_push.c - `qpool push`: enqueue a job exactly as Laravel's RedisQueue
 * does (push script: ready list + notify token; --delay: ZADD :delayed).
 */
#include "cli/cli.h"
#include "redis/payload.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_num(const char *opt, const char *v, long min, long *out)
{
    long n;
    if (!parse_long(v, &n) || n < min) {
        cli_usage_error("push", "%s: '%s' is not a valid number", opt, v);
        return false;
    }
    *out = n;
    return true;
}

int cmd_push(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'},  {"connection", required_argument, 0, 'C'},
        {"delay", required_argument, 0, 'd'},   {"payload", required_argument, 0, 'p'},
        {"job", required_argument, 0, 'J'},     {"data", required_argument, 0, 'D'},
        {"tries", required_argument, 0, 't'},   {"timeout", required_argument, 0, 'T'},
        {"backoff", required_argument, 0, 'b'}, {"max-exceptions", required_argument, 0, 'x'},
        {"retry-until", required_argument, 0, 'u'}, {"fail-on-timeout", no_argument, 0, 'F'},
        {"display-name", required_argument, 0, 'n'}, {"count", required_argument, 0, 'N'},
        {"print", no_argument, 0, 'P'},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *cfg = NULL, *conn = "default", *raw = NULL, *data = NULL, *backoff = NULL;
    payload_spec_t spec = {.max_tries = -1, .max_exceptions = -1, .timeout = -1};
    long delay = 0, count = 1, n;
    bool print = false;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': cfg = optarg; break;
        case 'C': conn = optarg; break;
        case 'd': if (!parse_num("--delay", optarg, 0, &delay)) return EXIT_USAGE; break;
        case 'p': raw = optarg; break;
        case 'J': spec.job = optarg; break;
        case 'D': data = optarg; break;
        case 't': if (!parse_num("--tries", optarg, 0, &spec.max_tries)) return EXIT_USAGE; break;
        case 'T': if (!parse_num("--timeout", optarg, 0, &spec.timeout)) return EXIT_USAGE; break;
        case 'b': backoff = optarg; break;
        case 'x': if (!parse_num("--max-exceptions", optarg, 1, &spec.max_exceptions)) return EXIT_USAGE; break;
        case 'u':
            if (!parse_num("--retry-until", optarg, 1, &n)) return EXIT_USAGE;
            spec.retry_until = n;
            break;
        case 'F': spec.fail_on_timeout = true; break;
        case 'n': spec.display_name = optarg; break;
        case 'N': if (!parse_num("--count", optarg, 1, &count)) return EXIT_USAGE; break;
        case 'P': print = true; break;
        case 'h': cli_help("push"); return 0;
        default: cli_usage_error("push", "invalid option"); return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        cli_usage_error("push", "expected exactly one QUEUE");
        return EXIT_USAGE;
    }
    const char *queue = argv[optind];
    if (!*queue || strchr(queue, ',') || !utf8_valid(queue, strlen(queue))) {
        cli_usage_error("push", "'%s' is not a valid queue name", queue);
        return EXIT_USAGE;
    }
    /* Laravel's json_encode refuses what is not UTF-8: so does push */
    if ((spec.job && !utf8_valid(spec.job, strlen(spec.job))) ||
        (spec.display_name && !utf8_valid(spec.display_name, strlen(spec.display_name)))) {
        cli_usage_error("push", "--job and --name must be valid UTF-8");
        return EXIT_USAGE;
    }
    if (!raw == !spec.job) {
        cli_usage_error("push", "give exactly one of --payload JSON or --job NAME");
        return EXIT_USAGE;
    }
    if (raw && (data || backoff || spec.max_tries >= 0 || spec.timeout >= 0 || spec.max_exceptions >= 0 ||
                spec.retry_until || spec.fail_on_timeout || spec.display_name)) {
        cli_usage_error("push", "--payload is pushed as it is; the job options go with --job");
        return EXIT_USAGE;
    }
    if (data) {
        cJSON *d = cJSON_Parse(data);
        if (!d) {
            cli_usage_error("push", "--data is not valid JSON");
            return EXIT_USAGE;
        }
        cJSON_Delete(d);
        spec.data_json = data;
    }
    if (backoff) {
        for (const char *c = backoff; *c; c++)
            if (!strchr("0123456789, ", *c)) {
                cli_usage_error("push", "--backoff: expected seconds like 10,30,60");
                return EXIT_USAGE;
            }
        spec.backoff = backoff;
    }
    if (raw) {
        job_payload_t jp;
        char err[128];
        if (payload_parse(raw, strlen(raw), &jp, err, sizeof err) < 0)
            fprintf(stderr, "qpool push: warning: %s; a qpool worker will move it to the failed store\n", err);
        else
            payload_free(&jp);
    }

    int status = 0;
    qconf_t *c = cli_load_config(cfg, &status);
    if (!c) return status;
    const redis_conf_t *rc = config_redis(c, conn);
    if (!rc) {
        fprintf(stderr, "qpool push: no redis connection named '%s' in %s\n", conn, c->path);
        config_free(c);
        return EXIT_USAGE;
    }
    rconn_t *r = rconn_new(rc);
    qkeys_t k;
    qkeys_init(&k, rc->prefix, queue);
    int rv = 0;
    if (rconn_ensure(r) < 0 || queue_load_scripts(r) < 0) {
        fprintf(stderr, "qpool push: cannot reach redis %s: %s\n", conn, r->last_error);
        rv = 1;
        goto out;
    }
    int64_t at = wall_s() + delay;
    /* Pipelined in chunks: --count 100000 is one round trip per thousand. */
    for (long done = 0; done < count && !rv;) {
        long chunk = count - done > 1000 ? 1000 : count - done;
        for (long i = 0; i < chunk; i++) {
            char *p = raw ? xstrdup(raw) : payload_build(&spec);
            if (print) printf("%s\n", p);
            if (delay > 0)
                queue_append_later(r, &k, p, strlen(p), at);
            else
                queue_append_push(r, &k, p, strlen(p));
            free(p);
        }
        for (long i = 0; i < chunk; i++) {
            redisReply *rep;
            if (rconn_read(r, -1, -1, &rep) != RC_OK) {
                fprintf(stderr, "qpool push: redis: %s\n", r->last_error);
                rv = 1;
                break;
            }
            if (rep->type == REDIS_REPLY_ERROR) {
                fprintf(stderr, "qpool push: redis: %s\n", rep->str);
                rv = 1;
            }
            freeReplyObject(rep);
        }
        done += chunk;
    }
out:
    qkeys_free(&k);
    rconn_free(r);
    config_free(c);
    return rv;
}
