"""Preload (issue 21): a pool whose handler is the PHP adapter boots the app
once in a zygote and forks its handlers. Each test here guards one thing a
fork gets wrong unless it is handled, with the fixture app really opening a
Redis and an SQLite connection and drawing random numbers while it boots
(FIXTURE_BOOT_HAZARDS, tests/laravel-app/app/Support/BootHazards.php)."""
import os
import re
import shutil
import signal
import time

import pytest

from conftest import LARAVEL_APP, ROOT, proc_alive, queue_state, session_pids, wait_for

ADAPTER = ROOT / "php" / "qpool-handler.php"


def env_block(app, hazards, more=""):
    """The app's environment block, with FIXTURE_BOOT_HAZARDS (and more settings)."""
    block = app.env_conf()
    return block[:block.rindex("}")] + ' FIXTURE_BOOT_HAZARDS = "%s"; %s };' % (hazards, more)


def pool(app, processes=2, hazards="", extra="", app_path=None, env=""):
    path = app_path or LARAVEL_APP
    return ('{ name = "app"; queues = ["default"]; processes = %d; working_directory = "%s"; %s\n'
            '  handler = { type = "pipe"; command = ["php", "%s", "%s"]; }; %s }'
            % (processes, path, env_block(app, hazards, env), ADAPTER, path, extra))


def forked_pids(master):
    return {int(p) for p in re.findall(r"qpool-handler\[(\d+)\]: Laravel [\d.]+ forked by zygote", master.log())}


def probes(app):
    return [m for m in app.read_markers() if m.get("job") == "ForkProbeJob"]


def settled(r):
    st = queue_state(r, "default")
    return st["ready"] == 0 and st["delayed"] == 0 and st["reserved"] == 0


def zygote_pids(master):
    return [int(p) for p in re.findall(r"started its zygote \(pid (\d+)", master.log())]


def run_probes(master, r, app, processes=3, count=9, hazards="redis,db,rand", extra="", sleep_ms=300, env=""):
    """Start the pool and run count probes, spread over its handlers (each
    sleeps a while, so that every handler gets some); returns the markers."""
    master.write_config(pool(app, processes, hazards, extra, env=env))
    master.start()
    app.dispatch("ForkProbeJob", 200, sleep_ms, count=count, tag="p")
    wait_for(lambda: len(probes(app)) == count and settled(r), 60, what="the probes")
    ms = probes(app)
    assert len({m["pid"] for m in ms}) >= 2, "the probes ran on one handler only: %s" % ms
    return ms


def one_per_handler(ms):
    seen = {}
    for m in ms:
        seen.setdefault(m["pid"], m)
    return list(seen.values())


def test_handlers_are_forks_of_one_zygote(master, r, laravel_app):
    ms = run_probes(master, r, laravel_app)
    zygotes = zygote_pids(master)
    assert len(zygotes) == 1, master.log()[-3000:]
    assert {m["ppid"] for m in ms} == {zygotes[0]}, "every handler is a child of the zygote"
    assert master.count_log(r"forked by zygote %d" % zygotes[0]) >= 2
    cmd = open("/proc/%d/cmdline" % zygotes[0]).read().rstrip("\0").split("\0")
    # it ran itself again with OPcache on (compiled code shared by every fork), keeping its command line
    assert cmd[1:3] == ["-d", "opcache.enable_cli=1"] and cmd[-3:-1] == [str(ADAPTER), "--zygote"], cmd
    assert all(m["opcache"] == [True, False] for m in ms), "OPcache on, its JIT as PHP sets it (off): %s" % ms


def test_qpool_zygote_jit_1_turns_on_the_jit_in_every_handler(master, r, laravel_app):
    """The pool's environment asks for OPcache's tracing JIT, which the handlers share."""
    ms = run_probes(master, r, laravel_app, count=4, hazards="", env='QPOOL_ZYGOTE_JIT = "1";')
    assert all(m["opcache"] == [True, True] for m in ms), [m["opcache"] for m in ms]
    cmd = open("/proc/%d/cmdline" % zygote_pids(master)[0]).read().rstrip("\0").split("\0")
    assert cmd[-3:-1] == [str(ADAPTER), "--zygote"], cmd
    assert "QPOOL_ZYGOTE_JIT=1, but" not in master.log()


def test_a_redis_connection_opened_at_boot_is_not_shared(master, r, laravel_app):
    """Without the purge every handler talks over the zygote's socket: replies cross."""
    ms = one_per_handler(run_probes(master, r, laravel_app, hazards="redis"))
    boot_id = ms[0]["boot_redis_id"]
    assert boot_id, "the boot opened a Redis connection"
    ids = [m["redis_id"] for m in ms]
    assert boot_id not in ids and len(set(ids)) == len(ids), (boot_id, ids)
    assert all(m["crossed"] == 0 for m in probes(laravel_app))


def test_a_database_connection_opened_at_boot_is_not_shared(master, r, laravel_app):
    """Each handler opens its own PDO; none uses the one the boot opened."""
    ms = run_probes(master, r, laravel_app, hazards="db")
    assert not any(m["boot_pdo"] for m in ms), ms
    assert all(m["db_pid"] == m["pid"] for m in ms)


def test_each_handler_draws_its_own_random_numbers(master, r, laravel_app):
    """The boot drew from mt_rand: without a reseed every fork repeats one sequence."""
    ms = one_per_handler(run_probes(master, r, laravel_app, hazards="rand"))
    for key in ("mt_rand", "rand", "shuffle", "array_rand", "arr_random", "str_shuffle"):
        draws = [repr(m[key]) for m in ms]
        assert len(set(draws)) == len(draws), "%s repeats across handlers: %s" % (key, draws)


def test_each_handler_leads_its_own_group_with_default_signals(master, r, laravel_app):
    ms = run_probes(master, r, laravel_app)
    zygote = zygote_pids(master)[0]
    assert all(m["pgid"] == m["pid"] != os.getpgid(zygote) for m in ms), ms
    # the zygote ignores SIGCHLD (its forks are reaped by the kernel): a
    # handler that kept that would lose every exit status of what a job runs
    assert all(m["exec_rc"] == 3 for m in ms), [m["exec_rc"] for m in ms]


def test_a_timeout_kills_only_that_handler(master, r, laravel_app):
    app = laravel_app
    master.write_config(pool(app, 2, extra="tries = 1;"))
    master.start()
    app.dispatch("ForkProbeJob", 1, 0, count=4, tag="warm")
    wait_for(lambda: len(probes(app)) == 4 and settled(r), 30, what="warm-up probes")
    zygote = zygote_pids(master)[0]
    before = {m["pid"] for m in probes(app)}
    app.dispatch("TimeoutJob", tag="to")  # $timeout = 1, $tries = 2
    wait_for(lambda: len(app.failed_jobs()) == 1 and settled(r), 40, what="the timeout failure")
    runs = [m["pid"] for m in app.read_markers() if m.get("job") == "TimeoutJob" and "event" not in m]
    assert proc_alive(zygote), "the zygote survived the timeouts"
    killed = set(runs)
    assert killed and not any(proc_alive(p) for p in killed)
    # the other handler lives on, unless the retry ran on it and timed out too
    # (attempt 2 went to the other worker: both handlers were the job's)
    assert all(proc_alive(p) for p in before - killed), "the other handler died: %s %s" % (before, killed)
    assert zygote_pids(master) == [zygote], "no new zygote was needed"


def test_a_dead_idle_handler_is_seen_at_once(master, r, laravel_app):
    """Its pipes are held by nobody else (not the zygote, not a sibling): the
    worker sees EOF, so the next job runs on a new handler at once instead of
    waiting for its timeout in a pipe nobody reads."""
    app = laravel_app
    master.write_config(pool(app, 1, extra="timeout = 120;"))
    master.start()
    app.dispatch("ForkProbeJob", 1, 0, tag="a")
    wait_for(lambda: len(probes(app)) == 1 and settled(r), 30, what="the first probe")
    victim = probes(app)[0]["pid"]
    zygote = zygote_pids(master)[0]
    link = os.readlink("/proc/%d/fd/%s" % (victim, holder_fd(victim)))
    holders = [pid for pid in session_pids(master.sid) if pid != victim and holds(pid, link)]
    assert len(holders) == 1 and holders[0] != zygote, "only the worker holds the handler's channel: %s" % holders
    os.kill(victim, signal.SIGKILL)
    app.dispatch("ForkProbeJob", 1, 0, tag="b")
    # well within the job's 120 s timeout, which a request to a dead handler would wait out
    wait_for(lambda: len(probes(app)) == 2 and settled(r), 30, what="the job after the kill")
    assert probes(app)[1]["pid"] != victim


def holder_fd(pid):
    """The handler's response channel: the pipe it holds that its worker reads."""
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("pipe:") and int(fd) > 2:
                return fd
        except OSError:
            pass
    raise AssertionError("no pipe in %d" % pid)


def holds(pid, link):
    try:
        return any(os.readlink("/proc/%d/fd/%s" % (pid, fd)) == link for fd in os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return False


def test_a_killed_zygote_is_restarted_and_running_handlers_go_on(master, r, laravel_app):
    app = laravel_app
    master.write_config(pool(app, 1))
    master.start()
    app.dispatch("ForkProbeJob", 1, 0, tag="warm")
    wait_for(lambda: len(probes(app)) == 1 and settled(r), 30, what="the first probe")
    handler = probes(app)[0]["pid"]
    first = zygote_pids(master)[0]
    app.dispatch("ForkProbeJob", 1, 3000, tag="slow")  # runs while its zygote dies
    wait_for(lambda: queue_state(r, "default")["reserved"] == 1, 10, what="the slow probe to start")
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: len(probes(app)) == 2 and settled(r), 30, what="the slow probe to finish")
    assert probes(app)[1]["pid"] == handler and proc_alive(handler), "the running handler went on"
    master.wait_log(r"its zygote \(pid %d\) killed by signal 9.*restarting it in" % first, timeout=10)
    wait_for(lambda: len(zygote_pids(master)) == 2, 10, what="a new zygote")
    second = zygote_pids(master)[1]
    os.kill(handler, signal.SIGKILL)  # the next handler comes from the new zygote
    app.dispatch("ForkProbeJob", 1, 0, tag="after")
    wait_for(lambda: len(probes(app)) == 3 and settled(r), 30, what="a probe on a new handler")
    assert probes(app)[2]["ppid"] == second


def test_while_the_zygote_is_down_new_handlers_boot_the_app(master, r, laravel_app):
    """A zygote waiting out its restart backoff does not hold jobs up: the
    requests it never read are dropped and workers boot their handlers.

    On a busy machine the backoff (doubling from 1 s) can run out before the
    worker needs its next handler, and the new zygote rightly forks it: the
    round is then played again, with the next zygote killed and a longer
    backoff, until a probe ran while no zygote was up."""
    app = laravel_app
    master.write_config(pool(app, 1))
    master.start()
    app.dispatch("ForkProbeJob", 1, 0, tag="warm")
    wait_for(lambda: len(probes(app)) == 1 and settled(r), 30, what="the first probe")
    z = zygote_pids(master)[-1]
    os.kill(z, signal.SIGKILL)
    master.wait_log(r"its zygote \(pid %d\) killed by signal 9" % z, timeout=10)
    wait_for(lambda: len(zygote_pids(master)) == 2, 10, what="the zygote to restart")
    for n in range(2, 7):  # the backoff: 2 s, then 4, 8, 16, 32
        zygotes = zygote_pids(master)
        os.kill(zygotes[-1], signal.SIGKILL)
        master.wait_log(r"its zygote \(pid %d\) killed by signal 9" % zygotes[-1], timeout=10)
        os.kill(probes(app)[-1]["pid"], signal.SIGKILL)
        app.dispatch("ForkProbeJob", 1, 0, tag="meanwhile%d" % n)
        wait_for(lambda: len(probes(app)) == n and settled(r), 60, what="a probe while the zygote is down")
        ppid = probes(app)[-1]["ppid"]
        if ppid in master.child_pids("app"):
            return  # booted by its worker
        assert ppid in zygote_pids(master)[len(zygotes):], "forked by neither its worker nor a zygote started since"
    pytest.fail("a new zygote was up before every probe: the backoff never outlasted a handler's start")


def test_an_app_that_keeps_a_socket_open_boots_each_handler(master, r, laravel_app):
    """A connection qpool cannot close (opened by the app itself in a provider)
    is never shared: the zygote says which and each handler boots on its own."""
    ms = run_probes(master, r, laravel_app, processes=2, count=4, hazards="socket,rand")
    log = master.log()
    assert re.search(r"keeps connections open after boot \(fd \d+: tcp 127\.0\.0\.1:\d+ -> 127\.0\.0\.1:%d"
                     % int(laravel_app.env["REDIS_PORT"]), log), log[-3000:]
    assert "cannot preload the app" in log
    assert "forked by zygote" not in log
    assert not any(m["ppid"] in zygote_pids(master) for m in ms)


def test_preload_false_boots_each_handler(master, r, laravel_app):
    ms = run_probes(master, r, laravel_app, processes=2, count=4, extra="preload = false;")
    log = master.log()
    assert not zygote_pids(master) and "forked by zygote" not in log
    workers = set(master.child_pids("app"))
    assert {m["ppid"] for m in ms} <= workers


def test_the_memory_limit_counts_a_forked_handler_s_private_memory(master, r, laravel_app):
    """Worker RSS + handler RSS is well over 24 MB, most of it the zygote's
    pages every handler shares; worker RSS + the handler's USS is not."""
    app = laravel_app
    master.write_config(pool(app, 1, extra="memory = 24;"))
    master.start()
    app.dispatch("ForkProbeJob", 1, 0, count=5, tag="m")
    wait_for(lambda: len(probes(app)) == 5 and settled(r), 30, what="the probes")
    assert "passed its memory limit" not in master.log()
    handler = probes(app)[-1]["pid"]
    rss = int(open("/proc/%d/statm" % handler).read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    assert rss > 24 * 1024 - 6000, "the test needs a handler whose RSS alone nears the limit (%d kB)" % rss
    st = master.status()
    child = st["pools"][0]["children"][0]
    assert child["memory"] == "rss+uss" and child["rss_kb"] < 24 * 1024
    z = st["pools"][0]["zygote"]
    assert z["pid"] == zygote_pids(master)[0] and z["pss_kb"] > 0 and z["rss_kb"] > z["pss_kb"] / 2


def test_restarts_boot_a_new_zygote_and_roll_the_pool_onto_it(master, r, laravel_app):
    """qpool restart, then php artisan queue:restart: each boots a new zygote,
    the pool rolls onto it (never below its size), the old zygote goes."""
    app = laravel_app
    master.write_config(pool(app, 2))
    master.start()
    master.wait_children("app", 2)
    master.cli("restart", "app")
    master.wait_log(r"started its zygote \(pid \d+, generation 2\)", timeout=20)
    app.artisan("queue:restart")
    master.wait_log(r"started its zygote \(pid \d+, generation 3\)", timeout=30)

    def rolled():
        p = master.pool("app")
        live = [c for c in p["children"] if c["state"] != "stopping"]
        return len(live) == 2 and not any(c["old_generation"] for c in live) and p["zygote"]["generation"] == 3
    wait_for(rolled, 30, what="the pool to roll onto generation 3")
    first, second = zygote_pids(master)[:2]
    wait_for(lambda: not proc_alive(first) and not proc_alive(second), 30, what="the old zygotes to go")
    app.dispatch("ForkProbeJob", 1, 0, count=4, tag="after")
    wait_for(lambda: len(probes(app)) == 4 and settled(r), 30, what="probes on the new generation")
    assert {m["ppid"] for m in probes(app)} == {zygote_pids(master)[2]}


def test_a_zygote_whose_app_does_not_boot_is_the_pool_s_crash(master, r, laravel_app, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(LARAVEL_APP, broken, symlinks=True, ignore=shutil.ignore_patterns("storage"))
    (broken / "bootstrap" / "app.php").write_text("<?php\nthrow new RuntimeException('no boot today');\n")
    master.write_config(pool(laravel_app, 1, app_path=broken))
    master.start()
    master.wait_log(r"its zygote \(pid \d+\) exited with status 1 after .*did the app boot\?.*restarting it in 1 s",
                    timeout=20)
    assert "no boot today" in master.log()
    wait_for(lambda: master.pool("app")["crashes"] >= 1, 10, what="the crash to be counted")


def releases(tmp_path):
    """release1 and release2 (copies of the fixture app sharing its storage),
    and current -> release1, as Envoyer, Forge and Deployer lay them out."""
    rel1, rel2 = tmp_path / "release1", tmp_path / "release2"
    for rel in (rel1, rel2):
        shutil.copytree(LARAVEL_APP, rel, symlinks=True, ignore=shutil.ignore_patterns("storage"))
        os.symlink(LARAVEL_APP / "storage", rel / "storage")
    current = tmp_path / "current"
    os.symlink(rel1, current)
    return rel1, rel2, current


def deploy(tmp_path, current, release):
    """current -> release, swapped in one rename (ln -sfn does the same)."""
    tmp = tmp_path / "current.new"
    os.symlink(release, tmp)
    os.replace(tmp, current)


def test_a_deploy_that_moves_the_app_symlink_boots_a_new_zygote(master, r, laravel_app, tmp_path):
    """current -> release1, then current -> release2 (as Envoyer and Forge
    deploy): the pool boots a new zygote from release2 and rolls onto it."""
    rel1, rel2, current = releases(tmp_path)
    app = laravel_app
    master.write_config(pool(app, 2, app_path=current))
    master.start()
    master.wait_log(r"zygote: Laravel [\d.]+ booted from %s " % re.escape(str(rel1)), timeout=30)
    deploy(tmp_path, current, rel2)
    master.wait_log(r"the app moved", timeout=20)
    master.wait_log(r"zygote: Laravel [\d.]+ booted from %s " % re.escape(str(rel2)), timeout=30)
    wait_for(lambda: (lambda cs: len(cs) == 2 and not any(c["old_generation"] for c in cs))(
        [c for c in master.pool("app")["children"] if c["state"] != "stopping"]), 30, what="the pool to roll")
    assert master.pool("app")["zygote"]["generation"] == 2
    app.dispatch("MarkerJob", tag="after")
    wait_for(lambda: [m for m in app.read_markers() if m.get("tag") == "after"], 30, what="a job on the new code")
    assert len(master.child_pids("app")) == 2


def test_no_job_is_lost_when_handlers_and_zygotes_are_killed(master, r, laravel_app):
    """Chaos with the adapter: forked handlers (mostly mid-job), zygotes and
    now and then a worker are SIGKILLed at random; every job still runs to
    completion, nothing is left reserved, and a SIGKILLed master leaves no
    zygote or handler behind."""
    import json
    import random
    from conftest import kill_a_worker
    seed = int(os.environ.get("QPOOL_CHAOS_SEED", "21"))  # fixed: the same kills in every run
    rng = random.Random(seed)
    app = laravel_app
    n = 800
    master.write_config(pool(app, 4, extra="tries = 0; backoff = 0; retry_after = 5; timeout = 5;"))
    app.dispatch("SleepJob", 25, count=n, tag="c")
    ids = {json.loads(p)["id"] for p in r.lrange("laravel_database_queues:default", 0, -1)}
    assert len(ids) == n
    master.start()
    tally = {"handler": 0, "zygote": 0, "worker": 0}
    killed = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (settled(r) and r.llen("laravel_database_queues:default") == 0):
        zygotes = [z for z in zygote_pids(master) if proc_alive(z)]
        handlers = [h for h in forked_pids(master) if proc_alive(h)]  # a dead zygote's too
        what = rng.choices(["handler", "zygote", "worker", None], [6, 1, 0.5, 2])[0]
        if tally["handler"] < 3 and what == "zygote":
            what = "handler"  # forked handlers first: a zygote killed at once leaves booted ones only
        elif tally["handler"] >= 3 and not tally["zygote"]:
            what = "zygote"  # then one zygote kill for sure
        victims = {"handler": handlers, "zygote": zygotes}.get(what)
        if what == "worker":
            tally["worker"] += kill_a_worker(master, rng, killed)
        elif victims:
            try:
                os.kill(rng.choice(victims), signal.SIGKILL)
                tally[what] += 1
            except ProcessLookupError:
                pass
        time.sleep(rng.uniform(0.05, 0.25))
    ctx = "seed %d, %r" % (seed, tally)
    wait_for(lambda: settled(r), 120, interval=0.2, what="every job to be settled (%s)" % ctx)
    done = set(re.findall(r"Processed +App\\Jobs\\SleepJob \[([0-9A-Za-z]+)\]", master.log()))
    assert not ids - done, "%d jobs never ran to completion (%s)" % (len(ids - done), ctx)
    assert app.failed_jobs() == [], ctx
    assert tally["handler"] >= 3 and tally["zygote"] >= 1, ctx
    app.dispatch("SleepJob", 1500, count=4, tag="busy")
    wait_for(lambda: len([m for m in app.read_markers() if (m.get("tag") or "").startswith("busy")]) >= 3, 30,
             what="busy handlers")
    tree = session_pids(master.sid)
    master.signal(signal.SIGKILL)
    master.wait_exit(10)
    wait_for(lambda: not [p for p in tree if proc_alive(p)] or None, 30, interval=0.1,
             what="every worker, zygote and handler of the dead master to go")
