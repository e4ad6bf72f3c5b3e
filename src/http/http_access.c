/*
 * http_access.c - who may read what over HTTP (see http_access.h).
 */
#include "http/http_access.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int http_may_read(http_need_t need, http_read_t policy, bool token, int local, bool *full)
{
    *full = token;
    if (need == HTTP_NEED_OPEN || token) return 200;
    bool without = policy == HTTP_READ_ALL || (policy == HTTP_READ_AGGREGATES && need == HTTP_NEED_AGGREGATE);
    if (!without || local == HTTP_NOT_LOCAL) return 401;
    if (local != HTTP_LOCAL) return 403;
    *full = policy == HTTP_READ_ALL;
    return 200;
}

/* "" or ":digits" */
static bool port_ok(const char *p)
{
    if (!*p) return true;
    if (*p++ != ':' || !*p || strlen(p) > 5) return false;
    return strspn(p, "0123456789") == strlen(p);
}

bool http_local_host(const char *host)
{
    if (!host || strlen(host) >= 256) return false;
    char h[256];
    snprintf(h, sizeof h, "%s", host);
    struct in6_addr a6;
    struct in_addr a4;
    if (h[0] == '[') { /* [v6] or [v6]:port */
        char *end = strchr(h, ']');
        if (!end || !port_ok(end + 1)) return false;
        *end = '\0';
        return inet_pton(AF_INET6, h + 1, &a6) == 1;
    }
    char *colon = strchr(h, ':');
    if (colon) {
        if (!port_ok(colon)) return false;
        *colon = '\0';
    }
    return !strcmp(h, "localhost") || inet_pton(AF_INET, h, &a4) == 1;
}

bool http_peer_local(const http_conf_t *h, uid_t uid, gid_t gid, const gid_t *groups, size_t ngroups)
{
    if (uid == 0 || uid == h->owner_uid || (h->has_control_uid && uid == h->control_uid)) return true;
    if (!h->has_control_gid) return false;
    if (gid == h->control_gid) return true;
    for (size_t i = 0; i < ngroups; i++)
        if (groups[i] == h->control_gid) return true;
    return false;
}
