"""The man pages the build generates (cmake/man.cmake, cmake/mkman.py) carry
the current docs and CLI: every config key documented in
docs/configuration.md is in qpool.conf(5), every command and option of
`qpool help` and every section of docs/operations.md is in qpool(8), and man
renders both without a warning. Rendered with the real man(1) (man-db).
"""
import os
import re
import subprocess

import pytest

from conftest import BUILD, QPOOL, ROOT

MAN8 = BUILD / "man" / "qpool.8"
MAN5 = BUILD / "man" / "qpool.conf.5"


def render(page):
    """The page as man shows it on an 80-column terminal, and man's warnings."""
    env = dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", str(page)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # man's formatting for a terminal: bold by overstrike is off with MANPAGER=cat
    # when not a tty, but strip backspaces anyway
    return re.sub(r".\x08", "", r.stdout), r.stderr


def words(text):
    """Whole tokens of a rendered page (keys like min_processes, options like --json)."""
    return set(re.findall(r"[A-Za-z0-9_.:-]+", text)) | set(re.findall(r"--?[A-Za-z0-9][A-Za-z0-9-]*", text))


def plain(md):
    """A markdown heading as the page shows it (cmake/mkman.py's strip_md)."""
    return re.sub(r"[`*]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", md)).replace('"', "'").strip()


def flat(text):
    return " ".join(text.split())


def documented_keys():
    """The first-column names of docs/configuration.md's key tables, and the
    rows that continue such a table after a paragraph."""
    keys = set()
    in_key_table = False
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        s = line.strip()
        if s.startswith("|"):
            cells = [c.strip() for c in s.strip("|").split("|")]
            if cells[0] == "key":
                in_key_table = True
                continue
            if in_key_table:
                m = re.fullmatch(r"`([A-Za-z_][A-Za-z0-9_.]*)`", cells[0])
                if m:
                    keys.add(m.group(1))
        elif s.startswith("#"):
            in_key_table = False
    return keys


def test_pages_are_built():
    for page in (MAN8, MAN5):
        assert page.is_file(), "%s missing: the build generates it (cmake/man.cmake)" % page
        assert page.stat().st_mtime >= (ROOT / "cmake" / "mkman.py").stat().st_mtime


def test_qpool_conf_5_has_every_documented_key():
    keys = documented_keys()
    # the doc's tables hold the master's, alerts', http's, connections' and pools' keys
    assert {"pid_file", "max_workers", "listen", "token_file", "password_env", "queues",
            "max_processes", "prefetch", "user", "nice"} <= keys, keys
    text, warnings = render(MAN5)
    assert warnings == ""
    assert text.startswith("QPOOL.CONF(5)")
    missing = sorted(k for k in keys if k not in words(text))
    assert not missing, "config keys in docs/configuration.md but not in qpool.conf(5): %s" % missing


def test_qpool_conf_5_follows_the_doc_text():
    """Not just the keys: the doc's sections, and its prose, end up in the page."""
    text, _ = render(MAN5)
    md = (ROOT / "docs" / "configuration.md").read_text()
    for heading in re.findall(r"^#{2,6} (.+)$", md, re.M):
        assert flat(plain(heading)) in flat(text), \
            "section %r of configuration.md missing from qpool.conf(5)" % heading
    assert "unknown keys are errors" in flat(text)


def help_text(*args):
    r = subprocess.run([QPOOL, "help", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_qpool_8_has_every_command_and_option():
    commands = re.findall(r"^  ([a-z][a-z0-9-]*)\s{2,}", help_text(), re.M)
    assert {"run", "check", "status", "pause", "failed"} <= set(commands)
    text, warnings = render(MAN8)
    assert warnings == ""
    assert text.startswith("QPOOL(8)")
    have = words(text)
    sections = set(re.findall(r"^   qpool ([a-z-]+)$", text, re.M))
    assert set(commands) <= sections, "commands without a section in qpool(8): %s" % (set(commands) - sections)
    for cmd in commands:
        options = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text(cmd)))
        missing = sorted(o for o in options if o not in have)
        assert not missing, "options of `qpool %s` not in qpool(8): %s" % (cmd, missing)


def test_qpool_8_has_operations_md_and_the_version():
    text, _ = render(MAN8)
    md = (ROOT / "docs" / "operations.md").read_text()
    for heading in re.findall(r"^#{2,6} (.+)$", md, re.M):
        assert flat(plain(heading)) in flat(text), "section %r of operations.md missing from qpool(8)" % heading
    version = subprocess.run([QPOOL, "--version"], stdout=subprocess.PIPE, universal_newlines=True,
                             timeout=30).stdout.splitlines()[0].split()[-1]
    # the footer names the version: "qpool 0.2.0   DATE   QPOOL(8)"
    assert re.search(r"^qpool %s\s" % re.escape(version), text.rstrip().splitlines()[-1]), text[-200:]


@pytest.mark.parametrize("page", [MAN8, MAN5], ids=["qpool.8", "qpool.conf.5"])
def test_pages_have_no_roff_mistakes(page):
    """No markdown left over, no request swallowed by a line starting with a dot."""
    text, _ = render(page)
    src = page.read_text()
    assert "```" not in text and "**" not in text
    assert not re.search(r"^\|", text, re.M), "a table row was not converted"
    for ln in src.splitlines():
        if ln.startswith("."):
            assert ln.startswith('.\\"') or \
                re.match(r"^\.(TH|SH|SS|PP|TP|IP|RS|RE|nf|fi|nh|ad|B|I|BR)\b", ln), ln
