"""Issue 32 (its last gaps): a failed record says where the job failed (its
pool and host), and the failed list filters on them: the API (GET
/api/failed?pool=&host=, the bulk actions' bodies) and `qpool failed list
--pool --host`. A record written before (no pool, no host) stays readable
and matches neither filter. Real redis-server, real workers, real failures."""
import json
import socket

import pytest

from conftest import FIXTURE_HANDLER, PREFIX, fill_failed_store, free_port, api_get, api_post, make_payload, push, wait_for

TOKEN = "s3cret-token-for-the-where-tests-0123456789"
HOST = socket.gethostname()


def pools():
    return "\n".join('{ name = "%s"; queues = ["%s"]; processes = 1; tries = 1; '
                     'handler = { type = "pipe"; command = ["%s"]; }; },' % (name, queue, FIXTURE_HANDLER)
                     for name, queue in (("fw-a", "fw-qa"), ("fw-b", "fw-qb"))).rstrip(",")


def get(port, path, **args):
    return api_get(port, path, TOKEN, **args)


def post(port, path, body):
    return api_post(port, path, body, TOKEN)


@pytest.fixture
def failed(master, r):
    """Two pools fail two jobs each; one older record (no pool, no host)
    written as an earlier qpool wrote them."""
    port = free_port()
    master.write_config(pools(), qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    old = fill_failed_store(r, "fw-qa", [make_payload("fail", job="App\\Jobs\\Old")])[0]
    jobs = {"fw-a": [], "fw-b": []}
    for pool, queue in (("fw-a", "fw-qa"), ("fw-b", "fw-qb")):
        for _ in range(2):
            p = make_payload("fail", job="App\\Jobs\\Where", maxTries=1)
            push(r, queue, p)
            jobs[pool].append(p["uuid"])
    wait_for(lambda: r.zcard(PREFIX + "qpool:failed:fw-qa") == 3 and r.zcard(PREFIX + "qpool:failed:fw-qb") == 2,
             60, what="four jobs failed")
    return port, jobs, old


def uuids(rep):
    return {f["uuid"] for f in rep["failed"]}


def test_failed_records_say_pool_and_host_and_filter_on_them(failed, master, r):
    port, jobs, old = failed
    h = r.hgetall(PREFIX + "qpool:failed:job:" + jobs["fw-a"][0])
    assert h[b"pool"] == b"fw-a" and h[b"host"] == HOST.encode()
    # the API: one record carries them, the list filters on them
    st, rec = get(port, "/api/failed/" + jobs["fw-b"][1])
    assert st == 200 and rec["pool"] == "fw-b" and rec["host"] == HOST
    st, rep = get(port, "/api/failed", pool="fw-a")
    assert st == 200 and uuids(rep) == set(jobs["fw-a"])
    st, rep = get(port, "/api/failed", pool="fw-b", host=HOST)
    assert st == 200 and uuids(rep) == set(jobs["fw-b"])
    st, rep = get(port, "/api/failed", host="no-such-host")
    assert st == 200 and rep["failed"] == []
    # an old record: readable, pool and host unknown, matched by neither filter
    st, rec = get(port, "/api/failed/" + old)
    assert st == 200 and rec["pool"] == "" and rec["host"] == ""
    assert old in {f["uuid"] for f in failed_list_all(port)}
    # the CLI
    out = master.cli("failed", "list", "--pool", "fw-b", "--json").stdout
    assert {f["uuid"] for f in json.loads(out)} == set(jobs["fw-b"])
    shown = master.cli("failed", "show", jobs["fw-a"][1]).stdout
    assert "\npool:       fw-a\nhost:       %s\n" % HOST in shown
    assert "\npool:       ?\nhost:       ?\n" in master.cli("failed", "show", old).stdout  # not recorded
    out = master.cli("failed", "list", "--host", HOST, "--json").stdout
    assert {f["uuid"] for f in json.loads(out)} == set(jobs["fw-a"]) | set(jobs["fw-b"])
    # a bulk action by pool: counted, then forgets exactly those
    st, rep = post(port, "/api/failed/forget", {"pool": "fw-a", "dry_run": True})
    assert st == 200 and rep["matched"] == 2 and rep["forgotten"] == 0
    st, rep = post(port, "/api/failed/forget", {"pool": "fw-a"})
    assert st == 200 and rep["forgotten"] == 2
    left = {f["uuid"] for f in failed_list_all(port)}
    assert left == set(jobs["fw-b"]) | {old}


def failed_list_all(port):
    st, rep = get(port, "/api/failed", limit=100)
    assert st == 200
    return rep["failed"]

