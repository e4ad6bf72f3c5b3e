/*
 * pending_list.h - read what waits in a queue, ready (the list) and delayed
 * (the sorted set), a bounded page at a time: LRANGE / ZRANGE of at most
 * PENDING_LIST_CHUNK jobs per read, never the whole queue. Optional
 * filters (class, uuid, text in the payload, a tag) look at a bounded
 * number of jobs per call. Reserved (running) jobs are only counted.
 * Shared by the HTTP API. Nothing here prints or changes anything.
 *
 * The order: "oldest" is the order the jobs would run in, the ready list
 * from its head (the next to pop) then the delayed set by available_at;
 * "newest" is the reverse. A position is an index in that sequence, as of
 * the read: workers popping and apps pushing meanwhile shift it.
 */
#ifndef QPOOL_PENDING_LIST_H
#define QPOOL_PENDING_LIST_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "redis/failed_search.h"
#include "redis/rconn.h"

#define PENDING_LIST_MAX 500       /* jobs a page holds at most (limit) */
#define PENDING_LIST_SCAN 1000     /* jobs a filtered call looks at, at most */
#define PENDING_LIST_CHUNK 100     /* jobs per LRANGE / ZRANGE, at most */
#define PENDING_LIST_BYTES (8 << 20) /* payload bytes a call reads, about (then next_offset goes on) */
#define PENDING_TAGS_MAX 20        /* a payload's tags shown, at most */
#define PENDING_TAG_BYTES 120      /* bytes of a tag shown, at most */

typedef enum { PSTATE_ALL, PSTATE_READY, PSTATE_DELAYED } pstate_t;

typedef struct {
    const char *queue;             /* in */
    ffilter_t f;                   /* in: name, uuid, q, since, until on pushed_at (the rest is ignored) */
    const char *tag;               /* in: one of the payload's own tags, exactly (NULL: any) */
    pstate_t state;                /* in: both, or only ready or delayed */
    bool newest;                   /* in: newest first (else oldest: run order) */
    long long offset;              /* in: the position to start at */
    long limit;                    /* in: 1..PENDING_LIST_MAX */
    long long ready, delayed, reserved; /* out: the queue's counts */
    long scanned;                  /* out: jobs looked at */
    long long next;                /* out: the offset to go on from; -1: the end was reached */
    bool truncated;                /* out: a filter's scan budget ran out before limit matches */
    cJSON *jobs;                   /* out (caller frees, or pending_list_free) */
} plist_t;

/* One page. 0, or -1 (err) when Redis failed. */
int pending_list(rconn_t *c, plist_t *p, char *err, size_t errn);
void pending_list_free(plist_t *p);
/* One job's entry (pure): uuid, id, class, attempts, pushed_at, size,
 * tags, state, available_at (delayed: its score) and position. */
cJSON *pending_entry(const char *raw, size_t len, bool delayed, double score, long long position);
/* Does a pending job pass the filter (class, uuid, text, tag, since and
 * until)? (pure) */
bool pending_list_match(const ffilter_t *f, const char *tag, const char *raw, size_t len);
/* When a job was pushed: Horizon's pushedAt, else Laravel's createdAt
 * (12.11+), UNIX seconds; -1 when the payload says neither. (pure) */
double pending_pushed_at(const char *raw, size_t len);
/* Is that time in f's [since, until] (whole seconds, until inclusive)? No
 * since nor until: true; a payload that does not say: false. (pure) */
bool pending_in_range(const ffilter_t *f, const char *raw, size_t len);

#endif
