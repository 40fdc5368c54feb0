"""perfkit flows / reflect on the socket engine (issue 5: "the same commands run on the
socket engine with --engine socket where the feature exists there"): the far end on a
kernel UDP socket, alone or as the reflector of a DPDK generator in another lab host."""
import ipaddress
import json
import socket
import struct
import subprocess
import sys
import time

import pytest

import perfkit
from perfkit.spec import SocketReflect

WIRE = struct.Struct("=IIQQ")   # pk_wire_hdr: magic, flow, seq, tx_ns (host order)
MAGIC = 0x706B7431


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serving(spec):
    run = perfkit.Run(spec).start()
    time.sleep(0.3)               # the worker has bound its socket
    return run


def test_reverse_sends_every_datagram_back_unchanged():
    port = _free_udp_port()
    run = _serving(SocketReflect(port=port, mode="reverse", duration=5))
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.settimeout(2)
    try:
        for i in range(100):
            msg = bytes([i]) * (1 + i * 13)
            c.sendto(msg, ("127.0.0.1", port))
            assert c.recvfrom(65536)[0] == msg
    finally:
        c.close()
        run.stop()
        run.wait(10)
    s = run.summary
    assert s["pkts_rx"] == s["pkts_tx"] == 100 and s["drop_tx"] == 0
    assert s["bytes_rx"] == sum(1 + i * 13 for i in range(100))


def test_rxonly_counts_flows_and_loss_from_perfkits_header():
    port = _free_udp_port()
    run = _serving(SocketReflect(port=port, mode="rxonly", flows=4, duration=5))
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = 0
    try:
        for flow in range(4):
            for seq in range(50):
                if flow == 2 and seq in (10, 11, 12):   # three lost in one flow
                    continue
                c.sendto(WIRE.pack(MAGIC, flow, seq, time.monotonic_ns()) + b"x" * 40, ("127.0.0.1", port))
                sent += 1
        time.sleep(0.3)
    finally:
        c.close()
        run.stop()
        run.wait(10)
    s = run.summary
    assert s["pkts_rx"] == sent == 197
    assert s["lost"] == 3 and s["dup"] == 0 and s["reorder"] == 0
    assert s["lat_count"] == sent and s["lat_p50_us"] > 0      # one-way, the same host's clock


def test_spec_checks_and_the_cli_refuses_dpdk_only_options():
    with pytest.raises(ValueError, match="mode: 'forward'.*socket engine"):
        SocketReflect(mode="forward")
    with pytest.raises(ValueError, match="port: 0 is out of range"):
        SocketReflect(port=0)
    cmd = [sys.executable, "-P", "-m", "perfkit"]
    for args, field in ((["flows", "--engine", "socket", "--ramp-to", "1Mpps"], "--ramp-to"),   # Meta.applies
                        (["flows", "--engine", "socket", "--peer", "ring:x:1"], "--peer"),
                        (["flows", "--engine", "socket", "-m", "46"], "size"),
                        (["reflect", "--engine", "socket", "--port", "ring:x:1"], "--port"),
                        (["flows", "-t", "1s"], "port")):
        cp = subprocess.run(cmd + args, capture_output=True, text=True, timeout=60)
        assert cp.returncode == 2 and cp.stderr.startswith(f"perfkit: {field}:"), (args, cp.stderr)
        assert cp.stderr.count("\n") == 1, cp.stderr


def test_cli_flows_on_the_socket_engine():
    cmd = [sys.executable, "-P", "-m", "perfkit", "flows", "--engine", "socket", "-m", "128", "-r", "10kpps",
           "-f", "4", "-t", "1s", "--json"]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    s = json.loads(cp.stdout.splitlines()[-1])["summary"]
    assert s["test"] == "udp_bw" and s["engine"] == "socket"
    assert 9_000 <= s["pkts_tx"] <= 10_064 and s["pkts_rx"] == s["pkts_tx"] and s["lost"] == 0
    assert s["bytes_rx"] == (128 - 46) * s["pkts_rx"]        # a 128 B frame carries 82 B of UDP payload


def test_a_dpdk_generator_against_a_kernel_reflector_in_another_lab_host():
    """DPDK flows (af_packet on h1's veth) in reverse mode, the far end a kernel UDP
    socket in h2 (perfkit reflect --engine socket): every frame comes back."""
    dpdk_mod = pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")  # noqa: F841
    from _labs import lab_module_or_skip, lab_up_or_skip
    lab_mod = lab_module_or_skip()
    from perfkit.engines import dpdk
    from perfkit.spec import DpdkFlows
    from _dpdk_tests import wait_done, counters
    dpdk.eal()
    lab = lab_up_or_skip(lab_mod)
    try:
        h1, h2 = lab.hosts
        mine = str(ipaddress.ip_network(f"{h1.ipv4}/24", strict=False).network_address + 200)
        refl = _serving(SocketReflect(host=h2.ipv4, port=9, mode="reverse", duration=8, netns=h2.netns_path))
        try:
            gen = dpdk.build(DpdkFlows(port=f"net_af_packet0,iface={h1.ifname}", netns=h1.netns_path, ip=mine,
                                       peer_ip=h2.ipv4, mode="reverse", rate="5kpps", flows=4, size=128,
                                       duration="1s"))
            try:
                gen.start()
                wait_done(gen, timeout=15)
                g = counters(gen, 0)
            finally:
                gen.close()
        finally:
            refl.stop()
            refl.wait(10)
        r = refl.summary
        assert g["pkts_tx"] == 5_000 and r["pkts_rx"] == r["pkts_tx"] == 5_000, (g, r)
        assert g["udp_rx"] == 5_000 and g["seq_lost"] == 0 and g["lat_count"] == 5_000   # round trips, timed
    finally:
        lab.down()
