/*
 * control.h - the control socket: a Unix stream socket speaking
 * newline-delimited JSON, served by the master's event loop. Every request
 * is one JSON object on one line ({"cmd":"status"}, {"cmd":"pause",...});
 * every reply is one line {"ok":true,...} or {"ok":false,"error":"..."}.
 * Peers are checked with SO_PEERCRED and SO_PEERGROUPS: root, qpool's own
 * user, control_user and members of control_group are allowed; everyone
 * else gets one refusal line and is closed. Garbage, oversized or unknown
 * requests get an error reply; nothing a client sends can stop or block the
 * master. The socket's state lives in control_t (control.c).
 */
#ifndef QPOOL_CONTROL_H
#define QPOOL_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/mapp.h"
#include "master/master.h"

/* A request, parsed and checked (pure: no master state needed). */
enum ctl_cmd {
    CTL_STATUS = 0, CTL_PAUSE, CTL_CONTINUE, CTL_SCALE, CTL_RESTART, CTL_RELOAD, CTL_TERMINATE, CTL_STOP_JOB,
    CTL_BATCHES, CTL_BATCH_RETRY, CTL_APP, CTL_NCMDS
};
typedef struct {
    enum ctl_cmd cmd;
    bool verbose;              /* status */
    bool raw;                  /* status: histogram buckets, exits, reconnects (for /metrics) */
    bool wait;                 /* terminate */
    char **pools, **queues;    /* pause, continue: none means everything */
    int npools, nqueues;
    char **classes;            /* pause, continue: job classes, across the fleet (alone) */
    int nclasses;
    char *pool;                /* scale (required), restart (NULL: every pool) */
    int n;                     /* scale: workers, -1 for auto */
    char *by;                  /* who asked (HTTP actions), for the log */
    char *uuid;                /* stop-job (required): the running job's uuid; batch-retry (required): the batch id */
    mapp_req_t app;            /* app (required, with pool): the request on the app's failer, parsed (mapp_request) */
} ctl_request_t;

/* 0 and r filled (free with ctl_request_free), or -1 with err filled for
 * the client: not JSON, no or unknown cmd, bad arguments. */
int ctl_parse_request(const char *line, size_t len, int max_workers, ctl_request_t *r, char *err, size_t errn);
void ctl_request_free(ctl_request_t *r);
const char *ctl_cmd_name(enum ctl_cmd c);

int control_listen(master_t *m);
void control_event(master_t *m, int fd, uint32_t events);
void control_close(master_t *m, bool unlink_socket);
/* Periodic work: idle and refused clients closed, progress lines to
 * terminate --wait clients. */
void control_tick(master_t *m, int64_t now_ms);
/* Serve fd (the master's end of the HTTP process's socket pair, non-
 * blocking) as a control client: never idle-closed; status, pause,
 * continue, scale and restart (the dashboard's actions, logged with who
 * asked), never reload or terminate. Closed when the peer closes it. 0, or
 * -1 (fd not taken). */
int control_adopt(master_t *m, int fd);
/* When the adopted channel fd last sent anything (monotonic ms; 0: never),
 * or -1 when no adopted client has it: the HTTP process's heartbeat. */
int64_t control_heard(master_t *m, int fd);
/* Called by the master when its last child is gone (terminate --wait). */
void control_notify_waiters(master_t *m);

#endif
