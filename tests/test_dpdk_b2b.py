"""A counted burst on the DPDK generators (issue 30, RFC 2544 back-to-back on DPDK): DpdkFlows'
messages stops every generator once its share of that many load frames went out, unpaced as
fast as the port takes them; the receiver counts them (sent = received + lost). RFC 2544's
back-to-back runs on a ring pair with it. Real ring pairs in this process."""
import pytest

from perfkit.rfc2544 import rfc2544
from perfkit.run import Run
from perfkit.spec import DpdkFlows


@pytest.mark.dpdk
@pytest.mark.parametrize("cores, n", [(1, 5000), (2, 10_001)])
def test_a_counted_burst_sends_exactly_n_frames(eal, cores, n):
    spec = DpdkFlows(port=f"ring:cb{cores}:0", peer=f"ring:cb{cores}:1", messages=n, duration=5, flows=4,
                     cores=cores)
    run = Run(spec, interval=0.25)
    run.run()
    s = run.summary
    assert s["pkts_tx"] == n, s["pkts_tx"]                      # exactly the burst, split over the cores
    assert s["pkts_rx"] + s["lost"] == n
    assert s["duration_s"] < 5                                  # it stopped with the burst, not at the duration


@pytest.mark.dpdk
def test_rfc2544_back_to_back_runs_on_a_ring_pair(eal):
    res = rfc2544(DpdkFlows(port="ring:cb3:0", peer="ring:cb3:1", flows=4), sizes=(128,), tests="back_to_back",
                  b2b_trials=2, max_burst=2000, b2b_trial="0.5s", settle="0.05s")
    assert res.stopped == "done" and res.error is None and "back_to_back" not in res.unsupported, res.error
    trials = [t for t in res.trial_rows if t["test"] == "back_to_back"]
    assert trials and all(t["sent"] == t["burst"] for t in trials)      # every burst went out whole
    assert all(t["lost"] == 0 for t in trials if t["passed"])
    for rep in res.rows["back_to_back"]:
        assert 0 < rep["burst_frames"] <= 2000
    assert max(t["burst"] for t in trials if t["passed"]) == max(r["burst_frames"] for r in res.rows["back_to_back"])
