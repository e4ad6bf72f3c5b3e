"""A Redis Cluster on loopback for the tests and the benchmark: N primaries
(`redis-server --cluster-enabled yes`), created with `redis-cli --cluster
create --cluster-replicas 0`, each with its nodes.conf and AOF in its own
directory so that a node killed with SIGKILL restarts with its slots and
data on the same port. add_replica() gives a primary a replica (CLUSTER MEET
and CLUSTER REPLICATE), for failovers; extra redis-server arguments (say
`--cluster-require-full-coverage no`) go to every node."""
import random
import subprocess
import time

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from conftest import port_free, quiet_port_window, stop_process


def cluster_ports(n):
    """n free ports whose cluster bus ports (port + 10000) are free too."""
    lo, hi = quiet_port_window()
    out = []
    while len(out) < n:
        p = random.randint(lo, hi)
        if p not in out and port_free(p) and port_free(p + 10000):
            out.append(p)
    return out


class ClusterNodeProc:
    def __init__(self, d, port, aof=True, extra=()):
        self.d = d
        self.port = port
        self.aof = aof
        self.extra = list(extra)
        self.proc = None
        d.mkdir(parents=True, exist_ok=True)

    def start(self):
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                "--cluster-config-file", str(self.d / "nodes.conf"), "--cluster-node-timeout", "2000",
                "--appendonly", "yes" if self.aof else "no", "--appendfsync", "always", "--save", "",
                "--dir", str(self.d),
                "--logfile", str(self.d / "redis.log")] + self.extra
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.d)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return self
            except redis.exceptions.RedisError:
                pass
            time.sleep(0.05)
        raise AssertionError("cluster node on %d did not start" % self.port)

    def client(self):
        return redis.Redis(port=self.port, socket_timeout=10)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def myid(self):
        return self.client().execute_command("CLUSTER", "MYID").decode()

    def role(self):
        return self.client().info("replication")["role"]

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)

    def stop(self):
        stop_process(self.proc)


class Cluster:
    def __init__(self, d, ports, aof=True, extra=()):
        self.d = d
        self.aof = aof
        self.extra = list(extra)
        self.nodes = [ClusterNodeProc(d / ("n%d" % p), p, aof, extra) for p in ports]
        self.replicas = []

    def start(self):
        for n in self.nodes:
            n.start()
        addrs = ["127.0.0.1:%d" % n.port for n in self.nodes]
        subprocess.run(["redis-cli", "--cluster", "create"] + addrs + ["--cluster-replicas", "0", "--cluster-yes"],
                       check=True, capture_output=True, timeout=60)
        self.wait_ok()
        return self

    def live(self):
        """The nodes running now (primaries and replicas; not those killed)."""
        return [n for n in self.nodes + self.replicas if n.alive()]

    def add_replica(self, primary, timeout=60):
        """Start a node and make it a replica of primary; returns it once its
        replication link is up and every live node says cluster_state:ok."""
        port = cluster_ports(1)[0]
        rep = ClusterNodeProc(self.d / ("n%d" % port), port, self.aof, self.extra)
        self.replicas.append(rep)
        rep.start()
        rep.client().execute_command("CLUSTER", "MEET", "127.0.0.1", primary.port)
        pid = primary.myid()
        deadline = time.monotonic() + timeout
        while True:  # CLUSTER REPLICATE needs the primary known by gossip first
            try:
                rep.client().execute_command("CLUSTER", "REPLICATE", pid)
                break
            except redis.exceptions.ResponseError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        while rep.client().info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise AssertionError("replica on %d never synced with %d" % (port, primary.port))
            time.sleep(0.1)
        self.wait_ok(timeout)
        return rep

    def wait_ok(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all(b"cluster_state:ok" in n.client().execute_command("CLUSTER", "INFO") for n in self.live()):
                    return
            except redis.exceptions.RedisError:
                pass
            time.sleep(0.1)
        raise AssertionError("cluster_state never became ok")

    def client(self):
        return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", n.port) for n in self.live()],
                            socket_timeout=10)

    def node_of(self, key):
        """The node owning key's slot (as that node says; only live nodes are asked)."""
        live = self.live()
        slot = live[0].client().execute_command("CLUSTER", "KEYSLOT", key)
        for n in live:
            for r in n.client().execute_command("CLUSTER", "SLOTS"):
                if r[0] <= slot <= r[1] and int(r[2][1]) == n.port:
                    return n
        raise AssertionError("no node owns slot %d" % slot)

    def addrs(self):
        return ", ".join('"127.0.0.1:%d"' % n.port for n in self.nodes)

    def stop(self):
        for n in self.nodes + self.replicas:
            n.stop()


@pytest.fixture
def cluster(tmp_path):
    """A 3-node Cluster of its own for one test (import it by name)."""
    c = Cluster(tmp_path / "cluster", cluster_ports(3))
    try:
        c.start()
        yield c
    finally:
        c.stop()
