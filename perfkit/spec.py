"""Typed, validated test specs.

A spec is checked completely in Python before anything native starts: a bad
value raises ValueError naming the field and what is allowed.
"""
from __future__ import annotations

import ipaddress
import math
import os
import re
import socket
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar
from urllib.parse import urlsplit

from perfkit import sandbox
from perfkit.nics import pci_address, pci_port_addresses  # noqa: F401 (spec's public names)
from perfkit.fields import SECONDS, check_declared, like, opt, whole_number
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


def resolve(host, field: str = "host") -> str:
    """The address of host: an IPv4 or IPv6 address as it is (normalised, [v6] too), or a DNS
    name resolved once with getaddrinfo (IPv4 first where it has both, as localhost always
    meant 127.0.0.1); ValueError naming the field if it is neither or does not resolve."""
    text = str(host).strip()
    literal = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        return str(ipaddress.ip_address(literal))
    except ValueError:
        pass
    if not _DNS_NAME.fullmatch(text) or text.rstrip(".").rsplit(".", 1)[-1].isdigit():
        raise ValueError(f"{field}: {host!r} is not an IPv4 or IPv6 address or a DNS name")
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


def check_target(host, field: str = "host") -> str:
    """The address a client sends to: any IPv4 or IPv6 address, or a DNS name resolved once
    (resolve); the suite's network guard (perfkit.sandbox) is asked about the address."""
    address = resolve(host, field)
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


WAIT_SERVER_S, MAX_WAIT_SERVER_S = 5.0, 3600.0   # qperf's -ws default, and a bound


def check_wait_server(value) -> float:
    """Seconds a client keeps trying to reach a server (qperf's -ws): 0 to 1h."""
    wait = parse_duration(value, "wait_server")
    if not 0 <= wait <= MAX_WAIT_SERVER_S:
        raise ValueError(f"wait_server: {value!r} is out of range (0 to 1h)")
    return wait


# a control request's answer, and a server's wait for its client's next message, are
# awaited this long (qperf's -to, whose default is 5 s)
CONTROL_TIMEOUT_S, MIN_TIMEOUT_S, MAX_TIMEOUT_S = 30.0, 0.5, 3600.0


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


def _rate_limit(value, size: int, what: str):
    """A rate limit (a Rate), above 0 and at most MAX_RATE_PPS messages of size per second."""
    rate = parse_rate(value, "rate")
    if not rate.value > 0:
        raise ValueError(f"rate: must be above 0, not {value!r} (leave it out for no limit)")
    if rate.messages_per_second(size) > MAX_RATE_PPS:
        raise ValueError(f"rate: {value!r} is above {MAX_RATE_PPS:.0e} {what}/s (leave it out for no limit)")
    return rate


class _Serial:
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


@dataclass(frozen=True)
class _SocketTest(_Serial):
    """Fields and checks that every socket-engine test shares (see LocalTest)."""
    TESTS: ClassVar[tuple[str, ...]] = LOCAL_TESTS
    DEFAULTS: ClassVar[dict] = DEFAULT_SIZE

    test: str = opt(
        "udp_bw", help="udp_bw | udp_lat | tcp_bw | tcp_lat", choices=LOCAL_TESTS)
    size: int | str | None = opt(
        None,
        help=("payload (UDP, 1..65507) or message (TCP, 1..1M) bytes; default per test (udp_bw 64, "
              "udp_lat 1, tcp_bw 128K as iperf3, tcp_lat 1)"),
        unit="bytes (64, 1500, 64K)",
        range_text="1..{udp} (UDP), 1..{tcp} (TCP), 1..{sctp} (SCTP)".format(**MAX_SIZE),
        short="-m",
        cli_help=("payload/message size: 64, 1500, 64K; UDP up to 65507, TCP up to 1M (default: udp_bw 64, tcp_bw "
                  "128K, the latency tests 1)"))
    rate: Rate | str | float | None = opt(
        None, help="target rate (1.5Mpps, 100Mbps, ...); None = as fast as possible",
        unit="pps or bit/s (10kpps, 100Mbps); empty: unlimited",
        short="-r",
        cli_help="target rate: 1.5Mpps, 100Mbps (default: unlimited)")
    flows: int = opt(
        1, help="UDP flows (source ports), udp_bw only", unit="flows", lo=1, hi=MAX_FLOWS,
        short="-f",
        cli_help="UDP flows (source ports), udp_bw only")
    duration: float | str = opt(
        10.0, help="how long to send (10s, 2m, ...)", unit=SECONDS, range_text="above 0, at most 24h",
        short="-t", cli_help="how long to send: 10s, 2m (default 10s; a --search trial: 1s)")
    host: str = opt(
        "127.0.0.1", help="where both ends bind: an address of this host (loopback, a lab's) or its DNS name",
        unit="IP address or DNS name",
        cli_help="an address of this host or its name (default 127.0.0.1)")
    port: int = opt(
        0, help="the receiving end's port; 0 = any free port", unit="port number; 0: any free", lo=0, hi=65535,
        cli_help="receiving port (default: any free port)")
    batch: int = opt(
        32,
        help=("messages per sendmmsg/recvmmsg (udp_bw); tcp_bw: writes per sendmmsg (and at most 16 "
              "KiB of them)"),
        unit="messages per call", lo=1, hi=MAX_BATCH,
        cli_help=("datagrams per sendmmsg/recvmmsg; tcp_bw: writes per sendmmsg, at most 16 KiB of them (default "
                  "32)"))
    gso: int | None = opt(
        None,
        help=("udp_bw: datagrams per UDP GSO send (the kernel cuts them; each arrives alone); 0 = "
              "off, plain sendmmsg with one datagram per message; None = 8 on loopback (fewer if 8 "
              "would pass 65507 B), off on a lab path"),
        unit="datagrams per send", lo=0, hi=MAX_GSO,
        cli_help="udp_bw: datagrams per UDP GSO send, 0 = off (default: 8 on loopback, off in a lab)")
    busy_poll: bool | None = opt(
        None,
        help=("spin on the socket before sleeping: both ends of a latency test (up to 1 ms) and a "
              "bandwidth test's receiving end (50 us); False = never (a latency test then measures as"
              " qperf, whose ends sleep); None = where the end is pinned (loc/rem_cpu_affinity): "
              "either end of a latency test (on two CPUs; True with both on one is refused), a udp_bw"
              " receiver in a lab (off loopback), a tcp_bw reader of messages of 16 KiB or more"))
    loc_cpu_affinity: int | str | None = opt(
        None,
        help=('pin the sending (pinging) end\'s thread to this CPU, as qperf\'s -lca; None or "any" = '
              "where the scheduler puts it"),
        unit="CPU number; empty: any")
    rem_cpu_affinity: int | str | None = opt(
        None, help="the same for the receiving (answering) end, as qperf's -rca", unit="CPU number; empty: any")
    messages: int | None = opt(
        None,
        help=("end once the sender has sent this many messages (latency tests: round trips), as "
              "qperf's -n; duration still bounds the test. None = no count"),
        unit="messages (latency: round trips); empty: until the duration ends")
    loc_sock_buf_size: int | str | None = opt(
        None,
        help=("SO_SNDBUF and SO_RCVBUF bytes of the sending (pinging) end's socket, as qperf's -lsb; "
              "None = the kernel's autotuning on a TCP sender or pinger, 8 MiB on UDP sockets"),
        unit="bytes (64K); empty: perfkit's default")
    rem_sock_buf_size: int | str | None = opt(
        None, help="the same for the receiving (answering) end, as qperf's -rsb; None = 8 MiB",
        unit="bytes (64K); empty: perfkit's default")
    access_recv: bool = opt(
        False,
        help=("read every byte received, at both ends, as an application would (qperf's -ar); the "
              "summary's bytes_read counts them. False = the data is not looked at"))

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # test, flows, port, batch, gso (and a subclass's own)
        proto = self.test.split("_")[0]
        size = self.DEFAULTS[self.test] if self.size is None else parse_size(self.size, "size")
        if not 1 <= size <= MAX_SIZE[proto]:
            raise ValueError(f"size: {size} bytes is out of range 1..{MAX_SIZE[proto]} for {self.test}")
        put("size", size)
        if self.rate is not None:
            put("rate", _rate_limit(self.rate, size, "packets"))
        if self.flows != 1 and self.test != "udp_bw":
            raise ValueError(f"flows: only udp_bw takes several flows, not {self.test}")
        duration = parse_duration(self.duration, "duration")
        if not 0 < duration <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", duration)
        put("host", check_target(self.host))
        if self.gso is None:
            put("gso", self._auto_gso())
        if self.gso > 1 and self.test != "udp_bw":
            raise ValueError(f"gso: only udp_bw sends with UDP GSO, not {self.test}")
        if self.gso * self.size > MAX_SIZE["udp"]:
            raise ValueError(f"gso: {self.gso} datagrams of {self.size} B exceed one UDP send "
                             f"({MAX_SIZE['udp']} B): use at most {MAX_SIZE['udp'] // self.size}")
        put("busy_poll", None if self.busy_poll is None else _bool(self.busy_poll, "busy_poll"))
        put("loc_cpu_affinity", check_cpu(self.loc_cpu_affinity, "loc_cpu_affinity"))
        put("rem_cpu_affinity", check_cpu(self.rem_cpu_affinity, "rem_cpu_affinity"))
        if self.busy_poll and self.test.endswith("_lat") and self._ends_share_a_cpu():
            raise ValueError(f"busy_poll: both ends of {self.test} are pinned to CPU {self.loc_cpu_affinity}, where "
                             "spinning ends take turns (a round trip of ~1 ms): pin them to two CPUs, or leave "
                             "busy_poll out")
        if self.messages is not None:
            put("messages", _int_in(self.messages, "messages", 1, MAX_MESSAGES))
        for end in ("loc_sock_buf_size", "rem_sock_buf_size"):
            put(end, check_sock_buf(getattr(self, end), end))
        put("access_recv", _bool(self.access_recv, "access_recv"))

    def polls(self, receives: bool, cpu: int | None, address: str) -> bool:
        """Whether an end working on address spins on its socket before it sleeps (a ping-pong
        end up to 1 ms after its send, a receiver 50 us after its last arrival): as busy_poll
        says, or, busy_poll left out, where the end has a CPU of its own (pinned: -lca, -rca)
        and it is either end of a latency test (not both pinned to one CPU), a udp_bw
        receiver off loopback (a lab link) or a tcp_bw reader of STREAM_POLL_SIZE messages
        or more.
        Latency: a sleeping end's wake-up is most of a small round trip on this VM; tcp_lat
        64 B over loopback, pinned, 5 alternating rounds: 13.5-15.9 us sleeping, 6.4-7.2
        polling (qperf, which sleeps: 12.6-16.6). --busy-poll 0 measures as qperf does.
        Bandwidth: over loopback and veth the sender's CPU delivers each packet and wakes a
        sleeping receiver, an IPI here. udp_bw over veth, pinned, 64 B: the receiver slept
        15k times/s, and with it polling the sender sent 9-15% more at 64 B, 1 KiB and
        32 KiB; not over loopback (with GSO, 64 B and 1 KiB: 7-10% less; 32 KiB: less in 5
        of 6 rounds). tcp_bw: the wake-up was ~10% of a 64 KiB sender's CPU over loopback,
        and with its reader polling 64 KiB went faster in 5 of 5 rounds over loopback and 4
        of 5 over veth, 16 KiB over loopback in 4 of 4. Smaller messages keep a sleeping
        reader: TCP's window and ACKs follow how the reader reads, and polling made 1 KiB
        over loopback slower in 3 of 3 rounds (64 B: a third)."""
        if self.busy_poll is not None:
            return self.busy_poll
        if cpu is None:
            return False
        if self.test.endswith("_lat"):
            return not self._ends_share_a_cpu()
        if not receives:
            return False
        if self.test == "tcp_bw":
            return self.size >= STREAM_POLL_SIZE
        return self.test == "udp_bw" and not ipaddress.ip_address(address).is_loopback

    def _ends_share_a_cpu(self) -> bool:
        """Both ends pinned to one CPU (-ca N): a ping-pong end spinning there would keep its
        peer off the CPU until its spin ends (tcp_lat 64 B, -ca 0: ~970 us against 11-13
        sleeping). Every test runs on this machine (loopback or a lab): one number, one CPU."""
        return self.loc_cpu_affinity is not None and self.loc_cpu_affinity == self.rem_cpu_affinity

    def _auto_gso(self) -> int:
        """gso left out: AUTO_GSO datagrams per udp_bw send to a loopback host (fewer where
        they would pass one UDP send), else off: off this host, a link's counters and
        impairments would see whole GSO sends, where each datagram is a packet on the wire."""
        if self.test != "udp_bw" or not ipaddress.ip_address(self.host).is_loopback:
            return 0
        n = min(AUTO_GSO, MAX_SIZE["udp"] // self.size)
        return n if n > 1 else 0

    @property
    def messages_per_second(self) -> float:
        """The pacing target in messages/s; 0 means unlimited."""
        return self.rate.messages_per_second(self.size) if self.rate else 0.0


@dataclass(frozen=True)
class LocalTest(_SocketTest):
    """Both ends of a qperf-style test in one process, over loopback (or a lab host).

    Each field declares its help, unit and range beside its default (perfkit.fields)."""
    DEFAULTS: ClassVar[dict] = LOCAL_DEFAULT_SIZE
    lab: str | None = opt(
        None,
        help=("run the two ends in the first two hosts of this lab (perfkit.lab): the receiving end "
              "in h2, the sender in h1, over the lab's link; host then only picks the family (an IPv6"
              " host: the lab's IPv6 addresses)"),
        unit="lab name")

    def __post_init__(self):
        super().__post_init__()
        if self.lab is not None and not LAB_NAME.fullmatch(str(self.lab)):
            raise ValueError(f"lab: {self.lab!r} is not a lab name (1-8 lowercase letters or digits)")

    def _auto_gso(self) -> int:
        # with a lab, host only picks the family (127.0.0.1 too): its link's impairments would
        # see whole GSO sends
        return 0 if self.lab is not None else super()._auto_gso()


@dataclass(frozen=True)
class RemoteTest(_SocketTest):
    """The near end of a test whose far end is `perfkit serve` on host (qperf's model).

    The fields are LocalTest's (size defaults are qperf's: tcp_bw 64K), plus the server's
    own. rem_cpu_affinity pins the server's worker; the server checks that it has that CPU.
    With flip the loc_/rem_ fields still mean this host's and the server's worker, and this
    host still connects."""
    TESTS: ClassVar[tuple[str, ...]] = REMOTE_TESTS
    # redeclared for their help here (a dataclass field keeps its place in the order)
    test: str = opt("udp_bw", help="qperf's tests; sctp_* where the kernel has SCTP", choices=REMOTE_TESTS)
    size: int | str | None = like(
        _SocketTest, "size", flag="--msg-size",
        cli_help=("message size: 64, 1K, 64K; UDP up to 65507, TCP up to 1M, SCTP up to 64K (default as qperf: "
                  "tcp_bw, sctp_bw 64K; udp_bw 32K; *_lat 1)"))
    duration: float | str = like(_SocketTest, "duration", flag="--time", cli_help="time per test (default 10s)")
    host: str = like(_SocketTest, "host", help="where perfkit serve runs: an IPv4 or IPv6 address or a DNS name")
    gso: int | None = like(
        _SocketTest, "gso",
        cli_help=("udp_bw: datagrams per UDP GSO send, 0 = off, as qperf sends (default: 8 to a loopback server, "
                  "else off)"))
    port: int = opt(
        19800, help="the control port of perfkit serve on host", unit="port number", lo=0, hi=65535,
        short="-lp",
        cli_help="server control port, as qperf -lp (default 19800)")
    token: str | None = opt(
        None, help="the shared secret a server off loopback asks for; never saved with the run",
        unit="shared secret; empty: PERFKIT_TOKEN", widget="secret", repr=False, compare=False,
        cli_help="the server's shared secret (default: $PERFKIT_TOKEN)")
    flip: bool = opt(
        False, help="the server sends (pings) and this host receives (answers), as qperf -f1",
        short="-f1",
        cli_help="the server sends (pings) and this host receives (answers), as qperf -f1")
    wait_server: float | str = opt(
        WAIT_SERVER_S, help="keep trying a server that is not listening yet this long, as qperf -ws",
        short="-ws",
        cli_help="keep trying a server that is not listening yet this long, as qperf -ws (default 5s)")
    ip_port: int = opt(
        0,
        help=("the data port: where the server listens or receives (flipped UDP: this host); 0 = any,"
              " as qperf -ip"),
        lo=0, hi=65535,
        short="-ip",
        cli_help=("the data port, as qperf -ip: where the server listens or receives (flipped UDP: where this host "
                  "receives); default any free port"))
    loc_timeout: float | str = opt(
        CONTROL_TIMEOUT_S, help="wait this long for the server's answer to a control request, as qperf -lto")
    rem_timeout: float | str = opt(
        CONTROL_TIMEOUT_S, help="the server waits this long for this host's next control message, as qperf -rto")

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "flip", _bool(self.flip, "flip"))
        for end in ("loc_timeout", "rem_timeout"):
            object.__setattr__(self, end, check_timeout(getattr(self, end), end))
        object.__setattr__(self, "wait_server", check_wait_server(self.wait_server))

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("token")
        return d


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
_DPDK_RING = re.compile(r"ring:[a-z0-9_]{1,16}:[01]")
_DPDK_NAME = re.compile(r"[A-Za-z0-9_]+")
_DPDK_ARG = re.compile(r"[A-Za-z0-9_-]+=[A-Za-z0-9_./:@+-]*")
_MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")


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
        if not _DPDK_RING.fullmatch(dev):
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


def _check_netns(value):
    if value is None:
        return None
    value = str(value)
    if not value.startswith("/") or "\0" in value or len(value) > 107:
        raise ValueError(f"netns: {value!r} is not a network namespace file (/run/netns/NAME)")
    return value


class _DpdkSpec(_Serial):
    ENGINE: ClassVar[str] = "dpdk"  # the engine perfkit.Run uses when none is named


@dataclass(frozen=True)
class DpdkFlows(_DpdkSpec):
    """UDP flows from a DPDK port: perfkit.Run(DpdkFlows(...), engine="dpdk").

    Each field declares its help, unit and range beside its default (perfkit.fields)."""
    port: str = opt(
        "ring:pk:0",
        help=("where the generator sends: ring:NAME:0 or ring:NAME:1 (the ends of an in-process "
              "pair), or a vdev: net_null0, net_ring0 (a loopback), net_memif0,role=client,..., "
              "net_af_packet0,iface=IF (with netns)"),
        unit="ring:NAME:0|1 or a vdev",
        suggestions=("ring:pk:0", "net_null0", "net_ring0", "net_memif0,role=client"),
        cli_help=("DPDK port: ring:NAME:0, net_null0,no-rx=1, net_memif0,..., net_af_packet0,iface=IF (with "
                  "--netns)"))
    peer: str | None = opt(
        None,
        help=("a second port in this process that receives the frames (mode rxonly) or sends each one"
              " back (mode reverse); None: the far end is elsewhere"),
        unit="a second port here; empty: none", suggestions=("ring:pk:1",),
        cli_help="a second port in this process that receives (ring:NAME:1, ...)")
    mode: str = opt(
        "rxonly",
        help=("what the far end does. rxonly: loss and one-way latency measured there; reverse: "
              "frames come back, loss and round trips measured by the generator"),
        choices=DPDK_MODES,
        cli_help="what the far end does: rxonly or reverse (default rxonly)")
    size: int | str = opt(
        64,
        help=("Ethernet frame bytes counting the 4-byte FCS, 64..1518, or jumbo up to 9018 on ring, "
              "net_ring, net_null and net_memif ports (rates count these bytes)"),
        unit="Ethernet frame bytes, FCS counted", lo=DPDK_MIN_SIZE, hi=DPDK_MAX_SIZE,
        check=False,  # a size with units (1500, 9K): parsed and checked in __post_init__
        short="-m",
        cli_help="Ethernet frame bytes with FCS, 64..1518, jumbo to 9018 (default 64)")
    rate: Rate | str | float | None = opt(
        None,
        help=("target rate (1Mpps, 500Mbps: bits of whole frames, the mean size with sizes); None = "
              "as fast as the port takes frames"),
        unit="pps or bit/s (10kpps, 100Mbps); empty: unlimited",
        short="-r",
        cli_help="target rate: 1Mpps, 500Mbps (default: unlimited)")
    flows: int = opt(
        1,
        help=("UDP flows, each its own 4-tuple and sequence numbers. Flow f is the f-th tuple of the "
              "ranges below, source port varying fastest, then destination port, source address, "
              "destination address; frames go round the flows in turn"),
        unit="flows", range_text=f"1..{DPDK_MAX_FLOWS}, at most sports x dports x src_ips x dst_ips",
        short="-f",
        cli_help="UDP flows (source ports, default 1)")
    duration: float | str = opt(
        10.0, help="how long to send", unit=SECONDS, range_text="above 0, at most 24h",
        short="-t", cli_help="how long to send (default 10s; a --search trial: 1s)")
    ip: str = opt(
        "198.18.0.1", help="the port's own address; peer_ip: the destination (and the peer port's address)",
        unit="IPv4 address",
        cli_help="the port's address (default 198.18.0.1)")
    peer_ip: str = opt(
        "198.18.0.2", help="the destination (and the peer port's address)", unit="IPv4 address",
        cli_help="destination address (default 198.18.0.2)")
    dst_mac: str | None = opt(
        None,
        help=("the destination MAC; None = the peer port's, else ARP for peer_ip (1 s; then "
              "broadcast)"),
        unit="aa:bb:cc:dd:ee:ff; empty: the peer port's, or ARP",
        cli_help="destination MAC (default: the peer port's, or ARP)")
    sport: int = opt(
        10000, help="UDP ports", unit="UDP port", lo=1, hi=65535,
        cli_help="first UDP source port (default 10000)")
    dport: int = opt(
        9, help="UDP ports", unit="UDP port", lo=1, hi=65535,
        cli_help="UDP destination port (default 9)")
    burst: int = opt(
        32, help="frames per rx/tx burst", unit="frames per burst", lo=1, hi=DPDK_MAX_BURST,
        cli_help="frames per burst (default 32)")
    netns: str | None = opt(
        None, help="open the ports inside this network namespace (af_packet, tap: a lab host's)",
        unit="/run/netns/NAME",
        cli_help="open the port in this network namespace (/run/netns/NAME)")
    src_ips: int = opt(
        1, help="source addresses ip .. ip + src_ips - 1 (default 1)", unit="addresses",
        range_text=f"1..{DPDK_MAX_IPS}",
        cli_help="source addresses from --ip (default 1)")
    dst_ips: int = opt(
        1,
        help=("destination addresses peer_ip .. peer_ip + dst_ips - 1 (default 1; a reverse peer "
              "reflects for all of them)"),
        unit="addresses", range_text=f"1..{DPDK_MAX_IPS}",
        cli_help="destination addresses from --peer-ip (default 1)")
    sports: int | None = opt(
        None, help="source ports sport .. sport + sports - 1 (default: as many as the flows need)",
        unit="ports; empty: as the flows need", range_text="1..65536 - sport",
        cli_help="source ports from --sport (default: as many as --flows needs)")
    dports: int = opt(
        1,
        help=("destination ports dport .. dport + dports - 1 (default 1; more when the flows need "
              "more source ports than there are from sport)"),
        unit="ports", range_text="1..65536 - dport",
        cli_help="destination ports from --dport (default 1)")
    sizes: tuple | str | None = opt(
        None,
        help=("a size mix instead: 'imix' (64:7,570:4,1518:1), '64,570,1518', '64:7,570:4,...', sent "
              "interleaved as one preallocated pattern; size becomes the mean (rounded)"),
        unit="imix, 64,570,1518 or 64:7,570:4 (size:weight)",
        cli_help="a frame size mix instead of --size: imix, 64,570,1518 or 64:7,570:4,1518:1")
    ramp_to: Rate | str | float | None = opt(
        None,
        help=("with rate: the rate rises linearly from rate to ramp_to over ramp_time, then stays "
              "there; paced by the TSC"),
        unit="pps or bit/s; empty: no ramp",
        cli_help="with --rate: the rate rises from --rate to this (1Mpps, 1Gbps)")
    ramp_time: float | str | None = opt(
        None, help="how long the ramp from rate to ramp_to takes (default: the whole duration)", unit=SECONDS,
        cli_help="how long the ramp takes (default: --duration)")
    cores: int = opt(
        1,
        help=("lcores (worker threads) per side, each with its own queue of the port(s), mempool "
              "cache and counters; the flows and the rate are split between them. Receive queues are "
              "fed by RSS where the PMD has it; a ring pair, net_ring and memif join tx queue q to rx"
              " queue q"),
        unit="lcores (worker threads) per side", range_text=f"1..{DPDK_MAX_QUEUES}, at most flows",
        cli_help="lcores per side, one port queue each (default 1)")
    probe_rate: Rate | str | float | None = opt(
        None,
        help=("a low-rate latency probe stream beside the load (100pps; None = none): probe frames "
              "are flagged in the payload and get their own histogram (summary: probe_lat_p50_us "
              "...); they count in the frames and the loss"),
        cli_help="a latency probe stream beside the load: 100pps, 1kpps (default none)")
    probe_size: int = opt(
        128, help="probe frame bytes, FCS counted (70..1518, default 128)",
        cli_help="probe frame bytes with FCS (default 128)")
    bidirectional: bool = opt(
        False,
        help=("with a peer port (mode rxonly): both ports send and receive, each the same flows and "
              "rate; loss and one-way latency counted at both ends"),
        cli_help="with --peer: both ports send and receive")

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # mode, sport, dport, burst
        put("netns", _check_netns(self.netns))
        put("port", check_dpdk_port(self.port, "port", self.netns))
        if self.peer is not None:
            put("peer", check_dpdk_port(self.peer, "peer", self.netns))
            if self.peer == self.port:
                raise ValueError(f"peer: {self.peer!r} is the port itself; leave peer out for one port")
            bare = lambda p: p.startswith("net_ring") and "," not in p  # noqa: E731
            if bare(self.port) and bare(self.peer):
                raise ValueError(f"peer: {self.port} and {self.peer} would be two separate loopback "
                                 "ports (a net_ring vdev receives what it sends); join two ports with "
                                 "ring:NAME:0 and ring:NAME:1")
        size = parse_size(self.size, "size")
        if not DPDK_MIN_SIZE <= size <= DPDK_MAX_SIZE:
            raise ValueError(f"size: {size} bytes is out of range {DPDK_MIN_SIZE}..{DPDK_MAX_SIZE} "
                             "(Ethernet frames, FCS counted)")
        put("size", size)
        if self.sizes is not None:
            put("sizes", parse_sizes(self.sizes))
            put("size", round(self.mean_size))
        if self.rate is not None:
            put("rate", _rate_limit(self.rate, size, "frames"))
        put("flows", _int_in(self.flows, "flows", 1, DPDK_MAX_FLOWS))
        duration = parse_duration(self.duration, "duration")
        if not 0 < duration <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", duration)
        self._check_ramp(put)
        put("cores", _int_in(self.cores, "cores", 1, DPDK_MAX_QUEUES))
        if self.probe_rate is not None:
            pr = parse_rate(self.probe_rate, "probe_rate")
            if pr.unit != "pps" or not 0 < pr.value <= 1e6:
                raise ValueError(f"probe_rate: {self.probe_rate!r}: probes per second above 0, "
                                 "at most 1Mpps (100pps, 1kpps)")
            put("probe_rate", pr)
        put("probe_size", _int_in(self.probe_size, "probe_size", 70, DPDK_MAX_SIZE))
        biggest = max([self.size] + [s for s, _ in self.sizes or ()]
                      + ([self.probe_size] if self.probe_rate else []))
        if biggest > DPDK_STD_SIZE:
            for name in ("port", "peer"):
                dev = getattr(self, name)
                field = "sizes" if self.sizes else "size"
                if dev is not None and not dev.startswith(DPDK_JUMBO_PORTS):
                    raise ValueError(f"{field}: {biggest}-byte frames are jumbo: {name} {dev.split(',')[0]} "
                                     f"takes at most {DPDK_STD_SIZE} (jumbo on ring, net_ring, net_null, "
                                     "net_memif ports)")
                # memif 22.11 corrupts frames chained over many of its 2 KB buffers when its
                # ring runs full (seen: duplicates, non-IP frames): one buffer per frame
                bsize = [int(a[6:]) for a in (dev or "").split(",")[1:] if a.startswith("bsize=")
                         and a[6:].isdigit()]
                if dev is not None and dev.startswith("net_memif") and not (bsize and bsize[0] >= biggest - 4):
                    raise ValueError(f"{field}: {biggest}-byte frames over memif need buffers that hold one: "
                                     f"add bsize={max(9216, biggest)} to {name} (and to the other memif side)")
        if self.bidirectional not in (True, False):
            raise ValueError(f"bidirectional: {self.bidirectional!r} is not true or false")
        if self.bidirectional and (self.peer is None or self.mode != "rxonly"):
            raise ValueError("bidirectional: needs a peer port in this process and mode rxonly "
                             "(the peer sends the same flows back at the same rate)")
        if self.flows < self.cores:
            raise ValueError(f"flows: {self.flows} flow(s) for {self.cores} cores: each core sends "
                             "flows of its own (give at least as many flows)")
        put("ip", check_lab_ipv4(self.ip, "ip"))
        put("peer_ip", check_dest_ip(self.peer_ip, "peer_ip", 4))
        if self.ip == self.peer_ip:
            raise ValueError(f"peer_ip: {self.peer_ip} is the port's own address")
        if self.dst_mac is not None:
            if not _MAC.fullmatch(str(self.dst_mac)):
                raise ValueError(f"dst_mac: {self.dst_mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
            put("dst_mac", str(self.dst_mac).lower())
        self._check_ranges(put)

    def _check_ramp(self, put):
        if self.ramp_to is None:
            if self.ramp_time is not None:
                raise ValueError("ramp_time: give ramp_to (the rate to rise to) as well")
            return
        if self.rate is None:
            raise ValueError("ramp_to: a ramp starts from rate: give rate as well")
        to = parse_rate(self.ramp_to, "ramp_to")
        if not to.value > 0 or to.messages_per_second(self.mean_size) > MAX_RATE_PPS:
            raise ValueError(f"ramp_to: {self.ramp_to!r} is out of range (above 0, at most "
                             f"{MAX_RATE_PPS:.0e} frames/s)")
        put("ramp_to", to)
        t = self.duration if self.ramp_time is None else parse_duration(self.ramp_time, "ramp_time")
        if not 0 < t <= self.duration:
            raise ValueError(f"ramp_time: {self.ramp_time!r} is out of range (above 0, at most the duration)")
        put("ramp_time", t)

    @property
    def mean_size(self) -> float:
        """Mean frame bytes (FCS counted): size, or the sizes' weighted mean."""
        if self.sizes is None:
            return float(self.size)
        return sum(s * w for s, w in self.sizes) / sum(w for _, w in self.sizes)

    @property
    def ramp_end_per_second(self) -> float:
        return self.ramp_to.messages_per_second(self.mean_size) if self.ramp_to else 0.0

    def _check_ranges(self, put):
        """The address and port ranges the flows are spread over."""
        put("src_ips", _int_in(self.src_ips, "src_ips", 1, DPDK_MAX_IPS))
        put("dst_ips", _int_in(self.dst_ips, "dst_ips", 1, DPDK_MAX_IPS))
        put("dports", _int_in(self.dports, "dports", 1, 65535))
        if self.dport + self.dports > 65536:
            raise ValueError(f"dports: {self.dports} ports from {self.dport} pass 65535")
        others = self.src_ips * self.dst_ips * self.dports
        if self.sports is None:
            need = -(-self.flows // others)
            if self.sport + need > 65536 and self.dports == 1:
                # more flows than source ports from sport: they go over destination ports too
                put("dports", -(-need // (65536 - self.sport)))
                if self.dport + self.dports > 65536:
                    raise ValueError(f"flows: {self.flows} flows need more source and destination ports "
                                     "than there are: give src_ips or dst_ips")
                others = self.src_ips * self.dst_ips * self.dports
                need = -(-self.flows // others)
            if self.sport + need > 65536:
                raise ValueError(f"flows: {self.flows} flows need {need} source ports from {self.sport}, "
                                 "past 65535: lower sport, or give more src_ips, dst_ips or dports")
            put("sports", need)
        else:
            put("sports", _int_in(self.sports, "sports", 1, 65535))
            if self.sport + self.sports > 65536:
                raise ValueError(f"sports: {self.sports} ports from {self.sport} pass 65535")
            if self.sports * others < self.flows:
                raise ValueError(f"flows: {self.flows} flows need as many tuples; sports x dports x "
                                 f"src_ips x dst_ips is only {self.sports * others}")
        lab = LAB_NETS[0]
        src0, dst0 = ipaddress.IPv4Address(self.ip), ipaddress.IPv4Address(self.peer_ip)
        if int(src0) + self.src_ips - 1 > int(lab.broadcast_address):
            raise ValueError(f"src_ips: {self.src_ips} addresses from {src0} leave 198.18.0.0/15")
        if int(dst0) + self.dst_ips - 1 > 0xFFFFFFFF:
            raise ValueError(f"dst_ips: {self.dst_ips} addresses from {dst0} pass 255.255.255.255")
        # the guard's blocks lie far more than DPDK_MAX_IPS apart: a range with both ends in them is in one
        sandbox.check(dst0 + self.dst_ips - 1, "dst_ips")
        if int(src0) < int(dst0) + self.dst_ips and int(dst0) < int(src0) + self.src_ips:
            raise ValueError(f"dst_ips: the source addresses {src0} + {self.src_ips} and the destination "
                             f"addresses {dst0} + {self.dst_ips} overlap")

    @property
    def test(self) -> str:
        """How perfkit's summaries read it: udp_bw (one way) or udp_lat (round trips)."""
        return "udp_bw" if self.mode == "rxonly" else "udp_lat"

    @property
    def messages_per_second(self) -> float:
        return self.rate.messages_per_second(self.mean_size) if self.rate else 0.0


@dataclass(frozen=True)
class DpdkReflect(_DpdkSpec):
    """The far end of DPDK flows on one port: perfkit.Run(DpdkReflect(...), engine="dpdk");
    mode forward carries frames between two ports (testpmd's io forward)."""
    port: str = opt(
        "ring:pk:1", help="the port to answer on: ring:NAME:1 (the far end of a pair) or a vdev",
        unit="ring:NAME:0|1 or a vdev", suggestions=("ring:pk:1", "net_null0", "net_memif0,role=server"),
        cli_help="DPDK port (see perfkit flows)")
    mode: str = opt(
        "reverse",
        help=("rxonly: count, parse, loss/duplicates/reordering and one-way latency per flow (the "
              "sender's clock: meaningful on this host); reverse: send UDP frames for this port's "
              "address back with MACs, IPs and ports swapped; forward: every frame received on port "
              "leaves by peer and every frame received on peer leaves by port, payload untouched "
              "(testpmd's io forward; its mac forward with dst_mac)"),
        choices=DPDK_REFLECT_MODES,
        cli_help="rxonly, reverse or forward (default reverse)")
    duration: float | str = opt(
        10.0, help="how long to run (or until stopped)", unit=SECONDS, range_text="above 0, at most 24h",
        short="-t",
        cli_help="how long to run (default 10s; Ctrl-C stops)")
    ip: str = opt(
        "198.18.0.2",
        help=("the port's address: ARP and ICMP echo are answered for it (not in forward mode: a "
              "forwarder has no address, it carries ARP and ping like a wire)"),
        unit="IPv4 address",
        cli_help="the port's address (default 198.18.0.2; socket engine: 127.0.0.1)")
    flows: int = opt(
        1024, help="rxonly: flow ids tracked (0 .. flows - 1)", unit="flows", lo=1, hi=DPDK_MAX_FLOWS,
        short="-f",
        cli_help="rxonly: flow ids tracked (default 1024)")
    burst: int = like(DpdkFlows, "burst")
    netns: str | None = like(DpdkFlows, "netns")
    ips: int = opt(
        1, help="reverse: reflect UDP for ip .. ip + ips - 1 (a generator's dst_ips)",
        cli_help="reverse: reflect for this many addresses from --ip (default 1)")
    cores: int = opt(
        1,
        help=("lcores, one queue of the port each (the generator's side needs as many). forward: 1 = "
              "one lcore for both directions; 2N = one lcore per direction and queue, N queues on "
              "each port"),
        unit="lcores (worker threads) per side")
    peer: str | None = opt(
        None, help="forward: the second port",
        cli_help="forward: the second port (frames go from --port to --peer and back)")
    dst_mac: str | None = opt(
        None,
        help=("forward: frames leaving port get this destination MAC and port's own MAC as source "
              "(the next hop's; None = untouched)"),
        unit="aa:bb:cc:dd:ee:ff; empty: the peer port's, or ARP",
        cli_help="forward: the next hop's MAC for frames leaving --port (default: frames untouched)")
    peer_dst_mac: str | None = opt(
        None, help="forward: the same for frames leaving peer",
        cli_help="forward: the next hop's MAC for frames leaving --peer")

    MODES: ClassVar[tuple] = DPDK_REFLECT_MODES

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # mode, flows, burst
        put("netns", _check_netns(self.netns))
        put("port", check_dpdk_port(self.port, "port", self.netns))
        self._check_forward(put)
        duration = parse_duration(self.duration, "duration")
        if not 0 < duration <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", duration)
        put("ip", check_lab_ipv4(self.ip, "ip"))
        put("ips", _int_in(self.ips, "ips", 1, DPDK_MAX_IPS))
        put("cores", _int_in(self.cores, "cores", 1, DPDK_MAX_QUEUES))
        if int(ipaddress.IPv4Address(self.ip)) + self.ips - 1 > int(LAB_NETS[0].broadcast_address):
            raise ValueError(f"ips: {self.ips} addresses from {self.ip} leave 198.18.0.0/15")
        if self.mode == "forward" and self.cores != 1 and self.cores % 2:
            raise ValueError(f"cores: {self.cores}: forward takes 1 (one lcore for both directions) or an "
                             f"even number (one lcore per direction and queue), at most {DPDK_MAX_QUEUES}")

    def _check_forward(self, put):
        if self.mode != "forward":
            for name in ("peer", "dst_mac", "peer_dst_mac"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name}: only mode forward uses it (a second port and next hops)")
            return
        if self.peer is None:
            raise ValueError("peer: mode forward needs a second port (frames go from port to peer "
                             "and from peer to port)")
        put("peer", check_dpdk_port(self.peer, "peer", self.netns))
        if self.peer.split(",")[0] == self.port.split(",")[0]:
            raise ValueError(f"peer: {self.peer!r} is the port itself: forward between two ports")
        ends = [_DPDK_RING.fullmatch(p) and p.rsplit(":", 1)[0] for p in (self.port, self.peer)]
        if ends[0] and ends[0] == ends[1]:
            raise ValueError(f"peer: {self.port} and {self.peer} are the two ends of one ring pair: what "
                             "one forwards the other receives and forwards back, for ever")
        for name in ("port", "peer"):
            dev = getattr(self, name)
            if dev.startswith("net_ring") and "," not in dev:
                raise ValueError(f"{name}: {dev} is a loopback port (a net_ring vdev receives what it "
                                 "sends): forwarding through it loops every frame; use ring:NAME:0|1")
        for name in ("dst_mac", "peer_dst_mac"):
            mac = getattr(self, name)
            if mac is not None:
                if not _MAC.fullmatch(str(mac)):
                    raise ValueError(f"{name}: {mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
                put(name, str(mac).lower())

    @property
    def test(self) -> str:
        return f"dpdk_{self.mode}"


MAX_USERS = 100_000
MAX_RESPONSE = 1 << 20
MAX_URLS = 10_000
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE")
URL_ORDERS = ("cycle", "random")   # how HttpLoad's requests pick from a URL list


def _split_url(url: str, field: str = "url") -> tuple[str, int, str]:
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


def _parse_url(url: str, field: str = "url") -> tuple[str, int, str]:
    """http[s]://HOST[:PORT]/PATH -> (address, port, path); HOST is an address or a DNS name."""
    host, port, path = _split_url(url, field)
    return check_target(host, field), port, path


@dataclass(frozen=True)
class HttpLoad(_Serial):
    """HTTP load with virtual users against a server (nGrinder, wrk, k6's job).

    Each field declares its help, unit and range beside its default (perfkit.fields)."""
    url: str | list = opt(
        "http://127.0.0.1:8080/",
        help=("http[s]://HOST[:PORT]/PATH; HOST is an address or a DNS name (https: TLS through the "
              "system OpenSSL, the certificate is not checked). Or a list of URLs on one HOST:PORT: "
              'each request takes the next one (url_order="cycle") or one at random '
              '(url_order="random")'),
        unit="http[s]://HOST[:PORT]/PATH; several: space between")
    users: int = opt(
        10, help="virtual users: one connection each (1..100000)", unit="virtual users", lo=1, hi=MAX_USERS,
        short="-u",
        cli_help="virtual users, one connection each (default 10)")
    duration: float | str = opt(
        10.0, help="how long to load (10s, 2m)", unit=SECONDS, range_text="1ms..24h",
        short="-t",
        cli_help="how long (default 10s)")
    rate: Rate | str | float | None = opt(
        None,
        help=("open loop: requests/s in total (1000, 50k); response times then count from each "
              "request's intended send time, as wrk2 does. None: closed loop, each user sends again "
              "when answered"),
        unit="requests/s (500, 50k); empty: closed loop",
        short="-r",
        cli_help="open loop: requests/s in total, latency from intended send times")
    think: float | str = opt(
        0.0, help="closed loop: pause after each response (0, 100ms)", unit=SECONDS, range_text="0..1h",
        cli_help="pause after each response (closed loop): 100ms")
    ramp: float | str = opt(
        0.0, help="users start evenly over this time", unit=SECONDS, range_text="0..24h",
        cli_help="start the users evenly over this time")
    keepalive: bool = opt(
        True, help="reuse connections (False: a new connection per request)")
    method: str = opt(
        "GET", help="the request (GET/HEAD/POST/PUT/DELETE; headers as a dict)", choices=HTTP_METHODS,
        short="-X",
        cli_help="GET HEAD POST PUT DELETE (default GET)")
    headers: dict | None = opt(
        None, help="the request (GET/HEAD/POST/PUT/DELETE; headers as a dict)", unit="one 'Name: value' a line")
    body: str | bytes | None = opt(
        None, help="the request (GET/HEAD/POST/PUT/DELETE; headers as a dict)", widget="area",
        flag="--data", short="-d",
        cli_help="request body")
    connect_timeout: float | str = opt(
        5.0, help="a connection not made by then is an error", unit=SECONDS, range_text="1ms..10m")
    response_timeout: float | str = opt(
        10.0, help="a response not complete by then is an error", unit=SECONDS, range_text="1ms..1h",
        flag="--timeout",
        cli_help="response timeout (default 10s)")
    url_order: str = opt(
        "cycle", help='"cycle" or "random": how requests pick from a URL list',
        unit="how requests pick from a URL list", choices=URL_ORDERS, check=False)   # its own message
    lab: str | None = opt(
        None,
        help=("run the client in this lab's first host (h1), e.g. against a server in h2 (url "
              "http://<h2's address>/): the lab's link, impaired or not, is then the path under test"),
        unit="lab name",
        cli_help="run the client in this lab's host h1 (perfkit lab up)")
    threads: int = opt(
        1,
        help=("client threads (each its own epoll loop), the users and the rate split evenly between "
              "them, as wrk -t"),
        unit="client threads", range_text="1..64, at most users",
        cli_help="client threads, users split between them (default 1; wrk -t)")
    processes: int = opt(
        1,
        help=("client processes, each running `threads` threads with its own open-file limit: for "
              "more users than one process may hold open (RLIMIT_NOFILE, whose hard limit only "
              "CAP_SYS_RESOURCE raises)"),
        cli_help=("client processes of --threads threads each, every one with its own open-file limit: for more "
                  "users than one process may open"))

    test = "http"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # users, method
        if isinstance(self.url, (list, tuple)):
            if not 1 <= len(self.url) <= MAX_URLS:
                raise ValueError(f"url: a list of 1..{MAX_URLS} URLs, not {len(self.url)}")
            put("url", [str(u) for u in self.url] if len(self.url) > 1 else str(self.url[0]))
        first = _parse_url(self.urls[0])
        addresses = {_split_url(self.urls[0])[0]: first[0]}   # each name resolved once
        object.__setattr__(self, "_address", first[0])   # where the load goes (not a field: not saved)
        for u in self.urls[1:]:  # one connection pool: every URL names the same server
            name, port, _ = _split_url(u)
            if name not in addresses:
                addresses[name] = check_target(name, "url")
            if (addresses[name], port) != first[:2] or u.split(":", 1)[0] != self.urls[0].split(":", 1)[0]:
                raise ValueError(f"url: {u!r} is not on {self.urls[0].split('/')[2]} with the same scheme "
                                 "as the first URL (one server per load)")
        if self.lab is not None and not LAB_NAME.fullmatch(str(self.lab)):
            raise ValueError(f"lab: {self.lab!r} is not a lab name (1-8 lowercase letters or digits)")
        if self.tls:
            try:
                from perfkit._sock import HAVE_TLS  # the native engine: missing from a broken build
            except ImportError:  # the engine says so when it is built
                HAVE_TLS = True
            if not HAVE_TLS:
                raise ValueError("url: https needs perfkit built with OpenSSL (Debian: apt install libssl-dev, "
                                 "then reinstall perfkit)")
        if self.url_order not in URL_ORDERS:
            raise ValueError(f"url_order: {self.url_order!r} is not 'cycle' or 'random'")
        put("threads", _int_in(self.threads, "threads", 1, min(64, self.users)))
        put("processes", _int_in(self.processes, "processes", 1, min(16, self.users // self.threads)))
        for name, lo, hi in (("duration", 1e-3, MAX_DURATION_S), ("think", 0, 3600), ("ramp", 0, MAX_DURATION_S),
                             ("connect_timeout", 1e-3, 600), ("response_timeout", 1e-3, 3600)):
            v = parse_duration(getattr(self, name), name)
            if not lo <= v <= hi:
                raise ValueError(f"{name}: {getattr(self, name)!r} is out of range {lo:g}..{hi:g} s")
            put(name, v)
        if self.rate is not None:
            text = str(self.rate).strip()  # requests/s: a bare 50k means 50k/s, as the docs say
            rate = parse_rate(text + "pps" if re.fullmatch(r"[0-9.]+[kMG]", text) else self.rate, "rate")
            if rate.unit != "pps" or not 0 < rate.value <= MAX_RATE_PPS:
                raise ValueError(f"rate: {self.rate!r} is not a number of requests/s above 0 (e.g. 5000, 50k)")
            put("rate", rate)
        for k, v in (self.headers or {}).items():
            if any(c in str(k) + str(v) for c in "\r\n") or ":" in str(k) or not str(k):
                raise ValueError(f"headers: {k!r}: {v!r} is not a valid header")
            if str(k).lower() in ("content-length", "transfer-encoding"):
                raise ValueError(f"headers: {k!r} is set from the body; leave it out")
        if not isinstance(self.keepalive, bool):
            raise ValueError(f"keepalive: {self.keepalive!r} is not true or false")
        if len(self.request_bytes()) > MAX_RESPONSE:
            raise ValueError(f"body: the requests (one per URL) are over {MAX_RESPONSE} bytes together")

    @property
    def size(self) -> int:
        return len(self._request(self.urls[0]))

    @property
    def messages_per_second(self) -> float:
        return self.rate.value if self.rate else 0.0

    @property
    def urls(self) -> list[str]:
        """The URL list (one URL: a list of one)."""
        return list(self.url) if isinstance(self.url, list) else [self.url]

    @property
    def tls(self) -> bool:
        """https: every URL of the list is https (one scheme per load)."""
        return self.urls[0].lower().startswith("https:")

    def target(self) -> tuple[str, int]:
        """(address, port): the server, its name resolved when the spec was made."""
        return self._address, _split_url(self.urls[0])[1]

    def request_bytes(self) -> bytes:
        """Every request of the URL list, one after another, in the list's order
        (one URL: the request every virtual user sends)."""
        return b"".join(self._request(u) for u in self.urls)

    def _request(self, url: str) -> bytes:
        host, port, path = _split_url(url)   # Host: the name as the URL has it
        host = f"[{host}]" if ":" in host else host
        body = self.body.encode() if isinstance(self.body, str) else (self.body or b"")
        mine = {str(k).lower() for k in (self.headers or {})}
        default = 443 if self.tls else 80
        hdrs = {k: v for k, v in (("Host", host if port == default else f"{host}:{port}"), ("User-Agent", "perfkit"))
                if k.lower() not in mine}  # the caller's Host or User-Agent replaces ours
        hdrs.update(self.headers or {})
        if not self.keepalive:
            hdrs["Connection"] = "close"
        if body or self.method in ("POST", "PUT"):
            hdrs["Content-Length"] = str(len(body))
        head = f"{self.method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        return head.encode() + b"\r\n" + body


@dataclass(frozen=True)
class HttpServe(_Serial):
    """perfkit's own HTTP server: the same response (status 200, size bytes of body)
    to every request, keep-alive unless the client asks to close. For labs and demos."""
    host: str = opt(
        "127.0.0.1", help="where to listen (loopback or a lab address; port 0 = any)", unit="IP address",
        cli_help="loopback or a lab address (default 127.0.0.1)")
    port: int = opt(
        8080, help="where to listen (loopback or a lab address; port 0 = any)", unit="port number; 0: any", lo=0,
        hi=65535,
        cli_help="port (default 8080; 0 = any)")
    size: int | str = opt(
        100, help="body bytes (0..1 MiB)", unit="body bytes (100, 4K)", lo=0, hi=MAX_RESPONSE - 256,
        check=False,  # a size with units (4K): parsed and checked in __post_init__
        cli_help="response body bytes (default 100)")
    duration: float | str = opt(
        60.0, help="how long to serve", unit=SECONDS, range_text="above 0, at most 24h",
        short="-t",
        cli_help="how long to serve (default 60s)")
    connections: int = opt(
        10_000, help="connections served at once", unit="connections", lo=1, hi=MAX_USERS,
        cli_help="connections served at once (default 10000)")

    test = "http_serve"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # port, connections
        put("host", check_target(self.host))
        size = parse_size(self.size, "size")
        if not 0 <= size <= MAX_RESPONSE - 256:
            raise ValueError(f"size: {size} bytes is out of range 0..{MAX_RESPONSE - 256}")
        put("size", size)
        d = parse_duration(self.duration, "duration")
        if not 0 < d <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", d)

    messages_per_second = 0.0

    def response_bytes(self) -> bytes:
        return (f"HTTP/1.1 200 OK\r\nServer: perfkit\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {self.size}\r\n\r\n").encode() + b"x" * self.size


@dataclass(frozen=True)
class SocketReflect(_Serial):
    """The far end of UDP flows on kernel sockets (`perfkit reflect --engine socket`):
    a socket bound to host:port that counts what arrives (rxonly: loss, duplicates,
    reordering and one-way latency per flow from perfkit's header) or sends every
    datagram back to its sender (reverse), e.g. for a DPDK generator in another lab host."""
    host: str = opt(
        "127.0.0.1", help="where to listen (loopback or a lab host's address, with netns)",
        unit="IP address to listen on")
    port: int = opt(
        9, help="where to listen (loopback or a lab host's address, with netns)",
        unit="UDP port (9: where DPDK flows send)", lo=1, hi=65535,
        flag="--udp-port",
        cli_help="socket engine: the UDP port to serve (default 9, where perfkit flows sends)")
    mode: str = opt(
        "reverse", help="rxonly or reverse", choices=DPDK_MODES,
        check=False)   # its message says why forward is not here
    flows: int = opt(
        1024, help="rxonly: flow ids tracked (0 .. flows - 1)", unit="flows", lo=1, hi=MAX_FLOWS)
    duration: float | str = opt(
        10.0, help="how long to serve", unit=SECONDS, range_text="above 0, at most 24h")
    netns: str | None = opt(
        None, help="listen in this network namespace (/run/netns/NAME: a lab host's)", unit="/run/netns/NAME")

    MODES: ClassVar[tuple] = DPDK_MODES

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # port, flows
        put("host", check_target(self.host))
        if self.mode not in self.MODES:
            raise ValueError(f"mode: {self.mode!r} is not one of {', '.join(self.MODES)} on the socket engine "
                             "(forward needs two DPDK ports)")
        d = parse_duration(self.duration, "duration")
        if not 0 < d <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", d)
        put("netns", _check_netns(self.netns))

    size = MAX_SIZE["udp"]          # the receive buffer: any datagram fits
    messages_per_second = 0.0

    @property
    def test(self) -> str:
        return "udp_bw" if self.mode == "rxonly" else "udp_reflect"


SPECS = {cls.__name__: cls for cls in (LocalTest, RemoteTest, HttpLoad, HttpServe, DpdkFlows, DpdkReflect,
                                       SocketReflect)}


def from_dict(d: dict):
    """Any spec from its to_dict() form."""
    kind = d.get("kind", "LocalTest")
    if kind not in SPECS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(SPECS)}")
    return SPECS[kind].from_dict(d)


# ------------------------------------------------------------------ DPDK TCP/HTTP specs
# (issue 6: dperf's job; perfkit.engines.dpdk_tcp runs them; perfkit.dperf reads dperf's
# configuration files into them)

TCP_MAX_SOCKETS = 1 << 24      # socket table entries (64 B each): 1 GiB at most
TCP_MAX_CLIENT_RANGES = 8
TCP_MAX_SEGMENTS = 1024        # a response goes out in at most this many segments


def _client_ranges(value, field: str, version: int = 4) -> tuple:
    """((first_ip, count), ...): client address ranges, count 1..254, last byte only varies
    (IPv6: ranges share their first 12 bytes)."""
    if isinstance(value, str):
        value = [value]
    out = []
    for item in value:
        if isinstance(item, str):
            ip, _, n = item.partition("+")
            item = (ip, n or 1)
        try:
            ip, n = item
        except (TypeError, ValueError):
            raise ValueError(f"{field}: {item!r} is not (address, count) or 'ADDRESS+COUNT'") from None
        ip = check_lab_ip(ip, field, version)
        n = _int_in(n, field, 1, 254)
        last = int(ipaddress.ip_address(ip)) & 0xff
        if version == 6 and out and ipaddress.ip_address(ip).packed[:12] != ipaddress.ip_address(out[0][0]).packed[:12]:
            raise ValueError(f"{field}: IPv6 ranges {out[0][0]} and {ip} differ before their last 4 bytes")
        if last + n - 1 > (254 if version == 4 else 255):
            raise ValueError(f"{field}: {ip} + {n} addresses passes .254 (only the last byte varies)"
                             if version == 4 else f"{field}: {ip} + {n} addresses pass ...ff (only the last byte varies)")
        out.append((ip, n))
    if not 1 <= len(out) <= TCP_MAX_CLIENT_RANGES:
        raise ValueError(f"{field}: between 1 and {TCP_MAX_CLIENT_RANGES} address ranges, not {len(out)}")
    return tuple(out)


def _bool(value, field: str) -> bool:
    # bool("false") is True: take only real booleans (and 0, 1)
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise ValueError(f"{field}: {value!r} is not true or false")


def _check_tcp_common(self, put) -> None:
    """Fields DpdkHttpServer and DpdkHttpClient share."""
    check_declared(self)   # listen, mss, tos, retries, burst (the client's keepalive_requests, launch_num)
    put("netns", _check_netns(self.netns))
    put("port", check_dpdk_port(self.port, "port", self.netns))
    duration = parse_duration(self.duration, "duration")
    if not 0 < duration <= MAX_DURATION_S:
        raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
    put("duration", duration)
    put("listen_num", _int_in(self.listen_num, "listen_num", 1, 65536 - self.listen))
    put("vlan", _int_in(self.vlan, "vlan", 0, 4094))
    put("tcp_rst", _bool(self.tcp_rst, "tcp_rst"))
    rto = parse_duration(self.retransmit_timeout, "retransmit_timeout")
    if not 0.001 <= rto <= 60:
        raise ValueError(f"retransmit_timeout: {self.retransmit_timeout!r} is out of range 1ms..60s")
    put("retransmit_timeout", rto)
    put("payload_size", _int_in(parse_size(self.payload_size, "payload_size"), "payload_size",
                                0, 1 << 20))
    put("queues", _int_in(self.queues, "queues", 1, DPDK_MAX_QUEUES))


IPV6_MAX_MSS = 1440    # a 1500-byte MTU less 40 (IPv6) and 20 (TCP)


def _mss_family(self, put) -> None:
    """IPv6 headers are 20 bytes longer: an mss above 1440 (the default 1460) becomes 1440."""
    if self.ip_version == 6 and self.mss > IPV6_MAX_MSS:
        put("mss", IPV6_MAX_MSS)


class _IpVersion:
    @property
    def ip_version(self) -> int:
        """4 or 6: the family of the port's address (and of every address of the run)."""
        return 6 if ":" in self.ip else 4


@dataclass(frozen=True)
class DpdkHttpServer(_IpVersion, _DpdkSpec):
    """An HTTP server on a DPDK port with perfkit's own TCP (dperf's server):
    perfkit.Run(DpdkHttpServer(...), engine="dpdk_tcp").

    Each field declares its help, unit and range beside its default (perfkit.fields)."""
    ENGINE: ClassVar[str] = "dpdk_tcp"
    port: str = opt(
        "ring:pk:1", help="the DPDK port (as DpdkFlows)", unit="port number",
        suggestions=("ring:pk:1", "net_memif0,role=server"))
    ip: str = opt(
        "198.18.0.2",
        help=("the server's address (the port's own: ARP and ping answered for it); IPv4 in "
              "198.18.0.0/15 or IPv6 in 2001:2::/48 (then ND and ping -6), every address the same "
              "family"),
        unit="IPv4 address")
    listen: int = opt(
        80, help="TCP ports listen .. listen + listen_num - 1", unit="TCP port", lo=1, hi=65535)
    listen_num: int = opt(
        1, help="TCP ports listen .. listen + listen_num - 1", unit="TCP ports", range_text="1..65536 - listen")
    clients: tuple = opt(
        (("198.18.0.1", 1),),
        help=('client address ranges served, ((first, count), ...) or "ADDR+COUNT"; sockets are an '
              "array indexed by (client address, client port, listen port)"),
        unit="ADDR+COUNT, ... (198.18.0.1+4)", widget="ranges")
    payload_size: int | str = opt(
        64, help='body bytes of the one response, "200 OK" with Content-Length, to every request',
        unit="response body bytes", lo=0, hi=1 << 20, check=False)   # a size with units: _check_tcp_common
    keepalive: bool = opt(
        False, help="False: FIN goes with the response (dperf's fast close); True: the client closes")
    duration: float | str = opt(
        10.0, help="how long to serve", unit=SECONDS, range_text="above 0, at most 24h")
    mss: int = opt(
        1460, help="largest segment sent (the client's MSS option lowers it); IPv6: at most 1440", unit="bytes",
        lo=536, hi=1460)
    tos: int = opt(
        0, help="IPv4 TOS (IPv6 traffic class) of every packet", unit="IPv4 TOS byte", lo=0, hi=255)
    vlan: int = opt(
        0, help="802.1Q VLAN id of every frame (0: untagged); frames of other VLANs are not ours")
    tcp_rst: bool = opt(
        True, help="answer segments for no connection (and SYNs to other ports) with RST")
    retransmit_timeout: float | str = opt(
        1.0, help="stop-and-wait: resend after this, give up after retries", unit=SECONDS, range_text="1ms..60s")
    retries: int = opt(
        3, help="stop-and-wait: resend after this, give up after retries", unit="retransmits", lo=0, hi=16)
    burst: int = like(DpdkFlows, "burst")
    netns: str | None = opt(
        None, help="the DPDK port (as DpdkFlows)", unit="/run/netns/NAME")
    queues: int = opt(
        1,
        help=("workers, one rx/tx queue pair each (dperf's several cpus on a port), each with its own"
              " socket table: a connection must come back on the queue it arrived on (memif and ring "
              "pairs: queue q to q; NICs: RSS)"))

    test = "dpdk_http_server"
    messages_per_second = 0.0

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        _check_tcp_common(self, put)
        put("ip", check_lab_ip(self.ip, "ip"))
        _mss_family(self, put)
        put("clients", _client_ranges(self.clients, "clients", self.ip_version))
        if any(ip == self.ip for ip, _ in self.clients):
            raise ValueError(f"clients: {self.ip} is the server's own address")
        put("keepalive", _bool(self.keepalive, "keepalive"))
        if self.payload_size + 128 > TCP_MAX_SEGMENTS * self.mss:
            raise ValueError(f"payload_size: {self.payload_size} B does not fit in {TCP_MAX_SEGMENTS} "
                             f"segments of mss {self.mss} with the headers")
        if self.sockets > TCP_MAX_SOCKETS:
            raise ValueError(f"clients: {self.sockets} sockets (addresses x 65536 ports x listen_num) "
                             f"pass {TCP_MAX_SOCKETS}: use fewer addresses or listen ports")

    @property
    def sockets(self) -> int:
        return sum(n for _, n in self.clients) * 65536 * self.listen_num

    def response_bytes(self) -> bytes:
        """The response every request gets."""
        conn = "keep-alive" if self.keepalive else "close"
        return (f"HTTP/1.1 200 OK\r\nServer: perfkit\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {self.payload_size}\r\nConnection: {conn}\r\n\r\n").encode() \
            + b"x" * self.payload_size


DPERF_HTTP_METHODS = ("GET", "POST")   # the DPDK client sends these two (dperf's)


@dataclass(frozen=True)
class DpdkHttpClient(_IpVersion, _DpdkSpec):
    """HTTP client load on a DPDK port with perfkit's own TCP (dperf's client):
    perfkit.Run(DpdkHttpClient(...), engine="dpdk_tcp").

    Each field declares its help, unit and range beside its default (perfkit.fields)."""
    ENGINE: ClassVar[str] = "dpdk_tcp"
    port: str = opt(
        "ring:pk:0", help="the DPDK port", unit="port number", suggestions=("ring:pk:0", "net_memif0,role=client"))
    ip: str = opt(
        "198.18.0.1", help="the port's own address (ARP and ping answered for it); IPv4 or IPv6 (as the server)",
        unit="IPv4 address")
    gateway: str | None = opt(
        None,
        help=("the next hop whose MAC frames go to (ARP; IPv6: Neighbor Discovery); default: the "
              "server"),
        unit="IPv4 address; empty: the server")
    gateway_mac: str | None = opt(
        None, help="skip ARP and use this MAC", unit="aa:bb:cc:dd:ee:ff; empty: ARP")
    clients: tuple = opt(
        (("198.18.0.1", 1),), help="source address ranges ((first, count), ...); one range here",
        unit="ADDR+COUNT, ... (198.18.0.1+4)", widget="ranges")
    lport_range: tuple = opt(
        (1024, 65535), help="(first, last) client TCP ports", unit="FIRST-LAST (1024-65535)", widget="pair")
    server: str = opt(
        "198.18.0.2", help="where connections go", unit="IPv4 address")
    listen: int = opt(
        80, help="where connections go", unit="TCP port", lo=1, hi=65535)
    listen_num: int = opt(
        1, help="where connections go", unit="TCP ports", range_text="1..65536 - listen")
    duration: float | str = opt(
        10.0, help="how long to load", unit=SECONDS, range_text="above 0, at most 24h")
    cps: float | str = opt(
        1000, help="new connections per second (target; launched in batches of launch_num)",
        unit="connections/s (1000, 2k, 1.5m)", range_text="above 0, at most 100M")
    cc: int | str = opt(
        0, help="concurrency target: keep this many connections open (keepalive), 0 = none",
        unit="connections (0, 10k); 0: none", range_text="0..client sockets")
    keepalive: float | str = opt(
        0.0, help="seconds between requests on a connection (0: one request per connection)",
        unit="seconds between requests; 0: one request per connection", range_text="0..1h")
    keepalive_requests: int = opt(
        0, help="requests per connection before it closes (0: until the end)", unit="requests; 0: until the end",
        lo=0, hi=1073741824)
    launch_num: int = opt(
        4, help="connections opened together; cps is reached in launches of this many",
        unit="connections per launch", lo=1, hi=DPDK_MAX_BURST)
    slow_start: float | str = opt(
        0.0, help="seconds over which cps rises to its target; wait: seconds before starting", unit=SECONDS,
        range_text="0..600s")
    wait: float | str = opt(
        0.0, help="seconds before starting", unit=SECONDS, range_text="0..600s")
    http_host: str = opt(
        "perfkit", help="the request (GET; POST carries payload_size bytes)", unit="Host header")
    http_path: str = opt(
        "/", help="the request (GET; POST carries payload_size bytes)", unit="/PATH")
    http_method: str = opt(
        "GET", help="the request (GET; POST carries payload_size bytes)", choices=DPERF_HTTP_METHODS,
        check=False)   # any case (get, post): checked in __post_init__
    payload_size: int | str = opt(
        0, help="POST body bytes", unit="POST body bytes", lo=0, hi=1 << 20,
        check=False)   # a size with units: _check_tcp_common
    fast_close: bool = opt(
        False, help="close with RST instead of FIN")
    mss: int = like(DpdkHttpServer, "mss")
    tos: int = like(DpdkHttpServer, "tos")
    vlan: int = like(DpdkHttpServer, "vlan")
    tcp_rst: bool = like(DpdkHttpServer, "tcp_rst")
    retransmit_timeout: float | str = like(DpdkHttpServer, "retransmit_timeout")
    retries: int = like(DpdkHttpServer, "retries")
    burst: int = like(DpdkHttpServer, "burst")
    netns: str | None = opt(
        None, help="the DPDK port", unit="/run/netns/NAME")
    flood: bool = opt(
        False,
        help=("SYN flood: only the first packet of each connection (a SYN at cps), no sockets kept; "
              "SYN-ACKs that come back are answered with RST (tcp_rst)"))
    queues: int = opt(
        1,
        help=("workers, one rx/tx queue pair each; worker k takes slice k of lport_range and "
              "cps/queues, cc/queues (its own sockets: nothing shared between them)"))

    test = "dpdk_http_client"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        _check_tcp_common(self, put)
        put("ip", check_lab_ip(self.ip, "ip"))
        _mss_family(self, put)
        put("server", check_dest_ip(self.server, "server", self.ip_version))
        put("gateway", check_dest_ip(self.gateway or self.server, "gateway", self.ip_version))
        if self.gateway_mac is not None:
            if not _MAC.fullmatch(str(self.gateway_mac)):
                raise ValueError(f"gateway_mac: {self.gateway_mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
            put("gateway_mac", str(self.gateway_mac).lower())
        put("clients", _client_ranges(self.clients, "clients", self.ip_version))
        if len(self.clients) != 1:
            raise ValueError("clients: the client takes one address range")
        if any(ip == self.server for ip, _ in self.clients) or self.ip == self.server:
            raise ValueError(f"server: {self.server} is one of the client's own addresses")
        try:
            lo, hi = (self.lport_range, self.lport_range) if isinstance(self.lport_range, int) \
                else self.lport_range
        except (TypeError, ValueError):
            raise ValueError(f"lport_range: {self.lport_range!r} is not (first, last)") from None
        lo, hi = _int_in(lo, "lport_range", 1, 65535), _int_in(hi, "lport_range", 1, 65535)
        if lo > hi:
            raise ValueError(f"lport_range: {lo} is above {hi}")
        put("lport_range", (lo, hi))
        cps = _si_number(self.cps, "cps")
        if not 0 < cps <= 1e8:
            raise ValueError(f"cps: {self.cps!r} is out of range (above 0, at most 100M)")
        put("cps", cps)
        put("cc", int(_si_number(self.cc, "cc")))
        if self.cc < 0 or self.cc > self.sockets:
            raise ValueError(f"cc: {self.cc} is out of range 0..{self.sockets} (client addresses x "
                             "ports x listen ports)")
        ka = parse_duration(self.keepalive, "keepalive")
        if not 0 <= ka <= 3600:
            raise ValueError(f"keepalive: {self.keepalive!r} is out of range 0..1h")
        put("keepalive", ka)
        if self.cc and not self.keepalive:
            raise ValueError("cc: a concurrency target needs keepalive (an interval between requests)")
        for name in ("slow_start", "wait"):
            v = parse_duration(getattr(self, name), name)
            if not 0 <= v <= 600:
                raise ValueError(f"{name}: {getattr(self, name)!r} is out of range 0..600s")
            put(name, v)
        for name in ("http_host", "http_path"):
            v = str(getattr(self, name))
            if not v or len(v) > 256 or any(c.isspace() or not c.isprintable() for c in v):
                raise ValueError(f"{name}: {v!r} is not 1-256 printable characters without spaces")
            put(name, v)
        if not self.http_path.startswith("/"):
            raise ValueError(f"http_path: {self.http_path!r} does not start with /")
        if str(self.http_method).upper() not in DPERF_HTTP_METHODS:
            raise ValueError(f"http_method: {self.http_method!r} is not one of {', '.join(DPERF_HTTP_METHODS)}")
        put("http_method", str(self.http_method).upper())
        if len(self.request_bytes()) > self.mss:
            raise ValueError(f"payload_size: the request ({len(self.request_bytes())} B) must fit in one "
                             f"segment (mss {self.mss})")
        put("fast_close", _bool(self.fast_close, "fast_close"))
        put("flood", _bool(self.flood, "flood"))
        if self.flood and (self.cc or self.keepalive):
            raise ValueError("flood: a SYN flood keeps no connections: no cc or keepalive with it")
        if self.queues > hi - lo + 1:
            raise ValueError(f"queues: {self.queues} workers need at least as many client ports "
                             f"(lport_range {lo}..{hi})")
        if self.cc and self.cc < self.queues:
            raise ValueError(f"cc: {self.cc} is below queues ({self.queues}): each worker holds its share")
        if self.sockets > TCP_MAX_SOCKETS:
            raise ValueError(f"clients: {self.sockets} sockets (addresses x lport_range x listen_num) "
                             f"pass {TCP_MAX_SOCKETS}: use fewer addresses, ports or listen ports")

    @property
    def sockets(self) -> int:
        lo, hi = self.lport_range
        return sum(n for _, n in self.clients) * (hi - lo + 1) * self.listen_num

    @property
    def messages_per_second(self) -> float:
        return float(self.cps)

    def request_bytes(self) -> bytes:
        """The request every connection sends."""
        head = f"{self.http_method} {self.http_path} HTTP/1.1\r\nHost: {self.http_host}\r\n" \
               "User-Agent: perfkit\r\nAccept: */*\r\n"
        if self.http_method == "POST":
            head += f"Content-Length: {self.payload_size}\r\n"
        return (head + "\r\n").encode() + (b"x" * self.payload_size if self.http_method == "POST" else b"")


def _si_number(value, field: str) -> float:
    """dperf's counts: 100, 2k, 1.5m (m = million)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmM]?)\s*", str(value))
    if not m:
        raise ValueError(f"{field}: cannot read {value!r} as a count (100, 2k, 1.5m)")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]


SPECS.update({cls.__name__: cls for cls in (DpdkHttpServer, DpdkHttpClient)})


def from_dperf(path, netns: str | None = None):
    """The spec a dperf configuration file describes (perfkit.dperf); netns: the lab
    namespace a kernel-facing port (net_af_packet) opens in."""
    from perfkit.dperf import load
    return load(path).to_spec(netns=netns)
