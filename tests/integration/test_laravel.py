"""Real Laravel (Debian's 8.83) as a peer: queue:work under qpool, jobs dispatched by the
app and run by qpool's native workers, and a mixed fleet sharing one queue."""
import collections
import json
import signal
import time


from conftest import (FIXTURE_HANDLER, LARAVEL_APP, PREFIX, failed_records, queue_state,
                      read_fixture_log, wait_for)

ACTIONS = "AlwaysFailsJob=fail,TimeoutJob=hang,RetryUntilJob=fail,MaxExceptionsJob=fail,ManualFailJob=failself"


def queue_work_pool(app, processes=2, queues="default", extra=""):
    return ('{ name = "php"; queues = ["%s"]; processes = %d; working_directory = "%s"; %s\n'
            '  command = ["php", "%s/artisan", "queue:work", "redis", "--queue={queues}", "--sleep=1",\n'
            '             "--tries={tries}", "--timeout={timeout}", "--memory={memory}"]; %s }'
            % (queues, processes, LARAVEL_APP, app.env_conf(), LARAVEL_APP, extra))


def native_exec_pool(app, log, extra=""):
    env = app.env_conf().replace("environment = {", 'environment = { FIXTURE_LOG = "%s"; FIXTURE_ACTIONS = "%s";'
                                 % (log, ACTIONS))
    return ('{ name = "native"; queues = ["default"]; processes = 2; handler = { type = "exec"; command = ["%s", "--exec"]; };\n'
            '  %s %s }' % (FIXTURE_HANDLER, env, extra))


def markers(app, job=None):
    return [m for m in app.read_markers() if "job" in m and "event" not in m and (job is None or m["job"] == job)]


def test_queue_work_runs_under_qpool_pauses_resumes_and_drains(master, r, laravel_app):
    app = laravel_app
    master.write_config(queue_work_pool(app))
    master.start()
    pids = master.wait_children("php", 2)
    app.dispatch("MarkerJob", count=5, tag="a")
    wait_for(lambda: len(markers(app, "MarkerJob")) == 5, 30, what="5 jobs through queue:work")

    master.signal(signal.SIGUSR2)
    wait_for(lambda: all(c["state"] == "paused" for c in master.pool("php")["children"]), 20,
             what="SIGUSR2 delivered to both queue:work processes")
    time.sleep(1.5)  # a worker mid-sleep finishes its iteration before it sees the pause
    app.dispatch("MarkerJob", count=3, tag="b")
    time.sleep(3)
    assert len(markers(app, "MarkerJob")) == 5, "a paused queue:work took a job"
    assert queue_state(r, "default")["ready"] == 3
    assert master.child_pids("php") == pids

    master.signal(signal.SIGCONT)
    wait_for(lambda: len(markers(app, "MarkerJob")) == 8, 30, what="the jobs after SIGCONT")

    app.dispatch("SleepJob", 1500, count=6, tag="s")
    wait_for(lambda: len(markers(app, "SleepJob")) >= 2, 30, what="slow jobs to start")
    master.signal(signal.SIGTERM)
    assert master.wait_exit(60) == 0
    done = markers(app, "SleepJob")
    st = queue_state(r, "default")
    assert st["reserved"] == 0 and st["delayed"] == 0, st
    assert len(done) + st["ready"] == 6, "a job was lost in the drain (%d done, %d left)" % (len(done), st["ready"])
    assert len({m["tag"] for m in done}) == len(done), "a job ran twice"
    assert "exited with status 0 after stop" in master.log()


def run_scenario(app, dispatch_delayed=True):
    app.dispatch("MarkerJob", count=3, tag="m")
    if dispatch_delayed:
        app.dispatch("MarkerJob", delay=2, tag="late")
    app.dispatch("AlwaysFailsJob", tag="af")
    app.dispatch("TimeoutJob", tag="to")
    app.dispatch("MaxExceptionsJob", tag="mx")
    app.dispatch("string", tag="str")


def redis_shape(redis_server):
    """Every key in DB 0 and 1 (qpool's own keys aside: failed store, metrics, fleet) with its type and size."""
    out = {}
    for db in (0, 1):
        c = redis_server.client(db=db)
        for k in c.keys("*"):
            name = k.decode()
            if "qpool:" in name or name.endswith("illuminate:queue:restart"):
                continue
            t = c.type(k).decode()
            size = {"list": c.llen, "zset": c.zcard, "set": c.scard, "hash": c.hlen}.get(t, lambda _: 1)(k)
            out["%d:%s" % (db, name)] = (t, size)
    return out


def test_native_workers_process_laravel_jobs_like_queue_work(master_factory, redis_server, laravel_app, tmp_path):
    """The same jobs, dispatched by the app, once through `queue:work` (under qpool) and once
    through native workers with an exec handler: same attempts, same failures, same Redis."""
    app = laravel_app
    r = redis_server.client()
    app.env["QUEUE_RETRY_AFTER"] = "3"

    # 1. php artisan queue:work
    m1 = master_factory(redis_server, "php")
    m1.write_config(queue_work_pool(app, extra="tries = 1; timeout = 60;"), defaults="retry_after = 3;")
    run_scenario(app)
    m1.start()
    expect_failed = 3  # AlwaysFails (tries), TimeoutJob (timeout x2), MaxExceptions
    wait_for(lambda: len(app.failed_jobs()) == expect_failed and queue_state(r, "default")["ready"] == 0
             and queue_state(r, "default")["delayed"] == 0 and queue_state(r, "default")["reserved"] == 0,
             90, interval=0.2, what="queue:work to finish the scenario")
    assert m1.stop() == 0
    php_attempts = collections.Counter(m["job"] for m in markers(app))
    php_failed = sorted((json.loads(f["payload"])["displayName"], json.loads(f["payload"])["attempts"])
                        for f in app.failed_jobs())
    php_shape = redis_shape(redis_server)
    for db in (0, 1):
        redis_server.client(db=db).flushdb()

    # 2. qpool native workers, exec handler
    log = tmp_path / "fixture.log"
    m2 = master_factory(redis_server, "native")
    m2.write_config(native_exec_pool(app, log, "tries = 1; timeout = 60; retry_after = 3;"))
    run_scenario(app)
    m2.start()
    wait_for(lambda: len(failed_records(r, "default")) == expect_failed and queue_state(r, "default")["ready"] == 0
             and queue_state(r, "default")["delayed"] == 0 and queue_state(r, "default")["reserved"] == 0,
             90, interval=0.2, what="native workers to finish the scenario")
    assert m2.stop() == 0
    runs = collections.Counter()
    names = {}
    for l in read_fixture_log(log):
        if l[0] == "job":
            runs[l[1]] += 1
    for raw in [f["payload"] for f in failed_records(r, "default")]:
        p = json.loads(raw)
        names[p["id"]] = p["displayName"]
    native_failed = sorted((json.loads(f["payload"])["displayName"], json.loads(f["payload"])["attempts"])
                           for f in failed_records(r, "default"))
    native_shape = redis_shape(redis_server)

    assert native_failed == php_failed, (native_failed, php_failed)
    # attempts per job class: the fixture log has ids; map ids to classes through the failed
    # payloads and count the rest (markers and string jobs run once each)
    per_class = collections.Counter()
    for job_id, n in runs.items():
        per_class[names.get(job_id, "ok")] += n
    assert per_class["App\\Jobs\\AlwaysFailsJob"] == php_attempts["AlwaysFailsJob"] == 3
    assert per_class["App\\Jobs\\MaxExceptionsJob"] == php_attempts["MaxExceptionsJob"] == 2
    assert per_class["App\\Jobs\\TimeoutJob"] == php_attempts["TimeoutJob"] == 2
    assert per_class["ok"] == php_attempts["MarkerJob"] + php_attempts["string"] == 5
    assert native_shape == php_shape, (native_shape, php_shape)


def test_mixed_fleet_shares_a_queue_both_ways(master_factory, redis_server, laravel_app, tmp_path):
    """qpool releases a job that queue:work then runs, and the other way round."""
    app = laravel_app
    r = redis_server.client()
    log = tmp_path / "fixture.log"
    app.dispatch("AlwaysFailsJob", tag="mixed")  # tries 3, backoff [1, 2]
    # Both runners take the backoff from the payload. A 1 s backoff let the first runner take
    # attempt 2 before the test could stop it (a release at x.98 s is due at x+1.00 s), so the
    # test lengthens it and makes each handed-over job due itself, when the runner has stopped.
    ready = PREFIX + "queues:default"
    payload = json.loads(r.lindex(ready, 0))
    payload["backoff"] = "300,300"
    r.lset(ready, 0, json.dumps(payload, separators=(",", ":")))
    delayed = PREFIX + "queues:default:delayed"

    def make_due():
        (member, _), = r.zrange(delayed, 0, -1, withscores=True)
        r.zadd(delayed, {member: 0})
        return json.loads(member)

    native = master_factory(redis_server, "native")
    native.write_config(native_exec_pool(app, log, "tries = 1;"))
    native.start()
    wait_for(lambda: len([l for l in read_fixture_log(log) if l[0] == "job"]) == 1 and
             queue_state(r, "default")["delayed"] == 1, 20, what="attempt 1 by qpool, released")
    assert native.stop() == 0
    assert make_due()["attempts"] == 1

    php = master_factory(redis_server, "php")
    php.write_config(queue_work_pool(app, processes=1))
    php.start()
    wait_for(lambda: len(markers(app, "AlwaysFailsJob")) == 1 and queue_state(r, "default")["delayed"] == 1,
             30, what="attempt 2 by queue:work, released")
    assert php.stop() == 0
    assert markers(app, "AlwaysFailsJob")[0]["attempt"] == 2
    assert make_due()["attempts"] == 2

    native2 = master_factory(redis_server, "native2")
    native2.write_config(native_exec_pool(app, log, "tries = 1;"))
    native2.start()
    wait_for(lambda: len(failed_records(r, "default")) == 1, 30, what="attempt 3 by qpool, failed")
    jobs = [l for l in read_fixture_log(log) if l[0] == "job"]
    assert [l[3] for l in jobs] == ["1", "3"]
    rec = failed_records(r, "default")[0]
    assert json.loads(rec["payload"])["attempts"] == 2
    st = queue_state(r, "default")
    assert st["ready"] == st["delayed"] == st["reserved"] == 0
