"""A watched tag keeps every job of its tag, not a sample (issue 31): the
recent-jobs list may be a sample (job_history_size a pass), a watched
tag's list is not (bounded by monitored_tag_jobs and its retention)."""
import random

from conftest import FIXTURE_HANDLER, PREFIX, make_payload, push_many, wait_for

TAG_KEY = PREFIX + "qpool:{qpool-jobs}:tag:"


def test_every_job_of_a_watched_tag_reaches_its_list(master, r, tmp_path):
    log = tmp_path / "fixture.log"
    master.write_config('{ name = "w"; queues = ["default"]; processes = 2; tries = 1; timeout = 10;'
                        ' handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; }'
                        % (FIXTURE_HANDLER, log),
                        qpool="  job_history_size = 100;")
    master.start()
    assert "watching" in master.cli("monitor", "add", "vip").stdout

    jobs = [make_payload("ok", tags=["plain"]) for _ in range(4000)]
    vip = [make_payload("ok", tags=["vip", "vip-%d" % i]) for i in range(1000)]
    everything = jobs + vip
    random.Random(31).shuffle(everything)
    push_many(r, "default", everything)                  # all at once: the workers run them flat out

    wait_for(lambda: r.llen(PREFIX + "queues:default") == 0, 120, interval=0.5, what="the queue drained")
    want = {p["uuid"] for p in vip}

    def kept():
        return {rec.split(b'"uuid":"', 1)[1].split(b'"', 1)[0].decode()
                for rec in r.lrange(TAG_KEY + "vip", 0, -1)}
    seen = []

    def all_kept():
        seen.append(len(kept() & want))
        return seen[-1] == len(want)
    # every one of them, however many a pass or a flush carries
    try:
        wait_for(all_kept, 60, interval=0.5, what="every vip job in the watched list")
    except AssertionError:
        raise AssertionError("%d of the %d vip jobs in the watched list" % (seen[-1], len(want)))
    assert r.llen(TAG_KEY + "vip") == 1000
    # the recent list stays bounded by job_history_size
    assert r.llen(PREFIX + "qpool:{qpool-jobs}:list") <= 100
    # an unwatched tag has no list
    assert not r.exists(TAG_KEY + "plain")
