"""perfkit dperf -c FILE.conf, run as `python -m perfkit` in a subprocess (issue 6)."""
import re
import subprocess
import sys

import pytest

SERVER = """mode server
cpu 0
duration 30s
port ring:dc:1 198.18.0.2 198.18.0.1
client 198.18.0.1 1
server 198.18.0.2 1
listen 80 1
payload_size 1000
"""
CLIENT = """mode client
cpu 0
duration 1s
cps 40
wait 0
slow_start 10
port ring:dc:0 198.18.0.1 198.18.0.2
client 198.18.0.1 1
server 198.18.0.2 1
listen 80 1
http_host lab
http_path /index.html
"""


def perfkit(*args, timeout=60):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


def totals(text: str) -> dict:
    """name -> value from dperf's 'Total Numbers' block."""
    return {k: int(v.replace(",", "")) for k, v in re.findall(r"(\w+)\s+([\d,]+)", text)}


@pytest.fixture
def confs(tmp_path):
    s, c = tmp_path / "server.conf", tmp_path / "client.conf"
    s.write_text(SERVER)
    c.write_text(CLIENT)
    return s, c


@pytest.mark.dpdk
def test_server_and_client_confs_in_one_process(confs):
    s, c = confs
    p = perfkit("dperf", "-c", str(s), "-c", str(c))
    if p.returncode == 1 and "EAL" in p.stderr:
        pytest.skip(f"DPDK EAL does not start here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    srv_part, cli_part = p.stdout.split(f"{c} (client):")
    srv = totals(srv_part.split("Total Numbers:")[1].split("-----")[0])
    cli = totals(cli_part.split("Total Numbers:")[1].split("-----")[0])
    n = cli["skOpen"]
    # dperf runs slow_start + duration: 40 cps reached over 10 s (40 * 10 / 2 = 200), then
    # 1 s at 40: 240 connections
    assert 236 <= n <= 241
    # a server's http2XX: the responses it sent (dperf's meaning)
    assert cli["http2XX"] == cli["skClose"] == srv["httpGet"] == srv["http2XX"] == srv["skClose"] == n
    # both confs print their per-second blocks, each line prefixed with its side; seconds from 0, none twice
    for side in ("server", "client"):
        secs = [int(x) for x in re.findall(rf"^\[{side}\] seconds (\d+)", p.stdout, re.M)]
        assert secs[:2] == [0, 1] and len(secs) == len(set(secs)) >= 10, secs
    assert cli["skErr"] == srv["skErr"] == cli["httpErr"] == 0
    assert cli["synTx"] == srv["synRx"] and cli["finTx"] == srv["finRx"]
    assert cli["bitsRx"] == srv["bitsTx"] and cli["pktTx"] == srv["pktRx"]
    assert "dpdk_http_client:" in cli_part and re.search(r"http\s+=\s+\d+ 2xx", cli_part)


@pytest.mark.dpdk
def test_one_conf_prints_dperf_seconds_blocks(confs, tmp_path):
    s, _ = confs
    s.write_text(SERVER.replace("30s", "1.2s"))
    p = perfkit("dperf", "-c", str(s), "--interval", "0.5s")
    if p.returncode == 1 and "EAL" in p.stderr:
        pytest.skip(f"DPDK EAL does not start here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    assert len(re.findall(r"^seconds \d+\s+cpuUsage", p.stdout, re.M)) >= 2
    assert "Total Numbers:" in p.stdout and "dpdk_http_server:" in p.stdout


VX_SERVER = "vxlan 77 02:00:00:00:77:02 02:00:00:00:77:01 198.18.0.2 1 198.18.0.1 1\n"
VX_CLIENT = "vxlan 77 02:00:00:00:77:01 02:00:00:00:77:02 198.18.0.1 1 198.18.0.2 1\n"


@pytest.mark.dpdk
def test_vxlan_confs_in_one_process(tmp_path):
    """dperf's vxlan on both sides (VTEPs the port addresses, inner addresses 198.19.0.x): the
    same run as without it, every frame in VXLAN (a side takes nothing else), nothing refused."""
    s, c = tmp_path / "server.conf", tmp_path / "client.conf"
    inner = lambda t: t.replace("client 198.18.0.1", "client 198.19.0.1").replace("server 198.18.0.2",  # noqa: E731
                                                                                  "server 198.19.0.2")
    s.write_text(inner(SERVER) + VX_SERVER)
    c.write_text(inner(CLIENT) + VX_CLIENT)
    p = perfkit("dperf", "-c", str(s), "-c", str(c), "--json")
    if p.returncode == 1 and "EAL" in p.stderr:
        pytest.skip(f"DPDK EAL does not start here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    import json
    rows = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    last = {r["role"]: r for r in rows if "summary" not in r}   # each side's last row: its totals
    srv, cli = last["server"], last["client"]
    n = cli["sock_open"]
    assert 236 <= n <= 241
    assert cli["http_2xx"] == cli["sock_close"] == srv["http_get"] == srv["sock_close"] == n
    assert cli["vxlan_drop"] == srv["vxlan_drop"] == cli["bad_rx"] == srv["bad_rx"] == cli["sock_error"] == 0
    assert cli["pkts_tx"] == srv["pkts_rx"] and srv["pkts_tx"] == cli["pkts_rx"]


@pytest.mark.parametrize("text,match", [
    (CLIENT + "vxlan 1 a b c 1 d 1\n", r"client.conf:13: vxlan: 'a' is not a MAC address"),
    (CLIENT.replace("cps 40", "cps lots"), r"client.conf:4: cps: 'lots' is not"),
    (CLIENT.replace("cpu 0", "cpu 0 4000"), r"client.conf:2: cpu: CPU 4000 not among the CPUs this process may use"),
    (CLIENT.replace("198.18.0.1 198.18.0.2", "10.0.0.1 10.0.0.2"), r"client.conf:7: port: ip: 10.0.0.1 is refused by the network guard"),
])
def test_bad_conf_exits_2_with_one_line_naming_the_line(tmp_path, text, match):
    c = tmp_path / "client.conf"
    c.write_text(text)
    p = perfkit("dperf", "-c", str(c))
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and re.search(match, p.stderr), p.stderr


def test_missing_conf_exits_2(tmp_path):
    p = perfkit("dperf", "-c", str(tmp_path / "nope.conf"))
    assert p.returncode == 2 and "no such file" in p.stderr


@pytest.mark.dpdk
def test_json_rows_of_two_confs_name_their_role_and_file(confs):
    import json
    s, c = confs
    p = perfkit("dperf", "-c", str(s), "-c", str(c), "--json", "--interval", "2s")
    if p.returncode == 1 and "EAL" in p.stderr:
        pytest.skip(f"DPDK EAL does not start here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    rows = [x for x in lines if "summary" not in x]
    assert {(r["role"], r["conf"]) for r in rows} == {("server", str(s)), ("client", str(c))}
    sums = [x["summary"] for x in lines if "summary" in x]
    assert sorted((x["role"], x["conf"]) for x in sums) == [("client", str(c)), ("server", str(s))]
    # the server's active time: from its first frame to its last, not its whole wait for the client
    assert all(0 < x["active_s"] for x in sums)


@pytest.mark.dpdk
def test_the_process_leaves_no_dpdk_runtime_folder(confs):
    """EAL makes /var/run/dpdk/perfkitPID (empty: --in-memory, --no-shconf); it goes at exit."""
    import os
    s, _ = confs
    s.write_text(SERVER.replace("30s", "1s"))
    proc = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "dperf", "-c", str(s)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 1 and "EAL" in err:
        pytest.skip(f"DPDK EAL does not start here: {err.strip()}")
    assert proc.returncode == 0, err
    base = "/var/run" if os.geteuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    assert not os.path.exists(os.path.join(base, "dpdk", f"perfkit{proc.pid}"))
