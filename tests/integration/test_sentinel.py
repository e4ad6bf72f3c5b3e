"""Sentinel (issue 12 item 2): a primary, a replica and three sentinels on
loopback (Debian's redis-sentinel is redis-server in sentinel mode); qpool
finds the primary through them, and follows a `SENTINEL FAILOVER` mid-run."""
import collections
import os
import subprocess

import pytest
import redis

from conftest import (FIXTURE_HANDLER, stop_process, PREFIX, QPOOL, free_port, make_payload, push_many, queue_state,
                      read_fixture_log, wait_for)

MASTER = "mymaster"


def tls_args(pki, sentinel=False):
    """TLS only: the port is the TLS port, replication and (for a sentinel)
    monitoring over TLS too."""
    if not pki:
        return []
    a = ["--tls-cert-file", str(pki / "server.crt"), "--tls-key-file", str(pki / "server.key"),
         "--tls-ca-cert-file", str(pki / "ca.crt"), "--tls-auth-clients", "no", "--tls-replication", "yes"]
    return a


class Node:
    def __init__(self, d, args, port, pki=None):
        self.port = port
        self.pki = pki
        self.password = None  # (user, password) a sentinel requires
        d.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)

    def client(self):
        if self.pki:
            return redis.Redis(port=self.port, socket_timeout=10, ssl=True, ssl_ca_certs=str(self.pki / "ca.crt"))
        return redis.Redis(port=self.port, socket_timeout=10)

    def stop(self):
        stop_process(self.proc)


def port_args(port, pki):
    return ["--port", "0", "--tls-port", str(port)] + tls_args(pki) if pki else ["--port", str(port)]


def data_node(d, port, replicaof=None, pki=None):
    args = ["redis-server"] + port_args(port, pki) + ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                                      "--dir", str(d), "--logfile", str(d / "redis.log")]
    if replicaof:
        args += ["--replicaof", "127.0.0.1", str(replicaof)]
    return Node(d, args, port, pki)


def sentinel_node(d, port, primary_port, pki=None, extra=""):
    d.mkdir(exist_ok=True)
    conf = d / "sentinel.conf"
    conf.write_text(extra + "bind 127.0.0.1\ndir %s\nlogfile %s\n"
                    "sentinel monitor %s 127.0.0.1 %d 2\n"
                    "sentinel down-after-milliseconds %s 2000\n"
                    "sentinel failover-timeout %s 10000\n"
                    % (d, d / "sentinel.log", MASTER, primary_port, MASTER, MASTER))
    return Node(d, ["redis-server", str(conf), "--sentinel"] + port_args(port, pki), port, pki)


def ask_primary(sentinel):
    try:
        host, port = sentinel.client().execute_command("SENTINEL", "get-master-addr-by-name", MASTER)
        return int(port)
    except (redis.RedisError, OSError, TypeError, ValueError):
        return None


@pytest.fixture
def sentinel_set(tmp_path):
    yield from start_set(tmp_path)


def start_set(tmp_path, pki=None, sentinel_extra="", sentinel_cred=None):
    nodes = []
    try:
        primary = data_node(tmp_path / "primary", free_port(), pki=pki)
        nodes.append(primary)
        wait_for(lambda: _ping(primary), 10, what="the primary")
        replica = data_node(tmp_path / "replica", free_port(), replicaof=primary.port, pki=pki)
        nodes.append(replica)
        wait_for(lambda: safe(lambda: replica.client().info("replication").get("master_link_status") == "up"),
                 20, what="the replica in sync")
        sentinels = [sentinel_node(tmp_path / ("sentinel%d" % i), free_port(), primary.port, pki, sentinel_extra)
                     for i in range(3)]
        for s in sentinels:
            s.password = sentinel_cred  # (user, password) they require, for the waits below
        nodes += sentinels
        for s in sentinels:
            wait_for(lambda: _replicas_known(s), 30, what="a sentinel to know the replica")
        yield primary, replica, sentinels
    finally:
        for n in reversed(nodes):
            n.stop()


def safe(fn):
    """fn(), or False while the server is not there yet."""
    try:
        return fn()
    except (redis.RedisError, OSError):
        return False


def _ping(node):
    try:
        return node.client().ping()
    except (redis.RedisError, OSError):
        return False


def _replicas_known(s):
    try:
        c = s.client()
        if s.password:
            c = redis.Redis(port=s.port, socket_timeout=10, username=s.password[0], password=s.password[1])
        reps = c.execute_command("SENTINEL", "replicas", MASTER)
    except (redis.RedisError, OSError):
        return False
    return any(b"s_down" not in dict(zip(r[::2], r[1::2])).get(b"flags", b"") for r in reps)


def conf_for(sentinels, extra=""):
    addrs = ", ".join('"127.0.0.1:%d"' % s.port for s in sentinels)
    return ('default = { sentinels = [%s]; master_name = "%s"; db = 0; prefix = "%s"; timeout = 3; %s };\n'
            '  cache = { sentinels = [%s]; master_name = "%s"; db = 1; prefix = "%s"; timeout = 3; %s };'
            % (addrs, MASTER, PREFIX, extra, addrs, MASTER, PREFIX, extra))


def pool(log, n=3):
    return ('{ name = "w"; queues = ["default"]; processes = %d; tries = 0; retry_after = 5;'
            ' handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; }'
            % (n, FIXTURE_HANDLER, log))


def empty(r):
    s = queue_state(r, "default")
    return s["ready"] == 0 and s["reserved"] == 0 and s["delayed"] == 0


def qpool_clients(node):
    """Connections to node that are neither sentinels nor replicas nor ours."""
    c = node.client()
    me = str(c.client_id())
    return [x for x in c.client_list() if x["id"] != me and not x.get("name", "").startswith("sentinel-")
            and "S" not in x["flags"] and "M" not in x["flags"]]


def test_check_connect_finds_the_primary_through_sentinel(sentinel_set, tmp_path):
    primary, _, sentinels = sentinel_set
    conf = tmp_path / "q.conf"
    dead = free_port()  # a sentinel that is down is skipped
    addrs = '"127.0.0.1:%d", ' % dead + ", ".join('"127.0.0.1:%d"' % s.port for s in sentinels)
    conf.write_text('redis = { default = { sentinels = [%s]; master_name = "%s"; };\n'
                    '  other = { sentinels = [%s]; master_name = "nosuchmaster"; timeout = 2; }; };\n'
                    'pools = ( { name = "w"; queues = ["default"]; handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                    % (addrs, MASTER, addrs))
    res = subprocess.run([QPOOL, "check", "--connect", "-q", "-c", str(conf)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "redis default (%s at 127.0.0.1:%d via Sentinel): ok" % (MASTER, primary.port) in res.stdout, res.stdout
    assert "redis other (nosuchmaster via Sentinel): FAILED: no sentinel named the primary of nosuchmaster" \
        in res.stdout, res.stdout


def test_sentinels_and_master_name_go_together(tmp_path):
    conf = tmp_path / "q.conf"
    conf.write_text('redis = {\n  default = { sentinels = ["127.0.0.1:26379", "h:0"]; };\n};\n'
                    'pools = ( { name = "w"; queues = ["default"]; handler = { type = "exec"; command = ["/bin/true"]; }; } );\n')
    res = subprocess.run([QPOOL, "check", "-q", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78
    assert '%s:2: sentinels[1]: "h:0": expected host:port' % conf in res.stderr, res.stderr
    assert "sentinels and master_name go together" in res.stderr, res.stderr


def test_workers_follow_a_failover_and_no_job_is_lost(sentinel_set, master_factory, tmp_path):
    primary, replica, sentinels = sentinel_set
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log), redis_conf=conf_for(sentinels))
    first = [make_payload("sleep:50") for _ in range(200)]
    push_many(primary.client(), "default", first)
    wait_for(lambda: replica.client().llen(PREFIX + "queues:default") >= 1, 10, what="replicated")
    m.start()
    m.wait_log(r"Sentinel 127\.0\.0\.1:\d+ names 127\.0\.0\.1:%d as the primary of %s" % (primary.port, MASTER))
    wait_for(lambda: len(read_fixture_log(log)) >= 30, 60, what="jobs running on the first primary")
    wait_for(lambda: safe(lambda: len(qpool_clients(primary)) >= 3), 30, what="qpool on the first primary")

    def failover():
        try:
            return sentinels[0].client().execute_command("SENTINEL", "FAILOVER", MASTER)
        except redis.ResponseError as e:  # NOGOODSLAVE while a sentinel's view is stale
            return None if "NOGOODSLAVE" in str(e) or "INPROG" in str(e) else pytest.fail(str(e))
    wait_for(failover, 30, interval=0.5, what="SENTINEL FAILOVER accepted")
    for s in sentinels:
        wait_for(lambda: ask_primary(s) == replica.port, 60, interval=0.2, what="the sentinels to name the replica")
    wait_for(lambda: safe(lambda: replica.client().execute_command("ROLE")[0] == b"master"), 30,
             what="the replica promoted")

    # workers move to the new primary...
    m.wait_log(r"names 127\.0\.0\.1:%d as the primary of %s" % (replica.port, MASTER), 60)
    wait_for(lambda: safe(lambda: len(qpool_clients(replica)) >= 3), 60, what="qpool's connections on the new primary")
    # ...and jobs pushed there keep flowing
    second = [make_payload("ok") for _ in range(100)]
    push_many(replica.client(), "default", second)
    new = replica.client()
    wait_for(lambda: empty(new), 180, interval=0.3, what="every job done on the new primary")
    ran = collections.Counter(l[1] for l in read_fixture_log(log) if l[0] == "job")
    want = {p["id"] for p in first + second}
    assert want <= set(ran), "lost: %d jobs" % len(want - set(ran))
    # A job can run twice only because of the failover: its pop or ack on the
    # old primary was not replicated before the promotion.
    dupes = [k for k, n in ran.items() if n > 1]
    assert all(k in {p["id"] for p in first} for k in dupes)
    assert m.proc.poll() is None
    assert m.pool("w")["crashes"] == 0


def test_sentinel_and_primary_over_tls(tmp_path, master_factory):
    """Every node TLS-only: qpool reaches the sentinels and the primary with the
    same tls block, and runs jobs."""
    from test_redis_tls import make_pki
    pki = make_pki(tmp_path / "pki")
    gen = start_set(tmp_path, pki)
    primary, replica, sentinels = next(gen)
    try:
        log = tmp_path / "fixture.log"
        m = master_factory()
        m.write_config(pool(log, 2), redis_conf=conf_for(sentinels, 'tls = { ca_file = "%s"; };' % (pki / "ca.crt")))
        res = subprocess.run([QPOOL, "check", "--connect", "-q", "-c", str(m.conf)], capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "redis default (%s at 127.0.0.1:%d via Sentinel): ok (TLS, no ACL user)" % (MASTER, primary.port) \
            in res.stdout, res.stdout
        m.start()
        jobs = [make_payload("ok") for _ in range(20)]
        push_many(primary.client(), "default", jobs)
        wait_for(lambda: empty(primary.client()) and len(read_fixture_log(log)) >= 20, 30, what="20 jobs")
        assert {l[1] for l in read_fixture_log(log) if l[0] == "job"} == {p["id"] for p in jobs}
        m.stop()
        # the wrong CA: the sentinels cannot be asked, and check says why
        m.write_config(pool(log, 2), redis_conf=conf_for(sentinels, 'tls = { ca_file = "%s"; };' % (pki / "wrong.crt")))
        res = subprocess.run([QPOOL, "check", "--connect", "-q", "-c", str(m.conf)], capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 1
        assert "no sentinel named the primary of %s" % MASTER in res.stdout and \
            "certificate verify failed" in res.stdout, res.stdout
    finally:
        gen.close()


def test_sentinels_that_require_an_acl_user(tmp_path):
    """sentinel_username and sentinel_password_file authenticate to the
    sentinels; without them the lookup fails with the sentinels' NOAUTH."""
    pw = "sentinel-pw-" + os.urandom(6).hex()
    extra = "user default off\nuser qs on >%s ~* &* +@all\n" % pw
    gen = start_set(tmp_path, sentinel_extra=extra, sentinel_cred=("qs", pw))
    primary, _, sentinels = next(gen)
    try:
        pwfile = tmp_path / "sentinel.password"
        pwfile.write_text(pw + "\n")
        os.chmod(pwfile, 0o600)
        addrs = ", ".join('"127.0.0.1:%d"' % s.port for s in sentinels)
        conf = tmp_path / "q.conf"
        conf.write_text('redis = {\n  default = { sentinels = [%s]; master_name = "%s"; sentinel_username = "qs";'
                        ' sentinel_password_file = "%s"; };\n  noauth = { sentinels = [%s]; master_name = "%s"; };\n};\n'
                        'pools = ( { name = "w"; queues = ["default"]; handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                        % (addrs, MASTER, pwfile, addrs, MASTER))
        res = subprocess.run([QPOOL, "check", "--connect", "-q", "-c", str(conf)], capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 1, res.stdout + res.stderr
        assert "redis default (%s at 127.0.0.1:%d via Sentinel): ok" % (MASTER, primary.port) in res.stdout, res.stdout
        assert "redis noauth (%s via Sentinel): FAILED: no sentinel named the primary" % MASTER in res.stdout
        assert "NOAUTH" in res.stdout, res.stdout
        assert pw not in res.stdout + res.stderr
    finally:
        gen.close()

