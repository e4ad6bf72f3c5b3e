"""Per-key limits (tag_prefix) and the C that reads a job's keys for them
(src/redis/qlimit_tags.c: on a Redis Cluster C decides a job's limits
before it leases them, so it must read the same keys as the limited pop's
Lua, QLIMIT_TAGS_LUA).

The same payloads, normal and hostile, go to the Lua (EVAL on a real
redis-server, as test_limits_tags.py does) and to the C (the limit-tags
binary of the build): the tags and keys must be identical, byte for byte.

Then a per-key limit on a 3-node Redis Cluster, where the pop leases each
of a job's keys (and the limit's own :run) in the limit's slot, then pops
the job in its queue's slot. Jobs run test_limits_tags.py's gated handler:
what runs at once is decided by the test, never by timing."""
import json
import random
import subprocess

import pytest

from cluster_util import cluster  # noqa: F401 (a fixture)
from conftest import BUILD, PREFIX, make_payload, push_many, wait_for
from test_limits import max_overlap, records
from test_limits_cluster import queue_away_from, ready, start
from test_limits_tags import BASE, CUSTOMER, INVOICE, LIMIT, PROBE, command_with, handler, invoice, started, tags_lua

LIMIT_TAGS = BUILD / "limit-tags"
MARK = 'O:45:"Illuminate\\Contracts\\Database\\ModelIdentifier":4:{'


def by_lua(rc, raw, tp):
    tags, keys = rc.eval(PROBE % tags_lua(), 0, raw, tp)
    return [bytes(t) for t in tags], [bytes(k)[len(b"K:k:"):] for k in keys if k != b"K"]


def by_c(raws, tps):
    """[(tags, [keys of each prefix]) for each payload], one limit-tags run."""
    data = b"".join(b"%d\n%s" % (len(r), r) for r in raws)
    out = subprocess.run([str(LIMIT_TAGS)] + list(tps), input=data, capture_output=True, timeout=60,
                         check=True).stdout
    res, tags, keys = [], [], [[] for _ in tps]
    for line in out.decode().splitlines():
        f = line.split(" ")
        if f[0] == ".":
            res.append((tags, keys))
            tags, keys = [], [[] for _ in tps]
        elif f[0] == "T":
            tags.append(bytes.fromhex(f[1]))
        else:
            keys[int(f[1])].append(bytes.fromhex(f[2]) if len(f) > 2 else b"")
    return res


def php_str(b):
    return b's:%d:"%s";' % (len(b), b)


def model(cls, ident):
    return MARK.encode() + php_str(b"class") + php_str(cls) + php_str(b"id") + ident + b"}"


def hostile_commands():
    """PHP-serialized commands: well formed, cut short, lying about lengths,
    NUL bytes (protected properties), odd ids, collections, too many models."""
    cust = b"App\\Models\\Customer"
    yield b'O:1:"J":1:{' + php_str(b"\0*\0c") + model(cust, b"i:12;") + b"}"
    yield model(cust, b"i:-5;") + model(cust, b's:3:"a b";') + model(cust, b"i:007;")
    yield model(cust, b'a:3:{i:0;i:3;i:1;s:1:"4";i:2;s:2:"\x00\xff";}')
    yield model(cust, b'a:99999999999999999999:{i:0;i:1;}') + model(cust, b"i:2;")
    yield model(cust, b'a:60:{' + b"".join(b"i:%d;i:%d;" % (i, i) for i in range(60)) + b"}")
    yield b"".join(model(cust, b"i:%d;" % i) for i in range(12))
    yield model(cust, b's:99:"short";') + model(cust, b"i:;") + model(cust, b"i:1")
    yield MARK.encode() + b's:5:"class";s:4096:"' + b"x" * 4096 + b'";s:2:"id";i:1;}'
    yield MARK.encode() + b's:5:"class";s:4097:"' + b"x" * 4097 + b'";s:2:"id";i:1;}'
    yield MARK.encode()[:-3] + b"9:{" + model(cust, b"i:8;")
    yield model(b"App\\Models\\Customer\x00", b"i:1;") + model(cust, b's:70:"' + b"9" * 70 + b'";')
    yield b"O:45:" + MARK.encode() * 3


def payloads():
    """Raw payloads (bytes): the JSON as a queue would hold it."""
    dump = lambda p: json.dumps(p).encode()
    yield dump(make_payload(tags=[CUSTOMER + "7", "other", CUSTOMER + "7", CUSTOMER + "8"]))
    yield dump(make_payload(tags=[CUSTOMER + str(i) for i in range(60)]))
    yield dump(make_payload(tags=[CUSTOMER + "x" * 64, CUSTOMER + "y" * 65, CUSTOMER + "a:b", CUSTOMER]))
    yield dump(make_payload(tags=[CUSTOMER + "\u00e9", CUSTOMER + "\u0000", CUSTOMER + "\U0001f600", 5, None]))
    yield dump(make_payload(tags=[1] * 50 + [CUSTOMER + "late"]))
    yield dump(make_payload(tags=[], data={"command": command_with({"c": ("App\\Models\\Customer", 3)})}))
    yield dump(make_payload(tags={"a": CUSTOMER + "1"}, data={"command": command_with({"c": ("App\\Models\\Customer", "q")})}))
    yield dump(make_payload(data=[1, 2]))
    yield dump(make_payload(data={"command": 5}))
    # repeated names: the last counts (Lua's cjson)
    yield (b'{"tags":["' + CUSTOMER.replace("\\", "\\\\").encode() + b'1"],"attempts":0,"t\\u0061gs":["'
           + CUSTOMER.replace("\\", "\\\\").encode() + b'2"]}')
    yield (b'{"data":{"command":"x"},"data":'
           + json.dumps({"command": model(b"App\\Models\\Customer", b"i:4;").decode()}).encode() + b'}')
    # deep nesting and a long member before the tags; escaped member names
    deep = "[" * 900 + "]" * 900
    yield (b'{"x":' + deep.encode() + b',"pad":"' + b"\\u0041" * 20000 + b'","tags":["'
           + CUSTOMER.replace("\\", "\\\\").encode() + b'9"],"attempts":0}')
    yield (b'{"d\\u0061ta":{"comm\\u0061nd":'
           + json.dumps(model(b"App\\Models\\Customer", b"i:6;").decode()).encode() + b'},"attempts":0}')
    # raw bytes that are not UTF-8 inside a string
    yield b'{"tags":["App\\\\Models\\\\Customer:\xff\xfe"],"attempts":0}'
    for cmd in hostile_commands():
        yield dump(make_payload(data={"command": cmd.decode("latin-1")}))
    rnd = random.Random(33)
    alphabet = ["a", "Z", "9", "_", ".", "@", "-", ":", " ", "\\", "\u0000", "\u00ff", "\"", "{"]
    for _ in range(40):
        tags = []
        for _ in range(rnd.randint(0, 8)):
            body = "".join(rnd.choice(alphabet) for _ in range(rnd.choice([0, 1, 5, 63, 64, 65, 80])))
            tags.append(rnd.choice([CUSTOMER, "App\\Models\\User:", CUSTOMER[:-1], ""]) + body)
        yield dump(make_payload(tags=tags))


@pytest.mark.skipif(not LIMIT_TAGS.exists(), reason="no limit-tags in the build")
def test_c_reads_the_keys_the_lua_reads(redis_server):
    rc = redis_server.client()
    raws, tps, n = list(payloads()), (CUSTOMER, "App\\Models\\", "A"), 0
    for raw, (tags, keys) in zip(raws, by_c(raws, tps), strict=True):
        for i, tp in enumerate(tps):
            assert (tags, keys[i]) == by_lua(rc, raw, tp), (raw[:300], tp)
            n += 1
    assert n > 150


# ------------------------------------------------------------ on a Cluster

# the limit's keys on a Cluster: its id in one hash tag (qlimit_key)
CBASE = PREFIX + "qpool:limit:{%s}" % BASE[len(PREFIX + "qpool:limit:"):]


def test_one_per_customer_on_a_cluster(cluster, master_factory, tmp_path):
    """concurrency = 1 per customer on a 3-node Cluster, the queue in
    another node's slot than the limit: customer 1's and customer 2's first
    jobs (tags; models in the command) run at once, each customer's second
    waits (attempts 0) while its first holds the key's slot (renewed), a job
    with no customer tag is not held; every job runs once, every slot is
    given back."""
    path, log, gate = handler(tmp_path)
    queue = queue_away_from(cluster, CBASE + ":run")
    rc = cluster.client()
    c1 = [invoice(1), invoice(1, via="command")]
    c2 = [invoice(2, via="command"), invoice(2)]
    free = make_payload(job=INVOICE, tags=["App\\Models\\User:1"])
    push_many(rc, queue, [c1[0], c1[1], c2[0], c2[1], free])
    start(cluster, master_factory, "a", path, queue, LIMIT % "", processes=4)
    want = {c1[0]["uuid"], c2[0]["uuid"], free["uuid"]}
    wait_for(lambda: want <= started(log), 90, what="both customers' first jobs and the untagged one to start")
    assert {c1[1]["uuid"], c2[1]["uuid"]}.isdisjoint(started(log))
    assert [j["attempts"] for j in ready(rc, queue)] == [0, 0]
    runs = [CBASE + ":k:1:run", CBASE + ":k:2:run", CBASE + ":run"]
    assert [rc.zcard(k) for k in runs] == [1, 1, 2]
    s0 = rc.zrange(runs[0], 0, 0, withscores=True)[0][1]
    wait_for(lambda: (rc.zrange(runs[0], 0, 0, withscores=True) or [(0, 0)])[0][1] > s0, 30,
             what="the key's slot to be renewed")
    assert {c1[1]["uuid"], c2[1]["uuid"]}.isdisjoint(started(log))
    assert [j["attempts"] for j in ready(rc, queue)] == [0, 0]
    gate.touch()
    wait_for(lambda: len(records(log)) == 5 and all(r["E"] for r in records(log).values()), 90,
             what="all 5 jobs to run")
    recs = records(log)
    for u, r in recs.items():
        assert len(r["S"]) == 1 and r["S"][0][1] == 1, (u, r)
    for jobs in (c1, c2):
        assert max_overlap({j["uuid"]: recs[j["uuid"]] for j in jobs}, INVOICE) == 1
    wait_for(lambda: [rc.zcard(k) for k in runs] == [0, 0, 0], 30, what="every slot to be given back")


def test_rate_per_customer_on_a_cluster(cluster, master_factory, tmp_path):
    """rate = 1/m per customer on a Cluster: each customer's first job
    starts (its key's token taken), customer 1's second waits with attempts
    0, held by its key's empty bucket (the limit's :wait record says a pop
    held it), never by the other customer's."""
    path, log, _gate = handler(tmp_path)
    base = PREFIX + "qpool:limit:{||App\\Jobs\\Invoice|%s}" % CUSTOMER
    queue = queue_away_from(cluster, base + ":run")
    rc = cluster.client()
    c1 = [make_payload(job="App\\Jobs\\Invoice", tags=[CUSTOMER + "1"]) for _ in range(2)]
    c2 = make_payload(job="App\\Jobs\\Invoice", tags=[CUSTOMER + "2"])
    push_many(rc, queue, [c1[0], c1[1], c2])
    limits = ('limits = (\n  { class = "App\\\\Jobs\\\\Invoice"; tag_prefix = "App\\\\Models\\\\Customer:";'
              ' rate = "1/m"; }\n);\n')
    start(cluster, master_factory, "a", path, queue, limits, processes=2)
    done = {c1[0]["uuid"], c2["uuid"]}
    wait_for(lambda: done <= {u for u, r in records(log).items() if r["E"]}, 90, what="one job per customer to run")
    rc.delete(base + ":wait")
    wait_for(lambda: rc.exists(base + ":wait"), 30, what="a pop to hold customer 1's second job")
    assert c1[1]["uuid"] not in records(log)
    assert [j["attempts"] for j in ready(rc, queue)] == [0]
    for k in ("1", "2"):  # a bucket lapses 61 s after its last token: missing means full again
        tokens = rc.hget(base + ":k:%s:bucket" % k, "tokens")
        assert tokens is None or float(tokens) < 1, (k, tokens)
    assert rc.zcard(base + ":run") == 0  # a rate alone holds no slot
