"""Preload's memory on Laravel 8, 10 and 13 (issue 21's acceptance): a
default adapter pool of 8 processes, after 2,000 jobs, holds at most 50 MiB
PSS in all its PHP processes together (the zygote and its 8 forks).

PSS here is all of it: Pss_Anon + Pss_Shmem + Pss_File from
/proc/PID/smaps_rollup, the processes' own memory (heap, OPcache) and their
share of the PHP binary's and its libraries' pages. In the test roots those
files are a chroot's own copy that nothing else maps, so the file part is
the most it can be; on a host, other PHP processes share it. It is small
because the zygote unmaps the pages only its boot touched (they were 15 MiB
of its PSS with PHP 8.4; see Zygote::releaseBootPages). The same pool
booting each handler (preload = false) is measured for the record.
Figures: docs/benchmarks.md ("Preload")."""
import re

from conftest import proc_stats, wait_for
from laravel_roots import argv_conf, laravel_version, version_app  # noqa: F401 (fixtures)
from test_laravel_versions import CACHE_PREFIX

LIMIT_MIB = 50


def php_memory(sid):
    """PHP processes of session sid: (count, own PSS MiB, file PSS MiB)."""
    n, own, files = 0, 0, 0
    for pid, state, _, _, sess in proc_stats():
        try:
            with open("/proc/%d/comm" % pid) as f:
                php = f.read().startswith("php")
            if sess != sid or state == "Z" or not php:
                continue
            with open("/proc/%d/smaps_rollup" % pid) as f:
                text = f.read()
        except OSError:
            continue
        kb = {k: int(re.search(r"^%s:\s+(\d+)" % k, text, re.M).group(1)) for k in ("Pss_Anon", "Pss_Shmem", "Pss_File")}
        n += 1
        own += kb["Pss_Anon"] + kb["Pss_Shmem"]
        files += kb["Pss_File"]
    return n, own / 1024, files / 1024


def run_pool(master, r, app, preload, jobs=2000):
    master.write_config('{ name = "app"; queues = ["default"]; processes = 8; cache_prefix = "%s"; %s\n'
                        '  handler = { type = "pipe"; command = %s; }; preload = %s; }'
                        % (CACHE_PREFIX[app.version.name], app.env_conf(), argv_conf(app.adapter_argv()),
                           "true" if preload else "false"))
    master.start()
    app.dispatch("NoopJob", count=jobs)
    k = "laravel_database_queues:default"
    wait_for(lambda: r.llen(k) == 0 and r.zcard(k + ":reserved") == 0, 240, interval=0.2, what="2000 jobs")
    wait_for(lambda: master.pool("app")["busy"] == 0, 10)
    res = php_memory(master.sid)
    master.stop(30)
    return res


def test_eight_preloaded_handlers_hold_at_most_50_mib_pss(master_factory, redis_server, version_app):
    app = version_app
    app.env["MARKER_EVENTS"] = "0"
    r = redis_server.client()
    n, own, files = run_pool(master_factory(redis_server, "preload"), r, app, True)
    assert n == 9, "a zygote and 8 handlers (%d PHP processes)" % n
    n2, own2, files2 = run_pool(master_factory(redis_server, "boot"), r, app, False)
    print("Laravel %s, 8 processes after 2000 jobs, PSS in MiB: preloaded %.1f (+ %.1f of files: %.1f), "
          "booting each %.1f (+ %.1f: %.1f)" % (app.version.name, own, files, own + files, own2, files2, own2 + files2))
    assert own + files <= LIMIT_MIB, "Laravel %s: %.1f MiB PSS (%.1f own, %.1f of files)" % (
        app.version.name, own + files, own, files)
    assert own + files < own2 + files2
