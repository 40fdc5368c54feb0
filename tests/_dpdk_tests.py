"""What the DPDK test files share: the EAL fixture, counter reads, waiting for workers and
the Internet checksum for frames built by hand (from _labs.py). Import it after the importorskip of
perfkit._dpdk (the test file skips first where perfkit has no DPDK)."""
import time

import pytest

from perfkit.stats import COUNTER_NAMES
from perfkit.engines import dpdk
from perfkit.errors import EngineError
from _labs import csum  # noqa: F401 (the test files take it from here too)


@pytest.fixture(scope="session")
def eal():
    try:
        return dpdk.eal()
    except EngineError as exc:
        pytest.skip(f"DPDK EAL does not start here: {exc}")


def counters(handle, worker):
    """One worker's counters by name."""
    return dict(zip(COUNTER_NAMES, handle.snapshot()[worker][0]))


def wait_done(handle, timeout=10.0):
    deadline = time.monotonic() + timeout
    while handle.running():
        assert time.monotonic() < deadline, "workers did not stop in time"
        time.sleep(0.01)
    handle.join()


def no_leaks():
    """Every port closed and every mbuf back in the pool."""
    res = dpdk.resources()
    assert res["ports_open"] == 0 and res["mbufs_free"] == res["mbufs"], res


def mac_bytes(mac: str) -> bytes:
    return bytes(int(x, 16) for x in mac.split(":"))


def pull(port, until=None, timeout=2.0):
    """Frames from a raw port until `until` of them (or timeout s) have come."""
    out, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = port.recv(64)
        out += got
        if until is not None and len(out) >= until:
            break
        if not got:
            time.sleep(0.001)
    return out


def push_draining(raw, frames, timeout=20.0):
    """Every frame into the ring, draining what comes back meanwhile."""
    deadline, i = time.monotonic() + timeout, 0
    while i < len(frames):
        i += raw.send(frames[i:i + 64])
        raw.recv(64)
        assert time.monotonic() < deadline, "the ring stayed full"
