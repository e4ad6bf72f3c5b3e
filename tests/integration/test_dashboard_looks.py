"""Issue 31 item 5 in Chromium: dark mode follows prefers-color-scheme and a
header toggle overrides it (kept in localStorage, back to the system's when
the choice matches it); times are shown in the browser's time zone; every
page the issue added (Pending, Completed, Silenced, Monitoring, Batches,
Limits) is a deep link and the back button walks them. No timing asserted."""
import json

import pytest

from conftest import PREFIX, free_port, make_payload, wait_for
from test_failed_search import TOKEN, get, pool

webdriver = pytest.importorskip("selenium.webdriver")
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture

DARK_BG, LIGHT_BG = "rgb(17, 20, 24)", "rgb(247, 248, 250)"  # app.css's --bg
PUSHED = 1700000000  # 2023-11-14 22:13:20 UTC = 2023-11-15 03:58:20 in Kathmandu (+05:45)


def serve(master, r):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: get(port, "/healthz")[0] == 200, 15, what="the HTTP endpoint")
    return "http://127.0.0.1:%d" % port


def scheme(d, value):
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": value}]})


def looks(d):
    """(body background, data-theme, the toggle's text, what localStorage keeps), read in one step."""
    return tuple(d.execute_script(
        "var b = document.getElementById('theme-button');"
        "return [getComputedStyle(document.body).backgroundColor, document.documentElement.getAttribute('data-theme'),"
        " b ? b.textContent : null, localStorage.getItem('qpool.theme')];"))


def click_toggle(d):
    d.execute_script("document.getElementById('theme-button').click()")


def test_dark_mode_follows_the_system_and_the_toggle_overrides_it(master, r, browser):
    origin = serve(master, r)
    d = browser
    scheme(d, "dark")
    d.get(origin + "/#/overview")
    wait_for(lambda: looks(d)[2] == "Light", 20, what="the toggle")
    assert looks(d) == (DARK_BG, None, "Light", None)
    click_toggle(d)  # light, chosen here: kept over a reload
    assert looks(d) == (LIGHT_BG, "light", "Dark", "light")
    d.refresh()
    wait_for(lambda: looks(d)[2] == "Dark", 20, what="the toggle after a reload")
    assert looks(d) == (LIGHT_BG, "light", "Dark", "light")
    click_toggle(d)  # dark again = the system's: follows the system from now on
    assert looks(d) == (DARK_BG, None, "Light", None)
    scheme(d, "light")  # the system turns light: the page follows, no reload
    wait_for(lambda: looks(d)[2] == "Dark", 20, what="the page following the system")
    assert looks(d) == (LIGHT_BG, None, "Dark", None)
    click_toggle(d)
    assert looks(d) == (DARK_BG, "dark", "Light", "dark")
    d.refresh()
    wait_for(lambda: looks(d)[2] == "Light", 20, what="the toggle after a reload")
    assert looks(d)[:2] == (DARK_BG, "dark")
    d.execute_script("localStorage.removeItem('qpool.theme')")
    assert not test_dashboard.console_errors(d)


def pushed_cell(d):
    return d.execute_script(
        "var r = document.querySelector('#pending-list-table tbody tr[data-uuid]');"
        " return r ? Array.from(r.cells).map(function (c) { return c.textContent; }) : null;")


def test_times_are_shown_in_the_browsers_time_zone(master, r, browser):
    origin = serve(master, r)
    p = make_payload("ok", job="App\\Jobs\\Zoned")
    p["pushedAt"] = "%d.0000" % PUSHED
    r.rpush(PREFIX + "queues:lk-wait", json.dumps(p))
    d = browser
    d.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kathmandu"})
    d.execute_cdp_cmd("Emulation.setLocaleOverride", {"locale": "en-GB"})
    d.get(origin + "/#/pending?queue=lk-wait")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    cells = wait_for(lambda: pushed_cell(d), 20, what="the pending job")
    assert "15/11/2023, 3:58:20" in cells and not any("22:13" in c for c in cells), cells  # not UTC


def active(d):
    return d.execute_script("var a = document.querySelector('#nav a.active'); var p = document.querySelector('#main .page');"
                            " return [a ? a.getAttribute('data-page') : null, p ? p.id : null, location.hash];")


def test_the_new_pages_are_deep_links_and_back_walks_them(master, r, browser):
    origin = serve(master, r)
    d = browser
    d.get(origin + "/#/overview")
    wait_for(lambda: active(d)[0] == "overview", 20, what="the overview")
    walk = ["pending", "completed", "silenced", "monitoring", "batches", "limits"]
    for name in walk:  # the nav, as a user clicks it
        d.execute_script("document.querySelector('#nav a[data-page=\"' + arguments[0] + '\"]').click()", name)
        wait_for(lambda: active(d)[:2] == [name, "page-" + name], 20, what="the %s page" % name)
        assert active(d)[2] == "#/" + name
    for name in reversed(["overview"] + walk[:-1]):  # back, one page at a time
        d.back()
        wait_for(lambda: active(d)[:2] == [name, "page-" + name], 20, what="back to %s" % name)
    for name in walk:  # each one opened by its link alone
        d.get(origin + "/#/" + name)
        wait_for(lambda: active(d)[:2] == [name, "page-" + name], 20, what="a deep link to %s" % name)
