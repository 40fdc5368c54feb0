"""perfkit.compare and the store for HTTP load runs: nGrinder's figures (TPS, mean and
percentile response time, error rate, users) with ratios, from two real runs."""
import math

import pytest

import perfkit
from perfkit.comparison import HTTP_KEY_FIGURES, LOWER_IS_BETTER
from perfkit.spec import HttpLoad

from _nginx import Nginx, needs_nginx  # noqa: E402


def _check_table(cmp, runs):
    tab = cmp.table
    assert tab["name"].to_list() == cmp.names
    for k in ("tps", "lat_mean_us", "lat_p50_us", "lat_p99_us", "error_rate_pct", "vusers"):
        assert k in tab.columns and k + "_ratio" in tab.columns
    for i, run in enumerate(runs):  # every figure is the run's own, every ratio against the first
        for k in HTTP_KEY_FIGURES:
            v, base = run.summary.get(k), runs[0].summary.get(k)
            got = tab[k][i]
            assert (got is None and v is None) or got == pytest.approx(v), k
            r = tab[k + "_ratio"][i]
            if v is not None and base:
                assert r == pytest.approx(v / base), k
    assert {"lat_mean_us", "error_rate_pct"} <= LOWER_IS_BETTER


@needs_nginx
def test_compare_two_http_runs_and_the_store(tmp_path):
    with Nginx(tmp_path) as ngx:
        url = f"http://127.0.0.1:{ngx.port}/"
        a = perfkit.run(HttpLoad(url=url, users=4, duration=1))
        b = perfkit.run(HttpLoad(url=url, users=8, duration=1, think="2ms"))  # thinking users: fewer tps
    for r in (a, b):
        assert r.error is None and r.summary["responses"] > 100 and r.summary["error_rate_pct"] == 0
    cmp = perfkit.compare([a, b], names=["busy", "thinking"])
    _check_table(cmp, [a, b])
    tab = cmp.table
    assert tab["vusers"].to_list() == [4.0, 8.0] and tab["vusers_ratio"][1] == 2.0
    assert tab["tps_ratio"][1] < 1  # 8 users thinking 2 ms each cannot keep up with 4 that never do
    fig = cmp.figure()
    assert [t.name for t in fig.data[:2]] == ["busy", "busy"]
    assert fig.layout.annotations[0].text == "responses/s (TPS)"
    assert list(fig.data[0].y) == a.frame["http_resp_per_s"].to_list()
    assert "TPS" in fig.data[-1].header.values and "error %" in fig.data[-1].header.values
    # the store lists the same figures and compares by name
    store = perfkit.Store(tmp_path / "runs")
    na, nb = store.save(a, name="direct"), store.save(b, name="thinking")
    lst = store.list(test="http").sort("name")
    assert lst["name"].to_list() == ["direct", "thinking"]
    assert lst["tps"].to_list() == pytest.approx([a.summary["tps"], b.summary["tps"]])
    assert lst["lat_mean_us"].to_list() == pytest.approx([a.summary["lat_mean_us"], b.summary["lat_mean_us"]])
    assert lst["vusers"].to_list() == [4.0, 8.0] and lst["error_rate_pct"].to_list() == [0.0, 0.0]
    again = store.compare(na, nb)
    _check_table(again, [store.load(na), store.load(nb)])
    assert again.table["tps"].to_list() == pytest.approx(tab["tps"].to_list())


@needs_nginx
def test_mixed_runs_keep_the_socket_figures(tmp_path):
    with Nginx(tmp_path) as ngx:
        h = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{ngx.port}/", users=2, duration=0.5))
    u = perfkit.run(perfkit.LocalTest("udp_bw", duration=0.5, rate="10kpps"))
    cmp = perfkit.compare([u, h])
    assert "rx_pps" in cmp.table.columns and "tps" not in cmp.table.columns
    assert perfkit.compare([u, h], keys=["rx_pps", "tps"]).table["tps"][1] == pytest.approx(h.summary["tps"])


@needs_nginx
@pytest.mark.root
def test_direct_vs_delayed_lab_link(tmp_path):
    from perfkit.lab import Lab
    with Lab(hosts=2) as lab:
        h1, h2 = lab.hosts
        with Nginx(tmp_path, host=h2.ipv4, netns=h2.netns) as ngx:
            spec = dict(url=f"http://{h2.ipv4}:{ngx.port}/", users=10, duration=1.5, lab=lab.name)
            direct = perfkit.run(HttpLoad(**spec))
            lab.impair(0, delay="5ms")  # each way: a 10 ms round trip
            delayed = perfkit.run(HttpLoad(**spec))
        log = ngx.log()
    for r in (direct, delayed):
        assert r.error is None and r.summary["error_rate_pct"] == 0 and r.summary["responses"] > 100
        assert r.summary["responses"] == r.summary["requests"]  # the run waited for the answers still out
    assert len(log) == direct.summary["requests"] + delayed.summary["requests"]  # it was nginx in h2 answering
    cmp = perfkit.compare([direct, delayed], names=["direct", "delay 5ms"])
    _check_table(cmp, [direct, delayed])
    t = cmp.table
    assert t["lat_p50_us"][1] >= 10_000 > t["lat_p50_us"][0]
    assert t["lat_mean_us_ratio"][1] > 2 and t["tps_ratio"][1] < 0.5
    # closed loop: 10 users, each one request per round trip
    assert delayed.summary["tps"] <= 10 / 0.010 and not math.isnan(t["tps_ratio"][1])
