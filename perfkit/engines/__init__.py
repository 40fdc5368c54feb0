"""The packet engines behind one small interface.

An engine module offers:
    NAME                   its name in perfkit.engines() and on the CLI
    status() -> dict       {"available": bool, "detail": str}
    build(plan) -> handle  a native engine, created (sockets bound) but not started, from
                           the plan the spec's kind made (perfkit.kinds.plan; a spec is
                           made into its plan); the module docstring lists the keys it reads

A handle (EngineHandle, perfkit.engines.handle) has start(), stop(), running(), join(),
snapshot(), error(), close() and `roles` (one per worker); perfkit.Run drives any handle
the same way.
"""
from __future__ import annotations

from perfkit.engines import dpdk, socket
from perfkit.engines.handle import EngineHandle as EngineHandle  # the contract every handle meets

_ENGINES = {socket.NAME: socket, dpdk.NAME: dpdk}
from perfkit.engines import dpdk_tcp  # noqa: E402 (TCP/HTTP over DPDK)
_ENGINES[dpdk_tcp.NAME] = dpdk_tcp
DEFAULT = socket.NAME


def engines() -> dict[str, dict]:
    """Every engine perfkit knows, with whether it is available here and why."""
    return {name: mod.status() for name, mod in _ENGINES.items()}


def check_name(name: str) -> None:
    """ValueError saying what there is, unless perfkit has an engine called name."""
    if name not in _ENGINES:
        raise ValueError(f"engine: {name!r} is not one of {', '.join(_ENGINES)}")


def get(name: str):
    """The engine module called name, or ValueError saying what there is."""
    check_name(name)
    mod = _ENGINES[name]
    st = mod.status()
    if not st["available"]:
        raise ValueError(f"engine: {name} is not available here: {st['detail']}")
    return mod
