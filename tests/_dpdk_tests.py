"""What the DPDK test files share (the EAL fixture is in conftest.py): counter reads, waiting for workers,
the Internet checksum for frames built by hand (from _labs.py) and a memif proxy that
stalls a handshake. Import it after the importorskip of perfkit._dpdk (the test file skips
first where perfkit has no DPDK)."""
import contextlib
import json
import os
import select
import socket
import sys
import threading
import time

import pytest

from perfkit.stats import COUNTER_NAMES
from perfkit.engines import dpdk
import _labs
from _labs import csum, ping, udp_stats  # noqa: F401 (csum: the test files take it from here too)


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


def close_while_another_thread_joins(h):
    """The close-while-joining check (from _labs.py), then every port and mbuf is back."""
    _labs.close_while_another_thread_joins(h, within=2.0)
    no_leaks()


def stop_when_received(h, n, timeout=3.0):
    """Worker 0's counters once it has taken n frames (or timeout s passed) and stopped."""
    deadline = time.monotonic() + timeout
    while counters(h, 0)["pkts_rx"] < n and time.monotonic() < deadline:
        time.sleep(0.01)
    h.stop()
    wait_done(h)
    return counters(h, 0)


def kernel_counts(lab, h, peer_host):
    """Run flows built into h: the kernel's UDP counters in peer_host equal our TX,
    and its ARP answer was used. Returns the MAC the generator resolved."""
    before = lab.call(peer_host, udp_stats)
    try:
        h.start()
        wait_done(h, timeout=10)
        tx = counters(h, 0)
        mac, broadcast = h.dst_mac(0)
    finally:
        h.close()
    after = lab.call(peer_host, udp_stats)
    got = (after["InDatagrams"] - before["InDatagrams"]) + (after["NoPorts"] - before["NoPorts"])
    assert broadcast is False and tx["arp_rx"] >= 1          # the kernel answered our ARP request
    assert tx["pkts_tx"] == 20_000 and got == tx["pkts_tx"]  # it received every frame we sent
    assert after["InCsumErrors"] == before["InCsumErrors"] and after["InErrors"] == before["InErrors"]
    return mac


def pings_answered(lab, refl, pinger, addr):
    """The reflector built into refl answers 3 pings from the kernel of lab host pinger."""
    try:
        refl.start()
        answered = lab.call(pinger, ping, addr, 3, timeout=20)
        refl.stop()
        wait_done(refl)
        c = counters(refl, 0)
    finally:
        refl.close()
    assert answered == 3 and c["icmp_rx"] >= 3 and c["bad_rx"] == 0
    res = dpdk.resources()
    assert res["ports_open"] == 0 and res["mbufs_free"] == res["mbufs"]


def child_line(proc, timeout=30):
    """The next JSON line of a child process; a skip where it says the PMD does not start."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the child printed nothing in time"
    line = proc.stdout.readline()
    assert line, proc.communicate()[1][-3000:]
    out = json.loads(line)
    if "skip" in out:
        proc.wait(10)
        pytest.skip(f"net_af_xdp does not start here: {out['skip']}")
    return out


def run_pair(server_spec, client_spec, during=None, timeout=30.0, stop_timeout=10.0):
    """DPDK TCP server and client in this process over one ring pair, the client run to its end
    (within timeout s; during(cli, srv) sampled meanwhile, if given), then the server stopped
    (within stop_timeout s): (client counters, server counters, the samples)."""
    from perfkit.engines import dpdk_tcp
    srv = dpdk_tcp.build(server_spec)
    try:
        cli = dpdk_tcp.build(client_spec)
        try:
            srv.start()
            cli.start()
            samples, deadline = [], time.monotonic() + timeout
            while cli.running():
                assert time.monotonic() < deadline, "the client did not stop in time"
                if during:
                    samples.append(during(cli, srv))
                time.sleep(0.02)
            cli.join()
            time.sleep(0.2)         # the server's last ACKs
            srv.stop()
            wait_done(srv, stop_timeout)
            assert cli.error() is None and srv.error() is None
            return counters(cli, 0), counters(srv, 0), samples
        finally:
            cli.close()
    finally:
        srv.close()


@contextlib.contextmanager
def serving(spec, raw_port: str, timeout: float = 10.0):
    """A DPDK TCP server built from spec, running, and a raw Port (raw_port, the other end of
    its ring) playing the client: yields (server, raw, the server's MAC, spec)."""
    from perfkit import _dpdk
    from perfkit.engines import dpdk_tcp
    srv = dpdk_tcp.build(spec)
    raw = _dpdk.Port(raw_port)
    try:
        srv.start()
        yield srv, raw, srv.port_list[0].mac, spec
    finally:
        srv.stop()
        wait_done(srv, timeout)
        srv.close()
        raw.close()
        no_leaks()


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


def fuzz_server(spec, raw_port, make_frames):
    """A DPDK TCP server built from spec and running, fed make_frames(its MAC) from raw_port
    (the other end of its ring), what it sends drained: its counters, checked alive (still
    running, no error, every frame taken, every socket opened accounted for)."""
    from perfkit import _dpdk
    from perfkit.engines import dpdk_tcp
    srv = dpdk_tcp.build(spec)
    raw = _dpdk.Port(raw_port)
    try:
        srv.start()
        frames = make_frames(srv.port_list[0].mac)
        push_draining(raw, frames)
        time.sleep(0.3)
        while raw.recv(64):
            pass
        c = counters(srv, 0)
        assert srv.running() and srv.error() is None
        assert c["pkts_rx"] == len(frames)
        assert c["sock_open"] == c["sock_close"] + c["sock_error"] + c["sock_current"]
    finally:
        srv.stop()
        wait_done(srv, 20)
        srv.close()
        raw.close()
    return c


def fuzz_client(make_spec, raw_port, make_frames):
    """A DPDK TCP client built from make_spec(raw_port's MAC: its gateway), fed
    make_frames(its MAC) from raw_port while it runs to its end: its counters, checked (no
    error, every frame taken, no socket left open, every one accounted for)."""
    from perfkit import _dpdk
    from perfkit.engines import dpdk_tcp
    raw = _dpdk.Port(raw_port)
    try:
        cli = dpdk_tcp.build(make_spec(raw.mac))
        try:
            frames = make_frames(cli.port_list[0].mac)
            cli.start()             # after building them: the client runs 1 s (a loaded machine builds slowly)
            push_draining(raw, frames)
            wait_done(cli, 20)
            c = counters(cli, 0)
            assert cli.error() is None
            assert c["pkts_rx"] == len(frames) and c["sock_current"] == 0
            assert c["sock_open"] == c["sock_close"] + c["sock_error"]
        finally:
            cli.close()
    finally:
        raw.close()
    return c


# A generator on a memif client in a process of its own: python -P -c MEMIF_CLIENT SOCK RATE
# SECONDS FLOWS [LINGER]; prints what it sent as a JSON line. LINGER s before it closes: memif
# drops what is still in the ring when this side leaves, a server that reads late wants it.
MEMIF_CLIENT = """
import json, sys, time
from perfkit.engines import dpdk
dpdk.eal()
from perfkit import _dpdk
from perfkit.stats import COUNTER_NAMES
sock, rate, dur, flows = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
linger = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
p = _dpdk.Port(f"net_memif0,role=client,socket={sock}", ip="198.18.0.1")
t = time.monotonic()
while not p.link_up and time.monotonic() - t < 10:
    time.sleep(0.01)
h = _dpdk.DpdkEngine([p], [{"role": "dpdk_send", "port": 0, "flows": flows, "rate": rate, "duration": dur,
                            "dst_ip": "198.18.0.2", "dst_mac": "02:00:00:00:00:02"}], own_ports=True)
h.start()
while h.running():
    time.sleep(0.01)
h.join()
c = dict(zip(COUNTER_NAMES, h.snapshot()[0][0]))
print(json.dumps({"link": bool(p.link_up is not None), "pkts_tx": c["pkts_tx"], "drop_tx": c["drop_tx"],
                  "flow_sent": h.flow_sent(0)}), flush=True)
if linger:
    time.sleep(linger)
h.close()
"""


def _memif_addr(name):
    """memif's abstract socket address (DPDK 22.11): a NUL, then the name."""
    return b"\0" + name.encode()


class StallFirstProxy:
    """A memif socket in front of a real server: the first connection is accepted and never
    answered (a handshake that stalls); later ones are relayed to the server message by
    message, with the file descriptors they pass (the shared memory, the ring eventfds).
    relisten_after=S: once the first is held, nothing listens on the name for S seconds (a
    server that refuses connections while it still holds an old one)."""

    def __init__(self, name, server_name, relisten_after=0.0):
        self.name, self.server_addr = name, _memif_addr(server_name)
        self.relisten_after, self.relisten_at = relisten_after, None
        self.listener = self._listen()
        self.accepted, self.relayed, self.held = 0, 0, []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _listen(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(_memif_addr(self.name))
        s.listen(4)
        return s

    def _serve(self):
        pairs = []
        while not self.done.is_set():
            if self.listener is None and time.monotonic() >= self.relisten_at:
                self.listener = self._listen()
            socks = [s for pair in pairs for s in pair] + ([self.listener] if self.listener else [])
            ready, _, _ = select.select(socks, [], [], 0.05)
            for s in ready:
                if s is self.listener:
                    conn, _ = self.listener.accept()
                    self.accepted += 1
                    if self.accepted == 1:
                        self.held.append(conn)
                        if self.relisten_after:
                            self.listener.close()
                            self.listener, self.relisten_at = None, time.monotonic() + self.relisten_after
                        continue
                    up = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                    try:
                        up.connect(self.server_addr)
                    except OSError:   # the server refused: so does the proxy
                        up.close()
                        conn.close()
                        continue
                    pairs.append((conn, up))
                    continue
                pair = next(p for p in pairs if s in p)
                other = pair[1] if s is pair[0] else pair[0]
                fds = []
                try:
                    data, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
                    for level, kind, payload in anc:
                        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                            fds += list(memoryview(payload).cast("i"))
                    if data:
                        other.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(b"".join(
                            fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds))))] if fds else [])
                        self.relayed += 1
                except OSError:   # one end gone (a connection its client closed while it waited)
                    data = b""
                for fd in fds:
                    os.close(fd)
                if not data:
                    pairs.remove(pair)
                    for end in pair:
                        end.close()
        for end in [*([self.listener] if self.listener else []), *self.held, *(s for pair in pairs for s in pair)]:
            end.close()

    def close(self):
        self.done.set()
        self.thread.join(5)
