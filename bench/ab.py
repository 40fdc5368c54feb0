#!/usr/bin/env python3
"""Two perfkit installs side by side in one invocation: did a change cost speed?

    python3 bench/ab.py --a /path/before/.venv/bin/python --b /path/after/.venv/bin/python \\
        [--reps 9] [--duration 3] [--only udp64_pps dpdk_tx]

Each rep runs every row once with A and once with B, in alternating order (A B, then B A),
each run in a fresh process of that interpreter (-P: the source tree never shadows the
install). The rows are bench/run.py's udp64_pps (LocalTest udp_bw, 64 B, loopback: rx pps)
and dpdk_tx (DpdkFlows on net_null, 64 B frames: tx pps). Per row: both medians, the ratio
B / A, in how many pairs B was ahead and the sign test's p. Within noise means the pairs do
not favour either side (p >= 0.05) or the ratio is within 3 %. The table, the machine and
every run go to bench/RESULTS-ab.md. Nothing but 127.0.0.1 and net_null is a target.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

os.environ["PERFKIT_SANDBOX"] = "1"   # the network guard (perfkit/sandbox.py) in every run started
HERE = Path(__file__).resolve().parent

# One row: the Python a fresh interpreter runs (prints the summary as JSON) and the figure compared.
ROWS = {
    "udp64_pps": ("""
import json, sys, perfkit
spec = perfkit.LocalTest(test="udp_bw", host="127.0.0.1", duration=float(sys.argv[1]), size=64)
run = perfkit.Run(spec).run()
print(json.dumps(dict(run.summary), default=str))
""", "rx_pps"),
    "dpdk_tx": ("""
import json, sys, perfkit
from perfkit.spec import DpdkFlows
spec = DpdkFlows(port="net_null0,no-rx=1", size=64, duration=float(sys.argv[1]))
run = perfkit.Run(spec, engine="dpdk").run()
print(json.dumps(dict(run.summary), default=str))
""", "tx_pps"),
}


def one_run(python: str, row: str, seconds: float) -> float:
    """One row, once, with one install: the figure (an error names the row and install)."""
    code, key = ROWS[row]
    cp = subprocess.run([python, "-P", "-c", code, str(seconds)], capture_output=True, text=True,
                        timeout=seconds + 60, cwd="/")
    if cp.returncode != 0:
        raise RuntimeError(f"{row} with {python}: exit {cp.returncode}: {cp.stderr.strip()[-400:]}")
    summary = json.loads(cp.stdout.strip().splitlines()[-1])
    return float(summary[key])


def sign_p(ahead: int, n: int) -> float:
    """Two-sided sign test: the chance of a split at least this uneven were neither side ahead."""
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(ahead, n - ahead) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def verdict(ratio: float, p: float) -> str:
    return "within noise" if p >= 0.05 or abs(ratio - 1) <= 0.03 else ("B faster" if ratio > 1 else "B slower")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="python of install A (before)")
    ap.add_argument("--b", required=True, help="python of install B (after)")
    ap.add_argument("--label-a", default="A")
    ap.add_argument("--label-b", default="B")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--only", nargs="+", choices=sorted(ROWS), default=list(ROWS))
    ap.add_argument("--out", default=str(HERE / "RESULTS-ab.md"))
    args = ap.parse_args()
    if not 1 <= args.reps <= 50 or not 0.5 <= args.duration <= 30:
        ap.error("--reps 1..50 and --duration 0.5..30 s (every run is bounded)")
    runs: dict[str, list[tuple[float, float]]] = {row: [] for row in args.only}
    for rep in range(args.reps):
        for row in args.only:
            order = (("a", args.a), ("b", args.b)) if rep % 2 == 0 else (("b", args.b), ("a", args.a))
            got = {side: one_run(py, row, args.duration) for side, py in order}
            runs[row].append((got["a"], got["b"]))
            print(f"rep {rep + 1} {row}: {args.label_a} {got['a']:,.0f}  {args.label_b} {got['b']:,.0f}  "
                  f"B/A {got['b'] / got['a']:.3f}", flush=True)
    lines = [f"# A/B: {args.label_a} vs {args.label_b}", "",
             f"{datetime.datetime.now().isoformat(timespec='seconds')}, {platform.node()}, "
             f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} at the end", "",
             f"Command: `{shlex.join([sys.executable, *sys.argv])}`", "",
             "| row | figure | A median | B median | B / A | pairs B ahead | sign p | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for row, pairs in runs.items():
        a = statistics.median(x for x, _ in pairs)
        b = statistics.median(y for _, y in pairs)
        ahead, n = sum(y > x for x, y in pairs), sum(y != x for x, y in pairs)
        p = sign_p(ahead, n)
        lines.append(f"| {row} | {ROWS[row][1]} | {a:,.0f} | {b:,.0f} | {b / a:.3f} | {ahead} of {n} | "
                     f"{p:.2g} | {verdict(b / a, p)} |")
    lines += ["", "Every run (A, B):", ""]
    lines += [f"- {row}: " + ", ".join(f"({x:,.0f}, {y:,.0f})" for x, y in pairs) for row, pairs in runs.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
