"""Issue 32 (its last gaps) in a real browser: the Monitoring page filters a
watched tag's jobs as the other lists do (class, queue, pool, host,
outcome, text, since/until; GET /api/monitoring/jobs takes them), and its
URL keeps the filter (a reload shows the same, back goes to the whole
list). The tag's kept records are written as the master writes them."""
import json
import time
import urllib.parse

import pytest

from conftest import PREFIX, free_port, wait_for
from test_http import TOKEN, code, http_conf
from test_list_filters import A, B, pool

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture

TAG = "App\\Models\\Customer:42"


def seed(r):
    """Six records of the tag: A and B alternately, on two pools and hosts;
    the B ones failed; the oldest two three hours ago."""
    now = int(time.time() * 1000)
    key = PREFIX + "qpool:{qpool-jobs}:tag:" + TAG
    r.sadd(PREFIX + "qpool:{qpool-jobs}:monitored", TAG)
    for i in range(6):
        rec = {"uuid": "mf-%d" % i, "name": A if i % 2 else B, "queue": "mf-q%d" % (i % 2), "pool": "mf-p%d" % (i % 2),
               "host": "host%d" % (i % 2), "attempt": 1, "outcome": "done" if i % 2 else "failed",
               "finished_at": now - (3 * 3600 * 1000 if i < 2 else 0) - (6 - i) * 1000,
               "exception": "" if i % 2 else "RuntimeException: gateway %d" % i, "tags": [TAG]}
        r.lpush(key, json.dumps(rec, separators=(",", ":")))


def shown(d, table="monitor-recent-table"):
    return sorted(d.execute_script("return Array.from(document.querySelectorAll('#%s tr[data-uuid]'))"
                                   ".map(function (r) { return r.getAttribute('data-uuid'); })" % table))


def test_the_monitoring_page_filters_a_tags_jobs_and_keeps_it_in_the_url(master, r, browser):
    port = free_port()
    seed(r)
    master.write_config(pool("mf-a", "mf-idle"), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    d = browser
    d.get("http://127.0.0.1:%d/#/monitoring?%s" % (port, urllib.parse.urlencode({"tag": TAG})))
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    every = ["mf-%d" % i for i in range(6)]
    wait_for(lambda: shown(d) == every, 30, what="the tag's six jobs")
    # the failed list is a request of its own: it may render a poll later
    wait_for(lambda: shown(d, "monitor-failed-table") == ["mf-0", "mf-2", "mf-4"], 30, what="the tag's failed jobs")
    d.find_element(By.ID, "monitor-class").send_keys(A)
    d.find_element(By.ID, "monitor-pool").send_keys("mf-p1")
    d.find_element(By.ID, "monitor-go").click()
    wait_for(lambda: shown(d) == ["mf-1", "mf-3", "mf-5"], 20, what="the class's jobs only")
    frag = urllib.parse.unquote(d.current_url.split("#", 1)[1])
    assert frag.startswith("/monitoring?") and A in frag and "pool=mf-p1" in frag and TAG in frag
    d.refresh()
    wait_for(lambda: shown(d) == ["mf-1", "mf-3", "mf-5"], 20, what="the same after a reload")
    assert d.find_element(By.ID, "monitor-class").get_attribute("value") == A
    d.back()
    wait_for(lambda: shown(d) == every, 20, what="the whole list after back")
    # outcome, host and text, straight from a URL; the failed list keeps to the other filters
    d.get("http://127.0.0.1:%d/#/monitoring?%s" % (port, urllib.parse.urlencode(
        {"tag": TAG, "status": "failed", "host": "host0", "q": "gateway 4"})))
    wait_for(lambda: shown(d) == ["mf-4"], 20, what="the one failed job with that text")
    wait_for(lambda: shown(d, "monitor-failed-table") == ["mf-4"], 20, what="the failed list, filtered")
    assert d.find_element(By.ID, "monitor-status").get_attribute("value") == "failed"
    # a time range (the form's local time, sent as UNIX ms)
    d.get("http://127.0.0.1:%d/#/monitoring?%s" % (port, urllib.parse.urlencode(
        {"tag": TAG, "queue": "mf-q0", "since": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3600))})))
    wait_for(lambda: shown(d) == ["mf-2", "mf-4"], 20, what="the queue's jobs of the last hour")
