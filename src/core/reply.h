/*
 * reply.h - the replies of the control protocol (reply.c): the one-line JSON
 * objects {"ok":true,...} and {"ok":false,"error":"..."} that the master's
 * control socket sends and the HTTP API passes on. Below both: it knows
 * nothing of the master or of HTTP.
 */
#ifndef QPOOL_REPLY_H
#define QPOOL_REPLY_H

#include <cjson/cJSON.h>
#include <stdarg.h>

/* {"ok":true}: a new object the caller owns (and adds to). */
cJSON *reply_ok(void);
/* {"ok":false,"error":"<formatted>"}: how the control socket and the HTTP
 * API both say no. A new object the caller owns. */
cJSON *reply_errorv(const char *fmt, va_list ap);

#endif
