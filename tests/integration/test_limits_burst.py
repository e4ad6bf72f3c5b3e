"""A rate limit with burst = 1 (stop 39's leftovers of issue 33): its
long-run average is the rate, not 5-10 % short of it, and no 1 s window
holds more than the rate plus the burst. Pops are counted on Redis's own
clock (TIME and LLEN in one MULTI, as test_limits_fleet's 50/s test), so a
slow machine only pops later, it never makes the figures wrong; the
average's bound is the issue's own (5 %), the windows' an invariant."""
import time

from conftest import PREFIX, make_payload, push_many, wait_for
from test_limits import records
from test_limits_fleet import B, limit_conf, start


def sample_pops(rc, key, total):
    p = rc.pipeline(transaction=True)
    p.time()
    p.llen(key)
    (sec, usec), left = p.execute()
    return sec + usec / 1e6, total - left


def fullest_window(samples):
    """The most pops between two samples at most 1 s apart."""
    worst, i = 0, 0
    for j in range(len(samples)):
        while samples[j][0] - samples[i][0] > 1.0:
            i += 1
        worst = max(worst, samples[j][1] - samples[i][1])
    return worst


def test_rate_with_burst_1_keeps_its_average(master_factory, redis_server, tmp_path):
    """rate = "10/s", burst = 1 on queue r, 1 master x 2 workers, 101 no-op
    jobs: after the first pop the other 100 are popped at 10/s within 5 %
    (a waiting worker comes back a little after its token is due: with a
    bucket of 1 that lateness was lost on every token, 7-10 % of the rate
    here), and no 1 s window holds more than 11 pops.

    No rate limiter with a bucket of 1 keeps its rate when its workers are
    starved of CPU for more than a token's time: the test's own 10 ms
    sampling loop is the gauge. When it ran at less than half its pace (a
    box that busy), the average is printed, not asserted; the window
    always is."""
    log = tmp_path / "jobs.log"
    log.touch()
    rc = redis_server.client()
    key = PREFIX + "queues:r"
    total = 101
    push_many(rc, "r", [make_payload(job=B, data={}) for _ in range(total)])
    samples = [sample_pops(rc, key, total)]
    start(master_factory, redis_server, "a", log, limit_conf('{ queue = "r"; rate = "10/s"; burst = 1; }'),
          processes=2, queue="r")
    deadline = time.monotonic() + 90
    while samples[-1][1] < total and time.monotonic() < deadline:
        time.sleep(0.01)
        samples.append(sample_pops(rc, key, total))
    assert samples[-1][1] == total, "%d of %d popped in 90 s" % (samples[-1][1], total)
    worst = fullest_window(samples)
    first = next(s for s in samples if s[1] > 0)
    last = samples[-1]
    avg = (last[1] - first[1]) / (last[0] - first[0])
    print("burst 1 at 10/s: %.2f/s after the first pop (%d samples), the fullest 1 s window %d pops"
          % (avg, len(samples), worst))
    assert worst <= 11, "%d pops in a 1 s window at 10/s with a burst of 1" % worst
    period = (last[0] - samples[1][0]) / max(1, len(samples) - 2)  # the loop's own, the master's start left out
    if period > 0.02:
        print("the sampling loop ran every %.0f ms, not 10: too busy a box to hold the average to" % (period * 1e3))
    else:
        assert abs(avg - 10) <= 0.5, "%.2f/s long-run at rate = 10/s, burst = 1" % avg
    wait_for(lambda: len(records(log)) == total and all(r["E"] for r in records(log).values()), 60,
             what="%d jobs to run" % total)
    assert all(len(r["S"]) == 1 and r["S"][0][1] == 1 for r in records(log).values())
