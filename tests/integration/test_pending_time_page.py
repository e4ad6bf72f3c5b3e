"""Issue 32: the Pending page's since/until (on when a job was pushed) come
from its form and stay in its URL. Chromium, real redis-server, real
processes."""
import pytest

from conftest import free_port, wait_for
from test_failed_search import TOKEN, get, pool
from test_pending_time import seed

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402
from test_pending_page import shown  # noqa: E402

browser = test_dashboard.browser  # the fixture


def test_the_pending_page_filters_by_when_jobs_were_pushed(master, r, browser):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: get(port, "/healthz")[0] == 200, 15, what="the HTTP endpoint")
    jobs, NOW = seed(r, "ptp-q")
    recent = {u for u, at in jobs.items() if at is not None and at >= NOW - 1800}
    d = browser
    origin = "http://127.0.0.1:%d" % port
    d.get(origin + "/#/pending?queue=ptp-q")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: len(shown(d)) == 85, 20, what="every job")
    d.find_element(By.ID, "pending-list-since").send_keys("30m")
    d.find_element(By.ID, "pending-list-go").click()
    wait_for(lambda: {x[1] for x in shown(d)} == recent, 20, what="the jobs pushed in the last 30 minutes")
    assert "since=30m" in d.current_url
    d.refresh()
    wait_for(lambda: {x[1] for x in shown(d)} == recent, 20, what="the same after a reload")
    assert d.find_element(By.ID, "pending-list-since").get_attribute("value") == "30m"
