"""How soon run.set_rate reaches a running DPDK generator (issue 30): a ring pair in this process,
20 kpps, then N changes of the target; each time, the microseconds from the call until the
generator's rate_target gauge shows the new rate (Python polls its counter block every 50 us, so
this bounds the time to its next burst from above). --engine socket: the socket engine's udp_bw
sender over loopback instead (its next send batch).

    python3 -P bench/set_rate_latency.py [-n 40] [--engine dpdk|socket]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("PERFKIT_SANDBOX", "1")   # the project's own traffic stays in this process

from perfkit.engines import dpdk, socket  # noqa: E402
from perfkit.kinds.dpdk_udp import DpdkFlows  # noqa: E402
from perfkit.kinds.qperf import LocalTest  # noqa: E402
from perfkit.stats import COUNTER_NAMES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=40, help="rate changes (default 40)")
    ap.add_argument("--engine", choices=("dpdk", "socket"), default="dpdk", help="dpdk (default) or socket")
    a = ap.parse_args()
    n = a.n
    rt = COUNTER_NAMES.index("rate_target")
    if a.engine == "socket":
        h = socket.build(LocalTest("udp_bw", rate="20kpps", duration=1 + 0.05 * n))
    else:
        h = dpdk.build(DpdkFlows(port="ring:bsr:0", peer="ring:bsr:1", rate="20kpps", duration=1 + 0.05 * n,
                                 flows=4))
    lat = []
    try:
        h.start()
        time.sleep(0.2)
        gen = h.roles.index("dpdk_send" if a.engine == "dpdk" else "udp_send")
        for k in range(n):
            want, t0 = 30_000 + 1000 * k, time.perf_counter()
            h.set_rate(want)
            while h.snapshot()[gen][0][rt] != want and time.perf_counter() < t0 + 1.0:
                time.sleep(0.00005)
            lat.append((time.perf_counter() - t0) * 1e6)
            time.sleep(0.02)
    finally:
        h.stop()
        h.join()
        h.close()
    lat.sort()
    print(f"set_rate -> rate_target seen: n={n} median {statistics.median(lat):.0f} us, "
          f"p90 {lat[int(0.9 * n)]:.0f} us, max {lat[-1]:.0f} us ({a.engine}; load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
