"""Preload's memory on Laravel 8, 10 and 13 (issue 21's acceptance): a
default adapter pool of 8 processes, after 2,000 jobs, holds at most 50 MiB
PSS in all its PHP processes together (the zygote and its 8 forks). The same
pool booting each handler (preload = false) is measured alongside, for the
record. Figures: docs/benchmarks.md ("Preload")."""
import os
import re

from conftest import wait_for
from laravel_roots import argv_conf, laravel_version, version_app  # noqa: F401 (fixtures)
from test_laravel_versions import CACHE_PREFIX

LIMIT_MIB = 50


def php_pss_mib(sid):
    total, n = 0, 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                sess = int(f.read().rsplit(")", 1)[1].split()[3])
            with open("/proc/%s/comm" % d) as f:
                comm = f.read().strip()
            if sess != sid or not comm.startswith("php"):
                continue
            with open("/proc/%s/smaps_rollup" % d) as f:
                total += int(re.search(r"^Pss:\s+(\d+)", f.read(), re.M).group(1))
            n += 1
        except (OSError, AttributeError, ValueError):
            continue
    return total / 1024, n


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
    return php_pss_mib(master.sid)


def test_eight_preloaded_handlers_hold_at_most_50_mib_pss(master_factory, redis_server, version_app):
    app = version_app
    app.env["MARKER_EVENTS"] = "0"
    r = redis_server.client()
    m = master_factory(redis_server, "preload")
    preload, n = run_pool(m, r, app, True)
    m.stop(30)
    assert n == 9, "a zygote and 8 handlers (%d PHP processes)" % n
    m2 = master_factory(redis_server, "boot")
    boot, n2 = run_pool(m2, r, app, False)
    m2.stop(30)
    print("Laravel %s, 8 processes after 2000 jobs: PSS %.1f MiB preloaded, %.1f MiB booting each (%d processes)"
          % (app.version.name, preload, boot, n2))
    assert preload <= LIMIT_MIB, "Laravel %s: %.1f MiB PSS" % (app.version.name, preload)
    assert preload < boot
