"""The engine handle contract: what perfkit.Run drives, whichever engine is behind it.

Satisfied by the native engines (perfkit._sock.SockEngine, perfkit._dpdk.DpdkEngine and
TcpEngine, whose lifecycle is written once in native/common), by ProcessHandle (socket
workers in child processes) and by RemoteHandle (a local engine plus a perfkit server).
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable


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
