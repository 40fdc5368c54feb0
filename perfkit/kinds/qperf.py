"""The qperf-style socket tests: LocalTest (both ends here) and RemoteTest (against a
`perfkit serve` host), UDP/TCP/SCTP bandwidth and latency over kernel sockets."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import ClassVar

from perfkit.fields import SECONDS, check_declared, like, opt, whole_number
from perfkit.lab import Lab
from perfkit.spec import (AUTO_GSO, CONTROL_TIMEOUT_S, DEFAULT_SIZE, LAB_NAME, LOCAL_DEFAULT_SIZE, LOCAL_TESTS,
                          MAX_BATCH, MAX_DURATION_S, MAX_FLOWS, MAX_GSO, MAX_MESSAGES, MAX_SIZE, REMOTE_TESTS,
                          STREAM_POLL_SIZE, Serial, WAIT_SERVER_S, check_bool, check_cpu, check_cpu_here,
                          check_sock_buf, check_target, check_timeout, check_wait_server, live_messages_per_second,
                          rate_limit)
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
        cli_help="UDP flows (source ports), udp_bw only", applies={"test": ("udp_bw",)})
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
                  "32)"), advanced=True, applies={"test": ("udp_bw", "tcp_bw", "sctp_bw")})
    gso: int | None = opt(
        None,
        help=("udp_bw: datagrams per UDP GSO send (the kernel cuts them; each arrives alone); 0 = "
              "off, plain sendmmsg with one datagram per message; None = 8 on loopback (fewer if 8 "
              "would pass 65507 B), off on a lab path"),
        unit="datagrams per send", lo=0, hi=MAX_GSO,
        cli_help="udp_bw: datagrams per UDP GSO send, 0 = off (default: 8 on loopback, off in a lab)", advanced=True,
        applies={"test": ("udp_bw",)})
    busy_poll: bool | None = opt(
        None,
        help=("spin on the socket before sleeping: both ends of a latency test (up to 1 ms) and a "
              "bandwidth test's receiving end (50 us); False = never (a latency test then measures as"
              " qperf, whose ends sleep); None = where the end is pinned (loc/rem_cpu_affinity): "
              "either end of a latency test (on two CPUs; True with both on one is refused), a udp_bw"
              " receiver in a lab (off loopback), a tcp_bw reader of messages of 16 KiB or more"), advanced=True)
    loc_cpu_affinity: int | str | None = opt(
        None,
        help=('pin the sending (pinging) end\'s thread to this CPU, as qperf\'s -lca; None or "any" = '
              "where the scheduler puts it"),
        unit="CPU number; empty: any", advanced=True)
    rem_cpu_affinity: int | str | None = opt(
        None, help="the same for the receiving (answering) end, as qperf's -rca", unit="CPU number; empty: any",
        advanced=True)
    messages: int | None = opt(
        None,
        help=("end once the sender has sent this many messages (latency tests: round trips), as "
              "qperf's -n; duration still bounds the test. None = no count"),
        unit="messages (latency: round trips); empty: until the duration ends", advanced=True)
    loc_sock_buf_size: int | str | None = opt(
        None,
        help=("SO_SNDBUF and SO_RCVBUF bytes of the sending (pinging) end's socket, as qperf's -lsb; "
              "None = the kernel's autotuning on a TCP sender or pinger, 8 MiB on UDP sockets"),
        unit="bytes (64K); empty: perfkit's default", advanced=True)
    rem_sock_buf_size: int | str | None = opt(
        None, help="the same for the receiving (answering) end, as qperf's -rsb; None = 8 MiB",
        unit="bytes (64K); empty: perfkit's default", advanced=True)
    access_recv: bool = opt(
        False,
        help=("read every byte received, at both ends, as an application would (qperf's -ar); the "
              "summary's bytes_read counts them. False = the data is not looked at"), advanced=True)

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
        return self._polls(receives, cpu, ipaddress.ip_address(address).is_loopback)

    def _polls(self, receives: bool, cpu: int | None, loopback: bool) -> bool:
        """polls() for an end whose address is loopback or not (the address known later)."""
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
        return self.test == "udp_bw" and not loopback

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
        cli_help="the server sends (pings) and this host receives (answers), as qperf -f1", advanced=True)
    wait_server: float | str = opt(
        WAIT_SERVER_S, help="keep trying a server that is not listening yet this long, as qperf -ws",
        short="-ws",
        cli_help="keep trying a server that is not listening yet this long, as qperf -ws (default 5s)", advanced=True)
    ip_port: int = opt(
        0,
        help=("the data port: where the server listens or receives (flipped UDP: this host); 0 = any,"
              " as qperf -ip"),
        lo=0, hi=65535,
        short="-ip",
        cli_help=("the data port, as qperf -ip: where the server listens or receives (flipped UDP: where this host "
                  "receives); default any free port"), advanced=True)
    loc_timeout: float | str = opt(
        CONTROL_TIMEOUT_S, help="wait this long for the server's answer to a control request, as qperf -lto",
        advanced=True)
    rem_timeout: float | str = opt(
        CONTROL_TIMEOUT_S, help="the server waits this long for this host's next control message, as qperf -rto",
        advanced=True)

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
# the counter groups (perfkit.stats.GROUPS) a stream test writes; a run's frame keeps only these
STREAM_GROUPS = ("traffic", "seq", "latency", "sock", "cpu")
COUNTER_GROUPS = STREAM_GROUPS


def counter_groups(spec) -> tuple[str, ...]:
    """STREAM_GROUPS; udp_bw's sender also the live control's gauge (rate_target)."""
    return STREAM_GROUPS + (("control",) if spec.test == "udp_bw" else ())


def live_rate(spec, value) -> float:
    """run.set_rate(value) of a udp_bw run: the messages/s its sender paces to, value checked as
    the spec's rate is (pps or bps of its size); None: as fast as it can."""
    if spec.test != "udp_bw":
        raise ValueError(f"set_rate: {spec.test} has no live rate (udp_bw only)")
    return live_messages_per_second(value, spec.size, "packets")


LIVE_RATE = {LocalTest: live_rate, RemoteTest: live_rate}   # perfkit.run.Run.set_rate


def plan(spec) -> dict:
    """The socket engine's plan (perfkit.engines.socket): a local test's two workers, or,
    for a RemoteTest, the near end and its perfkit server (perfkit.engines.remote)."""
    if isinstance(spec, RemoteTest):
        return {"engine": "socket", "spec": type(spec).__name__, "handle": "remote",
                "fd_limit": (spec.flows + 64, "flows"), "remote": remote_plan(spec)}
    return {"engine": "socket", "spec": type(spec).__name__, "handle": "sock",
            "fd_limit": (spec.flows + 64, "flows"), "workers": workers_for(spec)}


def _ends(spec: LocalTest) -> tuple[dict, dict]:
    """Where the receiving end and the sender work: both on spec.host, or the
    first two hosts of a lab (receiver in h2, sender in h1)."""
    if spec.lab is None:
        return {"local": (spec.host, spec.port)}, {"local": (spec.host, 0)}
    try:
        lab = Lab.attach(spec.lab)
    except ValueError:
        raise ValueError(f"lab: no lab {spec.lab!r} is up (perfkit lab up; perfkit lab status)") from None
    if len(lab.hosts) < 2:
        raise ValueError(f"lab: {spec.lab} has {len(lab.hosts)} host(s); a test needs two")
    client, server = lab.hosts[0], lab.hosts[1]
    v6 = ":" in spec.host
    addr = (lambda h: h.ipv6) if v6 else (lambda h: h.ipv4)
    return ({"local": (addr(server), spec.port), "netns": server.netns_path},
            {"local": (addr(client), 0), "netns": client.netns_path})


def workers_for(spec: LocalTest) -> list[dict]:
    """The worker list for a local test: the receiving end first, then the sender
    that targets it (peer 0)."""
    server, client = _ends(spec)
    common = {"size": spec.size, "duration": spec.duration, "access_recv": spec.access_recv}
    here = server["local"]
    sender = {**common, **client, "remote": here, "peer": 0, "rate": spec.messages_per_second,
              "count": spec.messages, "sock_buf": spec.loc_sock_buf_size,
              "cpu": check_cpu_here(spec.loc_cpu_affinity, "loc_cpu_affinity")}
    sender["busy_poll"] = spec.polls(False, sender["cpu"], client["local"][0])
    cpu = check_cpu_here(spec.rem_cpu_affinity, "rem_cpu_affinity")
    common = {**common, **server, "cpu": cpu, "sock_buf": spec.rem_sock_buf_size,
              "busy_poll": spec.polls(True, cpu, server["local"][0])}
    if spec.test == "udp_bw":
        return [{**common, "role": "udp_recv", "flows": spec.flows, "batch": spec.batch},
                {**sender, "role": "udp_send", "flows": spec.flows, "batch": spec.batch,
                 "gso": spec.gso}]
    if spec.test == "udp_lat":
        return [{**common, "role": "udp_reflect", "batch": 1},
                {**sender, "role": "udp_ping"}]
    if spec.test == "tcp_bw":
        return [{**common, "role": "tcp_recv"},
                {**sender, "role": "tcp_send", "batch": spec.batch}]
    if spec.test == "tcp_lat":
        return [{**common, "role": "tcp_pong"},
                {**sender, "role": "tcp_ping"}]
    raise ValueError(f"test: the socket engine does not run {spec.test!r}")


def end_fields(spec) -> dict:
    """What both ends of a remote test share (perfkit.engines.remote.end_worker's end)."""
    return {"test": spec.test, "duration": spec.duration, "rate": spec.messages_per_second,
            "count": spec.messages, "batch": spec.batch, "gso": spec.gso, "size": spec.size,
            "flows": spec.flows, "flip": spec.flip, "access_recv": spec.access_recv}


def remote_plan(spec: RemoteTest) -> dict:
    """perfkit.engines.remote.RemoteHandle's plan: the control connection, this host's
    worker, and the prepare request for the server's."""
    cpu = check_cpu_here(spec.loc_cpu_affinity, "loc_cpu_affinity")
    return {
        "host": spec.host, "port": spec.port, "token": spec.token, "wait_server": spec.wait_server,
        "loc_timeout": spec.loc_timeout, "keepalive_s": spec.rem_timeout / 3,
        "cpu": cpu, "sock_buf": spec.loc_sock_buf_size,
        # this host's worker receives when flipped; whether it spins may hang on its address
        # being loopback, known once the control connection is up
        "polls": {"loopback": spec._polls(spec.flip, cpu, True), "other": spec._polls(spec.flip, cpu, False)},
        "end": end_fields(spec),
        # whether the far end polls is decided here, where both ends' CPUs are known (a
        # latency test's two ends on one CPU must not spin): the server answers on spec.host
        "prepare": {"test": spec.test, "size": spec.size, "flows": spec.flows, "duration": spec.duration,
                    "batch": spec.batch, "gso": spec.gso,
                    "busy_poll": spec.polls(not spec.flip, spec.rem_cpu_affinity, spec.host),
                    "cpu": spec.rem_cpu_affinity, "sock_buf": spec.rem_sock_buf_size, "flip": spec.flip,
                    "rate": spec.messages_per_second or None, "messages": spec.messages,
                    "ip_port": spec.ip_port, "access_recv": spec.access_recv, "timeout": spec.rem_timeout}}


def summary_extra(spec, handle, roles) -> dict:
    """Figures beyond perfkit.stats.summarize: qperf's -n, the count asked for."""
    return {"messages": spec.messages} if getattr(spec, "messages", None) else {}


TITLE_HEAD = {RemoteTest: lambda spec: f"{spec.test} to {spec.host}"}   # the dashboard title's first part
LAYOUT = {LocalTest: "socket", RemoteTest: "socket"}   # perfkit.ui.charts.LAYOUTS: the dashboard's charts
# the panel's tasks beside a run: a rate search (udp_bw), a qperf-style sweep (perfkit test --oo)
TASKS = {LocalTest: ("run", "search"), RemoteTest: ("run", "sweep")}
PANEL_ROWS = {RemoteTest: ("server_control",)}   # the panel's conf, quit and serve-here buttons


# ------------------------------------------------------------------ its commands: perfkit local, perfkit test
from perfkit import lab  # noqa: E402 (the command-line part of the kind, kept at its end)
from perfkit.fields import add_option, advanced_group, applies, cluster_option  # noqa: E402

SEARCH_HELP = ("rate search: the highest rate holding CRITERION, by binary search over trials: "
               "zero-loss (RFC 2544 throughput), pdr:0.1%% (tolerated loss), lat:p99<50us "
               "(p50 p90 p99 p999 max mean), cpu or cpu:95%% (an engine worker saturates); join with ','. "
               "--rate is then the upper bound (default: measured by an unpaced first trial), "
               "--duration the length of each trial (default 1s); udp_bw only for perfkit local")

# qperf's -v family, in perfkit.report.VERBOSE's order
VERBOSE_HELP = {"conf": "configuration (the socket tests have none beyond the conf test, as in qperf)",
                "stat": "statistics: -vs the message rate (shown anyway), -vvs each end's bytes and messages",
                "time": "timing: -vt CPU use and cost (shown anyway), -vvt each end's user and kernel "
                        "shares, real and CPU time",
                "used": "parameters used: -vu the time, -vvu every parameter set"}


def _local_parser(sub) -> None:
    loc = sub.add_parser("local", help="run both ends of a test in this process, over loopback")
    loc.add_argument("test", choices=LOCAL_TESTS, help="qperf's test names")
    for name in ("size", "rate", "flows"):
        add_option(loc, LocalTest, name)
    add_option(loc, LocalTest, "duration", default=None)   # None: 10s, or a --search trial's 1s
    count_option(loc)
    add_option(loc, LocalTest, "host")
    loc.add_argument("--lab", nargs="?", const="", metavar="NAME",
                     help="run the ends in hosts h1 (sender) and h2 of a lab (default: the one that is up)")
    for name in ("port", "batch", "gso"):
        add_option(loc, LocalTest, name)
    busy_poll_option(loc, "-rca")
    ends_options(loc, "the sending end", "the receiving end")
    loc.add_argument("--interval", default="1s", help="row interval (default 1s)")
    loc.add_argument("--engine", default=ENGINE[LocalTest], help="engine (see perfkit engines)")
    loc.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
    loc.add_argument("-o", "--save", metavar="FILE.parquet", help="save the run as Parquet")
    cluster_option(loc)
    search_options(loc)


def _test_parser(sub) -> None:
    tst = sub.add_parser("test", help="qperf-style tests against a perfkit server")
    tst.add_argument("host", help="the server: an IPv4 or IPv6 address or a DNS name")
    tst.add_argument("tests", nargs="+", metavar="TEST",
                     help=f"{' '.join(REMOTE_TESTS)}, conf (both hosts), quit (stop the server)")
    for name in ("duration", "size"):   # -t --time, -m --msg-size
        add_option(tst, RemoteTest, name)
    add_option(tst, RemoteTest, "rate")
    add_option(tst, RemoteTest, "flows")
    count_option(tst)
    add_option(tst, RemoteTest, "wait_server", metavar="TIME")
    adv = advanced_group(tst)   # loc_timeout, rem_timeout
    adv.add_argument("-to", "--timeout", metavar="TIME",
                     help="both of the below, as qperf -to (default 30s; qperf's is 5s)")
    adv.add_argument("-lto", "--loc-timeout", metavar="TIME",
                     help="wait this long for the server's answer to a control request, as qperf -lto")
    adv.add_argument("-rto", "--rem-timeout", metavar="TIME",
                     help="the server waits this long for this host's next control message, as qperf -rto")
    add_option(tst, RemoteTest, "ip_port", metavar="PORT")
    add_option(tst, RemoteTest, "flip")
    _output_options(tst)
    tst.add_argument("-oo", "--oo", action="append", default=[], metavar="OPT:FROM:TO:STEP",
                     help="sweep an option, as qperf: msg_size:1:64K:*2, rate:100kpps:1Mpps:+100kpps, "
                          "no_msgs:1000:100000:*10")
    add_option(tst, RemoteTest, "port", type=int)
    add_option(tst, RemoteTest, "token")
    add_option(tst, RemoteTest, "gso")
    busy_poll_option(tst, "-rca, or -lca with -f1")
    ends_options(tst, "this host's worker", "the server's worker")
    tst.add_argument("--interval", default="1s", help="row interval with --json (default 1s)")
    tst.add_argument("--json", action="store_true", help="JSON lines: rows, then a summary per test")
    cluster_option(tst)


def _output_options(parser) -> None:
    """qperf's options for how perfkit test prints its summaries: -ub, -uu, -e, -un, the -v family."""
    parser.add_argument("-ub", "--use-bits-per-sec", action="store_true",
                        help="bandwidth in bits/s (Gb/sec), as qperf -ub")
    parser.add_argument("-uu", "--unify-units", action="store_true",
                        help="whole numbers in base units (bytes/sec, ns), as qperf -uu")
    parser.add_argument("-e", "--precision", default=3, metavar="DIGITS",
                        help="significant digits in the summary, as qperf -e (default 3)")
    parser.add_argument("-un", "--unify-nodes", action="store_true",
                        help="a bandwidth test's two ends named loc_ and rem_ (this host, the server) "
                             "rather than send_ and recv_, as qperf -un")
    verbose_options(parser)


def verbose_options(parser) -> None:
    """qperf's -v family: -v turns on -vc -vs -vt -vu; -vv their -vv forms."""
    parser.add_argument("-v", "--verbose", action="store_true", help="all four below, as qperf -v")
    parser.add_argument("-vv", "--verbose-more", action="store_true", help="all four -vv forms, as qperf -vv")
    for kind in VERBOSE_HELP:
        parser.add_argument(f"-v{kind[0]}", f"--verbose-{kind}", action="store_true",
                            help=f"{VERBOSE_HELP[kind]}, as qperf -v{kind[0]}")
        parser.add_argument(f"-vv{kind[0]}", f"--verbose-more-{kind}", action="store_true",
                            help=f"as qperf -vv{kind[0]}")


def count_option(parser) -> None:
    """-n: the messages field (advanced)."""
    advanced_group(parser).add_argument(
        "-n", "--no-msgs", metavar="N",
        help="end after N messages (latency tests: round trips), as qperf -n; "
             "the time limit still holds (default: no count)")


def ends_options(parser, loc: str, rem: str) -> None:
    """qperf's options for each end (CPU affinity, socket buffers, reading the data), with its
    short names: advanced fields, so under "advanced options"."""
    parser = advanced_group(parser)
    parser.add_argument("-lca", "--loc-cpu-affinity", metavar="CPU",
                        help=f"pin {loc} to this CPU, as qperf -lca (default: any)")
    parser.add_argument("-rca", "--rem-cpu-affinity", metavar="CPU",
                        help=f"pin {rem} to this CPU, as qperf -rca (default: any)")
    parser.add_argument("-ca", "--cpu-affinity", metavar="CPU", help="both of the above, as qperf -ca")
    parser.add_argument("-lsb", "--loc-sock-buf-size", metavar="SIZE",
                        help=f"socket buffers of {loc}'s socket, as qperf -lsb: 64K (default: 8 MiB; "
                             "a TCP sender or pinger: the kernel's autotuning)")
    parser.add_argument("-rsb", "--rem-sock-buf-size", metavar="SIZE",
                        help=f"socket buffers of {rem}'s socket, as qperf -rsb (default 8 MiB)")
    parser.add_argument("-sb", "--sock-buf-size", metavar="SIZE", help="both of the above, as qperf -sb")
    parser.add_argument("-ar", "-ar1", "--access-recv", nargs="?", const="1", default="0", choices=("0", "1"),
                        metavar="0|1", help="1: both ends read every byte they receive, as an application "
                        "would, as qperf -ar (-ar1 and -ar alone: 1; default 0: the data is not looked at)")


def busy_poll_option(parser, pinned: str) -> None:
    """--busy-poll: the busy_poll field (advanced)."""
    advanced_group(parser).add_argument(
        "--busy-poll", nargs="?", const="1", default=None, choices=("0", "1"), metavar="0|1",
        help="1: spin on the socket before sleeping (latency tests: both ends, up to 1 ms; "
             "bandwidth tests: the receiving end, 50 us); 0: never, as qperf (default: where pinned, both ends of "
             f"a latency test (-lca, -rca: two CPUs); {pinned}: a udp_bw receiver off loopback and a tcp_bw "
             "reader of 16 KiB or bigger messages spin)")


def search_options(parser) -> None:
    """--search and its bounds: a rate search instead of one run (perfkit.ratesearch); --converge
    and its bounds: the rate retuned live on the one run (perfkit.converge_cli)."""
    parser.add_argument("--search", metavar="CRITERION", help=SEARCH_HELP)
    applies(parser.add_argument("--low", help="--search: lower bound (default 1%% of the upper)"), search=True)
    applies(parser.add_argument("--resolution", default="1%",
                                help="--search: stop when pass and failure are this close: 1%% of the upper bound "
                                     "(default) or a rate (10kpps)"), search=True)
    applies(parser.add_argument("--max-trials", default=16, help="--search: at most this many trials (default 16)"),
            search=True)
    applies(parser.add_argument("--settle", default="0.5s", help="--search: pause between trials (default 0.5s)"),
            search=True)
    applies(parser.add_argument("--retries", default=0, help="--search: run a failed trial again up to N times "
                                "(default 0); the rate passes if one attempt does"), search=True)
    # live convergence on one run (perfkit.converge_cli), beside the search over trials
    applies(parser.add_argument(
        "--converge", metavar="CRITERION",
        help="retune this one run's rate every --interval (BiTester's convergence) to the highest holding "
             "CRITERION between --converge-low and --rate: keeps-up, zero-loss, cpu, or a threshold 'loss<0.1%%', "
             "'p99<200us' (perfkit local: udp_bw); the converged rate is printed after the summary"),
        test=("udp_bw",))
    applies(parser.add_argument("--converge-low", metavar="RATE",
                                help="--converge: lower bound (default 1%% of --rate)"), converge=True)
    applies(parser.add_argument("--converge-resolution", default="5%", metavar="SHARE",
                                help="--converge: converged when the bounds are this close, a share of the upper "
                                     "(default 5%%)"), converge=True)


def busy_poll_from_args(a) -> bool | None:
    return None if a.busy_poll is None else a.busy_poll == "1"


def ends_from_args(a) -> dict:
    """-ca and -sb set both ends; -lca/-rca and -lsb/-rsb override them for their end."""
    def pick(own, both):
        return own if own is not None else both
    return {"loc_cpu_affinity": pick(a.loc_cpu_affinity, a.cpu_affinity),
            "rem_cpu_affinity": pick(a.rem_cpu_affinity, a.cpu_affinity),
            "loc_sock_buf_size": pick(a.loc_sock_buf_size, a.sock_buf_size),
            "rem_sock_buf_size": pick(a.rem_sock_buf_size, a.sock_buf_size),
            "access_recv": a.access_recv == "1"}


def the_lab(name):
    """--lab NAME, or --lab alone: the one lab that is up."""
    if name is None or name:
        return name
    up = sorted(s["name"] for s in lab.status() if s.get("status") == "up")
    if len(up) != 1:
        raise ValueError(f"lab: {len(up)} labs are up ({', '.join(up) or 'none: perfkit lab up'}); "
                         "name one with --lab NAME")
    return up[0]


def local_from_args(a) -> LocalTest:
    """perfkit local's spec from its parsed arguments."""
    return LocalTest(test=a.test, size=a.size, rate=a.rate, flows=a.flows, duration=a.duration or "10s",
                     host=a.host, port=a.port, batch=a.batch, gso=a.gso,
                     busy_poll=busy_poll_from_args(a), lab=the_lab(a.lab), messages=a.no_msgs, **ends_from_args(a))


def test_plan_args(a) -> dict:
    """perfkit test's checked arguments, before anything runs: the tests with data (not conf
    or quit), how long to wait for the server, each end's control timeout, and the fields
    every RemoteTest takes (perfkit.sweep.plan's keywords)."""
    data_tests = [t for t in a.tests if t not in ("conf", "quit")]
    unknown = [t for t in data_tests if t not in REMOTE_TESTS]
    if unknown:
        raise ValueError(f"test: {unknown[0]!r} is not one of {', '.join(REMOTE_TESTS)}, conf, quit")
    wait = check_wait_server(a.wait_server)   # conf and quit use it too
    timeouts = {end: check_timeout(own if own is not None else a.timeout if a.timeout is not None
                                   else CONTROL_TIMEOUT_S, end)
                for end, own in (("loc_timeout", a.loc_timeout), ("rem_timeout", a.rem_timeout))}
    fields = {"size": a.msg_size, "rate": a.rate, "flows": a.flows, "gso": a.gso, "busy_poll": busy_poll_from_args(a),
              "messages": a.no_msgs, "flip": a.flip, "wait_server": wait, "ip_port": a.ip_port,
              **timeouts, **ends_from_args(a)}
    return {"data_tests": data_tests, "wait": wait, "timeouts": timeouts, "fields": fields}


def cli_header(spec, engine: str) -> str:
    """perfkit local's first line: what is about to run."""
    return (f"perfkit local {spec.test}: {spec.size} B, {spec.rate or 'unlimited'}, "
            f"{spec.flows} flow(s), {spec.duration:g} s"
            f"{f' or {spec.messages:,} messages' if spec.messages else ''} on "
            f"{'lab ' + spec.lab + ' (h1 -> h2)' if spec.lab else spec.host} ({engine} engine)")


def unpaced_flood(spec) -> bool:
    """A udp_bw run with no rate to an address off this host (and outside a lab): it floods."""
    return (spec.test == "udp_bw" and spec.rate is None and getattr(spec, "lab", None) is None
            and not ipaddress.ip_address(spec.host).is_loopback)


CLI_PARSERS = {"local": _local_parser, "test": _test_parser}   # command -> adds its parser to subparsers
CLI_SPECS = {"local": local_from_args}   # command -> its spec from parsed args (perfkit test: test_plan_args)
