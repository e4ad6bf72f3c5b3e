"""The MariaDB and PostgreSQL servers the database-driver tests start
(sqlservers.py): a `laravel` database its user can write, data kept across
a restart and across a kill, and nothing left running after stop."""
import os

from sqlservers import sql_server  # noqa: F401 (fixture)


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_server_keeps_its_data_across_restarts_and_stops_clean(sql_server):
    srv = sql_server
    srv.query("create table probe (id integer primary key, note varchar(20))")
    srv.query("insert into probe values (1, 'before')")
    srv.restart()
    srv.query("insert into probe values (2, 'after restart')")
    srv.restart(kill=True)  # a crash: committed rows survive
    assert srv.query("select id, note from probe order by id") == [
        {"id": 1, "note": "before"}, {"id": 2, "note": "after restart"}]
    env = srv.laravel_env()
    assert env["DB_PORT"] == str(srv.port) and env["DB_CONNECTION"] in ("mysql", "pgsql")
    pgid = srv.proc.pid
    srv.stop()
    assert not group_alive(pgid)
    srv.stop()  # idempotent
