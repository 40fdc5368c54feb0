"""busy_poll: which ends spin on their socket before they sleep (spec.polls: as told, or,
left out, either pinned end of a latency test, a pinned udp_bw receiver off loopback, a
pinned reader of big tcp_bw messages), that they do (the receiving thread's
voluntary context switches: a polling receiver hardly sleeps; a polling stream reader's
reads that find nothing, seen by strace), in a lab and from a server as the client tells
it, and that -vvu says so."""
import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

import perfkit
from perfkit import LocalTest, RemoteTest
from perfkit.report import used_params

from _labs import lab_module_or_skip, lab_up_or_skip  # noqa: E402
from _sock_tests import needs_strace, serving, two_cpus, worker_threads  # noqa: E402


LAB = "198.18.0.2"   # a lab host's address: off loopback
# A sleeping end sleeps at least this often a second: far below a quiet machine's thousands,
# since the rate follows the CPU share its partner gets on a busy one (the claims are ratios).
SLEEPS = 100


@pytest.mark.parametrize("spec, receives, cpu, address, polls", [
    (LocalTest("udp_bw"), True, 1, LAB, True),                 # the auto rule: pinned, in a lab
    (LocalTest("udp_bw"), True, None, LAB, False),             # not pinned: it might share the sender's CPU
    (LocalTest("udp_bw", gso=0), True, 1, "127.0.0.1", False),  # loopback: polling made it slower
    (LocalTest("udp_bw"), True, 1, "::1", False),
    (LocalTest("udp_bw"), False, 0, LAB, False),               # the sender never polls
    (LocalTest("tcp_bw"), True, 1, LAB, True),                 # pinned, 128 KiB messages
    (LocalTest("tcp_bw", size="16K"), True, 1, "127.0.0.1", True),   # loopback too
    (LocalTest("tcp_bw", size="15K"), True, 1, LAB, False),   # small: the reader's pace sets the window
    (LocalTest("tcp_bw"), True, None, "127.0.0.1", False),     # not pinned
    (LocalTest("tcp_bw"), False, 1, "127.0.0.1", False),       # the sender never polls
    (LocalTest("udp_lat"), True, 1, LAB, True),                # latency tests: both ends, pinned
    (LocalTest("tcp_lat"), False, 0, "127.0.0.1", True),       # the pinger too, over loopback too
    (RemoteTest("sctp_lat"), True, 1, "127.0.0.1", True),
    (LocalTest("tcp_lat"), False, None, "127.0.0.1", False),   # not pinned: it might share its peer's CPU
    (LocalTest("udp_lat", busy_poll=False), True, 1, LAB, False),   # as qperf
    (LocalTest("tcp_lat", loc_cpu_affinity=1, rem_cpu_affinity=1), True, 1, "127.0.0.1", False),  # one CPU
    (LocalTest("tcp_lat", loc_cpu_affinity=0, rem_cpu_affinity=1), False, 0, "127.0.0.1", True),
    (LocalTest("udp_bw", busy_poll=False), True, 1, LAB, False),
    (LocalTest("tcp_bw", busy_poll=True), True, None, "127.0.0.1", True),
    (LocalTest("tcp_lat", busy_poll=True), False, None, "127.0.0.1", True),
    (RemoteTest("udp_bw", host=LAB), True, 3, "2001:2::2", True),
])
def test_which_ends_poll(spec, receives, cpu, address, polls):
    assert spec.polls(receives, cpu, address) is polls


def test_busy_poll_takes_true_false_or_nothing():
    assert LocalTest().busy_poll is None
    assert LocalTest(busy_poll=1).busy_poll is True
    with pytest.raises(ValueError, match="busy_poll"):
        LocalTest(busy_poll="auto")


def test_busy_poll_refuses_a_ping_pong_whose_ends_share_a_cpu():
    with pytest.raises(ValueError, match="busy_poll: both ends of udp_lat are pinned to CPU 0"):
        RemoteTest("udp_lat", busy_poll=True, loc_cpu_affinity=0, rem_cpu_affinity=0)
    assert LocalTest("tcp_bw", busy_poll=True, loc_cpu_affinity=0, rem_cpu_affinity=0).busy_poll  # receivers yield
    assert LocalTest("tcp_lat", busy_poll=True, loc_cpu_affinity=0, rem_cpu_affinity=1).busy_poll


def test_vvu_says_which_end_polled():
    def shown(host=LAB, **kw):
        return used_params(RemoteTest("udp_bw", host=host, **kw)).get("busy_poll", (None, None))[1]
    assert shown(rem_cpu_affinity=1) == "receiver (pinned)"
    assert shown(loc_cpu_affinity=1) is None                      # this host sends: its pin is the sender's
    assert shown(loc_cpu_affinity=1, flip=True) == "receiver (pinned)"
    assert shown(rem_cpu_affinity=1, busy_poll=False) is None
    assert shown("127.0.0.1", rem_cpu_affinity=1) is None
    assert shown("127.0.0.1", busy_poll=True) == "1"
    assert shown() is None

    def lat(**kw):
        return used_params(RemoteTest("tcp_lat", host="127.0.0.1", **kw)).get("busy_poll", (None, None))[1]
    assert lat(loc_cpu_affinity=0, rem_cpu_affinity=1) == "both ends (pinned)"
    assert lat(rem_cpu_affinity=1) == "remote end (pinned)"
    assert lat(loc_cpu_affinity=0) == "local end (pinned)"
    assert lat(loc_cpu_affinity=0, rem_cpu_affinity=1, busy_poll=False) is None
    assert lat() is None


def _sleeps_per_s(run) -> dict:
    """{TID of each socket-engine worker thread of this process: (name, CPUs it may run on,
    its voluntary context switches per second)}, over a second in the middle of run (which
    it waits for)."""
    time.sleep(0.5)
    t0, before = time.monotonic(), worker_threads("voluntary_ctxt_switches")
    time.sleep(1.0)
    t1, after = time.monotonic(), worker_threads("voluntary_ctxt_switches")
    run.wait()
    return {tid: (name, cpus, (after[tid][2] - n) / (t1 - t0)) for tid, (name, cpus, n) in before.items()
            if tid in after}


@pytest.fixture
def server():
    with serving() as srv:
        yield srv


def _receiver_sleeps(spec, rcv: int) -> float:
    """The receiving worker's (pinned to rcv; pk-sock/0, local and remote) sleeps per second
    in a run of spec, which must move every datagram."""
    run = perfkit.Run(spec).start()
    per_s = _sleeps_per_s(run)
    s = run.summary
    assert run.error is None and s["pkts_rx"] > 10_000
    assert s["pkts_rx"] + s["lost"] - s["dup"] == s["pkts_tx"]
    (n,) = [n for name, cpus, n in per_s.values() if (name, cpus) == ("pk-sock/0", (rcv,))]
    return n


def _holds(measure, claim):
    """measure() until claim(figures) holds, three tries. A polling end spins a bounded time
    and then sleeps, so on a machine busier than its CPUs (its partner not running) it sleeps
    more and the ratios shrink (seen: 42 vs 316 sleeps/s at load 12 on 2 CPUs): then the test
    is skipped with the figures; on a machine with CPU to spare it fails."""
    for _ in range(3):
        figures = measure()
        if claim(figures):
            return figures
    load, cpus = os.getloadavg()[0], os.cpu_count()
    if load > cpus:
        pytest.skip(f"the machine had load {load:.1f} on {cpus} CPUs; polling ends could not show it: {figures}")
    raise AssertionError(figures)


@two_cpus
def test_a_pinned_udp_bw_receiver_in_a_lab_polls_instead_of_sleeping():
    """Left to decide, the receiver in h2 pinned to its own CPU hardly sleeps; told not to
    poll, it sleeps thousands of times a second, each sleep a wake-up the sender pays for."""
    lab_mod = lab_module_or_skip()
    rcv, snd = sorted(os.sched_getaffinity(0))[:2]
    lab = lab_up_or_skip(lab_mod)
    try:
        _holds(lambda: {bp: _receiver_sleeps(LocalTest("udp_bw", size=64, duration=2, lab=lab.name, busy_poll=bp,
                                                       loc_cpu_affinity=snd, rem_cpu_affinity=rcv), rcv)
                        for bp in (None, False)},
               lambda sleeps: sleeps[False] > SLEEPS and max(sleeps[None], 5) * 10 < sleeps[False])
    finally:
        lab.down()


@two_cpus
def test_the_server_polls_as_told_and_not_by_default_on_loopback(server):
    """Over loopback the pinned receiver sleeps unless told (seen: 17.5k sleeps/s; 12-26
    polling); the server's worker follows the client's busy_poll."""
    rcv, snd = sorted(os.sched_getaffinity(0))[:2]
    _holds(lambda: {bp: _receiver_sleeps(RemoteTest("udp_bw", port=server.port, size=64, gso=0, duration=2,
                                                    busy_poll=bp, loc_cpu_affinity=snd, rem_cpu_affinity=rcv), rcv)
                    for bp in (None, True, False)},
           lambda sleeps: sleeps[None] > SLEEPS and sleeps[False] > SLEEPS
           and max(sleeps[True], 5) * 10 < min(sleeps[None], sleeps[False]))


def _ends_sleeps(spec) -> tuple[dict, float]:
    """{worker thread id: sleeps per second} of a latency run of spec (both ends' threads
    are in this process: two), over a second in its middle, and its latency (mean round
    trip / 2, us); every ping must be answered."""
    run = perfkit.Run(spec).start()
    per_s = {tid: n for tid, (_, _, n) in _sleeps_per_s(run).items()}
    s = run.summary
    assert run.error is None and s["pkts_rx"] > 1000 and s["lost"] == 0, s
    assert len(per_s) == 2, per_s
    return per_s, s["latency_us"]


@two_cpus
@pytest.mark.parametrize("test", ["tcp_lat", "udp_lat"])
def test_both_pinned_ends_of_a_latency_test_poll_by_default(server, test):
    """Pinned, the pinger (this host) and the server's answering end spin through each round
    trip (a ~15-30 us one here): they hardly sleep; told not to, each sleeps once a round trip
    (seen: ~30k/s each). Unpinned, or both pinned to one CPU, they sleep."""
    rem, loc = sorted(os.sched_getaffinity(0))[:2]

    def sleeps(**kw):
        return _ends_sleeps(RemoteTest(test, port=server.port, size=64, duration=2, **kw))[0]
    pinned = {"loc_cpu_affinity": loc, "rem_cpu_affinity": rem}
    _holds(lambda: (sleeps(**pinned), sleeps(**pinned, busy_poll=False), sleeps()),
           lambda f: min(f[1].values()) > SLEEPS and min(f[2].values()) > SLEEPS
           and max(*f[0].values(), 5) * 10 < min(f[1].values()))   # polling, told not, unpinned
    # on one CPU neither end spins, the server's as well (told so by the client): a spinning end
    # would hold the CPU its peer needs until its spin ends (seen: ~970 us round trips)
    one_cpu, latency_us = _ends_sleeps(RemoteTest(test, port=server.port, size=64, duration=2,
                                                  loc_cpu_affinity=loc, rem_cpu_affinity=loc))
    assert min(one_cpu.values()) > SLEEPS and latency_us < 200, (one_cpu, latency_us)


@two_cpus
def test_pinned_ping_pong_ends_spin_through_round_trips_longer_than_a_receivers_spin():
    """udp_lat 32 KiB over a lab's veth: each datagram goes as 23 fragments, round trips of
    ~140 us here, past the 50 us a receiver spins; a ping-pong end spins up to 1 ms, so the
    pinned ends still hardly sleep (each would, once a round trip, after 50 us)."""
    lab_mod = lab_module_or_skip()
    loc, rem = sorted(os.sched_getaffinity(0))[:2]
    lab = lab_up_or_skip(lab_mod)
    try:
        _holds(lambda: [_ends_sleeps(LocalTest("udp_lat", size="32K", duration=2, lab=lab.name, busy_poll=bp,
                                               loc_cpu_affinity=loc, rem_cpu_affinity=rem))[0]
                        for bp in (None, False)],   # polling, told not
               lambda f: min(f[1].values()) > SLEEPS and max(*f[0].values(), 5) * 10 < min(f[1].values()))
    finally:
        lab.down()


def _reads(*options) -> tuple[int, int]:
    """perfkit local tcp_bw with options under strace: the run's recv calls (both ends'
    threads) and how many did not wait (MSG_DONTWAIT: a polling reader's, while it spins
    after data arrived; a blocking reader never passes it). Every byte must arrive.
    Counted by flag, not by reads that found nothing: how often a spinning read finds the
    socket empty depends on how much CPU the sender gets, the flag does not."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace")
        out = subprocess.run(["strace", "-f", "-s", "0", "-e", "trace=recvfrom", "-e", "signal=none", "-o", trace,
                              sys.executable, "-P", "-m", "perfkit", "local", "tcp_bw", "-t", "1", *options, "--json"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout.splitlines()[-1])["summary"]
        assert summary["bytes_rx"] == summary["bytes_tx"] > 0
        calls = dontwait = 0
        with open(trace) as f:
            for line in f:   # a blocking call is split: "recvfrom(fd, <unfinished ...>", "<... recvfrom resumed>..."
                calls += "recvfrom(" in line
                dontwait += "MSG_DONTWAIT" in line
    return calls, dontwait


@needs_strace
def test_told_to_a_tcp_bw_receiver_polls_too():
    """busy_poll=True reaches the stream receiver: it reads without waiting while it spins,
    and each wait that ends in a blocking read is followed by a read that does not, so at
    least half its reads pass MSG_DONTWAIT; by default none does."""
    (calls, blocking), (polls, polling) = _reads("-m", "64"), _reads("-m", "64", "--busy-poll", "1")
    assert calls > 10 and blocking == 0, (calls, blocking)
    assert polls > 10 and 2 * polling >= polls - 1, (polls, polling)


@needs_strace
@two_cpus
def test_a_pinned_tcp_bw_reader_of_big_messages_polls_by_default():
    """Pinned, 64 KiB messages: the reader polls unless told not to; 1 KiB: it sleeps."""
    rcv, snd = (str(c) for c in sorted(os.sched_getaffinity(0))[:2])
    pinned = ("-lca", snd, "-rca", rcv)
    big, told_not, small = (_reads(*pinned, *more) for more in
                            (("-m", "64K"), ("-m", "64K", "--busy-poll", "0"), ("-m", "1K")))
    assert big[0] > 10 and 2 * big[1] >= big[0] - 1, big
    assert told_not[1] == 0 and small[1] == 0, (told_not, small)
