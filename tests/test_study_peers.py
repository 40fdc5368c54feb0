"""bench/study_peers.py (issue 27's benchmark) on a small scale: perfkit and wrk (Locust where this
venv has it) against the script's own nginx on loopback, one short cell each; every tool's count
equals what nginx logged in its cell, and the table says so."""
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "study_peers.py"


@pytest.mark.nginx
@pytest.mark.tools("wrk")
def test_study_peers_counts_match_nginxs_log_in_every_cell():
    r = subprocess.run([sys.executable, "-P", str(BENCH), "--users", "2", "--duration", "1"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-500:]
    rows = [ln.split("|")[1:-1] for ln in r.stdout.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    tools = [c[0].strip() for c in rows]
    assert {"perfkit", "wrk"} <= set(tools) and ("locust" in tools) == ("locust skipped" not in r.stderr)
    for c in rows:
        requests, logged, errors = (int(c[i].replace(",", "")) for i in (4, 5, 7))
        # perfkit and Locust let the requests out at the end finish; wrk stops counting with up to
        # one request per connection still out, which nginx answers and logs
        slack = 2 if c[0].strip() == "wrk" else 0
        assert 0 < requests <= logged <= requests + slack and errors == 0, c
        assert float(c[8]) > 0, c   # client CPU per request
