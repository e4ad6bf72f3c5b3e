"""Issue 32: GET /api/batches takes the list filters where they apply: q
(text in the name or id), status (pending, finished, failed, cancelled),
since/until on created_at; filtered over the master's bounded snapshot.
The fixture Laravel app, real Redis and processes. No timing is
asserted."""
import json
import subprocess

from conftest import QPOOL, free_port, wait_for
from test_batches import api, batch, row, start


def ids(port, **args):
    path = "/api/batches?" + "&".join("%s=%s" % kv for kv in args.items())
    status, rep = api(port, path)
    assert status == 200, rep
    return {b["id"] for b in rep["batches"]}


def test_the_batches_list_is_filtered_on_the_server(master, laravel_app, tmp_path):
    port = free_port()
    bad, fine = start(master, laravel_app, tmp_path, port, ["--count=3", "--fail=1", "--name=cancel me"],
                      ["--count=1", "--name=Fine Export"])
    wait_for(lambda: (lambda x: x and x["cancelled_at"])(batch(port, bad)), 90, what="the batch cancelled")
    wait_for(lambda: row(laravel_app, fine)[0] == 0, 90, what="the other batch done")
    wait_for(lambda: (lambda x: x and x["finished_at"])(batch(port, fine)), 90, what="the other finished")
    assert ids(port) == {bad, fine}
    assert ids(port, status="cancelled") == {bad}
    assert ids(port, status="failed") == {bad}
    assert ids(port, status="finished") == {fine}
    assert ids(port, status="pending") == set()
    assert ids(port, q="export") == {fine}
    assert ids(port, q="CANCEL", status="cancelled") == {bad}
    assert ids(port, since="1h") == {bad, fine}
    assert ids(port, until="2001-01-01") == set()
    status, rep = api(port, "/api/batches?q=export")
    assert rep["unfiltered"] == 2
    assert api(port, "/api/batches?status=running")[0] == 400
    assert api(port, "/api/batches?since=soon")[0] == 400
    # `qpool batches` takes the same filters (text and --json)
    def cli_ids(*args):
        rep = json.loads(master.cli("batches", "--json", *args).stdout)
        return {b["id"] for b in rep["batches"]}
    assert cli_ids() == {bad, fine}
    assert cli_ids("--status", "cancelled") == {bad}
    assert cli_ids("--q", "export") == {fine}
    assert cli_ids("--q", "CANCEL", "--status", "failed", "--since", "1h") == {bad}
    assert cli_ids("--until", "2001-01-01") == set()
    text = master.cli("batches", "--status", "finished").stdout
    assert fine in text and bad not in text
    res = master.cli("batches", "--status", "running", check=False)
    assert res.returncode == 64 and "--status" in res.stderr


def test_the_control_commands_keep_their_1x_abbreviations(tmp_path):
    """Review of g32c, SHOULD 5: getopt_long takes a unique prefix, and the
    batch filters in every command's table made --s (--socket) and --t
    (--timeout) ambiguous and --q the text filter, not --queue. They are
    batches' alone now. No master: "not running" (2) is what a parsed command
    line gives, a usage error is 64."""
    sock = str(tmp_path / "none.sock")
    for args in (["status", "--s", sock], ["terminate", "--wait", "--t", "5", "--s", sock],
                 ["pause", "--q", "emails", "--s", sock], ["continue", "--q", "emails", "--soc", sock],
                 ["batches", "--q", "x", "--socket", sock]):
        res = subprocess.run([QPOOL] + args, capture_output=True, text=True, timeout=30)
        assert res.returncode == 2, (args, res.returncode, res.stderr)
        assert "not running" in res.stderr, (args, res.stderr)
