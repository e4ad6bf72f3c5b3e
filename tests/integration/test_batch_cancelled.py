"""Issue 31 item 3's cancelled state: a batch that does not allow failures is
cancelled by Laravel at its first failed job; /api/batches/<id> carries its
cancelled_at, and the Batches list and the batch's page show it as
"cancelled" with the time (Chromium, the fixture Laravel app, real Redis and
processes; Laravel 8 and 13). No timing is asserted."""
import pytest

from conftest import free_port, wait_for
from laravel_roots import laravel_version, version_app  # noqa: F401 (fixtures)
from test_batches import batch, row, start
from test_http import TOKEN

webdriver = pytest.importorskip("selenium.webdriver")
import test_dashboard  # noqa: E402
from test_batches_page import field, listed  # noqa: E402

browser = test_dashboard.browser  # the fixture


def test_a_cancelled_batch_is_shown_as_cancelled(master, laravel_app, browser, tmp_path):
    shown_cancelled(master, laravel_app, browser, tmp_path)


@pytest.mark.parametrize("laravel_version", ["13"], indirect=True)
def test_the_same_on_laravel_13(master, version_app, browser, tmp_path):
    shown_cancelled(master, version_app, browser, tmp_path)


def shown_cancelled(master, laravel_app, browser, tmp_path):
    port = free_port()
    bid, fine = start(master, laravel_app, tmp_path, port, ["--count=3", "--fail=1", "--name=cancel me"],
                      ["--count=1", "--name=fine"])
    b = wait_for(lambda: (lambda x: x if x and x["cancelled_at"] else None)(batch(port, bid)), 90,
                 what="the batch cancelled in /api/batches")
    assert b["failed"] >= 1 and b["name"] == "cancel me", b
    wait_for(lambda: row(laravel_app, fine)[0] == 0, 90, what="the other batch done")
    d = browser
    origin = "http://127.0.0.1:%d" % port
    d.get(origin + "/#/overview")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]);", TOKEN)
    d.get(origin + "/#/batches")
    wait_for(lambda: {x[0]: x[4] for x in listed(d)}.get(bid) == "cancelled", 30, what="cancelled in the list")
    wait_for(lambda: {x[0]: x[4] for x in listed(d)}.get(fine) == "finished", 30, what="the other finished")
    d.get(origin + "/#/batches/" + bid)
    wait_for(lambda: field(d, "state") == "cancelled", 30, what="cancelled on the batch's page")
    assert field(d, "cancelled") not in (None, "", "–"), field(d, "cancelled")
