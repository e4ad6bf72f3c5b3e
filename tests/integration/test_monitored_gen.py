"""Watched tags cost one read per master, not one per worker (issue 31): the
master reads the watched set once a second and publishes its generation in
each worker's scoreboard slot; a worker reads the set (SMEMBERS) only when
that generation changed, and never while no tag is watched. Watching a tag
later still keeps its jobs (docs/architecture.md, scoreboard)."""
import re
import socket
import time

from conftest import FIXTURE_HANDLER, PREFIX, make_payload, push_many, wait_for

TAG_KEY = PREFIX + "qpool:{qpool-jobs}:tag:"
WORKERS = 3


def smembers_by_client(port, seconds):
    """MONITOR for a while: the clients (ip:port) that sent SMEMBERS, with
    their counts. A script's own calls show as "lua", not as a client."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"MONITOR\r\n")
    s.settimeout(0.5)
    data, end = b"", time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            chunk = s.recv(1 << 16)
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
    s.close()
    seen = {}
    for m in re.finditer(rb'\[\d+ ([^\]]+)\] "smembers"', data, re.I):
        seen[m.group(1)] = seen.get(m.group(1), 0) + 1
    return seen, data.count(b"\n")


def at_most_the_masters(seen, seconds):
    """The master reads the set at most once a second (on a reconnect, from
    another port: counting clients fails under load); before, each worker
    read it every second too. Hence a bound on all the reads together."""
    return sum(seen.values()) <= seconds + 2


def uuids(r, tag):
    return [rec.split(b'"uuid":"', 1)[1].split(b'"', 1)[0].decode() for rec in r.lrange(TAG_KEY + tag, 0, -1)]


def test_no_worker_reads_the_watched_set_while_no_tag_is_watched(master, redis_server, r):
    master.write_config('{ name = "g"; queues = ["default"]; processes = %d; tries = 1; timeout = 10; sleep = 0.2;'
                        ' handler = { type = "pipe"; command = ["%s"]; }; }' % (WORKERS, FIXTURE_HANDLER),
                        qpool='  job_history_size = 100;')
    master.start()
    # the workers run jobs (each goes round its loop, where it would poll)
    push_many(r, "default", [make_payload("ok") for _ in range(30)])
    wait_for(lambda: r.llen(PREFIX + "queues:default") == 0, 120, interval=0.2, what="the queue drained")
    seen, lines = smembers_by_client(redis_server.port, 6)
    assert lines > 20, "MONITOR saw the workers' pops"
    # only the master reads the set (once a second); before, each of the
    # WORKERS workers read it every second as well
    assert at_most_the_masters(seen, 6), seen

    # watching a tag later: each worker reads the set once, and keeps the jobs
    assert "watching" in master.cli("monitor", "add", "vip").stdout
    master.wait_log(r"watched tags now: 1 ", timeout=60, count=WORKERS)
    vip = [make_payload("ok", tags=["vip"]) for _ in range(40)]
    push_many(r, "default", vip)
    want = {p["uuid"] for p in vip}
    wait_for(lambda: set(uuids(r, "vip")) >= want, 120, interval=0.5, what="every vip job in its list")
    assert len(uuids(r, "vip")) == len(want)

    # and stopping watching it: their sets empty, again without a read each
    master.cli("monitor", "remove", "vip")
    master.wait_log(r"watched tags now: 0 ", timeout=60, count=WORKERS)
    seen, _ = smembers_by_client(redis_server.port, 4)
    assert at_most_the_masters(seen, 4), seen


def test_a_batch_token_outlives_any_resend(master, r):
    """A watched batch's token (run once, so a resend after a lost reply
    writes nothing) lived 10 minutes, and a batch unanswered longer went
    again: written twice. The token now lives an hour and a batch goes
    again only within 30 minutes of its first send (docs/operations.md)."""
    master.write_config('{ name = "t"; queues = ["default"]; processes = 1; tries = 1; timeout = 10; sleep = 0.2;'
                        ' handler = { type = "pipe"; command = ["%s"]; }; }' % FIXTURE_HANDLER,
                        qpool='  job_history_size = 100;')
    master.start()
    assert "watching" in master.cli("monitor", "add", "vip").stdout
    master.wait_log(r"watched tags now: 1 ", timeout=60)
    vip = [make_payload("ok", tags=["vip"]) for _ in range(5)]
    push_many(r, "default", vip)
    want = {p["uuid"] for p in vip}
    wait_for(lambda: set(uuids(r, "vip")) >= want, 120, interval=0.5, what="every vip job in its list")
    tokens = r.keys(PREFIX + "qpool:{qpool-jobs}:mtoken:*")
    assert tokens
    assert all(r.pttl(t) > 30 * 60 * 1000 for t in tokens), [r.pttl(t) for t in tokens]
