/*
 * batchjobs.h - the jobs of a Laravel batch (Bus::batch) as qpool's job
 * history saw them (issue 31). Laravel's batch repository keeps only the
 * failed job ids; the PHP adapter reports each job's batch id (a response's
 * "batch", docs/handler-protocol.md), the worker puts it in the job's
 * history record ("batch", jobhist.h), and the master, when it writes the
 * recent-jobs list (history.h), also pushes a short copy of each settled
 * record with a batch onto that batch's list, on the history's connection
 * and in its cluster hash tag:
 *
 *   <prefix>qpool:{qpool-jobs}:batch:<id>   records {"uuid","id","name",
 *                                           "queue","pool","host","attempt",
 *                                           "outcome","runtime_ms",
 *                                           "started_at","finished_at"},
 *                                           newest first, trimmed to
 *                                           BATCHJOBS_KEEP, expiring
 *                                           metrics_retention after its
 *                                           last write
 *   <prefix>qpool:{qpool-jobs}:batches     the batches' index: a sorted set
 *                                           of ids by their last write
 *                                           (ms), the newest
 *                                           batch_jobs_keep; the lists of
 *                                           those that fall out are
 *                                           deleted
 *
 * Released attempts are left out (the job runs again). The records are
 * those the history took: with job_history_sample below 1, some done jobs
 * are not among them (failures always are).
 */
#ifndef QPOOL_BATCHJOBS_H
#define QPOOL_BATCHJOBS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "redis/rconn.h"

#define BATCHJOBS_KEEP 1000   /* records kept per batch, the newest */
#define BATCHJOBS_ERRN 128    /* bytes of a write's cause, with its NUL (batchjobs_fail_t) */
#define BATCHJOBS_EVICT 200   /* batches a write drops from the index, past those it adds */

/* The master's log limit on writes that lost entries: the last cause
 * logged (cut as batchjobs_add cuts it) and when (monotonic ms, 0 never). */
typedef struct {
    int64_t logged_ms;
    char err[BATCHJOBS_ERRN];
} batchjobs_note_t;

/* Whether a write that lost entries for cause err is logged at now: the
 * first time, on a new cause, and once every `every` ms while the same
 * one lasts; when it is, n keeps err (cut to BATCHJOBS_ERRN - 1 bytes,
 * and compared so cut) and now. Pure. */
bool batchjobs_note_due(batchjobs_note_t *n, const char *err, int64_t now, int64_t every);

/* The short copy a batch's list keeps of a record (the recent list's
 * JSON), and its batch id; false when it has none or was released (the
 * bytes say so before any parsing). Pure; the caller frees both. */
bool batchjobs_entry(const char *rec, char **batch, char **entry);
/* What a write of the batches' lists could not do (batchjobs_add). */
typedef struct {
    char err[BATCHJOBS_ERRN];  /* why entries were lost ("" none) */
    int unindexed;             /* entries written whose batch the index did not take */
    char ierr[BATCHJOBS_ERRN]; /* why the index failed ("" it did not) */
} batchjobs_fail_t;

/* Records (the recent list's JSON, oldest first) into their batches'
 * lists, keeping the newest `batches` of them (0: none written at all):
 * one script call, only when some record has a batch. The entries
 * written (0: none to write), or minus the number lost (Redis not reached,
 * or refusing them: WRONGTYPE, OOM) with the cause in f->err; an index
 * that refused a batch or its trim (such lists are then bounded by their
 * ttl only) in f->unindexed and f->ierr. */
int batchjobs_add(rconn_t *c, const char *const *recs, int n, int keep, int batches, int64_t retention_s,
                  batchjobs_fail_t *f);
/* Batch id's records, newest first, at most limit (1..BATCHJOBS_KEEP):
 * {"jobs":[...],"kept":N} (N: what its list holds); NULL when Redis is
 * unavailable. Caller frees. */
cJSON *batchjobs_read(rconn_t *c, const char *id, int limit);

#endif
