#!/usr/bin/env python3
"""perfkit side by side with iperf3, sockperf and qperf, on loopback and between two lab hosts.

    python3 bench/run.py [--reps 3] [--duration 5] [--only udp64_pps tcp_lat vs_qperf http_keepalive ...]

Each comparison runs perfkit and its peer tool(s) alternately (perfkit, peer,
perfkit, peer, ...) for --reps rounds, takes the median of each side and prints
the ratio of the medians against the target. The same table, with the machine,
the command line and every single run, goes to bench/RESULTS.md.

Every process is bounded in time: clients run under a subprocess timeout,
servers under coreutils `timeout` and are killed (their own process group,
by id) as soon as their client is done, or at exit. Every run gets its own
ports. Nothing but 127.0.0.1 is ever a target, except in vs_qperf's veth part:
there clients in a perfkit lab's host h1 talk to servers in its host h2 over the
lab's veth pair (198.18.0.0/15), and the lab is taken down at the end, also on
errors and Ctrl-C. The DPDK rows (dpdk_tx, dpdk_memif, dpdk_veth, dpdk_xdp, dpdk_fwd) send into
net_null, between two processes over memif (no kernel sees those frames), between the two
hosts of a lab of their own over af_packet or af_xdp, and forward between two net_null ports.
"""
from __future__ import annotations

import argparse
import atexit
import datetime
import json
import math
import os
import platform
import random
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ["PERFKIT_SANDBOX"] = "1"   # the network guard (perfkit/sandbox.py), here and in every process started
HOST = "127.0.0.1"              # the only address any process here talks to
HERE = Path(__file__).resolve().parent
PEER_TOOLS = ("iperf3", "qperf", "sockperf")   # command name = Debian package name
LAT_SIZE = 64                   # message size of every latency test (sockperf needs >= 14)
UDP_SIZE = 64                   # datagram payload of the UDP rate tests
LOSS_RATE_SHARE = 0.75          # udp64_loss offers this share of iperf3's measured max rx rate
GROUPS = ("udp64_pps", "udp64_loss", "tcp_bw", "udp_lat", "tcp_lat", "vs_qperf",
          "http_keepalive", "http_users20k", "http_close",   # 20k before close: no TIME_WAIT pile then
          "dpdk_tx", "dpdk_memif", "dpdk_veth", "dpdk_xdp", "dpdk_fwd")
DPDK_GROUPS = ("dpdk_tx", "dpdk_memif", "dpdk_veth", "dpdk_xdp", "dpdk_fwd")   # --only dpdk: all five


class BenchError(RuntimeError):
    """One run failed: timeout, non-zero exit or output we cannot read."""


class ClientFailed(BenchError):
    """A client exited non-zero; what it printed before is in .stdout."""

    def __init__(self, msg: str, stdout: str = ""):
        super().__init__(msg)
        self.stdout = stdout


# ------------------------------------------------------------------ processes

_LIVE_SERVERS: list["Server"] = []


class Server:
    """A server process in its own session, bounded by `timeout`, always killed on exit.

        with Server(cmd, lifetime=35) as srv:
            srv.wait_listening(port, "tcp")
            ... run the client ...
            out, err = srv.finish(wait=5)   # let it exit by itself (iperf3 -1), else kill
    """

    def __init__(self, cmd: list[str], lifetime: float):
        self.cmd = [str(c) for c in cmd]
        self._out = tempfile.TemporaryFile(mode="w+")
        self._err = tempfile.TemporaryFile(mode="w+")
        # `timeout` bounds the server even if this script is killed with SIGKILL
        full = ["timeout", "-k", "2", f"{lifetime:.0f}", *self.cmd]
        self.proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                     text=True, start_new_session=True)
        self.result: tuple[str, str] | None = None
        _LIVE_SERVERS.append(self)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.finish(wait=0)

    def _kill(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)   # the group this script created for this server only
        except ProcessLookupError:
            pass

    def finish(self, wait: float = 0.0) -> tuple[str, str]:
        """Wait up to `wait` s for a natural exit, then SIGTERM, then SIGKILL. Returns (stdout, stderr)."""
        if self.result is not None:
            return self.result
        try:
            self.proc.wait(timeout=wait if wait > 0 else 0.01)
        except subprocess.TimeoutExpired:
            self._kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self._kill(signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._kill(signal.SIGKILL)          # anything left in its group (normally nothing)
        self._out.seek(0)
        self._err.seek(0)
        self.result = (self._out.read(), self._err.read())
        self._out.close()
        self._err.close()
        if self in _LIVE_SERVERS:
            _LIVE_SERVERS.remove(self)
        return self.result

    def wait_listening(self, port: int, proto: str, timeout: float = 5.0) -> None:
        """Block until the server has its socket on `port` (read from /proc/net, no probe traffic)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if port_in_use(port, proto, listening_only=True):
                return
            if self.proc.poll() is not None:
                out, err = self.finish()
                raise BenchError(f"{self.cmd[0]} server exited early: {(err or out).strip()[-300:]}")
            time.sleep(0.02)
        self.finish()
        raise BenchError(f"{self.cmd[0]} server did not open {proto} port {port} within {timeout:g} s")


_MAIN_PID = os.getpid()


def kill_all_servers() -> None:
    if os.getpid() != _MAIN_PID:   # a forked helper (lab.call, pyroute2) owns none of them
        return
    for srv in list(_LIVE_SERVERS):
        srv.finish(wait=0)


def _on_sigterm(signum, frame):
    """SIGTERM is Ctrl-C for this script; a forked helper process (pyroute2's namespace
    maker, lab.call) that gets one just exits, never running this script's main on."""
    if os.getpid() != _MAIN_PID:
        os._exit(128 + signum)
    raise KeyboardInterrupt


def run_client(cmd: list, timeout: float) -> subprocess.CompletedProcess:
    """Run a client to completion; a timeout or a non-zero exit is a BenchError."""
    cmd = [str(c) for c in cmd]
    try:
        cp = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(cmd)}: no result within {timeout:g} s") from None
    if cp.returncode != 0:
        tail = (cp.stderr or cp.stdout).strip()[-400:]
        raise BenchError(f"{' '.join(cmd)}: exit {cp.returncode}: {tail}")
    return cp


# ----------------------------------------------------------------------- ports

def port_in_use(port: int, proto: str, listening_only: bool = False) -> bool:
    """Is a socket bound to this local port? proto is 'tcp' or 'udp'."""
    for path in (f"/proc/net/{proto}", f"/proc/net/{proto}6"):
        try:
            lines = Path(path).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if int(parts[1].rsplit(":", 1)[1], 16) != port:
                continue
            if proto == "udp" or not listening_only or parts[3] == "0A":  # 0A = LISTEN
                return True
    return False


class Ports:
    """Hands out a fresh port for every run: free for TCP and UDP on 127.0.0.1, never reused."""

    def __init__(self, base: int):
        self.next_port = base

    def take(self) -> int:
        while self.next_port < 65000:
            port = self.next_port
            self.next_port += 1
            if port_in_use(port, "tcp") or port_in_use(port, "udp"):
                continue
            if all(_bindable(port, kind) for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM)):
                return port
        raise BenchError("ran out of ports")


def _bindable(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


# ---------------------------------------------------------------- tool runners

def perfkit_cmd() -> list[str]:
    """The installed perfkit, run by this interpreter (-P: the source tree never shadows it)."""
    return [sys.executable, "-P", "-m", "perfkit"]


PERFKIT_CLIENT = "api"   # --perfkit-client: "api" (perfkit from Python, in a fork) or "cli" (a command)


def in_fork(fn, *args, timeout: float):
    """fn(*args) in a forked child of this process, in a session of its own (as the peer
    tools' processes are: with autogroup scheduling, the CPU share follows the session);
    its pickled result or exception comes back. The child is killed after timeout s.
    perfkit is imported once, here, instead of once per run: an editable install
    re-checks (and on a busy shared tree, rebuilds) its native code on every import."""
    import pickle
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # child: never returns into this script
        try:
            os.close(r)
            os.setsid()
            try:
                res = (True, fn(*args))
            except BaseException as exc:   # noqa: BLE001 (reported to the parent)
                res = (False, exc)
            try:
                data = pickle.dumps(res)
            except Exception as exc:       # noqa: BLE001
                data = pickle.dumps((False, BenchError(f"cannot pickle {res[1]!r}: {exc}")))
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(0)
    os.close(w)
    chunks, deadline, done = [], time.monotonic() + timeout, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                raise BenchError(f"{getattr(fn, '__name__', fn)}: no result within {timeout:g} s")
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        done = True
    finally:
        os.close(r)
        if not done:   # timed out, or Ctrl-C here: the child goes too
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    if not chunks:
        raise BenchError(f"{getattr(fn, '__name__', fn)}: the child died without an answer")
    ok, value = pickle.loads(b"".join(chunks))
    if ok:
        return value
    raise value


def _run_to_end(spec, what: str, **run_kw) -> dict:
    """spec run to the end in this (forked) process: its summary (a BenchError naming what on an error)."""
    import perfkit
    from perfkit.errors import EngineError
    run = perfkit.Run(spec, **run_kw)
    run.start()
    try:
        run.wait()
    except EngineError:
        pass
    if run.error:
        raise BenchError(f"{what}: {run.error}")
    return dict(run.summary)


def _perfkit_local_api(test, duration, size, rate, busy_poll, gso) -> dict:
    """What `perfkit local TEST --json` runs (cli._local: a LocalTest, then Run), from Python."""
    import perfkit
    spec = perfkit.LocalTest(test=test, host=HOST, duration=duration, size=size, rate=rate, busy_poll=busy_poll,
                             gso=gso)
    return _run_to_end(spec, f"perfkit local {test}")


def run_perfkit(test: str, duration: float, size: int | None = None, rate: str | None = None,
                busy_poll: bool = False, gso: int | None = None) -> dict:
    """perfkit local TEST: the summary dict. With --perfkit-client cli, the command with
    --json (its last line); with api (default), the same spec and Run in a fork of this process.
    gso None: perfkit's default (udp_bw on loopback: 8 datagrams per UDP GSO send)."""
    if PERFKIT_CLIENT == "api":
        return in_fork(_perfkit_local_api, test, duration, size, rate, busy_poll, gso, timeout=duration + 30)
    cmd = [*perfkit_cmd(), "local", test, "--host", HOST, "--duration", f"{duration:g}s", "--json"]
    if gso is not None:
        cmd += ["--gso", str(gso)]
    if size is not None:
        cmd += ["--size", size]
    if rate is not None:
        cmd += ["--rate", rate]
    if busy_poll:
        cmd.append("--busy-poll")
    cp = run_client(cmd, timeout=duration + 30)
    for line in reversed(cp.stdout.strip().splitlines()):
        if line.startswith('{"summary"'):
            return json.loads(line)["summary"]
    raise BenchError(f"perfkit {test}: no summary line in its output")


def run_iperf3_udp(ports: Ports, duration: float, size: int, bitrate: int) -> dict:
    """iperf3 -u -l SIZE -b BITRATE; counts from the server's (receiver's) -J report.

    received = packets - lost_packets (iperf3 counts `packets` from the highest
    sequence number it saw); rx_pps = received / the server's seconds.
    """
    port = ports.take()
    with Server(["iperf3", "-s", "-1", "-J", "-B", HOST, "-p", port], lifetime=duration + 40) as srv:
        srv.wait_listening(port, "tcp")
        cli = run_client(["iperf3", "-c", HOST, "-p", port, "-u", "-l", size, "-b", bitrate,
                          "-t", f"{duration:g}", "-J"], timeout=duration + 25)
        srv_out, _ = srv.finish(wait=5)
    server = _iperf3_json(srv_out, "server")
    client = _iperf3_json(cli.stdout, "client")
    recv = server["end"]["sum_received"]
    received = recv["packets"] - recv["lost_packets"]
    cpu = client["end"]["cpu_utilization_percent"]
    return {
        "sent": client["end"]["sum_sent"]["packets"],
        "received": received,
        "received_by_bytes": recv["bytes"] // size,
        "lost": recv["lost_packets"],
        "loss_pct": 100.0 * recv["lost_packets"] / recv["packets"] if recv["packets"] else 0.0,
        "seconds": recv["seconds"],
        "rx_pps": received / recv["seconds"],
        "tx_pps": client["end"]["sum_sent"]["packets"] / client["end"]["sum_sent"]["seconds"],
        "cpu_sender": cpu["host_total"],
        "cpu_receiver": cpu["remote_total"],
    }


def run_iperf3_tcp(ports: Ports, duration: float, length: str | None = None) -> dict:
    """iperf3 single-stream TCP writing `length` per send (None: its default, 128 KiB);
    receiver bits/s from the server's -J report."""
    port = ports.take()
    with Server(["iperf3", "-s", "-1", "-J", "-B", HOST, "-p", port], lifetime=duration + 40) as srv:
        srv.wait_listening(port, "tcp")
        cli = run_client(["iperf3", "-c", HOST, "-p", port, "-t", f"{duration:g}", "-J"]
                         + (["-l", length] if length else []), timeout=duration + 25)
        srv_out, _ = srv.finish(wait=5)
    server = _iperf3_json(srv_out, "server")
    client = _iperf3_json(cli.stdout, "client")
    cpu = client["end"]["cpu_utilization_percent"]
    return {
        "rx_bps": server["end"]["sum_received"]["bits_per_second"],
        "retransmits": client["end"]["sum_sent"].get("retransmits"),
        "cpu_sender": cpu["host_total"],
        "cpu_receiver": cpu["remote_total"],
    }


def _iperf3_json(text: str, side: str) -> dict:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise BenchError(f"iperf3 {side}: no JSON report: {text.strip()[-300:]!r}") from None
    if "error" in doc:
        raise BenchError(f"iperf3 {side}: {doc['error']}")
    return doc


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_sockperf(ports: Ports, duration: float, size: int, tcp: bool) -> dict:
    """sockperf ping-pong --full-rtt: ROUND-TRIP percentiles, parsed from its summary lines.

    Without --full-rtt sockperf prints RTT/2 ("latency"); --full-rtt makes it print the
    round trip itself ("avg-rtt", "Round trip is"). As a check we also derive the mean
    round trip from its own message count: valid RunTime / ReceivedMessages.
    """
    port = ports.take()
    proto = ["--tcp"] if tcp else []
    with Server(["sockperf", "server", "-i", HOST, "-p", port, *proto], lifetime=duration + 40) as srv:
        srv.wait_listening(port, "tcp" if tcp else "udp")
        cli = run_client(["sockperf", "ping-pong", "-i", HOST, "-p", port, "-m", size,
                          "-t", f"{duration:g}", "--full-rtt", *proto], timeout=duration + 25)
    text = _ANSI.sub("", cli.stdout + "\n" + cli.stderr)
    pct = {float(p): float(v) for p, v in re.findall(r"percentile\s+([0-9.]+)\s*=\s*([0-9.]+)", text)}
    avg = re.search(r"avg-rtt=([0-9.]+)", text)
    valid = re.search(r"\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", text)
    if 50.0 not in pct or not avg or not valid or "Round trip is" not in text:
        raise BenchError(f"sockperf: cannot read its summary: {text.strip()[-400:]!r}")
    runtime, received = float(valid.group(1)), int(valid.group(3))
    return {
        "rtt_p50_us": pct[50.0],
        "rtt_p99_us": pct.get(99.0),
        "rtt_mean_us": float(avg.group(1)),
        "rtt_mean_from_rate_us": 1e6 * runtime / received if received else None,
        "round_trips": received,
    }


def run_qperf(ports: Ports, duration: float, test: str, size: int | None = None) -> dict:
    """qperf HOST TEST with -uu (plain units: bytes/sec, ns) and -v (CPU use).

    qperf's *_lat is 'one way latency': the mean round trip / 2.
    """
    listen, data = ports.take(), ports.take()
    with Server(["qperf", "--listen_port", listen], lifetime=duration + 40) as srv:
        srv.wait_listening(listen, "tcp")
        cmd = ["qperf", HOST, "--listen_port", listen, "--ip_port", data, "-t", f"{duration:g}", "-uu", "-v"]
        if size is not None:
            cmd += ["-m", size]
        cli = run_client([*cmd, test], timeout=duration + 25)
    fields = {k: v for k, v in re.findall(r"^\s*(\w+)\s*=\s*([0-9.]+)", cli.stdout, re.M)}
    out: dict = {"cpu_local": _num(fields, "loc_cpus_used", "send_cpus_used"),
                 "cpu_remote": _num(fields, "rem_cpus_used", "recv_cpus_used")}
    if test.endswith("_bw"):
        if "bw" not in fields:
            raise BenchError(f"qperf {test}: no bw in {cli.stdout.strip()!r}")
        out["bw_bps"] = float(fields["bw"]) * 8
    else:
        if "latency" not in fields:
            raise BenchError(f"qperf {test}: no latency in {cli.stdout.strip()!r}")
        out["latency_us"] = float(fields["latency"]) / 1000.0   # -uu prints ns
    return out


def _num(fields: dict, *names: str) -> float | None:
    for n in names:
        if n in fields:
            return float(fields[n])
    return None


# --------------------------------------------------------------- the bench run

@dataclass
class Row:
    name: str
    metric: str                  # what both columns hold
    perfkit: str
    peer: str                    # "<value> (<tool>)"
    ratio: str
    target: str
    status: str                  # pass, FAIL, info, skipped, error


VS_TESTS = ("tcp_bw", "tcp_lat", "udp_bw", "udp_lat", "sctp_bw", "sctp_lat")   # vs_qperf's qperf tests, in report order


@dataclass
class Bench:
    reps: int
    duration: float
    ports: Ports
    tools: set[str]              # peer tools found on this machine
    loss_rate: int | None = None
    rows: list[Row] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    iperf3_max_rx_pps: float | None = None
    vs_duration: float = 2.0     # vs_qperf: seconds per run
    vs_paths: tuple = ("loopback", "veth")
    vs_tests: tuple = VS_TESTS   # vs_qperf: which qperf tests
    vs_client: str = "api"       # vs_qperf: perfkit test from Python (api) or as a command (cli)
    vs_pin: tuple | None = None  # vs_qperf: (client CPU, server CPU) for both tools (-lca/-rca), or unpinned
    vs_access_recv: bool = False  # vs_qperf: both tools' receivers read the data (-ar 1)
    vs_busy_poll: bool | None = None  # vs_qperf: perfkit's --busy-poll 0|1; None: its default
    vs_rows: list[Row] = field(default_factory=list)
    vs_details: list[str] = field(default_factory=list)
    vs_paired: list[list[str]] = field(default_factory=list)   # vs_qperf: the reps' pairs, per row
    http_rows: list[Row] = field(default_factory=list)
    http_details: list[str] = field(default_factory=list)
    dpdk_rows: list[Row] = field(default_factory=list)
    dpdk_details: list[str] = field(default_factory=list)
    bare: Path | None = None     # the compiled bench/dpdk_bare.c
    bare_error: str | None = None
    errors: int = 0
    _done: int = 0

    def have(self, tool: str) -> bool:
        return tool in self.tools

    def attempt(self, label: str, fn, *args, show=None, **kw):
        """One run; prints a progress line; a failed run is reported and returns None."""
        self._done += 1
        t0 = time.monotonic()
        try:
            res = fn(*args, **kw)
        except BenchError as exc:
            self.errors += 1
            print(f"  [{self._done:3d}] {label}: ERROR {exc}", flush=True)
            return None
        shown = show(res) if show else ""
        print(f"  [{self._done:3d}] {label}: {shown}  ({time.monotonic() - t0:.1f} s)", flush=True)
        return res


def med(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def pick(results: list, key: str) -> list:
    return [r[key] if r is not None else None for r in results]


def cpu_str(summary: dict) -> str:
    """One perfkit run's CPU % per worker thread."""
    return ", ".join(f"{n} {v:.0f}%" for n, v in (summary.get("cpu_pct_by_worker") or {}).items())


def worker_cpu(results: list[dict | None]) -> str:
    """Median CPU % of each perfkit worker thread over the runs, from cpu_pct_by_worker."""
    byw: dict[str, list[float]] = {}
    for r in results:
        for name, v in ((r or {}).get("cpu_pct_by_worker") or {}).items():
            byw.setdefault(name, []).append(v)
    return ", ".join(f"{n} {statistics.median(v):.0f}%" for n, v in byw.items()) or "n/a"


def ratio_interval(pk_runs, peer_runs, resamples: int = 2000) -> tuple[float, float] | None:
    """95% bootstrap interval of median(perfkit) / median(peer): each tool's runs resampled
    with replacement, independently (fixed seed, so a report can be recomputed)."""
    pk_runs = [v for v in pk_runs if v is not None]
    peer_runs = [v for v in peer_runs if v]
    if len(pk_runs) < 3 or len(peer_runs) < 3:
        return None
    rng = random.Random(0)
    ratios = sorted(statistics.median(rng.choices(pk_runs, k=len(pk_runs)))
                    / statistics.median(rng.choices(peer_runs, k=len(peer_runs))) for _ in range(resamples))
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def paired_tally(pk_runs, peer_runs, higher_better: bool) -> tuple[int, int, float, float] | None:
    """The reps in which both tools measured, taken as pairs (they ran back to back, so a
    slow spell of the machine hits both): in how many perfkit was ahead, of how many pairs
    that differ, the median of the per-rep ratios perfkit / peer, and the two-sided sign
    test's p (the chance of a split at least this uneven were neither tool ahead)."""
    pairs = [(a, b) for a, b in zip(pk_runs, peer_runs) if a is not None and b]
    if len(pairs) < 3:
        return None
    ahead = sum(a > b if higher_better else a < b for a, b in pairs)
    n = sum(a != b for a, b in pairs)
    tail = sum(math.comb(n, i) for i in range(min(ahead, n - ahead) + 1)) / 2 ** n
    return ahead, n, statistics.median(a / b for a, b in pairs), min(1.0, 2 * tail)


def ratio_row(name, metric, pk, peer, tool, fmt, target: float | None, higher_better: bool,
              runs: tuple[list, list] | None = None) -> Row:
    """Row with ratio = median(perfkit) / median(peer); target None means info only. With
    runs (each tool's values) the ratio also shows its 95% bootstrap interval."""
    ratio = pk / peer if pk is not None and peer else None
    interval = ratio_interval(*runs) if runs and ratio is not None else None
    if tool is None:
        status = "skipped"
    elif ratio is None:
        status = "error"
    elif target is None:
        status = "info"
    else:
        ok = ratio >= target if higher_better else ratio <= target
        status = "pass" if ok else "FAIL"
    tgt = "info" if target is None else (f">= {target:g}" if higher_better else f"<= {target:g}")
    return Row(name, metric, fmt(pk), f"{fmt(peer)} ({tool})" if tool else "—",
               "—" if ratio is None else f"{ratio:.2f}" + (f" ({interval[0]:.2f}-{interval[1]:.2f})" if interval else ""),
               tgt, status)


def fmt_pps(v):
    return "—" if v is None else f"{v / 1e3:.1f} kpps"


def fmt_bps(v):
    return "—" if v is None else f"{v / 1e9:.2f} Gbit/s"


def fmt_us(v):
    return "—" if v is None else f"{v:.2f} µs"


def f0(v, unit=""):
    return "—" if v is None else f"{v:.0f}{unit}"


def detail_table(title: str, header: list[str], lines: list[list[str]], notes: list[str]) -> list[str]:
    out = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return out + [""] + [f"- {n}" for n in notes] + [""]


# ------------------------------------------------------------ the comparisons

def bench_udp64_pps(b: Bench) -> None:
    print(f"udp64_pps: received {UDP_SIZE}-byte datagrams/s, unlimited rate", flush=True)
    pk, plain, ip = [], [], []
    show = lambda r: f"rx {fmt_pps(r['rx_pps'])}, lost {r['lost']}, cpu {cpu_str(r)}"  # noqa: E731
    for rep in range(b.reps):
        # perfkit's default (UDP GSO, 8 datagrams per send), then one datagram per message as iperf3 sends
        pk.append(b.attempt(f"rep {rep + 1} perfkit udp_bw", run_perfkit, "udp_bw", b.duration, size=UDP_SIZE,
                            show=show))
        plain.append(b.attempt(f"rep {rep + 1} perfkit udp_bw --gso 0", run_perfkit, "udp_bw", b.duration,
                               size=UDP_SIZE, gso=0, show=show))
        if b.have("iperf3"):
            ip.append(b.attempt(f"rep {rep + 1} iperf3 -u -b 0", run_iperf3_udp, b.ports, b.duration, UDP_SIZE, 0,
                                show=lambda r: f"rx {fmt_pps(r['rx_pps'])} (tx {fmt_pps(r['tx_pps'])}), "
                                               f"lost {r['loss_pct']:.1f}%"))
    b.iperf3_max_rx_pps = med(pick(ip, "rx_pps"))
    b.rows.append(ratio_row("udp64_pps", f"rx pps, {UDP_SIZE} B", med(pick(pk, "rx_pps")), b.iperf3_max_rx_pps,
                            "iperf3" if b.have("iperf3") else None, fmt_pps, 1.3, True))
    b.rows.append(ratio_row("udp64_pps --gso 0", f"rx pps, {UDP_SIZE} B", med(pick(plain, "rx_pps")),
                            b.iperf3_max_rx_pps, "iperf3" if b.have("iperf3") else None, fmt_pps, None, True))
    lines = [[str(i + 1), fmt_pps((p or {}).get("rx_pps")), fmt_pps((p or {}).get("tx_pps")),
              f0((p or {}).get("lost")), fmt_pps((q or {}).get("rx_pps")), fmt_pps((q or {}).get("tx_pps")),
              "—" if not q else f"{q['lost']} ({q['loss_pct']:.1f}%)",
              "—" if not q else f"{q['cpu_sender']:.0f}% / {q['cpu_receiver']:.0f}%"]
             for i, (p, q) in enumerate(zip(pk, ip + [None] * (len(pk) - len(ip))))]
    b.details += detail_table(
        "udp64_pps", ["rep", "perfkit rx", "perfkit tx", "perfkit lost", "iperf3 rx", "iperf3 tx", "iperf3 lost",
                      "iperf3 CPU send / recv"], lines,
        [f"perfkit CPU per worker thread (median): {worker_cpu(pk)}",
         "iperf3 rx = (packets - lost_packets) / seconds from the server's `-J` report; CPU is iperf3's "
         "`cpu_utilization_percent` (host_total = sender, remote_total = receiver), % of one CPU."])


def bench_udp64_loss(b: Bench) -> None:
    if not b.have("iperf3"):
        b.rows.append(Row("udp64_loss", "lost pkts", "—", "— (iperf3 missing)", "—", "fewer lost", "skipped"))
        return
    rate = b.loss_rate
    if rate is None:
        if b.iperf3_max_rx_pps is None:   # udp64_pps did not run: measure iperf3's max briefly
            probe = b.attempt("probe iperf3 -u -b 0 (to pick the rate)", run_iperf3_udp, b.ports,
                              min(b.duration, 3.0), UDP_SIZE, 0, show=lambda r: f"rx {fmt_pps(r['rx_pps'])}")
            b.iperf3_max_rx_pps = probe["rx_pps"] if probe else None
        if b.iperf3_max_rx_pps is None:
            b.rows.append(Row("udp64_loss", "lost pkts", "—", "—", "—", "fewer lost", "error"))
            return
        rate = int(round(LOSS_RATE_SHARE * b.iperf3_max_rx_pps, -3))
    bitrate = rate * UDP_SIZE * 8
    print(f"udp64_loss: {UDP_SIZE} B at {rate} pps for both (iperf3 -b {bitrate})", flush=True)
    pk, ip = [], []
    for rep in range(b.reps):
        pk.append(b.attempt(f"rep {rep + 1} perfkit udp_bw --rate {rate}pps", run_perfkit, "udp_bw", b.duration,
                            size=UDP_SIZE, rate=f"{rate}pps",
                            show=lambda r: f"lost {r['lost']} of {r['pkts_tx']} ({r['loss_pct']:.3f}%)"))
        ip.append(b.attempt(f"rep {rep + 1} iperf3 -u -b {bitrate}", run_iperf3_udp, b.ports, b.duration,
                            UDP_SIZE, bitrate,
                            show=lambda r: f"lost {r['lost']} of {r['sent']} ({r['loss_pct']:.3f}%)"))
    pk_lost, ip_lost = med(pick(pk, "lost")), med(pick(ip, "lost"))
    pk_pct, ip_pct = med(pick(pk, "loss_pct")), med(pick(ip, "loss_pct"))
    if pk_lost is None or ip_lost is None:
        status, ratio = "error", "—"
    else:
        # strictly fewer; both losing nothing is a tie, which we count as a pass and say so
        status = "pass" if pk_lost < ip_lost or pk_lost == ip_lost == 0 else "FAIL"
        ratio = f"{pk_lost / ip_lost:.2f}" if ip_lost else ("tie at 0" if pk_lost == 0 else "—")
    b.rows.append(Row("udp64_loss", f"lost pkts @ {rate / 1e3:g} kpps",
                      "—" if pk_lost is None else f"{pk_lost:.0f} ({pk_pct:.3f}%)",
                      "—" if ip_lost is None else f"{ip_lost:.0f} ({ip_pct:.3f}%) (iperf3)",
                      ratio, "fewer lost", status))
    lines = [[str(i + 1),
              "—" if not p else f"{p['pkts_tx']} / {p['pkts_rx']}", "—" if not p else f"{p['lost']} ({p['loss_pct']:.3f}%)",
              "—" if not q else f"{q['sent']} / {q['received']}", "—" if not q else f"{q['lost']} ({q['loss_pct']:.3f}%)",
              "—" if not q else str(q["sent"] - q["received"]),
              "—" if not q else f"{q['cpu_sender']:.0f}% / {q['cpu_receiver']:.0f}%"]
             for i, (p, q) in enumerate(zip(pk, ip))]
    b.details += detail_table(
        f"udp64_loss ({rate} pps offered, {UDP_SIZE} B)",
        ["rep", "perfkit sent / received", "perfkit lost", "iperf3 sent / received", "iperf3 lost (its count)",
         "iperf3 sent - received", "iperf3 CPU send / recv"], lines,
        [f"rate = {LOSS_RATE_SHARE:.0%} of iperf3's median max receive rate from udp64_pps, rounded "
         f"(override with --loss-rate); iperf3 gets -b {bitrate} = rate x {UDP_SIZE} B x 8.",
         "Loss is each tool's own count (perfkit `lost`, iperf3 server `lost_packets`). iperf3 cannot see "
         "datagrams dropped after the last one it received; `sent - received` shows those too.",
         f"perfkit CPU per worker thread (median): {worker_cpu(pk)}"])


def bench_tcp_bw(b: Bench) -> None:
    """Each tool's default write size against the other's (perfkit local tcp_bw and iperf3 both
    write 128 KiB), then both at 64 KiB (iperf3 -l 64K, and qperf, whose default that is)."""
    print("tcp_bw: single-stream TCP, receiver payload bits/s", flush=True)
    pk, pk64, ip, ip64, qp = [], [], [], [], []
    show_pk = lambda r: f"rx {fmt_bps(r['rx_bps'])}, cpu {cpu_str(r)}"  # noqa: E731
    for rep in range(b.reps):
        pk.append(b.attempt(f"rep {rep + 1} perfkit tcp_bw (default, 128 KiB writes)", run_perfkit, "tcp_bw",
                            b.duration, show=show_pk))
        if b.have("iperf3"):
            show = lambda r: f"rx {fmt_bps(r['rx_bps'])}, cpu send {r['cpu_sender']:.0f}% " \
                             f"recv {r['cpu_receiver']:.0f}%"  # noqa: E731
            ip.append(b.attempt(f"rep {rep + 1} iperf3 TCP (default, -l 128K)", run_iperf3_tcp, b.ports,
                                b.duration, show=show))
        pk64.append(b.attempt(f"rep {rep + 1} perfkit tcp_bw --size 64K", run_perfkit, "tcp_bw", b.duration,
                              size="64K", show=show_pk))
        if b.have("iperf3"):
            ip64.append(b.attempt(f"rep {rep + 1} iperf3 TCP -l 64K", run_iperf3_tcp, b.ports, b.duration, "64K",
                                  show=show))
        if b.have("qperf"):
            qp.append(b.attempt(f"rep {rep + 1} qperf tcp_bw (64 KiB)", run_qperf, b.ports, b.duration, "tcp_bw",
                                show=lambda r: f"bw {fmt_bps(r['bw_bps'])}"))
    has_ip = b.have("iperf3")
    b.rows.append(ratio_row("tcp_bw", "rx payload bit/s, 128 KiB writes (both defaults)", med(pick(pk, "rx_bps")),
                            med(pick(ip, "rx_bps")), "iperf3" if has_ip else None, fmt_bps, 0.95, True))
    b.rows.append(ratio_row("tcp_bw --size 64K", "rx payload bit/s, 64 KiB writes", med(pick(pk64, "rx_bps")),
                            med(pick(ip64, "rx_bps")), "iperf3 -l 64K" if has_ip else None, fmt_bps, None, True))
    b.rows.append(ratio_row("tcp_bw --size 64K (qperf)", "rx payload bit/s, 64 KiB writes", med(pick(pk64, "rx_bps")),
                            med(pick(qp, "bw_bps")), "qperf" if b.have("qperf") else None, fmt_bps, None, True))
    n = len(pk)
    ip += [None] * (n - len(ip))
    ip64 += [None] * (n - len(ip64))
    qp += [None] * (n - len(qp))

    def ipcell(q):
        return "—" if not q else f"{fmt_bps(q['rx_bps'])} ({q['cpu_sender']:.0f}% / {q['cpu_receiver']:.0f}%, " \
                                 f"{q['retransmits']} retr.)"

    lines = [[str(i + 1), fmt_bps((p or {}).get("rx_bps")), ipcell(q), fmt_bps((p6 or {}).get("rx_bps")), ipcell(q6),
              fmt_bps((r or {}).get("bw_bps"))]
             for i, (p, q, p6, q6, r) in enumerate(zip(pk, ip, pk64, ip64, qp))]
    b.details += detail_table(
        "tcp_bw", ["rep", "perfkit rx (128 KiB)", "iperf3 rx (128 KiB; CPU send / recv, retransmits)",
                   "perfkit rx (64 KiB)", "iperf3 -l 64K rx", "qperf bw (64 KiB)"],
        lines, [f"perfkit CPU per worker thread (median): {worker_cpu(pk)}; at 64 KiB: {worker_cpu(pk64)}",
                "perfkit local tcp_bw writes 128 KiB per send() by default, as iperf3 does (its -l default); "
                "the 64 KiB rows use perfkit --size 64K, iperf3 -l 64K and qperf (whose default is 64 KiB)."])


def bench_lat(b: Bench, proto: str) -> None:
    test = f"{proto}_lat"
    tcp = proto == "tcp"
    print(f"{test}: {LAT_SIZE}-byte ping-pong, round-trip p50", flush=True)
    pk, busy, sp, qp = [], [], [], []
    lat = lambda r: f"RTT p50 {r['lat_p50_us']:.2f} µs p99 {r['lat_p99_us']:.1f} µs, {r['lat_count']} round trips"
    for rep in range(b.reps):
        pk.append(b.attempt(f"rep {rep + 1} perfkit {test}", run_perfkit, test, b.duration, size=LAT_SIZE, show=lat))
        if b.have("sockperf"):
            sp.append(b.attempt(f"rep {rep + 1} sockperf ping-pong{' --tcp' if tcp else ''}", run_sockperf,
                                b.ports, b.duration, LAT_SIZE, tcp,
                                show=lambda r: f"RTT p50 {r['rtt_p50_us']:.2f} µs p99 {r['rtt_p99_us']:.1f} µs, "
                                               f"{r['round_trips']} round trips"))
        busy.append(b.attempt(f"rep {rep + 1} perfkit {test} --busy-poll", run_perfkit, test, b.duration,
                              size=LAT_SIZE, busy_poll=True, show=lat))
        if b.have("qperf"):
            qp.append(b.attempt(f"rep {rep + 1} qperf {test}", run_qperf, b.ports, b.duration, test, LAT_SIZE,
                                show=lambda r: f"latency (mean RTT/2) {r['latency_us']:.2f} µs"))
    sock_p50 = med(pick(sp, "rtt_p50_us"))
    tool = "sockperf" if b.have("sockperf") else None
    b.rows.append(ratio_row(test, "RTT p50", med(pick(pk, "lat_p50_us")), sock_p50, tool, fmt_us, 1.1, False))
    b.rows.append(ratio_row(f"{test} --busy-poll", "RTT p50", med(pick(busy, "lat_p50_us")), sock_p50, tool,
                            fmt_us, 1.1, False))
    b.rows.append(ratio_row(f"{test} (qperf)", "mean RTT/2", med(pick(pk, "latency_us")), med(pick(qp, "latency_us")),
                            "qperf" if b.have("qperf") else None, fmt_us, None, False))
    n = len(pk)
    sp += [None] * (n - len(sp))
    qp += [None] * (n - len(qp))

    def pkcell(r):
        return "—" if not r else f"{r['lat_p50_us']:.2f} / {r['lat_p99_us']:.1f} / {r['lat_mean_us']:.2f} ({r['lat_count']})"

    lines = [[str(i + 1), pkcell(p),
              "—" if not s else f"{s['rtt_p50_us']:.2f} / {s['rtt_p99_us']:.1f} / {s['rtt_mean_us']:.2f} "
                                f"({s['round_trips']}; rate check {s['rtt_mean_from_rate_us']:.2f})",
              pkcell(bp), "—" if not q else f"{q['latency_us']:.2f}"]
             for i, (p, s, bp, q) in enumerate(zip(pk, sp, busy, qp))]
    b.details += detail_table(
        test, ["rep", "perfkit RTT p50 / p99 / mean µs (round trips)", "sockperf RTT p50 / p99 / mean µs",
               "perfkit --busy-poll RTT p50 / p99 / mean", "qperf mean RTT/2 µs"], lines,
        [f"perfkit CPU per worker thread (median): {worker_cpu(pk)}; with --busy-poll: {worker_cpu(busy)}",
         "sockperf runs with --full-rtt, so it prints round-trip times (its default output is RTT/2). "
         "'rate check' = sockperf's valid RunTime / ReceivedMessages, the mean RTT from its own count.",
         "qperf reports 'one way latency' = mean RTT/2; it is compared with perfkit's `latency_us` (mean RTT/2)."])


# ------------------------------------- perfkit test vs qperf: two hosts, loopback and veth

VS_BLOCKS = (  # one `perfkit test` invocation each: (tests, perfkit size options, sizes)
    (("tcp_bw", "tcp_lat", "udp_bw", "udp_lat", "sctp_bw", "sctp_lat"), ["--oo", "msg_size:64:1K:*16"], (64, 1024)),
    (("tcp_bw", "tcp_lat", "sctp_bw", "sctp_lat"), ["-m", "64K"], (65536,)),
    (("udp_bw", "udp_lat"), ["-m", "32K"], (32768,)),   # qperf's UDP tests fail at 64 KiB
)
VS_PATHS = ("loopback", "veth")
QPERF_LAB_PORT = 19765          # qperf's default listen port, inside the lab's h2 namespace
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _ns_listening(port: int) -> bool:
    """In a lab host (lab.call): a TCP socket listening on port?"""
    return port_in_use(port, "tcp", listening_only=True)


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _proc_cpu_s(pid: int) -> float | None:
    """CPU seconds of a process and of its children it has reaped (utime+stime+cutime+cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(x) for x in fields[11:15]) / _CLK_TCK


class TwoHosts:
    """Where the far end (perfkit serve, qperf) and the near end (perfkit test, qperf
    client) run: both on this host over 127.0.0.1, or in hosts h2 and h1 of a perfkit lab
    joined by a plain veth pair (198.18.x.2 / .1)."""

    def __init__(self, name: str, ports: Ports):
        self.name, self.lab = name, None
        self.token = None
        if name == "loopback":
            self.host = HOST
            # perfkit serve binds port 0 and says which port it got (its start-up can take
            # long enough for a port checked free now to be taken meanwhile); qperf starts at once
            self.pk_port, self.qp_port = 0, ports.take()
        else:
            from perfkit.lab import Lab
            self.lab = Lab().up()
            self.h1, self.h2 = self.lab.hosts
            self.host = self.h2.ipv4
            self.pk_port, self.qp_port = 19800, QPERF_LAB_PORT   # the lab's own namespace: free
            self.token = os.urandom(8).hex()
        self.servers: list = []
        self.pin = None   # (client CPU, server CPU): both tools' -lca/-rca, or None
        self.access_recv = False   # both tools' -ar 1: the receiving ends read the data
        self.busy_poll = None      # perfkit's --busy-poll 0|1, or None: its default

    def pin_args(self, qperf: bool = False) -> list:
        """-lca/-rca for perfkit, or for qperf 0.4.11, which pins to the number it is given
        minus one (its -lca 1 is CPU 0; 0 means any), though its help says CPUs count from 0."""
        ar = ["-ar", "1"] if self.access_recv else []
        if self.pin is None:
            return ar
        loc, rem = (c + 1 for c in self.pin) if qperf else self.pin
        return ["-lca", str(loc), "-rca", str(rem), *ar]

    def close(self) -> None:
        for srv in self.servers:
            srv.finish(wait=0)
        if self.lab is not None:
            self.lab.down()

    # the far end
    def server(self, cmd: list, lifetime: float):
        if self.lab is None:
            srv = Server(cmd, lifetime)
        else:
            srv = LabServer(self.lab, self.h2, cmd, lifetime)
        self.servers.append(srv)
        return srv

    def wait_listening(self, srv, port: int, timeout: float = 60.0) -> None:
        if self.lab is None:
            srv.wait_listening(port, "tcp", timeout)
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.lab.call(self.h2, _ns_listening, port):
                return
            if srv.proc.poll() is not None:
                out, err = srv.finish()
                raise BenchError(f"{srv.cmd[0]} server in h2 exited early: {(err or out).strip()[-300:]}")
            time.sleep(0.1)
        srv.finish()
        raise BenchError(f"{srv.cmd[0]} server in h2 did not listen on port {port} within {timeout:g} s")

    # the near end: run to completion, with the CPU it used (wait4: it and what it reaped)
    def client(self, cmd: list, timeout: float) -> tuple[str, float]:
        cmd = [str(c) for c in cmd]
        out, err = tempfile.TemporaryFile(mode="w+"), tempfile.TemporaryFile(mode="w+")
        try:
            kw = dict(stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True, start_new_session=True)
            p = subprocess.Popen(cmd, **kw) if self.lab is None else self.lab.popen(self.h1, cmd, **kw)
            # Sleep until it exits: a parent that polled (wait4 every 10 ms) made qperf's
            # tcp_lat 6% faster here (10 of 10 rounds), a boost perfkit's runs, waited for
            # in select(), did not get.
            pidfd = os.pidfd_open(p.pid)
            try:
                exited = select.select([pidfd], [], [], timeout)[0]
            finally:
                os.close(pidfd)
            if not exited:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.wait4(p.pid, 0)
                p.returncode = -9
                raise BenchError(f"{' '.join(cmd)}: no result within {timeout:g} s")
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        finally:
            out.close()
            err.close()
        if p.returncode != 0:
            tail = (stderr or stdout).strip()[-400:]
            raise ClientFailed(f"{' '.join(cmd)}: exit {p.returncode}: {tail}", stdout)
        return stdout, ru.ru_utime + ru.ru_stime


class LabServer(Server):
    """Server, but inside a lab host (lab.popen: its own session, killed at lab down too)."""

    def __init__(self, lab, host, cmd: list, lifetime: float):
        self.cmd = [str(c) for c in cmd]
        self._out = tempfile.TemporaryFile(mode="w+")
        self._err = tempfile.TemporaryFile(mode="w+")
        self.proc = lab.popen(host, ["timeout", "-k", "2", f"{lifetime:.0f}", *self.cmd], stdin=subprocess.DEVNULL,
                              stdout=self._out, stderr=self._err, text=True)
        self.result = None
        _LIVE_SERVERS.append(self)


def _serve_port(srv, timeout: float) -> int:
    """The port `perfkit serve --port 0` got, from its log line 'listening on ADDR port N'."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"listening on \S+ port (\d+)", os.pread(srv._err.fileno(), 1 << 16, 0).decode(errors="replace"))
        if m:
            return int(m.group(1))
        if srv.proc.poll() is not None:
            out, err = srv.finish()
            raise BenchError(f"perfkit serve exited early: {(err or out).strip()[-300:]}")
        time.sleep(0.1)
    srv.finish()
    raise BenchError(f"perfkit serve did not say its port within {timeout:g} s")


def _qperf_fields(text: str) -> dict:
    """qperf -uu -v -vvu output of one test -> {field: number} (bytes/s, ns, bytes, % cpus)."""
    return {k: float(v) for k, v in re.findall(r"^\s+(\w+)\s*=\s*([0-9.]+)", text, re.M)}


def _qperf_server_cpu(srv) -> float | None:
    """CPU seconds of the qperf server so far: the qperf under `timeout`, and the child it
    forks for each test once that child is reaped (waited for up to 2 s)."""
    qpids = _children(srv.proc.pid)
    if not qpids:
        return None
    deadline = time.monotonic() + 2.0
    while _children(qpids[0]) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _proc_cpu_s(qpids[0])


def run_qperf_two_hosts(th: TwoHosts, qsrv, duration: float, test: str, size: int) -> dict:
    """One qperf client run against the long-lived qperf server of th; its figures, and the
    CPU its client and server processes used (% of one CPU over the test time)."""
    before = _qperf_server_cpu(qsrv)
    cmd = ["qperf", th.host, "--listen_port", th.qp_port, "-t", f"{duration:.0f}", "-m", size,
           "-uu", "-v", "-vvu", *th.pin_args(qperf=True), test]
    out, cli_cpu = th.client(cmd, timeout=duration + 25)
    after = _qperf_server_cpu(qsrv)
    f = _qperf_fields(out)
    if int(f.get("msg_size", -1)) != size:
        raise BenchError(f"qperf {test}: msg_size {f.get('msg_size')} is not {size}: {out.strip()!r}")
    res = {"cpu_client_pct": 100 * cli_cpu / duration,
           "cpu_server_pct": 100 * (after - before) / duration if None not in (before, after) else None,
           "cpus_loc": f.get("loc_cpus_used", f.get("send_cpus_used")),
           "cpus_rem": f.get("rem_cpus_used", f.get("recv_cpus_used"))}
    if test in ("tcp_bw", "sctp_bw") and "bw" in f:
        res["value"] = 8 * f["bw"]
    elif test == "udp_bw" and "recv_bw" in f:
        res.update(value=8 * f["recv_bw"], tx_bps=8 * f.get("send_bw", 0.0))
    elif test.endswith("_lat") and f.get("latency"):
        res["value"] = f["latency"] / 1000.0           # -uu: ns; RTT/2
    if not res.get("value"):
        raise BenchError(f"qperf {test} -m {size}: no result in {out.strip()!r}")
    return res


def run_perfkit_two_hosts(th: TwoHosts, duration: float, tests, size_args: list) -> dict:
    """One `perfkit test HOST TESTS... --json` invocation: {(test, size): summary}."""
    cmd = [*perfkit_cmd(), "test", th.host, *tests, *size_args, "-t", f"{duration:g}", "--port", th.pk_port,
           "--json", *th.pin_args()]
    if th.busy_poll is not None:
        cmd += ["--busy-poll", str(int(th.busy_poll))]
    if th.token:
        cmd += ["--token", th.token]
    try:
        out, _ = th.client(cmd, timeout=len(tests) * 2 * (duration + 15) + 90)
    except ClientFailed as exc:   # keep the tests that finished before the one that failed
        out = exc.stdout
        if '{"summary"' not in out:
            raise
        print(f"      (partial: {str(exc)[-200:]})", flush=True)
    sums = [json.loads(line)["summary"] for line in out.splitlines() if line.startswith('{"summary"')]
    return {(s["test"], int(s["size"])): s for s in sums}


def _perfkit_test_api(host: str, test: str, size: int, seconds: float, port: int, token, pin=None,
                      access_recv=False, busy_poll=None) -> dict:
    """`perfkit test` from Python (perfkit.test: the same remote.plan + Run as the command
    line), one test at one size; its summary. In lab.call's fork: a session of its own,
    as each qperf process has (with autogroup scheduling the CPU share follows the session)."""
    import perfkit
    try:
        os.setsid()   # in lab.call's fork (in_fork did it already)
    except OSError:
        pass
    loc, rem = pin or (None, None)
    rows = perfkit.test(host, test, time=seconds, size=size, port=port, token=token,
                        loc_cpu_affinity=loc, rem_cpu_affinity=rem, access_recv=access_recv,
                        busy_poll=busy_poll).to_dicts()
    return rows[0]


def run_perfkit_api(th: TwoHosts, duration: float, test: str, size: int) -> dict:
    """One perfkit test run, its client in a fork of this process (loopback: in_fork) or in
    a fork inside the lab's h1 (lab.call): no interpreter to start per run."""
    from perfkit.errors import EngineError
    try:
        if th.lab is None:
            s = in_fork(_perfkit_test_api, th.host, test, size, duration, th.pk_port, th.token, th.pin,
                        th.access_recv, th.busy_poll, timeout=duration + 60)
        else:
            s = th.lab.call(th.h1, _perfkit_test_api, th.host, test, size, duration, th.pk_port, th.token,
                            th.pin, th.access_recv, th.busy_poll, timeout=duration + 60)
    except (EngineError, ValueError, TimeoutError) as exc:
        raise BenchError(f"perfkit test {test} -m {size}: {exc}") from None
    if s.get("error"):
        raise BenchError(f"perfkit test {test} -m {size}: {s['error']}")
    return s


def check_qperf_pins(th: TwoHosts, port: int) -> None:
    """That the -lca/-rca th gives qperf put its client and its server's child (the one
    that runs the test) on the CPUs perfkit's go to: once, on loopback, before the runs."""
    srv = subprocess.Popen(["qperf", "--listen_port", str(port)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    cli = None
    try:
        time.sleep(0.5)
        cli = subprocess.Popen(["qperf", HOST, "--listen_port", str(port), "-t", "2", *th.pin_args(qperf=True),
                                "tcp_lat"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        children = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid == srv.pid:
                    children.append(sorted(os.sched_getaffinity(int(pid))))
            except (OSError, ValueError, IndexError):
                pass
        client = sorted(os.sched_getaffinity(cli.pid))
        cli.wait(timeout=30)
    finally:
        for proc in (cli, srv):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    if client != [th.pin[0]] or children != [[th.pin[1]]]:
        raise BenchError(f"qperf {' '.join(th.pin_args(qperf=True))} put its client on CPUs {client} and its "
                         f"server's test on {children}, not on {th.pin[0]} and {th.pin[1]}")


def _pk_value(test: str, s: dict | None):
    if not s:
        return None
    return s.get("latency_us") if test.endswith("_lat") else s.get("rx_bps")


def vs_tests_here(tests) -> tuple[tuple, list[Row]]:
    """The tests of vs_qperf this kernel can run, and a skipped row for each SCTP test
    where it has no SCTP (neither tool can run one there)."""
    from perfkit.engines.remote import sctp_unavailable as _sctp_available
    why = _sctp_available() if any(t.startswith("sctp_") for t in tests) else None
    if why is None:
        return tuple(tests), []
    return (tuple(t for t in tests if not t.startswith("sctp_")),
            [Row(f"{t} (all sizes and paths)", "—", "—", f"— ({why})", "—", "—", "skipped")
             for t in tests if t.startswith("sctp_")])


def bench_vs_qperf(b: Bench) -> None:
    """perfkit serve / perfkit test against qperf's server / client: every qperf test at
    three sizes, over loopback and over a lab veth pair; alternating, medians, ratios."""
    if not b.have("qperf"):
        b.vs_rows.append(Row("all", "—", "—", "— (qperf missing)", "—", "—", "skipped"))
        return
    vs_tests, skipped = vs_tests_here(b.vs_tests)
    b.vs_rows += skipped
    if not vs_tests:
        return
    d = b.vs_duration
    if b.vs_pin:   # once, before any path: where qperf does not pin as perfkit does, no row is fair
        probe = TwoHosts("loopback", b.ports)
        probe.pin = b.vs_pin
        try:
            check_qperf_pins(probe, probe.qp_port)
        except BenchError as exc:
            b.errors += 1
            print(f"  vs_qperf: ERROR {exc}", flush=True)
            b.vs_rows.append(Row("all", "—", "—", "—", "—", "—", "error"))
            return
    for path in b.vs_paths:
        if path == "veth":
            from perfkit.lab import have_privileges
            if not have_privileges():
                b.vs_rows.append(Row("all (veth)", "—", "—", "— (a lab needs root)", "—", "—", "skipped"))
                continue
        pinned = f", client on CPU {b.vs_pin[0]} and server on CPU {b.vs_pin[1]}" if b.vs_pin else ""
        print(f"vs_qperf over {path}: perfkit test vs qperf, {d:g} s per run, {b.reps} alternating reps{pinned}",
              flush=True)
        res: dict = {}
        try:
            th = TwoHosts(path, b.ports)
            th.pin = b.vs_pin
            th.access_recv = b.vs_access_recv
            th.busy_poll = b.vs_busy_poll
        except Exception as exc:   # the lab could not be made (perfkit.lab.LabError, OSError)
            b.errors += 1
            print(f"  {path}: ERROR {type(exc).__name__}: {exc}", flush=True)
            b.vs_rows.append(Row(f"all ({path})", "—", "—", "—", "—", "—", "error"))
            continue
        try:
            lifetime = b.reps * 40 * (d + 6) + 120
            pk_srv = th.server([*perfkit_cmd(), "serve", "--bind", th.host, "--port", th.pk_port]
                               + (["--token", th.token] if th.token else []), lifetime)
            qp_srv = th.server(["qperf", "--listen_port", th.qp_port], lifetime)
            if th.pk_port == 0:
                th.pk_port = _serve_port(pk_srv, timeout=120)
            th.wait_listening(pk_srv, th.pk_port, timeout=120)
            th.wait_listening(qp_srv, th.qp_port, timeout=10)
            for rep in range(b.reps):
                # the sides swap places every rep; with --perfkit-client api perfkit and qperf
                # alternate per test and size, with cli per `perfkit test` invocation
                first, second = ("perfkit", "qperf") if rep % 2 == 0 else ("qperf", "perfkit")
                for tests, size_args, sizes in VS_BLOCKS:
                    tests = tuple(t for t in tests if t in vs_tests)
                    if not tests:
                        continue
                    points = [(t, s) for t in tests for s in sizes]
                    groups = [points] if b.vs_client == "cli" else [[pt] for pt in points]
                    for group in groups:
                        for side in (first, second):
                            if side == "qperf":
                                for t, s in group:
                                    q = b.attempt(f"rep {rep + 1} {path} qperf -m {s} {t}", run_qperf_two_hosts,
                                                  th, qp_srv, d, t, s, show=lambda r, t=t: _vs_fmt(t, r["value"]))
                                    res.setdefault((t, s), {"pk": [], "qp": []})["qp"].append(q)
                            elif b.vs_client == "cli":
                                got = b.attempt(f"rep {rep + 1} {path} perfkit test {' '.join(tests)} "
                                                f"{' '.join(size_args)}", run_perfkit_two_hosts, th, d, tests,
                                                size_args, show=lambda r: f"{len(r)} results")
                                for t, s in group:
                                    res.setdefault((t, s), {"pk": [], "qp": []})["pk"].append((got or {}).get((t, s)))
                            else:
                                (t, s), = group
                                got = b.attempt(f"rep {rep + 1} {path} perfkit test -m {s} {t}", run_perfkit_api,
                                                th, d, t, s, show=lambda r, t=t: _vs_fmt(t, _pk_value(t, r)))
                                res.setdefault((t, s), {"pk": [], "qp": []})["pk"].append(got)
        except Exception as exc:   # BenchError, or the lab failing under us (perfkit.lab.LabError)
            b.errors += 1
            print(f"  {path}: ERROR {type(exc).__name__}: {exc}", flush=True)
        finally:
            th.close()
        _vs_rows(b, path, res)


def _vs_fmt(test: str, v) -> str:
    return "—" if v is None else fmt_us(v) if test.endswith("_lat") else fmt_bps(v)


def _size_str(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def _vs_rows(b: Bench, path: str, res: dict) -> None:
    lines = []
    for (test, size), r in sorted(res.items(), key=lambda kv: (VS_TESTS.index(kv[0][0]), kv[0][1])):
        lat = test.endswith("_lat")
        pk = [_pk_value(test, s) for s in r["pk"]]
        qp = [(q or {}).get("value") for q in r["qp"]]
        metric = "mean RTT/2" if lat else "rx payload bit/s"
        row = ratio_row(f"{test} {_size_str(size)} ({path})", metric, med(pk), med(qp), "qperf",
                        fmt_us if lat else fmt_bps, 1.0, not lat, runs=(pk, qp))
        b.vs_rows.append(row)
        tally = paired_tally(pk, qp, not lat)
        if tally:
            ahead, n, per_rep, p = tally
            b.vs_paired.append([row.name, f"{ahead} of {n}", f"{per_rep:.2f}", f"{p:.2g}"])
        for i in range(max(len(r["pk"]), len(r["qp"]))):
            s = r["pk"][i] if i < len(r["pk"]) else None
            q = r["qp"][i] if i < len(r["qp"]) else None
            pk_cell = _vs_fmt(test, _pk_value(test, s))
            qp_cell = _vs_fmt(test, (q or {}).get("value"))
            if test == "udp_bw":
                if s:
                    pk_cell += f" (tx {fmt_bps(s.get('tx_bps'))}, lost {s.get('loss_pct') or 0:.1f}%)"
                if q:
                    qp_cell += f" (tx {fmt_bps(q.get('tx_bps'))})"
            lines.append([f"{test} {_size_str(size)}", str(i + 1), pk_cell, qp_cell,
                          "—" if not s else f"{s.get('loc_cpus_used', 0):.0f}% / {s.get('rem_cpus_used', 0):.0f}%",
                          "—" if not q else f"{q['cpu_client_pct']:.0f}% / " + f0(q["cpu_server_pct"], "%"),
                          "—" if not q else f0(q["cpus_loc"], "%") + " / " + f0(q["cpus_rem"], "%")])
    b.vs_details += detail_table(
        f"perfkit test vs qperf over {path}",
        ["test", "rep", "perfkit", "qperf", "perfkit CPU loc / rem (engine threads)",
         "qperf CPU client / server (processes)", "qperf -v loc / rem (whole machine)"], lines,
        [("perfkit: `perfkit test HOST TESTS... -m SIZE --json` commands" if b.vs_client == "cli" else
          "perfkit: `perfkit.test(HOST, TEST, size=SIZE)` (the Python face of `perfkit test`) in a fork of the "
          "bench" + (" inside h1" if path == "veth" else "")) + " against `perfkit serve`"
         + (" in h2" if path == "veth" else "") + "; bandwidth = summary `rx_bps` "
         "(payload received, over the sender's active time), latency = `latency_us` (mean RTT / 2).",
         "qperf: `qperf HOST -t D -m SIZE -uu -v -vvu TEST` against a `qperf` server; tcp_bw `bw`, udp_bw "
         "`recv_bw` (x 8), *_lat `latency` (its time / messages received by both ends = mean RTT / 2).",
         "CPU, % of one CPU over the test: perfkit's `loc_cpus_used` / `rem_cpus_used` (its worker threads); "
         "qperf's client process (wait4) and its server's per-test child (reaped CPU time, 10 ms ticks). "
         "qperf's own -v `*_cpus_used` read /proc/stat: the WHOLE machine, other work included (200% = both "
         "CPUs busy), so they say little on a shared machine; listed as qperf prints them."])


# ------------------------------------------------------------ HTTP vs wrk (nginx)

HTTP_GROUPS = ("http_keepalive", "http_users20k", "http_close")
HTTP_USERS = 100                # wrk -c100: as many perfkit virtual users
HTTP_THREADS = 2                # wrk -t2: as many perfkit client threads
HTTP_BIG_USERS = 20_000         # http_users20k: virtual users held ...
HTTP_HOLD_S = 30.0              # ... this long, after ...
HTTP_RAMP_S = 10.0              # ... starting them evenly over this time
HTTP_THINK = "2s"               # each user: one request, then a 2 s pause (about 10k requests/s in all)
NGINX_BENCH_CONF = """
worker_processes 2;
worker_rlimit_nofile {nofile};
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{ worker_connections {conns}; }}
http {{
    access_log off;
    client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    server {{
        listen {host}:{port} reuseport backlog=16384;
        location / {{ return 200 "hello from nginx\\n"; }}
    }}
}}
"""


class BenchNginx:
    """nginx on 127.0.0.1 for the HTTP rows: 2 workers (reuseport splits the connections
    between them, so each stays under the open-file limit), no access log, a 17-byte body."""

    def __init__(self, ports: Ports, lifetime: float):
        import resource
        self.dir = tempfile.mkdtemp(prefix="perfkit-bench-nginx-")
        os.chmod(self.dir, 0o755)
        self.port = ports.take()
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nofile = 65536 if hard == resource.RLIM_INFINITY else min(65536, hard)
        conf = Path(self.dir) / "nginx.conf"
        conf.write_text(NGINX_BENCH_CONF.format(d=self.dir, host=HOST, port=self.port, nofile=nofile,
                                                conns=min(16384, nofile - 64)))
        self.url = f"http://{HOST}:{self.port}/"
        self.srv = Server(["nginx", "-c", conf, "-p", self.dir, "-g", "daemon off;"], lifetime)

    def __enter__(self) -> "BenchNginx":
        self.srv.wait_listening(self.port, "tcp", timeout=30)
        return self

    def __exit__(self, *exc) -> None:
        self.srv.finish(wait=0)
        shutil.rmtree(self.dir, ignore_errors=True)


def _perfkit_http_api(url: str, users: int, duration: float, keepalive: bool, think: str, ramp: float,
                      threads: int, processes: int = 1) -> dict:
    """What `perfkit http URL -u USERS -t D [--close] [--think T] [--ramp R] [--threads N] [--processes P]
    --json` runs."""
    from perfkit.errors import EngineError
    from perfkit.run import Run
    from perfkit.spec import HttpLoad
    try:
        spec = HttpLoad(url=url, users=users, duration=duration, keepalive=keepalive, think=think, ramp=ramp,
                        threads=threads, processes=processes)
        run = Run(spec)
        run.start()
    except ValueError as exc:   # e.g. more users than the open-file limit allows
        raise BenchError(str(exc)) from None
    try:
        run.wait()
    except EngineError:
        pass
    if run.error:
        raise BenchError(f"perfkit http: {run.error}")
    s = dict(run.summary)
    s["conns_by_s"] = [(r["time_s"], r["sock_current"]) for r in run.rows]
    return s


def run_perfkit_http(url, users, duration, keepalive=True, think="0", ramp=0.0, threads=1, processes=1) -> dict:
    if PERFKIT_CLIENT == "api":
        return in_fork(_perfkit_http_api, url, users, duration, keepalive, think, ramp, threads, processes,
                       timeout=duration + 40)
    cmd = [*perfkit_cmd(), "http", url, "-u", str(users), "-t", f"{duration:g}s", "--think", think,
           "--ramp", f"{ramp:g}s", "--threads", str(threads), "--processes", str(processes),
           "--json"] + ([] if keepalive else ["--close"])
    try:
        cp = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise BenchError(f"perfkit http: no result within {duration + 60:g} s") from None
    if cp.returncode != 0:
        raise BenchError((cp.stderr or cp.stdout).strip()[-600:])
    lines = [json.loads(ln) for ln in cp.stdout.splitlines() if ln.startswith("{")]
    s = lines[-1]["summary"]
    s["conns_by_s"] = [(r["time_s"], r["sock_current"]) for r in lines[:-1] if "time_s" in r]
    return s


_WRK_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6}


def run_wrk(url: str, conns: int, duration: float, close: bool) -> dict:
    """wrk -t2 -cN -dDs [-H 'Connection: close'] URL: requests/s, mean latency, errors."""
    cmd = ["wrk", "-t2", f"-c{conns}", f"-d{duration:.0f}s"] + (["-H", "Connection: close"] if close else []) + [url]
    out = run_client(cmd, timeout=duration + 30).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    n = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    if not m or not n:
        raise BenchError(f"wrk: cannot read its output: {out.strip()[-300:]}")
    lat = re.search(r"Latency\s+([\d.]+)(us|ms|s|m)\b", out)
    err = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": float(m.group(1)), "requests": int(n.group(1)),
            "lat_mean_us": float(lat.group(1)) * _WRK_UNITS[lat.group(2)] if lat else None,
            "errors": sum(int(x) for x in err.groups()) if err else 0,
            "error_detail": err.group(0) if err else "none", "non2xx": int(non2xx.group(1)) if non2xx else 0}


def _fmt_rps(v):
    return "—" if v is None else f"{v / 1e3:.1f} k req/s"


def _pk_errors(s: dict) -> int:
    return sum(s.get(k) or 0 for k in ("http_err", "err_connect", "err_timeout", "err_reset", "err_read", "err_tls"))


def _bench_http_vs_wrk(b: Bench, close: bool) -> None:
    name = "http_close" if close else "http_keepalive"
    what = "a new connection per request (Connection: close)" if close else "keep-alive"
    print(f"{name}: nginx on loopback, requests/s, {HTTP_USERS} users / connections, {what}", flush=True)
    if not shutil.which("nginx") or not shutil.which("wrk"):
        b.http_rows.append(Row(name, "req/s", "—", "—", "—", ">= 1", "skipped"))
        print("  nginx or wrk missing (Debian: nginx-light wrk): skipped", flush=True)
        return
    pk, wr = [], []
    with BenchNginx(b.ports, lifetime=b.reps * 2 * (b.duration + 30) + 60) as ngx:
        for rep in range(b.reps):
            def one_pk():
                pk.append(b.attempt(f"rep {rep + 1} perfkit http -u {HTTP_USERS} --threads {HTTP_THREADS}"
                                    + (" --close" if close else ""),
                                    run_perfkit_http, ngx.url, HTTP_USERS, b.duration, not close, "0", 0.0,
                                    HTTP_THREADS,
                                    show=lambda s: f"{_fmt_rps(s['tps'])}, mean {s['lat_mean_us'] or 0:.0f} µs, "
                                                   f"errors {_pk_errors(s)}, cpu {cpu_str(s)}"))

            def one_wrk():
                wr.append(b.attempt(f"rep {rep + 1} wrk -t2 -c{HTTP_USERS}" + (" -H 'Connection: close'" if close
                                                                               else ""),
                                    run_wrk, ngx.url, HTTP_USERS, b.duration, close,
                                    show=lambda r: f"{_fmt_rps(r['rps'])}, mean {r['lat_mean_us'] or 0:.0f} µs, "
                                                   f"errors {r['errors'] + r['non2xx']}"))
            for fn in ((one_pk, one_wrk) if rep % 2 == 0 else (one_wrk, one_pk)):  # who goes first swaps
                fn()
    b.http_rows.append(ratio_row(name, "req/s" + (" (conn/req)" if close else " (keep-alive)"),
                                 med(pick(pk, "tps")), med(pick(wr, "rps")), "wrk -t2", _fmt_rps, 1.0, True))
    lines = []
    for i in range(b.reps):
        s = pk[i] if i < len(pk) else None
        r = wr[i] if i < len(wr) else None
        lines.append([str(i + 1),
                      "—" if not s else f"{_fmt_rps(s['tps'])}, mean {s['lat_mean_us'] or 0:.0f} µs, p99 "
                                        f"{s['lat_p99_us'] or 0:.0f} µs, {s['responses']} responses, "
                                        f"errors {_pk_errors(s)}, {s['sock_open']} connections",
                      "—" if not s else cpu_str(s),
                      "—" if not r else f"{_fmt_rps(r['rps'])}, mean {r['lat_mean_us'] or 0:.0f} µs, "
                                        f"{r['requests']} requests, errors: {r['error_detail']}, "
                                        f"non-2xx {r['non2xx']}"])
    b.http_details += detail_table(
        f"{name}: perfkit http vs wrk, {what}", ["rep", "perfkit", "perfkit CPU", "wrk"], lines,
        [f"perfkit: `HttpLoad(url, users={HTTP_USERS}, duration={b.duration:g}, keepalive={not close}, "
         f"threads={HTTP_THREADS})` (= `perfkit http URL -u 100 --threads {HTTP_THREADS}"
         + (" --close" if close else "") + f"`), {HTTP_THREADS} client threads as wrk's; figure: "
         "summary `tps` (whole responses / s over its active time).",
         f"wrk: `wrk -t2 -c{HTTP_USERS} -d{b.duration:.0f}s" + (" -H 'Connection: close'" if close else "")
         + " URL`, two threads; figure: its `Requests/sec`.",
         "Both against the same nginx (2 workers, reuseport, access log off, `return 200` with a 17-byte body), "
         "taking turns; who goes first swaps every rep."])


def bench_http_users(b: Bench) -> None:
    name = "http_users20k"
    print(f"{name}: {HTTP_BIG_USERS} virtual users held {HTTP_HOLD_S:g} s (ramp {HTTP_RAMP_S:g} s, think "
          f"{HTTP_THINK}) against nginx, zero client errors", flush=True)
    if not shutil.which("nginx"):
        b.http_rows.append(Row(name, "users held, errors", "—", "—", "—", "0 errors", "skipped"))
        return
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    duration = HTTP_RAMP_S + HTTP_HOLD_S
    notes = [f"open-file limit of this process: soft {soft}, hard {hard} (RLIMIT_NOFILE); perfkit needs one per "
             "user plus what the process has open, and raises the soft limit itself (the hard limit only as "
             "root with CAP_SYS_RESOURCE)."]
    lines = []
    with BenchNginx(b.ports, lifetime=2 * duration + 120) as ngx:
        users, processes = HTTP_BIG_USERS, 1
        for attempt in range(2):
            try:
                s = run_perfkit_http(ngx.url, users, duration, True, HTTP_THINK, HTTP_RAMP_S, processes=processes)
            except BenchError as exc:
                m = re.search(r"processes=(\d+)", str(exc))
                print(f"  perfkit http -u {users}: {exc}", flush=True)
                if m and attempt == 0:   # one process may not open that many: say so, then split them
                    b.http_rows.append(Row(f"{name} (one process)", f"{users} users held {HTTP_HOLD_S:g} s",
                                           "refused: open-file limit", "—", "—", "0 errors", "info"))
                    notes.append(f"{users} users in one process: perfkit refused before starting: {exc}")
                    processes = int(m.group(1))
                    continue
                b.errors += 1
                b.http_rows.append(Row(name, f"{users} users", "error", "—", "—", "0 errors", "error"))
                notes.append(f"{users} users: {exc}")
                break
            held = [c for t, c in s["conns_by_s"] if HTTP_RAMP_S + 1 <= t <= duration - 1]
            errs = _pk_errors(s)
            ok = s["sock_open"] == users and errs == 0 and held and min(held) == users
            print(f"  perfkit http -u {users} --processes {processes}: {s['sock_open']} connections, held "
                  f"{min(held) if held else 0}..{max(held) if held else 0}, {s['tps']:.0f} req/s, errors {errs}",
                  flush=True)
            label = f"{name}" + (f" ({processes} processes)" if processes > 1 else "")
            b.http_rows.append(Row(label, f"{users} users held {HTTP_HOLD_S:g} s, client errors",
                                   f"{min(held) if held else 0} held, {errs} errors", "—", "—",
                                   f"{users} held, 0 errors", "pass" if ok else "FAIL"))
            lines.append([str(users), str(processes), str(s["sock_open"]),
                          f"{min(held) if held else 0}..{max(held) if held else 0}",
                          f"{s['tps']:.0f}", f"{s['lat_mean_us'] or 0:.0f} / {s['lat_p99_us'] or 0:.0f}",
                          f"http_err {s['http_err']}, connect {s['err_connect']}, timeout {s['err_timeout']}, "
                          f"reset {s['err_reset']}, read {s['err_read']}", cpu_str(s)])
            break
    b.http_details += detail_table(
        f"{name}: virtual users held", ["users", "processes", "connections opened", "open during the hold (min..max)",
                                        "req/s", "mean / p99 µs", "client errors", "perfkit CPU"], lines,
        notes + [f"perfkit: `HttpLoad(url, users=N, duration={duration:g}, ramp={HTTP_RAMP_S:g}, think="
                 f"'{HTTP_THINK}', processes=P)` (= `perfkit http URL -u N -t {duration:g}s --ramp {HTTP_RAMP_S:g}s "
                 f"--think {HTTP_THINK} --processes P`); held = the rows' `sock_current` from {HTTP_RAMP_S + 1:g} s to "
                 f"{duration - 1:g} s; errors = http_err + connect, timeout, reset, read and TLS errors.",
                 "No peer: wrk has no think time and the same open-file limit."])


# ------------------------------------------------------------ DPDK engine rows

DPDK_IP, DPDK_PEER_IP = "198.18.0.1", "198.18.0.2"   # memif: two processes, no kernel sees them
MEMIF_DST_MAC = "02:70:6b:00:00:02"                  # given, so no ARP wait on either reflector


def dpdk_missing() -> str | None:
    """Why the DPDK rows cannot run here, or None."""
    try:
        import perfkit.engines
        st = perfkit.engines()["dpdk"]
    except Exception as exc:   # noqa: BLE001
        return f"perfkit does not import: {exc}"
    if not st["available"]:
        return st["detail"]
    if not shutil.which("cc") or not shutil.which("pkg-config"):
        return "cc or pkg-config missing (the bare loop is compiled from bench/dpdk_bare.c)"
    return None


def build_bare(b: Bench) -> Path:
    """Compile bench/dpdk_bare.c once per bench run, into a temporary directory."""
    if b.bare is not None:
        return b.bare
    if b.bare_error:
        raise BenchError(b.bare_error)
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libdpdk"], capture_output=True, text=True,
                               timeout=30, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError) as exc:
        b.bare_error = f"pkg-config libdpdk: {exc}"
        raise BenchError(b.bare_error) from None
    out = Path(tempfile.mkdtemp(prefix="pk-bench-")) / "dpdk_bare"
    atexit.register(shutil.rmtree, out.parent, True)
    cp = subprocess.run(["cc", "-O2", "-o", str(out), str(HERE / "dpdk_bare.c"), *flags], capture_output=True,
                        text=True, timeout=120)
    if cp.returncode != 0:
        b.bare_error = f"cc dpdk_bare.c: {cp.stderr.strip()[-400:]}"
        raise BenchError(b.bare_error)
    b.bare = out
    return out


def bare_eal_args(prefix: str) -> list[str]:
    """perfkit's own EAL arguments (perfkit.engines.dpdk.EalOptions().args(): --no-huge or
    hugepages, memory, --no-pci, lcores, log level), with this process's file prefix."""
    from perfkit.engines.dpdk import EalOptions
    args = [a for a in EalOptions().args()[1:] if not a.startswith("--file-prefix=")]
    return [*args, f"--file-prefix={prefix}"]


def run_bare(b: Bench, mode: str, vdev: str, seconds: float) -> dict:
    cmd = [build_bare(b), *bare_eal_args(f"pkbare{os.getpid()}"), "--vdev", vdev, "--", mode, f"{seconds:g}"]
    cp = run_client(cmd, timeout=seconds + 30)
    for line in reversed(cp.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise BenchError("dpdk_bare: no result line")


def dpdk_skipped(b: Bench, row: str, metric: str, want: str, why) -> bool:
    """Where a DPDK comparison cannot run (why is not None): its row says skipped and the
    details and the log say why."""
    if not why:
        return False
    b.dpdk_rows.append(Row(row, metric, "—", "—", "—", want, "skipped"))
    b.dpdk_details.append(f"- {row.split()[0]} skipped: {why}\n")
    print(f"  skipped: {why}", flush=True)
    return True


def _dpdk_run_api(spec_dict: dict) -> dict:
    """A DPDK spec run to the end in this (forked) process: its summary."""
    from perfkit.spec import from_dict
    return _run_to_end(from_dict(spec_dict), "perfkit dpdk", engine="dpdk")


def run_perfkit_null_tx(seconds: float) -> dict:
    from perfkit.spec import DpdkFlows
    spec = DpdkFlows(port="net_null0,no-rx=1", size=64, duration=seconds)
    return in_fork(_dpdk_run_api, spec.to_dict(), timeout=seconds + 30)


def bench_dpdk_tx(b: Bench) -> None:
    print("dpdk_tx: TX frames/s on net_null, 64 B frames: perfkit's generator vs a bare rte_eth_tx_burst loop",
          flush=True)
    if dpdk_skipped(b, "dpdk_tx (net_null)", "TX pps, 64 B", ">= 0.9", dpdk_missing()):
        return
    pk, bare, copy = [], [], []
    for rep in range(b.reps):
        pk.append(b.attempt(f"rep {rep + 1} perfkit flows net_null", run_perfkit_null_tx, b.duration,
                            show=lambda r: f"tx {fmt_pps(r['tx_pps'])}, cpu {cpu_str(r)}"))
        bare.append(b.attempt(f"rep {rep + 1} bare tx_burst loop", run_bare, b, "txonly", "net_null0,no-rx=1",
                              b.duration, show=lambda r: f"tx {fmt_pps(r['tx_pps'])}, refused {r['refused']}"))
        copy.append(b.attempt(f"rep {rep + 1} bare loop + 60 B copy", run_bare, b, "txcopy", "net_null0,no-rx=1",
                              b.duration, show=lambda r: f"tx {fmt_pps(r['tx_pps'])}, refused {r['refused']}"))
    b.dpdk_rows.append(ratio_row("dpdk_tx (net_null)", "TX pps, 64 B", med(pick(pk, "tx_pps")),
                                 med(pick(bare, "tx_pps")), "bare tx_burst loop", fmt_pps, 0.9, True))
    b.dpdk_rows.append(ratio_row("dpdk_tx (net_null, frames written)", "TX pps, 64 B", med(pick(pk, "tx_pps")),
                                 med(pick(copy, "tx_pps")), "bare loop + 60 B copy", fmt_pps, None, True))
    b.dpdk_details += detail_table(
        "dpdk_tx: net_null TX", ["rep", "perfkit tx pps", "perfkit cpu", "bare tx pps", "bare + copy tx pps"],
        [[str(i + 1), fmt_pps(p and p["tx_pps"]), cpu_str(p) if p else "—", fmt_pps(q and q["tx_pps"]),
          fmt_pps(c and c["tx_pps"])] for i, (p, q, c) in enumerate(zip(pk, bare, copy))],
        ["EAL: " + " ".join(bare_eal_args("...")) + " for both (perfkit's EalOptions defaults)",
         "bare: bench/dpdk_bare.c txonly: rte_pktmbuf_alloc_bulk(32) of 60-byte mbufs, rte_eth_tx_burst, "
         "free the refused; on the EAL main lcore; txcopy also copies a fixed 60-byte frame into each mbuf "
         "(info: what writing the frame costs). perfkit: DpdkFlows(port='net_null0,no-rx=1'), every frame "
         "built (Ethernet/IPv4/UDP headers, checksums, flow id, sequence, timestamp), on a registered thread"])


def _memif_listening(sock: str) -> bool:
    """Has the memif server its control socket? DPDK 22.11's memif makes an abstract
    socket by default (socket-abstract=yes): it shows in /proc/net/unix as @PATH."""
    if os.path.exists(sock):
        return True
    try:
        return any(ln.rstrip().endswith((" @" + sock, " " + sock)) for ln in open("/proc/net/unix"))
    except OSError:
        return False


def _memif_generator_api(spec_dict: dict, sock: str, wait: float) -> dict:
    deadline = time.monotonic() + wait
    while not _memif_listening(sock):   # the reflector (memif server) makes the socket
        if time.monotonic() > deadline:
            raise BenchError(f"memif: the reflector never made {sock}")
        time.sleep(0.02)
    return _dpdk_run_api(spec_dict)


def run_memif(b: Bench, reflector: str, seconds: float) -> dict:
    """perfkit's generator (memif client, mode reverse) in a fork of the bench against a reflector
    in a second process (memif server): perfkit reflect, or the bare macswap loop."""
    from perfkit.spec import DpdkFlows
    sock_dir = Path(tempfile.mkdtemp(prefix="pk-memif-"))
    sock = str(sock_dir / "m.sock")
    server_dev = f"net_memif0,role=server,socket={sock},id=0"
    if reflector == "perfkit":
        cmd = [*perfkit_cmd(), "reflect", "--port", server_dev, "--mode", "reverse", "--ip", DPDK_PEER_IP,
               "--duration", f"{seconds + 20:g}s", "--json"]
    else:
        cmd = [build_bare(b), *bare_eal_args(f"pkbare{os.getpid()}"), "--vdev", server_dev, "--", "macswap",
               f"{seconds + 20:g}"]
    srv = Server(cmd, lifetime=seconds + 40)
    try:
        spec = DpdkFlows(port=f"net_memif0,role=client,socket={sock},id=0", mode="reverse", size=64,
                         duration=seconds, ip=DPDK_IP, peer_ip=DPDK_PEER_IP, dst_mac=MEMIF_DST_MAC)
        s = in_fork(_memif_generator_api, spec.to_dict(), sock, 30.0, timeout=seconds + 60)
    except BenchError:
        out, err = srv.finish()
        if err.strip():
            print(f"      reflector said: {err.strip()[-300:]}", flush=True)
        raise
    finally:
        srv.finish(wait=0)   # the generator has stopped sending and left: now the server may go
        shutil.rmtree(sock_dir, ignore_errors=True)
    return s


def bench_dpdk_memif(b: Bench) -> None:
    print("dpdk_memif: round trips/s over a net_memif pair, perfkit's generator in the bench, the reflector in "
          "a second process: perfkit reflect vs a bare macswap loop", flush=True)
    if dpdk_skipped(b, "dpdk_memif (reflector)", "round trips/s, 64 B", ">= 0.9", dpdk_missing()):
        return
    pk, bare = [], []
    for rep in range(b.reps):
        show = lambda r: (f"rx {fmt_pps(r['rx_pps'])} (tx {fmt_pps(r['tx_pps'])}), "  # noqa: E731
                          f"lost {r['lost']}, cpu {cpu_str(r)}")
        pk.append(b.attempt(f"rep {rep + 1} generator <-> perfkit reflect", run_memif, b, "perfkit", b.duration,
                            show=show))
        bare.append(b.attempt(f"rep {rep + 1} generator <-> bare macswap", run_memif, b, "bare", b.duration,
                              show=show))
    b.dpdk_rows.append(ratio_row("dpdk_memif (reflector)", "round trips/s, 64 B", med(pick(pk, "rx_pps")),
                                 med(pick(bare, "rx_pps")), "bare macswap", fmt_pps, 0.9, True))
    b.dpdk_details += detail_table(
        "dpdk_memif: perfkit's generator through a reflector in a second process",
        ["rep", "perfkit reflect: rx pps", "lost", "gen cpu", "bare macswap: rx pps", "lost", "gen cpu"],
        [[str(i + 1), fmt_pps(p and p["rx_pps"]), f0(p and p["lost"]), cpu_str(p) if p else "—",
          fmt_pps(q and q["rx_pps"]), f0(q and q["lost"]), cpu_str(q) if q else "—"]
         for i, (p, q) in enumerate(zip(pk, bare))],
        ["generator: DpdkFlows(port='net_memif0,role=client,...', mode='reverse'), unpaced; rx pps = frames back "
         "per second of sending (round trips/s)",
         "perfkit: `perfkit reflect --port net_memif0,role=server,... --mode reverse`; bare: bench/dpdk_bare.c "
         "macswap (swap MACs, IPv4 addresses, UDP ports; what perfkit's reflector does to a frame)",
         "both processes share the 2 CPUs with each other and with everything else on the machine"])


def _veth_dpdk_api(h1, h2, a_ip: str, b_ip: str, seconds: float, size: int, driver: str = "af_packet") -> dict:
    """In a fork: perfkit's DPDK receiver (rxonly) on af_packet (or af_xdp) in h2, its generator
    on the same driver in h1, in this one process; frames/s that reached the receiver."""
    import perfkit
    from perfkit.spec import DpdkFlows, DpdkReflect
    # framecnt=4096 (default 512): a receiver descheduled for a few ms on a busy machine keeps up
    extra = ",framecnt=4096" if driver == "af_packet" else ""
    rx = perfkit.Run(DpdkReflect(port=f"net_{driver}1,iface={h2.ifname}{extra}", netns=h2.netns_path, ip=b_ip,
                                 mode="rxonly", duration=seconds + 10), engine="dpdk").start()
    try:
        gen = _dpdk_run_api(DpdkFlows(port=f"net_{driver}0,iface={h1.ifname}{extra}", netns=h1.netns_path,
                                      ip=a_ip,
                                      peer_ip=b_ip, size=size, duration=seconds).to_dict())
    finally:
        time.sleep(0.3)     # the last frames reach the receiver
        rx.stop()
        rx.wait(timeout=10)
    r = rx.summary or {}
    got = (rx.rows[-1].get("udp_rx") if rx.rows else 0) or 0
    secs = gen["duration_s"] or seconds
    return {"tx_pps": gen["tx_pps"], "rx_pps": got / secs, "sent": gen["pkts_tx"], "received": got,
            "lost": r.get("lost"), "cpu_pct_by_worker": {**gen.get("cpu_pct_by_worker", {}),
                                                         **{"rx_" + k: v for k, v in
                                                            (r.get("cpu_pct_by_worker") or {}).items()}}}


def _veth_socket_api(lab_name: str, seconds: float, size: int) -> dict:
    import perfkit
    return _run_to_end(perfkit.LocalTest("udp_bw", size=size, lab=lab_name, duration=seconds),
                       "perfkit local udp_bw --lab")


def _veth_rep(b: Bench, lab, rep: int, driver: str, payload: int, frame: int, pk: list, sock: list,
              socket_first: bool = False) -> None:
    """One rep of dpdk_veth / dpdk_xdp in lab, h1 -> h2: perfkit's DPDK engine on driver at
    both ends (into pk) and its socket engine at both ends (into sock), in the order asked."""
    import ipaddress
    h1, h2 = lab.hosts
    net = ipaddress.ip_network(f"{h1.ipv4}/24", strict=False)
    a_ip, b_ip = str(net.network_address + 200), str(net.network_address + 201)

    def dpdk_run():
        pk.append(b.attempt(f"rep {rep + 1} dpdk {driver} h1 -> h2", in_fork, _veth_dpdk_api, h1, h2, a_ip,
                            b_ip, b.duration, frame, driver, timeout=b.duration + 60,
                            show=lambda r: f"rx {fmt_pps(r['rx_pps'])} (tx {fmt_pps(r['tx_pps'])}), "
                                           f"cpu {cpu_str(r)}"))

    def socket_run():
        sock.append(b.attempt(f"rep {rep + 1} socket udp_bw h1 -> h2", in_fork, _veth_socket_api, lab.name,
                              b.duration, payload, timeout=b.duration + 40,
                              show=lambda r: f"rx {fmt_pps(r['rx_pps'])} (tx {fmt_pps(r['tx_pps'])}), "
                                             f"lost {r['lost']}, cpu {cpu_str(r)}"))
    for run in ((socket_run, dpdk_run) if socket_first else (dpdk_run, socket_run)):
        run()


def _veth_report(b: Bench, row: str, title: str, pk: list, sock: list, notes: list[str]) -> None:
    b.dpdk_rows.append(ratio_row(row, "rx pps, 64 B payload", med(pick(pk, "rx_pps")),
                                 med(pick(sock, "rx_pps")), "socket engine", fmt_pps, 1.0, True))
    b.dpdk_details += detail_table(
        title,
        ["rep", "dpdk rx pps", "dpdk tx pps", "dpdk cpu", "socket rx pps", "socket tx pps", "socket lost",
         "socket cpu"],
        [[str(i + 1), fmt_pps(p and p["rx_pps"]), fmt_pps(p and p["tx_pps"]), cpu_str(p) if p else "—",
          fmt_pps(q and q["rx_pps"]), fmt_pps(q and q["tx_pps"]), f0(q and q["lost"]), cpu_str(q) if q else "—"]
         for i, (p, q) in enumerate(zip(pk, sock))],
        notes)


def bench_dpdk_veth(b: Bench) -> None:
    payload = 64
    frame = payload + 42 + 4   # DPDK sizes count the FCS
    print(f"dpdk_veth: UDP frames/s received across a lab veth pair ({payload} B payloads, {frame - 4} B "
          "frames): perfkit's DPDK engine on net_af_packet at both ends vs its socket engine at both ends",
          flush=True)
    if dpdk_skipped(b, "dpdk_veth (af_packet)", "rx pps, 64 B payload", ">= 1",
                    dpdk_missing() or ("needs root (a lab)" if os.geteuid() != 0 else None)):
        return
    from perfkit.lab import Lab
    pk, sock = [], []
    with Lab(hosts=2) as lab:
        for rep in range(b.reps):
            _veth_rep(b, lab, rep, "af_packet", payload, frame, pk, sock)
    _veth_report(
        b, "dpdk_veth (af_packet)", "dpdk_veth: across a lab veth pair, h1 -> h2", pk, sock,
        [f"dpdk: DpdkFlows on net_af_packet0,iface=<h1's veth>,framecnt=4096 (netns h1, unpaced, {frame} B frames "
         "with FCS) to DpdkReflect(mode='rxonly') on net_af_packet1,iface=<h2's veth>,framecnt=4096 (netns h2), "
         "both in one forked process; "
         "rx pps = UDP frames the receiver got / the generator's sending time",
         f"socket: LocalTest('udp_bw', size={payload}, lab=...): sendmmsg in h1, recvmmsg in h2, unpaced",
         "the same frames on the same veth pair; the lab has no impairments"])


def bench_dpdk_xdp(b: Bench) -> None:
    """As dpdk_veth, with net_af_xdp at both ends. DPDK 22.11's af_xdp binds an interface queue
    once per process and leaves its XDP program behind: every rep gets a lab of its own, the
    socket engine going first (before any XDP program is on the veths)."""
    payload = 64
    frame = payload + 42 + 4
    print(f"dpdk_xdp: UDP frames/s received across a lab veth pair ({payload} B payloads): perfkit's DPDK "
          "engine on net_af_xdp at both ends vs its socket engine at both ends", flush=True)
    if dpdk_skipped(b, "dpdk_xdp (af_xdp)", "rx pps, 64 B payload", ">= 1",
                    dpdk_missing() or ("needs root (a lab)" if os.geteuid() != 0 else None)):
        return
    from perfkit.lab import Lab
    pk, sock = [], []
    for rep in range(b.reps):
        with Lab(hosts=2) as lab:
            _veth_rep(b, lab, rep, "af_xdp", payload, frame, pk, sock, socket_first=True)
    _veth_report(
        b, "dpdk_xdp (af_xdp)", "dpdk_xdp: across a lab veth pair, h1 -> h2, af_xdp", pk, sock,
        [f"dpdk: DpdkFlows on net_af_xdp0,iface=<h1's veth> (netns h1, unpaced, {frame} B frames with FCS) to "
         "DpdkReflect(mode='rxonly') on net_af_xdp1,iface=<h2's veth> (netns h2), both in one forked process; "
         "rx pps = UDP frames the receiver got / the generator's sending time; a new lab every rep",
         f"socket: LocalTest('udp_bw', size={payload}, lab=...): sendmmsg in h1, recvmmsg in h2, unpaced, "
         "first in each lab"])


def run_perfkit_null_fwd(seconds: float) -> dict:
    from perfkit.spec import DpdkReflect
    spec = DpdkReflect(mode="forward", port="net_null0", peer="net_null1", duration=seconds)
    s = in_fork(_dpdk_run_api, spec.to_dict(), timeout=seconds + 30)
    fwd = sum(d["fwd"] for d in s["forward"])
    return {"fwd_pps": fwd / seconds, "drop": sum(d["drop_tx"] for d in s["forward"]), "cpu_pct": s["cpu_pct"],
            "cpu_pct_by_worker": s.get("cpu_pct_by_worker", {})}


def run_bare_fwd(b: Bench, seconds: float) -> dict:
    cmd = [build_bare(b), *bare_eal_args(f"pkbare{os.getpid()}"), "--vdev", "net_null0", "--vdev", "net_null1",
           "--", "iofwd", f"{seconds:g}"]
    cp = run_client(cmd, timeout=seconds + 30)
    for line in reversed(cp.stdout.strip().splitlines()):
        if line.startswith("{"):
            r = json.loads(line)
            r["fwd_pps"] = r["tx_pps"]
            return r
    raise BenchError("dpdk_bare: no result line")


def bench_dpdk_fwd(b: Bench) -> None:
    print("dpdk_fwd: frames/s forwarded between two net_null ports, both directions on one lcore: "
          "perfkit reflect --mode forward vs a bare io-forward loop", flush=True)
    if dpdk_skipped(b, "dpdk_fwd (net_null x2)", "forwarded pps, 64 B", ">= 0.9", dpdk_missing()):
        return
    pk, bare = [], []
    for rep in range(b.reps):
        pk.append(b.attempt(f"rep {rep + 1} perfkit forward", run_perfkit_null_fwd, b.duration,
                            show=lambda r: f"fwd {fmt_pps(r['fwd_pps'])}, drop {r['drop']}, cpu {cpu_str(r)}"))
        bare.append(b.attempt(f"rep {rep + 1} bare io forward", run_bare_fwd, b, b.duration,
                              show=lambda r: f"fwd {fmt_pps(r['fwd_pps'])}, refused {r['refused']}"))
    b.dpdk_rows.append(ratio_row("dpdk_fwd (net_null x2)", "forwarded pps, 64 B", med(pick(pk, "fwd_pps")),
                                 med(pick(bare, "fwd_pps")), "bare io forward", fmt_pps, 0.9, True))
    b.dpdk_details += detail_table(
        "dpdk_fwd: forwarding between two net_null ports", ["rep", "perfkit fwd pps", "perfkit cpu", "bare fwd pps"],
        [[str(i + 1), fmt_pps(p and p["fwd_pps"]), cpu_str(p) if p else "—", fmt_pps(q and q["fwd_pps"])]
         for i, (p, q) in enumerate(zip(pk, bare))],
        ["EAL: " + " ".join(bare_eal_args("...")) + " for both (perfkit's EalOptions defaults)",
         "bare: bench/dpdk_bare.c iofwd: rx_burst(32) on one port, tx_burst of the same mbufs on the other, both "
         "ways on the EAL main lcore, free the refused (testpmd's io forward). perfkit: DpdkReflect(mode='forward', "
         "port='net_null0', peer='net_null1'), cores 1: one registered thread polls both ports, counts per "
         "direction; forwarded pps = frames sent on, both directions, over the run"])


BENCHES = {
    "udp64_pps": bench_udp64_pps,
    "udp64_loss": bench_udp64_loss,
    "tcp_bw": bench_tcp_bw,
    "udp_lat": lambda b: bench_lat(b, "udp"),
    "tcp_lat": lambda b: bench_lat(b, "tcp"),
    "vs_qperf": bench_vs_qperf,
    "http_keepalive": lambda b: _bench_http_vs_wrk(b, close=False),
    "http_close": lambda b: _bench_http_vs_wrk(b, close=True),
    "http_users20k": bench_http_users,
    "dpdk_tx": bench_dpdk_tx,
    "dpdk_memif": bench_dpdk_memif,
    "dpdk_veth": bench_dpdk_veth,
    "dpdk_fwd": bench_dpdk_fwd,
    "dpdk_xdp": bench_dpdk_xdp,
}


# --------------------------------------------------------------- environment

def ensure_tools(install: bool) -> set[str]:
    """The peer tools found; installs missing ones with apt-get when root (and allowed)."""
    missing = [t for t in PEER_TOOLS if not shutil.which(t)]
    if missing and install and os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"installing {' '.join(missing)} with apt-get ...", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "-q", *missing]
        try:
            if subprocess.run(cmd, env=env, timeout=600, capture_output=True).returncode != 0:
                subprocess.run(["apt-get", "update", "-q"], env=env, timeout=600, capture_output=True)
                subprocess.run(cmd, env=env, timeout=600, capture_output=True)
        except subprocess.TimeoutExpired:
            print("apt-get took too long", flush=True)
        missing = [t for t in PEER_TOOLS if not shutil.which(t)]
    if missing:
        how = (" (--no-install given)" if os.geteuid() == 0 and not install
               else "" if os.geteuid() == 0
               else " (not root: install them with `apt-get install -y " + " ".join(missing) + "`)")
        print(f"MISSING peer tools: {', '.join(missing)}{how}; their comparisons are skipped.", flush=True)
    return {t for t in PEER_TOOLS if shutil.which(t)}


def tool_version(tool: str) -> str:
    if tool == "perfkit":   # from its metadata: importing it can take long in an editable install
        import importlib.metadata
        try:
            return importlib.metadata.version("perfkit")
        except importlib.metadata.PackageNotFoundError:
            return "?"
    args = {"iperf3": ["iperf3", "--version"], "qperf": ["qperf", "--version"],
            "sockperf": ["sockperf", "--version"], "wrk": ["wrk", "-v"], "nginx": ["nginx", "-v"]}[tool]
    try:
        cp = subprocess.run(args, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    text = _ANSI.sub("", cp.stdout + cp.stderr)
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else "?"


def environment() -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain", "--", "perfkit", "native"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        rev = rev + (" (perfkit/ or native/ modified)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        rev = "?"
    load1 = os.getloadavg()[0]
    busy = (f"load average {load1:.1f} on {os.cpu_count()} CPUs before starting: other work is running, "
            "so single runs are noisy; trust the ratios less, or use more --reps") if load1 > (os.cpu_count() or 1) else ""
    return {
        "busy": busy,
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "kernel": platform.release(),
        "cpu": f"{cpu}, {os.cpu_count()} CPUs",
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "commit": rev or "?",
    }


# -------------------------------------------------------------------- output

COLUMNS = ("comparison", "metric", "perfkit median", "peer median", "ratio", "target", "result")


def row_cells(r: Row) -> tuple[str, ...]:
    return (r.name, r.metric, r.perfkit, r.peer, r.ratio, r.target, r.status)


def print_table(rows: list[Row]) -> None:
    cells = [COLUMNS] + [row_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    for k, c in enumerate(cells):
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


def table(rows: list) -> list[str]:
    """The markdown lines of a results table: its head and a line per row."""
    return ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)] + \
        ["| " + " | ".join(row_cells(r)) + " |" for r in rows]


def write_results(path: Path, b: Bench, env: dict, versions: dict, argv: list[str], took: float) -> None:
    md = ["# perfkit vs peer tools: results", "",
          f"- date: {env['date']}",
          f"- command: `{' '.join(argv)}`",
          f"- kernel: {env['kernel']}",
          f"- CPU: {env['cpu']}",
          f"- load average (1/5/15 min) at start: {env['load']}; at end: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()),
          f"- perfkit commit: {env['commit']}",
          "- tools: " + ", ".join(f"{t} {v}" for t, v in versions.items()),
          f"- {b.reps} reps per comparison, tools alternating; {b.duration:g} s per run"
          + (f" ({b.vs_duration:g} s in vs_qperf)" if b.vs_rows else "")
          + f"; whole bench took {took:.0f} s"
          + (f"; {b.errors} run(s) failed (see the log)" if b.errors else ""),
          "- traffic on 127.0.0.1, and in vs_qperf also between the two hosts of a perfkit lab "
          "(198.18.x.1 -> .2, a veth pair); ratio = median(perfkit) / median(peer); see README.md for each row",
          *([f"- **{env['busy']}**"] if env["busy"] else []), ""]
    if b.rows:
        md += ["## perfkit local vs iperf3, sockperf, qperf (loopback)", "",
               *table(b.rows)]
        md += ["", "Latency rows compare ROUND-TRIP times (p50) unless the metric says mean RTT/2.", ""]
    if b.vs_rows:
        md += ["## perfkit test vs qperf: two hosts, loopback and veth (vs_qperf)", "",
               f"`perfkit serve` / `perfkit test` against qperf's server / client, every qperf test at three "
               f"sizes, {b.reps} alternating reps of {b.vs_duration:g} s"
               + (f", both tools' client worker pinned to CPU {b.vs_pin[0]} and server worker to CPU {b.vs_pin[1]} "
                  "(-lca/-rca)" if b.vs_pin else "")
               + (", both tools reading what they receive (-ar 1)" if b.vs_access_recv else "")
               + (f", perfkit with --busy-poll {int(b.vs_busy_poll)}" if b.vs_busy_poll is not None else "")
               + ". Bandwidth: payload bits/s received "
               "(qperf udp_bw: recv_bw); latency: mean RTT / 2 on both sides (qperf's `latency`, perfkit's "
               "`latency_us`). Targets: bandwidth >= 1.0x qperf, latency <= 1.0x qperf. In brackets: the "
               "ratio's 95% bootstrap interval (each tool's runs resampled); where it spans 1.0 the runs "
               "do not tell the two tools apart.", "",
               *table(b.vs_rows)]
        if b.vs_paired:
            md += ["", "The same runs in pairs: each rep ran perfkit and qperf back to back, so a slow spell "
                   "of the machine hits both. Ahead: the reps in which perfkit did better (of those where "
                   "the two differ); p: the two-sided sign test's chance of a split at least this uneven "
                   "were neither tool ahead (below 0.05: one tool is ahead in that row).", "",
                   "| comparison | perfkit ahead in | median of the per-rep ratios | sign test p |",
                   "|---|---|---|---|", *("| " + " | ".join(r) + " |" for r in b.vs_paired)]
        md += [""]
    if b.http_rows:
        md += ["## perfkit http vs wrk against nginx (loopback)", "",
               "Requests/s of perfkit's HTTP client and wrk, two threads each, against the same nginx, taking "
               "turns; and many virtual users held with zero client errors. Targets: >= 1.0x wrk.", "",
               *table(b.http_rows)]
        md += [""]
    if b.dpdk_rows:
        md += ["## DPDK engine: against bare DPDK loops and the socket engine", "",
               "perfkit's DPDK engine against the physical limit of the same port (a bare DPDK loop in "
               "bench/dpdk_bare.c, the same EAL options) and against perfkit's socket engine on the same veth. "
               f"{b.reps} alternating reps of {b.duration:g} s; ratio = median(perfkit DPDK) / median(peer).", "",
               *table(b.dpdk_rows)]
        md += [""]
    md += ["## Every run", ""] + b.details + b.vs_details + b.http_details + b.dpdk_details
    path.write_text("\n".join(md) + "\n")


# ---------------------------------------------------------------------- main

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3, help="alternating rounds per comparison (default 3)")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run (default 5)")
    p.add_argument("--vs-duration", type=int, default=2, help="vs_qperf: whole seconds per run (default 2)")
    p.add_argument("--vs-paths", nargs="+", choices=VS_PATHS, default=list(VS_PATHS),
                   help="vs_qperf: over loopback, over a lab veth pair (root), or both (default)")
    p.add_argument("--vs-tests", nargs="+", choices=VS_TESTS, default=list(VS_TESTS),
                   help="vs_qperf: only these tests (default: all four)")
    p.add_argument("--perfkit-client", choices=("api", "cli"), default="api",
                   help="run perfkit's near end from Python in a fork of this script (api, default: perfkit is "
                        "imported once) or as `perfkit local|test ... --json` commands (cli); vs_qperf with cli "
                        "runs one command per size group")
    p.add_argument("--vs-pin", metavar="CLIENT,SERVER",
                   help="vs_qperf: pin both tools' client and server workers to these CPUs (qperf's and "
                        "perfkit's -lca/-rca; default: unpinned, where the scheduler puts them)")
    p.add_argument("--vs-access-recv", action="store_true",
                   help="vs_qperf: both tools' receiving ends read every byte they receive (-ar 1)")
    p.add_argument("--vs-busy-poll", choices=("0", "1"),
                   help="vs_qperf: perfkit's --busy-poll (0: its ends sleep between messages, as qperf's; "
                        "default: perfkit's own, where pinned ends of a latency test spin)")
    p.add_argument("--only", nargs="+", choices=(*GROUPS, "dpdk"), metavar="NAME",
                   help=f"run only these comparisons: {', '.join(GROUPS)}; dpdk = {' '.join(DPDK_GROUPS)}")
    p.add_argument("--loss-rate", type=int, metavar="PPS",
                   help=f"udp64_loss offered rate (default {LOSS_RATE_SHARE:.0%}% of iperf3's measured max)")
    p.add_argument("--base-port", type=int, default=47100, help="first port handed to peer servers (default 47100)")
    p.add_argument("--no-install", action="store_true", help="never apt-get install missing peer tools")
    p.add_argument("--out", type=Path, default=HERE / "RESULTS.md", help="results file (default bench/RESULTS.md)")
    a = p.parse_args(argv)
    if a.only and "dpdk" in a.only:
        a.only = [*a.only, *DPDK_GROUPS]
    if a.reps < 1 or not 1 <= a.duration <= 120 or not 1 <= a.vs_duration <= 120:
        p.error("--reps must be >= 1 and --duration, --vs-duration between 1 and 120 s")
    vs_pin = None
    if a.vs_pin is not None:
        try:
            vs_pin = tuple(int(c) for c in a.vs_pin.split(","))
        except ValueError:
            vs_pin = ()
        if len(vs_pin) != 2 or not set(vs_pin) <= os.sched_getaffinity(0):
            p.error(f"--vs-pin: {a.vs_pin!r} is not two CPUs this process may use, CLIENT,SERVER "
                    f"({','.join(map(str, sorted(os.sched_getaffinity(0))))})")

    global PERFKIT_CLIENT
    PERFKIT_CLIENT = a.perfkit_client
    if PERFKIT_CLIENT == "api":
        import perfkit  # noqa: F401  (once, before any fork: see in_fork)
        import polars  # noqa: F401  (perfkit.test's rows)
    atexit.register(kill_all_servers)
    signal.signal(signal.SIGTERM, _on_sigterm)  # like Ctrl-C: unwind, kill servers, write

    tools = ensure_tools(install=not a.no_install)
    env = environment()
    versions = {t: tool_version(t) for t in ("perfkit", *PEER_TOOLS) if t == "perfkit" or t in tools}
    if a.only is None or set(a.only) & set(HTTP_GROUPS):   # the HTTP rows' peer and server
        versions.update({t: tool_version(t) for t in ("wrk", "nginx") if shutil.which(t)})
    print(f"{env['date']}  kernel {env['kernel']}  {env['cpu']}  load {env['load']}", flush=True)
    if env["busy"]:
        print(f"WARNING: {env['busy']}", flush=True)
    b = Bench(reps=a.reps, duration=a.duration, ports=Ports(a.base_port), tools=tools, loss_rate=a.loss_rate,
              vs_duration=a.vs_duration, vs_paths=tuple(a.vs_paths), vs_tests=tuple(a.vs_tests), vs_client=a.perfkit_client,
              vs_pin=vs_pin, vs_access_recv=a.vs_access_recv,
              vs_busy_poll=None if a.vs_busy_poll is None else a.vs_busy_poll == "1")
    t0 = time.monotonic()
    interrupted = False
    try:
        for name in GROUPS:
            if a.only is None or name in a.only:
                BENCHES[name](b)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: writing the comparisons that finished", flush=True)
    finally:
        kill_all_servers()
    took = time.monotonic() - t0
    for rows in (b.rows, b.vs_rows, b.http_rows, b.dpdk_rows):
        if rows:
            print()
            print_table(rows)
    cmdline = ["python3", "bench/run.py", *(sys.argv[1:] if argv is None else argv)]
    write_results(a.out, b, env, versions, cmdline, took)
    print(f"\nwritten to {a.out} ({took:.0f} s)")
    return 130 if interrupted else 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main())
