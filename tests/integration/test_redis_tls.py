"""TLS and ACL to Redis (issue 12 item 3): a redis-server with only a TLS
port, a test CA and server certificate made here with the openssl CLI, and an
ACL user whose password qpool reads from password_file or password_env."""
import os
import socket
import subprocess
import time

import pytest
import redis

from conftest import (FIXTURE_HANDLER, PREFIX, QPOOL, VALGRIND, assert_valgrind_clean, free_port, make_payload,
                      push_many, queue_state, wait_for)

USER = "qpool-worker"
PASSWORD = "pw-" + os.urandom(8).hex()  # unique, so a leak into a log is found by grep


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """A test CA, a server certificate for localhost/127.0.0.1 it signs, and an
    unrelated CA (the wrong one)."""
    d.mkdir(exist_ok=True)
    # Python 3.13's ssl (Debian 13) verifies strictly (VERIFY_X509_STRICT): the
    # CA needs its key usage, the server certificate its authority key id
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=qpool test CA", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=localhost", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                               "basicConstraints=CA:FALSE\n"
                               "keyUsage=critical,digitalSignature,keyEncipherment\n"
                               "extendedKeyUsage=serverAuth,clientAuth\n"
                               "subjectKeyIdentifier=hash\n"
                               "authorityKeyIdentifier=keyid,issuer\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "wrong.key", "-out", "wrong.crt",
            "-days", "2", "-subj", "/CN=some other CA", cwd=d)
    return d


class TlsRedis:
    """redis-server with a TLS port only, the default user off and one ACL user."""

    def __init__(self, tmp):
        self.pki = make_pki(tmp / "pki")
        self.dir = tmp / "redis-tls"
        self.dir.mkdir(exist_ok=True)
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--tls-cert-file", str(self.pki / "server.crt"), "--tls-key-file", str(self.pki / "server.key"),
             "--tls-ca-cert-file", str(self.pki / "ca.crt"), "--tls-auth-clients", "no",
             "--save", "", "--appendonly", "no", "--dir", str(self.dir),
             "--logfile", str(self.dir / "redis.log"),
             "--user", USER, "on", ">" + PASSWORD, "~*", "&*", "+@all", "--user", "default", "off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._ping, 10, what="the TLS redis-server to answer")

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, ssl=True, ssl_ca_certs=str(self.pki / "ca.crt"),
                           username=USER, password=PASSWORD, socket_timeout=10)

    def _ping(self):
        try:
            return self.client().ping()
        except (redis.RedisError, OSError):
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory):
    srv = TlsRedis(tmp_path_factory.mktemp("tls"))
    yield srv
    srv.stop()


@pytest.fixture
def tr(tls_redis):
    c = tls_redis.client()
    c.flushall()
    return c


def secret_file(d, text=PASSWORD + "\n", mode=0o600):
    p = d / "redis.password"
    p.write_text(text)
    os.chmod(p, mode)
    return p


def tls_conn(srv, name="default", ca=None, auth=None, extra="", tls=True, port=None, db=0):
    ca = ca or srv.pki / "ca.crt"
    tls_block = 'tls = { ca_file = "%s"; };' % ca if tls else ""
    return ('%s = { host = "127.0.0.1"; port = %d; db = %d; prefix = "%s"; username = "%s"; %s timeout = 3; %s %s };'
            % (name, port or srv.port, db, PREFIX, USER, auth or "", tls_block, extra))


def pool(log):
    return ('{ name = "w"; queues = ["default"]; processes = 2; handler = { type = "pipe"; command = ["%s"]; };'
            ' environment = { FIXTURE_LOG = "%s"; }; }' % (FIXTURE_HANDLER, log))


def jobs_done(log):
    try:
        return [l.split() for l in log.read_text().splitlines() if l.startswith("job ")]
    except FileNotFoundError:
        return []


def check_connect(conf, timeout=60):
    return subprocess.run([QPOOL, "check", "--connect", "-q", "-c", str(conf)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("source", ["password_file", "password_env"])
def test_jobs_run_over_tls_with_an_acl_user(master_factory, tls_redis, tr, tmp_path, source):
    m = master_factory()
    log = tmp_path / "fixture.log"
    env = {}
    if source == "password_file":
        auth = 'password_file = "%s";' % secret_file(tmp_path)
    else:
        auth = 'password_env = "QPOOL_TEST_REDIS_PW";'
        env["QPOOL_TEST_REDIS_PW"] = PASSWORD
    m.write_config(pool(log), redis_conf=tls_conn(tls_redis, auth=auth) + "\n  " +
                   tls_conn(tls_redis, name="cache", auth=auth, db=1))
    m.start(env=env)
    payloads = [make_payload("ok") for _ in range(30)]
    push_many(tr, "default", payloads)
    wait_for(lambda: len(jobs_done(log)) >= 30 and queue_state(tr, "default")["reserved"] == 0
             and queue_state(tr, "default")["ready"] == 0, 30, what="30 jobs over TLS")
    assert sorted(l[1] for l in jobs_done(log)) == sorted(p["id"] for p in payloads)
    me = str(tr.client_id())
    theirs = [c for c in tr.client_list() if c["id"] != me]
    assert len(theirs) >= 2 and all(c["user"] == USER for c in theirs), theirs
    st = m.status(verbose=False)
    assert st["pools"][0]["name"] == "w"
    m.stop()
    assert PASSWORD not in m.log(), "the password is in the master's log"


def test_check_connect_reports_each_connection(tls_redis, tr, tmp_path):
    conf = tmp_path / "q.conf"
    auth = 'password_file = "%s";' % secret_file(tmp_path)
    conf.write_text('redis = {\n  %s\n  %s\n};\npools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                    % (tls_conn(tls_redis, auth=auth), tls_conn(tls_redis, name="wrongca", auth=auth,
                                                                 ca=tls_redis.pki / "wrong.crt")))
    res = check_connect(conf)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    ok = [l for l in lines if l.startswith("redis default ")]
    bad = [l for l in lines if l.startswith("redis wrongca ")]
    assert ok and ": ok (TLS, ACL user %s)" % USER in ok[0], res.stdout
    assert bad and "FAILED: TLS handshake: certificate verify failed" in bad[0], res.stdout
    assert PASSWORD not in res.stdout + res.stderr


def test_wrong_ca_is_a_clear_error_at_start(master_factory, tls_redis, tr, tmp_path):
    m = master_factory()
    auth = 'password_file = "%s";' % secret_file(tmp_path)
    m.write_config(pool(tmp_path / "fixture.log"),
                   redis_conf=tls_conn(tls_redis, auth=auth, ca=tls_redis.pki / "wrong.crt"))
    m.start()
    m.wait_log(r"redis default \(127\.0\.0\.1:%d\) unavailable: TLS handshake: certificate verify failed"
               % tls_redis.port, 20)
    push_many(tr, "default", [make_payload("ok")])
    time.sleep(1)
    assert queue_state(tr, "default")["ready"] == 1, "nothing is popped over an unverified connection"
    assert PASSWORD not in m.log()


def test_wrong_server_name_fails_verification(tls_redis, tmp_path):
    conf = tmp_path / "q.conf"
    auth = 'password_file = "%s";' % secret_file(tmp_path)
    conf.write_text('redis = { %s };\npools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                    % tls_conn(tls_redis, auth=auth).replace('tls = { ca_file', 'tls = { server_name = "redis.example"; ca_file'))
    res = check_connect(conf)
    assert res.returncode == 1
    assert "certificate verify failed: hostname mismatch" in res.stdout, res.stdout


def test_wrong_password_names_the_user_not_the_password(tls_redis, tmp_path):
    conf = tmp_path / "q.conf"
    wrong = "not-" + PASSWORD
    auth = 'password_file = "%s";' % secret_file(tmp_path, wrong + "\n")
    conf.write_text('redis = { %s };\npools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n' % tls_conn(tls_redis, auth=auth))
    res = check_connect(conf)
    assert res.returncode == 1
    assert "AUTH as %s failed: WRONGPASS" % USER in res.stdout, res.stdout
    assert wrong not in res.stdout + res.stderr and PASSWORD not in res.stdout + res.stderr


def test_plain_tcp_to_the_tls_port_fails_and_does_not_hang(tls_redis, tmp_path):
    conf = tmp_path / "q.conf"
    auth = 'password_file = "%s";' % secret_file(tmp_path)
    conf.write_text('redis = { %s };\npools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                    % tls_conn(tls_redis, auth=auth, tls=False))
    res = check_connect(conf, timeout=60)  # a hang would raise TimeoutExpired
    assert res.returncode == 1
    assert "redis default (127.0.0.1:%d): FAILED" % tls_redis.port in res.stdout, res.stdout


def test_a_stalled_tls_handshake_is_bounded_by_the_timeout(tmp_path):
    """A server that accepts the connection and never answers the handshake."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        conf = tmp_path / "q.conf"
        conf.write_text('redis = { default = { host = "127.0.0.1"; port = %d; timeout = 1; tls = { }; }; };\n'
                        'pools = ( { name = "w"; queues = ["default"]; '
                        'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n' % port)
        res = check_connect(conf, timeout=60)
    assert res.returncode == 1
    assert "TLS handshake: timed out" in res.stdout, res.stdout


def serve_half_a_record(listener, pki, stop):
    """A TLS server (Python's ssl over memory BIOs, so the records are ours to
    cut): completes the handshake, then answers every command with the first
    8 bytes of one TLS record and never sends the rest."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki / "server.crt"), str(pki / "server.key"))
    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        conn.settimeout(0.2)
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(inc, out, server_side=True)
        shaken = False
        while not stop.is_set():
            try:
                data = conn.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:
                break
            inc.write(data)
            if not shaken:
                try:
                    tls.do_handshake()
                    shaken = True
                except ssl.SSLWantReadError:
                    pass
                conn.sendall(out.read())
                continue
            try:
                tls.read(65536)
            except ssl.SSLError:
                continue
            conn.sendall(out.read())  # whole records so far (TLS 1.3 session tickets)
            tls.write(b"+PONG\r\n")
            conn.sendall(out.read()[:8])  # the reply's record cut short: the rest never comes
        conn.close()


def test_a_reply_cut_mid_record_times_out_instead_of_spinning(tls_redis, tmp_path):
    """Review of the TLS layer: bytes of an incomplete record sat in OpenSSL's
    buffer, SSL_has_pending() said "pending", and the read loop went round
    without ever reaching poll, where the deadline and the signalfd are
    checked: qpool spun at full CPU past every timeout, deaf to SIGTERM."""
    import threading
    stop = threading.Event()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        t = threading.Thread(target=serve_half_a_record, args=(s, tls_redis.pki, stop), daemon=True)
        t.start()
        conf = tmp_path / "q.conf"
        conf.write_text('redis = { default = { host = "127.0.0.1"; port = %d; timeout = 2; tls = { ca_file = "%s"; }; }; };\n'
                        'pools = ( { name = "w"; queues = ["default"]; '
                        'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                        % (port, tls_redis.pki / "ca.crt"))
        try:
            res = check_connect(conf, timeout=60)  # the spin never returned: TimeoutExpired
        finally:
            stop.set()
            t.join(10)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAILED" in res.stdout and "timed out" in res.stdout, res.stdout


def test_tls_to_a_plain_port_is_a_handshake_error(redis_server, tmp_path):
    conf = tmp_path / "q.conf"
    conf.write_text('redis = { default = { host = "127.0.0.1"; port = %d; timeout = 3; tls = { }; }; };\n'
                    'pools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n' % redis_server.port)
    res = check_connect(conf, timeout=60)
    assert res.returncode == 1
    assert "FAILED: TLS handshake" in res.stdout, res.stdout


@pytest.mark.parametrize("mode,text,why", [
    (0o666, PASSWORD, "can be written by group or others"),
    (0o600, "", "is empty"),
], ids=["group-or-others-write", "empty"])  # stable ids: the same in every xdist worker
def test_password_file_is_read_safely(tmp_path, mode, text, why):
    p = secret_file(tmp_path, text, mode)
    os.chmod(p, mode)
    conf = tmp_path / "q.conf"
    conf.write_text('redis = {\n  default = { host = "127.0.0.1";\n    password_file = "%s"; };\n};\n'
                    'pools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n' % p)
    res = subprocess.run([QPOOL, "check", "-q", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78
    assert "%s:3: password_file: %s %s" % (conf, p, why) in res.stderr or \
           "%s:3: password_file: %s: %s" % (conf, p, why) in res.stderr, res.stderr
    assert PASSWORD not in res.stderr


def test_password_file_others_can_read_warns(tmp_path):
    """m6: a password_file others can read is a warning naming the file and
    its line (1.x loads what 1.0 loaded; 2.0 will refuse it), never the
    password; 0640 is quiet."""
    conf = tmp_path / "q.conf"
    for mode, warned in ((0o644, True), (0o640, False)):
        p = secret_file(tmp_path, PASSWORD, mode)
        os.chmod(p, mode)
        conf.write_text('redis = {\n  default = { host = "127.0.0.1";\n    password_file = "%s"; };\n};\n'
                        'pools = ( { name = "w"; queues = ["default"]; '
                        'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n' % p)
        res = subprocess.run([QPOOL, "check", "-c", str(conf)], capture_output=True, text=True, timeout=30)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        line = "%s:3: password_file: %s is readable by others" % (conf, p)
        assert (line in out) == warned, (oct(mode), out)
        assert PASSWORD not in out


def test_password_file_symlink_is_refused(tmp_path):
    p = secret_file(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(p)
    conf = tmp_path / "q.conf"
    conf.write_text('redis = { default = { host = "127.0.0.1"; password_file = "%s"; }; };\n'
                    'pools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n' % link)
    res = subprocess.run([QPOOL, "check", "-q", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78
    assert "symbolic link" in res.stderr, res.stderr


def test_check_prints_the_file_path_never_the_password(tls_redis, tmp_path):
    conf = tmp_path / "q.conf"
    p = secret_file(tmp_path)
    conf.write_text('redis = { %s };\npools = ( { name = "w"; queues = ["default"]; '
                    'handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                    % tls_conn(tls_redis, auth='password_file = "%s";' % p))
    res = subprocess.run([QPOOL, "check", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert 'password_file = "%s";' % p in res.stdout
    assert "tls = {" in res.stdout and "verify = true;" in res.stdout
    assert PASSWORD not in res.stdout + res.stderr




@pytest.mark.skipif("asan" in os.environ.get("QPOOL_BUILD", ""), reason="valgrind does not run ASan binaries")
def test_tls_master_workers_and_check_are_valgrind_clean(master_factory, tls_redis, tr, tmp_path):
    m = master_factory()
    log = tmp_path / "fixture.log"
    vlog = tmp_path / "valgrind.%p.log"
    auth = 'password_file = "%s";' % secret_file(tmp_path)
    m.write_config(pool(log), redis_conf=tls_conn(tls_redis, auth=auth) + "\n  " +
                   tls_conn(tls_redis, name="cache", auth=auth, db=1) + "\n  " +
                   tls_conn(tls_redis, name="wrongca", auth=auth, ca=tls_redis.pki / "wrong.crt"))
    m.logf = open(m.log_path, "ab")
    m.proc = subprocess.Popen(VALGRIND + ["--log-file=%s" % vlog, QPOOL, "run", "-c", str(m.conf)],
                              stdout=m.logf, stderr=subprocess.STDOUT, start_new_session=True)
    m.sid = m.proc.pid
    wait_for(lambda: m.listening(), 60, what="the master under valgrind")
    push_many(tr, "default", [make_payload("ok") for _ in range(20)])
    wait_for(lambda: len(jobs_done(log)) >= 20 and queue_state(tr, "default")["reserved"] == 0, 120,
             interval=0.5, what="20 jobs over TLS under valgrind")
    res = subprocess.run(VALGRIND + [QPOOL, "check", "--connect", "-q", "-c", str(m.conf)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 1 and "redis wrongca" in res.stdout and "certificate verify failed" in res.stdout
    assert "definitely lost" not in res.stderr and "Invalid" not in res.stderr, res.stderr
    m.proc.send_signal(15)
    assert m.proc.wait(120) == 0
    assert_valgrind_clean(tmp_path, 3, "the workers")
