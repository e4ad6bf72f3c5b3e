"""The fleet budget counts processes, not intentions (the review of issue
22, #2 to #6): a budgeted pool never runs more processes than the slots its
master holds, and the ledger in Redis records every one of them, through a
rolling restart, a reload that removes the pool, records lost in Redis,
renewals that fail, and a master killed while its workers run jobs.

Each test samples the processes of both masters (busy, retiring, surging
and draining ones, from `qpool status -v`; an orphaned worker's from /proc)
and fails the moment the fleet runs more than the budget."""
import signal
import time

from conftest import FIXTURE_HANDLER, PREFIX, children_of, make_payload, proc_alive, push_many, wait_for
from test_fleet_budget import budget_pool, lease_records, processes

KEY = PREFIX + "qpool:{qpool-budget:work}:leases"


def sample(fn, seconds, budget, what):
    """fn() -> a tuple of process counts, sampled for `seconds`: never more
    than the budget in all. Returns the samples."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s = fn()
        seen.append(s)
        assert sum(s) <= budget, "%s: %s processes on a budget of %d (samples %s)" % (what, s, budget, seen[-10:])
        time.sleep(0.1)
    return seen


def busy(m, pool="work"):
    return m.pool(pool)["busy"]


def test_a_rolling_restart_stops_an_old_worker_before_starting_its_replacement(master_factory, redis_server):
    """#2: at its cap, a budgeted pool's roll stops an old (busy) worker and
    starts the new one once it exited; it never surges past its slots."""
    a = master_factory(redis_server, "a")
    a.write_config(budget_pool(budget=2, lo=0, hi=2))
    a.start()
    push_many(redis_server.client(), "work", [make_payload("sleep:4000") for _ in range(40)])
    wait_for(lambda: processes(a) == 2 and busy(a) == 2, 30, what="2 busy workers")
    old = set(a.child_pids("work"))
    a.cli("restart", "work")
    sample(lambda: (processes(a),), 6, 2, "during the roll")
    # the roll goes on: every old worker is replaced, still never more than 2
    wait_for(lambda: not (old & set(a.child_pids("work"))) and processes(a) == 2, 40, what="the roll to finish")
    assert max(int(v.split(",")[0]) for v in lease_records(redis_server.client()).values()) <= 2


def test_a_removed_pool_keeps_its_slots_until_its_last_job_ends(master_factory, redis_server):
    """#3: a reload that removes the pool releases nothing while its
    children finish their jobs; the lease goes with the last of them."""
    rc = redis_server.client()
    a = master_factory(redis_server, "a")
    other = ('{ name = "other"; queues = ["other"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
             % FIXTURE_HANDLER)
    a.write_config(budget_pool(budget=2, lo=1, hi=2) + ",\n" + other)
    a.start()
    push_many(rc, "work", [make_payload("sleep:8000") for _ in range(20)])
    wait_for(lambda: processes(a) == 2 and busy(a) == 2, 30, what="a at 2 busy")
    a.write_config(other)
    a.cli("reload")
    assert a.pool("work")["state"] == "draining"
    # its record still holds the two slots (claiming nothing)
    recs = lease_records(rc)
    assert len(recs) == 1 and list(recs.values())[0].startswith("2,0,0,"), recs
    b = master_factory(redis_server, "b")
    b.write_config(budget_pool(budget=2, lo=0, hi=2))
    b.start()
    wait_for(lambda: b.pool("work")["fleet_budget"]["lease"] == "ok", 20, what="b registered")
    sample(lambda: (processes(a), processes(b)), 4, 2, "while a's removed pool drains")
    wait_for(lambda: processes(b) == 2, 30, what="b to take the slots once a's jobs ended")
    assert processes(a) == 0
    assert "fleet budget lease released" in a.log()
    assert list(lease_records(rc)) == [b.pool("work")["fleet_budget"]["holders"][0]["id"]]


def test_a_pool_added_back_while_its_old_self_drains_counts_both(master_factory, redis_server):
    """A pool removed by a reload (its busy children draining) and added
    back by the next: both count under one lease, and the new one starts
    nothing until the old children's slots are free."""
    a = master_factory(redis_server, "a")
    other = ('{ name = "other"; queues = ["other"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
             % FIXTURE_HANDLER)
    a.write_config(budget_pool(budget=2, lo=1, hi=2) + ",\n" + other)
    a.start()
    push_many(redis_server.client(), "work", [make_payload("sleep:6000") for _ in range(20)])
    wait_for(lambda: processes(a) == 2 and busy(a) == 2, 30, what="a at 2 busy")
    a.write_config(other)
    a.cli("reload")
    a.write_config(budget_pool(budget=2, lo=1, hi=2) + ",\n" + other)
    a.cli("reload")
    sample(lambda: (processes(a),), 4, 2, "the old pool draining, the new one added")
    wait_for(lambda: [p["state"] for p in a.status()["pools"] if p["name"] == "work"] == ["running"], 30,
             what="the old pool gone")
    wait_for(lambda: processes(a) == 2, 30, what="the new pool at the budget")


def test_lost_records_are_written_again_with_every_process(master_factory, redis_server):
    """#4: records lost in Redis (a failover that lost the last writes, a
    restart without persistence) come back holding every process their
    master still runs; a master that finds its own record gone is granted
    nothing new until every master wrote its own again. Here b runs its
    first pass after the loss while a is frozen (SIGSTOP), so that b would
    be granted the slots a's busy workers still run in."""
    rc = redis_server.client()
    a = master_factory(redis_server, "a")
    a.write_config(budget_pool(queue="qa", budget=6, lo=1, hi=6))
    b = master_factory(redis_server, "b")
    b.write_config(budget_pool(queue="qb", budget=6, lo=1, hi=6))
    a.start()
    push_many(rc, "qa", [make_payload("sleep:12000") for _ in range(30)])
    wait_for(lambda: processes(a) == 6 and busy(a) == 6, 30, what="a at 6 busy")
    b.start()
    push_many(rc, "qb", [make_payload("sleep:12000") for _ in range(30)])
    rc.delete(PREFIX + "queues:qa")  # a's share falls to its floor; its 6 busy workers retire after their jobs
    wait_for(lambda: a.pool("work")["fleet_budget"]["share"] == 1, 20, what="a's share at its floor")
    kids = [c["pid"] for p in a.status()["pools"] for c in p["children"]]
    a.signal(signal.SIGSTOP)
    try:
        rc.delete(KEY)
        sample(lambda: (sum(1 for p in kids if proc_alive(p)), processes(b)), 3, 6, "a frozen, the records lost")
    finally:
        a.signal(signal.SIGCONT)
    sample(lambda: (processes(a), processes(b)), 3, 6, "after the records were lost")
    held = {k: int(v.split(",")[0]) for k, v in lease_records(rc).items()}
    assert sum(held.values()) >= processes(a) + processes(b), held
    assert b.count_log(r"its fleet budget lease record was lost in Redis") == 1
    assert a.count_log(r"its fleet budget lease record was lost in Redis") == 1


def test_a_failing_renewal_never_grows_past_what_is_held(master_factory, redis_server):
    """#5: a master below its floor (it waits for slots another holds) whose
    renewals fail (here NOPERM: its Redis user lost scripting) stays where
    it is: every lease is still valid. #12: the log says why."""
    rc = redis_server.client()
    rc.execute_command("ACL", "SETUSER", "a", "on", ">pw", "~*", "&*", "+@all")
    b = master_factory(redis_server, "b")
    b.write_config(budget_pool(lo=1))
    b.start()
    push_many(rc, "work", [make_payload("sleep:60000") for _ in range(50)])
    wait_for(lambda: processes(b) == 6 and busy(b) == 6, 30, what="b at 6 busy")
    a = master_factory(redis_server, "a")
    conf = ('default = { host = "127.0.0.1"; port = %d; prefix = "%s"; username = "a"; password_env = "APW"; };'
            % (redis_server.port, PREFIX))
    a.write_config(budget_pool(lo=2), redis_conf=conf)
    a.start(env={"APW": "pw"})
    wait_for(lambda: a.pool("work")["fleet_budget"]["lease"] == "ok", 20, what="a registered")
    assert processes(a) == 0  # its floor waits for b's busy workers
    rc.execute_command("ACL", "SETUSER", "a", "-@scripting")
    wait_for(lambda: a.pool("work")["fleet_budget"]["lease"] == "failing", 20, what="a's renewals failing")
    sample(lambda: (processes(a), processes(b)), 4, 6, "renewals failing")
    fb = a.pool("work")["fleet_budget"]
    assert "NOPERM" in fb["lease_error"], fb
    assert a.count_log(r"cannot renew the fleet budget lease: NOPERM") == 1


def test_orphaned_workers_keep_their_slots_until_their_jobs_end(master_factory, redis_server):
    """#6: a master SIGKILLed while its workers run jobs: they finish them
    (never cut), and meanwhile each keeps a lease record of its own, so the
    survivor takes their slots only as they exit."""
    rc = redis_server.client()
    ms = []
    for name in ("a", "b"):
        m = master_factory(redis_server, name)
        m.write_config(budget_pool(budget=6, lo=1, hi=6), qpool="fleet_lease_ttl = 3;")
        ms.append(m.start())
    a, b = ms
    push_many(rc, "work", [make_payload("sleep:10000") for _ in range(60)])
    wait_for(lambda: processes(a) + processes(b) == 6 and busy(a) == processes(a) >= 2 and busy(b) == processes(b),
             30, what="6 busy workers, a running 2 or more")
    # every worker process of a's, one being retired included (it still has
    # its job, and keeps its slot once a is gone), not only those a lists
    kids = children_of(a.proc.pid)
    a.proc.kill()
    a.proc.wait(10)
    alive = lambda: sum(1 for p in kids if proc_alive(p))  # noqa: E731
    sample(lambda: (alive(), processes(b)), 12, 6, "after a's SIGKILL")
    assert a.count_log(r"the fleet budget slot of this job is kept as \S+:orphan until it ends") == len(kids)
    wait_for(lambda: processes(b) == 6 and alive() == 0, 30, what="b at the whole budget once the orphans exited")
    wait_for(lambda: not any(k.endswith(":orphan") for k in lease_records(rc)), 10, what="orphan records released")
