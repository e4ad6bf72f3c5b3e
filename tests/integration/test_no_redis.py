"""An app with no Redis at all (issue 30, item 4): a qpool.conf without a
`redis` section whose pools all run through the app's driver (app_driver)
names no Redis, so qpool's own state that lives in Redis (job history, the
minute history, the fleet view, fleet budgets) is off and the master never
connects to one. The app is each version's fixture app (Laravel 8 on the
host, 10 and 13 in their Debian roots: laravel_roots.py) with
QUEUE_CONNECTION=database on SQLite and its cache in files;
its Redis settings point at a port the test listens on and counts
connections to, which must stay at 0: no redis-server is started. No timing
is asserted: each wait is for a state."""
import fcntl
import http.client
import json
import socket
import subprocess
import threading

import pytest

from conftest import free_port, http_call, wait_for
from laravel_roots import VersionApp, argv_conf, laravel_version  # noqa: F401 (fixture)
from test_app_driver import dispatch, jobs_left, pause_holds_the_job, use_database_queue

class Trap:
    """A TCP listener standing where a Redis would be: counts connections."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            c.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


@pytest.fixture
def trap():
    t = Trap()
    yield t
    t.close()


@pytest.fixture
def app(laravel_version, trap, tmp_path):
    """The version's fixture app on a database queue, its cache in files,
    its Redis settings at the trap."""
    a = VersionApp(laravel_version, trap.port, tmp_path)
    a.env.update({"CACHE_DRIVER": "file", "CACHE_STORE": "file", "QUEUE_CONNECTION": "database"})
    try:
        a.artisan("migrate", "--force")
        use_database_queue(a)
        yield a
    finally:
        a.remove()


TOKEN = "no-redis-test-token"


def conf_text(m, app, http_port, redis=""):
    env = " ".join('%s = "%s";' % (k, app.env[k]) for k in
                   ("REDIS_HOST", "REDIS_PORT", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE", "MARKER_FILE",
                    "LOG_CHANNEL", "CACHE_DRIVER", "CACHE_STORE", "QUEUE_CONNECTION"))
    v = app.version
    pool = ('{ name = "appq"; laravel = "%s"; php = %s; php_adapter = "%s"; %s processes = 1; sleep = 0.2;\n'
            '  job_log = true; environment = { %s }; }'
            % (app.app_inner, argv_conf(v.prefix() + ["php"]), app.work_inner / "php" / "qpool-handler.php",
               'php_root = "%s";' % v.root if v.root else "", env))
    return ('qpool = {\n  pid_file = "%s";\n  control_socket = "%s";\n  shutdown_timeout = 10;\n'
            '  balance_interval = 0.5;\n  http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_NR_TOKEN"; };\n};\n%s'
            'pools = (\n%s\n);\n' % (m.pid_file, m.socket, http_port, redis, pool))


def get(port, path, token=None):
    return http_call(port, path, token)


def send(port, method, path, token, body=None):
    """(status, JSON reply) of a request; a dropped connection raises."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": "Bearer " + token}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        c.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        res = c.getresponse()
        return res.status, json.loads(res.read().decode() or "null")
    finally:
        c.close()


U = "00000000-0000-4000-8000-000000000000"
# what needs a Redis: every such route the dashboard asks, GET and action
NEEDS_REDIS = [("GET", p, None) for p in (
    "/api/fleet", "/api/metrics?minutes=60", "/api/jobs/recent?limit=50", "/api/jobs/pending?queue=default",
    "/api/jobs/" + U, "/api/monitoring", "/api/monitoring/jobs?tag=t&limit=100", "/api/failed?limit=1000",
    "/api/failed?class=X&limit=100", "/api/failed/" + U)] + [
    ("POST", "/api/queues/default/delete", {}), ("POST", "/api/classes/App%5CJobs%5CX/pause", {}),
    ("POST", "/api/classes/App%5CJobs%5CX/continue", {}), ("POST", "/api/failed/retry", {"queue": "default"}),
    ("POST", "/api/failed/forget", {"queue": "default"}), ("POST", "/api/failed/%s/retry" % U, {}),
    ("POST", "/api/failed/%s/forget" % U, {}), ("POST", "/api/monitoring", {"tag": "t"}),
    ("DELETE", "/api/monitoring", {"tag": "t"})]
# what works from the master's own state (and the app's agent): code expected
OWN_STATE = [("GET", "/api/status", None, 200), ("GET", "/api/limits", None, 200),
             ("GET", "/api/batches", None, 200), ("GET", "/api/batches?status=failed", None, 200),
             ("GET", "/api/batches/" + U, None, 404), ("POST", "/api/batches/%s/retry" % U, {}, None),
             ("POST", "/api/jobs/%s/stop" % U, {}, None),
             ("POST", "/api/queues/default/pause", {}, 200), ("POST", "/api/queues/default/continue", {}, 200),
             ("POST", "/api/pools/appq/pause", {}, 200), ("POST", "/api/pools/appq/continue", {}, 200),
             ("POST", "/api/pools/appq/scale", {"n": 1}, 200), ("POST", "/api/pools/appq/restart", {}, 200)]


def http_pid(m):
    """The master's HTTP process (its child)."""
    out = subprocess.run(["pgrep", "-P", str(m.proc.pid), "-f", "^qpool: http"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def walk_the_api(m, port):
    """Every API route the dashboard uses: each answers (JSON), the HTTP
    process never dies."""
    for method, path, body in NEEDS_REDIS:
        code, rep = send(port, method, path, TOKEN, body)
        assert code == 503 and "needs a Redis" in rep["error"], (method, path, code, rep)
    for method, path, body, want in OWN_STATE:
        code, rep = send(port, method, path, TOKEN, body)
        assert (code == want) if want else 200 <= code < 500, (method, path, code, rep)
    code, rep = send(port, "GET", "/api/batches", TOKEN)
    assert isinstance(rep["batches"], list), rep


def running_job(app, m, port):
    """LockWaitJob holds a worker while the test holds its lock: the Running
    page's list (GET /api/jobs/running) shows it, from the master's own
    status."""
    lock = open(str(app.work / "data" / "lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        app.artisan("fixture:dispatch", "LockWaitJob", "--connection=database", "--tag=w",
                    "--arg=%s" % (app.work_inner / "data" / "lock"))

        def rows():
            code, rep = send(port, "GET", "/api/jobs/running?pool=appq", TOKEN)
            assert code == 200, (code, rep)
            return rep["running"]
        r = wait_for(rows, 60, what="the running list to show the job")
        assert [(x["pool"], x["name"], x["own"]) for x in r] == [("appq", "App\\Jobs\\LockWaitJob", True)], r
        assert r[0]["uuid"] and r[0]["pid"] in {c["pid"] for c in m.pool("appq")["children"]}, r
        code, rep = send(port, "GET", "/api/jobs/running?status=past_timeout", TOKEN)
        assert code == 200 and rep["running"] == [], rep
    finally:
        lock.close()
    wait_for(lambda: not jobs_left(app), 60, interval=0.25, what="the job to finish once the lock is free")


def markers(app, prefix):
    return sorted(x["tag"] for x in app.read_markers() if "event" not in x and x["tag"].startswith(prefix))


def test_an_app_with_no_redis_runs(master_factory, app, trap):
    m = master_factory()
    port = free_port()
    m.conf.write_text(conf_text(m, app, port))

    # qpool check: valid, and it says what is off for want of a Redis
    res = m.cli("check", check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    for what in ("job history", "minute history", "fleet view", "fleet budget"):
        assert "#   %s: off, needs a Redis (set redis = " % what in res.stdout, res.stdout
    assert "[/api/fleet, qpool status --fleet]" in res.stdout, res.stdout
    off = [line for line in res.stdout.splitlines() if ": off, needs a Redis" in line]
    assert not [line for line in off if "batches" in line], off  # the app agent reads job_batches
    assert "\nredis = false;\n" in res.stdout
    res = m.cli("check", "--connect", check=False)
    assert res.returncode == 0 and "nothing to connect to" in res.stdout, res.stdout + res.stderr

    dispatch(app, "MarkerJob", count=3, tag="m")
    m.start(env={"QPOOL_NR_TOKEN": TOKEN})
    try:
        wait_for(lambda: not jobs_left(app), 90, interval=0.25, what="the database queue to drain")
        assert markers(app, "m") == ["m-1", "m-2", "m-3"]
        wait_for(lambda: m.pool("appq")["jobs_done"] >= 3, 30, what="qpool status to count the jobs")

        # pause and continue, through the control socket
        # (paused: the job stays in the table, unreserved)
        pause_holds_the_job(m, lambda: dispatch(app, "MarkerJob", tag="p"),
                            lambda: [j["reserved_at"] for j in jobs_left(app)] == [None])
        wait_for(lambda: not jobs_left(app), 60, interval=0.25, what="the job to run after continue")
        assert markers(app, "p") == ["p"]

        # the master's own state: /metrics, /healthz, the dashboard and the status API
        code, body = get(port, "/metrics")
        assert code == 200 and "qpool_" in body, body[:500]
        code, body = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(get(port, "/healthz")), 30,
                              what="/healthz to answer 200")
        assert json.loads(body)["redis"] == "none", body
        assert get(port, "/")[0] == 200
        code, body = get(port, "/api/status", TOKEN)
        assert code == 200 and [p["name"] for p in json.loads(body)["pools"]] == ["appq"], body[:500]
        # the Running page from the master's own state; every route the
        # dashboard uses answers, what needs a Redis says so at once in JSON
        http_before = http_pid(m)
        assert len(http_before) == 1, http_before
        running_job(app, m, port)
        walk_the_api(m, port)
        assert http_pid(m) == http_before and "killed by signal" not in m.log(), m.log()[-3000:]
        res = m.cli("failed", "list", check=False)
        assert res.returncode == 1 and "needs a Redis" in res.stderr, res.stdout + res.stderr
        res = m.cli("pause", "--class", "App\\Jobs\\MarkerJob", check=False)
        assert res.returncode != 0 and "needs a Redis" in res.stdout + res.stderr, res.stdout + res.stderr
    finally:
        rc = m.stop(60)
    assert rc == 0
    # no Redis was ever asked for: not by the master, its HTTP process, the
    # workers or the app (its REDIS_PORT is the trap's)
    assert trap.accepted == 0
    assert "redis default" not in m.log() and "reconnect" not in m.log(), m.log()[-3000:]


def test_an_app_that_defines_no_redis_runs_under_laravel_app(master_factory, app, trap):
    """An app whose config/database.php has no `redis` group at all: under
    `laravel = APP` its database queue runs, and `qpool check` neither
    refuses it nor lists Redis settings of the app. (Laravel 11 and later
    merge the framework's own config/database.php under the app's, so their
    apps always define redis.default.)"""
    if int(app.version.name.split(".")[0]) >= 11:
        pytest.skip("Laravel %s merges the framework's redis defaults" % app.version.name)
    conf = app.work / "app" / "config" / "database.php"
    kept = app.work / "app" / "database-with-redis.php"
    conf.rename(kept)
    conf.write_text("<?php\n$c = require __DIR__.'/../database-with-redis.php';\nunset($c['redis']);\nreturn $c;\n")
    m = master_factory()
    port = free_port()
    m.conf.write_text(conf_text(m, app, port))
    res = m.cli("check", check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "the app defines no Redis" in res.stdout and "redis.port" not in res.stdout, res.stdout
    assert "\nredis = false;\n" in res.stdout
    dispatch(app, "MarkerJob", count=2, tag="n")
    m.start(env={"QPOOL_NR_TOKEN": TOKEN})
    try:
        wait_for(lambda: not jobs_left(app), 90, interval=0.25, what="the database queue to drain")
        assert markers(app, "n") == ["n-1", "n-2"]
    finally:
        rc = m.stop(60)
    assert rc == 0
    assert trap.accepted == 0
