"""Issue 32, slice 4: delete the pending jobs of a queue that match a
filter, ready and delayed, counted first (a dry run), in bounded steps with
a cursor; the others stay, in their order. Real redis-server, real
processes."""
import json
import time

from conftest import PREFIX, free_port, make_payload, push_many, wait_for
from test_failed_search import TOKEN, get, pool, post

SPAM, KEEP = "App\\Jobs\\SendNewsletter", "App\\Jobs\\SendInvoice"


def seed(r, queue):
    """1,300 ready jobs and 300 delayed, two classes interleaved; (ready, delayed) payloads."""
    ready = [make_payload("ok", job=SPAM if i % 3 == 0 else KEEP, note="batch-%d" % (i % 10)) for i in range(1300)]
    push_many(r, queue, ready)
    delayed = [make_payload("ok", job=SPAM if i % 2 else KEEP) for i in range(300)]
    pipe = r.pipeline(transaction=False)
    later = time.time() + 3600
    for p in delayed:
        pipe.zadd(PREFIX + "queues:" + queue + ":delayed", {json.dumps(p, separators=(",", ":")): later})
    pipe.execute()
    return ready, delayed


def steps(port, queue, body):
    total, cursor, n = {"matched": 0, "deleted": 0, "scanned": 0}, None, 0
    while True:
        st, rep = post(port, "/api/queues/%s/delete" % queue, dict(body, **({"cursor": cursor} if cursor else {})))
        assert st == 200, rep
        assert rep["scanned"] <= 1000
        for k in total:
            total[k] += rep[k]
        n += 1
        cursor = rep["cursor"]
        if cursor is None:
            return total, n
        assert n < 50


def ready_uuids(r, queue):
    return [json.loads(x)["uuid"] for x in r.lrange(PREFIX + "queues:" + queue, 0, -1)]


def delayed_uuids(r, queue):
    return {json.loads(x)["uuid"] for x in r.zrange(PREFIX + "queues:" + queue + ":delayed", 0, -1)}


def test_delete_pending_jobs_by_filter_counts_first_and_keeps_the_rest_in_order(master, r):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: get(port, "/healthz")[0] == 200, 15, what="the HTTP endpoint")
    ready, delayed = seed(r, "pd-mail")
    spam = {p["uuid"] for p in ready + delayed if p["displayName"] == SPAM}
    # the count first: nothing changes
    n, _ = steps(port, "pd-mail", {"class": SPAM, "dry_run": True})
    assert n["matched"] == len(spam) and n["deleted"] == 0 and n["scanned"] == 1600
    assert r.llen(PREFIX + "queues:pd-mail") == 1300
    # then the deletion: exactly those; the rest keep their order
    n, nsteps = steps(port, "pd-mail", {"class": SPAM})
    assert n["deleted"] == len(spam) and nsteps >= 4
    assert ready_uuids(r, "pd-mail") == [p["uuid"] for p in ready if p["displayName"] != SPAM]
    assert delayed_uuids(r, "pd-mail") == {p["uuid"] for p in delayed if p["displayName"] != SPAM}
    # again: nothing to do, no harm
    assert steps(port, "pd-mail", {"class": SPAM})[0]["deleted"] == 0
    # text and uuid
    one = ready[1]["uuid"]
    assert steps(port, "pd-mail", {"uuid": one})[0]["deleted"] == 1 and one not in ready_uuids(r, "pd-mail")
    batch7 = [p["uuid"] for p in ready if p["displayName"] != SPAM and p["note"] == "batch-7" and p["uuid"] != one]
    assert steps(port, "pd-mail", {"q": "BATCH-7"})[0]["deleted"] == len(batch7)
    # no filter, a bad cursor: refused
    assert post(port, "/api/queues/pd-mail/delete", {})[0] == 400
    assert post(port, "/api/queues/pd-mail/delete", {"q": "x", "cursor": "sideways:3"})[0] == 400
    master.wait_log(r"deleted \d+ pending jobs of queue pd-mail \(filter: class .*SendNewsletter\) by 127\.0\.0\.1")


def test_the_cli_counts_then_deletes_pending_jobs(master, r):
    master.write_config(pool())
    ready, delayed = seed(r, "pd-cli")
    spam = sum(1 for p in ready + delayed if p["displayName"] == SPAM)
    out = master.cli("pending", "delete", "pd-cli", "--class", SPAM, "--yes").stdout
    assert "deleted %d pending jobs" % spam in out
    left = 1300 - sum(1 for p in ready if p["displayName"] == SPAM)
    assert r.llen(PREFIX + "queues:pd-cli") == left
    # without --yes: only the count
    b4 = [p for p in ready if p["displayName"] == KEEP and p["note"] == "batch-4"]
    out = master.cli("pending", "delete", "pd-cli", "--text", "batch-4").stdout
    assert "%d pending jobs of pd-cli match" % len(b4) in out and r.llen(PREFIX + "queues:pd-cli") == left
    out = master.cli("pending", "delete", "pd-cli", "--text", "batch-4", "--yes").stdout
    assert "deleted %d pending jobs" % len(b4) in out and r.llen(PREFIX + "queues:pd-cli") == left - len(b4)
    assert master.cli("pending", "delete", "pd-cli", check=False).returncode != 0  # no filter
