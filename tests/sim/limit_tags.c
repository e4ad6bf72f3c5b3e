/*
 * limit_tags.c - print the tags and per-key limit keys qpool's C reads
 * from a payload (src/redis/qlimit_tags.c), for the test that requires
 * them identical to the limited pop's Lua
 * (tests/integration/test_limits_tags_cluster.py).
 *
 *   limit-tags TAG_PREFIX < payload
 *
 * One line per tag, "T <hex of its bytes>", then one per key, "K <hex>".
 */
#include <stdio.h>
#include <stdlib.h>

#include "redis/qlimit_tags.h"

static void put(char what, const qtag_t *t)
{
    putchar(what);
    putchar(' ');
    for (size_t i = 0; i < t->len; i++) printf("%02x", (unsigned char)t->s[i]);
    putchar('\n');
}

int main(int argc, char **argv)
{
    if (argc != 2 || !argv[1][0]) {
        fprintf(stderr, "usage: limit-tags TAG_PREFIX < payload\n");
        return 2;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, stdin)) > 0)
        if ((n += got) == cap) buf = realloc(buf, cap *= 2);
    if (!buf) return 1;
    qtags_t tags, keys;
    qtags_of_job(buf, n, &tags);
    qtags_keys(&tags, argv[1], &keys);
    for (int i = 0; i < tags.n; i++) put('T', &tags.v[i]);
    for (int i = 0; i < keys.n; i++) put('K', &keys.v[i]);
    qtags_free(&tags);
    qtags_free(&keys);
    free(buf);
    return 0;
}
