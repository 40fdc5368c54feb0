"""bench/run.py's pure parts: the ratio interval and rows, which vs_qperf tests this kernel runs."""
import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("bench_run", Path(__file__).parent.parent / "bench" / "run.py")
bench = sys.modules["bench_run"] = importlib.util.module_from_spec(_spec)   # dataclasses look it up
_spec.loader.exec_module(bench)


def test_runs_that_overlap_give_an_interval_around_one():
    pk = [25.1, 24.6, 26.1, 25.4, 25.3, 26.1, 24.9, 25.8, 25.0]
    qp = [25.4, 24.6, 27.5, 25.3, 26.4, 25.6, 24.8, 25.9, 25.2]
    lo, hi = bench.ratio_interval(pk, qp)
    assert lo < 1.0 < hi and hi - lo < 0.1


def test_runs_apart_give_an_interval_that_excludes_one():
    lo, hi = bench.ratio_interval([1.20, 1.25, 1.22, 1.19, 1.24], [1.00, 1.02, 0.99, 1.01, 1.03])
    assert 1.1 < lo <= hi < 1.3


def test_too_few_runs_or_failed_runs_give_no_interval():
    assert bench.ratio_interval([1.0, None, 1.1], [1.0, 1.0, 1.0]) is None
    assert bench.ratio_interval([1.0, 1.1], [1.0, 1.0]) is None


def test_a_row_shows_the_ratio_with_its_interval():
    row = bench.ratio_row("udp_lat 64 B", "mean RTT/2", 25.0, 25.5, "qperf", bench.fmt_us, 1.0, False,
                          runs=([25.0, 24.0, 26.0], [25.5, 25.0, 26.5]))
    assert row.status == "pass"
    assert row.ratio.startswith("0.98 (") and row.ratio.endswith(")"), row.ratio
    lo, hi = (float(x) for x in row.ratio[6:-1].split("-"))
    assert lo <= 0.98 <= hi
    assert bench.ratio_row("x", "m", 1.0, 2.0, "qperf", bench.fmt_us, 1.0, False).ratio == "0.50"


@pytest.mark.parametrize("bad", [[], [None, None, None]])
def test_no_runs_no_interval(bad):
    assert bench.ratio_interval(bad, [1.0, 1.0, 1.0]) is None


def test_vs_pin_takes_two_cpus_of_this_process_or_says_which_there_are(capsys):
    import os
    lacking = max(os.sched_getaffinity(0)) + 1
    for bad in (f"0,{lacking}", "0", "a,b", "0,1,0"):
        with pytest.raises(SystemExit) as e:
            bench.main(["--only", "vs_qperf", "--vs-pin", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"--vs-pin: {bad!r} is not two CPUs this process may use" in err, err


def test_pinned_two_hosts_give_both_tools_qperfs_affinity_options():
    th = bench.TwoHosts("loopback", bench.Ports(47900))
    assert th.pin_args() == []
    th.pin = (0, 1)
    assert th.pin_args() == ["-lca", "0", "-rca", "1"]
    assert th.pin_args(qperf=True) == ["-lca", "1", "-rca", "2"]   # qperf 0.4.11 counts from 1 (0: any)


@pytest.mark.tools("qperf")
@pytest.mark.two_cpus
def test_qperf_puts_its_ends_where_the_bench_pins_perfkits():
    import os
    th = bench.TwoHosts("loopback", bench.Ports(47900))
    th.pin = tuple(sorted(os.sched_getaffinity(0))[:2][::-1])   # client on the second CPU, server on the first
    bench.check_qperf_pins(th, th.qp_port)
    th.pin = (th.pin[0], max(os.sched_getaffinity(0)) + 1)       # qperf cannot pin there: the check says so
    with pytest.raises(bench.BenchError, match="put its client on CPUs"):
        bench.check_qperf_pins(th, th.qp_port)


def test_paired_reps_count_who_was_ahead_and_how_sure_that_is():
    # perfkit ahead in every one of 9 bandwidth reps: a sign test p of 2 / 2**9
    ahead, n, per_rep, p = bench.paired_tally([11, 12, 13, 11, 12, 13, 11, 12, 13],
                                              [10, 11, 12, 10, 11, 12, 10, 11, 12], True)
    assert (ahead, n) == (9, 9) and p == pytest.approx(2 / 512) and per_rep > 1.0
    # the same numbers as latencies: lower is better, so qperf was ahead in every rep
    ahead, n, per_rep, p = bench.paired_tally([11, 12, 13, 11, 12, 13, 11, 12, 13],
                                              [10, 11, 12, 10, 11, 12, 10, 11, 12], False)
    assert (ahead, n) == (0, 9) and p == pytest.approx(2 / 512)
    # an even split says nothing; a failed run drops its pair, a tie counts for neither
    ahead, n, per_rep, p = bench.paired_tally([1.1, 0.9, 1.1, 0.9, None, 1.0], [1.0] * 6, True)
    assert (ahead, n, p) == (2, 4, 1.0) and per_rep == 1.0
    assert bench.paired_tally([1.0, None, 1.1], [1.0, 1.0, None], True) is None


def test_the_bench_waits_for_a_peer_client_without_waking():
    """A parent polling every 10 ms made qperf's tcp_lat 6% faster on this machine: the
    bench must sleep until its client exits, and still give its output, CPU and deadline."""
    import resource
    th = bench.TwoHosts("loopback", bench.Ports(47900))
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    out, cpu = th.client(["sh", "-c", "echo hello; sleep 1"], timeout=10)
    wakes = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before
    assert out == "hello\n" and 0 <= cpu < 0.5
    assert wakes < 10, f"the bench woke {wakes} times while its client ran for 1 s"
    with pytest.raises(bench.BenchError, match="no result within 0.3 s"):
        th.client(["sleep", "5"], timeout=0.3)


def test_vs_qperf_skips_the_sctp_rows_with_a_reason_where_the_kernel_has_no_sctp():
    from perfkit.engines.remote import sctp_unavailable as _sctp_available
    tests, skipped = bench.vs_tests_here(bench.VS_TESTS)
    why = _sctp_available()
    if why is None:
        assert tests == bench.VS_TESTS and skipped == []
    else:
        assert tests == ("tcp_bw", "tcp_lat", "udp_bw", "udp_lat")
        assert [(r.name, r.status) for r in skipped] == [("sctp_bw (all sizes and paths)", "skipped"),
                                                          ("sctp_lat (all sizes and paths)", "skipped")]
        assert all(why in r.peer for r in skipped)
    assert bench.vs_tests_here(("tcp_lat",)) == (("tcp_lat",), [])
