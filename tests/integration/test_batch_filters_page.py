"""Issue 32: the Batches page's filters (q, status, since, until) are in its
URL (bookmarkable, the back button returns to the previous filter) and the
list is filtered on the server (GET /api/batches). Chromium, the fixture
Laravel app, real Redis and processes. No timing is asserted."""
import pytest

from conftest import free_port, wait_for
from test_batches import batch, row, start
from test_http import TOKEN

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402
from test_batches_page import listed  # noqa: E402

browser = test_dashboard.browser  # the fixture


def shown(d):
    return {x[0] for x in listed(d)}


def test_the_batches_page_keeps_its_filter_in_the_url(master, laravel_app, browser, tmp_path):
    port = free_port()
    bad, fine = start(master, laravel_app, tmp_path, port, ["--count=3", "--fail=1", "--name=cancel me"],
                      ["--count=1", "--name=Fine Export"])
    wait_for(lambda: (lambda x: x and x["cancelled_at"])(batch(port, bad)), 90, what="the batch cancelled")
    wait_for(lambda: row(laravel_app, fine)[0] == 0, 90, what="the other batch done")
    d = browser
    origin = "http://127.0.0.1:%d" % port
    d.get(origin + "/#/overview")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]);", TOKEN)
    d.get(origin + "/#/batches")
    wait_for(lambda: shown(d) == {bad, fine}, 30, what="both batches listed")
    # the form: status "cancelled"
    d.execute_script("document.getElementById('batches-status').value = 'cancelled';")
    d.find_element(By.ID, "batches-go").click()
    wait_for(lambda: d.current_url.endswith("#/batches?status=cancelled"), 30, what="the filter in the URL")
    wait_for(lambda: shown(d) == {bad}, 30, what="only the cancelled batch")
    # a bookmark: text and a time range
    d.get(origin + "/#/batches?q=export&since=1h")
    wait_for(lambda: shown(d) == {fine}, 30, what="only the export")
    assert d.find_element(By.ID, "batches-q").get_attribute("value") == "export"
    assert d.find_element(By.ID, "batches-since").get_attribute("value") == "1h"
    d.back()
    wait_for(lambda: shown(d) == {bad}, 30, what="back: the cancelled filter again")
    assert d.find_element(By.ID, "batches-status").get_attribute("value") == "cancelled"
