"""Issue 31's acceptance in Chromium on real Laravel apps (8 and 13): the
jobs are dispatched by the app and run by the PHP adapter (Laravel 13 in
its Debian root, laravel_roots.py), qpool and the browser run on the host.

- a job with tags() and a job holding models are found by their tags;
- a watched tag shows its jobs, and keeps them after the recent list has
  trimmed them (job_history_size is small here);
- Pending shows 500 waiting jobs in pages;
- a silenced class (and a job implementing Horizon's Silenced) is in
  Silenced and not in Completed.

No timing is asserted: every wait is generous and only bounds a hang."""
import json
import urllib.parse

import pytest

from conftest import FIXTURE_HANDLER, PREFIX, free_port, make_payload, push_many, wait_for
from laravel_roots import VERSIONS, Version, VersionApp, argv_conf, build_root
from test_http import OPEN_READS, TOKEN, code, get, post

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture
rows = test_dashboard.rows

HOSTILE = "<img src=x onerror=alert(1)>"  # one of TaggedJob's own tags()
WATCHED = "tagged:watch"
QUIET = "App\\Jobs\\MarkerJob"  # silenced by class in the pool below


@pytest.fixture(scope="module", params=["8", "13"], ids=lambda v: "laravel" + v)
def hp_version(request):
    """Laravel 8 and 13 (the issue's two): on the host or in a Debian root, as laravel_version does."""
    dist = VERSIONS[request.param][0]
    v = Version(request.param, build_root(dist) if dist else None)
    v.mount_proc()
    try:
        yield v
    finally:
        v.umount_proc()


@pytest.fixture
def app(hp_version, redis_server, tmp_path):
    a = VersionApp(hp_version, redis_server.port, tmp_path)
    try:
        a.artisan("migrate", "--force")
        yield a
    finally:
        a.remove()


def pool(app):
    return ('{ name = "hp"; queues = ["hp-work"]; processes = 1; tries = 1; timeout = 60; %s\n'
            '  silenced = ["App\\\\Jobs\\\\MarkerJob"];\n'
            '  handler = { type = "pipe"; command = %s; }; }' % (app.env_conf(), argv_conf(app.adapter_argv())))


def recent(port, **query):
    status, _, body = get(port, "/api/jobs/recent?" + urllib.parse.urlencode(query))
    assert status == 200, body
    return json.loads(body)["jobs"]


def table_uuids(d, css):
    """The uuids of a table's rows, read in the page in one step (tables are drawn anew as they poll)."""
    return d.execute_script("return Array.from(document.querySelectorAll(arguments[0]))"
                            ".map(function (r) { return r.getAttribute('data-uuid'); })", css)


def pending_rows(d):
    """(position shown, uuid) of the Pending table's rows, in one step."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#pending-list-table tbody tr[data-uuid]'))"
        ".map(function (r) { return [r.cells[0].textContent, r.getAttribute('data-uuid')]; })")


def no_markup(d):
    assert not d.find_elements(By.CSS_SELECTOR, "#main img, #main script") and d.title != "pwned"


def test_a_limit_above_a_small_history_reads_all_of_it(master, r):
    """The dashboard asks /api/jobs/recent?limit=100: with job_history_size
    under 100 that was a 400, and the Jobs, Completed and Silenced pages
    stayed empty."""
    port = free_port()
    master.write_config('{ name = "w"; queues = ["hp-small"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
                        % FIXTURE_HANDLER, qpool='http = { listen = "127.0.0.1:%d"; %s }; job_history_size = 3;'
                        % (port, OPEN_READS))
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    jobs = [make_payload("ok") for _ in range(5)]
    push_many(r, "hp-small", jobs)
    wait_for(lambda: len(recent(port)) == 3, 30, what="the history full")
    for limit in ("100", "3", "1000000"):
        status, _, body = get(port, "/api/jobs/recent?limit=" + limit)
        assert status == 200, body
        assert len(json.loads(body)["jobs"]) == 3
    assert len(recent(port, limit=2)) == 2
    for bad in ("0", "-1", "x", "99999999999999999999"):
        assert get(port, "/api/jobs/recent?limit=" + bad)[0] == 400


def test_horizon_pages_on_a_laravel_app(master, r, app, browser):
    v = app.version.name
    port = free_port()
    master.write_config(pool(app), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; %s };'
                        ' job_history_size = 5; monitored_tag_jobs = 10;' % (port, OPEN_READS))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    assert post(port, "/api/monitoring", TOKEN, {"tag": WATCHED})[0] == 200

    for job, tag in (("ModelTagsJob", "models"), ("TaggedJob", "watch"), ("SilencedJob", "quiet"),
                     ("MarkerJob", "m"), ("NoopJob", None)):
        app.dispatch(job, queue="hp-work", tag=tag)
    wait_for(lambda: len(recent(port)) == 5, 120, interval=0.25, what="five jobs done on Laravel %s" % v)
    by = {j["name"]: j for j in recent(port)}
    assert all(j["outcome"] == "done" for j in by.values()), by
    ids = [x["id"] for x in app.table("select id from parity_items order by id")]
    assert by["App\\Jobs\\ModelTagsJob"]["tags"] == ["App\\Models\\Item:%d" % i for i in ids[:3]]
    assert by["App\\Jobs\\TaggedJob"]["tags"] == [WATCHED, HOSTILE, "7"]
    uuid = {k.rsplit("\\", 1)[1]: j["uuid"] for k, j in by.items()}

    d = browser
    origin = "http://127.0.0.1:%d/" % port
    # found by their tags: typed into the Jobs page's filter, and by a tag's link
    d.get(origin + "#/jobs")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: len(table_uuids(d, "#jobs-table tr[data-uuid]")) == 5, 30, what="the five jobs")
    box = d.find_element(By.CSS_SELECTOR, '#jobs-filter input[name="tag"]')
    box.send_keys("App\\Models\\Item:%d" % ids[2], Keys.ENTER)
    wait_for(lambda: table_uuids(d, "#jobs-table tr[data-uuid]") == [uuid["ModelTagsJob"]], 30,
             what="the job holding the models, by a model's tag")
    d.get(origin + "#/jobs?" + urllib.parse.urlencode({"tag": HOSTILE}))
    wait_for(lambda: table_uuids(d, "#jobs-table tr[data-uuid]") == [uuid["TaggedJob"]], 30,
             what="the job with tags(), by its hostile tag")
    links = [a.text for a in rows(d, "#jobs-table a.tag")]
    assert links == [WATCHED, HOSTILE, "7"]
    no_markup(d)
    d.execute_script("document.querySelector('#jobs-table a.tag').click()")
    wait_for(lambda: table_uuids(d, "#jobs-table tr[data-uuid]") == [uuid["TaggedJob"]]
             and "tag=tagged" in d.current_url, 30, what="the job by its watched tag's link")

    # Silenced (the class of the config, Horizon's interface) and Completed (the others)
    d.get(origin + "#/silenced")
    wait_for(lambda: sorted(table_uuids(d, "#jobs-table tr[data-uuid]")) == sorted([uuid["MarkerJob"], uuid["SilencedJob"]]),
             30, what="the silenced jobs")
    d.get(origin + "#/completed")
    done = sorted(uuid[k] for k in ("ModelTagsJob", "TaggedJob", "NoopJob"))
    wait_for(lambda: sorted(table_uuids(d, "#jobs-table tr[data-uuid]")) == done, 30, what="the completed jobs")
    assert QUIET not in d.find_element(By.ID, "jobs-table").text

    # the watched tag's jobs, then again after the recent list has moved on
    monitored = "#monitor-recent-table tr[data-uuid]"
    d.get(origin + "#/monitoring?" + urllib.parse.urlencode({"tag": WATCHED}))
    wait_for(lambda: table_uuids(d, monitored) == [uuid["TaggedJob"]], 30, what="the watched tag's job")
    app.dispatch("NoopJob", queue="hp-work", count=5)
    wait_for(lambda: len(recent(port)) == 5 and all(j["name"] == "App\\Jobs\\NoopJob" and j["uuid"] != uuid["NoopJob"]
                                                   for j in recent(port)),
             120, interval=0.25, what="the recent list trimmed by five more jobs")
    assert recent(port, tag=WATCHED) == []
    d.refresh()
    wait_for(lambda: table_uuids(d, monitored) == [uuid["TaggedJob"]], 30, what="the watched tag's job, kept")
    assert [e.get_attribute("data-tag") for e in rows(d, "#monitoring-table tr[data-tag]")] == [WATCHED]
    no_markup(d)

    # Pending: 500 jobs the app dispatched to a queue no pool takes, in pages of 100
    app.dispatch("NoopJob", queue="hp-wait", count=500)
    want = [json.loads(p)["uuid"] for p in r.lrange(PREFIX + "queues:hp-wait", 0, -1)]
    assert len(want) == 500
    d.get(origin + "#/pending?queue=hp-wait&order=oldest")
    seen = []
    for page in range(5):
        wait_for(lambda: len(pending_rows(d)) == 100 and pending_rows(d)[0][0] == str(page * 100 + 1), 30,
                 what="pending page %d" % (page + 1))
        seen += [u for _, u in pending_rows(d)]
        assert "500 ready" in d.find_element(By.ID, "pending-list-count").text
        if page < 4:
            d.find_element(By.ID, "pending-list-next").click()
    assert seen == want  # every job once, oldest first
    assert not rows(d, "#pending-list-next")
    d.back()
    wait_for(lambda: pending_rows(d) and pending_rows(d)[0][0] == "301", 30, what="page 4 after back")
    assert test_dashboard.console_errors(d) == []
