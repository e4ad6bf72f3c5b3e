/* mapp.c: who may send an app failer request (review freshapp #2), the
 * request rebuilt from each op's keys (review freshapp #6), and a gone
 * client's unsent requests leaving the queue (review w5a #5, #6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/mapp.h"
#include "master/master.h"
#include "master/pool.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *rebuilt(const char *json, char *err, size_t errn);

static void test_refusal(void **state)
{
    (void)state;
    const mapp_req_t list = {.op = MAPP_OP_LIST}, show = {.op = MAPP_OP_SHOW};
    const mapp_req_t retry = {.op = MAPP_OP_RETRY}, forget = {.op = MAPP_OP_FORGET};
    const mapp_req_t *all[] = {&list, &show, &retry, &forget};
    for (size_t i = 0; i < 4; i++) { /* the owner: everything */
        assert_null(mapp_refusal(all[i], true, false));
        assert_null(mapp_refusal(all[i], true, true));
    }
    /* another allowed peer: reads only with read_all, never retry or forget */
    assert_non_null(mapp_refusal(&list, false, false));
    assert_non_null(mapp_refusal(&show, false, false));
    assert_null(mapp_refusal(&list, false, true));
    assert_null(mapp_refusal(&show, false, true));
    assert_non_null(strstr(mapp_refusal(&retry, false, true), "retry and forget"));
    assert_non_null(mapp_refusal(&forget, false, true));
    assert_non_null(mapp_refusal(NULL, false, true));
    char err[300];
    assert_null(rebuilt("not json", err, sizeof err)); /* never a request to refuse or pass */
}

static char *rebuilt(const char *json, char *err, size_t errn)
{
    cJSON *r = cJSON_Parse(json);
    mapp_req_t q;
    int rv = mapp_request(r, &q, err, errn);
    cJSON_Delete(r);
    return rv < 0 ? NULL : q.json;
}

static void test_request_keys(void **state)
{
    (void)state;
    char err[300];
    char *s = rebuilt("{\"op\":\"failed\",\"limit\":5,\"evil\":\"x\",\"text\":\"boom\"}", err, sizeof err);
    assert_non_null(s);
    assert_null(strstr(s, "evil")); /* unknown keys are dropped */
    assert_non_null(strstr(s, "\"text\":\"boom\""));
    free(s);
    assert_null(rebuilt("{\"op\":\"flush\"}", err, sizeof err));
    assert_null(rebuilt("{\"op\":\"failed-retry\",\"jobs\":[\"a b\"]}", err, sizeof err)); /* a bad id */
    assert_null(rebuilt("{\"op\":\"failed-retry\",\"jobs\":[]}", err, sizeof err));
    char ids[2048] = "{\"op\":\"failed-forget\",\"jobs\":[";
    for (int i = 0; i < 101; i++) snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s\"j%d\"", i ? "," : "", i);
    strcat(ids, "]}");
    assert_null(rebuilt(ids, err, sizeof err)); /* 101 ids */
    ids[strlen(ids) - 9] = '\0';                 /* cut the last id: 100 */
    strcat(ids, "]}");
    s = rebuilt(ids, err, sizeof err);
    assert_non_null(s);
    free(s);
}

/* Queue a request of `from` on q when mapp_admit lets it: true when it did. */
static bool queued(agent_app_t *q, agent_app_from_t from)
{
    char why[300];
    if (mapp_admit(q, &from, "appq", why, sizeof why)) return false;
    q->v[q->n++] = (agent_app_req_t){.from = from};
    return true;
}

static void test_fair_share(void **state)
{
    (void)state;
    agent_app_t q = {0};
    char why[300];
    /* one process flooding over many connections: two places, one a connection */
    assert_true(queued(&q, (agent_app_from_t){.client = 1, .pid = 100, .uid = 0, .owner = true}));
    agent_app_from_t again = {.client = 1, .pid = 100, .uid = 0, .owner = true};
    assert_non_null(strstr(mapp_admit(&q, &again, "appq", why, sizeof why), "this connection"));
    assert_true(queued(&q, (agent_app_from_t){.client = 2, .pid = 100, .uid = 0, .owner = true}));
    agent_app_from_t third = {.client = 3, .pid = 100, .uid = 0, .owner = true};
    assert_non_null(strstr(mapp_admit(&q, &third, "appq", why, sizeof why), "process 100 has 2 requests"));
    /* the same user's other process has its own; another user at most two */
    assert_true(queued(&q, (agent_app_from_t){.client = 4, .pid = 200, .uid = 0, .owner = true}));
    assert_true(queued(&q, (agent_app_from_t){.client = 5, .pid = 300, .uid = 1000}));
    assert_true(queued(&q, (agent_app_from_t){.client = 6, .pid = 301, .uid = 1000}));
    agent_app_from_t user = {.client = 7, .pid = 302, .uid = 1000};
    assert_non_null(strstr(mapp_admit(&q, &user, "appq", why, sizeof why), "uid 1000 has 2 requests"));
    /* the control clients fill MAPP_QUEUE_MAX - MAPP_DASH_PLACES at most */
    assert_true(queued(&q, (agent_app_from_t){.client = 8, .pid = 400, .uid = 0, .owner = true}));
    assert_int_equal(q.n, MAPP_QUEUE_MAX - MAPP_DASH_PLACES);
    agent_app_from_t late = {.client = 9, .pid = 500, .uid = 0, .owner = true};
    assert_non_null(strstr(mapp_admit(&q, &late, "appq", why, sizeof why), "requests waiting on its app agent"));
    /* the dashboard's list and action still have their places */
    assert_true(queued(&q, (agent_app_from_t){.client = UINT64_MAX, .owner = true, .dash = true}));
    assert_true(queued(&q, (agent_app_from_t){.client = UINT64_MAX - 1, .owner = true, .dash = true}));
    assert_int_equal(q.n, MAPP_QUEUE_MAX);
    agent_app_from_t dash = {.client = UINT64_MAX, .owner = true, .dash = true};
    assert_non_null(mapp_admit(&q, &dash, "appq", why, sizeof why));
}

/* Queue a request on p's queue as it stands: sent (its agent request), answered, or not yet. */
static void put(pool_t *p, agent_app_from_t from, uint64_t sent_id, bool answered)
{
    char req[64];
    snprintf(req, sizeof req, "{\"n\":%d}", p->app_reqs.n);
    p->app_reqs.v[p->app_reqs.n++] = (agent_app_req_t){.from = from, .req = xstrdup(req), .sent_id = sent_id,
                                                       .answer = answered ? xstrdup("{}") : NULL};
}

static const char *req_at(const pool_t *p, int k)
{
    return p->app_reqs.v[k].req;
}

/* mapp_forget_client(m, client) with stderr in a file: what it logged. */
static char *forget_logged(master_t *m, uint64_t client)
{
    char path[] = "/tmp/qpool-test-mapp-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    mapp_forget_client(m, client);
    dup2(saved, 2);
    close(saved);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return xstrdup(buf);
}

static void test_forget_client(void **state)
{
    (void)state;
    pool_t a = {.conf = {.name = "a"}}, b = {.conf = {.name = "b"}};
    pool_t *v[] = {&a, &b};
    master_t m = {.pools = {.v = v, .n = 2}};
    agent_app_from_t five = {.client = 5, .pid = 50, .uid = 1000}, six = {.client = 6, .pid = 60, .uid = 0};
    agent_app_from_t retry = five, dash = {.client = 5, .owner = true, .dash = true, .act = "failed-retry"};
    retry.act = "failed-retry";
    retry.njobs = 3;
    put(&a, five, 11, false);   /* 0: client 5's, sent: stays */
    put(&a, five, 0, false);    /* 1: client 5's, unsent: goes */
    put(&a, six, 0, false);     /* 2: another client's: stays */
    put(&a, five, 12, true);    /* 3: client 5's, answered: stays */
    put(&a, retry, 0, false);   /* 4: client 5's unsent retry: goes, logged */
    put(&a, dash, 0, false);    /* 5: the dashboard's (its serial 5 too here): stays */
    put(&a, five, 0, false);    /* 6: client 5's, unsent, the last: goes */
    put(&b, five, 0, false);    /* b's 0: client 5's, unsent: goes */
    put(&b, six, 0, false);     /* b's 1: stays */
    char *log = forget_logged(&m, 5);
    assert_int_equal(a.app_reqs.n, 4);
    assert_string_equal(req_at(&a, 0), "{\"n\":0}");
    assert_string_equal(req_at(&a, 1), "{\"n\":2}");
    assert_string_equal(req_at(&a, 2), "{\"n\":3}");
    assert_string_equal(req_at(&a, 3), "{\"n\":5}");
    assert_int_equal(b.app_reqs.n, 1);
    assert_string_equal(req_at(&b, 0), "{\"n\":1}");
    /* the dropped retry is logged once (its audit line said it was asked), a dropped read is not */
    assert_non_null(strstr(log, "app failed-retry of 3 failed jobs on pool a asked by uid 1000 dropped"));
    assert_null(strstr(strstr(log, "dropped") + 1, "dropped"));
    free(log);
    /* another client gone: nothing of its is unsent but b's */
    log = forget_logged(&m, 6);
    assert_int_equal(a.app_reqs.n, 3);
    assert_int_equal(b.app_reqs.n, 0);
    assert_string_equal(log, "");
    free(log);
    for (int k = 0; k < a.app_reqs.n; k++) {
        free(a.app_reqs.v[k].req);
        free(a.app_reqs.v[k].answer);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusal),
        cmocka_unit_test(test_request_keys),
        cmocka_unit_test(test_fair_share),
        cmocka_unit_test(test_forget_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
