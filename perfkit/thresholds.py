"""Thresholds (k6's): pass/fail conditions on a run's summary, for CI.

    perfkit http URL --threshold 'error_rate<1%' --threshold 'p99<200ms' --threshold 'tps>5000'
    run = perfkit.run(spec, thresholds=["p99<200ms"]); run.passed; run.thresholds

A threshold is METRIC OP VALUE: OP one of < <= > >=; VALUE a percentage for rates
(error_rate<1%), a time with its unit for latencies (p99<200ms), a number for counts
and per-second rates (tps>5k). Parsed once here; a bad one is one ValueError line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# metric -> (the summary key it reads, its kind, what it is); kinds say how VALUE is written
METRICS: dict[str, tuple[str, str, str]] = {
    "error_rate": ("error_rate_pct", "pct", "requests failed or unanswered (cut off included), % of those sent"),
    "tps": ("tps", "rate", "responses per second"),
    "rps": ("tps", "rate", "responses per second (tps)"),
    "mean": ("lat_mean_us", "time", "mean response time (nGrinder's mean test time)"),
    "p50": ("lat_p50_us", "time", "median response time"),
    "p90": ("lat_p90_us", "time", "90th percentile response time"),
    "p99": ("lat_p99_us", "time", "99th percentile response time"),
    "p999": ("lat_p999_us", "time", "99.9th percentile response time"),
    "max": ("lat_max_us", "time", "highest response time"),
    "requests": ("requests", "count", "requests sent"),
    "responses": ("responses", "count", "responses received whole"),
    "errors": ("http_err", "count", "requests failed (4xx, 5xx, no response)"),
    "cut": ("http_cut", "count", "requests cut off by the stop"),
    "loss": ("loss_pct", "pct", "packets lost, % of those expected"),
    "rx_pps": ("rx_pps", "rate", "packets received per second"),
    "cpu": ("cpu_pct", "pct", "engine CPU use, % of one core"),
}
OPS = {"<": lambda v, b: v < b, "<=": lambda v, b: v <= b, ">": lambda v, b: v > b, ">=": lambda v, b: v >= b}
_TIME_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
_EXPR = re.compile(r"\s*([a-z_0-9]+)\s*(<=|>=|<|>)\s*(\S+?)\s*")
_NUM = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?"


def _fmt(kind: str, value: float) -> str:
    if kind == "pct":
        return f"{value:.3g}%"
    if kind == "time":
        return f"{value / 1e3:.3g} ms" if value >= 1e3 else f"{value:.3g} µs"
    return f"{value:,.6g}"


@dataclass(frozen=True)
class Threshold:
    """One parsed threshold: the summary key it reads, the comparison and its bound (in that key's unit)."""
    text: str
    metric: str
    op: str
    bound: float

    @property
    def key(self) -> str:
        return METRICS[self.metric][0]

    def check(self, summary: dict | None) -> "Check":
        value = (summary or {}).get(self.key)
        if value is None:   # no responses, no latency: nothing meets a bound
            return Check(self, None, False if summary is not None else None)
        return Check(self, float(value), OPS[self.op](float(value), self.bound))


@dataclass(frozen=True)
class Check:
    """A threshold against one summary: the value read and whether it passed (None: no summary yet)."""
    threshold: Threshold
    value: float | None
    passed: bool | None

    @property
    def text(self) -> str:
        return self.threshold.text

    def line(self) -> str:
        """One printed line: pass/FAIL, the threshold, the value measured."""
        t = self.threshold
        kind = METRICS[t.metric][1]
        got = "no value (nothing measured)" if self.value is None else _fmt(kind, self.value)
        word = "pending" if self.passed is None else "pass" if self.passed else "FAIL"
        return f"threshold {word:<4}  {t.text:<20} {t.metric} = {got}"

    def to_dict(self) -> dict:
        return {"threshold": self.text, "metric": self.threshold.metric, "value": self.value, "passed": self.passed}


def parse(text) -> Threshold:
    """A Threshold from 'METRIC OP VALUE'; ValueError (one line) naming what is wrong."""
    if isinstance(text, Threshold):
        return text
    m = _EXPR.fullmatch(str(text))
    if not m:
        raise ValueError(f"threshold: {text!r} is not METRIC<VALUE or METRIC>VALUE (e.g. 'p99<200ms', "
                         "'error_rate<1%', 'tps>5000')")
    metric, op, raw = m.groups()
    if metric not in METRICS:
        raise ValueError(f"threshold: {text!r}: unknown metric {metric!r} (one of {', '.join(METRICS)})")
    kind = METRICS[metric][1]
    if kind == "pct":
        v = re.fullmatch(_NUM + "%", raw)
        if not v:
            raise ValueError(f"threshold: {text!r}: {metric} takes a percentage, not {raw!r} (e.g. {metric}<1%)")
        bound = float(raw[:-1])
    elif kind == "time":
        v = re.fullmatch(_NUM + "(ns|us|µs|ms|s)", raw)
        if not v:
            raise ValueError(f"threshold: {text!r}: {metric} takes a time with its unit (ns us ms s), not {raw!r} "
                             f"(e.g. {metric}<200ms)")
        bound = float(raw[:-len(v.group(2))]) * _TIME_US[v.group(2)]
    else:
        v = re.fullmatch(_NUM + "([kMG]?)(?:/s)?", raw)
        if not v:
            raise ValueError(f"threshold: {text!r}: {metric} takes a number, not {raw!r} (e.g. {metric}>5000, {metric}>5k)")
        bound = float(raw.removesuffix("/s").rstrip("kMG")) * _SI[v.group(2)]
    return Threshold(text=f"{metric}{op}{raw}", metric=metric, op=op, bound=bound)


def parse_all(texts) -> tuple[Threshold, ...]:
    """Every threshold of texts (one string or several), each parsed once."""
    if texts is None:
        return ()
    if isinstance(texts, (str, Threshold)):
        texts = [texts]
    return tuple(parse(t) for t in texts)


def check_all(thresholds, summary: dict | None) -> list[Check]:
    return [t.check(summary) for t in thresholds]


def passed(checks) -> bool | None:
    """True when every check passed (no thresholds: True); None before a summary exists."""
    if any(c.passed is None for c in checks):
        return None
    return all(c.passed for c in checks)
