"""Preload (issue 21), the channel between a worker and the handler the
pool's zygote forks for it: what a worker sends the zygote, what it accepts
back, and what links the forked handler to its worker (the review of the
prefork merge: docs/architecture.md, "Preloading the app")."""
import os
import re
import signal
import socket
import subprocess
import threading

import pytest

from conftest import PYTHON, QPOOL, ROOT, make_payload, proc_alive, push, queue_state, wait_for
from test_preload import forked_pids, pool, probes, settled, zygote_pids


def start_on_stream_socket(master, kind="socket"):
    """master.start(), but with the master's stdout and stderr a Unix stream
    socket, as systemd's journal gives them (StandardOutput=journal), or a
    pipe, as supervisord gives them (kind="pipe"): every worker and zygote
    inherits it as its stderr. What comes through is copied into the
    master's log. Returns our end (close it when done)."""
    if kind == "pipe":
        r, w = os.pipe()
        ours, theirs = os.fdopen(r, "rb", buffering=0), os.fdopen(w, "wb", buffering=0)
        recv = ours.read
    else:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        recv = ours.recv
    master.logf = open(master.log_path, "ab")
    master.proc = subprocess.Popen([QPOOL, "run", "-c", str(master.conf)], stdout=theirs.fileno(),
                                   stderr=theirs.fileno(), start_new_session=True)
    theirs.close()
    master.sid = master.proc.pid

    def pump(logf):
        try:
            while True:
                data = recv(65536)
                if not data:
                    return
                logf.write(data)
                logf.flush()
        except (OSError, ValueError):  # the log closed at teardown
            return
    threading.Thread(target=pump, args=(master.logf,), daemon=True).start()
    wait_for(lambda: master.listening() or master.proc.poll() is not None, 10, what="the master to start")
    assert master.proc.poll() is None, master.log()
    return ours


@pytest.mark.parametrize("kind", ["socket", "pipe"])
def test_handlers_are_forked_when_stderr_is_a_socket_or_a_pipe(master, r, laravel_app, kind):
    """Under systemd the worker's stderr, which it sends the zygote with its
    pipes, is a socket: PHP receives it as a Socket, not a stream. Every
    forked handler died before it said ready, and no job ever ran. And
    Laravel 10 on PHP 8.4 keeps a copy of stderr open after its boot: the
    zygote took it for a connection of the app's and turned preload off,
    under systemd (a socket) and under supervisord (a pipe)."""
    app = laravel_app
    master.write_config(pool(app, 2))
    keep = start_on_stream_socket(master, kind)
    app.dispatch("ForkProbeJob", 1, 0, count=4, tag="journal")
    wait_for(lambda: len(probes(app)) == 4 and settled(r), 60, what="the probes with stderr on a %s" % kind)
    zygote = zygote_pids(master)[0]
    assert {m["ppid"] for m in probes(app)} == {zygote}, "forked by the zygote, not booted by their workers"
    assert forked_pids(master), "a forked handler's own stderr (the socket) reached the log"
    keep.close()


FAKE_ADAPTER = ROOT / "tests" / "fixtures" / "fake-zygote" / "qpool-handler.php"


def fake_pool(mode, processes=1, extra=""):
    """A pool that preloads tests/fixtures/fake-zygote (a zygote that
    misbehaves as FAKE_ZYGOTE says; without --zygote a handler that says
    "done" to everything)."""
    return ('{ name = "app"; queues = ["default"]; processes = %d; environment = { FAKE_ZYGOTE = "%s"; };\n'
            '  handler = { type = "pipe"; command = ["%s", "%s", "app"]; }; %s }'
            % (processes, mode, PYTHON, FAKE_ADAPTER, extra))


def run_one_job(master, r):
    """Push a job and wait until it has run (acked: nothing ready or reserved)."""
    push(r, "default", make_payload())
    wait_for(lambda: (lambda st: st["ready"] == 0 and st["reserved"] == 0)(queue_state(r, "default")), 60,
             what="the job to run")


def test_workers_boot_their_handlers_when_the_zygote_s_forks_never_start(master, r):
    """The safety net: whatever makes every fork die before it says ready
    (here a zygote that drops each request), a worker asks three times, then
    boots its handlers itself and says so, instead of asking for ever while
    no job runs."""
    master.write_config(fake_pool("die"))
    master.start()
    run_one_job(master, r)
    log = master.log()
    assert log.count("dropped a request") == 3, log[-3000:]
    assert "3 handlers in a row forked by the pool's zygote ended before they said ready" in log
    assert re.search(r"started pipe handler \(pid \d+, protocol 2", log), "booted by its worker"


def test_a_ready_line_naming_the_zygote_itself_is_refused(master, r):
    """A fork's ready line says its pid; the worker accepted the zygote's own
    (its start time fell in the request's clock tick) and then took the
    zygote's process group for its handler's."""
    master.write_config(fake_pool("self"))
    master.start()
    run_one_job(master, r)  # on a handler its worker booted, after three refusals
    log = master.log()
    zygote = zygote_pids(master)
    assert len(zygote) == 1 and proc_alive(zygote[0]), "the zygote was never killed as a handler:\n" + log[-3000:]
    refusals = re.findall(r"it says it is pid (\d+), which ([^;\n]*)", log)
    assert len(refusals) == 3 and set(refusals) == {(str(zygote[0]), "is the pool's zygote")}, refusals
    assert not re.search(r"pipe handler \(pid %d\) (closed|exited)" % zygote[0], log)


def test_the_zygote_s_socket_stays_the_zygote_s(master, r, laravel_app):
    """It is close-on-exec from before the boot (nothing the boot or the
    zygote runs inherits it), and QPOOL_ZYGOTE_FD, which names it, is gone
    from the environment of the handlers and of what their jobs run."""
    app = laravel_app
    master.write_config(pool(app, 2))
    master.start()
    app.dispatch("ForkProbeJob", 1, 0, count=2, tag="env")
    wait_for(lambda: len(probes(app)) == 2 and settled(r), 30, what="the probes")
    zygote = zygote_pids(master)[0]
    sockets = [fd for fd in os.listdir("/proc/%d/fd" % zygote)
               if int(fd) > 2 and os.readlink("/proc/%d/fd/%s" % (zygote, fd)).startswith("socket:")]
    assert sockets, "the zygote holds its socket"
    for fd in sockets:
        with open("/proc/%d/fdinfo/%s" % (zygote, fd)) as f:
            flags = int(re.search(r"^flags:\s+(\d+)", f.read(), re.M).group(1), 8)
        assert flags & os.O_CLOEXEC, "fd %s of the zygote is inherited across exec (flags 0%o)" % (fd, flags)
    assert [m["zygote_fd_env"] for m in probes(app)] == [[False, False]] * 2


def a_long_job(master, app):
    """A one-process pool running a 60 s job on a forked handler: (handler, worker)."""
    master.write_config(pool(app, 1, extra="timeout = 100;"))
    master.start()
    app.dispatch("SleepJob", 60000, tag="long")
    wait_for(lambda: [m for m in app.read_markers() if m.get("tag") == "long"], 30, what="the long job")
    handler = [m for m in app.read_markers() if m.get("tag") == "long"][0]["pid"]
    assert handler in forked_pids(master)
    return handler, master.child_pids("app")[0]


def kill_worker_with_master_frozen(master, worker, handler, what):
    """SIGKILL worker while the master is frozen (so it cannot kill the
    dead worker's handler itself) and wait for handler to end by itself."""
    master.signal(signal.SIGSTOP)
    try:
        os.kill(worker, signal.SIGKILL)
        wait_for(lambda: not proc_alive(handler), 20, what=what)
    finally:
        master.signal(signal.SIGCONT)


def test_a_forked_handler_ends_its_job_when_its_worker_dies(master, r, laravel_app):
    """Its parent is the zygote, so no parent-death signal ties it to its
    worker: with the master frozen (it kills a dead worker's handler group),
    a SIGKILLed worker's forked handler ran its job on, past the pool's
    timeout, while retry_after would run the job again beside it."""
    handler, worker = a_long_job(master, laravel_app)
    kill_worker_with_master_frozen(master, worker, handler, "the forked handler to end with its worker")
    assert "its worker has gone (its request pipe hung up) while a job ran" in master.log()


def test_a_forked_handler_ends_a_job_blocked_in_a_restartable_call(master, r, laravel_app, tmp_path):
    """Review 2026-11-27 minor 2: the SIGIO that ties a forked handler to its
    worker was installed with SA_RESTART, so a job blocked in a call the
    kernel restarts (flock() here; a database socket's read in real life)
    never gave PHP control back, and ran on after its worker died while the
    master could not kill it (frozen here)."""
    import fcntl
    lock = str(tmp_path / "held.lock")
    with open(lock, "w") as held:
        os.chmod(lock, 0o666)
        fcntl.flock(held, fcntl.LOCK_EX)
        master.write_config(pool(laravel_app, 1, extra="timeout = 100;"))
        master.start()
        laravel_app.dispatch("LockWaitJob", lock, tag="lockwait")
        wait_for(lambda: [m for m in laravel_app.read_markers() if m.get("tag") == "lockwait"], 30, what="the job")
        handler = [m for m in laravel_app.read_markers() if m.get("tag") == "lockwait"][0]["pid"]
        assert handler in forked_pids(master)
        worker = master.child_pids("app")[0]
        kill_worker_with_master_frozen(master, worker, handler, "the forked handler blocked in flock() to end")
    assert not [m for m in laravel_app.read_markers() if m.get("phase") == "after-lock"]


def test_the_master_kills_the_forked_handler_of_a_dead_worker(master, r, laravel_app):
    """The worker publishes its forked handler's start time, and the master
    kills that group only if its leader is that very process: the real one
    still is (SIGSTOPped here, so that it cannot end itself)."""
    handler, worker = a_long_job(master, laravel_app)
    os.kill(handler, signal.SIGSTOP)
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: not proc_alive(handler), 20, what="the master to kill the dead worker's handler")
    assert "not killing process group" not in master.log()
