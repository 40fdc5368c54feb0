"""A control panel generated from a spec dataclass.

Every field of the spec becomes one input: a dropdown where the values are a fixed list
(LocalTest.test), a checkbox for booleans, an integer box for plain ints, and a text box
for everything that takes units (size 64K, rate 1.5Mpps, duration 10s). The spec is
built on every change; its ValueError is shown next to the form and Start stays
disabled until the input is valid, so nothing native starts on a bad value.

Start and Stop only call run.start() / run.stop(): both return at once, the run and its
dashboard live in background threads, and the kernel keeps executing cells.
"""
from __future__ import annotations

import dataclasses
import html
import re
import threading

from perfkit import spec as _spec
from perfkit.run import Run
from perfkit.ui import charts
from perfkit.ui.dashboard import Dashboard
from perfkit.units import format_si

# Fields whose values come from a fixed list, by field name.
CHOICES = {"test": _spec.LOCAL_TESTS}

_RED = "#b00020"
_GREEN = "#1b5e20"
_GREY = "#666"


def _type_name(field: dataclasses.Field) -> str:
    t = field.type
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def field_hints(spec_cls) -> dict[str, str]:
    """Per-field help from the spec's docstring ('name   text', continued on deeper-indented lines)."""
    names = {f.name for f in dataclasses.fields(spec_cls)}
    hints: dict[str, str] = {}
    current, indent = None, 0
    for line in (spec_cls.__doc__ or "").splitlines():
        m = re.match(r"^(\s*)(\w+)\s+(\S.*)$", line)
        if m and m.group(2) in names and (current is None or len(m.group(1)) <= indent):
            current, indent = m.group(2), len(m.group(1))
            hints[current] = m.group(3).strip()
        elif current and line.strip() and len(line) - len(line.lstrip()) > indent:
            hints[current] += " " + line.strip()
        else:
            current = None
    return hints


def _text_value(value, name: str) -> str:
    """How a default shows in a text box: 10.0 -> '10s' for durations, None -> ''."""
    if value is None:
        return ""
    if isinstance(value, float) and "duration" in name:
        return f"{value:g}s"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class Panel:
    """A form for spec_cls (a spec class such as LocalTest, or an instance to start from),
    Start/Stop buttons, and the live Dashboard of the current run.

        panel = perfkit.ui.Panel(duration="5s")
        panel              # pick a test, press Start, watch; Stop ends it early
        panel.run          # the Run (finished once panel.wait() returns)

    values: initial field values (as typed in the form, e.g. size="1500", rate="10kpps").
    interval: seconds per row; window: rows the live chart keeps; engine: perfkit.engines().
    """

    def __init__(self, spec_cls=_spec.LocalTest, *, interval: float = 1.0, window: int = 300,
                 redraw_s: float = 1.0, engine: str | None = None, choices: dict | None = None,
                 **values):
        import ipywidgets as w

        start_from = None
        if not isinstance(spec_cls, type):           # an instance: start from its values
            start_from, spec_cls = spec_cls, type(spec_cls)
        if not dataclasses.is_dataclass(spec_cls):
            raise TypeError(f"spec_cls: {spec_cls!r} is not a spec dataclass")
        self.spec_cls = spec_cls
        self.interval, self.window, self.redraw_s, self.engine = interval, window, redraw_s, engine
        self.choices = {**CHOICES, **(choices or {})}
        self.fields = dataclasses.fields(spec_cls)
        names = [f.name for f in self.fields]
        unknown = set(values) - set(names)
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]}: unknown field (known: {', '.join(names)})")
        hints = field_hints(spec_cls)

        self.run: Run | None = None
        self.dashboard: Dashboard | None = None
        self.error: str | None = None
        self._spec = None
        self._lock = threading.RLock()
        self._defaults: dict = {}
        self.inputs: dict = {}      # field name -> input widget
        self.labels: dict = {}      # field name -> its label (turns red on that field's error)
        rows = []
        for f in self.fields:
            default = f.default if f.default is not dataclasses.MISSING else None
            if start_from is not None:
                default = getattr(start_from, f.name)
            self._defaults[f.name] = default
            kind = _type_name(f)
            layout = w.Layout(width="190px", min_width="190px")
            if f.name in self.choices:
                opts = list(self.choices[f.name])
                box = w.Dropdown(options=opts, value=default if default in opts else opts[0],
                                 layout=layout)
            elif kind == "bool":
                box = w.Checkbox(value=bool(default), indent=False, layout=layout)
            elif kind == "int":
                box = w.IntText(value=int(default or 0), layout=layout)
            else:
                box = w.Text(value=_text_value(default, f.name), layout=layout,
                             placeholder="(empty: default)" if default is None else "")
            box.tooltip = hints.get(f.name, "")
            label = w.HTML(self._label_html(f.name, False), layout=w.Layout(width="90px", min_width="90px"))
            hint = w.HTML(f'<span style="color:{_GREY};font-size:90%">'
                          f'{html.escape(hints.get(f.name, ""))}</span>')
            self.inputs[f.name], self.labels[f.name] = box, label
            rows.append(w.HBox([label, box, hint]))

        self.message = w.HTML()
        self.status = w.HTML()
        self.start_button = w.Button(description="Start", button_style="success", icon="play",
                                     layout=w.Layout(width="100px"))
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop",
                                    disabled=True, layout=w.Layout(width="100px"))
        self.output = w.Output()
        self.start_button.on_click(self._click_start)
        self.stop_button.on_click(lambda _b: self.stop())
        title = w.HTML(f"<b>perfkit — {html.escape(spec_cls.__name__)}</b>")
        self.widget = w.VBox([title, *rows, self.message,
                              w.HBox([self.start_button, self.stop_button, self.status]),
                              self.output])
        if values:
            self.set(**values)
        for box in self.inputs.values():
            box.observe(self._on_change, names="value")
        self.validate()
        _prewarm()

    # ---------------------------------------------------------------- form
    @staticmethod
    def _label_html(name: str, bad: bool) -> str:
        style = f"color:{_RED};font-weight:bold" if bad else ""
        return f'<span style="{style}">{"⚠ " if bad else ""}{html.escape(name)}</span>'

    def set(self, **values) -> "Panel":
        """Set form fields as if typed (size='1500', rate='10kpps', busy_poll=True)."""
        for name, value in values.items():
            if name not in self.inputs:
                raise ValueError(f"{name}: unknown field (known: {', '.join(self.inputs)})")
            box = self.inputs[name]
            if hasattr(box, "placeholder"):       # a text box takes what a person would type
                value = _text_value(value, name)
            box.value = value
        return self

    def values(self) -> dict:
        """The form as keyword arguments for the spec: an empty text box is the field's
        default (None where the default is None)."""
        out = {}
        for name, box in self.inputs.items():
            v = box.value
            if isinstance(v, str):
                v = v.strip()
                if v == "":
                    v = self._defaults[name]
            out[name] = v
        return out

    def validate(self):
        """Build the spec from the form; show its error, or what will run. Returns the spec or None."""
        try:
            spec = self.spec_cls(**self.values())
            error = None
        except (ValueError, TypeError) as exc:
            spec, error = None, str(exc)
        with self._lock:
            self._spec, self.error = spec, error
            bad = error.split(":", 1)[0].strip() if error else None
            for name, label in self.labels.items():
                label.value = self._label_html(name, name == bad)
            if error:
                self.message.value = f'<span style="color:{_RED}">⚠ {html.escape(error)}</span>'
            else:
                self.message.value = (f'<span style="color:{_GREEN}">✓ ready: '
                                      f'{html.escape(charts.spec_title(spec))}</span>')
            self._refresh()
        return spec

    def _on_change(self, _change) -> None:
        self.validate()

    @property
    def spec(self):
        """The spec the form describes now, or None while the input is invalid (see .error)."""
        return self._spec

    # ------------------------------------------------------------ running
    @property
    def running(self) -> bool:
        return self.run is not None and not self.run.done

    def _refresh(self) -> None:
        """Buttons from the state: Start needs a valid spec and no live run."""
        with self._lock:
            running = self.running
            self.start_button.disabled = running or self._spec is None
            self.stop_button.disabled = not running

    def _set_status(self, text: str, colour: str = _GREY) -> None:
        self.status.value = f'<span style="color:{colour}">{html.escape(text)}</span>'

    def start(self) -> Run:
        """What the Start button does: a new Run of the form's spec, started, with a
        Dashboard under the form. Returns at once with the live Run."""
        with self._lock:
            if self.running:
                raise RuntimeError("a run is going: stop it (or wait) before starting another")
            spec = self._spec
            if spec is None:
                raise ValueError(self.error or "the form is not valid")
            if self.dashboard is not None:   # its last redraw must not land on the new chart
                self.dashboard.detach(self.output)
            kw = {} if self.engine is None else {"engine": self.engine}
            run = Run(spec, interval=self.interval, **kw)
            dash = Dashboard(run, window=self.window, redraw_s=self.redraw_s, on_done=self._on_done)
            try:
                run.start()
            except Exception:
                dash.close()
                raise
            self.run, self.dashboard = run, dash
            self._set_status(f"▶ running {charts.spec_title(spec)}")
            self._refresh()
        dash.attach(self.output)
        return run

    def _click_start(self, _button) -> None:
        try:
            self.start()
        except Exception as exc:  # show it in the panel; the kernel carries on
            self._set_status(f"⚠ could not start: {exc}", _RED)
            self._refresh()

    def stop(self) -> None:
        """What the Stop button does: ask the run to end now (returns at once)."""
        run = self.run
        if run is not None and not run.done:
            run.stop()
            self.stop_button.disabled = True
            self._set_status("■ stopping…")

    def wait(self, timeout: float | None = None) -> Run | None:
        """Block until the current run has ended and its static chart is shown;
        returns the Run (None on timeout)."""
        if self.dashboard is None:
            raise RuntimeError("nothing started yet: press Start or call panel.start()")
        return self.run if self.dashboard.wait(timeout) else None

    def _on_done(self, dash: Dashboard) -> None:
        """From the dashboard's drawing thread, after the final redraw."""
        with self._lock:
            if dash is not self.dashboard:   # an earlier run's dashboard finishing late
                return
            run = dash.run
            if run.error:
                self._set_status(f"⚠ {run.error}", _RED)
            else:
                self._set_status(f"■ finished: {summary_line(run.summary)}", _GREEN)
            self._refresh()

    # ------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        state = "running" if self.running else ("finished" if self.run else "idle")
        return f"<perfkit.ui.Panel {self.spec_cls.__name__} {state}, spec={self._spec!r}>"


_prewarmed = threading.Event()


def _prewarm() -> None:
    """Import plotly's widget code in the background once per process: the first
    FigureWidget can take seconds, and a person pressing Start should not wait for it."""
    if _prewarmed.is_set():
        return
    _prewarmed.set()

    def imports():
        try:
            import plotly.basewidget  # noqa: F401
            import plotly.io  # noqa: F401
        except Exception:  # noqa: BLE001 (the dashboard reports it when it is built)
            pass
    threading.Thread(target=imports, name="perfkit-ui-prewarm", daemon=True).start()


def _time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} µs"


def summary_line(s: dict | None) -> str:
    """One line from run.summary: rates and loss for bandwidth tests, latency for latency tests."""
    if not s:
        return "no summary"
    parts = []
    if str(s.get("test", "")).endswith("_lat") and s.get("latency_us") is not None:
        parts.append(f"latency {_time(s['latency_us'])} (half round trip)")
        parts.append(f"{format_si(s.get('rx_pps') or 0, 'msg/s')}")
    else:
        parts.append(format_si(s.get("rx_pps") or 0, "pps"))
        parts.append(format_si(s.get("rx_bps") or 0, "bps"))
        if s.get("loss_pct") is not None:
            parts.append(f"loss {s['loss_pct']:.3g}%")
        if s.get("lat_p50_us") is not None:
            parts.append(f"one-way p50 {_time(s['lat_p50_us'])}")
    parts.append(f"cpu {s.get('cpu_pct', 0):.0f}%")
    return ", ".join(parts)
