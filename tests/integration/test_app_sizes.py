"""Balancing app_driver pools by their queues' sizes (issue 30, item 2): the
pool's app agent (php/src/Agent.php) reads each queue's size through the
app's own queue connection every balance pass (op `sizes`), and the balancer
uses them instead of Redis's LLENs; `qpool status` shows them. An agent that
answers an error leaves the pool at its size, logged once. The fixture app
of the host (Laravel 8 on Debian 12), QUEUE_CONNECTION=database on SQLite as
test_app_driver.py runs it. No timing is asserted: each wait is for a state."""
import json
import sqlite3
import uuid

import pytest

from conftest import wait_for
from laravel_roots import HOST_VERSIONS, Version, argv_conf, sqlite_exec, version_app  # noqa: F401 (fixtures)
from test_app_driver import CACHE_PREFIX, jobs_left, use_database_queue

HOST = HOST_VERSIONS


@pytest.fixture(scope="module", params=HOST, ids=lambda v: "laravel" + v)
def laravel_version(request):
    """Only the version that runs on the host: the roots' versions are
    test_app_driver.py's (their driver's sizes are the same `size()`)."""
    return Version(request.param, None)


def pool(app, extra=""):
    return ('{ name = "appq"; queues = ["default"]; balance = "auto"; min_processes = 1; max_processes = 4;\n'
            '  auto_strategy = "size"; cache_prefix = "%s"; %s\n'
            '  queue_connection = "database"; app_driver = true; tries = 1; sleep = 0.2; %s\n'
            '  handler = { type = "pipe"; command = %s; }; }'
            % (CACHE_PREFIX[app.version.name], app.env_conf(), extra, argv_conf(app.adapter_argv())))


def start(master, app, extra=""):
    master.write_config(pool(app, extra), qpool="  balance_interval = 0.5;")
    master.start()


def dispatch(app, count, ms, delay=0):
    app.artisan("fixture:dispatch", "SleepJob", "--connection=database", "--count=%d" % count,
                "--delay=%d" % delay, "--arg=%d" % ms, "--tag=s")


def ready(master):
    p = master.pool("appq")
    if not p["counts_fresh"]:
        return None
    return [q["ready"] for q in p["queues"] if q["name"] == "default"][0]


def replies(master):
    return (master.pool("appq").get("agent") or {}).get("replies", 0)


def test_a_database_backlog_grows_the_pool_and_status_shows_its_size(master_factory, redis_server, version_app):
    app = version_app
    use_database_queue(app)
    dispatch(app, 30, 1000)
    m = master_factory(redis_server)
    start(m, app)
    try:
        p = wait_for(lambda: (lambda p: p if p.get("agent", {}).get("state") == "running" else None)(
            m.pool("appq")), 60, what="the pool's app agent")
        assert p["counts_from"] == "app agent" and p["agent"]["reads"] == "queue sizes"
        seen = wait_for(lambda: (lambda r: r if r else None)(ready(m)), 60, what="the queue's size from the agent")
        assert 0 < seen <= 30
        wait_for(lambda: m.pool("appq")["target"] > 1, 60, what="the pool to grow above min_processes")
        m.wait_log(r"pool appq: target 1 -> [234] \(ready [0-9]+", 30)
        text = m.cli("status").stdout
        assert "queue default" in text and "reads Laravel's queue sizes through the app" in text, text
        # the sizes follow the table: the jobs run, the queue empties, status says 0
        wait_for(lambda: not jobs_left(app), 120, interval=0.25, what="the 30 jobs to run")
        wait_for(lambda: ready(m) == 0, 30, what="status to show the empty queue")
        assert len([x for x in app.read_markers() if x.get("job") == "SleepJob"]) >= 30
    finally:
        assert m.stop(60) == 0


def test_an_agent_error_keeps_the_pool_at_its_size(master_factory, redis_server, version_app):
    """Delayed jobs hold a backlog nobody pops (Laravel 8's and 10's database
    size() counts them): the pool goes to max. With the jobs table gone the
    agent answers errors: the pool keeps its size although the queue it had
    is gone, and one line says so; with the table back (empty) it shrinks."""
    app = version_app
    if app.version.name not in ("8", "10"):
        pytest.skip("Laravel %s's database driver tells delayed jobs apart" % app.version.name)
    use_database_queue(app)
    dispatch(app, 30, 10, delay=3600)
    m = master_factory(redis_server)
    start(m, app, "scale_down_delay = 0;")
    try:
        wait_for(lambda: ready(m) == 30, 90, what="the 30 delayed jobs in the queue's size")
        wait_for(lambda: m.pool("appq")["target"] == 4, 60, what="the pool at max_processes")
        logged = m.count_log(r"no queue sizes from its app agent")
        con = sqlite3.connect(str(app.db))
        try:
            con.execute("delete from jobs")
            con.execute("alter table jobs rename to jobs_away")
            con.commit()
        finally:
            con.close()
        m.wait_log(r"pool appq: no queue sizes from its app agent \(it says: .*no such table", 60)
        assert not m.pool("appq")["counts_fresh"]
        after = replies(m)
        wait_for(lambda: replies(m) >= after + 6, 60, what="six more answers of the agent")
        p = m.pool("appq")
        assert p["target"] == 4 and not p["counts_fresh"], p
        assert m.count_log(r"no queue sizes from its app agent") == logged + 1  # once
        assert m.count_log(r"pool appq: target 4 ->") == 0
        sqlite_exec(app.db, "alter table jobs_away rename to jobs")
        m.wait_log(r"pool appq: queue sizes from its app agent again", 60)
        wait_for(lambda: m.pool("appq")["target"] == 1, 60, what="the pool back at min on an empty queue")
    finally:
        assert m.stop(60) == 0


def push_copies(app, job_sql_row, n):
    """n copies of one jobs row (its payload with a fresh uuid each), in one
    transaction: a backlog made in a moment, as a burst of dispatches."""
    payload = json.loads(job_sql_row["payload"])
    con = sqlite3.connect(str(app.db), timeout=60)
    try:
        con.executemany("insert into jobs (queue, payload, attempts, reserved_at, available_at, created_at) "
                        "values (?, ?, 0, null, ?, ?)",
                        [("default", json.dumps(dict(payload, uuid=str(uuid.uuid4()))), job_sql_row["available_at"],
                          job_sql_row["created_at"]) for _ in range(n)])
        con.commit()
    finally:
        con.close()


def test_a_backlog_of_2000_takes_the_pool_from_1_to_its_max(master_factory, redis_server, version_app):
    """Issue 30's balancing acceptance: 2,000 jobs waiting in the database
    queue when the master starts take the auto pool from min_processes (1)
    to max_processes (4), every handler up. How long it takes is measured by
    bench/run.py --only database (docs/benchmarks.md), not asserted here."""
    app = version_app
    use_database_queue(app)
    dispatch(app, 1, 50)
    row = app.table("select payload, available_at, created_at from jobs")[0]
    push_copies(app, row, 1999)
    assert len(jobs_left(app)) == 2000
    m = master_factory(redis_server)
    start(m, app)
    try:
        m.wait_log(r"pool appq: target 1 -> 4 \(ready [0-9]+", 90)
        wait_for(lambda: (lambda p: p if p["target"] == 4 and p["workers"] == 4 and
                          p["busy"] + p["idle"] == 4 else None)(m.pool("appq")), 90,
                 what="four handlers up in the pool")
        assert m.pool("appq")["counts_from"] == "app agent"
    finally:
        con = sqlite3.connect(str(app.db), timeout=60)
        try:
            con.execute("delete from jobs where reserved_at is null")
            con.commit()
        finally:
            con.close()
        assert m.stop(60) == 0
