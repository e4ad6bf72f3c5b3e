"""Drives php/qpool-handler.php (the Laravel pipe handler) over the protocol
of docs/handler-protocol.md, playing qpool's part: jobs are dispatched with
the fixture app's `php artisan fixture:dispatch`, their raw payloads popped
from Redis with LPOP, and handed to the adapter as `job` / `failed` requests.

Self-contained: its own redis-server on a free loopback port, the fixture app
(tests/laravel-app) run in place with APP_STORAGE in a temp dir.

    /usr/bin/python3 -m pytest tests/integration/test_php_adapter.py
"""

import json
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
import uuid as uuidlib
from pathlib import Path

import pytest

import redis

from conftest import LARAVEL_APP, MAX_ATTEMPTS_EXCEPTION, TIMEOUT_EXCEPTION, clean_env, migrated_app_env

ROOT = Path(__file__).resolve().parent.parent.parent
APP_DIR = LARAVEL_APP
ADAPTER = ROOT / "php" / "qpool-handler.php"
PHP = shutil.which("php") or "/usr/bin/php"
REDIS_SERVER = "/usr/bin/redis-server"
PREFIX = "laravel_database_"
WAIT = 30  # seconds; generous, never a speed assertion

MAX_ATTEMPTS_8X = MAX_ATTEMPTS_EXCEPTION  # the host's Laravel's (conftest)


# Defines a string-job target that prints in every way PHP can, for the
# stdout-isolation tests (loaded with -d auto_prepend_file; no app change).
PRELUDE = r'''<?php
class QpoolTestNoisyHandler
{
    public function handle($job, $data)
    {
        echo "{\"status\":\"done\",\"from\":\"echo\"}\n";
        print "{\"status\":\"failed\",\"from\":\"print\"}\n";
        printf("{\"status\":\"released\",\"delay\":9,\"from\":\"printf\"}\n");
        var_dump(["status" => "var_dump"]);
        echo "no newline at the end";
        if (! empty($data["raw"])) {
            fwrite(STDOUT, "{\"status\":\"done\",\"from\":\"fwrite-STDOUT\"}\n");
            file_put_contents("php://stdout", "{\"status\":\"done\",\"from\":\"php-stdout\"}\n");
            while (ob_get_level() > 0) {
                ob_end_clean();
            }
            echo "{\"status\":\"done\",\"from\":\"after-ob-removed\"}\n";
        }
        if (! empty($data["leave_buffer"])) {
            ob_start();
            echo "{\"status\":\"done\",\"from\":\"unclosed-buffer\"}\n";
        }
        if (! empty($data["exit"])) {
            exit(3);
        }
        $job->delete();
    }
}

class QpoolTestStdinHandler
{
    public function handle($job, $data)
    {
        $out = shell_exec('timeout 5 cat; echo "rc=$?"');
        [$got, $rc] = array_pad(explode("rc=", (string) $out, 2), 2, "");
        App\Support\Marker::write(["event" => "stdin", "got" => $got, "rc" => trim($rc)]);
        $job->delete();
    }
}

class QpoolTestFdsHandler
{
    public function handle($job, $data)
    {
        // what a process the job starts holds open: the shell's descriptors
        $out = shell_exec('for f in /proc/$$/fd/*; do echo "${f##*/} $(readlink $f)"; done');
        App\Support\Marker::write(["event" => "fds", "fds" => (string) $out]);
        $job->delete();
    }
}

class QpoolTestEdgeHandler
{
    public function handle($job, $data)
    {
        switch ($data["mode"]) {
            case "delete_then_throw":
                $job->delete();
                throw new LogicException("after delete");
            case "release_then_throw":
                $job->release(3);
                throw new LogicException("after release");
            case "fail_then_throw":
                $job->fail(new LogicException("failed first"));
                throw new RuntimeException("then threw");
            case "release_interval":
                $job->release(new DateInterval("PT7S"));
                return;
        }
    }

    public function failed($data, $e, $uuid)
    {
        App\Support\Marker::write(["event" => "failed_hook", "job" => "edge", "uuid" => $uuid,
            "class" => $e ? get_class($e) : null, "message" => $e ? $e->getMessage() : null]);
    }
}
'''



@pytest.fixture(scope="module")
def redis_server(module_redis_port):
    """This module shares one redis-server; its tests get the port."""
    return module_redis_port


@pytest.fixture(scope="module")
def app_env(redis_server, tmp_path_factory):
    d = tmp_path_factory.mktemp("laravel")
    env = migrated_app_env(redis_server, d)
    env["_dir"] = str(d)
    (d / "prelude.php").write_text(PRELUDE)
    return env


class App:
    def __init__(self, env):
        self.env = env
        self.r0 = redis.Redis(port=int(env["REDIS_PORT"]), db=0, decode_responses=True)

    def dispatch(self, job, *args):
        res = subprocess.run([PHP, "artisan", "fixture:dispatch", job, *args],
                             cwd=self.env["_cwd"], env=clean_env(self.env),
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, (job, args, res.stdout, res.stderr)
        return res

    def pop(self, queue_name="default"):
        """LPOP the raw payload, as qpool's pop hands it to the handler."""
        raw = self.r0.lpop(PREFIX + "queues:" + queue_name)
        assert raw is not None, "nothing on queue " + queue_name
        return raw

    def dispatch_and_pop(self, job, *args, queue_name="default"):
        self.dispatch(job, "--queue=" + queue_name, *args)
        return self.pop(queue_name)

    def markers(self):
        path = Path(self.env["MARKER_FILE"])
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def failed_rows(self):
        with sqlite3.connect(self.env["DB_DATABASE"]) as c:
            c.row_factory = sqlite3.Row
            return [dict(r) for r in c.execute("SELECT * FROM failed_jobs ORDER BY id")]


@pytest.fixture
def app(app_env):
    redis.Redis(port=int(app_env["REDIS_PORT"]), db=0).flushall()
    Path(app_env["MARKER_FILE"]).write_text("")
    with sqlite3.connect(app_env["DB_DATABASE"]) as c:
        c.execute("DELETE FROM failed_jobs")
    return App(app_env)


def request(kind, raw, attempts=1, queue_name="default", **extra):
    """A `job` / `failed` request built the way qpool's handler.c builds one."""
    p = json.loads(raw)
    req = {
        "type": kind,
        "id": p.get("id", ""),
        "uuid": p.get("uuid"),
        "name": p.get("displayName") or p.get("job") or "?",
        "queue": queue_name,
        "connection": "redis",
        "attempts": attempts,
        "max_tries": p.get("maxTries") or 0,
        "timeout": p.get("timeout") or 60,
        "payload": raw,
    }
    req.update(extra)
    return req


def failed_request(raw, reason, cls, message, attempts=1, text=None):
    return request("failed", raw, attempts, reason=reason, exception={
        "class": cls, "message": message, "text": text or "%s: %s" % (cls, message)})


class Adapter:
    """php qpool-handler.php <app> as a subprocess, driven line by line.

    channel "fds": protocol 2 as qpool speaks it, requests on one descriptor
    and responses on another (QPOOL_REQUEST_FD / QPOOL_RESPONSE_FD), stdin
    /dev/null; "stdio": requests on stdin, responses on stdout (an older
    qpool, or handler.protocol = 1). Every request gets a "seq"; read()
    checks the response echoes it and strips it."""

    def __init__(self, app, env_extra=None, php_args=(), channel="fds"):
        self.app = app
        self.channel = channel
        self.seq = 0
        self.stderr_path = Path(app.env["_dir"]) / ("adapter-%s.stderr" % uuidlib.uuid4().hex[:8])
        self._stderr = open(self.stderr_path, "wb")
        env = clean_env(app.env)
        env.update(env_extra or {})
        if channel == "fds":
            req_r, req_w = os.pipe()
            resp_r, resp_w = os.pipe()
            env.update({"QPOOL_PROTOCOL": "2", "QPOOL_REQUEST_FD": str(req_r), "QPOOL_RESPONSE_FD": str(resp_w)})
            self.proc = subprocess.Popen(
                [PHP, *php_args, str(ADAPTER), str(APP_DIR)],
                cwd=str(Path(app.env["_dir"])), env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=self._stderr, pass_fds=(req_r, resp_w))
            os.close(req_r)
            os.close(resp_w)
            self.req = os.fdopen(req_w, "wb")
            self.resp = os.fdopen(resp_r, "rb")
            self.stdout_lines = []
            threading.Thread(target=self._pump_stdout, daemon=True).start()
        else:
            self.proc = subprocess.Popen(
                [PHP, *php_args, str(ADAPTER), str(APP_DIR)],
                cwd=str(Path(app.env["_dir"])), env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._stderr)
            self.req = self.proc.stdin
            self.resp = self.proc.stdout
        # what the protocol's pipes are, as readlink(/proc/<pid>/fd/N) shows them
        self.pipes = {"pipe:[%d]" % os.fstat(f.fileno()).st_ino for f in (self.req, self.resp)}
        self.lines = queue.Queue()
        self.raw_stdout = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.resp:
            self.raw_stdout.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stdout(self):
        for line in self.proc.stdout:
            self.stdout_lines.append(line)

    def read_raw(self, timeout=WAIT):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no line from the adapter within %s s; stderr:\n%s"
                                 % (timeout, self.stderr()))
        assert line is not None, "adapter closed its response channel; stderr:\n" + self.stderr()
        assert line.endswith(b"\n"), line
        return json.loads(line)

    def read(self, timeout=WAIT):
        msg = self.read_raw(timeout)
        if "type" not in msg:
            assert msg.pop("seq", None) == self.seq, ("the response must echo the request's seq", msg, self.seq)
        return msg

    def send_line(self, text):
        self.req.write(text.encode() + b"\n")
        self.req.flush()

    def send_request(self, req):
        self.seq += 1
        self.send_line(json.dumps(dict(req, seq=self.seq)))

    def send(self, req):
        self.send_request(req)
        return self.read()

    def ready(self):
        msg = self.read()
        assert msg == {"type": "ready", "protocol": 2, "pop_run": True}
        return msg

    def close(self, timeout=WAIT):
        """Close the request channel (what qpool does when the worker stops); return the exit code."""
        if not self.req.closed:
            self.req.close()
        return self.proc.wait(timeout)

    def stderr(self):
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture
def adapter(app):
    started = []

    def start(env_extra=None, php_args=(), ready=True, channel="fds"):
        a = Adapter(app, env_extra, php_args, channel)
        started.append(a)
        if ready:
            a.ready()
        return a

    yield start
    for a in started:
        a.kill()


def events_for(markers, uuid):
    return [m["event"] for m in markers if m.get("uuid") == uuid and "event" in m]


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("channel", ["fds", "stdio"])
def test_ready_then_exit_0_on_request_channel_eof(app, adapter, channel):
    a = adapter(channel=channel)
    assert a.close() == 0
    assert "booted" in a.stderr()
    # Nothing but the ready line ever reached the response channel.
    assert [json.loads(x) for x in a.raw_stdout] == [{"type": "ready", "protocol": 2, "pop_run": True}]


def test_marker_job_done_with_events(app, adapter):
    raw = app.dispatch_and_pop("MarkerJob", "--tag=m1")
    uuid = json.loads(raw)["uuid"]
    a = adapter()
    assert a.send(request("job", raw)) == {"status": "done"}

    m = app.markers()
    runs = [x for x in m if x.get("job") == "MarkerJob" and "event" not in x]
    assert [(x["tag"], x["attempt"]) for x in runs] == [("m1", 1)]
    assert runs[0]["pid"] == a.proc.pid
    assert events_for(m, uuid) == ["JobProcessing", "JobProcessed"]
    for ev in (x for x in m if x.get("uuid") == uuid):
        assert ev["job"] == "App\\Jobs\\MarkerJob"
        assert (ev["attempts"], ev["queue"], ev["connection"]) == (1, "default", "redis")
    assert app.failed_rows() == []
    assert a.close() == 0


def test_always_fails_exception_then_failed_max_tries(app, adapter):
    raw = app.dispatch_and_pop("AlwaysFailsJob", "--tag=af")
    uuid = json.loads(raw)["uuid"]
    a = adapter()

    res = a.send(request("job", raw, attempts=3))
    assert res["status"] == "exception"
    assert res["class"] == "RuntimeException"
    assert res["message"] == "always fails"
    assert res["exception"].startswith("RuntimeException: always fails in ")
    assert "Stack trace:" in res["exception"]
    # No hook yet: qpool decides whether the job fails.
    assert not [x for x in app.markers() if x.get("event") == "failed_hook"]
    assert app.failed_rows() == []

    res = a.send(failed_request(raw, "max_tries", "RuntimeException", "always fails",
                                attempts=3, text=res["exception"]))
    assert res == {"status": "ok"}

    m = app.markers()
    hooks = [x for x in m if x.get("event") == "failed_hook"]
    assert len(hooks) == 1
    assert (hooks[0]["class"], hooks[0]["message"], hooks[0]["tag"]) == \
        ("RuntimeException", "always fails", "af")
    assert events_for(m, uuid) == ["JobProcessing", "JobExceptionOccurred", "JobFailed"]

    (row,) = app.failed_rows()
    assert row["uuid"] == uuid
    assert (row["connection"], row["queue"]) == ("redis", "default")
    assert row["payload"] == raw  # byte for byte, as popped
    # The original Throwable was reused: the handle() frame is in the text.
    assert row["exception"].startswith("RuntimeException: always fails in ")
    assert "AlwaysFailsJob.php" in row["exception"].splitlines()[0]
    assert row["failed_at"]
    assert a.close() == 0


def test_failed_without_preceding_job_rebuilds_the_exception(app, adapter):
    raw = app.dispatch_and_pop("AlwaysFailsJob", "--tag=rebuilt")
    a = adapter()
    res = a.send(failed_request(raw, "max_tries", "RuntimeException", "always fails", attempts=3))
    assert res == {"status": "ok"}
    (hook,) = [x for x in app.markers() if x.get("event") == "failed_hook"]
    assert (hook["class"], hook["message"]) == ("RuntimeException", "always fails")
    (row,) = app.failed_rows()
    assert row["exception"].startswith("RuntimeException: always fails")

    # A class this PHP process does not know (e.g. qpool's own) becomes a RuntimeException.
    raw2 = app.dispatch_and_pop("AlwaysFailsJob", "--tag=crashed")
    res = a.send(failed_request(raw2, "max_tries", "qpool\\HandlerCrashed",
                                "the pipe handler was killed", attempts=3))
    assert res == {"status": "ok"}
    hook = [x for x in app.markers() if x.get("event") == "failed_hook"][-1]
    assert (hook["tag"], hook["class"], hook["message"]) == \
        ("crashed", "RuntimeException", "the pipe handler was killed")
    assert len(app.failed_rows()) == 2
    assert a.close() == 0


def test_release_job_released_with_delay_then_done(app, adapter):
    raw = app.dispatch_and_pop("ReleaseJob", "--tag=rel")
    uuid = json.loads(raw)["uuid"]
    a = adapter()
    assert a.send(request("job", raw, attempts=1)) == {"status": "released", "delay": 5}
    assert a.send(request("job", raw, attempts=2)) == {"status": "done"}
    runs = [x["attempt"] for x in app.markers() if x.get("job") == "ReleaseJob" and "event" not in x]
    assert runs == [1, 2]
    assert events_for(app.markers(), uuid) == ["JobProcessing", "JobProcessed"] * 2
    assert app.failed_rows() == []


def test_manual_fail_runs_hooks_itself(app, adapter):
    raw = app.dispatch_and_pop("ManualFailJob", "--tag=mf")
    uuid = json.loads(raw)["uuid"]
    a = adapter()
    res = a.send(request("job", raw))
    assert res["status"] == "failed"
    assert res["hooks_done"] is True
    assert (res["class"], res["message"]) == ("RuntimeException", "manual failure")
    assert res["exception"].startswith("RuntimeException: manual failure in ")

    m = app.markers()
    (hook,) = [x for x in m if x.get("event") == "failed_hook"]
    assert (hook["class"], hook["message"]) == ("RuntimeException", "manual failure")
    assert "JobFailed" in events_for(m, uuid)
    (row,) = app.failed_rows()
    assert row["uuid"] == uuid and row["payload"] == raw
    assert row["exception"].startswith("RuntimeException: manual failure")

    # Should qpool still send `failed` (job_failed) for it, the hooks do not run twice.
    res = a.send(failed_request(raw, "job_failed", "RuntimeException", "manual failure"))
    assert res["status"] == "ok"
    assert len([x for x in app.markers() if x.get("event") == "failed_hook"]) == 1
    assert len(app.failed_rows()) == 1
    assert a.close() == 0


def test_timeout_failed_gets_the_timeout_exception_of_the_apps_laravel(app, adapter):
    raw = app.dispatch_and_pop("TimeoutJob", "--tag=to")
    uuid = json.loads(raw)["uuid"]
    a = adapter()
    # qpool killed the attempt (SIGKILL) and restarted the handler; then this:
    res = a.send(failed_request(raw, "timeout", "Illuminate\\Queue\\TimeoutExceededException",
                                "App\\Jobs\\TimeoutJob has timed out.", attempts=2))
    assert res == {"status": "ok"}
    (hook,) = [x for x in app.markers() if x.get("event") == "failed_hook"]
    cls, tail = TIMEOUT_EXCEPTION  # 8.x: MaxAttemptsExceededException; 9+: TimeoutExceededException
    assert hook["class"] == cls
    assert hook["message"] == "App\\Jobs\\TimeoutJob" + tail
    assert events_for(app.markers(), uuid) == ["JobFailed"]
    (row,) = app.failed_rows()
    assert row["exception"].startswith(cls + ": App\\Jobs\\TimeoutJob" + tail)
    assert row["payload"] == raw


def test_already_exceeded_is_failed_like_queue_work(app, adapter):
    raw = app.dispatch_and_pop("AlwaysFailsJob", "--tag=ae")
    uuid = json.loads(raw)["uuid"]
    a = adapter()
    res = a.send(failed_request(raw, "already_exceeded", MAX_ATTEMPTS_8X[0],
                                "App\\Jobs\\AlwaysFailsJob has been attempted too many times.",
                                attempts=4))
    assert res == {"status": "ok"}
    m = app.markers()
    assert not [x for x in m if x.get("job") == "AlwaysFailsJob" and "event" not in x]  # not run
    (hook,) = [x for x in m if x.get("event") == "failed_hook"]
    assert (hook["class"], hook["message"]) == (MAX_ATTEMPTS_8X[0], "App\\Jobs\\AlwaysFailsJob" + MAX_ATTEMPTS_8X[1])
    assert events_for(m, uuid) == ["JobProcessing", "JobFailed", "JobExceptionOccurred"]
    assert len(app.failed_rows()) == 1


def test_max_exceptions_reuses_the_thrown_exception(app, adapter):
    raw = app.dispatch_and_pop("MaxExceptionsJob", "--tag=mx")
    a = adapter()
    res = a.send(request("job", raw, attempts=2))
    assert (res["status"], res["message"]) == ("exception", "max exceptions fails")
    assert a.send(failed_request(raw, "max_exceptions", "RuntimeException", "max exceptions fails",
                                 attempts=2)) == {"status": "ok"}
    (row,) = app.failed_rows()
    assert "MaxExceptionsJob.php" in row["exception"].splitlines()[0]


def test_string_job_done(app, adapter):
    raw = app.dispatch_and_pop("string", "--tag=str", "--arg=a", "--arg=b")
    assert json.loads(raw)["job"] == "App\\Handlers\\StringHandler@handle"
    a = adapter()
    assert a.send(request("job", raw)) == {"status": "done"}
    (s,) = [x for x in app.markers() if x.get("job") == "string"]
    assert s["data"] == {"tag": "str", "args": ["a", "b"]} and s["attempt"] == 1


def test_other_queue_name_is_passed_through(app, adapter):
    raw = app.dispatch_and_pop("ManualFailJob", "--tag=q", queue_name="emails")
    a = adapter()
    res = a.send(request("job", raw, queue_name="emails"))
    assert res["status"] == "failed"
    (row,) = app.failed_rows()
    assert row["queue"] == "emails"


def string_payload(handler, **data):
    """A string-job payload (Queue::push('Class@handle', $data)) for a prelude class."""
    return json.dumps({
        "uuid": str(uuidlib.uuid4()), "displayName": handler,
        "job": handler + "@handle", "maxTries": None, "maxExceptions": None,
        "failOnTimeout": False, "backoff": None, "timeout": None, "data": data,
        "id": uuidlib.uuid4().hex, "attempts": 0}, separators=(",", ":"))


def noisy_payload(**data):
    return string_payload("QpoolTestNoisyHandler", **data)


@pytest.mark.parametrize("channel,ffi", [("fds", "1"), ("stdio", "1"), ("stdio", "0")],
                         ids=["protocol-2-fds", "stdio-ffi", "stdio-no-ffi"])
def test_job_output_never_reaches_the_protocol(app, adapter, channel, ffi):
    # review #2: whatever a job prints, however it prints it, and with or
    # without ext-ffi, never reaches the response channel
    prelude = str(Path(app.env["_dir"]) / "prelude.php")
    a = adapter({"QPOOL_PHP_FFI": ffi}, ("-d", "auto_prepend_file=" + prelude), channel=channel)
    assert "protocol channel: " + ("fds" if channel == "fds" else "moved") in a.stderr()

    assert a.send(request("job", noisy_payload())) == {"status": "done"}
    assert a.send(request("job", noisy_payload(leave_buffer=True))) == {"status": "done"}
    raw_res = a.send(request("job", noisy_payload(raw=True)))
    if channel == "stdio" and ffi == "0":
        # STDOUT was closed to move descriptor 1: writing to it throws
        # instead of reaching the protocol
        assert raw_res["status"] == "exception"
    else:
        assert raw_res == {"status": "done"}
    raw = app.dispatch_and_pop("MarkerJob", "--tag=after-noise")
    assert a.send(request("job", raw)) == {"status": "done"}
    assert a.close() == 0

    # the response channel carried protocol lines only
    out = [json.loads(x) for x in a.raw_stdout]
    assert out[0] == {"type": "ready", "protocol": 2, "pop_run": True}
    assert all(x.get("status") in ("done", "exception") and "seq" in x for x in out[1:]), out
    assert not any(x.get("from") for x in out), out
    printed = a.stderr() + b"".join(getattr(a, "stdout_lines", [])).decode(errors="replace")
    assert '{"status":"done","from":"echo"}' in printed
    assert '"from":"print"' in printed and '"from":"printf"' in printed
    assert 'string(8) "var_dump"' in printed
    assert '"from":"unclosed-buffer"' in printed
    if not (channel == "stdio" and ffi == "0"):
        for src in ("fwrite-STDOUT", "php-stdout", "after-ob-removed"):
            assert '"from":"%s"' % src in printed


@pytest.mark.parametrize("channel,ffi", [("fds", "1"), ("stdio", "1"), ("stdio", "0")],
                         ids=["protocol-2-fds", "stdio-ffi", "stdio-no-ffi"])
def test_a_job_reading_stdin_gets_eof_at_once(app, adapter, channel, ffi):
    # review #12: a job's shell_exec('cat') must not read (or block on) the
    # request channel
    prelude = str(Path(app.env["_dir"]) / "prelude.php")
    a = adapter({"QPOOL_PHP_FFI": ffi}, ("-d", "auto_prepend_file=" + prelude), channel=channel)
    res = a.send(request("job", string_payload("QpoolTestStdinHandler")))
    assert res == {"status": "done"}, (res, a.stderr())
    (m,) = [x for x in app.markers() if x.get("event") == "stdin"]
    assert m["rc"] == "0" and m["got"] == "", m
    # the next request still arrives intact
    raw = app.dispatch_and_pop("MarkerJob", "--tag=after-cat")
    assert a.send(request("job", raw)) == {"status": "done"}
    assert a.close() == 0


@pytest.mark.parametrize("channel", ["fds", "stdio"])
def test_processes_a_job_starts_do_not_hold_the_protocol_pipes(app, adapter, channel):
    # review follow-up: the request and response pipes (and PHP's copies of
    # them) are close-on-exec, so a job's shell_exec() child cannot read a
    # request or keep the channel open
    prelude = str(Path(app.env["_dir"]) / "prelude.php")
    a = adapter({"QPOOL_PHP_FFI": "1"}, ("-d", "auto_prepend_file=" + prelude), channel=channel)
    assert a.send(request("job", string_payload("QpoolTestFdsHandler"))) == {"status": "done"}, a.stderr()
    (m,) = [x for x in app.markers() if x.get("event") == "fds"]
    held = dict(line.split(" ", 1) for line in m["fds"].splitlines() if " " in line)
    assert held, m
    assert not set(held.values()) & a.pipes, (held, a.pipes)
    raw = app.dispatch_and_pop("MarkerJob", "--tag=after-fds")
    assert a.send(request("job", raw)) == {"status": "done"}
    assert a.close() == 0


def test_without_ffi_the_adapter_says_the_pipes_stay_inheritable(app, adapter):
    a = adapter({"QPOOL_PHP_FFI": "0"})
    raw = app.dispatch_and_pop("MarkerJob", "--tag=no-ffi")
    assert a.send(request("job", raw)) == {"status": "done"}
    assert a.close() == 0
    assert "without FFI the protocol descriptors stay open" in a.stderr()


def test_job_calling_exit_still_gets_a_response(app, adapter):
    prelude = str(Path(app.env["_dir"]) / "prelude.php")
    a = adapter(php_args=("-d", "auto_prepend_file=" + prelude))
    res = a.send(request("job", noisy_payload(exit=True)))
    assert res["status"] == "exception"
    assert res["class"] == "qpool\\HandlerExited"
    assert res["exiting"] is True, "review #1: the last response must say it is the last"
    assert a.proc.wait(WAIT) == 3


def test_malformed_and_unknown_requests_keep_it_running(app, adapter):
    a = adapter()
    a.send_line("this is not json")
    res = a.read_raw()
    assert res["status"] == "exception"
    assert "malformed" in res["message"]
    assert a.send({"type": "ping"})["status"] == "exception"
    res = a.send({"type": "job", "id": "x", "uuid": None, "payload": "{not json"})
    assert res["status"] == "exception"
    res = a.send({"type": "job", "id": "x", "uuid": None,
                  "payload": json.dumps({"job": "App\\Missing\\Nope@handle", "data": {},
                                         "id": "x", "attempts": 0})})
    assert res["status"] == "exception"

    raw = app.dispatch_and_pop("MarkerJob", "--tag=still-alive")
    assert a.send(request("job", raw)) == {"status": "done"}
    assert "malformed request line" in a.stderr()
    assert a.close() == 0


def test_sigterm_while_idle_exits_0(app, adapter):
    a = adapter()
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(WAIT) == 0


def test_sigterm_during_a_job_finishes_it_then_exits_0(app, adapter):
    raw = app.dispatch_and_pop("SleepJob", "--arg=3000", "--tag=slow")
    a = adapter()
    a.send_request(request("job", raw))
    # Wait until the job runs (its marker is written before it sleeps).
    deadline = time.time() + WAIT
    while not [x for x in app.markers() if x.get("tag") == "slow" and "event" not in x]:
        assert time.time() < deadline, a.stderr()
        time.sleep(0.05)
    a.proc.send_signal(signal.SIGTERM)
    # its last response says so: qpool starts a fresh handler for the next job
    assert a.read() == {"status": "done", "exiting": True}
    assert a.proc.wait(WAIT) == 0


def test_delete_release_fail_combined_with_a_throw(app, adapter):
    prelude = str(Path(app.env["_dir"]) / "prelude.php")
    a = adapter(php_args=("-d", "auto_prepend_file=" + prelude))

    def edge(mode):
        return a.send(request("job", string_payload("QpoolTestEdgeHandler", mode=mode)))

    # Laravel neither releases nor fails a job that deleted itself.
    assert edge("delete_then_throw") == {"status": "done"}

    # qpool applies its rules (tries, maxExceptions, backoff) to what was thrown.
    res = edge("release_then_throw")
    assert (res["status"], res["class"], res["message"]) == ("exception", "LogicException", "after release")

    # fail() ran the failure path; the later throw does not undo that.
    res = edge("fail_then_throw")
    assert res["status"] == "failed" and res["hooks_done"] is True
    assert (res["class"], res["message"]) == ("LogicException", "failed first")
    hooks = [x for x in app.markers() if x.get("event") == "failed_hook"]
    assert [(h["job"], h["class"], h["message"]) for h in hooks] == [("edge", "LogicException", "failed first")]
    (row,) = app.failed_rows()
    assert row["exception"].startswith("LogicException: failed first")

    res = edge("release_interval")
    assert res["status"] == "released" and res["delay"] in (6, 7)
    assert a.close() == 0


def pop_run_request(**extra):
    """A `pop` with "run": true as qpool's appdriver_request builds it (one round trip per job)."""
    return dict({"type": "pop", "connection": "redis", "queues": ["default"], "tries": 1, "timeout": 60,
                 "backoff": [], "run": True}, **extra)


def test_pop_with_run_answers_popped_then_the_outcome_on_the_pops_seq(app, adapter):
    """Review of 5eba553c, SHOULD 3: the real adapter, one request per job:
    exactly two answers to the pop, both on its seq (read() checks it),
    "popped" then the outcome, and nothing after them."""
    app.dispatch("MarkerJob", "--queue=default", "--tag=p1")
    a = adapter()
    a.send_request(pop_run_request())
    popped = a.read()
    assert popped["status"] == "popped", popped
    assert "MarkerJob" in popped["job"]["name"], popped
    outcome = a.read()
    assert outcome["status"] == "done", outcome
    assert outcome["job"]["id"] == popped["job"]["id"], (popped, outcome)
    runs = [x for x in app.markers() if x.get("job") == "MarkerJob" and "event" not in x]
    assert [x["tag"] for x in runs] == ["p1"]
    assert a.close() == 0
    assert a.lines.get(timeout=WAIT) is None, a.raw_stdout  # the channel's end: no third answer
    assert app.r0.llen(PREFIX + "queues:default") == 0


def test_pop_with_run_of_a_job_calling_exit_answers_exception_and_exiting(app, adapter):
    prelude = str(Path(app.env["_dir"]) / "prelude.php")
    app.r0.rpush(PREFIX + "queues:default", noisy_payload(exit=True))
    a = adapter(php_args=("-d", "auto_prepend_file=" + prelude))
    a.send_request(pop_run_request())
    assert a.read()["status"] == "popped"
    res = a.read()
    assert res["status"] == "exception", res
    assert res["class"] == "qpool\\HandlerExited", res
    assert res["exiting"] is True, res
    assert a.proc.wait(WAIT) == 3
    assert a.lines.get(timeout=WAIT) is None, a.raw_stdout


def test_pop_with_run_then_sigalrm_ends_the_job_as_at_its_timeout(app, adapter):
    """qpool's "stop this job" right after "popped": the Worker's timeout
    handler takes it, as at the job's timeout: it kills the process (qpool
    records a handler dead after "stop this job" or at the job's timeout as
    TimedOut). Laravel 8's handler kills with no second answer; from Laravel
    9 it first fails a job that has no attempt left (JobFailed, the
    adapter's `failed` answer on the pop's seq), then kills."""
    app.dispatch("SleepJob", "--queue=default", "--arg=20000")
    a = adapter()
    a.send_request(pop_run_request())
    assert a.read()["status"] == "popped"
    a.proc.send_signal(signal.SIGALRM)
    line = a.lines.get(timeout=WAIT)
    if line is not None:  # Laravel 9+: the job failed at its timeout, on the pop's seq
        out = json.loads(line)
        assert out["seq"] == 1 and out["status"] == "failed" and "Timeout" in out["class"], line
        line = a.lines.get(timeout=WAIT)
    assert line is None, a.raw_stdout  # nothing more: killed in the job
    assert a.proc.wait(WAIT) in (-signal.SIGKILL, 1), a.stderr()  # the Worker's kill(EXIT_ERROR)
