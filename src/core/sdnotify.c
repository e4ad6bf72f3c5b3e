/*
 * sdnotify.c - see sdnotify.h.
 */
#include "core/sdnotify.h"
#include "core/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct {
    struct sockaddr_un addr;
    socklen_t len;
    int fd;
    int64_t wd_ms;
} N = {.fd = -1};

void sdn_init(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path && (path[0] == '/' || path[0] == '@') && strlen(path) < sizeof N.addr.sun_path) {
        memset(&N.addr, 0, sizeof N.addr);
        N.addr.sun_family = AF_UNIX;
        size_t l = strlen(path);
        memcpy(N.addr.sun_path, path, l);
        if (path[0] == '@') N.addr.sun_path[0] = '\0'; /* abstract namespace */
        N.len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + l);
        N.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    }
    const char *wd = getenv("WATCHDOG_USEC");
    const char *wpid = getenv("WATCHDOG_PID");
    long usec;
    if (wd && parse_long(wd, &usec) && usec > 0) {
        long pid;
        if (!wpid || (parse_long(wpid, &pid) && pid == getpid())) N.wd_ms = usec / 2000;
    }
    /* Children must not talk to systemd in our name. */
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

int64_t sdn_watchdog_interval_ms(void)
{
    return N.fd >= 0 ? N.wd_ms : 0;
}

void sdn_send(const char *fmt, ...)
{
    if (N.fd < 0) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
    (void)sendto(N.fd, buf, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&N.addr, N.len);
}

void sdn_feed_watchdog(int64_t *last_ms, int64_t now_ms)
{
    int64_t wd = sdn_watchdog_interval_ms();
    if (!wd || now_ms - *last_ms < wd) return;
    sdn_send("WATCHDOG=1");
    *last_ms = now_ms;
}
