"""perfkit rfc2544: RFC 2544's tests from the command line, on what perfkit local udp_bw
(socket engine) or perfkit flows (dpdk, or --engine socket) would run.

    perfkit rfc2544 local udp_bw --lab l1 --rate 12kpps --frame-sizes 128,512 --trial 2s
    perfkit rfc2544 flows --port ring:a:0 --peer ring:a:1 --tests throughput,latency -o rfc.parquet
    perfkit rfc2544 local udp_bw --rate 20kpps --trial 2s --report rfc.html
    perfkit rfc2544 report rfc.parquet --report rfc.html     # a saved result's report

A line per trial as it finishes (--json: JSON lines), then the report (perfkit.rfc2544).
--rate is the upper bound and frame loss rate's 100%; each trial's length is --trial.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

from perfkit.kinds import dpdk_udp, qperf
from perfkit.rfc2544 import Rfc2544Result, load, progress_line, rfc2544, validate

_ON = {"local": qperf, "flows": dpdk_udp}   # what rfc2544 runs on -> the kind whose parser and spec it takes


def add_parser(sub) -> None:
    r = sub.add_parser("rfc2544", help="RFC 2544: throughput, latency, frame loss rate and back-to-back "
                       "frames at each frame size (over perfkit local udp_bw or perfkit flows)")
    on = r.add_subparsers(dest="rfc2544_on", required=True)
    for cmd, kind in _ON.items():
        kind.CLI_PARSERS[cmd](on)
        p = on.choices[cmd]
        # the throughput's search options apply (RFC: 2 s between trials); the frame size is --frame-sizes
        p.set_defaults(search="zero-loss", settle="2s", size=None, interval=None)
        for x in p.options:   # the search's options apply here without --search
            if x.dest in ("low", "resolution", "max_trials", "settle", "retries"):
                x.perfkit_applies = ()
        g = p.add_argument_group("RFC 2544")
        g.add_argument("--frame-sizes", help="Ethernet frame bytes, FCS counted (default "
                       "64,128,256,512,1024,1280,1518, "
                       "and 9018 on a DPDK port that takes jumbo frames); a socket test sends frame - 46 B of UDP")
        g.add_argument("--tests", default="all",
                       help="throughput,latency,frame_loss,back_to_back or all (default all)")
        g.add_argument("--trial", default="60s", help="each trial's length (default the RFC's 60s)")
        g.add_argument("--latency-trial", help="each latency trial's length (RFC: 120s; default --trial)")
        g.add_argument("--latency-trials", default="20", help="latency trials per size (default the RFC's 20)")
        g.add_argument("--loss-step", default="10%", help="frame loss rate's step down (default the RFC's 10%%)")
        g.add_argument("--b2b-trials", default="50", help="back-to-back repetitions per size (default the RFC's 50)")
        g.add_argument("--b2b-trial", default="2s", help="each back-to-back trial's bound (default 2s)")
        g.add_argument("--max-burst", help="the longest back-to-back burst tried (default --rate x --b2b-trial)")
        g.add_argument("--resume", metavar="FILE.parquet", help="continue a saved rfc2544 result: what it finished "
                       "is kept, the rest runs")
        g.add_argument("--report", metavar="FILE.html", help="write an HTML report laid out like RFC 2544's "
                       "reporting section: per test its table per frame size and its graph")
    rep = on.add_parser("report", help="the HTML report of a saved rfc2544 result (-o FILE.parquet, or a store's)")
    rep.add_argument("file", metavar="FILE.parquet", help="a result perfkit rfc2544 -o saved (or Store.save)")
    rep.add_argument("--report", metavar="FILE.html", required=True, help="where to write the report")


def _spec(a):
    """The spec rfc2544 runs and its engine; ValueError for what does not go with it."""
    if a.search != "zero-loss":
        raise ValueError("search: RFC 2544's throughput is zero loss by definition; leave --search out")
    if a.duration is not None:
        raise ValueError("duration: each RFC 2544 trial lasts --trial; leave --duration out")
    if getattr(a, "cluster", None) is not None:
        raise ValueError("cluster: --cluster does not go with rfc2544 (its trials run on this host)")
    if a.interval is not None:
        raise ValueError("interval: RFC 2544 prints a line per trial, not per interval; leave --interval out")
    if a.size is not None:
        raise ValueError("size: each RFC 2544 trial has its frame size from --frame-sizes; leave --size out")
    if getattr(a, "sizes", None) is not None:
        raise ValueError("sizes: RFC 2544 runs one frame size at a time (--frame-sizes), not a size mix")
    a.size = 64   # replaced per frame size
    if a.rfc2544_on == "local" and a.test != "udp_bw":
        raise ValueError(f"test: rfc2544 runs udp_bw on the socket engine, not {a.test}")
    spec = _ON[a.rfc2544_on].CLI_SPECS[a.rfc2544_on](a)
    engine = a.engine
    if a.rfc2544_on == "flows" and engine not in ("dpdk", "socket"):
        raise ValueError(f"engine: {engine!r}: perfkit rfc2544 flows runs on the dpdk or the socket engine")
    return spec, engine


def _check_report_path(path: str) -> None:
    """--report: an .html file in a folder that exists, checked before anything runs."""
    if not str(path).endswith((".html", ".htm")):
        raise ValueError(f"report: {path!r} is not an .html file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"report: no folder {folder!r} to write {os.path.basename(path)} in")


def run(a, dpdk_eal) -> int:
    """perfkit rfc2544 ...: every argument checked first (exit 2), then the trials and the report."""
    if a.rfc2544_on == "report":   # a saved result: its HTML report, nothing runs
        _check_report_path(a.report)
        print(f"perfkit rfc2544: report written to {load(a.file).report(a.report)}")
        return 0
    if a.report:
        _check_report_path(a.report)
    spec, engine = _spec(a)
    resume = load(a.resume) if a.resume else None
    if resume is not None and resume.spec.to_dict() != dataclasses.replace(spec, rate=None).to_dict():
        raise ValueError(f"resume: {a.resume} measured another spec; run it with the same options")
    kw = dict(sizes=a.frame_sizes, tests=a.tests, trial=a.trial, latency_trial=a.latency_trial,
              latency_trials=a.latency_trials, high=spec.rate, low=a.low, resolution=a.resolution,
              max_trials=a.max_trials, settle=a.settle, retries=a.retries, loss_step=a.loss_step,
              b2b_trials=a.b2b_trials, b2b_trial=a.b2b_trial, max_burst=a.max_burst)
    spec = dataclasses.replace(spec, rate=None)
    plan = validate(spec, **kw)
    if engine == "dpdk":
        dpdk_eal(a)

    def show(test, size, row):
        print(json.dumps({"trial": row}, default=str) if a.json else progress_line(test, size, row), flush=True)

    if not a.json:
        sizes = ",".join(str(f) for f, s, _ in plan.sizes if s)
        print(f"perfkit rfc2544 {','.join(plan.tests)}: {type(spec).__name__} on the {engine} engine, frames "
              f"{sizes} B, upper bound {kw['high'] or 'measured unpaced'}, {plan.trial_s:g} s trials", flush=True)
    res: Rfc2544Result = rfc2544(spec, **kw, engine=engine, resume=resume, progress=show)
    print(json.dumps({"rfc2544": res.to_dict()}, default=str) if a.json else res.text(), flush=True)
    status = 0
    if a.save:
        try:
            res.save(a.save)
        except (OSError, ValueError) as exc:
            print(f"perfkit: save: cannot write {a.save} ({exc})", file=sys.stderr)
            status = 1
    if a.report:
        try:
            res.report(a.report)
        except OSError as exc:
            print(f"perfkit: report: cannot write {a.report} ({exc})", file=sys.stderr)
            status = 1
    if res.error:
        print(f"perfkit: error: {res.error}", file=sys.stderr)
        return 1
    return status or (130 if res.stopped == "interrupted" else 0)
