"""The DPDK engine (issue 5: EAL, ports, UDP flows; issue 6: TCP/HTTP).

Until it lands, perfkit builds a probe extension against libdpdk where it is
found, so the build path is proven; the engine reports itself unavailable.
"""
from __future__ import annotations

NAME = "dpdk"


def status() -> dict:
    try:
        from perfkit import _dpdk
    except ImportError:
        return {"available": False,
                "detail": "not built: libdpdk was not found at build time "
                          "(Debian: apt install libdpdk-dev pkg-config, then reinstall perfkit)"}
    return {"available": False,
            "detail": f"built against {_dpdk.version()}; its packet engine is not implemented yet"}


def build(spec):
    raise ValueError("engine: the DPDK packet engine is not implemented yet")


def detail() -> dict:
    return {"engine": NAME}
