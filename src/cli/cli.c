/*
 * cli.c - the dispatcher: the table of commands (name, summary, help text,
 * what runs it), `qpool help`, and the run / check / version commands. Every
 * command accepts -h/--help; `qpool help CMD` prints the same. The other
 * commands run in their own files (cli.h); this calls them, they never call
 * back here.
 */
#include "cli/cli.h"
#include "http/http.h"
#include "master/master.h"
#include "core/util.h"
#include "version.h"
#include "core/buildinfo.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmd_run(const cli_cmd_t *cmd, int argc, char **argv);
static int cmd_check(const cli_cmd_t *cmd, int argc, char **argv);
static int run_status(const cli_cmd_t *cmd, int argc, char **argv);
static int cmd_version(const cli_cmd_t *cmd, int argc, char **argv);
static int cmd_help(const cli_cmd_t *cmd, int argc, char **argv);
static int cmd_http(const cli_cmd_t *cmd, int argc, char **argv);

/* In the order `qpool help` lists them. */
static const cli_cmd_t COMMANDS[] = {
    {"run", "run the master in the foreground",
     "usage: qpool run [-c FILE]\n"
     "\n"
     "Run the master in the foreground: validate the config, start every pool's\n"
     "children, keep them alive and sized, until SIGTERM/SIGINT (graceful stop)\n"
     "or SIGQUIT (fast stop). Logs go to stderr, one line per event.\n"
     "\n"
     "  -c, --config FILE   config file (default: $QPOOL_CONFIG, else /etc/qpool/qpool.conf)\n"
     "\n"
     "Signals: SIGTERM/SIGINT graceful stop (twice: fast), SIGQUIT fast stop,\n"
     "SIGHUP reload, SIGUSR2 pause, SIGCONT resume.\n"
     "With qpool.http.listen set (e.g. \"127.0.0.1:9178\"), an unprivileged child\n"
     "serves GET /metrics (Prometheus), /healthz (200, or 503 with the reason) and\n"
     "/api/status, /api/fleet, /api/metrics, /api/jobs/recent, /api/jobs/UUID,\n"
     "/api/failed (JSON); a non-loopback listen needs token_file or token_env\n"
     "(Authorization: Bearer ...). Without the token, a local request reads\n"
     "aggregates only (http.read_without_token); job records, payloads and\n"
     "failed jobs need it. See docs/api.md.\n"
     "qpool.alerts raises long_wait, crash_loop and failure_rate alerts: a warning\n"
     "in the log and JSON on alerts.command's stdin (docs/operations.md).\n"
     "Exit status: 0 after a stop, 78 on a config error, 1 if another master holds\n"
     "the pid file or setup fails.\n", cmd_run},
    {"check", "validate the config (--connect: and reach every Redis connection)",
     "usage: qpool check [-c FILE] [-q] [--connect]\n"
     "\n"
     "Validate the config file and print the effective configuration, every\n"
     "default filled in. Errors are printed as FILE:LINE: message.\n"
     "A pool with laravel = \"/srv/app\" has its queue, Redis and cache settings\n"
     "read from the app (as the pool's user, with its environment; the adapter's\n"
     "--describe): check prints each one with its source (config/queue.php, .env\n"
     "(NAME), environment (NAME), qpool.conf), the password redacted. An app\n"
     "that cannot be read is an error naming it.\n"
     "\n"
     "  -c, --config FILE   config file (default: $QPOOL_CONFIG, else /etc/qpool/qpool.conf)\n"
     "  -q, --quiet         print nothing when the file is valid\n"
     "  --connect           also connect to every redis connection (Sentinel lookup,\n"
     "                      TLS handshake and certificate check, AUTH, SELECT, ROLE\n"
     "                      behind Sentinel, PING) and print a line for each; and\n"
     "                      for each pool with fleet_max_processes, whether the\n"
     "                      min_processes the fleet reports, with this config's,\n"
     "                      fit in its budget\n"
     "\n"
     "Redis connections take tls = { ca_file; cert_file; key_file; server_name;\n"
     "verify; }, an ACL username with password_env or password_file, and\n"
     "sentinels = [\"host:26379\", ...] with master_name, or cluster = [\"host:port\",\n"
     "...] for a Redis Cluster, where every queue name needs a hash tag ({emails}):\n"
     "one without is an error naming the queue (docs/configuration.md).\n"
     "\n"
     "Exit status: 0 valid (and, with --connect, every connection answered),\n"
     "78 invalid, 1 a connection failed.\n", cmd_check},
    {"status", "show pools, queues and workers",
     "usage: qpool status [-c FILE] [--json] [-v] [--watch [SECONDS]]\n"
     "       qpool status --fleet [-c FILE] [--connection NAME] [--json]\n"
     "\n"
     "Per pool: queues, state, workers busy/idle/starting/stopping, target and\n"
     "min/max, ready/delayed/reserved per queue, jobs and failures per minute,\n"
     "mean runtime, memory recycles and crashes; a pool that preloads its PHP app:\n"
     "its zygote (pid, generation, restarts, memory: shared by its handlers),\n"
     "and the app agent that reads Laravel's signals through a cache store that\n"
     "is not Redis (pid, state, restarts).\n"
     "\n"
     "  -c, --config FILE   config file (for the control socket path)\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON output\n"
     "  -v, --verbose       a line per child: pid, state, current job, running for,\n"
     "                      jobs done, memory (worker + handler RSS; \"(uss)\": a\n"
     "                      handler the zygote forked counts its private memory)\n"
     "  -w, --watch [S]     redraw every S seconds (default 2) until Ctrl-C\n"
     "  --fleet             every live master on the Redis connection (default:\n"
     "                      default), from their heartbeats in Redis: host, pid,\n"
     "                      version, state, uptime, workers, pools, config; with\n"
     "                      totals, and each fleet budget (fleet_max_processes)\n"
     "                      with every master's slots. Exit 0 when there is one,\n"
     "                      2 when there is none\n"
     "\n"
     "Exit status (as horizon:status): 0 running, 1 paused, 2 not running.\n", run_status},
    {"pause", "pause everything, some pools, some queues, or job classes fleet-wide",
     "usage: qpool pause [-c FILE] [POOL...] [--queue QUEUE]...\n"
     "       qpool pause [-c FILE] [POOL...] --class CLASS...\n"
     "\n"
     "Stop taking new jobs: everything when no POOL or --queue is given, else the\n"
     "named pools, or the named queues in every pool that works them. Running jobs\n"
     "finish. The pause survives reloads and respawns; `qpool continue` ends it.\n"
     "\n"
     "  -q, --queue QUEUE   pause this queue (repeatable)\n"
     "  --class CLASS       pause this job class (the payload's displayName) on\n"
     "                      every master on the same Redis: its jobs stay in their\n"
     "                      queues, attempts unchanged, other classes run; kept in\n"
     "                      Redis until `qpool continue --class` (repeatable; at\n"
     "                      most 100 classes paused at once); with POOL, in the\n"
     "                      pools of that name only, on every host\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"continue", "resume what pause stopped",
     "usage: qpool continue [-c FILE] [POOL...] [--queue QUEUE]...\n"
     "       qpool continue [-c FILE] [POOL...] --class CLASS...\n"
     "\n"
     "Resume everything, the named pools, or the named queues; with --class, the\n"
     "named job classes on every master (only --class ends a class pause; with\n"
     "POOL, the pause of those pools, as it was given).\n"
     "\n"
     "  -q, --queue QUEUE   resume this queue (repeatable)\n"
     "  --class CLASS       let this job class run again, fleet-wide (repeatable)\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"scale", "pin a pool's size, or hand it back to the balancer",
     "usage: qpool scale [-c FILE] POOL N|auto\n"
     "\n"
     "Pin POOL at N workers (within max_workers), or with `auto` return it to its\n"
     "configured size / the balancer. Busy workers are never stopped to shrink.\n"
     "A pool with fleet_max_processes takes N only up to that budget, and grows\n"
     "to N as its lease gets the slots from other hosts (the reply says so).\n"
     "\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"restart", "rolling graceful restart (new code)",
     "usage: qpool restart [-c FILE] [POOL]\n"
     "\n"
     "Replace every worker of POOL (or of every pool), one at a time, a new one\n"
     "started before an old one is stopped, so a pool never drops below its size.\n"
     "Old workers finish their current job first. Laravel's `php artisan\n"
     "queue:restart` has the same effect (the master polls its cache key).\n"
     "\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"reload", "re-read the config file (like SIGHUP) and report the result",
     "usage: qpool reload [-c FILE]\n"
     "\n"
     "Ask the master to re-read its config file. If it is invalid, the errors are\n"
     "printed, the old config keeps running and the exit status is 78. If the new\n"
     "config is in effect but its HTTP endpoint is off (e.g. a token_env that is\n"
     "not set), it says why and the exit status is 1.\n"
     "\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"terminate", "graceful stop of the master",
     "usage: qpool terminate [-c FILE] [--wait] [--timeout S]\n"
     "\n"
     "Graceful stop: no new jobs, running jobs finish (up to shutdown_timeout).\n"
     "With --wait, return only when every child has exited, showing the jobs still\n"
     "running while it waits.\n"
     "\n"
     "  -w, --wait          wait for the last child to exit\n"
     "  -t, --timeout S     with --wait: give up waiting after S seconds (exit 1)\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"stop-job", "stop a job this master runs, as at its timeout",
     "usage: qpool stop-job [-c FILE] UUID\n"
     "\n"
     "Stop the running job UUID (the Running page's \"Stop\", POST\n"
     "/api/jobs/<uuid>/stop) on this host: its handler ends as at the job's\n"
     "timeout, so the job is released or failed as its timeout would leave it\n"
     "(by its tries and failOnTimeout). On a pool with app_driver = true the\n"
     "handler gets SIGALRM, the signal of Laravel's own timeout handler (the job\n"
     "is failed if it will exceed its tries or has failOnTimeout, else it stays\n"
     "reserved in the app's queue until retry_after). Exit status 1 when no worker\n"
     "of this master runs it.\n"
     "\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"batches", "list Laravel job batches, or retry a batch's failed jobs",
     "usage: qpool batches [-c FILE] [--json] [--q TEXT] [--status S] [--since T] [--until T]\n"
     "       qpool batches ID [-c FILE] [--json]\n"
     "       qpool batches retry ID\n"
     "\n"
     "The newest 50 job batches (Bus::batch) of the apps that pools preload, read\n"
     "through each pool's app agent from the app's own BatchRepository (the\n"
     "job_batches table; Laravel 8+): progress, pending, processed and failed\n"
     "counts, finished or cancelled. A look keeps them read for 60 s; the first\n"
     "may wait for an agent to start. `retry ID` does what `php artisan\n"
     "queue:retry-batch ID` does, through the app (and takes the same jobs out of\n"
     "qpool's failed store); it runs in the background: list again to follow it.\n"
     "The filters are GET /api/batches's: --q (or --text) text in the name or id\n"
     "(case ignored), --status pending|finished|failed|cancelled, --since and\n"
     "--until on created_at (unix seconds, YYYY-MM-DD[ HH:MM[:SS]] UTC, or an age\n"
     "such as 30m, 1h, 2d).\n"
     "`batches ID` shows one batch and its jobs as qpool's job history saw them\n"
     "(uuid, class, outcome, runtime, finished; the newest 1,000 per batch, for\n"
     "the newest batch_jobs_keep batches (100; 0: none), kept as long as the\n"
     "history, metrics_retention), read from its pool's Redis:\n"
     "what GET /api/batches/ID answers. Exit 1 when there is no such batch.\n"
     "See docs/operations.md#job-batches.\n"
     "\n"
     "  -s, --socket PATH   control socket (overrides the config)\n"
     "  -j, --json          JSON reply\n", cmd_control},
    {"push", "push a job (Laravel-shaped payload)",
     "usage: qpool push QUEUE [-c FILE] [--connection NAME] [--delay SECONDS]\n"
     "                  (--payload JSON | --job NAME [--data JSON] [--tries N]\n"
     "                   [--timeout S] [--backoff LIST] [--max-exceptions N]\n"
     "                   [--retry-until TS] [--fail-on-timeout]\n"
     "                   [--display-name NAME]) [--count N]\n"
     "\n"
     "Push a job the way Laravel does (ready list + notify token, or the delayed\n"
     "set with --delay). --job builds a payload with uuid, displayName, job,\n"
     "maxTries, maxExceptions, failOnTimeout, backoff, timeout, retryUntil, data,\n"
     "id and attempts; --payload pushes the given bytes as they are.\n"
     "\n"
     "  --connection NAME   redis connection from the config (default: default)\n"
     "  --delay S           make the job available in S seconds\n"
     "  --display-name NAME the payload's displayName (default: the --job class)\n"
     "  --count N           push N copies (each with its own uuid/id)\n"
     "  --print             print the payload(s) pushed\n", cmd_push},
    {"failed", "list, show, retry, forget or flush failed jobs",
     "usage: qpool failed list [QUEUE] [--json] [--limit N] [FILTER]\n"
     "       qpool failed show UUID [--json]\n"
     "       qpool failed retry UUID... | --all [--queue QUEUE] | FILTER [--yes]\n"
     "       qpool failed forget UUID... | FILTER [--yes]\n"
     "       qpool failed flush [QUEUE]\n"
     "       qpool failed list|show|retry|forget ... --app POOL [--offset N]\n"
     "FILTER: --class NAME, --queue QUEUE, --since T, --until T, --uuid UUID,\n"
     "--text TEXT (or --q; in the payload or exception, case ignored), --tag TAG\n"
     "(one of the payload's own tags, exact), --pool NAME, --host NAME (where it\n"
     "failed; records from before qpool kept them match neither); T: unix\n"
     "seconds, YYYY-MM-DD[ HH:MM[:SS]] UTC, or an age (30m, 1h, 2d). retry and\n"
     "forget by filter only print the count unless --yes is given. Each bulk\n"
     "action (by filter, --all, flush) is recorded with the user's uid, the\n"
     "filter and the count on stderr and to syslog (LOG_NOTICE, ident qpool).\n"
     "\n"
     "qpool's failed store lives in Redis under <prefix>qpool:failed:* (see\n"
     "docs/operations.md). `retry` pushes a job back onto its queue with attempts\n"
     "reset to 0 and the same uuid, like `php artisan queue:retry`, and removes it\n"
     "from the store. A retryUntil gets the job's window (retryUntil - createdAt)\n"
     "again from now; payloads before Laravel 12.11 keep theirs (a note says so).\n"
     "Text output writes the control bytes of what producers wrote (a job's\n"
     "name, exception, queue: a newline, ESC) and invalid UTF-8 as \\xHH; `show`\n"
     "keeps the exception's and payload's lines. --json gives the exact text.\n"
     "\n"
     "--app POOL: the app's own failer (failed_jobs), where the failures of a\n"
     "pool with app_driver = true go, through the running master and the pool's\n"
     "app agent, as `php artisan queue:failed` sees it: list (newest first, 50\n"
     "at most a page; --offset N for the next; the filters above), show ID,\n"
     "retry ID... and forget ID... (1 to 100 of the failer's ids, as\n"
     "`queue:retry` and `queue:forget` take them, and act as they do; a\n"
     "retry stops after 3 s and names the ids it left: run it again). For root\n"
     "and qpool's user only (list and show also control_user/control_group\n"
     "with http.read_without_token = \"all\").\n"
     "\n"
     "  -c, --config FILE   config file\n"
     "  --connection NAME   redis connection from the config (default: default)\n"
     "  --app POOL          the app's failer, through POOL's app agent\n", cmd_failed},
    {"pending", "delete a queue's pending jobs that match a filter",
     "usage: qpool pending delete QUEUE (--class NAME | --uuid UUID | --text TEXT | --tag TAG |\n"
     "                                  --since T | --until T | --all) [--yes]\n"
     "\n"
     "The pending jobs of QUEUE (ready and delayed; never those running) that\n"
     "match every filter given: --class the job's displayName exactly, --uuid,\n"
     "--text (or --q) text in the payload (case ignored), --tag one of the\n"
     "payload's own tags (exact), --since/--until T on when it was pushed\n"
     "(Horizon's pushedAt, else createdAt; T: unix seconds, YYYY-MM-DD[ HH:MM[:SS]]\n"
     "UTC, or an age such as 30m, 1h, 2d). Without --yes only\n"
     "counts them. Goes in bounded steps (500 jobs each). A delete is recorded\n"
     "with the user's uid, the filter and the count on stderr and to syslog\n"
     "(LOG_NOTICE, ident qpool). See docs/operations.md.\n"
     "\n"
     "  -c, --config FILE   config file\n"
     "  --connection NAME   redis connection from the config (default: default)\n"
     "  -y, --yes           delete (else: count only)\n", cmd_pending},
    {"metrics", "job history by minute, every host (from Redis)",
     "usage: qpool metrics [-c FILE] [--connection NAME] [--minutes N] [--json]\n"
     "                     [--class NAME] [--queue Q] [--pool P] [--host H]\n"
     "                     [--status OUTCOME] [--since T] [--until T]\n"
     "\n"
     "Jobs by outcome per minute over the last N minutes (default 60), every\n"
     "host and pool on the connection, from the history masters keep in Redis\n"
     "for metrics_retention. --json gives, per minute, every host, pool, queue,\n"
     "job class and outcome with its count and runtime and wait summaries\n"
     "(count, sum, p50, p95, p99 in ms). The filters keep the entries that\n"
     "match them all. See docs/operations.md.\n"
     "\n"
     "  -c, --config FILE   config file (for the Redis connection)\n"
     "  --connection NAME   redis connection from the config (default: default)\n"
     "  -m, --minutes N     how far back (1..44640)\n"
     "  --class NAME        only this job class (exact)\n"
     "  -q, --queue Q       only this queue\n"
     "  -p, --pool P        only this pool\n"
     "  --host H            only this host\n"
     "  --status OUTCOME    only done, released, failed, timed_out, crashed or\n"
     "                      exit:<kind> (also --outcome)\n"
     "  --since T, --until T  the minutes from T (and up to T): unix seconds,\n"
     "                      YYYY-MM-DD[ HH:MM[:SS]] UTC or an age (30m, 1h, 2d);\n"
     "                      --since overrides --minutes\n"
     "  -j, --json          JSON output\n", cmd_metrics},
    {"monitor", "list, watch or stop watching monitored tags",
     "usage: qpool monitor list [--json]\n"
     "       qpool monitor add TAG\n"
     "       qpool monitor remove TAG\n"
     "\n"
     "A watched tag's job records (e.g. App\\Models\\User:42, see docs/laravel.md)\n"
     "are kept apart from the recent jobs: monitored_tag_jobs records per tag, for\n"
     "monitored_tag_retention after the last one (default 10000, 7 days), in\n"
     "Redis under <prefix>qpool:{qpool-jobs}:monitored and :tag:<TAG>. `remove`\n"
     "deletes the tag's records. The dashboard's Monitoring page and\n"
     "/api/monitoring do the same (docs/api.md). At most 100 tags. Every job of a\n"
     "watched tag is kept, not a sample, on every pool (app_driver ones too): up\n"
     "to 1,000 a second a pool, bursts of 20,000 (docs/operations.md).\n"
     "\n"
     "  -c, --config FILE   config file (for the Redis connection)\n"
     "  --connection NAME   redis connection from the config (default: default)\n"
     "  -j, --json          JSON output\n", cmd_monitor},
    {"import", "a qpool.conf from an app's config/horizon.php",
     "usage: qpool import horizon APP [--env ENV] [--user USER] [--php \"CMD...\"] [--adapter PATH]\n"
     "\n"
     "Print a qpool.conf that runs the work APP's config/horizon.php describes\n"
     "(Horizon need not be installed): Horizon's defaults merged with the\n"
     "environment ENV (default: the app's APP_ENV), each supervisor a pool\n"
     "(queues, balance, autoScalingStrategy, min/maxProcesses, tries, timeout,\n"
     "memory, backoff, maxTime, maxJobs, nice, rest), waits as alerts.long_wait.\n"
     "Comments mark where qpool differs. The pools say laravel = \"APP\", so the\n"
     "app's Redis and cache settings are read when qpool starts, and prefetch = 8\n"
     "(up to 8 jobs per pop, the adapter's speed; 1 pops one at a time). The app is\n"
     "booted as the calling user (as USER with --user, which root must give),\n"
     "with the calling environment.\n"
     "\n"
     "  -e, --env ENV       Horizon environment (a name or a pattern in environments)\n"
     "  -u, --user USER     read the app as USER (required as root: it runs the app's code)\n"
     "  --php \"CMD...\"     how to run PHP (default \"php\"; e.g. \"chroot /r php\")\n"
     "  --adapter PATH      qpool-handler.php as PHP sees it (default: the installed one)\n"
     "\n"
     "Exit status: 0 printed, 1 the app or its Horizon config cannot be read.\n", cmd_import},
    {"version", "print the version and the libraries it was built with", "usage: qpool version\n", cmd_version},
    {"help", "help on a command", "usage: qpool help [COMMAND]\n", cmd_help},
    {HTTP_SUBCOMMAND, NULL, NULL, cmd_http}, /* internal: the master's HTTP process */
};

static void usage_all(FILE *f)
{
    fprintf(f, "qpool %s - Laravel-compatible Redis queue worker pools\n\n", QPOOL_VERSION);
    fprintf(f, "usage: qpool COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < ARRAY_LEN(COMMANDS); i++)
        if (COMMANDS[i].summary) fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\nRun `qpool help COMMAND` or `qpool COMMAND --help` for a command's options.\n"
               "Config: -c FILE, else $QPOOL_CONFIG, else %s.\n"
               "Docs: docs/configuration.md, docs/operations.md.\n",
            QPOOL_DEFAULT_CONFIG);
}

static const cli_cmd_t *find_command(const char *name)
{
    for (size_t i = 0; i < ARRAY_LEN(COMMANDS); i++)
        if (!strcmp(COMMANDS[i].name, name)) return &COMMANDS[i];
    return NULL;
}

/* qpool help [COMMAND] */
static int cmd_help(const cli_cmd_t *cmd, int argc, char **argv)
{
    (void)cmd;
    if (argc < 2) {
        usage_all(stdout);
        return 0;
    }
    const cli_cmd_t *c = find_command(argv[1]);
    if (c && c->help) {
        cli_print_help(c);
        return 0;
    }
    fprintf(stderr, "qpool: no such command '%s'\n", argv[1]);
    return EXIT_USAGE;
}

static int cmd_version(const cli_cmd_t *cmd, int argc, char **argv)
{
    (void)cmd, (void)argc, (void)argv;
    buildinfo_print(stdout);
    return 0;
}

/* internal: the master's HTTP process */
static int cmd_http(const cli_cmd_t *cmd, int argc, char **argv)
{
    (void)cmd;
    return http_main(argc, argv);
}

/* status talks to the control socket; status --fleet reads Redis. */
static int run_status(const cli_cmd_t *cmd, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--fleet")) return cmd_fleet(cmd, argc, argv);
    return cmd_control(cmd, argc, argv);
}

/* run and check: -c FILE [-q] only. */
typedef struct {
    const char *cfg;
    bool quiet;
} simple_args_t;

static const cli_opt_t RUN_OPTS[] = {
    CLI_STR("config", 'c', offsetof(simple_args_t, cfg)),
    CLI_BAD("quiet", 'q'),
    CLI_OPTS_END,
};
static const cli_opt_t CHECK_OPTS[] = {
    CLI_STR("config", 'c', offsetof(simple_args_t, cfg)),
    CLI_TRUE("quiet", 'q', offsetof(simple_args_t, quiet)),
    CLI_OPTS_END,
};

/* 0: go on; -1: stop with exit status *status. */
static int parse_simple(const cli_cmd_t *cmd, int argc, char **argv, const cli_opt_t *opts, simple_args_t *a,
                        int *status)
{
    if (cli_parse(cmd, argc, argv, "c:qh", opts, a, "invalid option", status) < 0) return -1;
    if (optind < argc) {
        cli_usage_error(cmd->name, "unexpected argument '%s'", argv[optind]);
        *status = EXIT_USAGE;
        return -1;
    }
    return 0;
}

static int cmd_run(const cli_cmd_t *cmd, int argc, char **argv)
{
    simple_args_t a = {0};
    int status;
    if (parse_simple(cmd, argc, argv, RUN_OPTS, &a, &status) < 0) return status;
    return master_run(config_path(a.cfg));
}

/* Move every flag to the end of argv and out of *argc (the strings stay in
 * argv: setproctitle's copies of them are freed with it); true if seen. */
static bool take_flag(int *argc, char **argv, const char *flag)
{
    int seen = 0;
    for (int i = 1; i < *argc - seen;) {
        if (strcmp(argv[i], flag)) {
            i++;
            continue;
        }
        char *f = argv[i];
        memmove(argv + i, argv + i + 1, sizeof *argv * (size_t)(*argc - i - 1));
        argv[*argc - 1] = f;
        seen++;
    }
    *argc -= seen;
    return seen > 0;
}

static int cmd_check(const cli_cmd_t *cmd, int argc, char **argv)
{
    simple_args_t a = {0};
    bool connect = take_flag(&argc, argv, "--connect");
    int status;
    if (parse_simple(cmd, argc, argv, CHECK_OPTS, &a, &status) < 0) return status;
    conf_errors_t errs;
    qconf_t *c = config_load(config_path(a.cfg), &errs);
    conf_errors_print(&errs, stderr);
    conf_errors_free(&errs);
    if (!c) return QPOOL_EX_CONFIG;
    if (!a.quiet) config_print(c, stdout);
    int rv = connect && cli_check_connect(c, stdout) < 0 ? 1 : 0;
    config_free(c);
    return rv;
}

int cli_main(int argc, char **argv)
{
    if (argc < 2) {
        usage_all(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
        usage_all(stdout);
        return 0;
    }
    if (!strcmp(name, "-V") || !strcmp(name, "--version")) name = "version";
    const cli_cmd_t *cmd = find_command(name);
    if (cmd) return cmd->run(cmd, argc - 1, argv + 1);
    fprintf(stderr, "qpool: no such command '%s'\n\n", name);
    usage_all(stderr);
    return EXIT_USAGE;
}
