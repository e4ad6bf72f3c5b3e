/*
 * reply.c - the control protocol's replies (see reply.h).
 */
#include "core/reply.h"

#include <stdio.h>

cJSON *reply_ok(void)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddTrueToObject(o, "ok");
    return o;
}

cJSON *reply_errorv(const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "ok");
    cJSON_AddStringToObject(o, "error", msg);
    return o;
}
