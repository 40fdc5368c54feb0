"""HTTP load on kernel sockets: perfkit's client against perfkit's own server, nginx,
and small Python servers that answer 500s or stall. Loopback only."""
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import perfkit
from perfkit._sock import SockEngine
from perfkit.kinds.http import http_workers
from perfkit.report import summary_text
from perfkit.spec import HttpLoad, HttpServe
from perfkit.stats import INDEX


@pytest.fixture
def perfkit_server():
    """perfkit's own server in this process; yields its port and a counters() reader."""
    eng = SockEngine(http_workers(HttpServe(port=0, size=200, duration=60)))
    eng.start()
    port = eng.bound_port(0)
    yield port, lambda: {k: eng.snapshot()[0][0][i] for k, i in INDEX.items()}
    eng.stop()
    eng.join()
    eng.close()


@pytest.mark.parametrize("keepalive", [True, False])
def test_client_and_server_counts_agree(perfkit_server, keepalive):
    port, server = perfkit_server
    run = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{port}/x", users=20, duration=1, keepalive=keepalive))
    s, srv = run.summary, server()
    assert run.error is None
    assert s["responses"] > 500 and s["http_2xx"] == s["responses"]
    assert s["http_err"] == 0 and s["err_connect"] == s["err_timeout"] == s["err_read"] == 0
    # the requests out at the end were answered before the client closed: every one counted
    assert s["responses"] == srv["http_req"] == s["requests"] and s["http_cut"] == 0
    assert s["bytes_rx"] >= s["responses"] * 200
    if keepalive:
        assert s["sock_open"] == 20
    else:
        assert s["sock_open"] >= s["responses"]
    assert s["lat_count"] == s["responses"] and s["lat_p50_us"] > 0
    # an HTTP run's frame has the HTTP and socket columns, and no TCP-state or sequence ones
    cols = set(run.frame.columns)
    assert {"http_req", "http_resp_per_s", "http_2xx", "err_connect", "http_cut", "sock_open", "sock_current",
            "pkts_tx", "lat_count"} <= cols
    assert not [c for c in cols if c.startswith(("syn_", "seq_", "nic_", "probe_"))]
    assert run.frame["http_resp"][-1] == s["responses"]


def test_open_loop_holds_its_rate(perfkit_server):
    port, _ = perfkit_server
    s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{port}/", users=20, duration=2, rate=1000)).summary
    assert s["requests"] == pytest.approx(2000, rel=0.02)
    assert s["tps"] == pytest.approx(1000, rel=0.02)


class _Every4th500(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:
            type(self).count += 1
            status = 500 if self.count % 4 == 0 else 200
        body = b"ok"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_error_rate_is_what_the_server_answers():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Every4th500)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{srv.server_port}/", users=4, duration=2)).summary
    finally:
        srv.shutdown()
    answered = _Every4th500.count
    assert s["responses"] > 40
    assert s["http_5xx"] + s["http_2xx"] == s["responses"]
    # exactly the server's share: the requests out at the end were answered too
    assert s["responses"] == s["requests"] == answered and s["http_5xx"] == answered // 4
    assert s["error_rate_pct"] == pytest.approx(100 * s["http_err"] / s["requests"])
    assert s["http_err"] == s["http_5xx"]


class _Slow(http.server.BaseHTTPRequestHandler):
    """Answers each request after `delay` seconds; counts what it answered."""
    protocol_version = "HTTP/1.1"
    delay = 0.3
    answered = 0
    lock = threading.Lock()

    def do_GET(self):
        time.sleep(self.delay)
        body = b"late"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        with self.lock:
            type(self).answered += 1

    def log_message(self, *a):
        pass


@pytest.fixture
def slow_server():
    _Slow.answered = 0
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_port
    srv.shutdown()
    srv.server_close()


def test_requests_out_at_the_end_get_their_answers(slow_server):
    # 4 users, answers after 0.3 s, 0.5 s of load: the second round goes out at 0.3 s
    # and is answered at 0.6 s, after the end; the run waits for it
    t0 = time.monotonic()
    s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{slow_server}/", users=4, duration=0.5)).summary
    took = time.monotonic() - t0
    assert s["requests"] == s["responses"] == _Slow.answered == 8, s
    assert s["http_cut"] == 0 and s["http_err"] == 0 and took < 5


def test_a_stop_cuts_off_the_requests_out_and_counts_them(slow_server):
    _Slow.delay = 2.0
    try:
        run = perfkit.Run(HttpLoad(url=f"http://127.0.0.1:{slow_server}/", users=4, duration=10)).start()
        time.sleep(0.5)
        t0 = time.monotonic()
        run.stop()
        assert run.wait(5) and time.monotonic() - t0 < 2  # a stop does not wait for answers
    finally:
        _Slow.delay = 0.3
    s = run.summary
    assert s["requests"] == s["http_cut"] == 4 and s["responses"] == 0 and s["http_err"] == 0
    assert "cut off by the stop 4" in summary_text(s)


def test_a_stalled_server_gives_timeouts_not_a_hang():
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)  # accepts (the kernel does) and never answers
    try:
        t0 = time.monotonic()
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{lsock.getsockname()[1]}/", users=5, duration=1.5,
                                 response_timeout="300ms")).summary
        assert time.monotonic() - t0 < 10
    finally:
        lsock.close()
    assert s["responses"] == 0
    assert s["err_timeout"] >= 5 and s["http_err"] >= s["err_timeout"]


def test_refused_connections_are_connect_errors():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{port}/", users=3, duration=0.5)).summary
    assert s["responses"] == 0 and s["err_connect"] > 0


def test_many_users_at_once(perfkit_server):
    port, server = perfkit_server
    s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{port}/", users=2000, duration=2, ramp="500ms")).summary
    assert s["sock_open"] == 2000 and s["http_err"] == 0 and s["responses"] > 2000
    assert server()["sock_open"] >= 2000


NGINX_CONF = """
worker_processes 1;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "hello from nginx\\n"; }}
    }}
}}
"""


@pytest.mark.nginx
@pytest.mark.parametrize("keepalive", [True, False])
def test_counts_equal_nginx_access_log(tmp_path, keepalive):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "nginx.conf").write_text(NGINX_CONF.format(d=tmp_path, port=port))
    ngx = subprocess.Popen(["nginx", "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path), "-g", "daemon off;"],
                           stderr=subprocess.PIPE, start_new_session=True)
    try:
        for _ in range(100):  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        before = (tmp_path / "access.log").read_text().count("\n")  # the probe's none; tolerate it
        s = perfkit.run(HttpLoad(url=f"http://127.0.0.1:{port}/", users=10, duration=1, keepalive=keepalive)).summary
    finally:
        os.killpg(ngx.pid, signal.SIGQUIT)  # graceful: the log is complete
        ngx.wait(timeout=20)
    lines = (tmp_path / "access.log").read_text().splitlines()[before:]
    ok = [ln for ln in lines if '" 200 ' in ln]
    assert s["responses"] > 100 and s["http_err"] == 0
    # nginx logged every request perfkit sent, and perfkit got every answer
    assert len(ok) == len(lines) == s["responses"] == s["requests"] and s["http_cut"] == 0


def test_cli_http_json_and_bad_url(perfkit_server):
    port, _ = perfkit_server
    out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", f"http://127.0.0.1:{port}/", "-u", "3",
                          "-t", "1", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.splitlines()[-1])["summary"]
    assert summary["tps"] > 0 and summary["vusers"] == 3 and summary["test"] == "http"
    for url, msg in [("ftp://127.0.0.1/", "not an http[s]://"), ("http://10.0.0.1/", "refused by the network guard"),
                     ("http://nosuch.invalid/", "does not resolve")]:
        bad = subprocess.run([sys.executable, "-P", "-m", "perfkit", "http", url], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and msg in bad.stderr


@pytest.mark.skipif(not shutil.which("prlimit"), reason="no prlimit (util-linux)")
def test_more_users_than_the_open_file_limit_says_how_to_raise_it(perfkit_server):
    port, _ = perfkit_server
    cmd = ["prlimit", "--nofile=300:300", sys.executable, "-P", "-m", "perfkit", "http", f"http://127.0.0.1:{port}/",
           "-t", "0.5", "--json", "-u"]
    bad = subprocess.run(cmd + ["1000"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "users: 1000 need" in bad.stderr and "at most 300" in bad.stderr and "ulimit -Hn" in bad.stderr
    fit = int(bad.stderr.split("at most ")[2].split(" fit")[0])
    assert 250 < fit < 300
    ok = subprocess.run(cmd + [str(fit)], capture_output=True, text=True, timeout=60)  # as many as it said fit
    assert ok.returncode == 0, ok.stderr
    s = json.loads(ok.stdout.splitlines()[-1])["summary"]
    assert s["sock_open"] == fit and s["http_err"] == 0


@pytest.mark.skipif(not shutil.which("prlimit"), reason="no prlimit (util-linux)")
def test_users_past_the_open_file_limit_split_over_processes(perfkit_server):
    """The refusal names how many processes would hold the users; with that many, each
    child under the same limit, every user connects and the counts add up in one run."""
    port, server = perfkit_server
    cmd = ["prlimit", "--nofile=300:300", sys.executable, "-P", "-m", "perfkit", "http", f"http://127.0.0.1:{port}/",
           "-t", "1.5", "--json", "-u", "1000"]
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--processes " in bad.stderr, bad.stderr
    procs = int(bad.stderr.split("--processes ")[1].split(")")[0])
    assert 1000 / 300 < procs <= 5
    before = server()["http_req"]
    ok = subprocess.run(cmd + ["--processes", str(procs), "--threads", "2"], capture_output=True, text=True,
                        timeout=90)
    assert ok.returncode == 0, ok.stderr
    lines = [json.loads(ln) for ln in ok.stdout.splitlines()]
    s = lines[-1]["summary"]
    assert len(s["cpu_pct_by_worker"]) == 2 * procs          # every child's threads are in the run
    assert s["sock_open"] == 1000 and s["http_err"] == 0 and s["err_connect"] == 0
    assert max(r["sock_current"] for r in lines[:-1] if "sock_current" in r) == 1000
    served = server()["http_req"] - before
    assert s["responses"] > 1000 and s["responses"] <= served <= s["requests"]


def test_a_child_process_that_dies_ends_the_run_with_its_error(perfkit_server):
    port, _ = perfkit_server
    run = perfkit.Run(HttpLoad(url=f"http://127.0.0.1:{port}/", users=20, duration=20, processes=2)).start()
    time.sleep(1.0)
    victim = run._handle.children[1].proc
    victim.kill()
    with pytest.raises(perfkit.EngineError, match="process 1: exited"):
        run.wait(timeout=15)
    assert run.done, "the run did not end after a child died"
    assert run.summary["responses"] > 0 and run.rows   # the other child's counts are kept
