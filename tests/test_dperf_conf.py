"""dperf's own configuration files as dperf's manual and test folder write them: PCI ports,
bonds, ordinary addresses, several ports, several server addresses, every keyword. Each
loads, or is refused for a reason named in one line (a PCI device absent here, a keyword
perfkit does not run); a run over two ring pairs with two server addresses a port."""
import dataclasses
import re
import time
from pathlib import Path

import pytest

from perfkit import dperf
from perfkit.engines import dpdk
from perfkit.errors import EngineError
from perfkit.kinds import dpdk_tcp as kind
from perfkit.kinds.dpdk_tcp import DpdkHttpClient, DpdkHttpServer
from perfkit.stats import COUNTER_NAMES

DATA = Path(__file__).parent / "data" / "dperf"

# every keyword of dperf's configuration manual (docs/configuration.md) and of its parser
MANUAL = ("mode", "daemon", "quiet", "keepalive", "pipeline", "cpu", "socket_mem", "port", "duration", "cps", "cc",
          "flood", "launch_num", "client", "server", "listen", "payload_random", "payload_size", "packet_size",
          "jumbo", "mss", "protocol", "tx_burst", "wait", "slow_start", "vxlan", "vlan", "kni", "tos", "rss",
          "tcp_rst", "change_dip", "http_host", "http_path", "lport_range", "client_hop", "simd512", "log_level",
          "fast_close", "http_method", "keepalive_request_interval")

# files refused by the keyword they use, and why
REFUSED = {"server-kni.conf": r"server-kni.conf:1: kni: not run by perfkit: KNI is gone from DPDK"}


def test_every_keyword_of_dperf_is_known_and_a_refusal_names_it():
    for kw in MANUAL:
        assert kw in dperf.KEYWORDS, kw
    for kw, why in dperf.REFUSED.items():
        with pytest.raises(dperf.DperfError, match=rf"t.conf:2: {kw}: not run by perfkit: {why[:20]}"):
            dperf.parse(f"mode client\n{kw} 1 2 3\n", source="t.conf")


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.conf")))
def test_each_file_loads_or_is_refused_for_a_named_reason(name, monkeypatch):
    """Outside the test sandbox's address rule (no traffic: specs and a sysfs look-up only)."""
    monkeypatch.delenv("PERFKIT_SANDBOX", raising=False)
    if name in REFUSED:
        with pytest.raises(dperf.DperfError, match=REFUSED[name]) as e:
            dperf.load(DATA / name).to_spec(netns="/run/netns/pk")
        assert "\n" not in str(e.value)
        return
    spec = dperf.load(DATA / name).to_spec(netns="/run/netns/pk")
    plan = kind.plan(spec)
    pci = dpdk.pci_of([p["dev"] for p in plan["ports"]])
    absent = [a for a in pci if not Path(dpdk.SYSFS, "bus/pci/devices", a).exists()]
    if absent:   # a NIC this machine does not have: one line naming it, before EAL starts
        with pytest.raises(EngineError, match=absent[0]) as e:
            dpdk.check_pci(pci)
        assert "\n" not in str(e.value)


def test_vxlan_maps_field_by_field_to_dperfs_meaning(monkeypatch):
    """dperf's vxlan VNI INNER_SMAC INNER_DMAC LOCAL_VTEP NUM REMOTE_VTEP NUM: one a port; each
    queue sends from its own local VTEP (local + q), to remote (+ q when there are NUM = cpus
    of them); its checks (one a port, local NUM = cpus, remote NUM 1 or cpus, IPv4 VTEPs, no vlan,
    one server address a cpu) are one line each."""
    monkeypatch.delenv("PERFKIT_SANDBOX", raising=False)
    s = dperf.load(DATA / "server-vxlan.conf").to_spec()
    assert isinstance(s, DpdkHttpServer)
    assert s.vxlan == ((1, "0c:42:a1:9a:a3:e6", "bc:97:e1:b6:e8:12", "10.80.0.3", 1, "10.80.2.3", 1),)
    (w,) = kind.plan(s)["workers"]
    assert w["vxlan"] == {"vni": 1, "inner_smac": "0c:42:a1:9a:a3:e6", "inner_dmac": "bc:97:e1:b6:e8:12",
                          "local": "10.80.0.3", "remote": "10.80.2.3"}
    assert w["ip"] == "2.2.2.2" and w["own"] == [("10.80.0.3", 1), ("2.2.2.2", 1)]
    client = ("mode client\ncpu 0 1\nport 0000:03:00.1 10.80.0.3 10.80.0.1\nclient 1.1.1.1 100\n"
              "server 2.2.2.2 2\ncps 1k\n")
    c = dperf.parse(client + "vxlan 16777215 0C:42:A1:9A:A3:E6 bc:97:e1:b6:e8:12 10.80.0.3 2 10.80.2.3 2\n",
                    "c.conf").to_spec()
    assert c.vxlan == ((0xffffff, "0c:42:a1:9a:a3:e6", "bc:97:e1:b6:e8:12", "10.80.0.3", 2, "10.80.2.3", 2),)
    ws = kind.plan(c)["workers"]
    assert [(x["vxlan"]["local"], x["vxlan"]["remote"], x["vxlan"]["vni"]) for x in ws] == [
        ("10.80.0.3", "10.80.2.3", 0xffffff), ("10.80.0.4", "10.80.2.4", 0xffffff)]
    assert [x["gateway_ip"] for x in ws] == ["10.80.0.1"] * 2   # the underlay's gateway, ARPed for as before
    one = dperf.parse(client + "vxlan 7 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 1\n").to_spec()
    assert [x["vxlan"]["remote"] for x in kind.plan(one)["workers"]] == ["10.80.2.3"] * 2
    bad = {"vxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 1 10.80.2.3 1\n": r"c.conf:7: vxlan: local_num 1 must be queues \(2\)",
           "vxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 3\n": r"c.conf:7: vxlan: remote_num 3: 1 or queues",
           "vxlan 16777216 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 2\n": r"c.conf:7: vxlan: '16777216' is not a VNI",
           "vxlan 1 02:00:00:00:00:01 zz 10.80.0.3 2 10.80.2.3 2\n": r"c.conf:7: vxlan: 'zz' is not a MAC",
           "vxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 2001:db8::1 2 10.80.2.3 2\n": r"c.conf:7: vxlan: 2001:db8::1: the VTEPs .* IPv4",
           "vxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3\n": r"c.conf:7: vxlan: .*VNI INNER_SMAC",
           "vlan 5\nvxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 2\n": r"c.conf:8: vxlan: not with vlan",
           "rss\nvxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 2\n": r"c.conf:8: vxlan: not with rss",
           "vxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 2\n"
           "vxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 2\n": r"c.conf:7: vxlan: 2 vxlan lines for 1 ports"}
    for extra, msg in bad.items():
        with pytest.raises(dperf.DperfError, match=msg) as e:
            dperf.parse(client + extra, "c.conf").to_spec()
        assert "\n" not in str(e.value)
    with pytest.raises(dperf.DperfError, match=r"c.conf:5: vxlan: 1 server addresses for 2 cpus"):
        dperf.parse(client.replace("2.2.2.2 2", "2.2.2.2 1") +
                    "vxlan 1 02:00:00:00:00:01 02:00:00:00:00:02 10.80.0.3 2 10.80.2.3 2\n", "c.conf").to_spec()


def test_two_pci_ports_share_the_cpus_and_their_server_addresses(monkeypatch):
    monkeypatch.delenv("PERFKIT_SANDBOX", raising=False)
    c = dperf.load(DATA / "client-pci-2port.conf")
    s = c.to_spec()
    assert isinstance(s, DpdkHttpClient) and s.port == "0000:3b:00.0" and s.queues == 2 and s.duration == 1.5 * 86400 + 30
    assert s.more_ports == (("0000:3b:00.1", "10.61.2.2", "10.61.2.1", "02:11:22:33:44:02", (("10.61.2.2", 50),),
                             "10.62.2.10", 2),)
    p = kind.plan(s)
    assert [x["dev"] for x in p["ports"]] == ["0000:3b:00.0", "0000:3b:00.1"]
    w = p["workers"]
    assert [(x["port"], x["queue"]) for x in w] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [x["server_ip"] for x in w] == ["10.62.1.10", "10.62.1.11", "10.62.2.10", "10.62.2.11"]
    assert [x["ip"] for x in w] == ["10.61.1.2"] * 2 + ["10.61.2.2"] * 2
    assert [x["clients"] for x in w] == [[("10.61.1.2", 50)]] * 2 + [[("10.61.2.2", 50)]] * 2
    assert [x["lport_range"] for x in w] == [(1, 32768), (32769, 65535)] * 2
    assert sum(x["cps"] for x in w) == pytest.approx(2e6)
    srv = kind.plan(dperf.load(DATA / "server-pci-2port.conf").to_spec())
    assert [(x["ip"], x["own"]) for x in srv["workers"]] == [
        ("10.62.1.10", [("10.62.1.2", 1), ("10.62.1.10", 2)]), ("10.62.1.11", [("10.62.1.2", 1), ("10.62.1.10", 2)]),
        ("10.62.2.10", [("10.62.2.2", 1), ("10.62.2.10", 2)]), ("10.62.2.11", [("10.62.2.2", 1), ("10.62.2.10", 2)])]
    assert all(x["clients"] == [("10.61.1.2", 50), ("10.61.2.2", 50)] for x in srv["workers"])


def test_keyword_values_in_dperf_forms(monkeypatch):
    monkeypatch.delenv("PERFKIT_SANDBOX", raising=False)
    c = dperf.load(DATA / "client-keywords.conf")
    s = c.to_spec()
    assert (s.cps, s.cc, s.keepalive, s.keepalive_requests) == (1500, 20000, 0.001, 100)
    assert (s.listen, s.listen_num, s.server_num, s.tos, s.vlan, s.mss, s.tcp_rst) == (8080, 2, 2, 16, 100, 1400, False)
    assert c.protocol == "http" and c.client_hop and c.simd512 and c.jumbo and c.log_level == "info"
    assert s.request_bytes().startswith(b"GET /index.html HTTP/1.1\r\nHost: bench.example\r\n")
    old = dperf.load(DATA / "client-cc-old-keywords.conf").to_spec()
    assert old.cc == 2_500_000 and old.keepalive == 60 and old.cps == 1e6
    flood = dperf.load(DATA / "client-flood.conf").to_spec()
    assert flood.flood and flood.cc == 0 and flood.cps == pytest.approx(30e6)   # 30k connections every 1 ms
    assert flood.payload_size == 0 and len(flood.request_bytes()) >= flood.request_size == 64 - 54   # less headers
    tps = dperf.parse("mode client\ncps 500\ncc 6000\nkeepalive 1ms\npayload_size 1400\n"
                      "port ring:t:0 10.1.0.2 10.1.0.1\nclient 10.1.0.2 100\nserver 10.1.1.2 1\n").to_spec()
    assert tps.request_size == 1400 and 1400 <= len(tps.request_bytes()) <= 1409   # dperf's requests are that long
    assert tps.request_bytes().endswith(b"\r\n\r\n") and b"X-Pad: aaa" in tps.request_bytes()
    elephant = dperf.load(DATA / "client-udp-pipeline.conf").to_spec()
    assert (elephant.protocol, elephant.cc, elephant.keepalive, elephant.pipeline) == ("udp", 1, 1e-6, 4)
    dip = dperf.load(DATA / "client-change-dip.conf").to_spec()
    assert dip.flood and dip.change_dip == (("192.168.1.1", 64, 100), ("192.168.200.1", 1, 20))
    assert len(dip.dips) == 120 and dip.dips[1] == "192.168.1.65" and dip.dips[99] == "192.168.25.193"
    halves = [w["dips"] for w in kind.plan(dip)["workers"]]
    assert [len(h) for h in halves] == [60, 60] and halves[0] + halves[1] == dip.dips
    bond = dperf.load(DATA / "server-bond.conf")
    assert bond.daemon and bond.socket_mem == (4096, 0) and bond.to_spec().duration == 10 * 86400
    assert bond.to_spec().port.startswith("net_bonding")
    v6 = dperf.load(DATA / "server-ipv6.conf").to_spec()
    assert v6.ip == "2001:6:6:241::27" and v6.ip_version == 6
    server_kw = dperf.parse("mode server\nlaunch_num 10\ncps 1k\nport ring:a:1 10.1.0.2 10.1.0.1\n"
                            "client 10.1.0.1 1\nserver 10.1.0.2 1\n").to_spec()   # dperf ignores them there
    assert isinstance(server_kw, DpdkHttpServer)


@pytest.mark.parametrize("text,match", [
    ("cpu 0-2\n", r"t.conf:\d+: cpu: 3 CPUs for 2 ports"),
    ("cpu 0-1\n", r"t.conf:\d+: server: 2 server addresses for 1 cpus of port 1"),
])
def test_several_ports_errors_name_the_line(text, match):
    for mode in ("client", "server"):   # dperf: at least one cpu a server address, both modes
        _several_ports(mode, text, match)


def _several_ports(mode, text, match):
    base = (f"mode {mode}\ncps 1k\nport ring:a:0 198.18.0.1 198.18.0.2\nport ring:b:0 198.18.1.1 198.18.1.2\n"
            "client 198.18.0.1 1\nclient 198.18.1.1 1\nserver 198.18.0.2 2\nserver 198.18.1.2 2\n")
    with pytest.raises(dperf.DperfError, match=match):
        dperf.parse(base + text, source="t.conf").to_spec()


def _workers(handle) -> list[dict]:
    return [dict(zip(COUNTER_NAMES, c)) for c, _ in handle.snapshot()]


def _sum(handle) -> dict:
    out: dict = {}
    for w in _workers(handle):
        for k, v in w.items():
            out[k] = out.get(k, 0) + v
    return out


def _v6(text: str, ring: str) -> str:
    """The two-ring confs over IPv6 (198.18.A.B -> 2001:2::A:B: a server's client ranges share a /96)."""
    text = re.sub(r"198\.18\.(\d+)\.(\d+)", r"2001:2::\1:\2", text)
    return text.replace("ring:dpa", f"ring:{ring}a").replace("ring:dpb", f"ring:{ring}b")


@pytest.mark.dpdk
@pytest.mark.parametrize("family", [4, 6])
def test_two_ring_pairs_with_two_server_addresses_each(eal, family):
    """dperf's two ports, cpu 0-3 (two queues a port), two server addresses a port: every
    connection the client opened the server accepted, every request answered, on both ports;
    the client finds its gateway (the server's port address) by ARP or Neighbour Discovery."""
    from perfkit.engines import dpdk_tcp
    srv_text, cli_text = ((DATA / f"{side}-2ring.conf").read_text() for side in ("server", "client"))
    if family == 6:
        srv_text, cli_text = _v6(srv_text, "d6"), _v6(cli_text, "d6")
    # cpu 0-3 pins four workers a side as dperf does; this machine may have fewer: not pinned here,
    # and 2 s of load (the file's duration without its slow_start, which dperf adds)
    srv_spec = dataclasses.replace(dperf.parse(srv_text).to_spec(), cpus=())
    cli_spec = dataclasses.replace(dperf.parse(cli_text).to_spec(), cpus=(), duration=2.0)
    assert srv_spec.ip_version == cli_spec.ip_version == family
    srv = dpdk_tcp.build(kind.plan(srv_spec))
    try:
        cli = dpdk_tcp.build(kind.plan(cli_spec))
        try:
            assert len(srv.roles) == len(cli.roles) == 4
            srv.start()
            cli.start()
            deadline = time.monotonic() + 60
            while cli.running():
                assert time.monotonic() < deadline, "the client did not stop in time"
                time.sleep(0.05)
            cli.join()
            time.sleep(0.3)
            srv.stop()
            srv.join()
            assert cli.error() is None and srv.error() is None
            cw, sw = _workers(cli), _workers(srv)
            c, s = _sum(cli), _sum(srv)
        finally:
            cli.close()
    finally:
        srv.close()
    n = c["sock_open"]
    # every port and queue connected; server worker q listens on the port's address q alone
    assert n >= 8 and all(w["sock_open"] > 0 for w in cw) and all(w["sock_open"] > 0 for w in sw)
    assert [w["sock_open"] for w in cw] == [w["sock_open"] for w in sw]
    assert s["sock_open"] == n and c["sock_close"] == n and c["sock_error"] == 0
    assert c["http_req"] == c["http_2xx"] == s["http_get"] == n
    assert s["sock_current"] == 0 and s["sock_error"] == 0


@pytest.mark.dpdk
def test_a_get_client_pads_its_requests_to_payload_size(eal):
    """dperf's payload_size on a GET client (its tps files: 1400): requests that long, each answered."""
    from _dpdk_tests import run_pair
    c, s, _ = run_pair(DpdkHttpServer(port="ring:rq:1", duration=30),
                       DpdkHttpClient(port="ring:rq:0", cps=200, duration=0.5, request_size=1400))
    n = c["sock_open"]
    assert n >= 20 and c["http_2xx"] == s["http_get"] == n and c["sock_error"] == 0
    assert s["bytes_rx"] >= n * 1400


def test_vxlan_drops_are_in_perfkits_summary_only_when_there_are_some():
    assert "    vxlan         =  5 dropped (cut, bad outer UDP sum" in dperf.summary_lines({"vxlan_drop": 5}, {})
    assert "vxlan" not in dperf.summary_lines({"sock_open": 3}, {})
