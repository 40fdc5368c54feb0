"""RFC 2544, the whole method: throughput, latency, frame loss rate and back-to-back frames
at each standard frame size, from trial runs (perfkit.ratesearch does the trials).

    res = perfkit.rfc2544(LocalTest("udp_bw", lab="l1"), sizes=(128, 512), trial="2s", high="12kpps")
    res.throughput      # one polars frame per test, a row per frame size (size column)
    res.trials          # every trial run, with its test and size
    print(res.text())   # tables laid out like the RFC's reporting (section 26)

Frame sizes are Ethernet frames with the 4-byte FCS counted, as the RFC counts them
(64 .. 1518, jumbo 9018). A DpdkFlows spec's size is that frame; a socket spec
(LocalTest udp_bw) sends UDP payloads of frame - 46 bytes (IPv4: 14 Ethernet + 20 IP +
8 UDP + 4 FCS; IPv6: 66), so 64-byte frames (18 B of payload) do not fit its 24 B of
sequence number and timestamp and are skipped with that reason. Bit rates are frame bits
(FCS counted, no preamble or gap); the upper bound (high, or the spec's rate) given in
bit/s is converted per size the same way.

The tests (RFC 2544 section 26):
  throughput    binary search for the highest zero-loss rate (perfkit.search), trials of
                the RFC's 60 s unless trial says otherwise
  latency       latency_trials (RFC: 20) trials at the throughput found; the RFC's figure
                is the mean of the trials' values (here each trial's mean over every
                frame), perfkit's percentiles over all the trials' frames beside it
  frame_loss    from 100% of the upper bound down in loss_step (10%) steps until two
                trials in a row lose nothing (26.3)
  back_to_back  the longest burst sent at full speed with no loss, by binary search on
                the burst's length, repeated b2b_trials (RFC: 50) times: a counted burst
                (the spec's messages: the socket engine's sender, or the DPDK generators,
                which stop once that many frames went out)

Resume: pass a previous result (resume=res); every (test, size) it finished is kept as it
is and only the rest runs; a throughput search it stopped in the middle keeps its trials and
goes on between their highest pass and lowest failure (perfkit.search's prior).
"""
from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import json
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from perfkit import savefile
from perfkit.errors import EngineError
from perfkit.kinds import DpdkFlows, LocalTest, from_dict
from perfkit.ratesearch import Stopped, check_searchable, prior_fits, run_trial, search, trial_line
from perfkit.ratesearch import validate as search_validate
from perfkit.run import write_report
from perfkit.stats import Histogram
from perfkit.units import Rate, format_si, parse_duration, parse_float, parse_int, parse_rate

SIZES = (64, 128, 256, 512, 1024, 1280, 1518)   # RFC 2544 section 9.1, Ethernet
JUMBO = 9018
TESTS = ("throughput", "latency", "frame_loss", "back_to_back")
_TEST_NAMES = {"throughput": "throughput", "latency": "latency", "frame_loss": "frame_loss",
               "frame-loss": "frame_loss", "loss": "frame_loss", "back_to_back": "back_to_back",
               "back-to-back": "back_to_back", "b2b": "back_to_back"}
_IP4_OVERHEAD, _IP6_OVERHEAD = 14 + 20 + 8 + 4, 14 + 40 + 8 + 4   # Ethernet + IP + UDP + FCS
_MIN_PAYLOAD = 24   # the socket engine's sequence number and timestamp (ratesearch.check_searchable)
_RESULT_KEY = b"perfkit.rfc2544"


def _overhead(spec) -> int:
    """Bytes a frame has beyond the spec's size field: 0 for DPDK (size is the frame)."""
    if isinstance(spec, DpdkFlows):
        return 0
    try:
        return _IP6_OVERHEAD if ipaddress.ip_address(str(spec.host).strip("[]")).version == 6 else _IP4_OVERHEAD
    except ValueError:
        return _IP4_OVERHEAD


def spec_at(spec, frame: int):
    """spec sending frames of `frame` bytes (FCS counted); ValueError saying why it cannot."""
    if isinstance(spec, DpdkFlows):
        return dataclasses.replace(spec, size=frame, sizes=None)   # the port's own checks: jumbo or not
    payload = frame - _overhead(spec)
    if payload < _MIN_PAYLOAD:
        raise ValueError(f"a {frame} B frame carries {payload} B of UDP payload, less than the socket engine's "
                         f"{_MIN_PAYLOAD} B of sequence number and timestamp")
    return dataclasses.replace(spec, size=payload)


def _pps(rate: Rate, frame: int) -> float:
    return rate.value if rate.unit == "pps" else rate.value / (8.0 * frame)


@dataclass(frozen=True)
class Plan:
    """rfc2544()'s arguments, parsed and checked before anything runs."""
    sizes: tuple            # ((frame, spec at that size or None, why skipped or ""), ...)
    tests: tuple
    trial_s: float
    latency_trial_s: float
    latency_trials: int
    settle: str
    resolution: object
    max_trials: int
    retries: int
    high: Rate | None
    low: Rate | None
    loss_step: float
    b2b_trials: int
    b2b_trial_s: float
    max_burst: int | None
    b2b_unsupported: str    # "" where the engine sends a burst of a given count


def _count(value, name, lo, hi) -> int:
    n = parse_int(str(value), name) if not isinstance(value, int) or isinstance(value, bool) else value
    if isinstance(n, bool) or not lo <= n <= hi:
        raise ValueError(f"{name}: {value!r} is out of range {lo}..{hi}")
    return n


def _sizes(value, spec) -> list[int]:
    if value is None:
        out = list(SIZES)
        if isinstance(spec, DpdkFlows):   # jumbo where the port takes it (checked per size below)
            out.append(JUMBO)
        return out
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for s in items:
        n = parse_int(str(s).strip(), "sizes", "Ethernet frame bytes: 64,128,1518") if not isinstance(s, int) else s
        if isinstance(n, bool) or not 64 <= n <= JUMBO:
            raise ValueError(f"sizes: {s!r} is not an Ethernet frame size in 64..{JUMBO} bytes (FCS counted)")
        if n not in out:
            out.append(n)
    if not out:
        raise ValueError("sizes: give at least one frame size (64,128,...,1518)")
    return out


def _tests(value) -> tuple:
    items = [t.strip().lower() for t in value.split(",")] if isinstance(value, str) else list(value)
    out = []
    for t in items:
        if t == "all":
            out += [x for x in TESTS if x not in out]
            continue
        if t not in _TEST_NAMES:
            raise ValueError(f"tests: {t!r} is not one of {', '.join(TESTS)} (or all)")
        if _TEST_NAMES[t] not in out:
            out.append(_TEST_NAMES[t])
    if not out:
        raise ValueError(f"tests: give at least one of {', '.join(TESTS)}")
    return tuple(x for x in TESTS if x in out)   # the RFC's order: latency needs the throughput first


def validate(spec, sizes=None, tests=TESTS, *, trial="60s", latency_trial=None, latency_trials=20, high=None,
             low=None, resolution="1%", max_trials=16, settle="2s", retries=0, loss_step="10%", b2b_trials=50,
             b2b_trial="2s", max_burst=None) -> Plan:
    """Check rfc2544()'s arguments (ValueError naming the argument) before any trial runs."""
    check_searchable(spec)
    if getattr(spec, "messages", None) is not None:
        raise ValueError("messages: each RFC 2544 trial runs for its time; leave the message count out")
    tests = _tests(tests)
    trial_s = parse_duration(trial, "trial")
    if not 0.05 <= trial_s <= 600:
        raise ValueError(f"trial: {trial!r} is out of range 50ms..600s")
    latency_trial_s = trial_s if latency_trial is None else parse_duration(latency_trial, "latency_trial")
    if not 0.05 <= latency_trial_s <= 600:
        raise ValueError(f"latency_trial: {latency_trial!r} is out of range 50ms..600s")
    b2b_trial_s = parse_duration(b2b_trial, "b2b_trial")
    if not 0.05 <= b2b_trial_s <= 60:
        raise ValueError(f"b2b_trial: {b2b_trial!r} is out of range 50ms..60s")
    latency_trials = _count(latency_trials, "latency_trials", 1, 100)
    b2b_trials = _count(b2b_trials, "b2b_trials", 1, 100)
    max_trials = _count(max_trials, "max_trials", 1, 64)
    retries = _count(retries, "retries", 0, 5)
    if isinstance(loss_step, str) and loss_step.strip().endswith("%"):
        step = parse_float(loss_step.strip()[:-1], "loss_step", "a percentage (10%)") / 100
    elif isinstance(loss_step, (int, float)) and not isinstance(loss_step, bool):
        step = float(loss_step)
    else:
        raise ValueError(f"loss_step: {loss_step!r} is not a percentage (10%)")
    if not 0.01 <= step <= 0.5:
        raise ValueError(f"loss_step: {loss_step!r} is out of range 1%..50%")
    if max_burst is not None:
        max_burst = _count(max_burst, "max_burst", 2, 100_000_000)
    high_r = None if high is None else parse_rate(high, "high")
    low_r = None if low is None else parse_rate(low, "low")
    for name, r in (("high", high_r), ("low", low_r)):
        if r is not None and not r.value > 0:
            raise ValueError(f"{name}: {r} must be above 0")
    if high_r is not None and low_r is not None and high_r.unit == low_r.unit and low_r.value >= high_r.value:
        raise ValueError(f"low: {low_r} is not below the upper bound {high_r}")
    plan_sizes = []
    for frame in _sizes(sizes, spec):
        try:
            plan_sizes.append((frame, spec_at(spec, frame), ""))
        except ValueError as exc:
            if sizes is not None and frame != JUMBO and isinstance(spec, DpdkFlows):
                raise ValueError(f"sizes: {exc}") from None
            plan_sizes.append((frame, None, str(exc)))
    if not any(s for _, s, _ in plan_sizes):
        raise ValueError(f"sizes: none of them runs here ({plan_sizes[0][2]})")
    b2b_unsupported = "" if isinstance(spec, (LocalTest, DpdkFlows)) else \
        f"back-to-back: not supported on {type(spec).__name__} (its generator has no burst of a given count)"
    # the search's own checks, once, at the first size that runs: bounds, resolution
    first = next((f, s) for f, s, _ in plan_sizes if s)
    search_validate(first[1], "zero-loss", high=None if high_r is None else Rate(_pps(high_r, first[0]), "pps"),
                    low=None if low_r is None else Rate(_pps(low_r, first[0]), "pps"), resolution=resolution,
                    max_trials=max_trials, trial=trial_s, settle=settle, retries=retries)
    return Plan(tuple(plan_sizes), tests, trial_s, latency_trial_s, latency_trials, settle, resolution, max_trials,
                retries, high_r, low_r, step, b2b_trials, b2b_trial_s, max_burst, b2b_unsupported)


# --------------------------------------------------------------------------- the result

RESULT_COLUMNS = {   # test -> its frame's columns (name -> polars dtype), one row per frame size
    "throughput": {"size": "Int64", "throughput_fps": "Float64", "throughput_bps": "Float64",
                   "high_fps": "Float64", "resolution_fps": "Float64", "trials": "Int64", "stopped": "String"},
    "latency": {"size": "Int64", "rate_fps": "Float64", "trials": "Int64", "rfc_mean_us": "Float64",
                "p50_us": "Float64", "p90_us": "Float64", "p99_us": "Float64", "p999_us": "Float64",
                "max_us": "Float64", "min_trial_mean_us": "Float64", "max_trial_mean_us": "Float64",
                "lat_count": "Int64"},
    "frame_loss": {"size": "Int64", "percent": "Float64", "offered_fps": "Float64", "sent": "Int64",
                   "received": "Int64", "lost": "Int64", "loss_pct": "Float64"},
    "back_to_back": {"size": "Int64", "repetition": "Int64", "burst_frames": "Int64", "burst_s": "Float64",
                     "trials": "Int64"},
}
TRIAL_COLUMNS = {"test": "String", "size": "Int64", "trial": "Int64", "offered_pps": "Float64", "paced": "Boolean",
                 "burst": "Int64", "sent": "Int64", "received": "Int64", "lost": "Int64", "loss_ratio": "Float64",
                 "tx_pps": "Float64", "rx_pps": "Float64", "lat_mean_us": "Float64", "lat_p99_us": "Float64",
                 "lat_max_us": "Float64", "passed": "Boolean", "counted": "Boolean", "reason": "String"}


def _frame(rows, columns):
    import polars as pl   # polars loads when a frame is first asked for
    schema = {k: getattr(pl, v) for k, v in columns.items()}
    return pl.DataFrame([{k: r.get(k) for k in columns} for r in rows], schema=schema, orient="row") \
        if rows else pl.DataFrame(schema=schema)


@dataclass
class Rfc2544Result:
    """A finished (or stopped) RFC 2544 run: per test a frame with a row per frame size
    (frame_loss: per step; back_to_back: per repetition), every trial, what was skipped."""
    spec: object
    tests: tuple = ()
    rows: dict = field(default_factory=lambda: {t: [] for t in TESTS})
    trial_rows: list = field(default_factory=list)
    done: list = field(default_factory=list)          # [test, size] pairs finished
    skipped: dict = field(default_factory=dict)       # size -> why it did not run
    unsupported: dict = field(default_factory=dict)   # test -> the report's line
    notes: dict = field(default_factory=dict)         # "test:size" -> why it stopped or was not run
    stopped: str = ""
    error: str | None = None
    elapsed_s: float = 0.0
    started_utc: str = ""                             # when its first trial began (a resumed run's too)

    @property
    def env(self) -> dict:
        """What a store lists a result by (perfkit.Store): when it began."""
        return {"started_utc": self.started_utc}

    def is_done(self, test: str, size: int) -> bool:
        return [test, size] in self.done

    def throughput_fps(self, size: int) -> float | None:
        return next((r["throughput_fps"] for r in self.rows["throughput"] if r["size"] == size), None)

    @property
    def throughput(self):
        return _frame(self.rows["throughput"], RESULT_COLUMNS["throughput"])

    @property
    def latency(self):
        return _frame(self.rows["latency"], RESULT_COLUMNS["latency"])

    @property
    def frame_loss(self):
        return _frame(self.rows["frame_loss"], RESULT_COLUMNS["frame_loss"])

    @property
    def back_to_back(self):
        return _frame(self.rows["back_to_back"], RESULT_COLUMNS["back_to_back"])

    @property
    def trials(self):
        return _frame(self.trial_rows, TRIAL_COLUMNS)

    def to_dict(self) -> dict:
        return {"spec": self.spec.to_dict(), "tests": list(self.tests), "rows": self.rows, "done": self.done,
                "skipped": {str(k): v for k, v in self.skipped.items()}, "unsupported": self.unsupported,
                "notes": self.notes, "stopped": self.stopped, "error": self.error, "elapsed_s": self.elapsed_s,
                "started_utc": self.started_utc}

    def text(self) -> str:
        return report_text(self)

    def report(self, path, title: str | None = None) -> str:
        """An HTML report laid out like RFC 2544's reporting section (26): per test its table per
        frame size and its graph (perfkit.ui.html_report; plotly inlined). Returns the path."""
        return write_report(self, path, title=title)

    def save(self, path, extra: dict | None = None) -> str:
        """Every trial as the Parquet table, the results in its metadata, sealed by
        perfkit.savefile's checksum; load() reads it back. extra: more metadata entries (a
        store's name and tags), sealed too."""
        import polars as pl
        frame = self.trials if self.trial_rows else _frame([], TRIAL_COLUMNS)
        spec = json.dumps(self.spec.to_dict()).encode()
        savefile.write(path, frame.with_columns(pl.col("size").cast(pl.Int64)), {
            b"perfkit.spec": spec, b"perfkit.env": json.dumps(self.env).encode(), b"perfkit.histogram": b"[]",
            b"perfkit.summary": json.dumps({"rfc2544": True, "stopped": self.stopped}).encode(),
            b"perfkit.run": json.dumps({"kind": "rfc2544"}).encode(),
            _RESULT_KEY: json.dumps(self.to_dict()).encode(), **(extra or {}),
        })
        return str(path)

    def __repr__(self) -> str:
        tp = ", ".join(f"{r['size']}: {format_si(r['throughput_fps'], 'fps')}" for r in self.rows["throughput"]
                       if r["throughput_fps"] is not None)
        return f"<perfkit.Rfc2544Result {','.join(self.tests)} ({self.stopped or 'going'}){': ' + tp if tp else ''}>"


def load(path) -> Rfc2544Result:
    """An Rfc2544Result back from save(); a file that is not one is a ValueError naming it."""
    frame, raw = savefile.read(path)
    d = savefile.decode(path, raw, _RESULT_KEY) if _RESULT_KEY in raw else None
    if d is None:
        raise savefile.SaveFileError(f"{path}: a perfkit run, not an RFC 2544 result (perfkit.load reads it)")
    try:
        res = Rfc2544Result(spec=from_dict(d["spec"]), tests=tuple(d["tests"]),
                            rows={t: list(d["rows"].get(t, [])) for t in TESTS}, done=[list(x) for x in d["done"]],
                            skipped={int(k): v for k, v in d["skipped"].items()}, unsupported=d["unsupported"],
                            notes=d["notes"], stopped=d["stopped"], error=d["error"], elapsed_s=d["elapsed_s"],
                            started_utc=d.get("started_utc", ""))
    except (KeyError, TypeError, ValueError) as exc:
        raise savefile.SaveFileError(f"{path}: its RFC 2544 entry is damaged ({exc})") from None
    res.trial_rows = frame.to_dicts()
    return res


# --------------------------------------------------------------------------- the run

class _Runner:
    def __init__(self, spec, plan: Plan, res: Rfc2544Result, engine, progress, stop):
        self.spec, self.p, self.res, self.engine, self.progress, self.stop = spec, plan, res, engine, progress, stop

    def emit(self, test, size, row):
        row = {"test": test, "size": size, **row}
        for k, pps in (("offered_bps", "offered_pps"), ("rx_bps", "rx_pps")):   # frame bits, FCS counted
            if row.get(pps) is not None:
                row[k] = row[pps] * 8 * size
        self.res.trial_rows.append({k: row.get(k) for k in TRIAL_COLUMNS})
        if self.progress is not None:
            self.progress(test, size, row)

    def pause(self):
        s = parse_duration(self.p.settle, "settle")
        if self.stop is not None:
            self.stop.wait(s)
            if self.stop.is_set():
                raise Stopped()
        else:
            time.sleep(s)

    def high_pps(self, frame: int) -> float | None:
        if self.p.high is not None:
            return _pps(self.p.high, frame)
        rate = getattr(self.spec, "rate", None)
        return _pps(parse_rate(rate), frame) if rate is not None else None

    def trial(self, spec, pps, trial_s):
        """One trial run, its row judged for zero loss (the RFC's every test counts loss)."""
        row, run = run_trial(spec, pps, trial_s, self.engine, self.stop)
        lost = max(0, int(row["sent"]) - int(row["received"]))   # the RFC's input - output: the tail's losses too
        row["lost"] = lost
        row["loss_ratio"] = lost / row["sent"] if row["sent"] else 0.0
        return row, run

    # ---- the tests

    def throughput(self, frame, spec):
        high = self.high_pps(frame)
        low = None if self.p.low is None else _pps(self.p.low, frame)
        # a stopped run's trials at this size (kept on resume): the search goes on from them
        prior = [r for r in self.res.trial_rows if r["test"] == "throughput" and r["size"] == frame]
        res = search(spec, "zero-loss", high=None if high is None else Rate(high, "pps"),
                     low=None if low is None else Rate(low, "pps"), resolution=self.p.resolution,
                     max_trials=self.p.max_trials, trial=self.p.trial_s, settle=self.p.settle,
                     retries=self.p.retries, engine=self.engine,
                     progress=lambda row: self.emit("throughput", frame, row), stop=self.stop, prior=prior)
        if res.error:
            raise EngineError(res.error)
        if res.stopped in ("interrupted", "stopped"):
            raise KeyboardInterrupt if res.stopped == "interrupted" else Stopped()
        fps = res.found_pps
        self.res.rows["throughput"].append({
            "size": frame, "throughput_fps": fps, "throughput_bps": None if fps is None else fps * 8 * frame,
            "high_fps": res.high_pps, "resolution_fps": res.resolution_pps, "trials": len(res.rows),
            "stopped": res.stopped})

    def latency(self, frame, spec):
        fps = self.res.throughput_fps(frame)
        if fps is None:
            self.res.notes[f"latency:{frame}"] = "no throughput found at this size: nothing to measure at"
            return
        means, hists, n = [], [], 0
        for k in range(self.p.latency_trials):
            if k:
                self.pause()
            row, run = self.trial(spec, fps, self.p.latency_trial_s)
            row.update(trial=k + 1, passed=row["lat_count"] > 0,
                       reason="held" if row["lat_count"] else "no latency samples")
            self.emit("latency", frame, row)
            if row["lat_mean_us"] is not None:
                means.append(row["lat_mean_us"])
            if run.histogram is not None:
                hists.append(run.histogram)
            n += row["lat_count"]
        h = Histogram.merge(hists)
        pct = {f"{k}_us": (None if h.percentile(q) is None else h.percentile(q) / 1e3)
               for k, q in (("p50", .5), ("p90", .9), ("p99", .99), ("p999", .999))}
        self.res.rows["latency"].append({
            "size": frame, "rate_fps": fps, "trials": self.p.latency_trials,
            "rfc_mean_us": statistics.fmean(means) if means else None, **pct,
            "max_us": None if h.max() is None else h.max() / 1e3,
            "min_trial_mean_us": min(means, default=None), "max_trial_mean_us": max(means, default=None),
            "lat_count": n})

    def frame_loss(self, frame, spec):
        high = self.high_pps(frame)
        if high is None:   # no rate given: the most the generator sends is 100%
            row, _ = self.trial(spec, None, self.p.trial_s)
            high = row["tx_pps"]
            row.update(trial=0, passed=True, reason="the upper bound (unpaced)")
            self.emit("frame_loss", frame, row)
            if not high > 0:
                self.res.notes[f"frame_loss:{frame}"] = "the generator sent nothing"
                return
            self.pause()
        clean, k, share = 0, 0, 1.0
        while share > 1e-9 and clean < 2:
            if k:
                self.pause()
            k += 1
            row, _ = self.trial(spec, high * share, self.p.trial_s)
            clean_now = row["lost"] == 0
            row.update(trial=k, passed=clean_now, reason="no loss" if clean_now else f"{row['lost']} lost")
            self.emit("frame_loss", frame, row)
            self.res.rows["frame_loss"].append({
                "size": frame, "percent": round(share * 100, 6), "offered_fps": high * share, "sent": row["sent"],
                "received": row["received"], "lost": row["lost"], "loss_pct": row["loss_ratio"] * 100})
            clean = clean + 1 if row["lost"] == 0 else 0
            share = round(share - self.p.loss_step, 9)
        self.res.notes[f"frame_loss:{frame}"] = ("two trials in a row without loss" if clean >= 2
                                                 else "reached the lowest step")

    def back_to_back(self, frame, spec):
        hi0 = self.p.max_burst
        if hi0 is None:   # the RFC's bound: the trial's length at the upper bound (or a measured one)
            high = self.high_pps(frame)
            if high is None:
                row, _ = self.trial(spec, None, min(self.p.b2b_trial_s, 1.0))
                high = row["tx_pps"]
                self.pause()
            hi0 = max(2, int(high * self.p.b2b_trial_s))
        n = 0
        for rep in range(1, self.p.b2b_trials + 1):
            best, fail, tries, burst_s = 0, hi0 + 1, 0, None
            length = hi0
            while fail - best > max(1, int(best * 0.001)):   # to a frame, or 0.1% of a long burst
                if n:
                    self.pause()
                n += 1
                tries += 1
                row, _ = self.trial(dataclasses.replace(spec, messages=length), None, self.p.b2b_trial_s)
                ok = row["sent"] == length and row["lost"] == 0
                row.update(trial=n, burst=length, passed=ok,
                           reason="no loss" if ok else f"{row['lost']} lost" if row["lost"] else
                           f"sent {row['sent']} of {length}")
                self.emit("back_to_back", frame, row)
                if ok:
                    best, burst_s = length, row["duration_s"]
                else:
                    fail = length
                length = (best + fail) // 2
                if length <= best:
                    break
            self.res.rows["back_to_back"].append({"size": frame, "repetition": rep, "burst_frames": best,
                                                  "burst_s": burst_s, "trials": tries})


def _resumed(res: Rfc2544Result, resume: Rfc2544Result, p: Plan, spec) -> None:
    """Keep what the previous run finished, and the trials of a throughput search it stopped
    in the middle (where they began at this run's upper bound: the search goes on between
    their last bounds); drop the other partial (test, size)s."""
    res.done = [list(x) for x in resume.done]
    keep = {(t, s) for t, s in res.done}
    runner = _Runner(spec, p, res, None, None, None)
    for frame, sp, _ in p.sizes:
        partial = [r for r in resume.trial_rows if r["test"] == "throughput" and r["size"] == frame]
        if (sp is not None and ("throughput", frame) not in keep and partial and
                prior_fits(partial, runner.high_pps(frame))):
            keep.add(("throughput", frame))
    res.rows = {t: [r for r in resume.rows.get(t, []) if (t, r["size"]) in keep and res.is_done(t, r["size"])]
                for t in TESTS}
    res.trial_rows = [r for r in resume.trial_rows if (r["test"], r["size"]) in keep]
    res.notes = {k: v for k, v in resume.notes.items() if res.is_done(k.split(":")[0], int(k.split(":")[1]))}


def rfc2544(spec, sizes=None, tests=TESTS, *, trial="60s", latency_trial=None, latency_trials: int = 20, high=None,
            low=None, resolution="1%", max_trials: int = 16, settle="2s", retries: int = 0, loss_step="10%",
            b2b_trials: int = 50, b2b_trial="2s", max_burst=None, engine: str | None = None,
            resume: Rfc2544Result | None = None,
            progress: Callable[[str, int, dict], None] | None = None,
            stop: threading.Event | None = None) -> Rfc2544Result:
    """RFC 2544's tests on spec at each frame size (see the module doc).

    spec            DpdkFlows (peer port, or mode reverse) or LocalTest("udp_bw"); size, rate
                    and duration are set per trial
    sizes           Ethernet frame bytes, FCS counted (default 64..1518, and 9018 on a DPDK
                    port that takes jumbo frames)
    tests           any of throughput, latency, frame_loss, back_to_back (text: "a,b" or "all")
    trial           each throughput and frame loss trial (RFC: 60 s)
    latency_trial   each latency trial (RFC: 120 s; default: trial); latency_trials (RFC: 20)
    high, low       the search's bounds and frame loss's 100% (pps, or bit/s of frames);
                    default: spec.rate, else measured by an unpaced trial
    resolution, max_trials, settle, retries   the throughput search's (perfkit.search)
    loss_step       frame loss rate's step (RFC: 10%)
    b2b_trials      back-to-back repetitions (RFC: 50), each b2b_trial long (RFC: at least 2 s);
    max_burst       the longest burst tried (default: the upper bound x b2b_trial)
    resume          a previous result: what it finished is kept, the rest runs
    progress        called with (test, size, trial row) after every trial
    stop            an Event: once set, the run ends with what it has (stopped='stopped')

    Ctrl-C ends it early with what is done (stopped='interrupted'); an engine error likewise
    (stopped='error', .error says why)."""
    p = validate(spec, sizes, tests, trial=trial, latency_trial=latency_trial, latency_trials=latency_trials,
                 high=high, low=low, resolution=resolution, max_trials=max_trials, settle=settle, retries=retries,
                 loss_step=loss_step, b2b_trials=b2b_trials, b2b_trial=b2b_trial, max_burst=max_burst)
    res = Rfc2544Result(spec=spec, tests=p.tests, started_utc=(resume.started_utc if resume is not None else "") or
                        datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    if resume is not None:
        _resumed(res, resume, p, spec)
    res.skipped = {f: why for f, s, why in p.sizes if s is None}
    if "back_to_back" in p.tests and p.b2b_unsupported:
        res.unsupported["back_to_back"] = p.b2b_unsupported
    runner = _Runner(spec, p, res, engine, progress, stop)
    t0 = time.monotonic()
    try:
        for test in p.tests:
            if test in res.unsupported:
                continue
            for frame, sp, _ in p.sizes:
                if sp is None or res.is_done(test, frame):
                    continue
                if test == "latency" and not res.is_done("throughput", frame):
                    res.notes[f"latency:{frame}"] = "needs the throughput at this size (tests: throughput,latency)"
                    continue
                if res.trial_rows:
                    runner.pause()
                getattr(runner, test)(frame, sp)
                res.done.append([test, frame])
        res.stopped = "done"
    except (KeyboardInterrupt, Stopped) as exc:
        res.stopped = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped"
    except EngineError as exc:
        res.stopped, res.error = "error", str(exc)
    finally:
        res.elapsed_s = (resume.elapsed_s if resume is not None else 0.0) + time.monotonic() - t0
    return res


# --------------------------------------------------------------------------- the report

def _f(v, unit="", digits=4):
    if v is None:
        return "-"
    return format_si(v, unit) if unit else f"{v:.{digits}g}"


def _table(head, rows) -> list[str]:
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(str(c).rjust(w[i]) for i, c in enumerate(cells))   # noqa: E731
    return ["    " + line(head), "    " + "  ".join("-" * x for x in w), *("    " + line(r) for r in rows)]


def report_text(res: Rfc2544Result) -> str:
    """The results laid out like RFC 2544's reporting (section 26): a table per test."""
    sp = res.spec
    what = (f"DpdkFlows {sp.port} -> {sp.peer or sp.peer_ip} ({sp.mode}) on the dpdk engine"
            if isinstance(sp, DpdkFlows) else
            f"LocalTest udp_bw {'lab ' + sp.lab + ' (h1 -> h2)' if sp.lab else sp.host} on the socket engine")
    if getattr(sp, "bidirectional", False):
        what += ", bidirectional (each direction at the rate shown; sent and received count both)"
    out = [f"RFC 2544: {what}; frame sizes are Ethernet frames, FCS counted ({res.stopped}, {res.elapsed_s:.1f} s)"]
    for f, why in sorted(res.skipped.items()):
        out.append(f"    {f} B frames: skipped: {why}")
    if "throughput" in res.tests:
        out += ["", "Throughput (26.1): highest rate with no frame lost"]
        rows = [(r["size"], _f(r["throughput_fps"], "fps"), _f(r["throughput_bps"], "bit/s"),
                 _f(r["high_fps"], "fps"), _f(r["resolution_fps"], "fps"), r["trials"], r["stopped"])
                for r in res.rows["throughput"]]
        out += _table(("frame B", "throughput", "bit rate", "upper bound", "resolution", "trials", "stopped"),
                      rows) if rows else ["    (no size finished)"]
    if "latency" in res.tests:
        out += ["", "Latency (26.2): at the throughput rate; RFC mean of the trials, perfkit's percentiles over "
                    "every frame (one way; DPDK reverse: round trip)"]
        rows = [(r["size"], _f(r["rate_fps"], "fps"), r["trials"], _f(r["rfc_mean_us"]), _f(r["p50_us"]),
                 _f(r["p99_us"]), _f(r["p999_us"]), _f(r["max_us"])) for r in res.rows["latency"]]
        out += _table(("frame B", "rate", "trials", "mean us", "p50 us", "p99 us", "p99.9 us", "max us"),
                      rows) if rows else ["    (no size finished)"]
    if "frame_loss" in res.tests:
        out += ["", "Frame loss rate (26.3): ((sent - received) x 100) / sent, from 100% of the upper bound down"]
        rows = [(r["size"], f"{r['percent']:g}%", _f(r["offered_fps"], "fps"), r["sent"], r["received"],
                 f"{r['loss_pct']:.4g}%") for r in res.rows["frame_loss"]]
        out += _table(("frame B", "rate", "offered", "sent", "received", "loss"), rows) if rows else \
            ["    (no size finished)"]
    if "back_to_back" in res.tests:
        out += ["", "Back-to-back frames (26.4): longest burst at full speed with no loss"]
        if "back_to_back" in res.unsupported:
            out.append(f"    {res.unsupported['back_to_back']}")
        else:
            by = {}
            for r in res.rows["back_to_back"]:
                by.setdefault(r["size"], []).append(r["burst_frames"])
            rows = [(f, len(v), f"{statistics.fmean(v):.1f}", min(v), max(v),
                     f"{statistics.pstdev(v):.1f}") for f, v in by.items()]
            out += _table(("frame B", "repetitions", "mean frames", "min", "max", "std dev"), rows) if rows else \
                ["    (no size finished)"]
    for k, v in res.notes.items():
        if not v.startswith("two trials"):
            out.append(f"    note: {k.replace(':', ' at ')} B: {v}")
    if res.error:
        out.append(f"    error: {res.error}")
    return "\n".join(out)


def progress_line(test: str, size: int, row: dict) -> str:
    """One trial as the CLI prints it: the test and frame size, then search's trial line."""
    if test == "back_to_back":
        return (f"{test:<12} {size:>5} B: burst {row['burst']:>9}  sent {row['sent']:>9}  "
                f"received {row['received']:>9}  "
                f"{'pass' if row['passed'] else 'FAIL'} ({row['reason']})")
    row = {"counted": True, "cpu_pct_max_worker": 0.0, **row}
    return f"{test:<12} {size:>5} B: " + trial_line(row).split("  cpu ")[0] + \
        f"  {'pass' if row['passed'] else 'FAIL'}" + ("" if row["passed"] else f" ({row['reason']})")
