"""Shared fixtures for qpool's integration tests.

Everything is real: a redis-server started per test on a free port, the
qpool binary (QPOOL_BUILD, default build/), real processes and signals.
Tests wait with generous deadlines but never assert speed.

Every test's master runs in its own session; at teardown every process of
that session is killed, and the master's log is checked for sanitizer
reports (the suite also runs against the ASan+UBSan build).
"""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid as uuidlib

import pytest
import redis

from ports import free_port, port_free, quiet_port, quiet_port_window  # noqa: F401 (the tests' import of them)

# What the tests start sees the environment of a fresh machine, not this
# one's: a PYTHONUNBUFFERED=1 here once hid a handler whose output was late.
for _var in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYENV_ROOT"):
    os.environ.pop(_var, None)

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("QPOOL_BUILD", ROOT / "build"))
QPOOL = str(BUILD / "qpool")
FIXTURE_HANDLER = str(BUILD / "fixture-handler")
PYTHON = "/usr/bin/python3"
SIGNAL_CHILD = str(ROOT / "tests" / "fixtures" / "signal-child.py")


def _os_release():
    out = {}
    try:
        with open("/etc/os-release") as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                out[k] = v.strip('"')
    except OSError:
        pass
    return out


# The Debian release the suite runs on, and the fixture app of the Laravel it
# packages (php-laravel-framework): 8.83 on bookworm, 10.48 on trixie. The
# Laravel-version matrix (laravel_roots.py) runs the other releases' in roots.
HOST_DIST = _os_release().get("VERSION_CODENAME", "bookworm")


def _materialized(src):
    """src with its symbolic links followed, made once per content under
    the build directory (laravel-app-10 shares the 8 app's files by links,
    and Laravel's command discovery resolves them out of the app)."""
    import fcntl
    import hashlib
    import shutil
    h = hashlib.sha1()
    for p in sorted(src.rglob("*")):
        st = p.stat() if p.exists() else None
        h.update(("%s %s %s\n" % (p.relative_to(src), st and st.st_size, st and st.st_mtime_ns)).encode())
    dest = BUILD / ("%s-%s" % (src.name, h.hexdigest()[:12]))
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / (src.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one maker; xdist's workers wait, then reuse
        if not dest.exists():
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp, symlinks=False, ignore=shutil.ignore_patterns("*.sqlite", ".env"))
            tmp.rename(dest)
    return dest


# The major version of the host's Laravel (what LARAVEL_APP runs on).
HOST_LARAVEL = 10 if HOST_DIST == "trixie" else 8
# What Laravel fails a job with when qpool killed its last attempt for its
# timeout, and when it was already attempted too often (Worker.php): 8.x says
# both with MaxAttemptsExceededException; 9+ has TimeoutExceededException.
MAX_ATTEMPTS_EXCEPTION = ("Illuminate\\Queue\\MaxAttemptsExceededException",
                          " has been attempted too many times or run too long. The job may have previously timed out."
                          if HOST_LARAVEL < 9 else " has been attempted too many times.")
TIMEOUT_EXCEPTION = (MAX_ATTEMPTS_EXCEPTION if HOST_LARAVEL < 9
                     else ("Illuminate\\Queue\\TimeoutExceededException", " has timed out."))

LARAVEL_APP = (_materialized(ROOT / "tests" / "laravel-app-10") if HOST_DIST == "trixie"
               else ROOT / "tests" / "laravel-app")
PREFIX = "laravel_database_"

SANITIZER_PATTERNS = re.compile(
    r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer")


def wait_for(pred, timeout=10.0, interval=0.05, what="condition"):
    """Poll pred() until it returns a truthy value; fail after timeout.
    A browser element that a page re-rendered between two Selenium calls
    (StaleElementReferenceException), or has not rendered yet
    (NoSuchElementException), counts as "not yet", not as a failure."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except Exception as e:  # selenium is not imported here: matched by name
            if type(e).__name__ not in ("StaleElementReferenceException", "NoSuchElementException"):
                raise
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.1f s waiting for %s (last: %r)" % (timeout, what, last))


def page_text(d, css):
    """The rendered text (innerText) of the first element css matches on
    browser d's page, or None, read in one script. The dashboard re-renders
    what it polls, so an element found by one Selenium call can be gone at
    the next (StaleElementReferenceException on a busy machine): a test
    reads such text through this, never through a kept WebElement."""
    return d.execute_script("var e = document.querySelector(arguments[0]); return e ? e.innerText : null;", css)


def page_attrs(d, css, attr=None):
    """Each element css matches: its attribute attr, or its innerText when
    attr is None; in one script (see page_text)."""
    return d.execute_script("var a = arguments[1]; return Array.from(document.querySelectorAll(arguments[0]))"
                            ".map(function (e) { return a === null ? e.innerText : e.getAttribute(a); });", css, attr)


def http_call(port, path, token=None, method=None, data=None, headers=None, args=None):
    """(status, body text) of a request to 127.0.0.1:port; an HTTP error's
    own status and body. `args` become the query string."""
    url = "http://127.0.0.1:%d%s" % (port, path)
    if args:
        url += "?" + urllib.parse.urlencode(args)
    req = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def api_get(port, path, token, **args):
    """(status, the reply's JSON) of a GET of a master's API; `args` the query."""
    st, body = http_call(port, path, token, args=args)
    return st, json.loads(body or "null")


def api_post(port, path, body, token):
    """(status, the reply's JSON or None) of a POST of `body` as JSON to a master's API."""
    st, text = http_call(port, path, token, method="POST", data=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
    return st, json.loads(text) if text else None


def proc_stats():
    """(pid, state, ppid, pgrp, session) of every process, from /proc/PID/stat."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rindex(")") + 2:].split()
        yield int(d), rest[0], int(rest[1]), int(rest[2]), int(rest[3])


def session_pids(sid):
    """Every live process whose session id is sid."""
    return [pid for pid, state, _, _, sess in proc_stats() if sess == sid and state != "Z"]


def proc_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        return st[st.rindex(")") + 2] != "Z"
    except OSError:
        return False


def children_of(pid):
    return sorted(p for p, state, ppid, _, _ in proc_stats() if ppid == pid and state != "Z")


def pgid_members(pgid):
    return [p for p, state, _, pgrp, _ in proc_stats() if pgrp == pgid and state != "Z"]


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class RedisServer:
    def __init__(self, tmp, persistent=False):
        self.dir = tmp / "redis"
        self.dir.mkdir(exist_ok=True)
        # tests stop and start servers on their port: one no outgoing
        # connection can take meanwhile
        self.port = quiet_port()
        self.proc = None
        self.persistent = persistent
        self.start()

    def start(self):
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")] + aof,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._ping, 10, what="redis-server to answer")

    def _ping(self):
        try:
            return redis.Redis(port=self.port, socket_timeout=0.5).ping()
        except redis.RedisError:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def client(self, db=0):
        return redis.Redis(port=self.port, db=db, socket_timeout=10)


@pytest.fixture
def redis_server(tmp_path):
    srv = RedisServer(tmp_path)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def module_redis_port(tmp_path_factory):
    """One redis-server for a whole test module; yields its port."""
    srv = RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        yield srv.port
    finally:
        srv.stop()


@pytest.fixture
def r(redis_server):
    return redis_server.client()


# ---------------------------------------------------------------- payloads

def make_payload(action="ok", job="App\\Jobs\\FixtureJob", attempts=0, **extra):
    """A Laravel-shaped payload (key order as Laravel 8 writes it)."""
    p = {
        "uuid": str(uuidlib.uuid4()),
        "displayName": job,
        "job": job if "@" in job else "Illuminate\\Queue\\CallQueuedHandler@call",
        "maxTries": None,
        "maxExceptions": None,
        "failOnTimeout": False,
        "backoff": None,
        "timeout": None,
        "retryUntil": None,
        "data": {"action": action},
        "id": uuidlib.uuid4().hex,
        "attempts": attempts,
    }
    for k, v in extra.items():
        p[k] = v
    return p


def push(r, queue, payload, prefix=PREFIX):
    raw = payload if isinstance(payload, (str, bytes)) else json.dumps(payload, separators=(",", ":"))
    pipe = r.pipeline(transaction=True)
    pipe.rpush(prefix + "queues:" + queue, raw)
    pipe.rpush(prefix + "queues:" + queue + ":notify", 1)
    pipe.execute()
    return raw


def push_many(r, queue, payloads, prefix=PREFIX):
    pipe = r.pipeline(transaction=False)
    for p in payloads:
        raw = json.dumps(p, separators=(",", ":"))
        pipe.rpush(prefix + "queues:" + queue, raw)
        pipe.rpush(prefix + "queues:" + queue + ":notify", 1)
    pipe.execute()


def queue_state(r, queue, prefix=PREFIX):
    k = prefix + "queues:" + queue
    return {"ready": r.llen(k), "delayed": r.zcard(k + ":delayed"),
            "reserved": r.zcard(k + ":reserved"), "notify": r.llen(k + ":notify")}


def failed_records(r, queue, prefix=PREFIX):
    uuids = r.zrange(prefix + "qpool:failed:" + queue, 0, -1)
    out = []
    for u in uuids:
        h = r.hgetall(prefix + "qpool:failed:job:" + u.decode())
        out.append({k.decode(): v for k, v in h.items()})
    return out


def fill_failed_store(r, queue, payloads, prefix=PREFIX, connection="redis"):
    """Write failed records straight into qpool's failed store (its layout
    in src/queue.h), oldest first; their uuids."""
    pipe = r.pipeline(transaction=False)
    now = int(time.time())
    for i, p in enumerate(payloads):
        pipe.hset(prefix + "qpool:failed:job:" + p["uuid"],
                  mapping={"uuid": p["uuid"], "connection": connection, "queue": queue,
                           "payload": json.dumps(p, separators=(",", ":")), "exception": "boom",
                           "failed_at": now - len(payloads) + i})
        pipe.zadd(prefix + "qpool:failed:" + queue, {p["uuid"]: now - len(payloads) + i})
    pipe.sadd(prefix + "qpool:failed:queues", queue)
    pipe.execute()
    return [p["uuid"] for p in payloads]


def kill_a_worker(master, rng, killed):
    """SIGKILL one of the master's children picked by rng; add its pid and
    its handlers' (they die with it) to killed. Returns 1 if one was killed."""
    workers = [w for w in children_of(master.proc.pid) if w not in killed]  # a victim not yet reaped
    if not workers:
        return 0
    victim = rng.choice(workers)
    killed.add(victim)
    killed.update(children_of(victim))
    try:
        os.kill(victim, signal.SIGKILL)
        return 1
    except ProcessLookupError:
        return 0


def with_their_handlers(master, killed):
    """killed, plus every handler a killed worker started, from the master's
    log ("w#2[1574]: started pipe handler (pid 1575"): kill_a_worker lists a
    victim's children before it kills, and a worker may start its handler
    (and hand it a job) in between."""
    out = set(killed)
    for wpid, hpid in re.findall(r"\[(\d+)\]: started (?:pipe|exec) handler \(pid (\d+)", master.log()):
        if int(wpid) in killed:
            out.add(int(hpid))
    return out


def stop_client(p, timeout=15):
    """Close a client process's stdin (its cue to stop), wait for it, kill
    it if it lingers; its exit status."""
    p.stdin.close()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    return p.returncode


def read_fixture_log(path):
    """Lines of the fixture handler log as lists of fields."""
    try:
        with open(path) as f:
            return [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        return []


# ---------------------------------------------------------------- master

class Master:
    """One `qpool run` with its own config, pid file, socket and log."""

    def __init__(self, tmp, redis_server=None):
        self.tmp = tmp
        self.redis = redis_server
        self.conf = tmp / "qpool.conf"
        self.pid_file = tmp / "qpool.pid"
        self.socket = tmp / "qpool.sock"
        self.log_path = tmp / "master.log"
        self.proc = None
        self.sid = None

    def write_config(self, pools, qpool="", defaults="", redis_conf=None):
        port = self.redis.port if self.redis else 6379
        if redis_conf is None:
            redis_conf = ('default = { host = "127.0.0.1"; port = %d; db = 0; prefix = "%s"; };\n'
                          '  cache = { host = "127.0.0.1"; port = %d; db = 1; prefix = "%s"; };'
                          % (port, PREFIX, port, PREFIX))
        if "shutdown_timeout" not in qpool:
            qpool = "  shutdown_timeout = 10;\n" + qpool
        text = (
            'qpool = {\n  pid_file = "%s";\n  control_socket = "%s";\n%s\n};\n'
            'redis = {\n  %s\n};\n'
            'defaults = {\n%s\n};\n'
            'pools = (\n%s\n);\n'
        ) % (self.pid_file, self.socket, qpool, redis_conf, defaults, pools)
        self.conf.write_text(text)
        return self.conf

    def start(self, env=None, wait_ready=True):
        e = dict(os.environ)
        e.update(env or {})
        self.logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen([QPOOL, "run", "-c", str(self.conf)], stdout=self.logf,
                                     stderr=subprocess.STDOUT, env=e, start_new_session=True)
        self.sid = self.proc.pid
        if wait_ready:
            wait_for(lambda: self.listening() or self.proc.poll() is not None, 10,
                     what="the master to start")
            assert self.proc.poll() is None, "master exited: %s" % self.log()
            self.wait_http()
        return self

    def wait_http(self):
        """The master opens its HTTP listener after its control socket (the
        pools start in between): wait for the listener the config names, or
        for the log line saying the endpoint stays off."""
        m = re.search(r'listen\s*=\s*"(?:\[([^\]]+)\]|([^":\[]+)):(\d+)"', self.conf.read_text())
        if not m:
            return
        host, port = m.group(1) or m.group(2), int(m.group(3))

        def up():
            if "the HTTP endpoint stays off" in self.log() or self.proc.poll() is not None:
                return True
            try:
                socket.create_connection((host, port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for(up, 10, what="the HTTP listener on %s:%d" % (host, port))

    def listening(self):
        """The control socket takes connections: it exists a moment before
        it listens (bind, then listen), and a command sent in between is
        refused (seen once in a loaded parallel run)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(str(self.socket))
                return True
            except OSError:
                return False

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def count_log(self, pattern):
        return len(re.findall(pattern, self.log()))

    def wait_log(self, pattern, timeout=10.0, count=1):
        return wait_for(lambda: self.count_log(pattern) >= count, timeout,
                        what="%d x /%s/ in the master log" % (count, pattern))

    def cli(self, *args, check=True, timeout=60):
        res = subprocess.run([QPOOL] + list(args) + ["-c", str(self.conf)], capture_output=True,
                             text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("qpool %s failed (%d): %s %s" % (args, res.returncode, res.stdout,
                                                                 res.stderr))
        return res

    def status(self, verbose=True):
        args = ["status", "--json"] + (["-v"] if verbose else [])
        res = self.cli(*args, check=False)
        return json.loads(res.stdout)

    def pool(self, name):
        for p in self.status()["pools"]:
            if p["name"] == name:
                return p
        raise KeyError(name)

    def child_pids(self, pool=None):
        """Pids of children (not stopping) as the master reports them."""
        pids = []
        for p in self.status()["pools"]:
            if pool and p["name"] != pool:
                continue
            pids += [c["pid"] for c in p.get("children", []) if c["state"] != "stopping"]
        return sorted(pids)

    def wait_children(self, pool, n, timeout=10.0):
        return wait_for(lambda: (lambda pids: pids if len(pids) == n else None)(self.child_pids(pool)),
                        timeout, what="%d children in pool %s" % (n, pool))

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=30.0):
        return self.proc.wait(timeout)

    def stop(self, timeout=30.0):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout)
        return self.proc.returncode if self.proc else None

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.sid:
            for pid in session_pids(self.sid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if getattr(self, "logf", None):
            self.logf.close()


@pytest.fixture
def master_factory(tmp_path, request):
    made = []

    def make(redis_server=None, name="m"):
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        m = Master(d, redis_server)
        made.append(m)
        return m

    yield make
    failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
    for m in made:
        m.cleanup()
    for m in made:
        log = m.log()
        if failed:
            print("---- master log (%s) ----\n%s" % (m.log_path, log[-20000:]))
        bad = SANITIZER_PATTERNS.search(log)
        assert not bad, "sanitizer report in %s:\n%s" % (m.log_path, log[bad.start():bad.start() + 4000])


@pytest.fixture
def master(master_factory, redis_server):
    return master_factory(redis_server)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def stop_process(proc):
    """SIGTERM a server the tests started; SIGKILL it if it has not gone in 10 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# ---------------------------------------------------------------- laravel

def laravel_env(redis_port, d):
    """Environment for the fixture Laravel app: Redis on redis_port; storage, the
    sqlite database (created) and the marker file under directory d; nothing
    inherited that could point it elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("REDIS_", "APP_", "DB_", "CACHE_", "QUEUE_", "LOG_", "MARKER_", "QPOOL_"))}
    (d / "database.sqlite").touch()
    env.update({
        "REDIS_HOST": "127.0.0.1",
        "REDIS_PORT": str(redis_port),
        "REDIS_PREFIX": PREFIX,
        "APP_STORAGE": str(d / "storage"),
        "DB_CONNECTION": "sqlite",
        "DB_DATABASE": str(d / "database.sqlite"),
        "MARKER_FILE": str(d / "markers.jsonl"),
    })
    return env


def clean_env(env):
    """env without the keys only the tests use (those starting with "_", such
    as "_cwd", where the app's artisan is run)."""
    return {k: v for k, v in env.items() if not k.startswith("_")}


def migrate_app(env, timeout=120):
    """Run the app's migrations (in env["_cwd"]) on its sqlite database."""
    res = subprocess.run(["php", "artisan", "migrate", "--force"], cwd=env["_cwd"], env=clean_env(env),
                         capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout + res.stderr


def migrated_app_env(redis_port, d):
    """laravel_env for the fixture app run in place, migrated."""
    env = laravel_env(redis_port, d)
    env["_cwd"] = str(LARAVEL_APP)
    migrate_app(env)
    return env


@pytest.fixture
def laravel_app(tmp_path, redis_server):
    """The fixture Laravel 8 app, with its writable paths in tmp_path."""
    d = tmp_path / "laravel"
    d.mkdir()
    env = laravel_env(redis_server.port, d)
    env["LOG_CHANNEL"] = "null"
    app = LaravelApp(LARAVEL_APP, env, d / "database.sqlite", d / "markers.jsonl")
    app.artisan("migrate", "--force")
    return app


class LaravelApp:
    def __init__(self, path, env, db, markers):
        self.path = path
        self.env = env
        self.db = db
        self.markers = markers

    def artisan(self, *args, timeout=120, check=True):
        res = subprocess.run(["php", str(self.path / "artisan")] + list(args), cwd=str(self.path),
                             env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("artisan %s failed (%d): %s %s" % (args, res.returncode, res.stdout,
                                                                   res.stderr))
        return res

    def dispatch(self, job, *args, queue="default", count=1, delay=0, tag=None):
        cmd = ["fixture:dispatch", job, "--queue=" + queue, "--count=%d" % count, "--delay=%d" % delay]
        if tag:
            cmd.append("--tag=" + tag)
        cmd += ["--arg=%s" % a for a in args]
        return self.artisan(*cmd)

    def read_markers(self):
        try:
            with open(self.markers) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def failed_jobs(self):
        import sqlite3
        con = sqlite3.connect(str(self.db))
        con.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in con.execute("select * from failed_jobs order by id")]
        finally:
            con.close()

    def env_conf(self):
        """The environment block for a qpool pool running this app."""
        keys = ["REDIS_HOST", "REDIS_PORT", "REDIS_PREFIX", "APP_STORAGE", "DB_CONNECTION",
                "DB_DATABASE", "MARKER_FILE", "LOG_CHANNEL", "QUEUE_RETRY_AFTER", "MARKER_EVENTS"]
        return "environment = { %s };" % " ".join('%s = "%s";' % (k, self.env[k]) for k in keys if k in self.env)


# ---------------------------------------------------------------- valgrind

VALGRIND = ["valgrind", "--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect", "--trace-children=yes",
            "--trace-children-skip=*fixture-handler*", "--child-silent-after-fork=no", "-q"]


def assert_valgrind_clean(d, at_least=1, what="the processes"):
    """Every valgrind.*.log under d is free of errors and leaks, and there
    are at least at_least of them (each traced process writes one)."""
    logs = list(pathlib.Path(d).glob("valgrind.*.log"))
    problems = []
    for f in logs:
        text = f.read_text()
        if re.search(r"Invalid (read|write|free)|uninitialised|definitely lost: [1-9]|indirectly lost: [1-9]"
                     r"|ERROR SUMMARY: [1-9]", text):
            problems.append("%s:\n%s" % (f, text[:4000]))
    assert not problems, "\n\n".join(problems)
    assert len(logs) >= at_least, "%s were not traced (%d valgrind logs)" % (what, len(logs))


class NotifySocket:
    """A systemd notification socket (sd_notify(3)): a datagram socket in the
    abstract namespace, read by a thread (a full queue would block the sender)."""

    def __init__(self):
        self.name = "qpool-test-notify-" + uuidlib.uuid4().hex
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name)
        self.sock.settimeout(0.2)
        self.messages = []
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except OSError:
                continue
            with self.lock:
                self.messages.append(data.decode(errors="replace"))

    def env(self, watchdog_usec):
        return {"NOTIFY_SOCKET": "@" + self.name, "WATCHDOG_USEC": str(watchdog_usec)}

    def count(self, text, since=0):
        with self.lock:
            return sum(1 for m in self.messages[since:] if text in m.split("\n"))

    def got(self):
        with self.lock:
            return list(self.messages)

    def seen(self):
        with self.lock:
            return len(self.messages)

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()
