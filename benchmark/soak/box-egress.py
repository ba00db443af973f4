# The in-box client of the soak's box-egress scenario (benchmark/soak/box-egress.js): run inside
# a machine whose network is a policy, it keeps the whole request loop in one process, on
# keep-alive connections to the in-box relay (127.0.0.1:3128), half the requests refused.
#
#   python3 -c SOURCE HTTP_PORT HTTPS_PORT WARM N THREADS MARKER
#
# Request i: even ones are allowed, in turn plain HTTP forwarded with the rule's header (ok.test),
# HTTPS terminated by the proxy with the rule's header (api.test), and plain HTTP inside a CONNECT
# tunnel (tun.test, no rules: tunnelled untouched); odd ones are refused, in turn plain HTTP to a
# host not allowed (no.test: the 403 and its exact reason line), a CONNECT to it (403), and plain
# HTTP to an allowed name whose address is denied (deny.test). Each worker thread keeps one
# connection per allowed kind open across the whole run; a refusal closes its connection, so
# every refused request is a connection of its own.
#
# After WARM requests, after N/2 more and after the last, it prints one JSON line (a mark: what it
# did and what it sees of the box) and waits for a line on stdin before it goes on, so that the
# host measures itself at the three marks in the same state: the client alive and idle, its
# keep-alive connections open. Then it closes them, prints the last line and exits.

import http.client
import json
import os
import ssl
import sys
import threading
import time

HP, TP, WARM, N, THREADS = (int(a) for a in sys.argv[1:6])
# sys.argv[6], the soak's marker, is only there to be seen: the soak's process checks look for it.
PROXY = ("127.0.0.1", 3128)
TIMEOUT = 30
CTX = ssl.create_default_context()  # SSL_CERT_FILE: the image's roots and the proxy's CA
KINDS = ("forwarded", "terminated", "tunnelled", "refused-http", "refused-connect", "refused-deny")

lock = threading.Lock()
stats = {k: {"n": 0, "bad": 0, "us": 0} for k in KINDS}
opened = {"forwarded": 0, "terminated": 0, "tunnelled": 0}
problems = []
busy = [0.0]  # seconds spent in batches, the marks' waits left out


def problem(kind, i, what):
    with lock:
        stats[kind]["bad"] += 1
        if len(problems) < 20:
            problems.append(f"{kind} {i}: {what}"[:300])


class Worker:
    def __init__(self):
        self.fwd = http.client.HTTPConnection(*PROXY, timeout=TIMEOUT)
        self.tls = http.client.HTTPSConnection(*PROXY, timeout=TIMEOUT, context=CTX)
        self.tls.set_tunnel("api.test", TP)
        self.tun = http.client.HTTPConnection(*PROXY, timeout=TIMEOUT)
        self.tun.set_tunnel("tun.test", HP)
        self.ref = http.client.HTTPConnection(*PROXY, timeout=TIMEOUT)

    def close(self):
        for c in (self.fwd, self.tls, self.tun, self.ref):
            c.close()

    def get(self, kind, conn, target):
        if kind in opened and conn.sock is None:
            with lock:
                opened[kind] += 1
        conn.request("GET", target)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")

    def one(self, i):
        k = (i // 2) % 3
        if i % 2 == 0:
            kind = KINDS[k]
            conn, target, want = (
                (self.fwd, f"http://ok.test:{HP}/f{i}", f"ok f{i}"),
                (self.tls, f"/t{i}", f"ok t{i}"),
                (self.tun, f"/u{i}", f"ok u{i} plain"),
            )[k]
            status, body = self.get(kind, conn, target)
            if status != 200 or body != want:
                problem(kind, i, f"{status} {body[:120]!r}")
            return kind
        kind = KINDS[3 + k]
        if k == 1:
            c = http.client.HTTPConnection(*PROXY, timeout=TIMEOUT)
            c.set_tunnel("no.test", HP)
            try:
                c.connect()
                problem(kind, i, "the CONNECT was not refused")
            except OSError as e:
                if "403" not in str(e):
                    problem(kind, i, f"not a 403: {e}")
            finally:
                c.close()
            return kind
        host, why = (
            ("no.test", "not in allowOut"),
            None,
            ("deny.test", "127.0.0.2 is in denyOut"),
        )[k]
        status, body = self.get(kind, self.ref, f"http://{host}:{HP}/r{i}")
        if status != 403 or not body.startswith(f"kern-sandbox egress: {host}:{HP} refused: {why}"):
            problem(kind, i, f"{status} {body[:120]!r}")
        return kind


WORKERS = [Worker() for _ in range(THREADS)]


def batch(start, end):
    """Requests start..end-1 over the workers, each on its own thread."""
    nxt = [start]

    def loop(w):
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= end:
                return
            t = time.monotonic()
            try:
                kind = w.one(i)
            except Exception as e:  # a failed allowed request: its connection starts afresh
                kind = KINDS[(i // 2) % 3 + (0 if i % 2 == 0 else 3)]
                problem(kind, i, f"{type(e).__name__}: {e}")
                w.close()
            us = int((time.monotonic() - t) * 1e6)
            with lock:
                stats[kind]["n"] += 1
                stats[kind]["us"] += us

    t0 = time.monotonic()
    threads = [threading.Thread(target=loop, args=(w,)) for w in WORKERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    busy[0] += time.monotonic() - t0


def agent_fds():
    """The agent's fd count once it holds still: a relayed connection the client has just closed
    is let go on the relay's next turn."""
    last, same = None, 0
    for _ in range(40):
        try:
            n = len(os.listdir("/proc/1/fd"))
        except OSError:
            return None
        same = same + 1 if n == last else 0
        if same == 3:
            break
        last = n
        time.sleep(0.05)
    return last


def box():
    """What the client sees of the box: processes and tasks in it, and the agent's (PID 1, which
    runs the relay) fds and RSS where /proc lets it read them."""
    agent = {"fds": agent_fds(), "rssKb": None}
    procs = tasks = 0
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                tasks += len(os.listdir(f"/proc/{e}/task"))
                procs += 1
            except OSError:
                pass
    try:
        with open("/proc/1/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    agent["rssKb"] = int(line.split()[1])
    except OSError:
        pass
    return {"procs": procs, "tasks": tasks, "agent": agent}


def mark(name, done, wait=True):
    line = {"mark": name, "done": done, "busyMs": busy[0] * 1000, "box": box(), "stats": stats, "opened": opened, "problems": problems}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
    if wait and not sys.stdin.readline():
        sys.exit(3)  # the host went away


batch(0, WARM)
mark("start", WARM)
batch(WARM, WARM + N // 2)
mark("middle", WARM + N // 2)
batch(WARM + N // 2, WARM + N)
mark("end", WARM + N)
for w in WORKERS:
    w.close()
mark("closed", WARM + N, wait=False)
