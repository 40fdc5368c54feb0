"""The kernel-socket engine: sendmmsg/recvmmsg UDP and TCP streams in C threads.

No root and no DPDK needed; the embedded default.
"""
from __future__ import annotations

from perfkit.engines.handle import EngineHandle
from perfkit.engines.remote import RemoteHandle
from perfkit.lab import Lab
from perfkit.procs import ProcessHandle, raise_fd_limit
from perfkit.kinds import HttpLoad, HttpServe, LocalTest, RemoteTest, SocketReflect
from perfkit.spec import check_cpu_here

NAME = "socket"
# The counter groups (perfkit.stats.GROUPS) each kind of test writes; a run's frame keeps only these.
STREAM_GROUPS = ("traffic", "seq", "latency", "sock", "cpu")
HTTP_GROUPS = ("traffic", "sock", "http", "latency", "cpu")


def counter_groups(spec) -> tuple[str, ...]:
    """HTTP load and the HTTP server write the HTTP counters; the stream tests, their
    far end (SocketReflect) and remote tests the packet, sequence and latency ones."""
    return HTTP_GROUPS if isinstance(spec, (HttpLoad, HttpServe)) else STREAM_GROUPS


def status() -> dict:
    try:
        from perfkit import _sock  # noqa: F401 (the native engine: missing from a broken build)
    except ImportError as exc:  # a broken build, not a missing feature
        return {"available": False, "detail": f"perfkit._sock did not import: {exc}"}
    return {"available": True, "detail": "kernel sockets (sendmmsg/recvmmsg, TCP), no root needed"}


def _ends(spec: LocalTest) -> tuple[dict, dict]:
    """Where the receiving end and the sender work: both on spec.host, or the
    first two hosts of a lab (receiver in h2, sender in h1)."""
    if spec.lab is None:
        return {"local": (spec.host, spec.port)}, {"local": (spec.host, 0)}
    try:
        lab = Lab.attach(spec.lab)
    except ValueError:
        raise ValueError(f"lab: no lab {spec.lab!r} is up (perfkit lab up; perfkit lab status)") from None
    if len(lab.hosts) < 2:
        raise ValueError(f"lab: {spec.lab} has {len(lab.hosts)} host(s); a test needs two")
    client, server = lab.hosts[0], lab.hosts[1]
    v6 = ":" in spec.host
    addr = (lambda h: h.ipv6) if v6 else (lambda h: h.ipv4)
    return ({"local": (addr(server), spec.port), "netns": server.netns_path},
            {"local": (addr(client), 0), "netns": client.netns_path})


def workers_for(spec: LocalTest) -> list[dict]:
    """The worker list for a local test: the receiving end first, then the sender
    that targets it (peer 0)."""
    server, client = _ends(spec)
    common = {"size": spec.size, "duration": spec.duration, "access_recv": spec.access_recv}
    here = server["local"]
    sender = {**common, **client, "remote": here, "peer": 0, "rate": spec.messages_per_second,
              "count": spec.messages, "sock_buf": spec.loc_sock_buf_size,
              "cpu": check_cpu_here(spec.loc_cpu_affinity, "loc_cpu_affinity")}
    sender["busy_poll"] = spec.polls(False, sender["cpu"], client["local"][0])
    cpu = check_cpu_here(spec.rem_cpu_affinity, "rem_cpu_affinity")
    common = {**common, **server, "cpu": cpu, "sock_buf": spec.rem_sock_buf_size,
              "busy_poll": spec.polls(True, cpu, server["local"][0])}
    if spec.test == "udp_bw":
        return [{**common, "role": "udp_recv", "flows": spec.flows, "batch": spec.batch},
                {**sender, "role": "udp_send", "flows": spec.flows, "batch": spec.batch,
                 "gso": spec.gso}]
    if spec.test == "udp_lat":
        return [{**common, "role": "udp_reflect", "batch": 1},
                {**sender, "role": "udp_ping"}]
    if spec.test == "tcp_bw":
        return [{**common, "role": "tcp_recv"},
                {**sender, "role": "tcp_send", "batch": spec.batch}]
    if spec.test == "tcp_lat":
        return [{**common, "role": "tcp_pong"},
                {**sender, "role": "tcp_ping"}]
    raise ValueError(f"test: the socket engine does not run {spec.test!r}")


def http_workers(spec) -> list[dict]:
    """HttpLoad: one client worker with every virtual user; HttpServe: one server."""
    if isinstance(spec, HttpServe):
        return [{"role": "http_server", "local": (spec.host, spec.port), "size": 1,
                 "duration": spec.duration, "users": spec.connections, "blob": spec.response_bytes()}]
    host, port = spec.target()
    where = {}
    if spec.lab is not None:  # the client works in the lab's first host
        try:
            where["netns"] = Lab.attach(spec.lab).hosts[0].netns_path
        except ValueError:
            raise ValueError(f"lab: no lab {spec.lab!r} is up (perfkit lab up; perfkit lab status)") from None
    n = spec.threads * spec.processes  # users and rate split evenly; user_base keeps source addresses global
    sizes = [spec.users // n + (1 if i < spec.users % n else 0) for i in range(n)]
    return [{**where, "role": "http_client", "local": ("::" if ":" in host else "0.0.0.0", 0), "remote": (host, port),
             "size": 1, "duration": spec.duration, "users": sizes[i], "user_base": sum(sizes[:i]),
             "rate": spec.messages_per_second * sizes[i] / spec.users,
             "keepalive": spec.keepalive, "think": spec.think, "ramp": spec.ramp,
             "connect_timeout": spec.connect_timeout, "response_timeout": spec.response_timeout,
             "blob": spec.request_bytes(), "url_random": spec.url_order == "random",
             "tls": spec.tls} for i in range(n)]


def build(spec) -> EngineHandle:
    """A local test's engine, or, for a RemoteTest, a handle whose far end is a
    perfkit server (perfkit.remote); HTTP load and the HTTP server."""
    if isinstance(spec, SocketReflect):  # the far end alone: a sink or a reflector on host:port
        from perfkit._sock import SockEngine
        return SockEngine([{"role": "udp_recv" if spec.mode == "rxonly" else "udp_reflect",
                            "local": (spec.host, spec.port), "size": spec.size, "flows": spec.flows,
                            "batch": 32, "duration": spec.duration, "netns": spec.netns}])
    if isinstance(spec, HttpLoad) and spec.processes > 1:  # each process its own open-file limit
        workers = http_workers(spec)
        t = spec.threads
        return ProcessHandle([workers[k * t:(k + 1) * t] for k in range(spec.processes)], "users")
    if isinstance(spec, (HttpLoad, HttpServe)):
        from perfkit._sock import SockEngine
        raise_fd_limit(getattr(spec, "users", 0) + getattr(spec, "connections", 0),
                        "users" if isinstance(spec, HttpLoad) else "connections")
        return SockEngine(http_workers(spec))
    raise_fd_limit(spec.flows + 64)
    if isinstance(spec, RemoteTest):
        return RemoteHandle(spec)
    from perfkit._sock import SockEngine
    return SockEngine(workers_for(spec))


def detail() -> dict:
    return {"engine": NAME}
