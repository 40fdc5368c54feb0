"""RFC 2544's HTML report (perfkit.ui.html, `perfkit rfc2544 ... --report F.html`): a real short
run over loopback, its report laid out like the RFC's reporting section (26) with each test's
table holding the measured numbers and its graph; the same report from the saved file and from
a store it was kept in."""
import subprocess
import sys

import pytest

from perfkit.rfc2544 import Rfc2544Result, load, rfc2544
from perfkit.spec import LocalTest
from perfkit.store import Store
from perfkit.ui.html import _value, html_text

SMALL = dict(sizes=(128, 256), high="20kpps", trial="0.2s", settle="0.05s", latency_trials=2, b2b_trials=2,
             max_burst=500, max_trials=3, b2b_trial="0.5s")


@pytest.fixture(scope="module")
def result():
    res = rfc2544(LocalTest("udp_bw"), **SMALL)
    assert res.stopped == "done" and res.error is None, (res.stopped, res.error)
    return res


def _cells(row, keys):
    return [f"<td>{_value(row[k])}</td>".replace("µ", "&micro;") for k in keys if row[k] is not None]


def _check(text: str, res: Rfc2544Result) -> None:
    for test, head in (("throughput", "Throughput (26.1)"), ("latency", "Latency (26.2)"),
                       ("frame_loss", "Frame loss rate (26.3)"), ("back_to_back", "Back-to-back frames (26.4)")):
        assert f'<h2 id="{test}">{head}</h2>' in text, test
        assert res.rows[test], test
    for r in res.rows["throughput"]:   # every measured number in its test's table
        for cell in _cells(r, ("size", "throughput_fps", "throughput_bps", "high_fps", "trials")):
            assert cell in text, cell
    for r in res.rows["latency"]:
        for cell in _cells(r, ("rate_fps", "rfc_mean_us", "p50_us", "p99_us", "max_us", "lat_count")):
            assert cell in text, cell
    for r in res.rows["frame_loss"]:
        for cell in _cells(r, ("percent", "offered_fps", "sent", "received", "lost", "loss_pct")):
            assert cell in text, cell
    for r in res.rows["back_to_back"]:
        for cell in _cells(r, ("burst_frames",)):
            assert cell in text, cell
    # a graph per test (plotly inlined once), their titles as the RFC names them
    for title in ("Throughput (26.1)", "Throughput search: every trial", "Latency at the throughput rate (26.2)",
                  "Frame loss rate (26.3)", "Back-to-back frames (26.4): mean, min..max"):
        assert f'"text":"{title}"' in text, title
    assert text.count("plotly.js v") <= 2 and "128 B frames" not in text   # 128 runs on sockets: not skipped


def test_report_of_a_real_run_holds_each_tests_table_and_graph(result, tmp_path):
    path = result.report(tmp_path / "rfc.html")
    text = open(path, encoding="utf-8").read()
    _check(text, result)
    # reloaded from its saved file: the same tables
    result.save(tmp_path / "rfc.parquet")
    again = load(tmp_path / "rfc.parquet")
    assert again.rows == result.rows and again.started_utc == result.started_utc
    _check(html_text(again), result)


def test_a_store_keeps_an_rfc2544_result_and_gives_it_back(result, tmp_path):
    store = Store(tmp_path / "runs")
    name = store.save(result, tags=["lab"], note="loopback")
    assert name.startswith("rfc2544-")
    listed = store.list().row(0, named=True)
    assert listed["name"] == name and listed["test"] == "rfc2544" and listed["tags"] == ["lab"]
    back = store.load(name)
    assert isinstance(back, Rfc2544Result) and back.rows == result.rows and back.tags == ["lab"]
    assert back.trials.height == result.trials.height
    _check(html_text(back), result)


def test_cli_report_after_a_run_and_from_the_saved_file(tmp_path):
    saved, first, second = tmp_path / "r.parquet", tmp_path / "a.html", tmp_path / "b.html"
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", "rfc2544", "local", "udp_bw", "--rate", "20kpps",
                        "--frame-sizes", "256", "--tests", "throughput", "--trial", "0.2s", "--settle", "0.05s",
                        "--max-trials", "3", "-o", str(saved), "--report", str(first)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", "rfc2544", "report", str(saved), "--report",
                        str(second)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and str(second) in p.stdout, p.stderr
    res = load(saved)
    fps = res.rows["throughput"][0]["throughput_fps"]
    for f in (first, second):
        text = f.read_text(encoding="utf-8")
        assert '<h2 id="throughput">Throughput (26.1)</h2>' in text and f"<td>{_value(fps)}</td>" in text


@pytest.mark.parametrize("args, words", [
    (["local", "udp_bw", "--report", "r.txt"], "report: 'r.txt' is not an .html file"),
    (["local", "udp_bw", "--report", "/nonexistent/r.html"], "report: no folder '/nonexistent'"),
    (["report", "/nonexistent.parquet", "--report", "r.html"], "/nonexistent.parquet"),
])
def test_cli_bad_report_options_exit_2_with_one_line(args, words, capsys):
    from perfkit.cli import main
    assert main(["rfc2544", *args]) == 2
    out, err = capsys.readouterr()
    assert words in err and err.count("\n") == 1 and out == "", err
