"""The dashboard shows a pool's fleet budget (issue 22): slots held of the
budget, and when the pool waits for budget. Headless Chromium, as
test_dashboard.py."""
import pytest

pytest.importorskip("selenium")

from selenium.webdriver.common.by import By  # noqa: E402

from conftest import FIXTURE_HANDLER, free_port, make_payload, push_many, wait_for  # noqa: E402
from test_dashboard import browser, goto, shots_dir  # noqa: E402,F401 (the fixture)
from test_http import code  # noqa: E402


def test_pool_rows_show_the_budget_and_the_wait(master_factory, redis_server, browser, tmp_path):  # noqa: F811
    port = free_port()
    ms = []
    for name, http in (("a", 'http = { listen = "127.0.0.1:%d"; };' % port), ("b", "")):
        m = master_factory(redis_server, name)
        m.write_config('{ name = "work"; queues = ["work"]; balance = "auto"; min_processes = 1; max_processes = 6;'
                       ' fleet_max_processes = 4; handler = { type = "pipe"; command = ["%s"]; }; }' % FIXTURE_HANDLER,
                       qpool=http)
        ms.append(m.start())
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")  # its own process: up a moment later
    push_many(redis_server.client(), "work", [make_payload("sleep:300") for _ in range(2000)])
    wait_for(lambda: ms[0].pool("work")["fleet_budget"]["held"] == 2 and ms[0].pool("work")["fleet_budget"]["waiting"],
             30, what="a holding 2 of 4 and waiting")
    d = browser
    d.get("http://127.0.0.1:%d/" % port)
    wait_for(lambda: "qpool" in d.title, 10, what="the page")
    goto(d, "pools", '[data-budget="work"]')
    text = lambda: d.find_element(By.CSS_SELECTOR, '[data-budget="work"]').text  # noqa: E731
    wait_for(lambda: text() == "budget 2/4 held · waiting for budget", 10, what="the budget in the pool row")
    d.save_screenshot(str(shots_dir(tmp_path) / "pool-budget.png"))
    goto(d, "hosts", "tr.host")
    wait_for(lambda: d.find_element(By.ID, "hosts-table").text.count("budget 2/4 held") == 2, 15,
             what="both hosts' budgets")
