#!/usr/bin/python3
"""qpool benchmarks (see docs/benchmarks.md). Measures, never asserts.

    bench/run.py [--build DIR] [--jobs N] [--only NAME ...]

Everything runs on this machine against one private redis-server (TCP
loopback), started here and stopped at the end:

  native     no-op jobs/s: qpool native workers (1 and 2) with a minimal pipe
             handler (tests/fixtures/fixture-handler), job logs on and off
  prefetch   the same with job logs off and prefetch = 4, 16, 64
  queuework  no-op jobs/s: one `php artisan queue:work` (Debian's Laravel 8)
  adapter    no-op Laravel jobs/s: qpool + the PHP adapter vs queue:work, 1 and 2 processes:
             the defaults (preload, prefetch = 1: one job at a time, as
             queue:work), preload off, prefetch = 2, 4 and 8 (recommended for
             the adapter), and 8 with the zygote's JIT (QPOOL_ZYGOTE_JIT=1)
  preload    the PHP adapter's memory and spawn time (issue 21): total PSS of
             the PHP processes for 1, 4, 8 and 16 processes, idle and after
             1,000 no-op jobs each: queue:work, the adapter booting each
             handler (preload = false) and preloading (a zygote and its
             forks), without and with the zygote's JIT; a new handler's
             time to ready, forked vs booted
  latency    push -> handler start, p50/p99, one idle worker
  trips      Redis round trips and commands per job in steady state
  memory     RSS of the master and of a worker (and its handler)
  cpu        CPU time per job of redis-server, one worker and its handler
  dashboard  the web dashboard in headless chromium: page load with 1,000
             recent jobs, requests per minute of an open page, and the
             master's (and the HTTP process's) CPU with ten pages open
  metrics    no-op jobs/s with job metrics and job history at their defaults
             vs metrics = false (1 and 2 workers, alternated, best of 3), and
             what they keep in Redis: keys and bytes after 70 s at 1,000 jobs/s
  tls        no-op jobs/s over TLS (a test CA made with the openssl CLI, the
             same redis-server's --tls-port) next to plain TCP, 1 and 2
             workers, job logs off, alternated, best of 3
  watched    a watched tag keeps every job (issue 31): 1,000 "vip" jobs
             among 5,000 and 15,000, 20,000 among 40,000, and 60,000 of 60,000
             (past the bound: what is dropped is logged), pushed at once
             through 2 native workers: how many its list keeps, each once
  tags       Redis memory of the job records, the tag index and monitored
             tags (issue 31) while 1,000,000 no-op jobs (--tag-jobs) run
             through 2 native workers, half of them tagged (Horizon's
             payload tags: models, a watched "vip" on a fifth, 30 tags of
             300 bytes on a tenth), 3 tags watched: MEMORY USAGE of each
             key and INFO memory sampled along the run (at most
             --tag-seconds, default 600: the jobs that fit); then again
             with monitored_tag_jobs = 1000
  cluster    no-op jobs/s on a 3-primary Redis Cluster (tests/integration/
             cluster_util.py, no AOF) to the queue {bench}, next to plain TCP
             (one redis-server), 1 and 2 workers, job logs off, alternated,
             best of 3; then 1 worker with an empty queue of another node
             listed before {bench}
  limits     fleet-wide limits (issue 33): 3 masters x 4 workers, 2,000 no-op
             B jobs alone, beside 2,000 A jobs of 5 ms unlimited, and beside
             them under { class = A; concurrency = 5; } (B's jobs/s from the
             handlers' records, Redis us and round trips per job; alternated,
             best of 3); rate = "50/s", burst 10 on 2 masters x 3 workers and
             on 1 worker: the long-run average and the fullest 1 s window on
             Redis's clock; the cost of a limit check (INFO commandstats of
             the EVALSHA, round trips) with no limit, a concurrency, a rate
  limitwake  workers held by a rate (stop 39): 3 masters x 8 workers on
             rate = "50/s" with burst 1 and 10, 1 worker with burst 1, 20 s
             each: the long-run average, the fullest 1 s window, the limited
             pops (EVALSHA) per job
  search     GET /api/jobs/recent over 100,000 job history records: class +
             tag + text (one match), text, tag, class, nothing (issue 32)
  bulkretry  POST /api/failed/retry of one class's 3,000 failures among
             100,000 in 5 queues, following the cursor, counted first (a dry
             run); /healthz probed every 10 ms meanwhile (issue 32)
  classpause the other jobs of a queue while a class is paused: jobs/s of
             one native worker with no class paused, with one paused (none of
             its jobs queued), and with its jobs held at the queue's head
             (issue 32)
  database   Laravel's database queue (issue 30, bench/database.py): a
             backlog of 2,000 growing an auto pool from 1 to max (SQLite);
             no-op jobs/s and CPU per job of an app_driver pool beside
             queue:work database, 1 and 4 processes, interleaved, medians
             (--db-jobs, --db-rounds), on SQLite, MariaDB and PostgreSQL
             (tests/integration/sqlservers.py starts them); USS and PSS per
             process beside a Redis pool of the same app

Payloads are the real NoopJob payload of the fixture app (about 560 bytes),
cloned with fresh uuid/id.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import redis

import console  # bench/console.py: the console scenarios (issue 32)
import database  # bench/database.py: the database queue driver (issue 30)

ROOT = pathlib.Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "laravel-app"
PREFIX = "laravel_database_"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_pki(d):
    """A throwaway CA and a server certificate for 127.0.0.1 (bench only)."""
    def ssl(*a):
        subprocess.run(["openssl"] + list(a), cwd=d, check=True, capture_output=True)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
        "-subj", "/CN=bench CA")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", "1", "-extfile", "ext.cnf")


class Env:
    def __init__(self, build, tls=False):
        self.build = pathlib.Path(build).resolve()
        self.qpool = str(self.build / "qpool")
        self.handler = str(self.build / "fixture-handler")
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="qpool-bench-"))
        self.port = free_port()
        self.tls_port = None
        tls_args = []
        if tls:
            make_pki(self.tmp)
            self.tls_port = free_port()
            tls_args = ["--tls-port", str(self.tls_port), "--tls-cert-file", str(self.tmp / "server.crt"),
                        "--tls-key-file", str(self.tmp / "server.key"), "--tls-ca-cert-file", str(self.tmp / "ca.crt"),
                        "--tls-auth-clients", "no"]
        self.redis_proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.tmp), "--logfile", str(self.tmp / "redis.log")] + tls_args)
        self.r = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                if self.r.ping():
                    break
            except redis.RedisError:
                time.sleep(0.05)
        self.app_env = dict(os.environ, REDIS_HOST="127.0.0.1", REDIS_PORT=str(self.port), REDIS_PREFIX=PREFIX,
                            APP_STORAGE=str(self.tmp / "storage"), DB_CONNECTION="sqlite",
                            DB_DATABASE=str(self.tmp / "db.sqlite"), LOG_CHANNEL="null", MARKER_FILE="",
                            MARKER_EVENTS="0")
        (self.tmp / "storage").mkdir()
        (self.tmp / "db.sqlite").touch()
        self.artisan("migrate", "--force")

    def artisan(self, *args, **kw):
        return subprocess.run(["php", str(APP / "artisan")] + list(args), cwd=str(APP), env=self.app_env,
                              check=True, capture_output=True, text=True, **kw)

    def close(self):
        self.redis_proc.terminate()
        self.redis_proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def flush(self):
        self.r.flushall()

    def noop_template(self):
        self.flush()
        self.artisan("fixture:dispatch", "NoopJob", "--queue=bench")
        raw = self.r.lpop(PREFIX + "queues:bench")
        self.flush()
        return json.loads(raw)

    def push_copies(self, template, n, queue="bench", data=None):
        pipe = self.r.pipeline(transaction=False)
        for i in range(n):
            p = dict(template)
            p["uuid"] = str(uuid.uuid4())
            p["id"] = uuid.uuid4().hex
            if data is not None:
                p["data"] = data
            pipe.rpush(PREFIX + "queues:" + queue, json.dumps(p, separators=(",", ":")))
            pipe.rpush(PREFIX + "queues:" + queue + ":notify", 1)
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()

    def drained(self, queue="bench"):
        k = PREFIX + "queues:" + queue
        return self.r.llen(k) == 0 and self.r.zcard(k + ":reserved") == 0

    def config(self, pool, name="bench", qpool="", tls=False, top=""):
        path = self.tmp / (name + ".conf")
        port, t = self.port, ""
        if tls:
            port, t = self.tls_port, 'tls = { ca_file = "%s"; };' % (self.tmp / "ca.crt")
        path.write_text(
            'qpool = { pid_file = "%s/%s.pid"; control_socket = "%s/%s.sock"; log_level = "info"; %s };\n'
            'redis = { default = { port = %d; %s }; cache = { port = %d; db = 1; %s }; };\n'
            'pools = ( %s );\n%s' % (self.tmp, name, self.tmp, name, qpool, port, t, port, t, pool, top))
        return path

    def master(self, pool, name="bench", qpool="", tls=False, top=""):
        conf = self.config(pool, name, qpool, tls, top)
        log = open(self.tmp / (name + ".log"), "w")
        p = subprocess.Popen([self.qpool, "run", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        sock = self.tmp / (name + ".sock")
        for _ in range(200):
            if sock.exists():
                break
            time.sleep(0.01)
        return p, self.tmp / (name + ".log")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(60)


def wait_idle_workers(env, name, n):
    for _ in range(500):
        res = subprocess.run([env.qpool, "status", "--json", "-c", str(env.tmp / (name + ".conf"))],
                             capture_output=True, text=True)
        try:
            st = json.loads(res.stdout)
            if st["pools"][0]["idle"] == n:
                return
        except (ValueError, KeyError, IndexError):
            pass
        time.sleep(0.02)


def native_pool(env, n, handler_cmd, job_log=True, extra=""):
    return ('{ name = "w"; queues = ["bench"]; processes = %d; job_log = %s; handler = { type = "pipe"; '
            'command = %s; }; %s }' % (n, "true" if job_log else "false", json.dumps(handler_cmd), extra))


def run_native(env, template, n_workers, jobs, handler_cmd, job_log, extra="", name="bench", qpool="", tls=False):
    env.flush()
    p, log = env.master(native_pool(env, n_workers, handler_cmd, job_log, extra), name, qpool, tls)
    wait_idle_workers(env, name, n_workers)
    subprocess.run([env.qpool, "pause", "-c", str(env.tmp / (name + ".conf"))], check=True, capture_output=True)
    env.push_copies(template, jobs)
    cmds0 = env.r.info("stats")["total_commands_processed"]
    t0 = time.monotonic()
    subprocess.run([env.qpool, "continue", "-c", str(env.tmp / (name + ".conf"))], check=True, capture_output=True)
    while not env.drained():
        time.sleep(0.01)
    dt = time.monotonic() - t0
    cmds = env.r.info("stats")["total_commands_processed"] - cmds0
    stop(p)
    return drain_figures(log, jobs, dt, n_workers, cmds)


def drain_figures(log, jobs, dt, n_workers, cmds):
    """A drain's figures: jobs/s overall and per worker, and Redis round trips
    (counted by the workers, from their exit lines in the master's log) and
    commands per job."""
    text = log.read_text()
    trips = sum(int(x) for x in re.findall(r"exiting: \d+ jobs \(\d+ failed\), (\d+) Redis round trips", text))
    done = sum(int(x) for x in re.findall(r"exiting: (\d+) jobs", text))
    return {"jobs": jobs, "seconds": round(dt, 3), "jobs_per_s": round(jobs / dt),
            "per_worker": round(jobs / dt / n_workers), "round_trips_per_job": round(trips / max(done, 1), 3),
            "redis_commands_per_job": round(cmds / jobs, 2)}


def run_tls(env, template, jobs, rounds=3):
    """Plain TCP and TLS alternated, best of rounds (the machine is shared)."""
    out = {}
    for n in (1, 2):
        for r in range(rounds):
            for tls in (False, True):
                key = "%s_%d_worker%s" % ("tls" if tls else "tcp", n, "s" if n > 1 else "")
                res = run_native(env, template, n, jobs, [env.handler], False, tls=tls)
                if key not in out or res["jobs_per_s"] > out[key]["jobs_per_s"]:
                    out[key] = res
                print(key, "round", r + 1, res, flush=True)
    return out


def other_node_queue(cl, queue):
    """A hash-tagged queue name served by another node than queue."""
    node = cl.node_of(PREFIX + "queues:" + queue).port
    return next(q for q in ("{bench%d}" % i for i in range(1000)) if cl.node_of(PREFIX + "queues:" + q).port != node)


def run_native_cluster(env, cl, template, n_workers, jobs, empty_first=False):
    """run_native on the cluster cl: queue {bench}, pushed through a cluster
    client. empty_first: the pool lists an empty queue of another node
    before it (every pop asks that node first, and the previous job's ack is
    written before the pop, not with it)."""
    name, queue = "cluster", "{bench}"
    queues = ([other_node_queue(cl, queue)] if empty_first else []) + [queue]
    rc = cl.client()
    rc.flushall()
    conf = env.tmp / (name + ".conf")
    conf.write_text(
        'qpool = { pid_file = "%s/%s.pid"; control_socket = "%s/%s.sock"; log_level = "info"; };\n'
        'redis = { default = { cluster = [%s]; }; };\n'
        'pools = ( { name = "w"; queues = %s; processes = %d; job_log = false; handler = { type = "pipe"; '
        'command = %s; }; } );\n' % (env.tmp, name, env.tmp, name, cl.addrs(), json.dumps(queues), n_workers,
                                     json.dumps([env.handler])))
    log = env.tmp / (name + ".log")
    with open(log, "w") as lf:
        p = subprocess.Popen([env.qpool, "run", "-c", str(conf)], stdout=lf, stderr=subprocess.STDOUT,
                             start_new_session=True)
    for _ in range(200):
        if (env.tmp / (name + ".sock")).exists():
            break
        time.sleep(0.01)
    wait_idle_workers(env, name, n_workers)
    subprocess.run([env.qpool, "pause", "-c", str(conf)], check=True, capture_output=True)
    pipe = rc.pipeline(transaction=False)
    for i in range(jobs):
        t = dict(template, uuid=str(uuid.uuid4()), id=uuid.uuid4().hex)
        pipe.rpush(PREFIX + "queues:" + queue, json.dumps(t, separators=(",", ":")))
        pipe.rpush(PREFIX + "queues:" + queue + ":notify", 1)
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    node = cl.node_of(PREFIX + "queues:" + queue).client()
    cmds0 = sum(n.client().info("stats")["total_commands_processed"] for n in cl.nodes)
    t0 = time.monotonic()
    subprocess.run([env.qpool, "continue", "-c", str(conf)], check=True, capture_output=True)
    k = PREFIX + "queues:" + queue
    while node.llen(k) or node.zcard(k + ":reserved"):
        time.sleep(0.01)
    dt = time.monotonic() - t0
    cmds = sum(n.client().info("stats")["total_commands_processed"] for n in cl.nodes) - cmds0
    stop(p)
    return drain_figures(log, jobs, dt, n_workers, cmds)


def run_cluster(env, template, jobs, rounds=3):
    """Plain TCP (one redis-server) and a 3-primary cluster alternated, best of rounds."""
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from cluster_util import Cluster, cluster_ports
    cl = Cluster(env.tmp / "cluster", cluster_ports(3), aof=False).start()
    out = {}
    try:
        for n in (1, 2):
            for r in range(rounds):
                for on_cluster in (False, True):
                    key = "%s_%d_worker%s" % ("cluster" if on_cluster else "tcp", n, "s" if n > 1 else "")
                    res = (run_native_cluster(env, cl, template, n, jobs) if on_cluster
                           else run_native(env, template, n, jobs, [env.handler], False))
                    if key not in out or res["jobs_per_s"] > out[key]["jobs_per_s"]:
                        out[key] = res
                    print(key, "round", r + 1, res, flush=True)
        for r in range(rounds):
            key = "cluster_empty_first_1_worker"
            res = run_native_cluster(env, cl, template, 1, jobs, empty_first=True)
            if key not in out or res["jobs_per_s"] > out[key]["jobs_per_s"]:
                out[key] = res
            print(key, "round", r + 1, res, flush=True)
    finally:
        cl.stop()
    return out


def run_queue_work(env, jobs, processes=1):
    env.flush()
    env.artisan("fixture:dispatch", "NoopJob", "--queue=bench", "--count=%d" % jobs)
    t0 = time.monotonic()
    procs = [subprocess.Popen(["php", str(APP / "artisan"), "queue:work", "redis", "--queue=bench", "--sleep=0",
                               "--stop-when-empty"], cwd=str(APP), env=env.app_env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(processes)]
    for p in procs:
        p.wait(600)
    dt = time.monotonic() - t0
    assert env.drained()
    return {"jobs": jobs, "seconds": round(dt, 3), "jobs_per_s": round(jobs / dt),
            "per_worker": round(jobs / dt / processes)}


# ---------------------------------------------------------------- preload (issue 21)

def smaps_pss_kb(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            return int(re.search(r"^Pss:\s+(\d+)", f.read(), re.M).group(1))
    except (OSError, AttributeError):
        return 0


def session_php(sid):
    """Pids of the PHP processes in session sid (queue:work, adapters, zygotes)."""
    res = subprocess.run(["pgrep", "-s", str(sid), "^php"], capture_output=True, text=True)
    return [int(x) for x in res.stdout.split()]


def pss_total(sid, settle=0.3):
    time.sleep(settle)
    pids = session_php(sid)
    return {"php_processes": len(pids), "pss_mib": round(sum(smaps_pss_kb(p) for p in pids) / 1024, 1)}


ADAPTER = ["php", str(ROOT / "php" / "qpool-handler.php"), str(APP)]


def adapter_settings(env, extra="", more_env=None):
    """A pool's keys for the fixture app through the adapter: its directory and environment (plus more_env)."""
    keys = ("REDIS_HOST", "REDIS_PORT", "REDIS_PREFIX", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE", "LOG_CHANNEL",
            "MARKER_EVENTS")
    values = dict(((k, env.app_env[k]) for k in keys), **(more_env or {}))
    return 'working_directory = "%s"; environment = { %s }; %s' % (
        APP, " ".join('%s = "%s";' % kv for kv in values.items()), extra)


def adapter_pool(env, n, preload, more_env=None):
    return native_pool(env, n, ADAPTER, False, adapter_settings(env, "preload = %s;" % str(preload).lower(), more_env))


def pss_adapter(env, template, n, preload, jobs_each, more_env=None):
    env.flush()
    p, _ = env.master(adapter_pool(env, n, preload, more_env), "pss")
    wait_idle_workers(env, "pss", n)
    idle = pss_total(p.pid, 1.0)
    env.push_copies(template, n * jobs_each)
    while not env.drained():
        time.sleep(0.02)
    busy = pss_total(p.pid)
    stop(p)
    return {"idle": idle, "after_jobs": busy}


def pss_queue_work(env, template, n, jobs_each):
    env.flush()
    procs = [subprocess.Popen(["php", str(APP / "artisan"), "queue:work", "redis", "--queue=bench", "--sleep=1"],
                              cwd=str(APP), env=env.app_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True) for _ in range(n)]
    time.sleep(2.0)  # booted and waiting
    idle = {"php_processes": n, "pss_mib": round(sum(smaps_pss_kb(q.pid) for q in procs) / 1024, 1)}
    env.push_copies(template, n * jobs_each)
    while not env.drained():
        time.sleep(0.02)
    time.sleep(0.3)
    busy = {"php_processes": n, "pss_mib": round(sum(smaps_pss_kb(q.pid) for q in procs) / 1024, 1)}
    for q in procs:
        q.terminate()
    for q in procs:
        q.wait(30)
    return {"idle": idle, "after_jobs": busy}


def spawn_boot_ms(env):
    """`php qpool-handler.php APP` with the protocol on fds 3/4: start to ready."""
    rq, rs = os.pipe(), os.pipe()

    def fds():
        os.dup2(rq[0], 3)
        os.dup2(rs[1], 4)
    e = dict(env.app_env, QPOOL_PROTOCOL="2", QPOOL_REQUEST_FD="3", QPOOL_RESPONSE_FD="4")
    t0 = time.monotonic()
    p = subprocess.Popen(["php", str(ROOT / "php" / "qpool-handler.php"), str(APP)], env=e, cwd=str(APP),
                         preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(rq[0]), os.close(rs[1])
    with os.fdopen(rs[0], "rb") as f:
        f.readline()
        dt = (time.monotonic() - t0) * 1000
        os.close(rq[1])
        p.wait(10)
    return dt


def spawn_fork_ms(zsock):
    """One request to a zygote (as a worker sends it): request to ready."""
    import array
    rq, rs, lg = os.pipe(), os.pipe(), os.pipe()
    null = os.open(os.devnull, os.O_WRONLY)  # its stderr: the handler's log line goes nowhere
    t0 = time.monotonic()
    zsock.sendmsg([b"fork 1 %d\n" % os.getpid()],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [null, lg[1], rq[0], rs[1]]))])
    for fd in (null, lg[1], rq[0], rs[1]):
        os.close(fd)
    with os.fdopen(rs[0], "rb") as f:
        f.readline()
        dt = (time.monotonic() - t0) * 1000
        os.close(rq[1])
        f.read()
    os.close(lg[0])
    return dt


def run_spawn_latency(env, samples=20):
    boot = [spawn_boot_ms(env) for _ in range(samples)]
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    z = subprocess.Popen(["php", str(ROOT / "php" / "qpool-handler.php"), "--zygote", str(APP)], cwd=str(APP),
                         env=dict(env.app_env, QPOOL_ZYGOTE_FD=str(a.fileno())), pass_fds=[a.fileno()],
                         stderr=subprocess.DEVNULL)
    a.close()
    try:
        fork = [spawn_fork_ms(b) for _ in range(samples)]
    finally:
        z.terminate()
        z.wait(10)
        b.close()
    return {"samples": samples, "boot_ms_median": round(statistics.median(boot), 1),
            "fork_ms_median": round(statistics.median(fork), 1),
            "boot_ms_min": round(min(boot), 1), "fork_ms_min": round(min(fork), 1)}


def run_preload(env, template, counts=(1, 4, 8, 16), jobs_each=1000):
    out = {"spawn": run_spawn_latency(env)}
    print("spawn", out["spawn"], flush=True)
    for n in counts:
        row = {"queue_work": pss_queue_work(env, template, n, jobs_each),
               "adapter_boot_each": pss_adapter(env, template, n, False, jobs_each),
               "adapter_preload": pss_adapter(env, template, n, True, jobs_each),
               "adapter_preload_jit": pss_adapter(env, template, n, True, jobs_each, {"QPOOL_ZYGOTE_JIT": "1"})}
        out["pss_%d" % n] = row
        print("pss_%d" % n, row, flush=True)
    return out


def run_latency(env, template, samples=1000):
    env.flush()
    flog = env.tmp / "latency.log"
    if flog.exists():
        flog.unlink()
    pool = native_pool(env, 1, [env.handler], job_log=False, extra='environment = { FIXTURE_LOG = "%s"; };' % flog)
    p, _ = env.master(pool, "lat")
    wait_idle_workers(env, "lat", 1)
    for _ in range(samples):
        pp = dict(template)
        pp["uuid"] = str(uuid.uuid4())
        pp["id"] = uuid.uuid4().hex
        pp["data"] = {"pushed_us": time.time() * 1e6}
        raw = json.dumps(pp, separators=(",", ":"))
        pipe = env.r.pipeline(transaction=True)
        pipe.rpush(PREFIX + "queues:bench", raw)
        pipe.rpush(PREFIX + "queues:bench:notify", 1)
        pipe.execute()
        time.sleep(0.005)  # the worker is idle again before the next push
    while not env.drained():
        time.sleep(0.01)
    stop(p)
    lat = sorted(float(l.split()[1]) / 1000.0 for l in flog.read_text().splitlines() if l.startswith("latency"))
    q = statistics.quantiles(lat, n=100)
    return {"samples": len(lat), "p50_ms": round(q[49], 3), "p99_ms": round(q[98], 3), "max_ms": round(lat[-1], 3)}


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_cpu(env, template, jobs=100000, extra=""):
    """CPU time per job of redis-server, one worker and its handler."""
    env.flush()
    p, _ = env.master(native_pool(env, 1, [env.handler], job_log=False, extra=extra), "cpu")
    wait_idle_workers(env, "cpu", 1)
    conf = str(env.tmp / "cpu.conf")
    subprocess.run([env.qpool, "pause", "-c", conf], check=True, capture_output=True)
    env.push_copies(template, jobs)
    worker = int(subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()[0])
    handler = int(subprocess.run(["pgrep", "-P", str(worker)], capture_output=True, text=True).stdout.split()[0])
    pids = {"redis": env.redis_proc.pid, "worker": worker, "handler": handler, "master": p.pid}
    before = {k: cpu_s(v) for k, v in pids.items()}
    t0 = time.monotonic()
    subprocess.run([env.qpool, "continue", "-c", conf], check=True, capture_output=True)
    while not env.drained():
        time.sleep(0.01)
    dt = time.monotonic() - t0
    out = {"jobs_per_s": round(jobs / dt)}
    for k, v in pids.items():
        out[k + "_us_per_job"] = round((cpu_s(v) - before[k]) / jobs * 1e6, 1)
    stop(p)
    return out


def rss_kb(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def run_memory(env, template):
    env.flush()
    p, _ = env.master(native_pool(env, 1, [env.handler], job_log=False), "mem")
    wait_idle_workers(env, "mem", 1)
    env.push_copies(template, 20000)
    while not env.drained():
        time.sleep(0.01)
    worker = [int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                             text=True).stdout.split()][0]
    handler = [int(x) for x in subprocess.run(["pgrep", "-P", str(worker)], capture_output=True,
                                              text=True).stdout.split()][0]
    out = {"master_rss_kb": rss_kb(p.pid), "worker_rss_kb": rss_kb(worker), "fixture_handler_rss_kb": rss_kb(handler),
           "after_jobs": 20000}
    stop(p)
    return out


def run_metrics_cost(env, template, jobs):
    """No-op throughput with metrics and job history at their defaults vs
    off; runs alternate (on, off, on, off...) so drift hits both; best of 3."""
    out = {}
    for n in (1, 2):
        best = {"on": 0, "off": 0}
        for _ in range(3):
            for mode, qpool in (("on", ""), ("off", "metrics = false;")):
                res = run_native(env, template, n, jobs, [env.handler], False, qpool=qpool)
                best[mode] = max(best[mode], res["jobs_per_s"])
        out["%d_worker%s" % (n, "s" if n > 1 else "")] = {
            "on_jobs_per_s": best["on"], "off_jobs_per_s": best["off"],
            "loss_percent": round(100.0 * (best["off"] - best["on"]) / best["off"], 1)}
    return out


def run_redis_footprint(env, template, seconds=70, rate=1000):
    """Jobs pushed at `rate`/s for `seconds` through two workers, metrics and
    job history at their defaults: what qpool keeps in Redis afterwards."""
    env.flush()
    p, log = env.master(native_pool(env, 2, [env.handler], False), "footprint")
    wait_idle_workers(env, "footprint", 2)
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < seconds:
        due = int((time.monotonic() - t0) * rate)
        if due > sent:
            env.push_copies(template, due - sent)
            sent = due
        time.sleep(0.01)
    while not env.drained():
        time.sleep(0.05)
    time.sleep(2.5)  # two balance passes: everything reported is written
    stop(p)
    keys = [k.decode() for k in env.r.keys(PREFIX + "qpool:*")]
    by_kind = {}
    for k in keys:
        kind = re.sub(r":\d+$", ":<minute>", k[len(PREFIX):]) if "qpool:metrics:" in k else k[len(PREFIX):]
        d = by_kind.setdefault(kind, {"keys": 0, "bytes": 0, "no_ttl": 0})
        d["keys"] += 1
        d["bytes"] += env.r.memory_usage(k) or 0
        d["no_ttl"] += env.r.pttl(k) < 0
    minutes = by_kind.get("qpool:metrics:<minute>", {"keys": 1, "bytes": 0})
    per_minute = minutes["bytes"] / max(minutes["keys"], 1)
    jobs_list = by_kind.get("qpool:jobs", {"bytes": 0})["bytes"]
    return {"jobs": sent, "seconds": seconds, "keys": by_kind,
            "bytes_per_minute_key": round(per_minute),
            # a day of history: 1,440 minute keys (metrics_retention 24 h) plus the bounded job list
            "steady_state_keys": 1440 + 1, "steady_state_bytes": round(1440 * per_minute + jobs_list)}


LIMIT_HANDLER = str(ROOT / "tests" / "fixtures" / "limit-handler.py")
LIMIT_A = '\nlimits = ( { class = "App\\\\Jobs\\\\A"; concurrency = %d; } );\n'


def push_classes(env, template, classes, queue="bench"):
    """One copy of template per entry of classes: (displayName, extra data or None)."""
    pipe = env.r.pipeline(transaction=False)
    for i, (cls, data) in enumerate(classes):
        p = dict(template, uuid=str(uuid.uuid4()), id=uuid.uuid4().hex, displayName=cls)
        if data:
            p["data"] = dict(template["data"], **data)
        pipe.rpush(PREFIX + "queues:" + queue, json.dumps(p, separators=(",", ":")))
        pipe.rpush(PREFIX + "queues:" + queue + ":notify", 1)
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def continue_all(env, names):
    """qpool continue on every master at once."""
    ps = [subprocess.Popen([env.qpool, "continue", "-c", str(env.tmp / (n + ".conf"))], stdout=subprocess.DEVNULL)
          for n in names]
    for p in ps:
        p.wait()


def redis_cost(env):
    """Redis's own CPU since the last CONFIG RESETSTAT: EVALSHA calls and
    their usec, and the usec of every command."""
    stats = env.r.info("commandstats")
    ev = stats.get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return ev["calls"], ev["usec"], sum(v["usec"] for v in stats.values())


def handler_records(log):
    """[(kind, class, ns)] of tests/fixtures/limit-handler.py's log."""
    out = []
    for line in log.read_text().splitlines():
        f = line.split()
        if len(f) == 6:
            out.append((f[0], f[1], int(f[5])))
    return out


def run_limits_fleet(env, template, mode, n_each=2000, masters=3, workers=4, a_ms=5):
    """3 masters x 4 workers (the recording pipe handler) drain 2,000 B
    (no-op) jobs, alone (mode "b_only") or interleaved with 2,000 A jobs of
    a_ms each in the same queue, unlimited ("a_free") or under concurrency
    = 5 ("a_limited"); or A on a queue of its own listed first, under the
    limit ("a_own_queue"). B's throughput: B jobs / (last B end - first
    start), from the handlers' records."""
    env.flush()
    log = env.tmp / "limits-jobs.log"
    log.write_text("")
    pool = ('{ name = "w"; queues = ["bench"]; processes = %d; job_log = false; handler = { type = "pipe"; '
            'command = %s; }; }' % (workers, json.dumps(["/usr/bin/python3", LIMIT_HANDLER, str(log)])))
    if mode == "a_own_queue":
        pool = pool.replace('queues = ["bench"]', 'queues = ["a", "bench"]')
    top = LIMIT_A % 5 if mode in ("a_limited", "a_own_queue") else ""
    names = ["lim%d" % i for i in range(masters)]
    procs = [env.master(pool, n, top=top) for n in names]
    for n in names:
        wait_idle_workers(env, n, workers)
        subprocess.run([env.qpool, "pause", "-c", str(env.tmp / (n + ".conf"))], check=True, capture_output=True)
    jobs = []
    for _ in range(n_each):
        if mode != "b_only":
            jobs.append(("App\\Jobs\\A", {"ms": a_ms}))
        jobs.append(("App\\Jobs\\B", None))
    if mode == "a_own_queue":
        push_classes(env, template, jobs[0::2], "a")
        push_classes(env, template, jobs[1::2])
    else:
        push_classes(env, template, jobs)
    env.r.config_resetstat()
    continue_all(env, names)
    while (not env.drained() or not env.drained("a")
           or sum(1 for r in handler_records(log) if r[0] == "E") < len(jobs)):
        time.sleep(0.02)
    calls, ev_usec, usec = redis_cost(env)
    for p, _ in procs:
        stop(p)
    recs = handler_records(log)
    t0 = min(ns for k, _, ns in recs if k == "S")
    b_end = max(ns for k, c, ns in recs if k == "E" and c.endswith("\\B"))
    end = max(ns for k, _, ns in recs if k == "E")
    text = "".join((env.tmp / (n + ".log")).read_text() for n in names)
    trips = sum(int(x) for x in re.findall(r"exiting: \d+ jobs \(\d+ failed\), (\d+) Redis round trips", text))
    return {"jobs": len(jobs), "b_jobs_per_s": round(n_each / ((b_end - t0) / 1e9)),
            "all_jobs_per_s": round(len(jobs) / ((end - t0) / 1e9)), "evalsha_calls": calls,
            "us_per_evalsha": round(ev_usec / max(calls, 1), 1),
            "redis_us_per_job": round(usec / len(jobs), 1), "round_trips_per_job": round(trips / len(jobs), 2)}


def run_limits_rate(env, template, masters, workers, rate=50, burst=10, seconds=30):
    """rate = "R/s" with a burst on queue bench: R x seconds + burst no-op jobs
    (the fixture handler); pops counted on Redis's clock (TIME and LLEN in
    one MULTI, every 10 ms). The long-run average runs from 2 s after the
    first pop (the burst spent) to the last pop; the fullest 1 s window is
    over every pair of samples at most 1 s apart. pops_per_job: the
    EVALSHA calls (every limited pop, held or not) per job, from INFO
    commandstats reset when the masters continue."""
    env.flush()
    total = rate * seconds + burst
    top = '\nlimits = ( { queue = "bench"; rate = "%d/s"; burst = %d; } );\n' % (rate, burst)
    names = ["rate%d" % i for i in range(masters)]
    procs = [env.master(native_pool(env, workers, [env.handler], job_log=False), n, top=top) for n in names]
    for n in names:
        wait_idle_workers(env, n, workers)
        subprocess.run([env.qpool, "pause", "-c", str(env.tmp / (n + ".conf"))], check=True, capture_output=True)
    env.push_copies(template, total)
    key = PREFIX + "queues:bench"

    def sample():
        p = env.r.pipeline(transaction=True)
        p.time()
        p.llen(key)
        (sec, usec), left = p.execute()
        return sec + usec / 1e6, total - left

    env.r.config_resetstat()
    continue_all(env, names)
    samples = [sample()]
    while samples[-1][1] < total:
        time.sleep(0.01)
        samples.append(sample())
    calls = redis_cost(env)[0]
    for p, _ in procs:
        stop(p)
    first = next(t for t, n in samples if n > 0)
    s2 = next(s for s in samples if s[0] >= first + 2)
    worst, i = 0, 0
    for j in range(len(samples)):
        while samples[j][0] - samples[i][0] > 1.0:
            i += 1
        worst = max(worst, samples[j][1] - samples[i][1])
    avg = (total - s2[1]) / (samples[-1][0] - s2[0])
    return {"masters": masters, "workers_each": workers, "jobs": total, "long_run_per_s": round(avg, 2),
            "off_by_percent": round(100.0 * (avg - rate) / rate, 1), "fullest_1s_window": worst,
            "bound": rate + burst, "pops_per_job": round(calls / total, 2)}


def run_limit_wakes(env, template, seconds=20):
    """Workers held by a rate (stop 39's thundering herd): 3 masters x 8
    workers on rate = "50/s" with burst 1 and burst 10, and 1 worker with
    burst 1: the long-run average, the fullest 1 s window and the limited
    pops per job (INFO commandstats)."""
    out = {}
    for masters, workers, burst in ((3, 8, 1), (3, 8, 10), (1, 1, 1)):
        key = "rate_50_burst_%d_%dx%d" % (burst, masters, workers)
        out[key] = run_limits_rate(env, template, masters, workers, burst=burst, seconds=seconds)
        print("limitwake", key, out[key], flush=True)
    return out


def run_limit_check_cost(env, template, top, jobs=3000):
    """One master, 4 native workers (fixture handler), jobs half A half B:
    Redis's CPU (INFO commandstats) and round trips per job."""
    env.flush()
    p, log = env.master(native_pool(env, 4, [env.handler], job_log=False), "cost", top=top)
    wait_idle_workers(env, "cost", 4)
    conf = str(env.tmp / "cost.conf")
    subprocess.run([env.qpool, "pause", "-c", conf], check=True, capture_output=True)
    push_classes(env, template, [("App\\Jobs\\A" if i % 2 else "App\\Jobs\\B", None) for i in range(jobs)])
    env.r.config_resetstat()
    subprocess.run([env.qpool, "continue", "-c", conf], check=True, capture_output=True)
    while not env.drained():
        time.sleep(0.01)
    calls, ev_usec, usec = redis_cost(env)
    stop(p)
    trips = drain_figures(log, jobs, 1, 4, 0)["round_trips_per_job"]
    return {"evalsha_calls": calls, "us_per_evalsha": round(ev_usec / max(calls, 1), 1),
            "redis_us_per_job": round(usec / jobs, 1), "round_trips_per_job": trips}


def run_limits(env, template, rounds=3):
    """Issue 33's figures: B's throughput beside a limited A on 3 masters
    (rounds alternated, best of each), a rate's long-run average, the cost
    of a limit check."""
    out = {}
    for r in range(rounds):
        for mode in ("b_only", "a_free", "a_limited", "a_own_queue"):
            res = run_limits_fleet(env, template, mode)
            if mode not in out or res["b_jobs_per_s"] > out[mode]["b_jobs_per_s"]:
                out[mode] = res
            print("limits", mode, "round", r + 1, res, flush=True)
    for masters, workers in ((2, 3), (1, 1)):
        key = "rate_50_%dx%d" % (masters, workers)
        out[key] = run_limits_rate(env, template, masters, workers)
        print("limits", key, out[key], flush=True)
    for key, top in (("check_none", ""), ("check_concurrency", LIMIT_A % 100),
                     ("check_rate", '\nlimits = ( { class = "App\\\\Jobs\\\\A"; rate = "100000/s"; burst = 1000; } );\n')):
        best = None
        for r in range(rounds):
            res = run_limit_check_cost(env, template, top)
            if best is None or res["redis_us_per_job"] < best["redis_us_per_job"]:
                best = res
        out[key] = best
        print("limits", key, best, flush=True)
    return out


TAG_WATCHED = ("vip", "App\\Models\\User:7", "App\\Models\\Team:9")


def tag_mix(i):
    """Job i's payload tags: none on half; a model and the watched "vip" on a
    fifth; one order on a tenth; 30 tags of 300 bytes on a tenth (cut to 20
    of 120 bytes); a team (one in 50 the watched Team:9), or the watched
    User:7 on one job in 100."""
    k = i % 10
    if k < 5:
        return None
    if k < 7:
        return ["App\\Models\\User:%d" % (i % 5000), "vip"]
    if k == 7:
        return ["App\\Models\\Order:%d" % i]
    if k == 8:
        return ["big-%02d-" % t + "x" * 300 for t in range(30)]
    return ["App\\Models\\User:7"] if i % 100 == 9 else ["App\\Models\\Team:%d" % (i % 50)]


def push_tagged(env, template, first, n, queue="bench"):
    pipe = env.r.pipeline(transaction=False)
    for i in range(first, first + n):
        p = dict(template)
        p["uuid"] = str(uuid.uuid4())
        p["id"] = uuid.uuid4().hex
        tags = tag_mix(i)
        if tags:
            p["tags"] = tags
        pipe.rpush(PREFIX + "queues:" + queue, json.dumps(p, separators=(",", ":")))
        if i % 5000 == 4999:
            pipe.execute()
    pipe.rpush(PREFIX + "queues:" + queue + ":notify", 1)
    pipe.execute()


def tag_memory(env, done):
    """Bytes (MEMORY USAGE, every element counted) and lengths of the job
    records' keys and the monitored tags' keys; Redis's used_memory."""
    pre = PREFIX + "qpool:{qpool-jobs}:"
    out = {"jobs_done": done, "used_memory": env.r.info("memory")["used_memory"]}
    for name, key, length in (("list", pre + "list", env.r.llen), ("uuid_index", pre + "uuid", env.r.hlen),
                              ("monitored_set", pre + "monitored", env.r.scard)):
        out[name] = {"bytes": env.r.memory_usage(key, samples=0) or 0, "entries": length(key)}
    for t in TAG_WATCHED:
        key = pre + "tag:" + t
        out["tag:" + t] = {"bytes": env.r.memory_usage(key, samples=0) or 0, "entries": env.r.llen(key)}
    out["tags_and_records_bytes"] = sum(v["bytes"] for v in out.values() if isinstance(v, dict))
    return out


def run_tags(env, template, jobs, budget_s=600, chunk=20000, samples=10, qpool=""):
    """Issue 31's bounded memory: jobs through 2 native workers at the
    defaults (job_history_size 1000, monitored_tag_jobs 10000), 3 tags
    watched; the queue is fed chunk by chunk (at most 2 chunks wait), and
    the keys are measured every jobs/samples jobs and at the end."""
    env.flush()
    p, log = env.master(native_pool(env, 2, [env.handler], False), "tags", qpool)
    wait_idle_workers(env, "tags", 2)
    conf = str(env.tmp / "tags.conf")
    for t in TAG_WATCHED:
        subprocess.run([env.qpool, "monitor", "add", t, "-c", conf], check=True, capture_output=True)
    q = PREFIX + "queues:bench"
    pushed, every, series = 0, max(jobs // samples, 1), []
    t0 = time.monotonic()
    while True:
        feeding = pushed < jobs and time.monotonic() - t0 < budget_s
        if not feeding and env.drained():
            break
        if feeding and env.r.llen(q) < chunk:
            n = min(chunk, jobs - pushed)
            push_tagged(env, template, pushed, n)
            pushed += n
        else:
            time.sleep(0.05)
        done = pushed - env.r.llen(q)
        if done >= every * (len(series) + 1):
            series.append(dict(tag_memory(env, done), seconds=round(time.monotonic() - t0, 1)))
            print("tags", series[-1]["jobs_done"], series[-1]["tags_and_records_bytes"], flush=True)
    dt = time.monotonic() - t0
    time.sleep(2.5)  # two balance passes: every record reported is written
    final = tag_memory(env, pushed)
    stop(p)
    tagged = sum(1 for i in range(pushed) if tag_mix(i))
    return {"jobs": pushed, "tagged_jobs": tagged, "seconds": round(dt, 1), "jobs_per_s": round(pushed / dt),
            "final": final, "series": series,
            "bytes_per_record_in_list": round(final["list"]["bytes"] / max(final["list"]["entries"], 1)),
            "bytes_per_monitored_record": round(final["tag:vip"]["bytes"] / max(final["tag:vip"]["entries"], 1))}


def run_watched(env, template, total, watched=1000):
    """Issue 31: does a watched tag keep every job? total jobs pushed at
    once (as fast as 2 native workers run them), watched of them tagged
    "vip" (watched) spread evenly, the rest "plain"; how many of the vip
    jobs its list holds once the queue drained and two passes went, and
    how many records (each once)."""
    env.flush()
    p, log = env.master(native_pool(env, 2, [env.handler], False), "watched",
                        "job_history_size = 100; monitored_tag_jobs = 100000;")
    wait_idle_workers(env, "watched", 2)
    conf = str(env.tmp / "watched.conf")
    subprocess.run([env.qpool, "monitor", "add", "vip", "-c", conf], check=True, capture_output=True)
    time.sleep(2.5)  # the workers read the watched set each second
    pipe, want = env.r.pipeline(transaction=False), set()
    every = total // watched
    for i in range(total):
        pl = dict(template, uuid=str(uuid.uuid4()), id=uuid.uuid4().hex)
        pl["tags"] = ["vip", "vip-%d" % i] if i % every == 0 and len(want) < watched else ["plain"]
        if "vip" in pl["tags"]:
            want.add(pl["uuid"])
        pipe.rpush(PREFIX + "queues:bench", json.dumps(pl, separators=(",", ":")))
    pipe.rpush(PREFIX + "queues:bench:notify", 1)
    t0 = time.monotonic()
    pipe.execute()
    while not env.drained():
        time.sleep(0.05)
    dt = time.monotonic() - t0
    key = PREFIX + "qpool:{qpool-jobs}:tag:vip"
    for _ in range(60):  # the master forwards 1,000 a pass
        time.sleep(1)
        got = [r.split(b'"uuid":"', 1)[1].split(b'"', 1)[0].decode() for r in env.r.lrange(key, 0, -1)]
        if len(set(got) & want) == len(want):
            break
    stop(p)
    dropped = [line for line in open(log, errors="replace") if "records of watched tags dropped" in line]
    return {"jobs": total, "watched_jobs": len(want), "dropped_logged": dropped[-1].strip() if dropped else None, "jobs_per_s": round(total / dt), "kept": len(set(got) & want),
            "records": len(got), "distinct": len(set(got)), "recent_list": env.r.llen(PREFIX + "qpool:{qpool-jobs}:list"),
            "list_bytes": env.r.memory_usage(key, samples=0) or 0}


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(options=o, service=Service(executable_path="/usr/bin/chromedriver"))


def api_requests(d):
    n = 0
    for e in d.get_log("performance"):
        m = json.loads(e["message"])["message"]
        if m.get("method") == "Network.requestWillBeSent" and ("/api/" in m["params"]["request"]["url"]
                                                               or m["params"]["request"]["url"].endswith("/healthz")):
            n += 1
    return n


def run_dashboard(env, template):
    """The dashboard against a master with 1,000 jobs in its recent-jobs list."""
    env.flush()
    http_port = free_port()
    p, log = env.master(native_pool(env, 2, [env.handler], False), "dash",
                        'http = { listen = "127.0.0.1:%d"; read_without_token = "all"; };' % http_port)
    wait_idle_workers(env, "dash", 2)
    for _ in range(5):  # in batches: a worker sends its newest 256 records a second
        env.push_copies(template, 200)
        while not env.drained():
            time.sleep(0.05)
        time.sleep(1.2)
    time.sleep(2.5)  # two passes: the records are in Redis
    base = "http://127.0.0.1:%d/" % http_port
    out = {"recent_jobs": len(env.r.lrange(PREFIX + "qpool:jobs", 0, -1))}
    d = browser()
    try:
        for page, css in (("overview", "#main h2"), ("jobs", "tr[data-uuid]"), ("failed", "#main h1")):
            times, navs = [], []
            for _ in range(5):
                d.get("about:blank")
                d.get(base + "#/" + page)
                # measured in the page, from the start of navigation to the first frame
                # that has the page's rows (no WebDriver round trips in the figure)
                shown = d.execute_async_script(
                    "var css = arguments[0], done = arguments[arguments.length - 1];"
                    "(function look() { if (document.querySelector(css)) done(performance.now());"
                    " else requestAnimationFrame(look); })();", css)
                times.append(shown)
                navs.append(d.execute_script("var t = performance.timing; return t.domContentLoadedEventEnd - t.navigationStart"))
            out["%s_shown_ms" % page] = {"median": round(statistics.median(times)), "max": round(max(times)),
                                         "dom_content_loaded_ms": round(statistics.median(navs))}
        d.get(base + "#/jobs")
        time.sleep(3)
        d.find_element("css selector", "#jobs-filter select[name=limit], #jobs-filter select")  # the filter is there
        out["jobs_rows_default"] = len(d.find_elements("css selector", "tr[data-uuid]"))
        d.get(base + "#/overview")
        time.sleep(3)
        d.get_log("performance")
        time.sleep(60)
        out["overview_api_requests_per_minute"] = api_requests(d)
    finally:
        d.quit()
    # ten pages open for 60 s: the master's CPU, and the HTTP process's
    drivers = []
    try:
        for _ in range(10):
            b = browser()
            b.get(base + "#/overview")
            drivers.append(b)
        time.sleep(5)
        master_pid = p.pid
        http_pid = int(subprocess.run(["pgrep", "-s", str(master_pid), "-f", "^qpool: http"], capture_output=True,
                                      text=True).stdout.split()[0])
        c0, h0, t0 = cpu_s(master_pid), cpu_s(http_pid), time.monotonic()
        time.sleep(60)
        dt = time.monotonic() - t0
        out["ten_dashboards"] = {"master_cpu_percent": round(100 * (cpu_s(master_pid) - c0) / dt, 2),
                                 "http_process_cpu_percent": round(100 * (cpu_s(http_pid) - h0) / dt, 2)}
    finally:
        for b in drivers:
            b.quit()
    stop(p)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--jobs", type=int, default=50000)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--tag-jobs", type=int, default=1000000)
    ap.add_argument("--tag-seconds", type=float, default=600)
    ap.add_argument("--db-jobs", type=int, default=2000, help="database: jobs per jobs/s run")
    ap.add_argument("--db-rounds", type=int, default=3, help="database: interleaved rounds")
    args = ap.parse_args()
    want = lambda name: not args.only or name in args.only
    env = Env(args.build, tls=want("tls"))
    results = {"machine": {"nproc": os.cpu_count(), "kernel": os.uname().release},
               "redis": env.r.info("server")["redis_version"]}
    want = lambda name: not args.only or name in args.only
    try:
        template = env.noop_template()
        results["payload_bytes"] = len(json.dumps(template, separators=(",", ":")))
        if want("native"):
            for n in (1, 2):
                for job_log in (False, True):
                    key = "native_%d_worker%s%s" % (n, "s" if n > 1 else "", "_job_log" if job_log else "")
                    results[key] = run_native(env, template, n, args.jobs, [env.handler], job_log)
                    print(key, results[key], flush=True)
        if want("prefetch"):
            for n in (1, 2):
                for depth in (4, 16, 64):
                    key = "native_%d_worker%s_prefetch_%d" % (n, "s" if n > 1 else "", depth)
                    results[key] = run_native(env, template, n, args.jobs, [env.handler], False,
                                              "prefetch = %d;" % depth)
                    print(key, results[key], flush=True)
        if want("queuework"):
            results["queue_work_1"] = run_queue_work(env, min(args.jobs, 20000))
            print("queue_work_1", results["queue_work_1"], flush=True)
        if want("adapter"):
            jit = {"QPOOL_ZYGOTE_JIT": "1"}
            variants = (("", "", None), ("_boot_each", "preload = false;", None), ("_prefetch_2", "prefetch = 2;", None),
                        ("_prefetch_4", "prefetch = 4;", None), ("_prefetch_8", "prefetch = 8;", None),
                        ("_prefetch_8_jit", "prefetch = 8;", jit))
            for n in (1, 2):
                jobs = min(args.jobs, 20000)
                for suffix, extra, more_env in variants:
                    key = "adapter_%d%s" % (n, suffix)
                    results[key] = run_native(env, template, n, jobs, ADAPTER, False,
                                              adapter_settings(env, extra, more_env), "adapter")
                    print(key, results[key], flush=True)
                results["queue_work_%d_for_adapter" % n] = run_queue_work(env, jobs, n)
                print("queue_work_%d" % n, results["queue_work_%d_for_adapter" % n], flush=True)
        if want("preload"):
            results["preload"] = run_preload(env, template)
        if want("latency"):
            results["latency"] = run_latency(env, template)
            print("latency", results["latency"], flush=True)
        if want("memory"):
            results["memory"] = run_memory(env, template)
            print("memory", results["memory"], flush=True)
        if want("dashboard"):
            results["dashboard"] = run_dashboard(env, template)
            print("dashboard", results["dashboard"], flush=True)
        if want("metrics"):
            results["metrics_cost"] = run_metrics_cost(env, template, args.jobs)
            print("metrics_cost", results["metrics_cost"], flush=True)
            results["redis_footprint"] = run_redis_footprint(env, template)
            print("redis_footprint", results["redis_footprint"], flush=True)
        if want("cpu"):
            results["cpu"] = run_cpu(env, template)
            print("cpu", results["cpu"], flush=True)
            results["cpu_prefetch_64"] = run_cpu(env, template, extra="prefetch = 64;")
            print("cpu_prefetch_64", results["cpu_prefetch_64"], flush=True)
        if want("tls"):
            results["tls"] = run_tls(env, template, args.jobs)
            print("tls", results["tls"], flush=True)
        if want("tags"):
            results["tags"] = run_tags(env, template, args.tag_jobs, args.tag_seconds)
            print("tags", json.dumps({k: v for k, v in results["tags"].items() if k != "series"}), flush=True)
            # the same with a smaller cap per watched tag: it is reached within the run, and stays
            results["tags_cap_1000"] = run_tags(env, template, args.tag_jobs, args.tag_seconds,
                                                qpool="monitored_tag_jobs = 1000;")
            print("tags_cap_1000", json.dumps({k: v for k, v in results["tags_cap_1000"].items() if k != "series"}),
                  flush=True)
        if want("watched"):
            for total, watched in ((5000, 1000), (15000, 1000), (40000, 20000), (60000, 60000)):
                key = "watched_%d_of_%d" % (watched, total)
                results[key] = run_watched(env, template, total, watched)
                print(key, json.dumps(results[key]), flush=True)
        if want("cluster"):
            results["cluster"] = run_cluster(env, template, args.jobs)
            print("cluster", results["cluster"], flush=True)
        if want("limits"):
            results["limits"] = run_limits(env, template)
            print("limits", results["limits"], flush=True)
        if want("limitwake"):
            results["limitwake"] = run_limit_wakes(env, template)
            print("limitwake", results["limitwake"], flush=True)
        if want("search"):
            results["search"] = console.run_search(env)
        if want("bulkretry"):
            results["bulkretry"] = console.run_bulkretry(env)
        if want("classpause"):
            results["classpause"] = console.run_classpause(env, template, native_pool)
        if want("database"):
            results["database"] = database.run(env, template, lambda n: adapter_pool(env, n, True),
                                               lambda n: env.push_copies(template, n), args.db_jobs, args.db_rounds)
    finally:
        env.close()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
