"""The Debian package of the release the suite runs on (Debian 12 on the host,
Debian 13 in CI's trixie root, scripts/test-in-root): `scripts/package` builds
dist/qpool_<version>_<arch>.deb (debian/, debhelper), lintian reports no error,
its dependencies are computed by shlibs for this release's libraries, and it
installs with `apt-get install ./qpool_*.deb` into a fresh root of the same
release (mmdebstrap --variant=apt, plus man-db and redis-server). There `qpool
--version` and `qpool check` accept the installed /etc/qpool/qpool.conf, `man
qpool` shows the page, and the installed binary runs a job against the
root's redis-server. Then the conffile's life: kept when edited and
reinstalled, kept on remove, gone on purge.

Runs once: skipped in the ASan+UBSan run of scripts/test (the package is
built from the sources, not from the build under test). Needs root (chroot)
and the Debian mirror; the downloaded .debs are cached in the build directory
(QPOOL_BUILD/package-apt-cache). Under CI a missing tool fails instead of
skipping. See docs/operations.md, "Debian package".
"""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import BUILD, ROOT, quiet_port


def sanitized_build():
    cache = BUILD / "CMakeCache.txt"
    return cache.is_file() and re.search(r"^QPOOL_SANITIZE:BOOL=ON$", cache.read_text(), re.M) is not None


pytestmark = pytest.mark.skipif(
    sanitized_build(), reason="the package test runs once, in the normal build's run (this is the ASan build)")

VERSION = re.search(r"^project\(qpool VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text(), re.M).group(1)
ARCH = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE,
                      universal_newlines=True).stdout.strip()
DEB_NAME = "qpool_%s_%s.deb" % (VERSION, ARCH)
TIMES = {}


def os_release():
    out = {}
    with open("/etc/os-release") as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            out[k] = v.strip('"')
    return out


DIST = os_release().get("VERSION_CODENAME", "bookworm")
UNIT_DIR = "lib/systemd/system" if DIST == "bookworm" else "usr/lib/systemd/system"


def need(ok, what):
    if not ok:
        msg = "package test needs %s" % what
        if os.environ.get("CI"):
            pytest.fail(msg + " (scripts/deps installs it; CI runs as root)")
        pytest.skip(msg)


def run(cmd, timeout=300, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       universal_newlines=True, timeout=timeout, **kw)
    if check:
        assert r.returncode == 0, "%s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stdout[-4000:])
    return r


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    need(os.geteuid() == 0, "root")
    for tool in ("dpkg-buildpackage", "dh", "lintian", "mmdebstrap"):
        need(shutil.which(tool), tool)
    dist = tmp_path_factory.mktemp("dist")
    t0 = time.monotonic()
    run([str(ROOT / "scripts" / "package")], timeout=1200,
        env=dict(os.environ, QPOOL_DIST=str(dist), QPOOL_LINTIAN="0"))
    TIMES["package"] = time.monotonic() - t0
    path = dist / DEB_NAME
    assert path.is_file(), sorted(os.listdir(dist))
    return path


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    """A fresh root of this release (apt variant + man-db and redis-server) with
    the .deb installed by `apt-get install ./qpool_*.deb`, which fetches its
    dependencies."""
    target = tmp_path_factory.mktemp("chroot") / DIST
    cache = BUILD / "package-apt-cache"
    cache.mkdir(exist_ok=True)
    # the machine's own Debian sources (its mirror); else mmdebstrap's defaults
    sources = [s for s in ["/etc/apt/sources.list.d/debian.sources"] if os.path.isfile(s)]
    cmd = ["mmdebstrap", "--mode=root", "--variant=apt", "--include=man-db,redis-server",
           "--skip=essential/unlink",
           "--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/",
           "--setup-hook=sync-in %s /var/cache/apt/archives/" % cache,
           "--customize-hook=copy-in %s /tmp" % deb,
           "--customize-hook=chroot \"$1\" env DEBIAN_FRONTEND=noninteractive "
           "apt-get install -y --no-install-recommends /tmp/%s" % DEB_NAME,
           "--customize-hook=sync-out /var/cache/apt/archives %s" % cache,
           DIST, str(target)] + sources
    t0 = time.monotonic()
    try:
        r = run(cmd, timeout=900)
        TIMES["mmdebstrap"] = time.monotonic() - t0
        assert "Setting up qpool (%s)" % VERSION in r.stdout, r.stdout[-4000:]
        yield target
    finally:
        # mmdebstrap unmounts what it mounted; never delete through a mount
        mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], stdout=subprocess.PIPE,
                                universal_newlines=True).stdout.split()
        assert not [m for m in mounts if m.startswith(str(target))], "mounts left under %s" % target
        shutil.rmtree(target, ignore_errors=True)


def in_root(root, *cmd, check=True, env=None):
    e = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root"}
    e.update(env or {})
    return run(["chroot", str(root)] + list(cmd), check=check, env=e)


def test_lintian_reports_no_errors(deb):
    t0 = time.monotonic()
    r = run(["lintian", "--pedantic", "--display-info", "--display-experimental", str(deb)], check=False)
    TIMES["lintian"] = time.monotonic() - t0
    tags = [ln for ln in r.stdout.splitlines() if re.match(r"^[EWIPX]: ", ln)]
    print("lintian:\n" + "\n".join(tags))
    errors = [t for t in tags if t.startswith("E: ")]
    assert not errors, "lintian errors:\n" + r.stdout
    assert r.returncode == 0, r.stdout


def test_deb_metadata_and_contents(deb):
    fields = run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture", "Depends"]).stdout
    assert "Package: qpool\n" in fields
    assert "Version: %s\n" % VERSION in fields
    depends = re.search(r"^Depends: (.*)$", fields, re.M).group(1)
    names = {d.strip().split()[0] for d in depends.split(",")}
    # computed by dh_shlibdeps from the libraries of this release (bookworm:
    # libhiredis0.14, libmicrohttpd12; trixie: libhiredis1.1.0,
    # libmicrohttpd12t64), never written by hand in debian/control
    for lib in ("libc6", "libhiredis", "libconfig", "libcjson", "libbsd", "libmicrohttpd", "libssl"):
        assert [n for n in names if n == lib or re.match(re.escape(lib) + r"[0-9]", n)], (lib, depends)
    hiredis = [n for n in names if n.startswith("libhiredis")]
    assert hiredis == [{"bookworm": "libhiredis0.14"}.get(DIST, "libhiredis1.1.0")], depends
    control = (ROOT / "debian" / "control").read_text()
    assert "Depends: ${shlibs:Depends}, ${misc:Depends}" in control and "libhiredis0" not in control
    files = set(re.findall(r" \./(\S+)$", run(["dpkg-deb", "-c", str(deb)]).stdout, re.M))
    for f in ["usr/bin/qpool", "etc/qpool/qpool.conf", UNIT_DIR + "/qpool.service",
              "usr/share/qpool/php/qpool-handler.php", "usr/share/doc/qpool/operations.md",
              "usr/share/doc/qpool/configuration.md", "usr/share/doc/qpool/copyright",
              "usr/share/doc/qpool/changelog.gz",
              "usr/share/man/man8/qpool.8.gz", "usr/share/man/man5/qpool.conf.5.gz"]:
        assert f in files, "%s not in the package: %s" % (f, sorted(files))
    assert run(["dpkg-deb", "-I", str(deb), "conffiles"]).stdout.split() == ["/etc/qpool/qpool.conf"]
    # m7: a pool's environment may hold secrets, so not world-readable
    conf = re.search(r"^(\S+) (\S+) .* \./etc/qpool/qpool\.conf$", run(["dpkg-deb", "-c", str(deb)]).stdout, re.M)
    assert conf.group(1, 2) == ("-rw-r-----", "root/root"), conf.group(0)


def test_installed_qpool_runs_and_checks_the_installed_config(root):
    assert in_root(root, "qpool", "--version").stdout.splitlines()[0] == "qpool %s" % VERSION
    status = in_root(root, "dpkg-query", "-W", "-f", "${Status} ${Version}", "qpool").stdout
    assert status == "install ok installed %s" % VERSION
    r = in_root(root, "qpool", "check", "-c", "/etc/qpool/qpool.conf")
    assert "pools" in r.stdout
    in_root(root, "qpool", "check", "--quiet")  # the default path is /etc/qpool/qpool.conf
    # the check is a real one: a wrong key is refused with exit 78
    (root / "etc/qpool/bad.conf").write_text('qpool = { max_wrokers = 4; };\n')
    bad = in_root(root, "qpool", "check", "-c", "/etc/qpool/bad.conf", check=False)
    assert bad.returncode == 78 and "max_wrokers" in bad.stdout, bad.stdout
    (root / "etc/qpool/bad.conf").unlink()


JOB_TEST = r"""
set -eu
redis-server --port $PORT --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile /tmp/jt/redis.pid --logfile /tmp/jt/redis.log
# --daemonize returns before the server listens: wait until it answers
i=0
until redis-cli -p $PORT ping >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 100 ] || { cat /tmp/jt/redis.log; exit 1; }; sleep 0.1
done
cat > /tmp/jt/qpool.conf <<CONF
qpool = { pid_file = "/tmp/jt/qpool.pid"; control_socket = "/tmp/jt/qpool.sock"; };
redis = { default = { port = $PORT; }; };
pools = ( { name = "work"; queues = ["default"]; processes = 1; user = "nobody";
            handler = { type = "exec"; command = ["/bin/sh", "-c", "cat > /tmp/jt/out/\$QPOOL_JOB_UUID"]; }; } );
CONF
qpool check -c /tmp/jt/qpool.conf --connect
qpool run -c /tmp/jt/qpool.conf > /tmp/jt/qpool.log 2>&1 &
qpool push -c /tmp/jt/qpool.conf default --job 'App\Jobs\FromThePackage' --data '{"ok":true}'
i=0
while [ -z "$(ls /tmp/jt/out)" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
qpool terminate --wait -c /tmp/jt/qpool.conf
kill "$(cat /tmp/jt/redis.pid)"
cat /tmp/jt/out/*
"""


def test_the_installed_binary_runs_a_job(root):
    """qpool from the package, the root's redis-server: a pushed job reaches an
    exec handler running as nobody, then a graceful stop. /proc is mounted for
    it in a private mount namespace, so it goes away with the run."""
    jt = root / "tmp" / "jt"
    (jt / "out").mkdir(parents=True)
    os.chmod(jt / "out", 0o777)
    (jt / "job.sh").write_text(JOB_TEST)
    port = quiet_port()  # below the ephemeral range: no outgoing connection takes it first
    r = run(["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c",
             'mount -t proc proc "$1/proc" && exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin '
             'PORT=%d LC_ALL=C.UTF-8 sh /tmp/jt/job.sh' % port, "sh", str(root)], timeout=120, check=False)
    log = (jt / "qpool.log").read_text() if (jt / "qpool.log").exists() else ""
    assert r.returncode == 0, r.stdout + "\n--- qpool.log:\n" + log
    outs = list((jt / "out").iterdir())
    assert len(outs) == 1, (outs, r.stdout, log)
    payload = json.loads(outs[0].read_text())
    assert payload["displayName"] == "App\\Jobs\\FromThePackage" and payload["uuid"] == outs[0].name
    assert os.stat(outs[0]).st_uid == 65534  # the pool's user
    shutil.rmtree(jt)


def test_man_shows_the_pages(root):
    env = {"MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80"}
    assert in_root(root, "man", "-w", "qpool").stdout.strip() == "/usr/share/man/man8/qpool.8.gz"
    page = in_root(root, "man", "qpool", env=env).stdout
    assert page.startswith("QPOOL(8)") and "qpool run" in page and "Signals to the master" in page, page[:500]
    conf = in_root(root, "man", "5", "qpool.conf", env=env).stdout
    assert conf.startswith("QPOOL.CONF(5)") and "max_processes" in conf and "password_env" in conf, conf[:500]


def test_unit_installed_not_enabled_and_no_system_user(root):
    unit = (root / UNIT_DIR / "qpool.service").read_text()
    assert "ExecStart=/usr/bin/qpool run -c /etc/qpool/qpool.conf" in unit
    assert not (root / "etc/systemd/system/multi-user.target.wants/qpool.service").exists()
    # the master runs as root (it starts each pool as its own user): no qpool user
    assert not re.search(r"^qpool:", (root / "etc/passwd").read_text(), re.M)
    postinst = (root / "var/lib/dpkg/info/qpool.postinst").read_text()
    assert "deb-systemd-helper" in postinst and "deb-systemd-invoke" in postinst


def test_conffile_kept_on_reinstall_and_remove_gone_on_purge(root, deb):
    conf = root / "etc/qpool/qpool.conf"
    assert in_root(root, "dpkg-query", "-W", "-f", "${Conffiles}", "qpool").stdout.split()[0] == "/etc/qpool/qpool.conf"
    conf.write_text(conf.read_text() + "# edited by the operator\n")
    shutil.copy(deb, root / "tmp" / DEB_NAME)
    in_root(root, "dpkg", "-i", "--force-confold", "/tmp/" + DEB_NAME)
    assert conf.read_text().endswith("# edited by the operator\n")
    in_root(root, "dpkg", "--remove", "qpool")
    assert not (root / "usr/bin/qpool").exists()
    assert conf.read_text().endswith("# edited by the operator\n")  # a conffile outlives remove
    in_root(root, "dpkg", "--purge", "qpool")
    assert not (root / "etc/qpool").exists()
    print("times (s): " + ", ".join("%s %.1f" % kv for kv in TIMES.items()))
