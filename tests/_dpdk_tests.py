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
