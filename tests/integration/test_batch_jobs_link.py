"""Issue 31 item 3, "the detail page links each job to its job page": a
batch's page links to the Jobs page filtered by the batch's id (the text of
its jobs' payloads), which lists its done jobs (job_history_payloads on) and links each to its
page, while the batch's page links its failed ones; another
batch's jobs are not among them. Chromium, the fixture Laravel app, real
Redis and processes. No timing is asserted."""
import sqlite3

import pytest

from conftest import free_port, wait_for
from test_batches import batch_pool, dispatch_batch, two_batches_settled
from test_http import OPEN_READS, TOKEN, code, http_conf

webdriver = pytest.importorskip("selenium.webdriver")
import test_dashboard  # noqa: E402
from test_batches_page import failed_links, open_batch_page  # noqa: E402

browser = test_dashboard.browser  # the fixture


def start(master, app, tmp_path, port, *batches):
    """As test_batches.start, with the done jobs' payloads kept in the history."""
    con = sqlite3.connect(str(app.db))
    con.execute("pragma journal_mode=wal")
    con.close()
    (tmp_path / "fail-once").mkdir(exist_ok=True)
    app.env["FAIL_ONCE_DIR"] = str(tmp_path / "fail-once")
    app.env["DB_BUSY_TIMEOUT"] = "20"
    ids = [dispatch_batch(app, *b) for b in batches]
    master.write_config(batch_pool(app), qpool="  job_history_payloads = true;\n" +
                        http_conf(port, 'token_env = "QPOOL_TEST_TOKEN"; ' + OPEN_READS))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    return ids


def listed(d):
    """(uuid, the job link's href) of the Jobs table's rows, read in one step."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#jobs-table tbody tr[data-uuid]')).map(function (r) {"
        " var a = r.querySelector('a[href^=\"#/jobs/\"]'); return [r.getAttribute('data-uuid'),"
        " a ? a.getAttribute('href') : null]; })")


def test_a_batch_page_links_to_each_of_its_jobs(master, laravel_app, browser, tmp_path):
    port = free_port()
    bid, other = two_batches_settled(master, laravel_app, tmp_path, port, start=start)
    d = browser
    open_batch_page(d, port, bid)
    wait_for(lambda: d.execute_script("return document.querySelector('a[data-action=\"batch-jobs\"]')"), 30,
             what="the batch's page")
    wait_for(lambda: len(failed_links(d)) == 1, 30, what="the failed job linked on the batch's page")
    assert failed_links(d)[0].startswith("#/jobs/")
    d.execute_script("document.querySelector('a[data-action=\"batch-jobs\"]').click()")
    shown = wait_for(lambda: (lambda x: x if len(x) >= 2 else None)(listed(d)), 30, what="the batch's 2 done jobs")
    assert len(shown) == 2 and len({u for u, _ in shown}) == 2, shown
    assert all(h == "#/jobs/" + u for u, h in shown), shown
    assert "q=" + bid in d.current_url
    # the other batch's jobs are not among them; back returns to the batch
    d.execute_script("location.hash = arguments[0]", "#/jobs?q=" + other)
    wait_for(lambda: len(listed(d)) == 2 and not {u for u, _ in listed(d)} & {u for u, _ in shown}, 30,
             what="the other batch's 2 jobs only")
    d.back()
    d.back()
    wait_for(lambda: d.current_url.endswith("#/batches/" + bid), 20, what="back to the batch")
