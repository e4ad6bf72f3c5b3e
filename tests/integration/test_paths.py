"""Where a root master creates files: the pid file and the control socket
are never created, truncated, chowned or chmodded through a path another
user controls (review-2026-11 #5). Runs as root; `nobody` plants links."""
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import QPOOL, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
NOBODY = pwd.getpwnam("nobody")


def as_nobody(fn):
    """Run fn in a child process as nobody (as an unprivileged user would)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(st) == 0


@pytest.fixture
def tmp_path():
    """A root-owned 0711 directory under /tmp, so nobody can reach the
    directories the tests open to it (pytest's own are 0700)."""
    d = tempfile.mkdtemp(prefix="qpool-paths-", dir="/tmp")
    os.chmod(d, 0o711)
    import pathlib
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def victim(tmp_path):
    v = tmp_path / "victim"
    v.write_text("precious\n")
    os.chmod(v, 0o600)
    return v


def run_master(tmp_path, pid_file, socket, timeout=10):
    conf = tmp_path / "qpool.conf"
    conf.write_text('qpool = { pid_file = "%s"; control_socket = "%s"; control_socket_mode = "0666"; };\n'
                    'pools = ( { name = "p"; queues = ["q"]; processes = 0; command = ["/bin/true"]; } );\n'
                    % (pid_file, socket))
    p = subprocess.Popen([QPOOL, "run", "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        out, _ = p.communicate(timeout=30)
    return p.returncode, out.decode(errors="replace")


def planted_link(tmp_path, name, mode, entry):
    """A directory of that mode where `nobody` planted entry -> a root-owned victim file."""
    v = victim(tmp_path)
    d = tmp_path / name
    d.mkdir()
    os.chmod(d, mode)
    as_nobody(lambda: os.symlink(str(v), str(d / entry)))
    return v, d


def test_a_planted_pid_file_link_in_a_world_writable_directory_is_refused(tmp_path):
    # review #5, experiment 1: nobody plants qpool.pid -> a root 0600 file in
    # a 0777 directory; the master used to truncate it and write its pid
    v, d = planted_link(tmp_path, "piddir", 0o777, "qpool.pid")
    rc, out = run_master(tmp_path, d / "qpool.pid", tmp_path / "ctl.sock")
    assert rc == 1, out
    assert "can be written by other users" in out and str(d) in out
    assert v.read_text() == "precious\n"


def test_a_pid_file_owned_by_another_user_is_refused(tmp_path):
    d = tmp_path / "sticky"
    d.mkdir()
    os.chmod(d, 0o1777)
    as_nobody(lambda: open(str(d / "qpool.pid"), "w").write("1\n"))
    rc, out = run_master(tmp_path, d / "qpool.pid", tmp_path / "ctl.sock")
    assert rc == 1 and "owned by another user" in out, out


@pytest.mark.parametrize("which", ["pid_file", "control_socket"])
def test_a_link_planted_in_a_sticky_directory_is_never_followed(tmp_path, which):
    # /tmp-like: others may create entries but not replace ours. Review #5,
    # experiment 2: the socket path swapped for a link to a root file, which
    # became 0666; here the link is there before the start
    v, d = planted_link(tmp_path, "sticky", 0o1777, "link")
    pid, sock = tmp_path / "qpool.pid", tmp_path / "ctl.sock"
    rc, out = run_master(tmp_path, d / "link" if which == "pid_file" else pid,
                         d / "link" if which == "control_socket" else sock)
    assert rc == 1, out
    assert "symbolic link" in out
    assert v.read_text() == "precious\n"
    assert stat.S_IMODE(os.stat(v).st_mode) == 0o600


def test_a_socket_directory_owned_by_an_app_user_is_refused(tmp_path):
    # e.g. the app's storage/ directory, which the pool user owns
    d = tmp_path / "storage"
    d.mkdir()
    os.chown(d, NOBODY.pw_uid, NOBODY.pw_gid)
    rc, out = run_master(tmp_path, tmp_path / "qpool.pid", d / "ctl.sock")
    assert rc == 1, out
    assert "owned by another user" in out and str(d) in out


SWAP_AFTER_BIND = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
/* The attacker of review #5, experiment 2, made deterministic: the moment
 * the control socket is bound, its path becomes a link to a victim file. */
int bind(int fd, const struct sockaddr *sa, socklen_t len)
{
    int (*real)(int, const struct sockaddr *, socklen_t) =
        (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
    int rc = real(fd, sa, len);
    const char *want = getenv("SWAP_SOCKET"), *to = getenv("SWAP_VICTIM");
    if (rc == 0 && sa->sa_family == AF_UNIX && want && to &&
        strcmp(((const struct sockaddr_un *)sa)->sun_path, want) == 0) {
        char aside[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
        snprintf(aside, sizeof aside, "%s.aside", want);
        if (rename(want, aside) == 0 && symlink(to, want) == 0)
            fprintf(stderr, "swap-shim: %s is now a link to %s\n", want, to);
    }
    return rc;
}
"""


def test_a_socket_swapped_for_a_link_right_after_bind_is_never_chmodded_or_chowned(tmp_path):
    # Review #5, experiment 2: between bind() and the chmod()/chown() by path,
    # the socket is replaced by a link to a root file, which then became 0666
    # and changed owner. A shim does the swap the instant bind() returns; the
    # socket's mode and owner must never be set through its path.
    shim_c, shim = tmp_path / "swap.c", tmp_path / "swap.so"
    shim_c.write_text(SWAP_AFTER_BIND)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(shim), str(shim_c), "-ldl"], check=True)
    v = victim(tmp_path)
    sock = tmp_path / "ctl.sock"
    conf = tmp_path / "qpool.conf"
    conf.write_text('qpool = { pid_file = "%s"; control_socket = "%s"; control_socket_mode = "0666";\n'
                    '          control_user = "nobody"; control_group = "nogroup"; };\n'
                    'pools = ( { name = "p"; queues = ["q"]; processes = 0; command = ["/bin/true"]; } );\n'
                    % (tmp_path / "qpool.pid", sock))
    env = dict(os.environ, LD_PRELOAD=str(shim), SWAP_SOCKET=str(sock), SWAP_VICTIM=str(v),
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    p = subprocess.Popen([QPOOL, "run", "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: p.poll() is not None or os.path.exists(str(sock) + ".aside"), 10,
                 what="the master to bind its socket")
        time.sleep(0.5)  # whatever the master does by path after bind() has happened by now
    finally:
        if p.poll() is None:
            p.terminate()
        out = p.communicate(timeout=30)[0].decode(errors="replace")
    assert "swap-shim:" in out, "the shim never saw the bind: " + out
    st = os.stat(v)
    assert v.read_text() == "precious\n"
    assert stat.S_IMODE(st.st_mode) == 0o600, "the victim's mode was changed through the link: %o\n%s" % (
        stat.S_IMODE(st.st_mode), out)
    assert (st.st_uid, st.st_gid) == (0, 0), "the victim was chowned through the link\n" + out


def test_a_missing_socket_directory_is_0755_whatever_the_umask(tmp_path):
    # a UMask=0027 drop-in (docs/operations.md) made the directory the master creates 0750, and
    # control_user / control_group could no longer reach the socket in it
    sock = tmp_path / "ctl" / "ctl.sock"
    conf = tmp_path / "qpool.conf"
    conf.write_text('qpool = { pid_file = "%s"; control_socket = "%s"; };\n'
                    'pools = ( { name = "p"; queues = ["q"]; processes = 0; command = ["/bin/true"]; } );\n'
                    % (tmp_path / "qpool.pid", sock))
    p = subprocess.Popen([QPOOL, "run", "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         preexec_fn=lambda: os.umask(0o027))
    try:
        wait_for(lambda: sock.exists(), timeout=10)
        assert stat.S_IMODE(os.stat(str(sock.parent)).st_mode) == 0o755
    finally:
        p.terminate()
        p.communicate(timeout=30)
