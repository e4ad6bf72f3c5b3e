"""Pause by job class across the fleet (issue 32 item 4): `qpool pause
--class X` keeps X's jobs in their queue, attempts unchanged, on every
master on the same Redis, while the other classes of the queue run; it
survives a master's restart; `qpool continue --class X` lets them run.

Each job runs an exec handler that appends "S class uuid attempts" to a
log; the checks read that log and Redis, never the clock."""
import json

from conftest import PREFIX, make_payload, push_many, wait_for

A, B = "App\\Jobs\\SyncCrm", "App\\Jobs\\Other"
PAUSED_KEY = PREFIX + "qpool:paused-classes"

HANDLER = """#!/bin/sh
cat > /dev/null
echo "S $QPOOL_JOB_NAME $QPOOL_JOB_UUID $QPOOL_ATTEMPTS" >> %s
"""


def handler(tmp):
    log = tmp / "jobs.log"
    log.touch()
    path = tmp / "handler.sh"
    path.write_text(HANDLER % log)
    path.chmod(0o755)
    return path, log


def start(master_factory, redis_server, name, path):
    m = master_factory(redis_server, name)
    m.write_config('{ name = "work"; queues = ["work"]; processes = 2; retry_after = 300;'
                   ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }' % path)
    return m.start()


def started(log):
    """[(class, uuid, attempts)] of every start."""
    return [tuple(line.split()[1:4]) for line in log.read_text().splitlines() if line.startswith("S ")]


def waiting(rc, cls):
    return [json.loads(p) for p in rc.lrange(PREFIX + "queues:work", 0, -1)
            if json.loads(p)["displayName"] == cls]


def held_everywhere(masters, n):
    """Every worker of every master has read n paused classes."""
    for m in masters:
        m.wait_log(r"paused classes now: %d" % n, timeout=60, count=2)


def test_pause_class_fleet_wide_survives_restart(master_factory, redis_server, tmp_path):
    path, log = handler(tmp_path)
    rc = redis_server.client()
    a = start(master_factory, redis_server, "a", path)
    b = start(master_factory, redis_server, "b", path)
    a.cli("pause", "--class", A)
    assert rc.hexists(PAUSED_KEY, A)
    entry = json.loads(rc.hget(PAUSED_KEY, A))
    assert "control socket" in entry["by"] and entry["at"] > 0
    held_everywhere([a, b], 1)
    assert "class %s: paused across the fleet" % A in a.log()

    a_jobs = [make_payload(job=A) for _ in range(6)]
    b_jobs = [make_payload(job=B) for _ in range(6)]
    push_many(rc, "work", a_jobs + b_jobs)  # A's jobs first in the queue
    wait_for(lambda: sum(1 for s in started(log) if s[0] == B) == 6, 60, what="B's 6 jobs to run")
    assert not [s for s in started(log) if s[0] == A], "a paused class's job started"
    held = waiting(rc, A)
    assert [j["uuid"] for j in held] == [p["uuid"] for p in a_jobs]  # in order
    assert all(j["attempts"] == 0 for j in held)

    # both masters list it (b read it from Redis: no config change)
    for m in (a, b):
        st = m.status()
        assert [c["class"] for c in st["paused_classes"]] == [A]
        assert "paused class %s" % A in m.cli("status").stdout

    # a master restarts: it still holds the class
    a.stop()
    a = start(master_factory, redis_server, "a", path)
    held_everywhere([a], 1)
    push_many(rc, "work", [make_payload(job=B) for _ in range(4)])
    wait_for(lambda: sum(1 for s in started(log) if s[0] == B) == 10, 60, what="4 more B jobs to run")
    assert not [s for s in started(log) if s[0] == A]
    assert len(waiting(rc, A)) == 6 and all(j["attempts"] == 0 for j in waiting(rc, A))

    # continue from the other master: A's jobs run, each once, first attempt
    b.cli("continue", "--class", A)
    assert not rc.hexists(PAUSED_KEY, A)
    wait_for(lambda: sum(1 for s in started(log) if s[0] == A) == 6, 60, what="A's jobs to run after continue")
    runs = [s for s in started(log) if s[0] == A]
    assert sorted(u for _, u, _ in runs) == sorted(p["uuid"] for p in a_jobs)
    assert all(att == "1" for _, _, att in runs)
    assert "class %s: continued across the fleet" % A in b.log()
    wait_for(lambda: b.status()["paused_classes"] == [], 30, what="status to list no paused class")


def test_pause_class_bad_requests(master_factory, redis_server, tmp_path):
    path, _ = handler(tmp_path)
    a = start(master_factory, redis_server, "a", path)
    res = a.cli("pause", "--class", "App\\Jobs\\X", "work", check=False)
    assert res.returncode != 0 and "no pool or queue" in (res.stdout + res.stderr)
    res = a.cli("pause", "--class", "bad\x01name", check=False)
    assert res.returncode != 0
    assert not redis_server.client().exists(PAUSED_KEY)
    assert a.status()["state"] == "running"  # nothing else was paused
