"""Tags on job records (issue 31): pushed with the payload or reported by
the handler, bounded, and the history filters of /api/jobs/recent."""
import http.client
import json
import socket
import urllib.parse

import pytest

from conftest import PREFIX, PYTHON, free_port, make_payload, page_attrs, push_many, wait_for
from test_http import OPEN_READS, TOKEN, code, get, http_conf

# A pipe handler that reports the tags a job's data asks for (as the PHP
# adapter reports those it computes) and fails the jobs asked to.
HANDLER = r'''
import json, os
req = os.fdopen(int(os.environ["QPOOL_REQUEST_FD"]), "r")
res = os.fdopen(int(os.environ["QPOOL_RESPONSE_FD"]), "w")
def send(m):
    res.write(json.dumps(m) + "\n"); res.flush()
send({"type": "ready", "protocol": 2})
for line in req:
    m = json.loads(line)
    if m["type"] != "job":
        send({"seq": m["seq"], "status": "ok"}); continue
    data = json.loads(m["payload"]).get("data", {})
    out = {"seq": m["seq"], "status": "done"}
    if "report" in data:
        out["tags"] = data["report"]
    if data.get("silenced"):
        out["silenced"] = True
    if data.get("action") == "fail":
        out.update(status="exception", **{"class": "RuntimeException", "message": "needle in the haystack"})
    send(out)
'''


def start(master, tmp_path, port):
    script = tmp_path / "tags-handler.py"
    script.write_text(HANDLER)
    master.write_config('{ name = "t"; queues = ["default"]; processes = 2; tries = 1; timeout = 10;'
                        ' handler = { type = "pipe"; command = ["%s", "%s"]; }; }' % (PYTHON, script),
                        qpool=http_conf(port, OPEN_READS))
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")


def recent(port, **query):
    status, _, body = get(port, "/api/jobs/recent?" + urllib.parse.urlencode(query))
    assert status == 200, body
    return json.loads(body)["jobs"]


def test_tags_are_kept_bounded_and_filtered_on(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path, port)
    hostile = '<img src=x onerror=alert(1)>"\\'
    pushed = make_payload("ok", tags=["App\\Models\\User:1", "vip"])                   # Horizon's, in the payload
    reported = make_payload("ok", job="App\\Jobs\\Mail", report=None)
    reported["data"]["report"] = ["App\\Models\\Order:7", hostile, "x" * 500] + ["t%d" % i for i in range(40)]
    both = make_payload("fail", tags=["vip"])
    both["data"]["report"] = ["vip", "App\\Models\\User:1", 5, None]                   # repeats and non-strings
    plain = make_payload("ok")
    push_many(r, "default", [pushed, reported, both, plain])
    wait_for(lambda: len(recent(port)) == 4, 30, what="four records")

    by = {j["uuid"]: j for j in recent(port)}
    assert by[pushed["uuid"]]["tags"] == ["App\\Models\\User:1", "vip"]
    assert by[both["uuid"]]["tags"] == ["vip", "App\\Models\\User:1"]
    assert by[plain["uuid"]]["tags"] == []
    tags = by[reported["uuid"]]["tags"]
    assert len(tags) == 20 and tags[:2] == ["App\\Models\\Order:7", hostile] and tags[2] == "x" * 120

    def uuids(**q):
        return {j["uuid"] for j in recent(port, **q)}
    assert uuids(tag="vip") == {pushed["uuid"], both["uuid"]}
    assert uuids(tag="App\\Models\\User:1") == {pushed["uuid"], both["uuid"]}
    assert uuids(tag=hostile) == {reported["uuid"]}
    assert uuids(tag="vi") == set()                                            # whole tags only
    assert uuids(tag="vip", outcome="failed") == {both["uuid"]}
    assert uuids(q="NEEDLE IN") == {both["uuid"]}                              # the exception, case ignored
    assert uuids(q="App\\Jobs\\Mail") == {reported["uuid"]}                    # the name
    assert uuids(uuid=plain["uuid"]) == {plain["uuid"]}
    assert uuids(attempt=1) == set(by) and uuids(attempt=2) == set()
    assert uuids(host=socket.gethostname()) == set(by) and uuids(host="elsewhere") == set()
    assert uuids(tag="") == set(by)                                            # empty: no filter
    assert get(port, "/api/jobs/recent?attempt=0")[0] == 400
    assert get(port, "/api/jobs/recent?q=" + "a" * 2000)[0] == 400
    one = json.loads(get(port, "/api/jobs/" + pushed["uuid"])[2])
    assert one["attempts"][0]["tags"] == ["App\\Models\\User:1", "vip"]


def test_the_php_adapter_tags_models_and_calls_tags(master, r, laravel_app, tmp_path):
    """Laravel 8 (the host's): Model:id for a model and each model of a
    collection; a job's own tags() instead, as Horizon does; a job that
    implements Horizon's Silenced is silenced."""
    from test_laravel_adapter import adapter_pool
    port = free_port()
    master.write_config(adapter_pool(laravel_app), qpool=http_conf(port, OPEN_READS))
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    laravel_app.dispatch("ModelTagsJob", tag="models")
    laravel_app.dispatch("TaggedJob", tag="own")
    laravel_app.dispatch("SilencedJob", tag="quiet")
    wait_for(lambda: len(recent(port, outcome="done")) == 3, 60, what="the three jobs done")
    assert [j["name"] for j in recent(port, silenced="true")] == ["App\\Jobs\\SilencedJob"]
    by = {j["name"]: j["tags"] for j in recent(port)}
    import sqlite3
    con = sqlite3.connect(str(laravel_app.db))
    ids = [row[0] for row in con.execute("select id from parity_items order by id")]
    con.close()
    assert by["App\\Jobs\\ModelTagsJob"] == ["App\\Models\\Item:%d" % i for i in ids[:3]]
    assert by["App\\Jobs\\TaggedJob"] == ["tagged:own", "<img src=x onerror=alert(1)>", "7"]
    assert [j["name"] for j in recent(port, tag="App\\Models\\Item:%d" % ids[1])] == ["App\\Jobs\\ModelTagsJob"]


def send(port, method, path, token=None, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    c.request(method, path, body=json.dumps(body), headers=headers)
    res = c.getresponse()
    data = res.read().decode()
    c.close()
    return res.status, json.loads(data) if data else None


def test_monitored_tags_keep_their_jobs_apart(master, r, tmp_path):
    port = free_port()
    script = tmp_path / "tags-handler.py"
    script.write_text(HANDLER)
    master.write_config('{ name = "t"; queues = ["default"]; processes = 1; tries = 1; timeout = 10;'
                        ' handler = { type = "pipe"; command = ["%s", "%s"]; }; }' % (PYTHON, script),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN"; ' + OPEN_READS)
                        + " job_history_size = 3; monitored_tag_jobs = 2; job_history_payloads = true;")
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    hostile = "<script>alert(1)</script>"

    # watching takes the token; the CLI does the same in Redis
    assert send(port, "POST", "/api/monitoring", body={"tag": "vip"})[0] == 401
    assert send(port, "DELETE", "/api/monitoring", body={"tag": "vip"})[0] == 401
    assert send(port, "DELETE", "/api/status", TOKEN, {})[0] == 405          # no other DELETE
    assert send(port, "POST", "/api/monitoring", TOKEN, {"tag": "vip"}) == (200, {"ok": True, "changed": True})
    assert send(port, "POST", "/api/monitoring", TOKEN, {"tag": "vip"})[1]["changed"] is False
    assert send(port, "POST", "/api/monitoring", TOKEN, {"tag": hostile})[0] == 200
    assert send(port, "POST", "/api/monitoring", TOKEN, {"tag": "a\nb"})[0] == 400
    assert send(port, "POST", "/api/monitoring", TOKEN, {"tag": "x" * 121})[0] == 400
    assert "watching" in master.cli("monitor", "add", "App\\Models\\User:1").stdout
    listed = json.loads(master.cli("monitor", "list", "--json").stdout)["tags"]
    assert sorted(t["tag"] for t in listed) == sorted(["vip", hostile, "App\\Models\\User:1"])
    assert master.cli("monitor", "add", "a\x01b", check=False).returncode == 64

    vip = [make_payload("ok", tags=["vip"]) for _ in range(2)] + [make_payload("fail", tags=["vip", hostile])]
    user = make_payload("ok", tags=["App\\Models\\User:1"])

    def counts():
        status, _, body = get(port, "/api/monitoring")
        assert status == 200, body
        return {t["tag"]: t["jobs"] for t in json.loads(body)["tags"]}
    # (a master writes at most job_history_size records a pass: at most 3 at a time here)
    push_many(r, "default", vip)
    wait_for(lambda: counts()["vip"] == 2 and counts()[hostile] == 1, 30, what="the watched tags' jobs")
    push_many(r, "default", [user])
    wait_for(lambda: counts() == {"vip": 2, hostile: 1, "App\\Models\\User:1": 1}, 30, what="the watched tags' jobs")
    # the recent list (job_history_size = 3) moves on; the watched tags' records stay
    push_many(r, "default", [make_payload("ok", tags=["other"]) for _ in range(3)])  # trims all of the above
    wait_for(lambda: [j["tags"] for j in recent(port)] == [["other"]] * 3, 30, what="the recent list trimmed")

    def kept(tag, **q):
        status, _, body = get(port, "/api/monitoring/jobs?" + urllib.parse.urlencode(dict(q, tag=tag)))
        assert status == 200, body
        return json.loads(body)["jobs"]
    # kept after the recent list trimmed them, the newest monitored_tag_jobs, payloads left out
    assert {j["uuid"] for j in kept("vip")} == {vip[1]["uuid"], vip[2]["uuid"]}
    assert [j["uuid"] for j in kept("vip", outcome="failed")] == [vip[2]["uuid"]]
    assert [j["uuid"] for j in kept(hostile)] == [vip[2]["uuid"]]
    assert all("payload" not in j for j in kept("vip"))
    assert kept("App\\Models\\User:1")[0]["uuid"] == user["uuid"]
    assert get(port, "/api/monitoring/jobs?tag=")[0] == 400
    key = PREFIX + "qpool:{qpool-jobs}:tag:vip"
    assert 86400 * 1000 < r.pttl(key) <= 7 * 86400 * 1000
    assert r.smembers(PREFIX + "qpool:{qpool-jobs}:monitored") == {b"vip", hostile.encode(), b"App\\Models\\User:1"}

    # forgetting a tag deletes its records
    assert send(port, "DELETE", "/api/monitoring", TOKEN, {"tag": "vip"}) == (200, {"ok": True, "changed": True})
    assert not r.exists(key)
    master.cli("monitor", "remove", "App\\Models\\User:1")
    assert [t["tag"] for t in json.loads(master.cli("monitor", "list", "--json").stdout)["tags"]] == [hostile]


def test_the_jobs_filter_lives_in_the_url_and_monitoring_shows_tags(master, r, tmp_path):
    """Chromium: the Jobs page's tag filter is in the URL (a link, the back
    button), and the Monitoring page lists a watched tag's jobs; a hostile
    tag stays text."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service as ChromeService
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    port = free_port()
    start(master, tmp_path, port)
    hostile = "<img src=x onerror=alert(1)>"
    tagged = make_payload("ok", tags=["vip", hostile])
    others = [make_payload("ok") for _ in range(2)]
    quiet = make_payload("ok")
    quiet["data"]["silenced"] = True
    push_many(r, "default", [tagged] + others + [quiet])
    wait_for(lambda: len(recent(port)) == 4, 30, what="four records")
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
              "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=o, service=ChromeService(executable_path="/usr/bin/chromedriver"))
    try:
        d.set_page_load_timeout(30)
        origin = "http://127.0.0.1:%d/" % port

        def shown():
            return set(page_attrs(d, "#jobs-table tr[data-uuid]", "data-uuid"))
        d.get(origin + "#/silenced")
        wait_for(lambda: shown() == {quiet["uuid"]}, 20, what="the silenced job alone")
        d.get(origin + "#/completed")
        wait_for(lambda: len(shown()) == 3 and quiet["uuid"] not in shown(), 20, what="the completed jobs, not silenced")
        d.get(origin + "#/jobs")
        wait_for(lambda: len(shown()) == 4, 20, what="every job on the page")
        box = d.find_element(By.CSS_SELECTOR, '#jobs-filter input[name="tag"]')
        box.send_keys("vip", Keys.ENTER)
        wait_for(lambda: shown() == {tagged["uuid"]}, 20, what="the tagged job alone")
        assert "tag=vip" in d.execute_script("return location.hash")
        d.back()
        wait_for(lambda: len(shown()) == 4, 20, what="every job again after back")
        assert d.find_element(By.CSS_SELECTOR, '#jobs-filter input[name="tag"]').get_attribute("value") == ""
        # a bookmarked filter, by a tag's link
        d.get(origin + "#/jobs?" + urllib.parse.urlencode({"tag": hostile}))
        wait_for(lambda: shown() == {tagged["uuid"]}, 20, what="the job of the hostile tag")
        links = page_attrs(d, "#jobs-table a.tag")
        assert links == ["vip", hostile] and not d.find_elements(By.CSS_SELECTOR, "#jobs-table img")
        # monitoring: no token configured here, so only the list (reads are open on loopback)
        r.sadd(PREFIX + "qpool:{qpool-jobs}:monitored", hostile)
        d.get(origin + "#/monitoring?" + urllib.parse.urlencode({"tag": hostile}))
        wait_for(lambda: page_attrs(d, "#monitoring-table tr[data-tag]", "data-tag") == [hostile], 20, what="the watched tag listed")
        assert not d.find_elements(By.CSS_SELECTOR, "#main img")
        assert [e for e in d.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        d.quit()


def test_silenced_jobs_are_marked_and_filtered(master, r, tmp_path):
    """Horizon's `silenced` (classes), `silenced_tags` and Silenced
    interface (the handler says so): done records marked, failures never."""
    port = free_port()
    script = tmp_path / "tags-handler.py"
    script.write_text(HANDLER)
    master.write_config('{ name = "t"; queues = ["default"]; processes = 1; tries = 1; timeout = 10;'
                        ' silenced = ["App\\\\Jobs\\\\Quiet"];'
                        ' handler = { type = "pipe"; command = ["%s", "%s"]; }; }' % (PYTHON, script),
                        defaults='silenced_tags = ["noisy"];', qpool=http_conf(port, OPEN_READS))
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    by_class = make_payload("ok", job="App\\Jobs\\Quiet")
    by_tag = make_payload("ok", tags=["noisy"])
    by_job = make_payload("ok")
    by_job["data"]["silenced"] = True
    failed = make_payload("fail", job="App\\Jobs\\Quiet")
    loud = make_payload("ok", tags=["loud"])
    push_many(r, "default", [by_class, by_tag, by_job, failed, loud])
    wait_for(lambda: len(recent(port)) == 5, 30, what="five records")
    assert {j["uuid"] for j in recent(port) if j["silenced"]} == {by_class["uuid"], by_tag["uuid"], by_job["uuid"]}
    assert {j["uuid"] for j in recent(port, silenced="true")} == {by_class["uuid"], by_tag["uuid"], by_job["uuid"]}
    assert {j["uuid"] for j in recent(port, outcome="done", silenced="false")} == {loud["uuid"]}  # Completed
    assert get(port, "/api/jobs/recent?silenced=maybe")[0] == 400
