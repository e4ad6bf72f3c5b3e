"""Issue 32 in a real browser: the Failed page sends its search to the
server (the URL keeps the filters: bookmarkable, back works), and a bulk
retry of a filter's matches shows the count first and asks to confirm; the
Running page lists the jobs of two masters and stops one of this host's;
the Pools page deletes a queue's pending jobs that match, after the count."""
import json
import time
import urllib.parse

import pytest

from conftest import FIXTURE_HANDLER, PREFIX, free_port, make_payload, push, wait_for
from test_failed_search import INVOICE, MAIL, corpus, pool, seed
from test_http import TOKEN, code
from test_running import pool as running_pool

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture
rows = test_dashboard.rows


def shown(d):
    """The uuids of the failed table's rows, read in the page in one step (it is drawn anew as it polls)."""
    return d.execute_script("return Array.from(document.querySelectorAll('#failed-table tr[data-uuid]'))"
                            ".map(function (r) { return r.getAttribute('data-uuid'); })")


def test_the_failed_page_searches_on_the_server_and_retries_a_filter_after_the_count(master, r, browser):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    data = corpus()
    for q, recs in data.items():
        seed(r, q, recs)
    d = browser
    origin = "http://127.0.0.1:%d" % port
    d.get(origin + "/#/failed")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: rows(d, "#failed-table tr[data-uuid]"), 15, what="the failed list")
    # a search by class and text: one among 4,600, found on the server (the page had loaded 1,000 at most)
    target = [p for p, e, at in data["fs-billing"] if p["displayName"] == INVOICE and "INV-1234\n" in e][0]
    d.find_element(By.ID, "failed-class").send_keys(INVOICE)
    d.find_element(By.ID, "failed-search").send_keys("inv-1234")
    d.find_element(By.ID, "failed-go").click()
    wait_for(lambda: shown(d) == [target["uuid"]],
             20, what="the one match")
    # the URL keeps the filter: a reload (a bookmark) shows the same
    frag = urllib.parse.unquote(d.current_url.split("#", 1)[1])
    assert frag.startswith("/failed?") and "inv-1234" in frag and INVOICE in frag
    d.refresh()
    wait_for(lambda: shown(d) == [target["uuid"]],
             20, what="the match after a reload")
    assert d.find_element(By.ID, "failed-class").get_attribute("value") == INVOICE
    # back: the unfiltered list again
    d.back()
    wait_for(lambda: len(rows(d, "#failed-table tr[data-uuid]")) > 1, 20, what="the unfiltered list after back")
    # a bulk retry of a class in a queue: the count first, then confirm
    d.get(origin + "/#/failed?" + urllib.parse.urlencode({"class": MAIL, "queue": "fs-mail", "q": "timeout 4"}))
    want = {p["uuid"] for p, e, at in data["fs-mail"] if "timeout 4" in e}
    wait_for(lambda: rows(d, 'button[data-action="retry-filter"]'), 15, what="the bulk buttons")
    rows(d, 'button[data-action="retry-filter"]')[0].click()
    wait_for(lambda: rows(d, "#failed-confirm-count"), 20, what="the count")
    assert d.find_element(By.ID, "failed-confirm-count").get_attribute("data-count") == str(len(want))
    assert r.llen(PREFIX + "queues:fs-mail") == 0  # nothing yet
    rows(d, 'button[data-action="confirm-retry"]')[0].click()
    wait_for(lambda: r.llen(PREFIX + "queues:fs-mail") == len(want), 30, what="the matches retried")
    assert {json.loads(x)["uuid"] for x in r.lrange(PREFIX + "queues:fs-mail", 0, -1)} == want
    assert r.zcard(PREFIX + "qpool:failed:fs-mail") == 2000 - len(want)
    assert r.zcard(PREFIX + "qpool:failed:fs-billing") == 2600


def test_the_running_page_shows_two_masters_jobs_and_stops_this_hosts(master_factory, redis_server, browser):
    r = redis_server.client()
    port = free_port()
    quick = "shutdown_timeout = 2; balance_interval = 0.2;"
    a = master_factory(redis_server, "a")
    a.write_config(running_pool("crm", "rp-crm"),
                   qpool=quick + 'http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    a.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    b = master_factory(redis_server, "b")
    b.write_config(running_pool("other", "rp-other"), qpool=quick)
    b.start()
    wait_for(lambda: code(port, "/healthz", TOKEN) == 200, 15, what="the HTTP endpoint")
    mine, theirs = make_payload("hang", job="App\\Jobs\\SyncCrm"), make_payload("hang", job="App\\Jobs\\Other")
    push(r, "rp-crm", mine)
    push(r, "rp-other", theirs)
    d = browser
    d.get("http://127.0.0.1:%d/#/running" % port)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    row = '#running-table tr[data-uuid="%s"]'
    wait_for(lambda: rows(d, row % mine["uuid"]) and rows(d, row % theirs["uuid"]), 20, what="both masters' jobs")
    assert not rows(d, (row % theirs["uuid"]) + ' button[data-action="stop-job"]')  # another host's: no stop
    # the table is drawn anew as it polls: click and read in the page, in one step
    d.execute_script("document.querySelector(arguments[0]).click()", (row % mine["uuid"]) + ' button[data-action="stop-job"]')
    a.wait_log(r"job \S+ \(App\\Jobs\\SyncCrm\) stopped by an operator", 20)
    # released as a timeout leaves it (tries = 2): it runs again, attempt 2
    attempt = "var r = document.querySelector(arguments[0]); return r ? r.cells[5].textContent : null"
    wait_for(lambda: d.execute_script(attempt, row % mine["uuid"]) == "2", 30, what="attempt 2 shown")
    b_log = b.log()
    assert "stopped by an operator" not in b_log


def test_the_pools_page_deletes_a_queues_pending_jobs_after_the_count(master, r, browser):
    port = free_port()
    master.write_config('{ name = "w"; queues = ["pw-q"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
                        % FIXTURE_HANDLER,
                        qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz", TOKEN) == 200, 15, what="the HTTP endpoint")
    # delayed an hour: no worker takes them meanwhile
    jobs = [make_payload("ok", job=MAIL if i % 2 else INVOICE) for i in range(200)]
    pipe = r.pipeline(transaction=False)
    for p in jobs:
        pipe.zadd(PREFIX + "queues:pw-q:delayed", {json.dumps(p, separators=(",", ":")): time.time() + 3600})
    pipe.execute()
    d = browser
    d.get("http://127.0.0.1:%d/#/pools" % port)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: rows(d, '#pending-queue option[value="pw-q"]'), 15, what="the queue in the form")
    d.find_element(By.ID, "pending-class").send_keys(MAIL)
    d.find_element(By.ID, "pending-count").click()
    wait_for(lambda: rows(d, "#pending-confirm-count"), 20, what="the count")
    assert d.find_element(By.ID, "pending-confirm-count").get_attribute("data-count") == "100"
    assert r.zcard(PREFIX + "queues:pw-q:delayed") == 200  # nothing yet
    rows(d, 'button[data-action="confirm-delete"]')[0].click()
    wait_for(lambda: r.zcard(PREFIX + "queues:pw-q:delayed") == 100, 20, what="the matches deleted")
    left = {json.loads(x)["uuid"] for x in r.zrange(PREFIX + "queues:pw-q:delayed", 0, -1)}
    assert left == {p["uuid"] for p in jobs if p["displayName"] == INVOICE}
