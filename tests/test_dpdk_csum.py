"""Checksum offloads in the DPDK engines (issue 33): where the port enabled IPv4/UDP/TCP tx checksum
offloads, the UDP generator and the TCP stack leave the sums to the device (mbuf flags, the pseudo
header's sum in the L4 field); with PERFKIT_DPDK_CSUM=sw, or where the port offers none, they sum in
software. net_tap is the PMD here that offers them (it sums in its PMD, as a NIC would in hardware):
its kernel side, in a namespace this test makes, drops frames with a bad sum and counts them
(/proc/net/snmp), so its counts equal to ours prove the sums right, both ways."""
import os
import subprocess
import time

import pytest

from perfkit.errors import EngineError
from perfkit.spec import DpdkFlows, DpdkHttpClient, DpdkHttpServer

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk, dpdk_tcp  # noqa: E402
from _dpdk_tests import counters, wait_done  # noqa: E402

pytestmark = [pytest.mark.dpdk, pytest.mark.root, pytest.mark.netns]

KERNEL, MINE = "198.18.211.1", "198.18.211.2"
KERNEL6, MINE6 = "2001:db8:0:211::1", "2001:db8:0:211::2"
TX = ("tx_ipv4_cksum", "tx_udp_cksum", "tx_tcp_cksum")


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@pytest.fixture(scope="module")
def ns():
    """One namespace of this test's own: the tap's kernel side lives there, nothing else."""
    name = f"pkcs{os.getpid() % 100000}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)


def _snmp(ns):
    """The namespace's IP, UDP and TCP counters (/proc/net/snmp), as {"Udp": {...}, ...}."""
    out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"], check=True,
                         capture_output=True, text=True, timeout=20).stdout.splitlines()
    rows = {}
    for head, vals in zip(out[::2], out[1::2]):
        k = head.split(":")[0]
        rows[k] = dict(zip(head.split()[1:], map(int, vals.split()[1:])))
    return rows


def _tap_up(ns):
    """The tap the port made (it is made anew at each probe): its kernel side addressed and up."""
    _ip("-n", ns, "addr", "replace", f"{KERNEL}/24", "dev", "pkcs0")
    _ip("-n", ns, "addr", "replace", f"{KERNEL6}/64", "dev", "pkcs0", "nodad")
    _ip("-n", ns, "link", "set", "pkcs0", "up")


def _build(build, spec):
    try:
        return build(spec)
    except EngineError as exc:
        pytest.skip(f"net_tap does not start here: {exc}")


def _offloads(env):
    (port,) = env["ports"]
    assert port["driver"] == "net_tap"
    return {k: port["offloads"][k] for k in TX}


@pytest.mark.parametrize("mode", ["auto", "sw"])
def test_udp_flows_sums_by_the_device_or_in_software_reach_the_kernel_whole(eal, ns, monkeypatch, mode):
    monkeypatch.setenv(dpdk.CSUM_ENV, mode)
    spec = DpdkFlows(port="net_tap0,iface=pkcs0", netns=f"/run/netns/{ns}", ip=MINE, peer_ip=KERNEL,
                     rate="20kpps", flows=8, sizes=(64, 300, 1400), duration="0.5s")
    h = _build(dpdk.build, spec)
    try:
        env = dpdk.run_environment(h)
        _tap_up(ns)
        before = _snmp(ns)
        h.start()
        wait_done(h, timeout=15)
        c = counters(h, 0)
    finally:
        h.close()
    after = _snmp(ns)
    want = "device" if mode == "auto" else "software"
    assert _offloads(env) == dict.fromkeys(TX, want)   # tap offers all three; sw: none used
    du = {k: after["Udp"][k] - before["Udp"][k] for k in ("InDatagrams", "NoPorts", "InCsumErrors", "InErrors")}
    assert c["pkts_tx"] == 10_000 and c["drop_tx"] == 0, c
    assert du["InDatagrams"] + du["NoPorts"] == c["pkts_tx"], du     # every frame taken: sums right
    assert du["InCsumErrors"] == du["InErrors"] == 0, du
    assert after["Ip"]["InHdrErrors"] == before["Ip"]["InHdrErrors"]  # IPv4 header sums right


@pytest.mark.nginx
@pytest.mark.parametrize("mode", ["auto", "sw"])
@pytest.mark.parametrize("family", [4, 6])
def test_http_client_sums_by_the_device_or_in_software_against_nginx(eal, ns, tmp_path, monkeypatch, mode, family):
    """The DPDK HTTP client on net_tap against nginx on the tap's kernel side, over IPv4 and IPv6:
    every response it counts is a line in nginx's access log, and the kernel counted no bad TCP
    or IPv4 sum."""
    from _nginx import Nginx
    monkeypatch.setenv(dpdk.CSUM_ENV, mode)
    mine, kernel = (MINE, KERNEL) if family == 4 else (MINE6, KERNEL6)
    spec = DpdkHttpClient(port="net_tap0,iface=pkcs0", netns=f"/run/netns/{ns}", ip=mine,
                          clients=((mine, 1),), server=kernel, listen=8080, cps=200, duration=1.0)
    h = _build(dpdk_tcp.build, spec)
    try:
        env = dpdk_tcp.run_environment(h)
        _tap_up(ns)
        with Nginx(tmp_path, host=kernel if family == 4 else f"[{kernel}]", netns=ns) as ngx:
            before = _snmp(ns)
            h.start()
            wait_done(h, 30)
            assert h.error() is None
            c = counters(h, 0)
            time.sleep(0.3)
            after = _snmp(ns)
            ngx.stop()
            log = ngx.log()
    finally:
        h.close()
    want = "device" if mode == "auto" else "software"
    assert _offloads(env) == dict.fromkeys(TX, want)
    assert c["sock_error"] == 0 and c["http_err"] == 0 and c["bad_rx"] == 0, c
    assert c["http_2xx"] == c["sock_open"] == c["sock_close"] == len(log) >= 150, (c["http_2xx"], len(log))
    assert all(ln[2] == "200" and ln[6] == mine for ln in log)
    assert after["Tcp"]["InCsumErrors"] == before["Tcp"]["InCsumErrors"]
    assert after["Tcp"]["InErrs"] == before["Tcp"]["InErrs"]
    assert after["Ip"]["InHdrErrors"] == before["Ip"]["InHdrErrors"]


@pytest.mark.tools("curl")
@pytest.mark.parametrize("mode", ["auto", "sw"])
def test_http_server_sums_by_the_device_or_in_software_for_curl(eal, ns, monkeypatch, mode):
    """The DPDK HTTP server on net_tap, curl on the tap's kernel side: each of its requests gets
    a whole response (a segment with a bad sum would be dropped and resent until curl gives up)."""
    monkeypatch.setenv(dpdk.CSUM_ENV, mode)
    spec = DpdkHttpServer(port="net_tap0,iface=pkcs0", netns=f"/run/netns/{ns}", ip=MINE, listen=80,
                          clients=((KERNEL, 1),), payload_size=3000, duration=20)
    h = _build(dpdk_tcp.build, spec)
    n = 20
    try:
        env = dpdk_tcp.run_environment(h)
        _tap_up(ns)
        before = _snmp(ns)
        h.start()
        urls = [a for i in range(n) for a in ("-o", "/dev/null", f"http://{MINE}/{i}")]   # bodies dropped
        out = subprocess.run(["ip", "netns", "exec", ns, "curl", "-s", "--max-time", "10",
                              "-w", "%{http_code} %{size_download}\\n", *urls],
                             capture_output=True, text=True, timeout=30)
        after = _snmp(ns)
        h.stop()
        wait_done(h, 10)
        c = counters(h, 0)
    finally:
        h.close()
    want = "device" if mode == "auto" else "software"
    assert _offloads(env) == dict.fromkeys(TX, want)
    assert out.stdout.splitlines() == [f"200 {3000}"] * n, out
    assert c["http_get"] == c["sock_open"] == c["sock_close"] == n and c["bad_rx"] == 0, c
    assert after["Tcp"]["InCsumErrors"] == before["Tcp"]["InCsumErrors"]
    assert after["Tcp"]["RetransSegs"] == before["Tcp"]["RetransSegs"]   # nothing lost to a bad sum either way
    assert after["Ip"]["InHdrErrors"] == before["Ip"]["InHdrErrors"]


def test_a_bad_csum_mode_is_one_line_before_eal(monkeypatch):
    monkeypatch.setenv(dpdk.CSUM_ENV, "hw")
    with pytest.raises(ValueError) as e:
        dpdk.build(DpdkFlows(port="ring:cm:0", peer="ring:cm:1", rate="10kpps", duration="0.2s"))
    assert str(e.value) == "PERFKIT_DPDK_CSUM: 'hw' is not auto or sw"


def test_perfkit_flows_with_a_bad_csum_mode_exits_2_in_one_line():
    import sys
    out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "ring:cm:0", "--peer", "ring:cm:1",
                          "--rate", "10kpps", "--duration", "0.2s", "--hugepages", "off"],
                         capture_output=True, text=True, timeout=60, env={**os.environ, dpdk.CSUM_ENV: "hw"})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == "perfkit: PERFKIT_DPDK_CSUM: 'hw' is not auto or sw\n"
