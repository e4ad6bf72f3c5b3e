"""An app_driver pool's workers read the watched set only when the master's
published generation changes (issue 31): each of them opened a connection
of its own to the pool's Redis and sent one SMEMBERS a second even with no
tag watched. Now, with no tag watched, none of them sends any; watching a
tag reaches each of them (docs/operations.md, monitored tags)."""
import pytest

from conftest import HOST_LARAVEL, wait_for
from laravel_roots import laravel_version, version_app  # noqa: F401 (fixtures)
from test_app_driver import pool, use_database_queue
from test_monitored_gen import at_most_the_masters, smembers_by_client

HOST = [str(HOST_LARAVEL)]   # the host's Laravel: no chroot needed


@pytest.mark.parametrize("laravel_version", HOST, indirect=True)
def test_app_driver_workers_read_nothing_while_no_tag_is_watched(master_factory, redis_server, version_app):
    app = version_app
    use_database_queue(app)
    m = master_factory(redis_server)
    m.write_config(pool(app).replace("processes = 1;", "processes = 2;"), qpool="  job_history_size = 100;")
    m.start()
    try:
        wait_for(lambda: sum(w.get("state") == "idle" for w in m.pool("appq")["children"]) == 2, 60,
                 what="both workers to be idle")
        seen, _ = smembers_by_client(redis_server.port, 5)
        assert at_most_the_masters(seen, 5), seen  # the master's; before, each worker's own connection too
        assert "watching" in m.cli("monitor", "add", "7").stdout
        m.wait_log(r"watched tags now: 1 ", timeout=60, count=2)
    finally:
        assert m.stop(60) == 0
