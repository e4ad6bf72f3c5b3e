/*
 * mapp.c - see mapp.h.
 */
#include "master/mapp.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys each op takes, and of what kind. */
enum mapp_kind { MAPP_INT, MAPP_TEXT, MAPP_ID, MAPP_IDS };
typedef struct {
    const char *key;
    enum mapp_kind kind;
} mapp_key_t;

static const mapp_key_t LIST_KEYS[] = {{"limit", MAPP_INT}, {"offset", MAPP_INT}, {"since", MAPP_INT},
                                       {"until", MAPP_INT}, {"queue", MAPP_TEXT}, {"class", MAPP_TEXT},
                                       {"text", MAPP_TEXT}, {"uuid", MAPP_TEXT}, {"tag", MAPP_TEXT},
                                       {NULL, MAPP_INT}};
static const mapp_key_t SHOW_KEYS[] = {{"job", MAPP_ID}, {NULL, MAPP_INT}};
static const mapp_key_t IDS_KEYS[] = {{"jobs", MAPP_IDS}, {NULL, MAPP_INT}};

static const struct {
    enum mapp_op op;
    const char *name;
    const mapp_key_t *keys;
} OPS[] = {{MAPP_OP_LIST, "failed", LIST_KEYS},
           {MAPP_OP_SHOW, "failed-show", SHOW_KEYS},
           {MAPP_OP_RETRY, "failed-retry", IDS_KEYS},
           {MAPP_OP_FORGET, "failed-forget", IDS_KEYS}};

/* One key's value v (present) copied into out when it is of its kind. */
static bool take(cJSON *out, const mapp_key_t *k, const cJSON *v)
{
    if (k->kind == MAPP_INT) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e12 || v->valuedouble != (double)(int64_t)v->valuedouble)
            return false;
        cJSON_AddNumberToObject(out, k->key, v->valuedouble);
        return true;
    }
    if (k->kind == MAPP_IDS) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > AGENT_BATCH_FAILED_MAX) return false;
        cJSON *a = cJSON_AddArrayToObject(out, k->key);
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (!cJSON_IsString(e) || !agent_batch_id_ok(e->valuestring)) return false;
            cJSON_AddItemToArray(a, cJSON_CreateString(e->valuestring));
        }
        return true;
    }
    if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > MAPP_FIELD_MAX) return false;
    if (k->kind == MAPP_ID && !agent_batch_id_ok(v->valuestring)) return false;
    if (!utf8_valid(v->valuestring, strlen(v->valuestring))) return false;
    cJSON_AddStringToObject(out, k->key, v->valuestring);
    return true;
}

const char *mapp_refusal(const mapp_req_t *req, bool owner, bool read_all)
{
    if (owner) return NULL;
    if (!req || mapp_acts(req)) return "retry and forget on the app's failer are for root and qpool's own user only";
    if (!read_all)
        return "the app's failed jobs (payloads, exceptions) are for root and qpool's own user only "
               "(or every allowed peer with http.read_without_token = \"all\")";
    return NULL;
}

/* req's op in OPS, or -1. */
static int op_of(const cJSON *req)
{
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "op");
    for (size_t i = 0; i < ARRAY_LEN(OPS) && cJSON_IsObject(req) && cJSON_IsString(op); i++)
        if (!strcmp(op->valuestring, OPS[i].name)) return (int)i;
    return -1;
}

int mapp_request(const cJSON *req, mapp_req_t *out, char *err, size_t errn)
{
    *out = (mapp_req_t){0};
    int i = op_of(req);
    if (i < 0) {
        snprintf(err, errn, "app takes \"request\": {\"op\": failed, failed-show, failed-retry or failed-forget, ...}");
        return -1;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", OPS[i].name);
    for (const mapp_key_t *k = OPS[i].keys; k->key; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, k->key);
        bool needed = k->kind == MAPP_ID || k->kind == MAPP_IDS;
        if ((!v && needed) || (v && !take(o, k, v))) {
            snprintf(err, errn, "%s: \"%s\" is missing or not %s", OPS[i].name, k->key,
                     k->kind == MAPP_INT ? "a whole number" : k->kind == MAPP_IDS ? "a list of 1 to 100 job ids"
                                                          : k->kind == MAPP_ID ? "a job id" : "a short text");
            cJSON_Delete(o);
            return -1;
        }
    }
    *out = (mapp_req_t){.op = OPS[i].op, .op_name = OPS[i].name,
                        .njobs = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "jobs")),
                        .json = cJSON_PrintUnformatted(o)};
    cJSON_Delete(o);
    if (out->json) return 0;
    snprintf(err, errn, "out of memory");
    return -1;
}

void mapp_req_free(mapp_req_t *r)
{
    free(r->json);
    *r = (mapp_req_t){0};
}

static pool_t *find_pool(master_t *m, const char *name)
{
    for (int i = 0; i < m->pools.n; i++)
        if (!m->pools.v[i]->removed && name && !strcmp(m->pools.v[i]->conf.name, name)) return m->pools.v[i];
    return NULL;
}

/* Of q's requests: those of from's connection, process and user, and the control clients' all told. */
static void shares(const agent_app_t *q, const agent_app_from_t *from, int *conn, int *proc, int *user, int *ctl)
{
    *conn = *proc = *user = *ctl = 0;
    for (int i = 0; i < q->n; i++) {
        const agent_app_from_t *o = &q->v[i].from;
        if (o->dash) continue;
        (*ctl)++;
        *conn += o->client == from->client;
        *proc += from->pid > 0 && o->pid == from->pid;
        *user += o->uid == from->uid;
    }
}

const char *mapp_admit(const agent_app_t *q, const agent_app_from_t *from, const char *pool, char *why, size_t whyn)
{
    int conn, proc, user, ctl;
    shares(q, from, &conn, &proc, &user, &ctl);
    if (from->dash ? q->n >= MAPP_QUEUE_MAX : ctl >= MAPP_QUEUE_MAX - MAPP_DASH_PLACES)
        snprintf(why, whyn, "pool %s has %d requests waiting on its app agent: try again", pool, q->n);
    else if (from->dash)
        return NULL;
    else if (conn)
        snprintf(why, whyn, "pool %s: this connection's request on the app agent is not answered yet: "
                 "send the next when it is", pool);
    else if (proc >= MAPP_PER_CLIENT)
        snprintf(why, whyn, "pool %s: process %d has %d requests waiting on the app agent (at most %d a client): "
                 "try again when one is answered", pool, (int)from->pid, proc, MAPP_PER_CLIENT);
    else if (!from->owner && user >= MAPP_PER_CLIENT)
        snprintf(why, whyn, "pool %s: uid %u has %d requests waiting on the app agent (at most %d a user): "
                 "try again when one is answered", pool, (unsigned)from->uid, user, MAPP_PER_CLIENT);
    else
        return NULL;
    return why;
}

int mapp_ask(master_t *m, const agent_app_from_t *from, const char *pool, char *req, int64_t now, char *err,
             size_t errn)
{
    pool_t *p = find_pool(m, pool);
    if (!p)
        snprintf(err, errn, "no pool %s", pool ? pool : "(none named)");
    else if (!pool_preloads(&p->conf))
        snprintf(err, errn, "pool %s does not preload a Laravel app: it has no app agent to ask", p->conf.name);
    else if (!mapp_admit(&p->app_reqs, from, p->conf.name, err, errn)) {
        p->app_reqs.v[p->app_reqs.n++] = (agent_app_req_t){.from = *from, .req = req, .until_ms = now + MAPP_WAIT_MS};
        p->agent.todo |= AGENT_WANT_APP;
        mapp_send(p, now);
        return 0;
    }
    free(req);
    return -1;
}

/* Drop a's unsent request k: a retry or forget says so, as its audit line said it was asked (control.c). */
static void drop_unsent(const pool_t *p, agent_app_t *a, int k)
{
    agent_app_req_t *q = &a->v[k];
    if (q->from.act)
        log_info("control: app %s of %d failed jobs on pool %s asked by uid %u dropped: its client went away "
                 "before it was sent to the app agent", q->from.act, q->from.njobs, p->conf.name, (unsigned)q->from.uid);
    free(q->req);
    memmove(q, q + 1, sizeof *q * (size_t)(a->n - k - 1));
    a->n--;
}

void mapp_forget_client(master_t *m, uint64_t client)
{
    for (int i = 0; i < m->pools.n; i++) {
        agent_app_t *a = &m->pools.v[i]->app_reqs;
        for (int k = 0; k < a->n;) {
            const agent_app_req_t *q = &a->v[k];
            if (q->from.dash || q->from.client != client || q->sent_id || q->answer)
                k++;
            else
                drop_unsent(m->pools.v[i], a, k);
        }
    }
}

bool mapp_wanted(const pool_t *p)
{
    for (int i = 0; i < p->app_reqs.n; i++)
        if (!p->app_reqs.v[i].answer) return true;
    return false;
}

/* The first request not answered yet, or NULL. */
static agent_app_req_t *first_open(pool_t *p)
{
    for (int i = 0; i < p->app_reqs.n; i++)
        if (!p->app_reqs.v[i].answer) return &p->app_reqs.v[i];
    return NULL;
}

void mapp_send(pool_t *p, int64_t now)
{
    agent_app_req_t *q = first_open(p);
    if (!q || q->sent_id) return;
    if (agent_ask_app(&p->agent, p->conf.name, q->req, now) == 0) q->sent_id = p->agent.pending_id;
}

/* q is over: its client's reply line. */
static void answer(agent_app_req_t *q, cJSON *o)
{
    q->answer = cJSON_PrintUnformatted(o);
    if (!q->answer) q->answer = xstrdup("{\"ok\":false,\"error\":\"out of memory\"}");
    cJSON_Delete(o);
}

static void answer_error(const pool_t *p, agent_app_req_t *q, const char *why)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "ok");
    char *e = xasprintf("pool %s: %s", p->conf.name, why);
    cJSON_AddStringToObject(o, "error", e);
    free(e);
    cJSON_AddStringToObject(o, "pool", p->conf.name);
    answer(q, o);
}

/* What a retry or forget did, for the log (control.c logged who asked). */
static void log_acted(const pool_t *p, const cJSON *o)
{
    const cJSON *done = cJSON_GetObjectItemCaseSensitive(o, "retried");
    const char *verb = "retried";
    if (!done) done = cJSON_GetObjectItemCaseSensitive(o, "forgotten"), verb = "forgot";
    if (!cJSON_IsArray(done)) return;
    log_info("app failer of pool %s: %s %d failed jobs (%d missing, %d not done)", p->conf.name, verb,
             cJSON_GetArraySize(done), cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "missing")),
             cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "not_done")));
}

void mapp_reply(master_t *m, pool_t *p, const agent_reply_t *r)
{
    (void)m;
    agent_app_req_t *q = first_open(p);
    if (!q || !q->sent_id || q->sent_id != r->id) return;
    if (!r->ok) {
        char why[400];
        snprintf(why, sizeof why, "the app agent says: %s", r->error);
        answer_error(p, q, why);
        return;
    }
    cJSON *o = r->app ? cJSON_Parse(r->app) : NULL;
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        answer_error(p, q, "the app agent's reply is not an object");
        return;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "pool");
    cJSON_AddStringToObject(o, "pool", p->conf.name);
    log_acted(p, o);
    answer(q, o);
}

/* mapp_tick's work on one pool. */
static void tick_pool(pool_t *p, int64_t now)
{
    for (agent_app_req_t *q; (q = first_open(p));) {
        if (q->sent_id && p->agent.pending_id == q->sent_id && p->agent.fd >= 0 && now < q->until_ms) break;
        if (q->sent_id && (p->agent.fd < 0 || p->agent.pending_id != q->sent_id))
            answer_error(p, q, "its app agent went away before it answered");
        else if (now >= q->until_ms)
            answer_error(p, q, "no answer from its app agent within 30 s (is the app booting?)");
        else
            break; /* waiting for a free agent */
        log_warn("pool %s: a request on the app's failer ended without an answer", p->conf.name);
    }
}

void mapp_tick(master_t *m, int64_t now)
{
    for (int i = 0; i < m->pools.n; i++) tick_pool(m->pools.v[i], now);
}

char *mapp_done(pool_t *p, uint64_t *client)
{
    agent_app_t *a = &p->app_reqs;
    for (int i = 0; i < a->n; i++) {
        if (!a->v[i].answer) continue;
        char *s = a->v[i].answer;
        *client = a->v[i].from.client;
        free(a->v[i].req);
        memmove(&a->v[i], &a->v[i + 1], sizeof a->v[0] * (size_t)(a->n - i - 1));
        a->n--;
        return s;
    }
    return NULL;
}

void mapp_free(agent_app_t *q)
{
    for (int i = 0; i < q->n; i++) {
        free(q->v[i].req);
        free(q->v[i].answer);
    }
    q->n = 0;
}
