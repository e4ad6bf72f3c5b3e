/* batch_filter.c: the filters of GET /api/batches (issue 32). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "http/batch_filter.h"

#include <string.h>

#define LIST "[" \
    "{\"id\":\"b1\",\"name\":\"Import INV-4711\",\"failed\":0,\"created_at\":1000,\"finished_at\":null,\"cancelled_at\":null}," \
    "{\"id\":\"b2\",\"name\":\"nightly export\",\"failed\":2,\"created_at\":2000,\"finished_at\":2100,\"cancelled_at\":null}," \
    "{\"id\":\"b3\",\"name\":\"import users\",\"failed\":1,\"created_at\":3000,\"finished_at\":null,\"cancelled_at\":3050}," \
    "{\"id\":\"b4-inv\",\"name\":null,\"failed\":0,\"created_at\":4000,\"finished_at\":4001,\"cancelled_at\":null}]"

/* The ids f keeps, joined. */
static const char *kept(const bfilter_t *f)
{
    static char buf[64];
    cJSON *l = cJSON_Parse(LIST);
    bfilter_apply(f, l);
    buf[0] = '\0';
    const cJSON *b;
    cJSON_ArrayForEach(b, l) {
        strcat(buf, buf[0] ? "," : "");
        strcat(buf, cJSON_GetObjectItemCaseSensitive(b, "id")->valuestring);
    }
    cJSON_Delete(l);
    return buf;
}

static void test_status_names(void **state)
{
    (void)state;
    assert_int_equal(bfilter_status(NULL), BSTATUS_ANY);
    assert_int_equal(bfilter_status(""), BSTATUS_ANY);
    assert_int_equal(bfilter_status("pending"), BSTATUS_PENDING);
    assert_int_equal(bfilter_status("cancelled"), BSTATUS_CANCELLED);
    assert_int_equal(bfilter_status("running"), -1);
}

static void test_each_filter_and_their_combination(void **state)
{
    (void)state;
    assert_string_equal(kept(&(bfilter_t){0}), "b1,b2,b3,b4-inv");
    assert_string_equal(kept(&(bfilter_t){.q = "IMPORT"}), "b1,b3");
    assert_string_equal(kept(&(bfilter_t){.q = "inv"}), "b1,b4-inv"); /* the name, or the id */
    assert_string_equal(kept(&(bfilter_t){.status = BSTATUS_PENDING}), "b1");
    assert_string_equal(kept(&(bfilter_t){.status = BSTATUS_FINISHED}), "b2,b4-inv");
    assert_string_equal(kept(&(bfilter_t){.status = BSTATUS_FAILED}), "b2,b3");
    assert_string_equal(kept(&(bfilter_t){.status = BSTATUS_CANCELLED}), "b3");
    assert_string_equal(kept(&(bfilter_t){.since = 2000, .until = 3000}), "b2,b3");
    assert_string_equal(kept(&(bfilter_t){.until = 1999}), "b1");
    assert_string_equal(kept(&(bfilter_t){.q = "import", .status = BSTATUS_FAILED, .since = 1500}), "b3");
    assert_string_equal(kept(&(bfilter_t){.q = "nothing like it"}), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_each_filter_and_their_combination),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
