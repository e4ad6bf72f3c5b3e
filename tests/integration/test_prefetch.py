"""Native workers with prefetch > 1: several jobs per pop, the next pop sent
while the handler runs, and prefetched jobs that never started given back
untouched on every graceful stop."""
import json
import os
import random
import re
import signal
import time

import pytest

from conftest import (PREFIX, children_of, failed_records, kill_a_worker, make_payload, push, push_many, queue_state,
                      read_fixture_log, wait_for, with_their_handlers)
from test_worker import empty, jobs_in_log, native_pool


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def ready_raw(r, queue="default"):
    return r.lrange(PREFIX + "queues:" + queue, 0, -1)


def raw(p):
    return json.dumps(p, separators=(",", ":")).encode()


def round_trips(master):
    m = re.findall(r"exiting: (\d+) jobs \(\d+ failed\), (\d+) Redis round trips", master.log())
    return sum(int(j) for j, _ in m), sum(int(t) for _, t in m)


def start_paused(master, log, extra, processes=1):
    """Start a native pool and pause it, so a test can lay out the queue
    before the first pop takes a whole batch of it."""
    master.write_config(native_pool(log=log, processes=processes, extra=extra))
    master.start()
    master.wait_children("w", processes)
    master.signal(signal.SIGUSR2)
    wait_for(lambda: master.pool("w")["paused_workers"] == processes, 10, what="workers paused")


def behind_a_slow_job(master, r, log, ms, n):
    """Queue a job of ms milliseconds and n quick ones behind it, resume the
    paused pool and wait for the slow one to start."""
    slow = make_payload("sleep:%d" % ms)
    rest = [make_payload("ok") for _ in range(n)]
    push_many(r, "default", [slow] + rest)
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 1, 10, what="the slow job to start")
    return slow, rest


def test_every_job_runs_once_in_fewer_round_trips(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 16; job_log = false;")
    payloads = [make_payload("ok") for _ in range(500)]
    push_many(r, "default", payloads)
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) >= 500 and empty(r, "default"), 30, what="500 jobs")
    ids = [l[1] for l in jobs_in_log(log)]
    assert sorted(ids) == sorted(p["id"] for p in payloads), "each job exactly once"
    assert ids == [p["id"] for p in payloads], "one worker keeps the queue's order"
    assert all(l[3] == "1" for l in jobs_in_log(log))
    assert queue_state(r, "default") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}
    master.stop()
    jobs, trips = round_trips(master)
    assert jobs == 500
    # one pop (with the acks before it) per batch of up to 16, not one per job
    assert trips < 500 / 4, trips


def test_release_fail_and_backoff_are_unchanged(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log, extra="prefetch = 8; tries = 2; backoff = [30];"))
    master.start()
    fails = [make_payload("fail") for _ in range(3)]
    oks = [make_payload("ok") for _ in range(3)]
    t0 = time.time()
    push_many(r, "default", [fails[0], oks[0], fails[1], oks[1], fails[2], oks[2]])
    wait_for(lambda: len(jobs_in_log(log)) == 6 and queue_state(r, "default")["delayed"] == 3, 10,
             what="3 done, 3 released")
    delayed = r.zrange(PREFIX + "queues:default:delayed", 0, -1, withscores=True)
    for member, score in delayed:
        assert json.loads(member)["attempts"] == 1
        assert t0 + 29 <= score <= time.time() + 31, "released with the pool's backoff"
    assert queue_state(r, "default")["reserved"] == 0
    # make them due: the second attempt fails them for good (tries = 2)
    for member, _ in delayed:
        r.zadd(PREFIX + "queues:default:delayed", {member: 1})
    wait_for(lambda: len(failed_records(r, "default")) == 3, 15, what="3 failures")
    assert empty(r, "default")
    assert sorted(rec["uuid"].decode() for rec in failed_records(r, "default")) == sorted(p["uuid"] for p in fails)


def test_sigterm_gives_prefetched_jobs_back_untouched(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 8;")
    slow, rest = behind_a_slow_job(master, r, log, 1500, 5)
    st = queue_state(r, "default")
    assert st["ready"] == 0 and st["reserved"] == 6, "the five behind it were prefetched: %r" % st
    master.signal(signal.SIGTERM)
    assert master.wait_exit(30) == 0
    assert [l[1] for l in jobs_in_log(log)] == [slow["id"]], "only the running job ran"
    # back at the head of the queue, in order, byte for byte, attempts as before
    assert ready_raw(r) == [raw(p) for p in rest]
    assert queue_state(r, "default") == {"ready": 5, "delayed": 0, "reserved": 0, "notify": 5}


def test_pause_gives_prefetched_jobs_back_and_resume_runs_them(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 8;")
    slow, rest = behind_a_slow_job(master, r, log, 1000, 4)
    master.signal(signal.SIGUSR2)
    wait_for(lambda: master.pool("w")["paused_workers"] == 1, 10, what="worker paused again")
    wait_for(lambda: queue_state(r, "default")["reserved"] == 0, 10, what="the prefetched jobs given back")
    assert ready_raw(r) == [raw(p) for p in rest]
    assert len(jobs_in_log(log)) == 1
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 5 and empty(r, "default"), 10, what="the rest after resuming")
    assert all(l[3] == "1" for l in jobs_in_log(log)), "giving back cost no attempt"


def test_a_poison_payload_in_a_batch_is_moved_aside(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 8;")
    a, b, c = make_payload("ok"), make_payload("ok"), make_payload("ok")
    bad = b'{"job": "x", broken \xff'
    push(r, "default", a)
    push(r, "default", bad)
    push(r, "default", b)
    push(r, "default", c)
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 3 and len(failed_records(r, "default")) == 1, 10,
             what="3 jobs and one poison")
    assert [l[1] for l in jobs_in_log(log)] == [a["id"], b["id"], c["id"]]
    assert failed_records(r, "default")[0]["payload"] == bad
    assert queue_state(r, "default") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}


def test_max_jobs_never_prefetches_past_the_limit(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 8; max_jobs = 3;")
    push_many(r, "default", [make_payload("ok") for _ in range(7)])
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 7 and empty(r, "default"), 20, what="7 jobs")
    assert all(l[3] == "1" for l in jobs_in_log(log)), "no job was reserved by a worker that then left"
    assert master.count_log(r"exited with status 0 \(max_jobs reached\)") >= 2


def test_prefetched_jobs_go_back_while_a_long_job_runs_whose_reservation_is_extended(master, r, tmp_path):
    # review #14: prefetched jobs are not held behind a job that turned slow:
    # they go back at once, while it runs; its own reservation is renewed
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 4; retry_after = 2; timeout = 0;")
    # long enough to be still running after the waits below on a loaded machine
    push_many(r, "default", [make_payload("sleep:12000"), make_payload("ok"), make_payload("ok")])
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 1, 10, what="the long job to start")
    key = PREFIX + "queues:default:reserved"
    wait_for(lambda: r.zcard(key) == 1 and r.llen(PREFIX + "queues:default") == 2, 5,
             what="the two prefetched jobs to go back while the long one runs")
    # past retry_after: any worker (or queue:work) would migrate an expired
    # reservation back and run it a second time
    time.sleep(3.2)
    assert r.zcard(key) == 1
    assert r.zrangebyscore(key, "-inf", time.time()) == [], "the running job's reservation expired"
    # the give-backs' idempotency tokens live under qpool's own keys: Laravel
    # 13's allQueueNames() lists queues:* and must see only real queues
    laravel = {PREFIX + "queues:default" + s for s in ("", ":reserved", ":notify", ":delayed")}
    listed = {k.decode() for k in r.keys(PREFIX + "queues:*")}
    assert listed <= laravel, listed
    assert len(r.keys(PREFIX + "qpool:unpop:default:*")) == 2
    wait_for(lambda: len(jobs_in_log(log)) == 3 and empty(r, "default"), 40, what="the three jobs")
    assert all(l[3] == "1" for l in jobs_in_log(log)), "a given-back job lost an attempt"


def test_killed_worker_loses_no_prefetched_job(master, r, tmp_path):
    n = 3000
    log = tmp_path / "fixture.log"
    master.write_config(native_pool(log=log, processes=2, extra="prefetch = 16; retry_after = 2; tries = 0; "
                                                                  "job_log = false;"))
    payloads = [make_payload("sleep:1") for _ in range(n)]
    push_many(r, "default", payloads)
    master.start()
    rng = random.Random(7)
    kills, killed = 0, set()
    deadline = time.monotonic() + 300
    while queue_state(r, "default")["ready"] and time.monotonic() < deadline:
        kills += kill_a_worker(master, rng, killed)
        time.sleep(rng.uniform(0.3, 0.5))
    wait_for(lambda: empty(r, "default"), 120, interval=0.2, what="every job to be handled")
    runs = {}
    for line in read_fixture_log(log):
        if line[0] == "job":
            runs.setdefault(line[1], []).append(int(line[4]))
    assert set(runs) == {p["id"] for p in payloads}, "jobs never ran"
    killed = with_their_handlers(master, killed)
    for i, pids in runs.items():
        if len(pids) > 1:
            assert any(p in killed for p in pids[:-1]), "job %s ran twice with no kill: %s" % (i, pids)
    assert queue_state(r, "default") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}
    assert kills >= 3


@pytest.mark.parametrize("prefetch,at,ms,retry_after", [(4, 0, 0, 4), (2, 1, 0, 4), (4, 3, 1000, 8)])
def test_a_killed_workers_jobs_that_never_started_cost_no_attempt(master, r, tmp_path, prefetch, at, ms,
                                                                   retry_after):
    """Regression (issue 21): a job popped ahead was reserved with an attempt
    counted, so when its worker was killed before it started, it came back
    after retry_after and, with tries = 1, failed as attempted too many times
    without ever running. It is now held with its attempts as they were
    until it starts. The job at index `at` freezes its worker ms into its
    run: the first of a pop (at 0); a job popped ahead whose claim went with
    the pop sent ahead (prefetch 2, at 1); one whose claim waited (a pop was
    in flight), 1 s in, when its claim has been written (100 ms into a job)
    and the jobs popped ahead given back (prefetch 4, at 3; retry_after 8, so
    that no renewal, every 3 s, writes the claim first). Every other job is held
    uncounted (the first of the pop sent ahead too) or back in the queue,
    and runs after the kill."""
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = %d; retry_after = %d; tries = 1;" % (prefetch, retry_after))
    jobs = [make_payload("ok") for _ in range(10)]
    stopper = jobs[at] = make_payload("stopparent:%d" % ms)  # its handler freezes the worker mid-job
    push_many(r, "default", jobs)
    (worker,) = children_of(master.proc.pid)
    master.signal(signal.SIGCONT)
    wait_for(lambda: proc_state(worker) == "T", 10, what="the worker frozen by a job")
    held = {}
    for m in r.zrange(PREFIX + "queues:default:reserved", 0, -1):
        p = json.loads(m)
        held[p["id"]] = p["attempts"]
    assert held.pop(stopper["id"]) == 1, "the running job counts its attempt"
    assert set(held.values()) <= {0}, "jobs popped ahead count none: %s" % held
    os.kill(worker, signal.SIGKILL)
    others = {p["id"] for p in jobs} - {stopper["id"]}
    wait_for(lambda: others <= {l[1] for l in jobs_in_log(log)}, 40, what="the other jobs to run")
    wait_for(lambda: empty(r, "default"), 30, what="the queue to empty")
    failed = [json.loads(f["payload"])["id"] for f in failed_records(r, "default")]
    assert failed == [stopper["id"]], "only the job that was running used its one attempt: %s" % failed


def test_a_refused_claim_is_written_again_before_the_jobs_ack(master, r, tmp_path):
    """Regression (review of issue 21's change): a job's claim and its ack
    went out together; Redis had lost its scripts (SCRIPT FLUSH) and refused
    the claim (NOSCRIPT) but ran the ack (a ZREM of the claimed member, not
    there yet), which was then taken as written. The claim, written again
    after the scripts were loaded, left a reservation no one would ack: the
    finished job ran again after retry_after. A claim not run yet when its
    job's outcome is known is now dropped, and the outcome acts on the held
    reservation; an outcome that follows a claim Redis refused is written
    again after it."""
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 4; retry_after = 3;")
    jobs = [make_payload("ok") for _ in range(10)]
    stopper = jobs[3] = make_payload("stopparent:0")  # its claim waits: a pop is in flight
    push_many(r, "default", jobs)
    (worker,) = children_of(master.proc.pid)
    master.signal(signal.SIGCONT)
    wait_for(lambda: proc_state(worker) == "T", 10, what="the worker frozen by its fourth job")
    r.script_flush()
    os.kill(worker, signal.SIGCONT)
    wait_for(lambda: empty(r, "default"), 30, what="the queue to empty")
    time.sleep(4.5)  # past retry_after: a reservation left behind would be migrated and run again
    ids = [l[1] for l in jobs_in_log(log)]
    assert sorted(ids) == sorted(p["id"] for p in jobs), "each job once"
    assert queue_state(r, "default") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}
    assert failed_records(r, "default") == [], "finished jobs came back (and failed as attempted too many times)"
    assert stopper["id"] in ids


def test_a_finished_jobs_ack_does_not_wait_behind_a_long_job(master, r, tmp_path):
    # regression: the ack of a prefetched job that finished sat in the worker
    # until the next pop; behind a long job its reservation expired, and
    # another worker ran it again
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 8; retry_after = 2; timeout = 0;")
    # six behind the long one: more than half a batch, so no pop goes ahead
    # (which would carry the ack) before the long job starts
    push_many(r, "default", [make_payload("ok"), make_payload("sleep:12000")] + [make_payload("ok") for _ in range(6)])
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 2, 10, what="the long job to start")
    key = PREFIX + "queues:default:reserved"
    time.sleep(2.6)
    assert r.zrangebyscore(key, "-inf", time.time()) == [], "a reservation expired while its job was held"
    # the finished job was acked; the long one is reserved; the six behind it
    # went back to the queue while it runs (review #14)
    assert r.zcard(key) == 1
    assert r.llen(PREFIX + "queues:default") == 6
    wait_for(lambda: len(jobs_in_log(log)) == 8 and empty(r, "default"), 40, what="the eight jobs")
    assert all(l[3] == "1" for l in jobs_in_log(log))


def run_six_once(master, r, log, action, extra):
    """Six jobs of the action in a paused pool of two workers, resumed: each
    runs exactly once, at its first attempt. Returns the fixture log's runs."""
    start_paused(master, log, extra, processes=2)
    payloads = [make_payload(action) for _ in range(6)]
    push_many(r, "default", payloads)
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 6 and empty(r, "default"), 30, what="the six jobs")
    time.sleep(0.5)
    runs = jobs_in_log(log)
    assert sorted(l[1] for l in runs) == sorted(p["id"] for p in payloads), "each job exactly once"
    assert all(l[3] == "1" for l in runs), "given back with attempts unchanged"
    return runs


def test_jobs_turning_slow_are_shared_not_held(master, r, tmp_path):
    # regression: with every job slower than the prefetch threshold, the
    # prefetched ones waited (unrenewed) behind each other, expired, and were
    # run or failed by the other worker
    run_six_once(master, r, tmp_path / "fixture.log", "sleep:900", "prefetch = 4; retry_after = 2; tries = 1;")
    assert failed_records(r, "default") == []


def test_a_burst_of_jobs_of_tens_of_ms_is_shared_not_held_by_one_worker(master, r, tmp_path):
    # one pop takes the whole burst (the worker has run no job yet); after the
    # first 40 ms job the other five would wait 200 ms behind it while the
    # second worker idles: they go back, and both workers run them
    runs = run_six_once(master, r, tmp_path / "fixture.log", "sleep:40", "prefetch = 8;")
    assert len({l[4] for l in runs}) == 2, "both workers' handlers ran some: %s" % runs


def test_a_held_job_released_goes_back_without_the_twin_marker(master, r, tmp_path):
    # regression: a job popped ahead carries a qpoolTwin marker in its held
    # and reserved copies; released, the reserved copy went to :delayed with
    # it, so the next attempt's payload (and Laravel's failed_jobs row) had it
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 8; tries = 0; backoff = 60;")
    first, held = make_payload("ok"), make_payload("failuntil:2")
    push_many(r, "default", [first, held])
    master.signal(signal.SIGCONT)
    delayed = PREFIX + "queues:default:delayed"
    wait_for(lambda: r.zcard(delayed) == 1, 10, what="the held job to be released")
    (payload,) = r.zrange(delayed, 0, -1)
    released = json.loads(payload)
    assert "qpoolTwin" not in released, payload
    assert released["id"] == held["id"] and released["attempts"] == 1 and "qpoolAvailableAt" in released


def test_a_killed_workers_held_jobs_reach_the_handler_and_failed_store_without_the_twin_marker(master, r, tmp_path):
    """Review 2026-11-27 minor 1: the jobs a SIGKILLed worker held came back
    after retry_after with their qpoolTwin marker, and the next worker handed
    it on: to the handler's payload and, as here, to the failed store."""
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 4; retry_after = 2; tries = 1;")
    stopper = make_payload("stopparent:0")
    failing = [make_payload("fail") for _ in range(3)]
    push_many(r, "default", [stopper] + failing)
    (worker,) = children_of(master.proc.pid)
    master.signal(signal.SIGCONT)
    wait_for(lambda: proc_state(worker) == "T", 10, what="the worker frozen by a job")
    held = [json.loads(m) for m in r.zrange(PREFIX + "queues:default:reserved", 0, -1)]
    assert sum("qpoolTwin" in p for p in held) == 3, "the jobs popped ahead are held, marked"
    os.kill(worker, signal.SIGKILL)
    ids = {p["id"] for p in failing}
    wait_for(lambda: ids <= {json.loads(f["payload"])["id"] for f in failed_records(r, "default")}, 40,
             what="the held jobs to fail on another worker")
    for f in failed_records(r, "default"):
        assert "qpoolTwin" not in json.loads(f["payload"]), f["payload"]


def test_byte_identical_payloads_in_one_batch_are_not_lost(master, r, tmp_path):
    # regression: two identical payloads in one batch shared one :reserved
    # member, so giving both back returned only one
    log = tmp_path / "fixture.log"
    start_paused(master, log, "prefetch = 8;")
    twin, other = raw(make_payload("ok")), raw(make_payload("ok"))
    push(r, "default", raw(make_payload("sleep:1500")))
    for p in (twin, twin, other):
        push(r, "default", p)
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(jobs_in_log(log)) == 1, 10, what="the slow job to start")
    master.signal(signal.SIGTERM)
    assert master.wait_exit(30) == 0
    assert ready_raw(r) == [twin, twin, other]
    assert queue_state(r, "default") == {"ready": 3, "delayed": 0, "reserved": 0, "notify": 3}
