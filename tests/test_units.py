"""perfkit.units: one parser for durations, sizes and rates.

Sizes are binary (K = 1024), rates decimal (k/M/G = 1e3/1e6/1e9), a bare number
is seconds for a duration, bytes for a size and packets/s for a rate. Every
error is a ValueError that starts with the field's name.
"""
import math

import pytest

from perfkit.units import Rate, format_si, parse_duration, parse_rate, parse_size


# ------------------------------------------------------------------ durations
@pytest.mark.parametrize("text, seconds", [
    ("10s", 10.0),
    ("2m", 120.0),
    ("1h", 3600.0),
    ("1min", 60.0),
    ("3sec", 3.0),
    ("500ms", 0.5),
    ("250us", 250e-6),
    ("1.5", 1.5),         # bare number = seconds
    ("1500", 1500.0),
    (" 10s ", 10.0),
    ("10 s", 10.0),
    ("1e1s", 10.0),
    ("0.5S", 0.5),        # units are case-insensitive
    (7, 7.0),
    (0.25, 0.25),
])
def test_parse_duration(text, seconds):
    got = parse_duration(text)
    assert isinstance(got, float)
    assert got == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["1Xs", "10 parsecs", "5d", "1ns"])
def test_parse_duration_unknown_unit_names_field_and_units(text):
    with pytest.raises(ValueError) as e:
        parse_duration(text, "duration")
    msg = str(e.value)
    assert msg.startswith("duration: ")
    assert repr(text) in msg
    assert "ms" in msg  # says what is allowed


@pytest.mark.parametrize("text", ["", "s", "ten seconds", "1.2.3s", None, True, [1], "0x10"])
def test_parse_duration_unreadable(text):
    with pytest.raises(ValueError, match=r"^interval: cannot read"):
        parse_duration(text, "interval")


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "1e400", "1e400s", "-1e400ms"])
def test_parse_duration_rejects_non_finite(value):
    with pytest.raises(ValueError, match=r"^duration: .*finite"):
        parse_duration(value)


# ---------------------------------------------------------------------- sizes
@pytest.mark.parametrize("text, nbytes", [
    ("64", 64),
    ("1500", 1500),
    ("64K", 64 * 1024),   # K is binary, as in qperf and iperf3
    ("64k", 64 * 1024),
    ("64KB", 64 * 1024),
    ("64KiB", 64 * 1024),
    ("1M", 1 << 20),
    ("1m", 1 << 20),
    ("2MiB", 2 << 20),
    ("1G", 1 << 30),
    ("9000B", 9000),
    ("1.5K", 1536),
    ("0.5K", 512),
    (" 64 K ", 65536),
    ("1e3", 1000),
    (64, 64),
    (64.0, 64),
])
def test_parse_size(text, nbytes):
    got = parse_size(text)
    assert type(got) is int
    assert got == nbytes


def test_size_k_is_binary_but_rate_k_is_decimal():
    assert parse_size("1K") == 1024
    assert parse_rate("1kpps").value == 1000.0
    assert parse_size("1M") == 1048576
    assert parse_rate("1Mpps").value == 1e6


@pytest.mark.parametrize("text", ["1Xpps", "64Q", "1T", "64 KB/s", "1pps"])
def test_parse_size_unknown_unit(text):
    with pytest.raises(ValueError) as e:
        parse_size(text, "size")
    msg = str(e.value)
    assert msg.startswith("size: unknown unit")
    assert "K" in msg and "M" in msg  # says what is allowed


@pytest.mark.parametrize("text", ["1.1K", "64.5", 64.5, "0.3"])
def test_parse_size_must_be_whole_bytes(text):
    with pytest.raises(ValueError, match=r"^size: .*whole number of bytes"):
        parse_size(text)


@pytest.mark.parametrize("text", ["", "K", "sixty-four", None, True, [64], "0x40"])
def test_parse_size_unreadable(text):
    with pytest.raises(ValueError, match=r"^msg_size: cannot read"):
        parse_size(text, "msg_size")


@pytest.mark.parametrize("value", ["1e400", "1e400K", float("inf"), float("nan")])
def test_parse_size_rejects_non_finite_with_a_value_error(value):
    # used to escape as OverflowError ("cannot convert float infinity to integer")
    with pytest.raises(ValueError, match=r"^size: .*finite"):
        parse_size(value)


# ---------------------------------------------------------------------- rates
@pytest.mark.parametrize("text, value, unit", [
    ("1.5Mpps", 1.5e6, "pps"),
    ("100kpps", 1e5, "pps"),
    ("100Kpps", 1e5, "pps"),
    ("10Gbps", 1e10, "bps"),
    ("100Mbit", 1e8, "bps"),
    ("1.5Gbit/s", 1.5e9, "bps"),
    ("5kb/s", 5e3, "bps"),
    ("2Tbps", 2e12, "bps"),
    ("20pps", 20.0, "pps"),
    ("5000", 5000.0, "pps"),   # bare number = packets/s
    ("1e3pps", 1000.0, "pps"),
    (" 10 Gbps ", 1e10, "bps"),
    (5000, 5000.0, "pps"),
    (2.5, 2.5, "pps"),
])
def test_parse_rate(text, value, unit):
    r = parse_rate(text)
    assert isinstance(r, Rate)
    assert r.unit == unit
    assert r.value == pytest.approx(value, rel=1e-12)


def test_parse_rate_passes_a_rate_through():
    r = Rate(123.0, "bps")
    assert parse_rate(r) is r


@pytest.mark.parametrize("text", ["1Xpps", "10GBps", "10 furlongs", "pps", "1.5 Mpps/s", "", "1e400pps"])
def test_parse_rate_unknown_or_unreadable_names_field(text):
    with pytest.raises(ValueError) as e:
        parse_rate(text, "rate")
    assert str(e.value).startswith("rate: ")
    assert repr(text) in str(e.value)


def test_parse_rate_unknown_unit_says_what_is_allowed():
    with pytest.raises(ValueError) as e:
        parse_rate("1Xpps", "rate")
    assert "pps" in str(e.value) and "bps" in str(e.value)


@pytest.mark.parametrize("text", ["1.5M", "10k", "1G"])
def test_parse_rate_prefix_without_unit_is_refused(text):
    with pytest.raises(ValueError, match=r"^rate: .*needs a unit"):
        parse_rate(text)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "1e400pps", "1e400",
                                   Rate(float("inf"), "pps")])
def test_parse_rate_rejects_non_finite(value):
    # an infinite rate used to pass validation; the engine then sent one packet
    with pytest.raises(ValueError, match=r"^rate: .*finite"):
        parse_rate(value)


def test_parse_rate_refuses_a_rate_with_an_unknown_unit():
    with pytest.raises(ValueError, match=r"^rate: .*pps or bps"):
        parse_rate(Rate(5.0, "Mpps"))


def test_rate_messages_per_second():
    assert Rate(1000.0, "pps").messages_per_second(1500) == 1000.0
    # bps counts payload bits: 8 Mbit/s of 1000-byte payloads = 1000 msg/s
    assert parse_rate("8Mbps").messages_per_second(1000) == pytest.approx(1000.0)
    assert parse_rate("1Gbps").messages_per_second(125) == pytest.approx(1e6)


def test_rate_str_and_format_si():
    assert str(parse_rate("1.5Mpps")) == "1.5 Mpps"
    assert str(parse_rate("10Gbps")) == "10 Gbps"
    assert format_si(1534000, "pps") == "1.53 Mpps"
    assert format_si(999, "pps") == "999 pps"
    assert format_si(0) == "0"
    assert format_si(2.5e12, "bps") == "2.5 Tbps"
    assert format_si(999_999.5, "pps") == "1 Mpps"    # rounded before the prefix: not "1e+03 kpps"


def test_parsers_agree_with_each_other():
    """The same text reads the same wherever it appears."""
    for text in ["10s", "2m", "1.5"]:
        assert parse_duration(text) == parse_duration(text, "interval")
    assert parse_rate("1e6").value == parse_rate("1Mpps").value == parse_rate(1_000_000).value
    assert parse_size("64K") == parse_size(65536) == parse_size("65536")
    assert math.isclose(parse_duration("2m"), 2 * parse_duration("60s"))
