/*
 * agent_wire.c - see agent_wire.h. Pure: no I/O.
 */
#include "master/agent_wire.h"
#include "core/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[AGENT_NOPS] = {"hello", "signals", "sizes", "batches", "batch-retry",
                                                         "batch-failed", "app"};

static char *line_of(cJSON *o);

char *agent_wire_request(uint64_t id, enum agent_op op, const char *restart_key, const char *const *queues,
                         int nqueues)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)id);
    cJSON_AddStringToObject(o, "op", op_names[op]);
    if (op == AGENT_OP_SIGNALS || op == AGENT_OP_SIZES) {
        if (restart_key && restart_key[0])
            cJSON_AddStringToObject(o, op == AGENT_OP_SIGNALS ? "restart_key" : "connection", restart_key);
        cJSON *a = cJSON_AddArrayToObject(o, "queues");
        for (int i = 0; i < nqueues && i < AGENT_QUEUES_MAX; i++) cJSON_AddItemToArray(a, cJSON_CreateString(queues[i]));
    } else if (op == AGENT_OP_BATCHES) {
        cJSON_AddNumberToObject(o, "limit", nqueues < 1 ? 1 : nqueues > AGENT_BATCHES_MAX ? AGENT_BATCHES_MAX : nqueues);
    } else if (op == AGENT_OP_BATCH_RETRY || op == AGENT_OP_BATCH_FAILED) {
        cJSON_AddStringToObject(o, "batch", restart_key ? restart_key : "");
        cJSON *a = op == AGENT_OP_BATCH_RETRY ? cJSON_AddArrayToObject(o, "jobs") : NULL;
        for (int i = 0; a && i < nqueues && i < AGENT_BATCH_FAILED_MAX; i++)
            cJSON_AddItemToArray(a, cJSON_CreateString(queues[i]));
    }
    char *line = line_of(o);
    cJSON_Delete(o);
    return line;
}

/* A line of o (with its newline; caller frees), or NULL when it would not fit. */
static char *line_of(cJSON *o)
{
    char *js = cJSON_PrintUnformatted(o);
    if (!js) return NULL;
    size_t n = strlen(js);
    if (n + 1 >= AGENT_LINE_MAX) {
        free(js);
        return NULL;
    }
    char *line = xasprintf("%s\n", js);
    free(js);
    return line;
}

char *agent_wire_app_request(uint64_t id, const char *req)
{
    size_t n = req ? strlen(req) : 0;
    if (n < 3 || req[0] != '{' || req[1] != '"' || req[n - 1] != '}') return NULL;
    char *line = xasprintf("%.*s,\"id\":%llu}\n", (int)(n - 1), req, (unsigned long long)id);
    if (strlen(line) < AGENT_LINE_MAX) return line;
    free(line);
    return NULL;
}

static int fail(char *err, size_t errlen, const char *why)
{
    snprintf(err, errlen, "%s", why);
    return -1;
}

/* An integer in [lo, hi], exactly. */
static bool int_in(const cJSON *v, double lo, double hi, double *out)
{
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi || floor(d) != d) return false;
    *out = d;
    return true;
}

/* A string of at most max bytes into buf (max + 1 bytes). */
static bool str_in(const cJSON *v, size_t max, char *buf)
{
    if (!cJSON_IsString(v) || !v->valuestring) return false;
    size_t n = strlen(v->valuestring);
    if (n > max) return false;
    memcpy(buf, v->valuestring, n + 1);
    return true;
}

static int parse_hello(const cJSON *o, agent_reply_t *out, char *err, size_t errlen)
{
    double pid;
    if (!int_in(cJSON_GetObjectItemCaseSensitive(o, "pid"), 2, 2147483647.0, &pid))
        return fail(err, errlen, "hello: no valid \"pid\"");
    out->pid = (int)pid;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "laravel");
    if (v && !str_in(v, sizeof out->laravel - 1, out->laravel)) return fail(err, errlen, "hello: bad \"laravel\"");
    return 0;
}

static int parse_signals(const cJSON *o, int nqueues, agent_reply_t *out, char *err, size_t errlen)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "restart");
    if (!r || cJSON_IsNull(r))
        out->has_restart = false;
    else if (str_in(r, AGENT_VALUE_MAX, out->restart))
        out->has_restart = true;
    else
        return fail(err, errlen, "signals: \"restart\" is neither null nor a short string");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(o, "paused_all");
    if (!cJSON_IsBool(all)) return fail(err, errlen, "signals: \"paused_all\" is not a boolean");
    out->paused_all = cJSON_IsTrue(all);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "paused");
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != nqueues || nqueues > AGENT_QUEUES_MAX)
        return fail(err, errlen, "signals: \"paused\" is not one boolean per queue asked");
    int i = 0;
    for (const cJSON *e = p->child; e; e = e->next, i++) {
        if (!cJSON_IsBool(e)) return fail(err, errlen, "signals: \"paused\" holds a value that is not a boolean");
        out->paused[i] = cJSON_IsTrue(e);
    }
    out->npaused = i;
    return 0;
}

/* A count: an integer in [0, 2^53-1], or null / absent (-1: not known). */
static bool count_in(const cJSON *o, const char *key, bool required, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    double d;
    *out = -1;
    if (!v || cJSON_IsNull(v)) return !required;
    if (!int_in(v, 0, (double)AGENT_ID_MAX, &d)) return false;
    *out = (int64_t)d;
    return true;
}

static int parse_sizes(const cJSON *o, int nqueues, agent_reply_t *out, char *err, size_t errlen)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "sizes");
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != nqueues || nqueues > AGENT_QUEUES_MAX)
        return fail(err, errlen, "sizes: \"sizes\" is not one object per queue asked");
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        if (!cJSON_IsObject(e) || !count_in(e, "ready", true, &out->ready[i]) ||
            !count_in(e, "delayed", false, &out->delayed[i]) || !count_in(e, "reserved", false, &out->reserved[i]))
            return fail(err, errlen, "sizes: a size that is not a count");
    }
    out->nsizes = i;
    return 0;
}

bool agent_batch_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > AGENT_BATCH_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == ':' || c == '-'))
            return false;
    }
    return true;
}

void agent_reply_free(agent_reply_t *r)
{
    free(r->batches);
    r->batches = NULL;
    free(r->app);
    r->app = NULL;
    for (int i = 0; i < r->nretried; i++) free(r->retried[i]);
    for (int i = 0; i < r->nmissing; i++) free(r->missing[i]);
    free(r->retried);
    free(r->missing);
    r->retried = r->missing = NULL;
    r->nretried = r->nmissing = 0;
}

/* A time: whole seconds since the epoch, or null / absent (JSON null out). */
static bool time_in(const cJSON *o, const char *key, cJSON *to)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    double d;
    if (!v || cJSON_IsNull(v)) {
        cJSON_AddNullToObject(to, key);
        return true;
    }
    if (!int_in(v, 0, 1e11, &d)) return false;
    cJSON_AddNumberToObject(to, key, d);
    return true;
}

/* A batch's name: null, or a string cut at a character to AGENT_BATCH_NAME_MAX bytes. */
static bool name_in(const cJSON *v, cJSON *to)
{
    if (!v || cJSON_IsNull(v)) {
        cJSON_AddStringToObject(to, "name", "");
        return true;
    }
    if (!cJSON_IsString(v) || !v->valuestring) return false;
    size_t n = utf8_cut(v->valuestring, strlen(v->valuestring), AGENT_BATCH_NAME_MAX);
    char *name = xstrndup(v->valuestring, n);
    cJSON_AddStringToObject(to, "name", name);
    free(name);
    return true;
}

/* Its failed job ids: an array of ids (others left out), the first
 * AGENT_BATCH_FAILED_MAX kept. */
static bool failed_ids_in(const cJSON *v, cJSON *to)
{
    cJSON *a = cJSON_AddArrayToObject(to, "failed_ids");
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsArray(v)) return false;
    int kept = 0;
    for (const cJSON *e = v->child; e && kept < AGENT_BATCH_FAILED_MAX; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring) return false;
        if (!agent_batch_id_ok(e->valuestring)) continue;
        cJSON_AddItemToArray(a, cJSON_CreateString(e->valuestring));
        kept++;
    }
    return true;
}

/* One batch, checked and normalized into to; false: not a batch. */
static bool batch_in(const cJSON *b, cJSON *to)
{
    int64_t total, pending, failed;
    if (!cJSON_IsObject(b) || !count_in(b, "total", true, &total) || !count_in(b, "pending", true, &pending) ||
        !count_in(b, "failed", true, &failed))
        return false;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id");
    if (!cJSON_IsString(id) || !id->valuestring) return false;
    cJSON_AddStringToObject(to, "id", id->valuestring);
    if (!name_in(cJSON_GetObjectItemCaseSensitive(b, "name"), to)) return false;
    int64_t processed = total > pending ? total - pending : 0;
    cJSON_AddNumberToObject(to, "total", (double)total);
    cJSON_AddNumberToObject(to, "pending", (double)pending);
    cJSON_AddNumberToObject(to, "processed", (double)processed);
    cJSON_AddNumberToObject(to, "failed", (double)failed);
    /* Batch::progress(): round(processed / total * 100), 0 with no jobs */
    cJSON_AddNumberToObject(to, "progress", total > 0 ? round((double)processed * 100.0 / (double)total) : 0);
    return time_in(b, "created_at", to) && time_in(b, "finished_at", to) && time_in(b, "cancelled_at", to) &&
           failed_ids_in(cJSON_GetObjectItemCaseSensitive(b, "failed_ids"), to);
}

static int parse_batches(const cJSON *o, agent_reply_t *out, char *err, size_t errlen)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "batches");
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > AGENT_BATCHES_MAX)
        return fail(err, errlen, "batches: \"batches\" is not an array of at most 50 batches");
    cJSON *list = cJSON_CreateArray();
    for (const cJSON *b = a->child; b; b = b->next) {
        cJSON *one = cJSON_CreateObject();
        if (!batch_in(b, one)) {
            cJSON_Delete(one);
            cJSON_Delete(list);
            return fail(err, errlen, "batches: a batch without its counts, times or ids");
        }
        if (!agent_batch_id_ok(cJSON_GetObjectItemCaseSensitive(one, "id")->valuestring)) {
            cJSON_Delete(one);
            out->skipped++;
            continue;
        }
        cJSON_AddItemToArray(list, one);
        out->nbatches++;
    }
    out->batches = cJSON_PrintUnformatted(list);
    cJSON_Delete(list);
    return out->batches ? 0 : fail(err, errlen, "batches: out of memory");
}

/* An array of ids (absent: none) into *v (heap); false when it is not one. */
static bool ids_in(const cJSON *o, const char *key, char ***v, int *n)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!a) return true;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > AGENT_BATCH_FAILED_MAX) return false;
    *v = xcalloc((size_t)cJSON_GetArraySize(a) + 1, sizeof **v);
    for (const cJSON *e = a->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring || !agent_batch_id_ok(e->valuestring)) return false;
        (*v)[(*n)++] = xstrdup(e->valuestring);
    }
    return true;
}

/* batch-retry ("retried") and batch-failed ("held"): the batch and two lists of job ids. */
static int parse_retry(const cJSON *o, const char *key, agent_reply_t *out, char *err, size_t errlen)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "batch");
    if (!cJSON_IsString(b) || !b->valuestring || !agent_batch_id_ok(b->valuestring))
        return fail(err, errlen, "batch retry: no valid \"batch\"");
    snprintf(out->batch, sizeof out->batch, "%s", b->valuestring);
    if (!ids_in(o, key, &out->retried, &out->nretried) || !ids_in(o, "missing", &out->missing, &out->nmissing))
        return fail(err, errlen, "batch retry: a list of job ids that is not one");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "failer_uuids");
    if (u && !cJSON_IsBool(u)) return fail(err, errlen, "batch retry: \"failer_uuids\" is not a boolean");
    out->failer_uuids = cJSON_IsTrue(u);
    return 0;
}

/* A passed-through reply: kept whole but its id, for the client. */
static int parse_app(const cJSON *o, agent_reply_t *out, char *err, size_t errlen)
{
    cJSON *c = cJSON_Duplicate(o, true);
    cJSON_DeleteItemFromObjectCaseSensitive(c, "id");
    out->app = c ? cJSON_PrintUnformatted(c) : NULL;
    cJSON_Delete(c);
    return out->app ? 0 : fail(err, errlen, "app: out of memory");
}

static int parse_op(const cJSON *o, enum agent_op op, int nqueues, agent_reply_t *out, char *err, size_t errlen)
{
    switch (op) {
    case AGENT_OP_APP: return parse_app(o, out, err, errlen);
    case AGENT_OP_SIZES: return parse_sizes(o, nqueues, out, err, errlen);
    case AGENT_OP_BATCHES: return parse_batches(o, out, err, errlen);
    case AGENT_OP_BATCH_RETRY: return parse_retry(o, "retried", out, err, errlen);
    case AGENT_OP_BATCH_FAILED: return parse_retry(o, "held", out, err, errlen);
    default: return parse_signals(o, nqueues, out, err, errlen);
    }
}

/* The reply's id and ok, and (not ok) its error; 1 when it is an error reply. */
static int parse_head(const cJSON *o, enum agent_op op, agent_reply_t *out, char *err, size_t errlen)
{
    double id;
    double lo = op == AGENT_OP_HELLO ? 0 : 1, hi = op == AGENT_OP_HELLO ? 0 : (double)AGENT_ID_MAX;
    if (!int_in(cJSON_GetObjectItemCaseSensitive(o, "id"), lo, hi, &id))
        return fail(err, errlen, "no valid \"id\"");
    out->id = (uint64_t)id;
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "ok");
    if (!cJSON_IsBool(ok)) return fail(err, errlen, "\"ok\" is not a boolean");
    out->ok = cJSON_IsTrue(ok);
    if (out->ok) return 0;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (!cJSON_IsString(e) || !e->valuestring) return fail(err, errlen, "an error reply without \"error\"");
    size_t n = utf8_cut(e->valuestring, strlen(e->valuestring), sizeof out->error - 1);
    memcpy(out->error, e->valuestring, n);
    out->error[n] = '\0';
    return 1;
}

int agent_wire_parse(const char *line, size_t len, enum agent_op op, int nqueues, agent_reply_t *out, char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->op = op;
    if (len >= AGENT_LINE_MAX) return fail(err, errlen, "the line is too long");
    if (memchr(line, '\0', len) || !utf8_valid(line, len)) return fail(err, errlen, "not valid UTF-8 text");
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, false);
    while (o && end && end < line + len && (*end == ' ' || *end == '\t' || *end == '\r')) end++;
    if (!cJSON_IsObject(o) || end != line + len) { /* one object, and nothing after it */
        cJSON_Delete(o);
        return fail(err, errlen, "not one JSON object");
    }
    int rv = parse_head(o, op, out, err, errlen);
    if (rv == 0 && op == AGENT_OP_HELLO)
        rv = parse_hello(o, out, err, errlen);
    else if (rv == 0)
        rv = parse_op(o, op, nqueues, out, err, errlen);
    else if (rv == 1)
        rv = 0;
    cJSON_Delete(o);
    if (rv < 0) agent_reply_free(out);
    return rv;
}
