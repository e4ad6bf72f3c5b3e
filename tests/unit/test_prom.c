/*
 * test_prom.c - a master's status as Prometheus text (src/prom.h): exact
 * output for a small status, histograms cumulative and in seconds, merged
 * by pool and queue, label escaping, one series per queue name, refusal of
 * what is not a status, and no crash on missing or mistyped members.
 *
 * QPOOL_PROM_DUMP=path writes the realistic sample's output there (for
 * `promtool check metrics`).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observe/prom.h"

/* JSON written with ' for " (no ' inside values). */
static cJSON *parse(const char *json)
{
    char *s = strdup(json);
    for (char *p = s; *p; p++)
        if (*p == '\'') *p = '"';
    cJSON *o = cJSON_Parse(s);
    free(s);
    assert_non_null(o);
    return o;
}

/* Render json into out (initialised here); the return of prom_render. */
static int render(const char *json, sbuf_t *out)
{
    cJSON *o = parse(json);
    sbuf_init(out);
    int rc = prom_render(o, out);
    cJSON_Delete(o);
    return rc;
}

/* How many whole lines of text are exactly line. */
static int count_line(const char *text, const char *line)
{
    int n = 0;
    size_t len = strlen(line);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, line, len) == 0 && (p[len] == '\n' || p[len] == '\0')) n++;
    return n;
}

static void assert_line(const char *text, const char *line)
{
    if (count_line(text, line) != 1) fail_msg("want once: %s\n--- in ---\n%s", line, text);
}

#define Z10 "0,0,0,0,0,0,0,0,0,0"

static const char SMALL[] =
    "{'ok':true,'version':'1.2.3','paused':false,'redis_reconnects':3,'pools':[{'name':'p','paused':true,"
    "'busy':1,'idle':2,'starting':0,'stopping':0,'paused_workers':4,'exits':{'memory':1,'crashed':2},"
    "'queues':[{'name':'q','ready':5,'delayed':1,'reserved':2,'paused':false,'laravel_paused':false}],"
    "'job_stats':[{'queue':'q','job':'J','outcome':'done','count':4,'hist':{'n':4,"
    "'r':[1,0,2,0,0,0,0,1," Z10 "],'rs':123.5,'w':[0,0,0,0,2,0,0,0," Z10 "],'ws':40}}]}]}";

static const char SMALL_OUT[] =
    "# HELP qpool_build_info The qpool version of this master; always 1.\n"
    "# TYPE qpool_build_info gauge\n"
    "qpool_build_info{version=\"1.2.3\"} 1\n"
    "# HELP qpool_jobs_total Jobs settled since the master started, by pool, queue, job class and outcome.\n"
    "# TYPE qpool_jobs_total counter\n"
    "qpool_jobs_total{pool=\"p\",queue=\"q\",job=\"J\",outcome=\"done\"} 4\n"
    "# HELP qpool_job_runtime_seconds Job runtime, all job classes and outcomes of a pool's queue merged.\n"
    "# TYPE qpool_job_runtime_seconds histogram\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.001\"} 1\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.0025\"} 1\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.005\"} 3\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.01\"} 3\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.025\"} 3\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.05\"} 3\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.1\"} 3\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.25\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.5\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"1\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"2.5\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"5\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"10\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"30\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"60\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"300\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"3600\"} 4\n"
    "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"+Inf\"} 4\n"
    "qpool_job_runtime_seconds_sum{pool=\"p\",queue=\"q\"} 0.1235\n"
    "qpool_job_runtime_seconds_count{pool=\"p\",queue=\"q\"} 4\n"
    "# HELP qpool_job_wait_seconds Time jobs waited in their queue before a worker took them (jobs whose wait is known).\n"
    "# TYPE qpool_job_wait_seconds histogram\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.001\"} 0\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.0025\"} 0\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.005\"} 0\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.01\"} 0\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.025\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.05\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.1\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.25\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.5\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"1\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"2.5\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"5\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"10\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"30\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"60\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"300\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"3600\"} 2\n"
    "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"+Inf\"} 2\n"
    "qpool_job_wait_seconds_sum{pool=\"p\",queue=\"q\"} 0.04\n"
    "qpool_job_wait_seconds_count{pool=\"p\",queue=\"q\"} 2\n"
    "# HELP qpool_queue_jobs Jobs in each queue by state, once per queue name.\n"
    "# TYPE qpool_queue_jobs gauge\n"
    "qpool_queue_jobs{queue=\"q\",state=\"ready\"} 5\n"
    "qpool_queue_jobs{queue=\"q\",state=\"delayed\"} 1\n"
    "qpool_queue_jobs{queue=\"q\",state=\"reserved\"} 2\n"
    "# HELP qpool_workers Workers by pool and state.\n"
    "# TYPE qpool_workers gauge\n"
    "qpool_workers{pool=\"p\",state=\"busy\"} 1\n"
    "qpool_workers{pool=\"p\",state=\"idle\"} 2\n"
    "qpool_workers{pool=\"p\",state=\"starting\"} 0\n"
    "qpool_workers{pool=\"p\",state=\"stopping\"} 0\n"
    "qpool_workers{pool=\"p\",state=\"paused\"} 4\n"
    "# HELP qpool_worker_exits_total Workers that exited since the master started, by pool and reason.\n"
    "# TYPE qpool_worker_exits_total counter\n"
    "qpool_worker_exits_total{pool=\"p\",reason=\"memory\"} 1\n"
    "qpool_worker_exits_total{pool=\"p\",reason=\"crashed\"} 2\n"
    "# HELP qpool_redis_reconnects_total Times the master reconnected to Redis.\n"
    "# TYPE qpool_redis_reconnects_total counter\n"
    "qpool_redis_reconnects_total 3\n"
    "# HELP qpool_paused 1 if the pool is paused, else 0.\n"
    "# TYPE qpool_paused gauge\n"
    "qpool_paused{pool=\"p\"} 1\n";

static void test_exact_small(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(render(SMALL, &out), 0);
    assert_string_equal(out.data, SMALL_OUT);
    sbuf_free(&out);
}

/* A pool's fleet budget: five families; a pool without one has none. */
static void test_fleet_budget(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(render("{'pools':[{'name':'w','fleet_budget':{'budget':6,'held':3,'in_use':6,'waiting':true,"
                            "'renew_failures':2}},{'name':'x','fleet_budget':null}]}",
                            &out),
                     0);
    assert_line(out.data, "# TYPE qpool_fleet_budget_workers gauge");
    assert_line(out.data, "qpool_fleet_budget_workers{pool=\"w\"} 6");
    assert_line(out.data, "qpool_fleet_slots_held{pool=\"w\"} 3");
    assert_line(out.data, "qpool_fleet_slots_in_use{pool=\"w\"} 6");
    assert_line(out.data, "qpool_fleet_budget_waiting{pool=\"w\"} 1");
    assert_line(out.data, "# TYPE qpool_fleet_lease_renewal_failures_total counter");
    assert_line(out.data, "qpool_fleet_lease_renewal_failures_total{pool=\"w\"} 2");
    assert_null(strstr(out.data, "pool=\"x\""));
    sbuf_free(&out);
}

/* Appends: what out held stays in front. */
static void test_appends(void **state)
{
    (void)state;
    cJSON *o = parse(SMALL);
    sbuf_t out;
    sbuf_init(&out);
    sbuf_puts(&out, "# before\n");
    assert_int_equal(prom_render(o, &out), 0);
    assert_int_equal(strncmp(out.data, "# before\n# HELP qpool_build_info ", 33), 0);
    assert_int_equal(out.len, 9 + strlen(SMALL_OUT));
    cJSON_Delete(o);
    sbuf_free(&out);
}

/* Every finite bound in seconds, buckets cumulative up to +Inf == _count. */
static void test_cumulative_seconds(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(render("{'pools':[{'name':'p','job_stats':[{'queue':'q','job':'J','outcome':'failed','count':18,"
                            "'hist':{'n':18,'r':[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],'rs':2500,"
                            "'w':[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,3,0],'ws':900000}}]}]}",
                            &out),
                     0);
    static const char *const LE[] = {"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
                                     "1",     "2.5",    "5",     "10",   "30",    "60",   "300", "3600", "+Inf"};
    char line[160];
    for (int i = 0; i < 18; i++) {
        snprintf(line, sizeof line, "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"%s\"} %d", LE[i],
                 i + 1);
        assert_line(out.data, line);
        snprintf(line, sizeof line, "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"%s\"} %d", LE[i],
                 i >= 16 ? 3 : 0);
        assert_line(out.data, line);
    }
    assert_line(out.data, "qpool_job_runtime_seconds_sum{pool=\"p\",queue=\"q\"} 2.5");
    assert_line(out.data, "qpool_job_runtime_seconds_count{pool=\"p\",queue=\"q\"} 18");
    assert_line(out.data, "qpool_job_wait_seconds_sum{pool=\"p\",queue=\"q\"} 900");
    assert_line(out.data, "qpool_job_wait_seconds_count{pool=\"p\",queue=\"q\"} 3"); /* sum of w, not n */
    sbuf_free(&out);
}

/* Backslash, double quote and newline escaped in label values. */
static void test_label_escaping(void **state)
{
    (void)state;
    cJSON *o = parse("{'version':'v\\n1','pools':[{'job_stats':[{'outcome':'done','count':1}],"
                     "'queues':[{'ready':1}],'exits':{}}]}");
    cJSON *pool = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "pools"), 0);
    cJSON_AddStringToObject(pool, "name", "a\nb");
    cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(pool, "job_stats"), 0);
    cJSON_AddStringToObject(e, "queue", "q\\\"");
    cJSON_AddStringToObject(e, "job", "App\\Jobs\\X\"y");
    cJSON *q = cJSON_GetArrayItem(cJSON_GetObjectItem(pool, "queues"), 0);
    cJSON_AddStringToObject(q, "name", "x\"\\\n");
    cJSON_AddNumberToObject(cJSON_GetObjectItem(pool, "exits"), "we\"ird", 2);
    sbuf_t out;
    sbuf_init(&out);
    assert_int_equal(prom_render(o, &out), 0);
    assert_line(out.data, "qpool_build_info{version=\"v\\n1\"} 1");
    assert_line(out.data,
                "qpool_jobs_total{pool=\"a\\nb\",queue=\"q\\\\\\\"\",job=\"App\\\\Jobs\\\\X\\\"y\",outcome=\"done\"} 1");
    assert_line(out.data, "qpool_queue_jobs{queue=\"x\\\"\\\\\\n\",state=\"ready\"} 1");
    assert_line(out.data, "qpool_worker_exits_total{pool=\"a\\nb\",reason=\"we\\\"ird\"} 2");
    assert_null(strstr(out.data, "a\nb")); /* no raw newline inside a sample */
    cJSON_Delete(o);
    sbuf_free(&out);
}

/* A queue two pools watch is one Redis list: once, as the first pool saw it. */
static void test_queue_dedup(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(render("{'pools':[{'name':'a','queues':[{'name':'default','ready':5,'delayed':1,'reserved':2}]},"
                            "{'name':'b','queues':[{'name':'high','ready':9},"
                            "{'name':'default','ready':6,'delayed':7,'reserved':8}]}]}",
                            &out),
                     0);
    assert_line(out.data, "qpool_queue_jobs{queue=\"default\",state=\"ready\"} 5");
    assert_line(out.data, "qpool_queue_jobs{queue=\"default\",state=\"delayed\"} 1");
    assert_line(out.data, "qpool_queue_jobs{queue=\"default\",state=\"reserved\"} 2");
    assert_line(out.data, "qpool_queue_jobs{queue=\"high\",state=\"ready\"} 9");
    assert_null(strstr(out.data, "} 6\n"));
    assert_null(strstr(out.data, "queue=\"high\",state=\"delayed\"")); /* missing: skipped */
    assert_int_equal(count_line(out.data, "# TYPE qpool_queue_jobs gauge"), 1);
    sbuf_free(&out);
}

/* Entries of one pool+queue (any class, outcome) make one histogram; another
 * queue or another pool's same queue name make their own. */
static void test_merge(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(
        render("{'pools':[{'name':'p','job_stats':["
               "{'queue':'q','job':'A','outcome':'done','count':3,'hist':{'n':3,'r':[2,1,0,0,0,0,0,0," Z10 "],'rs':2,"
               "'w':[1,0,0,0,0,0,0,0," Z10 "],'ws':0.5}},"
               "{'queue':'r','job':'A','outcome':'done','count':1,'hist':{'n':1,'r':[0,0,0,0,0,0,0,0," Z10
               "],'rs':0,'w':[0,0,0,0,0,0,0,0," Z10 "],'ws':0}},"
               "{'queue':'q','job':'B','outcome':'failed','count':5,'hist':{'n':5,'r':[0,0,1,0,0,0,0,0,0,4,"
               "0,0,0,0,0,0,0,0],'rs':4003,'w':[0,1,0,0,0,0,0,0," Z10 "],'ws':2}}]},"
               "{'name':'o','job_stats':[{'queue':'q','job':'A','outcome':'done','count':1,'hist':{'n':1,"
               "'r':[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1],'rs':5000000,'w':[0,0,0,0,0,0,0,0," Z10 "],'ws':0}}]}]}",
               &out),
        0);
    const char *s = out.data;
    assert_line(s, "qpool_jobs_total{pool=\"p\",queue=\"q\",job=\"A\",outcome=\"done\"} 3");
    assert_line(s, "qpool_jobs_total{pool=\"p\",queue=\"q\",job=\"B\",outcome=\"failed\"} 5");
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.001\"} 2");
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.005\"} 4");
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.5\"} 4");
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"1\"} 8");
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"p\",queue=\"q\",le=\"+Inf\"} 8");
    assert_line(s, "qpool_job_runtime_seconds_sum{pool=\"p\",queue=\"q\"} 4.005");
    assert_line(s, "qpool_job_runtime_seconds_count{pool=\"p\",queue=\"q\"} 8");
    assert_line(s, "qpool_job_wait_seconds_bucket{pool=\"p\",queue=\"q\",le=\"0.0025\"} 2");
    assert_line(s, "qpool_job_wait_seconds_sum{pool=\"p\",queue=\"q\"} 0.0025");
    assert_line(s, "qpool_job_wait_seconds_count{pool=\"p\",queue=\"q\"} 2");
    assert_line(s, "qpool_job_runtime_seconds_count{pool=\"p\",queue=\"r\"} 0");
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"o\",queue=\"q\",le=\"3600\"} 0");
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"o\",queue=\"q\",le=\"+Inf\"} 1");
    assert_line(s, "qpool_job_runtime_seconds_sum{pool=\"o\",queue=\"q\"} 5000");
    assert_int_equal(count_line(s, "# TYPE qpool_job_runtime_seconds histogram"), 1);
    sbuf_free(&out);
}

/* Not a status: -1, out untouched. */
static void test_not_a_status(void **state)
{
    (void)state;
    static const char *const BAD[] = {"[]", "42", "'pools'", "null", "{}", "{'pools':{}}", "{'pools':null}",
                                      "{'pools':'x'}", "[{'pools':[]}]"};
    sbuf_t out;
    sbuf_init(&out);
    sbuf_puts(&out, "keep");
    for (size_t i = 0; i < ARRAY_LEN(BAD); i++) {
        cJSON *o = parse(BAD[i]);
        assert_int_equal(prom_render(o, &out), -1);
        cJSON_Delete(o);
    }
    assert_int_equal(prom_render(NULL, &out), -1);
    assert_int_equal(out.len, 4);
    assert_string_equal(out.data, "keep");
    sbuf_free(&out);
}

/* Missing or mistyped members are skipped, never rendered as nan or crashed on. */
static void test_missing_members(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(render("{'pools':[]}", &out), 0);
    assert_int_equal(out.len, 0);
    sbuf_free(&out);
    assert_int_equal(render("{'version':3,'redis_reconnects':'x','pools':[1,'x',null,[],{},{'name':7}]}", &out), 0);
    assert_int_equal(out.len, 0);
    sbuf_free(&out);
    assert_int_equal(
        render("{'pools':[{'name':'p','paused':'yes','busy':'1','idle':2,'exits':[1,2],'queues':{'name':'q'},"
               "'job_stats':[1,{},{'queue':'q'},{'queue':'q','job':'J','outcome':'done'},"
               "{'queue':'q','hist':{'r':[1,2]}},{'queue':'q','hist':{'r':'no','w':[" Z10 ",0,0,0,0,0,0,0,-1]}},"
               "{'queue':'q','hist':{'r':[" Z10 ",0,0,0,0,0,0,0,'1']}},{'queue':7,'hist':{'r':[" Z10
               ",0,0,0,0,0,0,0,1]}}]},"
               "{'name':'s','job_stats':[{'queue':'q','hist':{'r':[" Z10 ",0,0,0,0,0,0,0,1]}}],"
               "'queues':[{},{'name':5},{'name':'z','ready':null,'delayed':1}]}]}",
               &out),
        0);
    const char *s = out.data;
    assert_null(strstr(s, "nan"));
    assert_null(strstr(s, "qpool_jobs_total"));      /* no entry has all labels and a count */
    assert_null(strstr(s, "{pool=\"p\",queue=\"q\""));  /* no valid histogram in p */
    assert_null(strstr(s, "qpool_paused"));
    assert_null(strstr(s, "qpool_worker_exits_total"));
    assert_null(strstr(s, "wait_seconds"));           /* s has no w */
    assert_line(s, "qpool_workers{pool=\"p\",state=\"idle\"} 2");
    assert_null(strstr(s, "state=\"busy\""));
    assert_line(s, "qpool_job_runtime_seconds_bucket{pool=\"s\",queue=\"q\",le=\"+Inf\"} 1");
    assert_line(s, "qpool_job_runtime_seconds_sum{pool=\"s\",queue=\"q\"} 0"); /* no rs */
    assert_line(s, "qpool_queue_jobs{queue=\"z\",state=\"delayed\"} 1");
    assert_null(strstr(s, "state=\"ready\""));
    sbuf_free(&out);
}

/* Integers as integers, others the shortest that reads back; never inf. */
static void test_numbers(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(render("{'redis_reconnects':123456789012,'pools':[{'name':'p','busy':0.1,'idle':-0.0,"
                            "'starting':1e300,'stopping':1e400,'paused_workers':2.5e-7}]}",
                            &out),
                     0);
    assert_line(out.data, "qpool_redis_reconnects_total 123456789012");
    assert_line(out.data, "qpool_workers{pool=\"p\",state=\"busy\"} 0.1");
    assert_line(out.data, "qpool_workers{pool=\"p\",state=\"idle\"} 0");
    assert_line(out.data, "qpool_workers{pool=\"p\",state=\"starting\"} 1e+300");
    assert_line(out.data, "qpool_workers{pool=\"p\",state=\"paused\"} 2.5e-07");
    assert_null(strstr(out.data, "inf"));
    assert_null(strstr(out.data, "stopping"));
    sbuf_free(&out);
}

static const char *const REALISTIC =
    "{'ok':true,'version':'0.9.0','pid':1234,'paused':false,'redis_reconnects':3,'pools':["
    "{'name':'emails','paused':false,'busy':1,'idle':2,'starting':0,'stopping':0,'running':3,'paused_workers':0,"
    "'exits':{'max_jobs':0,'max_time':0,'memory':1,'stopped':4,'exited':0,'crashed':2},"
    "'queues':[{'name':'default','ready':5,'delayed':1,'reserved':2,'paused':false,'laravel_paused':false},"
    "{'name':'mail','ready':0,'delayed':0,'reserved':0,'paused':true,'laravel_paused':false}],"
    "'job_stats':[{'queue':'default','job':'App\\\\Jobs\\\\SendMail','outcome':'done','count':7,"
    "'hist':{'n':7,'r':[0,0,0,1,2,3,0,0,0,0,0,0,0,0,0,0,0,1],'rs':5000123.5,'w':[1,0,0,0,0,0,2,0," Z10 "],'ws':140}},"
    "{'queue':'default','job':'App\\\\Jobs\\\\SendMail','outcome':'failed','count':2,"
    "'hist':{'n':2,'r':[0,0,0,0,0,0,0,0,0,0,2,0,0,0,0,0,0,0],'rs':3800.25,'w':[0,0,0,0,0,0,0,0," Z10 "],'ws':0}},"
    "{'queue':'mail','job':'App\\\\Jobs\\\\Digest','outcome':'timed_out','count':1,"
    "'hist':{'n':1,'r':[0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0],'rs':60000,'w':[0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0],"
    "'ws':4321.5}}]},"
    "{'name':'reports','paused':true,'busy':0,'idle':0,'starting':0,'stopping':1,'paused_workers':2,"
    "'exits':{'max_jobs':10,'max_time':0,'memory':0,'stopped':0,'exited':1,'crashed':0},"
    "'queues':[{'name':'default','ready':5,'delayed':1,'reserved':2,'paused':true,'laravel_paused':false},"
    "{'name':'reports','ready':12,'delayed':0,'reserved':1,'paused':true,'laravel_paused':true}],"
    "'job_stats':[{'queue':'reports','job':'App\\\\Jobs\\\\Build','outcome':'done','count':3,"
    "'hist':{'n':3,'r':[0,0,0,0,0,0,0,0,0,0,0,1,2,0,0,0,0,0],'rs':21000,'w':[0,0,0,0,0,0,0,0," Z10 "],'ws':0}}]}]}";

/* Each family's # HELP and # TYPE once, its samples right after, together. */
static void test_families_contiguous(void **state)
{
    (void)state;
    sbuf_t out;
    assert_int_equal(render(REALISTIC, &out), 0);
    static const char *const FAMILIES[] = {"qpool_build_info",        "qpool_jobs_total",
                                           "qpool_job_runtime_seconds", "qpool_job_wait_seconds",
                                           "qpool_queue_jobs",        "qpool_workers",
                                           "qpool_worker_exits_total", "qpool_redis_reconnects_total",
                                           "qpool_paused"};
    int current = -1;
    char *text = strdup(out.data), *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0) {
            current++;
            assert_true(current < (int)ARRAY_LEN(FAMILIES));
            size_t n = strlen(FAMILIES[current]);
            assert_int_equal(strncmp(line + 7, FAMILIES[current], n), 0);
            assert_int_equal(line[7 + n], ' ');
            continue;
        }
        assert_true(current >= 0);
        const char *f = FAMILIES[current];
        if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_int_equal(strncmp(line + 7, f, strlen(f)), 0);
            continue;
        }
        assert_int_equal(strncmp(line, f, strlen(f)), 0);
        char c = line[strlen(f)];
        assert_true(c == '{' || c == ' ' || c == '_');
    }
    assert_int_equal(current, (int)ARRAY_LEN(FAMILIES) - 1);
    free(text);
    assert_int_equal(count_line(out.data, "qpool_queue_jobs{queue=\"default\",state=\"ready\"} 5"), 1);
    assert_line(out.data, "qpool_job_runtime_seconds_count{pool=\"emails\",queue=\"default\"} 9");
    assert_line(out.data, "qpool_job_wait_seconds_count{pool=\"emails\",queue=\"default\"} 3");
    assert_line(out.data, "qpool_paused{pool=\"reports\"} 1");
    const char *dump = getenv("QPOOL_PROM_DUMP");
    if (dump) {
        FILE *fp = fopen(dump, "w");
        assert_non_null(fp);
        fputs(out.data, fp);
        fclose(fp);
    }
    sbuf_free(&out);
}


/* Review #4, the second guard: a label value that is not valid UTF-8 is
 * written repaired (Prometheus fails the whole scrape on one). */
static void test_label_values_are_valid_utf8(void **state)
{
    (void)state;
    cJSON *o = parse("{'version':'1','pools':[{'name':'p','job_stats':[{'outcome':'done','count':1,"
                     "'queue':'q'}],'queues':[],'exits':{}}]}");
    cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "pools"), 0), "job_stats"), 0);
    cJSON_AddStringToObject(e, "job", "App\\X\xff\xfe");
    sbuf_t out;
    sbuf_init(&out);
    assert_int_equal(prom_render(o, &out), 0);
    assert_true(utf8_valid(out.data, out.len));
    assert_line(out.data, "qpool_jobs_total{pool=\"p\",queue=\"q\",job=\"App\\\\X\xef\xbf\xbd\xef\xbf\xbd\",outcome=\"done\"} 1");
    cJSON_Delete(o);
    sbuf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_small),
        cmocka_unit_test(test_label_values_are_valid_utf8),
        cmocka_unit_test(test_appends),
        cmocka_unit_test(test_fleet_budget),
        cmocka_unit_test(test_cumulative_seconds),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_queue_dedup),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_not_a_status),
        cmocka_unit_test(test_missing_members),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_families_contiguous),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
