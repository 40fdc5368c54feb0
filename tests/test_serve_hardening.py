"""perfkit serve against strangers: idle and dripping connections, guessed, replayed and
non-ASCII tokens, deeply nested JSON, escape sequences for its log, a crowded or taken
port. A legitimate client must still get its test; the server's log stays one line per event."""
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import perfkit
from perfkit import RemoteTest
from perfkit.engines.remote import PROTOCOL, Control, auth_mac, recv_msg, send_msg
from perfkit.server import MAX_FAILURES, MAX_HANDSHAKES
from _sock_tests import serving


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _legit(port: int, token: str | None = None) -> dict:
    return perfkit.run(RemoteTest(test="tcp_lat", port=port, token=token, duration=0.3)).summary


def _raw_send(sock: socket.socket, body: bytes) -> None:
    sock.sendall(struct.pack("!I", len(body)) + body)


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_idle_and_dripping_strangers_cost_no_thread_and_do_not_starve_a_client():
    """200 silent connections and 20 that send a hello a byte every 0.3 s: the server holds no thread
    for them, drops each at its handshake deadline, and a legitimate test runs meanwhile."""
    with serving(handshake_s=1.5) as srv:
        threads_before = threading.active_count()
        idle = [_connect(srv.port) for _ in range(200)]
        drip = [_connect(srv.port) for _ in range(20)]
        stop = threading.Event()

        hello = json.dumps({"v": PROTOCOL, "op": "hello", "pad": "x" * 40}).encode()
        hello = struct.pack("!I", len(hello)) + hello   # a real hello, a byte at a time: 17 s of it

        def dripper():
            deadline = time.monotonic() + 6   # bounded, whatever happens
            k = 0
            while not stop.is_set() and time.monotonic() < deadline:
                for s in drip:
                    try:
                        s.send(hello[k:k + 1])
                    except OSError:
                        pass
                k += 1
                time.sleep(0.3)
        t = threading.Thread(target=dripper, daemon=True)
        t.start()
        try:
            time.sleep(0.5)
            assert threading.active_count() <= threads_before + 1   # the dripper; none for strangers
            assert _legit(srv.port)["lat_count"] > 0
            # every dripper is dropped at its deadline though it keeps sending
            assert all(_closed_by_peer(s, 4) for s in drip)
        finally:
            stop.set()
            t.join(timeout=10)
            for s in idle + drip:
                s.close()
        assert any(f"no hello within 1.5 s" in ln for ln in srv.lines), srv.lines[-3:]
        # more than MAX_HANDSHAKES silent ones: the oldest went, said once, not once each
        assert sum("connections in their handshake" in ln for ln in srv.lines) == 1


def _pids_cgroup(limit: int):
    root = Path("/sys/fs/cgroup/pids")
    if os.geteuid() != 0 or not (root / "cgroup.procs").exists():
        return None
    cg = root / f"perfkit-test-{os.getpid()}"
    cg.mkdir(exist_ok=True)
    (cg / "pids.max").write_text(str(limit))
    return cg


@pytest.mark.root
def test_under_a_pids_limit_500_strangers_leave_room_for_a_client(tmp_path):
    """The server in a pids cgroup of 100 (threads count): 500 idle and 50 dripping
    connections, then a real `perfkit test` gets its test."""
    cg = _pids_cgroup(100)
    if cg is None:
        pytest.skip("needs root and the cgroup v1 pids controller at /sys/fs/cgroup/pids")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    srv = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "serve", "--port", str(port)],
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    socks = []
    try:
        (cg / "cgroup.procs").write_text(str(srv.pid))
        deadline = time.monotonic() + 30
        while True:
            try:
                _connect(port).close()
                break
            except OSError:
                assert time.monotonic() < deadline and srv.poll() is None, "the server never listened"
                time.sleep(0.1)
        for i in range(550):
            s = _connect(port)
            if i >= 500:
                s.send(b"\x00")
            socks.append(s)
        out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "test", "127.0.0.1", "tcp_lat",
                              "--port", str(port), "-t", "0.5", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout.splitlines()[-1])["summary"]["lat_count"] > 0
        assert srv.poll() is None, "the server died"
        assert int((cg / "pids.current").read_text()) < 100
    finally:
        for s in socks:
            s.close()
        srv.kill()
        srv.wait(timeout=10)
        cg.rmdir()


def _challenge(port: int) -> tuple[socket.socket, str]:
    s = _connect(port)
    send_msg(s, "hello")
    reply = recv_msg(s)
    assert reply["op"] == "challenge", reply
    return s, reply["nonce"]


def test_the_token_never_crosses_and_an_exchange_cannot_be_replayed():
    with serving(token="s3cret") as srv:
        s, nonce = _challenge(srv.port)
        mac = auth_mac("s3cret", nonce)
        assert "s3cret" not in mac
        send_msg(s, "auth", mac=mac)
        assert recv_msg(s)["op"] == "hello"
        s.close()
        s, nonce2 = _challenge(srv.port)   # replayed: a new nonce, the old answer
        assert nonce2 != nonce
        send_msg(s, "auth", mac=mac)
        assert recv_msg(s)["error"] == "refused: wrong or missing token (--token or PERFKIT_TOKEN)"
        s.close()
        assert _legit(srv.port, "s3cret")["lat_count"] > 0


def test_guessing_is_limited_per_address():
    with serving(token="s3cret") as srv:
        answers = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and len(answers) < 200:
            s, _ = _challenge(srv.port)
            send_msg(s, "auth", mac=f"guess{len(answers)}")
            answers.append(recv_msg(s)["error"])
            s.close()
        assert answers.count("refused: wrong or missing token (--token or PERFKIT_TOKEN)") == MAX_FAILURES
        assert f"{MAX_FAILURES} wrong tokens from 127.0.0.1 in 60 s" in answers[-1]
        with pytest.raises(perfkit.EngineError, match="wrong tokens from 127.0.0.1"):
            Control("127.0.0.1", srv.port, token="s3cret")   # the right one waits too: no oracle


def test_a_non_ascii_token_works():
    token = "pässwörd-✓-鍵"
    with serving(token=token) as srv:
        assert _legit(srv.port, token)["lat_count"] > 0
        with pytest.raises(perfkit.EngineError, match="wrong or missing token"):
            Control("127.0.0.1", srv.port, token="passwort")


def test_deeply_nested_json_is_one_clear_error_on_either_end():
    with serving() as srv:
        with _connect(srv.port) as s:   # in the handshake
            _raw_send(s, b'{"v": %d, "op": "hello", "x": ' % PROTOCOL + b"[" * 1000 + b"]" * 1000 + b"}")
            assert recv_msg(s)["error"] == "message is nested deeper than 16"
        with _connect(srv.port) as s:   # after it, within the size limit
            send_msg(s, "hello")
            assert recv_msg(s)["op"] == "hello"
            _raw_send(s, b'{"v": %d, "op": "conf", "x": ' % PROTOCOL + b"[" * 200_000 + b"]" * 200_000 + b"}")
            assert recv_msg(s)["error"] == "message is nested deeper than 16"
        assert _legit(srv.port)["lat_count"] > 0
    # a hostile server: the client refuses it in one line
    listener = socket.create_server(("127.0.0.1", 0))

    def hostile():
        conn, _ = listener.accept()
        with conn:
            recv_msg(conn)
            _raw_send(conn, b'{"v": %d, "op": "hello", "env": ' % PROTOCOL + b"[" * 100_000 + b"]" * 100_000 + b"}")
            time.sleep(0.5)
    t = threading.Thread(target=hostile, daemon=True)
    t.start()
    with pytest.raises(perfkit.EngineError, match="^control connection: message is nested deeper than 16$"):
        Control("127.0.0.1", listener.getsockname()[1])
    t.join(timeout=5)
    listener.close()


def test_the_log_shows_what_strangers_send_escaped():
    with serving() as srv:
        with _connect(srv.port) as s:
            _raw_send(s, json.dumps({"v": PROTOCOL, "op": "\x1b[2J\nperfkit serve: quit from 10.0.0.1"}).encode())
            recv_msg(s)
        line = srv.lines[-1]
        assert "\x1b" not in line and "\n" not in line
        assert line.endswith("expected hello, got \\x1b[2J\\nperfkit serve: quit from 10.0.0.1"), line


def test_clients_past_the_handshake_are_capped():
    with serving(max_sessions=2) as srv:
        held = [Control("127.0.0.1", srv.port) for _ in range(2)]
        try:
            with pytest.raises(perfkit.EngineError, match=r"^server: busy: 2 clients connected, the most it takes$"):
                Control("127.0.0.1", srv.port)
        finally:
            for c in held:
                c.close()
        deadline = time.monotonic() + 10   # their threads end when they leave; then there is room
        while True:
            try:
                Control("127.0.0.1", srv.port).close()
                break
            except perfkit.EngineError:
                assert time.monotonic() < deadline
                time.sleep(0.2)


def test_serve_on_a_port_in_use_is_one_line():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-P", "-m", "perfkit", "serve", "--port", str(port)],
                             capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert out.stderr == f"perfkit: port: cannot listen on 127.0.0.1 port {port}: Address already in use\n"


@pytest.mark.parametrize("test", ["udp_bw", "udp_lat"])
def test_a_udp_test_whose_server_dies_ends_at_once_with_its_counts(test):
    """The server is killed a second into a 20 s test: the run ends within two seconds,
    says the server went, and keeps what it measured."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    srv = subprocess.Popen([sys.executable, "-P", "-m", "perfkit", "serve", "--port", str(port)],
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        run = perfkit.Run(RemoteTest(test=test, port=port, rate="20kpps", duration=20, wait_server=30),
                          interval=0.5).start()
        deadline = time.monotonic() + 30
        while not run.rows:
            assert time.monotonic() < deadline and not run.done, run.error
            time.sleep(0.05)
        srv.kill()
        killed = time.monotonic()
        with pytest.raises(perfkit.EngineError, match="the server closed the control connection during the test"):
            run.wait(timeout=10)
        assert run.done and time.monotonic() - killed < 2.5
    finally:
        srv.kill()
        srv.wait(timeout=10)
    # what was measured before the kill is kept (a starved udp_lat may have done only a few thousand)
    assert run.summary["pkts_tx"] >= run.rows[0]["pkts_tx"] > 0, (run.summary, run.rows[0])
