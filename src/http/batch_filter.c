/*
 * batch_filter.c - see batch_filter.h.
 */
#include "http/batch_filter.h"

#include <ctype.h>
#include <string.h>

int bfilter_status(const char *s)
{
    static const char *names[] = {"pending", "finished", "failed", "cancelled"};
    if (!s || !*s) return BSTATUS_ANY;
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) return BSTATUS_PENDING + i;
    return -1;
}

/* Does s hold needle, ASCII case ignored? */
static bool ci_has(const char *s, const char *needle)
{
    size_t n = strlen(needle);
    for (; s && *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && tolower((unsigned char)s[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return n == 0;
}

static bool has_time(const cJSON *b, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, k);
    return cJSON_IsNumber(v) && v->valuedouble > 0;
}

static bool status_ok(bstatus_t st, const cJSON *b)
{
    bool cancelled = has_time(b, "cancelled_at"), finished = has_time(b, "finished_at");
    const cJSON *failed = cJSON_GetObjectItemCaseSensitive(b, "failed");
    switch (st) {
    case BSTATUS_PENDING: return !cancelled && !finished;
    case BSTATUS_FINISHED: return finished && !cancelled;
    case BSTATUS_CANCELLED: return cancelled;
    case BSTATUS_FAILED: return cJSON_IsNumber(failed) && failed->valuedouble > 0;
    default: return true;
    }
}

bool bfilter_match(const bfilter_t *f, const cJSON *batch)
{
    if (f->q && *f->q) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(batch, "name"));
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(batch, "id"));
        if (!(name && ci_has(name, f->q)) && !(id && ci_has(id, f->q))) return false;
    }
    if (!status_ok(f->status, batch)) return false;
    if (f->since || f->until) {
        const cJSON *at = cJSON_GetObjectItemCaseSensitive(batch, "created_at");
        if (!cJSON_IsNumber(at)) return false;
        if (f->since && at->valuedouble < (double)f->since) return false;
        if (f->until && at->valuedouble >= (double)f->until + 1) return false;
    }
    return true;
}

int bfilter_apply(const bfilter_t *f, cJSON *list)
{
    int i = 0;
    while (i < cJSON_GetArraySize(list)) {
        if (bfilter_match(f, cJSON_GetArrayItem(list, i))) i++;
        else cJSON_DeleteItemFromArray(list, i);
    }
    return i;
}
