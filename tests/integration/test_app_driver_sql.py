"""Parity with `queue:work` for the `database` queue driver on real MariaDB
and PostgreSQL servers (issue 30): the same jobs, run once by `php artisan
queue:work database` and once by an app_driver pool, from the same rows,
give the same attempts, failed() hooks and failed_jobs rows, and leave the
jobs table empty. Laravel 13 in the sid root, and the host's own Laravel;
the servers are Debian's, started per test (sqlservers.py)."""

from sqlapps import make_sql_app, sql_version  # noqa: F401 (fixture)
from sqlservers import sql_server  # noqa: F401 (fixture)
from test_app_driver import dispatch, parity_outcomes

SNAPSHOT = "create table jobs_snapshot as select * from jobs"
RESTORE = ["delete from jobs", "insert into jobs select * from jobs_snapshot", "delete from failed_jobs"]


def test_same_results_as_queue_work_on_mariadb_and_postgres(master_factory, redis_server, sql_version,
                                                             sql_server, tmp_path):
    app = make_sql_app(sql_version, redis_server, tmp_path, sql_server)
    try:
        dispatch(app, "MarkerJob", count=2, tag="p")
        dispatch(app, "ManualFailJob", tag="manual")
        dispatch(app, "MaxExceptionsJob", tag="maxexc")  # maxExceptions 2, counted in the app's cache
        assert len(app.jobs()) == 4  # the jobs wait in the server's table
        sql_server.query(SNAPSHOT)
        results = parity_outcomes(master_factory, redis_server, app,
                                  lambda: [sql_server.query(sql) for sql in RESTORE],
                                  lambda: not app.jobs() and len(app.failed_jobs()) == 2, ", " + sql_server.kind)
        assert results[0] == results[1]
        runs, hooks, rows = results[1]
        assert sorted(r for r in runs if r[0] == "MarkerJob") == [("MarkerJob", "p-1", 1), ("MarkerJob", "p-2", 1)]
        assert [r for r in runs if r[0] == "MaxExceptionsJob"] == [("MaxExceptionsJob", "maxexc", 1),
                                                                    ("MaxExceptionsJob", "maxexc", 2)]
        assert len(hooks) == 2 and all(r[:2] == ("database", "default") for r in rows)
        # the queue events queue:work raises, from Laravel's own Worker
        events = {x["event"] for x in app.read_markers() if x.get("event") not in (None, "failed_hook")}
        assert {"JobProcessing", "JobProcessed", "JobExceptionOccurred", "JobFailed"} <= events, events
        # nothing went through Redis's queues
        assert not redis_server.client().keys("*queues:default*")
    finally:
        app.remove()
