/*
 * cli.h - the qpool command line: one binary, subcommands. The dispatcher
 * (cli.c) owns the table of commands and their help; each subcommand file
 * runs a family of them; what they share is cli_common.h. The dispatcher
 * calls the subcommands, they call cli_common.c, never the other way.
 *
 *   run, check, version, help          cli.c
 *   check --connect                    cli_check.c
 *   push                               cli_push.c
 *   failed list|show|retry|forget|flush  cli_failed.c
 *   failed ... --app POOL              cli_appfailed.c (the app's failer, through the
 *                                      master and the pool's app agent: cli_ctl_call)
 *   status, pause, continue, scale, restart, reload, terminate
 *                                      cli_control.c (control socket clients)
 *   status --fleet                     cli_fleet.c
 *   metrics                            cli_metrics.c
 *   import horizon                     cli_import.c
 */
#ifndef QPOOL_CLI_H
#define QPOOL_CLI_H

#include <stdio.h>

#include "cli/cli_common.h"

int cli_main(int argc, char **argv);

/* The subcommands, each given its row of the dispatcher's table. */
int cmd_push(const cli_cmd_t *cmd, int argc, char **argv);
int cmd_failed(const cli_cmd_t *cmd, int argc, char **argv);
int cmd_pending(const cli_cmd_t *cmd, int argc, char **argv);
int cmd_metrics(const cli_cmd_t *cmd, int argc, char **argv);
int cmd_monitor(const cli_cmd_t *cmd, int argc, char **argv);
int cmd_import(const cli_cmd_t *cmd, int argc, char **argv);
/* status, pause, continue, scale, restart, reload, terminate (cmd->name) */
int cmd_control(const cli_cmd_t *cmd, int argc, char **argv);
/* One request line to the master of config cfg and its reply (*rep, its
 * text fields made fit for a terminal; *raw as it came; the caller frees
 * both): 0, else the exit status (2: not running; said why on stderr). */
int cli_ctl_call(const char *cfg, const char *line, int timeout_ms, cJSON **rep, char **raw);
/* `qpool failed SUB ... --app POOL` (cli_appfailed.c). */
typedef struct {
    const char *cfg, *pool, *queue, *name, *uuid, *text, *since, *until, *tag;
    bool json;
    long limit, offset;
    int nargs;
    char **args;
} app_failed_args_t;
int cli_app_failed(const char *sub, const app_failed_args_t *a);
/* status --fleet (cmd: the status row) */
int cmd_fleet(const cli_cmd_t *cmd, int argc, char **argv);
/* qpool check --connect: connect to, AUTH and PING every redis connection of c,
 * a line each on out. 0 if all answered, -1 if any did not. */
int cli_check_connect(const qconf_t *c, FILE *out);

#endif
