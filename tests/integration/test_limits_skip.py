"""The limited pop looks past more held jobs than its look-ahead (issue 33:
"other classes in the same queue keep running"): the held-prefix record
(docs/operations.md, "Fleet-wide limits"). Invariants only, no timing."""
from conftest import PREFIX, make_payload, push_many, wait_for
from limit_records import handler
from test_limits import ready_attempts, records, start

# Long runs for longer than any wait here (its one job must not end and let
# the next start: the tests count the Long jobs started); Mid for 3 s
CASES = """  *"Long "*) sleep 600 ;;
  *"Mid "*) sleep 3 ;;
  *"Quick "*) ;;
  *) sleep 0.3 ;;"""

LIMIT_LONG = 'limits = (\n  { class = "App\\\\Jobs\\\\Long"; concurrency = 1; }\n);\n'


def started(log, cls):
    return [r for r in records(log).values() if r["S"] and r["S"][0][0] == cls]


def test_b_not_hidden_behind_many_held_a(master_factory, redis_server, tmp_path):
    """200 jobs of class Long (concurrency 1, each runs for minutes), then 20
    of class Quick behind them in the same queue: every Quick job runs while
    199 Long jobs still wait, their attempts at 0; 20 more Quick pushed
    later (the record of the held jobs is there by then) run too. Before
    the record, the 50-job look-ahead never reached them."""
    path, log = handler(tmp_path, CASES)
    rc = redis_server.client()
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Long") for _ in range(200)])
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Quick") for _ in range(20)])
    start(master_factory, redis_server, "a", path, LIMIT_LONG, processes=3)
    wait_for(lambda: len([r for r in started(log, "App\\Jobs\\Quick") if r["E"]]) == 20, 90, interval=0.1,
             what="the 20 Quick jobs behind 200 held Long jobs to run")
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Quick") for _ in range(20)])
    wait_for(lambda: len([r for r in started(log, "App\\Jobs\\Quick") if r["E"]]) == 40, 90, interval=0.1,
             what="20 more Quick jobs to run")
    assert len(started(log, "App\\Jobs\\Long")) == 1
    att = ready_attempts(rc)
    assert len(att) == 199 and all(a == 0 for a in att), att
    for r in started(log, "App\\Jobs\\Quick"):
        assert len(r["S"]) == 1 and r["S"][0][1] == 1, r
    # the record names the Long limit and a prefix of the held jobs
    rec = rc.hgetall(PREFIX + "qpool:held:work")
    assert rec and int(rec[b"n"]) <= 199 and any(k.startswith(b"L:") for k in rec), rec


def test_a_limit_that_got_room_is_not_kept_in_the_record(master_factory, redis_server, tmp_path):
    """60 Long (concurrency 1) then Mid1, Mid2 (Mid: concurrency 1, 3 s
    each) then 5 Quick: once Mid1 ends, Mid2 runs while the Long jobs still
    wait. The record once written back an old prefix naming Mid (with room
    again) on every pop, past the 50 a rescan could see: it never lapsed,
    and Mid2 never ran (review of 2026-11-29)."""
    path, log = handler(tmp_path, CASES)
    rc = redis_server.client()
    limits = ('limits = (\n  { class = "App\\\\Jobs\\\\Long"; concurrency = 1; },\n'
              '  { class = "App\\\\Jobs\\\\Mid"; concurrency = 1; }\n);\n')
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Long") for _ in range(60)])
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Mid") for _ in range(2)])
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Quick") for _ in range(5)])
    start(master_factory, redis_server, "a", path, limits, processes=3)
    wait_for(lambda: len(started(log, "App\\Jobs\\Mid")) == 2, 90, interval=0.1,
             what="the second Mid job to run once the first ended")
    mids = sorted(r["S"][0][3] for r in started(log, "App\\Jobs\\Mid"))
    ends = sorted(r["E"][0][3] for r in started(log, "App\\Jobs\\Mid") if r["E"])
    assert ends and ends[0] <= mids[1]  # never two at once
    assert len(started(log, "App\\Jobs\\Long")) == 1
    wait_for(lambda: len(started(log, "App\\Jobs\\Quick")) == 5, 60, what="the Quick jobs")
