"""The fleet-wide limits' tests (issue 33) share one kind of handler: an
exec handler (a shell script) that appends a start line ("S class uuid
attempts worker-pid ns") and an end line ("E ...") to a log, so that the
invariants are read from the handlers' own records, never from timing.

  handler(tmp, cases)  the script and its log; cases: the shell `case` arms
                       on "$QPOOL_JOB_NAME $QPOOL_JOB_UUID" that say how
                       long each job sleeps
  records(log)         {uuid: {"S": [...], "E": [...]}}, (class, attempts,
                       pid, ns) each
  max_overlap(recs, c) the most jobs of class c running at once"""

HANDLER = """#!/bin/sh
cat > /dev/null
echo "S $QPOOL_JOB_NAME $QPOOL_JOB_UUID $QPOOL_ATTEMPTS $PPID $(date +%%s%%N)" >> %(log)s
case "$QPOOL_JOB_NAME $QPOOL_JOB_UUID" in
%(cases)s
esac
echo "E $QPOOL_JOB_NAME $QPOOL_JOB_UUID $QPOOL_ATTEMPTS $PPID $(date +%%s%%N)" >> %(log)s
"""

# *Long: 120 s, *Quick: none, any other class 0.3 s
CASES = """  *"Long "*) sleep 120 ;;
  *"Quick "*) ;;
  *) sleep 0.3 ;;"""


def handler(tmp, cases=CASES):
    log = tmp / "jobs.log"
    log.touch()
    path = tmp / "handler.sh"
    path.write_text(HANDLER % {"log": log, "cases": cases})
    path.chmod(0o755)
    return path, log


def records(log):
    """{uuid: {"S": [...], "E": [...]}} with (class, attempts, pid, ns) each."""
    out = {}
    for line in log.read_text().splitlines():
        f = line.split()
        if len(f) != 6:
            continue
        out.setdefault(f[2], {"S": [], "E": []})[f[0]].append((f[1], int(f[3]), int(f[4]), int(f[5])))
    return out


def max_overlap(recs, cls):
    events = []
    for r in recs.values():
        for (c, _, _, s), (_, _, _, e) in zip(r["S"], r["E"]):
            if c == cls:
                events += [(s, 1), (e, -1)]
    n = best = 0
    for _, d in sorted(events, key=lambda x: (x[0], x[1])):  # an end before a start at the same ns
        n += d
        best = max(best, n)
    return best
