"""http-serve against clients that are not perfkit's: malformed requests get a 4xx
answer and a close, idle or dripping connections are closed at the idle timeout so
they cannot hold every slot; and perfkit's client against servers that delimit a
response by closing or never finish one. Raw sockets, loopback only, bounded in time."""
import argparse
import random
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

import perfkit
from perfkit._sock import SockEngine
from perfkit.kinds.http import http_workers
from perfkit.spec import HttpLoad, HttpServe
from perfkit.stats import INDEX

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def serve():
    """Start perfkit's server in this process: serve(**HttpServe fields) -> (port, counters())."""
    engines = []

    def start(**kw):
        eng = SockEngine(http_workers(HttpServe(**{"port": 0, "size": 20, "duration": 60, **kw})))
        eng.start()
        engines.append(eng)
        return eng.bound_port(0), lambda: {k: eng.snapshot()[0][0][i] for k, i in INDEX.items()}
    yield start
    for eng in engines:
        eng.stop()
        eng.join()
        eng.close()


def exchange(port, data, timeout=3.0, half_close=True, host="127.0.0.1"):
    """Send data on a new connection (then half-close it: the server closes once it has
    answered); everything the server sends until it closes (None: it did not close
    within timeout)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out, end = b"", time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                return out
            except socket.timeout:
                return None
            if not b:
                return out
            out += b
        return None


def statuses(reply):
    """The status of every response in reply (bodies are 'x's: never a status line)."""
    return [int(m.group(1)) for m in re.finditer(rb"HTTP/1\.1 ([0-9]{3}) ", reply)]


GOOD = b"GET /x HTTP/1.1\r\nHost: a\r\n"
CLOSE = b"Connection: close\r\n\r\n"


@pytest.mark.parametrize("data, status", [
    # Content-Length: twice (equal or not), with non-digits, signed, empty, with a Transfer-Encoding
    (GOOD + b"Content-Length: 5\r\nContent-Length: 5\r\n" + CLOSE + b"hello", 400),
    (GOOD + b"Content-Length: 5\r\nContent-Length: 6\r\n" + CLOSE + b"hello!", 400),
    (GOOD + b"Content-Length: 5, 5\r\n" + CLOSE + b"hello", 400),
    (GOOD + b"Content-Length: 5a\r\n" + CLOSE + b"hello", 400),
    (GOOD + b"Content-Length: -1\r\n" + CLOSE, 400),
    (GOOD + b"Content-Length: +5\r\n" + CLOSE + b"hello", 400),
    (GOOD + b"Content-Length:\r\n" + CLOSE, 400),
    (GOOD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n" + CLOSE + b"0\r\n\r\n", 400),
    (GOOD + b"Transfer-Encoding: chunked\r\n" + CLOSE + b"0\r\n\r\n", 501),
    (GOOD + b"Content-Length: 99999999999999999999999999\r\n" + CLOSE, 413),
    (GOOD + b"Content-Length: 100000\r\n" + CLOSE, 413),
    # request lines: not METHOD SP TARGET SP HTTP/1.x
    (b"GET /\r\n" + CLOSE, 400),
    (b"GET  / HTTP/1.1\r\n" + CLOSE, 400),
    (b"GET / HTTP/1.1 x\r\n" + CLOSE, 400),
    (b"GET / HTTP/2.0\r\n" + CLOSE, 400),
    (b"GET / FOO/1.1\r\n" + CLOSE, 400),
    (b"GET / http/1.1\r\n" + CLOSE, 400),
    (b"G(T / HTTP/1.1\r\n" + CLOSE, 400),
    (b" GET / HTTP/1.1\r\n" + CLOSE, 400),
    (b"GET /a\x00b HTTP/1.1\r\n" + CLOSE, 400),
    (b"HELLO\r\n\r\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),   # a TLS hello, roughly
    # header lines: no colon, a space before it, a folded line, no name, a control byte, a bare LF
    (GOOD + b"NoColon\r\n" + CLOSE, 400),
    (GOOD + b"Name : v\r\n" + CLOSE, 400),
    (GOOD + b"X-A: 1\r\n  folded\r\n" + CLOSE, 400),
    (GOOD + b": v\r\n" + CLOSE, 400),
    (GOOD + b"X-A: a\x01b\r\n" + CLOSE, 400),
    (GOOD + b"X-A: 1\n" + CLOSE, 400),
    (b"GET / HTTP/1.1\nHost: a\n\n", 400),
    # limits: 101 header lines, a head over 8 KiB
    (GOOD + b"".join(b"X-%d: v\r\n" % i for i in range(100)) + CLOSE, 431),
    (GOOD + b"X-Big: " + b"v" * 9000 + b"\r\n" + CLOSE, 431),
])
def test_a_bad_request_gets_its_status_then_a_close(serve, data, status):
    port, counters = serve()
    reply = exchange(port, data, half_close=False)  # the server closes its side after an error
    assert reply is not None, "the server did not close"
    assert statuses(reply) == [status], reply[:200]
    assert b"Connection: close\r\n" in reply and reply.endswith(b"Content-Length: 0\r\nConnection: close\r\n\r\n")
    c = counters()
    assert c["bad_rx"] == 1 and c["http_2xx"] == 0 and c["http_4xx" if status < 500 else "http_5xx"] == 1


def test_good_requests_still_get_200(serve):
    port, counters = serve()
    for data, n in [
        (GOOD + CLOSE, 1),
        (b"\r\n" + GOOD + CLOSE, 1),                                          # an empty line first is ignored
        (GOOD + b"".join(b"X-%d: v\r\n" % i for i in range(98)) + CLOSE, 1),  # 100 header lines: the limit
        (GOOD + b"X-A:\r\nX-B:\t  v  \t\r\nX-C: caf\xc3\xa9\r\n" + CLOSE, 1),  # empty values, OWS, UTF-8
        (b"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello" + b"POST /q HTTP/1.0\r\ncontent-length:  3 \r\n\r\nabc"
         + b"DELETE /r?a=b HTTP/1.1\r\n" + CLOSE, 3),                           # pipelined, bodies skipped
        (GOOD + b"X-Pad: " + b"v" * 7000 + b"\r\n" + CLOSE, 1),               # a big head under 8 KiB
    ]:
        reply = exchange(port, data)
        assert reply is not None and statuses(reply) == [200] * n, (data[:80], reply[:200])
    c = counters()
    assert c["http_2xx"] == c["http_req"] == 8 and c["bad_rx"] == 0 and c["http_post"] == 2


def test_a_request_split_byte_by_byte_is_read_whole(serve):
    port, _ = serve()
    data = b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody" + GOOD + CLOSE
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(data)):
            s.send(data[i:i + 1])
            if i % 16 == 0:
                time.sleep(0.001)
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while (b := s.recv(65536)):
            reply += b
    assert statuses(reply) == [200, 200]


def test_random_garbage_never_topples_the_server(serve):
    """Mutated requests, each on its own connection, half-closed by the client: every
    answer is a whole status the server knows, and the server still serves after."""
    port, counters = serve(idle_timeout=1)
    rng = random.Random(29)
    base = [GOOD + CLOSE, b"POST / HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
            GOOD + b"Content-Length: 0\r\nX-Y: z\r\n" + CLOSE]
    t0 = time.monotonic()
    for _ in range(300):
        d = bytearray(rng.choice(base))
        for _ in range(rng.randint(1, 6)):
            op, i = rng.random(), rng.randrange(len(d)) if d else 0
            if op < 0.4 and d:
                d[i] = rng.choice([rng.getrandbits(8), 0x20, 0x0a, 0x0d, 0x3a, 0x00])
            elif op < 0.7:
                del d[i:i + rng.randint(1, 10)]
            else:
                d[i:i] = bytes(rng.choice(b" :\r\n\tA0") for _ in range(rng.randint(1, 10)))
        reply = exchange(port, bytes(d))
        assert reply is not None and set(statuses(reply)) <= {200, 400, 413, 431, 501}, (bytes(d), reply)
    assert time.monotonic() - t0 < 60
    assert statuses(exchange(port, GOOD + CLOSE)) == [200]
    c = counters()
    assert c["http_2xx"] + c["http_4xx"] + c["http_5xx"] >= 100


# ------------------------------------------------------------------ the reader in C, under ASan

CAP = 8192
_TCHAR = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]"


def reference(window):
    """What the request reader must make of the start of window (at most CAP bytes):
    the request's length, 0 while incomplete, or minus the status to answer."""
    i, started, nhdr, clen, te = 0, False, 0, None, False
    while True:
        j = window.find(b"\n", i)
        if j < 0:
            return -431 if len(window) >= CAP else 0
        if j == i or window[j - 1] != 13:
            return -400
        line = window[i:j - 1]
        if not started:
            if line:
                if not re.fullmatch(_TCHAR + rb"+ [\x21-\x7e]+ HTTP/1\.[0-9]", line):
                    return -400
                started = True
        elif not line:
            head = j + 1
            break
        else:
            nhdr += 1
            if nhdr > 100:
                return -431
            m = re.fullmatch(rb"(" + _TCHAR + rb"+):(.*)", line, re.S)
            if not m or any((c < 0x20 and c != 9) or c == 0x7f for c in m.group(2)):
                return -400
            name, v = m.group(1).lower(), m.group(2).strip(b" \t")
            if name == b"content-length":
                if clen is not None or not re.fullmatch(rb"[0-9]+", v):
                    return -400
                clen = int(v)
            elif name == b"transfer-encoding":
                te = True
        i = j + 1
    if te:
        return -400 if clen is not None else -501
    if (clen or 0) > CAP - head:
        return -413
    return head + (clen or 0) if head + (clen or 0) <= len(window) else 0


def reference_stream(data):
    out, pos = [], 0
    while True:
        r = reference(data[pos:pos + CAP])
        out.append(r)
        if r <= 0:
            return out
        pos += r


@pytest.fixture(scope="module")
def req_driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build the request reader's driver")
    exe = tmp_path_factory.mktemp("http_req") / "http_req_driver"
    subprocess.run([cc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-I", str(ROOT / "native/include"), str(ROOT / "tests/native/http_req_driver.c"),
                    "-o", str(exe)], check=True, timeout=120)
    return exe


def read_requests(driver, cases):
    """cases: [(bytes, [piece lengths])] -> the driver's results per case"""
    blob = b"".join(struct.pack(f"<II{len(p)}I", len(d), len(p), *p) + d for d, p in cases)
    out = subprocess.run([str(driver)], input=blob, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    rows = [[int(x) for x in line.split()] for line in out.stdout.decode().splitlines()]
    assert len(rows) == len(cases)
    return rows


def random_request(rng):
    method = rng.choice([b"GET", b"POST", b"HEAD", b"PUT", b"DELETE", b"M-SEARCH"])
    body = b"b" * rng.choice([0, 0, 1, 5, 100, 3000])
    headers = [b"Host: h", b"X-Noise: " + b"v" * rng.randint(0, 40), b"Accept:*/*", b"X-Tab:\tx\t"]
    headers += [b"X-%d: y" % k for k in range(rng.choice([0, 1, 5, 95]))]  # 100 lines at most: the limit
    if body or rng.random() < 0.3:
        headers.append(rng.choice([b"Content-Length", b"content-length"]) + b": " + str(len(body)).encode())
    rng.shuffle(headers)
    return (rng.choice([b"", b"", b"\r\n"]) + method + b" /p?q=" + str(rng.randint(0, 9)).encode()
            + rng.choice([b" HTTP/1.1", b" HTTP/1.0"]) + b"\r\n" + b"".join(h + b"\r\n" for h in headers)
            + b"\r\n" + body)


def pieces(rng, n):
    out = []
    while sum(out) < n:
        out.append(rng.choice([1, 2, 3, 7, 64, 1000, 1 << 16]))
    return out


def test_the_request_reader_agrees_with_its_reference_in_any_split(req_driver):
    rng = random.Random(2029)
    cases = []
    for _ in range(600):  # whole requests, pipelined
        data = b"".join(random_request(rng) for _ in range(rng.randint(1, 3)))
        cases.append((data, pieces(rng, len(data))))
    for _ in range(2400):  # mutated: flipped, cut, inserted bytes
        d = bytearray(b"".join(random_request(rng) for _ in range(rng.randint(1, 2))))
        for _ in range(rng.randint(1, 6)):
            op, i = rng.random(), rng.randrange(len(d)) if d else 0
            if op < 0.4 and d:
                d[i] = rng.choice([rng.getrandbits(8), 0x20, 0x0a, 0x0d, 0x3a, 0x09, 0x00, 0x7f])
            elif op < 0.7:
                del d[i:i + rng.randint(1, 20)]
            else:
                d[i:i] = bytes(rng.choice(b" :\r\n\t0-9aZ") for _ in range(rng.randint(1, 20)))
        cases.append((bytes(d), pieces(rng, max(1, len(d)))))
    for data in (b"GET / HTTP/1.1\r\nX: " + b"v" * 9000, b"\r\n" * 5000, b"A" * 9000,
                 b"GET / HTTP/1.1\r\nContent-Length: 8190\r\n\r\n" + b"b" * 8190):
        cases.append((data, pieces(rng, len(data))))
    got = read_requests(req_driver, cases)
    for (data, _), g in zip(cases, got):
        assert g == reference_stream(data), data[:300]
    whole = [g for g in got[:600]]
    assert all(r > 0 for g in whole for r in g[:-1]) and all(g[-1] == 0 for g in whole)
    assert {r for g in got for r in g} >= {-400, -413, -431, 0}


def test_idle_connections_are_closed_and_cannot_starve_the_slots(serve):
    # an address of its own on loopback: the counts below are this test's connections only (one
    # CI run counted 153 errors on 127.0.0.1, where other tests' sockets come and go)
    addr = "127.0.0.29"
    port, counters = serve(connections=100, idle_timeout="500ms", host=addr)
    idle = [socket.create_connection((addr, port), timeout=3) for _ in range(150)]
    try:
        t0 = time.monotonic()
        for s in idle:  # 50 refused at once (no slot), 100 closed at the idle timeout
            assert s.recv(1) == b""
        took = time.monotonic() - t0
        assert 0.4 < took < 3, took
        assert statuses(exchange(port, GOOD + CLOSE, host=addr)) == [200]  # a legitimate client is served
    finally:
        for s in idle:
            s.close()
    c = counters()
    assert c["sock_error"] == 150 and c["sock_open"] == 101 and c["http_2xx"] == 1, c


def test_a_dripping_client_is_closed_at_the_idle_timeout(serve):
    port, _ = serve(idle_timeout="500ms")
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        t0 = time.monotonic()
        s.sendall(b"GET / HTTP/1.1\r\n")
        closed = False
        for _ in range(40):  # a header byte every 50 ms: never a whole request
            try:
                s.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.05)
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    closed = True
                    break
            except BlockingIOError:
                pass
            except ConnectionResetError:  # closed with a byte unread
                closed = True
                break
            finally:
                s.setblocking(True)
        assert closed and 0.4 < time.monotonic() - t0 < 3


def test_a_keepalive_connection_idle_after_its_answer_is_closed(serve):
    port, counters = serve(idle_timeout="300ms")
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(GOOD + b"\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200 OK")
        time.sleep(0.1)
        s.sendall(GOOD + b"\r\n")  # each answer gives the next request the whole timeout
        assert s.recv(65536).startswith(b"HTTP/1.1 200 OK")
        t0 = time.monotonic()
        assert s.recv(1) == b"" and 0.2 < time.monotonic() - t0 < 3
    assert counters()["http_2xx"] == 2


def test_idle_timeout_is_a_field_with_a_flag():
    assert HttpServe(idle_timeout="2s").idle_timeout == 2.0 and HttpServe().idle_timeout == 10.0
    assert http_workers(HttpServe(idle_timeout=3))[0]["response_timeout"] == 3.0
    for bad in (0, -1, "2h", "x"):
        with pytest.raises(ValueError, match="idle_timeout"):
            HttpServe(idle_timeout=bad)
    from perfkit.cli import _parser
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["http-serve"]
    group = next(g for g in sub._action_groups if g.title == "advanced options")
    action = next(a for a in group._group_actions if "--idle-timeout" in a.option_strings)
    assert action.default == 10.0
    assert sub.parse_args(["--idle-timeout", "3s"]).idle_timeout == "3s"


# ------------------------------------------------------------------ the client


class _RawServer:
    """Answers each request (read to its blank line) with `reply`, then closes the
    connection (close=True) or holds it open until the end. Loopback only."""

    def __init__(self, reply, close):
        self.reply, self.close, self.answered = reply, close, 0
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.lsock.settimeout(0.1)
        self.port = self.lsock.getsockname()[1]
        self.stop, self.held, self.lock = threading.Event(), [], threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                c, _ = self.lsock.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        c.settimeout(5)
        buf = b""
        try:
            while not self.stop.is_set():
                while b"\r\n\r\n" not in buf:
                    b = c.recv(4096)
                    if not b:
                        return c.close()
                    buf += b
                buf = buf.split(b"\r\n\r\n", 1)[1]
                c.sendall(self.reply)
                with self.lock:
                    self.answered += 1
                if self.close:
                    return c.close()
                with self.lock:
                    self.held.append(c)
                return
        except OSError:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.thread.join(2)
        self.lsock.close()
        with self.lock:
            for c in self.held:
                c.close()


@pytest.mark.parametrize("version", ["1.0", "1.1"])
@pytest.mark.parametrize("keepalive", [True, False])
def test_a_response_delimited_by_the_close_is_read_to_the_close(version, keepalive):
    reply = f"HTTP/{version} 200 OK\r\nServer: t\r\n\r\n".encode() + b"b" * 300
    with _RawServer(reply, close=True) as srv:
        t0 = time.monotonic()
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{srv.port}/", users=4, duration=0.5,
                                 keepalive=keepalive, response_timeout="2s")).summary
        took = time.monotonic() - t0
        answered = srv.answered
    # every request out was answered and counted: none held without a reader, none cut
    assert s["requests"] == s["responses"] == answered and s["responses"] >= 8, s
    assert s["http_cut"] == 0 and s["http_err"] == 0 and s["err_timeout"] == 0 and took < 5
    assert s["bytes_rx"] == answered * len(reply) and s["sock_open"] == answered


def test_a_response_that_never_ends_times_out():
    # no length, and the server never closes: the body runs on until the response timeout
    with _RawServer(b"HTTP/1.1 200 OK\r\nServer: t\r\n\r\npartial", close=False) as srv:
        t0 = time.monotonic()
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{srv.port}/", users=3, duration=1,
                                 response_timeout="300ms")).summary
        took = time.monotonic() - t0
    assert s["responses"] == 0 and s["err_timeout"] >= 3 and s["http_err"] >= s["err_timeout"]
    assert s["requests"] == s["err_timeout"] + s["http_cut"] and took < 5
    assert s["error_rate_pct"] > 0
