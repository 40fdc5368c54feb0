"""perfkit's TCP over DPDK (dperf's job): builds an HTTP server or client from a plan.

    handle = build(plan)      # the plan: perfkit.kinds.dpdk_tcp.plan(spec)

The same process-wide EAL, mbuf pool and ports as the dpdk engine
(perfkit.engines.dpdk: configure() its EalOptions). One worker thread per (port, queue),
which own the ports while they run (the ports are closed when the run ends). Workers
share nothing: each has its own socket table and counters.

The plan's keys (plain data):
    engine      "dpdk_tcp"
    ports       [{dev, netns, ip, queues}]: the ports to open, in order (dev: a vdev, a
                ring:NAME:0|1 end, a PCI address or a bond; ip: the IPv4 address the port
                answers for before the workers run, or None)
    workers     [dict]: one _dpdk.TcpEngine worker configuration each (TCP_WORKER_KEYS),
                with "port" (its index in ports) and "queue"; a port's queues in order
    wait_link   True: wait for a memif port's link before the workers start (a client
                opens connections at once)
"""
from __future__ import annotations

import os

from perfkit.engines import dpdk
from perfkit.engines.handle import EngineHandle

NAME = "dpdk_tcp"


def status() -> dict:
    st = dpdk.status()
    if not st["available"]:
        return st
    return {"available": True, "detail": st["detail"].split(":")[0] +
            ": HTTP server and client over perfkit's TCP on vdev, PCI and bond ports and ring:NAME:0|1 "
            "pairs, several ports and queues"}


def build(plan) -> EngineHandle:
    """Open the plan's ports and make their TCP workers (not started); closing the handle
    closes the ports. A spec is taken through its own plan() while callers still pass one."""
    if not isinstance(plan, dict):
        plan = plan.plan()
    if plan.get("engine") != NAME:
        raise ValueError(f"engine: a plan for {plan.get('engine')!r}, not {NAME}")
    specs = plan["ports"]
    dpdk.csum_mode()   # a bad value: one line before EAL starts
    dpdk.eal([p["dev"] for p in specs])
    from perfkit import _dpdk  # the DPDK extension is built only where DPDK is installed
    ports = []
    try:
        for p in specs:
            port = _dpdk.Port(p["dev"], netns=p["netns"], ip=p["ip"], queues=p["queues"])
            ports.append(port)
            dpdk.use_csum_mode(port)
            dpdk.say_setup(port)
            if port.queues != p["queues"]:
                raise ValueError(f"queues: port {p['dev']} took {port.queues} queues, not {p['queues']}")
        if plan.get("wait_link"):
            dpdk.wait_memif(ports)
        workers = [dict(w, cpu=w["cpu"] if "cpu" in w else dpdk.worker_cpu(k)) for k, w in enumerate(plan["workers"])]
        _check_cpus(workers)
        return _dpdk.TcpEngine(ports if len(ports) > 1 else ports[0],
                               workers if len(workers) > 1 else workers[0], own_ports=True)
    except BaseException:
        for port in reversed(ports):
            port.close()
        raise


def _check_cpus(workers) -> None:
    """A CPU a worker is pinned to (dperf's cpu line) that this process may not use: one line."""
    allowed = os.sched_getaffinity(0)
    bad = sorted({w["cpu"] for w in workers if w["cpu"] >= 0 and w["cpu"] not in allowed})
    if bad:
        raise ValueError(f"cpus: CPU {', '.join(map(str, bad))} not among the CPUs this process may use "
                         f"({dpdk.cpu_list(allowed)})")


run_environment = dpdk.run_environment   # the port's setup, recorded with the run


def detail() -> dict:
    return {**dpdk.detail(), "engine": NAME}
