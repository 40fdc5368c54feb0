"""perfkit.compare on ladders (issue 27): the figures pivoted against users, one column and
one line per environment, from real short ladders against nginx on loopback."""
import pytest

import perfkit
from perfkit.comparison import LADDER_METRICS, LADDER_OPTIONAL, LadderComparison

# what a ladder with no watched server and no lab host cgroup is compared by
RECORDED = [m for m in LADDER_METRICS if m not in LADDER_OPTIONAL]
from perfkit.spec import HttpLoad

from _nginx import Nginx, needs_nginx


@pytest.fixture(scope="module")
def ladders(tmp_path_factory):
    """Two environments: busy users, and users thinking 2 ms between requests (fewer TPS);
    the second has a step (8 users) the first has not."""
    with Nginx(tmp_path_factory.mktemp("nginx")) as ngx:
        url = f"http://127.0.0.1:{ngx.port}/"
        busy = perfkit.ladder(HttpLoad(url=url, duration=1), users=[2, 4], interval=0.5)
        thinking = perfkit.ladder(HttpLoad(url=url, duration=1, think="2ms"), users=[2, 8], interval=0.5)
    for lad in (busy, thinking):
        assert lad.error is None and len(lad.runs) == 2
        assert all(r.frame.height >= 2 for r in lad.runs)   # 0.5 s rows: a ladder's .frame repeats users
    return busy, thinking


@needs_nginx
def test_pivot_is_each_steps_own_figures(ladders):
    busy, thinking = ladders
    cmp = perfkit.compare({"busy": busy, "thinking": thinking})
    assert isinstance(cmp, LadderComparison) and cmp.names == ["busy", "thinking"]
    assert cmp.ifaces == {"busy": "lo", "thinking": "lo"}   # loopback runs follow lo
    tab = cmp.table
    assert tab.height == 4 and tab.columns == ["name", "users", "iface", *RECORDED]
    for name, lad in (("busy", busy), ("thinking", thinking)):
        for u, run in zip(lad.users, lad.runs):
            s = run.summary
            row = tab.filter((tab["name"] == name) & (tab["users"] == u)).row(0, named=True)
            assert row["tps"] == pytest.approx(s["tps"]) and s["tps"] > 0
            assert row["mean_test_time_ms"] == pytest.approx(s["mean_test_time_ms"])
            assert row["error_rate_pct"] == s["error_rate_pct"] == 0
            assert row["host_cpu_busy_pct"] == pytest.approx(100 - s["host_cpu_idle_pct_mean"])
            assert row["host_cpu_steal_pct"] == pytest.approx(s["host_cpu_steal_pct_mean"])
            assert row["pkts_in_per_s"] == pytest.approx(s["if_lo_rx_pps"])
            assert row["pkts_out_per_s"] == pytest.approx(s["if_lo_tx_pps"])
            # on loopback every packet sent is received; each answered request is at least two
            assert s["if_lo_rx_pkts"] == s["if_lo_tx_pkts"] >= 2 * s["responses"]
    # metric against users: the union of the steps, null where an environment has none
    tps = cmp.pivot("tps")
    assert tps.columns == ["users", "busy", "thinking"] and tps["users"].to_list() == [2, 4, 8]
    assert tps["busy"][2] is None and tps["thinking"][1] is None
    assert tps["busy"][0] == pytest.approx(busy.runs[0].summary["tps"])
    assert tps["thinking"][2] == pytest.approx(thinking.runs[1].summary["tps"])
    assert tps["busy"][0] > tps["thinking"][0]   # 2 ms thinking caps a user well below a busy one
    wide = cmp.wide
    assert wide.columns == ["users"] + [f"{m} {n}" for m in RECORDED for n in cmp.names]
    assert wide["error_rate_pct thinking"].to_list() == [0.0, None, 0.0]


@needs_nginx
def test_tables_and_run_lists_pivot_alike(ladders):
    busy, thinking = ladders
    a = perfkit.compare([busy, thinking], names=["busy", "thinking"]).table
    b = perfkit.compare([busy.table, list(thinking.runs)], names=["busy", "thinking"]).table
    assert a.equals(b)
    assert perfkit.compare(busy).table.equals(perfkit.compare(busy.table).table)   # one ladder on its own
    only = perfkit.compare([busy], keys=["tps", "error_rate_pct"])
    assert only.names == ["1"] and only.table.columns == ["name", "users", "iface", "tps", "error_rate_pct"]


@needs_nginx
def test_figure_and_report(ladders, tmp_path):
    busy, thinking = ladders
    cmp = perfkit.compare({"busy": busy, "thinking": thinking})
    fig = cmp.figure()
    assert len(fig.data) == 2 * len(RECORDED)
    lines = {(t.name, tuple(t.x)) for t in fig.data}
    assert lines == {("busy", (2, 4)), ("thinking", (2, 8))}
    assert len(cmp.figure(metrics=["tps"]).data) == 2
    assert fig.layout.yaxis.title.text == "resp/s"                     # each y axis carries its unit
    assert "Plotly.newPlot" in fig._repr_mimebundle_()["text/html"]   # shown as a cell's result
    path = cmp.report(tmp_path / "ladders.html")
    text = open(path, encoding="utf-8").read()
    assert "ladders: busy vs thinking" in text and "tps thinking" in text and "plotly" in text


@needs_nginx
def test_bad_input_is_one_clear_error(ladders):
    busy, thinking = ladders
    with pytest.raises(ValueError, match="repeat .*frame"):
        perfkit.compare([busy.frame, thinking])      # per-interval rows, not a ladder
    with pytest.raises(ValueError, match="not a mix"):
        perfkit.compare([busy, thinking.runs[0]])
    with pytest.raises(ValueError, match="names: 1 names for 2"):
        perfkit.compare([busy, thinking], names=["x"])
    with pytest.raises(ValueError, match="repeat"):
        perfkit.compare([busy, thinking], names=["x", "x"])
    with pytest.raises(ValueError, match="keys: 'tpz'"):
        perfkit.compare([busy], keys=["tpz"])
    with pytest.raises(ValueError, match="iface: .*'eth9'.*lo"):
        perfkit.compare([busy], iface="eth9")
    with pytest.raises(ValueError, match="metric: 'p99'"):
        perfkit.compare([busy]).pivot("p99")
    with pytest.raises(ValueError, match="no users column"):
        perfkit.compare([busy.runs[0].frame])
