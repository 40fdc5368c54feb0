"""What the Panel shows around its chart: while a run is going, a row of a few large live
figures (rate, loss, p99, errors, CPU: those the kind's rows have) and the elapsed time out
of the planned one; once it has ended, a compact results table in human units (perfkit.units.human)
and buttons to save the run to a store, export its rows as CSV or Parquet, and write its HTML report.

Plain functions of rows and summaries (tested without a browser) plus the Results widget box;
the Panel's dashboard drawing thread calls them, so one thread draws everything a run shows.
"""
from __future__ import annotations

import datetime as _dt
import html
import re
from pathlib import Path

from perfkit.store import Store
from perfkit.ui import charts
from perfkit.ui.form import GREY, RED, launch
from perfkit.ui.html import html_report
from perfkit.units import human

# Error columns summed into the live "errors" figure (lost packets are the loss figure instead).
ERRORS = (*charts.OTHER_ERRORS, "drop_tx_per_s", "err_connect_per_s", "err_timeout_per_s", "err_reset_per_s",
          "err_read_per_s", "err_tls_per_s", "rst_rx_per_s")

# The large live figures by layout: (label, column or fn(row), unit for human()).
_CPU = ("CPU", "cpu_pct", "%")
_P99 = ("p99", "lat_p99_us", "µs")
_ERRS = ("errors", lambda row: _sum(row, ERRORS), "/s")
_PACKETS = [("received", "pkts_rx_per_s", "pps"), ("loss", "loss_pct", "%"), _P99, _ERRS, _CPU]
LIVE = {
    "socket": _PACKETS,
    "dpdk": _PACKETS,
    "http": [("transactions", "http_resp_per_s", "tps"), _P99, _ERRS, ("open", "sock_current", "conn"), _CPU],
    "http_serve": [("requests", "http_req_per_s", "req/s"), ("open", "sock_current", "conn"), _ERRS, _CPU],
    "dpdk_tcp": [("connections", "sock_open_per_s", "conn/s"), ("responses", "http_resp_per_s", "req/s"),
                 ("open", "sock_current", "conn"), _P99, _ERRS, _CPU],
}

# The results table: (summary key, label, unit for human()), shown where the summary has a value.
RESULTS = (("tps", "transactions/s", "tps"), ("rx_pps", "received", "pps"), ("tx_pps", "sent", "pps"),
           ("rx_bps", "received", "bit/s"), ("loss_pct", "loss", "%"), ("error_rate_pct", "errors", "%"),
           ("latency_us", "latency", "µs"), ("lat_p50_us", "p50", "µs"), ("lat_p99_us", "p99", "µs"),
           ("lat_p999_us", "p99.9", "µs"), ("lat_max_us", "max", "µs"), ("vusers", "users", ""),
           ("cpu_pct", "CPU", "%"), ("duration_s", "duration", "s"))


def _sum(row: dict, keys) -> float | None:
    vals = [row[k] for k in keys if isinstance(row.get(k), (int, float))]
    return sum(vals) if vals else None


def live_figures(spec, row: dict | None) -> list[tuple[str, str]]:
    """(label, text) of the live figures for spec's layout from its latest row ('-' before any)."""
    out = []
    for label, key, unit in LIVE.get(charts.layout_name(spec), _PACKETS):
        v = (key(row) if callable(key) else row.get(key)) if row else None
        if row and v is None and (callable(key) or key not in row):
            continue     # a figure this kind's rows do not carry
        out.append((label, _fmt(v, unit)))
    return out


def _fmt(v, unit: str) -> str:
    if unit == "s":
        return "-" if v is None else f"{v:.3g} s"
    return human(v, "" if unit == "conn" else unit)


def figures_html(figures: list[tuple[str, str]]) -> str:
    """A row of large figures with their labels under them."""
    cells = "".join(f'<div style="min-width:7em;margin-right:1.5em"><div style="font-size:1.7em;'
                    f'font-weight:600;line-height:1.2">{html.escape(text)}</div><div style="color:{GREY};'
                    f'font-size:0.85em">{html.escape(label)}</div></div>' for label, text in figures)
    return f'<div style="display:flex;flex-wrap:wrap;margin:4px 0">{cells}</div>'


def host_rows(run) -> dict:
    """A cluster run's latest row of each host (perfkit.cluster: run.host_frame), {} for one host."""
    hf = run.host_frame
    if hf is None or hf.is_empty() or "host" not in hf.columns:
        return {}
    return {part["host"][-1]: part.row(part.height - 1, named=True)
            for part in hf.partition_by("host", maintain_order=True)}


def hosts_html(run, state: str) -> str:
    """A cluster run's per-host breakdown under its totals: while it runs, each host's latest live
    figures (those of the totals' row above); once it has ended, each host's summary figures, whether
    it finished and its error; the start skew. '' for a run on one host."""
    if run.cluster is None and not (run.summary or {}).get("hosts"):
        return ""
    if state == "running":
        lines = [(h, live_figures(run.spec, row), "") for h, row in host_rows(run).items()]
    else:
        lines = [(h, results_rows(s), "" if s.get("finished") else f"⚠ {s.get('error') or 'did not finish'}")
                 for h, s in run.hosts.items()]
    if not lines:
        return f'<div style="color:{GREY}">hosts: waiting for the first row</div>'
    labels = [label for label, _ in lines[0][1]]
    cell = "padding:1px 14px 1px 0;text-align:left;white-space:nowrap"
    head = "".join(f'<th style="{cell};font-weight:normal;color:{GREY};font-size:0.85em">{html.escape(x)}</th>'
                   for x in ["host", *labels, ""])
    body = "".join(
        f'<tr><td style="{cell}"><b>{html.escape(h)}</b></td>'
        + "".join(f'<td style="{cell};font-variant-numeric:tabular-nums">{html.escape(dict(figs).get(x, "-"))}</td>'
                  for x in labels)
        + f'<td style="{cell};color:{RED}">{html.escape(err)}</td></tr>' for h, figs, err in lines)
    skew = (run.summary or {}).get("start_skew_s")   # in the summary once the run has ended
    note = f", start skew {skew * 1e3:.2f} ms" if isinstance(skew, (int, float)) else ""
    return (f'<div style="color:{GREY};font-size:0.85em">per host ({len(lines)} hosts{note})</div>'
            f'<table style="border-collapse:collapse;margin:2px 0 4px 0"><tr>{head}</tr>{body}</table>')


def planned_s(spec) -> float | None:
    d = getattr(spec, "duration", None)
    return float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) and d > 0 else None


def progress(spec, rows, state: str, stopped: bool = False) -> tuple[float | None, str]:
    """(fraction of the planned time, 'elapsed / planned' text) after the rows so far; the
    fraction is None without a planned time, 1.0 once a run has ended on its own."""
    total = planned_s(spec)
    elapsed = rows[-1]["time_s"] if rows else 0.0
    if total is None:
        return None, f"{elapsed:.1f} s"
    if state == "finished" and not stopped:
        return 1.0, f"{min(elapsed, total):.1f} / {total:g} s"
    return min(1.0, elapsed / total), f"{min(elapsed, total):.1f} / {total:g} s"


def results_rows(summary: dict | None) -> list[tuple[str, str]]:
    """(label, text) of the summary's figures, in human units."""
    s = summary or {}
    return [(label, _fmt(s[key], unit)) for key, label, unit in RESULTS
            if isinstance(s.get(key), (int, float)) and not isinstance(s.get(key), bool)]


def results_html(run) -> str:
    """The compact results table of a finished run: the labels in a row, the figures under them."""
    pairs = results_rows(run.summary)
    cell = "padding:1px 14px 1px 0;text-align:left;white-space:nowrap"
    labels = "".join(f'<th style="{cell};font-weight:normal;color:{GREY};font-size:0.85em">{html.escape(label)}</th>'
                     for label, _ in pairs)
    values = "".join(f'<td style="{cell};font-variant-numeric:tabular-nums;font-size:1.15em">'
                     f'<b>{html.escape(text)}</b></td>' for _, text in pairs)
    err = f'<div style="color:{RED}">⚠ {html.escape(run.error)}</div>' if run.error else ""
    return (f'{err}<table style="border-collapse:collapse;margin:4px 0"><tr>{labels}</tr>'
            f'<tr>{values}</tr></table>')


def default_stem(run) -> str:
    """'<test>-<start time UTC>' as the store names a run."""
    test = re.sub(r"[^A-Za-z0-9._-]", "_", str(getattr(run.spec, "test", type(run.spec).__name__)))[:40] or "run"
    started = (run.env or {}).get("started_utc")
    try:
        t = _dt.datetime.fromisoformat(started) if started else None
    except ValueError:
        t = None
    t = t or _dt.datetime.now(_dt.timezone.utc)
    return f"{test}-{t:%Y%m%d-%H%M%S}"


class Results:
    """The results of one finished run: its table and the Save / CSV / Parquet / HTML report
    buttons. Files go next to the notebook (the kernel's working folder) unless a folder is
    given; each button's work runs in a thread of its own and says where it wrote."""

    def __init__(self, w, run, folder: str | Path | None = None, store: str = "runs"):
        self.run = run
        self.folder = Path(folder) if folder is not None else Path.cwd()
        self.table = w.HTML(results_html(run))
        self.store_box = w.Text(value=store, layout=w.Layout(width="140px"),
                                tooltip="the store folder (perfkit.Store) Save writes to")
        self.message = w.HTML()
        buttons = []
        for text, icon, fn, tip in (("Save", "save", self.save, "save the run to the store folder"),
                                    ("CSV", "download", self.export_csv, "the per-second rows as CSV"),
                                    ("Parquet", "download", self.export_parquet,
                                     "the run as Parquet (perfkit.load reads it back)"),
                                    ("HTML report", "file", self.report, "a self-contained HTML report")):
            b = w.Button(description=text, icon=icon, tooltip=tip, layout=w.Layout(width="auto"))
            b.on_click(lambda _b, fn=fn: launch(self._do, fn))
            buttons.append(b)
        self.buttons = buttons
        self.widget = w.VBox([self.table, w.HBox([*buttons, w.HTML("&nbsp;store:"), self.store_box]),
                              self.message])

    def close(self) -> None:
        """Close its widgets (a new run's results replace them; closed ones leave no saved state)."""
        for wid in (*self.widget.children[1].children, *self.widget.children, self.widget):
            wid.close()

    def _do(self, fn) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 (shown beside the buttons; the kernel carries on)
            self.message.value = f'<span style="color:{RED}">⚠ {html.escape(str(exc))}</span>'

    def _said(self, what: str, path) -> str:
        self.message.value = f"{html.escape(what)}: <code>{html.escape(str(path))}</code>"
        return str(path)

    def _path(self, path, suffix: str) -> Path:
        return Path(path) if path is not None else self.folder / (default_stem(self.run) + suffix)

    def save(self, name: str | None = None) -> str:
        """Save the run to the store folder (perfkit.Store); returns its name in the store."""
        store = Store(self.folder / self.store_box.value.strip() if self.store_box.value.strip() else self.folder)
        saved = store.save(self.run, name=name)
        self._said(f"saved as {saved!r} in the store", store.file(saved))
        return saved

    def export_csv(self, path=None) -> str:
        """The per-second rows as CSV; returns the path."""
        path = self._path(path, ".csv")
        self.run.frame.write_csv(path)
        return self._said("rows written", path)

    def export_parquet(self, path=None) -> str:
        """The run as Parquet (its rows; spec, summary and environment in the metadata); returns the path."""
        path = self._path(path, ".parquet")
        self.run.save(path)
        return self._said("run written", path)

    def report(self, path=None) -> str:
        """The run's self-contained HTML report (perfkit.ui.html_report); returns the path."""
        return self._said("report written", html_report(self.run, self._path(path, ".html")))
