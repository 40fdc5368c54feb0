"""busy_poll: which ends spin on their socket before they sleep (spec.polls: as told, or,
left out, a pinned udp_bw receiver without GSO), that they do (the receiving thread's
voluntary context switches: a polling receiver hardly sleeps), local and remote, and that
-vvu says so."""
import os
import threading
import time

import pytest

import perfkit
from perfkit import LocalTest, RemoteTest
from perfkit.remote import Server
from perfkit.report import used_params

two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to pin the ends apart")


@pytest.mark.parametrize("spec, receives, cpu, polls", [
    (LocalTest("udp_bw", gso=0), True, 1, True),          # the auto rule: pinned, no GSO
    (LocalTest("udp_bw", gso=0), True, None, False),      # not pinned: it might share the sender's CPU
    (LocalTest("udp_bw", gso=8), True, 1, False),         # GSO: 7-10% less polling, over loopback
    (LocalTest("udp_bw", gso=0), False, 0, False),        # the sender never polls
    (LocalTest("tcp_bw"), True, 1, False),                # TCP: the reader's pace sets the window
    (LocalTest("udp_lat"), True, 1, False),               # latency tests: only when told
    (LocalTest("udp_bw", gso=0, busy_poll=False), True, 1, False),
    (LocalTest("tcp_bw", busy_poll=True), True, None, True),
    (LocalTest("tcp_lat", busy_poll=True), False, None, True),
    (RemoteTest("udp_bw", host="198.18.0.2"), True, 3, True),   # off loopback GSO is off by default
])
def test_which_ends_poll(spec, receives, cpu, polls):
    assert spec.polls(receives, cpu) is polls


def test_busy_poll_takes_true_false_or_nothing():
    assert LocalTest().busy_poll is None
    assert LocalTest(busy_poll=1).busy_poll is True
    with pytest.raises(ValueError, match="busy_poll"):
        LocalTest(busy_poll="auto")


def test_vvu_says_which_end_polled():
    def shown(**kw):
        return used_params(RemoteTest("udp_bw", gso=0, **kw)).get("busy_poll", (None, None))[1]
    assert shown(rem_cpu_affinity=1) == "receiver (pinned)"
    assert shown(loc_cpu_affinity=1) is None                      # this host sends: its pin is the sender's
    assert shown(loc_cpu_affinity=1, flip=True) == "receiver (pinned)"
    assert shown(rem_cpu_affinity=1, busy_poll=False) is None
    assert shown(busy_poll=True) == "1"
    assert shown() is None


def _sleeps_per_s(run) -> dict:
    """{(name, CPUs it may run on) of each socket-engine worker thread of this process: its
    voluntary context switches per second}, over a second in the middle of run (which it
    waits for)."""
    def snapshot():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    name = f.read().strip()
                if not name.startswith("pk-sock/"):
                    continue
                with open(f"/proc/self/task/{tid}/status") as f:
                    n = next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
                out[tid] = ((name, tuple(sorted(os.sched_getaffinity(int(tid))))), n)
            except (FileNotFoundError, ProcessLookupError):   # the thread ended meanwhile
                pass
        return out
    time.sleep(0.5)
    t0, before = time.monotonic(), snapshot()
    time.sleep(1.0)
    t1, after = time.monotonic(), snapshot()
    run.wait()
    return {key: (after[tid][1] - n) / (t1 - t0) for tid, (key, n) in before.items() if tid in after}


@pytest.fixture
def server():
    srv = Server("127.0.0.1", 0, log=lambda line: None)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.stop()
    t.join(timeout=10)


@two_cpus
@pytest.mark.parametrize("where", ["local", "remote"])
def test_a_pinned_udp_bw_receiver_polls_instead_of_sleeping(where, request):
    """Left to decide, the receiver pinned to its own CPU hardly sleeps; told not to poll, it
    sleeps thousands of times a second, each sleep a wake-up for the sender to pay
    (seen over loopback: 12-26/s polling, 17.5k/s sleeping)."""
    rcv, snd = sorted(os.sched_getaffinity(0))[:2]
    sleeps = {}
    for busy_poll in (None, False):
        kw = dict(test="udp_bw", size=64, gso=0, duration=2, loc_cpu_affinity=snd, rem_cpu_affinity=rcv,
                  busy_poll=busy_poll)
        spec = (LocalTest(**kw) if where == "local"
                else RemoteTest(port=request.getfixturevalue("server").port, **kw))
        run = perfkit.Run(spec).start()
        per_s = _sleeps_per_s(run)
        assert run.error is None and run.summary["pkts_rx"] > 10_000
        assert run.summary["pkts_rx"] + run.summary["lost"] - run.summary["dup"] == run.summary["pkts_tx"]
        # the receiver: the one pinned to rcv (local: pk-sock/0; remote: the server's, pk-sock/0 too)
        sleeps[busy_poll] = per_s[("pk-sock/0", (rcv,))]
    assert sleeps[False] > 1000 and sleeps[None] * 10 < sleeps[False], sleeps


def test_told_to_a_tcp_bw_receiver_polls_too():
    """busy_poll=True reaches the stream receiver (it blocks by default: seen 3.6k sleeps/s
    at 64 B over loopback, 10-15 polling)."""
    sleeps = {}
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    for busy_poll in (None, True):
        run = perfkit.Run(LocalTest("tcp_bw", size=64, duration=2, busy_poll=busy_poll)).start()
        per_s = _sleeps_per_s(run)
        assert run.error is None and run.summary["bytes_rx"] == run.summary["bytes_tx"] > 0
        sleeps[busy_poll] = per_s[("pk-sock/0", cpus)]   # worker 0: the receiving end
    assert sleeps[None] > 1000 and sleeps[True] * 10 < sleeps[None], sleeps
