"""One parser for every unit perfkit accepts: durations, sizes and rates.

    durations  10s 2m 1h 500ms 250us 1.5   (bare number = seconds)
    sizes      64 1500 64K 1M 64KiB 9000B  (K/M/G are binary, as in qperf and iperf3)
    rates      1.5Mpps 100kpps 10Gbps 100Mbit 5000  (decimal prefixes; bare number = packets/s)

Every parser raises ValueError naming the field and what is allowed. Only ASCII digits
are numbers: int() and float() also read '１００' and '٣' (and '1_000'); every number a
user writes goes through parse_int or parse_float here, or a [0-9] pattern.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

_SP = r"[ \t\n\r\f\v]*"   # ASCII spaces: \s would also take other scripts'
_NUMBER = _SP + r"(-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)" + _SP
_INT = re.compile(_SP + r"([-+]?[0-9]+)" + _SP)
_FLOAT = re.compile(_SP + r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)" + _SP)


def _ascii_hint(value) -> str:
    """' (digits 0-9 only)' where value holds another script's digits ('١٠', '²'), else ''."""
    return " (digits 0-9 only)" if any(c.isnumeric() and not c.isascii() for c in str(value)) else ""


def parse_int(value, field: str, what: str = "a whole number") -> int:
    """An int from an int or from ASCII digits (an optional sign, spaces around): int() alone
    would also take other scripts' digits and underscores."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _INT.fullmatch(value) if isinstance(value, str) else None
    if not m:
        raise ValueError(f"{field}: {value!r} is not {what}{_ascii_hint(value)}")
    return int(m.group(1), 10)


def parse_float(value, field: str, what: str = "a number") -> float:
    """A finite float from a number or from ASCII digits (12, 1.5, .5, 1e3): float() alone
    would also take other scripts' digits, underscores, 'inf' and 'nan'."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _finite(float(value), value, field)
    m = _FLOAT.fullmatch(value) if isinstance(value, str) else None
    if not m:
        raise ValueError(f"{field}: {value!r} is not {what}{_ascii_hint(value)}")
    return _finite(float(m.group(1)), value, field)


_DURATION_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "m": 60.0,
                   "min": 60.0, "h": 3600.0}
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
               "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_RATE = re.compile(_NUMBER + r"([kKmMgGtT]?)(pps|bps|bit/s|bit|b/s)?" + _SP)


def _split(value, field: str, what: str):
    m = re.fullmatch(_NUMBER + r"([A-Za-z/]*)" + _SP, str(value))
    if not m:
        raise ValueError(f"{field}: cannot read {value!r} as {what}{_ascii_hint(value)}")
    return _finite(float(m.group(1)), value, field), m.group(2)


def _finite(number: float, value, field: str) -> float:
    """number, unless it is inf or NaN (1e400 reads as inf)."""
    if not math.isfinite(number):
        raise ValueError(f"{field}: {value!r} is not a finite number")
    return number


def parse_duration(value, field: str = "duration") -> float:
    """Seconds, from 10s, 2m, 500ms, 1h or a bare number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number, unit = _finite(float(value), value, field), ""
    else:
        number, unit = _split(value, field, "a duration (10s, 2m, 500ms)")
    scale = _DURATION_UNITS.get(unit.lower())
    if scale is None:
        raise ValueError(f"{field}: unknown unit {unit!r} in {value!r} (use s, ms, us, m or h)")
    return number * scale


def parse_size(value, field: str = "size") -> int:
    """Bytes, from 64, 1500, 64K (= 65536), 1M, 64KiB."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        number, unit = _finite(value, value, field), ""
    else:
        number, unit = _split(value, field, "a size (64, 1500, 64K)")
    scale = _SIZE_UNITS.get(unit.lower())
    if scale is None:
        raise ValueError(f"{field}: unknown unit {unit!r} in {value!r} (use B, K, M or G)")
    size = number * scale
    if size != int(size):
        raise ValueError(f"{field}: {value!r} is not a whole number of bytes")
    return int(size)


@dataclass(frozen=True)
class Rate:
    """A target rate: packets (messages) per second or bits per second."""
    value: float
    unit: str  # "pps" or "bps"

    def messages_per_second(self, size: int) -> float:
        """Packets/s to send with payloads of size bytes (bps counts payload bits, as iperf3 -b)."""
        return self.value if self.unit == "pps" else self.value / (8.0 * size)

    def __str__(self) -> str:
        return format_si(self.value, self.unit)


def parse_rate(value, field: str = "rate") -> Rate:
    """A Rate from 1.5Mpps, 100kpps, 10Gbps, 100Mbit or a bare number of packets/s."""
    if isinstance(value, Rate):
        if value.unit not in ("pps", "bps"):
            raise ValueError(f"{field}: unit {value.unit!r} in {value!r} is not pps or bps")
        _finite(float(value.value), value, field)
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Rate(_finite(float(value), value, field), "pps")
    m = _RATE.fullmatch(str(value))
    if not m:
        raise ValueError(f"{field}: cannot read {value!r} as a rate "
                         f"(use pps or bps with k, M, G: 1.5Mpps, 10Gbps, 100kpps){_ascii_hint(value)}")
    number, prefix, unit = _finite(float(m.group(1)), value, field), m.group(2), m.group(3)
    if unit is None:
        if prefix:
            raise ValueError(f"{field}: {value!r} needs a unit: pps or bps (e.g. {value}pps)")
        unit = "pps"
    return Rate(number * _SI[prefix.lower()], "pps" if unit == "pps" else "bps")


def format_si(value: float, unit: str = "", digits: int = 3) -> str:
    """1534000, 'pps' -> '1.53 Mpps'; 999999.5 -> '1 Mpps' (rounded before the prefix is chosen)."""
    rounded = float(f"{value:.{digits}g}")
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(rounded) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".rstrip()


def format_time_us(us: float | None, digits: int = 3) -> str:
    """Microseconds as qperf writes a time: 12.3 us, 4.56 ms, 1.2 sec; '-' for none."""
    if us is None:
        return "-"
    if us >= 1e6:
        return f"{us / 1e6:.{digits}g} sec"
    if us >= 1e3:
        return f"{us / 1e3:.{digits}g} ms"
    return f"{us:.{digits}g} us"


def rate_text(spec: dict) -> str | None:
    """A spec dict's rate as text (20 kpps), None for no rate."""
    rate = spec.get("rate")
    if not rate:
        return None
    try:
        return str(Rate(float(rate["value"]), rate["unit"]))
    except Exception:  # noqa: BLE001 (a listing must not fail on one odd file)
        return f"{rate.get('value')} {rate.get('unit')}"


def human(value, unit: str = "", digits: int = 3) -> str:
    """One formatter for people: SI prefixes and 3 significant digits (196000000, 'bps' ->
    '196 Mbps'); times given in µs switch to ms/s ('µs': 20200 -> '20.2 ms'); '-' for none."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    if value != value:   # NaN: a figure with no samples
        return "-"
    if unit in ("µs", "us"):
        for scale, name in ((1e6, "s"), (1e3, "ms")):
            if abs(float(f"{value:.{digits}g}")) >= scale:
                return f"{value / scale:.{digits}g} {name}"
        return f"{value:.{digits}g} µs"
    if unit == "%":
        return f"{value:.{digits}g} %"
    return format_si(value, unit, digits)
