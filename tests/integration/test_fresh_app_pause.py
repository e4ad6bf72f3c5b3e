"""Laravel's own `php artisan queue:pause database:default` on a fresh app
(issue 30: "queue:pause database:default stops the pops, and queue:resume
brings them back"): a Laravel 13 app as `laravel new` makes it
(tests/laravel-app-13-fresh: QUEUE_CONNECTION=database, CACHE_STORE=database
on SQLite), run by a pool with only `laravel = APP`, so an app_driver pool
whose app agent reads the pause keys through the app's database cache store.
Paused, the jobs stay in the jobs table, unreserved, over several balance
passes, and `qpool status` says the queue is paused by Laravel; resumed, they
run. The same with `--all` (illuminate:queues:paused). Laravel 13 runs in the
Debian sid root (laravel_roots.py)."""
from conftest import wait_for
from test_fresh_app import fresh_app, laravel13  # noqa: F401 (fixtures)


def agent_replies(m):
    return (m.pool("app").get("agent") or {}).get("replies", 0)


def laravel_paused(m):
    return [q["laravel_paused"] for q in m.pool("app")["queues"] if q["name"] == "default"] == [True]


def held_over_passes(m, app, n):
    """The jobs table keeps n jobs, none reserved, while the agent answers
    four more passes (signals and sizes, two a pass) with the pause in force."""
    seen = agent_replies(m)
    wait_for(lambda: agent_replies(m) >= seen + 8, 60, what="four more balance passes")
    rows = app.table("select reserved_at, attempts from jobs")
    assert [(r["reserved_at"], r["attempts"]) for r in rows] == [(None, 0)] * n
    assert not any(app.visits())  # no job ran


def test_queue_pause_of_a_database_connection_holds_its_jobs(master_factory, redis_server, fresh_app):
    app = fresh_app
    m = master_factory(redis_server)
    m.write_config(app.pool(), qpool="  balance_interval = 0.5;")
    m.start()
    try:
        wait_for(lambda: (m.pool("app").get("agent") or {}).get("state") == "running", 60,
                 what="the app agent")
        wait_for(lambda: any(w.get("state") == "idle" for w in m.pool("app")["children"]), 60,
                 what="the worker to be idle")

        app.artisan("queue:pause", "database:default")
        m.wait_log(r"pool app: queue default paused by Laravel's queue:pause", 30)
        assert laravel_paused(m)
        assert "(queue:pause)" in m.cli("status").stdout
        app.artisan("visits:record", "paused", "--count=2")
        held_over_passes(m, app, 2)
        assert laravel_paused(m)

        app.artisan("queue:resume", "database:default")
        m.wait_log(r"pool app: queue default resumed by Laravel's queue:resume", 30)
        wait_for(lambda: not app.table("select id from jobs"), 60, interval=0.25, what="the 2 jobs after resume")
        assert sorted(x.split()[0] for x in app.visits() if x) == ["paused-1", "paused-2"]

        # every queue at once: illuminate:queues:paused
        app.artisan("queue:pause", "--all")
        m.wait_log(r"pool app: queue default paused by Laravel's queue:pause", 30, count=2)
        app.artisan("visits:record", "all", "--count=1")
        seen = agent_replies(m)
        wait_for(lambda: agent_replies(m) >= seen + 8, 60, what="four more balance passes")
        assert [r["reserved_at"] for r in app.table("select reserved_at from jobs")] == [None]
        app.artisan("queue:resume", "--all")
        m.wait_log(r"pool app: queue default resumed by Laravel's queue:resume", 30, count=2)
        wait_for(lambda: not app.table("select id from jobs"), 60, interval=0.25, what="the job after resume --all")
        assert sorted(x.split()[0] for x in app.visits() if x) == ["all-1", "paused-1", "paused-2"]
        assert not redis_server.client().keys("*queues:default*")  # no job went through Redis
    finally:
        assert m.stop(60) == 0
