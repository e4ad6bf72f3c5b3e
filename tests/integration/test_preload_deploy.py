"""Preload (issue 21), the zygote's life across deploys: a move of the app
path, a zygote of an older generation that goes, and what must not read as
a move (the review of the prefork merge: docs/architecture.md, "Preloading
the app", and docs/operations.md, "Deploys")."""
import os
import re
import signal
import time

import pytest

from conftest import LARAVEL_APP, proc_alive, queue_state, wait_for
from test_preload import ADAPTER, deploy, env_block, forked_pids, pool, probes, releases, settled, zygote_pids
from test_preload_channel import fake_pool


@pytest.mark.parametrize("how", ["moved", "killed"])
def test_an_old_generation_whose_zygote_is_gone_boots_its_handlers(master, r, laravel_app, tmp_path, how):
    """A job of the old generation times out after its zygote has gone (it
    saw the app move, or was killed while the pool rolled): its worker needs
    a handler for the job's failure path. It asked the dead zygote, whose
    socket the master kept open, waited out handler.start_timeout and lost
    the failure hooks: no failed_jobs row. Now it is refused and boots one."""
    app = laravel_app
    rel1, rel2, current = releases(tmp_path)
    master.write_config(pool(app, 1, app_path=current, extra="tries = 1; timeout = 6;"))
    master.start()
    master.wait_log(r"zygote: Laravel [\d.]+ booted from", timeout=30)
    app.dispatch("SleepJob", 20000, tag="long")
    wait_for(lambda: [m for m in app.read_markers() if m.get("tag") == "long"], 30, what="the long job")
    old = zygote_pids(master)[0]
    if how == "moved":
        deploy(tmp_path, current, rel2)
        master.wait_log("the app moved", timeout=20)
    else:
        master.cli("restart", "app")
        master.wait_log(r"started its zygote \(pid \d+, generation 2\)", timeout=20)
        os.kill(old, signal.SIGKILL)
        wait_for(lambda: not proc_alive(old), 10, what="the old zygote to go")
    # its failure path writes the failed_jobs row (after the job left Redis)
    failed = wait_for(lambda: app.failed_jobs(), 90, what="the timed-out job's failed_jobs row")
    assert len(failed) == 1 and "SleepJob" in failed[0]["payload"], failed
    wait_for(lambda: settled(r), 10, what="the job to be settled")
    log = master.log()
    assert "could not run its failure hooks" not in log
    assert master.count_log(r"started its zygote \(pid \d+, generation 1\)") == 1, "generation 1's is never restarted"


def test_an_app_that_names_itself_through_a_link_has_not_moved(master, r, laravel_app, tmp_path):
    """basePath() is what the app says it is (APP_BASE_PATH, honoured when
    PHP fills $_ENV: variables_order with E, PHP's default without a
    php.ini): a link to the app is not the app path's resolution, and the
    pool was rolled once a second for ever."""
    app = laravel_app
    link = tmp_path / "applink"
    os.symlink(LARAVEL_APP, link)
    block = env_block(app, "")
    block = block[:block.rindex("}")] + ' APP_BASE_PATH = "%s"; };' % link
    master.write_config('{ name = "app"; queues = ["default"]; processes = 2; working_directory = "%s"; %s\n'
                        '  handler = { type = "pipe"; command = ["php", "-d", "variables_order=EGPCS", "%s", "%s"]; };'
                        ' }' % (LARAVEL_APP, block, ADAPTER, LARAVEL_APP))
    master.start()
    app.dispatch("ForkProbeJob", 1, 0, count=2, tag="link")
    wait_for(lambda: len(probes(app)) == 2 and settled(r), 30, what="the probes")
    assert {m["ppid"] for m in probes(app)} == set(zygote_pids(master)[:1])
    time.sleep(3)  # the zygote looks at the app path once a second
    assert "the app moved" not in master.log()
    assert len(zygote_pids(master)) == 1


def test_moves_that_keep_coming_are_backed_off(master, r):
    """A zygote that exits 76 again and again (here a fake one, a moment
    after its start) rolled the pool every time: 16 rolls in 20 s. The first
    move rolls at once (a deploy); the next ones wait 1 s, then 2 s, ..."""
    master.write_config(fake_pool("moved"))
    master.start()
    master.wait_log(r"rolling the pool in 2 s", timeout=30)
    log = master.log()
    assert log.count("the app moved (a deploy)") == 1, log[-3000:]
    assert re.findall(r"the app moved again, [\d.]+ s after its zygote \(pid \d+\) started: rolling the pool "
                      r"in (\d+) s", log) == ["1", "2"]
    assert master.count_log(r"started its zygote") == 3


def test_an_app_that_exits_76_while_it_boots_has_not_moved(master, r, laravel_app):
    """76 is what the zygote says when the app path moved: the app's own
    exit(76) in a service provider rolled the pool as if it had moved."""
    master.write_config(pool(laravel_app, 1, hazards="exit76"))
    master.start()
    master.wait_log(r"its zygote \(pid \d+\) exited with status 1 after .*did the app boot\?", timeout=30)
    log = master.log()
    assert "the app ended the process while it booted" in log
    assert "the app moved" not in log


def test_a_deploy_is_seen_while_the_zygote_forks_without_a_pause(master, r, laravel_app, tmp_path):
    """The zygote looked at the app path only after a second without a fork
    request: a busy pool (here each worker exits after one job, so handlers
    are forked all the time) did not notice a deploy until its queue ran
    dry."""
    app = laravel_app
    app.env["MARKER_EVENTS"] = "0"
    rel1, rel2, current = releases(tmp_path)
    master.write_config(pool(app, 4, app_path=current, extra="max_jobs = 1;"))
    master.start()
    master.wait_log(r"zygote: Laravel [\d.]+ booted from %s " % re.escape(str(rel1)), timeout=30)
    app.dispatch("NoopJob", count=3000)
    wait_for(lambda: len(forked_pids(master)) >= 20, 60, what="handlers being forked")
    deploy(tmp_path, current, rel2)
    master.wait_log("the app moved", timeout=60)
    left = queue_state(r, "default")["ready"]
    assert left > 0, "the move was seen only once the queue had run dry"
