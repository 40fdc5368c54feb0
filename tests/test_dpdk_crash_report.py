"""A native crash in a process that started DPDK's EAL names its thread and its native stack
on stderr, then Python's faulthandler (if on) and the default action still follow: the memif
server child of test_dperf_memif died of SIGSEGV in CI with only a Python stack to show."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")

CRASH = r"""
import ctypes, faulthandler, threading, time
faulthandler.enable()
from perfkit.engines import dpdk
from perfkit.errors import EngineError
try:
    dpdk.eal()
except EngineError as exc:
    print("NO EAL", exc, flush=True)
    raise SystemExit(0)
t = threading.Thread(target=lambda: ctypes.string_at(0x10))   # a read of an unmapped page
t.start()
t.join()
"""


def test_a_native_crash_names_its_thread_and_stack_then_faulthandler_and_the_default():
    out = subprocess.run([sys.executable, "-P", "-c", CRASH], capture_output=True, text=True, timeout=120)
    if out.stdout.startswith("NO EAL"):
        pytest.skip(f"DPDK EAL does not start here: {out.stdout}")
    assert out.returncode == -11, (out.returncode, out.stderr[-2000:])
    err = out.stderr
    comm = os.path.basename(sys.executable)[:15]   # the thread's name: the process's, python or python3
    first = err.index(f"perfkit: native crash: signal 11 at address 0x10 in thread '{comm}'; its stack:\n")
    stack = err[first:].splitlines()[1:6]
    assert all("[0x" in ln for ln in stack), stack   # backtrace_symbols lines: module(+offset)[address]
    assert err.index("Fatal Python error: Segmentation fault") > first   # faulthandler's, after ours
