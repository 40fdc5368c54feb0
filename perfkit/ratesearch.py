"""Rate search: the highest rate that holds a criterion, by binary search over trial runs.

    res = perfkit.search(DpdkFlows(port="ring:a:0", peer="ring:a:1"), "zero-loss",
                         high="5Mpps", trial="1s", resolution="1%", max_trials=12)
    res.found_pps      # the highest offered rate that passed (None: none did)
    res.trials         # one polars row per trial: offered, sent, received, loss, latency, cpu, pass

Criteria (text, case-insensitive; join several with "," and every one must hold):

    zero-loss         no frame lost: RFC 2544 throughput (also: rfc2544, throughput)
    pdr:0.1%          partial drop rate: lost / sent at most 0.1% (pdr:0.001 is the same)
    lat:p99<50us      a latency bound: p50 p90 p99 p999 max or mean, < or <=, in ns us ms s
                      (one way for udp_bw and DPDK rxonly, round trip for DPDK reverse)
    cpu or cpu:95%    BiTester's method: the busiest engine worker stays below 95% of a core;
                      the rate found is where the generator (or its receiver) saturates

Every trial also needs the generator to have sent what was offered (at least
1 - tx_tolerance of rate x trial frames): a rate the generator cannot make is no pass.
With retries=N a failed trial runs again at the same rate, up to N times, and the rate
passes if one of them does (a machine shared with other work stalls generators now and
then); every attempt is a row, `counted` marks the one whose verdict the search used.

The search: trial 1 at the upper bound (high; without one, an unpaced trial measures the
most the generator sends and that is the bound). If it passes, that is the answer.
Otherwise bisect between the highest pass and the lowest failure until they are closer
than the resolution or max_trials ran out; when nothing passed, one last trial at the
lower bound says whether the criterion holds anywhere. Each new trial lies between the
highest pass and the lowest failure so far, so every pass is below every failure.

Runs: DpdkFlows (dpdk engine) with a receiver in this process (peer) or frames coming
back (mode reverse); LocalTest udp_bw (socket engine, loopback or a lab). Nothing here
touches a packet: each trial is one perfkit.Run.
"""
from __future__ import annotations

import dataclasses
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from perfkit.errors import EngineError
from perfkit.run import Run
from perfkit.kinds import DpdkFlows, LocalTest
from perfkit.stats import INDEX
from perfkit.units import Rate, format_si, parse_duration, parse_float, parse_rate

MAX_TRIALS = 64
MAX_TRIAL_S = 600.0
LAT_STATS = ("p50", "p90", "p99", "p999", "max", "mean")
_LAT_UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_CRITERIA_HELP = ("zero-loss, pdr:RATIO (pdr:0.1% or pdr:0.001), lat:STAT<BOUND (lat:p99<50us; "
                  f"STAT one of {' '.join(LAT_STATS)}), cpu or cpu:PCT% (cpu:95%); join with ','")
_PDR = re.compile(r"pdr:\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(%?)")
_LAT = re.compile(r"lat:\s*([a-z0-9]+)\s*(<=|<)\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s)")
_CPU = re.compile(r"cpu(?::\s*([0-9]*\.?[0-9]+)\s*(%?))?")


@dataclass(frozen=True)
class Criterion:
    """What a trial must hold to pass (all parts set, the others off).

    max_loss     None: loss not checked; 0: zero loss; else the largest lost/sent ratio
    lat_stat, lat_bound_us, lat_inclusive   a latency bound (lat_stat None: off)
    cpu_pct      None: off; else every engine worker must stay below it (% of one core)
    """
    text: str
    max_loss: float | None = None
    lat_stat: str | None = None
    lat_bound_us: float | None = None
    lat_inclusive: bool = False
    cpu_pct: float | None = None

    def describe(self) -> str:
        parts = []
        if self.max_loss == 0:
            parts.append("zero loss (RFC 2544 throughput)")
        elif self.max_loss is not None:
            parts.append(f"loss <= {self.max_loss * 100:g}% (PDR)")
        if self.lat_stat:
            parts.append(f"latency {self.lat_stat} {'<=' if self.lat_inclusive else '<'} {self.lat_bound_us:g} us")
        if self.cpu_pct is not None:
            parts.append(f"engine CPU < {self.cpu_pct:g}% of a core (saturation)")
        return ", ".join(parts)


def parse_criterion(text) -> Criterion:
    """A Criterion from its text (see the module doc); ValueError naming what is allowed."""
    if isinstance(text, Criterion):
        return text
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"criterion: {text!r} is not one of {_CRITERIA_HELP}")
    fields: dict = {}

    def put(key, value, part):
        if key in fields and fields[key] != value:
            raise ValueError(f"criterion: {part!r} sets {key} a second time, differently, in {text!r}")
        fields[key] = value

    for part in (p.strip().lower() for p in text.split(",")):
        if part in ("zero-loss", "zeroloss", "zero_loss", "rfc2544", "throughput"):
            put("max_loss", 0.0, part)
            continue
        m = _PDR.fullmatch(part)
        if m:
            v = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
            if not 0 <= v < 1:
                raise ValueError(f"criterion: {part!r}: the tolerated loss must be at least 0 and below 100%")
            put("max_loss", v, part)
            continue
        m = _LAT.fullmatch(part)
        if m:
            stat = m.group(1)
            if stat not in LAT_STATS:
                raise ValueError(f"criterion: {part!r}: {stat!r} is not one of {', '.join(LAT_STATS)}")
            bound = float(m.group(3)) * _LAT_UNITS[m.group(4)]
            if not bound > 0:
                raise ValueError(f"criterion: {part!r}: the latency bound must be above 0")
            put("lat_stat", stat, part)
            put("lat_bound_us", bound, part)
            put("lat_inclusive", m.group(2) == "<=", part)
            continue
        m = _CPU.fullmatch(part)
        if m:
            pct = float(m.group(1)) if m.group(1) else 95.0
            if not 0 < pct <= 100:
                raise ValueError(f"criterion: {part!r}: the CPU threshold must be in (0, 100]%")
            put("cpu_pct", pct, part)
            continue
        raise ValueError(f"criterion: {part!r} is not one of {_CRITERIA_HELP}")
    return Criterion(text=text.strip(), **fields)


# --------------------------------------------------------------------------- trials

TRIAL_COLUMNS = {  # name -> polars dtype name, in frame order
    "trial": "Int64", "offered_pps": "Float64", "offered_bps": "Float64", "paced": "Boolean",
    "sent": "Int64", "received": "Int64", "lost": "Int64", "dup": "Int64", "reorder": "Int64",
    "loss_ratio": "Float64",
    "tx_pps": "Float64", "rx_pps": "Float64", "rx_bps": "Float64", "duration_s": "Float64",
    "lat_p50_us": "Float64", "lat_p90_us": "Float64", "lat_p99_us": "Float64", "lat_p999_us": "Float64",
    "lat_max_us": "Float64", "lat_mean_us": "Float64", "lat_count": "Int64",
    "cpu_pct": "Float64", "cpu_pct_max_worker": "Float64", "passed": "Boolean", "reason": "String",
    "counted": "Boolean",
}


class _TrialRun(Run):
    """A Run that also keeps every worker's final counters (the summary sums them; a trial
    needs the generator's own)."""
    worker_totals: list | None = None

    def _row(self, prev_workers, prev_hist, prev_t, t, final=False):
        out = super()._row(prev_workers, prev_hist, prev_t, t, final)
        if final:
            self.worker_totals = out[0]
        return out


def check_searchable(spec) -> None:
    """ValueError unless this process sees both the frames sent and their loss."""
    if isinstance(spec, DpdkFlows):
        if spec.peer is None and spec.mode == "rxonly":
            raise ValueError("search: a DPDK search needs the loss measured here: give peer (a receiving "
                             "port in this process) or mode=reverse (frames come back)")
        if getattr(spec, "ramp_to", None) is not None:
            raise ValueError("search: a ramp (ramp_to) has no one rate to search: leave ramp_to out")
        return
    if isinstance(spec, LocalTest):
        if spec.test != "udp_bw":
            raise ValueError(f"search: the socket engine searches udp_bw only, not {spec.test}")
        if spec.size < 24:
            raise ValueError(f"search: size {spec.size} B is too small to carry sequence numbers (at least 24)")
        return
    raise ValueError(f"search: runs DpdkFlows or LocalTest(udp_bw) specs, not {type(spec).__name__}")


def _bytes_per_msg(spec) -> float:
    """Bytes per frame/datagram that a bps rate counts: the mean of a DPDK size mix."""
    return float(getattr(spec, "mean_size", spec.size))


def _judge(c: Criterion, row: dict, tx_tolerance: float, trial_s: float) -> tuple[bool, str]:
    """Pass or not, and why (the first reason it failed, or what held)."""
    due = row["offered_pps"] * trial_s
    if row["paced"] and row["sent"] < (1.0 - tx_tolerance) * due:
        return False, (f"the generator sent {row['sent']} of the {due:.0f} frames due "
                       f"({format_si(row['offered_pps'], 'pps')} offered)")
    if row["sent"] == 0:
        return False, "nothing was sent"
    if c.max_loss is not None:
        if c.max_loss == 0 and row["lost"]:
            return False, f"{row['lost']} lost"
        if row["loss_ratio"] > c.max_loss:
            return False, f"loss {row['loss_ratio'] * 100:.4g}% > {c.max_loss * 100:g}%"
    if c.lat_stat:
        v = row[f"lat_{c.lat_stat}_us"]
        if v is None:
            return False, "no latency samples"
        ok = v <= c.lat_bound_us if c.lat_inclusive else v < c.lat_bound_us
        if not ok:
            return False, f"{c.lat_stat} {v:.4g} us {'>' if c.lat_inclusive else '>='} {c.lat_bound_us:g} us"
    if c.cpu_pct is not None and row["cpu_pct_max_worker"] >= c.cpu_pct:
        return False, f"a worker at {row['cpu_pct_max_worker']:.0f}% CPU >= {c.cpu_pct:g}%"
    return True, "held"


class Stopped(Exception):
    """The search's stop Event was set: the trial going on was cut short."""


def run_trial(spec, pps: float | None, trial_s: float, engine: str | None = None,
              stop: threading.Event | None = None) -> tuple[dict, Run]:
    """One trial: spec at pps frames/s (None: unpaced) for trial_s seconds; its row (no verdict)
    and the finished Run. stop: an Event that ends the trial early (raises Stopped)."""
    t = dataclasses.replace(spec, rate=Rate(pps, "pps") if pps else None, duration=trial_s)
    run = _TrialRun(t, engine=engine, interval=max(0.05, min(1.0, trial_s)))
    run.start()
    try:
        if stop is not None:
            while not run.wait(0.05):
                if stop.is_set():
                    run.stop()
        run.wait()
    except EngineError:
        pass
    if stop is not None and stop.is_set():
        raise Stopped()
    if run.error:
        raise EngineError(f"trial at {format_si(pps, 'pps') if pps else 'full speed'}: {run.error}")
    s, workers, roles = run.summary, run.worker_totals or [], run.roles
    senders = [w for w, r in zip(workers, roles) if r.endswith("_send")]
    sent = sum(w[INDEX["pkts_tx"]] for w in senders)
    active = max((w[INDEX["cpu_wall_ns"]] for w in senders), default=0) / 1e9
    lost = int(s["lost"])
    # frames that arrived, once each, at the worker tracking them: the receiver, or in
    # reverse mode the generator itself (a reflector's udp_rx is the way out). Not lat_count:
    # a timestamp a few ns "from the future" (another core's TSC) has no latency sample.
    # seq_lost can also count frames the generator built but could not send in time.
    trackers = [w for w, r in zip(workers, roles) if r.endswith("_recv")] or senders
    received = max(0, sum(w[INDEX["udp_rx"]] for w in trackers) - int(s.get("dup") or 0))
    per_s = (lambda n: n / active) if active > 0 else (lambda n: 0.0)
    size = _bytes_per_msg(spec)
    tx_pps = per_s(sent)
    row = {
        "offered_pps": float(pps) if pps else tx_pps, "paced": bool(pps),
        "sent": sent, "received": received, "lost": lost, "dup": int(s.get("dup") or 0),
        "reorder": int(s.get("reorder") or 0),
        "loss_ratio": lost / (received + lost) if received + lost else 0.0,
        "tx_pps": tx_pps, "rx_pps": per_s(received), "rx_bps": per_s(received) * 8 * size,
        "duration_s": active,
        **{f"lat_{k}_us": s.get(f"lat_{k}_us") for k in LAT_STATS},
        "lat_count": int(s.get("lat_count") or 0),
        "cpu_pct": s.get("cpu_pct", 0.0),
        "cpu_pct_max_worker": max((s.get("cpu_pct_by_worker") or {"": 0.0}).values()),
    }
    row["offered_bps"] = row["offered_pps"] * 8 * size
    return row, run


@dataclass
class SearchResult:
    """A finished search: found_pps (None when no trial passed), every trial as rows of
    trials (polars), why it stopped, and the bounds it searched."""
    spec: object
    criterion: Criterion
    rows: list = field(default_factory=list)
    found_pps: float | None = None
    low_pps: float = 0.0
    high_pps: float | None = None
    resolution_pps: float = 0.0
    stopped: str = ""
    error: str | None = None
    elapsed_s: float = 0.0
    trial_s: float = 0.0

    @property
    def found(self) -> Rate | None:
        return Rate(self.found_pps, "pps") if self.found_pps is not None else None

    @property
    def found_bps(self) -> float | None:
        return None if self.found_pps is None else self.found_pps * 8 * _bytes_per_msg(self.spec)

    @property
    def trials(self):
        import polars as pl  # polars loads when the trials are first asked for
        schema = {k: getattr(pl, v) for k, v in TRIAL_COLUMNS.items()}
        return pl.DataFrame([{k: r.get(k) for k in TRIAL_COLUMNS} for r in self.rows], schema=schema,
                            orient="row") if self.rows else pl.DataFrame(schema=schema)

    def to_dict(self) -> dict:
        return {"criterion": self.criterion.text, "meaning": self.criterion.describe(),
                "found_pps": self.found_pps, "found_bps": self.found_bps,
                "trials": len(self.rows), "low_pps": self.low_pps, "high_pps": self.high_pps,
                "resolution_pps": self.resolution_pps, "stopped": self.stopped, "error": self.error,
                "elapsed_s": self.elapsed_s, "spec": self.spec.to_dict()}

    def __repr__(self) -> str:
        found = format_si(self.found_pps, "pps") if self.found_pps is not None else "none"
        return (f"<perfkit.SearchResult {self.criterion.text!r}: {found} after {len(self.rows)} trials "
                f"({self.stopped})>")


def _rate_pps(value, spec, field: str) -> float:
    r = parse_rate(value, field)
    pps = r.messages_per_second(_bytes_per_msg(spec))
    if not pps > 0:
        raise ValueError(f"{field}: {value!r} must be above 0")
    return pps


def _resolution_pps(value) -> tuple[float | None, float]:
    """(absolute pps or None, share of the upper bound or 0) from '1%', 0.01 (share) or '10kpps'."""
    if isinstance(value, str) and value.strip().endswith("%"):
        share = parse_float(value.strip()[:-1], "resolution", "a percentage (1%)") / 100
        if not 0 < share < 1:
            raise ValueError(f"resolution: {value!r} is not a share in (0, 100)%")
        return None, share
    if isinstance(value, float) and 0 < value < 1:
        return None, value
    r = parse_rate(value, "resolution")
    if r.unit != "pps" or not r.value > 0:
        raise ValueError(f"resolution: {value!r} is not a packet rate above 0 (1000, 10kpps) or a share (1%)")
    return r.value, 0.0


@dataclass(frozen=True)
class SearchPlan:
    """A search's arguments, parsed and checked (validate()): what search() runs."""
    criterion: Criterion
    trial_s: float
    settle_s: float
    max_trials: int
    retries: int
    tx_tolerance: float
    high_pps: float | None
    low_pps: float | None
    res_abs: float | None
    res_share: float


def validate(spec, criterion="zero-loss", *, high=None, low=None, resolution="1%", max_trials: int = 16,
             trial="1s", settle="0.5s", retries: int = 0, tx_tolerance: float = 0.02) -> SearchPlan:
    """Check a search's arguments before any trial runs (search() does, and so does the
    notebook panel on every change); ValueError naming the argument and what it takes."""
    check_searchable(spec)
    crit = parse_criterion(criterion)
    trial_s = parse_duration(trial, "trial")
    if not 0.05 <= trial_s <= MAX_TRIAL_S:
        raise ValueError(f"trial: {trial!r} is out of range 50ms..{MAX_TRIAL_S:g}s")
    settle_s = parse_duration(settle, "settle")
    if not 0 <= settle_s <= 60:
        raise ValueError(f"settle: {settle!r} is out of range 0..60s")
    if isinstance(max_trials, bool) or not isinstance(max_trials, int) or not 1 <= max_trials <= MAX_TRIALS:
        raise ValueError(f"max_trials: {max_trials!r} is out of range 1..{MAX_TRIALS}")
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 5:
        raise ValueError(f"retries: {retries!r} is out of range 0..5")
    if isinstance(tx_tolerance, bool) or not isinstance(tx_tolerance, (int, float)) or not 0 <= tx_tolerance < 1:
        raise ValueError(f"tx_tolerance: {tx_tolerance!r} is not a share in [0, 1)")
    high_pps = None if high is None else _rate_pps(high, spec, "high")
    low_pps = None if low is None else _rate_pps(low, spec, "low")
    if high_pps is not None and low_pps is not None and low_pps >= high_pps:
        raise ValueError(f"low: {low!r} is not below the upper bound {format_si(high_pps, 'pps')}")
    res_abs, res_share = _resolution_pps(resolution)
    return SearchPlan(crit, trial_s, settle_s, max_trials, retries, float(tx_tolerance), high_pps, low_pps,
                      res_abs, res_share)


def search(spec, criterion="zero-loss", *, high=None, low=None, resolution="1%", max_trials: int = 16,
           trial="1s", settle="0.5s", retries: int = 0, tx_tolerance: float = 0.02, engine: str | None = None,
           progress: Callable[[dict], None] | None = None, stop: threading.Event | None = None,
           prior: list | None = None) -> SearchResult:
    """The highest rate at which spec holds criterion (see the module doc).

    spec          DpdkFlows (peer port, or mode reverse) or LocalTest("udp_bw"); its rate and
                  duration are replaced per trial
    criterion     'zero-loss', 'pdr:0.1%', 'lat:p99<50us', 'cpu', 'cpu:90%' (join with ',')
    high          upper bound (1Mpps, 500Mbps); None: an unpaced first trial measures it
    low           lower bound (default 1% of the upper); the last trial when nothing passed
    resolution    stop when the highest pass and the lowest failure are this close:
                  a share of the upper bound ('1%') or a rate ('10kpps', 1000)
    max_trials    at most this many trials (1..64)
    trial         duration of each trial
    settle        pause between trials, so frames still queued from one (a reflector's
                  backlog behind a shaped link) never reach the next (RFC 2544 waits too)
    retries       run a failed trial again at the same rate up to this many times (0..5);
                  the rate passes if one attempt does
    tx_tolerance  a trial whose generator sent less than (1 - this) x rate x trial frames fails
    progress      called with every trial's row as it finishes
    stop          an Event: once set, the trial going on ends at once and is not kept, and the
                  search returns what it has (stopped='stopped'): the notebook panel's Stop
    prior         the trials of this search (same spec, criterion and bounds) that a stopped
                  run kept: the search continues from them, between their highest pass and
                  lowest failure, and numbers its trials after them (prior_fits checks them)

    Returns a SearchResult; Ctrl-C ends the search early with the trials so far
    (stopped='interrupted'), an engine error likewise (stopped='error', .error says why)."""
    p = validate(spec, criterion, high=high, low=low, resolution=resolution, max_trials=max_trials, trial=trial,
                 settle=settle, retries=retries, tx_tolerance=tx_tolerance)
    res = SearchResult(spec=spec, criterion=p.criterion, trial_s=p.trial_s, rows=[dict(r) for r in prior or ()])
    if prior and not prior_fits(prior, p.high_pps):
        raise ValueError("prior: the trials kept began at another upper bound; search again from the start")
    trials = _Trials(spec, p, res, engine, progress, stop)
    t0 = time.monotonic()
    try:
        if not _upper_bound(trials, low):
            _bisect(trials)
        return res
    except (KeyboardInterrupt, Stopped) as exc:
        res.stopped = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped"
        res.found_pps = max((r["offered_pps"] for r in res.rows if r["passed"]), default=None)
        return res
    except EngineError as exc:
        res.stopped, res.error = "error", str(exc)
        res.found_pps = max((r["offered_pps"] for r in res.rows if r["passed"]), default=None)
        return res
    finally:
        res.elapsed_s = time.monotonic() - t0
        if res.high_pps is None and trials.high_pps is not None:
            res.high_pps = trials.high_pps


class _Trials:
    """One search's trials: each one run, judged, kept in res.rows and passed to progress."""

    def __init__(self, spec, plan: SearchPlan, res: SearchResult, engine, progress, stop):
        self.spec, self.p, self.res, self.engine, self.progress, self.stop = spec, plan, res, engine, progress, stop
        self.high_pps = plan.high_pps   # the upper bound: given, or measured by the first trial

    def attempt(self, pps, last: bool) -> dict:
        """One trial at pps after the settle pause; last: it counts even if it fails."""
        res, settle_s, stop = self.res, self.p.settle_s, self.stop
        if res.rows and settle_s:
            if stop is not None:
                stop.wait(settle_s)
            else:
                time.sleep(settle_s)
        if stop is not None and stop.is_set():
            raise Stopped()
        row, _ = run_trial(self.spec, pps, self.p.trial_s, self.engine, stop)
        row["trial"] = len(res.rows) + 1
        row["passed"], row["reason"] = _judge(self.p.criterion, row, self.p.tx_tolerance, self.p.trial_s)
        row["counted"] = bool(row["passed"] or last)
        row = {k: row[k] for k in TRIAL_COLUMNS}
        res.rows.append(row)
        if self.progress is not None:
            self.progress(dict(row))
        return row

    def one(self, pps) -> dict:
        """A trial at pps (None: unpaced), run again on failure while retries and trials last."""
        k = 0
        while True:
            last = k >= self.p.retries or pps is None or len(self.res.rows) + 1 >= self.p.max_trials
            row = self.attempt(pps, last)
            if row["counted"]:
                return row
            k += 1


def _counted(rows) -> list:
    """The trials that count (a failed attempt run again under retries does not); rows saved
    without the flag count."""
    return [r for r in rows if r.get("counted", True) is not False]


def prior_fits(prior, high_pps: float | None) -> bool:
    """Can a search with this upper bound (None: measured unpaced) continue from prior's trials?
    Their first counted trial must be that bound's (none counted yet: nothing to contradict)."""
    first = next(iter(_counted(prior)), None)
    if first is None:
        return True
    if high_pps is None:
        return not first.get("paced", True)
    return bool(first.get("paced", True)) and abs(first["offered_pps"] - high_pps) <= 1e-6 * high_pps


def _upper_bound(trials: _Trials, low) -> bool:
    """The first trial, at the upper bound (none given: unpaced, measuring it), then the
    search's bounds and resolution; True when that already ends the search. A resumed
    search's first counted trial (prior) is that trial."""
    res, p = trials.res, trials.p
    first = next(iter(_counted(res.rows)), None) or trials.one(trials.high_pps)
    if trials.high_pps is None:  # the most the generator sends: the upper bound
        trials.high_pps = first["tx_pps"]
        if not trials.high_pps > 0:
            res.stopped = "the generator sent nothing"
            return True
        if first["passed"]:
            res.found_pps, res.stopped = trials.high_pps, "held at the generator's full speed"
    elif first["passed"]:
        res.found_pps, res.stopped = trials.high_pps, "held at the upper bound"
    high_pps = res.high_pps = trials.high_pps
    res.low_pps = p.low_pps if p.low_pps is not None else high_pps / 100
    if res.low_pps >= high_pps:
        raise ValueError(f"low: {low!r} is not below the upper bound {format_si(high_pps, 'pps')}")
    res.resolution_pps = p.res_abs if p.res_abs is not None else p.res_share * high_pps
    return res.found_pps is not None


def _bisect(trials: _Trials) -> None:
    """Binary search between the lower bound and the upper bound, which failed; then, if
    nothing passed, one trial at the lower bound. Sets res.found_pps and res.stopped. A
    resumed search starts between its kept trials' highest pass and lowest failure."""
    res, max_trials = trials.res, trials.p.max_trials
    done = _counted(res.rows)[1:]   # after the upper bound's trial
    best = max((r["offered_pps"] for r in done if r["passed"]), default=None)
    fail = min((r["offered_pps"] for r in done if not r["passed"]), default=res.high_pps)
    while True:
        below = best if best is not None else res.low_pps
        if fail - below <= res.resolution_pps:
            break
        if len(res.rows) >= max_trials:
            res.stopped = "max_trials"
            break
        r = trials.one((below + fail) / 2)
        if r["passed"]:
            best = r["offered_pps"]
        else:
            fail = r["offered_pps"]
    if best is None and not res.stopped:  # nothing passed: does the lower bound?
        if len(res.rows) >= max_trials:
            res.stopped = "max_trials"
        elif next((r for r in done if r["offered_pps"] == res.low_pps), None) is None and \
                trials.one(res.low_pps)["passed"]:   # (a resumed search may have run it)
            best = res.low_pps
    res.found_pps = best
    if not res.stopped:
        res.stopped = "resolution" if best is not None else "not held at the lower bound"


def trial_line(row: dict, criterion: Criterion | None = None) -> str:
    """One trial as the CLI prints it."""
    lat = "" if row.get("lat_p99_us") is None else f"  p99 {row['lat_p99_us']:.3g} us"
    offered = format_si(row["offered_pps"], "pps") + ("" if row["paced"] else " (unpaced)")
    return (f"trial {row['trial']:2d}: offered {offered:>16}  tx {format_si(row['tx_pps'], 'pps'):>10}  "
            f"rx {format_si(row['rx_pps'], 'pps'):>10}  loss {row['loss_ratio'] * 100:.4f}%{lat}  "
            f"cpu {row['cpu_pct_max_worker']:.0f}%  "
            f"{'pass' if row['passed'] else 'FAIL' if row['counted'] else 'failed, once more'}"
            + ("" if row["passed"] else f" ({row['reason']})"))


def result_text(res: SearchResult) -> str:
    c = res.criterion
    found = (f"{format_si(res.found_pps, 'pps')} ({format_si(res.found_bps, 'bit/s')})"
             if res.found_pps is not None else "none: the criterion did not hold")
    lines = [f"search {c.text}: {c.describe()}",
             f"    found        =  {found}",
             f"    trials       =  {len(res.rows)} ({res.stopped}), {res.elapsed_s:.1f} s",
             f"    bounds       =  {format_si(res.low_pps, 'pps')} .. "
             f"{format_si(res.high_pps or 0, 'pps')}, resolution {format_si(res.resolution_pps, 'pps')}"]
    if res.error:
        lines.append(f"    error        =  {res.error}")
    return "\n".join(lines)

