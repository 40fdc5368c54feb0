"""RFC 2544's graphs (section 26) from an Rfc2544Result, for its HTML report (perfkit.ui.html):

    throughput_figure     frame rate against frame size: the throughput found, and the upper
                          bound tried as 100% (the RFC's second line is the medium's theoretical
                          rate; perfkit knows the rate it was told to offer, not the medium's)
    trials_figure         each throughput trial's offered rate per frame size, pass or fail
    latency_figure        the RFC's mean and perfkit's percentiles against frame size
    frame_loss_figure     loss % against the offered rate as a % of the upper bound, a line
                          per frame size, both axes 0..100% as the RFC asks
    back_to_back_figure   the longest lossless burst per frame size, min..max as error bars
"""
from __future__ import annotations

import statistics

_PASS, _FAIL = "#2a9d3f", "#d62728"


def _go():
    import plotly.graph_objects as go  # plotly loads when a figure is first drawn
    return go


def _layout(fig, x: str, y: str, title: str, xlog: bool = False) -> None:
    fig.update_layout(title=title, height=380, margin={"l": 60, "r": 20, "t": 50, "b": 50},
                      legend={"orientation": "h", "y": -0.2})
    fig.update_xaxes(title=x, type="log" if xlog else "linear")
    fig.update_yaxes(title=y, rangemode="tozero")


def throughput_figure(res):
    go = _go()
    rows = sorted(res.rows["throughput"], key=lambda r: r["size"])
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[r["size"] for r in rows], y=[r["throughput_fps"] for r in rows],
                             name="throughput (no loss)", mode="lines+markers"))
    fig.add_trace(go.Scatter(x=[r["size"] for r in rows], y=[r["high_fps"] for r in rows],
                             name="upper bound tried (100%)", mode="lines+markers", line={"dash": "dash"}))
    _layout(fig, "frame size (B, FCS counted)", "frames/s", "Throughput (26.1)", xlog=True)
    return fig


def trials_figure(res):
    """The throughput search's trials: a column of markers per frame size, in trial order."""
    go = _go()
    trials = [t for t in res.trial_rows if t["test"] == "throughput"]
    fig = go.Figure()
    for passed, colour, symbol in ((True, _PASS, "circle"), (False, _FAIL, "x")):
        some = [t for t in trials if bool(t["passed"]) is passed]
        fig.add_trace(go.Scatter(
            x=[f"{t['size']} B" for t in some], y=[t["offered_pps"] for t in some],
            text=[f"trial {t['trial']}: {t['reason']}" for t in some], mode="markers",
            name="passed" if passed else "failed", marker={"color": colour, "size": 10, "symbol": symbol}))
    _layout(fig, "frame size", "offered frames/s", "Throughput search: every trial")
    return fig


def latency_figure(res):
    go = _go()
    rows = sorted(res.rows["latency"], key=lambda r: r["size"])
    fig = go.Figure()
    for key, name in (("rfc_mean_us", "RFC mean of the trials"), ("p50_us", "p50"), ("p99_us", "p99"),
                      ("max_us", "max")):
        fig.add_trace(go.Scatter(x=[r["size"] for r in rows], y=[r[key] for r in rows], name=name,
                                 mode="lines+markers"))
    _layout(fig, "frame size (B, FCS counted)", "latency (µs)", "Latency at the throughput rate (26.2)", xlog=True)
    return fig


def frame_loss_figure(res):
    go = _go()
    by: dict[int, list] = {}
    for r in res.rows["frame_loss"]:
        by.setdefault(r["size"], []).append(r)
    fig = go.Figure()
    for size, rows in sorted(by.items()):
        rows = sorted(rows, key=lambda r: r["percent"])
        fig.add_trace(go.Scatter(x=[r["percent"] for r in rows], y=[r["loss_pct"] for r in rows],
                                 name=f"{size} B", mode="lines+markers"))
    _layout(fig, "offered rate (% of the upper bound)", "frames lost (%)", "Frame loss rate (26.3)")
    fig.update_xaxes(range=[0, 100])
    fig.update_yaxes(range=[0, 100])
    return fig


def back_to_back_figure(res):
    go = _go()
    by: dict[int, list] = {}
    for r in res.rows["back_to_back"]:
        by.setdefault(r["size"], []).append(r["burst_frames"])
    sizes = sorted(by)
    means = [statistics.fmean(by[s]) for s in sizes]
    fig = go.Figure(go.Bar(
        x=[f"{s} B" for s in sizes], y=means, name="mean burst (frames)",
        error_y={"type": "data", "symmetric": False, "array": [max(by[s]) - m for s, m in zip(sizes, means)],
                 "arrayminus": [m - min(by[s]) for s, m in zip(sizes, means)]}))
    _layout(fig, "frame size", "frames in the longest lossless burst", "Back-to-back frames (26.4): mean, min..max")
    return fig
