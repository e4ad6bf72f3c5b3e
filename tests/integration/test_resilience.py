"""No job is lost: worker kills, Redis restarts."""
import random
import re
import socket
import threading
import time

from conftest import (FIXTURE_HANDLER, PREFIX, RedisServer, kill_a_worker, make_payload, push_many, queue_state,
                      read_fixture_log, wait_for, with_their_handlers)


def pool(log, processes, extra=""):
    return ('{ name = "w"; queues = ["default"]; processes = %d; handler = { type = "pipe"; command = ["%s"]; }; '
            'environment = { FIXTURE_LOG = "%s"; }; job_log = false; %s }' % (processes, FIXTURE_HANDLER, log, extra))


def test_no_job_is_lost_while_workers_are_killed(master, r, tmp_path):
    n = 20000
    log = tmp_path / "fixture.log"
    master.write_config(pool(log, 4, "retry_after = 2; tries = 0;"))
    payloads = [make_payload("sleep:1") for _ in range(n)]
    for i in range(0, n, 2000):
        push_many(r, "default", payloads[i:i + 2000])
    master.start()
    rng = random.Random(42)
    killed_handlers = set()
    kills = 0
    deadline = time.monotonic() + 600

    def done():
        st = queue_state(r, "default")
        return st["ready"] == 0 and st["reserved"] == 0 and st["delayed"] == 0

    while not done() and time.monotonic() < deadline:
        kills += kill_a_worker(master, rng, killed_handlers)
        # every 200 ms on average; the jitter keeps the kills from locking in
        # phase with the master's 1 s respawn delay (which would kill every
        # new worker before its first job)
        time.sleep(rng.uniform(0.15, 0.25))
        if queue_state(r, "default")["ready"] == 0:
            break
    wait_for(done, 120, interval=0.2, what="every job to be handled")
    runs = {}
    for line in read_fixture_log(log):
        if line[0] == "job":
            runs.setdefault(line[1], []).append(int(line[4]))
    ids = {p["id"] for p in payloads}
    assert set(runs) == ids, "%d jobs never ran" % len(ids - set(runs))
    dups = {i: pids for i, pids in runs.items() if len(pids) > 1}
    killed_handlers = with_their_handlers(master, killed_handlers)
    for i, pids in dups.items():
        assert any(p in killed_handlers for p in pids[:-1]), \
            "job %s ran twice but no earlier run was on a killed worker: %s" % (i, pids)
    st = queue_state(r, "default")
    assert st == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}, st
    assert r.keys(PREFIX + "qpool:failed:*") == []
    assert "Processing" not in master.log(), "job_log = false still logged jobs"
    print("kills: %d, duplicates: %d of %d jobs" % (kills, len(dups), n))
    assert kills >= 10


def test_workers_ride_out_a_redis_restart(master_factory, tmp_path):
    srv = RedisServer(tmp_path, persistent=True)
    try:
        r = srv.client()
        m = master_factory(srv)
        log = tmp_path / "fixture.log"
        m.write_config(pool(log, 2, "retry_after = 3; tries = 0;"))
        payloads = [make_payload("sleep:2") for _ in range(3000)]
        push_many(r, "default", payloads)
        m.start()
        wait_for(lambda: len(read_fixture_log(log)) > 500, 60, what="some progress")
        srv.stop()
        time.sleep(2)
        srv.start()
        m.wait_log(r"redis default \(127\.0\.0\.1:\d+\) is back", timeout=30)
        wait_for(lambda: queue_state(r, "default") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}
                 or (queue_state(r, "default")["ready"] == 0 and queue_state(r, "default")["reserved"] == 0
                     and queue_state(r, "default")["delayed"] == 0), 120, interval=0.2, what="all jobs done")
        ran = {l[1] for l in read_fixture_log(log) if l[0] == "job"}
        assert ran == {p["id"] for p in payloads}
        assert m.count_log(r"redis default .* unavailable") >= 1
        # logged once per outage per worker, not once per retry
        assert m.count_log(r"unavailable: ") <= 8, m.log()
        assert m.proc.poll() is None
        assert m.pool("w")["crashes"] == 0
    finally:
        srv.stop()



def monitor_lines(port, seconds):
    """What MONITOR shows for a while, as (client address, command words)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"MONITOR\r\n")
    s.settimeout(0.5)
    data, end = bytearray(), time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        if not d:
            break
        data += d
    s.close()
    out = []
    for line in bytes(data).split(b"\r\n"):
        m = re.match(rb'\+[\d.]+ \[\d+ ([^\]]+)\] "([A-Za-z]+)"(?: "([A-Za-z]+)")?', line)
        if m:
            out.append((m.group(1).decode(), m.group(2).decode().upper(), (m.group(3) or b"").decode().upper(),
                        line[:120].decode(errors="replace")))
    return out


def test_workers_load_their_scripts_again_on_every_new_connection(master, r, tmp_path):
    # A new connection's context is often allocated where the lost one was
    # freed: a worker that knew its scripts were loaded by the context's
    # address skipped the load after a reconnect, and its first pop and
    # outcomes on a restarted Redis were refused with NOSCRIPT (a renewal of
    # what it held missed with them). Here, while MONITOR watches, the
    # scripts are flushed and every connection cut, again and again: each
    # worker's new connection must load its scripts before its first
    # EVALSHA. (The master's own scripts go EVALSHA, then EVAL on NOSCRIPT,
    # by design: it never sends SCRIPT LOAD, so it is not counted.) Whether
    # a new context lands at the old address is up to malloc: without
    # glibc's per-thread cache it often does, and the many reconnects make
    # the old behaviour show.
    log = tmp_path / "fixture.log"
    master.write_config(pool(log, 6, "retry_after = 30; tries = 0; prefetch = 4;"))
    push_many(r, "default", [make_payload("sleep:5") for _ in range(20000)])
    master.start(env={"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"})
    wait_for(lambda: len(read_fixture_log(log)) > 100, 60, what="some progress")
    port = r.connection_pool.connection_kwargs["port"]
    cuts = 20
    seen = []
    watcher = threading.Thread(target=lambda: seen.extend(monitor_lines(port, 1 + cuts * 0.4 + 1)))
    watcher.start()
    wait_for(lambda: any(c["cmd"] == "monitor" for c in r.client_list()), 10, what="MONITOR to watch")
    me = r.client_id()
    # connections made before MONITOR watched: what they sent first is unseen
    older = {c["addr"] for c in r.client_list()}
    for _ in range(cuts):
        r.script_flush()
        for c in r.client_list():
            if int(c["id"]) != me and c["cmd"] != "monitor":
                r.client_kill_filter(_id=c["id"])
        time.sleep(0.4)
    watcher.join()
    scripts = {}
    for addr, cmd, sub, _ in seen:
        if addr not in older and (cmd == "EVALSHA" or (cmd == "SCRIPT" and sub == "LOAD")):
            scripts.setdefault(addr, []).append(cmd)
    loaders = {a: cmds for a, cmds in scripts.items() if "SCRIPT" in cmds}  # workers' connections
    bad = {a: cmds[:cmds.index("SCRIPT") + 1] for a, cmds in loaders.items() if cmds[0] != "SCRIPT"}
    print("%d connections of workers seen, %d used a script before loading it" % (len(loaders), len(bad)))
    assert len(loaders) >= cuts, "workers seldom reconnected under MONITOR (%d times)" % len(loaders)
    # what MONITOR showed of the first such connection, to tell a worker's
    # mistake from an address used twice
    shown = [x[3] for x in seen if bad and x[0] == sorted(bad)[0]][:12]
    assert not bad, "EVALSHA before SCRIPT LOAD on %d new connections: %r; the first's lines: %s" % (
        len(bad), sorted(bad.items())[:5], "\n".join(shown))
    before = len(read_fixture_log(log))
    wait_for(lambda: len(read_fixture_log(log)) > before + 200, 60, what="jobs to keep flowing")
