"""The app agent (src/master/agent.c, php/src/Agent.php): a pool that preloads a
Laravel app whose cache store is not Redis has one long-lived process, forked by
its zygote, that reads Laravel's queue:restart and queue:pause keys through the
app's own cache store. The fixture Laravel app of the host, with its cache in
files and in the database (SQLite), real Redis and real processes."""
import json
import os
import signal
import socket
import sqlite3
import subprocess

import pytest

from conftest import QPOOL, ROOT, wait_for

APP_KEYS = ["REDIS_PORT", "REDIS_PREFIX", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE", "MARKER_FILE",
            "LOG_CHANNEL"]


def cache_env(app, store):
    env = {k: app.env[k] for k in APP_KEYS if k in app.env}
    env["CACHE_DRIVER"] = store
    return env


def pool(app, store, name="app", extra=""):
    env = cache_env(app, store)
    return '{ name = "%s"; laravel = "%s"; processes = 1; environment = { %s }; %s }' % (
        name, app.path, " ".join('%s = "%s";' % kv for kv in env.items()), extra)


def artisan(app, store, *args):
    env = dict(app.env)
    env["CACHE_DRIVER"] = store
    res = subprocess.run(["php", str(app.path / "artisan")] + list(args), cwd=str(app.path), env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def agent_pid(master, name="app"):
    a = master.pool(name).get("agent") or {}
    return a.get("pid") if a.get("state") == "running" else None


def start(master, app, store, extra=""):
    master.write_config(pool(app, store, extra=extra), redis_conf="", qpool="  balance_interval = 0.5;")
    master.start()
    master.wait_children("app", 1, 60)
    return wait_for(lambda: agent_pid(master), 60, what="the app agent's hello")


@pytest.fixture(params=["file", "database"])
def store(request, laravel_app):
    if request.param == "database":  # the tables of `php artisan cache:table`
        con = sqlite3.connect(str(laravel_app.db))
        con.execute("create table cache (key varchar not null primary key, value text not null, "
                    "expiration integer not null)")
        con.execute("create table cache_locks (key varchar not null primary key, owner varchar not null, "
                    "expiration integer not null)")
        con.commit()
        con.close()
    return request.param


def test_check_says_the_agent_reads_the_signals(master, laravel_app, store):
    master.write_config(pool(laravel_app, store), redis_conf="")
    res = subprocess.run([QPOOL, "check", "-c", str(master.conf)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cannot see queue:restart" not in res.stdout + res.stderr
    assert "read by the pool's app agent" in res.stdout, res.stdout


def test_queue_restart_through_the_cache_store_rolls_the_pool(master, laravel_app, store):
    pid = start(master, laravel_app, store)
    assert "qpool agent: pool app" in open("/proc/%d/cmdline" % pid).read().replace("\0", " ")
    assert "agent  pid %-7d running" % pid in master.cli("status").stdout
    before = master.wait_children("app", 1, 60)
    artisan(laravel_app, store, "queue:restart")
    master.wait_log(r"queue:restart signal changed \(illuminate:queue:restart, read by the app agent\)", 30)
    wait_for(lambda: (lambda now: now if len(now) == 1 and now != before else None)(master.child_pids("app")),
             60, what="the pool's worker replaced")


def test_queue_pause_stops_pops_and_resume_brings_them_back(master, laravel_app, store):
    app = laravel_app
    start(master, app, store)
    artisan(app, store, "queue:pause", "default")
    master.wait_log(r"queue default paused by Laravel's queue:pause", 30)
    q = [x for x in master.pool("app")["queues"] if x["name"] == "default"][0]
    assert q["laravel_paused"]
    app.dispatch("MarkerJob", count=2, tag="agent-paused")
    r = master.redis.client()
    wait_for(lambda: r.llen("%squeues:default" % app.env["REDIS_PREFIX"]) == 2, 30, what="2 jobs waiting")
    artisan(app, store, "queue:resume", "default")
    master.wait_log(r"queue default resumed by Laravel's queue:resume", 30)
    wait_for(lambda: len([m for m in app.read_markers() if (m.get("tag") or "").startswith("agent-paused")]) == 2,
             60, what="the 2 jobs run after queue:resume")
    # every queue at once (illuminate:queues:paused)
    artisan(app, store, "queue:pause", "--all")
    master.wait_log(r"queue default paused by Laravel's queue:pause", 30, count=2)
    artisan(app, store, "queue:resume", "--all")
    master.wait_log(r"queue default resumed by Laravel's queue:resume", 30, count=2)


def test_a_killed_agent_is_asked_for_again(master, laravel_app):
    pid = start(master, laravel_app, "file")
    os.kill(pid, signal.SIGKILL)
    master.wait_log(r"pool app: its app agent \(pid %d\) has gone" % pid, 30)
    new = wait_for(lambda: (lambda p: p if p and p != pid else None)(agent_pid(master)), 60,
                   what="a new app agent")
    assert master.pool("app")["agent"]["restarts"] >= 1
    # and it still reads the signals
    artisan(laravel_app, "file", "queue:restart")
    master.wait_log(r"read by the app agent\): rolling restart", 30)
    assert new != pid


def test_a_pool_with_its_cache_on_redis_has_no_agent(master, laravel_app):
    master.write_config(pool(laravel_app, "redis"), redis_conf="")
    master.start()
    master.wait_children("app", 1, 60)
    assert "agent" not in master.pool("app")
    assert "app agent" not in master.log()


def test_the_agent_s_wire_sizes_unknown_ops_and_bounds(laravel_app):
    """The agent itself (php/src/Agent.php, on a socket of the test's own): its
    hello, the sizes of queues through the app's queue connection, an error
    reply for what it does not know, and its exit on a line over 64 KiB."""
    app = laravel_app
    app.dispatch("MarkerJob", queue="agent-sizes", count=3)
    ours, theirs = socket.socketpair()
    env = dict(app.env)
    env["CACHE_DRIVER"] = "file"
    proc = subprocess.Popen(["php", str(ROOT / "tests" / "fixtures" / "agent-harness.php"), str(ROOT),
                             str(app.path), str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=env,
                            cwd=str(app.path), stderr=subprocess.PIPE, text=True)
    theirs.close()
    ours.settimeout(60)
    lines = ours.makefile("rb")
    try:
        def ask(req):
            ours.sendall((json.dumps(req) + "\n").encode())
            return json.loads(lines.readline())

        hello = json.loads(lines.readline())
        assert hello["id"] == 0 and hello["ok"] and hello["op"] == "hello" and hello["pid"] == proc.pid
        r = ask({"id": 1, "op": "sizes", "connection": "redis", "queues": ["agent-sizes", "agent-empty"]})
        assert r["id"] == 1 and r["ok"], r
        total = [s["ready"] + (s["delayed"] or 0) + (s["reserved"] or 0) for s in r["sizes"]]
        assert total == [3, 0], r
        r = ask({"id": 2, "op": "signals", "restart_key": "illuminate:queue:restart", "queues": ["redis:default"]})
        assert r == {"id": 2, "ok": True, "restart": None, "paused_all": False, "paused": [False]}
        r = ask({"id": 3, "op": "no-such-op"})
        assert r["id"] == 3 and r["ok"] is False and r["error"] == "unknown op"
        r = ask({"op": "sizes"})
        assert r["id"] == 0 and r["ok"] is False
        ours.sendall(b"x" * 70000 + b"\n")
        assert proc.wait(60) == 1
        assert "longer than 65536 bytes" in proc.stderr.read()
    finally:
        ours.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_without_preload_check_still_warns_and_there_is_no_agent(master, laravel_app):
    master.write_config(pool(laravel_app, "file", extra="preload = false;"), redis_conf="")
    res = subprocess.run([QPOOL, "check", "-c", str(master.conf)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "does not preload the app: qpool cannot see queue:restart" in res.stdout + res.stderr
    assert "read by the pool's app agent" not in res.stdout
    master.start()
    master.wait_children("app", 1, 60)
    assert "agent" not in master.pool("app")
