"""Laravel 8, 10 and 13: the same jobs run once by `php artisan queue:work` and
once by qpool's native worker with the PHP adapter (php/qpool-handler.php)
give the same job side effects, the same queue events seen by an app
listener, the same failed_jobs and job_batches rows (ids and times aside) and
the same final Redis state. 8 runs on the host; 10 and 13 in Debian roots
(tests/integration/laravel_roots.py). Timeouts, the documented difference,
are not in the parity scenarios; they, the adapter's signal events and the
adapter without /proc have tests of their own below.
"""
import collections
import json
import os
import re
import shutil
import signal
import subprocess

import pytest

from conftest import make_payload, wait_for
from laravel_roots import argv_conf, laravel_version, version_app  # noqa: F401 (fixtures)
from test_laravel import redis_shape

# Jobs each scenario leaves in failed_jobs (fixture:parity dispatches them).
FAILED_BY_SCENARIO = {
    "plain": 0, "tries_backoff": 1, "release": 0, "fail": 1, "max_exceptions": 1, "retry_until": 1,
    "chain": 1, "batch": 1, "unique": 0, "without_overlapping": 1, "rate_limited": 0, "encrypted": 0,
    "missing_models": 1, "attributes": 2, "dont_retry": 1, "debounce": 0,
}
# Jobs each scenario leaves delayed for good (the rate-limited one waits an hour).
DELAYED_BY_SCENARIO = {"rate_limited": 1}

# Worker events that depend on how the worker polls and stops, not on the
# jobs (docs/laravel.md): WorkerIdle when a poll finds nothing (the adapter is
# handed jobs, it never polls); WorkerInterrupted on SIGTERM, which qpool
# sends queue:work to stop it, while it stops the adapter with EOF on its
# request channel (the adapter raises it when it does get a signal).
NOT_FROM_JOBS = {"WorkerIdle", "WorkerInterrupted"}

SCENARIOS_8 = ["plain", "tries_backoff", "release", "fail", "max_exceptions", "retry_until", "chain", "batch",
               "unique", "without_overlapping", "rate_limited", "encrypted", "missing_models"]
EXPECTED_SCENARIOS = {"8": SCENARIOS_8, "10": SCENARIOS_8,
                      "13": SCENARIOS_8 + ["attributes", "dont_retry", "debounce"]}

# Every queue event class each version has that queue:work raises in these
# scenarios (NOT_FROM_JOBS aside); both runs must show each of them.
EXPECTED_EVENTS = {
    "8": {"JobProcessing", "JobProcessed", "JobExceptionOccurred", "JobFailed", "JobQueued", "Looping",
          "WorkerStopping"},
}
EXPECTED_EVENTS["10"] = EXPECTED_EVENTS["8"] | {"JobPopping", "JobPopped", "JobQueueing", "JobReleasedAfterException"}
EXPECTED_EVENTS["13"] = EXPECTED_EVENTS["10"] | {"JobAttempted", "JobReleased", "JobDebounced", "WorkerStarting"}


# The app's cache prefix as qpool needs it (docs/configuration.md, cache_prefix):
# 8 and 10 add ":", 11+ use cache.prefix verbatim.
CACHE_PREFIX = {"8": "laravel_cache:", "10": "laravel_cache:", "13": "laravel_cache"}


def pool(name, app, argv_key, argv):
    return ('{ name = "%s"; queues = ["default"]; processes = 1; cache_prefix = "%s"; %s\n  %s = %s; }'
            % (name, CACHE_PREFIX[app.version.name], app.env_conf(), argv_key, argv))


def queue_work_pool(app):
    return pool("php", app, "command", argv_conf(app.queue_work_argv()))


def adapter_pool(app, preload=True):
    return pool("qpool", app, "handler", '{ type = "pipe"; command = %s; }%s'
                % (argv_conf(app.adapter_argv()), "" if preload else "; preload = false"))


class Snapshot:
    """Redis (DB 0 and 1) and the sqlite database right after dispatch, so that
    the second run starts from exactly the same jobs (same uuids)."""

    def __init__(self, redis_server, app):
        self.keys = {}
        for db in (0, 1):
            c = redis_server.client(db=db)
            self.keys[db] = [(k, c.pttl(k), c.dump(k)) for k in c.keys("*")]
        self.known = set()  # uuids and ids of the jobs dispatched before the runs
        k = "laravel_database_queues:default"
        c = redis_server.client()
        for raw in c.lrange(k, 0, -1) + c.zrange(k + ":delayed", 0, -1):
            p = json.loads(raw)
            self.known.update([p.get("uuid"), p.get("id")])
        self.db = app.db.with_suffix(".snapshot")
        shutil.copyfile(str(app.db), str(self.db))

    def restore(self, redis_server, app):
        for db in (0, 1):
            c = redis_server.client(db=db)
            c.flushdb()
            for k, pttl, blob in self.keys[db]:
                c.restore(k, max(pttl, 0), blob)
        shutil.copyfile(str(self.db), str(app.db))
        app.markers.write_text("")


def settled(app, r, failed, delayed):
    k = "laravel_database_queues:default"
    return (r.llen(k) == 0 and r.zcard(k + ":reserved") == 0 and r.zcard(k + ":delayed") == delayed
            and len(app.failed_jobs()) == failed)


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def masked(text, known):
    """Uuids of jobs dispatched during a run (a chain's next job) differ
    between the runs: each becomes <new>. Those both runs start with stay."""
    return UUID.sub(lambda m: m.group(0) if m.group(0) in known else "<new>", text)


def payload_for_compare(payload, known):
    """A failed job's payload as both runs must agree on it: qpool's due-time
    stamp on the copies it released taken out, keys sorted (the stamp is one
    more key in the table Lua's cjson re-encodes at the next pop, so the keys
    can come out in another order: docs/laravel.md, Differences), and the
    uuid, id and createdAt of a job dispatched during the run masked."""
    p = json.loads(payload)
    p.pop("qpoolAvailableAt", None)
    if p.get("uuid") not in known:
        p.update({"uuid": "<new>", "id": "<new>"}, **({"createdAt": "<time>"} if "createdAt" in p else {}))
    return masked(json.dumps(p, sort_keys=True), known)


def outcome(app, redis_server, known):
    ms = app.read_markers()
    runs = sorted((m["job"], m.get("tag"), m["attempt"]) for m in ms if "event" not in m)
    hooks = sorted((m["job"], m.get("tag"), m["class"], m["message"]) for m in ms if m.get("event") == "failed_hook")
    job_events = collections.Counter((m["event"], m["job"], m.get("attempts"), m.get("exception"))
                                     for m in ms if m.get("event") not in (None, "failed_hook") and m.get("job"))
    worker_events = {m["event"] for m in ms if m.get("event") not in (None, "failed_hook") and not m.get("job")}
    rows = sorted((masked(f["uuid"], known), f["connection"], f["queue"], payload_for_compare(f["payload"], known),
                   f["exception"].split(" in /")[0].split("\n")[0]) for f in app.failed_jobs())
    batches = sorted((b["name"], b["total_jobs"], b["pending_jobs"], b["failed_jobs"], masked(b["failed_job_ids"], known),
                      b["cancelled_at"] is None, b["finished_at"] is None)
                     for b in app.table("select * from job_batches"))
    items = app.table("select * from parity_items")
    return {"runs": runs, "hooks": hooks, "job_events": job_events, "worker_events": worker_events - NOT_FROM_JOBS,
            "failed_jobs": rows, "job_batches": batches, "items": items, "redis": redis_shape(redis_server)}


def run_once(master, app, r, conf, failed, delayed, what):
    master.write_config(conf)
    master.start()
    try:
        wait_for(lambda: settled(app, r, failed, delayed), 240, interval=0.25, what=what)
    finally:
        assert master.stop(60) == 0
    log = master.log()
    assert not re.search(r"PHP (Deprecated|Warning|Notice)|Deprecated: ", log), log[-4000:]
    return log


def test_same_jobs_same_results_as_queue_work(master_factory, redis_server, version_app):
    app = version_app
    r = redis_server.client()
    v = app.version.name
    res = app.artisan("fixture:parity")
    scenarios = json.loads(res.stdout.strip().splitlines()[-1])
    assert scenarios == EXPECTED_SCENARIOS[v], "Laravel %s dispatched %s" % (v, scenarios)
    failed = sum(FAILED_BY_SCENARIO[s] for s in scenarios)
    delayed = sum(DELAYED_BY_SCENARIO.get(s, 0) for s in scenarios)
    snap = Snapshot(redis_server, app)
    app.markers.write_text("")

    run_once(master_factory(redis_server, "php"), app, r, queue_work_pool(app), failed, delayed,
             "queue:work on Laravel %s to finish" % v)
    php = outcome(app, redis_server, snap.known)

    # preload on (the default: one zygote boots the app, handlers are its forks), then off
    for preload in (True, False):
        snap.restore(redis_server, app)
        log = run_once(master_factory(redis_server, "qpool-%s" % ("preload" if preload else "boot")), app, r,
                       adapter_pool(app, preload), failed, delayed,
                       "qpool + the adapter on Laravel %s to finish (preload %s)" % (v, preload))
        assert re.search(r"Laravel %s\.\d+\.\d+ booted from %s " % (v, app.app_inner), log), log[-4000:]
        assert ("forked by zygote" in log) == preload, log[-4000:]
        qp = outcome(app, redis_server, snap.known)

        for key in ("runs", "hooks", "failed_jobs", "job_batches", "items", "job_events", "worker_events", "redis"):
            assert qp[key] == php[key], "%s differ on Laravel %s (preload %s):\n%s" % (
                key, v, preload, difference(php[key], qp[key]))
    check_scenarios(v, php)


def difference(php, qp):
    """What only queue:work and only qpool had (short, for the failure message)."""
    if isinstance(php, dict):
        php, qp = collections.Counter(php.items()) if not isinstance(php, collections.Counter) else php, \
            collections.Counter(qp.items()) if not isinstance(qp, collections.Counter) else qp
    else:
        php, qp = collections.Counter(map(repr, php)), collections.Counter(map(repr, qp))
    only = lambda a, b: sorted(str(x)[:600] for x in (a - b).elements())
    return "only queue:work: %s\nonly qpool: %s" % (only(php, qp), only(qp, php))


def events_of(out):
    return {e for e, _, _, _ in out["job_events"]} | out["worker_events"]


def check_scenarios(v, out):
    """What the scenarios must have done (both runs are equal by now)."""
    missing = EXPECTED_EVENTS[v] - events_of(out)
    assert not missing, "Laravel %s: events never raised: %s" % (v, sorted(missing))
    runs = collections.Counter((job, tag) for job, tag, _ in out["runs"])
    assert runs[("AlwaysFailsJob", "tries")] == 3 and runs[("MaxExceptionsJob", "maxexc")] == 2
    assert runs[("ReleaseJob", "release")] == 2 and runs[("FlakyUntilJob", "until-future")] == 3
    assert runs[("ExpiredUntilJob", "until-past")] == 0 and runs[("OverlapJob", "overlap")] == 0
    assert [runs[("MarkerJob", "chain-%d" % i)] for i in (1, 2, 3)] == [1, 1, 1]
    assert runs[("MarkerJob", "chainf-1")] == 1 and runs[("MarkerJob", "chainf-3")] == 0
    assert runs[("UniqueJob", "unique")] == 1 and runs[("RateLimitedJob", "ratelimited")] == 1
    assert runs[("EncryptedJob", "encrypted")] == 1 and runs[("MissingModelJob", "missing-delete")] == 0
    (batch,) = out["job_batches"]  # allowFailures: one failed, so one pending, not finished
    assert batch[:4] == ("parity", 3, 1, 1) and batch[5:] == (True, True), batch
    assert len(json.loads(batch[4])) == 1 and "<new>" not in batch[4], batch
    failed = {json.loads(payload)["displayName"].split("\\")[-1]: text for _, _, _, payload, text in out["failed_jobs"]}
    assert failed["OverlapJob"].startswith("Illuminate\\Queue\\MaxAttemptsExceededException: App\\Jobs\\OverlapJob ")
    assert failed["ExpiredUntilJob"].startswith("Illuminate\\Queue\\MaxAttemptsExceededException: ")
    assert failed["MissingModelFailJob"].startswith("Illuminate\\Database\\Eloquent\\ModelNotFoundException: ")
    assert failed["MaxExceptionsJob"] == "RuntimeException: max exceptions fails"
    if v != "8":
        released = sorted(a for e, job, a, _ in out["job_events"].elements()
                          if e == "JobReleasedAfterException" and job == "App\\Jobs\\AlwaysFailsJob")
        assert released == [1, 2], released
    if v == "13":
        assert runs[("AttributesJob", "attributes")] == 5 and runs[("AttributesFailJob", "attributes-fail")] == 2
        assert runs[("DontRetryJob", "dontretry")] == 1
        assert failed["DontRetryJob"] == "App\\Exceptions\\DontRetryException: do not retry me"
        payloads = {json.loads(p)["displayName"].split("\\")[-1]: json.loads(p) for _, _, _, p, _ in out["failed_jobs"]}
        attrs = payloads["AttributesJob"]  # #[Tries(5)] #[Backoff([3, 7])] #[Timeout(9)]
        assert (attrs["maxTries"], attrs["backoff"], attrs["timeout"]) == (5, "3,7", 9), attrs
        attrs = payloads["AttributesFailJob"]  # #[Tries(4)] #[Backoff(1)] #[MaxExceptions(2)]
        assert (attrs["maxTries"], attrs["backoff"], attrs["maxExceptions"]) == (4, "1", 2), attrs
        assert failed["AttributesJob"].startswith("Illuminate\\Queue\\MaxAttemptsExceededException: ")
        assert runs[("DebouncedJob", "debounce-1")] == 0 and runs[("DebouncedJob", "debounce-2")] == 1


# ---------------------------------------------------------------- no /proc

def find_process(argv):
    """Pids (host view) of live processes whose command line is exactly argv."""
    want = "\0".join(argv) + "\0"
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d) as f:
                    if f.read() == want:
                        pids.append(int(d))
            except OSError:
                pass
    return pids


def held_pipes(pid):
    out = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out.add(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return out


def start_hidden_proc_adapter(app, channel, err):
    """The adapter in a mount namespace of its own where an empty tmpfs hides
    /proc; returns (process, request writer, response reader, protocol pipes)."""
    env = dict(app.env, QPOOL_PHP_FFI="1")
    script = 'mount -t tmpfs none "$0" && exec "$@"'
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
            str(app.version.host("/proc"))] + app.adapter_argv()
    with open(err, "wb") as errf:
        if channel == "stdio":
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf,
                                    start_new_session=True)
            ends = (proc.stdin.fileno(), proc.stdout.fileno())
            return proc, proc.stdin, proc.stdout, {"pipe:[%d]" % os.fstat(fd).st_ino for fd in ends}
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        env.update(QPOOL_PROTOCOL="2", QPOOL_REQUEST_FD=str(req_r), QPOOL_RESPONSE_FD=str(resp_w))
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=errf, pass_fds=(req_r, resp_w), start_new_session=True)
    pipes = {"pipe:[%d]" % os.fstat(fd).st_ino for fd in (req_r, resp_w)}
    os.close(req_r)
    os.close(resp_w)
    return proc, os.fdopen(req_w, "wb"), os.fdopen(resp_r, "rb"), pipes


@pytest.mark.parametrize("channel", ["fds", "stdio"])
def test_without_proc_the_protocol_pipes_are_still_close_on_exec(version_app, tmp_path, channel):
    """An adapter that cannot read /proc/self/fd (a root without /proc) finds
    the protocol descriptors by number, still marks them close-on-exec (and,
    on stdin/stdout, still moves them), and says so: a process a job starts
    holds none of them."""
    app = version_app
    err = tmp_path / "adapter.stderr"
    proc, req, resp, pipes = start_hidden_proc_adapter(app, channel, err)
    seconds = "%d.5" % (4000 + os.getpid() % 1000 + (500 if channel == "stdio" else 0))
    spawned = []
    try:
        with req, resp:
            assert json.loads(resp.readline()) == {"type": "ready", "protocol": 2, "pop_run": True}, err.read_text()
            payload = make_payload(job="App\\Handlers\\SpawnHandler@handle", data={"seconds": seconds})
            raw = json.dumps(payload, separators=(",", ":"))
            req.write(json.dumps({"type": "job", "seq": 1, "id": payload["id"], "uuid": payload["uuid"],
                                  "name": payload["job"], "queue": "default", "connection": "redis",
                                  "attempts": 1, "max_tries": 1, "timeout": 60, "payload": raw}).encode() + b"\n")
            req.flush()
            assert json.loads(resp.readline()) == {"seq": 1, "status": "done"}, err.read_text()
            spawned = wait_for(lambda: find_process(["sleep", seconds]), 30, what="the job's sleep")
            held = set().union(*(held_pipes(p) for p in spawned))
            assert not held & pipes, (held, pipes)
        assert proc.wait(60) == 0
    finally:
        for pid in spawned:
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = err.read_text()
    assert "no /proc/self/fd (is /proc mounted?)" in text, text
    expect = {"fds": "(protocol channel: fds)", "stdio": "(protocol channel: moved)"}[channel]
    assert expect in text, text


# ---------------------------------------------------------------- timeouts and signals

def has_event(app, name):
    """Does this version's framework have Illuminate\\Queue\\Events\\<name>?"""
    return app.version.host("/usr/share/php/Illuminate/Queue/Events/%s.php" % name).exists()


def test_a_timeout_that_fails_the_job_raises_job_timed_out(master, redis_server, version_app):
    """TimeoutJob ($timeout = 1, $tries = 2, sleeps 10 s): qpool kills both
    attempts; the failure request raises JobTimedOut (where the version has
    it) before JobFailed, with the exception this version builds."""
    app = version_app
    r = redis_server.client()
    master.write_config(pool("qpool", app, "handler", '{ type = "pipe"; command = %s; }'
                             % argv_conf(app.adapter_argv())))
    master.start()
    app.dispatch("TimeoutJob", tag="to")
    wait_for(lambda: settled(app, r, 1, 0), 120, interval=0.25, what="the timeout failure")
    ms = app.read_markers()
    assert [m["attempt"] for m in ms if m.get("job") == "TimeoutJob" and "event" not in m] == [1, 2]
    timed_out = [m["attempts"] for m in ms if m.get("event") == "JobTimedOut"]
    assert timed_out == ([2] if has_event(app, "JobTimedOut") else []), timed_out
    (row,) = app.failed_jobs()
    expect = ("Illuminate\\Queue\\TimeoutExceededException: App\\Jobs\\TimeoutJob has timed out."
              if has_event(app, "JobTimedOut") else "Illuminate\\Queue\\MaxAttemptsExceededException: ")
    assert row["exception"].startswith(expect), row["exception"][:300]


def test_sigterm_to_the_adapter_raises_worker_interrupted_and_stopping(version_app, tmp_path):
    app = version_app
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    env = dict(app.env, QPOOL_PROTOCOL="2", QPOOL_REQUEST_FD=str(req_r), QPOOL_RESPONSE_FD=str(resp_w))
    err = tmp_path / "adapter.stderr"
    with open(err, "wb") as errf:
        proc = subprocess.Popen(app.adapter_argv(), env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=errf, pass_fds=(req_r, resp_w),
                                start_new_session=True)
    os.close(req_r)
    os.close(resp_w)
    try:
        with os.fdopen(req_w, "wb"), os.fdopen(resp_r, "rb") as resp:
            assert json.loads(resp.readline()) == {"type": "ready", "protocol": 2, "pop_run": True}, err.read_text()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    names = [m["event"] for m in app.read_markers() if "event" in m]
    expect = (["WorkerInterrupted"] if has_event(app, "WorkerInterrupted") else []) + ["WorkerStopping"]
    assert names == expect, (names, err.read_text())
