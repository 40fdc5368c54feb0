"""nginx started by a test: its own config, log and port in a temp dir, on loopback
(or an address given), optionally with TLS (a certificate the caller made).
Used by the HTTP tests; the log format names every field a test reads."""
import os
import signal
import socket
import subprocess
import time

import pytest

needs_nginx = pytest.mark.nginx   # conftest.py skips it where nginx is not installed

CONF = """
worker_processes 1;
error_log {d}/error.log;
pid {d}/nginx.pid;
worker_rlimit_nofile 16000;
events {{ worker_connections 12000; }}
http {{
    log_format pk '$request_method $uri $status $content_length $http_x_perfkit $https $remote_addr $body_bytes_sent';
    access_log {d}/access.log pk;
    client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
    uwsgi_temp_path {d}; scgi_temp_path {d};
    keepalive_requests 1000000;
    server {{
        listen {host}:{port}{tls};
        {cert}
        location / {{ return 200 "hello from nginx\\n"; }}
    }}
}}
"""


def free_port(host="127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Nginx:
    """with Nginx(tmp_path) as ngx: ngx.port, ngx.log_lines()"""

    def __init__(self, d, host="127.0.0.1", tls_cert=None, netns=None):
        self.d, self.host, self.netns = d, host, netns
        self.port = free_port() if netns is None else 8080
        cert = "" if not tls_cert else f"ssl_certificate {tls_cert[0]}; ssl_certificate_key {tls_cert[1]};"
        (d / "nginx.conf").write_text(CONF.format(d=d, host=host, port=self.port, tls=" ssl" if tls_cert else "",
                                                  cert=cert))
        self.proc = None

    def __enter__(self):
        cmd = ["nginx", "-c", str(self.d / "nginx.conf"), "-p", str(self.d), "-g", "daemon off;"]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, start_new_session=True)
        for _ in range(200):  # until it listens: the pid file is written once it does
            if (self.d / "nginx.pid").exists() and self._listening():
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx did not start: {self.proc.stderr.read().decode()}")
            time.sleep(0.05)
        self.base = self.lines_now()
        return self

    def _listening(self) -> bool:
        want = f":{self.port:04X} "
        path = "/proc/net/tcp6" if ":" in self.host else "/proc/net/tcp"
        if self.netns:
            out = subprocess.run(["ip", "netns", "exec", self.netns, "cat", path], capture_output=True, text=True)
            text = out.stdout
        else:
            text = open(path).read()
        return any(want in ln and ln.split()[3] == "0A" for ln in text.splitlines()[1:])

    def lines_now(self) -> int:
        p = self.d / "access.log"
        return p.read_text().count("\n") if p.exists() else 0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGQUIT)  # graceful: the log is complete
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def __exit__(self, *exc):
        self.stop()

    def log(self) -> list[list[str]]:
        """Access-log lines since start, split: method uri status content_length x_perfkit https remote_addr
        body_bytes_sent."""
        return [ln.split(" ") for ln in (self.d / "access.log").read_text().splitlines()[self.base:]]
