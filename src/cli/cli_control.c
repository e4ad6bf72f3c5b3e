/*
 * cli_control.c - clients of the control socket: status, pause, continue,
 * scale, restart, reload, terminate. Each sends one JSON request line and
 * prints the reply, as text or (--json) as it came. A table has a row per
 * command: the options it takes, how its operands make the request, how its
 * reply prints (the help text is the dispatcher's row, cli.c).
 *
 * Exit status: 0 success (status: running), 1 failure (status: paused),
 * 2 the master is not running, 78 reload rejected the config, 64 usage.
 */
#include "cli/cli.h"
#include "core/util.h"
#include "http/batch_filter.h"
#include "redis/failed_search.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EXIT_NOT_RUNNING 2

static int connect_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) return -1;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Read one line; timeout_ms < 0 waits forever. NULL on EOF/timeout. */
static cJSON *read_reply(int fd, sbuf_t *buf, int timeout_ms, char **raw)
{
    int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : 0;
    for (;;) {
        char *nl = buf->len ? memchr(buf->data, '\n', buf->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - buf->data);
            cJSON *o = cJSON_ParseWithLength(buf->data, n);
            cli_json_text(o); /* for the text printed from it; --json prints raw */
            if (raw) *raw = xstrndup(buf->data, n);
            sbuf_consume(buf, n + 1);
            return o;
        }
        int wait = -1;
        if (deadline) {
            int64_t left = deadline - mono_ms();
            if (left <= 0) return NULL;
            wait = (int)left;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, wait);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return NULL;
        char tmp[65536];
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n <= 0) return NULL;
        sbuf_append(buf, tmp, (size_t)n);
    }
}

/* short names for the reply members printed below (cli_common.h) */
static double num(const cJSON *o, const char *k) { return cli_json_num(o, k); }
static const char *str(const cJSON *o, const char *k) { return cli_json_str(o, k); }

/* A pool's share of its fleet budget (budgeting.h), under its line. */
static void print_budget(const cJSON *b)
{
    if (!cJSON_IsObject(b)) return;
    printf("    fleet budget %d workers: this host holds %d (fair share %d, wants %d); the fleet uses %.0f, %.0f free",
           (int)num(b, "budget"), (int)num(b, "held"), (int)num(b, "share"), (int)num(b, "want"), num(b, "in_use"),
           num(b, "free"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "waiting"))) printf("; waiting for budget");
    if (!strcmp(str(b, "lease"), "failing"))
        printf("; LEASE NOT RENEWED (%s): growing no more, down to its floor after half the lease's %.0f s",
               str(b, "lease_error"), num(b, "lease_ttl_s"));
    printf("\n");
}

/* A line per child of a pool (status -v). */
static void print_child(const cJSON *c)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(c, "job");
    char job[256] = "-";
    if (cJSON_IsObject(j))
        snprintf(job, sizeof job, "%s [%s] on %s, running %.1f s", str(j, "name"), str(j, "id"), str(j, "queue"),
                 num(j, "running_ms") / 1000.0);
    bool uss = !strcmp(str(c, "memory"), "rss+uss");
    printf("      #%-3d pid %-7d %-9s up %6.0f s  %6.0f jobs  %7.1f MB%s  %s%s\n", (int)num(c, "slot"),
           (int)num(c, "pid"), str(c, "state"), num(c, "uptime_s"), num(c, "jobs_done"), num(c, "rss_kb") / 1024.0,
           uss ? " (uss)" : "", job,
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "old_generation")) ? " (old config)" : "");
}

/* A pool's line, then its budget, queues, zygote, agent (and children). */
static void print_pool(const cJSON *p, bool verbose)
{
    char mm[32], rt[32], tg[32];
    snprintf(mm, sizeof mm, "%d-%d", (int)num(p, "min"), (int)num(p, "max"));
    snprintf(rt, sizeof rt, "%.0f ms", num(p, "mean_runtime_ms"));
    const cJSON *pin = cJSON_GetObjectItemCaseSensitive(p, "pinned");
    snprintf(tg, sizeof tg, "%d%s", (int)num(p, "target"), cJSON_IsNumber(pin) ? "*" : "");
    bool external = !strcmp(str(p, "kind"), "command");
    char busy[16] = "-", idle[16] = "-";
    if (!external) {
        snprintf(busy, sizeof busy, "%d", (int)num(p, "busy"));
        snprintf(idle, sizeof idle, "%d", (int)num(p, "idle"));
    }
    printf("%-16s %-8s %7d %4s %4s %5d %4d %6s %7s %8.1f %8.1f %8s %8d %7d\n", str(p, "name"), str(p, "state"),
           (int)num(p, "workers"), busy, idle, (int)num(p, "starting"), (int)num(p, "stopping"), tg, mm,
           num(p, "jobs_per_min"), num(p, "failed_per_min"), external ? "-" : rt, (int)num(p, "memory_recycles"),
           (int)num(p, "crashes"));
    print_budget(cJSON_GetObjectItemCaseSensitive(p, "fleet_budget"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "maintenance")))
        printf("    waiting: down (maintenance): its Laravel app is down (php artisan down); `php artisan up` resumes it\n");
    const cJSON *q;
    cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(p, "queues"))
    {
        bool paused = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "paused"));
        bool lp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "laravel_paused"));
        printf("    queue %-24s ready %-8.0f delayed %-8.0f reserved %-8.0f%s%s\n", str(q, "name"), num(q, "ready"),
               num(q, "delayed"), num(q, "reserved"), paused ? " paused" : "", lp ? " (queue:pause)" : "");
    }
    const cJSON *z = cJSON_GetObjectItemCaseSensitive(p, "zygote");
    if (cJSON_IsObject(z))
        printf("    zygote pid %-7d %-10s generation %.0f, restarts %.0f, %.1f MB PSS (%.1f MB RSS), shared by "
               "its handlers\n", (int)num(z, "pid"), str(z, "state"), num(z, "generation"), num(z, "restarts"),
               num(z, "pss_kb") / 1024.0, num(z, "rss_kb") / 1024.0);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, "agent");
    if (cJSON_IsObject(a))
        printf("    agent  pid %-7d %-10s restarts %.0f, reads Laravel's %s through the app\n", (int)num(a, "pid"),
               str(a, "state"), num(a, "restarts"), str(a, "reads"));
    if (!verbose) return;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(p, "children")) print_child(c);
}

/* The fleet-wide limits: one line each. */
static void print_limits(const cJSON *limits)
{
    if (cJSON_GetArraySize(limits) <= 0) return;
    printf("\n%-40s %-16s %11s %14s %8s %9s\n", "LIMIT CLASS", "QUEUE", "RUNNING", "RATE (TOKENS)", "WAITING",
           "WAITED");
    const cJSON *l;
    cJSON_ArrayForEach(l, limits) {
        const char *c = str(l, "class"), *q = str(l, "queue"), *rate = str(l, "rate");
        bool known = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(l, "in_use"));
        char run[32] = "-", rt[48] = "-", wait[24] = "?", waited[24] = "?";
        bool per_key = *str(l, "tag_prefix") != 0;
        if (num(l, "concurrency") > 0 && known && per_key)
            snprintf(run, sizeof run, "%d (%d/key)", (int)num(l, "in_use"), (int)num(l, "concurrency"));
        else if (num(l, "concurrency") > 0 && known)
            snprintf(run, sizeof run, "%d/%d", (int)num(l, "in_use"), (int)num(l, "concurrency"));
        else if (num(l, "concurrency") > 0)
            snprintf(run, sizeof run, "?/%d", (int)num(l, "concurrency"));
        if (rate && *rate && per_key)
            snprintf(rt, sizeof rt, "%s per key", rate);
        else if (rate && *rate && known)
            snprintf(rt, sizeof rt, "%s (%.1f)", rate, num(l, "tokens"));
        else if (rate && *rate)
            snprintf(rt, sizeof rt, "%s (?)", rate);
        if (known) {
            snprintf(wait, sizeof wait, "%d", (int)num(l, "waiting"));
            snprintf(waited, sizeof waited, "%.0f s", num(l, "waited_s"));
        }
        printf("%-40s %-16s %11s %14s %8s %9s\n", c && *c ? c : "*", q && *q ? q : "*", run, rt, wait, waited);
    }
}

/* The classes paused across the fleet: since when, by whom, jobs held back. */
static void print_paused_classes(const cJSON *pc)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, pc) {
        char since[32] = "?";
        time_t t = (time_t)num(e, "since");
        struct tm tm;
        if (t > 0 && localtime_r(&t, &tm)) strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", &tm);
        const cJSON *pool = cJSON_GetObjectItemCaseSensitive(e, "pool");
        printf("paused class %s%s%s since %s by %s on %s, %.0f jobs held back\n", str(e, "class"),
               cJSON_IsString(pool) ? " in pool " : "", cJSON_IsString(pool) ? pool->valuestring : "", since,
               str(e, "by"), str(e, "host"), num(e, "waiting"));
    }
}

static void print_status(const cJSON *s, bool verbose)
{
    printf("qpool %s (pid %d): %s, %d workers (max %d), config %s\n", str(s, "version"), (int)num(s, "pid"),
           str(s, "state"), (int)num(s, "workers"), (int)num(s, "max_workers"), str(s, "config"));
    const cJSON *pq = cJSON_GetObjectItemCaseSensitive(s, "paused_queues");
    if (cJSON_GetArraySize(pq) > 0) {
        printf("paused queues:");
        const cJSON *e;
        cJSON_ArrayForEach(e, pq) printf(" %s", e->valuestring);
        printf("\n");
    }
    print_paused_classes(cJSON_GetObjectItemCaseSensitive(s, "paused_classes"));
    printf("\n%-16s %-8s %7s %4s %4s %5s %4s %6s %7s %8s %8s %8s %8s %7s\n", "POOL", "STATE", "WORKERS", "BUSY",
           "IDLE", "START", "STOP", "TARGET", "MIN-MAX", "JOBS/MIN", "FAIL/MIN", "RUNTIME", "RECYCLES", "CRASHES");
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(s, "pools")) print_pool(p, verbose);
    print_limits(cJSON_GetObjectItemCaseSensitive(s, "limits"));
}

static void print_scaled(const cJSON *rep)
{
    printf("pool %s: target %d\n", str(rep, "pool"), (int)num(rep, "target"));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(rep, "fleet_budget");
    if (cJSON_IsObject(b))
        printf("the pool shares a fleet budget of %d workers: this host holds %d slots now; a pin above that waits "
               "for other hosts to release slots (see qpool status)\n", (int)num(b, "budget"), (int)num(b, "held"));
}

static void print_running(const cJSON *r)
{
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(r, "running");
    printf("waiting for %d children", (int)num(r, "children"));
    if (cJSON_GetArraySize(jobs) > 0) printf("; running:");
    printf("\n");
    const cJSON *j;
    cJSON_ArrayForEach(j, jobs)
        printf("  %s pid %d: %s [%s] for %.1f s\n", str(j, "pool"), (int)num(j, "pid"), str(j, "job"), str(j, "id"),
               num(j, "running_ms") / 1000.0);
}

/* Which of the shared options a command takes (control_t.opts). */
enum ctl_opt {
    CTL_OPT_VERBOSE = 1 << 0, /* -v: status */
    CTL_OPT_WATCH = 1 << 1,   /* -w/--watch [S]: status */
    CTL_OPT_WAIT = 1 << 2,    /* -w/--wait, -t/--timeout S: terminate */
    CTL_OPT_QUEUE = 1 << 3,   /* -q/--queue QUEUE: pause, continue */
    CTL_OPT_BFILTER = 1 << 4, /* --q, --status, --since, --until: batches (as GET /api/batches) */
};

/* A command line, parsed. */
typedef struct {
    const char *cmd;
    const char *cfg, *sock;
    bool json, verbose, wait;
    double watch, timeout;
    cJSON *queues; /* --queue, until the request takes them */
    cJSON *classes; /* --class, likewise */
    bfilter_t bf;   /* batches: the list's filter */
    bool filtered;  /* bf names one */
    const char *batch; /* batches ID: that one batch, with its jobs */
    int npos;      /* the operands */
    char **pos;
} ctl_args_t;

/* The connection to the master, for the replies after the first. */
typedef struct {
    int fd;
    sbuf_t in;
} ctl_conn_t;

typedef struct {
    const char *name;
    unsigned opts; /* enum ctl_opt */
    /* The request's members after "cmd", from the operands; -1 (usage error
     * printed) when they do not fit. */
    int (*request)(ctl_args_t *a, cJSON *req);
    /* A reply with "ok": true: print it (text unless --json) and return the
     * exit status; NULL: print done (unless --json), exit 0. */
    int (*reply)(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c);
    const char *done;
} control_t;

/* status, reload, terminate: no operands. */
static int req_plain(ctl_args_t *a, cJSON *req)
{
    if (a->npos) {
        cli_usage_error(a->cmd, "unexpected argument");
        return -1;
    }
    if (a->verbose) cJSON_AddTrueToObject(req, "verbose");
    if (a->wait) cJSON_AddTrueToObject(req, "wait");
    return 0;
}

/* pause, continue: [POOL...] [--queue QUEUE]... */
static int req_pools(ctl_args_t *a, cJSON *req)
{
    cJSON *pools = cJSON_AddArrayToObject(req, "pools");
    for (int i = 0; i < a->npos; i++) cJSON_AddItemToArray(pools, cJSON_CreateString(a->pos[i]));
    cJSON_AddItemToObject(req, "queues", a->queues);
    a->queues = NULL;
    if (cJSON_GetArraySize(a->classes) > 0) {
        cJSON_AddItemToObject(req, "classes", a->classes);
        a->classes = NULL;
    }
    return 0;
}

/* scale POOL N|auto */
static int req_scale(ctl_args_t *a, cJSON *req)
{
    long n;
    if (a->npos != 2) {
        cli_usage_error(a->cmd, "expected POOL N|auto");
        return -1;
    }
    cJSON_AddStringToObject(req, "pool", a->pos[0]);
    if (!strcmp(a->pos[1], "auto"))
        cJSON_AddStringToObject(req, "n", "auto");
    else if (parse_long(a->pos[1], &n) && n >= 0)
        cJSON_AddNumberToObject(req, "n", (double)n);
    else {
        cli_usage_error(a->cmd, "'%s' is not a number of workers or auto", a->pos[1]);
        return -1;
    }
    return 0;
}

/* restart [POOL] */
static int req_restart(ctl_args_t *a, cJSON *req)
{
    if (a->npos > 1) {
        cli_usage_error(a->cmd, "unexpected argument");
        return -1;
    }
    if (a->npos == 1) cJSON_AddStringToObject(req, "pool", a->pos[0]);
    return 0;
}

/* stop-job UUID */
static int req_stop_job(ctl_args_t *a, cJSON *req)
{
    if (a->npos != 1) {
        cli_usage_error(a->cmd, "expected the running job's UUID");
        return -1;
    }
    cJSON_AddStringToObject(req, "uuid", a->pos[0]);
    return 0;
}

static int reply_stop_job(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c)
{
    (void)c;
    if (!a->json)
        printf("stopping job %s (pool %s, worker %.0f): its handler ends as at the job's timeout\n", str(rep, "uuid"),
               str(rep, "pool"), num(rep, "pid"));
    return 0;
}

static int reply_status(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c)
{
    (void)c;
    if (!a->json) {
        if (a->watch > 0) printf("\033[H\033[2J");
        print_status(rep, a->verbose);
    }
    return !strcmp(str(rep, "state"), "paused") ? 1 : 0;
}

static int reply_scale(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c)
{
    (void)c;
    if (!a->json) print_scaled(rep);
    return 0;
}

static int reply_reload(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c)
{
    (void)c;
    if (!a->json) printf("%s\n", str(rep, "message"));
    return 0;
}

/* terminate --wait: the master's events until "done", it hangs up, or
 * --timeout runs out. */
static int wait_stopped(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c)
{
    if (!a->json) print_running(rep);
    int64_t deadline = a->timeout > 0 ? mono_ms() + (int64_t)(a->timeout * 1000) : 0;
    bool done = false;
    while (!done) {
        int left = deadline ? (int)(deadline - mono_ms()) : -1;
        if (deadline && left <= 0) break;
        char *raw = NULL;
        cJSON *ev = read_reply(c->fd, &c->in, left, &raw);
        if (!ev) {
            /* the master closed the socket: it is gone */
            free(raw);
            done = !deadline || mono_ms() < deadline;
            break;
        }
        if (a->json) printf("%s\n", raw);
        free(raw);
        done = !strcmp(str(ev, "event"), "done");
        if (!a->json && !done) print_running(ev);
        cJSON_Delete(ev);
        fflush(stdout);
    }
    if (!done) {
        fprintf(stderr, "qpool terminate: still stopping after %g s\n", a->timeout);
        return 1;
    }
    if (!a->json) printf("qpool stopped\n");
    return 0;
}

static int reply_terminate(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c)
{
    if (a->wait) return wait_stopped(a, rep, c);
    if (!a->json) printf("stopping\n");
    return 0;
}

/* batches [ID | retry ID] */
static int req_batches(ctl_args_t *a, cJSON *req)
{
    if (a->npos == 0) return 0;
    if (a->npos == 1 && strcmp(a->pos[0], "retry")) {
        if (a->filtered) {
            cli_usage_error(a->cmd, "ID takes no filter");
            return -1;
        }
        a->batch = a->pos[0];
        return 0;
    }
    if (a->npos == 2 && !strcmp(a->pos[0], "retry")) {
        cJSON_ReplaceItemInObjectCaseSensitive(req, "cmd", cJSON_CreateString("batch-retry"));
        cJSON_AddStringToObject(req, "batch", a->pos[1]);
        return 0;
    }
    cli_usage_error(a->cmd, "expected no operand, ID, or retry ID");
    return -1;
}

/* Some pool that reads batches has no list yet (its agent is starting). */
static bool batches_loading(const cJSON *rep)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(rep, "pools"))
        if (!strcmp(str(p, "state"), "loading")) return true;
    return false;
}

static const char *batch_state(const cJSON *b)
{
    if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(b, "cancelled_at"))) return "cancelled";
    if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(b, "finished_at"))) return "finished";
    return num(b, "failed") > 0 ? "failures" : "running";
}

/* The batches bf passes, the others dropped (with "unfiltered": how many
 * there were, as GET /api/batches says). */
static void filter_batches(const ctl_args_t *a, cJSON *rep)
{
    cJSON *list = cJSON_GetObjectItemCaseSensitive(rep, "batches");
    if (!a->filtered || !cJSON_IsArray(list)) return;
    int of = cJSON_GetArraySize(list);
    bfilter_apply(&a->bf, list);
    cJSON_AddNumberToObject(rep, "unfiltered", of);
}

static void print_batches(cJSON *rep)
{
    cli_json_text(rep);
    const cJSON *b, *p;
    printf("%-36s  %-24s %5s %7s %9s %6s  %-9s %s\n", "ID", "NAME", "DONE", "PENDING", "PROCESSED", "FAILED", "STATE",
           "POOL");
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(rep, "batches")) {
        const char *name = str(b, "name"); /* escaped above; cut at a character, not inside one */
        int cut = (int)utf8_cut(name, strlen(name), 24);
        printf("%-36s  %-24.*s %4.0f%% %7.0f %9.0f %6.0f  %-9s %s\n", str(b, "id"), cut, name, num(b, "progress"),
               num(b, "pending"), num(b, "processed"), num(b, "failed"), batch_state(b), str(b, "pool"));
    }
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(rep, "pools"))
        if (strcmp(str(p, "state"), "ok"))
            printf("pool %s: %s%s%s\n", str(p, "pool"), str(p, "state"), *str(p, "error") ? ": " : "", str(p, "error"));
    if (*str(rep, "note")) printf("%s\n", str(rep, "note"));
}

/* batches ID: the batch of the list (last), with the pools' states and its
 * jobs, as GET /api/batches/ID answers; exit status 1 when it is not there. */
static int one_batch(const ctl_args_t *a, cJSON *last)
{
    cJSON *list = cJSON_GetObjectItemCaseSensitive(last, "batches"), *b, *found = NULL;
    cJSON_ArrayForEach(b, list) {
        if (!found && !strcmp(str(b, "id"), a->batch)) found = b;
    }
    if (!found) {
        char err[300];
        snprintf(err, sizeof err, "no batch %.80s among the newest batches%s", a->batch,
                 batches_loading(last) ? " (an app agent is still reading them)" : "");
        cJSON *e = cJSON_CreateObject();
        cJSON_AddFalseToObject(e, "ok");
        cJSON_AddStringToObject(e, "error", err);
        if (a->json)
            cli_json_print(e);
        else
            fprintf(stderr, "qpool batches: %s\n", err);
        cJSON_Delete(e);
        return 1;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    cJSON_AddItemToObject(o, "batch", cJSON_DetachItemViaPointer(list, found));
    cJSON_AddItemToObject(o, "pools", cJSON_DetachItemFromObjectCaseSensitive(last, "pools"));
    cli_batch_jobs(a->cfg, a->batch, o);
    if (a->json)
        cli_json_print(o);
    else
        cli_batch_print(o);
    cJSON_Delete(o);
    return 0;
}

/* The list: asked again (up to 20 s) while an agent starts, then printed
 * (--json: the first reply, printed as it came, states and all; with ID,
 * that batch once read). */
static int reply_batches(const ctl_args_t *a, const cJSON *rep, ctl_conn_t *c)
{
    if (a->json && a->filtered) { /* take_reply left it to us */
        cJSON *out = cJSON_Duplicate(rep, true);
        filter_batches(a, out);
        char *txt = cJSON_PrintUnformatted(out);
        printf("%s\n", txt);
        free(txt);
        cJSON_Delete(out);
    }
    if (a->json && !a->batch) return 0;
    if (!cJSON_GetObjectItemCaseSensitive(rep, "batches")) { /* batch-retry */
        printf("retrying the failed jobs of batch %s (pool %s)\n", str(rep, "batch"), str(rep, "pool"));
        return 0;
    }
    cJSON *last = cJSON_Duplicate(rep, true);
    for (int64_t until = mono_ms() + 20000; last && batches_loading(last) && mono_ms() < until;) {
        usleep(250000);
        if (write_all(c->fd, "{\"cmd\":\"batches\"}\n", 18) < 0) break;
        char *raw = NULL;
        cJSON *next = read_reply(c->fd, &c->in, 10000, &raw);
        free(raw);
        if (!next) break;
        cJSON_Delete(last);
        last = next;
    }
    int rv = 0;
    if (last && a->batch)
        rv = one_batch(a, last);
    else if (last) {
        filter_batches(a, last);
        print_batches(last);
    }
    cJSON_Delete(last);
    return rv;
}

static const control_t CONTROL[] = {
    {"status", CTL_OPT_VERBOSE | CTL_OPT_WATCH, req_plain, reply_status, NULL},
    {"pause", CTL_OPT_QUEUE, req_pools, NULL, "paused"},
    {"continue", CTL_OPT_QUEUE, req_pools, NULL, "resumed"},
    {"scale", 0, req_scale, reply_scale, NULL},
    {"restart", 0, req_restart, NULL, "rolling restart started"},
    {"reload", 0, req_plain, reply_reload, NULL},
    {"terminate", CTL_OPT_WAIT, req_plain, reply_terminate, NULL},
    {"batches", CTL_OPT_BFILTER, req_batches, reply_batches, NULL},
    {"stop-job", 0, req_stop_job, reply_stop_job, NULL},
};

/* A batches filter option (1101 --q, 1102 --status, 1103 --since, 1104
 * --until): 0, or -2 when malformed. */
static int set_bfilter(ctl_args_t *a, int o, const char *arg)
{
    a->filtered = true;
    if (o == 1101) return a->bf.q = arg, 0;
    if (o == 1102) {
        int st = bfilter_status(arg);
        return st < 0 ? -2 : (a->bf.status = (bstatus_t)st, 0);
    }
    long long t;
    if (ffilter_time(arg, wall_s(), &t) < 0) return -2;
    *(o == 1103 ? &a->bf.since : &a->bf.until) = t;
    return 0;
}

/* One option o (getopt's code) with argument arg, if ctl takes it: 0, else
 * -1 (-2: a filter's value is malformed). */
static int set_option(const control_t *ctl, ctl_args_t *a, int o, const char *arg)
{
    switch (o) {
    case 'c': a->cfg = arg; return 0;
    case 's': a->sock = arg; return 0;
    case 'j': a->json = true; return 0;
    case 'v': a->verbose = true; return 0; /* checked after the loop */
    case 'w':
        if (ctl->opts & CTL_OPT_WAIT) {
            a->wait = true; /* -w is --wait for terminate */
            return 0;
        }
        if (!(ctl->opts & CTL_OPT_WATCH)) return -1;
        a->watch = 2;
        return arg && (!parse_double(arg, &a->watch) || a->watch <= 0) ? -1 : 0;
    case 'W':
        if (!(ctl->opts & CTL_OPT_WAIT)) return -1;
        a->wait = true;
        return 0;
    case 'q':
        if (!(ctl->opts & CTL_OPT_QUEUE)) return -1;
        cJSON_AddItemToArray(a->queues, cJSON_CreateString(arg));
        return 0;
    case 'K':
        if (!(ctl->opts & CTL_OPT_QUEUE)) return -1;
        cJSON_AddItemToArray(a->classes, cJSON_CreateString(arg));
        return 0;
    case 't': return (ctl->opts & CTL_OPT_WAIT) && parse_double(arg, &a->timeout) && a->timeout > 0 ? 0 : -1;
    case 1101: case 1102: case 1103: case 1104: return (ctl->opts & CTL_OPT_BFILTER) ? set_bfilter(a, o, arg) : -1;
    default: return -1;
    }
}

/* The control commands' long options, as in 1.0; getopt_long takes any
 * unique prefix, so a name added here can break an abbreviation scripts use
 * (--s for --socket, --t for --timeout, --q for --queue). */
#define CTL_LONG_OPTS                                                                                                 \
    {"config", required_argument, 0, 'c'}, {"socket", required_argument, 0, 's'}, {"json", no_argument, 0, 'j'},      \
        {"verbose", no_argument, 0, 'v'}, {"watch", optional_argument, 0, 'w'}, {"wait", no_argument, 0, 'W'},        \
        {"queue", required_argument, 0, 'q'}, {"class", required_argument, 0, 'K'},                                   \
        {"timeout", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'}
static const struct option ctl_opts[] = {CTL_LONG_OPTS, {0, 0, 0, 0}};
/* batches alone also takes the filters of GET /api/batches */
static const struct option batch_opts[] = {CTL_LONG_OPTS,
                                           {"q", required_argument, 0, 1101},
                                           {"text", required_argument, 0, 1101},
                                           {"status", required_argument, 0, 1102},
                                           {"since", required_argument, 0, 1103},
                                           {"until", required_argument, 0, 1104},
                                           {0, 0, 0, 0}};

/* The options and operands into a. 0: go on; -1: stop with exit status *status. */
static int parse_args(const control_t *ctl, const cli_cmd_t *cmd, int argc, char **argv, ctl_args_t *a, int *status)
{
    const struct option *opts = (ctl->opts & CTL_OPT_BFILTER) ? batch_opts : ctl_opts;
    int o;
    *status = EXIT_USAGE;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:s:jvw::q:t:h", opts, NULL)) != -1) {
        if (o == 'h') {
            cli_print_help(cmd);
            *status = 0;
            return -1;
        }
        int set = set_option(ctl, a, o, optarg);
        if (set == -2) {
            cli_usage_error(a->cmd, "--status: pending, finished, failed or cancelled; --since, --until: unix "
                                    "seconds, YYYY-MM-DD[ HH:MM[:SS]] (UTC) or an age such as 30m");
            return -1;
        }
        if (set < 0) goto bad;
    }
    if (a->watch > 0 && optind < argc && parse_double(argv[optind], &a->watch)) optind++;
    if (a->verbose && !(ctl->opts & CTL_OPT_VERBOSE)) goto bad;
    if (a->timeout > 0 && !a->wait) {
        cli_usage_error(a->cmd, "--timeout goes with --wait");
        return -1;
    }
    a->npos = argc - optind;
    a->pos = argv + optind;
    return 0;
bad:
    cli_usage_error(a->cmd, "invalid option");
    return -1;
}

/* The request line, or NULL (usage error printed). */
static char *request_line(const control_t *ctl, ctl_args_t *a)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", a->cmd);
    char *line = ctl->request(a, req) < 0 ? NULL : cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    return line;
}

/* Cannot connect: only "no socket" and "nobody listening" mean not running;
 * a permission problem must not look like a dead service. */
static int not_connected(const ctl_args_t *a, const char *path)
{
    bool down = errno == ENOENT || errno == ECONNREFUSED;
    if (a->json)
        printf("{\"ok\":false,\"state\":\"%s\",\"error\":\"cannot connect to %s: %s\"}\n",
               down ? "not running" : "unknown", path, strerror(errno));
    else if (down)
        fprintf(stderr, "qpool %s: qpool is not running (cannot connect to %s: %s)\n", a->cmd, path, strerror(errno));
    else
        fprintf(stderr, "qpool %s: cannot connect to %s: %s\n", a->cmd, path, strerror(errno));
    return down ? EXIT_NOT_RUNNING : 1;
}

/* The first reply rep (raw: as it came): printed, and the exit status. */
static int take_reply(const control_t *ctl, const ctl_args_t *a, const cJSON *rep, const char *raw, ctl_conn_t *c)
{
    bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "ok"));
    if (a->json && !(ok && (a->filtered || a->batch) && ctl->reply))
        printf("%s\n", raw);
    else if (!ok)
        fprintf(stderr, "qpool %s: %s\n", a->cmd, str(rep, "error"));
    if (!ok) return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "config_rejected")) ? QPOOL_EX_CONFIG : 1;
    if (ctl->reply) return ctl->reply(a, rep, c);
    if (!a->json) printf("%s\n", ctl->done);
    return 0;
}

/* Send line to the master at path and act on its reply: the exit status;
 * *gone when there was no master or no reply (status --watch stops). */
static int exchange(const control_t *ctl, const ctl_args_t *a, const char *path, const char *line, bool *gone)
{
    ctl_conn_t c = {.fd = connect_socket(path)};
    *gone = true;
    if (c.fd < 0) return not_connected(a, path);
    sbuf_init(&c.in);
    sbuf_puts(&c.in, line);
    sbuf_putc(&c.in, '\n');
    (void)write_all(c.fd, c.in.data, c.in.len);
    sbuf_reset(&c.in);
    char *raw = NULL;
    cJSON *rep = read_reply(c.fd, &c.in, 30000, &raw);
    int rv = 1;
    if (!rep)
        fprintf(stderr, "qpool %s: no reply from the master\n", a->cmd);
    else {
        *gone = false;
        rv = take_reply(ctl, a, rep, raw, &c);
    }
    free(raw);
    cJSON_Delete(rep);
    sbuf_free(&c.in);
    close(c.fd);
    return rv;
}

int cli_ctl_call(const char *cfg, const char *line, int timeout_ms, cJSON **rep, char **raw)
{
    char *path = config_control_socket(config_path(cfg));
    ctl_conn_t c = {.fd = connect_socket(path)};
    *rep = NULL;
    *raw = NULL;
    if (c.fd < 0) {
        bool down = errno == ENOENT || errno == ECONNREFUSED;
        fprintf(stderr, "qpool: %s (cannot connect to %s: %s)\n", down ? "qpool is not running" : "no master",
                path, strerror(errno));
        free(path);
        return down ? EXIT_NOT_RUNNING : 1;
    }
    free(path);
    sbuf_init(&c.in);
    sbuf_puts(&c.in, line);
    sbuf_putc(&c.in, '\n');
    (void)write_all(c.fd, c.in.data, c.in.len);
    sbuf_reset(&c.in);
    *rep = read_reply(c.fd, &c.in, timeout_ms, raw);
    sbuf_free(&c.in);
    close(c.fd);
    if (!*rep) fprintf(stderr, "qpool: no reply from the master\n");
    return *rep ? 0 : 1;
}

int cmd_control(const cli_cmd_t *cmd, int argc, char **argv)
{
    const control_t *ctl = NULL;
    for (size_t i = 0; i < ARRAY_LEN(CONTROL) && !ctl; i++)
        if (!strcmp(CONTROL[i].name, cmd->name)) ctl = &CONTROL[i];
    if (!ctl) return EXIT_USAGE; /* the dispatcher sends only these */
    ctl_args_t a = {.cmd = cmd->name, .queues = cJSON_CreateArray(), .classes = cJSON_CreateArray()};
    int status = EXIT_USAGE;
    char *line = parse_args(ctl, cmd, argc, argv, &a, &status) < 0 ? NULL : request_line(ctl, &a);
    cJSON_Delete(a.queues);
    cJSON_Delete(a.classes);
    if (!line) return status;
    char *path = a.sock ? xstrdup(a.sock) : config_control_socket(config_path(a.cfg));
    int rv;
    for (;;) {
        bool gone;
        rv = exchange(ctl, &a, path, line, &gone);
        if (gone || !(a.watch > 0)) break; /* --watch: until Ctrl-C */
        fflush(stdout);
        usleep((useconds_t)(a.watch * 1e6));
    }
    free(line);
    free(path);
    return rv;
}
