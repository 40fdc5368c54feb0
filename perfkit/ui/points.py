"""Charts of runs that are many short runs: a rate search (one point per trial) and a
qperf-style sweep (one point per test and sweep value).

The figures are plain plotly with a fixed set of traces (search_figure, sweep_figure), so
the live chart (PointsChart: a livefig.LiveFigure redrawn from one background thread, the way
the Dashboard draws a run) and the static figure it leaves at the end are the same figure.
"""
from __future__ import annotations

import dataclasses
import threading
import time

from perfkit.ui.charts import shareable, spec_title, static_bundle
from perfkit.ui.dashboard import LiveChart
from perfkit.ui.livefig import LiveFigure
from perfkit.units import Rate, format_si

POLL_S = 0.1
_PASS, _FAIL, _RX, _LINE = "#2ca02c", "#d62728", "#1f77b4", "#7f7f7f"


# ------------------------------------------------------------------ rate search
def criterion_metric(criterion) -> tuple[str, str, float | None]:
    """What the right-hand chart plots for a criterion: (row key, axis title, the bound or
    None). The first part that is set: loss, then latency, then CPU."""
    if criterion.max_loss is not None:
        return "loss_pct", "loss (%)", criterion.max_loss * 100 if criterion.max_loss else None
    if criterion.lat_stat:
        return f"lat_{criterion.lat_stat}_us", f"latency {criterion.lat_stat} (µs)", criterion.lat_bound_us
    return "cpu_pct_max_worker", "busiest engine worker (% of a core)", criterion.cpu_pct


def _metric(row: dict, key: str):
    return row["loss_ratio"] * 100 if key == "loss_pct" else row.get(key)


def search_title(spec, criterion, rows, state: str, found_pps=None, stopped: str = "") -> str:
    best = max((r["offered_pps"] for r in rows if r["passed"]), default=None)
    if state == "finished":
        what = (f"found {format_si(found_pps, 'pps')}" if found_pps is not None else "nothing passed")
        what += f" after {len(rows)} trials" + (f" ({stopped})" if stopped else "")
    else:
        what = f"{state}, {len(rows)} trials" + (f", best pass {format_si(best, 'pps')}" if best else "")
    return f"<b>rate search {criterion.text}</b>: {spec_title(spec)} — {what}"


def search_figure(spec, criterion=None, rows=None, state: str = "running", found_pps=None, stopped: str = ""):
    """Left: each trial's offered rate (green pass, red fail) and the rate received, with the
    rate found (or the best pass so far) as a line. Right: the criterion's figure against
    the offered rate, with its bound. Always the same 7 traces.

    search_figure(res) draws a finished perfkit.search() result; the panel draws the trials
    so far with (spec, criterion, rows)."""
    import plotly.graph_objects as go  # plotly loads when a figure is first drawn
    from plotly.subplots import make_subplots
    if criterion is None:   # a SearchResult: the title shows the upper bound and the trial length
        res = spec
        spec = dataclasses.replace(res.spec, rate=Rate(res.high_pps, "pps") if res.high_pps else None,
                                   duration=res.trial_s or res.spec.duration)
        criterion, rows, state, found_pps, stopped = res.criterion, res.rows, "finished", res.found_pps, res.stopped
    key, label, bound = criterion_metric(criterion)
    ok = [r for r in rows if r["passed"]]
    bad = [r for r in rows if not r["passed"]]
    best = found_pps if state == "finished" else max((r["offered_pps"] for r in ok), default=None)
    n = len(rows)

    def why(rs):
        return [f"trial {r['trial']}: {r['reason']}" for r in rs]

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("offered and received rate per trial", f"{label} against the offered rate"))
    fig.add_trace(go.Scatter(x=[r["trial"] for r in ok], y=[r["offered_pps"] for r in ok], text=why(ok),
                             name="offered: passed", mode="markers",
                             marker={"color": _PASS, "size": 11, "symbol": "circle"}), 1, 1)
    fig.add_trace(go.Scatter(x=[r["trial"] for r in bad], y=[r["offered_pps"] for r in bad], text=why(bad),
                             name="offered: failed", mode="markers",
                             marker={"color": _FAIL, "size": 11, "symbol": "x"}), 1, 1)
    fig.add_trace(go.Scatter(x=[r["trial"] for r in rows], y=[r["rx_pps"] for r in rows], name="received",
                             mode="lines+markers", line={"color": _RX, "width": 1.5}, marker={"size": 5}), 1, 1)
    fig.add_trace(go.Scatter(x=[0.5, n + 0.5] if best is not None else [], y=[best, best] if best is not None else [],
                             name="found" if state == "finished" else "best pass so far", mode="lines",
                             line={"color": _PASS, "dash": "dash", "width": 1}), 1, 1)
    fig.add_trace(go.Scatter(x=[r["offered_pps"] for r in ok], y=[_metric(r, key) for r in ok], text=why(ok),
                             name="passed", mode="markers", showlegend=False,
                             marker={"color": _PASS, "size": 11, "symbol": "circle"}), 1, 2)
    fig.add_trace(go.Scatter(x=[r["offered_pps"] for r in bad], y=[_metric(r, key) for r in bad], text=why(bad),
                             name="failed", mode="markers", showlegend=False,
                             marker={"color": _FAIL, "size": 11, "symbol": "x"}), 1, 2)
    xs = [r["offered_pps"] for r in rows]
    fig.add_trace(go.Scatter(x=[min(xs), max(xs)] if xs and bound is not None else [],
                             y=[bound, bound] if xs and bound is not None else [],
                             name="bound", mode="lines", line={"color": _LINE, "dash": "dot", "width": 1}), 1, 2)
    fig.update_xaxes(title_text="trial", dtick=1, row=1, col=1)
    fig.update_xaxes(title_text="offered (pps)", tickformat="~s", row=1, col=2)
    fig.update_yaxes(title_text="pps", tickformat="~s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fig.update_layout(title={"text": search_title(spec, criterion, rows, state, found_pps, stopped), "x": 0.01,
                             "font": {"size": 14}},
                      height=400, template="plotly_white", margin={"l": 60, "r": 20, "t": 70, "b": 50},
                      legend={"orientation": "h", "y": -0.2}, uirevision="perfkit")
    return shareable(fig)


# ------------------------------------------------------------------ sweeps
SWEEP_AXES = {"msg_size": "message size (bytes)", "time": "time per point (s)", "rate": "rate",
              "flows": "flows"}


def sweep_figure(spec, option: str, tests, rows, state: str = "running", log_x: bool = True):
    """Bandwidth (received bits/s of the *_bw tests) and latency (qperf's: half the mean
    round trip of the *_lat tests; dotted: the round trip's p99) against the swept option,
    one point per finished test and value. Traces: one bandwidth and two latency per test."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("bandwidth (bits/s received)", "latency (µs)"))
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
    for i, t in enumerate(tests):
        mine = sorted((r for r in rows if r["test"] == t), key=lambda r: r[option])
        c = colours[i % len(colours)]
        bw = t.endswith("_bw")
        fig.add_trace(go.Scatter(x=[r[option] for r in mine] if bw else [],
                                 y=[r.get("rx_bps") for r in mine] if bw else [],
                                 name=f"{t} bandwidth", mode="lines+markers", line={"color": c},
                                 visible=True if bw else "legendonly"), 1, 1)
        fig.add_trace(go.Scatter(x=[r[option] for r in mine] if not bw else [],
                                 y=[r.get("latency_us") for r in mine] if not bw else [],
                                 name=f"{t} latency (half round trip)", mode="lines+markers", line={"color": c},
                                 visible=True if not bw else "legendonly"), 1, 2)
        fig.add_trace(go.Scatter(x=[r[option] for r in mine] if not bw else [],
                                 y=[r.get("lat_p99_us") for r in mine] if not bw else [],
                                 name=f"{t} round trip p99", mode="lines+markers",
                                 line={"color": c, "dash": "dot"}, visible=True if not bw else "legendonly"), 1, 2)
    xaxis = {"title_text": SWEEP_AXES.get(option, option), "tickformat": "~s"}
    if log_x:
        xaxis["type"] = "log"
    fig.update_xaxes(**xaxis)
    fig.update_yaxes(tickformat="~s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)
    fixed = [f"{spec.duration:g} s per point"] if option != "time" else []
    if spec.rate is not None and option != "rate":
        fixed.append(f"rate {spec.rate}")
    title = (f"<b>sweep {option}</b>: {', '.join(tests)} to {spec.host}, {', '.join(fixed)} — "
             f"{state}, {len(rows)} points")
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=400, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 70, "b": 50}, legend={"orientation": "h", "y": -0.2},
                      uirevision="perfkit")
    return shareable(fig)


# ------------------------------------------------------------------ user ladder
def ladder_title(spec) -> str:
    """What a ladder's steps share: the spec's title without its users (each step has its own)."""
    return spec_title(spec).replace(f", {spec.users} users", "")


def ladder_figure(spec, steps: int, rows, state: str = "running"):
    """An HTTP user ladder (perfkit.ladder), one point per finished step against users: TPS,
    mean test time and error rate (nGrinder's three), the steps that failed a threshold red."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=("TPS (responses/s)", "mean test time (ms)", "error rate (%)"))
    rows = sorted(rows, key=lambda r: r["users"])
    x = [r["users"] for r in rows]
    colour = [_FAIL if r.get("passed") is False else _RX for r in rows]
    for col, key in enumerate(("tps", "mean_test_time_ms", "error_rate_pct"), start=1):
        fig.add_trace(go.Scatter(x=x, y=[r.get(key) for r in rows], mode="lines+markers", showlegend=False,
                                 line={"color": _LINE}, marker={"color": colour, "size": 9},
                                 hovertemplate=f"%{{y:.4~s}} at %{{x}} users<extra>{key}</extra>"), 1, col)
    fig.update_xaxes(title_text="virtual users", type="log" if x and max(x) >= 8 * min(x) else "linear")
    fig.update_yaxes(tickformat="~s", rangemode="tozero")
    title = f"<b>user ladder</b>: {ladder_title(spec)} — {state}, {len(rows)} of {steps} steps"
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=380, template="plotly_white",
                      margin={"l": 60, "r": 20, "t": 70, "b": 50}, uirevision="perfkit")
    return fig


# ------------------------------------------------------------------ the live chart
class PointsChart(LiveChart):
    """A live chart of points that arrive one by one from a worker thread (a search's
    trials, a sweep's points), drawn by one thread of its own, ending as a static figure.

        chart = PointsChart(lambda rows, state: search_figure(spec, crit, rows, state))
        chart.attach(output)      # an ipywidgets.Output: the live figure now
        chart.add(row)            # from any thread: queued, drawn within redraw_s
        chart.end(final)          # final(rows) -> the static figure; it replaces the live one

    make_figure(rows, state) builds the whole figure; every call must give the same traces
    (the live redraw copies their data and the title into the widget)."""

    def __init__(self, make_figure, redraw_s: float = 0.5, on_done=None):
        self.make_figure = make_figure
        self.redraw_s = float(redraw_s)
        self._init_live(on_done)
        self.rows: list[dict] = []             # every point, in order (drawing thread)
        self._final = None                     # final(rows) -> static figure, set by end()
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._draw_loop, name="perfkit-points", daemon=True)

    # ------------------------------------------------------------ worker side
    @property
    def points(self) -> int:
        """Points so far: drawn, and arrived but not yet drawn."""
        return len(self.rows) + len(self._inbox)

    def add(self, row: dict) -> None:
        self._inbox.append(row)

    def end(self, final=None) -> None:
        """No more points; final(rows) gives the static figure (default: make_figure(rows, 'finished'))."""
        self._final = final
        self._ended.set()
        if self._thread.ident is None:
            self.start()

    # ------------------------------------------------------------ drawing side
    def _draw_loop(self) -> None:
        try:
            self._show_live(LiveFigure(self.make_figure([], "waiting")))
            next_draw = 0.0
            while True:
                ended = self._ended.is_set()
                if self._inbox and (ended or time.monotonic() >= next_draw):
                    while self._inbox:
                        self.rows.append(self._inbox.popleft())
                    self._redraw(self.make_figure(list(self.rows), "running"))
                    next_draw = time.monotonic() + self.redraw_s
                if ended and not self._inbox:
                    break
                self._ended.wait(POLL_S)
            final = self._final or (lambda rows: self.make_figure(rows, "finished"))
            static = final(list(self.rows))
            self._redraw(static)
            self._finish(static)
        except Exception as exc:  # noqa: BLE001 (a broken chart must never disturb the work or the kernel)
            self._drawing_failed(exc)

    def _redraw(self, made) -> None:
        self.draw_threads.add(threading.get_ident())
        fig = self._figure
        with fig.batch_update():
            for trace, new in zip(fig.data, made.data):
                trace.x, trace.y, trace.text = new.x, new.y, new.text
                trace.name = new.name
            fig.layout.title.text = made.layout.title.text
        self.redraws += 1

    def _finish(self, static) -> None:
        # shown in Outputs only (a panel's): no PNG, which an Output's widget state drops anyway
        self._end_static(static, static_bundle(static, f"<perfkit chart: {len(self.rows)} points>", png=False))

    # ------------------------------------------------------------ public
    def static(self):
        """The static figure (once finished), else one of the points so far."""
        with self._lock:
            if self._static is not None:
                return self._static[0]
        return self.make_figure(list(self.rows), "running")

    def __repr__(self) -> str:
        return f"<perfkit.ui.PointsChart {'finished' if self.finished else 'live'}, {len(self.rows)} points>"
