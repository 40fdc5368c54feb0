"""HTTPS in the HTTP client (the system OpenSSL): against nginx with a self-signed
certificate made here, keep-alive and a connection per request, counts equal to
nginx's access log; failed handshakes are counted, not hung on."""
import collections
import socket
import subprocess
import threading
import time

import pytest

import perfkit
from perfkit.spec import HttpLoad

from _nginx import Nginx, needs_nginx  # noqa: E402

pytestmark = pytest.mark.tls


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=perfkit-test", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem")], check=True, capture_output=True, timeout=60)
    return str(d / "cert.pem"), str(d / "key.pem")


def test_spec_takes_https():
    s = HttpLoad(url=["https://127.0.0.1/a", "https://127.0.0.1/b"])
    assert s.tls and s.target() == ("127.0.0.1", 443) and b"Host: 127.0.0.1\r\n" in s.request_bytes()
    assert b"Host: 127.0.0.1:8443\r\n" in HttpLoad(url="https://127.0.0.1:8443/").request_bytes()
    assert not HttpLoad(url="http://127.0.0.1/").tls
    with pytest.raises(ValueError, match="same scheme"):
        HttpLoad(url=["https://127.0.0.1:8443/", "http://127.0.0.1:8443/"])


@needs_nginx
@pytest.mark.parametrize("keepalive", [True, False])
def test_https_counts_equal_nginx_access_log(tmp_path, cert, keepalive):
    paths = ["/x", "/y"]
    with Nginx(tmp_path, tls_cert=cert) as ngx:
        urls = [f"https://127.0.0.1:{ngx.port}{p}" for p in paths]
        run = perfkit.run(HttpLoad(url=urls, users=6, duration=1, keepalive=keepalive,
                                   headers={"X-Perfkit": "tls"}))
    s, log = run.summary, ngx.log()
    assert run.error is None, run.error
    assert s["responses"] > 50 and s["http_err"] == 0 and s["err_tls"] == 0 and s["http_2xx"] == s["responses"]
    assert s["bytes_rx"] >= s["responses"] * len("hello from nginx\n")
    assert {(x, https) for _, _, _, _, x, https, *_ in log} == {("tls", "on")}  # nginx saw them over TLS
    logged = collections.Counter(uri for _, uri, *_ in log)
    per = {u["url"]: u["requests"] for u in s["per_url"]}
    assert [logged[p] for p in paths] == [per[u] for u in urls]
    if keepalive:
        assert s["sock_open"] == 6
    else:  # a handshake per request
        assert s["sock_open"] >= s["responses"]
    assert s["lat_count"] == s["responses"] and s["lat_p50_us"] > 0


@needs_nginx
def test_https_open_loop_holds_its_rate(tmp_path, cert):
    with Nginx(tmp_path, tls_cert=cert) as ngx:
        s = perfkit.run(HttpLoad(url=f"https://127.0.0.1:{ngx.port}/", users=20, duration=2, rate=500)).summary
    assert s["requests"] == pytest.approx(1000, rel=0.02) and s["err_tls"] == 0 and s["http_err"] == 0


@needs_nginx
def test_tls_to_a_plain_http_server_is_a_handshake_error(tmp_path):
    with Nginx(tmp_path) as ngx:  # plain HTTP: answers the ClientHello with a 400
        t0 = time.monotonic()
        s = perfkit.run(HttpLoad(url=f"https://127.0.0.1:{ngx.port}/", users=3, duration=0.5)).summary
    assert time.monotonic() - t0 < 10
    assert s["responses"] == 0 and s["err_tls"] > 0
    assert s["http_err"] == s["err_tls"] and s["err_connect"] == s["err_timeout"] == s["err_read"] == 0


def _listener(behaviour):
    """A TCP listener that closes each connection at once, or holds it silent."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    held, stop = [], threading.Event()

    def serve():
        ls.settimeout(0.1)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except OSError:
                continue
            (c.close if behaviour == "close" else lambda: held.append(c))()
    t = threading.Thread(target=serve, daemon=True)
    t.start()

    def done():
        stop.set()
        t.join()
        ls.close()
        for c in held:
            c.close()
    return ls.getsockname()[1], done


def test_a_peer_that_hangs_up_in_the_handshake_is_a_tls_error():
    port, done = _listener("close")
    try:
        s = perfkit.run(HttpLoad(url=f"https://127.0.0.1:{port}/", users=2, duration=0.5)).summary
    finally:
        done()
    assert s["responses"] == 0 and s["err_tls"] > 0 and s["err_timeout"] == 0


def test_a_silent_peer_times_the_handshake_out():
    port, done = _listener("hold")
    try:
        t0 = time.monotonic()
        s = perfkit.run(HttpLoad(url=f"https://127.0.0.1:{port}/", users=2, duration=1,
                                 connect_timeout="200ms")).summary
        assert time.monotonic() - t0 < 10
    finally:
        done()
    assert s["responses"] == 0 and s["err_timeout"] >= 2 and s["err_tls"] == 0
