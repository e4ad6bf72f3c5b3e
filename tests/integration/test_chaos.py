"""Chaos: thousands of jobs while workers and handlers are SIGKILLed, Redis
client connections are killed, Redis is SIGKILLed and restarted (AOF, fsync
always), and the pool is paused and resumed by signal and by the control
socket. No job is lost or left stuck, and nothing of the tree survives a
SIGKILL of the master. Run with prefetch 1 and 8.

QPOOL_CHAOS_JOBS (default 8000 per run) and QPOOL_CHAOS_SEED (default: a
new seed, printed) make a longer or a repeated run:

    QPOOL_CHAOS_JOBS=100000 QPOOL_CHAOS_SEED=7 /usr/bin/python3 -m pytest -s test_chaos.py
"""
import os
import random
import signal
import time

import pytest
import redis

from conftest import (FIXTURE_HANDLER, PREFIX, RedisServer, children_of, kill_a_worker, make_payload, pgid_members,
                      proc_alive, push_many, read_fixture_log, wait_for)

JOBS = int(os.environ.get("QPOOL_CHAOS_JOBS", "8000"))


def pool(log, prefetch):
    return ('{ name = "w"; queues = ["default", "low"]; processes = 4; prefetch = %d;'
            ' retry_after = 3; tries = 0; backoff = [0]; job_log = false;'
            ' handler = { type = "pipe"; command = ["%s"]; };'
            ' environment = { FIXTURE_LOG = "%s"; FIXTURE_LOG_DONE = "1"; }; }' % (prefetch, FIXTURE_HANDLER, log))


def retrying(fn, default=None):
    """fn() against a Redis that may be down or restarting right now."""
    try:
        return fn()
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return default


class Chaos:
    """One random disruption at a time, each undone before the next."""

    def __init__(self, master, srv, rng):
        self.m, self.srv, self.rng = master, srv, rng
        self.killed = set()
        self.counts = {}
        self.redis_restarts = 0

    KINDS = ["worker", "handler", "clients", "redis", "pause-signal", "pause-socket", "none"]

    def step(self):
        if not hasattr(self, "plan"):  # every kind once early on, in a random order
            self.plan = self.KINDS[:]
            self.rng.shuffle(self.plan)
        if self.plan:
            what = self.plan.pop()
        else:
            what = self.rng.choices(self.KINDS, [5, 5, 3, 1 if self.redis_restarts < 2 else 0, 2, 2, 3])[0]
        getattr(self, "do_" + what.replace("-", "_"))()
        self.counts[what] = self.counts.get(what, 0) + 1

    def do_worker(self):
        kill_a_worker(self.m, self.rng, self.killed)

    def do_handler(self):
        handlers = [h for w in children_of(self.m.proc.pid) for h in children_of(w)]
        if handlers:
            victim = self.rng.choice(handlers)
            self.killed.add(victim)
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def do_clients(self):
        retrying(lambda: self.srv.client().client_kill_filter(_type="normal", skipme=True))

    def do_redis(self):
        self.srv.proc.kill()  # a crash: appendfsync always keeps every write it acknowledged
        self.srv.proc.wait(10)
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.srv.start()
        self.redis_restarts += 1

    def do_pause_signal(self):
        self.m.signal(signal.SIGUSR2)
        time.sleep(self.rng.uniform(0.1, 0.6))
        self.m.signal(signal.SIGCONT)

    def do_pause_socket(self):
        self.m.cli("pause", "w")
        time.sleep(self.rng.uniform(0.1, 0.6))
        self.m.cli("continue", "w")

    def do_none(self):
        pass


def payloads(n, rng):
    """Mostly quick jobs; some slow enough for a kill to land mid-job; some
    that throw once and succeed on their retry (release and the delayed set)."""
    out = []
    for _ in range(n):
        action = rng.choices(["ok", "sleep:30", "failuntil:2"], [77, 15, 8])[0]
        out.append(make_payload(action))
    return out


def settled(r):
    keys = [PREFIX + "queues:" + q + s for q in ("default", "low") for s in ("", ":delayed", ":reserved")]
    counts = retrying(lambda: [r.llen(k) if k.endswith(("default", "low")) else r.zcard(k) for k in keys])
    return counts is not None and sum(counts) == 0


@pytest.mark.parametrize("prefetch", [1, 8])
def test_no_job_is_lost_or_stuck_under_chaos(master_factory, tmp_path, prefetch):
    seed = int(os.environ.get("QPOOL_CHAOS_SEED", random.randrange(1 << 30)))
    print("QPOOL_CHAOS_SEED=%d QPOOL_CHAOS_JOBS=%d prefetch=%d" % (seed, JOBS, prefetch))
    rng = random.Random(seed)
    srv = RedisServer(tmp_path, persistent=True)
    try:
        r = srv.client()
        log = tmp_path / "fixture.log"
        m = master_factory(srv)
        m.write_config(pool(log, prefetch))
        jobs = payloads(JOBS, rng)
        for i in range(0, JOBS, 1000):
            push_many(r, rng.choice(["default", "low"]), jobs[i:i + 1000])
        m.start()
        chaos = Chaos(m, srv, rng)
        deadline = time.monotonic() + 300
        while not settled(r) and time.monotonic() < deadline:
            chaos.step()
            time.sleep(rng.uniform(0.1, 0.3))
        print("disruptions:", chaos.counts)
        wait_for(lambda: settled(r), 120, interval=0.2, what="every job to be done (nothing stuck)")

        lines = read_fixture_log(log)
        done = {l[1] for l in lines if l[0] == "done"}
        missing = {p["id"] for p in jobs} - done
        assert not missing, "%d jobs lost (seed %d), e.g. %s" % (len(missing), seed, sorted(missing)[:5])
        assert retrying(lambda: r.keys(PREFIX + "qpool:failed:*"), ["?"]) == []
        assert m.proc.poll() is None

        # nothing of the tree survives a SIGKILL of the master
        wait_for(lambda: len(children_of(m.proc.pid)) == 4, 30, what="the pool back at 4 workers")
        workers = children_of(m.proc.pid)
        handlers = [h for w in workers for h in children_of(w)]
        assert handlers
        os.kill(m.proc.pid, signal.SIGKILL)
        m.proc.wait(10)
        wait_for(lambda: not any(proc_alive(p) for p in workers + handlers)
                 and not any(pgid_members(h) for h in handlers), 20, what="workers and handlers gone")
    finally:
        srv.stop()
