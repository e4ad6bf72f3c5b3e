/*
 * jobwatch.h - every job of a watched tag, not a sample (issue 31; pure: no
 * I/O, no clock). The recent-jobs list is a sample under load (a worker
 * sends its newest JOBHIST_WORKER_KEEP records a flush, the master keeps
 * job_history_size a pass); a watched tag's list is not:
 *
 *  - the master reads the watched set (monitored.h, at most MONITORED_MAX
 *    tags) once a second per connection and publishes its generation
 *    (jobwatch_gen_of) in each of its workers' scoreboard slots; a worker
 *    reads the set only when that generation changed, and sends nothing
 *    while no tag is watched (jobwatch_gen_action). A worker without a
 *    generation (0: none published yet, or the master's reads failed
 *    JOBWATCH_GEN_HOLD times in a row) reads the set every JOBWATCH_POLL_MS. It keeps a copy of each record whose
 *    tags meet it (no payload) in a queue of its own, JOBWATCH_WORKER_KEEP
 *    records past its ring; it sends them as {"m":[...]} datagrams and
 *    removes them only once sent (what the master cannot take yet waits);
 *  - the master keeps them per pool in a queue (jobwatch_queue_t) of at
 *    most JOBWATCH_QUEUE_MAX records and JOBWATCH_QUEUE_BYTES, and each
 *    pass forwards the oldest JOBWATCH_STEP of them (JOBWATCH_STEP_BYTES at
 *    most) in one script call to the watched tags' lists; the rest wait for
 *    the next pass. A batch
 *    keeps its token until Redis answered it, and the script runs a token
 *    once: a reply lost after the write does not write the batch twice.
 *    The token lives JOBWATCH_TOKEN_MS in Redis from its first run; a
 *    batch goes again only within JOBWATCH_RESEND_MS of its first send
 *    whose reply was lost (half the token's life), and is dropped, logged,
 *    past that (jobwatch_resend): a resend never finds its token expired.
 *    A batch Redis answered with an error, or never reached, ran no script
 *    and has no token: it waits (within the queue's bounds);
 *  - the ring's copy of such a record says so ("k"), and the master's
 *    recent-jobs pass leaves it out of the monitored lists.
 *
 * Past these bounds records are dropped (counted), never the master's
 * pass made longer.
 */
#ifndef QPOOL_JOBWATCH_H
#define QPOOL_JOBWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JOBWATCH_POLL_MS 1000          /* a worker reads the watched set this often */
#define JOBWATCH_CONN_TIMEOUT_S 0.5    /* an app_driver pool's worker waits on Redis at most this (s) */
#define JOBWATCH_WORKER_KEEP 2048      /* a worker's watched records not yet sent, at most */
#define JOBWATCH_QUEUE_MAX 20000       /* a pool's watched records the master holds, at most */
#define JOBWATCH_QUEUE_BYTES (8 << 20) /* and their bytes */
#define JOBWATCH_STEP 1000             /* a pool's records forwarded a pass (one script call) */
#define JOBWATCH_STEP_BYTES (2 << 20)  /* and their bytes, at most (one record at least) */
#define JOBWATCH_TOKEN_MS 3600000      /* a batch's token lives this long in Redis (1 hour) */
#define JOBWATCH_STR_(x) #x
#define JOBWATCH_STR(x) JOBWATCH_STR_(x)
#define JOBWATCH_TOKEN_MS_STR JOBWATCH_STR(JOBWATCH_TOKEN_MS) /* the same, for the script */
#define JOBWATCH_RESEND_MS (30 * 60 * 1000) /* a batch goes again at most this long after its first send */
#define JOBWATCH_TRIES 3               /* a batch Redis refuses (an error) goes this often, then is dropped */
#define JOBWATCH_SEND_AT 64            /* a worker sends as soon as this many wait */

/* The watched tags a worker knows, sorted. */
typedef struct {
    char **v;
    int n;
} jobwatch_set_t;

void jobwatch_set_free(jobwatch_set_t *s);
/* Take tags (n strings and the array, the caller's no more) as the set;
 * true when it differs from the last. */
bool jobwatch_set_take(jobwatch_set_t *s, char **tags, int n);
/* Does one of the '\n'-joined tags (len bytes) meet the set? */
bool jobwatch_meets(const jobwatch_set_t *s, const char *tags, size_t len);

/* The generation of a watched set (n sorted tags): JOBWATCH_GEN_EMPTY
 * when no tag is watched, else a 64-bit hash of the tags (never 0 or 1). */
#define JOBWATCH_GEN_NONE 0  /* no generation published: the worker polls */
#define JOBWATCH_GEN_EMPTY 1 /* no tag watched */
uint64_t jobwatch_gen_of(char *const *tags, int n);

/* What a worker does about its watched set, given the generation published
 * in its slot, the one its set has, and whether its poll is due. */
enum jobwatch_act {
    JOBWATCH_KEEP,  /* nothing: the set it has is the current one */
    JOBWATCH_READ,  /* read the set (SMEMBERS) */
    JOBWATCH_CLEAR, /* no tag is watched: empty its set, read nothing */
};
enum jobwatch_act jobwatch_gen_action(uint64_t published, uint64_t have, bool due);
/* The generation the master publishes after its read of the set gave
 * read (JOBWATCH_GEN_NONE: Redis did not answer) while published was out:
 * a failed read keeps the last one for JOBWATCH_GEN_HOLD reads in a row
 * (a blip of the master's connection does not send every worker back to
 * its 1 s poll, 2 reads each), then none. misses: the failed reads in a
 * row (the caller's, 0 at first). */
#define JOBWATCH_GEN_HOLD 3
uint64_t jobwatch_gen_next(uint64_t published, uint64_t read, int *misses);
/* The generation a worker's set has after it read n tags (sorted, capped,
 * as the master hashes them) while published was in its slot: that of the
 * tags it read, not the published one (the set may have changed between
 * the two reads and back: it is read again); JOBWATCH_GEN_NONE when none
 * was published (it polls). */
uint64_t jobwatch_gen_read(uint64_t published, char *const *tags, int n);

/* The master's queue of one pool's watched records: (tags '\n'-joined,
 * record JSON) pairs, oldest first. */
typedef struct {
    char **tags, **recs;
    int cap, head, n;
    size_t bytes;
    uint64_t dropped;                  /* refused: the queue was full */
    char token[37];                    /* the batch at the head has this token; "": none yet */
    int batch;                         /* its size */
    int refused;                       /* times Redis refused it */
    uint64_t waits;                    /* passes in a row Redis answered an error that passes */
    int64_t first_ms;                  /* monotonic: the head batch's first send whose outcome is unknown; 0: none */
} jobwatch_queue_t;

/* May a batch unanswered since its first send age_ms ago go again (with
 * its token)? False past JOBWATCH_RESEND_MS: its token could have expired
 * in Redis, so a resend could write it twice; the caller drops it. */
bool jobwatch_resend(int64_t age_ms);
/* A send of the head batch that began at sent_ms (monotonic) ended with
 * rv (monitored_forward's answer), on a live connection when up. Only an
 * unknown outcome (-1 while up: the reply was lost, the script may have
 * run and set its token) starts the batch's clock; an answer (an error:
 * the script did not run) or no connection does not, and nothing moves a
 * clock once started (an earlier send may have set the token). */
void jobwatch_queue_sent(jobwatch_queue_t *q, bool up, int rv, int64_t sent_ms);
/* Is the head batch past its resends (jobwatch_resend of its clock)? The
 * caller drops it. */
bool jobwatch_queue_expired(const jobwatch_queue_t *q, int64_t now_ms);

void jobwatch_queue_init(jobwatch_queue_t *q, int cap);
void jobwatch_queue_free(jobwatch_queue_t *q);
/* Takes tags and rec; false (both freed, counted) when full. */
bool jobwatch_queue_add(jobwatch_queue_t *q, char *tags, char *rec);
/* The head batch: the same records (at most max) and token until
 * jobwatch_queue_done; fills tags/recs, returns the count. new_token
 * is used when a new batch begins. */
int jobwatch_queue_batch(jobwatch_queue_t *q, int max, const char *new_token, const char **tags, const char **recs);
/* Redis took the head batch: remove it. */
void jobwatch_queue_done(jobwatch_queue_t *q);
/* Drop every record (the counts stay). */
void jobwatch_queue_clear(jobwatch_queue_t *q);

#endif
