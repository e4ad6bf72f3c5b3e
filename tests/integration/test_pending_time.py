"""Issue 32: `since` / `until` on the pending jobs (GET /api/jobs/pending,
POST /api/queues/<q>/delete, `qpool pending delete`), on when a job was
pushed: Horizon's pushedAt, else Laravel's createdAt (12.11+); a payload
that says neither matches no time range. Real redis-server, real
processes."""
import json
import time

from conftest import PREFIX, free_port, make_payload, push_many, wait_for
from test_failed_search import TOKEN, get, pool, post

def seed(r, queue):
    """60 ready jobs pushed 3h..1h ago (createdAt), 20 delayed pushed 10 min
    ago (pushedAt), 5 with no time; ({uuid: pushed_at or None}, now)."""
    NOW = int(time.time())  # now, not at import: a run may collect long before it runs a test
    ready = [make_payload("ok", createdAt=NOW - 3 * 3600 + i * 120) for i in range(60)]
    untimed = [make_payload("ok") for _ in range(5)]
    push_many(r, queue, ready + untimed)
    delayed = [make_payload("ok", pushedAt="%d.25" % (NOW - 600 + i)) for i in range(20)]
    pipe = r.pipeline(transaction=False)
    for i, p in enumerate(delayed):
        pipe.zadd(PREFIX + "queues:" + queue + ":delayed", {json.dumps(p, separators=(",", ":")): NOW + 3600 + i})
    pipe.execute()
    out = {p["uuid"]: p["createdAt"] for p in ready}
    out.update({p["uuid"]: float(p["pushedAt"]) for p in delayed})
    out.update({p["uuid"]: None for p in untimed})
    return out, NOW


def listed(port, queue, **args):
    uuids, offset = set(), 0
    while offset is not None:
        st, rep = get(port, "/api/jobs/pending", queue=queue, offset=str(offset), limit="500", **args)
        assert st == 200, rep
        uuids |= {j["uuid"] for j in rep["jobs"]}
        offset = rep["next_offset"]
    return uuids


def expect(jobs, lo=None, hi=None):
    return {u for u, at in jobs.items() if at is not None and (lo is None or at >= lo) and (hi is None or at < hi + 1)}


def test_pending_lists_and_deletes_by_time_range(master, r):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: get(port, "/healthz")[0] == 200, 15, what="the HTTP endpoint")
    jobs, NOW = seed(r, "pt-q")
    assert listed(port, "pt-q", since="30m") == expect(jobs, lo=NOW - 1800)
    assert len(expect(jobs, lo=NOW - 1800)) == 20
    mid = NOW - 2 * 3600
    assert listed(port, "pt-q", since=str(mid - 600), until=str(mid)) == expect(jobs, mid - 600, mid)
    assert listed(port, "pt-q", until="1h") == expect(jobs, hi=NOW - 3600)
    assert len(listed(port, "pt-q")) == 85  # no range: every job, the untimed too
    assert get(port, "/api/jobs/pending", queue="pt-q", since="soon")[0] == 400
    # the API's delete: a dry run counts what the list shows
    matched, cursor = 0, None
    for _ in range(20):
        st, rep = post(port, "/api/queues/pt-q/delete", dict({"since": "30m", "dry_run": True},
                                                           **({"cursor": cursor} if cursor else {})))
        assert st == 200 and rep["deleted"] == 0, rep
        matched, cursor = matched + rep["matched"], rep["cursor"]
        if cursor is None:
            break
    assert matched == 20 and cursor is None
    assert post(port, "/api/queues/pt-q/delete", {"until": "someday"})[0] == 400
    # the CLI's delete: the ready jobs pushed before mid, no others
    old = expect(jobs, hi=mid)
    out = master.cli("pending", "delete", "pt-q", "--until", str(mid)).stdout
    assert "%d pending jobs of pt-q match" % len(old) in out
    out = master.cli("pending", "delete", "pt-q", "--until", str(mid), "--yes").stdout
    assert "deleted %d pending jobs" % len(old) in out
    assert listed(port, "pt-q") == set(jobs) - old
    assert master.cli("pending", "delete", "pt-q", "--since", "soon", "--yes", check=False).returncode != 0
