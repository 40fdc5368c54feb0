"""HTTP over kernel sockets: HttpLoad (virtual users against a server) and HttpServe
(perfkit's own server)."""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from perfkit.fields import SECONDS, check_declared, opt, whole_number
from perfkit.lab import Lab
from perfkit.spec import (HTTP_METHODS, LAB_NAME, MAX_DURATION_S, MAX_RATE_PPS, MAX_RESPONSE, MAX_URLS,
                          MAX_USERS, Serial, URL_ORDERS, check_target, parse_url, split_url)
from perfkit.units import Rate, parse_duration, parse_rate, parse_size


def _is_address(host: str) -> bool:
    """Whether a URL's host is an IP address (nothing to resolve)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


_int_in = whole_number   # value as an int in lo..hi, else ValueError naming the field


@dataclass(frozen=True)
class HttpLoad(Serial):
    """HTTP load with virtual users against a server (nGrinder, wrk, k6's job).

    Each field declares its help, unit and range beside its default (perfkit.fields)."""
    url: str | list = opt(
        "http://127.0.0.1:8080/",
        help=("http[s]://HOST[:PORT]/PATH; HOST is an address or a DNS name (https: TLS through the "
              "system OpenSSL, the certificate is not checked). Or a list of URLs on one HOST:PORT: "
              'each request takes the next one (url_order="cycle") or one at random '
              '(url_order="random")'),
        unit="http[s]://HOST[:PORT]/PATH; several: space between")
    users: int = opt(
        10, help="virtual users: one connection each (1..100000)", unit="virtual users", lo=1, hi=MAX_USERS,
        short="-u",
        cli_help=("virtual users, one connection each (default 10); a ladder, one run per step: "
                  "50,100,200 or 100:1000:+100"))
    duration: float | str = opt(
        10.0, help="how long to load (10s, 2m)", unit=SECONDS, range_text="1ms..24h",
        short="-t",
        cli_help="how long (default 10s)")
    rate: Rate | str | float | None = opt(
        None,
        help=("open loop: requests/s in total (1000, 50k); response times then count from each "
              "request's intended send time, as wrk2 does. None: closed loop, each user sends again "
              "when answered"),
        unit="requests/s (500, 50k); empty: closed loop",
        short="-r",
        cli_help="open loop: requests/s in total, latency from intended send times")
    think: float | str = opt(
        0.0, help="closed loop: pause after each response (0, 100ms)", unit=SECONDS, range_text="0..1h",
        cli_help="pause after each response (closed loop): 100ms", advanced=True, applies={"rate": False})
    ramp: float | str = opt(
        0.0, help="users start evenly over this time", unit=SECONDS, range_text="0..24h",
        cli_help="start the users evenly over this time", advanced=True)
    stages: str | list | None = opt(
        None,
        help=("closed loop: load stages (k6's stages), DURATION:USERS each, e.g. 30s:100,1m:100,30s:500,30s:0: the "
              "users ramp linearly from the previous stage's count (0 at the start) to each stage's; users and "
              "duration then come from the plan (its most users, its total time)"),
        unit="DURATION:USERS,... (30s:100,1m:100,30s:0)",
        cli_help="load stages, closed loop: 30s:100,1m:100,30s:500,30s:0 (ramp to 100 users over 30 s, hold, ...)",
        advanced=True)
    rate_stages: str | list | None = opt(
        None,
        help=("open loop: rate stages (k6's ramping arrival rate), DURATION:RATE each, e.g. 10s:1000,20s:5k,10s:0: "
              "the requests/s ramp linearly from the previous stage's (0 at the start) to each stage's, in C; "
              "rate and duration then come from the plan (its highest rate, its total time), users are the "
              "connections the requests share"),
        unit="DURATION:RATE,... (10s:1000,20s:5k,10s:0)",
        cli_help="load stages, open loop: 10s:1000,20s:5k,10s:0 (requests/s ramp linearly to each stage's rate)",
        advanced=True)
    keepalive: bool = opt(
        True, help="reuse connections (False: a new connection per request)", advanced=True)
    method: str = opt(
        "GET", help="the request (GET/HEAD/POST/PUT/DELETE; headers as a dict)", choices=HTTP_METHODS,
        short="-X",
        cli_help="GET HEAD POST PUT DELETE (default GET)")
    headers: dict | None = opt(
        None, help="the request (GET/HEAD/POST/PUT/DELETE; headers as a dict)", unit="one 'Name: value' a line",
        advanced=True)
    body: str | bytes | None = opt(
        None, help="the request (GET/HEAD/POST/PUT/DELETE; headers as a dict)", widget="area",
        flag="--data", short="-d",
        cli_help="request body", advanced=True)
    connect_timeout: float | str = opt(
        5.0, help="a connection not made by then is an error", unit=SECONDS, range_text="1ms..10m", advanced=True)
    response_timeout: float | str = opt(
        10.0, help="a response not complete by then is an error", unit=SECONDS, range_text="1ms..1h",
        flag="--timeout",
        cli_help="response timeout (default 10s)", advanced=True)
    url_order: str = opt(
        "cycle", help='"cycle" or "random": how requests pick from a URL list',
        unit="how requests pick from a URL list", choices=URL_ORDERS, check=False, advanced=True)   # its own message
    lab: str | None = opt(
        None,
        help=("run the client in this lab's first host (h1), e.g. against a server in h2 (url "
              "http://<h2's address>/): the lab's link, impaired or not, is then the path under test"),
        unit="lab name",
        cli_help="run the client in this lab's host h1 (perfkit lab up)")
    threads: int = opt(
        1,
        help=("client threads (each its own epoll loop), the users and the rate split evenly between "
              "them, as wrk -t"),
        unit="client threads", range_text="1..64, at most users",
        cli_help="client threads, users split between them (default 1; wrk -t)", advanced=True)
    processes: int = opt(
        1,
        help=("client processes, each running `threads` threads with its own open-file limit: for "
              "more users than one process may hold open (RLIMIT_NOFILE, whose hard limit only "
              "CAP_SYS_RESOURCE raises)"),
        cli_help=("client processes of --threads threads each, every one with its own open-file limit: for more "
                  "users than one process may open"), advanced=True)

    test = "http"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        if self.rate_stages is not None:   # the plan sets rate (its highest) and duration (its total)
            if self.stages is not None or parse_duration(self.ramp, "ramp") or parse_duration(self.think, "think"):
                raise ValueError("rate_stages: an open loop's plan; leave stages, ramp and think out")
            put("rate_stages", parse_rate_stages(self.rate_stages))
            top = max(r for _, r in self.rate_stages)
            if self.rate is not None and _requests_per_s(self.rate) != top:   # a saved spec has it: the same
                raise ValueError("rate_stages: the plan sets the rate (its highest); leave rate out")
            put("rate", Rate(top, "pps"))
            put("duration", sum(d for d, _ in self.rate_stages))
        if self.stages is not None:   # the plan sets users (its most) and duration (its total)
            put("stages", parse_stages(self.stages))
            put("users", max(u for _, u in self.stages))
            put("duration", sum(d for d, _ in self.stages))
            if self.rate is not None or parse_duration(self.ramp, "ramp"):
                raise ValueError("stages: a closed loop's plan; leave rate and ramp out")
        check_declared(self)   # users, method
        if isinstance(self.url, (list, tuple)):
            if not 1 <= len(self.url) <= MAX_URLS:
                raise ValueError(f"url: a list of 1..{MAX_URLS} URLs, not {len(self.url)}")
            put("url", [str(u) for u in self.url] if len(self.url) > 1 else str(self.url[0]))
        if self.lab is not None and not LAB_NAME.fullmatch(str(self.lab)):
            raise ValueError(f"lab: {self.lab!r} is not a lab name (1-8 lowercase letters or digits)")
        netns = None   # a lab client resolves names as its lab host does (that host's hosts file)
        if self.lab is not None and any(not _is_address(split_url(u)[0]) for u in self.urls):
            try:
                netns = Lab.attach(self.lab).hosts[0].netns
            except ValueError:
                raise ValueError(f"lab: no lab {self.lab!r} is up (perfkit lab up; perfkit lab status)") from None
        first = parse_url(self.urls[0], netns=netns)
        addresses = {split_url(self.urls[0])[0]: first[0]}   # each name resolved once
        object.__setattr__(self, "_address", first[0])   # where the load goes (not a field: not saved)
        for u in self.urls[1:]:  # one connection pool: every URL names the same server
            name, port, _ = split_url(u)
            if name not in addresses:
                addresses[name] = check_target(name, "url", netns)
            if (addresses[name], port) != first[:2] or u.split(":", 1)[0] != self.urls[0].split(":", 1)[0]:
                raise ValueError(f"url: {u!r} is not on {self.urls[0].split('/')[2]} with the same scheme "
                                 "as the first URL (one server per load)")
        if self.tls:
            try:
                from perfkit._sock import HAVE_TLS  # the native engine: missing from a broken build
            except ImportError:  # the engine says so when it is built
                HAVE_TLS = True
            if not HAVE_TLS:
                raise ValueError("url: https needs perfkit built with OpenSSL (Debian: apt install libssl-dev, "
                                 "then reinstall perfkit)")
        if self.url_order not in URL_ORDERS:
            raise ValueError(f"url_order: {self.url_order!r} is not 'cycle' or 'random'")
        put("threads", _int_in(self.threads, "threads", 1, min(64, self.users)))
        put("processes", _int_in(self.processes, "processes", 1, min(16, self.users // self.threads)))
        for name, lo, hi in (("duration", 1e-3, MAX_DURATION_S), ("think", 0, 3600), ("ramp", 0, MAX_DURATION_S),
                             ("connect_timeout", 1e-3, 600), ("response_timeout", 1e-3, 3600)):
            v = parse_duration(getattr(self, name), name)
            if not lo <= v <= hi:
                raise ValueError(f"{name}: {getattr(self, name)!r} is out of range {lo:g}..{hi:g} s")
            put(name, v)
        if self.rate is not None:
            put("rate", Rate(_requests_per_s(self.rate), "pps"))
        for k, v in (self.headers or {}).items():
            if any(c in str(k) + str(v) for c in "\r\n") or ":" in str(k) or not str(k):
                raise ValueError(f"headers: {k!r}: {v!r} is not a valid header")
            if str(k).lower() in ("content-length", "transfer-encoding"):
                raise ValueError(f"headers: {k!r} is set from the body; leave it out")
        if not isinstance(self.keepalive, bool):
            raise ValueError(f"keepalive: {self.keepalive!r} is not true or false")
        if len(self.request_bytes()) > MAX_RESPONSE:
            raise ValueError(f"body: the requests (one per URL) are over {MAX_RESPONSE} bytes together")

    @property
    def size(self) -> int:
        return len(self._request(self.urls[0]))

    @property
    def messages_per_second(self) -> float:
        return self.rate.value if self.rate else 0.0

    @property
    def urls(self) -> list[str]:
        """The URL list (one URL: a list of one)."""
        return list(self.url) if isinstance(self.url, list) else [self.url]

    @property
    def tls(self) -> bool:
        """https: every URL of the list is https (one scheme per load)."""
        return self.urls[0].lower().startswith("https:")

    def target(self) -> tuple[str, int]:
        """(address, port): the server, its name resolved when the spec was made."""
        return self._address, split_url(self.urls[0])[1]

    def request_bytes(self) -> bytes:
        """Every request of the URL list, one after another, in the list's order
        (one URL: the request every virtual user sends)."""
        return b"".join(self._request(u) for u in self.urls)

    def _request(self, url: str) -> bytes:
        host, port, path = split_url(url)   # Host: the name as the URL has it
        host = f"[{host}]" if ":" in host else host
        body = self.body.encode() if isinstance(self.body, str) else (self.body or b"")
        mine = {str(k).lower() for k in (self.headers or {})}
        default = 443 if self.tls else 80
        hdrs = {k: v for k, v in (("Host", host if port == default else f"{host}:{port}"), ("User-Agent", "perfkit"))
                if k.lower() not in mine}  # the caller's Host or User-Agent replaces ours
        hdrs.update(self.headers or {})
        if not self.keepalive:
            hdrs["Connection"] = "close"
        if body or self.method in ("POST", "PUT"):
            hdrs["Content-Length"] = str(len(body))
        head = f"{self.method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        return head.encode() + b"\r\n" + body


@dataclass(frozen=True)
class HttpServe(Serial):
    """perfkit's own HTTP server: the same response (status 200, size bytes of body)
    to every request, keep-alive unless the client asks to close. For labs and demos."""
    host: str = opt(
        "127.0.0.1", help="where to listen (loopback or a lab address; port 0 = any)", unit="IP address",
        cli_help="loopback or a lab address (default 127.0.0.1)")
    port: int = opt(
        8080, help="where to listen (loopback or a lab address; port 0 = any)", unit="port number; 0: any", lo=0,
        hi=65535,
        cli_help="port (default 8080; 0 = any)")
    size: int | str = opt(
        100, help="body bytes (0..1 MiB)", unit="body bytes (100, 4K)", lo=0, hi=MAX_RESPONSE - 256,
        check=False,  # a size with units (4K): parsed and checked in __post_init__
        cli_help="response body bytes (default 100)")
    duration: float | str = opt(
        60.0, help="how long to serve", unit=SECONDS, range_text="above 0, at most 24h",
        short="-t",
        cli_help="how long to serve (default 60s)")
    connections: int = opt(
        10_000, help="connections served at once", unit="connections", lo=1, hi=MAX_USERS,
        cli_help="connections served at once (default 10000)", advanced=True)
    idle_timeout: float | str = opt(
        10.0, help=("a connection that has not sent a whole request this long after it opened or got its "
                    "last answer is closed, so idle clients cannot hold every connection slot"),
        unit=SECONDS, range_text="1ms..1h",
        cli_help="close a connection that sends no whole request for this long (default 10s)", advanced=True)

    test = "http_serve"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        check_declared(self)   # port, connections
        put("host", check_target(self.host))
        size = parse_size(self.size, "size")
        if not 0 <= size <= MAX_RESPONSE - 256:
            raise ValueError(f"size: {size} bytes is out of range 0..{MAX_RESPONSE - 256}")
        put("size", size)
        d = parse_duration(self.duration, "duration")
        if not 0 < d <= MAX_DURATION_S:
            raise ValueError(f"duration: {self.duration!r} is out of range (above 0, at most 24h)")
        put("duration", d)
        t = parse_duration(self.idle_timeout, "idle_timeout")
        if not 1e-3 <= t <= 3600:
            raise ValueError(f"idle_timeout: {self.idle_timeout!r} is out of range 0.001..3600 s")
        put("idle_timeout", t)

    messages_per_second = 0.0

    def response_bytes(self) -> bytes:
        return (f"HTTP/1.1 200 OK\r\nServer: perfkit\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {self.size}\r\n\r\n").encode() + b"x" * self.size


MAX_STAGES = 64   # the socket engine's PK_SOCK_MAX_STAGES


def _requests_per_s(value, field: str = "rate") -> float:
    """A request rate (5000, 50k, 50kpps, a Rate) as requests/s above 0; ValueError naming field."""
    if isinstance(value, Rate):
        rate = value
    else:
        text = str(value).strip()  # requests/s: a bare 50k means 50k/s, as the docs say
        rate = parse_rate(text + "pps" if re.fullmatch(r"[0-9.]+[kMG]", text) else text, field)
    if rate.unit != "pps" or not 0 < rate.value <= MAX_RATE_PPS:
        raise ValueError(f"{field}: {value!r} is not a number of requests/s above 0 (e.g. 5000, 50k)")
    return float(rate.value)


def _stage_pairs(text, field: str, example: str, value):
    """[[seconds, value(v)], ...] from 'DURATION:V,...' (or such pairs), each duration 0..24h."""
    items = [p for p in str(text).split(",")] if isinstance(text, str) else list(text)
    out = []
    for item in items:
        pair = item.strip().split(":") if isinstance(item, str) else list(item)
        if len(pair) != 2:
            raise ValueError(f"{field}: {item!r} is not {example}")
        secs = parse_duration(pair[0], field)
        if not 0 <= secs <= MAX_DURATION_S:
            raise ValueError(f"{field}: {item!r}: the duration is out of range 0..24h")
        out.append([secs, value(pair[1])])
    return out


def parse_rate_stages(text) -> list[list]:
    """[[seconds, requests/s], ...] from '10s:1000,20s:5k,10s:0'; ValueError naming what is wrong."""
    out = _stage_pairs(text, "rate_stages", "DURATION:RATE (e.g. 10s:1000)",
                       lambda v: 0.0 if str(v).strip() in ("0", "0.0") or v == 0 else _requests_per_s(v, "rate_stages"))
    if not 1 <= len(out) <= MAX_STAGES:
        raise ValueError(f"rate_stages: 1..{MAX_STAGES} stages, not {len(out)}")
    if not any(r for _, r in out) or not 1e-3 <= sum(d for d, _ in out) <= MAX_DURATION_S:
        raise ValueError(f"rate_stages: {text!r} needs some rate and 1ms..24h in total")
    return out


def parse_stages(text) -> list[list]:
    """[[seconds, users], ...] from '30s:100,1m:100,30s:0' (or such pairs); ValueError naming what is wrong."""
    out = _stage_pairs(text, "stages", "DURATION:USERS (e.g. 30s:100)", lambda v: _int_in(v, "stages", 0, MAX_USERS))
    if not 1 <= len(out) <= MAX_STAGES:
        raise ValueError(f"stages: 1..{MAX_STAGES} stages, not {len(out)}")
    if not any(u for _, u in out) or not 1e-3 <= sum(d for d, _ in out) <= MAX_DURATION_S:
        raise ValueError(f"stages: {text!r} needs some users and 1ms..24h in total")
    return out


# ------------------------------------------------------------------ the kind
SPECS = (HttpLoad, HttpServe)
ENGINE = {HttpLoad: "socket", HttpServe: "socket"}   # when perfkit.Run is given none
# the counter groups (perfkit.stats.GROUPS) HTTP load and the HTTP server write
COUNTER_GROUPS = ("traffic", "sock", "http", "latency", "cpu")


def load_figures(t: dict, summary: dict) -> dict:
    """HTTP load's summary in nGrinder's terms (TPS, mean test time, error rate) and its
    counts, from the run's counter totals t; the rates over the senders' active time."""
    active_s = summary["duration_s"]
    out = {"tps": t["http_resp"] / active_s if active_s > 0 else 0.0,
           "requests": t["http_req"], "responses": t["http_resp"],
           "mean_test_time_ms": summary["lat_mean_us"] / 1000 if summary["lat_mean_us"] is not None else None,
           # every request that started and got no answer: failed, or cut off by the stop (http_cut)
           "error_rate_pct": 100.0 * (t["http_err"] + t["http_cut"]) / t["http_req"] if t["http_req"] else None,
           "unanswered": t["http_err"] - t["http_4xx"] - t["http_5xx"] + t["http_cut"]}
    for k in ("http_2xx", "http_3xx", "http_4xx", "http_5xx", "http_err", "err_connect", "err_timeout",
              "err_reset", "err_read", "sock_open", "err_tls", "http_cut"):
        out[k] = t[k]
    return out


SUMMARY = {HttpLoad: load_figures}
# a stage plan, (what it sets, [(seconds, that at the stage's end)]): perfkit.run summarizes each stage
STAGES = {HttpLoad: lambda spec: ("users", spec.stages) if spec.stages else ("rate", spec.rate_stages)
          if spec.rate_stages else None}   # perfkit.stats.summarize's figures from the counter totals


def plan(spec) -> dict:
    """The socket engine's plan (perfkit.engines.socket): the HTTP server's one worker, or
    HTTP load's client workers, over child processes when processes > 1 (each its own
    open-file limit)."""
    workers = http_workers(spec)
    out = {"engine": "socket", "spec": type(spec).__name__}
    if isinstance(spec, HttpLoad) and spec.processes > 1:
        t = spec.threads
        return {**out, "handle": "process", "fd_field": "users",
                "groups": [workers[k * t:(k + 1) * t] for k in range(spec.processes)]}
    return {**out, "handle": "sock", "workers": workers,
            "fd_limit": (getattr(spec, "users", 0) + getattr(spec, "connections", 0),
                         "users" if isinstance(spec, HttpLoad) else "connections")}


def http_workers(spec) -> list[dict]:
    """HttpLoad: one client worker with every virtual user; HttpServe: one server."""
    if isinstance(spec, HttpServe):
        return [{"role": "http_server", "local": (spec.host, spec.port), "size": 1,
                 "duration": spec.duration, "users": spec.connections, "blob": spec.response_bytes(),
                 "response_timeout": spec.idle_timeout}]   # the server's idle timeout
    host, port = spec.target()
    where = {}
    if spec.lab is not None:  # the client works in the lab's first host
        try:
            where["netns"] = Lab.attach(spec.lab).hosts[0].netns_path
        except ValueError:
            raise ValueError(f"lab: no lab {spec.lab!r} is up (perfkit lab up; perfkit lab status)") from None
    n = spec.threads * spec.processes  # users and rate split evenly; user_base keeps source addresses global
    share = lambda total, i: total // n + (1 if i < total % n else 0)  # noqa: E731 (users split evenly)
    sizes = [share(spec.users, i) for i in range(n)]
    return [{**where, "role": "http_client", "local": ("::" if ":" in host else "0.0.0.0", 0), "remote": (host, port),
             "size": 1, "duration": spec.duration, "users": sizes[i], "user_base": sum(sizes[:i]),
             "rate": spec.messages_per_second * sizes[i] / spec.users,
             "keepalive": spec.keepalive, "think": spec.think, "ramp": spec.ramp,
             "connect_timeout": spec.connect_timeout, "response_timeout": spec.response_timeout,
             "blob": spec.request_bytes(), "url_random": spec.url_order == "random",
             "tls": spec.tls, "stages": [(d, share(u, i)) for d, u in spec.stages or ()],
             "rate_stages": [(d, r * sizes[i] / spec.users) for d, r in spec.rate_stages or ()]} for i in range(n)]


def summary_extra(spec, handle, roles) -> dict:
    """Figures beyond perfkit.stats.summarize: nGrinder's Vuser, and HTTP load's counts per URL."""
    out = {}
    if hasattr(spec, "users"):
        out["vusers"] = spec.users
    if hasattr(handle, "http_urls") and hasattr(spec, "urls"):
        counts = [handle.http_urls(i) for i, r in enumerate(roles) if r == "http_client"]
        counts = [c for c in counts if len(c) == len(spec.urls)]  # [] from a worker that died
        out["per_url"] = [{"url": u, "requests": sum(c[k][0] for c in counts),
                           "responses": sum(c[k][1] for c in counts),
                           "failed": sum(c[k][2] for c in counts)}
                          for k, u in enumerate(spec.urls)]
    return out




# ------------------------------------------------------------------ its commands: perfkit http, http-serve
from perfkit.fields import add_option, advanced_group, applies, cluster_option  # noqa: E402 (the command-line part of the kind, kept at its end)


def _http_parser(sub) -> None:
    ht = sub.add_parser("http", help="HTTP load with virtual users (nGrinder/wrk style)")
    ht.add_argument("url", nargs="?", help="http://HOST[:PORT]/PATH, HOST an address or a DNS name")
    ht.add_argument("--url-file", metavar="FILE", help="URLs, one a line (# comments): requests go through "
                                                        "them in turn (after URL, if given)")
    applies(advanced_group(ht).add_argument("--random", action="store_true",   # url_order
                                            help="with several URLs: each request picks one at random"),
            url_file=True)
    for name in ("lab", "threads", "processes", "users", "duration", "rate", "think", "ramp", "stages", "rate_stages"):
        add_option(ht, HttpLoad, name)
    ka = advanced_group(ht).add_mutually_exclusive_group()   # keepalive
    ka.add_argument("--keepalive", dest="keepalive", action="store_true", default=True,
                    help="reuse connections (default)")
    ka.add_argument("--close", dest="keepalive", action="store_false", help="a new connection per request")
    add_option(ht, HttpLoad, "method")
    advanced_group(ht).add_argument("-H", "--header", action="append", default=[], metavar="'NAME: VALUE'",
                                    help="add a header")   # headers
    for name in ("body", "connect_timeout", "response_timeout"):   # -d --data, --timeout
        add_option(ht, HttpLoad, name)
    ht.add_argument("--threshold", action="append", metavar="'METRIC<VALUE'",
                    help="pass/fail on the summary, repeatable: 'error_rate<1%%', 'p99<200ms', 'tps>5000'; "
                         "exit status 3 when any fails (perfkit.thresholds)")
    ht.add_argument("--watch", action="append", metavar="NAME=PID[,PID]",
                    help="record a process's CPU beside the run (e.g. the server: --watch server=1234), "
                         "repeatable: proc_NAME_cpu_pct per interval (perfkit.hostmetrics)")
    ht.add_argument("--interval", default="1s", help="row interval (default 1s)")
    ht.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
    ht.add_argument("-o", "--save", metavar="FILE.parquet", help="save the run as Parquet")
    cluster_option(ht)


def _http_serve_parser(sub) -> None:
    hs = sub.add_parser("http-serve", help="perfkit's own HTTP server: a fixed response to every request")
    for name in ("host", "port", "size", "duration", "connections", "idle_timeout"):
        add_option(hs, HttpServe, name)
    hs.add_argument("--interval", default="1s", help="row interval (default 1s)")
    hs.add_argument("--json", action="store_true", help="JSON lines: one per row, then the summary")
    hs.add_argument("--lab", metavar="NAME", help="serve inside this lab's host (its namespace and cgroup): "
                    "--host h2 (the default: the last host) or one of its addresses")


def load_from_args(a) -> HttpLoad:
    """perfkit http's spec from its parsed arguments (URL and --url-file, -H headers)."""
    headers = {}
    for h in a.header:
        if ":" not in h:
            raise ValueError(f"header: {h!r} is not NAME: VALUE")
        k, v = h.split(":", 1)
        headers[k.strip()] = v.strip()
    urls = [a.url] if a.url else []
    if a.url_file:
        try:
            text = open(a.url_file).read()
        except OSError as exc:
            raise ValueError(f"url-file: {a.url_file}: {exc.strerror}") from None
        urls += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if not urls:
        raise ValueError("url: give a URL or --url-file FILE")
    users = ladder_users(a)[0] if ladder_users(a) else a.users   # a ladder: its first step (perfkit.ladder)
    return HttpLoad(url=urls if len(urls) > 1 else urls[0], url_order="random" if a.random else "cycle", users=users,
                    duration=a.duration, rate=a.rate, think=a.think, ramp=a.ramp,
                    keepalive=a.keepalive, method=a.method, headers=headers or None, body=a.data,
                    connect_timeout=a.connect_timeout, response_timeout=a.timeout, lab=a.lab, stages=a.stages,
                    rate_stages=a.rate_stages,
                    threads=a.threads, processes=a.processes)


def ladder_users(a) -> list[int] | None:
    """--users 50,100,200 or 100:1000:+100: the ladder's steps (perfkit.ladder); None for one user count."""
    return parse_users(a.users) if is_ladder(a.users) else None


# ------------------------------------------------------------------ user ladders: their steps
MAX_STEPS = 100


def _whole(v: str, text: str) -> int:
    try:
        n = int(v.strip(), 10)
    except ValueError:
        raise ValueError(f"users: {text!r}: {v.strip()!r} is not a whole number of users") from None
    if not 1 <= n <= MAX_USERS:
        raise ValueError(f"users: {text!r}: {n} is out of range 1..{MAX_USERS}")
    return n


def parse_users(text) -> list[int]:
    """The steps of a ladder: 50,100,200 (a list), FROM:TO:+N or FROM:TO:*N (users:100:1000:+100
    too, as qperf's -oo writes it), or one number (one step)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return [_whole(str(text), str(text))]
    if isinstance(text, (list, tuple)):
        out = [_whole(str(v), str(list(text))) for v in text]
    else:
        t = str(text).strip()
        parts = t.split(":")
        if parts[0].strip() == "users":
            parts = parts[1:]
        if len(parts) == 1:
            out = [_whole(v, t) for v in parts[0].split(",")]
        elif len(parts) == 3:
            lo, hi, step = _whole(parts[0], t), _whole(parts[1], t), parts[2].strip()
            if lo > hi:
                raise ValueError(f"users: {t!r}: FROM ({lo}) is above TO ({hi})")
            if step[:1] not in ("+", "*"):
                raise ValueError(f"users: {t!r}: the step {step!r} is not +N or *N (e.g. 100:1000:+100)")
            try:
                n = float(step[1:]) if step[0] == "*" else int(step[1:], 10)
            except ValueError:
                raise ValueError(f"users: {t!r}: the step {step!r} is not +N or *N with a number N") from None
            if not (n > 1 if step[0] == "*" else n >= 1):
                raise ValueError(f"users: {t!r}: the step {step!r} does not grow")
            out, v = [], lo
            while v <= hi and len(out) <= MAX_STEPS:
                out.append(v)
                v = max(v + 1, int(v * n)) if step[0] == "*" else v + n
        else:
            raise ValueError(f"users: {t!r} is not N, N1,N2,... or FROM:TO:+STEP (e.g. 100:1000:+100)")
    if not out or len(out) > MAX_STEPS:
        raise ValueError(f"users: {text!r} has {'no' if not out else 'more than ' + str(MAX_STEPS)} steps; "
                         f"a ladder has 1..{MAX_STEPS}")
    return out


def is_ladder(text) -> bool:
    """users given as several steps (a list or a range), not one number."""
    return isinstance(text, (list, tuple)) or any(c in str(text) for c in ",:")




def serve_from_args(a) -> HttpServe:
    """perfkit http-serve's spec from its parsed arguments."""
    return HttpServe(host=a.host, port=a.port, size=a.size, duration=a.duration, connections=a.connections,
                     idle_timeout=a.idle_timeout)


CLI_PARSERS = {"http": _http_parser, "http-serve": _http_serve_parser}   # command -> adds its parser to subparsers
CLI_SPECS = {"http": load_from_args, "http-serve": serve_from_args}   # command -> its spec from parsed args


def cli_header(spec) -> str:
    """The command's first line: what is about to run."""
    if isinstance(spec, HttpServe):
        return f"perfkit http-serve: {spec.host} port {spec.port}, {spec.size} B responses, {spec.duration:g} s"
    where = spec.url if len(spec.urls) == 1 else f"{len(spec.urls)} URLs ({spec.url_order})"
    if spec.stages:
        plan = ",".join(f"{d:g}s:{u}" for d, u in spec.stages)
        return (f"perfkit http {spec.method} {where}: stages {plan} (up to {spec.users} users), "
                f"{'keep-alive' if spec.keepalive else 'a connection per request'}, closed loop, {spec.duration:g} s")
    if spec.rate_stages:
        plan = ",".join(f"{d:g}s:{r:g}" for d, r in spec.rate_stages)
        return (f"perfkit http {spec.method} {where}: rate stages {plan} requests/s (open loop), {spec.users} users, "
                f"{'keep-alive' if spec.keepalive else 'a connection per request'}, {spec.duration:g} s")
    return (f"perfkit http {spec.method} {where}: {spec.users} users, "
            f"{'keep-alive' if spec.keepalive else 'a connection per request'}, "
            f"{str(spec.rate) + ' (open loop)' if spec.rate else 'closed loop'}, {spec.duration:g} s")


def _load_title(spec) -> tuple:
    return (f"http {spec.method} {spec.url}", f"{spec.users} users",
            f"{spec.rate.value:g} req/s" if spec.rate is not None else "closed loop")


# the dashboard's title: its parts before the duration (perfkit.ui.charts.spec_title)
TITLE = {HttpLoad: _load_title,
         HttpServe: lambda spec: (f"http_serve on {spec.host}:{spec.port}", f"{spec.size} B bodies")}
LAYOUT = {HttpLoad: "http", HttpServe: "http_serve"}   # perfkit.ui.charts.LAYOUTS: the dashboard's charts
TASKS = {HttpLoad: ("run", "ladder"), HttpServe: ("run",)}   # the panel's tasks (ladder: perfkit.ladder)
