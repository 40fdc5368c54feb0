"""User ladders (nGrinder's rising virtual users, qperf's -oo for users): the same HTTP load
run once per user count, one after another, as one frame with a `users` column.

    lad = perfkit.ladder(perfkit.HttpLoad(url, duration="10s"), users="100:1000:+100",
                         thresholds=["error_rate<1%"])
    lad.table    # one row per step: users, tps, mean test time, error rate, ... passed
    lad.frame    # every step's per-interval rows, with its users
"""
from __future__ import annotations

import dataclasses
import threading

from perfkit.run import Run
from perfkit.kinds.http import MAX_STEPS, is_ladder, parse_users  # noqa: F401 (perfkit.ladder's own too)
from perfkit.thresholds import parse_all

# the table's leading columns, nGrinder's figures first
TABLE_FIRST = ("users", "tps", "mean_test_time_ms", "lat_p99_us", "error_rate_pct", "requests", "responses",
               "http_err", "http_cut")


@dataclasses.dataclass
class Ladder:
    """The finished steps of a ladder: one Run per user count."""
    users: list[int]
    runs: list[Run]
    interrupted: bool = False   # a KeyboardInterrupt stopped it: the steps so far

    @property
    def frame(self):
        """Every step's per-interval rows, one frame, its users first."""
        import polars as pl  # polars loads with the first run, not with perfkit
        frames = [r.frame.with_columns(pl.lit(u, pl.Int64).alias("users")) for u, r in zip(self.users, self.runs)]
        if not frames:
            return pl.DataFrame(schema={"users": pl.Int64})
        f = pl.concat(frames, how="diagonal_relaxed")
        return f.select(["users", *[c for c in f.columns if c != "users"]])

    @property
    def table(self):
        """One row per step: users, the summary's figures, and passed (its thresholds)."""
        import polars as pl
        rows = []
        for u, r in zip(self.users, self.runs):
            s = {k: v for k, v in (r.summary or {}).items() if isinstance(v, (int, float, str, type(None)))}
            rows.append({**s, "users": u, "passed": r.passed})
        if not rows:
            return pl.DataFrame(schema={"users": pl.Int64})
        t = pl.DataFrame(rows, infer_schema_length=None)
        return t.select([c for c in TABLE_FIRST if c in t.columns]
                        + [c for c in t.columns if c not in TABLE_FIRST])

    @property
    def passed(self) -> bool | None:
        """Every step passed its thresholds (True also with none); None before a step has ended."""
        got = [r.passed for r in self.runs]
        return None if not got or None in got else all(got)

    @property
    def error(self) -> str | None:
        return next((f"{u} users: {r.error}" for u, r in zip(self.users, self.runs) if r.error), None)


def plan(spec, users) -> list:
    """One spec per step, every one checked before anything runs."""
    if getattr(spec, "stages", None):
        raise ValueError("users: a ladder runs steps of fixed users; a stage plan sets its own (leave one out)")
    return [dataclasses.replace(spec, users=u) for u in parse_users(users)]


def ladder(spec, users, interval: float = 1.0, thresholds=(), engine: str | None = None,
           subscribers=(), progress=None, stop: threading.Event | None = None, cluster=None,
           watch: dict | None = None) -> Ladder:
    """Run spec (an HttpLoad) once per user count of users, one step after another.
    thresholds: checked on each step's summary (table's passed). progress(users, run): called
    before each step starts (run not started) and is given its Run; subscribers get every row.
    stop: an Event; once set the step going on is stopped and no other starts. watch: {name: pid
    or [pids]}, processes whose CPU every step records (a server: proc_server_cpu_pct)."""
    specs = plan(spec, users)
    checks = parse_all(thresholds)
    steps = [s.users for s in specs]
    done = Ladder(users=[], runs=[])
    for u, s in zip(steps, specs):
        if stop is not None and stop.is_set():
            break
        run = Run(s, engine=engine, interval=interval, subscribers=subscribers, thresholds=checks, cluster=cluster,
                  watch=watch)
        if progress is not None:
            progress(u, run)
        run.start()
        done.users.append(u)
        done.runs.append(run)
        try:
            while not run.wait(0.05 if stop is not None else None):
                if stop is not None and stop.is_set():
                    run.stop()
        except KeyboardInterrupt:
            done.interrupted = True
            break
        except Exception:   # noqa: BLE001 (EngineError: the step's run.error says it; the ladder goes on)
            pass
    return done


def table_text(lad: Ladder) -> str:
    """The ladder's summary table as text: one line per step (nGrinder's columns)."""
    head = f"{'users':>8} {'TPS':>10} {'mean ms':>9} {'p99 ms':>9} {'error %':>8} {'requests':>10} {'cut':>7}  passed"
    lines = ["ladder:", head]
    for u, r in zip(lad.users, lad.runs):
        s = r.summary or {}

        def num(k, scale=1.0, fmt="{:.2f}"):
            return fmt.format(s[k] * scale) if s.get(k) is not None else "-"
        lines.append(f"{u:>8} {num('tps', fmt='{:.1f}'):>10} {num('mean_test_time_ms'):>9} "
                     f"{num('lat_p99_us', 1e-3):>9} {num('error_rate_pct'):>8} {s.get('requests', 0):>10,} "
                     f"{s.get('http_cut', 0):>7,}  {'-' if not r.threshold_specs else 'yes' if r.passed else 'NO'}")
    return "\n".join(lines)
