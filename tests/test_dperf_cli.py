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
cps 400
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
    # slow start: 400 cps reached over 10 s, so 1 s launches 400 * 1 / (2 * 10) = 20
    assert 18 <= n <= 21
    assert cli["http2XX"] == cli["skClose"] == srv["httpGet"] == srv["skClose"] == n
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


@pytest.mark.parametrize("text,match", [
    (CLIENT + "vxlan 1 a b c 1 d 1\n", r"client.conf:13: vxlan: not run by perfkit: VXLAN"),
    (CLIENT.replace("cps 400", "cps lots"), r"client.conf:4: cps: 'lots' is not"),
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
