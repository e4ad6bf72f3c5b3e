"""Fleet-wide concurrency and rate limits (issue 33): the limited pop
decides in one script, before the job starts, with no attempt burned.

Every job here runs limit_records.py's exec handler, which records each
job's start and end; the invariants are read from those records, never
from timing: the [start, end] of a job lies inside the time it holds its
slot."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import urllib.request

from conftest import PREFIX, free_port, make_payload, push_many, wait_for
from limit_records import handler, max_overlap, records  # noqa: F401 (test_limits_fleet imports them from here)

LIMIT_A = 'limits = (\n  { class = "App\\\\Jobs\\\\A"; concurrency = 2; }\n);\n'

def pool(path, processes=4, queue="work"):
    return ('{ name = "work"; queues = ["%s"]; processes = %d; retry_after = 300;'
            ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }' % (queue, processes, path))


def start(master_factory, redis_server, name, path, limits, processes=4, queue="work", qpool=""):
    m = master_factory(redis_server, name)
    m.write_config(pool(path, processes, queue), qpool=qpool)
    m.conf.write_text(m.conf.read_text() + limits)
    return m.start()


def ready_attempts(rc, queue="work"):
    return [json.loads(p)["attempts"] for p in rc.lrange(PREFIX + "queues:" + queue, 0, -1)]


def test_concurrency_fleet_wide_no_attempt_burned(master_factory, redis_server, tmp_path):
    """Two masters, 4 workers each, one Redis: class A (concurrency 2) never
    runs more than 2 at once, its waiting jobs keep attempts 0, class B
    behind them in the same queue is not held up, every job runs once."""
    path, log = handler(tmp_path)
    rc = redis_server.client()
    a_jobs = [make_payload(job="App\\Jobs\\A") for _ in range(16)]
    b_jobs = [make_payload(job="App\\Jobs\\B") for _ in range(8)]
    push_many(rc, "work", a_jobs + b_jobs)
    start(master_factory, redis_server, "a", path, LIMIT_A)
    start(master_factory, redis_server, "b", path, LIMIT_A)
    seen_waiting = []

    def done():
        att = ready_attempts(rc)
        seen_waiting.extend(att)
        assert all(a == 0 for a in att), "a waiting job's attempts changed: %s" % att
        recs = records(log)
        return len(recs) == 24 and all(r["E"] for r in recs.values())
    wait_for(done, 120, interval=0.1, what="all 24 jobs to run")
    recs = records(log)
    assert seen_waiting, "no job was ever seen waiting"
    assert max_overlap(recs, "App\\Jobs\\A") <= 2
    assert max_overlap(recs, "App\\Jobs\\A") == 2  # the limit is used, not just respected
    # every job ran exactly once, its attempt the first
    for u, r in recs.items():
        assert len(r["S"]) == 1 and r["S"][0][1] == 1, (u, r)
    # B is not held up behind A: every B job started before the last A job did
    last_a = max(r["S"][0][3] for r in recs.values() if r["S"][0][0] == "App\\Jobs\\A")
    assert all(r["S"][0][3] < last_a for r in recs.values() if r["S"][0][0] == "App\\Jobs\\B")
    # the slots were given back
    wait_for(lambda: rc.zcard(PREFIX + "qpool:limit:|App\\Jobs\\A:run") == 0, 20, what="the slots to be given back")
    assert rc.llen(PREFIX + "queues:work") == 0 and rc.zcard(PREFIX + "queues:work:reserved") == 0


def test_a_poison_job_takes_no_slot(master_factory, redis_server, tmp_path):
    """A job the pop moves aside (it decodes but cannot be encoded again: a
    number out of range) takes no concurrency slot: the slot would have held
    its class up for the slot's lifetime (review of 2026-11-29)."""
    path, log = handler(tmp_path)
    rc = redis_server.client()
    poison = '{"uuid":"poison-1","displayName":"App\\\\Jobs\\\\A","job":"x","data":{},"attempts":0,"x":1e400}'
    rc.rpush(PREFIX + "queues:work", poison)
    rc.rpush(PREFIX + "queues:work:notify", 1)
    start(master_factory, redis_server, "a", path, LIMIT_A, processes=1)
    wait_for(lambda: rc.llen(PREFIX + "queues:work") == 0, 30, what="the poison job to be taken")
    wait_for(lambda: rc.zcard(PREFIX + "queues:work:reserved") == 0, 30, what="the poison job to be moved aside")
    assert rc.zcard(PREFIX + "qpool:limit:|App\\Jobs\\A:run") == 0
    assert not records(log)
    # the limited pop's record names its pool and host (its ARGV moved for them: review w5a #7)
    rec = rc.hgetall(PREFIX + "qpool:failed:job:poison-1")
    assert rec[b"pool"] == b"work" and rec[b"host"] == socket.gethostname().encode(), rec


def test_killed_worker_slot_comes_back(master_factory, redis_server, tmp_path):
    """A worker SIGKILLed while its job holds the only slot: the slot lapses
    (15 s without renewal, docs/operations.md) and another job of the class
    starts; until then it waits with its attempts at 0."""
    path, log = handler(tmp_path)
    rc = redis_server.client()
    limits = 'limits = (\n  { class = "App\\\\Jobs\\\\Long"; concurrency = 1; alert_after = 1; }\n);\n'
    port = free_port()
    m = start(master_factory, redis_server, "a", path, limits, processes=2,
              qpool='  http = { listen = "127.0.0.1:%d"; read_without_token = "all"; };' % port)
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Long") for _ in range(2)])
    first = wait_for(lambda: [r for r in records(log).values() if r["S"]], 30, what="a Long job to start")
    assert len(first) == 1
    time.sleep(1)  # the other worker pops meanwhile: held back, attempts unchanged
    assert len([r for r in records(log).values() if r["S"]]) == 1
    assert ready_attempts(rc) == [0]
    # seen: status (JSON and text) and /metrics show the slot in use and the job held back
    wait_for(lambda: (m.status().get("limits") or [{}])[0].get("waiting") == 1, 20, what="status to show the wait")
    lim = m.status()["limits"][0]
    assert lim["class"] == "App\\Jobs\\Long" and lim["queue"] is None and lim["concurrency"] == 1
    assert lim["in_use"] == 1 and lim["waited_s"] >= 0
    text = m.cli("status").stdout
    assert "App\\Jobs\\Long" in text and "1/1" in text, text

    def scrape():
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as res:
            return res.read().decode()

    want = ['qpool_limit_in_use{class="App\\\\Jobs\\\\Long",queue=""} 1',
            'qpool_limit_waiting{class="App\\\\Jobs\\\\Long",queue=""} 1']
    prom = wait_for(lambda: (lambda t: t if all(w in t for w in want) else None)(scrape()), 30,
                    what="/metrics to show the slot in use and the job waiting")
    if shutil.which("promtool"):
        res = subprocess.run(["promtool", "check", "metrics"], input=prom, capture_output=True, text=True, timeout=30)
        assert res.returncode == 0 and not res.stdout.strip() and not res.stderr.strip(), res
    # held back past alert_after: an alert fires (logged; alerts.command would get it too)
    m.wait_log(r'alert limit_wait firing: limit on class "App\\Jobs\\Long": limit_waited', 20)
    worker = first[0]["S"][0][2]
    os.kill(worker, signal.SIGKILL)
    killed = time.monotonic()
    second = wait_for(lambda: len([r for r in records(log).values() if r["S"]]) == 2, 45,
                      what="the second Long job to start once the slot lapsed")
    assert second
    print("second job started %.1f s after the kill" % (time.monotonic() - killed))
    assert all(r["S"][0][1] == 1 for r in records(log).values())
    # nothing held back any more: the alert resolves
    m.wait_log(r'alert limit_wait resolved: limit on class "App\\Jobs\\Long"', 30)


def test_rate_with_burst(master_factory, redis_server, tmp_path):
    """rate = "5/s", burst = 2 on queue r: at no moment have more jobs been
    popped than the burst plus 5 a second since before the master started,
    read on Redis's own clock (a slow machine only pops later), and the 15
    take at least (15 - 2) / 5 s to be popped."""
    path, log = handler(tmp_path)
    rc = redis_server.client()
    limits = 'limits = (\n  { queue = "r"; rate = "5/s"; burst = 2; }\n);\n'
    push_many(rc, "r", [make_payload(job="App\\Jobs\\Quick") for _ in range(15)])
    key = PREFIX + "queues:r"

    def redis_s():
        sec, usec = rc.time()
        return sec + usec / 1e6

    t0 = redis_s()
    start(master_factory, redis_server, "a", path, limits, processes=4, queue="r")
    deadline = time.monotonic() + 60
    while rc.llen(key) > 0 and time.monotonic() < deadline:
        popped = 15 - rc.llen(key)  # read before the clock: the bound below only grows
        allowed = 2 + 5 * (redis_s() - t0) + 1
        assert popped <= allowed, "%d popped %.2f s after the start, at 5/s with a burst of 2" % (
            popped, redis_s() - t0)
        time.sleep(0.05)
    assert rc.llen(key) == 0, "the 15 jobs were not all popped in 60 s"
    assert redis_s() - t0 >= (15 - 2) / 5 - 0.1, "15 jobs popped in %.2f s" % (redis_s() - t0)
    wait_for(lambda: len(records(log)) == 15, 60, interval=0.1, what="15 jobs to start")


def test_slot_given_back_when_the_payload_names_two_classes(master_factory, redis_server, tmp_path):
    """A payload with displayName twice: the limited pop (Lua's cjson: the
    last wins) takes a slot of class A, the worker (cJSON: the first wins)
    runs it as Quick. The worker gives back the slots the pop named, not a
    guess of its own from the class it read: the slot is free as soon as the
    job ends, not 15 s later when it lapses (review of 2026-11-29; a job of
    A running past the lapse would have let A run over its limit)."""
    path, log = handler(tmp_path)
    rc = redis_server.client()
    dup = ('{"uuid":"dup-1","displayName":"App\\\\Jobs\\\\Quick","displayName":"App\\\\Jobs\\\\A",'
           '"job":"Illuminate\\\\Queue\\\\CallQueuedHandler@call","maxTries":null,"timeout":null,'
           '"data":{"commandName":"App\\\\Jobs\\\\A","command":"x"},"attempts":0}')
    rc.rpush(PREFIX + "queues:work", dup)
    rc.rpush(PREFIX + "queues:work:notify", 1)
    run = PREFIX + "qpool:limit:|App\\Jobs\\A:run"
    start(master_factory, redis_server, "a", path, LIMIT_A.replace("concurrency = 2", "concurrency = 1"), processes=1)
    wait_for(lambda: records(log).get("dup-1", {}).get("E"), 30, what="the job to run and end")
    assert records(log)["dup-1"]["S"][0][0] == "App\\Jobs\\Quick"  # run under the first name
    # no other job exists: only the worker's END can empty the set before the 15 s lapse
    wait_for(lambda: rc.zcard(run) == 0, 10, what="the slot the pop took to be given back at the job's end")
