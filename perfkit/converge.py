"""BiTester's rate convergence on a running load: every interval, judge the last row against a
criterion and bisect the rate between bounds with run.set_rate; after convergence keep
watching and re-converge when the load no longer holds (or, for cpu, has room to spare).

    run = perfkit.Run(DpdkFlows(..., rate="10kpps", duration="30s"), interval=0.5)
    conv = Converge(lo="10kpps", hi="1Mpps", criterion="keeps-up").attach(run.start())
    run.wait(); run.summary["converged_pps"], conv.trajectory

Unlike perfkit.ratesearch (one trial per rate, each a run of its own), this retunes one run.
Criteria: keeps-up (sent, and with a peer port here received, at least (1 - tolerance) of the
target, nothing lost), zero-loss
(nothing lost), cpu (every generator's busy time under cpu_pct of its wall time: BiTester's
95%), or a threshold on the row as perfkit.thresholds writes it ('loss<0.1%', 'p99<200us': the
interval's loss (where both ends are counted here, what was sent and not received in it) or
latency percentile holds the bound, and the sender sent at least (1 - tolerance) of the target). The frame's rate_target column is the trajectory; the summary
gets converged_pps and how stable the rate was after it.
"""
from __future__ import annotations

from perfkit import thresholds
from perfkit.units import parse_rate

CRITERIA = ("keeps-up", "zero-loss", "cpu")
# the thresholds a row can be judged on (its interval's figures, the summary's keys)
ROW_METRICS = ("loss", "mean", "p50", "p90", "p99", "p999", "max")


def parse_criterion(text):
    """One of CRITERIA, or a perfkit.thresholds.Threshold on a ROW_METRICS metric; ValueError
    (one line, 'criterion: ...') otherwise."""
    if isinstance(text, thresholds.Threshold) or (isinstance(text, str) and text.strip() not in CRITERIA and
                                                  any(op in text for op in "<>")):
        try:
            t = thresholds.parse(text)
        except ValueError as exc:
            raise ValueError(f"criterion: {str(exc).removeprefix('threshold: ')}") from None
        if t.metric not in ROW_METRICS:
            raise ValueError(f"criterion: {t.text!r}: a live criterion judges each interval's "
                             f"{', '.join(ROW_METRICS)}, not {t.metric}")
        return t
    if not isinstance(text, str) or text.strip() not in CRITERIA:
        raise ValueError(f"criterion: {text!r} is not one of {', '.join(CRITERIA)}, "
                         "or a threshold as 'loss<0.1%' or 'p99<200us'")
    return text.strip()


class Converge:
    """A row subscriber that steers run's rate (pps) between lo and hi by bisection.

    resolution  converged when hi - lo is at most this share of hi
    tolerance   keeps-up: the share of the target a row may fall short by
    cpu_pct     cpu: the busiest generator's limit, in percent
    skip        rows left out after each change (the row a change fell in mixes two rates)
    patience    converged: re-converge after this many judged rows in a row that fail (one
                late row on a busy machine is not a drift)
    Rows past the spec's duration (the generators stopping) are not judged.
    """

    def __init__(self, lo, hi, criterion: str = "keeps-up", resolution: float = 0.05,
                 tolerance: float = 0.05, cpu_pct: float = 95.0, skip: int = 1, patience: int = 2):
        self.lo_bound, self.hi_bound = (_pps(lo, "lo"), _pps(hi, "hi"))
        if not 0 < self.lo_bound < self.hi_bound:
            raise ValueError(f"hi: {hi!r} must be above lo ({lo!r}), both above 0")
        criterion = parse_criterion(criterion)
        for name, v, top in (("resolution", resolution, 0.5), ("tolerance", tolerance, 0.5),
                             ("cpu_pct", cpu_pct, 100.0)):
            if not 0 < float(v) <= top:
                raise ValueError(f"{name}: {v!r} is out of range (above 0, at most {top:g})")
        for name, v, low in (("skip", skip, 0), ("patience", patience, 1)):
            if int(v) != v or not low <= v <= 10:
                raise ValueError(f"{name}: {v!r} is not a whole number of rows in {low}..10")
        self.criterion, self.resolution, self.tolerance = criterion, float(resolution), float(tolerance)
        self.cpu_pct, self.skip, self.patience = float(cpu_pct), int(skip), int(patience)
        self._failed = 0       # judged rows in a row that failed since convergence
        self.lo, self.hi = self.lo_bound, self.hi_bound
        self.rate = (self.lo + self.hi) / 2
        self.converged: float | None = None
        self.converged_at: float | None = None
        self.reconverged = 0
        self.trajectory: list[dict] = []   # per judged row: time_s, rate, held, lo, hi
        self._wait = 0
        self._run = None
        self._gens: list[int] = []
        self._receives = False

    def attach(self, run) -> "Converge":
        """Steer a started run (its kind takes set_rate: DPDK flows): its first rate now."""
        self._run = run
        self._gens = [i for i, r in enumerate(run.roles) if r in ("dpdk_send", "udp_send", "remote_udp_send")]
        # a peer port here, or a socket test's receiving end (local or the server's): rx is counted too
        self._receives = getattr(run.spec, "peer", None) is not None or getattr(run.spec, "test", None) == "udp_bw"
        run.set_rate(self.rate)
        self._wait = self.skip
        run.subscribe(self)
        return self

    def held(self, row: dict) -> bool:
        """Does the load hold the criterion in this row?"""
        lost = row.get("seq_lost_per_s") or 0
        least = (1 - self.tolerance) * (row.get("rate_target") or self.rate)
        if isinstance(self.criterion, thresholds.Threshold):   # and a sender short of its target is no pass
            return bool(self.criterion.check(self._judged(row)).passed) and row.get("pkts_tx_per_s", 0) >= least
        if self.criterion == "zero-loss":
            return lost == 0
        if self.criterion == "cpu":
            busiest = max((row.get(f"cpu_pct_w{i}") or 0.0 for i in self._gens), default=0.0)
            return busiest < self.cpu_pct
        # where this run receives too, the far end must keep up as well: a queue filling up
        # lets the sender run ahead of a slow receiver for a while
        return (lost == 0 and row.get("pkts_tx_per_s", 0) >= least and
                (not self._receives or row.get("pkts_rx_per_s", 0) >= least))

    def _judged(self, row: dict) -> dict:
        """The row a threshold reads. loss where both ends are counted here: the interval's shortfall,
        100 x (1 - received / sent), not loss_pct, whose sequence window counts a gap lost only once
        4096 later packets have passed it (seconds late at a few kpps, and still counting after)."""
        tx = row.get("pkts_tx_per_s") or 0
        if self.criterion.metric != "loss" or not self._receives or tx <= 0:
            return row
        return {**row, "loss_pct": max(0.0, 100.0 * (1 - (row.get("pkts_rx_per_s") or 0) / tx))}

    def __call__(self, row: dict) -> None:
        run = self._run
        if run.summary is not None:   # the final row: the run's results are in
            run.summary.update(self.result())
            return
        if self._wait > 0:
            self._wait -= 1
            return
        if row["time_s"] > getattr(run.spec, "duration", float("inf")):   # the generators stop: not a rate
            return
        ok = self.held(row)
        self.trajectory.append({"time_s": row["time_s"], "rate": self.rate, "held": ok, "lo": self.lo, "hi": self.hi})
        if self.converged is not None:
            self._watch(ok, row)
        elif ok:
            self.lo = self.rate
        else:
            self.hi = self.rate
        if self.converged is None and self.hi - self.lo <= self.resolution * self.hi:
            self.converged, self.converged_at = self.lo, row["time_s"]
            self._set(self.lo)
        elif self.converged is None:
            self._set((self.lo + self.hi) / 2)

    def _watch(self, ok: bool, row: dict) -> None:
        """Converged: a load that no longer holds searches down again from here (the lower
        bound widened to lo_bound); cpu with room to spare searches up to hi_bound."""
        roomy = (self.criterion == "cpu" and ok and self.rate < self.hi_bound * (1 - self.resolution) and
                 max((row.get(f"cpu_pct_w{i}") or 0.0 for i in self._gens), default=0.0)
                 < self.cpu_pct * (1 - 4 * self.resolution))
        self._failed = 0 if ok else self._failed + 1
        if (ok and not roomy) or 0 < self._failed < self.patience:
            return
        self._failed = 0
        self.reconverged += 1
        self.converged = None
        self.lo, self.hi = (self.rate, self.hi_bound) if ok else (self.lo_bound, self.rate)

    def _set(self, rate: float) -> None:
        self.rate = rate
        self._run.set_rate(rate)
        self._wait = self.skip

    @property
    def criterion_text(self) -> str:
        return self.criterion.text if isinstance(self.criterion, thresholds.Threshold) else self.criterion

    def result(self) -> dict:
        """converged_pps (None: it never converged), when, how often it re-converged, and the
        rate's spread after convergence (max - min over the mean, percent)."""
        after = [t["rate"] for t in self.trajectory if self.converged_at is not None and t["time_s"] >= self.converged_at]
        spread = 100.0 * (max(after) - min(after)) / (sum(after) / len(after)) if after else None
        return {"converged_pps": self.converged, "converge_criterion": self.criterion_text,
                "converged_at_s": self.converged_at,
                "reconverged": self.reconverged, "converge_steps": len(self.trajectory),
                "converged_spread_pct": spread}


def _pps(value, field: str) -> float:
    r = parse_rate(value, field)
    if r.unit != "pps" or not r.value > 0:
        raise ValueError(f"{field}: {value!r}: a rate in packets per second above 0 (10kpps, 1Mpps)")
    return r.value
