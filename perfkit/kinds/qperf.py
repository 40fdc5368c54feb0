"""The qperf-style socket tests: LocalTest (both ends here) and RemoteTest (against a
`perfkit serve` host), UDP/TCP/SCTP bandwidth and latency over kernel sockets."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import ClassVar

from perfkit.fields import SECONDS, check_declared, like, opt, whole_number
from perfkit.spec import (AUTO_GSO, CONTROL_TIMEOUT_S, DEFAULT_SIZE, LAB_NAME, LOCAL_DEFAULT_SIZE, LOCAL_TESTS,
                          MAX_BATCH, MAX_DURATION_S, MAX_FLOWS, MAX_GSO, MAX_MESSAGES, MAX_SIZE, REMOTE_TESTS,
                          STREAM_POLL_SIZE, Serial, WAIT_SERVER_S, check_bool, check_cpu, check_sock_buf,
                          check_target, check_timeout, check_wait_server, rate_limit)
from perfkit.units import Rate, parse_duration, parse_size

_int_in = whole_number   # value as an int in lo..hi, else ValueError naming the field


@dataclass(frozen=True)
class _SocketTest(Serial):
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
            put("rate", rate_limit(self.rate, size, "packets"))
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
        put("busy_poll", None if self.busy_poll is None else check_bool(self.busy_poll, "busy_poll"))
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
        put("access_recv", check_bool(self.access_recv, "access_recv"))

    def polls(self, receives: bool, cpu: int | None, address: str) -> bool:
        """Whether an end working on address spins on its socket before it sleeps (a ping-pong
        end up to 1 ms after its send, a receiver 50 us after its last arrival): as busy_poll
        says, or, busy_poll left out, where the end has a CPU of its own (pinned: -lca, -rca)
        and it is either end of a latency test (not both pinned to one CPU), a udp_bw
        receiver off loopback (a lab link) or a tcp_bw reader of STREAM_POLL_SIZE messages
        or more. --busy-poll 0 measures as qperf does.
        Polling spares an end the wake-up that is most of a small round trip, and a receiver
        the wake-ups its sender's CPU runs; the figures: see bench/RESULTS-notes.md#busy-polling-latency-ends
        and #busy-polling-receivers."""
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
        peer off the CPU until its spin ends (see bench/RESULTS-notes.md#busy-polling-latency-ends).
        Every test runs on this machine (loopback or a lab): one number, one CPU."""
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
        object.__setattr__(self, "flip", check_bool(self.flip, "flip"))
        for end in ("loc_timeout", "rem_timeout"):
            object.__setattr__(self, end, check_timeout(getattr(self, end), end))
        object.__setattr__(self, "wait_server", check_wait_server(self.wait_server))

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("token")
        return d


# ------------------------------------------------------------------ the kind
SPECS = (LocalTest, RemoteTest)
ENGINE = {LocalTest: "socket", RemoteTest: "socket"}   # when perfkit.Run is given none


def summary_extra(spec, handle, roles) -> dict:
    """Figures beyond perfkit.stats.summarize: qperf's -n, the count asked for."""
    return {"messages": spec.messages} if getattr(spec, "messages", None) else {}


TITLE_HEAD = {RemoteTest: lambda spec: f"{spec.test} to {spec.host}"}   # the dashboard title's first part
LAYOUT = {LocalTest: "socket", RemoteTest: "socket"}   # perfkit.ui.charts.LAYOUTS: the dashboard's charts
# the panel's tasks beside a run: a rate search (udp_bw), a qperf-style sweep (perfkit test --oo)
TASKS = {LocalTest: ("run", "search"), RemoteTest: ("run", "sweep")}
PANEL_ROWS = {RemoteTest: ("server_control",)}   # the panel's conf, quit and serve-here buttons
