"""Jobs/s of an app_driver pool built two ways, beside `queue:work`
(bench/database.py's jobs/s runs, docs/benchmarks.md "Jobs/s beside
queue:work"): each round runs the pool with the BEFORE build's qpool, with
the AFTER build's, and queue:work, in turn (the first two swapped every other
round), on SQLite and MariaDB, 1 and 4 processes; medians. The PHP adapter is
this tree's for both builds. Measures, never asserts.

  /usr/bin/python3 bench/database_ab.py BEFORE_BUILD AFTER_BUILD [JOBS] [ROUNDS]
"""
import json
import statistics
import sys

import database
import run as bench


def ab_rates(env, db, builds, jobs, rounds):
    out = {}
    for n in (1, 4):
        got = dict((k, []) for k in list(builds) + ["queue:work"])
        loads = []
        for r in range(rounds):
            loads.append(database.loadavg())
            order = list(builds) if r % 2 == 0 else list(builds)[::-1]
            for name in order:
                env.qpool = builds[name]
                rate, _ = database.qpool_rate(env, db, n, jobs)
                got[name].append(round(rate) if rate else None)
            rate, _ = database.queue_work_rate(env, db, n, jobs)
            got["queue:work"].append(round(rate))
        out["processes_%d" % n] = dict(
            ((k, {"runs": v, "median": statistics.median([x for x in v if x]) if any(v) else None})
             for k, v in got.items()), load=loads)
        print("ab_%s_%d" % (db.kind, n), json.dumps(out["processes_%d" % n]), flush=True)
    return out


def main():
    before, after = sys.argv[1], sys.argv[2]
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    env = bench.Env(after)
    builds = {"before": str(bench.pathlib.Path(before).resolve() / "qpool"), "after": env.qpool}
    results = {}
    try:
        db = database.Db(env)
        try:
            results["sqlite"] = ab_rates(env, db, builds, jobs, rounds)
        finally:
            db.close()
        sys.path.insert(0, str(database.ROOT / "tests" / "integration"))
        import sqlservers
        (env.tmp / "mariadb").mkdir(exist_ok=True)
        srv = sqlservers.start_server("mariadb", env.tmp / "mariadb")
        db = None
        try:
            db = database.Db(env, srv)
            results["mariadb"] = ab_rates(env, db, builds, jobs, rounds)
        finally:
            if db:
                db.close()
            sqlservers.stop_server(srv)
    finally:
        env.close()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
