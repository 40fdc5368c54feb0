"""A live plotly dashboard for one Run.

Threads: the run's sampler thread calls the dashboard's subscriber, which only appends
the row to a deque. One drawing thread per dashboard drains the deque about once per
redraw interval and updates the live figure (livefig.LiveFigure: perfkit's own small widget)
inside `fig.batch_update()`, which sends the figure once (widget updates from a thread need
ipykernel >= 7.1). The kernel's main
thread never waits for any of it, so cells keep running while the chart moves.

When the run ends, the drawing thread draws every row once more and replaces each
place the dashboard is shown with a static plotly figure (a normal display output,
not a widget), so a saved or nbval-executed notebook still shows the result.
"""
from __future__ import annotations

import collections
import threading
import time

from perfkit.run import Run
from perfkit.ui import charts, livefig

POLL_S = 0.1  # how often the drawing thread looks for the end of the run


def _display_data(bundle: dict) -> tuple:
    """An ipywidgets.Output's outputs showing bundle. No PNG: an Output's outputs are widget
    state, which GitHub never shows and nbviewer draws from the HTML (it would be saved twice)."""
    data = {k: v for k, v in bundle.items() if k != "image/png"}
    return ({"output_type": "display_data", "data": data, "metadata": {}},)


class LiveChart:
    """What a live chart drawn by one thread of its own shares (Dashboard, points.PointsChart):
    the live figure (livefig.LiveFigure) shown in ipywidgets.Output widgets, replaced by a static figure
    when the drawing ends, and on_done called then. Subclasses draw; this shows."""

    _STARTING = "perfkit: starting the chart…"   # what an Output shows before the figure is built

    def _init_live(self, on_done) -> None:
        self.on_done = on_done
        self._figure = None                    # the live LiveFigure, built by the drawing thread
        self._ready = threading.Event()        # set once _figure exists
        self.redraws = 0                       # how many times the live figure was drawn
        self.draw_threads: set[int] = set()    # idents of the threads that drew (one)
        self._inbox: collections.deque = collections.deque()   # worker -> drawing thread
        self._lock = threading.Lock()          # guards _outputs, _static (and a subclass's own)
        self._outputs: list = []               # ipywidgets.Output widgets showing it
        self._static = None                    # (figure, bundle) once finished
        self._finished = threading.Event()
        self._settled = threading.Event()      # set once on_done has run too (wait() returns then)

    def start(self):
        if self._thread.ident is None:
            self._thread.start()
        return self

    # ---------------------------------------------------------- drawing side
    def _show_live(self, fig) -> None:
        """The live figure is built: every Output attached so far shows it."""
        with self._lock:
            self._figure = fig
            bundle = self._widget_bundle()
            for out in self._outputs:
                out.outputs = _display_data(bundle)
            self._ready.set()

    def _widget_bundle(self) -> dict:
        bundle = self._figure._repr_mimebundle_()
        return bundle[0] if isinstance(bundle, tuple) else bundle   # anywidget's is (data, metadata)

    def _replace_live(self, bundle: dict) -> None:
        """Everywhere the live figure is shown, the static one instead (the caller holds _lock)."""
        for out in self._outputs:
            out.outputs = _display_data(bundle)

    def _end_static(self, static, bundle: dict) -> None:
        with self._lock:
            self._static = (static, bundle)
            self._replace_live(bundle)
            self._finished.set()
        self._close_live()
        self._call_done()

    def _close_live(self) -> None:
        """Close the replaced live figure: its widget state would otherwise stay in the saved
        notebook beside the static copy (the Python object keeps its data)."""
        fig = self._figure
        if fig is not None and hasattr(fig, "close"):
            try:
                fig.close()
            except Exception:  # noqa: BLE001 (no kernel comm: nothing to close)
                pass

    def _drawing_failed(self, exc: Exception) -> None:
        """A broken chart must never disturb the work or the kernel: say so and end."""
        print(f"perfkit.ui.{type(self).__name__}: drawing stopped: {exc!r}")
        self._ready.set()
        if not self._finished.is_set():
            self._finished.set()
            self._call_done()

    def _call_done(self) -> None:
        try:
            if self.on_done is not None:
                self.on_done(self)
        except Exception as exc:  # noqa: BLE001
            print(f"perfkit.ui.{type(self).__name__}: on_done failed: {exc!r}")
        finally:
            self._settled.set()

    # ---------------------------------------------------------------- public
    @property
    def figure(self):
        """The live figure, a livefig.LiveFigure (waits up to 60 s for the drawing thread to build it)."""
        self._ready.wait(60)
        return self._figure

    @property
    def finished(self) -> bool:
        """True once the drawing has ended and the static figure replaced the live one."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the static figure is in place and on_done has run (True), or timeout passes (False)."""
        return self._settled.wait(timeout)

    def attach(self, output) -> None:
        """Show the chart in an ipywidgets.Output (as the Panel does): the live figure now,
        the static figure when it ends. Safe from any thread."""
        with self._lock:
            if self._static is not None:
                bundle = self._static[1]
            elif self._figure is not None:
                bundle = self._widget_bundle()
                self._outputs.append(output)
            else:  # the drawing thread puts the figure in when it is built
                bundle = {"text/plain": self._STARTING}
                self._outputs.append(output)
            output.outputs = _display_data(bundle)

    def detach(self, output) -> None:
        """Stop showing the chart in output (it keeps what it shows now)."""
        with self._lock:
            if output in self._outputs:
                self._outputs.remove(output)


class Dashboard(LiveChart):
    """Live charts for run, chosen by its spec (charts.layout_for): packets/s, bits/s,
    latency percentiles, loss, errors and engine CPU for UDP/TCP tests and DPDK flows
    (with reordering and duplicates); transactions/s, response times, errors by class
    and connections for HTTP load.

        run = perfkit.Run(LocalTest("udp_bw", duration="10s"))
        dash = perfkit.ui.Dashboard(run)
        run.start()
        dash            # shows the live chart; when the run ends it becomes a static figure

    window: how many rows the live chart keeps (the static figure has all of them).
    redraw_s: seconds between redraws (rows arrive every run.interval).
    on_done: called as on_done(dashboard) from the drawing thread after the last redraw.
    autostart: False: the drawing thread starts at dash.start().
    """

    _STARTING = "perfkit: starting the dashboard…"

    def __init__(self, run, window: int = 300, redraw_s: float = 1.0, on_done=None, autostart: bool = True,
                 on_draw=None):
        if int(window) < 2:
            raise ValueError(f"window: {window} rows is too few (at least 2)")
        if not 0.05 <= float(redraw_s) <= 60:
            raise ValueError(f"redraw_s: {redraw_s} is out of range 0.05..60")
        self.run = run
        self.panels = charts.layout_for(run.spec)   # which charts: by what the spec measures
        self.window = int(window)
        self.redraw_s = float(redraw_s)
        self._init_live(on_done)
        self._rows: collections.deque = collections.deque(maxlen=self.window)
        self.hosts: list[str] = []             # a cluster run's hosts: a line each in the first panel
        self._last_t = float("-inf")
        self._handles: list = []               # IPython DisplayHandles showing the live figure (under _lock)
        self._closed = threading.Event()
        self.aborted: str | None = None        # why the run never started (abort())
        self.on_draw = on_draw                 # on_draw(rows, state) after each redraw, on the drawing thread
        run.subscribe(self._on_row)
        for row in list(run.rows):             # rows from before we subscribed (deduped by time)
            self._inbox.append(row)
        self._thread = threading.Thread(target=self._draw_loop, name="perfkit-dashboard", daemon=True)
        if autostart:
            self._thread.start()

    def start(self) -> "Dashboard":
        """Start the drawing thread (Dashboard(..., autostart=False) waits for this: the Panel
        starts it from its starter thread, as Thread.start() can wait for the GIL)."""
        return super().start()

    # ---------------------------------------------------------- sampler side
    def _on_row(self, row: dict) -> None:
        """The run's subscriber: runs on the sampler thread, only queues the row."""
        if not self._closed.is_set():
            self._inbox.append(row)

    # ---------------------------------------------------------- drawing side
    def _draw_loop(self) -> None:
        try:
            self._build()
            next_draw = time.monotonic()
            while True:
                if self._closed.is_set():
                    return
                # read first: every row of a finished run is already queued
                done = self.run.done or self.aborted is not None
                fresh = self._drain() if (done or time.monotonic() >= next_draw) else 0
                if done:
                    break
                if fresh:
                    self._redraw(list(self._rows), "running")
                    next_draw = time.monotonic() + self.redraw_s
                self._closed.wait(POLL_S)
            state = "finished" if self.aborted is None else "did not start"
            self._redraw(list(self.run.rows), state)
            self._finish(state)
        except Exception as exc:  # noqa: BLE001 (a broken chart must never disturb the run or the kernel)
            self._drawing_failed(exc)

    def _build(self) -> None:
        """Make the live figure here, not in the constructor: the first live figure of a
        process can take seconds (plotly's imports), and Start must return at once."""
        self.hosts = charts.run_hosts(self.run, ask=False)   # a cluster run: a line per host beside the totals
        self._show_live(livefig.LiveFigure(charts.empty_figure(charts.figure_title(self.run, [], "waiting"),
                                                               self.panels, self.hosts)))

    def _drain(self) -> int:
        n = 0
        while self._inbox:
            row = self._inbox.popleft()
            if row["time_s"] > self._last_t:
                self._rows.append(row)
                self._last_t = row["time_s"]
                n += 1
        return n

    def _redraw(self, rows: list[dict], state: str) -> None:
        self.draw_threads.add(threading.get_ident())
        x, ys = charts.columns(charts.plot_rows(self.run, rows), self.panels)
        fig = self._figure
        if not self.hosts and (hosts := charts.run_hosts(self.run, ask=False)):
            # the run's cluster was picked or connected after the chart was built: its per-host lines now
            self.hosts = hosts
            fig.fig = charts.empty_figure(fig.layout.title.text or "", self.panels, hosts)
        with fig.batch_update():
            for trace, y in zip(fig.data, ys):
                trace.x, trace.y = x, y
            if self.hosts:   # the hosts' rows over the same window as the totals'
                for trace, (hx, hy) in zip(fig.data[len(ys):], charts.host_traces(
                        self.run, self.panels, self.hosts, since=rows[0]["time_s"] - 1e-6 if rows else None)):
                    trace.x, trace.y = hx, hy
            charts.fit_axes(fig, self.panels, ys)
            fig.layout.title.text = charts.figure_title(self.run, rows, state)
        self.redraws += 1
        if self.on_draw is not None:   # the panel's progress bar and live figures: drawn by this thread too
            try:
                self.on_draw(rows, state)
            except Exception as exc:  # noqa: BLE001
                print(f"perfkit.ui.Dashboard: on_draw failed: {exc!r}")

    def _finish(self, state: str = "finished") -> None:
        static = charts.run_figure(self.run, title=charts.figure_title(self.run, list(self.run.rows), state))
        text = f"<perfkit dashboard: {charts.spec_title(self.run.spec)}, {len(self.run.rows)} rows>"
        with self._lock:   # a PNG only for a cell showing the chart: an Output's copy has none (_display_data)
            png = bool(self._handles)
        self._end_static(static, charts.static_bundle(static, text, png=png))

    def _replace_live(self, bundle: dict) -> None:
        for handle in self._handles:
            try:
                handle.update(bundle, raw=True)
            except Exception as exc:  # noqa: BLE001 (no frontend, closed kernel, ...)
                print(f"perfkit.ui.Dashboard: could not replace the live chart: {exc!r}")
        super()._replace_live(bundle)

    # ---------------------------------------------------------------- public
    def static(self):
        """A static plotly Figure of every row so far (the final one once finished)."""
        with self._lock:
            if self._static is not None:
                return self._static[0]
        return charts.run_figure(self.run)

    def abort(self, why: str) -> None:
        """The run could not start (why): end the dashboard as if the run had ended, with
        what it has (nothing), so that wait() returns. Safe from any thread."""
        self.aborted = str(why)
        if self._thread.ident is None:   # never started drawing: end here
            self._finished.set()
            self._ready.set()
            self._call_done()

    def close(self) -> None:
        """Stop drawing (the run goes on); the chart stays as it was."""
        self._closed.set()

    def _ipython_display_(self) -> None:
        from IPython.display import display  # IPython is there only where a notebook shows the chart
        self._ready.wait(60)
        with self._lock:
            if self._static is not None:
                static, bundle = self._static
                if "image/png" not in bundle:   # finished while only Outputs showed it: the cell's copy gets one
                    png = charts.png_of(static)
                    bundle = bundle if png is None else {**bundle, "image/png": png}
                display(bundle, raw=True)
            elif self._figure is not None:
                self._handles.append(display(self._figure, display_id=True))
            else:
                display(self.static())

    def __repr__(self) -> str:
        state = "finished" if self.finished else ("closed" if self._closed.is_set() else "live")
        return f"<perfkit.ui.Dashboard {state}, {self.redraws} redraws, run={self.run!r}>"


def show(run, **kwargs) -> Dashboard:
    """Display a live Dashboard for run and return it; a run that has not been started
    is started. A spec instead of a run makes a new Run of it (dash.run is that Run)."""
    from IPython.display import display
    if not isinstance(run, Run):
        run = Run(run)
    dash = Dashboard(run, **kwargs)
    if not run.started:
        run.start()
    display(dash)
    return dash
