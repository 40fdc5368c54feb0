"""perfkit.spec: a spec is validated completely before anything native starts.

A bad value is a ValueError whose message starts with the field's name and says
what is allowed.
"""
import dataclasses
import json

import pytest

from perfkit import spec as specmod
from perfkit.spec import LAB_NETS, LocalTest, RemoteTest, check_target, from_dict
from perfkit.units import Rate


# -------------------------------------------------------------- good specs
def test_defaults_per_test():
    assert LocalTest().test == "udp_bw"
    assert LocalTest("udp_bw").size == 64
    assert LocalTest("udp_lat").size == 1
    assert LocalTest("tcp_bw").size == 128 << 10   # iperf3's default write
    assert LocalTest("tcp_lat").size == 1
    t = LocalTest()
    assert t.rate is None and t.messages_per_second == 0.0
    assert t.duration == 10.0 and t.host == "127.0.0.1" and t.port == 0 and t.flows == 1


def test_values_are_normalised():
    t = LocalTest("udp_bw", size="1K", rate="1.5Mpps", duration="2m", flows="4", port="5001",
                  batch="64", host=" 127.0.0.2 ")
    assert t.size == 1024
    assert t.rate == Rate(1.5e6, "pps")
    assert t.duration == 120.0
    assert (t.flows, t.port, t.batch) == (4, 5001, 64)
    assert t.host == "127.0.0.2"
    assert t.messages_per_second == 1.5e6


def test_bps_rate_turns_into_messages_per_second_by_size():
    t = LocalTest("udp_bw", size=1000, rate="8Mbps")
    assert t.messages_per_second == pytest.approx(1000.0)


def test_spec_is_frozen():
    t = LocalTest()
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.size = 128


@pytest.mark.parametrize("test, size", [("udp_bw", 1), ("udp_bw", 65507), ("udp_lat", "63K"),
                                        ("tcp_bw", 65536), ("tcp_bw", "64K"), ("tcp_lat", 1),
                                        ("tcp_bw", "1M"), ("tcp_lat", 1 << 20), ("tcp_bw", "128K")])
def test_size_limits_accept(test, size):
    assert 1 <= LocalTest(test, size=size).size <= 1 << 20


def test_remote_defaults_stay_qperfs():
    from perfkit.spec import RemoteTest
    assert RemoteTest("tcp_bw").size == 65536          # qperf's tcp_bw default
    assert RemoteTest("udp_bw").size == 32768          # qperf's udp_bw default (qperf -vvu udp_bw)
    assert LocalTest("udp_bw").size == 64              # perfkit local: packets/s
    assert RemoteTest("tcp_bw", size="1M").size == 1 << 20
    with pytest.raises(ValueError, match=r"^size: .*1\.\.65536 for sctp_bw"):
        RemoteTest("sctp_bw", size="128K")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.255.255.254", "::1", "198.18.0.1",
                                  "198.19.255.255", "2001:2::1", "2001:2:0:ffff::1"])
def test_loopback_and_lab_hosts_are_allowed(host):
    assert LocalTest(host=host).host == host


def test_lab_nets_are_the_benchmarking_blocks():
    assert [str(n) for n in LAB_NETS] == ["198.18.0.0/15", "2001:2::/48"]


# --------------------------------------------------------------- bad specs
BAD = [
    # (kwargs, field, a fragment of what is allowed)
    (dict(test="udp_flood"), "test", "udp_bw, udp_lat, tcp_bw, tcp_lat"),
    (dict(rate=0), "rate", "above 0"),
    (dict(rate="0pps"), "rate", "above 0"),
    (dict(rate=-5), "rate", "above 0"),
    (dict(rate="-1Mpps"), "rate", "above 0"),
    (dict(rate="-10Gbps"), "rate", "above 0"),
    (dict(rate="1Xpps"), "rate", "pps or bps"),
    (dict(rate="1e400pps"), "rate", "finite"),
    (dict(size=0), "size", "1..65507"),
    (dict(size=-1), "size", "1..65507"),
    (dict(size=65508), "size", "1..65507"),
    (dict(size="64M"), "size", "1..65507"),
    (dict(test="udp_lat", size=65508), "size", "1..65507"),
    (dict(test="tcp_bw", size=(1 << 20) + 1), "size", "1..1048576 for tcp_bw"),
    (dict(test="tcp_lat", size=0), "size", "1..1048576"),
    (dict(test="tcp_lat", size="2M"), "size", "1..1048576"),
    (dict(size="64Q"), "size", "B, K, M or G"),
    (dict(size="1e400"), "size", "finite"),
    (dict(duration=0), "duration", "above 0"),
    (dict(duration="-1s"), "duration", "above 0"),
    (dict(duration="25h"), "duration", "at most 24h"),
    (dict(duration="1Xs"), "duration", "s, ms, us, m or h"),
    (dict(port=65536), "port", "0..65535"),
    (dict(port=-1), "port", "0..65535"),
    (dict(port="http"), "port", "whole number"),
    (dict(port=80.5), "port", "whole number"),
    (dict(port=True), "port", "whole number"),
    (dict(flows=0), "flows", "1..1024"),
    (dict(flows=1025), "flows", "1..1024"),
    (dict(test="tcp_bw", flows=2), "flows", "only udp_bw"),
    (dict(batch=0), "batch", "1..256"),
    (dict(batch=257), "batch", "1..256"),
    (dict(host="nosuch.invalid"), "host", "does not resolve"),
    (dict(host="127.0.0.256"), "host", "IPv4 or IPv6 address"),
    (dict(host="not an address"), "host", "IPv4 or IPv6 address"),
    (dict(host=""), "host", "IPv4 or IPv6 address"),
    (dict(host="8.8.8.8"), "host", "198.18.0.0/15"),
    (dict(host="10.0.0.1"), "host", "loopback"),
    (dict(host="0.0.0.0"), "host", "loopback"),
    (dict(host="198.17.255.255"), "host", "198.18.0.0/15"),
    (dict(host="198.20.0.0"), "host", "198.18.0.0/15"),
    (dict(host="2001:2:1::1"), "host", "2001:2::/48"),
    (dict(host="2606:4700::1111"), "host", "2001:2::/48"),   # any address is a target; the suite's guard refuses
    (dict(host="::"), "host", "loopback"),
    (dict(busy_poll="false"), "busy_poll", "true or false"),
    (dict(gso=-1), "gso", "0.."),
    (dict(loc_cpu_affinity=-1), "loc_cpu_affinity", "0..1023"),
    (dict(loc_cpu_affinity="cpu0"), "loc_cpu_affinity", "whole number"),
    (dict(rem_cpu_affinity=1024), "rem_cpu_affinity", "0..1023"),
    (dict(rem_cpu_affinity=True), "rem_cpu_affinity", "whole number"),
    (dict(gso=10_000), "gso", "0.."),
    (dict(messages=0), "messages", "1..281474976710656"),
    (dict(messages=2 ** 48 + 1), "messages", "1..281474976710656"),
    (dict(messages="many"), "messages", "whole number"),
    (dict(messages=True), "messages", "whole number"),
    (dict(loc_sock_buf_size="2K"), "loc_sock_buf_size", "4096..1073741824"),
    (dict(rem_sock_buf_size="2G"), "rem_sock_buf_size", "4096..1073741824"),
    (dict(rem_sock_buf_size="big"), "rem_sock_buf_size", "size"),
]


@pytest.mark.parametrize("kwargs, field, allowed", BAD, ids=[f"{f}={list(k.values())[-1]!r}" for k, f, _ in BAD])
def test_bad_value_names_field_and_what_is_allowed(kwargs, field, allowed):
    with pytest.raises(ValueError) as e:
        LocalTest(**kwargs)
    msg = str(e.value)
    assert msg.startswith(f"{field}: "), msg
    assert allowed in msg, msg
    assert "\n" not in msg  # one line: the CLI prints it as is


def test_validation_happens_before_any_engine(monkeypatch):
    """A bad spec never reaches an engine: it fails in the constructor."""
    from perfkit.engines import socket as sock_engine
    calls = []
    monkeypatch.setattr(sock_engine, "build", lambda spec: calls.append(spec))
    with pytest.raises(ValueError):
        LocalTest(rate=0)
    assert calls == []


def test_check_target_returns_normalised_address():
    assert check_target("::0001") == "::1"
    assert check_target("198.18.0.10", "server") == "198.18.0.10"
    assert check_target("localhost") == "127.0.0.1"
    with pytest.raises(ValueError, match=r"^server: 1\.1\.1\.1 is refused by the network guard"):
        check_target("1.1.1.1", "server")   # any address is a target: the suite's guard refuses this one


# --------------------------------------------------------- dict round trip
@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(test="udp_bw", size="1K", rate="1.5Mpps", flows=8, duration="2s", port=5001, batch=64),
    dict(test="tcp_bw", size="64K", rate="10Gbps", duration=0.5, host="::1"),
    dict(test="udp_lat", busy_poll=True, host="198.18.0.2"),
    dict(test="tcp_lat", rate=1000),
])
def test_to_dict_from_dict_round_trip(kwargs):
    t = LocalTest(**kwargs)
    d = t.to_dict()
    assert d["kind"] == "LocalTest"
    back = from_dict(json.loads(json.dumps(d)))  # survives JSON
    assert back == t
    assert back.to_dict() == d
    assert LocalTest.from_dict(d) == t


def test_to_dict_rate_form():
    assert LocalTest().to_dict()["rate"] is None
    assert LocalTest(rate="10Gbps").to_dict()["rate"] == {"value": 1e10, "unit": "bps"}


def test_from_dict_validates_too():
    d = LocalTest().to_dict()
    with pytest.raises(ValueError, match=r"^size: "):
        from_dict({**d, "size": 70000})
    with pytest.raises(ValueError, match=r"^rate: "):
        from_dict({**d, "rate": {"value": 5, "unit": "furlongs"}})


def test_from_dict_unknown_field_and_kind():
    d = LocalTest().to_dict()
    with pytest.raises(ValueError, match=r"^colour: unknown field \(known: .*duration"):
        from_dict({**d, "colour": "red"})
    with pytest.raises(ValueError, match=r"^kind: 'UdpFlows' is not one of LocalTest"):
        from_dict({**d, "kind": "UdpFlows"})
    with pytest.raises(ValueError, match=r"^kind: "):
        LocalTest.from_dict({**d, "kind": "Other"})


def test_from_dict_kind_defaults_to_local_test():
    d = LocalTest(size=100).to_dict()
    d.pop("kind")
    assert from_dict(d) == LocalTest(size=100)


def test_max_size_table():
    assert specmod.MAX_SIZE == {"udp": 65507, "tcp": 1 << 20, "sctp": 65536}


@pytest.mark.parametrize("kw, gso", [
    (dict(), 8),                                  # udp_bw on loopback: UDP GSO, 8 per send
    (dict(host="::1"), 8),
    (dict(size=16384), 3),                        # fewer when 8 would pass 65507 B
    (dict(size=40000), 0),                        # one datagram per send: GSO off
    (dict(gso=0), 0),                             # told: off
    (dict(gso=4), 4),
    (dict(host="198.18.0.1"), 0),                 # a lab path: off (impairments see whole sends)
    (dict(lab="pk1"), 0),
    (dict(test="udp_lat"), 0),
    (dict(test="tcp_bw"), 0),
])
def test_gso_default_only_on_loopback_udp_bw(kw, gso):
    assert LocalTest(**kw).gso == gso


@pytest.mark.parametrize("kw, gso", [
    (dict(), 8),                                  # a server on this host: UDP GSO, as perfkit local
    (dict(host="::1"), 8),
    (dict(size=16384), 3),
    (dict(size=None), 0),                         # qperf's 32 KiB default: one datagram per send
    (dict(gso=0), 0),                             # told: off (qperf's one datagram per send)
    (dict(host="198.18.0.2"), 0),                 # a lab host: off, its link counts and impairs packets
    (dict(test="udp_lat"), 0),
])
def test_remote_test_picks_gso_only_for_a_loopback_server(kw, gso):
    assert specmod.RemoteTest(**{"test": "udp_bw", "host": "127.0.0.1", "size": 64, **kw}).gso == gso


def test_af_packet_ports_get_perfkits_defaults_unless_given():
    """DPDK's af_packet bypasses the qdisc (a lab link's impairments would not apply to what
    it sends) and keeps 512-frame rings: perfkit adds its own defaults, never over the user's."""
    ns = "/run/netns/pk-x-h1"
    assert specmod.check_dpdk_port("net_af_packet0,iface=v", netns=ns) == \
        "net_af_packet0,iface=v,qdisc_bypass=0,framecnt=4096"
    assert specmod.check_dpdk_port("net_af_packet0,iface=v,qdisc_bypass=1,framecnt=512", netns=ns) == \
        "net_af_packet0,iface=v,qdisc_bypass=1,framecnt=512"
    assert specmod.check_dpdk_port("net_tap0,iface=t", netns=ns) == "net_tap0,iface=t"


def test_http_processes_each_need_a_user_per_thread():
    from perfkit.kinds.http import http_workers
    from perfkit.spec import HttpLoad
    spec = HttpLoad(url="http://127.0.0.1:8080/", users=10, threads=2, processes=2)
    workers = http_workers(spec)
    assert [w["users"] for w in workers] == [3, 3, 2, 2]
    assert [w["user_base"] for w in workers] == [0, 3, 6, 8]   # source addresses stay global
    with pytest.raises(ValueError, match="processes: .* out of range 1..2"):
        HttpLoad(url="http://127.0.0.1:8080/", users=5, threads=2, processes=3)


@pytest.mark.parametrize("dev, port", [("0000:01:00.0", "0000:01:00.0"), ("01:00.1", "0000:01:00.1"),
                                       ("0000:3B:00.0,txq_inline=0", "0000:3b:00.0,txq_inline=0")])
def test_a_pci_port_is_taken_in_dpdks_form(dev, port):
    from perfkit.spec import check_dpdk_port
    assert check_dpdk_port(dev) == port


def test_cpu_affinity_any_is_unpinned_and_numbers_are_kept():
    assert LocalTest().loc_cpu_affinity is None and LocalTest().rem_cpu_affinity is None
    spec = LocalTest(loc_cpu_affinity="any", rem_cpu_affinity="0")
    assert spec.loc_cpu_affinity is None and spec.rem_cpu_affinity == 0


def test_a_cpu_this_host_lacks_still_loads_and_fails_at_start_naming_the_field():
    """A run saved on a bigger machine loads here; running it again says which CPUs there are."""
    import os
    from perfkit.kinds.qperf import workers_for
    lacking = max(os.sched_getaffinity(0)) + 1
    spec = from_dict(LocalTest(test="tcp_lat", rem_cpu_affinity=lacking).to_dict())
    assert spec.rem_cpu_affinity == lacking
    with pytest.raises(ValueError) as e:
        workers_for(spec)
    allowed = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    assert str(e.value) == f"rem_cpu_affinity: CPU {lacking} is not one this process may run on ({allowed})"


def test_flip_takes_only_true_or_false():
    assert RemoteTest(test="tcp_bw", flip=1).flip is True and RemoteTest(test="tcp_bw").flip is False
    with pytest.raises(ValueError, match="^flip: 'yes' is not true or false$"):
        RemoteTest(test="tcp_bw", flip="yes")
