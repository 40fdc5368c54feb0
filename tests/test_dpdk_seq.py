"""Injected reordering, duplication and loss counted exactly (issue 5's tests: "injected
reordering and duplication are counted exactly"), in one process over a ring pair and
between two processes over memif. The frames are the generator's own: a DPDK generator
sends into a ring pair, the other end captures them raw; the test swaps, duplicates and
drops known ones and sends the result into an rxonly receiver, which must count exactly
those swaps (reordered), copies (duplicates) and gaps (lost)."""
import json
import struct
import subprocess
import sys
import time

import pytest

_dpdk = pytest.importorskip(
    "perfkit._dpdk", reason="perfkit was built without DPDK (Debian: apt install libdpdk-dev "
                            "pkg-config, then reinstall perfkit)")
from perfkit.engines import dpdk  # noqa: E402
from _dpdk_tests import counters, wait_done  # noqa: E402,F401

N = 500
SWAPS = (20, 60, 100, 140, 180)          # frame i and i+1 change places: one reordered each
DUPS = (220, 240, 260, 280, 300, 320, 340)   # a copy right after the frame: one duplicate each
DROPS = (400, 420, 440)                  # never sent: one lost each (settled when the run ends)

# shared with the memif child below: capture the generator's frames, then inject
INJECT = '''
def capture(name, n):
    """n frames of perfkit's generator (128 B, one flow), caught raw at a ring pair's far end."""
    import time
    from perfkit import _dpdk
    tx, rx = _dpdk.Port(f"ring:{name}:0", ip="198.18.0.1"), _dpdk.Port(f"ring:{name}:1")
    h = _dpdk.DpdkEngine([tx], [{"role": "dpdk_send", "port": 0, "flows": 1, "size": 128, "rate": n / 0.05,
                                 "duration": 0.05, "dst_mac": "02:00:00:00:00:02"}])
    h.start()
    while h.running():
        time.sleep(0.005)
    h.join()
    sent = h.flow_sent(0)
    h.close()
    frames = []
    while True:
        got = rx.recv(64)
        if not got:
            break
        frames += got
    tx.close()
    rx.close()
    assert sent == [n] and len(frames) == n, (sent, len(frames))
    return frames


def inject(frames, swaps, dups, drops):
    out = list(frames)
    for i in swaps:
        out[i], out[i + 1] = out[i + 1], out[i]
    for i in sorted(dups, reverse=True):
        out.insert(i + 1, out[i])
    drop = {id(frames[i]) for i in drops}
    return [f for f in out if id(f) not in drop]


def send_all(port, frames):
    import time
    sent, deadline = 0, time.monotonic() + 10
    while sent < len(frames) and time.monotonic() < deadline:
        sent += port.send(frames[sent:sent + 32])
    return sent
'''
exec(INJECT)   # noqa: S102 (the same functions here and in the child process)


def _seqs(frames):
    """(flow, seq) of each frame: pk_wire_hdr after Ethernet, IPv4 and UDP headers."""
    out = []
    for f in frames:
        magic, flow, seq = struct.unpack_from("=IIQ", f, 42)
        assert magic == 0x706B7431
        out.append((flow, seq))
    return out


def _wait_rx(h, want, timeout=10.0):
    deadline = time.monotonic() + timeout
    while counters(h, 0)["udp_rx"] < want and time.monotonic() < deadline:
        time.sleep(0.01)


def test_injected_reordering_duplicates_and_loss_over_a_ring_pair(eal):
    frames = capture("sqa", N)   # noqa: F821 (from INJECT)
    assert _seqs(frames) == [(0, s) for s in range(N)]   # the generator's own: one flow, 0 .. N-1
    bad = inject(frames, SWAPS, DUPS, DROPS)   # noqa: F821
    src, dst = _dpdk.Port("ring:sqb:0"), _dpdk.Port("ring:sqb:1", ip="198.18.0.2")
    h = _dpdk.DpdkEngine([dst], [{"role": "dpdk_recv", "port": 0, "flows": 1, "duration": 20.0}])
    try:
        h.start()
        assert send_all(src, bad) == len(bad) == N + len(DUPS) - len(DROPS)   # noqa: F821
        _wait_rx(h, len(bad))
        h.stop()
        wait_done(h)
        c = counters(h, 0)
    finally:
        h.close()
        src.close()
        dst.close()
    assert c["udp_rx"] == len(bad)
    assert c["seq_reorder"] == len(SWAPS) and c["seq_dup"] == len(DUPS) and c["seq_lost"] == len(DROPS)
    assert c["udp_rx"] - c["seq_dup"] + c["seq_lost"] == N      # sent = received + lost, exactly
    res = dpdk.resources()
    assert res["ports_open"] == 0 and res["mbufs_free"] == res["mbufs"]


CHILD = INJECT + '''
import json, sys, time
from perfkit.engines import dpdk
dpdk.eal()
from perfkit import _dpdk
sock, n = sys.argv[1], int(sys.argv[2])
swaps, dups, drops = (tuple(json.loads(a)) for a in sys.argv[3:6])
bad = inject(capture("sqc", n), swaps, dups, drops)
p = _dpdk.Port(f"net_memif0,role=client,socket={sock}")
t = time.monotonic()
while not p.link_up and time.monotonic() - t < 10:
    time.sleep(0.01)
sent = send_all(p, bad)
time.sleep(0.3)   # stop sending well before leaving (memif and a peer going away)
p.close()
print(json.dumps({"sent": sent, "frames": len(bad)}), flush=True)
'''


def test_injected_reordering_duplicates_and_loss_between_two_processes_over_memif(eal, tmp_path):
    sock = str(tmp_path / "memif.sock")
    srv = _dpdk.Port(f"net_memif0,role=server,socket={sock}", ip="198.18.0.2")
    h = _dpdk.DpdkEngine([srv], [{"role": "dpdk_recv", "port": 0, "flows": 1, "duration": 30.0}], own_ports=True)
    try:
        h.start()
        child = subprocess.run([sys.executable, "-P", "-c", CHILD, sock, str(N), json.dumps(SWAPS),
                                json.dumps(DUPS), json.dumps(DROPS)], capture_output=True, text=True, timeout=90)
        assert child.returncode == 0, child.stderr[-2000:]
        out = json.loads(child.stdout.strip().splitlines()[-1])
        _wait_rx(h, out["frames"])
        h.stop()
        wait_done(h)
        c = counters(h, 0)
    finally:
        h.close()
    assert out["sent"] == out["frames"] == N + len(DUPS) - len(DROPS)
    assert c["udp_rx"] == out["sent"]
    assert c["seq_reorder"] == len(SWAPS) and c["seq_dup"] == len(DUPS) and c["seq_lost"] == len(DROPS)
    assert c["udp_rx"] - c["seq_dup"] + c["seq_lost"] == N
