"""How a load splits over several engines (perfkit.cluster): split(spec, n) -> n specs whose
loads add up to spec's. One rule per kind that makes load; a spec that cannot be shared out
is a ValueError naming the field that cannot split."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import replace

from perfkit.kinds.dpdk_tcp import DpdkHttpClient
from perfkit.kinds.dpdk_udp import DpdkFlows
from perfkit.kinds.http import HttpLoad
from perfkit.kinds.qperf import LocalTest, RemoteTest
from perfkit.spec import DPDK_KERNEL_DRIVERS
from perfkit.units import Rate


def shares(total: int, n: int) -> list[int]:
    """total split into n integers as even as they go (the first ones take the rest)."""
    return [total // n + (1 if k < total % n else 0) for k in range(n)]


def _rate(rate, part: float):
    return None if rate is None else Rate(rate.value * part, rate.unit)


def _http(spec: HttpLoad, n: int) -> list:
    if spec.users < n:
        raise ValueError(f"users: {spec.users} virtual users cannot split over {n} engines (at least one each)")
    out = []
    for users in shares(spec.users, n):
        threads = min(spec.threads, users)
        out.append(replace(spec, users=users, rate=_rate(spec.rate, users / spec.users), threads=threads,
                           processes=max(1, min(spec.processes, users // threads))))
    return out


def _socket(spec, n: int) -> list:
    flows = shares(spec.flows, n) if spec.flows >= n else [spec.flows] * n   # fewer flows than engines: one each
    messages = shares(spec.messages, n) if spec.messages else [spec.messages] * n
    if spec.messages and spec.messages < n:
        raise ValueError(f"messages: {spec.messages} cannot split over {n} engines (at least one each)")
    return [replace(spec, rate=_rate(spec.rate, 1 / n), flows=f, messages=m) for f, m in zip(flows, messages)]


def _dpdk_flows(spec: DpdkFlows, n: int) -> list:
    if spec.flows < n:
        raise ValueError(f"flows: {spec.flows} flows cannot split over {n} engines (at least one each)")
    if spec.flows_max or spec.flow_rate:
        raise ValueError("flows_max: growing flows do not split over engines (one table of flows seen per run)")
    if spec.peer is not None:
        raise ValueError("peer: a second port in the generator's process does not split over engines "
                         "(the far end is one place: a sink or nginx in a lab host)")
    return [replace(spec, rate=_rate(spec.rate, 1 / n), ramp_to=_rate(spec.ramp_to, 1 / n),
                    probe_rate=_rate(spec.probe_rate, 1 / n), flows=f) for f in shares(spec.flows, n)]


def _dpdk_http(spec: DpdkHttpClient, n: int) -> list:
    if spec.more_ports:
        raise ValueError("more_ports: a client on several ports does not split over engines (one port each)")
    if spec.cc and spec.cc < n * spec.queues:
        raise ValueError(f"cc: {spec.cc} connections cannot split over {n} engines of {spec.queues} workers "
                         "(at least one each)")
    ccs = shares(spec.cc, n) if spec.cc else [0] * n
    return [replace(spec, cps=spec.cps / n, cc=cc) for cc in ccs]


RULES = {HttpLoad: _http, LocalTest: _socket, RemoteTest: _socket, DpdkFlows: _dpdk_flows,
         DpdkHttpClient: _dpdk_http}


def _place_port(spec, k: int, host):
    """Share k on the engine inside lab host host (perfkit.lab.Host): the spec's DPDK port as the
    first engine's, this engine's the same driver on its own host's interface, in its namespace,
    with the next src_ips addresses from spec.ip (every engine its own source addresses)."""
    driver, *args = spec.port.split(",")
    args = [a for a in args if not a.startswith("iface=")] + [f"iface={host.ifname}"]
    ip = ipaddress.ip_address(spec.ip) + k * spec.src_ips
    return replace(spec, port=",".join([driver, *args]), netns=host.netns_path, ip=str(ip))


def _place_client(spec, k: int, host):
    """A DPDK HTTP client's share k on lab host host: its port on the host's interface, its own
    address and client addresses the k-th block of the spec's range (every engine its own 4-tuples)."""
    (first, count), = spec.clients
    step = k * count
    driver, *args = spec.port.split(",")
    args = [a for a in args if not a.startswith("iface=")] + [f"iface={host.ifname}"]
    return replace(spec, port=",".join([driver, *args]), netns=host.netns_path,
                   ip=str(ipaddress.ip_address(spec.ip) + step),
                   clients=((str(ipaddress.ip_address(first) + step), count),))


# kinds whose shares each take a port of their engine's own host (perfkit.cluster: engines in lab hosts)
PLACES = {DpdkFlows: _place_port, DpdkHttpClient: _place_client}


def placed(shares_: list, lab_hosts: list) -> list:
    """Each share on its engine's lab host (PLACES); shares of other kinds as they are.
    A share placed outside the lab's addresses is a ValueError naming the field."""
    for cls in type(shares_[0]).__mro__:
        if cls in PLACES:
            return [PLACES[cls](s, k, h) for k, (s, h) in enumerate(zip(shares_, lab_hosts))]
    return shares_


def needs_place(spec) -> bool:
    """A spec whose shares each take a port of their own engine's host (a lab host): a DPDK port
    on a kernel interface (af_packet, af_xdp, tap); a net_null port runs as it is on every engine."""
    port = str(getattr(spec, "port", "")).split(",")[0]
    return any(cls in PLACES for cls in type(spec).__mro__) and re.sub(r"\d+$", "", port) in DPDK_KERNEL_DRIVERS


def split(spec, n: int) -> list:
    """n specs, one per engine, whose loads add up to spec's: HttpLoad splits its users (and its
    rate with them), LocalTest/RemoteTest their rate, flows and message count, DpdkFlows its
    rate (ramp and probe rates too) and flows, DpdkHttpClient its cps and cc."""
    if n < 1:
        raise ValueError(f"split: {n} engines, at least one needed")
    for cls in type(spec).__mro__:
        if cls in RULES:
            return [spec] if n == 1 else RULES[cls](spec, n)
    raise ValueError(f"{type(spec).__name__} does not split over engines "
                     f"(these do: {', '.join(c.__name__ for c in RULES)})")
