"""Host metrics beside a run: what the machine saw while the engine ran, sampled once per
interval by the run's sampler thread (never per packet) and added to the same rows.

Columns (one row per interval, the interval's own figures):
  host_cpu_{user,system,softirq,iowait,steal,idle}_pct   whole host, from /proc/stat deltas:
        user = user + nice (guest time is inside user), system = system + irq; the six add
        up to 100 (% of all CPUs' time).
  host_cpu{N}_{...}_pct                                   the same per CPU, written only where
        the host has at most PER_CPU_MAX CPUs (a wide host would make the frame too wide).
  if_{label}_{rx,tx}_{pkts,bytes,drop,err}               per interface the run uses, counts in
        the interval (Int64), from the namespace's /proc/net/dev. label: the interface's name
        in this namespace (lo), a lab host's name (h1) for its link end, else NETNS_IFNAME.
  proc_{name}_{user,system,cpu}_pct                       a watched process (a server perfkit
        started, Run(watch={"server": pid}), perfkit http --watch server=PID): its CPU from
        /proc/PID/stat (all its threads; cpu = user + system), % of one core.
  lab_{host}_cpu_pct                                      a lab run (the spec's lab): each host's
        cgroup CPU (a VM-like host's, perfkit.cgroups: cpu.stat usage_usec, v1 cpuacct.usage),
        % of one core: what the "hypervisor" saw its guest use. Hosts without a cgroup: none.

Another namespace's /proc/net/dev is opened once, by a short-lived thread that joins the
namespace (setns) and opens /proc/thread-self/net/dev: the open file stays bound to that
namespace, so each interval re-reads it from the sampler thread with one pread.
"""
from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass

from perfkit.cgroups import Cgroups
from perfkit.lab import NETNS_DIR, NETNS_RE, Lab, setns_path

CPU_FIELDS = ("user", "system", "softirq", "iowait", "steal", "idle")
IF_FIELDS = ("rx_pkts", "tx_pkts", "rx_bytes", "tx_bytes", "rx_drop", "tx_drop", "rx_err", "tx_err")
PROC_FIELDS = ("user", "system", "cpu")   # cpu: user + system
PER_CPU_MAX = 8      # per-CPU columns only on hosts with at most this many CPUs
MAX_IFACES = 8       # interfaces followed per run, at most
HZ = os.sysconf("SC_CLK_TCK")
IP_TIMEOUT_S = 5.0
_READ = 1 << 16      # first read size of /proc/stat and /proc/net/dev: grows while a file fills it
_READ_MAX = 1 << 24  # ... up to this


# ------------------------------------------------------------------ parsing /proc
def cpu_times(text: str) -> dict[str, tuple[int, ...]]:
    """/proc/stat's cpu lines as {"host": jiffies, "cpu0": ...}, each in CPU_FIELDS order."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *vals = line.split()
        v = [int(x) for x in vals[:8]] + [0] * max(0, 8 - len(vals))
        user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
        out["host" if name == "cpu" else name] = (user + nice, system + irq, softirq, iowait, steal, idle)
    return out


def cpu_shares(prev: tuple[int, ...], cur: tuple[int, ...]) -> tuple[float | None, ...]:
    """Each field's share of the time between two cpu_times tuples, in %."""
    d = [c - p for c, p in zip(cur, prev)]
    total = sum(d)
    if total <= 0 or min(d) < 0:   # no tick between the reads, or a CPU came back online
        return (None,) * len(CPU_FIELDS)
    return tuple(100.0 * x / total for x in d)


def net_dev(text: str) -> dict[str, tuple[int, ...]]:
    """/proc/net/dev as {interface: counters in IF_FIELDS order}."""
    out = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        f = rest.split()
        if not sep or len(f) < 12:
            continue
        out[name.strip()] = (int(f[1]), int(f[9]), int(f[0]), int(f[8]), int(f[3]), int(f[11]), int(f[2]), int(f[10]))
    return out


def proc_cpu(pid: int) -> tuple[int, int] | None:
    """(user, system) jiffies of a process (all its threads), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(rest[11]), int(rest[12])


# ------------------------------------------------------------------ which interfaces
@dataclass(frozen=True)
class Iface:
    label: str          # column prefix after if_
    ifname: str
    netns: str | None   # /run/netns/NAME, None: this process's namespace


def _ns_path(ns: str | None) -> str | None:
    if not ns:
        return None
    return ns if "/" in ns else f"{NETNS_DIR}/{ns}"


def _ip(netns: str | None, *args: str) -> str:
    """iproute2's one-line answer (a netlink query: no packet leaves), "" when it fails."""
    argv = ["ip", *(["-n", os.path.basename(netns)] if netns else []), "-o", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _address(value) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(str(value).split("%")[0])
    except ValueError:
        return None


def _iface_of(addr, how: str, netns: str | None) -> str | None:
    """The interface that holds a local address, or that a remote address is routed out of."""
    a = _address(addr)
    if a is None or a.is_unspecified:
        return None
    if a.is_loopback:
        return "lo"
    if how == "local":
        out = _ip(netns, "addr", "show", "to", f"{a}/{a.max_prefixlen}")
        words = out.split()
        return words[1].split("@")[0].rstrip(":") if len(words) > 1 else None
    m = re.search(r"\bdev (\S+)", _ip(netns, "route", "get", str(a)))
    return m.group(1) if m else None


def _walk(obj, netns, out: list) -> None:
    """(netns, how, value) of every address and kernel interface named in a plan."""
    if isinstance(obj, dict):
        netns = obj.get("netns") if isinstance(obj.get("netns"), str) else netns
        for how in ("local", "remote"):
            v = obj.get(how)
            if isinstance(v, (tuple, list)) and v and isinstance(v[0], str):
                out.append((netns, how, v[0]))
        for v in obj.values():
            _walk(v, netns, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _walk(v, netns, out)
    elif isinstance(obj, str):   # a DPDK kernel port: net_af_packet0,iface=IF (af_xdp too)
        out += [(netns, "iface", m) for m in re.findall(r"\biface=([^,\s]+)", obj)]


def _label(ifname: str, netns: str | None) -> str:
    if netns is None:
        name = ifname
    else:
        ns = os.path.basename(netns)
        m = NETNS_RE.match(ns)
        if m:   # a lab host's own link end is that host's name: if_h1_rx_pkts
            name = m.group(2) if ifname == f"pk{m.group(1)}{m.group(2)}" else f"{m.group(2)}_{ifname}"
        else:
            name = f"{ns}_{ifname}"
    return re.sub(r"\W", "_", name)


def interfaces(spec, plan=None, target: dict | None = None) -> list[Iface]:
    """The kernel interfaces a run's traffic crosses: a lab's hosts' link ends (every host:
    both ends of the link), those that hold the plan's local addresses or route its remote
    ones (lo for loopback), and DPDK kernel ports (iface=). At most MAX_IFACES."""
    found: list[tuple[str, str | None]] = []
    lab = getattr(spec, "lab", None)
    if isinstance(lab, str):
        try:
            found += [(h.ifname, h.netns_path) for h in Lab.attach(lab).hosts]
        except (ValueError, OSError):
            pass   # the kind's plan has refused a lab that is not up already
    named: list = []
    _walk(plan, None, named)
    if not named and target:   # a cluster run: where the spec sends, from this host
        named.append((None, "remote", target.get("address")))
    lab_ns = {ns for _, ns in found}
    wild: list = []   # namespaces where something listens on every address
    for netns, how, value in dict.fromkeys(named):   # each worker names the same addresses: ask once
        netns = _ns_path(netns)
        if netns in lab_ns and netns is not None:
            continue
        ifname = value if how == "iface" else _iface_of(value, how, netns)
        if ifname:
            found.append((ifname, netns))
        elif how == "local" and getattr(_address(value), "is_unspecified", False):
            wild.append(netns)
    for netns in dict.fromkeys(wild):   # a server on 0.0.0.0 alone: every interface it may answer on
        if all(ns != netns for _, ns in found):
            found += [(name, netns) for name in _names_in(netns)]
    out: list[Iface] = []
    for ifname, netns in dict.fromkeys(found):
        label = _label(ifname, netns)
        if any(i.label == label for i in out):   # one column prefix per interface
            label = f"{label}_{len(out)}"
        out.append(Iface(label, ifname, netns))
    return out[:MAX_IFACES]


def _open_in(netns: str) -> int:
    """A /proc/net/dev of netns, opened from inside it by a short-lived thread."""
    result: list = []

    def enter():
        try:
            setns_path(netns)
            result.append(os.open("/proc/thread-self/net/dev", os.O_RDONLY | os.O_CLOEXEC))
        except OSError as exc:
            result.append(exc)

    t = threading.Thread(target=enter, name="perfkit-netns-open", daemon=True)
    t.start()
    t.join()
    if isinstance(result[0], OSError):
        raise result[0]
    return result[0]


def _whole(fd: int) -> str:
    """A /proc file's text, read whole from its start (a buffer that fits it: one read per interval)."""
    size = _READ
    while True:
        data = os.pread(fd, size, 0)
        if len(data) < size or size >= _READ_MAX:
            return data.decode("ascii", "replace")
        size *= 4


def _names_in(netns: str | None) -> list[str]:
    """The interfaces of a namespace (lo first), from its /proc/net/dev; [] when it cannot be read."""
    try:
        fd = os.open("/proc/self/net/dev", os.O_RDONLY | os.O_CLOEXEC) if netns is None else _open_in(netns)
    except OSError:
        return []
    try:
        return sorted(net_dev(_whole(fd)), key=lambda n: n != "lo")
    finally:
        os.close(fd)


def lab_cgroups(spec) -> dict[str, dict]:
    """{host: cgroup paths} of the hosts with a cgroup in the spec's lab (none without a lab)."""
    lab = getattr(spec, "lab", None)
    if not isinstance(lab, str):
        return {}
    try:
        return dict((Lab.attach(lab).state or {}).get("cgroups") or {})
    except (ValueError, OSError):
        return {}


def cgroup_usage_s(paths: dict) -> float | None:
    """CPU seconds a lab host's cgroup has used, None when it cannot be read (removed)."""
    try:
        return Cgroups.usage_s(paths)
    except (OSError, ValueError, KeyError):
        return None


def parse_watch(items) -> dict[str, list[int]]:
    """--watch NAME=PID[,PID...] (repeatable) as {name: [pids]}: each process must exist now;
    one ValueError naming what is wrong."""
    out: dict[str, list[int]] = {}
    for item in items or ():
        name, sep, pids = str(item).partition("=")
        if not sep:
            raise ValueError(f"watch: {item!r} is not NAME=PID (e.g. server=1234)")
        try:
            nums = [int(p, 10) for p in pids.split(",")]
        except ValueError:
            raise ValueError(f"watch: {item!r}: {pids!r} is not a process id or PID,PID,...") from None
        for p in nums:
            if p <= 0 or not os.path.exists(f"/proc/{p}/stat"):
                raise ValueError(f"watch: {item!r}: no process {p} here")
        if name in out:
            raise ValueError(f"watch: {name!r} is given twice")
        out[name] = nums
    return check_watch(out) if out else {}


def check_watch(watch) -> dict[str, list[int]]:
    """{name: pid or [pids]} as {name: [pids]}, or one ValueError naming what is wrong."""
    if watch is None:
        return {}
    if not isinstance(watch, dict):
        raise ValueError(f"watch: {watch!r} is not a dict of name -> pid or [pids]")
    out = {}
    for name, pids in watch.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,32}", name):
            raise ValueError(f"watch: name {name!r} is not 1-32 letters, digits or _")
        pids = list(pids) if isinstance(pids, (list, tuple)) else [pids]
        if not pids or not all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in pids):
            raise ValueError(f"watch: {name}: {pids!r} is not a process id or a list of them")
        out[name] = pids
    return out


# ------------------------------------------------------------------ the sampler
class HostSampler:
    """Reads /proc/stat, each namespace's /proc/net/dev and watched processes' stat; each
    sample() is one row's columns for the time since the previous read. Made right before
    the engine starts (its first read is the baseline)."""

    def __init__(self, ifaces=(), watch: dict | None = None, cgroups: dict | None = None):
        self._fds: dict[str | None, int] = {}
        self.skipped: dict[str, str] = {}   # interface -> why it is not followed
        self.ifaces: list[Iface] = []
        self._stat = os.open("/proc/stat", os.O_RDONLY | os.O_CLOEXEC)
        for i in ifaces:
            try:
                if i.netns not in self._fds:
                    self._fds[i.netns] = (os.open("/proc/self/net/dev", os.O_RDONLY | os.O_CLOEXEC)
                                          if i.netns is None else _open_in(i.netns))
                self.ifaces.append(i)
            except OSError as exc:
                self.skipped[f"{i.netns or ''}:{i.ifname}"] = str(exc)
        self.watch = check_watch(watch)
        self.cgroups = {h: p for h, p in (cgroups or {}).items() if re.fullmatch(r"\w{1,32}", str(h))}
        self._prev = self._read()
        self.cpus = sorted((k for k in self._prev[0] if k != "host"), key=lambda c: int(c[3:]))
        self.per_cpu = len(self.cpus) <= PER_CPU_MAX

    def _pread(self, fd: int) -> str:
        return _whole(fd)

    def _read(self):
        t = time.monotonic()
        cpu = cpu_times(self._pread(self._stat))
        dev = {}
        for ns, fd in self._fds.items():
            try:
                dev[ns] = net_dev(self._pread(fd))
            except OSError:   # the namespace went away mid-run: its columns read null
                dev[ns] = {}
        procs = {}
        for name, pids in self.watch.items():
            times = [proc_cpu(p) for p in pids]
            procs[name] = None if None in times else tuple(map(sum, zip(*times)))
        for host, paths in self.cgroups.items():
            procs[f"lab:{host}"] = cgroup_usage_s(paths)
        return cpu, dev, procs, t

    @property
    def columns(self) -> list[str]:
        cols = [f"host_cpu_{f}_pct" for f in CPU_FIELDS]
        if self.per_cpu:
            cols += [f"host_{c}_{f}_pct" for c in self.cpus for f in CPU_FIELDS]
        cols += [f"if_{i.label}_{f}" for i in self.ifaces for f in IF_FIELDS]
        cols += [f"proc_{n}_{f}_pct" for n in self.watch for f in PROC_FIELDS]
        cols += [f"lab_{h}_cpu_pct" for h in self.cgroups]
        return cols

    def schema(self) -> dict:
        import polars as pl  # polars loads with the first frame, not with perfkit
        return {c: pl.Int64 if c.startswith("if_") else pl.Float64 for c in self.columns}

    def describe(self) -> dict:
        """For the run's environment: what is followed, and where."""
        return {"interfaces": {i.label: f"{i.ifname}" + (f" in {os.path.basename(i.netns)}" if i.netns else "")
                               for i in self.ifaces},
                "per_cpu": self.per_cpu, "cpus": len(self.cpus), "watch": self.watch,
                **({"lab_cgroups": sorted(self.cgroups)} if self.cgroups else {}),
                **({"skipped": self.skipped} if self.skipped else {})}

    def sample(self) -> dict:
        """The columns of the interval since the previous read; nulls where /proc failed (a
        host metric never stops the measurement)."""
        try:
            return self._sample()
        except (OSError, ValueError, IndexError, KeyError):
            return dict.fromkeys(self.columns)

    def _sample(self) -> dict:
        (pcpu, pdev, pproc, pt), cur = self._prev, self._read()
        ccpu, cdev, cproc, ct = cur
        self._prev = cur
        row: dict = {}
        for name in ["host"] + (self.cpus if self.per_cpu else []):
            shares = (cpu_shares(pcpu[name], ccpu[name]) if name in pcpu and name in ccpu
                      else (None,) * len(CPU_FIELDS))
            prefix = "host_cpu" if name == "host" else f"host_{name}"
            row.update({f"{prefix}_{f}_pct": v for f, v in zip(CPU_FIELDS, shares)})
        for i in self.ifaces:
            a, b = pdev.get(i.netns, {}).get(i.ifname), cdev.get(i.netns, {}).get(i.ifname)
            d = [y - x for x, y in zip(a, b)] if a and b else [None] * len(IF_FIELDS)
            if any(v is not None and v < 0 for v in d):   # the interface was made anew
                d = [None] * len(IF_FIELDS)
            row.update({f"if_{i.label}_{f}": v for f, v in zip(IF_FIELDS, d)})
        dt = ct - pt
        for name in self.watch:
            a, b = pproc.get(name), cproc.get(name)
            for k, f in enumerate(PROC_FIELDS[:2]):
                row[f"proc_{name}_{f}_pct"] = (100.0 * (b[k] - a[k]) / HZ / dt) if a and b and dt > 0 else None
            row[f"proc_{name}_cpu_pct"] = (100.0 * (sum(b) - sum(a)) / HZ / dt) if a and b and dt > 0 else None
        for host in self.cgroups:
            a, b = pproc.get(f"lab:{host}"), cproc.get(f"lab:{host}")
            row[f"lab_{host}_cpu_pct"] = 100.0 * (b - a) / dt if a is not None and b is not None and dt > 0 else None
        return row

    def close(self) -> None:
        for fd in [self._stat, *self._fds.values()]:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = {}


# ------------------------------------------------------------------ summaries
def summarize(rows: list[dict]) -> dict:
    """Means (weighted by each interval's length) and peaks of the host CPU and watched
    process columns; each interface counter's total over the run, and its packet rates."""
    out: dict = {}
    if not rows:
        return out
    cols = [c for c in rows[0] if c.startswith(("host_cpu_", "proc_", "lab_"))]
    for c in cols:
        pairs = [(r[c], r.get("interval_s") or 0.0) for r in rows if r.get(c) is not None]
        weight = sum(w for _, w in pairs)
        out[f"{c}_mean"] = sum(v * w for v, w in pairs) / weight if weight > 0 else None
        out[f"{c}_max"] = max((v for v, _ in pairs), default=None)
    idle = [r["host_cpu_idle_pct"] for r in rows if r.get("host_cpu_idle_pct") is not None]
    out["host_cpu_busy_pct_max"] = 100.0 - min(idle) if idle else None
    span = sum(r.get("interval_s") or 0.0 for r in rows)
    for c in (c for c in rows[0] if c.startswith("if_")):
        vals = [r[c] for r in rows if r.get(c) is not None]
        out[c] = sum(vals) if vals else None
        if c.endswith("_pkts"):   # packet rates over the run (a ladder's table shows them per step)
            out[c[:-len("_pkts")] + "_pps"] = sum(vals) / span if vals and span > 0 else None
    return out


def summary_line(s: dict) -> str | None:
    """One short line: host CPU means, the busiest interval, packets on each interface."""
    if s.get("host_cpu_idle_pct_mean") is None:
        return None
    cpu = " ".join(f"{'sys' if f == 'system' else f} {s[f'host_cpu_{f}_pct_mean']:.0f}%" for f in CPU_FIELDS)
    line = f"cpu {cpu} (mean; busiest interval {s['host_cpu_busy_pct_max']:.0f}%)"
    for key in (k for k in s if k.startswith("if_") and k.endswith("_rx_pkts")):
        label = key[3:-len("_rx_pkts")]
        rx, tx = s[key], s.get(f"if_{label}_tx_pkts")
        if rx is not None and tx is not None:
            line += f"; {label} pkts in {rx:,} out {tx:,}"
    return line


def watched_lines(s: dict) -> list[tuple[str, str]]:
    """(name, text) per watched process and lab host cgroup in a summary: CPU mean and peak."""
    out = []
    for key in (k for k in s if k.endswith("_cpu_pct_mean") and k.startswith(("proc_", "lab_"))):
        mean, peak = s[key], s.get(key[:-len("_mean")] + "_max")
        if mean is None:
            continue
        name = key[len("proc_"):-len("_cpu_pct_mean")] if key.startswith("proc_") else \
            "lab " + key[len("lab_"):-len("_cpu_pct_mean")]
        split = ""
        if key.startswith("proc_") and s.get(f"{key[:-len('_cpu_pct_mean')]}_user_pct_mean") is not None:
            p = key[:-len("_cpu_pct_mean")]
            split = f"user {s[p + '_user_pct_mean']:.0f}%, sys {s[p + '_system_pct_mean']:.0f}%; "
        what = "cgroup cpu" if key.startswith("lab_") else "cpu"
        out.append((name, f"{what} {mean:.0f}% of one core (mean; {split}busiest interval {peak or 0:.0f}%)"))
    return out


_IF_WHAT = {"pkts": "packets", "bytes": "bytes", "drop": "packets dropped", "err": "errors"}


def label_of(column: str) -> tuple[str, str] | None:
    """(label, unit) of a host metric column, for charts and tables; None for any other column."""
    m = re.fullmatch(r"host_cpu(\d*)_(\w+?)_pct", column)
    if m and m.group(2) in CPU_FIELDS:
        return f"{'host' if not m.group(1) else 'CPU ' + m.group(1)} {m.group(2)} time", "%"
    m = re.fullmatch(r"if_(\w+)_(rx|tx)_(pkts|bytes|drop|err)", column)
    if m:
        way = "received" if m.group(2) == "rx" else "sent"
        unit = "bytes" if m.group(3) == "bytes" else "count"
        return f"{m.group(1)}: {_IF_WHAT[m.group(3)]} {way} in the interval", unit
    m = re.fullmatch(r"proc_(\w+)_(user|system|cpu)_pct", column)
    if m:
        return f"{m.group(1)} process {'' if m.group(2) == 'cpu' else m.group(2) + ' '}CPU, % of one core", "%"
    m = re.fullmatch(r"lab_(\w+)_cpu_pct", column)
    if m:
        return f"lab host {m.group(1)}: its cgroup's CPU, % of one core", "%"
    return None
