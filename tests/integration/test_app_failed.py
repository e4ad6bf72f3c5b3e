"""`qpool failed ... --app POOL` (issue 30, item 5): an app_driver pool's
failures are in the app's own failer (failed_jobs), and qpool lists, shows,
retries and forgets them through the pool's app agent as `queue:failed`,
`queue:retry` and `queue:forget` do. Laravel 8 on the host (Debian 12; a
Debian 12 root elsewhere) and 13 in the sid root (laravel_roots.py), the
`database` driver on SQLite."""
import json
import subprocess

import pytest

from conftest import QPOOL, wait_for
from laravel_roots import argv_conf, migrated_app, version8_13  # noqa: F401 (fixture)
from test_app_driver import dispatch, jobs_left, pool, start_pool, use_database_queue


@pytest.fixture
def app(version8_13, redis_server, tmp_path):
    yield from migrated_app(version8_13, redis_server.port, tmp_path)


def failed_cli(m, *args, check=True):
    res = subprocess.run([QPOOL, "failed"] + list(args) + ["--app", "appq", "-c", str(m.conf)],
                         capture_output=True, text=True, timeout=120)
    if check:
        assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res


def small_memory_master(master_factory, redis_server, app):
    """A started master whose pool's PHP (its agent too) has a 64M
    memory_limit: a list that read a huge failer whole would die of it."""
    argv = app.adapter_argv()
    at = argv.index("php") + 1
    small = argv[:at] + ["-d", "memory_limit=64M"] + argv[at:]
    m = master_factory(redis_server)
    m.write_config(pool(app).replace(argv_conf(argv), argv_conf(small)))
    m.start()
    return m


def listed(m, *args):
    return json.loads(failed_cli(m, "list", "--json", *args).stdout)


def test_failed_jobs_of_the_apps_failer(master_factory, redis_server, app):
    use_database_queue(app)
    dispatch(app, "ManualFailJob", count=3, tag="f")
    dispatch(app, "MarkerJob", tag="ok")
    m = start_pool(master_factory, redis_server, app)
    try:
        wait_for(lambda: not jobs_left(app) and len(app.failed_jobs()) == 3, 90, interval=0.25,
                 what="three failures in failed_jobs on Laravel %s" % app.version.name)
        rows = {r["uuid"]: r for r in app.failed_jobs()}

        # list: newest first, every row of the failer, as queue:failed has them
        rep = listed(m)
        assert rep["ok"] and rep["pool"] == "appq" and rep["total"] == 3
        assert {f["id"] for f in rep["failed"]} == set(rows)
        assert all(f["class"] == "App\\Jobs\\ManualFailJob" and f["queue"] == "default" and
                   f["connection"] == "database" and "manual failure" in f["exception"] for f in rep["failed"])
        assert [f["failed_at"] for f in rep["failed"]] == sorted((f["failed_at"] for f in rep["failed"]), reverse=True)
        # pages and filters
        first = listed(m, "--limit", "2")
        assert len(first["failed"]) == 2 and first["total"] == 3
        rest = listed(m, "--limit", "2", "--offset", "2")
        assert len(rest["failed"]) == 1
        assert {f["id"] for f in first["failed"] + rest["failed"]} == set(rows)
        assert listed(m, "--class", "App\\Jobs\\MarkerJob")["total"] == 0
        assert listed(m, "--text", "MANUAL FAILURE", "--queue", "default")["total"] == 3
        assert listed(m, "default", "--since", "1h")["total"] == 3
        text = failed_cli(m, "list", "--limit", "2").stdout
        assert "2 of 3 failed jobs in the app's failer (pool appq); more: --offset 2" in text, text

        # show: the exception's lines and the payload
        one = rep["failed"][-1]["id"]
        shown = failed_cli(m, "show", one).stdout
        assert "id:         %s" % one in shown and "RuntimeException: manual failure" in shown
        assert "\n#0 " in shown and "ManualFailJob" in shown.split("payload:", 1)[1]

        # retry: pushed back as queue:retry does; it runs (and fails) again
        command = json.loads(rows[one]["payload"])["data"]["command"]
        tag = [t for t in ("f-1", "f-2", "f-3") if '"%s"' % t in command]
        res = failed_cli(m, "retry", one)
        assert "pushed back %s" % one in res.stdout
        runs = lambda: [x for x in app.read_markers() if "event" not in x and x["job"] == "ManualFailJob"]
        wait_for(lambda: len(runs()) == 4 and len(app.failed_jobs()) == 3, 60, interval=0.25,
                 what="the retried job to run and fail again")
        # that job ran once more, from attempt 1 (attempts reset, as queue:retry)
        assert len(tag) == 1 and [x["attempt"] for x in runs() if x["tag"] == tag[0]] == [1, 1]

        # forget: as queue:forget; an id the failer does not hold says so
        other = rep["failed"][0]["id"]
        res = failed_cli(m, "forget", other, "no-such-job", check=False)
        assert res.returncode == 1 and "forgot %s" % other in res.stdout
        assert "no failed job no-such-job in the app's failer" in res.stderr
        assert other not in {r["uuid"] for r in app.failed_jobs()} and len(app.failed_jobs()) == 2

        # qpool's own store has none of them; flush and filters stay with it
        res = m.cli("failed", "list")
        assert "(no failed jobs)" in res.stdout and "qpool failed list --app appq" in res.stderr
        assert failed_cli(m, "flush", check=False).returncode == 64
        assert failed_cli(m, "retry", "--class", "X", check=False).returncode == 64
        res = subprocess.run([QPOOL, "failed", "list", "--app", "nope", "-c", str(m.conf)], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 1 and "no pool nope" in res.stderr
    finally:
        assert m.stop(60) == 0
    res = failed_cli(m, "list", check=False)  # the master is gone
    assert res.returncode == 2 and "not running" in res.stderr


def park_failed(app, count):
    """count MarkerJobs on a queue no pool takes ("parked"), moved from the
    jobs table into failed_jobs as the failer logs them: their uuids."""
    import sqlite3
    app.artisan("fixture:dispatch", "MarkerJob", "--connection=database", "--count=%d" % count, "--queue=parked")
    con = sqlite3.connect(str(app.db))
    try:
        rows = con.execute("select queue, payload from jobs").fetchall()
        con.executemany("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                        "values (?, 'database', ?, ?, 'RuntimeException: parked', datetime('now'))",
                        [(json.loads(p)["uuid"], q, p) for q, p in rows])
        con.execute("delete from jobs")
        con.commit()
    finally:
        con.close()
    return sorted(json.loads(p)["uuid"] for _, p in rows)


def test_a_slow_retry_stops_in_time_and_loses_nothing(master_factory, redis_server, app):
    """Review freshapp #1: each push takes a second (a slow queue backend),
    so 8 of them outlast the agent's 5 s alarm. Each job is pushed before
    its row is forgotten, and the agent stops before its alarm and says
    which ids it left: every job is in the failer or on its queue, never in
    neither, and asking again finishes the rest."""
    use_database_queue(app)
    uuids = park_failed(app, 8)
    env = app.env_conf()
    conf = pool(app).replace(env, env[:env.rindex("}")] + ' FIXTURE_BOOT_HAZARDS = "slowpush"; };')
    m = master_factory(redis_server)
    m.write_config(conf)
    m.start()

    def held():
        queued = sorted(json.loads(r["payload"])["uuid"] for r in app.table("select payload from jobs"))
        failed = sorted(r["uuid"] for r in app.failed_jobs())
        return queued, failed

    try:
        for _ in range(8):  # at least one job a call: 8 calls at most
            _, failed = held()
            if not failed:
                break
            res = failed_cli(m, "retry", *failed, check=False)
            queued, left = held()
            # nothing lost, nothing twice: each job on the queue or in the failer
            assert sorted(queued + left) == uuids, (res.stdout, res.stderr, queued, left)
            pushed = [ln.split()[-1] for ln in res.stdout.splitlines() if ln.startswith("pushed back ")]
            assert pushed and set(pushed) <= set(queued), (res.stdout, res.stderr)
            for u in left:
                assert "%s not retried" % u in res.stderr, (res.stdout, res.stderr)
            assert res.returncode == (1 if left else 0), (res.stdout, res.stderr)
        queued, failed = held()
        assert queued == uuids and not failed
        assert "app failed-retry of 8 failed jobs on pool appq asked over the control socket, uid" in m.log()
        assert "app failer of pool appq: retried" in m.log()
    finally:
        assert m.stop(60) == 0


SUBCLASS_FAILER = r"""<?php
class AppUuidFailer extends \Illuminate\Queue\Failed\DatabaseUuidFailedJobProvider
{
}
"""


def use_subclass_failer(app):
    """The app's failer: its own subclass of Laravel's database-uuids one
    (an extend: the queue provider binds queue.failer after bootstrap/app.php)."""
    (app.path / "bootstrap" / "app_failer.php").write_text(SUBCLASS_FAILER)
    boot = app.path / "bootstrap" / "app.php"
    boot.write_text(boot.read_text().replace(
        "\nreturn $app;", "\nrequire_once __DIR__.'/app_failer.php';\n"
        "$app->extend('queue.failer', function ($f, $app) { $c = $app['config']['queue.failed']; "
        "return new \\AppUuidFailer($app['db'], $c['database'] ?? null, $c['table']); });\n\nreturn $app;", 1))


@pytest.mark.parametrize("subclass", [False, True], ids=["laravels_failer", "a_subclass"])
def test_a_large_failer_is_paged_not_read_whole(master_factory, redis_server, app, subclass):
    """Review freshapp #3: a failed_jobs table larger than the agent's
    memory_limit (here 400 rows of 200 KB under 64M) is paged in its query:
    a list without a filter reads one page, one with a filter a few rows at
    a time; the failer's all() would read it whole and kill the agent. The
    same for an app's own subclass of Laravel's database failer (it was
    matched by its exact class and read whole)."""
    import sqlite3
    import uuid as uuidlib
    use_database_queue(app)
    if subclass:
        use_subclass_failer(app)
    first = park_failed(app, 1)[0]
    big = "RuntimeException: big\n" + "#0 /srv/app/x.php(1): y()\n" * 8000
    con = sqlite3.connect(str(app.db))
    try:
        payload = con.execute("select payload from failed_jobs").fetchone()[0]
        rows = []
        for _ in range(400):
            u = str(uuidlib.uuid4())
            rows.append((u, payload.replace(first, u), big))
        con.executemany("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                        "values (?, 'database', 'parked', ?, ?, datetime('now'))", rows)
        con.commit()
    finally:
        con.close()
    m = small_memory_master(master_factory, redis_server, app)
    try:
        rep = listed(m)
        assert rep["total"] == 401 and len(rep["failed"]) == 20
        assert rep["failed"][0]["id"] == rows[-1][0]  # newest first
        rep = listed(m, "--offset", "400")
        assert [f["id"] for f in rep["failed"]] == [first]
        rep = listed(m, "--class", "App\\Jobs\\MarkerJob", "--limit", "3")
        assert len(rep["failed"]) == 3 and (rep["total"] == 401 or rep.get("partial")), rep["total"]
        assert listed(m, "parked", "--uuid", first)["failed"][0]["id"] == first
        assert "memory" not in m.log()
        # the count of an unfiltered list stops at 10,000 rows (review late #2)
        con = sqlite3.connect(str(app.db))
        try:
            con.executemany("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                            "values (?, 'database', 'parked', '{}', 'x', datetime('now'))",
                            [(str(uuidlib.uuid4()),) for _ in range(9700)])
            con.commit()
        finally:
            con.close()
        rep = listed(m)
        assert rep["total"] == 10000 and rep.get("partial") and len(rep["failed"]) == 20, rep["total"]
    finally:
        assert m.stop(60) == 0


def test_since_and_until_are_in_the_failers_query(master_factory, redis_server, app):
    """`qpool failed list --app` with --since/--until: a database failer's
    rows far outside the window (more than a day: the query's bounds are
    widened by one) are not sent to the agent (a where on failed_at in its
    query), where the agent read every row and dropped them in PHP. Here 50
    rows of 1.6 MB out of the window, newer ids than those asked for, under
    memory_limit=64M: one chunk of them read would exhaust the agent."""
    import sqlite3
    import uuid as uuidlib
    use_database_queue(app)
    recent = park_failed(app, 3)  # failed_at now
    con = sqlite3.connect(str(app.db))
    try:
        payload = con.execute("select payload from failed_jobs").fetchone()[0]
        old = [str(uuidlib.uuid4()) for _ in range(3)]
        con.executemany("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                        "values (?, 'database', 'parked', ?, 'RuntimeException: old', datetime('now', '-3 days'))",
                        [(u, payload.replace(json.loads(payload)["uuid"], u)) for u in old])
        big = "RuntimeException: big\n" + "#0 /srv/app/x.php(1): y()\n" * 64000
        con.executemany("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                        "values (?, 'database', 'parked', '{}', ?, datetime('now', '-30 hours'))",
                        [(str(uuidlib.uuid4()), big) for _ in range(50)])
        con.commit()
    finally:
        con.close()
    m = small_memory_master(master_factory, redis_server, app)
    try:
        rep = listed(m, "--since", "1h")
        assert sorted(f["id"] for f in rep["failed"]) == recent and rep["total"] == 3 and not rep.get("partial")
        rep = listed(m, "--until", "60h")
        assert sorted(f["id"] for f in rep["failed"]) == sorted(old) and rep["total"] == 3
        rep = listed(m, "parked", "--since", "4d", "--until", "60h", "--text", "RuntimeException: old")
        assert sorted(f["id"] for f in rep["failed"]) == sorted(old) and rep["total"] == 3
        assert "memory" not in m.log()
    finally:
        assert m.stop(60) == 0


SLOW_VIEW = """alter table failed_jobs rename to failed_rows;
create view failed_jobs as select id, uuid, connection, queue, payload, exception,
  fixture_slow(failed_at) as failed_at from failed_rows;"""


def test_a_window_is_scanned_in_id_ranges_and_kept_across_a_dst_fold(master_factory, redis_server, app):
    """Review w5a #1-#3, on --since/--until in a database failer's query:
    a row failed in New York's fall-back hour (01:30 wall clock, read as
    05:30 UTC) is listed by an --until of 06:10 UTC (whose wall clock,
    01:10 the second time, is earlier); a bound past the year 9999 adds no
    condition (its date string compared as text dropped every row); and
    a window that matches none of 40,000 rows, each read slowly (a view,
    a quarter of a millisecond a row), ends as "partial" within the scan's
    budget, one primary key range at a time, where one unbounded statement
    ran into the agent's alarm ("its app agent went away")."""
    import calendar
    import re
    import sqlite3
    import uuid as uuidlib
    use_database_queue(app)
    recent = park_failed(app, 2)
    conf = app.path / "config" / "app.php"
    conf.write_text(re.sub(r"'timezone' => [^,]+,", "'timezone' => 'America/New_York',", conf.read_text(), count=1))
    fold = str(uuidlib.uuid4())
    con = sqlite3.connect(str(app.db))
    try:
        payload = con.execute("select payload from failed_jobs").fetchone()[0]
        con.execute("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                    "values (?, 'database', 'parked', ?, 'RuntimeException: fold', '2026-11-01 01:30:00')",
                    (fold, payload.replace(json.loads(payload)["uuid"], fold)))
        con.commit()
    finally:
        con.close()
    env = app.env_conf()
    m = master_factory(redis_server)
    m.write_config(pool(app).replace(env, env[:env.rindex("}")] + ' FIXTURE_BOOT_HAZARDS = "slowrows"; };'))
    m.start()
    try:
        until = calendar.timegm((2026, 11, 1, 6, 10, 0))
        rep = listed(m, "--since", str(until - 3600), "--until", str(until))
        assert [f["id"] for f in rep["failed"]] == [fold] and rep["total"] == 1, rep
        assert rep["failed"][0]["failed_at"] == calendar.timegm((2026, 11, 1, 5, 30, 0))
        rep = listed(m, "--until", "300000000000")
        assert sorted(f["id"] for f in rep["failed"]) == sorted(recent + [fold]) and rep["total"] == 3, rep
        con = sqlite3.connect(str(app.db))
        try:
            con.executemany("insert into failed_jobs (uuid, connection, queue, payload, exception, failed_at) "
                            "values (?, 'database', 'parked', '{}', 'x', datetime('now'))",
                            [(str(uuidlib.uuid4()),) for _ in range(40000)])
            con.executescript(SLOW_VIEW)
            con.commit()
        finally:
            con.close()
        rep = json.loads(failed_cli(m, "list", "--json", "--until", "30d", check=False).stdout or "{}")
        assert rep.get("ok") and rep["failed"] == [] and rep["total"] == 0 and rep.get("partial"), (rep, m.log()[-2000:])
    finally:
        assert m.stop(60) == 0


def agent_pid(m):
    """The pid of the app agent under master m (its title says so), or None."""
    import os
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if not f.read().startswith(b"qpool agent: pool appq"):
                    continue
            pid = int(d)
            while pid > 1:  # one of this master's descendants (xdist runs other masters)
                with open("/proc/%d/stat" % pid) as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
                if pid == m.proc.pid:
                    return int(d)
        except (OSError, ValueError, IndexError):
            continue
    return None


def test_an_agent_killed_mid_retry_loses_nothing_and_is_said_at_once(master_factory, redis_server, app):
    """Review freshapp #1 and #4: the agent killed while it pushes (a reload,
    its alarm) leaves every job in the failer or on its queue; and its
    client hears "went away" at once, although the next balance pass (60 s
    here) is later than the CLI waits (40 s)."""
    import os
    import signal
    use_database_queue(app)
    uuids = park_failed(app, 8)
    env = app.env_conf()
    m = master_factory(redis_server)
    m.write_config(pool(app).replace(env, env[:env.rindex("}")] + ' FIXTURE_BOOT_HAZARDS = "slowpush"; };'),
                   qpool="balance_interval = 60;")
    m.start()
    try:
        wait_for(lambda: agent_pid(m), 60, interval=0.25, what="the pool's app agent")
        cli = subprocess.Popen([QPOOL, "failed", "retry"] + uuids + ["--app", "appq", "-c", str(m.conf)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: app.table("select id from jobs"), 30, interval=0.05, what="the first push")
            os.kill(agent_pid(m), signal.SIGKILL)
            out, err = cli.communicate(timeout=35)
        finally:
            cli.kill()
        assert cli.returncode == 1 and "its app agent went away before it answered" in err, (out, err)
        queued = [json.loads(r["payload"])["uuid"] for r in app.table("select payload from jobs")]
        failed = [r["uuid"] for r in app.failed_jobs()]
        assert set(queued) | set(failed) == set(uuids), (queued, failed)  # at worst one in both: never in neither
        assert len(queued) + len(failed) <= len(uuids) + 1
    finally:
        assert m.stop(60) == 0
