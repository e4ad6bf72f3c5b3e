"""Laravel's job middleware beside qpool's limits (issue 33 item 4), with the
fixture Laravel app (the host's Laravel 8) and the PHP adapter.

RateLimitedJob uses `RateLimited('parity')` (one job an hour): under
`queue:work` the first runs and the second is released by the middleware
for the hour, its attempt burned. Run by qpool's adapter, also under a
qpool limit on its class, the same happens, byte for byte in the counts.
A class under qpool's own limit instead waits in its queue, attempts 0."""
import json

from conftest import PREFIX, queue_state, wait_for
from test_laravel_adapter import adapter_pool

RL = "App\\Jobs\\RateLimitedJob"
LIMITS = ('limits = (\n  { class = "App\\\\Jobs\\\\RateLimitedJob"; concurrency = 1; },\n'
          '  { class = "App\\\\Jobs\\\\SleepJob"; concurrency = 1; }\n);\n')


def outcome(app, r):
    """What the run left: the jobs that ran (by tag), what waits in :delayed
    (class, attempts), the failed jobs."""
    runs = sorted(m["tag"] for m in app.read_markers() if not m.get("event") and m.get("tag"))
    delayed = sorted((json.loads(p)["displayName"], json.loads(p)["attempts"])
                     for p in r.zrange(PREFIX + "queues:default:delayed", 0, -1))
    return {"runs": runs, "delayed": delayed, "failed": len(app.failed_jobs())}


def reset(app, redis_server):
    redis_server.client(db=0).flushdb()
    redis_server.client(db=1).flushdb()  # the cache: the rate limiter's hits
    app.markers.write_text("")


def released(r):
    st = queue_state(r, "default")
    return st["ready"] == 0 and st["reserved"] == 0 and st["delayed"] == 1


def test_rate_limited_middleware_as_under_queue_work(master, redis_server, laravel_app):
    app, r = laravel_app, redis_server.client()
    app.dispatch("RateLimitedJob", tag="rl", count=2)
    app.artisan("queue:work", "--stop-when-empty", "--tries=3", timeout=120)
    wait_for(lambda: released(r), 30, what="queue:work to release the second job")
    php = outcome(app, r)
    assert php == {"runs": ["rl-1"], "delayed": [(RL, 1)], "failed": 0}, php  # the attempt burned

    reset(app, redis_server)
    master.write_config(adapter_pool(app, processes=2, extra="tries = 3;"))
    master.conf.write_text(master.conf.read_text() + LIMITS)
    master.start()
    app.dispatch("RateLimitedJob", tag="rl", count=2)
    wait_for(lambda: released(r) and len(app.read_markers()) >= 1, 90, what="qpool to run one and release the other")
    assert outcome(app, r) == php

    # qpool's own limit: the second SleepJob waits in the queue, its attempts unchanged
    app.dispatch("SleepJob", "4000", tag="sl", count=2)
    seen = []

    def second_started():
        seen.extend((j["displayName"], j["attempts"])
                    for j in map(json.loads, r.lrange(PREFIX + "queues:default", 0, -1)))
        return any(m.get("tag") == "sl-2" for m in app.read_markers())
    wait_for(lambda: any(m.get("tag") == "sl-1" for m in app.read_markers()), 60, what="the first SleepJob to start")
    wait_for(second_started, 60, what="the second SleepJob to run")
    assert seen and set(seen) == {("App\\Jobs\\SleepJob", 0)}, seen  # held in the queue, never popped early
    wait_for(lambda: queue_state(r, "default")["reserved"] == 0, 30, what="the SleepJobs to end")
    assert outcome(app, r)["delayed"] == [(RL, 1)] and not app.failed_jobs()
