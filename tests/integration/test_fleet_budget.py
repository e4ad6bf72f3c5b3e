"""A fleet-wide worker budget (issue 22): masters that run a pool of the
same name on one Redis share fleet_max_processes workers in all, through
leases in Redis (one script per pool and balance pass, Redis time)."""
import json
import subprocess
import time

from conftest import FIXTURE_HANDLER, PREFIX, QPOOL, make_payload, push_many, wait_for
from test_cluster import cluster  # noqa: F401 (the fixture: a 3-node Redis Cluster)


def budget_pool(queue="work", budget=6, lo=1, hi=6, name="work", extra=""):
    return ('{ name = "%s"; queues = ["%s"]; balance = "auto"; min_processes = %d; max_processes = %d;'
            ' fleet_max_processes = %d; %s handler = { type = "pipe"; command = ["%s"]; }; }'
            % (name, queue, lo, hi, budget, extra, FIXTURE_HANDLER))


def processes(m, pool="work"):
    """Every process of the pools of that name on this master: stopping
    ones, and a removed pool's still draining, included."""
    return sum(len(p.get("children", [])) for p in m.status()["pools"] if p["name"] == pool)


def lease_records(rc, pool="work", prefix=PREFIX):
    return {k.decode(errors="replace"): v.decode(errors="replace")
            for k, v in rc.hgetall(prefix + "qpool:{qpool-budget:%s}:leases" % pool).items()}


def workers(m, pool="work"):
    """Every child of the pool on this master, stopping ones included."""
    p = m.pool(pool)
    return p["workers"] + p["stopping"]


def start_two(master_factory, redis_server=None, redis_conf=None, queue="work", qpool=""):
    ms = []
    for name in ("a", "b"):
        m = master_factory(redis_server, name)
        m.write_config(budget_pool(queue), qpool=qpool, redis_conf=redis_conf)
        ms.append(m.start())
    return ms


def sample_within_budget(a, b, seconds, budget=6):
    """Sample both masters for `seconds`: never more than the budget; returns
    the samples (a, b)."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s = (workers(a), workers(b))
        assert sum(s) <= budget, "over the fleet budget: %s" % (s,)
        seen.append(s)
        time.sleep(0.1)
    return seen


def two_masters_share_and_survive_a_kill(a, b, rc, queue):
    push_many(rc, queue, [make_payload("sleep:300") for _ in range(3000)])
    # together they reach the budget, split within one worker (equal backlog)
    wait_for(lambda: workers(a) + workers(b) == 6 and abs(workers(a) - workers(b)) <= 1, 30,
             what="both masters to run 6 workers together")
    seen = sample_within_budget(a, b, 15)
    assert (3, 3) in seen
    # SIGKILL one: the other runs the whole budget within the lease TTL plus
    # two balance passes (10 s + 2 x 1 s with the defaults)
    a.proc.kill()
    a.proc.wait(10)
    killed = time.monotonic()
    wait_for(lambda: workers(b) == 6, 20, what="the survivor to run the whole budget")
    print("survivor at the whole budget %.1f s after the kill" % (time.monotonic() - killed))
    assert b.pool("work")["fleet_budget"]["held"] == 6


def test_two_masters_share_six_and_one_takes_all_after_a_kill(master_factory, redis_server):
    a, b = start_two(master_factory, redis_server)
    two_masters_share_and_survive_a_kill(a, b, redis_server.client(), "work")
    fb = b.pool("work")["fleet_budget"]
    assert fb["budget"] == 6 and fb["lease"] == "ok" and fb["holders_total"] == 1
    # visible: status text, the fleet view, /metrics-style families via the status
    text = b.cli("status").stdout
    assert "fleet budget 6 workers: this host holds 6" in text
    def budgets():
        res = subprocess.run([QPOOL, "status", "--fleet", "--json", "-c", str(b.conf)], capture_output=True,
                             text=True, timeout=30)
        return json.loads(res.stdout)["budgets"]
    # (the heartbeat of a pass is written before that pass's lease)
    wait_for(lambda: budgets() == [{"pool": "work", "budget": 6, "held": 6, "want": 6, "masters": 1, "waiting": 0}],
             10, what="the fleet view of the budget")
    text = subprocess.run([QPOOL, "status", "--fleet", "-c", str(b.conf)], capture_output=True, text=True,
                          timeout=30).stdout
    assert "fleet budget work: 6 workers, 6 held" in text
    # a graceful stop releases the lease at once
    b.signal(15)
    assert b.wait_exit(30) == 0
    assert redis_server.client().hgetall(PREFIX + "qpool:{qpool-budget:work}:leases") == {}


def test_scale_is_bounded_by_the_budget_and_says_so(master_factory, redis_server):
    a, b = start_two(master_factory, redis_server)
    push_many(redis_server.client(), "work", [make_payload("sleep:300") for _ in range(2000)])
    wait_for(lambda: workers(a) + workers(b) == 6, 30, what="6 workers")
    res = a.cli("scale", "work", "9", check=False)
    assert res.returncode != 0
    assert "fleet budget of 6 workers" in res.stderr + res.stdout
    res = a.cli("scale", "work", "5")
    assert "shares a fleet budget of 6 workers" in res.stdout
    # the pin moves slots to a: its demand is 5, b's backlog is as long; never over 6
    sample_within_budget(a, b, 5)
    assert workers(a) <= 5


def test_a_master_that_cannot_renew_shrinks_to_its_floor(master_factory, redis_server):
    """Redis gone: no renewal; past half the TTL the pool's target is
    min_processes and every other worker is asked to retire, none killed
    (a busy one writes its job's outcome once Redis is back, then exits)."""
    a = master_factory(redis_server, "a")
    a.write_config(budget_pool(), qpool="fleet_lease_ttl = 4;")
    a.start()
    rc = redis_server.client()
    push_many(rc, "work", [make_payload("sleep:200") for _ in range(3000)])
    wait_for(lambda: workers(a) == 6, 30, what="6 workers")
    redis_server.stop()
    # (an idle worker asked to stop may already be gone: the live ones count)
    wait_for(lambda: (lambda p: p["target"] == 1 and p["workers"] == 1)(a.pool("work")), 20,
             what="down to the floor")
    fb = a.pool("work")["fleet_budget"]
    assert fb["lease"] == "failing" and fb["renew_failures"] >= 1
    assert "LEASE NOT RENEWED" in a.cli("status").stdout
    redis_server.start()
    wait_for(lambda: a.pool("work")["fleet_budget"]["lease"] == "ok", 30, what="the lease renewed again")
    wait_for(lambda: workers(a) == 1, 30, what="the retired workers gone")
    assert "killed by signal" not in a.log()


def test_check_reports_a_budget_that_cannot_be_satisfied(master_factory, redis_server, tmp_path):
    m = master_factory(redis_server, "a")
    m.write_config(budget_pool(budget=2, lo=3, hi=6))
    res = subprocess.run([QPOOL, "check", "-q", "-c", str(m.conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78
    assert "min_processes (3) is greater than fleet_max_processes (2)" in res.stderr
    assert str(m.conf) + ":" in res.stderr
    # with --connect: the floors the fleet reports
    a, b = start_two(master_factory, redis_server)  # min 1 each, budget 6
    wait_for(lambda: a.pool("work")["fleet_budget"]["held"] >= 1 and b.pool("work")["fleet_budget"]["held"] >= 1,
             30, what="two holders")
    c = master_factory(redis_server, "c")
    c.write_config(budget_pool(budget=6, lo=5, hi=6))
    res = subprocess.run([QPOOL, "check", "-q", "--connect", "-c", str(c.conf)], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 1, res.stdout
    assert "fleet budget work: FAILED: the fleet's min_processes with this config's sum to 7" in res.stdout
    res = subprocess.run([QPOOL, "check", "-q", "--connect", "-c", str(a.conf)], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 0, res.stdout
    assert "fleet budget work: ok (6 workers; 2 masters" in res.stdout
    assert "sum to 2)" in res.stdout  # a's own floor counted once


def test_the_same_on_a_three_node_cluster(cluster, master_factory):  # noqa: F811
    conf = 'default = { cluster = [%s]; prefix = "%s"; timeout = 3; };' % (cluster.addrs(), PREFIX)
    a, b = start_two(master_factory, redis_conf=conf, queue="{work}")
    two_masters_share_and_survive_a_kill(a, b, cluster.client(), "{work}")
