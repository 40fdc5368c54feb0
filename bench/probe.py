"""An adversarial probe of perfkit: hostile values for every CLI option, mutated dperf
configuration files, strangers talking to `perfkit serve` and `perfkit http-serve`, hostile
HTTP servers for the HTTP client, bit flips in saved runs and bad save paths.

Each case ends in one outcome: accepted (ran, or kept running until its bound), clean (one
line naming what is wrong, exit 1-3, no traceback), traceback, crash (killed by a signal, or
a server that died), hang (ran past its bound), lost (a finished measurement not printed or
saved) or wrong (a saved file that loaded with changed data and no error). The table is the
issue-29 probe table; a run with `--quick` samples every area and is what tests/test_probe.py
runs. Traffic goes only to loopback (PERFKIT_SANDBOX=1 is set for every child; URLs are IP
literals, never names a resolver would be asked about).

    python3 -P bench/probe.py                 # every case, the table to stdout
    python3 -P bench/probe.py --quick --json  # a seeded sample, the counts as JSON
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

OUTCOMES = ("accepted", "clean", "traceback", "crash", "hang", "lost", "wrong")
BAD = ("traceback", "crash", "hang", "lost", "wrong")
VALUES = ["", "-1", "0", "1e309", "nan", "\u0661\u0660", "1_000", "9" * 40, "x" * 3000,
          "\u202e", "%s%n", "1,,2", "256.0.0.1"]
URLS = ["", "http://", "ftp://127.0.0.1/", "http://[::1", "http://127.0.0.1:99999/",
        "http://127.0.0.1:0/", "http://127.0.0.1:/", "http://%zz/", "http://127.0.0.1/" + "a" * 9000,
        "http://127.0.0.1/\r\nX: y", "http://user@127.0.0.1:1/", "127.0.0.1"]
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "dperf"
LAB = "prbi"    # the lab the probe makes for lab impair and lab nginx cases, removed at the end


def perfkit_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("perfkit")
    return [str(exe)] if exe.exists() else [sys.executable, "-P", "-m", "perfkit"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def classify(rc: int | None, out: str, err: str, server: bool = False) -> str:
    """One outcome from a finished (or bounded) command."""
    if "Traceback (most recent call last)" in out + err:
        return "traceback"
    if rc is None:
        return "accepted" if server else "hang"
    if rc < 0 or rc in (134, 139):
        return "crash"
    if rc == 0:
        return "accepted"
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    return "clean" if lines else "lost"   # an error exit that says nothing


def run_cmd(argv: list[str], bound: float, server: bool = False, env=None) -> tuple[int | None, str, str]:
    """Run perfkit with argv; a command still running at bound is interrupted (SIGINT, then
    killed): rc None."""
    p = subprocess.Popen(perfkit_cmd() + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=env, text=True, errors="replace",
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=bound)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGINT)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        return None, out, err


# ---------------------------------------------------------------- servers the cases use
class Servers:
    """A perfkit serve and a perfkit http-serve on loopback for the cases that need a peer."""

    def __init__(self, env):
        self.serve_port, self.http_port = free_port(), free_port()
        self.procs = [subprocess.Popen(perfkit_cmd() + a, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       env=env, start_new_session=True)
                      for a in (["serve", "-lp", str(self.serve_port)],
                                ["http-serve", "--port", str(self.http_port), "-t", "3600"])]
        for port in (self.serve_port, self.http_port):
            wait_listening(port)

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def close(self):
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def wait_listening(port: int, bound: float = 15.0) -> None:
    end = time.monotonic() + bound
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {bound} s")


# ---------------------------------------------------------------- area: cli
def short_confs(tmp: Path) -> tuple[Path, Path]:
    """dperf's two-ring server and client files with a 1 s client (11 s with dperf's slow start of
    10 s at least) and their own ring names."""
    out = []
    for name in ("server-2ring.conf", "client-2ring.conf"):
        text = (DATA / name).read_text().replace("dpa", "prbda").replace("dpb", "prbdb")
        text = text.replace("duration    60s", "duration    3s").replace("duration    2s", "duration    1s")
        p = tmp / name
        p.write_text(text)
        out.append(p)
    return out[0], out[1]


def cli_bases(s: Servers, confs) -> dict[tuple, list[str]]:
    """A bounded command line that runs for each command the probe walks."""
    ring = ["--port", "ring:prbf:0", "--peer", "ring:prbf:1"]
    return {
        ("local",): ["local", "udp_bw", "-t", "0.3"],
        ("test",): ["test", "127.0.0.1", "udp_bw", "-t", "0.3", "-lp", str(s.serve_port)],
        ("flows",): ["flows", *ring, "-t", "0.3"],
        ("reflect",): ["reflect", "--port", "ring:prbr:0", "-t", "0.3"],
        ("http",): ["http", f"http://127.0.0.1:{s.http_port}/", "-t", "0.3", "-u", "2"],
        ("http-serve",): ["http-serve", "--port", str(free_port()), "-t", "0.3"],
        ("serve",): ["serve", "-lp", str(free_port())],
        # the files' cpu 0-3 pin as dperf does: this machine may have fewer CPUs, --cpus takes them
        ("dperf",): ["dperf", "-c", str(confs[0]), "-c", str(confs[1]), "--cpus", "0"],
        ("lab", "impair"): ["lab", "impair", LAB, "--delay", "1ms"],
        ("lab", "nginx"): ["lab", "nginx", LAB],
        ("cluster", "up"): ["cluster", "up", "--lab", "prbnone", "--hosts", "h1"],
        ("rfc2544", "local"): ["rfc2544", "local", "udp_bw", "--frame-sizes", "128", "--tests", "throughput",
                               "--trial", "0.2s", "--max-trials", "2"],
        ("rfc2544", "flows"): ["rfc2544", "flows", *ring, "--frame-sizes", "128", "--tests", "throughput",
                               "--trial", "0.2s", "--max-trials", "2"],
    }


def cli_options() -> dict[tuple, list[str]]:
    """Every option that takes a value, per command (argparse's tree of perfkit's parser)."""
    from perfkit import cli
    found: dict[tuple, list[str]] = {}

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    walk(sp, path + (name,))
            elif a.option_strings and a.nargs != 0 and a.dest not in ("help", "save"):
                found.setdefault(path, []).append(a.option_strings[-1])
    walk(cli._parser(), ())
    return found


def cli_cases(s: Servers, confs, lab_names) -> list[tuple]:
    """(area, name, argv, bound, server) for each option x hostile value, and hostile URLs."""
    bases, cases, options = cli_bases(s, confs), [], cli_options()
    for path, opts in options.items():
        if path[0] == "rfc2544":   # the run's own options are local's and flows' (probed there)
            opts = [o for o in opts if o not in options.get(path[1:], [])]   # rfc2544 report: its own
        if path == ("lab", "up"):
            for opt in opts:
                for v in VALUES:
                    name = f"prb{len(lab_names)}"
                    lab_names.append(name)
                    cases.append(("cli", f"lab up {opt}={v[:12]!r}",
                                  ["lab", "up", "--hosts", "2", "--name", name, opt, v], 30, False))
            continue
        base = bases.get(path)
        if base is None:
            continue
        server = path == ("serve",)
        bound = 40 if path[0] in ("rfc2544", "dperf") else 3 if path == ("serve",) else 20
        for opt in opts:
            for v in VALUES:
                cases.append(("cli", f"{' '.join(path)} {opt}={v[:12]!r}", base + [opt, v], bound, server))
    for u in URLS:
        cases.append(("cli", f"http url {u[:20]!r}", ["http", u, "-t", "0.3", "-u", "1"], 20, False))
    return cases


def refused_bases(s: Servers, confs, env, made_lab: bool) -> list[str]:
    """The base command lines that do not run as they are: a probe over them would count
    their own refusal as each case's clean error."""
    out = []
    for path, base in cli_bases(s, confs).items():
        if path == ("cluster", "up") or (path[0] == "lab" and not made_lab):
            continue
        bound = 40 if path[0] in ("rfc2544", "dperf") else 20
        rc, _, err = run_cmd(base, 3 if path == ("serve",) else bound, server=path == ("serve",), env=env)
        if rc not in (0, None) or (rc is None and path != ("serve",)):
            out.append(f"{' '.join(path)}: {(err.strip().splitlines() or [''])[-1][:160]}")
    return out


# ---------------------------------------------------------------- area: save paths
def save_cases(tmp: Path) -> list[tuple]:
    """-o to places that cannot take a file: refused before the run, or a fallback named."""
    d = tmp / "adir.parquet"
    d.mkdir()
    paths = ["/nonexistent/x.parquet", str(d), "/proc/x.parquet", "/dev/full", "", str(tmp / "x.txt"),
             str(tmp / ("y" * 300 + ".parquet")), "/sys/x.parquet"]
    cases = []
    for p in paths:
        for base in (["local", "udp_bw", "-t", "0.3"], ["local", "tcp_lat", "-t", "0.3"]):
            cases.append(("save", f"{base[1]} -o {p[:30]!r}", base + ["-o", p], 20, False))
    return cases


def save_outcome(rc, out, err, path: str) -> str:
    """Refused before the run (exit 2, one line, nothing ran), or the run's results are in
    the file named or in the fallback file stderr names; anything else lost the run."""
    o = classify(rc, out, err)
    if o not in ("accepted", "clean"):
        return o
    if rc == 2 and not out.strip():
        return "clean"
    m = re.search(r"the run is saved in (\S+)", err)
    if m and os.path.isfile(m.group(1)):
        os.unlink(m.group(1))
        return "clean"
    return "accepted" if rc == 0 and os.path.isfile(path) else "lost"


# ---------------------------------------------------------------- area: dperf files
def dperf_texts(rng: random.Random) -> list[tuple[str, bytes]]:
    """Mutations of dperf's sample files: each word replaced by hostile values, lines
    doubled or dropped, bytes flipped, and whole files of pathological shape."""
    out = []
    for src in sorted(DATA.glob("*.conf")):
        text = src.read_text()
        lines = text.splitlines()
        for i, line in enumerate(lines):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            for v in ("", "-1", "0", "1e309", "nan", "\u0661", "x" * 300, "99999999999999999999", "1-0", "::"):
                for j in range(1, min(len(words), 3)):
                    w = list(words)
                    w[j] = v
                    out.append((f"{src.name}:{i + 1} word {j}={v[:8]!r}",
                                "\n".join(lines[:i] + [" ".join(w)] + lines[i + 1:]).encode()))
            out.append((f"{src.name}:{i + 1} doubled", "\n".join(lines[:i + 1] + lines[i:]).encode()))
            out.append((f"{src.name}:{i + 1} dropped", "\n".join(lines[:i] + lines[i + 1:]).encode()))
        data = bytearray(text.encode())
        for k in range(20):
            b = bytearray(data)
            pos = rng.randrange(len(b))
            b[pos] = rng.randrange(256)
            out.append((f"{src.name} byte {pos}={b[pos]:#x}", bytes(b)))
    big = "mode client\ncps 10\nport ring:a:0 198.18.0.2 198.18.0.1\n"
    out += [("16,000 client lines", (big + "client 198.18.0.2 1\n" * 16000).encode()),
            ("10 MiB of comments", b"# x\n" * (10 << 18)),
            ("one 1 MiB word", b"mode " + b"c" * (1 << 20)),
            ("BOM", "\ufeffmode server\nport ring:a:1 198.18.0.1 198.18.0.2\n".encode()),
            ("latin-1", "mode client # caf\xe9\n".encode("latin-1")),
            ("NUL bytes", b"mode\x00client\n"), ("empty", b""), ("CR only", b"mode client\rcps 1\r")]
    return out


def dperf_case(path: str) -> str:
    """Load and build one file in this process, bounded by an alarm."""
    from perfkit import dperf

    def alarm(*_):
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(10)
    try:
        dperf.from_dperf(path)
        return "accepted"
    except TimeoutError:
        return "hang"
    except (dperf.DperfError, ValueError) as e:
        return "clean" if str(e).strip() and "\n" not in str(e).strip() else "traceback"
    except Exception:   # noqa: BLE001 -- anything else is what the probe looks for
        return "traceback"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def dperf_area(tmp: Path, rng: random.Random, quick: bool) -> Counter:
    counts: Counter = Counter()
    texts = dperf_texts(rng)
    if quick:
        texts = rng.sample(texts, 60) + texts[-8:]
    for i, (name, data) in enumerate(texts):
        p = tmp / f"case{i}.conf"
        p.write_bytes(data)
        counts[dperf_case(str(p))] += 1
        p.unlink()
    for special in (str(tmp), "/dev/zero", "/proc/self/mem", "/dev/null", "/nonexistent.conf"):
        counts[dperf_case(special)] += 1
    return counts


# ---------------------------------------------------------------- area: perfkit serve
def serve_payloads(rng: random.Random) -> list[tuple[str, bytes, float]]:
    """(name, bytes, seconds to keep sending them) for strangers at the control port."""
    def msg(obj) -> bytes:
        b = json.dumps(obj).encode()
        return struct.pack("!I", len(b)) + b
    nested = b"[" * 100000 + b"]" * 100000
    out = [("empty", b"", 0), ("garbage", bytes(rng.randrange(256) for _ in range(512)), 0),
           ("huge length", struct.pack("!I", 0xFFFFFFFF) + b"{}", 0),
           ("zero length", struct.pack("!I", 0), 0),
           ("nested JSON", struct.pack("!I", len(nested)) + nested, 0),
           ("not an object", msg([1, 2, 3]), 0), ("no op", msg({"v": 2}), 0),
           ("wrong version", msg({"v": 99, "op": "hello"}), 0),
           ("start first", msg({"v": 2, "op": "start"}), 0),
           ("prepare first", msg({"v": 2, "op": "prepare", "test": "udp_bw"}), 0),
           ("auth garbage", msg({"v": 2, "op": "hello"}) + msg({"v": 2, "op": "auth", "mac": "x" * 64}), 0),
           ("escape in op", msg({"v": 2, "op": "\x1b[2J\nFAKE LINE"}), 0),
           ("half message", struct.pack("!I", 100) + b"{", 0),
           ("drip", msg({"v": 2, "op": "hello"}), 3.0),
           ("HTTP request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 0),
           ("non-UTF-8 JSON", struct.pack("!I", 4) + b"\xff\xfe\xfd\xfc", 0)]
    for op in ("prepare", "conf", "counters", "finish", "quit", "running", "stop"):
        out.append((f"{op} with junk", msg({"v": 2, "op": op, "test": "x" * 200, "size": -1, "flows": 1e309}), 0))
    return out


def stranger(port: int, data: bytes, drip: float) -> None:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=3) as c:
        if drip:
            end = time.monotonic() + drip
            for b in data:
                if time.monotonic() > end:
                    break
                c.sendall(bytes([b]))
                time.sleep(0.2)
        else:
            c.sendall(data)
        c.settimeout(1)
        with contextlib.suppress(OSError):
            c.recv(65536)


def legit_test(s: Servers, env) -> str:
    rc, out, err = run_cmd(["test", "127.0.0.1", "udp_lat", "-t", "0.3", "-lp", str(s.serve_port)], 30, env=env)
    return "accepted" if rc == 0 else classify(rc, out, err)


def serve_area(s: Servers, env, rng: random.Random, quick: bool) -> Counter:
    """Each stranger, then a legitimate client: the server is alive and the test runs."""
    counts: Counter = Counter()
    payloads = serve_payloads(rng)
    if quick:
        payloads = payloads[:8]
    for name, data, drip in payloads:
        stranger(s.serve_port, data, drip)
        if not s.alive():
            counts["crash"] += 1
            return counts
        counts["clean" if legit_test(s, env) == "accepted" else "crash"] += 1
    # many idle strangers at once, a legitimate client among them
    idle = []
    for _ in range(20 if quick else 200):
        with contextlib.suppress(OSError):
            idle.append(socket.create_connection(("127.0.0.1", s.serve_port), timeout=3))
    counts["clean" if legit_test(s, env) == "accepted" and s.alive() else "crash"] += 1
    for c in idle:
        c.close()
    return counts


# ---------------------------------------------------------------- area: http-serve
HTTP_REQUESTS = [
    b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", b"GET / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n",
    b"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    b"\r\n\r\n", b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET / FTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n", b"GET / HTTP/1.1\r\nX: " + b"y" * 100000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\nno colon here\r\n\r\n", b"GET / HTTP/1.1\r\n : empty name\r\n\r\n",
    b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", b"GET /\x00 HTTP/1.1\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"GET / HTTP/1.1\n\n", b"G" * 70000,
    b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
]


def http_serve_area(s: Servers, rng: random.Random, quick: bool) -> Counter:
    """Each hostile request on its own connection, then a legitimate request: 200."""
    counts: Counter = Counter()
    reqs = HTTP_REQUESTS + [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600))) for _ in range(40)]
    if quick:
        reqs = reqs[:10]
    for r in reqs:
        stranger(s.http_port, r, 0)
        if not s.alive():
            counts["crash"] += 1
            return counts
        counts["clean" if legit_http(s.http_port) else "crash"] += 1
    return counts


def legit_http(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        c.settimeout(5)
        return c.recv(64).startswith(b"HTTP/1.1 200")
    return False


# ---------------------------------------------------------------- area: the HTTP client
HOSTILE_RESPONSES = {
    "close-delimited 1.0": b"HTTP/1.0 200 OK\r\n\r\nbody then close",
    "no length 1.1": b"HTTP/1.1 200 OK\r\n\r\nbody",
    "garbage status": b"HTTX/1.1 2OO OK\r\n\r\n",
    "negative length": b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
    "two lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
    "huge header": b"HTTP/1.1 200 OK\r\nX: " + b"y" * 200000 + b"\r\n\r\n",
    "bad chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "silence": b"",
    "reset": None,
    "1xx forever": b"HTTP/1.1 100 Continue\r\n\r\n" * 50,
    "binary": bytes(range(256)),
    "status 999": b"HTTP/1.1 999 What\r\nContent-Length: 0\r\n\r\n",
}


def hostile_server(kind: bytes | None, stop: threading.Event) -> int:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.2)

    def serve():
        conns = []
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            conns.append(c)
            try:
                c.settimeout(0.5)
                c.recv(65536)
                if kind is None:
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    c.close()
                elif kind:
                    c.sendall(kind)
                    if kind.startswith(b"HTTP/1.0") or b"Content-Length" not in kind:
                        c.close()
            except OSError:
                pass
        for c in conns:
            c.close()
        srv.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def http_client_area(env, quick: bool) -> Counter:
    """perfkit http against each hostile server: it ends within its bound, the summary is
    printed, and requests = answered + errors (no request vanishes from the count)."""
    counts: Counter = Counter()
    items = list(HOSTILE_RESPONSES.items())[:4] if quick else list(HOSTILE_RESPONSES.items())
    for name, resp in items:
        stop = threading.Event()
        port = hostile_server(resp, stop)
        rc, out, err = run_cmd(["http", f"http://127.0.0.1:{port}/", "-t", "1", "-u", "4", "--timeout", "1s",
                                "--json"], 30, env=env)
        stop.set()
        o = classify(rc, out, err)
        if o in ("accepted", "clean") and rc in (0, 3):
            o = http_accounting(out)
        counts[o] += 1
    return counts


def http_accounting(out: str) -> str:
    rows = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    if not rows:
        return "lost"
    s = rows[-1]
    req = s.get("http_req") or s.get("requests") or 0
    answered = s.get("http_resp") or s.get("responses") or 0
    errors = s.get("http_errors") or s.get("errors") or 0
    if req and answered + errors < req and not s.get("http_cut"):
        return "lost"
    return "clean" if errors or not answered else "accepted"


# ---------------------------------------------------------------- area: saved runs
def saved_area(tmp: Path, rng: random.Random, quick: bool) -> Counter:
    """Bit flips in a saved run: each loads equal or is refused naming the file."""
    import perfkit
    counts: Counter = Counter()
    src = tmp / "run.parquet"
    run = perfkit.run(perfkit.LocalTest("udp_bw", size=64, rate="20kpps", duration="0.5s"))
    run.save(src)
    ref = perfkit.load(src)
    data = src.read_bytes()
    flips = 15 if quick else 200
    for _ in range(flips):
        b = bytearray(data)
        pos = rng.randrange(len(b))
        b[pos] ^= 1 << rng.randrange(8)
        p = tmp / "flip.parquet"
        p.write_bytes(bytes(b))
        try:
            got = perfkit.load(p)
        except Exception as e:   # noqa: BLE001 -- judged by its words below
            msg = str(e)
            counts["clean" if str(p) in msg and "\n" not in msg.strip() else "traceback"] += 1
            continue
        same = got.frame.equals(ref.frame) and got.summary == ref.summary
        counts["accepted" if same else "wrong"] += 1
    for cut in (0, 10, len(data) // 2, len(data) - 1):
        p = tmp / "cut.parquet"
        p.write_bytes(data[:cut])
        try:
            perfkit.load(p)
            counts["wrong"] += 1
        except Exception as e:   # noqa: BLE001
            counts["clean" if str(p) in str(e) else "traceback"] += 1
    return counts


# ---------------------------------------------------------------- driver
def run_cases(cases, env, jobs: int, lab_names, verbose: bool = False) -> dict[str, Counter]:
    by_area: dict[str, Counter] = {}
    bad: list[str] = []

    def one(case):
        area, name, argv, bound, server = case
        rc, out, err = run_cmd(argv, bound, server=server, env=env)
        o = save_outcome(rc, out, err, argv[-1]) if area == "save" else classify(rc, out, err, server)
        if argv[:2] == ["lab", "up"] and rc == 0:   # the last --name given is the lab made
            run_cmd(["lab", "down", argv[len(argv) - 1 - argv[::-1].index("--name") + 1]], 30, env=env)
        return area, name, o, (err.strip().splitlines() or [""])[-1][:160]

    with ThreadPoolExecutor(jobs) as pool:
        for area, name, o, last in pool.map(one, cases):
            by_area.setdefault(area, Counter())[o] += 1
            if o in BAD or (verbose and o == "accepted"):
                bad.append(f"{area}: {name}: {o}: {last}")
    for line in bad:
        print("  " + line, file=sys.stderr)
    return by_area


def table(by_area: dict[str, Counter]) -> str:
    head = "| area | cases | " + " | ".join(OUTCOMES) + " |\n|---|" + "---|" * (len(OUTCOMES) + 1) + "\n"
    rows, total = [], Counter()
    for area, c in by_area.items():
        total.update(c)
        rows.append(f"| {area} | {sum(c.values()):,} | " + " | ".join(f"{c[o]:,}" for o in OUTCOMES) + " |")
    rows.append(f"| all | {sum(total.values()):,} | " + " | ".join(f"{total[o]:,}" for o in OUTCOMES) + " |")
    return head + "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a seeded sample of every area")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--areas", default="cli,save,dperf,serve,http-serve,http-client,saved")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the accepted command lines too")
    a = ap.parse_args(argv)
    areas = set(a.areas.split(","))
    os.environ["PERFKIT_SANDBOX"] = "1"
    env = dict(os.environ)
    rng = random.Random(a.seed)
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="perfkit-probe-"))
    servers = Servers(env)
    lab_names: list[str] = []
    made_lab = "cli" in areas and os.geteuid() == 0 and run_cmd(["lab", "up", "--name", LAB], 60, env=env)[0] == 0
    try:
        cases, refused = [], []
        if "cli" in areas:
            refused = refused_bases(servers, short_confs(tmp), env, made_lab)
            for line in refused:
                print(f"probe: a base command line is refused: {line}", file=sys.stderr)
            cli = cli_cases(servers, short_confs(tmp), lab_names)
            cases += rng.sample(cli, 80) if a.quick else cli
        if "save" in areas:
            cases += save_cases(tmp)[:4] if a.quick else save_cases(tmp)
        by_area = run_cases(cases, env, a.jobs, lab_names, a.verbose) if cases else {}
        if "dperf" in areas:
            by_area["dperf files"] = dperf_area(tmp, rng, a.quick)
        if "serve" in areas:
            by_area["perfkit serve"] = serve_area(servers, env, rng, a.quick)
        if "http-serve" in areas:
            by_area["http-serve"] = http_serve_area(servers, rng, a.quick)
        if "http-client" in areas:
            by_area["HTTP client"] = http_client_area(env, a.quick)
        if "saved" in areas:
            by_area["saved runs"] = saved_area(tmp, rng, a.quick)
    finally:
        servers.close()
        if made_lab:
            run_cmd(["lab", "down", LAB], 60, env=env)
        shutil.rmtree(tmp, ignore_errors=True)
    took = time.monotonic() - t0
    if a.json:
        print(json.dumps({"areas": {k: dict(v) for k, v in by_area.items()}, "bases_refused": refused,
                          "seconds": round(took, 1)}))
    else:
        print(table(by_area))
        print(f"\n{sum(sum(c.values()) for c in by_area.values()):,} cases in {took:.0f} s")
    return 1 if refused or any(c[o] for c in by_area.values() for o in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
