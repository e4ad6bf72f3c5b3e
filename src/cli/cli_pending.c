/*
 * cli_pending.c - `qpool pending delete QUEUE FILTER [--yes]`: delete the
 * pending jobs (ready and delayed) of a queue that match a filter, in
 * bounded steps (redis/pending.h), as the HTTP API does; without --yes it
 * only counts them.
 */
#include "cli/cli.h"
#include "cli/cli_audit.h"
#include "redis/pending.h"
#include "core/util.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *cfg, *conn, *name, *uuid, *text, *tag, *since, *until;
    bool yes, all;
} pending_args_t;

#define F(m) offsetof(pending_args_t, m)
static const cli_opt_t OPTS[] = {
    CLI_REDIS_OPTS(pending_args_t),
    CLI_STR("class", 1001, F(name)),
    CLI_STR("uuid", 1002, F(uuid)),
    CLI_STR("text", 1003, F(text)),
    CLI_STR("q", 1003, F(text)),
    CLI_STR("tag", 1004, F(tag)),
    CLI_STR("since", 1005, F(since)),
    CLI_STR("until", 1006, F(until)),
    CLI_TRUE("yes", 'y', F(yes)),
    CLI_TRUE("all", 'a', F(all)),
    CLI_OPTS_END,
};
#undef F

/* Every step to the end: the totals in *sum; 0, or -1 (said why). */
static int delete_all(rconn_t *r, const char *queue, const pending_args_t *a, pending_del_t *sum)
{
    pending_del_t d = {.queue = queue, .dry_run = !a->yes, .f = {.name = a->name, .uuid = a->uuid, .q = a->text, .tag = a->tag}};
    char err[300];
    if ((a->since && ffilter_time(a->since, wall_s(), &d.f.since) < 0) ||
        (a->until && ffilter_time(a->until, wall_s(), &d.f.until) < 0)) {
        fprintf(stderr, "qpool pending: --since, --until: unix seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age "
                        "such as 30m, 1h, 2d\n");
        return -1;
    }
    do {
        if (pending_delete_step(r, &d, err, sizeof err) < 0) {
            fprintf(stderr, "qpool pending: redis: %s\n", err);
            return -1;
        }
        sum->matched += d.matched, sum->deleted += d.deleted, sum->scanned += d.scanned;
    } while (!d.cur.done);
    return 0;
}

/* The record of a delete (cli_audit.h): the queue and the filter as typed. */
static void audit(const char *queue, const pending_args_t *a, long deleted, bool failed)
{
    sbuf_t f;
    sbuf_init(&f);
    sbuf_puts(&f, "");
    cli_audit_arg(&f, "queue", queue);
    cli_audit_filter(&f, a->name, a->uuid, a->text, a->tag, a->since, a->until);
    if (a->all) sbuf_puts(&f, " --all");
    char what[96];
    snprintf(what, sizeof what, "deleted %ld pending jobs%s", deleted, failed ? " (stopped by an error)" : "");
    cli_audit("pending", what, f.data);
    sbuf_free(&f);
}

int cmd_pending(const cli_cmd_t *cmd, int argc, char **argv)
{
    pending_args_t a = {.conn = "default"};
    int status;
    if (cli_parse(cmd, argc, argv, "c:hya", OPTS, &a, "invalid option", &status) < 0) return status;
    if (argc - optind != 2 || strcmp(argv[optind], "delete")) {
        cli_usage_error("pending", "expected: delete QUEUE and a filter (--class, --uuid, --text, --tag, --since, --until) or --all");
        return EXIT_USAGE;
    }
    if (!a.name && !a.uuid && !a.text && !a.tag && !a.since && !a.until && !a.all) {
        cli_usage_error("pending", "name a filter (--class, --uuid, --text, --tag, --since, --until), or --all for "
                                   "every pending job");
        return EXIT_USAGE;
    }
    const char *queue = argv[optind + 1];
    cli_redis_t x;
    if (cli_redis_open("pending", a.cfg, a.conn, &x, &status) < 0) return status;
    pending_del_t sum = {0};
    int rv = cli_redis_reach(&x, false) < 0 || delete_all(x.r, queue, &a, &sum) < 0 ? 1 : 0;
    if (rv == 0 && !a.yes)
        printf("%ld pending jobs of %s match (of %ld looked at); run again with --yes to delete them\n", sum.matched,
               queue, sum.scanned);
    else if (rv == 0)
        printf("deleted %ld pending jobs of %s\n", sum.deleted, queue);
    if (a.yes) audit(queue, &a, sum.deleted, rv != 0);
    cli_redis_close(&x);
    return rv;
}
