"""Valid UTF-8 everywhere (review 2026-11-24 #4): a payload whose class
name, uuid or id is not valid UTF-8 is repaired where the worker takes it
(U+FFFD), so /metrics (checked with promtool), the JSON API, the logs and
the records in Redis only ever carry valid UTF-8; the failed store keeps
the job's raw bytes, and the API shows them repaired plus base64. A queue
name that is not valid UTF-8 is a config error. Real processes, real Redis,
real HTTP."""
import base64
import json
import re
import subprocess
import urllib.parse
import urllib.request

from conftest import FIXTURE_HANDLER, PREFIX, QPOOL, free_port, push, wait_for
from test_http import code

TOKEN = "s3cret-token-for-the-utf8-tests-0123456789"
BAD_CLASS = b"App\\\\Jobs\\\\X\xff\xfe"          # as JSON text: App\Jobs\X + two stray bytes
FIXED_CLASS = "App\\Jobs\\X\ufffd\ufffd"


def get(port, path):
    """(status, raw body bytes), with the token (whatever reads need it)."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    req.add_header("Authorization", "Bearer " + TOKEN)
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, res.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get_json(port, path):
    status, body = get(port, path)
    assert status == 200, (path, body)
    return json.loads(body.decode("utf-8"))  # strict: raises on any invalid byte


def raw_payload(uuid, action, cls=BAD_CLASS, job_id=b"id-\xc3(", attempts=b',"attempts":0'):
    return (b'{"uuid":"' + uuid + b'","displayName":"' + cls + b'","job":"Illuminate\\\\Queue\\\\CallQueuedHandler@call",'
            b'"maxTries":null,"maxExceptions":null,"failOnTimeout":false,"backoff":null,"timeout":null,'
            b'"retryUntil":null,"data":{"action":"' + action + b'","note":"caf\xe9"},"id":"' + job_id + b'"'
            + attempts + b'}')


def start(master, tmp_path, port):
    pool = ('{ name = "w"; queues = ["high", "default"]; processes = 2; tries = 1; timeout = 10;'
            ' handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; }'
            % (FIXTURE_HANDLER, tmp_path / "fixture.log"))
    master.write_config(pool, qpool='job_history_payloads = true;\n  http = { listen = "127.0.0.1:%d";'
                                     ' token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")


def test_invalid_utf8_in_a_payload_never_leaves_qpool(master, r, tmp_path):
    port = free_port()
    start(master, tmp_path, port)
    ok_uuid, bad_uuid, sleepy = b"utf8-ok-1", b"utf8-fail-\xff", b"utf8-sleep-1"
    push(r, "high", raw_payload(ok_uuid, b"ok"))
    push(r, "default", raw_payload(bad_uuid, b"fail"))
    # a payload the worker cannot use (no attempts): kept raw in the failed store
    malformed = raw_payload(b"utf8-malformed", b"ok", attempts=b"")
    push(r, "high", malformed)
    malformed2 = raw_payload(b"utf8-mal-\xff", b"ok", attempts=b"")  # its uuid cannot name the record
    push(r, "default", malformed2)
    push(r, "high", raw_payload(sleepy, b"sleep:3000"))

    # while the slow one runs, the status names it, repaired
    def busy():
        st = get_json(port, "/api/status?verbose=1")
        return [w for p in st["pools"] for w in p.get("children", []) if (w.get("job") or {}).get("uuid") == "utf8-sleep-1"]
    running = wait_for(busy, 20, what="the slow job running")
    assert running[0]["job"]["name"] == FIXED_CLASS
    st = subprocess.run([QPOOL, "status", "--json", "-c", str(master.conf)], capture_output=True, timeout=30)
    assert st.returncode == 0
    st.stdout.decode("utf-8")

    def recorded():
        return len(get_json(port, "/api/jobs/recent")["jobs"]) >= 3 and \
            len(get_json(port, "/api/failed")["failed"]) == 3
    wait_for(recorded, 30, what="the jobs recorded and the failures stored")

    # /metrics: valid UTF-8, the class repaired, and promtool has nothing to say
    status, body = get(port, "/metrics")
    assert status == 200
    text = body.decode("utf-8")
    assert 'job="App\\\\Jobs\\\\X\ufffd\ufffd"' in text
    res = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr

    # the JSON API: every answer decodes as strict UTF-8
    jobs = get_json(port, "/api/jobs/recent")["jobs"]
    by_uuid = {j["uuid"]: j for j in jobs}
    assert by_uuid["utf8-ok-1"]["name"] == FIXED_CLASS and by_uuid["utf8-ok-1"]["id"] == "id-\ufffd("
    assert by_uuid["utf8-fail-\ufffd"]["outcome"] == "failed"
    shown = json.loads(by_uuid["utf8-ok-1"]["payload"])  # the payload shown is repaired, still JSON
    assert shown["displayName"] == FIXED_CLASS and shown["data"]["note"] == "caf\ufffd"
    one = get_json(port, "/api/jobs/" + urllib.parse.quote("utf8-fail-\ufffd"))
    assert one["attempts"][0]["name"] == FIXED_CLASS
    failed = {f["uuid"]: f for f in get_json(port, "/api/failed")["failed"]}
    assert failed["utf8-fail-\ufffd"]["name"] == FIXED_CLASS
    for path in ("/api/status", "/api/status?verbose=1", "/api/metrics?minutes=5", "/api/fleet",
                 "/api/jobs/recent?limit=50"):
        get_json(port, path)

    # the failed store keeps the raw bytes; the API shows them repaired and, exactly, in base64
    invalid = sorted(u for u, f in failed.items() if f["name"] == "(invalid payload)")
    assert len(invalid) == 2 and invalid[1] == "utf8-malformed"
    assert re.fullmatch(r"[0-9a-f-]{36}", invalid[0])  # a fresh uuid, not the payload's bytes
    for uuid, raw in zip(invalid, (malformed2, malformed)):
        assert r.hget(PREFIX + "qpool:failed:job:" + uuid, "payload") == raw
        one = get_json(port, "/api/failed/" + uuid)
        assert base64.b64decode(one["payload_base64"]) == raw
        assert "caf\ufffd" in one["payload"]
    one = get_json(port, "/api/failed/" + urllib.parse.quote("utf8-fail-\ufffd"))
    assert base64.b64decode(one["payload_base64"]) == raw_payload(bad_uuid, b"fail")

    # Redis: the records qpool writes are valid UTF-8 (job records, minute metrics, the failed store's fields)
    records = r.lrange(PREFIX + "qpool:{qpool-jobs}:list", 0, -1)  # history.c's keys
    assert records, "no job records to check"
    for rec in records + list(r.hvals(PREFIX + "qpool:{qpool-jobs}:uuid")):
        json.loads(rec.decode("utf-8"))
    for key in r.scan_iter(PREFIX + "qpool:metrics:*"):
        for field, value in r.hgetall(key).items():
            field.decode("utf-8"), value.decode("utf-8")
    for key in r.scan_iter(PREFIX + "qpool:failed:job:*"):
        for field, value in r.hgetall(key).items():
            if field != b"payload":
                value.decode("utf-8")

    # the log: valid UTF-8 throughout (it names the classes, ids and failures)
    master.stop()
    log = master.log_path.read_bytes()
    assert b"\xef\xbf\xbd" in log  # the repaired names were logged
    log.decode("utf-8")


def test_a_queue_name_must_be_valid_utf8(master, r, tmp_path):
    conf = master.write_config('{ name = "w"; queues = ["ok", "bad-QQ"]; handler = { type = "pipe"; command = ["%s"]; }; }'
                               % FIXTURE_HANDLER)
    conf.write_bytes(conf.read_bytes().replace(b"bad-QQ", b"bad-\xff"))
    res = subprocess.run([QPOOL, "check", "-c", str(conf)], capture_output=True, timeout=30)
    assert res.returncode == 78, res
    err = res.stderr.decode("utf-8")  # the error itself is valid UTF-8
    assert str(conf) + ":" in err and "not a valid queue name" in err


def test_push_refuses_what_is_not_utf8(master, r, tmp_path):
    # Laravel's json_encode refuses it; so does `qpool push` (it would write invalid JSON text)
    master.write_config('{ name = "w"; queues = ["default"]; handler = { type = "pipe"; command = ["%s"]; }; }'
                        % FIXTURE_HANDLER)
    for args, why in (([b"default", b"--job", b"App\\Jobs\\X\xff"], b"--job and --display-name must be valid UTF-8"),
                      ([b"default", b"--job", b"X", b"--display-name", b"N\xc3"],
                       b"--job and --display-name must be valid UTF-8"),
                      ([b"def\xff", b"--job", b"X"], b"is not a valid queue name")):
        res = subprocess.run([QPOOL.encode(), b"push"] + args + [b"-c", str(master.conf).encode()],
                             capture_output=True, timeout=30)
        assert res.returncode == 64 and why in res.stderr, res
    assert r.keys(PREFIX + "queues:*") == []


def test_metrics_stay_valid_after_one_invalid_class_name(master, r, tmp_path):
    """Review #4 as reported, with only what d7a765b already knew in the
    config (http.listen, token_env): one job whose displayName is not valid
    UTF-8 runs; /metrics is still valid UTF-8 and promtool accepts it (on
    d7a765b: 'invalid label value "App\\\\Jobs\\\\X\\xff\\xfe"')."""
    port = free_port()
    start(master, tmp_path, port)
    push(r, "high", raw_payload(b"bad-utf8-1", b"ok"))

    def metrics_with_the_class():
        status, body = get(port, "/metrics")
        return body if status == 200 and b"Jobs\\\\X" in body else None
    body = wait_for(metrics_with_the_class, 20, what="the class in /metrics")
    res = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    body.decode("utf-8")
