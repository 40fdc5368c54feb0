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
from perfkit.stats import COUNTER_NAMES  # noqa: E402

A_IP, B_IP = "198.18.0.1", "198.18.0.2"
FAR = "198.18.1.0"   # a destination range clear of the sources
WIRE_MAGIC, WIRE_SHORT_MAGIC = 0x706B7431, 0x706B7331


@pytest.fixture(scope="session")
def eal():
    try:
        return dpdk.eal()
    except EngineError as exc:
        pytest.skip(f"DPDK EAL does not start here: {exc}")


def counters(handle, worker):
    c, _ = handle.snapshot()[worker]
    return dict(zip(COUNTER_NAMES, c))


def wait_done(handle, timeout=10.0):
    deadline = time.monotonic() + timeout
    while handle.running():
        assert time.monotonic() < deadline, "workers did not stop in time"
        time.sleep(0.01)
    handle.join()


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def pull(port, until=None, timeout=2.0):
    out, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = port.recv(64)
        out += got
        if until is not None and len(out) >= until:
            break
        if not got:
            time.sleep(0.001)
    return out


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
        assert magic == WIRE_MAGIC
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
    ports, workers = dpdk.plan(DpdkFlows(port="ring:hl:0", peer="ring:hl:1", rate="200kpps", duration="0.5s",
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
    (dict(flows=70000, sport=1000), "flows"),                   # 70000 source ports do not exist
    (dict(ip="198.19.255.250", src_ips=10), "src_ips"),         # leaves 198.18.0.0/15
    (dict(src_ips=2), "dst_ips"),                               # 198.18.0.1-2 overlaps 198.18.0.2
])
def test_bad_ranges_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        DpdkFlows(**kw)


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
    (dict(sizes="64,9000"), "sizes"), (dict(sizes=""), "sizes"), (dict(sizes="64:0"), "sizes weight"),
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
    ports, workers = dpdk.plan(DpdkFlows(port="ring:cl:0", peer="ring:cl:1", cores=2, flows=100_000,
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
    assert abs(s["lat_count"] - 20_000) <= 2 and s["lost"] == 0 and s["pkts_rx"] == s["pkts_tx"]
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
