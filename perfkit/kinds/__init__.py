"""The kinds of test: one module per family, each owning its spec classes and, by spec class,
the engine that runs it when none is named (ENGINE), its dashboard charts (LAYOUT: a name in
perfkit.ui.charts.LAYOUTS, or one of the kind's own LAYOUTS), its panel tasks (TASKS) and the
panel rows beyond its fields (PANEL_ROWS), the dashboard title's parts (TITLE, or the first
part only: TITLE_HEAD); and a kind may add figures to a run's summary (summary_extra; from the
counter totals, in summarize's order: SUMMARY). A kind turns a spec into its engine's plan
(plan(spec): plain data, perfkit.engines.handle) and says which counter groups its runs write
(COUNTER_GROUPS, or counter_groups(spec)).

KINDS is the registry: a new kind is one new module here plus one line in KINDS. The faces
(run, charts, panel, stats, CLI) ask kind_of(spec) instead of testing spec classes.
"""
from __future__ import annotations

from perfkit import dperf, spec
from perfkit.engines.handle import set_planner
from perfkit.kinds import dpdk_tcp, dpdk_udp, http, qperf, reflect
from perfkit.kinds.dpdk_tcp import DpdkHttpClient, DpdkHttpServer
from perfkit.kinds.dpdk_udp import DpdkFlows, DpdkReflect
from perfkit.kinds.http import HttpLoad, HttpServe
from perfkit.kinds.qperf import LocalTest, RemoteTest
from perfkit.kinds.reflect import SocketReflect

# in this order the specs make the launcher's tabs and perfkit's exports
KINDS = (qperf, http, dpdk_udp, reflect, dpdk_tcp)

SPECS = {cls.__name__: cls for kind in KINDS for cls in kind.SPECS}
_KIND_OF = {cls: kind for kind in KINDS for cls in kind.SPECS}


def _registered(cls):
    """The spec class of KINDS that cls is or derives from, else ValueError."""
    for c in getattr(cls, "__mro__", ()):
        if c in _KIND_OF:
            return c
    raise ValueError(f"{cls!r} is not a spec of any kind ({', '.join(SPECS)})")


def for_spec_class(cls):
    """The kind (module) whose spec cls is (or derives from), else ValueError."""
    return _KIND_OF[_registered(cls)]


def kind_of(spec_obj):
    """The kind (module) of a spec instance."""
    return for_spec_class(type(spec_obj))


def lookup(spec_or_cls, table: str, default=None):
    """What spec's kind says for it in one of the kind's tables (ENGINE, LAYOUT, TASKS, ...):
    default for a spec the kind leaves out, or for anything that is not a spec."""
    cls = spec_or_cls if isinstance(spec_or_cls, type) else type(spec_or_cls)
    try:
        base = _registered(cls)
    except ValueError:
        return default
    return getattr(_KIND_OF[base], table, {}).get(base, default)


def summary_extra(spec_obj, handle, roles) -> dict:
    """A finished run's figures its kind adds to the summary (the kind's summary_extra: spec,
    the engine's handle, the workers' roles); none for a kind without, or for no spec."""
    try:
        extra = getattr(kind_of(spec_obj), "summary_extra", None)
    except ValueError:
        return {}
    return extra(spec_obj, handle, roles) if extra is not None else {}


def directions(spec_obj, roles) -> tuple[list, bool] | None:
    """(each worker's side, "a" or "b" or None; round_trip) of a run that reports both directions
    apart (the kind's directions: DPDK bidirectional and reverse runs), else None."""
    try:
        fn = getattr(kind_of(spec_obj), "directions", None)
    except ValueError:
        return None
    return fn(spec_obj, roles) if fn is not None else None


def plan(spec_obj, engine: str | None = None) -> dict | None:
    """The plain plan spec's kind makes for its engine (the kind's plan(spec): the engine's
    build() reads it); None for a kind that makes none yet, for anything that is not a spec,
    or for a plan of another engine than engine (that engine then refuses the spec itself)."""
    try:
        make = getattr(kind_of(spec_obj), "plan", None)
    except ValueError:
        return None
    out = make(spec_obj) if make is not None else None
    return out if out is None or engine is None or out.get("engine") == engine else None


def counter_groups(spec_obj) -> tuple[str, ...] | None:
    """The counter groups (perfkit.stats.GROUPS) a spec's run writes, as its kind declares
    them (COUNTER_GROUPS, or counter_groups(spec)); None where the kind does not say."""
    try:
        kind = kind_of(spec_obj)
    except ValueError:
        return None
    fn = getattr(kind, "counter_groups", None)
    groups = fn(spec_obj) if fn is not None else getattr(kind, "COUNTER_GROUPS", None)
    return tuple(groups) if groups is not None else None


def summary_figures(spec_obj):
    """The kind's figures from a run's counter totals (its SUMMARY, by spec class:
    fn(totals, summary) -> dict, which perfkit.stats.summarize places after latency), or None."""
    return lookup(spec_obj, "SUMMARY")


def from_dict(d: dict):
    """Any spec from its to_dict() form."""
    kind = d.get("kind", "LocalTest")
    if kind not in SPECS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(SPECS)}")
    return SPECS[kind].from_dict(d)


from_dperf = dperf.from_dperf

# the engines take a spec too (scripts and tests build from one): they cannot import the kinds
set_planner(plan)

# perfkit.spec keeps every spec's name (README, notebooks and saved runs use them): spec.py
# holds only the shared checks, which the kinds import, so the kinds give it the names
for _name, _value in {**SPECS, "SPECS": SPECS, "from_dict": from_dict, "from_dperf": from_dperf}.items():
    setattr(spec, _name, _value)

__all__ = ["KINDS", "SPECS", "DpdkFlows", "DpdkHttpClient", "DpdkHttpServer", "DpdkReflect", "HttpLoad", "HttpServe",
           "LocalTest", "RemoteTest", "SocketReflect", "counter_groups", "for_spec_class", "from_dict", "from_dperf", "kind_of",
           "lookup", "plan", "summary_extra", "summary_figures"]
