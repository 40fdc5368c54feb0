#!/usr/bin/env python3
"""Load from many hosts (perfkit.cluster): aggregate keep-alive HTTP req/s from 1, 2 and 3
engines in lab hosts against one perfkit http-serve in another, and the cluster path's cost.

    python3 -P bench/cluster.py [--reps 3] [--duration 3] [--users 8] [--pairs 16] [--pair-duration 1.5] [--out FILE]

A 4-host lab (named cl3b<pid>, removed at the end): perfkit http-serve in h4, one ipyparallel
engine in each of h1, h2, h3 (perfkit.Cluster.start(lab=..., hosts=...)). Scaling: HttpLoad
with --users per engine, keep-alive, on the first 1, 2 and 3 engines, each count once per rep.
Overhead: the same load (--users, 1 engine's share) from h1 via the cluster and run locally in
h1's namespace (a fresh `python -P` there, as `ip netns exec` would run perfkit), --pairs short
pairs interleaved ABAB (which goes first alternates). Per pair the ratio cluster / local of req/s
and of CPU time per request; reported: the median ratio with a bootstrap 90 % interval of the
median. CPU per request is the steadier figure on a shared machine (req/s follows whatever else
runs): the local run's is its process's CPU time (os.times, every thread) over its responses; the
cluster run's is the engine process's, the controller's (and its schedulers') and this client
process's CPU time over the same run (/proc/PID/stat, threads that ended included). Every
request goes to h4's address inside the lab; the server's own request count is checked against
the runs'. The table, the load average before and after, and the command go to --out.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
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
t = os.times()
run = perfkit.Run(spec).run()
t2 = os.times()   # every thread of this process: the workers, the sampler, the caller
print(json.dumps({"tps": run.summary["tps"], "responses": run.summary["responses"],
                  "cpu_s": t2.user + t2.system - t.user - t.system}))
"""
TICK = os.sysconf("SC_CLK_TCK")


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


def cpu_s(pids) -> float:
    """CPU time (user + system) of these processes so far, their ended threads included."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def children(pid: int) -> list[int]:
    """pid and every process whose parent is pid (the controller's schedulers)."""
    out = [pid]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(p))
            except OSError:
                continue
    return out


def local_run(lab, url: str, users: int, seconds: float) -> dict:
    """The load run as perfkit in h1's namespace, one process, no cluster."""
    p = lab.popen("h1", [sys.executable, "-P", "-c", LOCAL, url, str(users), str(seconds)],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    out, err = p.communicate(timeout=seconds + 60)
    if p.returncode != 0:
        raise RuntimeError(f"local run in h1: exit {p.returncode}: {err.strip()[-400:]}")
    return json.loads(out.strip().splitlines()[-1])


def cluster_run(c, url: str, users: int, seconds: float, pids=None) -> dict:
    """One run over c; with pids ({"engine": [pid], "controller": [pids]}), the CPU time they and
    this process ("client") spent on it, in all and by part."""
    pids = pids or {}
    me, them = os.times(), {k: cpu_s(v) for k, v in pids.items()}
    run = perfkit.run(HttpLoad(url=url, users=users, duration=seconds), cluster=c)
    me2, them2 = os.times(), {k: cpu_s(v) for k, v in pids.items()}
    parts = {k: them2[k] - them[k] for k in pids}
    parts["client"] = me2.user + me2.system - me.user - me.system
    if run.error:
        raise RuntimeError(f"cluster run on {c.hosts}: {run.error}")
    s = run.summary
    return {"tps": s["tps"], "responses": s["responses"], "skew_ms": s["start_skew_s"] * 1e3,
            "hosts": {h: v["tps"] for h, v in run.hosts.items()},
            "cpu_s": sum(parts.values()), "cpu_parts": parts}


def median_ci(xs: list[float], n: int = 2000, seed: int = 26) -> tuple[float, float, float]:
    """The median and a bootstrap 90 % interval of the median (percentile method)."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return statistics.median(xs), meds[int(0.05 * n)], meds[int(0.95 * n) - 1]


def measure(args, lab, c, url) -> dict:
    scale = {n: [] for n in (1, 2, 3)}
    pairs = []
    for rep in range(args.reps):
        for n in (1, 2, 3) if rep % 2 == 0 else (3, 2, 1):
            scale[n].append(cluster_run(c.select(["h1", "h2", "h3"][:n]), url, args.users * n, args.duration))
            print(f"rep {rep} engines {n}: {scale[n][-1]['tps']:.0f} req/s", flush=True)
    one = c.select("h1")
    pids = {"engine": [one.engines()[0]["pid"]], "controller": children(c.state["controller_pid"])}
    for k in range(args.pairs):   # ABAB: cluster, local, cluster, local, ...; the order swaps every pair
        order = ("cluster", "local") if k % 2 == 0 else ("local", "cluster")
        got = {}
        for how in order:
            got[how] = (cluster_run(one, url, args.users, args.pair_duration, pids) if how == "cluster"
                        else local_run(lab, url, args.users, args.pair_duration))
        pairs.append(got)
        print(f"pair {k}: cluster {got['cluster']['tps']:.0f} req/s {cpr(got['cluster']):.2f} us/req, "
              f"local {got['local']['tps']:.0f} req/s {cpr(got['local']):.2f} us/req", flush=True)
    return {"scale": scale, "pairs": pairs}


def cpr(r: dict) -> float:
    """CPU microseconds per request."""
    return r["cpu_s"] / max(1, r["responses"]) * 1e6


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
    ps = res["pairs"]
    cl, lo = [p["cluster"]["tps"] for p in ps], [p["local"]["tps"] for p in ps]
    ccl, clo = [cpr(p["cluster"]) for p in ps], [cpr(p["local"]) for p in ps]
    tps_r = median_ci([c / l for c, l in zip(cl, lo)])
    cpu_r = median_ci([c / l for c, l in zip(ccl, clo)])
    lines += ["", f"The cluster path's cost: the same load (1 engine's share, {args.users} users) from h1 via "
              f"the cluster and run locally in h1's namespace, {len(ps)} pairs of {args.pair_duration:g} s runs "
              "interleaved ABAB (the order swapping every pair). CPU/request: the local process's CPU time; "
              "the cluster's engine, controller and client processes' together.", "",
              "| path | req/s (median) | CPU us/request (median) | req/s, runs | CPU us/request, runs |",
              "|---|---|---|---|---|",
              f"| cluster (engine in h1) | {statistics.median(cl):,.0f} | {statistics.median(ccl):.2f} | "
              f"{', '.join(f'{t:,.0f}' for t in cl)} | {', '.join(f'{t:.2f}' for t in ccl)} |",
              f"| local (perfkit in h1) | {statistics.median(lo):,.0f} | {statistics.median(clo):.2f} | "
              f"{', '.join(f'{t:,.0f}' for t in lo)} | {', '.join(f'{t:.2f}' for t in clo)} |",
              "", f"Per pair, cluster / local (median, bootstrap 90 % interval of the median): req/s "
              f"{tps_r[0]:.3f} [{tps_r[1]:.3f}, {tps_r[2]:.3f}] (overhead {100 * (1 - tps_r[0]):+.1f} %); "
              f"CPU per request {cpu_r[0]:.3f} [{cpu_r[1]:.3f}, {cpu_r[2]:.3f}] "
              f"(overhead {100 * (cpu_r[0] - 1):+.1f} %). The cluster path's CPU time per run by process "
              "(median): " + ", ".join(f"{k} {statistics.median(p['cluster']['cpu_parts'][k] for p in ps):.3f} s"
                                      for k in ps[0]["cluster"]["cpu_parts"])
              + f"; the local process's {statistics.median(p['local']['cpu_s'] for p in ps):.3f} s."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--users", type=int, default=8, help="virtual users per engine")
    ap.add_argument("--pairs", type=int, default=16, help="cluster/local pairs for the overhead")
    ap.add_argument("--pair-duration", type=float, default=1.5, help="seconds per overhead run")
    ap.add_argument("--out", default=str(HERE / "RESULTS-cluster.md"))
    args = ap.parse_args()
    before = loadavg()
    lab = Lab(hosts=4, name=f"cl3b{os.getpid() % 10000}").up()
    srv_log = Path(f"/tmp/{lab.name}-serve.jsonl")
    srv = None
    c = None
    try:
        h4 = lab.host("h4")
        url = f"http://{h4.ipv4}:{PORT}/"
        total_s = args.reps * (7 * args.duration + 20) + args.pairs * (2 * args.pair_duration + 12) + 120
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
    out = Path(args.out)   # the newest section first, earlier ones kept below it
    old = out.read_text() if out.exists() else ""
    out.write_text(text + ("\n" + old if old else ""))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
