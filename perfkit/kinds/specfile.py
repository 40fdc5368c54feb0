"""A spec from a TOML file (BiTester's -f flows file): its keys are the spec's own fields, loaded
through the spec's own checks; every error names FILE:LINE.

    port = "ring:a:0"
    peer = "ring:a:1"
    rate = "1Mpps"
    sizes = "64,570,1518"
    cores = 2                         # concurrency: lcores per side
    ip = "198.18.0.1-198.18.0.10"     # a range: the first address and how many (src_ips)
    sport = "10000-10999"             # the first port and how many (sports)

A kind says which fields take a range (`ranges`: field -> the count field it sets) and which keys
the file may hold beside its fields with one allowed value (`fixed`: e.g. proto = "udp").
"""
from __future__ import annotations

import dataclasses
import ipaddress
import re
import tomllib


class SpecFileError(ValueError):
    """A bad spec file: one line, starting with FILE:LINE (or FILE: when no line is to blame)."""


def _key_lines(text: str) -> dict[str, int]:
    """The line each top-level key (bare or quoted) is set on, and each [table]'s, 1-based."""
    lines, in_table = {}, False
    for n, raw in enumerate(text.splitlines(), 1):
        ln = raw.strip()
        m = re.match(r"\[+\s*([^\]]+?)\s*\]+", ln)
        if m:
            lines.setdefault(m.group(1).strip('"\''), n)
            in_table = True
            continue
        m = re.match(r"""(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*=""", ln)
        if m and not in_table:
            lines.setdefault(next(g for g in m.groups() if g), n)
    return lines


def _range(value, field: str) -> tuple[object, int] | None:
    """'A-B' (ports or IPv4 addresses) as (A, B - A + 1); None for anything else."""
    if not isinstance(value, str) or "-" not in value:
        return None
    lo, _, hi = (p.strip() for p in value.partition("-"))
    try:
        if lo.isascii() and lo.isdigit() and hi.isascii() and hi.isdigit():
            a, b = int(lo), int(hi)
            first = a
        else:
            a, b = int(ipaddress.IPv4Address(lo)), int(ipaddress.IPv4Address(hi))
            first = lo
    except ValueError:
        raise ValueError(f"{field}: {value!r} is not a range FIRST-LAST of ports or IPv4 addresses") from None
    if b < a:
        raise ValueError(f"{field}: {value!r} ends before it starts")
    return first, b - a + 1


def load(path, spec_cls, ranges: dict | None = None, fixed: dict | None = None, overrides: dict | None = None):
    """spec_cls(**the file's fields, **overrides): the spec's own checks, errors as FILE:LINE: ...
    ranges: {field: count field} of the fields that take 'FIRST-LAST'; fixed: {key: allowed values}
    of keys that are not fields; overrides: fields set besides the file (they win)."""
    name = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise SpecFileError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise SpecFileError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"{name}:{m.group(1)}" if m else name
        raise SpecFileError(f"{where}: not TOML: {re.sub(r' [(]at line.*', '', str(exc))}") from None
    lines = _key_lines(text)
    at = lambda key: f"{name}:{lines[key]}" if key in lines else name  # noqa: E731
    fields = {f.name for f in dataclasses.fields(spec_cls)}
    ranges, fixed = ranges or {}, fixed or {}
    kwargs, source = {}, {}   # source: field -> the file key it came from (for the line)
    for key, value in data.items():
        if isinstance(value, dict):
            raise SpecFileError(f"{at(key)}: [{key}]: tables are not fields; set each field at the top level")
        if key in fixed:
            if value not in fixed[key]:
                raise SpecFileError(f"{at(key)}: {key}: {value!r} is not one of {', '.join(map(str, fixed[key]))}")
            continue
        if key not in fields:
            raise SpecFileError(f"{at(key)}: {key}: not a field of {spec_cls.__name__} "
                                f"(fields: {', '.join(sorted(fields))})")
        if key in ranges:
            try:
                got = _range(value, key)
            except ValueError as exc:
                raise SpecFileError(f"{at(key)}: {exc}") from None
            if got is not None:
                value, count = got
                if ranges[key] in data:
                    raise SpecFileError(f"{at(key)}: {key}: a range sets {ranges[key]} too; give one or the other")
                kwargs[ranges[key]], source[ranges[key]] = count, key
        kwargs[key], source[key] = value, key
    given = {k: v for k, v in (overrides or {}).items() if k in fields}
    try:
        return spec_cls(**{**kwargs, **given})
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        field = msg.split(":", 1)[0].strip()
        if field in given:
            raise SpecFileError(f"{msg} (given beside {name})") from None
        raise SpecFileError(f"{at(source.get(field, field))}: {msg}") from None
