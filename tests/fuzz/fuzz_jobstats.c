/*
 * fuzz_jobstats.c - libFuzzer harness: the datagrams a worker sends its
 * (possibly root) master on its stats channel, routed as the master routes
 * them: job records (jobhist_decode, src/jobhist.h) or job stats
 * (jobstats_decode, src/jobstats.h). A datagram is added whole or refused
 * whole with a reason; the totals stay consistent (every entry's runtime
 * count equals its job count), the class table stays within its cap, and
 * every record the master keeps prints as JSON.
 */
#include "fuzz.h"

#include <stdlib.h>

#include "observe/jobhist.h"
#include "observe/jobstats.h"

static void records(const uint8_t *data, size_t size, char **queues)
{
    cJSON *out = cJSON_CreateArray();
    char err[128] = "";
    int n = jobhist_decode((const char *)data, size, queues, 2, "p", "h", "p#1", 1, out, err, sizeof err);
    if ((n < 0 && (!err[0] || cJSON_GetArraySize(out))) || (n >= 0 && cJSON_GetArraySize(out) != n)) abort();
    jobhist_pending_t pend;
    jobhist_pending_init(&pend, 4);
    const cJSON *rec;
    cJSON_ArrayForEach(rec, out) {
        char *js = cJSON_PrintUnformatted(rec);
        if (!js) abort();
        jobhist_pending_add(&pend, js);
    }
    jobhist_pending_free(&pend);
    cJSON_Delete(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *queues[] = {"high", "default"};
    if (jobhist_is_history((const char *)data, size)) {
        records(data, size, queues);
        return 0;
    }
    jobstats_t s;
    jobstats_init(&s, 4);
    char err[128];
    err[0] = '\0';
    int n = jobstats_decode((const char *)data, size, queues, 2, &s, err, sizeof err);
    if (n < 0 && (!err[0] || !jobstats_empty(&s))) abort();
    for (int i = 0; i < s.n; i++)
        if (s.v[i].runtime.count != s.v[i].n || s.v[i].wait.count > s.v[i].n) abort();
    if (s.classes.n > 4) abort();
    int from = 0;
    size_t len;
    free(jobstats_encode(&s, &from, 1000, &len));
    jobstats_free(&s);
    return 0;
}
