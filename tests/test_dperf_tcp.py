"""perfkit's TCP over DPDK (issue 6): HTTP server and client workers.

In this process over in-process ring pairs (ring:NAME:0 <-> ring:NAME:1): client
and server count the same connections, segments and requests exactly. Segments
built here by hand go through a raw Port at the other end of a pair to check the
handshake, ARP/ICMP answers, RSTs and that malformed segments are counted, never
crash. Against the Linux stack (curl, nginx) see test_dperf_lab.py.
"""
import functools
import ipaddress
import re
import struct
import time

import pytest

from perfkit.spec import DpdkHttpClient, DpdkHttpServer

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk_tcp  # noqa: E402

from _dpdk_tests import (counters as _counters, csum, fuzz_client, fuzz_server, mac_bytes,  # noqa: E402,F401
                         no_leaks, pull, run_pair as _run_pair, serving, wait_done as _wait_done,
                         close_while_another_thread_joins)

CLI, SRV = "198.18.0.1", "198.18.0.2"


def counters(h):
    return _counters(h, 0)


def wait_done(h, timeout=20.0):
    _wait_done(h, timeout)


run_pair = functools.partial(_run_pair, stop_timeout=20.0)


def test_cps_run_counts_agree_exactly(eal):
    c, s, _ = run_pair(DpdkHttpServer(port="ring:ta:1", payload_size=100, duration=30),
                       DpdkHttpClient(port="ring:ta:0", cps=500, duration=1, launch_num=4))
    n = c["sock_open"]
    assert 450 <= n <= 550                                   # 500 cps for 1 s, launched in batches
    assert c["sock_close"] == n and c["sock_error"] == 0 and c["sock_current"] == 0
    assert c["http_req"] == c["http_get"] == c["http_resp"] == c["http_2xx"] == n
    assert c["http_err"] == 0 and c["err_read"] == 0
    assert s["sock_open"] == s["sock_close"] == s["http_get"] == n and s["sock_current"] == 0
    # one SYN, request, FIN each way per connection; no loss on a ring, so no retransmission
    for k in ("syn", "fin"):
        assert c[f"{k}_tx"] == s[f"{k}_rx"] == s[f"{k}_tx"] == c[f"{k}_rx"] == n
    assert c["pkts_tx"] == s["pkts_rx"] and s["pkts_tx"] == c["pkts_rx"]
    assert c["bytes_tx"] == s["bytes_rx"] and s["bytes_tx"] == c["bytes_rx"]
    for side in (c, s):
        assert side["retrans_syn"] == side["retrans_fin"] == side["retrans_push"] == 0
        assert side["bad_rx"] == side["tcp_drop"] == side["drop_tx"] == side["rst_tx"] == 0
    assert c["lat_count"] == n and 0 < c["lat_min_ns"] <= c["lat_max_ns"]   # response times
    no_leaks()


def test_address_and_port_ranges_reuse_sockets_without_time_wait(eal):
    """4 client addresses x 50 ports x 3 listen ports = 600 sockets for ~900 connections:
    the client's cursor wraps and reuses tuples at once (no TIME_WAIT on either side)."""
    c, s, _ = run_pair(DpdkHttpServer(port="ring:tm:1", payload_size=10, listen=8080, listen_num=3,
                                      clients=(("198.18.0.10", 4),), duration=30),
                       DpdkHttpClient(port="ring:tm:0", ip="198.18.0.10", clients=(("198.18.0.10", 4),),
                                      lport_range=(2000, 2049), listen=8080, listen_num=3, cps=600,
                                      duration=1.5, launch_num=8))
    n = c["sock_open"]
    assert n > 600                                            # more connections than sockets
    assert c["http_2xx"] == s["http_get"] == s["sock_close"] == c["sock_close"] == n
    assert c["sock_error"] == s["sock_error"] == 0 and s["tcp_drop"] == 0
    no_leaks()


def test_syn_flood_keeps_no_sockets(eal):
    c, s, _ = run_pair(DpdkHttpServer(port="ring:tn:1", duration=30),
                       DpdkHttpClient(port="ring:tn:0", cps=2000, duration=0.5, flood=True, launch_num=16))
    n = c["syn_tx"]
    assert 300 <= n <= 1020 and c["sock_open"] == 0 and c["http_req"] == 0   # 2000/s for 0.5 s (a busy CPU: fewer)
    assert s["syn_rx"] == s["syn_tx"] == s["sock_open"] == n       # the server answers every SYN
    assert c["syn_rx"] == c["rst_tx"] == s["rst_rx"] == n          # and is reset: nothing was kept here
    assert s["sock_current"] == 0 and s["sock_error"] == s["err_reset"] == n
    no_leaks()


def test_change_dip_sends_the_floods_syns_to_its_addresses_in_turn(eal):
    """dperf's change_dip: SYN k goes to address k % 2 of the list. The server serves the
    first (SYN-ACK, then the client's RST); the second is no address of its: each SYN there
    is its tcp_drop, unanswered. Every SYN is on one side or the other."""
    c, s, _ = run_pair(DpdkHttpServer(port="ring:td:1", duration=30),
                       DpdkHttpClient(port="ring:td:0", cps=2000, duration=0.5, flood=True, launch_num=16,
                                      change_dip=(("198.18.0.2", 1, 1), ("198.18.0.9", 1, 1))))
    n = c["syn_tx"]
    print({k: (c[k], s[k]) for k in ("syn_tx", "syn_rx", "tcp_drop", "rst_tx", "rst_rx", "sock_open")})
    assert n >= 100 and c["sock_open"] == 0 and c["http_req"] == 0
    assert s["syn_rx"] == s["sock_open"] == s["syn_tx"] == (n + 1) // 2   # SYNs 0, 2, 4, ... to 198.18.0.2
    assert s["tcp_drop"] == n // 2 and s["rst_tx"] == 0                   # 1, 3, 5, ... to 198.18.0.9
    assert c["syn_rx"] == c["rst_tx"] == s["rst_rx"] == (n + 1) // 2     # the SYN-ACKs reset
    assert c["rst_rx"] == 0
    no_leaks()


def test_vlan_tagged_both_ways(eal):
    c, s, _ = run_pair(DpdkHttpServer(port="ring:tv:1", payload_size=3000, vlan=100, tos=0x20, duration=30),
                       DpdkHttpClient(port="ring:tv:0", cps=300, duration=0.5, vlan=100, tos=0x20))
    n = c["sock_open"]
    assert n >= 100 and c["http_2xx"] == s["http_get"] == s["sock_close"] == n and c["sock_error"] == 0
    assert c["other_rx"] == s["other_rx"] == 0 and c["bad_rx"] == s["bad_rx"] == 0
    no_leaks()


def test_vlan_frames_are_tagged_and_others_ignored(eal):
    with serving(DpdkHttpServer(port="ring:tw:1", vlan=7, tos=0xb8, duration=30), "ring:tw:0",
                 timeout=20.0) as (srv, raw, mac, _):
        seg = ip4(CLI, SRV, 6, tcp(40000, 80, 1, 0, SYN))
        tagged = lambda vid: mac_bytes(mac) + mac_bytes(PEER_MAC) + struct.pack("!HHH", 0x8100, vid, 0x0800) + seg  # noqa: E731
        raw.send([frame(mac, seg), tagged(8), tagged(7)])   # untagged, another VLAN, ours
        (f,) = pull(raw, 1)
        time.sleep(0.1)
        assert raw.recv(64) == []
        assert f[12:16] == struct.pack("!HH", 0x8100, 7) and f[16:18] == b"\x08\x00"
        assert f[19] == 0xb8                                    # TOS
        g = parse_tcp(f[:12] + f[16:])
        assert g["ok"] and g["flags"] == SYN | ACK and g["ack"] == 2
        c = counters(srv)
        assert c["other_rx"] == 2 and c["syn_rx"] == 1


def test_large_responses_go_in_many_segments(eal):
    body = 50_000                                            # 35 segments of 1460
    c, s, _ = run_pair(DpdkHttpServer(port="ring:tb:1", payload_size=body, duration=30),
                       DpdkHttpClient(port="ring:tb:0", cps=100, duration=0.5))
    n = c["sock_open"]  # about 50; a loaded machine launched 36 once: what matters is the segments
    assert n >= 10 and c["http_2xx"] == s["http_get"] == n and c["sock_error"] == 0
    resp = len(DpdkHttpServer(payload_size=body).response_bytes())
    segs = -(-resp // 1460)
    # server: SYN-ACK + segments (FIN on the last) + the last ACK per connection, and one ARP reply
    assert s["pkts_tx"] == n * (segs + 2) + c["arp_rx"]
    assert c["bytes_rx"] == s["bytes_tx"]
    no_leaks()


def test_mss_option_lowers_the_segment_size(eal):
    c, s, _ = run_pair(DpdkHttpServer(port="ring:tc:1", payload_size=5000, duration=30),
                       DpdkHttpClient(port="ring:tc:0", cps=50, duration=0.4, mss=536))
    n = c["http_2xx"]
    assert n >= 15 and s["http_get"] == n and c["sock_error"] == 0
    resp = len(DpdkHttpServer(payload_size=5000).response_bytes())
    # the server sends 536-byte segments to this client: SYN-ACK + ceil(resp/536) + the last ACK
    assert s["pkts_tx"] == n * (2 + -(-resp // 536)) + c["arp_rx"]
    no_leaks()


def test_keepalive_concurrency_holds_its_target(eal):
    cc = 30

    def current(cli, srv):
        return counters(cli)["sock_current"], counters(srv)["sock_current"]

    c, s, samples = run_pair(
        DpdkHttpServer(port="ring:td:1", payload_size=64, keepalive=True, duration=30),
        DpdkHttpClient(port="ring:td:0", cps=300, cc=cc, keepalive="20ms", duration=1.5),
        during=current)
    assert all(cl <= cc and sv <= cc for cl, sv in samples)  # never passed
    held = [cl for cl, _ in samples[len(samples) // 2: 3 * len(samples) // 4]]
    assert held and set(held) == {cc}                        # reached and held
    assert c["http_2xx"] == c["http_req"] == s["http_get"] and c["http_err"] == 0
    assert c["http_req"] > c["sock_open"] * 10               # requests per connection: keep-alive
    assert c["sock_open"] == c["sock_close"] == s["sock_open"] == s["sock_close"] == cc
    assert c["sock_error"] == s["sock_error"] == 0 and s["sock_current"] == 0
    no_leaks()


def test_close_from_another_thread_while_join_waits(eal):
    close_while_another_thread_joins(dpdk_tcp.build(DpdkHttpServer(port="ring:tj:1", duration=30)))


def test_fast_close_ends_with_rst(eal):
    c, s, _ = run_pair(DpdkHttpServer(port="ring:te:1", payload_size=10, keepalive=True, duration=30),
                       DpdkHttpClient(port="ring:te:0", cps=200, duration=0.5, fast_close=True))
    n = c["http_2xx"]
    assert n >= 80 and c["rst_tx"] == s["rst_rx"] == n and c["fin_tx"] == 0
    assert c["sock_close"] == n and s["sock_close"] + s["sock_error"] == n
    assert s["err_reset"] == 0 or s["sock_error"] == s["err_reset"]
    no_leaks()


def test_retransmission_when_the_server_is_late(eal):
    """The server starts after the client: SYNs are retransmitted, every connection
    completes or is counted as an error, nothing hangs."""
    srv = dpdk_tcp.build(DpdkHttpServer(port="ring:tf:1", payload_size=10, duration=30))
    cli = dpdk_tcp.build(DpdkHttpClient(port="ring:tf:0", cps=100, duration=0.6, gateway_mac="02:00:00:00:00:02",
                                        retransmit_timeout="100ms", retries=5))
    try:
        cli.start()
        time.sleep(0.25)
        srv.start()
        wait_done(cli)
        time.sleep(0.2)
        srv.stop()
        wait_done(srv)
        c, s = counters(cli), counters(srv)
    finally:
        cli.close()
        srv.close()
    assert c["retrans_syn"] > 0
    assert c["sock_open"] == c["sock_close"] + c["sock_error"] and c["sock_current"] == 0
    assert c["http_2xx"] == c["sock_close"] == s["http_get"] >= 40
    no_leaks()


def test_client_reports_an_unanswered_arp(eal):
    cli = dpdk_tcp.build(DpdkHttpClient(port="ring:tg:0", cps=10, duration=0.2))
    try:
        cli.start()
        wait_done(cli, timeout=10)
        err = cli.error()
        assert "no ARP reply from 198.18.0.2 on port" in err
        asked = re.search(r"\((\d+) requests in ([\d.]+) s, 0 of them with the link down; 0 frames received", err)
        assert asked and 3.0 <= float(asked[2]) < 3.5 and 14 <= int(asked[1]) <= 17, err   # every 200 ms for 3 s
    finally:
        cli.close()
    no_leaks()


# ------------------------------------------------------------------ segments by hand

PEER_MAC = "02:00:00:00:00:01"


def ip4(src, dst, proto, payload, *, tot=None, frag=0x4000):
    tot = 20 + len(payload) if tot is None else tot
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, tot, 0, frag, 64, proto, 0,
                    ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed)
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload


def tcp(sport, dport, seq, ack, flags, payload=b"", *, opts=b"", src=CLI, dst=SRV, doff=None, ck=None):
    doff = (20 + len(opts)) // 4 if doff is None else doff
    h = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, 65535, 0, 0) + opts
    pseudo = ipaddress.IPv4Address(src).packed + ipaddress.IPv4Address(dst).packed + struct.pack(
        "!BBH", 0, 6, len(h) + len(payload))
    c = csum(pseudo + h + payload) if ck is None else ck
    return h[:16] + struct.pack("!H", c) + h[18:] + payload


def frame(dst_mac, payload, etype=0x0800):
    return mac_bytes(dst_mac) + mac_bytes(PEER_MAC) + struct.pack("!H", etype) + payload


def parse_tcp(f):
    ip = f[14:]
    ihl = (ip[0] & 15) * 4
    t = ip[ihl:]
    sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB", t[:14])
    return dict(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, data=t[(off >> 4) * 4:],
                ok=csum(ip[12:20] + struct.pack("!BBH", 0, 6, len(t)) + t) == 0 and csum(ip[:ihl]) == 0)


SYN, FIN, RST, PSH, ACK = 0x02, 0x01, 0x04, 0x08, 0x10


@pytest.fixture
def served(eal):
    """A server on ring:th:1 and a raw port on ring:th:0 playing the client."""
    spec = DpdkHttpServer(port="ring:th:1", payload_size=3000, duration=30, retransmit_timeout="300ms", retries=2)
    with serving(spec, "ring:th:0", timeout=20.0) as it:
        yield it


def test_handshake_request_response_and_close_by_hand(served):
    srv, raw, mac, spec = served
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40000, 80, 1000, 0, SYN, opts=b"\x02\x04\x02\x18")))])  # MSS 536
    synack = parse_tcp(pull(raw, 1)[0])
    assert synack["ok"] and synack["flags"] == SYN | ACK and synack["ack"] == 1001
    iss = synack["seq"]
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40000, 80, 1001, iss + 1, ACK | PSH, req)))])
    resp = spec.response_bytes()
    segs = [parse_tcp(f) for f in pull(raw, -(-len(resp) // 536))]
    assert all(g["ok"] and len(g["data"]) <= 536 for g in segs)
    assert b"".join(g["data"] for g in segs) == resp
    assert segs[-1]["flags"] & FIN                             # no keep-alive: FIN with the response
    end = iss + 1 + len(resp)
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40000, 80, 1001 + len(req), end + 1, ACK | FIN)))])
    (last,) = [parse_tcp(f) for f in pull(raw, 1)]
    assert last["flags"] == ACK and last["ack"] == 1001 + len(req) + 1
    time.sleep(0.1)
    c = counters(srv)
    assert c["sock_open"] == c["sock_close"] == 1 and c["http_get"] == 1 and c["sock_current"] == 0
    # no TIME_WAIT: the FIN again (our ACK was "lost") is acknowledged from the segment itself
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40000, 80, 1001 + len(req), end + 1, ACK | FIN)))])
    (again,) = [parse_tcp(f) for f in pull(raw, 1)]
    assert again["flags"] == ACK and again["ack"] == 1001 + len(req) + 1 and again["seq"] == end + 1


def test_lost_segments_are_retransmitted_then_given_up(served):
    srv, raw, mac, spec = served
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40001, 80, 5000, 0, SYN)))])
    first = [parse_tcp(f) for f in pull(raw, 1)]
    again = [parse_tcp(f) for f in pull(raw, 2, timeout=2.0)]      # never acknowledged: 2 retries
    assert first[0]["flags"] == again[0]["flags"] == again[1]["flags"] == SYN | ACK
    rst = [parse_tcp(f) for f in pull(raw, 1, timeout=2.0)]
    assert rst and rst[0]["flags"] & RST
    c = counters(srv)
    assert c["retrans_syn"] == 2 and c["sock_error"] == 1 and c["err_timeout"] == 1 and c["sock_current"] == 0


def _exchange(raw, mac, spec, sport):
    """Handshake (MSS 1460) and one request by hand: (the server's ISS, the request, the
    response's segments)."""
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(sport, 80, 1000, 0, SYN, opts=b"\x02\x04\x05\xb4")))])
    iss = parse_tcp(pull(raw, 1)[0])["seq"]
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(sport, 80, 1001, iss + 1, ACK | PSH, req)))])
    resp = spec.response_bytes()
    segs = [parse_tcp(f) for f in pull(raw, -(-len(resp) // 1460))]
    assert b"".join(g["data"] for g in segs) == resp and segs[-1]["flags"] & FIN
    return iss, req, segs


def test_an_unacknowledged_fin_after_a_whole_exchange_is_a_close_timeout(served):
    """Issue 32: a peer that drops FINs for sockets it closed (dperf does) leaves our FIN
    unacknowledged after a whole exchange: counted in close_timeout and sock_close, not
    sock_error (failed exchanges only)."""
    srv, raw, mac, spec = served
    iss, req, segs = _exchange(raw, mac, spec, 40010)
    end = iss + 1 + len(spec.response_bytes())
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40010, 80, 1001 + len(req), end, ACK)))])   # the data, not the FIN
    again = [parse_tcp(f) for f in pull(raw, 3, timeout=3.0)]      # 2 retries of the FIN, then a RST
    assert [g["flags"] & (FIN | RST) for g in again] == [FIN, FIN, RST], again
    time.sleep(0.05)
    c = counters(srv)
    assert c["close_timeout"] == 1 and c["sock_close"] == 1 and c["sock_error"] == 0 and c["err_timeout"] == 0
    assert c["retrans_fin"] == 2 and c["fin_tx"] - c["retrans_fin"] == c["sock_close"] and c["sock_current"] == 0


def test_a_response_sent_again_with_its_fin_counts_in_retrans_fin(served):
    """Issue 32: FIN-bearing frames no retransmit counter recorded (fin_tx - sock_close with
    retrans_fin 0 on lossy runs): the last segment of a response sent again carries the FIN again."""
    srv, raw, mac, spec = served
    iss, req, segs = _exchange(raw, mac, spec, 40011)
    last = len(segs[-1]["data"])
    end = iss + 1 + len(spec.response_bytes())
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40011, 80, 1001 + len(req), end - last, ACK)))])   # all but the last
    (rt,) = [parse_tcp(f) for f in pull(raw, 1, timeout=2.0)]
    assert rt["flags"] & FIN and len(rt["data"]) == last
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40011, 80, 1001 + len(req), end + 1, ACK | FIN)))])
    pull(raw, 1)
    time.sleep(0.05)
    c = counters(srv)
    assert c["retrans_push"] == 1 and c["retrans_fin"] == 1 and c["fin_tx"] == 2
    assert c["fin_tx"] - c["retrans_fin"] == c["sock_close"] == 1 and c["sock_error"] == c["close_timeout"] == 0


def test_rst_for_closed_ports_and_unknown_connections(served):
    srv, raw, mac, _ = served
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40002, 81, 7, 0, SYN)))])       # not listening
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40003, 80, 7, 99, ACK, b"x")))])  # no connection
    got = [parse_tcp(f) for f in pull(raw, 2)]
    assert got[0]["flags"] == RST | ACK and got[0]["ack"] == 8
    assert got[1]["flags"] == RST and got[1]["seq"] == 99
    assert counters(srv)["rst_tx"] == 2


def test_arp_and_ping_are_answered(served):
    srv, raw, mac, _ = served
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac_bytes(PEER_MAC) + ipaddress.IPv4Address(CLI).packed \
        + bytes(6) + ipaddress.IPv4Address(SRV).packed
    body = struct.pack("!BBHHH", 8, 0, 0, 7, 1) + b"perfkit"
    echo = body[:2] + struct.pack("!H", csum(body)) + body[4:]
    raw.send([frame("ff:ff:ff:ff:ff:ff", arp, 0x0806), frame(mac, ip4(CLI, SRV, 1, echo))])
    a, p = pull(raw, 2)
    assert a[12:14] == b"\x08\x06" and a[20:22] == b"\x00\x02" and a[22:28] == mac_bytes(mac)
    assert p[34] == 0 and p[38:] == echo[4:] and csum(p[34:]) == 0


def test_malformed_segments_are_counted_never_crash(served):
    srv, raw, mac, _ = served
    good = tcp(40004, 80, 1, 0, SYN)
    bad = [
        ip4(CLI, SRV, 6, good[:12]),                                  # truncated header
        ip4(CLI, SRV, 6, tcp(40004, 80, 1, 0, SYN, doff=15)),          # data offset past the end
        ip4(CLI, SRV, 6, tcp(40004, 80, 1, 0, SYN, doff=3)),           # data offset below 20
        ip4(CLI, SRV, 6, tcp(40004, 80, 1, 0, SYN, ck=0x1234)),        # wrong checksum
        ip4(CLI, SRV, 6, tcp(40004, 80, 1, 0, SYN | FIN)),             # SYN+FIN
        ip4(CLI, SRV, 6, tcp(40004, 80, 1, 0, SYN, opts=b"\x02\x09\x00\x00")),  # option past the header
        ip4(CLI, SRV, 6, good, tot=200),                               # IP length past the frame
        ip4(CLI, SRV, 6, good)[:30],                                   # cut inside the IP header
    ]
    raw.send([frame(mac, b) for b in bad])
    time.sleep(0.2)
    c = counters(srv)
    assert c["bad_rx"] == len(bad) and c["sock_open"] == 0 and c["syn_rx"] == 0
    # and still serving
    raw.send([frame(mac, ip4(CLI, SRV, 6, good))])
    synack = parse_tcp(pull(raw, 1)[0])
    assert synack["flags"] == SYN | ACK


def test_ipv4_fragments_are_counted_as_other_never_answered(served):
    """No reassembly (dperf has none either): a fragment is well formed, so it is `other_rx`
    (as over IPv6), not `bad_rx`, and its payload is never taken as TCP."""
    srv, raw, mac, _ = served
    syn = tcp(40006, 80, 1, 0, SYN)
    frags = [ip4(CLI, SRV, 6, syn, frag=0x2000),            # a first fragment (more follow)
             ip4(CLI, SRV, 6, syn, frag=0x0003),            # a last fragment at offset 24
             ip4(CLI, SRV, 6, syn, frag=0x6001)]            # DF with an offset: still a fragment
    raw.send([frame(mac, f) for f in frags])
    time.sleep(0.2)
    c = counters(srv)
    assert c["other_rx"] == len(frags) and c["bad_rx"] == 0 and c["syn_rx"] == 0 and c["sock_open"] == 0
    raw.send([frame(mac, ip4(CLI, SRV, 6, syn))])            # the same segment whole is answered
    assert parse_tcp(pull(raw, 1)[0])["flags"] == SYN | ACK


def test_oversized_request_headers_are_refused(served):
    srv, raw, mac, _ = served
    raw.send([frame(mac, ip4(CLI, SRV, 6, tcp(40005, 80, 1, 0, SYN)))])
    synack = parse_tcp(pull(raw, 1)[0])
    seq, iss = 2, synack["seq"]
    chunk = b"X-Pad: " + b"a" * 1000 + b"\r\n"
    frames = []
    for _ in range(10):                     # 10 KB of headers, never a blank line
        frames.append(frame(mac, ip4(CLI, SRV, 6, tcp(40005, 80, seq, iss + 1, ACK, chunk))))
        seq += len(chunk)
    for f in frames:
        raw.send([f])
        pull(raw, 1, timeout=0.5)           # the ACK of each
    time.sleep(0.1)
    c = counters(srv)
    assert c["http_err"] == 1 and c["err_read"] == 1 and c["sock_error"] == 1 and c["sock_current"] == 0


def test_keepalive_requests_per_connection(eal):
    c, s, _ = run_pair(
        DpdkHttpServer(port="ring:ti:1", payload_size=64, keepalive=True, duration=30),
        DpdkHttpClient(port="ring:ti:0", cps=100, cc=10, keepalive="10ms", keepalive_requests=5,
                       duration=1.0))
    assert c["http_2xx"] == c["http_req"] == s["http_get"] and c["http_err"] == 0
    assert c["sock_open"] == c["sock_close"] == s["sock_open"] == s["sock_close"] and c["sock_error"] == 0
    # at most 5 requests per connection; all 5 but on those the end closed early
    assert c["http_req"] <= 5 * c["sock_open"] and c["http_req"] >= 5 * (c["sock_open"] - 10)
    no_leaks()


# ------------------------------------------------------------------ the client against a hand-made server

def _client_exchange(name, segments, *, fin_with_last=False):
    """One connection of the client (ring:NAME:0) to a server played here by hand on
    ring:NAME:1, answering with these response segments. Returns the client's counters."""
    raw = _dpdk.Port(f"ring:{name}:1")
    cli = dpdk_tcp.build(DpdkHttpClient(port=f"ring:{name}:0", cps=1, duration=0.3, gateway_mac=raw.mac,
                                        retransmit_timeout="300ms", retries=2))
    try:
        cmac = cli.port_list[0].mac
        cli.start()
        syn = parse_tcp(pull(raw, 1, timeout=5)[0])
        assert syn["flags"] == SYN and syn["ok"]
        sport = syn["sport"]
        raw.send([frame(cmac, ip4(SRV, CLI, 6, tcp(80, sport, 9000, syn["seq"] + 1, SYN | ACK,
                                                   opts=b"\x02\x04\x05\xb4", src=SRV, dst=CLI)))])
        req = next(g for g in map(parse_tcp, pull(raw, 1)) if g["data"])
        assert req["data"].startswith(b"GET / HTTP/1.1\r\nHost: perfkit\r\n")
        seq, ack = 9001, req["seq"] + len(req["data"])
        for i, data in enumerate(segments):
            last = i == len(segments) - 1
            fl = ACK | PSH | (FIN if last and fin_with_last else 0)
            raw.send([frame(cmac, ip4(SRV, CLI, 6, tcp(80, sport, seq, ack, fl, data, src=SRV, dst=CLI)))])
            seq += len(data) + (1 if fl & FIN else 0)
        # the client's FIN (or RST on a malformed response): answer a FIN with ours
        deadline = time.monotonic() + 5
        while cli.running() and time.monotonic() < deadline:
            for g in map(parse_tcp, raw.recv(64)):
                if g["flags"] & FIN and not fin_with_last:
                    raw.send([frame(cmac, ip4(SRV, CLI, 6, tcp(80, sport, seq, g["seq"] + 1, FIN | ACK,
                                                               src=SRV, dst=CLI)))])
                    seq += 1
                elif g["flags"] & FIN:
                    raw.send([frame(cmac, ip4(SRV, CLI, 6, tcp(80, sport, seq, g["seq"] + 1, ACK,
                                                               src=SRV, dst=CLI)))])
            time.sleep(0.005)
        wait_done(cli)
        return counters(cli)
    finally:
        cli.close()
        raw.close()


def _chunked(body_parts, trailer=b""):
    out = b"HTTP/1.1 200 OK\r\nServer: hand\r\nTransfer-Encoding: chunked\r\n\r\n"
    for p in body_parts:
        out += f"{len(p):x};ext=1\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n" + trailer + b"\r\n"


def _split(data, *cuts):
    out, last = [], 0
    for c in cuts:
        out.append(data[last:c])
        last = c
    return out + [data[last:]]


@pytest.mark.parametrize("segments,fin", [
    # Content-Length, headers cut mid-name and mid-value, server FIN with the last segment
    (_split(b"HTTP/1.1 200 OK\r\nConTent-LeNGth: 11\r\nX: y\r\n\r\nhello world", 20, 27, 49), True),
    # chunked, cut inside a size line, inside chunk data and inside a CRLF; a trailer
    (_split(_chunked([b"a" * 300, b"b" * 5, b"c" * 1000], b"X-T: 1\r\n"), 65, 70, 200, 372, 380), False),
    ([_chunked([b"z" * 10])], False),
])
def test_client_reads_content_length_and_chunked_responses(eal, segments, fin):
    c = _client_exchange("tj", segments, fin_with_last=fin)
    assert c["http_resp"] == c["http_2xx"] == 1 and c["http_err"] == 0 and c["err_read"] == 0
    assert c["sock_close"] == 1 and c["sock_error"] == 0
    no_leaks()


@pytest.mark.parametrize("response", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",       # bad hex
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",           # no CRLF after data
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",                              # bytes past the body
    b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\n\r\n",                                                          # no framing
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 70 + b"\r\n",     # size line too long
])
def test_client_counts_malformed_responses(eal, response):
    c = _client_exchange("tk", [response])
    assert c["http_2xx"] == 0 and c["http_err"] == 1 and c["err_read"] == 1
    assert c["sock_error"] == 1 and c["sock_current"] == 0 and c["rst_tx"] == 1
    no_leaks()


def test_client_counts_oversized_response_headers(eal):
    head = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 1400 + b"\r\n"
    segs = [head] + [b"X-Pad: " + b"a" * 1400 + b"\r\n"] * 6
    c = _client_exchange("tl", segs)
    assert c["http_err"] == 1 and c["err_read"] == 1 and c["sock_error"] == 1
    no_leaks()


def _fuzz_frames(rng, mac, n, src, dst, ports, lports):
    """Random segments with valid checksums: any flags, sequence and acknowledgment
    numbers, options and payload, to and from the ports the engine keeps sockets for."""
    out = []
    for _ in range(n):
        flags = rng.getrandbits(6)
        opts = b""
        if rng.random() < 0.3:
            opts = bytes(rng.getrandbits(8) for _ in range(rng.choice((4, 8, 12))))
        payload = bytes(rng.getrandbits(8) for _ in range(rng.choice((0, 0, 1, 20, 200))))
        if rng.random() < 0.2:
            payload = rng.choice((b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
                                  b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
        seg = tcp(rng.choice(lports), rng.choice(ports), rng.getrandbits(32), rng.getrandbits(32), flags,
                  payload, opts=opts, src=src, dst=dst)
        f = frame(mac, ip4(src, dst, 6, seg))
        if rng.random() < 0.1:
            f = f[:rng.randrange(14, len(f))]                 # cut anywhere
        out.append(f)
    return out


@pytest.mark.parametrize("seed", [6, 7])
def test_fuzzed_segments_never_crash_server_or_client(eal, seed):
    import random
    rng = random.Random(seed)
    # the server, fed random segments from its client's address
    c = fuzz_server(DpdkHttpServer(port="ring:tz:1", payload_size=2000, duration=30, retransmit_timeout="20ms",
                                   retries=1), "ring:tz:0",
                    lambda mac: _fuzz_frames(rng, mac, 6000, CLI, SRV, [80, 80, 81],
                                             [40000, 40001, 40002, rng.randrange(65536)]))
    assert c["bad_rx"] > 0 and c["tcp_rx"] > 0
    assert c["sock_open"] > 0 and c["rst_tx"] > 0 and c["tcp_drop"] > 0
    # the client, fed random segments from its server's address while it runs
    fuzz_client(lambda gw: DpdkHttpClient(port="ring:tz:0", cps=200, duration=1.0, gateway_mac=gw,
                                          lport_range=(3000, 3003), retransmit_timeout="20ms", retries=1), "ring:tz:1",
                lambda mac: _fuzz_frames(rng, mac, 6000, SRV, CLI, [3000, 3001, 3002, 3003], [80]))
    no_leaks()


def _client_exchanges(name, responses):
    """Connections of one client (ring:NAME:0, 20 a second) to a server played here by hand on
    ring:NAME:1: connection k is answered with responses[k] (one segment each) and closed by the
    client. Returns the client's counters once it has made len(responses) connections."""
    raw = _dpdk.Port(f"ring:{name}:1")
    cli = dpdk_tcp.build(DpdkHttpClient(port=f"ring:{name}:0", cps=20, duration=0.05 * len(responses) - 0.01,
                                        gateway_mac=raw.mac, retransmit_timeout="300ms", retries=2))
    try:
        cmac = cli.port_list[0].mac
        cli.start()
        conns, seqs = {}, {}                     # client port -> its response; our next seq
        deadline = time.monotonic() + 10
        while cli.running() and time.monotonic() < deadline:
            for g in map(parse_tcp, raw.recv(64)):
                sp = g["sport"]
                if g["flags"] == SYN:
                    conns[sp], seqs[sp] = responses[len(conns) % len(responses)], 9001
                    raw.send([frame(cmac, ip4(SRV, CLI, 6, tcp(80, sp, 9000, g["seq"] + 1, SYN | ACK,
                                                               opts=b"\x02\x04\x05\xb4", src=SRV, dst=CLI)))])
                elif g["data"]:
                    data = conns[sp]
                    raw.send([frame(cmac, ip4(SRV, CLI, 6, tcp(80, sp, 9001, g["seq"] + len(g["data"]), ACK | PSH,
                                                               data, src=SRV, dst=CLI)))])
                    seqs[sp] = 9001 + len(data)
                elif g["flags"] & FIN:
                    raw.send([frame(cmac, ip4(SRV, CLI, 6, tcp(80, sp, seqs[sp], g["seq"] + 1, FIN | ACK,
                                                               src=SRV, dst=CLI)))])
                    seqs[sp] += 1
            time.sleep(0.002)
        wait_done(cli)
        return counters(cli)
    finally:
        cli.close()
        raw.close()


def test_client_takes_a_repeated_header_section_as_the_parser_would(eal):
    """The client remembers the last header section it parsed whole and takes one that repeats
    it byte for byte with a compare (tcp_client_take): the same responses must count as the
    parser counts them. Here: a header section repeated with its body, then the same header
    section with bytes past the body (an error, as the parser says), then one that differs only
    in its Content-Length (parsed again, its own length), then the first again."""
    ok = b"HTTP/1.1 200 OK\r\nServer: hand\r\nContent-Length: 5\r\n\r\nhello"
    other = b"HTTP/1.1 200 OK\r\nServer: hand\r\nContent-Length: 7\r\n\r\nhello!!"
    c = _client_exchanges("tr", [ok, ok, ok + b"EXTRA", other, ok])
    assert c["sock_open"] == 5 and c["http_resp"] == c["http_2xx"] == 4, c
    assert c["http_err"] == c["err_read"] == 1 and c["sock_error"] == 1 and c["sock_close"] == 4
    assert c["bytes_rx"] > 0 and c["tcp_drop"] == 0
    no_leaks()
