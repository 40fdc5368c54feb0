"""A Run drives one engine through one spec and keeps what it measured.

The engine's workers run in C threads; a Python sampler thread reads their
counter blocks every interval and turns two snapshots into one row, which goes
to every subscriber and into run.frame. Stop is a flag; a run always ends with
its final counters, also on error or KeyboardInterrupt.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import sys
import threading
import time
from typing import Callable

from perfkit.engines import DEFAULT as DEFAULT_ENGINE
from perfkit.engines import EngineHandle
from perfkit.engines import engines as list_engines
from perfkit.engines import get as get_engine
from perfkit import hostmetrics, kinds, savefile, thresholds as _thresholds
from perfkit.stages import StageMarks
from perfkit.errors import EngineError
from perfkit.spec import target_of
from perfkit.stats import (Histogram, direction_columns, direction_row, direction_summary, keep_groups, make_row,
                           merge_counters, row_schema, summarize)
from perfkit.version import __version__

POLL_S = 0.02  # how often the sampler checks whether the workers have finished

# What writes HTML reports: the face above this layer sets it (perfkit's __init__, with
# perfkit.ui.html_report); run.report() and Comparison.report() go through it.
_report_writer: Callable | None = None


def set_report_writer(fn: Callable) -> None:
    """fn(obj, path, title=None) -> path writes the report of a Run or a Comparison."""
    global _report_writer
    _report_writer = fn


def write_report(obj, path, title: str | None = None) -> str:
    """The HTML report of obj (a finished Run or a Comparison) at path, by the writer set."""
    if _report_writer is None:
        raise RuntimeError("report: no report writer set (import perfkit sets perfkit.ui.html_report)")
    return _report_writer(obj, path, title=title)


def environment(engine: str, spec=None) -> dict:
    """Where a run ran: host, kernel, OS, CPU, versions; and where spec's traffic went
    (target: the name as given and the address it resolved to at the start)."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    os_name = platform.system()
    try:
        with open("/etc/os-release") as f:
            rel = dict(ln.rstrip("\n").split("=", 1) for ln in f if "=" in ln)
            os_name = rel.get("PRETTY_NAME", os_name).strip('"')
    except OSError:
        pass
    import polars  # polars loads with the first run, not with perfkit
    env = {
        "host": socket.gethostname(), "kernel": platform.release(), "os": os_name,
        "cpu_model": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
        "perfkit": __version__, "polars": polars.__version__, "engine": engine,
        "engine_detail": list_engines()[engine]["detail"],
        "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    target = target_of(spec) if spec is not None else None
    if target:
        env["target"] = target
    return env


class Run:
    """Run spec on an engine; rows every interval seconds.

        run = Run(LocalTest("udp_bw", duration="5s")).start()
        run.wait()
        run.frame, run.summary, run.histogram
    """

    def __init__(self, spec, engine: str | None = None, interval: float = 1.0,
                 subscribers: tuple[Callable[[dict], None], ...] = (), cluster=None, thresholds=(),
                 watch: dict | None = None):
        if not 0.05 <= float(interval) <= 3600:
            raise ValueError(f"interval: {interval} s is out of range 0.05..3600")
        # k6-style pass/fail conditions on the summary (perfkit.thresholds), parsed before anything starts
        self.threshold_specs = _thresholds.parse_all(thresholds)
        self.spec = spec
        self.cluster = cluster  # a perfkit.Cluster: the spec split over its engines (perfkit.cluster)
        self.engine_name = engine or kinds.lookup(spec, "ENGINE", DEFAULT_ENGINE)
        self.interval = float(interval)
        # the counter groups the run writes, as its kind says: rows and the frame keep only their columns
        self.groups = kinds.counter_groups(spec)
        self.rows: list[dict] = []
        self.summary: dict | None = None
        self.histogram: Histogram | None = None
        self.env: dict = {}
        self.error: str | None = None
        self.roles: list[str] = []
        # (each worker's side, round_trip): a run that reports both directions apart (kinds.directions)
        self.directions: tuple[list, bool] | None = None
        self._subscribers = list(subscribers)
        self._handle: EngineHandle | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._done = threading.Event()
        self._frame = None
        # processes whose CPU the rows record beside the host's ({name: pid or [pids]}, e.g. a server)
        self.watch = hostmetrics.check_watch(watch)
        self._host: hostmetrics.HostSampler | None = None
        self.host_schema: dict = {}   # the host metric columns' dtypes (perfkit.hostmetrics)
        self._host_frame = None   # a loaded cluster run's per-host rows (a live one asks its handle)
        # a stage plan (the kind's STAGES: (what, [(seconds, target), ...])): each stage summarized as the run is
        stage_plan = kinds.lookup(spec, "STAGES")
        plan = stage_plan(spec) if stage_plan is not None else None
        self._stages = StageMarks(plan[1], plan[0]) if plan else None

    # ------------------------------------------------------------- control
    def subscribe(self, fn: Callable[[dict], None]) -> "Run":
        """Call fn(row) for every row, from the sampler thread."""
        self._subscribers.append(fn)
        return self

    def start(self) -> "Run":
        """Create the engine (errors raise here, nothing runs) and start sampling."""
        if self._thread is not None:
            raise RuntimeError("this run has already been started; make a new Run")
        mod = get_engine(self.engine_name)
        self.env = environment(self.engine_name, self.spec)
        plan = None
        if self.cluster is None:
            plan = kinds.plan(self.spec, self.engine_name)   # None: a plan for another engine, which refuses the spec
            self._handle = mod.build(plan if plan is not None else self.spec)
        else:   # the spec split over the cluster's engines, each building its share's plan there
            self._handle = self.cluster.handle(self.spec, self.engine_name)
            self.env["hosts"] = self._handle.envs
        self.roles = list(self._handle.roles)
        if self.cluster is None:
            self.directions = kinds.directions(self.spec, self.roles)
        extra = getattr(mod, "run_environment", None)   # an engine's own facts: DPDK ports' setup
        if extra is not None:
            self.env.update(extra(self._handle))
        self._thread = threading.Thread(target=self._sample, name="perfkit-sampler", daemon=True)
        self._start_host_metrics(plan)   # its first read is the baseline: right before the engine starts
        try:
            self._handle.start()
        except BaseException:
            if self._host is not None:   # no sampler thread will close its files
                self._host.close()
            raise
        self._thread.start()
        return self

    def _start_host_metrics(self, plan) -> None:
        """The host sampler (perfkit.hostmetrics) for the interfaces this run's traffic crosses;
        a host that refuses it (no /proc) runs without host columns, and the environment says why."""
        try:
            self._host = hostmetrics.HostSampler(
                hostmetrics.interfaces(self.spec, plan, self.env.get("target")), self.watch,
                hostmetrics.lab_cgroups(self.spec))
        except (OSError, ValueError) as exc:
            self.env["host_metrics"] = {"error": str(exc)}
            return
        self.host_schema = self._host.schema()
        self.env["host_metrics"] = self._host.describe()

    def stop(self) -> None:
        """Ask the run to stop now; safe from any thread. wait() for the final row."""
        self._stop.set()

    def set_rate(self, rate) -> None:
        """A new target rate for the running load (DPDK flows, socket udp_bw local or remote: pps
        or bps as the spec's rate takes it, '50kpps', 50000; None = as fast as it goes): every
        generator takes it at its next burst (send batch) and paces from there (no catch-up
        burst; a ramp ends). The frame's rate_target column records it per interval.
        ValueError: a bad value, or a spec whose rate is fixed."""
        per_generator = kinds.lookup(self.spec, "LIVE_RATE")
        if per_generator is None:
            raise ValueError("set_rate: DPDK flows and socket udp_bw only")
        if self._handle is not None and not hasattr(self._handle, "set_rate"):
            raise ValueError(f"set_rate: this run's {type(self._handle).__name__} takes no live changes "
                             "(DPDK flows in this process, socket udp_bw)")
        value = per_generator(self.spec, rate)   # checked before anything reaches the engine
        if self._handle is None or self.done:
            raise RuntimeError("set_rate: the run is not running (start() it first; a finished run keeps its rate)")
        self._handle.set_rate(value)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run has finished (True) or timeout passes (False).
        KeyboardInterrupt stops the run, waits for the final row, and re-raises.
        Raises EngineError when a worker failed (the rows are kept)."""
        if self._thread is None:
            raise RuntimeError("start() the run first")
        try:
            finished = self._done.wait(timeout)
        except KeyboardInterrupt:
            self.stop()
            self._done.wait()
            raise
        if finished and self.error:
            raise EngineError(self.error)
        return finished

    @property
    def thresholds(self) -> list:
        """Each threshold checked on the summary (perfkit.thresholds.Check: .passed, .value, .line())."""
        return _thresholds.check_all(self.threshold_specs, self.summary)

    @property
    def stages(self) -> list[dict]:
        """A stage plan's run: each stage's summary (summary["stages"]); [] without stages."""
        return (self.summary or {}).get("stages") or []

    @property
    def stage_thresholds(self) -> list[tuple[dict, list]]:
        """(stage summary, its Checks): every threshold checked on every stage reached."""
        return [(st, _thresholds.check_all(self.threshold_specs, st)) for st in self.stages]

    @property
    def passed(self) -> bool | None:
        """Every threshold passed, on the summary and on each stage (True also with none); None
        while the run has no summary."""
        return _thresholds.passed(self.thresholds + [c for _, cs in self.stage_thresholds for c in cs])

    @property
    def hosts(self) -> dict:
        """A cluster run's summary per host (perfkit.cluster); {} for a run on one host."""
        return (self.summary or {}).get("hosts", {})

    @property
    def host_names(self) -> list[str]:
        """A cluster run's hosts in order (a live run's engines', a loaded run's summary's); [] for one host."""
        hosts = getattr(self._handle, "hosts", None)
        return list(hosts) if hosts else list(self.hosts)

    @property
    def host_frame(self):
        """A cluster run's rows per host, with a host column (perfkit.cluster); None for one host."""
        if self._host_frame is not None:
            return self._host_frame
        fn = getattr(self._handle, "host_frame", None)
        return fn() if fn is not None else None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def started(self) -> bool:
        """start() was called (a loaded run counts as started and done)."""
        return self._thread is not None or self.done

    def settle(self) -> None:
        """Wait for a started run's end without raising its error (run.error says it)."""
        if self.started:
            self._done.wait()

    def run(self) -> "Run":
        """start() and wait()."""
        self.start()
        self.wait()
        return self

    # ------------------------------------------------------------ sampling
    def _emit(self, row: dict) -> None:
        row = keep_groups(row, self.groups)
        self.rows.append(row)
        self._frame = None
        for fn in list(self._subscribers):
            try:
                fn(row)
            except Exception as exc:  # a broken chart or a closed pipe must not stop the measurement
                self._subscribers.remove(fn)
                try:
                    print(f"perfkit: subscriber {fn!r} removed after error: {exc!r}", file=sys.stderr)
                except OSError:
                    pass

    def _sample(self) -> None:
        h = self._handle
        n = len(self.roles)
        zero = [[0] * len(merge_counters([]))] * n
        prev_workers, prev_hist, prev_t = zero, Histogram(), 0.0
        t0 = time.monotonic()
        next_tick = t0 + self.interval
        stop_sent = False
        try:
            while True:
                if self._stop.is_set() and not stop_sent:
                    h.stop()
                    stop_sent = True
                running = h.running()
                now = time.monotonic()
                if running and now < next_tick:
                    time.sleep(min(POLL_S, next_tick - now))
                    continue
                if not running:
                    break
                prev_workers, prev_hist, prev_t = self._row(prev_workers, prev_hist, prev_t, now - t0)
                next_tick += self.interval
                while next_tick <= now:  # a stalled sampler skips ticks instead of bursting
                    next_tick += self.interval
        except BaseException as exc:  # noqa: BLE001 (the run must still end cleanly)
            self.error = f"sampler: {exc!r}"
            h.stop()
        finally:
            try:
                h.join()
                self.error = self.error or h.error()
                self._row(prev_workers, prev_hist, prev_t, time.monotonic() - t0, final=True)
            finally:
                h.close()
                if self._host is not None:
                    self._host.close()
                self._done.set()

    def _row(self, prev_workers, prev_hist, prev_t, t, final=False):
        snaps = self._handle.snapshot()
        host = self._host.sample() if self._host is not None else {}   # the same moment as the counters
        workers = [list(c) for c, _ in snaps]
        hist = Histogram.merge(h for _, h in snaps)
        if self._stages is not None:
            self._stages.see(t, workers, hist, final)
        if final:  # the results first: nothing a subscriber does can lose them
            self.histogram = hist
            self.summary = summarize(getattr(self.spec, "test", type(self.spec).__name__),
                                     merge_counters(workers), hist, workers, self.roles,
                                     getattr(self.spec, "size", 0), kinds.summary_figures(self.spec))
            self.summary["engine"] = self.engine_name
            extra = getattr(self._handle, "summary_extra", None)  # engine-specific fields
            if extra is not None:
                self.summary.update(extra())
            self.summary.update(kinds.summary_extra(self.spec, self._handle, self.roles))  # the kind's own
            if self._stages is not None:
                self.summary["stages"] = self._stages.summaries(
                    self.summary["test"], self.roles, getattr(self.spec, "size", 0), kinds.summary_figures(self.spec))
            if self.directions is not None:   # each way apart, from its sending and receiving workers
                self.summary.update(direction_summary(workers, [h for _, h in snaps], *self.directions,
                                                      self.summary["duration_s"]))
            if self.error:
                self.summary["error"] = self.error
        dt = t - prev_t
        if not final or dt > 1e-3 or not self.rows or workers != prev_workers:
            ways = direction_row(prev_workers, workers, *self.directions, dt) if self.directions else {}
            self._emit({**make_row(t, dt, merge_counters(prev_workers), merge_counters(workers),
                                   prev_hist, hist, prev_workers, workers), **ways, **host})
        if final:   # host CPU means and peaks, interface totals: from the rows, so after the last
            self.summary.update(hostmetrics.summarize(self.rows))
        return workers, hist, t

    # -------------------------------------------------------------- results
    @property
    def frame(self):
        """Every row so far as a polars DataFrame."""
        import polars as pl
        if self._frame is None:
            schema = {**row_schema(len(self.roles), self.groups), **self._direction_schema(), **self.host_schema}
            self._frame = pl.DataFrame(self.rows, schema=schema, orient="row"
                                       ) if self.rows else pl.DataFrame(schema=schema)
        return self._frame

    def _direction_schema(self) -> dict:
        import polars as pl
        return {c: pl.Float64 for c in direction_columns()} if self.directions else {}

    def save(self, path, extra: dict | None = None) -> str:
        """Write the run as Parquet: rows as the table, spec/environment/summary/
        histogram as JSON in the file's metadata, sealed by a checksum over both
        (perfkit.savefile); extra: more perfkit.* entries (the store's). Returns the path."""
        if not self.done:
            raise RuntimeError("the run is still going: wait() before save()")
        savefile.write(path, self.frame, {
            b"perfkit.spec": json.dumps(self.spec.to_dict()).encode(),
            b"perfkit.env": json.dumps(self.env).encode(),
            b"perfkit.summary": json.dumps(self.summary).encode(),
            b"perfkit.histogram": json.dumps(self.histogram.nonzero() if self.histogram else []).encode(),
            b"perfkit.run": json.dumps({"engine": self.engine_name, "interval": self.interval,
                                        "roles": self.roles, "error": self.error,
                                        "thresholds": [t.text for t in self.threshold_specs]}).encode(),
            **self._host_rows_entry(),
            **(extra or {}),
        })
        return str(path)

    def _host_rows_entry(self) -> dict:
        """A cluster run's per-host rows as one more entry, under the file's checksum like the rest."""
        hf = self.host_frame
        return {} if hf is None or hf.is_empty() else {savefile.HOST_ROWS_KEY: savefile.frame_entry(hf)}

    @classmethod
    def load(cls, path) -> "Run":
        """A finished Run back from run.save(path); a changed or damaged file is refused
        (perfkit.savefile.SaveFileError, a ValueError naming the file)."""
        frame, raw = savefile.read(path)
        info = savefile.decode(path, raw, b"perfkit.run")
        try:
            run = cls(kinds.from_dict(savefile.decode(path, raw, b"perfkit.spec")), engine=info["engine"],
                      interval=info["interval"], thresholds=info.get("thresholds", ()))
            run.histogram = Histogram.from_nonzero(savefile.decode(path, raw, b"perfkit.histogram"))
            run.roles = info["roles"]
            run.error = info["error"]
        except savefile.SaveFileError:
            raise
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise savefile.SaveFileError(f"{path}: its perfkit metadata does not describe a run ({exc})") from None
        run.env = savefile.decode(path, raw, b"perfkit.env")
        run.summary = savefile.decode(path, raw, b"perfkit.summary")
        run._frame = frame
        run.rows = frame.to_dicts()
        if savefile.HOST_ROWS_KEY in raw:
            run._host_frame = savefile.frame_from_entry(path, raw, savefile.HOST_ROWS_KEY)
        run._done.set()
        return run

    def report(self, path, title: str | None = None) -> str:
        """A self-contained HTML report of the finished run (summary, charts, spec,
        environment; plotly's JS inlined, no network needed), by perfkit.ui.html_report.
        Returns the path."""
        return write_report(self, path, title=title)

    def __repr__(self) -> str:
        state = "done" if self.done else ("running" if self._thread else "new")
        return f"<perfkit.Run {getattr(self.spec, 'test', self.spec)!r} {self.engine_name} {state}, {len(self.rows)} rows>"


def load(path) -> Run:
    return Run.load(path)
