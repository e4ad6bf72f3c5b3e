"""Laravel job batches (Bus::batch) through the app agent (src/master/mbatches.c,
php/src/Agent.php): the list and one batch over the control socket, the CLI and
the HTTP API, and "retry failed" as queue:retry-batch. The fixture Laravel 8
app of the host (job_batches in SQLite), real Redis and real processes."""
import json
import sqlite3
import subprocess
import urllib.parse

import pytest

from conftest import LARAVEL_APP, PYTHON, free_port, wait_for
from laravel_roots import argv_conf, laravel_version, version_app  # noqa: F401 (fixtures)
from test_http import OPEN_READS, TOKEN, code, get, http_conf
from test_laravel_adapter import ADAPTER
from test_tags import send

ENV_KEYS = ["REDIS_HOST", "REDIS_PORT", "REDIS_PREFIX", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE",
            "LOG_CHANNEL", "FAIL_ONCE_DIR", "DB_BUSY_TIMEOUT"]


def batch_pool(app, name="app", processes=1):
    env = " ".join('%s = "%s";' % (k, app.env[k]) for k in ENV_KEYS if k in app.env)
    if hasattr(app, "adapter_argv"):  # a version's app in its Debian root
        return ('{ name = "%s"; queues = ["default"]; processes = %d; tries = 1; environment = { %s };\n'
                '  handler = { type = "pipe"; command = %s; }; }' % (name, processes, env, argv_conf(app.adapter_argv())))
    return ('{ name = "%s"; queues = ["default"]; processes = %d; tries = 1; working_directory = "%s";'
            ' environment = { %s };\n  handler = { type = "pipe"; command = ["php", "%s", "%s"]; }; }'
            % (name, processes, LARAVEL_APP, env, ADAPTER, LARAVEL_APP))


def start(master, app, tmp_path, port, *batches):
    """Dispatch the batches (fixture:batch arguments), then start qpool: the
    fixture's SQLite takes one writer at a time, and a job must not run while
    its batch is still being written (Laravel pushes the jobs inside that
    transaction). One worker; WAL lets the agent and the test read beside
    it. The batch ids, in order."""
    con = sqlite3.connect(str(app.db))
    con.execute("pragma journal_mode=wal")
    con.close()
    if hasattr(app, "work_inner"):  # a version's app: the path as its root sees it
        (app.work / "data" / "fail-once").mkdir(exist_ok=True)
        app.env["FAIL_ONCE_DIR"] = str(app.work_inner / "data" / "fail-once")
    else:
        (tmp_path / "fail-once").mkdir(exist_ok=True)
        app.env["FAIL_ONCE_DIR"] = str(tmp_path / "fail-once")
    app.env["DB_BUSY_TIMEOUT"] = "20"
    ids = [dispatch_batch(app, *b) for b in batches]
    master.write_config(batch_pool(app), qpool=http_conf(port, 'token_env = "QPOOL_TEST_TOKEN"; ' + OPEN_READS))
    master.start(env={"QPOOL_TEST_TOKEN": TOKEN})
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    return ids


def dispatch_batch(app, *args):
    return app.artisan("fixture:batch", *args).stdout.strip().splitlines()[-1]


def api(port, path):
    status, _, body = get(port, path, timeout=30)
    return status, json.loads(body)


def detail(port, bid):
    """GET /api/batches/<bid>'s answer (the batch, its jobs), None unless 200."""
    status, body = api(port, "/api/batches/" + urllib.parse.quote(bid))
    return body if status == 200 else None


def batch(port, bid):
    return (detail(port, bid) or {}).get("batch")


def row(app, bid):
    con = sqlite3.connect(str(app.db))
    try:
        return con.execute("select pending_jobs, failed_jobs, finished_at from job_batches where id = ?",
                           (bid,)).fetchone()
    finally:
        con.close()


def two_batches_settled(master, app, tmp_path, port, start=start):
    """A batch of 3 with 1 failure beside one of 2, started with `start` and
    waited for until both settled: (its id, the other's)."""
    bid, other = start(master, app, tmp_path, port, ["--count=3", "--fail=1", "--allow-failures"], ["--count=2"])
    wait_for(lambda: row(app, bid)[:2] == (1, 1) and row(app, other)[0] == 0, 90,
             what="2 jobs done and 1 failed, and the other batch done")
    return bid, other


def test_a_batch_with_failures_is_shown_and_retried_until_it_finishes(master, laravel_app, tmp_path):
    """The issue's acceptance, by the API: a batch of 10 with 2 failures shows
    80 % processed and 2 failed; "retry failed" reruns those 2 (out of the
    app's failed_jobs and qpool's failed store), and the batch finishes."""
    retried_until_finished(master, laravel_app, tmp_path)


@pytest.mark.parametrize("laravel_version", ["13"], indirect=True)
def test_the_same_on_laravel_13(master, version_app, tmp_path):
    """The acceptance on Laravel 13 (Debian sid's, in its root): its
    BatchRepository, failer and RetryCommand."""
    retried_until_finished(master, version_app, tmp_path)


def retried_until_finished(master, laravel_app, tmp_path):
    port = free_port()
    (bid,) = start(master, laravel_app, tmp_path, port,
                   ["--count=10", "--fail=2", "--name=import <b>", "--allow-failures"])
    wait_for(lambda: row(laravel_app, bid)[0] == 2 and row(laravel_app, bid)[1] == 2, 90,
             what="8 jobs done and 2 failed in job_batches")
    b = wait_for(lambda: (lambda x: x if x and x["failed"] == 2 else None)(batch(port, bid)), 30,
                 what="the batch in /api/batches")
    assert (b["total"], b["pending"], b["processed"], b["failed"], b["progress"]) == (10, 2, 8, 2, 80), b
    assert b["name"] == "import <b>" and b["finished_at"] is None and b["cancelled_at"] is None
    assert len(b["failed_ids"]) == 2 and b["pool"] == "app"
    assert len(laravel_app.failed_jobs()) == 2
    # the list has it too, newest first
    status, lst = api(port, "/api/batches")
    assert status == 200 and lst["batches"][0]["id"] == bid and lst["pools"][0]["state"] == "ok", lst
    # retry: behind the token
    assert send(port, "POST", "/api/batches/%s/retry" % bid, body={})[0] == 401
    status, rep = send(port, "POST", "/api/batches/%s/retry" % bid, token=TOKEN, body={})
    assert status == 200 and rep["queued"] and rep["pool"] == "app", rep
    done = wait_for(lambda: (lambda x: x if x and x["pending"] == 0 else None)(batch(port, bid)), 90,
                    what="the retried jobs done")
    assert done["processed"] == 10 and done["progress"] == 100 and done["failed_ids"] == [], done
    wait_for(lambda: row(laravel_app, bid)[2] is not None, 30, what="the batch finished")
    assert wait_for(lambda: batch(port, bid)["finished_at"], 30, what="finished_at in the API")
    assert laravel_app.failed_jobs() == []
    # qpool's failed store no longer holds them either
    status, failed = api(port, "/api/failed")
    assert status == 200 and failed["failed"] == [], failed
    status, lst = api(port, "/api/batches")
    assert lst["pools"][0]["last_retry"]["retried"] == 2, lst
    # the CLI shows it
    out = master.cli("batches").stdout
    assert bid in out and "100%" in out and "finished" in out, out
    rep = json.loads(master.cli("batches", "--json").stdout)
    assert rep["batches"][0]["id"] == bid


def failed_somewhere(port, app, uuids):
    """The uuids each in the app's failed_jobs or in qpool's failed store."""
    held = {r["uuid"] for r in app.failed_jobs()}
    status, failed = api(port, "/api/failed")
    assert status == 200, failed
    return set(uuids) <= held | {f["uuid"] for f in failed["failed"]}


def test_an_agent_killed_during_a_retry_loses_no_job(master, laravel_app, tmp_path):
    """The agent's alarm kills it half way through a batch retry (here: a
    JobRetryRequested listener that hangs): every failed job is still in the
    app's failer or qpool's failed store, and a retry after finishes the
    batch. It lost them: the master forgot qpool's records before the app
    pushed, and the agent every row before its first push (review of
    batches, item 1)."""
    port = free_port()
    (bid,) = start(master, laravel_app, tmp_path, port, ["--count=3", "--fail=2", "--allow-failures"])
    wait_for(lambda: row(laravel_app, bid)[:2] == (2, 2), 90, interval=0.2, what="2 jobs failed in job_batches")
    b = wait_for(lambda: (lambda x: x if x and x["failed"] == 2 else None)(batch(port, bid)), 60,
                 interval=0.5, what="the batch in /api/batches")
    uuids = b["failed_ids"]
    assert len(uuids) == 2 and failed_somewhere(port, laravel_app, uuids)
    stall = tmp_path / "fail-once" / "stall-retry"
    stall.touch()
    status, rep = send(port, "POST", "/api/batches/%s/retry" % bid, token=TOKEN, body={})
    assert status == 200, rep
    lr = wait_for(lambda: api(port, "/api/batches")[1]["pools"][0].get("last_retry"), 90, interval=0.5,
                  what="the retry's outcome")
    assert not lr["ok"], lr  # "went away" (or, on a very slow machine, no answer within 60 s)
    assert failed_somewhere(port, laravel_app, uuids), (laravel_app.failed_jobs(), api(port, "/api/failed"))
    stall.unlink()
    wait_for(lambda: send(port, "POST", "/api/batches/%s/retry" % bid, token=TOKEN, body={})[0] == 200, 60,
             interval=0.5, what="a second retry queued")
    done = wait_for(lambda: (lambda x: x if x and x["pending"] == 0 else None)(batch(port, bid)), 90,
                    interval=0.5, what="the retried jobs done")
    assert done["failed_ids"] == [] and laravel_app.failed_jobs() == []
    assert api(port, "/api/failed")[1]["failed"] == []


def test_a_job_the_app_retried_is_not_pushed_again(master, laravel_app, tmp_path):
    """A failed job of the batch that the app's failer (database-uuids) no
    longer holds, as after `php artisan queue:retry <uuid>` while the job
    has not run yet, but qpool's store still does: a batch retry does not
    push the job a second time (its record stays in qpool's store, for the
    operator); the other one is pushed back by the app (review of batches,
    item 3)."""
    port = free_port()
    (bid,) = start(master, laravel_app, tmp_path, port, ["--count=3", "--fail=2", "--allow-failures"])
    wait_for(lambda: row(laravel_app, bid)[:2] == (2, 2), 90, interval=0.2, what="2 jobs failed in job_batches")
    b = wait_for(lambda: (lambda x: x if x and x["failed"] == 2 else None)(batch(port, bid)), 60,
                 interval=0.5, what="the batch in /api/batches")
    gone, kept = b["failed_ids"]
    wait_for(lambda: {gone, kept} <= {f["uuid"] for f in api(port, "/api/failed")[1]["failed"]}, 30,
             interval=0.5, what="both in qpool's failed store")
    con = sqlite3.connect(str(laravel_app.db))
    con.execute("delete from failed_jobs where uuid = ?", (gone,))
    con.commit()
    con.close()
    status, rep = send(port, "POST", "/api/batches/%s/retry" % bid, token=TOKEN, body={})
    assert status == 200, rep
    lr = wait_for(lambda: api(port, "/api/batches")[1]["pools"][0].get("last_retry"), 60, interval=0.5,
                  what="the retry's outcome")
    assert lr["ok"] and lr["retried_by_app"] == 1 and lr["retried_from_qpool"] == 0, lr
    assert lr["not_found"] == 1 and lr["qpool_records_forgotten"] == 1, lr
    assert [f["uuid"] for f in api(port, "/api/failed")[1]["failed"]] == [gone]
    # the job the app retried is not run again by the batch retry: it stays pending
    done = wait_for(lambda: (lambda x: x if x and x["failed_ids"] == [gone] else None)(batch(port, bid)), 60,
                    interval=0.5, what="the other job done")
    assert done["pending"] == 1, done


def test_hostile_batch_names_and_unknown_batches(master, laravel_app, tmp_path):
    """Names with markup and invalid UTF-8 come out as valid UTF-8 JSON text,
    never markup; an unknown batch is a 404, a retry of it an error; a retry of
    a batch without failures says so."""
    port = free_port()
    markup, bad, esc = start(master, laravel_app, tmp_path, port,
                             ["--count=1", "--name=<img src=x onerror=alert(1)>"],
                             ["--count=1", "--name-hex=41ff42c3" + "e282ac" * 100], ["--count=1", "--name-hex=1b5b324a41"])
    # the agent starts with the first look: wait until its list holds both
    wait_for(lambda: {markup, bad, esc} <= {b["id"] for b in api(port, "/api/batches")[1]["batches"]}, 60,
             interval=0.5, what="both batches in /api/batches")
    status, _, raw = get(port, "/api/batches", timeout=30)
    assert status == 200
    lst = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)  # valid UTF-8, or it raises
    names = {b["id"]: b["name"] for b in lst["batches"]}
    assert names[markup] == "<img src=x onerror=alert(1)>" and names[esc] == "\x1b[2JA"
    assert names[bad].startswith("A") and names[bad].endswith("\u20ac") and len(names[bad].encode()) <= 200
    assert code(port, "/api/batches/no-such-batch") == 404
    status, rep = send(port, "POST", "/api/batches/no-such-batch/retry", token=TOKEN, body={})
    assert status == 400 and "no batch" in rep["error"]
    wait_for(lambda: batch(port, markup)["pending"] == 0, 60, what="the one job done")
    status, rep = send(port, "POST", "/api/batches/%s/retry" % markup, token=TOKEN, body={})
    assert status == 200
    wait_for(lambda: "last_retry" in api(port, "/api/batches")[1]["pools"][0], 30, what="the retry's outcome")
    lr = api(port, "/api/batches")[1]["pools"][0]["last_retry"]
    assert not lr["ok"] and "no failed jobs" in lr["error"], lr
    # the CLI's table prints a control code in a name as text (review of batches, item 10)
    out = master.cli("batches").stdout
    assert "\x1b" not in out and "\\x1b[2JA" in out, out
    res = master.cli("batches", "retry", "bad id!", check=False)
    assert res.returncode == 1 and "batch id" in res.stderr


def test_many_batches_with_many_failures_fit_one_reply(master, laravel_app, tmp_path):
    """20 batches with 100 failed job ids each (about 80 KB of JSON): the agent
    cuts its reply to fit the master's 64 KiB line (fewer failed ids shown,
    the counts whole), so the list is read and the agent is not dropped over
    and over (review of batches, item 2)."""
    port = free_port()
    start(master, laravel_app, tmp_path, port)
    # the first look answers at once, before the agent has read anything (it
    # held the HTTP process's API thread up to 3 s: review of batches, item 6)
    status, first = api(port, "/api/batches")
    assert status == 200 and first["pools"][0]["state"] == "loading", first
    con = sqlite3.connect(str(laravel_app.db))
    for b in range(20):
        ids = ["%08d-0000-4000-8000-%012d" % (b, j) for j in range(100)]
        con.execute("insert into job_batches (id, name, total_jobs, pending_jobs, failed_jobs, failed_job_ids,"
                    " options, created_at) values (?, ?, 100, 100, 100, ?, 'a:0:{}', ?)",
                    ("batch-%02d-%s" % (b, "f" * 40), "many failures %d" % b, json.dumps(ids), 1764380000 + b))
    con.commit()
    con.close()
    lst = wait_for(lambda: (lambda x: x if len(x["batches"]) == 20 else None)(api(port, "/api/batches")[1]), 60,
                   interval=0.5, what="the 20 batches listed")
    assert lst["pools"][0]["state"] == "ok", lst["pools"]
    assert all(b["failed"] == 100 and 0 < len(b["failed_ids"]) < 100 for b in lst["batches"]), lst["batches"][0]
    assert "longer than qpool takes" not in master.log()


def test_a_pool_without_an_agent_says_so(master, tmp_path):
    """No pool preloads a Laravel app: no batches, not an error."""
    port = free_port()
    master.write_config('{ name = "p"; queues = ["default"]; processes = 1; handler = { type = "pipe";'
                        ' command = ["%s", "-c", "import time; time.sleep(60)"]; }; }' % PYTHON,
                        qpool=http_conf(port, OPEN_READS))
    master.start()
    wait_for(lambda: code(port, "/healthz") == 200, 20, what="the HTTP endpoint")
    status, lst = api(port, "/api/batches")
    assert status == 200 and lst["batches"] == [] and lst["pools"] == [] and "no pool" in lst["note"]
    res = master.cli("batches")
    assert res.returncode == 0 and "no pool" in res.stdout
