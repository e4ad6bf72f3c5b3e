"""An app_driver pool whose Redis stops answering (review of mtfix, MUST 1
and 2). Its workers pop through the app's driver (here `database` on
SQLite) and touch Redis only to read the watched tags' set: a Redis that
takes connections but never answers (a SIGSTOPped redis-server) must not
hold each pop for the connection's timeout, and the master's exit, which
forwards the watched records it still holds, must keep systemd's watchdog
fed while it waits on that Redis. The app itself keeps its own, live Redis.
No timing is asserted: counts within generous waits, and the order of the
notifications on the test's own NOTIFY_SOCKET."""
import signal

import pytest

from conftest import HOST_LARAVEL, PREFIX, NotifySocket, RedisServer, wait_for
from laravel_roots import laravel_version, version_app  # noqa: F401 (fixtures)
from test_app_driver import dispatch, jobs_left, pool, use_database_queue

HOST = [str(HOST_LARAVEL)]   # the host's Laravel: no chroot needed


def redis_conf(port, timeout):
    return ('default = { host = "127.0.0.1"; port = %d; db = 0; prefix = "%s"; timeout = %g; };\n'
            '  cache = { host = "127.0.0.1"; port = %d; db = 1; prefix = "%s"; timeout = %g; };'
            % (port, PREFIX, timeout, port, PREFIX, timeout))


class Stalled:
    """qpool's own redis-server, stopped (SIGSTOP) while `with`: the kernel
    still takes connections, nothing answers."""

    def __init__(self, tmp):
        tmp.mkdir()
        self.srv = RedisServer(tmp)

    def __enter__(self):
        self.srv.proc.send_signal(signal.SIGSTOP)
        return self

    def __exit__(self, *exc):
        self.srv.proc.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("laravel_version", HOST, indirect=True)
def test_a_redis_that_never_answers_does_not_hold_the_pops(master_factory, redis_server, version_app, tmp_path):
    """MUST 1: each app_driver worker read the watched set before its pops
    with the connection's own timeout (here 30 s): a stalled Redis held a
    pop that long at every read, a second's jobs every 30 s. Now it waits
    0.5 s at most, then at least a second (or the reconnect's backoff): the
    40 jobs of 0.25 s run within 90 s (about 12 s; without the fix 5 did)."""
    app = version_app
    use_database_queue(app)
    qredis = Stalled(tmp_path / "qredis")
    m = master_factory(redis_server)
    m.write_config(pool(app), redis_conf=redis_conf(qredis.srv.port, 30))
    try:
        m.start()
        wait_for(lambda: any(w.get("state") == "idle" for w in m.pool("appq")["children"]), 60,
                 what="the worker to be idle")
        with qredis:
            # 40 jobs of 0.25 s: the pops span 10 s, the watched set's reads
            # every second (each of them held 30 s without the fix)
            app.artisan("fixture:dispatch", "SleepJob", "--connection=database", "--count=40", "--arg=250",
                        "--tag=s")
            wait_for(lambda: not jobs_left(app), 90, interval=0.5, what="40 jobs to run with qpool's Redis stalled")
            runs = [x for x in app.read_markers() if x.get("job") == "SleepJob"]
            assert len(runs) == 40
            assert m.stop(60) == 0
    finally:
        qredis.srv.stop()


@pytest.mark.parametrize("laravel_version", HOST, indirect=True)
def test_the_exit_drain_feeds_the_watchdog(master_factory, redis_server, version_app, tmp_path):
    """MUST 2: at exit the master forwards the watched records it still
    holds; it waited on Redis there without a WATCHDOG=1 (WatchdogSec=60
    against a drain of up to shutdown_timeout). Here the watchdog's interval
    is 0.2 s; the records wait for the next pass (balance_interval = 60),
    Redis stalls as the master stops, and the drain's first batch waits its
    0.5 s timeout on the master's live connection: a WATCHDOG=1 follows the
    drain's STATUS line (none without the fix), and the records left are
    logged as dropped."""
    app = version_app
    use_database_queue(app)
    qredis = Stalled(tmp_path / "qredis")
    notify = NotifySocket()
    m = master_factory(redis_server)
    m.write_config(pool(app), qpool="  balance_interval = 60;", redis_conf=redis_conf(qredis.srv.port, 5))
    try:
        m.start(env=notify.env(200000))
        assert "watching" in m.cli("monitor", "add", "7").stdout   # every TaggedJob has the tag 7
        m.wait_log(r"watched tags now: 1 ", timeout=60)
        dispatch(app, "TaggedJob", count=10, tag="d")
        wait_for(lambda: not jobs_left(app), 120, interval=0.5, what="the database queue to drain")
        wait_for(lambda: m.pool("appq")["jobs_done"] >= 10, 60, what="the master to count the 10 jobs")
        with qredis:
            assert m.stop(60) == 0
        got = notify.got()
        drain = [i for i, x in enumerate(got) if x.startswith("STATUS=exiting: writing ")]
        assert drain, got[-5:]
        assert "WATCHDOG=1" in got[drain[0]:], got[drain[0]:]
        assert m.count_log(r"pool appq: \d+ records of watched tags dropped at exit \(Redis unreachable\)") == 1
    finally:
        notify.close()
        qredis.srv.stop()


@pytest.mark.parametrize("laravel_version", HOST, indirect=True)
def test_a_replica_refusing_the_watched_records_is_logged_at_1_2_4(master_factory, redis_server, version_app,
                                                                  tmp_path):
    """SHOULD 4: Redis answering an error that passes (here READONLY: qpool's
    connection aimed at a replica) was logged every pass for every pool as
    long as it lasted. Now at its 1st, 2nd, 4th, ... pass in a row, and once
    it ends (the replica promoted), when the records are written."""
    app = version_app
    use_database_queue(app)
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary, replica = RedisServer(tmp_path / "p"), RedisServer(tmp_path / "r")
    key = PREFIX + "qpool:{qpool-jobs}:"
    try:
        rr = replica.client()
        rr.execute_command("REPLICAOF", "127.0.0.1", str(primary.port))
        primary.client().sadd(key + "monitored", "7")   # every TaggedJob has the tag 7
        wait_for(lambda: rr.smembers(key + "monitored") == {b"7"}, 30, what="the replica to hold the watched set")
        m = master_factory(redis_server)
        m.write_config(pool(app), qpool="  balance_interval = 0.1;", redis_conf=redis_conf(replica.port, 5))
        m.start()
        m.wait_log(r"watched tags now: 1 ", timeout=60)
        dispatch(app, "TaggedJob", count=5, tag="r")
        m.wait_log(r"pool appq: Redis cannot take the watched tags' records now \(READONLY[^\n]*; 16 passes in a row\)",
                   timeout=60)
        assert m.count_log(r"Redis cannot take the watched tags' records now") <= 6   # 1, 2, 4, 8, 16 (32)
        rr.execute_command("REPLICAOF", "NO", "ONE")
        m.wait_log(r"pool appq: Redis takes the watched tags' records again \(after \d+ passes\)", timeout=30)
        wait_for(lambda: len(rr.lrange(key + "tag:7", 0, -1)) == 5, 30, what="the 5 records in the tag's list")
        assert m.stop(60) == 0
    finally:
        replica.stop()
        primary.stop()
