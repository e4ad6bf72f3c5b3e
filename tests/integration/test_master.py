"""The master: config validation, children, respawn, signals, reload, pid file."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (FIXTURE_HANDLER, PYTHON, QPOOL, ROOT, SIGNAL_CHILD, children_of, cmdline, make_payload,
                      pgid_members, proc_alive, push, read_fixture_log, session_pids, wait_for)


def child_cmd(*args):
    return "[%s]" % ", ".join('"%s"' % a for a in [PYTHON, SIGNAL_CHILD] + list(args))


def ext_pool(name, queue, n, log, args=("run",), extra=""):
    """An external pool of n signal-child.py children logging to log."""
    return ('{ name = "%s"; queues = ["%s"]; processes = %d; command = %s; %s'
            'environment = { SIGNAL_LOG = "%s"; }; }' % (name, queue, n, child_cmd(*args), extra, log))


def wait_started(log, pids):
    """Until every child in pids has logged START (its signal handlers are in)."""
    wait_for(lambda: all("START" in signal_log(log).get(p, []) for p in pids), 10, what="children up")


def signal_log(path):
    """{pid: [event, ...]} from signal-child's log."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                pid, what, _ = line.split()
                out.setdefault(int(pid), []).append(what)
    except FileNotFoundError:
        pass
    return out


# ---------------------------------------------------------------- version

def pkg_version(module):
    """The version pkg-config gives the build for a library."""
    return subprocess.run(["pkg-config", "--modversion", module], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_version_names_qpool_and_the_libraries_it_was_built_with():
    project = re.search(r"project\(qpool VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    outs = [subprocess.run([QPOOL, arg], capture_output=True, text=True, check=True).stdout
            for arg in ("--version", "-V", "version")]
    assert outs[0] == outs[1] == outs[2], outs
    lines = outs[0].splitlines()
    assert lines[0] == "qpool %s" % project, outs[0]
    libs = {line.split()[0].rstrip(":"): line.strip() for line in lines[1:]}
    assert sorted(libs) == ["TLS", "cJSON", "hiredis", "libconfig", "libmicrohttpd"], outs[0]
    # the libhiredis loaded is named by its file (hiredis has no run-time version call)
    soname = re.search(r"^\s*(libhiredis\.so\S*) =>", subprocess.run(["ldd", QPOOL], capture_output=True, text=True,
                                                                      check=True).stdout, re.M).group(1)
    assert libs["hiredis"] == "hiredis %s (%s loaded)" % (pkg_version("hiredis"), soname), outs[0]
    for key, module, name in [("TLS", "openssl", "TLS: OpenSSL"), ("libmicrohttpd", "libmicrohttpd", "libmicrohttpd"),
                              ("libconfig", "libconfig", "libconfig"), ("cJSON", "libcjson", "cJSON")]:
        # the version built with, and the one run with only when they differ
        assert re.fullmatch(r"%s %s( \(\S+ at run time\))?" % (re.escape(name), re.escape(pkg_version(module))),
                            libs[key]), outs[0]


# ---------------------------------------------------------------- check

def run_check(path):
    return subprocess.run([QPOOL, "check", "-c", str(path)], capture_output=True, text=True)


def test_check_accepts_the_example_config():
    res = run_check(ROOT / "etc" / "qpool.conf")
    assert res.returncode == 0, res.stderr
    assert "pools = (" in res.stdout and "retry_after = 90;" in res.stdout


@pytest.mark.parametrize("body,line,needle", [
    ('pools = (\n  { name = "a"; queues = ["q"]\n    command = ["x"] ;; };\n);\n', 3, "syntax error"),
    ('pools = (\n  { name = "a"; queues = ["q"]; command = ["x"];\n    tires = 3; }\n);\n', 3,
     "unknown key 'tires' in pool (did you mean 'tries'?)"),
    ('pools = (\n  { name = "a"; queues = ["q"]; command = ["x"];\n\n    tries = "3"; }\n);\n', 4,
     "tries: expected an integer, got a string"),
    ('pools = (\n  { name = "a"; queues = ["q"]; command = ["x"];\n    balance = "auto";\n'
     '    min_processes = 5; max_processes = 2; }\n);\n', 2, "min_processes (5) is greater than max_processes (2)"),
])
def test_check_rejects_bad_configs_with_file_and_line(tmp_path, body, line, needle):
    path = tmp_path / "bad.conf"
    path.write_text(body)
    res = run_check(path)
    assert res.returncode == 78
    assert "%s:%d: " % (path, line) in res.stderr, res.stderr
    assert needle in res.stderr


def test_run_with_a_bad_config_exits_78(tmp_path):
    path = tmp_path / "bad.conf"
    path.write_text("pools = ( { name = \"a\"; } );\n")
    res = subprocess.run([QPOOL, "run", "-c", str(path)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78
    assert str(path) in res.stderr


# ---------------------------------------------------------------- children

def test_pool_starts_n_children_with_titles_and_groups(master, tmp_path):
    log = tmp_path / "signals.log"
    master.write_config('{ name = "ext"; queues = ["q"]; processes = 3; command = %s; '
                        'environment = { SIGNAL_LOG = "%s"; MARKER = "x"; }; }' % (child_cmd("run"), log))
    master.start()
    pids = master.wait_children("ext", 3)
    for pid in pids:
        # the master reports a child from its fork on; it execs a moment later
        wait_for(lambda: "signal-child.py run" in cmdline(pid), 10, what="child %d to exec its command" % pid)
        assert os.getpgid(pid) == pid, "each child leads its own process group"
        with open("/proc/%d/environ" % pid, "rb") as f:
            assert b"MARKER=x" in f.read()
    assert re.search(r"qpool: master \[ext 3/3\]", cmdline(master.proc.pid)), cmdline(master.proc.pid)


def test_killed_child_is_replaced(master, tmp_path):
    master.write_config('{ name = "ext"; queues = ["q"]; processes = 2; command = %s; }' % child_cmd("run"))
    master.start()
    before = master.wait_children("ext", 2)
    os.kill(before[0], signal.SIGKILL)
    after = wait_for(lambda: (lambda p: p if len(p) == 2 and before[0] not in p else None)(master.child_pids("ext")),
                     5, what="a replacement child")
    assert before[1] in after
    assert "killed by signal 9 (SIGKILL)" in master.log()
    assert "restarting in 1 s" in master.log()


def test_exit_12_is_a_memory_recycle_replaced_at_once(master):
    master.write_config('{ name = "mem"; queues = ["q"]; processes = 1; command = %s; }' % child_cmd("exit", "12", "0.5"))
    master.start()
    master.wait_log(r"passed its memory limit \(exit 12", timeout=10, count=2)
    log = master.log()
    assert "memory recycle #1" in log and "memory recycle #2" in log
    assert "restarting in" not in log, "exit 12 must not be delayed by the crash backoff"
    assert master.pool("mem")["memory_recycles"] >= 2


def test_crashing_pool_backs_off_exponentially_and_others_stay_up(master):
    master.write_config(
        '{ name = "crash"; queues = ["a"]; processes = 1; command = %s; },\n'
        '{ name = "ok"; queues = ["b"]; processes = 2; command = %s; }' % (child_cmd("exit", "1", "0"), child_cmd("run")))
    master.start()
    stable = master.wait_children("ok", 2)
    master.wait_log(r"pool crash: started crash#1", timeout=20, count=4)
    delays = [int(d) for d in re.findall(r"crash#1 .*restarting in (\d+) s", master.log())]
    assert delays[:3] == [1, 2, 4], delays
    # the attempts really were spaced out: starts of crash#1 at growing intervals
    starts = [int(h) * 3600 + int(m) * 60 + float(sec) for h, m, sec in re.findall(
        r"T(\d\d):(\d\d):(\d\d\.\d+)Z info  master\[\d+\]: pool crash: started crash#1", master.log())]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(gaps) >= 3 and gaps[1] > gaps[0] and gaps[2] > gaps[1], gaps
    assert master.child_pids("ok") == stable, "the healthy pool was disturbed"
    assert master.proc.poll() is None


def test_pause_and_resume_reach_every_child_and_respawns_while_paused(master, tmp_path):
    log = tmp_path / "signals.log"
    master.write_config(ext_pool("ext", "q", 2, log))
    master.start()
    pids = master.wait_children("ext", 2)
    wait_started(log, pids)
    master.signal(signal.SIGUSR2)
    wait_for(lambda: all("SIGUSR2" in signal_log(log).get(p, []) for p in pids), 10, what="SIGUSR2 forwarded")
    # a child respawned during the pause is paused too
    os.kill(pids[0], signal.SIGKILL)
    new = wait_for(lambda: [p for p in master.child_pids("ext") if p not in pids], 10, what="respawn")[0]
    wait_for(lambda: "SIGUSR2" in signal_log(log).get(new, []), 10, what="SIGUSR2 to the respawned child")
    assert master.status()["state"] == "paused"
    master.signal(signal.SIGCONT)
    for p in [pids[1], new]:
        wait_for(lambda: "SIGCONT" in signal_log(log).get(p, []), 10, what="SIGCONT forwarded")
    assert master.status()["state"] == "running"


@pytest.mark.parametrize("mode", ["late-handlers", "zend-late"])
def test_pause_waits_for_a_child_to_install_its_handlers(master, tmp_path, mode):
    """SIGUSR2's default action kills: it is only sent once the child catches it
    and SIGCONT. zend-late is PHP: it catches SIGUSR2 from its start and dies of
    it until queue:work installs its own handlers (a pause killed a booting
    queue:work when SIGUSR2 alone was looked at)."""
    log = tmp_path / "signals.log"
    master.write_config(ext_pool("late", "q", 1, log, (mode, "1.5")))
    master.start()
    pid = master.wait_children("late", 1)[0]
    master.signal(signal.SIGUSR2)
    wait_for(lambda: "SIGUSR2" in signal_log(log).get(pid, []), 10, what="a delayed SIGUSR2")
    assert proc_alive(pid) and master.child_pids("late") == [pid]
    assert "killed by signal 12" not in master.log()
    assert master.pool("late")["crashes"] == 0


def test_graceful_stop_waits_for_slow_children_and_kills_stubborn_ones(master, tmp_path):
    log = tmp_path / "signals.log"
    master.write_config(",\n".join([ext_pool("slow", "a", 1, log, ("slow-stop", "2")),
                                     ext_pool("stubborn", "b", 1, log, ("ignore-term",)),
                                     ext_pool("plain", "c", 2, log)]),
                        qpool="shutdown_timeout = 4;")
    master.start()
    pids = master.wait_children("slow", 1) + master.wait_children("stubborn", 1) + master.wait_children("plain", 2)
    wait_started(log, pids)
    sid = master.sid
    t0 = time.monotonic()
    master.signal(signal.SIGTERM)
    assert master.wait_exit(30) == 0
    elapsed = time.monotonic() - t0
    events = signal_log(log)
    assert all("SIGTERM" in events[p] for p in pids), events
    assert "EXIT" in events[pids[0]], "the slow child was allowed to finish"
    log_text = master.log()
    assert re.search(r"slow#1 \(pid %d\) exited with status 0 after stop \((1\.[5-9]|[2-3]\.\d) s" % pids[0], log_text), log_text
    assert "shutdown_timeout (4 s) passed: killing 1 children" in log_text
    assert re.search(r"stubborn#1 \(pid %d\) killed by signal 9" % pids[1], log_text)
    assert elapsed >= 3.5, "the stubborn child was given shutdown_timeout"
    assert session_pids(sid) == [], "processes left behind"
    assert not master.pid_file.exists() and not master.socket.exists()


def test_children_stop_gracefully_when_the_master_is_killed(master, tmp_path):
    # review #7: the parent-death signal of an external child is SIGTERM, so
    # queue:work finishes its job and exits, as on a graceful stop (it was
    # SIGKILL: the job was cut short and its attempt counted)
    log = tmp_path / "signals.log"
    master.write_config(ext_pool("ext", "q", 3, log, args=("slow-stop", "1")))
    master.start()
    pids = master.wait_children("ext", 3)
    wait_started(log, pids)
    os.kill(master.proc.pid, signal.SIGKILL)
    master.proc.wait(5)
    wait_for(lambda: not any(proc_alive(p) for p in pids), 10, what="children to stop after the master")
    events = signal_log(log)
    assert all("SIGTERM" in events.get(p, []) for p in pids), events
    assert session_pids(master.sid) == []


def test_a_root_master_warns_about_pools_without_a_user(master):
    # review #16: a root master running a pool as root says so, once per pool
    master.write_config('{ name = "rootly"; queues = ["q"]; processes = 1; command = %s; }, '
                        '{ name = "dropped"; queues = ["r"]; processes = 1; user = "nobody"; command = %s; }'
                        % (child_cmd("run"), child_cmd("run")))
    master.start()
    master.wait_children("rootly", 1)
    if os.geteuid() != 0:
        pytest.skip("needs root")
    assert master.count_log(r"pool rootly has no user: its children run as root") == 1
    assert "pool dropped has no user" not in master.log()


def test_reload_resizes_pools(master):
    body = '{ name = "ext"; queues = ["q"]; processes = %d; command = %s; }'
    master.write_config(body % (2, child_cmd("run")))
    master.start()
    first = master.wait_children("ext", 2)
    master.write_config(body % (4, child_cmd("run")))
    master.signal(signal.SIGHUP)
    grown = master.wait_children("ext", 4)
    assert set(first) <= set(grown), "a resize alone must not replace children"
    master.write_config(body % (1, child_cmd("run")))
    master.signal(signal.SIGHUP)
    master.wait_children("ext", 1)
    wait_for(lambda: len(children_of(master.proc.pid)) == 1, 10, what="stopped children to exit")


def test_reload_with_a_broken_file_keeps_the_old_pools(master):
    master.write_config('{ name = "ext"; queues = ["q"]; processes = 2; command = %s; }' % child_cmd("run"))
    master.start()
    pids = master.wait_children("ext", 2)
    master.conf.write_text(master.conf.read_text().replace("processes = 2;", "processes = 2; bogus_key = 1;"))
    master.signal(signal.SIGHUP)
    master.wait_log("reload of .* failed; the old configuration keeps running")
    assert re.search(r"qpool\.conf:\d+: unknown key 'bogus_key'", master.log())
    time.sleep(1.5)
    assert master.child_pids("ext") == pids
    assert master.proc.poll() is None


def test_reload_of_a_changed_pool_replaces_children_one_at_a_time(master):
    body = '{ name = "ext"; queues = ["q"]; processes = 3; command = %s; environment = { V = "%s"; }; }'
    master.write_config(body % (child_cmd("run"), "1"))
    master.start()
    old = master.wait_children("ext", 3)
    master.write_config(body % (child_cmd("run"), "2"))
    master.signal(signal.SIGHUP)
    seen_min = [3]

    def replaced():
        st = master.pool("ext")
        live = [c for c in st["children"] if c["state"] != "stopping"]
        seen_min[0] = min(seen_min[0], len(live))
        pids = [c["pid"] for c in live]
        return len(pids) == 3 and not set(pids) & set(old)
    wait_for(replaced, 20, interval=0.02, what="every child replaced")
    assert seen_min[0] >= 3, "the pool dropped below its size while rolling"
    for pid in master.child_pids("ext"):
        with open("/proc/%d/environ" % pid, "rb") as f:
            assert b"V=2" in f.read()


def test_a_second_master_on_the_same_pid_file_refuses(master):
    master.write_config('{ name = "ext"; queues = ["q"]; processes = 1; command = %s; }' % child_cmd("run"))
    master.start()
    res = subprocess.run([QPOOL, "run", "-c", str(master.conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 1
    assert "another qpool (pid %d) is running" % master.proc.pid in res.stderr
    assert master.proc.poll() is None


def test_systemd_unit_verifies(tmp_path):
    unit = ROOT / "systemd" / "qpool.service"
    # The unit names /usr/bin/qpool; verify a copy that points at this build.
    text = unit.read_text().replace("/usr/bin/qpool", QPOOL)
    copy = tmp_path / "qpool.service"
    copy.write_text(text)
    res = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "qpool.service" not in res.stderr, res.stderr


def test_systemd_notifications_and_watchdog(master, tmp_path):
    sock_path = tmp_path / "notify.sock"
    import socket as so
    srv = so.socket(so.AF_UNIX, so.SOCK_DGRAM)
    srv.bind(str(sock_path))
    srv.settimeout(0.2)
    got = []

    def drain():
        while True:
            try:
                got.append(srv.recv(4096).decode())
            except (so.timeout, BlockingIOError):
                return got

    master.write_config('{ name = "ext"; queues = ["q"]; processes = 2; command = %s; }' % child_cmd("run"))
    master.start(env={"NOTIFY_SOCKET": str(sock_path), "WATCHDOG_USEC": "400000"})
    wait_for(lambda: any("READY=1" in m for m in drain()), 10, what="READY=1")
    ready = [m for m in got if "READY=1" in m][0]
    assert "STATUS=ext 2/2" in ready and "MAINPID=%d" % master.proc.pid in ready
    wait_for(lambda: sum(m == "WATCHDOG=1" for m in drain()) >= 3, 10, what="watchdog pings")
    master.signal(signal.SIGHUP)
    wait_for(lambda: "RELOADING=1" in drain() and got.index("RELOADING=1") < len(got) - 1, 10, what="RELOADING=1")
    assert "READY=1" in got[got.index("RELOADING=1"):]
    for pid in master.child_pids("ext"):
        with open("/proc/%d/environ" % pid, "rb") as f:
            assert b"NOTIFY_SOCKET" not in f.read(), "children must not talk to systemd in the master's name"
    master.signal(signal.SIGTERM)
    master.wait_exit(30)
    assert "STOPPING=1" in drain()
    srv.close()


def test_journal_priorities_and_json_lines(master_factory, redis_server, tmp_path):
    # JOURNAL_STREAM names stderr (the log file): priority prefixes, no timestamps
    m = master_factory(redis_server, "journal")
    m.write_config('{ name = "crash"; queues = ["q"]; processes = 1; command = %s; }' % child_cmd("exit", "1", "0"))
    m.log_path.touch()
    st = os.stat(m.log_path)
    m.start(env={"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)})
    m.wait_log(r"restarting in 1 s")
    lines = [l for l in m.log().splitlines() if l]
    assert any(l.startswith("<6>master[") for l in lines), lines[:3]
    assert any(l.startswith("<4>master[") and "restarting in 1 s" in l for l in lines)
    m.stop()
    j = master_factory(redis_server, "json")
    j.write_config('{ name = "ext"; queues = ["q"]; processes = 1; command = %s; }' % child_cmd("run"),
                   qpool='log_format = "json";')
    j.start()
    j.wait_children("ext", 1)
    import json as js
    records = [js.loads(l) for l in j.log().splitlines() if l.startswith("{")]
    assert records and all({"ts", "level", "proc", "pid", "msg"} <= set(r) for r in records)
    assert any(r["msg"].startswith("pool ext: started ext#1") for r in records)


def test_children_get_a_clean_process_setup(master, tmp_path):
    wd = tmp_path / "work"
    wd.mkdir()
    log = tmp_path / "signals.log"
    master.write_config(ext_pool("ext", "q", 1, log, extra='nice = 5; working_directory = "%s"; ' % wd))
    master.start()
    pid = master.wait_children("ext", 1)[0]
    # The child is a Python interpreter: while it starts up it has module files
    # (and then its signal log) open for a moment. Look once it is idle, and
    # give a transient descriptor time to close; a leaked one never does.
    wait_started(log, [pid])
    fds = lambda: sorted(int(fd) for fd in os.listdir("/proc/%d/fd" % pid))
    try:
        wait_for(lambda: fds() == [0, 1, 2], 5, what="only stdin, stdout, stderr open")
    except AssertionError:
        raise AssertionError("the master's descriptors leaked into the child: %s" % fds())
    assert os.readlink("/proc/%d/cwd" % pid) == str(wd)
    with open("/proc/%d/stat" % pid) as f:
        assert int(f.read().rsplit(")", 1)[1].split()[16]) == 5  # nice
    mpid = master.proc.pid
    assert sorted(int(fd) for fd in os.listdir("/proc/%d/fd" % mpid)) != [0, 1, 2]  # sanity: the master has more


def shared_anon_sizes(pid):
    """Sizes of a process's shared anonymous mappings (the scoreboard)."""
    sizes = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[1].endswith("s") and parts[5] == "/dev/zero":
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                sizes.append(hi - lo)
    return sizes


def test_a_worker_maps_only_its_own_scoreboard_slot(master, tmp_path):
    """Review #6: a worker cannot write (or read) another child's slot."""
    master.write_config('{ name = "n"; queues = ["q"]; processes = 2; handler = { type = "pipe"; command = ["%s"]; };'
                        ' environment = { FIXTURE_LOG = "%s"; }; }' % (FIXTURE_HANDLER, tmp_path / "fixture.log"))
    master.start()
    pids = master.wait_children("n", 2)
    whole = shared_anon_sizes(master.proc.pid)
    assert whole and max(whole) >= 2 * 4096, whole
    for pid in pids:
        # a child just forked still has the whole of it until its set-up
        # maps its own slot and lets the rest go (seen on a loaded machine)
        wait_for(lambda: shared_anon_sizes(pid) == [4096], 10,
                 what="worker %d to map only its own slot" % pid)
        assert shared_anon_sizes(pid) == [4096], (pid, shared_anon_sizes(pid))


def test_the_master_kills_the_handler_group_of_a_killed_worker(master, r, tmp_path):
    """What a worker names in its slot is checked, then killed: the handler is never left behind."""
    log = tmp_path / "fixture.log"
    master.write_config('{ name = "n"; queues = ["q"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; };'
                        ' environment = { FIXTURE_LOG = "%s"; }; }' % (FIXTURE_HANDLER, log))
    master.start()
    worker = master.wait_children("n", 1)[0]
    push(r, "q", make_payload("hang"))
    line = wait_for(lambda: [l for l in read_fixture_log(log) if l[0] == "job"], 10, what="the job to start")[0]
    handler = int(line[4])
    assert handler != worker and pgid_members(handler)
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: not pgid_members(handler), 10, what="the handler's group to be killed by the master")
    assert "not killing process group" not in master.log()


def test_a_child_becomes_its_pools_user_with_its_groups_home_and_directory(master, tmp_path):
    """One child set-up (child.c): the user, its supplementary groups and its
    passwd entry are looked up in the master before the fork; the child gets
    them, HOME/USER/LOGNAME over the pool's own, its working directory, nice,
    its own process group, and nothing of the master's descriptors."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    import pwd
    pw = pwd.getpwnam("nobody")
    script = r"""grep -E '^(Uid|Gid|Groups):' /proc/$$/status | tr '\t' ' ' | sed 's/^/CHILD /'
echo "CHILD env HOME=$HOME USER=$USER LOGNAME=$LOGNAME APP=$APP"
echo "CHILD pwd $(pwd) nice $(cut -d' ' -f19 /proc/$$/stat) pgrp $(cut -d' ' -f5 /proc/$$/stat) pid $$"
echo "CHILD ready"
exec sleep 100"""
    script = script.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "; ")
    master.write_config('{ name = "u"; queues = ["q"]; processes = 1; user = "nobody"; nice = 5;'
                        ' working_directory = "/tmp"; environment = { HOME = "/from/the/pool"; APP = "x"; };'
                        ' command = ["/bin/sh", "-c", "%s"]; }' % script)
    master.start()
    master.wait_log(r"CHILD ready")
    out = dict(re.findall(r"(?m)^CHILD (\w+):? (.*?)\s*$", master.log()))
    groups = sorted(os.getgrouplist("nobody", pw.pw_gid))
    assert out["Uid"].split() == [str(pw.pw_uid)] * 4
    assert out["Gid"].split() == [str(pw.pw_gid)] * 4
    assert sorted(int(g) for g in out["Groups"].split()) == groups
    assert out["env"] == "HOME=%s USER=nobody LOGNAME=nobody APP=x" % pw.pw_dir
    m = re.match(r"/tmp nice 5 pgrp (\d+) pid (\d+)$", out["pwd"])
    assert m and m.group(1) == m.group(2), out["pwd"]
    # only stdio, read from outside once the shell has exec'd sleep (a listing
    # from inside the shell races with its own command-substitution pipes)
    pid = int(m.group(2))
    wait_for(lambda: cmdline(pid).startswith("sleep"), 10, what="the child to exec sleep")
    assert sorted(int(f) for f in os.listdir("/proc/%d/fd" % pid)) == [0, 1, 2]
