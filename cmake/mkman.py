#!/usr/bin/python3
"""Generate qpool's man pages from the docs, at build time, so they never drift.

    mkman.py qpool8 QPOOL_BINARY docs/operations.md VERSION DATE OUT
    mkman.py qpoolconf5 docs/configuration.md VERSION DATE OUT

qpool(8) is `qpool help` and every `qpool help COMMAND` (run on the binary
just built), followed by docs/operations.md. qpool.conf(5) is
docs/configuration.md. The markdown is converted by md_to_man() below, which
handles the subset the docs use: headings, paragraphs, fenced code, bullet
and numbered lists, pipe tables (each row becomes a tagged paragraph, which
reads better on a terminal than a wide tbl table), `code`, **bold**,
*emphasis* and [links](...). Anything else is kept as text: never dropped.
Only the standard library is used (Debian's python3 is the build dependency).
"""
import re
import subprocess
import sys


def esc(text):
    """Escape plain text for roff (not the start of a line: see line())."""
    return text.replace("\\", "\\e")


def esc_literal(text):
    """A literal (code): also hyphens, so options copy and paste as ASCII '-'."""
    return esc(text).replace("-", "\\-")


def line(text):
    """One output line: a leading '.' or ''' would be read as a request."""
    text = text.rstrip()
    if text.startswith((".", "'")):
        return "\\&" + text
    return text


INLINE = re.compile(
    r"(?P<code>`+)(?P<codetext>.+?)(?P=code)"      # `code`, ``co`de``
    r"|\[(?P<ltext>[^\]]+)\]\((?P<lurl>[^)\s]*)\)"  # [text](url)
    r"|\*\*(?P<bold>.+?)\*\*"                      # **bold**
    r"|(?<![\w*])\*(?P<em>[^*\s][^*]*?)\*(?![\w*])"  # *emphasis*
    r"|(?<!\w)_(?P<em2>[^_\s][^_]*?)_(?!\w)"       # _emphasis_
    r"|<!--.*?-->"                                 # HTML comment: dropped
)


def inline(text, font="R"):
    """Markdown inline markup to roff fonts; font is the one to return to."""
    out = []
    pos = 0
    for m in INLINE.finditer(text):
        out.append(esc(text[pos:m.start()]))
        pos = m.end()
        if m.group("code"):
            out.append("\\fB%s\\f%s" % (esc_literal(m.group("codetext").strip()), font))
        elif m.group("ltext") is not None:
            out.append(inline(m.group("ltext"), font))
        elif m.group("bold") is not None:
            out.append("\\fB%s\\f%s" % (inline(m.group("bold"), "B"), font))
        elif m.group("em") is not None or m.group("em2") is not None:
            em = m.group("em") if m.group("em") is not None else m.group("em2")
            out.append("\\fI%s\\f%s" % (inline(em, "I"), font))
    out.append(esc(text[pos:]))
    return "".join(out)


def split_row(row):
    """Cells of a pipe-table row; '\\|' is a literal bar (inside code too)."""
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    cells = re.split(r"(?<!\\)\|", row)
    return [c.strip().replace("\\|", "|") for c in cells]


def strip_md(text):
    """A heading or a table header cell as plain text (no markup)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[`*]", "", text)


def table_to_man(header, rows):
    """A pipe table: each row is a tagged paragraph, the first cell the tag;
    the middle cells become 'Header: value.' and the last cell the text."""
    body = [split_row(r) for r in rows]
    out = []
    for cells in body:
        cells += [""] * (len(header) - len(cells))
        out.append(".TP")
        out.append(line(inline(cells[0])))
        parts = []
        for h, c in zip(header[1:-1], cells[1:-1]):
            if c and h:
                parts.append("%s: %s." % (inline(strip_md(h)[:1].upper() + strip_md(h)[1:]), inline(c)))
            elif c:
                parts.append("%s." % inline(c))
        if len(header) > 1 and cells[len(header) - 1]:
            parts.append(inline(cells[len(header) - 1]))
        out.append(line(" ".join(parts)) if parts else "\\&")
    out.append(".PP")
    return out


LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")


def md_to_man(md, skip_title=True):
    """Markdown (the docs' subset) to man(7) body text."""
    lines = md.splitlines()
    out = []
    i = 0
    n = len(lines)
    last_header = None
    while i < n:
        ln = lines[i]
        s = ln.strip()
        if not s or re.match(r"^<!--.*-->$", s):
            i += 1
            continue
        if s.startswith("```"):
            i += 1
            block = []
            while i < n and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            out += [".PP", ".RS 4", ".nf"]
            out += [line(esc_literal(b)) if b.strip() else "" for b in block]
            out += [".fi", ".RE", ".PP"]
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*$", s)
        if m:
            level = len(m.group(1))
            i += 1
            last_header = None
            if level == 1 and skip_title:
                continue
            title = strip_md(m.group(2)).replace('"', "'")
            out.append('%s "%s"' % (".SH" if level <= 2 else ".SS", esc(title)))
            continue
        if s.startswith("|"):
            if i + 1 < n and re.match(r"^\s*\|?\s*:?-{3,}", lines[i + 1]):
                last_header = split_row(ln)
                i += 2
            elif not last_header or len(split_row(ln)) != len(last_header):
                # rows that go on a table after a paragraph keep its header
                last_header = [""] * len(split_row(ln))
            # rows, also those that go on a table after a paragraph (same columns)
            rows = []
            while i < n and lines[i].strip().startswith("|"):
                rows.append(lines[i])
                i += 1
            out += table_to_man(last_header, rows)
            continue
        m = LIST_ITEM.match(ln)
        if m:
            # Items until a blank line followed by a non-item, non-indented line.
            while i < n:
                m = LIST_ITEM.match(lines[i])
                if not m:
                    break
                bullet = "\\(bu" if m.group(2) in "-*+" else m.group(2)
                text = [m.group(3)]
                i += 1
                while i < n and lines[i].strip() and not LIST_ITEM.match(lines[i]) \
                        and not lines[i].strip().startswith("```"):
                    text.append(lines[i].strip())
                    i += 1
                out.append(".IP %s 4" % bullet)
                out.append(line(inline(" ".join(text))))
                # a blank line inside a list: the list goes on if an item follows
                j = i
                while j < n and not lines[j].strip():
                    j += 1
                if j < n and LIST_ITEM.match(lines[j]):
                    i = j
            out.append(".PP")
            continue
        quote = s.startswith(">")
        para = []
        while i < n:
            t = lines[i].strip()
            if not t or t.startswith("```") or re.match(r"^#{1,6}\s", t) or LIST_ITEM.match(lines[i]) \
                    or (t.startswith("|") and i + 1 < n and re.match(r"^\s*\|?\s*:?-{3,}", lines[i + 1])):
                break
            para.append(re.sub(r"^>\s?", "", t) if quote else t)
            i += 1
        if quote:
            out += [".RS 4", line(inline(" ".join(para))), ".RE", ".PP"]
        else:
            out += [".PP", line(inline(" ".join(para)))]
    # no paragraph macro twice in a row, none at the end
    cleaned = []
    for o in out:
        if o == ".PP" and cleaned and cleaned[-1] in (".PP", ".SH", ".SS") or \
                o == ".PP" and cleaned and cleaned[-1].startswith((".SH ", ".SS ")):
            continue
        cleaned.append(o)
    while cleaned and cleaned[-1] == ".PP":
        cleaned.pop()
    return cleaned


def header(name, section, version, date, manual):
    return ['.\\" Generated by cmake/mkman.py from qpool\'s docs: do not edit.',
            '.TH "%s" "%s" "%s" "qpool %s" "%s"' % (name, section, date, version, manual),
            ".nh", ".ad l"]  # no hyphenation: key and option names stay whole


def help_text(binary, *args):
    r = subprocess.run([binary, "help", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    if r.returncode != 0 or not r.stdout.strip():
        sys.exit("mkman: `%s help %s` failed (%d): %s" % (binary, " ".join(args), r.returncode, r.stderr))
    return r.stdout


def verbatim(text):
    out = [".nf"]
    out += [line(esc_literal(t)) if t.strip() else "" for t in text.rstrip("\n").splitlines()]
    out.append(".fi")
    return out


def qpool8(binary, operations_md, version, date):
    top = help_text(binary)
    first = top.splitlines()[0]
    summary = first.split(" - ", 1)[1] if " - " in first else "Redis queue worker pools"
    commands = []
    for ln in top.splitlines():
        m = re.match(r"^  ([a-z][a-z0-9-]*)\s{2,}(.*)$", ln)
        if m:
            commands.append((m.group(1), m.group(2)))
    if not commands:
        sys.exit("mkman: no commands found in `qpool help`")
    out = header("QPOOL", "8", version, date, "System Administration")
    out += [".SH NAME", "qpool \\- " + esc(summary),
            ".SH SYNOPSIS", ".B qpool", ".I COMMAND", "[\\fIOPTIONS\\fR]",
            ".SH DESCRIPTION",
            "qpool runs pools of Laravel-compatible Redis queue workers under one master "
            "process, usually started by systemd as \\fBqpool.service\\fR. The master runs as "
            "root and starts each pool's children as that pool's \\fBuser\\fR.",
            ".PP",
            "The configuration is read from \\fB\\-c\\fR \\fIFILE\\fR, else \\fB$QPOOL_CONFIG\\fR, "
            "else \\fI/etc/qpool/qpool.conf\\fR; see \\fBqpool.conf\\fR(5).",
            ".SH COMMANDS"]
    for cmd, desc in commands:
        out += [".SS \"qpool %s\"" % cmd, line(inline(desc[:1].upper() + desc[1:] + ".")), ".PP"]
        out += verbatim(help_text(binary, cmd))
    out += md_to_man(open(operations_md, encoding="utf-8").read())
    out += [".SH FILES",
            ".TP", ".I /etc/qpool/qpool.conf", "The configuration (a conffile of the Debian package).",
            ".TP", ".I /usr/lib/systemd/system/qpool.service", "The systemd unit.",
            ".TP", ".I /run/qpool/qpool.pid", "The master's pid file (locked while it runs).",
            ".TP", ".I /run/qpool/qpool.sock", "The control socket.",
            ".TP", ".I /usr/share/qpool/php/", "The PHP adapter (\\fBqpool\\-handler.php\\fR).",
            ".TP", ".I /usr/share/doc/qpool/", "The full documentation (markdown).",
            ".SH SEE ALSO",
            ".BR qpool.conf (5),",
            ".BR systemctl (1),",
            ".BR journalctl (1)"]
    return out


def qpoolconf5(configuration_md, version, date):
    out = header("QPOOL.CONF", "5", version, date, "File Formats")
    out += [".SH NAME", "qpool.conf \\- configuration file of the qpool queue worker pools",
            ".SH SYNOPSIS", ".I /etc/qpool/qpool.conf",
            ".SH DESCRIPTION"]
    body = md_to_man(open(configuration_md, encoding="utf-8").read())
    # the doc's introduction (before its first section) is the description
    out += body
    out += [".SH FILES",
            ".TP", ".I /etc/qpool/qpool.conf", "The default configuration file.",
            ".TP", ".I /usr/share/doc/qpool/", "The full documentation (markdown).",
            ".SH SEE ALSO",
            ".BR qpool (8)"]
    return out


def main(argv):
    if len(argv) == 7 and argv[1] == "qpool8":
        page = qpool8(argv[2], argv[3], argv[4], argv[5])
    elif len(argv) == 6 and argv[1] == "qpoolconf5":
        page = qpoolconf5(argv[2], argv[3], argv[4])
    else:
        sys.exit(__doc__)
    out = argv[-1]
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(page) + "\n")
    import os
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main(sys.argv)
