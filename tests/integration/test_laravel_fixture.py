"""Checks that tests/laravel-app (a Laravel 8 app built from Debian's
php-laravel-framework) dispatches and works jobs as Laravel does.

Self-contained: starts its own redis-server on a free loopback port and runs
the app with APP_STORAGE pointing into a temp dir, so the app directory itself
stays untouched.  Run with Debian's interpreter:

    /usr/bin/python3 -m pytest tests/integration/test_laravel_fixture.py
"""

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

import redis

from conftest import LARAVEL_APP, clean_env, migrate_app, migrated_app_env

APP_DIR = LARAVEL_APP
PHP = shutil.which("php") or "/usr/bin/php"
REDIS_SERVER = "/usr/bin/redis-server"
PREFIX = "laravel_database_"
Q = PREFIX + "queues:default"
RESTART_KEY = PREFIX + "laravel_cache:illuminate:queue:restart"
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")




@pytest.fixture(scope="module")
def redis_server(module_redis_port):
    """This module shares one redis-server; its tests get the port."""
    return module_redis_port


@pytest.fixture(scope="module")
def app_env(redis_server, tmp_path_factory):
    """Environment for running tests/laravel-app in place (APP_STORAGE mode)."""
    return migrated_app_env(redis_server, tmp_path_factory.mktemp("laravel"))


@pytest.fixture
def app(app_env):
    """Per test: empty Redis, empty marker file, empty failed_jobs table."""
    r0 = redis.Redis(port=int(app_env["REDIS_PORT"]), db=0)
    r0.flushall()
    Path(app_env["MARKER_FILE"]).write_text("")
    with sqlite3.connect(app_env["DB_DATABASE"]) as c:
        c.execute("DELETE FROM failed_jobs")
    return App(app_env)


class App:
    def __init__(self, env):
        self.env = env
        self.r0 = redis.Redis(port=int(env["REDIS_PORT"]), db=0, decode_responses=True)
        self.r1 = redis.Redis(port=int(env["REDIS_PORT"]), db=1, decode_responses=True)

    def artisan(self, *args, timeout=60, check=True):
        res = subprocess.run([PHP, "artisan", *args], cwd=self.env["_cwd"],
                             env=clean_env(self.env), capture_output=True, text=True,
                             timeout=timeout)
        if check:
            assert res.returncode == 0, (args, res.returncode, res.stdout, res.stderr)
        return res

    def spawn(self, *args):
        return subprocess.Popen([PHP, "artisan", *args], cwd=self.env["_cwd"],
                                env=clean_env(self.env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def markers(self):
        text = Path(self.env["MARKER_FILE"]).read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_for(self, pred, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.markers()
            if pred(m):
                return m
            time.sleep(0.1)
        raise AssertionError("timed out; markers: %r" % self.markers())

    def failed_rows(self):
        with sqlite3.connect(self.env["DB_DATABASE"]) as c:
            c.row_factory = sqlite3.Row
            return [dict(r) for r in c.execute("SELECT * FROM failed_jobs ORDER BY id")]


def _stop(proc, timeout=15):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return proc.returncode, out


def test_migration_creates_failed_jobs(app):
    with sqlite3.connect(app.env["DB_DATABASE"]) as c:
        cols = {row[1]: row for row in c.execute("PRAGMA table_info(failed_jobs)")}
        idx = [row for row in c.execute("PRAGMA index_list(failed_jobs)")]
    assert list(cols) == ["id", "uuid", "connection", "queue", "payload", "exception", "failed_at"]
    assert cols["failed_at"][4] == "CURRENT_TIMESTAMP"
    assert any(row[2] == 1 for row in idx)  # unique index on uuid


def test_dispatch_puts_laravel_payloads_on_redis(app):
    res = app.artisan("fixture:dispatch", "MarkerJob", "--count=3", "--tag=m")
    assert res.stdout.strip() == "dispatched 3"

    raw = app.r0.lrange(Q, 0, -1)
    assert len(raw) == 3
    payloads = [json.loads(p) for p in raw]
    for i, p in enumerate(payloads, 1):
        assert p["attempts"] == 0
        assert UUID_RE.match(p["uuid"])
        assert re.match(r"^[A-Za-z0-9]{32}$", p["id"])
        assert p["displayName"] == "App\\Jobs\\MarkerJob"
        assert p["job"] == "Illuminate\\Queue\\CallQueuedHandler@call"
        assert p["data"]["commandName"] == "App\\Jobs\\MarkerJob"
        assert p["data"]["command"].startswith('O:18:"App\\Jobs\\MarkerJob"')
        assert ('s:3:"tag";s:3:"m-%d";' % i) in p["data"]["command"]
        assert p["maxTries"] is None and p["retryUntil"] is None
    assert list(payloads[0])[:3] == ["uuid", "displayName", "job"]
    assert list(payloads[0])[-2:] == ["id", "attempts"]
    assert app.r0.lrange(Q + ":notify", 0, -1) == ["1", "1", "1"]

    before = int(time.time())
    app.artisan("fixture:dispatch", "MarkerJob", "--delay=30", "--tag=later")
    after = int(time.time())
    delayed = app.r0.zrange(Q + ":delayed", 0, -1, withscores=True)
    assert len(delayed) == 1
    member, score = delayed[0]
    assert before + 30 <= score <= after + 30
    assert json.loads(member)["attempts"] == 0
    assert app.r0.llen(Q + ":notify") == 3  # no token for delayed jobs

    app.artisan("fixture:dispatch", "SleepJob", "--arg=50", "--tag=s", "--queue=other")
    (p,) = [json.loads(x) for x in app.r0.lrange(PREFIX + "queues:other", 0, -1)]
    assert 's:2:"ms";i:50;' in p["data"]["command"]


def test_queue_work_runs_jobs_and_empties_redis(app):
    app.artisan("fixture:dispatch", "MarkerJob", "--count=3", "--tag=w")
    uuids = [json.loads(p)["uuid"] for p in app.r0.lrange(Q, 0, -1)]
    app.artisan("fixture:dispatch", "string", "--tag=str", "--arg=a", "--arg=b")

    app.artisan("queue:work", "redis", "--once")
    assert app.r0.llen(Q) == 3
    app.artisan("queue:work", "redis", "--stop-when-empty", "--sleep=0")

    m = app.markers()
    jobs = [x for x in m if x.get("job") == "MarkerJob" and "event" not in x]
    assert sorted(x["tag"] for x in jobs) == ["w-1", "w-2", "w-3"]
    assert all(x["attempt"] == 1 for x in jobs)
    (s,) = [x for x in m if x.get("job") == "string"]
    assert s["data"] == {"tag": "str", "args": ["a", "b"]} and s["attempt"] == 1

    for u in uuids:
        ev = [x for x in m if x.get("uuid") == u]
        assert [x["event"] for x in ev] == ["JobProcessing", "JobProcessed"]
        for x in ev:
            assert x["job"] == "App\\Jobs\\MarkerJob"
            assert (x["attempts"], x["queue"], x["connection"]) == (1, "default", "redis")

    assert app.r0.keys(PREFIX + "queues:*") == []
    assert app.failed_rows() == []


def test_always_fails_job_is_retried_then_failed(app):
    app.artisan("fixture:dispatch", "AlwaysFailsJob", "--tag=af")
    (pushed,) = [json.loads(p) for p in app.r0.lrange(Q, 0, -1)]
    assert pushed["maxTries"] == 3 and pushed["backoff"] == "1,2"

    env = dict(app.env, LOG_CHANNEL="null")
    worker = subprocess.Popen([PHP, "artisan", "queue:work", "redis", "--sleep=0.2", "--max-time=30"],
                              cwd=env["_cwd"], env=clean_env(env), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        m = app.wait_for(lambda m: any(x.get("event") == "failed_hook" for x in m), timeout=25)
        time.sleep(0.3)  # let the worker write the failed_jobs row and events
    finally:
        code, out = _stop(worker)
    assert code == 0, out

    m = app.markers()
    runs = [x for x in m if x.get("job") == "AlwaysFailsJob" and "event" not in x]
    assert [x["attempt"] for x in runs] == [1, 2, 3]
    # backoff [1, 2]: released with score = whole second now + backoff
    assert int(runs[1]["time"]) >= int(runs[0]["time"]) + 1
    assert int(runs[2]["time"]) >= int(runs[1]["time"]) + 2
    hooks = [x for x in m if x.get("event") == "failed_hook"]
    assert len(hooks) == 1
    assert hooks[0]["class"] == "RuntimeException" and hooks[0]["message"] == "always fails"
    assert hooks[0]["tag"] == "af"
    ev = [x["event"] for x in m if x.get("uuid") == pushed["uuid"]]
    assert ev.count("JobExceptionOccurred") == 3 and ev.count("JobFailed") == 1
    assert "JobProcessed" not in ev

    (row,) = app.failed_rows()
    assert row["uuid"] == pushed["uuid"]
    assert (row["connection"], row["queue"]) == ("redis", "default")
    payload = json.loads(row["payload"])
    assert payload["uuid"] == pushed["uuid"] and payload["id"] == pushed["id"]
    assert payload["attempts"] == 2  # the payload as popped for attempt 3
    assert row["exception"].startswith("RuntimeException: always fails in ")
    assert row["failed_at"]
    assert app.r0.keys(PREFIX + "queues:*") == []

    res = app.artisan("queue:failed")
    assert pushed["uuid"] in res.stdout
    app.artisan("queue:retry", "all")
    (again,) = [json.loads(p) for p in app.r0.lrange(Q, 0, -1)]
    assert again["uuid"] == pushed["uuid"] and again["attempts"] == 0
    assert app.failed_rows() == []
    app.artisan("queue:clear", "redis")


def test_queue_restart_sets_cache_key_and_stops_worker(app):
    app.artisan("fixture:dispatch", "MarkerJob", "--tag=r")
    worker = app.spawn("queue:work", "redis", "--sleep=0.2", "--max-time=30")
    try:
        app.wait_for(lambda m: any(x.get("tag") == "r" for x in m))
        before = int(time.time())
        app.artisan("queue:restart")
        value = app.r1.get(RESTART_KEY)
        assert value is not None and before <= int(value) <= int(time.time())
        assert app.r0.get(RESTART_KEY) is None  # cache store is on REDIS_CACHE_DB=1
        try:
            worker.wait(15)  # the worker notices the new restart value and exits 0
        except subprocess.TimeoutExpired:
            pass
        stopped_by_itself = worker.poll() is not None
    finally:
        code, out = _stop(worker)
    assert stopped_by_itself, out
    assert code == 0, out


def test_failed_job_flush(app):
    app.artisan("fixture:dispatch", "ManualFailJob", "--tag=mf")
    app.artisan("queue:work", "redis", "--once")
    (hook,) = [x for x in app.markers() if x.get("event") == "failed_hook"]
    assert (hook["class"], hook["message"]) == ("RuntimeException", "manual failure")
    assert len(app.failed_rows()) == 1
    app.artisan("queue:flush")
    assert app.failed_rows() == []


def test_copied_app_without_app_storage(app, tmp_path):
    """The other way to prepare the app: copy it and run it in place."""
    copy = tmp_path / "app"
    shutil.copytree(APP_DIR, copy, ignore=shutil.ignore_patterns("*.sqlite", ".env"))
    db = tmp_path / "db.sqlite"
    db.touch()
    env = {k: v for k, v in app.env.items() if k != "APP_STORAGE"}
    env.update({"_cwd": str(copy), "DB_DATABASE": str(db)})
    migrate_app(env)
    copied = App(env)
    copied.artisan("fixture:dispatch", "MarkerJob", "--tag=copy")
    copied.artisan("queue:work", "redis", "--once")
    assert [x["tag"] for x in copied.markers() if x.get("job") == "MarkerJob"
            and "event" not in x] == ["copy"]
    assert (copy / "bootstrap" / "cache" / "packages.php").exists()
