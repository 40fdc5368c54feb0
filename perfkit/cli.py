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
import tempfile
import time
from urllib.parse import urlsplit

from perfkit import cluster_cli, converge_cli, dperf, lab, nics, remote, rfc2544_cli
from perfkit.engines import dpdk
from perfkit.engines import check_name as check_engine_name, engines as list_engines
from perfkit.cgroups import LIMITS, parse_limits
from perfkit.errors import EngineError
from perfkit.fields import applies, check_applies, int_arg, whole_number
from perfkit.kinds import KINDS, dpdk_tcp, dpdk_udp, http, qperf
from perfkit.ladder import ladder, plan as ladder_plan, table_text as ladder_text
from perfkit.ratesearch import parse_criterion, result_text, search, trial_line
from perfkit.hostmetrics import parse_watch
from perfkit.report import VERBOSE, JsonPrinter, LinePrinter, conf_text, http_row_line, stages_text, summary_text, used_params
from perfkit.run import Run
from perfkit.remote import DEFAULT_PORT, Server
from perfkit.spec import check_target
from perfkit.thresholds import parse_all as parse_thresholds
from perfkit.units import parse_duration, parse_int, parse_size
from perfkit.version import __version__


class _Parser(argparse.ArgumentParser):
    """Bad arguments: exit 2 with one line, like every other bad input. It keeps the options
    added to it and to its groups (options) and its subcommands (subcommands), for check_options."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.options, self.subcommands = [], None
        _track(self, self.options)

    def add_subparsers(self, **kw):
        self.subcommands = super().add_subparsers(**kw)
        return self.subcommands

    def error(self, message):
        print(f"{self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def _track(container, options: list):
    """Every option added to container, or to a group of it, goes into options too."""
    add, group, mutex = container.add_argument, container.add_argument_group, container.add_mutually_exclusive_group

    def add_argument(*args, **kw):
        action = add(*args, **kw)
        options.append(action)
        return action
    container.add_argument = add_argument
    container.add_argument_group = lambda *a, **kw: _track(group(*a, **kw), options)
    container.add_mutually_exclusive_group = lambda **kw: _track(mutex(**kw), options)
    return container


# the subcommands in perfkit --help's order: the kinds' (perfkit.kinds.KINDS, CLI_PARSERS) and cli's own
COMMAND_ORDER = ("local", "engines", "lab", "serve", "test", "flows", "reflect", "http", "http-serve", "dperf", "nics")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="perfkit", description="Network performance tests, native engines.")
    p.add_argument("-V", "--version", action="version", version=f"perfkit {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    parsers = {cmd: add for kind in KINDS for cmd, add in getattr(kind, "CLI_PARSERS", {}).items()}
    parsers.update({"engines": _engines_parser, "lab": _lab_parser, "serve": _serve_parser, "nics": _nics_parser,
                    "cluster": cluster_cli.add_parser, "rfc2544": rfc2544_cli.add_parser})
    for cmd in [*COMMAND_ORDER, *sorted(set(parsers) - set(COMMAND_ORDER))]:
        parsers[cmd](sub)
    p.test_parser = sub.choices["test"]  # qperf takes options between test names: parsed intermixed in main()
    return p


def _engines_parser(sub) -> None:
    sub.add_parser("engines", help="list the engines and whether they are available here")


def _lab_parser(sub) -> None:
    lab = sub.add_parser("lab", help="test hosts in network namespaces, with impairments (root)")
    lsub = lab.add_subparsers(dest="lab_command", required=True)
    up = lsub.add_parser("up", help="make a lab; it stays up until perfkit lab down")
    up.add_argument("--hosts", type=int_arg, default=2, help="hosts (default 2; more than 2 share a bridge)")
    up.add_argument("--delay", help="one-way delay per link: 10ms")
    up.add_argument("--jitter", help="delay variation (uniform, ±): 1ms")
    up.add_argument("--loss", help="packet loss per link: 1%%")
    up.add_argument("--duplicate", help="duplicated packets: 1%%")
    applies(up.add_argument("--reorder", help="packets sent without the delay (needs --delay): 25%%"), delay=True)
    up.add_argument("--corrupt", help="packets with a flipped bit: 0.1%%")
    up.add_argument("--rate", help="link rate, whole frames: 100mbit, 1Gbit")
    up.add_argument("--mtu", default=1500, help="MTU (default 1500)")
    up.add_argument("--name", help="lab name, 1-8 lowercase letters/digits (default l<block>)")
    _host_limit_options(up)
    imp = lsub.add_parser("impair", help="change a lab's links and hosts while traffic flows")
    imp.add_argument("name", nargs="?", help="the lab (default: the only one)")
    imp.add_argument("--link", type=int_arg, action="append",
                     help="the link to change (repeatable; default: every link)")
    imp.add_argument("--reset", action="store_true", help="clear the links' impairments first")
    for flag, text in (("--delay", "one-way delay per link: 10ms (0: off)"), ("--jitter", "delay variation: 1ms"),
                       ("--loss", "packet loss: 1%%"), ("--duplicate", "duplicated packets: 1%%"),
                       ("--reorder", "packets sent without the delay: 25%%"),
                       ("--corrupt", "packets with a flipped bit: 0.1%%"), ("--rate", "link rate: 100mbit (0: off)")):
        imp.add_argument(flag, help=text)
    _host_limit_options(imp)
    ex = lsub.add_parser("exec", help="run a command inside a lab host: its namespace and its cgroup")
    ex.add_argument("name", help="the lab")
    ex.add_argument("host", help="the host: h1, h2, ...")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, help="the command and its arguments (after --)")
    ng = lsub.add_parser("nginx", help="start nginx in a lab host (its namespace and cgroup), until lab down")
    ng.add_argument("name", nargs="?", help="the lab (default: the only one)")
    ng.add_argument("--host", help="h2, or one of its addresses (default: the last host)")
    ng.add_argument("--port", type=int_arg, default=8080, help="port (default 8080)")
    ng.add_argument("--size", default="100", help="response body bytes for every URL (default 100)")
    ng.add_argument("--workers", type=int_arg, default=1, help="nginx worker processes (default 1)")
    st = lsub.add_parser("status", help="the labs that are up, from any process")
    st.add_argument("--json", action="store_true", help="as JSON")
    dn = lsub.add_parser("down", help="take a lab down")
    dn.add_argument("name", nargs="?", help="the lab (default: the only one)")
    dn.add_argument("--all", action="store_true", help="every perfkit namespace, link and lab")


def _host_limit_options(p) -> None:
    """VM-like hosts: perfkit.cgroups.LIMITS as options; VALUE for every host, HOST=VALUE for one."""
    g = p.add_argument_group("VM-like hosts (cgroups): VALUE for every host, HOST=VALUE for one (h2=50%)")
    for name, (flag, text, unit) in LIMITS.items():
        g.add_argument(flag, dest=name, action="append", metavar="[HOST=]VALUE", help=text.replace("%", "%%"))


def _serve_parser(sub) -> None:
    srv = sub.add_parser("serve", help="the far end of every test, for perfkit test clients")
    srv.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("-lp", "--port", default=DEFAULT_PORT, type=int_arg,
                     help=f"control port, as qperf -lp (default {DEFAULT_PORT})")
    srv.add_argument("--token", help="shared secret, required off loopback (default: $PERFKIT_TOKEN)")
    srv.add_argument("--once", action="store_true", help="exit after the first client")


def _search(a, spec, engine: str) -> int:
    """--search: trials printed as they finish (or JSON lines), then the rate found."""
    converge_cli.refuse_with_search(a)
    crit = parse_criterion(a.search)
    max_trials = parse_int(str(a.max_trials), "max_trials")
    retries = parse_int(str(a.retries), "retries")
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


def _run_printed(spec, a, line, cluster=None) -> int:
    """Run spec with one printed row per interval, then its summary; exit status."""
    printer = JsonPrinter() if a.json else LinePrinter(line=line)
    run = Run(spec, interval=parse_duration(a.interval, "interval"), subscribers=(printer,), cluster=cluster,
              thresholds=getattr(a, "threshold", None),   # --threshold: a bad one exits 2 before the run
              watch=getattr(a, "watch_pids", None))
    conv = converge_cli.controller(a, spec)   # --converge: checked before the run starts
    if conv is not None and cluster is not None:
        raise ValueError("converge: --converge retunes one host's run; not with --cluster")
    run.start()
    converge_cli.attach(conv, run)
    interrupted = _wait(run)
    if a.json:
        printer.summary(run.summary)
        if run.threshold_specs:
            print(json.dumps({"thresholds": [c.to_dict() for c in run.thresholds], "passed": run.passed,
                              **({"stages": [{"stage": st["stage"], "thresholds": [c.to_dict() for c in cs]}
                                             for st, cs in run.stage_thresholds]} if run.stages else {})}),
                  flush=True)
    else:
        print(summary_text(run.summary) + cluster_cli.hosts_text(run) + converge_cli.text(run.summary))
        for c in run.thresholds:   # k6's pass/fail lines
            print(c.line())
        if run.stages:   # and per stage: the stage table, each stage's pass/fail lines
            print(stages_text(run.stages, run.stage_thresholds if run.threshold_specs else None))
    saved = save_or_fallback(run, a.save) if getattr(a, "save", None) else True
    if run.error:
        print(f"perfkit: error: {run.error}", file=sys.stderr)
        return 1
    # a failed threshold is status 3 (CI), unless the run was cut short or its save failed
    return 1 if not saved else 130 if interrupted else 3 if run.passed is False else 0


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
    in_lab = _lab_server(a) if getattr(a, "lab", None) and a.command == "http-serve" else None
    spec = http.CLI_SPECS[a.command](a)
    parse_thresholds(getattr(a, "threshold", None))   # a bad --threshold: one line, exit 2, before the header
    a.watch_pids = parse_watch(getattr(a, "watch", None))   # --watch server=PID: the process exists, or exit 2
    if in_lab:   # http-serve --lab: this process becomes the lab host's (namespace, cgroup) before it serves
        in_lab[0].enter(in_lab[1])
        print(f"perfkit: in lab {in_lab[0].name} host {in_lab[1].name}"
              f" ({in_lab[0].limits.get(in_lab[1].name, 'no limits')})", file=sys.stderr, flush=True)
    steps = http.ladder_users(a) if a.command == "http" else None   # --users 50,100,200: a ladder
    if steps:
        ladder_plan(spec, steps)   # every step's spec checked before anything runs
        if a.save:
            raise ValueError("save: -o saves one run; a ladder's steps: --json, or perfkit.ladder in Python")
    if a.command == "http":   # a client: the name it was given and where that went
        _say_target(urlsplit(spec.urls[0]).hostname, spec.target()[0])
    with cluster_cli.connected(a, spec) as c:   # --cluster NAME: one line, exit 2, before anything starts
        if not a.json:
            print(http.cli_header(spec) if not steps else
                  http.cli_header(spec).replace(f"{spec.users} users", f"users {','.join(map(str, steps))}"),
                  flush=True)
        return _ladder_printed(spec, steps, a, c) if steps else _run_printed(spec, a, http_row_line, c)


def _ladder_printed(spec, steps, a, cluster=None) -> int:
    """perfkit http --users 50,100,200: each step's rows as they come, then one table line per step
    and each step's thresholds; exit status (3: a step failed a threshold)."""
    printer = JsonPrinter() if a.json else LinePrinter(line=http_row_line)

    def step(users, run):
        print(json.dumps({"step": {"users": users}}) if a.json else f"step: {users} users", flush=True)

    lad = ladder(spec, steps, interval=parse_duration(a.interval, "interval"), thresholds=a.threshold,
                 subscribers=(printer,), progress=step, cluster=cluster, watch=getattr(a, "watch_pids", None))
    if a.json:
        table = [{k: v for k, v in r.items()} for r in lad.table.to_dicts()]
        print(json.dumps({"ladder": table, "passed": lad.passed}, default=str), flush=True)
    else:
        print(ladder_text(lad))
        for u, run in zip(lad.users, lad.runs):
            for c in run.thresholds:
                print(f"{u:>6} users  {c.line()}")
    if lad.error:
        print(f"perfkit: error: {lad.error}", file=sys.stderr)
        return 1
    return 130 if lad.interrupted else 3 if lad.passed is False else 0



def _wait(run) -> bool:
    """Wait for a run to end; True when Ctrl-C ended it. A worker's failure is kept in run.error,
    and the rows so far are reported with it."""
    try:
        run.wait()
    except KeyboardInterrupt:
        return True
    except EngineError:
        pass
    return False

def _serve(a) -> int:
    server = Server(a.bind, a.port, a.token, a.once)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
    return 0


def _verbose(a) -> dict:
    """{kind: 0, 1 or 2} from the -v family."""
    return {kind: 2 if a.verbose_more or getattr(a, f"verbose_more_{kind}")
            else 1 if a.verbose or getattr(a, f"verbose_{kind}") else 0
            for kind in VERBOSE}


_ends = qperf.ends_from_args   # -ca/-sb and each end's own (tests/test_remote.py reads cli._ends)


def _test(a) -> int:
    host = check_target(a.host)
    _say_target(a.host, host)
    args = qperf.test_plan_args(a)   # every argument checked here, before anything runs
    wait, timeouts = args["wait"], args["timeouts"]
    sweep = dict(o.split(":", 1) if ":" in o else (o, "") for o in a.oo)
    interval = parse_duration(a.interval, "interval")
    digits = whole_number(a.precision, "precision", 1, 15)
    printer = JsonPrinter() if a.json else None
    verbose = _verbose(a)
    todo = {t: [] for t in args["data_tests"]}  # every spec is checked here, before anything runs
    for t, point, spec in remote.plan(host, *args["data_tests"], time=a.time, sweep=sweep, port=a.port,
                                      token=a.token, **args["fields"]):
        todo[t].append((point, spec))
    with cluster_cli.connected(a) as c:   # --cluster NAME: one line, exit 2, before anything starts
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
                    if not _test_point(a, name, point, spec, interval, printer,
                                       dict(bits=a.use_bits_per_sec, digits=digits, unify=a.unify_units,
                                            verbose=verbose, unify_nodes=a.unify_nodes), c):
                        return 1
    return 0


def _test_point(a, name: str, point: dict, spec, interval: float, printer, style: dict, cluster=None) -> bool:
    """One run of perfkit test (a test at one sweep point) and its summary; False on an error."""
    run = Run(spec, interval=interval, subscribers=(printer,) if printer else (), cluster=cluster)
    run.start()
    try:
        run.wait()
    except EngineError:
        pass  # reported below
    if a.json:
        printer.summary({"test": name, **point, **run.summary})
    else:
        used = {k: v for k, v in used_params(spec).items() if k not in point}
        print(summary_text(run.summary, point, used=used, **style) + cluster_cli.hosts_text(run), flush=True)
    if run.error:
        print(f"perfkit: error: {run.error}", file=sys.stderr)
        return False
    return True


def _local(a) -> int:
    spec = qperf.CLI_SPECS["local"](a)
    if spec.lab is None:
        _say_target(a.host, spec.host)
    if a.search is not None:
        if spec.messages is not None:
            raise ValueError("no_msgs: -n does not go with --search (each trial runs for its time)")
        if a.cluster is not None:
            raise ValueError("cluster: --cluster does not go with --search (a search's trials run on this host)")
        return _search(a, spec, a.engine)
    interval = parse_duration(a.interval, "interval")
    with cluster_cli.connected(a) as c:   # --cluster NAME: one line, exit 2, before anything starts
        if qperf.unpaced_flood(spec):
            _warn_flood("udp_bw with no --rate sends as fast as it can", spec.host)
        printer = JsonPrinter() if a.json else LinePrinter()
        run = Run(spec, engine=a.engine, interval=interval, subscribers=(printer,), cluster=c)
        conv = converge_cli.controller(a, spec)   # --converge: checked before the run starts
        run.start()  # a bad engine or a failed start raises here: one line, nothing ran
        converge_cli.attach(conv, run)
        if not a.json:
            print(qperf.cli_header(spec, a.engine), flush=True)
        interrupted = _wait(run)
        return _run_done(a, run, printer, interrupted, summary_text(run.summary) + cluster_cli.hosts_text(run) +
                         converge_cli.text(run.summary))


def _lab(a) -> int:
    try:
        if a.lab_command == "up":
            made = lab.Lab(hosts=a.hosts, delay=a.delay, jitter=a.jitter, loss=a.loss,
                           duplicate=a.duplicate, reorder=a.reorder, corrupt=a.corrupt,
                           rate=a.rate, mtu=a.mtu, name=a.name,
                           cpu_quota=a.cpu_quota, cpus=a.cpus, mem=a.mem).up()
            print(lab.status_text([s for s in lab.status() if s["name"] == made.name]))
            return 0
        if a.lab_command == "impair":
            return _lab_impair(a)
        if a.lab_command == "exec":
            return _lab_exec(a)
        if a.lab_command == "nginx":
            name = _only_lab(a.name)
            try:
                made = lab.Lab.attach(name)
            except ValueError:
                raise ValueError(f"name: no lab {name!r} is up (perfkit lab status)") from None
            ngx = made.nginx(a.host, port=a.port, size=parse_size(a.size, "size"), workers=a.workers)
            print(f"nginx in {name} {ngx.host.name} ({made.limits.get(ngx.host.name, 'no limits')}): {ngx.url}\n"
                  f"access log: {ngx.access_log}\nit runs until perfkit lab down {name}")
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
            name = _only_lab(a.name, "or use --all")
            if not lab.down(name):
                raise ValueError(f"name: no lab {name!r}")
            print(f"{name}: down")
            return 0
    except (PermissionError, lab.LabError, TimeoutError) as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 1
    return 2


def _lab_server(a):
    """http-serve --lab NAME [--host h2]: (the lab, its host); a.host becomes the address to listen on."""
    try:
        made = lab.Lab.attach(a.lab)
    except ValueError:
        raise ValueError(f"lab: no lab {a.lab!r} is up (perfkit lab up; perfkit lab status)") from None
    host, a.host = made.server_host(a.host)
    return made, host


def _only_lab(name, hint: str = "") -> str:
    """name, or the one lab there is (ValueError when there are none or several)."""
    if name is not None:
        return name
    names = sorted({s["name"] for s in lab.status()})
    if len(names) != 1:
        raise ValueError(f"name: {len(names)} labs are up ({', '.join(names) or 'none'}): name one"
                         + (f", {hint}" if hint else ""))
    return names[0]


def _lab_impair(a) -> int:
    """perfkit lab impair: links (--delay ...) and hosts (--cpu-quota ...), every value checked
    before anything changes."""
    links = {k: getattr(a, k) for k in lab.IMPAIRMENTS if getattr(a, k) is not None}
    limits = {k: getattr(a, k) for k in ("cpu_quota", "cpus", "mem") if getattr(a, k) is not None}
    if not links and not limits and not a.reset:
        raise ValueError("impair: nothing to change (give --delay, --loss, ... or --cpu-quota, --cpus, --mem)")
    name = _only_lab(a.name)
    try:
        made = lab.Lab.attach(name)
    except ValueError:
        raise ValueError(f"name: no lab {name!r} is up (perfkit lab status)") from None
    parse_limits(limits, [h.name for h in made.hosts], base=made.state.get("limits") or {})
    if links or a.reset:   # checks links and values before it changes any
        made.impair(a.link, reset=a.reset, **links)
    if limits:
        made.limit(**limits)
    print(lab.status_text([s for s in lab.status() if s["name"] == name]))
    return 0


def _lab_exec(a) -> int:
    """perfkit lab exec NAME HOST -- CMD: CMD replaces this process inside the host (its
    network namespace, its /sys, its cgroup), recorded so that lab down ends it."""
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        raise ValueError("cmd: give the command to run after --: perfkit lab exec NAME h2 -- CMD ...")
    try:
        made = lab.Lab.attach(a.name)
    except ValueError:
        raise ValueError(f"name: no lab {a.name!r} is up (perfkit lab status)") from None
    host = made.host(a.host)
    made.enter(host, own_mounts=True)
    sys.stdout.flush()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        print(f"perfkit: error: {cmd[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 1


def _dpdk_eal(a) -> None:
    """EAL options from the command line (checked before anything starts)."""
    huge = {"auto": None, "on": True, "off": False}.get(str(a.hugepages).lower(), "bad")
    if huge == "bad":
        raise ValueError(f"hugepages: {a.hugepages!r} is not auto, on or off")
    mem = parse_int(str(a.mem), "mem", "a whole number of MB")
    dpdk.configure(dpdk.EalOptions(memory_mb=mem, hugepages=huge, log_level=a.log_level,
                                   worker_cpus=a.cpus, pmd_dir=getattr(a, "pmd_dir", None)))
    dpdk.set_verbose(getattr(a, "verbose", False))


def _dpdk_run(a, spec, header: str, flood: tuple | None = None, cluster=None):
    """Run a DPDK spec as perfkit local runs a test: rows, then a summary; flood: (what,
    target) of an unpaced flood, said once everything is checked, before it starts.
    cluster: the spec split over its engines, each with its own EAL (perfkit.cluster)."""
    if a.engine != "dpdk":
        raise ValueError(f"engine: {a.engine!r}: perfkit {a.command} runs on the dpdk or the socket engine")
    _dpdk_eal(a)   # with a cluster: checked here, and every engine's EAL takes them (--cpus split per machine)
    interval = parse_duration(a.interval, "interval")
    printer = JsonPrinter() if a.json else LinePrinter()
    run = Run(spec, engine="dpdk", interval=interval, subscribers=(printer,), cluster=cluster)
    conv = converge_cli.controller(a, spec)   # --converge: checked before the run starts
    if flood:
        _warn_flood(*flood)
    run.start()  # EAL, ports: a failure raises here, one line, nothing ran
    converge_cli.attach(conv, run)
    if not a.json:
        print(header, flush=True)
    interrupted = _wait(run)
    return run, printer, interrupted


def _run_done(a, run, printer, interrupted, text: str) -> int:
    """The end of a run on the command line: its summary, --save, the exit status."""
    if a.json:
        printer.summary(run.summary)
    else:
        print(text)
    saved = save_or_fallback(run, a.save) if a.save else True
    if run.error:
        print(f"perfkit: error: {run.error}", file=sys.stderr)
        return 1
    return 1 if not saved else 130 if interrupted else 0


def _flows(a) -> int:
    spec = dpdk_udp.CLI_SPECS["flows"](a)
    if a.cluster is not None and (a.engine != "dpdk" or a.search is not None or a.converge is not None):
        raise ValueError("cluster: --cluster runs perfkit flows on the dpdk engine, one run (no --search, "
                         "no --converge, no --engine socket)")
    if a.engine == "socket":   # both ends here, on kernel sockets
        if a.search is not None:
            return _search(a, spec, "socket")
        converge_cli.controller(a, spec)   # --converge checked before the header
        if not a.json:
            print(dpdk_udp.socket_flows_header(spec, a), flush=True)
        return _run_printed(spec, a, None)
    if a.search is not None:
        if a.engine != "dpdk":
            raise ValueError(f"engine: {a.engine!r}: perfkit flows runs on the dpdk or the socket engine")
        _dpdk_eal(a)
        return _search(a, spec, "dpdk")
    with cluster_cli.connected(a, spec) as c:   # --cluster NAME: one line, exit 2, before anything starts
        run, printer, interrupted = _dpdk_run(a, spec, dpdk_udp.flows_header(spec), dpdk_udp.flows_flood(spec), c)
    text = summary_text(run.summary) if run.summary else ""
    s = run.summary or {}
    text += dpdk_udp.flows_summary_extra(s) + converge_cli.text(s) + cluster_cli.hosts_text(run)
    for w in s.get("warnings", ()):   # e.g. ARP for the destination unanswered: what to check
        print(f"perfkit: warning: {w}", file=sys.stderr)
    return _run_done(a, run, printer, interrupted, text)


def _reflect(a) -> int:
    spec = dpdk_udp.CLI_SPECS["reflect"](a)
    if a.engine == "socket":   # a kernel UDP socket
        if not a.json:
            print(dpdk_udp.socket_reflect_header(spec), flush=True)
        return _run_printed(spec, a, None)
    run, printer, interrupted = _dpdk_run(a, spec, dpdk_udp.reflect_header(spec))
    s, last = run.summary or {}, (run.rows[-1] if run.rows else {})
    text = (dpdk_udp.forward_text if spec.mode == "forward" else dpdk_udp.reflect_text)(s, last)
    return _run_done(a, run, printer, interrupted, text)


def _engines(a) -> int:
    print(json.dumps(list_engines(), indent=2))
    return 0


def check_save_path(path: str) -> None:
    """-o FILE: a folder that exists and may be written, and not itself a folder; ValueError otherwise."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"save: {path} is a folder; name a file in it (FILE.parquet)")
    if not os.path.isdir(folder):
        raise ValueError(f"save: {folder}: no such folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"save: {folder}: this user may not write there")


def save_or_fallback(run, path: str) -> bool:
    """run.save(path); if that fails after all (disk full, the folder gone), the run goes to a
    file of its own in the temporary folder, named on stderr. False when path was not written."""
    try:
        run.save(path)
        return True
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    fd, fallback = tempfile.mkstemp(prefix="perfkit-run-", suffix=".parquet")
    os.close(fd)
    try:
        run.save(fallback)
        print(f"perfkit: save: cannot write {path} ({why}); the run is saved in {fallback}", file=sys.stderr)
    except (OSError, ValueError) as exc2:
        print(f"perfkit: save: cannot write {path} ({why}) nor {fallback} ({exc2}); the summary above is "
              "all that is left", file=sys.stderr)
    return False


class _Unset(list):
    """An option's default while given_options parses: a list, so that append actions copy it."""


def _parse(parser, argv):
    if argv[:1] == ["test"]:
        a = parser.test_parser.parse_intermixed_args(argv[1:])
        a.command = "test"
        return a
    return parser.parse_args(argv)


def _chosen_actions(parser, a):
    """The options of parser and of the subcommands a chose (perfkit lab up: lab's and up's)."""
    if a.command == "test":   # parsed by its own parser (intermixed)
        parser = parser.test_parser
    out = list(parser.options)
    sub = parser.subcommands
    if sub is not None and getattr(a, sub.dest, None) in sub.choices:
        out += _chosen_actions(sub.choices[getattr(a, sub.dest)], a)
    return out


def given_options(parser, argv, a) -> dict:
    """{option name as written: (its action, its value)} for the options argv gives (a value
    equal to the default included): argv parsed again with every default a marker."""
    actions = [x for x in _chosen_actions(parser, a) if x.option_strings and x.dest != argparse.SUPPRESS]
    saved = [(x, x.default) for x in actions]
    marks = {}
    try:
        for x in actions:
            x.default = marks.setdefault(x.dest, _Unset())
        a = vars(_parse(parser, argv))
    finally:
        for x, default in saved:
            x.default = default
    out = {}
    for dest, value in a.items():
        if dest not in marks or value is marks[dest]:
            continue
        mine = [x for x in actions if x.dest == dest]
        written = [(x, s) for x in mine for s in x.option_strings
                   if any(t == s or t.startswith(s + "=") for t in argv)]
        for x, s in written or [(x, max(x.option_strings, key=len)) for x in mine]:
            out.setdefault(s, (x, list(value) if isinstance(value, _Unset) else value))
    return out


def _port_kind(port) -> str | None:
    """A DPDK port's kind for Meta.applies' port_kind: ring, null, memif, af_packet, tap, pci..."""
    if not isinstance(port, str) or not port.strip():
        return None
    p = port.strip().lower()
    if p.startswith("ring:"):
        return "ring"
    if p.startswith("net_"):
        return p[4:].split(",")[0].rstrip("0123456789")
    return "pci"


def option_context(a) -> dict:
    """What Meta.applies is checked against: every parsed argument, the tests as a set (perfkit
    test runs several), their protocols, and the DPDK port's kind."""
    ctx = dict(vars(a))
    if isinstance(ctx.get("engine"), str):   # an unknown engine is named as such, not as the options it rules out
        check_engine_name(ctx["engine"])
    tests = [t for t in getattr(a, "tests", None) or [] if t not in ("conf", "quit")]
    if tests:
        ctx["test"] = set(tests)
    if "test" in ctx:
        names = ctx["test"] if isinstance(ctx["test"], set) else {ctx["test"]}
        ctx["protocol"] = {str(t).split("_")[0] for t in names}
    if getattr(a, "engine", "dpdk") == "dpdk" and isinstance(getattr(a, "port", None), str):
        ctx["port_kind"] = _port_kind(a.port)
    return ctx


def check_options(parser, argv, a) -> None:
    """No option silently ignored: ValueError naming the first one given where its Meta.applies
    (or perfkit.fields.applies) says it means nothing, or given an empty value."""
    given = given_options(parser, argv, a)
    a.perfkit_given = {x.dest for x, _ in given.values()}   # what the line gave (beside a flows file)
    flags = {x.dest: max(x.option_strings, key=len) for x in _chosen_actions(parser, a) if x.option_strings}
    flags.update({x.dest: name for name, (x, _) in given.items()})

    def label(key):
        return {"port_kind": "a DPDK port of kind", "protocol": "protocol"}.get(key, flags.get(key, key))
    check_applies(given, option_context(a), label)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    a = _parse(parser, argv)
    if a.command not in COMMANDS:
        return 2
    try:
        check_options(parser, argv, a)   # before anything: an option given where it means nothing
        if getattr(a, "save", None):
            check_save_path(a.save)   # before the run: a measurement is not made only to be lost
        return COMMANDS[a.command](a)
    except ValueError as exc:
        print(f"perfkit: {exc}", file=sys.stderr)
        return 2
    except EngineError as exc:
        print(f"perfkit: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _dperf_side(cfg, spec) -> tuple:
    """(mode, raw, keepalive, udp) of a conf: which of dperf's lines its blocks carry."""
    return cfg.mode, spec.raw, bool(spec.keepalive), spec.protocol == "udp"


def _dperf_printer(a, cfg, spec, tag: str | None):
    """The row subscriber of one conf: JSON lines (tagged with role and file when two confs
    run), dperf's per-second blocks (each line prefixed "[mode] " when two run), or nothing."""
    if a.json:
        out = JsonPrinter()
        return (lambda row: out({**row, "role": cfg.mode, "conf": tag})) if tag else out
    if cfg.quiet:
        return lambda row: None
    prefix = f"[{cfg.mode}] " if tag else ""
    side = _dperf_side(cfg, spec)
    return lambda row: print(dperf.seconds_block(row, *side, prefix=prefix), flush=True)


def _dperf(a) -> int:
    """Each conf is one run; with a server and a client, the server starts first and
    stops once every client has finished. Per-second blocks (dperf's layout) for one
    conf; at the end dperf's totals and perfkit's summary for each. --cluster: every
    client conf's load split over the cluster's engines (a server conf runs here)."""
    cfgs = []
    for path in a.conf:
        if not os.path.exists(path):
            raise ValueError(f"conf: {path}: no such file")
        cfgs.append(dperf.load(path))
    specs = [c.to_spec(netns=a.netns) for c in cfgs]
    if a.cpus:   # the command line's CPUs instead of the files' cpu lines
        specs = [dataclasses.replace(s, cpus=()) for s in specs]
    else:
        for c in cfgs:
            c.check_cpus(os.sched_getaffinity(0))
    if a.save and len(specs) > 1:
        raise ValueError("save: one conf per saved run")
    _dpdk_eal(a)
    clients = [s for s, c in zip(specs, cfgs) if c.mode == "client"]
    with cluster_cli.connected(a, clients[0] if clients else None) as cl:   # one line, exit 2, before anything starts
        if cl is None and a.cluster is not None:
            raise ValueError("cluster: --cluster splits a dperf client conf's load: give one")
        for spec in clients[1:] if cl is not None else ():
            cl.shares(spec)
        return _dperf_runs(a, cfgs, specs, cl)


def _dperf_runs(a, cfgs, specs, cluster) -> int:
    """perfkit dperf's runs, servers first (cluster: the clients' engines)."""
    interval = parse_duration(a.interval, "interval")
    order = sorted(range(len(cfgs)), key=lambda i: cfgs[i].mode != "server")  # servers first
    runs = [None] * len(cfgs)
    printers = []
    for i in order:
        printer = _dperf_printer(a, cfgs[i], specs[i], a.conf[i] if len(cfgs) > 1 else None)
        printers.append(printer)
        runs[i] = Run(specs[i], interval=interval, subscribers=(printer,),
                      cluster=cluster if cfgs[i].mode == "client" else None)
        if getattr(specs[i], "flood", False):
            _warn_flood(f"{a.conf[i]}: a SYN flood at {specs[i].cps:g} connections/s", specs[i].server)
        if not a.json:
            print(dpdk_tcp.dperf_header(cfgs[i].mode, a.conf[i], specs[i]), flush=True)
        try:
            runs[i].start()
        except BaseException:
            for r in runs:
                if r is not None and r is not runs[i] and r.started:
                    r.stop()
                    r.settle()
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
            r.settle()
    except EngineError:
        for r in runs:
            r.stop()
        for r in runs:
            r.settle()
    status = 130 if interrupted else 0
    for i, r in enumerate(runs):
        last = r.rows[-1] if r.rows else {}
        active = dperf.active_seconds(r.rows)
        if a.json:
            JsonPrinter().summary({**(r.summary or {}), "conf": a.conf[i], "role": cfgs[i].mode,
                                   "active_s": active})
        else:
            if len(runs) > 1:
                print(f"\n{a.conf[i]} ({cfgs[i].mode}):")
            print(dperf.total_block(last, *_dperf_side(cfgs[i], specs[i])))
            print(dperf.summary_lines(last, r.summary or {}, active) + cluster_cli.hosts_text(r))
        if r.error:
            print(f"perfkit: error: {a.conf[i]}: {r.error}", file=sys.stderr)
            status = 1
    if a.save and not save_or_fallback(runs[0], a.save):
        status = status or 1
    return status


def _nics_parser(sub) -> None:
    n = sub.add_parser("nics", help="this host's network devices (sysfs) and whether DPDK can take each")
    n.add_argument("--json", action="store_true", help="one JSON document instead of the table")


def _nics(a) -> int:
    rep = nics.report()
    print(nics.to_json(rep) if a.json else nics.text(rep))
    return 0


# each command's handler: the kinds' commands (their parsers and specs in perfkit.kinds) and cli's own
COMMANDS = {"local": _local, "engines": _engines, "lab": _lab, "serve": _serve, "test": _test,
            "http": _http, "http-serve": _http, "flows": _flows, "reflect": _reflect, "dperf": _dperf,
            "nics": _nics, "cluster": cluster_cli.run,
            "rfc2544": lambda a: rfc2544_cli.run(a, _dpdk_eal)}


if __name__ == "__main__":
    sys.exit(main())
