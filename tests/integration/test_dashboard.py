"""The web dashboard (issue 10) in a real browser: Debian's chromium,
chromium-driver and python3-selenium, headless, against a running qpool
with pools, a backlog, failures and two masters on one Redis.

Screenshots of the overview, a job and the failed jobs go to
$QPOOL_SCREENSHOTS (default: the test's temporary directory)."""
import json
import os
import pathlib
import time
import urllib.parse

import pytest

from conftest import (FIXTURE_HANDLER, PREFIX, fill_failed_store, free_port, make_payload, page_text, push_many,
                      read_fixture_log, wait_for)
from test_http import TOKEN, code, get, post

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service as ChromeService  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

XSS = "<img src=x onerror=alert(1)>"


def pools(log):
    return ('{ name = "emails"; queues = ["emails"]; processes = 2; tries = 1; timeout = 5;'
            '  handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; },\n'
            '{ name = "reports"; queues = ["reports"]; processes = 1; timeout = 30;'
            '  handler = { type = "pipe"; command = ["%s"]; }; }' % (FIXTURE_HANDLER, log, FIXTURE_HANDLER))


@pytest.fixture
def browser():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
              "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
              "--disable-component-update", "--disable-default-apps", "--metrics-recording-only"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = ChromeService(executable_path="/usr/bin/chromedriver")
    d = webdriver.Chrome(options=o, service=service)
    d.set_page_load_timeout(30)
    yield d
    d.quit()


def shots_dir(tmp_path):
    d = pathlib.Path(os.environ.get("QPOOL_SCREENSHOTS", str(tmp_path / "screenshots")))
    d.mkdir(parents=True, exist_ok=True)
    return d


def rows(d, css):
    return d.find_elements(By.CSS_SELECTOR, css)


def goto(d, page, css, timeout=10):
    d.find_element(By.CSS_SELECTOR, 'a[data-page="%s"]' % page).click()
    wait_for(lambda: rows(d, css), timeout, what="the %s page (%s)" % (page, css))


def console_errors(d):
    return [e for e in d.get_log("browser") if e["level"] == "SEVERE"]


def foreign_requests(d, origin):
    urls = []
    for e in d.get_log("performance"):
        msg = json.loads(e["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return [u for u in urls if not u.startswith(origin) and not u.startswith("data:")], urls


def test_the_dashboard_shows_what_the_api_reports_and_acts(master_factory, redis_server, browser, tmp_path):
    r = redis_server.client()
    port = free_port()
    origin = "http://127.0.0.1:%d" % port
    log = tmp_path / "fixture.log"
    a = master_factory(redis_server, "a")
    a.write_config(pools(log), qpool='balance_interval = 0.5; http = { listen = "127.0.0.1:%d"; '
                                      'token_env = "QPOOL_TEST_TOKEN"; };' % port)
    a.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")  # its own process: up a moment later
    b = master_factory(redis_server, "b")
    b.write_config('{ name = "other"; queues = ["other"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
                   % FIXTURE_HANDLER, qpool="balance_interval = 0.5;")
    b.start()
    # a backlog, failures (one with a hostile name and payload), jobs done
    push_many(r, "reports", [make_payload("sleep:3000", job="App\\Jobs\\NightlyReport") for _ in range(20)])
    failing = [make_payload("fail", job="App\\Jobs\\FlakyWebhook") for _ in range(3)]
    hostile = make_payload("fail", job=XSS, note="</pre><script>alert(2)</script>", url="javascript:alert(3)")
    push_many(r, "emails", failing + [hostile] + [make_payload("ok", job="App\\Jobs\\SendMail") for _ in range(10)])
    wait_for(lambda: len(json.loads(get(port, "/api/failed", TOKEN)[2])["failed"]) == 4, 20, what="four failures")
    wait_for(lambda: len(json.loads(get(port, "/api/fleet")[2])["masters"]) == 2, 15, what="two masters")

    d = browser
    shots = shots_dir(tmp_path)
    d.get(origin + "/")
    wait_for(lambda: "qpool" in d.title, 10, what="the page")
    # an operator who has given the token (job records and payloads need it)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0])", TOKEN)

    # every page loads and shows what the API reports
    goto(d, "overview", "#main h1, #main h2, #main svg")
    time.sleep(1.5)  # charts and tables filled by the first polls
    d.save_screenshot(str(shots / "overview.png"))
    goto(d, "pools", 'tr[data-pool="emails"]')
    status = json.loads(get(port, "/api/status", TOKEN)[2])
    assert {e.get_attribute("data-pool") for e in rows(d, "tr[data-pool].pool, tr.pool[data-pool]")} >= \
        {p["name"] for p in status["pools"]}
    goto(d, "workers", "tr[data-pid]")
    api_pids = {c["pid"] for p in status["pools"] for c in p["children"]}
    shown = {int(e.get_attribute("data-pid")) for e in rows(d, "tr[data-pid]")}
    wait_for(lambda: api_pids <= {int(e.get_attribute("data-pid")) for e in rows(d, "tr[data-pid]")}, 10,
             what="every worker of the API on the page (%s vs %s)" % (api_pids, shown))
    goto(d, "hosts", "tr[data-host-id]")
    fleet = json.loads(get(port, "/api/fleet")[2])
    wait_for(lambda: {e.get_attribute("data-host-id") for e in rows(d, "tr[data-host-id]")}
             >= {m["id"] for m in fleet["masters"]}, 10, what="both masters on the hosts page")
    goto(d, "jobs", "tr[data-uuid]")
    recent = {j["uuid"] for j in json.loads(get(port, "/api/jobs/recent", TOKEN)[2])["jobs"]}
    assert {e.get_attribute("data-uuid") for e in rows(d, "tr[data-uuid]")} & recent
    goto(d, "metrics", "#main svg, #main table")
    goto(d, "failed", "tr[data-uuid]")
    failed = {f["uuid"] for f in json.loads(get(port, "/api/failed", TOKEN)[2])["failed"]}
    wait_for(lambda: {e.get_attribute("data-uuid") for e in rows(d, "tr[data-uuid]")} == failed, 10,
             what="the failed jobs the API reports")
    d.save_screenshot(str(shots / "failed.png"))

    # a hostile job renders as text
    d.get(origin + "/#/jobs/" + urllib.parse.quote(hostile["uuid"]))
    wait_for(lambda: d.find_element(By.ID, "job-name").text == XSS, 10, what="the job's name, as text")
    wait_for(lambda: "<script>alert(2)</script>" in d.find_element(By.ID, "job-payload").text, 10,
             what="the payload, as text")
    assert not d.find_elements(By.CSS_SELECTOR, "#main img[src='x'], #main script")
    with pytest.raises(NoAlertPresentException):
        d.switch_to.alert.text
    d.save_screenshot(str(shots / "job.png"))

    # no console errors, no request outside the origin
    assert console_errors(d) == []
    foreign, urls = foreign_requests(d, origin)
    assert urls and foreign == [], foreign

    # an action without the token is refused; with it, pause stops the pool
    d.execute_script("sessionStorage.removeItem('qpool.token')")
    d.get(origin + "/#/pools")
    wait_for(lambda: rows(d, 'tr[data-pool="emails"] button[data-action="pause"]'), 10, what="the pause button")
    rows(d, 'tr[data-pool="emails"] button[data-action="pause"]')[0].click()
    wait_for(lambda: d.find_element(By.ID, "notice").is_displayed(), 10, what="the refusal")
    assert "401" in d.find_element(By.ID, "notice").text or "unauthorized" in d.find_element(By.ID, "notice").text
    assert a.status(verbose=False)["pools"][0]["paused"] is False
    form = d.find_element(By.ID, "token-form")
    wait_for(form.is_displayed, 5, what="the token form")
    d.find_element(By.ID, "token-input").send_keys(TOKEN)
    form.find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()
    wait_for(lambda: a.status(verbose=False)["pools"][0]["paused"], 10, what="the pause, once the token is given")
    r.rpush(PREFIX + "queues:emails", json.dumps(make_payload("ok")))
    r.rpush(PREFIX + "queues:emails:notify", 1)
    time.sleep(1.5)
    assert r.llen(PREFIX + "queues:emails") == 1, "a paused pool took a job"
    wait_for(lambda: rows(d, 'tr[data-pool="emails"] button[data-action="continue"]'), 10, what="continue")
    rows(d, 'tr[data-pool="emails"] button[data-action="continue"]')[0].click()
    wait_for(lambda: r.llen(PREFIX + "queues:emails") == 0, 10, what="the job taken after continue")

    # scale to 3
    box = rows(d, 'input[data-scale="emails"]')[0]
    box.clear()
    box.send_keys("3")
    rows(d, 'tr[data-pool="emails"] button[data-action="scale"]')[0].click()
    wait_for(lambda: a.status(verbose=False)["pools"][0]["workers"] == 3, 15, what="three workers")

    # retry a failed job: it runs again
    uuid = failing[0]["uuid"]
    d.get(origin + "/#/failed")
    wait_for(lambda: rows(d, 'tr[data-uuid="%s"] button[data-action="retry"]' % uuid), 10, what="the retry button")
    rows(d, 'tr[data-uuid="%s"] button[data-action="retry"]' % uuid)[0].click()
    wait_for(lambda: len([l for l in read_fixture_log(log) if l[0] == "job" and l[2] == uuid]) == 2, 15,
             what="the retried job to run again")
    assert "control: pause pool emails over HTTP by 127.0.0.1" in a.log()


def test_bulk_retry_pages_until_nothing_is_left(master, r, browser, tmp_path):
    # review #8: the server retries a page per request; the dashboard goes on
    # with the cursor until none is left
    port = free_port()
    master.write_config(pools(tmp_path / "fixture.log"),
                        qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    fill_failed_store(r, "parked", [make_payload("ok") for _ in range(1200)])  # no pool takes them
    d = browser
    d.get("http://127.0.0.1:%d/#/failed" % port)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: rows(d, '#bulk-queue option[value="parked"]'), 15, what="the queue to retry")
    rows(d, '#bulk-queue option[value="parked"]')[0].click()
    rows(d, 'button[data-action="retry-queue"]')[0].click()
    wait_for(lambda: r.llen(PREFIX + "queues:parked") == 1200, 30, what="every page retried")
    wait_for(lambda: "1,200 retried" in d.find_element(By.ID, "notice").text, 10, what="the total")
    assert r.zcard(PREFIX + "qpool:failed:parked") == 0
    assert master.count_log(r"retried \d+ failed jobs \(queue parked\)") >= 3  # one line per page


def test_clicks_without_the_token_change_nothing(master, r, browser, tmp_path):
    port = free_port()
    master.write_config(pools(tmp_path / "fixture.log"),
                        qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")  # its own process: up a moment later
    push_many(r, "emails", [make_payload("fail")])
    wait_for(lambda: len(json.loads(get(port, "/api/failed", TOKEN)[2])["failed"]) == 1, 15, what="a failure")
    d = browser
    d.get("http://127.0.0.1:%d/#/pools" % port)
    wait_for(lambda: rows(d, 'tr[data-pool="emails"] button[data-action="restart"]'), 10, what="the pools page")
    for action in ("pause", "restart"):
        rows(d, 'tr[data-pool="emails"] button[data-action="%s"]' % action)[0].click()
        time.sleep(0.5)
        if d.find_element(By.ID, "token-form").is_displayed():
            d.find_element(By.ID, "token-cancel").click()
    # the failed jobs themselves need the token: the page asks for it, and shows none
    d.get("http://127.0.0.1:%d/#/failed" % port)
    wait_for(lambda: d.find_element(By.ID, "token-form").is_displayed(), 10, what="the token form")
    assert not rows(d, "tr[data-uuid]")
    st = master.status(verbose=False)["pools"][0]
    assert st["paused"] is False
    assert len(json.loads(get(port, "/api/failed", TOKEN)[2])["failed"]) == 1
    assert post(port, "/api/pools/emails/pause")[0] == 401
    assert "over HTTP" not in master.log()


def test_usable_at_phone_width(master, r, browser, tmp_path):
    port = free_port()
    master.write_config(pools(tmp_path / "fixture.log"),
                        qpool='http = { listen = "127.0.0.1:%d"; read_without_token = "all"; };' % port)
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")  # its own process: up a moment later
    d = browser
    d.set_window_size(390, 844)
    for page, css in (("overview", "#main h2"), ("pools", 'tr[data-pool="emails"]'), ("workers", "tr[data-pid]")):
        d.get("http://127.0.0.1:%d/#/%s" % (port, page))
        wait_for(lambda: rows(d, css), 10, what="the %s page" % page)
        # the page itself never scrolls sideways (wide tables scroll in their own box)
        assert d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1"), page
        assert rows(d, 'a[data-page="%s"]' % page)[0].is_displayed()
    d.save_screenshot(str(shots_dir(tmp_path) / "phone-workers.png"))
    assert console_errors(d) == []


def test_without_the_token_the_overview_shows_and_a_job_asks_for_it(master, r, browser, tmp_path):
    """Review 2026-11-24 #1: without the token the dashboard shows the
    overview (pools, queues, rates, charts) and asks for the token, saying
    why, where a page shows jobs; with it, the job's payload shows."""
    port = free_port()
    origin = "http://127.0.0.1:%d" % port
    master.write_config(pools(tmp_path / "fixture.log"), qpool='balance_interval = 0.5; http = { listen = "127.0.0.1:%d"; '
                                                              'token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")  # its own process: up a moment later
    secret = "reset-token-SECRET-123"
    bad = make_payload("fail", job="App\\Jobs\\SendPasswordReset", reset_token=secret)
    push_many(r, "emails", [bad] + [make_payload("ok", job="App\\Jobs\\SendMail") for _ in range(5)])
    push_many(r, "reports", [make_payload("sleep:3000", job="App\\Jobs\\NightlyReport") for _ in range(5)])
    wait_for(lambda: get(port, "/api/jobs/" + bad["uuid"], TOKEN)[0] == 200, 20, what="the failure recorded")
    d = browser
    d.get(origin + "/#/overview")
    # the overview: cards, hosts, charts, the queues, with no token asked for
    wait_for(lambda: rows(d, "#overview-cards .card") and rows(d, '#overview-queues tr[data-queue="emails"]')
             and rows(d, "#overview-charts svg"), 15, what="the overview without the token")
    wait_for(lambda: rows(d, '#overview-queues tr[data-queue="reports"]'), 10, what="every queue")
    assert not d.find_element(By.ID, "token-form").is_displayed()
    assert "Workers" in page_text(d, "#overview-cards")
    goto(d, "pools", 'tr[data-pool="emails"]')
    assert not d.find_element(By.ID, "token-form").is_displayed()
    # a job's page: the token, and why
    d.get(origin + "/#/jobs/" + urllib.parse.quote(bad["uuid"]))
    wait_for(lambda: d.find_element(By.ID, "token-form").is_displayed(), 10, what="the token form")
    why = d.find_element(By.CSS_SELECTOR, "#token-form label").text
    assert "payload" in why and "token" in why, why
    wait_for(lambda: rows(d, "#needs-token"), 10, what="the page saying it needs the token")
    assert "payload" in page_text(d, "#needs-token")
    assert secret not in page_text(d, "#main")
    d.save_screenshot(str(shots_dir(tmp_path) / "job-needs-token.png"))
    # the failed jobs too; leaving for the overview, the ask goes and the overview polls again
    goto(d, "failed", "#needs-token")
    assert "Failed jobs" in d.find_element(By.CSS_SELECTOR, "#token-form label").text
    goto(d, "overview", '#overview-queues tr[data-queue="emails"]')
    assert not d.find_element(By.ID, "token-form").is_displayed()
    before = page_text(d, "#last-updated")
    wait_for(lambda: page_text(d, "#last-updated") != before, 10, what="the overview polling")
    d.get(origin + "/#/jobs/" + urllib.parse.quote(bad["uuid"]))
    wait_for(lambda: d.find_element(By.ID, "token-form").is_displayed(), 10, what="the token form again")
    # with it, the payload shows
    d.find_element(By.ID, "token-input").send_keys(TOKEN)
    d.find_element(By.CSS_SELECTOR, '#token-form button[type="submit"]').click()
    wait_for(lambda: rows(d, "#job-payload") and secret in (page_text(d, "#job-payload") or ""), 10,
             what="the payload, with the token")
    assert not rows(d, "#needs-token")
    assert "SendPasswordReset" in page_text(d, "#job-name")
    # and back on the overview, nothing is asked
    goto(d, "overview", '#overview-queues tr[data-queue="emails"]')
    assert not d.find_element(By.ID, "token-form").is_displayed()
    assert console_errors(d) == [] or all("401" in e["message"] for e in console_errors(d)), console_errors(d)
