"""perfkit's DPDK TCP client and server, each in a process of its own, joined by net_memif, and
torn down in every order (issue 6: a side must survive its memif peer leaving at any moment).

A stress run (also what tests/test_dperf_memif_teardown.py runs, fewer times):

    python3 -P tests/_memif_teardown.py [--runs 40] [--seconds 240] [--gdb] [--orders ...]

Each run: a server and a client child (SIDE below), the client's load for a short time, a thread
in each child reading snapshot() every POLL s, then one teardown order:
  client-first   the client stops and closes its port while the server still polls
  server-first   the server stops and closes its port while the client still polls
  both           both told to close at the same moment
  client-mid     the client closes in the middle of its load (the server busy sending)
  server-mid     the server closes in the middle of the client's load
  kill-client    the client process is killed (SIGKILL) mid-load: its memif socket closes by the kernel
Prints one line per run and the children's exit statuses; a negative status is a signal.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time

# One side: python -P -c SIDE '{"role": ..., "port": ..., "spec": {...}, "poll": s}'.
# Lines in: "stop" (stop, join), "close" (close now, running or not), "exit". Lines out: READY,
# ENDED (its workers stopped by themselves), STOPPED {counters}, CLOSED.
SIDE = r"""
import json, sys, threading, time
a = json.loads(sys.argv[1])
import os
if a.get("cpu") is not None:   # every thread on one CPU: the PMD's control thread can only run
    os.sched_setaffinity(0, {a["cpu"]})   # when it preempts the worker, i.e. mid-burst
from perfkit.engines import dpdk, dpdk_tcp
from perfkit.spec import DpdkHttpClient, DpdkHttpServer
from perfkit.stats import COUNTER_NAMES, merge_counters
dpdk.configure(mbufs=8191, memory_mb=128)
cls = DpdkHttpServer if a["role"] == "server" else DpdkHttpClient
h = dpdk_tcp.build(cls(port=a["port"], **a["spec"]))
lock = threading.Lock()
closed = threading.Event()
def poll():
    while not closed.is_set():
        with lock:
            if closed.is_set():
                break
            h.snapshot()
        time.sleep(a["poll"])
def ended():
    while not closed.is_set():
        with lock:
            if closed.is_set() or not h.running():
                break
        time.sleep(0.005)
    if not closed.is_set():
        print("ENDED", flush=True)
h.start()
threads = [threading.Thread(target=poll, daemon=True), threading.Thread(target=ended, daemon=True)]
for t in threads:
    t.start()
print("READY", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "stop":
        h.stop()
        h.join()
        c = dict(zip(COUNTER_NAMES, merge_counters([list(c) for c, _ in h.snapshot()])))
        print("STOPPED " + json.dumps({k: c[k] for k in ("sock_open", "pkts_tx", "pkts_rx", "drop_tx")}), flush=True)
    elif cmd == "close":
        if a.get("raw_close"):   # the poller may be inside snapshot(): close under it
            closed.set()
            h.close()
        else:
            with lock:
                closed.set()
                h.close()
        print("CLOSED", flush=True)
    elif cmd == "exit":
        break
"""

ORDERS = ("client-first", "server-first", "both", "client-mid", "server-mid", "kill-client")


class Side:
    def __init__(self, role: str, port: str, spec: dict, poll: float, gdb: bool, raw_close: bool = False,
                 cpu: int | None = None):
        arg = json.dumps({"role": role, "port": port, "spec": spec, "poll": poll, "raw_close": raw_close,
                          "cpu": cpu})
        pre = (["gdb", "-q", "-batch", "-ex", "run", "-ex", "info threads", "-ex", "thread apply all bt 12",
                "--args"] if gdb else [])
        self.role = role
        self.p = subprocess.Popen(pre + [sys.executable, "-P", "-c", SIDE, arg], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.gdb = gdb
        self.out: list[str] = []

    def send(self, cmd: str) -> None:
        try:
            self.p.stdin.write(cmd + "\n")
            self.p.stdin.flush()
        except OSError:
            pass

    def expect(self, word: str, timeout: float) -> str | None:
        """The next line starting with word (lines before it kept), None at EOF or timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            line = self.p.stdout.readline()
            if not line:
                return None
            self.out.append(line.rstrip())
            if line.startswith(word):
                return line
        return None

    def finish(self, timeout: float = 20.0) -> int:
        self.send("exit")
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        if self.gdb:   # gdb exits 0 whatever its inferior did: read what it printed
            rest = self.p.stdout.read()
            self.out += rest.splitlines()
            for ln in self.out:
                if "received signal" in ln:
                    return -signal.SIGSEGV if "SIGSEGV" in ln else -signal.SIGABRT
        return rc

    def tail(self, n: int = 60) -> str:
        err = self.p.stderr.read() if self.p.stderr else ""
        return "\n".join(self.out[-n:]) + "\n--- stderr ---\n" + err[-3000:]


def one_run(k: int, order: str, poll: float, gdb: bool = False, keepalive: bool | None = None,
            load_s: float = 0.6, raw_close: bool = False, one_cpu: bool = False) -> dict:
    """One server and one client process and one teardown order: the exit statuses."""
    sock = f"/tmp/pk-memif-td-{os.getpid()}-{k}.sock"
    ka = (k % 2 == 1) if keepalive is None else keepalive
    common = {"clients": (("198.18.0.1", 1),), "ip": "198.18.0.2"}
    srv_spec = {**common, "payload_size": 1400 if ka else 100, "keepalive": ka, "duration": 60}
    cli_spec = {**common, "ip": "198.18.0.1", "server": "198.18.0.2", "duration": load_s,
                "cps": 2000, "lport_range": (1024, 65535)}
    if ka:
        cli_spec.update(cc=64, keepalive="1ms")
    cpus = sorted(os.sched_getaffinity(0))
    srv = Side("server", f"net_memif0,role=server,socket={sock}", srv_spec, poll, gdb, raw_close,
               cpus[0] if one_cpu else None)
    cli = None
    res = {"run": k, "order": order, "keepalive": ka}
    try:
        if not srv.expect("READY", 60):
            res["error"] = "server not ready: " + srv.tail()
            return res
        cli = Side("client", f"net_memif1,role=client,socket={sock}", cli_spec, poll, gdb, raw_close,
                   cpus[-1] if one_cpu else None)
        if not cli.expect("READY", 60):
            res["error"] = "client not ready: " + cli.tail()
            return res
        if order in ("client-mid", "server-mid", "kill-client"):
            time.sleep(load_s * (0.3 + 0.4 * ((k * 7919) % 10) / 10))   # somewhere in the load
            if order == "client-mid":
                cli.send("close")
                cli.expect("CLOSED", 30)
            elif order == "server-mid":
                srv.send("close")
                srv.expect("CLOSED", 30)
            else:
                cli.p.kill()
        else:
            cli.expect("ENDED", load_s + 30)
            if order == "client-first":
                cli.send("close")
                cli.expect("CLOSED", 30)
                time.sleep(0.05)
                srv.send("stop")
                srv.expect("STOPPED", 30)
            elif order == "server-first":
                srv.send("close")
                srv.expect("CLOSED", 30)
                time.sleep(0.05)
            else:
                cli.send("close")
                srv.send("close")
                cli.expect("CLOSED", 30)
                srv.expect("CLOSED", 30)
        for side in (srv, cli):
            if side.p.poll() is None:
                side.send("close")
                side.expect("CLOSED", 30)
        res["server_rc"] = srv.finish()
        res["client_rc"] = cli.finish() if order != "kill-client" else 0
        for side, key in ((srv, "server_rc"), (cli, "client_rc")):
            if res[key] not in (0,):
                res[f"{side.role}_out"] = side.tail()
        return res
    finally:
        for side in (srv, cli):
            if side is not None and side.p.poll() is None:
                side.p.kill()
                side.p.wait()
        if os.path.exists(sock):
            os.unlink(sock)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=240.0, help="stop starting runs after this long")
    ap.add_argument("--orders", nargs="*", default=list(ORDERS))
    ap.add_argument("--poll", type=float, default=0.01)
    ap.add_argument("--load", type=float, default=0.6)
    ap.add_argument("--raw-close", action="store_true", help="close() while the poller may be in snapshot()")
    ap.add_argument("--one-cpu", action="store_true",
                    help="each side's threads on one CPU (server: the first allowed, client: the last)")
    ap.add_argument("--gdb", action="store_true", help="both children under gdb -batch (a backtrace on a crash)")
    a = ap.parse_args()
    t0 = time.monotonic()
    bad = 0
    done = 0
    for k in range(a.runs):
        if time.monotonic() - t0 > a.seconds:
            break
        order = a.orders[k % len(a.orders)]
        r = one_run(k, order, a.poll, a.gdb, load_s=a.load, raw_close=a.raw_close, one_cpu=a.one_cpu)
        done += 1
        ok = r.get("server_rc") == 0 and r.get("client_rc") == 0 and "error" not in r
        bad += not ok
        print(f"run {k} {order} ka={r['keepalive']}: server {r.get('server_rc')} client {r.get('client_rc')}"
              f"{'' if ok else '  <-- FAILED'}", flush=True)
        for key in ("error", "server_out", "client_out"):
            if key in r:
                print(f"  {key}:\n{r[key]}", flush=True)
    print(f"{bad} of {done} runs failed ({time.monotonic() - t0:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
