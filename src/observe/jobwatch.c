/*
 * jobwatch.c - every job of a watched tag (see jobwatch.h). Pure.
 */
#include "observe/jobwatch.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jobwatch_set_free(jobwatch_set_t *s)
{
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool jobwatch_set_take(jobwatch_set_t *s, char **tags, int n)
{
    qsort(tags, (size_t)n, sizeof *tags, by_name);
    bool same = n == s->n;
    for (int i = 0; same && i < n; i++) same = !strcmp(tags[i], s->v[i]);
    jobwatch_set_free(s);
    s->v = tags;
    s->n = n;
    return !same;
}

static bool has(const jobwatch_set_t *s, const char *t, size_t n)
{
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strncmp(s->v[mid], t, n);
        if (!c) c = s->v[mid][n] ? 1 : 0;
        if (!c) return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return false;
}

bool jobwatch_meets(const jobwatch_set_t *s, const char *tags, size_t len)
{
    if (!s->n || !tags) return false;
    for (const char *p = tags; p < tags + len;) {
        const char *nl = memchr(p, '\n', (size_t)(tags + len - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(tags + len - p);
        if (n && has(s, p, n)) return true;
        p += n + 1;
    }
    return false;
}

uint64_t jobwatch_gen_of(char *const *tags, int n)
{
    if (n <= 0) return JOBWATCH_GEN_EMPTY;
    uint64_t h = 1469598103934665603ull; /* FNV-1a, each tag and its end */
    for (int i = 0; i < n; i++) {
        for (const unsigned char *c = (const unsigned char *)tags[i]; *c; c++) h = (h ^ *c) * 1099511628211ull;
        h = (h ^ 0xffu) * 1099511628211ull; /* 0xff is no byte of UTF-8: "a","b" is not "ab" */
    }
    return h > JOBWATCH_GEN_EMPTY ? h : h + 2;
}

enum jobwatch_act jobwatch_gen_action(uint64_t published, uint64_t have, bool due)
{
    if (published == JOBWATCH_GEN_NONE) return due ? JOBWATCH_READ : JOBWATCH_KEEP; /* as before generations */
    if (published == have) return JOBWATCH_KEEP;
    if (published == JOBWATCH_GEN_EMPTY) return JOBWATCH_CLEAR;
    return due ? JOBWATCH_READ : JOBWATCH_KEEP;
}

uint64_t jobwatch_gen_next(uint64_t published, uint64_t read, int *misses)
{
    if (read != JOBWATCH_GEN_NONE) {
        *misses = 0;
        return read;
    }
    if (*misses < JOBWATCH_GEN_HOLD) ++*misses;
    return *misses < JOBWATCH_GEN_HOLD ? published : JOBWATCH_GEN_NONE;
}

uint64_t jobwatch_gen_read(uint64_t published, char *const *tags, int n)
{
    return published == JOBWATCH_GEN_NONE ? JOBWATCH_GEN_NONE : jobwatch_gen_of(tags, n);
}

void jobwatch_queue_init(jobwatch_queue_t *q, int cap)
{
    memset(q, 0, sizeof *q);
    q->cap = cap;
    q->tags = xcalloc((size_t)cap, sizeof *q->tags);
    q->recs = xcalloc((size_t)cap, sizeof *q->recs);
}

void jobwatch_queue_free(jobwatch_queue_t *q)
{
    for (int i = 0; i < q->n; i++) {
        int at = (q->head + i) % q->cap;
        free(q->tags[at]);
        free(q->recs[at]);
    }
    free(q->tags);
    free(q->recs);
    memset(q, 0, sizeof *q);
}

bool jobwatch_queue_add(jobwatch_queue_t *q, char *tags, char *rec)
{
    size_t len = strlen(tags) + strlen(rec);
    if (q->n == q->cap || q->bytes + len > JOBWATCH_QUEUE_BYTES) {
        free(tags);
        free(rec);
        q->dropped++;
        return false;
    }
    int at = (q->head + q->n) % q->cap;
    q->tags[at] = tags;
    q->recs[at] = rec;
    q->bytes += len;
    q->n++;
    return true;
}

int jobwatch_queue_batch(jobwatch_queue_t *q, int max, const char *new_token, const char **tags, const char **recs)
{
    if (!q->token[0]) {
        /* a new batch; the one before was taken whole, and nothing leaves
         * the head but by jobwatch_queue_done (a full queue refuses the
         * newest), so a batch once formed never changes */
        size_t bytes = 0;
        q->batch = 0;
        while (q->batch < q->n && q->batch < max) {
            int at = (q->head + q->batch) % q->cap;
            size_t len = strlen(q->tags[at]) + strlen(q->recs[at]);
            if (q->batch && bytes + len > JOBWATCH_STEP_BYTES) break; /* never past it but with one record */
            bytes += len;
            q->batch++;
        }
        if (!q->batch) return 0;
        snprintf(q->token, sizeof q->token, "%s", new_token);
    }
    for (int i = 0; i < q->batch; i++) {
        tags[i] = q->tags[(q->head + i) % q->cap];
        recs[i] = q->recs[(q->head + i) % q->cap];
    }
    return q->batch;
}

void jobwatch_queue_done(jobwatch_queue_t *q)
{
    for (int i = 0; i < q->batch; i++) {
        int at = (q->head + i) % q->cap;
        q->bytes -= strlen(q->tags[at]) + strlen(q->recs[at]);
        free(q->tags[at]);
        free(q->recs[at]);
        q->tags[at] = q->recs[at] = NULL;
    }
    q->head = (q->head + q->batch) % q->cap;
    q->n -= q->batch;
    q->batch = q->refused = 0;
    q->first_ms = 0;
    q->token[0] = '\0';
}

_Static_assert(2 * (int64_t)JOBWATCH_RESEND_MS <= JOBWATCH_TOKEN_MS, "a resend never outlives its token");

bool jobwatch_resend(int64_t age_ms)
{
    return age_ms <= JOBWATCH_RESEND_MS;
}

void jobwatch_queue_sent(jobwatch_queue_t *q, bool up, int rv, int64_t sent_ms)
{
    if (up && rv == -1 && q->batch && !q->first_ms) q->first_ms = sent_ms > 0 ? sent_ms : 1;
}

bool jobwatch_queue_expired(const jobwatch_queue_t *q, int64_t now_ms)
{
    return q->token[0] && q->first_ms && !jobwatch_resend(now_ms - q->first_ms);
}

void jobwatch_queue_clear(jobwatch_queue_t *q)
{
    for (int i = 0; i < q->n; i++) {
        int at = (q->head + i) % q->cap;
        free(q->tags[at]);
        free(q->recs[at]);
        q->tags[at] = q->recs[at] = NULL;
    }
    q->head = q->n = q->batch = q->refused = 0;
    q->bytes = 0;
    q->first_ms = 0;
    q->token[0] = '\0';
}
