"""Live control of a running DPDK load (issue 30): run.set_rate() retunes every generator at
its next burst, recorded per interval as rate_target; flows added while running
(flow_rate up to flows_max) with the flows_active gauge. Real ring pairs in this process,
counts that hold on a busy machine (sent = received + lost), no timing windows."""
import json
import subprocess
import sys
import time

import pytest

from perfkit.run import Run
from perfkit.spec import DpdkFlows, LocalTest

TX_OLD, TX_NEW = 20_000, 50_000


def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.dpdk
def test_set_rate_mid_run_retunes_the_pacer_without_a_catch_up_burst(eal):
    duration = 3.0
    spec = DpdkFlows(port="ring:sr1:0", peer="ring:sr1:1", rate=f"{TX_OLD}pps", duration=duration, flows=4)
    run = Run(spec, interval=0.5).start()
    started = time.monotonic()   # the workers started inside start(): their clock began before this
    deadline = started + 5
    while len(run.rows) < 2 and time.monotonic() < deadline:   # a busy sampler may be late: rows, not sleeps
        time.sleep(0.01)
    asked = time.monotonic()
    run.set_rate(f"{TX_NEW / 1000:g}kpps")
    t_change = run.rows[-1]["time_s"] if run.rows else 0.0   # no row after this one saw only the old rate
    answered = time.monotonic()
    run.wait()
    s, rows = run.summary, run.rows
    assert s["pkts_tx"] == s["pkts_rx"] + s["lost"]            # every frame accounted for
    assert all(r["rate_target"] == TX_OLD for r in rows if r["time_s"] <= t_change)
    # skip the interval the change fell in, and the short final one
    after = [r for r in rows if r["time_s"] - r["interval_s"] >= t_change + 0.5 and r["interval_s"] >= 0.25]
    before = [r for r in rows if r["time_s"] <= t_change]
    assert after and before
    assert all(r["rate_target"] == TX_NEW for r in after)
    mean = lambda rs: sum(r["pkts_tx_per_s"] * r["interval_s"] for r in rs) / sum(r["interval_s"] for r in rs)  # noqa: E731
    assert mean(after) > 1.6 * mean(before)
    # the pacer re-based at the change: frames = old rate until then + new rate after. In the worker's
    # clock the change came after asked - started (less 50 ms: a thread made in start() may first run
    # a little later), and soon after answered (its next burst: 0.25 s allows for a worker descheduled
    # then). Without re-basing it would have sent new rate x duration, the difference (30k frames a
    # second before the change) caught up at once.
    t_lo, t_hi = asked - started - 0.05, answered - started + 0.25
    most = TX_NEW * duration - (TX_NEW - TX_OLD) * t_lo
    least = TX_NEW * duration - (TX_NEW - TX_OLD) * t_hi
    assert least - 2 <= s["pkts_tx"] <= most + 2, (least, s["pkts_tx"], most)
    assert s["pkts_tx"] < TX_NEW * duration - (TX_NEW - TX_OLD) * 0.5


@pytest.mark.dpdk
def test_set_rate_from_unpaced_and_bps(eal):
    """An unpaced load takes a rate (pps or bps: whole frames of the spec's size) and then keeps it."""
    spec = DpdkFlows(port="ring:sr2:0", peer="ring:sr2:1", duration=1.5, size=128, burst=8)
    run = Run(spec, interval=0.25).start()
    run.set_rate("10.24Mbps")   # 128-byte frames: 10 kpps
    run.wait()
    s = run.summary
    assert s["pkts_tx"] == s["pkts_rx"] + s["lost"]
    # taken at its first burst after the call (before the first row): paced from then on
    assert all(r["rate_target"] == 10_000 for r in run.rows)
    middle = [r for r in run.rows[1:] if r["interval_s"] >= 0.2]
    assert middle and sum(r["pkts_tx_per_s"] for r in middle) / len(middle) < 15_000


@pytest.mark.parametrize("value, words", [
    ("fast", "cannot read"), (-5, "above 0"), (0, "above 0"), ("0pps", "above 0"),
    ("1e12pps", "above"), ("10kfoo", "cannot read"), (float("nan"), "finite")])
def test_bad_rates_are_refused_in_one_line_before_the_engine(value, words):
    run = Run(DpdkFlows(port="ring:sr3:0", peer="ring:sr3:1", rate="20kpps", duration=1))
    with pytest.raises(ValueError) as e:
        run.set_rate(value)
    msg = str(e.value)
    assert msg.startswith("set_rate: ") and words in msg and "\n" not in msg


def test_set_rate_needs_a_running_dpdk_flows_load():
    run = Run(DpdkFlows(port="ring:sr4:0", peer="ring:sr4:1", rate="20kpps", duration=1))
    with pytest.raises(RuntimeError, match="not running"):
        run.set_rate("50kpps")
    with pytest.raises(ValueError, match=r"^set_rate: tcp_bw has no live rate \(udp_bw only\)$"):
        Run(LocalTest("tcp_bw", duration=1)).set_rate("20kpps")


@pytest.mark.dpdk
def test_flows_grow_at_flow_rate_to_flows_max(eal):
    spec = DpdkFlows(port="ring:sr5:0", peer="ring:sr5:1", rate="31kpps", duration=2.0, flows=100,
                     flows_max="1.2k", flow_rate="1k/s", cores=2)
    seen = []   # (seconds since before start, flows_active of that row)
    t0 = time.monotonic()
    run = Run(spec, interval=0.25, subscribers=(lambda r: seen.append((time.monotonic() - t0, r["flows_active"])),))
    t0 = time.monotonic()
    run.run()
    s = run.summary
    assert s["pkts_tx"] == s["pkts_rx"] + s["lost"]
    assert run.frame["flows_active"][-1] == 1200
    assert set(run.frame["rate_target"]) == {31_000}         # whole frames/s, 15.5k on each core
    assert s["flows_seen"] == 1200                           # the receiver saw every flow it grew to
    assert run.frame["flows_active"][0] < 1200               # it started below flows_max ...
    for t, active in seen:                                   # ... and never grew faster than flow_rate
        assert active <= 100 + 1000 * t + 2, (t, active)
    assert list(run.frame["flows_active"]) == sorted(run.frame["flows_active"])


@pytest.mark.parametrize("kw, words", [
    ({"flow_rate": "1k/s"}, "flow_rate: give flows_max"),
    ({"flows_max": 1000}, "flows_max: give flow_rate"),
    ({"flow_rate": "1k/s", "flows_max": 10}, "flows_max: 10 is out of range 11.."),
    ({"flow_rate": "1k/s", "flows_max": "200k"}, "flows_max: 200000 is out of range"),
    ({"flow_rate": "fast", "flows_max": 100}, "flow_rate: cannot read"),
    ({"flow_rate": 0, "flows_max": 100}, "flow_rate: 0 is out of range"),
    ({"flow_rate": "1k/s", "flows_max": "1.5x"}, "flows_max: '1.5x' is not a whole count"),
])
def test_bad_flow_growth_is_one_line_naming_the_field(kw, words):
    with pytest.raises(ValueError) as e:
        DpdkFlows(port="ring:sr6:0", peer="ring:sr6:1", rate="1kpps", flows=10, **kw)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_flow_growth_plans_each_core_its_share():
    from perfkit.kinds.dpdk_udp import plan
    spec = DpdkFlows(port="ring:sr7:0", peer="ring:sr7:1", rate="1kpps", flows=10, flows_max=1000,
                     flow_rate=500, cores=2)
    gens = [w for w in plan(spec)["workers"] if w["role"] == "dpdk_send"]
    assert [(g["flow_first"], g["flows"], g["flows_start"], g["flow_rate"]) for g in gens] == [
        (0, 500, 5, 250.0), (500, 500, 5, 250.0)]
    assert all(w["flows"] == 1000 for w in plan(spec)["workers"] if w["role"] == "dpdk_recv")
    assert DpdkFlows.from_dict(spec.to_dict()) == spec


@pytest.mark.dpdk
def test_cli_flows_grow(eal):
    p = _cli("flows", "--port", "ring:sr8:0", "--peer", "ring:sr8:1", "--rate", "20kpps", "--flows", "10",
             "--flow-rate", "1k/s", "--flows-max", "500", "--duration", "1", "--json")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    summary = lines[-1]["summary"]
    assert summary["flows_seen"] == 500 and summary["pkts_tx"] == summary["pkts_rx"] + summary["lost"]
    assert lines[-2]["flows_active"] == 500 and lines[-2]["rate_target"] == 20_000


@pytest.mark.parametrize("args, words", [
    (("--flow-rate", "1k/s"), "--flow-rate: only with --flows-max"),
    (("--flows-max", "100k"), "--flows-max: only with --flow-rate"),
    (("--engine", "socket", "--flow-rate", "1k/s", "--flows-max", "100"), "--flow-rate: only with --engine dpdk"),
    (("--flow-rate", "1k/s", "--flows-max", "5"), "flows_max: 5 is out of range"),
])
def test_cli_refuses_flow_growth_where_it_means_nothing(args, words, capsys):
    from perfkit.cli import main
    port = () if "socket" in args else ("--port", "ring:sr9:0", "--peer", "ring:sr9:1")
    assert main(["flows", *port, "--flows", "10", *args]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.dpdk
def test_converge_finds_a_receiver_capacity_tracks_its_change_and_stays_in_bounds(eal, monkeypatch):
    """A receiver that takes at most CAP frames/s (the engine's rx_cap test hook: its queue fills
    and holds the sender back): the controller bisects run.set_rate to about CAP, then, when the
    receiver's capacity halves mid-run, re-converges to about that."""
    import perfkit.kinds.dpdk_udp as kind
    from perfkit.converge import Converge
    cap, cap2, plan = 30_000.0, 15_000.0, kind.plan

    def capped(spec):   # the far end of this test's link is slow; the plan is otherwise the kind's
        p = plan(spec)
        p["workers"] = [{**w, "rx_cap": cap} if w["role"] == "dpdk_recv" else w for w in p["workers"]]
        return p
    monkeypatch.setattr(kind, "plan", capped)
    spec = DpdkFlows(port="ring:sr10:0", peer="ring:sr10:1", rate="10kpps", duration=6.5, flows=4)
    run = Run(spec, interval=0.2).start()
    conv = Converge(lo="5kpps", hi="100kpps", criterion="keeps-up", resolution=0.08).attach(run)
    deadline = time.monotonic() + 4
    while conv.converged is None and time.monotonic() < deadline:
        time.sleep(0.02)
    first = conv.converged
    run._handle._set_rx_cap(cap2)   # the test hook: the receiver slows down from now
    run.wait()
    s = run.summary
    assert s["pkts_tx"] == s["pkts_rx"] + s["lost"]
    assert all(5_000 <= t["rate"] <= 100_000 for t in conv.trajectory)        # never leaves its bounds
    assert all(5_000 <= r <= 100_000 for r in run.frame["rate_target"])
    # above a capacity the sender cannot keep up (a hard cap); well below it, a busy machine may still
    # have slowed the receiver, so the lower bounds are loose
    assert first is not None and 0.5 * cap <= first <= cap * 1.08 / 0.95, conv.trajectory
    assert s["reconverged"] >= 1 and s["converged_pps"] is not None, "\n".join(map(str, conv.trajectory))
    assert 0.5 * cap2 <= s["converged_pps"] <= cap2 * 1.08 / 0.95, conv.trajectory
    assert s["converge_steps"] == len(conv.trajectory)


@pytest.mark.dpdk
def test_converge_on_cpu_climbs_to_its_upper_bound_when_the_cores_have_room(eal):
    """BiTester's criterion: the busiest generator under 95% of its core. A ring pair at 60 kpps
    keeps a generator far below that, so bisection climbs to the upper bound."""
    from perfkit.converge import Converge
    spec = DpdkFlows(port="ring:sr11:0", peer="ring:sr11:1", rate="5kpps", duration=3, flows=4)
    run = Run(spec, interval=0.2).start()
    conv = Converge(lo="5kpps", hi="60kpps", criterion="cpu", resolution=0.08).attach(run)
    run.wait()
    s = run.summary
    assert s["pkts_tx"] == s["pkts_rx"] + s["lost"]
    assert s["converged_pps"] is not None and s["converged_pps"] >= 60_000 * (1 - 0.08), conv.trajectory
    assert all(5_000 <= t["rate"] <= 60_000 for t in conv.trajectory)


@pytest.mark.parametrize("kw, words", [
    ({"lo": "10kpps", "hi": "5kpps"}, "hi: '5kpps' must be above lo"),
    ({"lo": "1Mbps", "hi": "5kpps"}, "lo: '1Mbps': a rate in packets per second"),
    ({"lo": 1, "hi": 2, "criterion": "fast"}, "criterion: 'fast' is not one of keeps-up, zero-loss, cpu"),
    ({"lo": 1, "hi": 2, "resolution": 0}, "resolution: 0 is out of range"),
    ({"lo": 1, "hi": 2, "skip": 1.5}, "skip: 1.5 is not a whole number of rows in 0..10"),
])
def test_converge_bad_settings_are_one_line(kw, words):
    from perfkit.converge import Converge
    with pytest.raises(ValueError) as e:
        Converge(**kw)
    assert words in str(e.value) and "\n" not in str(e.value)
