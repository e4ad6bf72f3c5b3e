"""Issue 32's acceptance, item by item, in headless Chromium, with the
issue's own numbers where the other browser tests use fewer (they are named
in each test's comment):
- the Jobs page's class + tag + text finds one record among 10,000;
- the Failed page retries the 3,000 failures a filter matches, and no other;
- the Running page's Stop ends a stuck job on its last try (its handler
  killed, the job failed as a timeout leaves it, gone from the list), with
  two masters' jobs listed;
- a class paused from the Pools page waits while its queue's other jobs
  run, then runs in queue order after Continue.
Real redis-server and qpool; the records are seeded as a master writes
them, in pipelines. No timing in the assertions."""
import json
import re
import time
import urllib.parse

import pytest

from conftest import (FIXTURE_HANDLER, PREFIX, children_of, free_port, make_payload, proc_alive, push, push_many,
                      wait_for)
from test_class_pause import A, B, PAUSED_KEY, handler, started
from test_failed_search import payload, seed
from test_http import TOKEN, code

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture
rows = test_dashboard.rows

HTTP = 'http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };'
CLASSES = ["App\\Jobs\\SendInvoice", "App\\Jobs\\SyncCrm", "App\\Jobs\\SendMail", "App\\Jobs\\Report"]


def uuids(d, css):
    """The data-uuid of the rows css selects, read in the page in one step (tables are drawn anew as they poll)."""
    return d.execute_script("return Array.from(document.querySelectorAll(arguments[0]))"
                            ".map(function (r) { return r.getAttribute('data-uuid'); })", css)


def idle_pool(queue):
    """A pool on a queue of its own: nothing takes the seeded jobs."""
    return ('{ name = "w"; queues = ["%s"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
            % (queue, FIXTURE_HANDLER))


def open_page(d, port, page):
    d.get("http://127.0.0.1:%d/#/%s" % (port, page))
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)


# ------------------------------------------------- 1: class + tag + text among 10,000

N_HISTORY = 10000
TARGET = 1234  # 8,765 records from the newest: past any page the browser loads


def history_record(i, t0):
    # the class by blocks of 7 and the tag by i % 100: every class meets every
    # tag, so no two of the three filters alone single the target out
    text = "RuntimeException: the gateway refused INV-4711" if i in (TARGET, TARGET + 2, TARGET + 100) else \
        "RuntimeException: the gateway refused INV-%d" % (i + 10000)
    return {"uuid": "ca-%d" % i, "name": CLASSES[(i // 7) % 4], "queue": "default", "pool": "w", "host": "app1",
            "attempt": 1, "outcome": "failed", "finished_at": t0 - (N_HISTORY - i) * 10, "exception": text,
            "tags": ["App\\Models\\Customer:%d" % (i % 100), "invoices"]}


def seed_history(r):
    key = PREFIX + "qpool:{qpool-jobs}:list"
    t0 = int(time.time() * 1000)
    recs = [history_record(i, t0) for i in range(N_HISTORY)]
    pipe = r.pipeline(transaction=False)
    for rec in recs:
        pipe.lpush(key, json.dumps(rec, separators=(",", ":")))
    pipe.execute()
    return recs


def type_filter(d, name, value):
    """Type into the Jobs page's filter box and press Enter (the page remounts from the URL)."""
    d.execute_script("document.getElementById('jobs-filter').setAttribute('data-old', '1')")
    box = d.find_element(By.CSS_SELECTOR, '#jobs-filter input[name="%s"]' % name)
    box.send_keys(value, Keys.ENTER)
    wait_for(lambda: urllib.parse.parse_qs(d.execute_script("return location.hash").partition("?")[2]).get(name)
             == [value], 20, what="the %s filter in the URL" % name)
    # the page remounted from the URL: a new form (the next box is typed into that one)
    wait_for(lambda: d.execute_script("var f = document.getElementById('jobs-filter');"
                                      " return !!f && !f.hasAttribute('data-old')"), 20, what="the page remounted")


def test_class_tag_and_text_find_one_job_among_10000(master, r, browser):
    # test_console_pages searches the Failed page by class + text among 4,600;
    # test_history_search does class + tag + text over the API: here the page
    port = free_port()
    master.write_config(idle_pool("ca-idle"), qpool=HTTP % port + "job_history_size = 10000;")
    recs = seed_history(r)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    target = recs[TARGET]
    cls, tag = target["name"], target["tags"][0]
    # each pair of the three matches more than the one
    assert sum(1 for x in recs if x["name"] == cls and tag in x["tags"]) > 1
    assert sum(1 for x in recs if x["name"] == cls and "INV-4711" in x["exception"]) > 1
    assert sum(1 for x in recs if tag in x["tags"] and "INV-4711" in x["exception"]) > 1
    d = browser
    open_page(d, port, "jobs")
    wait_for(lambda: len(uuids(d, "#jobs-table tr[data-uuid]")) == 100, 30, what="the newest 100 records")
    assert target["uuid"] not in uuids(d, "#jobs-table tr[data-uuid]")
    type_filter(d, "name", cls)
    type_filter(d, "tag", tag)
    type_filter(d, "q", "inv-4711")  # case ignored
    wait_for(lambda: uuids(d, "#jobs-table tr[data-uuid]") == [target["uuid"]], 30, what="the one job")
    assert d.find_element(By.ID, "jobs-count").text.startswith("1 attempt")
    # a bookmark of the URL shows the same
    d.refresh()
    wait_for(lambda: uuids(d, "#jobs-table tr[data-uuid]") == [target["uuid"]], 30, what="the one job after a reload")


# ------------------------------------------------- 2: a bulk retry of 3,000 failures

def test_a_bulk_retry_retries_exactly_the_3000_failures_a_filter_matches(master, r, browser):
    # test_console_pages retries 286 matches of a class + queue + text: here
    # the "retry these 3,000 failures, not the other 200", and beside
    # them the same class elsewhere, other classes, other texts
    port = free_port()
    master.write_config(idle_pool("ca-idle"), qpool=HTTP % port)
    now = int(time.time())
    sync, mail = CLASSES[1], CLASSES[2]
    want = [(payload(sync, i), "GuzzleHttp\\Exception\\ConnectException: vendor down (%d)" % i, now - 3600 + i // 5)
            for i in range(3000)]
    others = ([(payload(sync, i), "ValidationException: bad customer %d" % i, now - 3600 + i) for i in range(100)]
              + [(payload(mail, i), "ConnectException: vendor down (%d)" % i, now - 3600 + i) for i in range(100)])
    elsewhere = [(payload(sync, i), "ConnectException: vendor down (%d)" % i, now - 3600 + i) for i in range(100)]
    # interleaved by time, as they failed
    seed(r, "ca-crm", sorted(want + others, key=lambda x: x[2]))
    seed(r, "ca-other", elsewhere)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    d = browser
    open_page(d, port, "failed")
    wait_for(lambda: rows(d, "#failed-table tr[data-uuid]"), 20, what="the failed list")
    d.find_element(By.ID, "failed-class").send_keys(sync)
    d.find_element(By.ID, "failed-queue").send_keys("ca-crm")
    d.find_element(By.ID, "failed-search").send_keys("vendor down")
    d.find_element(By.ID, "failed-go").click()
    wait_for(lambda: rows(d, 'button[data-action="retry-filter"]'), 20, what="the bulk buttons")
    wait_for(lambda: len(uuids(d, "#failed-table tr[data-uuid]")) == 100, 30, what="the first 100 matches")
    rows(d, 'button[data-action="retry-filter"]')[0].click()
    wait_for(lambda: rows(d, "#failed-confirm-count"), 30, what="the count")
    assert d.find_element(By.ID, "failed-confirm-count").get_attribute("data-count") == "3000"
    assert re.search(r"\b3\D?000 failed jobs match", d.find_element(By.ID, "failed-confirm-count").text)
    assert r.llen(PREFIX + "queues:ca-crm") == 0  # nothing before the confirm
    # the page's notices, kept as they come (one hides itself after a while)
    d.execute_script("var n = document.getElementById('notice'); window.seen = []; new MutationObserver(function () {"
                     " window.seen.push(n.textContent); }).observe(n, { childList: true, subtree: true, characterData: true });")
    rows(d, 'button[data-action="confirm-retry"]')[0].click()
    wait_for(lambda: r.llen(PREFIX + "queues:ca-crm") >= 3000, 60, what="the 3,000 retried")
    wait_for(lambda: any(re.search(r"\b3\D?000 retried", t) for t in d.execute_script("return window.seen")), 30,
             what="the page's report of 3,000 retried")
    retried = [json.loads(x)["uuid"] for x in r.lrange(PREFIX + "queues:ca-crm", 0, -1)]
    assert len(retried) == 3000 and set(retried) == {p["uuid"] for p, _, _ in want}
    # no other failure touched: the store keeps exactly the others, in both queues
    left = {u.decode() for u in r.zrange(PREFIX + "qpool:failed:ca-crm", 0, -1)}
    assert left == {p["uuid"] for p, _, _ in others}
    assert all(r.exists(PREFIX + "qpool:failed:job:" + u) for u in left)
    assert not any(r.exists(PREFIX + "qpool:failed:job:" + p["uuid"]) for p, _, _ in want)
    assert r.zcard(PREFIX + "qpool:failed:ca-other") == 100 and r.llen(PREFIX + "queues:ca-other") == 0
    # the page, searched again, finds none left
    wait_for(lambda: "Nothing matches." in d.find_element(By.ID, "failed").text, 30, what="no match left")


# ------------------------------------------------- 3 + 4: two masters, stop a stuck job

def running_pool(name, queue):
    # tries = 1: a stop ends the job for good, as its timeout would
    return ('{ name = "%s"; queues = ["%s"]; processes = 1; tries = 1; timeout = 600;'
            ' handler = { type = "pipe"; command = ["%s"]; }; }' % (name, queue, FIXTURE_HANDLER))


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        out += kids
        todo += kids
    return out


def test_stop_ends_a_stuck_job_on_its_last_try_with_two_masters_listed(master_factory, redis_server, browser):
    # test_console_pages stops a job with a try left (released, attempt 2
    # shown): here its last try, and what "ends" means checked: its handler
    # and the handler's child are gone, the job is failed as a timeout leaves
    # it and leaves the list, the worker takes its next job
    r = redis_server.client()
    port = free_port()
    quick = "shutdown_timeout = 2; balance_interval = 0.2;"
    a = master_factory(redis_server, "a")
    a.write_config(running_pool("crm", "ca-crm"), qpool=quick + HTTP % port)
    a.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    b = master_factory(redis_server, "b")
    b.write_config(running_pool("other", "ca-other"), qpool=quick)
    b.start()
    wait_for(lambda: code(port, "/healthz", TOKEN) == 200, 15, what="the HTTP endpoint")
    stuck, theirs = make_payload("hang", job=A), make_payload("hang", job=B)
    push(r, "ca-crm", stuck)
    push(r, "ca-other", theirs)
    d = browser
    open_page(d, port, "running")
    row = '#running-table tr[data-uuid="%s"]'
    wait_for(lambda: rows(d, row % stuck["uuid"]) and rows(d, row % theirs["uuid"]), 30, what="both masters' jobs")
    cells = "return Array.from(document.querySelector(arguments[0]).cells).map(function (c) { return c.textContent; })"
    mine_cells, their_cells = d.execute_script(cells, row % stuck["uuid"]), d.execute_script(cells, row % theirs["uuid"])
    assert (mine_cells[1], mine_cells[3], mine_cells[4], mine_cells[5]) == ("crm", A, "ca-crm", "1")
    assert (their_cells[1], their_cells[3], their_cells[4]) == ("other", B, "ca-other")
    worker = int(mine_cells[2])
    handlers = wait_for(lambda: (lambda x: x if len(x) >= 2 else None)(descendants(worker)), 20,
                        what="the stuck handler and its child")
    after = make_payload("ok", job=CLASSES[3])
    push(r, "ca-crm", after)  # waits behind the stuck job
    d.execute_script("document.querySelector(arguments[0]).click()", (row % stuck["uuid"]) + ' button[data-action="stop-job"]')
    a.wait_log(r"job \S+ \(App\\Jobs\\SyncCrm\) stopped by an operator", 30)
    wait_for(lambda: not any(proc_alive(p) for p in handlers), 30, what="the stuck handler and its child to end")
    wait_for(lambda: r.exists(PREFIX + "qpool:failed:job:" + stuck["uuid"]), 30, what="the job in the failed store")
    exc = r.hget(PREFIX + "qpool:failed:job:" + stuck["uuid"], "exception").decode()
    assert "TimeoutExceededException" in exc or "timed out" in exc, exc
    wait_for(lambda: not rows(d, row % stuck["uuid"]), 30, what="the job gone from the page")
    wait_for(lambda: r.llen(PREFIX + "queues:ca-crm") == 0 and r.zcard(PREFIX + "queues:ca-crm:reserved") == 0, 30,
             what="the worker to take and finish the next job")
    # the other master's job runs on, untouched
    assert rows(d, row % theirs["uuid"]) and "stopped by an operator" not in b.log()


# ------------------------------------------------- 5: a paused class, then in order

def test_a_paused_class_waits_while_the_queue_runs_then_runs_in_order(master_factory, redis_server, browser, tmp_path):
    # test_class_pause_dashboard pauses and continues from the page on two
    # workers and checks that the class's jobs ran, not their order: here
    # one worker, the classes interleaved, the start order checked
    path, log = handler(tmp_path)
    rc = redis_server.client()
    port = free_port()
    a = master_factory(redis_server, "a")
    a.write_config('{ name = "work"; queues = ["work"]; processes = 1; retry_after = 300;'
                   ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }' % path, qpool=HTTP % port)
    a.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    d = browser
    open_page(d, port, "pools")
    wait_for(lambda: rows(d, "#class-pause-class"), 20, what="the class pause form")
    rows(d, "#class-pause-class")[0].send_keys(A)
    rows(d, "#class-pause")[0].click()
    wait_for(lambda: rc.hexists(PAUSED_KEY, A), 30, what="the class paused in Redis")
    a.wait_log(r"paused classes now: 1", timeout=60)
    jobs = []
    for i in range(4):
        jobs += [make_payload(job=A, n=i), make_payload(job=B, n=i)]
    push_many(rc, "work", jobs)  # A, B, A, B, ...: the paused class at the head
    held = [p["uuid"] for p in jobs if p["displayName"] == A]
    wait_for(lambda: sum(1 for s in started(log) if s[0] == B) == 4, 60, what="B's jobs to run")
    assert [s[1] for s in started(log)] == [p["uuid"] for p in jobs if p["displayName"] == B]  # B alone, in order
    waiting = [json.loads(x) for x in rc.lrange(PREFIX + "queues:work", 0, -1)]
    assert [p["uuid"] for p in waiting] == held and all(p["attempts"] == 0 for p in waiting)
    sel = 'tr[data-paused-class] button[data-action="continue"]'
    wait_for(lambda: rows(d, sel), 30, what="the paused class listed with Continue")
    wait_for(lambda: d.execute_script("var r = document.querySelector('tr[data-paused-class]');"
                                      " return r ? r.cells[4].textContent : null") == "4", 30,
             what="4 jobs held back shown")
    rows(d, sel)[0].click()
    wait_for(lambda: not rc.hexists(PAUSED_KEY, A), 30, what="the class continued")
    wait_for(lambda: len(started(log)) == 8, 60, what="A's jobs to run")
    after = started(log)[4:]
    assert [s[1] for s in after] == held  # in queue order
    assert all(s[0] == A and s[2] == "1" for s in after)  # each once, on its first attempt
    wait_for(lambda: rows(d, "#class-pause-table") and not rows(d, "tr[data-paused-class]"), 30,
             what="no paused class listed")

