"""The Failed page's block for an app's own failer (issue 30): the pools
that have one are a choice (status: app_failer), the pool and the page's
offset live in the URL beside the filters, "older" / "newer" page through
the whole failer (GET /api/failed?app=POOL&offset=N), and the page's text
filter applies to it. Laravel 8 on the host, the `database` driver on
SQLite: one job fails for real, 119 more rows like it are written into its
failed_jobs (120 in all)."""
import json
import sqlite3
import threading
import time
import uuid

from conftest import wait_for
from test_app_failed_http import app, browser, failing_app_master, version8  # noqa: F401 (fixtures)
from test_http import TOKEN, get

try:  # Selenium (without it the browser fixture skips)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError:
    By = Select = None

TOTAL = 120


def fill_failer(app):
    """119 more rows like the real one: new uuids, every second one with
    "needle-N" in its exception. The ids (uuids), newest first."""
    con = sqlite3.connect(str(app.db))
    con.row_factory = sqlite3.Row
    try:
        real = dict(con.execute("select * from failed_jobs").fetchone())
        for i in range(1, TOTAL):
            u = str(uuid.uuid4())
            payload = json.loads(real["payload"])
            payload["uuid"] = u
            exc = ("needle-%d " % i if i % 2 == 0 else "") + real["exception"]
            con.execute("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                        "values (?, ?, ?, ?, ?, ?)",
                        (u, real["connection"], real["queue"], json.dumps(payload), exc, real["failed_at"]))
        con.commit()
        rows = [dict(r) for r in con.execute("select uuid, exception from failed_jobs order by id desc")]
    finally:
        con.close()
    assert len(rows) == TOTAL
    return rows


def table(d):
    """The block's state, read in ONE script (the table is drawn again on each poll)."""
    return d.execute_script("""
        var q = s => document.querySelector(s);
        return {hash: location.hash,
                status: (q('#failed-app-status') || {}).textContent || '',
                page: (q('#failed-app-page') || {}).textContent || '',
                ids: Array.from(document.querySelectorAll('#failed-app-table tr[data-id]'), tr => tr.dataset.id),
                choice: Array.from((q('#failed-app-pool') || {options: []}).options, o => o.value)};""")


def shows(d, ids, page, what):
    """Wait until the table lists exactly ids (in order) on page `page`."""
    seen = {}

    def ok():
        t = seen["t"] = table(d)
        return t["ids"] == ids and t["page"].startswith("page %d " % page)
    try:
        wait_for(ok, 60, interval=0.25, what=what)
    except AssertionError:
        raise AssertionError("%s: last seen %r" % (what, {k: v for k, v in seen.get("t", {}).items() if k != "ids"}))
    return seen["t"]


def click(d, css, what):
    wait_for(lambda: d.execute_script("var b = document.querySelector(arguments[0]); if (b) b.click(); return !!b;", css),
             60, interval=0.25, what=what)


def failed_app(port, query):
    status, _, body = get(port, "/api/failed?app=appq" + query, TOKEN, timeout=30)
    return status, json.loads(body)


def test_two_viewers_on_two_pages_both_get_their_list(master_factory, redis_server, app):
    """Two readers polling two pages of one pool at once (two tabs, the
    page's 700 ms poll) each get their own list: the master keeps a few
    queries' lists a pool, not one that the other's look keeps replacing."""
    m, port = failing_app_master(master_factory, redis_server, app, 1, "v")
    try:
        ids = [r["uuid"] for r in fill_failer(app)]
        # what the master would refuse is a 400 naming the API's parameter
        for query, name in (("&since=99999999999999", "since"), ("&until=99999999999999", "until"),
                            ("&q=%FF", "q"), ("&class=a%C0%80", "class")):
            status, body = failed_app(port, query)
            assert status == 400 and name in body["error"] and "text" not in body["error"], (query, status, body)
        seen, states, stop = {0: [], 50: []}, {0: [], 50: []}, threading.Event()

        def poller(offset):
            while not stop.is_set():
                status, body = failed_app(port, "&offset=%d" % offset)
                states[offset].append(body.get("state") if status == 200 else status)
                if status == 200 and body.get("state") == "ok":
                    seen[offset].append([f["id"] for f in body["failed"]])
                time.sleep(0.3)
        threads = [threading.Thread(target=poller, args=(o,), daemon=True) for o in (0, 50)]
        for i, t in enumerate(threads):
            t.start()
            time.sleep(0.15 * (i == 0))
        try:
            wait_for(lambda: all(len(v) >= 5 for v in seen.values()), 90, interval=0.25,
                     what="both readers' lists, again and again")
        finally:
            stop.set()
            for t in threads:
                t.join(40)
        for offset in (0, 50):
            assert all(page == ids[offset:offset + 50] for page in seen[offset])
            # once in, a reader's list stays (read again behind it), whatever the other reads
            after = states[offset][states[offset].index("ok"):]
            assert set(after) == {"ok"}, (offset, states[offset])

        # an age (since=1h) is the same query from one second to the next: its list stays
        def steady():
            minute = int(time.time()) // 60
            wait_for(lambda: failed_app(port, "&since=1h")[1].get("state") == "ok", 60, interval=0.25,
                     what="the list since 1h")
            got = []
            for _ in range(10):
                time.sleep(0.25)
                got.append(failed_app(port, "&since=1h")[1].get("state"))
            return got if int(time.time()) // 60 == minute else None  # a new minute: again
        got = wait_for(steady, 180, interval=0, what="a minute's reads")
        assert set(got) == {"ok"}, got
    finally:
        assert m.stop(60) == 0


def test_the_apps_failer_is_picked_paged_and_filtered(master_factory, redis_server, app, browser):
    m, port = failing_app_master(master_factory, redis_server, app, 1, "p")
    d = browser
    try:
        rows = fill_failer(app)
        ids = [r["uuid"] for r in rows]
        needles = [r["uuid"] for r in rows if "needle-" in r["exception"]]
        assert len(needles) == 59

        # the API: an offset within bounds, and the status says which pools have an app failer
        status, _, body = get(port, "/api/failed?app=appq&offset=99999", TOKEN, timeout=30)
        assert status == 400, body
        status, _, body = get(port, "/api/status", TOKEN, timeout=30)
        assert [p["app_failer"] for p in json.loads(body)["pools"]] == [True]

        origin = "http://127.0.0.1:%d" % port
        d.get(origin + "/#/overview")
        d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]);", TOKEN)
        d.get(origin + "/#/failed")
        wait_for(lambda: "appq" in table(d)["choice"], 60, interval=0.25, what="appq among the choices")
        Select(d.find_element(By.ID, "failed-app-pool")).select_by_value("appq")

        t = shows(d, ids[:50], 1, "the first page of the app's failer")
        assert "app=appq" in t["hash"] and "1–50 of 120" in t["status"] and t["page"] == "page 1 of 3", t
        click(d, "#failed-app-older", "older (to page 2)")
        shows(d, ids[50:100], 2, "the second page")
        click(d, "#failed-app-older", "older (to page 3)")
        t = shows(d, ids[100:], 3, "the third page")
        assert "aoff=100" in t["hash"] and "101–120 of 120" in t["status"], t
        assert not d.execute_script("return !!document.getElementById('failed-app-older');")

        # the page's text filter applies to the app's failer too (back to its first page)
        search = d.find_element(By.ID, "failed-search")
        search.send_keys("NEEDLE")
        d.find_element(By.ID, "failed-go").click()
        t = shows(d, needles[:50], 1, "the filtered first page")
        assert "q=NEEDLE" in t["hash"] and "app=appq" in t["hash"] and "aoff" not in t["hash"], t
        assert "1–50 of 59 matching" in t["status"] and t["page"] == "page 1 of 2", t
        click(d, "#failed-app-older", "older (filtered)")
        t = shows(d, needles[50:], 2, "the filtered second page")
        # all of it from the URL alone (a bookmark), and newer goes back
        d.get(origin + "/#/overview")
        d.get(origin + "/" + t["hash"])
        shows(d, needles[50:], 2, "the filtered second page from the URL")
        click(d, "#failed-app-newer", "newer")
        shows(d, needles[:50], 1, "the filtered first page again")

        # a scan that ran out of time (the agent's SCAN_BUDGET, too slow to bring about here: its answer is
        # made so in the page) counts "at least" so many: a full page still offers the older ones
        d.execute_script("""
            var real = window.fetch;
            window.fetch = function (path, opts) {
              var p = real.call(this, path, opts);
              if (String(path).indexOf('api/failed?app=') < 0) return p;
              return p.then(r => r.json().then(j => {
                if (j.state === 'ok') { j.partial = true; j.total = (j.offset || 0) + j.failed.length; }
                return new Response(JSON.stringify(j), {status: r.status, headers: r.headers});
              }));
            };""")
        wait_for(lambda: d.execute_script("""
            var s = (document.getElementById('failed-app-status') || {}).textContent || '';
            return /of at least 50 matching/.test(s) && !!document.getElementById('failed-app-older');"""),
                 60, interval=0.25, what="older offered after a partial count")
    finally:
        assert m.stop(60) == 0
