"""Issue 32: a search of the job history covers all of it, up to the
100,000 records `job_history_size` may keep (it stopped at 10,000 with
"truncated": true before): class + tag + text finds the one job among
100,000, and a tag with backslashes (byte-tested as its JSON string) finds
every record that has it. Real redis-server and qpool; the records are
seeded as a master writes them, in one pipeline."""
import json
import time
import urllib.parse
import uuid

from conftest import FIXTURE_HANDLER, PREFIX, free_port, wait_for
from test_http import TOKEN, code, get, http_conf

N = 100000
CLASSES = ["App\\Jobs\\SendInvoice", "App\\Jobs\\SyncCrm", "App\\Jobs\\SendMail", "App\\Jobs\\Report"]


def seed(r):
    key = PREFIX + "qpool:{qpool-jobs}:list"
    t0 = int(time.time() * 1000)
    pipe = r.pipeline(transaction=False)
    for i in range(N):
        rec = {"uuid": "u-%d" % i, "name": CLASSES[i % 4], "queue": "default", "pool": "w", "host": "app1",
               "attempt": 1, "outcome": "done", "finished_at": t0 - (N - i) * 10,
               "exception": "RuntimeException: the gateway refused INV-4711" if i == 1234 else "",
               "tags": ["App\\Models\\Customer:%d" % (i % 5000), "invoices"]}
        pipe.lpush(key, json.dumps(rec, separators=(",", ":")))
        if i % 10000 == 9999:
            pipe.execute()
    pipe.execute()


def search(port, **q):
    st, _, body = get(port, "/api/jobs/recent?" + urllib.parse.urlencode(q), TOKEN, timeout=60)
    assert st == 200, body
    return json.loads(body)


def test_a_search_covers_the_whole_history(master, r):
    port = free_port()
    pool = '{ name = "w"; queues = ["hs-idle"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
    master.write_config(pool % FIXTURE_HANDLER,
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";') + "job_history_size = 100000;")
    seed(r)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    # the one job, 98,765 records from the newest: class + tag + text (case ignored)
    o = search(port, name=CLASSES[1234 % 4], tag="App\\Models\\Customer:1234", q="inv-4711")
    assert [j["uuid"] for j in o["jobs"]] == ["u-1234"] and not o.get("truncated")
    o = search(port, q="INV-4711")
    assert [j["uuid"] for j in o["jobs"]] == ["u-1234"] and not o.get("truncated")
    # a tag: its 20 records, and not Customer:770 and the like
    o = search(port, tag="App\\Models\\Customer:77", limit=1000)
    assert sorted(j["uuid"] for j in o["jobs"]) == sorted("u-%d" % i for i in range(77, N, 5000))
    assert search(port, tag="App\\Models\\Customer:7", name=CLASSES[0], limit=1000)["jobs"] == []  # 7 % 4 == 3
    assert search(port, q="no such text").get("truncated") is None


def test_a_search_stops_after_64_mb_of_records(master, r):
    # records that keep payloads (job_history_payloads) are up to 64 KB: a
    # search reads 64 MB of them at most, and says the answer is cut
    port = free_port()
    pool = '{ name = "w"; queues = ["hs-idle"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
    master.write_config(pool % FIXTURE_HANDLER,
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";') + "job_history_size = 100000;")
    key = PREFIX + "qpool:{qpool-jobs}:list"
    blob = "x" * 16000
    t0 = int(time.time() * 1000)
    pipe = r.pipeline(transaction=False)
    for i in range(4600):  # 4,600 x 16 KB: about 74 MB, the oldest first
        rec = {"uuid": "p-%d" % i, "name": CLASSES[0], "queue": "default", "outcome": "done",
               "finished_at": t0 - (4600 - i), "payload": blob, "tags": ["oldest"] if i == 0 else []}
        pipe.lpush(key, json.dumps(rec, separators=(",", ":")))
        if i % 500 == 499:
            pipe.execute()
    pipe.execute()
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    o = search(port, tag="oldest")
    assert o["jobs"] == [] and o["truncated"] is True  # the oldest lies past the first 64 MB
    # text that is nowhere, since a moment ago: the newest 1,000 read, then the
    # records are older (it read on to the 64 MB: no record passed the byte
    # test to tell their age)
    o = search(port, q="no such text", since=t0 - 1000)
    assert o["jobs"] == [] and not o.get("truncated")
    o = search(port, name=CLASSES[0], limit=5)  # found among the newest: not cut
    assert [j["uuid"] for j in o["jobs"]] == ["p-%d" % i for i in range(4599, 4594, -1)] and not o.get("truncated")


def test_a_since_search_reads_past_a_page_headed_by_a_late_clock(master, r):
    """A record whose host's clock is 10 minutes behind (or a backlog pushed
    late) heads a page where the byte test lets nothing through: the search
    with since reads on to the next page, where the match is, instead of
    taking the page's age from that one record (review of 2026-11-29)."""
    port = free_port()
    pool = '{ name = "w"; queues = ["hs-idle"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
    master.write_config(pool % FIXTURE_HANDLER,
                        qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";') + "job_history_size = 100000;")
    key = PREFIX + "qpool:{qpool-jobs}:list"
    now = int(time.time() * 1000)
    pipe = r.pipeline(transaction=False)
    for i in range(1500):  # the oldest first: index 0 of the list is the last pushed
        late = i == 1499
        rec = {"uuid": "s-%d" % i, "name": CLASSES[0], "queue": "default", "outcome": "done",
               "host": "app2" if late else "app1",
               "finished_at": now - 600000 if late else now - 60000 + i,
               "exception": "RuntimeException: INV-4711" if i == 500 else ""}
        pipe.lpush(key, json.dumps(rec, separators=(",", ":")))
    pipe.execute()
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    o = search(port, q="INV-4711", since=now - 300000)
    assert [j["uuid"] for j in o["jobs"]] == ["s-500"], o
