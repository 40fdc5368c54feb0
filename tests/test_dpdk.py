"""The DPDK engine (issue 5): EAL, ports, UDP generator, rxonly and reverse workers.

Runs in this process over in-process ring pairs (ring:NAME:0 <-> ring:NAME:1): EAL
starts once for the whole session (--no-huge unless hugepages are free). Frames
are also built here by hand and pushed through the other end of a pair with a raw
Port, to check what the workers answer, reflect and count. The af_packet test
needs root and a lab (network namespaces); it skips otherwise.
"""
import ipaddress
import json
import os
import random
import struct
import subprocess
import sys
import time

import pytest

import perfkit
from perfkit.errors import EngineError
from perfkit.spec import DpdkFlows, DpdkReflect, from_dict
from perfkit.stats import COUNTER_NAMES

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402
from _dpdk_tests import counters, wait_done, csum, mac_bytes, pull  # noqa: E402,F401
from _dpdk_tests import close_while_another_thread_joins  # noqa: E402
from _dpdk_tests import kernel_counts, pings_answered, stop_when_received  # noqa: E402
from _labs import lab_module_or_skip, lab_up_or_skip, if_mac  # noqa: E402

AFFINITY_AT_IMPORT = os.sched_getaffinity(0)
A_IP, B_IP = "198.18.0.1", "198.18.0.2"
WIRE_MAGIC, WIRE_SHORT_MAGIC = 0x706B7431, 0x706B7331


# ------------------------------------------------------------------ frames by hand

def eth(dst: str, src: str, etype: int, payload: bytes) -> bytes:
    return mac_bytes(dst) + mac_bytes(src) + struct.pack("!H", etype) + payload


def ipv4(src, dst, proto, payload, *, ihl=5, options=b"", tot=None, ck=None, frag=0x4000, ver=4, ttl=64):
    tot = 4 * ihl + len(payload) if tot is None else tot
    hdr = struct.pack("!BBHHHBBH4s4s", (ver << 4) | ihl, 0, tot & 0xFFFF, 0, frag, ttl, proto, 0,
                      ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed) + options
    c = csum(hdr) if ck is None else ck
    return hdr[:10] + struct.pack("!H", c) + hdr[12:] + payload


def udp(sport, dport, payload, *, length=None, src=A_IP, dst=B_IP):
    length = 8 + len(payload) if length is None else length
    pseudo = ipaddress.IPv4Address(src).packed + ipaddress.IPv4Address(dst).packed + struct.pack(
        "!BBH", 0, 17, 8 + len(payload))
    c = csum(pseudo + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload) or 0xFFFF
    return struct.pack("!HHHH", sport, dport, length & 0xFFFF, c) + payload


def wire(flow, seq, tx_ns=None):
    return struct.pack("=IIQQ", WIRE_MAGIC, flow, seq, time.monotonic_ns() if tx_ns is None else tx_ns)


def udp_frame(dst_mac, src_mac, seq, flow=0, dst=B_IP, extra=b"", **ipkw):
    return eth(dst_mac, src_mac, 0x0800, ipv4(A_IP, dst, 17, udp(10000 + flow, 9, wire(flow, seq) + extra,
                                                                  dst=dst), **ipkw))


def arp(op, sha, spa, tha, tpa, *, hlen=6):
    return struct.pack("!HHBBH", 1, 0x0800, hlen, 4, op) + mac_bytes(sha) + ipaddress.IPv4Address(spa).packed \
        + mac_bytes(tha) + ipaddress.IPv4Address(tpa).packed


def icmp_echo(ident, seq, data, *, ck=None):
    body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + data
    c = csum(body) if ck is None else ck
    return body[:2] + struct.pack("!H", c) + body[4:]


def push(port, frames, timeout=5.0):
    """Send every frame through a raw port, waiting while the ring is full."""
    deadline = time.monotonic() + timeout
    i = 0
    while i < len(frames):
        n = port.send(frames[i:i + 64])
        i += n
        if n == 0:
            assert time.monotonic() < deadline, "the ring stayed full"
            time.sleep(0.001)
    return i


# ------------------------------------------------------------------ EAL

def test_engine_listed_available():
    st = perfkit.engines()["dpdk"]
    assert st["available"], st["detail"]


def test_eal_up_once_and_the_caller_keeps_its_affinity(eal):
    assert os.sched_getaffinity(0) == AFFINITY_AT_IMPORT
    args = dpdk.eal()  # a second call does nothing
    assert args == eal
    assert "-l" not in args and "-c" not in args
    assert any(a.startswith("--lcores=0@(") for a in args)
    if not dpdk.EalOptions().use_hugepages():
        assert "--no-huge" in args
    # new threads still inherit the whole set (EAL pins nothing but its own lcore)
    seen = {}
    import threading
    t = threading.Thread(target=lambda: seen.update(aff=os.sched_getaffinity(0)))
    t.start()
    t.join()
    assert seen["aff"] == AFFINITY_AT_IMPORT
    with pytest.raises(EngineError, match="restart"):
        dpdk.configure(memory_mb=256)


def test_eal_options_are_checked_in_python():
    for bad, field in ((dict(memory_mb=10), "memory_mb"), (dict(log_level="loud"), "log_level"),
                       (dict(worker_cpus=[999]), "worker_cpus"), (dict(mbufs=10), "mbufs"),
                       (dict(memory_mb=64, mbufs=100000), "mbufs"), (dict(hugepages="yes"), "hugepages")):
        with pytest.raises(ValueError, match=field):
            dpdk.EalOptions(**bad)


def test_a_failed_eal_init_says_restart_and_stays_failed():
    # in a child: a failed init poisons EAL for the life of the process
    code = ("from perfkit import _dpdk\n"
            "import perfkit\n"
            "from perfkit.errors import EngineError\n"
            "for i in range(2):\n"
            "    try:\n"
            "        _dpdk.eal_init(['perfkit', '--no-huge', '--no-such-option'], 2047)\n"
            "    except EngineError as e:\n"
            "        print('ERR', e)\n"
            "print('STATE', _dpdk.eal_state(), perfkit.engines()['dpdk']['available'])\n")
    p = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    lines = p.stdout.splitlines()
    assert len([ln for ln in lines if ln.startswith("ERR")]) == 2, p.stdout + p.stderr
    assert all("restart" in ln for ln in lines if ln.startswith("ERR"))
    assert lines[-1] == "STATE failed False"


# ------------------------------------------------------------------ specs

@pytest.mark.parametrize("kw, field", [
    (dict(port="eth0"), "port"),
    (dict(port="ring:A:0"), "port"),
    (dict(port="ring:a:2"), "port"),
    (dict(port="net_af_packet0,iface=eth0"), "port"),          # a kernel port outside a lab
    (dict(port="net_tap0", netns=None), "port"),
    (dict(port="net_ring0", peer="net_ring1"), "peer"),        # two loopbacks, not a pair
    (dict(port="ring:a:0", peer="ring:a:0"), "peer"),
    (dict(mode="echo"), "mode"),
    (dict(size=63), "size"), (dict(size=9019), "size"), (dict(size=1519, port="net_af_packet0,iface=x", netns="/run/netns/x"), "size"),
    (dict(rate=0), "rate"), (dict(rate="fast"), "rate"),
    (dict(flows=0), "flows"), (dict(flows=200000), "flows"), (dict(sport=65000, dport=65535, flows=1000), "flows"),
    (dict(duration=0), "duration"),
    (dict(ip="10.0.0.1"), "ip"), (dict(peer_ip="127.0.0.1"), "peer_ip"), (dict(peer_ip=A_IP), "peer_ip"),
    (dict(dst_mac="01:02"), "dst_mac"), (dict(burst=0), "burst"), (dict(netns="relative"), "netns"),
])
def test_bad_flows_specs_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        DpdkFlows(**kw)


def test_specs_round_trip_and_read_as_udp_tests():
    s = DpdkFlows(port="ring:x:0", peer="ring:x:1", rate="1Mpps", flows=8, size="1K", duration="2s")
    assert s.size == 1024 and s.messages_per_second == 1e6 and s.test == "udp_bw"
    assert from_dict(s.to_dict()) == s
    r = DpdkReflect(port="net_memif0,role=server,socket=/run/pk.sock", mode="rxonly")
    assert from_dict(r.to_dict()) == r
    assert DpdkFlows(mode="reverse").test == "udp_lat"
    with pytest.raises(ValueError, match="^engine:"):
        dpdk.build(perfkit.LocalTest("udp_bw"))


# ------------------------------------------------------------------ runs over a ring pair

def test_paced_run_sends_exactly_rate_times_duration_and_nothing_is_lost(eal):
    run = perfkit.Run(DpdkFlows(port="ring:p:0", peer="ring:p:1", rate="50kpps", flows=4, duration="1s"),
                      engine="dpdk", interval=0.25).run()
    s = run.summary
    assert run.error is None
    assert s["pkts_tx"] == s["pkts_rx"] + s["lost"]            # exactly
    assert s["pkts_tx"] == 50_000                              # rate x duration, to the frame
    assert s["lost"] == s["dup"] == s["reorder"] == 0          # a ring pair loses nothing
    assert s["bytes_tx"] == s["pkts_tx"] * 64 == s["bytes_rx"]
    assert s["lat_count"] == s["pkts_rx"]
    assert 0 < s["lat_p50_us"] < 100_000                       # one way, TSC timestamps in ns
    assert len(run.frame) >= 4 and run.roles == ["dpdk_recv", "dpdk_send"]
    assert s["drop_tx"] == 0


def test_loss_is_accounted_exactly_through_a_lossy_receiver(eal):
    # a ring pair loses nothing: the receiver's test hook drops every 7th frame unseen
    a, b = _dpdk.Port("ring:l:0", ip=A_IP), _dpdk.Port("ring:l:1", ip=B_IP)
    h = _dpdk.DpdkEngine([a, b], [
        {"role": "dpdk_recv", "port": 1, "flows": 3, "duration": 0.5, "drop_every": 7},
        {"role": "dpdk_send", "port": 0, "peer": 0, "flows": 3, "rate": 30000.0, "duration": 0.5,
         "dst_ip": B_IP}], own_ports=True)
    try:
        h.start()
        wait_done(h)
        rx, tx = counters(h, 0), counters(h, 1)
        sent = sum(h.flow_sent(1))
        assert sent == tx["pkts_tx"] == 15_000
        assert rx["seq_lost"] == sent // 7
        assert tx["pkts_tx"] == rx["pkts_rx"] + rx["seq_lost"]
        assert rx["seq_dup"] == rx["seq_reorder"] == 0
    finally:
        h.close()


def test_reverse_mode_round_trips(eal):
    spec = DpdkFlows(port="ring:r:0", peer="ring:r:1", mode="reverse", rate="20kpps", size=128, flows=2,
                     duration="1s")
    h = dpdk.build(spec)
    try:
        assert h.roles == ["dpdk_reflect", "dpdk_send"]
        h.start()
        wait_done(h)
        refl, gen = counters(h, 0), counters(h, 1)
    finally:
        h.close()
    sent = gen["pkts_tx"]
    assert sent == 20_000 == sum([10_000, 10_000])
    assert refl["pkts_rx"] == refl["pkts_tx"] == sent            # every frame reflected
    assert gen["pkts_rx"] == sent and gen["seq_lost"] == gen["seq_dup"] == 0
    assert gen["lat_count"] == sent and gen["bytes_rx"] == sent * 128
    assert 0 < gen["lat_min_ns"] <= gen["lat_max_ns"] < 1e9
    # and through Run: the summary reads it as a latency test
    run = perfkit.Run(spec, engine="dpdk").run()
    s = run.summary
    assert run.error is None and s["test"] == "udp_lat" and s["lat_count"] == 20_000
    assert 0 < s["lat_p50_us"] < 100_000


def test_reverse_mode_at_full_speed_accounts_every_frame(eal):
    # unpaced, the reflector's way back can fill: it drops (drop_tx), the generator counts them lost
    h = dpdk.build(DpdkFlows(port="ring:t:0", peer="ring:t:1", mode="reverse", flows=3, duration="0.5s"))
    try:
        h.start()
        wait_done(h)
        refl, gen = counters(h, 0), counters(h, 1)
        sent = sum(h.flow_sent(1))
    finally:
        h.close()
    assert sent == gen["pkts_tx"] > 10_000
    assert refl["pkts_rx"] == sent                                  # the ring pair loses nothing
    assert refl["pkts_tx"] + refl["drop_tx"] == sent
    assert gen["pkts_rx"] + gen["seq_lost"] == sent and gen["seq_lost"] == refl["drop_tx"]
    assert gen["seq_dup"] == gen["seq_reorder"] == 0
    # the PMD's error counters (rte_eth_stats_get): net_ring 22.11 has none to report
    assert refl["nic_oerrors"] == refl["nic_ierrors"] == refl["nic_imissed"] == gen["nic_oerrors"] == 0


def test_many_flows_each_get_their_own_sequence(eal):
    run = perfkit.Run(DpdkFlows(port="ring:f:0", peer="ring:f:1", rate="40kpps", flows=1000,
                                duration="0.5s"), engine="dpdk").run()
    s = run.summary
    assert s["pkts_tx"] == 20_000 and s["pkts_rx"] == 20_000
    assert s["lost"] == s["dup"] == s["reorder"] == 0


def test_unlimited_rate_over_a_ring_pair_loses_nothing(eal):
    run = perfkit.Run(DpdkFlows(port="ring:u:0", peer="ring:u:1", duration="0.5s"), engine="dpdk").run()
    s = run.summary
    assert run.error is None
    assert s["pkts_tx"] > 100_000
    assert s["pkts_tx"] == s["pkts_rx"] and s["lost"] == 0


def test_stop_ends_a_long_run_early_with_final_counters(eal):
    run = perfkit.Run(DpdkFlows(port="ring:s:0", peer="ring:s:1", rate="100kpps", duration="60s"),
                      engine="dpdk").start()
    time.sleep(0.3)
    t = time.monotonic()
    run.stop()
    assert run.wait(timeout=5)
    assert time.monotonic() - t < 2
    s = run.summary
    assert 0 < s["pkts_tx"] == s["pkts_rx"] + s["lost"] and s["lost"] == 0


def test_close_from_another_thread_while_join_waits(eal):
    close_while_another_thread_joins(dpdk.build(DpdkFlows(port="ring:j:0", peer="ring:j:1",
                                                          rate="100kpps", duration="60s")))


def test_net_null_tx_only(eal):
    run = perfkit.Run(DpdkFlows(port="net_null0,no-rx=1", duration="0.3s"), engine="dpdk").run()
    s = run.summary
    assert run.error is None and s["pkts_tx"] > 100_000 and s["pkts_rx"] == 0


def test_twenty_start_stop_cycles_leak_nothing(eal):
    def fds():
        return len(os.listdir("/proc/self/fd"))

    def threads():
        return len(os.listdir("/proc/self/task"))

    spec = DpdkFlows(port="ring:c:0", peer="ring:c:1", rate="100kpps", flows=4, duration="0.05s")
    perfkit.Run(spec, engine="dpdk").run()           # warm up (polars pools, ...)
    before = (fds(), threads(), dpdk.resources())
    for i in range(20):
        run = perfkit.Run(spec if i % 2 else DpdkFlows(port="net_null0", duration="0.02s"), engine="dpdk").run()
        assert run.error is None
    res = dpdk.resources()
    assert res["ports_open"] == 0 and res["ethdev_ports"] == 0
    assert res["mbufs_free"] == res["mbufs"]        # every mbuf back in the pool
    deadline = time.monotonic() + 2                 # a run's sampler thread ends just after run()
    while threads() > before[1] and time.monotonic() < deadline:
        time.sleep(0.01)
    # threads of earlier tests (plotly, pyroute2, ...) may end meanwhile: a leak is one more
    assert fds() == before[0] and threads() <= before[1] and res == before[2]


def test_a_port_is_one_engines_at_a_time(eal):
    a = _dpdk.Port("ring:o:0", ip=A_IP)
    try:
        with pytest.raises(EngineError, match="already open"):
            _dpdk.Port("ring:o:0")
        h = _dpdk.DpdkEngine([a], [{"role": "dpdk_recv", "port": 0, "duration": 0.1}])
        with pytest.raises(EngineError, match="in use"):
            _dpdk.DpdkEngine([a], [{"role": "dpdk_recv", "port": 0, "duration": 0.1}])
        with pytest.raises(EngineError, match="in use"):
            a.send([b"x" * 60])
        h.close()
        assert a.send([b"\0" * 60]) == 1
    finally:
        a.close()
    with pytest.raises(EngineError, match="rte_dev_probe"):
        _dpdk.Port("net_nosuchdriver0")
    assert dpdk.resources()["ports_open"] == 0


# ------------------------------------------------------------------ frames on the wire

@pytest.mark.parametrize("size", [64, 65, 69, 70, 128, 1518])
def test_generated_frames_are_well_formed(eal, size):
    """Capture a generator's frames at the far end of its pair and check every field."""
    flows, rate, secs, dst_mac = 5, 4000.0, 0.2, "02:00:00:00:00:aa"
    raw = _dpdk.Port("ring:w:1")
    gen_port = _dpdk.Port("ring:w:0", ip=A_IP)
    h = _dpdk.DpdkEngine([gen_port], [{"role": "dpdk_send", "port": 0, "flows": flows, "rate": rate,
                                       "duration": secs, "size": size, "dst_mac": dst_mac,
                                       "dst_ip": B_IP, "sport": 20000, "dport": 7}])
    t0 = time.monotonic_ns()
    try:
        h.start()
        wait_done(h)
        t1 = time.monotonic_ns()
        frames = pull(raw, until=800)
    finally:
        h.close()
        gen_port.close()
        raw.close()
    assert len(frames) == 800
    next_seq = [0] * flows
    for f in frames:
        assert len(f) == size - 4
        assert f[:6] == mac_bytes(dst_mac) and f[12:14] == b"\x08\x00"
        ip = f[14:34]
        assert ip[0] == 0x45 and csum(ip) == 0
        assert struct.unpack("!H", ip[2:4])[0] == size - 4 - 14 and ip[6:8] == b"\x40\x00" and ip[9] == 17
        assert ip[12:16] == ipaddress.IPv4Address(A_IP).packed and ip[16:20] == ipaddress.IPv4Address(B_IP).packed
        sport, dport, ulen, _ = struct.unpack("!HHHH", f[34:42])
        assert dport == 7 and ulen == size - 4 - 34
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 17, ulen)
        assert csum(pseudo + f[34:]) == 0, "UDP checksum"
        payload = f[42:]
        if len(payload) >= 24:
            magic, flow, seq, tx = struct.unpack("=IIQQ", payload[:24])
            assert magic == WIRE_MAGIC and t0 <= tx <= t1
        else:
            magic, flow, seq, tx = struct.unpack("=IIII", payload[:16])
            assert magic == WIRE_SHORT_MAGIC and tx == (tx & 0xFFFFFFFF)
        assert sport == 20000 + flow and flow < flows
        assert seq == next_seq[flow]
        next_seq[flow] += 1
    assert max(next_seq) - min(next_seq) <= 1   # round robin over the flows


def test_arp_icmp_answered_and_udp_reflected_for_the_ports_address(eal):
    raw = _dpdk.Port("ring:q:0")
    me = raw.mac
    refl_port = _dpdk.Port("ring:q:1", ip=B_IP)
    them = refl_port.mac
    h = _dpdk.DpdkEngine([refl_port], [{"role": "dpdk_reflect", "port": 0, "duration": 3.0}], own_ports=True)
    try:
        h.start()
        push(raw, [
            eth("ff:ff:ff:ff:ff:ff", me, 0x0806, arp(1, me, A_IP, "00:00:00:00:00:00", B_IP) + b"\0" * 18),
            eth("ff:ff:ff:ff:ff:ff", me, 0x0806, arp(1, me, A_IP, "00:00:00:00:00:00", "198.18.0.3")),
            eth(them, me, 0x0800, ipv4(A_IP, B_IP, 1, icmp_echo(0x1234, 7, b"perfkit-ping"))),
            udp_frame(them, me, 0),
            udp_frame(them, me, 1, dst="198.18.0.3"),    # not ours: counted, not reflected
        ])
        replies = pull(raw, until=3)
        h.stop()
        wait_done(h)
        c = counters(h, 0)
    finally:
        h.close()
        raw.close()
    assert len(replies) == 3
    # one rx burst: reflected frames leave first, then the answers; sort them by kind
    arp_r = next(f for f in replies if f[12:14] == b"\x08\x06")
    icmp_r = next(f for f in replies if f[12:14] == b"\x08\x00" and f[23] == 1)
    udp_r = next(f for f in replies if f[12:14] == b"\x08\x00" and f[23] == 17)
    # ARP reply: to us, from the port, op 2, sender = the port's MAC and address
    assert arp_r[:6] == mac_bytes(me) and arp_r[6:12] == mac_bytes(them) and arp_r[12:14] == b"\x08\x06"
    htype, ptype, hlen, plen, op = struct.unpack("!HHBBH", arp_r[14:22])
    assert (htype, ptype, hlen, plen, op) == (1, 0x0800, 6, 4, 2)
    assert arp_r[22:28] == mac_bytes(them) and arp_r[28:32] == ipaddress.IPv4Address(B_IP).packed
    assert arp_r[32:38] == mac_bytes(me) and arp_r[38:42] == ipaddress.IPv4Address(A_IP).packed
    # ICMP echo reply with valid checksums and the same payload
    ip = icmp_r[14:34]
    assert icmp_r[:6] == mac_bytes(me) and csum(ip) == 0
    assert ip[12:16] == ipaddress.IPv4Address(B_IP).packed and ip[16:20] == ipaddress.IPv4Address(A_IP).packed
    icmp = icmp_r[34:]
    assert icmp[0] == 0 and csum(icmp) == 0 and icmp[4:] == struct.pack("!HH", 0x1234, 7) + b"perfkit-ping"
    # UDP reflected: addresses and ports swapped, checksums still right
    ip = udp_r[14:34]
    assert udp_r[:6] == mac_bytes(me) and udp_r[6:12] == mac_bytes(them) and csum(ip) == 0
    assert ip[12:16] == ipaddress.IPv4Address(B_IP).packed
    assert struct.unpack("!HH", udp_r[34:38]) == (9, 10000)
    assert csum(ip[12:20] + struct.pack("!BBH", 0, 17, len(udp_r) - 34) + udp_r[34:]) == 0
    assert (c["arp_rx"], c["icmp_rx"], c["udp_rx"], c["pkts_tx"], c["bad_rx"]) == (2, 1, 2, 1, 0)


def _malformed(dst, src):
    good = udp_frame(dst, src, 0)
    ip_ok = good[14:]
    frames = [
        good[:10],                                                       # Ethernet cut short
        good[:14 + 10],                                                  # IPv4 header cut short
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24), ver=6)),
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24), ihl=4)),
        eth(dst, src, 0x0800, ip_ok[:0] + bytes([0x4F]) + ip_ok[1:]),   # IHL 15: past the frame
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24), tot=1000)),
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24), tot=10)),
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24), ck=0x1234)),
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24), frag=0x2000)),   # MF
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24), frag=0x00B9)),   # offset
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24, length=4))),
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, udp(1, 9, b"x" * 24, length=200))),
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 17, b"\0\1\0\2")),           # UDP header cut short
        eth("ff:ff:ff:ff:ff:ff", src, 0x0806, arp(1, src, A_IP, "00:00:00:00:00:00", B_IP)[:10]),
        eth("ff:ff:ff:ff:ff:ff", src, 0x0806, arp(1, src, A_IP, "00:00:00:00:00:00", B_IP, hlen=8)),
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 1, b"\x08\0\0\0")),          # ICMP cut short
        eth(dst, src, 0x0800, ipv4(A_IP, B_IP, 1, icmp_echo(1, 1, b"abc", ck=0xBEEF))),
    ]
    return frames


def test_malformed_frames_are_counted_bad_and_never_crash(eal):
    raw = _dpdk.Port("ring:m:0")
    rx_port = _dpdk.Port("ring:m:1", ip=B_IP)
    me, them = raw.mac, rx_port.mac
    h = _dpdk.DpdkEngine([rx_port], [{"role": "dpdk_recv", "port": 0, "flows": 4, "duration": 3.0}],
                         own_ports=True)
    bad = _malformed(them, me)
    options = udp_frame(them, me, 1, ihl=6, options=b"\x01\x01\x01\x00")   # IP options: fine
    padded = udp_frame(them, me, 2) + b"\0" * 30                          # Ethernet padding: fine
    others = [eth(them, me, 0x86DD, b"\0" * 60),                          # IPv6: other
              eth(them, me, 0x0800, ipv4(A_IP, B_IP, 6, b"\0" * 20))]     # TCP
    rng = random.Random(5)
    fuzz = []
    base = udp_frame(them, me, 3)
    for _ in range(3000):
        f = bytearray(base if rng.random() < 0.7 else rng.choice(bad + [options]))
        for _ in range(rng.randrange(1, 6)):
            f[rng.randrange(len(f))] = rng.randrange(256)
        fuzz.append(bytes(f[:rng.randrange(1, len(f) + 1)]))
    try:
        h.start()
        n = push(raw, [udp_frame(them, me, 0)] + bad + [options, padded] + others)
        n += push(raw, fuzz)
        c = stop_when_received(h, n)
        assert h.error() is None
    finally:
        h.close()
        raw.close()
    assert c["pkts_rx"] == n == 1 + len(bad) + 4 + len(fuzz)
    assert c["bad_rx"] >= len(bad)
    assert c["tcp_rx"] >= 1 and c["other_rx"] >= 1


def test_malformed_frames_exact_counts(eal):
    raw = _dpdk.Port("ring:n:0")
    rx_port = _dpdk.Port("ring:n:1", ip=B_IP)
    me, them = raw.mac, rx_port.mac
    h = _dpdk.DpdkEngine([rx_port], [{"role": "dpdk_recv", "port": 0, "flows": 4, "duration": 3.0}],
                         own_ports=True)
    bad = _malformed(them, me)
    good = [udp_frame(them, me, 0), udp_frame(them, me, 1, ihl=6, options=b"\x01\x01\x01\x00"),
            udp_frame(them, me, 2) + b"\0" * 30]
    try:
        h.start()
        n = push(raw, good[:1] + bad + good[1:])
        c = stop_when_received(h, n)
    finally:
        h.close()
        raw.close()
    assert c["pkts_rx"] == len(bad) + 3
    assert c["bad_rx"] == len(bad)
    assert c["udp_rx"] == 3 and c["lat_count"] == 3         # options and padding parsed fine
    assert c["arp_rx"] == 0 and c["icmp_rx"] == 0           # the bad ARP/ICMP are bad, not counted twice
    assert c["seq_lost"] == c["seq_dup"] == c["seq_reorder"] == 0


# ------------------------------------------------------------------ command line

def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_cli_flows_json(eal):
    p = _cli("flows", "--engine", "dpdk", "--port", "ring:a:0", "--peer", "ring:a:1", "--rate", "20kpps",
             "--flows", "3", "--duration", "1s", "--json")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(ln) for ln in p.stdout.splitlines()]   # nothing but JSON on stdout
    s = lines[-1]["summary"]
    assert s["pkts_tx"] == 20_000 == s["pkts_rx"] + s["lost"] and s["engine"] == "dpdk"
    assert len(lines) >= 2


def test_cli_flows_and_reflect_text(eal, capsys):
    # in this process (EAL is up with the default options the CLI asks for)
    from perfkit.cli import main
    assert main(["flows", "--port", "ring:a:0", "--peer", "ring:a:1", "--mode", "reverse", "--rate", "5kpps",
                 "--duration", "0.5s", "--size", "256", "--interval", "0.25s"]) == 0
    out = capsys.readouterr().out
    assert "perfkit flows: 256 B frames" in out and "udp_lat:" in out and "lat " in out
    assert main(["reflect", "--port", "ring:z:1", "--mode", "rxonly", "--duration", "0.3s"]) == 0
    out = capsys.readouterr().out
    assert "dpdk_rxonly:" in out and "received" in out


@pytest.mark.parametrize("args, field", [
    (["flows", "--port", "eth0"], "port"),
    (["flows", "--port", "ring:a:0", "--size", "9019"], "size"),
    (["flows", "--port", "ring:a:0", "--engine", "socket"], "--port"),   # a DPDK port on the socket engine
    (["flows", "--port", "ring:a:0", "--engine", "kernel"], "engine"),
    (["flows", "--port", "ring:a:0", "--mem", "lots"], "mem"),
    (["flows", "--port", "ring:a:0", "--cpus", "77"], "worker_cpus"),
    (["flows", "--port", "ring:a:0", "--hugepages", "maybe"], "hugepages"),
    (["reflect", "--port", "ring:a:1", "--mode", "echo"], "mode"),
])
def test_cli_bad_input_exits_2_with_the_field(args, field, capsys):
    from perfkit.cli import main
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.strip().startswith(f"perfkit: {field}:"), err


def test_a_dpdk_run_saves_and_loads(eal, tmp_path):
    run = perfkit.Run(DpdkFlows(port="ring:v:0", peer="ring:v:1", rate="10kpps", duration="0.3s"),
                      engine="dpdk").run()
    back = perfkit.load(run.save(tmp_path / "dpdk.parquet"))
    assert back.spec == run.spec and back.summary["pkts_tx"] == run.summary["pkts_tx"]


# ------------------------------------------------------------------ the kernel, through af_packet

def test_af_packet_into_a_lab_namespace_the_kernel_counts_and_answers(eal):
    lab = lab_up_or_skip(lab_module_or_skip())
    try:
        h1, h2 = lab.hosts
        net = ipaddress.ip_network(f"{h1.ipv4}/24", strict=False)
        mine = str(net.network_address + 200)            # the DPDK port's own address, in h1's link
        dev = f"net_af_packet0,iface={h1.ifname}"
        h2_mac = lab.call(h2, if_mac, h2.ifname)
        fds = len(os.listdir("/proc/self/fd"))
        spec = DpdkFlows(port=dev, netns=h1.netns_path, ip=mine, peer_ip=h2.ipv4, rate="20kpps", flows=4,
                         size=128, duration="1s")
        mac = kernel_counts(lab, dpdk.build(spec), h2)   # the kernel received every frame we sent
        assert mac == h2_mac                                 # the kernel answered our ARP request
        # and the other way: the kernel pings the DPDK port, which answers
        pings_answered(lab, dpdk.build(DpdkReflect(port=dev, netns=h1.netns_path, ip=mine, duration="4s")), h2, mine)
        assert len(os.listdir("/proc/self/fd")) == fds        # af_packet's sockets are closed
    finally:
        lab.down()
