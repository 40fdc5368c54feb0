"""How a finished plotly figure displays, in a notebook and outside one.

A figure's display bundle carries the plotly JSON (JupyterLab, Notebook 7 and VS Code draw it),
plotly's own HTML (plotly.js from its CDN: nbconvert and nbviewer show it without a kernel) and
a PNG (GitHub shows only images), drawn by kaleido in one headless Chromium kept for the process
(a browser per figure took 2-5 s here; a kept one 0.2-0.4 s). When kaleido or its browser is
missing or fails, one line says so and the figures carry no PNG from then on: the HTML remains.

Plotly and kaleido are imported when a figure is first shown (both are the notebook extra's).
Below the UI: the comparisons (perfkit.comparison) display their figures this way too.
"""
from __future__ import annotations

import atexit
import base64
import json
import os
import sys
import threading

PNG_WIDTH = 900      # px of layout (a figure's own width if smaller): the dashboards' legends clear the next panel
PNG_SCALE = 0.75     # image px per layout px: a six-panel dashboard in ~75 kB of base64, its text still readable
PNG_TIMEOUT_S = 60   # kaleido's wait for one image (its browser's start included) on a loaded machine

_png = {"state": None, "why": ""}    # None: not tried yet; "on": the browser is up; "off": no PNGs
_png_lock = threading.Lock()          # the dashboards' drawing threads finish charts too


def mimebundle(fig, text: str | None = None) -> dict:
    """A display bundle for fig that does not depend on plotly's renderer setting:
    the plotly mimetype (rendered by JupyterLab, Notebook 7 and VS Code) and a text line."""
    import plotly.io as pio  # plotly is the notebook extra's: imported when a figure is shown
    data = json.loads(pio.to_json(fig, validate=False))
    data["config"] = {"displaylogo": False}
    return {"application/vnd.plotly.v1+json": data,
            "text/plain": text or f"<perfkit figure: {len(fig.data)} traces>"}


def static_bundle(fig, text: str | None = None, png: bool = True) -> dict:
    """mimebundle plus plotly's own HTML (plotly.js from its CDN), which nbconvert, nbviewer and
    an exported widget state show without a kernel or plotly's renderer, and (png) a PNG
    through kaleido where it works (GitHub shows only images). JupyterLab draws the plotly mimetype."""
    import plotly.io as pio
    bundle = mimebundle(fig, text)
    bundle["text/html"] = pio.to_html(fig, full_html=False, include_plotlyjs="cdn", validate=False,
                                      config={"displaylogo": False}, default_width="100%")
    image = png_of(fig) if png else None
    if image is not None:
        bundle["image/png"] = image
    return bundle


_SHAREABLE: list = []   # the Figure class shareable() makes, built with the first figure (plotly loads late)


def shareable(fig):
    """fig as a go.Figure whose display is static_bundle: shown as a cell's result it carries
    plotly's HTML (and a PNG) beside the plotly JSON, so nbconvert, nbviewer and GitHub show
    it without a kernel; plotly's own display would depend on its renderer setting."""
    if not _SHAREABLE:
        import plotly.graph_objects as go

        class Figure(go.Figure):
            """A plotly Figure that displays as staticfig.static_bundle."""

            def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
                return static_bundle(self)

            def _ipython_display_(self):
                from IPython.display import display  # IPython is there wherever a figure is displayed
                display(static_bundle(self), raw=True)

        _SHAREABLE.append(Figure)
    return fig if isinstance(fig, _SHAREABLE[0]) else _SHAREABLE[0](fig)


def png_state() -> tuple[str | None, str]:
    """(None before the first PNG, "on", or "off"; why it is off)."""
    return _png["state"], _png["why"]


def _png_off(why: str) -> None:
    _png["state"], _png["why"] = "off", why
    print(f"perfkit: charts carry no PNG copy from now on ({why}); their HTML remains", file=sys.stderr, flush=True)


class _Browser:
    """One kaleido (one headless Chromium) on an event loop of its own thread, for the process.
    Not kaleido's sync server: its loop blocks on a queue between figures, and a browser that
    fails to start leaves its callers waiting forever."""

    def __init__(self, kaleido):
        import asyncio  # only where PNGs are drawn
        self.asyncio, self.kaleido = asyncio, kaleido
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="perfkit-png", daemon=True).start()
        self.k = None
        # PERFKIT_CHROMIUM: the browser to drive (default: the first Chromium or Chrome kaleido finds)
        path = os.environ.get("PERFKIT_CHROMIUM")
        # MathJax off: no script from a CDN; plotly.js is plotly's own file
        opts = {"n": 1, "mathjax": False, "timeout": PNG_TIMEOUT_S} | ({"path": path} if path else {})
        self._call(self._open(opts))
        atexit.register(self.close)

    def _call(self, coro):
        return self.asyncio.run_coroutine_threadsafe(coro, self.loop).result(PNG_TIMEOUT_S + 10)

    async def _open(self, opts) -> None:
        k = self.kaleido.Kaleido(**opts)
        await k.open()
        self.k = k

    def png(self, fig_dict: dict, opts: dict) -> bytes:
        return self._call(self.k.calc_fig(fig_dict, opts=opts))

    def close(self) -> None:
        if self.k is not None:
            k, self.k = self.k, None
            try:
                self._call(k.close())
            except Exception:  # noqa: BLE001 (a browser already gone)
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)


_browser: list = []   # the one _Browser, made with the first PNG


def png_of(fig) -> str | None:
    """fig as a base64 PNG (PNG_WIDTH layout px at most, PNG_SCALE) through kaleido; None once it has failed."""
    with _png_lock:
        if _png["state"] == "off":
            return None
        try:
            import kaleido  # the notebook extra's; a machine without it loses only the PNGs
        except ImportError:
            _png_off("kaleido is not installed: pip install 'perfkit[notebook]'")
            return None
        try:
            if not _browser:
                _browser.append(_Browser(kaleido))
                _png["state"] = "on"
            layout = fig.layout
            opts = {"format": "png", "width": min(layout.width or PNG_WIDTH, PNG_WIDTH),
                    "height": layout.height or 450, "scale": PNG_SCALE}
            raw = _browser[0].png(fig.to_dict(), opts)
        except Exception as exc:  # noqa: BLE001 (no Chromium, a browser that did not start or answer)
            text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)   # choreographer's: a tuple of lines
            first = (text.strip().splitlines() or [""])[0][:200]
            _png_off(f"kaleido: {type(exc).__name__}: {first}")
            if _browser:
                _browser.pop().close()
            return None
        return base64.b64encode(raw).decode()
