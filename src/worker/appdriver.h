/*
 * appdriver.h - pools with app_driver = true: the app's own Laravel queue
 * driver pops and runs the jobs (database, beanstalkd, sqs, any connection
 * the app registers), in the pool's PHP handler. The worker sends the
 * handler a `pop` request (docs/handler-protocol.md) and keeps supervising:
 * pause, graceful stop, memory, max_jobs, the timeout, crash backoff.
 * This file holds the request and the reading of what the handler reports:
 * pure functions, no I/O (the loop is worker.c's app_cycle).
 */
#ifndef QPOOL_APPDRIVER_H
#define QPOOL_APPDRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"

/* What the handler reports of the attempt it ran (its "job" object). */
typedef struct {
    char *name;          /* the job's class (resolveName), "?" if not said */
    char *queue;         /* the queue it came from, NULL if not said */
    char *id;            /* the driver's job id */
    char *uuid;          /* the payload's uuid, NULL if none */
    long attempts;       /* this attempt, from 1 (0: not said) */
    double wait_ms;      /* how long it waited since it became available; -1 unknown */
    double runtime_ms;   /* how long it ran in the handler; -1 unknown */
    long timeout_s;      /* the timeout its run gets (the job's, else the pool's; 0: none); -1 unknown */
    char *batch;         /* its Bus::batch id as the pop said it (unchecked), NULL if none */
} appd_job_t;

/* The members of a pop request (no braces): the pool's queue connection,
 * the queues not paused (skip: bit i = queue i paused), tries, backoff and
 * timeout as queue:work's options. NULL when every queue is paused. */
char *appdriver_request(const pool_conf_t *p, uint32_t skip);
/* Read the "job" object (JSON text, may be NULL): 0, or -1 when it is not
 * an object (*out then holds the defaults: name "?", unknowns). */
int appdriver_read_job(const char *json, appd_job_t *out);
void appd_job_free(appd_job_t *j);
/* The index of queue name among the pool's queues, else 0. */
int appdriver_queue_index(const pool_conf_t *p, const char *name);

#endif
