"""The app's failer on the dashboard (issue 30, item 5): GET
/api/failed?app=POOL lists the first page of an app_driver pool's
failed_jobs from the master's snapshot (src/master/mappdash.c; "loading"
until its app agent answered), and POST /api/failed/app/retry and /forget
act as queue:retry and queue:forget do, behind the token. Laravel 8 on the
host, the `database` driver on SQLite."""
import json
import re

import pytest

from conftest import free_port, wait_for
from laravel_roots import migrated_app, mounted_version
from test_app_driver import dispatch, jobs_left, pool, use_database_queue
from test_http import TOKEN, code, get, http_conf, post

try:  # the page test needs Selenium and Chromium; the API test does not
    import test_dashboard
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    browser = test_dashboard.browser  # the fixture
except pytest.skip.Exception:
    @pytest.fixture
    def browser():
        pytest.skip("no selenium")


@pytest.fixture(scope="module")
def version8():
    yield from mounted_version("8")


@pytest.fixture
def app(version8, redis_server, tmp_path):
    yield from migrated_app(version8, redis_server.port, tmp_path)


def failing_app_master(master_factory, redis_server, app, count, tag):
    """A master whose app_driver pool has run `count` ManualFailJobs into
    the app's failer, its HTTP endpoint up on a free port: (master, port)."""
    use_database_queue(app)
    dispatch(app, "ManualFailJob", count=count, tag=tag)
    port = free_port()
    m = master_factory(redis_server)
    m.write_config(pool(app), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    m.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    try:
        wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
        wait_for(lambda: not jobs_left(app) and len(app.failed_jobs()) == count, 90, interval=0.25,
                 what="%d failures in failed_jobs" % count)
    except BaseException:
        m.stop(60)
        raise
    return m, port


def look(port, pool="appq", token=TOKEN):
    status, _, body = get(port, "/api/failed?app=" + pool, token, timeout=30)
    return status, json.loads(body)


def settled(port, pred, what):
    """The snapshot once pred holds (the page polls the same way)."""
    seen = {}

    def ok():
        status, body = look(port)
        seen["body"] = body
        return status == 200 and pred(body)
    wait_for(ok, 90, interval=0.25, what=what)
    return seen["body"]


def test_the_apps_failer_over_http(master_factory, redis_server, app):
    m, port = failing_app_master(master_factory, redis_server, app, 3, "f")
    try:
        rows = {r["uuid"] for r in app.failed_jobs()}
        # the same read rule as /api/failed: no token, no list
        assert look(port, token=None)[0] in (401, 403)
        rep = settled(port, lambda b: b.get("state") == "ok" and b.get("total") == 3, "the app's list")
        assert rep["pool"] == "appq" and {f["id"] for f in rep["failed"]} == rows
        assert all(f["class"] == "App\\Jobs\\ManualFailJob" and "manual failure" in f["exception"]
                   for f in rep["failed"])
        status, body = look(port, "nope")
        assert status == 404 and "no pool nope" in body["error"]

        # retry and forget: token holders only
        one, other = sorted(rows)[:2]
        assert post(port, "/api/failed/app/retry", None, {"pool": "appq", "ids": [one]})[0] in (401, 403)
        assert post(port, "/api/failed/app/forget", None, {"pool": "appq", "ids": [one]})[0] in (401, 403)
        assert post(port, "/api/failed/app/retry", TOKEN, {"pool": "appq"})[0] == 400
        assert len(app.failed_jobs()) == 3

        status, body = post(port, "/api/failed/app/retry", TOKEN, {"pool": "appq", "ids": [one]})
        assert status == 200 and body["queued"], body
        rep = settled(port, lambda b: "last_action" in b and not b["acting"], "the retry's answer")
        assert rep["last_action"]["retried"] == [one], rep
        # pushed back as queue:retry does: it runs (and fails) again
        wait_for(lambda: len(app.failed_jobs()) == 3 and not jobs_left(app), 60, interval=0.25,
                 what="the retried job to fail again")

        status, body = post(port, "/api/failed/app/forget", TOKEN, {"pool": "appq", "ids": [other, "no-such-job"]})
        assert status == 200, body
        rep = settled(port, lambda b: b["last_action"].get("forgotten") and not b["acting"], "the forget's answer")
        assert rep["last_action"]["forgotten"] == [other] and rep["last_action"]["missing"] == ["no-such-job"]
        assert other not in {r["uuid"] for r in app.failed_jobs()}
        # the list follows
        settled(port, lambda b: b.get("total") == 2 and other not in {f["id"] for f in b["failed"]}, "the new list")
        # the master's record says who asked (review of appfp, MUST 1)
        assert re.search(r"app failed-retry of 1 failed jobs on pool appq asked over HTTP by \S+", m.log())
        assert re.search(r"app failed-forget of 2 failed jobs on pool appq asked over HTTP by \S+", m.log())
    finally:
        assert m.stop(60) == 0


def test_the_failed_page_shows_the_apps_failer(master_factory, redis_server, app, browser):
    """The Failed page's source choice (a pool picked): an app_driver pool's failer, listed
    (text only) and retried from a row's button."""
    m, port = failing_app_master(master_factory, redis_server, app, 2, "p")
    d = browser
    try:
        rows = {r["uuid"] for r in app.failed_jobs()}
        origin = "http://127.0.0.1:%d" % port
        d.get(origin + "/#/overview")
        d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]);", TOKEN)
        d.get(origin + "/#/failed")
        wait_for(lambda: d.execute_script("var s = document.getElementById('failed-app-pool');"
                                          "return !!s && Array.from(s.options, o => o.value).includes('appq');"),
                 60, interval=0.25, what="appq among the source choices")
        Select(d.find_element(By.ID, "failed-app-pool")).select_by_value("appq")

        def listed():  # in one script: the table is drawn again every 2 s (no stale elements)
            return set(d.execute_script("return Array.from(document.querySelectorAll("
                                        "'#failed-app-table tr[data-id]'), tr => tr.dataset.id);"))
        wait_for(lambda: listed() == rows, 60, what="the app's failed jobs on the page")
        one = sorted(rows)[0]
        wait_for(lambda: d.execute_script("var b = document.querySelector(arguments[0]); if (b) b.click(); return !!b;",
                                          '#failed-app-table tr[data-id="%s"] button[data-action="forget"]' % one),
                 30, what="the Forget button clicked")
        wait_for(lambda: one not in {r["uuid"] for r in app.failed_jobs()}, 60, what="the row forgotten")
        wait_for(lambda: "1 forgotten" in d.execute_script("return document.getElementById('failed-app-status')"
                                                          ".textContent;"), 60,
                 what="the outcome shown")
        wait_for(lambda: listed() == rows - {one}, 60, what="the list read again")
    finally:
        assert m.stop(60) == 0
