"""The dashboard of an app with no Redis at all (issue 30, item 4), in
Chromium: the live pages (the overview's cards and queues, the pools, the
workers) come from the master's own state; what needs a Redis (the charts'
history, the fleet) says so once ("No Redis: ..."), not as a failure to
load. The host's Laravel only (the app itself is test_no_redis.py's, on
every version). No timing asserted: each wait is for a state."""
import pytest

from conftest import free_port, page_text, wait_for
from laravel_roots import HOST_VERSIONS, Version
from test_no_redis import TOKEN, app, conf_text, get, trap  # noqa: F401 (fixtures)
from test_app_driver import dispatch, jobs_left

webdriver = pytest.importorskip("selenium.webdriver")
import test_dashboard  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

browser = test_dashboard.browser  # the fixture
HOST = HOST_VERSIONS


@pytest.fixture(scope="module", params=HOST, ids=lambda v: "laravel" + v)
def laravel_version(request):
    return Version(request.param, None)


def rows(d, css):
    return d.find_elements(By.CSS_SELECTOR, css)


def test_the_dashboards_live_pages_work_without_redis(master_factory, app, trap, browser):
    m = master_factory()
    port = free_port()
    m.conf.write_text(conf_text(m, app, port))
    dispatch(app, "MarkerJob", count=2, tag="d")
    m.start(env={"QPOOL_NR_TOKEN": TOKEN})
    try:
        wait_for(lambda: not jobs_left(app), 90, interval=0.25, what="the database queue to drain")
        wait_for(lambda: get(port, "/healthz")[0] == 200, 30, what="/healthz")
        d = browser
        d.get("http://127.0.0.1:%d/" % port)
        wait_for(lambda: "qpool" in d.title, 10, what="the page")
        d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.hash = '#/overview';"
                         " location.reload();", TOKEN)
        wait_for(lambda: rows(d, "#overview-cards .card") and rows(d, '#overview-queues tr[data-queue="default"]'),
                 20, what="the overview's cards and queue")
        assert "Workers" in page_text(d, "#overview-cards")
        def notice_says(what):
            return d.find_element(By.ID, "notice").is_displayed() and what in (page_text(d, "#notice") or "")
        wait_for(lambda: notice_says("No Redis:"), 20, what="the no-Redis notice")
        assert "Could not load" not in page_text(d, "#notice")
        test_dashboard.goto(d, "pools", 'tr[data-pool="appq"]', timeout=20)
        test_dashboard.goto(d, "workers", "tr[data-pid]", timeout=20)
        pids = {int(e.get_attribute("data-pid")) for e in rows(d, "tr[data-pid]")}
        assert pids & {c["pid"] for c in m.pool("appq")["children"]}
        assert not d.find_element(By.ID, "token-form").is_displayed()
        # the Running page (this master's own jobs) and the batches (the app
        # agent's) load; the hosts (the fleet) say no Redis; the HTTP process
        # never restarts
        d.find_element(By.CSS_SELECTOR, 'a[data-page="running"]').click()
        wait_for(lambda: "running job" in d.find_element(By.ID, "running-count").text, 20, what="the Running page")
        d.find_element(By.CSS_SELECTOR, 'a[data-page="batches"]').click()
        wait_for(lambda: rows(d, "#batches-table") or "No job batches." in (page_text(d, "#batches") or ""), 20,
                 what="the Batches page")
        d.find_element(By.CSS_SELECTOR, 'a[data-page="hosts"]').click()
        wait_for(lambda: notice_says("No Redis:"), 20, what="the Hosts page's notice")
        assert get(port, "/healthz")[0] == 200
        assert "killed by signal" not in m.log(), m.log()[-3000:]
    finally:
        rc = m.stop(60)
    assert rc == 0
    assert trap.accepted == 0
