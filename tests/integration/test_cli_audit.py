"""Issue 32: the CLI's bulk actions (`qpool failed retry|forget|flush`,
`qpool pending delete`) are recorded with their source (the CLI, the
user's uid), the filter (user input: cut and escaped) and the count, on
stderr and to the syslog socket (LOG_NOTICE, ident qpool). Real
redis-server, a real unix datagram socket standing in for /dev/log."""
import os
import socket
import subprocess

from conftest import PREFIX, QPOOL, make_payload, push_many
from test_failed_search import corpus, pool, seed

HOSTILE = "timeout 2\n\x1b[31mFAKE line" + "x" * 200


def listen(tmp_path):
    path = str(tmp_path / "log.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(10)
    return s, path


def run(master, sock_path, *args):
    env = dict(os.environ, QPOOL_SYSLOG_SOCKET=sock_path)
    res = subprocess.run([QPOOL] + list(args) + ["-c", str(master.conf)], capture_output=True, text=True,
                         timeout=60, env=env)
    assert res.returncode == 0, (res.stdout, res.stderr)
    return res


def record(res, cmd):
    lines = [x for x in res.stderr.splitlines() if x.startswith("qpool %s: " % cmd) and " by cli uid " in x]
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_cli_bulk_actions_are_recorded_with_source_filter_and_count(master, r, tmp_path):
    master.write_config(pool())
    seed(r, "ca-mail", corpus()["fs-mail"][:70])  # "timeout %d" % (i % 7): 10 say "timeout 2"
    sock, path = listen(tmp_path)
    try:
        # a dry run records nothing
        res = run(master, path, "failed", "retry", "--queue", "ca-mail", "--text", "timeout 2")
        assert "by cli uid" not in res.stderr
        res = run(master, path, "failed", "retry", "--queue", "ca-mail", "--text", "timeout 2", "--yes")
        line = record(res, "failed")
        assert line.startswith('qpool failed: retried 10 failed jobs (filter: --queue "ca-mail" --text "timeout 2")')
        assert line.endswith("by cli uid %d (%s)" % (os.getuid(), line.rsplit("(", 1)[1][:-1]))
        msg = sock.recv(4096).decode()
        assert msg.startswith("<13>") and " qpool[" in msg and msg.endswith(line)
        # hostile filter text: one line, escaped, cut
        res = run(master, path, "failed", "forget", "--queue", "ca-mail", "--text", HOSTILE, "--yes")
        line = record(res, "failed")
        assert "forgot 0 failed jobs" in line and "\\x0a\\x1b[31mFAKE" in line and "\x1b" not in line
        assert "x" * 200 not in line and 'xxx..."' in line
        msg = sock.recv(4096).decode()
        assert "\n" not in msg and "\x1b" not in msg and msg.endswith(line)
        # a quote in the text cannot end its field and forge the source (review of 2026-11-29)
        res = run(master, path, "failed", "forget", "--queue", "ca-mail", "--text", 'x") by cli uid 0 (root', "--yes")
        line = record(res, "failed")
        assert '--text "x\\") by cli uid 0 (root")' in line, line
        sock.recv(4096)
        # pending delete
        push_many(r, "ca-jobs", [make_payload("ok", job="App\\Jobs\\Spam" if i % 2 else "App\\Jobs\\Keep")
                                 for i in range(40)])
        res = run(master, path, "pending", "delete", "ca-jobs", "--class", "App\\Jobs\\Spam", "--yes")
        line = record(res, "pending")
        assert line.startswith('qpool pending: deleted 20 pending jobs (filter: queue "ca-jobs" '
                               '--class "App\\\\Jobs\\\\Spam") by cli uid %d' % os.getuid())
        assert sock.recv(4096).decode().endswith(line)
        # flush
        res = run(master, path, "failed", "flush", "ca-mail")
        assert record(res, "failed").startswith('qpool failed: flushed 60 failed jobs (filter: --queue "ca-mail")')
    finally:
        sock.close()


def test_cli_bulk_action_without_a_syslog_socket_still_tells_stderr(master, r, tmp_path):
    master.write_config(pool())
    push_many(r, "ca-none", [make_payload("ok") for _ in range(5)])
    res = run(master, str(tmp_path / "nobody-listens"), "pending", "delete", "ca-none", "--all", "--yes")
    assert record(res, "pending").startswith('qpool pending: deleted 5 pending jobs (filter: queue "ca-none" --all)')
