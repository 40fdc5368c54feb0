"""Self-contained HTML reports of a run, a comparison or an RFC 2544 result.

    run.report("run.html")                      # or perfkit.ui.html_report(run, "run.html")
    perfkit.compare([a, b]).report("ab.html")
    perfkit.rfc2544(...).report("rfc.html")     # laid out like RFC 2544's reporting (section 26)

One file, no network needed to open it: plotly's JavaScript is inlined once (about
4.5 MB) and every chart after the first uses it. A run's report has its summary (the
figures and the qperf-style text), the dashboard charts, the latency histogram, the
per-second rows, the spec and the environment; a comparison's has the comparison chart,
its table and each run's spec and environment.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import os
import statistics
from pathlib import Path

from perfkit.comparison import Comparison, LadderComparison, compare
from perfkit.report import stages_text, summary_text
from perfkit.rfc2544 import Rfc2544Result
from perfkit.run import Run
from perfkit.stats import label_of, unit_of
from perfkit.ui import charts, rfc2544_charts
from perfkit.units import rate_text
from perfkit.version import __version__

# per-second columns shown in a run's report (the Parquet file has all the engine writes)
ROW_COLUMNS = ("time_s", "pkts_tx_per_s", "pkts_rx_per_s", "bits_tx_per_s", "bits_rx_per_s", "loss_pct",
               "lat_p50_us", "lat_p99_us", "lat_max_us", "cpu_pct")
MAX_ROWS = 3600

STYLE = """
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       margin: 24px auto; max-width: 1200px; padding: 0 16px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta { color: #666; font-size: 0.9em; }
table.kv, table.rows { border-collapse: collapse; font-size: 0.88em; margin: 8px 0; }
table.kv td, table.kv th, table.rows td, table.rows th { border: 1px solid #ddd; padding: 3px 8px;
     text-align: left; vertical-align: top; }
table.rows td { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th, table.rows th { background: #f4f4fa; }
pre { background: #f7f7f7; padding: 10px; border-radius: 4px; overflow-x: auto; }
.error { color: #b00020; font-weight: bold; }
.chart { margin: 12px 0; }
details { margin: 8px 0; }
.wide { overflow-x: auto; }
.cols { display: flex; flex-wrap: wrap; gap: 0 24px; align-items: flex-start; }
"""


def _esc(v) -> str:
    return html.escape(str(v), quote=True)


def _value(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.6g}" if abs(v) < 1e6 else f"{v:.6g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def kv_table(d: dict) -> str:
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(_value(v))}</td></tr>" for k, v in d.items())
    return f'<table class="kv">{rows}</table>'


def kv_columns(d: dict, columns: int = 3) -> str:
    """d as up to `columns` key/value tables side by side (wrapping on narrow screens)."""
    items = list(d.items())
    per = max(1, -(-len(items) // columns))
    parts = [kv_table(dict(items[i:i + per])) for i in range(0, len(items), per)]
    return f'<div class="cols">{"".join(parts)}</div>'


def _column_title(column: str) -> str:
    """A row column's label and unit from the counter list, as the header's tooltip."""
    label, unit = label_of(column), unit_of(column)
    if label is None:
        return ""
    return f' title="{_esc(label + (f" ({unit})" if unit else ""))}"'


def frame_table(frame, max_rows: int = MAX_ROWS) -> str:
    cols = frame.columns
    head = "".join(f"<th{_column_title(c)}>{_esc(c)}</th>" for c in cols)
    body = []
    for row in frame.head(max_rows).iter_rows():
        body.append("<tr>" + "".join(f"<td>{_esc(_value(v))}</td>" for v in row) + "</tr>")
    more = (f'<p class="meta">… {len(frame) - max_rows} more rows in the saved run</p>'
            if len(frame) > max_rows else "")
    return (f'<div class="wide"><table class="rows"><tr>{head}</tr>{"".join(body)}</table></div>'
            f'{more}')


def spec_dict(run) -> dict:
    """The run's spec as a dict for a table, with the rate as text (20 kpps)."""
    spec = run.spec.to_dict() if hasattr(run.spec, "to_dict") else {"spec": repr(run.spec)}
    if isinstance(spec.get("rate"), dict):
        spec["rate"] = rate_text(spec)
    return spec


class _Charts:
    """Turns figures into HTML: plotly.js inlined with the first one only."""

    def __init__(self):
        self.inlined = False

    def __call__(self, fig) -> str:
        import plotly.io as pio  # plotly and polars load when a report is made
        part = pio.to_html(fig, full_html=False, include_plotlyjs=not self.inlined,
                           config={"displaylogo": False, "responsive": True}, validate=False,
                           default_width="100%")
        self.inlined = True
        return f'<div class="chart">{part}</div>'


def _run_sections(run, chart, heading_level: int = 2) -> list[str]:
    h = f"h{heading_level}"
    out = []
    if run.error:
        out.append(f'<p class="error">error: {_esc(run.error)}</p>')
    s = run.summary or {}
    out.append(f"<{h}>Summary</{h}>")
    try:
        out.append(f"<pre>{_esc(summary_text(s))}</pre>")
    except Exception:  # noqa: BLE001 (an odd summary still gets its table)
        pass
    if getattr(run, "stages", None):   # a stage plan's run: a line per stage, each stage's thresholds
        out.append(f"<pre>{_esc(stages_text(run.stages, run.stage_thresholds if run.threshold_specs else None))}</pre>")
    flat = {k: v for k, v in s.items() if not isinstance(v, dict) and k != "stages"}
    nested = {f"{k}.{kk}": vv for k, v in s.items() if isinstance(v, dict) for kk, vv in v.items()}
    out.append(kv_columns({**flat, **nested}))
    out.append(f"<{h}>Per-second charts</{h}>")
    out.append(chart(charts.run_figure(run)))
    if run.histogram is not None and run.histogram.count:
        out.append(f"<{h}>Latency histogram</{h}>")
        out.append(chart(charts.histogram_figure(run.histogram)))
    out.append(f"<{h}>Spec</{h}>")
    out.append(kv_table({**spec_dict(run), "engine": run.engine_name, "interval_s": run.interval}))
    out.append(f"<{h}>Environment</{h}>")
    out.append(kv_table(run.env or {}))
    frame = run.frame
    cols = [c for c in ROW_COLUMNS if c in frame.columns]
    out.append(f"<{h}>Per-second rows ({len(frame)})</{h}>")
    if cols and len(frame):
        import polars as pl
        out.append(frame_table(frame.select(cols).with_columns(pl.col(pl.Float64).round(3))))
    return out


def rows_table(head, rows) -> str:
    """A table of rows (tuples of values, formatted as _value does) under head."""
    th = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_esc(_value(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f'<div class="wide"><table class="rows"><tr>{th}</tr>{body}</table></div>'


# RFC 2544 section 26: per test, what its table holds (the result frame's columns) and the graph
RFC2544_TABLES = {
    "throughput": ("Throughput (26.1): the highest rate with no frame lost, per frame size",
                   (("frame B", "size"), ("throughput frames/s", "throughput_fps"), ("bit/s", "throughput_bps"),
                    ("upper bound frames/s", "high_fps"), ("resolution frames/s", "resolution_fps"),
                    ("trials", "trials"), ("stopped", "stopped")),
                   (rfc2544_charts.throughput_figure, rfc2544_charts.trials_figure)),
    "latency": ("Latency (26.2): at the throughput rate; the RFC's figure is the mean of the trials' means, "
                "perfkit's percentiles over every frame of them; one way, the sender's timestamp to arrival "
                "(DPDK reverse: the round trip)",
                (("frame B", "size"), ("rate frames/s", "rate_fps"), ("trials", "trials"),
                 ("RFC mean µs", "rfc_mean_us"), ("p50 µs", "p50_us"), ("p90 µs", "p90_us"), ("p99 µs", "p99_us"),
                 ("p99.9 µs", "p999_us"), ("max µs", "max_us"), ("lowest trial mean µs", "min_trial_mean_us"),
                 ("highest trial mean µs", "max_trial_mean_us"), ("frames timed", "lat_count")),
                (rfc2544_charts.latency_figure,)),
    "frame_loss": ("Frame loss rate (26.3): ((sent - received) x 100) / sent, from 100% of the upper bound down "
                   "until two trials in a row lose nothing",
                   (("frame B", "size"), ("rate %", "percent"), ("offered frames/s", "offered_fps"),
                    ("sent", "sent"), ("received", "received"), ("lost", "lost"), ("loss %", "loss_pct")),
                   (rfc2544_charts.frame_loss_figure,)),
    "back_to_back": ("Back-to-back frames (26.4): the longest burst at full speed with no loss, per repetition",
                     (("frame B", "size"), ("repetition", "repetition"), ("burst frames", "burst_frames"),
                      ("burst s", "burst_s"), ("trials", "trials")),
                     (rfc2544_charts.back_to_back_figure,)),
}


def _b2b_summary(rows) -> str:
    """Back-to-back per frame size as the RFC tables it: the mean frame count and its spread."""
    by: dict[int, list] = {}
    for r in rows:
        by.setdefault(r["size"], []).append(r["burst_frames"])
    return rows_table(("frame B", "repetitions", "mean frames", "min", "max", "std dev"),
                      [(f, len(v), statistics.fmean(v), min(v), max(v), statistics.pstdev(v))
                       for f, v in sorted(by.items())])


def _rfc2544_sections(res, chart) -> list[str]:
    """An RFC 2544 result as its section 26 lays the report out: per test, its table with a row per
    frame size (frame loss: per step; back-to-back: per repetition, then the mean) and its graph."""
    out = [f"<p>{_esc(res.text().splitlines()[0])}</p>"]
    if res.error:
        out.append(f'<p class="error">error: {_esc(res.error)}</p>')
    for f, why in sorted(res.skipped.items()):
        out.append(f'<p class="meta">{f} B frames: skipped: {_esc(why)}</p>')
    for test in res.tests:
        head, cols, figures = RFC2544_TABLES[test]
        out.append(f'<h2 id="{test}">{_esc(head.split(":")[0])}</h2><p class="meta">{_esc(head)}</p>')
        if test in res.unsupported:
            out.append(f"<p>{_esc(res.unsupported[test])}</p>")
            continue
        rows = sorted(res.rows[test], key=lambda r: r["size"])
        if not rows:
            out.append("<p>(no frame size finished)</p>")
            continue
        if test == "back_to_back":
            out.append(_b2b_summary(rows))
        out.append(rows_table([h for h, _ in cols], [tuple(r.get(k) for _, k in cols) for r in rows]))
        out += [chart(fig(res)) for fig in figures]
        notes = [f"{k.split(':')[1]} B: {v}" for k, v in res.notes.items() if k.startswith(test + ":")]
        out += [f'<p class="meta">note: {_esc(n)}</p>' for n in notes]
    out.append(f"<h2>Every trial ({len(res.trial_rows)})</h2>")
    if res.trial_rows:
        import polars as pl
        out.append(f"<details><summary>the trials as run</summary>"
                   f"{frame_table(res.trials.with_columns(pl.col(pl.Float64).round(3)))}</details>")
    out.append("<h2>Spec</h2>")
    out.append(kv_table(res.spec.to_dict()))
    out.append(f"<h2>As text</h2><pre>{_esc(res.text())}</pre>")
    return out


def html_text(obj, title: str | None = None) -> str:
    """The report of obj (a finished Run, a Comparison, or a list of runs to compare) as HTML."""
    if isinstance(obj, (list, tuple)):
        obj = compare(obj)
    chart = _Charts()
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if isinstance(obj, Run):
        if not obj.done:
            raise ValueError("run: the run has not finished: wait() before making its report")
        name = getattr(obj, "name", None)
        title = title or (f"{name}: " if name else "") + charts.spec_title(obj.spec)
        started = (obj.env or {}).get("started_utc", "?")
        meta = f"run on {_esc((obj.env or {}).get('host', '?'))}, started {_esc(started)}"
        body = _run_sections(obj, chart)
    elif isinstance(obj, Comparison):
        title = title or "comparison: " + " vs ".join(obj.names)
        meta = f"{len(obj.runs)} runs; ratios are to the first ({_esc(obj.names[0])})"
        import polars as pl
        body = ["<h2>Chart</h2>", chart(obj.figure(title="")), "<h2>Table</h2>",
                frame_table(obj.table.with_columns(pl.col(pl.Float64).round(4)))]
        for name, run in zip(obj.names, obj.runs):
            spec = spec_dict(run)
            body.append(f"<details><summary><b>{_esc(name)}</b>: spec and environment</summary>"
                        f"<h3>Spec</h3>{kv_table({**spec, 'engine': run.engine_name})}"
                        f"<h3>Environment</h3>{kv_table(run.env or {})}</details>")
    elif isinstance(obj, Rfc2544Result):   # RFC 2544's reporting (section 26)
        title = title or f"RFC 2544: {', '.join(obj.tests)}"
        meta = f"{_esc(obj.stopped or 'not finished')}, {obj.elapsed_s:.1f} s of trials"
        body = _rfc2544_sections(obj, chart)
    elif isinstance(obj, LadderComparison):   # ladders pivoted: the figure, then the side-by-side table
        title = title or "ladders: " + " vs ".join(obj.names)
        meta = "; ".join(f"{_esc(n)}: users {', '.join(str(u) for u, _ in s)}" for n, s in obj.steps.items())
        import polars as pl
        body = ["<h2>Chart</h2>", chart(obj.figure(title="")), "<h2>Table</h2>",
                frame_table(obj.wide.with_columns(pl.col(pl.Float64).round(3)))]
    else:
        raise TypeError(f"report: {obj!r} is not a perfkit.Run, a Comparison, an RFC 2544 result or a list of runs")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"generator\" content=\"perfkit {_esc(__version__)}\">"
            f"<title>{_esc(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{_esc(title)}</h1><p class=\"meta\">{meta}; report made {_esc(now)} by perfkit "
            f"{_esc(__version__)}</p>" + "\n".join(body) + "</body></html>\n")


def html_report(obj, path, title: str | None = None) -> str:
    """Write the report of obj (a Run, a Comparison, an Rfc2544Result or a list of runs) to path; returns path.
    The file is complete on its own: open it anywhere, offline."""
    text = html_text(obj, title)
    path = Path(path).expanduser()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return str(path)

