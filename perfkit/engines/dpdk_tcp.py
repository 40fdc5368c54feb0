"""perfkit's TCP over DPDK (dperf's job): DpdkHttpServer and DpdkHttpClient specs.

    perfkit.Run(DpdkHttpServer(port="ring:t:1", ...))   # engine "dpdk_tcp"

The same process-wide EAL, mbuf pool and ports as the dpdk engine
(perfkit.engines.dpdk: configure() its EalOptions); one worker thread per queue
(spec.queues), which own the port while they run (the port is closed when the run
ends). Workers share nothing: each has its own socket table, counters and, on the
client, its slice of the client port range and its share of cps and cc.
"""
from __future__ import annotations

from perfkit.engines import dpdk
from perfkit.engines.handle import EngineHandle
from perfkit.kinds import DpdkHttpClient, DpdkHttpServer

NAME = "dpdk_tcp"
# The counter groups (perfkit.stats.GROUPS) the TCP worker writes, client and server alike.
COUNTER_GROUPS = ("traffic", "tcp", "sock", "http", "latency", "nic", "cpu")


def counter_groups(spec) -> tuple[str, ...]:
    return COUNTER_GROUPS


def status() -> dict:
    st = dpdk.status()
    if not st["available"]:
        return st
    return {"available": True, "detail": st["detail"].split(":")[0] +
            ": HTTP server and client over perfkit's TCP on vdev ports and ring:NAME:0|1 pairs"}


def config(spec) -> dict:
    """The worker's settings for _dpdk.TcpEngine."""
    common = {"ip": spec.ip, "clients": [tuple(r) for r in spec.clients], "listen": spec.listen,
              "listen_num": spec.listen_num, "mss": spec.mss, "tos": spec.tos, "vlan": spec.vlan,
              "tcp_rst": spec.tcp_rst, "rto": spec.retransmit_timeout, "retries": spec.retries,
              "burst": spec.burst, "duration": spec.duration}
    if isinstance(spec, DpdkHttpServer):
        return {**common, "role": "server", "msg": spec.response_bytes(), "keepalive": spec.keepalive}
    if isinstance(spec, DpdkHttpClient):
        return {**common, "role": "client", "server_ip": spec.server, "gateway_ip": spec.gateway,
                "gateway_mac": spec.gateway_mac, "lport_range": tuple(spec.lport_range),
                "msg": spec.request_bytes(), "cps": float(spec.cps), "cc": int(spec.cc),
                "ka_interval": spec.keepalive, "ka_requests": spec.keepalive_requests,
                "launch_num": spec.launch_num, "slow_start": spec.slow_start, "wait": spec.wait,
                "fast_close": spec.fast_close, "flood": spec.flood}
    raise ValueError(f"engine: dpdk_tcp runs DpdkHttpServer and DpdkHttpClient specs, "
                     f"not {type(spec).__name__}")


def _split(lo: int, n: int, parts: int, k: int) -> tuple[int, int]:
    """(first, count) of slice k when lo .. lo + n - 1 is cut into parts near-equal slices."""
    base, extra = divmod(n, parts)
    return lo + k * base + min(k, extra), base + (1 if k < extra else 0)


def workers(spec) -> list[dict]:
    """One config per queue: the client's ports, cps and cc cut into spec.queues shares."""
    cfg = config(spec)
    q = spec.queues
    if q == 1:
        return [cfg]
    out = []
    for k in range(q):
        w = dict(cfg)
        if isinstance(spec, DpdkHttpClient):
            lo, hi = spec.lport_range
            first, n = _split(lo, hi - lo + 1, q, k)
            w["lport_range"] = (first, first + n - 1)
            w["cps"] = float(spec.cps) / q
            if spec.cc:
                w["cc"] = _split(0, int(spec.cc), q, k)[1]
        out.append(w)
    return out


def build(spec) -> EngineHandle:
    """Open the spec's port and make its TCP worker (not started); closing the
    handle closes the port."""
    cfgs = workers(spec)
    dpdk.eal([spec.port])
    from perfkit import _dpdk  # the DPDK extension is built only where DPDK is installed
    port = _dpdk.Port(spec.port, netns=spec.netns, ip=spec.ip if ":" not in spec.ip else None,  # the TCP worker answers ND
                      queues=spec.queues)
    try:
        if port.queues != spec.queues:
            raise ValueError(f"queues: port {spec.port} took {port.queues} queues, not {spec.queues}")
        if isinstance(spec, DpdkHttpClient):
            dpdk._wait_memif([port])    # a client opens connections at once: the link first
        for k, w in enumerate(cfgs):
            w["cpu"] = dpdk._cpu(k)
        return _dpdk.TcpEngine(port, cfgs if spec.queues > 1 else cfgs[0], own_ports=True)
    except BaseException:
        port.close()
        raise


def detail() -> dict:
    return {**dpdk.detail(), "engine": NAME}
