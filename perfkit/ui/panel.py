"""A control panel generated from a spec dataclass: any of perfkit.kinds.SPECS.

Every field of the spec becomes one input, chosen from the field's type and what the field
declares (perfkit.fields): a dropdown where it declares choices (test, mode, method), a
text box with suggestions for DPDK ports, a checkbox for booleans, an integer box for plain
ints, a password box for the token, and a text box for everything that takes units
(size 64K, rate 1.5Mpps, duration 10s). Next to each input: its unit, its range and its
default, and its help line, all as the field declares them. The essential fields come
first; the advanced ones (tuning knobs, perfkit.fields' advanced=True) are folded in a
closed "Advanced" section, opened when one of them is in error. The spec is built on every
change; its ValueError is shown under the form, the field's label turns red, and Start
stays disabled until the input is valid, so nothing native starts on a bad value. An
engine that is not available here (perfkit.engines()) disables Start the same way.

Start and Stop only set things going: Start makes the Run and its Dashboard and hands
run.start() (EAL's first start, a remote server's handshake) to a short-lived thread;
Stop sets the run's stop flag. Both return at once, the run and its dashboard live in
background threads (one drawing thread per chart), and the kernel keeps executing cells.

Tasks beside a single run (TASKS): a rate search for LocalTest udp_bw and DpdkFlows
(perfkit.search: the form's rate is the upper bound, each trial lasts `trial`), a
qperf-style sweep for RemoteTest (perfkit.test with sweep=, the CLI's --oo) and a user
ladder for HttpLoad (perfkit.ladder: a users list, 4,16,64 or 100:1000:+100, and thresholds
checked on every step). Their own fields are checked by the same code as the CLI's
(ratesearch.validate, remote.plan, ladder.plan) on
every change; Start runs them in a background thread, a live chart gains a point per
trial or sweep point, and panel.result / panel.frame hold what they found.
"""
from __future__ import annotations

import dataclasses
import html
import inspect
import re
import threading

from perfkit import cluster as _cluster
from perfkit import ratesearch, remote
from perfkit import kinds as _kinds
from perfkit import spec as _spec
from perfkit.engines import dpdk
from perfkit.engines import get as _get_engine
from perfkit.fields import SECONDS, help_text, spec_fields
from perfkit.kinds.split import RULES as SPLITS
from perfkit.ratesearch import MAX_TRIAL_S, MAX_TRIALS
from perfkit.remote import SWEEPABLE, Server
from perfkit.report import conf_text
from perfkit.ladder import TABLE_FIRST as LADDER_COLUMNS, Ladder, ladder as run_ladder, plan as ladder_plan
from perfkit.run import Run
from perfkit.thresholds import parse_all as parse_thresholds
from perfkit.ui import charts, livefig, points, results
from perfkit.ui.dashboard import Dashboard
from perfkit.ui.form import (AMBER, GREEN, GREY, RED, TRISTATE, FieldUI, field_row, label_html, launch, start_launcher,
                             text_value)
from perfkit.units import format_si, human

# Tasks beyond one run, by spec: what Start does (see the module doc); each kind declares its own.
TASKS = {name: _kinds.lookup(cls, "TASKS", ("run",)) for name, cls in _kinds.SPECS.items()}
TASK_LABELS = {"run": "one run", "search": "rate search", "sweep": "sweep (qperf --oo)",
               "ladder": "user ladder"}
CRITERIA = ("zero-loss", "pdr:0.1%", "lat:p99<50us", "cpu", "cpu:90%", "pdr:0.1%,lat:p99<1ms")


def _search_defaults() -> dict:
    """perfkit.search()'s own defaults (one definition)."""
    return {k: v.default for k, v in inspect.signature(ratesearch.search).parameters.items()
            if v.default is not inspect.Parameter.empty}


def task_fields(task: str) -> list[FieldUI]:
    """The fields a task adds to the form (not spec fields: arguments of search() / test())."""
    if task == "search":
        d = _search_defaults()
        return [
            FieldUI("criterion", "combo", d["criterion"], CRITERIA,
                    "zero-loss, pdr:0.1%, lat:p99<50us, cpu:95%; several: join with ','", "",
                    None, "what every trial must hold: no loss (RFC 2544 throughput), a tolerated loss "
                    "(PDR), a latency bound (p50 p90 p99 p999 max mean), or every engine worker below "
                    "a share of a core (BiTester)"),
            FieldUI("trial", "text", d["trial"], (), SECONDS, f"50ms..{MAX_TRIAL_S:g}s", None,
                    "how long each trial runs (the duration above is not used); the rate above is the "
                    "upper bound (empty: an unpaced first trial measures it)"),
            FieldUI("low", "text", d["low"], (), "pps or bit/s; empty: 1% of the upper bound", "", None,
                    "the lower bound: the last trial when nothing passed"),
            FieldUI("resolution", "text", d["resolution"], (), "a share of the upper bound (1%) or a rate (10kpps)",
                    "", None, "stop when the highest pass and the lowest failure are this close"),
            FieldUI("max_trials", "int", d["max_trials"], (), "trials", f"1..{MAX_TRIALS}", (1, MAX_TRIALS),
                    "at most this many trials"),
            FieldUI("settle", "text", d["settle"], (), SECONDS, "0..60s", None,
                    "pause between trials, so a backlog from one never reaches the next"),
            FieldUI("retries", "int", d["retries"], (), "trials", "0..5", (0, 5),
                    "run a failed trial again at the same rate up to this many times; the rate passes if one does"),
        ]
    if task == "eal":
        now = dpdk.eal_options()    # what EAL is (or will be) started with
        huge = {None: "auto", True: "on", False: "off"}[now.hugepages]
        cpus = ",".join(str(c) for c in now.worker_cpus) if now.worker_cpus else ""
        return [
            FieldUI("memory_mb", "int", now.memory_mb, (), "MB", "64..1048576", None,
                    "memory EAL takes for mbufs, rings and ports (-m; the CLI's --mem)"),
            FieldUI("hugepages", "choice", huge, ("auto", "on", "off"), "", "", None,
                    "auto: hugepages when this is root and enough are free, else --no-huge"),
            FieldUI("worker_cpus", "text", cpus or None, (), "CPUs (1 or 0,1); empty: not pinned", "", None,
                    "pin the datapath workers to these CPUs (the CLI's --cpus)"),
            FieldUI("log_level", "choice", now.log_level, tuple(dpdk.LOG_LEVELS), "", "", None,
                    "DPDK's log level on stderr"),
        ]
    if task == "ladder":
        return [
            FieldUI("ladder", "text", "4,16,64", (), "users per step: 50,100,200 or FROM:TO:+N / *N", "", None,
                    "one run of the duration above per user count, one after another (perfkit.ladder); "
                    "the users field above is not used"),
            FieldUI("thresholds", "text", None, (), "METRIC<VALUE, space between (error_rate<1% p99<200ms)",
                    "", None, "checked on every step (k6's thresholds): a step that fails one is a red point"),
        ]
    if task == "sweep":
        return [
            FieldUI("sweep", "text", "msg_size:64:16K:*4", (), "OPT:FROM:TO:STEP, STEP *N (multiply) or +N (add)",
                    f"OPT: {' '.join(SWEEPABLE)}", None,
                    "qperf's -oo: the test runs at every value, each point a full run of the duration above"),
            FieldUI("also", "multi", (), _spec.REMOTE_TESTS, "more tests (ctrl-click)", "", None,
                    "more tests at every point, after the one above (qperf's tcp_bw tcp_lat)"),
        ]
    return []


def _type_name(field: dataclasses.Field) -> str:
    t = field.type
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def field_hints(spec_cls) -> dict[str, str]:
    """Per-field help: each field's own (perfkit.fields.help_text)."""
    return help_text(spec_cls)


def form_fields(spec_cls, choices: dict | None = None) -> list[FieldUI]:
    """The form for spec_cls, generated from its dataclass fields and what each declares
    (perfkit.fields: help, unit, range, choices, suggestions); choices overrides the lists
    by field name."""
    out = []
    for f, m in spec_fields(spec_cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        kind_t = _type_name(f)
        opts = (choices or {}).get(f.name)
        if opts is None:
            opts = m.choices
        if opts is not None:
            kind = "choice"
        elif m.suggestions is not None:
            kind, opts = "combo", m.suggestions
        elif m.widget is not None:
            kind = m.widget
        elif kind_t.split(" |")[0] == "dict":
            kind = "lines"
        elif kind_t == "bool":
            kind = "bool"
        elif kind_t == "bool | None":   # None: the spec decides (busy_poll)
            kind, default, opts = "tristate", TRISTATE[default], tuple(TRISTATE.values())
        elif kind_t == "int":
            kind = "int"
        else:
            kind = "text"
        out.append(FieldUI(f.name, kind, default, tuple(opts or ()), m.unit, m.range, m.bounds, m.help, m.advanced))
    return out


def _parse_pair(text: str, name: str):
    """'1024-65535' -> ('1024', '65535'), '2000' -> ('2000', '2000'); the spec checks the numbers."""
    m = re.fullmatch(r"\s*(\S+?)\s*(?:-\s*(\S+)\s*)?", text)
    if not m:
        raise ValueError(f"{name}: {text!r} is not FIRST-LAST (1024-65535)")
    return (m.group(1), m.group(2) or m.group(1))


def _parse_lines(text: str, name: str) -> dict | None:
    """'Name: value' lines -> a dict (None when empty); a line without a colon is an error."""
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        if ":" not in line:
            raise ValueError(f"{name}: {line.strip()!r} is not a 'Name: value' line")
        k, v = line.split(":", 1)
        out[k.strip()] = v.strip()
    return out or None


def resolve_spec(spec_cls):
    """A spec class from itself or its name in perfkit.kinds.SPECS, else ValueError naming the known ones."""
    if isinstance(spec_cls, str):
        if spec_cls not in _kinds.SPECS:
            raise ValueError(f"spec_cls: {spec_cls!r} is not one of {', '.join(_kinds.SPECS)}")
        return _kinds.SPECS[spec_cls]
    return spec_cls


class Panel:
    """A form for spec_cls (a spec class such as LocalTest, DpdkFlows or HttpLoad, its name,
    or an instance to start from), Start/Stop buttons, and the live Dashboard of the
    current run, with the charts that suit the spec.

        panel = perfkit.ui.Panel(duration="5s")            # LocalTest
        panel = perfkit.ui.Panel("DpdkFlows", peer="ring:pk:1", rate="1Mpps")
        panel              # fill in, press Start, watch; Stop ends it early
        panel.run          # the Run (finished once panel.wait() returns)

    values: initial field values (as typed in the form, e.g. size="1500", rate="10kpps").
    interval: seconds per row; window: rows the live chart keeps; engine: perfkit.engines()
    (default: the spec's own, e.g. dpdk for DpdkFlows); choices: {field: options} to narrow
    a dropdown. cluster: the cluster picker's choice (a kind that splits over a cluster,
    perfkit.kinds.split.RULES), a name `perfkit cluster status` lists; "none" or None: this host.
    """

    def __init__(self, spec_cls=_kinds.LocalTest, *, interval: float = 1.0, window: int = 300,
                 redraw_s: float = 1.0, engine: str | None = None, choices: dict | None = None,
                 cluster: str | None = None, **values):
        import ipywidgets as w  # the notebook extra: imported when a panel is made

        start_from = None
        spec_cls = resolve_spec(spec_cls)
        if not isinstance(spec_cls, type):           # an instance: start from its values
            start_from, spec_cls = spec_cls, type(spec_cls)
        if not dataclasses.is_dataclass(spec_cls):
            raise TypeError(f"spec_cls: {spec_cls!r} is not a spec dataclass")
        if not 0.05 <= float(interval) <= 3600:   # Run's own limits, checked before any Start
            raise ValueError(f"interval: {interval} s is out of range 0.05..3600")
        self.spec_cls = spec_cls
        self.interval, self.window, self.redraw_s = interval, window, redraw_s
        self.engine = engine
        self.form = form_fields(spec_cls, choices)
        self._seconds = {fu.name for fu in self.form if fu.unit == SECONDS}   # shown as 10s
        self._advanced = {fu.name for fu in self.form if fu.advanced}         # folded under "Advanced"
        self.fields = dataclasses.fields(spec_cls)
        self.engine_name = engine or _kinds.lookup(spec_cls, "ENGINE", "socket")
        self._dpdk = self.engine_name in ("dpdk", "dpdk_tcp")
        self._check_names(values)
        self._init_state()
        rows = self._form_rows(w, start_from)
        self._task_rows(w)
        self._buttons(w)
        self._cluster_row(w, cluster)
        self.widget = w.VBox([self._title(w), *self._kind_rows(w), *([self.task_box] if self.task_box else []),
                              *([self.cluster_row] if self.cluster_row is not None else []),
                              *rows, *([self.advanced_box] if self.advanced_box is not None else []),
                              *([self.eal_box] if self._dpdk else []), *self.sections.values(),
                              self.message, w.HBox([self.start_button, self.stop_button, *self._extra, self.status]),
                              self.info, self.progress_row, *([self.rate_row] if self.rate_row else []),
                              self.live, self.hosts_box, self.results_box, self.output])
        if values:
            self.set(**values)
        self._observe()
        self.validate()
        _prewarm()
        start_launcher()

    # ---------------------------------------------------------------- building the form
    def _check_names(self, values: dict) -> None:
        """ValueError for a value given to the constructor that names no field or task field."""
        names = [f.name for f in self.form]
        extra_tasks = [*_kinds.lookup(self.spec_cls, "TASKS", ("run",))[1:], *(["eal"] if self._dpdk else [])]
        extra = ["task", *(fu.name for t in extra_tasks for fu in task_fields(t))]
        unknown = set(values) - set(names) - set(extra)
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]}: unknown field (known: {', '.join(names)})")

    def _init_state(self) -> None:
        self.run: Run | None = None
        self.dashboard: Dashboard | None = None
        self.error: str | None = None
        self._spec = None
        self._lock = threading.RLock()
        self._defaults: dict = {}
        self._kinds: dict = {}
        self.inputs: dict = {}      # field name -> input widget
        self.labels: dict = {}      # field name -> its label (turns red on that field's error)
        self.units: dict = {}       # field name -> its unit/range/default line
        # tasks: a rate search or a sweep beside the single run, with their own fields
        self.tasks = _kinds.lookup(self.spec_cls, "TASKS", ("run",))
        self.task = "run"
        self.task_inputs: dict = {}    # task -> {name: input widget} (not spec fields)
        self.task_labels: dict = {}    # task -> {name: label}
        self.sections: dict = {}       # task -> the VBox of its fields (shown for that task)
        self.result = None             # a search's SearchResult, a sweep's polars frame
        self.frame = None              # the trials (search) or points (sweep) as a polars frame
        self.job_error: str | None = None   # why a search or sweep failed
        self.server = None             # RemoteTest: the perfkit server this panel started (serve())
        self._plan = None              # the task's checked arguments
        self._stop_event: threading.Event | None = None
        self._user_stopped = False     # Stop pressed for the current run (its status says so)

    def _form_rows(self, w, start_from) -> list:
        """A row per spec field (its value from start_from, an instance, or the default): the
        essential fields' rows, returned; the advanced fields' (perfkit.fields: tuning knobs)
        folded in self.advanced_box, a closed Accordion titled "Advanced" (None if none)."""
        rows, advanced = [], []
        for fu in self.form:
            value = getattr(start_from, fu.name) if start_from is not None else fu.default
            self._defaults[fu.name], self._kinds[fu.name] = fu.default, fu.kind
            box, label, unit, row = field_row(w, fu, value, fu.name in self._seconds)
            self.inputs[fu.name], self.labels[fu.name], self.units[fu.name] = box, label, unit
            (advanced if fu.advanced else rows).append(row)
        self.advanced_box = None
        if advanced:
            self.advanced_box = w.Accordion(children=[w.VBox(advanced)], selected_index=None)
            self.advanced_box.set_title(0, "Advanced")
        return rows

    def _task_rows(self, w) -> None:
        """Each task's own fields (a section shown for that task; DPDK's EAL options folded
        away under the form) and the task buttons."""
        for task in [*self.tasks[1:], *(["eal"] if self._dpdk else [])]:
            self.task_inputs[task], self.task_labels[task], mrows = {}, {}, []
            for fu in task_fields(task):
                self._defaults[f"{task}.{fu.name}"], self._kinds[f"{task}.{fu.name}"] = fu.default, fu.kind
                box, label, _, row = field_row(w, fu, fu.default)
                self.task_inputs[task][fu.name], self.task_labels[task][fu.name] = box, label
                mrows.append(row)
            if task == "eal":   # once per kernel: folded away under the form
                self.eal_box = w.Accordion(children=[w.VBox(mrows)], selected_index=None)
                self.eal_box.set_title(0, "DPDK EAL options (EAL starts once per kernel, at the first DPDK run)")
                continue
            self.sections[task] = w.VBox([w.HTML(f"<b>{html.escape(TASK_LABELS[task])}</b>"), *mrows],
                                         layout=w.Layout(display="none"))
        self.task_box = (w.ToggleButtons(options=[(TASK_LABELS[m], m) for m in self.tasks], value="run")
                         if len(self.tasks) > 1 else None)

    def _buttons(self, w) -> None:
        """Start, Stop, the message and status lines, the run's output; for a kind with
        server control (RemoteTest), serve here, conf and quit server (self._extra)."""
        self.message = w.HTML()
        self.status = w.HTML()
        self.start_button = w.Button(description="Start", button_style="success", icon="play",
                                     layout=w.Layout(width="100px"))
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop",
                                    disabled=True, layout=w.Layout(width="100px"))
        self.output = w.Output()
        # while a run goes: elapsed / planned and a few large figures; after it: the results (perfkit.ui.results)
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=1.0, bar_style="info",
                                        layout=w.Layout(width="300px"))
        self.progress_text = w.HTML()
        self.progress_row = w.HBox([self.progress, self.progress_text], layout=w.Layout(display="none"))
        self.live = w.HTML()
        self.results_box = w.VBox()
        self.results: results.Results | None = None   # the last finished run's table and buttons
        self._w = w
        self.start_button.on_click(self._click_start)
        self.stop_button.on_click(lambda _b: self.stop())
        self.info = w.HTML()           # what the conf button brings back
        self._rate_row(w)
        self._extra = []
        if "server_control" in _kinds.lookup(self.spec_cls, "PANEL_ROWS", ()):   # perfkit test HOST conf / quit
            self.conf_button = w.Button(description="conf", icon="info", layout=w.Layout(width="80px"),
                                        tooltip="both ends' host, CPU, OS, kernel and perfkit (perfkit test HOST conf)")
            self.quit_button = w.Button(description="quit server", icon="power-off", layout=w.Layout(width="120px"),
                                        tooltip="ask the server to stop (perfkit test HOST quit)")
            self.serve_button = w.Button(description="serve here", icon="server", layout=w.Layout(width="120px"),
                                         tooltip="start perfkit serve in this kernel on host and port "
                                                 "(port 0: any free port)")
            self.conf_button.on_click(lambda _b: self.conf())
            self.quit_button.on_click(lambda _b: self.quit_server())
            self.serve_button.on_click(lambda _b: self.serve(stop=self.server is not None))
            self._extra = [self.serve_button, self.conf_button, self.quit_button]

    def _cluster_row(self, w, chosen: str | None) -> None:
        """The cluster picker of a kind that splits over engines (perfkit.kinds.split): "none" (this
        host) or a cluster `perfkit cluster status` knows, refreshed by its button; and the box
        where a cluster run's per-host breakdown shows (results.hosts_html)."""
        self.hosts_box = w.HTML()
        self.cluster_row = self.cluster_box = None
        if not any(c in SPLITS for c in self.spec_cls.__mro__):
            if chosen not in (None, "none"):
                raise ValueError(f"cluster: {self.spec_cls.__name__} does not split over a cluster's engines")
            return
        self.cluster_box = w.Dropdown(options=["none"], value="none", layout=w.Layout(width="200px"))
        refresh = w.Button(icon="refresh", tooltip="the clusters that are up now (perfkit cluster status)",
                           layout=w.Layout(width="40px"))
        refresh.on_click(lambda _b: self.refresh_clusters())
        self.cluster_row = w.HBox([w.HTML("cluster", layout=w.Layout(width="130px", min_width="130px")),
                                   self.cluster_box, refresh,
                                   w.HTML(f'<span style="color:{GREY}">none: from this host; a cluster: the load '
                                          "split over its engines, one run (perfkit cluster up)</span>")])
        self.refresh_clusters()
        if chosen not in (None, "none"):
            if chosen not in self.cluster_box.options:
                raise ValueError(f"cluster: {chosen!r} is not up (up: {', '.join(self.cluster_box.options[1:]) or 'none'}; "
                                 "perfkit cluster up)")
            self.cluster_box.value = chosen

    def refresh_clusters(self) -> list[str]:
        """The picker's choices again: "none" and every perfkit cluster that is up; returns them."""
        if self.cluster_box is None:
            return []
        names = ["none", *(c["name"] for c in _cluster.clusters() if c.get("controller_alive"))]
        keep = self.cluster_box.value if self.cluster_box.value in names else "none"
        self.cluster_box.options = names
        self.cluster_box.value = keep
        return names

    @property
    def cluster_name(self) -> str | None:
        """The cluster the next Start runs on (None: this host)."""
        v = self.cluster_box.value if self.cluster_box is not None else "none"
        return None if v == "none" else v

    def _rate_row(self, w) -> None:
        """The live rate control (pktgen's `set rate`) of a kind whose rate changes while running
        (LIVE_RATE: DPDK flows, socket udp_bw): a log slider in frames/s and a box for any rate the spec takes
        (50kpps, 1Gbit/s, max), shown only while a run is live; each change is run.set_rate."""
        self.rate_row = None
        if _kinds.lookup(self.spec_cls, "LIVE_RATE") is None:
            return
        self._rate_quiet = False      # set while the panel moves the slider itself (no set_rate then)
        self.rate_slider = w.FloatLogSlider(value=1e5, base=10, min=3, max=8, step=0.01, continuous_update=False,
                                            readout_format=".3s", layout=w.Layout(width="380px"),
                                            tooltip="the running load's target in frames/s (per direction)")
        self.rate_text = w.Text(placeholder="50kpps, 1Gbit/s, max", continuous_update=False,
                                layout=w.Layout(width="160px"),
                                tooltip="a rate as the spec's rate field takes it; Enter sets it")
        self.rate_status = w.HTML()
        self.rate_row = w.HBox([w.HTML("live rate", layout=w.Layout(width="130px", min_width="130px")),
                                self.rate_slider, self.rate_text, self.rate_status],
                               layout=w.Layout(display="none"))
        self.rate_slider.observe(lambda ch: None if self._rate_quiet else self.set_live_rate(ch["new"]),
                                 names="value")
        self.rate_text.observe(lambda ch: self.set_live_rate(ch["new"]) if ch["new"].strip() else None,
                               names="value")

    def _show_rate(self, run) -> None:
        """A run of a live-rate kind has started: the slider at its rate, the row shown (None: hidden)."""
        if self.rate_row is None:
            return
        if run is None:
            self.rate_row.layout.display = "none"
            self.rate_status.value = ""
            return
        spec = run.spec
        try:   # a spec class whose other tests have no live rate (LocalTest's tcp_bw): no row
            self._live_pps(spec, None)
        except ValueError:
            self._show_rate(None)
            return
        pps = self._live_pps(spec, spec.rate) if spec.rate is not None else None
        self._move_slider(pps or 1e6)
        self.rate_text.value = ""
        self.rate_status.value = (f'<span style="color:{GREY}">target {html.escape(format_si(pps, "pps"))}</span>'
                                  if pps else f'<span style="color:{GREY}">no target: as fast as the port goes</span>')
        self.rate_row.layout.display = ""

    @staticmethod
    def _live_pps(spec, value) -> float:
        """value (as set_rate takes it) as the spec's frames/s: the kind's per-generator figure times its cores."""
        return _kinds.lookup(spec, "LIVE_RATE")(spec, value) * getattr(spec, "cores", 1)

    def _move_slider(self, pps: float) -> None:
        """The slider to pps without a set_rate, its range two decades either side of it."""
        import math
        lg = math.log10(max(pps, 1.0))
        s = self.rate_slider
        self._rate_quiet = True
        try:
            if lg > s.max or lg < s.min:
                s.max = max(s.max, min(lg + 2, 10.0))
                s.min = min(s.min, max(lg - 2, 0.0))
            s.value = pps
        finally:
            self._rate_quiet = False

    def set_live_rate(self, value) -> bool:
        """What the live rate slider and box do (pktgen's `set rate`): run.set_rate(value) on the
        running run (pps, '50kpps', '1Gbit/s'; 'max' or None: as fast as the port goes), checked as
        the spec's rate is before the engine sees it. The row's status line says the new target, or
        in one red line why not. Returns whether the run took it."""
        run = self.run
        if isinstance(value, str) and value.strip().lower() in ("max", "unlimited", "none"):
            value = None
        try:
            if run is None or self.task != "run" or self.rate_row is None:
                raise RuntimeError("set_rate: no run is going: Start one first")
            run.set_rate(value)
            pps = None if value is None else self._live_pps(run.spec, value)
        except (ValueError, RuntimeError) as exc:
            if self.rate_row is not None:
                self.rate_status.value = f'<span style="color:{RED}">⚠ {html.escape(str(exc))}</span>'
            return False
        if pps is not None:
            self._move_slider(pps)
        t = run.rows[-1]["time_s"] if run.rows else 0.0
        what = "as fast as the port goes" if pps is None else format_si(pps, "pps")
        self.rate_status.value = f'<span style="color:{GREEN}">✓ target {html.escape(what)} from {t:.1f} s</span>'
        return True

    def _title(self, w):
        return w.HTML(f"<b>perfkit — {html.escape(self.spec_cls.__name__)}</b> "
                      f'<span style="color:{GREY}">({html.escape(self.engine_name)} engine)</span>')

    def _kind_rows(self, w) -> list:
        """The rows a kind adds above its form (PANEL_ROWS): dperf's conf loader."""
        if "dperf_conf" not in _kinds.lookup(self.spec_cls, "PANEL_ROWS", ()):   # perfkit dperf -c FILE.conf
            return []
        self.dperf_conf = w.Text(placeholder="path/to/dperf.conf", layout=w.Layout(width="230px"))
        self.dperf_button = w.Button(description="load", icon="folder-open", layout=w.Layout(width="80px"),
                                     tooltip="fill the form from a dperf configuration file")
        self.dperf_button.on_click(lambda _b: self.load_dperf(self.dperf_conf.value))
        return [w.HBox([w.HTML("dperf conf", layout=w.Layout(width="130px", min_width="130px")),
                        self.dperf_conf, self.dperf_button])]

    def _observe(self) -> None:
        """Every input, task input and the task buttons check the form on each change."""
        for box in self.inputs.values():
            box.observe(self._on_change, names="value")
        for boxes in self.task_inputs.values():
            for box in boxes.values():
                box.observe(self._on_change, names="value")
        if self.task_box is not None:
            self.task_box.observe(self._on_task, names="value")

    # ---------------------------------------------------------------- form
    def set(self, **values) -> "Panel":
        """Set form fields as if typed (size='1500', rate='10kpps', busy_poll=True); task='search'
        or 'sweep' picks what Start does, and that task's fields are set the same way
        (criterion='pdr:0.1%', sweep='msg_size:1:4K:*4')."""
        if "task" in values:
            task = values.pop("task")
            if task not in self.tasks:
                raise ValueError(f"task: {task!r} is not one of {', '.join(self.tasks)}")
            if self.task_box is not None:
                self.task_box.value = task
            self._apply_task(task)
        for name, value in values.items():
            extra = self._task_field(name)
            if name not in self.inputs and extra is None:
                known = [*self.inputs, *(n for m in self.task_inputs.values() for n in m)]
                raise ValueError(f"{name}: unknown field (known: {', '.join(known)})")
            if extra is not None:
                task, box = extra
                kind = self._kinds[f"{task}.{name}"]
            else:
                box, kind = self.inputs[name], self._kinds[name]
            if kind == "multi":
                value = (value,) if isinstance(value, str) else tuple(value or ())
            elif kind == "tristate":   # None/True/False, or the drop-down's auto/on/off
                if value is None or isinstance(value, bool):
                    value = TRISTATE[value]
                if value not in TRISTATE.values():
                    raise ValueError(f"{name}: {value!r}: None, True or False (auto, on or off)")
            elif kind not in ("choice", "bool", "int"):   # text: what a person would type
                value = text_value(value, name, extra is None and name in self._seconds)
            box.value = value
        return self

    def eal_options(self):
        """The EAL options of the form (DPDK panels): a perfkit.engines.dpdk.EalOptions."""
        v = self.task_values("eal")
        huge = {"auto": None, "on": True, "off": False}[v["hugepages"]]
        return dpdk.EalOptions(memory_mb=v["memory_mb"], hugepages=huge, log_level=v["log_level"],
                               worker_cpus=v["worker_cpus"] or None)

    def _apply_eal(self) -> None:
        """Before a DPDK start: hand the form's EAL options to the engine if they differ from
        what EAL is (or would be) started with; EngineError once EAL is up with others."""
        if not self._dpdk:
            return
        opts = self.eal_options()
        if opts != (dpdk.eal_options()):
            dpdk.configure(opts)

    def load_dperf(self, path: str, netns: str | None = None):
        """What the dperf conf load button does: fill the form from a dperf configuration file
        (perfkit dperf -c FILE), through perfkit.dperf.from_dperf. Returns the spec, or None
        with the reason under the buttons. netns: default, the form's (an af_packet port's lab host)."""
        if netns is None:
            netns = self.values().get("netns") or None
        try:
            spec = _kinds.from_dperf(str(path).strip(), netns=netns)
            if not isinstance(spec, self.spec_cls):
                raise ValueError(f"{path}: a {type(spec).__name__} conf (mode "
                                 f"{'server' if 'Server' in type(spec).__name__ else 'client'}): "
                                 f"open it in the {type(spec).__name__} panel")
        except (OSError, ValueError) as exc:
            self.info.value = f'<span style="color:{RED}">⚠ dperf conf: {html.escape(str(exc))}</span>'
            return None
        self.set(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})
        self.info.value = f"loaded {html.escape(str(path))}"
        return spec

    def _task_field(self, name: str):
        """(task, input) of a task's own field, or None."""
        for task, boxes in self.task_inputs.items():
            if name in boxes:
                return task, boxes[name]
        return None

    def task_values(self, task: str | None = None) -> dict:
        """A task's own fields as arguments (an empty text box: its default)."""
        task = task or self.task
        out = {}
        for name, box in self.task_inputs.get(task, {}).items():
            v = box.value
            if isinstance(v, str):
                v = v.strip() or self._defaults[f"{task}.{name}"]
            out[name] = v
        return out

    def _apply_task(self, task: str) -> None:
        self.task = task
        for t, box in self.sections.items():
            box.layout.display = "" if t == task else "none"

    def _on_task(self, change) -> None:
        self._apply_task(change["new"])
        self.validate()

    def _check_task(self, spec):
        """The task's arguments checked by the code that runs them: ratesearch.validate for a
        search (the form's rate is the upper bound), remote.plan for a sweep (every point)."""
        if self.task == "search":
            a = self.task_values()
            return ratesearch.validate(dataclasses.replace(spec, rate=None), a["criterion"], high=spec.rate,
                                       low=a["low"], resolution=a["resolution"], max_trials=a["max_trials"],
                                       trial=a["trial"], settle=a["settle"], retries=a["retries"])
        if self.task == "sweep":
            return self._sweep_plan(spec)
        if self.task == "ladder":   # every step's spec, and the thresholds, checked as perfkit.ladder does
            a = self.task_values()
            try:
                specs = ladder_plan(spec, a["ladder"])
            except ValueError as exc:
                raise ValueError(f"ladder: {str(exc).removeprefix('users: ')}") from None
            return {"users": [s.users for s in specs], "thresholds": parse_thresholds((a["thresholds"] or "").split())}
        return None

    def _sweep_plan(self, spec):
        a = self.task_values()
        text = str(a["sweep"]).strip()
        opt = text.split(":", 1)[0]
        remote.parse_sweep(text)                 # the CLI's --oo parser: its message names sweep
        tests = [spec.test, *(t for t in a["also"] if t != spec.test)]
        fields = {k: v for k, v in self.values().items() if k not in ("host", "test", "port", "token", "duration")}
        kw = dict(time=spec.duration, sweep={opt: text.split(":", 1)[1]}, port=spec.port, token=spec.token, **fields)
        try:
            points = remote.plan(spec.host, *tests, **kw)    # every point's spec, checked before anything runs
        except ValueError as exc:   # a swept value (or a further test) the spec refuses
            raise ValueError(f"sweep: {exc}") from None
        return {"host": spec.host, "tests": tests, "option": opt, "points": len(points),
                "log_x": text.rsplit(":", 1)[-1].startswith("*"), **kw}

    def values(self) -> dict:
        """The form as keyword arguments for the spec: an empty text box is the field's
        default (None where the default is None); header lines become a dict."""
        out = {}
        for name, box in self.inputs.items():
            v = box.value
            if self._kinds[name] == "lines":
                v = _parse_lines(v, name)
            elif self._kinds[name] == "ranges" and v.strip():
                v = [x for x in re.split(r"[,\s]+", v.strip()) if x]
            elif self._kinds[name] == "pair" and v.strip():
                v = _parse_pair(v, name)
            elif name == "url" and len(v.split()) > 1:      # several URLs, space between
                v = v.split()
            elif self._kinds[name] == "area":
                v = v or None
            elif self._kinds[name] == "tristate":
                v = {text: value for value, text in TRISTATE.items()}[v]
            elif isinstance(v, str):
                v = v.strip()
                if v == "":
                    v = self._defaults[name]
            out[name] = v
        return out

    def validate(self):
        """Build the spec from the form; show its error, or what will run. Returns the spec or None."""
        plan = None
        try:
            spec = self.spec_cls(**self.values())
            _get_engine(self.engine_name)          # ValueError 'engine: ...' where it is not available
            if self._dpdk:
                self.eal_options()
            plan = self._check_task(spec)
            error = None
        except (ValueError, TypeError) as exc:
            spec, error = None, str(exc)
        with self._lock:
            self._spec, self._plan, self.error = spec, plan, error
            bad = error.split(":", 1)[0].strip() if error else None
            bad = {"high": "rate"}.get(bad, bad)     # a search's upper bound is the form's rate
            for name, label in self.labels.items():
                label.value = label_html(name, name == bad)
            if self.advanced_box is not None and bad in self._advanced:   # show the field in error
                self.advanced_box.selected_index = 0
            for task in {self.task, "eal"}:
                for name, label in self.task_labels.get(task, {}).items():
                    label.value = label_html(name, name == bad)
            if error:
                self.message.value = f'<span style="color:{RED}">⚠ {html.escape(error)}</span>'
            else:
                what = charts.spec_title(spec)
                if self.task == "search":
                    what = (f"rate search {plan.criterion.text} ({plan.criterion.describe()}) of "
                            f"{charts.spec_title(dataclasses.replace(spec, duration=plan.trial_s))} trials, "
                            f"upper bound {spec.rate or 'measured by an unpaced first trial'}")
                elif self.task == "ladder":
                    what = (f"user ladder {', '.join(map(str, plan['users']))} of "
                            f"{points.ladder_title(spec)}: {len(plan['users'])} steps of {spec.duration:g} s")
                elif self.task == "sweep":
                    what = (f"sweep {self.task_values()['sweep']} of {', '.join(plan['tests'])} to {spec.host}: "
                            f"{plan['points']} points of {spec.duration:g} s")
                self.message.value = (f'<span style="color:{GREEN}">✓ ready: '
                                      f'{html.escape(what)}</span>')
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
        """A run is starting or going, or its dashboard has not drawn the end yet."""
        return self.dashboard is not None and not self.dashboard.finished

    def _refresh(self) -> None:
        """Buttons from the state: Start needs a valid spec and no live run."""
        with self._lock:
            running = self.running
            self.start_button.disabled = running or self._spec is None
            self.stop_button.disabled = not running

    def _set_status(self, text: str, colour: str = GREY) -> None:
        self.status.value = f'<span style="color:{colour}">{html.escape(text)}</span>'

    def start(self):
        """What the Start button does: a new Run of the form's spec with a Dashboard under
        the form; run.start() goes on in a background thread. Returns the Run at once
        (panel.wait() blocks until it has ended; an error starting it shows in the status
        line and in run.error). For the search and sweep tasks: the search or sweep runs in a
        background thread with a live PointsChart under the form, which is returned."""
        with self._lock:
            if self.running:
                raise RuntimeError("a run is going: stop it (or wait) before starting another")
            spec = self._spec
            if spec is None:
                raise ValueError(self.error or "the form is not valid")
            self._apply_eal()                # DPDK: the form's EAL options, before the first start
            self._user_stopped = False
            if self.dashboard is not None:   # its last redraw must not land on the new chart
                self.dashboard.detach(self.output)
            if self.task != "run":
                return self._start_points(spec, self._plan)
            kw = {} if self.engine is None else {"engine": self.engine}
            run = Run(spec, interval=self.interval, **kw)
            where = self.cluster_name   # connected in the starter thread: a controller's answer takes a while
            dash = Dashboard(run, window=self.window, redraw_s=self.redraw_s, on_done=self._on_done,
                             autostart=False)
            dash.on_draw = lambda rows, state: self._on_draw(dash, rows, state)
            self.run, self.dashboard = run, dash
            self._show_progress(spec, [], "running")
            self._set_status(f"… starting {charts.spec_title(spec)}")
            self._refresh()
        dash.attach(self.output)
        launch(self._start_run, run, dash, where)
        return run

    def _show_progress(self, spec, rows, state: str) -> None:
        """The progress bar and its 'elapsed / planned' text (a run without a planned end: the text only)."""
        value, text = results.progress(spec, rows, state, stopped=self._user_stopped)
        self.progress_row.layout.display = ""
        self.progress.layout.display = "none" if value is None else ""
        if value is not None:
            self.progress.value = value
            self.progress.bar_style = ("warning" if self._user_stopped else "success") if state == "finished" else "info"
        self.progress_text.value = f'<span style="color:{GREY}">{html.escape(text)}</span>'
        if state == "running":
            self._drop_results()
            self.live.value = results.figures_html(results.live_figures(spec, rows[-1] if rows else None))
            if self.run is not None:   # a cluster run: each host's share under the totals
                self.hosts_box.value = results.hosts_html(self.run, state)

    def _drop_results(self) -> None:
        old, self.results, self.results_box.children = self.results, None, ()
        if old is not None:
            old.close()

    def _on_draw(self, dash: Dashboard, rows: list, state: str) -> None:
        """From the dashboard's drawing thread after each live redraw: progress and live figures."""
        if dash is self.dashboard and state == "running":
            self._show_progress(dash.run.spec, rows, state)

    def _start_run(self, run: Run, dash: Dashboard, where: str | None = None) -> None:
        """The starter thread: start the dashboard's drawing thread, connect to the cluster
        picked (if one), build the engine and start the run (EAL's first start, a remote
        handshake, opening ports, every engine of a cluster building its share take a while)."""
        try:
            dash.start()
            if where is not None:
                run.cluster = _cluster.Cluster.connect(where)
            run.start()
        except Exception as exc:  # noqa: BLE001 (shown in the panel; the kernel carries on)
            run.error = f"could not start: {exc}"
            dash.abort(run.error)
            return
        with self._lock:
            if dash is self.dashboard and not dash.finished:
                on = f" on cluster {where} ({', '.join(run.cluster.hosts)})" if where is not None else ""
                self._set_status(f"▶ running {charts.spec_title(run.spec)}{on}")
                self._show_rate(run)

    def _start_points(self, spec, plan):
        """Start a search or a sweep (the lock is held): its chart now, the work in a thread."""
        stop = threading.Event()
        if self.task == "search":
            crit = plan.criterion
            shown = dataclasses.replace(spec, duration=plan.trial_s)   # the title: trials, not the form's duration
            chart = points.PointsChart(lambda rows, state: points.search_figure(shown, crit, rows, state),
                                       redraw_s=min(self.redraw_s, 0.5), on_done=self._on_done)
            work, what = self._search_job, f"rate search {crit.text} of {charts.spec_title(spec)}"
        elif self.task == "ladder":
            chart = points.PointsChart(lambda rows, state: points.ladder_figure(spec, len(plan["users"]), rows, state),
                                       redraw_s=min(self.redraw_s, 0.5), on_done=self._on_done)
            work, what = self._ladder_job, f"user ladder of {points.ladder_title(spec)}"
        else:
            chart = points.PointsChart(
                lambda rows, state: points.sweep_figure(spec, plan["option"], plan["tests"], rows, state,
                                                        plan["log_x"]),
                redraw_s=min(self.redraw_s, 0.5), on_done=self._on_done)
            work, what = self._sweep_job, f"sweep of {', '.join(plan['tests'])}"
        self.run, self.result, self.frame, self.dashboard, self._stop_event = None, None, None, chart, stop
        self.progress_row.layout.display, self.live.value = "none", ""
        self._drop_results()
        self.job_error = None
        self._set_status(f"… starting the {what}")
        self._refresh()
        chart.attach(self.output)
        launch(work, spec, plan, chart, stop)
        return chart

    def _search_job(self, spec, plan, chart, stop) -> None:
        """The search's thread: perfkit.search with a progress callback that hands each trial
        to the chart (its own thread draws it) and says it in the status line."""
        chart.start()
        a = self.task_values("search")

        def progress(row):
            chart.add(row)
            if chart is self.dashboard:
                verdict = "pass" if row["passed"] else f"fail ({row['reason']})"
                self._set_status(f"▶ trial {row['trial']}: {format_si(row['offered_pps'], 'pps')} offered, "
                                 f"{format_si(row['rx_pps'], 'pps')} received: {verdict}")
        try:
            res = ratesearch.search(dataclasses.replace(spec, rate=None), plan.criterion, high=spec.rate,
                                    low=a["low"], resolution=a["resolution"], max_trials=a["max_trials"],
                                    trial=a["trial"], settle=a["settle"], retries=a["retries"],
                                    engine=self.engine, progress=progress, stop=stop)
        except Exception as exc:  # noqa: BLE001 (shown in the panel; the kernel carries on)
            self.job_error = f"search: {exc}"
            chart.end()
            return
        self.result, self.frame = res, res.trials
        self.job_error = res.error
        shown = dataclasses.replace(spec, duration=plan.trial_s)
        chart.end(lambda rows: points.search_figure(shown, plan.criterion, rows, "finished", res.found_pps,
                                                    res.stopped))

    def _sweep_job(self, spec, plan, chart, stop) -> None:
        """The sweep's thread: perfkit.test with sweep=, a point to the chart as each finishes."""
        chart.start()
        kw = {k: v for k, v in plan.items() if k not in ("host", "tests", "option", "points", "log_x")}

        def progress(row):
            chart.add(row)
            if chart is self.dashboard:
                self._set_status(f"▶ {chart.points} of {plan['points']} points: "
                                 f"{row['test']} at {plan['option']} {row[plan['option']]:g} done")
        try:
            self.frame = self.result = remote.test(plan["host"], *plan["tests"], progress=progress, stop=stop, **kw)
        except Exception as exc:  # noqa: BLE001 (shown in the panel; the kernel carries on)
            self.job_error = f"sweep: {exc}"
        chart.end()

    def _ladder_job(self, spec, plan, chart, stop) -> None:
        """The ladder's thread: perfkit.ladder, a point to the chart as each step finishes."""
        chart.start()
        done: list = []   # (users, run) per step started
        added = [0]       # the steps handed to the chart

        def flush():   # every step that has ended, to the chart
            for u, r in done[added[0]:]:
                if r.done:
                    chart.add(step_row(u, r))
                    added[0] += 1

        def step_row(u, run) -> dict:
            s = run.summary or {}
            return {"users": u, "passed": run.passed, **{k: s.get(k) for k in LADDER_COLUMNS if k != "users"}}

        def progress(users, run):   # before each step: the steps before it have ended
            flush()
            done.append((users, run))
            if chart is self.dashboard:
                self._set_status(f"▶ step {len(done)} of {len(plan['users'])}: {users} users")
        kw = {} if self.engine is None else {"engine": self.engine}
        try:
            lad = run_ladder(spec, plan["users"], interval=self.interval, thresholds=plan["thresholds"],
                                 progress=progress, stop=stop, **kw)
        except Exception as exc:  # noqa: BLE001 (shown in the panel; the kernel carries on)
            self.job_error = f"ladder: {exc}"
            chart.end()
            return
        flush()
        self.result, self.frame = lad, lad.table
        self.job_error = lad.error
        chart.end()

    def conf(self) -> None:
        """What the conf button does: both ends' host, CPU, OS, kernel and perfkit, fetched in
        a background thread and shown under the buttons (perfkit test HOST conf)."""
        spec = self._spec
        if spec is None:
            self._set_status(f"⚠ {self.error}", RED)
            return

        def fetch():
            try:
                self.info.value = f"<pre>{html.escape(conf_text(remote.conf(spec.host, spec.port, spec.token)))}</pre>"
            except Exception as exc:  # noqa: BLE001
                self.info.value = f'<span style="color:{RED}">⚠ conf: {html.escape(str(exc))}</span>'
        self.info.value = "… asking the server"
        launch(fetch)

    def serve(self, stop: bool = False):
        """What the serve here button does: a perfkit server (perfkit serve) in this kernel,
        listening on the form's host and port (port 0: any free one, then put in the form),
        with its token; pressed again (stop=True) it stops. Returns the Server."""
        if stop:
            if self.server is not None:
                self.server.stop()
                self.info.value = f"server on port {self.server.port} stopped"
                self.server = None
                self.serve_button.description = "serve here"
            return None
        if self.server is not None:
            return self.server
        v = self.values()
        try:
            srv = Server(v["host"], int(v["port"]), token=v["token"] or None, log=lambda line: None)
        except (OSError, ValueError) as exc:
            self.info.value = f'<span style="color:{RED}">⚠ serve: {html.escape(str(exc))}</span>'
            return None
        self.server = srv
        launch(srv.serve_forever)
        if int(v["port"]) != srv.port:
            self.set(port=srv.port)
        self.serve_button.description = "stop server"
        self.info.value = (f"perfkit server in this kernel on {html.escape(srv.bind)} port {srv.port}"
                           + (" (token required)" if srv.token else ""))
        return srv

    def quit_server(self) -> None:
        """What the quit server button does: ask perfkit serve on host:port to stop."""
        spec = self._spec
        if spec is None:
            self._set_status(f"⚠ {self.error}", RED)
            return

        def ask():
            try:
                remote.quit_server(spec.host, spec.port, spec.token)
                self.info.value = f"server on {html.escape(spec.host)} port {spec.port} stopped"
                if self.server is not None and self.server.port == spec.port:
                    self.server = None
                    self.serve_button.description = "serve here"
            except Exception as exc:  # noqa: BLE001
                self.info.value = f'<span style="color:{RED}">⚠ quit: {html.escape(str(exc))}</span>'
        self.info.value = "… asking the server to stop"
        launch(ask)

    def _click_start(self, _button) -> None:
        try:
            self.start()
        except Exception as exc:  # show it in the panel; the kernel carries on
            self._set_status(f"⚠ could not start: {exc}", RED)
            self._refresh()

    def stop(self) -> None:
        """What the Stop button does: ask the run to end now (returns at once; a run that
        is still starting ends as soon as it has started)."""
        run = self.run
        if run is not None and not run.done:
            self._user_stopped = True
            run.stop()
            self.stop_button.disabled = True
            self._set_status("■ stopping…")
        elif self._stop_event is not None and self.running:   # a search or sweep
            self._user_stopped = True
            self._stop_event.set()
            self.stop_button.disabled = True
            self._set_status("■ stopping…")

    def wait(self, timeout: float | None = None):
        """Block until the current run has ended and its static chart is shown;
        returns the Run (None on timeout). A search returns its SearchResult, a sweep its
        polars frame (None if it failed: panel.job_error says why)."""
        if self.dashboard is None:
            raise RuntimeError("nothing started yet: press Start or call panel.start()")
        if not self.dashboard.wait(timeout):
            return None
        return self.run if self.run is not None else self.result

    def _on_done(self, dash: Dashboard) -> None:
        """From the dashboard's drawing thread, after the final redraw."""
        with self._lock:
            if dash is not self.dashboard:   # an earlier run's dashboard finishing late
                return
            self._show_rate(None)            # the live rate control goes with the live run
            if self.run is None:             # a search or a sweep
                res = self.result
                if self.job_error:
                    self._set_status(f"⚠ {self.job_error}", RED)
                elif isinstance(res, Ladder):
                    verdict = "" if res.passed is None else ", every threshold held" if res.passed else \
                        ", a threshold failed"
                    self._set_status(f"■ finished: {len(res.runs)} steps{verdict}",
                                     RED if res.passed is False else GREEN)
                elif hasattr(res, "found_pps"):
                    found = (f"found {format_si(res.found_pps, 'pps')} ({format_si(res.found_bps, 'bit/s')})"
                             if res.found_pps is not None else "nothing passed")
                    self._set_status(f"■ finished: {found} after {len(res.rows)} trials ({res.stopped}), "
                                     f"{res.elapsed_s:.1f} s", GREEN if res.found_pps is not None else RED)
                else:
                    self._set_status(f"■ finished: {0 if res is None else res.height} points", GREEN)
                self._refresh()
                return
            run = dash.run
            self.hosts_box.value = results.hosts_html(run, "finished") if dash.aborted is None else ""
            if run.cluster is not None:   # connected for this run (the cluster itself stays up)
                run.cluster.close()
            if dash.aborted is None:
                self._show_progress(run.spec, run.rows, "finished")
                self.live.value = ""     # the results table says it now
                self.results = results.Results(self._w, run)
                self.results_box.children = (self.results.widget,)
            else:
                self.progress_row.layout.display = "none"
            if run.error:
                self._set_status(f"⚠ {run.error}", RED)
            else:
                self._set_status(*finish_status(run.summary, run.rows[-1] if run.rows else None,
                                                 stopped_by_user=self._user_stopped,
                                                 planned_s=getattr(run.spec, "duration", None)))
            self._refresh()

    # ------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        state = "running" if self.running else ("finished" if self.dashboard else "idle")
        task = "" if self.task == "run" else f" ({self.task})"
        return f"<perfkit.ui.Panel {self.spec_cls.__name__}{task} {state}, spec={self._spec!r}>"


_prewarmed = threading.Event()
warm = threading.Event()   # set once plotly's widget code and a dashboard figure have been made


def _prewarm() -> None:
    """Import plotly, read plotly.js for the live figures (livefig) and build one dashboard
    figure (plotly loads its property validators on first use) in the background, once per
    process: the first live figure takes a second or more of CPU holding the GIL, and if that happened while a run is live
    the kernel's other cells would wait behind it (see bench/RESULTS-notes.md#the-notebook-panels-prewarm)."""
    if _prewarmed.is_set():
        return
    _prewarmed.set()

    def imports():
        try:
            import plotly.io  # noqa: F401
            livefig.plotly_js()
            charts.empty_figure("warm-up")   # a plain go.Figure: no widget reaches the frontend
        except Exception:  # noqa: BLE001 (the dashboard reports it when it is built)
            pass
        finally:
            warm.set()
    threading.Thread(target=imports, name="perfkit-ui-prewarm", daemon=True).start()


def _time(us: float) -> str:
    return human(us, "µs")


def finish_status(summary: dict | None, last: dict | None, *, stopped_by_user: bool = False,
                  planned_s: float | None = None) -> tuple[str, str]:
    """The finished line and its colour: red when nothing got through (100% errors, nothing
    received), amber for errors above zero, green otherwise; says when Stop ended it early."""
    line = summary_line(summary, last)
    s = summary or {}
    elapsed = s.get("duration_s") or (last or {}).get("time_s")
    head = "■ finished"
    if stopped_by_user:
        head = "■ stopped by you" + (f" after {elapsed:.1f} of {planned_s:.3g} s"
                                      if elapsed is not None and planned_s else "")
    errs = s.get("error_rate_pct")
    if errs is None and last and str(s.get("test", "")).startswith("dpdk_http"):
        n = sum(last.get(k) or 0 for k in ("http_err", "err_connect", "err_timeout", "err_reset", "err_read"))
        done = (last.get("http_resp") or 0) + n
        errs = 100.0 * n / done if done else None
    colour = GREEN
    if errs is not None and errs >= 100:
        head, colour = head + ": every request failed", RED
    elif errs is not None and errs > 0:
        colour = AMBER
    elif s.get("test") not in ("http", "http_serve") and not str(s.get("test", "")).startswith("dpdk_http") \
            and "rx_pps" in s and not s.get("rx_pps") and not s.get("latency_us"):
        head, colour = head + ": nothing received", RED
    return f"{head}: {line}", colour


def summary_line(s: dict | None, last: dict | None = None) -> str:
    """One line from run.summary: rates and loss for bandwidth tests, latency for latency
    tests, TPS and response times for HTTP. last: the run's last row (its totals), for
    what the summary does not carry (DPDK TCP: connections)."""
    if not s:
        return "no summary"
    parts = []
    if str(s.get("test", "")).startswith("dpdk_http") and last:   # dperf's terms
        secs = s.get("duration_s") or last.get("time_s") or 0
        rate = (lambda n: n / secs) if secs > 0 else (lambda n: 0.0)
        parts.append(format_si(rate(last.get("sock_open") or 0), "conn/s"))
        served = (last.get("http_resp") or 0) or (last.get("http_get") or 0) + (last.get("http_post") or 0)
        parts.append(format_si(rate(served), "req/s"))
        if s.get("lat_p50_us") is not None:
            parts.append(f"response p50 {_time(s['lat_p50_us'])}, p99 {_time(s['lat_p99_us'])}")
        errs = sum(last.get(k) or 0 for k in ("http_err", "err_connect", "err_timeout", "err_reset", "err_read"))
        retrans = sum(last.get(k) or 0 for k in ("retrans_syn", "retrans_fin", "retrans_ack", "retrans_push"))
        parts.append(f"{errs} errors, {retrans} retransmits")
    elif s.get("test") == "http":   # nGrinder's terms
        parts.append(f"{format_si(s.get('tps') or 0, 'tps')}")
        if s.get("lat_p50_us") is not None:
            parts.append(f"response p50 {_time(s['lat_p50_us'])}, p99 {_time(s['lat_p99_us'])}")
        if s.get("error_rate_pct") is not None:
            parts.append(f"errors {s['error_rate_pct']:.3g}%")
    elif s.get("test") == "http_serve":
        parts.append(f"{format_si(s.get('bytes_rx') or 0, 'B')} in, {format_si(s.get('bytes_tx') or 0, 'B')} out")
    elif str(s.get("test", "")).endswith("_lat") and s.get("latency_us") is not None:
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
