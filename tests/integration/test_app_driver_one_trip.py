"""app_driver pools, one round trip per job (issue 30, docs/benchmarks.md
"Jobs/s beside queue:work"): a handler whose ready line says "pop_run" gets
pop requests with "run": true and answers each twice, "popped" at once and
the run's outcome after it, with no `run` request between. A handler that
does not say so still gets `pop` then `run`. The handler here is a small
Python one that logs every request it reads (the wire as the handler sees
it), so the count of requests per job is exact; no PHP needed."""
import json
import re

from conftest import PYTHON, wait_for

HANDLER = r'''
import json, os, signal, sys, time
mode, wire, jobs_file = sys.argv[1], sys.argv[2], sys.argv[3]
req = os.fdopen(int(os.environ["QPOOL_REQUEST_FD"]), "r")
res = os.fdopen(int(os.environ["QPOOL_RESPONSE_FD"]), "w")
def send(m):
    res.write(json.dumps(m) + "\n"); res.flush()
def log(m):
    with open(wire, "a") as f:
        f.write(json.dumps(dict(m, pid=os.getpid())) + "\n")
def take():
    with open(jobs_file) as f:
        left = int(f.read() or 0)
    if left <= 0:
        return None
    with open(jobs_file, "w") as f:
        f.write(str(left - 1))
    return left
def job(n, runtime, timeout=30):
    return {"name": "Fake\\Job", "queue": "default", "id": "j%d" % n, "uuid": None, "attempts": 1,
            "wait_ms": -1, "timeout": timeout, "runtime_ms": runtime}
def starved(m, n):
    # the worker gets no CPU while the job runs (as on a loaded box): it reads
    # "popped" only after the job ran. Job 2 (timeout 1 s) is killed at its
    # timeout, as Laravel's timeout handler does; the others take 20 ms.
    os.kill(os.getppid(), signal.SIGSTOP)
    try:
        send({"seq": m["seq"], "status": "popped", "job": job(n, -1, 1 if n == 2 else 30)})
        t0 = time.monotonic()
        time.sleep(1.1 if n == 2 else 0.02)
        rt = (time.monotonic() - t0) * 1000
    finally:
        os.kill(os.getppid(), signal.SIGCONT)
    if n == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    send({"seq": m["seq"], "status": "done", "job": job(n, rt)})
send(dict({"type": "ready", "protocol": 2}, **({"pop_run": True} if mode != "old" else {})))
held = None
for line in req:
    m = json.loads(line)
    log(m)
    if m["type"] == "pop":
        n = take()
        if n is None:
            send({"seq": m["seq"], "status": "empty"}); continue
        if mode == "starved":
            starved(m, n); continue
        if mode == "nojob" and n == 3:
            # "popped" with no job object, and the job runs: the handler is busy
            log({"type": "_nojob"})
            send({"seq": m["seq"], "status": "popped"})
            time.sleep(3)
            send({"seq": m["seq"], "status": "done", "job": job(n, 0.5)})
            continue
        send({"seq": m["seq"], "status": "popped", "job": job(n, -1)})
        if mode == "crash" and n == 2:
            for _ in range(600):  # until qpool read "popped" (it logs Processing), then a line of the job's output
                with open(sys.argv[4]) as f:
                    if "Processing Fake\\Job [j2]" in f.read():
                        break
                time.sleep(0.05)
            sys.stdout.write("dying in the job\n"); sys.stdout.flush()
            os._exit(3)  # the handler dies while it runs the job it popped
        if m.get("run"):
            send({"seq": m["seq"], "status": "done", "job": job(n, 0.5)})
        else:
            held = n
    elif m["type"] == "run":
        send({"seq": m["seq"], "status": "done", "job": job(held, 0.5)})
    else:
        send({"seq": m["seq"], "status": "ok"})
'''

JOBS = 5


def run_pool(master_factory, redis_server, tmp_path, mode, want, count=JOBS):
    script = tmp_path / "fake-app-handler.py"
    script.write_text(HANDLER)
    wire, jobs = tmp_path / ("wire-%s.jsonl" % mode), tmp_path / ("jobs-%s" % mode)
    jobs.write_text(str(JOBS))
    m = master_factory(redis_server, "m-" + mode)
    handler_mode = "new" if mode == "crash" else mode
    m.write_config('{ name = "fake"; queues = ["default"]; processes = 1; queue_connection = "database";'
                   ' app_driver = true; tries = 1; timeout = 30; sleep = 0.2; job_log = true;'
                   ' handler = { type = "pipe"; command = ["%s", "%s", "%s", "%s", "%s", "%s"]; }; }'
                   % (PYTHON, script, "crash" if mode == "crash" else handler_mode, wire, jobs, m.log_path))
    m.start()
    wait_for(lambda: sum(m.count_log(r"%s\s+Fake\\Job" % k) for k in want) >= count, 60,
             what="the %d jobs to be recorded (%s)" % (count, mode))
    m.stop()
    return m, requests(wire)


def requests(wire):
    try:
        return [json.loads(line) for line in wire.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def test_one_request_per_job_when_the_handler_says_pop_run(master_factory, redis_server, tmp_path):
    m, wire = run_pool(master_factory, redis_server, tmp_path, "new", ["Processed"])
    assert m.count_log(r"Processed\s+Fake\\Job") == JOBS, m.log()
    runs = [r for r in wire if r["type"] == "run"]
    pops = [r for r in wire if r["type"] == "pop"]
    assert not runs, "a run request went out though the handler runs the job with its pop: %s" % runs
    assert all(r.get("run") is True for r in pops), pops
    # one request per job, plus the empty pops while idle (each answered "empty")
    assert len(pops) >= JOBS
    assert [r["seq"] for r in wire] == list(range(1, len(wire) + 1))


def test_two_requests_per_job_for_a_handler_without_pop_run(master_factory, redis_server, tmp_path):
    m, wire = run_pool(master_factory, redis_server, tmp_path, "old", ["Processed"])
    assert m.count_log(r"Processed\s+Fake\\Job") == JOBS, m.log()
    assert len([r for r in wire if r["type"] == "run"]) == JOBS
    assert not any("run" in r for r in wire if r["type"] == "pop")


def test_a_handler_dying_after_popped_is_the_jobs_crash(master_factory, redis_server, tmp_path):
    m, wire = run_pool(master_factory, redis_server, tmp_path, "crash", ["Processed", "Crashed"])
    log = m.log()
    assert m.count_log(r"Crashed\s+Fake\\Job \[j2\]") == 1, log
    assert m.count_log(r"Processed\s+Fake\\Job") == JOBS - 1, log
    # review of 5eba553c, 5: the handler's output during the job is the popped job's, not "(pop)"'s
    assert m.count_log(r"job j2 stdout: dying in the job") == 1, log
    assert not [r for r in wire if r["type"] == "run"]


def test_the_jobs_clock_starts_at_the_pop_when_the_worker_is_starved(master_factory, redis_server, tmp_path):
    """Review of 5eba553c, MUST 1: with one trip the job starts when the
    handler reads the pop, so qpool's clock starts when it wrote the pop, not
    when it read "popped". A worker that gets no CPU meanwhile still records a
    20 ms job at the handler's 20 ms (not ~0 ms), and a job killed at its
    timeout as TimedOut (not Crashed). Load only lengthens what is measured."""
    m, wire = run_pool(master_factory, redis_server, tmp_path, "starved", ["Processed", "Crashed", "TimedOut"])
    log = m.log()
    assert m.count_log(r"TimedOut\s+Fake\\Job \[j2\]") == 1, log
    assert m.count_log(r"Crashed\s+Fake\\Job") == 0, log
    ms = [float(x) for x in re.findall(r"Processed\s+Fake\\Job \[j\d\] attempt 1 ([0-9.]+) ms", log)]
    assert len(ms) == JOBS - 1, log
    assert all(x >= 19.5 for x in ms), ms  # the handler's own figure: it slept 20 ms
    assert not [r for r in wire if r["type"] == "run"]


def test_a_popped_without_a_job_kills_the_handler_instead_of_asking_it_again(master_factory, redis_server, tmp_path):
    """Review of 5eba553c, SHOULD 2: a "popped" answer with no job object to a
    pop with "run": true leaves the handler maybe running a job; qpool must
    not send it another request (it would read a stale outcome and kill it
    mid-job later), but kill it at once and start a fresh one."""
    m, wire = run_pool(master_factory, redis_server, tmp_path, "nojob", ["Processed"], count=JOBS - 1)
    log = m.log()
    assert "popped a job but did not say which, and may be running it" in log, log
    i = next(k for k, r in enumerate(wire) if r["type"] == "_nojob")
    after = [r for r in wire[i + 1:] if r["pid"] == wire[i]["pid"]]
    assert not after, "the handler was asked again while it ran the job it popped: %s" % after
    assert wire[i + 1:], "no fresh handler took the next pop"
    assert m.count_log(r"Processed\s+Fake\\Job") == JOBS - 1, log
