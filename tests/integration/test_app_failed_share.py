"""`qpool failed ... --app POOL` queues its request on the pool's app agent
(8 places a pool). Each client has a fair share of them: one request
waiting per control connection, two per peer process (and per user other
than root and qpool's own), two places kept for the dashboard; beyond that
a request is refused at once. A client that opens many connections and
floods the queue cannot stop another client's request from being
answered, nor the dashboard's list; a request whose client went away
before it was sent leaves the queue. Only the host's Laravel version: the
share is the master's."""
import json
import socket
import subprocess
import threading

import pytest

from conftest import QPOOL, free_port, wait_for
from laravel_roots import HOST_VERSIONS, Version, migrated_app
from test_app_driver import pool, use_database_queue
from test_app_failed import agent_pid, park_failed
from test_app_failed_http import settled
from test_http import TOKEN, code, http_conf

FLOOD_CONNECTIONS = 12


@pytest.fixture(scope="module", params=HOST_VERSIONS, ids=lambda v: "laravel" + v)
def host_version(request):
    return Version(request.param, None)


@pytest.fixture
def app(host_version, redis_server, tmp_path):
    yield from migrated_app(host_version, redis_server.port, tmp_path)


class Flood:
    """FLOOD_CONNECTIONS control connections of this one process, each
    asking the app agent to retry one parked job (a second each: slowpush)
    as soon as its last request is answered or refused, until stopped."""

    def __init__(self, m, uuids):
        self.m, self.uuids, self.next = m, list(uuids), 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.answered = self.refused = 0
        self.errors = []
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(FLOOD_CONNECTIONS)]
        for t in self.threads:
            t.start()

    def request(self):
        with self.lock:
            u = self.uuids[self.next % len(self.uuids)]
            self.next += 1
        return (json.dumps({"cmd": "app", "pool": "appq", "request": {"op": "failed-retry", "jobs": [u]}})
                + "\n").encode()

    def run(self):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(60)
            s.connect(str(self.m.socket))
            f = s.makefile("rb")
            while not self.stopped.is_set():
                s.sendall(self.request())
                line = f.readline()
                if not line:
                    return
                rep = json.loads(line)
                with self.lock:
                    if rep.get("ok"):
                        self.answered += 1
                    else:
                        self.refused += 1
                        self.errors.append(rep.get("error", ""))
                if not rep.get("ok"):
                    self.stopped.wait(0.05)  # refused at once: ask again soon, not in a busy loop

    def stop(self):
        self.stopped.set()
        for t in self.threads:
            t.join(90)


def test_a_flooding_client_cannot_starve_another(master_factory, redis_server, app):
    use_database_queue(app)
    uuids = park_failed(app, 40)
    env = app.env_conf()
    port = free_port()
    m = master_factory(redis_server)
    m.write_config(pool(app).replace(env, env[:env.rindex("}")] + ' FIXTURE_BOOT_HAZARDS = "slowpush"; };'),
                   qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    m.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    try:
        wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
        wait_for(lambda: agent_pid(m), 60, interval=0.25, what="the pool's app agent")
        flood = Flood(m, uuids)
        try:
            # the flood is on: the agent pushes its retries, and the queue (or its share) is full
            wait_for(lambda: app.table("select id from jobs") and flood.refused, 60, interval=0.05,
                     what="the flood to fill its share of the queue")
            res = subprocess.run([QPOOL, "failed", "list", "--json", "--app", "appq", "-c", str(m.conf)],
                                 capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, (res.stdout, res.stderr)
            rep = json.loads(res.stdout)
            assert rep["ok"] and rep["pool"] == "appq" and "total" in rep
            # the dashboard's list has a place of its own
            rep = settled(port, lambda b: b.get("state") == "ok", "the dashboard's list during the flood")
            assert rep["pool"] == "appq" and "total" in rep
        finally:
            flood.stop()
        assert flood.answered >= 1
        # refused at once, with why: its own share, never the whole queue
        assert flood.errors and all("not answered yet" in e or "at most 2 a client" in e for e in flood.errors), \
            flood.errors[:5]
        # nothing lost: each parked job is on its queue or in the failer
        queued = [json.loads(r["payload"])["uuid"] for r in app.table("select payload from jobs")]
        failed = [r["uuid"] for r in app.failed_jobs()]
        assert set(queued) | set(failed) == set(uuids)
    finally:
        assert m.stop(60) == 0


def test_a_gone_clients_unsent_retry_leaves_the_queue(master_factory, redis_server, app):
    """Review w5a #5, #6: a retry whose client closed its connection before
    the agent took it (the agent busy with another retry: slowpush) leaves
    the queue, is never run, and is logged as dropped after its "asked"
    line; the retry in flight is answered as before."""
    use_database_queue(app)
    uuids = park_failed(app, 5)
    busy, gone = uuids[:4], uuids[4]
    env = app.env_conf()
    m = master_factory(redis_server)
    m.write_config(pool(app).replace(env, env[:env.rindex("}")] + ' FIXTURE_BOOT_HAZARDS = "slowpush"; };'))
    m.start()
    try:
        wait_for(lambda: agent_pid(m), 60, interval=0.25, what="the pool's app agent")

        def retry(jobs):
            return (json.dumps({"cmd": "app", "pool": "appq", "request": {"op": "failed-retry", "jobs": jobs}})
                    + "\n").encode()

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as a:
            a.settimeout(90)
            a.connect(str(m.socket))
            a.sendall(retry(busy))
            # the agent pushes the first of four jobs (a second each): its request is in flight
            wait_for(lambda: app.table("select id from jobs"), 60, interval=0.05, what="the first retry to run")
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as b:
                b.connect(str(m.socket))
                b.sendall(retry([gone]))
            wait_for(lambda: "dropped: its client went away" in m.log(), 30, what="the gone client's retry dropped")
            rep = json.loads(a.makefile("rb").readline())
            assert rep.get("ok"), rep
        log = m.log()
        assert "app failed-retry of 1 failed jobs on pool appq asked over" in log
        assert "app failed-retry of 1 failed jobs on pool appq asked by uid" in log
        assert log.count("dropped: its client went away") == 1
        # the gone client's job was never retried: still in the failer, not on its queue
        queued = [json.loads(r["payload"])["uuid"] for r in app.table("select payload from jobs")]
        assert gone not in queued and gone in [r["uuid"] for r in app.failed_jobs()]
        assert "app failer of pool appq: retried" in m.log()
    finally:
        assert m.stop(60) == 0

