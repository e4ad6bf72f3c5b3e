"""Pause by job class across the fleet (issue 32 item 4): `qpool pause
--class X` keeps X's jobs in their queue, attempts unchanged, on every
master on the same Redis, while the other classes of the queue run; it
survives a master's restart; `qpool continue --class X` lets them run.

Each job runs an exec handler that appends "S class uuid attempts" to a
log; the checks read that log and Redis, never the clock."""
import json
import random
import time

from conftest import PREFIX, free_port, http_call, kill_a_worker, make_payload, push_many, wait_for

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


TOKEN = "class-pause-token-0123456789abcdef"


def start(master_factory, redis_server, name, path, qpool="", env=None):
    m = master_factory(redis_server, name)
    m.write_config('{ name = "work"; queues = ["work"]; processes = 2; retry_after = 300;'
                   ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }' % path, qpool=qpool)
    return m.start(env=env)


def http(port, method, path, token=None):
    """(status, body) of a request to the master's HTTP endpoint."""
    return http_call(port, path, token, method=method, data=b"{}" if method == "POST" else None,
                     headers={"Content-Type": "application/json"})


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
    for m in (a, b):  # each reads it back on its own balance pass
        wait_for(lambda: [c["class"] for c in m.status().get("paused_classes") or []] == [A], 30,
                 what="the paused class in the status")
        wait_for(lambda: "paused class %s" % A in m.cli("status").stdout, 30, what="the paused class in qpool status")

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
    path, log = handler(tmp_path)
    a = start(master_factory, redis_server, "a", path)
    res = a.cli("pause", "--class", "App\\Jobs\\X", "--queue", "work", check=False)
    assert res.returncode != 0 and "no queue" in (res.stdout + res.stderr)
    res = a.cli("pause", "--class", "App\\Jobs\\X", "no-such-pool", check=False)  # a pool: one of this host's
    assert res.returncode != 0 and "no pool no-such-pool" in (res.stdout + res.stderr)
    assert a.cli("pause", "--class", "App\\Jobs\\X@work", check=False).returncode != 0  # '@' names a pool
    res = a.cli("pause", "--class", "bad\x01name", check=False)
    assert res.returncode != 0
    rc = redis_server.client()
    assert not rc.exists(PAUSED_KEY)
    assert a.status()["state"] == "running"  # nothing else was paused
    # a key of another type where the paused classes live: jobs still run
    rc.set(PAUSED_KEY, "not a hash")
    push_many(rc, "work", [make_payload(job=B)])
    wait_for(lambda: started(log), 60, what="a job to run beside a broken paused-classes key")
    assert a.cli("pause", "--class", A, check=False).returncode != 0
    a.wait_log(r"is not a hash of class names")
    assert a.status()["paused_classes"] == []


def start_with_http(master_factory, redis_server, path):
    """Master "a" with an HTTP endpoint behind TOKEN, answering: (master, port)."""
    port = free_port()
    a = start(master_factory, redis_server, "a", path,
              qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port,
              env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: http(port, "GET", "/healthz")[0] == 200, 30, what="the HTTP endpoint")
    return a, port


def test_pause_class_over_http_and_metrics(master_factory, redis_server, tmp_path):
    path, log = handler(tmp_path)
    rc = redis_server.client()
    a, port = start_with_http(master_factory, redis_server, path)
    url = "/api/classes/App%5CJobs%5CSyncCrm/pause"
    assert http(port, "POST", url)[0] == 401  # behind the token
    assert not rc.exists(PAUSED_KEY)
    st, body = http(port, "POST", url, TOKEN)
    assert st == 200, body
    assert rc.hexists(PAUSED_KEY, A)
    assert "HTTP by" in json.loads(rc.hget(PAUSED_KEY, A))["by"]
    assert http(port, "POST", "/api/classes/bad%zz/pause", TOKEN)[0] == 400
    st, body = http(port, "GET", "/api/status", TOKEN)
    assert st == 200 and [c["class"] for c in json.loads(body)["paused_classes"]] == [A]
    held_everywhere([a], 1)
    push_many(rc, "work", [make_payload(job=A), make_payload(job=B)])
    wait_for(lambda: [s for s in started(log) if s[0] == B], 60, what="B's job to run")
    wait_for(lambda: 'qpool_class_paused{class="App\\\\Jobs\\\\SyncCrm"} 1' in http(port, "GET", "/metrics", TOKEN)[1],
             30, what="the paused class in /metrics")
    assert not [s for s in started(log) if s[0] == A]
    st, body = http(port, "POST", "/api/classes/App%5CJobs%5CSyncCrm/continue", TOKEN)
    assert st == 200, body
    assert not rc.exists(PAUSED_KEY)
    wait_for(lambda: [s for s in started(log) if s[0] == A], 60, what="A's job to run after continue")
    wait_for(lambda: "qpool_class_paused{" not in http(port, "GET", "/metrics", TOKEN)[1], 30,
             what="no paused class in /metrics")


def test_pause_class_loses_no_job_or_attempt_under_worker_kills(master_factory, redis_server, tmp_path):
    """Workers SIGKILLed and respawned while a class is paused: the new ones
    hold it from their first pop; its jobs stay ready with attempts 0, and
    after continue each runs once, on its first attempt."""
    path, log = handler(tmp_path)
    rc = redis_server.client()
    a = start(master_factory, redis_server, "a", path)
    b = start(master_factory, redis_server, "b", path)
    a.cli("pause", "--class", A)
    held_everywhere([a, b], 1)
    a_jobs = [make_payload(job=A) for _ in range(5)]
    push_many(rc, "work", a_jobs[:2] + [make_payload(job=B) for _ in range(40)] + a_jobs[2:])
    rng, killed, kills = random.Random(32), set(), 0
    for i in range(8):
        kills += kill_a_worker((a, b)[i % 2], rng, killed)
        time.sleep(0.2)  # pacing the kills only; nothing is asserted on time
    assert kills >= 4
    wait_for(lambda: [j["displayName"] for j in map(json.loads, rc.lrange(PREFIX + "queues:work", 0, -1))] == [A] * 5,
             90, what="every B job popped, A's 5 left")
    assert not [s for s in started(log) if s[0] == A]
    assert [j["uuid"] for j in waiting(rc, A)] == [p["uuid"] for p in a_jobs]
    assert all(j["attempts"] == 0 for j in waiting(rc, A))
    assert not [m for m in rc.zrange(PREFIX + "queues:work:reserved", 0, -1) if json.loads(m)["displayName"] == A]
    a.cli("continue", "--class", A)
    wait_for(lambda: sum(1 for s in started(log) if s[0] == A) == 5, 60, what="A's jobs to run after continue")
    runs = [s for s in started(log) if s[0] == A]
    assert sorted(u for _, u, _ in runs) == sorted(p["uuid"] for p in a_jobs)
    assert all(att == "1" for _, _, att in runs)
