"""The master, native workers and CLI commands under valgrind: no memory errors, no leaks.

Skipped on the sanitizer build (the two do not mix); scripts/test runs it on the
normal build.
"""
import os
import signal
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import (BUILD, FIXTURE_HANDLER, QPOOL, VALGRIND, assert_valgrind_clean, failed_records, free_port, make_payload, push, push_many,
                      queue_state, wait_for)


pytestmark = pytest.mark.skipif("asan" in str(BUILD), reason="valgrind does not run ASan binaries")


def test_master_workers_and_cli_are_valgrind_clean(master, r, tmp_path):
    vlog = tmp_path / "valgrind.%p.log"
    port = free_port()
    master.write_config(
        '{ name = "pipe"; queues = ["a"]; processes = 2; tries = 2; backoff = [0]; timeout = 2;'
        '  handler = { type = "pipe"; command = ["%s"]; }; },\n'
        '{ name = "exec"; queues = ["b"]; processes = 1; tries = 1;'
        '  handler = { type = "exec"; command = ["%s", "--exec"]; }; }' % (FIXTURE_HANDLER, FIXTURE_HANDLER),
        qpool='balance_interval = 0.2; http = { listen = "127.0.0.1:%d"; read_without_token = "all"; };'
              ' alerts = { long_wait = 1; failure_rate = 0.1; failure_min_jobs = 1; command = ["/bin/true"]; };' % port)
    # run the master itself under valgrind (its forked workers are traced too)
    e = dict(os.environ)
    master.logf = open(master.log_path, "ab")
    master.proc = subprocess.Popen(VALGRIND + ["--log-file=%s" % vlog, QPOOL, "run", "-c", str(master.conf)],
                                   stdout=master.logf, stderr=subprocess.STDOUT, env=e, start_new_session=True)
    master.sid = master.proc.pid
    wait_for(lambda: master.listening(), 60, what="the master under valgrind")
    push_many(r, "a", [make_payload("ok") for _ in range(50)] + [make_payload("fail"), make_payload("hang"),
                                                                   make_payload("release:0")])
    push_many(r, "b", [make_payload("ok") for _ in range(5)] + [make_payload("fail")])
    push(r, "a", b"not json at all")
    # a: fail, hang (timeout), release:0 (runs out of tries), the garbage payload
    wait_for(lambda: len(failed_records(r, "a")) == 4 and len(failed_records(r, "b")) == 1
             and queue_state(r, "a")["reserved"] == 0, 120, interval=0.5, what="the jobs")
    for args in (["status", "-v"], ["pause", "pipe"], ["continue", "pipe"], ["scale", "pipe", "3"],
                 ["restart", "exec"], ["failed", "list"], ["push", "a", "--job", "X", "--count", "3"],
                 ["check"], ["reload"]):
        res = subprocess.run(VALGRIND + [QPOOL] + args + ["-c", str(master.conf)], capture_output=True,
                             timeout=120)
        try:
            res.stdout, res.stderr = res.stdout.decode(), res.stderr.decode()
        except UnicodeDecodeError:
            raise AssertionError("qpool %s wrote bytes that are not UTF-8: %r" % (args, res.stdout))
        assert res.returncode in (0, 1), (args, res.returncode, res.stderr)
        assert "definitely lost" not in res.stderr and "Invalid" not in res.stderr, (args, res.stderr)
    # the HTTP process (exec'd by the master, traced too): every endpoint
    uuid = failed_records(r, "a")[0]["uuid"].decode()
    for path in ["/healthz", "/metrics", "/api/status", "/api/fleet", "/api/metrics", "/api/jobs/recent",
                 "/api/failed", "/api/failed/nope", "/api/jobs/nope", "/nope", "/api/jobs/" + uuid,
                 "/api/failed/" + uuid]:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30).read()
        except urllib.error.HTTPError as e:
            assert e.code in (404, 503), (path, e.code)
    master.proc.send_signal(signal.SIGTERM)
    assert master.proc.wait(120) == 0
    assert_valgrind_clean(tmp_path, 4, "the workers")
