/*
 * limits.c - see limits.h. Pure: no I/O, no libconfig.
 */
#include "config/limits.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int limit_parse_rate(const char *s, double *per_s, char *err, size_t errn)
{
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || slash == s) {
        snprintf(err, errn, "rate: \"%s\" is not \"R/s\" or \"R/m\" (e.g. \"50/s\", \"600/m\")", s ? s : "");
        return -1;
    }
    for (const char *p = s; p < slash; p++)
        if (!strchr("0123456789.", *p)) {
            snprintf(err, errn, "rate: \"%s\": the count must be a plain positive number", s);
            return -1;
        }
    char *end = NULL;
    double r = strtod(s, &end);
    if (end != slash || !isfinite(r) || r <= 0) {
        snprintf(err, errn, "rate: \"%s\": the count must be a positive number", s);
        return -1;
    }
    double div = !strcmp(slash + 1, "s") ? 1 : !strcmp(slash + 1, "m") ? 60 : 0;
    if (div == 0) {
        snprintf(err, errn, "rate: \"%s\": the unit must be s (per second) or m (per minute)", s);
        return -1;
    }
    if (r / div > LIMIT_RATE_MAX || r / div < 1.0 / 3600) {
        snprintf(err, errn, "rate: \"%s\" is out of range (1/h .. %.0f/s)", s, LIMIT_RATE_MAX);
        return -1;
    }
    *per_s = r / div;
    return 0;
}

/* A name: 1..LIMIT_NAME_MAX bytes, no control characters. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > LIMIT_NAME_MAX) return false;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return false;
    return true;
}

static int check_names(const limit_conf_t *l, char *err, size_t errn)
{
    static const char *const what[] = {"class", "queue", "tag_prefix"};
    const char *v[] = {l->class_name, l->queue, l->tag_prefix};
    for (int i = 0; i < 3; i++)
        if (v[i] && !name_ok(v[i])) {
            snprintf(err, errn, "%s: must be 1-%d characters without control characters", what[i],
                     LIMIT_NAME_MAX);
            return -1;
        }
    if (!l->class_name && !l->queue) {
        snprintf(err, errn, "a limit needs class = \"...\" or queue = \"...\" (or both): what it applies to");
        return -1;
    }
    return 0;
}

int limit_check(limit_conf_t *l, char *err, size_t errn)
{
    if (check_names(l, err, errn) < 0) return -1;
    if (l->concurrency == 0 && !l->rate) {
        snprintf(err, errn, "a limit needs concurrency = N or rate = \"R/s\" (or both): what it limits");
        return -1;
    }
    if (l->concurrency < 0 || l->concurrency > LIMIT_CONCURRENCY_MAX) {
        snprintf(err, errn, "concurrency: %d is out of range (1..%d)", l->concurrency, LIMIT_CONCURRENCY_MAX);
        return -1;
    }
    if (l->rate && limit_parse_rate(l->rate, &l->rate_per_s, err, errn) < 0) return -1;
    if (l->burst && !l->rate) {
        snprintf(err, errn, "burst: applies to a rate (add rate = \"R/s\", or drop burst)");
        return -1;
    }
    if (l->burst < 0 || l->burst > LIMIT_BURST_MAX) {
        snprintf(err, errn, "burst: %d is out of range (1..%d)", l->burst, LIMIT_BURST_MAX);
        return -1;
    }
    if (l->rate && !l->burst) l->burst = 1;
    return 0;
}

static bool same_opt(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

bool limit_same_target(const limit_conf_t *a, const limit_conf_t *b)
{
    return same_opt(a->class_name, b->class_name) && same_opt(a->queue, b->queue) &&
           same_opt(a->tag_prefix, b->tag_prefix);
}

void limit_describe(const limit_conf_t *l, char *buf, size_t n)
{
    if (l->tag_prefix) {
        limit_conf_t plain = *l;
        plain.tag_prefix = NULL;
        char d[2 * LIMIT_NAME_MAX + 40];
        limit_describe(&plain, d, sizeof d);
        snprintf(buf, n, "%s per tag \"%s...\"", d, l->tag_prefix);
        return;
    }
    if (l->class_name && l->queue)
        snprintf(buf, n, "class \"%s\" on queue \"%s\"", l->class_name, l->queue);
    else if (l->class_name)
        snprintf(buf, n, "class \"%s\"", l->class_name);
    else
        snprintf(buf, n, "queue \"%s\"", l->queue ? l->queue : "");
}

/* s with '%' and '|' escaped (%25, %7C) appended at out; returns the end. */
static char *put_escaped(char *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '%' || *s == '|') out += sprintf(out, "%%%02X", (unsigned char)*s);
        else *out++ = *s;
    }
    *out = 0;
    return out;
}

char *limit_key_id(const limit_conf_t *l)
{
    const char *q = l->queue ? l->queue : "", *c = l->class_name ? l->class_name : "";
    const char *t = l->tag_prefix;
    /* names without '|' and no tag prefix: "<queue>|<class>" as in 1.x (one
     * '|'); any other: each name escaped, "|<queue>|<class>" (two '|') or
     * "|<queue>|<class>|<tag prefix>" (three): no two limits share an id */
    if (!t && !strchr(q, '|') && !strchr(c, '|')) return xasprintf("%s|%s", q, c);
    char *id = xmalloc(3 * (strlen(q) + strlen(c) + (t ? strlen(t) : 0)) + 4), *o = id;
    *o++ = '|';
    o = put_escaped(o, q);
    *o++ = '|';
    o = put_escaped(o, c);
    if (t) {
        *o++ = '|';
        put_escaped(o, t);
    }
    return id;
}

bool limit_applies_to(const limit_conf_t *l, char *const *queues, int nqueues)
{
    if (!l->queue) return true;
    for (int i = 0; i < nqueues; i++)
        if (!strcmp(queues[i], l->queue)) return true;
    return false;
}

int limit_alert_step(bool open, bool known, double waited_s, double alert_after)
{
    if (open && alert_after <= 0) return -1;
    if (!known || alert_after <= 0) return 0;
    if (!open && waited_s >= alert_after) return 1;
    if (open && waited_s <= 0) return -1;
    return 0;
}

void limit_free(limit_conf_t *l)
{
    free(l->class_name);
    free(l->queue);
    free(l->tag_prefix);
    free(l->rate);
    memset(l, 0, sizeof *l);
}

void limits_free(limit_conf_t *v, int n)
{
    for (int i = 0; i < n; i++) limit_free(&v[i]);
    free(v);
}
