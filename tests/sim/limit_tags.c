/*
 * limit_tags.c - print the tags and per-key limit keys qpool's C reads
 * from payloads (src/redis/qlimit_tags.c), for the test that requires
 * them identical to the limited pop's Lua
 * (tests/integration/test_limits_tags_cluster.py).
 *
 *   limit-tags TAG_PREFIX... < records
 *
 * A record is "<length in bytes>\n<payload>". For each: one line per tag,
 * "T <hex of its bytes>", one per key of each prefix, "K <prefix number,
 * from 0> <hex>", then ".".
 */
#include <stdio.h>
#include <stdlib.h>

#include "redis/qlimit_tags.h"

static void put(const char *what, const qtag_t *t)
{
    fputs(what, stdout);
    for (size_t i = 0; i < t->len; i++) printf("%02x", (unsigned char)t->s[i]);
    putchar('\n');
}

static void one(const char *buf, size_t n, int ntp, char **tp)
{
    qtags_t tags, keys;
    qtags_of_job(buf, n, &tags);
    for (int i = 0; i < tags.n; i++) put("T ", &tags.v[i]);
    for (int p = 0; p < ntp; p++) {
        char what[32];
        snprintf(what, sizeof what, "K %d ", p);
        qtags_keys(&tags, tp[p], &keys);
        for (int i = 0; i < keys.n; i++) put(what, &keys.v[i]);
        qtags_free(&keys);
    }
    qtags_free(&tags);
    puts(".");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!argv[i][0]) argc = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: limit-tags TAG_PREFIX... < records\n");
        return 2;
    }
    size_t n;
    while (scanf("%zu", &n) == 1 && getchar() == '\n') {
        char *buf = malloc(n + 1);
        if (!buf || fread(buf, 1, n, stdin) != n) return 1;
        one(buf, n, argc - 1, argv + 1);
        free(buf);
    }
    return 0;
}
