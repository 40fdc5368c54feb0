"""dperf's vxlan against Linux's own VXLAN device (issue 32): a lab of two namespaces joined
by a veth; the DPDK port is net_af_packet on h1's end (.200 of the link: the underlay address
and local VTEP); h2 has `ip link add vx0 type vxlan id 4242 remote .200 dstport 4789` over its
veth, the inner address 198.19.77.2 on vx0, and nginx (or curl, ping) there. Linux finds the
inner client address by ARP through the tunnel (perfkit answers it from inside), so every
byte between the stacks crosses VXLAN. Needs root (the lab); skips otherwise."""
import subprocess
import time

import pytest

from perfkit.errors import EngineError
from perfkit.spec import DpdkHttpClient, DpdkHttpServer

_dpdk = pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
from perfkit.engines import dpdk, dpdk_tcp  # noqa: E402
from _dpdk_tests import counters, no_leaks, wait_done  # noqa: E402
from _labs import ethtool_or_skip, lab_module_or_skip, lab_up_or_skip  # noqa: E402

VNI = 4242
INNER_NET, LINUX_INNER, PERFKIT_INNER = "198.19.77.0/24", "198.19.77.2", "198.19.77.1"
VX0_MAC, PERFKIT_INNER_MAC = "02:00:00:00:77:02", "02:00:00:00:77:01"


def sh(host, *argv, check=True):
    return subprocess.run(["ip", "netns", "exec", host.netns, *argv], capture_output=True, text=True, timeout=30,
                          check=check)


@pytest.fixture(scope="module")
def lab():
    """The lab (named vxlan) with vx0 in h2: VNI 4242, remote the DPDK port's address, port 4789."""
    lab_mod = lab_module_or_skip()
    try:
        dpdk.eal()
    except EngineError as exc:
        pytest.skip(f"DPDK EAL does not start here: {exc}")
    lab = lab_up_or_skip(lab_mod, name="vxlan")
    try:
        h2 = lab.hosts[1]
        ethtool_or_skip(h2, "tx", "off")
        p = sh(h2, "ip", "link", "add", "vx0", "type", "vxlan", "id", str(VNI), "local", h2.ipv4,
               "remote", underlay(lab), "dstport", "4789", "dev", h2.ifname, check=False)
        if p.returncode != 0:
            pytest.skip(f"no vxlan device here: {p.stderr.strip()}")
        sh(h2, "ip", "link", "set", "vx0", "address", VX0_MAC)
        sh(h2, "ip", "addr", "add", f"{LINUX_INNER}/24", "dev", "vx0")
        sh(h2, "ip", "link", "set", "vx0", "up")
        yield lab
    finally:
        lab.down()


def underlay(lab):
    """The DPDK port's own address (.200 of the lab's /24): its local VTEP too."""
    return lab.hosts[0].ipv4.rsplit(".", 1)[0] + ".200"


def port(lab):
    h1 = lab.hosts[0]
    return dict(port=f"net_af_packet0,iface={h1.ifname}", netns=h1.netns_path, ip=underlay(lab))


def vxlan(lab):
    return ((VNI, PERFKIT_INNER_MAC, VX0_MAC, underlay(lab), 1, lab.hosts[1].ipv4, 1),)


def vx0_stats(lab):
    """vx0's packet counts (rx, tx) in h2."""
    out = sh(lab.hosts[1], "cat", "/sys/class/net/vx0/statistics/rx_packets",
             "/sys/class/net/vx0/statistics/tx_packets").stdout.split()
    return int(out[0]), int(out[1])


@pytest.fixture
def nginx(lab, tmp_path):
    import shutil
    if not shutil.which("nginx"):
        pytest.skip("nginx is not installed")
    from _nginx import Nginx
    with Nginx(tmp_path, host=LINUX_INNER, netns=lab.hosts[1].netns) as ngx:
        yield ngx


def test_dpdk_client_through_linux_vxlan_to_nginx_every_request_in_its_log(lab, nginx):
    """perfkit's client sends every frame VXLAN-encapsulated to h2's vx0; Linux decapsulates,
    nginx answers on the inner address, Linux encapsulates back: nginx's log holds exactly the
    requests perfkit counts answered, all from the inner client address."""
    rx0, tx0 = vx0_stats(lab)
    spec = DpdkHttpClient(**port(lab), gateway=lab.hosts[1].ipv4, clients=((PERFKIT_INNER, 1),),
                          server=LINUX_INNER, listen=nginx.port, http_host="lab", http_path="/vx", cps=300,
                          duration=1.5, vxlan=vxlan(lab))
    h = dpdk_tcp.build(spec)
    try:
        h.start()
        wait_done(h, 30.0)
        c = counters(h, 0)
        assert h.error() is None
    finally:
        h.close()
    time.sleep(0.3)
    nginx.stop()
    log = nginx.log()
    rx, tx = vx0_stats(lab)
    print(f"vxlan to nginx: {c['sock_open']} connections, http2XX {c['http_2xx']}, nginx log {len(log)}, "
          f"vx0 rx {rx - rx0} tx {tx - tx0}, vxlan_drop {c['vxlan_drop']}, bad_rx {c['bad_rx']}")
    assert c["sock_error"] == c["http_err"] == c["bad_rx"] == c["vxlan_drop"] == 0
    assert c["sock_open"] == c["sock_close"] == c["http_2xx"] >= 400
    assert len(log) == c["http_2xx"]
    assert all(ln[:3] == ["GET", "/vx", "200"] and ln[6] == PERFKIT_INNER for ln in log)
    # every TCP frame crossed vx0 both ways (vx0 also carried Linux's ARP for the inner address)
    assert rx - rx0 >= c["tcp_tx"] and tx - tx0 >= c["tcp_rx"]
    no_leaks()


def test_linux_curl_and_ping_through_vxlan_to_the_dpdk_server(lab):
    """The other way: curl and ping in h2 to perfkit's server at its inner address, through vx0."""
    srv = dpdk_tcp.build(DpdkHttpServer(**port(lab), server=PERFKIT_INNER, clients=((LINUX_INNER, 1),),
                                        payload_size=1000, duration=60, vxlan=vxlan(lab)))
    n = 10
    try:
        srv.start()
        h2 = lab.hosts[1]
        ping = sh(h2, "ping", "-c", "3", "-i", "0.2", "-W", "2", PERFKIT_INNER, check=False)
        urls = [a for i in range(n) for a in (f"http://{PERFKIT_INNER}/{i}", "-o", "/dev/null")]
        curl = sh(h2, "curl", "-sS", "--max-time", "10", "-w", "%{http_code} %{size_download}\n", *urls, check=False)
        time.sleep(0.3)
        srv.stop()
        wait_done(srv, 30.0)
        c = counters(srv, 0)
        assert srv.error() is None
    finally:
        srv.close()
    print(f"curl through vxlan: {curl.stdout.split()}, ping rc {ping.returncode}, server http_get {c['http_get']}, "
          f"icmp_tx {c['icmp_tx']}")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert curl.returncode == 0 and curl.stdout == "200 1000\n" * n, curl.stderr
    assert c["http_get"] == c["sock_open"] == c["sock_close"] == n
    assert c["sock_error"] == c["bad_rx"] == c["vxlan_drop"] == 0 and c["icmp_tx"] >= 3
    no_leaks()
