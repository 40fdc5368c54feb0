"""The DPDK engine's traffic shapes (issue 5): many flows over address and port ranges,
frame size lists and IMIX, bps targets and ramps, several queues and lcores, a latency
probe stream. Real DPDK ports in this process (ring:NAME:0|1 pairs), exact counters.
"""
import ipaddress
import json
import struct
import subprocess
import sys
import time

import pytest

import perfkit
from perfkit.errors import EngineError
from perfkit.spec import DpdkFlows, DpdkReflect, from_dict

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402
from _dpdk_tests import counters, wait_done, csum, pull, stop_when_received  # noqa: E402,F401
from perfkit.stats import COUNTER_NAMES  # noqa: E402
from perfkit.kinds.dpdk_udp import ports_and_workers  # noqa: E402

A_IP, B_IP = "198.18.0.1", "198.18.0.2"
FAR = "198.18.1.0"   # a destination range clear of the sources
WIRE_MAGIC, WIRE_SHORT_MAGIC, PROBE_MAGIC = 0x706B7431, 0x706B7331, 0x706B7031


def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


def capture(worker: dict, count: int, name: str):
    """Run one generator worker into ring:NAME:0 and read `count` frames at ring:NAME:1."""
    raw = _dpdk.Port(f"ring:{name}:1")
    gen_port = _dpdk.Port(f"ring:{name}:0", ip=A_IP)
    h = _dpdk.DpdkEngine([gen_port], [{"role": "dpdk_send", "port": 0, "dst_mac": "02:00:00:00:00:aa",
                                       "dst_ip": FAR, **worker}])
    t0 = time.monotonic_ns()
    try:
        h.start()
        frames = pull(raw, until=count, timeout=5.0)
        wait_done(h)
        t1 = time.monotonic_ns()
        frames += pull(raw, timeout=0.05)
        c = counters(h, 0)
        sent = h.flow_sent(0)
    finally:
        h.close()
        gen_port.close()
        raw.close()
    return frames, c, sent, (t0, t1)


def parse(f: bytes, t=None):
    """Check one generated frame's headers and checksums; returns its fields."""
    assert f[12:14] == b"\x08\x00"
    ip = f[14:34]
    assert ip[0] == 0x45 and csum(ip) == 0, "IPv4 checksum"
    assert struct.unpack("!H", ip[2:4])[0] == len(f) - 14 and ip[9] == 17
    sport, dport, ulen, _ = struct.unpack("!HHHH", f[34:42])
    assert ulen == len(f) - 34
    assert csum(ip[12:20] + struct.pack("!BBH", 0, 17, ulen) + f[34:]) == 0, "UDP checksum"
    payload = f[42:]
    if len(payload) >= 24:
        magic, flow, seq, tx = struct.unpack("=IIQQ", payload[:24])
        assert magic in (WIRE_MAGIC, PROBE_MAGIC)
        if t:
            assert t[0] <= tx <= t[1]
    else:
        magic, flow, seq, tx = struct.unpack("=IIII", payload[:16])
        assert magic == WIRE_SHORT_MAGIC
    assert not any(payload[24 if len(payload) >= 24 else 16:]), "the filler is zero"
    src, dst = str(ipaddress.IPv4Address(ip[12:16])), str(ipaddress.IPv4Address(ip[16:20]))
    return {"flow": flow, "seq": seq, "src": src, "dst": dst, "sport": sport, "dport": dport,
            "size": len(f) + 4}


# ------------------------------------------------------------------ many flows

def test_flows_walk_the_address_and_port_ranges(eal):
    """Flow f is the f-th tuple of the ranges, source port fastest; each flow keeps its own
    sequence numbers; the checksums hold for every address and port."""
    ranges = {"sports": 2, "dports": 3, "src_ips": 2, "dst_ips": 2}
    flows = 2 * 3 * 2 * 2
    frames, c, sent, t = capture({"flows": flows, "rate": 5000.0, "duration": 0.24, "size": 96,
                                  "sport": 1000, "dport": 2000, **ranges}, 1200, "rg")
    assert len(frames) == c["pkts_tx"] == sum(sent) == 1200
    seen, next_seq = set(), [0] * flows
    for f in frames:
        p = parse(f, t)
        k = p["flow"]
        assert k < flows
        want = (1000 + k % 2, 2000 + (k // 2) % 3, int(ipaddress.IPv4Address(A_IP)) + (k // 6) % 2,
                int(ipaddress.IPv4Address(FAR)) + k // 12)
        assert (p["sport"], p["dport"], int(ipaddress.IPv4Address(p["src"])),
                int(ipaddress.IPv4Address(p["dst"]))) == want
        assert p["seq"] == next_seq[k]
        next_seq[k] += 1
        seen.add(want)
    assert len(seen) == flows and next_seq == sent


def test_a_hundred_thousand_flows_lose_nothing_and_count_loss_exactly(eal):
    spec = DpdkFlows(port="ring:hk:0", peer="ring:hk:1", rate="200kpps", duration="1s", flows=100_000,
                     src_ips=10, dst_ips=10, dports=10, peer_ip=FAR)
    assert spec.sports == 100
    run = perfkit.Run(spec, engine="dpdk").run()
    s = run.summary
    assert run.error is None
    assert s["pkts_tx"] == 200_000 == s["pkts_rx"]
    assert s["lost"] == s["dup"] == s["reorder"] == 0
    # the same flows through a receiver that drops every 7th frame: loss is exact per flow
    ports, workers = ports_and_workers(DpdkFlows(port="ring:hl:0", peer="ring:hl:1", rate="200kpps", duration="0.5s",
                                         flows=100_000, src_ips=10, dst_ips=10, dports=10, peer_ip=FAR))
    workers[0]["drop_every"] = 7
    h = _dpdk.DpdkEngine([_dpdk.Port(d, ip=ip) for d, ip in ports], workers, own_ports=True)
    try:
        h.start()
        wait_done(h)
        rx, tx = counters(h, 0), counters(h, 1)
    finally:
        h.close()
    assert tx["pkts_tx"] == 100_000
    assert rx["seq_lost"] == 100_000 // 7 and rx["pkts_rx"] + rx["seq_lost"] == tx["pkts_tx"]
    assert rx["seq_dup"] == rx["seq_reorder"] == 0


def test_reverse_peer_reflects_for_every_destination_address(eal):
    run = perfkit.Run(DpdkFlows(port="ring:rd:0", peer="ring:rd:1", mode="reverse", rate="20kpps",
                                duration="0.5s", flows=64, dst_ips=4, src_ips=2, dports=2, peer_ip=FAR),
                      engine="dpdk").run()
    s = run.summary
    assert run.error is None and s["pkts_tx"] == 20_000 == s["pkts_rx"]   # both directions
    assert s["lat_count"] == 10_000 and s["lost"] == 0                     # every frame came back


@pytest.mark.parametrize("kw, field", [
    (dict(src_ips=0), "src_ips"), (dict(dst_ips=1 << 18), "dst_ips"),
    (dict(dports=0), "dports"), (dict(dport=65000, dports=600), "dports"),
    (dict(sports=0), "sports"), (dict(sport=65000, sports=600), "sports"),
    (dict(flows=100, sports=10, dports=2), "flows"),            # 20 tuples for 100 flows
    (dict(flows=70000, sport=1000, dport=65535), "flows"),     # 70000 (source, destination) ports do not exist
    (dict(ip="198.19.255.250", src_ips=10), "src_ips"),         # leaves 198.18.0.0/15
    (dict(src_ips=2), "dst_ips"),                               # 198.18.0.1-2 overlaps 198.18.0.2
])
def test_bad_ranges_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        DpdkFlows(**kw)


def test_flows_beyond_the_source_ports_widen_the_destination_ports():
    s = DpdkFlows(flows=131072)
    assert (s.sports, s.dports) == (43691, 3)             # 3 destination ports, the source ports split
    assert s.sports * s.dports >= 131072
    s = DpdkFlows(flows=131072, dports=4)                  # given: kept, the source ports follow
    assert (s.sports, s.dports) == (32768, 4)


def test_ranges_round_trip_and_reflector_ips():
    s = DpdkFlows(flows=1000, src_ips=4, dports=5, dst_ips=2, peer_ip="198.18.1.0")
    assert s.sports == 25 and from_dict(s.to_dict()) == s
    r = DpdkReflect(ips=16)
    assert from_dict(r.to_dict()) == r
    with pytest.raises(ValueError, match="^ips:"):
        DpdkReflect(ip="198.19.255.255", ips=2)


def test_cli_flows_with_ranges(eal):
    p = _cli("flows", "--port", "ring:cr:0", "--peer", "ring:cr:1", "--rate", "20kpps", "--flows", "1000",
             "--src-ips", "4", "--dports", "5", "--dst-ips", "2", "--peer-ip", "198.18.1.0",
             "--duration", "0.5s", "--json")
    assert p.returncode == 0, p.stderr
    s = [json.loads(ln) for ln in p.stdout.splitlines()][-1]["summary"]
    assert s["pkts_tx"] == 10_000 == s["pkts_rx"] and s["lost"] == 0
    p = _cli("flows", "--port", "ring:cr:0", "--flows", "100", "--sports", "10")
    assert p.returncode == 2 and p.stderr.strip().startswith("perfkit: flows:"), p.stderr


# ------------------------------------------------------------------ frame sizes, bps, ramps

def test_imix_is_sent_interleaved_in_its_exact_proportions(eal):
    from perfkit.spec import IMIX, size_pattern
    pattern = size_pattern(IMIX)
    assert sorted(pattern) == [64] * 7 + [570] * 4 + [1518] and pattern[:3] == [64, 570, 64]
    frames, c, sent, t = capture({"flows": 5, "rate": 6000.0, "duration": 0.2, "sizes": pattern}, 1200, "im")
    assert len(frames) == c["pkts_tx"] == sum(sent) == 1200
    got = [parse(f, t)["size"] for f in frames]
    assert got == pattern * 100                                  # the pattern, frame by frame
    assert c["bytes_tx"] == sum(got) == 100 * (7 * 64 + 4 * 570 + 1518)


def test_a_size_list_through_a_receiver_counts_every_byte(eal):
    spec = DpdkFlows(port="ring:sl:0", peer="ring:sl:1", sizes="64,65,69,70,128:2,1518", rate="35kpps",
                     duration="0.2s", flows=3)
    assert spec.size == round((64 + 65 + 69 + 70 + 256 + 1518) / 7)
    s = perfkit.Run(spec, engine="dpdk").run().summary
    assert s["pkts_tx"] == 7000 == s["pkts_rx"] and s["lost"] == 0
    assert s["bytes_tx"] == s["bytes_rx"] == 1000 * (64 + 65 + 69 + 70 + 256 + 1518)
    assert s["lat_count"] == 7000          # short (64..69) and full (70+) headers both parsed


def test_a_bps_target_counts_whole_frames_of_the_mix(eal):
    spec = DpdkFlows(port="ring:bp:0", peer="ring:bp:1", sizes="imix", rate="100Mbps", duration="1s")
    pps = 1e8 / (8 * (7 * 64 + 4 * 570 + 1518) / 12)
    assert spec.messages_per_second == pytest.approx(pps)
    s = perfkit.Run(spec, engine="dpdk").run().summary
    assert abs(s["pkts_tx"] - pps) <= 1 and s["pkts_rx"] == s["pkts_tx"]
    assert abs(8 * s["bytes_tx"] - 1e8) <= 8 * 1518           # 100 Mbit, to within one frame


def test_a_ramp_sends_the_integral_of_its_rate_rising(eal):
    # 1k -> 5k frames/s over 1 s: 3000 frames, 1000 of them in the first half
    frames, c, sent, t = capture({"flows": 2, "rate": 1000.0, "rate_end": 5000.0, "ramp": 1.0,
                                  "duration": 1.0, "size": 64}, 3000, "rp")
    assert abs(c["pkts_tx"] - 3000) <= 1 and len(frames) == c["pkts_tx"]
    # the short header carries the low 32 bits of the build time: its order tells the pacing
    lo = [struct.unpack("=IIII", f[42:58])[3] for f in frames]
    start = lo[0]
    elapsed = [(x - start) & 0xFFFFFFFF for x in lo]
    first_half = sum(1 for e in elapsed if e < 500_000_000)
    assert first_half < 0.42 * len(frames), first_half        # a constant rate would put half there
    # and the spec: the ramp over part of the run, then the end rate
    run = perfkit.Run(DpdkFlows(port="ring:rq:0", peer="ring:rq:1", rate="10kpps", ramp_to="30kpps",
                                ramp_time="0.5s", duration="1s"), engine="dpdk").run()
    s = run.summary
    assert abs(s["pkts_tx"] - (10_000 * 0.5 + 10_000 * 0.5 + 30_000 * 0.5)) <= 1   # 25000
    assert s["pkts_rx"] == s["pkts_tx"] and s["lost"] == 0


@pytest.mark.parametrize("kw, field", [
    (dict(sizes="64,9019"), "sizes"), (dict(sizes=""), "sizes"), (dict(sizes="64:0"), "sizes weight"),
    (dict(sizes="64:1000,128:101"), "sizes"), (dict(sizes=[[64, 1, 2]]), "sizes"),
    (dict(ramp_to="1Mpps"), "ramp_to"), (dict(rate="1kpps", ramp_to="0pps"), "ramp_to"),
    (dict(rate="1kpps", ramp_to="2kpps", ramp_time="20s", duration="10s"), "ramp_time"),
    (dict(ramp_time="1s"), "ramp_time"),
])
def test_bad_sizes_and_ramps_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        DpdkFlows(**kw)


def test_sizes_and_ramps_round_trip():
    s = DpdkFlows(sizes="64:60,570:30,1518:10", rate="1Gbps", ramp_to="2Gbps", ramp_time="2s", duration="5s")
    assert s.sizes == ((64, 6), (570, 3), (1518, 1)) and from_dict(s.to_dict()) == s
    assert from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_cli_flows_imix_and_ramp(eal):
    p = _cli("flows", "--port", "ring:ci:0", "--peer", "ring:ci:1", "--sizes", "imix", "--rate", "12kpps",
             "--ramp-to", "36kpps", "--duration", "0.5s", "--json")
    assert p.returncode == 0, p.stderr
    s = [json.loads(ln) for ln in p.stdout.splitlines()][-1]["summary"]
    assert abs(s["pkts_tx"] - 12_000) <= 1 and s["pkts_rx"] == s["pkts_tx"] and s["lost"] == 0
    p = _cli("flows", "--port", "ring:ci:0", "--sizes", "64,20000")
    assert p.returncode == 2 and p.stderr.strip().startswith("perfkit: sizes:"), p.stderr


# ------------------------------------------------------------------ several queues and lcores

def test_two_cores_each_with_its_queue_and_counters(eal):
    spec = DpdkFlows(port="ring:c2:0", peer="ring:c2:1", cores=2, flows=1001, rate="100kpps", duration="0.5s")
    h = dpdk.build(spec)
    try:
        assert h.roles == ["dpdk_recv", "dpdk_recv", "dpdk_send", "dpdk_send"]
        assert [p.queues for p in h.port_list] == [2, 2]
        h.start()
        wait_done(h)
        rx = [counters(h, 0), counters(h, 1)]
        tx = [counters(h, 2), counters(h, 3)]
        sent = [h.flow_sent(2), h.flow_sent(3)]
    finally:
        h.close()
    assert [len(s) for s in sent] == [500, 501]                   # the flows split between the cores
    assert [sum(s) for s in sent] == [t["pkts_tx"] for t in tx]
    assert all(abs(t["pkts_tx"] - 25_000) <= 1 for t in tx)        # rate / cores each
    # queue k of one end feeds queue k of the other: each receiver counts its own core's frames
    assert [r["pkts_rx"] for r in rx] == [t["pkts_tx"] for t in tx]
    assert sum(r["seq_lost"] + r["seq_dup"] + r["seq_reorder"] for r in rx) == 0
    assert all(t["cpu_wall_ns"] > 0 for t in tx + rx)
    assert dpdk.resources()["ports_open"] == 0


def test_two_cores_count_loss_exactly_in_one_shared_flow_table(eal):
    ports, workers = ports_and_workers(DpdkFlows(port="ring:cl:0", peer="ring:cl:1", cores=2, flows=100_000,
                                         src_ips=10, dst_ips=10, peer_ip=FAR, rate="100kpps", duration="0.5s"))
    for w in workers[:2]:
        w["drop_every"] = 7
    h = _dpdk.DpdkEngine([_dpdk.Port(d, ip=ip, queues=2) for d, ip in ports], workers, own_ports=True)
    try:
        h.start()
        wait_done(h)
        rx = [counters(h, 0), counters(h, 1)]
        tx = [counters(h, 2), counters(h, 3)]
    finally:
        h.close()
    lost = sum(r["seq_lost"] for r in rx)
    assert lost == sum(t["pkts_tx"] // 7 for t in tx)
    assert sum(r["pkts_rx"] for r in rx) + lost == sum(t["pkts_tx"] for t in tx)
    assert sum(r["seq_dup"] + r["seq_reorder"] for r in rx) == 0


def test_two_cores_reverse_and_unpaced(eal):
    s = perfkit.Run(DpdkFlows(port="ring:cr2:0", peer="ring:cr2:1", cores=2, flows=8, mode="reverse",
                              rate="40kpps", duration="0.5s"), engine="dpdk").run().summary
    # every frame sent comes back and is timed (the counts hold both ways: twice the frames timed); a
    # starved pacer may send fewer than 40k/s x 0.5 s, never more
    assert s["lost"] == 0 and s["pkts_rx"] == s["pkts_tx"] and abs(2 * s["lat_count"] - s["pkts_tx"]) <= 4, s
    assert 10_000 <= s["lat_count"] <= 20_002, s
    s = perfkit.Run(DpdkFlows(port="ring:cu:0", peer="ring:cu:1", cores=2, flows=2, duration="0.3s"),
                    engine="dpdk").run().summary
    assert s["pkts_tx"] > 10_000 and s["pkts_tx"] == s["pkts_rx"] and s["lost"] == 0


def test_multi_queue_vdevs(eal):
    """net_null and net_ring take several queues; net_null spreads by RSS (it says so)."""
    with _dpdk.Port("net_null0", queues=4) as p:
        assert p.queues == 4
    s = perfkit.Run(DpdkFlows(port="net_null0,no-rx=1", cores=2, flows=2, duration="0.2s"),
                    engine="dpdk").run().summary
    assert s["pkts_tx"] > 10_000
    # a net_ring vdev loops each queue back on itself: each core gets its own frames back
    run = perfkit.Run(DpdkFlows(port="net_ring0", dst_mac="02:00:00:00:00:01", cores=2, flows=4,
                                rate="10kpps", duration="0.3s", mode="reverse"), engine="dpdk").run()
    s = run.summary
    assert run.error is None and s["pkts_tx"] == s["pkts_rx"] == s["lat_count"] and s["lost"] == 0
    assert abs(s["pkts_tx"] - 3000) <= 2


def test_queue_mismatches_are_errors(eal):
    a = _dpdk.Port("ring:qm:0", queues=2)
    try:
        with pytest.raises(EngineError, match="2 queues, not 1"):
            _dpdk.Port("ring:qm:1")
        with pytest.raises(EngineError, match="queue 2, port"):
            _dpdk.DpdkEngine([a], [{"role": "dpdk_recv", "port": 0, "queue": 2}])
        with pytest.raises(EngineError, match="one queue of a port, one worker"):
            _dpdk.DpdkEngine([a], [{"role": "dpdk_recv", "port": 0, "queue": 1},
                                   {"role": "dpdk_recv", "port": 0, "queue": 1}])
    finally:
        a.close()
    with pytest.raises(EngineError, match="queues 9 out of range"):
        _dpdk.Port("ring:qm:0", queues=9)
    assert dpdk.resources()["ports_open"] == 0


@pytest.mark.parametrize("kw, field", [
    (dict(cores=0), "cores"), (dict(cores=9), "cores"), (dict(cores=4, flows=3), "flows"),
])
def test_bad_cores_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        DpdkFlows(**kw)


def test_cli_cores(eal):
    p = _cli("flows", "--port", "ring:cc:0", "--peer", "ring:cc:1", "--cores", "2", "--flows", "10",
             "--rate", "20kpps", "--duration", "0.5s", "--json")
    assert p.returncode == 0, p.stderr
    s = [json.loads(ln) for ln in p.stdout.splitlines()][-1]["summary"]
    assert abs(s["pkts_tx"] - 10_000) <= 2 and s["pkts_rx"] == s["pkts_tx"] and s["lost"] == 0


# ------------------------------------------------------------------ latency probes beside a load

def test_probes_beside_an_unpaced_load_have_their_own_histogram(eal):
    run = perfkit.Run(DpdkFlows(port="ring:pb:0", peer="ring:pb:1", flows=4, duration="0.5s",
                                probe_rate="1kpps"), engine="dpdk").run()
    s = run.summary
    assert run.error is None
    assert 100 <= s["probe_tx"] <= 501    # 1 kpps for 0.5 s; a late probe is skipped, not sent in a burst
    assert s["probe_rx"] == s["probe_tx"]              # a ring pair loses nothing
    assert s["pkts_tx"] == s["pkts_rx"] > 10 * s["probe_tx"] and s["lost"] == 0
    assert s["lat_count"] == s["pkts_rx"] - s["probe_rx"]   # the load's samples exclude the probes
    assert 0 < s["probe_lat_p50_us"] <= s["probe_lat_p99_us"] <= s["probe_lat_max_us"] < 1e6
    # bytes: the probes are 128 B frames among the 64 B load
    assert s["bytes_tx"] == 64 * (s["pkts_tx"] - s["probe_tx"]) + 128 * s["probe_tx"]


def test_probes_on_the_wire_and_in_reverse_mode(eal):
    frames, c, sent, t = capture({"flows": 3, "rate": 9000.0, "duration": 0.2, "size": 64,
                                  "probe_rate": 500.0, "probe_size": 100}, 1900, "pw")
    probes = [f for f in frames if len(f) == 96]
    assert c["probe_tx"] == len(probes) and 20 <= len(probes) <= 101
    assert len(frames) == c["pkts_tx"] == sum(sent) + len(probes)
    for k, f in enumerate(probes):
        p = parse(f, t)
        assert p["flow"] == 0 and p["seq"] == k and (p["sport"], p["dport"]) == (10000, 9)
        assert struct.unpack("=I", f[42:46])[0] == PROBE_MAGIC          # "pkp1"
    # reverse: the probes come back to the generator (round trips), two cores: two probe flows
    run = perfkit.Run(DpdkFlows(port="ring:pr:0", peer="ring:pr:1", mode="reverse", cores=2, flows=4,
                                rate="20kpps", duration="0.5s", probe_rate="400pps"), engine="dpdk").run()
    s = run.summary
    assert run.error is None and s["probe_rx"] == s["probe_tx"] > 40 and s["lost"] == 0
    assert s["lat_count"] == 10_000                    # the load's round trips, probes apart


def test_lost_probes_are_counted_in_the_loss(eal):
    ports, workers = ports_and_workers(DpdkFlows(port="ring:pl:0", peer="ring:pl:1", flows=2, rate="20kpps",
                                         duration="0.5s", probe_rate="1kpps"))
    workers[0]["drop_every"] = 5
    h = _dpdk.DpdkEngine([_dpdk.Port(d, ip=ip) for d, ip in ports], workers, own_ports=True)
    try:
        h.start()
        wait_done(h)
        rx, tx = counters(h, 0), counters(h, 1)
        probe_hist = sum(h.probe_histograms()[0])
    finally:
        h.close()
    assert rx["seq_lost"] == tx["pkts_tx"] // 5 and rx["pkts_rx"] + rx["seq_lost"] == tx["pkts_tx"]
    assert rx["probe_rx"] == probe_hist and 0 < rx["probe_rx"] < tx["probe_tx"]


@pytest.mark.parametrize("kw, field", [
    (dict(probe_rate="1Mbps"), "probe_rate"), (dict(probe_rate="2Mpps"), "probe_rate"),
    (dict(probe_rate="100pps", probe_size=64), "probe_size"),
])
def test_bad_probes_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        DpdkFlows(**kw)


def test_cli_probes(eal):
    p = _cli("flows", "--port", "ring:cp:0", "--peer", "ring:cp:1", "--rate", "20kpps", "--probe-rate", "200pps",
             "--duration", "0.5s")
    assert p.returncode == 0, p.stderr
    assert "probe lat" in p.stdout and " probes)" in p.stdout, p.stdout
    s = DpdkFlows(probe_rate="200pps")
    assert from_dict(json.loads(json.dumps(s.to_dict()))) == s


def _udp_frame(dst_mac, src_mac, payload, *, cut=None):
    src, dst = ipaddress.IPv4Address(A_IP).packed, ipaddress.IPv4Address(B_IP).packed
    udp = struct.pack("!HHHH", 10000, 9, 8 + len(payload), 0) + payload
    c = csum(src + dst + struct.pack("!BBH", 0, 17, len(udp)) + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    f = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) + b"\x08\x00" + ip + udp
    return f if cut is None else f[:cut]


def test_probe_payloads_parsed_exactly_and_fuzzed_never_crash(eal):
    import random
    raw = _dpdk.Port("ring:pf:0")
    rx_port = _dpdk.Port("ring:pf:1", ip=B_IP)
    me, them = raw.mac, rx_port.mac
    h = _dpdk.DpdkEngine([rx_port], [{"role": "dpdk_recv", "port": 0, "flows": 4, "duration": 3.0}],
                         own_ports=True)
    now = time.monotonic_ns
    good = [_udp_frame(them, me, struct.pack("=IIQQ", PROBE_MAGIC, q, s, now()) + bytes(40))
            for q in range(8) for s in range(5)]                           # 8 probe flows x 5
    ignored = [_udp_frame(them, me, struct.pack("=IIQQ", PROBE_MAGIC, q, 0, now()))
               for q in (8, 9, 1000, 0xFFFFFFFF)]                            # no such probe flow
    short = [_udp_frame(them, me, struct.pack("=IIQ", PROBE_MAGIC, 0, 1))]   # 16 B: too short for one
    rng = random.Random(11)
    fuzz = []
    for _ in range(3000):
        f = bytearray(_udp_frame(them, me, struct.pack("=IIQQ", PROBE_MAGIC, rng.randrange(12),
                                                       rng.choice([0, 1, 2, rng.getrandbits(64)]),
                                                       rng.getrandbits(64)) + bytes(rng.randrange(40))))
        for _ in range(rng.randrange(0, 4)):
            f[rng.randrange(len(f))] = rng.randrange(256)
        fuzz.append(bytes(f[:rng.randrange(14, len(f) + 1)]))
    try:
        h.start()
        n = 0
        for batch in (good, ignored + short, fuzz):
            for i in range(0, len(batch), 64):
                deadline = time.monotonic() + 5
                k = 0
                while k < len(batch[i:i + 64]):
                    k += raw.send(batch[i + k:i + 64])
                    assert time.monotonic() < deadline
                n += k
            if batch is not fuzz:  # wait, so that the exact counts below are these frames'
                deadline = time.monotonic() + 3
                while counters(h, 0)["pkts_rx"] < n and time.monotonic() < deadline:
                    time.sleep(0.01)
            if batch is good:
                c = counters(h, 0)
                assert c["probe_rx"] == 40 and c["udp_rx"] == 40 and c["lat_count"] == 0
                assert c["seq_lost"] == c["seq_dup"] == c["seq_reorder"] == 0
            elif batch is not fuzz:
                c = counters(h, 0)
                assert c["probe_rx"] == 40 and c["udp_rx"] == 45 and c["bad_rx"] == 0
        c = stop_when_received(h, n)
        assert h.error() is None
    finally:
        h.close()
        raw.close()
    assert c["pkts_rx"] == n == 45 + len(fuzz)
    assert c["udp_rx"] + c["bad_rx"] + c["other_rx"] + c["arp_rx"] + c["icmp_rx"] + c["tcp_rx"] == n


# ------------------------------------------------------------------ bidirectional

@pytest.mark.parametrize("cores", [1, 2])
def test_bidirectional_each_side_sends_and_receives(eal, cores):
    spec = DpdkFlows(port="ring:bd:0", peer="ring:bd:1", bidirectional=True, cores=cores, flows=10,
                     src_ips=2, dst_ips=3, peer_ip=FAR, rate="20kpps", duration="0.5s", sizes="64,1518")
    h = dpdk.build(spec)
    try:
        assert h.roles == ["dpdk_send"] * (2 * cores)
        h.start()
        wait_done(h)
        back = [counters(h, k) for k in range(cores)]                # the peer port's generators
        fwd = [counters(h, cores + k) for k in range(cores)]         # the port's
    finally:
        h.close()
    for side, other in ((fwd, back), (back, fwd)):
        sent = sum(c["pkts_tx"] for c in side)
        assert abs(sent - 10_000) <= cores - 1                       # each direction at the rate
        got = sum(c["udp_rx"] for c in other)
        assert got == sent and sum(c["seq_lost"] for c in other) == 0   # the other side got them all
        assert sum(c["lat_count"] for c in other) == sent            # one-way latency at that side
        assert sum(c["bytes_tx"] for c in side) == sum(c["bytes_rx"] for c in other)
    s = perfkit.Run(spec, engine="dpdk").run().summary
    assert s["pkts_tx"] == s["pkts_rx"] and s["lost"] == s["dup"] == s["reorder"] == 0


def test_bidirectional_needs_a_peer_and_rxonly():
    with pytest.raises(ValueError, match="^bidirectional:"):
        DpdkFlows(bidirectional=True)
    with pytest.raises(ValueError, match="^bidirectional:"):
        DpdkFlows(peer="ring:pk:1", mode="reverse", bidirectional=True)
    s = DpdkFlows(peer="ring:pk:1", bidirectional=True)
    assert from_dict(s.to_dict()) == s


def test_cli_bidirectional(eal):
    p = _cli("flows", "--port", "ring:cb:0", "--peer", "ring:cb:1", "--bidirectional", "--rate", "10kpps",
             "--duration", "0.5s", "--json")
    assert p.returncode == 0, p.stderr
    s = [json.loads(ln) for ln in p.stdout.splitlines()][-1]["summary"]
    assert s["pkts_tx"] == 10_000 == s["pkts_rx"] and s["lost"] == 0


# ------------------------------------------------------------------ jumbo frames

def test_jumbo_frames_well_formed_and_counted_exactly(eal):
    frames, c, sent, t = capture({"flows": 2, "rate": 2000.0, "duration": 0.1, "sizes": [9018, 64, 1519]},
                                 200, "jb")
    assert len(frames) == c["pkts_tx"] == 200
    got = [parse(f, t)["size"] for f in frames]
    assert got[:3] == [9018, 64, 1519] and c["bytes_tx"] == sum(got)
    res = dpdk.resources()
    assert res["mbufs_free"] == res["mbufs"]        # the jumbo pool's buffers are back too
    for mode in ("rxonly", "reverse"):
        s = perfkit.Run(DpdkFlows(port="ring:jr:0", peer="ring:jr:1", mode=mode, size=9018, rate="10kpps",
                                  duration="0.3s", flows=3), engine="dpdk").run().summary
        sent = 3000
        assert s["lat_count"] == sent and s["lost"] == 0
        assert s["bytes_tx"] == s["bytes_rx"] == sent * 9018 * (2 if mode == "reverse" else 1)
    res = dpdk.resources()
    assert res["mbufs_free"] == res["mbufs"] and res["ports_open"] == 0


def test_jumbo_is_refused_on_ports_with_a_standard_mtu():
    with pytest.raises(ValueError, match="^sizes: 9018-byte frames are jumbo: port net_af_packet0"):
        DpdkFlows(port="net_af_packet0,iface=x", netns="/run/netns/x", sizes="64,9018")
    with pytest.raises(ValueError, match="^size: 2000-byte frames are jumbo: peer net_tap0"):
        DpdkFlows(peer="net_tap0", netns="/run/netns/x", size=2000)
    with pytest.raises(ValueError, match="^size: 9018-byte frames over memif need .* bsize=9216"):
        DpdkFlows(port="net_memif0,role=client", size=9018)
    assert DpdkFlows(port="net_memif0,role=client,bsize=9216", size=9018).size == 9018
