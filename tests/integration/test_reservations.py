"""One reservation, one job: give-backs that are safe to retry, byte-identical
payloads in flight on two workers, renewals that find their reservation gone.
Regression tests for review-2026-11 findings #3, #4 and #9.

The give-back test runs qpool's own Lua scripts (read from src/queue.c) with
the key and argument layout src/queue.c uses, as the review did: a reply lost
between the script and the worker cannot be staged through the binary."""
import json
import os
import re
import signal
import time
import uuid as uuidlib

import pytest

from conftest import (FIXTURE_HANDLER, PREFIX, ROOT, children_of, make_payload, push_many, queue_state, read_fixture_log,
                      wait_for)
from test_prefetch import proc_state
from test_worker import empty, jobs_in_log, native_pool


def lua(name):
    """A script's text from src/queue.c (its C string literal, unescaped)."""
    src = (ROOT / "src" / "redis" / "queue.c").read_text()
    m = re.search(r"static const char %s\[\] =\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+);" % name, src)
    assert m, name
    parts = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1))
    return "".join(parts).encode().decode("unicode_escape")


def keys(q):
    base = PREFIX + "queues:" + q
    return {"ready": base, "delayed": base + ":delayed", "reserved": base + ":reserved", "notify": base + ":notify",
            "failed": PREFIX + "qpool:failed:" + q}


def pop(r, q, want=1, hold=False, migrate=False, until=90):
    """One pop call as queue_append_pop makes it (one queue; migration when
    asked; reservations until `until` seconds from now)."""
    k = keys(q)
    now = int(time.time())
    args = [now, now + until, "1" if migrate else "0", 100, str(uuidlib.uuid4()), "redis", 10000, PREFIX + "qpool:failed:job:", "1", q,
            want, "1" if hold else "0"]
    return r.eval(lua("POP_LUA"), 6, k["ready"], k["delayed"], k["reserved"], k["notify"], k["failed"],
                  PREFIX + "qpool:failed:queues", *args)


def claim(r, q, held, run):
    """A claim as queue_append_claim makes it."""
    return r.eval(lua("CLAIM_LUA"), 1, keys(q)["reserved"], held, run)


def unpop(r, q, reserved, raw, token):
    """A give-back as queue_append_unpop makes it."""
    k = keys(q)
    return r.eval(lua("UNPOP_LUA"), 4, k["ready"], k["reserved"], k["notify"],
                  PREFIX + "qpool:unpop:" + q + ":" + token, reserved, raw, 86400)


def test_a_give_back_resent_after_a_lost_reply_changes_nothing(r):
    # review #3: worker A gives a prefetched job back; the reply is lost;
    # worker B pops the job (its reservation has the same bytes); A resends
    # the give-back. It must not remove B's reservation or queue a copy.
    q = "gb"
    raw = json.dumps(make_payload("ok"), separators=(",", ":"))
    r.rpush(keys(q)["ready"], raw)
    r.rpush(keys(q)["notify"], 1)
    kind, _, a_raw, a_reserved = pop(r, q)[:4]
    assert kind == 1 and a_raw.decode() == raw
    token = str(uuidlib.uuid4())
    assert unpop(r, q, a_reserved, a_raw, token) == 1
    assert r.llen(keys(q)["ready"]) == 1 and r.zcard(keys(q)["reserved"]) == 0
    b_reserved = pop(r, q)[3]
    assert b_reserved == a_reserved, "same payload, same reserved bytes: the case the token is for"
    assert unpop(r, q, a_reserved, a_raw, token) == 0, "the resent give-back must do nothing"
    assert r.llen(keys(q)["ready"]) == 0, "a second copy was queued"
    assert r.zrange(keys(q)["reserved"], 0, -1) == [b_reserved], "worker B's reservation was removed"


def test_twin_payloads_in_one_call_and_across_calls_get_their_own_reservations(r):
    # review #4 at the script level: byte-identical payloads are reserved as
    # distinct members, in one batch and across pops
    q = "twins"
    raw = json.dumps({"job": "x", "data": {}, "attempts": 0, "uuid": "u-1", "id": "i-1"}, separators=(",", ":"))
    r.rpush(keys(q)["ready"], raw, raw, raw)
    r.rpush(keys(q)["notify"], 1, 1, 1)
    first = pop(r, q, want=2)
    second = pop(r, q)
    members = [first[3], first[6][2], second[3]]
    assert len(set(members)) == 3, members
    assert r.zcard(keys(q)["reserved"]) == 3
    # each is still the job: attempts counted, but for the one popped ahead,
    # held as it was until its worker starts it (its run copy, first[6][3],
    # counts the attempt and is distinct too)
    assert [json.loads(m)["attempts"] for m in members] == [1, 0, 1]
    assert all(json.loads(m)["uuid"] == "u-1" for m in members)
    run = first[6][3]
    assert json.loads(run)["attempts"] == 1 and run not in members


def test_a_twin_popped_while_one_is_held_keeps_its_own_reservation(r):
    # review of issue 21's change: a job popped ahead is held until its
    # worker claims it; a byte-identical twin popped meanwhile (by the same
    # worker's next pop, or another's) must not get the member the claim
    # then writes, else one ack would remove both reservations
    q = "heldtwins"
    raw = json.dumps({"job": "x", "data": {}, "attempts": 0, "uuid": "u-2", "id": "i-2"}, separators=(",", ":"))
    other = json.dumps(make_payload("ok"), separators=(",", ":"))
    r.rpush(keys(q)["ready"], other, raw, raw)
    r.rpush(keys(q)["notify"], 1, 1, 1)
    first = pop(r, q, want=2)
    _, _, held, run = first[6]
    assert json.loads(held)["attempts"] == 0 and json.loads(run)["attempts"] == 1
    twin = pop(r, q)[3]
    assert claim(r, q, held, run) == 1
    members = r.zrange(keys(q)["reserved"], 0, -1)
    assert len(members) == 3 and run in members and twin in members and run != twin
    assert claim(r, q, held, run) == 2, "a claim resent finds it done"
    assert r.zcard(keys(q)["reserved"]) == 3


def test_a_pop_sent_ahead_holds_its_first_job_too(r):
    q = "holdall"
    jobs = [json.dumps(make_payload("ok"), separators=(",", ":")) for _ in range(2)]
    r.rpush(keys(q)["ready"], *jobs)
    r.rpush(keys(q)["notify"], 1, 1)
    reply = pop(r, q, want=2, hold=True)
    assert json.loads(reply[3])["attempts"] == 0, "the first job is held"
    assert json.loads(reply[7])["attempts"] == 1, "its reserved copy, for the claim"
    assert [json.loads(m)["attempts"] for m in r.zrange(keys(q)["reserved"], 0, -1)] == [0, 0]


def twin_pool(name, log, presleep, actions, backoff=1):
    env = ('environment = { FIXTURE_LOG = "%s"; FIXTURE_PRESLEEP_MS = "%d"; FIXTURE_ACTIONS = "%s"; };'
           % (log, presleep, actions))
    return ('{ name = "%s"; queues = ["twins"]; processes = 1; tries = 0; backoff = %d; '
            'handler = { type = "pipe"; command = ["%s"]; }; %s }' % (name, backoff, FIXTURE_HANDLER, env))


def test_byte_identical_payloads_on_two_workers_are_two_jobs(master, r, tmp_path):
    # review #4: pool a acks its copy after 0.2 s; pool b's copy throws after
    # 0.7 s and is released. Before, both shared one :reserved member: the ack
    # removed it, the release then found nothing to move, and b's job was
    # lost (neither retried nor failed).
    log = tmp_path / "fixture.log"
    master.write_config(twin_pool("a", log, 200, "FixtureJob=ok") + ", " +
                        twin_pool("b", log, 700, "FixtureJob=failuntil:2"))
    master.start()
    master.wait_children("a", 1)
    master.wait_children("b", 1)
    time.sleep(0.5)  # both idle, waiting on :notify
    p = make_payload("ok")
    del p["data"]["action"]  # the pool's FIXTURE_ACTIONS decides
    raw = json.dumps(p, separators=(",", ":"))
    k = keys("twins")
    r.rpush(k["ready"], raw, raw)
    r.rpush(k["notify"], 1, 1)
    wait_for(lambda: len(jobs_in_log(log)) >= 3 and empty(r, "twins"), 30, what="the released twin to run again")
    attempts = sorted(l[3] for l in jobs_in_log(log))
    assert attempts == ["1", "1", "2"], attempts
    assert queue_state(r, "twins") == {"ready": 0, "delayed": 0, "reserved": 0, "notify": 0}


def test_byte_identical_twins_released_for_the_same_second_are_two_jobs(master, r, tmp_path):
    # review of the release that drops the qpoolTwin marker: both copies of
    # one payload throw and are released with the same delay, so their
    # stamped copies are the same bytes but for the marker the second pop
    # gave its twin. Without it, the second release overwrote the first in
    # :delayed and one job was lost (neither retried nor failed).
    log = tmp_path / "fixture.log"
    master.write_config(twin_pool("a", log, 100, "FixtureJob=failuntil:2", backoff=3) + ", " +
                        twin_pool("b", log, 100, "FixtureJob=failuntil:2", backoff=3))
    master.start()
    master.wait_children("a", 1)
    master.wait_children("b", 1)
    time.sleep(0.5)  # both idle, waiting on :notify
    p = make_payload("ok")
    del p["data"]["action"]  # the pool's FIXTURE_ACTIONS decides
    raw = json.dumps(p, separators=(",", ":"))
    k = keys("twins")
    r.rpush(k["ready"], raw, raw)
    r.rpush(k["notify"], 1, 1)
    wait_for(lambda: master.log().count("Released ") == 2, 10, what="both twins to be released")
    # the release rides with the worker's next round trip, after its log line
    # (a CI run under ASan read :delayed in between): wait for both, within
    # the 3 s they stay there; without the fix one overwrote the other
    wait_for(lambda: r.zcard(k["delayed"]) == 2, 10, interval=0.02, what="both twins in :delayed")
    wait_for(lambda: len(jobs_in_log(log)) >= 4 and empty(r, "twins"), 30, what="both twins to run again")
    attempts = sorted(l[3] for l in jobs_in_log(log))
    assert attempts == ["1", "1", "2", "2"], attempts


def cut_off_user(redis_server):
    """A client of its own (user tester), for cutting the default user off."""
    admin = redis_server.client()
    admin.execute_command("ACL", "SETUSER", "tester", "on", ">pw", "~*", "&*", "+@all")
    t = redis_server.client()
    t.execute_command("AUTH", "tester", "pw")
    return t


def through_an_outage(master, redis_server, log, extra, jobs, freeze_s):
    """A native pool of one worker pops jobs; the first freezes the worker,
    which the test cuts off from Redis (no user it can log in as, its
    connection killed) and lets go on freeze_s later. Past retry_after,
    another consumer takes every expired reservation (Laravel's migrate,
    then its pop); then the worker may log in again, and this waits until it
    is back and idle. Returns the client, the ids taken and the ids that had
    run by then."""
    t = cut_off_user(redis_server)
    master.write_config(native_pool(log=log, extra=extra))
    master.start()
    master.wait_children("w", 1)
    worker = children_of(master.proc.pid)[0]
    push_many(t, "default", jobs)
    wait_for(lambda: proc_state(worker) == "T", 10, interval=0.001, what="the first job to freeze its worker")
    t.execute_command("ACL", "SETUSER", "default", "off")
    t.execute_command("CLIENT", "KILL", "USER", "default")
    time.sleep(freeze_s)
    os.kill(worker, signal.SIGCONT)
    k = keys("default")
    try:
        time.sleep(3.5)  # past retry_after (whole-second scores)
        ran = {l[1] for l in jobs_in_log(log)}
        expired = t.zrangebyscore(k["reserved"], "-inf", int(time.time()))
        if expired:
            t.zrem(k["reserved"], *expired)
    finally:
        t.execute_command("ACL", "SETUSER", "default", "on")
    wait_for(lambda: any(c.get("cmd") in ("blpop", "brpop") for c in t.client_list()), 15,
             what="the worker to reach Redis again and wait for jobs")
    return t, [json.loads(x)["id"] for x in expired], ran


def test_a_held_job_whose_reservation_went_during_an_outage_is_dropped(master, r, redis_server, tmp_path):
    # review #9, the renewal's side: the worker holds a job popped ahead while
    # Redis refuses it for longer than retry_after (the first job threw, and
    # its release waits out the outage); meanwhile another consumer takes the
    # expired reservation. Back, the worker renews what it holds, finds that
    # reservation gone and drops its copy. The test cuts the worker off in a
    # few ms: a job held behind a job that short stays held.
    log = tmp_path / "fixture.log"
    first, held = make_payload("stopparentfail:0"), make_payload("ok")
    _, taken, _ = through_an_outage(master, redis_server, log,
                                    "prefetch = 16; retry_after = 2; tries = 0; backoff = 30;", [first, held], 0)
    assert held["id"] in taken, "the job popped ahead was held"
    time.sleep(0.5)
    assert [l[1] for l in jobs_in_log(log)] == [first["id"]], "the held job did not run"
    # the renewal dropped it; had the first job run 100 ms or more (the test
    # slow to cut the worker off; 80 leaves a margin), the held one would have
    # been given back instead (UNPOP, a no-op once it was taken)
    ran_ms = float(re.search(r"Released .* attempt 1 ([\d.]+) ms", master.log()).group(1))
    if ran_ms < 80:
        assert "lost its reservation" in master.log(), master.log()[-2000:]


def test_a_prefetched_job_whose_reservation_is_gone_is_not_run_again(master, r, redis_server, tmp_path):
    # review #9: the worker holds prefetched jobs when Redis becomes
    # unreachable to it for longer than retry_after; meanwhile another
    # consumer migrates the expired reservations back and takes the jobs.
    # When the worker is back it must not run them a second time. The first
    # job freezes the worker (so that it holds the other fifteen, none
    # started) for 150 ms, long enough that the held jobs go back when it
    # ends (a job of 100 ms or more); the give-back then waits out the outage
    # and finds their reservations gone.
    log = tmp_path / "fixture.log"
    jobs = [make_payload("stopparent:0")] + [make_payload("ok") for _ in range(15)]
    t, taken, ran_before = through_an_outage(master, redis_server, log,
                                             "prefetch = 16; retry_after = 2; tries = 0;", jobs, 0.15)
    k = keys("default")
    held = [i for i in taken if i not in ran_before]
    assert held, "the worker held jobs popped ahead when it was cut off"
    time.sleep(1.0)
    reran = [l[1] for l in jobs_in_log(log) if l[1] in held]
    assert reran == [], "jobs whose reservation was taken back ran again: %s" % reran
    assert t.llen(k["ready"]) == 0, "none was given back a second time"
    # a server that takes the connection and refuses the first command is an
    # outage with backoff, not a reconnect loop (it logged hundreds of lines)
    assert master.log().count("unavailable") + master.log().count("right after connecting") < 30


def test_a_held_copy_back_in_the_queue_reaches_no_one_with_its_twin_marker(r):
    """Review 2026-11-27 minor 1: a job popped ahead is held under a
    qpoolTwin marker; when its worker died (SIGKILL, OOM) before starting it,
    the held copy expired and went back to the queue with the marker, and the
    next pop handed the marked bytes to the handler, the failed store and a
    give-back. qpool's migrate now drops the marker; a copy Laravel's migrate
    moved back byte for byte loses it at qpool's pop."""
    q = "heldback"
    jobs = [json.dumps(make_payload("ok"), separators=(",", ":")) for _ in range(4)]
    r.rpush(keys(q)["ready"], *jobs)
    r.rpush(keys(q)["notify"], 1, 1, 1, 1)
    pop(r, q, want=4, hold=True, until=-1)  # the worker is then killed: its held copies expire at once
    held = r.zrange(keys(q)["reserved"], 0, -1)
    assert len(held) == 4 and all("qpoolTwin" in json.loads(m) for m in held)
    # Laravel's migrateExpiredJobs: byte for byte from :reserved to the queue
    r.zrem(keys(q)["reserved"], held[0])
    r.rpush(keys(q)["ready"], held[0])
    r.rpush(keys(q)["notify"], 1)
    reply = pop(r, q, migrate=True)  # qpool's migrate takes the three others back
    ready = r.lrange(keys(q)["ready"], 0, -1)
    assert len(ready) == 3 and r.zcard(keys(q)["reserved"]) == 1
    for m in ready:
        assert "qpoolTwin" not in json.loads(m), "migrated back with the marker: %s" % m
        assert json.loads(m)["attempts"] == 0, "a held copy counts no attempt"
    got = json.loads(reply[2])
    assert got["id"] == json.loads(held[0])["id"]
    assert "qpoolTwin" not in got, "the handler's payload (and the failed store's) has the marker: %s" % reply[2]
    assert "qpoolTwin" not in json.loads(reply[3])
    assert unpop(r, q, reply[3], reply[2], str(uuidlib.uuid4())) == 1
    assert "qpoolTwin" not in json.loads(r.lindex(keys(q)["ready"], 0)), "given back with the marker"
