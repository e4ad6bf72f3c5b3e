"""app_driver pools on `beanstalkd` (issue 30): a real beanstalkd (Debian's
package, beanstalk.py) and the app's own driver, Laravel's BeanstalkdQueue
over Debian's php-pda-pheanstalk 4.0.x, on the host's Laravel (the version
that package fits: 8 on Debian 12, 10 on 13). The same jobs run once under
`php artisan queue:work beanstalkd` and once in an app_driver pool, with
the same results; the pool's app agent reads ready, delayed and reserved
from the tube's stats, and `balance = "auto"` grows the pool on a backlog;
pause and continue stop and resume the pops; a restart keeps the jobs. No
timing is asserted but the backoff's lower bounds, which are the semantics
under test."""
import json
import re
import socket
import subprocess

import pytest

from beanstalk import Beanstalkd, beanstalkd  # noqa: F401 (fixture)
from conftest import ROOT, wait_for
from laravel_roots import HOST_VERSIONS, Version, argv_conf, sqlite_exec, version_app  # noqa: F401 (fixtures)
from test_app_driver import CACHE_PREFIX, pause_holds_the_job

HOST = HOST_VERSIONS


@pytest.fixture(scope="module", params=HOST, ids=lambda v: "laravel" + v)
def laravel_version(request):
    """Only the host's Laravel (8 on Debian 12, 10 on Debian 13), whose
    release's php-pda-pheanstalk (4.0.x) is the client it wants; the roots
    of the version matrix do not install it."""
    return Version(request.param, None)


PHEANSTALK = """
if (! class_exists('Pheanstalk\\\\Pheanstalk')) {
    foreach (['Pda/Pheanstalk/autoload.php', 'Pheanstalk/autoload.php'] as $f) {
        if (stream_resolve_include_path($f)) {
            require_once $f;
            break;
        }
    }
}
"""


def use_beanstalkd_queue(app, srv, retry_after=90):
    """The app's copy gets a `beanstalkd` connection as Laravel's skeleton
    writes it, on the test's server; and loads Debian's pheanstalk, as
    Composer's autoloader would once the app requires pda/pheanstalk
    (Debian's Illuminate autoloader looks for it under Pda/Pheanstalk/, but
    php-pda-pheanstalk installs Pheanstalk/)."""
    conf = app.path / "config" / "queue.php"
    text = conf.read_text()
    text = text.replace("'connections' => [", "'connections' => [\n        'beanstalkd' => ['driver' => 'beanstalkd', "
                        "'host' => '127.0.0.1', 'port' => %d, 'queue' => 'default', 'retry_after' => %d, "
                        "'block_for' => 0, 'after_commit' => false]," % (srv.port, retry_after), 1)
    conf.write_text(text)
    autoload = app.path / "vendor" / "autoload.php"  # the fixture's stand-in for Composer's
    if not autoload.exists():
        autoload = app.path / "bootstrap" / "autoload.php"
    autoload.write_text(autoload.read_text() + PHEANSTALK)


def pool(app, extra="", size="processes = 1;"):
    return ('{ name = "appq"; queues = ["default"]; %s cache_prefix = "%s"; %s\n'
            '  queue_connection = "beanstalkd"; app_driver = true; tries = 1; sleep = 0.2; job_log = true; %s\n'
            '  handler = { type = "pipe"; command = %s; }; }'
            % (size, CACHE_PREFIX[app.version.name], app.env_conf(), extra, argv_conf(app.adapter_argv())))


def dispatch(app, job, count=1, tag=None, delay=0, args=()):
    cmd = ["fixture:dispatch", job, "--connection=beanstalkd", "--count=%d" % count, "--delay=%d" % delay]
    if tag:
        cmd.append("--tag=" + tag)
    app.artisan(*cmd, *["--arg=%s" % a for a in args])


def clear_failed(app):
    sqlite_exec(app.db, "delete from failed_jobs")


def empty(srv):
    return srv.counts() == (0, 0, 0, 0)


def outcome(app):
    ms = app.read_markers()
    runs = sorted((m["job"], m.get("tag"), m["attempt"]) for m in ms if "event" not in m)
    hooks = sorted((m["job"], m.get("tag"), m["class"], m["message"]) for m in ms if m.get("event") == "failed_hook")
    events = sorted((m["event"], m["job"], m["attempts"] or 0, m.get("exception")) for m in ms
                    if m.get("event") not in (None, "failed_hook") and m.get("job"))
    rows = sorted((f["connection"], f["queue"], f["exception"].split(" in /")[0].split("\n")[0])
                  for f in app.failed_jobs())
    return runs, hooks, events, rows


def logged(m):
    """The job log's lines per outcome."""
    log = m.log()
    return {what: len(re.findall(r"%s\s+App\\Jobs\\" % what, log))
            for what in ("Processing", "Processed", "Released", "Failed", "Crashed", "TimedOut")}


def qpool_saw_every_attempt(m):
    """The pool's records of the parity jobs: ten attempts, each with its
    outcome; none "crashed" (the driver's job is gone once deleted: its
    attempts were asked of beanstalkd after the run, which said NOT_FOUND)."""
    want = {"Processing": 10, "Processed": 2, "Released": 3, "Failed": 3, "Crashed": 0, "TimedOut": 2}
    wait_for(lambda: logged(m) == want, 30, what="the job log's lines (%r)" % want)
    wait_for(lambda: m.pool("appq")["jobs_done"] == 10, 30, what="qpool status to count the ten attempts")
    assert m.pool("appq")["jobs_failed"] == 3


def test_same_results_as_queue_work_on_beanstalkd(master_factory, redis_server, beanstalkd, version_app):
    """The same jobs, dispatched by the app onto the tube before each run,
    run once by `php artisan queue:work beanstalkd` and once by an
    app_driver pool: the same attempts, failed() hooks, queue events and
    failed_jobs rows (a timeout included: killed, then failed as queue:work
    fails it), the backoff held, and an empty tube at the end."""
    app = version_app
    use_beanstalkd_queue(app, beanstalkd)
    work = app.version.prefix() + ["php", str(app.app_inner / "artisan"), "queue:work", "beanstalkd",
                                   "--queue=default", "--sleep=1", "--tries=1", "--timeout=60"]
    results = []
    for name, conf in (("php", '{ name = "appq"; queues = ["default"]; processes = 1; %s command = %s; }'
                        % (app.env_conf(), argv_conf(work))), ("qpool", pool(app))):
        app.markers.write_text("")
        clear_failed(app)
        redis_server.client().flushall()
        dispatch(app, "MarkerJob", count=2, tag="p")
        dispatch(app, "ManualFailJob", tag="manual")
        dispatch(app, "MaxExceptionsJob", tag="maxexc")  # maxExceptions 2, counted in the app's cache
        dispatch(app, "AlwaysFailsJob", tag="always")  # tries 3, backoff [1, 2]: released twice, then failed
        dispatch(app, "TimeoutJob", tag="t")  # timeout 1, tries 2: killed, then failed and killed
        assert beanstalkd.counts()[0] == 6
        m = master_factory(redis_server, name)
        m.write_config(conf)
        m.start()
        try:
            wait_for(lambda: empty(beanstalkd) and len(app.failed_jobs()) == 4, 90, interval=0.25,
                     what="%s to finish the jobs on beanstalkd" % name)
            if name == "qpool":
                qpool_saw_every_attempt(m)
        finally:
            assert m.stop(60) == 0
        results.append(outcome(app))
        fails = sorted((x for x in app.read_markers() if x.get("job") == "AlwaysFailsJob" and "event" not in x),
                       key=lambda x: x["attempt"])
        assert [x["attempt"] for x in fails] == [1, 2, 3]
        assert fails[1]["time"] >= fails[0]["time"] + 1 - 0.01  # beanstalkd's delay: whole seconds
        assert fails[2]["time"] >= fails[1]["time"] + 2 - 0.01
    assert results[0] == results[1]
    runs, hooks, events, rows = results[1]
    assert [r for r in runs if r[0] == "MaxExceptionsJob"] == [("MaxExceptionsJob", "maxexc", 1),
                                                                ("MaxExceptionsJob", "maxexc", 2)]
    assert len(hooks) == 4 and all(r[:2] == ("beanstalkd", "default") for r in rows)
    assert beanstalkd.counts() == (0, 0, 0, 0)


def agent_sizes(app, queues):
    """One `sizes` request to the app agent (php/src/Agent.php, without a
    zygote: tests/fixtures/agent-harness.php) for the beanstalkd connection."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(app.version.prefix() + ["php", str(ROOT / "tests" / "fixtures" / "agent-harness.php"),
                                                    str(ROOT), str(app.path), str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), env=app.env, cwd=str(app.path), stderr=subprocess.PIPE)
    theirs.close()
    ours.settimeout(60)
    lines = ours.makefile("rb")
    try:
        assert json.loads(lines.readline())["op"] == "hello"
        ours.sendall((json.dumps({"id": 1, "op": "sizes", "connection": "beanstalkd", "queues": queues}) + "\n").encode())
        return json.loads(lines.readline())
    finally:
        lines.close()
        ours.close()  # the agent exits at the end of its socket
        with proc.stderr:
            if proc.wait(30) != 0:
                raise AssertionError("the agent exited with %d: %s" % (proc.returncode, proc.stderr.read()))


def test_the_agent_reads_ready_delayed_and_reserved_from_the_tube(beanstalkd, version_app):
    """Laravel's BeanstalkdQueue::size() (before 11) is the ready count only,
    and fails on a tube beanstalkd does not have; the agent reads the tube's
    stats through the connection's own Pheanstalk: 3 ready, 2 delayed, 1
    reserved, and 0s for a tube nobody has used."""
    app = version_app
    use_beanstalkd_queue(app, beanstalkd)
    dispatch(app, "MarkerJob", count=4, tag="r")
    dispatch(app, "MarkerJob", count=2, tag="d", delay=3600)
    held = beanstalkd.reserve()
    try:
        assert beanstalkd.counts() == (3, 2, 1, 0)
        r = agent_sizes(app, ["default", "never-used"])
        assert r["ok"], r
        assert r["sizes"] == [{"ready": 3, "delayed": 2, "reserved": 1}, {"ready": 0, "delayed": 0, "reserved": 0}]
    finally:
        held.close()


def test_a_backlog_grows_an_auto_pool_and_status_shows_the_tube(master_factory, redis_server, beanstalkd,
                                                               version_app):
    """balance = "auto" from 1 toward 4 on a backlog in the tube; the
    sizes, read by the pool's app agent from the tube's stats, show the
    delayed jobs apart (they hold no worker) and the reserved ones."""
    app = version_app
    use_beanstalkd_queue(app, beanstalkd)
    dispatch(app, "MarkerJob", count=3, tag="later", delay=3600)
    dispatch(app, "SleepJob", count=40, tag="s", args=[300])
    m = master_factory(redis_server)
    m.write_config(pool(app, size='balance = "auto"; min_processes = 1; max_processes = 4; auto_strategy = "size";'),
                   qpool="  balance_interval = 0.5;")
    m.start()
    try:
        def queue():
            p = m.pool("appq")
            return [q for q in p["queues"] if q["name"] == "default"][0] if p["counts_fresh"] else None
        seen = wait_for(lambda: (lambda q: q if q and q["ready"] > 0 else None)(queue()), 60,
                        what="the tube's size from the agent")
        assert seen["delayed"] == 3 and seen["ready"] <= 40, seen
        assert m.pool("appq")["counts_from"] == "app agent"
        wait_for(lambda: m.pool("appq")["target"] > 1, 60, what="the pool to grow above min_processes")
        wait_for(lambda: (lambda q: q and q["reserved"] > 0)(queue()), 60, what="reserved jobs in the sizes")
        wait_for(lambda: beanstalkd.counts()[0] == 0 and beanstalkd.counts()[2] == 0, 120, interval=0.25,
                 what="the 40 jobs to run")
        wait_for(lambda: (lambda q: q and (q["ready"], q["delayed"], q["reserved"]) == (0, 3, 0))(queue()), 30,
                 what="status to show the delayed jobs alone")
        assert len([x for x in app.read_markers() if x.get("job") == "SleepJob" and "event" not in x]) == 40
    finally:
        assert m.stop(60) == 0


def test_pause_stops_the_pops_and_continue_resumes(master_factory, redis_server, beanstalkd, version_app):
    app = version_app
    use_beanstalkd_queue(app, beanstalkd)
    m = master_factory(redis_server)
    m.write_config(pool(app))
    m.start()
    try:
        wait_for(lambda: any(w.get("state") == "idle" for w in m.pool("appq")["children"]), 60,
                 what="the worker to be idle")
        # paused: the job stays ready in the tube, nobody reserves it
        pause_holds_the_job(m, lambda: dispatch(app, "MarkerJob", tag="p"),
                            lambda: beanstalkd.counts() == (1, 0, 0, 0))
        wait_for(lambda: empty(beanstalkd), 60, interval=0.25, what="the job to run after continue")
        wait_for(lambda: [x["tag"] for x in app.read_markers() if "event" not in x] == ["p"], 30,
                 what="the job's marker")
    finally:
        assert m.stop(60) == 0


def test_a_beanstalkd_restart_keeps_the_jobs_and_the_pool_goes_on(master_factory, redis_server, tmp_path,
                                                                  version_app):
    """beanstalkd with its binlog in the test's directory goes down with a
    delayed job in it and comes back on its port: Pheanstalk reconnects (or
    the Worker, seeing a lost connection, has its handler replaced, as
    queue:work would exit), and the pool runs the job it kept and a new one.
    The app agent answers errors meanwhile (logged once) and reads the
    tube's sizes again once it is back."""
    app = version_app
    srv = Beanstalkd(tmp_path, binlog=True)
    try:
        use_beanstalkd_queue(app, srv)
        m = master_factory(redis_server)
        m.write_config(pool(app))
        m.start()
        try:
            dispatch(app, "MarkerJob", tag="before")
            wait_for(lambda: empty(srv), 60, interval=0.25, what="the first job to run")
            dispatch(app, "MarkerJob", tag="kept", delay=8)
            assert srv.counts()[1] == 1
            srv.stop()
            m.wait_log(r"pool appq: no queue sizes from its app agent \(it says: .*Connection refused", 30)
            srv.start()
            dispatch(app, "MarkerJob", tag="after")
            wait_for(lambda: sorted(x["tag"] for x in app.read_markers() if "event" not in x)
                     == ["after", "before", "kept"], 90, interval=0.25, what="the kept and the new job to run")
            wait_for(lambda: empty(srv), 30, interval=0.25, what="the tube to be empty")
            m.wait_log(r"pool appq: queue sizes from its app agent again", 30)
            assert m.pool("appq")["children"], "the pool has its worker"
        finally:
            assert m.stop(60) == 0
    finally:
        srv.stop()
