"""perfkit._delayline: the lab's delay line in C (bpf backend).

The first half drives the C delay line directly over AF_UNIX datagram socket pairs
(a tap is just an fd that gives and takes one frame per read/write): no root, exact
checks of delay, order, jitter, reorder, corrupt, the BPF stamp, the pool and stop.
The second half (root) runs it inside a lab: forwarding rate through a delayed link
and delay accuracy. Traffic stays inside the lab's namespaces (198.18.0.0/15).
"""
from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time

import pytest

from perfkit import lab as pklab

dl = pytest.importorskip("perfkit._delayline", reason="perfkit._delayline is not built")
DelayLine = dl.DelayLine

needs_root = pytest.mark.root
MS = 1_000_000
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)   # Linux; Python does not name it


# ----------------------------------------------------------------------------- socket-pair harness

class Pair:
    """A delay line over one end of a datagram socket pair per tap; the test sends into the
    other end, and a thread per tap takes in what comes back (with the time it came)."""

    def __init__(self, ntaps=1, mtu=1500, pool=0, stamped=False):
        self.socks = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(ntaps)]
        for a, b in self.socks:
            a.setblocking(False)
            for s in (a, b):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.line = DelayLine([a.fileno() for a, _ in self.socks], mtu=mtu, pool=pool,
                              stamped=stamped, rt_priority=1)   # as in the lab
        self.got = [[] for _ in range(ntaps)]
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._take, args=(k,), daemon=True) for k in range(ntaps)]
        for t in self.threads:
            t.start()

    def _take(self, k):
        s, got = self.socks[k][1], self.got[k]
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        while not self.done.is_set():
            if select.select([s], [], [], 0.05)[0]:
                data, anc, _, _ = s.recvmsg(70000, 64)
                at = time.time_ns()
                for level, kind, raw in anc:     # when it came, not when this thread woke
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, nsec = struct.unpack("qq", raw[:16])
                        at = sec * 10**9 + nsec
                got.append((data, at))

    def peer(self, k=0):
        return self.socks[k][1]

    def recv_all(self, n, timeout=5.0, k=0):
        """The first n frames back from tap k (fewer if they do not come within timeout),
        with the time each came (the kernel's receive time, time.time_ns() clock)."""
        deadline = time.monotonic() + timeout
        while len(self.got[k]) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.got[k][:n]

    def close(self):
        self.done.set()
        for t in self.threads:
            t.join()
        self.line.close()
        for a, b in self.socks:
            a.close()
            b.close()


@pytest.fixture
def pair():
    made = []

    def make(**kw):
        p = Pair(**kw)
        made.append(p)
        return p
    yield make
    for p in made:
        p.close()


def frame(i: int, size: int = 64) -> bytes:
    """An Ethernet-sized frame: 14 header bytes, then a sequence number."""
    return bytes(12) + b"\x08\x00" + struct.pack(">I", i) + bytes(size - 18)


def seq(f: bytes) -> int:
    return struct.unpack_from(">I", f, 14)[0]


def send_numbered(p, n: int, pause_every: int = 0) -> dict:
    """Send frames 0..n-1 into tap 0 (a 1 ms pause after every pause_every frames);
    returns each frame's send time (time.time_ns())."""
    sent = {}
    for i in range(n):
        sent[i] = time.time_ns()
        p.peer().send(frame(i))
        if pause_every and i % pause_every == pause_every - 1:
            time.sleep(0.001)
    return sent


def sched_class(line) -> str:
    """How the line's thread runs: SCHED_FIFO, or the normal class (nice -20 and a short
    slice where allowed). line: a DelayLine or its stats()."""
    st = line if isinstance(line, dict) else line.stats()
    if st["rt_priority"]:
        return f"SCHED_FIFO {st['rt_priority']}"
    return f"normal class, nice {-st['nice_boost']}, slice {st['slice_ns'] / 1e3:g} us"


def stamped(i: int, at_ns: int, size: int = 64) -> bytes:
    """frame(i) with the lab's outer 802.1ad tag holding the time at_ns."""
    f = frame(i, size)
    return f[:12] + struct.pack(">HH", dl.STAMP_TPID, (at_ns >> dl.STAMP_SHIFT) & 0xFFFF) + f[12:]


# ----------------------------------------------------------------------------- without root

def test_names_and_bad_values():
    assert dl.COUNTER_NAMES[:4] == ("rx", "rx_bytes", "tx", "tx_bytes")
    assert {"dropped", "queued", "late_ns_sum", "late_ns_max", "stamped"} <= set(dl.COUNTER_NAMES)
    assert {"pool_size", "margin_ns", "cpu_ns"} <= set(dl.STAT_NAMES)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        with pytest.raises(ValueError, match="taps"):
            DelayLine([], mtu=1500)
        with pytest.raises(ValueError, match="mtu"):
            DelayLine([a.fileno()], mtu=70000)
        with pytest.raises(ValueError, match="pool"):
            DelayLine([a.fileno()], mtu=1500, pool=3)
        line = DelayLine([a.fileno()], mtu=1500)
        with pytest.raises(ValueError, match="tap"):
            line.set_config(1, MS)
        with pytest.raises(ValueError, match="delay_ns"):
            line.set_config(0, 21_000 * MS)
        with pytest.raises(ValueError, match="reorder"):
            line.set_config(0, MS, 0, 1.5)
        assert line.stats()["slot_bytes"] >= 1500 + 14 + 4
        line.close()
        with pytest.raises(RuntimeError, match="closed"):
            line.start()
    finally:
        a.close()
        b.close()


# ----------------------------------------------------------------------------- timing bounds

# A busy host makes any delay line late, never early. Order, never-early and counts are
# asserted in every attempt; a lateness bound needs one attempt within it, and where none
# is, the host's share decides: the time the line's thread waited, runnable, for a CPU
# plus the machine's steal time (HostTime). No packet is later by the host's doing than
# that; so a miss larger than it is the line's own and fails the test, and misses the
# host can explain in every attempt skip it with the figures.
TIMING_ATTEMPTS = 3


def _steal_ns() -> int:
    """The machine's steal time so far (/proc/stat, all CPUs; counted in 1/USER_HZ ticks)."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[8]) * 10**9 // os.sysconf("SC_CLK_TCK")


class HostTime:
    """Over a stretch of a test: how long the host kept a delay line's thread from running,
    the time it waited runnable for a CPU (run_delay, /proc/PID/task/TID/schedstat) plus
    the machine's steal time (the hypervisor ran something else). line: a DelayLine in
    this process, or schedstat: that file of a thread elsewhere (the lab's daemon)."""

    def __init__(self, line=None, schedstat=None):
        if schedstat is None:
            deadline = time.monotonic() + 2.0
            while not line.stats()["tid"] and time.monotonic() < deadline:   # the thread is starting
                time.sleep(0.001)
            schedstat = f"/proc/self/task/{line.stats()['tid']}/schedstat"
        self.path = schedstat
        self.ns = 0

    def _now(self) -> int:
        with open(self.path) as f:
            return int(f.read().split()[1]) + _steal_ns()

    def __enter__(self):
        self.ns = -self._now()
        return self

    def __exit__(self, *exc):
        self.ns += self._now()


def within_timing_bounds(attempt) -> None:
    """Call attempt(k) for k = 1..TIMING_ATTEMPTS until one is within its bounds.
    attempt asserts what must hold every time and returns (excess_ns, host_ns, figures):
    how far its worst timing figure is past its bound (<= 0: within), the HostTime over it,
    and the figures as text."""
    misses = []
    for k in range(1, TIMING_ATTEMPTS + 1):
        excess_ns, host_ns, figures = attempt(k)
        print(f"attempt {k}: {figures}; the host held the line's thread off the CPU for "
              f"{host_ns / 1e3:.0f} us")
        if excess_ns <= 0:
            return
        misses.append((excess_ns, host_ns, figures))
    text = "; ".join(f"{f} ({e / 1e3:.0f} us past the bound, the host took {h / 1e3:.0f} us)"
                     for e, h, f in misses)
    if all(e <= h for e, h, _ in misses):
        pytest.skip(f"the host kept the delay line's thread off the CPU for longer than each "
                    f"attempt missed its bound by: {text}")
    pytest.fail(f"late beyond what the host took from the line: {text}")


def test_delay_keeps_order_and_is_never_early(pair):
    def attempt(k):
        p = pair()
        p.line.set_config(0, 5 * MS)
        p.line.start()
        with HostTime(p.line) as host:
            sent = send_numbered(p, 2000)
            got = p.recv_all(2000)
        assert [seq(f) for f, _ in got] == list(range(2000))
        waits = [(t - sent[seq(f)]) / MS for f, t in got]
        assert min(waits) >= 5.0                   # held at least the delay, from when it was sent
        c = p.line.counters(0)
        assert (c["rx"], c["tx"], c["dropped"], c["queued"]) == (2000, 2000, 0, 0)
        assert p.line.stats()["heap_max"] == 0     # a fixed delay never leaves FIFO order
        mean_late_ns = c["late_ns_sum"] / c["tx"]  # sent on time: mean lateness under 0.2 ms
        return (mean_late_ns - 200_000, host.ns,
                f"mean lateness {mean_late_ns / 1e3:.1f} us ({sched_class(p.line)})")
    within_timing_bounds(attempt)


def test_jitter_spreads_and_reorders(pair):
    def attempt(k):
        p = pair()
        p.line.set_config(0, 6 * MS, 3 * MS)
        p.line.start()
        with HostTime(p.line) as host:
            sent = send_numbered(p, 3000, pause_every=100)  # spread the sends over a few ms
            got = p.recv_all(3000)
        assert sorted(seq(f) for f, _ in got) == list(range(3000))
        waits = sorted((t - sent[seq(f)]) / MS for f, t in got)
        assert waits[0] >= 3.0
        assert 3.0 <= waits[len(waits) // 20]          # 5th percentile near delay - jitter ...
        assert 8.0 <= waits[-len(waits) // 20]         # ... 95th near delay + jitter
        order = [seq(f) for f, _ in got]
        assert sum(1 for x, y in zip(order, order[1:]) if y < x) > 100   # jitter reorders, as netem
        p5, p95 = waits[len(waits) // 20], waits[-len(waits) // 20]
        return (max(p5 - 4.0, p95 - 9.6) * MS, host.ns,
                f"5th percentile {p5:.3f} ms (<= 4.0), 95th {p95:.3f} ms (<= 9.6) ({sched_class(p.line)})")
    within_timing_bounds(attempt)


def test_reorder_share_skips_the_delay(pair):
    p = pair()
    p.line.set_config(0, 50 * MS, 0, 0.25)
    p.line.start()
    sent = send_numbered(p, 2000)
    got = p.recv_all(2000)
    assert len(got) == 2000
    early = [seq(f) for f, t in got if t - sent[seq(f)] < 25 * MS]
    assert 400 <= len(early) <= 600                 # 25% of 2000
    assert early == sorted(early)
    assert p.line.counters(0)["reordered"] == len(early)


def test_corrupt_flips_one_bit_past_the_ethernet_header(pair):
    p = pair()
    p.line.set_config(0, 0, 0, 0.0, 1.0)
    p.line.start()
    ref = frame(12345, 100)
    for _ in range(500):
        p.peer().send(ref)
    got = p.recv_all(500)
    assert len(got) == 500
    places = set()
    for f, _ in got:
        diff = [(k, a ^ b) for k, (a, b) in enumerate(zip(f, ref)) if a != b]
        assert len(f) == len(ref) and len(diff) == 1 and bin(diff[0][1]).count("1") == 1, diff
        assert diff[0][0] >= 14                      # never the Ethernet header
        places.add(diff[0][0])
    assert len(places) > 40                          # anywhere in the rest
    assert p.line.counters(0)["corrupted"] == 500


def test_stamp_times_the_packet_from_when_it_was_diverted(pair):
    p = pair(stamped=True)
    p.line.set_config(0, 20 * MS)
    p.line.start()
    now = time.time_ns()
    p.peer().send(stamped(1, time.monotonic_ns() - 15 * MS))   # diverted 15 ms ago: due in 5 ms
    p.peer().send(frame(2))                          # no tag: due in 20 ms from now
    got = p.recv_all(2)
    assert [seq(f) for f, _ in got] == [1, 2]
    assert got[0][0] == frame(1)                     # the tag is gone
    assert got[1][0] == frame(2)
    assert 4.5 <= (got[0][1] - now) / MS <= 8.0
    assert 20.0 <= (got[1][1] - now) / MS <= 24.0
    assert p.line.counters(0)["stamped"] == 1


def test_unstamped_line_leaves_tags_alone(pair):
    p = pair(stamped=False)
    p.line.set_config(0, MS)
    p.line.start()
    f = stamped(7, time.monotonic_ns())
    p.peer().send(f)
    assert p.recv_all(1)[0][0] == f


def test_full_pool_drops_and_counts(pair):
    p = pair(pool=16)
    p.line.set_config(0, 300 * MS)
    p.line.start()
    for i in range(100):
        p.peer().send(frame(i))
    time.sleep(0.1)
    c = p.line.counters(0)
    assert (c["rx"], c["queued"], c["dropped"]) == (100, 16, 84)
    assert p.line.stats()["pool_used"] == 16
    got = p.recv_all(100, timeout=1.0)
    assert [seq(f) for f, _ in got] == list(range(16))
    assert p.line.counters(0)["queued"] == 0


def test_config_changes_apply_to_the_next_packet_and_per_tap(pair):
    p = pair(ntaps=2)
    p.line.set_config(0, 30 * MS)
    p.line.set_config(1, 2 * MS)
    p.line.start()
    t0 = time.time_ns()
    p.peer(0).send(frame(0))
    p.peer(1).send(frame(1))
    (f1, t1), = p.recv_all(1, k=1)
    assert 2.0 <= (t1 - t0) / MS < 20.0
    p.line.set_config(0, 0)                          # while frame 0 waits: the next one goes at once
    t2 = time.time_ns()
    p.peer(0).send(frame(2))
    got = p.recv_all(2, k=0)
    assert [seq(f) for f, _ in got] == [2, 0]        # as netem: the earlier due time leaves first
    assert (got[0][1] - t2) / MS < 10.0
    assert (got[1][1] - t0) / MS >= 30.0


def test_stop_is_prompt_and_drops_what_it_holds(pair):
    p = pair()
    p.line.set_config(0, 5_000 * MS)
    p.line.start()
    for i in range(100):
        p.peer().send(frame(i))
    time.sleep(0.05)
    assert p.line.running() and p.line.counters(0)["queued"] == 100
    t0 = time.monotonic()
    p.line.stop()
    p.line.join()
    assert time.monotonic() - t0 < 0.2
    assert not p.line.running() and p.line.error() is None


def test_a_tap_that_goes_away_stops_the_line(pair):
    r, w = os.pipe()
    os.set_blocking(r, False)
    line = DelayLine([r], mtu=1500, notify_fd=w)
    line.start()
    os.close(r)                      # the fd is gone under it (as a tap whose namespace went)
    deadline = time.monotonic() + 2.0
    while line.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not line.running()
    assert "tap 0" in line.error()
    line.close()
    os.close(w)


def test_the_lab_writes_the_stamp_the_line_reads():
    assert (pklab.STAMP_TPID, pklab.STAMP_SHIFT) == (dl.STAMP_TPID, dl.STAMP_SHIFT)
    code = pklab._egress_program(pklab.Impairment(delay=0.01), 7)
    ins = [struct.unpack_from("<BBhi", code, i) for i in range(0, len(code), 8)]
    assert (0x85, 0, 0, 18) in ins                   # call bpf_skb_vlan_push
    assert (0xB4, 2, 0, socket.htons(dl.STAMP_TPID)) in ins
    assert (0x77, 0, 0, dl.STAMP_SHIFT) in ins       # r0 >>= STAMP_SHIFT


def test_missing_extension_is_a_clear_lab_error(monkeypatch):
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(pklab.LabError, match=r"perfkit\._delayline is not built"):
        pklab._delay_line_extension()


# ----------------------------------------------------------------------------- in a lab (root)

def _lab_leftovers(name):
    out = [ns for ns in pklab._pk_netns() if ns.startswith(f"pk-{name}-")]
    out += [fn for fn in (os.listdir(pklab.LABS_DIR) if os.path.isdir(pklab.LABS_DIR) else [])
            if fn.split(".")[0] == name]
    return out


@pytest.fixture
def lab():
    made = []

    def make(**kw):
        made.append(pklab.Lab(backend="bpf", **kw).up())
        return made[-1]
    yield make
    for lb in made:
        name = lb.name
        lb.down()
        assert _lab_leftovers(name) == []


def _flow(src, dst, rate, size, duration):
    from perfkit._sock import SockEngine
    from perfkit.stats import COUNTER_NAMES
    e = SockEngine([
        {"role": "udp_recv", "local": (dst.ipv4, 0), "size": size, "batch": 32,
         "duration": duration, "netns": dst.netns_path},
        {"role": "udp_send", "local": (src.ipv4, 0), "remote": (dst.ipv4, 0), "peer": 0,
         "size": size, "batch": 32, "rate": rate, "duration": duration, "netns": src.netns_path}])
    e.start()
    try:
        e.join()
        assert e.error() is None, e.error()
        snap = e.snapshot()
    finally:
        e.close()
    return dict(zip(COUNTER_NAMES, snap[0][0])), dict(zip(COUNTER_NAMES, snap[1][0]))


def _line(lab):
    return pklab._daemon_request(lab.state["delay_line"]["socket"], {})


RATE = 150_000             # packets/s: beyond what the Python delay line could forward,
PYTHON_LINE_PPS = 100_000  # about this many


@needs_root
def test_forwarding_rate_through_a_delayed_link(lab):
    lb = lab()
    h1, h2 = lb.hosts
    # what this machine carries without the delay line (on a busy machine, less than RATE)
    rx, tx = _flow(h1, h2, RATE, 64, 1.5)
    if tx["pkts_tx"] < 0.95 * RATE * 1.5 or rx["pkts_rx"] < 0.99 * tx["pkts_tx"]:
        pytest.skip(f"this machine carries only {tx['pkts_tx'] / 1.5 / 1e3:.0f} kpps sent, "
                    f"{rx['pkts_rx'] / 1.5 / 1e3:.0f} kpps received without a delay right now "
                    f"(busy?): cannot measure the delay line at {RATE / 1e3:.0f} kpps")
    lb.impair(delay="1ms")
    line = _line(lb)["line"]
    schedstat = f"/proc/{lb.state['delay_line']['pid']}/task/{line['tid']}/schedstat"

    def on_cpu_ns() -> int:   # the line thread's time on a CPU so far
        with open(schedstat) as f:
            return int(f.read().split()[0])
    results = []
    for _ in range(TIMING_ATTEMPTS):      # a shared 2-CPU machine: the best of a few runs
        before, busy = _line(lb), -on_cpu_ns()
        rx, tx = _flow(h1, h2, RATE, 64, 3.0)
        after, busy = _line(lb), (busy + on_cpu_ns()) / 3e9
        delayed = after["delayed"] - before["delayed"]
        lost = tx["pkts_tx"] - rx["pkts_rx"]
        print(f"delay 1ms, {RATE / 1e3:.0f} kpps at 64 B: sent {tx['pkts_tx']}, received {rx['pkts_rx']} "
              f"({100 * lost / tx['pkts_tx']:.3f}% lost), the delay line took {delayed}, dropped "
              f"{after['dropped'] - before['dropped']}, mean lateness "
              f"{(after['late_ns_sum'] - before['late_ns_sum']) / max(1, delayed) / 1e3:.1f} us, "
              f"its thread on a CPU {100 * busy:.0f}% of the run")
        carried = delayed >= 0.99 * tx["pkts_tx"] and lost <= 0.01 * tx["pkts_tx"]
        # kept up with RATE, or with all a starved sender offered when that is beyond the Python line
        # (in one loaded run: 338,540 sent at 113 kpps, all through the line, none lost)
        if carried and (tx["pkts_tx"] >= 0.95 * RATE * 3.0 or delayed / 3.0 >= PYTHON_LINE_PPS):
            return
        results.append((tx["pkts_tx"], delayed, lost, round(busy, 3)))
    # Where this machine's CPU is too slow for RATE the line's thread runs flat out: what it
    # carried then is its ceiling here, and that must still be beyond the Python line's.
    # (2026-12-02 here: 122-145 kpps through the line, its thread on a CPU 97-100% of each run;
    # a CI run the same day failed the old check with 134 and 118 kpps.)
    best = max(results, key=lambda r: r[1])
    assert best[3] >= 0.9 and best[1] / 3.0 >= PYTHON_LINE_PPS, (
        f"the delay line fell behind {RATE / 1e3:.0f} kpps without using its CPU, or below "
        f"{PYTHON_LINE_PPS / 1e3:.0f} kpps using it: (sent, through the line, lost, its CPU share) {results}")


def _timed_pings(dst_ip, port, n, gap):
    """Round trips (ns) of n UDP pings: sent after a clock read, timed by the kernel's
    receive timestamp (SO_TIMESTAMPNS), so this process's own wake-ups do not count."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.settimeout(1.0)
    out = []
    for i in range(n):
        t0 = time.time_ns()
        s.sendto(struct.pack(">I", i) + bytes(60), (dst_ip, port))
        try:
            _, anc, _, _ = s.recvmsg(2048, 64)
        except socket.timeout:
            continue
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", data[:16])
                out.append(sec * 10**9 + nsec - t0)
        time.sleep(gap)
    return out


@needs_root
def test_delay_accuracy(lab):
    from perfkit._sock import SockEngine
    lb = lab(delay="10ms")
    h1, h2 = lb.hosts
    e = SockEngine([{"role": "udp_reflect", "local": (h2.ipv4, 0), "size": 64, "batch": 1,
                     "duration": 4.0 * TIMING_ATTEMPTS, "netns": h2.netns_path}])
    e.start()
    try:
        port = e.bound_port(0)
        line = _line(lb)["line"]
        schedstat = f"/proc/{lb.state['delay_line']['pid']}/task/{line['tid']}/schedstat"

        def attempt(k):
            before = _line(lb)
            with HostTime(schedstat=schedstat) as host:
                rtts = sorted(lb.call(h1, _timed_pings, h2.ipv4, port, 150, 0.002, timeout=30))
            after = _line(lb)
            assert len(rtts) >= 140
            assert rtts[0] / 1e6 >= 20.0            # never early
            p50 = rtts[len(rtts) // 2] / 1e6
            sent = after["sent"] - before["sent"]
            late_ns = (after["late_ns_sum"] - before["late_ns_sum"]) / max(1, sent)
            # the median round trip within 0.3 ms of the delay both ways; the line's own error
            # under 100 us on average
            return (max(abs(p50 - 20.0) * 1e6 - 300_000, late_ns - 100_000), host.ns,
                    f"delay 10ms each way: {len(rtts)} round trips, p50 {p50:.3f} ms, min "
                    f"{rtts[0] / 1e6:.3f}, p90 {rtts[len(rtts) * 9 // 10] / 1e6:.3f}; the delay line sent "
                    f"{late_ns / 1e3:.1f} us late on average ({sched_class(after['line'])})")
        within_timing_bounds(attempt)
    finally:
        e.stop()
        e.join()
        e.close()
