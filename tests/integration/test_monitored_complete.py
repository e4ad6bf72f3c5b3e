"""A watched tag keeps every job of its tag, not a sample (issue 31): the
recent-jobs list is a sample under load (a worker sends its newest 256
records a flush, the master writes job_history_size a pass); a watched
tag's list is not. Workers read the watched set and send those records
apart; the master forwards them in bounded batches, each written once
(docs/configuration.md, monitored_tag_jobs). The master answers /healthz
and `qpool status` all the while."""
import os
import random
import select
import signal
import socket
import threading
import urllib.error
import urllib.request

from conftest import FIXTURE_HANDLER, PREFIX, free_port, make_payload, push_many, wait_for

TAG_KEY = PREFIX + "qpool:{qpool-jobs}:tag:"


def probe(port, stop, seen):
    """GET /healthz in turn until stop: its status each (None: no answer)."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=60) as res:
                seen.append(res.status)
        except urllib.error.HTTPError as e:
            seen.append(e.code)     # an answer: 503 says the master took over 2 s (a loaded machine)
        except OSError:
            seen.append(None)
        stop.wait(0.2)


def uuids(r, tag):
    return [rec.split(b'"uuid":"', 1)[1].split(b'"', 1)[0].decode() for rec in r.lrange(TAG_KEY + tag, 0, -1)]


def test_every_job_of_a_watched_tag_reaches_its_list_once(master, r):
    port = free_port()
    master.write_config('{ name = "w"; queues = ["default"]; processes = 2; tries = 1; timeout = 10;'
                        ' handler = { type = "pipe"; command = ["%s"]; }; }' % FIXTURE_HANDLER,
                        qpool='  job_history_size = 100;\n  http = { listen = "127.0.0.1:%d"; };' % port)
    master.start()
    assert "watching" in master.cli("monitor", "add", "vip").stdout
    # each worker has read the watched set (it reads it every second)
    master.wait_log(r"watched tags now: 1 ", timeout=60, count=2)

    plain = [make_payload("ok", tags=["plain"]) for _ in range(4000)]
    vip = [make_payload("ok", tags=["vip", "vip-%d" % i]) for i in range(1000)]
    everything = plain + vip
    random.Random(31).shuffle(everything)
    stop, seen = threading.Event(), []
    prober = threading.Thread(target=probe, args=(port, stop, seen), daemon=True)
    prober.start()
    statuses = []
    try:
        push_many(r, "default", everything)              # all at once: the workers run them flat out

        def drained():
            statuses.append(master.status(verbose=False)["pools"][0]["name"] == "w")
            return r.llen(PREFIX + "queues:default") == 0
        wait_for(drained, 180, interval=0.5, what="the queue drained")
        want = {p["uuid"] for p in vip}
        counts = []

        def all_kept():
            counts.append(len(set(uuids(r, "vip")) & want))
            return counts[-1] == len(want)
        try:
            wait_for(all_kept, 120, interval=0.5, what="every vip job in the watched list")
        except AssertionError:
            raise AssertionError("%d of the %d vip jobs in the watched list" % (counts[-1], len(want)))
    finally:
        stop.set()
        prober.join(70)
    got = uuids(r, "vip")
    assert len(got) == 1000 and len(set(got)) == 1000       # each once
    assert r.llen(PREFIX + "qpool:{qpool-jobs}:list") <= 100  # the recent list stays bounded
    assert not r.exists(TAG_KEY + "plain")                  # an unwatched tag has no list
    # the master answered all the while: `qpool status` each time, /healthz
    # each time (200 while the master answers it within 2 s)
    assert statuses and all(statuses)
    assert seen and None not in seen and 200 in seen, seen


class CutOnce:
    """A TCP proxy to Redis that, the first time a client sends a watched
    batch (its token's key, "mtoken:") and Redis runs it (its reply is not
    an error such as NOSCRIPT), closes that connection instead of passing
    the reply on: a write whose reply was lost."""

    def __init__(self, port):
        self.port, self.cut = port, threading.Event()
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.stop = threading.Event()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        self.lsock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                c, _ = self.lsock.accept()
            except OSError:
                continue
            s = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=self.pipe, args=(c, s), daemon=True).start()

    def pipe(self, c, s):
        cutting = False
        try:
            while not self.stop.is_set():
                ready, _, _ = select.select([c, s], [], [], 0.2)
                for x in ready:
                    data = x.recv(1 << 16)
                    if not data:
                        return
                    if x is c and not self.cut.is_set() and b"mtoken:" in data:
                        cutting = True
                    if x is s and cutting and data.startswith(b"-"):
                        cutting = False         # NOSCRIPT: not run; the script's text comes next
                    elif x is s and cutting:
                        self.cut.set()          # Redis ran it and answered: that answer is lost
                        return
                    (s if x is c else c).sendall(data)
        except OSError:
            return
        finally:
            c.close()
            s.close()


def test_a_batch_whose_reply_is_lost_is_written_once(master, redis_server, r):
    proxy = CutOnce(redis_server.port)
    try:
        conf = ('default = { host = "127.0.0.1"; port = %d; db = 0; prefix = "%s"; };'
                % (proxy.lsock.getsockname()[1], PREFIX))
        master.write_config('{ name = "w"; queues = ["default"]; processes = 1; tries = 1; timeout = 10;'
                            ' handler = { type = "pipe"; command = ["%s"]; }; }' % FIXTURE_HANDLER,
                            qpool="  job_history_size = 100;", redis_conf=conf)
        master.start()
        assert "watching" in master.cli("monitor", "add", "vip").stdout
        master.wait_log(r"watched tags now: 1 ", timeout=60)
        vip = [make_payload("ok", tags=["vip"]) for _ in range(300)]
        push_many(r, "default", vip)
        wait_for(proxy.cut.is_set, 120, interval=0.2, what="a watched batch's reply cut")
        want = {p["uuid"] for p in vip}
        wait_for(lambda: set(uuids(r, "vip")) >= want, 120, interval=0.5, what="every vip job in its list")
        got = uuids(r, "vip")
        assert len(got) == len(set(got)) == 300, "%d records of %d jobs" % (len(got), len(set(got)))
    finally:
        proxy.stop.set()
        proxy.lsock.close()


# With balance_interval = 10 the master forwards at most 1,000 watched
# records a pool every 10 s, so most of a burst is still queued at the
# master when the queue has drained: a stop, or a reload that removes the
# pool, must forward them (batch after batch, within shutdown_timeout).
SLOW_PASS = "  job_history_size = 100;\n  balance_interval = 10;"
POOL = ('{ name = "%s"; queues = ["%s"]; processes = 2; tries = 1; timeout = 10;'
        ' handler = { type = "pipe"; command = ["%s"]; }; }')


def test_watched_records_still_queued_at_a_stop_are_kept(master, r):
    master.write_config(POOL % ("w", "default", FIXTURE_HANDLER), qpool=SLOW_PASS)
    master.start()
    assert "watching" in master.cli("monitor", "add", "vip").stdout
    master.wait_log(r"watched tags now: 1 ", timeout=60, count=2)
    vip = [make_payload("ok", tags=["vip"]) for _ in range(3000)]
    push_many(r, "default", vip)
    wait_for(lambda: r.llen(PREFIX + "queues:default") == 0, 180, interval=0.2, what="the queue drained")
    assert master.stop(120) == 0                          # at once: the master still holds most of them
    got = uuids(r, "vip")
    assert len(got) == len(set(got)) == 3000, "%d records of %d jobs" % (len(got), len(set(got)))
    assert "dropped" not in master.log()


def test_watched_records_of_a_pool_removed_by_a_reload_are_kept(master, r):
    # a pass every 2 s: the removed pool's records go 1,000 a pass after it
    both = POOL % ("w", "default", FIXTURE_HANDLER) + ",\n  " + POOL % ("v", "vq", FIXTURE_HANDLER)
    master.write_config(both, qpool=SLOW_PASS.replace("= 10", "= 2"))
    master.start()
    assert "watching" in master.cli("monitor", "add", "vip").stdout
    master.wait_log(r"watched tags now: 1 ", timeout=60, count=4)
    vip = [make_payload("ok", tags=["vip"]) for _ in range(3000)]
    push_many(r, "vq", vip)
    wait_for(lambda: r.llen(PREFIX + "queues:vq") == 0, 180, interval=0.2, what="the queue drained")
    master.write_config(POOL % ("w", "default", FIXTURE_HANDLER), qpool=SLOW_PASS.replace("= 10", "= 2"))
    master.cli("reload")
    master.wait_log(r"pool v: removed", timeout=120)
    got = uuids(r, "vip")
    assert len(got) == len(set(got)) == 3000, "%d records of %d jobs" % (len(got), len(set(got)))
    assert "dropped" not in master.log()


def test_a_tag_list_redis_refuses_costs_only_its_own_records(master, r):
    """An error raised inside the script after the token was set (WRONGTYPE
    on one watched tag's key) used to lose the rest of the batch unlogged:
    the resend found the token and wrote nothing. Each write goes on its own
    now; the refused ones are logged."""
    master.write_config(POOL.replace("processes = 2", "processes = 1") % ("w", "default", FIXTURE_HANDLER),
                        qpool=SLOW_PASS)
    master.start()
    assert "watching" in master.cli("monitor", "add", "vip").stdout
    assert "watching" in master.cli("monitor", "add", "bad").stdout
    master.wait_log(r"watched tags now: 2 ", timeout=60)
    r.set(TAG_KEY + "bad", "not a list")                  # every write to that tag's list fails
    jobs = [make_payload("ok", tags=["vip", "bad"] if i % 10 == 0 else ["vip"]) for i in range(200)]
    push_many(r, "default", jobs)
    wait_for(lambda: r.llen(PREFIX + "queues:default") == 0, 180, interval=0.2, what="the queue drained")
    want = {p["uuid"] for p in jobs}
    try:
        wait_for(lambda: set(uuids(r, "vip")) >= want, 60, interval=0.5, what="every vip job in its list")
    finally:
        got = uuids(r, "vip")
        assert len(got) == len(set(got)), "%d records of %d jobs" % (len(got), len(set(got)))
    assert len(set(got)) == 200
    master.wait_log(r"records of watched tags not written \(Redis refused their tag's list: WRONGTYPE", timeout=30)


def test_a_worker_logs_the_watched_records_it_drops_as_it_drops_them(master, r):
    """A worker whose master takes nothing (stopped here) holds 2,048 watched
    records, then overwrites its oldest: it says so at once (1, 2, 4, ...),
    not only at a clean exit that a killed worker never reaches."""
    # memory: no worker exits for its size (ASan's) while nothing can replace it
    master.write_config(POOL.replace("processes = 2", "processes = 1; memory = 4096") % ("w", "default", FIXTURE_HANDLER),
                        qpool="  job_history_size = 100;")
    master.start()
    assert "watching" in master.cli("monitor", "add", "vip").stdout
    master.wait_log(r"watched tags now: 1 ", timeout=60)
    os.kill(master.proc.pid, signal.SIGSTOP)
    try:
        push_many(r, "default", [make_payload("ok", tags=["vip"]) for _ in range(4000)])
        master.wait_log(r"records of watched tags dropped so far", timeout=180)
    finally:
        os.kill(master.proc.pid, signal.SIGCONT)
    assert master.stop(120) == 0
