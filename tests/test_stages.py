"""Load stages (k6's stages) on the socket engine's HTTP client: users added and retired in C,
counted per interval (http_users), against perfkit's own server on loopback."""
import json
import subprocess
import sys

import pytest

import perfkit
from perfkit._sock import SockEngine
from perfkit.kinds.http import http_workers
from perfkit.spec import HttpLoad, HttpServe


@pytest.fixture
def server_port():
    eng = SockEngine(http_workers(HttpServe(port=0, size=100, duration=30)))
    eng.start()
    yield eng.bound_port(0)
    eng.stop()
    eng.join()
    eng.close()


def _target(plan, t):
    """The users the plan wants t s after the start (linear between stage ends, 0 at the start)."""
    start, prev = 0.0, 0
    for d, u in plan:
        if t < start + d:
            return prev + (u - prev) * (t - start) / d
        start, prev = start + d, u
    return prev


def test_users_per_interval_follow_the_stage_plan_within_one_interval(server_port):
    plan = [(2.0, 20), (1.0, 20), (2.0, 0)]
    iv = 0.5
    run = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{server_port}/", threads=2,
                               stages=",".join(f"{d:g}s:{u}" for d, u in plan)), interval=iv)
    s, f = run.summary, run.frame
    assert run.error is None and s["vusers"] == 20 and run.spec.duration == 5
    for row in f.iter_rows(named=True):
        t = row["time_s"]
        # the gauge is read at t; the plan's count anywhere within one interval of t bounds it
        near = [_target(plan, t + k * iv / 10) for k in range(-10, 11)]
        assert min(near) - 1 <= row["http_users"] <= max(near) + 1, (t, row["http_users"], near)
        # a retired user closes once its last answer is in: connections follow the plan too
        assert row["sock_current"] <= max(near) + 1, (t, row["sock_current"], near)
    assert max(f["http_users"]) == 20 and f["http_users"][-1] == 0 and f["sock_current"][-1] == 0
    # retired users finish the request they have out: every request answered, none cut
    assert s["requests"] == s["responses"] > 0 and s["http_cut"] == 0 and s["http_err"] == 0, s


@pytest.mark.parametrize("stages, says", [("1s", "is not DURATION:USERS"), ("1s:0,1s:0", "needs some users"),
                                          ("1s:x", "not a whole number"), ("-1s:5", "stages")])
def test_a_bad_stage_plan_is_one_line_and_exit_2(stages, says):
    r = subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", "http://127.0.0.1:9/", "--stages", stages],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.splitlines()) == 1, r


def test_stages_are_a_closed_loop_plan():
    with pytest.raises(ValueError, match="leave rate and ramp out"):
        HttpLoad(stages="1s:5", rate=100)
    spec = HttpLoad(stages="30s:100,1m:100,30s:500,30s:0")
    assert spec.users == 500 and spec.duration == 150 and spec.stages[1] == [60.0, 100]
    assert perfkit.HttpLoad.from_dict(spec.to_dict()) == spec   # saved and loaded as it was
    workers = http_workers(HttpLoad(stages="1s:5,1s:0", threads=2))
    assert [w["stages"] for w in workers] == [[(1.0, 3), (1.0, 0)], [(1.0, 2), (1.0, 0)]]
    with pytest.raises(ValueError, match="a ladder runs steps of fixed users"):
        perfkit.ladder(spec, users="1,2")


# ------------------------------------------------------------------ thresholds per stage
def _cli(*args):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", *args], capture_output=True, text=True,
                          timeout=60)


def test_each_stage_is_summarized_and_its_counts_add_up_to_the_run(server_port, tmp_path):
    run = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{server_port}/", stages="1s:8,1s:8,1s:0"), interval=0.25,
                      thresholds=["error_rate<1%"])
    s, st = run.summary, run.stages
    assert [x["stage"] for x in st] == [1, 2, 3] and [x["users"] for x in st] == [8, 8, 0]
    # the stages tile the run: each starts where the one before ended, the last at the final row
    assert st[0]["from_s"] == 0 and all(a["to_s"] == b["from_s"] for a, b in zip(st, st[1:]))
    assert st[-1]["to_s"] == run.frame["time_s"][-1] and not any(x["partial"] for x in st)
    # a stage's end is the first row at or past the plan's: within one interval of it
    assert all(0 <= x["to_s"] - end < 0.25 + 0.05 for x, end in zip(st[:-1], (1.0, 2.0)))
    for k in ("requests", "responses", "http_2xx", "http_err", "http_cut", "lat_count"):
        assert sum(x[k] for x in st) == s[k], k
    assert all(x["requests"] > 0 and x["error_rate_pct"] == 0 for x in st), st
    assert run.passed is True and all(c.passed for _, cs in run.stage_thresholds for c in cs)
    run.save(tmp_path / "r.parquet")
    back = perfkit.Run.load(tmp_path / "r.parquet")
    assert back.stages == st and back.passed is True
    page = open(back.report(tmp_path / "r.html"), encoding="utf-8").read()   # the HTML report has the stage table
    assert "stages:" in page and "stage  3  threshold pass" in page


def test_a_stage_that_fails_a_threshold_fails_the_run_though_the_summary_passes(server_port):
    # the last stage holds no users: no responses there, so tps>1 fails on it alone
    url = f"http://127.0.0.1:{server_port}/"
    run = perfkit.run(HttpLoad(url=url, stages="1s:5,1s:5,1s:0,1s:0"), thresholds=["tps>1"])
    assert [c.passed for c in run.thresholds] == [True]
    assert [[c.passed for c in cs] for _, cs in run.stage_thresholds] == [[True], [True], [True], [False]]
    assert run.stages[3]["requests"] == 0 and run.passed is False
    r = _cli(url, "--stages", "1s:5,1s:5,1s:0,1s:0", "--threshold", "tps>1", "--interval", "0.5s")
    assert r.returncode == 3, r
    lines = r.stdout.splitlines()
    assert any(ln.startswith("threshold pass  tps>1") for ln in lines), r.stdout
    assert [ln.split()[1] for ln in lines if ln.startswith("stage ") and "threshold" in ln] == ["1", "2", "3", "4"]
    assert [ln for ln in lines if "threshold FAIL" in ln] == [ln for ln in lines if ln.startswith("stage  4")], r.stdout
    r = _cli(url, "--stages", "1s:5,1s:5", "--threshold", "tps>1", "--threshold", "error_rate<1%", "--json")
    assert r.returncode == 0, r
    verdict = json.loads(r.stdout.splitlines()[-1])
    assert verdict["passed"] is True and [len(x["thresholds"]) for x in verdict["stages"]] == [2, 2]
    assert all(c["passed"] for x in verdict["stages"] for c in x["thresholds"])


# ------------------------------------------------------------------ open loop: rate stages
def _due(plan, t):
    """Requests the rate plan has due by t s (the integral of its rate, linear within a stage)."""
    start, prev, n = 0.0, 0.0, 0.0
    for d, r in plan:
        tau = min(max(t - start, 0.0), d)
        n += prev * tau + (r - prev) * tau * tau / (2 * d)
        start, prev = start + d, r
    return n


def test_offered_rate_per_interval_follows_the_rate_plan_within_one_interval(server_port):
    plan = [(1.0, 400), (1.0, 400), (1.0, 1600), (1.0, 0)]
    iv = 0.5
    run = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{server_port}/", users=64, threads=2,
                               rate_stages=",".join(f"{d:g}s:{r}" for d, r in plan)), interval=iv)
    s, f = run.summary, run.frame
    assert run.error is None and run.spec.duration == 4 and run.spec.rate.value == 1600
    total = _due(plan, 4.0)   # 3,000: the plan ends at 0 requests/s, so none is due at the very end
    assert total - 2 <= s["requests"] <= total + 2 and s["requests"] == s["responses"] + s["http_err"], s
    for row in f.iter_rows(named=True):
        t = row["time_s"]
        # requests sent by t: what the plan had due within one interval of t (each thread's share rounds once)
        assert _due(plan, t - iv) - 2 <= row["http_req"] <= _due(plan, t + iv) + 2, (t, row["http_req"])
        # the rate due now, as the C client set it when the row was read (each thread rounds its share)
        near = [_target(plan, t + k * iv / 10) for k in range(-10, 11)]
        if t < 4.0:
            assert min(near) - 2 <= row["http_rate"] <= max(near) + 2, (t, row["http_rate"], near)
    st = run.stages   # each stage's requests: the plan's integral over the stage's rows
    assert [x["rate"] for x in st] == [400, 400, 1600, 0] and sum(x["requests"] for x in st) == s["requests"]


@pytest.mark.parametrize("kw, says", [(dict(rate_stages="1s:0"), "needs some rate"),
                                      (dict(rate_stages="1s:100", stages="1s:5"), "leave stages"),
                                      (dict(rate_stages="1s:100", think="1ms"), "leave stages, ramp and think out"),
                                      (dict(rate_stages="1s:100", rate=50), "leave rate out"),
                                      (dict(rate_stages="1s:x"), "rate_stages")])
def test_a_bad_rate_plan_is_one_value_error(kw, says):
    with pytest.raises(ValueError, match=says):
        HttpLoad(**kw)


def test_a_rate_plan_is_saved_and_split_between_threads():
    spec = HttpLoad(rate_stages="10s:1k,20s:5k,10s:0", users=10)
    assert spec.rate_stages == [[10.0, 1000.0], [20.0, 5000.0], [10.0, 0.0]] and spec.duration == 40
    assert perfkit.HttpLoad.from_dict(spec.to_dict()) == spec
    workers = http_workers(HttpLoad(rate_stages="1s:300,1s:0", users=3, threads=2))
    assert [w["rate_stages"] for w in workers] == [[(1.0, 200.0), (1.0, 0.0)], [(1.0, 100.0), (1.0, 0.0)]]
    assert [w["rate"] for w in workers] == [200.0, 100.0]
