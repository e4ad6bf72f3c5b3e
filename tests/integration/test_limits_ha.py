"""Fleet-wide limits (issue 33) over TLS and across a Sentinel failover, as
the fleet budget does (test_fleet_budget_ha.py): two masters on a TLS-only
Redis keep a class's concurrency and a queue's rate; two masters through
Sentinel keep a class's concurrency while the primary moves under them,
within the bound operations.md gives ("Over TLS, and across a Sentinel
failover"), and lose no job.

As in test_limits.py, every job runs an exec handler that appends a start
line and an end line (class, uuid, attempts, worker pid, ns) to a log; the
invariants are read from those records, never from timing."""
import collections
import json
import time

from conftest import PREFIX, make_payload, push_many, queue_state, wait_for
from limit_records import handler as limit_handler
from test_fleet_budget_ha import demoted, force_failover, primary_named
from test_redis_tls import TlsRedis, secret_file, tls_conn
from test_sentinel import conf_for, safe, start_set

A = "App\\Jobs\\A"
LIMITS = 'limits = (\n  { class = "App\\\\Jobs\\\\A"; concurrency = 2; }%s\n);\n'
RATE = ',\n  { queue = "r"; rate = "5/s"; burst = 2; }'

CASES = """  *Quick*) ;;
  *" long-"*) sleep 20 ;;
  *) sleep 0.5 ;;"""


def start_masters(master_factory, redis_conf, path, limits, queues=("work",), processes=3):
    """Masters a and b, each a pool of `processes` exec workers on queues,
    tries = 0 (a job run again after a failover is not failed for its
    attempts), retry_after = 5 (a reservation a failover left behind comes
    back soon)."""
    ms = []
    for name in ("a", "b"):
        m = master_factory(None, name)
        qs = ", ".join('"%s"' % q for q in queues)
        m.write_config('{ name = "work"; queues = [%s]; processes = %d; tries = 0; retry_after = 5;'
                       ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }' % (qs, processes, path),
                       redis_conf=redis_conf)
        m.conf.write_text(m.conf.read_text() + limits)
        ms.append(m.start())
    return ms


def runs(log):
    """{uuid: [(class, attempts, start ns, end ns or None), ...]} in start
    order; a start and its end are paired by worker pid and attempts (a job
    a failover ran twice can run on two workers at once)."""
    starts, ends = [], collections.defaultdict(list)
    for line in log.read_text().splitlines():
        f = line.split()
        if len(f) != 6:
            continue
        rec = (f[1], f[2], int(f[3]), int(f[4]), int(f[5]))
        (starts.append(rec) if f[0] == "S" else ends[rec[1:4]].append(rec[4]))
    out = collections.defaultdict(list)
    for cls, uuid, att, pid, ns in sorted(starts, key=lambda r: r[4]):
        later = sorted(e for e in ends[(uuid, att, pid)] if e >= ns)
        end = later[0] if later else None
        if end is not None:
            ends[(uuid, att, pid)].remove(end)
        out[uuid].append((cls, att, ns, end))
    return out


def overlap(rs, cls, keep=lambda start: True):
    """The most runs of cls (those whose start keep() accepts) at once; a
    run not ended yet counts as running to the end of time."""
    events = []
    for r in rs.values():
        for c, _, s, e in r:
            if c == cls and keep(s):
                events += [(s, 1), (e if e is not None else 2 ** 63, -1)]
    n = best = 0
    for _, d in sorted(events):  # an end before a start at the same ns
        n += d
        best = max(best, n)
    return best


def all_ended(log, jobs):
    rs = runs(log)
    return all(rs.get(p["uuid"]) and all(e is not None for *_, e in rs[p["uuid"]]) for p in jobs)


def redis_s(rc):
    sec, usec = rc.time()
    return sec + usec / 1e6


def test_limits_over_tls(master_factory, tmp_path):
    """Two masters, 3 workers each, on a TLS-only redis-server with an ACL
    user: class A (concurrency 2) never runs more than 2 at once and uses
    both slots; queue r (rate 5/s, burst 2) is never popped faster than its
    bucket allows, read on Redis's clock; every job runs once, attempts 1."""
    srv = TlsRedis(tmp_path)
    try:
        rc = srv.client()
        auth = 'password_file = "%s";' % secret_file(tmp_path)
        conf = tls_conn(srv, auth=auth) + "\n  " + tls_conn(srv, name="cache", auth=auth, db=1)
        path, log = limit_handler(tmp_path, CASES)
        a_jobs = [make_payload(job=A) for _ in range(12)]
        r_jobs = [make_payload(job="App\\Jobs\\Quick") for _ in range(15)]
        push_many(rc, "work", a_jobs)
        push_many(rc, "r", r_jobs)
        rkey = PREFIX + "queues:r"
        t0 = redis_s(rc)
        start_masters(master_factory, conf, path, LIMITS % RATE, queues=("work", "r"))
        deadline = time.monotonic() + 90
        while rc.llen(rkey) > 0 and time.monotonic() < deadline:
            popped = 15 - rc.llen(rkey)  # read before the clock: the bound below only grows
            elapsed = redis_s(rc) - t0
            assert popped <= 2 + 5 * elapsed + 1, "%d popped from r %.2f s after the start" % (popped, elapsed)
            time.sleep(0.05)
        assert rc.llen(rkey) == 0, "r was not emptied in 90 s"
        wait_for(lambda: all_ended(log, a_jobs + r_jobs), 90, interval=0.2, what="all 27 jobs to run")
        rs = runs(log)
        assert overlap(rs, A) == 2, "class A ran %d at once over TLS (concurrency 2)" % overlap(rs, A)
        for p in a_jobs + r_jobs:
            assert [(c, att) for c, att, _, _ in rs[p["uuid"]]] == [(p["displayName"], 1)], rs[p["uuid"]]
        assert set(rs) == {p["uuid"] for p in a_jobs + r_jobs}
        wait_for(lambda: rc.zcard(PREFIX + "qpool:limit:|App\\Jobs\\A:run") == 0, 20,
                 what="the slots given back over TLS")
        for q in ("work", "r"):
            s = queue_state(rc, q)
            assert s["ready"] == s["reserved"] == s["delayed"] == 0, (q, s)
    finally:
        srv.stop()


def test_limits_across_a_sentinel_failover(master_factory, tmp_path):
    """A primary, a replica, three sentinels; two masters through them, 3
    workers each, class A under concurrency 2 with a backlog running.
    SENTINEL FAILOVER mid-run; the masters follow to the new primary and A
    runs on there. Two long A jobs pushed to the old primary once the
    replica is promoted (a push that failover loses) are popped there, with
    slots in the old primary's ledger only: they run on without one beside
    the jobs the new primary's slots let start, up to the docs' bound. From
    the handlers' records, with W the time from 2 s before the failover was
    asked until 5 s after the old primary was seen demoted (operations.md,
    Fleet-wide limits, "Over TLS, and across a Sentinel failover"):
    - the runs that started outside W never number more than 2 at once;
    - all runs never number more than twice the limit at once (a slot the
      old primary took in its last moments, or between the promotion and
      its demotion, is lost, and its job runs on without one until it
      ends: at most the limit's worth, the old primary's ledger);
    - every job pushed, before the failover or after, ran and ended; the
      first run of each has attempts 1, and only a job whose run overlapped
      W runs again (its pop or ack lost: the attempts then as the docs say);
    - a job that ran without its slot was announced in its worker's log."""
    gen = start_set(tmp_path)
    primary, replica, sentinels = next(gen)
    try:
        path, log = limit_handler(tmp_path, CASES)
        first = [make_payload(job=A) for _ in range(50)]
        push_many(primary.client(), "work", first)
        wait_for(lambda: safe(lambda: replica.client().llen(PREFIX + "queues:work") == len(first)), 20,
                 what="the backlog replicated")
        ms = start_masters(master_factory, conf_for(sentinels), path, LIMITS % "")
        for m in ms:
            m.wait_log(primary_named(primary.port), 30)
        wait_for(lambda: sum(len(r) for r in runs(log).values()) >= 6, 60, what="A running on the first primary")

        w_from = time.time_ns() - 2 * 10 ** 9
        force_failover(sentinels, replica)
        longs = [make_payload(job=A, uuid="long-%d" % i) for i in range(2)]
        old = primary.client()
        pushed = safe(lambda: [old.lpush(PREFIX + "queues:work", json.dumps(p)) and
                               old.rpush(PREFIX + "queues:work:notify", 1) for p in longs])  # unless demoted yet
        second = [make_payload(job=A) for _ in range(10)]
        push_many(replica.client(), "work", second)
        demoted(primary)  # the workers' connections to it are closed: they follow
        w_to = time.time_ns() + 5 * 10 ** 9
        for m in ms:
            m.wait_log(primary_named(replica.port), 60)

        new = replica.client()
        wait_for(lambda: (lambda q: q["ready"] == q["reserved"] == q["delayed"] == 0)(queue_state(new, "work")), 150,
                 interval=0.3, what="every job done on the new primary")
        wait_for(lambda: all_ended(log, first + second + (longs if pushed else [])), 60, interval=0.2,
                 what="every job's run to end")
        rs = runs(log)
        outside = overlap(rs, A, keep=lambda s: not w_from <= s <= w_to)
        everything = overlap(rs, A)
        print("A at once: %d outside the failover window, %d in all; runs %d of %d jobs" % (
            outside, everything, sum(len(r) for r in rs.values()), len(rs)))
        assert outside <= 2, "A ran %d at once outside the failover window (concurrency 2)" % outside
        assert everything <= 4, "A ran %d at once across the failover (the docs' bound: 4)" % everything
        assert any(s > w_to for r in rs.values() for _, _, s, _ in r), "nothing ran on the new primary"
        if everything > 2:  # a job ran without its slot: its worker said so
            assert any("its concurrency slot lapsed" in m.log() for m in ms)

        lost = {p["uuid"] for p in first + second} - set(rs)
        assert not lost, "lost: %d jobs" % len(lost)
        for u, r in rs.items():
            assert r[0][1] == 1, (u, r)
            again = r[1:] or [x for x in r if x[1] != 1]
            if again:  # a repeat: its first run overlapped the window
                assert r[0][2] <= w_to and (r[0][3] or 2 ** 63) >= w_from, (u, r, w_from, w_to)
                assert all(att <= i + 1 for i, (_, att, _, _) in enumerate(r)), (u, r)
        wait_for(lambda: safe(lambda: new.zcard(PREFIX + "qpool:limit:|App\\Jobs\\A:run") == 0), 30,
                 what="the slots given back or lapsed on the new primary")
        for m in ms:
            assert m.proc.poll() is None
            assert m.pool("work")["crashes"] == 0
    finally:
        gen.close()
