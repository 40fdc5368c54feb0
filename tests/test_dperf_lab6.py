"""perfkit's DPDK TCP over IPv6 against the Linux stack (issue 6): the lab of
test_dperf_lab.py (two namespaces joined by a veth, the DPDK port net_af_packet on h1's
end, h2's checksum offload off), with the DPDK port at ::c8 of the lab's /64. h2's
kernel finds it by Neighbor Discovery (the lab makes only the hosts' own neighbours
permanent), pings it, and sends it extension headers; a dperf server configuration runs
here too (curl and wrk against the perfkit server and the DPDK client against nginx run
over both families in test_dperf_lab.py). Needs root (the lab); skips otherwise.
"""
import re
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")

from test_dperf_lab import (lab, no_leaks, port_of, serve_while_h2_runs, server,  # noqa: E402,F401
                            serving_h2)  # (lab: the fixture)


# Echoes from h2's kernel without the ping binary: a raw ICMPv6 socket (the kernel fills in
# the checksum and its own source address; setup(socket) may set more). ECHO: python -c ECHO
# ADDR N prints how many of N were answered.
ECHOES = r"""
import socket, struct, sys, time
def echoes(dst, n, setup=lambda s: None):
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    setup(s)
    s.settimeout(2)
    ok = 0
    for seq in range(n):
        s.sendto(struct.pack("!BBHHH", 128, 0, 0, 0x706b, seq) + b"perfkit", (dst, 0))
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                data, addr = s.recvfrom(2048)
            except TimeoutError:
                break
            if addr[0] == dst and data[0] == 129 and data[4:8] == struct.pack("!HH", 0x706b, seq):
                ok += 1
                break
    s.close()
    return ok
"""
ECHO = ECHOES + "print(echoes(sys.argv[1], int(sys.argv[2])))\n"


def test_ping6_from_the_namespace_is_answered(lab):
    which = port_of(lab, 6)
    n = 5
    with serving_h2(lab, server(lab, 6), settle=0) as (run, c):
        rc, out, err = run([sys.executable, "-P", "-c", ECHO, which["ip"], str(n)], timeout=60)
        assert rc == 0 and int(out) == n, err          # the kernel's raw ICMPv6 socket
        pinged = 0
        if shutil.which("ping"):
            rc, out, err = run(["ping", "-6", "-n", "-c", str(n), "-i", "0.2", "-W", "2", which["ip"]], timeout=60)
            assert rc == 0, out + err
            assert re.search(rf"{n} packets transmitted, {n} received, 0% packet loss", out), out
            print(out.strip().splitlines()[-1])
            pinged = n
    # every echo, and h2's Neighbor Solicitations (its first one, then reachability probes)
    assert c["icmp_rx"] >= 2 * n if pinged else c["icmp_rx"] >= n
    assert c["bad_rx"] == 0 and c["tcp_rx"] == 0
    no_leaks()


# h2's kernel puts extension headers on what its sockets send (sticky IPV6_HOPOPTS and
# IPV6_DSTOPTS: Hop-by-Hop with a PadN, Destination Options with an option type perfkit does not
# know whose high bits say skip it): N HTTP GETs over TCP and N echoes over raw ICMPv6. A packet
# socket on h2's veth counts the frames that left with the chain Hop-by-Hop, Destination
# Options, then TCP or ICMPv6 (proof the kernel did put them on). Prints "gets echoes tcp icmp".
EXT_PEER = ECHOES + r"""
srv, n = sys.argv[1], int(sys.argv[2])
HBH = bytes([0, 0, 1, 4, 0, 0, 0, 0])
DST = bytes([0, 0, 0x1e, 4]) + b"pk6!"
cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))   # ETH_P_ALL: sent frames too
cap.bind((sys.argv[3], 0))
def sticky(s):
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_HOPOPTS, HBH)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_DSTOPTS, DST)
gets = 0
for i in range(n):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sticky(s)
    s.settimeout(5)
    s.connect((srv, 80))
    s.sendall(b"GET /%d HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n" % i)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    gets += head.startswith(b"HTTP/1.1 200") and length == [len(body)]
answered = echoes(srv, n, sticky)
time.sleep(0.2)
cap.setblocking(False)
seen = {6: 0, 58: 0}
while True:
    try:
        f, a = cap.recvfrom(65536)
    except BlockingIOError:
        break
    if a[2] == socket.PACKET_OUTGOING and f[12:14] == b"\x86\xdd" and f[20] == 0 and f[54] == 60 and f[62] in seen:
        seen[f[62]] += 1
print(gets, answered, seen[6], seen[58])
"""


def test_linux_sends_extension_headers_perfkit_serves_and_answers(lab):
    """Not only frames by hand: the Linux stack's own Hop-by-Hop and Destination Options in
    front of TCP (connections to the perfkit server, each GET answered whole) and ICMPv6
    (echoes answered)."""
    n = 5
    rc, out, err, c = serve_while_h2_runs(lab, server(lab, 6, payload_size=3000),
                                          [sys.executable, "-P", "-c", EXT_PEER, port_of(lab, 6)["ip"], str(n),
                                           lab.hosts[1].ifname])
    assert rc == 0, err
    gets, echoes, tcp_ext, icmp_ext = map(int, out.split())
    print(f"from h2 with Hop-by-Hop + Destination Options: {gets}/{n} GETs, {echoes}/{n} echoes; "
          f"frames with the chain: {tcp_ext} TCP, {icmp_ext} ICMPv6; server tcp_rx {c['tcp_rx']}")
    assert gets == echoes == n
    assert tcp_ext >= 4 * n and icmp_ext == n                  # SYN, ACK, GET, FIN (and ACKs) each with the chain
    assert c["sock_open"] == c["sock_close"] == c["http_get"] == n and c["sock_error"] == 0
    assert c["tcp_rx"] >= tcp_ext and c["bad_rx"] == 0 and c["other_rx"] == 0
    no_leaks()


def test_perfkit_dperf_ipv6_server_conf_in_the_lab(lab, tmp_path):
    """`perfkit dperf -c server.conf --netns ...` with IPv6 addresses, curl -6 from h2."""
    which = port_of(lab, 6)
    h1, h2 = lab.hosts
    conf = tmp_path / "server6.conf"
    conf.write_text(f"mode server\ncpu 0\nduration 6s\nport {which['port']} {which['ip']} {h2.ipv6}\n"
                    f"client {h2.ipv6} 1\nserver {which['ip']} 1\nlisten 80 1\npayload_size 500\n")
    p = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "dperf", "-c", str(conf), "--netns", h1.netns_path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://[{which['ip']}]/"
        deadline, up = time.monotonic() + 4, False
        while not up and time.monotonic() < deadline and p.poll() is None:   # until the server answers
            probe = lab.popen(h2, ["curl", "-6", "-s", "-o", "/dev/null", "--connect-timeout", "0.5", url])
            up = probe.wait(timeout=10) == 0
        assert up, "the perfkit dperf server did not answer"
        n = 10
        c = lab.popen(h2, ["curl", "-6", "-sS", "--max-time", "5", "-w", "%{http_code} %{size_header} %{size_download}\n",
                           *[a for _ in range(n) for a in ("-o", "/dev/null", url)]],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = c.communicate(timeout=60)
        # dperf's payload_size is the whole response (header + body), as dperf's manual says
        got = [tuple(int(x) for x in line.split()) for line in out.splitlines()]
        assert c.returncode == 0 and len(got) == n, err
        assert all(code == 200 and head + body == 500 and body > 0 for code, head, body in got), out
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, stderr
    block = stdout.split("Total Numbers:")[1].split("-----")[0]
    tot = {k: int(v.replace(",", "")) for k, v in re.findall(r"(\w+)\s+([\d,]+)", block)}
    print(f"perfkit dperf IPv6 server: httpGet {tot['httpGet']}, skOpen {tot['skOpen']}, skErr {tot['skErr']}")
    # the probe that answered, then n; a probe's SYN that waited in the socket while the server
    # started is answered once it runs, and h2's kernel (that probe gave up) resets it
    assert tot["httpGet"] == tot["skClose"] == n + 1, (tot, stdout[-1500:])
    assert tot["skOpen"] == tot["skClose"] + tot["skErr"] and tot["skErr"] == tot["rstRx"]
    assert tot["badRx"] == 0 and tot["icmpRx"] >= 1                      # h2's Neighbor Solicitation
