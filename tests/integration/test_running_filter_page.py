"""Issue 32 item 1 in a real browser: the Running page filters on the
server (class, queue, pool, host, tag, past their timeout), shows each
job's tags (each a link to the jobs with it) and its URL keeps
the filter (a reload shows the same, back goes to the whole list)."""
import urllib.parse

import pytest

from conftest import free_port, make_payload, push, wait_for
from test_http import TOKEN, code, http_conf
from test_list_filters import A, B, pool

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture


def shown(d):
    return sorted(d.execute_script("return Array.from(document.querySelectorAll('#running-table tr[data-uuid]'))"
                                   ".map(function (r) { return r.getAttribute('data-uuid'); })"))


def test_the_running_page_filters_on_the_server_and_keeps_it_in_the_url(master, r, browser):
    port = free_port()
    master.write_config(pool("rf-a", "rf-qa") + ", " + pool("rf-b", "rf-qb"),
                        qpool="balance_interval = 0.2; " + http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    ja, jb = make_payload("hang", job=A, tags=["App\\Models\\Customer:42"]), make_payload("hang", job=B)
    push(r, "rf-qa", ja)
    push(r, "rf-qb", jb)
    d = browser
    d.get("http://127.0.0.1:%d/#/running" % port)
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    both = sorted([ja["uuid"], jb["uuid"]])
    wait_for(lambda: shown(d) == both, 30, what="both jobs")
    d.find_element(By.ID, "running-class").send_keys(B)
    d.find_element(By.ID, "running-go").click()
    wait_for(lambda: shown(d) == [jb["uuid"]], 20, what="the class's job only")
    frag = urllib.parse.unquote(d.current_url.split("#", 1)[1])
    assert frag.startswith("/running?") and B in frag
    d.refresh()
    wait_for(lambda: shown(d) == [jb["uuid"]], 20, what="the same after a reload")
    assert d.find_element(By.ID, "running-class").get_attribute("value") == B
    d.back()
    wait_for(lambda: shown(d) == both, 20, what="the whole list after back")
    # a job's tag links to the running jobs with that tag
    tag_link = '#running-table tr[data-uuid="%s"] .tags a' % ja["uuid"]
    wait_for(lambda: d.execute_script("var a = document.querySelector(arguments[0]); return a && a.textContent", tag_link)
             == "App\\Models\\Customer:42", 20, what="the tag shown")
    d.execute_script("document.querySelector(arguments[0]).click()", tag_link)
    wait_for(lambda: shown(d) == [ja["uuid"]], 20, what="the tag's job only")
    assert d.find_element(By.ID, "running-tag").get_attribute("value") == "App\\Models\\Customer:42"
    d.get("http://127.0.0.1:%d/#/running?status=past_timeout" % port)
    wait_for(lambda: "No job is running" in d.find_element(By.ID, "running").text, 20, what="none past its timeout")
    assert shown(d) == [] and d.find_element(By.ID, "running-status").get_attribute("value") == "past_timeout"
