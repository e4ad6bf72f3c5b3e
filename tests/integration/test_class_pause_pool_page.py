"""Pause by job class in one pool from the dashboard's Pools page (issue 32
item 4), in headless Chromium: the form's pool choice sends {"pool": P},
the list shows the pool, and its Continue ends that pool's pause."""
import pytest

from conftest import free_port, wait_for
from test_class_pause import A, PAUSED_KEY, TOKEN, handler, http
from test_class_pause_pool import pools

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.support.ui import Select  # noqa: E402
from test_dashboard import browser, rows  # noqa: E402,F401  (the fixture)


def test_pause_class_in_one_pool_from_the_pools_page(master, r, browser, tmp_path):  # noqa: F811
    path, log = handler(tmp_path)
    port = free_port()
    master.write_config(pools(path), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: http(port, "GET", "/healthz")[0] == 200, 30, what="the HTTP endpoint")
    d = browser
    d.get("http://127.0.0.1:%d/#/pools" % port)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: rows(d, '#class-pause-pool option[value="p1"]'), 20, what="the pools to pick from")
    Select(rows(d, "#class-pause-pool")[0]).select_by_value("p1")
    rows(d, "#class-pause-class")[0].send_keys(A)
    rows(d, "#class-pause")[0].click()
    wait_for(lambda: r.hkeys(PAUSED_KEY) == [(A + "@p1").encode()], 30, what="the class paused in pool p1")
    sel = 'tr[data-paused-pool="p1"] button[data-action="continue"]'
    wait_for(lambda: rows(d, sel), 30, what="the pool's pause listed with Continue")
    rows(d, sel)[0].click()
    wait_for(lambda: not r.exists(PAUSED_KEY), 30, what="the class continued in pool p1")
