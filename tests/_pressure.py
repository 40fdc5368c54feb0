"""How starved the machine was while a test ran: the share of wall time in which some
runnable task waited for a CPU (Linux PSI, /proc/pressure/cpu "some"). A test whose bound is
one a quiet machine meets, not an identity, skips with this figure when it is high."""
from __future__ import annotations

import time

PSI = "/proc/pressure/cpu"
STARVED = 0.5   # tasks waited for a CPU over half the time: the bound is the machine's, not the code's


def _some_us() -> int | None:
    try:
        with open(PSI) as f:
            return int(f.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


class CpuPressure:
    """with CpuPressure() as p: ...; p.share (0..1, None without PSI), p.starved, p.why."""

    def __enter__(self):
        self.t0, self.s0, self.share = time.monotonic(), _some_us(), None
        return self

    def __exit__(self, *exc):
        s1, wall = _some_us(), time.monotonic() - self.t0
        if self.s0 is not None and s1 is not None and wall > 0:
            self.share = (s1 - self.s0) / 1e6 / wall
        return False

    @property
    def starved(self) -> bool:
        return self.share is not None and self.share > STARVED

    @property
    def why(self) -> str:
        return f"tasks waited for a CPU {self.share:.0%} of the time (PSI cpu some)" if self.share is not None else ""
