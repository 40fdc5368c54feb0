"""perfkit's live chart widget: a plotly figure redrawn from Python, small in a saved notebook.

plotly's FigureWidget (an anywidget since plotly 6) carries the whole plotly.js bundle (~5 MB)
in every widget's state; a headless run (nbclient, nbval) keeps every widget's last state in
the saved notebook, closed or not, so a quickstart with two live charts saved at 10.9 MB.
LiveFigure keeps a plain go.Figure on the Python side and syncs only its JSON (`figure`) and
a small module that draws it with Plotly.react. plotly.js itself travels in one PlotlyJs
widget shared by every live figure of the kernel: the page evaluates it once and keeps it,
and when the last live figure closes the shared widget's source is emptied and it is closed
(so a saved notebook holds no copy of it).

    fig = LiveFigure(charts.empty_figure("t"))    # any go.Figure
    with fig.batch_update():                      # change fig.data / fig.layout as on a go.Figure
        fig.data[0].x, fig.data[0].y = [0, 1], [3, 4]
    fig.close()                                   # once a static figure replaced it
"""
from __future__ import annotations

import contextlib
import threading

import anywidget
import traitlets

# Loads plotly.js once per page (from the shared PlotlyJs widget, or a Plotly already on the
# page), then draws and redraws the figure's JSON with Plotly.react (no flicker, zoom kept).
_ESM = r"""
const KEY = "__perfkitPlotly";
function plotly(model) {
  if (globalThis[KEY]) return globalThis[KEY];
  if (globalThis.Plotly && globalThis.Plotly.react) return Promise.resolve(globalThis.Plotly);
  const ref = model.get("plotly_js") || "";
  const p = model.widget_manager.get_model(ref.replace("IPY_MODEL_", "")).then((lib) => {
    const src = lib.get("source");
    if (!src) throw new Error("plotly.js is not loaded (the chart has ended)");
    const module = { exports: {} };
    new Function("module", "exports", src)(module, module.exports);
    return module.exports && module.exports.react ? module.exports : globalThis.Plotly;
  });
  globalThis[KEY] = p;
  p.catch(() => { if (globalThis[KEY] === p) delete globalThis[KEY]; });
  return p;
}
export default {
  async render({ model, el }) {
    const div = document.createElement("div");
    div.className = "perfkit-livefig";
    div.style.width = "100%";
    el.appendChild(div);
    let Plotly;
    try {
      Plotly = await plotly(model);
    } catch (e) {
      div.textContent = "perfkit: " + e.message;
      return;
    }
    const draw = () => {
      const f = JSON.parse(model.get("figure") || "{}");
      if (f.data) Plotly.react(div, f.data, f.layout || {}, { displaylogo: false, responsive: true });
    };
    draw();
    model.on("change:figure", draw);
    return () => { model.off("change:figure", draw); Plotly.purge(div); };
  },
};
"""


class PlotlyJs(anywidget.AnyWidget):
    """plotly.js for the live figures of this kernel (never shown itself)."""
    _esm = traitlets.Unicode("export default {};").tag(sync=True)
    source = traitlets.Unicode("").tag(sync=True)


class LiveFigure(anywidget.AnyWidget):
    """A plotly figure shown live: fig.data and fig.layout are the go.Figure's; each
    batch_update() sends the figure once, as JSON."""
    _esm = traitlets.Unicode(_ESM).tag(sync=True)
    figure = traitlets.Unicode("{}").tag(sync=True)
    plotly_js = traitlets.Unicode("").tag(sync=True)   # "IPY_MODEL_<id>" of the shared PlotlyJs

    def __init__(self, fig, **kwargs):
        self.fig = fig
        self._released = False
        super().__init__(plotly_js=f"IPY_MODEL_{_acquire().model_id}", **kwargs)
        self.push()

    @property
    def data(self):
        return self.fig.data

    @property
    def layout(self):
        return self.fig.layout

    @contextlib.contextmanager
    def batch_update(self):
        """Change fig.data and fig.layout inside; the front end gets the result once."""
        yield self
        self.push()

    def push(self) -> None:
        import plotly.io as pio  # plotly loads with the first chart
        self.figure = pio.to_json(self.fig, validate=False)

    def close(self) -> None:
        """Empty the synced figure (the saved notebook keeps a closed widget's last state) and close."""
        if not self._released:
            self._released = True
            self.figure = "{}"
            _release()
        super().close()


_lock = threading.Lock()
_shared: PlotlyJs | None = None
_users = 0
_source: str | None = None


def plotly_js() -> str:
    """The plotly.js bundle that ships with the installed plotly (read once)."""
    global _source
    if _source is None:
        from plotly.offline import get_plotlyjs  # plotly loads with the first chart
        _source = get_plotlyjs()
    return _source


def _acquire() -> PlotlyJs:
    global _shared, _users
    with _lock:
        if _shared is None:
            _shared = PlotlyJs(source=plotly_js())
        _users += 1
        return _shared


def _release() -> None:
    global _shared, _users
    with _lock:
        _users -= 1
        if _users <= 0 and _shared is not None:
            lib, _shared, _users = _shared, None, 0
            lib.source = ""     # nbclient keeps a closed widget's last state: keep it empty
            lib.close()


def live_count() -> int:
    """Live figures open now (the shared plotly.js widget exists while this is above 0)."""
    return _users
