"""Chaos with the `database` queue driver on a real SQL server (issue 30):
an app_driver pool (3 workers, retry_after 4 s) of the host's Laravel works
off 300 jobs of 100 ms from the jobs table of a MariaDB or PostgreSQL server
(the seed draws which) while the test SIGKILLs handlers (mostly mid-job),
the zygote and workers, and restarts the database server once (stopped, or
killed, as the seed draws; away for 3 s) with jobs still waiting. Then: the jobs
table is empty, every job finished its work at least once (SleepThenMarkJob
writes its marker after its sleep, so a job killed mid-run has none until it
runs again after retry_after: delivery is at least once), no job that
should succeed is in failed_jobs, and the jobs that always throw are there,
each with its failed() hook. The events come at points of progress (how many
jobs have run), not at times, so a loaded machine sees the same chaos.

Env: QPOOL_SQL_CHAOS_JOBS (default 300), QPOOL_SQL_CHAOS_SEED (default
random, printed and named in every failure), QPOOL_SQL_CHAOS_SERVER
(mariadb or postgres; default: the seed's), QPOOL_SQL_CHAOS_LARAVEL (8, 10
or 13; default: the host's own Laravel, no root)."""
import json
import os
import random
import re
import signal
import time

import pytest

from conftest import cmdline, proc_stats, wait_for
from laravel_roots import VERSIONS, Version, argv_conf, build_root
from sqlapps import HOST_VERSION, make_sql_app
from sqlservers import server_fixture
from test_app_driver import CACHE_PREFIX

JOBS = int(os.environ.get("QPOOL_SQL_CHAOS_JOBS", "300"))
FAILING = 3
SEED = int(os.environ.get("QPOOL_SQL_CHAOS_SEED") or random.SystemRandom().randrange(1 << 32))
KIND = os.environ.get("QPOOL_SQL_CHAOS_SERVER") or ("mariadb", "postgres")[SEED % 2]
LARAVEL = os.environ.get("QPOOL_SQL_CHAOS_LARAVEL") or HOST_VERSION
DOWN = 3.0  # seconds the database is away: handlers' pops fail meanwhile
# the events, spread over the run's progress: the database restart once
EVENTS = ["handler"] * 8 + ["worker"] * 3 + ["zygote"] * 2 + ["database"]


@pytest.fixture
def chaos_server(tmp_path):
    yield from server_fixture(KIND, tmp_path)


def logged_pids(m, pattern):
    return [int(p) for p in re.findall(pattern, m.log())]


def pick(m, what, rng):
    """A live victim of the kind, from the master's log: a handler (the
    app agent is none), the zygote, or a worker. A zygote's handlers outlive
    it, so the process tree does not tell them."""
    pattern = {"handler": r"qpool-handler\[(\d+)\]: Laravel [\d.]+ (?:forked by zygote|booted from)",
               "zygote": r"started its zygote \(pid (\d+)",
               "worker": r"started chaos#\d+ \(pid (\d+)\)"}[what]
    cands = sorted(set(logged_pids(m, pattern)) & ours(m))
    return rng.choice(cands) if cands else None


def ours(m):
    """The live processes of the master's session that run qpool (workers)
    or its handler (handlers, the zygote): a PID from the log may since have
    been reused by another test's process (PIDs wrap quickly here)."""
    return {pid for pid, state, _, _, sess in proc_stats()
            if sess == m.proc.pid and state != "Z" and "qpool" in cmdline(pid)}


def kill_victim(m, what, rng, why):
    """SIGKILL a live victim of the kind; its pid, or None if it went away."""
    victim = wait_for(lambda: pick(m, what, rng), 60, what="a %s to kill (%s)" % (what, why))
    if victim not in ours(m):  # checked again right before the kill
        return None
    print("%s kill %s %d" % (time.strftime("%H:%M:%S"), what, victim))
    try:
        os.kill(victim, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return victim


def pool_conf(app):
    return ('{ name = "chaos"; queues = ["default"]; processes = 3; cache_prefix = "%s"; %s\n'
            '  queue_connection = "database"; app_driver = true; tries = 50; sleep = 0.2; timeout = 120;\n'
            '  handler = { type = "pipe"; command = %s; }; }'
            % (CACHE_PREFIX[app.version.name], app.env_conf(), argv_conf(app.adapter_argv())))


def read_markers(app):
    """The app's markers, read while handlers append (and die) beside us: a
    last line without its newline is still being written, and a line a
    SIGKILL tore (its job runs again) is skipped, keeping a whole record
    appended after it on the same line."""
    try:
        with open(app.markers, "rb") as f:
            lines = f.read().split(b"\n")[:-1]
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        for i in [0] + [j for j in range(1, len(line)) if line.startswith(b'{"', j)]:
            try:
                out.append(json.loads(line[i:]))
                break
            except ValueError:
                continue
    return out


def done_tags(app, job="SleepThenMarkJob"):
    """Tags of the jobs that finished their work (the marker comes after it)."""
    return {x["tag"] for x in read_markers(app) if x.get("job") == job and "event" not in x}


def test_no_job_lost_when_handlers_zygote_workers_and_the_database_die(master_factory, redis_server,
                                                                      chaos_server, tmp_path):
    rng = random.Random(SEED)
    why = "seed %d (QPOOL_SQL_CHAOS_SEED), %s, %d jobs" % (SEED, KIND, JOBS)
    print(why)
    version = Version(LARAVEL, build_root(VERSIONS[LARAVEL][0]) if VERSIONS[LARAVEL][0] else None)
    version.mount_proc()
    try:
        run_chaos(master_factory, redis_server, chaos_server, tmp_path, version, rng, why)
    finally:
        version.umount_proc()


def run_chaos(master_factory, redis_server, chaos_server, tmp_path, version, rng, why):
    app = make_sql_app(version, redis_server, tmp_path, chaos_server, retry_after=4)
    app.artisan("fixture:dispatch", "SleepThenMarkJob", "--connection=database", "--count=%d" % JOBS, "--tag=c",
                "--arg=100", timeout=300)
    app.artisan("fixture:dispatch", "AlwaysFailsJob", "--connection=database", "--count=%d" % FAILING,
                "--tag=f")
    want = {"c-%d" % i for i in range(1, JOBS + 1)}
    events = list(EVENTS)
    rng.shuffle(events)
    # the database restart in the first half, so that many jobs still wait for it
    events.remove("database")
    events.insert(rng.randrange(len(EVENTS) // 2), "database")
    # event i comes once (i + 1) / (len(events) + 2) of the jobs have finished
    marks = [JOBS * (i + 1) // (len(events) + 2) for i in range(len(events))]
    done = {}
    m = master_factory(redis_server)
    m.write_config(pool_conf(app))
    m.start()
    try:
        while events:
            ran = len(done_tags(app))
            if ran < marks[0]:
                wait_for(lambda: len(done_tags(app)) >= marks[0], 180, interval=0.05,
                         what="%d jobs to run (%s; events so far %s)" % (marks[0], why, done))
            what = events.pop(0)
            marks.pop(0)
            if what == "database":
                kill = rng.random() < 0.5
                left = len(app.jobs())  # > 0 but for a long wait for the victim before (no failure)
                print("%s database %s, %d jobs left" % (time.strftime("%H:%M:%S"), "killed" if kill else "stopped",
                                                        left))
                chaos_server.restart(kill=kill, down=DOWN)
                print("%s database back" % time.strftime("%H:%M:%S"))
                done["database"] = "killed" if kill else "stopped"
                continue
            if kill_victim(m, what, rng, why):
                done[what] = done.get(what, 0) + 1
        wait_for(lambda: not app.jobs() and len(app.failed_jobs()) >= FAILING, 240, interval=0.5,
                 what="the jobs table to drain (%s; events %s)" % (why, done))
        assert m.proc.poll() is None, "the master died (%s)" % why
        missing = want - done_tags(app)
        assert not missing, "jobs lost (%s): %s" % (why, sorted(missing)[:20])
        failed = app.failed_jobs()
        wrong = [f for f in failed if "AlwaysFailsJob" not in f["payload"]]
        assert not wrong, "jobs failed that should have run (%s): %s" % (why, [f["exception"][:300] for f in wrong])
        tags = sorted(re.search(r'tag\\?";s:\d+:\\?"(f-\d+)', f["payload"]).group(1) for f in failed)
        assert sorted(set(tags)) == ["f-%d" % i for i in range(1, FAILING + 1)], (why, tags)
        hooks = {x["tag"] for x in read_markers(app) if x.get("event") == "failed_hook"}
        assert hooks == set(tags), (why, hooks)
        assert done.get("handler", 0) >= 1 and done.get("worker", 0) >= 1 and done.get("zygote", 0) >= 1, done
        assert "database" in done, done
        print("events: %s; markers %d for %d jobs" % (done, len(read_markers(app)), JOBS))
    finally:
        assert m.stop(120) == 0, why
        app.remove()
