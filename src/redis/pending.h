/*
 * pending.h - delete (or count) the pending jobs of a queue that match a
 * filter (class, uuid, text in the payload: ffilter_t), ready and delayed,
 * a bounded step at a time. Reserved jobs (running) are never touched.
 * Shared by `qpool pending delete` and the HTTP API. Nothing here prints.
 */
#ifndef QPOOL_PENDING_H
#define QPOOL_PENDING_H

#include <stdbool.h>
#include <stddef.h>

#include "redis/failed_search.h"
#include "redis/rconn.h"

#define PENDING_PAGE 500           /* jobs looked at per step */

/* Where a step goes on: the ready list from its tail (kept: how many jobs
 * there were passed over, counted from the tail, so that jobs pushed
 * meanwhile are looked at, never jumped), then the delayed set (a ZSCAN
 * cursor). As text: "ready:<kept>" or "delayed:<cursor>". */
typedef struct {
    bool delayed;
    unsigned long long at;         /* ready: jobs kept from the tail; delayed: the ZSCAN cursor */
    bool done;                     /* out: nothing left */
} pcursor_t;
/* 0, or -1 when malformed. NULL or "": from the start. (pure) */
int pcursor_parse(const char *s, pcursor_t *c);
/* Caller frees; NULL when done. (pure) */
char *pcursor_text(const pcursor_t *c);

typedef struct {
    const char *queue;             /* in */
    ffilter_t f;                   /* in: name, uuid, q, tag, since, until on pushed_at (pending_in_range) */
    bool dry_run;                  /* in: count only */
    pcursor_t cur;                 /* in/out */
    long scanned, matched, deleted; /* out */
} pending_del_t;

/* One bounded step. 0, or -1 (err) when Redis failed: what was deleted
 * before stays deleted. */
int pending_delete_step(rconn_t *c, pending_del_t *d, char *err, size_t errn);

#endif
