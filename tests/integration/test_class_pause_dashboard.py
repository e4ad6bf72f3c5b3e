"""Pause by job class from the dashboard's Pools page (issue 32 item 4), in
headless Chromium: a paused class waits in its queue, attempts unchanged,
while the queue's other jobs run; Continue lets it run."""
import pytest

from conftest import make_payload, push_many, wait_for
from test_class_pause import (A, B, PAUSED_KEY, TOKEN, handler, held_everywhere, start_with_http, started,
                              waiting)

webdriver = pytest.importorskip("selenium.webdriver")
from test_dashboard import browser, rows  # noqa: E402,F401  (the fixture)


def test_pause_and_continue_a_class_from_the_pools_page(master_factory, redis_server, browser, tmp_path):  # noqa: F811
    path, log = handler(tmp_path)
    rc = redis_server.client()
    a, port = start_with_http(master_factory, redis_server, path)
    d = browser
    d.get("http://127.0.0.1:%d/#/pools" % port)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: rows(d, "#class-pause-class"), 15, what="the class pause form")
    rows(d, "#class-pause-class")[0].send_keys(A)
    rows(d, "#class-pause")[0].click()
    wait_for(lambda: rc.hexists(PAUSED_KEY, A), 30, what="the class paused in Redis")
    held_everywhere([a], 1)
    push_many(rc, "work", [make_payload(job=A) for _ in range(3)] + [make_payload(job=B) for _ in range(3)])
    wait_for(lambda: sum(1 for s in started(log) if s[0] == B) == 3, 60, what="B's jobs to run")
    assert not [s for s in started(log) if s[0] == A]
    assert len(waiting(rc, A)) == 3 and all(j["attempts"] == 0 for j in waiting(rc, A))
    sel = 'tr[data-paused-class] button[data-action="continue"]'
    wait_for(lambda: rows(d, sel), 30, what="the paused class listed with Continue")
    rows(d, sel)[0].click()
    wait_for(lambda: not rc.exists(PAUSED_KEY), 30, what="the class continued")
    wait_for(lambda: sum(1 for s in started(log) if s[0] == A) == 3, 60, what="A's jobs to run")
    assert "HTTP by" in a.log()
