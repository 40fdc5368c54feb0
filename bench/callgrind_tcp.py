"""Instructions per keep-alive request in perfkit's DPDK TCP workers, from callgrind (issue 31):
a repeatable cost on a shared machine, where wall-clock rates follow the CPU share the workers get.

    python3 -P bench/callgrind_tcp.py [--body 1295] [--seconds 3]   # needs valgrind

The server and the client run in one process over a ring pair (64 keep-alive connections, the
next request 1 us after each response), under valgrind --tool=callgrind --separate-threads=yes.
Per request, each worker's work: the inclusive instructions of tcp_handle_frame (each frame
received, with what it sends), tcp_client_request (the requests), tcp_tx_flush_mode (the port's
transmit) and tcp_acks_flush (end-of-pass ACKs). The rest of the worker's instructions are idle
polling, whose amount follows valgrind's thread scheduling: printed, not compared. A body of 1,295
bytes makes a 1,400-byte response (one segment); 16384 makes 12 segments.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ["PERFKIT_SANDBOX"] = "1"   # the network guard (perfkit/sandbox.py)
WORK = ("tcp_handle_frame", "tcp_client_request", "tcp_tx_flush_mode", "tcp_acks_flush")


def child(body: int, seconds: float) -> None:
    from perfkit.engines import dpdk, dpdk_tcp
    from perfkit.spec import DpdkHttpClient, DpdkHttpServer
    from perfkit.stats import COUNTER_NAMES
    dpdk.configure(worker_cpus=(0, 1), mbufs=16383, memory_mb=256)
    dpdk.eal()
    srv = dpdk_tcp.build(DpdkHttpServer(port="ring:cg:1", ip="198.18.0.2", payload_size=body, keepalive=True,
                                        duration=600))
    cli = dpdk_tcp.build(DpdkHttpClient(port="ring:cg:0", ip="198.18.0.1", server="198.18.0.2", cps=1000, cc=64,
                                        keepalive="1us", duration=seconds))
    srv.start()
    cli.start()
    while cli.running():
        time.sleep(0.05)
    cli.join()
    time.sleep(0.3)
    srv.stop()
    srv.join()
    c = dict(zip(COUNTER_NAMES, cli.snapshot()[0][0]))
    s = dict(zip(COUNTER_NAMES, srv.snapshot()[0][0]))
    print("COUNTS", json.dumps({"c": c, "s": s}), flush=True)
    cli.close()
    srv.close()


def summarize(d: str, counts: dict) -> dict:
    c, s = counts["c"], counts["s"]
    n = c["http_req"]
    out = {"requests": n, "frames_client": c["pkts_tx"] / n, "frames_server": s["pkts_tx"] / n,
           "errors": c["sock_error"] + s["sock_error"]}
    for f in sorted(glob.glob(f"{d}/cg.out-*")):
        txt = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f], capture_output=True,
                             text=True).stdout
        inc = {}
        for ln in txt.splitlines():
            m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+\S*?:(\w+) \[.*_dpdk", ln)
            if m:
                inc[m.group(2)] = int(m.group(1).replace(",", ""))
        side = "server" if "open_server" in inc or "tcp_server_scan" in inc else "client" if "tcp_launch" in inc else None
        if side:
            out[side] = {"work": sum(inc.get(k, 0) for k in WORK) / n, "worker": inc.get("worker_run", 0) / n,
                         **{k: inc.get(k, 0) / n for k in WORK}}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--body", type=int, default=1295, help="response body bytes (1295: a 1,400-byte response)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.body, a.seconds)
        return 0
    with tempfile.TemporaryDirectory(prefix="pk-callgrind-") as d:
        p = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={d}/cg.out",
                            sys.executable, "-P", os.path.abspath(__file__), "--child", "--body", str(a.body),
                            "--seconds", str(a.seconds)], capture_output=True, text=True, timeout=900)
        m = re.search(r"^COUNTS (.*)$", p.stdout, re.M)
        if p.returncode != 0 or not m:
            print(p.stdout[-2000:], p.stderr[-3000:], file=sys.stderr)
            return 1
        r = summarize(d, json.loads(m.group(1)))
    print(f"body {a.body} B: {r['requests']} requests, errors {r['errors']}, frames per request client "
          f"{r['frames_client']:.3f} server {r['frames_server']:.3f}")
    for side in ("client", "server"):
        if side in r:
            v = r[side]
            print(f"  {side}: {v['work']:,.0f} instructions/request of work ("
                  + ", ".join(f"{k} {v[k]:,.0f}" for k in WORK) + f"); worker in all, idle polling included: "
                  f"{v['worker']:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
