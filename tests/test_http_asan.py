"""The HTTP client's C (sock_engine.c + http_roles.c) under ASan and UBSan, outside
Python: plain and TLS, keep-alive and a connection per request, a URL list, failed
handshakes and refused connections, against nginx; counts agree with nginx's log."""
import collections
import shutil
import subprocess
from pathlib import Path

import pytest

from perfkit.spec import HttpLoad

from _nginx import Nginx, free_port

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.nginx, pytest.mark.tls]


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build the client driver")
    d = tmp_path_factory.mktemp("hld")
    exe = d / "http_load_driver"
    subprocess.run([cc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    "-DPK_HAVE_OPENSSL=1", "-I", str(ROOT / "native/include"), "-I", str(ROOT / "native/sock"),
                    "-I", str(ROOT / "native/common"), str(ROOT / "native/common/engine.c"),
                    str(ROOT / "native/sock/sock_engine.c"), str(ROOT / "native/sock/http_roles.c"),
                    str(ROOT / "native/sock/stream_roles.c"),
                    str(ROOT / "native/common/counters.c"),
                    str(ROOT / "tests/native/http_load_driver.c"), "-lssl", "-lcrypto", "-lpthread", "-lm", "-o", str(exe)],
                   check=True, timeout=300)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=perfkit-test", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem")], check=True, capture_output=True, timeout=60)
    return exe, (str(d / "cert.pem"), str(d / "key.pem"))


def run(exe, tmp_path, urls, tls, keepalive, users=4, ms=700, random=False):
    spec = HttpLoad(url=urls, keepalive=keepalive)
    req = tmp_path / "req.bin"
    req.write_bytes(spec.request_bytes())
    host, port = spec.target()
    out = subprocess.run([str(exe), host, str(port), str(int(tls)), str(int(keepalive)), str(users), str(ms),
                          str(int(random)), str(req)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Sanitizer" not in out.stderr and "runtime error" not in out.stderr, \
        out.stderr[-3000:]
    counts, per_url = {}, []
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts[0] == "url":
            per_url.append(tuple(int(x) for x in parts[2:]))
        else:
            counts[parts[0]] = int(parts[1])
    return counts, per_url


@pytest.mark.parametrize("tls", [False, True])
@pytest.mark.parametrize("keepalive", [True, False])
def test_client_is_clean_under_sanitizers(driver, tmp_path, tls, keepalive):
    exe, cert = driver
    with Nginx(tmp_path, tls_cert=cert if tls else None) as ngx:
        scheme = "https" if tls else "http"
        urls = [f"{scheme}://127.0.0.1:{ngx.port}/{p}" for p in ("a", "b", "c")]
        c, per = run(exe, tmp_path, urls, tls, keepalive, random=not keepalive)
    log = ngx.log()
    assert c["http_resp"] > 20 and c["http_err"] == 0 and c["err_tls"] == 0
    assert [s for s, _, _ in per] == [sum(1 for ln in log if ln[1] == f"/{p}") for p in ("a", "b", "c")]
    assert sum(a for _, a, _ in per) == c["http_resp"] and sum(s for s, _, _ in per) == c["http_req"]
    assert collections.Counter(ln[5] for ln in log) == {("on" if tls else ""): len(log)}


def test_failures_are_clean_under_sanitizers(driver, tmp_path):
    exe, _ = driver
    with Nginx(tmp_path) as ngx:  # TLS to a plain server: every handshake fails
        c, per = run(exe, tmp_path, f"https://127.0.0.1:{ngx.port}/", True, True, users=3, ms=400)
    assert c["http_resp"] == 0 and c["err_tls"] > 0 and per[0][2] == 0  # no request went out
    port = free_port()  # nothing listens: refused, plain and TLS
    for tls in (False, True):
        c, _ = run(exe, tmp_path, f"{'https' if tls else 'http'}://127.0.0.1:{port}/", tls, True, users=3, ms=300)
        assert c["http_resp"] == 0 and c["err_connect"] > 0 and c["err_tls"] == 0
