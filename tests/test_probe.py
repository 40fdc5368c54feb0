"""The adversarial probe (bench/probe.py, issue 29) as a test: a seeded sample of every area
(hostile CLI values, mutated dperf files, strangers at `perfkit serve` and `http-serve`,
hostile HTTP servers for the client, bit flips in a saved run, bad save paths) ends with no
traceback, crash, hang, lost measurement or wrongly loaded file, and every base command line
the probe mutates runs as it is (so a refusal is the mutation's, not the base's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "probe.py"


def test_a_sample_of_every_area_ends_cleanly():
    p = subprocess.run([sys.executable, "-P", str(BENCH), "--quick", "--json", "--seed", "29"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, PERFKIT_SANDBOX="1"))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert lines, (p.returncode, p.stdout[-2000:], p.stderr[-4000:])
    got = json.loads(lines[-1])
    assert got["bases_refused"] == [], got["bases_refused"]
    bad = {area: {k: v for k, v in c.items() if k in ("traceback", "crash", "hang", "lost", "wrong")}
           for area, c in got["areas"].items()}
    assert all(not v for v in bad.values()), (bad, p.stderr[-4000:])
    # every area ran, and most of its cases were judged (refused or run), not skipped
    assert set(got["areas"]) >= {"cli", "save", "dperf files", "perfkit serve", "http-serve", "HTTP client",
                                 "saved runs"}, got["areas"]
    assert sum(got["areas"]["cli"].values()) == 80 and sum(got["areas"]["saved runs"].values()) >= 19
    assert p.returncode == 0, p.stderr[-4000:]
