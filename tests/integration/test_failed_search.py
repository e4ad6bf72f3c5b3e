"""Issue 32, slices 1-2: the failed store searched on the server (class,
queue, time range, uuid, text; combined), a bounded step per request with a
cursor, and retry or forget of what a filter matches, counted first (a dry
run). Real redis-server, real processes; thousands of records seeded with
one pipeline."""
import json
import time
import uuid as uuidlib

import pytest

from conftest import FIXTURE_HANDLER, PREFIX, api_get, api_post, free_port, wait_for

TOKEN = "s3cret-token-for-the-search-tests-0123456789"
MAIL, REPORT, INVOICE = "App\\Jobs\\SendMail", "App\\Jobs\\Report", "App\\Jobs\\Billing\\SendInvoice"
NOW = int(time.time())


def payload(job, n):
    return {"uuid": str(uuidlib.uuid4()), "displayName": job, "job": "Illuminate\\Queue\\CallQueuedHandler@call",
            "maxTries": None, "timeout": None, "data": {"commandName": job, "command": "customer %d" % n},
            "id": uuidlib.uuid4().hex, "attempts": 1}


def seed(r, queue, records):
    """records: (payload, exception, failed_at); one pipeline."""
    pipe = r.pipeline(transaction=False)
    for p, exc, at in records:
        pipe.hset(PREFIX + "qpool:failed:job:" + p["uuid"],
                  mapping={"uuid": p["uuid"], "connection": "redis", "queue": queue,
                           "payload": json.dumps(p, separators=(",", ":")), "exception": exc, "failed_at": at})
        pipe.zadd(PREFIX + "qpool:failed:" + queue, {p["uuid"]: at})
    pipe.sadd(PREFIX + "qpool:failed:queues", queue)
    pipe.execute()


def corpus():
    """Two queues, 4,600 records: {queue: [(payload, exception, failed_at)]}.
    Many share a second (a burst), so the cursor must page through ties."""
    out = {"fs-billing": [], "fs-mail": []}
    for i in range(2600):
        job = INVOICE if i % 4 else REPORT
        out["fs-billing"].append((payload(job, i), "RuntimeException: gateway said no to INV-%d\n#0 trace" % i,
                                  NOW - 7200 + i // 3))
    for i in range(2000):
        out["fs-mail"].append((payload(MAIL, i), "Swift_TransportException: timeout %d" % (i % 7),
                               NOW - 7200 + i // 10))
    return out


def pool():
    # a pool on a queue of its own: nothing takes the seeded queues' jobs back
    return ('{ name = "w"; queues = ["fs-idle"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
            % FIXTURE_HANDLER)


@pytest.fixture
def served(master, r):
    port = free_port()
    master.write_config(pool(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: get(port, "/healthz")[0] == 200, 15, what="the HTTP endpoint")
    data = corpus()
    for q, recs in data.items():
        seed(r, q, recs)
    return port, data


def get(port, path, **args):
    try:
        return api_get(port, path, TOKEN, **args)
    except OSError:
        return None, None


def post(port, path, body):
    return api_post(port, path, body, TOKEN)


def search_all(port, **args):
    """Every page of a search: (records, pages)."""
    found, pages, cursor = [], [], None
    while True:
        a = dict(args, **({"cursor": cursor} if cursor else {}))
        st, rep = get(port, "/api/failed", **a)
        assert st == 200, rep
        pages.append(rep)
        found += rep["failed"]
        cursor = rep["cursor"]
        assert rep["truncated"] == (cursor is not None)
        if cursor is None:
            return found, pages
        assert len(pages) < 100


def expect(data, pred):
    return {p["uuid"] for q, recs in data.items() for (p, exc, at) in recs if pred(q, p, exc, at)}


def test_search_filters_combine_on_the_server_in_bounded_pages(served):
    port, data = served
    # text in the exception, case ignored, with a class: the one invoice
    found, pages = search_all(port, q="inv-1234", **{"class": INVOICE})
    want = expect(data, lambda q, p, e, at: p["displayName"] == INVOICE and "INV-1234\n" in e)
    assert {f["uuid"] for f in found} == want and len(want) == 1
    assert found[0]["name"] == INVOICE and found[0]["queue"] == "fs-billing" and "payload" not in found[0]
    # every page looked at a bounded number of records
    assert all(p["scanned"] <= 2000 for p in pages) and sum(p["scanned"] for p in pages) == 4600
    # text in the payload
    found, _ = search_all(port, q="customer 77", queue="fs-mail")
    assert {f["uuid"] for f in found} == expect(data, lambda q, p, e, at: q == "fs-mail" and
                                                 p["data"]["command"].startswith("customer 77"))
    # class + queue + time range (ties of a second across page boundaries), small pages
    since, until = NOW - 7200 + 100, NOW - 7200 + 500
    found, pages = search_all(port, queue="fs-billing", since=since, until=until, limit=97, **{"class": REPORT})
    want = expect(data, lambda q, p, e, at: q == "fs-billing" and p["displayName"] == REPORT and since <= at <= until)
    uuids = [f["uuid"] for f in found]
    assert len(uuids) == len(set(uuids)) and set(uuids) == want and len(want) > 97 * 2
    assert all(len(p["failed"]) <= 97 for p in pages)
    ats = [f["failed_at"] for f in found]
    assert ats == sorted(ats, reverse=True)  # newest first
    # an age as since: everything seeded is within 3 h, none within the last minute
    assert len(search_all(port, since="3h")[0]) == 4600
    assert search_all(port, since="1m")[0] == []
    # one uuid
    one = data["fs-mail"][5][0]["uuid"]
    assert [f["uuid"] for f in get(port, "/api/failed", uuid=one)[1]["failed"]] == [one]
    assert get(port, "/api/failed", uuid=one, queue="fs-billing")[1]["failed"] == []
    # malformed: said so
    assert get(port, "/api/failed", since="yesterday-ish")[0] == 400
    assert get(port, "/api/failed", q="x", cursor="nonsense")[0] == 400
    # without a filter: the list as before (per queue, no cursor)
    st, rep = get(port, "/api/failed", limit=3)
    assert st == 200 and len(rep["failed"]) == 6 and "cursor" not in rep


def bulk(port, path, body):
    """Every step of a bulk action: the sum of its answers' counts."""
    total, cursor, steps = {"matched": 0, "retried": 0, "forgotten": 0, "scanned": 0}, None, 0
    while True:
        st, rep = post(port, path, dict(body, **({"cursor": cursor} if cursor else {})))
        assert st == 200, rep
        for k in total:
            total[k] += rep.get(k, 0)
        assert rep["scanned"] <= 2000 and rep.get("retried", 0) + rep.get("forgotten", 0) <= 500
        steps += 1
        cursor = rep["cursor"]
        if cursor is None:
            return total, steps
        assert steps < 100


def test_bulk_retry_and_forget_by_filter_count_first_and_touch_only_matches(served, master, r):
    port, data = served
    since = NOW - 7200 + 300
    f = {"class": INVOICE, "since": since}
    want = expect(data, lambda q, p, e, at: p["displayName"] == INVOICE and at >= since)
    assert len(want) > 1000
    # a dry run counts and changes nothing
    n, _ = bulk(port, "/api/failed/retry", dict(f, dry_run=True))
    assert n["matched"] == len(want) and n["retried"] == 0
    assert r.zcard(PREFIX + "qpool:failed:fs-billing") == 2600 and r.llen(PREFIX + "queues:fs-billing") == 0
    # the retry: exactly those, back on their queue with attempts 0; the rest stay
    n, steps = bulk(port, "/api/failed/retry", f)
    assert n["retried"] == len(want) and steps >= 3
    ready = [json.loads(x) for x in r.lrange(PREFIX + "queues:fs-billing", 0, -1)]
    assert {p["uuid"] for p in ready} == want and len(ready) == len(want)
    assert all(p["attempts"] == 0 for p in ready)
    assert r.zcard(PREFIX + "qpool:failed:fs-billing") == 2600 - len(want)
    left = {u.decode() for u in r.zrange(PREFIX + "qpool:failed:fs-billing", 0, -1)}
    assert left == expect(data, lambda q, p, e, at: q == "fs-billing") - want
    # again: nothing left to do, no harm
    n, _ = bulk(port, "/api/failed/retry", f)
    assert n["retried"] == 0 and r.llen(PREFIX + "queues:fs-billing") == len(want)
    # forget by queue and text
    gone = expect(data, lambda q, p, e, at: q == "fs-mail" and "timeout 3" in e)
    n, _ = bulk(port, "/api/failed/forget", {"queue": "fs-mail", "q": "TIMEOUT 3", "dry_run": True})
    assert n["matched"] == len(gone) and n["forgotten"] == 0
    n, _ = bulk(port, "/api/failed/forget", {"queue": "fs-mail", "q": "TIMEOUT 3"})
    assert n["forgotten"] == len(gone)
    left = {u.decode() for u in r.zrange(PREFIX + "qpool:failed:fs-mail", 0, -1)}
    assert left == expect(data, lambda q, p, e, at: q == "fs-mail") - gone
    assert not any(r.exists(PREFIX + "qpool:failed:job:" + u) for u in list(gone)[:50])
    # no filter: refused (the whole store takes "all": true)
    assert post(port, "/api/failed/forget", {})[0] == 400
    assert post(port, "/api/failed/forget", {"q": "x", "cursor": 7})[0] == 400
    # logged with the source and the count
    master.wait_log(r"retried \d+ failed jobs \(filter: class .*SendInvoice and a time range\) by 127\.0\.0\.1")
    master.wait_log(r'forgot \d+ failed jobs \(filter: queue fs-mail text "TIMEOUT 3"\) by 127\.0\.0\.1')


def test_the_cli_lists_and_acts_by_filter_and_counts_first(master, r):
    master.write_config(pool())
    data = corpus()
    seed(r, "fs-mail", data["fs-mail"][:300])
    seed(r, "fs-billing", data["fs-billing"][:400])
    out = master.cli("failed", "list", "--class", INVOICE, "--q", "INV-13", "--json")
    rows = json.loads(out.stdout)
    assert {x["uuid"] for x in rows} == {p["uuid"] for p, e, at in data["fs-billing"][:400]
                                          if p["displayName"] == INVOICE and "INV-13" in e}
    # retry by filter: a dry run unless --yes
    mails = {p["uuid"] for p, e, at in data["fs-mail"][:300] if "timeout 2" in e}
    out = master.cli("failed", "retry", "--queue", "fs-mail", "--text", "timeout 2", "--since", "1d")
    assert "%d failed jobs match" % len(mails) in out.stdout and r.llen(PREFIX + "queues:fs-mail") == 0
    out = master.cli("failed", "retry", "--queue", "fs-mail", "--text", "timeout 2", "--since", "1d", "--yes")
    assert "retried %d failed jobs" % len(mails) in out.stdout
    assert {json.loads(x)["uuid"] for x in r.lrange(PREFIX + "queues:fs-mail", 0, -1)} == mails
    out = master.cli("failed", "forget", "--class", REPORT, "--yes")
    assert "forgot %d failed jobs" % sum(1 for p, e, at in data["fs-billing"][:400]
                                         if p["displayName"] == REPORT) in out.stdout
    assert master.cli("failed", "list", "--since", "soon", check=False).returncode != 0
    assert master.cli("failed", "forget", "--class", REPORT, "some-uuid", check=False).returncode != 0
