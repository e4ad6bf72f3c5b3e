/*
 * fuzz_payload.c - libFuzzer harness: the payload reader and editor
 * (src/payload.c). Whatever bytes sit in a queue, payload_parse must
 * either accept them or say why, json_top_value must stay inside the
 * buffer, payload_set_attempts must produce a payload whose "attempts"
 * reads back as the number written, payload_refresh_retry_until
 * (qpool failed retry) must edit only what it reads back, and
 * payload_drop_key (a release) must leave an object without the key.
 * jobhist_payload_batch (a job's batch id read from the PHP-serialized
 * command, for attempts the handler did not answer) must return only an
 * id jobhist_batch_ok takes, and leave its output untouched otherwise.
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "observe/jobhist.h"
#include "redis/payload.h"

/* The batch id reader: an id it may carry, or nothing written. */
static void check_batch(const char *raw, size_t size)
{
    char out[JOBHIST_BATCH_MAX + 1], was[sizeof out];
    memset(out, '#', sizeof out - 1);
    out[sizeof out - 1] = '\0';
    memcpy(was, out, sizeof out);
    if (jobhist_payload_batch(raw, size, out)) {
        if (!memchr(out, '\0', sizeof out) || !jobhist_batch_ok(out)) abort();
    } else if (memcmp(out, was, sizeof out))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *raw = (const char *)data;
    job_payload_t p;
    char err[256];
    if (payload_parse(raw, size, &p, err, sizeof err) == 0) {
        (void)payload_name(&p);
        payload_free(&p);
    } else if (!err[0])
        abort(); /* a refusal always says why */

    static const char *const keys[] = {"attempts", "uuid", "job", "data", "backoff"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        size_t vs, ve;
        if (json_top_value(raw, size, keys[k], &vs, &ve) && (vs > ve || ve > size)) abort();
    }

    long n = size ? (long)data[0] * 1000 + 7 : 7;
    size_t outlen = 0;
    char *edited = payload_set_attempts(raw, size, n, &outlen);
    if (edited) {
        job_payload_t q;
        if (payload_parse(edited, outlen, &q, err, sizeof err) == 0) {
            if (q.attempts != n) abort(); /* the edit reads back */
            payload_free(&q);
        }
        free(edited);
    }

    size_t dlen = 0;
    char *dropped = payload_drop_key(raw, size, PAYLOAD_TWIN, &dlen);
    if (dropped) {
        cJSON *o = cJSON_ParseWithLength(dropped, dlen);
        if (!cJSON_IsObject(o) || cJSON_GetObjectItemCaseSensitive(o, PAYLOAD_TWIN) || dlen >= size) abort();
        cJSON_Delete(o);
        free(dropped);
    }

    char *fresh = NULL;
    size_t flen = 0;
    int rv = payload_refresh_retry_until(raw, size, 1700000000, &fresh, &flen);
    if ((rv == 1) != (fresh != NULL)) abort(); /* output exactly when refreshed */
    free(fresh);

    check_batch(raw, size);
    return 0;
}
