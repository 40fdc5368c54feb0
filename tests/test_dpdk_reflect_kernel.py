"""perfkit's reflector returns kernel-sent UDP (issue 5's tests, over a veth pair with
net_af_packet into a lab namespace): a Linux UDP socket in one lab host sends to the
DPDK port on the other's veth, and gets every datagram back, addresses and ports
swapped, with checksums its kernel accepts."""
import ipaddress
import subprocess

import pytest

from perfkit.spec import DpdkReflect

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402
from _dpdk_tests import counters, wait_done  # noqa: E402,F401
from _labs import udp_stats, csum, ethtool_or_skip  # noqa: E402,F401


def _echo(dst, port, n):
    """n datagrams to dst:port from one socket; what came back, from where, and the counters."""
    import socket
    import time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    s.settimeout(0.5)
    before = udp_stats()
    back, src = [], set()
    try:
        for i in range(n):
            s.sendto(b"perfkit-%04d" % i + bytes(50), (dst, port))
            if i % 20 == 19:
                time.sleep(0.002)
        deadline = time.monotonic() + 3
        while len(back) < n and time.monotonic() < deadline:
            try:
                data, addr = s.recvfrom(2048)
            except socket.timeout:
                continue
            back.append(data)
            src.add(addr)
    finally:
        s.close()
    after = udp_stats()
    return back, sorted(src), {k: after[k] - before[k] for k in after}


# offload on: the veth's default, every datagram leaves h2 with a partial checksum (only the
# pseudo header's sum) that the reflector finishes; sent back as they came, all 200 were
# dropped by h2's kernel (InCsumErrors). off: h2 writes whole checksums itself.
@pytest.mark.parametrize("offload", ["on", "off"])
def test_the_reflector_returns_kernel_sent_udp(eal, lab, offload):
    h1, h2 = lab.hosts
    mine = str(ipaddress.ip_network(f"{h1.ipv4}/24", strict=False).network_address + 200)
    if offload == "off":
        ethtool_or_skip(h2, "tx", "off")
    refl = dpdk.build(DpdkReflect(port=f"net_af_packet0,iface={h1.ifname}", netns=h1.netns_path, ip=mine,
                                  duration="20s"))
    try:
        refl.start()
        back, src, delta = lab.call(h2, _echo, mine, 7, 200, timeout=60)
        refl.stop()
        wait_done(refl)
        c = counters(refl, 0)
    finally:
        refl.close()
    assert c["udp_rx"] == 200 and c["bad_rx"] == 0
    assert len(back) == 200 and src == [(mine, 7)]
    assert sorted(back) == sorted(b"perfkit-%04d" % i + bytes(50) for i in range(200))
    assert delta["InCsumErrors"] == 0


def _raw_udp(src, dst, dport, good, bad):
    """From a raw socket: `good` datagrams with the right UDP checksum and `bad` with a wrong
    one, all from a bound UDP socket's port; how many came back to that socket."""
    import socket
    import struct
    import time
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((src, 0))
    u.settimeout(0.5)
    sport = u.getsockname()[1]
    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    before = udp_stats()

    try:
        for i in range(good + bad):
            body = b"raw-%04d" % i + bytes(30)
            head = struct.pack("!HHHH", sport, dport, 8 + len(body), 0)
            pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, 8 + len(body))
            c = csum(pseudo + head + body) or 0xFFFF
            if i >= good:
                c ^= 0x0101   # wrong, and not the partial form either
            r.sendto(head[:6] + struct.pack("!H", c) + body, (dst, 0))
            time.sleep(0.001)
        got, deadline = 0, time.monotonic() + 2
        while time.monotonic() < deadline and got < good + bad:
            try:
                u.recv(2048)
                got += 1
            except socket.timeout:
                continue
    finally:
        r.close()
        u.close()
    after = udp_stats()
    return got, after["InCsumErrors"] - before["InCsumErrors"]


def test_a_wrong_checksum_goes_back_wrong(eal, lab):
    # the reflector finishes partial checksums only: a datagram corrupted on the way (a wrong
    # sum of another kind) goes back with its sum as it was, and the sender's kernel drops it
    h1, h2 = lab.hosts
    mine = str(ipaddress.ip_network(f"{h1.ipv4}/24", strict=False).network_address + 200)
    refl = dpdk.build(DpdkReflect(port=f"net_af_packet0,iface={h1.ifname}", netns=h1.netns_path, ip=mine,
                                  duration="20s"))
    try:
        refl.start()
        got, csum_errors = lab.call(h2, _raw_udp, h2.ipv4, mine, 7, 10, 10, timeout=60)
        refl.stop()
        wait_done(refl)
        c = counters(refl, 0)
    finally:
        refl.close()
    assert c["udp_rx"] == 20 and c["pkts_tx"] == 20      # all reflected
    assert got == 10 and csum_errors == 10               # the good ones arrived, the bad ones were dropped
