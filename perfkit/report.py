"""Printers for rows and summaries: dperf-style lines, qperf-style summaries, JSON lines."""
from __future__ import annotations

import json
import sys
import threading


def _si(value: float, unit: str = "", digits: int = 3) -> str:
    """qperf's style: three significant digits (its -e sets more) and a decimal prefix
    (32.8 MB/sec, 510 K/sec)."""
    value = float(f"{value:.{digits}g}")  # round first: 999,999 is 1 M, not "1e+03 K"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".rstrip()


def _time_us(us: float | None, digits: int = 3) -> str:
    if us is None:
        return "-"
    if us >= 1e6:
        return f"{us / 1e6:.{digits}g} sec"
    if us >= 1e3:
        return f"{us / 1e3:.{digits}g} ms"
    return f"{us:.{digits}g} us"


UNIFIED = {"B/sec": "bytes/sec", "b/sec": "bits/sec", "/sec": "/sec"}   # qperf -uu's units


def _count(n) -> str:
    # round, not int(): a row's count is rate * interval_s, and interval_s is rounded,
    # so 7 packets can come back as 6.99998
    return f"{round(n):,}"


def http_row_line(row: dict) -> str:
    """One line per interval of an HTTP load: tps, response times, errors, connections."""
    errs = sum(row[f"{k}_per_s"] for k in ("err_connect", "err_timeout", "err_reset", "err_read", "err_tls")) * row["interval_s"]
    parts = [f"{row['time_s']:6.1f}s", f"tps {_si(row['http_resp_per_s']):>7}",
             f"rt p50 {_time_us(row['lat_p50_us'])} p99 {_time_us(row['lat_p99_us'])}",
             f"2xx {_count(row['http_2xx_per_s'] * row['interval_s'])}",
             f"4xx {_count(row['http_4xx_per_s'] * row['interval_s'])}",
             f"5xx {_count(row['http_5xx_per_s'] * row['interval_s'])}",
             f"err {_count(errs)}", f"conn {row['sock_current']}",
             f"bitsRx {_si(row['bits_rx_per_s'], 'bps')}", f"cpu {row['cpu_pct']:.0f}%"]
    return "  ".join(parts)


def row_line(row: dict) -> str:
    """One dperf-style line per interval."""
    parts = [f"{row['time_s']:6.1f}s",
             f"pktTx {_si(row['pkts_tx_per_s'], '/s'):>9}",
             f"pktRx {_si(row['pkts_rx_per_s'], '/s'):>9}",
             f"bitsTx {_si(row['bits_tx_per_s'], 'bps'):>10}",
             f"bitsRx {_si(row['bits_rx_per_s'], 'bps'):>10}",
             f"dropTx {_count(row['drop_tx_per_s'] * row['interval_s'])}",
             f"lost {_count(row['seq_lost_per_s'] * row['interval_s'])}",
             f"dup {_count(row['seq_dup_per_s'] * row['interval_s'])}",
             f"reord {_count(row['seq_reorder_per_s'] * row['interval_s'])}"]
    if row.get("lat_p50_us") is not None:
        parts.append(f"lat p50 {_time_us(row['lat_p50_us'])} p99 {_time_us(row['lat_p99_us'])}")
    parts.append(f"cpu {row['cpu_pct']:.0f}%")
    return "  ".join(parts)


def summary_text(s: dict, point: dict | None = None, bits: bool = False, digits: int = 3,
                 unify: bool = False) -> str:
    """A qperf-style summary, then what qperf does not show. As qperf's options: bits,
    bandwidth in bits/s (-ub: 21.7 Gb/sec); digits, significant digits (-e); unify, whole
    numbers in base units (-uu: 21700000000 bits/sec, 13672 ns)."""
    test = s["test"]
    lines = [f"{test}:"]

    def rate(value, unit):
        return f"{round(value)} {UNIFIED[unit]}" if unify else _si(value, unit, digits)

    def dur(us):
        return f"{round(us * 1e3)} ns" if unify and us is not None else _time_us(us, digits)

    def bw(nbytes):
        per_s = nbytes / s["duration_s"] if s["duration_s"] else 0
        return rate(8 * per_s, "b/sec") if bits else rate(per_s, "B/sec")

    def put(name, value):
        lines.append(f"    {name:<13} =  {value}")

    for name, value in (point or {}).items():  # a sweep point, as qperf prints msg_size
        put(name, f"{value} bytes" if name == "msg_size" else value)

    if test == "http":  # nGrinder's summary, then perfkit's
        put("Vuser", s.get("vusers"))
        put("TPS", f"{s['tps']:.1f}")
        put("Mean Test Time", _time_us(s["lat_mean_us"]))
        put("Error rate", f"{s['error_rate_pct'] or 0:.2f} % ({_count(s['http_err'])} of {_count(s['requests'])})")
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
    elif test == "udp_bw":
        put("send_bw", bw(s["bytes_tx"]))
        put("recv_bw", bw(s["bytes_rx"]))
        put("msg_rate", rate(s["msg_rate"], "/sec"))
        lost = s["lost"]
        put("loss", f"{s['loss_pct'] or 0:.3g} % ({_count(lost)} of {_count(s['pkts_tx'])} sent)"
            + (f", {_count(s['dup'])} dup, {_count(s['reorder'])} reordered" if s["dup"] or s["reorder"] else ""))
    elif test == "tcp_bw":
        put("bw", bw(s["bytes_rx"]))
        put("msg_rate", rate(s["msg_rate"], "/sec"))
    else:  # latency tests: qperf's latency is half the mean round trip
        put("latency", dur(s["latency_us"]))
        put("msg_rate", rate(s["msg_rate"], "/sec"))
    if s.get("lat_count"):
        what = {"udp_bw": "one-way", "http": "response time"}.get(test, "round trip")
        put("lat", f"{what} p50 {dur(s['lat_p50_us'])}  p99 {dur(s['lat_p99_us'])}  "
                   f"p99.9 {dur(s['lat_p999_us'])}  max {dur(s['lat_max_us'])}  "
                   f"jitter {dur(s['jitter_us'])}")
    if s.get("messages"):  # qperf's -n: say if the time limit came first
        sent = s.get("msgs_sent", 0)
        put("messages", f"{_count(sent)} sent" + ("" if sent >= s["messages"] else
            f" of the {_count(s['messages'])} asked: the time limit came first"))
    if s.get("drop_tx"):
        put("drop_tx", _count(s["drop_tx"]))
    if "loc_cpus_used" in s:  # a remote test: qperf -v's figures
        put("loc_cpus_used", f"{s['loc_cpus_used']:.0f} % cpus")
        put("rem_cpus_used", f"{s['rem_cpus_used']:.0f} % cpus")
        for name in ("send_cost", "recv_cost"):
            ms = s.get(f"{name}_ms_per_gb")
            if ms is not None:
                put(name, f"{round(ms * 1e6)} ns/GB" if unify else f"{ms:.{digits}g} ms/GB")
    else:
        workers = ", ".join(f"{k} {v:.0f}%" for k, v in s["cpu_pct_by_worker"].items())
        put("cpu", f"{s['cpu_pct']:.0f}% of one core ({workers})")
    if s.get("error"):
        put("error", s["error"])
    return "\n".join(lines)


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
