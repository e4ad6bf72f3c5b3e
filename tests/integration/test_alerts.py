"""Alerts (qpool.alerts, issue 9): long wait (oldest ready job, observed
wait), crash loop and failure rate, each logged as a warning, raised once
per episode and again when it clears, and given as JSON to alerts.command.
Real master, real Redis, real children."""
import json
import os
import pwd
import re
import signal
import time

import pytest

from conftest import FIXTURE_HANDLER, make_payload, push_many, wait_for


def pool(log, extra=""):
    return ('{ name = "w"; queues = ["default"]; processes = 1; tries = 1; timeout = 5;'
            ' handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; %s }'
            % (FIXTURE_HANDLER, log, extra))


def alerts_conf(out, extra):
    # the command appends each event (its stdin) to a file; root may write there
    return ('alerts = { %s command = ["/bin/sh", "-c", "cat >> %s; echo \\"env $QPOOL_ALERT $QPOOL_ALERT_STATE\\" >> %s"];'
            ' user = "root"; };' % (extra, out, out))


def start(master, tmp_path, alerts, pools=None, interval=0.2):
    """A master with these alert settings (and passes every interval s);
    returns where the command writes."""
    out = tmp_path / "alerts.jsonl"
    master.write_config(pools or pool(tmp_path / "fixture.log"),
                        qpool="balance_interval = %s;\n" % interval + alerts_conf(out, alerts))
    master.start()
    return out


def first_event(out, what, timeout=20):
    wait_for(lambda: events(out), timeout, what=what)
    return events(out)[0]


def events(out):
    if not out.exists():
        return []
    return [json.loads(l) for l in out.read_text().splitlines() if l.startswith("{")]


def test_a_backlog_raises_one_long_wait_alert_and_clears_it(master, r, tmp_path):
    out = start(master, tmp_path, "long_wait = 1.5; clear_after = 1;")
    master.signal(signal.SIGUSR2)  # a backlog nobody takes
    wait_for(lambda: master.status(verbose=False)["state"] == "paused", 10, what="the pause")
    push_many(r, "default", [make_payload("ok") for _ in range(5)])
    wait_for(lambda: len(events(out)) >= 1, 15, what="the long_wait alert")
    time.sleep(2)  # still breached: no second event
    (ev,) = events(out)
    assert ev["alert"] == "long_wait" and ev["state"] == "firing" and ev["pool"] == "w" and ev["queue"] == "default"
    assert ev["measure"] == "oldest_ready" and ev["value"] >= 1.5 and ev["threshold"] == 1.5
    assert ev["host"] and ev["since"] <= ev["at"]
    assert "env long_wait firing" in out.read_text()
    assert master.count_log(r"warn .*alert long_wait firing: pool w queue default: oldest_ready") == 1
    master.signal(signal.SIGCONT)
    wait_for(lambda: len(events(out)) == 2, 15, what="the alert to clear")
    res = events(out)[1]
    assert res["alert"] == "long_wait" and res["state"] == "resolved" and res["since"] == ev["since"]
    assert master.count_log(r"alert long_wait resolved") == 1


def test_a_measured_wait_raises_the_alert(master, r, tmp_path):
    # Passes 5 s apart: a pass that looks at the queue while the job still
    # waits there would rightly raise the alert on oldest_ready (its
    # createdAt says 120 s too), before any wait is measured; seen once on
    # a loaded machine with passes every 0.2 s.
    out = start(master, tmp_path, "long_wait = 300; long_wait_queues = { default = 30; };", interval=5)
    wait_for(lambda: master.pool("w")["counts_fresh"], 10, what="the first pass")  # it comes at start
    # dispatched two minutes ago (Laravel 11+ payloads say when): waited 120 s
    push_many(r, "default", [make_payload("ok", createdAt=int(time.time()) - 120)])
    ev = first_event(out, "the long_wait alert")
    # 120 s falls in the (60 s, 300 s] bucket; p95 reads within it
    assert ev["measure"] == "wait_p95" and 60 <= ev["value"] <= 300 and ev["threshold"] == 30


def test_a_crash_loop_raises_an_alert(master, r, tmp_path):
    out = start(master, tmp_path, "crash_loop = 3; crash_loop_window = 60;",
                pools='{ name = "broken"; queues = ["default"]; processes = 1; command = ["/bin/false"]; }')
    ev = first_event(out, "the crash_loop alert", 30)
    assert ev["alert"] == "crash_loop" and ev["pool"] == "broken" and ev["value"] >= 3 and "queue" not in ev
    assert master.count_log(r"alert crash_loop firing: pool broken") == 1


def test_a_failure_rate_raises_an_alert(master, r, tmp_path):
    out = start(master, tmp_path, "failure_rate = 0.5; failure_min_jobs = 5;")
    push_many(r, "default", [make_payload("ok") for _ in range(2)] + [make_payload("fail") for _ in range(8)])
    ev = first_event(out, "the failure_rate alert")
    assert ev["alert"] == "failure_rate" and ev["measure"] == "failure_rate" and ev["value"] >= 0.5


def test_the_command_gets_a_minimal_environment_as_its_user(master, r, tmp_path):
    """Review #5: the command runs with PATH, its QPOOL_ALERT variables and
    its user's HOME and USER, nothing of the master's environment (a
    password_env variable, root's HOME). /usr/bin/env prints what it got
    to the master's log (its inherited stdout)."""
    if os.geteuid() != 0:
        pytest.skip("alerts.user needs a root master")
    secret = "redis-pw-%s" % os.urandom(6).hex()
    master.write_config('{ name = "broken"; queues = ["default"]; processes = 1; command = ["/bin/false"]; }',
                        qpool='balance_interval = 0.2;\n'
                              'alerts = { crash_loop = 3; crash_loop_window = 60; command = ["/usr/bin/env"]; user = "nobody"; };')
    master.start(env={"HOME": "/root", "QPOOL_TEST_REDIS_PW": secret, "PATH": "/usr/local/bin:/usr/bin:/bin"})
    master.wait_log(r"(?m)^QPOOL_ALERT=crash_loop$", 30)
    master.wait_log(r"(?m)^QPOOL_ALERT_STATE=firing$", 5)
    time.sleep(0.5)  # env prints in one go; let it finish
    got = dict(re.findall(r"(?m)^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", master.log()))
    nobody = pwd.getpwnam("nobody")
    assert got == {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": nobody.pw_dir, "USER": "nobody",
                   "QPOOL_ALERT": "crash_loop", "QPOOL_ALERT_STATE": "firing"}
    assert secret not in master.log()
