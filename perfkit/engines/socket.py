"""The kernel-socket engine: sendmmsg/recvmmsg UDP and TCP streams in C threads.

No root and no DPDK needed; the embedded default.

build(plan) reads (the kinds qperf, http and reflect make the plan):
    engine     "socket"
    spec       the spec's class name (for the message when a plan is not this engine's)
    handle     "sock": one SockEngine over workers; "process": a ProcessHandle over groups
               (child processes, each its own open-file limit); "remote": a RemoteHandle
               (perfkit.engines.remote) whose far end is a perfkit server
    workers    (sock) the worker configurations, in SockEngine's keys (WORKER_KEYS)
    groups     (process) one worker list per child; fd_field: the field to blame for
               a child's open-file limit
    fd_limit   (sock, remote; optional) (sockets, field): room made for this many more
               open files first, else a ValueError naming field
    remote     (remote) RemoteHandle's plan
"""
from __future__ import annotations

from perfkit.engines.handle import EngineHandle, as_plan
from perfkit.engines.remote import RemoteHandle
from perfkit.procs import ProcessHandle, raise_fd_limit

NAME = "socket"


def status() -> dict:
    try:
        from perfkit import _sock  # noqa: F401 (the native engine: missing from a broken build)
    except ImportError as exc:  # a broken build, not a missing feature
        return {"available": False, "detail": f"perfkit._sock did not import: {exc}"}
    return {"available": True, "detail": "kernel sockets (sendmmsg/recvmmsg, TCP), no root needed"}


def build(plan) -> EngineHandle:
    """The handle of a plan (or of a spec, made into its kind's plan): a local test's,
    HTTP load's and the HTTP server's engine, a reflector's, or, for a remote test, a
    handle whose far end is a perfkit server (perfkit.remote)."""
    plan = as_plan(plan)
    if plan.get("engine") != NAME:
        raise ValueError(f"engine: socket runs LocalTest, RemoteTest, HttpLoad, HttpServe and SocketReflect "
                         f"specs, not {plan.get('spec')}")
    if plan["handle"] == "process":  # each process its own open-file limit
        return ProcessHandle(plan["groups"], plan["fd_field"])
    if plan.get("fd_limit"):
        raise_fd_limit(*plan["fd_limit"])
    if plan["handle"] == "remote":
        return RemoteHandle(plan["remote"])
    from perfkit._sock import SockEngine
    return SockEngine(plan["workers"])


def detail() -> dict:
    return {"engine": NAME}
