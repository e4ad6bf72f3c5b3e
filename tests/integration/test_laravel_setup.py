"""Setup read from the app (`laravel = "/srv/app";`) and maintenance mode, with the
fixture Laravel 8 app (Debian's 8.83) and real Redis and processes."""
import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pytest

from conftest import (BUILD, FIXTURE_HANDLER, NotifySocket, LARAVEL_APP, QPOOL, ROOT, assert_valgrind_clean,
                      read_fixture_log, wait_for)
from laravel_roots import build_root

# The environment the app needs that is not about Redis or the queue: where it
# writes (storage, sqlite, markers). Redis' port comes from REDIS_PORT.
APP_KEYS = ["REDIS_PORT", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE", "MARKER_FILE", "LOG_CHANNEL"]


def app_env(app, extra=None):
    env = {k: app.env[k] for k in APP_KEYS if k in app.env}
    env.update(extra or {})
    return "environment = { %s };" % " ".join('%s = "%s";' % kv for kv in env.items())


def laravel_pool(app, name="app", path=None, extra="", env=None):
    return '{ name = "%s"; laravel = "%s"; processes = 1; %s %s }' % (
        name, path or app.path, app_env(app, env), extra)


def markers(app, job="MarkerJob", tag=None):
    """Markers of job runs; fixture:dispatch tags each copy TAG-N."""
    return [m for m in app.read_markers()
            if m.get("job") == job and "event" not in m and (tag is None or (m.get("tag") or "").startswith(tag))]


def copy_app(tmp_path, dotenv):
    """The fixture app copied (it is small), with a .env of its own."""
    d = tmp_path / "app"
    shutil.copytree(LARAVEL_APP, d)  # links followed (the Laravel 10 app shares files by links)
    (d / ".env").write_text(dotenv)
    return d


def check(master):
    return subprocess.run([QPOOL, "check", "-c", str(master.conf)], capture_output=True, text=True, timeout=120)


def origin_line(out, key):
    lines = [l for l in out.splitlines() if l.strip().startswith("#   " + key + " ")]
    assert len(lines) == 1, "no single origin line for %s in:\n%s" % (key, out)
    return lines[0]


def test_check_shows_where_each_value_came_from(master, laravel_app, tmp_path):
    app = laravel_app
    path = copy_app(tmp_path, "REDIS_CACHE_DB=5\nQUEUE_RETRY_AFTER=77\nREDIS_PASSWORD=hunter2-not-logged\n")
    master.write_config(laravel_pool(app, path=path, extra="tries = 3;") + ",\n" +
                        laravel_pool(app, name="explicit", path=path, extra="retry_after = 300; queues = [\"other\"];"),
                        redis_conf="")
    res = check(master)
    assert res.returncode == 0, res.stderr
    assert "hunter2" not in res.stdout + res.stderr, "the password was printed"
    pools = res.stdout.split("name = \"explicit\"")
    out = pools[0]
    assert "(redacted)" in origin_line(out, "redis.password")
    assert ".env (REDIS_PASSWORD)" in origin_line(out, "redis.password")
    port = origin_line(out, "redis.port")
    assert str(master.redis.port) in port and "environment (REDIS_PORT)" in port
    assert "config/queue.php" in origin_line(out, "queue_connection")
    assert "config/database.php" in origin_line(out, "redis.db")
    cache_db = origin_line(out, "cache_redis.db")
    assert " 5 " in cache_db and ".env (REDIS_CACHE_DB)" in cache_db
    assert '"laravel_cache:"' in origin_line(out, "cache_prefix")
    # the first pool takes the app's retry_after (from .env), the second its own
    assert "retry_after = 77;" in pools[0] and ".env (QUEUE_RETRY_AFTER)" in origin_line(pools[0], "retry_after")
    assert "retry_after = 300;" in pools[1] and "qpool.conf" in origin_line(pools[1], "retry_after")
    assert 'queues = ["other"];' in pools[1] and 'queues = ["default"];' in pools[0]
    # the app's connections became the config's, the handler defaults to the adapter
    assert "  cache = {" in out and "db = 5;" in out
    assert "qpool-handler.php" in pools[0] and '"%s"]' % path in pools[0]


def test_an_app_that_cannot_be_read_exits_78_naming_it(master, laravel_app, tmp_path):
    missing = tmp_path / "no-such-app"
    master.write_config(laravel_pool(laravel_app, path=missing), redis_conf="")
    res = check(master)
    assert res.returncode == 78
    assert str(missing) in res.stderr and "%s:" % master.conf in res.stderr, res.stderr
    assert "no such directory" in res.stderr
    not_laravel = tmp_path / "empty"
    not_laravel.mkdir()
    master.write_config(laravel_pool(laravel_app, path=not_laravel), redis_conf="")
    res = check(master)
    assert res.returncode == 78 and "not a Laravel app" in res.stderr, res.stderr
    # and `qpool run` refuses it the same way
    res = subprocess.run([QPOOL, "run", "-c", str(master.conf)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 78 and str(not_laravel) in res.stderr


def test_an_app_on_a_redis_cluster_is_a_clear_error(master, laravel_app):
    """The app's queue connection is on database.redis.clusters: qpool does
    not read a cluster from the app, and says so (exit 78) rather than
    calling the connection undefined."""
    master.write_config(laravel_pool(laravel_app, env={"QUEUE_CONNECTION": "redis-cluster",
                                                       "REDIS_CLUSTER_NODES": "127.0.0.1:7000"}), redis_conf="")
    res = check(master)
    assert res.returncode == 78, res.stdout + res.stderr
    assert '"cluster" is a Redis Cluster' in res.stderr and "cluster = [" in res.stderr, res.stderr
    assert "%s:" % master.conf in res.stderr, res.stderr


def test_a_describer_that_closes_its_output_and_lingers_is_killed_at_the_timeout(master, laravel_app, tmp_path):
    """Review of this session's code: after EOF on both pipes the master
    waited for the describer with a blocking waitpid, so one that closed its
    output and slept held the master past the 20 s limit (and a reload, the
    whole master loop). It is now reaped by the deadline or killed."""
    marker = "sleep 25.%04d" % (os.getpid() % 10000)  # unique enough to find it afterwards
    pool = laravel_pool(laravel_app, extra='php = ["/bin/sh", "-c", "exec >&- 2>&-; exec %s"];' % marker)
    master.write_config(pool, redis_conf="")
    res = check(master)
    assert res.returncode == 78, res.stderr
    # before: the lingering child was waited out (25 s) and its empty answer refused as not JSON
    assert "no answer within 20 s" in res.stderr, res.stderr
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 1, "the describer outlived it"


def _pids_of(pattern):
    res = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in res.stdout.split()]


def test_a_describer_whose_grandchild_keeps_its_output_open_answers(master, laravel_app):
    """Review 2026-11-24 #9: the master collected a description until EOF on
    its pipes, so a grandchild that kept them open turned a good answer into
    "no answer within 20 s". A describe is now done once its direct child
    (real PHP, the real adapter and app) has exited: what it wrote is read,
    and what is left in its process group is killed. One grandchild leaves
    the group (setsid), the other stays in it; both hold stdout and stderr."""
    tag = "%04d" % (os.getpid() % 10000)
    detached, attached = "sleep 61.%s" % tag, "sleep 62.%s" % tag
    pools = []
    for name, spawn in (("detached", "setsid " + detached), ("attached", attached)):
        pools.append(laravel_pool(laravel_app, name=name, extra='queues = ["%s"]; php = ["/bin/sh", "-c", '
                                  '"%s & exec php \\"$@\\"", "sh"];' % (name, spawn)))
    master.write_config(",\n".join(pools), redis_conf="")
    try:
        res = check(master)
        # before: both waited for EOF and failed with "no answer within 20 s"
        assert res.returncode == 0, res.stderr
        for part in res.stdout.split('name = "attached"'):
            assert "config/queue.php" in origin_line(part, "queue_connection")
        assert _pids_of(attached) == [], "a process the describer left in its group outlived it"
    finally:
        for pid in _pids_of(detached) + _pids_of(attached):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


DESCRIBE_GATE = r"""
# A describer that says when it starts and ends, and waits for the test's go.
echo "notify=${NOTIFY_SOCKET:-}" > "$DESC_DIR/start-$DESC_NAME"
i=0
while [ ! -e "$DESC_DIR/go" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
php "$@"
rc=$?
echo "$$" > "$DESC_DIR/end-$DESC_NAME"
exit $rc
"""


def test_a_reload_describes_every_app_at_once_and_pings_the_watchdog(master, laravel_app, tmp_path):
    """Review 2026-11-24 #9: a reload described the apps one after another
    with the master's loop frozen and no watchdog ping, up to 20 s each; with
    3 or more distinct descriptions systemd (WatchdogSec=60) killed the
    master. Now the three distinct describes of this config (three
    environments) run at once, and the master pings the watchdog while it
    waits for them: each describer here waits until the test has seen all
    three running and a WATCHDOG=1 sent since."""
    gate = tmp_path / "describe-gate.sh"
    gate.write_text(DESCRIBE_GATE)
    desc = tmp_path / "desc"
    desc.mkdir()
    (desc / "go").touch()
    handler = 'handler = { type = "pipe"; command = ["%s"]; };' % FIXTURE_HANDLER
    names = ["one", "two", "three"]
    master.write_config(",\n".join(
        laravel_pool(laravel_app, name=n, env={"DESC_DIR": str(desc), "DESC_NAME": n},
                     extra='queues = ["%s"]; php = ["/bin/sh", "%s"]; %s' % (n, gate, handler))
        for n in names), redis_conf="")
    notify = NotifySocket()
    reload = None
    try:
        master.start(env=notify.env(1000000))  # a ping every 0.5 s
        wait_for(lambda: notify.count("WATCHDOG=1") >= 1, 10, what="the master's watchdog pings")
        # the describes at start are children too: none may talk to systemd in the master's name
        assert sorted(f.read_text() for f in desc.glob("start-*")) == ["notify=\n"] * 3
        for f in desc.iterdir():
            f.unlink()
        reload = subprocess.Popen([QPOOL, "reload", "-c", str(master.conf)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        started = lambda: sorted(f.name[6:] for f in desc.glob("start-*"))
        wait_for(lambda: notify.count("RELOADING=1") >= 1, 10, what="the reload to begin")
        # before: the first describe waited alone for the go (15 s), the others after it
        wait_for(lambda: len(started()) == 3, 10, what="the three describes running at once")
        assert list(desc.glob("end-*")) == [], "a describe ended before all had started"
        since = notify.seen()
        # before: no ping from the master while it waited for the describes
        wait_for(lambda: notify.count("WATCHDOG=1", since) >= 2, 10,
                 what="WATCHDOG=1 while the master waits for the describes")
        assert list(desc.glob("end-*")) == []
        (desc / "go").touch()
        out, _ = reload.communicate(timeout=60)
        assert reload.returncode == 0 and "0 changed" in out, out
        assert sorted(f.name[4:] for f in desc.glob("end-*")) == sorted(names)
        assert sorted(f.read_text() for f in desc.glob("start-*")) == ["notify=\n"] * 3
        # READY=1 again once the reload is done (it may reach the socket after the reply)
        wait_for(lambda: notify.count("READY=1") >= 2, 10, what="READY=1 after the reload")
    finally:
        (desc / "go").touch()
        if reload and reload.poll() is None:
            reload.communicate(timeout=120)
        notify.close()


def test_a_pool_with_only_laravel_set_runs_the_apps_jobs(master, laravel_app):
    app = laravel_app
    master.write_config(laravel_pool(app), redis_conf="")
    assert "redis" not in master.conf.read_text().split("redis = {")[1].split("};")[0]
    master.start()
    app.dispatch("MarkerJob", count=4, tag="only-laravel")
    wait_for(lambda: len(markers(app, tag="only-laravel")) == 4, 60, what="4 jobs run by the adapter on the app")
    st = master.pool("app")
    assert st["kind"] == "pipe" and st["jobs_done"] >= 4


def test_reload_reads_the_app_again(master, laravel_app, tmp_path):
    app = laravel_app
    path = copy_app(tmp_path, "QUEUE_RETRY_AFTER=100\n")
    master.write_config(laravel_pool(app, path=path), redis_conf="")
    master.start()
    master.wait_children("app", 1, 60)
    (path / ".env").write_text("QUEUE_RETRY_AFTER=200\n")
    res = master.cli("reload")
    assert "1 changed" in res.stdout, res.stdout
    master.wait_log("pool app changed")
    # the same config file, read again with the app unchanged: nothing changes
    res = master.cli("reload")
    assert "0 changed" in res.stdout, res.stdout


def test_an_app_already_down_at_start_runs_no_job(master, laravel_app, tmp_path):
    """The deploy sequence `artisan down`, restart qpool, migrate, `artisan
    up`: the app is down when the master starts. Its pool must start paused;
    before, the first children took the queued jobs in the instant before the
    first balance pass saw the app down (review of this session's code). A
    quick handler (the fixture's) pops as soon as a child starts."""
    app = laravel_app
    log = tmp_path / "fixture.log"
    app.artisan("down")
    app.dispatch("MarkerJob", tag="queued-while-down", count=5)
    handler = 'handler = { type = "pipe"; command = ["%s"]; };' % FIXTURE_HANDLER
    master.write_config(laravel_pool(app, extra=handler, env={"FIXTURE_LOG": str(log)}), redis_conf="",
                        qpool="  balance_interval = 0.2;")
    master.start()
    wait_for(lambda: master.pool("app")["state"] == "down", 30, what="the pool to start down")
    master.wait_children("app", 1, 60)
    time.sleep(2)  # the children's first pops, if they were going to take anything
    assert read_fixture_log(log) == [], "a job ran while the app was down"
    app.artisan("up")
    wait_for(lambda: len([l for l in read_fixture_log(log) if l[0] == "job"]) == 5, 60,
             what="the jobs after artisan up")


def test_artisan_down_stops_new_jobs_and_up_resumes_them(master, laravel_app):
    app = laravel_app
    master.write_config(laravel_pool(app) + ",\n" +
                        laravel_pool(app, name="forced", extra='queues = ["urgent"]; force = true;'),
                        redis_conf="", qpool="  balance_interval = 0.2;")
    master.start()
    app.dispatch("MarkerJob", tag="before")
    wait_for(lambda: markers(app, tag="before"), 60, what="a job before down")

    app.artisan("down")
    wait_for(lambda: master.pool("app")["state"] == "down", 10, what="the pool to see the app down")
    st = master.pool("app")
    assert st["waiting"] == "down (maintenance)" and st["maintenance"] is True
    assert master.pool("forced")["state"] == "running"
    text = master.cli("status").stdout
    assert "down (maintenance)" in text
    app.dispatch("MarkerJob", tag="while-down", count=3)
    app.dispatch("MarkerJob", tag="forced", queue="urgent", count=2)
    # the forced pool works through maintenance: once its jobs are done, the
    # other pool has had as long to take one
    wait_for(lambda: len(markers(app, tag="forced")) == 2, 60, what="the force = true pool's jobs")
    wait_for(lambda: master.pool("app")["queues"][0]["ready"] == 3, 10, what="the queue counts")
    assert markers(app, tag="while-down") == []
    assert "its Laravel app is down for maintenance" in master.log()

    app.artisan("up")
    wait_for(lambda: len(markers(app, tag="while-down")) == 3, 60, what="the jobs after php artisan up")
    assert master.pool("app")["state"] == "running" and master.pool("app")["waiting"] is None


def test_an_operator_pause_outlives_maintenance(master, laravel_app):
    app = laravel_app
    master.write_config(laravel_pool(app), redis_conf="", qpool="  balance_interval = 0.2;")
    master.start()
    master.cli("pause", "app")
    app.artisan("down")
    wait_for(lambda: master.pool("app")["maintenance"], 10, what="maintenance seen")
    app.artisan("up")
    wait_for(lambda: not master.pool("app")["maintenance"], 10, what="the app up again")
    st = master.pool("app")
    assert st["state"] == "paused" and st["waiting"] == "paused"
    app.dispatch("MarkerJob", tag="after-up")
    master.cli("continue", "app")
    wait_for(lambda: markers(app, tag="after-up"), 60, what="the job after continue")


def import_horizon(app, *args, user="nobody"):
    """qpool import horizon, as root (the tests run as root): the app is read
    as --user, with a storage directory that user may write."""
    with tempfile.TemporaryDirectory(prefix="qpool-import-") as d:
        os.chmod(d, 0o755)
        storage = pathlib.Path(d) / "storage"
        (storage / "framework" / "bootstrap-cache").mkdir(parents=True)
        subprocess.run(["chown", "-R", "nobody", str(storage)], check=True)
        env = dict(app.env, APP_STORAGE=str(storage))
        return subprocess.run([QPOOL, "import", "horizon", str(app.path)] + (["--user", user] if user else [])
                              + list(args), capture_output=True, text=True, timeout=120, env=env)


def test_import_horizon_gives_a_config_that_runs_the_apps_queues(master, laravel_app):
    app = laravel_app
    res = import_horizon(app, "--env", "testing")
    assert res.returncode == 0, res.stderr
    conf = res.stdout
    # Horizon's merge: the testing environment over the defaults
    assert 'name = "supervisor-1";' in conf and "max_processes = 2;" in conf
    assert 'name = "mail-emails";' in conf and 'name = "mail-notifications";' in conf
    assert 'name = "reports";' in conf and "max_jobs = 500;" in conf
    assert "backoff = [1, 5, 10];" in conf and "emails = 30.0;" in conf
    assert "# Horizon option workers_name" in conf
    conf = conf.replace("qpool = {\n", 'qpool = {\n  pid_file = "%s";\n  control_socket = "%s";\n'
                        '  shutdown_timeout = 10;\n' % (master.pid_file, master.socket), 1)
    master.conf.write_text(conf)
    res = subprocess.run([QPOOL, "check", "-c", str(master.conf)], capture_output=True, text=True,
                         timeout=120, env=app.env)
    assert res.returncode == 0, res.stderr
    assert 'laravel = "%s";' % app.path in res.stdout

    master.start(env=app.env)
    queues = ["default", "emails", "notifications", "reports"]
    for q in queues:
        app.dispatch("MarkerJob", queue=q, tag="q-" + q + "-", count=2)
    for q in queues:
        wait_for(lambda: len(markers(app, tag="q-" + q + "-")) == 2, 60, what="the jobs on " + q)
    st = {p["name"]: p for p in master.status()["pools"]}
    assert st["mail-emails"]["jobs_done"] == 2 and st["reports"]["jobs_done"] == 2


def test_import_horizon_other_environments_and_errors(laravel_app):
    app = laravel_app
    res = import_horizon(app, "--env", "production")
    assert res.returncode == 0, res.stderr
    assert 'auto_strategy = "size";' in res.stdout and "max_processes = 4;" in res.stdout
    assert "balanceCooldown = 1, balanceMaxShift = 2" in res.stdout
    assert 'name = "reports"' not in res.stdout
    res = import_horizon(app, "--env", "staging")
    assert res.returncode == 1 and 'no environment "staging"' in res.stderr
    # reading the app runs its code: root must say as whom (a review found it ran as root)
    res = import_horizon(app, "--env", "production", user=None)
    assert res.returncode == 64 and "--user USER" in res.stderr and "pools = (" not in res.stdout


# ---------------------------------------------------------------- through a php prefix (chroot)

CHROOT_VERSIONS = {"10": "trixie", "13": "sid"}


@contextlib.contextmanager
def app_in_root(version, redis_server):
    """A copy of tests/laravel-app-N and php/ inside the version's Debian
    root (laravel_roots: the version matrix's cached root, built if missing;
    a root that cannot be built fails the test)."""
    root = build_root(CHROOT_VERSIONS[version])
    inner = pathlib.PurePosixPath("/tmp/qpool-setup-" + uuid.uuid4().hex[:12])
    host = pathlib.Path(str(root) + str(inner))
    (host / "data").mkdir(parents=True)
    subprocess.run(["cp", "-rL", str(ROOT / "tests" / ("laravel-app-" + version)), str(host / "app")], check=True)
    subprocess.run(["cp", "-r", str(ROOT / "php"), str(host / "php")], check=True)
    (host / "data" / "db.sqlite").touch()
    env = {"REDIS_PORT": str(redis_server.port), "APP_STORAGE": str(inner / "data" / "storage"),
           "DB_CONNECTION": "sqlite", "DB_DATABASE": str(inner / "data" / "db.sqlite"), "LOG_CHANNEL": "null",
           "MARKER_FILE": str(inner / "data" / "markers.jsonl")}
    try:
        yield version, root, inner, host, env
    finally:
        shutil.rmtree(str(host), ignore_errors=True)


@pytest.fixture(params=sorted(CHROOT_VERSIONS), ids=lambda v: "laravel" + v)
def chroot_app(request, redis_server):
    with app_in_root(request.param, redis_server) as a:
        yield a


@pytest.fixture
def chroot_app_13(redis_server):
    with app_in_root("13", redis_server) as a:
        yield a


def chroot_pool(root, inner, env):
    """A pool that reads the app in the root through a chroot php prefix."""
    return ('{ name = "app"; laravel = "%s"; php = ["/usr/sbin/chroot", "%s", "php"];\n'
            '  php_adapter = "%s"; php_root = "%s"; environment = { %s }; }'
            % (inner / "app", root, inner / "php" / "qpool-handler.php", root,
               " ".join('%s = "%s";' % kv for kv in env.items())))


def test_the_app_is_read_through_a_php_prefix(master, chroot_app):
    version, root, inner, host, env = chroot_app
    pool = chroot_pool(root, inner, env)
    master.write_config(pool, redis_conf="", qpool="  balance_interval = 0.2;")
    res = check(master)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "(Laravel %s." % version in out
    assert "environment (REDIS_PORT)" in origin_line(out, "redis.port")
    # 10 keeps the store's colon, 11+ use cache.prefix verbatim
    assert ('"laravel_cache:"' if version == "10" else '"laravel_cache"') in origin_line(out, "cache_prefix")
    # the maintenance file as the master sees it: under the root
    down = host / "data" / "storage" / "framework" / "down"
    assert '"%s"' % down in origin_line(out, "maintenance (file)")
    assert 'command = ["/usr/sbin/chroot", "%s", "php", "%s", "%s"];' % (
        root, inner / "php" / "qpool-handler.php", inner / "app") in out

    # the pool runs the app's jobs, through the prefix, with nothing about Redis in qpool.conf
    master.start()
    artisan = ["/usr/sbin/chroot", str(root), "sh", "-c", 'cd "$0" && exec php artisan "$@"', str(inner / "app")]
    e = dict(os.environ, **env)
    subprocess.run(artisan + ["fixture:marker", "through-chroot"], env=e, check=True, capture_output=True,
                   timeout=120)
    marks = host / "data" / "markers.jsonl"
    wait_for(lambda: marks.exists() and "through-chroot" in marks.read_text(), 60,
             what="the job run by the adapter in the root")
    # artisan down inside the root pauses the pool on the host
    subprocess.run(artisan + ["down"], env=e, check=True, capture_output=True, timeout=120)
    assert down.exists()
    wait_for(lambda: master.pool("app")["state"] == "down", 10, what="the pool to see the app down")
    subprocess.run(artisan + ["up"], env=e, check=True, capture_output=True, timeout=120)
    wait_for(lambda: master.pool("app")["state"] == "running", 10, what="the pool to see the app up")


def test_the_app_is_read_as_the_pools_user(master, laravel_app, tmp_path):
    """A root master reads the app as the pool's user: an app only root may
    enter (in pytest's 0700 directory) cannot be read as nobody."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch users")
    path = copy_app(tmp_path, "")
    master.write_config(laravel_pool(laravel_app, path=path), redis_conf="")
    assert check(master).returncode == 0
    master.write_config(laravel_pool(laravel_app, path=path, extra='user = "nobody";'), redis_conf="")
    res = check(master)
    assert res.returncode == 78
    assert "not one nobody may enter" in res.stderr and str(path) in res.stderr, res.stderr
    master.write_config(laravel_pool(laravel_app, path=path, extra='user = "no-such-user-qp";'), redis_conf="")
    res = check(master)
    assert res.returncode == 78 and 'user "no-such-user-qp"' in res.stderr, res.stderr


def test_root_never_connects_to_a_socket_the_app_names_that_its_user_cannot_reach(master, laravel_app, tmp_path):
    """The description comes from the pool's user. It named a Unix socket
    that only root can reach (a private Redis), and the root master wrote its
    heartbeat there under the app's prefix (review of this session's code).
    Now such a socket is refused unless the pool's user could connect too."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch users")
    desc = subprocess.run(["php", str(ROOT / "php" / "qpool-handler.php"), "--describe", str(laravel_app.path)],
                          capture_output=True, text=True, timeout=120, env=laravel_app.env)
    assert desc.returncode == 0, desc.stderr
    d = json.loads(desc.stdout)
    private = tempfile.mkdtemp(prefix="qpool-private-")  # 0700, root's
    sock = os.path.join(private, "redis.sock")
    srv = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
                            "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(sock), 10, what="the private redis-server")
        for name in d["redis"]:
            d["redis"][name]["host"] = {"value": None, "source": "config/database.php"}
            d["redis"][name]["port"] = {"value": None, "source": "config/database.php"}
            d["redis"][name]["socket"] = {"value": sock, "source": "config/database.php"}
        public = tempfile.mkdtemp(prefix="qpool-desc-")
        os.chmod(public, 0o755)
        fake = os.path.join(public, "desc.json")
        with open(fake, "w") as f:
            json.dump(d, f)
        os.chmod(fake, 0o644)
        master.write_config(laravel_pool(laravel_app, extra='user = "nobody"; php = ["/bin/sh", "-c", "cat \\"$0\\"", "%s"];'
                                         % fake), redis_conf="")
        res = check(master)
        assert res.returncode == 78, res.stdout + res.stderr
        assert "cannot connect to" in res.stderr and sock in res.stderr, res.stderr
        keys = subprocess.run(["redis-cli", "-s", sock, "--scan"], capture_output=True, text=True).stdout
        assert keys.strip() == "", "qpool wrote into the private Redis: " + keys
    finally:
        srv.terminate()
        srv.wait(10)
        shutil.rmtree(private, ignore_errors=True)


@pytest.mark.skipif("asan" in str(BUILD), reason="valgrind does not run ASan binaries")
def test_a_laravel_pool_is_valgrind_clean(master, laravel_app, tmp_path):
    """The master (describe, apply, maintenance checks, reload, stop) under valgrind;
    PHP runs natively (children are not traced past exec)."""
    app = laravel_app
    vlog = tmp_path / "valgrind.%p.log"
    master.write_config(laravel_pool(app), redis_conf="", qpool="  balance_interval = 0.2;")
    master.logf = open(master.log_path, "ab")
    master.proc = subprocess.Popen(["valgrind", "--error-exitcode=99", "--leak-check=full",
                                    "--show-leak-kinds=definite,indirect", "--errors-for-leak-kinds=definite,indirect",
                                    "--trace-children=no", "-q", "--log-file=%s" % vlog, QPOOL, "run", "-c",
                                    str(master.conf)],
                                   stdout=master.logf, stderr=subprocess.STDOUT, start_new_session=True)
    master.sid = master.proc.pid
    wait_for(lambda: master.listening(), 60, what="the master under valgrind")
    app.dispatch("MarkerJob", tag="vg")
    wait_for(lambda: markers(app, tag="vg"), 60, what="a job")
    app.artisan("down")
    wait_for(lambda: master.pool("app")["state"] == "down", 30, what="down")
    app.artisan("up")
    wait_for(lambda: master.pool("app")["state"] == "running", 30, what="up")
    master.cli("reload")
    master.proc.send_signal(signal.SIGTERM)
    assert master.proc.wait(120) == 0, master.log()
    assert_valgrind_clean(tmp_path, 1, "the master")


def test_maintenance_in_a_redis_cache_store(master, chroot_app_13):
    """Laravel 11+'s cache driver for maintenance mode (APP_MAINTENANCE_DRIVER=cache),
    on the Laravel 13 root (the 10 fixture app pins the file driver): the master
    reads the store's key."""
    version, root, inner, host, env = chroot_app_13
    env = dict(env, APP_MAINTENANCE_DRIVER="cache", APP_MAINTENANCE_STORE="redis")
    pool = chroot_pool(root, inner, env)
    master.write_config(pool, redis_conf="", qpool="  balance_interval = 0.2;")
    res = check(master)
    assert res.returncode == 0, res.stderr
    assert '"laravel_cacheilluminate:foundation:down" on "cache"' in origin_line(res.stdout, "maintenance (cache)")
    master.start()
    artisan = ["/usr/sbin/chroot", str(root), "sh", "-c", 'cd "$0" && exec php artisan "$@"', str(inner / "app")]
    e = dict(os.environ, **env)
    subprocess.run(artisan + ["down"], env=e, check=True, capture_output=True, timeout=120)
    cache = master.redis.client(db=1)
    assert cache.exists("laravel_database_laravel_cacheilluminate:foundation:down")
    assert not (host / "data" / "storage" / "framework" / "down").exists()
    wait_for(lambda: master.pool("app")["state"] == "down", 10, what="the pool to see the app down")
    subprocess.run(artisan + ["up"], env=e, check=True, capture_output=True, timeout=120)
    wait_for(lambda: master.pool("app")["state"] == "running", 10, what="the pool to see the app up")
