"""Pause by job class in one pool (issue 32 item 4, "per pool or across the
fleet"): `qpool pause POOL --class X` (the control socket's pause with
"pools" and "classes", `POST /api/classes/X/pause` with {"pool": P}) holds
X's jobs in that pool only, on every host: its queue's other classes run,
and X's jobs run in the other pools; `continue POOL --class X` lets them
start, attempts unchanged. The checks read the handlers' log and Redis,
never the clock."""
import json
import urllib.error
import urllib.request

from conftest import PREFIX, free_port, make_payload, push_many, wait_for
from test_class_pause import A, B, PAUSED_KEY, TOKEN, handler, http, started


def pools(path):
    one = ('{ name = "%s"; queues = ["%s"]; processes = 1; retry_after = 300;'
           ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }')
    return one % ("p1", "cpp-1", path) + ", " + one % ("p2", "cpp-2", path)


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method="POST", data=json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    req.add_header("Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(req, timeout=30) as res:
        return res.status, json.loads(res.read())


def test_pause_class_in_one_pool(master, r, tmp_path):
    path, log = handler(tmp_path)
    port = free_port()
    master.write_config(pools(path), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: http(port, "GET", "/healthz")[0] == 200, 30, what="the HTTP endpoint")
    master.cli("pause", "p1", "--class", A)
    assert r.hkeys(PAUSED_KEY) == [(A + "@p1").encode()]
    assert "control socket" in json.loads(r.hget(PAUSED_KEY, A + "@p1"))["by"]
    master.wait_log(r"paused classes now: 1", timeout=60)  # p1's worker; p2's holds nothing
    assert "class %s: paused in pool p1" % A in master.log()

    held = [make_payload(job=A) for _ in range(3)]
    other_pool = [make_payload(job=A) for _ in range(3)]
    same_queue = [make_payload(job=B) for _ in range(3)]
    push_many(r, "cpp-1", held + same_queue)  # A's first in p1's queue
    push_many(r, "cpp-2", other_pool)
    want = {p["uuid"] for p in other_pool + same_queue}
    wait_for(lambda: {u for _, u, _ in started(log)} == want, 60, what="p2's A jobs and p1's B jobs to run")
    q = [json.loads(x) for x in r.lrange(PREFIX + "queues:cpp-1", 0, -1)]
    assert [j["uuid"] for j in q] == [p["uuid"] for p in held] and all(j["attempts"] == 0 for j in q)

    # seen: the status (CLI and API) and /metrics name the pool
    wait_for(lambda: [(c["class"], c["pool"]) for c in master.status().get("paused_classes") or []] == [(A, "p1")],
             30, what="the paused class in the status")
    assert "paused class %s in pool p1" % A in master.cli("status").stdout
    wait_for(lambda: 'qpool_class_paused{class="App\\\\Jobs\\\\SyncCrm",pool="p1"} 1'
             in http(port, "GET", "/metrics", TOKEN)[1], 30, what="the pool in /metrics")

    # a fleet-wide continue leaves the pool's pause; the pool's continue (over HTTP) ends it
    master.cli("continue", "--class", A)
    assert r.hexists(PAUSED_KEY, A + "@p1")
    st, rep = post(port, "/api/classes/App%5CJobs%5CSyncCrm/continue", {"pool": "p1"})
    assert st == 200 and rep["ok"], rep
    assert not r.exists(PAUSED_KEY)
    wait_for(lambda: len(started(log)) == 9, 60, what="the held jobs to run after continue")
    runs = [s for s in started(log) if s[1] in {p["uuid"] for p in held}]
    assert [u for _, u, _ in runs] == [p["uuid"] for p in held] and all(a == "1" for _, _, a in runs)  # in order
    # and over HTTP: a pool of this host, or a 400
    st, rep = post(port, "/api/classes/App%5CJobs%5CSyncCrm/pause", {"pool": "p2"})
    assert st == 200 and r.hkeys(PAUSED_KEY) == [(A + "@p2").encode()]
    try:
        post(port, "/api/classes/App%5CJobs%5CSyncCrm/pause", {"pool": "nope"})
        assert False, "a pool of no master here"
    except urllib.error.HTTPError as e:
        assert e.code == 400



def test_a_pool_pause_can_be_continued_where_the_pool_is_not(master, r, tmp_path):
    """A pool's pause lives in the fleet's hash: it is listed on every host,
    and its pool may be another host's, or gone from the config. Its
    continue is taken anywhere (a pause still needs a pool of this host):
    before, `X@gone` could only be removed with redis-cli (review of
    2026-11-29)."""
    path, _ = handler(tmp_path)
    master.write_config(pools(path))
    master.start()
    r.hset(PAUSED_KEY, A + "@gone", json.dumps({"since": 1, "by": "an older config"}))
    res = master.cli("continue", "gone", "--class", A, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not r.hexists(PAUSED_KEY, A + "@gone")
    res = master.cli("pause", "gone", "--class", A, check=False)
    assert res.returncode != 0 and not r.exists(PAUSED_KEY), res.stdout + res.stderr
