"""End to end on loopback: each qperf-style test runs on the socket engine and
its counters add up."""

import pytest

import perfkit
from perfkit import LocalTest

from _sock_tests import needs_strace, syscalls_of  # noqa: E402


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


def test_tcp_bw_batch_cut_short_keeps_whole_messages():
    """Writes below 16 KiB go out a batch per sendmmsg without waiting; a small send buffer
    cuts a batch mid-message (1000 B writes into 4 KiB), and the sender finishes that
    message before the next batch, so the stream still holds whole messages."""
    run = perfkit.run(LocalTest("tcp_bw", size=1000, loc_sock_buf_size="4K", duration="0.5s"))
    s = run.summary
    assert run.error is None and s["pkts_tx"] > 1000
    assert s["bytes_rx"] == s["bytes_tx"] == s["pkts_tx"] * 1000
    assert s["pkts_rx"] == s["pkts_tx"]


@needs_strace
def test_tcp_bw_small_writes_go_a_batch_per_call():
    """64 B writes: 32 (the batch) per sendmmsg, not one send() each, as the kernel saw them."""
    summary, calls = syscalls_of("sendmmsg,sendto", "tcp_bw", "-m", "64", "-t", "0.3")
    messages = summary["pkts_tx"]
    assert messages > 10_000 and summary["bytes_rx"] == messages * 64
    assert calls.get("sendto", (0, 0))[0] < messages / 100, calls      # a blocking send only where the buffer was full
    assert messages / 40 <= calls["sendmmsg"][0] <= messages / 16, (calls, messages)


def test_udp_bw_frame_keeps_only_the_socket_engines_counter_groups():
    """The socket engine writes no HTTP or TCP-state counters: a udp_bw frame has none of
    their columns, and has the packet, sequence, latency and CPU ones."""
    run = perfkit.run(LocalTest("udp_bw", duration="0.5s"), interval=0.25)
    cols = set(run.frame.columns)
    assert not [c for c in cols if c.startswith(("http_", "syn_", "fin_", "rst_", "retrans_", "nic_", "probe_"))]
    assert {"pkts_tx", "pkts_tx_per_s", "pkts_rx", "bytes_rx_per_s", "drop_tx", "seq_lost", "lat_count",
            "cpu_busy_ns", "bits_rx_per_s", "loss_pct", "cpu_pct", "cpu_pct_w0"} <= cols
    assert set(run.rows[-1]) == cols            # the rows subscribers get: the same columns
    assert run.frame["pkts_tx"][-1] == run.summary["pkts_tx"]
