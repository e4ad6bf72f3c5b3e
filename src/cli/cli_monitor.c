/*
 * cli_monitor.c - `qpool monitor list|add|remove TAG`: the monitored tags
 * of a connection (monitored.h), read and changed in Redis directly.
 */
#include "cli/cli.h"
#include "observe/jobhist.h"
#include "observe/monitored.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *cfg, *conn;
    bool json;
} monitor_args_t;

#define M(m) offsetof(monitor_args_t, m)
static const cli_opt_t OPTS[] = {
    CLI_REDIS_OPTS(monitor_args_t),
    CLI_TRUE("json", 'j', M(json)),
    CLI_OPTS_END,
};
#undef M

static int list_tags(rconn_t *r, const monitor_args_t *a)
{
    cJSON *l = monitored_list(r);
    if (!l) return -1;
    if (a->json)
        cli_json_print(l);
    else {
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(l, "tags")) {
            char *tag = text_escape(cJSON_GetObjectItemCaseSensitive(t, "tag")->valuestring,
                                    strlen(cJSON_GetObjectItemCaseSensitive(t, "tag")->valuestring), 0);
            printf("%s\t%.0f jobs\n", tag, cJSON_GetObjectItemCaseSensitive(t, "jobs")->valuedouble);
            free(tag);
        }
    }
    cJSON_Delete(l);
    return 0;
}

static int change(rconn_t *r, const char *tag, bool add)
{
    int rv = monitored_set(r, tag, add);
    if (rv == -2) {
        fprintf(stderr, "qpool monitor: at most %d tags are watched\n", MONITORED_MAX);
        return 1;
    }
    if (rv < 0) return -1;
    printf("%s\n", rv ? (add ? "watching" : "no longer watching (its records deleted)")
                      : (add ? "already watched" : "not watched"));
    return 0;
}

/* The subcommand's operands fit: 0, else the usage error said. */
static int check_args(const char *sub, int nargs, const char *tag)
{
    bool list = !strcmp(sub, "list");
    if (!list && strcmp(sub, "add") && strcmp(sub, "remove")) {
        cli_usage_error("monitor", "unknown subcommand '%s' (list, add, remove)", sub);
        return -1;
    }
    if (list ? nargs != 0 : nargs != 1) {
        cli_usage_error("monitor", list ? "list takes no TAG" : "%s takes one TAG", sub);
        return -1;
    }
    if (!list && !monitored_tag_ok(tag)) {
        cli_usage_error("monitor", "a TAG is 1..%d bytes of UTF-8 text", JOBHIST_TAG_MAX);
        return -1;
    }
    return 0;
}

int cmd_monitor(const cli_cmd_t *cmd, int argc, char **argv)
{
    monitor_args_t a = {.conn = "default"};
    int status;
    if (cli_parse(cmd, argc, argv, "c:jh", OPTS, &a, "unknown option", &status) < 0) return status;
    if (optind >= argc) {
        cli_usage_error("monitor", "expected a subcommand: list, add, remove");
        return EXIT_USAGE;
    }
    const char *sub = argv[optind], *tag = optind + 1 < argc ? argv[optind + 1] : NULL;
    if (check_args(sub, argc - optind - 1, tag) < 0) return EXIT_USAGE;
    cli_redis_t x;
    if (cli_redis_open("monitor", a.cfg, a.conn, &x, &status) < 0) return status;
    int rv = !strcmp(sub, "list") ? list_tags(x.r, &a) : change(x.r, tag, !strcmp(sub, "add"));
    if (rv < 0) {
        fprintf(stderr, "qpool monitor: cannot reach redis %s: %s\n", a.conn,
                x.r->last_error[0] ? x.r->last_error : "unavailable");
        rv = 1;
    }
    cli_redis_close(&x);
    return rv;
}
