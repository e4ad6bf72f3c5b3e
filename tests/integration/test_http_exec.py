"""The HTTP process is a fresh image: the master forks, sets the child up and
execs its own binary (by the descriptor it opened at its start) as `qpool
__http`, with a minimal environment and its settings on a sealed memfd. It
holds nothing of the master's memory, switches to http.user only after the
exec (so that it stays non-dumpable), runs the master's program even after
the file was replaced, and refuses to run by hand."""
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess

import pytest

from conftest import QPOOL, children_of, cmdline, free_port, wait_for
from test_http import code, http_conf, http_pid, memory_holds, pool

# What of the master's environment the HTTP process may get (src/http.c).
KEPT_ENV = {"PATH", "JOURNAL_STREAM", "SSL_CERT_FILE", "SSL_CERT_DIR", "OPENSSL_CONF",
            "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}


def same_file(a, b):
    sa, sb = os.stat(a), os.stat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def environ_names(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        # the process title may have overwritten part of the area: keep NAME=value entries
        return {e.split(b"=", 1)[0].decode(errors="replace") for e in f.read().split(b"\0") if b"=" in e}


def as_nobody(args):
    nobody = pwd.getpwnam("nobody")

    def drop():
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
    return subprocess.run(args, preexec_fn=drop, capture_output=True, text=True, timeout=30)


def test_the_http_process_is_a_fresh_image_of_the_masters_binary(master, r, tmp_path):
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port))
    master.start(env={"QPOOL_TEST_MASTER_ONLY": "marker-of-the-masters-environment"})
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    pid = http_pid(master)
    assert same_file("/proc/%d/exe" % pid, "/proc/%d/exe" % master.proc.pid)
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        assert f.read().startswith(b"qpool: http [127.0.0.1:%d]" % port)
    # its environment: a few names, nothing else of the master's (what the
    # process title left of the area; as root, the whole memory below)
    names = environ_names(pid)
    assert "QPOOL_TEST_MASTER_ONLY" not in names and names <= KEPT_ENV, names
    # its descriptors: stdio, the listener, the channel, then its own
    # (epoll, Redis); the settings' memfd and the binary are closed
    fds = sorted(int(f) for f in os.listdir("/proc/%d/fd" % pid))
    assert fds[:5] == [0, 1, 2, 3, 4]
    for fd in fds[5:]:
        target = os.readlink("/proc/%d/fd/%d" % (pid, fd))
        assert "memfd:" not in target and not target.startswith("/"), (fd, target)
    if os.geteuid() != 0:
        return
    assert memory_holds(pid, {b"marker-of-the-masters-environment"}) == set()
    with open("/proc/%d/status" % pid) as f:
        uids = next(l for l in f if l.startswith("Uid:")).split()[1:]
    assert set(uids) == {str(pwd.getpwnam("nobody").pw_uid)}
    # the user was switched after the exec: not dumpable, so no other
    # process of that user reads its memory or environment
    probe = ("import sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'rb').close()\n"
             "        print('opened', p)\n    except PermissionError:\n        pass\n")
    res = as_nobody(["/usr/bin/python3", "-c", probe, "/proc/%d/mem" % pid, "/proc/%d/environ" % pid])
    assert res.returncode == 0 and res.stdout == "", (res.stdout, res.stderr)


def start_from(master, binary):
    """Run the master from another copy of the binary (as test_valgrind does)."""
    master.logf = open(master.log_path, "ab")
    master.proc = subprocess.Popen([str(binary), "run", "-c", str(master.conf)], stdout=master.logf,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    master.sid = master.proc.pid
    wait_for(lambda: master.listening() or master.proc.poll() is not None, 10, what="the master to start")
    assert master.proc.poll() is None, master.log()


def test_a_replaced_binary_does_not_change_the_http_process(master, r, tmp_path):
    """A package upgrade replaces the file under a running master: the HTTP
    processes it starts after that still run its own program."""
    port = free_port()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(bindir, 0o755)
    binary = bindir / "qpool"
    shutil.copy2(QPOOL, binary)
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port))
    start_from(master, binary)
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    first = http_pid(master)
    # as dpkg does: the new file renamed over the old one
    fake = bindir / "qpool.new"
    fake.write_text("#!/bin/sh\necho the replaced file ran >&2\nexit 3\n")
    os.chmod(fake, 0o755)
    os.rename(fake, binary)
    os.kill(first, signal.SIGKILL)
    master.wait_log(r"http: the HTTP process \(pid %d\) .*restarting it in 1 s" % first)
    wait_for(lambda: code(port, "/healthz") == 200 and http_pid(master) not in (None, first), 10,
             what="a new HTTP process")
    second = http_pid(master)
    assert os.readlink("/proc/%d/exe" % second).endswith(" (deleted)")
    assert same_file("/proc/%d/exe" % second, "/proc/%d/exe" % master.proc.pid)
    master.signal(signal.SIGHUP)  # and after a reload
    wait_for(lambda: http_pid(master) not in (None, second) and code(port, "/healthz") == 200, 10,
             what="the HTTP process after the reload")
    assert same_file("/proc/%d/exe" % http_pid(master), "/proc/%d/exe" % master.proc.pid)
    assert "the replaced file ran" not in master.log()


# Places descriptors (FROM:TO ...) and execs qpool __http with the rest of argv.
PLACE = ("import fcntl, os, sys\n"
         "pairs = [tuple(int(x) for x in a.split(':')) for a in sys.argv[1].split(',') if a]\n"
         "high = [(fcntl.fcntl(f, fcntl.F_DUPFD_CLOEXEC, 100), t) for f, t in pairs]\n"
         "for f, t in high:\n    os.dup2(f, t)\n"
         "for f, _ in high:\n    os.close(f)\n"
         "os.execv(sys.argv[2], sys.argv[2:])\n")


def run_http(fds=None, args=()):
    """`qpool __http` with fds (target -> socket or descriptor) as its descriptors."""
    src = {to: (f if isinstance(f, int) else f.fileno()) for to, f in (fds or {}).items()}
    spec = ",".join("%d:%d" % (f, to) for to, f in src.items())
    return subprocess.run(["/usr/bin/python3", "-c", PLACE, spec, QPOOL, "__http"] + list(args),
                          pass_fds=sorted(set(src.values())), capture_output=True, text=True, timeout=30)


def test_it_is_not_a_command_to_run_by_hand(tmp_path):
    helped = subprocess.run([QPOOL, "help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "__http" not in helped.stdout
    res = run_http()
    assert res.returncode == 64
    assert "qpool __http is qpool's HTTP process, which `qpool run` starts" in res.stderr
    assert "descriptor 3 is not a listening stream socket" in res.stderr
    assert "takes no argument" in run_http(args=["x"]).stderr
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    ours, theirs = socket.socketpair()
    rd, wr = os.pipe()
    try:
        res = run_http({3: listener, 4: theirs, 5: rd})
        assert res.returncode == 64 and "descriptor 5 is not a sealed memfd" in res.stderr, res.stderr
        res = run_http({3: listener, 4: listener, 5: rd})
        assert "descriptor 4 is not a connected Unix stream socket" in res.stderr, res.stderr
        # sealed, but not its settings: refused, naming what is wrong
        for text, why in ((b"{not json", "not JSON"), (b'{"version":1,"parent":1}', "log_level: missing"),
                          (b'{"version":7}', "version: 1 expected")):
            mfd = os.memfd_create("settings", os.MFD_ALLOW_SEALING)
            os.write(mfd, text)
            fcntl.fcntl(mfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                        | fcntl.F_SEAL_WRITE)
            res = run_http({3: listener, 4: theirs, 5: mfd})
            os.close(mfd)
            assert res.returncode == 1 and "its settings (descriptor 5): " + why in res.stderr, res.stderr
    finally:
        for s in (listener, ours, theirs):
            s.close()
        os.close(rd)
        os.close(wr)


@pytest.mark.skipif(os.geteuid() != 0, reason="a root master")
def test_settings_that_name_no_user_are_refused_as_root(tmp_path):
    """A root master always names http.user: as root, the process refuses
    settings without one rather than serve as root."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    ours, theirs = socket.socketpair()
    text = (b'{"version":1,"parent":%d,"log_level":2,"log_format":0,"queues":[],"metrics_retention":3600,'
            b'"job_history_size":0,"http":{"listen":"127.0.0.1:1","unix":false,"loopback":true,"host":"127.0.0.1",'
            b'"port":1,"timeout":30,"header_timeout":5,"max_connections":8,"read_without_token":1,"owner_uid":0},'
            b'"redis":{"name":"default","host":"127.0.0.1","port":6379,"db":0,"timeout":1}}' % os.getpid())
    mfd = os.memfd_create("settings", os.MFD_ALLOW_SEALING)
    os.write(mfd, text)
    fcntl.fcntl(mfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                | fcntl.F_SEAL_WRITE)
    try:
        res = run_http({3: listener, 4: theirs, 5: mfd})
        assert res.returncode == 1 and "refusing to serve HTTP as root" in res.stderr, res.stderr
    finally:
        os.close(mfd)
        for s in (listener, ours, theirs):
            s.close()


def test_it_dies_with_the_master(master, r, tmp_path):
    """The death signal survives the exec and the user switch: a master
    killed outright leaves no HTTP process behind."""
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port))
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
    pid = http_pid(master)
    os.kill(master.proc.pid, signal.SIGKILL)
    master.proc.wait(5)
    wait_for(lambda: not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split(") ")[1][0] == "Z",
             10, what="the HTTP process to exit")


def test_a_token_env_over_the_limit_is_refused_not_a_crash_loop(master, r, tmp_path):
    """A token_env value over 4096 bytes is refused with a clear error, as a
    token_file of that size is; before, the master passed it and the HTTP
    process refused its settings, exited, and was restarted forever."""
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN";'))
    master.start(env={"QPOOL_TEST_TOKEN": "t" * 5000})
    master.wait_log(r"QPOOL_TEST_TOKEN is longer than 4096 bytes")
    assert code(port, "/healthz") is None  # off, said so
    assert "its settings" not in master.log() and "restarting it" not in master.log(), master.log()


def test_no_child_has_the_masters_controlling_terminal(master, r, tmp_path):
    """A master started from a terminal (a root shell) must not lend it to the
    unprivileged HTTP process, its workers or their handlers, which could push
    keystrokes into it (TIOCSTI): the HTTP process has a session of its own,
    the others give the terminal up (they keep it as stdio, the log)."""
    import pty
    port = free_port()
    master.write_config(pool(tmp_path / "fixture.log"), qpool=http_conf(port))
    pid_out = tmp_path / "http.pid"
    mfd, sfd = pty.openpty()
    try:
        # the master in a new session whose controlling terminal is the pty
        script = ("import os, fcntl, termios, sys; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                  "os.execv(sys.argv[1], sys.argv[1:])")
        master.proc = subprocess.Popen(["/usr/bin/python3", "-c", script, QPOOL, "run", "-c", str(master.conf)],
                                       stdin=sfd, stdout=sfd, stderr=sfd)
        master.sid = master.proc.pid
        wait_for(lambda: code(port, "/healthz") == 200, 10, what="the HTTP endpoint")
        pid = http_pid(master)
        stat = lambda p: open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()  # noqa: E731
        assert int(stat(master.proc.pid)[4]) != 0, "the master has the pty as its terminal"
        assert int(stat(pid)[4]) == 0, "tty_nr of the HTTP process: %s" % stat(pid)[4]
        assert int(stat(pid)[3]) == pid  # its own session
        # nor do the workers and their handlers get it (they keep the master's session)
        workers = [w for w in children_of(master.proc.pid) if w != pid]
        wait_for(lambda: all(children_of(w) for w in workers), 10, what="the handlers")
        for p in workers + [h for w in workers for h in children_of(w)]:
            assert int(stat(p)[4]) == 0, "tty_nr of %d (%s): %s" % (p, cmdline(p), stat(p)[4])
        pid_out.write_text(str(pid))
    finally:
        master.proc.terminate()
        master.proc.wait(10)
        os.close(mfd)
        os.close(sfd)
