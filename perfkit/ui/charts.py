"""Plotly figures for runs: the dashboard layout (live and static) and the latency histogram.

Everything here is plain plotly: no widgets, no threads. The live dashboard and the
static figure share one layout (LAYOUTS), so what a person watches while a run is going
is what the saved notebook shows afterwards. Each kind of spec has its layout
(layout_for): packets, latency and loss for UDP/TCP tests and DPDK flows; transactions,
response times and errors by class for HTTP load. The kinds say which (perfkit.kinds:
a kind's LAYOUT names one of LAYOUTS, or one of the kind's own LAYOUTS).
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

from perfkit import kinds
from perfkit.staticfig import mimebundle, png_of, shareable, static_bundle  # noqa: F401 (the UI's names)
from perfkit.stats import Histogram, label_of
from perfkit.units import format_time_us

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


COLOURS = {   # one colour per metric (a row column, or what a computed trace shows) in every chart
    "pkts_tx_per_s": "#1f77b4", "pkts_rx_per_s": "#ff7f0e", "bits_tx_per_s": "#1f77b4",
    "bits_rx_per_s": "#ff7f0e", "rate_target": "#7f7f7f", "lat_p50_us": "#2ca02c", "lat_p99_us": "#d62728",
    "lat_max_us": "#9467bd", "loss_pct": "#d62728", "seq_lost_per_s": "#d62728",
    "seq_reorder_per_s": "#ff7f0e", "seq_dup_per_s": "#e377c2", "drop_tx_per_s": "#8c564b",
    "other_errors": "#7f7f7f", "cpu_pct": "#17becf", "busiest_worker": "#bcbd22",
    "http_resp_per_s": "#1f77b4", "http_req_per_s": "#aec7e8", "http_err_per_s": "#d62728",
    "err_connect_per_s": "#8c564b", "err_timeout_per_s": "#ff7f0e", "err_reset_per_s": "#9467bd",
    "err_read_per_s": "#7f7f7f", "err_tls_per_s": "#bcbd22", "http_2xx_per_s": "#2ca02c",
    "http_3xx_per_s": "#17becf", "http_4xx_per_s": "#ff7f0e", "http_5xx_per_s": "#d62728",
    "sock_current": "#9467bd", "sock_open_per_s": "#1f77b4", "sock_close_per_s": "#aec7e8",
    "sock_error_per_s": "#8c564b", "retransmits": "#17becf", "rst_rx_per_s": "#ff9896",
    "rst_tx_per_s": "#e377c2", "tcp_drop_per_s": "#8c564b", "http_rate": "#7f7f7f", "http_users": "#2ca02c",
    "a_to_b_rx_pps": "#1f77b4", "b_to_a_rx_pps": "#ff7f0e", "a_to_b_tx_pps": "#aec7e8", "b_to_a_tx_pps": "#ffbb78",
    "a_to_b_lat_mean_us": "#1f77b4", "b_to_a_lat_mean_us": "#ff7f0e",
}


class Line(NamedTuple):
    """One trace of a layout: its legend name, the row column (or a function of a row), its colour,
    and whether the layout named it (else the name is the column's label in the counter list)."""
    name: str
    key: str | Callable[[dict], float | None]
    colour: str
    override: bool


def _line(key, colour: str, name: str | None = None) -> Line:
    """A trace named by the counter list (stats.label_of) unless the layout names it; its
    colour is COLOURS[colour] (a kind's own layout may give a '#rrggbb')."""
    colour = COLOURS.get(colour, colour)
    if name is None:
        name = label_of(key) if isinstance(key, str) else None
        if name is None:
            raise ValueError(f"chart: {key!r} has no label in the counter list: name the trace")
        return Line(name, key, colour, False)
    return Line(name, key, colour, True)


# Legend names the layouts give (short forms of the counter labels, sized for the two-column
# dashboard; tests, notebooks and saved reports name them): every other trace takes its label.
_RATE_AXIS = {"tickformat": "~s", "rangemode": "tozero"}
_ZERO = {"rangemode": "tozero"}
_CPU = ("engine CPU (% of one core)", _ZERO,
        [_line("cpu_pct", "cpu_pct", "cpu % (all workers)"), _line(_busiest_worker, "busiest_worker", "busiest worker %")])
_LATENCY = [_line("lat_p50_us", "lat_p50_us", "p50 µs"), _line("lat_p99_us", "lat_p99_us", "p99 µs"),
            _line("lat_max_us", "lat_max_us", "max µs")]

# A layout: (subplot title, y-axis options, [Line]); a Line made by _line(column, metric[, name]),
# its colour COLOURS[metric].
# One per kind of spec (layout_for picks it); the live dashboard and the static figure share it.
PANELS = (   # kernel-socket tests (LocalTest, RemoteTest)
    ("packets/s", _RATE_AXIS,
     [_line("pkts_tx_per_s", "pkts_tx_per_s", "tx pkt/s"), _line("pkts_rx_per_s", "pkts_rx_per_s", "rx pkt/s")]),
    ("bits/s", _RATE_AXIS,
     [_line("bits_tx_per_s", "bits_tx_per_s", "tx bit/s"), _line("bits_rx_per_s", "bits_rx_per_s", "rx bit/s")]),
    ("latency (µs)", {"type": "log"}, _LATENCY),
    ("loss (%)", _ZERO, [_line("loss_pct", "loss_pct", "loss %")]),
    ("errors/s", _RATE_AXIS,
     [_line("seq_lost_per_s", "seq_lost_per_s", "lost/s"), _line("drop_tx_per_s", "drop_tx_per_s", "send drops/s"),
      _line(_other_errors, "other_errors", "other errors/s")]),
    _CPU,
)

DPDK_PANELS = (   # DPDK UDP flows and their far end (DpdkFlows, DpdkReflect)
    ("frames/s", _RATE_AXIS,
     [_line("pkts_tx_per_s", "pkts_tx_per_s", "tx pkt/s"), _line("pkts_rx_per_s", "pkts_rx_per_s", "rx pkt/s")]),
    ("bits/s (frames, FCS counted)", _RATE_AXIS,
     [_line("bits_tx_per_s", "bits_tx_per_s", "tx bit/s"), _line("bits_rx_per_s", "bits_rx_per_s", "rx bit/s")]),
    ("latency (µs)", {"type": "log"}, _LATENCY),
    ("loss (%)", _ZERO, [_line("loss_pct", "loss_pct", "loss %")]),
    ("sequence and port errors/s", _RATE_AXIS,
     [_line("seq_lost_per_s", "seq_lost_per_s", "lost/s"), _line("seq_reorder_per_s", "seq_reorder_per_s", "reordered/s"),
      _line("seq_dup_per_s", "seq_dup_per_s", "duplicates/s"), _line("drop_tx_per_s", "drop_tx_per_s", "tx full/s"),
      _line(_other_errors, "other_errors", "other errors/s")]),
    _CPU,
)

def _target(row: dict) -> float | None:
    """The live control's target (rate_target, pps; 0: no target, as fast as the port goes): drawn only when set."""
    v = row.get("rate_target")
    return v if v else None


TARGET = "target pkt/s"   # drawn dashed: what the generators were told, beside what they sent
DPDK_FLOWS_PANELS = (   # DPDK UDP flows (DpdkFlows): the frames/s panel also shows the target rate (run.set_rate)
    ("frames/s", _RATE_AXIS,
     [_line("pkts_tx_per_s", "pkts_tx_per_s", "tx pkt/s"), _line("pkts_rx_per_s", "pkts_rx_per_s", "rx pkt/s"),
      _line(_target, "rate_target", TARGET)]),
    *DPDK_PANELS[1:],
)

DPDK_WAYS_PANELS = (   # DPDK flows reporting both directions apart (bidirectional, reverse): each way too
    *DPDK_FLOWS_PANELS,
    ("each direction (frames/s)", _RATE_AXIS,
     [_line("a_to_b_rx_pps", "a_to_b_rx_pps", "a→b rx pkt/s"), _line("b_to_a_rx_pps", "b_to_a_rx_pps", "b→a rx pkt/s"),
      _line("a_to_b_tx_pps", "a_to_b_tx_pps", "a→b tx pkt/s"), _line("b_to_a_tx_pps", "b_to_a_tx_pps", "b→a tx pkt/s")]),
    ("each direction: one-way latency (µs)", {"type": "log"},
     [_line("a_to_b_lat_mean_us", "a_to_b_lat_mean_us", "a→b mean µs"), _line("b_to_a_lat_mean_us", "b_to_a_lat_mean_us", "b→a mean µs")]),
)

HTTP_ERRORS = [_line("http_err_per_s", "http_err_per_s", "failed requests/s"), _line("err_connect_per_s", "err_connect_per_s", "connect errors/s"),
               _line("err_timeout_per_s", "err_timeout_per_s", "timeouts/s"), _line("err_reset_per_s", "err_reset_per_s", "resets/s"),
               _line("err_read_per_s", "err_read_per_s", "cut short/s"), _line("err_tls_per_s", "err_tls_per_s")]

HTTP_PANELS = (   # HTTP load (HttpLoad): nGrinder's TPS, mean test time and errors
    ("transactions/s", _RATE_AXIS,
     [_line("http_resp_per_s", "http_resp_per_s", "responses/s (tps)"), _line("http_req_per_s", "http_req_per_s", "requests/s"),
      # an open loop's rate due now (a rate stage plan moves it); a closed loop has none: no line
      _line(lambda row: row.get("http_rate") or None, "http_rate", "due/s (open loop)")]),
    ("response time (ms)", {"type": "log"},
     [_line(_ms("lat_p50_us"), "lat_p50_us", "p50 ms"), _line(_ms("lat_p99_us"), "lat_p99_us", "p99 ms"),
      _line(_ms("lat_max_us"), "lat_max_us", "max ms")]),
    ("errors/s", _RATE_AXIS, HTTP_ERRORS),
    ("responses by status/s", _RATE_AXIS,
     [_line("http_2xx_per_s", "http_2xx_per_s", "2xx/s"), _line("http_3xx_per_s", "http_3xx_per_s", "3xx/s"),
      _line("http_4xx_per_s", "http_4xx_per_s", "4xx/s"), _line("http_5xx_per_s", "http_5xx_per_s", "5xx/s")]),
    ("connections", _RATE_AXIS,
     [_line("sock_current", "sock_current", "open now"), _line("sock_open_per_s", "sock_open_per_s", "opened/s"),
      _line("http_users", "http_users", "virtual users")]),
    _CPU,
)

HTTP_SERVE_PANELS = (   # perfkit's HTTP server (HttpServe)
    ("requests/s", _RATE_AXIS, [_line("http_req_per_s", "http_req_per_s", "requests/s")]),
    ("bits/s", _RATE_AXIS,
     [_line("bits_tx_per_s", "bits_tx_per_s", "tx bit/s"), _line("bits_rx_per_s", "bits_rx_per_s", "rx bit/s")]),
    ("connections", _RATE_AXIS,
     [_line("sock_current", "sock_current", "open now"), _line("sock_open_per_s", "sock_open_per_s", "opened/s")]),
    ("errors/s", _RATE_AXIS,
     [_line("sock_error_per_s", "sock_error_per_s"), _line(_other_errors, "other_errors", "other errors/s")]),
    _CPU,
)

def _sum(*keys):
    return lambda row: sum(row.get(k) or 0.0 for k in keys)


DPDK_TCP_PANELS = (   # HTTP over perfkit's TCP on DPDK (DpdkHttpClient, DpdkHttpServer): dperf's view
    ("connections/s", _RATE_AXIS,
     [_line("sock_open_per_s", "sock_open_per_s", "opened/s"), _line("sock_close_per_s", "sock_close_per_s", "closed/s")]),
    ("HTTP/s", _RATE_AXIS,
     [_line("http_resp_per_s", "http_resp_per_s", "responses/s"),
      _line(_sum("http_get_per_s", "http_post_per_s"), "http_req_per_s", "requests/s")]),
    ("concurrent connections", _RATE_AXIS, [_line("sock_current", "sock_current", "open now")]),
    ("response time (ms)", {"type": "log"},
     [_line(_ms("lat_p50_us"), "lat_p50_us", "p50 ms"), _line(_ms("lat_p99_us"), "lat_p99_us", "p99 ms"),
      _line(_ms("lat_max_us"), "lat_max_us", "max ms")]),
    ("TCP and HTTP errors/s", _RATE_AXIS,
     [_line(_sum("retrans_syn_per_s", "retrans_fin_per_s", "retrans_ack_per_s", "retrans_push_per_s"),
            "retransmits", "retransmits/s"),
      _line("rst_rx_per_s", "rst_rx_per_s", "RST rx/s"), _line("rst_tx_per_s", "rst_tx_per_s", "RST tx/s"),
      _line("tcp_drop_per_s", "tcp_drop_per_s", "TCP drops/s"), _line("http_err_per_s", "http_err_per_s", "HTTP errors/s"),
      _line("err_timeout_per_s", "err_timeout_per_s", "timeouts/s")]),
    _CPU,
)

LAYOUTS = {"socket": PANELS, "dpdk": DPDK_PANELS, "dpdk_flows": DPDK_FLOWS_PANELS, "dpdk_flows_ways": DPDK_WAYS_PANELS,
           "http": HTTP_PANELS,
           "http_serve": HTTP_SERVE_PANELS, "dpdk_tcp": DPDK_TCP_PANELS}
for _kind in kinds.KINDS:   # layouts a kind brings along (its LAYOUTS: (name or None, key, colour) traces)
    for _name, _panels in getattr(_kind, "LAYOUTS", {}).items():
        LAYOUTS[_name] = tuple((title, axis, [_line(key, colour, name) for name, key, colour in lines])
                               for title, axis, lines in _panels)
COLS = 2


def layout_name(spec) -> str:
    """Which layout suits spec (a name in LAYOUTS): its kind's LAYOUT says (for a spec instance its
    LAYOUT_PICK, when it has one: e.g. DPDK flows with both directions apart), socket for anything else."""
    pick = None if isinstance(spec, type) else kinds.lookup(spec, "LAYOUT_PICK")
    return pick(spec) if pick is not None else kinds.lookup(spec, "LAYOUT", "socket")


def layout_for(spec):
    return LAYOUTS[layout_name(spec)]


def traces(panels=PANELS):
    """(panel index, trace name, getter) for every trace of a layout, in figure order."""
    out = []
    for p, (_, _, lines) in enumerate(panels):
        for line in lines:
            key = line.key
            getter = key if callable(key) else (lambda row, k=key: row.get(k))
            out.append((p, line.name, getter))
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


def empty_figure(title: str = "", panels=PANELS, hosts=()):
    """A dashboard layout with every trace present and no points; with hosts (a cluster run's),
    after the layout's traces one dotted line per host in the first panel (host_traces)."""
    import plotly.graph_objects as go  # plotly loads when a figure is first drawn
    from plotly.subplots import make_subplots

    rows = (len(panels) + COLS - 1) // COLS
    fig = make_subplots(rows=rows, cols=COLS, subplot_titles=[p[0] for p in panels],
                        vertical_spacing=0.33 / rows, horizontal_spacing=LEGEND_GAP)
    legends = {}
    for p, (title_p, yopts, lines) in enumerate(panels):
        r, c = p // COLS + 1, p % COLS + 1
        legend = "legend" if p == 0 else f"legend{p + 1}"
        legends[legend] = _panel_legend(fig, p)
        for name, _, colour, _ in lines:
            fig.add_trace(go.Scatter(x=[], y=[], name=name, mode="lines" if name == TARGET else "lines+markers",
                                     marker={"size": 4}, line={"color": colour, "width": 1.5,
                                                               "dash": "dash" if name == TARGET else "solid"},
                                     legendgroup=title_p, legend=legend,
                                     hovertemplate=f"{name} %{{y:.4~s}} at %{{x:.1f}} s<extra></extra>"),
                          row=r, col=c)
        fig.update_yaxes(row=r, col=c, **{"title_text": axis_unit(title_p), "title_standoff": 4, **yopts})
        fig.update_xaxes(row=r, col=c, title_text="time (s)" if r == rows else None)
    line = host_line(panels)
    for k, host in enumerate(hosts):
        name = f"{host}: {line.name}"
        fig.add_trace(go.Scatter(x=[], y=[], name=name, mode="lines", legendgroup="hosts", legend="legend",
                                 line={"color": HOST_COLOURS[k % len(HOST_COLOURS)], "width": 1.2, "dash": "dot"},
                                 hovertemplate=f"{name} %{{y:.4~s}} at %{{x:.1f}} s<extra></extra>"), row=1, col=1)
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=260 * rows,
                      margin={"l": 50, "r": 130, "t": 60, "b": 40}, template="plotly_white",
                      uirevision="perfkit", **legends)
    return fig


LEGEND_GAP = 0.24   # between the columns: the left panel's legend and the right one's y axis


def _panel_legend(fig, p: int) -> dict:
    """Panel p's own legend, beside its plot's top right corner, off the data (one long shared
    legend served six panels; inside the plot it covered the newest points)."""
    n = "" if p == 0 else str(p + 1)
    x, y = fig.layout["xaxis" + n].domain, fig.layout["yaxis" + n].domain
    return {"x": x[1] + 0.005, "y": y[1], "xanchor": "left", "yanchor": "top", "font": {"size": 10},
            "tracegroupgap": 0}


_UNIT_NAMES = {"HTTP/s": "requests/s", "responses by status/s": "responses/s"}


def axis_unit(title: str) -> str:
    """A panel's y-axis unit from its title: 'latency (µs)' -> 'µs', 'sequence and port errors/s' ->
    'errors/s', 'bits/s (frames, FCS counted)' -> 'bits/s', 'concurrent connections' -> 'connections'."""
    if title in _UNIT_NAMES:
        return _UNIT_NAMES[title]
    m = re.search(r"\(([^)]*)\)", title)
    if m and re.search(r"µs|ms|%", m.group(1)):
        return m.group(1)
    words = re.sub(r"\(.*?\)", "", title).split()
    per_s = [w for w in words if w.endswith("/s")]
    return per_s[-1] if per_s else (words[-1] if words else "")


def chart_rows(rows, interval: float | None = None, duration: float | None = None) -> list[dict]:
    """The rows a chart plots: without the drain rows that start after the traffic's planned end
    (the engine lingers to catch packets in flight: a false cliff to zero), and with a final
    partial row (shorter than half an interval: a spike or a dip) time-weighted into the row
    before it. run.rows and run.frame keep every row; the totals are the last row's either way."""
    rows = list(rows)
    if duration and rows:
        kept = [r for r in rows if r["time_s"] - r.get("interval_s", 0.0) < duration - 1e-3]
        rows = kept or rows
        last = rows[-1]
        start = last["time_s"] - last.get("interval_s", 0.0)
        if last["time_s"] > duration + 1e-3 and start < duration and last.get("interval_s"):
            rows[-1] = _clip(last, duration - start)   # the row the planned end falls in: its traffic part
    if interval and len(rows) >= 2 and 0 < rows[-1].get("interval_s", interval) < 0.5 * interval:
        rows = rows[:-2] + [_merge(rows[-2], rows[-1])]
    return rows


def _clip(row: dict, part: float) -> dict:
    """row as the rates over its first `part` seconds, where the traffic ran (the rest was drain)."""
    scale = row["interval_s"] / part
    out = {k: (v * scale if (k.endswith("_per_s") or k.startswith("cpu_pct")) and isinstance(v, (int, float))
               and not isinstance(v, bool) else v) for k, v in row.items()}
    out["time_s"] = round(row["time_s"] - row["interval_s"] + part, 6)
    out["interval_s"] = part
    return out


def _merge(a: dict, b: dict) -> dict:
    """Row b folded into the row a before it: rates and CPU shares weighted by each row's
    interval; totals, the time and the interval from b (latency and loss from a, which has
    the most samples)."""
    da, db = a.get("interval_s") or 0.0, b.get("interval_s") or 0.0
    out = dict(a)
    for k, v in b.items():
        if k.endswith("_per_s") or k.startswith("cpu_pct"):
            va = a.get(k)
            if isinstance(v, (int, float)) and isinstance(va, (int, float)) and da + db > 0:
                out[k] = (va * da + v * db) / (da + db)
        elif not (k.startswith("lat_") or k in ("loss_pct", "jitter_us", "rtt_mean_us")):
            out[k] = v
    out["interval_s"] = da + db
    return out


def plot_rows(run, rows=None) -> list[dict]:
    """chart_rows for a run (its interval and, where the spec has one, its planned duration)."""
    duration = getattr(run.spec, "duration", None)
    duration = duration if isinstance(duration, (int, float)) and duration > 0 else None
    return chart_rows(list(run.rows) if rows is None else rows, getattr(run, "interval", None), duration)


HOST_COLOURS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#8ca252", "#bd9e39")


def host_line(panels) -> Line:
    """What a cluster run's per-host lines show: the layout's first line (tps, tx pkt/s, frames/s)."""
    return panels[0][2][0]


def run_hosts(run, ask: bool = True) -> list[str]:
    """A cluster run's hosts, in order (its engine handle's, a loaded run's, or, ask: its cluster's,
    which may send the engines a request); [] for a run on one host (or one not built yet)."""
    hosts = getattr(run, "host_names", None)
    if hosts:
        return list(hosts)
    cluster = getattr(run, "cluster", None)
    if cluster is None or not ask:
        return []
    try:
        return list(cluster.hosts)
    except Exception:  # noqa: BLE001 (a cluster gone: the run says so; the chart draws the totals)
        return []


def host_traces(run, panels, hosts, since: float | None = None) -> list[tuple[list, list]]:
    """(x, y) of every host's line (host_line) from its own rows (run.host_frame: a live run's as
    they have come, a loaded run's as saved), chart_rows applied; rows from `since` on."""
    frame = getattr(run, "host_frame", None)
    rows = frame.to_dicts() if frame is not None and frame.height else []
    key = host_line(panels).key
    get = key if callable(key) else (lambda row, k=key: row.get(k))
    duration = getattr(run.spec, "duration", None)
    duration = duration if isinstance(duration, (int, float)) and duration > 0 else None
    out = []
    for host in hosts:
        mine = chart_rows([r for r in rows if r.get("host") == host and (since is None or r["time_s"] >= since)],
                          getattr(run, "interval", None), duration)
        out.append(([r["time_s"] for r in mine], [get(r) for r in mine]))
    return out


def fit_axes(fig, panels, ys, static: bool = False) -> None:
    """Per panel, from the values drawn: whole-number ticks (dtick 1) where every value is a
    whole number up to 10 (counts: no '0.5 connections'); an empty panel 0..1 (no '800m'
    ticks), which a static figure labels 'none'."""
    i = 0
    for p, (_, yopts, lines) in enumerate(panels):
        vals = [v for y in ys[i:i + len(lines)] for v in y if isinstance(v, (int, float)) and v == v]
        i += len(lines)
        if yopts.get("type") == "log":
            continue
        axis = fig.layout["yaxis" + (str(p + 1) if p else "")]
        top = max((abs(v) for v in vals), default=0)
        if top == 0:
            axis.update(range=[0, 1], dtick=1, autorange=False, showticklabels=not static)
            if static:
                fig.add_annotation(text="none", showarrow=False, font={"color": "#999"},
                                   xref=f"x{p + 1 if p else ''} domain", yref=f"y{p + 1 if p else ''} domain",
                                   x=0.5, y=0.5)
        elif top <= 10 and all(float(v).is_integer() for v in vals):
            axis.update(range=None, autorange=True, dtick=1, showticklabels=True)
        else:
            axis.update(range=None, autorange=True, dtick=None, showticklabels=True)


def columns(rows, panels=PANELS) -> tuple[list, list[list]]:
    """x (time_s) and one y list per trace of a layout, from row dicts."""
    getters = [g for _, _, g in traces(panels)]
    return [r["time_s"] for r in rows], [[g(r) for r in rows] for g in getters]


def run_figure(run, title: str | None = None):
    """A static plotly Figure of every row of a run (live or finished, or loaded from disk)."""
    rows = list(run.rows)
    panels = layout_for(run.spec)
    hosts = run_hosts(run)
    fig = empty_figure(title if title is not None else figure_title(run, rows), panels, hosts)
    x, ys = columns(plot_rows(run, rows), panels)
    for trace, y in zip(fig.data, ys):
        trace.x, trace.y = x, y
    for trace, (hx, hy) in zip(fig.data[len(ys):], host_traces(run, panels, hosts)):
        trace.x, trace.y = hx, hy
    fit_axes(fig, panels, ys, static=True)
    return shareable(fig)


def figure_title(run, rows, state: str | None = None) -> str:
    state = state or ("finished" if run.done else "running")
    t = rows[-1]["time_s"] if rows else 0.0
    err = f" — error: {run.error}" if getattr(run, "error", None) else ""
    return f"<b>{spec_title(run.spec)}</b> — {state}, {t:.1f} s, {len(rows)} rows{err}"


def time_text(us: float) -> str:
    """A time for people: 12.2 µs, 2.26 ms, 1.5 sec (3 significant digits)."""
    return format_time_us(us).replace(" us", " µs")


PERCENTILE_MARKS = (("p50", 0.5, "lat_p50_us"), ("p99", 0.99, "lat_p99_us"), ("p99.9", 0.999, "lat_max_us"))


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
                                 name="samples", line={"color": "#6baed6"},
                                 hovertemplate="from %{x:.4~s} µs: %{y:.3g}% of samples<extra></extra>"))
        if percentiles:
            top = max(y)
            marks = []
            for name, q, metric in PERCENTILE_MARKS:   # a dashed vertical line at each, its value in the legend
                v = hist.percentile(q) / 1000.0
                marks.append(f"{name} {time_text(v)}")
                fig.add_trace(go.Scatter(x=[v, v], y=[0.0, top], mode="lines", name=marks[-1],
                                         line={"color": COLOURS[metric], "dash": "dash", "width": 1.5},
                                         hovertemplate=f"{marks[-1]}<extra></extra>"))
            title = f"{title} — {total:,} samples; " + ", ".join(marks)
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=320,
                      template="plotly_white", margin={"l": 50, "r": 20, "t": 50, "b": 40},
                      showlegend=len(fig.data) > 1,
                      legend={"x": 1, "y": 1, "xanchor": "right", "yanchor": "top", "bgcolor": "rgba(255,255,255,0.7)"})
    fig.update_xaxes(type="log", title_text="latency (µs)")
    fig.update_yaxes(title_text="% of samples", rangemode="tozero")
    return shareable(fig)
