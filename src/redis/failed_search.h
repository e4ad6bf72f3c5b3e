/*
 * failed_search.h - search the failed store by filter (class, queue, time
 * range on failed_at, uuid, text), and count, retry or forget what matches:
 * a bounded number of records looked at per call, newest first, queue by
 * queue in name order, with a cursor to go on from. A Lua script looks at
 * each record's bytes in Redis first, so only likely matches come back to
 * be parsed. Shared by `qpool failed` and the HTTP API. Nothing here prints.
 */
#ifndef QPOOL_FAILED_SEARCH_H
#define QPOOL_FAILED_SEARCH_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "redis/failed.h"
#include "redis/rconn.h"

/* A filter; NULL or 0: any. */
typedef struct {
    const char *queue, *name, *uuid;
    const char *q;                 /* text in the payload or the exception (ASCII case ignored) */
    const char *tag;               /* one of the payload's own "tags", exact */
    const char *pool, *host;       /* where it failed, exact (a record that does not say matches neither) */
    long long since, until;        /* failed_at in [since, until], unix seconds */
} ffilter_t;

/* Does f pass flt? (pure) */
bool ffilter_match(const ffilter_t *flt, const frec_t *f);
/* A time as a filter takes it: unix seconds, "YYYY-MM-DD[ HH:MM[:SS]]" (UTC)
 * or an age ("90s", "30m", "1h", "2d", "1w": that long before now). 0 and
 * *out, or -1 when malformed. (pure) */
int ffilter_time(const char *s, long long now, long long *out);

/* Where a walk goes on: the queue, and in it the records at failed_at <=
 * max (Redis's score text; "+inf": the queue's newest) not passed over yet
 * (skip of those at max were). As text (opaque to callers):
 * "max:skip:queue". */
typedef struct {
    char *queue;                   /* NULL: from the start */
    char max[40];
    long skip;
} fcursor_t;
/* 0, or -1 when malformed (c untouched). NULL or "": from the start. */
int fcursor_parse(const char *s, fcursor_t *c);
/* The cursor as text (caller frees); NULL when the walk is done. */
char *fcursor_text(const fcursor_t *c);

typedef enum { FWALK_LIST, FWALK_COUNT, FWALK_RETRY, FWALK_FORGET } fwalk_act_t;

#define FAILED_SEARCH_PAGE 2000    /* records looked at per call */
#define FAILED_ACTION_PAGE 500     /* matches a retry or forget acts on per call, at most */

typedef struct {
    ffilter_t f;                   /* in */
    fwalk_act_t act;               /* in */
    long limit;                    /* in, list: at most this many records (then the cursor stops there) */
    fcursor_t cur;                 /* in/out: queue NULL after the call: done */
    long scanned, matched, acted;  /* out */
    int kept;                      /* out, retry: of them, retryUntil left as it was */
    cJSON *list;                   /* out, list: the records matched, without payloads (caller frees) */
} fwalk_t;

/* One bounded step. 0, or -1 (err) when Redis failed: what was acted on
 * before stays done. */
int failed_walk(rconn_t *c, fwalk_t *w, char *err, size_t errn);
void fwalk_free(fwalk_t *w);

#endif
