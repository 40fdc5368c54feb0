"""perfkit lab from a notebook: a form for perfkit.lab.Lab (hosts, MTU, name and the
impairments of every link), with up, impair, down and status buttons (perfkit lab up /
status / down). The form is checked by Lab's own constructor on every change, which
validates everything before anything is made; up, impair and down run in a background
thread (making namespaces takes a second or more), so the buttons return at once.

    lp = perfkit.ui.LabPanel(delay="5ms", loss="1%")
    lp.up(); lp.wait()            # what the up button does
    lp.lab.name                   # put it in a LocalTest or HttpLoad panel's lab field
    lp.set(delay="20ms").impair() # change every link while traffic flows
    lp.set(cpu_quota="h2=50%").impair()   # VM-like hosts: cpu_quota, cpus, mem (perfkit.cgroups)
    lp.down()

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): without, the form still checks and up says why.
"""
from __future__ import annotations

import html
import threading

from perfkit.cgroups import LIMITS
from perfkit.lab import Lab, status_text
from perfkit.ui.form import GREEN, GREY, RED, FieldUI, field_row, label_html, launch

_IMPAIR = ("delay", "jitter", "loss", "duplicate", "reorder", "corrupt", "rate")


def lab_fields() -> list[FieldUI]:
    return [
        FieldUI("hosts", "int", 2, (), "hosts", "2..", None, "2: a veth pair between h1 and h2; more share a bridge"),
        FieldUI("delay", "text", None, (), "seconds (10ms)", "", None, "one-way delay per link"),
        FieldUI("jitter", "text", None, (), "seconds (1ms)", "", None, "delay variation (uniform, ±); needs delay"),
        FieldUI("loss", "text", None, (), "percent (1%)", "", None, "packets lost per link"),
        FieldUI("duplicate", "text", None, (), "percent (1%)", "", None, "packets sent twice"),
        FieldUI("reorder", "text", None, (), "percent (25%)", "", None, "packets sent without the delay (needs delay)"),
        FieldUI("corrupt", "text", None, (), "percent (0.1%)", "", None, "packets with a flipped bit"),
        FieldUI("rate", "text", None, (), "bits/s (100mbit, 1Gbit)", "", None, "link rate, whole frames"),
        FieldUI("mtu", "int", 1500, (), "bytes", "", None, "MTU of every link"),
        FieldUI("name", "text", None, (), "1-8 lowercase letters/digits", "", None,
                "the lab's name (empty: l<block>); put it in a test's lab field"),
        # VM-like hosts: perfkit.cgroups.LIMITS (a value for every host, h2=50% for one)
        *[FieldUI(name, "text", None, (), unit + "; h2=… for one host", "", None, text)
          for name, (_flag, text, unit) in LIMITS.items()],
    ]


class LabPanel:
    """A form for a lab, with up / impair / down / status (see the module doc)."""

    def __init__(self, **values):
        import ipywidgets as w  # the notebook extra: imported when a panel is made
        self.form = lab_fields()
        self.inputs, self.labels = {}, {}
        self._defaults = {fu.name: fu.default for fu in self.form}
        rows = []
        for fu in self.form:
            box, label, _, row = field_row(w, fu, fu.default)   # the same rows as a Panel's
            self.inputs[fu.name], self.labels[fu.name] = box, label
            rows.append(row)
        self.lab = None                   # the Lab this panel made (up)
        self.error: str | None = None
        self.message, self.line, self.info = w.HTML(), w.HTML(), w.HTML()
        self.buttons = {}
        for name, icon, style in (("up", "play", "success"), ("impair", "sliders", ""), ("down", "stop", "danger"),
                                  ("status", "list", "")):
            b = w.Button(description=name, icon=icon, button_style=style, layout=w.Layout(width="90px"))
            b.on_click(lambda _b, n=name: getattr(self, n)())
            self.buttons[name] = b
        self._busy = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self.widget = w.VBox([w.HTML("<b>perfkit — lab</b> "
                                     f'<span style="color:{GREY}">(network namespaces joined by veth; root)</span>'),
                              *rows, self.message, w.HBox([*self.buttons.values(), self.line]), self.info])
        if values:
            self.set(**values)
        for box in self.inputs.values():
            box.observe(lambda _c: self.validate(), names="value")
        self.validate()

    def set(self, **values) -> "LabPanel":
        """Set fields as if typed (delay='10ms', loss='1%', hosts=3)."""
        for name, value in values.items():
            if name not in self.inputs:
                raise ValueError(f"{name}: unknown field (known: {', '.join(self.inputs)})")
            self.inputs[name].value = value if name in ("hosts", "mtu") else ("" if value is None else str(value))
        return self

    def values(self) -> dict:
        out = {}
        for name, box in self.inputs.items():
            v = box.value
            out[name] = (v.strip() or None) if isinstance(v, str) else v
        return out

    def impairments(self) -> dict:
        return {k: v for k, v in self.values().items() if k in _IMPAIR}

    def validate(self):
        """Lab's own checks on the form; the Lab (not up) or None (see .error)."""
        try:
            made, error = Lab(**self.values()), None
        except (ValueError, TypeError) as exc:
            made, error = None, str(exc)
        self.error = error
        bad = error.split(":", 1)[0].strip() if error else None
        for name, label in self.labels.items():
            label.value = label_html(name, name == bad)
        if error:
            self.message.value = f'<span style="color:{RED}">⚠ {html.escape(error)}</span>'
        else:
            hosts = "; ".join(f"{h} {lim}" for h, lim in made.initial_limits.items())
            self.message.value = (f'<span style="color:{GREEN}">✓ ready: {html.escape(str(made.initial))}'
                                  f'{html.escape("; " + hosts) if hosts else ""}</span>')
        self._refresh()
        return made

    def _refresh(self) -> None:
        busy = self._busy.is_set()
        up = self.lab is not None and self.lab.is_up
        self.buttons["up"].disabled = busy or up or self.error is not None
        self.buttons["impair"].disabled = busy or not up or self.error is not None
        self.buttons["down"].disabled = busy or not up

    def _say(self, text: str, colour: str = GREY) -> None:
        self.line.value = f'<span style="color:{colour}">{html.escape(text)}</span>'

    def _job(self, what: str, fn) -> None:
        if self._busy.is_set():
            raise RuntimeError("the lab is busy: wait() for it")
        self._busy.set()
        self._idle.clear()
        self._refresh()
        self._say(f"… {what}")

        def work():
            try:
                done = fn()
                self._say(f"■ {done}", GREEN)
            except Exception as exc:  # noqa: BLE001 (shown in the panel; the kernel carries on)
                self._say(f"⚠ {what}: {exc}", RED)
            finally:
                self._busy.clear()
                self._refresh()
                self.status()
                self._idle.set()
        launch(work)

    def up(self) -> None:
        """What the up button does: make the lab (perfkit lab up) in a background thread."""
        made = self.validate()
        if made is None:
            raise ValueError(self.error)

        def work():
            made.up()
            self.lab = made
            return f"{made.name} up: " + ", ".join(f"{h.name} {h.ipv4}" for h in made.hosts)
        self._job("making the lab", work)

    def impair(self) -> None:
        """What the impair button does: every link of this lab gets the form's impairments
        (the others off), and the hosts its limits (an empty field: no limit), while traffic flows."""
        if self.lab is None or self.validate() is None:
            raise ValueError(self.error or "no lab is up: press up first")
        lab, imp = self.lab, self.impairments()
        limits = {k: v for k, v in self.values().items() if k in LIMITS}

        def work():
            now = lab.impair(None, reset=True, **imp)
            if any(limits.values()) or lab.limits:   # the form's limits; an empty field: none
                lab.limit(**{k: v or "max" for k, v in limits.items()})
            hosts = "; ".join(f"{h}: {t}" for h, t in lab.limits.items())
            return "links: " + "; ".join(str(i) for i in now) + (f"; hosts: {hosts}" if hosts else "")
        self._job("changing the links", work)

    def down(self) -> None:
        """What the down button does: remove the lab this panel made (perfkit lab down NAME)."""
        if self.lab is None:
            raise ValueError("no lab is up from this panel")
        lab = self.lab

        def work():
            lab.down()
            self.lab = None
            return f"{lab.name} down"
        self._job("removing the lab", work)

    def status(self) -> str:
        """What the status button does: every perfkit lab on this machine (perfkit lab status)."""
        text = status_text()
        self.info.value = f"<pre>{html.escape(text)}</pre>"
        return text

    def wait(self, timeout: float | None = None) -> bool:
        """Block until up / impair / down has finished."""
        return self._idle.wait(timeout)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"<perfkit.ui.LabPanel {self.lab!r}>"
