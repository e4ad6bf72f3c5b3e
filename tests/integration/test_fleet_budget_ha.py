"""The fleet budget (issue 22) on a TLS Redis and through a Sentinel failover:
two masters share `fleet_max_processes` over a TLS-only redis-server, and
keep within it while Sentinel moves the primary under them, then run the
whole budget again on the new primary with no job lost.

The processes are counted from the process table (every live child of each
master: busy, idle and retiring workers alike; nothing else is configured
to run under these masters), in one scan for all the masters, by a thread
that samples all along: a sample is what the hosts really run, not what
the masters report."""
import collections
import socket
import threading
import time

import redis

from conftest import PREFIX, make_payload, proc_stats, push_many, queue_state, read_fixture_log, wait_for
from test_fleet_budget import budget_pool, lease_records
from test_redis_tls import TlsRedis, secret_file, tls_conn
from test_sentinel import MASTER, ask_primary, conf_for, safe, start_set

BUDGET = 4


def live_children(*masters):
    """The live children of each master, from one scan of /proc."""
    pids = [m.proc.pid for m in masters]
    n = collections.Counter(ppid for _, state, ppid, _, _ in proc_stats() if ppid in pids and state != "Z")
    return tuple(n[p] for p in pids)


def together(masters, n=BUDGET):
    """The masters run n processes in all, each at least one."""
    s = live_children(*masters)
    return sum(s) == n and all(s)


class Sampler(threading.Thread):
    """Samples live_children of its masters (a list: a master started later
    is appended) until finished."""

    def __init__(self, masters):
        super().__init__(daemon=True)
        self.masters = list(masters)
        self.stopped = threading.Event()
        self.samples = []

    def run(self):
        while not self.stopped.is_set():
            self.samples.append((time.monotonic(), live_children(*self.masters)))
            time.sleep(0.05)

    def finish(self, budget=BUDGET):
        """Stop; fail if any sample ran more than the budget."""
        self.stopped.set()
        self.join(10)
        over = [s for s in self.samples if sum(s[1]) > budget]
        assert not over, "over the budget of %d in %d of %d samples, from %.1f s: %s" % (
            budget, len(over), len(self.samples), over[0][0] - self.samples[0][0], [s for _, s in over[:20]])
        print("%d samples; processes seen: %s" % (len(self.samples), sorted(collections.Counter(
            s for _, s in self.samples).items())))
        return self.samples


def records_of(rc, masters):
    """{index in masters: its lease record's fields (held, min, want,
    pressure, budget, expiry, waiting_since)}, for those that have one (a
    record's id is host:pid:nonce)."""
    recs = lease_records(rc)
    out = {}
    for i, m in enumerate(masters):
        mine = [v for k, v in recs.items() if k.startswith("%s:%d:" % (socket.gethostname()[:64], m.proc.pid))]
        if mine:
            out[i] = [int(x) for x in mine[0].split(",")]
    return out


def start_masters(master_factory, redis_conf, d, names=("a", "b"), qpool=""):
    """Masters running pool `work` on queue `work` with the budget, tries =
    0 (a job run again after a failover is not failed for its attempts),
    each job logged to d/NAME.log."""
    ms = []
    for name in names:
        m = master_factory(None, name)
        extra = 'tries = 0; retry_after = 5; environment = { FIXTURE_LOG = "%s"; };' % (d / (name + ".log"))
        m.write_config(budget_pool(budget=BUDGET, lo=1, hi=BUDGET, extra=extra), qpool=qpool, redis_conf=redis_conf)
        ms.append(m.start())
    return ms


def jobs_ran(d):
    """{job id: times it ran} from every master's job log under d."""
    return collections.Counter(l[1] for log in d.glob("*.log") for l in read_fixture_log(log) if l[0] == "job")


def test_two_masters_share_the_budget_over_tls(master_factory, tmp_path):
    """Two masters, one TLS-only redis-server (an ACL user, the default user
    off): 4 workers together, never more, and both records in the lease
    hash, written over TLS."""
    srv = TlsRedis(tmp_path)
    try:
        rc = srv.client()
        auth = 'password_file = "%s";' % secret_file(tmp_path)
        conf = tls_conn(srv, auth=auth) + "\n  " + tls_conn(srv, name="cache", auth=auth, db=1)
        a, b = start_masters(master_factory, conf, tmp_path)
        push_many(rc, "work", [make_payload("sleep:300") for _ in range(2000)])
        wait_for(lambda: together([a, b]), 30, what="both masters to run %d workers together" % BUDGET)
        sampler = Sampler([a, b])
        sampler.start()
        time.sleep(6)
        samples = sampler.finish()
        assert (2, 2) in {s for _, s in samples}
        recs = records_of(rc, [a, b])
        assert set(recs) == {0, 1}, lease_records(rc)
        assert sum(r[0] for r in recs.values()) == BUDGET and all(r[4] == BUDGET for r in recs.values()), recs
        for m in (a, b):
            fb = m.pool("work")["fleet_budget"]
            assert fb["lease"] == "ok" and fb["holders_total"] == 2 and fb["in_use"] == BUDGET, fb
        assert jobs_ran(tmp_path)
    finally:
        srv.stop()


def force_failover(sentinels, replica):
    """SENTINEL FAILOVER (retried while a sentinel's view is not ready);
    returns once every sentinel names the replica and it is promoted."""
    def once():
        try:
            return sentinels[0].client().execute_command("SENTINEL", "FAILOVER", MASTER)
        except redis.ResponseError as e:
            if "NOGOODSLAVE" in str(e) or "INPROG" in str(e):
                return None
            raise
    wait_for(once, 30, interval=0.5, what="SENTINEL FAILOVER accepted")
    for s in sentinels:
        wait_for(lambda: ask_primary(s) == replica.port, 60, interval=0.2, what="the sentinels to name the replica")
    wait_for(lambda: safe(lambda: replica.client().execute_command("ROLE")[0] == b"master"), 30,
             what="the replica promoted")


def renewing_on(node, masters, timeout=60):
    """Wait until every master's record on node is renewed (its expiry
    moves on): they write their leases there."""
    first = {}

    def moved():
        recs = safe(lambda: records_of(node.client(), masters)) or {}
        for i, r in recs.items():
            first.setdefault(i, r[5])
        return len(recs) == len(masters) and all(r[5] > first[i] for i, r in recs.items())
    wait_for(moved, timeout, interval=0.5, what="every master's lease record renewed on port %d" % node.port)


def primary_named(port):
    return r"names 127\.0\.0\.1:%d as the primary of %s" % (port, MASTER)


def demoted(node):
    wait_for(lambda: safe(lambda: node.client().execute_command("ROLE")[0] == b"slave"), 60,
             what="the old primary demoted by the sentinels")


def test_a_sentinel_failover_keeps_the_budget_and_loses_no_job(master_factory, tmp_path):
    """A primary, a replica, three sentinels; two masters through them, a
    budget of 4 and a backlog. SENTINEL FAILOVER mid-run, and the sampler
    runs from before it until after the old primary is demoted (the
    sentinels do that seconds after they named the new one): at no sample
    do the two run more than 4 processes. A failover may shrink them to
    their floors meanwhile (operations.md, Limits): that is allowed. Then
    both masters renew their leases on the new primary, run the whole
    budget together again, and every job pushed before and after the
    failover runs."""
    gen = start_set(tmp_path)
    primary, replica, sentinels = next(gen)
    try:
        first = [make_payload("sleep:100") for _ in range(300)]
        push_many(primary.client(), "work", first)
        wait_for(lambda: safe(lambda: replica.client().llen(PREFIX + "queues:work") == len(first)), 20,
                 what="the backlog replicated")
        a, b = start_masters(master_factory, conf_for(sentinels), tmp_path)
        for m in (a, b):
            m.wait_log(primary_named(primary.port), 30)
        wait_for(lambda: together([a, b]), 30, what="both masters to run %d workers together" % BUDGET)
        assert set(records_of(primary.client(), [a, b])) == {0, 1}
        sampler = Sampler([a, b])
        sampler.start()
        time.sleep(2)

        force_failover(sentinels, replica)
        second = [make_payload("sleep:100") for _ in range(100)]
        push_many(replica.client(), "work", second)
        for m in (a, b):  # found through the sentinels
            m.wait_log(primary_named(replica.port), 60)
        renewing_on(replica, [a, b])
        demoted(primary)  # the workers' connections to it are closed: they follow
        wait_for(lambda: together([a, b]), 60, what="both masters to run %d workers together again" % BUDGET)
        for m in (a, b):
            wait_for(lambda: m.pool("work")["fleet_budget"]["lease"] == "ok", 30, what="the lease renewed")
        time.sleep(1)
        sampler.finish()
        recs = records_of(replica.client(), [a, b])
        assert set(recs) == {0, 1} and sum(r[0] for r in recs.values()) <= BUDGET, recs

        # no job lost: every job pushed, before the failover or after, ran,
        # and none is left on the new primary (a job whose pop or ack the
        # failover lost runs twice: operations.md, "What a failover can lose")
        new = replica.client()
        wait_for(lambda: (lambda q: q["ready"] == q["reserved"] == q["delayed"] == 0)(queue_state(new, "work")), 120,
                 interval=0.3, what="every job done on the new primary")
        lost = {p["id"] for p in first + second} - set(jobs_ran(tmp_path))
        assert not lost, "lost: %d jobs" % len(lost)
        for m in (a, b):
            assert m.proc.poll() is None
            assert m.pool("work")["crashes"] == 0
    finally:
        gen.close()


def test_a_master_restarted_during_a_failover_finds_the_others_on_the_new_primary(master_factory, tmp_path):
    """The old primary answers as a primary until the sentinels demote it,
    about 10 s after they named the new one. A master that (re)starts in that
    window lands on the new primary; the others must not keep their ledger
    on the old one meanwhile. They did: a saw the slots b released there and
    took them, while on the new primary b's successor was granted the slots
    of the records that lapsed (a's among them): 4 + 4 on a budget of 4
    until the demotion. Each pass now asks a sentinel first, and a master
    leaves a replaced primary at its next pass."""
    gen = start_set(tmp_path)
    primary, replica, sentinels = next(gen)
    try:
        push_many(primary.client(), "work", [make_payload("sleep:200") for _ in range(3000)])
        wait_for(lambda: safe(lambda: replica.client().llen(PREFIX + "queues:work") == 3000), 20,
                 what="the backlog replicated")
        ttl = "fleet_lease_ttl = 4;"  # records lapse well before the demotion
        a, b = start_masters(master_factory, conf_for(sentinels), tmp_path, qpool=ttl)
        wait_for(lambda: together([a, b]), 30, what="both masters to run %d workers together" % BUDGET)
        sampler = Sampler([a, b])
        sampler.start()
        force_failover(sentinels, replica)
        # b restarts (a deploy, a host replaced) while the old primary still
        # takes writes; gracefully: its record is released where it renews
        b.stop()
        b2 = start_masters(master_factory, conf_for(sentinels), tmp_path, names=("b2",), qpool=ttl)[0]
        sampler.masters.append(b2)
        b2.wait_log(primary_named(replica.port), 30)
        a.wait_log(primary_named(replica.port), 30)
        renewing_on(replica, [a, b2])
        wait_for(lambda: together([a, b2]), 60, what="a and the new b to run %d workers together" % BUDGET)
        time.sleep(2)
        sampler.finish()
        recs = records_of(replica.client(), [a, b2])
        assert set(recs) == {0, 1} and sum(r[0] for r in recs.values()) <= BUDGET, recs
    finally:
        gen.close()
