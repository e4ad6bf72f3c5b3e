"""Issue 32 item 1: the list endpoints take the same filter names. The job
history (/api/jobs/recent, /api/monitoring/jobs) takes `class` and `status`
beside its own `name` and `outcome`, and `since`/`until` as an age or a date
beside UNIX ms; /api/jobs/pending takes `status` for `state`; the running
list (/api/jobs/running) shows each job's tags and takes host, pool, queue,
class, uuid, tag and status=past_timeout. Real redis-server, real master and workers."""
import json
import time
import urllib.parse

from conftest import FIXTURE_HANDLER, PREFIX, free_port, make_payload, push, wait_for
from test_http import TOKEN, code, get, http_conf

A, B = "App\\Jobs\\SendInvoice", "App\\Jobs\\SyncCrm"


def api(port, path, **q):
    st, _, body = get(port, path + "?" + urllib.parse.urlencode(q), TOKEN, timeout=30)
    return st, json.loads(body)


def ok(port, path, **q):
    st, o = api(port, path, **q)
    assert st == 200, o
    return o


def uuids(o, key="jobs"):
    return sorted(j["uuid"] for j in o[key])


def seed_history(r):
    """40 records: A done and B failed alternately, the newest 20 within the
    last minutes, the oldest 20 three hours ago."""
    key = PREFIX + "qpool:{qpool-jobs}:list"
    now = int(time.time() * 1000)
    for i in range(40):
        at = now - (3 * 3600 * 1000 if i < 20 else 0) - (40 - i) * 1000
        rec = {"uuid": "lf-%d" % i, "name": A if i % 2 else B, "queue": "q", "pool": "w", "host": "app1",
               "attempt": 1, "outcome": "done" if i % 2 else "failed", "finished_at": at, "exception": "",
               "tags": []}
        r.lpush(key, json.dumps(rec, separators=(",", ":")))


def pool(name, queue):
    return ('{ name = "%s"; queues = ["%s"]; processes = 1; tries = 1; timeout = 600;'
            ' handler = { type = "pipe"; command = ["%s"]; }; }' % (name, queue, FIXTURE_HANDLER))


def test_every_list_takes_the_same_filter_names(master, r):
    port = free_port()
    seed_history(r)
    master.write_config(pool("lf-a", "lf-qa") + ", " + pool("lf-b", "lf-qb"),
                        qpool="balance_interval = 0.2; " + http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")

    # the job history: class = name, status = outcome, since/until as an age or a date
    done_a = ["lf-%d" % i for i in range(1, 40, 2)]
    assert uuids(ok(port, "/api/jobs/recent", **{"class": A})) == sorted(done_a)
    assert uuids(ok(port, "/api/jobs/recent", status="done")) == sorted(done_a)
    assert ok(port, "/api/jobs/recent", name=A) == ok(port, "/api/jobs/recent", **{"class": A})
    assert uuids(ok(port, "/api/jobs/recent", status="failed", since="1h")) == sorted(
        "lf-%d" % i for i in range(20, 40, 2))
    assert uuids(ok(port, "/api/jobs/recent", **{"class": A, "until": "1h"})) == sorted(
        "lf-%d" % i for i in range(1, 20, 2))
    assert ok(port, "/api/jobs/recent", since="2999-01-01")["jobs"] == []
    ms = int(time.time() * 1000) - 3600 * 1000  # UNIX ms as before
    assert len(ok(port, "/api/jobs/recent", since=str(ms))["jobs"]) == 20
    for bad in ("yesterday", "-5", "1y"):
        assert api(port, "/api/jobs/recent", since=bad)[0] == 400

    # pending: status = state
    push(r, "lf-idle", make_payload("ok", job=A))
    later = make_payload("ok", job=B)
    r.zadd(PREFIX + "queues:lf-idle:delayed", {json.dumps(later, separators=(",", ":")): time.time() + 3600})
    assert uuids(ok(port, "/api/jobs/pending", queue="lf-idle", status="delayed")) == [later["uuid"]]
    assert len(ok(port, "/api/jobs/pending", queue="lf-idle")["jobs"]) == 2

    # running: host, pool, queue, class, uuid, status=past_timeout
    ja = make_payload("hang", job=A, tags=["App\\Models\\Customer:42", "invoices", 7, "x\ny"])
    jb = make_payload("hang", job=B)
    push(r, "lf-qa", ja)
    push(r, "lf-qb", jb)
    wait_for(lambda: len(ok(port, "/api/jobs/running")["running"]) == 2, 30, what="both jobs running")
    host = ok(port, "/api/jobs/running")["running"][0]["host"]
    assert uuids(ok(port, "/api/jobs/running", **{"class": A}), "running") == [ja["uuid"]]
    assert uuids(ok(port, "/api/jobs/running", pool="lf-b"), "running") == [jb["uuid"]]
    assert uuids(ok(port, "/api/jobs/running", queue="lf-qa", host=host), "running") == [ja["uuid"]]
    assert uuids(ok(port, "/api/jobs/running", uuid=jb["uuid"]), "running") == [jb["uuid"]]
    assert ok(port, "/api/jobs/running", host="no-such-host")["running"] == []
    assert ok(port, "/api/jobs/running", status="past_timeout")["running"] == []  # 600 s: none yet
    assert len(ok(port, "/api/jobs/running", pool="")["running"]) == 2  # empty: no filter
    assert api(port, "/api/jobs/running", status="bogus")[0] == 400
    # each job's tags (the payload's own, made one line), and a tag filter
    rows = {x["uuid"]: x for x in ok(port, "/api/jobs/running")["running"]}
    assert rows[ja["uuid"]]["tags"] == ["App\\Models\\Customer:42", "invoices", "x y"] and rows[jb["uuid"]]["tags"] == []
    assert uuids(ok(port, "/api/jobs/running", tag="App\\Models\\Customer:42"), "running") == [ja["uuid"]]
    assert ok(port, "/api/jobs/running", tag="App\\Models\\Customer:4")["running"] == []


def test_the_failed_store_takes_a_tag_filter(master, r):
    # the payload's own tags (Horizon's): search, bulk retry by filter, and the CLI
    from test_failed_search import payload, post, seed
    from test_failed_search import TOKEN as FTOKEN
    port = free_port()
    master.write_config(pool("lf-a", "lf-qa"), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": FTOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    now = int(time.time())
    recs = []
    for i in range(60):
        p = payload(A, i)
        p["tags"] = ["App\\Models\\Customer:%d" % (i % 6), "invoices"]
        recs.append((p, "RuntimeException: no", now - 60 + i))
    recs.append((dict(payload(A, 99), data={"command": "App\\\\Models\\\\Customer:4"}), "x", now))  # text only
    seed(r, "lf-failed", recs)
    want = sorted(p["uuid"] for p, _, _ in recs[:60] if p["tags"][0].endswith(":4"))
    assert len(want) == 10

    st, _, body = get(port, "/api/failed?" + urllib.parse.urlencode({"tag": "App\\Models\\Customer:4"}), FTOKEN)
    assert st == 200, body
    assert sorted(x["uuid"] for x in json.loads(body)["failed"]) == want
    st, rep = post(port, "/api/failed/retry", {"tag": "App\\Models\\Customer:4", "dry_run": True})
    assert st == 200 and rep["matched"] == 10 and r.llen(PREFIX + "queues:lf-failed") == 0, rep
    rows = json.loads(master.cli("failed", "list", "--tag", "App\\Models\\Customer:4", "--json").stdout)
    assert sorted(x["uuid"] for x in rows) == want
    out = master.cli("failed", "retry", "--tag", "App\\Models\\Customer:4", "--queue", "lf-failed", "--yes")
    assert "retried 10 failed jobs" in out.stdout
    assert sorted(json.loads(x)["uuid"] for x in r.lrange(PREFIX + "queues:lf-failed", 0, -1)) == want
    st, rep = post(port, "/api/failed/retry", {"tag": "App\\Models\\Customer:4"})  # again: none left
    assert st == 200 and rep["matched"] == 0 and r.llen(PREFIX + "queues:lf-failed") == 10, rep
    st, rep = post(port, "/api/failed/retry", {"tag": "App\\Models\\Customer:5"})
    assert st == 200 and rep["retried"] == 10 and r.llen(PREFIX + "queues:lf-failed") == 20, rep
    master.wait_log(r"retried 10 failed jobs \(filter: tag App\\Models\\Customer:5\) by 127\.0\.0\.1")


def test_pending_delete_takes_a_tag_filter(master, r):
    # ready and delayed jobs with the tag go (counted first), the others stay
    from test_failed_search import post
    from test_failed_search import TOKEN as FTOKEN
    port = free_port()
    master.write_config(pool("lf-a", "lf-qa"), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": FTOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 15, what="the HTTP endpoint")
    tagged = [make_payload("ok", job=A, tags=["App\\Models\\Customer:%d" % (i % 2)]) for i in range(6)]
    for p in tagged[:4]:
        push(r, "lf-pd", p)
    for i, p in enumerate(tagged[4:]):
        r.zadd(PREFIX + "queues:lf-pd:delayed", {json.dumps(p, separators=(",", ":")): time.time() + 3600 + i})
    gone = {p["uuid"] for p in tagged if p["tags"] == ["App\\Models\\Customer:0"]}
    def walk(body):
        """Every step, to the end: (matched, deleted)."""
        matched = deleted = 0
        cursor = None
        for _ in range(20):
            st, rep = post(port, "/api/queues/lf-pd/delete", dict(body, cursor=cursor))
            assert st == 200, rep
            matched, deleted, cursor = matched + rep["matched"], deleted + rep["deleted"], rep["cursor"]
            if cursor is None:
                return matched, deleted
        assert False, "no end"

    assert walk({"tag": "App\\Models\\Customer:0", "dry_run": True}) == (3, 0)
    out = master.cli("pending", "delete", "lf-pd", "--tag", "App\\Models\\Customer:0", "--yes")
    assert "3" in out.stdout
    left = [json.loads(x)["uuid"] for x in r.lrange(PREFIX + "queues:lf-pd", 0, -1)]
    left += [json.loads(x)["uuid"] for x in r.zrange(PREFIX + "queues:lf-pd:delayed", 0, -1)]
    assert sorted(left) == sorted(p["uuid"] for p in tagged if p["uuid"] not in gone)
    assert walk({"tag": "App\\Models\\Customer:1"})[1] == 3
    master.wait_log(r"deleted \d pending jobs of queue lf-pd \(filter: tag App\\Models\\Customer:1\) by 127\.0\.0\.1")
