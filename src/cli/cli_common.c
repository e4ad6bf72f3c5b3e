/*
 * cli_common.c - the helpers every `qpool` subcommand shares (cli_common.h):
 * help and usage errors, table-driven option parsing, the config and a
 * Redis connection, JSON members. Calls no subcommand and not the
 * dispatcher.
 */
#include "cli/cli_common.h"
#include "redis/queue.h"
#include "redis/rconn.h"
#include "core/util.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_OPTS_MAX 24

void cli_print_help(const cli_cmd_t *cmd)
{
    if (cmd->help) fputs(cmd->help, stdout);
}

void cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "qpool %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun `qpool help %s` for usage.\n", cmd);
}

qconf_t *cli_load_config(const char *path, int *status)
{
    conf_errors_t errs;
    qconf_t *c = config_load(config_path(path), &errs);
    if (!c) {
        conf_errors_print(&errs, stderr);
        *status = QPOOL_EX_CONFIG;
    }
    conf_errors_free(&errs);
    return c;
}

/* Set what opt sets in field from arg; -1 (usage error printed) if arg is
 * not what it takes. */
static int set_opt(const cli_cmd_t *cmd, const cli_opt_t *opt, const char *arg, void *field)
{
    long n;
    switch (opt->kind) {
    case CLI_OPT_STR: *(const char **)field = arg; break;
    case CLI_OPT_TRUE: *(bool *)field = true; break;
    case CLI_OPT_NONE: break;
    case CLI_OPT_BAD: return -1;
    case CLI_OPT_LONG:
        if (!parse_long(arg, &n) || n < opt->min || n > opt->max) {
            if (opt->bad)
                cli_usage_error(cmd->name, "%s", opt->bad);
            else
                cli_usage_error(cmd->name, "--%s: '%s' is not a valid number", opt->name, arg);
            return -1;
        }
        *(long *)field = n;
        break;
    }
    return 0;
}

/* getopt_long's table for opts, --help last; the number of rows. */
static size_t long_options(const cli_opt_t *opts, struct option *lo)
{
    size_t n = 0;
    for (; opts[n].name && n < CLI_OPTS_MAX; n++) {
        bool arg = opts[n].kind == CLI_OPT_STR || opts[n].kind == CLI_OPT_LONG;
        lo[n] = (struct option){opts[n].name, arg ? required_argument : no_argument, NULL, opts[n].code};
    }
    if (opts[n].name) { /* a table longer than lo: a programming error, never cut short silently */
        fprintf(stderr, "qpool: an option table is longer than CLI_OPTS_MAX (%d)\n", CLI_OPTS_MAX);
        abort();
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    return n;
}

int cli_parse(const cli_cmd_t *cmd, int argc, char **argv, const char *shortopts, const cli_opt_t *opts, void *out,
              const char *invalid, int *status)
{
    struct option lo[CLI_OPTS_MAX + 2];
    size_t n = long_options(opts, lo);
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, shortopts, lo, NULL)) != -1) {
        if (o == 'h') {
            cli_print_help(cmd);
            *status = 0;
            return -1;
        }
        const cli_opt_t *opt = NULL;
        for (size_t i = 0; i < n && !opt; i++)
            if (opts[i].code == o) opt = &opts[i];
        if (!opt || opt->kind == CLI_OPT_BAD) cli_usage_error(cmd->name, "%s", invalid);
        if (!opt || set_opt(cmd, opt, optarg, (char *)out + opt->off) < 0) {
            *status = EXIT_USAGE;
            return -1;
        }
    }
    return 0;
}

int cli_redis_open(const char *cmd, const char *cfg, const char *conn, cli_redis_t *x, int *status)
{
    *x = (cli_redis_t){.cmd = cmd, .conn = conn};
    *status = 0;
    x->conf = cli_load_config(cfg, status);
    if (!x->conf) return -1;
    x->rc = config_redis(x->conf, conn);
    if (x->conf->no_redis) {
        fprintf(stderr, "qpool %s: this needs a Redis, and %s names none (set redis = { default = { host = ...; }; })\n",
                cmd, x->conf->path);
        config_free(x->conf);
        x->conf = NULL;
        *status = 1;
        return -1;
    }
    if (!x->rc) {
        fprintf(stderr, "qpool %s: no redis connection named '%s' in %s\n", cmd, conn, x->conf->path);
        config_free(x->conf);
        x->conf = NULL;
        *status = EXIT_USAGE;
        return -1;
    }
    x->r = rconn_new(x->rc);
    return 0;
}

int cli_redis_reach(cli_redis_t *x, bool scripts)
{
    if (rconn_ensure(x->r) >= 0 && (!scripts || queue_load_scripts(x->r) >= 0)) return 0;
    fprintf(stderr, "qpool %s: cannot reach redis %s: %s\n", x->cmd, x->conn, x->r->last_error);
    return -1;
}

void cli_redis_close(cli_redis_t *x)
{
    rconn_free(x->r);
    config_free(x->conf);
}

double cli_json_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

const char *cli_json_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

void cli_json_print(const cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    free(s);
}

void cli_json_text(cJSON *o)
{
    for (; o; o = o->next) {
        if (cJSON_IsString(o) && o->valuestring) {
            char *e = text_escape(o->valuestring, strlen(o->valuestring), 0);
            if (strcmp(e, o->valuestring)) cJSON_SetValuestring(o, e);
            free(e);
        }
        cli_json_text(o->child);
    }
}
