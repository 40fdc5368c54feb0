"""`perfkit serve`: the far end of every remote test, for any number of clients at once;
the protocol and the client are perfkit.engines.remote's."""
from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import selectors
import socket
import struct
import sys
import threading
import time

from perfkit.engines.remote import (DEFAULT_PORT, PROTOCOL, SERVER_ROLE, Control, ProtocolError, auth_mac,
                                    end_worker, parse_msg, printable, recv_msg, sctp_unavailable, send_msg,
                                    snapshot_out)
from perfkit.errors import EngineError
from perfkit.run import environment
from perfkit.kinds import RemoteTest
from perfkit.kinds.qperf import end_fields
from perfkit.spec import CONTROL_TIMEOUT_S, WAIT_SERVER_S, check_cpu_here, check_target
from perfkit.stats import COUNTER_NAMES


# Until a client has proved it may run tests it costs no thread: the accept loop reads its
# handshake, within a deadline and a size limit, among a bounded number of such connections.
HANDSHAKE_S = 5.0           # hello (and, with a token, auth) must arrive within this from connect
MAX_HANDSHAKES = 64         # connections still in their handshake; the oldest goes for a new one
MAX_HANDSHAKE_BYTES = 4096  # a hello or auth is far smaller
MAX_SESSIONS = 32           # clients past the handshake, each with its thread and perhaps a test
MAX_FAILURES, FAILURE_WINDOW_S = 10, 60.0   # wrong tokens from one address before it must wait


class _Handshake:
    """A connection in its handshake: what arrived so far, its deadline, its nonce."""
    __slots__ = ("sock", "peer", "buf", "deadline", "nonce")

    def __init__(self, sock, peer, deadline):
        self.sock, self.peer, self.buf, self.deadline, self.nonce = sock, peer, b"", deadline, None


class Server:
    """The far end of every test, for any number of clients at once.

    Bound to loopback by default. Listening anywhere else needs a shared token
    (token= or PERFKIT_TOKEN), proved by challenge-response; a client without it is refused.
    Strangers cannot starve it: handshakes are bounded in number, time and size and hold no
    thread, wrong tokens from one address are limited, clients past the handshake are capped."""

    def __init__(self, bind: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
                 once: bool = False, log=None, handshake_s: float = HANDSHAKE_S,
                 max_sessions: int = MAX_SESSIONS):
        try:
            ip = ipaddress.ip_address(bind)
        except ValueError:
            raise ValueError(f"bind: {bind!r} is not an IPv4 or IPv6 address") from None
        if not 0 <= int(port) <= 65535:
            raise ValueError(f"port: {port} is out of range 0..65535")
        token = token if token is not None else os.environ.get("PERFKIT_TOKEN") or None
        if not ip.is_loopback and not token:
            raise ValueError(f"token: listening on {ip} (not loopback) needs a shared token "
                             "(--token or PERFKIT_TOKEN)")
        self.bind, self.token, self.once = str(ip), token, once
        self.handshake_s, self.max_sessions = handshake_s, max_sessions
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._stop = threading.Event()
        self._sessions: list[threading.Thread] = []
        self._handshakes: dict[socket.socket, _Handshake] = {}
        self._failures: dict[str, list[float]] = {}
        self._crowded_logged = 0.0
        self._first: threading.Thread | None = None   # once: the first client past its handshake
        self._listener = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((self.bind, int(port)))
        except OSError as exc:
            self._listener.close()
            raise ValueError(f"port: cannot listen on {self.bind} port {port}: {exc.strerror or exc}") from None
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]

    def log(self, line: str) -> None:
        """One line of the server's log; whatever a client supplied in it is shown escaped."""
        self._log(printable(line, limit=1000))

    def stop(self) -> None:
        self._stop.set()

    def serve_forever(self) -> None:
        self.log(f"perfkit serve: listening on {self.bind} port {self.port}"
                 + (" (token required)" if self.token else ""))
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.2):
                    if key.fileobj is self._listener:
                        self._accept(sel)
                    else:
                        self._advance(sel, self._handshakes[key.fileobj])
                now = time.monotonic()
                for hs in [h for h in self._handshakes.values() if h.deadline < now]:
                    self._drop(sel, hs, f"no {'auth' if hs.nonce else 'hello'} within {self.handshake_s:g} s")
                self._sessions = [t for t in self._sessions if t.is_alive()]
                if self.once and self._first is not None:
                    self._first.join()
                    break
        finally:
            for hs in list(self._handshakes.values()):
                self._close(sel, hs)
            sel.close()
            self._listener.close()
            for t in self._sessions:
                t.join(timeout=CONTROL_TIMEOUT_S)

    # handshakes, in the accept loop
    def _accept(self, sel) -> None:
        while True:
            try:
                conn, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:   # out of descriptors or memory: the ones in handshake go first
                self.log(f"perfkit serve: accept: {exc.strerror or exc}")
                return
            if len(self._handshakes) >= MAX_HANDSHAKES:
                oldest = min(self._handshakes.values(), key=lambda h: h.deadline)
                self._close(sel, oldest)
                now = time.monotonic()
                if now - self._crowded_logged > 10:   # once in a while, not once a connection
                    self._crowded_logged = now
                    self.log(f"perfkit serve: {MAX_HANDSHAKES} connections in their handshake: "
                             "closing the oldest for each new one")
            conn.setblocking(False)
            hs = _Handshake(conn, peer, time.monotonic() + self.handshake_s)
            self._handshakes[conn] = hs
            sel.register(conn, selectors.EVENT_READ)

    def _advance(self, sel, hs: _Handshake) -> None:
        try:
            chunk = hs.sock.recv(MAX_HANDSHAKE_BYTES + 4 - len(hs.buf))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(sel, hs)
            return
        hs.buf += chunk
        if len(hs.buf) < 4:
            return
        (n,) = struct.unpack("!I", hs.buf[:4])
        if n > MAX_HANDSHAKE_BYTES:
            return self._drop(sel, hs, f"handshake message of {n} bytes is over the limit of "
                                       f"{MAX_HANDSHAKE_BYTES}", reply=True)
        if len(hs.buf) < 4 + n:
            return
        data, rest = hs.buf[4:4 + n], hs.buf[4 + n:]
        hs.buf = rest
        try:
            msg = parse_msg(data)
            if rest:
                raise ProtocolError("a message before the handshake's answer")
            if hs.nonce is None:
                if msg["op"] != "hello":
                    raise ProtocolError(f"expected hello, got {msg['op']}")
                if self.token:
                    hs.nonce = secrets.token_hex(16)
                    return self._send_nowait(hs, "challenge", nonce=hs.nonce)
            else:
                if msg["op"] != "auth":
                    raise ProtocolError(f"expected auth, got {msg['op']}")
                self._check_mac(hs, msg.get("mac"))
        except ProtocolError as exc:
            return self._drop(sel, hs, str(exc), reply=True)
        if len(self._sessions) >= self.max_sessions:
            return self._drop(sel, hs, f"busy: {len(self._sessions)} clients connected, the most it takes",
                              reply=True)
        sel.unregister(hs.sock)
        del self._handshakes[hs.sock]
        hs.sock.setblocking(True)
        t = threading.Thread(target=self._session, args=(hs.sock, hs.peer), daemon=True,
                             name=f"perfkit-serve-{hs.peer[0]}:{hs.peer[1]}")
        self._sessions.append(t)
        self._first = self._first or t
        t.start()

    def _check_mac(self, hs: _Handshake, mac) -> None:
        """The client's answer to our nonce; wrong ones are counted per address and limited."""
        now = time.monotonic()
        recent = [t for t in self._failures.get(hs.peer[0], []) if now - t < FAILURE_WINDOW_S]
        if len(recent) >= MAX_FAILURES:
            self._failures[hs.peer[0]] = recent
            raise ProtocolError(f"refused: {len(recent)} wrong tokens from {hs.peer[0]} in "
                                f"{FAILURE_WINDOW_S:g} s; try again in {FAILURE_WINDOW_S - (now - recent[0]):.0f} s")
        good = auth_mac(self.token, hs.nonce).encode()
        if not hmac.compare_digest(str(mac or "").encode("utf-8", "replace"), good):
            self._failures[hs.peer[0]] = recent + [now]
            raise ProtocolError("refused: wrong or missing token (--token or PERFKIT_TOKEN)")

    def _send_nowait(self, hs: _Handshake, op: str, **fields) -> None:
        """A small reply on a non-blocking socket: it fits the empty send buffer, or the peer is gone."""
        data = json.dumps({"v": PROTOCOL, "op": op, **fields}).encode()
        try:
            hs.sock.send(struct.pack("!I", len(data)) + data)
        except OSError:
            pass

    def _drop(self, sel, hs: _Handshake, why: str, reply: bool = False) -> None:
        self.log(f"perfkit serve: {hs.peer[0]}: {why}")
        if reply:
            self._send_nowait(hs, "error", error=why)
        self._close(sel, hs)

    def _close(self, sel, hs: _Handshake) -> None:
        self._handshakes.pop(hs.sock, None)
        try:
            sel.unregister(hs.sock)
        except (KeyError, ValueError):
            pass
        hs.sock.close()

    # one client
    def _session(self, conn: socket.socket, peer) -> None:
        """A client past its handshake, in a thread of its own: hello, then its tests."""
        conn.settimeout(CONTROL_TIMEOUT_S)
        engine = spec = None
        try:
            send_msg(conn, "hello", env=environment("socket"), counters=list(COUNTER_NAMES))
            local_ip = conn.getsockname()[0]
            while True:
                msg = recv_msg(conn)
                op = msg["op"]
                if op == "conf":
                    send_msg(conn, "conf", env=environment("socket"))
                elif op == "quit":
                    send_msg(conn, "bye")
                    self.log(f"perfkit serve: quit from {peer[0]}")
                    self._stop.set()
                    return
                elif op == "prepare" and engine is None:
                    engine, spec = self._prepare(msg, local_ip, peer[0])
                    conn.settimeout(spec.rem_timeout)   # the client's -rto, until it is done
                    cpu = spec.rem_cpu_affinity
                    # cpu, sock_buf, flip: what the worker got; a client that asked for them sees it was done
                    send_msg(conn, "ready", port=engine.bound_port(0), cpu=cpu, sock_buf=spec.rem_sock_buf_size,
                             flip=spec.flip, ip_port=spec.ip_port, access_recv=spec.access_recv,
                             timeout=spec.rem_timeout)
                    self.log(f"perfkit serve: {msg.get('test')}{' flipped' if spec.flip else ''} for {peer[0]} "
                             f"on port {engine.bound_port(0)}" + (f", CPU {cpu}" if cpu is not None else ""))
                elif op == "start" and engine is not None and spec.flip:   # flipped: the client is ready
                    engine.start()
                    send_msg(conn, "started")
                elif op == "running" and engine is not None:
                    send_msg(conn, "running", running=engine.running() > 0)
                elif op == "counters" and engine is not None:
                    send_msg(conn, "counters", workers=snapshot_out(engine.snapshot()))
                elif op == "set_rate" and engine is not None and engine.roles[0] == "udp_send":
                    rate = msg.get("rate")   # the engine refuses a value out of 0..1e10
                    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
                        raise ValueError(f"set_rate: {rate!r} is not a number of messages/s")
                    engine.set_rate(float(rate))
                    send_msg(conn, "rate_set")
                elif op == "stop" and engine is not None:
                    engine.stop()
                    send_msg(conn, "stopping")
                elif op == "finish" and engine is not None:
                    sent = msg.get("sent") or []
                    if engine.roles[0] == "udp_recv" and sent:
                        engine.set_remote_sent(0, [int(x) for x in sent])
                    engine.stop()
                    engine.join()
                    # flipped udp_bw: what this end sent per flow, for the client's loss count
                    sent = engine.flow_sent(0) if engine.roles[0] == "udp_send" else []
                    send_msg(conn, "result", workers=snapshot_out(engine.snapshot()), error=engine.error(),
                             sent=sent)
                    engine.close()
                    engine = None
                    conn.settimeout(CONTROL_TIMEOUT_S)
                else:
                    raise ProtocolError(f"unexpected {op!r} here")
        except ProtocolError as exc:
            self._refuse(conn, str(exc), peer)
        except (ValueError, TypeError, OverflowError, KeyError) as exc:  # bad fields in a message
            self._refuse(conn, str(exc), peer)
        except EngineError as exc:
            self._refuse(conn, f"engine: {exc}", peer)
        except ConnectionError as exc:  # the client left: normal between tests, not during one
            if engine is not None:
                self.log(f"perfkit serve: {peer[0]}: {exc} during a test")
        except (socket.timeout, OSError) as exc:
            self.log(f"perfkit serve: {peer[0]}: {exc}")
        finally:
            if engine is not None:
                engine.stop()
                engine.close()
            conn.close()

    def _refuse(self, conn, why: str, peer) -> None:
        self.log(f"perfkit serve: {peer[0]}: {why}")
        try:
            send_msg(conn, "error", error=why)
        except OSError:
            pass

    def _prepare(self, msg: dict, local_ip: str, peer_ip: str):
        """This end's engine, started, or, flipped, made and left for the client's start."""
        from perfkit._sock import SockEngine  # the native engine may be missing from a broken build
        # the same validation as the client's, on what arrived
        spec = RemoteTest(host="127.0.0.1", test=msg.get("test", ""), size=msg.get("size"),
                          flows=msg.get("flows", 1), duration=msg.get("duration", 10),
                          batch=msg.get("batch", 32), gso=msg.get("gso", 0),
                          busy_poll=msg.get("busy_poll"),
                          rem_cpu_affinity=msg.get("cpu"), rem_sock_buf_size=msg.get("sock_buf"),
                          flip=msg.get("flip", False), rate=msg.get("rate"), messages=msg.get("messages"),
                          ip_port=msg.get("ip_port", 0), access_recv=msg.get("access_recv", False),
                          rem_timeout=msg.get("timeout", CONTROL_TIMEOUT_S))
        cpu = check_cpu_here(spec.rem_cpu_affinity, "rem_cpu_affinity")
        if SERVER_ROLE[spec.test][1] == "sctp" and (why := sctp_unavailable()):
            raise ValueError(f"test: {spec.test} cannot run on the server: {why}")
        remote, port = None, spec.ip_port
        if spec.flip and spec.test.startswith("udp"):
            # datagrams go to the client's address on the control connection, nowhere else
            remote, port = (check_target(peer_ip, "client"), _int_field(msg, "port")), 0
        engine = SockEngine([end_worker(end_fields(spec), spec.flip, local_ip, cpu, spec.rem_sock_buf_size,
                                        spec.polls(not spec.flip, cpu, local_ip), remote, port)])
        if not spec.flip:
            engine.start()
        return engine, spec


def _int_field(msg: dict, name: str) -> int:
    v = msg.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 65536:
        raise ValueError(f"{name}: {v!r} is not a port number")
    return v


def serve(bind: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
          once: bool = False) -> None:
    """Run a server until quit (or, with once, until its first client is done)."""
    Server(bind, port, token, once).serve_forever()


def conf(host: str, port: int = DEFAULT_PORT, token: str | None = None,
         wait_server: float = WAIT_SERVER_S, timeout: float = CONTROL_TIMEOUT_S) -> dict:
    """{"local": env, "remote": env}: host, CPU, OS, kernel, perfkit version of both ends."""
    ctl = Control(host, port, token, wait_server, timeout)
    try:
        return {"local": environment("socket"), "remote": ctl.request("conf")["env"]}
    finally:
        ctl.close()
