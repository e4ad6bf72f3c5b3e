"""Jobs/s of an app_driver pool built two ways, beside `queue:work`
(bench/database.py's jobs/s runs, docs/benchmarks.md "Jobs/s beside
queue:work"): each round runs the pool with the BEFORE build's qpool, with
the AFTER build's, and queue:work, in turn (the first two swapped every other
round), on SQLite and MariaDB, 1 and 4 processes; medians. The PHP adapter is
this tree's for both builds. Measures, never asserts.

  /usr/bin/python3 bench/database_ab.py BEFORE_BUILD AFTER_BUILD [JOBS] [ROUNDS] [PROCESSES,...]
"""
import json
import statistics
import sys

import database
import run as bench


def switches(pids):
    """Voluntary context switches (the process waited: for a pipe, the
    database, a lock) of the processes."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
        except (OSError, ValueError, IndexError):
            pass
    return total


def pool_rate(env, db, n, jobs):
    """database.qpool_rate, plus the voluntary context switches per job of
    the pool's handlers and workers."""
    db.clear()
    p, _ = env.master(db.pool("processes = %d;" % n), "dbrate")
    try:
        if not database.wait_idle(env, "dbrate", n):
            return None, None
        st = database.status(env, "dbrate")
        zygote, agent = st["zygote"]["pid"], (st.get("agent") or {}).get("pid")
        pids = [x for x in database.children(zygote) if x != agent] + \
            [x for x in database.children(p.pid) if x != zygote]
        before = switches(pids)
        rate = jobs / database.drain(db, jobs)
        return rate, (switches(pids) - before) / jobs
    finally:
        database.stop(p)


def ab_rates(env, db, builds, jobs, rounds, procs=(1, 4)):
    out = {}
    for n in procs:
        got = dict((k, []) for k in list(builds) + ["queue:work"])
        waits = dict((k, []) for k in builds)
        loads = []
        for r in range(rounds):
            loads.append(database.loadavg())
            order = list(builds) if r % 2 == 0 else list(builds)[::-1]
            for name in order:
                env.qpool = builds[name]
                rate, sw = pool_rate(env, db, n, jobs)
                got[name].append(round(rate) if rate else None)
                waits[name].append(round(sw, 2) if sw is not None else None)
            rate, _ = database.queue_work_rate(env, db, n, jobs)
            got["queue:work"].append(round(rate))
        out["processes_%d" % n] = dict(
            ((k, {"runs": v, "median": statistics.median([x for x in v if x]) if any(v) else None})
             for k, v in got.items()), load=loads,
            switches_per_job=dict((k, statistics.median([x for x in v if x is not None])) for k, v in waits.items()
                                  if any(x is not None for x in v)))
        print("ab_%s_%d" % (db.kind, n), json.dumps(out["processes_%d" % n]), flush=True)
    return out


def main():
    before, after = sys.argv[1], sys.argv[2]
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    procs = [int(x) for x in sys.argv[5].split(",")] if len(sys.argv) > 5 else (1, 4)
    env = bench.Env(after)
    builds = {"before": str(bench.pathlib.Path(before).resolve() / "qpool"), "after": env.qpool}
    results = {}
    try:
        db = database.Db(env)
        try:
            results["sqlite"] = ab_rates(env, db, builds, jobs, rounds, procs)
        finally:
            db.close()
        sys.path.insert(0, str(database.ROOT / "tests" / "integration"))
        import sqlservers
        (env.tmp / "mariadb").mkdir(exist_ok=True)
        srv = sqlservers.start_server("mariadb", env.tmp / "mariadb")
        db = None
        try:
            db = database.Db(env, srv)
            results["mariadb"] = ab_rates(env, db, builds, jobs, rounds, procs)
        finally:
            if db:
                db.close()
            sqlservers.stop_server(srv)
    finally:
        env.close()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
