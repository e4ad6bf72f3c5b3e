/*
 * log.c - see log.h.
 */
#include "core/log.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct {
    char tag[64];
    int level;
    int format;
    bool journal;
} L = {"qpool", LOG_INFO, LOGFMT_TEXT, false};

static const char *names[] = {"error", "warn", "info", "debug"};
static const int syslog_prio[] = {3, 4, 6, 7};

static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    if (!js) return false;
    unsigned long dev, ino;
    if (sscanf(js, "%lu:%lu", &dev, &ino) != 2) return false;
    struct stat st;
    if (fstat(2, &st) < 0) return false;
    return st.st_dev == (dev_t)dev && st.st_ino == (ino_t)ino;
}

void log_init(const char *tag)
{
    log_set_tag(tag);
    L.journal = stderr_is_journal();
}

void log_set_tag(const char *tag)
{
    snprintf(L.tag, sizeof L.tag, "%s", tag);
}

void log_set_level(int level) { L.level = level; }
void log_set_format(int format) { L.format = format; }
bool log_enabled(int level) { return level <= L.level; }

const char *log_level_name(int level)
{
    return level >= 0 && level < (int)ARRAY_LEN(names) ? names[level] : "?";
}

static void vlog(int level, const char *fields, const char *fmt, va_list ap)
{
    if (level > L.level) return;
    char raw[4096];
    vsnprintf(raw, sizeof raw, fmt, ap);
    /* One line, and nothing a terminal acts on: a newline, ESC or any other
     * control a message quotes (a job's name, an exception, a pool named in
     * a URL) is written as \xHH (util.h, sbuf_text). */
    sbuf_t m;
    sbuf_init(&m);
    sbuf_text(&m, raw, strlen(raw), 0);
    const char *msg = m.data ? m.data : "";

    sbuf_t b;
    sbuf_init(&b);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);

    if (L.format == LOGFMT_JSON) {
        if (L.journal) sbuf_printf(&b, "<%d>", syslog_prio[level]);
        sbuf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"proc\":", when, names[level]);
        sbuf_json_str(&b, L.tag, strlen(L.tag));
        sbuf_printf(&b, ",\"pid\":%d,\"msg\":", (int)getpid());
        sbuf_json_str(&b, msg, strlen(msg));
        if (fields) sbuf_puts(&b, fields);
        sbuf_puts(&b, "}\n");
    } else if (L.journal) {
        sbuf_printf(&b, "<%d>%s[%d]: %s\n", syslog_prio[level], L.tag, (int)getpid(), msg);
    } else {
        sbuf_printf(&b, "%s %-5s %s[%d]: %s\n", when, names[level], L.tag, (int)getpid(), msg);
    }
    /* valid UTF-8 only, whatever a message quoted (a cut at the buffer's
     * end, a handler's output) */
    if (!utf8_valid(b.data, b.len)) {
        sbuf_t ok;
        sbuf_init(&ok);
        sbuf_utf8(&ok, b.data, b.len);
        sbuf_free(&b);
        b = ok;
    }
    (void)write_all(2, b.data, b.len);
    sbuf_free(&b);
    sbuf_free(&m);
}

void log_msg(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, NULL, fmt, ap);
    va_end(ap);
}

void log_fields(int level, const char *fields, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fields, fmt, ap);
    va_end(ap);
}
