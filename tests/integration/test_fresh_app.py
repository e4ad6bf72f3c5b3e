"""A fresh app (issue 30, "A fresh app"): a Laravel 13 app with exactly the
settings `laravel new` writes (tests/laravel-app-13-fresh: QUEUE_CONNECTION=
database, CACHE_STORE=database, DB_CONNECTION=sqlite on database/database.sqlite,
the default migrations, no config/ of its own so the framework's defaults
apply, the Redis settings untouched) passes `qpool check` with only
`laravel = APP` in its pool, saying where each value came from, and runs its
jobs through its own database driver with no edit to the app: a job runs, a
failing one lands in the app's failed_jobs. qpool's own state is on the Redis
that qpool.conf names. Laravel 13 runs in the Debian sid root
(laravel_roots.py)."""
import hashlib
import os
import pathlib
import subprocess
import uuid

import pytest

from conftest import HOST_DIST, QPOOL, ROOT, wait_for
from laravel_roots import RELEASES, Version, argv_conf, build_root, sqlite_rows

FIXTURE = ROOT / "tests" / "laravel-app-13-fresh"
# the test's own settings never reach the app: it reads its .env alone
SCRUB = ("REDIS_", "APP_", "DB_", "CACHE_", "QUEUE_", "LOG_", "MARKER_", "QPOOL_", "SESSION_", "MAIL_", "AWS_")


@pytest.fixture(scope="module")
def laravel13():
    dist = RELEASES["13"][0]
    v = Version("13", None if dist == HOST_DIST else build_root(dist))
    v.mount_proc()
    try:
        yield v
    finally:
        v.umount_proc()


class FreshApp:
    """A copy of the fresh app (links followed) in the root, made as `laravel
    new` leaves it: database/database.sqlite created and migrated."""

    def __init__(self, version, host_tmp):
        self.version = version
        if version.root:
            self.work_inner = pathlib.PurePosixPath("/tmp/qpool-fresh-" + uuid.uuid4().hex[:12])
        else:
            self.work_inner = pathlib.PurePosixPath(str(host_tmp / "fresh"))
        self.work = version.host(self.work_inner)
        self.work.mkdir(parents=True)
        subprocess.run(["cp", "-rL", str(FIXTURE), str(self.work / "app")], check=True)
        subprocess.run(["cp", "-r", str(ROOT / "php"), str(self.work / "php")], check=True)
        self.path = self.work / "app"
        self.app_inner = self.work_inner / "app"
        self.db = self.path / "database" / "database.sqlite"
        self.db.touch()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
        self.artisan("migrate", "--force")

    def artisan(self, *args):
        cmd = self.version.prefix() + ["sh", "-c", 'cd "$0" && exec php artisan "$@"', str(self.app_inner)]
        res = subprocess.run(cmd + list(args), env=self.env, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, "artisan %s: %s %s" % (args, res.stdout, res.stderr)
        return res

    def table(self, sql):
        return sqlite_rows(self.db, sql)

    def visits(self):
        try:
            return (self.path / "storage" / "app" / "private" / "visits.log").read_text().split("\n")
        except FileNotFoundError:
            return []

    def code(self):
        """Every file of the app but what it writes at run time (storage,
        its SQLite file, the bootstrap cache), with its hash."""
        out = {}
        for f in sorted(self.path.rglob("*")):
            rel = f.relative_to(self.path).as_posix()
            if f.is_file() and not rel.startswith(("storage/", "bootstrap/cache/", "database/database.sqlite")):
                out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
        return out

    def pool(self):
        """Nothing but where the app is and how to run PHP in the root."""
        v = self.version
        return ('{ name = "app"; laravel = "%s"; php = %s; php_adapter = "%s"; %s }'
                % (self.app_inner, argv_conf(v.prefix() + ["php"]), self.work_inner / "php" / "qpool-handler.php",
                   'php_root = "%s";' % v.root if v.root else ""))

    def remove(self):
        subprocess.run(["rm", "-rf", str(self.work)], check=False)


@pytest.fixture
def fresh_app(laravel13, tmp_path):
    app = FreshApp(laravel13, tmp_path)
    try:
        yield app
    finally:
        app.remove()


def test_the_fixture_is_as_laravel_new_makes_it():
    env = dict(line.split("=", 1) for line in (FIXTURE / ".env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert (env["QUEUE_CONNECTION"], env["CACHE_STORE"], env["DB_CONNECTION"]) == ("database", "database", "sqlite")
    assert "DB_DATABASE" not in env and env["REDIS_HOST"] == "127.0.0.1" and env["REDIS_PORT"] == "6379"
    assert not (FIXTURE / "config").exists()  # the framework's own config files apply


def test_check_and_run_a_fresh_app(master_factory, redis_server, fresh_app):
    app = fresh_app
    before = app.code()
    app.artisan("visits:record", "home", "--count=3")
    app.artisan("reports:send", "ops@example.com")
    assert len(app.table("select id from jobs")) == 4

    m = master_factory(redis_server)
    m.write_config(app.pool())
    res = m.cli("check", check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    origins = {}
    for line in res.stdout.splitlines():
        parts = line.strip().split(None, 2)
        if len(parts) == 3 and parts[0] == "#" and not parts[1].startswith("read"):
            origins[parts[1]] = parts[2]
    # where each value came from: the app's .env, or the framework's defaults
    assert origins["queue_connection"].startswith('"database"') and origins["queue_connection"].endswith(
        ".env (QUEUE_CONNECTION)"), res.stdout
    assert origins["cache_store"].startswith('"database"') and origins["cache_store"].endswith(
        ".env (CACHE_STORE)"), res.stdout
    assert "runs through the app's driver" in origins["app_driver"], res.stdout
    assert origins["retry_after"].startswith("90") and "framework's config/queue.php" in origins["retry_after"]
    assert "app agent" in origins["signals"], res.stdout  # queue:restart read through the database cache
    assert "maxExceptions counters in that store" in origins["signals"]
    assert "the app's driver pops" in origins["block_for"], res.stdout
    assert "app_driver = true;" in res.stdout and 'queue_connection = "database";' in res.stdout

    m.start()
    try:
        wait_for(lambda: not app.table("select id from jobs") and len(app.table("select id from failed_jobs")) == 1,
                 90, interval=0.25, what="the fresh app's database queue to drain")
        assert sorted(x.split()[0] for x in app.visits() if x) == ["home-1", "home-2", "home-3"]
        row = app.table("select * from failed_jobs")[0]
        assert (row["connection"], row["queue"]) == ("database", "default")
        assert "RuntimeException: report server down for ops@example.com" in row["exception"]
        assert "App\\\\Jobs\\\\SendReport" in row["payload"]
        assert "SendReport" in app.artisan("queue:failed").stdout  # the app's own view of its failer
        # its cache is the database store, as the app left it
        assert [r["value"] for r in app.table("select value from cache where key like '%visits'")] == ["i:3;"]

        app.artisan("visits:record", "later")  # a job dispatched while qpool runs
        wait_for(lambda: "later-1" in " ".join(app.visits()), 60, interval=0.25, what="a job dispatched later")
        wait_for(lambda: m.pool("app")["jobs_done"] >= 5, 30, what="qpool status to count the five jobs")
        assert m.pool("app")["jobs_failed"] == 1
        assert not redis_server.client().keys("*queues:default*")  # no job went through Redis
    finally:
        assert m.stop(60) == 0
    assert app.code() == before  # qpool wrote nothing into the app


HORIZON = """<?php
// config/horizon.php as `horizon:install` publishes it, its connection set to the app's queue connection
return [
    'prefix' => 'laravel_horizon:',
    'waits' => ['database:default' => 60],
    'defaults' => [
        'supervisor-1' => ['connection' => 'database', 'queue' => ['default'], 'balance' => 'auto',
            'autoScalingStrategy' => 'time', 'maxProcesses' => 1, 'maxTime' => 0, 'maxJobs' => 0,
            'memory' => 128, 'tries' => 1, 'timeout' => 60, 'nice' => 0],
    ],
    'environments' => [
        'production' => ['supervisor-1' => ['maxProcesses' => 10]],
        'local' => ['supervisor-1' => ['maxProcesses' => 3]],
    ],
];
"""


def test_import_horizon_of_a_database_connection(master_factory, redis_server, fresh_app):
    """qpool import horizon on a fresh app whose config/horizon.php names the
    database connection: a pool that runs through the app's driver, one job
    a pop (the defaults' prefetch would only draw a warning), which passes
    qpool check without a warning and runs the app's jobs."""
    app = fresh_app
    (app.path / "config").mkdir()
    (app.path / "config" / "horizon.php").write_text(HORIZON)
    v = app.version
    res = subprocess.run([QPOOL, "import", "horizon", str(app.app_inner),
                          "--user", "root", "--php", " ".join(v.prefix() + ["php"]),
                          "--adapter", str(app.work_inner / "php" / "qpool-handler.php")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    imported = res.stdout
    assert 'queue_connection = "database";' in imported and "prefetch = 1;" in imported, imported
    assert 'uses the "database" driver' in imported

    m = master_factory(redis_server)
    m.write_config("")
    conf = m.conf.read_text()
    paths = 'php = %s; php_adapter = "%s"; %s' % (argv_conf(v.prefix() + ["php"]),
                                                  app.work_inner / "php" / "qpool-handler.php",
                                                  'php_root = "%s";' % v.root if v.root else "")
    body = imported.replace("defaults = {\n", "defaults = {\n  %s\n" % paths, 1)
    body = body.replace("qpool = {\n", "qpool = {\n  pid_file = \"%s\"; control_socket = \"%s\";\n"
                        % (m.pid_file, m.socket), 1)
    m.conf.write_text(body + conf[conf.index("redis = {"):conf.index("defaults = {")])
    res = m.cli("check", check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "warning" not in res.stderr + res.stdout, res.stderr
    assert "app_driver = true;" in res.stdout and "max_processes = 3;" in res.stdout

    app.artisan("visits:record", "horizon")
    m.start()
    try:
        wait_for(lambda: not app.table("select id from jobs"), 60, interval=0.25, what="the imported pool's job")
        assert [x.split()[0] for x in app.visits() if x] == ["horizon-1"]
    finally:
        assert m.stop(60) == 0
