"""RFC 2544 (perfkit.rfc2544, `perfkit rfc2544`): frame sizes convert to what each spec sends,
bad options are one line before anything runs, and on a lab link shaped by tbf to a known
rate the throughput at two frame sizes is that rate in frames/s within the resolution, and
frame loss rate steps down 10% at a time until two trials in a row lose nothing.

Trials are short (0.5 s): the lab test takes ~30 s. It needs root and network namespaces.
"""
import subprocess
import sys

import pytest

from perfkit.rfc2544 import JUMBO, SIZES, load, rfc2544, spec_at, validate
from perfkit.spec import DpdkFlows, LocalTest

from _labs import lab_module_or_skip, lab_up_or_skip  # noqa: E402


def test_frame_sizes_convert_to_each_specs_size_field():
    """Ethernet frames with FCS: a DPDK size is the frame; a socket size is the UDP payload
    (frame - 46 over IPv4, - 66 over IPv6); a frame too small for perfkit's sequence is skipped."""
    assert spec_at(DpdkFlows(port="ring:r:0", peer="ring:r:1"), 1518).size == 1518
    assert spec_at(LocalTest("udp_bw"), 128).size == 128 - 46
    assert spec_at(LocalTest("udp_bw", host="::1"), 1518).size == 1518 - 66
    plan = validate(LocalTest("udp_bw"), trial="1s")
    assert [f for f, _, _ in plan.sizes] == list(SIZES)
    skipped = {f: why for f, s, why in plan.sizes if s is None}
    assert list(skipped) == [64] and "18 B of UDP payload" in skipped[64]
    assert "not supported on" not in plan.b2b_unsupported   # the socket engine sends a counted burst
    dp = validate(DpdkFlows(port="ring:r:0", peer="ring:r:1"), trial="1s")
    assert [f for f, s, _ in dp.sizes if s] == [*SIZES, JUMBO]   # ring ports take jumbo frames
    assert dp.b2b_unsupported == ""   # the DPDK generators send a counted burst (messages)


@pytest.mark.parametrize("kw, field", [
    (dict(sizes="64,abc"), "sizes"), (dict(sizes=[32]), "sizes"), (dict(sizes=[10000]), "sizes"),
    (dict(tests="throughput,speed"), "tests"), (dict(trial="0s"), "trial"), (dict(latency_trials=0), "latency_trials"),
    (dict(loss_step="70%"), "loss_step"), (dict(b2b_trials=101), "b2b_trials"), (dict(max_burst=1), "max_burst"),
    (dict(high="1kpps", low="2kpps"), "low"), (dict(resolution="150%"), "resolution"), (dict(sizes=[64]), "sizes"),
])
def test_arguments_are_checked_before_anything_runs(kw, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        rfc2544(LocalTest("udp_bw"), **{"trial": "1s", **kw})


@pytest.mark.parametrize("args, field", [
    (["--frame-sizes", "64,x"], "sizes"), (["--tests", "speed"], "tests"), (["--trial", "2h"], "trial"),
    (["--duration", "1s"], "duration"), (["--search", "pdr:1%"], "search"), (["--size", "128"], "size"),
    (["--latency-trials", "0"], "latency_trials"), (["--loss-step", "x"], "loss_step"),
    (["--resolution", "fine"], "resolution"), (["--interval", "1s"], "interval"), (["-n", "100"], "messages"),
    (["--resume", "/nonexistent.parquet"], "/nonexistent.parquet"),
])
def test_cli_bad_options_exit_2_with_one_line(args, field, capsys):
    from perfkit.cli import main
    assert main(["rfc2544", "local", "udp_bw", *args]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"perfkit: {field}: ") and err.count("\n") == 1 and out == "", err


def test_cli_bad_option_exits_2_from_the_command():
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", "rfc2544", "local", "tcp_bw"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr == "perfkit: test: rfc2544 runs udp_bw on the socket engine, not tcp_bw\n"


def test_cli_loopback_all_four_tests_report_and_save(tmp_path, capsys):
    """Over loopback at a rate it holds: a line per trial, a table per test, the file loads back."""
    from perfkit.cli import main
    path = tmp_path / "r.parquet"
    assert main(["rfc2544", "local", "udp_bw", "--rate", "20kpps", "--frame-sizes", "64,256", "--trial", "0.2s",
                 "--settle", "0.05s", "--latency-trials", "2", "--b2b-trials", "2", "--max-burst", "500",
                 "--max-trials", "3", "-o", str(path)]) == 0
    out = capsys.readouterr().out
    for head in ("Throughput (26.1)", "Latency (26.2)", "Frame loss rate (26.3)", "Back-to-back frames (26.4)",
                 "64 B frames: skipped"):
        assert head in out, out
    assert "throughput     256 B: trial  1: offered" in out and "back_to_back   256 B: burst" in out
    back = load(path)
    lat = back.latency.row(0, named=True)
    assert lat["size"] == 256 and lat["trials"] == 2 and lat["lat_count"] > 0
    assert lat["p50_us"] <= lat["p99_us"] <= lat["max_us"]
    b2b = back.back_to_back
    assert b2b.height == 2 and (b2b["burst_frames"] <= 500).all()
    t = back.trials
    assert (t["sent"] >= t["received"]).all()
    fl = back.frame_loss
    assert (fl["sent"] == fl["received"] + fl["lost"]).all()


@pytest.fixture(scope="module")
def dpdk(eal):
    from perfkit.engines import dpdk as eng
    return eng


def test_dpdk_ring_pair_standard_and_jumbo_frames(dpdk):
    """A ring pair loses nothing: the throughput is the upper bound at 64 B and at 9018 B
    (jumbo: ring ports take it); back-to-back runs counted bursts (tests/test_dpdk_b2b.py)."""
    res = rfc2544(DpdkFlows(port="ring:r25:0", peer="ring:r25:1"), sizes=(64, JUMBO),
                  tests="throughput,back_to_back", high="100kpps", trial="0.2s", settle=0, b2b_trials=1,
                  max_burst=2000, b2b_trial="0.5s")
    assert res.error is None and res.stopped == "done"
    tp = res.throughput
    assert tp["size"].to_list() == [64, JUMBO] and tp["throughput_fps"].to_list() == [100e3, 100e3]
    assert tp["throughput_bps"].to_list() == [100e3 * 8 * 64, 100e3 * 8 * JUMBO]
    assert res.back_to_back["size"].to_list() == [64, JUMBO] and "not supported" not in res.text()
    assert all(0 < b <= 2000 for b in res.back_to_back["burst_frames"])


def check_frame_loss(rows, size, step=10.0):
    """RFC 2544 26.3: 100%, 90%, ... until two trials in a row lose nothing, and not longer."""
    mine = [r for r in rows if r["size"] == size]
    assert [r["percent"] for r in mine] == pytest.approx([100 - step * k for k in range(len(mine))])
    clean = [r["lost"] == 0 for r in mine]
    assert len(mine) >= 2 and clean[-2:] == [True, True], mine
    assert not any(a and b for a, b in zip(clean[:-2], clean[1:-1])), mine   # no earlier stop
    for r in mine:
        assert r["sent"] == r["received"] + r["lost"]
        assert r["loss_pct"] == pytest.approx(100 * r["lost"] / r["sent"])
    return mine


@pytest.mark.root
@pytest.mark.netns
def test_rfc2544_finds_a_lab_links_rate_limit(tmp_path):
    """h1 -> h2 over a veth shaped by tbf at 5 Mbit/s. tbf counts a frame without its FCS:
    F - 4 bytes, so the link carries 5e6 / 8 / (F - 4) frames/s. tbf queues 64 KiB and a
    3 KB burst, drained after the trial, so in a T-second trial a rate up to
    limit + queue / (F - 4) / T frames/s still loses nothing (tests/test_ratesearch.py's
    window). The upper bound, 7.5 Mbit/s of frames, is ~1.5 x the limit: frame loss's first
    trial loses frames. Throughput runs at two sizes, then a resumed run adds frame loss and
    back-to-back at one (the throughput it finished is kept, not run again)."""
    lab = lab_up_or_skip(lab_module_or_skip(), rate="5mbit")
    trial, sizes = 0.5, (128, 512)
    kw = dict(high="7.5mbit", low="2.5mbit", resolution="5%", max_trials=10, trial=trial, settle="0.2s", retries=1)
    try:
        res = rfc2544(LocalTest("udp_bw", lab=lab.name), sizes=sizes, tests="throughput", **kw)
        path = tmp_path / "rfc.parquet"
        res.save(path)   # saved and resumed from the file, as perfkit rfc2544 --resume does
        more = rfc2544(LocalTest("udp_bw", lab=lab.name), sizes=(512,), tests="throughput,frame_loss,back_to_back",
                       resume=load(path), b2b_trials=1, max_burst=300, b2b_trial="0.5s", **kw)
    finally:
        lab.down()
    for r in (res, more):
        assert r.error is None and r.stopped == "done", (r.error, r.stopped)
    tp = {r["size"]: r for r in res.rows["throughput"]}
    assert sorted(tp) == list(sizes)
    for f in sizes:
        limit = 5e6 / 8 / (f - 4)
        queued = (65536 + 3028) / (f - 4)
        res_fps = tp[f]["resolution_fps"]
        assert res_fps == pytest.approx(0.05 * 7.5e6 / 8 / f)
        found = tp[f]["throughput_fps"]
        shown = res.trials.filter(res.trials["size"] == f).select("offered_pps", "sent", "received", "lost",
                                                                 "passed").rows()
        assert found is not None, shown
        assert limit - 2 * res_fps <= found <= limit + queued / trial + res_fps, shown
        assert tp[f]["throughput_bps"] == pytest.approx(found * 8 * f)
    # the resumed run kept the throughput trials and ran frame loss only
    assert more.rows["throughput"] == res.rows["throughput"]
    t = more.trials
    assert t.filter(t["test"] == "throughput").height == res.trials.height
    assert set(t.filter(t["test"] == "frame_loss")["size"]) == {512}
    mine = check_frame_loss(more.rows["frame_loss"], 512)
    assert mine[0]["lost"] > 0                                       # 1.5 x the link loses frames
    assert mine[0]["offered_fps"] == pytest.approx(7.5e6 / 8 / 512)
    # back-to-back: the longest burst tbf takes is its queue, 64 KiB + a 3 KB burst of 508-byte
    # frames (135); a sender descheduled mid-burst lets the queue drain, so more may pass
    b2b = more.back_to_back.row(0, named=True)
    assert 0.9 * 68564 / 508 <= b2b["burst_frames"] <= 1.5 * 68564 / 508, b2b
    bursts = t.filter(t["test"] == "back_to_back")
    assert (bursts["sent"] == bursts["burst"]).all()
    passed = bursts.filter(bursts["passed"])["burst"].to_list()
    failed = bursts.filter(~bursts["passed"])["burst"].to_list()
    assert max(passed) == b2b["burst_frames"] and min(failed) > max(passed)   # a binary search's result
    text = more.text()
    assert "Throughput (26.1)" in text and "Frame loss rate (26.3)" in text
    assert "Back-to-back frames (26.4)" in text and "Latency" not in text     # only the tests asked for


def test_a_stopped_run_keeps_its_trials_and_resumes_where_it_stopped():
    """Stop during frame loss at the second size: what finished is kept, the partial size's
    steps are shown but not counted done; the resumed run runs only what is left."""
    import threading
    stop = threading.Event()
    seen = []

    def progress(test, size, row):
        seen.append((test, size))
        if (test, size) == ("frame_loss", 256):
            stop.set()

    kw = dict(sizes=(128, 256), tests="throughput,frame_loss", high="20kpps", trial="0.1s", settle="0.02s",
              max_trials=2)
    res = rfc2544(LocalTest("udp_bw"), stop=stop, progress=progress, **kw)
    assert res.stopped == "stopped" and res.error is None
    assert res.done == [["throughput", 128], ["throughput", 256], ["frame_loss", 128]]
    assert not res.is_done("frame_loss", 256)
    more = rfc2544(LocalTest("udp_bw"), resume=res, progress=lambda t, s, r: seen.append(("more", t, s)), **kw)
    assert more.stopped == "done" and more.is_done("frame_loss", 256)
    assert {x[1:] for x in seen if x[0] == "more"} == {("frame_loss", 256)}   # nothing else ran again
    assert more.rows["throughput"] == res.rows["throughput"]
    check_frame_loss(more.rows["frame_loss"], 128)
    check_frame_loss(more.rows["frame_loss"], 256)


@pytest.mark.root
@pytest.mark.netns
def test_a_stopped_throughput_search_resumes_between_its_last_bounds(tmp_path):
    """A throughput search stopped after three trials (a tbf-shaped lab link, so trials fail above
    its rate) keeps them on resume: the search goes on from the fourth trial, half way between the
    kept trials' highest pass (or the lower bound) and lowest failure, never again at the upper
    bound, and ends by the RFC's resolution."""
    import threading
    lab = lab_up_or_skip(lab_module_or_skip(), rate="5mbit", name="ctlres")
    kw = dict(sizes=(512,), tests="throughput", high="7.5mbit", low="2.5mbit", resolution="5%", max_trials=10,
              trial=0.3, settle="0.2s")
    stop = threading.Event()
    seen = []

    def three(test, size, row):
        seen.append(row)
        if len(seen) == 3:
            stop.set()
    spec = LocalTest("udp_bw", lab=lab.name)
    try:
        first = rfc2544(spec, **kw, progress=three, stop=stop)
        first.save(tmp_path / "half.parquet")
        more = rfc2544(spec, **kw, resume=load(tmp_path / "half.parquet"))
    finally:
        lab.down()
    assert first.stopped == "stopped" and first.done == [] and len(first.trial_rows) == 3, first.trial_rows
    assert more.stopped == "done" and more.error is None, more.error
    kept, t = first.trial_rows, more.trial_rows
    assert t[:3] == kept                                   # the stopped run's trials, as they were
    assert [r["trial"] for r in t] == list(range(1, len(t) + 1))   # numbered on after them
    high, low = 7.5e6 / 8 / 512, 2.5e6 / 8 / 512
    assert kept[0]["offered_pps"] == pytest.approx(high) and not kept[0]["passed"]
    assert sum(r["offered_pps"] == kept[0]["offered_pps"] for r in t) == 1   # the upper bound once
    best = max((r["offered_pps"] for r in kept[1:] if r["passed"]), default=low)
    fail = min(r["offered_pps"] for r in kept if not r["passed"])
    assert t[3]["offered_pps"] == pytest.approx((best + fail) / 2)    # between the last bounds
    tp = more.rows["throughput"][0]
    assert tp["trials"] == len(t) and tp["throughput_fps"] is not None
    passes = [r["offered_pps"] for r in t if r["passed"]]
    failures = [r["offered_pps"] for r in t if not r["passed"]]
    assert tp["throughput_fps"] == max(passes) and min(failures) > max(passes)
    assert min(failures) - max(passes) <= tp["resolution_fps"] or tp["stopped"] == "max_trials"
