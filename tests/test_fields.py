"""A spec field is declared once (perfkit.fields.opt): its help, unit, range and choices
beside its default, and the panel, the checks and the command line read them from there."""
import dataclasses
import html

import pytest

from perfkit import fields
from perfkit.fields import Meta, essential_and_advanced, help_text, like, meta, opt, spec_fields
from perfkit.spec import SPECS, LocalTest
from perfkit.ui import panel

ALL = [(name, f.name) for name, cls in SPECS.items() for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("spec, name", ALL)
def test_every_field_of_every_spec_declares_its_help_and_metadata(spec, name):
    cls = SPECS[spec]
    m = meta(cls, name)
    assert isinstance(m, Meta)
    assert m.help.strip() and m.help == help_text(cls, name)
    assert help_text(cls)[name] == m.help
    default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
    if m.bounds is not None:
        lo, hi = m.bounds
        assert lo <= hi and not m.range_text, "a range is two numbers or a text, not both"
        assert isinstance(default, int) and lo <= default <= hi or default is None, (default, m.bounds)
    if m.choices is not None:
        assert default in m.choices
    assert not (m.choices and m.suggestions)


@pytest.mark.parametrize("spec", list(SPECS))
def test_the_panel_shows_what_the_fields_declare(spec):
    cls = SPECS[spec]
    form = {fu.name: fu for fu in panel.form_fields(cls)}
    assert list(form) == [f.name for f in dataclasses.fields(cls)]
    for f, m in spec_fields(cls):
        fu = form[f.name]
        assert fu.help == m.help
        assert fu.unit == m.unit
        assert fu.bounds == m.bounds
        assert fu.range == (f"{m.lo}..{m.hi}" if m.bounds else m.range_text)
        if m.choices is not None:
            assert (fu.kind, fu.choices) == ("choice", m.choices)
        elif m.suggestions is not None:
            assert (fu.kind, fu.choices) == ("combo", m.suggestions)
        if m.widget is not None:
            assert fu.kind == m.widget
        assert fu.advanced == m.advanced
    assert panel.field_hints(cls) == {f.name: m.help for f, m in spec_fields(cls)}


@pytest.mark.parametrize("spec", ["LocalTest", "DpdkFlows", "HttpLoad"])
def test_the_panel_rows_carry_the_declared_unit_range_and_help(spec):
    p = panel.Panel(spec)
    for f, m in spec_fields(SPECS[spec]):
        shown = p.units[f.name].value
        if m.unit:
            assert html.escape(m.unit) in shown
        if m.range:
            assert f"range {html.escape(m.range)}" in shown
        assert p.inputs[f.name].tooltip == m.help


def _out_of_range():
    for spec, cls in SPECS.items():
        for f, m in spec_fields(cls):
            if m.bounds is not None:
                yield spec, f.name, m.lo - 1
                yield spec, f.name, m.hi + 1
            if m.choices is not None:
                yield spec, f.name, "nope"


@pytest.mark.parametrize("spec, name, value", list(_out_of_range()))
def test_a_value_outside_a_declared_range_or_choice_is_refused_naming_the_field(spec, name, value):
    with pytest.raises(ValueError) as exc:
        SPECS[spec](**{name: value})
    assert str(exc.value).startswith(f"{name}: "), str(exc.value)


def test_generated_checks_keep_the_specs_messages():
    with pytest.raises(ValueError, match=r"^flows: 2000 is out of range 1\.\.1024$"):
        LocalTest(flows=2000)
    with pytest.raises(ValueError, match=r"^flows: 'x' is not a whole number$"):
        LocalTest(flows="x")
    with pytest.raises(ValueError, match=r"^test: 'sctp_bw' is not one of udp_bw, udp_lat, tcp_bw, tcp_lat$"):
        LocalTest(test="sctp_bw")
    assert LocalTest(flows="4").flows == 4     # converted as before
    assert LocalTest(gso=None).gso == 8        # None: the spec's own rule, not a range check


def test_a_specs_docstring_is_not_parsed_for_help():
    before = panel.field_hints(LocalTest)

    @dataclasses.dataclass(frozen=True)
    class Renamed(LocalTest):
        """A subclass whose docstring reads like the old field lists.

        size      something else entirely
        rate      and this too
        """
    assert panel.field_hints(Renamed) == before
    assert {fu.name: fu.help for fu in panel.form_fields(Renamed)} == before
    assert "something else" not in " ".join(before.values())


def test_opt_declares_a_field_once_and_like_repeats_it_with_changes():
    f = opt(5, help="how many", unit="things", lo=1, hi=9)
    assert f.default == 5 and f.metadata[fields.KEY] == Meta("how many", "things", 1, 9)
    with pytest.raises(TypeError, match="help"):
        opt(1, help="")
    with pytest.raises(TypeError, match="lo and hi"):
        opt(1, help="x", lo=1)

    @dataclasses.dataclass(frozen=True)
    class A:
        n: int = opt(5, help="how many", unit="things", lo=1, hi=9)

    @dataclasses.dataclass(frozen=True)
    class B:
        n: int = like(A, "n", 7, help="how many here")

    assert B().n == 7 and meta(B, "n") == Meta("how many here", "things", 1, 9)
    assert meta(A, "n").help == "how many"         # A's own declaration is untouched
    assert meta(A(), "n").range == "1..9"


def _subparsers():
    import argparse
    from perfkit.cli import _parser
    p = _parser()
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices


@pytest.mark.parametrize("command, spec, names", [
    ("local", "LocalTest", ("size", "rate", "flows", "host", "port", "batch", "gso")),
    ("test", "RemoteTest", ("duration", "size", "rate", "flows", "wait_server", "ip_port", "flip", "port", "token",
                            "gso")),
    ("flows", "DpdkFlows", ("peer", "mode", "size", "rate", "flows", "ip", "peer_ip", "dst_mac", "sport", "dport",
                            "burst", "src_ips", "dst_ips", "sports", "dports", "sizes", "ramp_to", "ramp_time",
                            "probe_rate", "probe_size", "bidirectional", "cores", "netns")),
    ("reflect", "DpdkReflect", ("mode", "peer", "dst_mac", "peer_dst_mac", "duration", "flows", "burst", "ips")),
    ("reflect", "SocketReflect", ("port",)),
    ("http", "HttpLoad", ("lab", "threads", "processes", "users", "duration", "rate", "think", "ramp", "method",
                          "body", "connect_timeout", "response_timeout")),
    ("http-serve", "HttpServe", ("host", "port", "size", "duration", "connections")),
])
def test_the_command_lines_options_for_spec_fields_are_the_fields_declarations(command, spec, names):
    sp = _subparsers()[command]
    cls = SPECS[spec]
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    for name in names:
        m = meta(cls, name)
        flag = m.flag or "--" + name.replace("_", "-")
        action = next(a for a in sp._actions if flag in a.option_strings)
        assert action.option_strings == [x for x in (m.short, flag) if x]
        assert action.help == (m.cli_help or m.help)
        assert action.default == defaults[name]
        assert cls(**{name: action.default}) == cls()   # the command line's default is the spec's


def test_the_command_line_keeps_its_spellings():
    sp = _subparsers()
    spelled = {"local": ["-t", "--duration", "-m", "--size", "-r", "--rate", "-f", "--flows", "--host", "--port",
                         "--batch", "--gso"],
               "test": ["-t", "--time", "-m", "--msg-size", "--gso", "-ws", "--wait-server", "-ip", "--ip-port",
                        "-f1", "--flip", "-lp"],
               "flows": ["-t", "--duration", "--port", "--peer-ip", "--src-ips", "--ramp-to", "--probe-size",
                         "--bidirectional"],
               "reflect": ["--udp-port", "--peer-dst-mac", "-t", "-f", "--ips", "--cores", "--netns"],
               "http": ["-u", "--users", "-X", "--method", "-d", "--data", "--timeout", "--connect-timeout"],
               "http-serve": ["--connections", "--size"]}
    for command, flags in spelled.items():
        have = {s for a in sp[command]._actions for s in a.option_strings}
        assert set(flags) <= have, (command, set(flags) - have)
    # where the command works the default out itself (10s, or a --search trial's 1s)
    for command in ("local", "flows"):
        assert sp[command].get_default("duration") is None


def test_a_field_is_essential_unless_declared_advanced():
    @dataclasses.dataclass(frozen=True)
    class A:
        n: int = opt(1, help="how many")
        buf: int = opt(0, help="socket buffer", advanced=True)
        m: int = opt(2, help="more")
    assert not meta(A, "n").advanced and meta(A, "buf").advanced
    assert essential_and_advanced(A) == (["n", "m"], ["buf"])

    @dataclasses.dataclass(frozen=True)
    class B:
        buf: int = like(A, "buf")                      # taken over with its grouping
        n: int = like(A, "n", advanced=True)           # or changed
    assert meta(B, "buf").advanced and meta(B, "n").advanced and not meta(A, "n").advanced


# what each kind puts first: what runs, where, how long, how much; the tuning knobs after
ESSENTIAL = {"LocalTest": ("test", "size", "rate", "flows", "duration", "host", "port", "lab"),
             "RemoteTest": ("test", "size", "rate", "flows", "duration", "host", "port", "token"),
             "HttpLoad": ("url", "users", "duration", "rate", "method", "lab"),
             "HttpServe": ("host", "port", "size", "duration"),
             "DpdkFlows": ("port", "peer", "mode", "size", "rate", "flows", "duration", "ip", "peer_ip", "netns"),
             "DpdkReflect": ("port", "mode", "duration", "ip", "flows", "netns", "peer"),
             "SocketReflect": ("host", "port", "mode", "flows", "duration", "netns"),
             "DpdkHttpServer": ("port", "ip", "listen", "clients", "payload_size", "keepalive", "duration", "netns"),
             "DpdkHttpClient": ("port", "ip", "clients", "server", "listen", "duration", "cps", "cc", "keepalive",
                                "http_path", "http_method", "payload_size", "netns")}
ADVANCED_SAMPLE = {"batch", "gso", "busy_poll", "loc_cpu_affinity", "loc_sock_buf_size", "burst", "cores", "mss",
                   "tos", "vlan", "lport_range", "retries", "retransmit_timeout", "connect_timeout", "queues"}


@pytest.mark.parametrize("spec", list(SPECS))
def test_every_spec_declares_its_essential_and_advanced_fields(spec):
    essential, advanced = essential_and_advanced(SPECS[spec])
    assert tuple(essential) == ESSENTIAL[spec]
    order = [f.name for f in dataclasses.fields(SPECS[spec])]
    assert sorted(essential + advanced, key=order.index) == order      # every field, once
    assert advanced == sorted(advanced, key=order.index)              # each list in field order
    names = set(order)
    assert ADVANCED_SAMPLE & names <= set(advanced)
