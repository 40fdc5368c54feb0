"""Host metrics beside every run (perfkit.hostmetrics): the host CPU columns agree with
/proc/stat read independently around the run, the interface columns with the kernel's own
counters and with what the engine sent, a lab run has both link ends' columns, and a watched
server's CPU agrees with its /proc/PID/stat. Identities that hold on a busy machine: the run's
window lies inside the independent one, so its counts are bounded by the outer deltas."""
import os
import re
import time

import polars  # noqa: F401 (loaded before the window opens: its import is not the run's time)
import pytest

import perfkit
from perfkit import LocalTest, hostmetrics
from perfkit.kinds.http import HttpLoad
from perfkit.report import summary_text

from _nginx import Nginx, needs_nginx

FIELDS = hostmetrics.CPU_FIELDS


def _jiffies():
    with open("/proc/stat") as f:
        return hostmetrics.cpu_times(f.read())["host"]


def _lo(name):
    with open(f"/sys/class/net/lo/statistics/{name}") as f:
        return int(f.read())


def _total(run, col):
    return sum(v for v in run.frame[col].to_list() if v is not None)


def test_loopback_run_host_cpu_matches_proc_stat_and_lo_counts_match_sysfs():
    before_j, before_lo = _jiffies(), {n: _lo(n) for n in ("tx_packets", "rx_packets", "tx_bytes")}
    t0 = time.monotonic()
    run = perfkit.run(LocalTest("udp_bw", size=64, gso=1, rate="20kpps", duration="2s"), interval=0.5)
    window = time.monotonic() - t0
    after_j, after_lo = _jiffies(), {n: _lo(n) for n in ("tx_packets", "rx_packets", "tx_bytes")}
    f, s = run.frame, run.summary
    assert run.error is None and len(f) >= 4
    assert run.env["host_metrics"]["interfaces"] == {"lo": "lo"}
    assert all(hostmetrics.label_of(c) for c in run.host_schema)   # each host column says what it shows

    # every interval's six shares add up to the whole of the CPUs' time
    for row in f.iter_rows(named=True):
        shares = [row[f"host_cpu_{x}_pct"] for x in FIELDS]
        if None not in shares:
            assert sum(shares) == pytest.approx(100.0, abs=1e-6)
        if hostmetrics.PER_CPU_MAX >= os.cpu_count() and row["host_cpu0_idle_pct"] is not None:
            assert sum(row[f"host_cpu0_{x}_pct"] for x in FIELDS) == pytest.approx(100.0, abs=1e-6)

    # the run's interval-weighted shares against /proc/stat over the outer window: they can
    # differ by at most the outer window's share outside the run (+3 points: ticks at both ends)
    d = [a - b for a, b in zip(after_j, before_j)]
    outer = {x: 100.0 * v / sum(d) for x, v in zip(FIELDS, d)}
    inside = sum(f["interval_s"])
    outside_pct = 100.0 * max(0.0, window - inside) / window
    assert outside_pct < 30, (window, inside)
    for x in FIELDS:
        assert abs(s[f"host_cpu_{x}_pct_mean"] - outer[x]) <= outside_pct + 3, (x, s, outer, outside_pct)
        assert s[f"host_cpu_{x}_pct_max"] >= s[f"host_cpu_{x}_pct_mean"] - 1e-9
    busy = ("user", "system", "softirq")
    assert abs(sum(s[f"host_cpu_{x}_pct_mean"] for x in busy) - sum(outer[x] for x in busy)) <= outside_pct + 3

    # lo: what the engine sent <= what lo counted in the run's intervals <= the outer delta
    # (other processes share lo: their packets are in both, never only in the run's)
    assert s["msgs_sent"] > 10_000
    assert s["msgs_sent"] <= _total(run, "if_lo_tx_pkts") <= after_lo["tx_packets"] - before_lo["tx_packets"]
    assert s["pkts_rx"] <= _total(run, "if_lo_rx_pkts") <= after_lo["rx_packets"] - before_lo["rx_packets"]
    lo_bytes = after_lo["tx_bytes"] - before_lo["tx_bytes"]
    assert s["bytes_tx"] + 28 * s["msgs_sent"] <= _total(run, "if_lo_tx_bytes") <= lo_bytes   # + IP and UDP headers
    assert s["if_lo_tx_pkts"] == _total(run, "if_lo_tx_pkts")
    assert s["if_lo_tx_pps"] == pytest.approx(s["if_lo_tx_pkts"] / inside)
    assert "host" in summary_text(s) and "lo pkts in" in summary_text(s)

    # saved and loaded, the host columns come back with the rest
    back = perfkit.load(run.save(f"/tmp/pk-hostmetrics-{os.getpid()}.parquet"))
    os.unlink(f"/tmp/pk-hostmetrics-{os.getpid()}.parquet")
    assert back.frame.select(list(run.host_schema)).equals(f.select(list(run.host_schema)))


def _cpu_s(pids):
    return sum(sum(hostmetrics.proc_cpu(p)) for p in pids) / hostmetrics.HZ


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


@needs_nginx
@pytest.mark.root
@pytest.mark.netns
def test_lab_http_run_has_both_link_ends_and_the_servers_cpu(lab, tmp_path):
    h1, h2 = lab.hosts
    # a DPDK kernel port's interface, named in its plan, is followed in its namespace
    port_plan = {"ports": [{"dev": f"net_af_packet0,iface={h1.ifname}", "netns": h1.netns_path}]}
    assert hostmetrics.interfaces(object(), port_plan) == [hostmetrics.Iface("h1", h1.ifname, h1.netns_path)]
    # a server on 0.0.0.0 in h2 alone: every interface of h2's namespace, read from inside it
    wild = hostmetrics.interfaces(object(), {"workers": [{"local": ("0.0.0.0", 80), "netns": h2.netns_path}]})
    assert wild[0] == hostmetrics.Iface("h2_lo", "lo", h2.netns_path)
    assert hostmetrics.Iface("h2", h2.ifname, h2.netns_path) in wild

    with Nginx(tmp_path, host=h2.ipv4, netns=h2.netns) as ngx:
        server = [ngx.proc.pid, *_children(ngx.proc.pid)]   # nginx's master and its worker
        before = _cpu_s(server)
        run = perfkit.run(HttpLoad(url=f"http://{h2.ipv4}:{ngx.port}/", users=4, duration=1.5, lab=lab.name),
                          interval=0.5, watch={"server": server})
        after = _cpu_s(server)
        answered = len(ngx.log())
    s = run.summary
    assert run.error is None and s["responses"] > 100 and answered >= s["responses"]
    assert run.env["host_metrics"]["interfaces"] == {"h1": f"{h1.ifname} in {h1.netns}",
                                                     "h2": f"{h2.ifname} in {h2.netns}"}
    cols = set(run.frame.columns)
    for end in ("h1", "h2"):
        assert {f"if_{end}_{x}" for x in hostmetrics.IF_FIELDS} <= cols
    # every answered request reached h2 as a packet at least, every response h1
    assert _total(run, "if_h2_rx_pkts") >= s["responses"]
    assert _total(run, "if_h1_rx_pkts") >= s["responses"]
    assert _total(run, "if_h1_rx_bytes") >= s["bytes_rx"] > 0
    # the server's CPU in the run's intervals: some, and no more than /proc says around them
    used = sum((r["proc_server_user_pct"] + r["proc_server_system_pct"]) / 100 * r["interval_s"]
               for r in run.frame.iter_rows(named=True))
    assert 0 < used <= after - before + 2 / hostmetrics.HZ, (used, after - before)
    assert s["proc_server_user_pct_mean"] is not None and s["proc_server_system_pct_max"] >= 0


@pytest.mark.parametrize("watch, message", [
    ({"server": "12"}, "watch: server: ['12'] is not a process id"),
    ({"a b": 12}, "watch: name 'a b' is not"),
    ([12], "watch: [12] is not a dict"),
    ({"server": []}, "watch: server: [] is not"),
])
def test_a_bad_watch_is_one_line_before_anything_starts(watch, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        perfkit.Run(LocalTest("udp_bw", duration="1s"), watch=watch)


@pytest.mark.dpdk
def test_a_dpdk_run_has_the_host_cpu_columns_and_no_interface_of_its_own(eal):
    """The DPDK engine's ring ports cross no kernel interface: host CPU columns, no if_ ones."""
    from perfkit.kinds.dpdk_udp import DpdkFlows
    run = perfkit.run(DpdkFlows(port="ring:hm:0", peer="ring:hm:1", duration="0.6s", rate="50kpps"),
                      interval=0.25, engine="dpdk")
    assert run.error is None and run.summary["pkts_rx"] > 0
    assert run.env["host_metrics"]["interfaces"] == {}
    assert not [c for c in run.frame.columns if c.startswith("if_")]
    for row in run.frame.iter_rows(named=True):
        shares = [row[f"host_cpu_{x}_pct"] for x in FIELDS]
        assert None in shares or sum(shares) == pytest.approx(100.0, abs=1e-6)
    assert run.summary["host_cpu_idle_pct_mean"] is not None


# ------------------------------------------------------------------ --watch, lab hosts' cgroups, ladders
import subprocess  # noqa: E402
import sys  # noqa: E402

# burns 0.2 s of CPU each time a byte comes in, then says so; idle (blocked) otherwise; bounded
BURNER = ("import signal, sys, time\nsignal.alarm(60)\nsys.stdout.write('r'); sys.stdout.flush()\n"
          "while sys.stdin.buffer.read(1):\n    t = time.process_time()\n"
          "    while time.process_time() - t < 0.2: pass\n    sys.stdout.write('d'); sys.stdout.flush()\n")


def _burner():
    p = subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout.read(1) == b"r"   # its start-up CPU is spent before anyone reads it
    return p


def test_a_watched_process_cpu_per_interval_equals_its_proc_stat_delta():
    p = _burner()
    try:
        before = hostmetrics.proc_cpu(p.pid)   # read here, independently of the run
        run = perfkit.Run(LocalTest("udp_bw", size=64, rate="1kpps", duration="3s"), interval=0.5,
                          watch={"server": p.pid}).start()   # the sampler's baseline is read in start()
        p.stdin.write(b"g")
        p.stdin.flush()
        assert p.stdout.read(1) == b"d"
        burned_inside = not run.done   # the whole burn inside the run's window
        run.wait()
        after = hostmetrics.proc_cpu(p.pid)
    finally:
        p.kill()
        p.wait()
    f = run.frame
    for row in f.iter_rows(named=True):   # cpu = user + system in every interval
        assert row["proc_server_cpu_pct"] == pytest.approx(row["proc_server_user_pct"] + row["proc_server_system_pct"])
    used = sum(r["proc_server_cpu_pct"] / 100 * r["interval_s"] for r in f.iter_rows(named=True))
    delta = (sum(after) - sum(before)) / hostmetrics.HZ
    assert delta >= 0.2 - 2 / hostmetrics.HZ
    # the rows hold what /proc/PID/stat counted (to a tick: row and sampler times differ by µs)
    assert used <= delta + 1 / hostmetrics.HZ, (used, delta)
    if burned_inside:
        assert used >= delta - 1 / hostmetrics.HZ, (used, delta)
    assert "server" in summary_text(run.summary) and run.summary["proc_server_cpu_pct_max"] > 0


def test_watch_on_the_command_line_and_in_a_ladder_and_compare_pivots_it():
    p = _burner()
    try:
        r = subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", "http://127.0.0.1:9/", "-t", "1s",
                            "--watch", "server=0"], text=True, capture_output=True, timeout=30)
        assert r.returncode == 2 and r.stderr == "perfkit: watch: 'server=0': no process 0 here\n", r
        r = subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", "http://127.0.0.1:9/", "-t", "1s",
                            "--watch", "server"], text=True, capture_output=True, timeout=30)
        assert r.returncode == 2 and "is not NAME=PID" in r.stderr, r
        # a ladder's steps each record it (nothing listens on port 9: the steps fail fast, the columns stay)
        lad = perfkit.ladder(HttpLoad(url="http://127.0.0.1:9/", duration="0.5s"), users="1,2",
                             watch={"server": p.pid})
        assert all("proc_server_cpu_pct" in r.frame.columns for r in lad.runs)
        assert "proc_server_cpu_pct_mean" in lad.table.columns
    finally:
        p.kill()
        p.wait()
    # compare: server and lab host CPU pivoted against users where the steps have them
    import polars as pl
    virtual = pl.DataFrame({"users": [1, 2], "tps": [10.0, 20.0], "proc_server_cpu_pct_mean": [5.0, 9.0],
                            "lab_h2_cpu_pct_mean": [6.0, 11.0]})
    physical = pl.DataFrame({"users": [1, 2], "tps": [12.0, 25.0], "proc_server_cpu_pct_mean": [4.0, 7.0]})
    cmp = perfkit.compare({"physical": physical, "virtual": virtual})
    assert "server_cpu_pct" in cmp.metrics and "lab_host_cpu_pct" in cmp.metrics
    assert cmp.pivot("server_cpu_pct").to_dicts() == [{"users": 1, "physical": 4.0, "virtual": 5.0},
                                                       {"users": 2, "physical": 7.0, "virtual": 9.0}]
    assert cmp.pivot("lab_host_cpu_pct")["physical"].to_list() == [None, None]
    assert "server_cpu_pct" not in perfkit.compare([physical.drop("proc_server_cpu_pct_mean")]).metrics
