"""Error rates that count every unanswered request, thresholds with their exit status, and
user ladders: HTTP load on loopback against perfkit http-serve or a socket that never answers."""
import resource
import socket
import time

import perfkit
from perfkit.report import summary_text
from perfkit.spec import HttpLoad


def _silent_listener(backlog: int = 4096) -> socket.socket:
    """A server that accepts (the kernel completes the handshakes) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s


def test_requests_cut_off_by_the_end_are_errors_not_a_zero_rate():
    # the study: 18,000 users once read a 0% error rate here (fewer where open files are fewer)
    users = min(18000, resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 500)
    with _silent_listener() as srv:
        t0 = time.monotonic()
        # the response timeout is past the end: every request is still out when the run ends
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{srv.getsockname()[1]}/", users=users, duration=1,
                                 response_timeout="30s", connect_timeout="30s")).summary
        took = time.monotonic() - t0
    # a loaded machine may not have every user's request out within the second: whatever went out is cut
    assert 0 < s["requests"] <= users and s["responses"] == 0, s
    assert s["requests"] == s["http_cut"] == s["unanswered"] and s["error_rate_pct"] == 100.0, s
    text = summary_text(s)
    assert "100.00 %" in text and f"{s['requests']:,} requests still out at the stop" in text
    assert took < 15


# ------------------------------------------------------------------ thresholds
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from perfkit.thresholds import parse  # noqa: E402


def _perfkit(*args, timeout=60):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def http_serve():
    """`perfkit http-serve` on loopback in its own process, for the module's runs (bounded: 60 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "http-serve", "--port", str(port),
                             "--duration", "60s"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    proc.terminate()
    proc.wait(10)


def test_thresholds_that_hold_exit_0_and_say_pass(http_serve):
    r = _perfkit("http", http_serve, "-u", "4", "-t", "1", "--threshold", "error_rate<1%",
                 "--threshold", "p99<5s", "--threshold", "tps>10", "--threshold", "cut<=0")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("threshold ")]
    assert len(lines) == 4 and all(ln.startswith("threshold pass") for ln in lines), r.stdout


def test_a_failed_threshold_exits_3_and_names_it(http_serve):
    r = _perfkit("http", http_serve, "-u", "4", "-t", "1", "--threshold", "error_rate<1%",
                 "--threshold", "tps>1G", "--threshold", "p99<1ns")
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = {ln.split()[2]: ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("threshold ")}
    assert lines == {"error_rate<1%": "pass", "tps>1G": "FAIL", "p99<1ns": "FAIL"}, r.stdout


def test_thresholds_in_json_lines(http_serve):
    r = _perfkit("http", http_serve, "-u", "2", "-t", "1", "--json", "--threshold", "tps>1G")
    assert r.returncode == 3
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["passed"] is False and last["thresholds"][0]["threshold"] == "tps>1G"
    assert last["thresholds"][0]["value"] > 0 and last["thresholds"][0]["passed"] is False


@pytest.mark.parametrize("bad, says", [
    ("p99<200", "takes a time with its unit"), ("latency<1ms", "unknown metric 'latency'"),
    ("error_rate<0.01", "takes a percentage"), ("tps=>5", "is not METRIC<VALUE")])
def test_a_bad_threshold_is_one_line_and_exit_2_before_anything_runs(bad, says):
    # port 9 on loopback: nothing runs, so nothing is sent
    r = _perfkit("http", "http://127.0.0.1:9/", "-t", "1", "--threshold", bad, timeout=30)
    assert r.returncode == 2 and r.stdout == "" and says in r.stderr and len(r.stderr.splitlines()) == 1, r


def test_run_passed_in_python_and_kept_by_save(http_serve, tmp_path):
    run = perfkit.run(HttpLoad(url=http_serve, users=2, duration=0.5), thresholds=["error_rate<1%", "tps>1G"])
    checks = run.thresholds
    assert [c.passed for c in checks] == [True, False] and run.passed is False
    assert checks[1].value == run.summary["tps"] and "FAIL" in checks[1].line()
    back = perfkit.load(run.save(tmp_path / "r.parquet"))
    assert [c.to_dict() for c in back.thresholds] == [c.to_dict() for c in checks] and back.passed is False
    ok = perfkit.run(HttpLoad(url=http_serve, users=2, duration=0.5), thresholds="error_rate<1%")
    assert ok.passed is True and perfkit.run(HttpLoad(url=http_serve, users=1, duration=0.2)).passed is True


def test_thresholds_parse_units():
    assert parse("p99<200ms").bound == 200_000 and parse("mean<=1.5s").bound == 1.5e6
    assert parse("tps>5k").bound == 5000 and parse("tps>=5000/s").op == ">=" and parse("error_rate<1%").bound == 1
    with pytest.raises(ValueError, match="unknown metric"):
        perfkit.Run(HttpLoad(url="http://127.0.0.1:9/"), thresholds=["nope<1"])


# ------------------------------------------------------------------ user ladders
import polars as pl  # noqa: E402


def test_a_ladder_is_one_frame_with_a_users_column_and_one_table_row_per_step(http_serve):
    lad = perfkit.ladder(HttpLoad(url=http_serve, duration=0.5), users="1:3:+1", thresholds=["error_rate<1%"])
    t, f = lad.table, lad.frame
    assert lad.users == [1, 2, 3] and t["users"].to_list() == [1, 2, 3] and t["vusers"].to_list() == [1, 2, 3]
    assert t["passed"].to_list() == [True, True, True] and lad.passed is True and lad.error is None
    assert f.columns[0] == "users" and f["users"].unique().sort().to_list() == [1, 2, 3]
    for u, run in zip(lad.users, lad.runs):
        step = f.filter(pl.col("users") == u)
        assert step.height == run.frame.height
        # the step's last row holds its totals: what the table says it sent and got back
        last = step.row(-1, named=True)
        row = t.filter(pl.col("users") == u).row(0, named=True)
        assert last["http_req"] == row["requests"] == run.summary["requests"] > 0
        assert last["http_resp"] == row["responses"] == row["requests"]   # all answered, none cut


def test_a_ladder_on_the_command_line_prints_a_table_and_fails_a_step_with_3(http_serve):
    r = _perfkit("http", http_serve, "--users", "1,2", "-t", "0.5", "--threshold", "requests<0")
    assert r.returncode == 3, r.stderr
    out = r.stdout.splitlines()
    assert [ln for ln in out if ln.startswith("step: ")] == ["step: 1 users", "step: 2 users"]
    table = out[out.index("ladder:") + 2:out.index("ladder:") + 4]
    assert [ln.split()[0] for ln in table] == ["1", "2"] and all(ln.endswith("NO") for ln in table)
    assert sum("threshold FAIL  requests<0" in ln for ln in out) == 2


@pytest.mark.parametrize("users, says", [("100:10:+10", "FROM (100) is above TO (10)"),
                                         ("1:100000:+1", "more than 100 steps"), ("10,x", "'x' is not a whole"),
                                         ("1:5:-1", "is not +N or *N")])
def test_a_bad_ladder_is_one_line_and_exit_2(users, says):
    r = _perfkit("http", "http://127.0.0.1:9/", "--users", users, "-t", "1", timeout=30)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.splitlines()) == 1, r
