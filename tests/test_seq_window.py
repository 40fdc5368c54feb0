"""Fuzz the socket engine's loss / duplicate / reorder accounting against an exact model.

tests/native/seq_fuzz.c includes native/sock/sock_engine.c and drives its real
pk_seq_arrive() (native/include/perfkit/seqwin.h, shared with the DPDK engine) and
the settle step of pk_sock_join() (no threads, no sockets); it is built here with
ASan + UBSan. The model below is written from the rules in seqwin.h's comments,
independently of its bit tricks:

  * a flow's window is the SEQ_WINDOW sequence numbers below `next` (highest seen + 1);
  * a number is declared lost when it leaves the window without having arrived;
  * an arrival inside the window that already arrived is a duplicate; one that had
    not arrived yet (below `next`) is reordered; one older than the window is
    reordered (it was already declared lost);
  * at the end, the numbers missing in the window are lost, and so is everything
    the sender sent from `next` on.

The same streams also go, as real datagrams, through a live udp_recv worker.
"""
from __future__ import annotations

import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = os.path.join(REPO, "tests", "native", "seq_fuzz.c")
W = 4096          # PK_SEQ_WINDOW in perfkit/seqwin.h
MAGIC = 0x706B7431
HDR = struct.Struct("=IIQQ")   # pk_wire_hdr: magic, flow, seq, tx_ns (host order)
U64 = 1 << 64


# ------------------------------------------------------------------ the model

class Flow:
    def __init__(self):
        self.next = 0
        self.arrived: set[int] = set()

    def _leave(self, lo: int, hi: int) -> int:
        """Numbers in [lo, hi) leave the window: how many never arrived."""
        lo = max(lo, 0)
        return sum(1 for t in range(lo, hi) if t not in self.arrived) if hi > lo else 0


def model(flows: int, arrivals, sent) -> tuple[int, int, int, int, int]:
    """(lost before settling, lost, dup, reorder, bad) for arrivals [(flow, seq)]."""
    fs = [Flow() for _ in range(flows)]
    lost = dup = reorder = bad = 0
    for flow, s in arrivals:
        if flow >= flows:
            bad += 1
            continue
        f = fs[flow]
        if s >= f.next:
            # the window moves from [next-W, next) to [s+1-W, s+1)
            lost += f._leave(f.next - W, min(s + 1 - W, f.next)) + max(0, s + 1 - W - f.next)
            f.arrived.add(s)
            f.next = s + 1
        elif s < f.next - W:
            reorder += 1
        elif s in f.arrived:
            dup += 1
        else:
            f.arrived.add(s)
            reorder += 1
    before = lost
    for f, n in zip(fs, sent):
        lost += f._leave(f.next - W, f.next)
        lost += max(0, n - f.next)
    return before, lost, dup, reorder, bad


def test_model_on_hand_cases():
    """The model itself, on cases worked out by hand."""
    assert model(1, [(0, 0), (0, 2), (0, 2), (0, 1), (0, 7)], [10]) == (0, 6, 1, 1, 0)
    assert model(1, [(0, 0), (0, W + 5)], [W + 6]) == (5, W + 4, 0, 0, 0)
    assert model(1, [(0, W + 5), (0, 3)], [W + 6]) == (6, W + 5, 0, 1, 0)       # 3 is older than the window
    assert model(2, [(0, 1), (1, 0), (2, 0)], [2, 3]) == (0, 3, 0, 0, 1)


def stream(rng: random.Random, sent: int, window: int = W) -> list[int]:
    """One flow's arrivals: drops (single and in bursts), duplicates, local reordering."""
    p_drop = rng.choice([0, 0.001, 0.01, 0.1, 0.5])
    p_dup = rng.choice([0, 0.001, 0.01, 0.1])
    burst = rng.random() < 0.3
    out = []
    s = 0
    while s < sent:
        if burst and rng.random() < 0.002:   # a burst loss, sometimes longer than the window
            s += rng.choice([10, window - 1, window, window + 1, 3 * window])
            continue
        if rng.random() >= p_drop:
            out.append(s)
            if rng.random() < p_dup:
                out.append(s)
        s += 1
    # reorder: displace some arrivals, mostly within the window, sometimes beyond it
    p_move = rng.choice([0, 0.001, 0.01, 0.05])
    reach = rng.choice([2, 50, window // 2, window - 1, window, window + 10, 2 * window])
    for _ in range(int(len(out) * p_move)):
        i = rng.randrange(len(out))
        j = min(len(out) - 1, i + rng.randint(1, reach))
        out.insert(j, out.pop(i))
    if out and rng.random() < 0.3:   # arrivals right at the window's lower edge: next - W + (-1, 0, 1)
        for _ in range(rng.randint(1, 10)):
            i = rng.randrange(1, len(out) + 1)
            edge = max(out[:i]) + 1 - window + rng.choice([-1, 0, 0, 1])
            if 0 <= edge < sent:
                out.insert(i, edge)
    if sent and rng.random() < 0.05:   # stale duplicates of old numbers at the very end
        out += [rng.randrange(max(1, sent)) for _ in range(rng.randint(1, 20))]
    return out


def make_case(rng: random.Random):
    # mostly short streams (edges, starts, tails), some that cross the window a few times
    scale = rng.choices([10, 100, 1000, 2 * W + 100, 5 * W], weights=[30, 30, 28, 8, 4])[0]
    flows = rng.choice([1, 1, 2, 3, 8] if scale <= 1000 else [1, 2])
    sent = [rng.randint(0, scale) for _ in range(flows)]
    per = [[(f, s) for s in stream(rng, n)] for f, n in enumerate(sent)]
    arrivals = []
    while any(per):   # interleave the flows in random runs
        f = rng.choice([i for i, p in enumerate(per) if p])
        k = rng.randint(1, 64)
        arrivals += per[f][:k]
        del per[f][:k]
    for _ in range(rng.choice([0, 0, 0, 3])):   # flow ids out of range: bad packets
        arrivals.insert(rng.randrange(len(arrivals) + 1), (flows + rng.randrange(5), rng.randrange(100)))
    return flows, arrivals, sent


# ------------------------------------------------------------------ the driver

def _cc():
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """seq_fuzz.c built with ASan + UBSan (any sanitizer report is fatal)."""
    cc = _cc()
    if cc is None:
        pytest.skip("no C compiler (cc) to build tests/native/seq_fuzz.c")
    exe = str(tmp_path_factory.mktemp("seq_fuzz") / "seq_fuzz")
    cmd = [cc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
           "-fno-omit-frame-pointer", "-I", os.path.join(REPO, "native", "include"),
           "-I", os.path.join(REPO, "native", "sock"), "-I", os.path.join(REPO, "native", "common"),
           DRIVER, os.path.join(REPO, "native", "common", "engine.c"), "-o", exe, "-lpthread", "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"building the driver failed:\n{' '.join(cmd)}\n{p.stderr}"
    return exe


def run_driver(exe: str, text: str, timeout: float = 60) -> list[str]:
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    p = subprocess.run([exe], input=text, capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, f"seq_fuzz exited {p.returncode}:\n{p.stderr[-4000:]}"
    assert "runtime error" not in p.stderr and "Sanitizer" not in p.stderr, p.stderr[-4000:]
    return p.stdout.split("\n")


def case_text(flows, arrivals, sent) -> str:
    lines = [f"C {flows} {len(arrivals)}"]
    lines += [f"{f} {s}" for f, s in arrivals]
    lines.append(" ".join(map(str, sent)))
    return "\n".join(lines) + "\n"


def test_seq_accounting_matches_model(driver):
    """Thousands of random streams: the engine's counters equal the model's, exactly;
    and where nothing was reordered beyond the window, unique received + lost == sent."""
    rng = random.Random(20261130)
    cases = [make_case(rng) for _ in range(2000)]
    out = run_driver(driver, "".join(case_text(*c) for c in cases))
    checked_identity = 0
    for i, (flows, arrivals, sent) in enumerate(cases):
        got = tuple(int(x) for x in out[i].split())
        want = model(flows, arrivals, sent)
        assert got == want, (f"case {i}: engine (lost before settle, lost, dup, reorder, bad) = {got}, "
                             f"model = {want}; flows={flows} sent={sent} arrivals[:40]={arrivals[:40]}")
        good = [(f, s) for f, s in arrivals if f < flows]
        unique = len(set(good))
        if want[3] == 0:   # nothing reordered: every number received once or lost once
            assert unique + got[1] == sum(sent), (i, got, sent)
            assert got[2] == len(good) - unique, (i, got)
            checked_identity += 1
    assert checked_identity > 200, "too few reorder-free cases to check the identity"


def test_received_plus_lost_equals_sent_with_reordering_inside_the_window(driver):
    """Drops, duplicates and displacement strictly inside the window: every number
    is received once or lost once, dup counts the extra copies, reorder counts
    exactly the arrivals that came after a higher number of their flow."""
    rng = random.Random(7)
    cases = []
    for _ in range(1000):
        flows = rng.choice([1, 2, 4])
        sent = [rng.randint(0, rng.choices([20, 500, 3 * W], weights=[45, 45, 10])[0])
                for _ in range(flows)]
        arrivals = []
        for f, n in enumerate(sent):
            seqs = [s for s in range(n) if rng.random() > 0.05]
            seqs += [s for s in seqs if rng.random() < 0.02]          # duplicates
            # sort by a jittered key: every arrival lands less than W/2 numbers from home
            jit = rng.choice([0, 3, 100, W // 4])
            seqs.sort(key=lambda s: s + rng.uniform(0, jit))
            arrivals += [(f, s) for s in seqs]
        cases.append((flows, arrivals, sent))
    out = run_driver(driver, "".join(case_text(*c) for c in cases))
    for i, (flows, arrivals, sent) in enumerate(cases):
        before, lost, dup, reorder, bad = (int(x) for x in out[i].split())
        unique = len(set(arrivals))
        assert unique + lost == sum(sent), (i, unique, lost, sent)
        assert dup == len(arrivals) - unique, (i, dup)
        late, hi, seen = 0, [-1] * flows, set()
        for f, s in arrivals:
            if s < hi[f] and (f, s) not in seen:
                late += 1
            seen.add((f, s))
            hi[f] = max(hi[f], s)
        assert reorder == late, (i, reorder, late)
        assert before <= lost and bad == 0


def test_wire_parse_and_wild_sequence_numbers_under_asan(driver):
    """Random short and garbage buffers, each in a heap block of exactly its size:
    pk_wire_parse reads nothing past the end and accepts exactly the buffers with a
    full header and the magic; what it accepts (including sequence numbers near 2^64)
    goes through seq_arrive, which must return."""
    out = run_driver(driver, "W 200000 1\nW 200000 2\n", timeout=60)
    for line in out[:2]:
        tag, parsed, rejected = line.split()
        assert tag == "W" and int(parsed) > 10_000 and int(rejected) > 10_000, line


def test_seq_widen_restores_64_bit_sequences(driver):
    """The DPDK engine's 64-byte frames carry the low 32 bits of the sequence:
    pk_seq_widen restores the number nearest the flow's next, across 2^32."""
    out = run_driver(driver, "V 300000 7\n", timeout=60)
    assert out[0] == "V 300000"


def test_seq_arrive_terminates_at_the_top_of_the_sequence_space(driver):
    """Two datagrams numbered 2^64-2 and 2^64-1 (a corrupt or hostile sender):
    the window loop must not wrap around and spin forever."""
    text = case_text(1, [(0, U64 - 2), (0, U64 - 1)], [0])
    try:
        run_driver(driver, text, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("seq_arrive() never returned for seq 2^64-2 then 2^64-1 (the loop "
                    "`for (t = next; t <= s; t++)` wraps when s == UINT64_MAX)")


# ------------------------------------------------- the same through real datagrams

def _sock_engine():
    from perfkit._sock import SockEngine
    return SockEngine


def test_live_receiver_counts_crafted_datagrams_like_the_model():
    """A udp_recv worker on loopback gets crafted datagrams (drops, duplicates,
    reordering, bad packets) from a plain socket; its counters equal the model's."""
    from perfkit.stats import INDEX
    SockEngine = _sock_engine()
    rng = random.Random(99)
    flows = 3
    per = [stream(rng, n, W) for n in (3000, 2 * W + 500, 500)]
    arrivals = []
    while any(per):
        f = rng.choice([i for i, p in enumerate(per) if p])
        k = rng.randint(1, 40)
        arrivals += [(f, s) for s in per[f][:k]]
        del per[f][:k]
    payloads = [HDR.pack(MAGIC, f, s, time.monotonic_ns()) + b"\0" * 40 for f, s in arrivals]
    bad = [b"", b"x" * 10, b"\0" * 64, HDR.pack(MAGIC ^ 1, 0, 5, 0) + b"\0" * 40,
           HDR.pack(MAGIC, flows, 5, 0) + b"\0" * 40, HDR.pack(MAGIC, 2**32 - 1, 5, 0)]
    for b in bad:
        payloads.insert(rng.randrange(len(payloads) + 1), b)

    e = SockEngine([{"role": "udp_recv", "local": ("127.0.0.1", 0), "size": 64,
                     "flows": flows, "batch": 32, "duration": 5.0}])
    try:
        port = e.bound_port(0)
        e.start()
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            tx.connect(("127.0.0.1", port))
            for i, p in enumerate(payloads):
                tx.send(p)
                if i % 512 == 511:   # never outrun the receiver: wait for it to catch up
                    deadline = time.monotonic() + 2
                    while e.snapshot()[0][0][INDEX["pkts_rx"]] < i + 1 and time.monotonic() < deadline:
                        time.sleep(0.001)
        finally:
            tx.close()
        deadline = time.monotonic() + 3
        while e.snapshot()[0][0][INDEX["pkts_rx"]] < len(payloads) and time.monotonic() < deadline:
            time.sleep(0.005)
        e.stop()
        e.join()
        c = e.snapshot()[0][0]
        assert e.error() is None
    finally:
        e.close()
    # no sender in this engine: the settle step adds only what is missing in each window
    nexts = [max([s for g, s in arrivals if g == f], default=-1) + 1 for f in range(flows)]
    _, lost, dup, reorder, _ = model(flows, arrivals, nexts)
    assert c[INDEX["pkts_rx"]] == len(payloads)
    assert c[INDEX["bad_rx"]] == len(bad)
    assert (c[INDEX["seq_lost"]], c[INDEX["seq_dup"]], c[INDEX["seq_reorder"]]) == (lost, dup, reorder)
    assert c[INDEX["lat_count"]] == len(arrivals)
    assert c[INDEX["bytes_rx"]] == sum(map(len, payloads))


_WILD = r"""
import socket, struct, sys
from perfkit._sock import SockEngine
e = SockEngine([{"role": "udp_recv", "local": ("127.0.0.1", 0), "size": 64, "flows": 1,
                 "batch": 8, "duration": 0.3}])
e.start()
print("started", flush=True)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for seq in (2**64 - 2, 2**64 - 1):
    s.sendto(struct.pack("=IIQQ", 0x706B7431, 0, seq, 0) + bytes(40), ("127.0.0.1", e.bound_port(0)))
e.stop()
e.join()
e.close()
print("joined", flush=True)
"""


def test_live_receiver_survives_wild_sequence_numbers():
    """A live udp_recv worker that gets seq 2^64-2 then 2^64-1 must still stop and join
    (in a subprocess: a hang must not take pytest with it)."""
    import queue
    import threading
    lines: queue.Queue = queue.Queue()
    p = subprocess.Popen([sys.executable, "-P", "-c", _WILD], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    threading.Thread(target=lambda: [lines.put(ln.strip()) for ln in p.stdout], daemon=True).start()

    def expect(word: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if lines.get(timeout=0.1) == word:
                    return True
            except queue.Empty:
                if p.poll() is not None and lines.empty():
                    return False
        return False

    try:
        # importing perfkit may rebuild the extension first (editable install): be patient there
        assert expect("started", 300), f"the engine did not start: {p.stderr.read() if p.poll() is not None else ''}"
        if not expect("joined", 10):
            pytest.fail("the udp_recv worker never stopped after datagrams numbered 2^64-2, 2^64-1: "
                        "pk_sock_join() hung (seq_arrive's window loop wraps at UINT64_MAX)")
        assert p.wait(timeout=10) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
