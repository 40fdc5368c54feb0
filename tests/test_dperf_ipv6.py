"""perfkit's TCP over DPDK on IPv6 (issue 6): client and server over ring pairs, Neighbor
Discovery, ICMPv6 echo and extension headers by hand, malformed and fuzzed IPv6 frames,
dperf configurations with IPv6 addresses. Over memif (two processes) see test_dperf_memif.py;
against the Linux stack test_dperf_lab6.py.
"""
import ipaddress
import random
import re
import struct
import subprocess
import sys
import time

import pytest

from perfkit import dperf
from perfkit.spec import DpdkHttpClient, DpdkHttpServer

_dpdk = pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
from perfkit.engines import dpdk_tcp  # noqa: E402

from _dpdk_tests import (counters as _counters, csum, fuzz_client, fuzz_server, mac_bytes,  # noqa: E402,F401
                         no_leaks, pull, run_pair, serving, wait_done)

CLI, SRV = "2001:2:0:7::1", "2001:2:0:7::2"
PEER_MAC = "02:00:00:00:00:06"
SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10


def counters(h):
    return _counters(h, 0)


def server(port, **kw):
    return DpdkHttpServer(port=port, ip=SRV, clients=((CLI, 1),), **{"duration": 30, **kw})


def client(port, **kw):
    return DpdkHttpClient(port=port, ip=CLI, clients=((CLI, 1),), server=SRV, **kw)


# ------------------------------------------------------------------ client <-> server

def test_cps_run_over_ipv6_counts_agree_exactly(eal):
    c, s, _ = run_pair(server("ring:u6a:1", payload_size=100), client("ring:u6a:0", cps=500, duration=1))
    n = c["sock_open"]
    assert 450 <= n <= 550
    assert c["sock_close"] == s["sock_close"] == s["sock_open"] == n and c["sock_error"] == s["sock_error"] == 0
    assert c["http_req"] == c["http_2xx"] == s["http_get"] == n and c["http_err"] == 0
    for k in ("syn", "fin"):
        assert c[f"{k}_tx"] == s[f"{k}_rx"] == s[f"{k}_tx"] == c[f"{k}_rx"] == n
    assert c["pkts_tx"] == s["pkts_rx"] and s["pkts_tx"] == c["pkts_rx"] and c["bytes_tx"] == s["bytes_rx"]
    # the client's Neighbor Solicitation for the server (again every 200 ms until answered: on a
    # busy machine the server may start late) and the Advertisements; no ARP
    assert c["icmp_rx"] == s["icmp_rx"] >= 1 and c["arp_rx"] == s["arp_rx"] == 0
    for side in (c, s):
        assert side["bad_rx"] == side["tcp_drop"] == side["other_rx"] == side["drop_tx"] == 0
        assert side["retrans_syn"] == side["retrans_push"] == 0
    no_leaks()


def test_ranges_vlan_traffic_class_and_1440_byte_segments(eal):
    """4 client addresses x 20 ports x 2 listen ports, a VLAN, a traffic class, and a
    response in several segments of the IPv6 MSS (1440: the spec's 1460 less 20)."""
    body = 5000
    srv_spec = DpdkHttpServer(port="ring:u6b:1", ip=SRV, clients=(("2001:2:0:7::10", 4),), payload_size=body,
                              listen=8080, listen_num=2, vlan=60, tos=0xb8, duration=30)
    assert srv_spec.mss == 1440
    c, s, _ = run_pair(srv_spec, DpdkHttpClient(port="ring:u6b:0", ip="2001:2:0:7::10", clients=(("2001:2:0:7::10", 4),),
                                             server=SRV, lport_range=(5000, 5019), listen=8080, listen_num=2,
                                             vlan=60, tos=0xb8, cps=300, duration=1))
    n = c["sock_open"]
    assert n > 160                                            # more connections than the 160 sockets
    assert c["http_2xx"] == s["http_get"] == s["sock_close"] == c["sock_close"] == n and c["sock_error"] == 0
    resp = len(srv_spec.response_bytes())
    # SYN-ACK + ceil(resp / 1440) segments (FIN on the last) + the last ACK; + an NA per NS
    assert s["pkts_tx"] == n * (2 + -(-resp // 1440)) + s["icmp_rx"]
    assert c["bad_rx"] == s["bad_rx"] == c["other_rx"] == s["other_rx"] == 0
    no_leaks()


def test_keepalive_concurrency_over_ipv6(eal):
    c, s, _ = run_pair(server("ring:u6c:1", payload_size=64, keepalive=True),
                    client("ring:u6c:0", cps=300, cc=20, keepalive="10ms", duration=1))
    assert c["sock_open"] == c["sock_close"] == s["sock_open"] == s["sock_close"] == 20
    assert c["http_2xx"] == c["http_req"] == s["http_get"] > 20 * 3 and c["sock_error"] == 0
    no_leaks()


def test_syn_flood_over_ipv6_keeps_no_sockets(eal):
    c, s, _ = run_pair(server("ring:u6f:1"), client("ring:u6f:0", cps=2000, duration=0.5, flood=True, launch_num=16))
    n = c["syn_tx"]
    assert 0 < n <= 1020 and c["sock_open"] == 0 and c["http_req"] == 0   # at most 2000/s for 0.5 s
    assert s["syn_rx"] == s["syn_tx"] == s["sock_open"] == n          # the server answers every SYN
    assert c["syn_rx"] == c["rst_tx"] == s["rst_rx"] == n             # each SYN-ACK is reset (from the segment)
    assert s["sock_current"] == 0 and s["sock_error"] == s["err_reset"] == n
    assert c["bad_rx"] == s["bad_rx"] == 0
    no_leaks()


@pytest.mark.parametrize("protocol", ["tcp", "udp"])
def test_change_dip_over_ipv6_turns_each_floods_destination(eal, protocol):
    """dperf's change_dip 2001:...: flood packet k goes to address k % 2 of the list, the
    server's own address (answered) and one of another /64 (not the server's: dropped). TCP:
    SYNs, their SYN-ACKs reset; UDP: datagrams, their answers no socket's."""
    dips = ((SRV, 1, 1), ("2001:2:0:8::9", 1, 1))
    c, s, _ = run_pair(server("ring:u6c:1", protocol=protocol),
                       client("ring:u6c:0", cps=1000, duration=0.5, flood=True, launch_num=16, protocol=protocol,
                              change_dip=dips))
    kind = "syn" if protocol == "tcp" else "udp"
    n = c[f"{kind}_tx"]
    print({k: (c[k], s[k]) for k in ("syn_tx", "syn_rx", "udp_tx", "udp_rx", "udp_drop", "tcp_drop", "rst_tx")})
    assert n >= 50 and c["sock_open"] == 0 and c["bad_rx"] == s["bad_rx"] == 0
    if protocol == "tcp":
        assert s["syn_rx"] == s["syn_tx"] == (n + 1) // 2 and s["tcp_drop"] == n // 2
        assert c["syn_rx"] == c["rst_tx"] == s["rst_rx"] == (n + 1) // 2
    else:
        assert s["udp_rx"] == n and s["udp_tx"] == (n + 1) // 2 and s["udp_drop"] == n // 2
        assert c["udp_rx"] == c["udp_drop"] == (n + 1) // 2
    no_leaks()


def test_client_reports_an_unanswered_neighbor_solicitation(eal):
    raw = _dpdk.Port("ring:u6d:1")
    cli = dpdk_tcp.build(client("ring:u6d:0", cps=10, duration=0.2))
    try:
        cli.start()
        wait_done(cli, timeout=10)
        err = cli.error()
        assert err.startswith("no Neighbor Advertisement (IPv6 ND) from 2001:2:0:7::2 on port ") and "prefix" in err
        asked = re.search(r"\((\d+) requests in ([\d.]+) s, 0 of them with the link down; 0 frames received", err)
        assert asked and 3.0 <= float(asked[2]) < 3.5 and 14 <= int(asked[1]) <= 17, err   # every 200 ms for 3 s
        ns = [f for f in raw.recv(64) if f[12:14] == b"\x86\xdd"]
    finally:
        cli.close()
        raw.close()
    # what it asked: NS to the solicited-node group of the server, hop limit 255, our MAC in the option
    assert ns and all(parse_ns(f, SRV) for f in ns)
    no_leaks()


# ------------------------------------------------------------------ frames by hand

def a6(addr):
    return ipaddress.IPv6Address(addr).packed


def solicited(addr):
    return a6("ff02::1:ff00:0")[:13] + a6(addr)[13:]


def ip6(src, dst, nh, payload, *, hop=64, plen=None, version=6):
    plen = len(payload) if plen is None else plen
    return struct.pack("!IHBB", version << 28, plen, nh, hop) + a6(src) + a6(dst) + payload


def l4sum(src, dst, nh, body):
    return csum(a6(src) + a6(dst) + struct.pack("!IxxxB", len(body), nh) + body)


# Extension headers (RFC 8200 4) as (Next Header value, the header after its Next Header byte)
HBH, ROUTING, FRAGMENT, DSTOPTS, NONEXT = 0, 43, 44, 60, 59
ROUTER_ALERT = b"\x05\x02\x00\x00"                 # MLD's Hop-by-Hop option (type 5: skip if unknown)


def opts_hdr(kind, options=b""):
    """A Hop-by-Hop or Destination Options header: options padded with PadN (or Pad1) to 8n."""
    pad = -(2 + len(options)) % 8
    options += b"\x00" if pad == 1 else bytes([1, pad - 2]) + bytes(pad - 2) if pad else b""
    return kind, bytes([(2 + len(options)) // 8 - 1]) + options


def routing_hdr(segments_left, rtype=4):
    return ROUTING, bytes([0, rtype, segments_left]) + bytes(4)


def fragment_hdr(offset=0, more=True, ident=7):
    return FRAGMENT, b"\x00" + struct.pack("!HI", offset << 3 | more, ident)


def chain(ext, upper):
    """The headers of ext in a chain ending at upper: (the fixed header's Next Header, bytes)."""
    out = b""
    for i, (_, rest) in enumerate(ext):
        out += bytes([ext[i + 1][0] if i + 1 < len(ext) else upper]) + rest
    return (ext[0][0] if ext else upper), out


def tcp6(sport, dport, seq, ack, flags, payload=b"", *, opts=b"", src=CLI, dst=SRV, doff=None, ck=None, ext=()):
    doff = (20 + len(opts)) // 4 if doff is None else doff
    h = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, 65535, 0, 0) + opts
    c = l4sum(src, dst, 6, h + payload) if ck is None else ck
    nh, x = chain(ext, 6)
    return ip6(src, dst, nh, x + h[:16] + struct.pack("!H", c) + h[18:] + payload)


def icmp6(src, dst, typ, code, body, *, hop=255, ck=None, ext=()):
    m = struct.pack("!BBH", typ, code, 0) + body
    c = l4sum(src, dst, 58, m) if ck is None else ck
    nh, x = chain(ext, 58)
    return ip6(src, dst, nh, x + m[:2] + struct.pack("!H", c) + m[4:], hop=hop)


def ns(src, target, *, dst=None, opts=None, **kw):
    """A Neighbor Solicitation (to the target's solicited-node group unless dst)."""
    opts = b"\x01\x01" + mac_bytes(PEER_MAC) if opts is None else opts
    dst = dst or str(ipaddress.IPv6Address(solicited(target)))
    return icmp6(src, dst, 135, 0, bytes(4) + a6(target) + opts, **kw)


def frame(dst_mac, payload, etype=0x86DD):
    return mac_bytes(dst_mac) + mac_bytes(PEER_MAC) + struct.pack("!H", etype) + payload


def parse6(f):
    ip = f[14:]
    plen, nh, hop = struct.unpack("!HBB", ip[4:8])
    body = ip[40:40 + plen]
    return dict(src=ip[8:24], dst=ip[24:40], nh=nh, hop=hop, body=body, tc=((ip[0] & 15) << 4) | (ip[1] >> 4),
                ok=ip[0] >> 4 == 6 and len(body) == plen and csum(ip[8:40] + struct.pack("!IxxxB", plen, nh) + body) == 0)


def parse_tcp6(f):
    p = parse6(f)
    t = p["body"]
    sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB", t[:14])
    mss = struct.unpack("!H", t[22:24])[0] if (off >> 4) * 4 >= 24 and t[20:22] == b"\x02\x04" else None
    return dict(p, sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, data=t[(off >> 4) * 4:], mss=mss,
                ok=p["ok"] and p["nh"] == 6)


def parse_ns(f, target):
    """A Neighbor Solicitation for target, as RFC 4861 wants it."""
    p = parse6(f)
    b = p["body"]
    return (p["ok"] and p["nh"] == 58 and p["hop"] == 255 and b[0] == 135 and b[8:24] == a6(target)
            and p["dst"] == solicited(target) and f[:6] == b"\x33\x33" + solicited(target)[12:]
            and b[24:26] == b"\x01\x01" and b[26:32] == f[6:12])


def received(h, n, timeout=5.0):
    """The worker's counters once it has taken n frames (a busy machine runs it late)."""
    deadline = time.monotonic() + timeout
    while counters(h)["pkts_rx"] < n and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    return counters(h)


@pytest.fixture
def served(eal):
    """An IPv6 server on ring:u6h:1 and a raw port on ring:u6h:0 playing the client."""
    with serving(server("ring:u6h:1", payload_size=3000, retransmit_timeout="300ms", retries=2), "ring:u6h:0") as it:
        yield it


def test_neighbor_solicitations_and_echo_are_answered(served):
    srv, raw, mac, _ = served
    echo = struct.pack("!HH", 7, 1) + b"perfkit ping -6"
    raw.send([frame("33:33:ff:00:00:02", ns(CLI, SRV)),                         # to the solicited-node group
              frame(mac, ns(CLI, SRV, dst=SRV)),                                 # unicast (NUD)
              frame(mac, icmp6(CLI, SRV, 128, 0, echo, hop=64))])
    na1, na2, rep = pull(raw, 3)
    for na in (na1, na2):
        p = parse6(na)
        b = p["body"]
        assert p["ok"] and p["hop"] == 255 and p["src"] == a6(SRV) and p["dst"] == a6(CLI)
        assert na[:6] == mac_bytes(PEER_MAC) and na[6:12] == mac_bytes(mac) and na[12:14] == b"\x86\xdd"
        assert b[0] == 136 and b[4] == 0x60 and b[8:24] == a6(SRV)                  # Solicited | Override
        assert b[24:26] == b"\x02\x01" and b[26:32] == mac_bytes(mac)               # target link-layer address
    p = parse6(rep)
    assert p["ok"] and p["body"][0] == 129 and p["body"][4:] == echo and p["src"] == a6(SRV) and p["dst"] == a6(CLI)
    # not answered: another target, a DAD probe (from ::), an echo to another address
    raw.send([frame("33:33:ff:00:00:09", ns(CLI, "2001:2:0:7::9")),
              frame("33:33:ff:00:00:02", ns("::", SRV, opts=b"")),
              frame(mac, icmp6(CLI, "2001:2:0:7::9", 128, 0, echo, hop=64))])
    c = received(srv, 6)
    assert raw.recv(64) == []
    assert c["icmp_rx"] == 6 and c["bad_rx"] == 0


def test_handshake_request_response_and_close_by_hand(served):
    srv, raw, mac, spec = served
    raw.send([frame(mac, tcp6(40000, 80, 1000, 0, SYN, opts=b"\x02\x04\x03\xe8"))])   # MSS 1000
    synack = parse_tcp6(pull(raw, 1)[0])
    assert synack["ok"] and synack["flags"] == SYN | ACK and synack["ack"] == 1001 and synack["mss"] == 1440
    assert synack["src"] == a6(SRV) and synack["dst"] == a6(CLI) and synack["hop"] == 64
    iss = synack["seq"]
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    raw.send([frame(mac, tcp6(40000, 80, 1001, iss + 1, ACK | PSH, req))])
    resp = spec.response_bytes()
    segs = [parse_tcp6(f) for f in pull(raw, -(-len(resp) // 1000))]
    assert all(g["ok"] and len(g["data"]) <= 1000 for g in segs)
    assert b"".join(g["data"] for g in segs) == resp and segs[-1]["flags"] & FIN
    end = iss + 1 + len(resp)
    raw.send([frame(mac, tcp6(40000, 80, 1001 + len(req), end + 1, ACK | FIN))])
    (last,) = [parse_tcp6(f) for f in pull(raw, 1)]
    assert last["ok"] and last["flags"] == ACK and last["ack"] == 1001 + len(req) + 1
    time.sleep(0.1)
    c = counters(srv)
    assert c["sock_open"] == c["sock_close"] == 1 and c["http_get"] == 1 and c["sock_current"] == 0
    # RSTs answer from the segment's own addresses: a client outside the ranges, a closed port
    raw.send([frame(mac, tcp6(40001, 80, 7, 0, SYN, src="2001:2:0:8::1")),
              frame(mac, tcp6(40002, 81, 7, 0, SYN))])
    r1, r2 = [parse_tcp6(f) for f in pull(raw, 2)]
    assert r1["ok"] and r1["flags"] == RST | ACK and r1["dst"] == a6("2001:2:0:8::1") and r1["ack"] == 8
    assert r2["ok"] and r2["flags"] == RST | ACK and r2["dport"] == 40002


def test_client_resolves_its_gateway_by_neighbor_discovery(eal):
    raw = _dpdk.Port("ring:u6g:1")
    cli = dpdk_tcp.build(client("ring:u6g:0", cps=1, duration=0.3, retransmit_timeout="100ms", retries=1))
    try:
        cmac = cli.port_list[0].mac
        cli.start()
        (q,) = pull(raw, 1, timeout=5)
        assert parse_ns(q, SRV)
        p = parse6(q)
        assert p["src"] == a6(CLI)
        # the Advertisement names a MAC other than the frame's: the option wins
        adv = bytes([0x60, 0, 0, 0]) + a6(SRV) + b"\x02\x01" + mac_bytes("02:00:00:00:00:77")
        raw.send([frame(cmac, icmp6(SRV, CLI, 136, 0, adv))])
        syn, deadline = None, time.monotonic() + 5
        while syn is None and time.monotonic() < deadline:
            syn = next((f for f in pull(raw, 1) if f[12:14] == b"\x86\xdd" and f[20] == 6), None)
        assert syn is not None, "no SYN after the Advertisement"
        g = parse_tcp6(syn)
        assert g["ok"] and g["flags"] == SYN and syn[:6] == mac_bytes("02:00:00:00:00:77") and g["mss"] == 1440
        wait_done(cli, timeout=10)
        assert cli.error() is None
    finally:
        cli.close()
        raw.close()
    no_leaks()


def test_vlan_tag_and_traffic_class_on_ipv6_frames(eal):
    with serving(server("ring:u6v:1", vlan=7, tos=0xb8), "ring:u6v:0") as (srv, raw, mac, _):
        seg = tcp6(40000, 80, 1, 0, SYN)
        tagged = mac_bytes(mac) + mac_bytes(PEER_MAC) + struct.pack("!HHH", 0x8100, 7, 0x86DD) + seg
        raw.send([frame(mac, seg), tagged])                     # untagged (not ours), then our VLAN
        (f,) = pull(raw, 1)
        assert f[12:16] == struct.pack("!HH", 0x8100, 7) and f[16:18] == b"\x86\xdd"
        g = parse_tcp6(f[:12] + f[16:])
        assert g["ok"] and g["tc"] == 0xb8 and g["flags"] == SYN | ACK and g["ack"] == 2
        assert received(srv, 2)["other_rx"] == 1


def _malformed(mac):
    good = tcp6(40004, 80, 1, 0, SYN)
    echo = struct.pack("!HH", 1, 1) + b"x"
    out = [
        good[:30],                                                         # cut inside the IPv6 header
        ip6(CLI, SRV, 6, good[40:], plen=200),                             # payload length past the frame
        ip6(CLI, SRV, 6, good[40:], version=4),                            # version 4 in an IPv6 frame
        ip6(CLI, SRV, 6, good[40:52]),                                     # TCP header cut (12 bytes)
        tcp6(40004, 80, 1, 0, SYN, doff=15),                               # data offset past the end
        tcp6(40004, 80, 1, 0, SYN, doff=3),                                # data offset below 20
        tcp6(40004, 80, 1, 0, SYN, ck=0x1234),                             # wrong checksum
        tcp6(40004, 80, 1, 0, SYN | FIN),                                  # SYN+FIN
        tcp6(40004, 80, 1, 0, SYN, opts=b"\x02\x09\x00\x00"),              # option past the header
        icmp6(CLI, SRV, 128, 0, echo, ck=0x4321),                          # ICMPv6 checksum
        icmp6(CLI, SRV, 128, 0, b"", hop=64),                              # ICMPv6 shorter than 8
        ns(CLI, SRV, hop=64),                                              # ND with hop limit 64
        icmp6(CLI, SRV, 135, 1, bytes(4) + a6(SRV)),                       # ND code 1
        icmp6(CLI, SRV, 135, 0, bytes(4) + a6(SRV)[:8]),                   # NS without a whole target
        ns(CLI, SRV, opts=b"\x01\x00" + bytes(6)),                         # option length 0
        ns(CLI, SRV, opts=b"\x01\x02" + bytes(6)),                         # option past the message
        ns(CLI, SRV, opts=b"\x01"),                                        # option cut after its type
        icmp6(CLI, SRV, 135, 0, bytes(4) + a6("ff02::1")),                 # multicast target
    ]
    return [frame(mac, b) for b in out]


def test_malformed_ipv6_frames_are_counted_never_crash(served):
    srv, raw, mac, _ = served
    bad = _malformed(mac)
    raw.send(bad)
    c = received(srv, len(bad))
    assert raw.recv(64) == []                                              # nothing answered
    assert c["bad_rx"] == len(bad) and c["sock_open"] == 0 and c["syn_rx"] == 0
    # No Next Header after the fixed header is not read (other), IPv4 is not ours (dropped); still serving
    raw.send([frame(mac, ip6(CLI, SRV, NONEXT, b"")),
              frame(mac, bytes.fromhex("4500002800004000400600000a0000010a000002") + bytes(20), 0x0800)])
    c = received(srv, len(bad) + 2)
    assert c["other_rx"] == 1 and c["bad_rx"] == len(bad) + 1               # the IPv4 header checksum is 0
    raw.send([frame(mac, tcp6(40004, 80, 1, 0, SYN))])
    assert parse_tcp6(pull(raw, 1)[0])["flags"] == SYN | ACK


def test_extension_headers_before_tcp_and_icmpv6_are_walked(served):
    """Hop-by-Hop (MLD's Router Alert), Destination Options and a Routing header with no
    segments left lie between the fixed header and TCP or ICMPv6: the whole exchange runs
    through them; the checksums' pseudo header has the upper layer's length only."""
    srv, raw, mac, spec = served
    hbh, dst = opts_hdr(HBH, ROUTER_ALERT), opts_hdr(DSTOPTS, b"\x1e\x03abc")     # 0x1e: unknown, skip
    raw.send([frame(mac, tcp6(40000, 80, 1000, 0, SYN, opts=b"\x02\x04\x03\xe8", ext=[hbh]))])
    synack = parse_tcp6(pull(raw, 1)[0])
    assert synack["ok"] and synack["flags"] == SYN | ACK and synack["ack"] == 1001 and synack["mss"] == 1440
    iss = synack["seq"]
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    long_chain = [hbh, dst, routing_hdr(0), opts_hdr(DSTOPTS, bytes(200))]        # 4 headers, 8 + 8 + 8 + 208 bytes
    raw.send([frame(mac, tcp6(40000, 80, 1001, iss + 1, ACK | PSH, req, ext=long_chain))])
    resp = spec.response_bytes()
    segs = [parse_tcp6(f) for f in pull(raw, -(-len(resp) // 1000))]
    assert all(g["ok"] for g in segs) and b"".join(g["data"] for g in segs) == resp
    end = iss + 1 + len(resp)
    raw.send([frame(mac, tcp6(40000, 80, 1001 + len(req), end + 1, ACK | FIN, ext=[dst]))])
    (last,) = [parse_tcp6(f) for f in pull(raw, 1)]
    assert last["ok"] and last["flags"] == ACK and last["ack"] == 1001 + len(req) + 1
    # an echo behind Destination Options: the reply carries the message alone (no extension headers)
    echo = struct.pack("!HH", 9, 3) + b"perfkit ping -6 with options"
    raw.send([frame(mac, icmp6(CLI, SRV, 128, 0, echo, hop=64, ext=[dst])),
              frame("33:33:ff:00:00:02", ns(CLI, SRV, ext=[hbh]))])             # ND behind Hop-by-Hop
    rep, na = sorted(pull(raw, 2), key=lambda f: parse6(f)["body"][:1])     # 129 (echo reply), 136 (NA)
    p = parse6(rep)
    assert p["ok"] and p["nh"] == 58 and p["body"][0] == 129 and p["body"][4:] == echo
    assert p["src"] == a6(SRV) and p["dst"] == a6(CLI) and len(rep) == 14 + 40 + 4 + len(echo)
    assert parse6(na)["ok"] and parse6(na)["body"][0] == 136
    c = received(srv, 5)
    assert c["sock_open"] == c["sock_close"] == 1 and c["http_get"] == 1 and c["sock_current"] == 0
    assert c["tcp_rx"] == 3 and c["icmp_rx"] == 2 and c["bad_rx"] == c["other_rx"] == c["tcp_drop"] == 0


def test_fragments_routing_and_bad_extension_chains_are_counted_never_answered(served):
    srv, raw, mac, _ = served
    syn = dict(sport=40010, dport=80, seq=1, ack=0, flags=SYN)

    def tcp(ext, **kw):
        return frame(mac, tcp6(**syn, ext=ext, **kw))
    other = [                                                        # well formed, not for perfkit: other_rx
        tcp([fragment_hdr(0, more=True)]),                           # a first fragment (no reassembly)
        tcp([fragment_hdr(0, more=False)]),                          # an atomic fragment
        tcp([opts_hdr(DSTOPTS), fragment_hdr(185, more=False)]),     # a last fragment behind options
        tcp([routing_hdr(1)]),                                       # segments left: not at its destination
        tcp([opts_hdr(DSTOPTS, b"\x80\x02\x00\x00")]),               # unknown option, type says discard
        tcp([opts_hdr(HBH, b"\xc2\x04" + struct.pack("!I", 70000))]),  # Jumbo Payload: not supported
        frame(mac, ip6(CLI, SRV, DSTOPTS, bytes([NONEXT]) + bytes(7))),  # No Next Header after options
    ]
    good_tcp = tcp6(**syn)[40:]
    bad = [                                                          # malformed or past the limits: bad_rx
        tcp([opts_hdr(DSTOPTS), opts_hdr(HBH)]),                     # Hop-by-Hop not first
        tcp([opts_hdr(DSTOPTS)] * 9),                                # 9 headers (8 are walked)
        tcp([opts_hdr(DSTOPTS, bytes(1030))]),                       # 1032 bytes of them (1024 at most)
        tcp([opts_hdr(DSTOPTS, b"\x01\x09" + bytes(4))]),            # PadN past its header
        tcp([opts_hdr(DSTOPTS, bytes(5) + b"\x05")]),                # an option cut after its type
        frame(mac, ip6(CLI, SRV, DSTOPTS, bytes([6, 1]) + bytes(6))),  # header length 16, 8 bytes there
        frame(mac, ip6(CLI, SRV, HBH, bytes([6, 0, 1, 2]))),         # a header cut at 4 bytes
        frame(mac, ip6(CLI, SRV, FRAGMENT, bytes([6, 0, 0]))),       # a Fragment header cut
        frame(mac, ip6(CLI, SRV, ROUTING, bytes([6, 0, 4, 0]) + bytes(4) + good_tcp[:10])),  # TCP cut behind it
        # a TCP checksum whose pseudo header counts the extension headers in the length
        tcp([opts_hdr(DSTOPTS)], ck=csum(a6(CLI) + a6(SRV) + struct.pack("!IxxxB", 8 + len(good_tcp), 6)
                                         + good_tcp[:16] + b"\0\0" + good_tcp[18:])),
    ]
    raw.send(other + bad)
    c = received(srv, len(other) + len(bad))
    assert raw.recv(64) == []                                        # nothing answered, no socket
    assert c["other_rx"] == len(other) and c["bad_rx"] == len(bad)
    assert c["tcp_rx"] == c["syn_rx"] == c["sock_open"] == 0
    # at the limits, still walked: 8 headers; 1024 bytes of them
    raw.send([tcp([opts_hdr(DSTOPTS)] * 8), frame(mac, tcp6(40011, 80, 1, 0, SYN, ext=[opts_hdr(DSTOPTS, bytes(1022))]))])
    got = sorted(parse_tcp6(f)["dport"] for f in pull(raw, 2) if parse_tcp6(f)["flags"] == SYN | ACK)
    assert got == [40010, 40011]


def _fuzz6(rng, mac, n, src, dst, ports, lports):
    """Random IPv6 segments and ICMPv6/ND messages with valid checksums (any flags,
    numbers, options, payload, ND options), some behind extension headers, some cut anywhere."""
    kinds = [lambda: opts_hdr(HBH, ROUTER_ALERT), lambda: opts_hdr(DSTOPTS, bytes(rng.choice((0, 6, 14)))),
             lambda: routing_hdr(rng.choice((0, 0, 1))), lambda: fragment_hdr(rng.choice((0, 9)))]
    out = []
    for _ in range(n):
        ext = [rng.choice(kinds)() for _ in range(rng.choice((1, 2, 3, 9)))] if rng.random() < 0.15 else []
        r = rng.random()
        if r < 0.7:
            opts = bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 0, 4, 8, 12))))
            payload = bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 0, 1, 20, 200))))
            b = tcp6(rng.choice(lports), rng.choice(ports), rng.getrandbits(32), rng.getrandbits(32),
                     rng.getrandbits(6), payload, opts=opts, src=src, dst=dst, ext=ext)
        else:
            typ = rng.choice((128, 129, 133, 134, 135, 135, 136, 136, rng.getrandbits(8)))
            target = dst if rng.random() < 0.7 else src
            body = bytes(4) + a6(target) + bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 2, 8, 9, 16))))
            if rng.random() < 0.3:
                body = body[:rng.randrange(len(body) + 1)]
            where = rng.choice((dst, str(ipaddress.IPv6Address(solicited(dst))), "ff02::1"))
            b = icmp6(src, where, typ, rng.choice((0, 0, 0, 1)), body, hop=rng.choice((255, 255, 64)), ext=ext)
        f = frame(mac, b)
        if rng.random() < 0.1:
            f = f[:rng.randrange(14, len(f))]
        out.append(f)
    return out


@pytest.mark.parametrize("seed", [16])
def test_fuzzed_ipv6_frames_never_crash_server_or_client(eal, seed):
    rng = random.Random(seed)
    c = fuzz_server(server("ring:u6z:1", payload_size=2000, retransmit_timeout="20ms", retries=1), "ring:u6z:0",
                    lambda mac: _fuzz6(rng, mac, 5000, CLI, SRV, [80, 80, 81], [40000, 40001, rng.randrange(65536)]))
    assert c["bad_rx"] > 0 and c["tcp_rx"] > 0 and c["icmp_rx"] > 0
    assert c["sock_open"] > 0 and c["rst_tx"] > 0
    c = fuzz_client(lambda gw: client("ring:u6z:0", cps=200, duration=1.0, gateway_mac=gw, lport_range=(3000, 3003),
                                      retransmit_timeout="20ms", retries=1), "ring:u6z:1",
                    lambda mac: _fuzz6(rng, mac, 5000, SRV, CLI, [3000, 3001, 3002, 3003], [80]))
    assert c["bad_rx"] > 0
    no_leaks()


# ------------------------------------------------------------------ specs and dperf configurations

def test_spec_addresses_are_one_family():
    with pytest.raises(ValueError, match=r"clients: 198.18.0.1 is IPv4 but the port's address is IPv6"):
        DpdkHttpServer(ip=SRV)
    with pytest.raises(ValueError, match=r"server: 198.18.0.2 is IPv4 but the port's address is IPv6"):
        DpdkHttpClient(ip=CLI, clients=((CLI, 1),))
    with pytest.raises(ValueError, match=r"ip: 2606:4700::1 is refused by the network guard"):
        DpdkHttpServer(ip="2606:4700::1")
    with pytest.raises(ValueError, match=r"pass \.\.\.ff"):
        DpdkHttpServer(ip=SRV, clients=(("2001:2::f0", 20),))
    with pytest.raises(ValueError, match=r"differ before their last 4 bytes"):
        DpdkHttpServer(ip=SRV, clients=((CLI, 1), ("2001:2:0:8::1", 1)))
    assert DpdkHttpServer(ip=SRV, clients=(f"{CLI}+3",)).clients == ((CLI, 3),)
    assert client("ring:x:0").mss == 1440 and client("ring:x:0", mss=1000).mss == 1000
    assert client("ring:x:0").ip_version == 6 and DpdkHttpClient().ip_version == 4 and DpdkHttpClient().mss == 1460


CONF6 = """mode client
cpu 0
duration 1s
cps 300
wait 0
slow_start 10
port ring:d6:0 2001:2:0:9::1 2001:2:0:9::2
client 2001:2:0:9::1 1
server 2001:2:0:9::2 1
listen 80 1
"""
SERVER6 = """mode server
cpu 0
duration 30s
port ring:d6:1 2001:2:0:9::2 2001:2:0:9::1
client 2001:2:0:9::1 1
server 2001:2:0:9::2 1
listen 80 1
payload_size 200
"""


def test_dperf_conf_with_ipv6_addresses():
    s = dperf.parse(CONF6, source="c.conf").to_spec()
    assert isinstance(s, DpdkHttpClient) and s.ip == "2001:2:0:9::1" and s.server == "2001:2:0:9::2"
    assert s.gateway == "2001:2:0:9::2" and s.mss == 1440 and s.clients == (("2001:2:0:9::1", 1),)
    srv = dperf.parse(SERVER6).to_spec()
    assert srv.ip == "2001:2:0:9::2" and srv.clients == (("2001:2:0:9::1", 1),)


@pytest.mark.parametrize("old,new,match", [
    ("port ring:d6:0 2001:2:0:9::1 2001:2:0:9::2", "port ring:d6:0 2001:2:0:9::1 2001:2:0:9:::2",
     r"c.conf:7: port: '2001:2:0:9:::2' is not an IP address \(gateway, IPv4 or IPv6\)"),
    ("client 2001:2:0:9::1 1", "client 2001:2:0:9::1x 1", r"c.conf:8: client: '2001:2:0:9::1x' is not an IP address"),
    ("server 2001:2:0:9::2 1", "server 198.18.0.2 1", r"c.conf:9: server: 198.18.0.2 is IPv4 \(address\) but"),
    ("port ring:d6:0 2001:2:0:9::1 2001:2:0:9::2", "port ring:d6:0 2001:2:0:9::1 198.18.0.2",
     r"c.conf:7: port: 198.18.0.2 is IPv4 \(gateway\)"),
    ("client 2001:2:0:9::1 1", "client 2606:4700::1 1", r"c.conf:8: client: clients: 2606:4700::1 is refused by the "
                                                         r"network guard"),
])
def test_malformed_ipv6_conf_lines_name_the_line(old, new, match):
    with pytest.raises(dperf.DperfError, match=match):
        dperf.parse(CONF6.replace(old, new), source="c.conf").to_spec()


def test_perfkit_dperf_runs_ipv6_confs(tmp_path):
    s, c = tmp_path / "server.conf", tmp_path / "client.conf"
    s.write_text(SERVER6)
    c.write_text(CONF6)
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", "dperf", "-c", str(s), "-c", str(c)],
                       capture_output=True, text=True, timeout=60)
    if p.returncode == 1 and "EAL" in p.stderr:
        pytest.skip(f"DPDK EAL does not start here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    srv_part, cli_part = p.stdout.split(f"{c} (client):")

    def totals(text):
        block = text.split("Total Numbers:")[1].split("-----")[0]
        return {k: int(v.replace(",", "")) for k, v in re.findall(r"(\w+)\s+([\d,]+)", block)}
    srv, cli = totals(srv_part), totals(cli_part)
    n = cli["skOpen"]
    # dperf runs slow_start + duration: 300 cps reached over 10 s (1,500), then 1 s at 300: 1,800
    assert 1750 <= n <= 1801
    assert cli["http2XX"] == cli["skClose"] == srv["httpGet"] == srv["skClose"] == n
    assert cli["skErr"] == srv["skErr"] == cli["httpErr"] == cli["badRx"] == srv["badRx"] == 0
    bad = tmp_path / "bad.conf"
    bad.write_text(CONF6.replace("client 2001:2:0:9::1 1", "client 2001:2:0:9::zz 1"))
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", "dperf", "-c", str(bad)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1
    assert f"{bad}:8: client: '2001:2:0:9::zz' is not an IP address" in p.stderr
