"""bench/run.py's `database` scenario (issue 30): Laravel's database queue
driver on SQLite, MariaDB and PostgreSQL (the servers of
tests/integration/sqlservers.py), run by an app_driver pool beside `php
artisan queue:work database`. Measures, never asserts (docs/benchmarks.md).

  growth   SQLite: 2,000 ready jobs, then the master starts with one auto
           pool (min 1, max 8, balance_interval 1 s); and 2,000 inserted
           into that pool running idle at 1: the time to its app agent's
           first sizes, to target = max, to max workers started and to max
           handlers ready
  jobs/s   no-op jobs through 1 and 4 processes: an app_driver pool
           (preload, the defaults) and queue:work, interleaved round by
           round (qpool, queue:work, qpool, ...), medians; the workers are
           up and idle when the rows are inserted, the clock runs from the
           insert's commit to an empty jobs table; the CPU ms per job of
           each side's processes (/proc/PID/stat)
  memory   USS and PSS per PHP process of 4 processes after 500 jobs each:
           an app_driver pool (the zygote, its handlers and its agent) beside
           a Redis pool of the same app (the adapter, preload), and
           queue:work's (SQLite)
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

# Laravel's jobs table (the 8.x-13.x `queue:table` migration) on each server.
JOBS_TABLE = {
    "sqlite": ["create table if not exists jobs (id integer primary key autoincrement not null, queue varchar not "
               "null, payload text not null, attempts integer not null, reserved_at integer, available_at integer "
               "not null, created_at integer not null)", "create index if not exists jobs_queue_index on jobs (queue)"],
    "mariadb": ["create table jobs (id bigint unsigned not null auto_increment primary key, queue varchar(255) not "
                "null, payload longtext not null, attempts tinyint unsigned not null, reserved_at int unsigned null, "
                "available_at int unsigned not null, created_at int unsigned not null, index jobs_queue_index (queue))"
                " default character set utf8mb4 collate utf8mb4_unicode_ci"],
    "postgres": ["create table jobs (id bigserial primary key, queue varchar(255) not null, payload text not null, "
                 "attempts smallint not null, reserved_at integer null, available_at integer not null, created_at "
                 "integer not null)", "create index jobs_queue_index on jobs (queue)"],
}
# The fixture app knows SQLite only: its copy gets Laravel's mysql and pgsql connections.
CONNECTIONS = """
        'mysql' => ['driver' => 'mysql', 'host' => env('DB_HOST'), 'port' => env('DB_PORT'),
            'database' => env('DB_DATABASE'), 'username' => env('DB_USERNAME'), 'password' => env('DB_PASSWORD'),
            'charset' => 'utf8mb4', 'collation' => 'utf8mb4_unicode_ci', 'prefix' => '', 'strict' => true],
        'pgsql' => ['driver' => 'pgsql', 'host' => env('DB_HOST'), 'port' => env('DB_PORT'),
            'database' => env('DB_DATABASE'), 'username' => env('DB_USERNAME'), 'password' => env('DB_PASSWORD'),
            'charset' => 'utf8', 'prefix' => '', 'schema' => 'public', 'sslmode' => 'prefer'],
"""
# The bench's own client: one PHP process (PDO) that inserts, counts and
# clears the jobs table while a run goes, on any of the three.
CLIENT = r"""<?php
$p = new PDO($argv[1], $argv[2] ?: null, $argv[3] ?: null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
if (strpos($argv[1], 'sqlite:') === 0) { $p->setAttribute(PDO::ATTR_TIMEOUT, 60); }
foreach ($argv[4] === '' ? [] : explode("\x1f", $argv[4]) as $sql) { $p->exec($sql); }
while (($l = fgets(STDIN)) !== false) {
    $a = explode(' ', rtrim($l, "\n"), 2);
    if ($a[0] === 'count') {
        echo $p->query('select count(*) from jobs')->fetchColumn(), ' ', $p->query('select count(*) from failed_jobs')->fetchColumn(), "\n";
    } elseif ($a[0] === 'clear') {
        $p->exec('delete from jobs'); $p->exec('delete from failed_jobs'); echo "ok\n";
    } elseif ($a[0] === 'payload') {
        echo str_replace("\n", ' ', (string) $p->query('select payload from jobs order by id limit 1')->fetchColumn()), "\n";
    } elseif ($a[0] === 'push') {
        [$n, $payload] = explode(' ', $a[1], 2);
        $job = json_decode($payload, true);
        $t = time();
        $s = $p->prepare('insert into jobs (queue, payload, attempts, reserved_at, available_at, created_at) values (?, ?, 0, null, ?, ?)');
        $p->beginTransaction();
        for ($i = 0; $i < (int) $n; $i++) {
            $b = random_bytes(16); $b[6] = chr(ord($b[6]) & 0x0f | 0x40); $b[8] = chr(ord($b[8]) & 0x3f | 0x80);
            $job['uuid'] = vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($b), 4));
            $s->execute(['default', json_encode($job), $t, $t]);
        }
        $p->commit();
        echo "ok\n";
    }
    fflush(STDOUT);
}
"""
KEYS = ("REDIS_HOST", "REDIS_PORT", "REDIS_PREFIX", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE", "LOG_CHANNEL",
        "MARKER_EVENTS", "DB_BUSY_TIMEOUT", "DB_HOST", "DB_PORT", "DB_USERNAME", "DB_PASSWORD")


class Db:
    """A copy of the fixture app with a `database` queue connection (as
    `laravel new` writes it) on the bench's SQLite file, or on server (a
    tests/integration/sqlservers.py server: MariaDB, PostgreSQL)."""

    def __init__(self, env, server=None):
        self.env = env
        self.kind = server.kind if server else "sqlite"
        self.app = env.tmp / "dbapp"
        # SQLite with a busy timeout (the fixture app's DB_BUSY_TIMEOUT): without one a worker that meets
        # another's write lock fails at once, and Laravel's Worker sleeps 1 s after a failed pop
        self.app_env = dict(env.app_env, **(server.laravel_env() if server else {"DB_BUSY_TIMEOUT": "5"}))
        if not self.app.exists():
            shutil.copytree(APP, self.app, symlinks=True)
            conf = self.app / "config" / "queue.php"
            conf.write_text(conf.read_text().replace(
                "'connections' => [", "'connections' => [\n        'database' => ['driver' => 'database', "
                "'table' => 'jobs', 'queue' => 'default', 'retry_after' => 90, 'after_commit' => false],", 1))
            conf = self.app / "config" / "database.php"
            conf.write_text(conf.read_text().replace("'connections' => [", "'connections' => [" + CONNECTIONS, 1))
        self.client = None
        if server:
            self.artisan("migrate", "--force")  # failed_jobs on the server
            e = server.laravel_env()
            (env.tmp / "sqlclient.php").write_text(CLIENT)
            self.client = subprocess.Popen(["php", str(env.tmp / "sqlclient.php"), server.dsn(), e["DB_USERNAME"],
                                            e["DB_PASSWORD"], "\x1f".join(JOBS_TABLE[self.kind])],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        else:
            for q in JOBS_TABLE["sqlite"]:
                self.sql(q)
        self.artisan("fixture:dispatch", "NoopJob", "--connection=database", "--queue=default")
        self.payload = self.ask("payload") if self.client else self.sql("select payload from jobs")[0][0]
        self.clear()

    def sql(self, q, args=(), many=False):
        """SQLite: here, not through PHP (a PDO connection held open in the
        bench's client slowed the workers, which have no busy timeout)."""
        con = sqlite3.connect(self.env.app_env["DB_DATABASE"], timeout=60)
        try:
            rows = con.executemany(q, args).fetchall() if many else con.execute(q, args).fetchall()
            con.commit()
            return rows
        finally:
            con.close()

    def ask(self, line):
        self.client.stdin.write(line + "\n")
        self.client.stdin.flush()
        out = self.client.stdout.readline()
        if not out:
            raise RuntimeError("the bench's SQL client has gone")
        return out.rstrip("\n")

    def close(self):
        if self.client:
            self.client.stdin.close()
            self.client.wait(30)

    def artisan(self, *args):
        return subprocess.run(["php", str(self.app / "artisan")] + list(args), cwd=str(self.app),
                              env=self.app_env, check=True, capture_output=True, text=True)

    def push(self, n):
        """n no-op jobs in one transaction, each with its own uuid."""
        if self.client:
            self.ask("push %d %s" % (n, self.payload))
            return
        now, job = int(time.time()), json.loads(self.payload)
        rows = [("default", json.dumps(dict(job, uuid=str(uuid.uuid4()))), now, now) for _ in range(n)]
        self.sql("insert into jobs (queue, payload, attempts, reserved_at, available_at, created_at) "
                 "values (?, ?, 0, null, ?, ?)", rows, many=True)

    def clear(self):
        if self.client:
            self.ask("clear")
            return
        self.sql("delete from jobs")
        self.sql("delete from failed_jobs")

    def count(self, table):
        if self.client:
            return int(self.ask("count").split()[table == "failed_jobs"])
        return self.sql("select count(*) from " + table)[0][0]

    def left(self):
        return self.count("jobs")

    def failed(self):
        return self.count("failed_jobs")

    def settings(self):
        values = dict((k, self.app_env[k]) for k in KEYS if k in self.app_env)
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
    db.clear()
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


def cpu_ms(pids):
    """CPU time (user + system) of the processes, in ms."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total * 1000.0 / tick


def children(pid):
    res = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(x) for x in res.stdout.split()]


def qpool_rate(env, db, n, jobs, cpu=None):
    """(jobs/s, jobs failed) of an app_driver pool of n processes; cpu (a
    dict) gets the CPU ms per job of its handlers, its workers, its agent
    and the master."""
    db.clear()
    p, _ = env.master(db.pool("processes = %d;" % n), "dbrate")
    try:
        if not wait_idle(env, "dbrate", n):
            return None, 0
        st = status(env, "dbrate")
        zygote, agent = st["zygote"]["pid"], (st.get("agent") or {}).get("pid")
        parts = {"handlers": [x for x in children(zygote) if x != agent],
                 "workers": [x for x in children(p.pid) if x != zygote], "agent": [agent], "master": [p.pid]}
        before = dict((k, cpu_ms(v)) for k, v in parts.items())
        rate = jobs / drain(db, jobs)
        if cpu is not None:
            for k, v in parts.items():
                cpu.setdefault(k, []).append((cpu_ms(v) - before[k]) / jobs)
        return rate, db.failed()
    finally:
        stop(p)


def queue_work_rate(env, db, n, jobs, cpu=None):
    db.clear()
    procs = [subprocess.Popen(["php", str(db.app / "artisan"), "queue:work", "database", "--queue=default",
                               "--sleep=0.1"], cwd=str(db.app), env=db.app_env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        db.push(n)  # each booted and looping: the warm-up jobs are gone
        while db.left():
            time.sleep(0.05)
        time.sleep(1.0)
        db.clear()
        before = cpu_ms(q.pid for q in procs)
        rate = jobs / drain(db, jobs)
        if cpu is not None:
            cpu.setdefault("queue:work", []).append((cpu_ms(q.pid for q in procs) - before) / jobs)
        return rate, db.failed()
    finally:
        for q in procs:
            q.terminate()
        for q in procs:
            q.wait(30)


def rates(env, db, jobs, rounds=3):
    out = {}
    for n in (1, 4):
        q, w, loads, failed, cpu = [], [], [], [0, 0], {}
        for _ in range(rounds):
            loads.append(loadavg())
            rate, f = qpool_rate(env, db, n, jobs, cpu)
            q.append(rate)
            failed[0] += f
            rate, f = queue_work_rate(env, db, n, jobs, cpu)
            w.append(rate)
            failed[1] += f
        q = [x for x in q if x]
        out["processes_%d" % n] = {
            "jobs": jobs, "failed_app_driver_queue_work": failed, "app_driver_jobs_per_s": [round(x) for x in q],
            "queue_work_jobs_per_s": [round(x) for x in w],
            "app_driver_median": round(statistics.median(q)) if q else None,
            "queue_work_median": round(statistics.median(w)),
            "app_driver_per_process": round(statistics.median(q) / n) if q else None,
            "queue_work_per_process": round(statistics.median(w) / n), "load": loads,
            "cpu_ms_per_job": dict((k, round(statistics.median(v), 3)) for k, v in cpu.items())}
        print("database_%s_rate_%d" % (db.kind, n), out["processes_%d" % n], flush=True)
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
    db.clear()
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
    db.clear()
    procs = [subprocess.Popen(["php", str(db.app / "artisan"), "queue:work", "database", "--queue=default",
                               "--sleep=0.1"], cwd=str(db.app), env=db.app_env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    drain(db, n * each)
    time.sleep(1.5)
    queue_work = summary({"queue:work": [m for m in (uss_pss_kb(q.pid) for q in procs) if m]})
    for q in procs:
        q.terminate()
    for q in procs:
        q.wait(30)
    out = {"processes": n, "jobs_each": each, "app_driver": app_driver, "redis_adapter": redis,
           "queue_work_database": queue_work, "load": loadavg()}
    print("database_memory", out, flush=True)
    return out


def run(env, template, redis_pool, push_redis, jobs=2000, rounds=3, top=8, servers=("mariadb", "postgres")):
    db = Db(env)
    out = {}
    try:
        for running in (False, True):
            key = "growth_" + ("running" if running else "from_start")
            out[key] = []
            for _ in range(rounds):
                out[key].append(growth(env, db, top=top, running=running))
                print("database_" + key, out[key][-1], flush=True)
            out[key + "_median_s"] = dict((k, statistics.median(g[k] for g in out[key] if k in g))
                                          for k in ("sizes", "target_max", "workers_max", "ready_max"))
        out["sqlite"] = rates(env, db, jobs, rounds)
        out["memory"] = memory(env, db, redis_pool, push_redis)
    finally:
        db.close()
    for kind in servers:
        out[kind] = on_server(env, kind, jobs, rounds)
    return out


def on_server(env, kind, jobs, rounds):
    """The jobs/s comparison on a MariaDB or PostgreSQL server that
    tests/integration/sqlservers.py starts (and stops)."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import sqlservers
    try:
        (env.tmp / kind).mkdir(exist_ok=True)
        srv = sqlservers.start_server(kind, env.tmp / kind)
    except (sqlservers.ServerMissing, RuntimeError) as e:
        print("database_%s: skipped (%s)" % (kind, str(e)[:200]), flush=True)
        return {"skipped": str(e)[:200]}
    db = None
    try:
        db = Db(env, srv)
        return dict(rates(env, db, jobs, rounds), server=srv.query("select version() as v")[0]["v"])
    finally:
        if db:
            db.close()
        sqlservers.stop_server(srv)
