"""Printers for rows and summaries: dperf-style lines, qperf-style summaries, JSON lines."""
from __future__ import annotations

import json
import sys
import threading

from perfkit.hostmetrics import summary_line as host_line, watched_lines
from perfkit.stats import value
from perfkit.units import format_time_us


def _si(value: float, unit: str = "", digits: int = 3) -> str:
    """qperf's style: three significant digits (its -e sets more) and a decimal prefix
    (32.8 MB/sec, 510 K/sec)."""
    value = float(f"{value:.{digits}g}")  # round first: 999,999 is 1 M, not "1e+03 K"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".rstrip()


UNIFIED = {"B/sec": "bytes/sec", "b/sec": "bits/sec", "/sec": "/sec"}   # qperf -uu's units


def _count(n) -> str:
    # round, not int(): a row's count is rate * interval_s, and interval_s is rounded,
    # so 7 packets can come back as 6.99998
    return f"{round(n):,}"


def http_row_line(row: dict) -> str:
    """One line per interval of an HTTP load: tps, response times, errors, connections."""
    errs = sum(value(row, f"{k}_per_s") for k in ("err_connect", "err_timeout", "err_reset", "err_read", "err_tls")) * row["interval_s"]
    parts = [f"{row['time_s']:6.1f}s", f"tps {_si(value(row, 'http_resp_per_s')):>7}",
             f"rt p50 {format_time_us(row['lat_p50_us'])} p99 {format_time_us(row['lat_p99_us'])}",
             f"2xx {_count(value(row, 'http_2xx_per_s') * row['interval_s'])}",
             f"4xx {_count(value(row, 'http_4xx_per_s') * row['interval_s'])}",
             f"5xx {_count(value(row, 'http_5xx_per_s') * row['interval_s'])}",
             f"err {_count(errs)}", *([f"cut {_count(row['http_cut_per_s'] * row['interval_s'])}"]
                                      if row.get("http_cut_per_s") else []), f"conn {value(row, 'sock_current')}",
             *([f"users {row['http_users']}"] if row.get("http_users") is not None else []),
             *([f"due {_si(row['http_rate'])}/s"] if row.get("http_rate") else []),   # open loop: the rate planned now
             f"bitsRx {_si(row['bits_rx_per_s'], 'bps')}", f"cpu {row['cpu_pct']:.0f}%"]
    return "  ".join(parts)


def row_line(row: dict) -> str:
    """One dperf-style line per interval."""
    # dperf's short column names (pktTx, bitsRx), not the counter labels: a line people compare with dperf's
    parts = [f"{row['time_s']:6.1f}s",
             f"pktTx {_si(value(row, 'pkts_tx_per_s'), '/s'):>9}",
             f"pktRx {_si(value(row, 'pkts_rx_per_s'), '/s'):>9}",
             f"bitsTx {_si(row['bits_tx_per_s'], 'bps'):>10}",
             f"bitsRx {_si(row['bits_rx_per_s'], 'bps'):>10}",
             f"dropTx {_count(value(row, 'drop_tx_per_s') * row['interval_s'])}",
             f"lost {_count(value(row, 'seq_lost_per_s') * row['interval_s'])}",
             f"dup {_count(value(row, 'seq_dup_per_s') * row['interval_s'])}",
             f"reord {_count(value(row, 'seq_reorder_per_s') * row['interval_s'])}"]
    if row.get("lat_p50_us") is not None:
        parts.append(f"lat p50 {format_time_us(row['lat_p50_us'])} p99 {format_time_us(row['lat_p99_us'])}")
    for way, name in (("a_to_b", "a>b"), ("b_to_a", "b>a")):   # both directions apart: each one's rx (else tx)
        rx, tx = row.get(f"{way}_rx_pps"), row.get(f"{way}_tx_pps")
        if rx is not None or tx is not None:
            parts.append(f"{name} {_si(rx if rx is not None else tx, '/s')}{'' if rx is not None else ' tx'}")
    parts.append(f"cpu {row['cpu_pct']:.0f}%")
    return "  ".join(parts)


VERBOSE = ("conf", "stat", "time", "used")   # qperf's -vc -vs -vt -vu (and -vvc ... -vvu)


def summary_text(s: dict, point: dict | None = None, bits: bool = False, digits: int = 3,
                 unify: bool = False, verbose: dict | None = None, unify_nodes: bool = False,
                 used: dict | None = None) -> str:
    """A qperf-style summary, then what qperf does not show. As qperf's options: bits,
    bandwidth in bits/s (-ub: 21.7 Gb/sec); digits, significant digits (-e); unify, whole
    numbers in base units (-uu: 21700000000 bits/sec, 13672 ns); verbose, {kind: level}
    for kind in VERBOSE, level 1 as -vs, 2 as -vvs; unify_nodes (-un), a bandwidth test's
    two ends named loc_/rem_ rather than send_/recv_; used, {name: (level, text)}: the
    parameters the test ran with, shown at that -vu level."""
    test = s["test"]
    level = {kind: 0 for kind in VERBOSE} | (verbose or {})
    st = _Style(s, bits, digits, unify)
    pairs: list[tuple[str, str]] = []

    def put(name, value):
        pairs.append((name, value))

    for name, value in (point or {}).items():  # a sweep point, as qperf prints msg_size
        put(name, _size_text(int(value)) if name == "msg_size" else value)
    if test == "http":  # nGrinder's summary, then perfkit's
        _http_pairs(s, put)
    else:
        _socket_pairs(s, st, put)
    _common_pairs(s, st, put)
    for name, (at, text) in (used or {}).items():  # -vu, -vvu: what the test ran with
        if level["used"] >= at:
            put(name, text)
    _cpu_pairs(s, st, level, unify_nodes, put)
    # the whole host (perfkit.hostmetrics); perfkit test keeps qperf's lines
    if host_line(s) and "loc_cpus_used" not in s:
        put("host", host_line(s))
    for name, text in watched_lines(s):   # --watch NAME=PID, a lab host's cgroup
        put(name, text)
    if s.get("error"):
        put("error", s["error"])
    width = max([13] + [len(name) for name, _ in pairs])   # aligned as qperf aligns them
    return "\n".join([f"{test}:"] + [f"    {name:<{width}} =  {value}" for name, value in pairs])


class _Style:
    """How summary_text writes a figure: qperf's -ub (bits), -e (digits), -uu (unify)."""

    def __init__(self, s: dict, bits: bool, digits: int, unify: bool):
        self.s, self.bits, self.digits, self.unify = s, bits, digits, unify

    def rate(self, value, unit):
        return f"{round(value)} {UNIFIED[unit]}" if self.unify else _si(value, unit, self.digits)

    def dur(self, us):
        return f"{round(us * 1e3)} ns" if self.unify and us is not None else format_time_us(us, self.digits)

    def bw(self, nbytes):
        per_s = nbytes / self.s["duration_s"] if self.s["duration_s"] else 0
        return self.rate(8 * per_s, "b/sec") if self.bits else self.rate(per_s, "B/sec")


def _http_pairs(s: dict, put) -> None:
    """An HTTP load's summary lines: nGrinder's, then perfkit's."""
    put("Vuser", s.get("vusers"))
    put("TPS", f"{s['tps']:.1f}")
    put("Mean Test Time", format_time_us(s["lat_mean_us"]))
    failed = s["http_err"] + (s.get("http_cut") or 0)   # cut off by the stop: no answer, so an error too
    put("Error rate", f"{s['error_rate_pct'] or 0:.2f} % ({_count(failed)} of {_count(s['requests'])})")
    if s.get("http_cut"):
        put("cut off", f"{_count(s['http_cut'])} requests still out at the stop, counted as errors")
    put("responses", f"{_count(s['responses'])}: 2xx {_count(s['http_2xx'])}  3xx {_count(s['http_3xx'])}  "
                     f"4xx {_count(s['http_4xx'])}  5xx {_count(s['http_5xx'])}")
    put("errors", f"connect {_count(s['err_connect'])}  timeout {_count(s['err_timeout'])}  "
                  f"reset {_count(s['err_reset'])}  read {_count(s['err_read'])}"
                  + (f"  tls {_count(s['err_tls'])}" if s.get("err_tls") else "")
                  + (f"  cut off by the stop {_count(s['http_cut'])}" if s.get("http_cut") else ""))
    put("connections", _count(s["sock_open"]))
    for u in s.get("per_url") or [] if len(s.get("per_url") or []) > 1 else []:
        put("url", f"{u['url']}: {_count(u['requests'])} sent, {_count(u['responses'])} answered, "
                   f"{_count(u['failed'])} failed")


def _socket_pairs(s: dict, st: _Style, put) -> None:
    """qperf's lines for its tests: bandwidth and loss, or latency, and the message rate."""
    test = s["test"]
    if test == "udp_bw":
        put("send_bw", st.bw(s["bytes_tx"]))
        put("recv_bw", st.bw(s["bytes_rx"]))
        put("msg_rate", st.rate(s["msg_rate"], "/sec"))
        lost = s["lost"]
        put("loss", f"{s['loss_pct'] or 0:.3g} % ({_count(lost)} of {_count(s['pkts_tx'])} sent)"
            + (f", {_count(s['dup'])} dup, {_count(s['reorder'])} reordered" if s["dup"] or s["reorder"] else ""))
    elif test == "tcp_bw":
        put("bw", st.bw(s["bytes_rx"]))
        put("msg_rate", st.rate(s["msg_rate"], "/sec"))
    else:  # latency tests: qperf's latency is half the mean round trip
        put("latency", st.dur(s["latency_us"]))
        put("msg_rate", st.rate(s["msg_rate"], "/sec"))


def _common_pairs(s: dict, st: _Style, put) -> None:
    """What perfkit adds for every test: the latency histogram, -n's count, drops."""
    dur = st.dur
    if s.get("lat_count"):
        what = {"udp_bw": "one-way", "http": "response time"}.get(s["test"], "round trip")
        put("lat", f"{what} p50 {dur(s['lat_p50_us'])}  p99 {dur(s['lat_p99_us'])}  "
                   f"p99.9 {dur(s['lat_p999_us'])}  max {dur(s['lat_max_us'])}  "
                   f"jitter {dur(s['jitter_us'])}")
    if s.get("messages"):  # qperf's -n: say if the time limit came first
        sent = s.get("msgs_sent", 0)
        put("messages", f"{_count(sent)} sent" + ("" if sent >= s["messages"] else
            f" of the {_count(s['messages'])} asked: the time limit came first"))
    if s.get("drop_tx"):
        put("drop_tx", _count(s["drop_tx"]))


def _cpu_pairs(s: dict, st: _Style, level: dict, unify_nodes: bool, put) -> None:
    """CPU use: a remote test's both ends as qperf -v shows them, else this process's workers."""
    if "loc_cpus_used" not in s:
        workers = ", ".join(f"{k} {v:.0f}%" for k, v in s["cpu_pct_by_worker"].items())
        put("cpu", f"{s['cpu_pct']:.0f}% of one core ({workers})")
        return
    for name in ("send_cost", "recv_cost"):
        ms = s.get(f"{name}_ms_per_gb")
        if ms is not None:
            put(name, f"{round(ms * 1e6)} ns/GB" if st.unify else f"{ms:.{st.digits}g} ms/GB")
    for label, name, value in end_lines(s, level, unify_nodes):
        if name == "pct":
            put(label, f"{value:.0f} % cpus")
        elif name == "bytes":
            put(label, f"{value} bytes" if st.unify else _si(value, "B", st.digits))
        elif name == "s":
            put(label, st.dur(value * 1e6))
        else:
            put(label, _count(value))


def _size_text(n: int) -> str:
    """qperf's way: 1 bytes, 64 KiB (65,536)."""
    for shift, unit in ((20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit} ({n:,})"
    return f"{n} bytes"


def _polling_ends(spec, receiver_cpu) -> str | None:
    """-vvu's busy_poll: "1" as told, else which ends the auto rule (spec.polls) made spin."""
    if spec.busy_poll is not None:
        return "1" if spec.busy_poll else None
    if spec.test.endswith("_lat"):
        ends = [end for end, cpu in (("local", spec.loc_cpu_affinity), ("remote", spec.rem_cpu_affinity))
                if spec.polls(True, cpu, spec.host)]
        if len(ends) == 2:
            return "both ends (pinned)"
        return f"{ends[0]} end (pinned)" if ends else None
    return "receiver (pinned)" if spec.polls(True, receiver_cpu, spec.host) else None


def used_params(spec) -> dict:
    """{name: (level, text)} of what a test ran with, for -vu (the time) and -vvu
    (everything set), named as qperf names them and in its order (by name)."""
    used = {"msg_size": (2, _size_text(spec.size)),
            "time": (1, format_time_us(spec.duration * 1e6))}

    def both(name, loc, rem, text):  # one line where the ends agree, as qperf's -ca
        if loc == rem and loc is not None:
            used[name] = (2, text(loc))
        else:
            used.update({f"{end}_{name}": (2, text(v)) for end, v in (("loc", loc), ("rem", rem))
                         if v is not None})
    both("affinity", spec.loc_cpu_affinity, spec.rem_cpu_affinity, str)
    receiver_cpu = spec.loc_cpu_affinity if spec.flip else spec.rem_cpu_affinity
    both("sock_buf_size", spec.loc_sock_buf_size, spec.rem_sock_buf_size, _size_text)
    both("timeout", spec.loc_timeout, spec.rem_timeout, lambda v: format_time_us(v * 1e6))
    for name, value, text in (("port", spec.ip_port, lambda v: f"{v:,}"),
                              ("no_msgs", spec.messages, lambda v: f"{v:,}"),
                              ("rate", spec.rate, str),
                              ("flows", spec.flows if spec.flows > 1 else None, str),
                              ("gso", spec.gso, str),   # datagrams per UDP GSO send
                              ("flip", spec.flip or None, lambda v: "1"),
                              ("access_recv", spec.access_recv or None, lambda v: "1"),
                              ("busy_poll", _polling_ends(spec, receiver_cpu), str)):
        if value:
            used[name] = (2, text(value))
    return dict(sorted(used.items()))


def end_lines(s: dict, level: dict, unify_nodes: bool = False):
    """(label, unit, value) of each end's figures, as qperf names them: CPU use always
    (qperf's -vt), user/kernel split and times with -vvt, bytes and messages with -vvs.
    A bandwidth test's ends are send_ and recv_ and show what they did (the sender's
    send_bytes); with -un, or in a latency test, loc_ and rem_ with all four."""
    bw = s["test"].endswith("_bw") and "sender" in s
    ends = ("loc", "rem")
    if bw:  # the sender first, as qperf lists them
        ends = (s["sender"], "rem" if s["sender"] == "loc" else "loc")
    out = []
    for i, end in enumerate(ends):
        role = ("send", "recv")[i] if bw else None
        prefix = end if unify_nodes or not bw else role
        out.append((f"{prefix}_cpus_used", "pct", s[f"{end}_cpus_used"]))
        if level["time"] >= 2:
            out += [(f"{prefix}_cpus_user", "pct", s[f"{end}_cpus_user"]),
                    (f"{prefix}_cpus_kernel", "pct", s[f"{end}_cpus_kernel"]),
                    (f"{prefix}_real_time", "s", s[f"{end}_real_time_s"]),
                    (f"{prefix}_cpu_time", "s", s[f"{end}_cpu_time_s"])]
        if level["stat"] >= 2:
            ways = (role,) if bw else ("send", "recv")
            stat_prefix = f"{end}_" if unify_nodes or not bw else ""
            out += [(f"{stat_prefix}{way}_bytes", "bytes", s[f"{end}_{way}_bytes"]) for way in ways]
            out += [(f"{stat_prefix}{way}_msgs", "count", s[f"{end}_{way}_msgs"]) for way in ways]
    return out


def _clean(v):
    if isinstance(v, float) and v != v:  # NaN is not JSON
        return None
    return v


_WRITE_LOCK = threading.Lock()


def _write_line(out, line: str) -> None:
    """One whole line, flushed. Runs going on at once (perfkit dperf: a server and a client)
    print from their own sampler threads to one stream: print()'s two writes, the text and
    then its newline, let another thread's line in between."""
    with _WRITE_LOCK:
        out.write(line + "\n")
        out.flush()


class LinePrinter:
    """Subscriber: one human line per row (line: row_line or http_row_line)."""

    def __init__(self, out=None, line=None):
        self.out = out or sys.stdout
        self.line = line or row_line

    def __call__(self, row: dict) -> None:
        _write_line(self.out, self.line(row))


class JsonPrinter:
    """Subscriber: one JSON object per row; summary() writes {"summary": ...}."""

    def __init__(self, out=None):
        self.out = out or sys.stdout

    def __call__(self, row: dict) -> None:
        _write_line(self.out, json.dumps({k: _clean(v) for k, v in row.items()}))

    def summary(self, s: dict) -> None:
        _write_line(self.out, json.dumps({"summary": {k: _clean(v) for k, v in s.items()}}))


def conf_text(both: dict) -> str:
    """qperf's conf test: {"local": env, "remote": env} (perfkit.remote.conf) as its lines."""
    lines = ["conf:"]
    for side in ("local", "remote"):
        e = both[side]
        for key, label in (("host", "node"), ("cpu_model", "cpu"), ("os", "os"), ("kernel", "kernel"),
                           ("perfkit", "perfkit")):
            lines.append(f"    {side[:3]}_{label:<8}=  {e.get(key)}")
    return "\n".join(lines)


def stages_text(stages: list[dict], checks: list | None = None) -> str:
    """A stage plan's run: one line per stage (its rows' bounds, users at its end, TPS, mean and
    p99 response time, error rate, requests), then each stage's threshold lines."""
    if not stages:
        return ""
    what = "rate" if "rate" in stages[0] else "users"
    lines = ["stages:", f"{'stage':>6} {'rows s':>13} {what + ('/s' if what == 'rate' else ''):>7} {'TPS':>10} {'mean ms':>9} {'p99 ms':>9} "
             f"{'error %':>8} {'requests':>10}"]
    for st in stages:
        ms = lambda k: f"{st[k] / 1e3:.2f}" if st.get(k) is not None else "-"  # noqa: E731
        err = f"{st['error_rate_pct']:.2f}" if st.get("error_rate_pct") is not None else "-"
        span = f"{st['from_s']:.1f}-{st['to_s']:.1f}" + ("*" if st.get("partial") else "")
        lines.append(f"{st['stage']:>6} {span:>13} {st[what]:>7g} {st.get('tps') or 0:>10.1f} {ms('lat_mean_us'):>9} "
                     f"{ms('lat_p99_us'):>9} {err:>8} {st.get('requests', 0):>10,}")
    if any(st.get("partial") for st in stages):
        lines.append("    * cut short by the stop")
    for st, cs in checks or ():
        lines += [f"stage {st['stage']:>2}  {c.line()}" for c in cs]
    return "\n".join(lines)
