"""End to end on loopback: each qperf-style test runs on the socket engine and
its counters add up."""
import pytest

import perfkit
from perfkit import LocalTest


@pytest.mark.parametrize("test", ["udp_bw", "udp_lat", "tcp_bw", "tcp_lat"])
def test_each_local_test_moves_traffic(test):
    run = perfkit.run(LocalTest(test, duration="1s"), interval=0.25)
    s = run.summary
    assert s["pkts_tx"] > 0 and s["pkts_rx"] > 0
    assert run.error is None
    assert len(run.frame) >= 4
    if test.endswith("_lat"):
        assert s["lat_count"] > 100
        assert 0 < s["lat_p50_us"] < 10_000


def test_udp_received_plus_lost_equals_sent_exactly():
    run = perfkit.run(LocalTest("udp_bw", size=64, rate="50kpps", duration="1s"))
    s = run.summary
    assert s["pkts_rx"] - s["dup"] + s["lost"] == s["pkts_tx"]
    assert s["bytes_rx"] == s["pkts_rx"] * 64


@pytest.mark.parametrize("test", ["tcp_bw", "tcp_lat"])
def test_tcp_one_mib_messages(test):
    """TCP messages up to 1 MiB, as qperf and iperf3 write: every message arrives whole."""
    size = 1 << 20
    run = perfkit.run(LocalTest(test, size="1M", duration="0.5s"), interval=0.25)
    s = run.summary
    assert run.error is None
    assert s["pkts_tx"] > 0 and s["pkts_rx"] > 0
    # a stream's receiver sees every byte written (the sender waits for its EOF)
    assert s["bytes_rx"] == s["bytes_tx"] == s["pkts_tx"] * size
    assert s["bytes_rx"] // size == s["pkts_rx"]
    if test == "tcp_lat":
        assert 2 * s["lat_count"] == s["pkts_tx"]   # ping's and pong's messages, one round trip each


def test_tcp_bw_default_write_is_iperf3s():
    run = perfkit.run(LocalTest("tcp_bw", duration="0.3s"))
    assert run.spec.size == 128 << 10
    assert run.summary["bytes_tx"] == run.summary["pkts_tx"] * (128 << 10)


def test_tcp_bw_slow_stream_is_counted_while_it_runs():
    """The stream receiver is woken per 16 KiB (SO_RCVLOWAT): a slow stream must still be
    counted as it arrives (recv returns what it has after its timeout), not only at EOF."""
    run = perfkit.run(LocalTest("tcp_bw", size=64, rate="100pps", duration="1.5s"), interval=0.25)
    s = run.summary
    assert run.error is None
    assert s["bytes_rx"] == s["bytes_tx"] == s["pkts_tx"] * 64
    rx = run.frame["bytes_rx"].to_list()   # cumulative, per row
    # 6.4 KB/s: 16 KiB would take 2.5 s to gather; rows during the run must see data already
    assert any(0 < v < s["bytes_rx"] for v in rx[:4]), rx
