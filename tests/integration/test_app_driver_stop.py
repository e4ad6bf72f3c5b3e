"""Issue 32, "stop this job", on a pool with app_driver = true: the app's own
driver (here Laravel 8's `database` queue on SQLite, on the host) runs the
job in the pool's PHP handler, and a stop (POST /api/jobs/<uuid>/stop
behind the token, or `qpool stop-job UUID`) ends it as its timeout would
under Laravel's rules: the handler gets the SIGALRM of the Worker's own
timeout handler, which fails the job when this attempt would exceed its
tries (a failed_jobs row) and else leaves it reserved until retry_after.
Real master, real PHP handler, real SQLite file; no timing is asserted."""
import json
import re
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
