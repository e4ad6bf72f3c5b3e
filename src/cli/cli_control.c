/*
 * cli_control.c - clients of the control socket: status, pause, continue,
 * scale, restart, reload, terminate. Each sends one JSON request line and
 * prints the reply, as text or (--json) as it came.
 *
 * Exit status: 0 success (status: running), 1 failure (status: paused),
 * 2 the master is not running, 78 reload rejected the config, 64 usage.
 */
#include "cli/cli.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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

/* short names for the reply members printed below (cli.h) */
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
    printf("\n%-16s %-8s %7s %4s %4s %5s %4s %6s %7s %8s %8s %8s %8s %7s\n", "POOL", "STATE", "WORKERS", "BUSY",
           "IDLE", "START", "STOP", "TARGET", "MIN-MAX", "JOBS/MIN", "FAIL/MIN", "RUNTIME", "RECYCLES", "CRASHES");
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(s, "pools"))
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
               num(p, "jobs_per_min"), num(p, "failed_per_min"), external ? "-" : rt,
               (int)num(p, "memory_recycles"), (int)num(p, "crashes"));
        print_budget(cJSON_GetObjectItemCaseSensitive(p, "fleet_budget"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "maintenance")))
            printf("    waiting: down (maintenance): its Laravel app is down (php artisan down); `php artisan up` resumes it\n");
        const cJSON *q;
        cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(p, "queues"))
        {
            bool paused = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "paused"));
            bool lp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "laravel_paused"));
            printf("    queue %-24s ready %-8.0f delayed %-8.0f reserved %-8.0f%s%s\n", str(q, "name"),
                   num(q, "ready"), num(q, "delayed"), num(q, "reserved"), paused ? " paused" : "",
                   lp ? " (queue:pause)" : "");
        }
        const cJSON *z = cJSON_GetObjectItemCaseSensitive(p, "zygote");
        if (cJSON_IsObject(z))
            printf("    zygote pid %-7d %-10s generation %.0f, restarts %.0f, %.1f MB PSS (%.1f MB RSS), shared by "
                   "its handlers\n", (int)num(z, "pid"), str(z, "state"), num(z, "generation"), num(z, "restarts"),
                   num(z, "pss_kb") / 1024.0, num(z, "rss_kb") / 1024.0);
        if (!verbose) continue;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(p, "children"))
        {
            const cJSON *j = cJSON_GetObjectItemCaseSensitive(c, "job");
            char job[256] = "-";
            if (cJSON_IsObject(j))
                snprintf(job, sizeof job, "%s [%s] on %s, running %.1f s", str(j, "name"), str(j, "id"),
                         str(j, "queue"), num(j, "running_ms") / 1000.0);
            bool uss = !strcmp(str(c, "memory"), "rss+uss");
            printf("      #%-3d pid %-7d %-9s up %6.0f s  %6.0f jobs  %7.1f MB%s  %s%s\n", (int)num(c, "slot"),
                   (int)num(c, "pid"), str(c, "state"), num(c, "uptime_s"), num(c, "jobs_done"),
                   num(c, "rss_kb") / 1024.0, uss ? " (uss)" : "", job,
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "old_generation")) ? " (old config)" : "");
        }
    }
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

int cmd_control(const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"socket", required_argument, 0, 's'},
                                         {"json", no_argument, 0, 'j'},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"watch", optional_argument, 0, 'w'},
                                         {"wait", no_argument, 0, 'W'},
                                         {"queue", required_argument, 0, 'q'},
                                         {"timeout", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cfg = NULL, *sock = NULL;
    bool json = false, verbose = false, wait = false;
    double watch = 0, timeout = 0;
    bool is_status = !strcmp(cmd, "status"), is_term = !strcmp(cmd, "terminate");
    cJSON *queues = cJSON_CreateArray();
    int o, rv = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:s:jvw::q:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': cfg = optarg; break;
        case 's': sock = optarg; break;
        case 'j': json = true; break;
        case 'v': verbose = true; break;
        case 'w':
            if (!is_status) {
                if (!is_term) goto bad;
                wait = true; /* -w is --wait for terminate */
                break;
            }
            watch = 2;
            if (optarg && (!parse_double(optarg, &watch) || watch <= 0)) goto bad;
            break;
        case 'W':
            if (!is_term) goto bad;
            wait = true;
            break;
        case 'q':
            if (strcmp(cmd, "pause") && strcmp(cmd, "continue")) goto bad;
            cJSON_AddItemToArray(queues, cJSON_CreateString(optarg));
            break;
        case 't':
            if (!is_term || !parse_double(optarg, &timeout) || timeout <= 0) goto bad;
            break;
        case 'h':
            cli_help(cmd);
            cJSON_Delete(queues);
            return 0;
        default: goto bad;
        }
    }
    if (is_status && watch > 0 && optind < argc && parse_double(argv[optind], &watch)) optind++;
    if ((verbose || watch > 0) && !is_status) goto bad;
    if (timeout > 0 && !wait) {
        cJSON_Delete(queues);
        cli_usage_error(cmd, "--timeout goes with --wait");
        return EXIT_USAGE;
    }

    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", cmd);
    int npos = argc - optind;
    char **pos = argv + optind;
    if (!strcmp(cmd, "pause") || !strcmp(cmd, "continue")) {
        cJSON *pools = cJSON_AddArrayToObject(req, "pools");
        for (int i = 0; i < npos; i++) cJSON_AddItemToArray(pools, cJSON_CreateString(pos[i]));
        cJSON_AddItemToObject(req, "queues", queues);
        queues = NULL;
    } else if (!strcmp(cmd, "scale")) {
        long n;
        if (npos != 2) {
            cJSON_Delete(req);
            cli_usage_error(cmd, "expected POOL N|auto");
            cJSON_Delete(queues);
            return EXIT_USAGE;
        }
        cJSON_AddStringToObject(req, "pool", pos[0]);
        if (!strcmp(pos[1], "auto"))
            cJSON_AddStringToObject(req, "n", "auto");
        else if (parse_long(pos[1], &n) && n >= 0)
            cJSON_AddNumberToObject(req, "n", (double)n);
        else {
            cJSON_Delete(req);
            cli_usage_error(cmd, "'%s' is not a number of workers or auto", pos[1]);
            cJSON_Delete(queues);
            return EXIT_USAGE;
        }
    } else if (!strcmp(cmd, "restart")) {
        if (npos > 1) goto bad_req;
        if (npos == 1) cJSON_AddStringToObject(req, "pool", pos[0]);
    } else {
        if (npos) goto bad_req;
        if (is_status && verbose) cJSON_AddTrueToObject(req, "verbose");
        if (is_term && wait) cJSON_AddTrueToObject(req, "wait");
    }
    cJSON_Delete(queues);
    queues = NULL;

    char *path = NULL;
    if (sock)
        path = xstrdup(sock);
    else
        path = config_control_socket(config_path(cfg));
    char *line = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);

    for (;;) {
        int fd = connect_socket(path);
        if (fd < 0) {
            /* Only "no socket" and "nobody listening" mean not running; a
             * permission problem must not look like a dead service. */
            bool down = errno == ENOENT || errno == ECONNREFUSED;
            if (json)
                printf("{\"ok\":false,\"state\":\"%s\",\"error\":\"cannot connect to %s: %s\"}\n",
                       down ? "not running" : "unknown", path, strerror(errno));
            else if (down)
                fprintf(stderr, "qpool %s: qpool is not running (cannot connect to %s: %s)\n", cmd, path,
                        strerror(errno));
            else
                fprintf(stderr, "qpool %s: cannot connect to %s: %s\n", cmd, path, strerror(errno));
            rv = down ? EXIT_NOT_RUNNING : 1;
            break;
        }
        sbuf_t out;
        sbuf_init(&out);
        sbuf_puts(&out, line);
        sbuf_putc(&out, '\n');
        (void)write_all(fd, out.data, out.len);
        sbuf_reset(&out);
        char *raw = NULL;
        cJSON *rep = read_reply(fd, &out, 30000, &raw);
        if (!rep) {
            fprintf(stderr, "qpool %s: no reply from the master\n", cmd);
            free(raw);
            sbuf_free(&out);
            close(fd);
            rv = 1;
            break;
        }
        bool ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "ok"));
        if (json)
            printf("%s\n", raw);
        else if (!ok)
            fprintf(stderr, "qpool %s: %s\n", cmd, str(rep, "error"));
        free(raw);
        if (!ok) {
            rv = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rep, "config_rejected")) ? QPOOL_EX_CONFIG : 1;
        } else if (is_status) {
            if (!json) {
                if (watch > 0) printf("\033[H\033[2J");
                print_status(rep, verbose);
            }
            rv = !strcmp(str(rep, "state"), "paused") ? 1 : 0;
        } else if (is_term && wait) {
            if (!json) print_running(rep);
            int64_t deadline = timeout > 0 ? mono_ms() + (int64_t)(timeout * 1000) : 0;
            bool done = false;
            while (!done) {
                int left = deadline ? (int)(deadline - mono_ms()) : -1;
                if (deadline && left <= 0) break;
                cJSON *ev = read_reply(fd, &out, left, &raw);
                if (!ev) {
                    /* the master closed the socket: it is gone */
                    free(raw);
                    done = !deadline || mono_ms() < deadline;
                    break;
                }
                if (json) printf("%s\n", raw);
                free(raw);
                done = !strcmp(str(ev, "event"), "done");
                if (!json && !done) print_running(ev);
                cJSON_Delete(ev);
                fflush(stdout);
            }
            if (!done) {
                fprintf(stderr, "qpool terminate: still stopping after %g s\n", timeout);
                rv = 1;
            } else if (!json)
                printf("qpool stopped\n");
        } else if (!json) {
            if (!strcmp(cmd, "reload")) printf("%s\n", str(rep, "message"));
            else if (!strcmp(cmd, "scale")) print_scaled(rep);
            else if (!strcmp(cmd, "pause") || !strcmp(cmd, "continue")) printf("%s\n", !strcmp(cmd, "pause") ? "paused" : "resumed");
            else if (!strcmp(cmd, "restart")) printf("rolling restart started\n");
            else if (is_term) printf("stopping\n");
        }
        cJSON_Delete(rep);
        sbuf_free(&out);
        close(fd);
        if (!(is_status && watch > 0)) break;
        fflush(stdout);
        usleep((useconds_t)(watch * 1e6));
    }
    free(line);
    free(path);
    return rv;
bad_req:
    cJSON_Delete(req);
    cJSON_Delete(queues);
    cli_usage_error(cmd, "unexpected argument");
    return EXIT_USAGE;
bad:
    cJSON_Delete(queues);
    cli_usage_error(cmd, "invalid option");
    return EXIT_USAGE;
}
