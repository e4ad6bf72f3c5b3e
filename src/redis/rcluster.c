/*
 * rcluster.c - see rcluster.h (pure).
 */
#include "redis/rcluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

uint16_t rcluster_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (uint16_t)(crc << 1 ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

/* The hash tag's span: 1 with its offset and length set, 0 for none. */
static int tag_span(const char *key, size_t len, size_t *off, size_t *n)
{
    const char *open = memchr(key, '{', len);
    if (!open) return 0;
    size_t s = (size_t)(open - key) + 1;
    const char *close = memchr(key + s, '}', len - s);
    if (!close || close == key + s) return 0;
    *off = s;
    *n = (size_t)(close - (key + s));
    return 1;
}

int rcluster_has_tag(const char *key, size_t len)
{
    size_t off, n;
    return tag_span(key, len, &off, &n);
}

int rcluster_key_slot(const char *key, size_t len)
{
    size_t off, n;
    if (tag_span(key, len, &off, &n)) return rcluster_crc16(key + off, n) & (RCLUSTER_SLOTS - 1);
    return rcluster_crc16(key, len) & (RCLUSTER_SLOTS - 1);
}

static int is_cmd(const char *a, size_t l, const char *name)
{
    return l == strlen(name) && !strncasecmp(a, name, l);
}

int rcluster_command_key(int argc, const char **argv, const size_t *lens)
{
    if (argc < 1) return -1;
    size_t l0 = lens ? lens[0] : strlen(argv[0]);
    static const char *const keyless[] = {"PING", "SCRIPT", "INFO", "TIME", "ROLE", "CLUSTER", "SELECT",
                                          "AUTH", "ECHO", "DBSIZE", "ASKING", "HELLO", "COMMAND", NULL};
    for (int i = 0; keyless[i]; i++)
        if (is_cmd(argv[0], l0, keyless[i])) return -1;
    if (is_cmd(argv[0], l0, "EVAL") || is_cmd(argv[0], l0, "EVALSHA")) {
        if (argc < 4) return -1;
        return atoi(argv[2]) > 0 ? 3 : -1;
    }
    return argc >= 2 ? 1 : -1;
}

static int parse_range(const redisReply *e, rcluster_range_t *o)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) return -1;
    const redisReply *a = e->element[0], *b = e->element[1], *m = e->element[2];
    if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER) return -1;
    if (a->integer < 0 || b->integer >= RCLUSTER_SLOTS || a->integer > b->integer) return -1;
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 2) return -1;
    if (m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER) return -1;
    if (m->element[0]->len == 0 || m->element[0]->len >= sizeof o->host) return -1;
    if (m->element[1]->integer < 1 || m->element[1]->integer > 65535) return -1;
    o->start = (int)a->integer;
    o->end = (int)b->integer;
    memcpy(o->host, m->element[0]->str, m->element[0]->len);
    o->host[m->element[0]->len] = '\0';
    o->port = (int)m->element[1]->integer;
    return 0;
}

int rcluster_parse_slots(const redisReply *r, rcluster_range_t **out, int *n, char *err, size_t errn)
{
    *out = NULL;
    *n = 0;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errn, "CLUSTER SLOTS: %s", r->str);
        return -1;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        snprintf(err, errn, "CLUSTER SLOTS: %s", r->type == REDIS_REPLY_ARRAY ? "no slots assigned" : "unexpected reply");
        return -1;
    }
    rcluster_range_t *v = calloc(r->elements, sizeof *v);
    if (!v) abort();
    for (size_t i = 0; i < r->elements; i++)
        if (parse_range(r->element[i], &v[i]) < 0) {
            snprintf(err, errn, "CLUSTER SLOTS: entry %zu is malformed", i);
            free(v);
            return -1;
        }
    *out = v;
    *n = (int)r->elements;
    return 0;
}

enum rcluster_redirect rcluster_parse_redirect(const char *err, int *slot, char *host, size_t hn, int *port)
{
    enum rcluster_redirect kind;
    if (!strncmp(err, "MOVED ", 6)) kind = RCLUSTER_MOVED;
    else if (!strncmp(err, "ASK ", 4)) kind = RCLUSTER_ASK;
    else return RCLUSTER_NOREDIR;
    const char *p = strchr(err, ' ') + 1;
    char *end;
    long s = strtol(p, &end, 10);
    if (end == p || *end != ' ' || s < 0 || s >= RCLUSTER_SLOTS) return RCLUSTER_NOREDIR;
    const char *addr = end + 1, *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= hn) return RCLUSTER_NOREDIR;
    long pt = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || pt < 1 || pt > 65535) return RCLUSTER_NOREDIR;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    *slot = (int)s;
    *port = (int)pt;
    return kind;
}

int rcluster_group_runs(const int *slots, int n, int *group)
{
    int g = -1;
    for (int i = 0; i < n; i++) {
        if (i == 0 || slots[i] != slots[i - 1]) g++;
        group[i] = g;
    }
    return g + 1;
}
