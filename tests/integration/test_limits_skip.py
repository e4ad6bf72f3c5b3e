"""The limited pop looks past more held jobs than its look-ahead (issue 33:
"other classes in the same queue keep running"): the held-prefix record
(docs/operations.md, "Fleet-wide limits"). Invariants only, no timing."""
from conftest import PREFIX, make_payload, push_many, wait_for
from test_limits import handler, ready_attempts, records, start

LIMIT_LONG = 'limits = (\n  { class = "App\\\\Jobs\\\\Long"; concurrency = 1; }\n);\n'


def started(log, cls):
    return [r for r in records(log).values() if r["S"] and r["S"][0][0] == cls]


def test_b_not_hidden_behind_many_held_a(master_factory, redis_server, tmp_path):
    """200 jobs of class Long (concurrency 1, each runs for minutes), then 20
    of class Quick behind them in the same queue: every Quick job runs while
    199 Long jobs still wait, their attempts at 0; 20 more Quick pushed
    later (the record of the held jobs is there by then) run too. Before
    the record, the 50-job look-ahead never reached them."""
    path, log = handler(tmp_path)
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
