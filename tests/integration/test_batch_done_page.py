"""Issue 31, "the batch's jobs" on the dashboard (brief batchdone): a batch's
page lists its jobs run, done and failed, each linked to its job page, with
class and outcome, and not another batch's. Chromium, the fixture Laravel
app, real Redis and processes; no timing is asserted."""
import pytest

from conftest import free_port, wait_for
from test_batch_done import JOB, with_jobs
from test_batches import two_batches_settled

webdriver = pytest.importorskip("selenium.webdriver")
import test_dashboard  # noqa: E402
from test_batches_page import open_batch_page  # noqa: E402

browser = test_dashboard.browser  # the fixture


def done_rows(d):
    """(uuid, the job link's href, class, outcome) of the batch's jobs table, read in one step."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#batch-done tbody tr[data-uuid]')).map(function (r) {"
        " var a = r.querySelector('a[href^=\"#/jobs/\"]'); return [r.getAttribute('data-uuid'),"
        " a ? a.getAttribute('href') : null, r.cells[1].textContent, r.cells[2].textContent]; })")


def test_a_batch_page_lists_its_jobs_run(master, laravel_app, browser, tmp_path):
    port = free_port()
    bid, other = two_batches_settled(master, laravel_app, tmp_path, port)
    api = wait_for(lambda: with_jobs(port, bid, 3), 60, what="the batch's 3 jobs in the API")
    d = browser
    open_batch_page(d, port, bid)
    got = wait_for(lambda: (lambda r: r if len(r) == 3 else None)(done_rows(d)), 30, what="the batch's jobs on its page")
    assert {r[0] for r in got} == {j["uuid"] for j in api["jobs"]}, got
    assert all(r[1] == "#/jobs/" + r[0] and r[2] == JOB for r in got), got
    assert sorted(r[3] for r in got) == ["done", "done", "failed"], got
