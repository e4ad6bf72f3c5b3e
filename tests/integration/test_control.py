"""Balancing by queue length, and steering through the control socket."""
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import (FIXTURE_HANDLER, QPOOL, failed_records, make_payload, push,
                      push_many, queue_state, read_fixture_log, wait_for)


def fixture_pool(name, queues, log, size="processes = 1;", handler="pipe", extra=""):
    cmd = '["%s"]' % FIXTURE_HANDLER if handler == "pipe" else '["%s", "--exec"]' % FIXTURE_HANDLER
    return ('{ name = "%s"; queues = [%s]; %s handler = { type = "%s"; command = %s; }; '
            'environment = { FIXTURE_LOG = "%s"; }; %s }'
            % (name, ", ".join('"%s"' % q for q in queues), size, handler, cmd, log, extra))


def ran(log, queue_ids=None):
    return [l for l in read_fixture_log(log) if l[0] == "job"]


def test_auto_pool_scales_up_fast_and_down_slowly_without_killing_jobs(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", ["default"], log,
                                     'balance = "auto"; min_processes = 1; max_processes = 8; '
                                     'scale_down_delay = 3; target_wait = 5;', extra="job_log = false;"))
    payloads = [make_payload("sleep:50") for _ in range(5000)]
    push_many(r, "default", payloads)
    master.start()
    master.wait_children("w", 8, timeout=15)
    targets = re.findall(r"pool w: target (\d+) -> (\d+)", master.log())
    assert targets and targets[0] == ("1", "8"), "not min to max in one balancer pass: %s" % targets
    # drain, then back to the minimum once scale_down_delay has passed
    wait_for(lambda: queue_state(r, "default")["ready"] == 0, 120, interval=0.5, what="the backlog to drain")
    drained_at = time.monotonic()
    wait_for(lambda: master.pool("w")["workers"] == 1 and master.pool("w")["stopping"] == 0, 90, interval=0.5,
             what="the pool back at its minimum")
    assert time.monotonic() - drained_at >= 3, "scaled down before scale_down_delay"
    runs = ran(log)
    ids = [l[1] for l in runs]
    assert len(ids) == 5000 and set(ids) == {p["id"] for p in payloads}, "a job ran twice or not at all"
    assert failed_records(r, "default") == []
    text = master.log()
    assert "timed out" not in text and "killed by signal" not in text
    stops = re.findall(r"w#\d+ \(pid \d+\) (.*) after stop", text)
    assert stops and all(s == "exited with status 0" for s in stops), stops
    st = queue_state(r, "default")
    assert st["reserved"] == 0 and st["delayed"] == 0


def test_pause_and_continue_by_pool_and_by_queue(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("a", ["qa"], log, handler="exec") + ",\n" +
                        fixture_pool("b", ["qb", "shared"], log, handler="exec"))
    master.start()
    master.wait_children("a", 1)
    master.wait_children("b", 1)
    assert master.cli("status", check=False).returncode == 0

    master.cli("pause", "a")
    assert master.pool("a")["paused"] and not master.pool("b")["paused"]
    push(r, "qa", make_payload("ok"))
    push(r, "qb", make_payload("ok"))
    wait_for(lambda: queue_state(r, "qb")["ready"] == 0 and len(ran(log)) == 1, 10, what="pool b to keep working")
    time.sleep(1.5)
    assert queue_state(r, "qa")["ready"] == 1, "a paused pool took a job"
    assert master.cli("status", check=False).returncode == 0, "only one pool paused: still running"
    master.cli("continue", "a")
    wait_for(lambda: queue_state(r, "qa")["ready"] == 0, 10, what="pool a after continue")

    master.cli("pause", "--queue", "qb")
    push(r, "qb", make_payload("ok"))
    push(r, "shared", make_payload("ok"))
    wait_for(lambda: queue_state(r, "shared")["ready"] == 0, 10, what="the pool's other queue to keep going")
    time.sleep(1.5)
    assert queue_state(r, "qb")["ready"] == 1
    qstat = {q["name"]: q for q in master.pool("b")["queues"]}
    assert qstat["qb"]["paused"] and not qstat["shared"]["paused"]

    # the pause survives a reload and a respawn
    master.conf.write_text(master.conf.read_text().replace('queues = ["qa"]; processes = 1;', 'queues = ["qa"]; processes = 2;'))
    master.signal(signal.SIGHUP)
    master.wait_children("a", 2)
    os.kill(master.child_pids("b")[0], signal.SIGKILL)
    time.sleep(2.5)
    assert queue_state(r, "qb")["ready"] == 1
    master.cli("continue", "--queue", "qb")
    wait_for(lambda: queue_state(r, "qb")["ready"] == 0, 10, what="queue qb after continue")

    master.cli("pause")
    res = master.cli("status", check=False)
    assert res.returncode == 1 and "paused" in res.stdout
    master.cli("continue")
    assert master.cli("status", check=False).returncode == 0
    assert master.cli("pause", "nope", check=False).returncode == 1


def two_pools(master, log):
    master.write_config(fixture_pool("a", ["qa"], log, handler="exec") + ",\n" +
                        fixture_pool("b", ["qb"], log, handler="exec"))
    master.start()
    master.wait_children("a", 1)
    master.wait_children("b", 1)


def takes_jobs(master, r, queue, pool):
    """Whether pool takes a job from queue within a few seconds (through Redis)."""
    push(r, queue, make_payload("ok"))
    try:
        wait_for(lambda: queue_state(r, queue)["ready"] == 0, 3, what="a job on " + queue)
        return True
    except AssertionError:
        return False


def test_pause_pool_then_sigcont_resumes_it(master, r, tmp_path):
    # issue 8 item 6: SIGCONT is `qpool continue`: it resumes everything an
    # operator paused, a single pool included (it used to leave the pool paused)
    log = tmp_path / "fixture.log"
    two_pools(master, log)
    master.cli("pause", "a")
    assert not takes_jobs(master, r, "qa", "a")
    master.signal(signal.SIGCONT)
    wait_for(lambda: queue_state(r, "qa")["ready"] == 0, 10, what="pool a to resume on SIGCONT")
    assert not master.pool("a")["paused"]
    assert takes_jobs(master, r, "qb", "b")


def test_sigusr2_then_continue_pool_resumes_only_that_pool(master, r, tmp_path):
    # issue 8 item 6: SIGUSR2 is `qpool pause`: every pool is paused, and
    # `qpool continue POOL` resumes that one (it used to change nothing)
    log = tmp_path / "fixture.log"
    two_pools(master, log)
    master.signal(signal.SIGUSR2)
    wait_for(lambda: master.pool("a")["paused"] and master.pool("b")["paused"], 10, what="every pool paused")
    assert master.cli("status", check=False).returncode == 1
    assert not takes_jobs(master, r, "qa", "a")
    master.cli("continue", "a")
    wait_for(lambda: queue_state(r, "qa")["ready"] == 0, 10, what="pool a to resume")
    assert master.pool("b")["paused"]
    assert not takes_jobs(master, r, "qb", "b")
    master.signal(signal.SIGCONT)
    wait_for(lambda: queue_state(r, "qb")["ready"] == 0, 10, what="pool b after SIGCONT")
    assert master.cli("status", check=False).returncode == 0


def test_laravel_queue_pause_and_queue_restart(master, r, laravel_app, tmp_path):
    log = tmp_path / "fixture.log"
    app = laravel_app
    master.write_config(fixture_pool("w", ["default"], log, "processes = 2;", handler="exec"))
    master.start()
    before = master.wait_children("w", 2)
    app.artisan("queue:pause", "redis:default")
    wait_for(lambda: any(q["laravel_paused"] for q in master.pool("w")["queues"]), 10,
             what="the master to see Laravel's pause key")
    app.dispatch("MarkerJob", count=2)
    time.sleep(2)
    assert queue_state(r, "default")["ready"] == 2
    app.artisan("queue:resume", "redis:default")
    wait_for(lambda: queue_state(r, "default")["ready"] == 0, 10, what="jobs after queue:resume")

    app.artisan("queue:restart")
    wait_for(lambda: (lambda p: len(p) == 2 and not set(p) & set(before))(master.child_pids("w")), 20,
             what="a rolling restart after queue:restart")
    assert "Laravel's queue:restart signal changed" in master.log()


def test_rolling_restart_never_drops_below_the_pool_size(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", ["default"], log, "processes = 3;"))
    master.start()
    old = master.wait_children("w", 3)
    wait_for(lambda: master.pool("w")["idle"] == 3, 10)
    res = master.cli("restart", "w")
    assert "rolling restart started" in res.stdout
    low = [3]

    def rolled():
        st = master.pool("w")
        live = [c for c in st["children"] if c["state"] != "stopping"]
        low[0] = min(low[0], len(live))
        return len(live) == 3 and not {c["pid"] for c in live} & set(old)
    wait_for(rolled, 20, interval=0.02, what="every worker replaced")
    assert low[0] >= 3


def test_scale_pins_and_auto_returns(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", ["default"], log,
                                     'balance = "auto"; min_processes = 1; max_processes = 4;'))
    master.start()
    master.wait_children("w", 1)
    assert "pool w: target 3" in master.cli("scale", "w", "3").stdout
    master.wait_children("w", 3)
    assert master.pool("w")["pinned"] == 3
    master.cli("scale", "w", "auto")
    wait_for(lambda: master.pool("w")["workers"] == 1, 60, what="back to the balancer's minimum")
    assert master.cli("scale", "w", "lots", check=False).returncode == 64
    assert master.cli("scale", "nope", "2", check=False).returncode == 1


def test_terminate_wait_returns_after_the_last_child(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", ["default"], log, "processes = 2;"))
    master.start()
    master.wait_children("w", 2)
    push(r, "default", make_payload("sleep:2500"))
    wait_for(lambda: len(ran(log)) == 1, 10)
    t0 = time.monotonic()
    res = master.cli("terminate", "--wait")
    assert time.monotonic() - t0 >= 1.5, "returned before the running job finished"
    assert "App\\Jobs\\FixtureJob" in res.stdout and "qpool stopped" in res.stdout
    assert master.proc.wait(5) == 0
    assert queue_state(r, "default")["reserved"] == 0
    assert master.cli("status", check=False).returncode == 2


def test_reload_over_the_socket_reports_errors(master, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", ["default"], log))
    master.start()
    good = master.conf.read_text()
    master.conf.write_text(good.replace("processes = 1;", "processes = 1; tires = 2;"))
    res = master.cli("reload", check=False)
    assert res.returncode == 78
    assert "unknown key 'tires'" in res.stderr
    master.conf.write_text(good.replace("processes = 1;", "processes = 2;"))
    res = master.cli("reload")
    assert "reloaded" in res.stdout
    master.wait_children("w", 2)


def raw_request(path, data, read=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # a blocking connect, as `qpool status` makes: with a timeout Python
    # connects without blocking, and a backlog momentarily full of refused
    # peers gives EAGAIN at once instead of a wait for the master's accept
    s.connect(str(path))
    s.settimeout(10)
    s.sendall(data)
    out = b""
    if read:
        while not out.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    s.close()
    return out


def test_garbage_and_oversized_requests_get_errors(master, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config(fixture_pool("w", ["default"], log))
    master.start()
    for data in [b"garbage\n", b"[1,2]\n", b'{"cmd":"explode"}\n', b'{"nocmd":1}\n', b'{"cmd":"scale"}\n',
                 b"\x00\xff\xfe\n"]:
        reply = json.loads(raw_request(master.socket, data))
        assert reply["ok"] is False and reply["error"], data
    reply = json.loads(raw_request(master.socket, b"x" * 200000))
    assert reply["ok"] is False and "too large" in reply["error"]
    # half a request, then hang up
    raw_request(master.socket, b'{"cmd":"sta', read=False)
    status = json.loads(raw_request(master.socket, b'{"cmd":"status"}\n'))
    assert status["ok"] and status["pools"][0]["name"] == "w"
    assert master.proc.poll() is None


def open_socket_master(master_factory, redis_server, tmp_path, request, qpool=""):
    """A master whose socket anyone can connect to: only qpool's own check stands in the way."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="qpool-open-"))
    os.chmod(d, 0o755)  # 0777 would be refused (review #5)
    request.addfinalizer(lambda: shutil.rmtree(d, ignore_errors=True))
    m = master_factory(redis_server, "open")
    m.socket = d / "qpool.sock"
    log = tmp_path / "fixture.log"
    m.write_config(fixture_pool("w", ["default"], log), qpool='control_socket_mode = "0666"; ' + qpool)
    m.start()
    return m, d, log


AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

# The start of HOG and HOLDER: trickle(socks, t, pause) writes a byte to
# each socket every pause seconds (a line that never ends) and returns how
# many the master closed within t seconds.
TRICKLE = """
import socket, sys, time
def trickle(socks, t, pause):
    closed, deadline = set(), time.monotonic() + t
    while time.monotonic() < deadline and len(closed) < len(socks):
        for i, s in enumerate(socks):
            if i in closed: continue
            try:
                s.send(b"x")
                while True:
                    d = s.recv(4096)
                    if not d: closed.add(i); break
            except BlockingIOError: pass
            except OSError: closed.add(i)
        time.sleep(pause)
    return len(closed)
"""

# Opens N connections, keeps writing a byte to each (so none ever looks
# idle), and reports how many the master closed within T seconds.
HOG = TRICKLE + """
path, n, t = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(path); s.setblocking(False); socks.append(s)
print("connected", flush=True)
print("closed", trickle(socks, t, 0.1), flush=True)
"""


def test_refused_peers_cannot_lock_out_operators(master_factory, redis_server, tmp_path, request):
    """Review #11: refused clients are closed quickly and never fill the client cap."""
    m, d, log = open_socket_master(master_factory, redis_server, tmp_path, request)
    hog = subprocess.Popen(AS_NOBODY + ["/usr/bin/python3", "-c", HOG, str(m.socket), "150", "20"],
                           stdout=subprocess.PIPE, text=True)
    request.addfinalizer(hog.kill)
    assert hog.stdout.readline().strip() == "connected"
    # 150 refused peers (more than the 64-client cap) are connected and busy:
    # the operator still gets in
    st = json.loads(raw_request(m.socket, b'{"cmd":"status"}\n'))
    assert st["ok"] and st["pools"][0]["name"] == "w"
    # and every refused peer is closed although it keeps sending
    out, _ = hog.communicate(timeout=60)
    assert out.strip() == "closed 150", out
    assert m.proc.poll() is None


# As an allowed user: opens N connections, each with half a request line,
# and says how many the master keeps (the others are told why and closed).
# After a line on stdin, trickles a byte to each kept one (a line that never
# ends) and says how many the master closed within T seconds.
HOLDER = TRICKLE + """
path, n, t = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(path); socks.append(s)
    try: s.sendall(b'{"cmd":"sta')
    except OSError: pass  # turned away already: its reply is still there to read
# one more, answered once the master has taken (or turned away) every one before it
sync = socket.socket(socket.AF_UNIX); sync.connect(path); sync.settimeout(60)
try: sync.sendall(b'{"cmd":"status"}\\n')
except OSError: pass
held, told = [], {sync.recv(4096).decode().strip()}
for s in socks:
    s.setblocking(False)
    try:
        told.add(s.recv(4096).decode().strip() or "closed")
    except BlockingIOError:
        held.append(s)
    except OSError as e:
        told.add(type(e).__name__)
print("held", len(held), "told", sorted(told), flush=True)
sys.stdin.readline()
print("closed", trickle(held, t, 0.2), flush=True)
"""


def test_one_user_cannot_hold_every_control_place(master_factory, redis_server, tmp_path, request):
    """m8 (security-2026-11-27): an allowed user other than root and qpool's
    own holds 8 places at most, the master keeps answering root, and a
    request line trickled a byte at a time keeps no place."""
    m, d, log = open_socket_master(master_factory, redis_server, tmp_path, request, qpool='control_user = "nobody";')
    hog = subprocess.Popen(AS_NOBODY + ["/usr/bin/python3", "-c", HOLDER, str(m.socket), "64", "30"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    request.addfinalizer(hog.kill)
    held = hog.stdout.readline().split()
    assert held[:2] == ["held", "8"], held
    assert "too many control clients of uid 65534 (at most 8 at once)" in " ".join(held), held
    # nobody's places are taken: root (the operator) is still answered, many times over
    for _ in range(20):
        st = json.loads(raw_request(m.socket, b'{"cmd":"status"}\n'))
        assert st["ok"] and st["pools"][0]["name"] == "w"
    # a line that never ends is closed although bytes keep coming
    hog.stdin.write("go\n")
    hog.stdin.flush()
    out, _ = hog.communicate(timeout=60)
    assert out.strip() == "closed 8", out
    # and the places are free again
    res = subprocess.run(AS_NOBODY + [QPOOL, "status", "--socket", str(m.socket)], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    assert m.proc.poll() is None


def test_peers_outside_the_owner_and_group_are_refused(master_factory, redis_server, tmp_path, request):
    m, d, log = open_socket_master(master_factory, redis_server, tmp_path, request)
    probe = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
             "s.sendall(b'{\"cmd\":\"status\"}\\n'); print(s.recv(4096).decode())")
    res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c",
                          probe, str(m.socket)], capture_output=True, text=True, timeout=30)
    reply = json.loads(res.stdout)
    assert reply["ok"] is False and "permission denied" in reply["error"]
    assert "control: refused uid" in m.log()
    # with the default mode the file system already keeps them out
    m2 = master_factory(redis_server, "closed")
    m2.socket = d / "closed.sock"
    m2.pid_file = d / "closed.pid"
    m2.write_config(fixture_pool("w2", ["other"], log))
    m2.start()
    assert oct(os.stat(m2.socket).st_mode & 0o777) == "0o660"
    res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", QPOOL, "status",
                          "--socket", str(m2.socket)], capture_output=True, text=True, timeout=30)
    # refused, but not reported as "not running": a health check must not see a dead service
    assert res.returncode == 1 and "Permission denied" in res.stderr, res.stderr


APP_LIST = b'{"cmd":"app","pool":"w","request":{"op":"failed","limit":5}}\n'
APP_RETRY = b'{"cmd":"app","pool":"w","request":{"op":"failed-retry","jobs":["a1"]}}\n'
AS_NOBODY_ASK = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                 "s.sendall(sys.argv[2].encode()); print(s.makefile().readline())")


def ask_as_nobody(m, line):
    res = subprocess.run(AS_NOBODY + ["/usr/bin/python3", "-c", AS_NOBODY_ASK, str(m.socket), line.decode()],
                         capture_output=True, text=True, timeout=30)
    return json.loads(res.stdout)


@pytest.mark.parametrize("read_all", [False, True], ids=["default", "read_without_token_all"])
def test_app_failer_is_for_the_owner(master_factory, redis_server, tmp_path, request, read_all):
    """Review freshapp #2: the app's failed payloads, and retry and forget
    on its failer, are not for every control peer: control_user gets
    `permission denied` for them, but for list and show when
    http.read_without_token = "all" (as over the HTTP socket)."""
    http = ' http = { read_without_token = "all"; };' if read_all else ""
    m, d, log = open_socket_master(master_factory, redis_server, tmp_path, request,
                                   qpool='control_user = "nobody";' + http)
    # nobody may ask for the status, as before
    assert ask_as_nobody(m, b'{"cmd":"status"}\n')["ok"]
    listed = ask_as_nobody(m, APP_LIST)
    if read_all:  # past the gate: pool w has no app agent
        assert "permission denied" not in listed["error"], listed
    else:
        assert listed["ok"] is False and listed["error"].startswith("permission denied: the app's failed jobs"), listed
    retried = ask_as_nobody(m, APP_RETRY)
    assert retried["ok"] is False and retried["error"].startswith("permission denied: retry and forget"), retried
    assert "control: app on pool w refused to uid 65534" in m.log()
    # root (the owner) is served: the error is the pool's, not a refusal
    for line in (APP_LIST, APP_RETRY):
        rep = json.loads(raw_request(m.socket, line))
        assert rep["ok"] is False and "permission denied" not in rep["error"], rep
