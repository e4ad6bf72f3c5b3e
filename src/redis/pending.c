/*
 * pending.c - deleting a queue's pending jobs by filter, a bounded step at
 * a time (see pending.h).
 */
#include "redis/pending.h"
#include "redis/pending_list.h"
#include "redis/queue.h"
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pcursor_parse(const char *s, pcursor_t *c)
{
    *c = (pcursor_t){0};
    if (!s || !*s) return 0;
    bool delayed = !strncmp(s, "delayed:", 8);
    if (!delayed && strncmp(s, "ready:", 6)) return -1;
    const char *n = s + (delayed ? 8 : 6);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(n, &end, 10);
    if (!*n || *end || errno || *n == '-') return -1;
    c->delayed = delayed;
    c->at = v;
    return 0;
}

char *pcursor_text(const pcursor_t *c)
{
    return c->done ? NULL : xasprintf("%s:%llu", c->delayed ? "delayed" : "ready", c->at);
}

/* Does a pending job's payload pass the filter? */
static bool pending_match(const pending_del_t *d, const char *payload, size_t len)
{
    frec_t f = {.uuid = NULL, .queue = (char *)d->queue, .payload = (char *)payload, .payload_len = len};
    ffilter_t flt = {.name = d->f.name, .q = d->f.q, .tag = d->f.tag};
    if (!ffilter_match(&flt, &f)) return false;
    if (!pending_in_range(&d->f, payload, len)) return false;
    if (!d->f.uuid) return true;
    /* the uuid: as the payload says it ("uuid":"..."), after the class and text */
    char *needle = xasprintf("\"uuid\":\"%s\"", d->f.uuid);
    bool has = memmem(payload, len, needle, strlen(needle)) != NULL;
    free(needle);
    return has;
}

/* Remove the matches (hit) of elems (a stride apart): LREM from the tail
 * (ready) or ZREM (delayed), pipelined; a job a worker took meanwhile is not
 * counted. -1 when Redis failed. */
static int remove_matches(rconn_t *c, pending_del_t *d, const char *key, redisReply **elems, size_t n,
                          size_t stride, const bool *hit)
{
    int sent = 0;
    for (size_t i = 0; i < n; i++) {
        if (!hit[i]) continue;
        const redisReply *e = elems[i * stride];
        if (d->cur.delayed) {
            const char *av[] = {"ZREM", key, e->str};
            size_t lens[] = {4, strlen(key), e->len};
            rconn_append(c, 3, av, lens);
        } else {
            const char *av[] = {"LREM", key, "-1", e->str};
            size_t lens[] = {4, strlen(key), 2, e->len};
            rconn_append(c, 4, av, lens);
        }
        sent++;
    }
    for (int i = 0; i < sent; i++) {
        redisReply *x;
        if (rconn_read(c, -1, -1, &x) != RC_OK) return -1;
        if (x->type == REDIS_REPLY_INTEGER) d->deleted += x->integer;
        freeReplyObject(x);
    }
    return 0;
}

/* Look at n elements (a stride apart), mark and count the matches, and
 * remove them unless a dry run. The count kept, or -1. */
static long judge(rconn_t *c, pending_del_t *d, const char *key, redisReply **elems, size_t n, size_t stride)
{
    bool *hit = xcalloc(n + 1, sizeof *hit);
    long kept = 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = elems[i * stride];
        hit[i] = e->type == REDIS_REPLY_STRING && pending_match(d, e->str, e->len);
        d->matched += hit[i];
        kept += !hit[i] || d->dry_run;
    }
    d->scanned += (long)n;
    int rv = d->dry_run ? 0 : remove_matches(c, d, key, elems, n, stride, hit);
    free(hit);
    return rv < 0 ? -1 : kept;
}

/* A step in the ready list: the window before the jobs kept, from the tail. */
static int ready_step(rconn_t *c, pending_del_t *d, const qkeys_t *k)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "-%llu", d->cur.at + PENDING_PAGE);
    snprintf(b, sizeof b, "-%llu", d->cur.at + 1);
    const char *av[] = {"LRANGE", k->ready, a, b};
    redisReply *r = rconn_call(c, 4, av, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r) freeReplyObject(r);
        return -1;
    }
    long kept = judge(c, d, k->ready, r->element, r->elements, 1);
    bool end = r->elements < PENDING_PAGE; /* the window reached the head */
    freeReplyObject(r);
    if (kept < 0) return -1;
    d->cur.at += (unsigned long long)kept;
    if (end) d->cur = (pcursor_t){.delayed = true};
    return 0;
}

/* A step in the delayed set: one ZSCAN. */
static int delayed_step(rconn_t *c, pending_del_t *d, const qkeys_t *k)
{
    char cur[32];
    snprintf(cur, sizeof cur, "%llu", d->cur.at);
    const char *av[] = {"ZSCAN", k->delayed, cur, "COUNT", "500"};
    redisReply *r = rconn_call(c, 5, av, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
        if (r) freeReplyObject(r);
        return -1;
    }
    const redisReply *items = r->element[1];
    long kept = judge(c, d, k->delayed, items->element, items->elements / 2, 2);
    d->cur.at = strtoull(r->element[0]->str, NULL, 10);
    d->cur.done = d->cur.at == 0;
    freeReplyObject(r);
    return kept < 0 ? -1 : 0;
}

int pending_delete_step(rconn_t *c, pending_del_t *d, char *err, size_t errn)
{
    d->scanned = d->matched = d->deleted = 0;
    qkeys_t k;
    qkeys_init(&k, c->conf.prefix, d->queue);
    int rv = d->cur.delayed ? delayed_step(c, d, &k) : ready_step(c, d, &k);
    qkeys_free(&k);
    if (rv < 0) snprintf(err, errn, "%s", c->last_error[0] ? c->last_error : "unexpected reply");
    return rv;
}
