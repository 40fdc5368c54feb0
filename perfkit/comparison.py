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

from perfkit.ladder import Ladder
from perfkit.run import Run, write_report
from perfkit.staticfig import shareable
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

    def __init__(self, runs, names=None, keys=None, hosts: bool = False):
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
        self.per_host = bool(hosts)   # a row per host of a cluster run beside its total
        self._table = None

    # ------------------------------------------------------------------ table
    @property
    def table(self):
        """One row per run: name, test, size, rate, duration, host, engine, the key figures,
        and <figure>_ratio = this run's figure / the first run's (null where either is
        missing or the first is 0). Ratios above 1 are better for rates, worse for
        latency, loss and CPU (LOWER_IS_BETTER).
        Made with hosts=True: a part column, and after each run's total row ("total") a row per
        host of a cluster run (perfkit.cluster: its host's own summary), each ratio against the
        first run's same part (its total, or its host of that name)."""
        if self._table is None:
            import polars as pl  # polars and plotly load when a table or a figure is first asked for
            rows = []
            base = self.runs[0].summary or {}
            base_hosts = base.get("hosts") or {}
            for name, run in zip(self.names, self.runs):
                s = run.summary or {}
                rows.append(self._row(name, run, s, base, "total"))
                if self.per_host:
                    rows.extend(self._row(name, run, hs, base_hosts.get(h) or {}, h)
                                for h, hs in (s.get("hosts") or {}).items())
            schema = {"name": pl.String, "test": pl.String, "size": pl.Int64, "rate": pl.String,
                      "duration_s": pl.Float64, "host": pl.String, "engine": pl.String, "error": pl.String}
            if self.per_host:
                schema["part"] = pl.String
            schema.update({k: pl.Float64 for k in self.keys})
            schema.update({k + "_ratio": pl.Float64 for k in self.keys})
            self._table = pl.DataFrame(rows, schema=schema, orient="row")
        return self._table

    def _row(self, name, run, s: dict, base: dict, part: str) -> dict:
        """One table row: a run's total (part "total") or one of its hosts' summaries (s)."""
        spec = run.spec.to_dict() if hasattr(run.spec, "to_dict") else {}
        row = {"name": name, "test": s.get("test") or spec.get("test"), "size": spec.get("size"),
               "rate": rate_text(spec), "duration_s": s.get("duration_s"),
               "host": run.env.get("host") if part == "total" else part, "engine": run.engine_name,
               "error": run.error if part == "total" else s.get("error")}
        if self.per_host:
            row["part"] = part
        for k in self.keys:
            row[k] = _num(s.get(k))
        for k in self.keys:
            a, b = _num(s.get(k)), _num(base.get(k))
            row[k + "_ratio"] = a / b if a is not None and b not in (None, 0.0) else None
        return row

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
        chart_h, table_h = 330, 60 + 30 * len(self.table)   # pixels
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
        fig.update_yaxes(row=1, col=1, tickformat="~s", rangemode="tozero", title_text=top[0][2])
        fig.update_yaxes(row=1, col=2, tickformat="~s", rangemode="tozero", title_text=top[1][2])
        fig.update_xaxes(row=1, col=1, title_text="time (s)")
        fig.update_xaxes(row=1, col=2, title_text="time (s)")
        fig.update_xaxes(row=2, col=1, type="log", title_text="latency (µs)")
        fig.update_yaxes(row=2, col=1, range=[0, 100.5], title_text="% of samples ≤")
        fig.update_xaxes(row=2, col=2, title_text="time (s)")
        fig.update_yaxes(row=2, col=2, type="log", title_text="p99 (µs)")
        if title is None:
            title = "<b>comparison</b> — " + " vs ".join(self.names)
        fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height,
                          template="plotly_white", margin={"l": 55, "r": 20, "t": 70, "b": 30},
                          legend={"orientation": "h", "y": 1.04, "x": 0.0, "yanchor": "bottom"})
        return shareable(fig)   # shown as a cell's result: plotly's HTML and a PNG too

    def _table_trace(self):
        import plotly.graph_objects as go
        header = ["run"] + [LABELS.get(k, k) for k in self.keys]
        tab = self.table
        cells = [[n if not self.per_host or p == "total" else f"{n} · {p}"
                  for n, p in zip(tab["name"].to_list(), tab["part"].to_list() if self.per_host else tab["name"])]]
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


def compare(runs, names=None, keys=None, iface=None, hosts: bool = False):
    """Compare finished runs (Run objects or paths of saved runs); the first is the baseline.
    hosts=True: the table also has a row per host of every cluster run (perfkit.cluster), each
    against the first run's host of that name (Comparison.table says how).
    keys: the figures to line up (default: HTTP_KEY_FIGURES when every run is an HTTP load,
    else the socket/DPDK figures of KEY_FIGURES).
    Ladders (perfkit.ladder results, ladder tables: frames with one row per users, or lists of
    HTTP runs), one per environment, or a dict {environment: ladder}: a LadderComparison, the
    figures pivoted against users (keys: LADDER_METRICS names; iface: the interface whose
    packets count, default each environment's last, the server end)."""
    if isinstance(runs, dict):
        if names is not None:
            raise ValueError("names: give names or a dict of environments, not both")
        names, runs = list(runs), list(runs.values())
    elif isinstance(runs, Ladder) or _is_frame(runs):   # one ladder on its own
        runs = [runs]
    runs = list(runs)
    ladders = [_is_ladder_like(r) for r in runs]
    if runs and all(ladders):
        return LadderComparison(runs, names=names, metrics=keys, iface=iface)
    if any(ladders):
        raise ValueError("runs: give ladders (one per environment) or runs, not a mix")
    if iface is not None:
        raise ValueError("iface: only ladders are compared by interface packets")
    return Comparison(runs, names=names, keys=keys, hosts=hosts)


# ---------------------------------------------------------------- ladders pivoted
# name -> (label, unit): nGrinder's figures and what the host saw, one per step
LADDER_METRICS = {
    "tps": ("TPS", "resp/s"),
    "mean_test_time_ms": ("mean test time", "ms"),
    "error_rate_pct": ("error rate", "%"),
    "host_cpu_busy_pct": ("host CPU busy", "% of all CPUs"),
    "host_cpu_steal_pct": ("host CPU steal", "% of all CPUs"),
    "pkts_in_per_s": ("packets in", "pkt/s"),
    "pkts_out_per_s": ("packets out", "pkt/s"),
    # where the steps recorded them: a watched server process (--watch server=PID, the first watched
    # otherwise) and a lab host's cgroup (the last host with one: the server end), % of one core
    "server_cpu_pct": ("server CPU", "% of one core"),
    "lab_host_cpu_pct": ("server host (cgroup) CPU", "% of one core"),
}
# left out of the default metrics when no step of any environment has them
LADDER_OPTIONAL = ("server_cpu_pct", "lab_host_cpu_pct")


def _is_frame(obj) -> bool:   # a polars DataFrame, without importing polars to ask
    return type(obj).__name__ == "DataFrame" and type(obj).__module__.startswith("polars")


def _is_ladder_like(obj) -> bool:
    if isinstance(obj, Ladder):
        return True
    if _is_frame(obj):
        return True
    return isinstance(obj, (list, tuple)) and len(obj) > 0 and all(isinstance(r, Run) for r in obj)


def _steps(obj, where: str) -> list[tuple[int, dict]]:
    """(users, step summary) per step of a ladder, a ladder table or a list of HTTP runs."""
    if isinstance(obj, Ladder):
        steps = [(u, r.summary or {}) for u, r in zip(obj.users, obj.runs)]
    elif isinstance(obj, (list, tuple)):
        steps = []
        for r in obj:
            if not r.done:
                raise ValueError(f"{where}: {r!r} has not finished: wait() before comparing it")
            s = r.summary or {}
            u = s.get("vusers") if s.get("vusers") is not None else getattr(r.spec, "users", None)
            if not isinstance(u, int) or isinstance(u, bool):
                raise ValueError(f"{where}: {r!r} has no user count (an HTTP load with users=N)")
            steps.append((u, s))
    else:
        if "users" not in obj.columns:
            raise ValueError(f"{where}: the frame has no users column (give a ladder or its .table)")
        steps = [(int(row["users"]), row) for row in obj.iter_rows(named=True) if row["users"] is not None]
    if not steps:
        raise ValueError(f"{where}: the ladder has no steps")
    users = [u for u, _ in steps]
    if len(set(users)) != len(users):
        raise ValueError(f"{where}: users {sorted(users)} repeat (a ladder's .frame has a row per "
                         "interval: give the Ladder or its .table)")
    return steps


def _ifaces(summary: dict) -> list[str]:
    """The interface labels a step's summary has packet rates for, in its order."""
    return [k[3:-7] for k in summary if k.startswith("if_") and k.endswith("_rx_pps")]


def _metric(summary: dict, name: str, iface: str | None):
    s = summary
    if name == "mean_test_time_ms" and _num(s.get(name)) is None and _num(s.get("lat_mean_us")) is not None:
        return _num(s["lat_mean_us"]) / 1000.0
    if name == "host_cpu_busy_pct":   # everything but idle: user, system, softirq, iowait, steal
        idle = _num(s.get("host_cpu_idle_pct_mean"))
        return None if idle is None else 100.0 - idle
    if name == "host_cpu_steal_pct":
        return _num(s.get("host_cpu_steal_pct_mean"))
    if name == "server_cpu_pct":
        keys = [k for k in s if k.startswith("proc_") and k.endswith("_cpu_pct_mean")]
        key = "proc_server_cpu_pct_mean" if "proc_server_cpu_pct_mean" in s else keys[0] if keys else None
        return None if key is None else _num(s.get(key))
    if name == "lab_host_cpu_pct":
        keys = [k for k in s if k.startswith("lab_") and k.endswith("_cpu_pct_mean")]
        return _num(s.get(keys[-1])) if keys else None
    if name in ("pkts_in_per_s", "pkts_out_per_s"):
        return None if iface is None else _num(s.get(f"if_{iface}_{'rx' if name == 'pkts_in_per_s' else 'tx'}_pps"))
    return _num(s.get(name))


class LadderComparison:
    """Ladders side by side, the figures against users, one column and one line per
    environment: .names, .steps, .ifaces, .table (long), .pivot(metric), .wide, .figure(),
    .report(path)."""

    def __init__(self, ladders, names=None, metrics=None, iface=None):
        ladders = list(ladders)
        if not ladders:
            raise ValueError("ladders: nothing to compare (give at least one)")
        names = [f"{i + 1}" for i in range(len(ladders))] if names is None else [str(n) for n in names]
        if len(names) != len(ladders):
            raise ValueError(f"names: {len(names)} names for {len(ladders)} ladders")
        if len(set(names)) != len(names):
            raise ValueError(f"names: {names} repeat (each environment needs its own)")
        metrics_default = metrics is None
        metrics = tuple(LADDER_METRICS) if metrics is None else tuple(metrics)
        unknown = [m for m in metrics if m not in LADDER_METRICS]
        if unknown or not metrics:
            raise ValueError(f"keys: {unknown[0] if unknown else None!r} is not one of {', '.join(LADDER_METRICS)}")
        self.steps = {n: _steps(obj, f"ladder {n!r}") for n, obj in zip(names, ladders)}
        self.names, self.metrics = names, metrics
        self.ifaces: dict[str, str | None] = {}
        for n, steps in self.steps.items():
            have = _ifaces(steps[0][1])
            if iface is not None and iface not in have:
                raise ValueError(f"iface: {n!r} has no packet counts for {iface!r} (it has: {', '.join(have) or 'none'})")
            # the last one followed: h2 (the server end) in a lab, lo on loopback
            self.ifaces[n] = iface if iface is not None else (have[-1] if have else None)
        if metrics_default:   # server and lab host CPU only where some step recorded them
            self.metrics = tuple(m for m in self.metrics if m not in LADDER_OPTIONAL or any(
                _metric(st, m, None) is not None for steps in self.steps.values() for _, st in steps))
        self._table = None

    @property
    def table(self):
        """One row per environment and step: name, users, iface, the metrics (Float64)."""
        if self._table is None:
            import polars as pl
            rows = [{"name": n, "users": u, "iface": self.ifaces[n],
                     **{m: _metric(s, m, self.ifaces[n]) for m in self.metrics}}
                    for n, steps in self.steps.items() for u, s in steps]
            schema = {"name": pl.String, "users": pl.Int64, "iface": pl.String, **{m: pl.Float64 for m in self.metrics}}
            self._table = pl.DataFrame(rows, schema=schema, orient="row")
        return self._table

    def pivot(self, metric: str = "tps"):
        """metric against users: a users column, then one column per environment (null where
        an environment has no step at that user count)."""
        import polars as pl
        if metric not in self.metrics:
            raise ValueError(f"metric: {metric!r} is not one of {', '.join(self.metrics)}")
        users = sorted({u for steps in self.steps.values() for u, _ in steps})
        out = pl.DataFrame({"users": users}, schema={"users": pl.Int64})
        for n in self.names:
            part = self.table.filter(pl.col("name") == n).select("users", pl.col(metric).alias(n))
            out = out.join(part, on="users", how="left")
        return out

    @property
    def wide(self):
        """Every metric side by side: users, then '<metric> <environment>' columns."""
        out = self.pivot(self.metrics[0]).rename({n: f"{self.metrics[0]} {n}" for n in self.names})
        for m in self.metrics[1:]:
            out = out.join(self.pivot(m).rename({n: f"{m} {n}" for n in self.names}), on="users", how="left")
        return out

    def figure(self, metrics=None, title: str | None = None):
        """A plotly Figure: one chart per metric against users (log axis when the users span
        8x or more), one line per environment."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
        metrics = self.metrics if metrics is None else tuple(metrics)
        bad = [m for m in metrics if m not in self.metrics]
        if bad or not metrics:
            raise ValueError(f"metrics: {bad[0] if bad else None!r} is not one of {', '.join(self.metrics)}")
        cols = 2 if len(metrics) > 1 else 1
        rows = (len(metrics) + cols - 1) // cols
        titles = []
        for m in metrics:
            label, unit = LADDER_METRICS[m]
            ifs = sorted({i for i in self.ifaces.values() if i}) if m.startswith("pkts_") else []
            titles.append(f"{label} ({unit})" + (f", on {'/'.join(ifs)}" if ifs else ""))
        fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, vertical_spacing=min(0.12, 0.5 / rows),
                            horizontal_spacing=0.1)
        users = [u for steps in self.steps.values() for u, _ in steps]
        log = min(users) > 0 and max(users) >= 8 * min(users)
        tab = self.table
        for i, n in enumerate(self.names):
            part = tab.filter(tab["name"] == n).sort("users")
            colour = COLOURS[i % len(COLOURS)]
            for j, m in enumerate(metrics):
                fig.add_trace(go.Scatter(x=part["users"].to_list(), y=part[m].to_list(), name=n, legendgroup=n,
                                         showlegend=j == 0, mode="lines+markers",
                                         line={"color": colour, "width": 1.8}, marker={"size": 6},
                                         hovertemplate=f"{n}: %{{y:.4~s}} {LADDER_METRICS[m][1]} at %{{x}} users"
                                                       "<extra></extra>"),
                              row=j // cols + 1, col=j % cols + 1)
        fig.update_xaxes(title_text="users", type="log" if log else "linear")
        fig.update_yaxes(rangemode="tozero", tickformat="~s")
        for j, m in enumerate(metrics):   # the unit on each y axis too (the subplot title has label and unit)
            fig.update_yaxes(title_text=LADDER_METRICS[m][1], row=j // cols + 1, col=j % cols + 1)
        if title is None:
            title = "<b>ladders</b> — " + " vs ".join(self.names)
        height = 130 + 300 * rows
        fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height,
                          template="plotly_white", margin={"l": 55, "r": 20, "t": 90, "b": 40},
                          # above the top row's subplot titles: 28 px over the plotting area
                          legend={"orientation": "h", "y": 1 + 28 / (height - 130), "x": 0.0, "yanchor": "bottom"})
        return shareable(fig)

    def report(self, path, title: str | None = None) -> str:
        """A self-contained HTML page: the figure and the side-by-side table."""
        return write_report(self, path, title=title)

    def _repr_html_(self):
        import polars as pl
        with pl.Config(tbl_cols=-1):   # every environment's column: polars shows 8 by default
            return self.wide._repr_html_()

    def __repr__(self) -> str:
        return (f"<perfkit.LadderComparison of {len(self.names)} ladders: "
                + ", ".join(f"{n} ({len(s)} steps)" for n, s in self.steps.items()) + ">")


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


__all__ = ["Comparison", "HTTP_KEY_FIGURES", "KEY_FIGURES", "LADDER_METRICS", "LOWER_IS_BETTER", "LadderComparison",
           "cdf_points", "compare"]
