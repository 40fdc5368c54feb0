"""Port setup follows what the device reports (rte_eth_dev_info): RSS with a symmetric key over
several queues, checksum and TSO offloads where offered (software where not), the MTU within
max_rx_pktlen, descriptors within the device's limits; each choice is recorded (Port.setup).
Checked on virtual PMDs that report offloads: net_tap into a lab namespace (whose Linux stack
drops bad checksums) and net_virtio_user against a net_vhost port in another process."""
import os
import socket
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from perfkit.errors import EngineError

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402
from perfkit.spec import DpdkFlows  # noqa: E402
from _dpdk_tests import csum, udp_stats  # noqa: E402

MINE, KERNEL = "198.19.78.2", "198.19.78.1"


def check_setup_against(setup, info):
    """The recorded setup is what the device reports, and each choice follows from it."""
    for k, v in info.items():
        assert setup[k] == v, k
    for name, bit in {**_dpdk.RX_OFFLOADS}.items():
        assert setup["offloads"][name] == ("device" if info["rx_offload_capa"] & bit else "software"), name
    for name, bit in _dpdk.TX_OFFLOADS.items():
        offered = info["tx_offload_capa"] & bit
        assert setup["offloads"][name] == ("device" if offered else "off" if name == "tx_tcp_tso" else "software")
    rss_types = info["flow_type_rss_offloads"] & setup["rss_hf"]
    assert setup["rss"] == (setup["queues"] > 1 and bool(info["flow_type_rss_offloads"] & setup["rss_hf"]))
    assert setup["rss_hf"] == rss_types
    if setup["rss"]:
        assert setup["rss_key"] == ("symmetric" if info["hash_key_size"] else "pmd")
    else:
        assert setup["rss_key"] is None
    for d in ("rx", "tx"):
        lo, hi, align = info[f"{d}_desc_lim"]
        n = setup[f"{d}_desc"]
        assert lo <= n <= (hi or 65535) and n % (align or 1) == 0, (d, n)
    if setup["mtu_asked"]:
        assert setup["mtu"] <= min(setup["mtu_asked"], info["max_rx_pktlen"] - 18, info["max_mtu"])


@pytest.mark.parametrize("dev,queues", [("net_null0", 1), ("net_null0", 2), ("ring:pc:0", 1)])
def test_a_ports_setup_is_recorded_and_matches_dev_info(eal, dev, queues):
    other = _dpdk.Port("ring:pc:1") if dev.startswith("ring:") else None
    try:
        with _dpdk.Port(dev, queues=queues) as p:
            s = p.setup
            check_setup_against(s, p.dev_info())
            assert s["queues"] == queues and s["rx_desc"] == s["tx_desc"] == 1024
            assert s["rx_offloads"] == s["tx_offloads"] == 0     # these PMDs offer none: all in software
            assert s["mtu"] == 1500 and s["mtu_asked"] is None    # no MTU asked: the device's own
    finally:
        if other:
            other.close()


def _eth(dst, src):
    return bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) + b"\x08\x00"


def _ip4(src, dst, proto, payload_len, ident=1):
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + payload_len, ident, 0, 64, proto, 0,
                       socket.inet_aton(src), socket.inet_aton(dst))


def udp_frame(dst_mac, src_mac, src, dst, sport, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload   # sums left at 0
    return _eth(dst_mac, src_mac) + _ip4(src, dst, 17, len(udp)) + udp


def syn_frame(dst_mac, src_mac, src, dst, sport, dport, seq):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x02, 65535, 0, 0)
    return _eth(dst_mac, src_mac) + _ip4(src, dst, 6, len(tcp)) + tcp


def l4_ok(frame):
    """A received IPv4 UDP/TCP frame's IPv4 and L4 checksums are right."""
    ip = frame[14:]
    ihl = (ip[0] & 15) * 4
    tot = struct.unpack("!H", ip[2:4])[0]
    if csum(ip[:ihl]) != 0:
        return False
    l4 = ip[ihl:tot]
    pseudo = ip[12:20] + struct.pack("!BBH", 0, ip[9], len(l4))
    return csum(pseudo + l4) == 0


def _in_ns(ns, *cmd):
    subprocess.run(["ip", "-n", ns, *cmd], check=True)


def _wait_for(pred, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.02)
    return pred()


def test_tap_setup_follows_dev_info_with_rss_and_a_symmetric_key(eal, lab):
    h1 = lab.hosts[0]
    try:
        p = _dpdk.Port("net_tap0,iface=pktap0", netns=h1.netns_path, queues=2, mtu=9000)
    except EngineError as exc:
        pytest.skip(f"net_tap with 2 queues does not start here: {exc}")
    with p:
        s, info = p.setup, p.dev_info()
        check_setup_against(s, info)
        assert s["driver"] == "net_tap" and s["queues"] == 2
        assert s["rss"] and s["rss_key"] == "symmetric" and info["hash_key_size"] == 40
        # tap sums in its PMD: it offers every checksum offload and TSO
        assert set(s["offloads"].values()) == {"device"}
        # 9000 asked, but tap takes frames up to max_rx_pktlen (1522 here)
        assert s["mtu_asked"] == 9000 and s["mtu"] == min(9000, info["max_rx_pktlen"] - 18)


@pytest.mark.parametrize("offload", [True, False])
def test_tap_checksums_are_right_by_the_device_or_in_software(eal, lab, offload):
    """Frames sent with their sums left at 0 and Port.send(csum=True): the device (tap's PMD)
    fills them in where setup enabled the offload; with the offloads off (the software path),
    perfkit does. h1's kernel takes every UDP frame (a bad sum is dropped and counted in
    InCsumErrors) and answers every SYN to a closed port with a RST (a bad TCP sum: no RST).
    Its own UDP datagrams come back to the port with right sums."""
    h1 = lab.hosts[0]
    ns = os.path.basename(h1.netns_path)
    try:
        p = _dpdk.Port("net_tap0,iface=pktap0", netns=h1.netns_path, ip=MINE)
    except EngineError as exc:
        pytest.skip(f"net_tap does not start here: {exc}")
    with p:
        if not offload:   # the same frames through the software path
            assert p.setup["offloads"]["tx_udp_cksum"] == "device"
            _force_software(p)
        _in_ns(ns, "addr", "replace", f"{KERNEL}/24", "dev", "pktap0")
        _in_ns(ns, "link", "set", "pktap0", "up")
        _in_ns(ns, "neigh", "replace", MINE, "lladdr", p.mac, "dev", "pktap0", "nud", "permanent")
        kmac = lab.call(h1, _if_mac, "pktap0")
        before = lab.call(h1, udp_stats)
        n = 200
        frames = [udp_frame(kmac, p.mac, MINE, KERNEL, 20000 + i % 7, 9, bytes(range(i % 64, i % 64 + 90)))
                  for i in range(n)]
        assert p.send(frames, csum=True) == n
        bad = udp_frame(kmac, p.mac, MINE, KERNEL, 20000, 9, b"x" * 40)
        bad = bad[:14 + 26] + b"\x12\x34" + bad[14 + 28:]     # a wrong UDP sum, sent as it is
        ip = bytearray(bad[14:34])
        ip[10:12] = struct.pack("!H", csum(bytes(ip)))
        bad = bad[:14] + bytes(ip) + bad[34:]
        assert p.send([bad]) == 1

        def kernel_took():
            after = lab.call(h1, udp_stats)
            return (after["InDatagrams"] + after["NoPorts"] - before["InDatagrams"] - before["NoPorts"] == n
                    and after["InCsumErrors"] - before["InCsumErrors"] == 1)
        assert _wait_for(kernel_took), (before, lab.call(h1, udp_stats))
        # TCP: a SYN to a closed port is answered by a RST only when its sum is right
        syns = [syn_frame(kmac, p.mac, MINE, KERNEL, 30000 + i, 9, 1000 + i) for i in range(20)]
        while p.recv():
            pass
        assert p.send(syns, csum=True) == 20
        rsts = set()

        def got_rsts():
            for f in p.recv():
                if f[12:14] == b"\x08\x00" and f[23] == 6 and f[14 + 20 + 13] & 0x04:
                    assert l4_ok(f)
                    rsts.add(struct.unpack("!H", f[14 + 22:14 + 24])[0])
            return len(rsts) == 20
        assert _wait_for(got_rsts), sorted(rsts)
        # the kernel's datagrams to the port: every one received, with right sums
        lab.call(h1, _send_udp, MINE, 50)
        got = []

        def all_in():
            got.extend(f for f in p.recv() if f[12:14] == b"\x08\x00" and f[23] == 17)
            return len(got) >= 50
        assert _wait_for(all_in) and len(got) == 50 and all(l4_ok(f) for f in got)


def _force_software(p):
    """The software path of the same port: pkd_tx_csum with the tx offloads taken off (tests)."""
    p.software_checksums()
    assert set(v for k, v in p.setup["offloads"].items() if k.startswith("tx_")) <= {"software", "off"}


def _if_mac(ifname):
    from _labs import if_mac
    return if_mac(ifname)


def _send_udp(dst, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for i in range(n):
            s.sendto(b"perfkit %d" % i + b"." * 60, (dst, 7000 + i % 3))
    finally:
        s.close()


def test_a_pci_port_without_vfio_fails_in_one_line(eal, tmp_path, monkeypatch):
    """A PCI port on vfio-pci where /dev/vfio is missing: the run fails before anything opens,
    with one line saying what to do (the sysfs is faked, as in test_nics.py)."""
    from test_nics import fake_sysfs
    sysfs, dev = fake_sysfs(tmp_path, vfio_dev=False)
    monkeypatch.setattr(dpdk, "SYSFS", sysfs)
    monkeypatch.setattr(dpdk, "DEV", dev)
    with pytest.raises(EngineError) as e:
        dpdk.build(DpdkFlows(port="0000:02:00.0", peer="ring:vf:1", rate="10kpps", duration="0.2s"))
    msg = str(e.value)
    assert "\n" not in msg
    assert msg == (f"0000:02:00.0: bound to vfio-pci but {dev}/vfio is missing "
                   "(load vfio-pci with the IOMMU on, or vfio's no-IOMMU mode)")
    assert dpdk.resources()["ports_open"] == 0


# The vhost-user side: a net_vhost port in its own process (its own EAL), serving the socket.
VHOST_CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, sys.argv[2])
    from perfkit import _dpdk
    from perfkit.engines import dpdk
    from test_dpdk_portcaps import udp_frame, syn_frame, l4_ok
    dpdk.eal()
    p = _dpdk.Port(f"net_vhost0,iface={sys.argv[1]},queues=1")
    print(json.dumps({"setup": p.setup, "info": p.dev_info(), "mac": p.mac}), flush=True)
    want = int(sys.stdin.readline())   # the other side is up and has sent this many frames
    got, deadline = [], time.monotonic() + 10
    while len(got) < want and time.monotonic() < deadline:
        got += [f for f in p.recv() if f[12:14] == b"\\x08\\x00" and f[23] in (6, 17)]
    peer = sys.stdin.readline().strip()
    back = [udp_frame(peer, p.mac, "198.19.79.2", "198.19.79.1", 9, 20000 + i, b"back %d" % i + b"." * 40)
            for i in range(want)] + [syn_frame(peer, p.mac, "198.19.79.2", "198.19.79.1", 9, 30000, 7)]
    sent = p.send(back, csum=True)
    print(json.dumps({"rx": len(got), "rx_ok": sum(map(l4_ok, got)),
                      "udp": sum(f[23] == 17 for f in got), "tcp": sum(f[23] == 6 for f in got),
                      "tx": sent}), flush=True)
    sys.stdin.readline()
    p.close()
""")


def test_virtio_user_against_vhost_in_another_process(eal, tmp_path):
    """net_virtio_user here (MTU 9000), net_vhost serving the vhost-user socket in a second process:
    each side's setup is what its device reports (virtio takes the UDP/TCP checksum offloads the
    vhost side negotiated, sums IPv4 headers in software, and has no TSO: net_vhost turns it
    off unless asked), and frames whose sums were left to the device arrive right, as many
    as were sent, both ways."""
    sock = str(tmp_path / "vh.sock")
    child = subprocess.Popen([sys.executable, "-P", "-c", VHOST_CHILD, sock, os.path.dirname(__file__)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import json
    try:
        line = child.stdout.readline()
        if not line:
            pytest.skip(f"net_vhost does not start here: {child.communicate(timeout=10)[1][-500:]}")
        far = json.loads(line)
        check_setup_against(far["setup"], far["info"])
        assert far["setup"]["driver"] == "net_vhost"
        try:
            p = _dpdk.Port(f"net_virtio_user0,path={sock},queues=1", mtu=9000)
        except EngineError as exc:
            pytest.skip(f"net_virtio_user does not start here: {exc}")
        with p:
            s, info = p.setup, p.dev_info()
            check_setup_against(s, info)
            assert s["driver"] == "net_virtio_user" and not s["rss"]
            assert s["offloads"]["tx_udp_cksum"] == s["offloads"]["tx_tcp_cksum"] == "device"
            assert s["offloads"]["tx_ipv4_cksum"] == "software" and s["offloads"]["tx_tcp_tso"] == "off"
            # jumbo: 9000 is within its max_rx_pktlen; frames above one mbuf arrive by scatter
            assert s["mtu"] == 9000 <= info["max_rx_pktlen"] - 18 and s["jumbo_rx"] == "scatter"
            assert _wait_for(lambda: p.link_up, 10)
            n = 100
            frames = [udp_frame(far["mac"], p.mac, "198.19.79.1", "198.19.79.2", 20000 + i, 9,
                                bytes(range(i % 50, i % 50 + 77))) for i in range(n - 10)]
            frames += [syn_frame(far["mac"], p.mac, "198.19.79.1", "198.19.79.2", 30000 + i, 9, i)
                       for i in range(10)]
            assert p.send(frames, csum=True) == n
            child.stdin.write(f"{n}\n{p.mac}\n")
            child.stdin.flush()
            res = json.loads(child.stdout.readline())
            assert res == {"rx": n, "rx_ok": n, "udp": n - 10, "tcp": 10, "tx": n + 1}
            back = []

            def all_back():
                back.extend(f for f in p.recv() if f[12:14] == b"\x08\x00" and f[23] in (6, 17))
                return len(back) >= n + 1
            assert _wait_for(all_back, 5) and len(back) == n + 1 and all(l4_ok(f) for f in back)
            child.stdin.write("done\n")
            child.stdin.flush()
    finally:
        try:
            child.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()


def test_a_run_records_its_ports_setup_in_its_environment(eal, capsys):
    import perfkit
    dpdk.set_verbose(1)
    try:
        run = perfkit.Run(DpdkFlows(port="ring:env:0", peer="ring:env:1", rate="10kpps", duration="0.2s"),
                          engine="dpdk").run()
    finally:
        dpdk.set_verbose(0)
    ports = run.env["ports"]
    assert [p["dev"] for p in ports] == ["ring:env:0", "ring:env:1"]
    assert all(p["driver"] == "net_ring" and p["queues"] == 1 and p["rss"] is False for p in ports)
    err = capsys.readouterr().err.splitlines()
    said = [ln for ln in err if ln.startswith("port ring:env:")]
    assert said == [dpdk.setup_line(p["dev"], p) for p in ports]
    assert "driver net_ring, 1 queue(s) of 1, RSS off;" in said[0] and "descriptors rx 1024" in said[0]


def test_perfkit_flows_v_says_each_ports_setup_on_stderr():
    out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "ring:v:0", "--peer", "ring:v:1",
                          "--rate", "10kpps", "--duration", "0.2s", "--hugepages", "off", "--json", "-v"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("port ring:v:")]
    assert len(lines) == 2 and all("driver net_ring" in ln and "MTU 1500" in ln for ln in lines)
    import json
    assert all(json.loads(ln) for ln in out.stdout.splitlines())   # the rows stay JSON lines


@pytest.mark.parametrize("n,lim,fit", [
    (1024, (0, 65535, 1), 1024), (1024, (32, 32768, 1), 1024),   # net_null, virtio_user here
    (1024, (64, 512, 8), 512),          # above nb_max: the maximum
    (1024, (2048, 4096, 32), 2048),     # below nb_min: the minimum
    (1000, (0, 4096, 32), 992),         # aligned down
    (1024, (100, 4096, 64), 1024),
    (110, (100, 4096, 64), 128),        # aligned down below nb_min: the next multiple up
    (1024, (0, 0, 0), 1024),            # a PMD that says nothing: as asked
])
def test_descriptors_are_clamped_and_aligned_to_the_devices_limits(n, lim, fit):
    assert _dpdk.desc_fit(n, *lim) == fit


@pytest.mark.nginx
def test_dpdk_http_client_on_af_packet_against_nginx_in_an_isolated_pair(eal, tmp_path):
    """An isolated pair of namespaces (a veth, nothing else): nginx at 192.0.2.2 in one, the DPDK
    HTTP client on net_af_packet over the other end (its own address a lab one, routed on-link
    by the nginx side). Every response the client counts is a line in nginx's access log, and
    what a run records (run_environment) holds its port's setup."""
    from _nginx import Nginx
    from perfkit.engines import dpdk_tcp
    from _dpdk_tests import counters, wait_done
    from perfkit.spec import DpdkHttpClient
    if os.geteuid() != 0:
        pytest.skip("needs root: the test makes network namespaces")
    tag = f"pkpc{os.getpid() % 100000}"
    a, b, mine = tag + "a", tag + "b", "198.18.200.1"

    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)
    try:
        ip("netns", "add", a)
        ip("netns", "add", b)
        ip("link", "add", tag + "x", "netns", a, "type", "veth", "peer", "name", tag + "y", "netns", b)
        ip("-n", a, "link", "set", tag + "x", "up")
        ip("-n", b, "addr", "add", "192.0.2.2/24", "dev", tag + "y")
        ip("-n", b, "link", "set", tag + "y", "up")
        ip("-n", b, "link", "set", "lo", "up")
        ip("-n", b, "route", "add", f"{mine}/32", "dev", tag + "y")   # the client's address, on the link
        with Nginx(tmp_path, host="192.0.2.2", netns=b) as ngx:
            spec = DpdkHttpClient(port=f"net_af_packet0,iface={tag}x", netns=f"/run/netns/{a}", ip=mine,
                                  clients=((mine, 1),), server="192.0.2.2", listen=ngx.port, cps=200,
                                  duration=1.0)
            h = dpdk_tcp.build(spec)
            try:
                h.start()
                wait_done(h, 30)
                assert h.error() is None
                c = counters(h, 0)
                env = dpdk_tcp.run_environment(h)
            finally:
                h.close()
            time.sleep(0.3)
            ngx.stop()
            log = ngx.log()
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
    assert c["sock_error"] == 0 and c["http_err"] == 0 and c["bad_rx"] == 0, c
    assert c["http_2xx"] == c["sock_open"] == c["sock_close"] == len(log) >= 150, (c["http_2xx"], len(log))
    assert all(ln[2] == "200" and ln[6] == mine for ln in log)
    (port,) = env["ports"]
    assert port["dev"] == spec.port and port["driver"] == "net_af_packet" and port["rx_offloads"] == 0


def test_send_csum_sums_good_frames_in_software_and_leaves_others_as_they_are(eal):
    """Over a ring pair (no offloads): send(csum=True) fills in the sums of IPv4 UDP/TCP frames
    in software; a frame it cannot read whole (cut, a bad header length, not IPv4) goes as it is."""
    good = [udp_frame("02:00:00:00:00:02", "02:00:00:00:00:01", MINE, KERNEL, 1, 2, b"abc" * k) for k in range(5)]
    good.append(syn_frame("02:00:00:00:00:02", "02:00:00:00:00:01", MINE, KERNEL, 3, 4, 5))
    u = good[1]
    odd = [u[:20], u[:14 + 19], u[:14] + b"\x4f" + u[15:], u[:16] + b"\xff\xff" + u[18:],
           u[:12] + b"\x86\xdd" + u[14:], b"\0" * 14, u[:14] + b"\x45" + b"\0" * 3]
    with _dpdk.Port("ring:cs:0") as a, _dpdk.Port("ring:cs:1") as b:
        assert a.setup["tx_offloads"] == 0
        assert a.send(good + odd, csum=True) == len(good) + len(odd)
        got = []
        assert _wait_for(lambda: got.extend(b.recv()) or len(got) >= len(good) + len(odd))
    assert all(l4_ok(f) for f in got[:len(good)])
    assert got[len(good):] == odd
