"""The HTTP/1.x response parser of the load client (native/include/perfkit/http1.h),
driven from C under AddressSanitizer/UBSan: random valid responses in random pieces
must parse exactly as Python's http.client reads them, and random garbage must end in
DONE or ERROR without a read out of bounds."""
import http.client
import io
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DONE, ERROR = 7, 8


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build the parser driver")
    exe = tmp_path_factory.mktemp("http1") / "http1_driver"
    subprocess.run([cc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-I", str(ROOT / "native/include"), str(ROOT / "tests/native/http1_driver.c"),
                    "-o", str(exe)], check=True)
    return exe


def parse(driver, cases):
    """cases: [(bytes, [piece lengths], head)] -> [(state, status, body, consumed, keep_alive, error)]"""
    blob = b"".join(struct.pack(f"<II{len(p)}IB", len(d), len(p), *p, int(h)) + d for d, p, h in cases)
    out = subprocess.run([str(driver)], input=blob, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    rows = []
    for line in out.stdout.decode().splitlines():
        state, status, body, consumed, keep, err = line.split(" ", 5)
        rows.append((int(state), int(status), int(body), int(consumed), int(keep), err))
    assert len(rows) == len(cases)
    return rows


def pieces(rng, n):
    out = []
    while sum(out) < n:
        out.append(rng.choice([1, 2, 3, 7, 64, 1000, 1 << 16]))
    return out


def random_response(rng):
    """(bytes, head, expected status, body length, keep_alive)"""
    version = rng.choice(["1.1", "1.1", "1.0"])
    status = rng.choice([200, 200, 201, 204, 301, 304, 404, 500, 503])
    head = rng.random() < 0.1
    body = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 10, 500, 5000])))
    kind = rng.choice(["length", "chunked", "close"])
    conn = rng.choice([None, "close", "keep-alive", "Keep-Alive"])
    headers = [("Server", "t"), ("X-Noise", "v" * rng.randint(0, 50))]
    if conn:
        headers.append(("Connection", conn))
    no_body = head or status in (204, 304)
    if kind == "length":
        headers.append((rng.choice(["Content-Length", "content-length", "CONTENT-LENGTH"]), str(len(body))))
        payload = b"" if no_body else body
    elif kind == "chunked" and version == "1.1":
        headers.append(("Transfer-Encoding", "chunked"))
        payload, rest = b"", body
        while rest:
            k = rng.randint(1, max(1, len(rest)))
            ext = rng.choice(["", ";a=b"])
            payload += f"{k:x}{ext}\r\n".encode() + rest[:k] + b"\r\n"
            rest = rest[k:]
        payload += b"0\r\n" + rng.choice([b"", b"X-Trailer: 1\r\n"]) + b"\r\n"
        payload = b"" if no_body else payload
    else:
        kind = "close"
        payload = b"" if no_body else body
    rng.shuffle(headers)
    head_lines = f"HTTP/{version} {status} Whatever\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    prefix = b"HTTP/1.1 100 Continue\r\n\r\n" if version == "1.1" and rng.random() < 0.1 else b""
    data = prefix + head_lines.encode() + payload
    keep = (conn is None and version == "1.1") or (conn is not None and conn.lower() == "keep-alive")
    if kind == "close" and not no_body:
        keep = False
    return data, head, status, 0 if no_body else len(body), keep, kind


class _Sock:
    def __init__(self, data):
        self.data = data

    def makefile(self, *a, **k):
        return io.BytesIO(self.data)


def test_random_valid_responses_in_random_pieces(driver):
    rng = random.Random(2026)
    cases, expect = [], []
    for _ in range(1500):
        data, head, status, blen, keep, kind = random_response(rng)
        trailing = b"" if kind == "close" else b"HTTP/1.1 200 OK\r\n"  # a pipelined next response
        cases.append((data + trailing, pieces(rng, len(data + trailing)), head))
        expect.append((status, blen, keep, len(data), kind))
        # the reference: Python's own reader agrees with what the generator meant (it
        # lets "chunked" win over a HEAD/204/304 response's empty body: RFC 9112 does not)
        if not data.startswith(b"HTTP/1.1 100") and not (blen == 0 and kind == "chunked"):
            ref = http.client.HTTPResponse(_Sock(data), method="HEAD" if head else "GET")
            ref.begin()
            assert ref.status == status and len(ref.read()) == blen
    for got, (status, blen, keep, n, kind) in zip(parse(driver, cases), expect):
        state, gstatus, body, consumed, gkeep, err = got
        assert (state, gstatus, body, gkeep) == (DONE, status, blen, int(keep)), (got, status, blen, keep, kind)
        assert consumed == n or kind == "close"


@pytest.mark.parametrize("data, error", [
    (b"HTTP/2.0 200 OK\r\n\r\n", "bad status line"),
    (b"HTTP/1.1 20x OK\r\n\r\n", "bad status code"),
    (b"HTTP/1.1 999 OK\r\n\r\n", "bad status code"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", "conflicting Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n", "chunk size too large"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX", "no CRLF after chunk data"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "connection closed mid-response"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n", "header section too large"),
])
def test_malformed_responses_are_errors_with_a_reason(driver, data, error):
    for split in ([len(data)], [1] * len(data)):
        (state, _, _, consumed, _, err), = parse(driver, [(data, split, False)])
        assert state == ERROR and err == error and consumed <= len(data)


def test_garbage_never_reads_out_of_bounds(driver):
    rng = random.Random(7)
    cases = []
    for _ in range(3000):
        data, head, *_ = random_response(rng)
        data = bytearray(data)
        for _ in range(rng.randint(1, 8)):  # mutate: flip, cut, insert
            op = rng.random()
            i = rng.randrange(len(data)) if data else 0
            if op < 0.5 and data:
                data[i] = rng.getrandbits(8)
            elif op < 0.75:
                del data[i:i + rng.randint(1, 20)]
            else:
                data[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 20)))
        data = bytes(data)
        cases.append((data, pieces(rng, max(1, len(data))), head))
    for state, _, _, consumed, _, _ in parse(driver, cases):
        assert state in (DONE, ERROR)
