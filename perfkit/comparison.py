"""Several runs side by side: one table of whole-run figures with ratios to the first
run, and one figure (rates over time, latency CDFs from the histograms, the table).

    cmp = perfkit.compare([direct, impaired], names=["direct", "10 ms + 1% loss"])
    cmp.table            # polars: one row per run; rx_bps, ..., and rx_bps_ratio, ... vs the first
                         # (HTTP runs: tps, lat_mean_us, lat_p50_us, lat_p99_us, error_rate_pct, vusers, ...)
    cmp.figure()         # plotly
    cmp.report("cmp.html")   # a self-contained HTML page (perfkit.ui.html_report)

Works on runs made here, loaded with perfkit.load() or taken from a perfkit.Store.
"""
from __future__ import annotations

from pathlib import Path

from perfkit.run import Run, write_report
from perfkit.stats import HTTP_KEY_FIGURES, KEY_FIGURES, LOWER_IS_BETTER
from perfkit.units import format_si, human, rate_text

# one colour per run, in order (plotly's D3 palette)
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")


def _as_run(obj):
    if isinstance(obj, Run):
        if not obj.done:
            raise ValueError(f"runs: {obj!r} has not finished: wait() before comparing it")
        return obj
    if isinstance(obj, (str, Path)):
        return Run.load(obj)
    raise TypeError(f"runs: {obj!r} is not a perfkit.Run or the path of a saved run")


def run_label(run, i: int = 0) -> str:
    """A run's name in a comparison: its store name, else 'test size' and its position."""
    name = getattr(run, "name", None)
    if name:
        return str(name)
    spec = run.spec
    return f"{i + 1}: {getattr(spec, 'test', 'run')} {getattr(spec, 'size', '')}".strip()


def _test(run) -> str | None:
    return (run.summary or {}).get("test") or getattr(run.spec, "test", None)


def cdf_points(hist) -> tuple[list[float], list[float]]:
    """(latency µs, % of samples at or below it) at every non-empty bucket's upper edge,
    starting from 0% at the first bucket's lower edge."""
    if hist is None or hist.count == 0:
        return [], []
    total = hist.count
    nz = hist.nonzero()
    x, y, seen = [hist.LOWER[nz[0][0]] / 1000.0], [0.0], 0
    for i, c in nz:
        seen += c
        x.append(hist.upper(i) / 1000.0)
        y.append(100.0 * seen / total)
    return x, y


class Comparison:
    """Runs lined up: .runs, .names, .table, .figure(), .report(path)."""

    def __init__(self, runs, names=None, keys=None):
        runs = [_as_run(r) for r in runs]
        if not runs:
            raise ValueError("runs: nothing to compare (give at least one run)")
        self.http = all(_test(r) == "http" for r in runs)
        if keys is None:  # HTTP load runs: nGrinder's figures; else the socket/DPDK ones
            keys = HTTP_KEY_FIGURES if self.http else KEY_FIGURES[:KEY_FIGURES.index("tps")]
        if names is None:
            names = [run_label(r, i) for i, r in enumerate(runs)]
        else:
            names = [str(n) for n in names]
            if len(names) != len(runs):
                raise ValueError(f"names: {len(names)} names for {len(runs)} runs")
        if len(set(names)) != len(names):   # keep them apart in legends and the table
            seen: dict[str, int] = {}
            out = []
            for n in names:
                seen[n] = seen.get(n, 0) + 1
                out.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
            names = out
        unknown = [k for k in keys if k not in KEY_FIGURES]
        if unknown:
            raise ValueError(f"keys: {unknown[0]!r} is not one of {', '.join(KEY_FIGURES)}")
        self.runs, self.names, self.keys = runs, names, tuple(keys)
        self._table = None

    # ------------------------------------------------------------------ table
    @property
    def table(self):
        """One row per run: name, test, size, rate, duration, host, engine, the key figures,
        and <figure>_ratio = this run's figure / the first run's (null where either is
        missing or the first is 0). Ratios above 1 are better for rates, worse for
        latency, loss and CPU (LOWER_IS_BETTER)."""
        if self._table is None:
            import polars as pl  # polars and plotly load when a table or a figure is first asked for
            rows = []
            base = self.runs[0].summary or {}
            for name, run in zip(self.names, self.runs):
                s = run.summary or {}
                spec = run.spec.to_dict() if hasattr(run.spec, "to_dict") else {}
                row = {"name": name, "test": s.get("test") or spec.get("test"), "size": spec.get("size"),
                       "rate": rate_text(spec), "duration_s": s.get("duration_s"),
                       "host": run.env.get("host"), "engine": run.engine_name, "error": run.error}
                for k in self.keys:
                    row[k] = _num(s.get(k))
                for k in self.keys:
                    a, b = _num(s.get(k)), _num(base.get(k))
                    row[k + "_ratio"] = a / b if a is not None and b not in (None, 0.0) else None
                rows.append(row)
            schema = {"name": pl.String, "test": pl.String, "size": pl.Int64, "rate": pl.String,
                      "duration_s": pl.Float64, "host": pl.String, "engine": pl.String, "error": pl.String}
            schema.update({k: pl.Float64 for k in self.keys})
            schema.update({k + "_ratio": pl.Float64 for k in self.keys})
            self._table = pl.DataFrame(rows, schema=schema, orient="row")
        return self._table

    # ------------------------------------------------------------------ figure
    def figure(self, title: str | None = None):
        """A plotly Figure: received bits/s and packets/s over time (one line per run),
        latency CDFs from the histograms (log µs), p99 latency over time, and the key
        figures as a table with ratios to the first run."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        # HTTP runs: responses/s and failed requests/s; else received bits/s and packets/s
        top = (("http_resp_per_s", "responses/s (TPS)", "resp/s"), ("http_err_per_s", "failed requests/s", "err/s")
               ) if self.http else (("bits_rx_per_s", "received bits/s", "bit/s"),
                                    ("pkts_rx_per_s", "received packets/s", "pkt/s"))
        chart_h, table_h = 330, 60 + 30 * len(self.runs)   # pixels
        height = 2 * chart_h + table_h + 200                  # + titles, axes, legend, gaps
        fig = make_subplots(
            rows=3, cols=2, row_heights=[chart_h, chart_h, table_h], vertical_spacing=0.1 * 900 / height,
            horizontal_spacing=0.09,
            specs=[[{}, {}], [{}, {}], [{"type": "table", "colspan": 2}, None]],
            subplot_titles=[top[0][1], top[1][1], "latency CDF (from the histogram)",
                            "p99 latency over time (µs)", ""])
        for i, (name, run) in enumerate(zip(self.names, self.runs)):
            colour = COLOURS[i % len(COLOURS)]
            frame = run.frame
            t = frame["time_s"].to_list() if "time_s" in frame.columns else []

            def col(c):
                return frame[c].to_list() if c in frame.columns else [None] * len(t)
            common = {"legendgroup": name, "line": {"color": colour, "width": 1.6}, "mode": "lines+markers",
                      "marker": {"size": 4}}
            for c, (column, _, unit) in enumerate(top, start=1):
                fig.add_trace(go.Scatter(x=t, y=col(column), name=name, showlegend=c == 1,
                                         hovertemplate=f"{name}: %{{y:.4~s}} {unit} at %{{x:.1f}} s<extra></extra>",
                                         **common), row=1, col=c)
            cx, cy = cdf_points(run.histogram)
            fig.add_trace(go.Scatter(x=cx, y=cy, name=name, showlegend=False, legendgroup=name, mode="lines",
                                     line={"color": colour, "width": 1.8, "shape": "hv"},
                                     hovertemplate=f"{name}: %{{y:.4g}}% ≤ %{{x:.4~s}} µs<extra></extra>"),
                          row=2, col=1)
            fig.add_trace(go.Scatter(x=t, y=col("lat_p99_us"), name=name, showlegend=False,
                                     hovertemplate=f"{name}: p99 %{{y:.4~s}} µs at %{{x:.1f}} s<extra></extra>",
                                     **common), row=2, col=2)
        fig.add_trace(self._table_trace(), row=3, col=1)
        fig.update_yaxes(row=1, col=1, tickformat="~s", rangemode="tozero")
        fig.update_yaxes(row=1, col=2, tickformat="~s", rangemode="tozero")
        fig.update_xaxes(row=1, col=1, title_text="time (s)")
        fig.update_xaxes(row=1, col=2, title_text="time (s)")
        fig.update_xaxes(row=2, col=1, type="log", title_text="latency (µs)")
        fig.update_yaxes(row=2, col=1, range=[0, 100.5], title_text="% of samples ≤")
        fig.update_xaxes(row=2, col=2, title_text="time (s)")
        fig.update_yaxes(row=2, col=2, type="log")
        if title is None:
            title = "<b>comparison</b> — " + " vs ".join(self.names)
        fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height,
                          template="plotly_white", margin={"l": 55, "r": 20, "t": 70, "b": 30},
                          legend={"orientation": "h", "y": 1.04, "x": 0.0, "yanchor": "bottom"})
        return fig

    def _table_trace(self):
        import plotly.graph_objects as go
        header = ["run"] + [LABELS.get(k, k) for k in self.keys]
        cells = [[n for n in self.names]]
        tab = self.table
        for k in self.keys:
            col = []
            for v, r in zip(tab[k].to_list(), tab[k + "_ratio"].to_list()):
                text = fmt(k, v)
                if r is not None and len(col) > 0:
                    text += f" ({r:.3g}×)"
                col.append(text)
            cells.append(col)
        return go.Table(columnwidth=[2.2] + [1.0] * len(self.keys),
                        header={"values": header, "fill": {"color": "#eef"}, "align": "left",
                                "font": {"size": 11}},
                        cells={"values": cells, "align": "left", "font": {"size": 11}, "height": 24})

    # ------------------------------------------------------------------ output
    def report(self, path, title: str | None = None) -> str:
        """A self-contained HTML page of this comparison (no network needed to open it):
        perfkit.ui.html_report's, which renders it."""
        return write_report(self, path, title=title)

    def _repr_html_(self):
        return self.table._repr_html_()

    def __repr__(self) -> str:
        return f"<perfkit.Comparison of {len(self.runs)} runs: {', '.join(self.names)}>"


def compare(runs, names=None, keys=None) -> Comparison:
    """Compare finished runs (Run objects or paths of saved runs); the first is the baseline.
    keys: the figures to line up (default: HTTP_KEY_FIGURES when every run is an HTTP load,
    else the socket/DPDK figures of KEY_FIGURES)."""
    return Comparison(runs, names=names, keys=keys)


# ---------------------------------------------------------------- formatting
LABELS = {"rx_pps": "rx pkt/s", "rx_bps": "rx bit/s", "msg_rate": "msg/s", "loss_pct": "loss %",
          "latency_us": "latency", "lat_p50_us": "p50", "lat_p99_us": "p99",
          "lat_max_us": "max", "jitter_us": "jitter", "cpu_pct": "cpu %", "tps": "TPS",
          "lat_mean_us": "mean", "error_rate_pct": "error %", "vusers": "users"}


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def fmt(key: str, v) -> str:
    """A key figure as text: SI prefixes for rates, 3 digits for the rest, '-' for none."""
    if v is None:
        return "-"
    if key in ("rx_pps", "rx_bps", "msg_rate", "tx_pps", "tx_bps", "tps"):
        return format_si(v)
    if key.endswith("_us"):   # 20200 µs reads as 20.2 ms
        return human(v, "µs")
    return f"{v:.3g}"


__all__ = ["Comparison", "HTTP_KEY_FIGURES", "KEY_FIGURES", "LOWER_IS_BETTER", "cdf_points", "compare"]
