"""The app's own job classes through qpool's native workers and the PHP adapter
(php/qpool-handler.php), compared with `php artisan queue:work`."""
import collections
import json
import re
import time

import pytest

from conftest import LARAVEL_APP, ROOT, TIMEOUT_EXCEPTION, failed_records, queue_state, wait_for
from test_laravel import markers, queue_work_pool, redis_shape

ADAPTER = ROOT / "php" / "qpool-handler.php"


def adapter_pool(app, processes=2, extra=""):
    return ('{ name = "app"; queues = ["default"]; processes = %d; working_directory = "%s"; %s\n'
            '  handler = { type = "pipe"; command = ["php", "%s", "%s"]; }; %s }'
            % (processes, LARAVEL_APP, app.env_conf(), ADAPTER, LARAVEL_APP, extra))


def events(app, name=None):
    return [m for m in app.read_markers() if m.get("event") and (name is None or m["event"] == name)]


def settled(r):
    st = queue_state(r, "default")
    return st["ready"] == 0 and st["delayed"] == 0 and st["reserved"] == 0


def test_marker_job_runs_exactly_once(master, r, laravel_app):
    app = laravel_app
    master.write_config(adapter_pool(app))
    master.start()
    app.dispatch("MarkerJob", tag="once")
    wait_for(lambda: markers(app, "MarkerJob") and settled(r), 30, what="the job")
    time.sleep(1)
    assert [m["tag"] for m in markers(app, "MarkerJob")] == ["once"]
    names = [e["event"] for e in events(app)]
    assert names == ["JobProcessing", "JobProcessed"], names
    assert app.failed_jobs() == []


def test_tries_backoff_failed_hook_and_failed_jobs_row(master, r, laravel_app):
    app = laravel_app
    master.write_config(adapter_pool(app, extra="tries = 1;"))
    master.start()
    app.dispatch("AlwaysFailsJob", tag="af")  # $tries = 3, $backoff = [1, 2]
    wait_for(lambda: len(app.failed_jobs()) == 1 and settled(r), 30, what="the final failure")
    runs = markers(app, "AlwaysFailsJob")
    assert [m["attempt"] for m in runs] == [1, 2, 3]
    # backoff 1 s then 2 s; delayed scores are whole seconds, so a 1 s backoff
    # can come round in anything from a few ms to 2 s
    assert re.findall(r"Released +App\\Jobs\\AlwaysFailsJob .* retry in (\d+) s", master.log()) == ["1", "2"]
    gaps = [b["time"] - a["time"] for a, b in zip(runs, runs[1:])]
    assert 0 < gaps[0] < 2.5 and 1.0 <= gaps[1] < 3.5, gaps
    hooks = [m for m in app.read_markers() if m.get("event") == "failed_hook"]
    assert len(hooks) == 1 and hooks[0]["class"] == "RuntimeException" and hooks[0]["message"] == "always fails"
    row = app.failed_jobs()[0]
    payload = json.loads(row["payload"])
    assert row["uuid"] == payload["uuid"] and row["connection"] == "redis" and row["queue"] == "default"
    assert payload["attempts"] == 2 and payload["displayName"] == "App\\Jobs\\AlwaysFailsJob"
    assert row["exception"].startswith("RuntimeException: always fails in ")
    # qpool keeps its own record too, with the same payload bytes
    rec = failed_records(r, "default")[0]
    assert rec["payload"].decode() == row["payload"]
    assert [e["event"] for e in events(app)].count("JobFailed") == 1


def test_release_brings_the_job_back_later(master, r, laravel_app):
    app = laravel_app
    master.write_config(adapter_pool(app))
    master.start()
    app.dispatch("ReleaseJob", tag="rel")  # release(5) on attempt 1
    wait_for(lambda: len(markers(app, "ReleaseJob")) == 2 and settled(r), 30, what="the second run")
    a, b = markers(app, "ReleaseJob")
    assert 4.0 <= b["time"] - a["time"] < 7.5
    assert app.failed_jobs() == []


def test_job_that_fails_itself(master, r, laravel_app):
    app = laravel_app
    master.write_config(adapter_pool(app, extra="tries = 5;"))
    master.start()
    app.dispatch("ManualFailJob", tag="mf")
    wait_for(lambda: len(app.failed_jobs()) == 1 and settled(r), 30, what="the failure")
    assert len(markers(app, "ManualFailJob")) == 1, "failed at once, not retried"
    hooks = [m for m in app.read_markers() if m.get("event") == "failed_hook"]
    assert len(hooks) == 1 and hooks[0]["message"] == "manual failure"
    assert app.failed_jobs()[0]["exception"].startswith("RuntimeException: manual failure")


def test_timeout_kills_retries_and_fails_with_the_timeout_exception(master, r, laravel_app):
    app = laravel_app
    master.write_config(adapter_pool(app, extra="tries = 1;"))
    master.start()
    app.dispatch("TimeoutJob", tag="to")  # $timeout = 1, $tries = 2, sleeps 10 s
    wait_for(lambda: len(app.failed_jobs()) == 1 and settled(r), 40, what="the timeout failure")
    runs = markers(app, "TimeoutJob")
    assert [m["attempt"] for m in runs] == [1, 2]
    assert runs[0]["pid"] != runs[1]["pid"], "the timed-out PHP process was killed and replaced"
    row = app.failed_jobs()[0]
    cls, tail = TIMEOUT_EXCEPTION  # as the app's Laravel words it (conftest)
    assert row["exception"].startswith(cls + ": App\\Jobs\\TimeoutJob" + tail), row["exception"][:300]
    hooks = [m for m in app.read_markers() if m.get("event") == "failed_hook"]
    assert len(hooks) == 1 and hooks[0]["class"] == cls


def test_leaking_job_recycles_the_php_process(master, r, laravel_app):
    app = laravel_app
    master.write_config(adapter_pool(app, processes=1, extra="memory = 96;"))
    master.start()
    app.dispatch("LeakJob", 25, count=6, tag="leak")
    wait_for(lambda: len(markers(app, "LeakJob")) == 6 and settled(r), 60, what="all leaking jobs")
    master.wait_log(r"passed its memory limit \(exit 12", timeout=5)
    assert len({m["pid"] for m in markers(app, "LeakJob")}) >= 2
    app.dispatch("MarkerJob", tag="after")
    wait_for(lambda: markers(app, "MarkerJob"), 30, what="jobs keep flowing after the recycle")
    assert app.failed_jobs() == []


def scenario(app):
    app.dispatch("MarkerJob", count=2, tag="m")
    app.dispatch("string", tag="s")
    app.dispatch("AlwaysFailsJob", tag="af")
    app.dispatch("ReleaseJob", tag="rel")
    app.dispatch("ManualFailJob", tag="mf")
    app.dispatch("MaxExceptionsJob", tag="mx")
    app.dispatch("TimeoutJob", tag="to")


def without_stamp(payload):
    """A payload as Laravel wrote it: qpool's due-time stamp on the copies it
    released (docs/laravel.md, a documented difference) taken out."""
    return re.sub(r',"qpoolAvailableAt":\d+', "", payload)


def outcome(app, redis_server):
    run = sorted((m["job"], m.get("tag"), m["attempt"]) for m in markers(app))
    rows = sorted((f["uuid"], f["connection"], f["queue"], without_stamp(f["payload"]),
                   f["exception"].split(" in /")[0].split("\n")[0])
                  for f in app.failed_jobs())
    evs = collections.Counter((e["event"], e["job"]) for e in events(app))
    return run, rows, evs, redis_shape(redis_server)


@pytest.mark.parametrize("prefetch", [1, 8])
def test_same_jobs_same_results_as_queue_work(master_factory, redis_server, laravel_app, prefetch):
    # prefetch 8 (recommended for the adapter) holds jobs popped ahead under a
    # qpoolTwin marker: a released one kept it, and its failed_jobs row differed
    app = laravel_app
    r = redis_server.client()
    app.env["QUEUE_RETRY_AFTER"] = "3"
    expect_failed = 4  # AlwaysFails, ManualFail, MaxExceptions, Timeout

    m1 = master_factory(redis_server, "php")
    m1.write_config(queue_work_pool(app), defaults="retry_after = 3;")
    scenario(app)
    payloads_php = sorted(r.lrange("laravel_database_queues:default", 0, -1))
    m1.start()
    wait_for(lambda: len(app.failed_jobs()) == expect_failed and settled(r) and
             len(markers(app, "ReleaseJob")) == 2, 90, interval=0.2, what="queue:work to finish")
    assert m1.stop() == 0
    php = outcome(app, redis_server)

    # the same payloads again (same uuids), through the adapter
    for db in (0, 1):
        redis_server.client(db=db).flushdb()
    app.markers.unlink()
    import sqlite3
    con = sqlite3.connect(str(app.db))
    con.execute("delete from failed_jobs")
    con.commit()
    con.close()
    for p in payloads_php:
        r.rpush("laravel_database_queues:default", p)
        r.rpush("laravel_database_queues:default:notify", 1)
    m2 = master_factory(redis_server, "qpool")
    m2.write_config(adapter_pool(app, extra="retry_after = 3; prefetch = %d;" % prefetch))
    m2.start()
    wait_for(lambda: len(app.failed_jobs()) == expect_failed and settled(r) and
             len(markers(app, "ReleaseJob")) == 2, 90, interval=0.2, what="qpool to finish")
    assert m2.stop() == 0
    qp = outcome(app, redis_server)

    assert qp[0] == php[0], "markers differ"
    assert qp[1] == php[1], "failed_jobs rows differ"
    assert qp[2] == php[2], "queue events differ"
    assert qp[3] == php[3], "final Redis state differs"
