"""The fleet budget's leases against what anyone with access to Redis can
write into them (the review of issue 22, #7, #8, #12): records that are
not qpool's are deleted and counted nowhere, sums do not overflow, a flood
of records is refused (and said why) without the pool dropping below its
floor, and a renewal refused by a replica names the cause and reconnects."""
import subprocess
import time

from conftest import PREFIX, QPOOL, RedisServer, make_payload, push_many, wait_for
from test_fleet_budget import budget_pool, lease_records, processes

KEY = PREFIX + "qpool:{qpool-budget:work}:leases"


def redis_ms(rc):
    s, us = rc.time()
    return s * 1000 + us // 1000


def test_records_that_are_not_qpools_are_deleted_and_counted_nowhere(master_factory, redis_server):
    """#7: the script's checks are lease_parse's: bounded digits, values
    within the record's budget, an expiry at most 20 minutes ahead,
    printable ids. Before, the script counted a held of 2,000,000 (which C
    skipped) and the pool got no slot at all, below its floor."""
    rc = redis_server.client()
    exp = redis_ms(rc) + 300000
    junk = {
        "evil:1": "2000000,0,0,0,6,%d,0" % exp,               # held past every limit
        b"bin\x01:2": "1,0,0,0,6,%d,0" % exp,                 # a control byte in the id
        "h" * 300: "1,0,0,0,6,%d,0" % exp,                    # an id of 300 bytes
        "digits:3": "1,0,0,0,6,99999999999999999999,0",       # 20 digits: it would never lapse
        "far:4": "1,0,0,0,6,%d,0" % (exp + 10 ** 9),          # lapses in 11 days
        "budget:5": "1,0,0,0,0,%d,0" % exp,                   # no budget
        "floor:6": "1,7,0,0,6,%d,0" % exp,                    # a floor past its budget
    }
    rc.hset(KEY, mapping=junk)
    m = master_factory(redis_server, "a")
    m.write_config(budget_pool(lo=2))
    m.start()
    push_many(rc, "work", [make_payload("sleep:300") for _ in range(2000)])
    wait_for(lambda: processes(m) == 6, 30, what="the whole budget (the junk counts for nothing)")
    fb = m.pool("work")["fleet_budget"]
    assert list(lease_records(rc)) == [fb["holders"][0]["id"]]
    assert fb["holders_total"] == 1 and fb["in_use"] == 6


def test_huge_records_do_not_overflow_the_master(master_factory, redis_server):
    """#7: 2,200 records that each hold 1,000,000 (well-formed: the budget
    they claim allows it) sum past 2^31: in 64 bits, in the master's
    division and status and in qpool check. Before, UBSan stopped the
    master (budget.c) and a release build reported a negative in_use."""
    rc = redis_server.client()
    exp = redis_ms(rc) + 600000
    rc.hset(KEY, mapping={"x%04d:1:0" % i: "1000000,1000000,1000000,1125899906842624,1000000,%d,0" % exp
                          for i in range(2200)})
    m = master_factory(redis_server, "a")
    m.write_config(budget_pool(lo=1))
    m.start()
    wait_for(lambda: m.pool("work")["fleet_budget"]["lease"] == "ok", 20, what="the lease")
    fb = m.pool("work")["fleet_budget"]
    assert fb["in_use"] == 2200 * 1000000 and fb["free"] == 0 and fb["holders_total"] == 2201, fb
    assert processes(m) == 0  # the records say every slot is held: they are holders like any other
    res = subprocess.run([QPOOL, "check", "-q", "--connect", "-c", str(m.conf)], capture_output=True, text=True,
                         timeout=60)
    assert "sum to 2200000001, more than its budget of 6" in res.stdout, res.stdout
    assert m.proc.poll() is None


def test_a_flood_of_records_is_refused_and_the_pool_keeps_its_floor(master_factory, redis_server):
    """#8: 100,000 records (more than 4,096 masters) are not read: the
    renewal fails with the reason, the pool stops growing and keeps its
    floor. Before, the script read them all each pass, the caller's own
    record came last, past what the master parsed: share 0, no worker."""
    rc = redis_server.client()
    m = master_factory(redis_server, "a")
    m.write_config(budget_pool(lo=2), qpool="fleet_lease_ttl = 4;")
    m.start()
    push_many(rc, "work", [make_payload("sleep:300") for _ in range(5000)])
    wait_for(lambda: processes(m) == 6, 30, what="6 workers")
    exp = redis_ms(rc) + 600000
    for k in range(10):
        rc.hset(KEY, mapping={"flood%06d:1:0" % (k * 10000 + i): "0,0,0,0,6,%d,0" % exp for i in range(10000)})
    # past half the TTL (2 s): down to the floor, never below it
    seen, end = [], time.monotonic() + 5
    while time.monotonic() < end:
        seen.append(processes(m))
        assert seen[-1] >= 2, seen
        time.sleep(0.1)
    wait_for(lambda: m.pool("work")["target"] == 2, 20, what="the floor")
    fb = m.pool("work")["fleet_budget"]
    assert fb["lease"] == "failing" and "holds 100001 records, more than 4096" in fb["lease_error"], fb
    assert m.count_log(r"cannot renew the fleet budget lease: QPOOLBUDGET") == 1
    rc.delete(KEY)  # as the message says
    wait_for(lambda: processes(m) == 6, 30, what="the whole budget again")


def test_a_renewal_refused_by_a_replica_names_it_and_reconnects(master_factory, redis_server, tmp_path):
    """#12: a failover that leaves the connection on a replica: the
    renewal's error (READONLY) is logged and shown, and the connection is
    dropped so that the next pass finds the master."""
    (tmp_path / "r2").mkdir()
    other = RedisServer(tmp_path / "r2")
    try:
        m = master_factory(redis_server, "a")
        m.write_config(budget_pool(lo=1))
        m.start()
        wait_for(lambda: m.pool("work")["fleet_budget"]["lease"] == "ok", 20, what="the lease")
        rc = redis_server.client()
        rc.execute_command("REPLICAOF", "127.0.0.1", str(other.port))
        wait_for(lambda: m.pool("work")["fleet_budget"]["lease"] == "failing", 20, what="the renewals refused")
        assert m.pool("work")["fleet_budget"]["lease_error"].startswith("READONLY")
        m.wait_log(r"cannot renew the fleet budget lease: READONLY")
        m.wait_log(r"the lease script met a read-only replica")
        rc.execute_command("REPLICAOF", "NO", "ONE")
        wait_for(lambda: m.pool("work")["fleet_budget"]["lease"] == "ok", 30, what="renewed again")
    finally:
        other.stop()
