"""Counters, rows and summaries: everything derived from the C counter list.

The schema comes from perfkit._counters, which reads the X-macro list in
native/include/perfkit/counters.h: there is no second list here.

A *row* is one sampling interval: for every counter its total so far (the
counter's own name) and, for monotonic counters, its rate (`<name>_per_s`),
plus latency percentiles, loss and the engine's CPU use derived from them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from perfkit import _counters

# The whole-run figures a listing and a comparison show, in this order.
KEY_FIGURES = ("rx_pps", "rx_bps", "msg_rate", "loss_pct", "latency_us", "lat_p50_us", "lat_p99_us",
               "lat_max_us", "jitter_us", "cpu_pct",
               # HTTP load (nGrinder's terms): responses/s, mean response time, error rate, users
               "tps", "lat_mean_us", "error_rate_pct", "vusers")
# What a comparison of HTTP runs shows by default, in this order.
HTTP_KEY_FIGURES = ("tps", "lat_mean_us", "lat_p50_us", "lat_p99_us", "lat_max_us", "error_rate_pct", "vusers",
                    "rx_bps", "cpu_pct")
# Where a smaller figure is the better one (for reading ratios).
LOWER_IS_BETTER = {"loss_pct", "latency_us", "lat_p50_us", "lat_p99_us", "lat_max_us", "jitter_us",
                   "cpu_pct", "lat_mean_us", "error_rate_pct"}


@dataclass(frozen=True)
class Counter:
    name: str
    kind: str   # sum | gauge | min | max
    unit: str
    group: str  # traffic, tcp, sock, http, nic, seq, latency, cpu, probe: who writes it
    label: str


COUNTERS: tuple[Counter, ...] = tuple(Counter(*c) for c in _counters.counter_table())
COUNTER_NAMES: tuple[str, ...] = tuple(c.name for c in COUNTERS)
INDEX = {name: i for i, name in enumerate(COUNTER_NAMES)}
# The counter groups, in list order; an engine declares which of them it writes.
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(c.group for c in COUNTERS))
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99, "p999": 0.999}

# Derived columns, with their labels, in row order after the counters.
DERIVED = {
    "bits_tx_per_s": "payload bits sent per second",
    "bits_rx_per_s": "payload bits received per second",
    "loss_pct": "packets lost in this interval, % of those expected",
    "lat_mean_us": "mean latency in this interval",
    **{f"lat_{p}_us": f"{p} latency in this interval" for p in PERCENTILES},
    "lat_max_us": "highest latency in this interval (histogram bucket)",
    "jitter_us": "mean |latency - previous latency| in this interval",
    "cpu_pct": "engine CPU use, % of one core (all workers)",
    "rtt_mean_us": "mean first-packet RTT in this interval (DPDK TCP: SYN -> SYN-ACK)",
}


# Every row column and what it shows: a counter's label and unit, its rate's, a derived one's.
LABELS: dict[str, str] = {"time_s": "time since the start", "interval_s": "length of this interval"}
UNITS: dict[str, str] = {"time_s": "s", "interval_s": "s"}
for _c in COUNTERS:
    LABELS[_c.name], UNITS[_c.name] = _c.label, _c.unit
    if _c.kind == "sum":
        LABELS[f"{_c.name}_per_s"], UNITS[f"{_c.name}_per_s"] = f"{_c.label}/s", f"{_c.unit}/s"
LABELS.update(DERIVED)
UNITS.update({"bits_tx_per_s": "bit/s", "bits_rx_per_s": "bit/s", "loss_pct": "%", "cpu_pct": "%",
              **{k: "µs" for k in DERIVED if k.endswith("_us")}})
del _c


def label_of(column: str) -> str | None:
    """What a row column shows, from the counter list (cpu_pct_wN: one worker's CPU)."""
    if column.startswith("cpu_pct_w"):
        return f"worker {column[len('cpu_pct_w'):]} CPU use, % of one core"
    return LABELS.get(column)


def unit_of(column: str) -> str | None:
    return "%" if column.startswith("cpu_pct_w") else UNITS.get(column)


class Histogram:
    """Latency histogram in the engine's log-linear buckets (nanoseconds)."""

    LOWER: tuple[int, ...] = tuple(_counters.hist_lower_bounds())

    def __init__(self, counts=None):
        self.counts = list(counts) if counts is not None else [0] * len(self.LOWER)
        if len(self.counts) != len(self.LOWER):
            raise ValueError(f"histogram: {len(self.counts)} buckets, expected {len(self.LOWER)}")

    @classmethod
    def merge(cls, many) -> "Histogram":
        out = [0] * len(cls.LOWER)
        for h in many:
            if isinstance(h, Histogram):  # Histograms or plain per-bucket counts
                h = h.counts
            for i, c in enumerate(h):
                if c:
                    out[i] += c
        return cls(out)

    def __sub__(self, other: "Histogram") -> "Histogram":
        return Histogram([a - b for a, b in zip(self.counts, other.counts)])

    @property
    def count(self) -> int:
        return sum(self.counts)

    def upper(self, i: int) -> int:
        return self.LOWER[i + 1] if i + 1 < len(self.LOWER) else self.LOWER[i] * 2

    def percentile(self, q: float) -> float | None:
        """Value (ns) at quantile q (0..1): the middle of the bucket holding it."""
        total = self.count
        if total == 0:
            return None
        rank = max(1, math.ceil(q * total - 1e-9))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                return (self.LOWER[i] + self.upper(i) - 1) / 2
        return None

    def max(self) -> float | None:
        for i in range(len(self.counts) - 1, -1, -1):
            if self.counts[i]:
                return float(self.upper(i) - 1)
        return None

    def nonzero(self) -> list[tuple[int, int]]:
        return [(i, c) for i, c in enumerate(self.counts) if c]

    @classmethod
    def from_nonzero(cls, pairs) -> "Histogram":
        h = cls()
        for i, c in pairs:
            h.counts[int(i)] = int(c)
        return h

    def frame(self):
        """The non-empty buckets as a polars DataFrame (lower_ns, upper_ns, count)."""
        import polars as pl  # polars loads with the first frame, not with perfkit
        nz = self.nonzero()
        return pl.DataFrame({"lower_ns": [self.LOWER[i] for i, _ in nz],
                             "upper_ns": [self.upper(i) for i, _ in nz],
                             "count": [c for _, c in nz]},
                            schema={"lower_ns": pl.Int64, "upper_ns": pl.Int64, "count": pl.Int64})


def merge_counters(per_worker) -> list[int]:
    """Combine worker counter blocks by each counter's kind."""
    out = [0] * len(COUNTERS)
    for block in per_worker:
        for i, c in enumerate(COUNTERS):
            v = block[i]
            if c.kind == "min":
                if v and (out[i] == 0 or v < out[i]):
                    out[i] = v
            elif c.kind == "max":
                out[i] = max(out[i], v)
            else:
                out[i] += v
    return out


def _us(ns):
    return None if ns is None else ns / 1000.0


def latency_fields(hist: Histogram, lat_count: int, lat_sum_ns: int, jitter_sum_ns: int,
                   lo_ns: int = 0, hi_ns: int = 0) -> dict:
    """mean/p50/p90/p99/p999/max and jitter, in microseconds; None where no samples.
    Percentiles are clamped to the exact min/max when those are known."""
    out = {"lat_mean_us": _us(lat_sum_ns / lat_count) if lat_count else None}
    for name, q in PERCENTILES.items():
        v = hist.percentile(q)
        if v is not None and hi_ns:
            v = min(max(v, lo_ns), hi_ns)
        out[f"lat_{name}_us"] = _us(v)
    mx = hi_ns or hist.max()
    out["lat_max_us"] = _us(mx) if lat_count else None
    out["jitter_us"] = _us(jitter_sum_ns / (lat_count - 1)) if lat_count > 1 else None
    return out


def loss_pct(received: int, dup: int, lost: int) -> float | None:
    expected = received - dup + lost
    return 100.0 * lost / expected if expected > 0 else None


def covered_s(dt: float, prev_workers, cur_workers) -> float:
    """The time the cpu counters' change covers: workers publish them now and then with their
    own wall time, so a worker that published late puts more than dt of them in a row; the
    workers' mean wall advance (dt when none advanced: nothing published)."""
    wall = INDEX["cpu_wall_ns"]
    moved = [c[wall] - p[wall] for p, c in zip(prev_workers, cur_workers) if c[wall] > p[wall]]
    return sum(moved) / len(moved) / 1e9 if moved else dt


def make_row(t: float, dt: float, prev: list[int], cur: list[int], prev_hist: Histogram,
             cur_hist: Histogram, prev_workers, cur_workers) -> dict:
    """One row from two snapshots taken dt seconds apart. Each rate is over the interval
    its counters cover: dt, or for the cpu counters the workers' own wall advance."""
    row: dict = {"time_s": round(t, 6), "interval_s": round(dt, 6)}
    delta = [c - p for c, p in zip(cur, prev)]
    cpu_dt = covered_s(dt, prev_workers, cur_workers)
    for i, c in enumerate(COUNTERS):
        row[c.name] = cur[i]
        if c.kind == "sum":
            span = cpu_dt if c.group == "cpu" else dt
            row[f"{c.name}_per_s"] = delta[i] / span if span > 0 else 0.0
    d = dict(zip(COUNTER_NAMES, delta))
    row["bits_tx_per_s"] = row["bytes_tx_per_s"] * 8
    row["bits_rx_per_s"] = row["bytes_rx_per_s"] * 8
    row["loss_pct"] = loss_pct(d["pkts_rx"], d["seq_dup"], d["seq_lost"])
    interval_hist = cur_hist - prev_hist
    row.update(latency_fields(interval_hist, d["lat_count"], d["lat_sum_ns"], d["jitter_sum_ns"]))
    # each worker's busy time over its own wall time: workers add to both now and then, so
    # over a short interval (the last row's) busy / dt would count time from before it
    busy, wall = INDEX["cpu_busy_ns"], INDEX["cpu_wall_ns"]
    per_worker = [100.0 * (c[busy] - p[busy]) / (c[wall] - p[wall]) if c[wall] > p[wall] else 0.0
                  for p, c in zip(prev_workers, cur_workers)]
    row["cpu_pct"] = sum(per_worker)
    row["rtt_mean_us"] = d["rtt_sum_ns"] / d["rtt_count"] / 1e3 if d["rtt_count"] else None
    for w, pct in enumerate(per_worker):
        row[f"cpu_pct_w{w}"] = pct
    return row


def _counter_columns(c: Counter) -> tuple[str, ...]:
    return (c.name, f"{c.name}_per_s") if c.kind == "sum" else (c.name,)


def dropped_columns(groups) -> frozenset[str]:
    """The counter columns (totals and rates) of the groups not in `groups`
    (None: every group, nothing dropped)."""
    if groups is None:
        return frozenset()
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise ValueError(f"counter groups: {', '.join(sorted(unknown))} not in {', '.join(GROUPS)}")
    return frozenset(col for c in COUNTERS if c.group not in groups for col in _counter_columns(c))


def keep_groups(row: dict, groups) -> dict:
    """row without the counter columns of the groups not in `groups`."""
    drop = dropped_columns(groups)
    return {k: v for k, v in row.items() if k not in drop} if drop else row


def value(rows, column: str):
    """A column that may be absent (an engine that does not write its group) as 0:
    a row dict's value, or a frame's column as a Series of zeros the frame's length."""
    if isinstance(rows, dict):
        v = rows.get(column)
        return 0 if v is None and column not in rows else v
    if column in rows.columns:
        return rows[column]
    import polars as pl
    return pl.Series(column, [0] * len(rows), dtype=pl.Int64 if column in INDEX else pl.Float64)


def row_schema(nworkers: int, groups=None) -> dict:
    """polars dtypes of a row, in column order: the counters of `groups` (None: all)."""
    import polars as pl
    schema = {"time_s": pl.Float64, "interval_s": pl.Float64}
    for c in COUNTERS:
        if groups is not None and c.group not in groups:
            continue
        schema[c.name] = pl.Int64
        if c.kind == "sum":
            schema[f"{c.name}_per_s"] = pl.Float64
    for name in DERIVED:
        schema[name] = pl.Float64
    for w in range(nworkers):
        schema[f"cpu_pct_w{w}"] = pl.Float64
    return schema


def end_fields(workers: list[list[int]], roles: list[str]) -> dict:
    """qperf's figures for each end of a test with a far end (loc_: this host's workers,
    rem_: the server's): CPU use in % of one core and its user/kernel split (the kernel
    part takes in the softirq work done on the thread's time: qperf's cpus_intr is
    machine-wide, a thread has none of its own), the time and CPU time, what each end
    sent and received, and which end sent (a bandwidth test's sender)."""
    busy, user, wall = INDEX["cpu_busy_ns"], INDEX["cpu_user_ns"], INDEX["cpu_wall_ns"]
    out: dict = {}
    for end, remote in (("loc", False), ("rem", True)):
        mine = [(w, r) for w, r in zip(workers, roles) if r.startswith("remote_") == remote]
        used = sum(100.0 * w[busy] / w[wall] for w, _ in mine if w[wall])
        in_user = sum(100.0 * min(w[user], w[busy]) / w[wall] for w, _ in mine if w[wall])
        out[f"{end}_cpus_used"] = used
        out[f"{end}_cpus_user"] = in_user
        out[f"{end}_cpus_kernel"] = used - in_user
        out[f"{end}_real_time_s"] = max((w[wall] for w, _ in mine), default=0) / 1e9
        out[f"{end}_cpu_time_s"] = sum(w[busy] for w, _ in mine) / 1e9
        for name, counter in (("send_bytes", "bytes_tx"), ("send_msgs", "pkts_tx"),
                              ("recv_bytes", "bytes_rx"), ("recv_msgs", "pkts_rx")):
            out[f"{end}_{name}"] = sum(w[INDEX[counter]] for w, _ in mine)
        if any(r.endswith("_send") for _, r in mine):
            out["sender"] = end
    return out


def summarize(test: str, totals: list[int], hist: Histogram, workers: list[list[int]],
              roles: list[str], size: int, figures=None) -> dict:
    """Whole-run figures: rates over the senders' active time, loss, latency, CPU.
    figures(totals by counter name, the summary so far) -> dict: a kind's own figures
    (perfkit.kinds.summary_figures), placed after the latency ones."""
    t = dict(zip(COUNTER_NAMES, totals))
    wall = INDEX["cpu_wall_ns"]
    busy = INDEX["cpu_busy_ns"]
    senders = [w for w, r in zip(workers, roles) if r.endswith(("_send", "_ping", "_client"))]
    active_s = max((w[wall] for w in senders), default=0) / 1e9
    per_s = (lambda n: n / active_s) if active_s > 0 else (lambda n: 0.0)
    out = {
        "test": test,
        "size": size,
        "duration_s": active_s,
        "pkts_tx": t["pkts_tx"], "pkts_rx": t["pkts_rx"],
        # what the sending (pinging) ends sent: a latency test's far end sends too
        "msgs_sent": sum(w[INDEX["pkts_tx"]] for w in senders),
        "bytes_tx": t["bytes_tx"], "bytes_rx": t["bytes_rx"], "bytes_read": t["bytes_read"],
        "drop_tx": t["drop_tx"], "lost": t["seq_lost"], "dup": t["seq_dup"],
        "reorder": t["seq_reorder"],
        "loss_pct": loss_pct(t["pkts_rx"], t["seq_dup"], t["seq_lost"]),
        "tx_pps": per_s(t["pkts_tx"]), "rx_pps": per_s(t["pkts_rx"]),
        "tx_bps": per_s(8 * t["bytes_tx"]), "rx_bps": per_s(8 * t["bytes_rx"]),
        # messages/s as qperf counts them: received by the far end, or, in a latency
        # test, both directions (two messages per round trip)
        "msg_rate": per_s(2 * t["lat_count"] if test.endswith("_lat") else t["pkts_rx"]),
        "lat_count": t["lat_count"],
        "lat_min_us": _us(t["lat_min_ns"]) if t["lat_count"] else None,
    }
    out.update(latency_fields(hist, t["lat_count"], t["lat_sum_ns"], t["jitter_sum_ns"],
                              t["lat_min_ns"], t["lat_max_ns"]))
    # qperf's latency is half the round trip; udp_bw's is one way already
    if out["lat_mean_us"] is not None:
        out["latency_us"] = out["lat_mean_us"] / (2 if test.endswith("_lat") else 1)
    else:
        out["latency_us"] = None
    if figures is not None:
        out.update(figures(t, out))
    if t["rtt_count"]:  # first-packet RTT (DPDK TCP)
        out["rtt_count"] = t["rtt_count"]
        out["rtt_mean_us"] = t["rtt_sum_ns"] / t["rtt_count"] / 1e3
        out["rtt_max_us"] = t["rtt_max_ns"] / 1e3
    out["cpu_pct"] = sum(100.0 * w[busy] / w[wall] for w in workers if w[wall])
    if any(r.startswith("remote_") for r in roles):  # qperf's -v figures, % of one core
        out.update(end_fields(workers, roles))
        # and, for the bandwidth tests, CPU time per GB (10^9 bytes) sent and received
        cost = lambda end, nbytes: (sum(w[busy] for w, r in zip(workers, roles) if r.endswith(end)) / 1e6  # noqa: E731
                                    / (nbytes / 1e9) if test.endswith("_bw") and nbytes else None)
        out["send_cost_ms_per_gb"] = cost("_send", t["bytes_tx"])
        out["recv_cost_ms_per_gb"] = cost("_recv", t["bytes_rx"])
    out["cpu_pct_by_worker"] = {f"w{i}_{r}": (100.0 * w[busy] / w[wall] if w[wall] else 0.0)
                                for i, (w, r) in enumerate(zip(workers, roles))}
    return out


# ---------------------------------------------------------------- both directions apart
# A run whose two ends are ports of one engine (DPDK bidirectional, reverse) reports each way on
# its own: side "a" is the generator's port (and a port it receives its frames back on), side "b"
# the far end's; a worker's side comes from its kind (perfkit.kinds.directions). a_to_b is sent
# by side a's workers and received by side b's, b_to_a the other way.
DIRECTIONS = {"a_to_b": ("a", "b"), "b_to_a": ("b", "a")}
_DIRECTION_ROW = {
    "tx_pps": "frames sent per second", "rx_pps": "frames received per second",
    "tx_bps": "frame bits sent per second", "rx_bps": "frame bits received per second",
    "lost": "frames lost in this interval (sequence gaps; a round trip: none apart)",
    "reorder": "frames out of order in this interval", "dup": "duplicate frames in this interval",
    "lat_mean_us": "mean one-way latency in this interval",
    "nic_tx_pps": "frames the sending port's NIC counted per second",
    "nic_rx_pps": "frames the receiving port's NIC counted per second",
}
for _d, (_src, _dst) in DIRECTIONS.items():
    for _k, _label in _DIRECTION_ROW.items():
        LABELS[f"{_d}_{_k}"] = f"{_src}->{_dst}: {_label}"
        UNITS[f"{_d}_{_k}"] = ("µs" if _k.endswith("_us") else "bit/s" if _k.endswith("bps")
                               else "pkt/s" if _k.endswith("pps") else "pkt")
del _d, _src, _dst, _k, _label


def direction_columns() -> tuple[str, ...]:
    """The row columns of a run with both directions apart, in row order."""
    return tuple(f"{d}_{k}" for d in DIRECTIONS for k in _DIRECTION_ROW)


def _side(workers, sides, side: str, name: str) -> int | None:
    """A counter summed over the workers on one side; None when no worker of this run is there."""
    i = INDEX[name]
    mine = [w[i] for w, s in zip(workers, sides) if s == side]
    return sum(mine) if mine else None


def direction_row(prev_workers, cur_workers, sides, round_trip: bool, dt: float) -> dict:
    """The direction columns of one row (direction_columns): each way's rates over dt from the
    workers on its sending and its receiving side. round_trip (reverse mode): the generator
    checks sequence and latency only on the way back, so no way has its own loss or latency."""
    row: dict = {}
    delta = [[c - p for c, p in zip(cw, pw)] for pw, cw in zip(prev_workers, cur_workers)]
    rate = lambda n: None if n is None or dt <= 0 else n / dt  # noqa: E731
    for d, (src, dst) in DIRECTIONS.items():
        got = lambda name, side=dst: _side(delta, sides, side, name)  # noqa: E731
        tx_bytes, rx_bytes = _side(delta, sides, src, "bytes_tx"), got("bytes_rx")
        row[f"{d}_tx_pps"] = rate(_side(delta, sides, src, "pkts_tx"))
        row[f"{d}_rx_pps"] = rate(got("pkts_rx"))
        row[f"{d}_tx_bps"] = rate(None if tx_bytes is None else 8 * tx_bytes)
        row[f"{d}_rx_bps"] = rate(None if rx_bytes is None else 8 * rx_bytes)
        for k, name in (("lost", "seq_lost"), ("reorder", "seq_reorder"), ("dup", "seq_dup")):
            v = None if round_trip else got(name)
            row[f"{d}_{k}"] = None if v is None else float(v)
        n, total = got("lat_count"), got("lat_sum_ns")
        row[f"{d}_lat_mean_us"] = total / n / 1e3 if n and not round_trip else None
        row[f"{d}_nic_tx_pps"] = rate(_side(delta, sides, src, "nic_opackets"))
        row[f"{d}_nic_rx_pps"] = rate(got("nic_ipackets"))
    return row


def direction_summary(workers, hists, sides, round_trip: bool, active_s: float) -> dict:
    """Each way's whole-run figures, prefixed a_to_b_ and b_to_a_: frames sent and received, lost,
    reordered, duplicated, loss %, tx/rx pps and bps over active_s, one-way latency (p50, p90, p99,
    p999, mean, max) and the NIC's counts (nic_tx: the sending port's opackets, nic_rx: the
    receiving port's ipackets). None where the side is not in this run (a far end in another
    process). round_trip (reverse): lost = sent - received, counted; no reorder, dup or latency
    apart (the summary's own are the round trip's)."""
    out: dict = {}
    for d, (src, dst) in DIRECTIONS.items():
        sent, received = _side(workers, sides, src, "pkts_tx"), _side(workers, sides, dst, "pkts_rx")
        tx_bytes, rx_bytes = _side(workers, sides, src, "bytes_tx"), _side(workers, sides, dst, "bytes_rx")
        per_s = lambda n: None if n is None or active_s <= 0 else n / active_s  # noqa: E731
        f = {"sent": sent, "received": received,
             "tx_pps": per_s(sent), "rx_pps": per_s(received),
             "tx_bps": per_s(None if tx_bytes is None else 8 * tx_bytes),
             "rx_bps": per_s(None if rx_bytes is None else 8 * rx_bytes),
             "nic_tx": _side(workers, sides, src, "nic_opackets"),
             "nic_rx": _side(workers, sides, dst, "nic_ipackets")}
        if round_trip:
            f.update(lost=None if sent is None or received is None else sent - received,
                     reorder=None, dup=None)
            f.update({k: None for k in latency_fields(Histogram(), 0, 0, 0)})
        else:
            f.update(lost=_side(workers, sides, dst, "seq_lost"), reorder=_side(workers, sides, dst, "seq_reorder"),
                     dup=_side(workers, sides, dst, "seq_dup"))
            mine = [i for i, s in enumerate(sides) if s == dst]
            lo = min((workers[i][INDEX["lat_min_ns"]] for i in mine if workers[i][INDEX["lat_min_ns"]]), default=0)
            hi = max((workers[i][INDEX["lat_max_ns"]] for i in mine), default=0)
            f.update(latency_fields(Histogram.merge(hists[i] for i in mine),
                                    sum(workers[i][INDEX["lat_count"]] for i in mine),
                                    sum(workers[i][INDEX["lat_sum_ns"]] for i in mine),
                                    sum(workers[i][INDEX["jitter_sum_ns"]] for i in mine), lo, hi))
        f["loss_pct"] = None if f["lost"] is None or received is None else loss_pct(received, f["dup"] or 0, f["lost"])
        out.update({f"{d}_{k}": v for k, v in f.items()})
    return out
