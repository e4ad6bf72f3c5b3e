"""Pause by class, its bounds (review leftovers of issue 32 item 4): at most
CLASSPAUSE_MAX (100) classes paused at once, a pause past it refused and
nothing written; a class in an HTTP path is percent-decoded once (it was
decoded twice: App%255CJobs... paused App\\Jobs...)."""
import json

from conftest import make_payload, push_many, wait_for
from test_class_pause import PAUSED_KEY, TOKEN, handler, http, start, start_with_http, started

MAX = 100


def test_at_most_100_classes_paused_at_once(master_factory, redis_server, tmp_path):
    path, log = handler(tmp_path)
    rc = redis_server.client()
    a = start(master_factory, redis_server, "a", path)
    rc.hset(PAUSED_KEY, mapping={"App\\Jobs\\Old%d" % i: "{}" for i in range(MAX - 1)})
    a.cli("pause", "--class", "App\\Jobs\\Last")  # the 100th
    assert rc.hlen(PAUSED_KEY) == MAX
    res = a.cli("pause", "--class", "App\\Jobs\\OneMore", check=False)
    assert res.returncode != 0 and "at most 100 classes" in res.stdout + res.stderr, res
    assert rc.hlen(PAUSED_KEY) == MAX and not rc.hexists(PAUSED_KEY, "App\\Jobs\\OneMore")
    res = a.cli("pause", "--class", "App\\Jobs\\X", "--class", "App\\Jobs\\Y", check=False)
    assert res.returncode != 0 and not rc.hexists(PAUSED_KEY, "App\\Jobs\\X")
    a.cli("pause", "--class", "App\\Jobs\\Old7")  # paused already: not one more
    a.cli("continue", "--class", "App\\Jobs\\Old0")
    a.cli("pause", "--class", "App\\Jobs\\OneMore")
    assert rc.hlen(PAUSED_KEY) == MAX and rc.hexists(PAUSED_KEY, "App\\Jobs\\OneMore")
    # jobs still run beside 100 paused classes
    push_many(rc, "work", [make_payload(job="App\\Jobs\\Free")])
    wait_for(lambda: started(log), 60, what="a job of a class not paused to run")


def test_a_class_in_the_path_is_decoded_once(master_factory, redis_server, tmp_path):
    path, _ = handler(tmp_path)
    rc = redis_server.client()
    a, port = start_with_http(master_factory, redis_server, path)
    # %2541 is "%41" once decoded: not a class (a PHP class has no %), and never "A"
    st, body = http(port, "POST", "/api/classes/App%5CJobs%5CHalf%2541/pause", TOKEN)
    assert st == 400, body
    assert not rc.exists(PAUSED_KEY)
    assert http(port, "POST", "/api/classes/p%25zz/pause", TOKEN)[0] == 400
    assert not rc.exists(PAUSED_KEY)
    st, body = http(port, "POST", "/api/classes/App%5CJobs%5CHalfA/pause", TOKEN)
    assert st == 200, body
    assert rc.hkeys(PAUSED_KEY) == [b"App\\Jobs\\HalfA"]
    assert "HTTP by" in json.loads(rc.hget(PAUSED_KEY, "App\\Jobs\\HalfA"))["by"]
