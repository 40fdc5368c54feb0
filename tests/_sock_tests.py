"""What the socket-engine tests share: a perfkit server in a thread of this process, the
engine's worker threads as the kernel sees them, and the skip for a one-CPU machine."""
import contextlib
import json
import os
import re
import subprocess
import sys
import threading

import pytest

from perfkit.remote import Server

two_cpus = pytest.mark.two_cpus      # conftest.py skips these where the machine lacks what they say
needs_strace = pytest.mark.strace


def syscalls_of(syscalls: str, *perfkit_local: str) -> tuple[dict, dict[str, tuple[int, int]]]:
    """`perfkit local ... --json` under `strace -f -c -e trace=syscalls`: the run's summary,
    and {syscall: (calls, failed calls)} over all its threads."""
    out = subprocess.run(["strace", "-f", "-c", "-e", f"trace={syscalls}", sys.executable, "-P", "-m", "perfkit",
                          "local", *perfkit_local, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+\s+)?(\w+)$", out.stderr, re.M)
    return (json.loads(out.stdout.splitlines()[-1])["summary"],
            {name: (int(calls), int(failed or 0)) for calls, failed, name in rows})


@contextlib.contextmanager
def serving(**options):
    """A perfkit server on 127.0.0.1, any free port (.port), in a thread of this process; what
    it logged is in .lines. Stopped, and its thread gone, on the way out."""
    lines = []
    srv = Server("127.0.0.1", 0, log=lines.append, **options)
    srv.lines = lines
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.stop()
        t.join(timeout=10)
    assert not t.is_alive()


def worker_threads(status_field: str | None = None) -> dict[int, tuple]:
    """Every socket-engine worker thread of this process now (the engine names them pk-sock/N)
    by TID: (name, the CPUs it may run on), and with status_field, that line's number of
    /proc/.../status as well (voluntary_ctxt_switches: how often it slept)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            if not name.startswith("pk-sock/"):
                continue
            found = (name, tuple(sorted(os.sched_getaffinity(int(tid)))))
            if status_field:
                with open(f"/proc/self/task/{tid}/status") as f:
                    found += (next(int(line.split()[1]) for line in f if line.startswith(status_field + ":")),)
            out[int(tid)] = found
        except (FileNotFoundError, ProcessLookupError):   # the thread ended meanwhile
            pass
    return out
