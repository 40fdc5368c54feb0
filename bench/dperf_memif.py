"""perfkit DPDK HTTP client <-> perfkit DPDK HTTP server over net_memif, one core each
(issue 6's memif benches): the server in a child process (its own EAL), the client in
this one; every run gets a fresh memif socket and server, and both sides' counters.

    python3 -P bench/dperf_memif.py [--duration 4] [--cps-levels 50k,100k,...] [--out FILE]
    python3 -P bench/dperf_memif.py --settings dperf,default --reps 3 --duration 10 --out bench/RESULTS-fast.md

--settings runs the rows once per settings, alternating (issue 31): `dperf` is the configuration
the issue gave both dperf and perfkit (tx_burst 128, launch_num 10, 48 client addresses, memif
rings of 16,384 slots, --slow-start s of slow start before the run), `default` perfkit's own
defaults, `bench` (without the option) this bench's --launch-num and --memif-args, `vxlan` bench's
with dperf's vxlan on both sides (issue 32: every frame in outer Ethernet/IPv4/UDP/VXLAN headers). Each row's
ratio to issue 31's goals (1.3M clean connections/s, 1.9M keep-alive requests/s, 30 Gbit/s with
16 KiB responses) is beside it.

Rows:
  cps        connections/s held clean: the highest offered level (searched upward,
             stopping at the first that fails twice) whose run has zero socket and HTTP
             errors on both sides, retransmissions < 0.01% of the packets sent and the
             connections completed at the offered rate (within 5%); the figure is the
             completed connections (2xx responses)/s over the steady seconds
  keepalive  requests/s on `--ka-cc` keep-alive connections (next request 1 us after each
             response), 1400-byte responses (headers + body = 1400 B: one segment)
  keepalive20k  the same on `--ka-cc-big` (20,000) connections (issue 31's goal: 1.2M)
  cc 1K/16K  concurrent connections held (`--cc` target) and Gbit/s of response bytes
             with 1 KiB and 16 KiB response bodies
  udp        dperf's protocol udp (request and answer one datagram each): requests/s at
             `--udp-cps` sockets/s, one request a socket, and on `--ka-cc` keep-alive sockets
             (next request 1 us after each answer); unanswered requests (udp_rt) count as
             retransmits
  pipeline   dperf's pipeline (issue 32): UDP keep-alive requests/s on `--pipe-cc` sockets (next
             request as each answer comes), one request out a socket, then `--pipeline` out
Also per run: first-packet RTT (SYN -> SYN-ACK, where the engine counts it), each side's
busy share of its core (cycles in loop passes that moved a packet / all cycles).
No peer tool here (dperf is not packaged): absolute numbers for this machine, with the
load average beside them. The machine has 2 vCPUs: client and server get one each
(--client-cpu, --server-cpu), shared with whatever else runs.
--hugepages on gives both processes' EAL hugepages (they must be free: /proc/sys/vm/nr_hugepages).
PK_BENCH_GDB=1 runs each server under gdb -batch (a backtrace if its process crashes).
PK_BENCH_PERF_KEEP=DIR keeps the --perf recordings there (`perf report -i DIR/F --sort sym`).
--c2c (on by default) times a cache line's round trip between the two CPUs before and after each
run (bench/c2c.c): on a VM it shows where the host placed the two vCPUs.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ["PERFKIT_SANDBOX"] = "1"   # the network guard (perfkit/sandbox.py), here and in every process started

SERVER = r"""
import json, sys
a = json.loads(sys.argv[1])
from perfkit.engines import dpdk, dpdk_tcp
from perfkit.spec import DpdkHttpServer
from perfkit.stats import COUNTER_NAMES, merge_counters
dpdk.configure(worker_cpus=a["cpus"], mbufs=a["mbufs"], memory_mb=a["mem"], hugepages=a["huge"])
spec = DpdkHttpServer(port=a["port"], payload_size=a["payload"], keepalive=a["keepalive"],
                      clients=tuple(tuple(c) for c in a["clients"]), duration=3600, **a.get("extra", {}))
h = dpdk_tcp.build(spec)
h.start()
print("READY", flush=True)
sys.stdin.readline()          # the client is done
h.stop()
h.join()
snap = h.snapshot()
print(json.dumps({"c": dict(zip(COUNTER_NAMES, merge_counters([list(c) for c, _ in snap]))),
                  "workers": [dict(zip(COUNTER_NAMES, c)) for c, _ in snap], "err": h.error()}), flush=True)
h.close()
"""

CLIENTS = (("198.18.0.10", 16),)   # 16 addresses x 64512 ports: room for 1M connections

# --settings: what both sides are given (issue 31: "fast for every sane configuration")
SETTINGS = {
    # this bench's own (--launch-num, --memif-args; 16 client addresses)
    "bench": {},
    # the configuration issue 31 gave both dperf and perfkit: tx_burst 128, launch_num 10,
    # 48 client addresses, 16,384-slot memif rings, slow_start (--slow-start s) then the run
    "dperf": dict(burst=128, launch_num=10, clients=(("198.18.0.10", 48),), memif_args=",rsize=14", slow=True),
    # perfkit's defaults: the specs' burst and launch_num, memif's own ring size
    "default": dict(burst=None, launch_num=None, memif_args=""),
    # this bench's with dperf's vxlan on both sides (issue 32): every frame in VXLAN, the VTEPs
    # the ports' own addresses (client 198.18.0.1, server 198.18.0.2)
    "vxlan": dict(vxlan=True),
}

VXLAN_VNI, VXLAN_CLI_MAC, VXLAN_SRV_MAC = 4242, "02:00:00:00:42:01", "02:00:00:00:42:02"


def vxlan_of(server: bool) -> tuple:
    """The vxlan field of one side (--settings vxlan)."""
    me, peer = ("198.18.0.2", "198.18.0.1") if server else ("198.18.0.1", "198.18.0.2")
    smac, dmac = (VXLAN_SRV_MAC, VXLAN_CLI_MAC) if server else (VXLAN_CLI_MAC, VXLAN_SRV_MAC)
    return ((VXLAN_VNI, smac, dmac, me, 1, peer, 1),)


GOALS = {"cps": 1.3e6, "keepalive": 1.9e6, "keepalive20k": 1.2e6, "gbps16k": 30.0}   # issue 31's, one core each


def settings(a, name):
    """a copy of the arguments with settings name applied (clients, burst, launch_num, memif args, slow start)."""
    st = SETTINGS[name]
    sa = argparse.Namespace(**vars(a))
    sa.settings_name = name
    sa.clients = st.get("clients", CLIENTS)
    sa.burst = st.get("burst")
    sa.launch_num = st.get("launch_num", a.launch_num)
    sa.memif_args = st.get("memif_args", a.memif_args)
    sa.slow = a.slow_start if st.get("slow") else 0.0
    sa.vxlan = st.get("vxlan", False)
    return sa


def si(s: str) -> float:
    s = s.strip().lower()
    mul = {"k": 1e3, "m": 1e6}.get(s[-1:], 1)
    return float(s[:-1] if mul != 1 else s) * mul


class Server:
    def __init__(self, a, payload: int, keepalive: bool, extra=None):
        self.sock = f"/tmp/pk-bench-memif-{os.getpid()}-{time.monotonic_ns()}.sock"
        arg = {"port": f"net_memif0,role=server,socket={self.sock}{a.memif_args}", "payload": payload,
               "keepalive": keepalive, "clients": a.clients, "cpus": [a.server_cpu], "mbufs": a.mbufs,
               "mem": a.memory_mb, "huge": a.hugepages == "on",
               "extra": {**({"burst": a.burst} if a.burst else {}), **(extra or {}),
                         **({"vxlan": vxlan_of(True)} if getattr(a, "vxlan", False) else {})}}
        pre = ["gdb", "-q", "-batch", "-ex", "run", "-ex", "thread apply all bt 8", "--args"] if os.environ.get("PK_BENCH_GDB") else []
        self.p = subprocess.Popen(pre + [sys.executable, "-P", "-c", SERVER, json.dumps(arg)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        while line and "READY" not in line and pre:   # gdb's own lines first
            line = self.p.stdout.readline()
        if "READY" not in line:
            self.p.kill()
            raise RuntimeError(f"server did not start: {line}{self.p.stderr.read()[-1000:]}")

    def finish(self) -> dict:
        try:
            line = ""
            try:
                self.p.stdin.write("done\n")
                self.p.stdin.flush()
                line = self.p.stdout.readline()
                while line and not line.startswith("{"):
                    print("server:", line.rstrip())
                    line = self.p.stdout.readline()
            except OSError:
                pass
            if not line.strip():
                self.p.wait(timeout=30)
                raise RuntimeError(f"the server process ended with status {self.p.returncode}: "
                                   f"{self.p.stderr.read()[-1500:]}")
            out = json.loads(line)
            self.p.wait(timeout=30)
            return out
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
            if os.path.exists(self.sock):
                os.unlink(self.sock)


def thread_sched(pid: int, comm: str):
    """(on-CPU ns, run-queue wait ns) of pid's thread named comm, from schedstat; None if gone."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != comm:
                    continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run, wait, _ = (int(x) for x in f.read().split())
            return run, wait
    except OSError:
        pass
    return None


def thread_id(pid: int, comm: str) -> str | None:
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == comm:
                    return tid
    except OSError:
        pass
    return None


def perf_split(data: str) -> dict:
    """Shares of a perf recording by DSO: the memif PMD, perfkit's engine, the kernel, the rest."""
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso"], capture_output=True,
                         text=True).stdout
    split = {"memif PMD": 0.0, "perfkit engine": 0.0, "kernel": 0.0, "other": 0.0}
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) < 2 or not parts[0].endswith("%") or ln.startswith("#"):
            continue
        pct, dso = float(parts[0][:-1]), parts[1]
        key = ("memif PMD" if "memif" in dso else "perfkit engine" if "_dpdk" in dso
               else "kernel" if "kernel" in dso else "other")
        split[key] += pct
    return split


C2C = {}   # the compiled bench/c2c.c ("bin"), when --c2c


def c2c(a) -> float | None:
    """A cache line's round trip between the client's and the server's CPU now, in ns (bench/c2c.c):
    where the host runs the two vCPUs (one last-level cache, or two dies) shows in it."""
    if not C2C.get("bin"):
        return None
    out = subprocess.run([C2C["bin"], str(a.client_cpu), str(a.server_cpu)], capture_output=True, text=True, timeout=30)
    return float(out.stdout) if out.returncode == 0 else None


def one_run(a, name: str, payload: int, keepalive_srv: bool, profile: bool = False, **client_kw) -> dict:
    """One server process and one client run; both sides' totals and the client's rows."""
    import perfkit
    from perfkit.spec import DpdkHttpClient
    c2c_before = c2c(a)
    srv = Server(a, payload, keepalive_srv, {"protocol": client_kw["protocol"]} if "protocol" in client_kw else None)
    try:
        knobs = {**({"burst": a.burst} if a.burst else {}), **({"launch_num": a.launch_num} if a.launch_num else {}),
                 **({"slow_start": a.slow} if a.slow else {}),
                 **({"vxlan": vxlan_of(False)} if getattr(a, "vxlan", False) else {})}
        spec = DpdkHttpClient(port=f"net_memif1,role=client,socket={srv.sock}{a.memif_args}", clients=a.clients,
                              ip="198.18.0.1", lport_range=(1024, 65535),
                              # slow start, then --duration at the target (as dperf runs them)
                              duration=a.duration + a.slow, **knobs, **client_kw)
        run = perfkit.Run(spec)
        got = {}

        def last_row(row):
            # the client's final row comes before its port closes: the server stops first, so
            # it never transmits into a memif peer that is leaving (the PMD can crash then)
            if run.summary is not None and "s" not in got:
                time.sleep(0.2)    # the server's last ACKs
                try:
                    got["s"] = srv.finish()
                except RuntimeError as exc:
                    got["err"] = exc
        run.subscribe(last_row)
        run.start()
        # each worker's time on its CPU and waiting for it (the machine is shared), sampled
        # while the workers live: (wall, (run, wait)) first and last
        sch = {"c": [], "s": []}
        perf = []
        if profile:  # 2 s of both workers' cycles, from 1 s in
            time.sleep(1.0)
            for side, pid, comm in (("client", os.getpid(), "pk-tcp-cli"), ("server", srv.p.pid, "pk-tcp-srv")):
                tid = thread_id(pid, comm)
                if tid:
                    f = f"/tmp/pk-bench-perf-{os.getpid()}-{side}.data"
                    perf.append((side, f, subprocess.Popen(
                        ["perf", "record", "-q", "-F", "2999", "-t", tid, "-o", f, "--", "sleep", "2"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        while not run.wait(timeout=0.25):
            now = time.monotonic()
            for k, pid, comm in (("c", os.getpid(), "pk-tcp-cli"), ("s", srv.p.pid, "pk-tcp-srv")):
                v = thread_sched(pid, comm)
                if v:
                    sch[k] = sch[k][:1] + [(now, v)]
    finally:
        if "s" not in got and "err" not in got:
            got["s"] = srv.finish()
    if "err" in got:
        raise got["err"]
    s = got["s"]
    c2c_after = c2c(a)
    prof = {}
    for side, f, p in perf:
        p.wait(timeout=30)
        prof[side] = perf_split(f)
        if os.environ.get("PK_BENCH_PERF_KEEP"):   # a directory: keep the recordings (perf report -i)
            os.replace(f, os.path.join(os.environ["PK_BENCH_PERF_KEEP"], f"{name.replace(' ', '_')}-{side}.data"))
        else:
            os.unlink(f)
    rows = run.rows
    c = {k: rows[-1][k] for k in rows[-1] if not k.endswith("_per_s")}
    # steady: past the slow start, the first and the last (partial) rows left out
    steady = [r for r in rows[1:-1] if r["interval_s"] > 0.5 and r["time_s"] - r["interval_s"] >= a.slow]
    if not steady:   # the last row alone is the drain (connections closing): not a rate to report
        raise RuntimeError(f"{name}: no steady second past the {a.slow:g} s slow start in {len(rows)} rows")
    sc = s["c"]
    retrans = sum(x[k] for x in (c, sc) for k in ("retrans_syn", "retrans_fin", "retrans_ack", "retrans_push"))
    retrans += c.get("udp_rt", 0)   # protocol udp: a request that got no answer
    sent = c["pkts_tx"] + sc["pkts_tx"]
    out = {
        "name": f"{name} [{a.settings_name}]", "c": c, "load": os.getloadavg()[0], "s": sc, "rows": rows, "err": run.error or s["err"],
        "errors": c["sock_error"] + sc["sock_error"] + c["http_err"],
        "retrans": retrans, "retrans_pct": 100.0 * retrans / sent if sent else 0.0,
        "cps": statistics.mean(r["sock_open_per_s"] for r in steady),
        "done_cps": statistics.mean(r["sock_close_per_s"] for r in steady),
        "rps": statistics.mean(r["http_2xx_per_s"] for r in steady),
        "gbps": statistics.mean(r["bytes_rx_per_s"] for r in steady) * 8 / 1e9,
        "cc": statistics.mean(r["sock_current"] for r in steady),
        "cpu_c": 100.0 * c["cpu_busy_ns"] / c["cpu_wall_ns"] if c["cpu_wall_ns"] else 0.0,
        "cpu_s": 100.0 * sc["cpu_busy_ns"] / sc["cpu_wall_ns"] if sc["cpu_wall_ns"] else 0.0,
        "stall_c": 100.0 * c.get("cpu_stall_ns", 0) / c["cpu_wall_ns"] if c["cpu_wall_ns"] else 0.0,
        "stall_s": 100.0 * sc.get("cpu_stall_ns", 0) / sc["cpu_wall_ns"] if sc["cpu_wall_ns"] else 0.0,
        # the engine's own work per connection (or request): busy time, stalls left out
        "us_per_c": c["cpu_busy_ns"] / 1e3 / max(1, c["http_resp"]),
        "us_per_s": sc["cpu_busy_ns"] / 1e3 / max(1, sc["http_get"] + sc["http_post"]),
        "rtt_us": (c["rtt_sum_ns"] / c["rtt_count"] / 1e3) if c.get("rtt_count") else None,
        "rtt_max_us": c["rtt_max_ns"] / 1e3 if c.get("rtt_count") else None,
        "oncpu": {k: (100.0 * (v[-1][1][0] - v[0][1][0]) / ((v[-1][0] - v[0][0]) * 1e9),
                       100.0 * (v[-1][1][1] - v[0][1][1]) / ((v[-1][0] - v[0][0]) * 1e9))
                  if len(v) > 1 else (None, None) for k, v in sch.items()},
        "perf": prof, "c2c_ns": (c2c_before, c2c_after),
        "resp_p50_us": run.summary.get("lat_p50_us"), "resp_p99_us": run.summary.get("lat_p99_us"),
        "agree": (c["syn_tx"] == sc["syn_rx"] and c["http_req"] == sc["http_get"] + sc["http_post"]
                  and c["sock_close"] + c["sock_error"] == c["sock_open"]),
    }
    out["clean"] = out["errors"] == 0 and out["retrans_pct"] < 0.01 and not out["err"]
    if profile:
        return out
    print(f"{name}: cps {out['cps']:,.0f} req/s {out['rps']:,.0f} {out['gbps']:.2f} Gbit/s cc {out['cc']:,.0f} "
          f"errors {out['errors']} retrans {out['retrans']} ({out['retrans_pct']:.4f}%) drop_tx c/s {c['drop_tx']}/{sc['drop_tx']} cpu c/s "
          f"{out['cpu_c']:.0f}/{out['cpu_s']:.0f}% stall {out['stall_c']:.0f}/{out['stall_s']:.0f}% "
          f"us/resp {out['us_per_c']:.2f}/{out['us_per_s']:.2f} c2c ns {out['c2c_ns']} on-cpu/runq c {out['oncpu']['c']} s {out['oncpu']['s']} rtt {out['rtt_us']} us agree {out['agree']} "
          f"{'clean' if out['clean'] else 'NOT clean'} {out['err'] or ''}", flush=True)
    return out


def profiled(a, r, *args, **kw) -> None:
    """The same run again under perf (perf's own cost would skew the measured one): its profile
    goes with the measured run."""
    if r["name"].startswith(tuple(p for p in a.perf if p)):   # --perf "" : none (not every name)
        try:
            r["perf"] = one_run(a, r["name"] + " (perf)", *args, profile=True, **kw)["perf"]
        except RuntimeError as exc:
            print(f"{r['name']} (perf): {exc}", flush=True)


FAILED = []   # runs that did not finish (a side's process died): named in the results


def guarded(a, name, *args, **kw):
    try:
        return one_run(a, name, *args, **kw)
    except RuntimeError as exc:
        print(f"{name}: FAILED: {exc}", flush=True)
        FAILED.append((name, str(exc).splitlines()[0] if str(exc) else "?"))
        return None


def measure(a, results: list) -> list:
    """The runs --only names with one settings' arguments (settings()): the headline rows
    (label, value, target, run); every run also goes on results."""
    from perfkit.spec import DpdkHttpServer
    table = []
    if "cps" in a.only:
        best = None
        for lvl in a.cps_levels.split(","):
            for attempt in range(2):  # a level that fails gets one more try: the machine is shared
                r = guarded(a, f"cps {lvl}" + (" (again)" if attempt else ""), 64, False, cps=si(lvl))
                if r is None:
                    continue
                r["offered"] = si(lvl)
                # held: clean, and the connections completed at the offered rate (within 5%)
                r["clean"] = r["clean"] and r["rps"] >= 0.95 * r["offered"]
                results.append(r)
                profiled(a, r, 64, False, cps=si(lvl))
                if r["clean"]:
                    break
            if r is None or not r["clean"]:
                break
            best = r
        b = best
        table.append(("connections/s held clean (64 B body, close after 1 request)",
                      f"{b['rps']:,.0f} (offered {b['offered']:,.0f})" if b else "none clean",
                      ">= 1,300,000", b, b["rps"] / GOALS["cps"] if b else None))
    # keepalive: --ka-cc connections (goal 1.9M); keepalive20k: --ka-cc-big (goal 1.2M)
    for row, cc, goal in (("keepalive", a.ka_cc, "keepalive"), ("keepalive20k", a.ka_cc_big, "keepalive20k")):
        if row not in a.only:
            continue
        body = 1400 - len(DpdkHttpServer(payload_size=0, keepalive=True).response_bytes())
        r = guarded(a, f"keepalive cc {cc}", body, True, cps=si(a.cc_cps), cc=cc, keepalive="1us")
        if r is not None:
            results.append(r)
            profiled(a, r, body, True, cps=si(a.cc_cps), cc=cc, keepalive="1us")
        table.append((f"keep-alive requests/s, 1400 B responses, {cc} connections",
                      "failed" if r is None else f"{r['rps']:,.0f}" + ("" if r["clean"] else " (not clean)"),
                      f">= {GOALS[goal]:,.0f}", r, r["rps"] / GOALS[goal] if r else None))
    if "cc" in a.only:
        for size, label, cc in ((1024, "1 KiB", a.cc), (16384, "16 KiB", a.cc16)):
            r = guarded(a, f"cc {cc} {label}", size, True, cps=si(a.cc_cps), cc=int(si(cc)), keepalive="1us")
            if r is not None:
                results.append(r)
                profiled(a, r, size, True, cps=si(a.cc_cps), cc=int(si(cc)), keepalive="1us")
            table.append((f"concurrent connections / Gbit/s, {label} bodies, cc {cc}",
                          "failed" if r is None else f"{r['cc']:,.0f} / {r['gbps']:.2f} Gbit/s ({r['rps']:,.0f} req/s)"
                          + ("" if r["clean"] else " (not clean)"), ">= 30 Gbit/s" if size == 16384 else "-", r,
                          r["gbps"] / GOALS["gbps16k"] if r and size == 16384 else None))
    if "udp" in a.only:
        for label, kw in ((f"UDP requests/s, one a socket at {a.udp_cps} sockets/s (64 B body)",
                           dict(cps=si(a.udp_cps))),
                          (f"UDP keep-alive requests/s, {a.ka_cc} sockets (64 B body)",
                           dict(cps=si(a.cc_cps), cc=a.ka_cc, keepalive="1us"))):
            r = guarded(a, "udp keep-alive" if "cc" in kw else f"udp {a.udp_cps}", 64, "cc" in kw, protocol="udp", **kw)
            if r is not None:
                results.append(r)
            table.append((label, "failed" if r is None else f"{r['rps']:,.0f}" + ("" if r["clean"] else " (not clean)"),
                          "-", r, None))
    if "pipeline" in a.only:
        for depth in (1, a.pipeline):
            r = guarded(a, f"udp pipeline {depth}", 64, True, protocol="udp", cps=si(a.cc_cps), cc=a.pipe_cc,
                        keepalive="1us", pipeline=depth)
            if r is not None:
                results.append(r)
            table.append((f"UDP keep-alive requests/s, {a.pipe_cc} sockets, pipeline {depth} (64 B body)",
                          "failed" if r is None else f"{r['rps']:,.0f}" + ("" if r["clean"] else " (not clean)"),
                          "-", r, None))
    return table


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=4.0, help="seconds per run at the target (after any slow start)")
    ap.add_argument("--cps-levels", default="20k,30k,50k,70k,100k,150k,200k,300k,500k,1m")
    ap.add_argument("--ka-cc", type=int, default=4096)
    ap.add_argument("--ka-cc-big", type=int, default=20000, help="connections of the keepalive20k row")
    ap.add_argument("--cc", default="20k", help="connections held in the 1 KiB run")
    ap.add_argument("--cc16", default="1000", help="connections held in the 16 KiB run (12 segments each in flight)")
    ap.add_argument("--cc-cps", default="100k", help="connection rate that builds the cc runs' connections")
    ap.add_argument("--launch-num", type=int, default=64)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--mbufs", type=int, default=65535)
    ap.add_argument("--memory-mb", type=int, default=512)
    ap.add_argument("--memif-args", default=",rsize=14",
                    help="extra memif vdev arguments on both sides (default: 16384-slot rings, which "
                         "ride out a few ms of the peer being descheduled)")
    ap.add_argument("--perf", nargs="*", default=["keepalive", "cps 20k"],
                    help="runs (name prefixes) whose workers perf records for 2 s: cycles by DSO")
    ap.add_argument("--udp-cps", default="200k", help="sockets/s of the udp run with one request a socket")
    ap.add_argument("--pipeline", type=int, default=4, help="requests out a socket in the pipeline run")
    ap.add_argument("--pipe-cc", type=int, default=16, help="sockets of the pipeline runs")
    ap.add_argument("--only", nargs="*", default=["cps", "keepalive", "keepalive20k", "cc"], help="cps keepalive keepalive20k cc udp pipeline")
    ap.add_argument("--settings", default="bench",
                    help=f"comma-separated, run alternately: {', '.join(SETTINGS)} (dperf: issue 31's configuration; "
                         "default: perfkit's own)")
    ap.add_argument("--reps", type=int, default=1, help="rounds over --settings")
    ap.add_argument("--hugepages", choices=("off", "on"), default="off",
                    help="both processes' EAL: --no-huge, or hugepages (root, --memory-mb free in each)")
    ap.add_argument("--slow-start", type=float, default=10.0, help="the dperf settings' slow_start, seconds")
    ap.add_argument("--c2c", choices=("off", "on"), default="on",
                    help="a cache line's round trip between the two CPUs before and after each run (bench/c2c.c, "
                         "compiled with cc): where the host placed the two vCPUs")
    ap.add_argument("--out", default=str(Path(__file__).with_name("RESULTS-dperf.md")),
                    help="results file: this run's section goes on top, earlier ones stay below")
    a = ap.parse_args()
    if a.c2c == "on":
        import atexit, shutil, tempfile
        where = tempfile.mkdtemp(prefix="pk-c2c-")
        atexit.register(shutil.rmtree, where, True)
        binary = os.path.join(where, "c2c")
        cc = subprocess.run(["cc", "-O2", "-pthread", "-o", binary, str(Path(__file__).with_name("c2c.c"))],
                            capture_output=True, text=True)
        if cc.returncode != 0:
            ap.error(f"--c2c: bench/c2c.c does not compile: {cc.stderr.strip()[:300]} (--c2c off runs without it)")
        C2C["bin"] = binary
    from perfkit.engines import dpdk
    # one EAL a process: hugepages are on or off for the whole invocation (run it twice to compare)
    dpdk.configure(worker_cpus=(a.client_cpu,), mbufs=a.mbufs, memory_mb=a.memory_mb, hugepages=a.hugepages == "on")
    dpdk.eal()
    bad = [n for n in a.settings.split(",") if n not in SETTINGS]
    if bad:
        ap.error(f"--settings: {', '.join(bad)}: not one of {', '.join(SETTINGS)}")
    t0 = time.monotonic()
    load0 = os.getloadavg()
    results = []
    table = []
    for rep in range(a.reps):   # the settings alternate, run after run
        for name in a.settings.split(","):
            table += [(f"[{name}] {label}", val, target, r, ratio)
                      for label, val, target, r, ratio in measure(settings(a, name), results)]
    load1 = os.getloadavg()
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "?"
    fmt = lambda v, f="{:.1f}": "-" if v is None else f.format(v)  # noqa: E731
    pct = lambda r, k: fmt(r["oncpu"][k][0], "{:.0f}%")  # noqa: E731

    def per_core(r):
        """What one core each would carry: 1 s / the busier side's work per connection or request."""
        us = max(r["us_per_c"], r["us_per_s"])
        return f"{1e6 / us:,.0f}" if us > 0 else "-"

    lines = [
        "# perfkit DPDK client <-> perfkit DPDK server over net_memif, one core each (bench/dperf_memif.py)", "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}",
        f"- command: `python3 -P bench/dperf_memif.py {' '.join(sys.argv[1:])}`".rstrip(),
        f"- kernel {platform.release()}, {os.cpu_count()} vCPUs: the client pinned to CPU {a.client_cpu}, the server "
        f"to CPU {a.server_cpu}, both shared with the other sessions' work; load average at start "
        f"{load0[0]:.2f}, at end {load1[0]:.2f}; took {time.monotonic() - t0:.0f} s",
        f"- EAL {'hugepages (--in-memory)' if a.hugepages == 'on' else '--no-huge'}, {a.mbufs} mbufs per process, memif args `{a.memif_args}`; {a.duration:g} s per run; "
        "rates are means over the steady seconds (the first and the last, partial, rows left out)",
        "- on CPU: the worker thread's share of its CPU (schedstat run time / wall); the rest it waited "
        "runnable for the CPU. stall: the engine's own count of loop passes over 1 ms (cpu_stall_ns). "
        "work/resp: the engine's busy time (passes that moved packets, stalls left out) per response "
        "(client) or request (server); per core = 1 s / the busier side's work/resp: what a dedicated "
        "core each would carry at this cost, an estimate, not a measurement", "",
        "| metric | this machine | issue 31 goal | / goal | on CPU client / server | work/resp client / server | "
        "per core (estimate) | first-packet RTT mean / max | errors, retransmits |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, val, target, r, ratio in table:
        if r is None:
            lines.append(f"| {label} | {val} | {target} | - | - | - | - | - | - |")
            continue
        lines.append(f"| {label} | {val} | {target} | {fmt(ratio, '{:.2f}')} | {pct(r, 'c')} / {pct(r, 's')} | "
                     f"{r['us_per_c']:.2f} / {r['us_per_s']:.2f} us | {per_core(r)} /s | "
                     f"{fmt(r['rtt_us'])} / {fmt(r['rtt_max_us'])} us | {r['errors']}, {r['retrans']} |")
    if a.reps > 1:   # the median over the rounds, per settings and metric
        by = {}
        for label, _, target, r, ratio in table:
            if ratio is not None:
                by.setdefault((label, target), []).append(ratio)
        lines += ["", f"Median over {a.reps} rounds (settings alternating):", "", "| metric | rounds | median / goal |",
                  "|---|---|---|"]
        lines += [f"| {label} (goal {target}) | {len(v)} | {statistics.median(v):.2f} |" for (label, target), v in by.items()]
    measured = [r for _, _, _, r, _ in table if r is not None]
    if measured:
        on = [v for r in measured for v in (r["oncpu"]["c"][0], r["oncpu"]["s"][0]) if v is not None]
        lo, hi = min(on, default=0), max(on, default=0)
        shared = (f"every worker was on its CPU only {lo:.0f}-{hi:.0f}% of the time (the rest it waited, "
                  "runnable, behind other processes), so the measured rates are what that share of two vCPUs "
                  "carries; a run stops being clean when one side is descheduled long enough for the other to "
                  "overrun the memif ring and its 32768-frame transmit queue." if lo < 90 else
                  f"the workers had their CPUs {lo:.0f}-{hi:.0f}% of the time, so the rates are what one core "
                  "each carries here.")
        lines += ["", f"Reading: {shared} The per-core column is the engine's own busy time per connection or "
                  "request turned into a rate: busy time still includes preemptions under 1 ms (busy can exceed "
                  "the on-CPU share), so it overstates the cost and the estimate errs low."]
    lines += ["", "Every run:", "",
              "| run | load avg (1 min, at its end) | conn/s opened | req/s | Gbit/s rx | concurrent | errors | retransmits (%) | on CPU c / s "
              "| stall c / s | work/resp c / s us | RTT mean us | response p50 / p99 us | counts agree | clean "
              "| CPU-to-CPU round trip before / after, ns |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['name']} | {r['load']:.1f} | {r['cps']:,.0f} | {r['rps']:,.0f} | {r['gbps']:.2f} | {r['cc']:,.0f} | "
                     f"{r['errors']} | {r['retrans']} ({r['retrans_pct']:.4f}) | {pct(r, 'c')} / {pct(r, 's')} | "
                     f"{r['stall_c']:.0f}% / {r['stall_s']:.0f}% | {r['us_per_c']:.2f} / {r['us_per_s']:.2f} | "
                     f"{fmt(r['rtt_us'])} | {fmt(r['resp_p50_us'])} / {fmt(r['resp_p99_us'])} | "
                     f"{'yes' if r['agree'] else 'NO'} | {'yes' if r['clean'] else 'no'} | "
                     f"{fmt(r['c2c_ns'][0], '{:.0f}')} / {fmt(r['c2c_ns'][1], '{:.0f}')} |")
    if FAILED:
        lines += ["", "Runs that did not finish: " + "; ".join(f"{n}: {e}" for n, e in FAILED)]
    prof_runs = [r for r in results if r["perf"]]
    if prof_runs:
        lines += ["", "Where the workers' cycles go (the same run repeated under perf record -t, 2 s from 1 s in; "
                  "share of samples by DSO, idle polling included):", "", "| run | side | memif PMD | perfkit engine | kernel | other |",
                  "|---|---|---|---|---|---|"]
        for r in prof_runs:
            for side, sp in r["perf"].items():
                lines.append(f"| {r['name']} | {side} | {sp['memif PMD']:.0f}% | {sp['perfkit engine']:.0f}% | "
                             f"{sp['kernel']:.0f}% | {sp['other']:.0f}% |")
    text = "\n".join(lines) + "\n"
    out = Path(a.out)
    old = out.read_text() if out.exists() else ""
    out.write_text(text + ("\n" + old if old else ""))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
