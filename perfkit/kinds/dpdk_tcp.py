"""TCP/HTTP over DPDK with perfkit's own TCP (dperf's job): DpdkHttpServer and DpdkHttpClient;
perfkit.dperf reads dperf's configuration files into them."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import ClassVar

from perfkit.fields import SECONDS, check_declared, cluster_option, like, opt, whole_number
from perfkit.kinds.dpdk_udp import DpdkFlows
from perfkit.spec import (DPDK_MAX_BURST, DPDK_MAX_QUEUES, DPERF_HTTP_METHODS, DpdkSpec, IPV6_MAX_MSS, MAC,
                          TCP_MAX_CLIENT_RANGES, TCP_MAX_SEGMENTS, check_bool, check_dest_ip, check_dpdk_port,
                          check_netns)
from perfkit import sandbox
from perfkit.units import parse_duration, parse_size

_int_in = whole_number   # value as an int in lo..hi, else ValueError naming the field

TCP_MAX_RTO_S = 300                # dperf's RTO_MAX
RESPONSE_MIN = 57                  # the leanest response head: "HTTP/1.1 200 OK", Content-Length 0, close
TCP_MAX_DURATION_S = 365 * 86400   # dperf's duration has no limit; its files run 10d
TCP_TABLE_MAX = 1 << 30            # PK_TCP_MAX_SOCKETS: one worker's socket table (64 B each, taken page by page)
TCP_MAX_PORTS = 8                  # ports one run drives (dperf's several port lines)
PROTOCOLS = ("tcp", "udp")         # dperf's protocol line (http is tcp)
UDP_MAX_MSG = {4: 1472, 6: 1452}   # protocol udp: a message in one 1500-byte packet (PK_TCP_UDP_MAX_MSG)
PIPELINE_MAX = 100                 # dperf's PIPELINE_MAX (PK_TCP_MAX_PIPELINE)
CHANGE_DIP_MAX = 65536             # dperf's change_dip list (PK_TCP_MAX_DIPS)


def _check_udp(self, msg: bytes, what: str) -> None:
    """protocol udp: the message goes in one datagram of one 1500-byte packet."""
    if self.protocol == "udp" and len(msg) > UDP_MAX_MSG[self.ip_version]:
        raise ValueError(f"protocol: udp sends the {what} in one datagram: {len(msg)} B is above "
                         f"{UDP_MAX_MSG[self.ip_version]} B over IPv{self.ip_version} (lower payload_size)")


def check_own_ip(addr, field: str, version: int | None = None) -> str:
    """A port's own address (or one it serves or connects from): any unicast IPv4 or IPv6
    address; version: the family the other addresses have. The network guard
    (perfkit.sandbox) keeps tests to their lab ranges."""
    try:
        ip = ipaddress.ip_address(str(addr).strip())
    except ValueError:
        raise ValueError(f"{field}: {addr!r} is not an IPv4 or IPv6 address") from None
    if ip.is_loopback or ip.is_unspecified or ip.is_multicast or str(ip) == "255.255.255.255":
        raise ValueError(f"{field}: {ip} is not a unicast address a DPDK port can own")
    if version is not None and ip.version != version:
        raise ValueError(f"{field}: {ip} is IPv{ip.version} but the port's address is IPv{version}: "
                         "one family per run")
    sandbox.check(ip, field)
    return str(ip)


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
        ip = check_own_ip(ip, field, version)
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


def _check_tcp_common(self, put) -> None:
    """Fields DpdkHttpServer and DpdkHttpClient share."""
    check_declared(self)   # listen, mss, tos, retries, burst (the client's keepalive_requests, launch_num)
    put("netns", check_netns(self.netns))
    put("port", check_dpdk_port(self.port, "port", self.netns))
    duration = parse_duration(self.duration, "duration")
    if not 0 < duration <= TCP_MAX_DURATION_S:
        raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 365d)")
    put("duration", duration)
    put("listen_num", _int_in(self.listen_num, "listen_num", 1, 65536 - self.listen))
    put("vlan", _int_in(self.vlan, "vlan", 0, 4094))
    put("tcp_rst", check_bool(self.tcp_rst, "tcp_rst"))
    rto = parse_duration(self.retransmit_timeout, "retransmit_timeout")
    if not 0.001 <= rto <= TCP_MAX_RTO_S:
        raise ValueError(f"retransmit_timeout: {self.retransmit_timeout!r} is out of range 1ms..300s")
    put("retransmit_timeout", rto)
    put("payload_size", _int_in(parse_size(self.payload_size, "payload_size"), "payload_size",
                                0, 1 << 20))
    put("queues", _int_in(self.queues, "queues", 1, DPDK_MAX_QUEUES))
    put("raw", check_bool(self.raw, "raw"))
    put("cpus", _cpu_list(self.cpus))


def _cpu_list(cpus) -> tuple:
    """cpus as a tuple of CPU numbers ("0,2" or (0, 2)); whether this host has them is the
    engine's check (a file may name another host's CPUs)."""
    if isinstance(cpus, str):
        cpus = [c for c in cpus.replace(" ", ",").split(",") if c]
    try:
        out = tuple(int(c) for c in cpus)
    except (TypeError, ValueError):
        raise ValueError(f"cpus: {cpus!r} is not a list of CPU numbers") from None
    if any(c < 0 for c in out):
        raise ValueError(f"cpus: {cpus!r} has a negative CPU number")
    return out


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
class DpdkHttpServer(_IpVersion, DpdkSpec):
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
        1, help="TCP ports listen .. listen + listen_num - 1", unit="TCP ports", range_text="1..65536 - listen",
        advanced=True)
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
        10.0, help="how long to serve", unit=SECONDS, range_text="above 0, at most 365d")
    mss: int = opt(
        1460, help="largest segment sent (the client's MSS option lowers it); IPv6: at most 1440", unit="bytes",
        lo=536, hi=1460, advanced=True)
    tos: int = opt(
        0, help="IPv4 TOS (IPv6 traffic class) of every packet", unit="IPv4 TOS byte", lo=0, hi=255, advanced=True)
    vlan: int = opt(
        0, help="802.1Q VLAN id of every frame (0: untagged); frames of other VLANs are not ours", advanced=True)
    tcp_rst: bool = opt(
        True, help="answer segments for no connection (and SYNs to other ports) with RST", advanced=True)
    retransmit_timeout: float | str = opt(
        1.0, help="stop-and-wait: resend after this, give up after retries", unit=SECONDS, range_text="1ms..300s",
        advanced=True)
    retries: int = opt(
        3, help="stop-and-wait: resend after this, give up after retries", unit="retransmits", lo=0, hi=16,
        advanced=True)
    burst: int = like(DpdkFlows, "burst", advanced=True)
    netns: str | None = opt(
        None, help="the DPDK port (as DpdkFlows)", unit="/run/netns/NAME")
    queues: int = opt(
        1,
        help=("workers, one rx/tx queue pair each (dperf's several cpus on a port), each with its own"
              " socket table: a connection must come back on the queue it arrived on (memif and ring "
              "pairs: queue q to q; NICs: RSS)"), advanced=True)
    server: str | None = opt(
        None, help=("the first address served; worker q of a port listens on server + q % server_num "
                    "(dperf's server ADDRESS COUNT); default: ip"),
        unit="IPv4 or IPv6 address; empty: ip", advanced=True)
    server_num: int = opt(
        1, help="server addresses from server on, one per worker (ARP and ping answered for each)",
        unit="addresses", range_text="1..254, the last byte only varying", advanced=True)
    more_ports: tuple = opt(
        (), help=("further ports, each with queues workers of its own (dperf's several port lines): "
                  "((port, ip, gateway, gateway_mac, clients, server, server_num), ...)"),
        unit="one port a line", widget="area", advanced=True)
    response_size: int = opt(
        0, help=("the whole response, headers and body, padded to this many bytes (dperf's payload_size); "
                 "0: the headers and a payload_size body"), unit="bytes; 0: headers + payload_size",
        lo=0, hi=1 << 20, advanced=True)
    raw: bool = opt(
        False, help=("dperf's non-HTTP payload (a packet_size under its 70-byte HTTP minimum): each request "
                     "segment is answered with response_size bytes of 'a', no HTTP"), advanced=True)
    cpus: tuple = opt(
        (), help="pin worker k to cpus[k] (dperf's cpu line); empty: perfkit dperf --cpus, or not pinned",
        unit="CPU numbers (0, 1)", advanced=True)
    protocol: str = opt(
        "tcp", help=("tcp, or udp (dperf's protocol udp): each request in one datagram, answered in one; "
                     "the message fits one packet"), choices=PROTOCOLS, advanced=True)
    vxlan: tuple = opt(
        (), help=("dperf's vxlan, one per port in order (the first, then more_ports): every frame in "
                  "VXLAN (UDP 4789) from local + q to remote (+ q when remote_num is queues); inner "
                  "Ethernet inner_smac -> inner_dmac, IPv4: (vni, inner_smac, inner_dmac, local, "
                  "local_num, remote, remote_num), local_num = queues"),
        unit="VNI SMAC DMAC LOCAL NUM REMOTE NUM, one port a line", widget="area", advanced=True)

    test = "dpdk_http_server"
    messages_per_second = 0.0

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        _check_tcp_common(self, put)
        put("ip", check_own_ip(self.ip, "ip"))
        _mss_family(self, put)
        put("clients", _client_ranges(self.clients, "clients", self.ip_version))
        if any(ip == self.ip for ip, _ in self.clients):
            raise ValueError(f"clients: {self.ip} is the server's own address")
        put("keepalive", check_bool(self.keepalive, "keepalive"))
        if self.payload_size + 128 > TCP_MAX_SEGMENTS * self.mss:
            raise ValueError(f"payload_size: {self.payload_size} B does not fit in {TCP_MAX_SEGMENTS} "
                             f"segments of mss {self.mss} with the headers")
        if self.response_size > TCP_MAX_SEGMENTS * self.mss:
            raise ValueError(f"response_size: {self.response_size} B does not fit in {TCP_MAX_SEGMENTS} "
                             f"segments of mss {self.mss}")
        if self.raw and not self.response_size:
            raise ValueError("raw: a raw payload needs its size (response_size)")
        if not self.raw and 0 < self.response_size < RESPONSE_MIN:
            raise ValueError(f"response_size: {self.response_size} B is below the {RESPONSE_MIN} B of the "
                             "leanest HTTP response (raw: a non-HTTP payload that short)")
        put("server", check_own_ip(self.server or self.ip, "server", self.ip_version))
        put("server_num", _server_range(self.server, self.server_num, "server_num"))
        if any(_in_range(ip, 1, self.server, self.server_num) for ip, _ in self.clients):
            raise ValueError(f"clients: a client range starts at one of the server addresses "
                             f"{self.server}+{self.server_num}")
        _check_ports(self, put, True)
        _check_udp(self, self.response_bytes(), "response")
        if self.sockets > TCP_TABLE_MAX:
            raise ValueError(f"clients: {self.sockets} sockets a worker (addresses x 65536 ports x listen_num) "
                             f"pass {TCP_TABLE_MAX}: use fewer addresses or listen ports")

    @property
    def sockets(self) -> int:
        return sum(n for _, n in self.clients) * 65536 * self.listen_num

    def plan(self) -> dict:
        """The engine's plan (perfkit.kinds.dpdk_tcp.plan)."""
        return plan(self)

    def response_bytes(self) -> bytes:
        """The response every request gets: response_size bytes in all (raw: of 'a', no HTTP;
        else a lean head whose Content-Length counts the rest), or the head and payload_size."""
        conn = "keep-alive" if self.keepalive else "close"
        if self.raw:
            return b"a" * self.response_size
        if self.response_size:
            body = 0
            for _ in range(8):   # the body's length changes the head's by a digit at most
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {body}\r\nConnection: {conn}\r\n\r\n"
                if len(head) + body == self.response_size:
                    break
                body = max(0, self.response_size - len(head))
            return head.encode() + b"a" * body
        return (f"HTTP/1.1 200 OK\r\nServer: perfkit\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {self.payload_size}\r\nConnection: {conn}\r\n\r\n").encode() \
            + b"x" * self.payload_size


@dataclass(frozen=True)
class DpdkHttpClient(_IpVersion, DpdkSpec):
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
        unit="IPv4 address; empty: the server", advanced=True)
    gateway_mac: str | None = opt(
        None, help="skip ARP and use this MAC", unit="aa:bb:cc:dd:ee:ff; empty: ARP", advanced=True)
    clients: tuple = opt(
        (("198.18.0.1", 1),), help="source address ranges ((first, count), ...); one range here",
        unit="ADDR+COUNT, ... (198.18.0.1+4)", widget="ranges")
    lport_range: tuple = opt(
        (1024, 65535), help="(first, last) client TCP ports", unit="FIRST-LAST (1024-65535)", widget="pair",
        advanced=True)
    server: str = opt(
        "198.18.0.2", help="where connections go", unit="IPv4 address")
    listen: int = opt(
        80, help="where connections go", unit="TCP port", lo=1, hi=65535)
    listen_num: int = opt(
        1, help="where connections go", unit="TCP ports", range_text="1..65536 - listen", advanced=True)
    duration: float | str = opt(
        10.0, help="how long to load", unit=SECONDS, range_text="above 0, at most 365d")
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
        lo=0, hi=1073741824, advanced=True)
    launch_num: int = opt(
        4, help="connections opened together; cps is reached in launches of this many",
        unit="connections per launch", lo=1, hi=DPDK_MAX_BURST, advanced=True)
    slow_start: float | str = opt(
        0.0, help="seconds over which cps rises to its target; wait: seconds before starting", unit=SECONDS,
        range_text="0..600s", advanced=True)
    wait: float | str = opt(
        0.0, help="seconds before starting", unit=SECONDS, range_text="0..600s", advanced=True)
    http_host: str = opt(
        "perfkit", help="the request (GET; POST carries payload_size bytes)", unit="Host header", advanced=True)
    http_path: str = opt(
        "/", help="the request (GET; POST carries payload_size bytes)", unit="/PATH")
    http_method: str = opt(
        "GET", help="the request (GET; POST carries payload_size bytes)", choices=DPERF_HTTP_METHODS,
        check=False)   # any case (get, post): checked in __post_init__
    payload_size: int | str = opt(
        0, help="POST body bytes", unit="POST body bytes", lo=0, hi=1 << 20,
        check=False)   # a size with units: _check_tcp_common
    fast_close: bool = opt(
        False, help="close with RST instead of FIN", advanced=True)
    disable_ack: bool = opt(
        False, help="dperf's disable_ack: leave a complete response unacknowledged (the next request or FIN acks it)",
        advanced=True)
    mss: int = like(DpdkHttpServer, "mss", advanced=True)
    tos: int = like(DpdkHttpServer, "tos", advanced=True)
    vlan: int = like(DpdkHttpServer, "vlan", advanced=True)
    tcp_rst: bool = like(DpdkHttpServer, "tcp_rst", advanced=True)
    retransmit_timeout: float | str = like(DpdkHttpServer, "retransmit_timeout", advanced=True)
    retries: int = like(DpdkHttpServer, "retries", advanced=True)
    burst: int = like(DpdkHttpServer, "burst", advanced=True)
    netns: str | None = opt(
        None, help="the DPDK port", unit="/run/netns/NAME")
    flood: bool = opt(
        False,
        help=("SYN flood: only the first packet of each connection (a SYN at cps; protocol udp: pipeline "
              "datagrams), no sockets kept; SYN-ACKs that come back are answered with RST (tcp_rst), "
              "UDP answers dropped (udp_drop)"), advanced=True)
    queues: int = opt(
        1,
        help=("workers, one rx/tx queue pair each; worker k takes slice k of lport_range and "
              "cps/queues, cc/queues (its own sockets: nothing shared between them)"), advanced=True)
    server_num: int = opt(
        1, help=("server addresses from server on: worker q of a port connects to server + q % server_num "
                 "(dperf's server ADDRESS COUNT)"), unit="addresses", range_text="1..254, the last byte only varying",
        advanced=True)
    more_ports: tuple = like(DpdkHttpServer, "more_ports", advanced=True)
    vxlan: tuple = like(DpdkHttpServer, "vxlan", advanced=True)
    request_size: int = opt(
        0, help=("pad the request to at least this many bytes with an X-Pad header (dperf's payload_size "
                 "on a GET client: its requests are that long)"), unit="bytes; 0: no padding", lo=0, hi=1460,
        advanced=True)
    raw: bool = opt(
        False, help=("dperf's non-HTTP payload: each request is request_size bytes of 'a' and a response "
                     "is as many bytes back (no HTTP)"), advanced=True)
    cpus: tuple = like(DpdkHttpServer, "cpus", advanced=True)
    protocol: str = like(DpdkHttpServer, "protocol", advanced=True)
    pipeline: int = opt(
        1, help=("protocol udp with keepalive: requests out at once on a socket (dperf's pipeline); each answer "
                 "lets the next go (answers are not matched to requests: no response times)"),
        unit="requests out a socket", lo=1, hi=PIPELINE_MAX, advanced=True)
    change_dip: tuple | str | None = opt(
        (), help=("flood: each SYN (udp: datagram) goes to the next of these addresses instead of server "
                  "(dperf's change_dip lines), the list split over the workers in turn: ((first, step, count), "
                  "...) or a FIRST STEP COUNT line each"),
        unit="FIRST STEP COUNT, one a line", widget="area", advanced=True)

    test = "dpdk_http_client"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        _check_tcp_common(self, put)
        put("ip", check_own_ip(self.ip, "ip"))
        _mss_family(self, put)
        put("server", check_dest_ip(self.server, "server", self.ip_version))
        put("gateway", check_dest_ip(self.gateway or self.server, "gateway", self.ip_version))
        if self.gateway_mac is not None:
            if not MAC.fullmatch(str(self.gateway_mac)):
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
        if self.cc < 0 or (self.cc > self.sockets and not self.more_ports):
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
        if self.raw and not self.request_size:
            raise ValueError("raw: a raw payload needs its size (request_size)")
        if len(self.request_bytes()) > self.mss:
            raise ValueError(f"payload_size: the request ({len(self.request_bytes())} B) must fit in one "
                             f"segment (mss {self.mss})")
        for name in ("fast_close", "disable_ack", "flood"):
            put(name, check_bool(getattr(self, name), name))
        if self.flood and (self.cc or self.keepalive):
            raise ValueError("flood: a SYN flood keeps no connections: no cc or keepalive with it")
        _check_udp(self, self.request_bytes(), "request")
        if self.queues > hi - lo + 1:
            raise ValueError(f"queues: {self.queues} workers need at least as many client ports "
                             f"(lport_range {lo}..{hi})")
        if self.cc and self.cc < self.queues:
            raise ValueError(f"cc: {self.cc} is below queues ({self.queues}): each worker holds its share")
        put("server_num", _server_range(self.server, self.server_num, "server_num"))
        _check_ports(self, put, False)
        nworkers = self.queues * (1 + len(self.more_ports))
        _check_client_modes(self, put, nworkers)
        if self.cc > self.total_sockets:
            raise ValueError(f"cc: {self.cc} is out of range 0..{self.total_sockets} (client addresses x "
                             "ports x listen ports, over every port)")
        if -(-self.sockets // self.queues) > TCP_TABLE_MAX:
            raise ValueError(f"clients: {-(-self.sockets // self.queues)} sockets a worker (addresses x lport_range "
                             f"x listen_num / queues) pass {TCP_TABLE_MAX}: use fewer addresses, ports or listen ports")

    @property
    def sockets(self) -> int:
        lo, hi = self.lport_range
        return sum(n for _, n in self.clients) * (hi - lo + 1) * self.listen_num

    @property
    def dips(self) -> list:
        """change_dip's addresses in order (a flood's destinations)."""
        return _dip_list(self.change_dip)

    @property
    def total_sockets(self) -> int:
        """Client sockets over every port (cc's limit)."""
        lo, hi = self.lport_range
        return self.sockets + sum(sum(n for _, n in p[4]) for p in self.more_ports) * (hi - lo + 1) * self.listen_num

    @property
    def messages_per_second(self) -> float:
        return float(self.cps)

    def plan(self) -> dict:
        """The engine's plan (perfkit.kinds.dpdk_tcp.plan)."""
        return plan(self)

    def request_bytes(self) -> bytes:
        """The request every connection sends (raw: request_size bytes of 'a')."""
        if self.raw:
            return b"a" * self.request_size
        accept = "Accept: */*\r\n"
        head = f"{self.http_method} {self.http_path} HTTP/1.1\r\nHost: {self.http_host}\r\n" \
               "User-Agent: perfkit\r\n" + accept
        if self.http_method == "POST":
            head += f"Content-Length: {self.payload_size}\r\n"
        body = self.payload_size if self.http_method == "POST" else 0
        pad = self.request_size - (len(head) + 2 + body)
        if 0 < pad < 10:   # "X-Pad: a" and its CRLF are 10 bytes: without Accept the gap takes them
            head, pad = head.replace(accept, "", 1), pad + len(accept)
        if pad > 0:        # the request is exactly request_size bytes
            head += "X-Pad: " + "a" * (pad - 9) + "\r\n"
        return (head + "\r\n").encode() + b"x" * body


def _check_client_modes(self, put, nworkers: int) -> None:
    """A client's cc share, pipeline and change_dip against the rest of its spec."""
    if self.cc and self.cc < nworkers:
        raise ValueError(f"cc: {self.cc} is below the {nworkers} workers (ports x queues): each holds its share")
    if self.pipeline > 1 and (self.protocol != "udp" or not (self.keepalive or self.flood)):
        raise ValueError(f"pipeline: {self.pipeline} requests out a socket is protocol udp's with keepalive or "
                         "flood (dperf's pipeline); TCP sends one request at a time")
    put("change_dip", _change_dip(self.change_dip, self.flood, self.ip_version, nworkers))


def _dip_list(ranges) -> list:
    return [str(ipaddress.ip_address(first) + k * step) for first, step, count in ranges for k in range(count)]


def _change_dip(value, flood: bool, version: int, nworkers: int) -> tuple:
    """change_dip as ((first, step, count), ...): each address a destination the network guard
    allows, at most CHANGE_DIP_MAX in all, at least one a worker (dperf's checks)."""
    if isinstance(value, str):
        value = [line.split("#", 1)[0].split() for line in value.splitlines()]
        value = [w for w in value if w]
    out, total = [], 0
    for item in value or ():
        try:
            first, step, count = item
        except (TypeError, ValueError):
            raise ValueError(f"change_dip: {item!r} is not (first, step, count) or FIRST STEP COUNT") from None
        first = check_dest_ip(first, "change_dip", version)
        step = _int_in(step, "change_dip", 1, 1 << 32)
        count = _int_in(count, "change_dip", 1, CHANGE_DIP_MAX)
        ip = ipaddress.ip_address(first)
        if int(ip) + (count - 1) * step > (1 << ip.max_prefixlen) - 1:
            raise ValueError(f"change_dip: {first} + {count - 1} x {step} passes the last address")
        out.append((first, step, count))
        total += count
        if total > CHANGE_DIP_MAX:
            raise ValueError(f"change_dip: more than {CHANGE_DIP_MAX} addresses (dperf's most)")
    if not out:
        return ()
    if not flood:
        raise ValueError("change_dip: a flood's destinations (dperf's change_dip is flood's): set flood")
    if total < nworkers:
        raise ValueError(f"change_dip: {total} addresses for {nworkers} workers: at least one a worker")
    for a in _dip_list(out):   # every address through the network guard (a step can leave the lab range)
        check_dest_ip(a, "change_dip", version)
    return tuple(out)


def _in_range(ip: str, n: int, first: str, count: int) -> bool:
    """Whether the ranges ip+n and first+count (same family) share an address."""
    a, b = int(ipaddress.ip_address(ip)), int(ipaddress.ip_address(first))
    return a < b + count and b < a + n


def _server_range(first: str, n, field: str) -> int:
    """server_num, checked: the addresses from first on differ in their last byte only (dperf's ranges)."""
    n = _int_in(n, field, 1, 254)
    ip = ipaddress.ip_address(first)
    if (int(ip) & 0xff) + n - 1 > (254 if ip.version == 4 else 255):
        raise ValueError(f"{field}: {first} + {n} addresses pass the last byte (only the last byte varies)")
    return n


PORT_ITEM = "(port, ip, gateway, gateway_mac, clients, server, server_num)"


def _port_items(value) -> list:
    """more_ports as a list of items; text takes one port a line: PORT IP GATEWAY [MAC] CLIENT+N SERVER+N."""
    if not isinstance(value, str):
        return list(value or ())
    out = []
    for line in value.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words == ["()"]:
            continue
        mac = words.pop(3) if len(words) == 6 else None
        if len(words) != 5:
            raise ValueError(f"more_ports: {line.strip()!r} is not PORT IP GATEWAY [MAC] CLIENT+N SERVER+N")
        srv, _, n = words[4].partition("+")
        out.append((words[0], words[1], words[2], mac, words[3], srv, n or 1))
    return out


def _check_ports(self, put, server: bool) -> None:
    """more_ports, then the vxlan of every port."""
    put("more_ports", _more_ports(self, server))
    put("vxlan", _vxlan(self))


VXLAN_ITEM = "(vni, inner_smac, inner_dmac, local, local_num, remote, remote_num)"


def _vxlan(self) -> tuple:
    """vxlan checked as dperf checks it: one per port, local_num = queues (a local VTEP a
    queue), remote_num 1 or queues, VTEPs IPv4; perfkit's engine takes IPv4 inside and no vlan."""
    value = self.vxlan
    if isinstance(value, str):
        value = [ln.split("#", 1)[0].split() for ln in value.splitlines()]
        value = [w for w in value if w and w != ["()"]]
    items = list(value or ())
    if not items:
        return ()
    if items and isinstance(items[0], str):   # one port's item given flat
        items = [items]
    nports = 1 + len(self.more_ports)
    if len(items) != nports:
        raise ValueError(f"vxlan: {len(items)} given for {nports} ports: one a port")
    if self.vlan:
        raise ValueError("vxlan: not with vlan (dperf refuses both)")
    if self.ip_version != 4:
        raise ValueError("vxlan: the inner addresses are IPv4 here (perfkit's engine encapsulates IPv4 only)")
    out = []
    for k, item in enumerate(items):
        f = f"vxlan[{k}]" if nports > 1 else "vxlan"
        try:
            vni, smac, dmac, local, lnum, remote, rnum = item
        except (TypeError, ValueError):
            raise ValueError(f"{f}: {item!r} is not {VXLAN_ITEM}") from None
        vni = _int_in(vni, f"{f} vni", 0, 0xffffff)
        macs = []
        for name, mac in (("inner_smac", smac), ("inner_dmac", dmac)):
            if not MAC.fullmatch(str(mac)):
                raise ValueError(f"{f}: {name} {mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
            macs.append(str(mac).lower())
        local = check_own_ip(local, f"{f} local", 4)
        remote = check_dest_ip(remote, f"{f} remote", 4)
        lnum = _int_in(lnum, f"{f} local_num", 1, 254)
        rnum = _int_in(rnum, f"{f} remote_num", 1, 254)
        if lnum != self.queues:
            raise ValueError(f"{f}: local_num {lnum} must be queues ({self.queues}): a local VTEP a queue")
        if rnum not in (1, self.queues):
            raise ValueError(f"{f}: remote_num {rnum}: 1 or queues ({self.queues})")
        for a, n in ((local, lnum), (remote, rnum)):
            _server_range(a, n, f)
        out.append((vni, macs[0], macs[1], local, lnum, remote, rnum))
    return tuple(out)


def _more_ports(self, server: bool) -> tuple:
    """The further ports, checked as the first one is: ((port, ip, gateway, gateway_mac, clients,
    server, server_num), ...); a server takes spec.clients on every port (gateway and clients unused)."""
    v = self.ip_version
    out, devs, ips = [], {self.port}, {self.ip}
    for k, item in enumerate(_port_items(self.more_ports)):
        f = f"more_ports[{k}]"
        try:
            dev, ip, gw, mac, clients, srv, n = item
        except (TypeError, ValueError):
            raise ValueError(f"{f}: {item!r} is not {PORT_ITEM}") from None
        dev = check_dpdk_port(dev, f, self.netns)
        ip = check_own_ip(ip, f, v)
        if dev in devs or ip in ips:
            raise ValueError(f"{f}: port {dev} or address {ip} is another port's too")
        devs.add(dev)
        ips.add(ip)
        if mac is not None:
            if not MAC.fullmatch(str(mac)):
                raise ValueError(f"{f}: {mac!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
            mac = str(mac).lower()
        if server:
            srv = check_own_ip(srv or ip, f, v)
            gw, clients = None, ()
        else:
            srv = check_dest_ip(srv, f, v)
            gw = check_dest_ip(gw or srv, f, v)
            clients = _client_ranges(clients, f, v)
            if len(clients) != 1:
                raise ValueError(f"{f}: the client takes one address range a port")
        n = _server_range(srv, n, f)
        out.append((dev, ip, gw, mac, clients, srv, n))
    if len(out) + 1 > TCP_MAX_PORTS:
        raise ValueError(f"more_ports: {len(out) + 1} ports: at most {TCP_MAX_PORTS}")
    return tuple(out)


def _si_number(value, field: str) -> float:
    """dperf's counts: 100, 2k, 1.5m (m = million)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmM]?)\s*", str(value))
    if not m:
        raise ValueError(f"{field}: cannot read {value!r} as a count (100, 2k, 1.5m)")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]


def _share(lo: int, n: int, parts: int, k: int) -> tuple[int, int]:
    """(first, count) of slice k when lo .. lo + n - 1 is cut into parts near-equal slices."""
    base, extra = divmod(n, parts)
    return lo + k * base + min(k, extra), base + (1 if k < extra else 0)


SOCKET_BYTES = 64   # one socket of the C table (tsock): cc sockets stay in memory at once
# the counter groups (perfkit.stats.GROUPS) the TCP workers write, client and server alike
COUNTER_GROUPS = ("traffic", "tcp", "sock", "http", "latency", "nic", "cpu")


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def plan(spec) -> dict:
    """What the dpdk_tcp engine builds, as plain data: every port to open ({dev, netns, ip,
    queues}) and one worker configuration per (port, queue) with its port index and queue
    (dperf divides the cpus among the ports). A client's cps and cc are shared by every
    worker, each takes its queue's slice of lport_range and connects to server + q %
    server_num; a server's worker q listens on server + q % server_num and answers ARP and
    ping for the port's address and every server address of the port."""
    if not isinstance(spec, (DpdkHttpServer, DpdkHttpClient)):
        raise ValueError(f"engine: dpdk_tcp runs DpdkHttpServer and DpdkHttpClient specs, "
                         f"not {type(spec).__name__}")
    server = isinstance(spec, DpdkHttpServer)
    first = (spec.port, spec.ip, None if server else spec.gateway, None if server else spec.gateway_mac,
             spec.clients, spec.server, spec.server_num)
    ports = [first, *spec.more_ports]
    q = spec.queues
    nworkers = len(ports) * q
    common = {"listen": spec.listen, "listen_num": spec.listen_num, "mss": spec.mss, "tos": spec.tos,
              "vlan": spec.vlan, "tcp_rst": spec.tcp_rst, "rto": spec.retransmit_timeout, "retries": spec.retries,
              "burst": spec.burst, "duration": spec.duration, "raw": spec.raw, "udp": spec.protocol == "udp"}
    if server:
        common.update(role="server", clients=[tuple(r) for r in spec.clients], msg=spec.response_bytes(),
                      keepalive=spec.keepalive)
    else:
        if spec.cc and not spec.flood:
            need, have = spec.cc * SOCKET_BYTES, _mem_available()
            if have is not None and need > have:
                raise ValueError(f"cc: {spec.cc:,} connections need {need / 1e9:.1f} GB of sockets "
                                 f"({SOCKET_BYTES} B each) but this host has {have / 1e9:.1f} GB available")
        common.update(role="client", msg=spec.request_bytes(), ka_interval=spec.keepalive,
                      ka_requests=spec.keepalive_requests, launch_num=spec.launch_num, slow_start=spec.slow_start,
                      wait=spec.wait, fast_close=spec.fast_close, flood=spec.flood, cps=float(spec.cps) / nworkers,
                      disable_ack=spec.disable_ack, pipeline=spec.pipeline)
        dips = spec.dips
    workers = []
    for p, (dev, ip, gw, mac, clients, srv, n) in enumerate(ports):
        for k in range(q):
            w = dict(common, port=p, queue=k)
            if spec.cpus:   # dperf's cpu line: worker k on its k-th CPU
                w["cpu"] = spec.cpus[len(workers) % len(spec.cpus)]
            addr = str(ipaddress.ip_address(srv) + k % n)
            if server:
                w.update(ip=addr, own=[(ip, 1), (srv, n)])
            else:
                lo, hi = spec.lport_range
                first_port, count = _share(lo, hi - lo + 1, q, k)
                w.update(ip=ip, server_ip=addr, gateway_ip=gw, gateway_mac=mac,
                         clients=[tuple(r) for r in clients], lport_range=(first_port, first_port + count - 1),
                         cc=_share(0, int(spec.cc), nworkers, len(workers))[1] if spec.cc else 0)
                if dips:    # dperf's change_dip: the list cut into one slice a worker
                    at, count = _share(0, len(dips), nworkers, len(workers))
                    w["dips"] = dips[at:at + count]
            if spec.vxlan:   # this queue's VTEPs (dperf: remote + q when there are queues of them)
                vni, smac, dmac, local, _, remote, rnum = spec.vxlan[p]
                w["vxlan"] = {"vni": vni, "inner_smac": smac, "inner_dmac": dmac,
                              "local": str(ipaddress.ip_address(local) + k),
                              "remote": str(ipaddress.ip_address(remote) + (k if rnum > 1 else 0))}
            workers.append(w)
    return {"engine": "dpdk_tcp", "wait_link": not server,
            "ports": [{"dev": dev, "netns": spec.netns, "ip": ip if ":" not in ip else None, "queues": q}
                      for dev, ip, *_ in ports],
            "workers": workers}


# ------------------------------------------------------------------ the kind
SPECS = (DpdkHttpServer, DpdkHttpClient)
ENGINE = {DpdkHttpServer: "dpdk_tcp", DpdkHttpClient: "dpdk_tcp"}   # when perfkit.Run is given none
# the dashboard's title: its parts before the duration (perfkit.ui.charts.spec_title)
TITLE = {DpdkHttpClient: lambda spec: (f"dpdk http client {spec.port} → {spec.server}:{spec.listen}",
                                       f"{spec.cps:g} cps" + (f", cc {spec.cc}" if spec.cc else ""),
                                       f"{spec.http_method} {spec.http_path}"),
         DpdkHttpServer: lambda spec: (f"dpdk http server {spec.ip}:{spec.listen} on {spec.port}",
                                       f"{spec.payload_size} B bodies")}
LAYOUT = {DpdkHttpServer: "dpdk_tcp", DpdkHttpClient: "dpdk_tcp"}   # perfkit.ui.charts.LAYOUTS
TASKS = {DpdkHttpServer: ("run",), DpdkHttpClient: ("run",)}             # the panel's tasks
PANEL_ROWS = {DpdkHttpServer: ("dperf_conf",), DpdkHttpClient: ("dperf_conf",)}   # a dperf conf loader


# ------------------------------------------------------------------ its command: perfkit dperf
def _dperf_parser(sub) -> None:
    dp = sub.add_parser("dperf", help="run dperf configuration files on perfkit's DPDK TCP")
    dp.add_argument("-c", "--conf", required=True, action="append", metavar="FILE.conf",
                    help="dperf's configuration file; give a server and a client conf to run both "
                         "in this process (over a ring:NAME:0|1 pair)")
    dp.add_argument("--netns", help="open the port in this network namespace (af_packet: a lab host's)")
    dp.add_argument("--mem", default=512, help="EAL memory in MB (default 512)")
    dp.add_argument("--hugepages", default="auto", help="auto, on or off (default auto)")
    dp.add_argument("--cpus", help="pin the workers to these CPUs instead of the conf's cpu line")
    dp.add_argument("--log-level", default="error", help="DPDK log level on stderr (default error)")
    dp.add_argument("-v", "--verbose", action="store_true", help="say each port's setup as it opens")
    dp.add_argument("--interval", default="1s", help="row interval (default 1s)")
    dp.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
    dp.add_argument("-o", "--save", metavar="FILE.parquet", help="save the run as Parquet (one conf)")
    cluster_option(dp)   # a client conf's load over a cluster of lab hosts, each engine's port on its own veth


def dperf_header(mode: str, path: str, spec) -> str:
    """perfkit dperf's line for each conf as its run starts."""
    return f"perfkit dperf: {mode} from {path} on {spec.port} ({spec.ip}) for {spec.duration:g} s (dpdk_tcp engine)"


# command -> adds its parser to subparsers; its specs come from dperf's files (perfkit.dperf.load)
CLI_PARSERS = {"dperf": _dperf_parser}
