/*
 * qlimit_tags.h - the keys a job falls under for a per-key limit
 * (tag_prefix), read in C with exactly the rules of the limited pop's Lua
 * (QLIMIT_TAGS_LUA in qlimit.c): the payload's "tags" array when it has
 * elements (its first QTAGS_MAX, strings only), else the model tags
 * Class:id of the first 8 ModelIdentifiers in data.command (a collection:
 * up to QTAGS_MAX ids); a key is a tag less the prefix, at most QTAGS_KEYS
 * distinct ones per job and limit, and one longer than QTAGS_KEY_LEN bytes
 * or with a byte outside [A-Za-z0-9_.@-] is "h:<sha1 hex of it>".
 *
 * Used on a Redis Cluster, where C decides a job's limits before the
 * lease (worker/wlcluster.c). Pure: no I/O. Strings are counted (a PHP
 * serialized command holds NUL bytes).
 */
#ifndef QPOOL_QLIMIT_TAGS_H
#define QPOOL_QLIMIT_TAGS_H

#include <stddef.h>

#define QTAGS_MAX 50
#define QTAGS_KEYS 4
#define QTAGS_KEY_LEN 64

typedef struct {
    char *s; /* NUL-terminated too, but may hold NULs: use len */
    size_t len;
} qtag_t;

typedef struct {
    qtag_t *v;
    int n;
} qtags_t;

/* The job's tags (payload: a JSON object; anything else has none). */
void qtags_of_job(const char *payload, size_t len, qtags_t *out);
/* The keys of the tags for the prefix tp (non-empty): 0 to QTAGS_KEYS,
 * in the order the tags give them, without repeats. */
void qtags_keys(const qtags_t *tags, const char *tp, qtags_t *out);
void qtags_free(qtags_t *t);

#endif
