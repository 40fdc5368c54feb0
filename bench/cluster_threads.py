#!/usr/bin/env python3
"""Where a cluster engine spends CPU during a run: each thread's CPU time (/proc/PID/task/*/stat,
sampled every 50 ms so that the load's threads, which end with the run, are counted too), the
controller's (with its schedulers) and this client process's, and what the engine was asked.

    python3 -P bench/cluster_threads.py [--reps 2] [--duration 4] [--users 8]

One local engine (perfkit.Cluster.start(n=1), named cl3t<pid>, stopped at the end) runs HttpLoad
keep-alive against perfkit http-serve on 127.0.0.61 (loopback only); prints a line per thread.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

os.environ["PERFKIT_SANDBOX"] = "1"   # the network guard here and in the engine

import perfkit  # noqa: E402 (after the guard)
from perfkit.cluster import Cluster  # noqa: E402
from perfkit.spec import HttpLoad  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _stat(path: str) -> tuple[str, float]:
    with open(path) as f:
        s = f.read()
    fields = s.rsplit(")", 1)[1].split()
    return s[s.index("(") + 1:s.rindex(")")], (int(fields[11]) + int(fields[12])) / TICK


def threads(pid: int) -> dict:
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(t)] = _stat(f"/proc/{pid}/task/{t}/stat")
        except OSError:
            continue
    return out


def family_cpu(pid: int) -> float:
    """pid's and its children's CPU time (the controller and its schedulers)."""
    total = 0.0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if int(p) == pid or ppid == pid:
                total += _stat(f"/proc/{p}/stat")[1]
        except OSError:
            continue
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--users", type=int, default=8)
    args = ap.parse_args()
    url = "http://127.0.0.61:8061/"
    srv = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "http-serve", "--host", "127.0.0.61", "--port", "8061",
                            "--duration", f"{args.reps * (args.duration + 10) + 60:.0f}s"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = None
    try:
        time.sleep(1.5)
        c = Cluster.start(n=1, name=f"cl3t{os.getpid() % 10000}")
        pid = c.engines()[0]["pid"]
        for rep in range(args.reps):
            before, ctl, me = threads(pid), family_cpu(c.state["controller_pid"]), os.times()
            seen, going = {}, [True]

            def sample():
                while going[0]:
                    try:
                        seen.update(threads(pid))
                    except OSError:
                        pass
                    time.sleep(0.05)
            t = threading.Thread(target=sample, daemon=True)
            t.start()
            run = perfkit.run(HttpLoad(url=url, users=args.users, duration=args.duration), cluster=c)
            going[0] = False
            t.join()
            seen.update(threads(pid))
            me2 = os.times()
            print(f"rep {rep}: {run.summary['responses']} responses, {run.summary['tps']:,.0f} req/s; "
                  f"controller {family_cpu(c.state['controller_pid']) - ctl:.2f} s, "
                  f"client {me2.user + me2.system - me.user - me.system:.2f} s; engine asked {run._handle.asked}")
            for tid, (comm, cpu) in sorted(seen.items(), key=lambda kv: -kv[1][1] + before.get(kv[0], ("", 0))[1]):
                used = cpu - before.get(tid, ("", 0.0))[1]
                print(f"  engine thread {tid} {comm:16s} {used:.2f} s")
    finally:
        if c is not None:
            c.down()
        srv.terminate()
        srv.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
