"""Issue 31's batches acceptance in a real browser: the Batches page lists a
batch of 10 with 2 failures at 80 % and 2 failed, its page shows the failed
jobs, "Retry failed jobs" reruns those 2 and the batch finishes; deep links
and the back button work, and a hostile batch name is text."""
import pytest

from conftest import free_port, wait_for
from test_batches import row, start
from test_http import TOKEN

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture
rows = test_dashboard.rows

HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"


def listed(d):
    """(id, link text, progress, failed, state) of the list's rows, read in one step."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#batches-table tbody tr[data-batch]')).map(function (r) {"
        " return [r.getAttribute('data-batch'), r.cells[0].textContent, r.querySelector('progress').value,"
        " r.cells[5].textContent, r.cells[6].textContent]; })")


def field(d, key):
    """A row of the batch's summary, read in one step (the page redraws as the batch moves)."""
    return d.execute_script("var e = document.querySelector('#batch-summary dd[data-k=\"' + arguments[0] + '\"]');"
                            " return e ? e.textContent : null;", key)


def failed_links(d):
    return d.execute_script("return Array.from(document.querySelectorAll('#batch-failed a'))"
                            ".map(function (a) { return a.getAttribute('href'); })")


def open_batch_page(d, port, bid):
    """Browser d on batch bid's page, with the token in the session."""
    origin = "http://127.0.0.1:%d" % port
    d.get(origin + "/#/overview")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]);", TOKEN)
    d.get(origin + "/#/batches/" + bid)


def test_the_batches_page_shows_progress_and_retries_failed_jobs(master, laravel_app, browser, tmp_path):
    port = free_port()
    (bid,) = start(master, laravel_app, tmp_path, port,
                   ["--count=10", "--fail=2", "--name=" + HOSTILE, "--allow-failures"])
    wait_for(lambda: row(laravel_app, bid)[0] == 2 and row(laravel_app, bid)[1] == 2, 90,
             what="8 jobs done and 2 failed in job_batches")
    d = browser
    origin = "http://127.0.0.1:%d" % port
    d.get(origin + "/#/overview")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]);", TOKEN)
    test_dashboard.goto(d, "batches", "#batches-table", timeout=20)
    wait_for(lambda: [x for x in listed(d) if x[0] == bid and x[3] == "2"], 30, what="the batch in the list")
    (got,) = [x for x in listed(d) if x[0] == bid]
    assert got[1] == HOSTILE and got[2] == 80 and got[4] == "failures", got
    assert not rows(d, "#batches-table img") and d.title != "pwned"
    d.save_screenshot(str(test_dashboard.shots_dir(tmp_path) / "batches.png"))
    # its page: a deep link, with the failed jobs linked to their pages
    d.execute_script("document.querySelector('#batches-table tr[data-batch=\"' + arguments[0] + '\"] a').click()", bid)
    wait_for(lambda: field(d, "failed") == "2", 20, what="the batch's page")
    assert d.current_url.endswith("#/batches/" + bid)
    assert field(d, "processed") == "8" and "80 %" in field(d, "progress") and field(d, "name") == HOSTILE
    links = failed_links(d)
    assert len(links) == 2 and all(h.startswith("#/jobs/") for h in links), links
    # retry: the 2 run again and the batch finishes
    d.execute_script("document.querySelector('button[data-action=\"retry-batch\"]').click()")
    wait_for(lambda: field(d, "pending") == "0" and field(d, "state") == "finished", 90,
             what="the batch finished after the retry")
    assert field(d, "processed") == "10" and "100 %" in field(d, "progress")
    assert failed_links(d) == [] and laravel_app.failed_jobs() == []
    assert not rows(d, "#page-batches img") and d.title != "pwned"
    d.save_screenshot(str(test_dashboard.shots_dir(tmp_path) / "batch.png"))
    # back: the list again, and a reload of a deep link shows the batch
    d.back()
    wait_for(lambda: [x for x in listed(d) if x[0] == bid and x[4] == "finished"], 30, what="the list after back")
    d.get(origin + "/#/batches/" + bid)
    wait_for(lambda: field(d, "state") == "finished", 20, what="the deep link")
    d.get(origin + "/#/batches/no-such-batch")
    wait_for(lambda: "No batch no-such-batch" in d.find_element(By.ID, "batch").text, 20, what="a batch not found")
    assert not test_dashboard.console_errors(d) or all("404" in e["message"] for e in test_dashboard.console_errors(d))
