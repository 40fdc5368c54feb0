"""--converge on the command line (perfkit flows, perfkit local udp_bw): BiTester's live rate
convergence (perfkit.converge) on the one run the command starts, between --converge-low and
--rate, and the converged rate printed after the run's summary. A face: the options themselves
are declared beside --search (perfkit.kinds.qperf.search_options)."""
from __future__ import annotations

from perfkit import kinds
from perfkit.converge import Converge
from perfkit.units import format_si, parse_rate


def refuse_with_search(a) -> None:
    """--search and --converge together: one line before anything runs."""
    if getattr(a, "converge", None) is not None:
        raise ValueError("converge: --converge retunes one run, --search runs trials: give one of them")


def controller(a, spec) -> Converge | None:
    """The controller --converge asks for (None without it), checked before anything starts:
    the upper bound is --rate in packets/s of the spec's frame size, the lower --converge-low
    (default 1% of the upper)."""
    criterion = getattr(a, "converge", None)
    if criterion is None:
        return None
    if getattr(a, "search", None) is not None:
        refuse_with_search(a)
    live = kinds.lookup(spec, "LIVE_RATE")
    try:
        if live is None:
            raise ValueError(f"{type(spec).__name__} has no live rate")
        live(spec, None)   # a test whose rate is fixed (tcp_bw, reverse flows' udp_lat) refuses here
    except ValueError as exc:
        raise ValueError(f"converge: {str(exc).removeprefix('set_rate: ')}") from None
    rate = getattr(spec, "rate", None)
    if rate is None:
        raise ValueError("converge: give --rate, the upper bound of the rates it tries (e.g. --rate 1Mpps)")
    size = getattr(spec, "mean_size", None) or spec.size
    hi = rate.messages_per_second(size)
    lo = parse_rate(a.converge_low, "converge_low").messages_per_second(size) if a.converge_low else hi / 100
    resolution = _share(a.converge_resolution, "converge_resolution")
    return Converge(lo=lo, hi=hi, criterion=criterion, resolution=resolution)


def _share(text, field: str) -> float:
    """'5%' or 0.05 as a share."""
    s = str(text).strip()
    try:
        return float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise ValueError(f"{field}: {text!r} is not a share (5%, 0.05)") from None


def attach(conv: Converge | None, run) -> None:
    """Steer the started run (nothing without --converge)."""
    if conv is not None:
        conv.attach(run)


def text(summary: dict | None) -> str:
    """The line after the summary: the converged rate, when and how steady; '' without --converge."""
    s = summary or {}
    if "converge_criterion" not in s:
        return ""
    if s.get("converged_pps") is None:
        return (f"\nconverge {s['converge_criterion']}: not converged in {s['converge_steps']} intervals "
                "(a longer --duration, a wider --converge-resolution)")
    spread = s.get("converged_spread_pct")
    return (f"\nconverge {s['converge_criterion']}: {format_si(s['converged_pps'], 'pps')} "
            f"(at {s['converged_at_s']:.3g} s, {s['converge_steps']} intervals judged, re-converged "
            f"{s['reconverged']} times" + (f", spread {spread:.3g}%)" if spread is not None else ")"))
