"""The HTTP endpoint (qpool.http, issue 9): /metrics in Prometheus's text
format (checked with promtool), /healthz, the JSON API, who may read what,
and what slow or oversized clients can do (nothing to the master). Real
processes, real Redis, real HTTP over TCP."""
import http.client
import json
import os
import pwd
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import (BUILD, FIXTURE_HANDLER, PREFIX, QPOOL, fill_failed_store, free_port, make_payload, push_many,
                      read_fixture_log, wait_for)

MAIL = "App\\Jobs\\SendMail"
REPORT = "App\\Jobs\\Report"
TOKEN = "s3cret-token-for-the-tests-0123456789"


def pool(log, extra=""):
    return ('{ name = "w"; queues = ["high", "default"]; processes = 2; tries = 2; backoff = [0]; timeout = 1;'
            ' handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; %s }'
            % (FIXTURE_HANDLER, log, extra))


def http_conf(port, extra="", host="127.0.0.1"):
    return 'http = { listen = "%s:%d"; %s };' % (host, port, extra)


def get(port, path, token=None, timeout=10):
    """(status, content type, body) of GET http://127.0.0.1:port/path."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.headers.get("Content-Type"), res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def code(port, path, token=None):
    try:
        return get(port, path, token, timeout=3)[0]
    except OSError:
        return None


# A single-user box's opt-in: every read open on loopback (the tests that
# look at the API's contents; who may read what is tested below).
OPEN_READS = 'read_without_token = "all";'


def start(master, log, port, qpool="", extra="", http=""):
    master.write_config(pool(log, extra), qpool=http_conf(port, http) + qpool)
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")


SAMPLE = re.compile(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def samples(text):
    """{(name, frozenset(labels)): value} of a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        labels = {k: v.replace("\\\\", "\\").replace('\\"', '"') for k, v in LABEL.findall(m.group(2) or "")}
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def value(s, name, **labels):
    return s.get((name, frozenset(labels.items())))


def jobs_total(s, **labels):
    return sum(v for (n, ls), v in s.items() if n == "qpool_jobs_total" and set(labels.items()) <= set(ls))


def test_metrics_and_the_api_report_a_known_mix(master, r, tmp_path):
    port = free_port()
    # memory = 0: under ASan a worker's RSS passed 128 MB once (ci-20) and its
    # recycle left one worker of two in the sample this test checks
    start(master, tmp_path / "fixture.log", port, http=OPEN_READS, extra="memory = 0;")
    now = time.time()
    push_many(r, "high", [make_payload("ok", job=MAIL) for _ in range(6)])
    push_many(r, "default", [make_payload("sleep:300", job=REPORT) for _ in range(2)])
    push_many(r, "default", [make_payload("fail", job=REPORT) for _ in range(3)])
    push_many(r, "high", [make_payload("hang", job=MAIL)])
    # measured wait: a payload that says when it was dispatched (Laravel 11+)
    push_many(r, "default", [make_payload("ok", job=REPORT, createdAt=int(now) - 5)])
    # delayed: due in 1 s
    r.zadd(PREFIX + "queues:default:delayed", {json.dumps(make_payload("ok", job=REPORT)): now + 1})
    total = 6 + 2 + 3 * 2 + 2 + 1 + 1
    wait_for(lambda: jobs_total(samples(get(port, "/metrics")[2])) == total, 30, what="every attempt counted")

    status, ctype, text = get(port, "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    s = samples(text)
    assert jobs_total(s, pool="w", queue="high", job=MAIL, outcome="done") == 6
    assert jobs_total(s, queue="default", job=REPORT, outcome="done") == 4
    assert jobs_total(s, queue="default", job=REPORT, outcome="released") == 3
    assert jobs_total(s, queue="default", job=REPORT, outcome="failed") == 3
    assert jobs_total(s, queue="high", job=MAIL, outcome="timed_out") == 2
    # the two 300 ms jobs: above 0.25 s, within 0.5 s; the hang's two attempts above 1 s
    rt = lambda q, le: value(s, "qpool_job_runtime_seconds_bucket", pool="w", queue=q, le=le)
    assert rt("default", "0.5") - rt("default", "0.25") >= 2
    assert rt("high", "+Inf") - rt("high", "1") == 2
    assert value(s, "qpool_job_runtime_seconds_count", pool="w", queue="high") == 8
    # measured waits: on default the one with a dispatch time (5-10 s) and the
    # retries qpool released (stamped); on high only the timed-out job's retry
    wt = lambda le: value(s, "qpool_job_wait_seconds_bucket", pool="w", queue="default", le=le)
    assert wt("10") - wt("5") == 1
    assert value(s, "qpool_job_wait_seconds_count", pool="w", queue="default") == 1 + 3
    assert value(s, "qpool_job_wait_seconds_count", pool="w", queue="high") == 1
    assert value(s, "qpool_queue_jobs", queue="default", state="ready") == 0
    assert value(s, "qpool_workers", pool="w", state="idle") + value(s, "qpool_workers", pool="w", state="busy") == 2
    assert value(s, "qpool_paused", pool="w") == 0
    assert value(s, "qpool_redis_reconnects_total") == 0
    assert value(s, "qpool_worker_exits_total", pool="w", reason="crashed") == 0
    assert any(n == "qpool_build_info" for n, _ in s)

    # promtool, Prometheus's own checker, finds nothing to say
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and not res.stdout.strip() and not res.stderr.strip(), res

    # the API's status is `qpool status --json`
    status, ctype, body = get(port, "/api/status")
    api = json.loads(body)
    cli = json.loads(master.cli("status", "--json", "--verbose").stdout)
    assert ctype == "application/json" and api["pid"] == cli["pid"] == master.proc.pid
    assert [p["name"] for p in api["pools"]] == ["w"] and len(api["pools"][0]["children"]) == 2
    by = {(e["queue"], e["job"], e["outcome"]): e["count"] for e in api["pools"][0]["job_stats"]}
    assert by[("high", MAIL, "done")] == 6 and by[("default", REPORT, "failed")] == 3

    # history, by minute, from Redis
    def history_done():
        h = json.loads(get(port, "/api/metrics?minutes=5")[2])
        return sum(e["count"] for m in h["minutes"] for e in m["series"] if e["outcome"] == "done")
    wait_for(lambda: history_done() == 10, 10, what="the history to hold the done jobs")
    assert get(port, "/api/metrics?minutes=0")[0] == 400
    assert get(port, "/api/metrics?minutes=x")[0] == 400


def test_healthz_follows_redis(master, r, redis_server, tmp_path):
    port = free_port()
    start(master, tmp_path / "fixture.log", port)
    status, _, body = get(port, "/healthz")
    assert status == 200 and json.loads(body) == {"state": "running", "ok": True}
    redis_server.stop()
    wait_for(lambda: code(port, "/healthz") == 503, 15, what="/healthz to turn 503")
    status, ctype, body = get(port, "/healthz")
    reason = json.loads(body)
    assert ctype == "application/json" and reason["ok"] is False and "redis default unavailable" in reason["reason"]
    redis_server.start()
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="/healthz to turn 200 again")


def slow_client(port):
    """A connection that sends half a request and then nothing."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    return s


def test_slow_and_oversized_clients_do_not_reach_the_master(master, r, tmp_path):
    port = free_port()
    log = tmp_path / "fixture.log"
    start(master, log, port, qpool="", extra="")
    # slow-loris clients from one address: as many as it may hold (a quarter
    # of the 64), and more beyond that, each taking the place of an older one
    slow = []
    for _ in range(100):
        try:
            slow.append(slow_client(port))
        except OSError:
            pass
    assert len(slow) >= 16
    # a probe still gets in, though loopback is all one address (a load
    # balancer's, say; test_http_limits.py has the flood that reconnects)
    other = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=("127.0.0.2", 0))
    other.request("GET", "/healthz")
    assert other.getresponse().status == 200
    other.close()
    # oversized: 1 MB of headers, and a 10 MB body on a GET
    big = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        big.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
    except OSError:
        pass  # refused or reset: fine
    # meanwhile the master answers and works as usual
    t0 = time.monotonic()
    st = json.loads(master.cli("status", "--json").stdout)
    assert st["state"] == "running"
    push_many(r, "high", [make_payload("ok") for _ in range(50)])
    wait_for(lambda: sum(1 for _ in open(log)) >= 50 if log.exists() else False, 20, what="50 jobs done")
    assert time.monotonic() - t0 < 30
    for s in slow:
        s.close()
    big.close()
    # and the endpoint serves again once they are gone
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="HTTP to serve again")
    assert master.proc.poll() is None


def test_non_loopback_needs_a_token(master, r, tmp_path):
    port = free_port()
    # without one, the config is refused, naming the file and line
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port, host="0.0.0.0"))
    res = subprocess.run([QPOOL, "check", "-c", str(master.conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78
    assert re.search(re.escape(str(master.conf)) + r":\d+: .*not loopback: set token_file or token_env", res.stderr)
    # with one, every endpoint but /healthz needs it
    master.write_config(pool(tmp_path / "fixture.log"),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";', host="0.0.0.0"))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    for path in ("/metrics", "/api/status", "/api/fleet", "/api/metrics"):
        assert code(port, path) == 401, path
        assert code(port, path, token=TOKEN[:-1] + "x") == 401, path
        assert code(port, path, token=TOKEN) == 200, path
    assert TOKEN not in master.log()


def test_loopback_reads_are_open_and_the_token_file_must_be_private(master, r, tmp_path):
    port = free_port()
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "\n")
    os.chmod(tok, 0o644)
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port, 'token_file = "%s";' % tok))
    master.start()
    master.wait_log(r"token_file .* is readable or writable by others .*; the HTTP endpoint stays off")
    assert code(port, "/healthz") is None
    assert master.proc.poll() is None  # supervision goes on without HTTP
    master.stop()
    os.chmod(tok, 0o600)
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    assert code(port, "/metrics") == 200  # read-only, loopback
    assert TOKEN not in master.log()


def http_pid(master):
    """The master's HTTP process: its child (in a session of its own)."""
    out = subprocess.run(["pgrep", "-P", str(master.proc.pid), "-f", "^qpool: http"], capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]
    return pids[0] if pids else None


def test_the_http_process_is_unprivileged_and_respawned(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path / "fixture.log", port)
    pid = http_pid(master)
    assert pid
    if os.geteuid() == 0:
        uid = os.stat("/proc/%d" % pid).st_uid
        assert uid == pwd.getpwnam("nobody").pw_uid
    # it holds nothing of the master's: the listener, its channel, stdio
    fds = sorted(int(f) for f in os.listdir("/proc/%d/fd" % pid))
    assert fds[:5] == [0, 1, 2, 3, 4]
    os.kill(pid, signal.SIGKILL)
    master.wait_log(r"http: the HTTP process \(pid %d\) .*restarting it in 1 s" % pid)
    wait_for(lambda: code(port, "/healthz") == 200 and http_pid(master) not in (None, pid), 10,
             what="a new HTTP process")


def test_a_reload_moves_the_listener(master, r, tmp_path):
    a, b = free_port(), free_port()
    log = tmp_path / "fixture.log"
    start(master, log, a)
    master.write_config(pool(log), qpool=http_conf(b))
    master.signal(signal.SIGHUP)
    wait_for(lambda: code(b, "/healthz") == 200, 10, what="the new listener")
    assert code(a, "/healthz") is None
    # and off when the setting goes
    master.write_config(pool(log))
    master.signal(signal.SIGHUP)
    wait_for(lambda: code(b, "/healthz") is None, 10, what="the endpoint to close")
    assert master.proc.poll() is None


def test_the_fleet_api_lists_every_master(master_factory, redis_server, tmp_path):
    port = free_port()
    a = master_factory(redis_server, "a")
    a.write_config(pool(tmp_path / "a.log"), qpool=http_conf(port))
    a.start()
    b = master_factory(redis_server, "b")
    b.write_config(pool(tmp_path / "b.log").replace('name = "w"', 'name = "v"'))
    b.start()

    def masters():
        return {m["pid"]: m for m in json.loads(get(port, "/api/fleet")[2])["masters"]}
    wait_for(lambda: set(masters()) == {a.proc.pid, b.proc.pid}, 15, what="both masters")
    f = json.loads(get(port, "/api/fleet")[2])
    assert f["totals"]["masters"] == 2
    assert masters()[b.proc.pid]["config"] == str(b.conf)
    b.signal(signal.SIGTERM)
    assert b.wait_exit(30) == 0
    assert set(masters()) == {a.proc.pid}


def recent(port, query=""):
    status, _, body = get(port, "/api/jobs/recent" + query)
    assert status == 200, body
    return json.loads(body)["jobs"]


def test_recent_jobs_and_one_job(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path / "fixture.log", port, http=OPEN_READS)
    done = [make_payload("ok", job=MAIL) for _ in range(3)]
    bad = make_payload("fail", job=REPORT)
    push_many(r, "high", done)
    push_many(r, "default", [bad])
    wait_for(lambda: len(recent(port)) == 5, 20, what="five attempts recorded")

    jobs = recent(port)
    assert [j["finished_at"] for j in jobs] == sorted((j["finished_at"] for j in jobs), reverse=True)
    kids = set(master.child_pids("w"))
    host = socket.gethostname()
    for j in jobs:
        assert j["pool"] == "w" and j["host"] == host and j["pid"] in kids and re.fullmatch(r"w#[12]", j["worker"])
        assert j["started_at"] <= j["finished_at"] and j["runtime_ms"] >= 0
    assert {j["uuid"] for j in recent(port, "?outcome=done")} == {p["uuid"] for p in done}
    assert [j["outcome"] for j in recent(port, "?name=" + urllib.request.quote(REPORT))] == ["failed", "released"]
    assert len(recent(port, "?limit=2")) == 2
    assert recent(port, "?queue=nope") == []
    assert recent(port, "?since=%d" % (int(time.time() * 1000) + 60000)) == []
    assert get(port, "/api/jobs/recent?limit=0")[0] == 400

    # one job: its attempts, the payload that waits to run again or failed, the failure
    status, _, body = get(port, "/api/jobs/" + bad["uuid"])
    one = json.loads(body)
    assert status == 200 and [a["attempt"] for a in one["attempts"]] == [2, 1]
    assert one["attempts"][0]["exception"] == "RuntimeException: fixture job failed"
    assert one["payload_source"] == "job_history" and json.loads(one["payload"])["uuid"] == bad["uuid"]
    assert one["failed"]["queue"] == "default" and "fixture job failed" in one["failed"]["exception"]
    status, _, body = get(port, "/api/jobs/" + done[0]["uuid"])
    assert status == 200 and json.loads(body)["payload"] is None  # job_history_payloads is off
    assert get(port, "/api/jobs/" + "0" * 36)[0] == 404

    # the failed store
    failed = json.loads(get(port, "/api/failed")[2])["failed"]
    assert [f["uuid"] for f in failed] == [bad["uuid"]] and "payload" not in failed[0]
    status, _, body = get(port, "/api/failed/" + bad["uuid"])
    assert status == 200 and json.loads(json.loads(body)["payload"])["uuid"] == bad["uuid"]
    assert get(port, "/api/failed/nope")[0] == 404

    # bounded keys with a time to live: the list, and its index by uuid
    key = PREFIX + "qpool:{qpool-jobs}:list"
    assert r.llen(key) == 5 and 0 < r.pttl(key) <= 86400 * 1000
    index = PREFIX + "qpool:{qpool-jobs}:uuid"
    assert r.hlen(index) == 4 and 0 < r.pttl(index) <= 86400 * 1000


def test_job_history_is_bounded_sampled_and_can_keep_payloads(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path / "fixture.log", port, http=OPEN_READS,
          qpool="job_history_size = 10; job_history_sample = 0.0; job_history_payloads = true;")
    push_many(r, "high", [make_payload("ok") for _ in range(30)])
    push_many(r, "default", [make_payload("fail") for _ in range(12)])
    wait_for(lambda: len(json.loads(get(port, "/api/failed?limit=100")[2])["failed"]) == 12, 30,
             what="the failing jobs to fail")
    # the records travel with the workers' stats (about once a second) and
    # are written on a pass: wait until the ten newest are there
    wait_for(lambda: r.llen(PREFIX + "qpool:{qpool-jobs}:list") == 10 and len(recent(port, "?limit=10")) == 10,
             15, what="ten job records")
    time.sleep(1.5)  # and a pass more: nothing else (no sampled success) comes
    jobs = recent(port, "?limit=10")
    # sample 0: no done or released attempt; failures always; at most 10 kept
    assert len(jobs) == 10 and {j["outcome"] for j in jobs} == {"failed"}
    assert r.llen(PREFIX + "qpool:{qpool-jobs}:list") == 10
    assert_index_matches_list(r)


def assert_index_matches_list(r):
    """The index by uuid holds exactly the records the list holds."""
    listed = sorted(r.lrange(PREFIX + "qpool:{qpool-jobs}:list", 0, -1))
    index = r.hgetall(PREFIX + "qpool:{qpool-jobs}:uuid")
    indexed = sorted(rec for v in index.values() for rec in v.split(b"\n"))
    assert listed == indexed
    for u, v in index.items():
        assert all(json.loads(rec)["uuid"] == u.decode() for rec in v.split(b"\n"))


def test_job_history_reads_are_bounded(master, r, tmp_path):
    # review #7: one job by its uuid through the index, lists by limit, and
    # a filtered list in pages: no read of the whole list (Redis's slowlog,
    # set to log every command, shows what was asked)
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";') + "job_history_size = 5000;")
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")

    def recent(port, query=""):  # with the token, whoever may read without it
        status, _, body = get(port, "/api/jobs/recent" + query, TOKEN)
        assert status == 200, body
        return json.loads(body)["jobs"]
    bad = make_payload("fail", job=REPORT)
    push_many(r, "default", [bad])
    push_many(r, "high", [make_payload("ok", job=MAIL) for _ in range(20)])
    wait_for(lambda: len(recent(port, "?limit=100")) == 22, 20, what="22 attempts recorded")
    # a long history: 3000 newer records of other jobs at the head of the list
    key = PREFIX + "qpool:{qpool-jobs}:list"
    filler = [json.dumps({"uuid": "filler-%d" % i, "name": "F", "queue": "high", "pool": "w", "outcome": "done",
                          "finished_at": int(time.time() * 1000) + 1000 + i}) for i in range(3000)]
    for i in range(0, 3000, 500):
        r.lpush(key, *filler[i:i + 500])
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 10000)
    r.slowlog_reset()

    one = json.loads(get(port, "/api/jobs/" + bad["uuid"], TOKEN)[2])
    assert [a["attempt"] for a in one["attempts"]] == [2, 1] and one["attempts"][0]["outcome"] == "failed"
    assert len(recent(port, "?limit=7")) == 7
    assert [j["uuid"] for j in recent(port, "?outcome=failed&limit=5")] == [bad["uuid"]]  # under the 3000
    assert len(recent(port, "?name=" + urllib.request.quote(MAIL) + "&limit=100")) == 20

    ranges = [[a.decode() if isinstance(a, bytes) else a for a in e["command"].split()]
              if isinstance(e["command"], (str, bytes)) else e["command"]
              for e in r.slowlog_get(10000)]
    ranges = [c for c in ranges if str(c[0]).upper() in ("LRANGE", b"LRANGE")]
    assert ranges, "the list was read"
    for c in ranges:
        start_, stop = int(c[2]), int(c[3])
        assert stop >= 0 and stop - start_ + 1 <= 500, c  # never LRANGE 0 -1, pages of 500 at most
    assert ["LRANGE", key, "0", "6"] in [[str(x) for x in c] for c in ranges]  # limit 7: 7 records read


def test_job_history_keeps_done_payloads_when_asked(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path / "fixture.log", port, qpool="job_history_payloads = true;", http=OPEN_READS)
    p = make_payload("ok")
    push_many(r, "high", [p])
    wait_for(lambda: len(recent(port)) == 1, 20, what="the job recorded")
    one = json.loads(get(port, "/api/jobs/" + p["uuid"])[2])
    assert one["payload_source"] == "job_history" and json.loads(one["payload"]) == p


def test_a_foreign_host_name_needs_the_token_on_loopback(master, r, tmp_path):
    # DNS rebinding: a page elsewhere whose name resolves to 127.0.0.1 sends its own Host
    port = free_port()
    start(master, tmp_path / "fixture.log", port)
    # a bracketed Host is an IPv6 address or nothing (review 2026-11-24 #10)
    for host, want in (("evil.example:%d" % port, 403), ("localhost:%d" % port, 200), ("127.0.0.1", 200),
                       ("[::1]:%d" % port, 200), ("[evil.example]:%d" % port, 403), ("[evil.example]", 403),
                       ("[::1]evil.example", 403)):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.putrequest("GET", "/api/status", skip_host=True)
        c.putheader("Host", host)
        c.endheaders()
        assert c.getresponse().status == want, host
        c.close()


def test_the_token_env_does_not_reach_workers_or_jobs(master, r, tmp_path):
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";', host="0.0.0.0"))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    assert code(port, "/metrics", token=TOKEN) == 200
    for pid in master.child_pids("w") + [master.proc.pid]:
        assert TOKEN.encode() not in open("/proc/%d/environ" % pid, "rb").read(), pid
    # a reload keeps it (the variable is gone from the master by then)
    master.signal(signal.SIGHUP)
    master.wait_log(r"reloaded|configuration unchanged|reload")
    wait_for(lambda: code(port, "/metrics", token=TOKEN) == 200, 10, what="the endpoint after the reload")


def test_a_reload_that_keeps_the_address_restarts_the_process_not_the_listener(master, r, tmp_path):
    port = free_port()
    log = tmp_path / "fixture.log"
    start(master, log, port)
    before = http_pid(master)
    master.write_config(pool(log), qpool=http_conf(port, "timeout = 20; max_connections = 10;"))
    master.signal(signal.SIGHUP)
    wait_for(lambda: http_pid(master) not in (None, before) and code(port, "/healthz") == 200, 10,
             what="a new HTTP process on the same listener")
    assert "stays off" not in master.log() and "endpoint is off" not in master.log()


def post(port, path, token=None, body=None, ctype="application/json"):
    """(status, reply) of POST path."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": ctype} if body is not None else {}
    if token:
        headers["Authorization"] = "Bearer " + token
    c.request("POST", path, body=json.dumps(body) if isinstance(body, dict) else body, headers=headers)
    res = c.getresponse()
    data = res.read().decode()
    c.close()
    return res.status, json.loads(data) if data else None


def test_actions_need_the_token_and_act_through_the_masters_verbs(master, r, tmp_path):
    port = free_port()
    log = tmp_path / "fixture.log"
    master.write_config(pool(log, "tries = 1;").replace("tries = 2;", ""),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    # without the token (or with a wrong one): refused before anything happens
    for path in ("/api/pools/w/pause", "/api/pools/w/scale", "/api/failed/x/retry", "/api/failed/retry"):
        assert post(port, path)[0] == 401
        assert post(port, path, token="wrong-" + TOKEN)[0] == 401
    assert master.status(verbose=False)["pools"][0]["paused"] is False
    # pause: the pool takes no job (checked through Redis), continue: it does
    assert post(port, "/api/pools/w/pause", TOKEN)[0] == 200
    wait_for(lambda: master.status(verbose=False)["pools"][0]["paused"], 5, what="the pause")
    push_many(r, "high", [make_payload("ok")])
    time.sleep(1.5)
    assert r.llen(PREFIX + "queues:high") == 1
    assert post(port, "/api/pools/w/continue", TOKEN)[0] == 200
    wait_for(lambda: r.llen(PREFIX + "queues:high") == 0, 10, what="the job taken after continue")
    # scale to 3, then back to auto
    st, rep = post(port, "/api/pools/w/scale", TOKEN, {"n": 3})
    assert st == 200 and rep["target"] == 3
    master.wait_children("w", 3)
    assert post(port, "/api/pools/w/scale", TOKEN, {"n": "lots"})[0] == 400
    assert post(port, "/api/pools/w/scale", TOKEN, "n=3", ctype="application/x-www-form-urlencoded")[0] == 415
    assert post(port, "/api/pools/nope/pause", TOKEN)[0] == 400
    assert post(port, "/api/pools/w/restart", TOKEN)[0] == 200
    # retry a failed job: it runs again (the handler records it), and fails
    # again (tries = 1)
    bad = make_payload("fail", job=MAIL)
    push_many(r, "default", [bad])

    def failed(name):
        return [f["uuid"] for f in json.loads(get(port, "/api/failed", TOKEN)[2])["failed"] if f["name"] == name]
    wait_for(lambda: failed(MAIL) == [bad["uuid"]], 15, what="the failure")
    st, rep = post(port, "/api/failed/%s/retry" % bad["uuid"], TOKEN)
    assert st == 200 and rep["queue"] == "default"
    wait_for(lambda: len([l for l in read_fixture_log(log) if l[0] == "job" and l[2] == bad["uuid"]]) == 2, 15,
             what="the retried job to run again")
    assert post(port, "/api/failed/%s/retry" % ("0" * 36), TOKEN)[0] == 404
    # bulk retry by class: only that class's; forget
    more = [make_payload("fail", job=REPORT) for _ in range(3)]
    push_many(r, "default", more)
    wait_for(lambda: len(failed(REPORT)) == 3 and failed(MAIL), 15, what="three failures")
    assert post(port, "/api/failed/retry", TOKEN, {"name": REPORT}) == (
        200, {"ok": True, "retried": 3, "retry_until_kept": 0, "remaining": 0, "cursor": None})
    wait_for(lambda: len([l for l in read_fixture_log(log) if l[0] == "job" and l[2] == more[0]["uuid"]]) == 2, 15,
             what="the class retried")
    wait_for(lambda: len(failed(REPORT)) == 3, 15, what="them to fail again")
    assert post(port, "/api/failed/%s/forget" % more[0]["uuid"], TOKEN)[0] == 200
    assert len(failed(REPORT)) == 2 and failed(MAIL) == [bad["uuid"]]
    # each logged with who asked; the token never
    text = master.log()
    # the pause itself names its source, as a signal's or the socket's does
    assert "pool w: paused (HTTP)" in text and "pool w: resumed (HTTP)" in text
    assert "control: pause pool w over HTTP by 127.0.0.1" in text and "forgot failed job %s by 127.0.0.1" % more[0]["uuid"] in text
    assert TOKEN not in text


def test_bulk_retry_is_paged_and_healthz_answers_meanwhile(master, r, tmp_path):
    # review #8: a bulk retry does a bounded page per request (one script per
    # batch), says how many are left and where to go on; /healthz and
    # /metrics answer between (and while) the pages
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    # 1,150 failures of a queue no pool works on (nothing takes them back):
    # 1,100 of one class, 50 of another, interleaved
    payloads = [make_payload("ok", job=REPORT if i % 23 == 0 and i < 23 * 150 else MAIL) for i in range(1150)]
    others = sum(1 for p in payloads if p["displayName"] == REPORT)
    fill_failed_store(r, "bulkq", payloads)
    mails = len(payloads) - others

    probes, stop = [], []

    def probe():
        while not stop:
            probes.append(code(port, "/healthz", TOKEN))
    t = threading.Thread(target=probe)
    t.start()
    pages, total, cursor = [], 0, None
    try:
        while True:
            body = {"name": MAIL}
            if cursor:
                body["cursor"] = cursor
            st, rep = post(port, "/api/failed/retry", TOKEN, body)
            assert st == 200, rep
            pages.append(rep)
            total += rep["retried"]
            assert code(port, "/healthz", TOKEN) == 200 and code(port, "/metrics", TOKEN) == 200
            if rep["remaining"] == 0:
                assert rep["cursor"] is None
                break
            cursor = rep["cursor"]
            assert cursor["queue"] == "bulkq" and len(pages) < 20
    finally:
        stop.append(1)
        t.join()
    assert total == mails and len(pages) >= 3
    assert all(p["retried"] <= 500 for p in pages)
    assert pages[0]["remaining"] == len(payloads) - 500  # what the first page did not look at
    assert probes and set(probes) == {200}
    # retried oldest first, attempts reset; the other class is still in the store
    ready = [json.loads(x) for x in r.lrange(PREFIX + "queues:bulkq", 0, -1)]
    assert [p["uuid"] for p in ready] == [p["uuid"] for p in payloads if p["displayName"] == MAIL]
    assert all(p["attempts"] == 0 for p in ready)
    assert r.zcard(PREFIX + "qpool:failed:bulkq") == others
    # by queue: the rest, in one page
    assert post(port, "/api/failed/retry", TOKEN, {"queue": "bulkq"})[1]["retried"] == others
    assert r.zcard(PREFIX + "qpool:failed:bulkq") == 0 and not r.sismember(PREFIX + "qpool:failed:queues", "bulkq")
    assert post(port, "/api/failed/retry", TOKEN, {"queue": "bulkq", "cursor": "x"})[0] == 400


def test_actions_are_off_without_a_token(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path / "fixture.log", port)
    assert post(port, "/api/pools/w/pause", TOKEN)[0] == 403
    # and so are the job records (the token they need is not configured): said so
    status, _, body = get(port, "/api/failed")
    assert status == 401 and "none is configured" in json.loads(body)["error"]
    assert master.status(verbose=False)["pools"][0]["paused"] is False


def test_the_dashboard_is_served_strictly_and_under_a_prefix(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path / "fixture.log", port, qpool="")
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port, 'base_path = "/qpool/";'))
    master.signal(signal.SIGHUP)
    time.sleep(1)
    wait_for(lambda: code(port, "/qpool/api/status") == 200, 10, what="the prefixed API")
    for path in ("/", "/qpool/", "/qpool/assets/app.js", "/assets/app.css"):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", path)
        res = c.getresponse()
        res.read()
        assert res.status == 200, path
        csp = res.getheader("Content-Security-Policy")
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert res.getheader("X-Frame-Options") == "DENY"
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/qpool")
    res = c.getresponse()
    assert res.status == 301 and res.getheader("Location") == "/qpool/"
    assert code(port, "/assets/../api/status") in (200, 404)  # normalised or refused, never a file
    assert code(port, "/assets/nope.js") == 404


# ---------------------------------------------------------------- who may read what (review 2026-11-24)

SECRET = "reset-token-SECRET-123"


def get_h(port, path, headers=None, token=None):
    """(status, body) of GET path with extra headers."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    c.request("GET", path, headers=h)
    res = c.getresponse()
    body = res.read().decode()
    c.close()
    return res.status, body


def a_failed_secret(r, port):
    """A job that fails with a secret in its payload, once it is in the job history and the failed store."""
    bad = make_payload("fail", job="App\\Jobs\\SendPasswordReset", email="alice@example.com", reset_token=SECRET)
    push_many(r, "default", [bad])
    wait_for(lambda: get(port, "/api/failed/" + bad["uuid"], TOKEN)[0] == 200, 20, what="the failure")
    return bad["uuid"]


PRIVATE = ("/api/failed", "/api/failed/{u}", "/api/jobs/recent", "/api/jobs/{u}", "/api/jobs/recent?outcome=failed")
AGGREGATES = ("/metrics", "/api/status", "/api/fleet", "/api/metrics", "/api/limits")
OPEN = ("/healthz", "/", "/assets/app.js")
PROXIED = ({"X-Forwarded-For": "203.0.113.5"}, {"Forwarded": "for=203.0.113.5"}, {"X-Real-IP": "203.0.113.5"},
           {"x-forwarded-for": "203.0.113.5"})


def test_without_the_token_loopback_reads_only_aggregates(master, r, tmp_path):
    """#1: payloads, exceptions, job records and failed jobs need the token,
    even on loopback; the overview's aggregates do not; a proxied request is
    never local."""
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log", "tries = 1;").replace("tries = 2;", ""),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    uuid = a_failed_secret(r, port)
    for path in PRIVATE:
        path = path.format(u=uuid)
        status, body = get_h(port, path)
        assert status == 401 and SECRET not in body, (path, status)
        assert "need the token" in json.loads(body)["error"], body
        status, body = get_h(port, path, token=TOKEN)
        assert status == 200, (path, status)
    assert SECRET in get_h(port, "/api/failed/" + uuid, token=TOKEN)[1]
    # aggregates: open to a local request, without each worker's job
    for path in AGGREGATES + OPEN:
        status, body = get_h(port, path)
        assert status == 200 and SECRET not in body, (path, status)
    st = json.loads(get_h(port, "/api/status")[1])
    assert st["aggregates_only"] is True and st["pools"][0]["job_stats"]
    assert all("children" not in p for p in st["pools"])
    fleet = json.loads(get_h(port, "/api/fleet")[1])
    assert fleet["aggregates_only"] is True and fleet["masters"]
    assert all("children" not in p for m in fleet["masters"] for p in m["pools"])
    full = json.loads(get_h(port, "/api/status", token=TOKEN)[1])
    assert full["aggregates_only"] is False and len(full["pools"][0]["children"]) == 2
    # a proxy's request (nginx in front, say) is never local: the token, for all but /healthz and the files
    for headers in PROXIED:
        for path in AGGREGATES + tuple(p.format(u=uuid) for p in PRIVATE):
            assert get_h(port, path, headers)[0] == 401, (headers, path)
            assert get_h(port, path, headers, token=TOKEN)[0] == 200, (headers, path)
        for path in OPEN:
            assert get_h(port, path, headers)[0] == 200, (headers, path)
    assert "proxy forwarded" in json.loads(get_h(port, "/metrics", PROXIED[0])[1])["error"]


def test_open_reads_are_said_plainly_and_the_old_key_means_the_safe_thing(master, r, tmp_path):
    port = free_port()
    log = tmp_path / "fixture.log"
    # the old key still loads: a warning says it is deprecated and what it now means
    master.write_config(pool(log, "tries = 1;").replace("tries = 2;", ""),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN"; read_only_without_token = true;'))
    res = subprocess.run([QPOOL, "check", "-c", str(master.conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert re.search(re.escape(str(master.conf)) + r":\d+: .*read_only_without_token is deprecated; true now means "
                     r'read_without_token = "aggregates"', res.stderr), res.stderr
    assert 'read_without_token = "aggregates";' in res.stdout
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    master.wait_log(r"read_only_without_token is deprecated")
    uuid = a_failed_secret(r, port)
    assert get_h(port, "/api/failed/" + uuid)[0] == 401
    assert get_h(port, "/api/status")[0] == 200
    # false: nothing but /healthz and the files without the token
    master.write_config(pool(log), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN"; read_only_without_token = false;'))
    master.cli("reload")
    wait_for(lambda: code(port, "/api/status") == 401, 10, what="aggregates behind the token")
    assert code(port, "/metrics") == 401 and code(port, "/healthz") == 200 and code(port, "/metrics", TOKEN) == 200
    # a single-user box says so: everything open to a local request, still not to a proxied one
    master.write_config(pool(log), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN"; read_without_token = "all";'))
    master.cli("reload")
    wait_for(lambda: get_h(port, "/api/failed/" + uuid)[0] == 200, 10, what="open reads")
    assert SECRET in get_h(port, "/api/failed/" + uuid)[1]
    assert "children" in json.loads(get_h(port, "/api/status")[1])["pools"][0]
    assert get_h(port, "/api/failed/" + uuid, {"X-Forwarded-For": "203.0.113.5"})[0] == 401


def unix_get(path, sock, user=None):
    """The status of GET path over a Unix socket, as user (or us); None when it cannot connect."""
    script = ("import http.client, socket, sys\n"
              "class C(http.client.HTTPConnection):\n"
              "    def connect(self):\n"
              "        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1])\n"
              "c = C('localhost', timeout=10)\n"
              "try:\n"
              "    c.request('GET', sys.argv[2]); print(c.getresponse().status)\n"
              "except OSError:\n"
              "    print('None')\n")
    res = subprocess.run(["/usr/bin/python3", "-c", script, str(sock), path], capture_output=True, text=True,
                         timeout=30, cwd="/", **({"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}
                                                 if user else {}))
    assert res.returncode == 0, res.stderr
    return None if res.stdout.strip() == "None" else int(res.stdout)


@pytest.fixture
def public_dir():
    """A directory every user may reach, only root may change (a Unix listener's home)."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="qpool-http-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_proxied_request_is_never_local(master, r, tmp_path):
    """#1, the proxy half, with only what d7a765b already knew in the config
    (listen, token_env): a request a same-host proxy forwarded (it carries
    X-Forwarded-For, Forwarded or X-Real-IP) gets neither the aggregates nor a
    failed job's payload without the token, though it comes from 127.0.0.1
    with Host 127.0.0.1 (on d7a765b: 200 for all of them)."""
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    uuid = a_failed_secret(r, port)
    assert get_h(port, "/metrics")[0] == 200  # the same request, not forwarded: the aggregates are open
    got = {(list(h)[0], path): get_h(port, path, h)[0]
           for h in PROXIED for path in ("/metrics", "/api/status", "/api/failed/" + uuid)}
    assert set(got.values()) == {401}, got
    for h in PROXIED:  # with the token, or for the probe: served
        assert get_h(port, "/api/failed/" + uuid, h, token=TOKEN)[0] == 200
        assert get_h(port, "/healthz", h)[0] == 200


@pytest.mark.skipif(os.geteuid() != 0, reason="connects as another user")
def test_another_user_on_a_world_connectable_unix_listener_reads_nothing(master, r, tmp_path, public_dir):
    """#1, the Unix listener half, with only what d7a765b already knew
    (listen, socket_mode, token_env): on a 0666 socket another local user
    (nobody) gets neither the aggregates nor a failed job's payload without
    the token, while root, a user of the control socket, reads the
    aggregates (on d7a765b: nobody got 200 for all of them)."""
    sock = os.path.join(public_dir, "http.sock")
    master.write_config(pool(tmp_path / "fixture.log"), qpool=(
        'http = { listen = "%s"; socket_mode = "0666"; token_env = "QPOOL_TEST_TOKEN"; };' % sock))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: unix_get("/healthz", sock) == 200, 10, what="the Unix listener")
    bad = make_payload("fail", job="App\\Jobs\\SendPasswordReset", reset_token=SECRET)
    push_many(r, "default", [bad])
    wait_for(lambda: r.zcard(PREFIX + "qpool:failed:default") == 1, 20, what="the failure")
    as_nobody = {p: unix_get(p, sock, user="nobody") for p in ("/api/status", "/metrics", "/api/failed/" + bad["uuid"])}
    assert as_nobody == {p: 401 for p in as_nobody}, as_nobody
    assert unix_get("/healthz", sock, user="nobody") == 200
    assert unix_get("/api/status", sock) == 200  # root


@pytest.mark.skipif(os.geteuid() != 0, reason="connects as another user")
def test_a_unix_listener_reads_like_the_control_socket(master, r, tmp_path, public_dir):
    """#1: a Unix listener's peer is local only by the control socket's rule
    (root, qpool's user, control_user, control_group); socket_group lets
    another group (a proxy's) connect, needing the token."""
    sock = os.path.join(public_dir, "http.sock")
    log = tmp_path / "fixture.log"
    master.write_config(pool(log, "tries = 1;").replace("tries = 2;", ""), qpool=(
        'http = { listen = "%s"; socket_mode = "0666"; token_env = "QPOOL_TEST_TOKEN"; };' % sock))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: unix_get("/healthz", sock) == 200, 10, what="the Unix listener")
    bad = make_payload("fail", job="App\\Jobs\\SendPasswordReset", reset_token=SECRET)
    push_many(r, "default", [bad])
    path = "/api/failed/" + bad["uuid"]
    wait_for(lambda: r.zcard(PREFIX + "qpool:failed:default") == 1, 20, what="the failure")
    # root (the control socket's) reads the aggregates; another local user
    # connects (mode 0666) but is not the control socket's: the token
    assert unix_get("/api/status", sock) == 200 and unix_get(path, sock) == 401
    assert unix_get("/api/status", sock, user="nobody") == 401
    assert unix_get(path, sock, user="nobody") == 401
    assert unix_get("/healthz", sock, user="nobody") == 200
    # with open reads (a single-user box) still only for the control socket's users
    master.write_config(pool(log), qpool=(
        'http = { listen = "%s"; socket_mode = "0666"; token_env = "QPOOL_TEST_TOKEN"; read_without_token = "all"; };'
        % sock))
    master.cli("reload")
    wait_for(lambda: unix_get(path, sock) == 200, 10, what="root reading the failure")
    assert unix_get(path, sock, user="nobody") == 401
    # control_group makes a user local, like on the control socket
    master.write_config(pool(log), qpool=(
        'control_group = "nogroup"; http = { listen = "%s"; socket_mode = "0666"; token_env = "QPOOL_TEST_TOKEN";'
        ' read_without_token = "all"; };' % sock))
    master.cli("reload")
    wait_for(lambda: unix_get(path, sock, user="nobody") == 200, 10, what="nobody, in control_group, reading")
    # socket_group: mode 0660, the group's members connect (as not local), others cannot
    master.write_config(pool(log), qpool=(
        'http = { listen = "%s"; socket_mode = "0660"; socket_group = "nogroup"; token_env = "QPOOL_TEST_TOKEN";'
        ' read_without_token = "all"; };' % sock))
    master.cli("reload")
    wait_for(lambda: unix_get(path, sock, user="nobody") == 401, 10, what="nobody, a socket_group member, not local")
    st = os.stat(sock)
    assert st.st_gid == 65534 and st.st_mode & 0o777 == 0o660
    assert unix_get("/healthz", sock, user="nobody") == 200
    assert unix_get(path, sock) == 200  # root
    # without socket_group again: qpool's group, and nobody cannot connect
    master.write_config(pool(log), qpool=(
        'http = { listen = "%s"; socket_mode = "0660"; token_env = "QPOOL_TEST_TOKEN"; };' % sock))
    master.cli("reload")
    wait_for(lambda: unix_get("/healthz", sock, user="nobody") is None, 10, what="nobody shut out")
    assert os.stat(sock).st_gid == os.getegid()


def test_the_token_survives_reloads(master, r, tmp_path):
    """#2: with token_env, a reload that changes any http setting, listen
    included, keeps the token; one that turns the endpoint off says so and
    fails."""
    a, b = free_port(), free_port()
    log = tmp_path / "fixture.log"
    env = 'token_env = "QPOOL_TEST_TOKEN";'
    master.write_config(pool(log), qpool=http_conf(a, env))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(a, "/metrics", TOKEN) == 200, 10, what="the HTTP endpoint")
    before = http_pid(master)
    master.write_config(pool(log), qpool=http_conf(a, env + " timeout = 11; max_connections = 20;"))
    res = master.cli("reload")
    assert "HTTP endpoint is off" not in res.stdout
    wait_for(lambda: http_pid(master) not in (None, before) and code(a, "/metrics", TOKEN) == 200, 10,
             what="the endpoint, with its token, after the reload")
    assert code(a, "/api/failed") == 401 and code(a, "/api/failed", TOKEN) == 200
    # a new address: the same token
    master.write_config(pool(log), qpool=http_conf(b, env))
    master.cli("reload")
    wait_for(lambda: code(b, "/metrics", TOKEN) == 200, 10, what="the new address, with the token")
    assert code(a, "/healthz") is None
    # off, with no listen; on again: the token is still the one qpool read at the start
    master.write_config(pool(log))
    master.cli("reload")
    wait_for(lambda: code(b, "/healthz") is None, 10, what="the endpoint off")
    master.write_config(pool(log), qpool=http_conf(b, env))
    master.cli("reload")
    wait_for(lambda: code(b, "/api/failed", TOKEN) == 200, 10, what="the endpoint back, with the token")
    # another variable, not set: the reload says the endpoint is off, and fails; the log says why
    master.write_config(pool(log), qpool=http_conf(b, 'token_env = "QPOOL_NO_SUCH_TOKEN";'))
    res = master.cli("reload", check=False)
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert "the HTTP endpoint is off" in res.stderr and "QPOOL_NO_SUCH_TOKEN is not set" in res.stderr, res.stderr
    master.wait_log(r"reload: http.token_env: QPOOL_NO_SUCH_TOKEN is not set.*the HTTP endpoint is off")
    # the reload returns once the process is told to stop: it may still
    # answer a request it accepted before it got SIGTERM
    wait_for(lambda: code(b, "/healthz") is None, 10, what="the endpoint off")
    assert master.proc.poll() is None
    # back to the first variable: the token qpool holds
    master.write_config(pool(log), qpool=http_conf(b, env))
    assert master.cli("reload").returncode == 0
    wait_for(lambda: code(b, "/api/failed", TOKEN) == 200, 10, what="the endpoint back")
    assert TOKEN not in master.log()


def test_a_token_file_over_the_limit_is_refused(master, r, tmp_path):
    """#12: a token_file longer than 4096 bytes is refused, not cut."""
    port = free_port()
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "x" * 5000 + "\n")
    os.chmod(tok, 0o600)
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port, 'token_file = "%s";' % tok))
    master.start()
    master.wait_log(r"token_file .* is longer than 4096 bytes; the HTTP endpoint stays off")
    assert code(port, "/healthz") is None
    # at the limit: fine
    tok.write_text(TOKEN + "x" * (4096 - len(TOKEN) - 1) + "\n")
    master.cli("reload", check=False)
    wait_for(lambda: code(port, "/metrics", TOKEN + "x" * (4096 - len(TOKEN) - 1)) == 200, 10, what="the endpoint")

def memory_holds(pid, secrets):
    """Which of secrets (bytes) are anywhere in pid's readable memory. As
    root, /proc/PID/mem reads even a non-dumpable process (ptrace access)."""
    found = set()
    with open("/proc/%d/maps" % pid) as f:
        maps = [l.split() for l in f.read().splitlines()]
    with open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for m in maps:
            if "r" not in m[1] or (len(m) > 5 and m[5] in ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
                continue
            lo, hi = (int(x, 16) for x in m[0].split("-"))
            if hi - lo > 1 << 30:
                continue  # reserved, not heap or stack
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            for s in secrets:
                if s in data:
                    found.add(s)
                    if os.environ.get("QPOOL_DEBUG_SECRETS"):
                        i = data.index(s)
                        print("SECRET %s in %s at +%#x: %r" % (s, " ".join(m[5:]) or "anon", i, data[max(0, i - 96):i + 48]))
    return found


def test_the_http_process_holds_no_secret_it_does_not_need(master, r, tmp_path):
    """Review #6: the HTTP process reads Redis through http.connection only.
    Another connection's password (from password_file, and from a
    password_env variable), the pools' environment values, the config
    file's text, the master's environment and a token the config no longer
    names are nowhere in its memory, also after a reload (the process is a
    fresh image: nothing of the master's heap, where a reload's freed
    buffers of the file's text are). Checked by reading the process's
    whole memory through /proc/PID/mem."""
    if os.geteuid() != 0:
        pytest.skip("reading another process's memory needs root")
    rnd = lambda what: b"%s-%s" % (what, os.urandom(6).hex().encode())  # noqa: E731
    file_pw, env_pw, app_key, web_pw = rnd(b"file-pw"), rnd(b"env-pw"), rnd(b"app-key"), rnd(b"web-pw")
    text, master_env, tok_a, tok_b = rnd(b"config-text"), rnd(b"master-env"), rnd(b"token-a"), rnd(b"token-b")
    # ACL users: the master and the workers authenticate as them (AUTH's
    # buffers must not leave a copy behind either)
    r.execute_command("ACL", "SETUSER", "spare", "on", ">" + file_pw.decode(), "~*", "&*", "+@all")
    r.execute_command("ACL", "SETUSER", "other", "on", ">" + env_pw.decode(), "~*", "&*", "+@all")
    r.execute_command("ACL", "SETUSER", "web", "on", ">" + web_pw.decode(), "~*", "&*", "+@all")
    pwf = tmp_path / "spare.pw"
    pwf.write_bytes(file_pw + b"\n")
    os.chmod(pwf, 0o600)
    port, rport = free_port(), master.redis.port
    conns = ('default = { host = "127.0.0.1"; port = %d; prefix = "%s"; };\n'
             '  spare = { host = "127.0.0.1"; port = %d; prefix = "%s"; username = "spare"; password_file = "%s"; };\n'
             '  other = { host = "127.0.0.1"; port = %d; prefix = "%s"; username = "other"; password_env = "QPOOL_TEST_OTHER_PW"; };\n'
             '  web = { host = "127.0.0.1"; port = %d; prefix = "%s"; username = "web"; password_env = "QPOOL_TEST_WEB_PW"; };'
             % (rport, PREFIX, rport, PREFIX, pwf, rport, PREFIX, rport, PREFIX))
    log = tmp_path / "fixture.log"
    # the marker is only in a comment: what holds it holds the file's raw text
    pools = ('# %s\n'
             '{ name = "w"; queues = ["default"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; };'
             ' environment = { FIXTURE_LOG = "%s"; APP_KEY = "%s"; }; },\n'
             '{ name = "s"; connection = "spare"; queues = ["s"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; },\n'
             '{ name = "o"; connection = "other"; queues = ["o"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
             % (text.decode(), FIXTURE_HANDLER, log, app_key.decode(), FIXTURE_HANDLER, FIXTURE_HANDLER))

    def configure(token_env):
        master.write_config(pools, qpool=http_conf(port, 'connection = "web"; read_without_token = "all"; token_env = "%s";'
                                                   % token_env), redis_conf=conns)
    configure("QPOOL_TEST_TOKEN_A")
    master.start(env={"QPOOL_TEST_OTHER_PW": env_pw.decode(), "QPOOL_TEST_WEB_PW": web_pw.decode(),
                      "QPOOL_TEST_TOKEN_A": tok_a.decode(), "QPOOL_TEST_TOKEN_B": tok_b.decode(),
                      "QPOOL_TEST_MASTER_ONLY": master_env.decode()})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    master.wait_children("s", 1)
    master.wait_children("o", 1)
    secrets = {file_pw, env_pw, app_key}
    foreign = secrets | {text, master_env, tok_b}
    # the scan sees them where they are meant to be: the master holds them all
    assert memory_holds(master.proc.pid, secrets | {web_pw}) == secrets | {web_pw}
    pid = http_pid(master)
    assert memory_holds(pid, foreign | {web_pw, tok_a}) == {web_pw, tok_a}  # its own connection's and token only
    assert get(port, "/api/failed")[0] == 200  # and it still reads Redis as "web"
    configure("QPOOL_TEST_TOKEN_B")  # the token changes at the first reload
    for _ in range(2):  # started at a reload, with the old config still in the master
        master.signal(signal.SIGHUP)
        wait_for(lambda: http_pid(master) not in (None, pid) and code(port, "/healthz") == 200, 10,
                 what="a new HTTP process")
        pid = http_pid(master)
        assert memory_holds(pid, foreign | {tok_a, web_pw, tok_b}) == {web_pw, tok_b}
    assert get(port, "/api/failed")[0] == 200
    assert get(port, "/metrics", token=tok_b.decode())[0] == 200


SANITIZED = re.search(r"^QPOOL_SANITIZE:BOOL=ON$", (BUILD / "CMakeCache.txt").read_text(), re.M) is not None \
    if (BUILD / "CMakeCache.txt").is_file() else False

def test_a_native_worker_holds_no_other_pools_secrets_nor_the_token(master, r, tmp_path):
    """Security review 2026-11-27 m3: a native worker is a fork of the master
    with no exec, and held the HTTP token, every other pool's environment
    (APP_KEY) and the passwords of connections it never uses. After the
    fork it now wipes them: a worker of pool a has none of pool b's, nor the
    token, in its memory (read through /proc/PID/mem) or its environment;
    it keeps its own pool's environment and connection."""
    if os.geteuid() != 0:
        pytest.skip("reading another process's memory needs root")
    rnd = lambda what: b"%s-%s" % (what, os.urandom(6).hex().encode())  # noqa: E731
    key_a, key_b, file_pw, tok = rnd(b"app-key-a"), rnd(b"app-key-b"), rnd(b"file-pw"), rnd(b"token")
    r.execute_command("ACL", "SETUSER", "spare", "on", ">" + file_pw.decode(), "~*", "&*", "+@all")
    pwf = tmp_path / "spare.pw"
    pwf.write_bytes(file_pw + b"\n")
    os.chmod(pwf, 0o600)
    port, rport = free_port(), master.redis.port
    conns = ('default = { host = "127.0.0.1"; port = %d; prefix = "%s"; };\n'
             '  spare = { host = "127.0.0.1"; port = %d; prefix = "%s"; username = "spare"; password_file = "%s"; };'
             % (rport, PREFIX, rport, PREFIX, pwf))
    pools = ('{ name = "a"; queues = ["a"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; };'
             ' environment = { APP_KEY = "%s"; }; },\n'
             '{ name = "b"; connection = "spare"; queues = ["b"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; };'
             ' environment = { APP_KEY = "%s"; }; }'
             % (FIXTURE_HANDLER, key_a.decode(), FIXTURE_HANDLER, key_b.decode()))
    master.write_config(pools, qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'), redis_conf=conns)
    master.start(env={"QPOOL_TEST_TOKEN": tok.decode()})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    everything = {key_a, key_b, file_pw, tok}
    assert memory_holds(master.proc.pid, everything) == everything  # the scan finds them where they are

    def check():
        for name, own in (("a", {key_a}), ("b", {key_b, file_pw})):
            wait_for(lambda: [c["state"] for c in master.pool(name)["children"]] == ["idle"], 10,
                     what="pool %s's worker to be ready" % name)
            (pid,) = master.child_pids(name)
            # ASan keeps freed blocks intact in its quarantine (a copy that
            # libconfig or a realloc freed unwiped): the scan is of glibc's heap
            if not SANITIZED:
                assert memory_holds(pid, everything) == own, "worker of pool %s" % name
            with open("/proc/%d/environ" % pid, "rb") as f:
                environ = f.read()
            assert not [s for s in everything if s in environ], "worker of pool %s's environment" % name

    check()
    before = {n: master.child_pids(n) for n in ("a", "b")}
    master.write_config(pools.replace("processes = 1;", "processes = 1; tries = 3;"),
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'), redis_conf=conns)
    master.signal(signal.SIGHUP)  # the pools change: workers forked after the reload
    wait_for(lambda: all(master.child_pids(n) and master.child_pids(n) != before[n] for n in before), 20,
             what="the pools' new workers")
    check()
