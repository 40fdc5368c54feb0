"""Test networks on one machine: hosts in network namespaces, joined by veth pairs,
with impairments (delay, jitter, loss, duplication, reordering, corruption, rate) per link.

    with Lab(hosts=2, delay="10ms", loss="1%") as lab:
        h1, h2 = lab.hosts            # name, netns, netns_path, ipv4, ipv6, ifname
        lab.impair(0, rate="100mbit") # change link 0 while traffic flows
        lab.popen(h2, ["sleep", "1"]) # a process inside h2's namespace
        lab.call(h1, os.getpid)       # a Python callable inside h1's namespace
        lab.limit("h2", cpu_quota="50%", cpus="1", mem="256M")   # a VM-like host (perfkit.cgroups)

Two hosts share one veth pair (link 0); more hosts hang off a bridge in the lab's own
switch namespace, one link per host (link i joins hosts[i] to the switch). A link's
impairment applies in both directions, as netem does on each end of a cable.

Everything is named with the perfkit prefix: namespaces pk-<lab>-h1 .. and pk-<lab>-sw,
interfaces pk<lab>h1, pk<lab>p1 (switch ports), pk<lab>br, pk<lab>d0 (delay taps).
Each lab gets its own /24 from 198.18.0.0/15 and /64 from 2001:2::/48, allocated under a
lock so that labs made at once by several processes never collide. A lab's state is a
JSON file in /run/perfkit/labs/, so `status()`, `down(name)` and `down_all()` work from any
process (the CLI: perfkit lab up / status / down).

Impairments, two ways to the same result:
  netem     where the kernel has sch_netem: netem (+ tbf under it for the rate).
  bpf       otherwise (kernels built without netem): a tc BPF program on each link end
            drops (loss) and copies (duplicate) packets in the kernel and diverts them to a
            tap device read by a small delay-line process (one per lab, started when a
            link first needs it), which holds each packet for delay ± jitter, lets the
            reorder share through at once, flips a bit in the corrupt share (after the
            checksums are final, so the receiver drops it, as with netem) and sends it
            back out of the link; tbf limits the rate. The delay line's packet path is C
            (perfkit._delayline: one SCHED_FIFO thread where the kernel allows it, else
            nice -20 with a short slice; no Python per packet; Python only
            configures it and reads its counters), and a packet's delay counts from the
            moment the BPF program diverted it (it carries that time to the delay line in
            an outer 802.1ad tag), as netem counts from enqueue. In C it adds a few µs
            and forwards near what the kernel carries through a lab link at all (see
            bench/RESULTS-notes.md#the-labs-delay-line).
Both apply per packet, in both directions. The backend is chosen once per process
(Lab(backend="netem"|"bpf") forces one).

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); without it every call fails at once.

This module imports only the standard library at the top (pyroute2 and perfkit.units are
imported where used), so the delay line can run it in a fresh interpreter quickly (it loads
its native extension from the file the parent found, without importing the perfkit package).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import ipaddress
import json
import os
import pickle
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace

__all__ = ["Host", "Impairment", "Lab", "LabError", "down", "down_all", "have_privileges", "parse_percent",
           "status", "status_text"]

RUN_DIR = "/run/perfkit"
LABS_DIR = RUN_DIR + "/labs"
LOCK_FILE = RUN_DIR + "/lab.lock"
NETNS_DIR = "/run/netns"

V4_SPACE = ipaddress.ip_network("198.18.0.0/15")   # one /24 per lab: 512 labs
V6_SPACE = ipaddress.ip_network("2001:2::/48")     # one /64 per lab
MAX_LABS = 512
MAX_HOSTS = 64
MAX_DELAY = 10.0          # seconds, delay and jitter each
MIN_RATE = 8e3            # bits/s
MAX_RATE = 32e9           # tbf's rate is 32-bit bytes/s
MIN_MTU, MAX_MTU = 1280, 65535   # IPv6 needs 1280

NAME_RE = re.compile(r"[a-z0-9]{1,8}\Z")
NETNS_RE = re.compile(r"pk-([a-z0-9]{1,8})-(h[0-9]{1,3}|sw)\Z")

NEED_ROOT = ("perfkit lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) "
             "to create network namespaces")
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21
CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000

IMPAIRMENTS = ("delay", "jitter", "loss", "duplicate", "reorder", "corrupt", "rate")
LOCK_TIMEOUT = 30.0
DAEMON_START_TIMEOUT = 10.0
DELAY_LINE_RT_PRIORITY = 1   # SCHED_FIFO, lowest: the delay line's packet thread wakes on time

_libc = ctypes.CDLL(None, use_errno=True)


class LabError(RuntimeError):
    """The kernel refused to build or change a lab (the message says what and why)."""


# ----------------------------------------------------------------------------- validation

def parse_percent(value, field: str) -> float:
    """A probability in percent, 0..100, from "1%", "0.5%", "0", 1 or 0.25."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: {value!r} is not a percentage")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)\s*", str(value))
        if not m:
            raise ValueError(f"{field}: cannot read {value!r} as a percentage (use 1%, 0.5%)")
        number = float(m.group(1))
    if not 0.0 <= number <= 100.0:  # also rejects NaN
        raise ValueError(f"{field}: {value!r} is outside 0..100%")
    return number


def _parse_delay(value, field: str) -> float:
    # perfkit.units here, not at the top: the delay-line process loads this file without the package
    from perfkit.units import parse_duration
    seconds = parse_duration(value, field)
    if not 0.0 <= seconds <= MAX_DELAY:
        raise ValueError(f"{field}: {value!r} is outside 0..{MAX_DELAY:g}s")
    return seconds


def _parse_link_rate(value, field: str = "rate") -> float:
    """Bits per second: 100mbit, 1Gbit, 10Mbps, or a bare number of bits/s; 0 = no limit."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: {value!r} is not a rate")
    if isinstance(value, (int, float)):
        bps = float(value)
    else:
        from perfkit.units import parse_rate
        r = parse_rate(value, field)
        if r.unit != "bps":
            raise ValueError(f"{field}: {value!r} is a packet rate; a link rate is in bits/s "
                             "(100mbit, 1Gbit)")
        bps = r.value
    if bps != 0 and not MIN_RATE <= bps <= MAX_RATE:  # also rejects NaN
        raise ValueError(f"{field}: {value!r} is outside {MIN_RATE:g}..{MAX_RATE:g} bits/s "
                         "(or 0 for no limit)")
    return bps


@dataclass(frozen=True)
class Impairment:
    """What one link does to packets, in each direction. Zero means off.

    delay, jitter in seconds (each packet waits delay ± jitter, uniform);
    loss, duplicate, reorder, corrupt in percent (reorder: that share skips the delay);
    rate in bits/s, counted on whole Ethernet frames (payload + 42 bytes for UDP/IPv4)."""
    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    corrupt: float = 0.0
    rate: float = 0.0

    @classmethod
    def parse(cls, base: "Impairment | None" = None, **values) -> "Impairment":
        """base with the given fields changed; None (or absent) keeps a field, 0 turns it off."""
        unknown = set(values) - set(IMPAIRMENTS)
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]}: not an impairment (use {', '.join(IMPAIRMENTS)})")
        base = base or cls()
        new = {}
        for name, value in values.items():
            if value is None:
                continue
            if name in ("delay", "jitter"):
                new[name] = _parse_delay(value, name)
            elif name == "rate":
                new[name] = _parse_link_rate(value, name)
            else:
                new[name] = parse_percent(value, name)
        imp = replace(base, **new)
        if imp.reorder and not imp.delay:
            raise ValueError("reorder: needs a delay (reordered packets are the ones sent "
                             "without it)")
        return imp

    @property
    def off(self) -> bool:
        return not any(asdict(self).values())

    @property
    def delays(self) -> bool:
        return bool(self.delay or self.jitter)

    @property
    def diverts(self) -> bool:
        """Needs the delay line (bpf backend): delay, jitter, reorder or corrupt."""
        return bool(self.delay or self.jitter or self.reorder or self.corrupt)

    @property
    def per_packet(self) -> bool:
        """Anything besides the rate."""
        return bool(self.delays or self.loss or self.duplicate or self.reorder or self.corrupt)

    def __str__(self) -> str:
        parts = []
        if self.delays:
            parts.append(f"delay {_fmt_s(self.delay)}" + (f" ± {_fmt_s(self.jitter)}" if self.jitter else ""))
        for name in ("loss", "duplicate", "reorder", "corrupt"):
            if getattr(self, name):
                parts.append(f"{name} {getattr(self, name):g}%")
        if self.rate:
            parts.append(f"rate {_fmt_rate(self.rate)}")
        return ", ".join(parts) or "none"


def _fmt_s(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:g}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g}ms"
    return f"{seconds * 1e6:g}us"


def _fmt_rate(bps: float) -> str:
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if bps >= scale:
            return f"{bps / scale:g} {prefix}bit/s"
    return f"{bps:g} bit/s"


def _check_hosts(hosts) -> int:
    if isinstance(hosts, bool) or not isinstance(hosts, int):
        raise ValueError(f"hosts: {hosts!r} is not a whole number")
    if not 2 <= hosts <= MAX_HOSTS:
        raise ValueError(f"hosts: {hosts} is outside 2..{MAX_HOSTS}")
    return hosts


def _check_mtu(mtu) -> int:
    if isinstance(mtu, bool):
        raise ValueError(f"mtu: {mtu!r} is not a size")
    if isinstance(mtu, str):
        from perfkit.units import parse_size
        mtu = parse_size(mtu, "mtu")
    if not isinstance(mtu, int) or not MIN_MTU <= mtu <= MAX_MTU:
        raise ValueError(f"mtu: {mtu!r} is outside {MIN_MTU}..{MAX_MTU} (IPv6 needs 1280)")
    return mtu


def _check_name(name):
    if name is None:
        return None
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(f"name: {name!r} must be 1 to 8 lowercase letters or digits "
                         "(interface names are limited to 15 characters)")
    return name


# ----------------------------------------------------------------------------- privileges

def _capabilities() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def have_privileges() -> bool:
    """True where labs can be made: CAP_NET_ADMIN and CAP_SYS_ADMIN (root)."""
    caps = _capabilities()
    return bool(caps >> CAP_NET_ADMIN & 1 and caps >> CAP_SYS_ADMIN & 1)


def _require_root() -> None:
    if not have_privileges():
        raise PermissionError(NEED_ROOT)


def setns_path(path: str) -> None:
    """Move the calling thread into the network namespace bound at path."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns({path}): {os.strerror(e)}")
    finally:
        os.close(fd)


def _enter_host(path: str) -> None:
    """For a child process: join the namespace and, as `ip netns exec` does, see its own
    /sys (best effort: a private mount namespace with sysfs mounted on /sys)."""
    setns_path(path)
    if _libc.unshare(CLONE_NEWNS) == 0:
        MS_REC, MS_SLAVE = 0x4000, 0x80000
        if _libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None) == 0:
            _libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None)


def _proc_start(pid: int):
    """(start time, state) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[19]), rest[0]
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int, start=None) -> bool:
    info = _proc_start(pid)
    if info is None or info[1] in ("Z", "X"):
        return False
    return start is None or info[0] == start


def _kill(pid: int, start=None, group: bool = False, timeout: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after timeout; only if pid is still the process started at start."""
    if not pid or not _alive(pid, start):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)   # reap it if it is our child
            if not _alive(pid, start):
                return
            time.sleep(0.01)


# ----------------------------------------------------------------------------- state files

@contextlib.contextmanager
def _locked(timeout: float = LOCK_TIMEOUT):
    """The one lock that makes allocation and state changes atomic across processes."""
    os.makedirs(LABS_DIR, mode=0o755, exist_ok=True)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"perfkit lab: {LOCK_FILE} stayed locked for {timeout:g}s")
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)


def _state_path(name: str) -> str:
    return f"{LABS_DIR}/{name}.json"


def _read_state(name: str):
    try:
        with open(_state_path(name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_state(state: dict) -> None:
    path = _state_path(state["name"])
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, path)


def _all_states() -> list[dict]:
    out = []
    try:
        names = sorted(os.listdir(LABS_DIR))
    except OSError:
        return out
    for fn in names:
        if fn.endswith(".json"):
            st = _read_state(fn[:-5])
            if st and st.get("name") == fn[:-5]:
                out.append(st)
    return out


def _pk_netns() -> list[str]:
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if NETNS_RE.match(n))
    except OSError:
        return []


def _stale(st: dict) -> bool:
    """A lab whose maker died while building it."""
    return st.get("status") == "creating" and not _alive(st.get("owner", 0), st.get("owner_start"))


# ----------------------------------------------------------------------------- tc BPF

# A tiny eBPF assembler: enough for two tc programs (no compiler needed at run time).
_LDX, _STX, _ALU, _JMP, _JMP32, _ALU64 = 0x01, 0x03, 0x04, 0x05, 0x06, 0x07   # classes
_W, _MEM, _K, _X = 0x00, 0x60, 0x00, 0x08                                    # size, mode, source
_AND, _RSH, _MOV = 0x50, 0x70, 0xb0                                          # ALU ops
_JA, _JEQ, _JGE, _CALL, _EXIT = 0x00, 0x10, 0x30, 0x80, 0x90                 # jump ops
_KTIME, _PRANDOM, _CLONE_REDIRECT, _VLAN_PUSH, _REDIRECT = 5, 7, 13, 18, 23  # helper ids
_TC_ACT_OK, _TC_ACT_SHOT = 0, 2
_SKB_MARK, _SKB_IFINDEX = 8, 40                   # offsets in struct __sk_buff
MARK_DELAYED = 0x706b0001   # came back from the delay line: send as is
MARK_COPY = 0x706b0002      # a duplicate: may be delayed, not lost or duplicated again
STAMP_TPID, STAMP_SHIFT = 0x88a8, 12   # a diverted frame's outer 802.1ad tag holds its time
                                       # (as perfkit._delayline reads it: 4.096 us units)


class _Asm:
    def __init__(self):
        self.ins, self.labels = [], {}

    def op(self, code, dst=0, src=0, off=0, imm=0, to=None):
        self.ins.append((code, dst, src, off, imm, to))

    def label(self, name):
        self.labels[name] = len(self.ins)

    def mov(self, dst, imm):
        self.op(_ALU | _MOV | _K, dst, imm=imm)          # 32-bit move, zero-extended

    def call(self, helper):
        self.op(_JMP | _CALL, imm=helper)

    def ret(self, value):
        self.op(_ALU64 | _MOV | _K, 0, imm=value)
        self.op(_JMP | _EXIT)

    def set_mark(self, value):
        self.mov(2, value)
        self.op(_STX | _W | _MEM, 6, 2, _SKB_MARK)

    def chance(self, threshold, skip):
        """Continue with probability threshold / 2**32, else jump to skip."""
        if threshold < 1 << 32:
            self.call(_PRANDOM)
            self.op(_JMP32 | _JGE | _K, 0, imm=threshold, to=skip)

    def code(self) -> bytes:
        out = bytearray()
        for i, (code, dst, src, off, imm, to) in enumerate(self.ins):
            if to is not None:
                off = self.labels[to] - i - 1
            if imm >= 1 << 31:
                imm -= 1 << 32
            out += struct.pack("<BBhi", code, (src << 4) | dst, off, imm)
        return bytes(out)


def _threshold(percent: float) -> int:
    """percent as a 32-bit threshold for bpf_get_prandom_u32(); 1 << 32 = always."""
    return min(1 << 32, round(percent / 100.0 * (1 << 32)))


def _egress_program(imp: Impairment, tap_ifindex: int) -> bytes:
    """Per packet leaving a link end: drop it (loss), send a copy (duplicate), then divert it
    to the delay line's tap (which delays, reorders and corrupts). A diverted packet carries
    the time it was diverted (CLOCK_MONOTONIC >> 12, low 16 bits) in an outer 802.1ad tag,
    so that its delay counts from now, however late the delay line reads it; the delay line
    strips the tag."""
    a = _Asm()
    a.op(_ALU64 | _MOV | _X, 6, 1)                       # r6 = skb
    a.op(_LDX | _W | _MEM, 2, 6, _SKB_MARK)
    a.op(_JMP | _JEQ | _K, 2, imm=MARK_DELAYED, to="delayed")
    a.op(_JMP | _JEQ | _K, 2, imm=MARK_COPY, to="copy")
    if imp.loss:
        a.chance(_threshold(imp.loss), "kept")
        a.ret(_TC_ACT_SHOT)
        a.label("kept")
    if imp.duplicate:
        a.chance(_threshold(imp.duplicate), "single")
        a.set_mark(MARK_COPY)
        a.op(_ALU64 | _MOV | _X, 1, 6)
        a.op(_LDX | _W | _MEM, 2, 6, _SKB_IFINDEX)
        a.mov(3, 0)
        a.call(_CLONE_REDIRECT)                           # the copy comes back here, marked
        a.set_mark(0)
        a.label("single")
    a.op(_JMP | _JA, to="divert")
    a.label("copy")
    a.set_mark(0)
    a.label("divert")
    if tap_ifindex:
        a.call(_KTIME)                                    # r0 = CLOCK_MONOTONIC ns
        a.op(_ALU64 | _RSH | _K, 0, imm=STAMP_SHIFT)
        a.op(_ALU64 | _AND | _K, 0, imm=0xFFFF)
        a.op(_ALU64 | _MOV | _X, 3, 0)                    # r3 = the tag's TCI: the stamp
        a.op(_ALU64 | _MOV | _X, 1, 6)
        a.mov(2, socket.htons(STAMP_TPID))
        a.call(_VLAN_PUSH)                                # if it fails: timed when read
        a.mov(1, tap_ifindex)
        a.mov(2, 0)
        a.call(_REDIRECT)                                 # to the tap: the delay line holds it
        a.op(_JMP | _EXIT)
    else:
        a.ret(_TC_ACT_OK)
    a.label("delayed")
    a.set_mark(0)
    a.ret(_TC_ACT_OK)
    return a.code()


def _return_program(link_ifindex: int) -> bytes:
    """On the tap's ingress: what the delay line sends back leaves by the link end, marked
    so that the egress program lets it pass."""
    a = _Asm()
    a.op(_ALU64 | _MOV | _X, 6, 1)
    a.set_mark(MARK_DELAYED)
    a.mov(1, link_ifindex)
    a.mov(2, 0)
    a.call(_REDIRECT)
    a.op(_JMP | _EXIT)
    return a.code()


def _bpf_load(code: bytes, name: str) -> int:
    """Load a tc (sched_cls) program; returns its fd."""
    NR_BPF, BPF_PROG_LOAD, SCHED_CLS = 321, 5, 3
    insns = ctypes.create_string_buffer(code, len(code))
    license_ = ctypes.create_string_buffer(b"GPL")
    for log_level in (0, 1):
        log = ctypes.create_string_buffer(1 << 16 if log_level else 1)
        attr = struct.pack("<IIQQIIQII16s", SCHED_CLS, len(code) // 8, ctypes.addressof(insns),
                           ctypes.addressof(license_), log_level, len(log) if log_level else 0,
                           ctypes.addressof(log) if log_level else 0, 0, 0, name.encode()[:15])
        attr = ctypes.create_string_buffer(attr + bytes(128 - len(attr)), 128)
        fd = _libc.syscall(NR_BPF, BPF_PROG_LOAD, attr, 128)
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
    detail = log.value.decode(errors="replace").strip().splitlines()[-3:]
    raise LabError(f"loading the tc BPF program {name}: {os.strerror(err)}: {' / '.join(detail)}")


# ----------------------------------------------------------------------------- netlink helpers

def _off_loop(fn):
    """Run fn in a helper thread when this thread runs an asyncio loop (a Jupyter
    kernel's main thread does): pyroute2 refuses to work inside a running loop."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import asyncio
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return fn(*args, **kwargs)  # no loop here: call directly
        box = {}

        def call():
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 (re-raised in the caller)
                box["error"] = exc

        t = threading.Thread(target=call, name=f"perfkit-lab-{fn.__name__}")
        t.start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["value"]
    return wrapper


def _ipr(netns: str | None = None):
    from pyroute2 import IPRoute
    if netns is None:
        return IPRoute()
    return IPRoute(netns=netns, flags=0)


def _nlerr(exc) -> tuple[int, str]:
    code = getattr(exc, "code", None) or getattr(exc, "errno", None) or 0
    return code, os.strerror(code) if code else str(exc)


@contextlib.contextmanager
def _doing(what: str):
    """Turn a netlink error into one LabError line naming the step."""
    try:
        yield
    except (LabError, ValueError, PermissionError, KeyboardInterrupt):
        raise
    except Exception as exc:
        code, msg = _nlerr(exc)
        raise LabError(f"perfkit lab: {what}: {msg}") from exc


def _ifindex(ipr, ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise LabError(f"perfkit lab: interface {ifname} is missing")
    return found[0]


def _ignore(codes, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception as exc:
        if _nlerr(exc)[0] not in codes:
            raise
        return None


_BACKEND = None


def _detect_backend(ipr) -> str:
    """netem where the kernel has it, else bpf (probed once, on a lab host's lo)."""
    global _BACKEND
    if _BACKEND is None:
        try:
            lo = _ifindex(ipr, "lo")
            ipr.tc("add", "netem", index=lo, handle="1:", delay=0)
            _ignore((errno.ENOENT, errno.EINVAL), ipr.tc, "del", index=lo, handle="1:", parent=0xFFFFFFFF)
            _BACKEND = "netem"
        except Exception:
            _BACKEND = "bpf"
    return _BACKEND


def _cgroups():
    """perfkit.cgroups' way here (v2, else v1), or LabError in one line."""
    from perfkit.cgroups import CgroupError, Cgroups
    try:
        return Cgroups.detect()
    except CgroupError as exc:
        raise LabError(f"perfkit lab: {exc}") from None


# ----------------------------------------------------------------------------- the lab

@dataclass(frozen=True)
class Host:
    """One lab host: a network namespace with one interface on the lab network."""
    name: str          # h1, h2, ...
    netns: str         # pk-<lab>-h1
    netns_path: str    # /run/netns/pk-<lab>-h1: the socket engine's per-worker netns
    ipv4: str
    ipv6: str
    ifname: str        # pk<lab>h1, inside the namespace
    mac: str = ""

    def __str__(self) -> str:
        return f"{self.name} ({self.netns}): {self.ipv4} {self.ipv6} on {self.ifname}"


class Lab:
    """Hosts in network namespaces, joined by veth pairs (2 hosts) or a bridge (more),
    with impairments on each link. Use as a context manager, or up() / down().

    Lab(hosts=2, delay=None, jitter=None, loss=None, duplicate=None, reorder=None,
        corrupt=None, rate=None, mtu=1500, name=None, backend=None)

    delay/jitter: 10ms, 1ms (bare numbers are seconds); loss, duplicate, reorder, corrupt:
    1%, 0.5%; rate: 100mbit, 1Gbit (bits/s on the wire). They apply to every link; change
    them later with impair(). cpu_quota (50%), cpus (1, 0-1), mem (256M): VM-like hosts
    through cgroups (perfkit.cgroups), a value for every host or "h2=50%" (or {"h2": "50%"})
    for one; change them later with limit(). Everything is validated here, before anything is made.
    A lab made with up() stays up until down() (from any process); `with` always
    removes it, also on exceptions and Ctrl-C. With the bpf backend, a host whose link
    is delayed also holds the delay line's tap (pk<lab>d<k>: no addresses, no IPv6)."""

    def __init__(self, hosts: int = 2, delay=None, jitter=None, loss=None, duplicate=None,
                 reorder=None, corrupt=None, rate=None, mtu=1500, name=None, backend=None,
                 cpu_quota=None, cpus=None, mem=None):
        self.nhosts = _check_hosts(hosts)
        self.mtu = _check_mtu(mtu)
        self.requested_name = _check_name(name)
        if backend not in (None, "netem", "bpf"):
            raise ValueError(f"backend: {backend!r} is not netem or bpf")
        self.requested_backend = backend
        self.initial = Impairment.parse(delay=delay, jitter=jitter, loss=loss, duplicate=duplicate,
                                        reorder=reorder, corrupt=corrupt, rate=rate)
        from perfkit.cgroups import parse_limits   # VM-like hosts: {host: Limits}, checked here
        self.initial_limits = parse_limits({"cpu_quota": cpu_quota, "cpus": cpus, "mem": mem},
                                           [f"h{i}" for i in range(1, self.nhosts + 1)])
        self.state: dict | None = None
        self._procs: list[subprocess.Popen] = []
        self._daemon: subprocess.Popen | None = None

    # ------------------------------------------------------------- views of the state
    @property
    def name(self) -> str | None:
        return self.state["name"] if self.state else self.requested_name

    @property
    def is_up(self) -> bool:
        return bool(self.state) and self.state.get("status") == "up"

    @property
    def hosts(self) -> list[Host]:
        return [Host(**h) for h in self.state["hosts"]] if self.state else []

    @property
    def backend(self) -> str | None:
        return self.state["backend"] if self.state else None

    @property
    def links(self) -> list[dict]:
        """[{index, hosts, impairment}] — link i joins hosts[i] to the switch (or h1 to h2)."""
        if not self.state:
            return []
        return [{"index": ln["index"], "hosts": ln["hosts"],
                 "impairment": Impairment(**ln["impairment"])} for ln in self.state["links"]]

    @property
    def impairments(self) -> list[Impairment]:
        return [ln["impairment"] for ln in self.links]

    def host(self, which) -> Host:
        """A host by Host, name (h1), namespace name or index in hosts."""
        hosts = self.hosts
        if isinstance(which, Host):
            which = which.name
        if isinstance(which, int) and not isinstance(which, bool):
            if 0 <= which < len(hosts):
                return hosts[which]
        else:
            for h in hosts:
                if which in (h.name, h.netns):
                    return h
        raise ValueError(f"host: {which!r} is not a host of lab {self.name} "
                         f"({', '.join(h.name for h in hosts) or 'not up'})")

    def __repr__(self) -> str:
        if not self.state:
            return f"Lab(hosts={self.nhosts}, not up)"
        return (f"Lab({self.name}: {', '.join(h.name + ' ' + h.ipv4 for h in self.hosts)}; "
                f"{self.backend}; links: {'; '.join(str(i) for i in self.impairments)})")

    @classmethod
    def attach(cls, name: str) -> "Lab":
        """The Lab object for a lab that is up (made by this or another process)."""
        _check_name(name)
        st = _read_state(name)
        if not st or st.get("status") != "up":
            raise ValueError(f"name: no lab {name!r} is up")
        lab = cls(hosts=len(st["hosts"]), mtu=st["mtu"], name=name)
        lab.state = st
        return lab

    # ------------------------------------------------------------- context manager
    def __enter__(self) -> "Lab":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    # ------------------------------------------------------------- up
    @_off_loop
    def up(self) -> "Lab":
        """Make the namespaces, links and addresses; apply the impairments."""
        if self.state:
            raise LabError(f"perfkit lab: {self.name} is already up")
        _require_root()
        try:
            import pyroute2  # noqa: F401
        except ImportError:
            raise LabError("perfkit lab needs pyroute2 (pip install pyroute2)") from None
        if self.initial_limits:
            _cgroups()   # no cgroups here: one line before anything is made
        with _deferred_sigint(), _locked():
            self.state = self._allocate()
        try:
            self._build()
            with _locked():
                self.state["status"] = "up"
                _write_state(self.state)
        except BaseException:
            with _deferred_sigint():
                self._teardown()
            raise
        return self

    def _allocate(self) -> dict:
        """Under the lock: a free name and address block, recorded at once."""
        for st in _all_states():
            if _stale(st):
                _teardown_state(st)
        states = _all_states()
        used_blocks = {st["block"] for st in states}
        used_names = {st["name"] for st in states} | {NETNS_RE.match(n).group(1) for n in _pk_netns()}
        if self.requested_name and self.requested_name in used_names:
            raise ValueError(f"name: a lab {self.requested_name!r} already exists "
                             "(perfkit lab down it first)")
        block = next((b for b in range(MAX_LABS) if b not in used_blocks
                      and (self.requested_name or f"l{b}" not in used_names)), None)
        if block is None:
            raise LabError(f"perfkit lab: all {MAX_LABS} address blocks are in use")
        name = self.requested_name or f"l{block}"
        v4 = list(V4_SPACE.subnets(new_prefix=24))[block]
        v6 = ipaddress.ip_network((int(V6_SPACE.network_address) + (block << 64), 64))
        hosts = []
        for i in range(1, self.nhosts + 1):
            ns = f"pk-{name}-h{i}"
            hosts.append(asdict(Host(name=f"h{i}", netns=ns, netns_path=f"{NETNS_DIR}/{ns}",
                                     ipv4=str(v4.network_address + i), ipv6=str(v6.network_address + i),
                                     ifname=f"pk{name}h{i}")))
        switched = self.nhosts > 2
        egress, links = [], []
        if switched:
            for i, h in enumerate(hosts):
                egress.append({"netns": h["netns"], "ifname": h["ifname"], "link": i})
                egress.append({"netns": f"pk-{name}-sw", "ifname": f"pk{name}p{i + 1}", "link": i})
                links.append({"index": i, "hosts": [h["name"], "switch"], "egress": [2 * i, 2 * i + 1]})
        else:
            egress = [{"netns": hosts[0]["netns"], "ifname": hosts[0]["ifname"], "link": 0},
                      {"netns": hosts[1]["netns"], "ifname": hosts[1]["ifname"], "link": 0}]
            links = [{"index": 0, "hosts": ["h1", "h2"], "egress": [0, 1]}]
        for k, e in enumerate(egress):
            e["tap"] = f"pk{name}d{k}"
        for ln in links:
            ln["impairment"] = asdict(Impairment())
        st = {"name": name, "id": f"{os.getpid()}-{time.time_ns()}", "block": block,
              "status": "creating", "backend": None,
              "owner": os.getpid(), "owner_start": (_proc_start(os.getpid()) or (0,))[0],
              "created": time.time(), "mtu": self.mtu,
              "ipv4_net": str(v4), "ipv6_net": str(v6), "hosts": hosts,
              "switch": f"pk-{name}-sw" if switched else None,
              "bridge": f"pk{name}br" if switched else None,
              "links": links, "egress": egress, "delay_line": None, "procs": [],
              "cgroups": {}, "limits": {}}
        _write_state(st)
        return st

    def _build(self) -> None:
        from pyroute2 import netns as pr_netns
        st = self.state
        spaces = [h["netns"] for h in st["hosts"]] + ([st["switch"]] if st["switch"] else [])
        for ns in spaces:
            with _doing(f"creating network namespace {ns}"):
                pr_netns.create(ns)
        for i, h in enumerate(st["hosts"], 1):   # fixed, locally administered: 02:70:6b ("pk")
            h["mac"] = f"02:70:6b:{st['block'] >> 8:02x}:{st['block'] & 255:02x}:{i:02x}"
        fds = {ns: os.open(f"{NETNS_DIR}/{ns}", os.O_RDONLY | os.O_CLOEXEC) for ns in spaces}
        try:
            with _ipr() as ipr:
                if st["switch"]:
                    for i, h in enumerate(st["hosts"], 1):
                        port = f"pk{st['name']}p{i}"
                        with _doing(f"creating veth {h['ifname']} <-> {port}"):
                            ipr.link("add", ifname=h["ifname"], kind="veth", address=h["mac"],
                                     net_ns_fd=fds[h["netns"]],
                                     peer={"ifname": port, "net_ns_fd": fds[st["switch"]]})
                else:
                    a, b = st["hosts"]
                    with _doing(f"creating veth {a['ifname']} <-> {b['ifname']}"):
                        ipr.link("add", ifname=a["ifname"], kind="veth", address=a["mac"],
                                 net_ns_fd=fds[a["netns"]],
                                 peer={"ifname": b["ifname"], "address": b["mac"],
                                       "net_ns_fd": fds[b["netns"]]})
        finally:
            for fd in fds.values():
                os.close(fd)
        if st["switch"]:
            with _ipr(st["switch"]) as ipr, _doing(f"building the switch in {st['switch']}"):
                ipr.link("set", index=_ifindex(ipr, "lo"), state="up")
                ipr.link("add", ifname=st["bridge"], kind="bridge", br_stp_state=0,
                         br_forward_delay=0, br_mcast_snooping=0)
                br = _ifindex(ipr, st["bridge"])
                ipr.link("set", index=br, mtu=st["mtu"], state="up")
                for i in range(1, len(st["hosts"]) + 1):
                    port = _ifindex(ipr, f"pk{st['name']}p{i}")
                    ipr.link("set", index=port, mtu=st["mtu"], master=br, state="up")
        v4len = int(st["ipv4_net"].split("/")[1])
        for h in st["hosts"]:
            with _ipr(h["netns"]) as ipr, _doing(f"configuring {h['ifname']} in {h['netns']}"):
                ipr.link("set", index=_ifindex(ipr, "lo"), state="up")
                idx = _ifindex(ipr, h["ifname"])
                ipr.link("set", index=idx, mtu=st["mtu"], state="up")
                ipr.addr("add", index=idx, address=h["ipv4"], prefixlen=v4len)
                ipr.addr("add", index=idx, address=h["ipv6"], prefixlen=64, flags=0x02)  # NODAD
                # permanent neighbours: no ARP/ND on lab links, no first packet waits for one
                for other in st["hosts"]:
                    if other is not h:
                        for addr in (other["ipv4"], other["ipv6"]):
                            ipr.neigh("replace", dst=addr, lladdr=other["mac"], ifindex=idx,
                                      state=0x80)  # NUD_PERMANENT
                if st["backend"] is None:
                    st["backend"] = self.requested_backend or _detect_backend(ipr)
        for h, lim in self.initial_limits.items():
            self._set_limits(h, lim)
        if self.initial.off:
            return
        for ln in st["links"]:
            ln["impairment"] = asdict(self.initial)
        self._apply(list(range(len(st["links"]))))

    # ------------------------------------------------------------- impairments
    @_off_loop
    def impair(self, link=None, reset: bool = False, **values) -> list[Impairment]:
        """Change impairments while traffic flows. link: an index in links, a list of them,
        or None for every link. Given fields change, others stay (reset=True clears them
        first); 0 turns one off. Returns the links' impairments. Host limits (cpu_quota,
        cpus, mem: "h2=50%") go to limit(), checked before any link changes."""
        if not self.state:
            raise LabError("perfkit lab: the lab is not up")
        _require_root()
        limits = {k: values.pop(k) for k in ("cpu_quota", "cpus", "mem") if k in values}
        if limits:
            from perfkit.cgroups import parse_limits
            parse_limits(limits, [h.name for h in self.hosts], base=self.state.get("limits") or {})
            now = self.impair(link, reset, **values) if values or reset else self.impairments
            self.limit(**limits)
            return now
        links = self._link_indexes(link)
        with _locked():
            fresh = _read_state(self.name)
            if not fresh or fresh.get("status") != "up":
                raise LabError(f"perfkit lab: {self.name} is no longer up")
            self.state = fresh
            new = {}
            for i in links:
                base = Impairment() if reset else Impairment(**fresh["links"][i]["impairment"])
                new[i] = Impairment.parse(base, **values)
            for i, imp in new.items():
                fresh["links"][i]["impairment"] = asdict(imp)
            try:
                self._apply(links)
            except BaseException:
                self.state = _read_state(self.name) or self.state   # what the file says
                raise
            _write_state(fresh)
        return self.impairments

    def clear(self, link=None) -> list[Impairment]:
        """Remove every impairment from link (or from all links)."""
        return self.impair(link, reset=True)

    # ------------------------------------------------------------- VM-like hosts (cgroups)
    @_off_loop
    def limit(self, host=None, cpu_quota=None, cpus=None, mem=None) -> dict:
        """Change hosts' limits while they run: host (h2, an index or a Host; None: as the
        values say, every host for a bare value), cpu_quota (50%), cpus (1, 0-1), mem (256M);
        None keeps a limit, "max" removes it. Every process in the host's namespace goes into
        its cgroup (also ones started with ip netns exec). Returns {host: limits text}."""
        if not self.state:
            raise LabError("perfkit lab: the lab is not up")
        _require_root()
        from perfkit.cgroups import parse_limits
        names = [h.name for h in self.hosts]
        values = {"cpu_quota": cpu_quota, "cpus": cpus, "mem": mem}
        if host is not None:
            h = self.host(host).name
            values = {k: (v if v is None or isinstance(v, dict) else {h: v}) for k, v in values.items()}
        with _deferred_sigint(), _locked():
            fresh = _read_state(self.name)
            if not fresh or fresh.get("status") != "up":
                raise LabError(f"perfkit lab: {self.name} is no longer up")
            self.state = fresh
            new = parse_limits(values, names, base=fresh.get("limits") or {})
            if new:
                _cgroups()
            try:
                for h, lim in new.items():
                    self._set_limits(h, lim)
            finally:
                _write_state(self.state)
        return self.limits

    @property
    def limits(self) -> dict:
        """{host: its limits as text} for hosts with a cgroup."""
        from perfkit.cgroups import limits_text
        return {h: limits_text(v) for h, v in (self.state or {}).get("limits", {}).items()}

    def cpu_usage(self, host) -> float:
        """CPU seconds the host's cgroup has used (cpu.stat usage_usec, v1 cpuacct.usage)."""
        from perfkit.cgroups import Cgroups
        paths = (self.state or {}).get("cgroups", {}).get(self.host(host).name)
        if not paths:
            raise LabError(f"perfkit lab: host {self.host(host).name} has no cgroup (give it a limit)")
        return Cgroups.usage_s(paths)

    def cgroup(self, host) -> dict | None:
        """The host's cgroup paths (perfkit.cgroups), None where it has no limits yet."""
        return (self.state or {}).get("cgroups", {}).get(self.host(host).name)

    def _set_limits(self, host: str, lim) -> None:
        """Under the lock: the host's cgroup made if new, lim written, the host's processes in it."""
        from dataclasses import asdict as as_dict
        from perfkit.cgroups import CgroupError, Cgroups, netns_procs
        st = self.state
        cg = _cgroups()
        paths = st.setdefault("cgroups", {}).get(host)
        try:
            if not paths:
                paths = cg.create(st["name"], host)
                st["cgroups"][host] = paths
                _write_state(st)   # recorded at once, so down() removes it
            cg.apply(paths, lim)
            st.setdefault("limits", {})[host] = as_dict(lim)
            for pid in netns_procs(f"{NETNS_DIR}/{self.host(host).netns}"):
                with contextlib.suppress(CgroupError):   # gone meanwhile, or a kernel thread
                    Cgroups.attach(paths, pid)
        except (CgroupError, OSError) as exc:   # OSError: a cgroup file that cannot be read
            raise LabError(f"perfkit lab: {host}: {exc}") from None

    def _link_indexes(self, link) -> list[int]:
        n = len(self.state["links"])
        if link is None:
            return list(range(n))
        items = link if isinstance(link, (list, tuple, range)) else [link]
        for i in items:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
                raise ValueError(f"link: {i!r} is not a link of lab {self.name} (0..{n - 1})")
        return list(items)

    def _apply(self, links: list[int]) -> None:
        st = self.state
        imps = {i: Impairment(**st["links"][i]["impairment"]) for i in links}
        if st["backend"] == "netem":
            for i, imp in imps.items():
                for k in st["links"][i]["egress"]:
                    _apply_netem(st["egress"][k], imp, st["mtu"])
            return
        if any(imp.diverts for imp in imps.values()) and not self._delay_line_alive():
            self._start_delay_line()
        for i, imp in imps.items():
            for k in st["links"][i]["egress"]:
                if imp.diverts:           # the delay line first, then divert into it
                    self._delay_line_config(k, imp)
                _apply_bpf(st["egress"][k], imp, divert=imp.diverts, mtu=st["mtu"])
                if not imp.diverts and st.get("delay_line"):
                    self._delay_line_config(k, Impairment())

    # ------------------------------------------------------------- delay line (bpf backend)
    def _delay_line_alive(self) -> bool:
        dl = self.state.get("delay_line")
        return bool(dl) and _alive(dl["pid"], dl.get("start"))

    def _start_delay_line(self) -> None:
        st = self.state
        if not os.path.exists("/dev/net/tun"):
            raise LabError("perfkit lab: delay needs /dev/net/tun (the tun driver)")
        native = _delay_line_extension()
        sock = f"{LABS_DIR}/{st['name']}.sock"
        log = open(f"{LABS_DIR}/{st['name']}.log", "ab")
        code = ("import importlib.util as u,sys;s=u.spec_from_file_location('_perfkit_delay_line',"
                "sys.argv[1]);m=u.module_from_spec(s);sys.modules[s.name]=m;s.loader.exec_module(m);"
                "m._delay_line_main(sys.argv[2],sys.argv[3],sys.argv[4])")
        try:
            p = subprocess.Popen([sys.executable, "-c", code, os.path.abspath(__file__), st["name"], sock,
                                  native],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                 start_new_session=True, close_fds=True)
        finally:
            log.close()
        self._daemon = p
        st["delay_line"] = {"pid": p.pid, "start": (_proc_start(p.pid) or (0,))[0], "socket": sock}
        _write_state(st)   # recorded before anything else, so down() finds it
        ready, _, _ = select.select([p.stdout], [], [], DAEMON_START_TIMEOUT)
        line = p.stdout.readline().decode(errors="replace").strip() if ready else ""
        p.stdout.close()
        if line != "ready":
            _kill(p.pid)
            with contextlib.suppress(OSError):
                with open(f"{LABS_DIR}/{st['name']}.log", errors="replace") as f:
                    line = line or (f.read().strip().splitlines() or [""])[-1]
            raise LabError(f"perfkit lab: the delay line did not start: {line or 'timed out'}")
        # its taps: up, no addresses, MTU of the lab, deep queue; their ingress goes back out
        for k, e in enumerate(st["egress"]):
            with _ipr(e["netns"]) as ipr, _doing(f"attaching delay tap {e['tap']}"):
                tap = _ifindex(ipr, e["tap"])
                link = _ifindex(ipr, e["ifname"])
                ipr.link("set", index=tap, mtu=st["mtu"], txqlen=10000, state="up")
                _ignore((errno.EEXIST,), ipr.tc, "add", "clsact", index=tap)
                fd = _bpf_load(_return_program(link), "pk_return")
                try:
                    ipr.tc("replace-filter", "bpf", index=tap, handle=1, fd=fd, name="pk_return",
                           parent="ffff:fff2", classid=1, direct_action=True, prio=1)
                finally:
                    os.close(fd)

    def _delay_line_config(self, k: int, imp: Impairment) -> None:
        msg = {"tap": k, "delay_ns": int(imp.delay * 1e9), "jitter_ns": int(imp.jitter * 1e9),
               "reorder": imp.reorder / 100.0, "corrupt": imp.corrupt / 100.0}
        _daemon_request(self.state["delay_line"]["socket"], msg)

    # ------------------------------------------------------------- running things in hosts
    def popen(self, host, argv, **kw) -> subprocess.Popen:
        """subprocess.Popen(argv, **kw) inside host's namespace (and its own /sys). The
        process gets its own session and is killed (with its group) at down()."""
        h = self.host(host)
        user_pre = kw.pop("preexec_fn", None)
        path = h.netns_path
        cg = self._fresh_cgroup(h.name)
        from perfkit.cgroups import Cgroups   # imported before the fork

        def pre():
            if cg:   # into the host's cgroup before exec: all it runs is limited
                Cgroups.attach(cg)
            _enter_host(path)
            if user_pre:
                user_pre()
        kw.setdefault("start_new_session", True)
        p = subprocess.Popen(argv, preexec_fn=pre, **kw)
        p.lab_group = kw["start_new_session"]
        self._procs.append(p)
        with _locked():
            fresh = _read_state(self.name) or self.state
            fresh["procs"].append([p.pid, (_proc_start(p.pid) or (0,))[0], bool(p.lab_group)])
            self.state = fresh
            _write_state(fresh)
        return p

    def call(self, host, fn, *args, timeout: float = 60.0, **kwargs):
        """fn(*args, **kwargs) in a forked child inside host's namespace; its pickled result
        (or exception) comes back. The child is killed after timeout seconds.

        The child is a fork of this process and has none of its other threads: once this
        process has used polars' thread pool, polars work in the child that needs the pool
        (concatenating or pickling a frame) waits forever. Seen in a notebook: a frame from
        pl.concat in fn hung in pickling. Return plain data (lists, dicts) and build frames here."""
        path = self.host(host).netns_path
        cg = self._fresh_cgroup(self.host(host).name)
        from perfkit.cgroups import Cgroups   # imported before the fork
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.close(r)
                try:
                    if cg:
                        Cgroups.attach(cg)
                    setns_path(path)
                    result = (True, fn(*args, **kwargs))
                except BaseException as exc:
                    result = (False, exc)
                try:
                    data = pickle.dumps(result)
                except Exception as exc:
                    data = pickle.dumps((False, LabError(f"lab.call: cannot pickle {result[1]!r}: {exc}")))
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
            finally:
                os._exit(0)
        os.close(w)
        chunks, deadline = [], time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([r], [], [], left)[0]:
                    _kill(pid, timeout=0.5)
                    raise TimeoutError(f"lab.call: {getattr(fn, '__name__', fn)} ran longer than {timeout:g}s")
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(r)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        if not chunks:
            raise LabError(f"lab.call: the child died without an answer")
        ok, value = pickle.loads(b"".join(chunks))
        if ok:
            return value
        raise value

    def _fresh_cgroup(self, host: str) -> dict | None:
        """The host's cgroup as the state file says now (another process may have limited it)."""
        fresh = _read_state(self.name) if self.name else None
        if fresh and fresh.get("id") == (self.state or {}).get("id"):
            self.state = fresh
        return (self.state or {}).get("cgroups", {}).get(host)

    def nginx(self, host=None, port: int = 8080, size: int = 100, workers: int = 1,
              timeout: float = 10.0) -> "LabNginx":
        """nginx inside host (default: the last one; h2, its address, as server_host takes it),
        in its namespace and cgroup, answering every URL with size bytes, with an access log
        the run can read back (LabNginx.lines()). It runs until down() (or its stop())."""
        h, address = self.server_host(host)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"port: {port!r} is outside 1..65535")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= 1 << 30:
            raise ValueError(f"size: {size!r} is outside 0..1G bytes")
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
            raise ValueError(f"workers: {workers!r} is outside 1..64")
        import shutil
        exe = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                             if os.access(p, os.X_OK)), None)
        if exe is None:
            raise LabError("perfkit lab: nginx is not installed (apt-get install nginx-light)")
        d = f"{LABS_DIR}/{self.name}-nginx-{h.name}-{port}"
        with contextlib.suppress(OSError, ValueError):
            with open(f"{d}/nginx.pid") as f:
                running = int(f.read().strip())
            if _alive(running):
                raise LabError(f"perfkit lab: nginx already serves {h.name} port {port} (pid {running})")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d, mode=0o755)
        with open(f"{d}/body", "wb") as f:
            f.write(b"x" * size)
        listen = f"[{address}]" if ":" in address else address
        with open(f"{d}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(d=d, listen=listen, port=port, workers=workers))
        with open(f"{d}/stderr.log", "wb") as err:   # a file, not a pipe: nginx outlives perfkit lab nginx
            p = self.popen(h, [exe, "-c", f"{d}/nginx.conf", "-p", d, "-g", "daemon off;"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        server = LabNginx(h, address, port, d, p)
        deadline = time.monotonic() + timeout
        while not server.started():
            if p.poll() is not None or time.monotonic() > deadline:
                server.stop()
                with open(f"{d}/stderr.log", errors="replace") as f:
                    said = f.read().strip().splitlines()
                raise LabError(f"perfkit lab: nginx in {h.name} did not start: {said[-1] if said else 'timed out'}")
            time.sleep(0.02)
        return server

    def server_host(self, which) -> tuple[Host, str]:
        """(host, address to listen on) for a server in this lab: which is a host (h2), one of
        the hosts' addresses, an unspecified address (0.0.0.0, ::: the last host, every
        address) or None/loopback (the last host's IPv4: clients run in h1)."""
        hosts = self.hosts
        text = "" if which is None else str(which).strip().strip("[]")
        if text in ("", "127.0.0.1", "::1", "localhost"):
            return hosts[-1], hosts[-1].ipv4
        if re.fullmatch(r"h[0-9]{1,3}", text):
            h = self.host(text)
            return h, h.ipv4
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            raise ValueError(f"host: {which!r} is not a host of lab {self.name} ({', '.join(h.name for h in hosts)}) "
                             "or an address of one") from None
        if addr.is_unspecified:
            return hosts[-1], str(addr)
        for h in hosts:
            if addr in (ipaddress.ip_address(h.ipv4), ipaddress.ip_address(h.ipv6)):
                return h, str(addr)
        raise ValueError(f"host: {which!r} is not an address of lab {self.name}'s hosts "
                         f"({', '.join(h.name + ' ' + h.ipv4 for h in hosts)})")

    def enter(self, host, own_mounts: bool = False) -> Host:
        """Make this process one of host's: into its cgroup (if it has one) and, for this
        thread and the threads it starts from now on, its network namespace (own_mounts: and
        its own /sys, as ip netns exec; for a process about to exec); recorded, so that down()
        ends it. For perfkit http-serve --lab and perfkit lab exec."""
        h = self.host(host)
        cg = self._fresh_cgroup(h.name)
        if cg:
            from perfkit.cgroups import CgroupError, Cgroups
            try:
                Cgroups.attach(cg)
            except CgroupError as exc:
                raise LabError(f"perfkit lab: {h.name}: {exc}") from None
        if own_mounts:
            _enter_host(h.netns_path)
        else:
            setns_path(h.netns_path)
        with _locked():
            fresh = _read_state(self.name) or self.state
            fresh["procs"].append([os.getpid(), (_proc_start(os.getpid()) or (0,))[0], False])
            self.state = fresh
            _write_state(fresh)
        return h

    # ------------------------------------------------------------- down
    @_off_loop
    def down(self) -> None:
        """Remove everything this lab made: processes, delay line, namespaces, state."""
        if not self.state:
            return
        with _deferred_sigint():
            self._teardown()

    def _teardown(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                _kill(p.pid, group=getattr(p, "lab_group", False))
            with contextlib.suppress(Exception):
                p.wait(timeout=0.1)
        self._procs.clear()
        if self.state:
            with _locked():
                fresh = _read_state(self.state["name"])
                if fresh and fresh.get("id") == self.state["id"]:   # not a namesake made since
                    _teardown_state(fresh)
                elif fresh is None and self.state.get("status") == "creating":
                    _teardown_state(self.state)                     # failed before it was recorded
        if self._daemon is not None:
            with contextlib.suppress(Exception):
                self._daemon.wait(timeout=1)
            self._daemon = None
        self.state = None


NGINX_CONF = """worker_processes {workers};
error_log {d}/error.log;
pid {d}/nginx.pid;
worker_rlimit_nofile 16000;
events {{ worker_connections 12000; }}
http {{
    log_format pk '$msec $request_method $request_uri $status $body_bytes_sent $request_time $remote_addr';
    access_log {d}/access.log pk;
    client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
    uwsgi_temp_path {d}; scgi_temp_path {d};
    keepalive_requests 1000000;
    default_type text/plain;
    server {{
        listen {listen}:{port};
        root {d};
        location / {{ try_files /body =404; }}
    }}
}}
"""


class LabNginx:
    """nginx in a lab host (Lab.nginx): url, access_log, lines() (one dict per request:
    time, method, uri, status, bytes, request_time, client), stop()."""

    def __init__(self, host: Host, address: str, port: int, d: str, proc: subprocess.Popen):
        self.host, self.address, self.port, self.dir, self.proc = host, address, port, d, proc
        self.url = f"http://{'[' + address + ']' if ':' in address else address}:{port}/"
        self.access_log = f"{d}/access.log"

    def pids(self) -> list[int]:
        """nginx's master and its workers (the master's children): watch={"server": ngx.pids()}."""
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                return [self.proc.pid, *(int(p) for p in f.read().split())]
        except OSError:
            return [self.proc.pid]

    def started(self) -> bool:
        """nginx wrote its pid file (after it bound its port) and listens."""
        try:
            with open(f"{self.dir}/nginx.pid") as f:
                if f.read().strip() != str(self.proc.pid):
                    return False
        except OSError:
            return False
        return self.listening()

    def listening(self) -> bool:
        """nginx listens on its port (read from its own namespace's /proc/PID/net/tcp*)."""
        want = f":{self.port:04X} "
        for table in ("tcp", "tcp6"):
            with contextlib.suppress(OSError):
                with open(f"/proc/{self.proc.pid}/net/{table}") as f:
                    if any(want in ln and ln.split()[3] == "0A" for ln in f.read().splitlines()[1:]):
                        return True
        return False

    def lines(self) -> list[dict]:
        """The access log so far, one dict per request."""
        out = []
        with contextlib.suppress(FileNotFoundError):
            with open(self.access_log) as f:
                for ln in f:
                    p = ln.split()
                    if len(p) == 7:
                        out.append({"time": float(p[0]), "method": p[1], "uri": p[2], "status": int(p[3]),
                                    "bytes": int(p[4]), "request_time": float(p[5]), "client": p[6]})
        return out

    def stop(self) -> None:
        _kill(self.proc.pid, group=True)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=1)

    def __repr__(self) -> str:
        return f"<nginx in {self.host.name} at {self.url}, log {self.access_log}>"


@contextlib.contextmanager
def _deferred_sigint():
    """Hold Ctrl-C until cleanup is done (main thread only), then raise it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    try:
        old = signal.signal(signal.SIGINT, lambda *a: got.append(1))
    except (ValueError, TypeError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


def _apply_netem(e: dict, imp: Impairment, mtu: int) -> None:
    """netem (delay, jitter, loss, duplicate, reorder, corrupt) as root, tbf under it (rate)."""
    with _ipr(e["netns"]) as ipr, _doing(f"setting impairments on {e['ifname']}"):
        idx = _ifindex(ipr, e["ifname"])
        _ignore((errno.ENOENT, errno.EINVAL), ipr.tc, "del", index=idx, handle="1:", parent=0xFFFFFFFF)
        if imp.off:
            return
        tbf = {}
        if imp.rate:
            tbf = _tbf_args(imp.rate, mtu)
        if imp.per_packet:
            try:
                ipr.tc("add", "netem", index=idx, handle="1:", delay=int(imp.delay * 1e6),
                       jitter=int(imp.jitter * 1e6), loss=imp.loss, duplicate=imp.duplicate,
                       prob_reorder=imp.reorder, prob_corrupt=imp.corrupt, limit=100000)
            except Exception as exc:
                if _nlerr(exc)[0] == errno.ENOENT:
                    raise LabError("perfkit lab: this kernel has no netem (sch_netem); "
                                   "use backend='bpf'") from exc
                raise
            if tbf:
                ipr.tc("add", "tbf", index=idx, handle="10:", parent="1:1", **tbf)
        elif tbf:
            ipr.tc("add", "tbf", index=idx, handle="1:", **tbf)


def _tbf_args(bps: float, mtu: int) -> dict:
    """tbf for bps bits/s: a burst of 1 ms of tokens (at least two full frames), a queue of
    50 ms (at least 64 KiB). tbf counts whole frames: Ethernet + IP + UDP/TCP headers."""
    bytes_s = int(bps / 8)
    burst = max(2 * (mtu + 14), bytes_s // 1000)
    return {"rate": bytes_s, "burst": burst, "limit": max(64 << 10, bytes_s // 20 + burst)}


def _apply_bpf(e: dict, imp: Impairment, divert: bool, mtu: int) -> None:
    """tbf as root for the rate; the egress BPF program for the rest."""
    with _ipr(e["netns"]) as ipr, _doing(f"setting impairments on {e['ifname']}"):
        idx = _ifindex(ipr, e["ifname"])
        if imp.rate:
            ipr.tc("replace", "tbf", index=idx, handle="1:", **_tbf_args(imp.rate, mtu))
        else:
            _ignore((errno.ENOENT, errno.EINVAL), ipr.tc, "del", index=idx, handle="1:", parent=0xFFFFFFFF)
        if imp.per_packet:
            tap = _ifindex(ipr, e["tap"]) if divert else 0
            _ignore((errno.EEXIST,), ipr.tc, "add", "clsact", index=idx)
            fd = _bpf_load(_egress_program(imp, tap), "pk_impair")
            try:
                ipr.tc("replace-filter", "bpf", index=idx, handle=1, fd=fd, name="pk_impair",
                       parent="ffff:fff3", classid=1, direct_action=True, prio=1)
            finally:
                os.close(fd)
        else:
            _ignore((errno.ENOENT, errno.EINVAL), ipr.tc, "del", "clsact", index=idx)


# ----------------------------------------------------------------------------- teardown

def _teardown_state(st: dict) -> None:
    """Remove one lab's processes, namespaces, stray links and files. Call under the lock."""
    for pid, start, group in st.get("procs", []):
        _kill(pid, start, group=group)
    dl = st.get("delay_line")
    if dl:
        _kill(dl["pid"], dl.get("start"))
    if st.get("cgroups"):
        from perfkit.cgroups import CgroupError, Cgroups
        for paths in st["cgroups"].values():
            with contextlib.suppress(CgroupError, OSError):   # best effort, as the rest of teardown
                Cgroups.remove(paths)
    spaces = [h["netns"] for h in st.get("hosts", [])] + ([st["switch"]] if st.get("switch") else [])
    for ns in spaces:
        _remove_netns(ns)
    _remove_root_links(st["name"])
    for suffix in (".sock", ".log", ".json"):
        with contextlib.suppress(OSError):
            os.unlink(f"{LABS_DIR}/{st['name']}{suffix}")
    import shutil   # here: the delay line loads this file and never removes a lab
    prefix = f"{st['name']}-nginx-"   # Lab.nginx's files: LAB-nginx-HOST-PORT
    with contextlib.suppress(OSError):
        for fn in os.listdir(LABS_DIR):
            if fn.startswith(prefix) and re.fullmatch(r"h[0-9]{1,3}-[0-9]{1,5}", fn[len(prefix):]):
                shutil.rmtree(f"{LABS_DIR}/{fn}", ignore_errors=True)


def _remove_netns(ns: str) -> None:
    path = f"{NETNS_DIR}/{ns}"
    if not os.path.exists(path):
        return
    MNT_DETACH = 2
    _libc.umount2(path.encode(), MNT_DETACH)
    with contextlib.suppress(OSError):
        os.unlink(path)


def _remove_root_links(name: str) -> list[str]:
    """Interfaces of lab name left in this namespace. perfkit makes its links inside the
    lab's namespaces, so only an interrupted kernel operation could leave one here."""
    pattern = re.compile(rf"pk{re.escape(name)}(h[0-9]{{1,3}}|p[0-9]{{1,3}}|d[0-9]{{1,3}}|br)\Z")
    removed = []
    with _ipr() as ipr:
        for link in ipr.get_links():
            ifname = link.get_attr("IFLA_IFNAME") or ""
            if pattern.match(ifname):
                _ignore((errno.ENODEV,), ipr.link, "del", index=link["index"])
                removed.append(ifname)
    return removed


@_off_loop
def down(name: str) -> bool:
    """Take down the lab called name (made by any process). False if there was none."""
    _check_name(name)
    _require_root()
    with _deferred_sigint(), _locked():
        st = _read_state(name)
        if st:
            _teardown_state(st)
        stray = [ns for ns in _pk_netns() if NETNS_RE.match(ns).group(1) == name]
        for ns in stray:
            _remove_netns(ns)
        stray += _remove_root_links(name)
        return bool(st or stray)


@_off_loop
def down_all() -> list[str]:
    """Remove every perfkit lab object: labs in the state directory, pk-<lab>-* namespaces,
    pk<lab>... interfaces in this namespace. Nothing else. Returns what it removed."""
    _require_root()
    removed = []
    with _deferred_sigint(), _locked():
        names = set()
        for st in _all_states():
            _teardown_state(st)
            removed.append(st["name"])
            names.add(st["name"])
        for ns in _pk_netns():
            _remove_netns(ns)
            removed.append(ns)
            names.add(NETNS_RE.match(ns).group(1))
        for name in sorted(names):
            removed += _remove_root_links(name)
        from perfkit.cgroups import CgroupError, Cgroups, leftovers   # host cgroups no state names
        for paths in leftovers(keep={st["name"] for st in _all_states()}):
            with contextlib.suppress(CgroupError, OSError):
                Cgroups.remove(paths)
                removed.append("cgroup " + (paths.get("dir") or next(iter(paths["dirs"].values()))))
        for fn in os.listdir(LABS_DIR):
            if fn.endswith((".sock", ".log", ".tmp")):
                with contextlib.suppress(OSError):
                    os.unlink(f"{LABS_DIR}/{fn}")
    return removed


def status() -> list[dict]:
    """The labs that exist, from any process: name, status (up, creating, broken: some of
    its namespaces are gone, stale: its maker died while building it), hosts, links with
    impairments, backend. Namespaces with the perfkit prefix and no lab are listed as
    status "orphan". Needs no privileges."""
    out, known = [], set()
    for st in _all_states():
        spaces = [h["netns"] for h in st["hosts"]] + ([st["switch"]] if st.get("switch") else [])
        known.update(spaces)
        state = st.get("status")
        if _stale(st):
            state = "stale"
        elif state == "up" and not all(os.path.exists(f"{NETNS_DIR}/{ns}") for ns in spaces):
            state = "broken"
        dl = st.get("delay_line")
        out.append({
            "name": st["name"], "status": state, "backend": st.get("backend"),
            "hosts": [{k: h[k] for k in ("name", "netns", "netns_path", "ipv4", "ipv6", "ifname")}
                      for h in st["hosts"]],
            "ipv4_net": st["ipv4_net"], "ipv6_net": st["ipv6_net"], "mtu": st["mtu"],
            "links": [{"index": ln["index"], "hosts": ln["hosts"], "impairment": ln["impairment"],
                       "text": str(Impairment(**ln["impairment"]))} for ln in st["links"]],
            "delay_line": dl["pid"] if dl and _alive(dl["pid"], dl.get("start")) else None,
            "limits": st.get("limits", {}),
            "cgroups": {h: p["dir"] if p["v"] == 2 else f"v1 {p['dirs']['cpu']}"
                        for h, p in st.get("cgroups", {}).items()},
            "owner": st.get("owner"), "created": st.get("created"),
        })
    for ns in _pk_netns():
        if ns not in known:
            out.append({"name": NETNS_RE.match(ns).group(1), "status": "orphan", "netns": ns,
                        "hosts": [], "links": []})
    return out


def status_text(labs=None) -> str:
    """status() for people: one block per lab."""
    labs = status() if labs is None else labs
    if not labs:
        return "no perfkit labs"
    lines = []
    for lab in labs:
        if lab["status"] == "orphan":
            lines.append(f"{lab['name']}: orphan namespace {lab['netns']} (perfkit lab down --all)")
            continue
        lines.append(f"{lab['name']}: {lab['status']}, {len(lab['hosts'])} hosts, "
                     f"{lab['ipv4_net']} {lab['ipv6_net']}, mtu {lab['mtu']}, {lab['backend']} impairments")
        for h in lab["hosts"]:
            lines.append(f"  {h['name']}  {h['ipv4']:<15} {h['ipv6']:<22} {h['netns_path']}  dev {h['ifname']}")
            if h["name"] in lab.get("limits", {}):   # a VM-like host
                from perfkit.cgroups import limits_text
                lines.append(f"      {limits_text(lab['limits'][h['name']])} (cgroup {lab['cgroups'][h['name']]})")
        for ln in lab["links"]:
            lines.append(f"  link {ln['index']} ({' <-> '.join(ln['hosts'])}): {ln['text']}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- delay line

def _daemon_request(path: str, msg: dict, timeout: float = 5.0) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(path)
            s.sendall(json.dumps(msg).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            raise LabError(f"perfkit lab: the delay line at {path} did not answer: {exc}") from exc
    try:
        reply = json.loads(data)
    except ValueError:
        raise LabError(f"perfkit lab: the delay line at {path} answered {data[:80]!r}") from None
    if not reply.get("ok"):
        raise LabError(f"perfkit lab: the delay line refused: {reply.get('error')}")
    return reply


def _delay_line_extension() -> str:
    """The file of the delay line's native extension (perfkit._delayline), which the
    delay-line process loads directly: quick, without the perfkit package around it."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("perfkit._delayline")
    except ImportError:
        spec = None
    if spec is None or not spec.origin or not os.path.exists(spec.origin):
        raise LabError("perfkit lab: the bpf backend's delay line is native code, and the extension "
                       "perfkit._delayline is not built (rebuild perfkit: pip install -e .)")
    return spec.origin


def _load_delay_line_extension(path: str | None):
    """perfkit._delayline, from its file (path) or by import."""
    if not path:
        from perfkit import _delayline
        return _delayline
    import importlib.util
    spec = importlib.util.spec_from_file_location("perfkit._delayline", path)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _delay_line_main(name: str, sock_path: str, native: str | None = None) -> None:
    """The delay-line process (bpf backend): one tap per link end, inside that end's
    namespace; packets diverted into a tap come out of it again delay ± jitter later
    (uniform jitter; packets leave in due order, so jitter reorders, as with netem).
    The packet path is C (perfkit._delayline: one thread without the GIL reads the taps,
    holds, reorders, corrupts and writes back; nothing here touches a packet). This
    process opens the taps, answers the control socket and watches its lab: it exits on
    SIGTERM, when the lab's state file no longer names it, or when its taps fail."""
    DelayLine = _delay_line_class(native)
    stop = []
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)               # SIGTERM ends a select at once
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):   # answer the control socket promptly on a busy machine
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    st = _read_state(name)
    if not st:
        print(f"no state for lab {name}", file=sys.stderr, flush=True)
        sys.exit(1)
    taps = _open_taps(st["egress"])
    with contextlib.suppress(OSError):
        os.unlink(sock_path)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ctl.bind(sock_path)
    ctl.listen(8)
    # every tap undelayed until configured; frames carry their diversion time (_egress_program);
    # the packet thread runs SCHED_FIFO (lowest priority) so that it sends on time on a busy
    # machine, as netem does from its softirq (refused, e.g. in a cpu cgroup without a
    # real-time budget: nice -20 and a short slice; its stats say which)
    line = DelayLine(taps, mtu=st["mtu"], stamped=True, rt_priority=DELAY_LINE_RT_PRIORITY,
                     notify_fd=wake_w)
    line.start()
    try:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        _delay_line_serve(name, ctl, line, stop, wake_r)
    finally:
        line.stop()
        line.join()
        if line.error():
            print(f"delay line: {line.error()}", file=sys.stderr, flush=True)
        line.close()
        ctl.close()
        with contextlib.suppress(OSError):
            os.unlink(sock_path)


def _delay_line_class(native: str | None):
    """The native DelayLine class, or exit 1 saying why (missing, or built from another lab.py)."""
    try:
        native_line = _load_delay_line_extension(native)
        DelayLine = native_line.DelayLine
    except (ImportError, OSError, AttributeError) as exc:
        print(f"perfkit's native delay line (perfkit._delayline) cannot be imported: {exc} "
              "(rebuild perfkit: pip install -e .)", file=sys.stderr, flush=True)
        sys.exit(1)
    if (native_line.STAMP_TPID, native_line.STAMP_SHIFT) != (STAMP_TPID, STAMP_SHIFT):
        print("perfkit._delayline reads another time stamp than lab.py writes (rebuild perfkit: "
              "pip install -e .)", file=sys.stderr, flush=True)
        sys.exit(1)
    return DelayLine


def _open_taps(egress: list) -> list[int]:
    """One tap per link end, each opened inside its end's namespace; back home after."""
    TUNSETIFF, IFF_TAP, IFF_NO_PI = 0x400454CA, 0x0002, 0x1000
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    taps = []
    for e in egress:
        setns_path(f"{NETNS_DIR}/{e['netns']}")
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", e["tap"].encode(), IFF_TAP | IFF_NO_PI))
        with contextlib.suppress(OSError):   # no IPv6 link-local, so the tap itself sends nothing
            with open(f"/proc/sys/net/ipv6/conf/{e['tap']}/disable_ipv6", "w") as f:
                f.write("1")
        taps.append(fd)
    if _libc.setns(home, CLONE_NEWNET) != 0:
        sys.exit(1)
    os.close(home)
    return taps


def _delay_line_serve(name: str, ctl, line, stop: list, wake_r: int) -> None:
    """Answer the control socket until SIGTERM (stop), the packet thread ends, or the lab's
    state file no longer names this process."""
    check_at = 0.0
    while not stop and line.running():
        if time.monotonic() >= check_at:     # still wanted?
            check_at = time.monotonic() + 1.0
            cur = _read_state(name)
            if not cur or (cur.get("delay_line") or {}).get("pid") != os.getpid():
                break
        try:
            ready = select.select([ctl.fileno(), wake_r], [], [], 1.0)[0]
        except InterruptedError:
            continue
        if wake_r in ready:                  # a signal, or the packet thread ended
            with contextlib.suppress(OSError):
                os.read(wake_r, 512)
        if ctl.fileno() in ready:
            _delay_line_control(ctl, line)


def _delay_line_counts(line) -> dict:
    """The delay line's counters for a control reply: totals over its taps (delayed:
    taken in; sent: written back; dropped: no buffer free or a failed write; queued: held
    now; late_ns_sum/max: sent after their due time by this much), per tap, and the line's
    own figures (pool, wake-up margin, CPU time)."""
    per = [line.counters(k) for k in range(line.ntaps)]
    total = {key: sum(c[key] for c in per) for key in per[0]}
    return {"delayed": total["rx"] - total["dropped"], "sent": total["tx"],
            "dropped": total["dropped"] + total["tx_errors"], "corrupted": total["corrupted"],
            "reordered": total["reordered"], "queued": total["queued"],
            "late_ns_sum": total["late_ns_sum"], "late_ns_max": max(c["late_ns_max"] for c in per),
            "taps": per, "line": line.stats()}


def _delay_line_control(ctl, line) -> None:
    try:
        conn, _ = ctl.accept()
    except OSError:
        return
    with conn:
        conn.settimeout(1.0)
        try:
            data = b""
            while not data.endswith(b"\n") and len(data) < 1 << 16:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            msg = json.loads(data)
            if "tap" in msg:
                line.set_config(int(msg["tap"]), max(0, int(msg["delay_ns"])), max(0, int(msg["jitter_ns"])),
                                float(msg["reorder"]), float(msg["corrupt"]))
            reply = {"ok": True, **_delay_line_counts(line)}
        except Exception as exc:  # a bad request must not stop the delay line
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(reply).encode() + b"\n")
