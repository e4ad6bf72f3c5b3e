/*
 * cli_audit.h - the record of a bulk action run from the command line
 * (`qpool failed retry|forget` by filter or --all, `qpool pending delete`):
 * the CLI talks to Redis itself, so the master never sees these; each is
 * told on stderr and to the local syslog/journal (LOG_NOTICE, ident qpool)
 * with its source (the CLI, the user's uid and name), the filter and the
 * count. A filter's text is user input: each value is cut and escaped.
 */
#ifndef QPOOL_CLI_AUDIT_H
#define QPOOL_CLI_AUDIT_H

#include "core/util.h"

/* The longest a filter value gets in the record (bytes, before escaping). */
#define CLI_AUDIT_VALUE_MAX 80

/* Append " name value" to b when value is set: value cut to
 * CLI_AUDIT_VALUE_MAX bytes (a whole character), controls escaped,
 * quoted. */
void cli_audit_arg(sbuf_t *b, const char *name, const char *value);
/* The filter options `qpool failed` and `qpool pending` share, as typed:
 * --class --uuid --text --tag --since --until (each when set). */
void cli_audit_filter(sbuf_t *b, const char *cls, const char *uuid, const char *text, const char *tag,
                      const char *since, const char *until);

/* "qpool CMD: <what> (filter:<filter>) by cli uid N (user)": one line on
 * stderr and one datagram to the syslog socket (/dev/log, or
 * $QPOOL_SYSLOG_SOCKET; none there: stderr only). */
void cli_audit(const char *cmd, const char *what, const char *filter);

#endif
