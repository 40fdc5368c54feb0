"""Strict command lines (issue 29): only ASCII digits are numbers, and no option is silently
ignored. Parse-only: every case here is refused (or accepted) before an engine starts."""
from __future__ import annotations

import contextlib
import io

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
