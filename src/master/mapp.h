/*
 * mapp.h - a control client's requests on a pool's app failer, passed
 * through its app agent (agent.h): `qpool failed list|show|retry|forget
 * --app POOL` for the failures of app_driver pools, which the app's own
 * failer keeps (failed_jobs), as queue:failed, queue:retry and queue:forget
 * see them (php/src/AgentFailed.php).
 *
 * The control socket's "app" command names the pool and the request; the
 * request is rebuilt here from the keys each op takes (nothing else reaches
 * the app), queued on the pool (at most MAPP_QUEUE_MAX waiting, each client
 * within its share: mapp_admit), and sent
 * when its agent has none in flight (one is asked of the zygote when the
 * pool has none). The client waits: the agent's reply, or an error when the
 * agent went away or nothing answered within MAPP_WAIT_MS, is its one reply
 * line, which control.c takes with mapp_done (this file never calls the
 * control socket's code). Over HTTP: not yet (the dashboard's channel is one request at a
 * time, answered at once).
 */
#ifndef QPOOL_MAPP_H
#define QPOOL_MAPP_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/master.h"

#define MAPP_WAIT_MS 30000
#define MAPP_FIELD_MAX 1000 /* a filter's text, at most */

/* The ops on the app's failer. */
enum mapp_op { MAPP_OP_LIST, MAPP_OP_SHOW, MAPP_OP_RETRY, MAPP_OP_FORGET };
/* A control client's "request" object, parsed once (mapp_request): what
 * the master's checks read, and the text its agent gets. */
typedef struct {
    enum mapp_op op;
    const char *op_name;       /* its wire name: "failed", "failed-show", ... (static) */
    int njobs;                 /* retry, forget: how many ids */
    char *json;                /* the request rebuilt from the keys its op takes (JSON object text, heap) */
} mapp_req_t;

/* Whether r changes the app's failer (retry, forget) rather than reads it. */
static inline bool mapp_acts(const mapp_req_t *r)
{
    return r->op == MAPP_OP_RETRY || r->op == MAPP_OP_FORGET;
}

/* Pure: a control client's "request" object as out (free with
 * mapp_req_free): 0, or -1 with the reason in err. */
int mapp_request(const cJSON *req, mapp_req_t *out, char *err, size_t errn);
void mapp_req_free(mapp_req_t *r);
/* Pure: why a peer may not send req, or NULL when it may.
 * The app's failed payloads and exceptions carry what its jobs carry (e-mail
 * addresses, tokens): root and qpool's own user (owner) may do everything;
 * another allowed peer (control_user, control_group) only reads (failed,
 * failed-show), and only when read_all (http.read_without_token = "all",
 * what the HTTP socket's same peers need for payloads); retry and forget
 * stay with the owner. */
const char *mapp_refusal(const mapp_req_t *req, bool owner, bool read_all);
/* Each client's fair share of a pool's queue (MAPP_QUEUE_MAX places): one
 * request waiting per control connection, MAPP_PER_CLIENT per peer process
 * and per user other than root and qpool's own, and MAPP_DASH_PLACES kept
 * for the dashboard (its list and its action). */
#define MAPP_PER_CLIENT 2
#define MAPP_DASH_PLACES 2
/* Pure: why `from` may not queue one more request on pool `pool`'s queue q
 * (into why), or NULL when it may. */
const char *mapp_admit(const agent_app_t *q, const agent_app_from_t *from, const char *pool, char *why, size_t whyn);
/* Queue req (a mapp_req_t's json; taken) on the pool for `from` (its client is
 * control_reply_to's); 0, or -1 with err (the client is told then),
 * refused at once beyond its share (mapp_admit). */
int mapp_ask(master_t *m, const agent_app_from_t *from, const char *pool, char *req, int64_t now, char *err,
             size_t errn);
/* Control client `client` went away: its requests not sent yet leave the
 * queues (one in flight stays until answered; its answer is dropped), a
 * retry or forget among them logged as dropped. */
void mapp_forget_client(master_t *m, uint64_t client);
/* Has the pool requests waiting (its agent is kept up)? */
bool mapp_wanted(const pool_t *p);
/* Send the first waiting request when the agent is free. */
void mapp_send(pool_t *p, int64_t now);
/* The agent's reply to a passed-through request: to its client. */
void mapp_reply(master_t *m, pool_t *p, const agent_reply_t *r);
/* Once a master loop, before its other work (the monitor's pass keeps an
 * agent up for what is still waiting; control.c sends what is answered):
 * each pool's requests whose agent went away, or past MAPP_WAIT_MS, end
 * with an error. */
void mapp_tick(master_t *m, int64_t now);
/* The first answered request's reply (heap; caller frees) and its client,
 * taken off the queue; NULL when none is answered. */
char *mapp_done(pool_t *p, uint64_t *client);
/* Free what the pool's queue holds (the pool is freed). */
void mapp_free(agent_app_t *q);

#endif
