"""Issue 31, "the batch's jobs" (brief batchdone): Laravel's batch repository
keeps only the failed job ids; qpool's job history records each job's batch
id (the PHP adapter reports it) and lists a batch's jobs, done and failed, in
GET /api/batches/<id> and `qpool batches ID`, and none of another batch. The
fixture Laravel app's real Bus::batch, real Redis and processes; no timing is
asserted."""
import json

import pytest

from conftest import free_port, wait_for
from laravel_roots import laravel_version, version_app  # noqa: F401 (fixtures)
from test_app_driver import pool as app_pool, use_database_queue
from test_batches import api, detail, row, start, two_batches_settled

JOB = "App\\Jobs\\BatchJob"


def with_jobs(port, bid, n):
    """The batch's detail once its jobs list holds n records."""
    d = detail(port, bid)
    return d if d and isinstance(d.get("jobs"), list) and len(d["jobs"]) >= n else None


def test_a_batch_lists_its_done_and_failed_jobs_in_the_api_and_the_cli(master, laravel_app, tmp_path):
    lists_its_jobs(master, laravel_app, tmp_path)


@pytest.mark.parametrize("laravel_version", ["13"], indirect=True)
def test_the_same_on_laravel_13(master, version_app, tmp_path):
    """Laravel 13 (Debian sid's, in its root): its Batchable jobs and CallQueuedHandler."""
    lists_its_jobs(master, version_app, tmp_path)


def lists_its_jobs(master, laravel_app, tmp_path):
    port = free_port()
    bid, other = two_batches_settled(master, laravel_app, tmp_path, port)
    d = wait_for(lambda: with_jobs(port, bid, 3), 60, what="the batch's 3 jobs in /api/batches/<id>")
    jobs = d["jobs"]
    assert len(jobs) == 3 and d["jobs_kept"] == 3, d
    assert sorted(j["outcome"] for j in jobs) == ["done", "done", "failed"], jobs
    assert {j["name"] for j in jobs} == {JOB} and len({j["uuid"] for j in jobs}) == 3, jobs
    assert all(j["runtime_ms"] >= 0 and j["finished_at"] > 0 and j["pool"] == "app" for j in jobs), jobs
    assert [j["finished_at"] for j in jobs] == sorted((j["finished_at"] for j in jobs), reverse=True), jobs
    failed = [j["uuid"] for j in jobs if j["outcome"] == "failed"]
    assert failed == d["batch"]["failed_ids"], d
    # the other batch has its own 2, none of these
    o = wait_for(lambda: with_jobs(port, other, 2), 60, what="the other batch's 2 jobs")
    assert [j["outcome"] for j in o["jobs"]] == ["done", "done"], o
    assert not {j["uuid"] for j in o["jobs"]} & {j["uuid"] for j in jobs}
    # the recent list's records carry the batch id too
    status, recent = api(port, "/api/jobs/recent?limit=20")
    assert status == 200 and {r["uuid"] for r in recent["jobs"] if r.get("batch") == bid} == {j["uuid"] for j in jobs}
    # the CLI: text and --json
    out = master.cli("batches", bid).stdout
    assert bid in out and "jobs (3 of the 3" in out, out
    for j in jobs:
        line = next(x for x in out.splitlines() if x.startswith(j["uuid"]))
        assert JOB in line and j["outcome"] in line, out
    rep = json.loads(master.cli("batches", bid, "--json").stdout)
    assert rep["batch"]["id"] == bid and {j["uuid"] for j in rep["jobs"]} == {j["uuid"] for j in jobs}, rep
    # a batch not in the list: exit 1, said
    res = master.cli("batches", "0000-not-a-batch", check=False)
    assert res.returncode == 1 and "no batch 0000-not-a-batch" in res.stderr, res
    res = master.cli("batches", "0000-not-a-batch", "--json", check=False)
    assert res.returncode == 1 and json.loads(res.stdout)["ok"] is False, res


def test_a_batch_job_that_times_out_is_listed(master, laravel_app, tmp_path):
    """Review of batchdone, MUST 2: a job killed for its timeout sends no
    answer, so its batch id comes from its payload's serialized command
    (Laravel's own); it is listed as timed_out, as Laravel lists it failed."""
    write = master.write_config
    master.write_config = lambda pools, **kw: write(pools.replace("tries = 1;", "tries = 1; timeout = 3;"), **kw)
    times_out_listed(master, laravel_app, tmp_path)


@pytest.mark.parametrize("laravel_version", ["8"], indirect=True)
def test_an_app_driver_batch_job_that_times_out_is_listed(master, version_app, tmp_path):
    """The same on the `database` queue through the app's driver: the worker
    has no raw payload there, so the handler says the batch in its `popped`
    answer, before the job runs (before, such a job was listed nowhere)."""
    use_database_queue(version_app)  # the app's own copy
    version_app.env["QUEUE_CONNECTION"] = "database"
    write = master.write_config
    master.write_config = lambda pools, **kw: write(app_pool(version_app, "timeout = 3;"), **kw)
    times_out_listed(master, version_app, tmp_path)


def times_out_listed(master, laravel_app, tmp_path):
    port = free_port()
    bid, = start(master, laravel_app, tmp_path, port, ["--count=2", "--sleep=120", "--allow-failures"])
    wait_for(lambda: row(laravel_app, bid)[:2] == (1, 1), 120, what="1 job done and 1 failed (timed out)")
    d = wait_for(lambda: with_jobs(port, bid, 2), 60, what="the batch's 2 jobs in /api/batches/<id>")
    assert sorted(j["outcome"] for j in d["jobs"]) == ["done", "timed_out"], d
    timed_out = [j["uuid"] for j in d["jobs"] if j["outcome"] == "timed_out"]
    assert timed_out == d["batch"]["failed_ids"], d
