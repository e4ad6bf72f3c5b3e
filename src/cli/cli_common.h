/*
 * cli_common.h - what every `qpool` subcommand shares: its row of the
 * dispatcher's table (name, help), option parsing from a table, usage
 * errors, loading the config, opening a Redis connection, and reading the
 * members of a JSON reply. The subcommand files call this; it calls none of
 * them, nor the dispatcher (cli.c).
 */
#ifndef QPOOL_CLI_COMMON_H
#define QPOOL_CLI_COMMON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

#define EXIT_USAGE 64

struct rconn;

/* A row of the dispatcher's table: a command, its one-line summary (NULL:
 * not listed), its help text (`qpool help NAME`, `qpool NAME --help`; NULL:
 * none) and what runs it. run gets its own row: the help to print on -h. */
typedef struct cli_cmd cli_cmd_t;
struct cli_cmd {
    const char *name;
    const char *summary;
    const char *help;
    int (*run)(const cli_cmd_t *cmd, int argc, char **argv);
};

/* Print cmd's help text to stdout. */
void cli_print_help(const cli_cmd_t *cmd);
/* "qpool CMD: <message>" and where to read the usage, on stderr. */
void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Load the config or print its errors (exit status in *status, 78). */
qconf_t *cli_load_config(const char *path, int *status);

/* An option of a table-parsed command: getopt_long's long name and code,
 * and what it sets in the command's options struct (at off). */
enum cli_opt_kind {
    CLI_OPT_STR,  /* const char *: the argument */
    CLI_OPT_LONG, /* long: the argument, a number in min..max */
    CLI_OPT_TRUE, /* bool: true */
    CLI_OPT_NONE, /* accepted, sets nothing */
    CLI_OPT_BAD,  /* known, but not to this command: the usage error `invalid` */
};
typedef struct {
    const char *name;
    int code;
    enum cli_opt_kind kind;
    size_t off;
    long min, max;   /* CLI_OPT_LONG */
    const char *bad; /* CLI_OPT_LONG out of range: the usage error; NULL: "--NAME: 'ARG' is not a valid number" */
} cli_opt_t;

/* Rows of a cli_opt_t table; off is offsetof(the options struct, member). */
#define CLI_STR(name, code, off) {name, code, CLI_OPT_STR, off, 0, 0, NULL}
#define CLI_TRUE(name, code, off) {name, code, CLI_OPT_TRUE, off, 0, 0, NULL}
#define CLI_LONG(name, code, off, min, max, bad) {name, code, CLI_OPT_LONG, off, min, max, bad}
#define CLI_NONE(name, code) {name, code, CLI_OPT_NONE, 0, 0, 0, NULL}
#define CLI_BAD(name, code) {name, code, CLI_OPT_BAD, 0, 0, 0, NULL}
#define CLI_OPTS_END {NULL, 0, CLI_OPT_NONE, 0, 0, 0, NULL}
/* -c/--config FILE and --connection NAME, into type's cfg and conn: the
 * options of every command that reads a Redis connection of the config. */
#define CLI_REDIS_OPTS(type) CLI_STR("config", 'c', offsetof(type, cfg)), CLI_STR("connection", 'C', offsetof(type, conn))

/* Parse argv by opts (ended by a row without a name; --help/-h is added)
 * into out; shortopts as getopt_long takes them. An unknown option is the
 * usage error `invalid`. 0: go on, with optind at the first operand; -1:
 * stop with exit status *status (0 after --help, EXIT_USAGE after an error). */
int cli_parse(const cli_cmd_t *cmd, int argc, char **argv, const char *shortopts, const cli_opt_t *opts, void *out,
              const char *invalid, int *status);

/* A Redis connection of the config, for the commands that read or write
 * Redis directly. */
typedef struct {
    const char *cmd, *conn; /* for the messages */
    qconf_t *conf;
    const redis_conf_t *rc; /* conf's connection */
    struct rconn *r;        /* not connected yet */
} cli_redis_t;

/* Load the config cfg and open its Redis connection conn (not connected
 * yet). 0, or -1 with the reason printed and the exit status in *status
 * (78 config error, EXIT_USAGE unknown connection). */
int cli_redis_open(const char *cmd, const char *cfg, const char *conn, cli_redis_t *x, int *status);
/* Connect x (and, with scripts, load the queue scripts), or say "qpool CMD:
 * cannot reach redis CONN: ..." (0 / -1). */
int cli_redis_reach(cli_redis_t *x, bool scripts);
void cli_redis_close(cli_redis_t *x);

/* `qpool batches ID` (cli_batch.c): the batch's jobs added to rep, a reply
 * {"batch":{...,"pool":P},...} ("jobs" and "jobs_kept", or "jobs": null
 * and "jobs_error"), read from P's Redis; and rep printed as text. */
void cli_batch_jobs(const char *cfg, const char *id, cJSON *rep);
void cli_batch_print(cJSON *rep);

/* A member of a JSON reply: its number (0 if none), its string ("" if none). */
double cli_json_num(const cJSON *o, const char *k);
const char *cli_json_str(const cJSON *o, const char *k);
/* o as one line of JSON on stdout. */
void cli_json_print(const cJSON *o);
/* Every string in o (keys aside) made fit for a terminal (text_escape,
 * util.h): for a reply whose strings a text table prints (job names, queue
 * and host names come from producers and other hosts). */
void cli_json_text(cJSON *o);

#endif
