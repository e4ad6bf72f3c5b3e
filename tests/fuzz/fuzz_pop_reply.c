/*
 * fuzz_pop_reply.c - libFuzzer harness: the replies of the pop and
 * give-back scripts as hiredis sees them. The input is RESP bytes, read by
 * hiredis' own reader exactly as from a socket, then handed to
 * queue_parse_pop (src/queue.c) with a queue set of three queues and a
 * skip mask and prefetch count taken from the first byte. A reply of any
 * shape must be accepted with in-range queue indexes or refused, never
 * crash the worker.
 */
#include "fuzz.h"
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "redis/queue.h"

/* hiredis allocates an aggregate's element table as soon as it reads the
 * header: a header claiming 500 million elements exhausts hiredis' memory,
 * not our parser's. Such inputs are skipped. hiredis 1.x also reads RESP3's
 * aggregates (map %, set ~, push >, attribute |; 0.14 refuses them). */
static int huge_array(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!memchr("*%~>|", p[i], 5)) continue;
        unsigned long v = 0;
        for (size_t j = i + 1; j < n && p[j] >= '0' && p[j] <= '9' && v <= 4096; j++)
            v = v * 10 + (unsigned long)(p[j] - '0');
        if (v > 4096) return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static queue_set_t qs;
    static int ready;
    if (!ready) {
        char *names[] = {"high", "default", "low"};
        queue_set_init(&qs, "laravel_database_", names, 3);
        ready = 1;
    }
    pop_args_t a = {.now = 1700000000, .retry_after = 90, .migrate = true, .batch = 100,
                    .connection = "redis", .failed_limit = 1000,
                    .skip_mask = data[0] & 7u, .want = 1 + (data[0] >> 3)};
    if (huge_array(data + 1, size - 1)) return 0;
    redisReader *rd = redisReaderCreate();
    redisReaderFeed(rd, (const char *)data + 1, size - 1);
    void *reply = NULL;
    while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
        pop_result_t out;
        if (queue_parse_pop(&qs, &a, reply, &out)) {
            if (out.kind != POP_EMPTY && (out.qidx < 0 || out.qidx >= qs.nq)) abort();
            for (int i = 0; i < out.nextra; i++)
                if (out.extra[i].qidx < 0 || out.extra[i].qidx >= qs.nq) abort();
            pop_result_free(&out);
        }
        freeReplyObject(reply);
        reply = NULL;
    }
    redisReaderFree(rd);
    return 0;
}
