"""The kernel-socket engine: sendmmsg/recvmmsg UDP and TCP streams in C threads.

No root and no DPDK needed; the embedded default.
"""
from __future__ import annotations

import resource

from perfkit.spec import LocalTest

NAME = "socket"


def status() -> dict:
    try:
        from perfkit import _sock  # noqa: F401
    except ImportError as exc:  # a broken build, not a missing feature
        return {"available": False, "detail": f"perfkit._sock did not import: {exc}"}
    return {"available": True, "detail": "kernel sockets (sendmmsg/recvmmsg, TCP), no root needed"}


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = hard if hard == resource.RLIM_INFINITY else min(hard, max(needed, soft))
        if target < needed:
            raise ValueError(f"flows: {needed} sockets needed but the open-file limit is {hard} "
                             "(raise it with ulimit -n)")
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def workers_for(spec: LocalTest) -> list[dict]:
    """The worker list for a local test: the receiving end first, then the sender
    that targets it (peer 0)."""
    here = (spec.host, spec.port)
    anyport = (spec.host, 0)
    common = {"size": spec.size, "duration": spec.duration}
    sender = {**common, "local": anyport, "remote": here, "peer": 0,
              "rate": spec.messages_per_second}
    if spec.test == "udp_bw":
        return [{**common, "role": "udp_recv", "local": here, "flows": spec.flows, "batch": spec.batch},
                {**sender, "role": "udp_send", "flows": spec.flows, "batch": spec.batch,
                 "gso": spec.gso}]
    if spec.test == "udp_lat":
        return [{**common, "role": "udp_reflect", "local": here, "batch": 1,
                 "busy_poll": spec.busy_poll},
                {**sender, "role": "udp_ping", "busy_poll": spec.busy_poll}]
    if spec.test == "tcp_bw":
        return [{**common, "role": "tcp_recv", "local": here},
                {**sender, "role": "tcp_send"}]
    if spec.test == "tcp_lat":
        return [{**common, "role": "tcp_pong", "local": here, "busy_poll": spec.busy_poll},
                {**sender, "role": "tcp_ping", "busy_poll": spec.busy_poll}]
    raise ValueError(f"test: the socket engine does not run {spec.test!r}")


def build(spec: LocalTest):
    from perfkit._sock import SockEngine
    _raise_fd_limit(spec.flows + 64)
    return SockEngine(workers_for(spec))


def detail() -> dict:
    return {"engine": NAME}
