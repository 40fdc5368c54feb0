"""--cluster NAME on the commands that make load (perfkit.cluster_cli): a cluster `perfkit
cluster up` started with local engines, loading a perfkit HTTP server and a perfkit serve on
loopback; every process bounded in time and taken down at the end."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ipyparallel")

from _sock_tests import serving  # noqa: E402
from perfkit import cluster as cluster_mod  # noqa: E402
from perfkit._sock import SockEngine  # noqa: E402
from perfkit.kinds.http import http_workers  # noqa: E402
from perfkit.spec import HttpServe  # noqa: E402
from perfkit.stats import INDEX  # noqa: E402


def _perfkit(*args, timeout=90):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def name():
    assert os.environ.get("PERFKIT_SANDBOX") == "1"   # the engines inherit the guard
    name = f"cc{os.getpid()}"
    try:
        up = _perfkit("cluster", "up", "-n", "2", "--name", name, timeout=120)
        assert up.returncode == 0 and f"{name}: up, 2 engines" in up.stdout, up
        yield name
    finally:
        cluster_mod.down(name)   # engines and controller, also when up failed half way


@pytest.fixture
def http_server():
    eng = SockEngine(http_workers(HttpServe(port=0, size=200, duration=60)))
    eng.start()
    yield eng.bound_port(0), lambda: eng.snapshot()[0][0][INDEX["http_req"]]
    eng.stop()
    eng.join()
    eng.close()


def test_http_from_a_cluster_is_one_run(name, http_server):
    port, served = http_server
    out = _perfkit("http", f"http://127.0.0.1:{port}/", "--users", "20", "-t", "2", "--interval", "0.5",
                   "--cluster", name, "--json")
    assert out.returncode == 0, out
    lines = [json.loads(ln) for ln in out.stdout.splitlines()]
    s = lines[-1]["summary"]
    assert len(lines) >= 4 and all("summary" not in ln for ln in lines[:-1])   # the rows, then one summary
    assert s["requests"] == s["responses"] == served() > 100    # the merged count is what the server saw
    assert set(s["hosts"]) == {"e0", "e1"} and s["finished_hosts"] == ["e0", "e1"]
    assert sum(h["requests"] for h in s["hosts"].values()) == s["requests"]
    assert all(h["requests"] > 0 for h in s["hosts"].values())
    assert s["sock_open"] == 20 and s["http_err"] == 0 and s["cluster"] == name
    assert 0 <= s["start_skew_s"] < 0.5


def test_text_ends_with_the_hosts_and_their_shares(name, http_server):
    port, served = http_server
    out = _perfkit("http", f"http://127.0.0.1:{port}/", "--users", "4", "-t", "1", "--cluster", name)
    assert out.returncode == 0 and out.stderr == "", out
    tail = out.stdout.splitlines()[-3:]
    assert tail[0].startswith(f"cluster {name}: 2 hosts (e0, e1), start skew ") and tail[0].endswith(" ms")
    shares = {ln.split()[0]: int(ln.split()[1].replace(",", "")) for ln in tail[1:]}
    assert set(shares) == {"e0", "e1"} and sum(shares.values()) == served()
    assert all(ln.endswith("finished") and " requests " in ln for ln in tail[1:])


def test_local_and_test_from_a_cluster(name):
    out = _perfkit("local", "udp_bw", "--rate", "4kpps", "-t", "1", "--cluster", name, "--json")
    assert out.returncode == 0, out
    s = json.loads(out.stdout.splitlines()[-1])["summary"]
    assert set(s["hosts"]) == {"e0", "e1"} and s["pkts_tx"] == pytest.approx(4000, rel=0.15)
    assert s["pkts_rx"] == sum(h["pkts_rx"] for h in s["hosts"].values()) > 0
    with serving() as srv:   # a perfkit server in a thread here, on loopback
        out = _perfkit("test", "127.0.0.1", "udp_bw", "-lp", str(srv.port), "--rate", "4kpps", "-t", "1",
                       "--cluster", name)
    assert out.returncode == 0, out
    tail = out.stdout.splitlines()[-3:]
    assert tail[0].startswith(f"cluster {name}: 2 hosts (e0, e1), start skew ")
    assert all(" packets sent " in ln and ln.endswith("finished") for ln in tail[1:])


@pytest.mark.parametrize("command", [["http", "http://127.0.0.1:9/"], ["local", "udp_bw"],
                                     ["test", "127.0.0.1", "udp_bw"]])
def test_an_unknown_cluster_is_one_line_before_anything_starts(command):
    out = _perfkit(*command, "-t", "1", "--cluster", f"nosuch{os.getpid()}", timeout=60)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"perfkit: cluster: no running cluster for "
                                                                 f"profile 'nosuch{os.getpid()}'"), out.stderr


def test_a_cluster_with_no_engines_is_one_line():
    c = cluster_mod.Cluster.start(n=1, name=f"ce{os.getpid()}")
    try:
        c.close()
        engine = c.state["engines"][0]["pid"]
        os.killpg(engine, 9)
        out = _perfkit("http", "http://127.0.0.1:9/", "-t", "1", "--cluster", c.name, timeout=90)
        assert out.returncode == 2 and out.stdout == "", out
        assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"perfkit: cluster {c.name}: "), out.stderr
    finally:
        cluster_mod.down(c.name)


def test_a_load_that_does_not_split_is_one_line_before_anything_starts(name):
    out = _perfkit("http", "http://127.0.0.1:9/", "--users", "1", "-t", "1", "--cluster", name, timeout=60)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr == "perfkit: cluster: users: 1 virtual users cannot split over 2 engines (at least one each)\n"


def test_the_commands_that_make_load_take_cluster():
    import argparse
    from perfkit.cli import _parser
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    have = {cmd for cmd, p in sub.items() if any("--cluster" in a.option_strings for a in p._actions)}
    assert have == {"http", "local", "test", "flows", "dperf"}   # reflect, a far end, does not split


def test_dpdk_flows_on_a_kernel_port_needs_engines_in_lab_hosts(name):
    out = _perfkit("flows", "--port", "net_af_packet0,iface=x", "--netns", "/run/netns/x", "--flows", "2",
                   "-t", "1", "--cluster", name, timeout=60)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.startswith("perfkit: port: DpdkFlows takes a DPDK port on every engine's own host") \
        and out.stderr.count("\n") == 1, out.stderr
    out = _perfkit("flows", "--port", "net_null0", "--search", "zero-loss", "--cluster", name, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("perfkit: cluster: --cluster runs perfkit flows on the dpdk")


def test_a_rate_search_runs_here_only():
    out = _perfkit("local", "udp_bw", "--search", "zero-loss", "--cluster", "any", timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("perfkit: cluster: --cluster does not go with --search (a search's trials run on "
                          "this host)\n")
