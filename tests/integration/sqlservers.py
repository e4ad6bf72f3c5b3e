"""Real MariaDB and PostgreSQL servers for the tests (issue 30: the
`database` queue driver on MySQL/MariaDB and PostgreSQL).

Each server is Debian's own (mariadb-server; postgresql, any major
version under /usr/lib/postgresql) started from a fresh data directory on a
free TCP port of 127.0.0.1, with a `laravel` database and a `laravel` user
(password `secret`) that owns it, and settings for speed, not durability:
no fsync, but every commit is written to the OS, so a killed server loses
no committed row. restart() stops (or kills) the server and starts it again
on the same data and port (the chaos test's database outage); stop() ends
every process of it (each server runs in its own session, and its whole
process group is killed if it does not stop in time).

MariaDB runs as root (mariadbd --user=root). PostgreSQL refuses root, so
it runs as the `postgres` user (or `nobody`), in a directory that user owns:
the test's tmp dir is not reachable by another user (pytest's base temp is
0700), so that directory is made under /tmp and removed by stop().

The start/stop logic needs no pytest (bench/run.py imports it):

    srv = start_server("mariadb", pathlib.Path(tmp))   # or "postgres"
    srv.laravel_env()   # DB_CONNECTION, DB_HOST, DB_PORT, DB_DATABASE, ...
    srv.query("select count(*) as n from jobs")  # [{'n': 0}] (through PHP's PDO)
    srv.restart(); srv.stop()

The pytest fixtures `mariadb_server` and `postgres_server` skip (with the
reason) only where the server's binaries are missing and CI is not set; in
CI a missing server fails the test (scripts/deps installs both).
"""
import glob
import json
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from ports import port_free, quiet_port

DATABASE = "laravel"
USER = "laravel"
PASSWORD = "secret"


class ServerMissing(RuntimeError):
    """The server's binaries are not installed."""


def _wait(pred, timeout, what, proc=None, log=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = ""
    if log is not None and pathlib.Path(log).exists():
        tail = pathlib.Path(log).read_text(errors="replace")[-3000:]
    raise RuntimeError("%s did not come up (%s)\n%s" % (what, "exited %s" % proc.returncode
                                                        if proc is not None and proc.poll() is not None
                                                        else "timeout", tail))


def _kill_group(proc, sig, timeout):
    """Send sig to the server's process group; wait for its leader; True if it ended."""
    if proc is None or proc.poll() is not None:
        return True
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return True
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


def _group_gone(pgid, timeout):
    """Wait until no process of the group is left (a server's children)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return False


class SqlServer:
    """Common part: a server process in its own session on self.port."""

    kind = None            # "mariadb" / "postgres"
    connection = None      # Laravel's DB_CONNECTION for it
    stop_signal = signal.SIGTERM

    def __init__(self, tmp):
        self.tmp = pathlib.Path(tmp)
        self.port = quiet_port(reuse=True)
        self.proc = None

    # -- lifecycle
    def start(self):
        self.proc = self._spawn()
        _wait(self._ready, 60, "%s on port %d" % (self.kind, self.port), self.proc, self.log)
        return self

    def stop(self, kill=False):
        """Stop the server (kill: SIGKILL, a crash) and wait until every
        process of it is gone. Idempotent."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if kill or not _kill_group(self.proc, self.stop_signal, 30):
            _kill_group(self.proc, signal.SIGKILL, 10)
        _group_gone(pgid, 10)
        self.proc = None

    def restart(self, kill=False, down=0.0):
        """Stop (or kill) the server and start it again on the same data and
        port, after down seconds without it."""
        self.stop(kill=kill)
        time.sleep(down)
        deadline = time.monotonic() + 30
        while not port_free(self.port, reuse=True) and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.start()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # -- clients
    def laravel_env(self):
        """The environment that points a Laravel app's default connection here."""
        return {"DB_CONNECTION": self.connection, "DB_HOST": "127.0.0.1", "DB_PORT": str(self.port),
                "DB_DATABASE": DATABASE, "DB_USERNAME": USER, "DB_PASSWORD": PASSWORD}

    def dsn(self):
        return "%s:host=127.0.0.1;port=%d;dbname=%s" % ({"mariadb": "mysql", "postgres": "pgsql"}[self.kind],
                                                        self.port, DATABASE)

    def query(self, sql, timeout=60):
        """Rows of sql (a list of dicts), through the host's PHP PDO as the
        `laravel` user; a statement without rows gives []."""
        code = ("$p = new PDO($argv[1], $argv[2], $argv[3], [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);"
                "$s = $p->query($argv[4]); $r = $s->columnCount() ? $s->fetchAll(PDO::FETCH_ASSOC) : [];"
                "echo json_encode($r);")
        res = subprocess.run(["php", "-r", code, self.dsn(), USER, PASSWORD, sql], capture_output=True,
                             text=True, timeout=timeout)
        if res.returncode != 0:
            raise RuntimeError("query on %s failed: %s %s" % (self.kind, res.stdout[-2000:], res.stderr[-2000:]))
        return json.loads(res.stdout or "[]")

    def _ready(self):
        raise NotImplementedError

    def _spawn(self):
        raise NotImplementedError


def _which(*names):
    for n in names:
        p = shutil.which(n) or (("/usr/sbin/" + n) if os.path.exists("/usr/sbin/" + n) else None)
        if p:
            return p
    return None


class MariaDB(SqlServer):
    kind = "mariadb"
    connection = "mysql"
    stop_signal = signal.SIGTERM  # mariadbd closes its connections and shuts down

    def __init__(self, tmp):
        super().__init__(tmp)
        self.server = _which("mariadbd", "mysqld")
        self.install_db = _which("mariadb-install-db", "mysql_install_db")
        self.client = _which("mariadb", "mysql")
        if not (self.server and self.install_db and self.client):
            raise ServerMissing("MariaDB is not installed (mariadbd, mariadb-install-db, mariadb: "
                                "apt-get install mariadb-server)")
        self.dir = self.tmp / "mariadb"
        self.data = self.dir / "data"
        self.sock = self.dir / "sock"
        self.log = self.dir / "server.log"

    def init(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        res = subprocess.run([self.install_db, "--no-defaults", "--user=root", "--datadir=%s" % self.data,
                              "--auth-root-authentication-method=socket", "--skip-test-db",
                              "--skip-name-resolve"],
                             capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError("mariadb-install-db failed: %s %s" % (res.stdout[-2000:], res.stderr[-3000:]))
        self.start()
        self._root_sql("create database %s character set utf8mb4 collate utf8mb4_unicode_ci;"
                       "create user '%s'@'127.0.0.1' identified by '%s';"
                       "create user '%s'@'localhost' identified by '%s';"
                       "grant all on %s.* to '%s'@'127.0.0.1'; grant all on %s.* to '%s'@'localhost';"
                       % (DATABASE, USER, PASSWORD, USER, PASSWORD, DATABASE, USER, DATABASE, USER))
        return self

    def _root_sql(self, sql):
        res = subprocess.run([self.client, "--no-defaults", "--socket=%s" % self.sock, "-uroot", "-e", sql],
                             capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise RuntimeError("mariadb client failed: %s" % res.stderr[-2000:])

    def _spawn(self):
        argv = [self.server, "--no-defaults", "--user=root", "--datadir=%s" % self.data,
                "--port=%d" % self.port, "--bind-address=127.0.0.1", "--socket=%s" % self.sock,
                "--pid-file=%s" % (self.dir / "mariadbd.pid"), "--log-error=%s" % self.log,
                "--skip-name-resolve", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=2",
                "--innodb-doublewrite=0", "--sync-binlog=0",
                "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M",
                "--performance-schema=0", "--max-connections=300"]
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def _ready(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        res = subprocess.run([self.client, "--no-defaults", "--socket=%s" % self.sock, "-uroot", "-e",
                              "select 1"], capture_output=True, timeout=10)
        return res.returncode == 0


def _postgres_bindir():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return pathlib.Path(found[-1]).parent
    p = shutil.which("postgres")
    return pathlib.Path(p).resolve().parent if p else None


def _unprivileged_user():
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServerMissing("no postgres or nobody user to run PostgreSQL as")


class Postgres(SqlServer):
    kind = "postgres"
    connection = "pgsql"
    stop_signal = signal.SIGINT  # fast shutdown: ends the sessions (SIGTERM would wait for them)

    def __init__(self, tmp):
        super().__init__(tmp)
        self.bindir = _postgres_bindir()
        if self.bindir is None or not (self.bindir / "initdb").exists():
            raise ServerMissing("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/postgres, initdb: "
                                "apt-get install postgresql)")
        self.user = None
        self.dir = None
        self.log = None

    def _as_user(self):
        if os.geteuid() != 0:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def init(self):
        if os.geteuid() == 0:
            self.user = _unprivileged_user()
            # pytest's tmp dirs are 0700 root: the server's own dir lives in /tmp
            self.dir = pathlib.Path(tempfile.mkdtemp(prefix="qpool-pg-"))
            os.chown(str(self.dir), self.user.pw_uid, self.user.pw_gid)
            (self.tmp / "postgres-dir").write_text(str(self.dir) + "\n")  # removed at the end; its log is kept
        else:
            self.dir = self.tmp / "postgres"
            self.dir.mkdir(parents=True, exist_ok=True)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.user:
            os.chown(str(pwfile), self.user.pw_uid, self.user.pw_gid)
        res = subprocess.run([str(self.bindir / "initdb"), "-D", str(self.data), "-U", USER, "-A", "md5",
                              "--pwfile=%s" % pwfile, "-E", "UTF8", "--locale=C", "--no-sync"],
                             capture_output=True, text=True, timeout=300, cwd=str(self.dir), **self._as_user())
        if res.returncode != 0:
            raise RuntimeError("initdb failed: %s %s" % (res.stdout[-2000:], res.stderr[-3000:]))
        self.start()
        self._psql("create database %s owner %s" % (DATABASE, USER))
        return self

    def _psql(self, sql):
        psql = self.bindir / "psql"
        if not psql.exists():
            psql = pathlib.Path(shutil.which("psql") or "psql")
        env = dict(os.environ, PGPASSWORD=PASSWORD)
        res = subprocess.run([str(psql), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", "postgres",
                              "-v", "ON_ERROR_STOP=1", "-c", sql], capture_output=True, text=True, timeout=60,
                             env=env)
        if res.returncode != 0:
            raise RuntimeError("psql failed: %s" % res.stderr[-2000:])

    def _spawn(self):
        argv = [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=%s" % self.dir,
                "-c", "fsync=off", "-c", "full_page_writes=off",
                "-c", "max_connections=200", "-c", "shared_buffers=16MB", "-c", "logging_collector=off"]
        log = open(str(self.log), "ab")
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(self.dir),
                                    start_new_session=True, **self._as_user())
        finally:
            log.close()

    def _ready(self):
        ready = self.bindir / "pg_isready"
        if ready.exists():
            return subprocess.run([str(ready), "-q", "-h", "127.0.0.1", "-p", str(self.port)],
                                  timeout=10).returncode == 0
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def remove(self):
        if self.dir is not None and str(self.dir).startswith(tempfile.gettempdir() + "/qpool-pg-"):
            try:  # the server's log outlives its dir, in the test's tmp, for a post-mortem of a failure
                shutil.copyfile(str(self.log), str(self.tmp / "postgres-server.log"))
            except OSError:
                pass
            shutil.rmtree(str(self.dir), ignore_errors=True)


KINDS = {"mariadb": MariaDB, "postgres": Postgres}


def start_server(kind, tmp):
    """Initialise and start a server of kind ("mariadb" or "postgres") in
    tmp; raises ServerMissing when its binaries are not installed."""
    srv = KINDS[kind](tmp)
    try:
        return srv.init()
    except BaseException:
        stop_server(srv)
        raise


def stop_server(srv):
    srv.stop()
    if hasattr(srv, "remove"):
        srv.remove()


def server_fixture(kind, tmp_path):
    """A fixture's body: the started server, stopped after the test."""
    import pytest
    try:
        srv = start_server(kind, tmp_path)
    except ServerMissing as e:
        if os.environ.get("CI"):
            pytest.fail("%s (CI must have it: scripts/deps)" % e, pytrace=False)
        pytest.skip(str(e))
    try:
        yield srv
    finally:
        stop_server(srv)


try:
    import pytest as _pytest

    @_pytest.fixture
    def mariadb_server(tmp_path):
        yield from server_fixture("mariadb", tmp_path)

    @_pytest.fixture
    def postgres_server(tmp_path):
        yield from server_fixture("postgres", tmp_path)

    @_pytest.fixture(params=["mariadb", "postgres"])
    def sql_server(request, tmp_path):
        """Each of the two servers in turn."""
        yield from server_fixture(request.param, tmp_path)
except ImportError:  # bench/run.py without pytest
    pass
