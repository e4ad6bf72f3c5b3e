"""The fleet budget across configurations and hosts (the review of issue
22, #1, #9, #10, #11, #13): several budgeted pools on one connection and
a reload that changes them, a connection's prefix or a pool's connection
changed at reload, two masters that share a hostname and a pid (containers
on the host's network), and a host whose max_workers is the bound."""
import os
import subprocess

import pytest

from conftest import PREFIX, QPOOL, make_payload, push_many, wait_for
from test_fleet_budget import budget_pool, lease_records, processes


def redis_group(port, prefix=PREFIX, second_db=None):
    conf = 'default = { host = "127.0.0.1"; port = %d; db = 0; prefix = "%s"; };' % (port, prefix)
    if second_db is not None:
        conf += ' second = { host = "127.0.0.1"; port = %d; db = %d; prefix = "%s"; };' % (port, second_db, prefix)
    return conf


def held(m, pool):
    return m.pool(pool)["fleet_budget"]["held"]


def test_several_budgeted_pools_on_one_connection_and_a_reload(master_factory, redis_server):
    """#1: the leases of several budgeted pools on one connection, created
    in one pass (and again at a reload that adds and removes some): the
    master kept pointers into an array it grew meanwhile (ASan:
    heap-use-after-free; the ASan build of the suite fails on it)."""
    rc = redis_server.client()
    m = master_factory(redis_server, "a")
    pools = lambda names: ",\n".join(budget_pool(queue=n, name=n, budget=3, lo=1, hi=3) for n in names)  # noqa: E731
    m.write_config(pools(["p1", "p2", "p3"]))
    m.start()
    wait_for(lambda: all(processes(m, p) == 1 and held(m, p) == 1 for p in ("p1", "p2", "p3")), 30,
             what="each pool's floor, held")
    m.write_config(pools(["p2", "p3", "p4", "p5", "p6"]))
    m.cli("reload")
    wait_for(lambda: all(processes(m, p) == 1 and held(m, p) == 1 for p in ("p2", "p3", "p4", "p5", "p6")), 30,
             what="each pool's floor, held, after the reload")
    wait_for(lambda: not lease_records(rc, "p1"), 10, what="p1's lease released")
    for p in ("p2", "p3", "p4", "p5", "p6"):
        assert len(lease_records(rc, p)) == 1


def test_a_changed_prefix_moves_the_lease(master_factory, redis_server):
    """#9: a reload that changes the connection's prefix joins the fleet of
    the new prefix and releases the old record once nothing runs under it
    (here at once: the workers are idle). Before, the key was the old one
    until a restart: the fleet was split in two."""
    rc = redis_server.client()
    m = master_factory(redis_server, "a")
    m.write_config(budget_pool(lo=1), qpool="fleet_lease_ttl = 60;", redis_conf=redis_group(redis_server.port))
    m.start()
    wait_for(lambda: len(lease_records(rc)) == 1, 20, what="the record under the old prefix")
    m.write_config(budget_pool(lo=1), qpool="fleet_lease_ttl = 60;",
                   redis_conf=redis_group(redis_server.port, prefix="other_"))
    m.cli("reload")
    wait_for(lambda: len(lease_records(rc, prefix="other_")) == 1, 20, what="the record under the new prefix")
    wait_for(lambda: not lease_records(rc), 20, what="the old record released (its TTL is 60 s)")
    wait_for(lambda: processes(m) == 1, 20, what="the floor")


def test_a_pool_moved_to_another_connection_releases_the_old_record(master_factory, redis_server):
    """#10: a reload that moves a budgeted pool to another connection
    releases its record on the old one once nothing runs under it, not at
    its TTL."""
    rc0, rc2 = redis_server.client(), redis_server.client(db=2)
    m = master_factory(redis_server, "a")
    conf = redis_group(redis_server.port, second_db=2)
    m.write_config(budget_pool(lo=1), qpool="fleet_lease_ttl = 60;", redis_conf=conf)
    m.start()
    wait_for(lambda: len(lease_records(rc0)) == 1, 20, what="the record on the first connection")
    m.write_config(budget_pool(lo=1, extra='connection = "second";'), qpool="fleet_lease_ttl = 60;",
                   redis_conf=conf)
    m.cli("reload")
    wait_for(lambda: len(lease_records(rc2)) == 1, 20, what="the record on the second connection")
    wait_for(lambda: not lease_records(rc0), 20, what="the old record released (its TTL is 60 s)")


def start_in_pid_namespace(m):
    """Start m's master as pid 1 of a PID namespace of its own, as in a
    container: two of them on one host share hostname and pid."""
    m.logf = open(m.log_path, "ab")
    m.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", QPOOL, "run", "-c", str(m.conf)],
                              stdout=m.logf, stderr=subprocess.STDOUT, start_new_session=True)
    m.sid = m.proc.pid
    wait_for(lambda: m.listening() or m.proc.poll() is not None, 10, what="the master to start")
    assert m.proc.poll() is None, m.log()
    return m


@pytest.mark.skipif(os.geteuid() != 0, reason="PID namespaces (unshare --pid) need root")
def test_two_masters_with_one_hostname_and_pid_keep_two_records(master_factory, redis_server):
    """#11: a lease id is host:pid plus a nonce per start. Before, two
    masters that were both pid 1 on one hostname wrote one record, and
    each ran the whole budget."""
    ms = []
    for name in ("a", "b"):
        m = master_factory(redis_server, name)
        m.write_config(budget_pool(budget=4, lo=0, hi=4))
        ms.append(start_in_pid_namespace(m))
    a, b = ms
    assert a.status()["pid"] == b.status()["pid"] == 1
    rc = redis_server.client()
    push_many(rc, "work", [make_payload("sleep:300") for _ in range(3000)])
    wait_for(lambda: len(lease_records(rc)) == 2, 20, what="two records")
    wait_for(lambda: processes(a) + processes(b) == 4, 30, what="the budget")
    seen = []
    for _ in range(30):
        seen.append((processes(a), processes(b)))
        assert sum(seen[-1]) <= 4, seen
    ids = list(lease_records(rc))
    assert ids[0].rsplit(":", 1)[0] == ids[1].rsplit(":", 1)[0]  # same host:pid, two nonces


def test_no_host_claims_slots_its_max_workers_will_not_let_it_run(master_factory, redis_server):
    """#13: a host whose max_workers allows 2 claims 2, not the fair share
    of what its queues would want; the other host runs the rest."""
    a = master_factory(redis_server, "a")
    a.write_config(budget_pool(lo=1), qpool="max_workers = 2;")
    b = master_factory(redis_server, "b")
    b.write_config(budget_pool(lo=1))
    a.start()
    b.start()
    push_many(redis_server.client(), "work", [make_payload("sleep:300") for _ in range(5000)])
    wait_for(lambda: processes(a) == 2 and processes(b) == 4, 30, what="2 + 4")
    assert held(a, "work") == 2 and a.pool("work")["fleet_budget"]["want"] == 2
