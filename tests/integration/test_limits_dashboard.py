"""The limits in the API (GET /api/limits) and the dashboard's Limits page
(issue 33 item 3), in headless Chromium: a limit with its slot in use and a
job held back; a class name that is markup shows as text."""
import json
import urllib.request

import pytest

from conftest import free_port, make_payload, page_attrs, page_text, push_many, wait_for
from test_limits import handler, records, start

webdriver = pytest.importorskip("selenium.webdriver")
from test_dashboard import browser, console_errors, rows  # noqa: E402,F401  (the fixture)

HOSTILE = '<img src=x onerror="document.title=1">|{x}'
LIMITS = ('limits = (\n  { class = "App\\\\Jobs\\\\Long"; concurrency = 1; alert_after = 1; },\n'
          '  { class = "%s"; tag_prefix = "<b>C:"; rate = "5/s"; }\n);\n' % HOSTILE.replace('"', '\\"'))


def api_limits(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/api/limits" % port, timeout=10) as res:
        return json.loads(res.read().decode())["limits"]


def test_limits_page_shows_a_slot_in_use_and_a_waiting_job(master_factory, redis_server, browser, tmp_path):  # noqa: F811
    path, log = handler(tmp_path)
    rc = redis_server.client()
    port = free_port()
    start(master_factory, redis_server, "a", path, LIMITS, processes=2,
          qpool='  http = { listen = "127.0.0.1:%d"; read_without_token = "aggregates"; };' % port)
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Long") for _ in range(2)])
    wait_for(lambda: [r for r in records(log).values() if r["S"]], 30, what="a Long job to start")
    lim = wait_for(lambda: (lambda ls: ls if ls[0].get("waiting") == 1 and ls[0].get("alerting") else None)(
        api_limits(port)), 30, what="the API to show the job held back and the alert")
    assert lim[0]["in_use"] == 1 and lim[0]["concurrency"] == 1 and lim[0]["alert_after"] == 1
    assert lim[1]["class"] == HOSTILE and lim[1]["tag_prefix"] == "<b>C:" and lim[1]["tokens"] is None
    d = browser
    d.get("http://127.0.0.1:%d/#/limits" % port)
    row = 'tr.limit[data-key="limit-0"]'
    cells = wait_for(lambda: (lambda c: c if len(c) > 5 and c[1] == "1 / 1" else None)(page_attrs(d, row + " td")), 30,
                     what="the slot in use on the page")
    assert cells[0] == "App\\Jobs\\Long" and cells[1] == "1 / 1" and cells[3] == "1", cells
    assert cells[5] == "alerting", cells
    hostile = page_text(d, 'tr.limit[data-key="limit-1"]')
    assert HOSTILE in hostile and "<b>C:" in hostile and "5/s per key" in hostile
    assert not rows(d, "#limits img") and not rows(d, "#limits b") and d.title != "1"
    d.get("http://127.0.0.1:%d/#/overview" % port)  # the overview's status: the alert degrades the pill
    wait_for(lambda: "App\\Jobs\\Long holding jobs back" in (rows(d, "#status-pill")[0].get_attribute("title") or ""),
             30, what="the pill to say the limit's alert")
    assert not console_errors(d)
