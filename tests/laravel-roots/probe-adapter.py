#!/usr/bin/python3
"""Drive php/qpool-handler.php by hand inside a chroot (a prototype for the
Laravel 10/13 root tests).

  probe-adapter.py --root R --app /srv/app --env-file F --port P [--stdio]
                   [--queue default] [--prefix laravel_database_] [--fail]

Pops one payload from <prefix>queues:<queue> (as qpool's pop hands it to the
handler), starts `chroot R php /opt/qpool-php/qpool-handler.php APP` with
protocol 2 (requests and responses on two pipes named by
QPOOL_REQUEST_FD / QPOOL_RESPONSE_FD, stdin /dev/null) or, with
--stdio, on stdin/stdout with QPOOL_PROTOCOL unset, sends one `job` request
(and with --fail a `failed` request for the same job after it), prints every
line it gets back, then closes the request channel and prints the exit
status and the adapter's stderr.
"""
import argparse, json, os, subprocess, sys, threading, queue as queuelib

import redis

ap = argparse.ArgumentParser()
ap.add_argument("--root", required=True)
ap.add_argument("--app", required=True)
ap.add_argument("--env-file", required=True)
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--queue", default="default")
ap.add_argument("--prefix", default="laravel_database_")
ap.add_argument("--adapter", default="/opt/qpool-php/qpool-handler.php")
ap.add_argument("--stdio", action="store_true")
ap.add_argument("--fail", action="store_true", help="also send a failed request (reason max_tries)")
a = ap.parse_args()

r = redis.Redis(port=a.port, decode_responses=True)
raw = r.lpop(a.prefix + "queues:" + a.queue)
if raw is None:
    sys.exit("nothing on %squeues:%s" % (a.prefix, a.queue))
p = json.loads(raw)

env = {"PATH": "/usr/sbin:/usr/bin:/bin"}
for line in open(a.env_file):
    if "=" in line:
        k, v = line.rstrip("\n").split("=", 1)
        env[k] = v

cmd = ["/usr/sbin/chroot", a.root, "php", a.adapter, a.app]
if a.stdio:
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    req, resp = proc.stdin, proc.stdout
else:
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    # as tests/integration/test_php_adapter.py's Adapter: the fds by number
    env.update({"QPOOL_PROTOCOL": "2", "QPOOL_REQUEST_FD": str(req_r), "QPOOL_RESPONSE_FD": str(resp_w)})
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, pass_fds=(req_r, resp_w))
    os.close(req_r)
    os.close(resp_w)
    req, resp = os.fdopen(req_w, "wb"), os.fdopen(resp_r, "rb")

lines = queuelib.Queue()
threading.Thread(target=lambda: [lines.put(l) for l in resp] + [lines.put(None)], daemon=True).start()
err = []
threading.Thread(target=lambda: [err.append(l) for l in proc.stderr], daemon=True).start()
out = []
if not a.stdio:
    threading.Thread(target=lambda: [out.append(l) for l in proc.stdout], daemon=True).start()


def read():
    try:
        line = lines.get(timeout=60)
    except queuelib.Empty:
        line = b"<timeout>"
    print("<-", line if line is None else line.decode(errors="replace").rstrip("\n"), flush=True)
    return line


def send(obj):
    line = json.dumps(obj)
    print("->", line[:300] + ("..." if len(line) > 300 else ""), flush=True)
    req.write(line.encode() + b"\n")
    req.flush()


base = {"id": p.get("id", ""), "uuid": p.get("uuid"), "name": p.get("displayName") or p.get("job") or "?",
        "queue": a.queue, "connection": "redis", "attempts": 1, "max_tries": p.get("maxTries") or 0,
        "timeout": p.get("timeout") or 60, "payload": raw}
ok = read() not in (None, b"<timeout>")
if ok:
    send(dict(base, type="job", seq=1))
    read()
    if a.fail:
        send(dict(base, type="failed", seq=2, reason="max_tries",
                  exception={"class": "RuntimeException", "message": "probe", "text": "RuntimeException: probe"}))
        read()
req.close()
try:
    rc = proc.wait(timeout=30)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = "killed after 30 s"
print("exit:", rc)
print("stdout (fd 1):", b"".join(out).decode(errors="replace"))
print("stderr:\n" + b"".join(err).decode(errors="replace"))
