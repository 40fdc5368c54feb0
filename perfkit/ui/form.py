"""What the panels' forms share (perfkit.ui.panel's Panel, perfkit.ui.lab's LabPanel): how a
field shows (FieldUI) and its row of widgets, the colours of their messages, and the launcher
thread that starts their jobs."""
from __future__ import annotations

import dataclasses
import html
import queue
import threading

from perfkit.units import Rate

# A bool | None field: a drop-down whose "auto" is None (the spec decides).
TRISTATE = {None: "auto", True: "on", False: "off"}

RED = "#b00020"
GREEN = "#1b5e20"
GREY = "#666"
AMBER = "#b26a00"   # finished, but some requests/packets failed


@dataclasses.dataclass(frozen=True)
class FieldUI:
    """How one spec field shows in the form."""
    name: str
    kind: str            # choice | combo | bool | tristate | int | text | secret | lines | area | ranges | pair | multi
    default: object      # the spec's default (None: empty box)
    choices: tuple = ()  # choice: the options; combo: suggestions
    unit: str = ""
    range: str = ""      # 'lo..hi' as shown
    bounds: tuple | None = None   # (lo, hi) where the range is two numbers
    help: str = ""
    advanced: bool = False   # a tuning knob: its row is folded under "Advanced"


def text_value(value, name: str, seconds: bool = False) -> str:
    """How a value shows in a text box: 10.0 -> '10s' for durations (seconds), None -> '',
    a Rate -> '1500000pps' (exact), a dict of headers -> 'Name: value' lines."""
    if value is None:
        return ""
    if isinstance(value, (tuple, list)) and name == "clients":      # ((ip, n), ...) or 'ip+n' strings
        return ", ".join(v if isinstance(v, str) else f"{v[0]}+{v[1]}" for v in value)
    if isinstance(value, (tuple, list)) and name == "lport_range":
        return f"{value[0]}-{value[1]}"
    if isinstance(value, (tuple, list)) and name == "sizes":        # ((size, weight), ...)
        return ",".join(f"{a}:{b}" for a, b in value)
    if isinstance(value, (tuple, list)):                             # a URL list
        return " ".join(str(v) for v in value)
    if isinstance(value, Rate):
        return f"{value.value:.15g}{value.unit}"
    if isinstance(value, dict):
        return "\n".join(f"{k}: {v}" for k, v in value.items())
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and seconds:
        return f"{value:g}s"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def field_row(w, fu: FieldUI, value, seconds: bool = False):
    """One form row: label, input, unit/range/default, help line (seconds: durations as 10s)."""
    layout = w.Layout(width="230px", min_width="230px")
    default = fu.default
    if fu.kind == "tristate":
        value = TRISTATE.get(value, value)
    if fu.kind in ("choice", "tristate"):
        opts = list(fu.choices)
        box = w.Dropdown(options=opts, value=value if value in opts else opts[0], layout=layout)
    elif fu.kind == "combo":
        box = w.Combobox(options=list(fu.choices), value=text_value(value, fu.name, seconds),
                         ensure_option=False, layout=layout,
                         placeholder="(empty: none)" if default is None else "")
    elif fu.kind == "bool":
        box = w.Checkbox(value=bool(value), indent=False, layout=layout)
    elif fu.kind == "int":
        box = w.IntText(value=int(value or 0), layout=layout)
    elif fu.kind == "secret":
        box = w.Password(value=text_value(value, fu.name, seconds), layout=layout,
                         placeholder="(empty: PERFKIT_TOKEN)")
    elif fu.kind == "multi":
        box = w.SelectMultiple(options=list(fu.choices), value=tuple(value or ()), rows=3, layout=layout)
    elif fu.kind in ("lines", "area"):
        box = w.Textarea(value=text_value(value, fu.name, seconds), rows=2, layout=layout,
                         placeholder="(empty: none)")
    else:
        box = w.Text(value=text_value(value, fu.name, seconds), layout=layout,
                     placeholder="(empty: default)" if default is None else "")
    box.tooltip = fu.help
    label = w.HTML(label_html(fu.name, False), layout=w.Layout(width="130px", min_width="130px"))
    info = [x for x in (fu.unit, fu.range and f"range {fu.range}",
                        f"default {text_value(default, fu.name, seconds) or 'none'}"
                        if fu.kind not in ("secret",) else "") if x]
    unit = w.HTML(f'<span style="color:{GREY};font-size:90%">{html.escape(" · ".join(info))}</span>',
                  layout=w.Layout(width="300px", min_width="300px"))
    hint = w.HTML(f'<span style="color:{GREY};font-size:90%">{html.escape(fu.help)}</span>')
    return box, label, unit, w.HBox([label, box, unit, hint])


def label_html(name: str, bad: bool) -> str:
    """A field's label: red with a warning sign when its value is the one in error."""
    style = f"color:{RED};font-weight:bold" if bad else ""
    return f'<span style="{style}">{"⚠ " if bad else ""}{html.escape(name)}</span>'


_jobs: queue.SimpleQueue = queue.SimpleQueue()
_launcher_thread: threading.Thread | None = None
_launcher_lock = threading.Lock()


def start_launcher() -> None:
    """The process's launcher thread (started once, from the first Panel): it starts a
    thread for each job. threading.Thread.start() waits until the new thread holds the
    GIL, which can take long when other threads are busy; that wait happens here, so
    Start only puts a job on a queue and returns at once."""
    global _launcher_thread
    with _launcher_lock:
        if _launcher_thread is not None and _launcher_thread.is_alive():
            return
        _launcher_thread = threading.Thread(target=_launch_loop, name="perfkit-ui-launcher", daemon=True)
        _launcher_thread.start()


def _launch_loop() -> None:
    while True:
        fn, args = _jobs.get()
        threading.Thread(target=fn, args=args, name="perfkit-ui-start", daemon=True).start()


def launch(fn, *args) -> None:
    """fn(*args) in a thread of its own, started by the launcher thread."""
    start_launcher()
    _jobs.put((fn, args))
