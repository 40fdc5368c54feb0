"""The perfkit command line, run as `python -m perfkit` in a subprocess.

Human output: a header line, one line per interval (1 s by default), then a
qperf-style summary. --json: one object per row, then {"summary": {...}}.
Bad input: exit 2, exactly one line on stderr, and nothing native starts.
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

import perfkit
from perfkit import cli, report
from perfkit.kinds.qperf import STREAM_GROUPS
from perfkit.stats import COUNTER_NAMES, COUNTERS, INDEX, Histogram, make_row, row_schema

ROW = re.compile(r"^\s*(\d+\.\d)s  pktTx .*  pktRx .*  bitsTx .*  bitsRx .*  dropTx \d[\d,]*  "
                 r"lost \d[\d,]*  dup \d[\d,]*  reord \d[\d,]*  .*cpu \d+%$")


def perfkit_cli(*args, timeout=60):
    t0 = time.monotonic()
    # -P: never the source tree in the working directory, always the installed perfkit
    p = subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                       timeout=timeout)
    p.elapsed = time.monotonic() - t0
    return p


def _k(text):
    """'19.9 K' -> 19.9 (thousands)."""
    number, prefix = text.split()
    assert prefix == "K", text
    return float(number)


def rows_of(stdout):
    return [ln for ln in stdout.splitlines() if ROW.match(ln)]


def summary_block(lines, test):
    """{name: value} of the summary's `    name  =  value` lines after `test:`."""
    start = lines.index(f"{test}:")
    out = {}
    for ln in lines[start + 1:]:
        m = re.fullmatch(r"    (\w+)\s*=  (.*)", ln)
        assert m, f"not a summary line: {ln!r}"
        out[m.group(1)] = m.group(2)
    return start, out


# ============================================================ human output
def test_udp_bw_human_output_one_line_per_second():
    p = perfkit_cli("local", "udp_bw", "-t", "2s", "-r", "20kpps")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    lines = p.stdout.splitlines()
    assert lines[0] == ("perfkit local udp_bw: 64 B, 20 kpps, 1 flow(s), 2 s on 127.0.0.1 "
                        "(socket engine)")
    rows = rows_of(p.stdout)
    assert lines[1:1 + len(rows)] == rows          # rows come right after the header
    times = [float(ROW.match(r).group(1)) for r in rows]
    assert 2 <= len(rows) <= 3                     # one a second (+ the final partial one)
    assert times[0] == pytest.approx(1.0, abs=0.15) and times[1] == pytest.approx(2.0, abs=0.15)
    assert times == sorted(times)
    assert 18 <= _k(re.search(r"pktTx +([\d.]+ K)/s", rows[0]).group(1)) <= 20.5   # paced at 20 kpps
    start, s = summary_block(lines, "udp_bw")
    assert start == 1 + len(rows)
    assert list(s)[:4] == ["send_bw", "recv_bw", "msg_rate", "loss"]
    assert re.fullmatch(r"1\.[1-2]\d* MB/sec", s["send_bw"])   # 20 kpps * 64 B = 1.28 MB/s
    assert 18 <= _k(s["msg_rate"].removesuffix("/sec")) <= 20.5
    m = re.fullmatch(r"[\d.e+-]+ % \([\d,]+ of ([\d,]+) sent\).*", s["loss"])
    assert m and 36_000 <= int(m.group(1).replace(",", "")) <= 40_001
    assert s["lat"].startswith("one-way p50 ")
    assert re.match(r"\d+% of one core \(w0_udp_recv \d+%, w1_udp_send \d+%\)$", s["cpu"])


@pytest.mark.parametrize("test, first", [("udp_lat", "latency"), ("tcp_bw", "bw"), ("tcp_lat", "latency")])
def test_other_tests_human_summary(test, first):
    p = perfkit_cli("local", test, "-t", "0.5s")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"perfkit local {test}: ")
    assert 1 <= len(rows_of(p.stdout)) <= 2
    _, s = summary_block(lines, test)
    assert list(s)[:2] == [first, "msg_rate"]
    if first == "bw":
        assert re.fullmatch(r"[\d.]+ [KMG]?B/sec", s["bw"])
        assert "lat" not in s
    else:
        assert re.fullmatch(r"[\d.]+ (us|ms)", s["latency"])
        assert s["lat"].startswith("round trip p50 ")
    assert "cpu" in s


# ================================================================== --json
def test_json_rows_hold_every_counter_of_the_engine_and_end_with_the_summary():
    p = perfkit_cli("local", "udp_bw", "-t", "0.5s", "-r", "20kpps", "--interval", "0.25s", "--json")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    objs = [json.loads(ln) for ln in p.stdout.splitlines()]   # every line is JSON: no header
    *rows, last = objs
    assert list(last) == ["summary"] and isinstance(last["summary"], dict)
    assert 2 <= len(rows) <= 4
    groups = (*STREAM_GROUPS, "control")   # a udp_bw row holds the counters its engine writes (rate_target too)
    schema = list(row_schema(2, groups))
    written = [c.name for c in COUNTERS if c.group in groups]
    assert "pkts_tx" in written and "rate_target" in written and "http_req" not in written
    for row in rows:
        assert "summary" not in row
        # the counter columns, then the host metrics' (perfkit.hostmetrics: host CPU, lo)
        assert list(row)[:len(schema)] == schema
        assert all(c.startswith(("host_cpu", "if_lo_")) for c in list(row)[len(schema):])
        for name in written:
            assert re.fullmatch(r"[a-z0-9_]+", name)
            assert isinstance(row[name], int)
        assert not set(COUNTER_NAMES) - set(written) & set(row)
    assert [r["time_s"] for r in rows] == sorted(r["time_s"] for r in rows)
    s = last["summary"]
    assert s["test"] == "udp_bw" and s["size"] == 64 and s["engine"] == "socket"
    assert s["pkts_tx"] == rows[-1]["pkts_tx"]
    assert 9_000 <= s["pkts_tx"] <= 10_001         # paced: 20 kpps for 0.5 s, never more
    assert s["pkts_rx"] == rows[-1]["pkts_rx"]
    assert sum(r["pkts_tx_per_s"] * r["interval_s"] for r in rows) == pytest.approx(s["pkts_tx"], rel=1e-3)


def test_save_from_the_cli_loads_back(tmp_path):
    path = tmp_path / "run.parquet"
    p = perfkit_cli("local", "tcp_lat", "-t", "0.5s", "--interval", "0.25s", "--json", "-o", str(path))
    assert p.returncode == 0, p.stderr
    *rows, last = [json.loads(ln) for ln in p.stdout.splitlines()]
    run = perfkit.load(path)
    assert run.spec == perfkit.LocalTest("tcp_lat", duration="0.5s")
    assert len(run.frame) == len(rows)
    assert run.frame["pkts_rx"].to_list() == [r["pkts_rx"] for r in rows]
    assert run.summary == last["summary"]
    assert run.histogram.count == run.summary["lat_count"] > 0


# ============================================================== bad input
# (args, field) -- each would run 5 s if anything started
BAD = [
    (["--rate", "0"], "rate"),
    (["--rate=-5pps"], "rate"),
    (["--rate", "1Xpps"], "rate"),
    (["--rate", "1e400pps"], "rate"),
    (["-m", "70000"], "size"),
    (["-m", "1e400"], "size"),
    (["-m", "64Q"], "size"),
    (["--port", "70000"], "port"),
    (["--port", "-1"], "port"),
    (["--host", "not-an-address"], "host"),
    (["--host", "8.8.8.8"], "host"),
    (["--host", "198.20.0.1"], "host"),
    (["--host", "2606:4700::1111"], "host"),   # any address is a target; the suite's guard refuses this one
    (["--host", "nosuch.invalid"], "host"),
    (["-t", "1Xs"], "duration"),
    (["-f", "0"], "flows"),
    (["--batch", "0"], "batch"),
    (["--interval", "0.01s"], "interval"),
    (["--interval", "1Xs"], "interval"),
    (["--engine", "nope"], "engine"),
]
BAD_IDS = [" ".join(a) for a, _ in BAD]


@pytest.mark.parametrize("args, field", BAD, ids=BAD_IDS)
def test_bad_input_in_process_exits_2_with_one_line_and_starts_nothing(args, field, monkeypatch, capsys):
    from perfkit.engines import socket as sock_engine
    built = []
    monkeypatch.setattr(sock_engine, "build", lambda spec: built.append(spec))
    rc = cli.main(["local", "udp_bw", "-t", "5s", *args])
    out, err = capsys.readouterr()
    assert rc == 2
    assert built == []                                  # no engine was created
    assert err.endswith("\n") and err.count("\n") == 1  # exactly one line
    assert err.startswith(f"perfkit: {field}: "), err
    assert rows_of(out) == []


@pytest.mark.parametrize("args, field", [BAD[i] for i in (1, 2, 5, 7, 10, 14)],
                         ids=[BAD_IDS[i] for i in (1, 2, 5, 7, 10, 14)])
def test_bad_input_subprocess_exits_2_fast_with_one_line(args, field):
    p = perfkit_cli("local", "udp_bw", "-t", "120s", *args)
    assert p.returncode == 2
    assert p.stdout == ""                                # no header, no rows
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"perfkit: {field}: "), p.stderr
    assert "Traceback" not in p.stderr
    assert p.elapsed < 60.0  # nothing ran for the 120 s asked (generous: the machine may be busy)


def test_unknown_engine_starts_no_traffic():
    p = perfkit_cli("local", "udp_bw", "-t", "120s", "--engine", "nope")
    assert p.returncode == 2
    assert p.stderr == "perfkit: engine: 'nope' is not one of socket, dpdk, dpdk_tcp\n"
    assert rows_of(p.stdout) == [] and "udp_bw:" not in p.stdout.splitlines()
    assert p.elapsed < 60.0


def test_unknown_test_name_is_an_argparse_error():
    p = perfkit_cli("local", "udp_flood", "-t", "5s")
    assert p.returncode == 2
    assert "invalid choice: 'udp_flood'" in p.stderr
    assert p.stdout == ""


def test_engine_failure_exits_1_with_one_line():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        p = perfkit_cli("local", "udp_bw", "-t", "0.5s", "--port", str(port))
    assert p.returncode == 1
    assert "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("perfkit: error: "), p.stderr


def test_engines_lists_the_socket_engine():
    p = perfkit_cli("engines")
    assert p.returncode == 0
    engines = json.loads(p.stdout)
    assert engines["socket"]["available"] is True
    assert set(engines) >= {"socket", "dpdk"}
    assert all(isinstance(e["detail"], str) and e["detail"] for e in engines.values())


# ====================================================== printers in-process
def _row(dt, **delta):
    z = [0] * len(COUNTER_NAMES)
    cur = list(z)
    for k, v in delta.items():
        cur[INDEX[k]] = v
    return make_row(1.0, dt, z, cur, Histogram(), Histogram(), [z], [cur])


@pytest.mark.parametrize("dt", [0.25, 0.2500004, 0.1000004, 0.3333337, 1.0000004])
def test_row_line_shows_the_exact_counts_of_the_interval(dt):
    line = report.row_line(_row(dt, drop_tx=7, seq_lost=3, seq_dup=2, seq_reorder=1))
    assert ROW.match(line)
    assert "dropTx 7  lost 3  dup 2  reord 1  " in line


def test_row_line_latency_only_with_samples():
    line = report.row_line(_row(1.0, pkts_tx=1000, bytes_tx=64000))
    assert "pktTx     1 K/s" in line and "bitsTx   512 Kbps" in line and " lat " not in line


def test_json_printer_writes_nan_as_null():
    import io
    buf = io.StringIO()
    jp = report.JsonPrinter(buf)
    jp({"a": float("nan"), "b": 1.5})
    jp.summary({"test": "udp_bw", "x": float("nan")})
    lines = [json.loads(ln) for ln in buf.getvalue().splitlines()]
    assert lines == [{"a": None, "b": 1.5}, {"summary": {"test": "udp_bw", "x": None}}]


def test_json_printers_of_runs_at_once_keep_each_line_whole():
    # perfkit dperf runs a server and a client at once, each run's sampler thread printing to the
    # same stdout: a CI run once read two rows on one line. A slow stream widens the window.
    import threading

    class SlowOut:
        def __init__(self):
            self.parts = []

        def write(self, s):
            time.sleep(0.0002)   # lets the other thread in between two writes
            self.parts.append(s)

        def flush(self):
            pass

    out = SlowOut()
    printers = [report.JsonPrinter(out), report.JsonPrinter(out)]

    def emit(jp, who):
        for i in range(200):
            jp({"who": who, "i": i})
        jp.summary({"who": who})

    threads = [threading.Thread(target=emit, args=(jp, k)) for k, jp in enumerate(printers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = "".join(out.parts).splitlines()
    assert len(lines) == 402 and all(json.loads(ln) for ln in lines)


ADVANCED_FLAGS = {"local": ({"--batch", "--gso", "--busy-poll", "-lca", "-rca", "-ca", "-lsb", "-rsb", "-sb", "-ar",
                             "-n"}, {"--size", "--rate", "--flows", "--duration", "--host", "--port", "--lab"}),
                  "test": ({"-n", "-ws", "-to", "-lto", "-rto", "-ip", "-f1", "--gso", "-lsb"},
                           {"--time", "--msg-size", "--rate", "--port", "--token"}),
                  "flows": ({"--burst", "--sport", "--dst-mac", "--sizes", "--cores", "--probe-rate"},
                            {"--port", "--peer", "--mode", "--size", "--rate", "--flows", "--duration", "--netns"}),
                  "reflect": ({"--burst", "--ips", "--cores", "--dst-mac"}, {"--port", "--mode", "--duration"}),
                  "http": ({"--think", "--ramp", "--keepalive", "--close", "-H", "--data", "--timeout", "--random",
                            "--threads", "--processes"}, {"--users", "--duration", "--rate", "--method", "--lab"}),
                  "http-serve": ({"--connections"}, {"--host", "--port", "--size", "--duration"})}


@pytest.mark.parametrize("command", list(ADVANCED_FLAGS))
def test_help_lists_the_advanced_fields_options_apart(command):
    import argparse
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    group = next(g for g in sub._action_groups if g.title == "advanced options")
    advanced = {s for a in group._group_actions for s in a.option_strings}
    want, essential = ADVANCED_FLAGS[command]
    assert want <= advanced and not essential & advanced, (want - advanced, essential & advanced)
    assert "\nadvanced options:\n" in sub.format_help()


def _perfkit_cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-P", "-m", "perfkit", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_save_path_is_checked_before_the_run(tmp_path):
    for path, words in ((tmp_path / "no" / "run.parquet", f"{tmp_path / 'no'}: no such folder"),
                        (tmp_path, f"{tmp_path} is a folder; name a file in it (FILE.parquet)")):
        out = _perfkit_cli("local", "udp_lat", "-t", "0.2", "-o", str(path))
        assert out.returncode == 2 and out.stdout == "", out
        assert out.stderr == f"perfkit: save: {words}\n"


def test_a_run_whose_save_fails_is_kept_in_a_fallback_file(tmp_path):
    """The folder passes the check at the start and is gone when the run ends: the run
    lands in a fallback file named on stderr, and loads with the summary printed."""
    folder = tmp_path / "gone"
    folder.mkdir()
    p = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "local", "udp_lat", "-t", "1.5", "--interval", "0.2",
                          "--json", "-o", str(folder / "run.parquet")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()   # the first row: the run has started, the check is behind it
        assert first.startswith("{"), first
        folder.rmdir()
        rest, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 1, (rest, err)
    m = re.fullmatch(rf"perfkit: save: cannot write {folder}/run.parquet \(No such file or directory\); "
                     r"the run is saved in (/\S+\.parquet)\n", err)
    assert m, err
    try:
        summary = json.loads(rest.splitlines()[-1])["summary"]
        kept = perfkit.load(m.group(1))
        assert kept.summary["lat_count"] == summary["lat_count"] > 0
    finally:
        os.unlink(m.group(1))
