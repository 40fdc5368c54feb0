"""Real targets: any IPv4 or IPv6 address or DNS name, a name resolved once at the start;
what was resolved in the run's environment and on the command line; one warning line
before an unpaced flood; the suite's network guard (perfkit.sandbox) still refusing
everything but loopback, the lab's blocks and documentation addresses.

Names resolve through /etc/hosts only: localhost here, and in an isolated pair of
namespaces (192.0.2.0/24) a name from /etc/netns/NAME/hosts, which ip netns exec
bind-mounts over /etc/hosts. A name under .invalid is never sent to a resolver."""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from perfkit import cli, spec
from perfkit.errors import EngineError
from perfkit.spec import (DpdkFlows, DpdkHttpClient, HttpLoad, LocalTest, RemoteTest, check_target, resolve,
                          target_of)

GUARD = "is refused by the network guard (PERFKIT_SANDBOX=1)"


def perfkit(*args, env=None, timeout=60, netns=None):
    cmd = [sys.executable, "-P", "-m", "perfkit", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


# ------------------------------------------------------------ what a target may be

@pytest.mark.parametrize("given, address", [
    ("127.0.0.1", "127.0.0.1"), (" ::0001 ", "::1"), ("[::1]", "::1"), ("198.18.0.10", "198.18.0.10"),
    ("localhost", "127.0.0.1"), ("LOCALHOST", "127.0.0.1"),
])
def test_an_address_or_a_name_gives_the_address(given, address):
    assert resolve(given) == address and check_target(given, "server") == address


@pytest.mark.parametrize("name", ["nosuch.invalid", "a.b.invalid."])
def test_a_name_that_does_not_resolve_is_one_clear_line(name):
    with pytest.raises(ValueError) as exc:
        LocalTest(host=name)
    assert str(exc.value) == f"host: {name!r} does not resolve (Name or service not known)"
    with pytest.raises(ValueError, match=r"^url: 'nosuch\.invalid' does not resolve \(Name or service not known\)$"):
        HttpLoad(url="http://nosuch.invalid:8080/")


@pytest.mark.parametrize("bad", ["not an address", "127.0.0.256", "", "a..b", "-x.example", "x" * 64 + ".example"])
def test_neither_an_address_nor_a_name(bad):
    with pytest.raises(ValueError, match=r"^host: .* is not an IPv4 or IPv6 address or a DNS name$"):
        resolve(bad)


def test_outside_the_suite_any_address_makes_a_spec(monkeypatch):
    """The product's rule is any address: these specs are made and never run."""
    monkeypatch.setenv("PERFKIT_SANDBOX", "0")
    assert LocalTest(host="10.0.0.1").host == "10.0.0.1"
    assert RemoteTest(host="2606:4700::1111", test="tcp_bw").host == "2606:4700::1111"
    load = HttpLoad(url="http://10.0.0.1:8080/x")
    assert load.target() == ("10.0.0.1", 8080) and b"Host: 10.0.0.1:8080\r\n" in load.request_bytes()
    flows = DpdkFlows(port="net_null0", peer_ip="10.0.0.1", dst_ips=4)
    assert flows.peer_ip == "10.0.0.1" and target_of(flows) == {"name": "10.0.0.1", "address": "10.0.0.1"}
    client = DpdkHttpClient(port="ring:pk:0", server="10.0.0.2")
    assert client.server == client.gateway == "10.0.0.2"
    with pytest.raises(ValueError, match="does not resolve"):   # still checked: only the rule is gone
        LocalTest(host="nosuch.invalid")


def test_in_the_suite_the_guard_refuses_them():
    for make in (lambda: LocalTest(host="10.0.0.1"), lambda: RemoteTest(host="10.0.0.1"),
                 lambda: HttpLoad(url="http://10.0.0.1/"), lambda: DpdkFlows(port="net_null0", peer_ip="10.0.0.1"),
                 lambda: DpdkHttpClient(port="ring:pk:0", server="10.0.0.2")):
        with pytest.raises(ValueError, match=GUARD.replace("(", r"\(").replace(")", r"\)")):
            make()
    with pytest.raises(ValueError, match=r"^dst_ips: 198\.20\.0\.0 is refused by the network guard"):
        DpdkFlows(port="net_null0", peer_ip="198.19.255.255", dst_ips=2)


def test_a_dpdk_port_keeps_a_lab_address_of_its_own():
    with pytest.raises(ValueError, match="ip: 192.0.2.1 is not allowed: DPDK ports use lab addresses"):
        DpdkFlows(port="net_null0", ip="192.0.2.1", peer_ip="192.0.2.2")
    with pytest.raises(ValueError, match=r"^server: ::1 is not an address a DPDK port sends to"):
        DpdkHttpClient(port="ring:pk:0", ip="2001:2::1", clients="2001:2::1+1", server="::1")
    with pytest.raises(ValueError, match=r"^peer_ip: '2001:db8::1' is not an IPv4 address$"):
        DpdkFlows(port="net_null0", peer_ip="2001:db8::1")
    with pytest.raises(ValueError, match=r"^server: 192\.0\.2\.1 is IPv4 but the port's address is IPv6"):
        DpdkHttpClient(port="ring:pk:0", ip="2001:2::1", clients="2001:2::1+1", server="192.0.2.1")


def test_the_url_keeps_its_name_for_the_host_header():
    load = HttpLoad(url=["http://localhost:8080/a", "http://127.0.0.1:8080/b"])   # one server: one address
    assert load.target() == ("127.0.0.1", 8080) and load.url[0] == "http://localhost:8080/a"
    assert load.request_bytes().startswith(b"GET /a HTTP/1.1\r\nHost: localhost:8080\r\n")
    assert b"GET /b HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n" in load.request_bytes()
    assert b"Host: [::1]:8080\r\n" in HttpLoad(url="http://[::1]:8080/").request_bytes()
    assert b"Host: localhost\r\n" in HttpLoad(url="http://localhost/").request_bytes()


def test_the_run_records_the_name_and_the_address():
    s = LocalTest(test="tcp_lat", host="localhost", duration=0.3)
    assert s.host == "127.0.0.1" and target_of(s) == {"name": "localhost", "address": "127.0.0.1"}
    run = __import__("perfkit").Run(s).start()
    run.wait()
    assert run.env["target"] == {"name": "localhost", "address": "127.0.0.1"} and run.summary["lat_count"] > 0
    assert target_of(LocalTest(lab="x")) is None


def test_a_sweep_resolves_its_host_once(monkeypatch):
    from perfkit.sweep import plan
    asked = []
    real = spec.socket.getaddrinfo
    monkeypatch.setattr(spec.socket, "getaddrinfo", lambda *a, **kw: asked.append(a[0]) or real(*a, **kw))
    points = plan("localhost", "tcp_lat", "tcp_bw", sweep={"msg_size": "1:64:*2"})
    assert len(points) == 14 and {s.host for _, _, s in points} == {"127.0.0.1"} and asked == ["localhost"]
    assert target_of(points[-1][2]) == {"name": "localhost", "address": "127.0.0.1"}


# ------------------------------------------------------------ the command line

def test_cli_prints_the_address_of_a_name_before_the_run():
    out = perfkit("local", "tcp_lat", "--host", "localhost", "-t", "0.3")
    assert out.returncode == 0, out.stderr
    assert out.stderr == "perfkit: localhost is 127.0.0.1\n"
    assert "on 127.0.0.1 (socket engine)" in out.stdout
    out = perfkit("local", "tcp_lat", "-t", "0.3")   # an address: nothing more is said
    assert out.returncode == 0 and out.stderr == ""


def test_cli_a_refused_target_fails_with_the_guards_line_before_any_packet(monkeypatch, capsys):
    out = perfkit("local", "udp_bw", "--host", "10.0.0.1", "-t", "1")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"perfkit: host: 10.0.0.1 {GUARD}: ") and out.stderr.count("\n") == 1
    built = []   # the same in this process: no engine is even built
    from perfkit.engines import socket as sock_engine
    monkeypatch.setattr(sock_engine, "build", lambda s: built.append(s))
    assert cli.main(["local", "udp_bw", "--host", "10.0.0.1", "-t", "1"]) == 2 and built == []
    assert GUARD in capsys.readouterr().err


def test_cli_serve_off_loopback_still_needs_its_token():
    env = {k: v for k, v in os.environ.items() if k != "PERFKIT_TOKEN"}
    out = perfkit("serve", "--bind", "198.18.0.1", "--port", "0", env=env, timeout=30)
    assert out.returncode == 2
    assert out.stderr == ("perfkit: token: listening on 198.18.0.1 (not loopback) needs a shared token "
                          "(--token or PERFKIT_TOKEN)\n")


class _NoRun:
    """Run's stand-in: the command gets as far as starting, and nothing runs."""
    def __init__(self, spec, *a, **kw):
        self.spec = spec

    def start(self):
        raise EngineError("not run here")


def _warnings(capsys):
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("perfkit: warning:")]


def test_cli_an_unpaced_udp_bw_off_loopback_names_its_target_first(monkeypatch, capsys):
    monkeypatch.setattr(cli, "Run", _NoRun)
    assert cli.main(["local", "udp_bw", "--host", "192.0.2.1", "-t", "1"]) == 1
    assert _warnings(capsys) == ["perfkit: warning: udp_bw with no --rate sends as fast as it can to 192.0.2.1"]
    for quiet in (["local", "udp_bw", "-t", "1"], ["local", "udp_bw", "--host", "192.0.2.1", "-r", "1kpps"],
                  ["local", "tcp_bw", "--host", "192.0.2.1"]):
        cli.main(quiet)
        assert _warnings(capsys) == []


def test_cli_unpaced_dpdk_flows_name_their_target_first(monkeypatch, capsys):
    monkeypatch.setattr(cli, "Run", _NoRun)
    monkeypatch.setattr(cli, "_dpdk_eal", lambda a: None)
    assert cli.main(["flows", "--port", "net_null0", "--peer-ip", "192.0.2.7", "-t", "1"]) == 1
    assert _warnings(capsys) == ["perfkit: warning: flows with no --rate send as fast as net_null0 goes to 192.0.2.7"]
    cli.main(["flows", "--port", "net_null0", "--peer-ip", "192.0.2.7", "--rate", "1kpps", "-t", "1"])
    assert _warnings(capsys) == []


def test_cli_a_dperf_syn_flood_names_its_target_first(monkeypatch, capsys, tmp_path):
    conf = tmp_path / "flood.conf"
    conf.write_text("mode client\ncpu 0\nduration 1s\ncps 400\nflood\nport ring:fl:0 198.18.0.1 198.18.0.2\n"
                    "client 198.18.0.1 1\nserver 198.18.0.2 1\nlisten 80 1\n")
    monkeypatch.setattr(cli, "Run", _NoRun)
    monkeypatch.setattr(cli, "_dpdk_eal", lambda a: None)
    assert cli.main(["dperf", "-c", str(conf)]) == 1
    assert _warnings(capsys) == [f"perfkit: warning: {conf}: a SYN flood at 400 connections/s to 198.18.0.2"]


# ------------------------------------------------------------ a name in a namespace

@contextlib.contextmanager
def named_pair():
    """Two namespaces joined by a veth, 192.0.2.1 and 192.0.2.2, nothing else; in the first,
    /etc/netns/NAME/hosts names the second "far". Removed after."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and ip: the test makes network namespaces")
    tag = f"pktg{os.getpid() % 100000}"
    a, b = tag + "a", tag + "b"
    etc = f"/etc/netns/{a}"

    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)
    try:
        try:
            ip("netns", "add", a)
            ip("netns", "add", b)
            ip("link", "add", tag + "x", "netns", a, "type", "veth", "peer", "name", tag + "y", "netns", b)
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot make namespaces here: {exc.stderr.decode().strip()}")
        for ns, dev, addr in ((a, tag + "x", "192.0.2.1/24"), (b, tag + "y", "192.0.2.2/24")):
            ip("-n", ns, "addr", "add", addr, "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n192.0.2.2 far\n")
        yield a, b
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        shutil.rmtree(etc, ignore_errors=True)


def _summaries(stdout):
    return [json.loads(ln)["summary"] for ln in stdout.splitlines() if ln.startswith('{"summary"')]


def test_a_name_in_a_namespace_perfkit_test_against_serve():
    with named_pair() as (a, b):
        server = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-P", "-m", "perfkit", "serve",
                                   "--bind", "192.0.2.2", "--token", "t0k"], stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        try:
            assert "listening on 192.0.2.2" in server.stderr.readline()
            out = perfkit("test", "far", "tcp_bw", "tcp_lat", "-t", "1", "--token", "t0k", "--json", netns=a)
            assert out.returncode == 0, out.stderr
            assert out.stderr == "perfkit: far is 192.0.2.2\n"
            bw, lat = _summaries(out.stdout)
            assert bw["test"] == "tcp_bw" and bw["loc_send_bytes"] == bw["rem_recv_bytes"] > 0, bw
            assert lat["test"] == "tcp_lat" and lat["lat_count"] > 100
            assert lat["loc_send_msgs"] >= lat["rem_recv_msgs"] >= lat["rem_send_msgs"] >= lat["loc_recv_msgs"]
            assert lat["loc_send_msgs"] - lat["loc_recv_msgs"] <= 1, lat
            # the environment of a run from Python there keeps the name and the address
            code = ("import json, perfkit; r = perfkit.Run(perfkit.RemoteTest(host='far', test='tcp_lat', "
                    "duration=0.3, token='t0k')).start(); r.wait(); print(json.dumps(r.env['target']))")
            env_out = subprocess.run(["ip", "netns", "exec", a, sys.executable, "-P", "-c", code],
                                     capture_output=True, text=True, timeout=60)
            assert env_out.returncode == 0, env_out.stderr
            assert json.loads(env_out.stdout) == {"name": "far", "address": "192.0.2.2"}
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=20)


@pytest.mark.nginx
def test_a_name_in_a_namespace_perfkit_http_against_nginx(tmp_path):
    from _nginx import Nginx
    with named_pair() as (a, b):
        with Nginx(tmp_path, host="192.0.2.2", netns=b) as ngx:
            out = perfkit("http", f"http://far:{ngx.port}/", "-u", "4", "-t", "1", "--json", netns=a)
            time.sleep(0.2)
        assert out.returncode == 0, out.stderr
        assert out.stderr == "perfkit: far is 192.0.2.2\n"
        (s,) = _summaries(out.stdout)
        lines = ngx.log()
        ok = [ln for ln in lines if ln[2] == "200"]
        assert s["responses"] > 10 and s["http_err"] == 0
        assert len(ok) == len(lines) == s["responses"] == s["requests"]
        assert {ln[6] for ln in lines} == {"192.0.2.1"}


# ------------------------------------------------------------ a name in a lab host

def test_resolve_in_reads_that_namespaces_hosts_file(tmp_path):
    """A name resolves from /etc/netns/NETNS/hosts (what ip netns exec shows the process), IPv4 first;
    a name it lacks is one line naming the file. No namespace is needed to read the file."""
    if os.geteuid() != 0:
        pytest.skip("needs root: writes /etc/netns/NAME/hosts")
    ns = f"pktr{os.getpid() % 100000}"
    etc = f"/etc/netns/{ns}"
    os.makedirs(etc, exist_ok=True)
    try:
        with open(f"{etc}/hosts", "w") as f:
            f.write("# comment far\n2001:db8::2 far\n192.0.2.2 web far far.lab  # far\nbad-line near\n")
        assert spec.resolve_in("far", ns) == "192.0.2.2"
        assert spec.resolve_in("FAR.", ns) == "192.0.2.2" and spec.resolve_in("far.lab", ns) == "192.0.2.2"
        assert spec.resolve_in("[2001:db8::5]", ns) == "2001:db8::5"
        for name in ("near", "elsewhere"):
            with pytest.raises(ValueError, match=rf"^url: '{name}' does not resolve in {ns} \(not in {etc}/hosts\)$"):
                spec.resolve_in(name, ns, "url")
        assert check_target("far", "url", ns) == "192.0.2.2"   # the guard allows documentation addresses
    finally:
        shutil.rmtree(etc, ignore_errors=True)


@pytest.mark.root
@pytest.mark.nginx
def test_http_lab_resolves_a_name_in_the_lab_host(tmp_path, lab):
    """HttpLoad(lab=...) with a name takes the address from h1's /etc/netns hosts, not the main
    namespace's; the load reaches nginx in h2 (every request in its access log, from h1)."""
    from _nginx import Nginx
    h1, h2 = lab.hosts
    etc = f"/etc/netns/{h1.netns}"
    os.makedirs(etc, exist_ok=True)
    try:
        with open(f"{etc}/hosts", "w") as f:
            f.write(f"127.0.0.1 localhost\n{h2.ipv4} pkfar\n")
        with pytest.raises(ValueError, match=r"^lab: no lab 'nolabx' is up"):
            HttpLoad(url="http://pkfar:80/", lab="nolabx")   # no such lab: the name is not resolved elsewhere
        with Nginx(tmp_path, host=h2.ipv4, netns=h2.netns) as ngx:
            load = HttpLoad(url=f"http://pkfar:{ngx.port}/", users=4, duration=1, lab=lab.name)
            assert load.target() == (h2.ipv4, ngx.port)
            import perfkit
            r = perfkit.run(load)
            time.sleep(0.2)
        lines = ngx.log()
    finally:
        shutil.rmtree(etc, ignore_errors=True)
    assert r.error is None and r.summary["responses"] > 10 and r.summary["http_err"] == 0, r.summary
    assert len(lines) == r.summary["responses"] == r.summary["requests"]
    assert {ln[6] for ln in lines} == {h1.ipv4}
