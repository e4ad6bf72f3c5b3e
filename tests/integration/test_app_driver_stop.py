"""Issue 32, "stop this job", on a pool with app_driver = true: the app's own
driver (here Laravel 8's `database` queue on SQLite, on the host) runs the
job in the pool's PHP handler, and a stop (POST /api/jobs/<uuid>/stop
behind the token, or `qpool stop-job UUID`) ends it as its timeout would
under Laravel's rules: the handler gets the SIGALRM of the Worker's own
timeout handler, which fails the job when this attempt would exceed its
tries (a failed_jobs row) and else leaves it reserved until retry_after.
Real master, real PHP handler, real SQLite file; no timing is asserted."""
import json
import os
import pathlib
import re
import signal
import sqlite3
import time

import pytest

from conftest import free_port, wait_for
from laravel_roots import argv_conf, laravel_version, version_app  # noqa: F401 (fixtures)
from test_app_driver import dispatch, jobs_left, pool, use_database_queue
from test_http import TOKEN, code, get, post

SLEEP = "App\\Jobs\\SleepJob"


def running(port):
    st, _, body = get(port, "/api/jobs/running", TOKEN)
    assert st == 200, body
    return [x for x in json.loads(body)["running"] if x["name"] == SLEEP]


def timed_out(m):
    return len(re.findall(r"TimedOut\s+App\\Jobs\\SleepJob", m.log()))


@pytest.mark.parametrize("laravel_version", ["8"], indirect=True)
def test_stop_this_job_on_an_app_driver_pool(master_factory, redis_server, version_app):
    app = version_app
    use_database_queue(app, retry_after=600)  # nothing comes back by itself while the test runs
    app.artisan("fixture:dispatch", "SleepJob", "--connection=database", "--arg=600000", "--tag=stuck")  # 10 min
    port = free_port()
    m = master_factory(redis_server)
    m.write_config(pool(app, "tries = 2; timeout = 900;").replace("tries = 1; ", "", 1),
                   qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    m.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    try:
        wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
        wait_for(lambda: len(running(port)) == 1, 90, interval=0.25, what="the sleeping job running")
        job = running(port)[0]
        assert job["pool"] == "appq" and job["attempt"] == 1 and job["uuid"]
        uuid = job["uuid"]

        # attempt 1 of 2, over HTTP: as its timeout, the Worker leaves it reserved (no failure)
        assert post(port, "/api/jobs/%s/stop" % uuid)[0] == 401
        st, rep = post(port, "/api/jobs/%s/stop" % uuid, TOKEN)
        assert st == 200 and rep["pool"] == "appq", rep
        wait_for(lambda: timed_out(m) == 1, 60, interval=0.25, what="attempt 1 ended as at its timeout")
        m.wait_log(r"job \S+ \(App\\Jobs\\SleepJob\) stopped by an operator")
        wait_for(lambda: not running(port), 30, what="the job gone from the running list")
        rows = jobs_left(app)
        assert len(rows) == 1 and rows[0]["attempts"] == 1 and rows[0]["reserved_at"], rows
        assert app.failed_jobs() == []

        # retry_after passes (the reservation made older): attempt 2 runs, and a stop from the CLI
        # fails it, as the Worker's timeout handler does on a last try
        age_reservations(app)
        wait_for(lambda: [x["attempt"] for x in running(port)] == [2], 90, interval=0.25, what="attempt 2 running")
        res = m.cli("stop-job", uuid)
        assert "stopping job %s" % uuid in res.stdout and "appq" in res.stdout
        wait_for(lambda: not jobs_left(app) and len(app.failed_jobs()) == 1, 60, interval=0.25,
                 what="the job failed into the app's failed_jobs")
        assert app.failed_jobs()[0]["uuid"] == uuid
        wait_for(lambda: timed_out(m) == 2, 60, interval=0.25, what="attempt 2 ended as at its timeout")
        runs = [x for x in app.read_markers() if x.get("job") == "SleepJob" and "event" not in x]
        assert [x["attempt"] for x in runs] == [1, 2] and runs[0]["pid"] != runs[1]["pid"]

        # nothing to stop: exit 1; the pool goes on with a fresh handler
        assert m.cli("stop-job", uuid, check=False).returncode == 1
        dispatch(app, "MarkerJob", tag="after")
        wait_for(lambda: not jobs_left(app), 60, interval=0.25, what="a job after the stops")
    finally:
        assert m.stop(60) == 0


def age_reservations(app):
    """What retry_after's passing does to the database driver's rows."""
    con = sqlite3.connect(str(app.db))
    try:
        con.execute("update jobs set reserved_at = %d where reserved_at is not null" % (int(time.time()) - 1000))
        con.commit()
    finally:
        con.close()


WINDOW_WORKER = r"""<?php
// The test's Worker: while the file `window` is in the app's storage, the next
// job stops its handler (SIGSTOP) just before the Worker's timeout handler is
// armed, the window in which qpool may already send a stop.
class WindowWorker extends \Illuminate\Queue\Worker
{
    public static function from($w)
    {
        $n = (new \ReflectionClass(static::class))->newInstanceWithoutConstructor();
        \Closure::bind(function ($src) {
            foreach (get_object_vars($src) as $k => $v) {
                $this->$k = $v;
            }
        }, $n, \Illuminate\Queue\Worker::class)($w);

        return $n;
    }

    protected function registerTimeoutHandler(...$args)
    {
        $window = getenv('APP_STORAGE').'/window';
        if (@unlink($window)) {
            file_put_contents($window.'-pid', (string) getmypid());
            posix_kill(getmypid(), SIGSTOP);
        }

        return parent::registerTimeoutHandler(...$args);
    }
}
"""


def use_window_worker(app):
    (app.path / "bootstrap" / "window_worker.php").write_text(WINDOW_WORKER)
    boot = app.path / "bootstrap" / "app.php"
    boot.write_text(boot.read_text().replace(
        "\nreturn $app;", "\nrequire_once __DIR__.'/window_worker.php';\n"
        "$app->extend('queue.worker', function ($w) { return \\WindowWorker::from($w); });\n\nreturn $app;", 1))


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("ran_one", [True, False], ids=["second_job", "first_job"])
@pytest.mark.parametrize("laravel_version", ["8"], indirect=True)
def test_a_stop_before_the_timeout_handler_is_armed(master_factory, redis_server, version_app, ran_one):
    """Review of g32c, SHOULD 1: a stop that reaches the handler after qpool
    wrote the job's `run` but before the Worker's timeout handler is armed is
    neither lost (a handler that ran a job before ignored SIGALRM) nor fatal (a
    fresh handler's default SIGALRM): the job ends as at its timeout (its last
    try: failed into failed_jobs)."""
    app = version_app
    use_database_queue(app, retry_after=600)
    use_window_worker(app)
    storage = app.version.host(app.env["APP_STORAGE"])  # inside a root on Debian 13 (Laravel 8 from bookworm)
    m = master_factory(redis_server)
    m.write_config(pool(app, "timeout = 900;"))
    m.start()
    try:
        if ran_one:
            dispatch(app, "MarkerJob", tag="first")
            wait_for(lambda: not jobs_left(app), 90, interval=0.25, what="the first job run")
        first = [x for x in app.read_markers() if x.get("job") == "MarkerJob" and "event" not in x]
        assert len(first) == (1 if ran_one else 0), first

        storage.mkdir(parents=True, exist_ok=True)
        (storage / "window").write_text("")
        app.artisan("fixture:dispatch", "SleepJob", "--connection=database", "--arg=600000", "--tag=stuck")
        wait_for(lambda: (storage / "window-pid").exists() and (storage / "window-pid").read_text(), 90,
                 interval=0.25, what="the handler stopped in the window")
        pid = int((storage / "window-pid").read_text())
        assert not ran_one or pid == first[0]["pid"]  # the handler that ran the first job
        wait_for(lambda: proc_state(pid) == "T", 30, what="the handler stopped")
        uuid = app.table("select payload from jobs")[0]["payload"]
        uuid = json.loads(uuid)["uuid"]

        res = m.cli("stop-job", uuid)
        assert "stopping job %s" % uuid in res.stdout
        m.wait_log(r"job \S+ \(App\\Jobs\\SleepJob\): stop asked")  # the SIGALRM went out while it was stopped
        os.kill(pid, signal.SIGCONT)

        wait_for(lambda: not jobs_left(app) and len(app.failed_jobs()) == 1, 60, interval=0.25,
                 what="the job failed into the app's failed_jobs, as at its timeout")
        assert app.failed_jobs()[0]["uuid"] == uuid
        wait_for(lambda: timed_out(m) == 1, 60, interval=0.25, what="the job recorded as timed out")
    finally:
        assert m.stop(60) == 0


RELEASE_THEN_STOP = r"""<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/** Releases itself, then stops its handler (SIGSTOP) once: the end of a job a stop may cross. */
class ReleaseThenStopJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public function handle()
    {
        $this->release(3600);
        $flag = getenv('APP_STORAGE').'/released';
        if (! file_exists($flag)) {
            file_put_contents($flag, (string) getmypid());
            posix_kill(getmypid(), SIGSTOP);
        }
    }
}
"""


@pytest.mark.parametrize("laravel_version", ["8"], indirect=True)
def test_a_stop_after_the_job_released_itself(master_factory, redis_server, version_app):
    """Review of g32c, SHOULD 4: a stop that reaches the handler once the job
    has released itself (its last try) no longer fails it: Laravel's timeout
    handler would add a failed_jobs row beside the released copy."""
    app = version_app
    use_database_queue(app, retry_after=7200)
    (app.path / "app" / "Jobs" / "ReleaseThenStopJob.php").write_text(RELEASE_THEN_STOP)
    storage = app.version.host(app.env["APP_STORAGE"])  # inside a root on Debian 13 (Laravel 8 from bookworm)
    m = master_factory(redis_server)
    m.write_config(pool(app, "timeout = 900;"))
    m.start()
    try:
        dispatch(app, "ReleaseThenStopJob", tag="rel")
        flag = storage / "released"
        wait_for(lambda: flag.exists() and flag.read_text(), 90, interval=0.25, what="the job released, handler stopped")
        pid = int(flag.read_text())
        wait_for(lambda: proc_state(pid) == "T", 30, what="the handler stopped")
        uuid = json.loads(app.table("select payload from jobs")[0]["payload"])["uuid"]
        assert "stopping job %s" % uuid in m.cli("stop-job", uuid).stdout
        m.wait_log(r"job \S+ \(App\\Jobs\\ReleaseThenStopJob\): stop asked")  # the SIGALRM went out while it was stopped
        os.kill(pid, signal.SIGCONT)
        wait_for(lambda: re.search(r"(Released|TimedOut|Processed|Failed)\s+App\\Jobs\\ReleaseThenStopJob", m.log()),
                 60, interval=0.25, what="the attempt's outcome")
        assert app.failed_jobs() == []
        # SHOULD 7: the log says what the stop did, not that it stopped the job
        m.wait_log(r"job \S+ \(App\\Jobs\\ReleaseThenStopJob\): the stop came as the job ended, which it left as "
                   r"it was: Released")
        assert not re.search(r"ReleaseThenStopJob\) stopped by an operator", m.log())
        rows = jobs_left(app)
        assert len(rows) == 1 and not rows[0]["reserved_at"], rows  # the released copy, waiting
    finally:
        assert m.stop(60) == 0
