"""A spec field declared once: its default and, beside it, what the form, the command
line and the checks need to know about it.

    size: int = opt(64, help="frame bytes", unit="bytes", lo=64, hi=9018)

opt() returns a dataclasses.field whose metadata holds a Meta; meta(), spec_fields() and
help_text() read it back. The panel (perfkit.ui.panel) builds its form from them (the
advanced fields folded away), the command line its options for spec fields (add_option,
from the kinds' parsers), and check_declared() applies the range and choices checks they
declare (a spec's __post_init__ calls it; checks that need more stay in the spec).
"""
from __future__ import annotations

import dataclasses
from dataclasses import MISSING

from perfkit.units import parse_float, parse_int

KEY = "perfkit"   # the dataclasses metadata key this module owns

SECONDS = "seconds (500ms, 10s, 2m)"   # the unit of every duration field shown as '10s'


@dataclasses.dataclass(frozen=True)
class Meta:
    """What one field declares besides its default.

    help         one line on what the field does (the panel's hint)
    unit         what it takes, as shown beside the input ("bytes (64, 1500, 64K)")
    lo, hi       whole-number bounds, both inclusive: shown as 'lo..hi' and checked
    range_text   a range that is not two numbers (it depends on another field): shown only
    choices      the values it takes: a dropdown, and checked
    suggestions  values offered in a free-text box (DPDK ports): not checked
    widget       how the form takes it where its type does not say: secret, area, ranges, pair
    check        False: the spec checks lo/hi or choices itself (another parse or message)
    flag, short  the command line's option for it (--peer-ip, -m; default --NAME with - for _)
    cli_help     its help on the command line where that says more (other flags, its default)
    advanced     a tuning knob (buffers, batches, timeouts, CPU pinning...), not what the test is,
                 where it goes, how long or how much: the panel folds it under "Advanced" and
                 perfkit's help lists it under "advanced options"
    applies      where the option means something, as {key: values}: the command line refuses it
                 given elsewhere (check_applies). key: a parsed argument (test, mode, engine) or
                 one the CLI derives (protocol, port_kind); values: a tuple it must be in, or
                 True: that option given too (search=True: only with --search), False: that
                 option not given (rate=False: closed loop only). Empty: everywhere
    """
    help: str
    unit: str = ""
    lo: int | None = None
    hi: int | None = None
    range_text: str = ""
    choices: tuple | None = None
    suggestions: tuple | None = None
    widget: str | None = None
    check: bool = True
    flag: str | None = None
    short: str | None = None
    cli_help: str | None = None
    advanced: bool = False
    applies: tuple = ()

    @property
    def bounds(self) -> tuple[int, int] | None:
        return None if self.lo is None else (self.lo, self.hi)

    @property
    def range(self) -> str:
        """The range as shown: 'lo..hi', or range_text."""
        return f"{self.lo}..{self.hi}" if self.lo is not None else self.range_text


def opt(default=MISSING, *, help: str, unit: str = "", lo: int | None = None, hi: int | None = None,
        range_text: str = "", choices=None, suggestions=None, widget: str | None = None,
        check: bool = True, flag: str | None = None, short: str | None = None,
        cli_help: str | None = None, advanced: bool = False, applies: dict | None = None, repr: bool = True,
        compare: bool = True) -> dataclasses.Field:
    """A dataclass field with its metadata (see Meta)."""
    if not help or not str(help).strip():
        raise TypeError("opt: every field declares its help")
    if (lo is None) != (hi is None):
        raise TypeError("opt: lo and hi go together")
    m = Meta(str(help), unit, lo, hi, range_text, None if choices is None else tuple(choices),
             None if suggestions is None else tuple(suggestions), widget, check, flag, short, cli_help,
             bool(advanced), conditions(applies))
    return dataclasses.field(default=default, repr=repr, compare=compare, metadata={KEY: m})


def like(spec_cls, name: str, default=MISSING, **changes) -> dataclasses.Field:
    """Another spec's field declaration again (a new Field: dataclasses owns each one),
    with its default or metadata changed where given."""
    f = _field(spec_cls, name)
    if "applies" in changes:
        changes["applies"] = conditions(changes["applies"])
    m = dataclasses.replace(f.metadata[KEY], **changes)
    return dataclasses.field(default=f.default if default is MISSING else default, repr=f.repr,
                             compare=f.compare, metadata={KEY: m})


def _field(spec_cls, name: str) -> dataclasses.Field:
    for f in dataclasses.fields(spec_cls):
        if f.name == name:
            return f
    raise KeyError(f"{name}: not a field of {spec_cls.__name__}")


def meta(spec_cls, name: str) -> Meta:
    """The metadata of spec_cls's field name (a class or an instance)."""
    m = _field(spec_cls, name).metadata.get(KEY)
    if m is None:
        raise KeyError(f"{name}: {type(spec_cls).__name__ if not isinstance(spec_cls, type) else spec_cls.__name__} "
                       "declares it without opt()")
    return m


def spec_fields(spec_cls) -> list[tuple[dataclasses.Field, Meta]]:
    """Every field of spec_cls, in order, with its metadata (None where it has none)."""
    return [(f, f.metadata.get(KEY)) for f in dataclasses.fields(spec_cls)]


def essential_and_advanced(spec_cls) -> tuple[list[str], list[str]]:
    """spec_cls's field names in two lists, each in field order: the essentials (what, where,
    how long, how much) and the advanced ones (tuning knobs)."""
    pairs = spec_fields(spec_cls)
    return ([f.name for f, m in pairs if m is None or not m.advanced],
            [f.name for f, m in pairs if m is not None and m.advanced])


def help_text(spec_cls, name: str | None = None):
    """A field's help line; without name, {field: help} for every field."""
    if name is not None:
        return meta(spec_cls, name).help
    return {f.name: m.help for f, m in spec_fields(spec_cls) if m is not None}


def int_arg(text: str) -> int:
    """argparse's type for a whole number: ASCII digits only (type=int reads '١٠' too)."""
    return parse_int(text, "value")


def float_arg(text: str) -> float:
    """argparse's type for a number: ASCII digits only, finite (type=float reads '１.5' and 'nan')."""
    return parse_float(text, "value")


int_arg.__name__, float_arg.__name__ = "int", "float"   # argparse names the type in its error: "invalid int value"


def add_option(parser, spec_cls, name: str, **kw):
    """The command-line option for a spec field as the field declares it: its flag and
    short option, its help and its default, listed under "advanced options" for an
    advanced field; kw: argparse's own (metavar, type), or the default where the command
    works it out itself (None)."""
    f = _field(spec_cls, name)
    m = meta(spec_cls, name)
    flags = [x for x in (m.short, m.flag or "--" + name.replace("_", "-")) if x]
    if kw.get("type") in (int, float):   # ASCII digits only: int() and float() read '١٠' too
        kw["type"] = int_arg if kw["type"] is int else float_arg
    kw.setdefault("help", m.cli_help or m.help.replace("%", "%%"))
    if f.type == "bool" and f.default is False:
        kw.setdefault("action", "store_true")
    else:
        kw.setdefault("default", f.default)
    action = (advanced_group(parser) if m.advanced else parser).add_argument(*flags, **kw)
    action.perfkit_applies = m.applies
    return action


def conditions(applies: dict | None) -> tuple:
    """applies as Meta keeps it: ((key, True, False or a tuple of values), ...)."""
    out = []
    for key, values in (applies or {}).items():
        if values is not True and values is not False:
            values = (values,) if isinstance(values, str) else tuple(values)
            if not values:
                raise TypeError(f"applies: {key} lists no values")
        out.append((str(key), values))
    return tuple(out)


def applies(action, **where):
    """An option the command adds itself (not a spec field) declared as Meta.applies does:
    applies(parser.add_argument("--low", ...), search=True). Returns the action."""
    action.perfkit_applies = conditions(where)
    return action


def check_applies(given: dict, context: dict, label=lambda key: key) -> None:
    """ValueError for the first option given where it does not apply, starting with its name.
    given: {option name as written: (its action, its value)}; context: {key: value, or a
    list/set of values (perfkit test's several tests)}; a key the context lacks is not
    checked (that command has no such choice). label(key): how the message names a key
    (--engine, test). An empty value is refused everywhere."""
    dests = {a.dest for a, _ in given.values()}
    for name, (action, value) in given.items():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and not v.strip() and not (action.nargs == "?" and v == action.const):
                raise ValueError(f"{name}: an empty value: give one, or leave {name} out")
        for key, values in getattr(action, "perfkit_applies", ()):
            if values is True or values is False:
                if key in context and (key in dests) is not values:
                    raise ValueError(f"{name}: only {'with' if values else 'without'} {label(key)}")
                continue
            if key not in context:
                continue
            have = context[key]
            have = sorted(have) if isinstance(have, (list, set, tuple, frozenset)) else [have]
            if not any(h in values for h in have):
                shown = ", ".join(str(h) for h in have) or "none"
                raise ValueError(f"{name}: only with {label(key)} {' or '.join(map(str, values))}, not {shown}")


ADVANCED_OPTIONS = "advanced options"


def advanced_group(parser):
    """parser's argument group "advanced options" (made on first use): its help lists the
    options of advanced fields, and of the tuning knobs a command adds itself, apart."""
    group = getattr(parser, "perfkit_advanced", None)
    if group is None:
        group = parser.perfkit_advanced = parser.add_argument_group(ADVANCED_OPTIONS)
    return group


def cluster_option(parser) -> None:
    """--cluster NAME, on the commands that make load: the run split over a cluster's engines (perfkit.cluster)."""
    parser.add_argument("--cluster", metavar="NAME",
                        help="run the load from every engine of this cluster (perfkit cluster up, or an "
                             "ipyparallel profile), as one run: rows and summary summed, then each host's share")


def whole_number(value, name: str, lo: int, hi: int) -> int:
    """value as an int in lo..hi, else ValueError naming the field (the specs' own message)."""
    if isinstance(value, bool) or not isinstance(value, int):
        value = parse_int(str(value), name)   # ASCII digits only: int() reads '１００' too
    if not lo <= value <= hi:
        raise ValueError(f"{name}: {value} is out of range {lo}..{hi}")
    return value


def check_value(value, name: str, m: Meta):
    """value checked as m declares (choices, or whole-number lo..hi); returned as the spec keeps it."""
    if m.choices is not None:
        if value not in m.choices:
            raise ValueError(f"{name}: {value!r} is not one of {', '.join(m.choices)}")
        return value
    if m.lo is not None:
        return whole_number(value, name, m.lo, m.hi)
    return value


def check_declared(spec, names=None) -> None:
    """Apply the range and choices checks spec's fields declare (those with check=True), in
    field order or in the order of names; None stays None where the default is None. The
    converted value is put back on the (frozen) spec."""
    fields = {f.name: (f, m) for f, m in spec_fields(spec)}
    for name in (fields if names is None else names):
        f, m = fields[name]
        if m is None or not m.check or (m.choices is None and m.lo is None):
            continue
        value = getattr(spec, name)
        if value is None and f.default is None:
            continue
        object.__setattr__(spec, name, check_value(value, name, m))
