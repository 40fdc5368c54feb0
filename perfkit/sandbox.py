"""The network guard of perfkit's own tests and benchmarks.

With PERFKIT_SANDBOX=1 in the environment (tests/conftest.py sets it for a pytest session,
bench/ for its runs; child processes inherit it), check() refuses every destination that is
not loopback, an address of the ranges perfkit's lab gives its namespaces, or a documentation
address; without it check() lets everything through and the product's own rules apply.
Standard library only: the spec checks and tests/conftest.py call it on every address.
"""
from __future__ import annotations

import ipaddress
import os

ENV = "PERFKIT_SANDBOX"

# loopback; the lab's namespaces (perfkit.lab: RFC 2544 benchmarking blocks); documentation
ALLOWED = tuple(ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "::1/128", "198.18.0.0/15", "2001:2::/48", "192.0.2.0/24", "2001:db8::/32"))
RULE = ("traffic goes only to loopback (127.0.0.0/8, ::1), perfkit lab namespaces "
        "(198.18.0.0/15, 2001:2::/48) or documentation addresses (192.0.2.0/24, 2001:db8::/32)")
LOCALHOST = ("localhost", "localhost.")


def enabled() -> bool:
    """True while the guard is on (read on every call: a test may turn it off for a moment)."""
    return os.environ.get(ENV, "").strip() not in ("", "0")


def allowed(address) -> bool:
    """Whether address (an IP address, "[v6]", "localhost", or an ipaddress object) is one the
    rule lets traffic go to; a name other than localhost is not (the guard resolves nothing)."""
    text = str(address).strip()
    if text.lower() in LOCALHOST:
        return True
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])   # a zone (fe80::1%eth0) names no range
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:   # ::ffff:10.0.0.1 goes to 10.0.0.1
        ip = ip.ipv4_mapped
    return any(ip in net for net in ALLOWED if net.version == ip.version)


def check(address, what: str = "destination"):
    """address unchanged where the guard is off or the rule allows it; else ValueError."""
    if enabled() and not allowed(address):
        raise ValueError(f"{what}: {address} is refused by the network guard ({ENV}=1): {RULE}")
    return address
