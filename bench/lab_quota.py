#!/usr/bin/env python3
"""How close a VM-like lab host's CPU quota holds: a busy loop in h2, quotas set live, CPU
measured from the host's cgroup and from the loop's /proc/PID/stat over each window.

    sudo .venv/bin/python -P bench/lab_quota.py [--quotas 25,50,100] [--window 2] [--reps 3] [--no-shield]

--no-shield leaves the host's cgroup chain at the default CPU weight, so other work on the
machine competes with the loop (the load average is printed beside each row); by default the
chain weighs 100x a plain process, as tests/test_lab_cgroup.py does. Root; no traffic at all.
Each loop ends by itself after 120 s (SIGALRM) and with the lab.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from perfkit import lab as pklab

BUSY_LOOP = "import signal\nsignal.alarm(120)\nwhile 1: pass"


def ticks(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def shield(paths: dict) -> None:
    d = paths["dir"] if paths["v"] == 2 else paths["dirs"]["cpu"]
    for level in (d, os.path.dirname(d), os.path.dirname(os.path.dirname(d))):
        name, value = ("cpu.weight", "10000") if paths["v"] == 2 else ("cpu.shares", "102400")
        with open(f"{level}/{name}", "w") as f:
            f.write(value)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quotas", default="25,50,100")
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-shield", action="store_true")
    a = ap.parse_args()
    quotas = [float(q) for q in a.quotas.split(",")]
    if not 0.5 <= a.window <= 10 or not 1 <= a.reps <= 10:
        print("window: 0.5..10 s, reps: 1..10", file=sys.stderr)
        return 2
    with pklab.Lab(hosts=2, cpu_quota=f"h2={quotas[0]:g}%") as lab:
        if not a.no_shield:
            shield(lab.cgroup("h2"))
        loop = lab.popen("h2", [sys.executable, "-c", BUSY_LOOP])
        time.sleep(0.3)
        print(f"cgroup v{lab.cgroup('h2')['v']}, shield {'off' if a.no_shield else 'on'}, window {a.window:g} s")
        print("quota %  rep  cgroup %  /proc %  load1")
        for q in quotas:
            lab.limit("h2", cpu_quota=f"{q:g}%")
            time.sleep(0.2)
            for rep in range(a.reps):
                c0, p0, t0 = lab.cpu_usage("h2"), ticks(loop.pid), time.monotonic()
                time.sleep(a.window)
                c1, p1, t1 = lab.cpu_usage("h2"), ticks(loop.pid), time.monotonic()
                load = open("/proc/loadavg").read().split()[0]
                print(f"{q:7g}  {rep:3d}  {100 * (c1 - c0) / (t1 - t0):8.1f}  {100 * (p1 - p0) / (t1 - t0):7.1f}  {load}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
