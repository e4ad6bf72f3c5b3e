/* mapp.c: who may send an app failer request (review freshapp #2), and the
 * request rebuilt from each op's keys (review freshapp #6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/mapp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusal),
        cmocka_unit_test(test_request_keys),
        cmocka_unit_test(test_fair_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
