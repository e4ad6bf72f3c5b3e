"""The review of batchdone (issue 31): a batch's jobs as a native handler's
workers record them, from the batch id in the payload's serialized command
(data.command, as Laravel's Bus::batch writes it) when the handler reports
none: attempts that time out or crash are listed too (MUST 2); and the
number of batches listed is bounded, batch_jobs_keep (MUST 1); a write
Redis refuses is logged (SHOULD 4); the PHP adapter's own reading of the
serialized command takes only its top-level batchId (SHOULD 5). Real
redis-server, real master and workers (the fixture handler, no PHP); no
timing is asserted."""
import json
import uuid as uuidlib

import subprocess

from conftest import FIXTURE_HANDLER, PREFIX, QPOOL, ROOT, make_payload, push, wait_for

JOB = "App\\Jobs\\BatchJob"


def php_s(text):
    return 's:%d:"%s";' % (len(text.encode()), text)


def command(batch, nested=None):
    """A Batchable command's PHP serialize text; nested: a chained job's batch."""
    props = [php_s("tries"), "i:1;"]
    if nested:
        inner = 'O:%d:"%s":1:{%s%s}' % (len(JOB), JOB, php_s("batchId"), php_s(nested))
        props += [php_s("chained"), "a:1:{i:0;%s}" % php_s(inner)]
    if batch:
        props += [php_s("batchId"), php_s(batch)]
    return 'O:%d:"%s":%d:{%s}' % (len(JOB), JOB, len(props) // 2, "".join(props))


def batch_job(action, batch, nested=None):
    p = make_payload(action, job=JOB)
    p["data"]["command"] = command(batch, nested)
    p["data"]["commandName"] = JOB
    return p


def pool(queue, extra=""):
    return ('{ name = "bn"; queues = ["%s"]; processes = 2; tries = 1; timeout = 2; %s'
            ' handler = { type = "pipe"; command = ["%s"]; }; }' % (queue, extra, FIXTURE_HANDLER))


def batch_list(r, bid):
    return [json.loads(x) for x in r.lrange(PREFIX + "qpool:{qpool-jobs}:batch:" + bid, 0, -1)]


def test_timed_out_and_crashed_batch_jobs_are_listed(master, r):
    bid, other = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    master.write_config(pool("bn-q"))
    master.start()
    jobs = {"done": batch_job("ok", bid), "timed_out": batch_job("hang", bid), "crashed": batch_job("crash", bid),
            "failed": batch_job("fail", bid, nested=other)}
    for p in jobs.values():
        push(r, "bn-q", p)
    got = wait_for(lambda: (lambda x: x if len(x) >= 4 else None)(batch_list(r, bid)), 60,
                   what="the batch's 4 jobs in its list")
    assert {j["uuid"]: j["outcome"] for j in got} == {p["uuid"]: o for o, p in jobs.items()}, got
    # a chained job's batch id (nested in the command) is not the job's
    assert batch_list(r, other) == []
    recent = [json.loads(x) for x in r.lrange(PREFIX + "qpool:{qpool-jobs}:list", 0, -1)]
    assert {x["uuid"] for x in recent if x.get("batch") == bid} == {p["uuid"] for p in jobs.values()}, recent


def recent(r):
    return [json.loads(x) for x in r.lrange(PREFIX + "qpool:{qpool-jobs}:list", 0, -1)]


def test_only_the_newest_batch_jobs_keep_batches_are_listed(master, r):
    master.write_config(pool("bk-q"), qpool="batch_jobs_keep = 3;")
    master.start()
    ids = ["bk-%d-%s" % (i, uuidlib.uuid4().hex[:8]) for i in range(5)]
    for bid in ids:  # one after the other: each its own write, the index in this order
        push(r, "bk-q", batch_job("ok", bid))
        wait_for(lambda: batch_list(r, bid), 60, what="batch %s's list" % bid)
    index = PREFIX + "qpool:{qpool-jobs}:batches"
    assert r.zrange(index, 0, -1) == [b.encode() for b in ids[2:]]
    assert [len(batch_list(r, b)) for b in ids] == [0, 0, 1, 1, 1]
    assert r.pttl(index) > 0
    assert {x["batch"] for x in recent(r) if x.get("batch")} == set(ids)  # the history keeps them all


def test_batch_jobs_keep_0_writes_no_list(master, r):
    master.write_config(pool("bk0-q"), qpool="batch_jobs_keep = 0;")
    master.start()
    bid = str(uuidlib.uuid4())
    first = push(r, "bk0-q", batch_job("ok", bid))
    wait_for(lambda: any(x.get("batch") == bid for x in recent(r)), 60, what="the job's record")
    later = make_payload("ok")  # a later pass: the first one's is over
    push(r, "bk0-q", later)
    wait_for(lambda: any(x["uuid"] == later["uuid"] for x in recent(r)), 60, what="a later record")
    assert first and r.keys(PREFIX + "qpool:{qpool-jobs}:batch*") == []


def test_qpool_check_names_a_bad_batch_jobs_keep(master):
    conf = master.write_config(pool("bkc-q"), qpool="batch_jobs_keep = -1;")
    line = next(i for i, x in enumerate(conf.read_text().splitlines(), 1) if "batch_jobs_keep" in x)
    res = subprocess.run([QPOOL, "check", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78 and "%s:%d: batch_jobs_keep" % (conf, line) in res.stderr, res
    conf.write_text(conf.read_text().replace("batch_jobs_keep = -1;", "batch_jobs_keep = 0;"))
    res = subprocess.run([QPOOL, "check", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and "batch_jobs_keep = 0;" in res.stdout, res


def test_a_refused_batch_list_write_is_logged(master, r):
    bid = str(uuidlib.uuid4())
    r.set(PREFIX + "qpool:{qpool-jobs}:batch:" + bid, "not a list")  # WRONGTYPE for its entries
    master.write_config(pool("bkw-q"))
    master.start()
    for i in range(3):  # three writes, each refused
        push(r, "bkw-q", batch_job("ok", bid))
        wait_for(lambda: sum(x.get("batch") == bid for x in recent(r)) == i + 1, 60, what="record %d" % (i + 1))
    master.wait_log(r"pool bn: 1 job record\(s\) not copied to their batch's list \(WRONGTYPE.*; \d so far", 60)
    # rate-limited: the first, then once a minute while the cause lasts (not once per write)
    assert master.count_log("not copied to their batch's list") < 3, master.log()



def test_a_refused_batches_index_write_is_logged(master, r):
    """Review of batchfix, SHOULD 3: the list is written but the index
    refuses its batch (here WRONGTYPE; an ACL without :batches, OOM):
    logged, rate-limited, not silent."""
    bid = str(uuidlib.uuid4())
    r.set(PREFIX + "qpool:{qpool-jobs}:batches", "not a sorted set")
    master.write_config(pool("bki-q"))
    master.start()
    for i in range(3):
        push(r, "bki-q", batch_job("ok", bid))
        wait_for(lambda: len(batch_list(r, bid)) == i + 1, 60, what="entry %d of the batch's list" % (i + 1))
    master.wait_log(r"pool bn: 1 job record\(s\)' batch not in the batches' index \(WRONGTYPE.*; \d so far", 60)
    assert master.count_log("batch not in the batches' index") < 3, master.log()
    assert master.count_log("not copied to their batch's list") == 0, master.log()


def test_a_lowered_batch_jobs_keep_is_reached_over_several_writes(master, r):
    """Review of batchfix, SHOULD 4: 450 batches listed and batch_jobs_keep
    now 3: each write drops at most 200 more than it adds (UNLINK), the
    oldest first, until 3 are left."""
    index, pre = PREFIX + "qpool:{qpool-jobs}:batches", PREFIX + "qpool:{qpool-jobs}:batch:"
    old = ["old-%03d" % i for i in range(450)]
    pipe = r.pipeline()
    for i, b in enumerate(old):
        pipe.zadd(index, {b: i + 1})
        pipe.rpush(pre + b, "{}")
    pipe.execute()
    master.write_config(pool("bkl-q"), qpool="batch_jobs_keep = 3;")
    master.start()
    ids = ["bkl-%d-%s" % (i, uuidlib.uuid4().hex[:8]) for i in range(3)]
    sizes = []
    for bid in ids:  # one write each
        push(r, "bkl-q", batch_job("ok", bid))
        wait_for(lambda: batch_list(r, bid), 60, what="batch %s's list" % bid)
        sizes.append(r.zcard(index))
    assert sizes == [250, 50, 3], sizes
    assert r.zrange(index, 0, -1) == [b.encode() for b in ids]
    assert not any(r.exists(pre + b) for b in old)


PHP_BATCH = r"""<?php
require $argv[1].'/php/src/Tags.php';
use Qpool\Laravel\Tags;
class Job { public $tries = 1; protected $note = 's:7:"batchId";s:5:"fake1";'; public $chained = []; public $next;
    public $batchId; }
function job($own, $nested) {
    $inner = new Job; $inner->batchId = $nested;
    $j = new Job; $j->chained = [serialize($inner)]; $j->next = $inner; $j->batchId = $own;
    return $j;
}
function payload($job) { return ['data' => ['commandName' => 'Job', 'command' => serialize($job)]]; }
$out = [];
Tags::$command = null; // the hook not installed: the serialized text is read
$out['own'] = Tags::batch(payload(job('top-1', 'inner-1')));
$out['none'] = Tags::batch(payload(job(null, 'inner-1')));
$obj = new ArrayObject([1]); $j = job('top-2', 'inner-2'); $j->next = [$obj, 1.5, true, null];
$out['after_others'] = Tags::batch(payload($j));
$out['cut'] = Tags::batch(['data' => ['command' => substr(serialize(job('top-3', null)), 0, -3)]]);
Tags::$command = job(null, 'inner-4'); // installed: the command's own property only
$out['hooked'] = Tags::batch(payload(Tags::$command));
echo json_encode($out);
"""


def test_the_php_adapter_reads_only_the_commands_own_batch_id(tmp_path):
    script = tmp_path / "batch.php"
    script.write_text(PHP_BATCH)
    res = subprocess.run(["php", str(script), str(ROOT)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res
    assert json.loads(res.stdout) == {"own": "top-1", "none": None, "after_others": "top-2", "cut": None,
                                      "hooked": None}, res.stdout
