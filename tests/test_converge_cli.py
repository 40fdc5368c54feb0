"""Live rate convergence's threshold criteria and --converge (issue 30): 'loss<X' and 'p99<Y'
judged on each row as perfkit.thresholds parses them; `perfkit local udp_bw --converge` and
`perfkit flows --engine socket --converge` steer the one run they start and print the converged
rate. On a lab link shaped by tbf to a known rate the controller finds that rate within its
bounds. Bad options: one line, exit 2, before anything runs."""
import json
import subprocess
import sys

import pytest

from perfkit.converge import Converge, parse_criterion
from perfkit.thresholds import Threshold

from _labs import lab_module_or_skip, lab_up_or_skip  # noqa: E402


def _cli(*args, timeout=90):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_threshold_criteria_parse_once_and_judge_a_row():
    assert isinstance(parse_criterion("loss<0.1%"), Threshold) and parse_criterion(" cpu ") == "cpu"
    conv = Converge(lo="1kpps", hi="10kpps", criterion="p99<200us")
    conv.rate = 5000.0
    row = {"rate_target": 5000, "pkts_tx_per_s": 4990.0, "lat_p99_us": 150.0, "loss_pct": 0.0}
    assert conv.held(row)
    assert not conv.held({**row, "lat_p99_us": 250.0})          # the bound broken
    assert not conv.held({**row, "lat_p99_us": None})           # nothing measured holds no bound
    assert not conv.held({**row, "pkts_tx_per_s": 4000.0})      # a sender short of its target
    loss = Converge(lo=1, hi=2, criterion="loss<1%")
    assert loss.held({**row, "loss_pct": 0.5}) and not loss.held({**row, "loss_pct": 1.5})
    assert loss.result()["converge_criterion"] == "loss<1%"


@pytest.mark.parametrize("criterion, words", [
    ("tps>5k", "a live criterion judges each interval's loss, mean, p50"),
    ("loss<fast", "loss takes a percentage"),
    ("fast", "is not one of keeps-up, zero-loss, cpu, or a threshold"),
])
def test_bad_criteria_are_one_line(criterion, words):
    with pytest.raises(ValueError) as e:
        Converge(lo=1, hi=2, criterion=criterion)
    assert str(e.value).startswith("criterion: ") and words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("args, field", [
    (["local", "udp_bw", "--converge", "loss<1%"], "converge: give --rate"),
    (["local", "udp_bw", "--rate", "10kpps", "--converge", "tps>1"], "criterion: "),
    (["local", "udp_bw", "--rate", "10kpps", "--converge-low", "1kpps"], "--converge-low: only with"),
    (["local", "tcp_bw", "--rate", "10kpps", "--converge", "zero-loss"], "--converge: "),
    (["local", "udp_bw", "--rate", "10kpps", "--converge", "zero-loss", "--search", "zero-loss"], "converge: "),
    (["local", "udp_bw", "--rate", "10kpps", "--converge", "zero-loss", "--converge-resolution", "x"],
     "converge_resolution: "),
    (["flows", "--engine", "socket", "--mode", "reverse", "--rate", "10kpps", "--converge", "zero-loss"],
     "converge: udp_lat has no live rate"),
])
def test_cli_bad_converge_options_exit_2_with_one_line(args, field, capsys):
    from perfkit.cli import main
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"perfkit: {field}") and err.count("\n") == 1 and out == "", err


def test_cli_socket_flows_converge_prints_the_converged_rate():
    """Over loopback: the controller's trajectory stays in its bounds, the line after the summary says
    what it found (or that it did not converge on a machine too busy to hold any rate)."""
    p = _cli("flows", "--engine", "socket", "--rate", "40kpps", "--converge", "keeps-up", "--converge-low", "4kpps",
             "--converge-resolution", "10%", "--duration", "3s", "--interval", "0.25s")
    assert p.returncode == 0, p.stderr
    assert "\nconverge keeps-up: " in p.stdout, p.stdout


@pytest.mark.root
@pytest.mark.netns
def test_cli_local_converges_on_a_lab_links_rate_limit():
    """h1 -> h2 over a veth shaped by tbf at 20 Mbit/s: 1000-byte frames (954 B of UDP payload; tbf
    counts 996 B) pass at 2510 frames/s. 'loss<1%' between 600 and 5000 pps converges near that: a
    rate that passed a judged row is at most the limit plus what tbf's queue (64 KiB + 3 KB) and 1%
    of loss absorb over a row of 0.5 s; well below, a busy machine may have failed a row, so the
    lower side is loose."""
    lab = lab_up_or_skip(lab_module_or_skip(), rate="20mbit", name="ctlconv")
    try:
        p = _cli("local", "udp_bw", "--lab", lab.name, "--size", "954", "--rate", "5kpps", "--converge", "loss<1%",
                 "--converge-low", "600pps", "--duration", "10s", "--interval", "0.5s", "--json", timeout=120)
    finally:
        lab.down()
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    rows, s = [x for x in lines if "summary" not in x], lines[-1]["summary"]
    assert s["pkts_tx"] == s["pkts_rx"] - s["dup"] + s["lost"]   # sent = received + lost
    limit = 20e6 / 8 / 996
    slack = ((65536 + 3028) / 996 + 0.01 * 5000 * 0.5) / 0.5
    trail = [r["rate_target"] for r in rows]
    assert all(600 <= t <= 5000 for t in trail), trail                   # never leaves its bounds
    assert s["converge_criterion"] == "loss<1%" and s["converged_pps"] is not None, trail
    assert 0.5 * limit <= s["converged_pps"] <= limit + slack, (s["converged_pps"], trail)
