"""A widget over a run store: filter the runs, pick some, compare them.

    browser = perfkit.ui.StoreBrowser("runs")     # a perfkit.Store or its folder
    browser                                       # filters (test, engine, host, text), the runs,
                                                  # Compare and Report buttons, the comparison
    browser.select("udp_bw-a", "udp_bw-b")        # the same from code
    cmp = browser.compare()                       # a perfkit.Comparison, also shown below

The list is the store's `list()` frame; the first run picked is the comparison's baseline.
"""
from __future__ import annotations

import html
from pathlib import Path

from perfkit.store import Store
from perfkit.ui import charts
from perfkit.ui.html import html_report
from perfkit.ui.panel import summary_line

ALL = "(all)"
_RED, _GREY, _GREEN = "#b00020", "#666", "#1b5e20"


def run_label(rec: dict) -> str:
    """One line of the run list: name, start time, test, size, and its headline figure."""
    t = rec.get("time")
    when = t.strftime("%Y-%m-%d %H:%M:%S") if t is not None else "?"
    what = f"{rec.get('test') or '?'} {rec.get('size') or ''}B".strip()
    head = summary_line({k: rec.get(k) for k in ("rx_pps", "rx_bps", "loss_pct", "latency_us", "lat_p50_us")}
                        | {"test": rec.get("test"), "cpu_pct": rec.get("cpu_pct") or 0})
    tags = f" [{', '.join(rec.get('tags') or [])}]" if rec.get("tags") else ""
    return f"{rec['name']} · {when} · {what} on {rec.get('host') or '?'} · {head}{tags}"


class StoreBrowser:
    """Filters, the filtered runs (pick several), Compare / Report / Refresh, and the
    comparison of the picked runs (table and chart).

    store: a perfkit.Store or a folder. report_dir: where Report writes HTML files
    (default: the store's folder)."""

    def __init__(self, store, report_dir=None, rows: int = 10):
        import ipywidgets as w  # the notebook extra: imported when a browser is made
        self.store = store if isinstance(store, Store) else Store(store)
        self.report_dir = Path(report_dir) if report_dir is not None else self.store.path
        self.comparison = None
        self.last_report: str | None = None
        self.frame = None        # the listing as shown (after the filters)
        self._all = None         # the whole listing
        self._updating = False

        lay = w.Layout(width="170px")
        self.test = w.Dropdown(options=[ALL], value=ALL, description="test", layout=lay)
        self.engine = w.Dropdown(options=[ALL], value=ALL, description="engine", layout=lay)
        self.host = w.Dropdown(options=[ALL], value=ALL, description="host", layout=lay)
        self.text = w.Text(value="", placeholder="name, tag, note…", description="text",
                           layout=w.Layout(width="230px"))
        for d in (self.test, self.engine, self.host):
            d.style.description_width = "45px"
        self.text.style.description_width = "35px"
        self.runs = w.SelectMultiple(options=[], rows=rows, layout=w.Layout(width="100%"))
        self.compare_button = w.Button(description="Compare", icon="columns", button_style="primary",
                                       disabled=True, layout=w.Layout(width="110px"))
        self.report_button = w.Button(description="Report", icon="file", disabled=True,
                                      layout=w.Layout(width="110px"))
        self.refresh_button = w.Button(description="Refresh", icon="refresh", layout=w.Layout(width="110px"))
        self.status = w.HTML()
        self.output = w.Output()
        self.compare_button.on_click(lambda _b: self._safely(self.compare))
        self.report_button.on_click(lambda _b: self._safely(self.report))
        self.refresh_button.on_click(lambda _b: self._safely(self.refresh))
        for box in (self.test, self.engine, self.host, self.text):
            box.observe(lambda _c: self._apply(), names="value")
        self.runs.observe(lambda _c: self._on_pick(), names="value")
        title = w.HTML(f"<b>perfkit runs</b> — <code>{html.escape(str(self.store.path))}</code>")
        self.widget = w.VBox([title, w.HBox([self.test, self.engine, self.host, self.text]), self.runs,
                              w.HBox([self.compare_button, self.report_button, self.refresh_button,
                                      self.status]), self.output])
        self.refresh()

    # ------------------------------------------------------------ listing
    def refresh(self) -> "StoreBrowser":
        """Read the store again (new runs appear; filters and picks are kept)."""
        self._all = self.store.list()
        self._updating = True
        try:
            for box, col in ((self.test, "test"), (self.engine, "engine"), (self.host, "host")):
                values = sorted(v for v in self._all[col].unique().to_list() if v is not None)
                keep = box.value if box.value in values else ALL
                box.options = [ALL, *values]
                box.value = keep
        finally:
            self._updating = False
        self._apply()
        return self

    def filters(self) -> dict:
        """The filters as Store.list() arguments."""
        out = {}
        for box, col in ((self.test, "test"), (self.engine, "engine"), (self.host, "host")):
            if box.value != ALL:
                out[col] = box.value
        if self.text.value.strip():
            out["text"] = self.text.value.strip()
        return out

    def set_filters(self, test=ALL, engine=ALL, host=ALL, text="") -> "StoreBrowser":
        """Set every filter at once (as if picked in the form); ALL or None clears one."""
        self._updating = True
        try:
            for box, value in ((self.test, test), (self.engine, engine), (self.host, host)):
                value = ALL if value is None else value
                if value not in box.options:
                    raise ValueError(f"{box.description}: {value!r} is not among the stored runs' "
                                     f"values ({', '.join(map(str, box.options[1:])) or 'none'})")
                box.value = value
            self.text.value = text or ""
        finally:
            self._updating = False
        self._apply()
        return self

    def _apply(self) -> None:
        if self._updating or self._all is None:
            return
        f = self.filters()
        text = f.pop("text", None)
        frame = self._all
        for col, value in f.items():
            frame = frame.filter(frame[col] == value)
        if text:   # the same matching as Store.list(text=...)
            names = set(self.store.list(text=text)["name"].to_list())
            frame = frame.filter(frame["name"].is_in(list(names)))
        self.frame = frame
        picked = [n for n in self.runs.value if n in set(frame["name"].to_list())]
        self._updating = True
        try:
            self.runs.options = [(run_label(rec), rec["name"]) for rec in frame.iter_rows(named=True)]
            self.runs.value = tuple(picked)
        finally:
            self._updating = False
        self._on_pick()

    # ------------------------------------------------------------ picking
    @property
    def selected(self) -> list[str]:
        """The picked runs' names, in list order (the first is the baseline)."""
        return list(self.runs.value)

    def select(self, *names) -> "StoreBrowser":
        """Pick runs by name (they must pass the current filters)."""
        shown = [v for _, v in self.runs.options]
        for n in names:
            if n not in shown:
                raise ValueError(f"select: {n!r} is not among the runs shown "
                                 f"({len(shown)} after the filters)")
        self.runs.value = tuple(names)
        return self

    def _on_pick(self) -> None:
        if self._updating:
            return
        n = len(self.runs.value)
        self.compare_button.disabled = n == 0
        self.report_button.disabled = n == 0
        shown = len(self.runs.options)
        total = len(self._all) if self._all is not None else 0
        self._set_status(f"{shown} of {total} runs shown, {n} picked"
                         + ("" if n else " (pick one or more: Ctrl/Shift-click)"))

    def _set_status(self, text: str, colour: str = _GREY) -> None:
        self.status.value = f'<span style="color:{colour}">{html.escape(text)}</span>'

    # ------------------------------------------------------------ actions
    def compare(self):
        """Compare the picked runs; shows the table and the chart below the list and
        returns the perfkit.Comparison."""
        names = self.selected
        if not names:
            raise ValueError("select: pick at least one run to compare")
        cmp = self.store.compare(*names)
        self.comparison = cmp
        fig = cmp.figure()
        table = {"text/html": cmp.table._repr_html_(), "text/plain": repr(cmp.table)}
        self.output.outputs = (
            {"output_type": "display_data", "data": table, "metadata": {}},
            # plotly's HTML too, for nbconvert and nbviewer; no PNG: an Output's outputs are widget
            # state, which GitHub never shows (cmp.figure() as a cell's result carries one)
            {"output_type": "display_data", "data": charts.static_bundle(fig, repr(cmp), png=False), "metadata": {}},
        )
        self._set_status(f"compared {len(names)} runs: ratios are to {names[0]}", _GREEN)
        return cmp

    def report(self) -> str:
        """Write an HTML report of the picked runs (one run: its own report; several: their
        comparison) into report_dir; returns the path."""
        names = self.selected
        if not names:
            raise ValueError("select: pick at least one run for a report")
        if len(names) == 1:
            obj, stem = self.store.load(names[0]), names[0]
        else:
            obj, stem = self.store.compare(*names), "compare-" + "-vs-".join(names)[:150]
        self.report_dir.mkdir(parents=True, exist_ok=True)
        path = html_report(obj, self.report_dir / f"{stem}.html")
        self.last_report = path
        self._set_status(f"report written: {path}", _GREEN)
        return path

    def _safely(self, fn) -> None:
        try:
            fn()
        except Exception as exc:  # show it in the widget; the kernel carries on
            self._set_status(f"⚠ {exc}", _RED)

    # ------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        shown = len(self.runs.options)
        return f"<perfkit.ui.StoreBrowser {str(self.store.path)!r}: {shown} runs shown, {len(self.selected)} picked>"
