"""Strict command lines (issue 29): only ASCII digits are numbers, and no option is silently
ignored. Parse-only: every case here is refused (or accepted) before an engine starts."""
from __future__ import annotations

import contextlib
import io
import json
import pathlib
import re
import shlex

import pytest

from perfkit import cli, fields, units
from perfkit.ratesearch import parse_criterion
from perfkit.sweep import parse_sweep

OTHER_DIGITS = ["１００", "٣", "²", "١٠s", "1_000", "۵"]   # fullwidth, Arabic-Indic, superscript, underscore, Persian


def run_cli(argv) -> tuple[int, str]:
    """perfkit's exit status and stderr for argv, run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


# ------------------------------------------------------------------ only ASCII digits are numbers

@pytest.mark.parametrize("text", OTHER_DIGITS)
@pytest.mark.parametrize("parse", [units.parse_int, units.parse_float, units.parse_duration, units.parse_size,
                                   units.parse_rate], ids=lambda f: f.__name__)
def test_units_read_only_ascii_digits(parse, text):
    with pytest.raises(ValueError, match=r"^field: "):
        parse(text, "field")


def test_ascii_numbers_still_read():
    assert units.parse_int(" 42 ", "f") == 42 and units.parse_int("-3", "f") == -3
    assert units.parse_float(".5", "f") == 0.5 and units.parse_float("1e3", "f") == 1000.0
    assert units.parse_duration("1.5m") == 90.0 and units.parse_size("64K") == 65536
    assert str(units.parse_rate("1.5Mpps")) == "1.5 Mpps"
    assert fields.whole_number("7", "f", 0, 9) == 7


def test_other_digits_are_named_in_the_message():
    with pytest.raises(ValueError, match=r"^size: cannot read '١٠٠' as a size .*\(digits 0-9 only\)$"):
        units.parse_size("١٠٠", "size")
    with pytest.raises(ValueError, match=r"^flows: '٣' is not a whole number \(digits 0-9 only\)$"):
        fields.whole_number("٣", "flows", 1, 10)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400"])
def test_parse_float_is_finite(text):
    with pytest.raises(ValueError, match=r"^f: "):
        units.parse_float(text, "f")


@pytest.mark.parametrize("text", ["pdr:٣%", "lat:p99<٣us", "cpu:٩٠%"])
def test_search_criteria_read_only_ascii_digits(text):
    with pytest.raises(ValueError, match=r"^criterion: "):
        parse_criterion(text)


@pytest.mark.parametrize("text", ["msg_size:1:64K:*٢", "msg_size:١:64K:*2", "rate:1kpps:2kpps:+١kpps"])
def test_sweeps_read_only_ascii_digits(text):
    with pytest.raises(ValueError, match=r"^sweep: "):
        parse_sweep(text)


# each: a command line with {} where a number goes, and the field its error line names
NUMERIC_CASES = [
    (["local", "udp_bw", "-m", "{}"], "size"),
    (["local", "udp_bw", "-t", "{}"], "duration"),
    (["local", "udp_bw", "-f", "{}"], "flows"),
    (["local", "udp_bw", "-r", "{}"], "rate"),
    (["local", "udp_bw", "--port", "{}"], "port"),
    (["local", "udp_bw", "--batch", "{}"], "batch"),
    (["local", "udp_bw", "-n", "{}"], "messages"),
    (["local", "udp_bw", "-lca", "{}"], "loc_cpu_affinity"),
    (["local", "udp_bw", "-sb", "{}"], "loc_sock_buf_size"),
    (["local", "udp_bw", "--interval", "{}"], "interval"),
    (["local", "udp_bw", "--search", "zero-loss", "--max-trials", "{}"], "max_trials"),
    (["local", "udp_bw", "--search", "zero-loss", "--retries", "{}"], "retries"),
    (["test", "127.0.0.1", "udp_bw", "-t", "{}"], "duration"),
    (["test", "127.0.0.1", "udp_bw", "-lp", "{}"], "-lp/--port"),
    (["test", "127.0.0.1", "udp_bw", "-e", "{}"], "precision"),
    (["test", "127.0.0.1", "udp_bw", "-ws", "{}"], "wait_server"),
    (["serve", "-lp", "{}"], "-lp/--port"),
    (["lab", "up", "--hosts", "{}"], "--hosts"),
    (["http", "http://127.0.0.1:1/", "-u", "{}"], "users"),
    (["http-serve", "--port", "{}"], "port"),
    (["flows", "--port", "net_null0", "--burst", "{}"], "burst"),
    (["flows", "--port", "net_null0", "--mem", "{}"], "mem"),
    (["reflect", "--engine", "socket", "--udp-port", "{}"], "port"),
]


@pytest.mark.parametrize("argv,field", NUMERIC_CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_the_command_line_refuses_other_scripts_digits(argv, field):
    for text in ("１００", "٣"):
        code, err = run_cli([a.format(text) for a in argv])
        assert code == 2, err
        assert err.count("\n") == 1 and field in err and text in err, err


# ------------------------------------------------------------------ no option silently ignored

def refused(argv) -> str | None:
    """check_options' line for argv (None: accepted); argv must parse (argparse)."""
    parser = cli._parser()
    a = cli._parse(parser, argv)
    try:
        cli.check_options(parser, argv, a)
    except ValueError as exc:
        return str(exc)
    return None


# each: a command line, and the start of the line that refuses it (None: accepted)
CASES = [
    (["local", "udp_bw", "-t", ""], "-t: an empty value"),
    (["local", "udp_bw", "--duration", " "], "--duration: an empty value"),
    (["local", "udp_bw", "-r", ""], "-r: an empty value"),
    (["http", "http://127.0.0.1:1/", "-H", ""], "-H: an empty value"),
    (["test", "127.0.0.1", "udp_bw", "--token", ""], "--token: an empty value"),
    (["local", "udp_bw", "--lab"], None),                     # --lab alone: the one lab that is up
    (["local", "udp_bw", "--low", "1kpps"], "--low: only with --search"),
    (["local", "udp_bw", "--resolution", "2%"], "--resolution: only with --search"),
    (["local", "udp_bw", "--max-trials", "3"], "--max-trials: only with --search"),
    (["local", "udp_bw", "--settle", "1s"], "--settle: only with --search"),
    (["local", "udp_bw", "--retries", "1"], "--retries: only with --search"),
    (["flows", "--port", "ring:a:0", "--low", "1kpps"], "--low: only with --search"),
    (["local", "udp_bw", "--search", "zero-loss", "--low", "1kpps", "--max-trials", "3"], None),
    (["local", "udp_bw", "--max-trials", "16"], "--max-trials: only with --search"),   # the default, given
    (["local", "tcp_bw", "-f", "2"], "-f: only with test udp_bw, not tcp_bw"),
    (["local", "tcp_bw", "--flows", "1"], "--flows: only with test udp_bw"),
    (["local", "tcp_lat", "--gso", "0"], "--gso: only with test udp_bw"),
    (["local", "udp_lat", "--batch", "8"], "--batch: only with test udp_bw or tcp_bw or sctp_bw"),
    (["local", "tcp_bw", "--batch", "8"], None),
    (["test", "127.0.0.1", "tcp_lat", "--gso", "0"], "--gso: only with test udp_bw"),
    (["test", "127.0.0.1", "tcp_bw", "udp_bw", "--gso", "0"], None),      # applies to one of the tests
    (["test", "127.0.0.1", "tcp_lat", "udp_lat", "-f", "1"], "-f: only with test udp_bw, not tcp_lat, udp_lat"),
    (["flows", "--engine", "socket", "--mem", "256"], "--mem: only with --engine dpdk, not socket"),
    (["flows", "--engine", "socket", "--hugepages", "off"], "--hugepages: only with --engine dpdk"),
    (["flows", "--engine", "socket", "--burst", "8"], "--burst: only with --engine dpdk"),
    (["flows", "--engine", "socket", "--peer", "ring:a:1"], "--peer: only with --engine dpdk"),
    (["flows", "--engine", "socket", "--sizes", "imix"], "--sizes: only with --engine dpdk"),
    (["flows", "--engine", "socket", "--cores", "2"], "--cores: only with --engine dpdk"),
    (["flows", "--engine", "socket", "-v"], "-v: only with --engine dpdk"),
    (["flows", "--engine", "socket", "--size", "128", "--rate", "1kpps", "--mode", "reverse"], None),
    (["flows", "--port", "ring:a:0", "--lab", "l1"], "--lab: only with --engine socket, not dpdk"),
    (["flows", "--port", "ring:a:0", "--netns", "/run/netns/x"],
     "--netns: only with a DPDK port of kind af_packet or tap or af_xdp, not ring"),
    (["flows", "--port", "net_null0", "--netns", "/run/netns/x"], "--netns: only with a DPDK port of kind"),
    (["flows", "--port", "net_af_packet0,iface=v", "--netns", "/run/netns/x"], None),
    (["flows", "--port", "net_tap0,iface=v", "--netns", "/run/netns/x"], None),
    (["flows", "--port", "ring:a:0", "--ramp-time", "2s"], "--ramp-time: only with --ramp-to"),
    (["flows", "--port", "ring:a:0", "--ramp-to", "1Mpps", "--ramp-time", "2s"], None),
    (["flows", "--port", "ring:a:0", "--probe-size", "100"], "--probe-size: only with --probe-rate"),
    (["flows", "--port", "ring:a:0", "--bidirectional"], "--bidirectional: only with --peer"),
    (["flows", "--port", "ring:a:0", "--peer", "ring:a:1", "--mode", "reverse", "--bidirectional"],
     "--bidirectional: only with --mode rxonly, not reverse"),
    (["reflect", "--port", "ring:a:1", "--udp-port", "9"], "--udp-port: only with --engine socket, not dpdk"),
    (["reflect", "--engine", "socket", "--udp-port", "9", "--netns", "/run/netns/x"], None),
    (["reflect", "--engine", "socket", "--ips", "4"], "--ips: only with --engine dpdk"),
    (["reflect", "--engine", "socket", "--burst", "8"], "--burst: only with --engine dpdk"),
    (["reflect", "--engine", "socket", "--mem", "256"], "--mem: only with --engine dpdk"),
    (["reflect", "--port", "ring:a:1", "--peer", "ring:b:0"], "--peer: only with --mode forward, not reverse"),
    (["reflect", "--port", "ring:a:1", "--mode", "rxonly", "--dst-mac", "02:00:00:00:00:01"],
     "--dst-mac: only with --mode forward or reverse, not rxonly"),
    (["reflect", "--port", "ring:a:1", "--mode", "rxonly", "--tx-port", "ring:b:0"],
     "--tx-port: only with --mode reverse, not rxonly"),
    (["reflect", "--port", "ring:a:1", "--tx-port", "ring:b:0"], None),
    (["flows", "--port", "ring:a:0", "--rx-port", "ring:b:1"], "--rx-port: only with --mode reverse, not rxonly"),
    (["flows", "--port", "ring:a:0", "--mode", "reverse", "--rx-port", "ring:b:1"], None),
    (["reflect", "--port", "ring:a:1", "--mode", "forward", "--peer", "ring:b:0", "--peer-dst-mac",
      "02:00:00:00:00:01"], None),
    (["reflect", "--port", "ring:a:1", "--mode", "rxonly", "--ips", "2"], "--ips: only with --mode reverse"),
    (["reflect", "--port", "ring:a:1", "--mode", "reverse", "-f", "10"], "-f: only with --mode rxonly"),
    (["reflect", "--port", "ring:a:1", "--mode", "rxonly", "-f", "10"], None),
    (["http", "http://127.0.0.1:1/", "--random"], "--random: only with --url-file"),
    (["http", "--url-file", "urls.txt", "--random"], None),
    (["lab", "up", "--reorder", "5%"], "--reorder: only with --delay"),
    (["lab", "up", "--reorder", "5%", "--delay", "10ms"], None),
    (["cluster", "up", "--hosts", "h1"], "--hosts: only with --lab"),
    (["cluster", "up", "--lab", "web", "--hosts", "h1"], None),
]


@pytest.mark.parametrize("argv,line", CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_an_option_where_it_means_nothing_is_refused(argv, line):
    got = refused(argv)
    if line is None:
        assert got is None, got
    else:
        assert got is not None and got.startswith(line) and "\n" not in got, got


def test_main_refuses_before_anything_runs_with_one_line():
    code, err = run_cli(["flows", "--engine", "socket", "--mem", "256", "-t", "1s"])
    assert code == 2 and err == "perfkit: --mem: only with --engine dpdk, not socket\n", err
    code, err = run_cli(["local", "udp_bw", "-t", ""])
    assert code == 2 and err.startswith("perfkit: -t: an empty value") and err.count("\n") == 1, err


def test_fields_without_applies_apply_everywhere():
    """A field another change adds without applies: every command line takes it."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Spec:
        knob: int = fields.opt(1, help="a knob", lo=1, hi=9)
    assert fields.meta(Spec, "knob").applies == ()
    import argparse
    p = argparse.ArgumentParser()
    action = fields.add_option(p, Spec, "knob")
    fields.check_applies({"--knob": (action, "3")}, {"engine": "socket", "test": "tcp_lat"})


def test_applies_is_declared_once_per_field():
    from perfkit.kinds import DpdkFlows, DpdkReflect, LocalTest, RemoteTest
    assert fields.meta(LocalTest, "flows").applies == (("test", ("udp_bw",)),)
    assert fields.meta(RemoteTest, "gso").applies == fields.meta(LocalTest, "gso").applies   # like() keeps it
    assert fields.meta(DpdkReflect, "burst").applies == fields.meta(DpdkFlows, "burst").applies
    with pytest.raises(TypeError):
        fields.opt(1, help="x", applies={"engine": ()})


# ------------------------------------------------------------------ every documented command line still parses

_PLACEHOLDERS = {"HOST": "127.0.0.1", "URL": "http://127.0.0.1:8080/", "TEST": "udp_bw", "SIZE": "64",
                 "D": "10s", "FILE.conf": "x.conf", "Npps": "1000pps", "ADDR": "127.0.0.1", "T": "secret"}
_COMMAND = re.compile(r"perfkit ((?:local|engines|lab|serve|test|flows|reflect|http-serve|http|dperf|nics|cluster)"
                      r"\b[^\n`|;&>]*)")


def documented_command_lines() -> list[tuple[str, list[str]]]:
    """(where, argv) for every `perfkit COMMAND ...` in README.md, docs/, notebooks/ and bench/:
    a comment cut off, placeholders (HOST, URL, SIZE) filled, '...' dropped."""
    root = pathlib.Path(__file__).resolve().parent.parent
    files = [root / "README.md", *sorted((root / "docs").rglob("*")), *sorted((root / "notebooks").rglob("*")),
             *sorted((root / "bench").rglob("*"))]
    out = []
    for f in files:
        if not f.is_file() or f.suffix not in (".md", ".ipynb", ".py", ".sh", ".txt"):
            continue
        text = f.read_text(errors="replace")
        if f.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
        for m in _COMMAND.finditer(text):
            line = re.split(r"\s#", m.group(1))[0].strip()
            try:
                words = shlex.split(line)
            except ValueError:
                continue   # prose with an apostrophe
            argv = [_PLACEHOLDERS.get(w, w) for w in words if w not in ("...", "\\")]
            out.append((f"{f.relative_to(root)}: perfkit {line}", argv))
    return out


def test_no_documented_command_line_is_refused():
    """Every documented line argparse takes passes the strict checks too (the prose and usage
    lines argparse refuses, 'perfkit lab (', are not command lines)."""
    parsed, bad = 0, []
    parser = cli._parser()   # one for all: check_options puts back the defaults it changes
    for where, argv in documented_command_lines():
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                a = cli._parse(parser, argv)
        except SystemExit:
            continue
        parsed += 1
        try:
            cli.check_options(parser, argv, a)
        except ValueError as exc:
            bad.append(f"{where}: {exc}")
    assert not bad, "\n".join(bad)
    assert parsed >= 60, f"only {parsed} documented command lines parsed: is the extraction broken?"


def test_an_option_for_the_closed_loop_is_refused_with_a_rate():
    assert refused(["http", "http://127.0.0.1:1/", "-r", "1000", "--think", "100ms"]) == \
        "--think: only without -r"   # the label: the option as the line wrote it
    assert refused(["http", "http://127.0.0.1:1/", "--think", "100ms", "--ramp", "5s"]) is None
