"""The fleet budget at scale (issue 22): 200 virtual masters and 50 pools
against a real redis-server, each running qpool's own lease script and
budget decisions (tests/sim/budget_sim.c) in real time, with random deaths,
partitions (no renewals) and changing backlogs. Bounded: about 25 s.

The simulation checks its invariants every pass and counts what failed:
the budget is never exceeded (leases, and workers but for the floors of
partitioned hosts whose lease lapsed), a dead host's lease is gone within
the TTL and its slots are taken by hosts that wait (none waits more than
3 passes while slots are free), and no host starves while another idles.
Its figures are in docs/benchmarks.md."""
import json
import os
import subprocess

from conftest import BUILD, SANITIZER_PATTERNS

SIM = str(BUILD / "budget-sim")


def test_two_hundred_hosts_fifty_pools_deaths_partitions_backlogs(redis_server):
    res = subprocess.run([SIM, "--port", str(redis_server.port), "--hosts", "200", "--pools", "50",
                          "--seconds", "25", "--interval-ms", "500", "--ttl-ms", "2000", "--seed",
                          os.environ.get("QPOOL_SIM_SEED", "1")],
                         capture_output=True, text=True, timeout=120)
    assert not SANITIZER_PATTERNS.search(res.stderr), res.stderr
    assert res.stdout.strip(), res.stderr
    fig = json.loads(res.stdout.strip().splitlines()[-1])
    print(json.dumps(fig))
    # it really exercised what it checks
    assert fig["passes"] >= 30, fig
    assert fig["deaths"] >= 5 and fig["partitions"] >= 3 and fig["backlog_changes"] > 100, fig
    assert fig["reuse_checks"] >= 5 and fig["budget_checks"] >= 30 * 50, fig
    # one script per pool a host runs (4 to 11 here), one round trip per host and pass
    assert fig["batches"] <= fig["passes"] * 200, fig
    assert 4 <= fig["scripts_per_host_pass"] <= 11, fig
    # the invariants
    assert fig["over_budget"] == 0, res.stderr
    assert fig["workers_over"] == 0, res.stderr
    assert fig["reuse_failed"] == 0, res.stderr
    assert fig["starve_failed"] == 0, res.stderr
    assert fig["waitfree_failed"] == 0, res.stderr
    assert res.returncode == 0, res.stderr
