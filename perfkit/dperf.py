"""dperf's configuration files, read into perfkit specs, so a dperf job runs unchanged.

    cfg = perfkit.dperf.load("client.conf")     # DperfConfig: what the file says
    spec = cfg.to_spec()                         # DpdkHttpClient or DpdkHttpServer
    perfkit.spec.from_dperf("client.conf")       # the same in one call

The format is dperf's: one keyword per line with its arguments, '#' starts a comment.
Parsing follows dperf's own rules (numbers like 1.5m and 2k, durations like 10s, 2m, 1h,
1.5d, keepalive intervals in us, ms or s). Every keyword of dperf's configuration manual is
known: KEYWORDS runs it, REFUSED names why perfkit does not (KNI). An error
-- a malformed value, a refused keyword, a value the spec refuses -- is one DperfError (a
ValueError) naming the file and line.

Ports are dperf's: a PCI address (0000:01:00.0 or 01:00.0), a bond (bondMODE:POLICY(PCI,
...)), and perfkit's vdevs and ring:NAME:0|1 pair ends; a PCI device absent here is refused
when the run opens it (perfkit.engines.dpdk checks sysfs before EAL starts). Several port
lines pair with the client and server lines in order and share the cpus, as in dperf.
Addresses are any unicast addresses (one family per file).

load() reads regular files only, of at most MAX_BYTES (dperf's are a few KB), as UTF-8 (a
BOM is accepted); parsing takes time linear in the file.
"""
from __future__ import annotations

import ipaddress
import math
import os
import re
import stat
from dataclasses import dataclass, field

from perfkit.kinds.dpdk_tcp import DpdkHttpClient, DpdkHttpServer
from perfkit.spec import DPDK_MAX_QUEUES
from perfkit.units import format_time_us

# dperf's defaults as its code applies them (src/config.h): DEFAULT_DURATION 60 (its manual still
# says 100s; dperf runs 60), RTO_DEFAULT 2 s; a missing tx_burst takes perfkit's own burst (the
# engine's default), not dperf's 8
DPERF_DEFAULTS = {"launch_num": 4, "slow_start": 30.0, "wait": 3.0, "duration": 60.0,
                  "listen": (80, 1), "mss": 1460, "tos": 0, "tcp_rst": True,
                  "protocol": "tcp", "http_host": "dperf", "http_path": "/", "http_method": "GET",
                  "lport_range": (1, 65535), "tx_burst": None, "retransmit_timeout": 2.0}
DEFAULT_CPS = 1000          # dperf's cps when a client gives only cc
KEEPALIVE_REQ_NUM = 32767   # dperf's most requests a connection
HTTP_DATA_MIN = 70          # dperf's smallest HTTP message: a payload_size below is raised to it
HEADERS = {4: 14 + 20 + 20, 6: 14 + 40 + 20}   # Ethernet, IP, TCP: packet_size minus these is the payload
PACKET_SIZE_MAX, JUMBO_PACKET_MAX = 1514, 9724
MAX_BYTES = 1 << 20         # a dperf configuration is a few KB: more is not one
WORD_MAX = 1024             # dperf's longest value (a bond of PCI addresses) is far shorter
CPU_MAX = 8192              # Linux's largest NR_CPUS: `cpu 0-4000000000` must not build a list of that

# Keywords of dperf that perfkit does not run: refused by name, with why.
REFUSED = {
    "kni": "KNI is gone from DPDK (22.11 has no rte_kni): reach the kernel through a tap or af_packet port",
}
PIPELINE_MAX = 100          # dperf's PIPELINE_MAX
CHANGE_DIP_MAX = 65536      # dperf's change_dip list

class DperfError(ValueError):
    """A dperf configuration the parser or the spec refuses; names file and line. Its
    message is one printable line (a file's control characters are escaped)."""

    def __init__(self, msg: str = "", *args):
        super().__init__(_printable(str(msg)), *args)


def _printable(s: str) -> str:
    """s with each unprintable character (newline, escape, NUL...) as its escape."""
    return s if s.isprintable() else "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in s)


@dataclass
class DperfConfig:
    """A dperf configuration file as parsed (before perfkit's own checks)."""
    source: str = "<string>"
    mode: str | None = None
    cpu: list[int] = field(default_factory=list)
    ports: list[tuple] = field(default_factory=list)      # (dev, ip, gateway, gateway_mac)
    clients: list[tuple] = field(default_factory=list)    # (ip, count)
    servers: list[tuple] = field(default_factory=list)    # (ip, count)
    listen: tuple = DPERF_DEFAULTS["listen"]
    duration: float = DPERF_DEFAULTS["duration"]
    cps: float | None = None
    cc: int = 0
    keepalive: float | None = None                        # seconds between requests
    keepalive_requests: int = 0
    launch_num: int = DPERF_DEFAULTS["launch_num"]
    slow_start: float = DPERF_DEFAULTS["slow_start"]
    wait: float = DPERF_DEFAULTS["wait"]
    payload_size: int | None = None
    packet_size: int | None = None
    payload_random: bool = False
    jumbo: bool = False
    protocol: str = DPERF_DEFAULTS["protocol"]
    http_host: str = DPERF_DEFAULTS["http_host"]
    http_path: str = DPERF_DEFAULTS["http_path"]
    http_method: str = DPERF_DEFAULTS["http_method"]
    lport_range: tuple = DPERF_DEFAULTS["lport_range"]
    tos: int = 0
    vlan: int = 0
    mss: int = DPERF_DEFAULTS["mss"]
    retransmit_timeout: float = DPERF_DEFAULTS["retransmit_timeout"]
    tcp_rst: bool = True
    fast_close: bool = False
    flood: bool = False
    disable_ack: bool = False
    quiet: bool = False
    daemon: bool = False
    client_hop: bool = False
    simd512: bool = False
    clear_screen: bool = False
    send_window: int | None = None
    log_level: str | None = None
    socket_mem: tuple | None = None                       # MB per NUMA node (dperf gives it to EAL)
    tx_burst: int | None = DPERF_DEFAULTS["tx_burst"]
    rss: tuple | None = None                              # (l3 | l3l4 | auto, mq_rx_none | mq_rx_rss | l3 | l3l4)
    pipeline: int = 0                                     # requests out a UDP socket (dperf's 0: one)
    change_dip: list = field(default_factory=list)        # (first, step, count): a flood's destinations
    lines: dict = field(default_factory=dict)             # keyword -> line number (first)
    port_lines: list = field(default_factory=list)        # the line of each port, client and server
    client_lines: list = field(default_factory=list)
    server_lines: list = field(default_factory=list)
    change_dip_lines: list = field(default_factory=list)
    vxlans: list = field(default_factory=list)            # (vni, inner_smac, inner_dmac, local, n, remote, n) a port
    vxlan_lines: list = field(default_factory=list)
    # the port lines' devices and addresses, so a repeated one is found in O(1)
    port_devs: set = field(default_factory=set, init=False, repr=False, compare=False)
    port_ips: set = field(default_factory=set, init=False, repr=False, compare=False)

    def error(self, keyword: str | None, msg: str, line: int | None = None) -> DperfError:
        line = line or self.lines.get(keyword)
        where = f"{self.source}:{line}" if line else self.source
        return DperfError(f"{where}: {keyword + ': ' if keyword else ''}{msg}")

    @property
    def version(self) -> int:
        return 6 if self.ports and ":" in self.ports[0][1] else 4

    def to_spec(self, netns: str | None = None):
        """The perfkit spec this configuration runs as. netns: the lab namespace a
        kernel-facing port (net_af_packet) opens in."""
        if self.mode is None:
            raise self.error(None, "no 'mode' line (mode client | server)")
        if not self.ports:
            raise self.error(None, "no 'port' line (port DEVICE ADDRESS GATEWAY [GATEWAY_MAC])")
        if not self.servers:
            raise self.error(None, "no 'server' line (server ADDRESS COUNT)")
        nports = len(self.ports)
        if len(self.servers) != nports:
            raise self.error("server", f"{len(self.servers)} server lines for {nports} ports: one a port, "
                             "in the order of the port lines")
        if self.mode == "client" and len(self.clients) != nports:
            raise self.error("client", f"{len(self.clients)} client lines for {nports} ports: a client takes one "
                             "a port, in the order of the port lines")
        ncpu = max(1, len(self.cpu))
        if ncpu % nports:
            raise self.error("cpu", f"{ncpu} CPUs for {nports} ports: the cpus are divided among the ports "
                             "(a multiple of the port count)")
        queues = ncpu // nports
        if queues > DPDK_MAX_QUEUES:
            raise self.error("cpu", f"{ncpu} CPUs: at most {DPDK_MAX_QUEUES} workers (queues) a port")
        for k, (srv, n) in enumerate(self.servers):
            if n > queues:
                raise self.error("server", f"{n} server addresses for {queues} cpus of port {k + 1}: one cpu "
                                 "an address at least", self.server_lines[k])
        self._check_vxlan(queues)
        size, raw = self.message_size()
        # dperf's several cpus on a port: one worker a cpu, each on its own queue pair
        first = self.ports[0]
        common = dict(port=first[0], ip=first[1], netns=netns, queues=queues, listen=self.listen[0],
                      listen_num=self.listen[1], mss=self.mss, tos=self.tos, vlan=self.vlan,
                      tcp_rst=self.tcp_rst, server_num=self.servers[0][1], cpus=tuple(self.cpu),
                      retransmit_timeout=self.retransmit_timeout, raw=raw,
                      protocol="udp" if self.protocol == "udp" else "tcp", vxlan=tuple(self.vxlans))
        if self.tx_burst is not None:
            common["burst"] = min(self.tx_burst, 256)
        try:
            if self.mode == "server":
                more = tuple((dev, ip, gw, mac, (), srv, n) for (dev, ip, gw, mac), (srv, n)
                             in zip(self.ports[1:], self.servers[1:]))
                clients = self.clients or [(first[2], 1)]
                # dperf's payload_size is the whole response, headers and body
                return DpdkHttpServer(clients=tuple(clients), server=self.servers[0][0], more_ports=more,
                                      response_size=size, keepalive=self.keepalive is not None,
                                      duration=self.duration, **common)
            cps, cc = self.cps, self.cc
            if not cps and not cc:
                raise self.error(None, "no 'cps' or 'cc' line: the client needs a target (cps 1k, cc 10k)")
            cps = cps or DEFAULT_CPS
            keepalive = self.keepalive
            if self.flood and keepalive is not None:
                # dperf's flood with keepalive: each of cc connections sends its first packet again
                # every interval -- a SYN rate of cc / interval
                if cc:
                    cps = max(cps, cc / max(keepalive, 1e-6))
                keepalive, cc = None, 0
            if keepalive == 0:
                keepalive = 1e-6    # dperf's 0: the next request as the response comes
            more = tuple((dev, ip, gw, mac, ((c, cn),), srv, n) for (dev, ip, gw, mac), (c, cn), (srv, n)
                         in zip(self.ports[1:], self.clients[1:], self.servers[1:]))
            return DpdkHttpClient(gateway=first[2], gateway_mac=first[3], clients=(self.clients[0],),
                                  more_ports=more, lport_range=self.lport_range, server=self.servers[0][0],
                                  cps=min(cps, 1e8), cc=cc, keepalive=keepalive or 0.0,
                                  keepalive_requests=self.keepalive_requests,
                                  launch_num=min(self.launch_num, 256), slow_start=self.slow_start,
                                  wait=self.wait, http_host=self.http_host, http_path=self.http_path,
                                  http_method=self.http_method,
                                  # dperf runs slow_start + duration: the ramp is added, not inside
                                  duration=self.duration + self.slow_start,
                                  payload_size=size if self.http_method == "POST" and not raw else 0,
                                  request_size=size if self.http_method != "POST" or raw else 0,
                                  fast_close=self.fast_close, flood=self.flood,
                                  disable_ack=self.disable_ack, pipeline=max(1, self.pipeline),
                                  change_dip=tuple(self.change_dip), **common)
        except DperfError:
            raise
        except ValueError as e:
            raise self._spec_error(e) from None

    def _check_vxlan(self, queues: int) -> None:
        """dperf's checks of vxlan lines: one a port, one server address a cpu, no vlan or rss."""
        if not self.vxlans:
            return
        if len(self.vxlans) != len(self.ports):
            raise self.error("vxlan", f"{len(self.vxlans)} vxlan lines for {len(self.ports)} ports: one a port, "
                             "in the order of the port lines")
        if self.vlan:
            raise self.error("vxlan", "not with vlan (dperf refuses both)")
        if self.rss is not None:
            raise self.error("vxlan", "not with rss (dperf's manual: 'vxlan' cannot be used with 'rss')")
        for k, (srv, n) in enumerate(self.servers):
            if n != queues:
                raise self.error("vxlan", f"{n} server addresses for {queues} cpus of port {k + 1}: vxlan "
                                 "takes one server address a cpu", self.server_lines[k])

    def check_cpus(self, allowed) -> None:
        """The cpu line against the CPUs this process may use (allowed), before anything starts:
        dperf pins its workers to them."""
        bad = sorted(set(self.cpu) - set(allowed))
        if bad:
            raise self.error("cpu", f"CPU {', '.join(map(str, bad[:8]))}{' ...' if len(bad) > 8 else ''} not among "
                             f"the CPUs this process may use ({', '.join(map(str, sorted(allowed)))})")

    def message_size(self) -> tuple[int, bool]:
        """(bytes, raw) of each message as dperf sizes it: payload_size is the whole message
        (headers and body), raised to HTTP_DATA_MIN; packet_size less the Ethernet, IP and
        TCP headers, and below HTTP_DATA_MIN a raw, non-HTTP payload. (0, False): neither
        given, perfkit's own request and response."""
        if self.packet_size is not None:
            size = self.packet_size - HEADERS[self.version]
            if size < 1:
                raise self.error("packet_size", f"{self.packet_size} B leaves no payload after "
                                 f"{HEADERS[self.version]} B of headers")
            return size, size < HTTP_DATA_MIN
        if self.payload_size is not None:
            return max(self.payload_size, HTTP_DATA_MIN), False
        return 0, False

    _FIELD_KEYWORD = {"port": "port", "ip": "port", "gateway": "port", "gateway_mac": "port",
                      "netns": "port", "clients": "client", "server": "server", "server_num": "server",
                      "more_ports": "port", "listen": "listen", "queues": "cpu",
                      "listen_num": "listen", "payload_size": "payload_size", "request_size": "payload_size",
                      "response_size": "payload_size", "cpus": "cpu", "burst": "tx_burst",
                      "cc": "cc",
                      "keepalive": "keepalive", "keepalive_requests": "keepalive", "flood": "flood"}

    def _spec_error(self, e: ValueError) -> DperfError:
        fieldname = str(e).split(":", 1)[0].split("[", 1)[0]
        kw = self._FIELD_KEYWORD.get(fieldname, fieldname)
        if fieldname in ("payload_size", "request_size", "response_size") and "packet_size" in self.lines:
            kw = "packet_size"
        if kw not in self.lines:
            kw = None
        msg = str(e)
        if kw == fieldname:  # "cc: cc: ..." reads once
            msg = msg.split(":", 1)[1].strip()
        line = None
        m = re.match(r"more_ports\[(\d+)\]", str(e))
        if m and kw == "port" and int(m.group(1)) + 1 < len(self.port_lines):
            line = self.port_lines[int(m.group(1)) + 1]
        return self.error(kw, msg, line)


# ------------------------------------------------------------------ values

def _number(s: str, what: str = "a number", float_ok: bool = True, suffix: bool = True) -> float:
    """dperf's numbers: 100, 2k, 1.5m (k = 1000, m = 1000000)."""
    pat = r"([0-9]+(?:\.[0-9]*)?)" if float_ok else r"([0-9]+)"
    m = re.fullmatch(pat + (r"([kKmM]?)" if suffix else "()"), s)
    if not m:
        raise ValueError(f"{s!r} is not {what}")
    v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]
    if not math.isfinite(v):   # int(inf) would raise OverflowError, not a ValueError
        raise ValueError(f"{s!r} is too large for {what}")
    return v


def _whole(s: str, what: str, lo: int, hi: int, suffix: bool = False) -> int:
    v = _number(s, what, float_ok=suffix, suffix=suffix)
    if v != int(v) or not lo <= v <= hi:
        raise ValueError(f"{s!r} is not {what} in {lo}..{hi}")
    return int(v)


def _duration(s: str) -> float:
    """dperf's duration: 100, 100s, 3.5m, 2h, 1.5d."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?)([smhd]?)", s)
    v = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)] if m else 0.0
    if v < 1:
        raise ValueError(f"{s!r} is not a duration (100s, 3.5m, 2h, 1.5d; at least 1 s)")
    if not math.isfinite(v):
        raise ValueError(f"{s!r} is too long a duration")
    return v


def _interval(s: str) -> float:
    """keepalive's interval: 0us, 10us, 1ms, 60s."""
    m = re.fullmatch(r"([0-9]+)(us|ms|s)", s)
    if not m:
        raise ValueError(f"{s!r} is not an interval (10us, 1ms, 60s)")
    try:
        return int(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
    except OverflowError:   # an int past float's range
        raise ValueError(f"{s!r} is too long an interval") from None


def _ip(s: str, what: str) -> str:
    """An IPv4 or IPv6 address, as dperf's port, client and server lines take them."""
    try:
        ip = ipaddress.ip_address(s)
    except ValueError:
        raise ValueError(f"{s!r} is not an IP address ({what}, IPv4 or IPv6)") from None
    return str(ip)


def _family(c, ip: str, what: str) -> None:
    """Every address of a configuration has the family of the first one given (each line
    keeps the rule, so any address given so far tells the family: O(1) a line)."""
    have = c.ports[0][1] if c.ports else c.clients[0][0] if c.clients else c.servers[0][0] if c.servers else None
    if have is not None and (":" in ip) != (":" in have):
        raise ValueError(f"{ip} is IPv{6 if ':' in ip else 4} ({what}) but the configuration's addresses are "
                         f"IPv{4 if ':' in ip else 6}: one family per run")


_MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")
_PCI = re.compile(r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_BOND = re.compile(r"bond([0-6]):([0-3])\(([^()]+)\)")


def _cpus(args: list[str]) -> list[int]:
    ranges = []
    for a in args:
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", a)
        if not m:
            raise ValueError(f"{a!r} is not a CPU number or range (0 2-3)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise ValueError(f"{a!r}: {lo} is above {hi}")
        if hi >= CPU_MAX:
            raise ValueError(f"{a!r}: CPU {hi} is above {CPU_MAX - 1}")
        ranges.append((lo, hi))
    out: list[int] = []
    seen: set[int] = set()
    for lo, hi in ranges:   # at most CPU_MAX distinct numbers: a repeat is found before the list grows past it
        for cpu in range(lo, hi + 1):
            if cpu in seen:
                raise ValueError("a CPU is listed twice")
            seen.add(cpu)
            out.append(cpu)
    return out


# ------------------------------------------------------------------ keywords

def _nargs(args, lo, hi, syntax):
    if not lo <= len(args) <= hi:
        raise ValueError(f"takes {syntax}")


def _kw_mode(c, a):
    _nargs(a, 1, 1, "client | server")
    if a[0] not in ("client", "server"):
        raise ValueError(f"{a[0]!r} is not client or server")
    c.mode = a[0]


def _kw_cpu(c, a):
    _nargs(a, 1, 256, "CPU numbers or ranges (cpu 0 2-3)")
    c.cpu = _cpus(a)


def _device(dev: str) -> str:
    """dperf's device: a PCI address (either form), a bond bondMODE:POLICY(PCI,...), or
    perfkit's vdev / ring:NAME:0|1 (the spec checks the rest)."""
    if dev.startswith("bond"):
        m = _BOND.fullmatch(dev)
        members = m.group(3).split(",") if m else []
        if not m or not all(_PCI.fullmatch(p) for p in members):
            raise ValueError(f"{dev!r} is not a bond: bondMODE:POLICY(PCI,PCI,...), mode 0-6, policy 0-3")
        if len(set(members)) != len(members):
            raise ValueError(f"{dev}: a PCI device is in the bond twice")
    return dev


def _kw_port(c, a):
    _nargs(a, 3, 4, "PCI|BOND|VDEV ADDRESS GATEWAY [GATEWAY_MAC]")
    dev = _device(a[0])
    ip, gw = _ip(a[1], "address"), _ip(a[2], "gateway")
    _family(c, ip, "address")
    if (":" in ip) != (":" in gw):
        raise ValueError(f"{gw} is IPv{6 if ':' in gw else 4} (gateway) but the address {ip} is "
                         f"IPv{6 if ':' in ip else 4}: one family per run")
    if ip == gw:
        raise ValueError(f"the address and the gateway are both {ip}")
    if dev in c.port_devs:
        raise ValueError(f"{dev} is on another port line too")
    if ip in c.port_ips:
        raise ValueError(f"{ip} is another port's address too")
    mac = None
    if len(a) == 4:
        if not _MAC.fullmatch(a[3]):
            raise ValueError(f"{a[3]!r} is not a MAC address")
        mac = a[3].lower()
    c.ports.append((dev, ip, gw, mac))
    c.port_devs.add(dev)
    c.port_ips.add(ip)


def _range(a):
    _nargs(a, 2, 2, "ADDRESS COUNT")
    ip = _ip(a[0], "address")
    n = _whole(a[1], "an address count", 1, 254)
    return ip, n


def _kw_client(c, a):
    r = _range(a)
    _family(c, r[0], "address")
    c.clients.append(r)


def _kw_server(c, a):
    r = _range(a)
    _family(c, r[0], "address")
    c.servers.append(r)


def _kw_listen(c, a):
    _nargs(a, 2, 2, "PORT COUNT")
    port = _whole(a[0], "a TCP port", 1, 65535)
    n = _whole(a[1], "a port count", 1, 65535)
    if port + n > 65536:
        raise ValueError(f"ports {port}..{port + n - 1} pass 65535")
    c.listen = (port, n)


def _kw_duration(c, a):
    _nargs(a, 1, 1, "a duration (100s, 3.5m, 2h, 1.5d)")
    c.duration = _duration(a[0])


def _kw_cps(c, a):
    _nargs(a, 1, 1, "a number (10k, 1.5m)")
    c.cps = _number(a[0], "a connection rate (100, 2k, 1.5m)")
    if c.cps > 1e8:
        raise ValueError(f"{a[0]}: at most 100m connections a second")


def _kw_cc(c, a):
    _nargs(a, 1, 1, "a number (10k, 1.5m)")
    c.cc = int(_number(a[0], "a connection count (100, 2k, 1.5m)"))
    if not 1 <= c.cc < 1 << 31:
        raise ValueError(f"{a[0]}: 1..2147483647 connections")


def _kw_keepalive(c, a):
    _nargs(a, 1, 2, "INTERVAL [REQUESTS] (keepalive 1ms, keepalive 60s 100)")
    c.keepalive = _interval(a[0])
    if len(a) == 2:
        c.keepalive_requests = int(_number(a[1], "a request count (100, 2k)"))
        if c.keepalive_requests > KEEPALIVE_REQ_NUM:
            raise ValueError(f"{a[1]}: at most {KEEPALIVE_REQ_NUM} requests a connection")
        if c.keepalive == 0 and c.keepalive_requests:
            raise ValueError("a request count needs an interval above 0")


def _kw_keepalive_request_interval(c, a):
    """dperf's older spelling of keepalive's interval (its test files use it)."""
    _nargs(a, 1, 1, "INTERVAL (10us, 1ms, 60s)")
    c.keepalive = _interval(a[0])


def _kw_launch_num(c, a):
    _nargs(a, 1, 1, "a number")
    c.launch_num = _whole(a[0], "a launch batch", 1, 1 << 20)


def _kw_slow_start(c, a):
    _nargs(a, 1, 1, "seconds (10-600)")
    c.slow_start = float(_whole(a[0], "seconds", 10, 600))


def _kw_wait(c, a):
    _nargs(a, 1, 1, "seconds")
    c.wait = float(_whole(a[0], "seconds", 0, 600))


def _kw_payload_size(c, a):
    _nargs(a, 1, 1, "bytes")
    c.payload_size = _whole(a[0], "a payload size", 1, 1 << 20, suffix=True)


def _kw_packet_size(c, a):
    _nargs(a, 1, 1, "bytes (0-1514; jumbo: 9724)")
    c.packet_size = _whole(a[0], "a packet size", 0, JUMBO_PACKET_MAX, suffix=True)


def _kw_protocol(c, a):
    _nargs(a, 1, 1, "http | tcp | udp")
    if a[0] not in ("http", "tcp", "udp"):
        raise ValueError(f"{a[0]!r} is not http, tcp or udp")
    c.protocol = a[0]


def _kw_string(name, most):
    def kw(c, a):
        _nargs(a, 1, 1, f"one string without spaces (1-{most} characters)")
        if len(a[0]) > most:
            raise ValueError(f"longer than {most} characters")
        setattr(c, name, a[0])
    return kw


def _kw_http_method(c, a):
    _nargs(a, 1, 1, "GET | POST")
    if a[0].upper() not in ("GET", "POST"):
        raise ValueError(f"{a[0]!r} is not GET or POST")
    c.http_method = a[0].upper()


def _kw_lport_range(c, a):
    _nargs(a, 1, 2, "FIRST [LAST]")
    lo = _whole(a[0], "a TCP port", 1, 65535)
    hi = _whole(a[1], "a TCP port", 1, 65535) if len(a) == 2 else 65535
    if lo > hi:
        raise ValueError(f"{lo} is above {hi}")
    c.lport_range = (lo, hi)


def _kw_tos(c, a):
    _nargs(a, 1, 1, "0-255 or 0x00-0xff")
    m = re.fullmatch(r"0[xX]([0-9a-fA-F]+)|([0-9]+)", a[0])   # ASCII only: int() reads other scripts' digits
    if not m:
        raise ValueError(f"{a[0]!r} is not a number (0-255 or 0x00-0xff)")
    v = int(m.group(1), 16) if m.group(1) else int(m.group(2), 10)
    if not 0 <= v <= 255:
        raise ValueError(f"{v} is out of range 0..255")
    c.tos = v


def _kw_vlan(c, a):
    _nargs(a, 1, 1, "a VLAN id (1-4094)")
    c.vlan = _whole(a[0], "a VLAN id", 1, 4094)


def _kw_vxlan(c, a):
    _nargs(a, 7, 7, "VNI INNER_SMAC INNER_DMAC LOCAL_VTEP NUM REMOTE_VTEP NUM")
    vni = _whole(a[0], "a VNI", 0, 0xffffff)
    for mac in a[1:3]:
        if not _MAC.fullmatch(mac):
            raise ValueError(f"{mac!r} is not a MAC address")
    local, remote = _ip(a[3], "local VTEP"), _ip(a[5], "remote VTEP")
    for ip in (local, remote):
        if ":" in ip:
            raise ValueError(f"{ip}: the VTEPs (the underlay) are IPv4, as dperf's")
    c.vxlans.append((vni, a[1].lower(), a[2].lower(), local, _whole(a[4], "a VTEP count", 1, 254), remote,
                     _whole(a[6], "a VTEP count", 1, 254)))


def _kw_mss(c, a):
    _nargs(a, 1, 1, "bytes")
    c.mss = _whole(a[0], "an MSS", 536, 9000)


def _kw_retransmit_timeout(c, a):
    _nargs(a, 1, 1, "seconds (1-300) or an interval (500ms)")
    s = a[0]
    c.retransmit_timeout = float(_whole(s, "seconds", 1, 300)) if s.isdigit() else _interval(s)


def _kw_tcp_rst(c, a):
    _nargs(a, 1, 1, "0 | 1")
    if a[0] not in ("0", "1"):
        raise ValueError(f"{a[0]!r} is not 0 or 1")
    c.tcp_rst = a[0] == "1"


def _kw_flag(name):
    def kw(c, a):
        _nargs(a, 0, 0, "no arguments")
        setattr(c, name, True)
    return kw


def _kw_fast_close(c, a):
    _nargs(a, 0, 1, "[0 | 1]")
    if a and a[0] not in ("0", "1"):
        raise ValueError(f"{a[0]!r} is not 0 or 1")
    c.fast_close = not a or a[0] == "1"


def _kw_jumbo(c, a):
    """jumbo [MTU]: packet_size may reach 9724; perfkit's segments stay at mss."""
    _nargs(a, 0, 1, "[MTU (9000-9710)]")
    if a:
        _whole(a[0], "an MTU", 9000, 9710)
    c.jumbo = True


def _kw_rss(c, a):
    """dperf's rss [l3|l3l4|auto] [mq_rx_none|mq_rx_rss|l3|l3l4]: how several cpus share a
    port. perfkit gives each cpu a queue pair with its own sockets and client ports; the port
    brings a connection back to its queue by itself (memif and ring pairs: queue q to q)
    or by the PMD's RSS over IP and TCP (set up whenever a port that has it gets several
    queues), so every form is accepted and recorded."""
    _nargs(a, 0, 2, "[l3 | l3l4 | auto] [mq_rx_none | mq_rx_rss]")
    if a and a[0] not in ("l3", "l3l4", "auto"):
        raise ValueError(f"{a[0]!r} is not l3, l3l4 or auto")
    if len(a) == 2 and a[1] not in ("mq_rx_none", "mq_rx_rss") + (("l3", "l3l4") if a[0] == "auto" else ()):
        raise ValueError(f"{a[1]!r} is not mq_rx_none or mq_rx_rss")
    c.rss = (a[0] if a else "l3", a[1] if len(a) == 2 else "mq_rx_rss")


def _kw_tx_burst(c, a):
    _nargs(a, 1, 1, "a number (1-1024)")
    c.tx_burst = _whole(a[0], "a burst", 1, 1024)


def _kw_socket_mem(c, a):
    """dperf's EAL --socket-mem (MB a NUMA node): recorded; perfkit sizes EAL's memory with
    its own option (perfkit dperf --mem)."""
    _nargs(a, 1, 1, "MB a NUMA node (socket_mem 40960,0)")
    if not re.fullmatch(r"[0-9]+(,[0-9]+)*", a[0]):
        raise ValueError(f"{a[0]!r} is not n0,n1,... (MB a NUMA node)")
    c.socket_mem = tuple(int(x) for x in a[0].split(","))


def _kw_log_level(c, a):
    _nargs(a, 1, 1, "error | warning | info | debug (or 4-8)")
    if a[0] not in ("error", "err", "warning", "warn", "info", "debug") and not re.fullmatch(r"[0-8]", a[0]):
        raise ValueError(f"{a[0]!r} is not error, warning, info or debug")
    c.log_level = a[0]


def _kw_send_window(c, a):
    _nargs(a, 1, 1, "packets (2-16)")
    c.send_window = _whole(a[0], "a send window", 2, 16)


def _kw_pipeline(c, a):
    _nargs(a, 1, 1, f"requests out a socket (0-{PIPELINE_MAX})")
    c.pipeline = _whole(a[0], "a pipeline depth", 0, PIPELINE_MAX)


def _kw_change_dip(c, a):
    """change_dip FIRST STEP COUNT (a line each range): a flood's destinations."""
    _nargs(a, 3, 3, "FIRST STEP COUNT (change_dip 198.18.1.1 1 16)")
    ip = _ip(a[0], "change_dip's first address")
    _family(c, ip, "change_dip")
    if c.change_dip and (":" in ip) != (":" in c.change_dip[0][0]):
        raise ValueError(f"{ip}: change_dip's addresses are one family")
    step = _whole(a[1], "a step", 1, 1 << 32)
    count = _whole(a[2], "an address count", 1, CHANGE_DIP_MAX)
    if sum(n for *_, n in c.change_dip) + count > CHANGE_DIP_MAX:
        raise ValueError(f"more than {CHANGE_DIP_MAX} change_dip addresses (dperf's most)")
    c.change_dip.append((ip, step, count))


def _kw_refused(kw):
    def refuse(c, a):
        raise ValueError(f"not run by perfkit: {REFUSED[kw]}")
    return refuse


KEYWORDS = {
    "mode": _kw_mode, "cpu": _kw_cpu, "port": _kw_port, "client": _kw_client, "server": _kw_server,
    "listen": _kw_listen, "duration": _kw_duration, "cps": _kw_cps, "cc": _kw_cc,
    "keepalive": _kw_keepalive, "keepalive_request_interval": _kw_keepalive_request_interval,
    "launch_num": _kw_launch_num, "slow_start": _kw_slow_start,
    "wait": _kw_wait, "payload_size": _kw_payload_size, "packet_size": _kw_packet_size,
    "payload_random": _kw_flag("payload_random"), "jumbo": _kw_jumbo, "protocol": _kw_protocol,
    "http_host": _kw_string("http_host", 127), "http_path": _kw_string("http_path", 255),
    "http_method": _kw_http_method, "lport_range": _kw_lport_range, "tos": _kw_tos, "vlan": _kw_vlan, "mss": _kw_mss,
    "retransmit_timeout": _kw_retransmit_timeout, "tcp_rst": _kw_tcp_rst, "fast_close": _kw_fast_close,
    "quiet": _kw_flag("quiet"), "daemon": _kw_flag("daemon"), "tx_burst": _kw_tx_burst, "flood": _kw_flag("flood"),
    "rss": _kw_rss, "client_hop": _kw_flag("client_hop"), "simd512": _kw_flag("simd512"),
    "clear_screen": _kw_flag("clear_screen"), "socket_mem": _kw_socket_mem, "log_level": _kw_log_level,
    "send_window": _kw_send_window, "pipeline": _kw_pipeline, "change_dip": _kw_change_dip,
    "disable_ack": _kw_flag("disable_ack"),
    "vxlan": _kw_vxlan,
    **{kw: _kw_refused(kw) for kw in REFUSED},
}
REPEATABLE = {"port", "client", "server", "change_dip", "vxlan"}
# dperf's client keywords; a server file may hold them (dperf reads and ignores them there)
CLIENT_ONLY = {"cps", "cc", "flood", "launch_num", "slow_start", "wait", "http_host", "http_path",
               "http_method", "lport_range", "fast_close", "client_hop", "pipeline", "change_dip"}
# client keywords a server file may not give: dperf refuses these there
SERVER_REFUSES = {"wait", "slow_start", "http_host", "http_path", "pipeline", "change_dip"}


def parse(text: str, source: str = "<string>") -> DperfConfig:
    """A DperfConfig from the text of a dperf configuration file."""
    c = DperfConfig(source=source)
    if text.startswith("\ufeff"):   # a UTF-8 byte order mark some editors write
        text = text[1:]
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kw, *args = words = line.split()
        longest = max(words, key=len)
        if len(longest) > WORD_MAX:
            raise DperfError(f"{source}:{no}: {longest[:20]}...: {len(longest):,} characters in one word "
                             f"(at most {WORD_MAX})")
        where = f"{source}:{no}: {kw}"
        handler = KEYWORDS.get(kw)
        if handler is None:
            raise DperfError(f"{where}: unknown keyword (dperf's: {', '.join(sorted(KEYWORDS))})")
        if kw in c.lines and kw not in REPEATABLE:
            raise DperfError(f"{where}: given twice (first on line {c.lines[kw]})")
        try:
            handler(c, args)
        except (ValueError, ArithmeticError) as e:
            raise DperfError(f"{where}: {e}") from None
        c.lines.setdefault(kw, no)
        if kw in REPEATABLE:
            getattr(c, f"{kw}_lines").append(no)
    if c.mode is None:
        raise DperfError(f"{source}: no 'mode' line (mode client | server)")
    if c.mode == "server":
        for kw in sorted(SERVER_REFUSES & set(c.lines)):
            raise DperfError(f"{source}:{c.lines[kw]}: {kw}: a client keyword in a server configuration")
    if c.pipeline:   # dperf's config_check_pipeline
        where = f"{source}:{c.lines['pipeline']}: pipeline"
        if c.protocol != "udp":
            raise DperfError(f"{where}: several requests out at once is protocol udp's (TCP sends one at a time)")
        if c.keepalive is None:
            raise DperfError(f"{where}: needs keepalive (keepalive 0us: the next request as an answer comes)")
        if not c.flood and c.keepalive:
            raise DperfError(f"{where}: needs keepalive 0us (an answer lets the next request go) or flood")
    if c.change_dip and not c.flood:   # dperf's config_check_change_dip
        raise DperfError(f"{source}:{c.lines['change_dip']}: change_dip: a flood's destinations: needs flood")
    if c.payload_size is not None and c.packet_size is not None:
        raise DperfError(f"{source}:{c.lines['packet_size']}: packet_size: both payload_size and packet_size are set")
    if c.packet_size is not None and c.packet_size > (JUMBO_PACKET_MAX if c.jumbo else PACKET_SIZE_MAX):
        raise DperfError(f"{source}:{c.lines['packet_size']}: packet_size: {c.packet_size} B is above "
                         f"{PACKET_SIZE_MAX} (jumbo: {JUMBO_PACKET_MAX})")
    return c


def load(path) -> DperfConfig:
    """Parse a dperf configuration file: a regular file of at most MAX_BYTES, UTF-8 text.
    Every refusal is one DperfError naming the file (and the line of a bad byte)."""
    source = str(path)
    data = _read(path, source)
    try:   # a BOM decodes to U+FEFF, which parse() drops
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        # the line as parse() counts them: splitlines over the valid text before the bad byte
        no = len((data[:e.start].decode("utf-8", "replace") + "x").splitlines())
        raise DperfError(f"{source}:{no}: not UTF-8 text (byte 0x{data[e.start]:02x})") from None
    return parse(text, source=source)


def _read(path, source: str) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES. A folder, device, FIFO or socket is
    refused before it is opened (a FIFO would block, /dev/zero never end); what is read is
    bounded even when the size stat gives is wrong (files in /proc say 0)."""
    limit = f"{MAX_BYTES >> 20} MiB"
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise DperfError(f"{source}: a folder, not a dperf configuration file")
        if not stat.S_ISREG(st.st_mode):
            raise DperfError(f"{source}: not a regular file (a device, FIFO or socket): a dperf configuration "
                             "is a file")
        if st.st_size > MAX_BYTES:
            raise DperfError(f"{source}: {st.st_size:,} bytes: a dperf configuration is at most {limit}")
        # O_NONBLOCK: a FIFO put in the file's place since the stat cannot block the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise DperfError(f"{source}: not a regular file (it changed while being opened)")
            chunks, size = [], 0
            while size <= MAX_BYTES:
                chunk = os.read(fd, MAX_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise DperfError(f"{source}: no such file") from None
    except OSError as e:
        raise DperfError(f"{source}: cannot be read: {e.strerror or e}") from None
    if size > MAX_BYTES:
        raise DperfError(f"{source}: more than {limit}: a dperf configuration is at most {limit}")
    return b"".join(chunks)


# ------------------------------------------------------------------ dperf's output layout

# dperf's per-second and total blocks (its src/net_stats.c): its names, its lines, its grouping.
# Every name has its counter (tcpTx..icmpTx: frames handed to the transmit queue, as dperf
# counts them; a name without one would print "-", never a made-up 0). The values are dperf's: bits without the 4-byte FCS perfkit's bytes
# count, pktTx with the frames the port did not take (dropTx), a server's http2XX the responses
# it sent. perfkit's own JSON and polars columns keep perfkit's names and meanings (bytes_tx
# with FCS, pkts_tx what the port took).
FCS_BYTES = 4
LAYOUT = (
    (("pktRx", "pkts_rx"), ("pktTx", "dperf_pkt_tx"), ("bitsRx", "dperf_bits_rx"), ("bitsTx", "dperf_bits_tx"),
     ("dropTx", "drop_tx")),
    (("tcpRx", "tcp_rx"), ("tcpTx", "tcp_tx"), ("udpRx", "udp_rx"), ("udpTx", "udp_tx")),
    (("arpRx", "arp_rx"), ("arpTx", "arp_tx"), ("icmpRx", "icmp_rx"), ("icmpTx", "icmp_tx")),
    (("tosRx", "tos_rx"), ("otherRx", "other_rx"), ("badRx", "bad_rx")),
    (("synRx", "syn_rx"), ("synTx", "syn_tx"), ("finRx", "fin_rx"), ("finTx", "fin_tx"),
     ("rstRx", "rst_rx"), ("rstTx", "rst_tx")),
    (("synRt", "retrans_syn"), ("finRt", "retrans_fin"), ("ackRt", "retrans_ack"), ("pushRt", "retrans_push")),
    (("tcpDrop", "tcp_drop"), ("udpDrop", "udp_drop"), ("ackDup", "ack_dup")),
    (("skOpen", "sock_open"), ("skClose", "sock_close"), ("skCon", "sock_current"), ("skErr", "sock_error"),
     ("rtt(us)", "rtt_us")),
    (("httpGet", "http_get"), ("httpPost", "http_post"), ("http2XX", "http_2xx"), ("httpErr", "http_err")),
    (("ierrors", "nic_ierrors"), ("oerrors", "nic_oerrors"), ("imissed", "nic_imissed")),
)
# dperf's line for a non-HTTP payload (packet_size under 70 bytes) in place of the http one
RAW_LINE = (("tcpReq", "http_req"), ("tcpRsp", "http_resp"))
# protocol udp: its requests that got no answer in place of TCP's retransmits
UDP_LINE = (("udpRt", "udp_rt"),)
GAUGES = {"sock_current"}
# what dperf's names are made of, from perfkit's counters (a dperf name's key -> (counter, scale))
DERIVED = {"dperf_bits_rx": (("bytes_rx", 8), ("pkts_rx", -8 * FCS_BYTES)),
           "dperf_bits_tx": (("bytes_tx", 8), ("pkts_tx", -8 * FCS_BYTES)),
           "dperf_pkt_tx": (("pkts_tx", 1), ("drop_tx", 1))}


def layout(mode: str = "client", raw: bool = False, keepalive: bool = False, udp: bool = False) -> tuple:
    """dperf's lines for this side: rtt(us) only on a client without keep-alive (as dperf
    prints it), tcpReq/tcpRsp in place of the HTTP line for a raw payload, udpRt in place of
    the retransmits with protocol udp."""
    lines = list(LAYOUT)
    if mode == "server" or keepalive:
        lines[7] = lines[7][:4]
    if raw:
        lines[8] = RAW_LINE
    if udp:
        lines[5] = UDP_LINE
    return tuple(lines)


def _cell(name: str, v) -> str:
    text = "-" if v is None else (f"{v:,.1f}" if isinstance(v, float) else f"{v:,}")
    return f"{name:<7} {text:<18}"


def _block(values: dict, lines=LAYOUT) -> str:
    return "\n".join(" ".join(_cell(name, values.get(key)) for name, key in line).rstrip() for line in lines)


def _count(row: dict, key: str, per_interval: bool) -> int:
    if per_interval and key not in GAUGES:
        return int(round(row.get(f"{key}_per_s", 0.0) * row.get("interval_s", 0.0)))
    return int(row.get(key, 0))


def _values(row: dict, per_interval: bool, mode: str = "client") -> dict:
    out = {}
    for line in (*LAYOUT, RAW_LINE, UDP_LINE):
        for _, key in line:
            if key is None:
                continue
            if key == "rtt_us":   # dperf's: the first-packet RTT's mean, one decimal
                n, total = row.get("rtt_count", 0), row.get("rtt_sum_ns", 0)
                v = row.get("rtt_mean_us") if per_interval else (total / n / 1e3 if n else None)
                out[key] = round(v, 1) if v is not None else 0.0
            elif key in DERIVED:
                out[key] = max(0, sum(_count(row, k, per_interval) * f for k, f in DERIVED[key]))
            else:
                out[key] = _count(row, key, per_interval)
    if mode == "server":   # a server answers each request it serves: its tcpReq are its tcpRsp
        out["http_req"] = out["http_resp"] = out["http_2xx"]
    return out


def second_label(row: dict) -> int:
    """dperf's `seconds`: where the interval starts, from 0 (a short last row keeps its own
    second; no label repeats)."""
    return int(max(0.0, row.get("time_s", 0.0) - row.get("interval_s", 0.0)) + 1e-6)


def seconds_block(row: dict, mode: str = "client", raw: bool = False, keepalive: bool = False,
                  udp: bool = False, prefix: str = "") -> str:
    """dperf's block for one row: what happened in that interval (cpuUsage: each worker's)."""
    cpus = [row[k] for k in sorted((k for k in row if k.startswith("cpu_pct_w")), key=lambda k: int(k[9:]))]
    usage = " ".join(f"{c:<4.0f}" for c in cpus) if cpus else f"{row.get('cpu_pct', 0.0):.0f}"
    head = f"seconds {second_label(row):<18} cpuUsage {usage}".rstrip()
    text = f"\n{head}\n{_block(_values(row, True, mode), layout(mode, raw, keepalive, udp))}"
    return "\n".join(prefix + line if line else line for line in text.split("\n")) if prefix else text


def total_block(row: dict, mode: str = "client", raw: bool = False, keepalive: bool = False,
                udp: bool = False) -> str:
    """dperf's closing block: totals (the last row's cumulative counters)."""
    return ("\n-----------------------\nperfkit dperf: test finished\n-----------------------\n"
            f"\nTotal Numbers:\n{_block(_values(row, False, mode), layout(mode, raw, keepalive, udp))}"
            "\n-----------------------")


def active_seconds(rows) -> float:
    """The time the side was active: from the start of its first row with traffic to the end
    of its last (a server's wait for its client and the idle tail are not in it)."""
    busy = [r for r in rows if r.get("pkts_rx_per_s", 0) or r.get("pkts_tx_per_s", 0)]
    if not busy:
        return 0.0
    return busy[-1].get("time_s", 0.0) - (busy[0].get("time_s", 0.0) - busy[0].get("interval_s", 0.0))


def summary_lines(row: dict, summary: dict, active_s: float | None = None) -> str:
    """perfkit's view of a TCP/HTTP run: connections and requests per second over the
    active time (active_s: active_seconds(rows); else the senders' time), errors by class,
    response-time percentiles."""
    secs = active_s or summary.get("duration_s") or row.get("time_s") or 0.0
    g = lambda k: row.get(k, 0)  # noqa: E731
    lines = [f"{summary.get('test', 'dperf')}:"]
    if secs:
        lines.append(f"    {'conn_rate':<13} =  {g('sock_open') / secs:,.0f} /sec over {secs:.3g} s")
        lines.append(f"    {'req_rate':<13} =  {g('http_resp') / secs:,.0f} /sec" if g("http_resp")
                     else f"    {'req_rate':<13} =  {(g('http_get') + g('http_post')) / secs:,.0f} /sec")
    lines.append(f"    {'connections':<13} =  {g('sock_open'):,} opened, {g('sock_close'):,} closed, "
                 f"{g('sock_error'):,} errors, {g('sock_current'):,} open at the end")
    lines.append(f"    {'http':<13} =  {g('http_2xx'):,} 2xx, {g('http_3xx'):,} 3xx, {g('http_4xx'):,} 4xx, "
                 f"{g('http_5xx'):,} 5xx, {g('http_err'):,} failed")
    errs = {k: g(k) for k in ("err_connect", "err_timeout", "err_reset", "err_read") if g(k)}
    if errs:
        lines.append(f"    {'errors':<13} =  " + ", ".join(f"{v:,} {k[4:]}" for k, v in errs.items()))
    rt = g("retrans_syn") + g("retrans_fin") + g("retrans_ack") + g("retrans_push")
    lines.append(f"    {'retransmits':<13} =  {rt:,} ({g('retrans_syn'):,} syn, {g('retrans_fin'):,} fin, "
                 f"{g('retrans_push'):,} data)")
    if g("udp_tx") or g("udp_rx"):   # protocol udp: its datagrams, the requests unanswered
        lines.append(f"    {'udp':<13} =  {g('udp_tx'):,} sent, {g('udp_rx'):,} received, {g('udp_rt'):,} "
                     f"unanswered, {g('udp_drop'):,} dropped")
    if g("vxlan_drop"):   # perfkit's own count (dperf has none): VXLAN refused at decapsulation
        lines.append(f"    {'vxlan':<13} =  {g('vxlan_drop'):,} dropped (cut, bad outer UDP sum, no I flag or "
                     "another VNI)")
    if summary.get("rtt_count"):
        lines.append(f"    {'first_rtt':<13} =  mean {format_time_us(summary['rtt_mean_us'])}  max "
                     f"{format_time_us(summary['rtt_max_us'])} ({summary['rtt_count']:,} handshakes)")
    if summary.get("lat_count"):
        t = {k: format_time_us(summary[f"lat_{k}_us"]) for k in ("p50", "p99", "p999", "max")}
        lines.append(f"    {'response':<13} =  p50 {t['p50']}  p99 {t['p99']}  p99.9 {t['p999']}  max {t['max']}")
    if "cpu_pct" in summary:
        lines.append(f"    {'cpu':<13} =  {summary['cpu_pct']:.0f}% of one core")
    return "\n".join(lines)


def from_dperf(path, netns: str | None = None):
    """The spec a dperf configuration file describes; netns: the lab namespace a
    kernel-facing port (net_af_packet) opens in."""
    return load(path).to_spec(netns=netns)
