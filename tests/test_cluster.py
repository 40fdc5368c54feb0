"""One load from many engines as one run (perfkit.cluster, on ipyparallel): local engines on
loopback here; every load is bounded in time and the engines inherit the network guard."""
import json
import os
import signal
import subprocess
import sys
import time

import polars as pl
import pytest

pytest.importorskip("ipyparallel")

import perfkit  # noqa: E402
from perfkit._sock import SockEngine  # noqa: E402
from perfkit.cluster import Cluster, ClusterError, clusters  # noqa: E402
from perfkit.kinds.http import http_workers  # noqa: E402
from perfkit.errors import EngineError  # noqa: E402
from perfkit.kinds.split import split  # noqa: E402
from perfkit.spec import DpdkFlows, HttpLoad, HttpServe, LocalTest, RemoteTest, SocketReflect  # noqa: E402
from perfkit.stats import INDEX  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    assert os.environ.get("PERFKIT_SANDBOX") == "1"   # the engines inherit it
    c = Cluster.start(n=3, name=f"t{os.getpid()}")
    yield c
    c.down()


@pytest.fixture
def http_server():
    eng = SockEngine(http_workers(HttpServe(port=0, size=200, duration=60)))
    eng.start()
    yield eng.bound_port(0), lambda: {k: eng.snapshot()[0][0][i] for k, i in INDEX.items()}
    eng.stop()
    eng.join()
    eng.close()


def test_split_rules():
    shares = split(HttpLoad(url="http://127.0.0.1:1/", users=10, rate=1000, threads=4), 3)
    assert [s.users for s in shares] == [4, 3, 3] and sum(s.rate.value for s in shares) == pytest.approx(1000)
    assert [s.threads for s in shares] == [4, 3, 3]
    shares = split(LocalTest("udp_bw", rate="30kpps", flows=5, messages=10), 2)
    assert [s.flows for s in shares] == [3, 2] and [s.rate.value for s in shares] == [15000, 15000]
    assert [s.messages for s in shares] == [5, 5]
    with pytest.raises(ValueError, match="users: 2 virtual users cannot split over 3 engines"):
        split(HttpLoad(url="http://127.0.0.1:1/", users=2), 3)
    with pytest.raises(ValueError, match="SocketReflect does not split"):
        split(SocketReflect(), 2)
    shares = split(DpdkFlows(port="net_null0", rate="30kpps", flows=5, ramp_to="60kpps", ramp_time="1s"), 2)
    assert [s.flows for s in shares] == [3, 2] and [s.rate.value for s in shares] == [15000, 15000]
    assert [s.ramp_to.value for s in shares] == [30000, 30000]
    with pytest.raises(ValueError, match="flows: 1 flows cannot split over 2 engines"):
        split(DpdkFlows(port="net_null0"), 2)
    from perfkit.spec import DpdkHttpClient
    shares = split(DpdkHttpClient(cps=1000, cc=11, keepalive="20ms"), 2)
    assert [(s.cps, s.cc) for s in shares] == [(500, 6), (500, 5)]
    with pytest.raises(ValueError, match="cc: 1 connections cannot split over 2 engines"):
        split(DpdkHttpClient(cc=1, keepalive="20ms"), 2)


def test_engines_have_names_and_the_guard(cluster):
    assert cluster.hosts == ["e0", "e1", "e2"]
    assert [e["sandbox"] for e in cluster.engines()] == ["1"] * 3
    assert any(c["name"] == cluster.name and all(e["alive"] for e in c["engines"]) for c in clusters())


def test_http_load_split_over_two_engines(cluster, http_server):
    port, server = http_server
    run = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{port}/x", users=8, duration=1.5), interval=0.5,
                      cluster=cluster.select("e0,e1"))
    s = run.summary
    assert run.error is None and set(run.hosts) == {"e0", "e1"}
    assert s["responses"] > 200 and s["responses"] == s["requests"] == server()["http_req"]
    assert sum(h["responses"] for h in run.hosts.values()) == s["responses"]
    assert all(h["responses"] > 0 and h["finished"] for h in run.hosts.values())
    assert s["sock_open"] == 8 and s["http_err"] == 0
    assert set(run.env["hosts"]) == {"e0", "e1"} and run.env["hosts"]["e0"]["host"] == "e0"


def test_engines_are_asked_once_a_row_while_the_load_runs(cluster, http_server):
    """Each engine answers one snapshot per row (its state comes with it); running() asks
    nothing of its own until just before the shares' planned end: the engines' CPU is the load's."""
    from perfkit.cluster import POLL_AHEAD_S
    port, server = http_server
    run = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{port}/x", users=4, duration=2.5), interval=0.5,
                      cluster=cluster.select("e0,e1"))
    h = run._handle
    assert run.error is None and run.summary["responses"] == server()["http_req"]
    assert h.asked["_e_snapshot"] == 2 * len(run.rows)   # every row, the final one too, from each host
    assert h.first_poll_s is None or h.first_poll_s >= 2.5 - h.start_lag_s - POLL_AHEAD_S
    assert set(h.asked) <= {"_e_snapshot", "_e_state", "_e_call", "_e_close"}


def test_udp_from_three_engines(cluster, tmp_path):
    run = perfkit.run(LocalTest("udp_bw", rate="30kpps", flows=3, duration=1.5), interval=0.5, cluster=cluster)
    s = run.summary
    assert run.error is None and len(run.roles) == 6   # a sender and a receiver on every engine
    assert s["pkts_rx"] == sum(h["pkts_rx"] for h in run.hosts.values()) == s["pkts_tx"] - s["lost"] - s["drop_tx"]
    assert s["pkts_tx"] == pytest.approx(45000, rel=0.1)
    for h in run.hosts.values():
        assert h["pkts_tx"] == pytest.approx(15000, rel=0.1)
    assert run.frame["pkts_rx_per_s"].sum() > 0
    hf = run.host_frame   # each host's rows beside the totals, a host column first
    assert hf.columns[0] == "host" and set(hf["host"]) == {"e0", "e1", "e2"}
    for h, part in hf.group_by("host"):
        assert part["pkts_rx"][-1] == run.hosts[h[0]]["pkts_rx"]
    assert hf.group_by("host").agg(pl.col("pkts_rx").max())["pkts_rx"].sum() == s["pkts_rx"]
    back = perfkit.load(run.save(tmp_path / "cluster.parquet"))   # saved as any run, hosts included
    assert back.hosts == run.hosts and back.env["hosts"] == run.env["hosts"]
    assert back.host_frame.equals(run.host_frame) and back.frame.equals(run.frame)


def test_saved_cluster_runs_list_and_compare_per_host(cluster, tmp_path):
    from perfkit import savefile
    runs = [perfkit.run(LocalTest("udp_bw", rate=r, duration=0.6), interval=0.3, cluster=cluster.select("e0,e1"))
            for r in ("8kpps", "16kpps")]
    store = perfkit.Store(tmp_path / "runs")
    for name, run in zip(("slow", "fast"), runs):
        assert run.error is None
        store.save(run, name=name, tags="cluster")
        back = store.load(name)   # the store's file: per-host rows, summaries and environments round trip
        assert back.host_frame.equals(run.host_frame) and back.hosts == run.hosts
        assert back.env["hosts"] == run.env["hosts"] and back.summary == run.summary
    listed = store.list(text="e1")   # a cluster run is listed with its hosts (and found by one)
    assert sorted(listed["name"]) == ["fast", "slow"]
    assert listed["hosts"].to_list() == [["e0", "e1"]] * 2 and set(listed["cluster"]) == {cluster.name}
    # the per-host rows are sealed by the file's checksum like the rest
    path = store.file("slow")
    raw = bytearray(path.read_bytes())
    i = raw.index(b"arrow_ipc_base64")
    raw[i + 40] = ord("A") if raw[i + 40] != ord("A") else ord("B")
    path.write_bytes(bytes(raw))
    with pytest.raises(savefile.SaveFileError, match="checksum does not match|damaged"):
        perfkit.load(path)
    cmp = perfkit.compare(runs, names=["slow", "fast"], hosts=True)
    t = cmp.table
    assert t["part"].to_list() == ["total", "e0", "e1"] * 2
    assert t["host"].to_list()[1:3] == ["e0", "e1"]
    for name, run in zip(("slow", "fast"), runs):
        rows = t.filter(pl.col("name") == name)
        assert rows["rx_pps"].to_list() == pytest.approx([run.summary["rx_pps"], run.hosts["e0"]["rx_pps"],
                                                          run.hosts["e1"]["rx_pps"]])
    fast = t.filter(pl.col("name") == "fast")
    for part in ("total", "e0", "e1"):   # each part against the first run's same part
        base = runs[0].summary if part == "total" else runs[0].hosts[part]
        now = runs[1].summary if part == "total" else runs[1].hosts[part]
        assert fast.filter(pl.col("part") == part)["rx_pps_ratio"][0] == pytest.approx(
            now["rx_pps"] / base["rx_pps"])
    assert perfkit.compare(runs).table.height == 2 and "part" not in perfkit.compare(runs).table.columns
    assert len(cmp.figure().data[-1].cells.values[0]) == 6   # the figure's table: a line per part


def test_start_skew_under_one_interval(cluster):
    run = perfkit.run(LocalTest("udp_bw", rate="3kpps", duration=0.5), interval=0.5, cluster=cluster)
    skew = run.summary["start_skew_s"]
    assert skew is not None and 0 <= skew < 0.5, skew
    starts = [h["started_at"] for h in run.hosts.values()]
    assert max(starts) - min(starts) == pytest.approx(skew)
    assert run.summary["clock_offset_s"] == {"e0": 0.0, "e1": 0.0, "e2": 0.0}   # one machine, one clock
    print(f"start skew over 3 engines: {skew * 1e3:.3f} ms")


def test_bad_input_is_one_error_before_anything_starts(cluster):
    with pytest.raises(ClusterError, match="no running cluster for profile 'nosuchprofile'"):
        Cluster.connect("nosuchprofile", timeout=1)
    with pytest.raises(ClusterError, match="users: 2 virtual users cannot split over 3 engines"):
        perfkit.Run(HttpLoad(url="http://127.0.0.1:1/", users=2, duration=1), cluster=cluster).start()
    # every engine checks its share where it runs: a lab that is not up there, named by host
    with pytest.raises(ClusterError, match=r"host e0: .*host e1: .*host e2: "):
        perfkit.Run(LocalTest("udp_bw", lab="nolab", duration=1), cluster=cluster).start()
    # a DPDK port on a kernel interface needs every engine in a lab host of its own
    with pytest.raises(ClusterError, match="port: DpdkFlows takes a DPDK port on every engine's own host"):
        perfkit.Run(DpdkFlows(port="net_af_packet0,iface=x", netns="/run/netns/x", flows=3, duration=1),
                    cluster=cluster).start()
    with pytest.raises(ClusterError, match="hosts: e9: not engines of cluster"):
        cluster.select("e9")
    from perfkit import cluster as mod
    assert [cluster.submit(e["id"], mod._e_info).get(5)["shares"] for e in cluster.engines()] == [0, 0, 0]
    assert mod._SHARES == {}


def test_an_engine_killed_mid_run():
    c = Cluster.start(n=3, name=f"k{os.getpid()}")
    try:
        victim = next(e for e in c.engines() if e["host"] == "e1")
        run = perfkit.Run(LocalTest("udp_bw", rate="9kpps", duration=3), interval=0.5, cluster=c)
        killed = []

        def kill_after_one_second(row):
            if row["time_s"] >= 0.9 and not killed:
                killed.append(row["time_s"])
                os.kill(victim["pid"], signal.SIGKILL)
        run.subscribe(kill_after_one_second)
        t0 = time.monotonic()
        with pytest.raises(EngineError, match="host e1: engine"):
            run.run()
        assert time.monotonic() - t0 < 15
        e1 = run.hosts["e1"]
        assert not e1["finished"] and "engine" in e1["error"]
        assert 0 < e1["pkts_tx"] < 3000 * 2.5          # what it sent before it died stands
        for h in ("e0", "e2"):                          # the others ran to the end
            assert run.hosts[h]["finished"] and run.hosts[h]["pkts_tx"] == pytest.approx(9000, rel=0.1)
        assert run.summary["finished_hosts"] == ["e0", "e2"]
        assert run.summary["pkts_tx"] == sum(h["pkts_tx"] for h in run.hosts.values())
    finally:
        c.down()


@pytest.mark.netns
@pytest.mark.nginx
def test_lab_engines_load_nginx_in_h4(tmp_path):
    from _labs import lab_module_or_skip, lab_up_or_skip
    from _nginx import Nginx
    lab = lab_up_or_skip(lab_module_or_skip(), hosts=4)
    try:
        h4 = lab.host("h4")
        c = Cluster.start(lab=lab, hosts="h1,h2,h3", name=f"l{os.getpid()}")
        try:
            nets = {e["host"]: e["netns"] for e in c.engines()}
            assert len(set(nets.values())) == 3   # every engine in its own namespace, its own stack
            with Nginx(tmp_path, host=h4.ipv4, netns=h4.netns) as ngx:
                run = perfkit.run(HttpLoad(url=f"http://{h4.ipv4}:{ngx.port}/", users=30, duration=1.5),
                                  interval=0.5, cluster=c)
            s = run.summary
            assert run.error is None and s["responses"] > 100 and s["http_err"] == 0
            log = ngx.log()
            assert len(log) == s["requests"] == s["responses"]
            ips = {lab.host(h).ipv4 for h in ("h1", "h2", "h3")}
            by_ip = {ip: sum(1 for ln in log if ln[6] == ip) for ip in ips}   # each host's share, by its address
            assert {lab.host(h).ipv4: run.hosts[h]["requests"] for h in ("h1", "h2", "h3")} == by_ip
            assert s["start_skew_s"] < 0.5
        finally:
            c.down()
    finally:
        lab.down()


def test_cli_up_status_down(capsys):
    from perfkit.cli import main
    name = f"c{os.getpid()}"
    assert main(["cluster", "up", "-n", "2", "--name", name]) == 0
    try:
        out = capsys.readouterr().out
        assert f"{name}: up, 2 engines" in out and "e0" in out and "e1" in out
        assert main(["cluster", "status"]) == 0
        assert f"{name}: up, 2 engines" in capsys.readouterr().out
        c = Cluster.connect(name)
        assert c.hosts == ["e0", "e1"]
        c.close()
        assert main(["cluster", "up", "-n", "2", "--name", name]) == 2
        assert f"cluster {name!r} is up already" in capsys.readouterr().err
    finally:
        assert main(["cluster", "down", name]) == 0
    assert f"{name}: down" in capsys.readouterr().out
    assert main(["cluster", "down", name]) == 2
    assert not any(c["name"] == name for c in clusters())


def test_connect_to_a_running_ipcluster(tmp_path, monkeypatch):
    import ipyparallel as ipp
    monkeypatch.chdir(tmp_path)   # its engines start here: a source checkout in the cwd would shadow the install
    ipc = ipp.Cluster(n=2, profile_dir=str(tmp_path), cluster_id="pk", log_level=40)
    ipc.start_cluster_sync()
    try:
        ipc.connect_client_sync().wait_for_engines(2, timeout=60)
        c = Cluster.connect(url_file=str(tmp_path / "security" / "ipcontroller-pk-client.json"))
        c.wait_for_engines(2, 60)
        hosts = c.hosts
        assert len(hosts) == 2 and len(set(hosts)) == 2   # one machine's engines told apart by id
        run = perfkit.run(LocalTest("udp_bw", rate="4kpps", duration=0.5), interval=0.25, cluster=c)
        assert run.error is None and set(run.hosts) == set(hosts)
        assert run.summary["pkts_rx"] == sum(h["pkts_rx"] for h in run.hosts.values()) > 0
        c.close()
    finally:
        ipc.stop_cluster_sync()


def _udp_counters(netns: str) -> dict:
    out = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/snmp"], capture_output=True, text=True,
                         timeout=20).stdout
    head, values = [ln.split()[1:] for ln in out.splitlines() if ln.startswith("Udp:")][:2]
    return dict(zip(head, map(int, values)))


@pytest.mark.netns
def test_lab_engines_send_udp_to_one_sink():
    from _labs import lab_module_or_skip, lab_up_or_skip
    lab = lab_up_or_skip(lab_module_or_skip(), hosts=4)
    try:
        h4 = lab.host("h4")
        srv = lab.popen("h4", [sys.executable, "-P", "-m", "perfkit", "serve", "--bind", h4.ipv4, "--token", "sekrit"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c = Cluster.start(lab=lab, hosts="h1,h2,h3", name=f"u{os.getpid()}")
        try:
            before = _udp_counters(h4.netns)
            run = perfkit.run(RemoteTest("udp_bw", host=h4.ipv4, token="sekrit", size=64, rate="30kpps",
                                         duration=1.5, wait_server=10), interval=0.5, cluster=c)
            after = _udp_counters(h4.netns)
        finally:
            c.down()
            srv.terminate()
        s = run.summary
        assert run.error is None and run.roles == ["udp_send", "remote_udp_recv"] * 3
        # what the three engines' shares received, summed, is what h4's kernel delivered to its sockets
        assert s["pkts_rx"] == sum(h["pkts_rx"] for h in run.hosts.values()) == after["InDatagrams"] - before["InDatagrams"]
        assert after["RcvbufErrors"] == before["RcvbufErrors"] and after["NoPorts"] == before["NoPorts"]
        assert s["pkts_tx"] == pytest.approx(45000, rel=0.1)
        assert all(h["pkts_tx"] == pytest.approx(15000, rel=0.1) for h in run.hosts.values())
    finally:
        lab.down()


@pytest.mark.dpdk
def test_dpdk_flows_on_net_null_from_three_local_engines(cluster):
    """Every engine its own EAL (its own process) and its own net_null port: the shares add up."""
    run = perfkit.run(DpdkFlows(port="net_null0,no-rx=1", rate="30kpps", flows=3, duration=1), interval=0.5,
                      cluster=cluster)
    s = run.summary
    assert run.error is None and set(run.hosts) == {"e0", "e1", "e2"}
    assert s["pkts_tx"] == sum(h["pkts_tx"] for h in run.hosts.values())
    assert all(h["pkts_tx"] == pytest.approx(10000, rel=0.1) and h["finished"] for h in run.hosts.values())


@pytest.mark.dpdk
def test_dpdk_engines_get_their_own_eal_and_a_host_without_dpdk_is_named(monkeypatch):
    """The caller's EAL options go to every engine, the worker CPUs split among the engines of
    one machine; each EAL has its own file prefix. An engine where DPDK cannot load: one error
    naming that host, before anything starts."""
    from perfkit.engines import dpdk
    eal_options = dpdk.eal_options   # the engines' own, asked by reference (not the stand-in below)
    c = Cluster.start(n=2, name=f"cl3e{os.getpid() % 10000}")
    try:
        monkeypatch.setattr(dpdk, "eal_options", lambda: dpdk.EalOptions(memory_mb=256, worker_cpus=(0, 1)))
        run = perfkit.run(DpdkFlows(port="net_null0,no-rx=1", rate="20kpps", flows=2, duration=0.5), interval=0.25,
                          cluster=c)
        assert run.error is None and run.summary["pkts_tx"] == sum(h["pkts_tx"] for h in run.hosts.values()) > 0
        args = {h: run.env["hosts"][h]["eal_args"] for h in ("e0", "e1")}
        pids = {e["host"]: e["pid"] for e in c.engines()}
        for h, cpu in (("e0", 0), ("e1", 1)):
            assert f"--file-prefix=perfkit{pids[h]}" in args[h] and "-m" in args[h] and "256" in args[h]
            assert c.submit(c.engines()[cpu]["id"], eal_options).get(5).worker_cpus == (cpu,)
        monkeypatch.setattr(dpdk, "eal_options", lambda: dpdk.EalOptions(worker_cpus=(0,)))
        with pytest.raises(ClusterError, match=r"worker_cpus: 1 CPUs \(0\) cannot give each of the 2 engines on one "
                                               r"machine \(e0, e1\) its own"):
            perfkit.Run(DpdkFlows(port="net_null0", flows=2, duration=0.5), cluster=c).start()

        hide = ("import sys, perfkit\nsys.modules['perfkit._dpdk'] = None\n"   # in engine e1: the DPDK extension
                "if hasattr(perfkit, '_dpdk'): del perfkit._dpdk\n")            # cannot load there any more
        c.submit(c.engines()[1]["id"], exec, hide, {}).get(5)
        monkeypatch.setattr(dpdk, "eal_options", lambda: dpdk.EalOptions(memory_mb=256, worker_cpus=(0, 1)))
        with pytest.raises(ClusterError, match=r"^host e1: engine dpdk: DPDK is not available on this host: not built"):
            perfkit.Run(DpdkFlows(port="net_null0", flows=2, duration=0.5), cluster=c).start()
        from perfkit import cluster as mod
        assert [c.submit(e["id"], mod._e_info).get(5)["shares"] for e in c.engines()] == [0, 0]
    finally:
        c.down()


@pytest.mark.netns
@pytest.mark.dpdk
def test_dpdk_flows_from_engines_in_two_lab_hosts_to_a_sink_in_a_third(capsys):
    """perfkit flows --cluster: each engine's DPDK port on its own host's veth (af_packet), frames to
    h3's kernel, whose UDP counters see every frame the two engines sent, no more, no less."""
    from _labs import lab_module_or_skip, lab_up_or_skip
    import ipaddress
    from perfkit.cli import main
    lab = lab_up_or_skip(lab_module_or_skip(), hosts=3)
    try:
        h1, h2, h3 = lab.hosts
        c = Cluster.start(lab=lab, hosts="h1,h2", name=f"d{os.getpid()}")
        try:
            mine = str(ipaddress.ip_network(f"{h1.ipv4}/24", strict=False).network_address + 200)
            before = _udp_counters(h3.netns)
            assert main(["flows", "--port", f"net_af_packet0,iface={h1.ifname}", "--netns", h1.netns_path,
                         "--ip", mine, "--peer-ip", h3.ipv4, "--rate", "20kpps", "--flows", "4", "--size", "128",
                         "-t", "1.5s", "--interval", "0.5s", "--cluster", c.name, "--json"]) == 0
            after = _udp_counters(h3.netns)
        finally:
            c.down()
        out = capsys.readouterr().out
        summary = json.loads(out.strip().splitlines()[-1])["summary"]
        hosts = summary["hosts"]
        assert set(hosts) == {"h1", "h2"} and all(h["finished"] for h in hosts.values())
        assert all(h["pkts_tx"] == pytest.approx(15000, rel=0.1) for h in hosts.values())
        # no socket listens on h3's port: every datagram the kernel took is a NoPorts, none with a bad sum
        got = (after["NoPorts"] - before["NoPorts"]) + (after["InDatagrams"] - before["InDatagrams"])
        assert got == summary["pkts_tx"] == sum(h["pkts_tx"] for h in hosts.values())
        assert after["InCsumErrors"] == before["InCsumErrors"] and after["InErrors"] == before["InErrors"]
    finally:
        lab.down()


@pytest.mark.netns
@pytest.mark.dpdk
@pytest.mark.nginx
@pytest.mark.parametrize("how", ["api", "cli"])
def test_dpdk_http_clients_in_two_lab_hosts_against_nginx_in_a_third(tmp_path, how, capsys):
    """dperf's client over a cluster (perfkit.run, or perfkit dperf -c client.conf --cluster): each
    engine's DPDK port (af_packet) on its own host's veth, its own address; nginx in h3 logged every
    request the two engines' shares counted, each from its host's address."""
    from _labs import ethtool_or_skip, lab_module_or_skip, lab_up_or_skip
    from _nginx import Nginx
    import ipaddress
    from perfkit.cli import main
    from perfkit.spec import DpdkHttpClient
    lab = lab_up_or_skip(lab_module_or_skip(), hosts=3)
    try:
        h1, h2, h3 = lab.hosts
        ethtool_or_skip(h3, "tx", "off")   # af_packet hands DPDK what the kernel sent: whole checksums
        c = Cluster.start(lab=lab, hosts="h1,h2", name=f"w{os.getpid()}")
        try:
            mine = str(ipaddress.ip_network(f"{h1.ipv4}/24", strict=False).network_address + 200)
            port = f"net_af_packet0,iface={h1.ifname}"
            with Nginx(tmp_path, host=h3.ipv4, netns=h3.netns) as ngx:
                if how == "api":
                    run = perfkit.run(DpdkHttpClient(port=port, netns=h1.netns_path, ip=mine, clients=((mine, 1),),
                                                     server=h3.ipv4, listen=ngx.port, http_host="lab", cps=400,
                                                     duration=1.5), interval=0.5, cluster=c)
                else:
                    conf = tmp_path / "client.conf"
                    conf.write_text(f"mode client\nduration 1.5s\ncps 400\nwait 0\nport {port} {mine} {h3.ipv4}\n"
                                    f"client {mine} 1\nserver {h3.ipv4} 1\nlisten {ngx.port} 1\nhttp_host lab\n")
                    assert main(["dperf", "-c", str(conf), "--netns", h1.netns_path, "--cluster", c.name,
                                 "--interval", "0.5s", "--json"]) == 0
                time.sleep(0.3)
                ngx.stop()
                log = ngx.log()
        finally:
            c.down()
        by_ip = {ip: sum(1 for ln in log if ln[6] == ip) for ip in {ln[6] for ln in log}}
        share = ipaddress.ip_address(mine)   # h1's port at .200, h2's at .201: each host's share by its address
        if how == "cli":
            lines = [json.loads(ln) for ln in capsys.readouterr().out.strip().splitlines()]
            summary, last = lines[-1]["summary"], lines[-2]
            assert set(summary["hosts"]) == {"h1", "h2"} and summary["finished_hosts"] == ["h1", "h2"]
            # dperf's slow_start is 10 s at least: 1.5 s of its ramp opens a few connections per host
            assert last["http_2xx"] == last["sock_open"] == len(log) > 4 and last["sock_error"] == 0
            assert set(by_ip) == {str(share), str(share + 1)} and all(n > 0 for n in by_ip.values())
            return
        assert run.error is None and set(run.hosts) == {"h1", "h2"}, run.error
        last = run.rows[-1]   # a DPDK TCP run's counts are its rows' totals (dperf's layout)
        per_host = {h: part.row(part.height - 1, named=True)
                    for (h,), part in run.host_frame.group_by("host", maintain_order=True)}
        assert last["http_2xx"] == sum(r["http_2xx"] for r in per_host.values()) == len(log) > 300
        assert last["sock_error"] == 0 and last["http_err"] == 0
        assert last["sock_open"] == last["sock_close"] == last["http_2xx"]
        assert by_ip == {str(share): per_host["h1"]["http_2xx"], str(share + 1): per_host["h2"]["http_2xx"]}
    finally:
        lab.down()
