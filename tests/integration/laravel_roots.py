"""Laravel versions for the tests: Debian's packaged Laravel of three releases
(bookworm: 8.83 on PHP 8.2; trixie: 10.48 and sid: 13.x, both on PHP 8.4).
The one of the host's own release runs on the host (8 on Debian 12, 10 on
Debian 13); the others run in Debian roots made by scripts/laravel-root with
mmdebstrap.

Roots are cached in $QPOOL_LARAVEL_ROOTS (default: laravel-roots in the build
directory) and reused when present, so one build serves every run; several
checkouts can share one cache. qpool stays on the host; artisan, queue:work
and the adapter run in the root through chroot, and reach the host's
redis-server on loopback. /proc is mounted in a root while a test module
uses it (the adapter reads /proc/self/fd) and unmounted when the last test
module using that root, in any xdist worker, is done with it.

A root that cannot be built (no network, no mmdebstrap, not root) fails the
test with the build's output: the matrix never skips silently.
"""
import fcntl
import json
import os
import pathlib
import shutil
import sqlite3
import subprocess
import time
import uuid

import pytest

from conftest import BUILD, HOST_DIST, PREFIX, ROOT, LaravelApp

ROOTS = pathlib.Path(os.environ.get("QPOOL_LARAVEL_ROOTS") or BUILD / "laravel-roots")
CHROOT = "/usr/sbin/chroot"

# version -> (Debian release it comes from, fixture app)
RELEASES = {
    "8": ("bookworm", "laravel-app"),
    "10": ("trixie", "laravel-app-10"),
    "13": ("sid", "laravel-app-13"),
}
# version -> (Debian dist of its root, or None for the host; fixture app)
VERSIONS = {v: (None if dist == HOST_DIST else dist, app) for v, (dist, app) in RELEASES.items()}

BUILD_TIMES = {}  # dist -> seconds scripts/laravel-root took in this session


def build_root(dist):
    """scripts/laravel-root DIST: reuse the cached root or build it; fail loudly."""
    dest = ROOTS / dist
    if os.geteuid() != 0:
        pytest.fail("the Laravel %s root needs root (mmdebstrap, chroot); run the tests as root" % dist,
                    pytrace=False)
    started = time.monotonic()
    res = subprocess.run([str(ROOT / "scripts" / "laravel-root"), dist, str(dest)], capture_output=True,
                         text=True, timeout=1800)
    BUILD_TIMES[dist] = time.monotonic() - started
    if res.returncode != 0:
        pytest.fail("scripts/laravel-root %s %s failed (exit %d): the version matrix needs it.\n%s\n%s"
                    % (dist, dest, res.returncode, res.stdout[-4000:], res.stderr[-8000:]), pytrace=False)
    return dest


class Version:
    """One Laravel version: where it runs (a root, or the host) and its app."""

    def __init__(self, name, root):
        self.name = name
        self.root = root  # pathlib.Path, or None on the host
        self.app_src = ROOT / "tests" / VERSIONS[name][1]
        self.proc_mount = None

    def mount_proc(self):
        """Mount /proc in the root, shared with every other holder of it: the
        test files of one root run side by side in xdist workers, so the
        first holder mounts it and the last one out unmounts it."""
        if self.root is None:
            return
        target = self.root / "proc"
        self.proc_token = "%d:%s" % (os.getpid(), uuid.uuid4().hex)
        with _ProcHolders(self.root) as holders:
            if not holders.live() or subprocess.run(["mountpoint", "-q", str(target)]).returncode != 0:
                self._umount_all(target)  # one a killed run left behind: never stack mounts
                subprocess.run(["mount", "-t", "proc", "proc", str(target)], check=True)
            holders.add(self.proc_token)
        self.proc_mount = target

    def umount_proc(self):
        if self.proc_mount is None:
            return
        with _ProcHolders(self.root) as holders:
            holders.remove(self.proc_token)
            if not holders.live():
                self._umount_all(self.proc_mount)
        self.proc_mount = None

    @staticmethod
    def _umount_all(target):
        """Unmount every proc mounted at target; reports, never raises (a
        teardown must not hide the test's own failure)."""
        for _ in range(8):
            if subprocess.run(["mountpoint", "-q", str(target)]).returncode != 0:
                return
            res = subprocess.run(["umount", str(target)], capture_output=True, text=True)
            if res.returncode != 0:
                print("could not unmount %s: %s" % (target, res.stderr.strip()))
                return

    def prefix(self):
        """argv prefix that runs a command in this version's world."""
        return [CHROOT, str(self.root)] if self.root else []

    def host(self, inner):
        """Host path of a path seen from inside the root."""
        return pathlib.Path(str(self.root) + str(inner)) if self.root else pathlib.Path(inner)


class _ProcHolders:
    """The holders of a root's /proc, one "pid:token" a line in a file beside
    the root, read and written under an exclusive flock. A holder whose
    process is gone (a killed worker) no longer counts."""

    def __init__(self, root):
        self.path = root.parent / (root.name + ".proc-holders")
        self.fd = None
        self.tokens = []

    def __enter__(self):
        self.fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(self.fd), "r") as f:
            self.tokens = [t for t in f.read().split() if _pid_alive(t.split(":", 1)[0])]
        return self

    def __exit__(self, *exc):
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, "".join(t + "\n" for t in self.tokens).encode())
        os.close(self.fd)  # releases the lock
        return False

    def live(self):
        return list(self.tokens)

    def add(self, token):
        self.tokens.append(token)

    def remove(self, token):
        self.tokens = [t for t in self.tokens if t != token]


def _pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


HOST_VERSIONS = [v for v, (dist, _) in VERSIONS.items() if dist is None]


def mounted_version(name):
    """For a module fixture (`yield from`): the version `name`, its root
    built if it has one and /proc mounted in it while the module runs."""
    dist = VERSIONS[name][0]
    v = Version(name, build_root(dist) if dist else None)
    v.mount_proc()
    try:
        yield v
    finally:
        v.umount_proc()


@pytest.fixture(scope="module", params=list(VERSIONS), ids=lambda v: "laravel" + v)
def laravel_version(request):
    yield from mounted_version(request.param)


@pytest.fixture(scope="module", params=["8", "13"], ids=lambda v: "laravel" + v)
def version8_13(request):
    """Laravel 8 and 13 (issue 30's two): on the host or in a Debian root."""
    yield from mounted_version(request.param)


class VersionApp(LaravelApp):
    """A copy of a version's fixture app (links followed) with its own
    storage, sqlite database and marker file, inside the version's root."""

    def __init__(self, version, redis_port, host_tmp):
        self.version = version
        if version.root:
            self.work_inner = pathlib.PurePosixPath("/tmp/qpool-test-" + uuid.uuid4().hex[:12])
            self.work = version.host(self.work_inner)
        else:
            self.work_inner = pathlib.PurePosixPath(str(host_tmp / "lv"))
            self.work = pathlib.Path(str(self.work_inner))
        self.work.mkdir(parents=True)
        subprocess.run(["cp", "-rL", str(version.app_src), str(self.work / "app")], check=True)
        subprocess.run(["cp", "-r", str(ROOT / "php"), str(self.work / "php")], check=True)
        (self.work / "data").mkdir()
        (self.work / "data" / "database.sqlite").touch()
        self.app_inner = self.work_inner / "app"
        data = self.work_inner / "data"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("REDIS_", "APP_", "DB_", "CACHE_", "QUEUE_", "LOG_", "MARKER_", "QPOOL_"))}
        env.update({
            "REDIS_HOST": "127.0.0.1", "REDIS_PORT": str(redis_port), "REDIS_PREFIX": PREFIX,
            "APP_STORAGE": str(data / "storage"), "DB_CONNECTION": "sqlite",
            "DB_DATABASE": str(data / "database.sqlite"), "MARKER_FILE": str(data / "markers.jsonl"),
            "MARKER_EVENTS": "all", "LOG_CHANNEL": "null",
        })
        super().__init__(self.work / "app", env, self.work / "data" / "database.sqlite",
                         self.work / "data" / "markers.jsonl")

    def artisan(self, *args, timeout=180, check=True):
        cmd = self.version.prefix() + ["sh", "-c", 'cd "$0" && exec php artisan "$@"', str(self.app_inner)]
        res = subprocess.run(cmd + list(args), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("artisan %s failed (%d) on Laravel %s: %s %s"
                                 % (args, res.returncode, self.version.name, res.stdout, res.stderr))
        return res

    def queue_work_argv(self):
        return self.version.prefix() + ["php", str(self.app_inner / "artisan"), "queue:work", "redis",
                                        "--queue={queues}", "--sleep=1", "--tries={tries}",
                                        "--timeout={timeout}", "--memory={memory}"]

    def adapter_argv(self):
        return self.version.prefix() + ["php", str(self.work_inner / "php" / "qpool-handler.php"),
                                        str(self.app_inner)]

    def table(self, sql):
        return sqlite_rows(self.db, sql)

    def remove(self):
        shutil.rmtree(str(self.work), ignore_errors=True)


def sqlite_rows(db, sql):
    """The rows of `sql` on the SQLite file `db`, as dicts."""
    con = sqlite3.connect(str(db))
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql)]
    finally:
        con.close()


def sqlite_exec(db, sql):
    """Runs `sql` on the SQLite file `db` and commits."""
    con = sqlite3.connect(str(db))
    try:
        con.execute(sql)
        con.commit()
    finally:
        con.close()


def argv_conf(argv):
    return "[%s]" % ", ".join(json.dumps(a) for a in argv)


def migrated_app(version, redis_port, tmp_path):
    """For a fixture (`yield from`): a VersionApp of `version`, migrated,
    removed afterwards."""
    app = VersionApp(version, redis_port, tmp_path)
    try:
        app.artisan("migrate", "--force")
        yield app
    finally:
        app.remove()


@pytest.fixture
def version_app(laravel_version, redis_server, tmp_path):
    yield from migrated_app(laravel_version, redis_server.port, tmp_path)
