"""dperf configuration files -> perfkit specs (perfkit.dperf): pure Python."""
from pathlib import Path

import pytest

from perfkit import dperf, spec
from perfkit.spec import DpdkHttpClient, DpdkHttpServer

DATA = Path(__file__).parent / "data" / "dperf"


def err(text, match):
    with pytest.raises(dperf.DperfError, match=match):
        dperf.parse(text, source="t.conf").to_spec(netns="/run/netns/x")


def test_client_cps_file():
    s = spec.from_dperf(DATA / "client-cps.conf", netns="/run/netns/pk")
    assert isinstance(s, DpdkHttpClient)
    assert s.port == "net_af_packet0,iface=pkd0,qdisc_bypass=0,framecnt=4096"   # perfkit's af_packet defaults
    assert (s.ip, s.gateway, s.server) == ("198.18.0.1", "198.18.0.2", "198.18.0.2")
    assert s.clients == (("198.18.0.1", 1),)
    assert (s.listen, s.listen_num) == (80, 1)
    assert s.cps == 10_000 and s.duration == 60 + 30   # dperf runs slow_start + duration
    # dperf's defaults where the file says nothing
    assert (s.launch_num, s.slow_start, s.wait, s.mss) == (4, 30, 3, 1460)
    assert s.request_bytes().startswith(b"GET / HTTP/1.1\r\nHost: dperf\r\n")
    assert s.keepalive == 0 and s.cc == 0
    with pytest.raises(dperf.DperfError, match=r"client-cps.conf:6: port: .*give netns"):
        spec.from_dperf(DATA / "client-cps.conf")


def test_server_cps_file():
    s = spec.from_dperf(DATA / "server-cps.conf", netns="/run/netns/pk")
    assert isinstance(s, DpdkHttpServer)
    assert s.ip == "198.18.0.2"
    assert s.clients == (("198.18.0.1", 26), ("198.18.0.28", 227))
    assert s.duration == 600 and not s.keepalive
    assert s.sockets == 253 * 65536


def test_cc_file_parses_and_the_table_limit_names_the_line():
    c = dperf.load(DATA / "client-cc.conf")
    assert c.tx_burst == 128 and c.launch_num == 10 and c.payload_size == 1
    assert c.cps == 500_000 and c.cc == 10_000_000 and c.keepalive == 60
    assert c.ports == [("ring:cc:0", "198.18.5.3", "198.18.5.1", "b4:a9:fc:ab:7a:85")]
    assert c.clients == [("198.18.5.3", 100)] and c.listen == (80, 32)
    assert c.to_spec().cc == 10_000_000   # 206M sockets: a table taken page by page
    text = (DATA / "client-cc.conf").read_text().replace("80              32", "80              200")
    with pytest.raises(dperf.DperfError, match=r"client-cc.conf:17: client: clients: .*sockets a worker"):
        dperf.parse(text, source=str(DATA / "client-cc.conf")).to_spec()


def test_dperf_original_pci_config_loads_and_its_absent_nic_is_named(monkeypatch):
    from perfkit.engines import dpdk
    from perfkit.errors import EngineError
    monkeypatch.delenv("PERFKIT_SANDBOX")   # dperf's own addresses; no traffic here
    s = dperf.load(DATA / "dperf-original-client.conf").to_spec()
    assert s.port == "0000:1b:00.0" and s.server == "6.6.241.27"
    with pytest.raises(EngineError, match=r"0000:1b:00.0"):
        dpdk.check_pci(dpdk.pci_of([s.port]), sysfs="/nonexistent")


def test_ordinary_addresses_load_and_the_test_guard_refuses_them_at_the_port_line(monkeypatch):
    text = ("mode client\ncps 1k\nport ring:a:0 6.6.241.100 6.6.241.27\n"
            "client 6.6.241.100 1\nserver 6.6.241.27 1\n")
    err(text, r"t.conf:3: port: ip: 6.6.241.100 is refused by the network guard")
    monkeypatch.delenv("PERFKIT_SANDBOX")
    assert dperf.parse(text).to_spec().ip == "6.6.241.100"


BASE = "mode client\ntx_burst 32\nport ring:a:0 198.18.0.1 198.18.0.2\nclient 198.18.0.1 1\nserver 198.18.0.2 1\n"


def test_client_keywords_map_to_fields():
    text = BASE + """
cps 1.5k            # comment after a value
vlan 100
cc 2k
keepalive 10ms 100
launch_num 8
slow_start 10
wait 0
http_host example.lab
http_path /index.html
http_method GET
lport_range 2000 3000
tos 0x10
mss 1400
retransmit_timeout 2
tcp_rst 0
fast_close
quiet
listen 8080 2
duration 1.5m
"""
    s = dperf.parse(text).to_spec()
    assert s.cps == 1500 and s.cc == 2000
    assert s.keepalive == pytest.approx(0.01) and s.keepalive_requests == 100
    assert (s.launch_num, s.slow_start, s.wait) == (8, 10, 0)
    assert s.request_bytes().startswith(b"GET /index.html HTTP/1.1\r\nHost: example.lab\r\n")
    assert s.lport_range == (2000, 3000) and s.tos == 16 and s.mss == 1400 and s.vlan == 100
    assert s.retransmit_timeout == 2 and s.tcp_rst is False and s.fast_close is True
    assert (s.listen, s.listen_num, s.duration) == (8080, 2, 90 + 10)   # duration 1.5m + slow_start 10
    assert s.to_dict()["kind"] == "DpdkHttpClient"
    assert spec.from_dict(s.to_dict()) == s


def test_flood():
    s = dperf.parse(BASE + "cps 1k\nflood\n").to_spec()
    assert s.flood is True
    # dperf's flood with cc and keepalive: each connection's first packet again every interval
    s = dperf.parse(BASE + "cps 1k\nflood\ncc 10k\nkeepalive 1ms\n").to_spec()
    assert s.flood and s.cc == 0 and s.keepalive == 0 and s.cps == 10_000_000
    with pytest.raises(ValueError, match="flood: a SYN flood keeps no connections"):
        DpdkHttpClient(flood=True, cc=10, keepalive=1)


def test_pipeline_maps_to_requests_out_a_udp_socket():
    """dperf's pipeline N: a UDP client's N requests out on a socket at once (keepalive 0us: an
    answer lets the next go); dperf's 0 is one. Its checks as dperf's config_check_pipeline."""
    udp = BASE + "cc 2\nprotocol udp\n"
    s = dperf.parse(udp + "keepalive 0us\npipeline 4\n").to_spec()
    assert s.pipeline == 4 and s.protocol == "udp" and s.cc == 2 and s.keepalive == 1e-6
    assert dperf.parse(udp + "keepalive 0us\npipeline 0\n").to_spec().pipeline == 1
    assert dperf.parse(udp + "keepalive 0us\n").to_spec().pipeline == 1
    assert spec.from_dict(s.to_dict()) == s
    assert [w["pipeline"] for w in s.plan()["workers"]] == [4]
    with pytest.raises(dperf.DperfError, match=r"t.conf:9: pipeline: needs keepalive 0us .* or flood"):
        dperf.parse(udp + "keepalive 1ms\npipeline 4\n", source="t.conf")
    with pytest.raises(dperf.DperfError, match=r"t.conf:8: pipeline: needs keepalive"):
        dperf.parse(udp + "pipeline 4\n", source="t.conf")
    with pytest.raises(dperf.DperfError, match=r"t.conf:3: pipeline: a client keyword in a server"):
        dperf.parse("mode server\nprotocol udp\npipeline 2\n", source="t.conf")
    with pytest.raises(ValueError, match="pipeline: 4 requests out a socket is protocol udp's with keepalive"):
        DpdkHttpClient(pipeline=4, cc=2, keepalive=1)
    with pytest.raises(ValueError, match=r"pipeline: 101 is out of range 1..100"):
        DpdkHttpClient(pipeline=101, protocol="udp", cc=2, keepalive=1)


def test_change_dip_maps_to_a_floods_destinations_split_over_the_workers():
    """dperf's change_dip FIRST STEP COUNT lines: a flood's SYNs go to these addresses in turn,
    the list cut into one slice a worker (dperf's ip_list_split)."""
    text = BASE.replace("cpu", "") + "cpu 0 1\ncps 1k\nflood\nchange_dip 198.18.1.1 2 3\nchange_dip 198.18.2.1 1 2\n"
    c = dperf.parse(text)
    assert c.change_dip == [("198.18.1.1", 2, 3), ("198.18.2.1", 1, 2)]
    s = c.to_spec()
    assert s.flood and s.change_dip == (("198.18.1.1", 2, 3), ("198.18.2.1", 1, 2))
    assert s.dips == ["198.18.1.1", "198.18.1.3", "198.18.1.5", "198.18.2.1", "198.18.2.2"]
    assert [w["dips"] for w in s.plan()["workers"]] == [["198.18.1.1", "198.18.1.3", "198.18.1.5"],
                                                         ["198.18.2.1", "198.18.2.2"]]
    assert spec.from_dict(s.to_dict()) == s
    assert DpdkHttpClient(flood=True, change_dip="198.18.3.1 1 4\n# a comment\n").dips[-1] == "198.18.3.4"
    err(BASE + "cpu 0-2\ncps 1k\nflood\nchange_dip 198.18.1.1 1 2\n",
        r"t.conf:9: change_dip: 2 addresses for 3 workers: at least one a worker")
    with pytest.raises(ValueError, match="change_dip: a flood's destinations .*: set flood"):
        DpdkHttpClient(change_dip=(("198.18.1.1", 1, 2),))
    with pytest.raises(ValueError, match="change_dip: 199.18.255.255 is refused by the network guard"):
        DpdkHttpClient(flood=True, change_dip=(("198.18.255.255", 1 << 24, 2),))
    with pytest.raises(dperf.DperfError, match=r"t.conf:2: change_dip: a client keyword in a server"):
        dperf.parse("mode server\nchange_dip 198.18.1.1 1 2\n", source="t.conf")


def test_server_keepalive_and_payload():
    text = ("mode server\ncpu 0\nport ring:a:1 198.18.0.2 198.18.0.1\nclient 198.18.0.1 2\n"
            "server 198.18.0.2 1\nkeepalive 1s\npayload_size 5000\n")
    s = dperf.parse(text).to_spec()
    assert s.keepalive is True and s.response_size == 5000   # dperf's payload_size: the whole response
    body = s.response_bytes()
    assert body.startswith(b"HTTP/1.1 200 OK\r\n") and len(body) == 5000 and body.endswith(b"\r\n\r\n" + b"a" * 4935)
    assert spec.from_dict(s.to_dict()) == s


@pytest.mark.parametrize("line,match", [
    ("bogus 1", r"t.conf:6: bogus: unknown keyword"),
    ("vlan 5000", r"t.conf:6: vlan: '5000' is not a VLAN id in 1..4094"),
    ("jumbo 100", r"t.conf:6: jumbo: '100' is not an MTU in 9000..9710"),
    ("flood 1", r"t.conf:6: flood: takes no arguments"),
    ("change_dip 198.18.0.9 0 2", r"t.conf:6: change_dip: '0' is not a step in 1..4294967296"),
    ("change_dip 198.18.0.9 1", r"t.conf:6: change_dip: takes FIRST STEP COUNT"),
    ("change_dip 198.18.0.9 1 65537", r"t.conf:6: change_dip: '65537' is not an address count in 1..65536"),
    ("change_dip 2001:2::9 1 2", r"t.conf:6: change_dip: 2001:2::9 is IPv6 \(change_dip\)"),
    ("change_dip 198.18.0.9 1 2", r"t.conf:6: change_dip: a flood's destinations: needs flood"),
    ("daemon 1", r"t.conf:6: daemon: takes no arguments"),
    ("cps fast", r"t.conf:6: cps: 'fast' is not a connection rate"),
    ("cps 200m", r"t.conf:6: cps: 200m: at most 100m"),
    ("duration 10x", r"t.conf:6: duration: '10x' is not a duration"),
    ("keepalive 10", r"t.conf:6: keepalive: '10' is not an interval"),
    ("keepalive 1s 2 3", r"t.conf:6: keepalive: takes INTERVAL"),
    ("listen 80", r"t.conf:6: listen: takes PORT COUNT"),
    ("listen 65535 2", r"t.conf:6: listen: ports 65535..65536 pass 65535"),
    ("tos 256", r"t.conf:6: tos: 256 is out of range"),
    ("tos 0xzz", r"t.conf:6: tos: '0xzz' is not a number"),
    ("lport_range 3000 2000", r"t.conf:6: lport_range: 3000 is above 2000"),
    ("slow_start 5", r"t.conf:6: slow_start: '5' is not seconds in 10..600"),
    ("pipeline 4", r"t.conf:6: pipeline: several requests out at once is protocol udp's"),
    ("pipeline 101", r"t.conf:6: pipeline: '101' is not a pipeline depth in 0..100"),
    ("protocol sctp", r"t.conf:6: protocol: 'sctp' is not http, tcp or udp"),
    ("http_method PUT", r"t.conf:6: http_method: 'PUT' is not GET or POST"),
    ("mode client", r"t.conf:6: mode: given twice \(first on line 1\)"),
    ("tx_burst 8", r"t.conf:6: tx_burst: given twice \(first on line 2\)"),
    ("cpu 3-1", r"t.conf:6: cpu: '3-1': 3 is above 1"),
    ("cpu 0 0", r"t.conf:6: cpu: a CPU is listed twice"),
    ("client 198.18.0.300 1", r"t.conf:6: client: '198.18.0.300' is not an IP address"),
    ("client 2001:2::1 1", r"t.conf:6: client: 2001:2::1 is IPv6 \(address\) but the configuration's addresses "
                           r"are IPv4: one family per run"),
    ("client 2001:2::g 1", r"t.conf:6: client: '2001:2::g' is not an IP address \(address, IPv4 or IPv6\)"),
    ("tcp_rst 2", r"t.conf:6: tcp_rst: '2' is not 0 or 1"),
])
def test_malformed_or_unsupported_lines_name_the_line(line, match):
    with pytest.raises(dperf.DperfError, match=match):
        dperf.parse(BASE + line + "\n", source="t.conf")


def test_spec_level_errors_name_the_keyword_line():
    err(BASE + "cps 1k\nlisten 80 1\nhttp_path index.html\n", r"t.conf:8: http_path: .* does not start with /")
    err(BASE + "cps 1k\ncc 100\n", r"t.conf:7: cc: a concurrency target needs keepalive")
    err(BASE, r"t.conf: no 'cps' or 'cc' line")
    s = dperf.parse(BASE + "cps 1k\nprotocol udp\nflood\n").to_spec()   # dperf's UDP flood: datagrams only
    assert s.flood and s.protocol == "udp" and s.pipeline == 1
    # dperf's one-way UDP elephant flow: cc 1, pipeline 4, keepalive 1us, flood -- 4 datagrams each 1 us
    s = dperf.parse(BASE + "cc 1\nprotocol udp\nflood\npipeline 4\nkeepalive 1us\n").to_spec()
    assert s.flood and s.pipeline == 4 and s.cps == 1e6 and s.cc == 0
    err("mode server\nport ring:a:1 198.18.0.2 198.18.0.1\nserver 198.18.0.2 1\nprotocol udp\npayload_size 1500\n",
        r"t.conf:\d: protocol: udp sends the response in one datagram: 1500 B is above 1472 B")
    assert dperf.parse(BASE + "cps 1k\nprotocol udp\n").to_spec().protocol == "udp"
    assert dperf.parse(BASE + "cps 1k\nprotocol http\n").to_spec().protocol == "tcp"
    err(BASE + "cps 1k\ncpu 0-8\n", r"t.conf:7: cpu: 9 CPUs: at most 8 workers")
    err(BASE + "cps 1k\nport ring:b:0 198.18.0.3 198.18.0.2\n", r"t.conf:5: server: 1 server lines for 2 ports")
    srv = dperf.parse("mode server\nport ring:a:1 198.18.0.2 198.18.0.1\nserver 198.18.0.9 1\n").to_spec()
    assert (srv.ip, srv.server) == ("198.18.0.2", "198.18.0.9")   # dperf's server address beside the port's


def test_missing_mode_and_client_keyword_in_server():
    with pytest.raises(dperf.DperfError, match=r"t.conf: no 'mode' line"):
        dperf.parse("cpu 0\n", source="t.conf")
    with pytest.raises(dperf.DperfError, match=r"t.conf:2: wait: a client keyword in a server"):
        dperf.parse("mode server\nwait 3\n", source="t.conf")
    assert dperf.parse("mode server\ncps 10\nlaunch_num 10\n").launch_num == 10   # dperf reads and ignores them


def test_kernel_ports_need_a_namespace():
    text = BASE.replace("ring:a:0", "net_af_packet0,iface=v0") + "cps 10\n"
    with pytest.raises(dperf.DperfError, match=r"t.conf:3: port: .*reaches a kernel: give netns"):
        dperf.parse(text, source="t.conf").to_spec()
    assert dperf.parse(text).to_spec(netns="/run/netns/pk").netns == "/run/netns/pk"


def test_spec_validation_direct():
    with pytest.raises(ValueError, match="clients: 198.18.0.2 is the server's own address"):
        DpdkHttpServer(ip="198.18.0.2", clients=("198.18.0.2+1",))
    with pytest.raises(ValueError, match="passes .254"):
        DpdkHttpServer(clients=(("198.18.0.250", 10),))
    with pytest.raises(ValueError, match="payload_size: .* does not fit"):
        DpdkHttpServer(payload_size=1 << 20, mss=536)
    with pytest.raises(ValueError, match="request .* must fit in one segment"):
        DpdkHttpClient(http_method="POST", payload_size=2000)
    assert DpdkHttpServer(clients="198.18.0.1+3").clients == (("198.18.0.1", 3),)


def test_several_cpus_on_a_port_are_queues_and_rss_is_accepted():
    """dperf's `cpu 0-1` on one port: two workers, one queue pair each; `rss` in its forms."""
    spec = dperf.parse(BASE + "cps 2k\ncpu 0-1\nrss l3l4 mq_rx_rss\n", source="t.conf").to_spec()
    assert spec.queues == 2 and spec.cps == 2000
    assert dperf.parse(BASE + "cps 1k\nrss\n").rss == ("l3", "mq_rx_rss")
    assert dperf.parse(BASE + "cps 1k\ncpu 0\n").to_spec().queues == 1
    for bad, match in (("rss l4", r"t.conf:6: rss: 'l4' is not l3, l3l4 or auto"),
                       ("rss l3 rx", r"t.conf:6: rss: 'rx' is not mq_rx_none or mq_rx_rss"),
                       ("rss l3 mq_rx_rss 1", r"t.conf:6: rss: takes")):
        with pytest.raises(dperf.DperfError, match=match):
            dperf.parse(BASE + bad + "\n", source="t.conf")
