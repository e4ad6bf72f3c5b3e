"""Issue 31's acceptance in Chromium on real Laravel apps (8 and 13): the
jobs are dispatched by the app and run by the PHP adapter (Laravel 13 in
its Debian root, laravel_roots.py), qpool and the browser run on the host.

- a job with tags() and a job holding models are found by their tags;
- a watched tag shows its jobs, and keeps them after the recent list has
  trimmed them (job_history_size is small here);
- Pending shows 500 waiting jobs in pages;
- a silenced class (and a job implementing Horizon's Silenced) is in
  Silenced and not in Completed.

Then hostile text (no Laravel): tags and class names with markup, quotes,
invalid UTF-8 and 100 KB, reported by a handler, pushed in a payload and
waiting in a queue, and watched tags: every answer of the API decodes as
strict UTF-8 and the pages show them as text (no element made of them).

No timing is asserted: every wait is generous and only bounds a hang."""
import json
import urllib.parse

import pytest

from conftest import FIXTURE_HANDLER, PREFIX, free_port, make_payload, page_text, push, push_many, wait_for
from laravel_roots import argv_conf, migrated_app, version8_13  # noqa: F401 (fixture)
from test_http import OPEN_READS, TOKEN, code, get, post

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture

HOSTILE = "<img src=x onerror=alert(1)>"  # one of TaggedJob's own tags()
WATCHED = "tagged:watch"
QUIET = "App\\Jobs\\MarkerJob"  # silenced by class in the pool below


@pytest.fixture
def app(version8_13, redis_server, tmp_path):
    yield from migrated_app(version8_13, redis_server.port, tmp_path)


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


def texts(d, css):
    """The textContent of the elements css matches, read in one step."""
    return d.execute_script("return Array.from(document.querySelectorAll(arguments[0]))"
                            ".map(function (e) { return e.textContent; })", css)


def attrs(d, css, name):
    return d.execute_script("var n = arguments[1]; return Array.from(document.querySelectorAll(arguments[0]))"
                            ".map(function (e) { return e.getAttribute(n); })", css, name)


def pending_rows(d):
    """(position shown, uuid) of the Pending table's rows, in one step."""
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#pending-list-table tbody tr[data-uuid]'))"
        ".map(function (r) { return [r.cells[0].textContent, r.getAttribute('data-uuid')]; })")


def page_from(d, first):
    """The Pending table's 100 rows when they start at position first (read once: it is drawn anew as it polls)."""
    shown = pending_rows(d)
    return shown if len(shown) == 100 and shown[0][0] == str(first) else None


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
    assert texts(d, "#jobs-table a.tag") == [WATCHED, HOSTILE, "7"]
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
    assert QUIET not in texts(d, "#jobs-table")[0]

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
    assert attrs(d, "#monitoring-table tr[data-tag]", "data-tag") == [WATCHED]
    no_markup(d)

    # Pending: 500 jobs the app dispatched to a queue no pool takes, in pages of 100
    app.dispatch("NoopJob", queue="hp-wait", count=500)
    want = [json.loads(p)["uuid"] for p in r.lrange(PREFIX + "queues:hp-wait", 0, -1)]
    assert len(want) == 500
    d.get(origin + "#/pending?queue=hp-wait&order=oldest")
    seen = []
    for page in range(5):
        shown = wait_for(lambda: page_from(d, page * 100 + 1), 30, what="pending page %d" % (page + 1))
        seen += [u for _, u in shown]
        assert "500 ready" in page_text(d, "#pending-list-count")
        if page < 4:
            d.execute_script("document.getElementById('pending-list-next').click()")
    assert seen == want  # every job once, oldest first
    assert not texts(d, "#pending-list-next")
    d.back()
    wait_for(lambda: page_from(d, 301), 30, what="page 4 after back")
    assert test_dashboard.console_errors(d) == []


# ---------------------------------------------------------------- hostile text

PWN = "<img src=x onerror=\"document.title='pwned'\">"
SCRIPT = "</script><script>document.title='pwned'</script>"
QUOTES = "'\"\\`${x}"
# (raw bytes the handler reports or the payload carries, what the API shows)
HOSTILE_TAGS = [
    (PWN.encode(), PWN),
    (SCRIPT.encode(), SCRIPT),
    (QUOTES.encode(), QUOTES),
    (b"bad\xff\xfe(\xc3", "bad\ufffd\ufffd(\ufffd"),                 # invalid UTF-8
    (b"\xed\xa0\x80surrogate", "\ufffd\ufffd\ufffdsurrogate"),          # CESU-8, not UTF-8
    (b"z" * 100000, "z" * 120),                                         # cut to 120 bytes
    ("\u00e9".encode() * 61, "\u00e9" * 60),                            # cut on a character's edge
    ("rtl\u202eevil".encode(), "rtl\u202eevil"),
]
CLASS = PWN.encode() + b"\xff" + b"C" * 5000  # a class name: markup, an invalid byte, very long

# A pipe handler that reports, for a job whose data asks, the hostile tags
# above as raw bytes in its JSON reply (as a buggy or hostile handler could).
RAW_HANDLER = r'''
import json, os, sys
sys.path.insert(0, os.environ["HP_DIR"])
from hp_tags import TAGS
req = os.fdopen(int(os.environ["QPOOL_REQUEST_FD"]), "rb")
res = os.fdopen(int(os.environ["QPOOL_RESPONSE_FD"]), "wb")
def send(b):
    res.write(b + b"\n"); res.flush()
send(b'{"type":"ready","protocol":2}')
for line in req:
    m = json.loads(line.decode("utf-8", "surrogateescape"))
    if m["type"] != "job":
        send(json.dumps({"seq": m["seq"], "status": "ok"}).encode()); continue
    out = b'{"seq":%d,"status":"done"' % m["seq"]
    if "report-hostile" in m["payload"]:
        out += b',"tags":[' + b",".join(b'"' + t.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"' for t in TAGS) + b"]"
    send(out + b"}")
'''


def raw_job(uuid, cls, tags, data=b'{"action":"ok"}'):
    """A Laravel-shaped payload's bytes, with raw (maybe invalid) bytes in its class and tags."""
    def s(b):
        return b'"' + b.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
    return (b'{"uuid":' + s(uuid.encode()) + b',"displayName":' + s(cls)
            + b',"job":"Illuminate\\\\Queue\\\\CallQueuedHandler@call","maxTries":null,"maxExceptions":null,'
            b'"failOnTimeout":false,"backoff":null,"timeout":null,"retryUntil":null,"data":' + data
            + b',"tags":[' + b",".join(s(t) for t in tags) + b'],"id":"x","attempts":0}')


def strict(port, path):
    """GET path: the body decoded as strict UTF-8 (raises on any invalid byte), then JSON."""
    status, body = raw_get(port, path)
    assert status == 200, (path, body[:300])
    return json.loads(body.decode("utf-8"))


def raw_get(port, path):
    import urllib.request
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    req.add_header("Authorization", "Bearer " + TOKEN)
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, res.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def no_element_injected(d):
    """Nothing of the hostile text became an element or ran."""
    bad = d.execute_script("return Array.from(document.querySelectorAll('#main img, #main script, #main b, #main iframe'))"
                           ".map(function (e) { return e.outerHTML; })")
    assert bad == [] and d.title != "pwned", bad


def test_hostile_tags_and_class_names_stay_text_and_valid_utf8(master, r, browser, tmp_path):
    import uuid as uuidlib
    port = free_port()
    (tmp_path / "hp_tags.py").write_text("TAGS = %r\n" % [raw for raw, _ in HOSTILE_TAGS])
    script = tmp_path / "raw-handler.py"
    script.write_text(RAW_HANDLER)
    master.write_config('{ name = "hx"; queues = ["hx-work"]; processes = 1; tries = 1; timeout = 10;'
                        ' environment = { HP_DIR = "%s"; };'
                        ' handler = { type = "pipe"; command = ["/usr/bin/python3", "%s"]; }; }' % (tmp_path, script),
                        qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };'
                        ' job_history_payloads = true;' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz", TOKEN) == 200, 20, what="the HTTP endpoint")
    shown = [want for _, want in HOSTILE_TAGS]

    # watched: markup and quotes through the API; invalid bytes and a long tag refused
    for t in (PWN, QUOTES, SCRIPT):
        assert post(port, "/api/monitoring", TOKEN, {"tag": t})[0] == 200
    assert post(port, "/api/monitoring", TOKEN, b'{"tag":"bad\xff"}')[0] == 400
    assert post(port, "/api/monitoring", TOKEN, {"tag": "z" * 121})[0] == 400
    r.sadd(PREFIX + "qpool:{qpool-jobs}:monitored", b"raw\xff\xfe in redis")  # written by anyone else

    reported = "hx-" + uuidlib.uuid4().hex  # the handler's tags
    pushed = "hx-" + uuidlib.uuid4().hex    # the payload's (Horizon's) tags and class
    push(r, "hx-work", raw_job(reported, b"App\\Jobs\\Plain", [], b'{"action":"report-hostile"}'))
    push(r, "hx-work", raw_job(pushed, CLASS, [raw for raw, _ in HOSTILE_TAGS]))
    waiting = "hx-" + uuidlib.uuid4().hex   # one that waits in a queue no pool takes
    r.rpush(PREFIX + "queues:hx-wait", raw_job(waiting, CLASS, [raw for raw, _ in HOSTILE_TAGS]))
    wait_for(lambda: len(strict(port, "/api/jobs/recent")["jobs"]) == 2, 30, what="both jobs recorded")

    by = {j["uuid"]: j for j in strict(port, "/api/jobs/recent")["jobs"]}
    assert by[reported]["tags"] == shown and by[pushed]["tags"] == shown
    name = by[pushed]["name"]
    assert name.startswith(PWN + "\ufffd") and len(name.encode()) < 5000
    for t in (PWN, QUOTES, "bad\ufffd\ufffd(\ufffd"):
        assert {j["uuid"] for j in strict(port, "/api/jobs/recent?" + urllib.parse.urlencode({"tag": t}))["jobs"]} \
            == {reported, pushed}
    one = strict(port, "/api/jobs/" + pushed)
    assert one["attempts"][0]["tags"] == shown
    assert one["payload"].startswith('{"uuid":"%s","displayName":"<img' % pushed)  # cut (100 KB of tags), repaired
    listed = strict(port, "/api/monitoring")["tags"]
    assert {t["tag"]: t["jobs"] for t in listed if t["tag"] in (PWN, QUOTES, SCRIPT)} == {PWN: 2, QUOTES: 2, SCRIPT: 2}
    assert {j["uuid"] for j in strict(port, "/api/monitoring/jobs?" + urllib.parse.urlencode({"tag": PWN}))["jobs"]} \
        == {reported, pushed}
    pend = strict(port, "/api/jobs/pending?queue=hx-wait")["jobs"]
    assert [j["uuid"] for j in pend] == [waiting]
    assert pend[0]["class"].startswith(PWN + "\ufffd")
    for path in ("/api/status?verbose=1", "/api/jobs/recent?q=%FF%FE", "/api/jobs/recent?tag=%FF",
                 "/api/monitoring/jobs?tag=%FF%3Cimg", "/api/jobs/pending?queue=hx-wait&tag=%FF",
                 "/api/jobs/pending?queue=hx-wait&class=%3Cimg"):
        status, body = raw_get(port, path)
        body.decode("utf-8")
        assert status in (200, 400), (path, status)

    d = browser
    origin = "http://127.0.0.1:%d/" % port
    d.get(origin + "#/jobs")
    d.execute_script("sessionStorage.setItem('qpool.token', arguments[0]); location.reload();", TOKEN)
    wait_for(lambda: len(table_uuids(d, "#jobs-table tr[data-uuid]")) == 2, 30, what="both jobs on the Jobs page")
    d.get_log("browser")  # (the first load asked without the token: a 401)

    def tag_texts(css):
        return texts(d, css)
    for uuid in (reported, pushed):
        assert tag_texts('#jobs-table tr[data-uuid="%s"] a.tag' % uuid) == shown
    assert d.execute_script("return document.querySelector(arguments[0]).textContent",
                            '#jobs-table tr[data-uuid="%s"] a[href^="#/jobs/"]' % pushed) == name
    no_element_injected(d)
    # a tag's link finds both jobs (the link carries the tag whole, quotes and all)
    d.execute_script("document.querySelectorAll('#jobs-table tr[data-uuid=\"%s\"] a.tag')[2].click()" % pushed)
    wait_for(lambda: "tag=" in d.current_url and sorted(table_uuids(d, "#jobs-table tr[data-uuid]")) == sorted([reported, pushed]),
             30, what="the jobs of the quotes tag, by its link")
    assert d.find_element(By.CSS_SELECTOR, '#jobs-filter input[name="tag"]').get_attribute("value") == QUOTES
    # the job's page
    d.get(origin + "#/jobs/" + pushed)
    wait_for(lambda: texts(d, "#job-name")[0].startswith(PWN), 30, what="the job's page")
    assert tag_texts("#job-summary a.tag") == shown
    no_element_injected(d)
    # monitoring: the watched tags listed as text (the raw one from Redis repaired), a hostile tag's jobs
    d.get(origin + "#/monitoring?" + urllib.parse.urlencode({"tag": SCRIPT}))
    wait_for(lambda: sorted(table_uuids(d, "#monitor-recent-table tr[data-uuid]")) == sorted([reported, pushed]), 30,
             what="the hostile watched tag's jobs")
    listed = attrs(d, "#monitoring-table tr[data-tag]", "data-tag")
    assert set(listed) >= {PWN, QUOTES, SCRIPT}
    no_element_injected(d)
    # pending: the waiting job's class and tags as text
    d.get(origin + "#/pending?queue=hx-wait")
    wait_for(lambda: table_uuids(d, "#pending-list-table tbody tr[data-uuid]") == [waiting], 30, what="the waiting job")
    assert tag_texts("#pending-list-table a.tag") == shown
    no_element_injected(d)
    assert test_dashboard.console_errors(d) == []
