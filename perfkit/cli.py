"""perfkit's command line.

    perfkit local udp_bw --size 64 --duration 10s [--rate 1Mpps] [--flows 4] [--json]
    perfkit flows --port ring:a:0 --peer ring:a:1 --search zero-loss [--rate 5Mpps] [--duration 1s]
    perfkit engines

Bad input exits 2 with one line naming the field; an engine failure exits 1.
"""
from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import os
import sys
import time
from urllib.parse import urlsplit

from perfkit import cluster_cli, dperf, lab, nics, remote
from perfkit.engines import DEFAULT as DEFAULT_ENGINE
from perfkit.engines import dpdk
from perfkit.engines import engines as list_engines
from perfkit.errors import EngineError
from perfkit.fields import meta
from perfkit.ratesearch import parse_criterion, result_text, search, trial_line
from perfkit.report import VERBOSE, JsonPrinter, LinePrinter, conf_text, http_row_line, summary_text, used_params
from perfkit.run import Run
from perfkit.remote import DEFAULT_PORT, Server
from perfkit.kinds import DpdkFlows, DpdkReflect, LocalTest, RemoteTest, SocketReflect, http
from perfkit.spec import (CONTROL_TIMEOUT_S, DPDK_MODES, LOCAL_TESTS, REMOTE_TESTS, _int_in, check_target, check_timeout,
                          check_wait_server)
from perfkit.units import parse_duration, parse_size
from perfkit.version import __version__


class _Parser(argparse.ArgumentParser):
    """Bad arguments: exit 2 with one line, like every other bad input."""

    def error(self, message):
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def _field_option(parser, spec_cls, name: str, **kw):
    """The option for a spec field as the field declares it (perfkit.fields): its flag and
    short option, its help and its default; kw: argparse's own (metavar, type), or the
    default where the command works it out itself (None)."""
    f = next(f for f in dataclasses.fields(spec_cls) if f.name == name)
    m = meta(spec_cls, name)
    flags = [x for x in (m.short, m.flag or "--" + name.replace("_", "-")) if x]
    kw.setdefault("help", m.cli_help or m.help.replace("%", "%%"))
    if f.type == "bool" and f.default is False:
        kw.setdefault("action", "store_true")
    else:
        kw.setdefault("default", f.default)
    return parser.add_argument(*flags, **kw)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="perfkit", description="Network performance tests, native engines.")
    p.add_argument("-V", "--version", action="version", version=f"perfkit {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    loc = sub.add_parser("local", help="run both ends of a test in this process, over loopback")
    loc.add_argument("test", choices=LOCAL_TESTS, help="qperf's test names")
    for name in ("size", "rate", "flows"):
        _field_option(loc, LocalTest, name)
    _field_option(loc, LocalTest, "duration", default=None)   # None: 10s, or a --search trial's 1s
    _count_option(loc)
    _field_option(loc, LocalTest, "host")
    loc.add_argument("--lab", nargs="?", const="", metavar="NAME",
                     help="run the ends in hosts h1 (sender) and h2 of a lab (default: the one that is up)")
    for name in ("port", "batch", "gso"):
        _field_option(loc, LocalTest, name)
    _busy_poll_option(loc, "-rca")
    _ends_options(loc, "the sending end", "the receiving end")
    loc.add_argument("--interval", default="1s", help="row interval (default 1s)")
    loc.add_argument("--engine", default=DEFAULT_ENGINE, help="engine (see perfkit engines)")
    loc.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
    loc.add_argument("-o", "--save", metavar="FILE.parquet", help="save the run as Parquet")

    sub.add_parser("engines", help="list the engines and whether they are available here")

    lab = sub.add_parser("lab", help="test hosts in network namespaces, with impairments (root)")
    lsub = lab.add_subparsers(dest="lab_command", required=True)
    up = lsub.add_parser("up", help="make a lab; it stays up until perfkit lab down")
    up.add_argument("--hosts", type=int, default=2, help="hosts (default 2; more than 2 share a bridge)")
    up.add_argument("--delay", help="one-way delay per link: 10ms")
    up.add_argument("--jitter", help="delay variation (uniform, ±): 1ms")
    up.add_argument("--loss", help="packet loss per link: 1%%")
    up.add_argument("--duplicate", help="duplicated packets: 1%%")
    up.add_argument("--reorder", help="packets sent without the delay (needs --delay): 25%%")
    up.add_argument("--corrupt", help="packets with a flipped bit: 0.1%%")
    up.add_argument("--rate", help="link rate, whole frames: 100mbit, 1Gbit")
    up.add_argument("--mtu", default=1500, help="MTU (default 1500)")
    up.add_argument("--name", help="lab name, 1-8 lowercase letters/digits (default l<block>)")
    st = lsub.add_parser("status", help="the labs that are up, from any process")
    st.add_argument("--json", action="store_true", help="as JSON")
    dn = lsub.add_parser("down", help="take a lab down")
    dn.add_argument("name", nargs="?", help="the lab (default: the only one)")
    dn.add_argument("--all", action="store_true", help="every perfkit namespace, link and lab")

    srv = sub.add_parser("serve", help="the far end of every test, for perfkit test clients")
    srv.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("-lp", "--port", default=DEFAULT_PORT, type=int,
                     help=f"control port, as qperf -lp (default {DEFAULT_PORT})")
    srv.add_argument("--token", help="shared secret, required off loopback (default: $PERFKIT_TOKEN)")
    srv.add_argument("--once", action="store_true", help="exit after the first client")

    tst = sub.add_parser("test", help="qperf-style tests against a perfkit server")
    tst.add_argument("host", help="the server: an IPv4 or IPv6 address or a DNS name")
    tst.add_argument("tests", nargs="+", metavar="TEST",
                     help=f"{' '.join(REMOTE_TESTS)}, conf (both hosts), quit (stop the server)")
    for name in ("duration", "size"):   # -t --time, -m --msg-size
        _field_option(tst, RemoteTest, name)
    _field_option(tst, RemoteTest, "rate")
    _field_option(tst, RemoteTest, "flows")
    _count_option(tst)
    _field_option(tst, RemoteTest, "wait_server", metavar="TIME")
    tst.add_argument("-to", "--timeout", metavar="TIME",
                     help="both of the below, as qperf -to (default 30s; qperf's is 5s)")
    tst.add_argument("-lto", "--loc-timeout", metavar="TIME",
                     help="wait this long for the server's answer to a control request, as qperf -lto")
    tst.add_argument("-rto", "--rem-timeout", metavar="TIME",
                     help="the server waits this long for this host's next control message, as qperf -rto")
    _field_option(tst, RemoteTest, "ip_port", metavar="PORT")
    _field_option(tst, RemoteTest, "flip")
    tst.add_argument("-ub", "--use-bits-per-sec", action="store_true",
                     help="bandwidth in bits/s (Gb/sec), as qperf -ub")
    tst.add_argument("-uu", "--unify-units", action="store_true",
                     help="whole numbers in base units (bytes/sec, ns), as qperf -uu")
    tst.add_argument("-e", "--precision", default=3, metavar="DIGITS",
                     help="significant digits in the summary, as qperf -e (default 3)")
    tst.add_argument("-un", "--unify-nodes", action="store_true",
                     help="a bandwidth test's two ends named loc_ and rem_ (this host, the server) "
                          "rather than send_ and recv_, as qperf -un")
    _verbose_options(tst)
    tst.add_argument("-oo", "--oo", action="append", default=[], metavar="OPT:FROM:TO:STEP",
                     help="sweep an option, as qperf: msg_size:1:64K:*2, rate:100kpps:1Mpps:+100kpps, "
                          "no_msgs:1000:100000:*10")
    _field_option(tst, RemoteTest, "port", type=int)
    _field_option(tst, RemoteTest, "token")
    _field_option(tst, RemoteTest, "gso")
    _busy_poll_option(tst, "-rca, or -lca with -f1")
    _ends_options(tst, "this host's worker", "the server's worker")
    tst.add_argument("--interval", default="1s", help="row interval with --json (default 1s)")
    tst.add_argument("--json", action="store_true", help="JSON lines: rows, then a summary per test")

    flw = sub.add_parser("flows", help="UDP flows from a DPDK port (generator; a peer port receives or reflects)")
    flw.add_argument("--engine", default="dpdk", help="dpdk (default), or socket: UDP flows between kernel "
                     "sockets on loopback (or --lab), both ends in this process (--size, --rate, --flows, "
                     "--duration, --mode)")
    flw.add_argument("--lab", help="socket engine: send from this lab's h1 to its h2")
    _field_option(flw, DpdkFlows, "port", default=None)   # no default port: perfkit flows asks for one
    for name in ("peer", "mode", "size", "rate", "flows"):
        _field_option(flw, DpdkFlows, name)
    _field_option(flw, DpdkFlows, "duration", default=None)   # None: 10s, or a --search trial's 1s
    for name in ("ip", "peer_ip", "dst_mac", "sport", "dport", "burst", "src_ips", "dst_ips", "sports", "dports",
                 "sizes", "ramp_to", "ramp_time", "probe_rate", "probe_size", "bidirectional"):
        _field_option(flw, DpdkFlows, name)
    rfl = sub.add_parser("reflect", help="the far end of DPDK flows on one port (rxonly or reverse), or a "
                         "forwarder between two ports (forward)")
    rfl.add_argument("--engine", default="dpdk", help="dpdk (default), or socket: a kernel UDP socket on "
                     "--ip:--udp-port (rxonly or reverse; --netns for a lab host)")
    _field_option(rfl, DpdkReflect, "port", default=None)   # no default port: perfkit reflect asks for one
    _field_option(rfl, SocketReflect, "port")                # --udp-port
    for name in ("mode", "peer", "dst_mac", "peer_dst_mac", "duration"):
        _field_option(rfl, DpdkReflect, name)
    _field_option(rfl, DpdkReflect, "ip", default=None)      # the engine's own: DPDK's or the socket's
    for name in ("flows", "burst", "ips"):
        _field_option(rfl, DpdkReflect, name)
    for sp in (flw, rfl):
        _field_option(sp, DpdkFlows, "cores")
        _field_option(sp, DpdkFlows, "netns")
        sp.add_argument("--mem", default=512, help="EAL memory in MB (default 512)")
        sp.add_argument("--hugepages", default="auto", help="auto, on or off (default auto: on where enough are free)")
        sp.add_argument("--cpus", help="pin the datapath workers to these CPUs: 1 or 0,1 (default: not pinned)")
        sp.add_argument("--log-level", default="error", help="DPDK log level on stderr (default error)")
        sp.add_argument("--pmd-dir", help="also load the PMD plugins in this directory (EAL's -d)")
        sp.add_argument("--interval", default="1s", help="row interval (default 1s)")
        sp.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
        sp.add_argument("-o", "--save", metavar="FILE.parquet", help="save the run as Parquet")
    p.test_parser = tst  # qperf takes options between test names: parsed intermixed in main()
    for sp in (loc, flw):
        _search_args(sp)

    http.add_cli(sub, _field_option)   # perfkit http, perfkit http-serve: the HTTP kind's commands
    _dperf_parser(sub)  # issue 6
    _nics_parser(sub)
    cluster_cli.add_parser(sub)
    return p


SEARCH_HELP = ("rate search: the highest rate holding CRITERION, by binary search over trials: "
               "zero-loss (RFC 2544 throughput), pdr:0.1%% (tolerated loss), lat:p99<50us "
               "(p50 p90 p99 p999 max mean), cpu or cpu:95%% (an engine worker saturates); join with ','. "
               "--rate is then the upper bound (default: measured by an unpaced first trial), "
               "--duration the length of each trial (default 1s); udp_bw only for perfkit local")


def _search_args(sp) -> None:
    sp.add_argument("--search", metavar="CRITERION", help=SEARCH_HELP)
    sp.add_argument("--low", help="--search: lower bound (default 1%% of the upper)")
    sp.add_argument("--resolution", default="1%",
                    help="--search: stop when pass and failure are this close: 1%% of the upper bound "
                         "(default) or a rate (10kpps)")
    sp.add_argument("--max-trials", default=16, help="--search: at most this many trials (default 16)")
    sp.add_argument("--settle", default="0.5s", help="--search: pause between trials (default 0.5s)")
    sp.add_argument("--retries", default=0, help="--search: run a failed trial again up to N times "
                    "(default 0); the rate passes if one attempt does")


def _search(a, spec, engine: str) -> int:
    """--search: trials printed as they finish (or JSON lines), then the rate found."""
    crit = parse_criterion(a.search)
    try:
        max_trials = int(str(a.max_trials), 10)
    except ValueError:
        raise ValueError(f"max_trials: {a.max_trials!r} is not a whole number") from None
    try:
        retries = int(str(a.retries), 10)
    except ValueError:
        raise ValueError(f"retries: {a.retries!r} is not a whole number") from None
    trial = a.duration if a.duration is not None else "1s"
    if a.save:
        raise ValueError("save: -o saves one run; a search keeps its trials: use --json")

    def show(row):
        print(json.dumps({"trial": row}) if a.json else trial_line(row), flush=True)

    if not a.json:
        print(f"perfkit search {crit.text} ({crit.describe()}): {type(spec).__name__} on the {engine} engine, "
              f"upper bound {spec.rate or 'measured unpaced'}, {trial} trials", flush=True)
    res = search(dataclasses.replace(spec, rate=None), crit, high=spec.rate, low=a.low, resolution=a.resolution,
                 max_trials=max_trials, trial=trial, settle=a.settle, retries=retries, engine=engine, progress=show)
    print(json.dumps({"search": res.to_dict()}) if a.json else result_text(res), flush=True)
    if res.error:
        print(f"perfkit: error: {res.error}", file=sys.stderr)
        return 1
    return 130 if res.stopped == "interrupted" else 0


def _run_printed(spec, a, line) -> int:
    """Run spec with one printed row per interval, then its summary; exit status."""
    printer = JsonPrinter() if a.json else LinePrinter(line=line)
    run = Run(spec, interval=parse_duration(a.interval, "interval"), subscribers=(printer,))
    run.start()
    interrupted = False
    try:
        run.wait()
    except KeyboardInterrupt:
        interrupted = True
    except EngineError:
        pass
    if a.json:
        printer.summary(run.summary)
    else:
        print(summary_text(run.summary))
    if getattr(a, "save", None):
        run.save(a.save)
    if run.error:
        print(f"perfkit: error: {run.error}", file=sys.stderr)
        return 1
    return 130 if interrupted else 0


def _say_target(written, address) -> None:
    """A name given as the target: the address it resolved to, before anything runs."""
    try:
        ipaddress.ip_address(str(written).strip().strip("[]"))
        return   # an address: the run's own lines show it
    except ValueError:
        print(f"perfkit: {str(written).strip()} is {address}", file=sys.stderr, flush=True)


def _warn_flood(what: str, target) -> None:
    """One line naming where an unpaced flood (or a SYN flood) goes, before it starts; nothing waits."""
    print(f"perfkit: warning: {what} to {target}", file=sys.stderr, flush=True)


def _off_loopback(address: str) -> bool:
    return not ipaddress.ip_address(address).is_loopback


def _http(a) -> int:
    """perfkit http and perfkit http-serve: the HTTP kind makes the spec and its first line."""
    spec = http.CLI_SPECS[a.command](a)
    if a.command == "http":   # a client: the name it was given and where that went
        _say_target(urlsplit(spec.urls[0]).hostname, spec.target()[0])
    if not a.json:
        print(http.cli_header(spec), flush=True)
    return _run_printed(spec, a, http_row_line)


def _serve(a) -> int:
    server = Server(a.bind, a.port, a.token, a.once)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
    return 0


VERBOSE_HELP = {"conf": "configuration (the socket tests have none beyond the conf test, as in qperf)",
                "stat": "statistics: -vs the message rate (shown anyway), -vvs each end's bytes and messages",
                "time": "timing: -vt CPU use and cost (shown anyway), -vvt each end's user and kernel "
                        "shares, real and CPU time",
                "used": "parameters used: -vu the time, -vvu every parameter set"}


def _verbose_options(parser) -> None:
    """qperf's -v family: -v turns on -vc -vs -vt -vu; -vv their -vv forms."""
    parser.add_argument("-v", "--verbose", action="store_true", help="all four below, as qperf -v")
    parser.add_argument("-vv", "--verbose-more", action="store_true", help="all four -vv forms, as qperf -vv")
    for kind in VERBOSE:
        parser.add_argument(f"-v{kind[0]}", f"--verbose-{kind}", action="store_true",
                            help=f"{VERBOSE_HELP[kind]}, as qperf -v{kind[0]}")
        parser.add_argument(f"-vv{kind[0]}", f"--verbose-more-{kind}", action="store_true",
                            help=f"as qperf -vv{kind[0]}")


def _verbose(a) -> dict:
    """{kind: 0, 1 or 2} from the -v family."""
    return {kind: 2 if a.verbose_more or getattr(a, f"verbose_more_{kind}")
            else 1 if a.verbose or getattr(a, f"verbose_{kind}") else 0
            for kind in VERBOSE}


def _count_option(parser) -> None:
    parser.add_argument("-n", "--no-msgs", metavar="N",
                        help="end after N messages (latency tests: round trips), as qperf -n; "
                             "the time limit still holds (default: no count)")


def _ends_options(parser, loc: str, rem: str) -> None:
    """qperf's options for each end (CPU affinity, socket buffers, reading the data), with its
    short names."""
    parser.add_argument("-lca", "--loc-cpu-affinity", metavar="CPU",
                        help=f"pin {loc} to this CPU, as qperf -lca (default: any)")
    parser.add_argument("-rca", "--rem-cpu-affinity", metavar="CPU",
                        help=f"pin {rem} to this CPU, as qperf -rca (default: any)")
    parser.add_argument("-ca", "--cpu-affinity", metavar="CPU", help="both of the above, as qperf -ca")


    parser.add_argument("-lsb", "--loc-sock-buf-size", metavar="SIZE",
                        help=f"socket buffers of {loc}'s socket, as qperf -lsb: 64K (default: 8 MiB; "
                             "a TCP sender or pinger: the kernel's autotuning)")
    parser.add_argument("-rsb", "--rem-sock-buf-size", metavar="SIZE",
                        help=f"socket buffers of {rem}'s socket, as qperf -rsb (default 8 MiB)")
    parser.add_argument("-sb", "--sock-buf-size", metavar="SIZE", help="both of the above, as qperf -sb")
    parser.add_argument("-ar", "-ar1", "--access-recv", nargs="?", const="1", default="0", choices=("0", "1"),
                        metavar="0|1", help="1: both ends read every byte they receive, as an application "
                        "would, as qperf -ar (-ar1 and -ar alone: 1; default 0: the data is not looked at)")


def _busy_poll_option(parser, pinned: str) -> None:
    parser.add_argument("--busy-poll", nargs="?", const="1", default=None, choices=("0", "1"), metavar="0|1",
                        help="1: spin on the socket before sleeping (latency tests: both ends, up to 1 ms; "
                             f"bandwidth tests: the receiving end, 50 us); 0: never, as qperf (default: where pinned, both ends of a "
                             f"latency test (-lca, -rca: two CPUs); {pinned}: a udp_bw receiver off loopback and a tcp_bw "
                             "reader of 16 KiB or bigger messages spin)")


def _busy_poll(a) -> bool | None:
    return None if a.busy_poll is None else a.busy_poll == "1"


def _ends(a) -> dict:
    """-ca and -sb set both ends; -lca/-rca and -lsb/-rsb override them for their end."""
    def pick(own, both):
        return own if own is not None else both
    return {"loc_cpu_affinity": pick(a.loc_cpu_affinity, a.cpu_affinity),
            "rem_cpu_affinity": pick(a.rem_cpu_affinity, a.cpu_affinity),
            "loc_sock_buf_size": pick(a.loc_sock_buf_size, a.sock_buf_size),
            "rem_sock_buf_size": pick(a.rem_sock_buf_size, a.sock_buf_size),
            "access_recv": a.access_recv == "1"}


def _test(a) -> int:
    host = check_target(a.host)
    _say_target(a.host, host)
    data_tests = [t for t in a.tests if t not in ("conf", "quit")]
    unknown = [t for t in data_tests if t not in REMOTE_TESTS]
    if unknown:
        raise ValueError(f"test: {unknown[0]!r} is not one of {', '.join(REMOTE_TESTS)}, conf, quit")
    wait = check_wait_server(a.wait_server)   # conf and quit use it too
    timeouts = {end: check_timeout(own if own is not None else a.timeout if a.timeout is not None
                                   else CONTROL_TIMEOUT_S, end)
                for end, own in (("loc_timeout", a.loc_timeout), ("rem_timeout", a.rem_timeout))}
    fields = {"size": a.msg_size, "rate": a.rate, "flows": a.flows, "gso": a.gso, "busy_poll": _busy_poll(a),
              "messages": a.no_msgs, "flip": a.flip, "wait_server": wait, "ip_port": a.ip_port,
              **timeouts, **_ends(a)}
    sweep = dict(o.split(":", 1) if ":" in o else (o, "") for o in a.oo)
    interval = parse_duration(a.interval, "interval")
    digits = _int_in(a.precision, "precision", 1, 15)
    printer = JsonPrinter() if a.json else None
    verbose = _verbose(a)
    todo = {t: [] for t in data_tests}  # every spec is checked here, before anything runs
    for t, point, spec in remote.plan(host, *data_tests, time=a.time, sweep=sweep, port=a.port,
                                      token=a.token, **fields):
        todo[t].append((point, spec))
    if any(sp.rate is None for _, sp in todo.get("udp_bw", [])) and _off_loopback(host):
        _warn_flood("udp_bw with no rate sends as fast as it can", host)
    for name in a.tests:
        if name == "conf":
            both = remote.conf(host, a.port, a.token, wait, timeouts["loc_timeout"])
            print(json.dumps({"conf": both}) if a.json else conf_text(both), flush=True)
        elif name == "quit":
            remote.quit_server(host, a.port, a.token, wait, timeouts["loc_timeout"])
            print(json.dumps({"quit": host}) if a.json else "quit:\n    server stopped", flush=True)
        else:
            for point, spec in todo[name]:
                run = Run(spec, interval=interval, subscribers=(printer,) if printer else ())
                run.start()
                try:
                    run.wait()
                except EngineError:
                    pass  # reported below
                if a.json:
                    printer.summary({"test": name, **point, **run.summary})
                else:
                    used = {k: v for k, v in used_params(spec).items() if k not in point}
                    print(summary_text(run.summary, point, bits=a.use_bits_per_sec, digits=digits,
                                       unify=a.unify_units, verbose=verbose, unify_nodes=a.unify_nodes,
                                       used=used), flush=True)
                if run.error:
                    print(f"perfkit: error: {run.error}", file=sys.stderr)
                    return 1
    return 0


def _the_lab(name):
    """--lab NAME, or --lab alone: the one lab that is up."""
    if name is None or name:
        return name
    up = sorted(s["name"] for s in lab.status() if s.get("status") == "up")
    if len(up) != 1:
        raise ValueError(f"lab: {len(up)} labs are up ({', '.join(up) or 'none: perfkit lab up'}); "
                         "name one with --lab NAME")
    return up[0]


def _local(a) -> int:
    spec = LocalTest(test=a.test, size=a.size, rate=a.rate, flows=a.flows, duration=a.duration or "10s",
                     host=a.host, port=a.port, batch=a.batch, gso=a.gso,
                     busy_poll=_busy_poll(a), lab=_the_lab(a.lab), messages=a.no_msgs, **_ends(a))
    if spec.lab is None:
        _say_target(a.host, spec.host)
    if a.search is not None:
        if spec.messages is not None:
            raise ValueError("no_msgs: -n does not go with --search (each trial runs for its time)")
        return _search(a, spec, a.engine)
    if spec.test == "udp_bw" and spec.rate is None and spec.lab is None and _off_loopback(spec.host):
        _warn_flood("udp_bw with no --rate sends as fast as it can", spec.host)
    interval = parse_duration(a.interval, "interval")
    printer = JsonPrinter() if a.json else LinePrinter()
    run = Run(spec, engine=a.engine, interval=interval, subscribers=(printer,))
    run.start()  # a bad engine or a failed start raises here: one line, nothing ran
    if not a.json:
        print(f"perfkit local {spec.test}: {spec.size} B, {spec.rate or 'unlimited'}, "
              f"{spec.flows} flow(s), {spec.duration:g} s"
              f"{f' or {spec.messages:,} messages' if spec.messages else ''} on "
              f"{'lab ' + spec.lab + ' (h1 -> h2)' if spec.lab else spec.host} ({a.engine} engine)", flush=True)
    interrupted = False
    try:
        run.wait()
    except KeyboardInterrupt:
        interrupted = True
    except EngineError:
        pass  # a worker failed: the rows so far and the error are reported below
    return _run_done(a, run, printer, interrupted, summary_text(run.summary))


def _lab(a) -> int:
    try:
        if a.lab_command == "up":
            made = lab.Lab(hosts=a.hosts, delay=a.delay, jitter=a.jitter, loss=a.loss,
                           duplicate=a.duplicate, reorder=a.reorder, corrupt=a.corrupt,
                           rate=a.rate, mtu=a.mtu, name=a.name).up()
            print(lab.status_text([s for s in lab.status() if s["name"] == made.name]))
            return 0
        if a.lab_command == "status":
            labs = lab.status()
            print(json.dumps(labs, indent=2) if a.json else lab.status_text(labs))
            return 0
        if a.lab_command == "down":
            if a.all:
                gone = lab.down_all()
                print(f"removed: {', '.join(gone)}" if gone else "no perfkit labs")
                return 0
            name = a.name
            if name is None:
                names = sorted({s["name"] for s in lab.status()})
                if len(names) != 1:
                    raise ValueError(f"name: {len(names)} labs are up ({', '.join(names) or 'none'}): "
                                     "name one, or use --all")
                name = names[0]
            if not lab.down(name):
                raise ValueError(f"name: no lab {name!r}")
            print(f"{name}: down")
            return 0
    except (PermissionError, lab.LabError, TimeoutError) as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 1
    return 2


def _dpdk_eal(a) -> None:
    """EAL options from the command line (checked before anything starts)."""
    huge = {"auto": None, "on": True, "off": False}.get(str(a.hugepages).lower(), "bad")
    if huge == "bad":
        raise ValueError(f"hugepages: {a.hugepages!r} is not auto, on or off")
    try:
        mem = int(str(a.mem), 10)
    except ValueError:
        raise ValueError(f"mem: {a.mem!r} is not a whole number of MB") from None
    dpdk.configure(dpdk.EalOptions(memory_mb=mem, hugepages=huge, log_level=a.log_level,
                                   worker_cpus=a.cpus, pmd_dir=getattr(a, "pmd_dir", None)))


def _dpdk_run(a, spec, header: str, flood: tuple | None = None):
    """Run a DPDK spec as perfkit local runs a test: rows, then a summary; flood: (what,
    target) of an unpaced flood, said once everything is checked, before it starts."""
    if a.engine != "dpdk":
        raise ValueError(f"engine: {a.engine!r}: perfkit {a.command} runs on the dpdk or the socket engine")
    _dpdk_eal(a)
    interval = parse_duration(a.interval, "interval")
    printer = JsonPrinter() if a.json else LinePrinter()
    run = Run(spec, engine="dpdk", interval=interval, subscribers=(printer,))
    if flood:
        _warn_flood(*flood)
    run.start()  # EAL, ports: a failure raises here, one line, nothing ran
    if not a.json:
        print(header, flush=True)
    interrupted = False
    try:
        run.wait()
    except KeyboardInterrupt:
        interrupted = True
    except EngineError:
        pass  # reported below
    return run, printer, interrupted


def _run_done(a, run, printer, interrupted, text: str) -> int:
    """The end of a run on the command line: its summary, --save, the exit status."""
    if a.json:
        printer.summary(run.summary)
    else:
        print(text)
    if a.save:
        run.save(a.save)
    if run.error:
        print(f"perfkit: error: {run.error}", file=sys.stderr)
        return 1
    return 130 if interrupted else 0


def _frames_text(spec) -> str:
    if spec.sizes is None:
        return f"{spec.size} B frames"
    mix = ",".join(f"{s}:{w}" for s, w in spec.sizes)
    return f"frames of {mix} (mean {spec.mean_size:.1f} B)"


# DpdkFlows options the socket engine has no counterpart for (their defaults: the fields')
_DPDK_ONLY_FLOWS = ("port", "peer", "dst_mac", "sizes", "ramp_to", "ramp_time", "probe_rate", "bidirectional",
                    "src_ips", "dst_ips", "sports", "dports", "netns", "ip", "peer_ip", "sport", "dport", "burst",
                    "cores")
_ETH_IP_UDP_FCS = 14 + 20 + 8 + 4   # a frame's bytes around its UDP payload


def _socket_flows(a) -> int:
    """perfkit flows --engine socket: the same flows on kernel sockets, both ends here."""
    defaults = {**{f.name: f.default for f in dataclasses.fields(DpdkFlows)}, "port": None}   # --port has none
    given = [k for k in _DPDK_ONLY_FLOWS if getattr(a, k, defaults[k]) not in (defaults[k], str(defaults[k]))]
    if given:
        raise ValueError(f"{given[0].replace('_', '-')}: the socket engine has no such option (dpdk engine only); "
                         "it sends --flows UDP flows of --size at --rate for --duration, --mode rxonly or reverse")
    if a.mode not in DPDK_MODES:
        raise ValueError(f"mode: {a.mode!r} is not one of {', '.join(DPDK_MODES)}")
    frame = parse_size(a.size, "size")
    if frame <= _ETH_IP_UDP_FCS:
        raise ValueError(f"size: a {frame} B frame has no UDP payload (frames are above {_ETH_IP_UDP_FCS} B)")
    spec = LocalTest(test="udp_bw" if a.mode == "rxonly" else "udp_lat", size=frame - _ETH_IP_UDP_FCS,
                     rate=a.rate, flows=a.flows if a.mode == "rxonly" else 1, duration=a.duration or "10s",
                     lab=_the_lab(a.lab))
    if a.mode == "reverse" and str(a.flows) != "1":
        raise ValueError("flows: reverse mode on the socket engine is one ping-pong flow (udp_lat)")
    if a.search is not None:
        return _search(a, spec, "socket")
    if not a.json:
        print(f"perfkit flows: {frame} B frames ({spec.size} B UDP payload), {spec.rate or 'unlimited'}, "
              f"{spec.flows} flow(s), {spec.duration:g} s, {a.mode}, on "
              f"{'lab ' + spec.lab + ' (h1 -> h2)' if spec.lab else spec.host} (socket engine)", flush=True)
    return _run_printed(spec, a, None)


def _flows(a) -> int:
    if a.engine == "socket":
        return _socket_flows(a)
    if a.lab:
        raise ValueError("lab: the dpdk engine takes a lab host's namespace as --netns, with an af_packet port")
    if not a.port:
        raise ValueError("port: give the DPDK port (--port ring:NAME:0, net_null0, net_memif0,..., "
                         "net_af_packet0,iface=IF)")
    spec = DpdkFlows(port=a.port, peer=a.peer, mode=a.mode, size=a.size, rate=a.rate, flows=a.flows,
                     duration=a.duration or "10s", ip=a.ip, peer_ip=a.peer_ip, dst_mac=a.dst_mac, sport=a.sport,
                     dport=a.dport, burst=a.burst, netns=a.netns, src_ips=a.src_ips, dst_ips=a.dst_ips,
                     sports=a.sports, dports=a.dports, sizes=a.sizes, ramp_to=a.ramp_to,
                     ramp_time=a.ramp_time, cores=a.cores, probe_rate=a.probe_rate, probe_size=a.probe_size,
                     bidirectional=a.bidirectional)
    if a.search is not None:
        if a.engine != "dpdk":
            raise ValueError(f"engine: {a.engine!r}: perfkit flows runs on the dpdk or the socket engine")
        _dpdk_eal(a)
        return _search(a, spec, "dpdk")
    far = f"{spec.peer} ({spec.mode})" if spec.peer else f"{spec.peer_ip} ({spec.mode}, elsewhere)"
    run, printer, interrupted = _dpdk_run(
        a, spec, f"perfkit flows: {_frames_text(spec)}, {spec.rate or 'unlimited'}"
                 f"{f' rising to {spec.ramp_to} over {spec.ramp_time:g} s' if spec.ramp_to else ''}, {spec.flows} flow(s), "
                 f"{spec.duration:g} s from {spec.port} to {far} (dpdk engine)",
        (f"flows with no --rate send as fast as {spec.port} goes", spec.peer_ip)
        if spec.rate is None and spec.peer is None else None)
    text = summary_text(run.summary) if run.summary else ""
    s = run.summary or {}
    if s.get("lat_p9999_us") is not None:
        text += f"\n    {'lat p99.99':<13} =  {s['lat_p9999_us']:.1f} us"
    if s.get("probe_tx"):
        f = lambda v: "-" if v is None else f"{v:.1f} us"  # noqa: E731
        text += (f"\n    {'probe lat':<13} =  p50 {f(s['probe_lat_p50_us'])}  p99 {f(s['probe_lat_p99_us'])}"
                 f"  max {f(s['probe_lat_max_us'])} ({s['probe_rx']} of {s['probe_tx']} probes)")
    for w in s.get("warnings", ()):   # e.g. ARP for the destination unanswered: what to check
        print(f"perfkit: warning: {w}", file=sys.stderr)
    return _run_done(a, run, printer, interrupted, text)


def _reflect_text(run) -> str:
    s, last = run.summary or {}, (run.rows[-1] if run.rows else {})
    secs = last.get("time_s") or 0.0
    lines = [f"{s.get('test', 'reflect')}:"]
    for name, value in (("received", s.get("pkts_rx", 0)), ("sent back", s.get("pkts_tx", 0)),
                        ("udp", last.get("udp_rx", 0)), ("arp", last.get("arp_rx", 0)),
                        ("icmp", last.get("icmp_rx", 0)), ("other", last.get("other_rx", 0)),
                        ("malformed", last.get("bad_rx", 0)), ("drop_tx", s.get("drop_tx", 0))):
        lines.append(f"    {name:<13} =  {round(value):,}")
    if secs:
        lines.append(f"    {'rx_rate':<13} =  {s.get('pkts_rx', 0) / secs:,.0f} /sec over {secs:.3g} s")
    if s.get("lost") or s.get("dup") or s.get("reorder"):
        lines.append(f"    {'seq':<13} =  {s['lost']:,} lost, {s['dup']:,} dup, {s['reorder']:,} reordered")
    if s.get("lat_count"):
        lines.append(f"    {'lat':<13} =  one-way p50 {s['lat_p50_us']:.3g} us  p99 {s['lat_p99_us']:.3g} us")
    return "\n".join(lines)


def _forward_text(run) -> str:
    s, last = run.summary or {}, (run.rows[-1] if run.rows else {})
    secs = last.get("time_s") or 0.0
    lines = [f"{s.get('test', 'dpdk_forward')}:"]
    for d in s.get("forward", []):
        rate = f", {d['fwd'] / secs:,.0f} /sec over {secs:.3g} s" if secs else ""
        lines.append(f"    {d['from']} -> {d['to']}:")
        lines.append(f"        received {d['rx']:,}  forwarded {d['fwd']:,}  drop_tx {d['drop_tx']:,}  "
                     f"malformed {d['bad_rx']:,}{rate}")
        lines.append(f"        nic ({d['from']}): imissed {d['nic_imissed']:,}  ierrors {d['nic_ierrors']:,}  "
                     f"oerrors {d['nic_oerrors']:,}")
    return "\n".join(lines)


def _socket_reflect(a) -> int:
    for k, default in (("port", None), ("peer", None), ("dst_mac", None), ("peer_dst_mac", None)):
        if getattr(a, k) != default:
            raise ValueError(f"{k.replace('_', '-')}: a DPDK option; the socket engine serves --ip:--udp-port")
    spec = SocketReflect(host=a.ip or "127.0.0.1", port=a.udp_port, mode=a.mode, flows=a.flows,
                         duration=a.duration, netns=a.netns)
    if not a.json:
        print(f"perfkit reflect: {spec.mode} on udp {spec.host}:{spec.port}"
              f"{' in ' + spec.netns if spec.netns else ''} for {spec.duration:g} s (socket engine)", flush=True)
    return _run_printed(spec, a, None)


def _reflect(a) -> int:
    if a.engine == "socket":
        return _socket_reflect(a)
    if not a.port:
        raise ValueError("port: give the DPDK port (--port ring:NAME:1, net_memif0,..., net_af_packet0,iface=IF)")
    spec = DpdkReflect(port=a.port, mode=a.mode, duration=a.duration, ip=a.ip or "198.18.0.2", flows=a.flows,
                       burst=a.burst, netns=a.netns, ips=a.ips, cores=a.cores, peer=a.peer,
                       dst_mac=a.dst_mac, peer_dst_mac=a.peer_dst_mac)
    where = (f"between {spec.port} and {spec.peer}" if spec.mode == "forward" else f"on {spec.port} ({spec.ip})")
    run, printer, interrupted = _dpdk_run(
        a, spec, f"perfkit reflect: {spec.mode} {where} for {spec.duration:g} s (dpdk engine)")
    text = _forward_text(run) if spec.mode == "forward" else _reflect_text(run)
    return _run_done(a, run, printer, interrupted, text)


def _engines(a) -> int:
    print(json.dumps(list_engines(), indent=2))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    if argv[:1] == ["test"]:
        a = parser.test_parser.parse_intermixed_args(argv[1:])
        a.command = "test"
    else:
        a = parser.parse_args(argv)
    commands = {"local": _local, "engines": _engines, "lab": _lab, "serve": _serve, "test": _test,
                "http": _http, "http-serve": _http, "flows": _flows, "reflect": _reflect, "dperf": _dperf,
                "nics": _nics, "cluster": cluster_cli.run}
    if a.command not in commands:
        return 2
    try:
        return commands[a.command](a)
    except ValueError as exc:
        print(f"perfkit: {exc}", file=sys.stderr)
        return 2
    except EngineError as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


# ------------------------------------------------------------------ perfkit dperf (issue 6)

def _dperf_parser(sub) -> None:
    dp = sub.add_parser("dperf", help="run dperf configuration files on perfkit's DPDK TCP")
    dp.add_argument("-c", "--conf", required=True, action="append", metavar="FILE.conf",
                    help="dperf's configuration file; give a server and a client conf to run both "
                         "in this process (over a ring:NAME:0|1 pair)")
    dp.add_argument("--netns", help="open the port in this network namespace (af_packet: a lab host's)")
    dp.add_argument("--mem", default=512, help="EAL memory in MB (default 512)")
    dp.add_argument("--hugepages", default="auto", help="auto, on or off (default auto)")
    dp.add_argument("--cpus", help="pin the workers to these CPUs (the conf's cpu line is not used)")
    dp.add_argument("--log-level", default="error", help="DPDK log level on stderr (default error)")
    dp.add_argument("--interval", default="1s", help="row interval (default 1s)")
    dp.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
    dp.add_argument("-o", "--save", metavar="FILE.parquet", help="save the run as Parquet (one conf)")


def _dperf(a) -> int:
    """Each conf is one run; with a server and a client, the server starts first and
    stops once every client has finished. Per-second blocks (dperf's layout) for one
    conf; at the end dperf's totals and perfkit's summary for each."""
    cfgs = []
    for path in a.conf:
        if not os.path.exists(path):
            raise ValueError(f"conf: {path}: no such file")
        cfgs.append(dperf.load(path))
    specs = [c.to_spec(netns=a.netns) for c in cfgs]
    if a.save and len(specs) > 1:
        raise ValueError("save: one conf per saved run")
    _dpdk_eal(a)
    interval = parse_duration(a.interval, "interval")
    order = sorted(range(len(cfgs)), key=lambda i: cfgs[i].mode != "server")  # servers first
    runs = [None] * len(cfgs)
    printers = []
    for i in order:
        quiet = a.json or cfgs[i].quiet or len(cfgs) > 1
        if a.json:
            printer = JsonPrinter()
        else:
            printer = (lambda row: None) if quiet else (lambda row: print(dperf.seconds_block(row), flush=True))
        printers.append(printer)
        runs[i] = Run(specs[i], interval=interval, subscribers=(printer,))
        if getattr(specs[i], "flood", False):
            _warn_flood(f"{a.conf[i]}: a SYN flood at {specs[i].cps:g} connections/s", specs[i].server)
        if not a.json:
            print(f"perfkit dperf: {cfgs[i].mode} from {a.conf[i]} on {specs[i].port} ({specs[i].ip}) "
                  f"for {specs[i].duration:g} s (dpdk_tcp engine)", flush=True)
        try:
            runs[i].start()
        except BaseException:
            for r in runs:
                if r is not None and r is not runs[i] and r._thread is not None:
                    r.stop()
                    r.wait()
            raise
    interrupted = False
    try:
        clients = [r for r, c in zip(runs, cfgs) if c.mode == "client"]
        for r in clients:
            r.wait()
        if clients:
            time.sleep(0.3)  # the servers' last ACKs
            for r, c in zip(runs, cfgs):
                if c.mode == "server":
                    r.stop()
        for r in runs:
            r.wait()
    except KeyboardInterrupt:
        interrupted = True
        for r in runs:
            r.stop()
        for r in runs:
            r._done.wait()
    except EngineError:
        for r in runs:
            r.stop()
        for r in runs:
            r._done.wait()
    status = 130 if interrupted else 0
    for i, r in enumerate(runs):
        last = r.rows[-1] if r.rows else {}
        if a.json:
            JsonPrinter().summary({**(r.summary or {}), "conf": a.conf[i]})
        else:
            if len(runs) > 1:
                print(f"\n{a.conf[i]} ({cfgs[i].mode}):")
            print(dperf.total_block(last))
            print(dperf.summary_lines(last, r.summary or {}))
        if r.error:
            print(f"perfkit: error: {a.conf[i]}: {r.error}", file=sys.stderr)
            status = 1
    if a.save:
        runs[0].save(a.save)
    return status

def _nics_parser(sub) -> None:
    n = sub.add_parser("nics", help="this host's network devices (sysfs) and whether DPDK can take each")
    n.add_argument("--json", action="store_true", help="one JSON document instead of the table")


def _nics(a) -> int:
    rep = nics.report()
    print(nics.to_json(rep) if a.json else nics.text(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
