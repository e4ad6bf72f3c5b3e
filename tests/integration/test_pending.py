"""Issue 31 item 4 (and issue 32 item 1): GET /api/jobs/pending?queue=Q
lists what waits in a queue, ready and delayed, in bounded pages (newest or
oldest first), with the class and text filters looking at a bounded number
of jobs per request; the dashboard's Pending page shows it, text as text.
Real redis-server, real processes."""
import json
import time
import urllib.error
import urllib.request

import pytest

from conftest import PREFIX, free_port, make_payload, push_many, wait_for
from test_failed_search import TOKEN, get, pool

A, B = "App\\Jobs\\SendInvoice", "App\\Jobs\\SyncCrm"
HOSTILE = "<img src=x onerror=\"document.title='pwned'\">\u202e"
NOW = int(time.time())


def key(queue, suffix=""):
    return PREFIX + "queues:" + queue + suffix


def seed(r, queue, n_ready=1200, n_delayed=150):
    """n_ready ready jobs (pushed with a pipeline, as Laravel's RPUSH) and
    n_delayed delayed ones (distinct available_at); (ready, delayed) payloads
    in run order."""
    ready = [make_payload("ok", job=B if i % 4 == 0 else A, createdAt=NOW - 100 + i % 50,
                          data={"invoice": "INV-%04d" % i}) for i in range(n_ready)]
    push_many(r, queue, ready)
    delayed = [make_payload("ok", job=A, attempts=2, pushedAt="%d.5" % NOW, tags=["App\\Models\\User:%d" % i])
               for i in range(n_delayed)]
    pipe = r.pipeline(transaction=False)
    for i, p in enumerate(delayed):
        pipe.zadd(key(queue, ":delayed"), {json.dumps(p, separators=(",", ":")): NOW + 3600 + i})
    pipe.zadd(key(queue, ":reserved"), {"{\"uuid\":\"r%d\",\"attempts\":1}" % i: NOW + 90 for i in range(3)})
    pipe.execute()
    return ready, delayed


@pytest.fixture
def served(master):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: get(port, "/healthz")[0] == 200, 15, what="the HTTP endpoint")
    return port


def walk(port, **args):
    """Every page: (jobs, replies)."""
    jobs, reps, offset = [], [], 0
    while offset is not None:
        st, rep = get(port, "/api/jobs/pending", offset=str(offset), **args)
        assert st == 200, rep
        jobs += rep["jobs"]
        reps.append(rep)
        offset = rep["next_offset"]
        assert len(reps) < 50
    return jobs, reps


def test_pages_cover_every_waiting_job_once_newest_or_oldest_first(served, r):
    port = served
    ready, delayed = seed(r, "pl-main")
    run_order = [p["uuid"] for p in ready] + [p["uuid"] for p in delayed]
    # oldest first: the order they would run in; pages of 500 at most
    jobs, reps = walk(port, queue="pl-main", order="oldest", limit="500")
    assert [j["uuid"] for j in jobs] == run_order
    assert [len(x["jobs"]) for x in reps] == [500, 500, 350]
    assert all(x["counts"] == {"ready": 1200, "delayed": 150, "reserved": 3} for x in reps)
    assert [j["position"] for j in jobs] == list(range(1350))
    # newest first (the default): the reverse
    jobs, reps = walk(port, queue="pl-main", limit="300")
    assert [j["uuid"] for j in jobs] == run_order[::-1] and len(reps) == 5
    assert reps[0]["order"] == "newest"
    # one state only
    only, _ = walk(port, queue="pl-main", state="delayed", order="oldest", limit="100")
    assert [j["uuid"] for j in only] == [p["uuid"] for p in delayed]
    # each entry: what the payload says, and its size in bytes
    st, rep = get(port, "/api/jobs/pending", queue="pl-main", order="oldest", limit="1", offset="1")
    j, raw = rep["jobs"][0], r.lindex(key("pl-main"), 1)
    assert j == {"position": 1, "state": "ready", "uuid": ready[1]["uuid"], "id": ready[1]["id"], "class": A,
                 "attempts": 0, "pushed_at": ready[1]["createdAt"], "available_at": None, "size": len(raw),
                 "tags": []}
    st, rep = get(port, "/api/jobs/pending", queue="pl-main", state="delayed", limit="1")
    j = rep["jobs"][0]
    assert (j["uuid"], j["state"], j["attempts"], j["available_at"], j["pushed_at"], j["tags"]) == \
        (delayed[-1]["uuid"], "delayed", 2, NOW + 3600 + 149, NOW + 0.5, ["App\\Models\\User:149"])
    # bounds: never more than 500 a page; the queue is required; the token too
    assert get(port, "/api/jobs/pending", queue="pl-main", limit="501")[0] == 400
    for bad in ({}, {"queue": ""}, {"queue": "pl-main", "order": "up"}, {"queue": "pl-main", "offset": "-1"},
                {"queue": "pl-main", "state": "running"}, {"queue": "pl-main", "q": "x" * 1025}):
        assert get(port, "/api/jobs/pending", **bad)[0] == 400, bad
    try:  # loopback without the token: job records are not aggregates
        urllib.request.urlopen("http://127.0.0.1:%d/api/jobs/pending?queue=pl-main" % port, timeout=30)
        assert False, "read without the token"
    except urllib.error.HTTPError as e:
        assert e.code == 401
    st, rep = get(port, "/api/jobs/pending", queue="pl-main", offset="5000")
    assert st == 200 and rep["jobs"] == [] and rep["next_offset"] is None
    # reading changed nothing
    assert r.llen(key("pl-main")) == 1200 and r.zcard(key("pl-main", ":delayed")) == 150


def test_filters_look_at_a_bounded_number_of_jobs_per_request(served, r):
    port = served
    ready, delayed = seed(r, "pl-filter")
    # class: every B among the 1,350, newest first, in steps of 1,000 jobs looked at at most
    jobs, reps = walk(port, queue="pl-filter", **{"class": B, "limit": "500"})
    want = [p["uuid"] for p in ready if p["displayName"] == B][::-1]
    assert [j["uuid"] for j in jobs] == want
    assert all(x["scanned"] <= 1000 for x in reps) and sum(x["scanned"] for x in reps) == 1350
    # text in the payload (ASCII case ignored): one job, found past the first request's bound
    target = ready[5]
    st, rep = get(port, "/api/jobs/pending", queue="pl-filter", q="inv-0005")
    assert st == 200 and rep["jobs"] == [] and rep["truncated"] is True and rep["next_offset"] == 1000
    st, rep = get(port, "/api/jobs/pending", queue="pl-filter", q="inv-0005", offset="1000")
    assert [j["uuid"] for j in rep["jobs"]] == [target["uuid"]] and rep["truncated"] is False
    assert rep["jobs"][0]["position"] == 1350 - 1 - 5
    # a page full of matches stops there, and goes on from the next job
    st, rep = get(port, "/api/jobs/pending", queue="pl-filter", order="oldest", limit="10", **{"class": A})
    assert len(rep["jobs"]) == 10 and rep["next_offset"] == rep["jobs"][-1]["position"] + 1
    assert rep["truncated"] is False
    # uuid, and class with text combined
    st, rep = get(port, "/api/jobs/pending", queue="pl-filter", uuid=delayed[7]["uuid"], order="oldest",
                  offset="1000")
    assert [j["uuid"] for j in rep["jobs"]] == [delayed[7]["uuid"]]
    # a tag: one of the payload's own tags, exactly
    st, rep = get(port, "/api/jobs/pending", queue="pl-filter", tag="App\\Models\\User:42")
    assert [j["uuid"] for j in rep["jobs"]] == [delayed[42]["uuid"]]
    assert get(port, "/api/jobs/pending", queue="pl-filter", tag="App\\Models\\User:")[1]["jobs"] == []  # whole tags only
    both, _ = walk(port, queue="pl-filter", q="INV-01", **{"class": B})
    assert sorted(j["uuid"] for j in both) == sorted(
        p["uuid"] for p in ready if p["displayName"] == B and "INV-01" in p["data"]["invoice"])


def test_hostile_and_malformed_payloads_are_text(served, r):
    port = served
    hostile = make_payload("ok", job=HOSTILE, tags=["<b>tag</b>", "x" * 300])
    raw_bad = b"{\"uuid\":\"\xff\xfe\",\"displayName\":\"\xc3(\",\"attempts\":0}"
    pipe = r.pipeline(transaction=False)
    pipe.rpush(key("pl-evil"), json.dumps(hostile))
    pipe.rpush(key("pl-evil"), b"not json \xff")
    pipe.rpush(key("pl-evil"), raw_bad)
    pipe.execute()
    st, rep = get(port, "/api/jobs/pending", queue="pl-evil", order="oldest")
    assert st == 200
    h, junk, bad = rep["jobs"]
    assert h["class"] == HOSTILE and h["tags"] == ["<b>tag</b>", "x" * 120]
    assert junk["malformed"] is True and junk["uuid"] is None and junk["class"] is None and junk["size"] == 10
    assert bad["size"] == len(raw_bad) and "\ufffd" in bad["class"]


def test_large_payloads_are_read_a_few_at_a_time(served, r):
    """Five payloads of 3 MB: a request stops after about 8 MB of them (the
    page holds 3, and next_offset goes on), never 100 of them in one read
    (review of 2026-11-29: the page bounded jobs, not bytes)."""
    big = [make_payload("ok", job=A, data={"blob": "x" * (3 << 20)}) for _ in range(5)]
    push_many(r, "pending-big", big)
    st, rep = get(served, "/api/jobs/pending", queue="pending-big", limit="50", order="oldest")
    assert st == 200, rep
    assert len(rep["jobs"]) == 3 and rep["next_offset"] == 3, (len(rep["jobs"]), rep["next_offset"])
    jobs, _ = walk(served, queue="pending-big", limit="50", order="oldest")
    assert [j["uuid"] for j in jobs] == [p["uuid"] for p in big]
