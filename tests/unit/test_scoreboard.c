/*
 * test_scoreboard.c - unit tests for src/scoreboard.h: what the master
 * reads from a child's slot is always terminated, valid UTF-8 text,
 * whatever the child wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "observe/scoreboard.h"
#include "core/util.h"

static sb_slot_t *hostile_slot(void)
{
    /* a slot is page-aligned (one page per child, so that each can be confined) */
    sb_slot_t *s = aligned_alloc(_Alignof(sb_slot_t), sizeof *s);
    assert_non_null(s);
    memset(s, 0, sizeof *s);
    /* a compromised child fills every string field to the brim, with no NUL */
    memset(s->c.job_id, 'I', sizeof s->c.job_id);
    memset(s->c.job_uuid, 'U', sizeof s->c.job_uuid);
    memset(s->c.job_name, 0xff, sizeof s->c.job_name);
    memset(s->c.job_queue, 'Q', sizeof s->c.job_queue);
    memset(s->c.job_tags, 'T', sizeof s->c.job_tags);
    return s;
}

/* #11: job_uuid was left unterminated (the over-read ran into job_name). */
static void test_read_terminates_every_string(void **state)
{
    (void)state;
    sb_slot_t *s = hostile_slot();
    sb_child_t c;
    sb_read(s, &c);
    assert_int_equal(strnlen(c.job_id, sizeof c.job_id), sizeof c.job_id - 1);
    assert_int_equal(strnlen(c.job_uuid, sizeof c.job_uuid), sizeof c.job_uuid - 1);
    assert_int_equal(strnlen(c.job_name, sizeof c.job_name), sizeof c.job_name - 1);
    assert_int_equal(strnlen(c.job_queue, sizeof c.job_queue), sizeof c.job_queue - 1);
    /* review of 2026-11-29: the tags, the last field, were read past its end */
    assert_int_equal(strnlen(c.job_tags, sizeof c.job_tags), sizeof c.job_tags - 1);
    assert_int_equal(strspn(c.job_uuid, "U"), sizeof c.job_uuid - 1);
    free(s);
}

static void test_read_gives_valid_utf8(void **state)
{
    (void)state;
    sb_slot_t *s = hostile_slot();
    strcpy(s->c.job_queue, "caf\xc3\xa9");          /* valid: kept */
    memcpy(s->c.job_id, "ab\xe2\x82", 5);            /* a character cut short */
    sb_child_t c;
    sb_read(s, &c);
    assert_true(utf8_valid(c.job_name, strlen(c.job_name)));
    assert_int_equal(strspn(c.job_name, "?"), sizeof c.job_name - 1);
    assert_string_equal(c.job_queue, "caf\xc3\xa9");
    assert_string_equal(c.job_id, "ab??");
    free(s);
}

/* Review of g32c, SHOULD 3: a stop request is for one job. It was never
 * cleared, so a later job that started at the same wall ms (two jobs in one
 * ms, a clock stepped back) was stopped too. */
static void test_stop_request_ends_with_its_job(void **state)
{
    (void)state;
    sb_slot_t *s = hostile_slot();
    sb_write_begin(s);
    sb_job_started(s, 1700000000123);
    sb_write_end(s);
    assert_false(sb_stop_asked(s));
    sb_stop_ask(s, 1700000000123);
    assert_true(sb_stop_asked(s));
    sb_write_begin(s);
    sb_job_started(s, 1700000000123); /* the next job, in the same ms */
    sb_write_end(s);
    assert_false(sb_stop_asked(s));
    sb_stop_ask(s, 1700000000123);
    sb_write_begin(s);
    sb_job_started(s, 1700000000100); /* the clock stepped back, then forward again */
    sb_job_started(s, 1700000000123);
    sb_write_end(s);
    assert_false(sb_stop_asked(s));
    sb_stop_ask(s, 1700000000123);   /* a slot released and taken again forgets it too */
    scoreboard_t sb = {s, 1};
    sb_release(&sb, 0);
    assert_false(sb_stop_asked(s));
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_terminates_every_string),
        cmocka_unit_test(test_read_gives_valid_utf8),
        cmocka_unit_test(test_stop_request_ends_with_its_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
