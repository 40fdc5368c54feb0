"""Runs start, stop and fail without leaking: file descriptors, threads, memory.
Stop from another thread, KeyboardInterrupt and a bind failure all end cleanly,
with the final row and summary a finished run promises."""
from __future__ import annotations

import gc
import os
import select
import signal
import socket
import threading
import time

import pytest

import perfkit
from perfkit import EngineError, LocalTest

from _labs import close_while_another_thread_joins  # noqa: E402

TESTS = ["udp_bw", "udp_lat", "tcp_bw", "tcp_lat"]


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def fd_targets() -> dict[str, str]:
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:   # closed meanwhile, or the listing's own
            pass
    return out


def fds_settle(baseline: int, timeout: float = 2.0) -> int:
    """Descriptor count once another thread's short-lived one (a library's background I/O) is closed."""
    deadline = time.monotonic() + timeout
    while fd_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    return fd_count()


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))


def settle(baseline_threads: int, timeout: float = 2.0) -> int:
    """Thread count once finished threads are gone (a sampler thread exits just after done)."""
    deadline = time.monotonic() + timeout
    while thread_count() > baseline_threads and time.monotonic() < deadline:
        time.sleep(0.01)
    return thread_count()


@pytest.fixture(scope="module", autouse=True)
def warm():
    """One run of each kind first: polars' threads and allocator pools, Python's caches."""
    for test in TESTS:
        perfkit.run(LocalTest(test, duration=0.1), interval=0.05).frame
    gc.collect()


def _check_finished(run, what: str):
    s = run.summary
    assert run.done and s is not None and run.rows, f"{what}: no summary or rows"
    last = run.rows[-1]
    for k in ("pkts_tx", "pkts_rx", "bytes_tx", "bytes_rx"):
        # == once run.py always records the final row (see test_final_row_...: now
        # it drops the final row when it comes within 1 ms of the previous one)
        assert last[k] <= s[k], f"{what}: last row {k}={last[k]} but summary {s[k]}"
    assert s["pkts_tx"] > 0, f"{what}: nothing sent"
    if s["test"].startswith("udp"):
        assert s["pkts_rx"] - s["dup"] + s["lost"] == s["pkts_tx"], f"{what}: {s}"
    else:
        assert s["bytes_rx"] == s["bytes_tx"], f"{what}: {s}"


def test_fifty_short_runs_leak_nothing():
    specs = [LocalTest("udp_bw", duration=0.2), LocalTest("udp_lat", duration=0.2),
             LocalTest("tcp_bw", duration=0.2), LocalTest("tcp_lat", duration=0.2),
             LocalTest("udp_bw", duration=0.2, flows=16, batch=8),
             LocalTest("udp_bw", duration=0.2, gso=4, rate="20kpps"),
             LocalTest("tcp_lat", duration=0.2, busy_poll=True)]
    for spec in specs:   # a first run of each warms lazy imports and buffers (flat from then: 200 runs grew 0.02 MiB)
        perfkit.Run(spec, interval=0.05).run()
    gc.collect()
    fds0, threads0, rss0 = fd_count(), thread_count(), rss_kb()
    peak_threads = 0
    for i in range(50):
        spec = specs[i % len(specs)]
        run = perfkit.Run(spec, interval=0.05).start()
        peak_threads = max(peak_threads, thread_count())
        run.wait(timeout=10)
        assert run.done and run.error is None, (i, spec, run.error)
        _check_finished(run, f"run {i} ({spec.test})")
        del run
    gc.collect()
    threads1 = settle(threads0)
    fds1, rss1 = fds_settle(fds0), rss_kb()   # a leak stays; another thread's short-lived one closes
    print(f"fds {fds0}->{fds1}, threads {threads0}->{threads1} (peak {peak_threads}), "
          f"RSS {rss0 / 1024:.1f}->{rss1 / 1024:.1f} MiB")
    assert peak_threads > threads0, "the runs started no threads?"
    assert fds1 <= fds0, f"file descriptors leaked: {fds0} before 50 runs, {fds1} after"
    assert threads1 == threads0, f"threads leaked: {threads0} before 50 runs, {threads1} after"
    assert rss1 - rss0 < 4 * 1024, f"RSS grew {(rss1 - rss0) / 1024:.1f} MiB over 50 runs"


@pytest.mark.parametrize("test,rate", [(t, None) for t in TESTS] + [("udp_bw", "0.25pps"), ("tcp_lat", "0.25pps")])
def test_stop_from_another_thread_ends_a_long_run_quickly(test, rate):
    """Also with a slow pacer, asleep until its next message is due 4 s later."""
    threads0 = thread_count()
    run = perfkit.Run(LocalTest(test, duration="30s", rate=rate), interval=0.2).start()
    stopped_at = []
    timer = threading.Timer(0.5, lambda: (stopped_at.append(time.monotonic()), run.stop()))
    timer.start()
    try:
        assert run.wait(timeout=10), "the run did not end within 10 s of a 30 s duration"
    finally:
        timer.cancel()
        run.stop()
        run.wait(timeout=10)
    took = time.monotonic() - stopped_at[0]
    assert took < 1.0, f"{test}: the run took {took:.2f} s to end after stop()"
    assert run.error is None, run.error
    _check_finished(run, test)
    assert run.summary["duration_s"] < 2.0, run.summary["duration_s"]
    assert len(run.rows) >= 2
    assert settle(threads0) == threads0


@pytest.mark.parametrize("test,kind", [("udp_bw", socket.SOCK_DGRAM), ("tcp_bw", socket.SOCK_STREAM),
                                       ("udp_lat", socket.SOCK_DGRAM)])
def test_bind_failure_is_a_clear_engine_error_and_leaves_nothing(test, kind):
    holder = socket.socket(socket.AF_INET, kind)
    try:
        holder.bind(("127.0.0.1", 0))
        if kind == socket.SOCK_STREAM:
            holder.listen(1)
        port = holder.getsockname()[1]
        gc.collect()
        fds0, threads0, before = fd_count(), thread_count(), fd_targets()
        run = perfkit.Run(LocalTest(test, host="127.0.0.1", port=port, duration=1))
        with pytest.raises(EngineError) as info:
            run.start()
        msg = str(info.value)
        assert f"127.0.0.1 port {port}" in msg and "in use" in msg, msg
        assert not run.done and run.summary is None
        with pytest.raises(RuntimeError):   # nothing to wait for; says so
            run.wait(timeout=0.1)
        with pytest.raises(EngineError):    # the one-call form raises the same
            perfkit.run(LocalTest(test, host="127.0.0.1", port=port, duration=1))
        gc.collect()
        assert thread_count() == threads0, "a failed start left threads behind"
        # none new or changed; the count may also have dropped, as an earlier test's last descriptor closed
        # (44 before, 43 after in one CI run)
        settled, new = fds_settle(fds0), {k: v for k, v in fd_targets().items() if before.get(k) != v}
        assert settled <= fds0 and not new, ("a failed start left file descriptors open", settled, fds0, new)
    finally:
        holder.close()


@pytest.mark.parametrize("test", ["udp_bw", "tcp_lat"])
def test_keyboard_interrupt_in_wait_stops_records_and_reraises(test):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGINT goes to the main thread; this test must run there")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    threads0 = thread_count()
    main = threading.main_thread().ident
    sent_at = []
    timer = threading.Timer(0.5, lambda: (sent_at.append(time.monotonic()),
                                          signal.pthread_kill(main, signal.SIGINT)))
    run = perfkit.Run(LocalTest(test, duration="30s"), interval=0.2).start()
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            run.wait()
        took = time.monotonic() - sent_at[0]
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
        run.stop()
        run.wait(timeout=10)
    assert took < 1.0, f"wait() took {took:.2f} s to re-raise after SIGINT"
    assert run.done, "KeyboardInterrupt re-raised before the run finished"
    assert run.error is None, run.error
    _check_finished(run, test)
    assert run.summary["duration_s"] < 2.0
    assert settle(threads0) == threads0


class _ScriptedHandle:
    """An engine handle whose workers finish just after the first row is sampled,
    having done a little more in between: the race a real run hits now and then."""
    roles = ["udp_recv", "udp_send"]

    def __init__(self):
        from perfkit.stats import COUNTER_NAMES, INDEX, Histogram
        self.n, self.hist = len(COUNTER_NAMES), [0] * len(Histogram.LOWER)
        self.idx = INDEX
        self.snaps = 0

    def _counters(self, pkts):
        c = [0] * self.n
        for k in ("pkts_tx", "pkts_rx"):
            c[self.idx[k]] = pkts
        for k in ("bytes_tx", "bytes_rx"):
            c[self.idx[k]] = 64 * pkts
        return c

    def start(self):
        pass

    def stop(self):
        pass

    def running(self):
        return 2 if self.snaps == 0 else 0

    def snapshot(self):
        self.snaps += 1
        pkts = 1000 if self.snaps == 1 else 1056   # 56 more between the row and the end
        return [(self._counters(pkts), self.hist), (self._counters(0), self.hist)]

    def join(self):
        pass

    def error(self):
        return None

    def close(self):
        pass


def test_final_row_is_recorded_even_right_after_a_regular_row(monkeypatch):
    import sys
    import types

    run_mod = sys.modules["perfkit.run"]   # perfkit.run is also the function perfkit.run()
    fake = types.SimpleNamespace(build=lambda spec: _ScriptedHandle())
    monkeypatch.setattr(run_mod, "get_engine", lambda name: fake)
    run = perfkit.Run(LocalTest("udp_bw", duration=1), interval=0.05).start()
    assert run.wait(timeout=5)
    assert run.summary["pkts_tx"] == 1056
    assert run.rows[-1]["pkts_tx"] == 1056, \
        f"last row says {run.rows[-1]['pkts_tx']} packets sent, the summary {run.summary['pkts_tx']}"


@pytest.mark.parametrize("test", TESTS)
def test_close_from_another_thread_while_snapshots_are_read(test):
    """A thread reading snapshot() in a loop while another closes the engine: from the moment
    close() is called the reader gets "the engine is closed", never a copy of an engine being
    freed (close() marks it closed before it lets the GIL go to stop and free the workers,
    which takes up to their 100 ms socket timeouts)."""
    from perfkit.engines import get as get_engine
    for _ in range(10):
        h = get_engine("socket").build(LocalTest(test, duration=5))
        h.start()
        last_ok, seen = [0.0], []

        def read():
            try:
                while True:
                    t = time.monotonic()
                    h.snapshot()
                    last_ok[0] = t
            except EngineError as exc:
                seen.append(str(exc))

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.005)
        t_close = time.monotonic()
        h.close()
        reader.join(5)
        assert not reader.is_alive() and seen == ["the engine is closed"]
        # one snapshot may start as close() waits for the GIL (switch interval 5 ms), none later
        assert last_ok[0] < t_close + 0.02, f"a snapshot {last_ok[0] - t_close:.3f} s after close()"
        with pytest.raises(EngineError, match="closed"):
            h.snapshot()
        h.close()   # twice: nothing happens


@pytest.mark.parametrize("test", TESTS)
def test_close_from_another_thread_while_join_waits(test):
    """One thread in join() (the GIL let go, waiting for the workers) while another closes
    the engine: close() stops the workers and waits for that join before it frees them, so
    the workers are joined once and nothing is freed under the joiner. Both return within
    the workers' 100 ms socket timeouts; a later join() says the engine is closed."""
    from perfkit.engines import get as get_engine
    for _ in range(5):
        close_while_another_thread_joins(get_engine("socket").build(LocalTest(test, duration=5)), within=1.0)


@pytest.mark.parametrize("test", ["tcp_lat", "udp_bw"])
def test_workers_hold_only_their_own_sockets(test):
    """Each socket worker has a file table of its own (its socket calls then skip the
    per-call file reference a shared table costs) that holds only its sockets: a pipe
    this thread closes during the run is closed at once, its reader sees EOF."""
    r, w = os.pipe()
    run = perfkit.Run(LocalTest(test, duration="3s"), interval=0.5).start()
    try:
        deadline = time.monotonic() + 2.0
        private = {}
        while len(private) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            for tid in os.listdir("/proc/self/task"):
                try:
                    fds = os.listdir(f"/proc/self/task/{tid}/fd")
                except OSError:
                    continue
                if str(w) not in fds:
                    private[tid] = fds
        assert len(private) == 2, f"{test}: worker file tables {private}"
        for tid, fds in private.items():
            kinds = {os.readlink(f"/proc/self/task/{tid}/fd/{fd}").split(":")[0] for fd in fds
                     if os.path.exists(f"/proc/self/task/{tid}/fd/{fd}")}
            assert len(fds) <= 2 and kinds <= {"socket"}, f"worker {tid} holds {fds} ({kinds})"
        os.close(w)
        assert select.select([r], [], [], 1.0)[0] and os.read(r, 1) == b"", "the pipe stayed open"
    finally:
        run.stop()
        run.wait(timeout=10)
        os.close(r)
    assert run.error is None, run.error
