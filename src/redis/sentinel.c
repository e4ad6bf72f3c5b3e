/*
 * sentinel.c - see sentinel.h.
 */
#include "redis/sentinel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *p, int *port)
{
    if (!*p) return -1;
    char *end;
    long v = strtol(p, &end, 10);
    if (*end || v < 1 || v > 65535) return -1;
    *port = (int)v;
    return 0;
}

/* Split s into its host part [h, h+hl) and the text after it (rest). */
static int split_host(const char *s, const char **h, size_t *hl, const char **rest)
{
    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (!close) return -1;
        *h = s + 1;
        *hl = (size_t)(close - s - 1);
        *rest = close + 1;
        return 0;
    }
    const char *colon = strrchr(s, ':');
    if (colon && strchr(s, ':') != colon) colon = NULL; /* a bare IPv6 address: no port */
    *h = s;
    *hl = colon ? (size_t)(colon - s) : strlen(s);
    *rest = colon ? colon : s + strlen(s);
    return 0;
}

int sentinel_parse_addr(const char *s, int def_port, char *host, size_t hn, int *port, char *err,
                        size_t errn)
{
    const char *h, *rest;
    size_t hl;
    if (split_host(s, &h, &hl, &rest) < 0) {
        snprintf(err, errn, "\"%s\": unclosed [ in the address", s);
        return -1;
    }
    if (hl == 0 || hl >= hn) {
        snprintf(err, errn, "\"%s\": %s", s, hl ? "host name too long" : "no host");
        return -1;
    }
    if (*rest && (*rest != ':' || parse_port(rest + 1, port) < 0)) {
        snprintf(err, errn, "\"%s\": expected host:port with a port 1..65535", s);
        return -1;
    }
    if (!*rest) *port = def_port;
    memcpy(host, h, hl);
    host[hl] = '\0';
    return 0;
}

int sentinel_master_reply(const redisReply *r, char *host, size_t hn, int *port, char *err,
                          size_t errn)
{
    if (r->type == REDIS_REPLY_NIL) return 0;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errn, "%s", r->str);
        return -1;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(err, errn, "unexpected reply to SENTINEL get-master-addr-by-name");
        return -1;
    }
    if (!r->element[0]->len || r->element[0]->len >= hn || parse_port(r->element[1]->str, port) < 0) {
        snprintf(err, errn, "bad address in the reply to SENTINEL get-master-addr-by-name");
        return -1;
    }
    memcpy(host, r->element[0]->str, r->element[0]->len + 1);
    return 1;
}

int sentinel_role_reply(const redisReply *r, char *role, size_t rn)
{
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(role, rn, "%s", r->str);
        return -1;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        (r->element[0]->type != REDIS_REPLY_STRING && r->element[0]->type != REDIS_REPLY_STATUS)) {
        snprintf(role, rn, "unexpected reply to ROLE");
        return -1;
    }
    snprintf(role, rn, "%s", r->element[0]->str);
    return strcmp(r->element[0]->str, "master") == 0 ? 1 : 0;
}
