"""Live control of the socket engine's udp_bw (issue 30): run.set_rate() retunes the sender's
pacer at its next send batch (a control slot, no lock), recorded per interval as rate_target;
in this process, through a remote handle's own sender, and flipped through a set_rate message
to the perfkit server whose worker sends. Loopback only; counts that hold on a busy machine."""
import time

import pytest

from perfkit.engines.remote import Control
from perfkit.errors import EngineError
from perfkit.run import Run
from perfkit.spec import LocalTest, RemoteTest

from _sock_tests import serving

OLD, NEW = 20_000, 50_000


def _retune(spec, duration):
    """Run spec, set_rate(NEW) once two rows are in; the run, when the change was asked (in seconds
    since start) and answered, and the last row's time before it."""
    run = Run(spec, interval=0.5).start()
    started = time.monotonic()
    deadline = started + 10
    while len(run.rows) < 2 and time.monotonic() < deadline:   # rows, not sleeps: a busy sampler may be late
        time.sleep(0.01)
    asked = time.monotonic() - started
    run.set_rate(f"{NEW // 1000}kpps")
    answered = time.monotonic() - started
    t_change = run.rows[-1]["time_s"]
    run.wait()
    return run, asked, answered, t_change


def _check_retuned(run, asked, answered, t_change, duration):
    s, rows = run.summary, run.rows
    assert s["pkts_tx"] == s["pkts_rx"] - s["dup"] + s["lost"]   # sent = received + lost
    assert all(r["rate_target"] == OLD for r in rows if r["time_s"] <= t_change)
    after = [r for r in rows if r["time_s"] - r["interval_s"] >= t_change + 0.5 and r["time_s"] <= duration]
    assert after and all(r["rate_target"] == NEW for r in after), [r["rate_target"] for r in rows]
    # the pacer re-based at the change: OLD/s until then, NEW/s after; never NEW/s over the whole run
    # (what an un-rebased pacer would catch up in one burst). A late start only lowers the count.
    most = NEW * duration - (NEW - OLD) * (asked - 0.05) + 64
    assert s["pkts_tx"] <= most, (s["pkts_tx"], most)
    assert s["pkts_tx"] >= 0.5 * (OLD * asked + NEW * (duration - answered - 0.5))


def test_local_udp_bw_set_rate_mid_run():
    duration = 3.0
    run, *when = _retune(LocalTest("udp_bw", rate=f"{OLD}pps", duration=duration, gso=0), duration)
    _check_retuned(run, *when, duration)
    assert run.frame["rate_target"][0] == OLD and "rate_target" in run.frame.columns


@pytest.mark.parametrize("flip", [False, True], ids=["client-sends", "server-sends"])
def test_remote_udp_bw_set_rate_mid_run(flip):
    duration = 3.0
    with serving() as srv:
        spec = RemoteTest(test="udp_bw", port=srv.port, size=64, rate=f"{OLD}pps", duration=duration, gso=0,
                          flip=flip)
        run, *when = _retune(spec, duration)
    _check_retuned(run, *when, duration)
    assert run.roles[0 if not flip else 1].endswith("udp_send")


def test_set_rate_refused_where_nothing_paces():
    with pytest.raises(ValueError, match=r"^set_rate: tcp_bw has no live rate \(udp_bw only\)$"):
        Run(LocalTest("tcp_bw", duration=1)).set_rate("1kpps")
    run = Run(LocalTest("udp_bw", rate="10kpps", duration=1))
    with pytest.raises(ValueError, match=r"^set_rate: cannot read"):
        run.set_rate("fast")
    with pytest.raises(RuntimeError, match="not running"):
        run.set_rate("20kpps")


def test_server_refuses_set_rate_of_a_receiver_or_out_of_range():
    with serving() as srv:
        ctl = Control("127.0.0.1", srv.port)
        try:
            ctl.request("prepare", test="udp_bw", duration=1)   # the server's end receives
            with pytest.raises(EngineError, match="unexpected 'set_rate'"):
                ctl.request("set_rate", rate=1000.0)
        finally:
            ctl.close()
        ctl = Control("127.0.0.1", srv.port)
        try:
            ctl.request("prepare", test="udp_bw", flip=True, port=9, duration=1)   # made, not started
            with pytest.raises(EngineError, match="out of range"):
                ctl.request("set_rate", rate=1e11)
        finally:
            ctl.close()
