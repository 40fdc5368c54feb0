"""dperf's protocol udp (issue 32): a perfkit client's request in one datagram a socket, a
perfkit server's answer in one, over memif between two processes. Every request is counted
where it went: answered (http_resp) or not (udp_rt), and every datagram where it arrived."""
import pytest

from perfkit import dperf
from perfkit.spec import DpdkHttpClient

_dpdk = pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
from perfkit.engines import dpdk_tcp  # noqa: E402
from test_dperf_memif import CLI6, SRV6, client_to_end, memif_server  # noqa: E402

UDP = ("http_req", "http_get", "http_resp", "http_2xx", "udp_rt", "udp_tx", "udp_rx", "udp_drop", "sock_open",
       "sock_close", "tcp_tx", "rtt_count")


@pytest.mark.parametrize("family,client_kw", [
    (4, dict(cps=1000, duration=1)),
    (4, dict(cps=500, cc=20, keepalive="5ms", duration=1)),
    (6, dict(cps=1000, duration=1)),
])
def test_udp_client_and_server_over_memif(eal, family, client_kw):
    addrs = {"protocol": "udp"}
    kw = dict(client_kw, protocol="udp")
    if family == 6:
        addrs.update(ip=SRV6, clients=[[CLI6, 1]])
        kw.update(ip=CLI6, clients=((CLI6, 1),), server=SRV6)
    with memif_server(f"udp{family}{len(client_kw)}", 200, "cc" in client_kw, {"spec": addrs}) as (sock, finish):
        c, s = client_to_end(dpdk_tcp.build(DpdkHttpClient(port=f"net_memif1,role=client,socket={sock}", **kw)),
                             finish)
    print({k: (c[k], s[k]) for k in UDP})
    n = c["http_req"]
    # every request sent arrived and was answered; every answer arrived (nothing lost on memif)
    assert n == c["http_get"] == c["udp_tx"] == s["udp_rx"] == s["http_get"] == s["http_2xx"] == s["udp_tx"]
    assert c["udp_rx"] == s["udp_tx"] and c["http_resp"] == c["http_2xx"] == n - c["udp_rt"]
    assert c["udp_rt"] == c["udp_drop"] == s["udp_drop"] == 0 and c["http_err"] == 0
    assert c["tcp_tx"] == s["tcp_tx"] == c["syn_tx"] == 0 and c["bad_rx"] == s["bad_rx"] == 0
    assert c["sock_open"] == c["sock_close"] and c["sock_current"] == 0 and c["sock_error"] == 0
    if "cc" in client_kw:
        assert c["sock_open"] == 20 and n > 20               # requests again on the same sockets
    else:
        assert c["sock_open"] == n > 0
    assert c["rtt_count"] == c["sock_open"] and c["lat_count"] == n
    block = dperf.total_block(c, udp=True)
    assert f"{'udpRt':<7} 0" in block and "synRt" not in block and f"{'udpTx':<7} {n:,}" in block


@pytest.mark.parametrize("ka_requests", [0, 4])
def test_pipelined_udp_keeps_requests_out_and_every_one_is_answered_or_counted(eal, ka_requests):
    """dperf's pipeline 4 with keepalive 0us: 4 requests out on each of cc sockets, an answer
    lets the next go. Nothing is lost on memif: requests = answers, and the server answered
    every one it got. keepalive_requests 4: each socket's 4 went at once, then it closed."""
    kw = dict(protocol="udp", cc=2, keepalive=1e-6, pipeline=4, keepalive_requests=ka_requests, cps=1000,
              duration=0.5)
    with memif_server(f"udppipe{ka_requests}", 200, True, {"spec": {"protocol": "udp"}}) as (sock, finish):
        c, s = client_to_end(dpdk_tcp.build(DpdkHttpClient(port=f"net_memif1,role=client,socket={sock}", **kw)),
                             finish)
    print({k: (c[k], s[k]) for k in UDP})
    n = c["http_req"]
    assert n == c["udp_tx"] == s["udp_rx"] == s["http_2xx"] == s["udp_tx"] == c["udp_rx"]
    assert c["http_resp"] == n - c["udp_rt"] and c["udp_rt"] == c["udp_drop"] == s["udp_drop"] == 0
    assert c["sock_open"] == c["sock_close"] and c["sock_current"] == 0 and c["sock_error"] == 0
    assert c["rtt_count"] == c["sock_open"] and c["lat_count"] == 0   # pipelined answers are not timed
    if ka_requests:
        assert n == 4 * c["sock_open"] > 4                   # each socket: its 4 requests, then closed
    else:
        assert c["sock_open"] == 2 and n > 8


def test_pipelined_requests_a_server_drops_are_each_counted_unanswered(eal):
    """A server that takes none: each socket's 4 requests go at once and all 4 time out
    (udp_rt 4 a timeout), then 4 more: requests = udp_rt, a multiple of 4 a socket."""
    spec = {"protocol": "udp", "clients": [["198.18.0.60", 1]]}
    with memif_server("udppipedrop", 200, True, {"spec": spec}) as (sock, finish):
        c, s = client_to_end(dpdk_tcp.build(DpdkHttpClient(
            port=f"net_memif1,role=client,socket={sock}", cps=100, cc=2, keepalive=1e-6, pipeline=4,
            keepalive_requests=8, duration=0.5, protocol="udp", retransmit_timeout="50ms")), finish)
    print({k: (c[k], s[k]) for k in UDP})
    n = c["http_req"]
    assert n > 0 and c["udp_tx"] == n == s["udp_rx"] == s["udp_drop"] == c["udp_rt"]
    assert c["http_resp"] == 0 and n % 4 == 0 and n <= 8 * c["sock_open"]
    assert c["sock_open"] == c["sock_close"] and c["sock_current"] == 0


def test_udp_flood_sends_pipeline_datagrams_a_tuple_to_the_change_dip_addresses_in_turn(eal):
    """dperf's UDP flood with pipeline 4 and change_dip over two addresses: each launch sends 4
    datagrams from its tuple, datagram k to address k % 2, and keeps no socket. The server
    answers those to its address and drops the others; its answers are no socket's at the
    client (udp_drop)."""
    with memif_server("udpflood", 200, False, {"spec": {"protocol": "udp"}}) as (sock, finish):
        c, s = client_to_end(dpdk_tcp.build(DpdkHttpClient(
            port=f"net_memif1,role=client,socket={sock}", cps=500, duration=0.5, protocol="udp", flood=True,
            pipeline=4, change_dip=(("198.18.0.2", 1, 1), ("198.18.0.9", 1, 1)))), finish)
    print({k: (c[k], s[k]) for k in UDP})
    n = c["udp_tx"]
    assert n >= 40 and n % 4 == 0 and c["sock_open"] == c["http_req"] == 0
    assert s["udp_rx"] == n and s["http_2xx"] == s["udp_tx"] == s["udp_drop"] == n // 2
    assert c["udp_rx"] == c["udp_drop"] == n // 2 and c["udp_rt"] == c["http_resp"] == 0
    assert c["tcp_tx"] == s["tcp_tx"] == 0


def test_requests_a_server_does_not_take_are_its_udp_drops_and_the_clients_udp_rt(eal):
    """The server's client range leaves the client out: each request is dropped there
    (udp_drop) and times out at the client (udp_rt): sent = answered + unanswered."""
    spec = {"protocol": "udp", "clients": [["198.18.0.60", 1]]}
    with memif_server("udpdrop", 200, False, {"spec": spec}) as (sock, finish):
        c, s = client_to_end(dpdk_tcp.build(DpdkHttpClient(port=f"net_memif1,role=client,socket={sock}", cps=300,
                                                           duration=0.5, protocol="udp",
                                                           retransmit_timeout="50ms")), finish)
    print({k: (c[k], s[k]) for k in UDP})
    n = c["http_req"]
    assert n > 0 and c["udp_tx"] == n == s["udp_rx"] == s["udp_drop"]
    assert c["udp_rt"] == n and c["http_resp"] == 0 and s["udp_tx"] == s["http_2xx"] == 0
    assert c["sock_open"] == c["sock_close"] == n and c["sock_current"] == 0


def test_protocol_udp_checks_its_message_fits_one_datagram():
    from perfkit.spec import DpdkHttpServer
    with pytest.raises(ValueError, match="protocol: udp sends the response in one datagram: [0-9]+ B is above 1472"):
        DpdkHttpServer(protocol="udp", payload_size=2000)
    assert DpdkHttpServer(protocol="udp", payload_size=1000).protocol == "udp"
    with pytest.raises(ValueError, match="protocol: 'sctp' is not one of tcp, udp"):
        DpdkHttpClient(protocol="sctp", cps=1)


@pytest.mark.dpdk
def test_perfkit_dperf_runs_two_udp_confs_and_prints_udpRt(tmp_path):
    """perfkit dperf with a UDP server conf and a UDP client conf over a ring pair: dperf's
    blocks carry udpRt and the UDP counts; every request the client sent was answered."""
    from test_dperf_cli import CLIENT, SERVER, perfkit, totals
    s, c = tmp_path / "server.conf", tmp_path / "client.conf"
    s.write_text(SERVER.replace("ring:dc", "ring:du") + "protocol udp\n")
    c.write_text(CLIENT.replace("ring:dc", "ring:du")+ "protocol udp\n")
    p = perfkit("dperf", "-c", str(s), "-c", str(c))
    if p.returncode == 1 and "EAL" in p.stderr:
        pytest.skip(f"DPDK EAL does not start here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    srv_part, cli_part = p.stdout.split(f"{c} (client):")
    srv = totals(srv_part.split("Total Numbers:")[1].split("-----")[0])
    cli = totals(cli_part.split("Total Numbers:")[1].split("-----")[0])
    n = cli["skOpen"]
    # 40 cps reached over 10 s (200), then 1 s at 40: 240 requests, one a socket (fewer when a
    # busy machine keeps the client off its CPU near the end: the counts below still agree)
    assert 0 < n <= 241 and "synRt" not in cli_part and "udpRt" in cli_part
    assert cli["httpGet"] == cli["udpTx"] == srv["udpRx"] == srv["httpGet"] == srv["http2XX"] == srv["udpTx"] == n
    assert cli["udpRx"] == cli["http2XX"] == cli["skClose"] == n and cli["udpRt"] == cli["udpDrop"] == 0
    assert cli["tcpTx"] == srv["tcpTx"] == cli["synTx"] == 0
    assert f"udp           =  {n:,} sent, {n:,} received, 0 unanswered, 0 dropped" in cli_part


# Linux's UDP on the other side (a lab: the DPDK port on h1's veth, h2's kernel): a socket in
# h2 sends N requests to the perfkit server and prints the answers it got and their first line;
# or answers each request it gets with an HTTP response until a line on stdin, printing how many.
LINUX_CLIENT = r"""
import socket, sys
srv, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in srv else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
got, first = 0, set()
for i in range(n):
    s.sendto(b"GET /udp HTTP/1.1\r\nHost: lab\r\n\r\n", (srv, 80))
    try:
        data, addr = s.recvfrom(65535)
    except socket.timeout:
        continue
    if tuple(addr[:2]) == (srv, 80):
        got += 1
        first.add(data.split(b"\r\n", 1)[0].decode())
print(got, *sorted(first))
"""
LINUX_SERVER = r"""
import select, socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 8080))
body = b"x" * 100
resp = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
n = 0
print("READY", flush=True)
while True:
    r = select.select([s, sys.stdin], [], [], 30)[0]
    if not r or sys.stdin in r:
        break
    data, addr = s.recvfrom(65535)
    if data.startswith(b"GET "):
        s.sendto(resp, addr)
        n += 1
print(n, flush=True)
"""


@pytest.fixture(scope="module")
def lab():
    from _labs import lab_module_or_skip, offload_off_lab
    with offload_off_lab(lab_module_or_skip()) as lab:
        yield lab


@pytest.mark.parametrize("family", [4, 6])
def test_udp_server_answers_linux_and_udp_client_asks_linux(eal, lab, family):
    """A second implementation on each side: h2's kernel sockets take every answer of the perfkit
    UDP server (their checksums checked by Linux), and a Linux UDP server in h2 answers every
    request of the perfkit UDP client."""
    import sys
    from test_dperf_lab import port_of, serving_h2, server
    which, n = port_of(lab, family), 50
    with serving_h2(lab, server(lab, family, protocol="udp", payload_size=300), settle=0.2) as (run, s):
        rc, out, err = run([sys.executable, "-P", "-c", LINUX_CLIENT, which["ip"], str(n)], timeout=120)
    assert rc == 0, err
    got, *first = out.strip().split(maxsplit=1)
    print(f"Linux client: {got} answers of {n}, {first}; server {s['http_get']} GET, {s['udp_tx']} sent")
    assert int(got) == n == s["http_get"] == s["http_2xx"] == s["udp_tx"]
    assert first == ["HTTP/1.1 200 OK"] and s["bad_rx"] == s["udp_drop"] == 0
    c, answered = _client_against_linux_server(lab, family, dict(cps=200, duration=1))
    print(f"perfkit client: {c['http_req']} requests, {c['http_2xx']} 2xx, udp_rt {c['udp_rt']}; Linux answered "
          f"{answered}")
    assert c["http_req"] >= 150 and c["http_req"] == answered == c["http_2xx"] + c["udp_rt"]
    assert c["udp_rt"] == 0 and c["bad_rx"] == 0 and c["sock_open"] == c["sock_close"] == c["http_req"]


def _client_against_linux_server(lab, family, fields, loss=None):
    """The perfkit UDP client (protocol udp, these fields) against LINUX_SERVER in h2, with
    this loss on the path while it runs: its counters and how many requests Linux answered."""
    import subprocess
    import sys
    from test_dperf_lab import peer_ip, port_of, run_client
    which = port_of(lab, family)
    srv = lab.popen(lab.hosts[1], [sys.executable, "-P", "-c", LINUX_SERVER, peer_ip(lab, family)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "READY", srv.stderr.read()
        if loss:
            lab.impair(loss=loss)
        try:
            c, _ = run_client(DpdkHttpClient(**which, clients=((which["ip"], 1),), server=peer_ip(lab, family),
                                             listen=8080, protocol="udp", **fields))
        finally:
            if loss:
                lab.clear()
        srv.stdin.write("done\n")
        srv.stdin.flush()
        return c, int(srv.stdout.readline())
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait(timeout=10)


@pytest.mark.parametrize("loss", [None, "10%"])
def test_pipelined_udp_client_against_a_linux_udp_server(eal, lab, loss):
    """dperf's pipeline 4 on 2 keep-alive sockets against Linux: a UDP socket in h2 answers
    each request it gets, in order. Without loss Linux got every request the client sent and
    every answer reached the client and counts once: requests = answers + udp_rt, answers
    sent = answers taken + the late ones (udp_drop). With 10% loss on the path the same
    identity holds, the lost ones in udp_rt."""
    c, answered = _client_against_linux_server(lab, 4, dict(cps=100, cc=2, keepalive=1e-6, pipeline=4, duration=1,
                                                            retransmit_timeout="50ms"), loss=loss)
    print(f"perfkit client: {c['http_req']} requests, {c['http_2xx']} 2xx, udp_rt {c['udp_rt']}, udp_drop "
          f"{c['udp_drop']}; Linux answered {answered}")
    assert c["http_req"] > 8 and c["http_req"] == c["udp_tx"] == c["http_2xx"] + c["udp_rt"]
    assert c["sock_open"] == c["sock_close"] == 2 and c["bad_rx"] == c["http_err"] == 0
    if loss:   # requests lost on the way there, answers on the way back: each one counted unanswered
        assert c["udp_rt"] > 0 and c["http_2xx"] + c["udp_drop"] <= answered <= c["http_req"]
    else:
        assert c["http_req"] == answered == c["http_2xx"] + c["udp_drop"]
