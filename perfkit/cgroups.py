"""VM-like lab hosts: CPU quota, CPU set and memory limit per lab host, through cgroups.

    limits = parse_limits({"cpu_quota": "h2=50%", "cpus": "h2=1", "mem": "h2=256M"}, ["h1", "h2"])
    cg = Cgroups.detect()                 # v2 where its controllers are there, else v1, else LabError
    paths = cg.create("l0", "h2")         # /sys/fs/cgroup/perfkit/l0/h2 (v2) or one dir per v1 controller
    cg.apply(paths, limits["h2"]); cg.attach(paths, pid); cg.usage_s(paths); cg.remove(paths)

The limits, declared once (LIMITS: option, help, unit text; used by perfkit lab up/impair and
the lab panel):
  cpu_quota   CPU time as a share of one CPU per 100 ms period: 50% = half a CPU, 150% = one and
              a half (cgroup v2 cpu.max, v1 cpu.cfs_quota_us); 1% .. 100% x the host's CPUs.
  cpus        the CPUs the host runs on, as taskset -c writes them: 1, 0-1, 0,2 (cpuset.cpus);
              only CPUs this process may use.
  mem         memory limit: 256M, 1G (binary units; memory.max, v1 memory.limit_in_bytes);
              4 MiB .. the machine's memory.
"max" (or "off") removes a limit. A value applies to every host, HOST=VALUE to one host:
--cpu-quota h2=50%, several as h1=25%,h2=50% or by repeating the option.

Where: cgroup v2 where a cgroup2 mount has the cpu, cpuset and memory controllers (the tree
perfkit/LAB/HOST under the mount's root, controllers enabled in each parent's
cgroup.subtree_control); v1 otherwise (perfkit/LAB/HOST under this process's own cgroup in each
of the cpu, cpuacct, cpuset and memory hierarchies, so a limit around this process still holds).

perfkit.lab imports it where used (lab.py's top stays standard library only).
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import time
from dataclasses import dataclass, replace

from perfkit.units import parse_size

__all__ = ["Cgroups", "LIMITS", "Limits", "limits_text", "parse_limits"]

CGROUP_ROOT = "/sys/fs/cgroup"
PERIOD_US = 100_000            # the CFS period: quota is per 100 ms
MIN_QUOTA_PCT = 1.0            # the kernel's smallest quota is 1 ms per period
MIN_MEM = 4 << 20              # below this a host cannot even start a Python
V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory")
V2_CONTROLLERS = ("cpu", "cpuset", "memory")
OFF = ("max", "off", "none", "all")

# name -> (CLI option, help, unit text): the limits, declared once
LIMITS = {
    "cpu_quota": ("--cpu-quota", "CPU time as a share of one CPU: 50% (half a CPU), 150%; max: no limit",
                  "percent of one CPU (50%)"),
    "cpus": ("--cpus", "the CPUs the host runs on, as taskset -c: 1, 0-1, 0,2; all: every CPU",
             "CPU list (1, 0-1)"),
    "mem": ("--mem", "memory limit: 256M, 1G (binary units); max: no limit", "bytes (256M)"),
}
HOST_RE = re.compile(r"(h[0-9]{1,3})=(.*)\Z", re.S)


class CgroupError(RuntimeError):
    """The kernel refused a cgroup step (perfkit.lab turns it into LabError)."""


@dataclass(frozen=True)
class Limits:
    """One host's limits; None means no limit."""
    cpu_quota: float | None = None   # percent of one CPU
    cpus: str | None = None          # a CPU list (0-1,3), normalised
    mem: int | None = None           # bytes

    @property
    def off(self) -> bool:
        return self.cpu_quota is None and self.cpus is None and self.mem is None

    def __str__(self) -> str:
        parts = []
        if self.cpu_quota is not None:
            parts.append(f"cpu quota {self.cpu_quota:g}%")
        if self.cpus is not None:
            parts.append(f"cpus {self.cpus}")
        if self.mem is not None:
            parts.append(f"mem {_fmt_bytes(self.mem)}")
        return ", ".join(parts) or "no limits"


def _fmt_bytes(n: int) -> str:
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n / (1 << 30):.1f}G" if n >= 1 << 30 else f"{n}B"


def limits_text(limits: dict) -> str:
    return str(Limits(**limits)) if limits else "no limits"


# ----------------------------------------------------------------------------- CPUs and memory here

def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def parse_cpu_list(text: str, field: str = "cpus") -> list[int]:
    """[0, 1, 3] from "0-1,3" (as taskset -c and cpuset.cpus write it)."""
    out = set()
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*([0-9]{1,4})\s*(?:-\s*([0-9]{1,4})\s*)?", part)
        if not m:
            raise ValueError(f"{field}: cannot read {text!r} as a CPU list (use 1, 0-1 or 0,2)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise ValueError(f"{field}: {part.strip()!r} runs backwards in {text!r}")
        out.update(range(lo, hi + 1))
    return sorted(out)


def cpu_list_text(cpus) -> str:
    """"0-1,3" from [0, 1, 3]."""
    cpus, runs = sorted(cpus), []
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def available_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity, inside its cpuset)."""
    return sorted(os.sched_getaffinity(0))


def machine_memory() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 1 << 62


# ----------------------------------------------------------------------------- parsing

def _split_hosts(value, field: str, hosts: list[str]) -> dict:
    """{host: text} from "50%" (every host), "h2=50%", "h1=0,1,h2=1" or a dict {host: value}."""
    if isinstance(value, dict):
        items = {str(k): v for k, v in value.items()}
    elif isinstance(value, (list, tuple)):   # a repeated CLI option
        items = {}
        for v in value:
            items.update(_split_hosts(v, field, hosts))
        return items
    else:
        text = str(value).strip()
        if not text:
            raise ValueError(f"{field}: empty value (give VALUE or HOST=VALUE, e.g. h2=50%)")
        if not HOST_RE.match(text):
            return {h: text for h in hosts}
        items, cur = {}, None
        for part in text.split(","):
            m = HOST_RE.match(part.strip())
            if m:
                cur = m.group(1)
                items[cur] = m.group(2)
            else:
                items[cur] += "," + part
    for h in items:
        if h not in hosts:
            raise ValueError(f"{field}: {h!r} is not a host of the lab ({', '.join(hosts)})")
    return items


def _parse_quota(text, field: str = "cpu_quota") -> float | None:
    if isinstance(text, str) and text.strip().lower() in OFF:
        return None
    if isinstance(text, bool):
        raise ValueError(f"{field}: {text!r} is not a percentage")
    if isinstance(text, (int, float)):
        pct = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]{1,6}(?:\.[0-9]{1,3})?)\s*%?\s*", str(text))
        if not m:
            raise ValueError(f"{field}: cannot read {text!r} as a share of one CPU (use 50%, 150%, or max)")
        pct = float(m.group(1))
    if not pct >= MIN_QUOTA_PCT:   # also NaN
        raise ValueError(f"{field}: {text!r} is below {MIN_QUOTA_PCT:g}% of one CPU (max: no limit)")
    return pct


def _parse_cpus(text, field: str = "cpus") -> str | None:
    if isinstance(text, str) and text.strip().lower() in OFF:
        return None
    cpus = parse_cpu_list(str(text), field)
    here = available_cpus()
    outside = [c for c in cpus if c not in here]
    if outside:
        raise ValueError(f"{field}: CPU {outside[0]} is not one this machine lets perfkit use "
                         f"({cpu_list_text(here)})")
    return cpu_list_text(cpus)


def _parse_mem(text, field: str = "mem") -> int | None:
    if isinstance(text, str) and text.strip().lower() in OFF:
        return None
    n = parse_size(text.strip() if isinstance(text, str) else text, field)
    total = machine_memory()
    if not MIN_MEM <= n <= total:
        raise ValueError(f"{field}: {text!r} is outside 4M..{_fmt_bytes(total)} (this machine's memory)")
    return n


def parse_limits(values: dict, hosts: list[str], base: dict | None = None) -> dict[str, Limits]:
    """{host: Limits} for the hosts values names (every host for a bare value), each on top of
    base[host] (a Limits or its dict); None for a field keeps it. ValueError naming the field."""
    base = base or {}
    out = {}
    for field, value in values.items():
        if field not in LIMITS:
            raise ValueError(f"{field}: not a host limit (use {', '.join(LIMITS)})")
        if value is None:
            continue
        parse = {"cpu_quota": _parse_quota, "cpus": _parse_cpus, "mem": _parse_mem}[field]
        for h, text in _split_hosts(value, field, hosts).items():
            cur = out.get(h) or _as_limits(base.get(h))
            out[h] = replace(cur, **{field: parse(text, field)})
    for h, lim in out.items():   # the quota fits the host's CPUs
        ncpu = len(parse_cpu_list(lim.cpus)) if lim.cpus else len(available_cpus())
        if lim.cpu_quota is not None and lim.cpu_quota > 100.0 * ncpu:
            raise ValueError(f"cpu_quota: {h}={lim.cpu_quota:g}% is more than its {ncpu} CPU"
                             f"{'s' if ncpu > 1 else ''} can give (at most {100 * ncpu}%)")
    return out


def _as_limits(v) -> Limits:
    if isinstance(v, Limits):
        return v
    return Limits(**v) if v else Limits()


# ----------------------------------------------------------------------------- the cgroup trees

def _mounts():
    """(fstype, mount point, super options) of this process's mounts."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(rfields) >= 3:
                yield rfields[0], fields[4].replace("\\040", " "), set(rfields[2].split(","))


def _own_cgroup_v1() -> dict:
    """{controller: this process's path in its v1 hierarchy}."""
    out = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(","):
            out[c] = path
    return out


def _write(path: str, text: str, what: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as exc:
        raise CgroupError(f"cgroup: {what}: writing {text.strip()!r} to {path}: {exc.strerror}") from None


def _mkdir(path: str) -> bool:
    try:
        os.mkdir(path, 0o755)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        raise CgroupError(f"cgroup: cannot make {path}: {exc.strerror}") from None


class Cgroups:
    """One way to the host cgroups: v2 (one tree) or v1 (one tree per controller).
    paths (what create returns and the lab's state keeps): {"v": 2, "dir": ..., "base": ...} or
    {"v": 1, "dirs": {controller: dir}, "bases": {controller: dir}}."""

    def __init__(self, version: int, where):
        self.version, self.where = version, where

    @classmethod
    def detect(cls) -> "Cgroups":
        """v2 where a cgroup2 mount has cpu, cpuset and memory; else v1 with cpu, cpuacct, cpuset
        and memory mounted; else CgroupError saying what is missing."""
        v1, v2 = {}, []
        try:
            mounts = list(_mounts())
        except OSError as exc:
            raise CgroupError(f"cgroup: cannot read /proc/self/mountinfo: {exc.strerror}") from None
        for fstype, point, opts in mounts:
            if fstype == "cgroup2":
                v2.append(point)
            elif fstype == "cgroup":
                for c in V1_CONTROLLERS:
                    if c in opts:
                        v1.setdefault(c, point)
        for point in v2:
            with contextlib.suppress(OSError):
                if set(V2_CONTROLLERS) <= set(_read(f"{point}/cgroup.controllers").split()):
                    return cls(2, point)
        missing = [c for c in V1_CONTROLLERS if c not in v1]
        if not missing:
            own = _own_cgroup_v1()
            return cls(1, {c: (v1[c], own.get(c, "/")) for c in V1_CONTROLLERS})
        raise CgroupError("cgroup: host limits need cgroup v2 with the cpu, cpuset and memory controllers, "
                          f"or cgroup v1 with cpu, cpuacct, cpuset and memory; here v1 lacks {', '.join(missing)}"
                          + (" and v2 has too few controllers" if v2 else " and v2 is not mounted"))

    @classmethod
    def for_paths(cls, paths: dict) -> "Cgroups":
        return cls(paths["v"], None)

    # ------------------------------------------------------------- create
    def create(self, lab: str, host: str) -> dict:
        """The host's cgroup (and its parents), with no limits yet."""
        if self.version == 2:
            base = self.where
            dirs = [base, f"{base}/perfkit", f"{base}/perfkit/{lab}"]
            for parent, child in zip(dirs, dirs[1:] + [f"{base}/perfkit/{lab}/{host}"]):
                have = set(_read(f"{parent}/cgroup.subtree_control").split())
                need = [c for c in V2_CONTROLLERS if c not in have]
                if need:
                    _write(f"{parent}/cgroup.subtree_control", " ".join("+" + c for c in need),
                           "enabling controllers")
                _mkdir(child)
            return {"v": 2, "dir": f"{base}/perfkit/{lab}/{host}", "base": base}
        paths = {"v": 1, "dirs": {}, "bases": {}}
        try:
            for c, (point, own) in self.where.items():
                base = os.path.normpath(point + "/" + own)
                chain = [f"{base}/perfkit", f"{base}/perfkit/{lab}", f"{base}/perfkit/{lab}/{host}"]
                paths["dirs"][c], paths["bases"][c] = chain[-1], base   # before mkdir: removed on failure
                parent = base
                for d in chain:
                    made = _mkdir(d)
                    if c == "cpuset" and (made or not _read(f"{d}/cpuset.cpus")):   # v1 cpusets start empty
                        _write(f"{d}/cpuset.mems", _read(f"{parent}/cpuset.mems"), "cpuset mems")
                        _write(f"{d}/cpuset.cpus", _read(f"{parent}/cpuset.cpus"), "cpuset cpus")
                    parent = d
        except (CgroupError, OSError):
            with contextlib.suppress(CgroupError, OSError):   # no half-made host left behind
                self.remove(paths)
            raise
        return paths

    # ------------------------------------------------------------- limits
    def apply(self, paths: dict, lim: Limits) -> None:
        quota = None if lim.cpu_quota is None else max(1000, round(lim.cpu_quota * PERIOD_US / 100))
        if paths["v"] == 2:
            d = paths["dir"]
            cpus = lim.cpus if lim.cpus is not None else "\n"   # empty: the parent's (a write, not none)
            _write(f"{d}/cpuset.cpus", cpus, "CPU set")
            _write(f"{d}/cpu.max", f"{quota if quota else 'max'} {PERIOD_US}", "CPU quota")
            _write(f"{d}/memory.max", str(lim.mem) if lim.mem else "max", "memory limit")
            return
        dirs = paths["dirs"]
        parent_cpus = _read(os.path.dirname(dirs["cpuset"]) + "/cpuset.cpus")
        _write(f"{dirs['cpuset']}/cpuset.cpus", lim.cpus if lim.cpus is not None else parent_cpus, "CPU set")
        _write(f"{dirs['cpu']}/cpu.cfs_period_us", str(PERIOD_US), "CPU period")
        _write(f"{dirs['cpu']}/cpu.cfs_quota_us", str(quota if quota else -1), "CPU quota")
        _write(f"{dirs['memory']}/memory.limit_in_bytes", str(lim.mem) if lim.mem else "-1", "memory limit")

    # ------------------------------------------------------------- processes
    @staticmethod
    def attach(paths: dict, pid: int = 0) -> None:
        """Move process pid (0: this one) into the host's cgroup: safe in a child before exec."""
        text = str(pid or os.getpid())
        for d in ([paths["dir"]] if paths["v"] == 2 else paths["dirs"].values()):
            _write(f"{d}/cgroup.procs", text, "moving a process into the host")

    @staticmethod
    def procs(paths: dict) -> list[int]:
        out = set()
        for d in ([paths["dir"]] if paths["v"] == 2 else paths["dirs"].values()):
            with contextlib.suppress(OSError, ValueError):
                out.update(int(x) for x in _read(f"{d}/cgroup.procs").split())
        return sorted(out)

    @staticmethod
    def usage_s(paths: dict) -> float:
        """CPU seconds the host's processes have used (v2 cpu.stat usage_usec, v1 cpuacct.usage)."""
        if paths["v"] == 2:
            for line in _read(f"{paths['dir']}/cpu.stat").splitlines():
                k, v = line.split()
                if k == "usage_usec":
                    return int(v) / 1e6
            return 0.0
        return int(_read(f"{paths['dirs']['cpuacct']}/cpuacct.usage")) / 1e9

    @staticmethod
    def throttled(paths: dict) -> tuple[int, int]:
        """(periods, throttled periods) of the host's CPU quota."""
        d = paths["dir"] if paths["v"] == 2 else paths["dirs"]["cpu"]
        stat = dict(line.split() for line in _read(f"{d}/cpu.stat").splitlines() if len(line.split()) == 2)
        return int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0))

    # ------------------------------------------------------------- remove
    @staticmethod
    def remove(paths: dict) -> None:
        """Processes still in the host's cgroup go back where perfkit/ hangs (the lab is gone,
        they are no longer its hosts'); then the host's dir, and its lab's and perfkit's when
        empty. Best effort: what is gone already is fine."""
        if paths["v"] == 2:
            pairs = [(paths["dir"], paths["base"])]
        else:
            pairs = [(paths["dirs"][c], paths["bases"][c]) for c in paths["dirs"]]
        for d, base in pairs:
            for _ in range(50):
                try:
                    pids = _read(f"{d}/cgroup.procs").split()
                except OSError:
                    break
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        with open(f"{base}/cgroup.procs", "w") as f:
                            f.write(pid)
                time.sleep(0.01)
            for level in (d, os.path.dirname(d), os.path.dirname(os.path.dirname(d))):
                if not level.startswith(base + "/perfkit"):
                    break
                try:
                    os.rmdir(level)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):   # another lab's, or a process left
                        break
                    raise CgroupError(f"cgroup: cannot remove {level}: {exc.strerror}") from None


def leftovers(keep=()) -> list[dict]:
    """The paths (as create returns them) of every perfkit/LAB/HOST cgroup here whose lab is not
    in keep: what an interrupted lab left, for perfkit lab down --all. [] without cgroups."""
    try:
        cg = Cgroups.detect()
    except CgroupError:
        return []
    found = {}
    if cg.version == 2:
        places = {None: (cg.where, "")}
    else:
        places = {c: (os.path.normpath(point + "/" + own), "") for c, (point, own) in cg.where.items()}
    for c, (base, _) in places.items():
        top = f"{base}/perfkit"
        with contextlib.suppress(OSError):
            for lab in os.listdir(top):
                if lab in keep or not os.path.isdir(f"{top}/{lab}"):
                    continue
                for host in os.listdir(f"{top}/{lab}"):
                    if re.fullmatch(r"h[0-9]{1,3}", host) and os.path.isdir(f"{top}/{lab}/{host}"):
                        entry = found.setdefault((lab, host), {"v": cg.version, "dirs": {}, "bases": {}})
                        if c is None:
                            entry.update({"dir": f"{top}/{lab}/{host}", "base": base})
                        else:
                            entry["dirs"][c], entry["bases"][c] = f"{top}/{lab}/{host}", base
    return [{k: v for k, v in e.items() if not (e["v"] == 2 and k in ("dirs", "bases"))} for e in found.values()]


def netns_procs(netns_path: str) -> list[int]:
    """The processes whose network namespace (main thread's) is the one bound at netns_path:
    what runs in that lab host, however it was started (ip netns exec too)."""
    try:
        st = os.stat(netns_path)
    except OSError:
        return []
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                s = os.stat(f"/proc/{name}/ns/net")
                if (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino):
                    out.append(int(name))
    return out


