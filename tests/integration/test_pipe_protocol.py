"""The pipe handler protocol (docs/handler-protocol.md) through the real
worker: request ids, the "exiting" flag, jobs the handler never read, the
protocol on descriptors 3/4, and protocol 1 handlers. Regression tests for
review-2026-11 findings #1, #2 and #12.

Handlers: the fixture handler (tests/fixtures/fixture-handler.c) and the
PHP adapter on the fixture Laravel app, with and without ext-ffi."""
import json
import sqlite3
import time
import uuid as uuidlib

import pytest

from conftest import (LARAVEL_APP, PREFIX, ROOT, failed_records, make_payload, push, push_many, queue_state,
                      read_fixture_log, wait_for)
from test_worker import empty, jobs_in_log, native_pool

ADAPTER = ROOT / "php" / "qpool-handler.php"


def failed_by_id(r, queue="default"):
    """Failed-store records by payload id: the exception text of each."""
    out = {}
    for rec in failed_records(r, queue):
        out[json.loads(rec["payload"])["id"]] = rec["exception"].decode(errors="replace")
    return out


def hook_lines(log):
    return [l for l in read_fixture_log(log) if l[0] == "failed"]


# ---------------------------------------------------------------- fixture handler


@pytest.mark.parametrize("stray", ["stray", "stray-noseq"])
def test_a_stray_status_line_never_acks_a_job_that_threw(master, r, tmp_path, stray):
    # review #2: a stray {"status":...} line (one reusing an old request id,
    # or one without an id) is a protocol violation: the handler is
    # restarted and the job it ran counts as an attempt that threw. Before,
    # it acked the job (lost) and shifted every later outcome onto the
    # wrong job.
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log, extra="tries = 1;"))
    a, b, c = make_payload(stray), make_payload("ok"), make_payload("fail")
    push_many(r, "default", [a, b, c])
    master.start()
    wait_for(lambda: empty(r, "default") and len(jobs_in_log(log)) == 3, 20, what="the three jobs")
    failed = failed_by_id(r)
    assert set(failed) == {a["id"], c["id"]}, failed
    assert "HandlerCrashed" in failed[a["id"]] and "broke the protocol" in failed[a["id"]]
    assert "fixture job failed (fail)" in failed[c["id"]]
    assert "broke the protocol" in master.log()
    # each job ran once, on a handler that had not broken the protocol
    assert sorted(l[1] for l in jobs_in_log(log)) == sorted([a["id"], b["id"], c["id"]])


@pytest.mark.parametrize("first", ["exitafter", "exitafter-flag"])
def test_a_handler_that_answers_then_exits_charges_no_other_job(master, r, tmp_path, first):
    # review #1: the request after a handler's last response used to go into
    # the exiting process: the next job was charged a crash (here: failed,
    # tries = 1) without running, or its failure hooks never ran.
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log, extra="tries = 1;"))
    a, b = make_payload(first), make_payload("fail")
    push_many(r, "default", [a, b])
    master.start()
    wait_for(lambda: empty(r, "default") and len(hook_lines(log)) == 1, 20, what="both jobs and B's hooks")
    failed = failed_by_id(r)
    assert set(failed) == {b["id"]}, failed
    assert "fixture job failed (fail)" in failed[b["id"]], "B was charged for A's handler exit"
    runs = [(l[1], l[3]) for l in jobs_in_log(log)]
    assert runs == [(a["id"], "1"), (b["id"], "1")], "B ran once, on its first attempt"
    assert [(l[1], l[2]) for l in hook_lines(log)] == [(b["id"], "max_tries")]


def test_a_job_that_throws_and_ends_the_handler_gets_its_failure_hooks(master, r, tmp_path):
    # review #1, tries = 1: a job that throws and takes the handler down (a
    # PHP fatal error answers, then the process ends) is failed with its own
    # exception, and its failure hooks run on a fresh handler.
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log, extra="tries = 1;"))
    a = make_payload("throwexit")
    push(r, "default", a)
    master.start()
    wait_for(lambda: empty(r, "default") and len(hook_lines(log)) == 1, 20, what="the failure hooks")
    assert "fixture job failed (throwexit)" in failed_by_id(r)[a["id"]]
    assert [(l[1], l[2], l[5]) for l in hook_lines(log)] == [(a["id"], "max_tries", "RuntimeException")]


def test_a_handler_that_dies_before_reading_a_job_gives_it_back_unattempted(master, r, tmp_path):
    # The handler exits on its own between jobs (no "exiting" flag), and the
    # next request is written before the worker notices: it was never read,
    # so the job goes back with its attempts as they were.
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log, extra="tries = 1;"))
    jobs = [make_payload("exitafter") for _ in range(5)] + [make_payload("ok")]
    push_many(r, "default", jobs)
    master.start()
    wait_for(lambda: empty(r, "default") and len(jobs_in_log(log)) >= 6, 30, what="every job")
    assert failed_records(r, "default") == []
    runs = {}
    for l in jobs_in_log(log):
        runs.setdefault(l[1], []).append(l[3])
    assert set(runs) == {j["id"] for j in jobs}
    assert all(att == ["1"] for att in runs.values()), runs
    assert queue_state(r, "default") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}


def test_a_job_reading_stdin_gets_eof_at_once(master, r, tmp_path):
    # review #12: stdin is /dev/null, not the request channel
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log))
    push_many(r, "default", [make_payload("readstdin"), make_payload("ok")])
    master.start()
    wait_for(lambda: empty(r, "default") and len(jobs_in_log(log)) == 2, 20, what="both jobs")
    (line,) = [l for l in read_fixture_log(log) if l[0] == "stdin"]
    assert line[1] == "eof", line


@pytest.mark.parametrize("protocol", ['"auto"', "1"])
def test_protocol_1_handlers_keep_working(master, r, tmp_path, protocol):
    # a handler that knows nothing of descriptors 3/4 and ids: "auto" finds
    # out from its ready line on stdout and starts it again on stdin/stdout
    log = tmp_path / "fixture.log"
    pool = native_pool(log=log, extra="tries = 1;").replace(
        'FIXTURE_LOG = "%s";' % log, 'FIXTURE_LOG = "%s"; FIXTURE_PROTOCOL = "1";' % log).replace(
        'type = "pipe";', 'type = "pipe"; protocol = %s;' % protocol)
    master.write_config(pool)
    jobs = [make_payload("ok"), make_payload("fail"), make_payload("ok")]
    push_many(r, "default", jobs)
    master.start()
    wait_for(lambda: empty(r, "default") and len(jobs_in_log(log)) == 3, 20, what="the three jobs")
    assert set(failed_by_id(r)) == {jobs[1]["id"]}
    assert "protocol 1 on stdin/stdout" in master.log()


def test_unsolicited_output_between_jobs_restarts_the_handler(master, r, tmp_path):
    # review #2: a line left after a response (here: a job's background
    # process writing a late response line) is never taken for the next job's
    # response: the handler is restarted before the next request
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log, extra="tries = 1;"))
    push(r, "default", make_payload("late"))
    master.start()
    wait_for(lambda: empty(r, "default") and len(jobs_in_log(log)) == 1, 20, what="the first job")
    # the late line is written 0.3 s after the response: B goes after it
    wait_for(lambda: any(l[0] == "late" for l in read_fixture_log(log)), 10, what="the late line")
    b = make_payload("fail")
    push(r, "default", b)
    wait_for(lambda: empty(r, "default") and len(hook_lines(log)) == 1, 20, what="the second job's failure")
    assert "fixture job failed (fail)" in failed_by_id(r)[b["id"]], "B was acked by the late line"
    assert "no request was outstanding" in master.log()


# ---------------------------------------------------------------- the Laravel adapter

PRELUDE = r'''<?php
class QpoolProtoNoisy
{
    public function handle($job, $data)
    {
        echo "{\"status\":\"done\"}\n";
        fwrite(STDOUT, "{\"seq\":1,\"status\":\"done\"}\n");
        passthru('echo \'{"seq":1,"status":"done"}\'');
        throw new RuntimeException("noisy job threw");
    }

    public function failed($data, $e, $uuid)
    {
        App\Support\Marker::write(["event" => "failed_hook", "uuid" => $uuid, "message" => $e ? $e->getMessage() : null]);
    }
}

class QpoolProtoExit
{
    public function handle($job, $data)
    {
        exit(0);
    }

    public function failed($data, $e, $uuid)
    {
        App\Support\Marker::write(["event" => "failed_hook", "uuid" => $uuid, "message" => $e ? $e->getMessage() : null]);
    }
}

class QpoolProtoStdin
{
    public function handle($job, $data)
    {
        // review #12: with the request channel on stdin, cat blocked until timeout killed it (124)
        $out = shell_exec('timeout 5 cat >/dev/null; echo "rc=$?"');
        App\Support\Marker::write(["event" => "stdin", "out" => trim((string) $out)]);
    }
}

class QpoolProtoThrow
{
    public function handle($job, $data)
    {
        throw new RuntimeException("B threw");
    }

    public function failed($data, $e, $uuid)
    {
        App\Support\Marker::write(["event" => "failed_hook", "uuid" => $uuid, "message" => $e ? $e->getMessage() : null]);
    }
}
'''


def string_job(cls):
    return {"uuid": str(uuidlib.uuid4()), "displayName": cls, "job": cls + "@handle", "maxTries": None,
            "maxExceptions": None, "failOnTimeout": False, "backoff": None, "timeout": None,
            "data": {}, "id": uuidlib.uuid4().hex, "attempts": 0}


def adapter_pool(app, prelude, protocol, ffi):
    php = ["php", "-d", "auto_prepend_file=%s" % prelude]
    if not ffi:
        php += ["-d", "ffi.enable=0"]
    cmd = ", ".join('"%s"' % x for x in php + [str(ADAPTER), str(LARAVEL_APP)])
    return ('{ name = "w"; queues = ["default"]; processes = 1; tries = 1; '
            'handler = { type = "pipe"; protocol = %s; command = [%s]; }; %s }' % (protocol, cmd, app.env_conf()))


def hooks(app):
    return {m["uuid"]: m["message"] for m in app.read_markers() if m.get("event") == "failed_hook"}


# the adapter on its protocol-2 descriptors or on stdin/stdout, with and without ext-ffi
ADAPTER_WAYS = pytest.mark.parametrize("protocol,ffi", [('"auto"', True), ('"auto"', False), ("1", True), ("1", False)],
                                       ids=["fds-ffi", "fds-no-ffi", "stdio-ffi", "stdio-no-ffi"])


def configure_adapter(master, app, tmp_path, protocol, ffi):
    prelude = tmp_path / "prelude.php"
    prelude.write_text(PRELUDE)
    master.write_config(adapter_pool(app, prelude, protocol, ffi))


def failed_rows(app):
    with sqlite3.connect(str(app.db)) as c:
        return {json.loads(p)["uuid"]: e for p, e in c.execute("SELECT payload, exception FROM failed_jobs")}


@ADAPTER_WAYS
def test_laravel_adapter_stray_lines_and_exits_never_misattribute(master, r, laravel_app, tmp_path, protocol, ffi):
    configure_adapter(master, laravel_app, tmp_path, protocol, ffi)
    noisy, exiting, thrower = string_job("QpoolProtoNoisy"), string_job("QpoolProtoExit"), string_job("QpoolProtoThrow")
    push_many(r, "default", [noisy, exiting, thrower])
    master.start()
    # the failed() hook runs first, then JobFailed, whose listener writes the failed_jobs row
    # (Laravel's order): wait for both (CI failure: the third row was not written yet)
    wait_for(lambda: empty(r, "default") and len(hooks(laravel_app)) == 3 and len(failed_rows(laravel_app)) == 3,
             60, what="three failures with hooks and failed_jobs rows")
    h = hooks(laravel_app)
    # each job is charged with what it did, and its failed() hook and
    # failed_jobs row exist (tries = 1). On stdin/stdout without ext-ffi the
    # adapter closed STDOUT to move descriptor 1 off the protocol: the job's
    # fwrite(STDOUT) throws there instead of reaching it.
    noisy_msg = "noisy job threw" if (protocol, ffi) != ("1", False) else "fwrite(): supplied resource is not a valid stream resource"
    assert h[noisy["uuid"]] == noisy_msg
    assert "exit" in h[exiting["uuid"]].lower() or "HandlerExited" in h[exiting["uuid"]], h
    assert h[thrower["uuid"]] == "B threw", "the job after an exit was charged for it"
    rows = failed_rows(laravel_app)
    assert set(rows) == {noisy["uuid"], exiting["uuid"], thrower["uuid"]}
    assert rows[thrower["uuid"]].startswith("RuntimeException: B threw")
    assert noisy_msg in failed_by_id(r)[noisy["id"]]


@ADAPTER_WAYS
def test_a_laravel_job_reading_stdin_gets_eof_at_once(master, r, laravel_app, tmp_path, protocol, ffi):
    configure_adapter(master, laravel_app, tmp_path, protocol, ffi)
    job = string_job("QpoolProtoStdin")
    push(r, "default", job)
    master.start()
    wait_for(lambda: empty(r, "default") and [m for m in laravel_app.read_markers() if m.get("event") == "stdin"],
             30, what="the job to finish")
    (m,) = [m for m in laravel_app.read_markers() if m.get("event") == "stdin"]
    assert m["out"] == "rc=0", m  # EOF: cat exits 0; on the request channel it was killed by timeout (124)
    assert failed_by_id(r) == {}


def test_the_docs_minimal_python_handler_works(master, r, tmp_path):
    # docs/handler-protocol.md's example, run as written
    doc = (ROOT / "docs" / "handler-protocol.md").read_text()
    code = doc.split("## A minimal handler (Python)")[1].split("```python")[1].split("```")[0]
    script = tmp_path / "handler.py"
    script.write_text(code)
    master.write_config('{ name = "w"; queues = ["default"]; processes = 1; '
                        'handler = { type = "pipe"; command = ["/usr/bin/python3", "%s"]; }; }' % script)
    push_many(r, "default", [make_payload("ok") for _ in range(3)])
    master.start()
    wait_for(lambda: empty(r, "default"), 20, what="the jobs")
    assert master.log().count("stdout: working on") == 3
    assert "broke the protocol" not in master.log()
