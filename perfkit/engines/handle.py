"""The engine handle contract: what perfkit.Run drives, whichever engine is behind it.

Satisfied by the native engines (perfkit._sock.SockEngine, perfkit._dpdk.DpdkEngine and
TcpEngine, whose lifecycle is written once in native/common), by ProcessHandle (socket
workers in child processes) and by RemoteHandle (a local engine plus a perfkit server).

An engine builds a handle from a plan: plain data its kind made from a spec
(perfkit.kinds.plan), {"engine": NAME, "spec": the spec's class name, ...the keys the
engine's module docstring lists}.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable


@runtime_checkable
class EngineHandle(Protocol):
    """A built engine: created (sockets bound, ports claimed) but not started.

    start() starts every worker (EngineError if it cannot); stop() asks them to stop and is
    safe from any thread; running() is truthy while any worker runs; join() waits for them
    all (they are time-bounded) and settles what only the end can tell (loss); snapshot()
    gives one (counters, histogram) per worker, in `roles` order; error() is the first
    worker failure, or None; close() stops, joins and frees everything, from any thread."""

    roles: Sequence[str]

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def running(self) -> Any: ...

    def join(self) -> None: ...

    def snapshot(self) -> list: ...

    def error(self) -> str | None: ...

    def close(self) -> None: ...


# How a spec becomes its kind's plan: perfkit.kinds sets it on import (engines cannot import
# the kinds, a layer above), so an engine's build() takes a spec from a caller holding one.
_planner: Callable[[Any], dict | None] | None = None


def set_planner(fn: Callable[[Any], dict | None]) -> None:
    """fn(spec) -> its kind's plan, or None for a kind that makes none."""
    global _planner
    _planner = fn


def as_plan(plan_or_spec) -> dict:
    """A plan (a dict) as it is; a spec made into its kind's plan. A kind without one gives
    {"engine": None, "spec": its class name}: every engine then refuses it by name."""
    if isinstance(plan_or_spec, dict):
        return plan_or_spec
    plan = _planner(plan_or_spec) if _planner is not None else None
    return plan if plan is not None else {"engine": None, "spec": type(plan_or_spec).__name__}
