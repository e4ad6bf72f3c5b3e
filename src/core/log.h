/*
 * log.h - one line per event on stderr.
 *
 * Text lines carry a timestamp, level and the process tag ("master",
 * "emails#3"); under systemd (JOURNAL_STREAM names our stderr) the timestamp
 * is dropped and a syslog priority prefix such as "<6>" is added so the
 * journal files the line at the right level. log_format = "json" gives one
 * JSON object per line instead. Every line goes out in a single write(2),
 * so lines from the master and its children never interleave. A message's
 * newlines, ESC and other control bytes (and bytes of invalid UTF-8) are
 * written as \xHH: no forged line, nothing a terminal acts on.
 */
#ifndef QPOOL_LOG_H
#define QPOOL_LOG_H

#include <stdbool.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };
enum log_format { LOGFMT_TEXT = 0, LOGFMT_JSON = 1 };

void log_init(const char *tag);
void log_set_tag(const char *tag);
void log_set_level(int level);
void log_set_format(int format);
bool log_enabled(int level);
const char *log_level_name(int level);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like log_msg, with extra JSON fields (a pre-rendered ',"k":v...' fragment, or NULL). */
void log_fields(int level, const char *json_fields, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
