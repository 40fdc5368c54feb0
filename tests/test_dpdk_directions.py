"""Both directions apart (issue 30): a bidirectional or reverse DPDK run reports a -> b and
b -> a each with its own counts, rates, loss and latency, in the summary, the frame and the
CLI's lines; each direction's counts equal the NIC counters (nic_opackets, nic_ipackets) of
the port that sent it and of the port that received it, and the reflector's own counts.
Sent = received + lost, each way."""
import json
import os
import select
import signal
import subprocess
import sys
import tempfile

import pytest

import perfkit
from perfkit.spec import DpdkFlows
from perfkit.stats import direction_columns

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402

A_IP, B_IP = "198.18.0.1", "198.18.0.2"
WAYS = ("a_to_b", "b_to_a")


@pytest.mark.parametrize("cores", [1, 2])
def test_bidirectional_each_way_apart_equals_both_ports_nic_counters(eal, cores):
    spec = DpdkFlows(port="ring:dir:0", peer="ring:dir:1", bidirectional=True, cores=cores, flows=6,
                     rate="20kpps", duration="0.5s", sizes="64,512")
    run = perfkit.Run(spec, engine="dpdk").run()
    s = run.summary
    assert run.error is None and run.directions is not None
    for way in WAYS:
        sent, got = s[f"{way}_sent"], s[f"{way}_received"]
        assert abs(sent - 10_000) <= cores                          # each way at the rate
        assert sent == got + s[f"{way}_lost"]                        # sent = received + lost
        assert s[f"{way}_nic_tx"] == sent                            # the sending port's opackets
        assert s[f"{way}_nic_rx"] == got                             # the receiving port's ipackets
        assert s[f"{way}_reorder"] == s[f"{way}_dup"] == 0
        assert 0 < s[f"{way}_lat_p50_us"] <= s[f"{way}_lat_max_us"]      # one-way, at the receiving side
        assert s[f"{way}_rx_pps"] > 0 and s[f"{way}_tx_bps"] > 0
    # the two ways add up to the run's own totals
    assert s["a_to_b_sent"] + s["b_to_a_sent"] == s["pkts_tx"]
    assert s["a_to_b_received"] + s["b_to_a_received"] == s["pkts_rx"]
    # the frame: each way's columns in every row, its frames/s adding up to the whole run's
    f = run.frame
    assert set(direction_columns()) <= set(f.columns)
    for way in WAYS:
        per_row = (f[f"{way}_tx_pps"] * f["interval_s"]).sum()
        assert abs(per_row - s[f"{way}_sent"]) < 1 + 1e-6 * s[f"{way}_sent"] * len(f)
    assert abs((f["a_to_b_nic_tx_pps"] * f["interval_s"]).sum() - s["a_to_b_nic_tx"]) < 1 + len(f)


def test_reverse_with_the_reflector_here_each_way_equals_the_reflector_and_nics(eal):
    spec = DpdkFlows(port="ring:rev:0", peer="ring:rev:1", mode="reverse", flows=4, rate="20kpps",
                     duration="0.5s")
    run = perfkit.Run(spec, engine="dpdk").run()
    s = run.summary
    assert run.error is None
    refl = [i for i, r in enumerate(run.roles) if r == "dpdk_reflect"]
    assert refl, run.roles
    # a -> b: what the generator sent, the reflector received; b -> a: what it sent back, came back
    assert s["a_to_b_sent"] == s["a_to_b_nic_tx"] == s["a_to_b_nic_rx"] == s["a_to_b_received"]
    assert s["b_to_a_sent"] == s["b_to_a_nic_tx"] == s["b_to_a_nic_rx"] == s["b_to_a_received"]
    for way in WAYS:
        assert s[f"{way}_sent"] == s[f"{way}_received"] + s[f"{way}_lost"]
        assert s[f"{way}_reorder"] is None and s[f"{way}_lat_p50_us"] is None   # a round trip: not apart
    assert s["a_to_b_lost"] + s["b_to_a_lost"] == s["lost"]                       # the round trip's loss
    assert s["b_to_a_received"] == s["lat_count"]                                # every frame back timed


@pytest.fixture()
def sock():
    d = tempfile.mkdtemp(prefix="pkdir")
    yield os.path.join(d, "memif.sock")
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


def test_reverse_over_memif_between_two_processes_each_way_equals_the_reflectors_counts(eal, sock):
    # the CLI's reflector in another process (memif server, a MAC of its own so that nobody ARPs:
    # every frame on the link is a load frame), this process's generator in reverse mode
    mac = "02:00:00:00:30:02"
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "perfkit", "reflect", "--port", f"net_memif0,role=server,socket={sock},mac={mac}",
         "--mode", "reverse", "--ip", B_IP, "--duration", "15s", "--interval", "0.1s", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 30)
        assert ready, "the reflector printed no row in 30 s"
        assert server.stdout.readline().startswith("{"), server.poll()
        spec = DpdkFlows(port=f"net_memif0,role=client,socket={sock}", mode="reverse", ip=A_IP, peer_ip=B_IP,
                         dst_mac=mac, rate="20kpps", flows=5, duration="1s")
        run = perfkit.Run(spec, engine="dpdk").run()
    finally:
        server.send_signal(signal.SIGINT)   # Ctrl-C: the reflector stops, then prints its summary
        out, err = server.communicate(timeout=30)
    assert run.error is None, (run.error, err[-3000:])
    lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    far, last = lines[-1]["summary"], lines[-2]    # its summary; its last row has the NIC's totals
    far.update(nic_ipackets=last["nic_ipackets"], nic_opackets=last["nic_opackets"])
    s = run.summary
    # the far side is not in this run: its figures are None here, the reflector's summary has them
    assert s["a_to_b_received"] is None and s["b_to_a_sent"] is None and s["a_to_b_nic_rx"] is None
    # each side's counts equal its port's NIC counts; a -> b reached the reflector, b -> a came back
    assert s["a_to_b_sent"] == s["a_to_b_nic_tx"] >= far["nic_ipackets"] == far["pkts_rx"]
    assert far["pkts_tx"] == far["nic_opackets"] >= s["b_to_a_nic_rx"] == s["b_to_a_received"]
    assert far["pkts_rx"] == far["pkts_tx"] + far["drop_tx"]       # the reflector sent back what it could
    assert s["a_to_b_sent"] == s["b_to_a_received"] + s["lost"]    # sent = received + lost, round trip
    if s["lost"] == 0:   # a clean link (a busy host may leave frames in a ring when a side closes)
        assert s["a_to_b_sent"] == far["pkts_rx"] == far["pkts_tx"] == s["b_to_a_received"]
    assert dpdk.resources()["ports_open"] == 0


def test_cli_prints_each_way_per_second_and_in_the_summary(eal):
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "ring:dcl:0", "--peer", "ring:dcl:1",
                        "--bidirectional", "--rate", "10kpps", "--duration", "1.5s"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if ln.strip().endswith("%") and "pktTx" in ln]
    assert rows and all(" a>b " in ln and " b>a " in ln for ln in rows), p.stdout
    ways = {ln.split("=")[0].strip(): ln for ln in p.stdout.splitlines() if ln.strip().startswith(("a -> b", "b -> a"))}
    assert set(ways) == {"a -> b", "b -> a"}, p.stdout
    for ln in ways.values():
        assert "sent 15,000  received 15,000  lost 0  reorder 0  dup 0" in ln and "nic tx 15,000 rx 15,000" in ln
    j = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "ring:dcj:0", "--peer", "ring:dcj:1",
                        "--bidirectional", "--rate", "10kpps", "--duration", "0.5s", "--json"],
                       capture_output=True, text=True, timeout=60)
    lines = [json.loads(ln) for ln in j.stdout.splitlines()]
    assert all(set(direction_columns()) <= set(r) for r in lines[:-1])
    assert lines[-1]["summary"]["a_to_b_received"] == lines[-1]["summary"]["b_to_a_received"] == 5000


def test_the_dashboard_charts_each_way(eal):
    charts = pytest.importorskip("perfkit.ui.charts")
    assert charts.layout_name(DpdkFlows(peer="ring:x:1")) == "dpdk_flows"
    spec = DpdkFlows(port="ring:dsh:0", peer="ring:dsh:1", bidirectional=True, rate="10kpps", duration="1.2s")
    assert charts.layout_name(spec) == "dpdk_flows_ways"
    run = perfkit.Run(spec, engine="dpdk").run()
    fig = charts.run_figure(run)
    by_name = {t.name: t for t in fig.data}
    for name in ("a→b rx pkt/s", "b→a rx pkt/s", "a→b mean µs", "b→a mean µs"):
        assert any(v for v in by_name[name].y if v), name
