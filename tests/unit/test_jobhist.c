/* jobhist.c: the worker's ring of recent jobs, its datagrams, the master's
 * strict decoding and its pending list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "observe/batchjobs.h"
#include "observe/jobhist.h"
#include "observe/jobwatch.h"
#include "observe/monitored.h"
#include "core/util.h"
#include "observe/metrics.h"

static char *QUEUES[] = {"high", "default"};

static jobrec_t *add(jobhist_t *h, int outcome, const char *uuid)
{
    jobrec_t *r = jobhist_add(h, outcome);
    if (!r) return NULL;
    jobhist_set_str(r->uuid, sizeof r->uuid, uuid);
    jobhist_set_str(r->id, sizeof r->id, "id1");
    jobhist_set_str(r->name, sizeof r->name, "App\\Jobs\\X");
    jobhist_set_str(r->queue, sizeof r->queue, "high");
    r->attempt = 1;
    r->runtime_ms = 2.5;
    r->started_at = 1795459000000;
    r->finished_at = 1795459000003;
    return r;
}

/* Encode everything in the ring and decode it as the master would. */
static cJSON *round_trip(jobhist_t *h)
{
    cJSON *out = cJSON_CreateArray();
    size_t len;
    char *msg, err[128];
    while ((msg = jobhist_encode(h, &len))) {
        assert_true(jobhist_is_history(msg, len));
        assert_true(jobhist_decode(msg, len, QUEUES, 2, "w", "host1", "w#2", 4242, out, err, sizeof err) > 0);
        free(msg);
    }
    return out;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_round_trip_adds_what_the_master_knows(void **state)
{
    (void)state;
    jobhist_t h;
    jobhist_init(&h, 8, 1, false);
    jobrec_t *r = add(&h, OUTCOME_RELEASED, "u-1");
    jobhist_set_str(r->exception, sizeof r->exception, "RuntimeException: boom");
    jobhist_set_payload(r, "{\"uuid\":\"u-1\"}", 14);
    r->wait_ms = 12.5;
    add(&h, OUTCOME_DONE, "u-2");
    cJSON *out = round_trip(&h);
    assert_int_equal(cJSON_GetArraySize(out), 2);
    const cJSON *a = cJSON_GetArrayItem(out, 0), *b = cJSON_GetArrayItem(out, 1);
    assert_string_equal(str(a, "uuid"), "u-1");
    assert_string_equal(str(a, "outcome"), "released");
    assert_string_equal(str(a, "pool"), "w");
    assert_string_equal(str(a, "host"), "host1");
    assert_string_equal(str(a, "worker"), "w#2");
    assert_int_equal((int)cJSON_GetObjectItem(a, "pid")->valuedouble, 4242);
    assert_string_equal(str(a, "exception"), "RuntimeException: boom");
    assert_string_equal(str(a, "payload"), "{\"uuid\":\"u-1\"}");
    assert_true(cJSON_GetObjectItem(a, "wait_ms")->valuedouble == 12.5);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(b, "wait_ms")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(b, "exception")));
    assert_null(cJSON_GetObjectItem(b, "payload"));
    assert_null(jobhist_encode(&h, &(size_t){0})); /* sent: the ring is empty */
    cJSON_Delete(out);
    jobhist_free(&h);
}

static void test_the_ring_keeps_the_newest(void **state)
{
    (void)state;
    jobhist_t h;
    jobhist_init(&h, 4, 1, false);
    char u[16];
    for (int i = 0; i < 10; i++) {
        snprintf(u, sizeof u, "u-%d", i);
        add(&h, OUTCOME_DONE, u);
    }
    cJSON *out = round_trip(&h);
    assert_int_equal(cJSON_GetArraySize(out), 4);
    assert_string_equal(str(cJSON_GetArrayItem(out, 0), "uuid"), "u-6"); /* oldest kept first */
    assert_string_equal(str(cJSON_GetArrayItem(out, 3), "uuid"), "u-9");
    cJSON_Delete(out);
    jobhist_free(&h);
}

static void test_sampling_keeps_every_failure(void **state)
{
    (void)state;
    jobhist_t h;
    jobhist_init(&h, 64, 0.25, false);
    int kept = 0;
    for (int i = 0; i < 40; i++) kept += jobhist_add(&h, OUTCOME_DONE) != NULL;
    assert_int_equal(kept, 10);
    for (int o = OUTCOME_FAILED; o < OUTCOME_N; o++) assert_non_null(jobhist_add(&h, o));
    jobhist_free(&h);
    jobhist_init(&h, 0, 1, false); /* off */
    assert_null(jobhist_add(&h, OUTCOME_FAILED));
    jobhist_free(&h);
}

static void test_strings_and_payloads_are_cut_safely(void **state)
{
    (void)state;
    char dst[8];
    jobhist_set_str(dst, sizeof dst, "abcdef\xc3\xa9z"); /* e-acute across the cut */
    assert_string_equal(dst, "abcdef");
    jobhist_set_str(dst, sizeof dst, NULL);
    assert_string_equal(dst, "");
    jobhist_set_str(dst, sizeof dst, "a\nb\x01" "c");
    assert_string_equal(dst, "a b c");
    jobrec_t r = {0};
    char *big = malloc(JOBHIST_PAYLOAD_MAX + 100);
    memset(big, 'x', JOBHIST_PAYLOAD_MAX + 100);
    jobhist_set_payload(&r, big, JOBHIST_PAYLOAD_MAX + 100);
    assert_int_equal(r.payload_len, JOBHIST_PAYLOAD_MAX);
    assert_true(r.payload_truncated);
    free(r.payload);
    free(big);
}

static void test_big_payloads_split_datagrams(void **state)
{
    (void)state;
    jobhist_t h;
    jobhist_init(&h, 16, 1, false);
    char *p = malloc(JOBHIST_PAYLOAD_MAX);
    memset(p, '"', JOBHIST_PAYLOAD_MAX); /* escaping doubles it */
    for (int i = 0; i < 8; i++) jobhist_set_payload(add(&h, OUTCOME_RELEASED, "u"), p, JOBHIST_PAYLOAD_MAX);
    free(p);
    size_t len;
    char *msg;
    int datagrams = 0;
    while ((msg = jobhist_encode(&h, &len))) {
        assert_true(len < 2 * JOBHIST_DATAGRAM_MAX);
        datagrams++;
        free(msg);
    }
    assert_true(datagrams >= 2);
    jobhist_free(&h);
}

static const char *const BAD[] = {
    "",
    "[]",
    "{\"h\":{}}",
    "{\"h\":[],\"x\":1}",
    /* a queue not of the pool */
    "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"other\",\"a\":1,\"o\":\"done\",\"w\":-1,\"r\":0,\"s\":0,\"f\":0,\"e\":\"\"}]}",
    /* an unknown outcome */
    "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"great\",\"w\":-1,\"r\":0,\"s\":0,\"f\":0,\"e\":\"\"}]}",
    /* a fractional attempt, a negative runtime, a time past any clock */
    "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1.5,\"o\":\"done\",\"w\":-1,\"r\":0,\"s\":0,\"f\":0,\"e\":\"\"}]}",
    "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"done\",\"w\":-1,\"r\":-3,\"s\":0,\"f\":0,\"e\":\"\"}]}",
    "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"done\",\"w\":-1,\"r\":0,\"s\":1e300,\"f\":0,\"e\":\"\"}]}",
    /* a payload that is not a string */
    "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"done\",\"w\":-1,\"r\":0,\"s\":0,\"f\":0,\"e\":\"\",\"p\":{}}]}",
    /* a control byte (it would be stored as a sixfold \u00XX escape) */
    "{\"h\":[{\"u\":\"\\u0001\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"done\",\"w\":-1,\"r\":0,\"s\":0,\"f\":0,\"e\":\"\"}]}",
    /* a missing field */
    "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"done\",\"w\":-1,\"r\":0,\"s\":0,\"f\":0}]}",
};

static void test_refuses_what_it_did_not_write(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        cJSON *out = cJSON_CreateArray();
        char err[128] = "";
        assert_int_equal(jobhist_decode(BAD[i], strlen(BAD[i]), QUEUES, 2, "w", "h", "w#1", 1, out, err, sizeof err), -1);
        assert_true(err[0] != '\0');
        assert_int_equal(cJSON_GetArraySize(out), 0);
        cJSON_Delete(out);
    }
}

static void test_pending_keeps_the_newest_in_order(void **state)
{
    (void)state;
    jobhist_pending_t p;
    jobhist_pending_init(&p, 3);
    char buf[8];
    for (int i = 0; i < 5; i++) {
        snprintf(buf, sizeof buf, "r%d", i);
        jobhist_pending_add(&p, strdup(buf));
    }
    const char *v[8];
    assert_int_equal(jobhist_pending_list(&p, v, 8), 3);
    assert_string_equal(v[0], "r2");
    assert_string_equal(v[2], "r4");
    jobhist_pending_clear(&p);
    assert_int_equal(jobhist_pending_list(&p, v, 8), 0);
    jobhist_pending_free(&p);
}


/* Review #4: what a worker records is valid UTF-8 (strings and the payload
 * shown), and the master refuses a record that is not. */
static void test_records_are_valid_utf8(void **state)
{
    (void)state;
    char dst[16];
    jobhist_set_str(dst, sizeof dst, "X\xff\xfeY");
    assert_string_equal(dst, "X\xef\xbf\xbd\xef\xbf\xbdY");
    jobhist_set_str(dst, sizeof dst, "abcdefghijklm\xff"); /* the replacement would not fit: cut before it */
    assert_string_equal(dst, "abcdefghijklm");
    jobrec_t r = {0};
    jobhist_set_payload(&r, "{\"displayName\":\"A\xff\"}", 20);
    assert_string_equal(r.payload, "{\"displayName\":\"A\xef\xbf\xbd\"}");
    assert_int_equal(r.payload_len, strlen(r.payload));
    assert_false(r.payload_truncated);
    free(r.payload);
    r.payload = NULL;
    /* a long payload with stray bytes about the cut: valid, and no longer than the bound */
    char *big = malloc(JOBHIST_PAYLOAD_MAX + 100);
    memset(big, 'x', JOBHIST_PAYLOAD_MAX + 100);
    for (size_t i = JOBHIST_PAYLOAD_MAX - 6; i < JOBHIST_PAYLOAD_MAX + 6; i += 2) big[i] = (char)0xff;
    big[JOBHIST_PAYLOAD_MAX + 4] = (char)0xe2; /* a character the copy's cut splits */
    jobhist_set_payload(&r, big, JOBHIST_PAYLOAD_MAX + 100);
    assert_true(r.payload_truncated);
    assert_true(r.payload_len <= JOBHIST_PAYLOAD_MAX && r.payload_len == strlen(r.payload));
    assert_true(utf8_valid(r.payload, r.payload_len));
    free(r.payload);
    free(big);
    static const char bad[] = "{\"h\":[{\"u\":\"u\",\"i\":\"i\",\"n\":\"X\xff\",\"q\":\"high\",\"a\":1,\"o\":\"done\","
                              "\"w\":1,\"r\":1,\"s\":1,\"f\":2,\"e\":\"\"}]}";
    static const char good[] = "{\"h\":[{\"u\":\"u\",\"i\":\"i\",\"n\":\"X\xc3\xa9\",\"q\":\"high\",\"a\":1,\"o\":\"done\","
                               "\"w\":1,\"r\":1,\"s\":1,\"f\":2,\"e\":\"\"}]}";
    cJSON *out = cJSON_CreateArray();
    char err[128] = "";
    assert_int_equal(jobhist_decode(bad, strlen(bad), QUEUES, 2, "w", "h", "w#1", 1, out, err, sizeof err), -1);
    assert_int_equal(jobhist_decode(good, strlen(good), QUEUES, 2, "w", "h", "w#1", 1, out, err, sizeof err), 1);
    cJSON_Delete(out);
}

static void test_tags_are_bounded_repaired_and_deduplicated(void **state)
{
    (void)state;
    jobhist_t h;
    jobhist_init(&h, 4, 1, false);
    jobrec_t *r = add(&h, OUTCOME_DONE, "u-t");
    char long_tag[300];
    memset(long_tag, 'x', sizeof long_tag - 1);
    long_tag[sizeof long_tag - 1] = '\0';
    char json[1024];
    snprintf(json, sizeof json, "[\"App\\\\Models\\\\User:1\",\"a\\nb\",\"\",7,null,\"App\\\\Models\\\\User:1\",\"%s\",\"\xff\"]",
             long_tag);
    assert_int_equal(jobhist_add_tags(r, json, strlen(json)), 4); /* "", 7, null and the repeat skipped */
    assert_int_equal(jobhist_add_tags(r, "not json", 8), 0);
    assert_int_equal(jobhist_add_tags(r, "{\"a\":\"b\"}", 9), 0);
    char many[4096] = "[";
    for (int i = 0; i < 40; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "%s\"t%d\"", i ? "," : "", i);
    strcat(many, "]");
    assert_int_equal(jobhist_add_tags(r, many, strlen(many)), JOBHIST_TAGS_MAX - 4);
    cJSON *out = round_trip(&h);
    const cJSON *tags = cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "tags");
    assert_int_equal(cJSON_GetArraySize(tags), JOBHIST_TAGS_MAX);
    assert_string_equal(cJSON_GetArrayItem(tags, 0)->valuestring, "App\\Models\\User:1");
    assert_string_equal(cJSON_GetArrayItem(tags, 1)->valuestring, "a b"); /* one line */
    assert_int_equal(strlen(cJSON_GetArrayItem(tags, 2)->valuestring), JOBHIST_TAG_MAX);
    assert_string_equal(cJSON_GetArrayItem(tags, 3)->valuestring, "\xef\xbf\xbd"); /* U+FFFD */
    assert_string_equal(cJSON_GetArrayItem(tags, 4)->valuestring, "t0");
    cJSON_Delete(out);
    /* a record without tags has an empty list */
    add(&h, OUTCOME_DONE, "u-n");
    out = round_trip(&h);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "tags")), 0);
    cJSON_Delete(out);
    jobhist_free(&h);
    /* the master refuses tags a worker would not send */
    const char *bad[] = {"[\"a\\nb\"]", "[\"\"]", "[1]", "\"a\"", "[\"\xff\"]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char msg[512], err[128];
        snprintf(msg, sizeof msg,
                 "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"done\",\"w\":-1,"
                 "\"r\":0,\"s\":0,\"f\":0,\"e\":\"\",\"g\":%s}]}", bad[i]);
        cJSON *o = cJSON_CreateArray();
        assert_int_equal(jobhist_decode(msg, strlen(msg), QUEUES, 2, "w", "h", "w#1", 1, o, err, sizeof err), -1);
        cJSON_Delete(o);
    }
}

static void test_silenced_by_class_tag_or_the_job(void **state)
{
    (void)state;
    jobhist_t h;
    jobhist_init(&h, 4, 1, false);
    char *classes[] = {"App\\Jobs\\Y", "App\\Jobs\\X", NULL}, *tags[] = {"noisy", NULL};
    jobrec_t *r = add(&h, OUTCOME_DONE, "u-s"); /* App\Jobs\X */
    assert_true(jobhist_silenced(r, classes, NULL, false));
    assert_false(jobhist_silenced(r, NULL, tags, false));
    assert_false(jobhist_silenced(r, NULL, NULL, false));
    assert_true(jobhist_silenced(r, NULL, NULL, true));
    jobhist_add_tags(r, "[\"noisy\"]", 9);
    assert_true(jobhist_silenced(r, NULL, tags, false));
    r->outcome = OUTCOME_FAILED; /* a failure is never silenced */
    assert_false(jobhist_silenced(r, classes, tags, true));
    jobhist_free(&h);
}

/* Watched records (jobwatch.h): a copy without payload, sent as {"m"},
 * removed only by jobhist_drop; the ring's copy says "k". */
static void test_watched_copies_go_apart_and_stay_until_dropped(void **state)
{
    (void)state;
    jobhist_t h, wq;
    jobhist_init(&h, 8, 1, false);
    jobhist_init(&wq, 4, 1, false);
    jobrec_t *r = add(&h, OUTCOME_DONE, "u-1");
    jobhist_add_tags(r, "[\"vip\",\"x\"]", 11);
    jobhist_set_payload(r, "{\"uuid\":\"u-1\"}", 14);
    char **set = xcalloc(2, sizeof *set);
    set[0] = xstrdup("vip"), set[1] = xstrdup("a");
    jobwatch_set_t ws = {0};
    assert_true(jobwatch_set_take(&ws, set, 2));
    assert_true(jobwatch_meets(&ws, r->tags, r->tags_len));
    assert_false(jobwatch_meets(&ws, "vi\nvipp\nx", 10));
    jobhist_add_copy(&wq, r);
    r->apart = true;
    size_t len;
    int taken;
    char *msg = jobhist_encode_keep(&wq, "m", &len, &taken);
    assert_int_equal(taken, 1);
    assert_int_equal(wq.n, 1); /* kept until sent */
    assert_true(jobhist_is_history(msg, len) && jobhist_is_watched(msg, len));
    assert_null(strstr(msg, "\"p\":")); /* no payload */
    cJSON *out = cJSON_CreateArray();
    bool apart[JOBHIST_PAGE];
    char err[128];
    assert_int_equal(jobhist_decode_ex(msg, len, QUEUES, 2, "w", "h", "w#1", 1, out, apart, err, sizeof err), 1);
    free(msg);
    assert_false(apart[0]);
    jobhist_drop(&wq, taken);
    assert_int_equal(wq.n, 0);
    msg = jobhist_encode(&h, &len);
    assert_false(jobhist_is_watched(msg, len));
    assert_int_equal(jobhist_decode_ex(msg, len, QUEUES, 2, "w", "h", "w#1", 1, out, apart, err, sizeof err), 1);
    assert_true(apart[0]); /* "k": the ring's copy */
    free(msg);
    cJSON_Delete(out);
    jobwatch_set_free(&ws);
    jobhist_free(&h);
    jobhist_free(&wq);
}

/* The master's queue: a batch keeps its records and token until done, a
 * full queue refuses the newest, the pending list leaves apart ones out of
 * the monitored pass. */
static void test_watched_queue_batches_are_stable_and_bounded(void **state)
{
    (void)state;
    jobwatch_queue_t q;
    jobwatch_queue_init(&q, 3);
    const char *tags[3], *recs[3];
    assert_int_equal(jobwatch_queue_batch(&q, 2, "t0", tags, recs), 0);
    for (int i = 0; i < 4; i++) jobwatch_queue_add(&q, xstrdup("vip"), xasprintf("r%d", i));
    assert_int_equal(q.n, 3);
    assert_int_equal((int)q.dropped, 1); /* r3 refused, r0..r2 kept */
    assert_int_equal(jobwatch_queue_batch(&q, 2, "t1", tags, recs), 2);
    assert_string_equal(recs[0], "r0");
    /* not taken (Redis did not answer): the same batch and token again */
    assert_int_equal(jobwatch_queue_batch(&q, 2, "t2", tags, recs), 2);
    assert_string_equal(q.token, "t1");
    assert_string_equal(recs[1], "r1");
    jobwatch_queue_done(&q);
    assert_int_equal(q.n, 1);
    assert_true(jobwatch_queue_add(&q, xstrdup("vip"), xstrdup("r4")));
    assert_int_equal(jobwatch_queue_batch(&q, 5, "t3", tags, recs), 2);
    assert_string_equal(q.token, "t3");
    assert_string_equal(recs[0], "r2");
    assert_string_equal(recs[1], "r4");
    jobwatch_queue_done(&q);
    assert_int_equal(q.n, 0);
    assert_int_equal((int)q.bytes, 0);
    /* a batch is bounded in bytes too: JOBWATCH_STEP_BYTES, never past it
     * but with its one record (1.5 MB + 1.5 MB would be 3 MB) */
    for (int i = 0; i < 3; i++) {
        char *big = xcalloc(1, 1500001);
        memset(big, 'x', 1500000);
        assert_true(jobwatch_queue_add(&q, xstrdup("vip"), big));
    }
    assert_int_equal(jobwatch_queue_batch(&q, 3, "t4", tags, recs), 1);
    jobwatch_queue_done(&q);
    assert_int_equal(jobwatch_queue_batch(&q, 3, "t5", tags, recs), 1);
    jobwatch_queue_done(&q);
    assert_int_equal(jobwatch_queue_batch(&q, 3, "t6", tags, recs), 1);
    jobwatch_queue_done(&q);
    char *half = xcalloc(1, 1000001), *other = xcalloc(1, 1000001);
    memset(half, 'x', 1000000);
    memset(other, 'x', 1000000);
    assert_true(jobwatch_queue_add(&q, xstrdup("vip"), half));
    assert_true(jobwatch_queue_add(&q, xstrdup("vip"), other));
    assert_int_equal(jobwatch_queue_batch(&q, 3, "t7", tags, recs), 2); /* 2 MB less 6 bytes: both */
    jobwatch_queue_free(&q);

    jobhist_pending_t p;
    jobhist_pending_init(&p, 4);
    jobhist_pending_add(&p, xstrdup("a"));
    jobhist_pending_add_apart(&p, xstrdup("b"), true);
    jobhist_pending_add(&p, xstrdup("c"));
    const char *out[4];
    assert_int_equal(jobhist_pending_list(&p, out, 4), 3);
    assert_int_equal(jobhist_pending_list_near(&p, out, 4), 2);
    assert_string_equal(out[1], "c");
    jobhist_pending_free(&p);
}

/* A watched batch Redis answers with an error that passes waits (its token
 * kept) instead of counting towards its drop (review S1). */
static void test_transient_errors_make_a_batch_wait(void **state)
{
    (void)state;
    const char *passing[] = {"LOADING Redis is loading the dataset in memory",
                             "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
                             "READONLY You can't write against a read only replica.",
                             "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
                             "TRYAGAIN Multiple keys request during rehashing of slot", "CLUSTERDOWN The cluster is down",
                             "LOADING"};
    for (size_t i = 0; i < sizeof passing / sizeof *passing; i++) assert_true(monitored_error_transient(passing[i]));
    const char *refusals[] = {"WRONGTYPE Operation against a key holding the wrong kind of value",
                              "OOM command not allowed when used memory > 'maxmemory'.", "BUSYKEY Target key name already exists.",
                              "ERR Error running script", "NOSCRIPT No matching script", "", "LOADINGX"};
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) assert_false(monitored_error_transient(refusals[i]));
    assert_false(monitored_error_transient(NULL));
}

/* A job's batch id (issue 31, brief batchdone): checked, carried to the
 * master's record only when it has one, and copied short onto its batch's
 * list unless the attempt was released. */
static void test_batch_ids_are_checked_carried_and_copied(void **state)
{
    (void)state;
    char longest[JOBHIST_BATCH_MAX + 2];
    memset(longest, 'a', sizeof longest);
    longest[JOBHIST_BATCH_MAX] = '\0';
    assert_true(jobhist_batch_ok("9a8f7e6d-1c2b-4a3d-8e9f-0a1b2c3d4e5f") && jobhist_batch_ok(longest));
    longest[JOBHIST_BATCH_MAX] = 'a';
    longest[JOBHIST_BATCH_MAX + 1] = '\0';
    const char *bad[] = {longest, "", NULL, "a b", "<b>", "a\"b", "a/b", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_false(jobhist_batch_ok(bad[i]));

    jobhist_t h;
    jobhist_init(&h, 4, 1, true);
    jobrec_t *r = add(&h, OUTCOME_DONE, "u1");
    snprintf(r->batch, sizeof r->batch, "b-1");
    jobhist_set_payload(r, "{\"x\":1}", 7);
    add(&h, OUTCOME_DONE, "u2");
    snprintf(add(&h, OUTCOME_RELEASED, "u3")->batch, sizeof r->batch, "b-1");
    cJSON *out = round_trip(&h);
    assert_int_equal(cJSON_GetArraySize(out), 3);
    assert_string_equal(str(cJSON_GetArrayItem(out, 0), "batch"), "b-1");
    assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(out, 1), "batch"));

    char *recs[3], *batch = NULL, *entry = NULL;
    for (int i = 0; i < 3; i++) recs[i] = cJSON_PrintUnformatted(cJSON_GetArrayItem(out, i));
    assert_true(batchjobs_entry(recs[0], &batch, &entry));
    assert_string_equal(batch, "b-1");
    cJSON *e = cJSON_Parse(entry);
    assert_string_equal(str(e, "uuid"), "u1");
    assert_string_equal(str(e, "name"), "App\\Jobs\\X");
    assert_string_equal(str(e, "outcome"), "done");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "runtime_ms")));
    assert_null(cJSON_GetObjectItemCaseSensitive(e, "payload"));
    assert_null(cJSON_GetObjectItemCaseSensitive(e, "batch"));
    cJSON_Delete(e);
    free(batch);
    free(entry);
    assert_false(batchjobs_entry(recs[1], &batch, &entry)); /* no batch */
    assert_false(batchjobs_entry(recs[2], &batch, &entry)); /* released: it runs again */
    for (int i = 0; i < 3; i++) free(recs[i]);
    cJSON_Delete(out);
    jobhist_free(&h);

    /* a worker's record with a batch id it could not have written: refused */
    const char *forged = "{\"h\":[{\"u\":\"\",\"i\":\"\",\"n\":\"\",\"q\":\"high\",\"a\":1,\"o\":\"done\",\"w\":-1,"
                         "\"r\":0,\"s\":0,\"f\":0,\"e\":\"\",\"b\":\"<script>\"}]}";
    char err[128] = "";
    out = cJSON_CreateArray();
    assert_int_equal(jobhist_decode(forged, strlen(forged), QUEUES, 2, "w", "h", "w#1", 1, out, err, sizeof err), -1);
    cJSON_Delete(out);
}

/* The watched set's generation (issue 31): one for no tag, a hash of the
 * sorted tags otherwise (never 0 or 1, tag bounds count); and what a
 * worker does with the generation its slot has. */
static void test_watched_generation_and_the_workers_action(void **state)
{
    (void)state;
    char *ab[] = {"a", "b"}, *joined[] = {"ab"}, *abc[] = {"a", "b", "c"};
    assert_int_equal((int)jobwatch_gen_of(NULL, 0), JOBWATCH_GEN_EMPTY);
    uint64_t g1 = jobwatch_gen_of(ab, 2), g2 = jobwatch_gen_of(joined, 1), g3 = jobwatch_gen_of(abc, 3);
    assert_true(g1 > JOBWATCH_GEN_EMPTY && g2 > JOBWATCH_GEN_EMPTY && g3 > JOBWATCH_GEN_EMPTY);
    assert_true(g1 != g2 && g1 != g3 && g2 != g3);
    assert_true(g1 == jobwatch_gen_of(ab, 2));
    /* no generation published: today's poll, when due */
    assert_int_equal(jobwatch_gen_action(JOBWATCH_GEN_NONE, JOBWATCH_GEN_NONE, true), JOBWATCH_READ);
    assert_int_equal(jobwatch_gen_action(JOBWATCH_GEN_NONE, g1, false), JOBWATCH_KEEP);
    /* no tag watched: nothing read, ever; a set it had is emptied */
    assert_int_equal(jobwatch_gen_action(JOBWATCH_GEN_EMPTY, JOBWATCH_GEN_NONE, true), JOBWATCH_CLEAR);
    assert_int_equal(jobwatch_gen_action(JOBWATCH_GEN_EMPTY, g1, false), JOBWATCH_CLEAR);
    assert_int_equal(jobwatch_gen_action(JOBWATCH_GEN_EMPTY, JOBWATCH_GEN_EMPTY, true), JOBWATCH_KEEP);
    /* a set: read once when it changed, then kept however due */
    assert_int_equal(jobwatch_gen_action(g1, JOBWATCH_GEN_EMPTY, true), JOBWATCH_READ);
    assert_int_equal(jobwatch_gen_action(g1, g1, true), JOBWATCH_KEEP);
    assert_int_equal(jobwatch_gen_action(g3, g1, true), JOBWATCH_READ);
    assert_int_equal(jobwatch_gen_action(g3, g1, false), JOBWATCH_KEEP); /* a failed read waits for its poll */
}

/* A worker labels its set with the generation of the tags it read, not
 * the one its slot had: the set {x,vip} published, then "remove vip; add
 * vip" within one master tick, a worker reading {x} in between kept {x}
 * as {x,vip} for good (the master's next read publishes the same
 * generation). It must read again. */
static void test_a_worker_keeps_the_generation_of_what_it_read(void **state)
{
    (void)state;
    char *xv[] = {"vip", "x"}, *x[] = {"x"};
    uint64_t g_xv = jobwatch_gen_of(xv, 2);
    uint64_t have = jobwatch_gen_read(g_xv, x, 1);
    assert_true(have == jobwatch_gen_of(x, 1));
    assert_int_equal(jobwatch_gen_action(g_xv, have, true), JOBWATCH_READ);
    /* read right: kept until it changes */
    have = jobwatch_gen_read(g_xv, xv, 2);
    assert_int_equal(jobwatch_gen_action(g_xv, have, true), JOBWATCH_KEEP);
    /* read empty under a set: read again; none published: it polls */
    assert_int_equal(jobwatch_gen_action(g_xv, jobwatch_gen_read(g_xv, NULL, 0), true), JOBWATCH_READ);
    assert_int_equal((int)jobwatch_gen_read(JOBWATCH_GEN_NONE, xv, 2), JOBWATCH_GEN_NONE);
}

/* A batch unanswered goes again with its token only while the token
 * surely lives in Redis (issue 31: a resend after the token's 10 minutes
 * wrote a batch twice): within JOBWATCH_RESEND_MS of its first send, half
 * the token's life; past it the batch is dropped. A new batch's clock
 * starts anew. */
static void test_a_batch_goes_again_only_while_its_token_lives(void **state)
{
    (void)state;
    assert_true(jobwatch_resend(0));
    assert_true(jobwatch_resend(600000)); /* the old token's 10 minutes: still safe */
    assert_true(jobwatch_resend(JOBWATCH_RESEND_MS));
    assert_false(jobwatch_resend(JOBWATCH_RESEND_MS + 1));
    assert_false(jobwatch_resend(24LL * 3600 * 1000));
    assert_true(2LL * JOBWATCH_RESEND_MS <= JOBWATCH_TOKEN_MS);
    assert_int_equal(atoll(JOBWATCH_TOKEN_MS_STR), JOBWATCH_TOKEN_MS); /* what the script sets */
    jobwatch_queue_t q;
    jobwatch_queue_init(&q, 4);
    const char *tags[4], *recs[4];
    jobwatch_queue_add(&q, xstrdup("vip"), xstrdup("r0"));
    jobwatch_queue_add(&q, xstrdup("vip"), xstrdup("r1"));
    assert_int_equal(jobwatch_queue_batch(&q, 1, "t0", tags, recs), 1);
    assert_int_equal((int)q.first_ms, 0);
    q.first_ms = 1000;
    jobwatch_queue_done(&q);
    assert_int_equal((int)q.first_ms, 0); /* the next batch's clock has not started */
    assert_int_equal(jobwatch_queue_batch(&q, 1, "t1", tags, recs), 1);
    q.first_ms = 2000;
    jobwatch_queue_clear(&q);
    assert_int_equal((int)q.first_ms, 0);
    jobwatch_queue_free(&q);
}

/* Only a send whose outcome is unknown (a reply lost on a live
 * connection: the script may have run and set its token) starts a batch's
 * 30 minutes (review of jwgen, MUST 2: an error reply started them, and a
 * batch Redis answered READONLY or LOADING for 30 minutes, never written,
 * was dropped). An answer after a lost reply does not move the clock. */
static void test_only_a_lost_reply_starts_a_batchs_clock(void **state)
{
    (void)state;
    jobwatch_queue_t q;
    jobwatch_queue_init(&q, 4);
    const char *tags[4], *recs[4];
    jobwatch_queue_add(&q, xstrdup("vip"), xstrdup("r0"));
    assert_int_equal(jobwatch_queue_batch(&q, 1, "t0", tags, recs), 1);
    const int64_t t0 = 5000, late = t0 + JOBWATCH_RESEND_MS + 1;
    jobwatch_queue_sent(&q, false, -1, t0); /* no connection: never sent */
    jobwatch_queue_sent(&q, true, -3, t0);  /* READONLY, LOADING...: the script did not run */
    jobwatch_queue_sent(&q, true, -2, t0);  /* another error */
    assert_int_equal((int)q.first_ms, 0);
    assert_false(jobwatch_queue_expired(&q, late)); /* it waits: Redis never wrote it */
    jobwatch_queue_sent(&q, true, -1, t0); /* lost */
    assert_int_equal((int)q.first_ms, (int)t0);
    jobwatch_queue_sent(&q, true, -3, t0 + 1000); /* an answer after it: the clock stays */
    jobwatch_queue_sent(&q, true, -1, t0 + 2000); /* lost again: stays */
    assert_int_equal((int)q.first_ms, (int)t0);
    assert_false(jobwatch_queue_expired(&q, t0 + JOBWATCH_RESEND_MS)); /* it goes again, with its token */
    assert_string_equal(q.token, "t0");
    assert_true(jobwatch_queue_expired(&q, late));
    jobwatch_queue_done(&q); /* the caller drops it */
    assert_false(jobwatch_queue_expired(&q, late));
    jobwatch_queue_free(&q);
}

/* A failed read of the watched set by the master (a blip: one reply late
 * drops its connection) kept no generation, and every worker went back to
 * its 1 s poll, 2 reads each (review of jwgen, SHOULD 7): the last one is
 * kept for JOBWATCH_GEN_HOLD failed reads in a row, then none. */
static void test_the_master_keeps_the_generation_across_a_blip(void **state)
{
    (void)state;
    char *x[] = {"x"};
    uint64_t g = jobwatch_gen_of(x, 1), pub = JOBWATCH_GEN_NONE;
    int misses = 0;
    pub = jobwatch_gen_next(pub, g, &misses);
    assert_true(pub == g);
    pub = jobwatch_gen_next(pub, JOBWATCH_GEN_NONE, &misses); /* one failed read */
    assert_true(pub == g);
    pub = jobwatch_gen_next(pub, g, &misses); /* answered again: the count starts anew */
    for (int i = 1; i < JOBWATCH_GEN_HOLD; i++) {
        pub = jobwatch_gen_next(pub, JOBWATCH_GEN_NONE, &misses);
        assert_true(pub == g);
    }
    pub = jobwatch_gen_next(pub, JOBWATCH_GEN_NONE, &misses); /* Redis down: the workers poll */
    assert_int_equal((int)pub, JOBWATCH_GEN_NONE);
    for (int i = 0; i < 5; i++) pub = jobwatch_gen_next(pub, JOBWATCH_GEN_NONE, &misses);
    assert_int_equal((int)pub, JOBWATCH_GEN_NONE);
    assert_true(jobwatch_gen_next(pub, JOBWATCH_GEN_EMPTY, &misses) == JOBWATCH_GEN_EMPTY);
    assert_int_equal(misses, 0);
    misses = 0; /* none published yet (the master's first read failed): none */
    assert_int_equal((int)jobwatch_gen_next(JOBWATCH_GEN_NONE, JOBWATCH_GEN_NONE, &misses), JOBWATCH_GEN_NONE);
}

/* A job's batch id from its payload when its handler gave none (review of
 * batchdone, MUST 2: a timed-out or crashed attempt): the top-level
 * "batchId" of the serialized command, never a nested job's, read safely. */
static void test_batch_ids_from_the_payloads_command(void **state)
{
    (void)state;
    static const struct {
        const char *what, *payload, *want;
    } cases[] = {
        {"top", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":3:{s:7:\\\"\\u0000*\\u0000name\\\";s:8:\\\"\\u00e9\\ud83d\\ude00\\\"}\\\";s:5:\\\"tries\\\";i:3;s:7:\\\"batchId\\\";s:36:\\\"9a8f7e6d-1c2b-4a3d-8e9f-0a1b2c3d4e5f\\\";}\"}}", "9a8f7e6d-1c2b-4a3d-8e9f-0a1b2c3d4e5f"},
        {"after nested ones", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":7:{s:4:\\\"next\\\";O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":1:{s:7:\\\"batchId\\\";s:7:\\\"inner-1\\\";}s:7:\\\"chained\\\";a:1:{i:0;s:57:\\\"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":1:{s:7:\\\"batchId\\\";s:7:\\\"inner-1\\\";}\\\";}s:4:\\\"enum\\\";E:11:\\\"Suit:Hearts\\\";s:1:\\\"c\\\";C:11:\\\"ArrayObject\\\":21:{x:i:0;a:0:{};m:a:0:{}}s:1:\\\"f\\\";d:0.5;s:1:\\\"g\\\";b:1;s:7:\\\"batchId\\\";s:5:\\\"top-2\\\";}\"}}", "top-2"},
        {"only nested", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":3:{s:4:\\\"next\\\";O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":1:{s:7:\\\"batchId\\\";s:7:\\\"inner-1\\\";}s:7:\\\"chained\\\";a:1:{i:0;s:57:\\\"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":1:{s:7:\\\"batchId\\\";s:7:\\\"inner-1\\\";}\\\";}s:7:\\\"batchId\\\";N;}\"}}", NULL},
        {"a value, not a name", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":2:{s:4:\\\"name\\\";s:7:\\\"batchId\\\";s:1:\\\"x\\\";s:3:\\\"abc\\\";}\"}}", NULL},
        {"not an id", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":1:{s:7:\\\"batchId\\\";s:3:\\\"<b>\\\";}\"}}", NULL},
        {"cut short", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":2:{s:5:\\\"tries\\\";i:3;s:7:\\\"batchId\\\";s:36:\\\"9a8f7e6d-1c2b-4a3d-8e9f-0a1\"}}", NULL},
        {"a lying length", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"O:17:\\\"App\\\\Jobs\\\\BatchJob\\\":2:{s:1:\\\"x\\\";s:99:\\\"ab\\\";s:7:\\\"batchId\\\";s:36:\\\"9a8f7e6d-1c2b-4a3d-8e9f-0a1b2c3d4e5f\\\";}\"}}", NULL},
        {"not an object", "{\"uuid\": \"u\", \"data\": {\"commandName\": \"App\\\\Jobs\\\\BatchJob\", \"command\": \"a:2:{s:7:\\\"batchId\\\";s:36:\\\"9a8f7e6d-1c2b-4a3d-8e9f-0a1b2c3d4e5f\\\";}\"}}", NULL},
        {"no command", "{\"uuid\":\"u\",\"data\":{\"batchId\":\"b-1\"}}", NULL},
        {"no batch", "{\"uuid\":\"u\",\"data\":{\"command\":\"O:1:\\\"J\\\":0:{}\"}}", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[JOBHIST_BATCH_MAX + 1] = "";
        bool got = jobhist_payload_batch(cases[i].payload, strlen(cases[i].payload), out);
        if (got != (cases[i].want != NULL) || (got && strcmp(out, cases[i].want)))
            fail_msg("%s: %s (\"%s\")", cases[i].what, got ? "found" : "none", out);
        if (!got) assert_string_equal(out, "");
    }
    /* every cut of a payload that has one (ASan: nothing read past it):
     * the id only once the whole command is in */
    const char *p = cases[1].payload, *end = strstr(p, "}\"}");
    for (size_t n = 0; n < strlen(p); n++) {
        char *cut = xmalloc(n ? n : 1), out[JOBHIST_BATCH_MAX + 1] = "";
        memcpy(cut, p, n);
        bool got = jobhist_payload_batch(cut, n, out);
        assert_true(got ? n > (size_t)(end - p) + 2 && !strcmp(out, "top-2") : !out[0]);
        free(cut);
    }
}

/* `qpool batches ID` with times out of range (a forged entry of a batch's
 * list, an odd row): a dash, not a crash (review of batchdone, SHOULD 7). */
static void test_batch_print_takes_any_time(void **state)
{
    (void)state;
    cJSON *rep = cJSON_Parse("{\"batch\":{\"id\":\"b\",\"name\":\"n\",\"pool\":\"p\",\"created_at\":1e300,"
                             "\"finished_at\":-1e300,\"cancelled_at\":1700000000},\"jobs_kept\":3,\"jobs\":["
                             "{\"uuid\":\"u1\",\"name\":\"J\",\"outcome\":\"done\",\"finished_at\":1e300},"
                             "{\"uuid\":\"u2\",\"name\":\"J\",\"outcome\":\"done\",\"finished_at\":9e18},"
                             "{\"uuid\":\"u3\",\"name\":\"J\",\"outcome\":\"done\",\"finished_at\":1700000000000}]}");
    assert_non_null(rep);
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stdout);
    int saved = dup(1);
    dup2(fileno(f), 1);
    cli_batch_print(rep);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char out[4096] = "";
    rewind(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    cJSON_Delete(rep);
    assert_non_null(strstr(out, "created    -\n"));
    assert_non_null(strstr(out, "finished   -\n"));
    assert_non_null(strstr(out, "cancelled  2023-11-14 22:13:20 UTC\n"));
    const char *u1 = strstr(out, "\nu1 "), *u2 = strstr(out, "\nu2 "), *u3 = strstr(out, "\nu3 ");
    assert_true(u1 && u2 && u3);
    assert_memory_equal(strchr(u1 + 1, '\n') - 2, " -", 2);
    assert_memory_equal(strchr(u2 + 1, '\n') - 2, " -", 2);
    assert_memory_equal(strchr(u3 + 1, '\n') - 19, "2023-11-14 22:13:20", 19);
}

/* The master's log limit on lost batch-list entries (review of batchfix,
 * MUST 1): a cause longer than the old 96-byte copy (an ACL refusal is
 * 106 bytes), given twice, logs once; a new cause, or a minute later, again.
 * Causes past the kept length compare as cut. */
static void test_a_long_cause_is_logged_once_a_minute(void **state)
{
    (void)state;
    char cause[121], other[121], longer[300];
    memset(cause, 'c', 120);
    cause[120] = '\0';
    memcpy(other, cause, sizeof other);
    other[119] = 'd';
    memset(longer, 'c', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    batchjobs_note_t n = {0};
    assert_true(batchjobs_note_due(&n, cause, 1000, 60000));
    assert_false(batchjobs_note_due(&n, cause, 2000, 60000));
    assert_false(batchjobs_note_due(&n, cause, 60999, 60000));
    assert_true(batchjobs_note_due(&n, cause, 61000, 60000));
    assert_true(batchjobs_note_due(&n, other, 61001, 60000));
    assert_false(batchjobs_note_due(&n, other, 61002, 60000));
    assert_true(batchjobs_note_due(&n, longer, 61003, 60000));
    assert_false(batchjobs_note_due(&n, longer, 61004, 60000));
    assert_int_equal((int)strlen(n.err), BATCHJOBS_ERRN - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_adds_what_the_master_knows),
        cmocka_unit_test(test_records_are_valid_utf8),
        cmocka_unit_test(test_the_ring_keeps_the_newest),
        cmocka_unit_test(test_sampling_keeps_every_failure),
        cmocka_unit_test(test_strings_and_payloads_are_cut_safely),
        cmocka_unit_test(test_big_payloads_split_datagrams),
        cmocka_unit_test(test_refuses_what_it_did_not_write),
        cmocka_unit_test(test_pending_keeps_the_newest_in_order),
        cmocka_unit_test(test_tags_are_bounded_repaired_and_deduplicated),
        cmocka_unit_test(test_silenced_by_class_tag_or_the_job),
        cmocka_unit_test(test_watched_copies_go_apart_and_stay_until_dropped),
        cmocka_unit_test(test_watched_queue_batches_are_stable_and_bounded),
        cmocka_unit_test(test_transient_errors_make_a_batch_wait),
        cmocka_unit_test(test_batch_ids_are_checked_carried_and_copied),
        cmocka_unit_test(test_watched_generation_and_the_workers_action),
        cmocka_unit_test(test_a_batch_goes_again_only_while_its_token_lives),
        cmocka_unit_test(test_a_worker_keeps_the_generation_of_what_it_read),
        cmocka_unit_test(test_only_a_lost_reply_starts_a_batchs_clock),
        cmocka_unit_test(test_the_master_keeps_the_generation_across_a_blip),
        cmocka_unit_test(test_batch_ids_from_the_payloads_command),
        cmocka_unit_test(test_batch_print_takes_any_time),
        cmocka_unit_test(test_a_long_cause_is_logged_once_a_minute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
