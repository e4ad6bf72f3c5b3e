"""Issue 31 item 4 in a real browser: the Pending page lists what waits in
a queue in pages (the URL keeps the queue, the filters and the page: back
goes to the previous page), links each job to its page, and shows a hostile
class name as text."""
import json

import pytest

from conftest import PREFIX, free_port, make_payload, page_attrs, wait_for
from test_failed_search import TOKEN, get, pool
from test_pending import HOSTILE, seed

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture
rows = test_dashboard.rows


def shown(d):
    """(position, uuid, the job link's text and href) of the table's rows, read in one step."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#pending-list-table tbody tr[data-uuid]')).map(function (r) {"
        " var a = r.querySelector('a[href^=\"#/jobs/\"]');"
        " return [r.cells[0].textContent, r.getAttribute('data-uuid'), a ? a.textContent : null,"
        " a ? a.getAttribute('href') : null]; })")


def test_the_pending_page_shows_a_queue_in_pages_with_hostile_text_as_text(master, r, browser, tmp_path):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: get(port, "/healthz")[0] == 200, 15, what="the HTTP endpoint")
    evil = make_payload("ok", job=HOSTILE)
    r.rpush(PREFIX + "queues:pp-web", json.dumps(evil))
    ready, delayed = seed(r, "pp-web", n_ready=500, n_delayed=0)
    d = browser
    origin = "http://127.0.0.1:%d" % port
    d.get(origin + "/#/pending?queue=pp-web&order=oldest")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: len(shown(d)) == 100, 20, what="the first page")
    first = shown(d)
    assert first[0][1] == evil["uuid"] and first[0][2] == HOSTILE
    assert first[0][3] == "#/jobs/" + evil["uuid"]
    assert [x[1] for x in first[1:]] == [p["uuid"] for p in ready[:99]]
    # the hostile name is text: no element was made of it, nothing ran
    assert not d.find_elements(By.CSS_SELECTOR, "#pending-list-table img") and d.title != "pwned"
    d.save_screenshot(str(test_dashboard.shots_dir(tmp_path) / "pending.png"))
    # the next page: the URL keeps it; back goes to the first
    d.find_element(By.ID, "pending-list-next").click()
    wait_for(lambda: shown(d) and shown(d)[0][1] == ready[99]["uuid"], 20, what="the second page")
    assert "offset=100" in d.current_url and "queue=pp-web" in d.current_url
    d.refresh()
    wait_for(lambda: shown(d) and shown(d)[0][1] == ready[99]["uuid"], 20, what="the second page after a reload")
    d.back()
    wait_for(lambda: shown(d) and shown(d)[0][1] == evil["uuid"], 20, what="the first page after back")
    # a filter from the form: the class, kept in the URL
    d.find_element(By.ID, "pending-list-class").send_keys("App\\Jobs\\SyncCrm")
    d.find_element(By.ID, "pending-list-go").click()
    want = [p["uuid"] for p in ready if p["displayName"] == "App\\Jobs\\SyncCrm"]
    wait_for(lambda: [x[1] for x in shown(d)] == want[:100], 20, what="the class's jobs")
    assert "SyncCrm" in d.current_url
    # a text found past the first request's 1,000 jobs: the page goes on by itself
    big, _ = seed(r, "pp-big", n_ready=1200, n_delayed=0)
    d.get(origin + "/#/pending?queue=pp-big&q=inv-0005")
    wait_for(lambda: [x[1] for x in shown(d)] == [big[5]["uuid"]], 20, what="the match past 1,000 jobs")
    # a payload's tag links to this queue's jobs with that tag
    tagged = make_payload("ok", job="App\\Jobs\\Tagged", tags=["<i>vip</i>"])
    r.rpush(PREFIX + "queues:pp-web", json.dumps(tagged))
    d.get(origin + "/#/pending?queue=pp-web")
    wait_for(lambda: rows(d, "#pending-list-table a.tag"), 20, what="the tagged job")
    assert page_attrs(d, "#pending-list-table a.tag") == ["<i>vip</i>"]
    d.execute_script("document.querySelector('#pending-list-table a.tag').click()")
    wait_for(lambda: [x[1] for x in shown(d)] == [tagged["uuid"]], 20, what="the tag's jobs")
    assert not rows(d, "#pending-list-table i")
