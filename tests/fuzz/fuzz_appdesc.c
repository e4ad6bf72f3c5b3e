/*
 * fuzz_appdesc.c - libFuzzer harness: what the PHP adapter prints about a
 * Laravel app, which qpool treats as untrusted: the --describe JSON
 * (appdesc_parse) and the --describe-horizon JSON (horizon_import).
 */
#include "fuzz.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/appdesc.h"
#include "config/config_app.h"
#include "config/horizon.h"
#include "core/util.h"

static void check_desc(const app_desc_t *d)
{
    /* every connection a value names is described */
    const app_val_t *refs[] = {&d->connection, &d->cache_connection, &d->down_connection};
    for (size_t i = 0; i < sizeof refs / sizeof *refs; i++)
        if (refs[i]->value && !appdesc_redis(d, refs[i]->value)) abort();
    if (!d->queue_connection.value || !d->retry_after.value || d->nredis > APPDESC_MAX_REDIS) abort();
    if (atoi(d->retry_after.value) < 1) abort();
}

/* Apply it to a pool, as config_load does: every string the pool gets is set. */
static void check_apply(const app_desc_t *d)
{
    qconf_t *c = xcalloc(1, sizeof *c);
    pool_conf_t p;
    memset(&p, 0, sizeof p);
    p.name = xstrdup("p");
    p.laravel = xstrdup("/srv/app");
    p.php = xcalloc(2, sizeof *p.php);
    p.php[0] = xstrdup("php");
    p.connection = xstrdup("default");
    p.queue_connection = xstrdup("redis");
    p.cache_prefix = xstrdup("laravel_cache:");
    p.restart_key = xstrdup("illuminate:queue:restart");
    p.backoff = xcalloc(1, sizeof(int));
    p.nbackoff = 1;
    char **w = NULL;
    int nw = 0;
    app_apply(c, &p, 0, d, &w, &nw);
    if (!p.connection || !p.queue_connection || !p.cache_connection || !p.cache_prefix || !p.restart_key ||
        !p.queues || !p.handler_command)
        abort();
    /* a connection the description names is defined; one it leaves out keeps
     * the pool's own name, which config validation checks (exit 78) */
    if ((d->connection.value && !config_redis(c, p.connection)) ||
        (d->cache_connection.value && !config_redis(c, p.cache_connection)))
        abort();
    pool_conf_t copy;
    pool_conf_copy(&copy, &p);
    pool_conf_free(&copy);
    for (int i = 0; i < nw; i++) free(w[i]);
    free(w);
    pool_conf_free(&p);
    config_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    app_desc_t d;
    char err[256];
    if (appdesc_parse((const char *)data, size, &d, err, sizeof err) == 0) {
        check_desc(&d);
        check_apply(&d);
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
