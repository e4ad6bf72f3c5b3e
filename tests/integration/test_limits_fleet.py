"""Issue 33's acceptance runs on one Redis: fleet-wide limits held by three
masters, a rate's 1 s windows, and a master SIGKILLed while it holds slots.

Jobs run in a persistent pipe handler (tests/fixtures/limit-handler.py) that
appends "S class uuid attempts pid ns" when a job starts and "E ..." when it
ends (time.time_ns(), one write each): a job's [start, end] lies inside the
time its worker holds the concurrency slot, so the number of jobs of a class
running at once, read from these records, can never exceed the slots taken.
Nothing here asserts a duration: the delays are printed, the throughput and
the rate's long-run average are figures of bench/run.py (`limits`)."""
import os
import signal
import time

from conftest import PREFIX, PYTHON, ROOT, make_payload, push_many, session_pids, wait_for
from test_limits import ready_attempts, records

LIMIT_HANDLER = str(ROOT / "tests" / "fixtures" / "limit-handler.py")
A, B, L = "App\\Jobs\\A", "App\\Jobs\\B", "App\\Jobs\\L"


def limit_conf(*items):
    return "limits = (\n  %s\n);\n" % ",\n  ".join(items)


def start(master_factory, redis_server, name, log, limits, processes=4, queue="work"):
    m = master_factory(redis_server, name)
    m.write_config('{ name = "work"; queues = ["%s"]; processes = %d; retry_after = 300;'
                   ' handler = { type = "pipe"; command = ["%s", "%s", "%s"]; }; }'
                   % (queue, processes, PYTHON, LIMIT_HANDLER, log))
    m.conf.write_text(m.conf.read_text() + limits)
    return m.start()


def overlap(recs, cls):
    """The most jobs of cls running at once (a job with no end record is
    still running)."""
    events = []
    for r in recs.values():
        for i, (c, _, _, s) in enumerate(r["S"]):
            if c != cls:
                continue
            e = r["E"][i][3] if i < len(r["E"]) else 1 << 62
            events += [(s, 1), (e, -1)]
    n = best = 0
    for _, d in sorted(events):  # at the same ns an end (-1) sorts before a start
        n += d
        best = max(best, n)
    return best


def started(recs, cls):
    return [r for r in recs.values() if r["S"] and r["S"][0][0] == cls]


def sample_pops(rc, key, total):
    """(Redis's TIME in s, jobs popped so far of total) of queue key, read in
    one MULTI: the limited pop reads TIME itself, so pops between two
    samples happened between their times by the scripts' own clock."""
    p = rc.pipeline(transaction=True)
    p.time()
    p.llen(key)
    (sec, usec), left = p.execute()
    return sec + usec / 1e6, total - left


def fullest_window(samples):
    """The most pops between two samples at most 1 s apart: (pops, its
    start from the first sample, its span), both in s."""
    worst, i = (0, 0.0, 0.0), 0
    for j in range(len(samples)):
        while samples[j][0] - samples[i][0] > 1.0:
            i += 1
        n = samples[j][1] - samples[i][1]
        if n > worst[0]:
            worst = (n, samples[i][0] - samples[0][0], samples[j][0] - samples[i][0])
    return worst


def test_three_masters_concurrency_5_beside_an_unlimited_class(master_factory, redis_server, tmp_path):
    """Issue 33's acceptance: 2,000 jobs of A (concurrency 5, 5 ms each)
    and 2,000 of B (no limit) interleaved in one queue, 3 masters x 4
    workers: never more than 5 A at once, every job ran exactly once with
    attempts 1, and nothing is left ready, reserved or holding a slot."""
    log = tmp_path / "jobs.log"
    log.touch()
    rc = redis_server.client()
    limits = limit_conf('{ class = "App\\\\Jobs\\\\A"; concurrency = 5; }')
    masters = [start(master_factory, redis_server, n, log, limits) for n in ("a", "b", "c")]
    for m in masters:  # all three wait on the queue before the jobs come
        wait_for(lambda: m.pool("work")["idle"] == 4, 60, what="4 idle workers on master %s" % m.tmp.name)
    jobs = []
    for _ in range(2000):
        jobs += [make_payload(job=A, data={"ms": 5}), make_payload(job=B, data={})]
    t0 = time.monotonic()
    push_many(rc, "work", jobs)

    def all_ended():
        recs = records(log)
        return len(recs) == 4000 and all(r["E"] for r in recs.values())
    wait_for(all_ended, 300, interval=0.5, what="4,000 jobs to run")
    took = time.monotonic() - t0
    recs = records(log)
    assert set(recs) == {j["uuid"] for j in jobs}
    for u, r in recs.items():  # exactly once, its first attempt, ended
        assert len(r["S"]) == 1 and len(r["E"]) == 1 and r["S"][0][1] == 1, (u, r)
    most_a = overlap(recs, A)
    assert most_a <= 5, "%d jobs of A ran at once under concurrency = 5" % most_a
    assert most_a >= 2, "the limit was never used: the test proves nothing (at most %d A at once)" % most_a
    # every master took part (each ran jobs in its own handlers)
    by_master = [set(session_pids(m.sid)) for m in masters]
    ran = [sum(1 for r in recs.values() if r["S"][0][2] in pids) for pids in by_master]
    assert all(ran), "jobs run per master: %s" % ran
    k = PREFIX + "queues:work"
    wait_for(lambda: rc.zcard(PREFIX + "qpool:limit:|App\\Jobs\\A:run") == 0, 30, what="the slots to be given back")
    assert rc.llen(k) == 0 and rc.zcard(k + ":reserved") == 0 and rc.zcard(k + ":delayed") == 0
    b_ends = sorted(r["E"][0][3] for r in started(recs, B))
    b_starts = sorted(r["S"][0][3] for r in started(recs, B))
    print("4,000 jobs in %.1f s on 3 masters; at most %d A at once; per master %s; B: 2,000 in %.2f s"
          % (took, most_a, ran, (b_ends[-1] - b_starts[0]) / 1e9))


def test_rate_50_per_s_no_window_over_rate_plus_burst(master_factory, redis_server, tmp_path):
    """rate = "50/s", burst = 10 on queue r, 2 masters x 3 workers, 400
    no-op jobs: no 1 s window holds more than 60 pops.

    The pops are counted on Redis's clock: the test samples TIME and the
    ready list's length in one MULTI (atomic with respect to the pop
    scripts, which read TIME themselves), so the jobs popped between two
    samples were popped, by the scripts' own clock, between the samples'
    times; the bucket lets at most burst + rate x span through in any span
    (the scripts read TIME in whole ms, which adds 0.05 of a token at
    most). The handlers' start stamps would not do: a job starts some time
    after its pop, and a late start can squeeze pops 1.2 s apart into 1 s.
    Every pair of samples at most 1 s apart is a window checked; none may
    hold more than 60."""
    log = tmp_path / "jobs.log"
    log.touch()
    rc = redis_server.client()
    key = PREFIX + "queues:r"
    total = 400
    push_many(rc, "r", [make_payload(job=B, data={}) for _ in range(total)])
    limits = limit_conf('{ queue = "r"; rate = "50/s"; burst = 10; }')
    samples = [sample_pops(rc, key, total)]  # before any master: the full bucket's burst is inside the windows too
    for n in ("a", "b"):
        start(master_factory, redis_server, n, log, limits, processes=3, queue="r")
    deadline = time.monotonic() + 120
    while samples[-1][1] < total and time.monotonic() < deadline:
        time.sleep(0.01)
        samples.append(sample_pops(rc, key, total))
    assert samples[-1][1] == total, "%d of %d popped in 120 s" % (samples[-1][1], total)
    worst = fullest_window(samples)
    assert worst[0] <= 60, "%d pops in %.3f s from %.3f s: over 50/s + a burst of 10" % (
        worst[0], worst[2], worst[1])
    span = samples[-1][0] - samples[0][0]
    wait_for(lambda: len(records(log)) == total and all(r["E"] for r in records(log).values()), 60,
             what="%d jobs to run" % total)
    assert all(len(r["S"]) == 1 and r["S"][0][1] == 1 for r in records(log).values())
    print("%d samples; the fullest 1 s window: %d pops (%.3f s from %.3f s); all %d popped within %.2f s of"
          " the first sample (%.1f/s after the burst)" % (len(samples), worst[0], worst[2], worst[1], total, span,
                                                          (total - 10) / span))


def test_a_killed_master_gives_its_slots_back(master_factory, redis_server, tmp_path):
    """concurrency = 4 on class L. Master a (2 workers) and master d (2
    workers) hold all 4 slots with jobs that wait for a file; masters b and
    c (3 workers each) wait with 4 more L jobs, attempts 0. Then:
      - d dies with every process of its session (SIGKILL at once, as
        systemd kills a dead master's cgroup): its 2 slots lapse unrenewed
        (15 s at most, docs/operations.md) and b and c start 2 jobs;
      - a alone is SIGKILLed: its workers are orphaned, finish the jobs in
        hand and keep renewing their slots (still held 16 s after the kill,
        past the 15 s a slot lapses in); once the jobs end, the slots come
        back and b and c start the last 2.
    Never more than 4 L jobs at once (d's cut jobs count until the kill);
    the waiting jobs keep attempts 0 until they start, and start with 1."""
    log = tmp_path / "jobs.log"
    log.touch()
    rc = redis_server.client()
    release_a = tmp_path / "release-a"
    never = tmp_path / "never"
    limits = limit_conf('{ class = "App\\\\Jobs\\\\L"; concurrency = 4; }')
    ma = start(master_factory, redis_server, "a", log, limits, processes=2)
    push_many(rc, "work", [make_payload(job=L, data={"hold": str(release_a)}) for _ in range(2)])
    wait_for(lambda: len(started(records(log), L)) == 2, 60, what="a's 2 jobs to start")
    md = start(master_factory, redis_server, "d", log, limits, processes=2)
    push_many(rc, "work", [make_payload(job=L, data={"hold": str(never)}) for _ in range(2)])
    wait_for(lambda: len(started(records(log), L)) == 4, 60, what="d's 2 jobs to start")
    a_pids, d_pids = set(session_pids(ma.sid)), set(session_pids(md.sid))
    recs = records(log)
    assert sum(r["S"][0][2] in a_pids for r in recs.values()) == 2
    assert sum(r["S"][0][2] in d_pids for r in recs.values()) == 2
    mb = start(master_factory, redis_server, "b", log, limits, processes=3)
    start(master_factory, redis_server, "c", log, limits, processes=3)
    after = [make_payload(job=L, data={"hold": str(never)}) for _ in range(4)]
    push_many(rc, "work", after)
    wait_for(lambda: (mb.status().get("limits") or [{}])[0].get("waiting") == 4, 30,
             what="b's status to show the 4 jobs held back")
    assert ready_attempts(rc) == [0, 0, 0, 0]
    assert len(started(records(log), L)) == 4

    for pid in session_pids(md.sid):  # d and its whole session at once
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.kill(ma.proc.pid, signal.SIGKILL)  # a alone: its workers are orphaned
    killed = time.monotonic()
    cut = time.time_ns()
    uuids = {p["uuid"] for p in after}

    def after_started():
        return sum(1 for u, r in records(log).items() if u in uuids and r["S"])
    wait_for(lambda: after_started() >= 2, 60, interval=0.05, what="d's 2 slots to lapse and be taken")
    lapsed = time.monotonic() - killed
    # a's orphans still run their jobs: their slots are renewed, past 15 s
    while time.monotonic() - killed < 16:
        assert all(a == 0 for a in ready_attempts(rc)), "a waiting job's attempts changed"
        time.sleep(0.2)
    assert after_started() == 2, "a's orphaned workers lost their slots while their jobs ran"
    orphans = [p for p in a_pids if p != ma.proc.pid and p in session_pids(ma.sid)]
    assert orphans, "a's workers did not outlive it"
    release_a.touch()
    released = time.monotonic()
    wait_for(lambda: after_started() == 4, 60, interval=0.05, what="a's 2 slots to be given back and taken")
    handed = time.monotonic() - released
    wait_for(lambda: not session_pids(ma.sid), 30, what="a's orphaned workers to exit")
    recs = records(log)
    # d's cut jobs ran until the kill, no longer: end them there
    for r in recs.values():
        if r["S"][0][2] in d_pids and not r["E"]:
            r["E"].append((L, 1, r["S"][0][2], cut))
    most = overlap(recs, L)
    assert most <= 4, "%d L jobs at once under concurrency = 4" % most
    assert all(r["S"][0][1] == 1 for r in recs.values())
    a_done = [r for r in recs.values() if r["S"][0][2] in a_pids]
    assert len(a_done) == 2 and all(r["E"] for r in a_done), "a's orphans did not finish their jobs"
    print("the cgroup-killed master's 2 slots taken again %.1f s after the kill; the orphaned master's 2"
          " taken %.2f s after its jobs were released" % (lapsed, handed))
