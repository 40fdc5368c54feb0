#!/usr/bin/env python3
"""perfkit vs Locust (FastHttpUser) vs wrk at the same virtual users against the same nginx
on loopback, side by side in one invocation (issue 27's benchmark).

    .venv/bin/python bench/study_peers.py [--users 10 50 100] [--duration 10] [--reps 1] [--write]

Each cell: one client process at a time against one nginx (1 worker, keep-alive, a 1 KiB
body, its access log on), each tool with one thread of load (perfkit http -u N, its one epoll
thread; locust --headless with FastHttpUser and no wait time, one process; wrk -t1 -c N).
Per cell: the requests the tool counted, over --duration as req/s (the same for every tool;
each tool's own figure beside it: Locust's leaves its ramp out), the requests nginx logged in the
same time (the same server's own count), the client's CPU per request (user + system of the
whole client process from wait4's rusage, start-up included, divided by the requests it
counted) and nginx's CPU per request (its master and worker, /proc/PID/stat around the run).
The tools run in turn within a rep (their order rotates each rep), so a load change on the
machine hits each alike. --write appends the table, the machine and the command to
bench/RESULTS-study.md. Needs nginx and wrk (install.sh), and locust in this venv
(pip install locust): a tool that is missing is skipped and said so. Every target is
127.0.0.1; every run is bounded by --duration (and a timeout).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["PERFKIT_SANDBOX"] = "1"   # the network guard (perfkit/sandbox.py) in every perfkit started
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
HZ = os.sysconf("SC_CLK_TCK")

NGINX_CONF = """
worker_processes 1;
error_log {d}/error.log;
pid {d}/nginx.pid;
worker_rlimit_nofile 16000;
events {{ worker_connections 12000; }}
http {{
    access_log {d}/access.log;
    keepalive_requests 100000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ default_type text/plain; return 200 "{body}"; }}
    }}
}}
"""

LOCUSTFILE = """
from locust import FastHttpUser, constant, task


class User(FastHttpUser):
    wait_time = constant(0)   # closed loop, no think time: as perfkit http and wrk

    @task
    def get(self):
        self.client.get("/")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx on 127.0.0.1 with its files in d: a 1 KiB body, an access log we count."""

    def __init__(self, d: Path):
        self.d, self.port = d, free_port()
        (d / "nginx.conf").write_text(NGINX_CONF.format(d=d, port=self.port, body="x" * 1024))
        self.proc = subprocess.Popen(["nginx", "-c", str(d / "nginx.conf"), "-p", str(d), "-g", "daemon off;"],
                                     stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not start: {self.proc.stderr.read().decode()[-300:]}")
                time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}/"

    def pids(self) -> list[int]:
        try:
            kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        except OSError:
            kids = []
        return [self.proc.pid, *map(int, kids)]

    def cpu_s(self) -> float:
        total = 0
        for pid in self.pids():
            try:
                rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(rest[11]) + int(rest[12])
            except (OSError, IndexError):
                pass
        return total / HZ

    def logged(self) -> int:
        p = self.d / "access.log"
        with open(p, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(10)


def run_client(argv: list[str], out: Path, timeout: float, cwd: str = "/") -> tuple[int, float, float]:
    """Start argv, wait for it with wait4: (exit status, its CPU seconds user + system, wall s)."""
    t0 = time.monotonic()
    with open(out, "wb") as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(p.pid, signal.SIGKILL)
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
    p.returncode = os.waitstatus_to_exitcode(status)   # reaped here: Popen must not wait again
    return p.returncode, ru.ru_utime + ru.ru_stime, time.monotonic() - t0


def perfkit_cell(url: str, users: int, secs: float, tmp: Path) -> dict:
    out = tmp / "perfkit.out"
    rc, cpu, wall = run_client([str(BIN / "perfkit"), "http", url, "-u", str(users), "-t", f"{secs:g}s", "--json"],
                               out, secs + 60)
    text = out.read_text(errors="replace")
    if rc != 0:
        raise RuntimeError(f"perfkit exit {rc}: {text[-300:]}")
    s = next(json.loads(ln)["summary"] for ln in reversed(text.splitlines()) if ln.startswith('{"summary"'))
    return {"requests": s["responses"], "own_rps": s["tps"], "mean_ms": s["mean_test_time_ms"],
            "errors": s["http_err"] + s["http_cut"], "cpu_s": cpu, "wall_s": wall}


def locust_cell(url: str, users: int, secs: float, tmp: Path) -> dict:
    (tmp / "locustfile.py").write_text(LOCUSTFILE)
    out = tmp / "locust.out"
    rc, cpu, wall = run_client([str(BIN / "locust"), "-f", str(tmp / "locustfile.py"), "--headless", "-u", str(users),
                                "-r", str(users), "-t", f"{secs:g}s", "--host", url.rstrip("/"), "--only-summary",
                                "--loglevel", "WARNING", "--stop-timeout", "1"], out, secs + 60, cwd=str(tmp))
    text = out.read_text(errors="replace")
    # the summary's first Aggregated line: requests, failures | avg min max med | req/s failures/s
    m = re.search(r"Aggregated\s+(\d+)\s+(\d+)\([^)]*\)\s*\|\s*([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*\|"
                  r"\s*([\d.]+)", text)
    if rc not in (0, 1) or not m:   # 1: locust's exit status when any request failed
        raise RuntimeError(f"locust exit {rc}: {text[-300:]}")
    return {"requests": int(m.group(1)), "own_rps": float(m.group(4)), "mean_ms": float(m.group(3)),
            "errors": int(m.group(2)), "cpu_s": cpu, "wall_s": wall}


def wrk_cell(url: str, users: int, secs: float, tmp: Path) -> dict:
    out = tmp / "wrk.out"
    rc, cpu, wall = run_client(["wrk", "-t1", f"-c{users}", f"-d{secs:g}s", url], out, secs + 60)
    text = out.read_text(errors="replace")
    m, r = re.search(r"(\d+) requests in ([\d.]+)(\w+)", text), re.search(r"Requests/sec:\s+([\d.]+)", text)
    if rc != 0 or not m or not r:
        raise RuntimeError(f"wrk exit {rc}: {text[-300:]}")
    lat = re.search(r"Latency\s+([\d.]+)(us|ms|s)", text)
    mean_ms = float(lat.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[lat.group(2)] if lat else None
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    return {"requests": int(m.group(1)), "own_rps": float(r.group(1)), "mean_ms": mean_ms,
            "errors": (int(errs.group(1)) if errs else 0) + (sum(map(int, sock.groups())) if sock else 0),
            "cpu_s": cpu, "wall_s": wall}


TOOLS = {"perfkit": perfkit_cell, "locust": locust_cell, "wrk": wrk_cell}


def available() -> dict[str, str | None]:
    """tool -> None where it runs here, else why not."""
    return {"perfkit": None if (BIN / "perfkit").exists() else f"no {BIN / 'perfkit'}",
            "locust": None if (BIN / "locust").exists() else f"no {BIN / 'locust'} (pip install locust)",
            "wrk": None if shutil.which("wrk") else "no wrk (apt install wrk)"}


def table(cells: list[dict], users: list[int], tools: list[str]) -> str:
    lines = ["| tool | users | req/s | its own req/s | requests | nginx logged | mean ms | errors | client CPU µs/req | "
             "nginx CPU µs/req |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t in tools:
        for u in users:
            for c in (c for c in cells if c["tool"] == t and c["users"] == u):
                mean = f"{c['mean_ms']:.2f}" if c.get("mean_ms") is not None else "-"
                per = lambda s: f"{1e6 * s / c['requests']:.1f}" if c["requests"] else "-"  # noqa: E731
                lines.append(f"| {t} | {u} | {c['rps']:,.0f} | {c['own_rps']:,.0f} | {c['requests']:,} | {c['logged']:,} | {mean} | "
                             f"{c['errors']:,} | {per(c['cpu_s'])} | {per(c['nginx_cpu_s'])} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per cell (1..60)")
    ap.add_argument("--reps", type=int, default=1, help="rounds over every cell (1..5)")
    ap.add_argument("--only", nargs="+", choices=list(TOOLS), default=list(TOOLS))
    ap.add_argument("--write", action="store_true", help="append the table to bench/RESULTS-study.md")
    a = ap.parse_args()
    if not 1 <= a.duration <= 60 or not 1 <= a.reps <= 5 or not all(1 <= u <= 1000 for u in a.users):
        ap.error("--duration 1..60, --reps 1..5, --users 1..1000 each")
    if not shutil.which("nginx"):
        print("study_peers: no nginx here (install.sh installs nginx-light)", file=sys.stderr)
        return 2
    why = available()
    tools = [t for t in a.only if why[t] is None]
    for t in a.only:
        if why[t]:
            print(f"study_peers: {t} skipped: {why[t]}", file=sys.stderr)
    cells: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="pk-study-peers-") as td:
        tmp = Path(td)
        ngx = Nginx(tmp)
        try:
            for rep in range(a.reps):
                order = tools[rep % len(tools):] + tools[:rep % len(tools)]
                for u in a.users:
                    for t in order:
                        n0, c0 = ngx.logged(), ngx.cpu_s()
                        cell = TOOLS[t](ngx.url, u, a.duration, tmp)
                        cell.update(tool=t, users=u, rep=rep, logged=ngx.logged() - n0, nginx_cpu_s=ngx.cpu_s() - c0,
                                    rps=cell["requests"] / a.duration)
                        cells.append(cell)
                        print(f"{t:>8} {u:>4} users: {cell['rps']:>10,.0f} req/s  {cell['requests']:>9,} requests "
                              f"(nginx logged {cell['logged']:,})  client {1e6 * cell['cpu_s'] / max(cell['requests'], 1):.1f}"
                              f" µs/req", flush=True)
        finally:
            ngx.stop()
    text = table(cells, a.users, tools)
    print(text)
    if a.write:
        load = os.getloadavg()
        head = (f"\n## perfkit vs Locust vs wrk ({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)\n\n"
                f"    .venv/bin/python bench/study_peers.py --users {' '.join(map(str, a.users))} "
                f"--duration {a.duration:g} --reps {a.reps} --write\n\n"
                f"{platform.node()}, {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the "
                f"end; nginx 1 worker, 1 KiB body, keep-alive, on 127.0.0.1; {a.duration:g} s per cell, "
                f"{a.reps} rep(s) (every rep a row).\n\n")
        with open(HERE / "RESULTS-study.md", "a") as f:
            f.write(head + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
