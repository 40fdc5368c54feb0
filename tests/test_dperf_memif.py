"""perfkit's DPDK TCP between two processes over net_memif (issue 6): the server in a
child process (its own EAL), the client here; counts agree exactly."""
import json
import os
import subprocess
import sys
import time

import pytest

from perfkit.errors import EngineError
from perfkit.spec import DpdkHttpClient

_dpdk = pytest.importorskip("perfkit._dpdk", reason="perfkit was built without DPDK")
from perfkit.engines import dpdk, dpdk_tcp  # noqa: E402
from perfkit.stats import COUNTER_NAMES  # noqa: E402

SERVER = r"""
import json, sys, time
from perfkit.engines import dpdk_tcp
from perfkit.spec import DpdkHttpServer
from perfkit.stats import COUNTER_NAMES
spec = DpdkHttpServer(port=sys.argv[1], payload_size=int(sys.argv[2]), keepalive=sys.argv[3] == "1", duration=60)
h = dpdk_tcp.build(spec)
h.start()
print("READY", flush=True)
sys.stdin.readline()          # the parent says when its client is done
h.stop()
h.join()
print(json.dumps(dict(zip(COUNTER_NAMES, h.snapshot()[0][0]))), flush=True)
h.close()
"""


@pytest.fixture
def eal():
    try:
        return dpdk.eal()
    except EngineError as exc:
        pytest.skip(f"DPDK EAL does not start here: {exc}")


@pytest.mark.parametrize("payload,client_kw", [
    (100, dict(cps=1000, duration=1)),
    (1400, dict(cps=500, cc=50, keepalive="5ms", duration=1)),
])
def test_client_and_server_in_two_processes_over_memif(eal, tmp_path, payload, client_kw):
    sock = f"/tmp/pk-memif-{os.getpid()}-{payload}.sock"
    ka = "1" if "cc" in client_kw else "0"
    child = subprocess.Popen([sys.executable, "-P", "-c", SERVER, f"net_memif0,role=server,socket={sock}",
                              str(payload), ka], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        if "READY" not in line:
            pytest.skip(f"the memif server did not start: {line}{child.stderr.read()[-500:]}")
        h = dpdk_tcp.build(DpdkHttpClient(port=f"net_memif1,role=client,socket={sock}", **client_kw))
        try:
            h.start()
            deadline = time.monotonic() + 30
            while h.running():
                assert time.monotonic() < deadline
                time.sleep(0.02)
            h.join()
            c = dict(zip(COUNTER_NAMES, h.snapshot()[0][0]))
            assert h.error() is None
            time.sleep(0.2)             # the server's last ACKs, before either side leaves
            child.stdin.write("done\n")
            child.stdin.flush()
            s = json.loads(child.stdout.readline())
        finally:
            h.close()
        assert child.wait(timeout=30) == 0, child.stderr.read()[-2000:]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if os.path.exists(sock):
            os.unlink(sock)
    n = c["sock_open"]
    assert n >= 50 and c["sock_error"] == s["sock_error"] == 0
    assert c["http_2xx"] == c["http_req"] == s["http_get"] and c["http_err"] == 0
    assert c["sock_close"] == s["sock_close"] == s["sock_open"] == n
    for k in ("syn", "fin"):
        assert c[f"{k}_tx"] == s[f"{k}_rx"] and s[f"{k}_tx"] == c[f"{k}_rx"]
    # frames: all the server's arrive; the client's first ARP requests may go out before the link is up
    assert s["pkts_tx"] == c["pkts_rx"] and s["pkts_rx"] <= c["pkts_tx"] <= s["pkts_rx"] + 16
    assert s["bad_rx"] == c["bad_rx"] == s["tcp_drop"] == c["tcp_drop"] == 0
    assert c["bytes_rx"] == s["bytes_tx"]
    if "cc" in client_kw:
        assert n == client_kw["cc"] and c["http_req"] > 10 * n
