"""Plotly figures for runs: the dashboard layout (live and static) and the latency histogram.

Everything here is plain plotly: no widgets, no threads. The live dashboard and the
static figure share one layout (LAYOUTS), so what a person watches while a run is going
is what the saved notebook shows afterwards. Each kind of spec has its layout
(layout_for): packets, latency and loss for UDP/TCP tests and DPDK flows; transactions,
response times and errors by class for HTTP load. The kinds say which (perfkit.kinds:
a kind's LAYOUT names one of LAYOUTS, or one of the kind's own LAYOUTS).
"""
from __future__ import annotations

import json

from perfkit import kinds
from perfkit.stats import Histogram

# Error counters summed into one "other errors/s" line (their own columns stay in run.frame).
OTHER_ERRORS = ("bad_rx_per_s", "tcp_drop_per_s", "sock_error_per_s", "http_err_per_s",
                "nic_ierrors_per_s", "nic_oerrors_per_s", "nic_imissed_per_s")


def _other_errors(row: dict) -> float:
    return sum(row.get(k) or 0.0 for k in OTHER_ERRORS)


def _busiest_worker(row: dict) -> float | None:
    """The busiest worker's CPU % (cpu_pct_w0, w1, ...): a saturated generator shows here."""
    per = [v for k, v in row.items() if k.startswith("cpu_pct_w") and v is not None]
    return max(per) if per else None


def _ms(key: str):
    return lambda row: None if row.get(key) is None else row[key] / 1000.0


_RATE_AXIS = {"tickformat": "~s", "rangemode": "tozero"}
_ZERO = {"rangemode": "tozero"}
_CPU = ("engine CPU (% of one core)", _ZERO,
        [("cpu % (all workers)", "cpu_pct", "#17becf"), ("busiest worker %", _busiest_worker, "#bcbd22")])
_LATENCY = [("p50 µs", "lat_p50_us", "#2ca02c"), ("p99 µs", "lat_p99_us", "#d62728"),
            ("max µs", "lat_max_us", "#9467bd")]

# A layout: (subplot title, y-axis options, [(trace name, row key or function of a row, colour)]).
# One per kind of spec (layout_for picks it); the live dashboard and the static figure share it.
PANELS = (   # kernel-socket tests (LocalTest, RemoteTest)
    ("packets/s", _RATE_AXIS,
     [("tx pkt/s", "pkts_tx_per_s", "#1f77b4"), ("rx pkt/s", "pkts_rx_per_s", "#ff7f0e")]),
    ("bits/s", _RATE_AXIS,
     [("tx bit/s", "bits_tx_per_s", "#1f77b4"), ("rx bit/s", "bits_rx_per_s", "#ff7f0e")]),
    ("latency (µs)", {"type": "log"}, _LATENCY),
    ("loss (%)", _ZERO, [("loss %", "loss_pct", "#d62728")]),
    ("errors/s", _RATE_AXIS,
     [("lost/s", "seq_lost_per_s", "#d62728"), ("send drops/s", "drop_tx_per_s", "#8c564b"),
      ("other errors/s", _other_errors, "#7f7f7f")]),
    _CPU,
)

DPDK_PANELS = (   # DPDK UDP flows and their far end (DpdkFlows, DpdkReflect)
    ("frames/s", _RATE_AXIS,
     [("tx pkt/s", "pkts_tx_per_s", "#1f77b4"), ("rx pkt/s", "pkts_rx_per_s", "#ff7f0e")]),
    ("bits/s (frames, FCS counted)", _RATE_AXIS,
     [("tx bit/s", "bits_tx_per_s", "#1f77b4"), ("rx bit/s", "bits_rx_per_s", "#ff7f0e")]),
    ("latency (µs)", {"type": "log"}, _LATENCY),
    ("loss (%)", _ZERO, [("loss %", "loss_pct", "#d62728")]),
    ("sequence and port errors/s", _RATE_AXIS,
     [("lost/s", "seq_lost_per_s", "#d62728"), ("reordered/s", "seq_reorder_per_s", "#ff7f0e"),
      ("duplicates/s", "seq_dup_per_s", "#e377c2"), ("tx full/s", "drop_tx_per_s", "#8c564b"),
      ("other errors/s", _other_errors, "#7f7f7f")]),
    _CPU,
)

HTTP_ERRORS = [("failed requests/s", "http_err_per_s", "#d62728"), ("connect errors/s", "err_connect_per_s", "#8c564b"),
               ("timeouts/s", "err_timeout_per_s", "#ff7f0e"), ("resets/s", "err_reset_per_s", "#9467bd"),
               ("cut short/s", "err_read_per_s", "#7f7f7f"), ("TLS handshakes failed/s", "err_tls_per_s", "#bcbd22")]

HTTP_PANELS = (   # HTTP load (HttpLoad): nGrinder's TPS, mean test time and errors
    ("transactions/s", _RATE_AXIS,
     [("responses/s (tps)", "http_resp_per_s", "#1f77b4"), ("requests/s", "http_req_per_s", "#aec7e8")]),
    ("response time (ms)", {"type": "log"},
     [("p50 ms", _ms("lat_p50_us"), "#2ca02c"), ("p99 ms", _ms("lat_p99_us"), "#d62728"),
      ("max ms", _ms("lat_max_us"), "#9467bd")]),
    ("errors/s", _RATE_AXIS, HTTP_ERRORS),
    ("responses by status/s", _RATE_AXIS,
     [("2xx/s", "http_2xx_per_s", "#2ca02c"), ("3xx/s", "http_3xx_per_s", "#17becf"),
      ("4xx/s", "http_4xx_per_s", "#ff7f0e"), ("5xx/s", "http_5xx_per_s", "#d62728")]),
    ("connections", _RATE_AXIS,
     [("open now", "sock_current", "#1f77b4"), ("opened/s", "sock_open_per_s", "#ff7f0e")]),
    _CPU,
)

HTTP_SERVE_PANELS = (   # perfkit's HTTP server (HttpServe)
    ("requests/s", _RATE_AXIS, [("requests/s", "http_req_per_s", "#1f77b4")]),
    ("bits/s", _RATE_AXIS,
     [("tx bit/s", "bits_tx_per_s", "#1f77b4"), ("rx bit/s", "bits_rx_per_s", "#ff7f0e")]),
    ("connections", _RATE_AXIS,
     [("open now", "sock_current", "#1f77b4"), ("opened/s", "sock_open_per_s", "#ff7f0e")]),
    ("errors/s", _RATE_AXIS,
     [("connection errors/s", "sock_error_per_s", "#d62728"), ("other errors/s", _other_errors, "#7f7f7f")]),
    _CPU,
)

def _sum(*keys):
    return lambda row: sum(row.get(k) or 0.0 for k in keys)


DPDK_TCP_PANELS = (   # HTTP over perfkit's TCP on DPDK (DpdkHttpClient, DpdkHttpServer): dperf's view
    ("connections/s", _RATE_AXIS,
     [("opened/s", "sock_open_per_s", "#1f77b4"), ("closed/s", "sock_close_per_s", "#aec7e8")]),
    ("HTTP/s", _RATE_AXIS,
     [("responses/s", "http_resp_per_s", "#2ca02c"),
      ("requests/s", _sum("http_get_per_s", "http_post_per_s"), "#98df8a")]),
    ("concurrent connections", _RATE_AXIS, [("open now", "sock_current", "#9467bd")]),
    ("response time (ms)", {"type": "log"},
     [("p50 ms", _ms("lat_p50_us"), "#2ca02c"), ("p99 ms", _ms("lat_p99_us"), "#d62728"),
      ("max ms", _ms("lat_max_us"), "#9467bd")]),
    ("TCP and HTTP errors/s", _RATE_AXIS,
     [("retransmits/s", _sum("retrans_syn_per_s", "retrans_fin_per_s", "retrans_ack_per_s", "retrans_push_per_s"),
       "#ff7f0e"),
      ("RST rx/s", "rst_rx_per_s", "#d62728"), ("RST tx/s", "rst_tx_per_s", "#e377c2"),
      ("TCP drops/s", "tcp_drop_per_s", "#8c564b"), ("HTTP errors/s", "http_err_per_s", "#7f7f7f"),
      ("timeouts/s", "err_timeout_per_s", "#bcbd22")]),
    _CPU,
)

LAYOUTS = {"socket": PANELS, "dpdk": DPDK_PANELS, "http": HTTP_PANELS, "http_serve": HTTP_SERVE_PANELS,
           "dpdk_tcp": DPDK_TCP_PANELS}
for _kind in kinds.KINDS:   # layouts a kind brings along (its LAYOUTS), beside the shared ones
    LAYOUTS.update(getattr(_kind, "LAYOUTS", {}))
COLS = 2


def layout_name(spec) -> str:
    """Which layout suits spec (a name in LAYOUTS): its kind's LAYOUT says, socket for anything else."""
    return kinds.lookup(spec, "LAYOUT", "socket")


def layout_for(spec):
    return LAYOUTS[layout_name(spec)]


def traces(panels=PANELS):
    """(panel index, trace name, getter) for every trace of a layout, in figure order."""
    out = []
    for p, (_, _, lines) in enumerate(panels):
        for name, key, _ in lines:
            getter = key if callable(key) else (lambda row, k=key: row.get(k))
            out.append((p, name, getter))
    return out


def spec_title(spec) -> str:
    """One line for a spec: 'udp_bw, 64 B, unlimited, 10 s' for a LocalTest; the port,
    peer and mode of DPDK flows; the URL and users of HTTP load."""
    dur = f"{spec.duration:g} s" if isinstance(getattr(spec, "duration", None), (int, float)) else None
    rate = getattr(spec, "rate", None)
    own = kinds.lookup(spec, "TITLE")   # a kind's own: its parts before the duration
    if own is not None:
        return ", ".join(p for p in (*own(spec), dur) if p)
    head = kinds.lookup(spec, "TITLE_HEAD")   # else the test (or the kind's head), size, rate, flows
    parts = [head(spec) if head is not None else str(getattr(spec, "test", type(spec).__name__))]
    if getattr(spec, "size", None) is not None:
        parts.append(f"{spec.size} B")
    if hasattr(spec, "rate"):
        parts.append(str(rate) if rate is not None else "unlimited")
    if getattr(spec, "flows", 1) not in (None, 1):
        parts.append(f"{spec.flows} flows")
    if dur:
        parts.append(dur)
    return ", ".join(parts)


def empty_figure(title: str = "", panels=PANELS):
    """A dashboard layout with every trace present and no points."""
    import plotly.graph_objects as go  # plotly loads when a figure is first drawn
    from plotly.subplots import make_subplots

    rows = (len(panels) + COLS - 1) // COLS
    fig = make_subplots(rows=rows, cols=COLS, subplot_titles=[p[0] for p in panels],
                        vertical_spacing=0.33 / rows, horizontal_spacing=0.08)
    for p, (title_p, yopts, lines) in enumerate(panels):
        r, c = p // COLS + 1, p % COLS + 1
        for name, _, colour in lines:
            fig.add_trace(go.Scatter(x=[], y=[], name=name, mode="lines+markers",
                                     marker={"size": 4}, line={"color": colour, "width": 1.5},
                                     legendgroup=title_p,
                                     hovertemplate=f"{name} %{{y:.4~s}} at %{{x:.1f}} s<extra></extra>"),
                          row=r, col=c)
        fig.update_yaxes(row=r, col=c, **yopts)
        fig.update_xaxes(row=r, col=c, title_text="time (s)" if r == rows else None)
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=260 * rows,
                      margin={"l": 50, "r": 20, "t": 60, "b": 40}, template="plotly_white",
                      legend={"font": {"size": 11}, "tracegroupgap": 12}, uirevision="perfkit")
    return fig


def columns(rows, panels=PANELS) -> tuple[list, list[list]]:
    """x (time_s) and one y list per trace of a layout, from row dicts."""
    getters = [g for _, _, g in traces(panels)]
    return [r["time_s"] for r in rows], [[g(r) for r in rows] for g in getters]


def run_figure(run, title: str | None = None):
    """A static plotly Figure of every row of a run (live or finished, or loaded from disk)."""
    rows = list(run.rows)
    panels = layout_for(run.spec)
    fig = empty_figure(title if title is not None else figure_title(run, rows), panels)
    x, ys = columns(rows, panels)
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
