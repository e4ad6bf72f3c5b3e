"""bench/run.py's console scenarios (issue 32): search over the job
history, bulk retry of the failed store by filter with /healthz probed
meanwhile, and the cost of a paused class to the other jobs of its queue.
Measures, never asserts (docs/benchmarks.md)."""
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.parse
import uuid

TOKEN = "bench-token-0123456789abcdef"
PREFIX = "laravel_database_"
CLASSES = ["App\\Jobs\\SendInvoice", "App\\Jobs\\SyncCrm", "App\\Jobs\\SendMail", "App\\Jobs\\Report"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=60):
    """(status, decoded JSON or None, seconds) on a new connection."""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Authorization": "Bearer " + TOKEN}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        c.request(method, path, body=data, headers=headers)
        res = c.getresponse()
        raw = res.read()
        took = time.perf_counter() - t0
        try:
            return res.status, json.loads(raw), took
        except ValueError:
            return res.status, None, took
    finally:
        c.close()


def http_master(env, name, pools, http_port, extra=""):
    os.environ["QPOOL_BENCH_TOKEN"] = TOKEN
    p, log = env.master(pools, name, 'job_history_size = 100000; '
                        'http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_BENCH_TOKEN"; }; %s' % (http_port, extra))
    for _ in range(200):
        try:
            if request(http_port, "GET", "/healthz", timeout=2)[0] in (200, 503):
                break
        except OSError:
            time.sleep(0.05)
    return p, log


def idle_pool(env):
    return ('{ name = "w"; queues = ["bench-idle"]; processes = 1; handler = { type = "pipe"; command = ["%s"]; }; }'
            % env.handler)


def history_record(i, n, t0):
    rec = {"uuid": str(uuid.uuid4()), "id": uuid.uuid4().hex, "name": CLASSES[i % 4], "queue": "default",
           "pool": "w", "host": "app%d" % (i % 3), "worker": "w#%d" % (i % 8), "pid": 1000 + i % 8, "attempt": 1,
           "outcome": "failed" if i % 50 == 0 else "done", "wait_ms": 1.2, "runtime_ms": 3.4,
           "started_at": t0 - (n - i) * 10, "finished_at": t0 - (n - i) * 10 + 3, "exception": "",
           "tags": ["App\\Models\\Customer:%d" % (i % 5000), "invoices"], "silenced": False}
    if rec["outcome"] == "failed":
        rec["exception"] = "RuntimeException: gateway timeout for order %d" % i
    return rec


def run_search(env, records=100000, rounds=10):
    """GET /api/jobs/recent over a history of `records` records (written as
    a master writes them: JSON of the API's shape, about 400 bytes each)."""
    env.flush()
    key = PREFIX + "qpool:{qpool-jobs}:list"
    t0 = int(time.time() * 1000)
    target = records // 2
    pipe = env.r.pipeline(transaction=False)
    for i in range(records):
        rec = history_record(i, records, t0)
        if i == target:
            rec["exception"] = "RuntimeException: the gateway refused INV-4711"
        pipe.lpush(key, json.dumps(rec, separators=(",", ":")))
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    http_port = free_port()
    p, _ = http_master(env, "search", idle_pool(env), http_port)
    queries = {
        "class_tag_text_one_match": {"name": CLASSES[target % 4], "tag": "App\\Models\\Customer:%d" % (target % 5000),
                                     "q": "inv-4711"},
        "text_one_match": {"q": "inv-4711"},
        "tag_20_matches": {"tag": "App\\Models\\Customer:77"},
        "class_first_100": {"name": "App\\Jobs\\SyncCrm"},
        "text_no_match": {"q": "no-such-text"},
    }
    out = {"records": env.r.llen(key), "bytes_per_record": env.r.memory_usage(key) // max(1, env.r.llen(key))}
    try:
        for name, q in queries.items():
            times, found, truncated = [], 0, None
            for _ in range(rounds):
                st, o, took = request(http_port, "GET", "/api/jobs/recent?" + urllib.parse.urlencode(q))
                times.append(took * 1000)
                found, truncated = len(o["jobs"]), o.get("truncated", False)
            out[name] = {"found": found, "truncated": truncated, "p50_ms": round(statistics.median(times), 1),
                         "max_ms": round(max(times), 1)}
            print("search", name, out[name], flush=True)
    finally:
        env_stop(p)
    return out


def env_stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(60)


def failed_seed(env, total=100000, matching=3000, queues=5):
    """total failed records in `queues` queues, `matching` of them of the
    class the retry names, spread through the store."""
    trace = "\n".join("#%d /srv/app/vendor/laravel/framework/src/Illuminate/Queue/Worker.php(%d): "
                      "Illuminate\\Queue\\Worker->process()" % (i, 100 + i) for i in range(8))
    now = int(time.time())
    every = total // matching
    pipe = env.r.pipeline(transaction=False)
    for i in range(total):
        cls = "App\\Jobs\\SyncCrm" if i % every == 0 and i // every < matching else "App\\Jobs\\SendMail"
        q = "failed-%d" % (i % queues)
        u = str(uuid.uuid4())
        payload = {"uuid": u, "displayName": cls, "job": "Illuminate\\Queue\\CallQueuedHandler@call",
                   "maxTries": None, "timeout": None, "data": {"commandName": cls, "command": "O:8:\"customer\":%d" % i},
                   "id": uuid.uuid4().hex, "attempts": 3}
        exc = "RuntimeException: the CRM answered 503 for customer %d in /srv/app/app/Jobs/SyncCrm.php:42\n%s" % (i, trace)
        at = now - total + i
        pipe.hset(PREFIX + "qpool:failed:job:" + u, mapping={"uuid": u, "connection": "redis", "queue": q,
                                                               "payload": json.dumps(payload, separators=(",", ":")),
                                                               "exception": exc, "failed_at": at})
        pipe.zadd(PREFIX + "qpool:failed:" + q, {u: at})
        if i % 5000 == 4999:
            pipe.execute()
    for k in range(queues):
        pipe.sadd(PREFIX + "qpool:failed:queues", "failed-%d" % k)
    pipe.execute()


def healthz_prober(port, stop, out):
    while not stop.is_set():
        t0 = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            c.request("GET", "/healthz")
            st = c.getresponse().status
        except OSError as e:
            st = repr(e)
        finally:
            c.close()
        out.append((st, time.perf_counter() - t0))
        time.sleep(0.01)


def follow(port, body):
    """POST /api/failed/retry with body, following the cursor: (requests,
    seconds, summed answer)."""
    n, t0, tot = 0, time.perf_counter(), {"matched": 0, "retried": 0, "scanned": 0}
    cursor = None
    while True:
        b = dict(body)
        if cursor:
            b["cursor"] = cursor
        st, o, _ = request(port, "POST", "/api/failed/retry", b)
        n += 1
        if st != 200:
            raise RuntimeError("retry: %s %s" % (st, o))
        for k in tot:
            tot[k] += o.get(k, 0)
        cursor = o.get("cursor")
        if not cursor:
            return n, time.perf_counter() - t0, tot


def redis_ms(env):
    """Redis's own time since the last CONFIG RESETSTAT, by command (ms)."""
    return {k.replace("cmdstat_", ""): round(v["usec"] / 1000, 1)
            for k, v in env.r.info("commandstats").items() if v["usec"] >= 1000}


def search_failed(port, q):
    """GET /api/failed with filters q, following the cursor: (requests,
    seconds, matches, slowest request in ms)."""
    n, t0, found, slowest, cursor = 0, time.perf_counter(), 0, 0.0, None
    while True:
        args = dict(q, limit=1000)
        if cursor:
            args["cursor"] = cursor
        st, o, took = request(port, "GET", "/api/failed?" + urllib.parse.urlencode(args))
        n += 1
        slowest = max(slowest, took * 1000)
        if st != 200:
            raise RuntimeError("search: %s %s" % (st, o))
        found += len(o["failed"])
        cursor = o.get("cursor")
        if not cursor:
            return n, time.perf_counter() - t0, found, slowest


def run_bulkretry(env, total=100000, matching=3000):
    env.flush()
    failed_seed(env, total, matching)
    port = free_port()
    p, _ = http_master(env, "bulk", idle_pool(env), port)
    out = {"failed_records": total}
    try:
        for what, q in (("search_class_text", {"class": "App\\Jobs\\SyncCrm", "q": "customer 4224 "}),
                        ("search_text", {"q": "CUSTOMER 4242 "})):
            env.r.config_resetstat()
            n, dt, found, slowest = search_failed(port, q)
            out[what] = {"requests": n, "seconds": round(dt, 2), "found": found, "slowest_request_ms": round(slowest),
                         "redis_ms": redis_ms(env)}
            print("bulkretry", what, out[what], flush=True)
        env.r.config_resetstat()
        n, dt, tot = follow(port, {"class": "App\\Jobs\\SyncCrm", "dry_run": True})
        out["count_first"] = {"requests": n, "seconds": round(dt, 2), "matched": tot["matched"], "redis_ms": redis_ms(env)}
        print("bulkretry count", out["count_first"], flush=True)
        probes, stop = [], threading.Event()
        th = threading.Thread(target=healthz_prober, args=(port, stop, probes))
        th.start()
        time.sleep(0.5)
        env.r.config_resetstat()
        try:
            n, dt, tot = follow(port, {"class": "App\\Jobs\\SyncCrm"})
        finally:
            time.sleep(0.3)
            stop.set()
            th.join()
        took = sorted(t for _, t in probes)
        ready = sum(env.r.llen(PREFIX + "queues:failed-%d" % k) for k in range(5))
        out["retry"] = {"requests": n, "seconds": round(dt, 2), "retried": tot["retried"], "ready_after": ready,
                        "redis_ms": redis_ms(env),
                        "healthz_probes": len(probes), "healthz_not_200": sum(1 for st, _ in probes if st != 200),
                        "healthz_p50_ms": round(took[len(took) // 2] * 1000, 1),
                        "healthz_p99_ms": round(took[min(len(took) - 1, int(len(took) * 0.99))] * 1000, 1),
                        "healthz_max_ms": round(took[-1] * 1000, 1)}
        print("bulkretry retry", out["retry"], flush=True)
    finally:
        env_stop(p)
    return out


def _pause_class(env, name, cls, on):
    subprocess.run([env.qpool, "pause" if on else "continue", "--class", cls, "-c", str(env.tmp / (name + ".conf"))],
                   check=True, capture_output=True)


def _classpause_drain(env, template, native_pool, jobs, held, paused, data=None, workers=1):
    """(jobs/s, Redis us per job) of `jobs` jobs of the template's class
    (no-op, or data's action) through one native worker, with `held` jobs
    of App\\Jobs\\Paused ahead of them in the queue, that class paused or
    not."""
    env.flush()
    name = "cpause"
    p, _ = env.master(native_pool(env, workers, [env.handler], False), name)
    try:
        for _ in range(500):
            if (env.tmp / (name + ".sock")).exists():
                break
            time.sleep(0.01)
        time.sleep(1.0)
        conf = str(env.tmp / (name + ".conf"))
        subprocess.run([env.qpool, "pause", "-c", conf], check=True, capture_output=True)
        if paused:
            _pause_class(env, name, "App\\Jobs\\Paused", True)
        if held:
            other = dict(template)
            other["displayName"] = "App\\Jobs\\Paused"
            env.push_copies(other, held)
        env.push_copies(template, jobs, data=data)
        time.sleep(1.5)  # the workers read the paused classes each second
        k = PREFIX + "queues:bench"
        env.r.config_resetstat()
        t0 = time.monotonic()
        subprocess.run([env.qpool, "continue", "-c", conf], check=True, capture_output=True)
        while env.r.llen(k) > held or env.r.zcard(k + ":reserved"):
            time.sleep(0.01)
        dt = time.monotonic() - t0
        stats = env.r.info("commandstats")
    finally:
        env_stop(p)
    # Redis's own time per job (every command), which the machine's noise
    # moves far less than jobs/s
    return round(jobs / dt), round(sum(v["usec"] for v in stats.values()) / jobs, 1)


def run_classpause(env, template, native_pool, jobs=20000, rounds=3):
    """The other jobs of a queue while a class is paused: the variants
    alternated, `rounds` each, best and all runs given (the machine is
    shared), and Redis's time per job; no-op jobs, then jobs of 2 ms (the
    fixture's sleep:2)."""
    variants = {"none_paused": (0, False), "paused_none_queued": (0, True), "paused_10_held_at_head": (10, True),
                "paused_49_held_at_head": (49, True)}
    out = {}
    sleep = dict(template.get("data") or {}, action="sleep:2")  # the same payload, its size too
    for kind, n, data in (("noop", jobs, None), ("2ms", jobs // 10, sleep)):
        runs, redis_us = {k: [] for k in variants}, {k: [] for k in variants}
        for _ in range(rounds):
            for k, (held, paused) in variants.items():
                rate, us = _classpause_drain(env, template, native_pool, n, held, paused, data)
                runs[k].append(rate)
                redis_us[k].append(us)
                print("classpause", kind, k, rate, "jobs/s", us, "Redis us/job", flush=True)
        base = max(runs["none_paused"])
        out[kind] = {k: {"jobs_per_s_best": max(v), "runs": v,
                         "loss_percent_best_vs_best": round(100 * (1 - max(v) / base), 1),
                         "redis_us_per_job_median": statistics.median(redis_us[k])} for k, v in runs.items()}
        print("classpause", kind, out[kind], flush=True)
    return out
