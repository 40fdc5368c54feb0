"""A run's stages (k6's stages): the same figures as the summary, for each stage of a stage plan.

The sampler marks the counters and the histogram at the first row at or after each stage's
end (the last stage ends with the final row, so its drain counts in it); a stage's summary
is perfkit.stats.summarize over the difference of its two marks. Its bounds are therefore
row times: within one interval of the plan's. A run stopped early has the stages it reached,
the last of them cut short (`partial`).
"""
from __future__ import annotations

from perfkit.stats import COUNTERS, Histogram, merge_counters, summarize

# a stage summary keeps these of the whole run's figures (and its own: stage, from_s, to_s, users)
# a stage's end read this early is still its end (the sampler's clock starts a little after the workers')
SLACK_S = 0.05
DROP = ("cpu_pct_by_worker", "per_url", "lat_min_us", "hosts", "engine", "error")


def window(prev: list[int], cur: list[int]) -> list[int]:
    """One worker's counters over a window: sums as differences, gauges as they are now,
    minima and maxima unknown (0: the window's latency extremes come from its histogram)."""
    return [c - p if k.kind == "sum" else c if k.kind == "gauge" else 0 for k, p, c in zip(COUNTERS, prev, cur)]


class StageMarks:
    """Marks a run's counters at its stage ends, as rows come; summaries() gives each stage's."""

    def __init__(self, plan, what: str = "users"):
        self.what = what   # what the plan sets: users (closed loop) or rate (requests/s, open loop)
        self.plan = [(float(d), u) for d, u in plan]
        self.ends, total = [], 0.0
        for d, _ in self.plan:
            total += d
            self.ends.append(total)
        self.marks: list[tuple[float, list, Histogram]] = []   # (row time, workers, histogram) per stage end

    def see(self, t: float, workers: list, hist: Histogram, final: bool = False) -> None:
        """A row at t with the cumulative counters: marks every stage end it reaches (all but
        the last stage's; the final row closes the stage it is in)."""
        t = round(t, 6)   # as the row's time_s
        while len(self.marks) < len(self.plan) - 1 and t >= self.ends[len(self.marks)]:
            self.marks.append((t, [list(w) for w in workers], hist))
        if final and len(self.marks) < len(self.plan):
            self.marks.append((t, [list(w) for w in workers], hist))

    def summaries(self, test: str, roles: list[str], size: int, figures=None) -> list[dict]:
        """Each stage reached: its plan (stage from 1, duration, users or rate at its end), its row
        bounds, and summarize's figures over it."""
        out = []
        prev_t, prev_w, prev_h = 0.0, None, Histogram()
        for k, (t, workers, hist) in enumerate(self.marks):
            base = prev_w if prev_w is not None else [[0] * len(COUNTERS) for _ in workers]
            win = [window(p, c) for p, c in zip(base, workers)]
            s = summarize(test, merge_counters(win), hist - prev_h, win, roles, size, figures)
            for key in DROP:
                s.pop(key, None)
            d, target = self.plan[k]
            out.append({"stage": k + 1, "plan_s": d, self.what: target, "from_s": prev_t, "to_s": t,
                        "partial": t + SLACK_S < self.ends[k], **s})
            prev_t, prev_w, prev_h = t, workers, hist
        return out
