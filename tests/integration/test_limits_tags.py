"""Per-key limits (issue 33, tag_prefix): a limit applies per key taken from
the job's tags (the payload's "tags" array, else the models of its
serialized command), decided by the limited pop before the job starts.

Jobs run an exec handler that logs start and end lines (test_limits.py's
records); a "Gated" job runs until its gate file exists, so that what runs
at once is decided by the test, never by timing."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PREFIX, make_payload, push, push_many, wait_for
from test_limits import max_overlap, ready_attempts, records, start

INVOICE = "App\\Jobs\\InvoiceGated"
CUSTOMER = "App\\Models\\Customer:"
LIMIT = ('limits = (\n  { class = "App\\\\Jobs\\\\InvoiceGated"; tag_prefix = "App\\\\Models\\\\Customer:";'
         ' concurrency = 1; %s}\n);\n')
BASE = PREFIX + "qpool:limit:||App\\Jobs\\InvoiceGated|App\\Models\\Customer:"

HANDLER = """#!/bin/sh
cat > /dev/null
echo "S $QPOOL_JOB_NAME $QPOOL_JOB_UUID $QPOOL_ATTEMPTS $PPID $(date +%%s%%N)" >> %(log)s
case "$QPOOL_JOB_NAME" in
  *Gated) while [ ! -e %(gate)s ]; do sleep 0.05; done ;;
esac
echo "E $QPOOL_JOB_NAME $QPOOL_JOB_UUID $QPOOL_ATTEMPTS $PPID $(date +%%s%%N)" >> %(log)s
"""


def handler(tmp):
    log, gate = tmp / "jobs.log", tmp / "gate"
    log.touch()
    path = tmp / "handler.sh"
    path.write_text(HANDLER % {"log": log, "gate": gate})
    path.chmod(0o755)
    return path, log, gate


def php_str(s):
    return 's:%d:"%s";' % (len(s.encode()), s)


def command_with(models):
    """A serialized command as PHP writes it: a job whose properties are
    ModelIdentifiers (Laravel's SerializesModels), class and id each."""
    props = ""
    for name, (cls, mid) in models.items():
        idv = "i:%d;" % mid if isinstance(mid, int) else php_str(mid)
        props += php_str(name) + ('O:45:"Illuminate\\Contracts\\Database\\ModelIdentifier":4:{'
                                  + php_str("class") + php_str(cls) + php_str("id") + idv
                                  + php_str("relations") + "a:0:{}" + php_str("connection") + php_str("mysql") + "}")
    return 'O:22:"App\\Jobs\\InvoiceGated":%d:{%s}' % (len(models), props)


def invoice(customer, via="tags"):
    if via == "tags":  # Horizon's payload tags
        return make_payload(job=INVOICE, tags=[CUSTOMER + str(customer), "App\\Models\\User:9"])
    return make_payload(job=INVOICE, data={"commandName": INVOICE,
                                           "command": command_with({"customer": ("App\\Models\\Customer", customer)})})


def limit_keys(rc, suffix):
    """The keys under the per-key limit ending in suffix (KEYS' glob would
    read the class's backslashes as escapes)."""
    return [k.decode("latin-1") for k in rc.scan_iter(PREFIX + "qpool:limit:*", count=1000)
            if k.decode("latin-1").startswith(BASE) and k.decode("latin-1").endswith(suffix)]


def started(log):
    return {u for u, r in records(log).items() if r["S"]}


def test_one_per_customer(master_factory, redis_server, tmp_path):
    """concurrency = 1 per customer: customer 1's and customer 2's first jobs
    run at once, each customer's second job waits (attempts 0) while its
    first holds the key's slot (renewed past its first lapse time), a job
    with no customer tag is not held, every job runs once, and every slot
    is given back."""
    path, log, gate = handler(tmp_path)
    rc = redis_server.client()
    c1 = [invoice(1), invoice(1, via="command")]
    c2 = [invoice(2, via="command"), invoice(2)]
    free = make_payload(job=INVOICE, tags=["App\\Models\\User:1"])
    push_many(rc, "work", [c1[0], c1[1], c2[0], c2[1], free])
    m = start(master_factory, redis_server, "a", path, LIMIT % "", processes=4)
    want = {c1[0]["uuid"], c2[0]["uuid"], free["uuid"]}
    wait_for(lambda: want <= started(log), 60, what="both customers' first jobs and the untagged one to start")
    assert {c1[1]["uuid"], c2[1]["uuid"]}.isdisjoint(started(log))
    assert ready_attempts(rc) == [0, 0]
    assert rc.zcard(BASE + ":k:1:run") == 1 and rc.zcard(BASE + ":k:2:run") == 1
    # a running job's key slot is renewed (beat), not left to lapse
    s0 = rc.zrange(BASE + ":k:1:run", 0, 0, withscores=True)[0][1]
    wait_for(lambda: (rc.zrange(BASE + ":k:1:run", 0, 0, withscores=True) or [(0, 0)])[0][1] > s0, 30,
             what="the key's slot to be renewed")
    lim = wait_for(lambda: [x for x in m.status().get("limits", []) if x.get("waiting")], 20,
                   what="status to show the jobs held back")[0]
    assert lim["in_use"] == 2 and lim["tag_prefix"] == CUSTOMER, lim
    assert "2 (1/key)" in m.cli("status").stdout
    assert {c1[1]["uuid"], c2[1]["uuid"]}.isdisjoint(started(log))
    assert sorted(limit_keys(rc, ":run")) == [BASE + ":k:1:run", BASE + ":k:2:run", BASE + ":run"]
    gate.touch()
    wait_for(lambda: len(records(log)) == 5 and all(r["E"] for r in records(log).values()), 60,
             what="all 5 jobs to run")
    recs = records(log)
    for u, r in recs.items():
        assert len(r["S"]) == 1 and r["S"][0][1] == 1, (u, r)

    def overlap(uuids):
        return max_overlap({u: recs[u] for u in uuids}, INVOICE)
    assert overlap([j["uuid"] for j in c1]) == 1 and overlap([j["uuid"] for j in c2]) == 1
    wait_for(lambda: not limit_keys(rc, ":run"), 20, what="every slot to be given back")


def test_hostile_tags_are_bounded(master_factory, redis_server, tmp_path):
    """Huge, many, binary, '|' and '{' tags, and a command that lies about
    its lengths: every job runs once, a job takes at most 4 keys, and each
    key is short and plain or a hash."""
    path, log, gate = handler(tmp_path)
    gate.touch()
    rc = redis_server.client()
    lies = 'O:1:"X":1:{s:1:"m";O:45:"Illuminate\\Contracts\\Database\\ModelIdentifier":4:{s:5:"class";s:99999:"'
    jobs = [
        make_payload(job=INVOICE, tags=[CUSTOMER + "x" * 300000]),
        make_payload(job=INVOICE, tags=[CUSTOMER + str(i) for i in range(1000)]),
        make_payload(job=INVOICE, tags=[CUSTOMER + "a|b", CUSTOMER + "{x}", CUSTOMER + "\u00ff\u0001", 7, None,
                                        {"a": 1}, CUSTOMER, CUSTOMER + "a|b"]),
        make_payload(job=INVOICE, tags={"not": "a list"}),
        make_payload(job=INVOICE, data={"command": lies}),
        make_payload(job=INVOICE, data={"command": command_with(
            {"m%d" % i: ("App\\Models\\Customer", "k%d" % i) for i in range(30)})}),
    ]
    raw = json.dumps(make_payload(job=INVOICE, tags=["X"])).replace('"X"', '"%s\xfe\xff"' % CUSTOMER.replace("\\", "\\\\"))
    push_many(rc, "work", jobs)
    push(rc, "work", raw.encode("latin-1"))  # raw bytes that are not UTF-8
    start(master_factory, redis_server, "a", path, LIMIT % 'rate = "600/m"; burst = 100; ', processes=2)
    wait_for(lambda: len(records(log)) == 7 and all(r["E"] for r in records(log).values()), 60,
             what="all 7 jobs to run")
    for u, r in records(log).items():
        assert len(r["S"]) == 1 and r["S"][0][1] == 1, (u, r)
    assert rc.llen(PREFIX + "queues:work") == 0 and rc.zcard(PREFIX + "qpool:failed:work") == 0
    buckets = limit_keys(rc, ":bucket")
    kids = sorted(k[len(BASE) + 3:-len(":bucket")] for k in buckets)
    plain = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$|^h:[0-9a-f]{40}$")
    assert all(plain.match(k) for k in kids), kids
    assert {"0", "1", "2", "3", "k0", "k1", "k2", "k3"} <= set(kids)
    assert not {"4", "999", "k4"} & set(kids), kids
    assert len(kids) <= 4 * 7, kids


def test_pipe_in_names_keys_apart(master_factory, redis_server, tmp_path):
    """A '|' in a name: queue "p|x" class "C" and queue "p" class "x|C" used
    to share their keys ("p|x|C"): a job of the one held a job of the other.
    Now each has its own: both run at once, each under concurrency 1."""
    path, log, gate = handler(tmp_path)
    rc = redis_server.client()
    limits = ('limits = (\n  { queue = "p|x"; class = "App\\\\Jobs\\\\CGated"; concurrency = 1; },\n'
              '  { queue = "p"; class = "x|App\\\\Jobs\\\\CGated"; concurrency = 1; }\n);\n')
    m = master_factory(redis_server, "a")
    m.write_config('{ name = "w"; queues = ["p|x", "p"]; processes = 3; retry_after = 300;'
                   ' handler = { type = "exec"; command = ["/bin/sh", "%s"]; }; }' % path)
    m.conf.write_text(m.conf.read_text() + limits)
    m.start()
    a, b = make_payload(job="App\\Jobs\\CGated"), make_payload(job="x|App\\Jobs\\CGated")
    push(rc, "p|x", a)
    push(rc, "p", b)
    wait_for(lambda: {a["uuid"], b["uuid"]} <= started(log), 60, what="both jobs to run at once")
    assert rc.zcard(PREFIX + "qpool:limit:p|x|App\\Jobs\\CGated:run") == 0  # the shared key of old: unused
    gate.touch()
    wait_for(lambda: all(r["E"] for r in records(log).values()), 60, what="both jobs to end")


# ------------------------------------------------------------ the Lua itself

def tags_lua():
    """QLIMIT_TAGS_LUA as the C compiler reads it (src/redis/qlimit.c)."""
    src = (Path(__file__).resolve().parents[2] / "src/redis/qlimit.c").read_text()
    body = src[src.index("#define QLIMIT_TAGS_LUA"):]
    body = body[:body.index("\n\n")]
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', body)
    return "".join(bytes(p, "latin-1").decode("unicode_escape") for p in parts)


PROBE = """
local function lim_full(l) return false end
local function lim_used(l) return 0 end
%s
local d = cjson.decode(ARGV[1])
local l = {key = 'K', tp = ARGV[2], conc = 1, rate = 0, burst = 1}
local hit = {}
lim_tagged(l, d, hit)
local tags, keys = lim_job_tags(d), {}
for _, h in ipairs(hit) do keys[#keys + 1] = h.key end
return {tags, keys}
"""


def derive(rc, payload, tp=CUSTOMER):
    tags, keys = rc.eval(PROBE % tags_lua(), 0, json.dumps(payload), tp)
    return [t.decode("latin-1") for t in tags], [k.decode() for k in keys]


def test_key_derivation(redis_server):
    rc = redis_server.client()
    # Horizon's tags first; the models only without them
    p = make_payload(tags=[CUSTOMER + "7", "other", CUSTOMER + "7", CUSTOMER + "8"],
                     data={"command": command_with({"c": ("App\\Models\\Customer", 1)})})
    assert derive(rc, p) == ([CUSTOMER + "7", "other", CUSTOMER + "7", CUSTOMER + "8"], ["K:k:7", "K:k:8", "K"])
    # model tags from the serialized command: int and string ids, a collection's ids
    cmd = command_with({"c": ("App\\Models\\Customer", 12), "u": ("App\\Models\\User", "ab-9")})
    coll = ('O:1:"J":1:{s:1:"c";O:45:"Illuminate\\Contracts\\Database\\ModelIdentifier":4:{s:5:"class";'
            's:19:"App\\Models\\Customer";s:2:"id";a:2:{i:0;i:3;i:1;s:1:"4";}s:9:"relations";a:0:{}'
            's:10:"connection";N;}}')
    assert derive(rc, make_payload(data={"command": cmd})) == (
        [CUSTOMER + "12", "App\\Models\\User:ab-9"], ["K:k:12", "K"])
    assert derive(rc, make_payload(data={"command": coll}))[1] == ["K:k:3", "K:k:4", "K"]
    # no key: the limit does not apply (not even its own count)
    assert derive(rc, make_payload(tags=["App\\Models\\User:1", CUSTOMER]))[1] == []
    # long or odd keys are hashed; at most 4 keys a job
    long = "9" * 65
    sha = lambda s: __import__("hashlib").sha1(s.encode()).hexdigest()
    assert derive(rc, make_payload(tags=[CUSTOMER + long, CUSTOMER + "a:b", CUSTOMER + "x" * 64]))[1] == [
        "K:k:h:" + sha(long), "K:k:h:" + sha("a:b"), "K:k:" + "x" * 64, "K"]
    assert derive(rc, make_payload(tags=[CUSTOMER + str(i) for i in range(9)]))[1] == [
        "K:k:0", "K:k:1", "K:k:2", "K:k:3", "K"]


@pytest.mark.skipif(not shutil.which("php") or not Path(
    "/usr/share/php/Illuminate/Contracts/Database/ModelIdentifier.php").exists(), reason="no PHP with Illuminate")
def test_key_derivation_from_php_serialize(redis_server):
    """The command as PHP itself serializes a job with models (Laravel's own
    ModelIdentifier): private, protected and public properties, a collection."""
    code = r"""
require '/usr/share/php/Illuminate/Contracts/Database/ModelIdentifier.php';
use Illuminate\Contracts\Database\ModelIdentifier as M;
class J { public $a; protected $b; private $c; public $n = 'Customer:5';
  function __construct() { $this->a = new M('App\Models\Customer', 41, [], 'mysql');
    $this->b = new M('App\Models\Customer', 'u-42', ['x'], null);
    $this->c = new M('App\Models\Order', [1, 2], [], null); } }
echo serialize(new J);
"""
    cmd = subprocess.run(["php", "-r", code], capture_output=True, text=True, timeout=60, check=True).stdout
    tags, keys = derive(redis_server.client(), make_payload(data={"command": cmd}))
    assert tags == [CUSTOMER + "41", CUSTOMER + "u-42", "App\\Models\\Order:1", "App\\Models\\Order:2"], cmd
    assert keys == ["K:k:41", "K:k:u-42", "K"]
