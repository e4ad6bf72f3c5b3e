/*
 * cli_audit.c - see cli_audit.h. syslog(3) is not used: its socket path is
 * fixed, and its LOG_* names clash with core/log.h; the datagram is the
 * same RFC 3164 line it sends.
 */
#include "cli/cli_audit.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FACILITY_USER_NOTICE ((1 << 3) | 5) /* LOG_USER | LOG_NOTICE */

void cli_audit_arg(sbuf_t *b, const char *name, const char *value)
{
    if (!value) return;
    size_t n = strlen(value), cut = utf8_valid(value, n) ? utf8_cut(value, n, CLI_AUDIT_VALUE_MAX) : 0;
    if (cut == 0 && n) cut = n < CLI_AUDIT_VALUE_MAX ? n : CLI_AUDIT_VALUE_MAX; /* invalid: bytes, escaped */
    sbuf_printf(b, " %s \"", name);
    for (size_t at = 0; at < cut;) { /* '"' and '\\' escaped too: user text cannot forge the line's fields */
        size_t run = strcspn(value + at, "\"\\");
        if (run > cut - at) run = cut - at;
        sbuf_text(b, value + at, run, 0);
        at += run;
        if (at < cut) sbuf_printf(b, "\\%c", value[at++]); /* \" and \\, as in C */
    }
    sbuf_puts(b, cut < n ? "...\"" : "\"");
}

void cli_audit_filter(sbuf_t *b, const char *cls, const char *uuid, const char *text, const char *tag,
                      const char *since, const char *until)
{
    cli_audit_arg(b, "--class", cls);
    cli_audit_arg(b, "--uuid", uuid);
    cli_audit_arg(b, "--text", text);
    cli_audit_arg(b, "--tag", tag);
    cli_audit_arg(b, "--since", since);
    cli_audit_arg(b, "--until", until);
}

/* The source: "cli uid N (name)". */
static void source_of(char *buf, size_t n)
{
    uid_t uid = getuid();
    struct passwd *pw = getpwuid(uid);
    snprintf(buf, n, "cli uid %u (%s)", (unsigned)uid, pw && pw->pw_name ? pw->pw_name : "?");
}

/* One datagram to the syslog socket; nothing when none listens there. */
static void to_syslog(const char *msg)
{
    const char *path = getenv("QPOOL_SYSLOG_SOCKET");
    if (!path || !*path) path = "/dev/log";
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) return;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    char when[32], line[2048];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%b %e %H:%M:%S", &tm);
    int len = snprintf(line, sizeof line, "<%d>%s qpool[%d]: %s", FACILITY_USER_NOTICE, when, (int)getpid(), msg);
    if (len > 0) (void)sendto(fd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1, MSG_NOSIGNAL | MSG_DONTWAIT,
                              (struct sockaddr *)&sa, sizeof sa);
    close(fd);
}

void cli_audit(const char *cmd, const char *what, const char *filter)
{
    char src[160];
    source_of(src, sizeof src);
    sbuf_t b;
    sbuf_init(&b);
    sbuf_printf(&b, "qpool %s: %s (filter:%s) by %s", cmd, what, filter && *filter ? filter : " none", src);
    fprintf(stderr, "%s\n", b.data);
    to_syslog(b.data);
    sbuf_free(&b);
}
