/*
 * cli.h - the qpool command line: one binary, subcommands.
 *
 *   run, check, version, help          cli.c
 *   push                               cli_push.c
 *   failed list|show|retry|forget|flush  cli_failed.c
 *   status, pause, continue, scale, restart, reload, terminate
 *                                      cli_control.c (control socket clients)
 */
#ifndef QPOOL_CLI_H
#define QPOOL_CLI_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "config/config.h"

#define EXIT_USAGE 64

int cli_main(int argc, char **argv);

/* Shared helpers for subcommands. */
void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Load the config or print its errors (exit status in *status, 78). */
qconf_t *cli_load_config(const char *path, int *status);
/* Print the help text of a command to stdout; false if unknown. */
bool cli_help(const char *cmd);
/* Load the config and open its Redis connection conn (not connected yet);
 * NULL with *status set (config error, unknown connection) on failure. The
 * caller frees *conf and the connection. */
struct rconn *cli_redis(const char *cmd, const char *cfg, const char *conn, qconf_t **conf, int *status);
/* A member of a JSON reply: its number (0 if none), its string ("" if none). */
double cli_json_num(const cJSON *o, const char *k);
const char *cli_json_str(const cJSON *o, const char *k);
/* qpool status --fleet (cli_fleet.c) */
int cmd_fleet(int argc, char **argv);
/* qpool metrics (cli_metrics.c) */
int cmd_metrics(int argc, char **argv);

int cmd_push(int argc, char **argv);
/* qpool check --connect: connect to, AUTH and PING every redis connection of c,
 * a line each on out. 0 if all answered, -1 if any did not. */
int cli_check_connect(const qconf_t *c, FILE *out);
int cmd_failed(int argc, char **argv);
int cmd_control(const char *cmd, int argc, char **argv);

#endif
