/*
 * fuzz_appdesc.c - libFuzzer harness: what the PHP adapter prints about a
 * Laravel app, which qpool treats as untrusted: the --describe JSON
 * (appdesc_parse) and the --describe-horizon JSON (horizon_import).
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "appdesc.h"
#include "horizon.h"

static void check_desc(const app_desc_t *d)
{
    /* every connection a value names is described */
    const app_val_t *refs[] = {&d->connection, &d->cache_connection, &d->down_connection};
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++)
        if (refs[i]->value && !appdesc_redis(d, refs[i]->value)) abort();
    if (!d->queue_connection.value || !d->retry_after.value || d->nredis > APPDESC_MAX_REDIS) abort();
    if (atoi(d->retry_after.value) < 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    app_desc_t d;
    char err[256];
    if (appdesc_parse((const char *)data, size, &d, err, sizeof err) == 0) {
        check_desc(&d);
        appdesc_free(&d);
    } else if (!err[0])
        abort(); /* a refusal says why */
    cJSON *j = cJSON_ParseWithLength((const char *)data, size);
    if (j) {
        sbuf_t out;
        sbuf_init(&out);
        char herr[256] = "";
        if (horizon_import(j, "/srv/app", NULL, &out, herr, sizeof herr) < 0 && !herr[0]) abort();
        sbuf_free(&out);
        cJSON_Delete(j);
    }
    return 0;
}
