"""qperf's sweeps from Python: every test at every point of its -oo sweeps, each a Run
of a RemoteTest against a perfkit server (`perfkit test`, perfkit.test)."""
from __future__ import annotations

import threading

from perfkit.engines.remote import DEFAULT_PORT
from perfkit.run import Run
from perfkit.kinds import RemoteTest
from perfkit.spec import check_target
from perfkit.units import parse_duration, parse_float, parse_rate, parse_size


# qperf's option names -> RemoteTest fields, with the unit parser of each
SWEEPABLE = {"msg_size": "size", "time": "duration", "rate": "rate", "flows": "flows", "no_msgs": "messages"}
MAX_POINTS = 1000


def parse_sweep(text: str) -> tuple[str, list]:
    """qperf's -oo OPT:FROM:TO:STEP, STEP *N (multiply) or +N (add): ("msg_size",
    [1, 2, 4, ...]). Values use the option's own units (64K, 10s, 1Mpps)."""
    parts = str(text).split(":")
    if len(parts) != 4:
        raise ValueError(f"sweep: {text!r} is not OPT:FROM:TO:STEP (e.g. msg_size:1:64K:*2)")
    opt, lo, hi, step = (p.strip() for p in parts)
    if opt not in SWEEPABLE:
        raise ValueError(f"sweep: {opt!r} is not one of {', '.join(SWEEPABLE)}")
    parse = {"msg_size": lambda v: parse_size(v, "sweep"), "flows": lambda v: parse_size(v, "sweep"),
             "no_msgs": lambda v: parse_size(v, "sweep"),
             "time": lambda v: parse_duration(v, "sweep"),
             "rate": lambda v: parse_rate(v, "sweep").value}[opt]
    start, stop = parse(lo), parse(hi)
    if not 0 < start <= stop:
        raise ValueError(f"sweep: {text!r} needs 0 < FROM <= TO")
    if step[:1] == "*":
        factor = parse_float(step[1:], "sweep", f"a factor in step {step!r} (*N with a number N)")
        if not factor > 1:
            raise ValueError(f"sweep: step {step!r} must multiply by more than 1")
        nxt = lambda v: v * factor  # noqa: E731
    elif step[:1] == "+":
        inc = parse(step[1:])
        if not inc > 0:
            raise ValueError(f"sweep: step {step!r} must add more than 0")
        nxt = lambda v: v + inc  # noqa: E731
    else:
        raise ValueError(f"sweep: step {step!r} is not *N or +N")
    values, v = [], start
    while v <= stop * (1 + 1e-9):
        values.append(int(v) if isinstance(start, int) and float(v).is_integer() else v)
        if len(values) > MAX_POINTS:
            raise ValueError(f"sweep: {text!r} has more than {MAX_POINTS} points")
        v = nxt(v)
    return opt, values


def plan(host: str, *tests: str, time="10s", sweep: dict | None = None, port: int = DEFAULT_PORT,
         token: str | None = None, **fields) -> list[tuple[str, dict, object]]:
    """[(test, point, RemoteTest)] for every test at every sweep point, all checked
    before anything runs. sweep: {"msg_size": "1:64K:*2", ...} (several: every mix)."""
    host = check_target(host)   # a name resolves once for every point
    points = [{}]
    for opt, spec in (sweep or {}).items():
        _, values = parse_sweep(f"{opt}:{spec}")
        points = [{**p, opt: v} for p in points for v in values]
    out = []
    for t in tests:
        for point in points:
            kw = {"duration": time, **fields, **{SWEEPABLE[k]: v for k, v in point.items()}}
            out.append((t, point, RemoteTest(host=host, test=t, port=port, token=token, **kw)))
    return out


def test(host: str, *tests: str, time="10s", sweep: dict | None = None, port: int = DEFAULT_PORT,
         token: str | None = None, progress=None, stop: threading.Event | None = None, **fields):
    """qperf from Python: one polars row per test and sweep point, with its summary.

        perfkit.test("198.18.0.2", "tcp_bw", "tcp_lat", time="2s", sweep={"msg_size": "1:64K:*2"})

    progress: called with each point's row as it finishes. stop: an Event; once set, the
    point going on ends at once and is left out, and the rows so far are returned (the
    notebook panel's Stop)."""
    import polars as pl  # polars loads with the first run, not with perfkit
    rows = []
    for t, point, spec in plan(host, *tests, time=time, sweep=sweep, port=port, token=token, **fields):
        if stop is not None and stop.is_set():
            break
        run = Run(spec).start()
        if stop is not None:
            while not run.wait(0.05):
                if stop.is_set():
                    run.stop()
            if stop.is_set():
                break
        run.wait()
        s = {k: v for k, v in run.summary.items() if not isinstance(v, dict)}
        rows.append({"test": t, **point, **s})
        if progress is not None:
            progress(dict(rows[-1]))
    return pl.DataFrame(rows)
