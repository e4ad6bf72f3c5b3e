/*
 * agent_wire.h - the wire between the master and a pool's app agent (pure).
 *
 * The agent (php/src/Agent.php) is a long-lived process forked by the
 * pool's zygote: it holds the booted app and answers what the C side cannot
 * read itself (Laravel's signals in any cache store; an app_driver pool's sizes, job batches;
 * the failer). One JSON object per line each way, over a stream socket the
 * master owns:
 *
 *   master -> agent  {"id":7,"op":"signals","restart_key":"illuminate:queue:restart","queues":["redis:default"]}
 *   agent -> master  {"id":7,"ok":true,"restart":"1764380000","paused_all":false,"paused":[false]}
 *                    {"id":7,"ok":false,"error":"..."}
 *   master -> agent  {"id":8,"op":"sizes","connection":"database","queues":["default"]}
 *   agent -> master  {"id":8,"ok":true,"sizes":[{"ready":12,"delayed":null,"reserved":null}]}
 *   master -> agent  {"id":9,"op":"batches","limit":50}
 *   agent -> master  {"id":9,"ok":true,"batches":[{"id":"9a1c...","name":"import","total":10,"pending":2,
 *                     "failed":2,"created_at":1764380000,"finished_at":null,"cancelled_at":null,
 *                     "failed_ids":["uuid",...]}]}
 *   master -> agent  {"id":10,"op":"batch-failed","batch":"9a1c..."}
 *   agent -> master  {"id":10,"ok":true,"batch":"9a1c...","held":["uuid",...],"missing":["uuid",...],
 *                     "failer_uuids":true}
 *   master -> agent  {"id":11,"op":"batch-retry","batch":"9a1c...","jobs":["uuid",...]}
 *   agent -> master  {"id":11,"ok":true,"batch":"9a1c...","retried":["uuid",...],"missing":["uuid",...]}
 *   master -> agent  {"id":12,"op":"failed","limit":20,...}  (failed, failed-show, failed-retry,
 *                    failed-forget: a control client's request passed through, mapp.h)
 *   agent -> master  {"id":12,"ok":true,"failed":[...],"total":3}  (passed back to the client as it is)
 *   agent, unasked   {"id":0,"ok":true,"op":"hello","pid":123,"laravel":"8.83.27"}
 *
 * Every reply is checked here before the master uses it: a bounded line,
 * valid UTF-8, a JSON object, an integer id, known types for the keys an
 * op needs, bounded strings and arrays; keys this master does not know are
 * ignored (a newer agent may add them). A new op adds an enum value, its
 * fields in agent_reply_t and its checks in agent_wire_parse.
 */
#ifndef QPOOL_AGENT_WIRE_H
#define QPOOL_AGENT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_LINE_MAX 65536        /* a reply line, newline included, at most */
#define AGENT_VALUE_MAX 256         /* a value the agent reports (a restart stamp) */
#define AGENT_QUEUES_MAX 30         /* queues in one request (redis_conf.h: QPOOL_MAX_QUEUES) */
#define AGENT_ID_MAX 9007199254740991ULL /* 2^53 - 1: exact in a JSON number */

enum agent_op {
    AGENT_OP_HELLO = 0,             /* the agent's first line, unasked (id 0) */
    AGENT_OP_SIGNALS,               /* queue:restart and the queue:pause keys through the app's cache store */
    AGENT_OP_SIZES,                 /* each queue's size through the app's queue connection */
    AGENT_OP_BATCHES,               /* the newest job batches in the app's BatchRepository */
    AGENT_OP_BATCH_RETRY,           /* queue:retry-batch: failed jobs of a batch back onto their queues */
    AGENT_OP_BATCH_FAILED,          /* which failed jobs of a batch the app's failer holds (before a retry) */
    AGENT_OP_APP,                   /* a control client's request on the app's failer, passed through (mapp.h) */
};
#define AGENT_NOPS 7

#define AGENT_BATCHES_MAX 50        /* batches in one reply, at most */
#define AGENT_BATCH_ID_MAX 64       /* a batch id or a failed job's uuid: [A-Za-z0-9._:-], 1..64 bytes */
#define AGENT_BATCH_NAME_MAX 200    /* a batch name, cut (at a character) to this many bytes */
#define AGENT_BATCH_FAILED_MAX 100  /* failed job ids kept of one batch (its "failed" count says all) */

typedef struct {
    uint64_t id;
    enum agent_op op;               /* the op it answers (the op asked of agent_wire_parse) */
    bool ok;
    char error[256];                /* !ok: what the agent said (repaired, cut) */
    /* AGENT_OP_HELLO */
    int pid;
    char laravel[64];
    /* AGENT_OP_SIGNALS */
    bool has_restart;               /* false: the key is not set */
    char restart[AGENT_VALUE_MAX + 1];
    bool paused_all;
    int npaused;
    bool paused[AGENT_QUEUES_MAX];
    /* AGENT_OP_SIZES: per queue asked; -1 where the driver cannot say
     * (ready is the driver's size() when it has no pendingSize()) */
    int nsizes;
    int64_t ready[AGENT_QUEUES_MAX], delayed[AGENT_QUEUES_MAX], reserved[AGENT_QUEUES_MAX];
    /* AGENT_OP_BATCHES (ok): the batches as a JSON array the master can
     * show as it is (heap; agent_reply_free): each {"id","name","total",
     * "pending","processed","failed","progress","created_at","finished_at",
     * "cancelled_at","failed_ids"}, ids checked, names valid UTF-8 and cut,
     * counts in range, processed and progress worked out here as Laravel's
     * Batch does; a batch whose id is not an id is left out (skipped). */
    char *batches;
    int nbatches, skipped;
    /* AGENT_OP_BATCH_RETRY (ok): the batch, the failed jobs asked that the
     * app pushed back (retried) and those it did not (missing). Of
     * AGENT_OP_BATCH_FAILED: the batch's failed jobs the app's failer holds
     * (in retried, from "held") and those it does not (missing: qpool's
     * failed store may). Heap, agent_reply_free. */
    char batch[AGENT_BATCH_ID_MAX + 1];
    char **retried, **missing;
    int nretried, nmissing;
    /* AGENT_OP_BATCH_FAILED: the app's failer keeps jobs by uuid, so a
     * missing job was retried or forgotten in the app ("failer_uuids";
     * absent: false) */
    bool failer_uuids;
    /* AGENT_OP_APP (ok): the reply object without its id, as JSON text
     * (heap; agent_reply_free): for the client, which checks what it uses */
    char *app;
} agent_reply_t;

/* One request line (with its newline; caller frees), or NULL when it would
 * not fit AGENT_LINE_MAX. signals: restart_key ("" or NULL: none asked) and
 * queues, "connection:queue" names (the pause keys asked). sizes: key is
 * the Laravel queue connection, queues its queue names. batches: nqueues
 * is the limit (1..AGENT_BATCHES_MAX). batch-failed: key is the batch id.
 * batch-retry: key is the batch id, queues the job ids to retry (at most
 * AGENT_BATCH_FAILED_MAX). */
char *agent_wire_request(uint64_t id, enum agent_op op, const char *restart_key, const char *const *queues,
                         int nqueues);

/* The request line of a passed-through op (AGENT_OP_APP): the JSON object
 * req (mapp_request's text: not empty, no "id" of its own) with "id" added
 * at its end, not parsed again; NULL when req is not such an object or the
 * line would not fit. */
char *agent_wire_app_request(uint64_t id, const char *req);

/* Parse one reply line (without its newline) to a request of op `op` (or
 * the hello, id 0). 0 and *out filled; -1 with a reason in err. */
int agent_wire_parse(const char *line, size_t len, enum agent_op op, int nqueues, agent_reply_t *out, char *err,
                     size_t errlen);
/* Free what a parsed reply holds on the heap (batches, retried, missing);
 * safe on any reply agent_wire_parse filled, and twice. */
void agent_reply_free(agent_reply_t *r);
/* An id as batches and their failed jobs have: 1..AGENT_BATCH_ID_MAX bytes
 * of [A-Za-z0-9._:-] (safe in a URL path and a log line). */
bool agent_batch_id_ok(const char *s);

#endif
