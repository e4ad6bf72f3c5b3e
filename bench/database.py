"""bench/run.py's `database` scenario (issue 30): Laravel's database queue
driver on SQLite, run by an app_driver pool beside `php artisan queue:work
database`. Measures, never asserts (docs/benchmarks.md).

  growth   2,000 ready jobs, then the master starts with one auto pool (min 1,
           max --db-max, balance_interval 1 s): the time from the master's
           start to its app agent's first answer, to target = max, to max
           workers started and to max handlers ready
  jobs/s   no-op jobs through 1 and 4 processes: an app_driver pool
           (preload, the defaults) and queue:work, interleaved round by
           round (qpool, queue:work, qpool, ...), medians; the workers are
           up and idle when the rows are inserted, the clock runs from the
           insert's commit to an empty jobs table
  memory   USS and PSS per PHP process of 4 processes after 500 jobs each:
           an app_driver pool (the zygote, its handlers and its agent) beside
           a Redis pool of the same app (the adapter, preload)
"""
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import time
import uuid

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "laravel-app"

# Laravel's jobs table (the 8.x-13.x `queue:table` migration), as
# tests/integration/test_app_driver.py makes it.
JOBS_TABLE = """
create table if not exists jobs (id integer primary key autoincrement not null, queue varchar not null,
  payload text not null, attempts integer not null, reserved_at integer, available_at integer not null,
  created_at integer not null);
create index if not exists jobs_queue_index on jobs (queue);
"""
KEYS = ("REDIS_HOST", "REDIS_PORT", "REDIS_PREFIX", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE", "LOG_CHANNEL",
        "MARKER_EVENTS")


class Db:
    """A copy of the fixture app with a `database` queue connection (as
    `laravel new` writes it) on the bench's SQLite file."""

    def __init__(self, env):
        self.env = env
        self.app = env.tmp / "dbapp"
        if not self.app.exists():
            shutil.copytree(APP, self.app, symlinks=True)
            conf = self.app / "config" / "queue.php"
            conf.write_text(conf.read_text().replace(
                "'connections' => [", "'connections' => [\n        'database' => ['driver' => 'database', "
                "'table' => 'jobs', 'queue' => 'default', 'retry_after' => 90, 'after_commit' => false],", 1))
        self.db = env.app_env["DB_DATABASE"]
        self.sql(JOBS_TABLE, script=True)
        self.artisan("fixture:dispatch", "NoopJob", "--connection=database", "--queue=default")
        self.payload = json.loads(self.sql("select payload from jobs")[0][0])
        self.sql("delete from jobs")

    def sql(self, q, args=(), script=False):
        con = sqlite3.connect(self.db, timeout=60)
        try:
            rows = con.executescript(q) if script else con.execute(q, args).fetchall()
            con.commit()
            return rows
        finally:
            con.close()

    def artisan(self, *args):
        return subprocess.run(["php", str(self.app / "artisan")] + list(args), cwd=str(self.app),
                              env=self.env.app_env, check=True, capture_output=True, text=True)

    def push(self, n):
        """n no-op jobs in one transaction, each with its own uuid."""
        now = int(time.time())
        rows = []
        for _ in range(n):
            p = dict(self.payload, uuid=str(uuid.uuid4()))
            rows.append(("default", json.dumps(p, separators=(",", ":")), 0, None, now, now))
        con = sqlite3.connect(self.db, timeout=60)
        try:
            con.executemany("insert into jobs (queue, payload, attempts, reserved_at, available_at, created_at) "
                            "values (?, ?, ?, ?, ?, ?)", rows)
            con.commit()
        finally:
            con.close()

    def left(self):
        return self.sql("select count(*) from jobs")[0][0]

    def settings(self):
        values = dict((k, self.env.app_env[k]) for k in KEYS)
        return 'working_directory = "%s"; environment = { %s }; handler = { type = "pipe"; command = %s; };' % (
            self.app, " ".join('%s = "%s";' % kv for kv in values.items()),
            json.dumps(["php", str(ROOT / "php" / "qpool-handler.php"), str(self.app)]))

    def pool(self, size, extra=""):
        return ('{ name = "db"; queues = ["default"]; %s queue_connection = "database"; app_driver = true; '
                'job_log = false; sleep = 0.1; %s %s }' % (size, self.settings(), extra))


def status(env, name):
    res = subprocess.run([env.qpool, "status", "--json", "-c", str(env.tmp / (name + ".conf"))],
                         capture_output=True, text=True)
    try:
        return json.loads(res.stdout)["pools"][0]
    except (ValueError, KeyError, IndexError):
        return None


def wait_idle(env, name, n, limit=120):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        p = status(env, name)
        if p and p.get("idle") == n:
            return True
        time.sleep(0.05)
    return False


def stop(p):
    p.terminate()
    p.wait(60)


def loadavg():
    return round(os.getloadavg()[0], 2)


# ---------------------------------------------------------------- growth

def growth(env, db, backlog=2000, top=8, running=False):
    """Seconds to: the agent's first sizes with the backlog, target = max,
    max workers started, max handlers ready (busy or idle); the log's
    balancer line. From the master's start with the backlog waiting, or
    (running) from the backlog's insert into the pool idle at 1."""
    db.sql("delete from jobs")
    if not running:
        db.push(backlog)
    t0 = time.monotonic()
    p, log = env.master(db.pool('balance = "auto"; min_processes = 1; max_processes = %d; auto_strategy = "size";'
                                % top), "dbgrow")
    if running:
        wait_idle(env, "dbgrow", 1)
        while (status(env, "dbgrow").get("agent") or {}).get("state") != "running":
            time.sleep(0.05)
        time.sleep(0.5)
        db.push(backlog)
        t0 = time.monotonic()
    seen = {}
    end = t0 + 30
    while time.monotonic() < end and "ready_max" not in seen:
        s = status(env, "dbgrow")
        now = round(time.monotonic() - t0, 3)
        if s:
            if "sizes" not in seen and s.get("counts_fresh") and any(q["ready"] for q in s["queues"]):
                seen["sizes"] = now
            if "target_max" not in seen and s["target"] == top:
                seen["target_max"] = now
            if "workers_max" not in seen and s["workers"] == top:
                seen["workers_max"] = now
            if s.get("busy", 0) + s.get("idle", 0) == top:
                seen["ready_max"] = now
        time.sleep(0.02)
    stop(p)
    text = log.read_text()
    seen["balancer_line"] = (re.findall(r"pool db: target 1 -> \d+ \([^)]*\)", text) or [None])[0]
    seen["left_of_backlog"] = db.left()
    seen["load"] = loadavg()
    return seen


# ---------------------------------------------------------------- jobs/s

def drain(db, jobs):
    db.push(jobs)
    t0 = time.monotonic()
    while db.left():
        time.sleep(0.02)
    return time.monotonic() - t0


def qpool_rate(env, db, n, jobs):
    db.sql("delete from jobs")
    p, _ = env.master(db.pool("processes = %d;" % n), "dbrate")
    try:
        if not wait_idle(env, "dbrate", n):
            return None
        return jobs / drain(db, jobs)
    finally:
        stop(p)


def queue_work_rate(env, db, n, jobs):
    db.sql("delete from jobs")
    procs = [subprocess.Popen(["php", str(db.app / "artisan"), "queue:work", "database", "--queue=default",
                               "--sleep=0.1"], cwd=str(db.app), env=env.app_env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        db.push(n)  # each booted and looping: the warm-up jobs are gone
        while db.left():
            time.sleep(0.05)
        time.sleep(1.0)
        return jobs / drain(db, jobs)
    finally:
        for q in procs:
            q.terminate()
        for q in procs:
            q.wait(30)


def rates(env, db, jobs, rounds=3):
    out = {}
    for n in (1, 4):
        q, w, loads = [], [], []
        for _ in range(rounds):
            loads.append(loadavg())
            q.append(qpool_rate(env, db, n, jobs))
            w.append(queue_work_rate(env, db, n, jobs))
        q = [x for x in q if x]
        out["processes_%d" % n] = {
            "jobs": jobs, "app_driver_jobs_per_s": [round(x) for x in q],
            "queue_work_jobs_per_s": [round(x) for x in w],
            "app_driver_median": round(statistics.median(q)) if q else None,
            "queue_work_median": round(statistics.median(w)),
            "app_driver_per_process": round(statistics.median(q) / n) if q else None,
            "queue_work_per_process": round(statistics.median(w) / n), "load": loads}
        print("database_rate_%d" % n, out["processes_%d" % n], flush=True)
    return out


# ---------------------------------------------------------------- memory

def uss_pss_kb(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            t = f.read()
    except OSError:
        return None
    v = dict((k, int(x)) for k, x in re.findall(r"^(\w+):\s+(\d+) kB", t, re.M))
    return {"uss": v.get("Private_Clean", 0) + v.get("Private_Dirty", 0), "pss": v.get("Pss", 0)}


def kinds(env, name, sid):
    """{kind: [{uss, pss}]} of the PHP processes in session sid: the pool's
    zygote and agent (their pids from status), every other one a handler."""
    st = status(env, name) or {}
    special = {(st.get("zygote") or {}).get("pid"): "zygote", (st.get("agent") or {}).get("pid"): "agent"}
    res = subprocess.run(["pgrep", "-s", str(sid), "^php"], capture_output=True, text=True)
    pids = set(int(x) for x in res.stdout.split()) | set(k for k in special if k)
    out = {}
    for pid in sorted(pids):
        m = uss_pss_kb(pid)
        if m:
            out.setdefault(special.get(pid, "handler"), []).append(m)
    return out


def summary(k):
    return dict((kind, {"n": len(v), "uss_mib": round(statistics.median(x["uss"] for x in v) / 1024, 1),
                        "pss_mib": round(statistics.median(x["pss"] for x in v) / 1024, 1)})
                for kind, v in k.items())


def memory(env, db, redis_pool, push_redis, n=4, each=500):
    db.sql("delete from jobs")
    p, _ = env.master(db.pool("processes = %d;" % n), "dbmem")
    wait_idle(env, "dbmem", n)
    drain(db, n * each)
    time.sleep(1.5)  # the agent has answered a few passes
    app_driver = summary(kinds(env, "dbmem", p.pid))
    stop(p)
    env.flush()
    p, _ = env.master(redis_pool(n), "rmem")
    wait_idle(env, "rmem", n)
    push_redis(n * each)
    while not env.drained():
        time.sleep(0.02)
    time.sleep(1.5)
    redis = summary(kinds(env, "rmem", p.pid))
    stop(p)
    out = {"processes": n, "jobs_each": each, "app_driver": app_driver, "redis_adapter": redis, "load": loadavg()}
    print("database_memory", out, flush=True)
    return out


def run(env, template, redis_pool, push_redis, jobs=2000, rounds=3, top=8):
    db = Db(env)
    out = {}
    for running in (False, True):
        key = "growth_" + ("running" if running else "from_start")
        out[key] = []
        for _ in range(rounds):
            out[key].append(growth(env, db, top=top, running=running))
            print("database_" + key, out[key][-1], flush=True)
        out[key + "_median_s"] = dict((k, statistics.median(g[k] for g in out[key] if k in g))
                                      for k in ("sizes", "target_max", "workers_max", "ready_max"))
    out["rates"] = rates(env, db, jobs, rounds)
    out["memory"] = memory(env, db, redis_pool, push_redis)
    return out
