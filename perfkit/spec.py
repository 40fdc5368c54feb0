"""The checks and limits every kind of test shares; the spec classes live in their kinds.

A spec is checked completely in Python before anything native starts: a bad
value raises ValueError naming the field and what is allowed. Each spec class is
in the module of its kind (perfkit.kinds.qperf, ...); perfkit.kinds gives them their
names here too (from perfkit.spec import LocalTest), along with SPECS, from_dict and
from_dperf: this module cannot import the kinds, which import it.
"""
from __future__ import annotations

import ipaddress
import math
import os
import re
import socket
from dataclasses import asdict, fields
from typing import ClassVar
from urllib.parse import urlsplit

from perfkit import sandbox
from perfkit.engines.remote import CONTROL_TIMEOUT_S, WAIT_SERVER_S  # noqa: F401 (the kinds' defaults)
from perfkit.nics import pci_address, pci_port_addresses  # noqa: F401 (spec's public names)
from perfkit.fields import whole_number
from perfkit.units import Rate, parse_duration, parse_rate, parse_size

# qperf's test names; each runs both ends in one process.
LOCAL_TESTS = ("udp_bw", "udp_lat", "tcp_bw", "tcp_lat")
REMOTE_TESTS = LOCAL_TESTS + ("sctp_bw", "sctp_lat")
DEFAULT_SIZE = {"udp_bw": 32 << 10, "udp_lat": 1, "tcp_bw": 64 << 10, "tcp_lat": 1,
                "sctp_bw": 64 << 10, "sctp_lat": 1}   # qperf's (qperf -vvu): perfkit test's defaults
# perfkit local: udp_bw sends 64 B datagrams (packets/s), tcp_bw writes 128 KiB as iperf3 does
LOCAL_DEFAULT_SIZE = {**DEFAULT_SIZE, "udp_bw": 64, "tcp_bw": 128 << 10}
# TCP messages up to 1 MiB, as qperf and iperf3 take (the engine's buffers are made once, at start)
MAX_SIZE = {"udp": 65507, "tcp": 1 << 20, "sctp": 64 << 10}
MAX_FLOWS = 1024
MAX_BATCH = 256
MAX_GSO = 64
# udp_bw on loopback sends this many datagrams per UDP GSO send unless told otherwise:
# the kernel's per-send cost is the ceiling there (8 doubled 64 B pps here, with no loss)
AUTO_GSO = 8
# a pinned tcp_bw reader polls (busy_poll left out) for messages of at least this many bytes
STREAM_POLL_SIZE = 16 << 10
MAX_DURATION_S = 24 * 3600
MAX_RATE_PPS = 1e9  # far above any kernel-socket rate; keeps the pacer's arithmetic exact
MAX_CPU = 1023      # CPU_SETSIZE - 1: the C engines pin threads with a cpu_set_t

LAB_NAME = re.compile(r"[a-z0-9]{1,8}")

# The lab's address blocks (RFC 2544 benchmarking): a lab host's, and a DPDK port's own, addresses.
LAB_NETS = (ipaddress.ip_network("198.18.0.0/15"), ipaddress.ip_network("2001:2::/48"))

# a DNS name (RFC 1123 labels; _ as /etc/hosts takes it); an all-digit last label is a bad address
_DNS_NAME = re.compile(r"(?=.{1,253}\.?$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*"
                       r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?")
_NAMES: dict[str, str] = {}   # address -> the name last resolved to it here (a run's environment says so)


def _address_or_name(host, field: str) -> tuple[str, str | None]:
    """(host as text, its address when host is an address literal, else None); ValueError
    naming the field when host is neither an address nor a DNS name."""
    text = str(host).strip()
    literal = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        return text, str(ipaddress.ip_address(literal))
    except ValueError:
        pass
    if not _DNS_NAME.fullmatch(text) or text.rstrip(".").rsplit(".", 1)[-1].isdigit():
        raise ValueError(f"{field}: {host!r} is not an IPv4 or IPv6 address or a DNS name")
    return text, None


def resolve(host, field: str = "host") -> str:
    """The address of host: an IPv4 or IPv6 address as it is (normalised, [v6] too), or a DNS
    name resolved once with getaddrinfo (IPv4 first where it has both, as localhost always
    meant 127.0.0.1); ValueError naming the field if it is neither or does not resolve."""
    text, address = _address_or_name(host, field)
    if address is not None:
        return address
    if text.rstrip(".").lower().endswith(".invalid") or text.rstrip(".").lower() == "invalid":
        # RFC 6761: never asked of a resolver
        raise ValueError(f"{field}: {text!r} does not resolve (Name or service not known)")
    try:
        infos = socket.getaddrinfo(text, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"{field}: {text!r} does not resolve ({reason})") from None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    address = str(ipaddress.ip_address(infos[0][4][0]))
    _NAMES[address] = text
    return address


def resolve_in(host, netns: str, field: str = "host") -> str:
    """The address of host as a process in network namespace netns finds it: an address as it
    is, or a name from that namespace's hosts file (/etc/netns/NETNS/hosts, which `ip netns exec`
    puts over /etc/hosts; /etc/hosts where it has none), IPv4 first. A lab host has no route to
    a resolver, so its hosts file is all it resolves."""
    text, address = _address_or_name(host, field)
    if address is not None:
        return address
    path = f"/etc/netns/{netns}/hosts"
    if not os.path.exists(path):
        path = "/etc/hosts"
    want, found = text.rstrip(".").lower(), []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                words = line.split("#", 1)[0].split()
                if len(words) < 2 or want not in (w.rstrip(".").lower() for w in words[1:]):
                    continue
                try:
                    found.append(ipaddress.ip_address(words[0].split("%", 1)[0]))
                except ValueError:   # a malformed line: the C library skips it too
                    continue
    except OSError as exc:
        raise ValueError(f"{field}: cannot read {path} ({exc.strerror})") from None
    if not found:
        raise ValueError(f"{field}: {text!r} does not resolve in {netns} (not in {path})")
    found.sort(key=lambda a: a.version != 4)
    address = str(found[0])
    _NAMES[address] = text
    return address


def check_target(host, field: str = "host", netns: str | None = None) -> str:
    """The address a client sends to: any IPv4 or IPv6 address, or a DNS name resolved once
    (resolve; in netns's hosts file when the client runs there); the suite's network guard
    (perfkit.sandbox) is asked about the address."""
    address = resolve_in(host, netns, field) if netns else resolve(host, field)
    sandbox.check(address, field)
    return address


def target_of(spec) -> dict | None:
    """{"name": as the user wrote it, "address": the one used}: where a client spec sends
    (None for servers, and for a lab run, whose hosts are the lab's)."""
    if getattr(spec, "lab", None):
        return None
    kind = type(spec).__name__
    if kind in ("LocalTest", "RemoteTest"):
        address = spec.host
    elif kind == "HttpLoad":
        address = spec.target()[0]
    elif kind == "DpdkFlows":
        address = None if spec.peer else spec.peer_ip
    elif kind == "DpdkHttpClient":
        address = spec.server
    else:
        return None
    return None if address is None else {"name": _NAMES.get(address, address), "address": address}


MAX_MESSAGES = 1 << 48   # a receiver takes a sequence number past this for a corrupt datagram


_int_in = whole_number   # value as an int in lo..hi, else ValueError naming the field


def cpu_list(cpus) -> str:
    """CPU numbers as taskset and EAL write them: 0,1,3."""
    return ",".join(str(c) for c in sorted(cpus))


def check_cpu(value, field: str) -> int | None:
    """A CPU to pin a worker thread to, as qperf's -lca/-rca take it: None or "any" =
    not pinned. Whether this host has it is checked when the worker starts
    (check_cpu_here): a run saved elsewhere still loads."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "any"):
        return None
    return _int_in(value, field, 0, MAX_CPU)


MAX_WAIT_SERVER_S = 3600.0   # a bound on -ws (its default, WAIT_SERVER_S, is the control protocol's)


def check_wait_server(value) -> float:
    """Seconds a client keeps trying to reach a server (qperf's -ws): 0 to 1h."""
    wait = parse_duration(value, "wait_server")
    if not 0 <= wait <= MAX_WAIT_SERVER_S:
        raise ValueError(f"wait_server: {value!r} is out of range (0 to 1h)")
    return wait


# the bounds of a control wait (qperf's -to, whose default is 5 s; perfkit's, CONTROL_TIMEOUT_S, is the protocol's)
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 0.5, 3600.0


def check_timeout(value, field: str) -> float:
    """Seconds to wait for the other end's control message (qperf's -to/-lto/-rto): 0.5 s to 1h."""
    t = parse_duration(value, field)
    if not MIN_TIMEOUT_S <= t <= MAX_TIMEOUT_S:
        raise ValueError(f"{field}: {value!r} is out of range (0.5s to 1h)")
    return t


MIN_SOCK_BUF, MAX_SOCK_BUF = 4096, 1 << 30   # below 4 KiB the kernel raises it to its own minimum


def check_sock_buf(value, field: str) -> int | None:
    """Socket buffer bytes, as qperf's -sb takes them (64K); None = perfkit's default."""
    if value is None:
        return None
    size = parse_size(value, field)
    if not MIN_SOCK_BUF <= size <= MAX_SOCK_BUF:
        raise ValueError(f"{field}: {size} bytes is out of range {MIN_SOCK_BUF}..{MAX_SOCK_BUF} (4K..1G)")
    return size


def check_cpu_here(cpu: int | None, field: str) -> int | None:
    """cpu, if this process may run on it (or None); else ValueError naming the ones it may."""
    if cpu is not None and cpu not in (allowed := os.sched_getaffinity(0)):
        raise ValueError(f"{field}: CPU {cpu} is not one this process may run on ({cpu_list(allowed)})")
    return cpu


def rate_limit(value, size: int, what: str):
    """A rate limit (a Rate), above 0 and at most MAX_RATE_PPS messages of size per second."""
    rate = parse_rate(value, "rate")
    if not rate.value > 0:
        raise ValueError(f"rate: must be above 0, not {value!r} (leave it out for no limit)")
    if rate.messages_per_second(size) > MAX_RATE_PPS:
        raise ValueError(f"rate: {value!r} is above {MAX_RATE_PPS:.0e} {what}/s (leave it out for no limit)")
    return rate


def live_messages_per_second(value, size: int, what: str) -> float:
    """run.set_rate(value): messages/s of size, value checked as a spec's rate is; None: 0 (no limit)."""
    if value is None:
        return 0.0
    try:
        rate = rate_limit(value, size, what)
    except ValueError as exc:
        raise ValueError(f"set_rate: {str(exc).removeprefix('rate: ')}") from None
    return rate.messages_per_second(size)


class Serial:
    """to_dict()/from_dict() for every spec, for saved runs and the control protocol:
    plain JSON values (a Rate as {value, unit}, bytes as latin-1 text, size lists as
    lists); from_dict refuses another kind or an unknown field."""

    def to_dict(self) -> dict:
        d = asdict(self)  # Rates become {"value", "unit"} here
        for k, v in d.items():
            if isinstance(v, bytes):
                d[k] = v.decode("latin-1")
        if d.get("sizes") is not None:
            d["sizes"] = [list(p) for p in d["sizes"]]
        return {"kind": type(self).__name__, **d}

    @classmethod
    def from_dict(cls, d: dict):
        d = dict(d)
        kind = d.pop("kind", cls.__name__)
        if kind != cls.__name__:
            raise ValueError(f"kind: {kind!r} is not {cls.__name__}")
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]}: unknown field (known: {', '.join(sorted(names))})")
        for k, v in d.items():
            if isinstance(v, dict) and set(v) == {"value", "unit"}:
                d[k] = Rate(float(v["value"]), v["unit"])
        return cls(**d)


# ------------------------------------------------------------------ DPDK engine specs
# (perfkit.engines.dpdk runs them: Run(DpdkFlows(...), engine="dpdk"))

DPDK_MODES = ("rxonly", "reverse")
DPDK_REFLECT_MODES = DPDK_MODES + ("forward",)   # DpdkReflect: forward between two ports too
DPDK_DRIVERS = ("net_null", "net_ring", "net_memif", "net_af_packet", "net_tap", "net_af_xdp")
DPDK_KERNEL_DRIVERS = ("net_af_packet", "net_tap", "net_af_xdp")   # they reach a kernel: lab namespaces only
AF_PACKET_DEFAULTS = {"qdisc_bypass": 0, "framecnt": 4096}         # added to net_af_packet ports unless given
DPDK_MIN_SIZE, DPDK_MAX_SIZE = 64, 9018   # above DPDK_STD_SIZE: jumbo frames (MTU 9000)
DPDK_STD_SIZE = 1518
DPDK_JUMBO_PORTS = ("ring:", "net_ring", "net_null", "net_memif")   # carry jumbo frames as they are
DPDK_MAX_FLOWS = 131072   # PK_DPDK_MAX_FLOWS: a 528-byte sequence window each, preallocated
DPDK_MAX_IPS = 1 << 17
DPDK_MAX_QUEUES = 8      # PK_DPDK_MAX_QUEUES: lcores (one queue each) per port
DPDK_MAX_PATTERN = 1024   # PK_DPDK_MAX_PATTERN: frames in one size pattern
IMIX = ((64, 7), (570, 4), (1518, 1))   # the classic simple IMIX


def parse_sizes(value, field: str = "sizes") -> tuple[tuple[int, int], ...]:
    """Frame sizes and their weights: 'imix' (64:7,570:4,1518:1), '64,128,256' (equal
    weights), '64:7,570:4,1518:1', or a list of sizes or [size, weight] pairs. Weights
    are reduced by their common divisor; they must add up to at most DPDK_MAX_PATTERN."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "imix":
            return IMIX
        items = [x.strip() for x in text.split(",")]
        if not all(items):
            raise ValueError(f"{field}: {value!r} is not a list of sizes (64,570,1518 or 64:7,570:4 or imix)")
        value = [tuple(x.split(":", 1)) if ":" in x else (x, 1) for x in items]
    try:
        pairs = [(p, 1) if isinstance(p, (int, str)) else tuple(p) for p in value]
    except TypeError:
        raise ValueError(f"{field}: {value!r} is not a list of sizes") from None
    if not pairs or any(len(p) != 2 for p in pairs):
        raise ValueError(f"{field}: {value!r} is not a list of sizes or [size, weight] pairs")
    out = []
    for size, weight in pairs:
        size = parse_size(size, field)
        if not DPDK_MIN_SIZE <= size <= DPDK_MAX_SIZE:
            raise ValueError(f"{field}: {size} bytes is out of range {DPDK_MIN_SIZE}..{DPDK_MAX_SIZE} "
                             "(Ethernet frames, FCS counted)")
        out.append((size, _int_in(weight, field + " weight", 1, DPDK_MAX_PATTERN)))
    g = math.gcd(*(w for _, w in out))
    out = tuple((s, w // g) for s, w in out)
    if sum(w for _, w in out) > DPDK_MAX_PATTERN:
        raise ValueError(f"{field}: the weights add up to {sum(w for _, w in out)} frames per round "
                         f"(at most {DPDK_MAX_PATTERN} after dividing by their common divisor)")
    return out


def size_pattern(sizes) -> list[int]:
    """The order frames are sent in: smooth weighted round robin, so that the sizes
    interleave (7:4:1 -> 64 570 64 64 570 64 1518 ...), not seven 64s in a row."""
    total = sum(w for _, w in sizes)
    cur = [0] * len(sizes)
    out = []
    for _ in range(total):
        for i, (_, w) in enumerate(sizes):
            cur[i] += w
        best = max(range(len(sizes)), key=lambda i: cur[i])
        cur[best] -= total
        out.append(sizes[best][0])
    return out
DPDK_MAX_BURST = 256
DPDK_RING = re.compile(r"ring:[a-z0-9_]{1,16}:[01]")
_DPDK_NAME = re.compile(r"[A-Za-z0-9_]+")
_DPDK_ARG = re.compile(r"[A-Za-z0-9_-]+=[A-Za-z0-9_./:@+-]*")
MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")


_BOND_XMIT = ("l2", "l23", "l34")            # DPDK's bonding xmit_policy values; dperf numbers them 0..2
_BOND_KEYS = ("mode", "slave", "primary", "xmit_policy", "socket_id", "mac", "lsc_poll_period_ms",
              "up_delay", "down_delay", "agg_mode")
_DPERF_BOND = re.compile(r"bond([0-9]+):([0-9]+)\(([^()]*)\)")


def _check_bond(dev: str, field: str) -> str:
    """A net_bonding vdev (DPDK 22.11's arguments: mode=0..6, slave=PCI per member, ...) or
    dperf's bondMODE:POLICY(PCI,PCI,...), made the same vdev; member addresses normalised."""
    m = _DPERF_BOND.fullmatch(dev)
    if m:
        mode, policy, members = int(m.group(1)), int(m.group(2)), m.group(3).split(",")
        if not 0 <= mode <= 4 or not 0 <= policy <= 2:
            raise ValueError(f"{field}: {dev!r}: dperf's bond is bondMODE:POLICY(PCI,PCI,...), MODE 0-4, POLICY 0-2")
        addrs = [pci_address(a) for a in members]
        if not members or None in addrs:
            raise ValueError(f"{field}: {dev!r}: the bond's members are PCI addresses (0000:81:10.0,0000:81:10.1)")
        name = "net_bonding_" + addrs[0].replace(":", "_").replace(".", "_")   # unique per first member
        dev = ",".join([name, f"mode={mode}", f"xmit_policy={_BOND_XMIT[policy]}",
                        *(f"slave={a}" for a in addrs)])
    name, *args = dev.split(",")
    if not _DPDK_NAME.fullmatch(name):
        raise ValueError(f"{field}: {dev!r}: a bond's name is net_bonding followed by letters, digits or _")
    out = [name]
    for a in args:
        if not _DPDK_ARG.fullmatch(a) or a.split("=", 1)[0] not in _BOND_KEYS:
            raise ValueError(f"{field}: {dev!r}: {a!r} is not a bonding argument ({', '.join(_BOND_KEYS)}=...)")
        key, value = a.split("=", 1)
        if key in ("slave", "primary"):
            addr = pci_address(value)
            if addr is None:
                raise ValueError(f"{field}: {dev!r}: {key}={value}: a bond member is a PCI address (0000:01:00.0)")
            value = addr
        elif key == "mode" and value not in tuple("0123456"):
            raise ValueError(f"{field}: {dev!r}: mode={value}: a bonding mode is 0..6 (4: 802.3ad)")
        elif key == "xmit_policy" and value not in _BOND_XMIT:
            raise ValueError(f"{field}: {dev!r}: xmit_policy={value}: one of {', '.join(_BOND_XMIT)}")
        out.append(f"{key}={value}")
    keys = [a.split("=", 1)[0] for a in out[1:]]
    if "mode" not in keys or "slave" not in keys:
        raise ValueError(f"{field}: {dev!r}: a bond needs mode=N and a slave=PCI for each member")
    return ",".join(out)


def check_dpdk_port(dev, field: str = "port", netns=None) -> str:
    """A DPDK port string, checked: ring:NAME:0|1 (an in-process ring pair end), a vdev of a
    driver in DPDK_DRIVERS with key=value arguments, a NIC's PCI address (0000:01:00.0 or
    01:00.0, with key=value device arguments; EAL is given it with -a), or a bond of PCI
    ports (net_bonding0,mode=4,slave=PCI,slave=PCI or dperf's bond4:2(PCI,PCI)). PCI
    addresses come back in DPDK's 0000:01:00.0 form. Ports that reach a kernel (af_packet,
    tap) need netns: traffic goes into lab namespaces only."""
    dev = str(dev).strip()
    if dev.startswith("ring:"):
        if not DPDK_RING.fullmatch(dev):
            raise ValueError(f"{field}: {dev!r}: a ring pair end is ring:NAME:0 or ring:NAME:1 "
                             "(NAME: 1-16 of a-z 0-9 _)")
        return dev
    if dev.startswith(("net_bonding", "bond")):
        return _check_bond(dev, field)
    pci = pci_address(dev.split(",")[0])
    if pci:
        args = dev.split(",")[1:]
        for a in args:
            if not _DPDK_ARG.fullmatch(a):
                raise ValueError(f"{field}: {dev!r}: {a!r} is not a key=value device argument")
        return ",".join([pci, *args])
    name, *args = dev.split(",")
    driver = next((d for d in sorted(DPDK_DRIVERS, key=len, reverse=True) if name.startswith(d)), None)
    if driver is None or not _DPDK_NAME.fullmatch(name):
        raise ValueError(f"{field}: {dev!r} is not a port: use ring:NAME:0|1, a vdev of "
                         f"{', '.join(DPDK_DRIVERS)} (net_null0, net_ring0, net_af_packet0,iface=IF, ...), "
                         "a NIC's PCI address (0000:01:00.0) or a bond (net_bonding0,mode=4,slave=PCI,...)")
    for a in args:
        if not _DPDK_ARG.fullmatch(a):
            raise ValueError(f"{field}: {dev!r}: {a!r} is not a key=value device argument")
    if driver in DPDK_KERNEL_DRIVERS and not netns:
        raise ValueError(f"{field}: {dev!r} reaches a kernel: give netns (a lab host's namespace, "
                         "/run/netns/NAME) so that its traffic stays in the lab")
    if driver in ("net_af_packet", "net_af_xdp") and not any(a.startswith("iface=") for a in args):
        raise ValueError(f"{field}: {dev!r}: {driver} needs iface=IF")
    if driver == "net_af_packet":
        # DPDK's own defaults bypass the qdisc (a lab link's impairments and rate would not
        # apply to what the port sends) and keep 512-frame rings (overrun when a worker is
        # descheduled for a few ms): perfkit's defaults, unless the port string says otherwise
        for key, value in AF_PACKET_DEFAULTS.items():
            if not any(a.startswith(key + "=") for a in args):
                dev += f",{key}={value}"
    return dev


def check_lab_ipv4(addr, field: str) -> str:
    """An IPv4 address in 198.18.0.0/15, the only place DPDK ports send to."""
    try:
        ip = ipaddress.IPv4Address(str(addr).strip())
    except ValueError:
        raise ValueError(f"{field}: {addr!r} is not an IPv4 address") from None
    if ip not in LAB_NETS[0]:
        raise ValueError(f"{field}: {ip} is not allowed: DPDK ports use lab addresses (198.18.0.0/15)")
    sandbox.check(ip, field)
    return str(ip)


def check_lab_ip(addr, field: str, version: int | None = None) -> str:
    """An IPv4 address in 198.18.0.0/15 or an IPv6 one in 2001:2::/48 (the DPDK TCP
    engine's); version: the family the other addresses have."""
    try:
        ip = ipaddress.ip_address(str(addr).strip())
    except ValueError:
        raise ValueError(f"{field}: {addr!r} is not an IPv4 or IPv6 address") from None
    if ip not in LAB_NETS[ip.version == 6]:
        raise ValueError(f"{field}: {ip} is not allowed: DPDK ports use lab addresses "
                         "(198.18.0.0/15, 2001:2::/48)")
    if version is not None and ip.version != version:
        raise ValueError(f"{field}: {ip} is IPv{ip.version} but the port's address is IPv{version}: "
                         "one family per run")
    sandbox.check(ip, field)
    return str(ip)


def check_dest_ip(addr, field: str, version: int | None = None) -> str:
    """A DPDK destination (a flow's peer, an HTTP server, a gateway): any IPv4 address
    (version 4), or IPv4 or IPv6 in the family of version; no names (dperf takes addresses)."""
    try:
        ip = ipaddress.ip_address(str(addr).strip())
    except ValueError:
        kind = "an IPv4 address" if version == 4 else "an IPv4 or IPv6 address"
        raise ValueError(f"{field}: {addr!r} is not {kind}") from None
    if version is not None and ip.version != version:
        raise ValueError(f"{field}: {addr!r} is not an IPv4 address" if version == 4 and ip.version == 6 else
                         f"{field}: {ip} is IPv{ip.version} but the port's address is IPv{version}: "
                         "one family per run")
    if ip.is_loopback or ip.is_unspecified:   # no frame on a wire goes there
        raise ValueError(f"{field}: {ip} is not an address a DPDK port sends to (loopback or unspecified)")
    sandbox.check(ip, field)
    return str(ip)


def check_netns(value):
    if value is None:
        return None
    value = str(value)
    if not value.startswith("/") or "\0" in value or len(value) > 107:
        raise ValueError(f"netns: {value!r} is not a network namespace file (/run/netns/NAME)")
    return value


class DpdkSpec(Serial):
    ENGINE: ClassVar[str] = "dpdk"  # the engine perfkit.Run uses when none is named


MAX_USERS = 100_000
MAX_RESPONSE = 1 << 20
MAX_URLS = 10_000
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE")
URL_ORDERS = ("cycle", "random")   # how HttpLoad's requests pick from a URL list


def split_url(url: str, field: str = "url") -> tuple[str, int, str]:
    """http[s]://HOST[:PORT]/PATH -> (HOST as written, port, path); nothing resolved."""
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{field}: {url!r} is not an http[s]://HOST[:PORT]/PATH URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"{field}: the port in {url!r} is out of range 1..65535") from None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in path):
        raise ValueError(f"{field}: {url!r} has spaces or control characters in its path (percent-encode them)")
    return parts.hostname, port, path


def parse_url(url: str, field: str = "url", netns: str | None = None) -> tuple[str, int, str]:
    """http[s]://HOST[:PORT]/PATH -> (address, port, path); HOST is an address or a DNS name
    (resolved in netns's hosts file when the client runs there)."""
    host, port, path = split_url(url, field)
    return check_target(host, field, netns), port, path




# ------------------------------------------------------------------ DPDK TCP/HTTP specs
# (dperf's job; perfkit.engines.dpdk_tcp runs them; perfkit.dperf reads dperf's
# configuration files into them)

TCP_MAX_SOCKETS = 1 << 24      # socket table entries (64 B each): 1 GiB at most
TCP_MAX_CLIENT_RANGES = 8
TCP_MAX_SEGMENTS = 1024        # a response goes out in at most this many segments


def check_bool(value, field: str) -> bool:
    # bool("false") is True: take only real booleans (and 0, 1)
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise ValueError(f"{field}: {value!r} is not true or false")


IPV6_MAX_MSS = 1440    # a 1500-byte MTU less 40 (IPv6) and 20 (TCP)


DPERF_HTTP_METHODS = ("GET", "POST")   # the DPDK client sends these two (dperf's)


