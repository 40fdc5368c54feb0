"""How a load splits over several engines (perfkit.cluster): split(spec, n) -> n specs whose
loads add up to spec's. One rule per kind that makes load; a spec that cannot be shared out
is a ValueError naming the field that cannot split."""
from __future__ import annotations

from dataclasses import replace

from perfkit.kinds.http import HttpLoad
from perfkit.kinds.qperf import LocalTest, RemoteTest
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


RULES = {HttpLoad: _http, LocalTest: _socket, RemoteTest: _socket}


def split(spec, n: int) -> list:
    """n specs, one per engine, whose loads add up to spec's: HttpLoad splits its users (and its
    rate with them), LocalTest/RemoteTest their rate, flows and message count."""
    if n < 1:
        raise ValueError(f"split: {n} engines, at least one needed")
    for cls in type(spec).__mro__:
        if cls in RULES:
            return [spec] if n == 1 else RULES[cls](spec, n)
    raise ValueError(f"{type(spec).__name__} does not split over engines "
                     f"(these do: {', '.join(c.__name__ for c in RULES)})")
