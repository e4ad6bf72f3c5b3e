"""Issue 32, slice 3: every job running on every host writing to the
connection (GET /api/jobs/running: from the masters' fleet records, oldest
first), and "stop this job" (POST /api/jobs/<uuid>/stop): this host's master
has the worker kill the job's handler as at a timeout, so the job is then
released or failed as a timeout leaves it. Two real masters on one real
Redis; the jobs are pipe-handler jobs that hang."""
import json
import os

from conftest import FIXTURE_HANDLER, PREFIX, free_port, make_payload, push, wait_for
from test_control import raw_request
from test_http import TOKEN, code, get, post

STUCK = "App\\Jobs\\SyncCrm"


def pool(name, queue, extra=""):
    return ('{ name = "%s"; queues = ["%s"]; processes = 1; tries = 2; backoff = [0]; timeout = 600;'
            ' handler = { type = "pipe"; command = ["%s"]; }; %s }' % (name, queue, FIXTURE_HANDLER, extra))


def running(port):
    st, _, body = get(port, "/api/jobs/running", TOKEN)
    assert st == 200, body
    return json.loads(body)


def row_of(port, uuid):
    rows = [x for x in running(port)["running"] if x["uuid"] == uuid]
    return rows[0] if rows else None


def test_running_jobs_of_two_masters_and_stop_this_job(master_factory, redis_server):
    r = redis_server.client()
    port = free_port()
    quick = "shutdown_timeout = 2; balance_interval = 0.2;"
    a = master_factory(redis_server, "a")
    a.write_config(pool("crm", "rn-crm"), qpool=quick + 'http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    a.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    b = master_factory(redis_server, "b")
    b.write_config(pool("other", "rn-other"), qpool=quick)
    b.start()
    wait_for(lambda: code(port, "/healthz", TOKEN) == 200, 15, what="the HTTP endpoint")
    mine = make_payload("hang", job=STUCK)
    theirs = make_payload("hang", job="App\\Jobs\\Other")
    push(r, "rn-other", theirs)
    push(r, "rn-crm", mine)
    # both, from both masters: host, pool, pid, class, queue, attempt, age; oldest first
    wait_for(lambda: row_of(port, mine["uuid"]) and row_of(port, theirs["uuid"]), 20, what="both jobs running")
    rep = running(port)
    ages = [x["age_ms"] for x in rep["running"]]
    assert ages == sorted(ages, reverse=True)
    m, t = row_of(port, mine["uuid"]), row_of(port, theirs["uuid"])
    assert m["own"] is True and t["own"] is False and m["master"] != t["master"] and m["master"] == rep["master"]
    assert (m["pool"], m["queue"], m["name"], m["attempt"], m["timeout_s"]) == ("crm", "rn-crm", STUCK, 1, 600)
    assert m["host"] and m["pid"] > 0 and m["age_ms"] >= 0 and m["past_timeout"] is False
    assert t["pool"] == "other" and t["queue"] == "rn-other"
    # the token, and only this host's master's jobs
    assert post(port, "/api/jobs/%s/stop" % mine["uuid"])[0] == 401
    st, rep = post(port, "/api/jobs/%s/stop" % theirs["uuid"], TOKEN)
    assert st == 400 and "no job" in rep["error"]
    # stop: attempt 1 ends as a timeout would (tries = 2: released), and the job runs again
    st, rep = post(port, "/api/jobs/%s/stop" % mine["uuid"], TOKEN)
    assert st == 200 and rep["ok"] and rep["pool"] == "crm" and rep["pid"] == m["pid"], rep
    wait_for(lambda: (row_of(port, mine["uuid"]) or {}).get("attempt") == 2, 30, what="attempt 2 running")
    a.wait_log(r"job \S+ \(App\\Jobs\\SyncCrm\) stopped by an operator")
    a.wait_log(r"stop job %s \(App\\Jobs\\SyncCrm\) of pool crm .* over HTTP by 127\.0\.0\.1" % mine["uuid"])
    # stop again: its last try, so it is failed with the timeout's exception
    assert post(port, "/api/jobs/%s/stop" % mine["uuid"], TOKEN)[0] == 200
    wait_for(lambda: r.exists(PREFIX + "qpool:failed:job:" + mine["uuid"]), 30, what="the job in the failed store")
    exc = r.hget(PREFIX + "qpool:failed:job:" + mine["uuid"], "exception").decode()
    assert "TimeoutExceededException" in exc or "timed out" in exc, exc
    wait_for(lambda: row_of(port, mine["uuid"]) is None, 20, what="the job gone from the running list")
    # the other master's job ran on untouched
    assert row_of(port, theirs["uuid"])["attempt"] == 1


def test_stop_job_audit_names_the_socket_peer(master_factory, redis_server):
    """Review of g32c, SHOULD 2: a stop-job on the control socket is logged
    with the peer's uid, and a "by" it sends (only the HTTP process's is
    believed) is not: no socket client can pose as an HTTP user."""
    r = redis_server.client()
    m = master_factory(redis_server, "audit")
    m.write_config(pool("au", "rn-audit"), qpool="shutdown_timeout = 2;")
    m.start()
    job = make_payload("hang", job=STUCK)
    push(r, "rn-audit", job)
    wait_for(lambda: running_job(m).get("uuid") == job["uuid"], 30, what="the job running")
    req = json.dumps({"cmd": "stop-job", "uuid": job["uuid"], "by": "alice"}).encode() + b"\n"
    rep = json.loads(raw_request(m.socket, req))
    assert rep.get("ok") and rep["pool"] == "au", rep
    m.wait_log(r"stop job %s \(App\\Jobs\\SyncCrm\) of pool au .* asked on the control socket, uid %d:"
               % (job["uuid"], os.getuid()))
    assert "alice" not in m.log()
    # the CLI's own stop: the same
    wait_for(lambda: running_job(m).get("attempt") == 2, 30, what="attempt 2 running")
    assert "stopping job %s" % job["uuid"] in m.cli("stop-job", job["uuid"]).stdout
    m.wait_log(r"stop job %s .* asked on the control socket, uid %d:" % (job["uuid"], os.getuid()), count=2)


def running_job(m):
    """The job a child of the master runs ({} when none), from qpool status -v."""
    pools = m.status().get("pools", [])
    for p in pools.values() if isinstance(pools, dict) else pools:
        for c in p.get("children", []):
            if c.get("job"):
                return c["job"]
    return {}
