"""What the DPDK test files share: the EAL fixture, counter reads, waiting for workers and
the Internet checksum for frames built by hand. Import it after the importorskip of
perfkit._dpdk (the test file skips first where perfkit has no DPDK)."""
import struct
import time

import pytest

from perfkit.stats import COUNTER_NAMES
from perfkit.engines import dpdk
from perfkit.errors import EngineError


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


def csum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of data."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
