/*
 * appdriver.c - the pop request and the report of app_driver pools (see
 * appdriver.h). Pure: the worker does the I/O.
 */
#include "worker/appdriver.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void put_queues(sbuf_t *b, const pool_conf_t *p, uint32_t skip, int *n)
{
    sbuf_puts(b, ",\"queues\":[");
    *n = 0;
    for (int i = 0; p->queues && p->queues[i]; i++) {
        if (i < 32 && (skip & (1u << i))) continue;
        if ((*n)++) sbuf_putc(b, ',');
        sbuf_json_str(b, p->queues[i], strlen(p->queues[i]));
    }
    sbuf_putc(b, ']');
}

char *appdriver_request(const pool_conf_t *p, uint32_t skip)
{
    sbuf_t b;
    sbuf_init(&b);
    sbuf_puts(&b, "\"connection\":");
    sbuf_json_str(&b, p->queue_connection, strlen(p->queue_connection));
    int n;
    put_queues(&b, p, skip, &n);
    sbuf_printf(&b, ",\"tries\":%d,\"timeout\":%d,\"backoff\":[", p->tries, p->timeout);
    for (int i = 0; i < p->nbackoff; i++) sbuf_printf(&b, "%s%d", i ? "," : "", p->backoff[i]);
    sbuf_putc(&b, ']');
    if (!n) {
        sbuf_free(&b);
        return NULL;
    }
    char *s = xstrndup(b.data, b.len);
    sbuf_free(&b);
    return s;
}

static char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring ? xstrdup(v->valuestring) : NULL;
}

/* A number member, else dflt; NaN and negatives are "unknown" too. */
static double num_of(const cJSON *o, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble || v->valuedouble < 0) return dflt;
    return v->valuedouble > 1e12 ? 1e12 : v->valuedouble;
}

int appdriver_read_job(const char *json, appd_job_t *out)
{
    memset(out, 0, sizeof *out);
    out->wait_ms = out->runtime_ms = -1;
    out->timeout_s = -1;
    cJSON *m = json ? cJSON_Parse(json) : NULL;
    int rv = cJSON_IsObject(m) ? 0 : -1;
    if (rv == 0) {
        out->name = str_of(m, "name");
        out->queue = str_of(m, "queue");
        out->id = str_of(m, "id");
        out->uuid = str_of(m, "uuid");
        out->attempts = (long)num_of(m, "attempts", 0);
        out->wait_ms = num_of(m, "wait_ms", -1);
        out->runtime_ms = num_of(m, "runtime_ms", -1);
        out->timeout_s = (long)num_of(m, "timeout", -1);
        out->batch = str_of(m, "batch");
    }
    cJSON_Delete(m);
    if (!out->name) out->name = xstrdup("?");
    return rv;
}

void appd_job_free(appd_job_t *j)
{
    free(j->name);
    free(j->queue);
    free(j->id);
    free(j->uuid);
    free(j->batch);
    memset(j, 0, sizeof *j);
}

int appdriver_queue_index(const pool_conf_t *p, const char *name)
{
    for (int i = 0; name && p->queues && p->queues[i]; i++)
        if (!strcmp(p->queues[i], name)) return i;
    return 0;
}
