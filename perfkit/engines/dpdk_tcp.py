"""perfkit's TCP over DPDK (issue 6): DpdkHttpServer and DpdkHttpClient specs.

    perfkit.Run(DpdkHttpServer(port="ring:t:1", ...))   # engine "dpdk_tcp"

The same process-wide EAL, mbuf pool and ports as the dpdk engine
(perfkit.engines.dpdk: configure() its EalOptions); one worker thread per run,
which owns the port while it runs (the port is closed when the run ends).
"""
from __future__ import annotations

from perfkit.engines import dpdk
from perfkit.spec import DpdkHttpClient, DpdkHttpServer

NAME = "dpdk_tcp"


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


def build(spec):
    """Open the spec's port and make its TCP worker (not started); closing the
    handle closes the port."""
    cfg = config(spec)
    dpdk.eal()
    from perfkit import _dpdk
    port = _dpdk.Port(spec.port, netns=spec.netns, ip=spec.ip if ":" not in spec.ip else None)  # the TCP worker answers ND
    try:
        cfg["cpu"] = dpdk._cpu(0)
        return _dpdk.TcpEngine(port, cfg, own_ports=True)
    except BaseException:
        port.close()
        raise


def detail() -> dict:
    return {**dpdk.detail(), "engine": NAME}
