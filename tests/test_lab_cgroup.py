"""VM-like lab hosts (perfkit.cgroups through perfkit.lab): a CPU quota measured on a busy loop,
changed live by perfkit lab impair, a CPU set that pins, cgroups gone at down, http-serve
inside a limited host, and bad values refused in one line (exit 2) before anything starts.

Traffic stays inside the lab's namespaces (198.18.0.0/15). The busy loops end by themselves
(timeout) and with the lab."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import perfkit
from perfkit import cgroups, cli
from perfkit import lab as pklab

CPU_TOLERANCE = 3.0   # percentage points of one CPU
BUSY_LOOP = "import signal\nsignal.alarm(20)  # bounded: SIGALRM ends it\nwhile 1: pass"


def _perfkit(*args, timeout=60):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


def _lab(**kw):
    from _labs import lab_module_or_skip
    mod = lab_module_or_skip()
    try:
        cgroups.Cgroups.detect()
    except cgroups.CgroupError as exc:
        pytest.skip(str(exc))
    return mod.Lab(hosts=2, name=f"cg{os.getpid() % 100000}", **kw).up()


def _dirs(paths: dict) -> list[str]:
    return [paths["dir"]] if paths["v"] == 2 else list(paths["dirs"].values())


def _shield(paths: dict) -> None:
    """Weigh the host's cgroup chain 100x a plain process, so that other work on this busy
    machine cannot starve the loop below its quota: the quota, not the load, is under test."""
    d = paths["dir"] if paths["v"] == 2 else paths["dirs"]["cpu"]
    for level in (d, os.path.dirname(d), os.path.dirname(os.path.dirname(d))):
        name, value = ("cpu.weight", "10000") if paths["v"] == 2 else ("cpu.shares", "102400")
        with open(f"{level}/{name}", "w") as f:
            f.write(value)


def _ticks(pid: int) -> float:
    """utime + stime of pid in seconds (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def _measure(lab, pid: int, seconds: float = 2.0) -> tuple[float, float]:
    """(cgroup's usage, the process's own CPU time) over seconds, in percent of one CPU."""
    c0, p0, t0 = lab.cpu_usage("h2"), _ticks(pid), time.monotonic()
    time.sleep(seconds)
    c1, p1, t1 = lab.cpu_usage("h2"), _ticks(pid), time.monotonic()
    return 100 * (c1 - c0) / (t1 - t0), 100 * (p1 - p0) / (t1 - t0)


@pytest.mark.root
@pytest.mark.netns
def test_quota_measured_then_changed_live_then_gone_at_down():
    lab = _lab(cpu_quota="h2=25%")
    try:
        paths = lab.cgroup("h2")
        assert lab.cgroup("h1") is None                      # only the host given a limit
        _shield(paths)
        loop = lab.popen("h2", [sys.executable, "-c", BUSY_LOOP])
        time.sleep(0.3)                                       # past the interpreter's start
        with open(f"/proc/{loop.pid}/cgroup") as f:
            assert any(line.rstrip().endswith(f"/perfkit/{lab.name}/h2") for line in f)
        group, own = _measure(lab, loop.pid)
        assert abs(group - 25) <= CPU_TOLERANCE, (group, own)
        assert abs(own - 25) <= CPU_TOLERANCE, (group, own)

        # perfkit lab impair from another process: the running loop gets the new quota
        r = _perfkit("lab", "impair", lab.name, "--cpu-quota", "h2=50%")
        assert r.returncode == 0, r.stderr
        assert "cpu quota 50%" in r.stdout
        group, own = _measure(lab, loop.pid)
        assert abs(group - 50) <= CPU_TOLERANCE, (group, own)
        assert abs(own - 50) <= CPU_TOLERANCE, (group, own)
        assert "cpu quota 50%" in _perfkit("lab", "status").stdout
    finally:
        lab.down()
    for d in _dirs(paths):
        assert not os.path.exists(d), d                      # the host's cgroup is gone
        assert not os.path.exists(os.path.dirname(d)), d     # and its lab's
    assert loop.poll() is not None                           # the loop ended with the lab


@pytest.mark.root
@pytest.mark.netns
def test_cpus_pin_running_and_new_processes_and_memory_is_limited():
    cpu = cgroups.available_cpus()[-1]
    lab = _lab()
    try:
        sleeper = lab.popen("h2", ["sleep", "20"])
        lab.limit("h2", cpus=str(cpu), mem="64M")             # set live: the sleeper moves in
        with open(f"/proc/{sleeper.pid}/status") as f:
            assert f"Cpus_allowed_list:\t{cpu}\n" in f.read()
        # a command started through the wrapper: in the host's namespace and cgroup, pinned
        r = _perfkit("lab", "exec", lab.name, "h2", "--", "sh", "-c",
                     "grep Cpus_allowed_list /proc/self/status; cat /sys/class/net/*/address")
        assert r.returncode == 0, r.stderr
        assert f"Cpus_allowed_list:\t{cpu}" in r.stdout
        assert lab.hosts[1].mac in r.stdout                  # h2's own /sys
        paths = lab.cgroup("h2")
        mem_dir = paths["dir"] if paths["v"] == 2 else paths["dirs"]["memory"]
        name = "memory.max" if paths["v"] == 2 else "memory.limit_in_bytes"
        with open(f"{mem_dir}/{name}") as f:
            assert int(f.read()) == 64 << 20
        # the limit holds: 16 MiB written fits, 200 MiB gets the host's process OOM-killed
        with open("/proc/swaps") as f:
            swap = len(f.read().splitlines()) > 1   # with swap, a v1 host pages out instead
        if not swap:
            fits = lab.popen("h2", [sys.executable, "-c", "b = b'x' * (16 << 20)"])
            big = lab.popen("h2", [sys.executable, "-c", "b = b'x' * (200 << 20)"])
            assert fits.wait(timeout=30) == 0
            assert big.wait(timeout=30) == -9
        # a command left running through the wrapper ends with the lab
        wrapped = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "lab", "exec", lab.name, "h2", "--",
                                    "sleep", "30"])
        deadline = time.monotonic() + 15
        while not os.readlink(f"/proc/{wrapped.pid}/exe").endswith("sleep"):   # perfkit exec'd into it
            assert wrapped.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert wrapped.pid in cgroups.Cgroups.procs(paths)
    finally:
        lab.down()
    assert sleeper.poll() is not None
    wrapped.wait(timeout=10)   # lab.down's kill may have reaped it already (it is this process's child)
    assert not os.path.exists(f"/proc/{wrapped.pid}") and time.monotonic() < deadline + 10   # long before sleep 30
    for d in _dirs(paths):
        assert not os.path.exists(d), d


def _listening(address: str, port: int) -> bool:
    import socket
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((address, port)) == 0


@pytest.mark.root
@pytest.mark.netns
def test_http_serve_in_a_limited_lab_host():
    lab = _lab(cpu_quota="h2=50%")
    server = None
    try:
        server = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "http-serve", "--lab", lab.name,
                                   "--host", "h2", "--port", "8080", "-t", "15"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 15   # listening (in h2's cgroup) before the client starts
        while not lab.call("h1", _listening, lab.hosts[1].ipv4, 8080, timeout=5):
            assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
            time.sleep(0.05)
        assert server.pid in cgroups.Cgroups.procs(lab.cgroup("h2"))
        r = _perfkit("http", f"http://{lab.hosts[1].ipv4}:8080/", "--lab", lab.name, "-t", "1", "--users", "2",
                     "--json", "--watch", f"server={server.pid}")
        assert r.returncode == 0, r.stderr
        import json
        summary = json.loads(r.stdout.strip().splitlines()[-1])["summary"]
        assert summary["http_2xx"] > 0 and summary["http_2xx"] == summary["responses"]
        # beside the run: the server process's CPU and its host's cgroup CPU (h1 has no cgroup: no column)
        assert summary["proc_server_cpu_pct_mean"] > 0 and summary["lab_h2_cpu_pct_mean"] > 0
        assert not any(k.startswith("lab_h1_") for k in summary)
        # the same through Python, against the cgroup's and the process's own counters read around the run
        from perfkit.hostmetrics import HZ
        c0, p0 = lab.cpu_usage("h2"), _ticks(server.pid)
        run = perfkit.run(perfkit.HttpLoad(url=f"http://{lab.hosts[1].ipv4}:8080/", lab=lab.name, users=2,
                                           duration=1.5), interval=0.5, watch={"server": server.pid})
        c1, p1 = lab.cpu_usage("h2"), _ticks(server.pid)
        rows = list(run.frame.iter_rows(named=True))
        group = sum(r["lab_h2_cpu_pct"] / 100 * r["interval_s"] for r in rows)
        own = sum(r["proc_server_cpu_pct"] / 100 * r["interval_s"] for r in rows)
        assert 0 < group <= c1 - c0 + 1e-3, (group, c1 - c0)          # the rows' window lies inside
        assert 0 < own <= p1 - p0 + 1e-6, (own, p1 - p0)
        assert own <= group + 2 / HZ, (own, group)                    # the server is one of h2's processes
        assert run.summary["lab_h2_cpu_pct_mean"] <= 50 + CPU_TOLERANCE   # under its quota
    finally:
        lab.down()                                            # ends the server, a process of h2
        if server is not None:
            server.wait(timeout=10)
            server.stdout.close()
            server.stderr.close()


@pytest.mark.parametrize("args, first", [
    (["lab", "up", "--cpu-quota", "0%"], "cpu_quota: '0%' is below 1%"),
    (["lab", "up", "--cpu-quota", "h2=150%", "--cpus", "h2=0"], "cpu_quota: h2=150% is more than its 1 CPU"),
    (["lab", "up", "--cpus", "4096"], "cpus: CPU 4096 is not one"),
    (["lab", "up", "--cpus", "1-0"], "cpus: '1-0' runs backwards"),
    (["lab", "up", "--mem", "h2=1K"], "mem: '1K' is outside 4M.."),
    (["lab", "up", "--cpu-quota", "h3=50%"], "cpu_quota: 'h3' is not a host of the lab (h1, h2)"),
    (["lab", "up", "--mem", "lots"], "mem:"),
])
def test_bad_limits_one_line_exit_2_before_anything(args, first, capsys):
    before = set(pklab._pk_netns())
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("perfkit: " + first), err
    assert set(pklab._pk_netns()) == before


def test_bad_limit_from_the_command_line():
    r = _perfkit("lab", "up", "--cpu-quota", "150%", "--cpus", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "more than its 1 CPU" in r.stderr


def test_limit_values_parse():
    lim = cgroups.parse_limits({"cpu_quota": "h1=25%,h2=150%", "cpus": "h1=0,h2=0-1", "mem": "256M"}, ["h1", "h2"])
    assert lim["h1"] == cgroups.Limits(cpu_quota=25.0, cpus="0", mem=256 << 20)
    if len(cgroups.available_cpus()) >= 2 and cgroups.available_cpus()[:2] == [0, 1]:
        assert lim["h2"] == cgroups.Limits(cpu_quota=150.0, cpus="0-1", mem=256 << 20)
    kept = cgroups.parse_limits({"cpu_quota": ["h2=max"]}, ["h1", "h2"], base={"h2": {"cpu_quota": 50.0, "cpus": None,
                                                                                   "mem": 1 << 30}})
    assert kept["h2"] == cgroups.Limits(mem=1 << 30)
    assert cgroups.cpu_list_text([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert str(kept["h2"]) == "mem 1G"


def test_lab_panel_checks_host_limits_with_the_labs_own_code():
    pytest.importorskip("ipywidgets")
    import perfkit.ui
    lp = perfkit.ui.LabPanel(cpu_quota="h2=25%", cpus="h2=0")
    assert lp.error is None and "h2 cpu quota 25%, cpus 0" in lp.message.value
    lp.set(cpu_quota="0%")
    assert lp.error.startswith("cpu_quota:") and lp.buttons["up"].disabled
    assert "⚠" in lp.labels["cpu_quota"].value


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.nginx
def test_lab_nginx_in_a_limited_host_logs_what_the_client_counted():
    import json
    lab = _lab(cpu_quota="h2=50%")
    try:
        r = _perfkit("lab", "nginx", lab.name, "--size", "1K")
        assert r.returncode == 0, r.stderr
        assert f"http://{lab.hosts[1].ipv4}:8080/" in r.stdout and "cpu quota 50%" in r.stdout
        in_h2 = cgroups.Cgroups.procs(lab.cgroup("h2"))
        names = set()
        for pid in in_h2:
            with open(f"/proc/{pid}/comm") as f:
                names.add(f.read().strip())
        assert names == {"nginx"} and len(in_h2) == 2          # master and its one worker
        r = _perfkit("http", f"http://{lab.hosts[1].ipv4}:8080/a", "--lab", lab.name, "-t", "1", "--users", "2",
                     "--json")
        assert r.returncode == 0, r.stderr
        s = json.loads(r.stdout.strip().splitlines()[-1])["summary"]
        log = f"/run/perfkit/labs/{lab.name}-nginx-h2-8080/access.log"
        with open(log) as f:
            lines = [ln.split() for ln in f]
        ok = [p for p in lines if p[2] == "/a" and p[3] == "200" and p[4] == "1024" and p[6] == lab.hosts[0].ipv4]
        assert len(ok) == len(lines)
        # every answer the client counted is in the log; the log has no more than it asked
        assert s["http_2xx"] > 0 and s["http_2xx"] <= len(lines) <= s["requests"], (s, len(lines))
    finally:
        lab.down()
    assert not os.path.exists(f"/run/perfkit/labs/{lab.name}-nginx-h2-8080")
