"""SocketReflect: the far end of UDP flows on kernel sockets (`perfkit reflect --engine socket`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from perfkit.fields import SECONDS, check_declared, opt
from perfkit.spec import DPDK_MODES, MAX_DURATION_S, MAX_FLOWS, MAX_SIZE, Serial, check_netns, check_target
from perfkit.units import parse_duration


@dataclass(frozen=True)
class SocketReflect(Serial):
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
        cli_help="socket engine: the UDP port to serve (default 9, where perfkit flows sends)",
        applies={"engine": ("socket",)})
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
        put("netns", check_netns(self.netns))

    size = MAX_SIZE["udp"]          # the receive buffer: any datagram fits
    messages_per_second = 0.0

    @property
    def test(self) -> str:
        return "udp_bw" if self.mode == "rxonly" else "udp_reflect"


# ------------------------------------------------------------------ the kind
SPECS = (SocketReflect,)
ENGINE = {SocketReflect: "socket"}   # when perfkit.Run is given none
# the counter groups (perfkit.stats.GROUPS) it writes: a stream test's (qperf.STREAM_GROUPS)
COUNTER_GROUPS = ("traffic", "seq", "latency", "sock", "cpu")


def plan(spec) -> dict:
    """The socket engine's plan (perfkit.engines.socket): the far end alone, a sink or a
    reflector on host:port."""
    return {"engine": "socket", "spec": type(spec).__name__, "handle": "sock",
            "workers": [{"role": "udp_recv" if spec.mode == "rxonly" else "udp_reflect",
                         "local": (spec.host, spec.port), "size": spec.size, "flows": spec.flows,
                         "batch": 32, "duration": spec.duration, "netns": spec.netns}]}
# Its own dashboard: what arrives and, reversing, goes back, with the sequence errors and the
# one-way latency perfkit's header gives (a sender's charts would show send drops it never has).
_RATE = {"tickformat": "~s", "rangemode": "tozero"}
LAYOUTS = {"socket_reflect": (
    ("packets/s", _RATE, [("rx pkt/s", "pkts_rx_per_s", "#ff7f0e"), ("sent back pkt/s", "pkts_tx_per_s", "#1f77b4")]),
    ("bits/s", _RATE, [("rx bit/s", "bits_rx_per_s", "#ff7f0e"), ("sent back bit/s", "bits_tx_per_s", "#1f77b4")]),
    ("one-way latency (µs)", {"type": "log"},
     [("p50 µs", "lat_p50_us", "#2ca02c"), ("p99 µs", "lat_p99_us", "#d62728"), ("max µs", "lat_max_us", "#9467bd")]),
    ("loss (%)", {"rangemode": "tozero"}, [("loss %", "loss_pct", "#d62728")]),
    ("sequence errors/s", _RATE,
     [("lost/s", "seq_lost_per_s", "#d62728"), ("reordered/s", "seq_reorder_per_s", "#ff7f0e"),
      ("duplicates/s", "seq_dup_per_s", "#e377c2"), ("socket errors/s", "sock_error_per_s", "#8c564b")]),
    ("engine CPU (% of one core)", {"rangemode": "tozero"}, [("cpu % (all workers)", "cpu_pct", "#17becf")]),
)}
LAYOUT = {SocketReflect: "socket_reflect"}   # the dashboard's charts: its own, above
TASKS = {SocketReflect: ("run",)}    # the panel's tasks
