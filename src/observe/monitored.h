/*
 * monitored.h - monitored tags (issue 31): a watched tag's job records are
 * kept apart from the recent-jobs list, longer and bounded in count. Keys,
 * on the history's connection and in its cluster hash tag (history.h):
 *
 *   <prefix>qpool:{qpool-jobs}:monitored   set of the watched tags (at most
 *                                          MONITORED_MAX; no expiry)
 *   <prefix>qpool:{qpool-jobs}:tag:<tag>   that tag's job records (JSON, as
 *                                          the recent list's, without the
 *                                          payload), newest first, trimmed
 *                                          to monitored_tag_jobs, expiring
 *                                          monitored_tag_retention after
 *                                          its last write
 *
 *   <prefix>qpool:{qpool-jobs}:mtoken:<t>  a forwarded batch's token (1 hour)
 *
 * Workers read the set and send each record of a watched tag apart; the
 * master forwards those in bounded batches (jobwatch.h). Other records
 * with tags (a tag watched before the workers read it) still go with the
 * recent list's write, as the master has it (one script, only when a
 * record has tags); forgetting a tag deletes its list.
 */
#ifndef QPOOL_MONITORED_H
#define QPOOL_MONITORED_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "observe/history.h"
#include "redis/rconn.h"

#define MONITORED_MAX 100              /* watched tags per connection */

/* The watched tags in an SMEMBERS reply of the set, sorted, at most
 * MONITORED_MAX (caller frees each and the array); -1 for no array. */
int monitored_tags_of(const redisReply *r, char ***out);

/* A tag one may watch: 1..JOBHIST_TAG_MAX bytes of valid UTF-8, no control byte. */
bool monitored_tag_ok(const char *tag);
/* Records (the recent list's JSON) into their watched tags' lists. 0, or
 * -1 when Redis was not reached. */
int monitored_add_jobs(rconn_t *c, const char *const *recs, int n, int max, int64_t retention_s);
/* A batch of the watched queue (jobwatch.h): tags[i] ('\n'-joined) and
 * recs[i] (without payload) into their watched tags' lists, in one script
 * call run once per token (a retry after a lost reply writes nothing). 0,
 * -1 when Redis was not reached, -3 when it answered an error that passes
 * (monitored_error_transient, in err, not logged; retry with the same
 * token), -2 when it
 * answered another error (logged). Records whose tag list Redis refused
 * (WRONGTYPE) are logged and the rest written: 0. */
/* An error reply that passes (Redis loading a dump, busy with a script, a
 * replica after a failover, a cluster resharding): LOADING, BUSY,
 * READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN. */
bool monitored_error_transient(const char *err);
int monitored_forward(rconn_t *c, const char *const *tags, const char *const *recs, int n, int max,
                      int64_t retention_s, const char *token, char *err, size_t errn);
/* The watched set's key on c (caller frees). */
char *monitored_set_key(const rconn_t *c);
/* The generation of the watched set (jobwatch_gen_of), read once;
 * JOBWATCH_GEN_NONE when Redis does not answer. */
uint64_t monitored_generation(rconn_t *c);
/* {"tags":[{"tag":T,"jobs":N}...]} by name, N the records its list holds;
 * NULL when Redis is unavailable. */
cJSON *monitored_list(rconn_t *c);
/* Watch (add) or stop watching a tag (its list deleted). 1 done, 0 nothing
 * to do (already so), -2 MONITORED_MAX reached, -1 Redis unavailable. */
int monitored_set(rconn_t *c, const char *tag, bool add);
/* A watched tag's records, newest first, filtered as history_jobs. */
cJSON *monitored_jobs(rconn_t *c, const char *tag, const job_filter_t *f);

#endif
