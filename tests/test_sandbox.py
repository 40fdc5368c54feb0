"""The suite's network guard: perfkit.sandbox's rule, its calls in the product's target checks,
the socket backstop of tests/conftest.py, and the environment every child process inherits."""
import ipaddress
import os
import socket
import struct
import subprocess
import sys

import pytest

from perfkit import sandbox, spec
from perfkit.remote import Control

REFUSED = ["10.0.0.1", "8.8.8.8", "2606:4700::1111", "172.16.0.1", "192.168.1.1", "0.0.0.0", "::",
           "::ffff:10.0.0.1", "fe80::1%lo", "198.20.0.1", "example.com", "not an address"]
ALLOWED = ["127.0.0.1", "127.255.255.254", "::1", "[::1]", "localhost", "198.18.0.1", "198.19.255.250",
           "2001:2::1", "192.0.2.1", "2001:db8::1", "::ffff:127.0.0.1", ipaddress.ip_address("198.18.0.2")]
WIDE_OPEN = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))   # a product that takes any target


def test_the_session_runs_with_the_guard_on():
    assert os.environ.get("PERFKIT_SANDBOX") == "1" and sandbox.enabled()


@pytest.mark.parametrize("address", REFUSED)
def test_the_guard_refuses_what_is_not_loopback_lab_or_documentation(address):
    assert not sandbox.allowed(address)
    with pytest.raises(ValueError) as exc:
        sandbox.check(address, "host")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"host: {address} is refused by the network guard")
    assert "127.0.0.0/8" in msg and "198.18.0.0/15" in msg and "192.0.2.0/24" in msg


@pytest.mark.parametrize("address", ALLOWED, ids=str)
def test_the_guard_accepts_loopback_lab_and_documentation_addresses(address):
    assert sandbox.allowed(address)
    assert sandbox.check(address, "host") is address


def test_off_the_guard_lets_everything_through(monkeypatch):
    monkeypatch.setenv("PERFKIT_SANDBOX", "0")
    assert not sandbox.enabled() and sandbox.check("8.8.8.8") == "8.8.8.8"
    monkeypatch.delenv("PERFKIT_SANDBOX")
    assert not sandbox.enabled() and sandbox.check("10.0.0.1") == "10.0.0.1"


def test_the_product_keeps_its_own_messages_first():
    """The guard stands behind the product's checks: what they refuse, they refuse in their words."""
    with pytest.raises(ValueError, match="is not an IPv4 or IPv6 address or a DNS name"):
        spec.check_target("not an address")
    with pytest.raises(ValueError, match="DPDK ports use lab addresses"):
        spec.check_lab_ipv4("192.0.2.1", "ip")


@pytest.mark.parametrize("call", [
    lambda: spec.check_target("10.0.0.1", "host"),
    lambda: spec.check_lab_ipv4("10.0.0.1", "host"),
    lambda: spec.check_lab_ip("2606:4700::1111", "host"),
    lambda: spec.parse_url("http://10.0.0.1:8080/", "host"),
    lambda: spec.check_dest_ip("10.0.0.1", "host", 4),
    lambda: spec.check_dest_ip("2606:4700::1111", "host"),
], ids=["check_target", "check_lab_ipv4", "check_lab_ip", "http url", "dpdk destination", "dpdk destination v6"])
def test_every_target_check_asks_the_guard(call, monkeypatch):
    """Were the product's own rule to take any address, the guard still refuses."""
    monkeypatch.setattr(spec, "LAB_NETS", WIDE_OPEN)
    with pytest.raises(ValueError, match=r"^host: \S+ is refused by the network guard"):
        call()


def test_the_remote_client_asks_the_guard_before_it_connects():
    with pytest.raises(ValueError, match="^host: 10.0.0.1 is refused by the network guard"):
        Control("10.0.0.1", 19800, wait_server=0)


# ------------------------------------------------------------ the socket backstop

def _lo_only(s):
    """s may only route through loopback (SO_BINDTODEVICE lo): even a guard that let a send
    through could not put a packet anywhere but this machine."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")
    except OSError as exc:
        s.close()
        pytest.skip(f"cannot bind a socket to lo (needs CAP_NET_RAW): {exc}")
    return s


def _refused(excinfo, address):
    msg = str(excinfo.value)
    assert f"to {address!r} refused by the test suite's network guard" in msg, msg


def test_a_tcp_connect_to_a_private_address_fails_before_any_packet():
    with _lo_only(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.setblocking(False)   # a connect that got through would return at once, not wait
        with pytest.raises(ConnectionRefusedError) as exc:
            s.connect(("192.168.1.1", 80))
        _refused(exc, "192.168.1.1")
        with pytest.raises(ConnectionRefusedError) as exc:
            s.connect_ex(("192.168.1.1", 80))
        _refused(exc, "192.168.1.1")


def test_udp_connect_sendto_and_sendmsg_to_public_addresses_are_refused():
    with _lo_only(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) as s:
        for send in (lambda: s.connect(("192.168.1.1", 53)), lambda: s.sendto(b"x", ("8.8.8.8", 53)),
                     lambda: s.sendto(b"x", 0, ("8.8.8.8", 53)),
                     lambda: s.sendmsg([b"x"], [], 0, ("8.8.8.8", 53))):
            with pytest.raises(ConnectionRefusedError) as exc:
                send()
            assert "refused by the test suite's network guard" in str(exc.value)
    with _lo_only(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)) as s:
        with pytest.raises(ConnectionRefusedError) as exc:
            s.sendto(b"x", ("2606:4700::1111", 53))
        _refused(exc, "2606:4700::1111")


def test_loopback_unix_and_netlink_sockets_work_as_before():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.create_connection(("localhost", srv.getsockname()[1]), timeout=5) as c:
            peer, _ = srv.accept()
            with peer:
                c.sendall(b"ping")
                assert peer.recv(4) == b"ping"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as r, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        r.bind(("127.0.0.1", 0))
        r.settimeout(5)
        s.sendto(b"a", r.getsockname())
        s.sendmsg([b"b"], [], 0, r.getsockname())
        assert {r.recv(1), r.recv(1)} == {b"a", b"b"}
    a, b = socket.socketpair()
    with a, b:
        a.sendmsg([b"unix"])
        assert b.recv(4) == b"unix"
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as nl:   # NETLINK_ROUTE
        nl.bind((0, 0))
        noop = struct.pack("=LHHLL", 16, 1, 0, 1, 0)   # nlmsghdr of NLMSG_NOOP: the kernel drops it
        assert nl.sendto(noop, (0, 0)) == 16           # to the kernel (pid 0): untouched by the guard


# ------------------------------------------------------------ child processes

def test_a_perfkit_run_in_a_child_process_inherits_the_guard():
    """`perfkit local --host 10.0.0.1` in a child whose product rule takes any address: the
    guard it inherited refuses, on one line, before anything starts."""
    code = ("import ipaddress, sys; import perfkit.spec as s; "
            "s.LAB_NETS = (ipaddress.ip_network('0.0.0.0/0'), ipaddress.ip_network('::/0')); "
            "from perfkit.cli import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-P", "-c", code, "local", "udp_bw", "-t", "1s", "--host", "10.0.0.1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("perfkit: host: 10.0.0.1 is refused by the network guard (PERFKIT_SANDBOX=1)")
    p = subprocess.run([sys.executable, "-P", "-c", "from perfkit import sandbox; print(sandbox.enabled())"],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "True", p.stderr
