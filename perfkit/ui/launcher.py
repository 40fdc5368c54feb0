"""Every spec's Panel in one widget, a tab each, and the lab's LabPanel in the last: built on
perfkit.ui.panel and perfkit.ui.lab, which know nothing of it."""
from __future__ import annotations

from perfkit import kinds as _kinds
from perfkit.ui.lab import LabPanel
from perfkit.ui.panel import Panel, resolve_spec


class Launcher:
    """Every spec's Panel in one widget, a tab each (LocalTest, RemoteTest, HttpLoad,
    HttpServe, DpdkFlows, DpdkReflect): every test perfkit runs, from one cell.

        launcher = perfkit.ui.Launcher(interval=0.5)
        launcher                       # pick a tab, fill in, Start
        launcher["HttpLoad"].run       # a tab's Panel and its Run

    kinds: which specs (names in perfkit.kinds.SPECS), in tab order; panel_kwargs go to
    every Panel (interval, window, redraw_s). lab: a last tab with the LabPanel
    (perfkit lab up / status / down), launcher.lab.
    """

    def __init__(self, kinds=None, lab: bool = True, **panel_kwargs):
        import ipywidgets as w  # the notebook extra: imported when a launcher is made
        kinds = list(kinds) if kinds is not None else list(_kinds.SPECS)
        for k in kinds:
            resolve_spec(k)                       # ValueError naming the known ones
        self.panels = {k: Panel(k, **panel_kwargs) for k in kinds}
        self.lab = None
        if lab:
            self.lab = LabPanel()
        self.widget = w.Tab(children=[p.widget for p in self.panels.values()]
                            + ([self.lab.widget] if self.lab else []))
        self.widget.titles = tuple(kinds) + (("Lab",) if self.lab else ())

    def __getitem__(self, kind: str) -> Panel:
        return self.panels[kind]

    @property
    def current(self) -> Panel:
        """The Panel of the selected tab (the LabPanel on the Lab tab)."""
        i = self.widget.selected_index or 0
        return list(self.panels.values())[i] if i < len(self.panels) else self.lab

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"<perfkit.ui.Launcher {', '.join(self.panels)}>"
