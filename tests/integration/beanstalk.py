"""A real beanstalkd for the tests (Debian's `beanstalkd` package): one
server per test on a quiet port of its own, with its binlog in the test's
directory when asked (a restart keeps the jobs), stopped at teardown; and a
few lines of its text protocol to read a tube's stats (`stats-tube`)."""
import shutil
import socket
import subprocess

import pytest

from conftest import quiet_port, wait_for


class Beanstalkd:
    def __init__(self, tmp, binlog=False):
        self.dir = tmp / "beanstalkd"
        self.dir.mkdir(exist_ok=True)
        self.port = quiet_port()
        self.binlog = binlog
        self.proc = None
        self.start()

    def start(self):
        argv = ["beanstalkd", "-l", "127.0.0.1", "-p", str(self.port)]
        if self.binlog:
            argv += ["-b", str(self.dir)]
        with open(str(self.dir / "log"), "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        wait_for(self._answers, 10, what="beanstalkd to answer")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def _answers(self):
        try:
            return self.command(b"stats") is not None
        except OSError:
            return False

    def command(self, line):
        """One command; the reply's YAML body for an OK, else None."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(line + b"\r\n")
            f = s.makefile("rb")
            head = f.readline().split()
            if not head or head[0] != b"OK":
                return None
            return f.read(int(head[1]) + 2)[:-2].decode()

    def reserve(self, tube="default"):
        """Reserve one ready job of the tube on a connection of its own, which
        holds it (reserved) until it is closed: the socket, or None when the
        tube had no ready job."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.sendall(b"watch " + tube.encode() + b"\r\nreserve-with-timeout 0\r\n")
        f = s.makefile("rb")
        f.readline()  # WATCHING n
        if not f.readline().startswith(b"RESERVED "):
            s.close()
            return None
        return s

    def stats_tube(self, tube="default"):
        """The tube's stats as a dict of ints (str where not a number), or {}
        when the tube does not exist (beanstalkd drops an unused empty tube)."""
        body = self.command(b"stats-tube " + tube.encode())
        out = {}
        for line in (body or "").splitlines()[1:]:
            key, _, value = line.partition(":")
            value = value.strip()
            out[key.strip()] = int(value) if value.isdigit() else value
        return out

    def counts(self, tube="default"):
        """(ready, delayed, reserved, buried) in the tube."""
        st = self.stats_tube(tube)
        return tuple(st.get("current-jobs-" + k, 0) for k in ("ready", "delayed", "reserved", "buried"))


@pytest.fixture
def beanstalkd(tmp_path):
    if not shutil.which("beanstalkd"):
        pytest.fail("beanstalkd is not installed (scripts/deps installs Debian's beanstalkd)")
    srv = Beanstalkd(tmp_path)
    yield srv
    srv.stop()
