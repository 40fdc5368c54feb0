"""Typed, validated test specs.

A spec is checked completely in Python before anything native starts: a bad
value raises ValueError naming the field and what is allowed.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar

from perfkit.units import Rate, parse_duration, parse_rate, parse_size

# qperf's test names; each runs both ends in one process.
LOCAL_TESTS = ("udp_bw", "udp_lat", "tcp_bw", "tcp_lat")
REMOTE_TESTS = LOCAL_TESTS + ("sctp_bw", "sctp_lat")
DEFAULT_SIZE = {"udp_bw": 64, "udp_lat": 1, "tcp_bw": 64 << 10, "tcp_lat": 1,
                "sctp_bw": 64 << 10, "sctp_lat": 1}
MAX_SIZE = {"udp": 65507, "tcp": 64 << 10, "sctp": 64 << 10}
MAX_FLOWS = 1024
MAX_BATCH = 256
MAX_GSO = 64
MAX_DURATION_S = 24 * 3600
MAX_RATE_PPS = 1e9  # far above any kernel-socket rate; keeps the pacer's arithmetic exact

LAB_NAME = re.compile(r"[a-z0-9]{1,8}")

# Traffic may only go to loopback or to lab hosts (RFC 2544 benchmarking blocks).
LAB_NETS = (ipaddress.ip_network("198.18.0.0/15"), ipaddress.ip_network("2001:2::/48"))


def check_target(host: str, field: str = "host") -> str:
    """The address, if it is loopback or a lab address; else ValueError."""
    try:
        ip = ipaddress.ip_address(str(host).strip())
    except ValueError:
        raise ValueError(f"{field}: {host!r} is not an IPv4 or IPv6 address") from None
    if not (ip.is_loopback or any(ip in net for net in LAB_NETS)):
        raise ValueError(f"{field}: {ip} is not allowed: use loopback (127.0.0.0/8, ::1) "
                         "or a lab host (198.18.0.0/15, 2001:2::/48)")
    return str(ip)


def _int_in(value, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value), 10)
        except ValueError:
            raise ValueError(f"{field}: {value!r} is not a whole number") from None
    if not lo <= value <= hi:
        raise ValueError(f"{field}: {value} is out of range {lo}..{hi}")
    return value


@dataclass(frozen=True)
class _SocketTest:
    """Fields and checks that every socket-engine test shares (see LocalTest)."""
    TESTS: ClassVar[tuple[str, ...]] = LOCAL_TESTS

    test: str = "udp_bw"
    size: int | str | None = None
    rate: Rate | str | float | None = None
    flows: int = 1
    duration: float | str = 10.0
    host: str = "127.0.0.1"
    port: int = 0
    batch: int = 32
    gso: int = 0
    busy_poll: bool = False

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        if self.test not in self.TESTS:
            raise ValueError(f"test: {self.test!r} is not one of {', '.join(self.TESTS)}")
        proto = self.test.split("_")[0]
        size = DEFAULT_SIZE[self.test] if self.size is None else parse_size(self.size, "size")
        if not 1 <= size <= MAX_SIZE[proto]:
            raise ValueError(f"size: {size} bytes is out of range 1..{MAX_SIZE[proto]} for {self.test}")
        put("size", size)
        if self.rate is not None:
            rate = parse_rate(self.rate, "rate")
            if not rate.value > 0:
                raise ValueError(f"rate: must be above 0, not {self.rate!r} (leave it out for no limit)")
            if rate.messages_per_second(size) > MAX_RATE_PPS:
                raise ValueError(f"rate: {self.rate!r} is above {MAX_RATE_PPS:.0e} packets/s "
                                 "(leave it out for no limit)")
            put("rate", rate)
        put("flows", _int_in(self.flows, "flows", 1, MAX_FLOWS))
        if self.flows != 1 and self.test != "udp_bw":
            raise ValueError(f"flows: only udp_bw takes several flows, not {self.test}")
        duration = parse_duration(self.duration, "duration")
        if not 0 < duration <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", duration)
        put("host", check_target(self.host))
        put("port", _int_in(self.port, "port", 0, 65535))
        put("batch", _int_in(self.batch, "batch", 1, MAX_BATCH))
        put("gso", _int_in(self.gso, "gso", 0, MAX_GSO))
        if self.gso > 1 and self.test != "udp_bw":
            raise ValueError(f"gso: only udp_bw sends with UDP GSO, not {self.test}")
        if self.gso * self.size > MAX_SIZE["udp"]:
            raise ValueError(f"gso: {self.gso} datagrams of {self.size} B exceed one UDP send "
                             f"({MAX_SIZE['udp']} B): use at most {MAX_SIZE['udp'] // self.size}")
        if not (isinstance(self.busy_poll, bool) or (isinstance(self.busy_poll, int) and self.busy_poll in (0, 1))):
            # bool("false") is True: take only real booleans
            raise ValueError(f"busy_poll: {self.busy_poll!r} is not true or false")
        put("busy_poll", bool(self.busy_poll))

    @property
    def messages_per_second(self) -> float:
        """The pacing target in messages/s; 0 means unlimited."""
        return self.rate.messages_per_second(self.size) if self.rate else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rate"] = None if self.rate is None else {"value": self.rate.value, "unit": self.rate.unit}
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
        if isinstance(d.get("rate"), dict):
            d["rate"] = Rate(float(d["rate"]["value"]), d["rate"]["unit"])
        return cls(**d)


@dataclass(frozen=True)
class LocalTest(_SocketTest):
    """Both ends of a qperf-style test in one process, over loopback (or a lab host).

    test      udp_bw | udp_lat | tcp_bw | tcp_lat
    size      payload (UDP) or message (TCP) bytes; default per test (64, 1, 64K, 1)
    rate      target rate (1.5Mpps, 100Mbps, ...); None = as fast as possible
    flows     UDP flows (source ports), udp_bw only
    duration  how long to send (10s, 2m, ...)
    host      where both ends bind: loopback or a lab address
    port      the receiving end's port; 0 = any free port
    batch     messages per sendmmsg/recvmmsg (udp_bw)
    gso       udp_bw: datagrams per UDP GSO send (the kernel cuts them; each arrives
              alone); 0 = off, plain sendmmsg with one datagram per message
    busy_poll latency tests: spin on the socket instead of sleeping (50 us, then block)
    lab       run the two ends in the first two hosts of this lab (perfkit.lab): the
              receiving end in h2, the sender in h1, over the lab's link; host then
              only picks the family (an IPv6 host: the lab's IPv6 addresses)
    """
    lab: str | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.lab is not None and not LAB_NAME.fullmatch(str(self.lab)):
            raise ValueError(f"lab: {self.lab!r} is not a lab name (1-8 lowercase letters or digits)")


@dataclass(frozen=True)
class RemoteTest(_SocketTest):
    """The near end of a test whose far end is `perfkit serve` on host (qperf's model).

    The fields are LocalTest's, plus: port is the server's control port (default
    19800), token the shared secret a server off loopback asks for (PERFKIT_TOKEN
    by default; never saved with the run). Tests: qperf's udp_bw udp_lat tcp_bw
    tcp_lat sctp_bw sctp_lat (SCTP where the kernel has it)."""
    TESTS: ClassVar[tuple[str, ...]] = REMOTE_TESTS
    port: int = 19800
    token: str | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("token")
        return d


def from_dict(d: dict):
    """Any spec from its to_dict() form."""
    kinds = {"LocalTest": LocalTest, "RemoteTest": RemoteTest}
    kind = d.get("kind", "LocalTest")
    if kind not in kinds:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(kinds)}")
    return kinds[kind].from_dict(d)
