"""The run store, comparisons and HTML reports, on real short runs over loopback."""
import base64
import datetime as dt
import json
import re
import shutil

import pytest

import perfkit
from perfkit import LocalTest
from perfkit.comparison import cdf_points
from perfkit.store import KEY_FIGURES


@pytest.fixture(scope="module")
def runs():
    """Two paced udp_bw runs (10 and 30 kpps) and one tcp_lat run."""
    slow = perfkit.run(LocalTest("udp_bw", size=200, rate="10kpps", duration="0.6s"), interval=0.2)
    fast = perfkit.run(LocalTest("udp_bw", size=200, rate="30kpps", duration="0.6s"), interval=0.2)
    lat = perfkit.run(LocalTest("tcp_lat", duration="0.5s"), interval=0.25)
    for r in (slow, fast, lat):
        assert r.error is None and r.summary["pkts_rx"] > 0
    return {"slow": slow, "fast": fast, "lat": lat}


@pytest.fixture
def store(tmp_path, runs):
    st = perfkit.Store(tmp_path / "runs")
    st.save(runs["slow"], name="slow", tags=["vm", "paced"], note="ten thousand per second")
    st.save(runs["fast"], name="fast", tags=["vm", "paced"])
    st.save(runs["lat"], name="lat", tags="bare-metal")
    return st


# ------------------------------------------------------------------ store
def test_save_writes_one_parquet_file_per_run_that_perfkit_load_reads(store, runs):
    assert sorted(p.name for p in store.path.iterdir()) == ["fast.parquet", "lat.parquet", "slow.parquet"]
    back = perfkit.load(store.path / "slow.parquet")
    assert back.frame.equals(runs["slow"].frame)
    assert back.summary == runs["slow"].summary


def test_list_has_one_row_per_run_with_environment_and_key_figures(store, runs):
    df = store.list()
    assert sorted(df["name"].to_list()) == ["fast", "lat", "slow"]
    for col in ("name", "time", "test", "engine", "host", "kernel", "size", "rate", "tags", "path", *KEY_FIGURES):
        assert col in df.columns, col
    row = df.filter(df["name"] == "slow").row(0, named=True)
    r = runs["slow"]
    assert row["test"] == "udp_bw" and row["engine"] == "socket" and row["size"] == 200
    assert row["host"] == r.env["host"] and row["kernel"] == r.env["kernel"]
    assert row["rate"] == "10 kpps"
    assert row["tags"] == ["vm", "paced"] and row["note"] == "ten thousand per second"
    assert row["time"] == dt.datetime.fromisoformat(r.env["started_utc"])
    assert row["time"].tzinfo is not None
    for k in KEY_FIGURES:
        assert row[k] == pytest.approx(r.summary[k]) if r.summary.get(k) is not None else row[k] is None, k
    assert row["rows"] == len(r.frame)
    lat = df.filter(df["name"] == "lat").row(0, named=True)
    assert lat["test"] == "tcp_lat" and lat["rate"] is None and lat["latency_us"] > 0


def test_list_is_newest_first(store):
    times = store.list()["time"].to_list()
    assert times == sorted(times, reverse=True)


def test_list_filters(store, runs):
    names = lambda df: sorted(df["name"].to_list())  # noqa: E731
    assert names(store.list(test="udp_bw")) == ["fast", "slow"]
    assert names(store.list(test="tcp_lat")) == ["lat"]
    assert names(store.list(test=["tcp_lat", "udp_bw"])) == ["fast", "lat", "slow"]
    assert names(store.list(engine="socket")) == ["fast", "lat", "slow"]
    assert names(store.list(engine="dpdk")) == []
    assert names(store.list(host=runs["slow"].env["host"], size=200)) == ["fast", "slow"]
    assert names(store.list(tags="vm")) == ["fast", "slow"]
    assert names(store.list(tags=["vm", "paced"], test="udp_bw")) == ["fast", "slow"]
    assert names(store.list(tags="bare-metal")) == ["lat"]
    assert names(store.list(text="THOUSAND")) == ["slow"]       # the note, any case
    assert names(store.list(text="bare")) == ["lat"]            # a tag
    assert names(store.list(text="udp")) == ["fast", "slow"]    # the test
    listing = store.list()
    start = min(listing["time"].to_list())
    first = sorted(n for n, t in zip(listing["name"], listing["time"]) if t == start)   # same second
    assert names(store.list(since=start)) == ["fast", "lat", "slow"]
    assert names(store.list(until=start.isoformat())) == first
    assert names(store.list(since="2999-01-01T00:00:00")) == []
    assert names(store.list(until=dt.datetime(2000, 1, 1))) == []           # naive times are UTC


def test_unknown_filters_and_bad_values_are_clear_errors(store):
    with pytest.raises(ValueError, match="^colour: no such column"):
        store.list(colour="blue")
    with pytest.raises(ValueError, match="^since: "):
        store.list(since="yesterday")
    with pytest.raises(ValueError, match="^tags: "):
        store.list(tags="a,b")


def test_load_gives_back_the_run_with_its_name_and_tags(store, runs):
    back = store.load("slow")
    assert back.done and back.error is None
    assert back.frame.equals(runs["slow"].frame)
    assert back.summary == runs["slow"].summary
    assert back.histogram.counts == runs["slow"].histogram.counts
    assert back.spec == runs["slow"].spec and back.env == runs["slow"].env
    assert (back.name, back.tags, back.note) == ("slow", ["vm", "paced"], "ten thousand per second")
    assert "slow" in store and "nope" not in store and "../x" not in store
    assert len(store) == 3 and sorted(store) == ["fast", "lat", "slow"]


def test_missing_names_say_what_is_there(store):
    with pytest.raises(KeyError, match="no run called 'slo' .*similar: slow"):
        store.load("slo")
    with pytest.raises(KeyError):
        store.delete("nothing")


@pytest.mark.parametrize("bad", ["", "../escape", "a/b", "x.parquet", ".hidden", "with space", "a" * 121])
def test_bad_names_are_refused_before_anything_is_written(store, runs, bad):
    before = sorted(p.name for p in store.path.iterdir())
    with pytest.raises(ValueError, match="^name: "):
        store.save(runs["slow"], name=bad)
    assert sorted(p.name for p in store.path.iterdir()) == before


def test_a_name_is_not_overwritten_unless_asked(store, runs):
    with pytest.raises(ValueError, match="already stored"):
        store.save(runs["fast"], name="slow")
    assert store.load("slow").summary == runs["slow"].summary
    store.save(runs["fast"], name="slow", overwrite=True, tags="replaced")
    assert store.load("slow").summary == runs["fast"].summary
    assert store.list(name="slow")["tags"].to_list() == [["replaced"]]   # the listing cache notices


def test_default_names_are_test_and_start_time_and_unique(tmp_path, runs):
    st = perfkit.Store(tmp_path / "s")
    a = st.save(runs["slow"])
    b = st.save(runs["slow"])
    stamp = dt.datetime.fromisoformat(runs["slow"].env["started_utc"]).strftime("%Y%m%d-%H%M%S")
    assert a == f"udp_bw-{stamp}" and b == f"udp_bw-{stamp}-2"
    assert sorted(st.list()["name"].to_list()) == sorted([a, b])


def test_bad_tags_and_unfinished_runs_are_refused(store, runs):
    for tags in (["ok", ""], [" padded"], ["a,b"], [3]):
        with pytest.raises(ValueError, match="^tags: "):
            store.save(runs["slow"], name="t", tags=tags)
    with pytest.raises(ValueError, match="^run: .*not finished"):
        store.save(perfkit.Run(LocalTest("udp_bw", duration="1s")), name="t")
    assert "t" not in store


def test_foreign_files_are_skipped_and_renamed_files_keep_their_new_name(store):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"x": [1, 2]}), store.path / "foreign.parquet")
    (store.path / "broken.parquet").write_bytes(b"PAR1 not really")
    shutil.copy(store.path / "fast.parquet", store.path / "fast-copy.parquet")
    df = store.list()
    assert sorted(df["name"].to_list()) == ["fast", "fast-copy", "lat", "slow"]
    assert store.load("fast-copy").name == "fast-copy"
    store.delete("fast-copy")
    assert "fast-copy" not in store.list()["name"].to_list()


def test_a_store_path_that_is_a_file_is_an_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="^path: .*not a folder"):
        perfkit.Store(f)


# ------------------------------------------------------------------ compare
def test_compare_table_has_key_figures_and_ratios_to_the_first(runs):
    cmp = perfkit.compare([runs["slow"], runs["fast"]], names=["10k", "30k"])
    t = cmp.table
    assert t["name"].to_list() == ["10k", "30k"]
    assert t["rate"].to_list() == ["10 kpps", "30 kpps"]
    for k in cmp.keys:  # the socket figures (HTTP's are for HTTP runs: tests/test_http_compare.py)
        assert k in t.columns and k + "_ratio" in t.columns
    assert t["rx_pps"].to_list() == pytest.approx([runs["slow"].summary["rx_pps"], runs["fast"].summary["rx_pps"]])
    assert t["rx_pps_ratio"].to_list()[0] == 1.0
    assert t["rx_pps_ratio"].to_list()[1] == pytest.approx(3.0, rel=0.05)   # paced: 30k / 10k
    assert t["rx_bps_ratio"].to_list()[1] == pytest.approx(3.0, rel=0.05)
    assert t["cpu_pct_ratio"].to_list()[1] == pytest.approx(
        runs["fast"].summary["cpu_pct"] / runs["slow"].summary["cpu_pct"])
    # no loss on loopback at these rates: a ratio to 0 is missing, not infinite
    if runs["slow"].summary["loss_pct"] == 0:
        assert t["loss_pct_ratio"].to_list() == [None, None]


def test_compare_works_on_loaded_and_stored_runs_alike(store, runs, tmp_path):
    direct = perfkit.compare([runs["slow"], runs["fast"]], names=["slow", "fast"]).table
    stored = store.compare("slow", "fast").table
    paths = perfkit.compare([store.path / "slow.parquet", store.path / "fast.parquet"],
                            names=["slow", "fast"]).table
    assert stored.equals(direct) and paths.equals(direct)
    assert store.compare(["lat", "slow"]).names == ["lat", "slow"]   # store names by default


def test_compare_argument_errors(runs):
    with pytest.raises(ValueError, match="^names: 1 names for 2 runs"):
        perfkit.compare([runs["slow"], runs["fast"]], names=["only one"])
    with pytest.raises(ValueError, match="^runs: nothing"):
        perfkit.compare([])
    with pytest.raises(ValueError, match="^runs: .*not finished"):
        perfkit.compare([perfkit.Run(LocalTest("udp_bw", duration="1s"))])
    with pytest.raises(TypeError, match="^runs: "):
        perfkit.compare([42])
    with pytest.raises(ValueError, match="^keys: 'nope'"):
        perfkit.compare([runs["slow"]], keys=["rx_pps", "nope"])
    same = perfkit.compare([runs["slow"], runs["slow"]], names=["a", "a"])
    assert same.names == ["a", "a (2)"]


def test_cdf_points_come_from_the_histogram(runs):
    h = runs["lat"].histogram
    x, y = cdf_points(h)
    assert y[0] == 0.0 and y[-1] == pytest.approx(100.0)
    assert all(b >= a for a, b in zip(y, y[1:])) and all(b > a for a, b in zip(x, x[1:]))
    # the 50% crossing is the histogram's median bucket
    p50_us = h.percentile(0.5) / 1000
    first_over = next(xi for xi, yi in zip(x, y) if yi >= 50)
    assert first_over >= p50_us and x[y.index(next(v for v in y if v >= 50)) - 1] <= p50_us
    assert cdf_points(perfkit.Histogram()) == ([], [])


def test_compare_figure_has_rates_cdfs_p99_and_the_table(runs):
    cmp = perfkit.compare([runs["slow"], runs["fast"], runs["lat"]], names=["slow", "fast", "lat"])
    fig = cmp.figure()
    scatters = [t for t in fig.data if t.type == "scatter"]
    tables = [t for t in fig.data if t.type == "table"]
    assert len(scatters) == 4 * 3 and len(tables) == 1
    by_run = {}
    for t in scatters:
        by_run.setdefault(t.legendgroup, []).append(t)
    assert sorted(by_run) == ["fast", "lat", "slow"]
    slow = by_run["slow"]
    assert list(slow[0].x) == runs["slow"].frame["time_s"].to_list()
    assert list(slow[0].y) == runs["slow"].frame["bits_rx_per_s"].to_list()
    assert list(slow[1].y) == runs["slow"].frame["pkts_rx_per_s"].to_list()
    assert (list(slow[2].x), list(slow[2].y)) == cdf_points(runs["slow"].histogram)
    assert fig.layout.xaxis3.type == "log"
    cells = tables[0].cells.values
    assert list(cells[0]) == ["slow", "fast", "lat"]
    assert "×)" in cells[1][1] and "×" not in cells[1][0]      # ratios on the later rows only
    assert sum(1 for t in scatters if t.showlegend) == 3       # one legend entry per run
    assert (fig.layout.yaxis.title.text, fig.layout.yaxis2.title.text, fig.layout.yaxis4.title.text) == \
        ("bit/s", "pkt/s", "p99 (µs)")
    # shown as a cell's result: plotly's HTML (nbconvert, nbviewer) and a PNG (GitHub) beside the JSON
    bundle = fig._repr_mimebundle_()
    assert "Plotly.newPlot" in bundle["text/html"] and "application/vnd.plotly.v1+json" in bundle
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ HTML reports
PLOTLY_HEADER = re.compile(r"\* plotly\.js v\d+\.\d+\.\d+")


def _external_refs(text: str) -> list[str]:
    """src=/href= attributes in HTML tags that point off the page."""
    refs = re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?([^\"' >]+)", text, re.I)
    return [r for r in refs if not r.startswith(("#", "data:"))]


def test_run_report_is_self_contained_html_with_everything(runs, tmp_path):
    r = runs["slow"]
    path = r.report(tmp_path / "slow.html")
    assert path == str(tmp_path / "slow.html")
    text = (tmp_path / "slow.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert len(PLOTLY_HEADER.findall(text)) == 1            # plotly.js inlined exactly once
    assert _external_refs(text) == []                       # no script, style or image from elsewhere
    assert text.count('class="plotly-graph-div"') == 2      # the run charts and the histogram
    for needle in ("Summary", "Spec", "Environment", "Per-second rows", "send_bw", "10 kpps",
                   r.env["host"], r.env["kernel"], r.env["started_utc"], f"{r.summary['pkts_tx']:,}"):
        assert needle in text, needle
    # the chart data is the run's own rows
    assert json.dumps(r.frame["pkts_rx_per_s"].to_list()[:2])[1:-1].split(",")[0] in text


def test_comparison_report_and_escaping(runs, store, tmp_path):
    cmp = store.compare("slow", "fast", "lat")
    path = cmp.report(tmp_path / "cmp.html", title="<slow> & fast")
    text = open(path, encoding="utf-8").read()
    assert len(PLOTLY_HEADER.findall(text)) == 1 and _external_refs(text) == []
    assert "&lt;slow&gt; &amp; fast" in text and "<slow>" not in text
    assert text.count('class="plotly-graph-div"') == 1
    for needle in ("rx_pps_ratio", "slow", "fast", "lat", "spec and environment", "tcp_lat"):
        assert needle in text, needle
    # a list of runs makes the same kind of page
    from perfkit.ui import html_report
    p2 = html_report([runs["slow"], runs["fast"]], tmp_path / "list.html")
    assert "comparison: 1: udp_bw 200 vs 2: udp_bw 200" in open(p2, encoding="utf-8").read()


def test_report_refuses_unfinished_runs_and_other_things(tmp_path):
    with pytest.raises(ValueError, match="not finished"):
        perfkit.Run(LocalTest("udp_bw", duration="1s")).report(tmp_path / "x.html")
    from perfkit.ui import html_report
    with pytest.raises(TypeError):
        html_report(42, tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()


# ------------------------------------------------------------------ the store widget
def test_store_browser_filters_picks_compares_and_reports(store, tmp_path):
    pytest.importorskip("ipywidgets")
    pytest.importorskip("plotly")
    import perfkit.ui
    b = perfkit.ui.StoreBrowser(store.path, report_dir=tmp_path / "reports")
    shown = lambda: sorted(v for _, v in b.runs.options)  # noqa: E731
    assert shown() == ["fast", "lat", "slow"]
    assert list(b.test.options) == ["(all)", "tcp_lat", "udp_bw"]
    assert list(b.engine.options) == ["(all)", "socket"]
    assert b.compare_button.disabled and b.report_button.disabled
    assert "3 of 3 runs shown, 0 picked" in b.status.value
    b.test.value = "udp_bw"                         # as a person picks it
    assert shown() == ["fast", "slow"]
    b.text.value = "thousand"
    assert shown() == ["slow"]
    b.set_filters(test="udp_bw")
    b.select("slow", "fast")
    assert b.selected == ["slow", "fast"] and not b.compare_button.disabled
    cmp = b.compare()
    assert cmp is b.comparison and cmp.names == ["slow", "fast"]
    kinds = [list(o["data"]) for o in b.output.outputs]
    assert "text/html" in kinds[0] and "application/vnd.plotly.v1+json" in kinds[1]
    assert "Plotly.newPlot" in b.output.outputs[1]["data"]["text/html"]   # nbviewer draws it without a kernel
    assert "image/png" not in kinds[1]                                    # widget state: GitHub never shows it
    assert "ratios are to slow" in b.status.value
    path = b.report()
    assert path.endswith("compare-slow-vs-fast.html") and (tmp_path / "reports").is_dir()
    assert len(PLOTLY_HEADER.findall(open(path, encoding="utf-8").read())) == 1
    b.set_filters(text="ten")                        # a picked run outside the filter is dropped
    assert b.selected == ["slow"]
    with pytest.raises(ValueError, match="^select: 'lat' is not among"):
        b.select("lat")
    with pytest.raises(ValueError, match="^test: 'http' is not among"):
        b.set_filters(test="http")


def test_store_browser_sees_new_runs_on_refresh_and_shows_errors(store, runs, tmp_path):
    pytest.importorskip("ipywidgets")
    import perfkit.ui
    b = perfkit.ui.StoreBrowser(store)
    store.save(runs["lat"], name="lat2", tags="new")
    assert "lat2" not in [v for _, v in b.runs.options]
    b.refresh_button.click()
    assert "lat2" in [v for _, v in b.runs.options]
    b.compare_button.click()                          # nothing picked: a message, no exception
    assert "⚠" in b.status.value and "pick at least one" in b.status.value
    b.select("lat2")
    b.compare_button.click()
    assert b.comparison.names == ["lat2"]
