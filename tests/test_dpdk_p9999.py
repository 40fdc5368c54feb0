"""p99.99 of the DPDK engine's latencies (issue 5: "latency histogram (p50...p99.99, max)"):
in the summary of the load and of the latency probes, and on the CLI."""
import subprocess
import sys

import pytest

import perfkit
from perfkit.spec import DpdkFlows

pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                                            "pkg-config, then reinstall perfkit)")


def test_p9999_of_the_load_and_of_the_probes(eal):
    run = perfkit.run(DpdkFlows(port="ring:pq:0", peer="ring:pq:1", rate="40kpps", flows=4, duration="0.5s",
                                probe_rate="2kpps"))
    s = run.summary
    assert s["lat_count"] == s["pkts_rx"] - s["probe_rx"] == 20_000   # the load's; the probes apart
    assert s["lat_p999_us"] <= s["lat_p9999_us"] <= s["lat_max_us"]
    want = min(max(run.histogram.percentile(0.9999), s["lat_min_us"] * 1e3), s["lat_max_us"] * 1e3) / 1e3
    assert s["lat_p9999_us"] == pytest.approx(want)          # the run's own histogram, clamped
    assert s["probe_rx"] > 100   # 2kpps for 0.5 s, fewer when the generator was descheduled
    assert s["probe_lat_p999_us"] <= s["probe_lat_p9999_us"] <= s["probe_lat_max_us"]


def test_the_cli_prints_p9999():
    out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "flows", "--port", "ring:pr:0", "--peer", "ring:pr:1",
                          "--rate", "10kpps", "-t", "0.3s"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    line = [ln for ln in out.stdout.splitlines() if "lat p99.99" in ln]
    assert len(line) == 1 and line[0].rstrip().endswith(" us")
