#!/usr/bin/env python3
"""Load from many hosts (perfkit.cluster): aggregate keep-alive HTTP req/s from 1, 2 and 3
engines in lab hosts against one perfkit http-serve in another, and the cluster path's cost.

    python3 -P bench/cluster.py [--reps 3] [--duration 3] [--users 8] [--out bench/RESULTS-cluster.md]

A 4-host lab (named c2b<pid>, removed at the end): perfkit http-serve in h4, one ipyparallel
engine in each of h1, h2, h3 (perfkit.Cluster.start(lab=..., hosts=...)). Scaling: HttpLoad
with --users per engine, keep-alive, on the first 1, 2 and 3 engines, each count once per rep.
Overhead: the same load (--users, 1 engine's share) from h1 via the cluster and run locally in
h1's namespace (a fresh `python -P` there, as `ip netns exec` would run perfkit), alternating
which goes first, the ratio of the medians (cluster / local) and per pair. Every request goes
to h4's address inside the lab; the server's own request count is checked against each run's.
The table, the load average before and after, and the command go to --out.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ["PERFKIT_SANDBOX"] = "1"   # the network guard (perfkit/sandbox.py) here and in every engine

import perfkit  # noqa: E402 (after the guard)
from perfkit.cluster import Cluster  # noqa: E402
from perfkit.lab import Lab  # noqa: E402
from perfkit.spec import HttpLoad  # noqa: E402

HERE = Path(__file__).resolve().parent
PORT = 8080
LOCAL = """
import json, os, sys
os.environ["PERFKIT_SANDBOX"] = "1"
import perfkit
spec = perfkit.HttpLoad(url=sys.argv[1], users=int(sys.argv[2]), duration=float(sys.argv[3]))
run = perfkit.Run(spec).run()
print(json.dumps({"tps": run.summary["tps"], "responses": run.summary["responses"]}))
"""


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def served(srv_json: Path) -> int:
    """Requests h4's server has answered so far (its JSON rows, the last one's total)."""
    last = 0
    for ln in srv_json.read_text().splitlines():
        try:
            last = json.loads(ln).get("http_req", last)
        except ValueError:
            continue
    return int(last)


def local_run(lab, url: str, users: int, seconds: float) -> dict:
    """The load run as perfkit in h1's namespace, one process, no cluster."""
    p = lab.popen("h1", [sys.executable, "-P", "-c", LOCAL, url, str(users), str(seconds)],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    out, err = p.communicate(timeout=seconds + 60)
    if p.returncode != 0:
        raise RuntimeError(f"local run in h1: exit {p.returncode}: {err.strip()[-400:]}")
    return json.loads(out.strip().splitlines()[-1])


def cluster_run(c, url: str, users: int, seconds: float) -> dict:
    run = perfkit.run(HttpLoad(url=url, users=users, duration=seconds), cluster=c)
    if run.error:
        raise RuntimeError(f"cluster run on {c.hosts}: {run.error}")
    s = run.summary
    return {"tps": s["tps"], "responses": s["responses"], "skew_ms": s["start_skew_s"] * 1e3,
            "hosts": {h: v["tps"] for h, v in run.hosts.items()}}


def measure(args, lab, c, url) -> dict:
    scale = {n: [] for n in (1, 2, 3)}
    pairs = []
    for rep in range(args.reps):
        for n in (1, 2, 3) if rep % 2 == 0 else (3, 2, 1):
            scale[n].append(cluster_run(c.select(["h1", "h2", "h3"][:n]), url, args.users * n, args.duration))
            print(f"rep {rep} engines {n}: {scale[n][-1]['tps']:.0f} req/s", flush=True)
        one = c.select("h1")
        order = ("cluster", "local") if rep % 2 == 0 else ("local", "cluster")
        got = {}
        for how in order:
            got[how] = (cluster_run(one, url, args.users, args.duration) if how == "cluster"
                        else local_run(lab, url, args.users, args.duration))
        pairs.append(got)
        print(f"rep {rep} overhead: cluster {got['cluster']['tps']:.0f}, local {got['local']['tps']:.0f} req/s",
              flush=True)
    return {"scale": scale, "pairs": pairs}


def report(args, res: dict, before: str, after: str, checked: tuple[int, int]) -> str:
    cmd = "python3 -P bench/cluster.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    lines = [f"# Load from many hosts: perfkit.cluster ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)",
             "", f"`{cmd}`", "",
             f"Machine: {platform.node()}, {os.cpu_count()} CPUs, kernel {platform.release()}; load average "
             f"{before} before, {after} after (1, 5, 15 min). A 4-host lab: perfkit http-serve in h4, one "
             "ipyparallel engine in each of h1-h3; HttpLoad, keep-alive, "
             f"{args.users} users per engine, {args.duration:g} s runs, {args.reps} reps (engine counts alternating "
             "up and down). Every request was counted by h4's server too: "
             f"{checked[0]} requests sent by the runs, {checked[1]} answered by the server.", "",
             "| engines | req/s (median) | runs | per-host req/s (last run) | start skew ms (median) |",
             "|---|---|---|---|---|"]
    for n, runs in res["scale"].items():
        tps = [r["tps"] for r in runs]
        lines.append(f"| {n} | {statistics.median(tps):,.0f} | {', '.join(f'{t:,.0f}' for t in tps)} | "
                     + ", ".join(f"{h} {v:,.0f}" for h, v in runs[-1]["hosts"].items())
                     + f" | {statistics.median(r['skew_ms'] for r in runs):.2f} |")
    cl = [p["cluster"]["tps"] for p in res["pairs"]]
    lo = [p["local"]["tps"] for p in res["pairs"]]
    ratio = statistics.median(cl) / statistics.median(lo)
    lines += ["", "The cluster path's cost: the same load (1 engine's share) from h1 via the cluster and run "
              "locally in h1's namespace, alternating which goes first.", "",
              "| path | req/s (median) | runs |", "|---|---|---|",
              f"| cluster (engine in h1) | {statistics.median(cl):,.0f} | {', '.join(f'{t:,.0f}' for t in cl)} |",
              f"| local (perfkit in h1) | {statistics.median(lo):,.0f} | {', '.join(f'{t:,.0f}' for t in lo)} |",
              "", f"Cluster / local: {ratio:.3f} (overhead {100 * (1 - ratio):+.1f} %; per pair: "
              + ", ".join(f"{c / l:.3f}" for c, l in zip(cl, lo)) + ")."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--users", type=int, default=8, help="virtual users per engine")
    ap.add_argument("--out", default=str(HERE / "RESULTS-cluster.md"))
    args = ap.parse_args()
    before = loadavg()
    lab = Lab(hosts=4, name=f"c2b{os.getpid() % 100000}").up()
    srv_log = Path(f"/tmp/{lab.name}-serve.jsonl")
    srv = None
    c = None
    try:
        h4 = lab.host("h4")
        url = f"http://{h4.ipv4}:{PORT}/"
        total_s = args.reps * (7 * args.duration + 20) + 120
        with open(srv_log, "w") as f:   # the server's own count of what it answered, row by row
            srv = lab.popen("h4", [sys.executable, "-P", "-m", "perfkit", "http-serve", "--host", h4.ipv4,
                                   "--port", str(PORT), "--duration", f"{total_s:.0f}s", "--json"],
                            stdout=f, stderr=subprocess.DEVNULL, cwd="/")
        time.sleep(1.0)
        c = Cluster.start(lab=lab, hosts="h1,h2,h3", name=lab.name)
        res = measure(args, lab, c, url)
        time.sleep(1.5)   # the server's next row counts the last run's requests
        sent = sum(r["responses"] for runs in res["scale"].values() for r in runs) + sum(
            p[k]["responses"] for p in res["pairs"] for k in ("cluster", "local"))
        text = report(args, res, before, loadavg(), (sent, served(srv_log)))
    finally:
        if c is not None:
            c.down()
        if srv is not None:
            srv.terminate()
            srv.wait(timeout=10)
        lab.down()
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
