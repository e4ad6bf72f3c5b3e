"""Regression tests for defects found in review; each names what used to go wrong."""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import (BUILD, FIXTURE_HANDLER, PREFIX, PYTHON, QPOOL, SIGNAL_CHILD, children_of, failed_records,
                      make_payload, proc_alive, push, queue_state, read_fixture_log, wait_for)


def fixture_pool(name, queue, log, extra="", handler="pipe"):
    cmd = '["%s"]' % FIXTURE_HANDLER if handler == "pipe" else '["%s", "--exec"]' % FIXTURE_HANDLER
    return ('{ name = "%s"; queues = ["%s"]; processes = 1; handler = { type = "%s"; command = %s; }; '
            'environment = { FIXTURE_LOG = "%s"; }; %s }' % (name, queue, handler, cmd, log, extra))


@pytest.fixture
def open_dir(request):
    """A directory user nobody can reach (pytest's own tmp dirs are 0700)."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="qpool-regress-"))
    os.chmod(d, 0o777)
    request.addfinalizer(lambda: shutil.rmtree(d, ignore_errors=True))
    return d


def test_children_that_switch_user_still_die_with_the_master(master, r, open_dir):
    """setuid() clears the parent-death signal: it must be set again after the switch."""
    log = open_dir / "fixture.log"
    master.write_config(
        '{ name = "ext"; queues = ["e"]; processes = 1; user = "nobody"; command = ["sleep", "1000"]; },\n'
        '{ name = "nat"; queues = ["n"]; processes = 1; user = "nobody"; '
        '  handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; }'
        % (FIXTURE_HANDLER, log))
    master.start()
    pids = master.wait_children("ext", 1) + master.wait_children("nat", 1)
    wait_for(lambda: children_of(pids[1]), 10, what="the native worker's handler")
    handler = children_of(pids[1])[0]
    assert os.stat("/proc/%d" % pids[0]).st_uid != 0
    os.kill(master.proc.pid, signal.SIGKILL)
    master.proc.wait(5)
    wait_for(lambda: not any(proc_alive(p) for p in pids + [handler]), 10,
             what="children running as nobody to die with the master")


class BlackHole:
    """A TCP server that accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stop = False
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
                self.conns.append(c)
            except OSError:
                pass

    def close(self):
        self.stop = True
        for c in self.conns:
            c.close()
        self.sock.close()


def test_a_redis_that_never_answers_does_not_hang_the_master(master, redis_server, tmp_path):
    hole = BlackHole()
    try:
        log = tmp_path / "fixture.log"
        master.write_config(
            fixture_pool("w", "default", log),
            redis_conf='default = { port = %d; };\n  cache = { port = %d; db = 1; timeout = 1.0; };'
                       % (redis_server.port, hole.port))
        master.start()
        wait_for(lambda: len(hole.conns) >= 1, 10, what="the master to connect to the black hole")
        time.sleep(2)
        st = master.status()  # answered although the cache connection hangs
        assert st["ok"]
        t0 = time.monotonic()
        master.signal(signal.SIGTERM)
        assert master.wait_exit(30) == 0
        assert time.monotonic() - t0 < 10
    finally:
        hole.close()


def test_a_refused_ack_is_kept_and_written_later_not_run_twice(master, r, tmp_path):
    """A READONLY reply (failover) to an ack used to drop it: the job ran again."""
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", "default", log, "tries = 1; retry_after = 3;"))
    master.start()
    p = make_payload("sleep:1500")
    push(r, "default", p)
    wait_for(lambda: len(read_fixture_log(log)) == 1, 10, what="the job to start")
    r.execute_command("REPLICAOF", "127.0.0.1", "1")  # a replica of nothing: read-only
    master.wait_log("redis refused the outcome of a job", timeout=20)
    time.sleep(4)  # past retry_after: the reservation would have expired and the job come back
    r.execute_command("REPLICAOF", "NO", "ONE")
    wait_for(lambda: queue_state(r, "default")["reserved"] == 0, 20, what="the ack to be written")
    time.sleep(1.5)
    assert len([l for l in read_fixture_log(log) if l[0] == "job"]) == 1, "the job ran twice"
    assert failed_records(r, "default") == []
    assert queue_state(r, "default") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}


def test_a_failure_is_recorded_before_the_failure_hooks_run(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", "default", log, "tries = 1;").replace(
        'FIXTURE_LOG', 'FIXTURE_FAILED_SLEEP_MS = "3000"; FIXTURE_LOG'))
    master.start()
    push(r, "default", make_payload("fail"))
    wait_for(lambda: any(l[0] == "failed" for l in read_fixture_log(log)), 10, what="the failed request")
    # the hooks are still running: the job is already out of :reserved and in the store
    assert queue_state(r, "default")["reserved"] == 0
    assert len(failed_records(r, "default")) == 1
    assert "unknown status" not in master.log()


def test_an_external_child_ignoring_sigterm_is_killed_after_stop_timeout(master, r, tmp_path):
    master.write_config(
        '{ name = "ext"; queues = ["q"]; processes = 2; command = ["%s", "%s", "ignore-term"]; }'
        % (PYTHON, SIGNAL_CHILD), qpool="shutdown_timeout = 2; max_workers = 2;")
    master.start()
    master.wait_children("ext", 2)
    time.sleep(0.5)
    master.cli("scale", "ext", "1")
    master.wait_log(r"did not stop within 2 s: killing its process group", timeout=15)
    master.cli("scale", "ext", "2")
    master.wait_children("ext", 2, timeout=15)  # the slot and the budget came back


def test_reload_from_command_to_handler_treats_old_children_as_external(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config('{ name = "p"; queues = ["q"]; processes = 1; command = ["sleep", "1000"]; }')
    master.start()
    old = master.wait_children("p", 1)[0]
    master.signal(signal.SIGUSR2)  # sleep does not catch SIGUSR2: it must not get one
    wait_for(lambda: master.status()["state"] == "paused", 5)
    master.write_config(fixture_pool("p", "q", log))
    master.signal(signal.SIGHUP)
    wait_for(lambda: not proc_alive(old), 20, what="the old child to be replaced")
    time.sleep(0.5)
    assert "SIGUSR2" not in master.log(), master.log()
    assert "sleep" not in " ".join(open("/proc/%d/cmdline" % p).read() for p in master.child_pids("p"))


def test_concurrent_failed_retries_push_once(master, r, tmp_path):
    master.write_config(fixture_pool("w", "default", tmp_path / "f.log", "tries = 1;"))
    master.start()
    p = make_payload("fail")
    push(r, "default", p)
    wait_for(lambda: len(failed_records(r, "default")) == 1, 10)
    assert master.cli("pause").returncode == 0
    wait_for(lambda: master.status()["state"] == "paused", 5)
    procs = [subprocess.Popen([QPOOL, "failed", "retry", p["uuid"], "-c", str(master.conf)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(8)]
    codes = [x.wait(30) for x in procs]
    assert codes.count(0) == 1, codes
    assert r.llen(PREFIX + "queues:default") == 1


def test_control_clients_that_never_read_do_not_stall_the_master(master, tmp_path):
    master.write_config(fixture_pool("w", "default", tmp_path / "f.log"))
    master.start()
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(master.socket))
    s.setblocking(False)
    sent = 0
    try:
        for _ in range(20000):
            sent += s.send(b'{"cmd":"status","verbose":true}\n')
    except BlockingIOError:
        pass
    s.shutdown(socket.SHUT_WR)
    t0 = time.monotonic()
    for _ in range(5):
        assert master.status()["ok"]
    assert time.monotonic() - t0 < 20
    # and the master is not spinning on the half-closed socket
    time.sleep(1)
    with open("/proc/%d/stat" % master.proc.pid) as f:
        before = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])
    time.sleep(2)
    with open("/proc/%d/stat" % master.proc.pid) as f:
        after = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13])
    assert after - before < 100, "the master burned %d ticks in 2 s" % (after - before)
    s.close()


def test_exit_removes_the_socket_it_bound_after_a_reload_moved_it(master, tmp_path):
    master.write_config(fixture_pool("w", "default", tmp_path / "f.log"))
    master.start()
    first = master.socket
    other = tmp_path / "other.sock"
    other.write_text("someone else's")
    master.conf.write_text(master.conf.read_text().replace(str(first), str(other)))
    master.signal(signal.SIGHUP)
    master.wait_log("take effect at the next start")
    master.signal(signal.SIGTERM)
    assert master.wait_exit(30) == 0
    assert not first.exists()
    assert other.read_text() == "someone else's"


def test_huge_delays_and_endless_output_from_a_handler(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", "default", log, "tries = 1;"))
    master.start()
    push(r, "default", make_payload("release-huge"))
    wait_for(lambda: queue_state(r, "default")["delayed"] == 1, 10)
    (member, score), = r.zrange(PREFIX + "queues:default:delayed", 0, -1, withscores=True)
    assert time.time() < score <= time.time() + 10 * 365 * 86400 + 5
    r.delete(PREFIX + "queues:default:delayed")
    worker = master.child_pids("w")[0]
    push(r, "default", make_payload("spew"))
    wait_for(lambda: len(failed_records(r, "default")) == 1, 30, what="the spewing job to fail")
    assert b"HandlerCrashed" in failed_records(r, "default")[0]["exception"]
    with open("/proc/%d/statm" % worker) as f:
        rss_mb = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    if "asan" not in str(BUILD):  # ASan keeps freed memory in quarantine
        assert rss_mb < 64, "the worker grew to %d MB" % rss_mb
    assert proc_alive(worker)


def test_cli_exit_statuses(master, tmp_path):
    master.write_config(fixture_pool("w", "default", tmp_path / "f.log"))
    assert master.cli("terminate", "--timeout", "5", check=False).returncode == 64
    master.start()
    assert master.cli("terminate", "--timeout", "5", check=False).returncode == 64
