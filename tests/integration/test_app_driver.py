"""Pools with app_driver = true (issue 30, item 1): the job is popped and run
by the app's own queue driver in the pool's PHP handler, here Laravel's
`database` driver on SQLite, through Illuminate\\Queue\\Worker exactly as one
pass of `queue:work` does. qpool supervises and records what each attempt
reports. Laravel 8 runs on the host (Debian 12), 10 and 13 in Debian roots
(laravel_roots.py). No timing bound is asserted but the backoff's lower
bounds, which are the semantics under test."""
import json
import re
import sqlite3
import time

from conftest import wait_for
from laravel_roots import argv_conf, laravel_version, version_app  # noqa: F401 (fixtures)

# Laravel's jobs table (the 8.x-13.x `queue:table` migration), made here so
# the fixture apps keep their own migrations.
JOBS_TABLE = """
create table if not exists jobs (id integer primary key autoincrement not null, queue varchar not null,
  payload text not null, attempts integer not null, reserved_at integer, available_at integer not null,
  created_at integer not null);
create index if not exists jobs_queue_index on jobs (queue);
"""

CACHE_PREFIX = {"8": "laravel_cache:", "10": "laravel_cache:", "13": "laravel_cache"}


def use_database_queue(app, retry_after=90, name="database"):
    """The app's copy gets a `database` queue connection (as `laravel new`
    writes it; or one of another name) and its jobs table in the test's own
    SQLite file."""
    conf = app.path / "config" / "queue.php"
    text = conf.read_text()
    text = text.replace("'connections' => [", "'connections' => [\n        '%s' => ['driver' => 'database', "
                        "'table' => 'jobs', 'queue' => 'default', 'retry_after' => %d, 'after_commit' => false],"
                        % (name, retry_after), 1)
    conf.write_text(text)
    con = sqlite3.connect(str(app.db))
    try:
        con.executescript(JOBS_TABLE)
        con.commit()
    finally:
        con.close()


def jobs_left(app):
    return app.table("select id, attempts, reserved_at, available_at from jobs")


def pool(app, extra="", connection="database"):
    return ('{ name = "appq"; queues = ["default"]; processes = 1; cache_prefix = "%s"; %s\n'
            '  queue_connection = "%s"; app_driver = true; tries = 1; sleep = 0.2; job_log = true; %s\n'
            '  handler = { type = "pipe"; command = %s; }; }'
            % (CACHE_PREFIX[app.version.name], app.env_conf(), connection, extra, argv_conf(app.adapter_argv())))


def queue_work_pool(app):
    """The stock pool that runs `php artisan queue:work database` itself (the
    parity tests' reference run)."""
    work = app.version.prefix() + ["php", str(app.app_inner / "artisan"), "queue:work", "database",
                                   "--queue=default", "--sleep=1", "--tries=1", "--timeout=60"]
    return ('{ name = "appq"; queues = ["default"]; processes = 1; %s command = %s; }'
            % (app.env_conf(), argv_conf(work)))


def parity_outcomes(master_factory, redis_server, app, restore, drained, where=""):
    """outcome(app) of queue_work_pool's run and of pool(app)'s, each from
    the rows restore() puts back, once drained() holds."""
    results = []
    for name, conf in (("php", queue_work_pool(app)), ("qpool", pool(app))):
        restore()
        app.markers.write_text("")
        redis_server.client().flushall()
        m = master_factory(redis_server, name)
        m.write_config(conf)
        m.start()
        try:
            wait_for(drained, 90, interval=0.25,
                     what="%s to finish the jobs on Laravel %s%s" % (name, app.version.name, where))
        finally:
            assert m.stop(60) == 0
        results.append(outcome(app))
    return results


def start_pool(master_factory, redis_server, app):
    """A master running pool(app)."""
    m = master_factory(redis_server)
    m.write_config(pool(app))
    m.start()
    return m


def pause_holds_the_job(m, send, held):
    """Pauses appq, then send()s a job: held() stays true while paused; then continues appq."""
    m.cli("pause", "appq")
    wait_for(lambda: all(w.get("state") == "paused" for w in m.pool("appq")["children"]), 30,
             what="the worker to pause")
    send()
    for _ in range(8):
        assert held()
        time.sleep(0.25)
    m.cli("continue", "appq")


def dispatch(app, job, count=1, tag=None, connection="database"):
    args = ["fixture:dispatch", job, "--connection=" + connection, "--count=%d" % count]
    if tag:
        args.append("--tag=" + tag)
    app.artisan(*args)


def test_database_queue_runs_through_the_apps_driver(master_factory, redis_server, version_app):
    app = version_app
    use_database_queue(app)
    dispatch(app, "MarkerJob", count=3, tag="m")
    dispatch(app, "AlwaysFailsJob", tag="f")  # tries 3, backoff [1, 2]: released twice, then failed
    assert len(jobs_left(app)) == 4  # nothing reached Redis: the jobs wait in SQLite

    m = start_pool(master_factory, redis_server, app)
    try:
        wait_for(lambda: not jobs_left(app) and len(app.failed_jobs()) == 1, 90, interval=0.25,
                 what="the database queue to drain on Laravel %s" % app.version.name)
        runs = [x for x in app.read_markers() if "event" not in x]
        # each marker job ran exactly once
        assert sorted(x["tag"] for x in runs if x["job"] == "MarkerJob") == ["m-1", "m-2", "m-3"]
        fails = sorted((x for x in runs if x["job"] == "AlwaysFailsJob"), key=lambda x: x["attempt"])
        assert [x["attempt"] for x in fails] == [1, 2, 3]
        # the job's backoff held each retry back; the database driver counts
        # whole seconds (available_at = the release's second + the backoff)
        assert int(fails[1]["time"]) >= int(fails[0]["time"]) + 1
        assert int(fails[2]["time"]) >= int(fails[1]["time"]) + 2
        hooks = [x for x in app.read_markers() if x.get("event") == "failed_hook"]
        assert [(h["job"], h["message"]) for h in hooks] == [("AlwaysFailsJob", "always fails")]
        row = app.failed_jobs()[0]
        assert row["connection"] == "database" and row["queue"] == "default"
        assert "RuntimeException: always fails" in row["exception"]
        # the queue events queue:work raises, from Laravel's own Worker
        events = {x["event"] for x in app.read_markers() if x.get("event") not in (None, "failed_hook")}
        assert {"Looping", "JobProcessing", "JobProcessed", "JobExceptionOccurred", "JobFailed"} <= events, events
        # nothing went through Redis's queues
        assert not redis_server.client().keys("*queues:default*")

        # qpool saw every attempt: the workers' counters and the job log
        wait_for(lambda: m.pool("appq")["jobs_done"] >= 6, 30, what="qpool status to count the six attempts")
        assert m.pool("appq")["jobs_failed"] >= 1
        def logged():
            log = m.log()
            return [len(re.findall(r"%s\s+App\\Jobs\\(?:MarkerJob|AlwaysFailsJob)" % what, log))
                    for what in ("Processed", "Released", "Failed")]
        wait_for(lambda: logged() == [3, 2, 1], 30, what="the job log's lines")
    finally:
        assert m.stop(60) == 0


def test_pause_stops_asking_and_continue_resumes(master_factory, redis_server, version_app):
    app = version_app
    use_database_queue(app)
    m = start_pool(master_factory, redis_server, app)
    try:
        wait_for(lambda: any(w.get("state") == "idle" for w in m.pool("appq")["children"]), 60,
                 what="the worker to be idle")
        # paused: the job stays in the table, unreserved
        pause_holds_the_job(m, lambda: dispatch(app, "MarkerJob", tag="p"),
                            lambda: [j["reserved_at"] for j in jobs_left(app)] == [None])
        wait_for(lambda: not jobs_left(app), 60, interval=0.25, what="the job to run after continue")
        assert [x["tag"] for x in app.read_markers() if "event" not in x] == ["p"]
    finally:
        assert m.stop(60) == 0


def test_timeout_as_queue_work_does_it(master_factory, redis_server, version_app):
    """TimeoutJob: $timeout = 1, $tries = 2, sleeps 10 s. The handler arms the
    Worker's own SIGALRM handler: attempt 1 is killed and its job stays
    reserved until retry_after (2 s here) expires; attempt 2 would exceed the
    tries, so the Worker fails it before killing the handler (a failed_jobs
    row, the failed() hook), as queue:work does. qpool starts a new handler
    each time and goes on."""
    app = version_app
    use_database_queue(app, retry_after=2)
    dispatch(app, "TimeoutJob", tag="t")
    m = master_factory(redis_server)
    m.write_config(pool(app, "timeout = 30;"))
    m.start()
    try:
        wait_for(lambda: not jobs_left(app) and len(app.failed_jobs()) == 1, 90, interval=0.25,
                 what="the timed-out job to fail on Laravel %s" % app.version.name)
        runs = [x for x in app.read_markers() if "event" not in x]
        assert [(x["job"], x["attempt"]) for x in runs] == [("TimeoutJob", 1), ("TimeoutJob", 2)]
        assert len({x["pid"] for x in runs}) == 2  # each attempt's handler was killed
        hooks = [x for x in app.read_markers() if x.get("event") == "failed_hook"]
        assert [h["job"] for h in hooks] == ["TimeoutJob"]
        # qpool knew which job each killed handler held: both attempts are named
        # timeouts (the second once its handler is gone: the row comes first)
        wait_for(lambda: len(re.findall(r"TimedOut\s+App\\Jobs\\TimeoutJob", m.log())) == 2, 30,
                 what="both attempts logged as timed out")
        assert len(re.findall(r"Processing\s+App\\Jobs\\TimeoutJob", m.log())) == 2
        dispatch(app, "MarkerJob", tag="after")  # the pool goes on with a fresh handler
        wait_for(lambda: not jobs_left(app), 60, interval=0.25, what="a job after the timeouts")
    finally:
        assert m.stop(60) == 0


def laravel_pool(app):
    """A pool that reads everything from the app (`laravel = APP`), whose
    queue connection is `database`, as `laravel new` writes it."""
    v = app.version
    env = app.env_conf().replace("environment = {", 'environment = { QUEUE_CONNECTION = "database";', 1)
    return ('{ name = "fresh"; laravel = "%s"; php = %s; php_adapter = "%s"; %s processes = 1; sleep = 0.2;\n'
            '  %s }'
            % (app.app_inner, argv_conf(v.prefix() + ["php"]), app.work_inner / "php" / "qpool-handler.php",
               'php_root = "%s";' % v.root if v.root else "", env))


def test_check_accepts_a_database_queue_read_from_the_app(master_factory, redis_server, version_app):
    app = version_app
    use_database_queue(app)
    m = master_factory(redis_server)
    m.write_config(laravel_pool(app), redis_conf="")
    res = m.cli("check", check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    line = [x for x in res.stdout.splitlines() if x.strip().startswith("#   app_driver ")]
    assert len(line) == 1 and "runs through the app's driver" in line[0] and '"database"' in line[0], res.stdout
    assert "app_driver = true;" in res.stdout

    m.start()
    try:
        dispatch(app, "MarkerJob", tag="fresh")
        wait_for(lambda: not jobs_left(app), 60, interval=0.25, what="the job of an app read with laravel =")
        assert [x["tag"] for x in app.read_markers() if "event" not in x] == ["fresh"]
        wait_for(lambda: m.pool("fresh")["jobs_done"] == 1, 30, what="qpool status to count the job")
        res = m.cli("status")
        assert "fresh" in res.stdout
    finally:
        assert m.stop(60) == 0


def test_any_connection_name_and_max_jobs(master_factory, redis_server, version_app):
    """A connection of any name the app registers (here "jobs-db", on the
    database driver); max_jobs = 2 replaces the worker, and so its handler,
    after two jobs. A connection the app does not define is logged, and the
    worker keeps asking without a crash loop."""
    app = version_app
    use_database_queue(app, name="jobs-db")
    dispatch(app, "MarkerJob", count=3, tag="n", connection="jobs-db")
    m = master_factory(redis_server)
    m.write_config(pool(app, "max_jobs = 2;", connection="jobs-db"))
    m.start()
    try:
        wait_for(lambda: not jobs_left(app), 60, interval=0.25, what="the jobs of connection jobs-db")
        runs = sorted((x for x in app.read_markers() if "event" not in x), key=lambda x: x["tag"])
        assert [x["tag"] for x in runs] == ["n-1", "n-2", "n-3"]
        assert runs[0]["pid"] == runs[1]["pid"] != runs[2]["pid"]
    finally:
        assert m.stop(60) == 0

    m2 = master_factory(redis_server, "undefined")
    m2.write_config(pool(app, connection="nope"))
    m2.start()
    try:
        wait_for(lambda: len(re.findall("could not pop from queue connection nope", m2.log())) >= 2, 60,
                 what="the undefined connection to be logged")
        assert len(m2.pool("appq")["children"]) == 1 and m2.pool("appq")["crashes"] == 0
    finally:
        assert m2.stop(60) == 0


def test_status_shows_the_running_job_and_stop_waits_for_it(master_factory, redis_server, version_app):
    """LockWaitJob waits for a lock the test holds: meanwhile `qpool status`
    shows the worker busy with it (the handler said which job it popped);
    SIGTERM lets it finish once the lock is given up, then the master exits 0
    and the job is gone from the table."""
    import fcntl
    import signal
    app = version_app
    use_database_queue(app)
    lock = open(str(app.work / "data" / "lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    m = master_factory(redis_server)
    m.write_config(pool(app, "timeout = 0;"), qpool="  shutdown_timeout = 120;\n")
    m.start()
    try:
        app.artisan("fixture:dispatch", "LockWaitJob", "--connection=database", "--tag=w",
                    "--arg=%s" % (app.work_inner / "data" / "lock"))
        wait_for(lambda: any(x.get("job") == "LockWaitJob" for x in app.read_markers()), 60,
                 what="the job to start")

        def busy():
            c = m.pool("appq")["children"]
            return [(x["state"], (x.get("job") or {}).get("name")) for x in c]
        wait_for(lambda: busy() == [("busy", "App\\Jobs\\LockWaitJob")], 30, what="status to show the job")
        m.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "graceful stop" in m.log(), 30, what="the master to begin its graceful stop")
        assert m.proc.poll() is None  # the job in hand holds it
        fcntl.flock(lock, fcntl.LOCK_UN)
        assert m.proc.wait(60) == 0
        assert [x.get("phase") for x in app.read_markers() if x.get("job") == "LockWaitJob"] == [None, "after-lock"]
        assert not jobs_left(app)
    finally:
        lock.close()
        m.stop(60)


def outcome(app):
    ms = app.read_markers()
    runs = sorted((m["job"], m.get("tag"), m["attempt"]) for m in ms if "event" not in m)
    hooks = sorted((m["job"], m.get("tag"), m["class"], m["message"]) for m in ms if m.get("event") == "failed_hook")
    rows = sorted((f["connection"], f["queue"], f["exception"].split(" in /")[0].split("\n")[0])
                  for f in app.failed_jobs())
    return runs, hooks, rows


def test_same_results_as_queue_work_on_the_database_driver(master_factory, redis_server, version_app):
    """The same jobs, run once by `php artisan queue:work database` and once
    by an app_driver pool, from the same SQLite snapshot: the same attempts,
    failed() hooks and failed_jobs rows, and an empty jobs table."""
    import shutil
    app = version_app
    use_database_queue(app)
    dispatch(app, "MarkerJob", count=2, tag="p")
    dispatch(app, "ManualFailJob", tag="manual")
    dispatch(app, "MaxExceptionsJob", tag="maxexc")  # maxExceptions 2, counted in the app's cache
    snapshot = app.db.with_suffix(".snapshot")
    shutil.copyfile(str(app.db), str(snapshot))
    results = parity_outcomes(master_factory, redis_server, app,
                              lambda: shutil.copyfile(str(snapshot), str(app.db)),
                              lambda: not jobs_left(app) and len(app.failed_jobs()) == 2)
    assert results[0] == results[1]
    runs, hooks, rows = results[1]
    assert [r for r in runs if r[0] == "MaxExceptionsJob"] == [("MaxExceptionsJob", "maxexc", 1),
                                                                ("MaxExceptionsJob", "maxexc", 2)]
    assert len(hooks) == 2 and all(r[:2] == ("database", "default") for r in rows)


def test_a_watched_tag_keeps_every_job_of_an_app_driver_pool(master_factory, redis_server, version_app):
    """A watched tag keeps every job on an app_driver pool too (issue 31): its
    workers read the watched set on the pool's Redis. The recent list's
    sample here is 2 records a 10 s pass, so a sample would keep few of 30."""
    app = version_app
    use_database_queue(app)
    r = redis_server.client()
    m = master_factory(redis_server)
    m.write_config(pool(app), qpool="  job_history_size = 2;\n  balance_interval = 10;")
    m.start()
    try:
        assert "watching" in m.cli("monitor", "add", "7").stdout   # every TaggedJob has the tag 7
        m.wait_log(r"watched tags now: 1 ", timeout=60)
        dispatch(app, "TaggedJob", count=30, tag="w")
        wait_for(lambda: not jobs_left(app), 120, interval=0.25, what="the database queue to drain")

        def kept():
            keys = r.keys("*qpool:{qpool-jobs}:tag:7")
            return r.lrange(keys[0], 0, -1) if keys else []
        wait_for(lambda: len(kept()) >= 30, 60, interval=0.5, what="30 records in the watched tag's list")
        tags = sorted(json.loads(x)["tags"][0] for x in kept())
        assert tags == sorted("tagged:w-%d" % i for i in range(1, 31))   # each job once
    finally:
        assert m.stop(60) == 0
