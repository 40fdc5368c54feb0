"""dperf's configuration files, read into perfkit specs, so a dperf job runs unchanged.

    cfg = perfkit.dperf.load("client.conf")     # DperfConfig: what the file says
    spec = cfg.to_spec()                         # DpdkHttpClient or DpdkHttpServer
    perfkit.spec.from_dperf("client.conf")       # the same in one call

The format is dperf's: one keyword per line with its arguments, '#' starts a
comment. Parsing follows dperf's own rules (numbers like 1.5m and 2k, durations
like 10s/2m/1h/1.5d, keepalive intervals in us/ms/s). Every error -- an unknown,
malformed, repeated or not-yet-supported keyword, and a value the spec refuses --
is one DperfError (a ValueError) naming the file and line.

Differences from dperf, on purpose: `port` takes a DPDK vdev string or a
ring:NAME:0|1 pair end (perfkit runs EAL without PCI), and addresses must be lab
addresses (198.18.0.0/15 or 2001:2::/48; one family per file): perfkit sends only
into namespaces it creates.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from perfkit.kinds.dpdk_tcp import DpdkHttpClient, DpdkHttpServer
from perfkit.spec import DPDK_MAX_QUEUES
from perfkit.units import format_time_us

DPERF_DEFAULTS = {"launch_num": 4, "slow_start": 30.0, "wait": 3.0, "duration": 100.0,
                  "listen": (80, 1), "mss": 1460, "tos": 0, "tcp_rst": True,
                  "protocol": "tcp", "http_host": "dperf", "http_path": "/", "http_method": "GET",
                  "lport_range": (1, 65535), "tx_burst": 8}

# Keywords dperf has that perfkit does not run (yet): a clear error, not silence.
UNSUPPORTED = {
    "daemon": "perfkit runs in the foreground (or in a notebook)",
    "socket_mem": "perfkit sizes EAL memory itself (perfkit.engines.dpdk.EalOptions)",
    "pipeline": "UDP pipelining is not built",
    "packet_size": "use payload_size",
    "payload_random": "random payloads are not built",
    "jumbo": "jumbo frames are not built",
    "vxlan": "VXLAN is not built",
    "kni": "KNI is not built (and was removed from DPDK)",
    "change_dip": "a flood's destination list is not built",
    "client_hop": "client hops are not built",
}


class DperfError(ValueError):
    """A dperf configuration the parser or the spec refuses; names file and line."""


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
    protocol: str = DPERF_DEFAULTS["protocol"]
    http_host: str = DPERF_DEFAULTS["http_host"]
    http_path: str = DPERF_DEFAULTS["http_path"]
    http_method: str = DPERF_DEFAULTS["http_method"]
    lport_range: tuple = DPERF_DEFAULTS["lport_range"]
    tos: int = 0
    vlan: int = 0
    mss: int = DPERF_DEFAULTS["mss"]
    retransmit_timeout: float | None = None
    tcp_rst: bool = True
    fast_close: bool = False
    flood: bool = False
    quiet: bool = False
    tx_burst: int = DPERF_DEFAULTS["tx_burst"]
    rss: tuple | None = None                              # (l3 | l3l4 | auto, mq_rx_none | mq_rx_rss)
    lines: dict = field(default_factory=dict)             # keyword -> line number (first)

    def error(self, keyword: str | None, msg: str) -> DperfError:
        line = self.lines.get(keyword)
        where = f"{self.source}:{line}" if line else self.source
        return DperfError(f"{where}: {keyword + ': ' if keyword else ''}{msg}")

    def to_spec(self, netns: str | None = None):
        """The perfkit spec this configuration runs as. netns: the lab namespace a
        kernel-facing port (net_af_packet) opens in."""
        if self.mode is None:
            raise self.error(None, "no 'mode' line (mode client | server)")
        if not self.ports:
            raise self.error(None, "no 'port' line (port DEVICE ADDRESS GATEWAY [GATEWAY_MAC])")
        if len(self.ports) != 1:
            raise self.error("port", f"{len(self.ports)} ports: perfkit runs one port per dperf run for now")
        if len(self.cpu) > DPDK_MAX_QUEUES:
            raise self.error("cpu", f"{len(self.cpu)} CPUs: at most {DPDK_MAX_QUEUES} workers (queues) per port")
        if self.protocol != "http" and self.protocol != "tcp":
            raise self.error("protocol", f"{self.protocol}: only tcp/http are built (not udp yet)")
        if not self.servers:
            raise self.error(None, "no 'server' line (server ADDRESS COUNT)")
        if len(self.servers) != 1 or self.servers[0][1] != 1:
            raise self.error("server", "perfkit's TCP serves one address per port for now (server ADDRESS 1)")
        dev, ip, gateway, gateway_mac = self.ports[0]
        server_ip = self.servers[0][0]
        # dperf's several cpus on one port: one worker per cpu, each on its own queue pair
        common = dict(port=dev, netns=netns, queues=max(1, len(self.cpu)), listen=self.listen[0], listen_num=self.listen[1],
                      duration=self.duration, mss=self.mss, tos=self.tos, vlan=self.vlan, tcp_rst=self.tcp_rst,
                      burst=min(self.tx_burst, 256))
        if self.retransmit_timeout is not None:
            common["retransmit_timeout"] = self.retransmit_timeout
        try:
            if self.mode == "server":
                if ip != server_ip:
                    raise self.error("server", f"{server_ip} is not the port's address {ip} "
                                     "(perfkit's server listens on the port's own address)")
                clients = self.clients or [(gateway, 1)]
                return DpdkHttpServer(ip=ip, clients=tuple(clients),
                                      payload_size=self.payload_size or 0,
                                      keepalive=self.keepalive is not None, **common)
            if self.cps is None:
                raise self.error(None, "no 'cps' line: the client needs a connection rate (cps 1k)")
            if len(self.clients) != 1:
                raise self.error("client", "the client takes one 'client' line per port")
            return DpdkHttpClient(ip=ip, gateway=gateway, gateway_mac=gateway_mac,
                                  clients=tuple(self.clients), lport_range=self.lport_range,
                                  server=server_ip, cps=self.cps, cc=self.cc,
                                  keepalive=self.keepalive or 0.0,
                                  keepalive_requests=self.keepalive_requests,
                                  launch_num=self.launch_num, slow_start=self.slow_start,
                                  wait=self.wait, http_host=self.http_host, http_path=self.http_path,
                                  http_method=self.http_method, payload_size=self.payload_size or 0,
                                  fast_close=self.fast_close, flood=self.flood, **common)
        except DperfError:
            raise
        except ValueError as e:
            raise self._spec_error(e) from None

    _FIELD_KEYWORD = {"port": "port", "ip": "port", "gateway": "port", "gateway_mac": "port",
                      "netns": "port", "clients": "client", "server": "server", "listen": "listen",
                      "listen_num": "listen", "payload_size": "payload_size", "cc": "cc",
                      "keepalive": "keepalive", "keepalive_requests": "keepalive", "flood": "flood"}

    def _spec_error(self, e: ValueError) -> DperfError:
        fieldname = str(e).split(":", 1)[0]
        kw = self._FIELD_KEYWORD.get(fieldname, fieldname)
        if kw not in self.lines:
            kw = None
        msg = str(e)
        if kw == fieldname:  # "cc: cc: ..." reads once
            msg = msg.split(":", 1)[1].strip()
        return self.error(kw, msg)


# ------------------------------------------------------------------ values

def _number(s: str, what: str = "a number", float_ok: bool = True, suffix: bool = True) -> float:
    """dperf's numbers: 100, 2k, 1.5m (k = 1000, m = 1000000)."""
    pat = r"([0-9]+(?:\.[0-9]+)?)" if float_ok else r"([0-9]+)"
    m = re.fullmatch(pat + (r"([kKmM]?)" if suffix else "()"), s)
    if not m:
        raise ValueError(f"{s!r} is not {what}")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]


def _whole(s: str, what: str, lo: int, hi: int, suffix: bool = False) -> int:
    v = _number(s, what, float_ok=suffix, suffix=suffix)
    if v != int(v) or not lo <= v <= hi:
        raise ValueError(f"{s!r} is not {what} in {lo}..{hi}")
    return int(v)


def _duration(s: str) -> float:
    """dperf's duration: 100, 100s, 3.5m, 2h, 1.5d."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)", s)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{s!r} is not a duration (100s, 3.5m, 2h, 1.5d)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _interval(s: str) -> float:
    """keepalive's interval: 10us, 1ms, 60s."""
    m = re.fullmatch(r"([0-9]+)(us|ms|s)", s)
    if not m:
        raise ValueError(f"{s!r} is not an interval (10us, 1ms, 60s)")
    return int(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


def _ip(s: str, what: str) -> str:
    """An IPv4 or IPv6 address, as dperf's port, client and server lines take them."""
    try:
        ip = ipaddress.ip_address(s)
    except ValueError:
        raise ValueError(f"{s!r} is not an IP address ({what}, IPv4 or IPv6)") from None
    return str(ip)


def _family(c, ip: str, what: str) -> None:
    """Every address of a configuration has the family of the first one given."""
    have = {a for p in c.ports for a in p[1:3]} | {a for a, _ in c.clients + c.servers}
    if have and (":" in ip) != (":" in next(iter(have))):
        raise ValueError(f"{ip} is IPv{6 if ':' in ip else 4} ({what}) but the configuration's addresses are "
                         f"IPv{4 if ':' in ip else 6}: one family per run")


_MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")


def _cpus(args: list[str]) -> list[int]:
    out: list[int] = []
    for a in args:
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", a)
        if not m:
            raise ValueError(f"{a!r} is not a CPU number or range (0 2-3)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise ValueError(f"{a!r}: {lo} is above {hi}")
        out.extend(range(lo, hi + 1))
    if len(set(out)) != len(out):
        raise ValueError("a CPU is listed twice")
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


def _kw_port(c, a):
    _nargs(a, 3, 4, "DEVICE ADDRESS GATEWAY [GATEWAY_MAC]")
    dev = a[0]
    if re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]", dev) or dev.startswith("bond"):
        raise ValueError(f"{dev}: PCI devices and bonds are not used by perfkit (EAL runs without PCI): "
                         "give a vdev (net_af_packet0,iface=IF, net_memif0,...) or ring:NAME:0|1")
    ip, gw = _ip(a[1], "address"), _ip(a[2], "gateway")
    _family(c, ip, "address")
    if (":" in ip) != (":" in gw):
        raise ValueError(f"{gw} is IPv{6 if ':' in gw else 4} (gateway) but the address {ip} is "
                         f"IPv{6 if ':' in ip else 4}: one family per run")
    if ip == gw:
        raise ValueError(f"the address and the gateway are both {ip}")
    mac = None
    if len(a) == 4:
        if not _MAC.fullmatch(a[3]):
            raise ValueError(f"{a[3]!r} is not a MAC address")
        mac = a[3].lower()
    c.ports.append((dev, ip, gw, mac))


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
    _nargs(a, 1, 1, "a duration (100s, 3.5m, 2h)")
    c.duration = _duration(a[0])


def _kw_cps(c, a):
    _nargs(a, 1, 1, "a number (10k, 1.5m)")
    c.cps = _number(a[0], "a connection rate (100, 2k, 1.5m)")
    if c.cps <= 0:
        raise ValueError("must be above 0")


def _kw_cc(c, a):
    _nargs(a, 1, 1, "a number (10k, 1.5m)")
    c.cc = int(_number(a[0], "a connection count (100, 2k, 1.5m)"))


def _kw_keepalive(c, a):
    _nargs(a, 1, 2, "INTERVAL [REQUESTS] (keepalive 1ms, keepalive 60s 100)")
    c.keepalive = _interval(a[0])
    if len(a) == 2:
        c.keepalive_requests = _whole(a[1], "a request count", 0, 1 << 30, suffix=True)
        if c.keepalive == 0 and c.keepalive_requests:
            raise ValueError("a request count needs an interval above 0")


def _kw_launch_num(c, a):
    _nargs(a, 1, 1, "a number")
    c.launch_num = _whole(a[0], "a launch batch", 1, 256)


def _kw_slow_start(c, a):
    _nargs(a, 1, 1, "seconds (10-600)")
    c.slow_start = float(_whole(a[0], "seconds", 10, 600))


def _kw_wait(c, a):
    _nargs(a, 1, 1, "seconds")
    c.wait = float(_whole(a[0], "seconds", 0, 600))


def _kw_payload_size(c, a):
    _nargs(a, 1, 1, "bytes")
    c.payload_size = _whole(a[0], "a payload size", 1, 1 << 20)


def _kw_protocol(c, a):
    _nargs(a, 1, 1, "http | tcp | udp")
    if a[0] not in ("http", "tcp", "udp"):
        raise ValueError(f"{a[0]!r} is not http, tcp or udp")
    if a[0] == "udp":
        raise ValueError("udp is not built yet (perfkit's TCP runs tcp and http)")
    c.protocol = a[0]


def _kw_string(name):
    def kw(c, a):
        _nargs(a, 1, 1, "one string without spaces")
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
    try:
        v = int(a[0], 16) if a[0].lower().startswith("0x") else int(a[0], 10)
    except ValueError:
        raise ValueError(f"{a[0]!r} is not a number (0-255 or 0x00-0xff)") from None
    if not 0 <= v <= 255:
        raise ValueError(f"{v} is out of range 0..255")
    c.tos = v


def _kw_vlan(c, a):
    _nargs(a, 1, 1, "a VLAN id (1-4094)")
    c.vlan = _whole(a[0], "a VLAN id", 1, 4094)


def _kw_mss(c, a):
    _nargs(a, 1, 1, "bytes")
    c.mss = _whole(a[0], "an MSS", 536, 9000)


def _kw_retransmit_timeout(c, a):
    _nargs(a, 1, 1, "seconds (1-60) or an interval (500ms)")
    s = a[0]
    c.retransmit_timeout = float(_whole(s, "seconds", 1, 60)) if s.isdigit() else _interval(s)


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


def _kw_rss(c, a):
    """dperf's rss [l3|l3l4|auto] [mq_rx_none|mq_rx_rss]: how several cpus share a port.
    perfkit gives each cpu a queue pair with its own sockets and client ports; the port
    brings a connection back to its queue by itself (memif and ring pairs: queue q to q)
    or by the PMD's RSS over IP and TCP (set up whenever a port that has it gets several
    queues), so every form is accepted and recorded."""
    _nargs(a, 0, 2, "[l3 | l3l4 | auto] [mq_rx_none | mq_rx_rss]")
    if a and a[0] not in ("l3", "l3l4", "auto"):
        raise ValueError(f"{a[0]!r} is not l3, l3l4 or auto")
    if len(a) == 2 and a[1] not in ("mq_rx_none", "mq_rx_rss"):
        raise ValueError(f"{a[1]!r} is not mq_rx_none or mq_rx_rss")
    c.rss = (a[0] if a else "auto", a[1] if len(a) == 2 else "mq_rx_rss")


def _kw_tx_burst(c, a):
    _nargs(a, 1, 1, "a number (1-1024)")
    c.tx_burst = _whole(a[0], "a burst", 1, 1024)


KEYWORDS = {
    "mode": _kw_mode, "cpu": _kw_cpu, "port": _kw_port, "client": _kw_client, "server": _kw_server,
    "listen": _kw_listen, "duration": _kw_duration, "cps": _kw_cps, "cc": _kw_cc,
    "keepalive": _kw_keepalive, "launch_num": _kw_launch_num, "slow_start": _kw_slow_start,
    "wait": _kw_wait, "payload_size": _kw_payload_size, "protocol": _kw_protocol,
    "http_host": _kw_string("http_host"), "http_path": _kw_string("http_path"),
    "http_method": _kw_http_method, "lport_range": _kw_lport_range, "tos": _kw_tos, "vlan": _kw_vlan, "mss": _kw_mss,
    "retransmit_timeout": _kw_retransmit_timeout, "tcp_rst": _kw_tcp_rst, "fast_close": _kw_fast_close,
    "quiet": _kw_flag("quiet"), "tx_burst": _kw_tx_burst, "flood": _kw_flag("flood"),
    "rss": _kw_rss,
}
REPEATABLE = {"port", "client", "server"}
CLIENT_ONLY = {"cps", "cc", "flood", "launch_num", "slow_start", "wait", "http_host", "http_path",
               "http_method", "lport_range", "fast_close"}


def parse(text: str, source: str = "<string>") -> DperfConfig:
    """A DperfConfig from the text of a dperf configuration file."""
    c = DperfConfig(source=source)
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kw, *args = line.split()
        where = f"{source}:{no}: {kw}"
        if kw in UNSUPPORTED:
            raise DperfError(f"{where}: not supported by perfkit: {UNSUPPORTED[kw]}")
        handler = KEYWORDS.get(kw)
        if handler is None:
            raise DperfError(f"{where}: unknown keyword (known: {', '.join(sorted(KEYWORDS))})")
        if kw in c.lines and kw not in REPEATABLE:
            raise DperfError(f"{where}: given twice (first on line {c.lines[kw]})")
        try:
            handler(c, args)
        except ValueError as e:
            raise DperfError(f"{where}: {e}") from None
        c.lines.setdefault(kw, no)
    if c.mode is None:
        raise DperfError(f"{source}: no 'mode' line (mode client | server)")
    if c.mode == "server":
        for kw in sorted(CLIENT_ONLY & set(c.lines)):
            raise DperfError(f"{source}:{c.lines[kw]}: {kw}: a client keyword in a server configuration")
    return c


def load(path) -> DperfConfig:
    """Parse a dperf configuration file."""
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), source=str(path))


# ------------------------------------------------------------------ dperf's output layout

# dperf's per-second and total blocks, for the counters perfkit has (dperf's names).
LAYOUT = (
    (("pktRx", "pkts_rx"), ("pktTx", "pkts_tx"), ("bitsRx", "bits_rx"), ("bitsTx", "bits_tx"),
     ("dropTx", "drop_tx")),
    (("tcpRx", "tcp_rx"), ("udpRx", "udp_rx")),
    (("arpRx", "arp_rx"), ("icmpRx", "icmp_rx")),
    (("otherRx", "other_rx"), ("badRx", "bad_rx")),
    (("synRx", "syn_rx"), ("synTx", "syn_tx"), ("finRx", "fin_rx"), ("finTx", "fin_tx"),
     ("rstRx", "rst_rx"), ("rstTx", "rst_tx")),
    (("synRt", "retrans_syn"), ("finRt", "retrans_fin"), ("ackRt", "retrans_ack"),
     ("pushRt", "retrans_push")),
    (("tcpDrop", "tcp_drop"),),
    (("skOpen", "sock_open"), ("skClose", "sock_close"), ("skCon", "sock_current"), ("skErr", "sock_error"),
     ("rtt(us)", "rtt_us")),
    (("httpGet", "http_get"), ("httpPost", "http_post"), ("http2XX", "http_2xx"), ("httpErr", "http_err")),
    (("ierrors", "nic_ierrors"), ("oerrors", "nic_oerrors"), ("imissed", "nic_imissed")),
)
GAUGES = {"sock_current"}


def _block(values: dict) -> str:
    lines = []
    for line in LAYOUT:
        lines.append(" ".join(f"{name:<7} {values.get(key, 0):<18,}" for name, key in line).rstrip())
    return "\n".join(lines)


def _values(row: dict, per_interval: bool) -> dict:
    out = {}
    for line in LAYOUT:
        for _, key in line:
            if key == "rtt_us":  # first-packet RTT: the interval's mean, or the run's
                n, total = row.get("rtt_count", 0), row.get("rtt_sum_ns", 0)
                v = row.get("rtt_mean_us") if per_interval else (total / n / 1e3 if n else None)
                out[key] = int(round(v)) if v is not None else 0
                continue
            src = {"bits_rx": "bytes_rx", "bits_tx": "bytes_tx"}.get(key, key)
            scale = 8 if src != key else 1
            if per_interval and key not in GAUGES:
                v = row.get(f"{src}_per_s", 0.0) * row.get("interval_s", 0.0)
            else:
                v = row.get(src, 0)
            out[key] = int(round(v * scale))
    return out


def seconds_block(row: dict) -> str:
    """dperf's block for one row: what happened in that interval."""
    head = f"seconds {round(row.get('time_s', 0)):<18} cpuUsage {row.get('cpu_pct', 0.0):.0f}"
    return f"\n{head}\n{_block(_values(row, True))}"


def total_block(row: dict) -> str:
    """dperf's closing block: totals (the last row's cumulative counters)."""
    return ("\n-----------------------\nperfkit dperf: test finished\n-----------------------\n"
            f"\nTotal Numbers:\n{_block(_values(row, False))}\n-----------------------")


def summary_lines(row: dict, summary: dict) -> str:
    """perfkit's view of a TCP/HTTP run: connections and requests per second over the
    active time, errors by class, response-time percentiles."""
    secs = summary.get("duration_s") or row.get("time_s") or 0.0
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
