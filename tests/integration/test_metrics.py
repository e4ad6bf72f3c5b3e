"""Job metrics: what workers measure (outcome, runtime, wait) reaches the
master through each worker's stats channel and shows per queue, class and
outcome (`qpool status --json`, pools[].job_stats)."""
import json
import time

from conftest import FIXTURE_HANDLER, PREFIX, make_payload, push_many, wait_for


def pool(log, extra=""):
    return ('{ name = "w"; queues = ["high", "default"]; processes = 2; tries = 2; backoff = [0]; timeout = 1;'
            ' handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; %s }'
            % (FIXTURE_HANDLER, log, extra))


def stats(master):
    """{(queue, job, outcome): entry} of pool w."""
    return {(e["queue"], e["job"], e["outcome"]): e for e in master.pool("w")["job_stats"]}


def count(master, queue=None, job=None, outcome=None):
    return sum(e["count"] for (q, j, o), e in stats(master).items()
               if (queue is None or q == queue) and (job is None or j == job) and (outcome is None or o == outcome))


def test_outcomes_runtimes_and_waits_per_queue_and_class(master, r, tmp_path):
    master.write_config(pool(tmp_path / "fixture.log"))
    master.start()
    now = time.time()
    mail = "App\\Jobs\\SendMail"
    report = "App\\Jobs\\Report"
    push_many(r, "high", [make_payload("ok", job=mail) for _ in range(6)])
    push_many(r, "default", [make_payload("sleep:300", job=report) for _ in range(2)])
    push_many(r, "default", [make_payload("fail", job=report) for _ in range(3)])
    push_many(r, "high", [make_payload("hang", job=mail)])
    # Laravel 12.11+ payloads say when they were dispatched: their wait is measured
    push_many(r, "default", [make_payload("ok", job=report, createdAt=int(now) - 5)])
    wait_for(lambda: count(master) == 6 + 2 + 3 * 2 + 2 + 1, 30, what="every attempt counted")

    assert count(master, "high", mail, "done") == 6
    assert count(master, "default", report, "done") == 3
    assert count(master, "default", report, "released") == 3  # first attempts of the failing jobs
    assert count(master, "default", report, "failed") == 3    # their second attempts
    assert count(master, "high", mail, "timed_out") == 2      # released after 1 s, then failed
    s = stats(master)
    slow = s[("default", report, "done")]["runtime_ms"]
    assert slow["count"] == 3 and slow["p99"] >= 250          # two 300 ms jobs fall in (250, 500]
    quick = s[("high", mail, "done")]["runtime_ms"]
    assert quick["p50"] is not None and quick["p50"] <= 100
    timed = s[("high", mail, "timed_out")]["runtime_ms"]
    assert timed["count"] == 2 and timed["p50"] >= 1000       # (1000, 2500]
    wait = s[("default", report, "done")]["wait_ms"]
    assert wait["count"] == 1 and 5000 <= wait["sum"] < 10000  # only the payload with createdAt
    assert s[("high", mail, "done")]["wait_ms"]["count"] == 0  # no dispatch time: not observed


def test_job_classes_are_capped(master, r, tmp_path):
    master.write_config(pool(tmp_path / "fixture.log"), qpool="metrics_job_classes = 3;")
    master.start()
    push_many(r, "high", [make_payload("ok", job="App\\Jobs\\J%d" % i)
                          for i in range(20)])
    wait_for(lambda: count(master) == 20, 20, what="20 jobs counted")
    names = {j for (_, j, _) in stats(master)}
    assert "other" in names and len(names - {"other"}) <= 3, names


def test_counts_survive_worker_restarts(master, r, tmp_path):
    # a worker's last counts are read when it exits, before its channel closes
    master.write_config(pool(tmp_path / "fixture.log", "max_jobs = 3;"))
    master.start()
    push_many(r, "high", [make_payload("ok") for _ in range(13)])
    wait_for(lambda: count(master, outcome="done") == 13, 20, what="13 jobs counted across worker restarts")


def history(master, minutes=5):
    res = master.cli("metrics", "--json", "--minutes", str(minutes))
    return json.loads(res.stdout)


def history_count(master, outcome=None):
    """Job attempts in the history (worker exits, "exit:<kind>", aside unless asked for)."""
    return sum(e["count"] for m in history(master)["minutes"] for e in m["series"]
               if (outcome is None and not e["outcome"].startswith("exit:")) or e["outcome"] == outcome)


def test_history_survives_a_restart_and_every_key_expires(master, r, tmp_path):
    master.write_config(pool(tmp_path / "fixture.log"), qpool="metrics_retention = 600;")
    master.start()
    push_many(r, "high", [make_payload("ok", job="App\\Jobs\\A") for _ in range(7)])
    push_many(r, "default", [make_payload("fail", job="App\\Jobs\\B") for _ in range(2)])
    wait_for(lambda: history_count(master) == 7 + 2 * 2, 20, what="the minute history in Redis")
    assert history_count(master, "done") == 7 and history_count(master, "failed") == 2
    entry = [e for m in history(master)["minutes"] for e in m["series"] if e["outcome"] == "done"][0]
    assert entry["pool"] == "w" and entry["queue"] == "high" and entry["job"] == "App\\Jobs\\A"
    assert entry["host"] and entry["runtime_ms"]["count"] == entry["count"]
    text = master.cli("metrics").stdout
    assert "done" in text.splitlines()[0]
    # every minute key expires: retention plus the minute itself
    keys = r.keys(PREFIX + "qpool:metrics:*")
    assert keys and all(0 < r.pttl(k) <= (600 + 60) * 1000 for k in keys)
    # a new master on the same Redis keeps the history and adds to it
    assert master.stop() == 0
    master.start()
    assert history_count(master) == 11
    push_many(r, "high", [make_payload("ok", job="App\\Jobs\\A")])
    wait_for(lambda: history_count(master, "done") == 8, 20, what="the new master adding to it")


def test_a_released_jobs_next_attempt_has_a_measured_wait(master, r, tmp_path):
    # no createdAt (a Laravel 8 payload): the first attempt's wait is unknown;
    # qpool stamps the copy it releases with when it is due, so the second
    # attempt's wait is measured from then
    master.write_config(pool(tmp_path / "fixture.log").replace("backoff = [0]", "backoff = [2]"))
    master.start()
    push_many(r, "high", [make_payload("failuntil:2", job="App\\Jobs\\Retry")])
    wait_for(lambda: r.zcard(PREFIX + "queues:high:delayed") == 1, 10, what="the release")
    (released,) = r.zrange(PREFIX + "queues:high:delayed", 0, -1, withscores=True)
    body = json.loads(released[0])
    assert body["attempts"] == 1 and body["qpoolAvailableAt"] == int(released[1]) * 1000
    wait_for(lambda: count(master, outcome="done") == 1, 15, what="the second attempt")
    s = stats(master)
    assert s[("high", "App\\Jobs\\Retry", "released")]["wait_ms"]["count"] == 0
    wait = s[("high", "App\\Jobs\\Retry", "done")]["wait_ms"]
    assert wait["count"] == 1 and 0 <= wait["sum"] < 2000  # due, then picked up within the migration's second


def test_memory_recycles_and_crashes_are_in_the_minute_history(master, r, tmp_path):
    # a worker past its memory limit (exit 12) and one whose handler crashes
    # the worker: counted per minute, per pool, beside the jobs
    master.write_config(pool(tmp_path / "fixture.log", "memory = 40;"))
    master.start()
    push_many(r, "high", [make_payload("grow:80")])
    wait_for(lambda: history_count(master, "exit:memory") >= 1, 30, what="the memory recycle in the history")
    e = [e for m in history(master)["minutes"] for e in m["series"] if e["outcome"] == "exit:memory"][0]
    assert e["pool"] == "w" and e["queue"] == "-" and e["job"] == "-"
    text = master.cli("metrics").stdout.splitlines()
    assert "recycled" in text[0] and "w.crashes" in text[0]


def test_metrics_takes_the_filters_of_the_other_lists(master, r, tmp_path):
    # issue 32: `qpool metrics` takes class, queue, pool, host, status (outcome), since and until
    master.write_config(pool(tmp_path / "fixture.log"))
    master.start()
    push_many(r, "high", [make_payload("ok", job="App\\Jobs\\A") for _ in range(4)])
    push_many(r, "default", [make_payload("ok", job="App\\Jobs\\B") for _ in range(3)])
    push_many(r, "default", [make_payload("fail", job="App\\Jobs\\B") for _ in range(2)])
    wait_for(lambda: history_count(master) == 4 + 3 + 2 * 2, 30, what="every attempt in the minute history")

    def entries(*args):
        out = json.loads(master.cli("metrics", "--json", "--minutes", "5", *args).stdout)
        assert all("all" not in m for m in out["minutes"])  # every job's summary, not the filter's
        return [e for m in out["minutes"] for e in m["series"]]

    a = entries("--class", "App\\Jobs\\A")
    assert a and {e["job"] for e in a} == {"App\\Jobs\\A"} and sum(e["count"] for e in a) == 4
    b = entries("--queue", "default", "--status", "failed")
    assert b and sum(e["count"] for e in b) == 2 and {(e["queue"], e["outcome"]) for e in b} == {("default", "failed")}
    host = b[0]["host"]
    assert sum(e["count"] for e in entries("--pool", "w", "--host", host, "--outcome", "done")) == 4 + 3
    assert entries("--host", "no-such-host") == [] and entries("--pool", "nope") == []
    assert sum(e["count"] for e in entries("--class", "App\\Jobs\\B", "--since", "10m")) == 3 + 2 * 2
    assert entries("--class", "App\\Jobs\\B", "--until", "2001-01-01") == []
    text = master.cli("metrics", "--class", "App\\Jobs\\A", "--since", "1h").stdout.splitlines()
    assert text[0].startswith("MINUTE") and sum(int(line.split()[2]) for line in text[1:]) == 4  # the done column
    bad = master.cli("metrics", "--since", "yesterday", check=False)
    assert bad.returncode == 64 and "--since" in bad.stderr
