"""The notify token a waiting worker's BLPOP took, when every ready job it
finds waits on a full limit, goes back to the queue it came from (review
of issue 33's limits: it went to the first queue whose jobs were held, so
that queue's :notify gained a token and the other lost one; a worker of
another pool that listens on the other queue alone then slept through its
job). Invariants only: the tokens are counted in the same Redis state the
pop script wrote atomically with its :wait record."""
import json

from conftest import PREFIX, make_payload, push_many, wait_for
from limit_records import handler
from test_limits import records

A = "App\\Jobs\\A"
LIMIT_A = 'limits = (\n  { class = "App\\\\Jobs\\\\A"; concurrency = 1; }\n);\n'


def test_token_goes_back_to_its_own_queue(master_factory, redis_server, tmp_path):
    """One worker on queues ["t1", "t2"] waits in BLPOP; the only slot of A
    is taken (by a lease the test holds). An A job lands on t1 without a
    token (its token was taken by another pop), then an A job on t2 with
    one: the worker's BLPOP takes t2's token, finds both jobs held, and the
    token goes back to t2:notify, not to t1's."""
    path, log = handler(tmp_path)
    rc = redis_server.client()
    m = master_factory(redis_server, "a")
    m.write_config('{ name = "work"; queues = ["t1", "t2"]; processes = 1; retry_after = 300;'
                   ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }' % path)
    m.conf.write_text(m.conf.read_text() + LIMIT_A)
    m.start()
    wait_for(lambda: m.pool("work")["idle"] == 1, 60, what="the worker to wait for jobs")
    run, wait = PREFIX + "qpool:limit:|App\\Jobs\\A:run", PREFIX + "qpool:limit:|App\\Jobs\\A:wait"
    (sec, _) = rc.time()
    rc.zadd(run, {"the-test's-lease": (sec + 3600) * 1000})  # A's only slot, taken for an hour
    n1, n2 = PREFIX + "queues:t1:notify", PREFIX + "queues:t2:notify"
    rc.rpush(PREFIX + "queues:t1", json.dumps(make_payload(job=A, data={}), separators=(",", ":")))
    push_many(rc, "t2", [make_payload(job=A, data={})])
    # the pop that found both held wrote :wait and gave the token back in one script
    wait_for(lambda: rc.hget(wait, "n") is not None, 30, what="a pop to find the A jobs held")
    assert (rc.llen(n1), rc.llen(n2)) == (0, 1), "t1:notify %d, t2:notify %d tokens" % (rc.llen(n1), rc.llen(n2))
    assert rc.llen(PREFIX + "queues:t1") == 1 and rc.llen(PREFIX + "queues:t2") == 1
    assert not records(log)
