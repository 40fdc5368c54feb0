"""A flows file (issue 30, BiTester's -f): DpdkFlows from TOML, its keys the spec's own fields
(the six-tuple's ranges as FIRST-LAST, sizes, rates, cores for concurrency), loaded through the
spec's own checks; every error is one line naming FILE:LINE."""
import json
import subprocess
import sys

import pytest

from perfkit.spec import DpdkFlows

GOOD = """\
# the flows of one run: the same fields as perfkit flows' options
port = "ring:ff:0"
peer = "ring:ff:1"
proto = "udp"
ip = "198.18.0.1-198.18.0.4"        # source addresses: 4
peer_ip = "198.18.1.0-198.18.1.1"   # destinations: 2
sport = "10000-10099"
dport = 9
sizes = "64:7,570:4,1518:1"
rate = "20kpps"
flows = 50
cores = 2                           # concurrency: lcores per side
duration = 0.5
"""


def _write(tmp_path, text, name="flows.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_a_good_file_is_the_spec_its_fields_make(tmp_path):
    path = _write(tmp_path, GOOD)
    spec = DpdkFlows.from_file(path)
    assert spec == DpdkFlows(port="ring:ff:0", peer="ring:ff:1", ip="198.18.0.1", src_ips=4, peer_ip="198.18.1.0",
                             dst_ips=2, sport=10000, sports=100, dport=9, sizes="64:7,570:4,1518:1", rate="20kpps",
                             flows=50, cores=2, duration=0.5)
    assert DpdkFlows.from_file(path, rate="5kpps").rate == DpdkFlows(rate="5kpps").rate   # overrides win


@pytest.mark.parametrize("text, where, message", [
    ('port = "ring:ff:0"\nrate = "20kpps\n', 2, "not TOML: "),
    ('port = "ring:ff:0"\n\ncolour = "blue"\n', 3, "colour: not a field of DpdkFlows"),
    ('port = "ring:ff:0"\nflows = 0\n', 2, "flows: "),
    ('port = "ring:ff:0"\nrate = "fast"\n', 2, "rate: "),
    ('port = "ring:ff:0"\n# a comment\nsport = "2000-1000"\n', 3, "sport: '2000-1000' ends before it starts"),
    ('port = "ring:ff:0"\nip = "198.18.0.1-x"\n', 2, "ip: '198.18.0.1-x' is not a range"),
    ('port = "ring:ff:0"\nsport = "10-20"\nsports = 5\n', 2, "sport: a range sets sports too"),
    ('proto = "tcp"\n', 1, "proto: 'tcp' is not one of udp"),
    ('port = "ring:ff:0"\n[flow]\nrate = 1\n', 2, "[flow]: tables are not fields"),
    ('port = "ring:ff:0"\nmode = "reverse"\nbidirectional = true\n', 3, "bidirectional: needs a peer port"),
    ('port = "ring:ff:0"\nflows = 2\ncores = 4\n', 2, "flows: 2 flow(s) for 4 cores"),
])
def test_a_bad_file_says_file_and_line(tmp_path, text, where, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as exc:
        DpdkFlows.from_file(path)
    got = str(exc.value)
    assert got.startswith(f"{path}:{where}: {message}") and "\n" not in got, got


def test_a_missing_or_binary_file(tmp_path):
    with pytest.raises(ValueError, match=r"nope\.toml: cannot read it"):
        DpdkFlows.from_file(tmp_path / "nope.toml")
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"port = \"\xff\"\n")
    with pytest.raises(ValueError, match=r"bin\.toml: not UTF-8 text"):
        DpdkFlows.from_file(bad)


def _cli(*args):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True, timeout=60)


def test_perfkit_flows_runs_a_flows_file_options_given_win(eal, tmp_path):
    path = _write(tmp_path, GOOD)
    p = _cli("flows", "--flows-file", path, "--rate", "10kpps", "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout.splitlines()[-1])["summary"]
    assert abs(s["pkts_tx"] - 5_000) <= 1 and s["pkts_rx"] + s["lost"] == s["pkts_tx"]   # 10kpps x 0.5 s


def test_perfkit_flows_a_bad_file_is_one_line_exit_2(tmp_path):
    path = _write(tmp_path, 'port = "ring:ff:0"\nflows = 0\n')
    p = _cli("flows", "--flows-file", path)
    assert p.returncode == 2 and p.stderr.startswith(f"perfkit: {path}:2: flows: ") and p.stderr.count("\n") == 1, p.stderr
    p = _cli("flows", "--engine", "socket", "--flows-file", path)
    assert p.returncode == 2 and p.stderr.startswith("perfkit: --flows-file: only with --engine dpdk"), p.stderr
