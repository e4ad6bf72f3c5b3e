"""Every master on a Redis connection in one view: heartbeats in Redis,
`qpool status --fleet [--json]` (issue 9)."""
import json
import os
import signal
import subprocess
import time

from conftest import FIXTURE_HANDLER, PREFIX, QPOOL, wait_for


def pool(name, queue, n):
    return ('{ name = "%s"; queues = ["%s"]; processes = %d; handler = { type = "pipe"; command = ["%s"]; }; }'
            % (name, queue, n, FIXTURE_HANDLER))


def fleet(conf):
    res = subprocess.run([QPOOL, "status", "--fleet", "--json", "-c", str(conf)], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode in (0, 2), res.stderr
    return json.loads(res.stdout)


def pids(conf):
    return {m["pid"] for m in fleet(conf)["masters"]}


def test_two_masters_in_one_view_killed_and_stopped(master_factory, redis_server, tmp_path):
    a = master_factory(redis_server, "a")
    a.write_config(pool("emails", "emails", 2))
    a.start()
    b = master_factory(redis_server, "b")
    b.write_config(pool("reports", "reports", 1), qpool="balance_interval = 0.2;")
    b.start()
    wait_for(lambda: pids(a.conf) == {a.proc.pid, b.proc.pid}, 15, what="both masters in the fleet")
    f = fleet(b.conf)
    by_pid = {m["pid"]: m for m in f["masters"]}
    ma = by_pid[a.proc.pid]
    assert ma["config"] == str(a.conf) and ma["state"] == "running" and ma["version"]
    assert [p["name"] for p in ma["pools"]] == ["emails"]
    wait_for(lambda: {m["pid"]: m["workers"]["total"] for m in fleet(a.conf)["masters"]}
             == {a.proc.pid: 2, b.proc.pid: 1}, 15, what="worker counts")
    assert fleet(a.conf)["totals"]["masters"] == 2
    text = subprocess.run([QPOOL, "status", "--fleet", "-c", str(a.conf)], capture_output=True, text=True,
                          timeout=30).stdout
    assert "2 masters" in text and str(a.conf) in text and str(b.conf) in text

    # a paused master says so
    b.signal(signal.SIGUSR2)
    wait_for(lambda: {m["pid"]: m["state"] for m in fleet(a.conf)["masters"]}.get(b.proc.pid) == "paused", 10,
             what="b paused in the fleet")
    b.signal(signal.SIGCONT)

    # SIGKILL: gone once its record expires (a few balance intervals)
    apid = a.proc.pid
    a.proc.kill()
    a.proc.wait(10)
    wait_for(lambda: apid not in pids(b.conf), 10, what="the killed master to drop out")
    # SIGTERM: gone as soon as it has stopped
    b.signal(signal.SIGTERM)
    assert b.wait_exit(30) == 0
    assert fleet(b.conf)["masters"] == []
    # and nothing is left behind: the index expires with the last record
    r = redis_server.client()
    assert r.keys(PREFIX + "qpool:master:*") == []
    assert r.zcard(PREFIX + "qpool:masters") == 0


FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def test_a_master_whose_clock_is_an_hour_off_stays_in_the_fleet(master_factory, redis_server):
    """Heartbeat times come from Redis (TIME), not the host's clock."""
    skewed = master_factory(redis_server, "skewed")
    skewed.write_config(pool("emails", "emails", 1))
    # (an ASan build must be told that a preloaded library may come first)
    asan = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    skewed.start(env={"LD_PRELOAD": FAKETIME, "FAKETIME": "-3600", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                      "ASAN_OPTIONS": asan.lstrip(":")})
    honest = master_factory(redis_server, "honest")
    honest.write_config(pool("reports", "reports", 1))
    honest.start()
    both = {skewed.proc.pid, honest.proc.pid}
    skewed.wait_log(r"started with")
    honest.wait_log(r"started with")
    assert skewed.log()[:13] != honest.log()[:13], "libfaketime did not take"  # log times are an hour apart
    wait_for(lambda: pids(honest.conf) == both, 15, what="both masters in the fleet")
    # past a TTL (3 s), from either side, both are still there
    time.sleep(4)
    assert pids(honest.conf) == both
    assert pids(skewed.conf) == both
