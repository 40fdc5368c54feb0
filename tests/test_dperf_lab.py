"""perfkit's DPDK TCP against the Linux stack (issue 6): a lab of two namespaces
joined by a veth; the DPDK port is net_af_packet on h1's end, with its own address
(.200 of the link); h2 runs curl and nginx. curl, wrk and the nginx runs go over IPv6 too
(the port at ::c8 of the lab's /64); the rest of IPv6 is in test_dperf_lab6.py. Needs root
(the lab); skips otherwise.

h2's veth sends with checksum offload off: af_packet hands DPDK the frames as the
kernel left them, and with offload the TCP checksum is still partial (the DPDK side
checks every checksum and would count them as bad).
"""
import contextlib
import ipaddress
import subprocess
import time

import pytest

from perfkit.errors import EngineError
from perfkit.spec import DpdkHttpClient, DpdkHttpServer

_dpdk = pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
from perfkit.engines import dpdk, dpdk_tcp  # noqa: E402
from _dpdk_tests import counters as _counters, no_leaks, wait_done  # noqa: E402
from _labs import lab_module_or_skip, nginx_in_h2, offload_off_lab  # noqa: E402


@pytest.fixture(scope="module")
def lab():
    lab_mod = lab_module_or_skip()
    try:
        dpdk.eal()
    except EngineError as exc:
        pytest.skip(f"DPDK EAL does not start here: {exc}")
    with offload_off_lab(lab_mod) as lab:
        yield lab


def port_of(lab, family=4):
    """The DPDK port on h1's veth, at .200 of the lab's /24 (IPv4) or ::c8 of its /64 (IPv6)."""
    h1 = lab.hosts[0]
    net = ipaddress.ip_network(f"{h1.ipv4}/24" if family == 4 else f"{h1.ipv6}/64", strict=False)
    return dict(port=f"net_af_packet0,iface={h1.ifname}", netns=h1.netns_path,
                ip=str(net.network_address + 200))


def peer_ip(lab, family=4):
    """h2's address in the family."""
    return lab.hosts[1].ipv4 if family == 4 else lab.hosts[1].ipv6


def server(lab, family=4, **kw):
    return dpdk_tcp.build(DpdkHttpServer(**port_of(lab, family), clients=((peer_ip(lab, family), 1),), duration=60,
                                         **kw))


def url(ip):
    return f"http://[{ip}]" if ":" in ip else f"http://{ip}"


def counters(h):
    return _counters(h, 0)


def finish(h, timeout=30.0):
    wait_done(h, timeout)


@contextlib.contextmanager
def serving_h2(lab, srv, settle=0.3):
    """srv (a built server) started; yields (run, c): run(argv, timeout=120, text=True) runs
    argv in h2 to its end, giving (exit code, stdout, stderr). After the block srv is stopped
    settle s later (the last FIN's ACK), its counters put in c, and closed."""
    def run(argv, timeout=120, text=True):
        p = lab.popen(lab.hosts[1], argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text)
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    c = {}
    try:
        srv.start()
        yield run, c
        time.sleep(settle)
        srv.stop()
        finish(srv)
        c.update(counters(srv))
        assert srv.error() is None
    finally:
        srv.close()


def serve_while_h2_runs(lab, srv, argv, settle=0.3, timeout=120, text=True):
    """srv serving while argv runs in h2 (serving_h2): (argv's exit code, stdout, stderr, srv's counters)."""
    with serving_h2(lab, srv, settle) as (run, c):
        rc, out, err = run(argv, timeout, text)
    return rc, out, err, c


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("size", [100, 100_000])
def test_curl_gets_valid_responses_from_the_perfkit_server(lab, size, family):
    which = port_of(lab, family)
    n = 20
    urls = [f"{url(which['ip'])}/{i}" for i in range(n)]
    # every body to stdout, each followed by its status line and size: all checked below
    rc, out, err, c = serve_while_h2_runs(lab, server(lab, family, payload_size=size),
                                          ["curl", f"-{family}", "-sS", "--max-time", "10", "-w",
                                           "\n%{http_code} %{size_download}\n", *urls], text=False)
    assert rc == 0, err.decode()
    assert out == (b"x" * size + f"\n200 {size}\n".encode()) * n
    assert c["http_get"] == c["sock_open"] == c["sock_close"] == n     # curl's n connections
    assert c["sock_error"] == c["bad_rx"] == c["tcp_drop"] == c["sock_current"] == 0
    assert c["syn_rx"] == c["fin_rx"] == c["fin_tx"] == n
    print(f"curl -{family}, {size} B: {n} responses, perfkit server http_get {c['http_get']}, "
          f"sock_error {c['sock_error']}")
    no_leaks()


@pytest.fixture
def nginx(lab, tmp_path, family):
    """nginx in h2 at its address of the test's family."""
    import shutil
    if not shutil.which("nginx"):
        pytest.skip("nginx is not installed")
    with nginx_in_h2(lab, tmp_path, family) as ngx:
        yield ngx


def client(lab, family, nginx, **kw):
    which = port_of(lab, family)
    return DpdkHttpClient(**which, clients=((which["ip"], 1),), server=peer_ip(lab, family), listen=nginx.port,
                          http_host="lab", http_path=f"/v{family}", **kw)


def run_client(spec, timeout=30.0):
    """A DPDK client run to its end: its counters and how long it took."""
    h = dpdk_tcp.build(spec)
    try:
        t0 = time.monotonic()
        h.start()
        finish(h, timeout)
        took = time.monotonic() - t0
        c = counters(h)
        assert h.error() is None
    finally:
        h.close()
    return c, took


@pytest.mark.parametrize("family", [4, 6])
def test_cps_run_against_nginx_every_request_in_its_log(lab, nginx, family):
    c, took = run_client(client(lab, family, nginx, cps=1000, duration=1.5))
    time.sleep(0.3)
    nginx.stop()
    log = nginx.log()
    print(f"nginx IPv{family}: {c['sock_open']} connections in {took:.2f} s ({c['sock_open'] / 1.5:.0f} cps over "
          f"the 1.5 s launch), http2XX {c['http_2xx']}, nginx log {len(log)}, sock_error {c['sock_error']}, "
          f"retransmits {c['retrans_syn'] + c['retrans_fin'] + c['retrans_push']}")
    assert c["sock_error"] == 0 and c["http_err"] == 0 and c["err_read"] == 0 and c["bad_rx"] == 0
    assert c["sock_open"] == c["sock_close"] == c["http_2xx"] >= 1400
    # every request from our address, answered whole ("hello from nginx\n")
    assert len(log) == c["http_2xx"]
    assert all(ln[:3] == ["GET", f"/v{family}", "200"] and ln[6] == port_of(lab, family)["ip"] and ln[7] == "17"
               for ln in log)
    assert c["lat_count"] == c["http_2xx"]
    # first-packet RTT (SYN -> Linux's SYN-ACK through af_packet and a veth): above a
    # microsecond, below the retransmission timeout, within ten times a response's time
    assert c["rtt_count"] == c["sock_open"] - c["retrans_syn"] > 0
    rtt = c["rtt_sum_ns"] / c["rtt_count"]
    assert 1000 < rtt <= c["rtt_max_ns"] < 1e9 and rtt < c["lat_sum_ns"] / c["lat_count"] * 10
    no_leaks()


@pytest.mark.parametrize("family", [4, 6])
def test_keepalive_concurrency_against_nginx(lab, nginx, family):
    cc = 40
    h = dpdk_tcp.build(client(lab, family, nginx, cps=400, cc=cc, keepalive="20ms", duration=2))
    seen = []
    try:
        h.start()
        while h.running():
            seen.append(counters(h)["sock_current"])
            time.sleep(0.05)
        finish(h)
        c = counters(h)
        assert h.error() is None
    finally:
        h.close()
    time.sleep(0.3)
    nginx.stop()
    log = nginx.log()
    held = seen[len(seen) // 2: 3 * len(seen) // 4]
    print(f"nginx IPv{family} keep-alive: cc {max(seen)}, {c['http_req']} requests, http2XX {c['http_2xx']}, "
          f"nginx log {len(log)}, sock_error {c['sock_error']}")
    assert max(seen) == cc and held and set(held) == {cc}
    assert c["sock_open"] == c["sock_close"] == cc and c["sock_error"] == 0
    assert len(log) == c["http_2xx"] == c["http_req"] > cc * 10          # connections reused
    no_leaks()


@pytest.mark.parametrize("family", [4, 6])
def test_loss_on_the_path_is_retransmitted_and_every_connection_accounted(lab, nginx, family):
    """5% loss both ways (the lab's impairment on the veth): retransmissions are counted,
    every connection completes or is counted as an error, nothing hangs (on IPv6, ND
    included: lost solicitations are sent again)."""
    lab.impair(loss="5%")
    try:
        c, took = run_client(client(lab, family, nginx, cps=300, duration=2, retransmit_timeout="100ms", retries=8))
    finally:
        lab.clear()
    time.sleep(0.3)
    nginx.stop()
    log = len(nginx.log())
    rt = c["retrans_syn"] + c["retrans_fin"] + c["retrans_push"]
    print(f"IPv{family} with 5% loss: {c['sock_open']} connections, http2XX {c['http_2xx']}, nginx log {log}, "
          f"retransmits {rt}, sock_error {c['sock_error']}, {took:.1f} s")
    assert rt > 0
    assert c["sock_open"] == c["sock_close"] + c["sock_error"] and c["sock_current"] == 0
    assert c["http_2xx"] >= 0.9 * c["sock_open"]
    # nginx logs what it answered; a response lost for good is on nginx's log, not in http_2xx
    assert c["http_2xx"] <= log <= c["http_2xx"] + c["sock_error"]
    assert took < 2 + 0.1 * 10 + 5      # launch time + the drain bound (retries x rto) + slack
    no_leaks()


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("keepalive", [True, False])
def test_wrk_against_the_perfkit_server(lab, keepalive, family):
    import re
    import shutil
    if not shutil.which("wrk"):
        pytest.skip("wrk is not installed")
    which = port_of(lab, family)
    conns = 8
    args = ["wrk", "-t1", "-c", str(conns), "-d", "1s", f"{url(which['ip'])}/"]
    if not keepalive:
        args += ["-H", "Connection: close"]
    rc, out, err, c = serve_while_h2_runs(lab, server(lab, family, payload_size=100, keepalive=keepalive), args,
                                          settle=0.5, timeout=60)
    assert rc == 0, err
    done = int(re.search(r"(\d+) requests in", out).group(1))
    print(f"wrk IPv{family} keepalive={keepalive}: {done} requests, perfkit http_get {c['http_get']}, "
          f"sock_open {c['sock_open']}, sock_error {c['sock_error']}")
    assert "Non-2xx" not in out and "Socket errors" not in out, out
    assert done > 100
    # wrk counts whole responses; a request still in flight when it stops is not counted
    assert done <= c["http_get"] <= done + conns
    assert c["bad_rx"] == 0 and c["sock_current"] == 0
    if keepalive:
        assert c["sock_open"] <= conns + 1                   # wrk's connections (+ its first probe)
    else:
        assert done <= c["sock_open"] <= done + 2 * conns + 1   # a connection per request
    no_leaks()


def _in_h1(lab, *argv):
    subprocess.run(["ip", "netns", "exec", lab.hosts[0].netns, *argv], check=True, capture_output=True, timeout=20)


def _time_wait_from(lab, ip, port):
    """The tuples nginx (h2, port) holds in TIME_WAIT with address ip."""
    out = subprocess.run(["ip", "netns", "exec", lab.hosts[1].netns, "ss", "-Htn", "state", "time-wait",
                          "dst", f"[{ip}]" if ":" in ip else ip, "sport", f"= :{port}"], capture_output=True, text=True, timeout=20).stdout
    return len(out.splitlines())


@pytest.mark.parametrize("family", [4, 6])
def test_connections_on_tuples_nginx_holds_in_time_wait(lab, nginx, family):
    """wrk from the DPDK port's own address, each request its own connection that nginx closes:
    nginx holds those 4-tuples in TIME_WAIT, with Linux's sequence numbers. Then perfkit's
    client over the same tuples: every connection goes through (a SYN that nginx answers with
    an ACK gets a reset at that ACK and goes again, past the old sequence numbers). IPv6 the
    same over the lab's 2001:2:: addresses."""
    import shutil
    if not shutil.which("wrk") or not shutil.which("ss"):
        pytest.skip("wrk and ss are needed")
    h1, ip, lo, hi = lab.hosts[0], port_of(lab, family)["ip"], 20000, 20399
    peer, v = peer_ip(lab, family), ["-4"] if family == 4 else ["-6"]
    # the port's address on h1's veth for wrk's connections (IPv6: no duplicate detection, usable at once)
    _in_h1(lab, "ip", *v, "addr", "add", f"{ip}/{32 if family == 4 else 128}", "dev", h1.ifname,
           *(["nodad"] if family == 6 else []))
    try:
        _in_h1(lab, "ip", *v, "route", "replace", f"{peer}/{32 if family == 4 else 128}", "dev", h1.ifname, "src", ip)
        _in_h1(lab, "sysctl", "-qw", f"net.ipv4.ip_local_port_range={lo} {hi}")   # IPv6's too
        # which side closes first is a race (wrk too may close on the response): a run that
        # leaves nginx few tuples in TIME_WAIT (8 seen on a busy machine) goes again
        for _ in range(3):
            p = lab.popen(h1, ["wrk", "-t1", "-c4", "-d1s", "-H", "Connection: close", f"{url(peer)}:{nginx.port}/"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            held = _time_wait_from(lab, ip, nginx.port)
            if held >= 50:
                break
    finally:
        _in_h1(lab, "ip", *v, "route", "del", f"{peer}/{32 if family == 4 else 128}")
        _in_h1(lab, "ip", *v, "addr", "del", f"{ip}/{32 if family == 4 else 128}", "dev", h1.ifname)
    assert held >= 50, f"nginx holds only {held} tuples from {ip} in TIME_WAIT (wrk: {out[-300:]})"   # Linux connects from even ports
    wrk_done = nginx.lines_now() - nginx.base
    c, took = run_client(client(lab, family, nginx, cps=400, duration=1, lport_range=(lo, hi)))
    print(f"TIME_WAIT IPv{family}: wrk made {wrk_done} connections, nginx held {held} of the {hi - lo + 1} tuples; perfkit "
          f"{c['sock_open']} connections, err_connect {c['err_connect']}, SYNs sent again {c['retrans_syn']}, "
          f"resets {c['rst_tx']}, http2XX {c['http_2xx']}")
    assert c["sock_open"] >= 380 and c["err_connect"] == c["sock_error"] == c["http_err"] == 0
    assert c["sock_open"] == c["sock_close"] == c["http_2xx"] and c["sock_current"] == 0
    assert c["retrans_syn"] > 0 and c["rst_tx"] >= c["retrans_syn"]   # the TIME_WAIT answers were met
    assert c["rtt_count"] == c["sock_open"] - c["retrans_syn"]
    no_leaks()


# In h2: a packet socket on its veth counts, by address, the SYNs that arrive (no ACK) and the
# SYN-ACKs Linux sends from it, until a line on stdin.
SYN_COUNT = r"""
import json, select, socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)   # SO_RCVBUFFORCE (root): a burst while this waits for a CPU
s.bind((sys.argv[1], 0))
syn, synack = {}, {}
print("READY", flush=True)
while True:
    r = select.select([s, sys.stdin], [], [], 30)[0]
    if not r or sys.stdin in r:
        break
    data, addr = s.recvfrom(65535)
    if len(data) < 54 or data[12:14] != b"\x08\x00" or data[23] != 6:
        continue
    flags = data[14 + (data[14] & 15) * 4 + 13] & 0x3f
    if addr[2] != socket.PACKET_OUTGOING and flags == 0x02:
        key = socket.inet_ntoa(data[30:34])
        syn[key] = syn.get(key, 0) + 1
    elif addr[2] == socket.PACKET_OUTGOING and flags == 0x12:
        key = socket.inet_ntoa(data[26:30])
        synack[key] = synack.get(key, 0) + 1
print(json.dumps([syn, synack]), flush=True)
"""
LISTEN_ANY = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(4096)
print("READY", flush=True)
sys.stdin.readline()
"""


def test_change_dip_floods_each_address_of_a_linux_host_in_turn(lab):
    """dperf's change_dip against Linux: h2 holds 4 more addresses and listens on all; the
    perfkit client's SYN flood goes to them in turn (SYN k to address k % 4). A packet socket
    in h2 counts each address's SYNs (exactly its share) and Linux's SYN-ACKs from it, which the
    client resets: nothing is kept on either side."""
    import ipaddress
    import json
    import sys
    h2, which = lab.hosts[1], port_of(lab)
    first = ipaddress.ip_network(f"{h2.ipv4}/24", strict=False).network_address + 210
    addrs = [str(first + k) for k in range(4)]
    h2ip = lambda *argv: subprocess.run(["ip", "netns", "exec", h2.netns, *argv], check=True,  # noqa: E731
                                        capture_output=True, timeout=20)
    procs = []
    try:
        for a in addrs:
            h2ip("ip", "addr", "add", f"{a}/32", "dev", h2.ifname)
        for script, args in ((LISTEN_ANY, ["8081"]), (SYN_COUNT, [h2.ifname])):
            p = lab.popen(h2, [sys.executable, "-P", "-c", script, *args], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout.readline().strip() == "READY", p.stderr.read()
        c, _ = run_client(DpdkHttpClient(**which, clients=((which["ip"], 1),), server=peer_ip(lab), listen=8081,
                                         cps=200, duration=1, flood=True, change_dip=((addrs[0], 1, 4),)))
        time.sleep(0.3)             # the last SYN-ACKs and resets
        for p in procs:
            p.stdin.write("done\n")
            p.stdin.flush()
        syn, synack = json.loads(procs[1].stdout.readline())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        for a in addrs:
            subprocess.run(["ip", "netns", "exec", h2.netns, "ip", "addr", "del", f"{a}/32", "dev", h2.ifname],
                           capture_output=True, timeout=20)
    n = c["syn_tx"]
    print(f"perfkit: {n} SYNs, {c['tcp_rx']} TCP in, {c['tcp_drop']} dropped, {c['rst_tx']} resets; h2 SYNs {syn}, "
          f"SYN-ACKs {synack}")
    assert n >= 100 and c["sock_open"] == 0 and c["drop_tx"] == 0
    assert syn == {a: (n - k + 3) // 4 for k, a in enumerate(addrs)}    # SYN k to address k % 4
    assert set(synack) == set(addrs) and all(synack[a] >= syn[a] for a in addrs)   # Linux answered each
    # each SYN-ACK reached the client, is no socket's (no address of its server) and was reset
    assert c["tcp_rx"] == c["tcp_drop"] == c["rst_tx"] == sum(synack.values())
    no_leaks()
