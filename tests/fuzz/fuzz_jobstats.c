/*
 * fuzz_jobstats.c - libFuzzer harness: the job-stats datagrams a worker
 * sends its (possibly root) master (jobstats_decode, src/jobstats.h). A
 * datagram is added whole or refused whole with a reason; the totals stay
 * consistent (every entry's runtime count equals its job count) and the
 * class table stays within its cap.
 */
#include "fuzz.h"

#include <stdlib.h>

#include "jobstats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *queues[] = {"high", "default"};
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
