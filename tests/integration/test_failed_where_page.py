"""Issue 32 (its last gaps) in a real browser: the Failed page's Pool and
Host boxes send their filter to the server's search, and the URL keeps it
(a reload shows the same). The records are real workers' failures."""
import urllib.parse

import pytest

from test_failed_where import HOST, TOKEN, failed  # noqa: F401 (the fixture)

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402

from conftest import wait_for  # noqa: E402

browser = test_dashboard.browser  # the fixture


def shown(d):
    return sorted(d.execute_script("return Array.from(document.querySelectorAll('#failed-table tr[data-uuid]'))"
                                   ".map(function (r) { return r.getAttribute('data-uuid'); })"))


def test_the_failed_page_filters_on_pool_and_host(failed, browser):  # noqa: F811
    port, jobs, old = failed
    d = browser
    d.get("http://127.0.0.1:%d/#/failed" % port)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: shown(d) == sorted(jobs["fw-a"] + jobs["fw-b"] + [old]), 30, what="every failed job")
    d.find_element(By.ID, "failed-pool").send_keys("fw-b")
    d.find_element(By.ID, "failed-host").send_keys(HOST)
    d.find_element(By.ID, "failed-go").click()
    wait_for(lambda: shown(d) == sorted(jobs["fw-b"]), 20, what="the pool's failures only")
    frag = urllib.parse.unquote(d.current_url.split("#", 1)[1])
    assert frag.startswith("/failed?") and "pool=fw-b" in frag and "host=" + HOST in frag
    d.refresh()
    wait_for(lambda: shown(d) == sorted(jobs["fw-b"]), 20, what="the same after a reload")
    assert d.find_element(By.ID, "failed-pool").get_attribute("value") == "fw-b"
    # review of g32c, SHOULD 6: the table shows each record's pool and host (an old record: a dash)
    cells = d.execute_script(
        "var t = document.getElementById('failed-table');"
        "var h = Array.from(t.querySelectorAll('th')).map(function (x) { return x.textContent.trim(); });"
        "var p = h.indexOf('Pool'), o = h.indexOf('Host');"
        "return Array.from(t.querySelectorAll('tr[data-uuid]')).map(function (r) {"
        "  var c = r.querySelectorAll('td'); return [r.getAttribute('data-uuid'),"
        "  p < 0 ? null : c[p].textContent, o < 0 ? null : c[o].textContent]; });")
    assert sorted(cells) == sorted([[u, "fw-b", HOST] for u in jobs["fw-b"]]), cells
    d.get("http://127.0.0.1:%d/#/failed" % port)
    wait_for(lambda: old in shown(d), 30, what="every failed job again")
    assert d.execute_script(
        "var t = document.getElementById('failed-table');"
        "var h = Array.from(t.querySelectorAll('th')).map(function (x) { return x.textContent.trim(); });"
        "var r = t.querySelector('tr[data-uuid=\"' + arguments[0] + '\"]').querySelectorAll('td');"
        "return [r[h.indexOf('Pool')].textContent, r[h.indexOf('Host')].textContent];", old) == ["\u2013", "\u2013"]
