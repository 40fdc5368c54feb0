"""The dashboard figures as objects: one colour per metric in every chart, a legend per panel,
units on every axis, whole-number ticks for counts, 'none' on an empty panel, no partial
interval at the end, and the latency histogram's percentile markers.

The rows and the histogram come from a real run on loopback (tcp_lat) where a run is needed;
the rest reads the layouts and figures themselves.
"""
from __future__ import annotations

import pytest

pytest.importorskip("plotly")

import perfkit  # noqa: E402
from perfkit import LocalTest  # noqa: E402
from perfkit.ui import charts  # noqa: E402


def _layouts():
    return list(charts.LAYOUTS.items())


def test_every_metric_has_one_colour_in_every_chart_and_panels_tell_their_traces_apart():
    colour_of_name, colour_of_column = {}, {}
    for layout, panels in _layouts():
        for title, _, lines in panels:
            colours = [line.colour for line in lines]
            assert len(set(colours)) == len(colours), (layout, title, colours)   # no two alike in a panel
            for line in lines:
                assert line.colour.startswith("#"), (layout, line)
                assert colour_of_name.setdefault(line.name, line.colour) == line.colour, (layout, line.name)
                if isinstance(line.key, str):
                    assert colour_of_column.setdefault(line.key, line.colour) == line.colour, (layout, line.key)
                    if line.key in charts.COLOURS:
                        assert line.colour == charts.COLOURS[line.key], (layout, line.key)
    # the same metric drawn from a function (ms from µs, a sum) keeps its column's colour
    http = dict((t, lines) for t, _, lines in charts.HTTP_PANELS)
    assert http["response time (ms)"][1].colour == charts.COLOURS["lat_p99_us"] == charts._LATENCY[1].colour


@pytest.mark.parametrize("layout", sorted(charts.LAYOUTS))
def test_each_panel_has_its_own_legend_and_every_axis_its_unit(layout):
    panels = charts.LAYOUTS[layout]
    fig = charts.empty_figure("t", panels)
    names = ["legend"] + [f"legend{p + 1}" for p in range(1, len(panels))]
    i = 0
    for p, (title, _, lines) in enumerate(panels):
        n = "" if p == 0 else str(p + 1)
        for _ in lines:
            assert (fig.data[i].legend or "legend") == names[p], (title, fig.data[i].name)
            i += 1
        legend = fig.layout[names[p]]
        x, y = fig.layout["xaxis" + n].domain, fig.layout["yaxis" + n].domain
        # beside its own plot, at its top: right of it and left of the next column's plot
        assert x[1] < legend.x < x[1] + 0.05 and legend.xanchor == "left" and legend.y == y[1], title
        unit = fig.layout["yaxis" + n].title.text
        assert unit, title
        assert unit == charts.axis_unit(title)
    rows = (len(panels) + charts.COLS - 1) // charts.COLS
    bottom = [fig.layout["xaxis" + ("" if p == 0 else str(p + 1))].title.text for p in range(len(panels))
              if p // charts.COLS + 1 == rows]
    assert bottom and all(t == "time (s)" for t in bottom)


@pytest.fixture(scope="module")
def run():
    return perfkit.run(LocalTest("tcp_lat", duration="1.5s"), interval=0.25)


def test_a_finished_run_has_no_partial_interval_at_the_end(run):
    rows = charts.plot_rows(run)
    fig = charts.run_figure(run)
    assert rows and rows[-1]["time_s"] <= 1.5 + 1e-3                  # nothing after the planned end
    assert all(r["interval_s"] >= 0.5 * 0.25 - 1e-9 for r in rows)   # no short last row left to spike
    # the rate at the end is the run's, not a cliff to zero
    rate = [r.get("pkts_rx_per_s") or 0.0 for r in rows]
    assert rate[-1] and rate[-1] > 0.2 * max(rate)
    assert [len(t.x) for t in fig.data] == [len(rows)] * len(fig.data)


def test_count_axes_get_whole_ticks_and_empty_panels_say_none(run):
    panels = charts.PANELS
    fig = charts.run_figure(run)
    titles = [p[0] for p in panels]
    errors = titles.index("errors/s")
    axis = fig.layout["yaxis" + str(errors + 1)]
    # tcp_lat loses nothing: the errors panel is empty, 0..1 without ticks, with 'none' in it
    assert list(axis.range) == [0, 1] and axis.showticklabels is False
    notes = [a for a in fig.layout.annotations if a.text == "none"]
    assert any(a.xref == f"x{errors + 1} domain" for a in notes)
    # small whole numbers (a count of connections): dtick 1, no '0.5 connections'
    small = charts.empty_figure("t", panels)
    ys = [[0.0, 2.0, 3.0] if i == 0 else [] for i in range(len(small.data))]
    charts.fit_axes(small, panels, ys)
    assert small.layout.yaxis.dtick == 1
    ys[0] = [0.5, 2.5]
    charts.fit_axes(small, panels, ys)
    assert small.layout.yaxis.dtick is None


def test_the_latency_histogram_marks_p50_p99_and_p999(run):
    hist = run.histogram
    fig = charts.histogram_figure(run)
    marks = {t.name.split()[0]: t for t in fig.data[1:]}
    assert set(marks) == {"p50", "p99", "p99.9"}
    for name, q, metric in charts.PERCENTILE_MARKS:
        v = hist.percentile(q) / 1000.0
        assert list(marks[name].x) == [v, v] and marks[name].line.color == charts.COLOURS[metric]
        assert marks[name].name == f"{name} {charts.time_text(v)}" and marks[name].name in fig.layout.title.text
    assert marks["p50"].x[0] <= marks["p99"].x[0] <= marks["p99.9"].x[0]
    assert charts.time_text(12.23) == "12.2 µs" and charts.time_text(2260.0) == "2.26 ms"
    assert sum(fig.data[0].y) == pytest.approx(100.0)
    assert fig.layout.xaxis.title.text == "latency (µs)" and fig.layout.yaxis.title.text == "% of samples"


_PNG_PROBE = """
import json
import plotly.graph_objects as go
from perfkit import staticfig
fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[3, 1, 2]), layout={"height": 300})
first = staticfig.static_bundle(fig)
second = staticfig.static_bundle(fig)
print(json.dumps([sorted(first), sorted(second), staticfig.png_state()[0]]))
"""


@pytest.mark.parametrize("browser", [True, False], ids=["chromium", "no-browser"])
def test_a_finished_figure_carries_a_png_or_says_once_why_not(browser):
    """With Chromium each figure has a PNG; with none where PERFKIT_CHROMIUM says, one line on
    stderr (once, not per figure) and the figures keep their HTML. A process of its own: the
    browser is kept per process."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    pytest.importorskip("kaleido")
    if browser and not shutil.which("chromium"):
        pytest.skip("no chromium on PATH (install.sh installs it as root)")
    env = dict(os.environ, PERFKIT_CHROMIUM=shutil.which("chromium") if browser else "/nonexistent/chromium")
    out = subprocess.run([sys.executable, "-c", _PNG_PROBE], env=env, capture_output=True, text=True,
                         timeout=180, cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    keys = ["application/vnd.plotly.v1+json", "text/html", "text/plain"]
    first, second, state = json.loads(out.stdout)
    if browser:
        assert first == second == sorted([*keys, "image/png"]) and state == "on"
        assert "no PNG" not in out.stderr
    else:
        assert first == second == keys and state == "off"
        lines = [ln for ln in out.stderr.splitlines() if "no PNG" in ln]
        assert len(lines) == 1 and "their HTML remains" in lines[0] and "/nonexistent/chromium" in lines[0], out.stderr
