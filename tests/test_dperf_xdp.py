"""perfkit's DPDK TCP client on net_af_xdp (issue 6: "net_af_xdp where it starts"): a lab of
two namespaces joined by a veth; the client's port is net_af_xdp on h1's end, with its own
address (.200 of the link); nginx runs in h2. Needs root (the lab); skips with DPDK's reason
where af_xdp does not start.

Each run is in a child process: DPDK 22.11's af_xdp close keeps the interface's xsk socket,
BPF program and umem until the process ends, so an interface opens once per process (see
test_dpdk_kernel.py). h2's veth sends with checksum offload off, as in test_dperf_lab.py, but
for one run with it on: af_xdp hands DPDK the frames as the kernel left them, the TCP checksum
then only partial, which the engine takes on a kernel port (and a wrong one it does not).
Also here: the TCP engine's NIC counters over 2 queues equal the PMD's own.
"""
import ipaddress
import json
import os
import select
import subprocess
import sys
import textwrap
import time

import pytest

from perfkit.errors import EngineError

_dpdk = pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
from perfkit.engines import dpdk  # noqa: E402
from perfkit.kinds import dpdk_tcp as dpdk_tcp_kind  # noqa: E402
from _nginx import needs_nginx  # noqa: E402
from _labs import csum, if_mac, lab_module_or_skip, nginx_in_h2, offload_off_lab, ethtool_or_skip  # noqa: E402


@pytest.fixture(scope="module")
def lab():
    with offload_off_lab(lab_module_or_skip()) as lab:
        yield lab


@pytest.fixture
def nginx(lab, tmp_path):
    with nginx_in_h2(lab, tmp_path) as ngx:
        yield ngx


# The client, in a child: its counters at the end and sock_current every 50 ms.
CHILD = textwrap.dedent("""
    import json, sys, time
    from perfkit.engines import dpdk, dpdk_tcp
    from perfkit.errors import EngineError
    from perfkit.spec import DpdkHttpClient
    from perfkit.stats import COUNTER_NAMES
    kw = json.loads(sys.argv[1])
    dpdk.eal()
    try:
        h = dpdk_tcp.build(DpdkHttpClient(**kw))
    except EngineError as exc:
        print(json.dumps({"skip": str(exc)}), flush=True)
        sys.exit(0)
    seen = []
    try:
        h.start()
        deadline = time.monotonic() + 30
        while h.running() and time.monotonic() < deadline:
            seen.append(dict(zip(COUNTER_NAMES, h.snapshot()[0][0]))["sock_current"])
            time.sleep(0.05)
        h.stop()
        h.join()
        c = dict(zip(COUNTER_NAMES, h.snapshot()[0][0]))
        err = h.error()
    finally:
        h.close()
    res = dpdk.resources()
    print(json.dumps({"c": c, "seen": seen, "error": err, "ports_open": res["ports_open"]}), flush=True)
""")


def run_client(lab, v6=False, **kw):
    h1, h2 = lab.hosts
    net = ipaddress.ip_network(f"{h1.ipv6}/64" if v6 else f"{h1.ipv4}/24", strict=False)
    mine = str(net.network_address + 200)
    spec = dict(port=f"net_af_xdp0,iface={h1.ifname}", netns=h1.netns_path, ip=mine, clients=[[mine, 1]],
                server=h2.ipv6 if v6 else h2.ipv4, listen=8080, http_host="lab", http_path="/x", **kw)
    proc = subprocess.Popen([sys.executable, "-P", "-c", CHILD, json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 90)
        assert ready, "the child printed nothing in time"
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)[1][-3000:]
        out = json.loads(line)
    finally:
        if proc.poll() is None:
            proc.communicate(timeout=30)
    if "skip" in out:
        pytest.skip(f"net_af_xdp does not start here: {out['skip']}")
    assert out["error"] is None and out["ports_open"] == 0
    c = out["c"]
    print(kw, {k: c[k] for k in ("sock_open", "sock_error", "http_2xx", "http_req", "pkts_tx", "pkts_rx", "bad_rx",
                                 "retrans_syn", "retrans_push", "nic_imissed")}, "max cc", max(out["seen"], default=0))
    return out


@needs_nginx
def test_cps_run_on_af_xdp_against_nginx_every_request_in_its_log(lab, nginx):
    out = run_client(lab, cps=500, duration=1.5)
    c = out["c"]
    log = nginx.log()
    assert c["sock_error"] == 0 and c["http_err"] == 0 and c["err_read"] == 0 and c["bad_rx"] == 0
    assert c["sock_open"] == c["sock_close"] == c["http_2xx"] >= 500
    assert len(log) == c["http_2xx"] and all(ln[:3] == ["GET", "/x", "200"] for ln in log)
    assert c["lat_count"] == c["http_2xx"]


@needs_nginx
def test_keepalive_concurrency_on_af_xdp_against_nginx(lab, nginx):
    cc = 40
    out = run_client(lab, cps=400, cc=cc, keepalive="20ms", duration=2)
    c, seen = out["c"], out["seen"]
    held = seen[len(seen) // 2: 3 * len(seen) // 4]
    assert max(seen) == cc and held and set(held) == {cc}, seen
    assert c["sock_open"] == c["sock_close"] == cc and c["sock_error"] == 0 and c["bad_rx"] == 0
    assert len(nginx.log()) == c["http_2xx"] == c["http_req"] > cc * 10


def test_tcp_nic_counters_of_two_queues_are_the_pmds_own(lab):
    """The TCP engine's nic_* rows come from the same code as the dpdk engine's
    (pk_dpdk_port_nic: the PMD's counters, plus the kernel's drops on af_packet/af_xdp): a tap
    whose kernel side is down fails every write, which the tap PMD counts in oerrors. Over a
    client run on 2 queues, both sending SYNs from the start, the engines' nic_oerrors equal
    the PMD's own delta, reported once (queue 0): its base read before any queue's worker
    started, its last read after both ended."""
    from perfkit.spec import DpdkHttpClient
    from perfkit.engines import dpdk_tcp
    from perfkit.stats import COUNTER_NAMES
    h1 = lab.hosts[0]
    ns = os.path.basename(h1.netns_path)
    dev, mine = "net_tap0,iface=pktap0", "198.19.77.2"
    try:
        dpdk.eal()
        p = _dpdk.Port(dev, netns=h1.netns_path, ip=mine, queues=2)
    except EngineError as exc:
        pytest.skip(f"net_tap with 2 queues does not start here: {exc}")
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "pktap0", "down"], check=True)
        spec = DpdkHttpClient(port=dev, netns=h1.netns_path, ip=mine, clients=((mine, 1),), server="198.19.77.1",
                              gateway_mac="02:00:00:00:00:01", cps=2000, duration=0.3, retransmit_timeout="50ms",
                              retries=1, queues=2)
        cfgs = dpdk_tcp_kind.plan(spec)["workers"]
        for k, w in enumerate(cfgs):
            w["cpu"] = dpdk._cpu(k)
        h = _dpdk.TcpEngine(p, cfgs)
        try:
            before = p.stats()
            h.start()
            deadline = time.monotonic() + 20
            while h.running():
                assert time.monotonic() < deadline, "the workers did not stop in time"
                time.sleep(0.02)
            h.join()
            after = p.stats()
            cs = [dict(zip(COUNTER_NAMES, c)) for c, _ in h.snapshot()]
            assert h.error() is None
        finally:
            h.close()
    finally:
        p.close()
    delta = {k: after[k] - before[k] for k in before}
    print("PMD delta", delta, "engines", [{k: c[k] for k in ("nic_oerrors", "nic_ierrors", "nic_imissed", "syn_tx",
                                                         "drop_tx", "sock_error")} for c in cs])
    assert all(c["syn_tx"] + c["drop_tx"] > 0 for c in cs)       # both queues tried to send
    assert delta["oerrors"] > 0 and sum(c["nic_oerrors"] for c in cs) == delta["oerrors"]
    assert [c["nic_oerrors"] > 0 for c in cs] == [True, False]   # the port's counters, once: queue 0
    assert sum(c["nic_ierrors"] for c in cs) == delta["ierrors"]
    assert sum(c["nic_imissed"] for c in cs) == delta["imissed"]
    res = dpdk.resources()
    assert res["ports_open"] == 0 and res["mbufs_free"] == res["mbufs"]


@needs_nginx
@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_cps_on_af_xdp_with_the_lab_hosts_checksum_offload_on(lab, tmp_path, v6):
    """h2's veth as Linux leaves it, checksum offload on: its segments reach af_xdp with the
    TCP checksum still partial (the pseudo header's sum only). On a kernel port the client
    takes such a field as done (nothing crossed a wire), so nginx is loaded as it is."""
    h2 = lab.hosts[1]
    nginx = nginx_in_h2(lab, tmp_path, 6 if v6 else 4).__enter__()
    ethtool_or_skip(h2, "tx", "on")
    try:
        out = run_client(lab, v6=v6, cps=500, duration=1)
    finally:
        ethtool_or_skip(h2, "tx", "off")
        nginx.stop()
    c = out["c"]
    assert c["sock_error"] == 0 and c["http_err"] == 0 and c["bad_rx"] == 0
    assert c["sock_open"] == c["sock_close"] == c["http_2xx"] == len(nginx.log()) >= 400


def _send_syns(ifname, dst_mac, sip, dip, kinds):
    """From a lab host's packet socket: one SYN to dip:80 per kind, its TCP checksum
    'good', 'partial' (the pseudo header's folded sum, as a Linux sender with offload leaves
    it) or 'bad'."""
    import socket
    import struct
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    try:
        s.bind((ifname, 0))
        src_mac = s.getsockname()[4]
        for k, kind in enumerate(kinds):
            tcp = struct.pack("!HHIIBBHHH", 41000 + k, 80, 1000, 0, 5 << 4, 0x02, 65535, 0, 0)
            pseudo = 0xffff ^ csum(socket.inet_aton(sip) + socket.inet_aton(dip) + struct.pack("!BBH", 0, 6, len(tcp)))
            check = {"good": csum(tcp + struct.pack("!H", pseudo)), "partial": pseudo,
                     "bad": pseudo ^ 0x0100}[kind]
            tcp = tcp[:16] + struct.pack("!H", check) + tcp[18:]
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), k, 0, 64, 6, 0, socket.inet_aton(sip),
                             socket.inet_aton(dip))
            ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
            s.send(bytes.fromhex(dst_mac.replace(":", "")) + src_mac + b"\x08\x00" + ip + tcp)
    finally:
        s.close()
    return len(kinds)


def test_on_a_kernel_port_only_a_partial_checksum_passes_not_a_wrong_one(lab):
    """The server on net_af_packet (h1's veth) gets three SYNs from h2's packet socket: a
    right checksum and a partial one (what a Linux sender with offload leaves) are taken,
    a wrong one is counted in bad_rx."""
    from perfkit.spec import DpdkHttpServer
    from perfkit.engines import dpdk_tcp
    from perfkit.stats import COUNTER_NAMES
    h1, h2 = lab.hosts
    net = ipaddress.ip_network(f"{h1.ipv4}/24", strict=False)
    mine = str(net.network_address + 200)
    try:
        dpdk.eal()
        srv = dpdk_tcp.build(DpdkHttpServer(port=f"net_af_packet0,iface={h1.ifname}", netns=h1.netns_path, ip=mine,
                                            clients=((h2.ipv4, 1),), payload_size=100, duration=5))
    except EngineError as exc:
        pytest.skip(f"net_af_packet does not start here: {exc}")
    try:
        srv.start()
        time.sleep(0.3)
        mac = lab.call(h1, if_mac, h1.ifname)
        lab.call(h2, _send_syns, h2.ifname, mac, h2.ipv4, mine, ["good", "partial", "bad"])
        time.sleep(0.5)
        srv.stop()
        while srv.running():
            time.sleep(0.02)
        srv.join()
        c = dict(zip(COUNTER_NAMES, srv.snapshot()[0][0]))
    finally:
        srv.close()
    assert c["syn_rx"] == 2 and c["bad_rx"] == 1

