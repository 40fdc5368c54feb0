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


def child(body: int, seconds: float, cc: int = 64, burst: int = 0, launch_num: int = 0, addrs: int = 1) -> None:
    from perfkit.engines import dpdk, dpdk_tcp
    from perfkit.spec import DpdkHttpClient, DpdkHttpServer
    from perfkit.stats import COUNTER_NAMES
    dpdk.configure(worker_cpus=(0, 1), mbufs=16383, memory_mb=256)
    dpdk.eal()
    clients = (("198.18.0.10" if addrs <= 245 else "198.18.1.1", addrs),)   # only the last byte varies
    knobs = {"burst": burst} if burst else {}
    srv = dpdk_tcp.build(DpdkHttpServer(port="ring:cg:1", ip="198.18.0.2", payload_size=body, keepalive=True,
                                        clients=clients, duration=600, **knobs))
    if launch_num:
        knobs["launch_num"] = launch_num
    cli = dpdk_tcp.build(DpdkHttpClient(port="ring:cg:0", ip="198.18.0.1", server="198.18.0.2", cps=max(1000, cc * 4),
                                        cc=cc, clients=clients, keepalive="1us", duration=seconds, **knobs))
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


KNOBS = ("cc", "burst", "launch_num", "addrs")
# issue 31's robustness corners, each changed alone from the defaults (cc 64, the specs' burst
# and launch_num, one client address), then the issue's own configuration
SWEEP = ({}, {"burst": 8}, {"burst": 128}, {"burst": 256}, {"launch_num": 1}, {"launch_num": 64},
         {"addrs": 48}, {"addrs": 254}, {"cc": 4096}, {"cc": 4096, "burst": 128, "launch_num": 10, "addrs": 48})


def measure(body: int, seconds: float, knobs: dict) -> dict | None:
    """One callgrind run of the child with knobs; its summary, None (printed why) if it failed."""
    with tempfile.TemporaryDirectory(prefix="pk-callgrind-") as d:
        args = [f"--{k.replace('_', '-')}={v}" for k, v in knobs.items()]
        p = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={d}/cg.out",
                            sys.executable, "-P", os.path.abspath(__file__), "--child", "--body", str(body),
                            "--seconds", str(seconds), *args], capture_output=True, text=True, timeout=900)
        m = re.search(r"^COUNTS (.*)$", p.stdout, re.M)
        if p.returncode != 0 or not m:
            print(p.stdout[-2000:], p.stderr[-3000:], file=sys.stderr)
            return None
        if os.environ.get("PK_CG_KEEP"):   # a directory: keep the callgrind outputs (callgrind_annotate)
            for f in glob.glob(f"{d}/cg.out-*"):
                os.replace(f, os.path.join(os.environ["PK_CG_KEEP"], os.path.basename(f)))
            d = os.environ["PK_CG_KEEP"]
        return summarize(d, json.loads(m.group(1)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--body", type=int, default=1295, help="response body bytes (1295: a 1,400-byte response)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--cc", type=int, default=64, help="keep-alive connections")
    ap.add_argument("--burst", type=int, default=0, help="both sides' burst (0: the specs' default)")
    ap.add_argument("--launch-num", type=int, default=0, help="the client's launch_num (0: the spec's default)")
    ap.add_argument("--addrs", type=int, default=1, help="client addresses (198.18.0.10 on)")
    ap.add_argument("--sweep", action="store_true", help="the settings in SWEEP, one callgrind run each: a table")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    knobs = {k: getattr(a, k) for k in KNOBS}
    if a.child:
        child(a.body, a.seconds, **knobs)
        return 0
    if a.sweep:
        print("| settings | requests | errors | frames/request c / s | instructions/request c / s |")
        print("|---|---|---|---|---|")
        bad = 0
        for kn in SWEEP:
            r = measure(a.body, a.seconds, kn)
            name = ", ".join(f"{k} {v}" for k, v in kn.items()) or "defaults (cc 64)"
            if r is None or "client" not in r or "server" not in r:
                print(f"| {name} | failed | | | |", flush=True)
                bad += 1
                continue
            print(f"| {name} | {r['requests']:,} | {r['errors']} | {r['frames_client']:.3f} / {r['frames_server']:.3f} "
                  f"| {r['client']['work']:,.0f} / {r['server']['work']:,.0f} |", flush=True)
            bad += r["errors"] > 0
        return 1 if bad else 0
    r = measure(a.body, a.seconds, {k: v for k, v in knobs.items() if v and not (k == "addrs" and v == 1)})
    if r is None:
        return 1
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
