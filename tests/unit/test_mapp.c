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

static void test_refusal(void **state)
{
    (void)state;
    const char *list = "{\"op\":\"failed\",\"limit\":5}", *show = "{\"op\":\"failed-show\",\"job\":\"a\"}";
    const char *retry = "{\"op\":\"failed-retry\",\"jobs\":[\"a\"]}", *forget = "{\"op\":\"failed-forget\",\"jobs\":[\"a\"]}";
    const char *all[] = {list, show, retry, forget};
    for (size_t i = 0; i < 4; i++) { /* the owner: everything */
        assert_null(mapp_refusal(all[i], true, false));
        assert_null(mapp_refusal(all[i], true, true));
    }
    /* another allowed peer: reads only with read_all, never retry or forget */
    assert_non_null(mapp_refusal(list, false, false));
    assert_non_null(mapp_refusal(show, false, false));
    assert_null(mapp_refusal(list, false, true));
    assert_null(mapp_refusal(show, false, true));
    assert_non_null(strstr(mapp_refusal(retry, false, true), "retry and forget"));
    assert_non_null(mapp_refusal(forget, false, true));
    assert_non_null(mapp_refusal("not json", false, true));
    assert_non_null(mapp_refusal(NULL, false, true));
}

static char *rebuilt(const char *json, char *err, size_t errn)
{
    cJSON *r = cJSON_Parse(json);
    char *s = mapp_request(r, err, errn);
    cJSON_Delete(r);
    return s;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusal),
        cmocka_unit_test(test_request_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
