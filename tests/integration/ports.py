"""Ports for the tests' servers (no pytest needed: bench/ and sqlservers.py
import it too). free_port(): any free port, from the kernel's ephemeral
range, for a server that binds once. quiet_port(): a port for a server
that goes down and up again, or a cluster node (see quiet_port_window)."""
import os
import random
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quiet_port_window():
    """Where a port for a server that goes down and up again, or for a
    cluster node, is drawn: 10000 to 19999 (lower when the kernel's
    ephemeral range, ip_local_port_range, starts below 30000), where no
    outgoing connection can take it while the server is down or between our
    check and its bind (both seen in parallel runs). A cluster node's bus
    port (port + 10000) then lies in 20000 to 29999, which no other server
    of the tests draws from: a MariaDB drawn by one xdist worker can no
    longer take the bus port of another worker's cluster node. Each xdist
    worker draws from its own slice, so parallel tests never draw the same
    port."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    lo, hi = 10000, min(19999, ephemeral - 10000 - 1)
    if hi - lo < 1000:  # an unusual range: draw where we can, checked
        return 20000, 50000
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), index + 1)
    size = (hi - lo) // count
    return lo + index * size, lo + (index + 1) * size - 1


def port_free(port, reuse=False):
    """Whether a port on 127.0.0.1 can be bound now (reuse: as a server that
    sets SO_REUSEADDR binds it, so a connection of its last run in
    TIME_WAIT does not hold it)."""
    with socket.socket() as s:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def quiet_port(reuse=False):
    """A free port from this xdist worker's slice of quiet_port_window()
    (reuse: free for a server that sets SO_REUSEADDR)."""
    lo, hi = quiet_port_window()
    while True:
        p = random.randint(lo, hi)
        if port_free(p, reuse):
            return p
