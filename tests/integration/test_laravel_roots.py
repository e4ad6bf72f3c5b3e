"""The Laravel roots' shared /proc (laravel_roots.py): the test files that
use one root run side by side in xdist workers, and one file's teardown must
not unmount /proc under another's running test (a zygote that cannot read
/proc/self/smaps keeps its boot pages: test_preload_memory failed so)."""
import os
import subprocess

import pytest

from laravel_roots import Version


def mounted(path):
    return subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0


@pytest.fixture
def fake_root(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting /proc needs root")
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    yield root
    Version._umount_all(root / "proc")


def test_the_last_holder_out_unmounts(fake_root):
    first, second = Version("8", fake_root), Version("8", fake_root)
    first.mount_proc()
    second.mount_proc()
    assert mounted(fake_root / "proc")
    first.umount_proc()
    assert mounted(fake_root / "proc"), "the first holder out unmounted /proc under the second"
    assert (fake_root / "proc" / "self" / "smaps").exists()
    second.umount_proc()
    assert not mounted(fake_root / "proc")


def test_a_dead_holder_does_not_count(fake_root):
    dead = subprocess.Popen(["true"])
    dead.wait()
    (fake_root.parent / "root.proc-holders").write_text("%d:gone\n" % dead.pid)
    v = Version("8", fake_root)
    v.mount_proc()
    assert mounted(fake_root / "proc")
    v.umount_proc()
    assert not mounted(fake_root / "proc"), "a holder whose process is gone kept /proc mounted"
