"""Redis Cluster (issue 12 item 1): three primaries on loopback
(`redis-server --cluster-enabled yes` x3, `redis-cli --cluster create`).
qpool reads the slot map, routes every command to the node owning its
key's slot, pops per slot in the pool's priority order, and comes back after
a primary is killed and restarted from its AOF. The last four tests are
regressions for the "Known defects" of docs/operations.md (a dead seed, a
failover to a replica, a stalled node, a node that lost its scripts)."""
import collections
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from cluster_util import Cluster, cluster, cluster_ports  # noqa: F401 (cluster: a fixture)
from conftest import (FIXTURE_HANDLER, PREFIX, QPOOL, free_port, make_payload, push, push_many, queue_state,
                      read_fixture_log, wait_for)

QUEUES = ["{emails}", "{sms}", "{reports}"]


def cluster_conf(c, extra="", seeds=None, timeout=3):
    """seeds: the cluster addresses in their order (default: every primary)."""
    addrs = ", ".join('"%s"' % a for a in seeds) if seeds else c.addrs()
    return ('default = { cluster = [%s]; prefix = "%s"; timeout = %d; %s };' % (addrs, PREFIX, timeout, extra))


def seed(node):
    return "127.0.0.1:%d" % node.port


def pool(log, queues=QUEUES, n=3, name="w", extra="", tries=0, retry_after=20):
    size = "processes = %d;" % n if n else ""
    return ('{ name = "%s"; queues = [%s]; %s tries = %d; retry_after = %d;'
            ' handler = { type = "pipe"; command = ["%s"]; }; environment = { FIXTURE_LOG = "%s"; }; %s }'
            % (name, ", ".join('"%s"' % q for q in queues), size, tries, retry_after, FIXTURE_HANDLER, log, extra))


def empty(rc, queues=QUEUES):
    for q in queues:
        s = queue_state(rc, q)
        if s["ready"] or s["reserved"] or s["delayed"]:
            return False
    return True


def ran_ids(log):
    return collections.Counter(l[1] for l in read_fixture_log(log) if l[0] == "job")


def wait_ran(log, want, timeout, what):
    """Wait until every job id in want has run (at least once)."""
    try:
        wait_for(lambda: want <= set(ran_ids(log)), timeout, interval=0.3, what=what)
    except AssertionError:
        raise AssertionError("timed out after %d s waiting for %s: %d of %d jobs never ran"
                             % (timeout, what, len(want - set(ran_ids(log))), len(want))) from None


def queue_on(c, node, stem="q"):
    """A hash-tagged queue name ({<stem><n>}) whose slot the given node owns."""
    for i in range(1000):
        q = "{%s%d}" % (stem, i)
        if c.node_of(PREFIX + "queues:" + q).port == node.port:
            return q
    raise AssertionError("no queue name found for the node on %d" % node.port)


@pytest.mark.parametrize("prefetch", [1, 8])
def test_queues_in_three_slots_are_all_processed(cluster, master_factory, tmp_path, prefetch):
    rc = cluster.client()
    # the queues really are on different nodes (else this tests nothing)
    assert len({cluster.node_of(PREFIX + "queues:" + q).port for q in QUEUES}) >= 2
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log, extra="prefetch = %d;" % prefetch), redis_conf=cluster_conf(cluster))
    jobs = {q: [make_payload("ok") for _ in range(60)] for q in QUEUES}
    for q in QUEUES:
        push_many(rc, q, jobs[q][:30])
    later = make_payload("ok")
    rc.zadd(PREFIX + "queues:{sms}:delayed", {__import__("json").dumps(later, separators=(",", ":")): 1})
    m.start()
    for q in QUEUES:  # more while the workers wait
        push_many(rc, q, jobs[q][30:])
    wait_for(lambda: empty(rc), 120, interval=0.3, what="every queue empty")
    ran = ran_ids(log)
    want = {p["id"] for q in QUEUES for p in jobs[q]} | {later["id"]}
    assert want <= set(ran), "lost: %d" % len(want - set(ran))
    twice = [i for i, n in ran.items() if n > 1]
    assert not twice, "\n".join(l for l in m.log().splitlines() if any(t in l for t in twice[:2]) or "warn" in l or "error" in l)
    assert m.pool("w")["crashes"] == 0
    assert m.proc.poll() is None
    assert not re.search(r"CROSSSLOT|MOVED|unavailable| error ", m.log()), m.log()[-3000:]


def test_failures_and_releases_stay_in_the_queues_slot(cluster, master_factory, tmp_path):
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log, ["{emails}"], n=1, tries=2), redis_conf=cluster_conf(cluster))
    bad = [make_payload("fail") for _ in range(3)]
    poison = "not json"
    push_many(rc, "{emails}", bad)
    rc.rpush(PREFIX + "queues:{emails}", poison)
    rc.rpush(PREFIX + "queues:{emails}:notify", 1)
    m.start()
    idx = PREFIX + "qpool:failed:{emails}"
    wait_for(lambda: rc.zcard(idx) == 4, 120, interval=0.3, what="4 failed records")
    wait_for(lambda: empty(rc, ["{emails}"]), 60, what="the queue empty")
    uuids = [u.decode() for u in rc.zrange(idx, 0, -1)]
    recs = [rc.hgetall(idx + ":job:" + u) for u in uuids]
    assert all(r[b"queue"] == b"{emails}" for r in recs)
    assert sum(1 for r in recs if r[b"payload"] == poison.encode()) == 1
    # each record names where it failed, the poison moved aside by the pop too
    assert all(r[b"pool"] == b"w" and r[b"host"] == socket.gethostname().encode() for r in recs), recs
    # a job that failed twice (tries = 2) ran twice: released once in between
    ran = ran_ids(log)
    assert all(ran[p["id"]] == 2 for p in bad)
    res = m.cli("failed", "list", "{emails}", check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    for u in uuids:
        assert u in res.stdout


def test_failures_of_a_queue_no_pool_lists_any_more_stay_listed(cluster, master_factory, tmp_path):
    """On a cluster the set of queues with failures cannot be kept by the
    fail script (another slot): the master notes the queues its pools list,
    so a queue's failed jobs are still listed, shown and retried by `qpool
    failed` after the pool stops listing it."""
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log, ["{emails}", "{gone}"], n=1, tries=1), redis_conf=cluster_conf(cluster))
    bad = make_payload("fail")
    push_many(rc, "{gone}", [bad])
    m.start()
    idx = PREFIX + "qpool:failed:{gone}"
    wait_for(lambda: rc.zcard(idx) == 1, 60, interval=0.3, what="the failed record")
    uuid = rc.zrange(idx, 0, -1)[0].decode()
    wait_for(lambda: rc.sismember(PREFIX + "qpool:{qpool-failed}:queues", "{gone}"), 30, interval=0.2,
             what="the queue noted")
    assert m.stop() == 0
    m.write_config(pool(log, ["{emails}"], n=1, tries=1), redis_conf=cluster_conf(cluster))
    res = m.cli("failed", "list", check=False)
    assert res.returncode == 0 and uuid in res.stdout and "{gone}" in res.stdout, res.stdout + res.stderr
    res = m.cli("failed", "show", uuid, check=False)
    assert res.returncode == 0 and bad["id"] in res.stdout, res.stdout + res.stderr
    res = m.cli("failed", "retry", uuid, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert rc.llen(PREFIX + "queues:{gone}") == 1 and rc.zcard(idx) == 0


def test_job_history_and_bulk_retry_on_a_cluster(cluster, master_factory, tmp_path):
    """Reviews #7 and #8 on a cluster: the job records and their index by
    uuid share a hash tag (one script keeps them in step), one job is read
    from the index; a bulk retry's batch keeps to its queue's slot."""
    token = "cluster-test-token-0123456789abcdef"

    def api(path, body=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as res:
            return json.loads(res.read())
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    port = free_port()
    m = master_factory()
    m.write_config(pool(log, n=1, tries=2, extra="backoff = [0];"), redis_conf=cluster_conf(cluster),
                   qpool='http = { listen = "127.0.0.1:%d"; token_env = "QPOOL_TEST_TOKEN"; };' % port)
    m.start(env={"QPOOL_TEST_TOKEN": token})
    bad = make_payload("fail")
    push_many(rc, "{emails}", [bad] + [make_payload("ok") for _ in range(5)])
    wait_for(lambda: len(api("/api/jobs/recent")["jobs"]) == 7, 60, interval=0.3, what="7 attempts recorded")
    assert [a["attempt"] for a in api("/api/jobs/" + bad["uuid"])["attempts"]] == [2, 1]
    assert len(api("/api/jobs/recent?limit=3")["jobs"]) == 3
    assert rc.hlen(PREFIX + "qpool:{qpool-jobs}:uuid") == 6
    wait_for(lambda: rc.zcard(PREFIX + "qpool:failed:{emails}") == 1, 30, what="the failure stored")
    m.cli("pause", "w")
    wait_for(lambda: m.pool("w").get("paused"), 30, what="w paused")
    rep = api("/api/failed/retry", {"queue": "{emails}"})
    assert rep["retried"] == 1 and rep["remaining"] == 0
    assert rc.llen(PREFIX + "queues:{emails}") == 1 and rc.zcard(PREFIX + "qpool:failed:{emails}") == 0


def test_monitored_tags_on_a_cluster(cluster, master_factory, tmp_path):
    """Issue 31: a watched tag's list shares the history's hash tag, so the
    script that fills it runs on one node."""
    rc = cluster.client()
    port = free_port()
    m = master_factory()
    m.write_config(pool(tmp_path / "fixture.log", n=1), redis_conf=cluster_conf(cluster),
                   qpool='http = { listen = "127.0.0.1:%d"; read_without_token = "all"; };' % port)
    m.start()
    assert "watching" in m.cli("monitor", "add", "vip").stdout
    push_many(rc, "{emails}", [make_payload("ok", tags=["vip"]) for _ in range(2)] + [make_payload("ok")])

    def get(path):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as res:
            return json.loads(res.read())
    wait_for(lambda: get("/api/monitoring")["tags"] == [{"tag": "vip", "jobs": 2}], 60, interval=0.3,
             what="the watched tag's two jobs")
    assert len(get("/api/monitoring/jobs?tag=vip")["jobs"]) == 2
    assert rc.llen(PREFIX + "qpool:{qpool-jobs}:tag:vip") == 2
    assert json.loads(m.cli("monitor", "list", "--json").stdout)["tags"] == [{"tag": "vip", "jobs": 2}]


def test_status_and_balancing_count_every_slot(cluster, master_factory, tmp_path):
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    held = ["{held}", "{held2}"]
    m.write_config(pool(log, n=0, extra='balance = "auto"; min_processes = 1; max_processes = 4;') +
                   ',\n' + pool(log, held, n=1, name="held"), redis_conf=cluster_conf(cluster))
    m.start()
    # a paused pool's counts stand still while we read them
    m.cli("pause", "held")
    wait_for(lambda: m.pool("held").get("paused"), 30, what="held paused")
    push_many(rc, "{held}", [make_payload("ok") for _ in range(7)])
    push_many(rc, "{held2}", [make_payload("ok") for _ in range(5)])
    rc.zadd(PREFIX + "queues:{held2}:delayed", {"x%d" % i: 4102444800 for i in range(3)})

    def counts():
        qs = {q["name"]: q for q in m.pool("held").get("queues", [])}
        return qs if qs.get("{held}", {}).get("ready") == 7 and qs.get("{held2}", {}).get("delayed") == 3 else None
    qs = wait_for(counts, 30, what="status counts")
    assert qs["{held2}"]["ready"] == 5
    res = m.cli("status")
    assert "{held2}" in res.stdout
    # balancing sees the backlog on every slot: the auto pool grows past 1
    for q in QUEUES:
        push_many(rc, q, [make_payload("sleep:300") for _ in range(40)])
    wait_for(lambda: m.pool("w").get("target", 0) > 1, 60, what="the balancer to want more workers")


def test_restart_key_on_a_cluster(cluster, master_factory, tmp_path):
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log, n=2), redis_conf=cluster_conf(cluster))
    m.start()
    before = m.wait_children("w", 2, 30)
    key = PREFIX + "laravel_cache:illuminate:queue:restart"
    m.wait_log("w#", 30)  # (a balance pass has seen the key absent: the baseline)
    import time
    time.sleep(2.5)
    rc.set(key, "12345")
    wait_for(lambda: set(m.child_pids("w")).isdisjoint(before) and len(m.child_pids("w")) == 2, 60,
             what="workers replaced after queue:restart")
    # the fleet view (a script over two keys, tagged into one slot)
    res = m.cli("status", "--fleet", "--json")
    assert m.proc.pid in {x["pid"] for x in __import__("json").loads(res.stdout)["masters"]}
    assert not re.search(r"CROSSSLOT|MOVED|error", m.log()), m.log()[-3000:]


def test_check_connect_and_untagged_queue(cluster, tmp_path):
    conf = tmp_path / "q.conf"
    conf.write_text('redis = { default = { cluster = [%s]; }; };\n'
                    'pools = ( { name = "w";\n  queues = ["{emails}", "sms"]; handler = { type = "exec"; command = ["/bin/true"]; }; } );\n'
                    % cluster.addrs())
    res = subprocess.run([QPOOL, "check", "-q", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 78
    assert '%s:3: pool w: queue "sms" has no hash tag' % conf in res.stderr, res.stderr
    assert 'rename it to "{sms}"' in res.stderr
    conf.write_text(conf.read_text().replace('"sms"', '"{sms}"'))
    res = subprocess.run([QPOOL, "check", "--connect", "-q", "-c", str(conf)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "redis default (cluster" in res.stdout and ": ok" in res.stdout, res.stdout


def test_a_primary_killed_and_restarted_loses_no_job(cluster, master_factory, tmp_path):
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log), redis_conf=cluster_conf(cluster))
    jobs = {q: [make_payload("sleep:20") for _ in range(80)] for q in QUEUES}
    for q in QUEUES:
        push_many(rc, q, jobs[q])
    m.start()
    wait_for(lambda: len(read_fixture_log(log)) >= 40, 60, what="jobs running")
    victim = cluster.node_of(PREFIX + "queues:{emails}")
    victim.kill()
    # (within a second of connecting, an error is logged as "right after connecting")
    m.wait_log(r"redis default \(cluster.*(unavailable|right after connecting)", 30)
    victim.start()  # from its nodes.conf and AOF (appendfsync always), same port
    cluster.wait_ok()
    m.wait_log(r"redis default \(cluster.* is back", 60)
    rc = cluster.client()
    wait_for(lambda: empty(rc), 240, interval=0.5, what="every job done after the restart")
    ran = ran_ids(log)
    want = {p["id"] for q in QUEUES for p in jobs[q]}
    assert want <= set(ran), "lost: %d" % len(want - set(ran))
    assert m.proc.poll() is None
    assert m.pool("w")["crashes"] == 0


def test_a_slot_moved_to_another_node_is_followed(cluster, master_factory, tmp_path):
    """CLUSTER SETSLOT moves the (empty) slot of a queue to another primary
    while qpool runs: its commands get MOVED, follow it and keep working."""
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    queues = ["{moving}", "{emails}"]
    m.write_config(pool(log, queues, n=2), redis_conf=cluster_conf(cluster), qpool='  log_level = "debug";')
    m.start()
    push_many(rc, "{emails}", [make_payload("ok") for _ in range(5)])
    wait_for(lambda: len(read_fixture_log(log)) >= 5, 60, what="the first jobs")
    key = PREFIX + "queues:{moving}"
    src = cluster.node_of(key)
    dst = next(n for n in cluster.nodes if n.port != src.port)
    slot = src.client().execute_command("CLUSTER", "KEYSLOT", key)
    dst_id = dst.client().execute_command("CLUSTER", "MYID").decode()
    src_id = src.client().execute_command("CLUSTER", "MYID").decode()
    dst.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
    src.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
    for n in cluster.nodes:
        n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
    wait_for(lambda: cluster.node_of(key).port == dst.port, 30, what="the slot on its new node")
    rc = cluster.client()
    moved = [make_payload("ok") for _ in range(20)]
    push_many(rc, "{moving}", moved)
    assert dst.client().llen(key) > 0 or empty(rc, ["{moving}"])
    wait_for(lambda: empty(rc, queues), 120, interval=0.3, what="the moved queue emptied")
    ran = ran_ids(log)
    assert {p["id"] for p in moved} <= set(ran)
    assert m.proc.poll() is None
    # followed by redirection, not by reconnecting
    assert re.search(r"slot %d moved to 127\.0\.0\.1:%d" % (slot, dst.port), m.log()), m.log()[-3000:]
    assert "unavailable" not in m.log()


def test_jobs_dispatched_by_laravel_on_the_cluster(cluster, master_factory, tmp_path):
    """The fixture Laravel app dispatches to hash-tagged queues through its
    own cluster connection (phpredis RedisCluster, config "redis-cluster");
    qpool's native workers run them with the PHP adapter."""
    from conftest import LARAVEL_APP, ROOT, LaravelApp, laravel_env
    d = tmp_path / "laravel"
    d.mkdir()
    env = laravel_env(cluster.nodes[0].port, d)
    env.update({"LOG_CHANNEL": "null", "QUEUE_CONNECTION": "redis-cluster", "CACHE_DRIVER": "array",
                "REDIS_CLUSTER_NODES": ",".join("127.0.0.1:%d" % n.port for n in cluster.nodes)})
    app = LaravelApp(LARAVEL_APP, env, d / "database.sqlite", d / "markers.jsonl")
    app.artisan("migrate", "--force")
    m = master_factory()
    queues = ["{emails}", "{sms}"]
    adapter = ROOT / "php" / "qpool-handler.php"
    env_conf = app.env_conf().replace("environment = {", 'environment = { QUEUE_CONNECTION = "redis-cluster"; '
                                      'CACHE_DRIVER = "array"; REDIS_CLUSTER_NODES = "%s";' % env["REDIS_CLUSTER_NODES"])
    m.write_config('{ name = "app"; queues = ["{emails}", "{sms}"]; processes = 2; working_directory = "%s"; %s\n'
                   '  queue_connection = "redis-cluster";\n'
                   '  handler = { type = "pipe"; command = ["php", "%s", "%s"]; }; }'
                   % (LARAVEL_APP, env_conf, adapter, LARAVEL_APP), redis_conf=cluster_conf(cluster))
    def dispatch(queue, count, tag, delay=0):
        # Laravel 8's bulk() pipelines, which phpredis's RedisCluster lacks: one dispatch per job
        app.artisan("fixture:dispatch", "MarkerJob", "--connection=redis-cluster", "--mode=dispatch",
                    "--queue=" + queue, "--count=%d" % count, "--delay=%d" % delay, "--tag=" + tag)
    dispatch("{emails}", 20, "e")
    dispatch("{sms}", 10, "s")
    dispatch("{sms}", 1, "later", delay=1)
    rc = cluster.client()
    assert rc.llen(PREFIX + "queues:{emails}") == 20  # Laravel's own keys, in the queue's slot
    m.start()

    def done():
        ms = [x for x in app.read_markers() if x.get("job") == "MarkerJob" and "event" not in x]
        return ms if len(ms) >= 31 and empty(rc, queues) else None
    ms = wait_for(done, 180, interval=0.5, what="every Laravel job run")
    tags = collections.Counter(x["tag"] for x in ms)
    want = ["e-%d" % i for i in range(1, 21)] + ["s-%d" % i for i in range(1, 11)] + ["later"]
    assert tags == collections.Counter(want), tags
    assert app.failed_jobs() == []


def test_laravel_13_untagged_queue_on_a_cluster_runs_under_its_tag(cluster, master_factory, tmp_path):
    """Laravel 13.5+ keeps an untagged queue on a cluster connection under a
    hash tag of its own (RedisQueue::getQueueRedisKey(): queues:{default},
    queues:{default}:delayed, ...). The Laravel 13 fixture app (Debian sid's
    13.31, phpredis RedisCluster, in its root) dispatches to the queue
    "default", untagged; qpool, given the queue "{default}", runs those jobs
    with the adapter in the root (docs/configuration.md, Redis Cluster)."""
    from laravel_roots import Version, VersionApp, argv_conf, build_root
    version = Version("13", build_root("sid"))
    app = VersionApp(version, cluster.nodes[0].port, tmp_path)
    try:
        nodes = ",".join("127.0.0.1:%d" % n.port for n in cluster.nodes)
        app.env.update({"QUEUE_CONNECTION": "redis-cluster", "CACHE_DRIVER": "array", "REDIS_CLUSTER_NODES": nodes})
        app.artisan("migrate", "--force")
        n = 10
        # one dispatch per job (no pipelined bulk on RedisCluster), to the untagged name
        app.artisan("fixture:dispatch", "MarkerJob", "--connection=redis-cluster", "--mode=dispatch",
                    "--queue=default", "--count=%d" % n, "--tag=u")
        app.artisan("fixture:dispatch", "MarkerJob", "--connection=redis-cluster", "--mode=dispatch",
                    "--queue=default", "--delay=1", "--tag=later")
        rc = cluster.client()
        # Laravel's own writes: under the tag, nothing under the untagged keys
        assert rc.llen(PREFIX + "queues:{default}") == n
        assert rc.zcard(PREFIX + "queues:{default}:delayed") == 1
        assert rc.llen(PREFIX + "queues:{default}:notify") == n

        def untagged():
            return [k for nd in cluster.nodes for k in nd.client().keys(PREFIX + "queues:default*")]
        assert untagged() == []
        assert queue_state(rc, "{default}")["ready"] == n

        env = {k: app.env[k] for k in ["REDIS_PREFIX", "APP_STORAGE", "DB_CONNECTION", "DB_DATABASE",
                                       "MARKER_FILE", "MARKER_EVENTS", "LOG_CHANNEL", "QUEUE_CONNECTION",
                                       "CACHE_DRIVER", "REDIS_CLUSTER_NODES"]}
        m = master_factory()
        m.write_config('{ name = "app"; queues = ["{default}"]; processes = 2; queue_connection = "redis-cluster";\n'
                       '  environment = { %s };\n  handler = { type = "pipe"; command = %s; }; }'
                       % (" ".join('%s = "%s";' % kv for kv in env.items()), argv_conf(app.adapter_argv())),
                       redis_conf=cluster_conf(cluster))
        m.start()

        def runs():
            return [x for x in app.read_markers() if x.get("job") == "MarkerJob" and "event" not in x]

        def done():
            ms = runs()
            return ms if len(ms) >= n + 1 and empty(rc, ["{default}"]) else None
        try:
            ms = wait_for(done, 240, interval=0.5, what="every job Laravel 13 dispatched to default")
        except AssertionError:
            raise AssertionError("%d of %d jobs ran; {default}: %r; qpool log: %s"
                                 % (len(runs()), n + 1, queue_state(rc, "{default}"), m.log()[-3000:])) from None
        tags = collections.Counter(x["tag"] for x in ms)
        assert tags == collections.Counter(["u-%d" % i for i in range(1, n + 1)] + ["later"]), tags
        assert app.failed_jobs() == []
        assert untagged() == []
        # the queue name the adapter gives the job (JobProcessed events): qpool's, with the tag
        seen = {x.get("queue") for x in app.read_markers() if x.get("event") == "JobProcessed"}
        assert seen == {"{default}"}, seen
        assert m.pool("app")["crashes"] == 0
        assert not re.search(r"CROSSSLOT|MOVED| error ", m.log()), m.log()[-3000:]
    finally:
        app.remove()


@pytest.mark.skipif("asan" in str(__import__("conftest").BUILD), reason="valgrind does not run ASan binaries")
def test_cluster_master_workers_and_cli_are_valgrind_clean(cluster, master_factory, tmp_path):
    import os
    import signal
    import urllib.error
    import urllib.request
    from test_valgrind import VALGRIND
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    vlog = tmp_path / "valgrind.%p.log"
    port = free_port()
    m = master_factory()
    m.write_config(pool(log, n=2, tries=1), redis_conf=cluster_conf(cluster).replace("timeout = 3;", "timeout = 10;"),
                   qpool='balance_interval = 0.2; http = { listen = "127.0.0.1:%d"; read_without_token = "all"; };'
                   % port)
    m.logf = open(m.log_path, "ab")
    m.proc = subprocess.Popen(VALGRIND + ["--log-file=%s" % vlog, QPOOL, "run", "-c", str(m.conf)],
                              stdout=m.logf, stderr=subprocess.STDOUT, env=dict(os.environ), start_new_session=True)
    m.sid = m.proc.pid
    wait_for(lambda: m.listening(), 60, what="the master under valgrind")
    for q in QUEUES:
        push_many(rc, q, [make_payload("ok") for _ in range(20)] + [make_payload("fail")])
    rc.rpush(PREFIX + "queues:{sms}", "garbage")
    rc.rpush(PREFIX + "queues:{sms}:notify", 1)
    wait_for(lambda: empty(rc) and rc.zcard(PREFIX + "qpool:failed:{sms}") == 2, 180, interval=0.5,
             what="the jobs")
    uuid = rc.zrange(PREFIX + "qpool:failed:{emails}", 0, -1)[0].decode()
    for args in (["status", "-v"], ["status", "--fleet"], ["failed", "list"], ["failed", "show", uuid],
                 ["check", "--connect"], ["failed", "retry", uuid]):
        res = subprocess.run(VALGRIND + [QPOOL] + args + ["-c", str(m.conf)], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, (args, res.returncode, res.stdout, res.stderr)
        assert "definitely lost" not in res.stderr and "Invalid" not in res.stderr, (args, res.stderr)
    for path in ["/api/status", "/api/fleet", "/api/failed", "/api/failed/" + uuid]:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30).read()
        except urllib.error.HTTPError as e:
            assert e.code in (404, 503), (path, e.code)
    wait_for(lambda: empty(rc), 120, interval=0.5, what="the retried job")
    m.proc.send_signal(signal.SIGTERM)
    assert m.proc.wait(120) == 0
    problems = []
    for f in tmp_path.glob("valgrind.*.log"):
        text = f.read_text()
        if re.search(r"Invalid (read|write|free)|uninitialised|definitely lost: [1-9]|indirectly lost: [1-9]"
                     r"|ERROR SUMMARY: [1-9]", text):
            problems.append("%s:\n%s" % (f, text[:4000]))
    assert not problems, "\n\n".join(problems)
    assert len(list(tmp_path.glob("valgrind.*.log"))) >= 3, "the workers were not traced"


# ---------------------------------------------------------------- known defects (docs/operations.md)
# Regression tests for the three defects of the cluster layer listed under
# "Known defects" in docs/operations.md: each fails on 9cd48cf.


def test_a_dead_first_seed_is_skipped(cluster, master_factory, tmp_path):
    """Defect 1: a seed address nobody listens on, listed first, must only
    be skipped: the other seeds give the slot map and every queue is served
    (today every seed tried becomes a node the connection requires, and it
    stays unavailable)."""
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    dead = "127.0.0.1:%d" % free_port()
    m = master_factory()
    m.write_config(pool(log), redis_conf=cluster_conf(cluster, seeds=[dead] + [seed(n) for n in cluster.nodes]))
    jobs = {q: [make_payload("ok") for _ in range(10)] for q in QUEUES}
    for q in QUEUES:
        push_many(rc, q, jobs[q])
    check = m.cli("check", "--connect", "-q", check=False)
    m.start()
    try:
        wait_ran(log, {p["id"] for q in QUEUES for p in jobs[q]}, 60, "every job, with a dead first seed")
    except AssertionError as e:
        raise AssertionError("%s (and check --connect exited %d: %s)"
                             % (e, check.returncode, (check.stdout + check.stderr).strip())) from None
    wait_for(lambda: empty(rc), 60, interval=0.3, what="every queue empty")
    assert check.returncode == 0, check.stdout + check.stderr
    assert m.proc.poll() is None
    assert m.pool("w")["crashes"] == 0


def test_a_primary_failed_over_to_its_replica_keeps_jobs_flowing(cluster, master_factory, tmp_path):
    """Defect 1 again: the primary of {emails}, listed first among the seeds,
    is killed for good and its replica promoted; qpool must follow the new
    slot map and keep every queue served (today the dead seed stays a node
    the connection requires: unavailable until qpool is restarted)."""
    victim = cluster.node_of(PREFIX + "queues:{emails}")
    replica = cluster.add_replica(victim)
    others = [n for n in cluster.nodes if n is not victim]
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log), redis_conf=cluster_conf(cluster, seeds=[seed(n) for n in [victim] + others]))
    before = {q: [make_payload("sleep:20") for _ in range(60)] for q in QUEUES}
    for q in QUEUES:
        push_many(rc, q, before[q])
    m.start()
    wait_for(lambda: len(read_fixture_log(log)) >= 30, 60, what="jobs running")
    # every push (and the queue's state so far) is on the replica: what the
    # failover loses is at most some pops and acks, which come back or rerun
    assert victim.client().execute_command("WAIT", 1, 10000) >= 1
    victim.kill()  # not restarted
    wait_for(lambda: replica.role() == "master", 60, interval=0.2, what="the replica promoted")
    cluster.wait_ok(60)
    assert cluster.node_of(PREFIX + "queues:{emails}").port == replica.port
    rc = cluster.client()
    after = {q: [make_payload("ok") for _ in range(20)] for q in QUEUES}
    for q in QUEUES:
        push_many(rc, q, after[q])
    want = {p["id"] for jobs in (before, after) for q in QUEUES for p in jobs[q]}
    wait_ran(log, want, 120, "every job, before and after the failover")
    assert m.proc.poll() is None
    assert m.pool("w")["crashes"] == 0


@pytest.fixture
def lenient_cluster(tmp_path):
    """Three primaries that keep serving their own slots while another
    primary is unreachable (cluster-require-full-coverage no)."""
    c = Cluster(tmp_path / "cluster", cluster_ports(3), extra=["--cluster-require-full-coverage", "no"])
    try:
        c.start()
        yield c
    finally:
        for n in c.nodes:  # never leave a stopped node behind
            if n.alive():
                os.kill(n.proc.pid, signal.SIGCONT)
        c.stop()


def test_a_stalled_node_does_not_cost_a_job_another_node_popped(lenient_cluster, master_factory, tmp_path):
    """Defect 2: one worker, queues [high, low] on different nodes. J1 (low)
    runs; the node of low is stopped (SIGSTOP) and J2 pushed to high. When J1
    ends, J1's ack (to the stopped node) goes out with the pop (to high's
    node, which answers with J2). The stall must cost only the ack, which is
    written later: J2, reserved by the healthy node, runs at once, not after
    retry_after (today the whole connection is dropped, J2's pop reply with
    it, and J2 waits out retry_after in :reserved with an attempt counted;
    with tries = 1 it then fails unrun)."""
    c = lenient_cluster
    stalled, healthy = c.nodes[1], c.nodes[2]
    low = queue_on(c, stalled, "a")
    high = queue_on(c, healthy, "b")
    log = tmp_path / "fixture.log"
    m = master_factory()
    retry_after = 90
    m.write_config(pool(log, [high, low], n=1, tries=1, retry_after=retry_after, extra="prefetch = 1;"),
                   redis_conf=cluster_conf(c, timeout=2))
    m.start()
    m.wait_children("w", 1, 30)
    j1, j2 = make_payload("sleep:4000"), make_payload("ok")
    push(stalled.client(), low, j1)
    wait_for(lambda: j1["id"] in ran_ids(log), 60, interval=0.02, what="J1 started")
    os.kill(stalled.proc.pid, signal.SIGSTOP)
    try:
        push(healthy.client(), high, j2)
        # J1 ends within 4 s; its ack then waits for the stopped node (timeout = 2 s)
        time.sleep(10)
    finally:
        os.kill(stalled.proc.pid, signal.SIGCONT)
    # well before retry_after (90 s from the pop) could bring J2 back
    rc = c.client()
    try:
        wait_for(lambda: j2["id"] in ran_ids(log), 45, interval=0.2, what="J2")
    except AssertionError:
        raise AssertionError("J2, popped from the healthy node while the other was stopped, did not run within 45 s "
                             "(retry_after = %d); %s: %r" % (retry_after, high, queue_state(rc, high))) from None
    wait_for(lambda: empty(rc, [high, low]), 60, interval=0.3, what="both queues empty")
    assert rc.zcard(PREFIX + "qpool:failed:" + high) == 0
    assert rc.zcard(PREFIX + "qpool:failed:" + low) == 0
    ran = ran_ids(log)
    assert ran[j1["id"]] == 1 and ran[j2["id"]] == 1, ran
    assert m.proc.poll() is None
    assert m.pool("w")["crashes"] == 0


def test_a_node_that_lost_its_scripts_reloads_them(cluster, master_factory, tmp_path):
    """Defect 3: queues on the second and third seeds; their nodes lose
    their scripts (SCRIPT FLUSH). The NOSCRIPT must make qpool load the
    scripts there, and the queues keep being served (today SCRIPT LOAD,
    keyless, only goes to the first node: NOSCRIPT forever, the worker spins
    and nothing more runs)."""
    first = cluster.nodes[0]
    queues = [queue_on(cluster, cluster.nodes[1], "s"), queue_on(cluster, cluster.nodes[2], "t")]
    assert all(cluster.node_of(PREFIX + "queues:" + q).port != first.port for q in queues)
    rc = cluster.client()
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log, queues, n=1), redis_conf=cluster_conf(cluster))  # first seed: cluster.nodes[0]
    m.start()
    early = {q: [make_payload("ok") for _ in range(10)] for q in queues}
    for q in queues:
        push_many(rc, q, early[q])
    wait_ran(log, {p["id"] for q in queues for p in early[q]}, 60, "the jobs before the flush")
    for n in cluster.nodes[1:]:
        n.client().execute_command("SCRIPT", "FLUSH")
    late = {q: [make_payload("ok") for _ in range(10)] for q in queues}
    for q in queues:
        push_many(rc, q, late[q])
    try:
        wait_ran(log, {p["id"] for q in queues for p in late[q]}, 60, "the jobs after SCRIPT FLUSH")
    except AssertionError as e:
        noscript = {n.port: n.client().info("errorstats").get("errorstat_NOSCRIPT", "count=0")
                    for n in cluster.nodes}
        raise AssertionError("%s; NOSCRIPT errors by node: %r; %r" % (
            e, noscript, {q: queue_state(rc, q) for q in queues})) from None
    wait_for(lambda: empty(rc, queues), 60, interval=0.3, what="the queues empty")
    assert m.proc.poll() is None
    assert m.pool("w")["crashes"] == 0
    assert re.search(r"node 127\.0\.0\.1:\d+ had lost the scripts: loaded them again", m.log()), m.log()[-3000:]


def test_a_script_first_used_after_connecting_is_no_lost_script(cluster, master_factory, tmp_path):
    """Scripts registered at their first use (the fleet's goodbye at a
    graceful stop, the job history, failed retry) are loaded on a node that
    answers NOSCRIPT, without the "lost the scripts" line meant for SCRIPT
    FLUSH or a restart."""
    log = tmp_path / "fixture.log"
    m = master_factory()
    m.write_config(pool(log, n=1), redis_conf=cluster_conf(cluster))
    m.start()
    push_many(cluster.client(), "{emails}", [make_payload("ok")])
    wait_for(lambda: len(read_fixture_log(log)) >= 1, 60, what="the job")
    assert m.stop() == 0
    assert "lost the scripts" not in m.log(), m.log()[-3000:]
