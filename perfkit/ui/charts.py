"""Plotly figures for runs: the dashboard layout (live and static) and the latency histogram.

Everything here is plain plotly: no widgets, no threads. The live dashboard and the
static figure share one layout (PANELS), so what a person watches while a run is going
is what the saved notebook shows afterwards.
"""
from __future__ import annotations

import json

from perfkit.stats import Histogram

# Error counters summed into one "other errors/s" line (their own columns stay in run.frame).
OTHER_ERRORS = ("bad_rx_per_s", "tcp_drop_per_s", "sock_error_per_s", "http_err_per_s",
                "nic_ierrors_per_s", "nic_oerrors_per_s", "nic_imissed_per_s")


def _other_errors(row: dict) -> float:
    return sum(row.get(k) or 0.0 for k in OTHER_ERRORS)


# (subplot title, y-axis options, [(trace name, row key or function of a row, colour)])
PANELS = (
    ("packets/s", {"tickformat": "~s", "rangemode": "tozero"},
     [("tx pkt/s", "pkts_tx_per_s", "#1f77b4"), ("rx pkt/s", "pkts_rx_per_s", "#ff7f0e")]),
    ("bits/s", {"tickformat": "~s", "rangemode": "tozero"},
     [("tx bit/s", "bits_tx_per_s", "#1f77b4"), ("rx bit/s", "bits_rx_per_s", "#ff7f0e")]),
    ("latency (µs)", {"type": "log"},
     [("p50 µs", "lat_p50_us", "#2ca02c"), ("p99 µs", "lat_p99_us", "#d62728"),
      ("max µs", "lat_max_us", "#9467bd")]),
    ("loss (%)", {"rangemode": "tozero"},
     [("loss %", "loss_pct", "#d62728")]),
    ("errors/s", {"tickformat": "~s", "rangemode": "tozero"},
     [("lost/s", "seq_lost_per_s", "#d62728"), ("send drops/s", "drop_tx_per_s", "#8c564b"),
      ("other errors/s", _other_errors, "#7f7f7f")]),
    ("engine CPU (% of one core)", {"rangemode": "tozero"},
     [("cpu %", "cpu_pct", "#17becf")]),
)
COLS = 2
ROWS = (len(PANELS) + COLS - 1) // COLS
HEIGHT = 260 * ROWS


def traces():
    """(panel index, trace name, getter) for every trace, in figure order."""
    out = []
    for p, (_, _, lines) in enumerate(PANELS):
        for name, key, _ in lines:
            getter = key if callable(key) else (lambda row, k=key: row.get(k))
            out.append((p, name, getter))
    return out


def spec_title(spec) -> str:
    """'udp_bw 64 B, unlimited, 10 s' for a LocalTest; repr-ish for anything else."""
    test = getattr(spec, "test", type(spec).__name__)
    parts = [str(test)]
    if getattr(spec, "size", None) is not None:
        parts.append(f"{spec.size} B")
    rate = getattr(spec, "rate", None)
    if hasattr(spec, "rate"):
        parts.append(str(rate) if rate is not None else "unlimited")
    if getattr(spec, "flows", 1) not in (None, 1):
        parts.append(f"{spec.flows} flows")
    if getattr(spec, "duration", None) is not None:
        parts.append(f"{spec.duration:g} s")
    return ", ".join(parts)


def empty_figure(title: str = ""):
    """The dashboard layout with every trace present and no points."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=ROWS, cols=COLS, subplot_titles=[p[0] for p in PANELS],
                        vertical_spacing=0.11, horizontal_spacing=0.08)
    for p, (title_p, yopts, lines) in enumerate(PANELS):
        r, c = p // COLS + 1, p % COLS + 1
        for name, _, colour in lines:
            fig.add_trace(go.Scatter(x=[], y=[], name=name, mode="lines+markers",
                                     marker={"size": 4}, line={"color": colour, "width": 1.5},
                                     legendgroup=title_p,
                                     hovertemplate=f"{name} %{{y:.4~s}} at %{{x:.1f}} s<extra></extra>"),
                          row=r, col=c)
        fig.update_yaxes(row=r, col=c, **yopts)
        fig.update_xaxes(row=r, col=c, title_text="time (s)" if r == ROWS else None)
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=HEIGHT,
                      margin={"l": 50, "r": 20, "t": 60, "b": 40}, template="plotly_white",
                      legend={"font": {"size": 11}, "tracegroupgap": 12}, uirevision="perfkit")
    return fig


def columns(rows) -> tuple[list, list[list]]:
    """x (time_s) and one y list per trace, from row dicts."""
    getters = [g for _, _, g in traces()]
    return [r["time_s"] for r in rows], [[g(r) for r in rows] for g in getters]


def run_figure(run, title: str | None = None):
    """A static plotly Figure of every row of a run (live or finished, or loaded from disk)."""
    rows = list(run.rows)
    fig = empty_figure(title if title is not None else figure_title(run, rows))
    x, ys = columns(rows)
    for trace, y in zip(fig.data, ys):
        trace.x, trace.y = x, y
    return fig


def figure_title(run, rows, state: str | None = None) -> str:
    state = state or ("finished" if run.done else "running")
    t = rows[-1]["time_s"] if rows else 0.0
    err = f" — error: {run.error}" if getattr(run, "error", None) else ""
    return f"<b>{spec_title(run.spec)}</b> — {state}, {t:.1f} s, {len(rows)} rows{err}"


def histogram_figure(hist, title: str = "latency histogram", percentiles=True):
    """The latency histogram as a step chart over a log time axis (µs).

    hist: a perfkit.stats.Histogram, or a Run (its run.histogram)."""
    import plotly.graph_objects as go
    if not isinstance(hist, Histogram):
        hist = hist.histogram
    fig = go.Figure()
    nz = [i for i, c in enumerate(hist.counts) if c] if hist is not None else []
    if nz:
        total = hist.count
        lo, hi = nz[0], nz[-1]
        x, y = [], []
        for i in range(lo, hi + 1):  # contiguous buckets so empty ones show as zero
            x.append(hist.LOWER[i] / 1000.0)
            y.append(100.0 * hist.counts[i] / total)
        x.append(hist.upper(hi) / 1000.0)
        y.append(0.0)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv", fill="tozeroy",
                                 name="samples", line={"color": "#2ca02c"},
                                 hovertemplate="from %{x:.4~s} µs: %{y:.3g}% of samples<extra></extra>"))
        if percentiles:
            marks = [f"{name} {hist.percentile(q) / 1000.0:.3g} µs"
                     for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999))]
            title = f"{title} — {total:,} samples; " + ", ".join(marks)
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=320,
                      template="plotly_white", margin={"l": 50, "r": 20, "t": 50, "b": 40},
                      showlegend=False)
    fig.update_xaxes(type="log", title_text="latency (µs)")
    fig.update_yaxes(title_text="% of samples", rangemode="tozero")
    return fig


def mimebundle(fig, text: str | None = None) -> dict:
    """A display bundle for fig that does not depend on plotly's renderer setting:
    the plotly mimetype (rendered by JupyterLab, Notebook 7 and VS Code) and a text line."""
    import plotly.io as pio
    data = json.loads(pio.to_json(fig, validate=False))
    data["config"] = {"displaylogo": False}
    return {"application/vnd.plotly.v1+json": data,
            "text/plain": text or f"<perfkit figure: {len(fig.data)} traces>"}
