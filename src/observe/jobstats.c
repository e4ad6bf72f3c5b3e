/*
 * jobstats.c - see jobstats.h.
 */
#include "observe/jobstats.h"
#include "core/grow.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 4096          /* per line */
#define MAX_CLASS_LEN 255
#define MAX_COUNT 1e7             /* per entry per line: far above any second's work */
#define MAX_JOB_MS 3.2e10         /* a year: sums above count x this are refused */

void jobstats_init(jobstats_t *s, int class_cap)
{
    memset(s, 0, sizeof *s);
    labels_init(&s->queues, JOBSTATS_QUEUES_MAX);
    labels_init(&s->classes, class_cap);
}

void jobstats_free(jobstats_t *s)
{
    free(s->v);
    labels_free(&s->queues);
    labels_free(&s->classes);
    memset(s, 0, sizeof *s);
}

void jobstats_clear(jobstats_t *s)
{
    s->n = 0;
}

void jobstats_zero(jobstats_t *s, int from, int to)
{
    for (int i = from < 0 ? 0 : from; i < to && i < s->n; i++) {
        s->v[i].n = 0;
        memset(&s->v[i].runtime, 0, sizeof s->v[i].runtime);
        memset(&s->v[i].wait, 0, sizeof s->v[i].wait);
    }
}

bool jobstats_empty(const jobstats_t *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i].n) return false;
    return true;
}

static jobstat_t *entry(jobstats_t *s, int queue, int job, enum job_outcome outcome)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i].queue == queue && s->v[i].job == job && s->v[i].outcome == outcome) return &s->v[i];
    s->v = xgrow(s->v, s->n, &s->cap, sizeof *s->v, 16);
    jobstat_t *e = &s->v[s->n++];
    *e = (jobstat_t){.queue = queue, .job = job, .outcome = outcome};
    return e;
}

void jobstats_record(jobstats_t *s, const char *queue, const char *job, int outcome, double runtime_ms,
                     double wait_ms)
{
    if (outcome < 0 || outcome >= OUTCOME_N) return;
    char cut[MAX_CLASS_LEN + 1];
    char *fixed = NULL;
    if (job && !utf8_valid(job, strlen(job))) job = fixed = utf8_repair(job, strlen(job), NULL); /* the master refuses it */
    if (job && strlen(job) > MAX_CLASS_LEN) {
        /* the master refuses longer names: cut at a UTF-8 character boundary */
        size_t n = utf8_cut(job, strlen(job), MAX_CLASS_LEN);
        memcpy(cut, job, n);
        cut[n] = '\0';
        job = cut;
    }
    jobstat_t *e = entry(s, labels_id(&s->queues, queue), labels_id(&s->classes, job && *job ? job : LABEL_OTHER),
                         outcome);
    free(fixed);
    e->n++;
    hist_observe(&e->runtime, runtime_ms);
    if (wait_ms >= 0) hist_observe(&e->wait, wait_ms);
}

/* ------------------------------------------------------------ the line */

static cJSON *hist_json(const histogram_t *h)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < METRICS_NBUCKETS; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)h->bucket[i]));
    return a;
}

char *jobstats_encode(const jobstats_t *s, int *from, int max, size_t *len)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "s");
    int i = *from, put = 0;
    for (; i < s->n && put < max; i++) {
        const jobstat_t *e = &s->v[i];
        if (!e->n) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "q", labels_name(&s->queues, e->queue));
        cJSON_AddStringToObject(x, "j", labels_name(&s->classes, e->job));
        cJSON_AddStringToObject(x, "o", outcome_name(e->outcome));
        cJSON_AddNumberToObject(x, "n", (double)e->n);
        cJSON_AddItemToObject(x, "r", hist_json(&e->runtime));
        cJSON_AddNumberToObject(x, "rs", e->runtime.sum_ms);
        cJSON_AddItemToObject(x, "w", hist_json(&e->wait));
        cJSON_AddNumberToObject(x, "ws", e->wait.sum_ms);
        cJSON_AddItemToArray(arr, x);
        put++;
    }
    *from = i < s->n ? i : 0;
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    size_t n = strlen(js);
    char *line = xmalloc(n + 2);
    memcpy(line, js, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    free(js);
    *len = n + 1;
    return line;
}

static bool count_ok(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= MAX_COUNT &&
           v->valuedouble == floor(v->valuedouble);
}

static bool sum_ok(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0;
}

/* A sum no count of real jobs can reach would make the totals infinite. */
static bool sum_plausible(const histogram_t *h)
{
    return h->sum_ms <= (double)h->count * MAX_JOB_MS;
}

/* A histogram of exactly METRICS_NBUCKETS counts; its count is their sum. */
static bool hist_from(const cJSON *a, const cJSON *sum, histogram_t *h)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != METRICS_NBUCKETS || !sum_ok(sum)) return false;
    memset(h, 0, sizeof *h);
    int i = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, a) {
        if (!count_ok(b)) return false;
        h->bucket[i++] = (uint64_t)b->valuedouble;
        h->count += (uint64_t)b->valuedouble;
    }
    h->sum_ms = sum->valuedouble;
    return sum_plausible(h);
}

static int queue_index(const char *name, char *const *queues, int nqueues)
{
    for (int i = 0; i < nqueues; i++)
        if (!strcmp(queues[i], name)) return i;
    return -1;
}

typedef struct {
    int outcome;
    const char *queue, *job;
    uint64_t n;
    histogram_t runtime, wait;
} decoded_t;

static int decode_entry(const cJSON *x, char *const *queues, int nqueues, decoded_t *d, char *err, size_t errn)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(x, "q"), *j = cJSON_GetObjectItemCaseSensitive(x, "j"),
                *o = cJSON_GetObjectItemCaseSensitive(x, "o"), *n = cJSON_GetObjectItemCaseSensitive(x, "n");
    if (!cJSON_IsObject(x) || cJSON_GetArraySize(x) != 8 || !cJSON_IsString(q) || !cJSON_IsString(j) ||
        !cJSON_IsString(o) || !count_ok(n)) {
        snprintf(err, errn, "an entry is not {q,j,o,n,r,rs,w,ws}");
        return -1;
    }
    d->queue = q->valuestring;
    d->outcome = outcome_from_name(o->valuestring);
    d->job = j->valuestring;
    d->n = (uint64_t)n->valuedouble;
    if (queue_index(d->queue, queues, nqueues) < 0 || d->outcome < 0 || !*d->job || strlen(d->job) > MAX_CLASS_LEN ||
        !utf8_valid(d->job, strlen(d->job))) {
        snprintf(err, errn, "unknown queue, outcome or class name");
        return -1;
    }
    if (!hist_from(cJSON_GetObjectItemCaseSensitive(x, "r"), cJSON_GetObjectItemCaseSensitive(x, "rs"), &d->runtime) ||
        !hist_from(cJSON_GetObjectItemCaseSensitive(x, "w"), cJSON_GetObjectItemCaseSensitive(x, "ws"), &d->wait) ||
        d->runtime.count != d->n || d->wait.count > d->n) {
        snprintf(err, errn, "a histogram does not add up to the job count");
        return -1;
    }
    return 0;
}

int jobstats_decode(const char *line, size_t len, char *const *queues, int nqueues, jobstats_t *into, char *err,
                    size_t errn)
{
    if (len > JOBSTATS_LINE_MAX) {
        snprintf(err, errn, "line too long");
        return -1;
    }
    cJSON *o = cJSON_ParseWithLength(line, len);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "s");
    int total = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
    if (!cJSON_IsObject(o) || total < 0 || total > MAX_ENTRIES) {
        snprintf(err, errn, "not a stats line");
        cJSON_Delete(o);
        return -1;
    }
    decoded_t *d = xcalloc((size_t)total + 1, sizeof *d);
    int k = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        if (decode_entry(x, queues, nqueues, &d[k], err, errn) < 0) {
            free(d);
            cJSON_Delete(o);
            return -1;
        }
        k++;
    }
    for (int i = 0; i < k; i++) {
        jobstat_t *e = entry(into, labels_id(&into->queues, d[i].queue), labels_id(&into->classes, d[i].job),
                             d[i].outcome);
        e->n += d[i].n;
        hist_merge(&e->runtime, &d[i].runtime);
        hist_merge(&e->wait, &d[i].wait);
    }
    free(d);
    cJSON_Delete(o);
    return k;
}

void jobstats_merge(jobstats_t *into, const jobstats_t *from)
{
    for (int i = 0; i < from->n; i++) {
        const jobstat_t *f = &from->v[i];
        if (!f->n) continue;
        jobstat_t *e = entry(into, labels_id(&into->queues, labels_name(&from->queues, f->queue)),
                             labels_id(&into->classes, labels_name(&from->classes, f->job)), f->outcome);
        e->n += f->n;
        hist_merge(&e->runtime, &f->runtime);
        hist_merge(&e->wait, &f->wait);
    }
}

void jobstats_sum(const jobstats_t *s, const char *queue, const char *job, int outcome, uint64_t *n,
                  histogram_t *runtime, histogram_t *wait)
{
    *n = 0;
    if (runtime) memset(runtime, 0, sizeof *runtime);
    if (wait) memset(wait, 0, sizeof *wait);
    for (int i = 0; i < s->n; i++) {
        const jobstat_t *e = &s->v[i];
        if (outcome >= 0 && (int)e->outcome != outcome) continue;
        if (queue && strcmp(labels_name(&s->queues, e->queue), queue)) continue;
        if (job && strcmp(labels_name(&s->classes, e->job), job)) continue;
        *n += e->n;
        if (runtime) hist_merge(runtime, &e->runtime);
        if (wait) hist_merge(wait, &e->wait);
    }
}

cJSON *hist_summary_json(const histogram_t *h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "count", (double)h->count);
    cJSON_AddNumberToObject(o, "sum", round(h->sum_ms * 1000) / 1000);
    static const struct { const char *name; double q; } QS[] = {{"p50", 0.5}, {"p95", 0.95}, {"p99", 0.99}};
    for (size_t i = 0; i < sizeof QS / sizeof *QS; i++) {
        double v = hist_quantile(h, QS[i].q);
        if (v < 0)
            cJSON_AddNullToObject(o, QS[i].name);
        else
            cJSON_AddNumberToObject(o, QS[i].name, round(v * 1000) / 1000);
    }
    return o;
}

cJSON *jobstat_counts_json(uint64_t n, const histogram_t *runtime, const histogram_t *wait)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "n", (double)n);
    cJSON_AddItemToObject(x, "r", hist_json(runtime));
    cJSON_AddNumberToObject(x, "rs", runtime->sum_ms);
    cJSON_AddItemToObject(x, "w", hist_json(wait));
    cJSON_AddNumberToObject(x, "ws", wait->sum_ms);
    return x;
}

int jobstat_counts_from_json(const cJSON *x, uint64_t *n, histogram_t *runtime, histogram_t *wait)
{
    const cJSON *nn = cJSON_GetObjectItemCaseSensitive(x, "n");
    if (!count_ok(nn)) return -1;
    if (!hist_from(cJSON_GetObjectItemCaseSensitive(x, "r"), cJSON_GetObjectItemCaseSensitive(x, "rs"), runtime) ||
        !hist_from(cJSON_GetObjectItemCaseSensitive(x, "w"), cJSON_GetObjectItemCaseSensitive(x, "ws"), wait))
        return -1;
    *n = (uint64_t)nn->valuedouble;
    return 0;
}
